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

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use graph::tensor::buffer::AlignedBuffer;
use graph::tensor::oom_status;
use graph::{DType, ResourceHandle, Result, Status, Tensor, TensorShape};
use tokio::sync::oneshot;

use crate::config::BatchingOptions;
use crate::metrics::BatchMetrics;

/// What a batcher runs: one signature of one session, on inputs by input key,
/// returning every output by output key. Blocking: the batcher calls it on its
/// own batch threads.
pub trait BatchRunner: Send + Sync + 'static {
    /// Runs one (merged) batch.
    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<BTreeMap<String, Tensor>>;
}

/// The outputs of a run, or a task's share of them, by output key.
type Outputs = BTreeMap<String, Tensor>;

/// Where a task's answer goes.
type Reply = oneshot::Sender<Result<Outputs>>;

/// The name of batch thread `N` is this prefix followed by `N`.
pub const BATCH_THREAD_NAME_PREFIX: &str = "actorflow-serve-batch-";

/// The longest a dropped [`Batcher`] waits for its threads to finish the batches
/// they run; see the module docs.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

/// TensorFlow's message for a refused task when the queue is full.
const QUEUE_FULL: &str = "The batch scheduling queue to which this task was submitted is full";

// ---------------------------------------------------------------------------
// Batcher: the threads around the state machine.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Task: one request.
// ---------------------------------------------------------------------------

/// One request: its inputs sorted by key, its size and where its answer goes.
struct Task {
    /// Input keys, sorted and distinct.
    keys: Vec<String>,
    /// `inputs[i]` is the tensor of `keys[i]`.
    inputs: Vec<Tensor>,
    /// The 0th dimension of every input.
    rows: usize,
    reply: Reply,
}

impl Task {
    /// A task of `inputs`, or `InvalidArgument` (TensorFlow's
    /// `ComputeTensorBatchSize` messages) when they cannot be batched.
    fn new(mut inputs: Vec<(String, Tensor)>, reply: Reply) -> Result<Task> {
        if inputs.is_empty() {
            return Err(Status::invalid_argument(
                "Batching Run() must have at least one input tensor",
            ));
        }
        inputs.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = inputs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Status::invalid_argument(format!(
                "input '{}' is given more than once",
                w[0].0
            )));
        }
        let mut rows = None;
        for (_, t) in &inputs {
            let Some(&n) = t.dims().first() else {
                return Err(Status::invalid_argument(
                    "Batching Run() input tensors must have at least one dimension",
                ));
            };
            match rows {
                None => rows = Some(n),
                Some(r) if r != n => {
                    return Err(Status::invalid_argument(
                        "Batching Run() input tensors must have equal 0th-dimension size",
                    ))
                }
                Some(_) => {}
            }
        }
        let (keys, inputs) = inputs.into_iter().unzip();
        Ok(Task {
            keys,
            inputs,
            rows: rows.unwrap_or(0),
            reply,
        })
    }

    /// True when the caller no longer waits for the answer.
    fn is_cancelled(&self) -> bool {
        self.reply.is_closed()
    }

    /// Sends the answer; a caller that went away is no error.
    fn answer(self, r: Result<Outputs>) {
        let _ = self.reply.send(r);
    }
}

