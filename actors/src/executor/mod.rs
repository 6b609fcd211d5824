//! The executor: runs one partition for one step as a plain state machine
//! (TensorFlow's `ExecutorState`), split by lifetime as TensorFlow's is:
//!
//! - [`immutable`] — the [`ExecutorPlan`], built once per partition.
//! - [`propagator`] — frames, iterations and the ready queue of one step.
//! - [`iterations`] — iteration states, each frame's ring of them, and their pool.
//! - [`activation`] — the ready queue, and delivering outputs within an iteration.
//! - [`pending_counts`] — per-iteration pending counts.
//!
//! [`ExecutorState::start`] schedules the root nodes and runs every ready node
//! inline; an asynchronous kernel that goes pending gets an [`AsyncDone`] from the
//! [`ExecutorHost`], which delivers its completion back as
//! [`ExecutorMsg::KernelDone`] to [`ExecutorState::handle`]. Each call returns an
//! [`ExecutorTransition`]: still running, or done with the step's status for this
//! partition. The first kernel error aborts the step's rendezvous (waking every
//! other partition) and ends the executor; completions that arrive afterwards are
//! ignored by the host.
//!
//! A step is stopped from outside (its deadline, an error in another partition) by
//! cancelling its [`CancellationManager`](rendezvous::CancellationManager). An
//! executor waiting for completions learns of it from an [`ExecutorMsg::Abort`]; a
//! busy one (a long loop never returns to its device's mailbox) reads the manager's
//! flag as TensorFlow's executor checks its cancellation manager: whenever the
//! number of nodes taken from the ready queue is a multiple of
//! [`CANCELLATION_CHECK_INTERVAL`]. The queue resets that number only when it
//! compacts, after at least that many were taken (see [`ReadyQueue`]), so at most
//! twice that many nodes — microseconds — run between two reads, and the hot loop
//! pays a test of a register it already holds, not a counter of its own (measured:
//! ~2 instructions per node, where a countdown cost ~11 through register pressure).

pub mod activation;
pub mod immutable;
pub mod iterations;
pub mod pending_counts;
pub mod propagator;

use std::sync::Arc;
use std::time::Instant;

use graph::tensor::memory::{Charge, ChargeScope, MemoryCounter};
use graph::{Result, Status};
use kernels::{AsyncDone, AsyncStatus, Entry, OpKernelContext, Outputs, StepContext};
use rendezvous::FrameIter;

use crate::contain::contain_panic;

pub use activation::ReadyQueue;
pub use immutable::{ExecutorPlan, KernelCache, KernelKind, NoKernelCache, NodeItem};
pub use propagator::{PropagatorState, TaggedNode};

use crate::stats::StatsCollector;

/// An executor reads its step's cancellation flag whenever the nodes taken from its
/// ready queue (since the queue last compacted) are a multiple of this; see the
/// module docs.
pub const CANCELLATION_CHECK_INTERVAL: usize = 128;
const _: () = assert!(CANCELLATION_CHECK_INTERVAL.is_power_of_two());

/// What hosts an executor: creates completions for pending asynchronous kernels.
pub trait ExecutorHost {
    /// A completion that delivers [`ExecutorMsg::KernelDone`] for `node` back to
    /// this executor.
    fn async_done(&mut self, node: TaggedNode) -> AsyncDone;
}

/// Messages an executor handles after it started.
pub enum ExecutorMsg {
    /// A pending asynchronous kernel finished.
    KernelDone {
        /// The node.
        node: TaggedNode,
        /// Its outputs or error.
        result: Result<Outputs>,
    },
    /// Stop: the step was aborted elsewhere or timed out.
    Abort(Status),
}

