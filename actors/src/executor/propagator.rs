//! Per-step propagation state (TensorFlow's `PropagatorState`): frame instances,
//! their iterations (input arrays and pending counts; see
//! [`iterations`](super::iterations)), and the ready queue
//! ([`activation`](super::activation) delivers outputs within one iteration).
//!
//! Semantics follow TensorFlow's executor exactly:
//! - A node becomes ready when its pending count reaches zero; it is *dead* if any
//!   input (or control input) was dead. A dead node's kernel does not run (transfer
//!   nodes excepted); all its outputs are dead.
//! - `Merge` is ready on its first live data input, or dead once all data inputs
//!   arrived dead, after its control inputs.
//! - `Enter` moves a value into a child frame instance, keyed by (parent frame,
//!   parent iteration, frame); a constant `Enter` feeds every iteration. `Exit`
//!   moves it to the parent; dead `Exit`s of the last iteration propagate deadness
//!   to the parent when the frame is deleted. `NextIteration` moves it to the next
//!   iteration, deferring when `parallel_iterations` are live.
//! - An iteration is done when it has no outstanding ops or child frames and its
//!   predecessor is done; a frame is done when all its `Enter`s ran and all its
//!   iterations are done. Done iterations and frames are freed immediately, so a
//!   long loop uses constant memory.
//!
//! A state is pooled by its plan between steps ([`PropagatorState::end_step`],
//! [`PropagatorState::reset`]); when a step ends, allocations far above what the
//! plan's steps typically use are trimmed, so memory follows live work.
//!
//! The state is owned by one executor on one thread: no locks.

use std::collections::HashMap;

use kernels::{Entry, Outputs};

use super::activation::activate;
pub use super::activation::{ReadyQueue, TaggedNode};
use super::immutable::{hash64_combine, ExecutorPlan, NodeItem};
pub use super::iterations::IterationState;
use super::iterations::{IterationPool, IterationRing, TypicalUse};

/// One instance of a loop frame (or the root frame).
pub struct FrameState {
    /// Index of its [`FrameInfo`](super::immutable::FrameInfo).
    pub info: usize,
    /// The instance's id in rendezvous keys (0 for the root).
    pub frame_id: u64,
    parent: Option<(usize, i64)>,
    iterations: IterationRing,
    iteration_count: i64,
    num_outstanding_iterations: usize,
    max_parallel_iterations: usize,
    num_pending_inputs: usize,
    dead_exits: Vec<usize>,
    next_iter_roots: Vec<(usize, Entry)>,
    inv_values: Vec<(usize, Entry)>,
}

impl FrameState {
    fn iteration(&self, iter: i64) -> Option<&IterationState> {
        self.iterations.get(iter)
    }

    fn iteration_mut(&mut self, iter: i64) -> Option<&mut IterationState> {
        self.iterations.get_mut(iter)
    }

    /// True when iteration `iter` is alive and done: no outstanding ops or child
    /// frames, and its predecessor done (for iteration 0: every `Enter` ran).
    fn is_iteration_done(&self, iter: i64) -> bool {
        let Some(it) = self.iteration(iter) else {
            return false;
        };
        if it.outstanding_ops != 0 || it.outstanding_frame_count != 0 {
            return false;
        }
        if iter == 0 {
            self.num_pending_inputs == 0
        } else {
            self.iteration(iter - 1).is_none()
        }
    }
}

/// The propagation state of one executor for one step; see the module docs.
#[derive(Default)]
pub struct PropagatorState {
    frames: Vec<Option<FrameState>>,
    free_frames: Vec<usize>,
    frame_index: HashMap<(usize, i64, usize), usize>,
    /// Iteration states of deleted frames, for reuse.
    iteration_pool: IterationPool,
    /// Typical peak of live frame instances, to trim `frames` (see [`TypicalUse`]).
    frames_use: TypicalUse,
    /// Typical peak length of the ready queue, to trim it.
    ready_use: TypicalUse,
    /// Nodes ready to run.
    pub ready: ReadyQueue,
}

impl PropagatorState {
    /// The state at step start: the root frame with iteration 0, its input slots
    /// holding the plan's folded constants.
    pub fn new(plan: &ExecutorPlan) -> PropagatorState {
        let mut p = PropagatorState::default();
        p.reset(plan);
        p
    }

