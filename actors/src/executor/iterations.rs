//! Iteration states and where they live (TensorFlow's `IterationState`): each frame
//! instance keeps its live iterations in an `IterationRing`, and a propagator keeps
//! the states of deleted frames in an `IterationPool` for reuse, so a loop running
//! millions of iterations allocates a few states, not millions.
//!
//! Invariants:
//! - A frame's live iterations are a contiguous range; the ring's length is a power
//!   of two above their number, so two live iterations never share a slot. The ring
//!   starts with room for `parallel_iterations` up to `INITIAL_RING` slots and
//!   doubles when more iterations are alive at once: it is sized by what the step
//!   uses, never by `parallel_iterations` alone (which may be `i32::MAX`).
//! - A finished iteration's state stays in its slot, marked free, and the next
//!   iteration that lands on the slot reuses it in place; states move between frames
//!   only through the pool, by swapping with an empty slot. (Moving a state through
//!   a temporary is read back in pieces that straddle its writes, which the CPU
//!   cannot forward and waits for.)
//! - The pool counts the states frames hold and the most they held at once in a
//!   step; when a step ends, states far beyond what steps typically use are freed
//!   (`TypicalUse`).

use kernels::Entry;

use super::immutable::FrameInfo;
use super::pending_counts::PendingCounts;

/// One iteration of a frame instance.
pub struct IterationState {
    /// The iteration number (`FREE_ITERATION` when the state is free).
    pub iter_num: i64,
    /// Inputs of every node of the frame, at each node's `input_start`.
    pub input_tensors: Vec<Entry>,
    /// Pending counts of every node of the frame.
    pub pending: PendingCounts,
    pub(super) outstanding_ops: usize,
    pub(super) outstanding_frame_count: usize,
}

/// `iter_num` of a free iteration state (live iterations count from 0).
pub(super) const FREE_ITERATION: i64 = -1;

/// Ring slots a frame instance starts with at most (enough for TensorFlow's
/// default of 10 parallel iterations).
pub(super) const INITIAL_RING: usize = 16;

/// The iteration states of one frame instance, indexed by iteration number modulo
/// its power-of-two length; see the module docs.
pub(super) struct IterationRing {
    slots: Vec<Option<IterationState>>,
}

impl IterationRing {
    /// An empty ring for a frame allowing `parallel_iterations` live iterations.
    pub(super) fn new(parallel_iterations: usize) -> IterationRing {
        let len = parallel_iterations
            .saturating_add(1)
            .checked_next_power_of_two()
            .map_or(INITIAL_RING, |n| n.min(INITIAL_RING));
        IterationRing {
            slots: (0..len).map(|_| None).collect(),
        }
    }

    /// The slot of iteration `iter`.
    #[inline]
    pub(super) fn slot(&self, iter: i64) -> usize {
        iter as usize & (self.slots.len() - 1)
    }

    /// The state in `slot`.
    #[inline]
    pub(super) fn at(&mut self, slot: usize) -> &mut Option<IterationState> {
        &mut self.slots[slot]
    }

    /// Iteration `iter`, if alive.
    #[inline]
    pub(super) fn get(&self, iter: i64) -> Option<&IterationState> {
        self.slots[self.slot(iter)]
            .as_ref()
            .filter(|s| s.iter_num == iter)
    }

    /// Iteration `iter`, if alive.
    #[inline]
    pub(super) fn get_mut(&mut self, iter: i64) -> Option<&mut IterationState> {
        let s = self.slot(iter);
        self.slots[s].as_mut().filter(|s| s.iter_num == iter)
    }

    /// Frees iteration `iter`: its state stays in its slot for the next iteration
    /// that lands there.
    pub(super) fn release(&mut self, iter: i64) {
        let s = self.slot(iter);
        if let Some(st) = &mut self.slots[s] {
            st.iter_num = FREE_ITERATION;
        }
    }

    /// Makes room for one more live iteration beside `live` ones (doubling the ring
    /// when it would otherwise be full).
    #[inline]
    pub(super) fn reserve(&mut self, live: usize) {
        if live + 2 > self.slots.len() {
            self.grow();
        }
    }