/// The executor's state after a transition.
#[derive(Debug)]
#[must_use]
pub enum ExecutorTransition {
    /// Waiting for asynchronous completions.
    Running,
    /// Finished (or failed); the partition's part of the step is over.
    Done(Result<()>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Finished,
}

enum NodeOutcome {
    Completed,
    Pending,
    /// An expensive kernel went to the device's pool; with the counter of what it
    /// allocates while the step collects statistics.
    Offloaded(Option<Arc<MemoryCounter>>),
}

/// One partition's execution of one step; see the module docs.
pub struct ExecutorState {
    plan: Arc<ExecutorPlan>,
    step: Arc<StepContext>,
    prop: PropagatorState,
    outstanding: usize,
    phase: Phase,
    /// The executor stopped on an error or a cancellation.
    failed: bool,
    scratch: Vec<Entry>,
    stats: Option<StatsCollector>,
    /// Whether a subscriber wants the per-node `node` spans (asked once per step,
    /// not once per node).
    trace_nodes: bool,
}

impl Drop for ExecutorState {
    fn drop(&mut self) {
        let mut p = std::mem::take(&mut self.prop);
        p.end_step(self.failed || self.phase != Phase::Finished);
        self.plan.return_propagator(p);
    }
}

impl ExecutorState {
    /// An executor for `plan` in `step`; `stats` collects per-node statistics.
    pub fn new(
        plan: Arc<ExecutorPlan>,
        step: Arc<StepContext>,
        stats: Option<StatsCollector>,
    ) -> ExecutorState {
        let prop = plan.take_propagator();
        let scratch = vec![Entry::Empty; plan.max_outputs];
        ExecutorState {
            plan,
            step,
            prop,
            outstanding: 0,
            phase: Phase::Running,
            failed: false,
            scratch,
            stats,
            trace_nodes: tracing::enabled!(tracing::Level::TRACE),
        }
    }

    /// Schedules the root nodes and runs until done or waiting.
    pub fn start(&mut self, host: &mut dyn ExecutorHost) -> ExecutorTransition {
        let plan = Arc::clone(&self.plan);
        self.outstanding = self.prop.activate_roots(&plan);
        self.run(host)
    }

    /// Handles one message.
    pub fn handle(&mut self, msg: ExecutorMsg, host: &mut dyn ExecutorHost) -> ExecutorTransition {
        if self.phase == Phase::Finished {
            return ExecutorTransition::Done(Ok(()));
        }
        match msg {
            ExecutorMsg::Abort(s) => self.fail(s),
            ExecutorMsg::KernelDone { node, result } => {
                let item_name = Arc::clone(&self.plan.nodes[node.node].name);
                match result.and_then(|o| self.check_outputs(node, o)) {
                    Err(e) => self.fail(e.with_node(&*item_name)),
                    Ok(mut outs) => {
                        let plan = Arc::clone(&self.plan);
                        if let Some(st) = self.stats.as_mut() {
                            let item = &plan.nodes[node.node];
                            let tagged = (node.node, node.frame, node.iter);
                            let names = (&item.name, &item.op);
                            let dev = &self.step.device.memory;
                            st.async_done(tagged, names, &outs, node.is_dead, dev);
                        }
                        let before = self.prop.ready.len();
                        self.prop.propagate_outputs(&plan, node, &mut outs[..]);
                        self.outstanding = self.outstanding + (self.prop.ready.len() - before) - 1;
                        self.run(host)
                    }
                }
            }
        }
    }

    /// The propagation state (for tests of memory use).
    pub fn propagator(&self) -> &PropagatorState {
        &self.prop
    }

    /// Takes the collected statistics.
    pub fn take_stats(&mut self) -> Option<StatsCollector> {
        self.stats.take()
    }

    fn fail(&mut self, s: Status) -> ExecutorTransition {
        self.phase = Phase::Finished;
        self.failed = true;
        self.prop.ready.clear();
        self.step.rendezvous.abort(s.clone());
        ExecutorTransition::Done(Err(s))
    }

    /// Ends a busy executor whose step was cancelled, with the status the step was
    /// aborted with (the rendezvous is aborted before the manager is cancelled).
    #[cold]
    #[inline(never)]
    fn cancelled(&mut self) -> ExecutorTransition {
        let s = self
            .step
            .rendezvous
            .abort_status()
            .unwrap_or_else(|| Status::cancelled("the step was cancelled"));
        self.fail(s)
    }