    /// Resets a used state for a new step of the same plan, keeping its allocations.
    pub fn reset(&mut self, plan: &ExecutorPlan) {
        self.release_frames();
        self.ready.clear();
        let mut root = self.new_frame(plan, 0, 0, None);
        if let Some(it) = root.iterations.get_mut(0) {
            for (slot, t) in &plan.const_fills {
                it.input_tensors[*slot] = Entry::Value(t.clone());
            }
        }
        self.frames.push(Some(root));
    }

    /// Ends a step: returns every frame's iteration states to the pool and trims
    /// what is far above what this plan's steps typically use (the ready queue,
    /// pooled iteration states, frame slots), so that one unusually large step does
    /// not pin its memory for the life of the plan. `stopped_early`: the step failed
    /// or was cancelled, so unfinished iterations may still hold tensors; they are
    /// dropped now rather than when their state is reused.
    pub fn end_step(&mut self, stopped_early: bool) {
        // Frames are only appended when no slot is free: the length is the most
        // frame instances alive at once.
        let peak_frames = self.frames.len();
        self.release_frames();
        if let Some(keep) = self
            .frames_use
            .end_step(peak_frames, self.frames.capacity(), 64)
        {
            self.frames.shrink_to(keep);
            self.free_frames.shrink_to(keep);
            self.frame_index.shrink_to(keep);
        }
        self.ready.clear();
        let peak_ready = self.ready.take_peak();
        if let Some(keep) = self
            .ready_use
            .end_step(peak_ready, self.ready.capacity(), 1024)
        {
            self.ready.shrink_to(keep);
        }
        self.iteration_pool.end_step(stopped_early);
    }

    /// Returns the states of every frame to the pool.
    fn release_frames(&mut self) {
        for f in self.frames.drain(..).flatten() {
            self.iteration_pool.take_ring(f.iterations);
        }
        self.free_frames.clear();
        self.frame_index.clear();
    }

    fn new_frame(
        &mut self,
        plan: &ExecutorPlan,
        info: usize,
        frame_id: u64,
        parent: Option<(usize, i64)>,
    ) -> FrameState {
        let fi = &plan.frames[info];
        let max_parallel = fi.parallel_iterations.max(1);
        let mut iterations = IterationRing::new(max_parallel);
        let s = iterations.slot(0);
        self.iteration_pool.start(fi, 0, iterations.at(s));
        FrameState {
            info,
            frame_id,
            parent,
            iterations,
            iteration_count: 0,
            num_outstanding_iterations: 1,
            max_parallel_iterations: max_parallel,
            num_pending_inputs: fi.input_count,
            dead_exits: vec![],
            next_iter_roots: vec![],
            inv_values: vec![],
        }
    }

    /// The frame instance at `idx`.
    pub fn frame(&self, idx: usize) -> Option<&FrameState> {
        self.frames.get(idx).and_then(Option::as_ref)
    }

    fn frame_mut(&mut self, idx: usize) -> &mut FrameState {
        self.frames[idx]
            .as_mut()
            .expect("invariant: a scheduled node's frame is alive until its ops are done")
    }

    /// The iteration state a tagged node runs in.
    pub fn iteration_mut(&mut self, frame: usize, iter: i64) -> &mut IterationState {
        self.frame_mut(frame)
            .iteration_mut(iter)
            .expect("invariant: an iteration with outstanding ops is alive")
    }

    /// What running a node scheduled in (`frame`, `iter`) needs, from one lookup: the
    /// frame instance's id, the iteration (the node's inputs, and for a node that
    /// stays in its iteration the consumers' inputs and counts too) and the ready
    /// queue.
    #[inline]
    pub(super) fn node_state(
        &mut self,
        frame: usize,
        iter: i64,
    ) -> (u64, &mut IterationState, &mut ReadyQueue) {
        let f = self.frames[frame]
            .as_mut()
            .expect("invariant: a scheduled node's frame is alive until its ops are done");
        let frame_id = f.frame_id;
        let it = f
            .iteration_mut(iter)
            .expect("invariant: an iteration with outstanding ops is alive");
        (frame_id, it, &mut self.ready)
    }

    /// Called when a node that stayed in its iteration left the iteration with no
    /// outstanding ops: frees the iterations (and the frame) this completes.
    #[inline(never)]
    pub(super) fn iteration_drained(&mut self, plan: &ExecutorPlan, frame: usize, iter: i64) {
        if self.cleanup_iterations(plan, frame, iter) {
            self.frame_done(plan, frame);
        }
    }

    fn frame_done(&mut self, plan: &ExecutorPlan, frame: usize) {
        let parent = self.frame_mut(frame).parent;
        self.delete_frame(plan, frame);
        if let Some((pf, pi)) = parent {
            self.cleanup_frames_iterations(plan, pf, pi);
        }
    }

