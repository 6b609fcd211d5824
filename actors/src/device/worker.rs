//! A device's data plane: [`DeviceWorker`], a state machine hosting the executors of
//! every step that runs a partition on the device, driven by [`run_worker`] on the
//! device's thread from a mailbox that spins before it parks (see
//! [`device`](crate::device)).

use std::sync::Arc;

use graph::{Result, Status};
use kernels::{AsyncDone, DeviceContext, Outputs, StepContext};
use rendezvous::{MailboxReceiver, MailboxSender};

use crate::executor::{
    ExecutorHost, ExecutorMsg, ExecutorPlan, ExecutorState, ExecutorTransition, TaggedNode,
};
use crate::stats::StatsCollector;
use crate::step::StepTracker;

/// A partition of a step to run.
pub struct PartitionRun {
    /// The partition's plan.
    pub plan: Arc<ExecutorPlan>,
    /// The step as the partition's kernels see it.
    pub step: Arc<StepContext>,
    /// Where to report.
    pub tracker: Arc<StepTracker>,
    /// Collect per-node statistics.
    pub collect_stats: bool,
    /// The step's span: the partition's span is its child.
    pub step_span: tracing::Span,
}

/// Messages of a device's data plane.
pub enum DeviceMsg {
    /// Start a partition.
    Run(Box<PartitionRun>),
    /// An asynchronous kernel of executor `slot` finished.
    KernelDone {
        /// The executor's slot.
        slot: usize,
        /// The slot's generation when the kernel started (stale ones are dropped).
        generation: u64,
        /// The node.
        node: TaggedNode,
        /// Its outputs or error.
        result: Result<Outputs>,
    },
    /// Stop this device's partition of a step.
    Abort {
        /// The step.
        step_id: u64,
        /// Why.
        status: Status,
    },
    /// Stop the worker (pending steps fail with `Cancelled`).
    Stop,
}

struct Slot {
    generation: u64,
    step_id: u64,
    exec: ExecutorState,
    tracker: Arc<StepTracker>,
    /// The partition's span, entered whenever its executor runs.
    span: tracing::Span,
}

/// Whether the worker goes on.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum WorkerTransition {
    /// Keep handling messages.
    Continue,
    /// Stop the thread.
    Stop,
}

/// The data-plane state machine of one device; see the module docs.
pub struct DeviceWorker {
    device: Arc<DeviceContext>,
    mailbox: MailboxSender<DeviceMsg>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    generation: u64,
}

struct Host<'a> {
    mailbox: &'a MailboxSender<DeviceMsg>,
    slot: usize,
    generation: u64,
}

impl ExecutorHost for Host<'_> {
    fn async_done(&mut self, node: TaggedNode) -> AsyncDone {
        let mailbox = self.mailbox.clone();
        let (slot, generation) = (self.slot, self.generation);
        AsyncDone::new(move |result| {
            let _ = mailbox.send(DeviceMsg::KernelDone {
                slot,
                generation,
                node,
                result,
            });
        })
    }
}

impl DeviceWorker {
    /// A worker for `device` whose asynchronous completions go to `mailbox`.
    pub fn new(device: Arc<DeviceContext>, mailbox: MailboxSender<DeviceMsg>) -> DeviceWorker {
        DeviceWorker {
            device,
            mailbox,
            slots: Vec::new(),
            free: Vec::new(),
            generation: 0,
        }
    }

    /// The number of executors in flight.
    pub fn running(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Handles one message.
    pub fn handle(&mut self, msg: DeviceMsg) -> WorkerTransition {
        match msg {
            DeviceMsg::Run(run) => self.start(*run),
            DeviceMsg::KernelDone {
                slot,
                generation,
                node,
                result,
            } => {
                if matches!(&self.slots.get(slot), Some(Some(s)) if s.generation == generation) {
                    self.step(slot, ExecutorMsg::KernelDone { node, result });
                }
            }
            DeviceMsg::Abort { step_id, status } => {
                let hit: Vec<usize> = (0..self.slots.len())
                    .filter(|&i| matches!(&self.slots[i], Some(s) if s.step_id == step_id))
                    .collect();
                for i in hit {
                    self.step(i, ExecutorMsg::Abort(status.clone()));
                }
            }
            DeviceMsg::Stop => {
                for i in 0..self.slots.len() {
                    if self.slots[i].is_some() {
                        self.step(
                            i,
                            ExecutorMsg::Abort(Status::cancelled("the device is shutting down")),
                        );
                    }
                }
                return WorkerTransition::Stop;
            }
        }
        WorkerTransition::Continue
    }

    fn start(&mut self, run: PartitionRun) {
        let (step, device) = (run.tracker.step_id, &self.device.name);
        let span =
            tracing::debug_span!(parent: &run.step_span, "partition", step, device = %device);
        let _entered = span.clone().entered();
        let stats = run
            .collect_stats
            .then(|| StatsCollector::new(&self.device.name));
        let exec = ExecutorState::new(run.plan, run.step, stats);
        self.generation += 1;
        let slot = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        self.slots[slot] = Some(Slot {
            generation: self.generation,
            step_id: run.tracker.step_id,
            exec,
            tracker: run.tracker,
            span,
        });
        let generation = self.generation;
        let t = {
            let s = self.slots[slot]
                .as_mut()
                .expect("invariant: slot just filled");
            let mut host = Host {
                mailbox: &self.mailbox,
                slot,
                generation,
            };
            s.exec.start(&mut host)
        };
        self.after(slot, t);
    }

    fn step(&mut self, slot: usize, msg: ExecutorMsg) {
        let t = {
            let Some(s) = self.slots[slot].as_mut() else {
                return;
            };
            let _entered = s.span.enter();
            let mut host = Host {
                mailbox: &self.mailbox,
                slot,
                generation: s.generation,
            };
            s.exec.handle(msg, &mut host)
        };
        self.after(slot, t);
    }

    fn after(&mut self, slot: usize, t: ExecutorTransition) {
        if let ExecutorTransition::Done(result) = t {
            if let Some(mut s) = self.slots[slot].take() {
                self.free.push(slot);
                let stats = s.exec.take_stats().map(|mut st| {
                    st.finish();
                    st
                });
                if let Err(e) = &result {
                    tracing::debug!(step = s.step_id, device = %self.device.name, error = %e, "partition failed");
                }
                s.tracker.partition_done(result, stats);
            }
        }
    }
}

/// Runs a worker until its mailbox closes or it is told to stop.
pub fn run_worker(mut worker: DeviceWorker, rx: MailboxReceiver<DeviceMsg>) {
    let mut batch = Vec::with_capacity(64);
    loop {
        if rx.drain(&mut batch) == 0 {
            let _ = worker.handle(DeviceMsg::Stop);
            return;
        }
        for msg in batch.drain(..) {
            if worker.handle(msg) == WorkerTransition::Stop {
                return;
            }
        }
    }
}