    fn check_outputs(&self, tn: TaggedNode, outs: Outputs) -> Result<Outputs> {
        let item = &self.plan.nodes[tn.node];
        if outs.len() != item.num_outputs {
            return Err(Status::internal(format!(
                "kernel produced {} outputs, expected {}",
                outs.len(),
                item.num_outputs
            )));
        }
        if !item.may_produce_dead && !tn.is_dead {
            if let Some(i) = outs.iter().position(Entry::is_empty) {
                return Err(Status::internal(format!("kernel did not set output {i}")));
            }
        }
        Ok(outs)
    }

    fn run(&mut self, host: &mut dyn ExecutorHost) -> ExecutorTransition {
        let plan = Arc::clone(&self.plan);
        // Every buffer a kernel allocates from here on is charged to the device
        // (and to the step when it collects statistics); see graph's
        // `tensor::memory`. One scope per call, not per node.
        let _charge = ChargeScope::enter(Charge::new(
            Arc::clone(&self.step.device.memory),
            self.stats.as_ref().map(|s| Arc::clone(s.counter())),
        ));
        // Spans and statistics are decided once per step: without them a node runs
        // through a copy of `process` that has neither.
        let instrumented = self.trace_nodes || self.stats.is_some();
        while let Some(tn) = self.prop.ready.pop() {
            if self.prop.ready.taken() & (CANCELLATION_CHECK_INTERVAL - 1) == 0
                && self.step.cancellation.is_cancelled()
            {
                return self.cancelled();
            }
            let before = self.prop.ready.len();
            let outcome = if instrumented {
                self.process_instrumented(&plan, tn, host)
            } else {
                self.process::<false>(&plan, tn, host)
            };
            match outcome {
                Ok(NodeOutcome::Completed) => {
                    self.outstanding = self.outstanding + (self.prop.ready.len() - before) - 1;
                }
                Ok(NodeOutcome::Pending | NodeOutcome::Offloaded(_)) => {}
                Err(e) => return self.fail(e.with_node(&*plan.nodes[tn.node].name)),
            }
        }
        if self.outstanding == 0 {
            self.phase = Phase::Finished;
            ExecutorTransition::Done(Ok(()))
        } else {
            ExecutorTransition::Running
        }
    }

    /// [`Self::process`] inside the node's span, collecting statistics.
    #[inline(never)]
    fn process_instrumented(
        &mut self,
        plan: &ExecutorPlan,
        tn: TaggedNode,
        host: &mut dyn ExecutorHost,
    ) -> Result<NodeOutcome> {
        let item = &plan.nodes[tn.node];
        let _span = self.trace_nodes.then(|| {
            let device = &self.step.device.name;
            tracing::trace_span!("node", node = &*item.name, op = &*item.op, device = %device)
                .entered()
        });
        self.process::<true>(plan, tn, host)
    }