/// `InvalidArgument` unless `task` may share a batch whose first task is
/// `first` (same key set): per input, the same dtype and rank and — unless
/// `pad` — the same dimensions past the 0th.
fn check_compatible(first: &Task, task: &Task, pad: bool) -> Result<()> {
    for ((key, a), b) in first.keys.iter().zip(&first.inputs).zip(&task.inputs) {
        if a.dtype() != b.dtype() {
            return Err(Status::invalid_argument(format!(
                "Tensors with name '{key}' from different tasks have different dtypes ({} and {})",
                a.dtype(),
                b.dtype()
            )));
        }
        if a.rank() != b.rank() {
            return Err(Status::invalid_argument(format!(
                "Tensors with name '{key}' from different tasks have different ranks ({} and {})",
                a.rank(),
                b.rank()
            )));
        }
        if !pad && a.dims()[1..] != b.dims()[1..] {
            return Err(Status::invalid_argument(format!(
                "Tensors with name '{key}' from different tasks have different shapes and \
                 padding is turned off. Set pad_variable_length_inputs to true, or ensure that \
                 all tensors with the same name have equal dimensions starting with the first dim."
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// BatchQueue: the scheduling state machine.
// ---------------------------------------------------------------------------

/// The scheduling part of [`BatchingOptions`] (TensorFlow's `QueueOptions`).
#[derive(Clone, Debug)]
struct QueueOptions {
    max_batch_size: usize,
    batch_timeout: Duration,
    max_enqueued_batches: usize,
    pad_variable_length_inputs: bool,
}

impl From<&BatchingOptions> for QueueOptions {
    fn from(o: &BatchingOptions) -> QueueOptions {
        QueueOptions {
            max_batch_size: o.max_batch_size.max(1),
            batch_timeout: o.batch_timeout,
            max_enqueued_batches: o.max_enqueued_batches.max(1),
            pad_variable_length_inputs: o.pad_variable_length_inputs,
        }
    }
}

/// A batch still taking tasks.
struct OpenBatch {
    tasks: Vec<Task>,
    rows: usize,
    /// When it becomes due: its first task's arrival plus the timeout (`None`:
    /// a timeout too large to represent, i.e. never).
    deadline: Option<Instant>,
}

/// Whether the queue takes tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Taking tasks; open batches wait for their deadline.
    Running,
    /// Refusing tasks; every open batch is due (the batcher is being dropped).
    Draining,
}

/// What [`BatchQueue::enqueue`] did with an accepted task.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
enum Enqueued {
    /// It joined an open batch that stays open: no thread needs to look.
    Joined,
    /// `n` batches (1 or 2) closed or started their timeout: wake `n` threads.
    Wake(usize),
}

/// What a batch thread asking [`BatchQueue::take_batch`] should do.
#[must_use]
enum Take {
    /// Run this batch (its tasks in arrival order).
    Run(Vec<Task>),
    /// Nothing is due; ask again at this instant (or when woken).
    WaitUntil(Instant),
    /// Nothing is due and no deadline is pending; ask again when woken.
    Idle,
    /// Draining and empty: leave.
    Exit,
}

/// The scheduling state machine; see the module docs for its invariants.
struct BatchQueue {
    options: QueueOptions,
    phase: Phase,
    /// At most one per input-key set.
    open: Vec<OpenBatch>,
    /// Closed batches, in the order they closed.
    closed: VecDeque<Vec<Task>>,
    /// Tasks in `open` and `closed`.
    queued: usize,
}

impl BatchQueue {
    fn new(options: QueueOptions) -> BatchQueue {
        BatchQueue {
            options,
            phase: Phase::Running,
            open: Vec::new(),
            closed: VecDeque::new(),
            queued: 0,
        }
    }

    /// Tasks waiting in a batch no thread has taken.
    fn queued(&self) -> usize {
        self.queued
    }

    /// Batches waiting, open and closed.
    fn batches(&self) -> usize {
        self.open.len() + self.closed.len()
    }

    /// True while some batch waits.
    fn has_batches(&self) -> bool {
        self.batches() > 0
    }

    /// Stops taking tasks and makes every open batch due.
    fn drain(&mut self) {
        self.phase = Phase::Draining;
    }

    /// Adds `task`, arriving at `now`, to its key set's open batch, or refuses
    /// it (see the module docs).
    fn enqueue(&mut self, task: Task, now: Instant) -> Result<Enqueued> {
        if self.phase == Phase::Draining {
            return Err(Status::unavailable(
                "the batcher has stopped: no batch thread takes new requests",
            ));
        }
        let max = self.options.max_batch_size;
        if task.rows > max {
            return Err(Status::invalid_argument(format!(
                "Task size {} is larger than maximum batch size {max}",
                task.rows
            )));
        }
        let Some(i) = self.open.iter().position(|b| b.tasks[0].keys == task.keys) else {
            if self.batches() >= self.options.max_enqueued_batches {
                return Err(Status::unavailable(QUEUE_FULL));
            }
            self.open_batch(task, now);
            return Ok(Enqueued::Wake(1));
        };
        if self.open[i].rows + task.rows > max {
            // The task does not fit: it closes the open batch and opens the next.
            if self.batches() >= self.options.max_enqueued_batches {
                return Err(Status::unavailable(QUEUE_FULL));
            }
            let full = self.open.remove(i);
            self.closed.push_back(full.tasks);
            self.open_batch(task, now);
            return Ok(Enqueued::Wake(2));
        }
        check_compatible(
            &self.open[i].tasks[0],
            &task,
            self.options.pad_variable_length_inputs,
        )?;
        let b = &mut self.open[i];
        b.rows += task.rows;
        b.tasks.push(task);
        self.queued += 1;
        if b.rows < max {
            return Ok(Enqueued::Joined);
        }
        let full = self.open.remove(i);
        self.closed.push_back(full.tasks);
        Ok(Enqueued::Wake(1))
    }

    /// Starts a batch with `task` (closed at once when it is already full). The
    /// caller has checked the bound.
    fn open_batch(&mut self, task: Task, now: Instant) {
        self.queued += 1;
        if task.rows >= self.options.max_batch_size {
            self.closed.push_back(vec![task]);
            return;
        }
        self.open.push(OpenBatch {
            rows: task.rows,
            tasks: vec![task],
            deadline: now.checked_add(self.options.batch_timeout),
        });
    }

    /// The next batch to run at `now`: the oldest closed one, else the due open
    /// batch with the earliest deadline (closing it).
    fn take_batch(&mut self, now: Instant) -> Take {
        if let Some(tasks) = self.closed.pop_front() {
            self.queued -= tasks.len();
            return Take::Run(tasks);
        }
        let draining = self.phase == Phase::Draining;
        let due = self
            .open
            .iter()
            .enumerate()
            .filter(|(_, b)| draining || b.deadline.is_some_and(|d| d <= now))
            .min_by_key(|(_, b)| b.deadline)
            .map(|(i, _)| i);
        if let Some(i) = due {
            let b = self.open.remove(i);
            self.queued -= b.tasks.len();
            return Take::Run(b.tasks);
        }
        if let Some(d) = self.open.iter().filter_map(|b| b.deadline).min() {
            return Take::WaitUntil(d);
        }
        if draining && self.open.is_empty() {
            Take::Exit
        } else {
            Take::Idle
        }
    }
}

// ---------------------------------------------------------------------------
// BatchProcessor: merge, run, split.
// ---------------------------------------------------------------------------

/// Runs batches: merges their inputs, calls the runner, splits its outputs.
struct BatchProcessor {
    runner: Arc<dyn BatchRunner>,
    allowed_batch_sizes: Vec<usize>,
    pad_variable_length_inputs: bool,
    metrics: Option<BatchMetrics>,
    /// Runner calls so far.
    runs: AtomicU64,
}

impl BatchProcessor {
    /// Runs one batch and answers each of its tasks.
    fn process(&self, mut tasks: Vec<Task>) {
        tasks.retain(|t| !t.is_cancelled());
        let inner = loop {
            if tasks.is_empty() {
                return;
            }
            let inner = match self.inner_dims(&tasks) {
                Ok(d) => d,
                Err(e) => return fail_all(tasks, &e),
            };
            let (ok, refused): (Vec<Task>, Vec<Task>) =
                tasks.into_iter().partition(|t| can_pad(t, &inner));
            tasks = ok;
            if refused.is_empty() {
                break inner;
            }
            // Without them the largest sizes may shrink: compute them again.
            fail_all(
                refused,
                &Status::invalid_argument("Got empty tensor in batch of non-empty tensors."),
            );
        };
        let rows: usize = tasks.iter().map(|t| t.rows).sum();
        let padded = if rows == 0 {
            0
        } else {
            round_to_allowed(&self.allowed_batch_sizes, rows)
        };
        let inputs = match merge_inputs(&tasks, &inner, padded) {
            Ok(inputs) => inputs,
            Err(e) => return fail_all(tasks, &e),
        };
        if let Some(m) = &self.metrics {
            m.batch(padded, padded - rows);
        }
        self.runs.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(tasks = tasks.len(), rows, padded, "running a batch");
        let result =
            catch_unwind(AssertUnwindSafe(|| self.runner.run(inputs))).unwrap_or_else(|p| {
                Err(Status::internal(format!(
                    "the batch runner panicked: {}",
                    panic_message(p.as_ref())
                )))
            });
        match result.and_then(|outputs| split_outputs(outputs, &tasks, padded)) {
            Ok(shares) => {
                for (t, share) in tasks.into_iter().zip(shares) {
                    t.answer(Ok(share));
                }
            }
            Err(e) => fail_all(tasks, &e),
        }
    }

    /// Per input, the dimensions past the 0th of the merged tensor: the tasks'
    /// own (all equal) or, with variable-length padding, the largest of each.
    fn inner_dims(&self, tasks: &[Task]) -> Result<Vec<Vec<usize>>> {
        let first = &tasks[0];
        let mut inner: Vec<Vec<usize>> = first
            .inputs
            .iter()
            .map(|t| t.dims()[1..].to_vec())
            .collect();
        for t in &tasks[1..] {
            if t.keys != first.keys {
                return Err(Status::internal(
                    "One or more tasks does not conform to batch signature",
                ));
            }
            for (max, x) in inner.iter_mut().zip(&t.inputs) {
                let dims = &x.dims()[1..];
                if dims.len() != max.len() {
                    return Err(Status::internal("tasks of different ranks share a batch"));
                }
                if self.pad_variable_length_inputs {
                    for (m, &d) in max.iter_mut().zip(dims) {
                        *m = (*m).max(d);
                    }
                } else if dims != max.as_slice() {
                    return Err(Status::internal("tasks of different shapes share a batch"));
                }
            }
        }
        Ok(inner)
    }
}

/// Answers every task with `e`.
fn fail_all(tasks: Vec<Task>, e: &Status) {
    for t in tasks {
        t.answer(Err(e.clone()));
    }
}

/// False when one of `task`'s inputs must be padded to `inner` but has no
/// element to pad with.
fn can_pad(task: &Task, inner: &[Vec<usize>]) -> bool {
    task.inputs.iter().zip(inner).all(|(t, want)| {
        t.dims()[1..] == want[..] || task.rows == 0 || want.contains(&0) || t.num_elements() > 0
    })
}

/// The smallest allowed size ≥ `rows`; `rows` itself when none is (or none is
/// given), as TensorFlow's `RoundToLowestAllowedBatchSize`.
fn round_to_allowed(allowed: &[usize], rows: usize) -> usize {
    allowed.iter().copied().find(|&a| a >= rows).unwrap_or(rows)
}

/// The text of a panic's payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

/// The runner's inputs: per key, the tasks' tensors padded to `inner` and
/// concatenated along dimension 0, then padded to `padded` rows.
fn merge_inputs(
    tasks: &[Task],
    inner: &[Vec<usize>],
    padded: usize,
) -> Result<Vec<(String, Tensor)>> {
    let first = &tasks[0];
    let mut merged = Vec::with_capacity(first.keys.len());
    for (i, (key, want)) in first.keys.iter().zip(inner).enumerate() {
        let parts: Vec<&Tensor> = tasks.iter().map(|t| &t.inputs[i]).collect();
        let t = match parts.as_slice() {
            // One task, nothing to pad: its own tensor, no copy.
            [only] if only.dims()[0] == padded && only.dims()[1..] == want[..] => (*only).clone(),
            _ => concat_rows(&parts, want, padded)?,
        };
        merged.push((key.clone(), t));
    }
    Ok(merged)
}

/// `parts` (same dtype and rank) concatenated along dimension 0 into a tensor
/// of shape `[padded, inner...]` (see [`write_rows`]).
fn concat_rows(parts: &[&Tensor], inner: &[usize], padded: usize) -> Result<Tensor> {
    let dtype = parts
        .first()
        .map(|t| t.dtype())
        .ok_or_else(|| Status::internal("an empty batch was merged"))?;
    let mut dims = Vec::with_capacity(inner.len() + 1);
    dims.push(padded);
    dims.extend_from_slice(inner);
    let shape = TensorShape::new(&dims);
    let too_large = || oom_status(dtype, &shape, "the size overflows the address space");
    let total = shape.checked_num_elements().map_err(|_| too_large())?;
    let part_dims: Vec<&[usize]> = parts.iter().map(|t| t.dims()).collect();
    match dtype {
        DType::String => {
            let srcs: Vec<&[Bytes]> = parts
                .iter()
                .map(|t| t.as_strings())
                .collect::<Result<_>>()?;
            let mut out = try_vec(total, Bytes::new(), dtype, &shape)?;
            write_rows(&mut out, &srcs, &part_dims, inner, 1)?;
            Tensor::from_strings(&dims, out)
        }
        DType::Resource => {
            let srcs: Vec<&[ResourceHandle]> = parts
                .iter()
                .map(|t| t.as_resource_handles())
                .collect::<Result<_>>()?;
            let mut out = try_vec(total, ResourceHandle::default(), dtype, &shape)?;
            write_rows(&mut out, &srcs, &part_dims, inner, 1)?;
            Tensor::from_resource_handles(&dims, out)
        }
        _ => {
            let unit = dtype.size();
            let bytes = total.checked_mul(unit).ok_or_else(too_large)?;
            let mut buf =
                AlignedBuffer::try_zeroed(bytes).map_err(|e| oom_status(dtype, &shape, e))?;
            let srcs: Vec<&[u8]> = parts.iter().map(|t| t.as_bytes()).collect::<Result<_>>()?;
            let dst = buf.make_mut().map_err(|e| oom_status(dtype, &shape, e))?;
            write_rows(dst, &srcs, &part_dims, inner, unit)?;
            Tensor::from_buffer(dtype, &dims, buf)
        }
    }
}

/// A vector of `n` copies of `value`, or `ResourceExhausted`.
fn try_vec<E: Clone>(n: usize, value: E, dtype: DType, shape: &TensorShape) -> Result<Vec<E>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|e| oom_status(dtype, shape, e))?;
    v.resize(n, value);
    Ok(v)
}

/// Writes the parts' rows one after the other into `dst` (`[padded, inner...]`,
/// `unit` words per element: the element size for POD bytes, else 1), each part
/// padded to `inner` with its first element, then fills the rows past them with
/// the first row of the last part that has rows.
fn write_rows<E: Clone>(
    dst: &mut [E],
    srcs: &[&[E]],
    src_dims: &[&[usize]],
    inner: &[usize],
    unit: usize,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let row = inner
        .iter()
        .try_fold(unit, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Status::internal("batch row size overflows"))?;
    let mut off = 0;
    let mut pad_row = None;
    for (src, dims) in srcs.iter().zip(src_dims) {
        let rows = dims[0];
        let end = rows
            .checked_mul(row)
            .and_then(|n| n.checked_add(off))
            .filter(|&e| e <= dst.len())
            .ok_or_else(|| Status::internal("merged batch is smaller than its parts"))?;
        place(&mut dst[off..end], src, dims, inner, unit)?;
        if rows > 0 {
            pad_row = Some(off);
        }
        off = end;
    }
    if off < dst.len() {
        let start = pad_row.ok_or_else(|| Status::internal("no row to pad a batch with"))?;
        let (head, tail) = dst.split_at_mut(off);
        let src_row = &head[start..start + row];
        for r in tail.chunks_exact_mut(row) {
            r.clone_from_slice(src_row);
        }
    }
    Ok(())
}

/// Copies `src` (shape `src_dims`) into `dst` (shape `[src_dims[0], inner...]`),
/// filling what `src` does not cover with `src`'s first element.
fn place<E: Clone>(
    dst: &mut [E],
    src: &[E],
    src_dims: &[usize],
    inner: &[usize],
    unit: usize,
) -> Result<()> {
    if src_dims[1..] == *inner {
        if dst.len() != src.len() {
            return Err(Status::internal("a batch part does not match its size"));
        }
        dst.clone_from_slice(src);
        return Ok(());
    }
    if dst.is_empty() {
        return Ok(());
    }
    let pattern = src.get(..unit).ok_or_else(|| {
        Status::invalid_argument("Got empty tensor in batch of non-empty tensors.")
    })?;
    for e in dst.chunks_exact_mut(unit) {
        e.clone_from_slice(pattern);
    }
    // Dimensions in words: the innermost scaled by the element size.
    let mut s: Vec<usize> = src_dims.to_vec();
    let mut d: Vec<usize> = std::iter::once(src_dims[0])
        .chain(inner.iter().copied())
        .collect();
    if let (Some(a), Some(b)) = (s.last_mut(), d.last_mut()) {
        *a *= unit;
        *b *= unit;
    }
    let fits = s.len() == d.len()
        && s.iter().zip(&d).all(|(a, b)| a <= b)
        && s.iter().product::<usize>() == src.len()
        && d.iter().product::<usize>() == dst.len();
    if !fits {
        return Err(Status::internal(
            "a batch part does not fit its padded shape",
        ));
    }
    copy_box(dst, src, &s, &d);
    Ok(())
}

/// Copies the box `src` (dims `s`, row-major) into the corner of `dst` (dims `d`,
/// each ≥ `s`'s). [`place`] has checked the sizes.
fn copy_box<E: Clone>(dst: &mut [E], src: &[E], s: &[usize], d: &[usize]) {
    if s.len() == 1 {
        dst[..s[0]].clone_from_slice(&src[..s[0]]);
        return;
    }
    let (ss, ds): (usize, usize) = (s[1..].iter().product(), d[1..].iter().product());
    if ss == 0 {
        return;
    }
    for (i, chunk) in src.chunks_exact(ss).enumerate().take(s[0]) {
        copy_box(&mut dst[i * ds..(i + 1) * ds], chunk, &s[1..], &d[1..]);
    }
}

/// Each task's rows of every output, after checking every output has `padded`
/// rows (TensorFlow's `SplitOutputTensors` messages).
fn split_outputs(outputs: Outputs, tasks: &[Task], padded: usize) -> Result<Vec<Outputs>> {
    for t in outputs.values() {
        match t.dims().first() {
            None => return Err(Status::internal("Batched output tensor has 0 dimensions")),
            Some(&n) if n != padded => {
                return Err(Status::internal(
                    "Batched output tensor's 0th dimension does not equal the sum of the 0th \
                     dimension sizes of the input tensors",
                ))
            }
            Some(_) => {}
        }
    }
    if let [only] = tasks {
        if only.rows == padded {
            return Ok(vec![outputs]);
        }
    }
    let mut shares = Vec::with_capacity(tasks.len());
    let mut start = 0;
    for task in tasks {
        let mut share = Outputs::new();
        for (k, t) in &outputs {
            share.insert(k.clone(), slice_rows(t, start, task.rows)?);
        }
        shares.push(share);
        start += task.rows;
    }
    Ok(shares)
}

/// Rows `start..start + len` of `t` (rank ≥ 1, at least that many rows).
fn slice_rows(t: &Tensor, start: usize, len: usize) -> Result<Tensor> {
    let mut dims = t.dims().to_vec();
    dims[0] = len;
    let row = t.dims()[1..]
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Status::internal("output row size overflows"))?;
    let (a, b) = (start * row, (start + len) * row);
    match t.dtype() {
        DType::String => Tensor::from_strings(&dims, t.as_strings()?[a..b].to_vec()),
        DType::Resource => {
            Tensor::from_resource_handles(&dims, t.as_resource_handles()?[a..b].to_vec())
        }
        dtype => {
            let unit = dtype.size();
            Tensor::from_raw_bytes(dtype, &dims, &t.as_bytes()?[a * unit..b * unit])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::AtomicUsize;

    use crate::metrics::Metrics;
    use graph::Code;

    const HOUR: Duration = Duration::from_secs(3600);

    /// A runner from a closure.
    struct FnRunner<F>(F);

    impl<F> BatchRunner for FnRunner<F>
    where
        F: Fn(Vec<(String, Tensor)>) -> Result<Outputs> + Send + Sync + 'static,
    {
        fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Outputs> {
            (self.0)(inputs)
        }
    }

    fn runner<F>(f: F) -> Arc<dyn BatchRunner>
    where
        F: Fn(Vec<(String, Tensor)>) -> Result<Outputs> + Send + Sync + 'static,
    {
        Arc::new(FnRunner(f))
    }

    /// Returns its inputs as its outputs.
    fn identity() -> Arc<dyn BatchRunner> {
        runner(|inputs| Ok(inputs.into_iter().collect()))
    }

    fn options(
        max_batch_size: usize,
        timeout: Duration,
        max_enqueued: usize,
        threads: usize,
    ) -> BatchingOptions {
        BatchingOptions {
            max_batch_size,
            batch_timeout: timeout,
            max_enqueued_batches: max_enqueued,
            num_batch_threads: threads,
            allowed_batch_sizes: Vec::new(),
            pad_variable_length_inputs: false,
        }
    }

    fn queue(max_batch_size: usize, timeout: Duration, max_enqueued: usize) -> BatchQueue {
        BatchQueue::new(QueueOptions::from(&options(
            max_batch_size,
            timeout,
            max_enqueued,
            1,
        )))
    }

    /// `base, base + 1, …` in a float tensor of shape `dims`.
    fn iota(dims: &[usize], base: f32) -> Tensor {
        let n = dims.iter().product::<usize>();
        Tensor::new(dims, (0..n).map(|i| base + i as f32).collect()).unwrap()
    }

    fn task(inputs: Vec<(&str, Tensor)>) -> (Task, oneshot::Receiver<Result<Outputs>>) {
        let (tx, rx) = oneshot::channel();
        let inputs = inputs.into_iter().map(|(k, t)| (k.to_owned(), t)).collect();
        (Task::new(inputs, tx).unwrap(), rx)
    }

    /// A task of `rows` rows of one input `x` (nobody waits for its answer).
    fn rows(rows: usize) -> Task {
        task(vec![("x", iota(&[rows, 1], 0.0))]).0
    }

    fn taken(t: Take) -> Option<Vec<usize>> {
        match t {
            Take::Run(tasks) => Some(tasks.iter().map(|t| t.rows).collect()),
            _ => None,
        }
    }

    fn answer(rx: &mut oneshot::Receiver<Result<Outputs>>) -> Result<Outputs> {
        rx.try_recv().expect("the task was answered")
    }

    fn processor(runner: Arc<dyn BatchRunner>, allowed: &[usize], pad: bool) -> BatchProcessor {
        BatchProcessor {
            runner,
            allowed_batch_sizes: allowed.to_vec(),
            pad_variable_length_inputs: pad,
            metrics: None,
            runs: AtomicU64::new(0),
        }
    }

    fn floats(t: &Tensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }

    // --- Task validation -------------------------------------------------

    #[test]
    fn tasks_need_inputs_of_rank_one_and_one_batch_size() {
        let new = |inputs: Vec<(&str, Tensor)>| {
            let (tx, _rx) = oneshot::channel();
            Task::new(
                inputs.into_iter().map(|(k, t)| (k.to_owned(), t)).collect(),
                tx,
            )
        };
        let e = new(vec![]).err().unwrap();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Batching Run() must have at least one input tensor"
        );
        let e = new(vec![("x", Tensor::scalar(1.0f32))]).err().unwrap();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Batching Run() input tensors must have at least one dimension"
        );
        let e = new(vec![("x", iota(&[2, 1], 0.0)), ("y", iota(&[3], 0.0))])
            .err()
            .unwrap();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Batching Run() input tensors must have equal 0th-dimension size"
        );
        let e = new(vec![("x", iota(&[2], 0.0)), ("x", iota(&[2], 0.0))])
            .err()
            .unwrap();
        assert_eq!(e.code(), Code::InvalidArgument);
        let t = new(vec![("y", iota(&[3], 0.0)), ("x", iota(&[3, 2], 0.0))]).unwrap();
        assert_eq!(t.keys, ["x", "y"]);
        assert_eq!(t.inputs[0].dims(), &[3, 2]);
        assert_eq!(t.rows, 3);
    }

    // --- The state machine ------------------------------------------------

    #[test]
    fn a_batch_closes_when_it_reaches_max_batch_size() {
        let mut q = queue(4, HOUR, 10);
        let t0 = Instant::now();
        assert_eq!(q.enqueue(rows(1), t0).unwrap(), Enqueued::Wake(1));
        assert_eq!(q.enqueue(rows(2), t0).unwrap(), Enqueued::Joined);
        assert!(matches!(q.take_batch(t0), Take::WaitUntil(d) if d == t0 + HOUR));
        assert_eq!(q.queued(), 2);
        assert_eq!(q.enqueue(rows(1), t0).unwrap(), Enqueued::Wake(1));
        assert_eq!(taken(q.take_batch(t0)), Some(vec![1, 2, 1]));
        assert!(matches!(q.take_batch(t0), Take::Idle));
        assert_eq!((q.queued(), q.batches()), (0, 0));
        // A task of exactly max_batch_size rows is a closed batch at once.
        assert_eq!(q.enqueue(rows(4), t0).unwrap(), Enqueued::Wake(1));
        assert_eq!(taken(q.take_batch(t0)), Some(vec![4]));
    }

    #[test]
    fn a_task_that_does_not_fit_closes_the_batch_and_opens_the_next() {
        let mut q = queue(4, HOUR, 10);
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(5);
        let _ = q.enqueue(rows(3), t0).unwrap();
        assert_eq!(q.enqueue(rows(2), t1).unwrap(), Enqueued::Wake(2));
        assert_eq!(q.batches(), 2);
        assert_eq!(taken(q.take_batch(t1)), Some(vec![3]));
        // The new batch's timeout runs from its own first task.
        assert!(matches!(q.take_batch(t1), Take::WaitUntil(d) if d == t1 + HOUR));
        assert_eq!(taken(q.take_batch(t1 + HOUR)), Some(vec![2]));
    }

    #[test]
    fn an_open_batch_closes_on_its_timeout() {
        let timeout = Duration::from_millis(10);
        let mut q = queue(100, timeout, 10);
        let t0 = Instant::now();
        let _ = q.enqueue(rows(1), t0).unwrap();
        let _ = q.enqueue(rows(1), t0 + Duration::from_millis(9)).unwrap();
        assert!(
            matches!(q.take_batch(t0 + Duration::from_millis(5)), Take::WaitUntil(d) if d == t0 + timeout)
        );
        assert_eq!(taken(q.take_batch(t0 + timeout)), Some(vec![1, 1]));
        // A zero timeout: the batch is due as soon as a thread asks, with
        // whatever arrived until then.
        let mut q = queue(100, Duration::ZERO, 10);
        let _ = q.enqueue(rows(1), t0).unwrap();
        let _ = q.enqueue(rows(2), t0).unwrap();
        assert_eq!(taken(q.take_batch(t0)), Some(vec![1, 2]));
    }

    #[test]
    fn a_full_queue_refuses_tasks_with_unavailable() {
        let mut q = queue(2, HOUR, 2);
        let t0 = Instant::now();
        let _ = q.enqueue(rows(2), t0).unwrap();
        let _ = q.enqueue(rows(1), t0).unwrap();
        // One closed and one open batch: a task that needs a third is refused,
        // one that joins the open batch is not.
        let e = q.enqueue(rows(2), t0).unwrap_err();
        assert_eq!(e.code(), Code::Unavailable);
        assert_eq!(e.message(), QUEUE_FULL);
        assert_eq!(q.enqueue(rows(1), t0).unwrap(), Enqueued::Wake(1));
        assert_eq!(
            q.enqueue(rows(1), t0).unwrap_err().code(),
            Code::Unavailable
        );
        // Another key set counts against the same bound.
        let other = task(vec![("y", iota(&[1], 0.0))]).0;
        assert_eq!(q.enqueue(other, t0).unwrap_err().code(), Code::Unavailable);
        assert_eq!((q.queued(), q.batches()), (3, 2));
        // Taking a batch makes room.
        assert_eq!(taken(q.take_batch(t0)), Some(vec![2]));
        let _ = q.enqueue(rows(1), t0).unwrap();
        assert_eq!(q.batches(), 2);
    }

    #[test]
    fn a_task_larger_than_max_batch_size_is_invalid() {
        let mut q = queue(4, HOUR, 10);
        let e = q.enqueue(rows(5), Instant::now()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Task size 5 is larger than maximum batch size 4"
        );
        assert_eq!(q.queued(), 0);
    }

    #[test]
    fn tasks_with_different_input_keys_batch_apart() {
        let mut q = queue(10, HOUR, 10);
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(1);
        let _ = q.enqueue(rows(1), t0).unwrap();
        let xy = || task(vec![("x", iota(&[2, 1], 0.0)), ("y", iota(&[2], 0.0))]).0;
        assert_eq!(q.enqueue(xy(), t1).unwrap(), Enqueued::Wake(1));
        assert_eq!(q.enqueue(xy(), t1).unwrap(), Enqueued::Joined);
        let _ = q.enqueue(rows(3), t1).unwrap();
        assert_eq!(q.batches(), 2);
        // The earliest deadline goes first.
        match q.take_batch(t1 + HOUR) {
            Take::Run(tasks) => {
                assert_eq!(tasks.iter().map(|t| t.rows).collect::<Vec<_>>(), [1, 3]);
                assert!(tasks.iter().all(|t| t.keys == ["x"]));
            }
            _ => panic!("a batch is due"),
        }
        match q.take_batch(t1 + HOUR) {
            Take::Run(tasks) => assert!(tasks.iter().all(|t| t.keys == ["x", "y"] && t.rows == 2)),
            _ => panic!("a batch is due"),
        }
    }

    #[test]
    fn tasks_whose_shapes_differ_are_refused_unless_padding() {
        let t0 = Instant::now();
        let mut q = queue(10, HOUR, 10);
        let _ = q
            .enqueue(task(vec![("x", iota(&[1, 3], 0.0))]).0, t0)
            .unwrap();
        let e = q
            .enqueue(task(vec![("x", iota(&[2, 4], 0.0))]).0, t0)
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with("Tensors with name 'x' from different tasks have different shapes and padding is turned off."), "{e}");
        let e = q
            .enqueue(
                task(vec![("x", Tensor::new(&[1, 3], vec![1i32, 2, 3]).unwrap())]).0,
                t0,
            )
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("different dtypes"), "{e}");
        assert_eq!(q.queued(), 1);

        let mut o = options(10, HOUR, 10, 1);
        o.pad_variable_length_inputs = true;
        let mut q = BatchQueue::new(QueueOptions::from(&o));
        let _ = q
            .enqueue(task(vec![("x", iota(&[1, 3], 0.0))]).0, t0)
            .unwrap();
        assert_eq!(
            q.enqueue(task(vec![("x", iota(&[2, 4], 0.0))]).0, t0)
                .unwrap(),
            Enqueued::Joined
        );
        let e = q
            .enqueue(task(vec![("x", iota(&[1, 3, 1], 0.0))]).0, t0)
            .unwrap_err();
        assert!(e.message().contains("different ranks"), "{e}");
    }

    #[test]
    fn draining_makes_open_batches_due_then_exits() {
        let mut q = queue(10, HOUR, 10);
        let t0 = Instant::now();
        let _ = q.enqueue(rows(1), t0).unwrap();
        q.drain();
        assert_eq!(
            q.enqueue(rows(1), t0).unwrap_err().code(),
            Code::Unavailable
        );
        assert_eq!(taken(q.take_batch(t0)), Some(vec![1]));
        assert!(matches!(q.take_batch(t0), Take::Exit));
    }

    // --- Merging, running, splitting ---------------------------------------

    #[test]
    fn batches_merge_in_task_order_and_each_task_gets_its_rows() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = Arc::clone(&seen);
        let p = processor(
            runner(move |inputs| {
                s2.lock().unwrap().push(inputs.clone());
                let x = &inputs.iter().find(|(k, _)| k == "x").unwrap().1;
                let y = x.as_slice::<f32>()?.iter().map(|v| v * 10.0).collect();
                let s = inputs.iter().find(|(k, _)| k == "s").unwrap().1.clone();
                Ok(Outputs::from([
                    ("y".to_owned(), Tensor::new(x.dims(), y)?),
                    ("s".to_owned(), s),
                ]))
            }),
            &[],
            false,
        );
        let mut rxs = Vec::new();
        let mut tasks = Vec::new();
        for (r, base) in [(1, 0.0), (2, 100.0), (3, 200.0)] {
            let names: Vec<String> = (0..r).map(|i| format!("t{r}r{i}")).collect();
            let (t, rx) = task(vec![
                ("s", Tensor::from_strings(&[r], names).unwrap()),
                ("x", iota(&[r, 2], base)),
            ]);
            tasks.push(t);
            rxs.push(rx);
        }
        p.process(tasks);
        assert_eq!(p.runs.load(Ordering::Relaxed), 1);
        let seen = seen.lock().unwrap();
        let merged = &seen[0];
        assert_eq!(merged[0].0, "s");
        assert_eq!(merged[1].1.dims(), &[6, 2]);
        assert_eq!(
            floats(&merged[1].1)[..6],
            [0.0, 1.0, 100.0, 101.0, 102.0, 103.0]
        );
        for ((r, base), rx) in [(1, 0.0), (2, 100.0), (3, 200.0)].into_iter().zip(&mut rxs) {
            let out = answer(rx).unwrap();
            let want: Vec<f32> = (0..r * 2).map(|i| (base + i as f32) * 10.0).collect();
            assert_eq!(out["y"].dims(), &[r, 2]);
            assert_eq!(floats(&out["y"]), want);
            let names = out["s"].as_strings().unwrap();
            assert_eq!(names.len(), r);
            assert_eq!(names[r - 1], format!("t{r}r{}", r - 1).as_bytes());
        }
    }

    #[test]
    fn batches_pad_to_allowed_sizes_with_the_last_tasks_first_row() {
        let metrics = Metrics::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = Arc::clone(&seen);
        let mut p = processor(
            runner(move |inputs| {
                s2.lock().unwrap().push(inputs[0].1.clone());
                Ok(inputs.into_iter().collect())
            }),
            &[2, 4, 8],
            false,
        );
        p.metrics = Some(metrics.batch_hook("m", "serving_default"));
        let (a, mut ra) = task(vec![("x", iota(&[1, 2], 0.0))]);
        let (b, mut rb) = task(vec![("x", iota(&[2, 2], 10.0))]);
        p.process(vec![a, b]);
        let x = seen.lock().unwrap()[0].clone();
        assert_eq!(x.dims(), &[4, 2]);
        assert_eq!(floats(&x), [0.0, 1.0, 10.0, 11.0, 12.0, 13.0, 10.0, 11.0]);
        assert_eq!(floats(&answer(&mut ra).unwrap()["x"]), [0.0, 1.0]);
        let b_out = answer(&mut rb).unwrap();
        assert_eq!(b_out["x"].dims(), &[2, 2]);
        assert_eq!(floats(&b_out["x"]), [10.0, 11.0, 12.0, 13.0]);
        let text = metrics.encode();
        assert!(
            text.contains(
                "processed_batch_size_sum{model_name=\"m\",signature=\"serving_default\"} 4.0"
            ),
            "{text}"
        );
        assert!(
            text.contains("padding_size_sum{model_name=\"m\",signature=\"serving_default\"} 1.0"),
            "{text}"
        );
    }

    #[test]
    fn variable_length_inputs_pad_with_each_tasks_first_element() {
        let p = processor(identity(), &[], true);
        let (a, mut ra) = task(vec![
            ("v", Tensor::new(&[1, 2], vec![1i64, 2]).unwrap()),
            ("m", iota(&[1, 1, 2], 5.0)),
            ("s", Tensor::from_strings(&[1, 1], vec!["a"]).unwrap()),
        ]);
        let (b, mut rb) = task(vec![
            (
                "v",
                Tensor::new(&[2, 3], vec![10i64, 11, 12, 13, 14, 15]).unwrap(),
            ),
            ("m", iota(&[2, 2, 1], 7.0)),
            (
                "s",
                Tensor::from_strings(&[2, 2], vec!["b", "c", "d", "e"]).unwrap(),
            ),
        ]);
        p.process(vec![a, b]);
        let a_out = answer(&mut ra).unwrap();
        let b_out = answer(&mut rb).unwrap();
        assert_eq!(a_out["v"].as_slice::<i64>().unwrap(), [1, 2, 1]);
        assert_eq!(
            b_out["v"].as_slice::<i64>().unwrap(),
            [10, 11, 12, 13, 14, 15]
        );
        assert_eq!(a_out["m"].dims(), &[1, 2, 2]);
        assert_eq!(floats(&a_out["m"]), [5.0, 6.0, 5.0, 5.0]);
        assert_eq!(b_out["m"].dims(), &[2, 2, 2]);
        assert_eq!(
            floats(&b_out["m"]),
            [7.0, 7.0, 8.0, 7.0, 9.0, 7.0, 10.0, 7.0]
        );
        assert_eq!(a_out["s"].as_strings().unwrap(), ["a", "a"]);
        assert_eq!(b_out["s"].as_strings().unwrap(), ["b", "c", "d", "e"]);
    }

    #[test]
    fn an_empty_tensor_that_needs_padding_is_refused_alone() {
        let p = processor(identity(), &[], true);
        let (a, mut ra) = task(vec![("x", iota(&[1, 0], 0.0))]);
        let (b, mut rb) = task(vec![("x", iota(&[1, 2], 3.0))]);
        p.process(vec![a, b]);
        let e = answer(&mut ra).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Got empty tensor in batch of non-empty tensors."
        );
        assert_eq!(floats(&answer(&mut rb).unwrap()["x"]), [3.0, 4.0]);
        assert_eq!(p.runs.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_runner_error_reaches_every_task() {
        let p = processor(
            runner(|_| Err(Status::resource_exhausted("no memory"))),
            &[],
            false,
        );
        let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
        let (b, mut rb) = task(vec![("x", iota(&[2], 0.0))]);
        p.process(vec![a, b]);
        for rx in [&mut ra, &mut rb] {
            let e = answer(rx).unwrap_err();
            assert_eq!(
                (e.code(), e.message()),
                (Code::ResourceExhausted, "no memory")
            );
        }
        let p = processor(runner(|_| panic!("kernel exploded")), &[], false);
        let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
        p.process(vec![a]);
        let e = answer(&mut ra).unwrap_err();
        assert_eq!(e.code(), Code::Internal);
        assert!(e.message().contains("kernel exploded"), "{e}");
    }

    #[test]
    fn outputs_without_the_batch_size_are_internal_for_every_task() {
        let p = processor(
            runner(|_| Ok(Outputs::from([("y".to_owned(), iota(&[5, 1], 0.0))]))),
            &[],
            false,
        );
        let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
        let (b, mut rb) = task(vec![("x", iota(&[2], 0.0))]);
        p.process(vec![a, b]);
        for rx in [&mut ra, &mut rb] {
            let e = answer(rx).unwrap_err();
            assert_eq!(e.code(), Code::Internal);
            assert_eq!(
                e.message(),
                "Batched output tensor's 0th dimension does not equal the sum of the 0th \
                 dimension sizes of the input tensors"
            );
        }
        let p = processor(
            runner(|_| Ok(Outputs::from([("y".to_owned(), Tensor::scalar(1.0f32))]))),
            &[],
            false,
        );
        let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
        p.process(vec![a]);
        assert_eq!(
            answer(&mut ra).unwrap_err().message(),
            "Batched output tensor has 0 dimensions"
        );
    }

    #[test]
    fn callers_that_went_away_do_not_break_the_batch() {
        let seen_rows = Arc::new(AtomicUsize::new(0));
        let s2 = Arc::clone(&seen_rows);
        let p = processor(
            runner(move |inputs| {
                s2.store(inputs[0].1.dims()[0], Ordering::Relaxed);
                Ok(inputs.into_iter().collect())
            }),
            &[],
            false,
        );
        let (a, ra) = task(vec![("x", iota(&[2], 0.0))]);
        let (b, mut rb) = task(vec![("x", iota(&[1], 9.0))]);
        drop(ra);
        p.process(vec![a, b]);
        assert_eq!(floats(&answer(&mut rb).unwrap()["x"]), [9.0]);
        assert_eq!(seen_rows.load(Ordering::Relaxed), 1);
        // Nobody waits for any task: the batch does not run.
        p.process(vec![rows(1), rows(2)]);
        assert_eq!(p.runs.load(Ordering::Relaxed), 1);
    }

    // --- The batcher's threads -------------------------------------------

    /// Polls `cond` until it holds (at most 10 s).
    async fn wait_for(what: &str, cond: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// `y = 2x + (row-wise sum of x)` through an actorflow session.
    struct SessionRunner {
        session: actors::Session,
        x: String,
        y: String,
    }

    impl BatchRunner for SessionRunner {
        fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Outputs> {
            let x = inputs
                .into_iter()
                .find(|(k, _)| k == "x")
                .ok_or_else(|| Status::invalid_argument("no x"))?
                .1;
            let mut out = self.session.run(&[(&self.x, x)], &[&self.y], &[])?;
            Ok(Outputs::from([("y".to_owned(), out.remove(0))]))
        }
    }

    fn session_runner() -> SessionRunner {
        use graph::builder::Scope;
        use graph::{ops, Shape};
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(3)])).unwrap();
        let two = ops::scalar(&s, 2.0f32).unwrap();
        let doubled = ops::mul(&s, &x, &two).unwrap();
        let row_sums = ops::sum_axes(&s, &x, &[1], true).unwrap();
        let y = ops::add(&s, &doubled, &row_sums).unwrap();
        let session =
            actors::Session::new(&s.graph_def(), actors::SessionOptions::default()).unwrap();
        SessionRunner {
            session,
            x: x.name(),
            y: y.name(),
        }
    }

    #[tokio::test]
    async fn concurrent_requests_merge_into_one_session_run() {
        // 1 + 2 + … + 6 = 21 rows fill one batch exactly.
        let b = Arc::new(Batcher::new(
            options(21, HOUR, 10, 2),
            Arc::new(session_runner()),
            None,
        ));
        let mut set = tokio::task::JoinSet::new();
        for r in 1..=6usize {
            let b = Arc::clone(&b);
            set.spawn(async move {
                let x = iota(&[r, 3], 100.0 * r as f32);
                (r, x.clone(), b.submit(vec![("x".to_owned(), x)]).await)
            });
        }
        while let Some(done) = set.join_next().await {
            let (r, x, out) = done.unwrap();
            let y = out.unwrap().remove("y").unwrap();
            assert_eq!(y.dims(), &[r, 3]);
            let x = floats(&x);
            let want: Vec<f32> = x
                .chunks(3)
                .flat_map(|row| {
                    let sum: f32 = row.iter().sum();
                    row.iter().map(move |v| 2.0 * v + sum).collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(floats(&y), want);
        }
        assert_eq!(b.runs(), 1);
        assert_eq!(b.queued(), 0);
    }

    #[tokio::test]
    async fn sixteen_single_row_requests_share_one_run_on_batch_threads() {
        let names = Arc::new(Mutex::new(Vec::new()));
        let n2 = Arc::clone(&names);
        let r = runner(move |inputs| {
            n2.lock()
                .unwrap()
                .push(std::thread::current().name().map(str::to_owned));
            Ok(inputs.into_iter().collect())
        });
        let b = Arc::new(Batcher::new(options(16, HOUR, 10, 4), r, None));
        let mut set = tokio::task::JoinSet::new();
        for i in 0..16 {
            let b = Arc::clone(&b);
            set.spawn(async move {
                (
                    i,
                    b.submit(vec![("x".to_owned(), iota(&[1], i as f32))]).await,
                )
            });
        }
        while let Some(done) = set.join_next().await {
            let (i, out) = done.unwrap();
            assert_eq!(floats(&out.unwrap()["x"]), [i as f32]);
        }
        assert_eq!(b.runs(), 1);
        let names = names.lock().unwrap();
        let name = names[0].as_deref().unwrap_or("");
        assert!(name.starts_with(BATCH_THREAD_NAME_PREFIX), "{name}");
    }

    #[tokio::test]
    async fn a_partial_batch_runs_after_its_timeout() {
        let timeout = Duration::from_millis(30);
        let b = Batcher::new(options(100, timeout, 10, 1), identity(), None);
        let start = Instant::now();
        let out = b
            .submit(vec![("x".to_owned(), iota(&[2], 1.0))])
            .await
            .unwrap();
        assert!(start.elapsed() >= timeout);
        assert_eq!(floats(&out["x"]), [1.0, 2.0]);
        assert_eq!(b.runs(), 1);
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_never_grows() {
        let (entered_tx, entered) = crossbeam::channel::unbounded();
        let (release, release_rx) = crossbeam::channel::unbounded::<()>();
        let r = runner(move |inputs| {
            let _ = entered_tx.send(());
            release_rx
                .recv_timeout(Duration::from_secs(10))
                .map_err(|_| Status::deadline_exceeded("not released"))?;
            Ok(inputs.into_iter().collect())
        });
        let b = Arc::new(Batcher::new(options(1, Duration::ZERO, 2, 1), r, None));
        let submit = |v: f32| {
            let b = Arc::clone(&b);
            tokio::spawn(async move { b.submit(vec![("x".to_owned(), iota(&[1], v))]).await })
        };
        let a = submit(1.0);
        wait_for("the runner to start", || !entered.is_empty()).await;
        let (c, d) = (submit(2.0), submit(3.0));
        wait_for("two queued batches", || b.queued() == 2).await;
        for _ in 0..3 {
            let e = b
                .submit(vec![("x".to_owned(), iota(&[1], 4.0))])
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::Unavailable);
            assert_eq!(e.message(), QUEUE_FULL);
            assert_eq!((b.queued(), b.enqueued_batches()), (2, 2));
        }
        for _ in 0..3 {
            release.send(()).unwrap();
        }
        for (h, v) in [(a, 1.0), (c, 2.0), (d, 3.0)] {
            assert_eq!(floats(&h.await.unwrap().unwrap()["x"]), [v]);
        }
        assert_eq!(b.runs(), 3);
    }

    #[tokio::test]
    async fn dropping_the_batcher_joins_its_threads_promptly() {
        let r = identity();
        let b = Arc::new(Batcher::new(options(10, HOUR, 10, 3), Arc::clone(&r), None));
        assert_eq!(Arc::strong_count(&r), 2);
        // A request whose caller goes away while its batch waits.
        let b2 = Arc::clone(&b);
        let h =
            tokio::spawn(async move { b2.submit(vec![("x".to_owned(), iota(&[1], 0.0))]).await });
        wait_for("the request to queue", || b.queued() == 1).await;
        h.abort();
        assert!(h.await.unwrap_err().is_cancelled());
        let b = Arc::into_inner(b).expect("the only handle");
        let start = Instant::now();
        drop(b);
        assert!(start.elapsed() < Duration::from_secs(5));
        // Every thread has been joined: none holds the runner any more, and the
        // abandoned batch did not run.
        assert_eq!(Arc::strong_count(&r), 1);
    }

    #[tokio::test]
    async fn a_runner_may_drop_the_last_handle_to_its_batcher() {
        let (entered_tx, entered) = crossbeam::channel::unbounded();
        let (release, release_rx) = crossbeam::channel::unbounded::<()>();
        let (dropped_tx, dropped) = crossbeam::channel::unbounded();
        let slot: Arc<Mutex<Option<Arc<Batcher>>>> = Arc::new(Mutex::new(None));
        let s2 = Arc::clone(&slot);
        let r = runner(move |inputs| {
            let _ = entered_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(10));
            let start = Instant::now();
            drop(s2.lock().unwrap().take());
            let _ = dropped_tx.send(start.elapsed());
            Ok(inputs.into_iter().collect())
        });
        let b = Arc::new(Batcher::new(options(1, Duration::ZERO, 10, 2), r, None));
        *slot.lock().unwrap() = Some(Arc::clone(&b));
        let b2 = Arc::clone(&b);
        let h =
            tokio::spawn(async move { b2.submit(vec![("x".to_owned(), iota(&[1], 0.0))]).await });
        wait_for("the runner to start", || !entered.is_empty()).await;
        // The caller goes away and the test lets go: the runner holds the last
        // handle, and drops it on a batch thread.
        h.abort();
        assert!(h.await.unwrap_err().is_cancelled());
        drop(b);
        release.send(()).unwrap();
        let took = dropped.recv_timeout(Duration::from_secs(20)).unwrap();
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn a_batcher_needs_no_ambient_runtime() {
        let b = Batcher::new(options(4, Duration::ZERO, 10, 1), identity(), None);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = rt
            .block_on(b.submit(vec![("x".to_owned(), iota(&[3], 0.0))]))
            .unwrap();
        assert_eq!(floats(&out["x"]), [0.0, 1.0, 2.0]);
        assert_eq!(b.runs(), 1);
        let e = rt
            .block_on(b.submit(vec![("x".to_owned(), Tensor::scalar(1.0f32))]))
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        drop(b);
    }
}