    /// Doubles the ring: each live iteration moves to its slot in the new ring, the
    /// free states to empty slots.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let len = self.slots.len() * 2;
        let mut slots: Vec<Option<IterationState>> = (0..len).map(|_| None).collect();
        let mut spare = Vec::new();
        for st in self.slots.drain(..).flatten() {
            if st.iter_num == FREE_ITERATION {
                spare.push(st);
            } else {
                let s = st.iter_num as usize & (len - 1);
                slots[s] = Some(st);
            }
        }
        // Live iterations took at most half the slots; the rest hold the spares.
        let empty = slots.iter_mut().filter(|s| s.is_none());
        for (slot, st) in empty.zip(spare) {
            *slot = Some(st);
        }
        self.slots = slots;
    }

    /// The number of live iterations.
    pub(super) fn live(&self) -> usize {
        self.slots
            .iter()
            .flatten()
            .filter(|s| s.iter_num != FREE_ITERATION)
            .count()
    }
}

/// The iteration states of deleted frames, kept for reuse; see the module docs.
#[derive(Default)]
pub(super) struct IterationPool {
    /// Free states; every entry is `Some` (kept as options to swap with ring slots).
    free: Vec<Option<IterationState>>,
    /// States ever allocated (not taken from the pool).
    allocated: usize,
    /// States in frames' rings now, and the most at once since the last step ended.
    in_frames: usize,
    peak_in_frames: usize,
    typical: TypicalUse,
}

impl IterationPool {
    /// Starts iteration `iter_num` of a frame described by `fi` in `slot` (free),
    /// reusing the free state there, or one from the pool, in place; allocates one
    /// when there is neither.
    pub(super) fn start(
        &mut self,
        fi: &FrameInfo,
        iter_num: i64,
        slot: &mut Option<IterationState>,
    ) {
        if slot.is_none() {
            self.in_frames += 1;
            self.peak_in_frames = self.peak_in_frames.max(self.in_frames);
            if let Some(reused) = self.free.last_mut() {
                std::mem::swap(slot, reused);
                // drops the `None` the slot held
                self.free.truncate(self.free.len() - 1);
            }
        }
        match slot {
            Some(s) => {
                s.iter_num = iter_num;
                if s.input_tensors.len() == fi.total_inputs {
                    clear_entries(&mut s.input_tensors);
                } else {
                    s.input_tensors.clear();
                    s.input_tensors.resize(fi.total_inputs, Entry::Empty);
                }
                s.pending.reset_from(&fi.initial_pending);
                s.outstanding_ops = 0;
                s.outstanding_frame_count = 0;
            }
            None => {
                self.allocated += 1;
                *slot = Some(IterationState {
                    iter_num,
                    input_tensors: vec![Entry::Empty; fi.total_inputs],
                    pending: fi.initial_pending.clone(),
                    outstanding_ops: 0,
                    outstanding_frame_count: 0,
                });
            }
        }
    }

    /// Takes back the states of a deleted frame's ring.
    pub(super) fn take_ring(&mut self, ring: IterationRing) {
        let before = self.free.len();
        self.free
            .extend(ring.slots.into_iter().filter(Option::is_some));
        self.in_frames -= self.free.len() - before;
    }

    /// How many states were ever allocated rather than reused.
    pub(super) fn allocated(&self) -> usize {
        self.allocated
    }

    /// Ends a step whose frames were all taken back: frees states far beyond what
    /// steps typically hold at once, and with `discard_values` (a step that
    /// stopped early) drops the tensors its unfinished iterations still held.
    pub(super) fn end_step(&mut self, discard_values: bool) {
        let peak = std::mem::replace(&mut self.peak_in_frames, self.in_frames);
        if let Some(keep) = self.typical.end_step(peak, self.free.len(), 64) {
            self.free.truncate(keep);
            self.free.shrink_to(keep);
        }
        if discard_values {
            for st in self.free.iter_mut().flatten() {
                clear_entries(&mut st.input_tensors);
            }
        }
    }
}

