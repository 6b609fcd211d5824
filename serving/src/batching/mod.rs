//! The batching actor: merges concurrent requests for one signature of one
//! model version into one session run — TensorFlow Serving's inter-request
//! batching (`BatchingSession` over a `BasicBatchScheduler`).
//!
//! ```text
//!  submit(inputs) ──► Task::new (0th-dimension size, sorted input keys)
//!        │             │ BatchQueue::enqueue(task, now)   [state lock]
//!        │             ▼
//!        │   open batch per input-key set ──full / timeout / misfit──► closed FIFO
//!        │                                                               │
//!        │          batch threads `actorflow-serve-batch-N`: take_batch(now)
//!        │                                                               ▼
//!        │          BatchProcessor::process: merge (concat on dim 0, pad) ─► runner.run
//!        ▼                                                               │
//!  oneshot reply ◄──────────────────── split outputs by rows (padding dropped)
//! ```
//!
//! # What it owns
//!
//! A [`Batcher`] owns `num_batch_threads` std threads, a `BatchQueue` (the
//! scheduling state machine: plain data, driven with explicit `now`s, so tests
//! drive it deterministically) and a `BatchProcessor` (merging, running and
//! splitting one batch, also thread-free). Requests wait on a
//! `tokio::sync::oneshot`, which needs no runtime: [`Batcher::new`] runs on plain
//! load threads and [`Batcher::submit`] under any executor.
//!
//! # Layout
//!
//! - this file: the [`Batcher`] API and its batch threads;
//! - `task`: one request (`Task`) and when two requests may share a batch;
//! - `queue`: `BatchQueue`, the scheduling state machine, and its
//!   `#[must_use]` transitions (`Enqueued`, `Take`);
//! - `process`: `BatchProcessor`, which merges a batch's inputs (padding
//!   them), runs it and splits its outputs;
//! - `tests`: the unit tests of all four.
//!
//! # Semantics (TensorFlow Serving's, with the choices made where it is silent)
//!
//! - A task's size is the 0th dimension of its inputs: every input has rank ≥ 1
//!   and the same 0th dimension, else `InvalidArgument` (`batching_util.h`'s
//!   messages). A task larger than `max_batch_size` is `InvalidArgument` ("Task
//!   size N is larger than maximum batch size M"); large tasks are not split.
//! - Tasks with different sets of input keys never share a batch (TensorFlow keys
//!   its schedulers by tensor signature). We keep **one open batch per sorted
//!   input-key set** but **one FIFO of closed batches and one bound** for all of
//!   them: batches run in the order they closed, and `max_enqueued_batches`
//!   bounds open plus closed batches of every key set together, so memory stays
//!   bounded however many key sets clients use. A signature's requests normally
//!   all send the same keys, and then this is exactly one TensorFlow queue.
//! - The open batch closes when it holds `max_batch_size` rows; when a task does
//!   not fit (the task then opens a new batch); or when a batch thread asks for
//!   work `batch_timeout` after the batch's first task arrived — with a zero
//!   timeout, as soon as a thread is free (`SharedBatchScheduler`'s
//!   `IsOpenBatchSchedulable`). Closed batches run first, oldest first; then the
//!   due open batch with the earliest deadline.
//! - A task that needs a new batch while `max_enqueued_batches` batches wait
//!   (open ones included, running ones not: TensorFlow's count) is refused at
//!   once with `UNAVAILABLE` "The batch scheduling queue to which this task was
//!   submitted is full".
//! - Inputs of one key must agree across a batch in dtype and rank, and —
//!   unless `pad_variable_length_inputs` — in every dimension past the 0th.
//!   TensorFlow finds a disagreement only when merging, and then fails the whole
//!   batch (`FAILED_PRECONDITION`); we check at enqueue against the open batch's
//!   first task and refuse only the task that does not match, with
//!   `InvalidArgument` and TensorFlow's message.
//! - Merging concatenates each input along dimension 0 in task order (POD dtypes
//!   byte-wise into one aligned buffer, strings and resource handles by
//!   reference count). With `pad_variable_length_inputs`, each input is first
//!   padded to the largest size of each dimension past the 0th, with the first
//!   element of that task's own tensor (`batching_util.cc`'s `PadTensor`); a task
//!   whose tensor is empty but needs padding is refused alone with TensorFlow's
//!   "Got empty tensor in batch of non-empty tensors.". With
//!   `allowed_batch_sizes`, the batch is padded up to the smallest allowed size
//!   ≥ its rows by repeating the first row of the last task
//!   (`MergeInputTensors`); a batch of zero rows is not padded (there is no row
//!   to repeat).
//! - Splitting: every output must have rank ≥ 1 and a 0th dimension equal to the
//!   padded batch size, else every task of the batch gets `Internal` with
//!   TensorFlow's message (TensorFlow says `FAILED_PRECONDITION`); each task gets
//!   its rows of every output, padding dropped. A runner error, or a panic, goes
//!   to every task of the batch.
//! - A task whose caller went away (its future was dropped) is left out when its
//!   batch is merged; a batch left with no caller does not run at all.
//! - Metrics: [`BatchMetrics::batch`]`(padded rows, padding rows)` per batch run,
//!   [`BatchMetrics::queue_depth`]`(tasks waiting)` whenever that changes.
//!
//! # Invariants
//!
//! 1. Every open batch holds at least one task and fewer than `max_batch_size`
//!    rows (a batch reaching it closes at once); all its tasks have its key set
//!    and agree per input as above with its first task.
//! 2. `open.len() + closed.len() <= max_enqueued_batches` (batches being run are
//!    not counted); `queued` is the number of tasks in them.
//! 3. A task leaves the queue only inside a batch handed to one batch thread,
//!    which answers it exactly once (or drops it unanswered only if that thread
//!    panics outside the runner; the caller then gets `Internal`).
//! 4. Once draining (the [`Batcher`] is dropped), nothing is accepted, every open
//!    batch is due at once, and a batch thread exits when it finds no batch.
//!
//! # Lock order
//!
//! One lock: `Shared::state` (the queue and the threads' exit flags), with two
//! condition variables on it — `work` (batch threads wait for a batch or a
//! deadline) and `exits` (the dropping thread waits for the batch threads). It is
//! never held while merging, running, splitting, answering, recording metrics
//! or joining, so a runner can never block a submitter.
//!
//! # Shutdown
//!
//! Dropping the [`Batcher`] drains the queue, wakes every thread and joins them
//! once they have run what was queued, waiting at most [`JOIN_TIMEOUT`]; a
//! thread still inside the runner after that is detached with a warning and
//! exits when its batch ends (it holds the runner until then).

