//! Delivering a finished node's outputs within one iteration (TensorFlow's
//! `ActivateNodes`): the [`ReadyQueue`] of [`TaggedNode`]s and `activate`, which
//! writes each output into its consumers' input slots, counts the consumers down
//! and queues those that became ready. The fast path serves nodes without a `Merge`
//! or `ControlTrigger` consumer; the slow path implements those two's rules (see
//! [`pending_counts`](super::pending_counts)).

use kernels::Entry;

use super::immutable::{ExecutorPlan, NodeItem};
use super::pending_counts::PendingCounts;
use super::propagator::IterationState;

/// A node scheduled in a frame instance and iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaggedNode {
    /// The node.
    pub node: usize,
    /// The frame instance (index into the propagator's frames).
    pub frame: usize,
    /// The iteration.
    pub iter: i64,
    /// True when the node runs dead.
    pub is_dead: bool,
}

/// Ready nodes, FIFO: a vector with a front index (TensorFlow's ready queue).
///
/// Memory is bounded by the nodes queued at once, not by the nodes a step runs: the
/// vector is reset when drained, and a push that finds it full first moves the
/// queued nodes to the front when at least half of it is nodes already taken. Such
/// a compaction moves fewer nodes than were taken since the last one, so pushes stay
/// amortised O(1); beyond `MIN_READY_CAPACITY` (256) slots the vector grows only when more than
/// half of it is queued, so its capacity stays below four times the most nodes
/// queued at once. (Inside a loop the queue is seldom empty: without compaction it
/// grew by every node the loop ran.)
///
/// A queued node is packed into two words: its id, its frame instance and its
/// deadness in the first, its iteration in the second. A node is usually taken right
/// after it was queued; reading two words back as the two words that were stored
/// (not a 32-byte struct through 16-byte moves that straddle the stores) lets the
/// CPU forward the loads from the stores still in flight.
#[derive(Default)]
pub struct ReadyQueue {
    items: Vec<PackedNode>,
    front: usize,
    /// The longest `items` has been since [`ReadyQueue::take_peak`] (observed when
    /// it is drained or compacted, off the hot path).
    peak: usize,
}

#[derive(Clone, Copy)]
struct PackedNode {
    node_frame_dead: u64,
    iter: i64,
}

/// Slots a ready queue grows to before it compacts (4 KiB).
const MIN_READY_CAPACITY: usize = 256;

// The executor's cancellation check relies on the queue taking at least
// CANCELLATION_CHECK_INTERVAL nodes between two compactions.
const _: () = assert!(MIN_READY_CAPACITY / 2 >= super::CANCELLATION_CHECK_INTERVAL);

const DEAD_BIT: u64 = 1 << 63;
const FRAME_MASK: u64 = (1 << 31) - 1;

impl ReadyQueue {
    /// Appends a node.
    #[inline]
    pub fn push(&mut self, t: TaggedNode) {
        // Node ids are checked to fit in u32 when the plan is built; frame instance
        // indices are bounded by the memory their states take.
        assert!(
            t.node <= u32::MAX as usize && t.frame as u64 <= FRAME_MASK,
            "invariant: node ids below 2^32 and frame instances below 2^31"
        );
        let p = PackedNode {
            node_frame_dead: t.node as u64 | (t.frame as u64) << 32 | (t.is_dead as u64) << 63,
            iter: t.iter,
        };
        if self.items.len() == self.items.capacity() {
            self.make_room_and_push(p);
        } else {
            // (the vector's own capacity check folds into the one above)
            self.items.push(p);
        }
    }

    #[cold]
    #[inline(never)]
    fn make_room_and_push(&mut self, p: PackedNode) {
        self.make_room();
        self.items.push(p);
    }

    /// Called when the vector is full: compacts it when at least half of it is
    /// nodes already taken, else grows it (to `MIN_READY_CAPACITY` at first, so
    /// that a queue holding a few nodes compacts once per hundreds of pushes).
    fn make_room(&mut self) {
        let len = self.items.len();
        self.peak = self.peak.max(len);
        if len >= MIN_READY_CAPACITY && self.front >= len / 2 {
            self.items.copy_within(self.front.., 0);
            self.items.truncate(len - self.front);
            self.front = 0;
        } else {
            self.items.reserve(len.max(MIN_READY_CAPACITY));
        }
    }