/// Empties `entries`, dropping what they hold.
fn clear_entries(entries: &mut [Entry]) {
    for e in entries {
        if !e.is_empty() {
            *e = Entry::Empty;
        }
    }
}

/// How much of a pooled allocation later steps are likely to need: the most one
/// step used over the last `USE_WINDOW` to twice as many steps. An allocation more
/// than twice that (and above a floor) is cut back to it when a step ends, so one
/// unusually large step's memory is released within 16 steps, while steps of
/// steady size keep theirs and allocate nothing.
#[derive(Default)]
pub(super) struct TypicalUse {
    this_window: usize,
    last_window: usize,
    steps: u32,
}

/// Steps per window of `TypicalUse`.
const USE_WINDOW: u32 = 8;

impl TypicalUse {
    /// Records a step that used `peak` of an allocation now holding `retained`;
    /// returns how much to keep when `retained` is far above typical use.
    pub(super) fn end_step(&mut self, peak: usize, retained: usize, floor: usize) -> Option<usize> {
        self.this_window = self.this_window.max(peak);
        let typical = self.this_window.max(self.last_window);
        self.steps += 1;
        if self.steps == USE_WINDOW {
            self.last_window = std::mem::take(&mut self.this_window);
            self.steps = 0;
        }
        let keep = typical.saturating_mul(2).max(floor);
        (retained > keep.saturating_mul(2)).then_some(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typical_use_releases_one_large_step_and_keeps_steady_ones() {
        let mut t = TypicalUse::default();
        // steady steps of 100 keep their 100
        for _ in 0..20 {
            assert_eq!(t.end_step(100, 100, 16), None);
        }
        // one step of 100 000: kept at first (it may be the new normal)…
        assert_eq!(t.end_step(100_000, 100_000, 16), None);
        // …and released once small steps show it was not
        let released = (0..40).find_map(|i| t.end_step(100, 100_000, 16).map(|k| (i, k)));
        let (after, keep) = released.expect("released");
        assert!((7..16).contains(&after), "released after {after} steps");
        assert_eq!(keep, 200);
        // small allocations are never trimmed
        let mut t = TypicalUse::default();
        assert_eq!(t.end_step(0, 10, 16), None);
    }

    #[test]
    fn rings_grow_by_use_and_keep_live_iterations_apart() {
        let fi = FrameInfo {
            name: "f".into(),
            name_hash: 0,
            parent: None,
            parallel_iterations: usize::MAX,
            nodes: vec![],
            total_inputs: 2,
            input_count: 0,
            initial_pending: PendingCounts::default(),
        };
        let mut ring = IterationRing::new(fi.parallel_iterations);
        assert_eq!(ring.slots.len(), INITIAL_RING);
        assert_eq!(IterationRing::new(1).slots.len(), 2);
        let mut pool = IterationPool::default();
        // iterations 0..100 alive at once, the oldest 40 finished
        for i in 0..100i64 {
            ring.reserve(i as usize);
            let s = ring.slot(i);
            pool.start(&fi, i, ring.at(s));
        }
        assert_eq!(ring.slots.len(), 128);
        for i in 0..40 {
            ring.release(i);
        }
        assert_eq!(ring.live(), 60);
        for i in 40..100 {
            assert_eq!(ring.get(i).map(|s| s.iter_num), Some(i));
        }
        // 60 live iterations at a time: the ring holds at most one state per slot,
        // however many iterations run
        for i in 100..1000i64 {
            ring.reserve(ring.live());
            let s = ring.slot(i);
            pool.start(&fi, i, ring.at(s));
            ring.release(i - 60);
            assert_eq!(ring.live(), 60);
        }
        assert_eq!(ring.slots.len(), 128);
        assert_eq!(pool.allocated(), 128);
        pool.take_ring(ring);
        assert_eq!((pool.in_frames, pool.free.len()), (0, 128));
    }
}