mod process;
mod queue;
mod task;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use graph::{Result, Status, Tensor};
use tokio::sync::oneshot;

use crate::config::BatchingOptions;
use crate::metrics::BatchMetrics;

use self::process::BatchProcessor;
use self::queue::{BatchQueue, Enqueued, QueueOptions, Take};
use self::task::Task;

/// What a batcher runs: one signature of one session, on inputs by input key,
/// returning every output by output key. Blocking: the batcher calls it on its
/// own batch threads.
pub trait BatchRunner: Send + Sync + 'static {
    /// Runs one (merged) batch.
    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<BTreeMap<String, Tensor>>;
}

/// The outputs of a run, or a task's share of them, by output key.
type Outputs = BTreeMap<String, Tensor>;

/// The name of batch thread `N` is this prefix followed by `N`.
pub const BATCH_THREAD_NAME_PREFIX: &str = "actorflow-serve-batch-";

/// The longest a dropped [`Batcher`] waits for its threads to finish the batches
/// they run; see the module docs.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A batcher for one signature; see the module docs.
pub struct Batcher {
    shared: Arc<Shared>,
    /// Batch thread `i` (`None`: it could not be started, or was joined).
    threads: Vec<Option<JoinHandle<()>>>,
}

/// What the batch threads and the submitters share.
struct Shared {
    /// The queue and the exit flags: the only lock (see the module docs).
    state: Mutex<Guarded>,
    /// Batch threads wait here for a batch or a deadline.
    work: Condvar,
    /// A dropping [`Batcher`] waits here for its threads to exit.
    exits: Condvar,
    processor: BatchProcessor,
}

/// What `Shared::state` guards.
struct Guarded {
    queue: BatchQueue,
    /// `exited[i]`: batch thread `i` has left its loop (or never started).
    exited: Vec<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Guarded> {
        // Nothing panics while holding the lock; should it, the queue is still
        // consistent between two transitions.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record_depth(&self, depth: usize) {
        if let Some(m) = &self.processor.metrics {
            m.queue_depth(depth);
        }
    }
}