    /// Takes the next node.
    #[inline]
    pub fn pop(&mut self) -> Option<TaggedNode> {
        match self.items.get(self.front) {
            Some(p) => {
                let (w, iter) = (p.node_frame_dead, p.iter);
                self.front += 1;
                Some(TaggedNode {
                    node: (w as u32) as usize,
                    frame: ((w >> 32) & FRAME_MASK) as usize,
                    iter,
                    is_dead: w & DEAD_BIT != 0,
                })
            }
            None => {
                self.clear();
                None
            }
        }
    }

    /// Nodes taken since the queue was last compacted or drained. A compaction
    /// happens only once `MIN_READY_CAPACITY / 2` (128) or more were taken, so this
    /// passes every multiple of 128 on the way.
    #[inline]
    pub fn taken(&self) -> usize {
        self.front
    }

    /// The number of queued nodes.
    pub fn len(&self) -> usize {
        self.items.len() - self.front
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every queued node.
    pub fn clear(&mut self) {
        self.peak = self.peak.max(self.items.len());
        self.items.clear();
        self.front = 0;
    }

    /// The nodes the queue can hold without allocating.
    pub fn capacity(&self) -> usize {
        self.items.capacity()
    }

    /// The most slots the queue used since the last call (queued nodes and, until a
    /// compaction or drain, taken ones), counted when it was drained or compacted.
    pub fn take_peak(&mut self) -> usize {
        std::mem::take(&mut self.peak).max(self.items.len())
    }

    /// Releases capacity beyond `keep` slots (and beyond what is queued).
    pub fn shrink_to(&mut self, keep: usize) {
        self.peak = self.peak.max(self.items.len());
        if self.front > 0 {
            self.items.drain(..self.front);
            self.front = 0;
        }
        self.items.shrink_to(keep);
    }
}

/// Writes an output into a consumer's input slot: moved along its last out-edge,
/// cloned along the others.
#[inline(always)]
fn deliver(out: &mut Entry, slot: &mut Entry, is_last: bool) {
    if is_last {
        slot.move_from(out);
    } else {
        out.clone_to(slot);
    }
}

/// Delivers `outputs` of `item` to its consumers in one iteration (TensorFlow's
/// `ActivateNodesFastPath`/`SlowPath`); returns how many became ready.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn activate(
    plan: &ExecutorPlan,
    it: &mut IterationState,
    ready: &mut ReadyQueue,
    frame: usize,
    iter: i64,
    item: &NodeItem,
    is_dead: bool,
    outputs: &mut [Entry],
) -> usize {
    if item.any_consumer_merge_or_trigger {
        activate_slow(plan, it, ready, frame, iter, item, is_dead, outputs)
    } else {
        activate_fast(plan, it, ready, frame, iter, item, is_dead, outputs)
    }
}

/// [`activate`] when no consumer is a `Merge` or `ControlTrigger`: every input
/// counts down its consumer, which is dead when any input was.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn activate_fast(
    plan: &ExecutorPlan,
    it: &mut IterationState,
    ready: &mut ReadyQueue,
    frame: usize,
    iter: i64,
    item: &NodeItem,
    is_dead: bool,
    outputs: &mut [Entry],
) -> usize {
    let before = ready.len();
    let edges = &plan.edges[item.out_edges.clone()];
    let pending: &mut PendingCounts = &mut it.pending;
    for e in edges {
        let out = &mut outputs[e.src_slot as usize];
        let dead = is_dead || out.is_empty();
        deliver(out, &mut it.input_tensors[e.input_slot as usize], e.is_last);
        if let Some(dead) = pending.count_down(e.dst_pending as usize, dead) {
            ready.push(TaggedNode {
                node: e.dst as usize,
                frame,
                iter,
                is_dead: dead,
            });
        }
    }
    for c in &plan.control_edges[item.out_control.clone()] {
        if let Some(dead) = pending.count_down(c.dst_pending as usize, is_dead) {
            ready.push(TaggedNode {
                node: c.dst as usize,
                frame,
                iter,
                is_dead: dead,
            });
        }
    }
    ready.len() - before
}

