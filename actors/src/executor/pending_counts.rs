//! Per-iteration pending counts, after TensorFlow's `pending_counts.h`.
//!
//! Each node of a frame has a [`PendingCount`]: how many inputs it still waits for,
//! how many arrived dead, and whether it started. Ordinary nodes wait for every
//! in-edge (data and control). A `Merge` waits for its control edges and for *one*
//! live data input: its count starts at `1 + 2 * control_edges`; a control input
//! subtracts 2, the first live data input clears bit 0, and it is ready at 0, or
//! at 1 once every data input arrived dead.
//!
//! The [`PendingCounts`] layout (one entry per node of the frame, indexed by the
//! node's `pending_id`) is built once per frame; each iteration copies it.

/// The counts of one node in one iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingCount {
    /// Inputs still awaited (for `Merge`: see the module docs).
    pub pending: u32,
    /// Inputs that arrived dead.
    pub dead: u32,
    /// Set when a `Merge` starts, so later live inputs do not schedule it again.
    pub started: bool,
}

/// What an adjustment left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdjustResult {
    /// Dead inputs so far.
    pub dead: u32,
    /// Pending count after the adjustment (for `adjust_for_mark_live`: before).
    pub pending: u32,
}

/// The pending counts of every node of a frame in one iteration.
#[derive(Clone, Debug, Default)]
pub struct PendingCounts(Vec<PendingCount>);

impl PendingCounts {
    /// Counts from their initial values.
    pub fn new(initial: Vec<PendingCount>) -> PendingCounts {
        PendingCounts(initial)
    }

    /// Resets to `initial` (same layout), reusing the allocation.
    pub fn reset_from(&mut self, initial: &PendingCounts) {
        self.0.clear();
        self.0.extend_from_slice(&initial.0);
    }

    /// The counts of node `h`.
    pub fn get(&self, h: usize) -> PendingCount {
        self.0[h]
    }

    /// An input arrived at an ordinary node (dead if `dead`).
    #[inline]
    pub fn adjust_for_activation(&mut self, h: usize, dead: bool) -> AdjustResult {
        let c = &mut self.0[h];
        c.dead += dead as u32;
        c.pending = c.pending.saturating_sub(1);
        AdjustResult {
            dead: c.dead,
            pending: c.pending,
        }
    }

    /// [`Self::adjust_for_activation`] for the common case: `Some(dead)` when node
    /// `h` became ready (`dead` when any of its inputs was), else `None`.
    #[inline(always)]
    pub fn count_down(&mut self, h: usize, dead: bool) -> Option<bool> {
        let c = &mut self.0[h];
        c.dead += dead as u32;
        c.pending = c.pending.saturating_sub(1);
        (c.pending == 0).then_some(c.dead > 0)
    }

    /// A live data input arrived at a `Merge`: clears bit 0 if it has not started,
    /// returning the count from *before* (so `pending == 1` means "now ready").
    #[inline]
    pub fn adjust_for_mark_live(&mut self, h: usize) -> AdjustResult {
        let c = &mut self.0[h];
        let mut before = 0;
        if !c.started && c.pending > 0 {
            before = c.pending;
            c.pending &= !1;
        }
        AdjustResult {
            dead: c.dead,
            pending: before,
        }
    }

    /// A dead data input arrived at a `Merge`.
    #[inline]
    pub fn adjust_for_increment_dead(&mut self, h: usize) -> AdjustResult {
        let c = &mut self.0[h];
        c.dead += 1;
        AdjustResult {
            dead: c.dead,
            pending: c.pending,
        }
    }

    /// Subtracts `by` from the pending count (a control input of a `Merge`: 2).
    #[inline]
    pub fn adjust_for_decrement_pending(&mut self, h: usize, by: u32) -> AdjustResult {
        let c = &mut self.0[h];
        c.pending = c.pending.saturating_sub(by);
        AdjustResult {
            dead: c.dead,
            pending: c.pending,
        }
    }

    /// Marks node `h` started.
    #[inline]
    pub fn mark_started(&mut self, h: usize) {
        self.0[h].started = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_counts_follow_tensorflow() {
        // a Merge with one control edge: 1 + 2 * 1
        let mut p = PendingCounts::new(vec![PendingCount {
            pending: 3,
            ..Default::default()
        }]);
        // live data input first: bit cleared, not ready (control pending)
        assert_eq!(p.adjust_for_mark_live(0).pending, 3);
        assert_eq!(p.get(0).pending, 2);
        // control input: ready at 0
        assert_eq!(p.adjust_for_decrement_pending(0, 2).pending, 0);
        // a second live input after the merge started schedules nothing
        p.mark_started(0);
        assert_eq!(p.adjust_for_mark_live(0).pending, 0);
    }

    #[test]
    fn all_dead_merge_is_ready_at_one() {
        let mut p = PendingCounts::new(vec![PendingCount {
            pending: 1,
            ..Default::default()
        }]);
        assert_eq!(
            p.adjust_for_increment_dead(0),
            AdjustResult {
                dead: 1,
                pending: 1
            }
        );
        assert_eq!(
            p.adjust_for_increment_dead(0),
            AdjustResult {
                dead: 2,
                pending: 1
            }
        );
    }

    #[test]
    fn ordinary_nodes_count_down() {
        let mut p = PendingCounts::new(vec![PendingCount {
            pending: 2,
            ..Default::default()
        }]);
        assert_eq!(
            p.adjust_for_activation(0, true),
            AdjustResult {
                dead: 1,
                pending: 1
            }
        );
        assert_eq!(
            p.adjust_for_activation(0, false),
            AdjustResult {
                dead: 1,
                pending: 0
            }
        );
        let two = PendingCounts::new(vec![
            PendingCount {
                pending: 2,
                ..Default::default()
            };
            2
        ]);
        let mut q = two.clone();
        assert_eq!(q.count_down(0, true), None);
        assert_eq!(q.count_down(0, false), Some(true), "one input was dead");
        assert_eq!(q.count_down(1, false), None);
        assert_eq!(q.count_down(1, false), Some(false), "all inputs were live");
        let init = PendingCounts::new(vec![PendingCount {
            pending: 5,
            ..Default::default()
        }]);
        p.reset_from(&init);
        assert_eq!(p.get(0).pending, 5);
    }
}