    /// Runs one ready node and propagates its outputs. The node's frame and iteration
    /// are looked up once: a node that stays in its iteration (all but `Enter`,
    /// `Exit` and `NextIteration`) delivers its outputs through the same iteration
    /// state its inputs came from. `STATS` compiles statistics collection in.
    #[inline(always)]
    fn process<const STATS: bool>(
        &mut self,
        plan: &ExecutorPlan,
        tn: TaggedNode,
        host: &mut dyn ExecutorHost,
    ) -> Result<NodeOutcome> {
        let item = &plan.nodes[tn.node];
        let start = if STATS {
            self.stats
                .as_ref()
                .map(|s| (Instant::now(), s.counter().total_bytes()))
        } else {
            None
        };
        let (frame_id, it, ready) = self.prop.node_state(tn.frame, tn.iter);
        let fi = FrameIter::new(frame_id, tn.iter);
        if item.is_merge {
            it.pending.mark_started(item.pending_id);
        }
        let outputs = &mut self.scratch[..item.num_outputs];
        let inputs = &mut it.input_tensors[item.input_start..item.input_start + item.num_inputs];
        let others_ready = !ready.is_empty();
        let result = if !tn.is_dead || item.is_transfer {
            Self::compute(
                item,
                inputs,
                outputs,
                &self.step,
                fi,
                &tn,
                host,
                others_ready,
            )
        } else {
            Ok(NodeOutcome::Completed)
        };
        clear(inputs);
        match result {
            Ok(NodeOutcome::Completed) => {}
            other => {
                clear(outputs);
                if STATS {
                    if let (Ok(outcome), Some(st), Some(t0)) = (&other, self.stats.as_mut(), start)
                    {
                        let tagged = (tn.node, tn.frame, tn.iter);
                        match outcome {
                            NodeOutcome::Pending => st.kernel_pending(tagged, t0.0, fi),
                            NodeOutcome::Offloaded(Some(k)) => {
                                st.kernel_offloaded(tagged, t0.0, fi, Arc::clone(k))
                            }
                            _ => {}
                        }
                    }
                }
                return other;
            }
        }
        if STATS {
            if let (Some(stats), Some(start)) = (self.stats.as_mut(), start) {
                let dev = &self.step.device.memory;
                let names = (&item.name, &item.op);
                stats.record_outputs(names, start, outputs, fi, tn.is_dead, dev);
            }
        }
        if item.moves_frames {
            self.prop.propagate_outputs(plan, tn, outputs);
            clear(outputs);
            return Ok(NodeOutcome::Completed);
        }
        let activated = activation::activate(
            plan, it, ready, tn.frame, tn.iter, item, tn.is_dead, outputs,
        );
        clear(outputs);
        // This node was one of the iteration's outstanding ops.
        it.outstanding_ops = it.outstanding_ops + activated - 1;
        if it.outstanding_ops == 0 {
            self.prop.iteration_drained(plan, tn.frame, tn.iter);
        }
        Ok(NodeOutcome::Completed)
    }

    /// Runs a live node's kernel (or forwards its constant). Inlined into
    /// [`Self::process`]; references, asynchronous and expensive kernels take
    /// out-of-line paths. `others_ready`: more nodes wait in the ready queue.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn compute(
        item: &NodeItem,
        inputs: &mut [Entry],
        outputs: &mut [Entry],
        step: &Arc<StepContext>,
        fi: FrameIter,
        tn: &TaggedNode,
        host: &mut dyn ExecutorHost,
        others_ready: bool,
    ) -> Result<NodeOutcome> {
        if item.may_receive_ref && Self::read_refs(item, inputs, outputs)? {
            return Ok(NodeOutcome::Completed);
        }
        match &item.kind {
            KernelKind::Const(t) => t.clone_to(&mut outputs[0]),
            KernelKind::Route(r) => r.apply(inputs, outputs)?,
            KernelKind::Sync => {
                let mut ctx = OpKernelContext::new(inputs, outputs, step, fi, tn.is_dead, None);
                contain_panic("kernel", || item.kernel.compute(&mut ctx))?;
            }
            KernelKind::Async => {
                return Self::compute_async(item, inputs, outputs, step, fi, tn, host);
            }
            KernelKind::Expensive => {
                if others_ready && step.device.threads.inter_op {
                    return Ok(NodeOutcome::Offloaded(Self::spawn(
                        item, inputs, step, fi, tn, host,
                    )));
                }
                Self::compute_expensive(item, inputs, outputs, step, fi, tn)?;
            }
        }
        Self::check_set(item, tn, outputs)?;
        Ok(NodeOutcome::Completed)
    }

    /// Reads the variable references among `inputs` that the op takes as values;
    /// returns true when an `Identity` forwarded its reference unread instead (then
    /// its output is set).
    #[inline(never)]
    fn read_refs(item: &NodeItem, inputs: &mut [Entry], outputs: &mut [Entry]) -> Result<bool> {
        if item.forwards_ref {
            if let Some(Entry::Ref(v)) = inputs.first() {
                v.read()?; // an uninitialised variable fails here, naming this node
                outputs[0] = inputs[0].take();
                return Ok(true);
            }
        }
        for (i, e) in inputs.iter_mut().enumerate() {
            if let Entry::Ref(v) = e {
                if !item.input_is_ref[i] {
                    *e = Entry::Value(v.read()?);
                }
            }
        }
        Ok(false)
    }