/// [`activate`] when some consumer is a `Merge` or `ControlTrigger`.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn activate_slow(
    plan: &ExecutorPlan,
    it: &mut IterationState,
    ready: &mut ReadyQueue,
    frame: usize,
    iter: i64,
    item: &NodeItem,
    is_dead: bool,
    outputs: &mut [Entry],
) -> usize {
    let mut activated = 0;
    let mut push = |node: u32, dead: bool| {
        ready.push(TaggedNode {
            node: node as usize,
            frame,
            iter,
            is_dead: dead,
        });
        activated += 1;
    };
    let edges = &plan.edges[item.out_edges.clone()];
    let controls = &plan.control_edges[item.out_control.clone()];
    let pending: &mut PendingCounts = &mut it.pending;
    for e in edges {
        let dst = &plan.nodes[e.dst as usize];
        let dst_pending = e.dst_pending as usize;
        let out = &mut outputs[e.src_slot as usize];
        let (ready_now, mut dst_dead);
        if dst.is_merge {
            if !out.is_empty() && !is_dead {
                deliver(out, &mut it.input_tensors[e.input_slot as usize], e.is_last);
                let r = pending.adjust_for_mark_live(dst_pending);
                ready_now = r.pending == 1;
                dst_dead = false;
            } else {
                let r = pending.adjust_for_increment_dead(dst_pending);
                dst_dead = r.dead as usize == dst.num_inputs || item.is_enter;
                ready_now = r.pending == 1 && dst_dead;
            }
        } else {
            let dead = is_dead || out.is_empty();
            deliver(out, &mut it.input_tensors[e.input_slot as usize], e.is_last);
            let r = pending.adjust_for_activation(dst_pending, dead);
            dst_dead = r.dead > 0;
            ready_now = r.pending == 0;
        }
        if ready_now {
            if dst.is_control_trigger {
                dst_dead = false;
            }
            push(e.dst, dst_dead);
        }
    }
    for c in controls {
        let dst = &plan.nodes[c.dst as usize];
        let dst_pending = c.dst_pending as usize;
        let (ready_now, mut dst_dead);
        if dst.is_merge {
            let r = pending.adjust_for_decrement_pending(dst_pending, 2);
            dst_dead = r.dead as usize == dst.num_inputs;
            ready_now = r.pending == 0 || (r.pending == 1 && dst_dead);
        } else {
            let r = pending.adjust_for_activation(dst_pending, is_dead);
            dst_dead = r.dead > 0;
            ready_now = r.pending == 0;
        }
        if ready_now {
            if dst.is_control_trigger {
                dst_dead = false;
            }
            push(c.dst, dst_dead);
        }
    }
    activated
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: usize) -> TaggedNode {
        TaggedNode {
            node: i % 1000,
            frame: i % 7,
            iter: i as i64,
            is_dead: i % 3 == 1,
        }
    }

    /// A queue that is never empty (as inside a loop) keeps its order across
    /// compactions and holds a few times the nodes queued at once, not every node
    /// that passed through it.
    #[test]
    fn a_queue_that_never_drains_stays_small_and_fifo() {
        let mut q = ReadyQueue::default();
        let (mut pushed, mut popped) = (0, 0);
        for round in 0..200_000 {
            // between 1 and 40 nodes queued at once
            let live = 1 + round % 40;
            while q.len() < live {
                q.push(node(pushed));
                pushed += 1;
            }
            while q.len() > live / 2 {
                assert_eq!(q.pop(), Some(node(popped)));
                popped += 1;
            }
        }
        assert!(pushed > 1_000_000);
        assert!(
            q.capacity() <= MIN_READY_CAPACITY.max(4 * 40),
            "capacity {}",
            q.capacity()
        );
        while let Some(n) = q.pop() {
            assert_eq!(n, node(popped));
            popped += 1;
        }
        assert_eq!((popped, q.len()), (pushed, 0));
    }

    #[test]
    fn peak_counts_the_slots_used_and_shrink_keeps_queued_nodes() {
        let mut q = ReadyQueue::default();
        for i in 0..1000 {
            q.push(node(i));
        }
        for i in 0..990 {
            assert_eq!(q.pop(), Some(node(i)));
        }
        q.shrink_to(16);
        assert!(q.capacity() < 1000);
        for i in 990..1000 {
            assert_eq!(q.pop(), Some(node(i)));
        }
        assert_eq!(q.pop(), None);
        assert_eq!(q.take_peak(), 1000);
        assert_eq!(q.take_peak(), 0);
    }
}
