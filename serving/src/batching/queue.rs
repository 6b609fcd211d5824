//! `BatchQueue`, a batcher's scheduling state machine: plain data, driven
//! with explicit `now`s (so tests drive it deterministically) and held under
//! the batcher's one lock. [`BatchQueue::enqueue`] and
//! [`BatchQueue::take_batch`] return `#[must_use]` transitions that say which
//! threads to wake and what a batch thread does next. Its invariants are the
//! batching module's (open batches per input-key set, one FIFO of closed
//! batches, one bound on both, draining).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use graph::{Result, Status};

use crate::config::BatchingOptions;

use super::task::{check_compatible, Task};

/// TensorFlow's message for a refused task when the queue is full.
pub(super) const QUEUE_FULL: &str =
    "The batch scheduling queue to which this task was submitted is full";

/// The scheduling part of [`BatchingOptions`] (TensorFlow's `QueueOptions`).
#[derive(Clone, Debug)]
pub(super) struct QueueOptions {
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
pub(super) enum Enqueued {
    /// It joined an open batch that stays open: no thread needs to look.
    Joined,
    /// `n` batches (1 or 2) closed or started their timeout: wake `n` threads.
    Wake(usize),
}

/// What a batch thread asking [`BatchQueue::take_batch`] should do.
#[must_use]
pub(super) enum Take {
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
pub(super) struct BatchQueue {
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
    pub(super) fn new(options: QueueOptions) -> BatchQueue {
        BatchQueue {
            options,
            phase: Phase::Running,
            open: Vec::new(),
            closed: VecDeque::new(),
            queued: 0,
        }
    }

    /// Tasks waiting in a batch no thread has taken.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// Batches waiting, open and closed.
    pub(super) fn batches(&self) -> usize {
        self.open.len() + self.closed.len()
    }

    /// True while some batch waits.
    pub(super) fn has_batches(&self) -> bool {
        self.batches() > 0
    }

    /// Stops taking tasks and makes every open batch due.
    pub(super) fn drain(&mut self) {
        self.phase = Phase::Draining;
    }

    /// Adds `task`, arriving at `now`, to its key set's open batch, or refuses
    /// it (see the module docs).
    pub(super) fn enqueue(&mut self, task: Task, now: Instant) -> Result<Enqueued> {
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
    pub(super) fn take_batch(&mut self, now: Instant) -> Take {
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