    /// Runs an expensive kernel on this thread, splitting its work over the
    /// device's intra-op pool.
    #[inline(never)]
    fn compute_expensive(
        item: &NodeItem,
        inputs: &mut [Entry],
        outputs: &mut [Entry],
        step: &StepContext,
        fi: FrameIter,
        tn: &TaggedNode,
    ) -> Result<()> {
        let mut run = || {
            let mut ctx = OpKernelContext::new(inputs, outputs, step, fi, tn.is_dead, None);
            contain_panic("kernel", || item.kernel.compute(&mut ctx))
        };
        match &step.device.threads.intra_op {
            None => run(),
            Some(pool) => {
                // The pool's thread allocates the outputs: charge them as here.
                let charge = Charge::current();
                pool.install(move || {
                    let _scope = charge.map(ChargeScope::enter);
                    run()
                })
            }
        }
    }

    /// Hands an expensive kernel to the device's pool, taking its inputs: it
    /// completes through `host` as a pending asynchronous kernel does, its
    /// buffers charged as this thread's are. While the step collects statistics,
    /// returns the counter of what the kernel allocates.
    #[inline(never)]
    fn spawn(
        item: &NodeItem,
        inputs: &mut [Entry],
        step: &Arc<StepContext>,
        fi: FrameIter,
        tn: &TaggedNode,
        host: &mut dyn ExecutorHost,
    ) -> Option<Arc<MemoryCounter>> {
        let mut inputs: Outputs = inputs.iter_mut().map(Entry::take).collect();
        let mut outputs: Outputs = (0..item.num_outputs).map(|_| Entry::Empty).collect();
        let kernel = Arc::clone(&item.kernel);
        let step2 = Arc::clone(step);
        let done = host.async_done(*tn);
        let mut charge = Charge::current();
        let counter = match charge.take() {
            Some(c) if c.counts_step() => {
                let k = Arc::new(MemoryCounter::new());
                charge = Some(c.with_kernel(Arc::clone(&k)));
                Some(k)
            }
            other => {
                charge = other;
                None
            }
        };
        let is_dead = tn.is_dead;
        let job = move || {
            let _scope = charge.map(ChargeScope::enter);
            let result = {
                let mut ctx =
                    OpKernelContext::new(&mut inputs, &mut outputs, &step2, fi, is_dead, None);
                contain_panic("kernel", || kernel.compute(&mut ctx))
            };
            // The inputs' buffers are free before the consumers run.
            drop(inputs);
            done.done(result.map(|()| outputs));
        };
        match &step.device.threads.intra_op {
            None => rayon::spawn(job),
            Some(pool) => pool.spawn(job),
        }
        counter
    }

    /// Starts an asynchronous kernel; `Pending` when it finishes later.
    #[inline(never)]
    fn compute_async(
        item: &NodeItem,
        inputs: &mut [Entry],
        outputs: &mut [Entry],
        step: &StepContext,
        fi: FrameIter,
        tn: &TaggedNode,
        host: &mut dyn ExecutorHost,
    ) -> Result<NodeOutcome> {
        let k = item
            .kernel
            .as_async()
            .ok_or_else(|| Status::internal("async kernel without compute_async"))?;
        let mut make = || host.async_done(*tn);
        let mut ctx = OpKernelContext::new(inputs, outputs, step, fi, tn.is_dead, Some(&mut make));
        if contain_panic("kernel", || k.compute_async(&mut ctx))? == AsyncStatus::Pending {
            return Ok(NodeOutcome::Pending);
        }
        Self::check_set(item, tn, outputs)?;
        Ok(NodeOutcome::Completed)
    }

    /// `Internal` when a live node that may not produce dead outputs left one unset.
    #[inline(always)]
    fn check_set(item: &NodeItem, tn: &TaggedNode, outputs: &[Entry]) -> Result<()> {
        if !item.may_produce_dead && !tn.is_dead {
            if let Some(i) = outputs.iter().position(Entry::is_empty) {
                return Err(Status::internal(format!("kernel did not set output {i}")));
            }
        }
        Ok(())
    }
}

/// Empties `slots`, dropping what they hold.
#[inline(always)]
fn clear(slots: &mut [Entry]) {
    for e in slots {
        if !e.is_empty() {
            *e = Entry::Empty;
        }
    }
}

#[cfg(test)]
mod tests;