impl Batcher {
    /// A batcher running merged batches through `runner` on
    /// `options.num_batch_threads` threads of its own (no async runtime needed).
    pub fn new(
        options: BatchingOptions,
        runner: Arc<dyn BatchRunner>,
        metrics: Option<BatchMetrics>,
    ) -> Batcher {
        let n = options.num_batch_threads.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(Guarded {
                queue: BatchQueue::new(QueueOptions::from(&options)),
                exited: vec![false; n],
            }),
            work: Condvar::new(),
            exits: Condvar::new(),
            processor: BatchProcessor {
                runner,
                allowed_batch_sizes: options.allowed_batch_sizes.clone(),
                pad_variable_length_inputs: options.pad_variable_length_inputs,
                metrics,
                runs: AtomicU64::new(0),
            },
        });
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let s = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("{BATCH_THREAD_NAME_PREFIX}{i}"))
                .spawn(move || batch_thread(s, i));
            match spawned {
                Ok(h) => threads.push(Some(h)),
                Err(e) => {
                    tracing::error!("cannot start batch thread {i}: {e}");
                    shared.lock().exited[i] = true;
                    threads.push(None);
                }
            }
        }
        if threads.iter().all(Option::is_none) {
            // No thread would ever take a batch: refuse requests instead of
            // letting them wait forever.
            shared.lock().queue.drain();
        }
        Batcher { shared, threads }
    }

    /// Submits one request's inputs (by input key) and waits for its rows of
    /// every output. Refusals (`InvalidArgument`, `UNAVAILABLE`) come at once;
    /// see the module docs.
    pub async fn submit(&self, inputs: Vec<(String, Tensor)>) -> Result<Outputs> {
        let (reply, answer) = oneshot::channel();
        let task = Task::new(inputs, reply)?;
        let (enqueued, depth) = {
            let mut g = self.shared.lock();
            let r = g.queue.enqueue(task, Instant::now());
            (r, g.queue.queued())
        };
        self.shared.record_depth(depth);
        match enqueued? {
            Enqueued::Joined => {}
            Enqueued::Wake(n) => {
                for _ in 0..n {
                    self.shared.work.notify_one();
                }
            }
        }
        answer.await.unwrap_or_else(|_| {
            Err(Status::internal(
                "the batch holding this request ended without an answer",
            ))
        })
    }

    /// Batches run so far (calls of the runner).
    pub fn runs(&self) -> u64 {
        self.shared.processor.runs.load(Ordering::Relaxed)
    }

    /// Requests waiting in a batch that no thread has taken yet.
    pub fn queued(&self) -> usize {
        self.shared.lock().queue.queued()
    }

    /// Batches waiting (open and closed), which `max_enqueued_batches` bounds.
    pub fn enqueued_batches(&self) -> usize {
        self.shared.lock().queue.batches()
    }
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (queued, batches) = {
            let g = self.shared.lock();
            (g.queue.queued(), g.queue.batches())
        };
        f.debug_struct("Batcher")
            .field("threads", &self.threads.len())
            .field("runs", &self.runs())
            .field("queued", &queued)
            .field("enqueued_batches", &batches)
            .finish_non_exhaustive()
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        let deadline = Instant::now() + JOIN_TIMEOUT;
        // When a runner drops the last handle to its own batcher, the dropping
        // thread is one of ours: it cannot wait for (or join) itself, and exits
        // by itself once this returns and the queue is empty.
        let me = std::thread::current().id();
        let own = self
            .threads
            .iter()
            .position(|h| h.as_ref().is_some_and(|h| h.thread().id() == me));
        let mut g = self.shared.lock();
        g.queue.drain();
        self.shared.work.notify_all();
        while !g
            .exited
            .iter()
            .enumerate()
            .all(|(i, &e)| e || own == Some(i))
        {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g = match self.shared.exits.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        let exited = g.exited.clone();
        drop(g);
        for (i, slot) in self.threads.iter_mut().enumerate() {
            let Some(h) = slot.take() else { continue };
            if own == Some(i) {
                continue;
            }
            if exited.get(i).copied().unwrap_or(false) {
                // The thread has left its loop: joining takes microseconds.
                let _ = h.join();
            } else {
                tracing::warn!(
                    "batch thread {i} still runs a batch {JOIN_TIMEOUT:?} after its batcher \
                     was dropped; it is detached and exits when that batch ends"
                );
            }
        }
    }
}

/// Marks its batch thread exited when dropped, even by a panic.
struct ExitGuard {
    shared: Arc<Shared>,
    index: usize,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if let Some(e) = self.shared.lock().exited.get_mut(self.index) {
            *e = true;
        }
        self.shared.exits.notify_all();
    }
}

/// Batch thread `index`: takes batches and processes them until drained.
fn batch_thread(shared: Arc<Shared>, index: usize) {
    let guard = ExitGuard { shared, index };
    let shared = &*guard.shared;
    let mut g = shared.lock();
    loop {
        let now = Instant::now();
        match g.queue.take_batch(now) {
            Take::Run(tasks) => {
                let more = g.queue.has_batches();
                let depth = g.queue.queued();
                drop(g);
                if more {
                    // Another idle thread takes over the remaining batches or
                    // deadlines this one was watching.
                    shared.work.notify_one();
                }
                shared.record_depth(depth);
                let processed = catch_unwind(AssertUnwindSafe(|| shared.processor.process(tasks)));
                if processed.is_err() {
                    tracing::error!("batch thread {index}: a batch panicked outside the runner");
                }
                g = shared.lock();
            }
            Take::WaitUntil(deadline) => {
                let wait = deadline.saturating_duration_since(now);
                g = match shared.work.wait_timeout(g, wait) {
                    Ok((g, _)) => g,
                    Err(e) => e.into_inner().0,
                };
            }
            Take::Idle => g = shared.work.wait(g).unwrap_or_else(|e| e.into_inner()),
            Take::Exit => return,
        }
    }
}