    /// The number of live frame instances (for tests of memory use).
    pub fn live_frames(&self) -> usize {
        self.frames.iter().filter(|f| f.is_some()).count()
    }

    /// How many iteration states were ever allocated rather than reused: bounded by
    /// the live iterations at any one time, however many iterations ran.
    pub fn iterations_allocated(&self) -> usize {
        self.iteration_pool.allocated()
    }

    /// The number of live iterations over all frames.
    pub fn live_iterations(&self) -> usize {
        self.frames
            .iter()
            .flatten()
            .map(|f| f.iterations.live())
            .sum()
    }

    /// Schedules the root nodes; returns how many.
    pub fn activate_roots(&mut self, plan: &ExecutorPlan) -> usize {
        for &n in &plan.root_nodes {
            self.ready.push(TaggedNode {
                node: n,
                frame: 0,
                iter: 0,
                is_dead: false,
            });
        }
        let n = plan.root_nodes.len();
        if let Some(it) = self.frame_mut(0).iteration_mut(0) {
            it.outstanding_ops = n;
        }
        n
    }

    /// Propagates a finished node's outputs along its out-edges, scheduling nodes
    /// that become ready, and frees iterations and frames that this completes.
    pub fn propagate_outputs(
        &mut self,
        plan: &ExecutorPlan,
        tn: TaggedNode,
        outputs: &mut [Entry],
    ) {
        let item = &plan.nodes[tn.node];
        let (frame, iter, is_dead) = (tn.frame, tn.iter, tn.is_dead);
        let is_frame_done;
        if !item.is_enter_exit_or_next_iter() {
            is_frame_done =
                self.activate_nodes_and_adjust(plan, frame, iter, item, is_dead, outputs, 1);
        } else if item.is_enter {
            let child = self.find_or_create_child_frame(plan, frame, iter, item);
            if item.is_constant_enter {
                let v = outputs.first().cloned().unwrap_or_default();
                self.add_loop_inv(plan, child, tn.node, v);
            } else {
                let activated = self.activate_nodes(plan, child, 0, item, is_dead, outputs);
                self.adjust_outstanding_ops(plan, child, 0, activated as isize);
            }
            self.frame_mut(child).num_pending_inputs -= 1;
            is_frame_done = self.adjust_outstanding_ops(plan, frame, iter, -1);
        } else if item.is_exit {
            if is_dead {
                let f = self.frame_mut(frame);
                if iter == f.iteration_count {
                    f.dead_exits.push(tn.node);
                }
            } else if let Some((pf, pi)) = self.frame_mut(frame).parent {
                let _ = self.activate_nodes_and_adjust(plan, pf, pi, item, false, outputs, 0);
            }
            is_frame_done = self.adjust_outstanding_ops(plan, frame, iter, -1);
        } else {
            // NextIteration
            if !is_dead {
                let f = self.frame_mut(frame);
                if iter == f.iteration_count {
                    if f.num_outstanding_iterations == f.max_parallel_iterations {
                        let v = outputs.first_mut().map(Entry::take).unwrap_or_default();
                        f.next_iter_roots.push((tn.node, v));
                    } else {
                        let next = self.increment_iteration(plan, frame);
                        let activated =
                            self.activate_nodes(plan, frame, next, item, false, outputs);
                        self.adjust_outstanding_ops(plan, frame, next, activated as isize);
                    }
                } else {
                    let _ = self.activate_nodes_and_adjust(
                        plan,
                        frame,
                        iter + 1,
                        item,
                        false,
                        outputs,
                        0,
                    );
                }
            }
            is_frame_done = self.adjust_outstanding_ops(plan, frame, iter, -1);
        }
        if is_frame_done {
            self.frame_done(plan, frame);
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn activate_nodes_and_adjust(
        &mut self,
        plan: &ExecutorPlan,
        frame: usize,
        iter: i64,
        item: &NodeItem,
        is_dead: bool,
        outputs: &mut [Entry],
        decrement: isize,
    ) -> bool {
        let f = self.frames[frame]
            .as_mut()
            .expect("invariant: activation targets a live frame");
        let it = f
            .iteration_mut(iter)
            .expect("invariant: activation targets a live iteration");
        let activated = activate(
            plan,
            it,
            &mut self.ready,
            frame,
            iter,
            item,
            is_dead,
            outputs,
        ) as isize;
        it.outstanding_ops = (it.outstanding_ops as isize + activated - decrement) as usize;
        if it.outstanding_ops != 0 {
            return false;
        }
        if decrement > 0 {
            self.cleanup_iterations(plan, frame, iter)
        } else {
            true
        }
    }

    /// Delivers `outputs` of `item` to its consumers in (`frame`, `iter`); returns how
    /// many became ready.
    fn activate_nodes(
        &mut self,
        plan: &ExecutorPlan,
        frame: usize,
        iter: i64,
        item: &NodeItem,
        is_dead: bool,
        outputs: &mut [Entry],
    ) -> usize {
        let f = self.frames[frame]
            .as_mut()
            .expect("invariant: activation targets a live frame");
        let it = f
            .iteration_mut(iter)
            .expect("invariant: activation targets a live iteration");
        activate(
            plan,
            it,
            &mut self.ready,
            frame,
            iter,
            item,
            is_dead,
            outputs,
        )
    }

    /// Adds `delta` to an iteration's outstanding ops; at zero, frees what is done.
    /// Returns true when the frame is done.
    fn adjust_outstanding_ops(
        &mut self,
        plan: &ExecutorPlan,
        frame: usize,
        iter: i64,
        delta: isize,
    ) -> bool {
        let it = self.iteration_mut(frame, iter);
        it.outstanding_ops = (it.outstanding_ops as isize + delta) as usize;
        if it.outstanding_ops != 0 {
            return false;
        }
        self.cleanup_iterations(plan, frame, iter)
    }

    fn cleanup_iterations(&mut self, plan: &ExecutorPlan, frame: usize, iter: i64) -> bool {
        let mut curr = iter;
        loop {
            let f = self.frames[frame]
                .as_mut()
                .expect("invariant: a frame with outstanding iterations is alive");
            if curr > f.iteration_count || !f.is_iteration_done(curr) {
                return f.num_pending_inputs == 0 && f.num_outstanding_iterations == 0;
            }
            f.iterations.release(curr);
            f.num_outstanding_iterations -= 1;
            curr += 1;
            if !f.next_iter_roots.is_empty() {
                self.increment_iteration(plan, frame);
            }
        }
    }

    fn increment_iteration(&mut self, plan: &ExecutorPlan, frame: usize) -> i64 {
        let f = self.frames[frame]
            .as_mut()
            .expect("invariant: a frame with a running NextIteration is alive");
        let next = f.iteration_count + 1;
        f.iterations.reserve(f.num_outstanding_iterations);
        let s = f.iterations.slot(next);
        self.iteration_pool
            .start(&plan.frames[f.info], next, f.iterations.at(s));
        f.iteration_count = next;
        f.num_outstanding_iterations += 1;
        f.dead_exits.clear();
        // Deferred NextIteration values, then loop invariants, enter the new iteration
        // (no allocation per iteration: the roots' buffer goes back to the frame, and
        // the invariants are read in place).
        let mut activated = 0;
        if !f.next_iter_roots.is_empty() {
            let mut roots = std::mem::take(&mut f.next_iter_roots);
            for (node, entry) in roots.drain(..) {
                let dead = entry.is_empty();
                let mut outs = [entry];
                activated +=
                    self.activate_nodes(plan, frame, next, &plan.nodes[node], dead, &mut outs);
            }
            let f = self.frame_mut(frame);
            if f.next_iter_roots.is_empty() {
                f.next_iter_roots = roots;
            }
        }
        self.adjust_outstanding_ops(plan, frame, next, activated as isize);
        let f = self.frames[frame]
            .as_mut()
            .expect("invariant: a frame with a running NextIteration is alive");
        if !f.inv_values.is_empty() {
            let FrameState {
                iterations,
                inv_values,
                ..
            } = f;
            let it = iterations
                .get_mut(next)
                .expect("invariant: activation targets a live iteration");
            let mut activated = 0;
            for (node, entry) in inv_values.iter() {
                let mut outs = [Entry::Empty];
                entry.clone_to(&mut outs[0]);
                let item = &plan.nodes[*node];
                let dead = entry.is_empty();
                activated += activate(
                    plan,
                    it,
                    &mut self.ready,
                    frame,
                    next,
                    item,
                    dead,
                    &mut outs,
                );
            }
            self.adjust_outstanding_ops(plan, frame, next, activated as isize);
        } else {
            self.adjust_outstanding_ops(plan, frame, next, 0);
        }
        next
    }

    fn add_loop_inv(&mut self, plan: &ExecutorPlan, frame: usize, node: usize, entry: Entry) {
        let dead = entry.is_empty();
        let f = self.frame_mut(frame);
        f.inv_values.push((node, entry.clone()));
        let count = f.iteration_count;
        for i in 0..=count {
            if self.frame(frame).and_then(|f| f.iteration(i)).is_none() {
                continue;
            }
            let mut outs = Outputs::new();
            outs.push(entry.clone());
            let activated =
                self.activate_nodes(plan, frame, i, &plan.nodes[node], dead, &mut outs[..]);
            self.adjust_outstanding_ops(plan, frame, i, activated as isize);
        }
    }

    fn find_or_create_child_frame(
        &mut self,
        plan: &ExecutorPlan,
        frame: usize,
        iter: i64,
        item: &NodeItem,
    ) -> usize {
        let key = (frame, iter, item.enter_frame);
        if let Some(&c) = self.frame_index.get(&key) {
            return c;
        }
        let parent_id = self.frame_mut(frame).frame_id;
        let info = &plan.frames[item.enter_frame];
        let id = hash64_combine(parent_id, hash64_combine(iter as u64, info.name_hash));
        let child = self.new_frame(plan, item.enter_frame, id, Some((frame, iter)));
        let idx = match self.free_frames.pop() {
            Some(i) => {
                self.frames[i] = Some(child);
                i
            }
            None => {
                self.frames.push(Some(child));
                self.frames.len() - 1
            }
        };
        self.frame_index.insert(key, idx);
        self.iteration_mut(frame, iter).outstanding_frame_count += 1;
        idx
    }

    fn delete_frame(&mut self, plan: &ExecutorPlan, frame: usize) {
        let Some(f) = self.frames[frame].take() else {
            return;
        };
        if let Some((pf, pi)) = f.parent {
            self.frame_index.remove(&(pf, pi, f.info));
            // Dead exits of the last iteration make their consumers in the parent dead.
            for &node in &f.dead_exits {
                let item = &plan.nodes[node];
                let it = self.iteration_mut(pf, pi);
                let mut newly = Vec::new();
                for e in &plan.edges[item.out_edges.clone()] {
                    let dst = &plan.nodes[e.dst as usize];
                    let (ready_now, mut dst_dead);
                    if dst.is_merge {
                        let r = it.pending.adjust_for_increment_dead(dst.pending_id);
                        dst_dead = r.dead as usize == dst.num_inputs;
                        ready_now = r.pending == 1 && dst_dead;
                    } else {
                        let r = it.pending.adjust_for_activation(dst.pending_id, true);
                        dst_dead = true;
                        ready_now = r.pending == 0;
                    }
                    if ready_now {
                        if dst.is_control_trigger {
                            dst_dead = false;
                        }
                        newly.push((e.dst as usize, dst_dead));
                    }
                }
                for c in &plan.control_edges[item.out_control.clone()] {
                    let dst_id = c.dst as usize;
                    let dst = &plan.nodes[dst_id];
                    let (ready_now, mut dst_dead);
                    if dst.is_merge {
                        let r = it.pending.adjust_for_decrement_pending(dst.pending_id, 2);
                        dst_dead = r.dead as usize == dst.num_inputs;
                        ready_now = r.pending == 0 || (r.pending == 1 && dst_dead);
                    } else {
                        let r = it.pending.adjust_for_activation(dst.pending_id, true);
                        dst_dead = true;
                        ready_now = r.pending == 0;
                    }
                    if ready_now {
                        if dst.is_control_trigger {
                            dst_dead = false;
                        }
                        newly.push((dst_id, dst_dead));
                    }
                }
                it.outstanding_ops += newly.len();
                for (node, dead) in newly {
                    self.ready.push(TaggedNode {
                        node,
                        frame: pf,
                        iter: pi,
                        is_dead: dead,
                    });
                }
            }
        }
        self.iteration_pool.take_ring(f.iterations);
        if frame != 0 {
            self.free_frames.push(frame);
        }
    }

    fn cleanup_frames_iterations(&mut self, plan: &ExecutorPlan, frame: usize, iter: i64) {
        self.iteration_mut(frame, iter).outstanding_frame_count -= 1;
        if self.cleanup_iterations(plan, frame, iter) {
            let parent = self.frame_mut(frame).parent;
            self.delete_frame(plan, frame);
            if let Some((pf, pi)) = parent {
                self.cleanup_frames_iterations(plan, pf, pi);
            }
        }
    }
}
