//! [`RendezvousMgr`]: a worker's per-step rendezvous tables (TensorFlow's
//! `BaseRendezvousMgr`). On a worker of a cluster a step's table is needed by two
//! parties that do not wait for each other: the master's `RunGraph`, whose `_Send`s
//! put values in it, and a peer's `RecvTensor`, which takes one out. Whichever
//! arrives first creates the table ([`RendezvousMgr::find_or_create`]); the other
//! finds it.
//!
//! The master ends a step on every worker with `CleanupGraph`
//! ([`RendezvousMgr::cleanup`]): the table is removed and aborted, so a peer's
//! receive still pending in it completes with `Aborted` instead of waiting forever.
//! A receive that arrives after the cleanup must not create a fresh table that no
//! `_Send` will ever fill: the manager remembers the most recent cleaned-up steps
//! (a bounded window) and refuses them with `Aborted`.
//!
//! Lock order: the manager's lock is a leaf; a table is aborted, and its waiters
//! completed, after the manager's lock is released.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use graph::{Result, Status};

use crate::interface::Rendezvous;
use crate::local::LocalRendezvous;
use crate::sync::Mutex;

/// Where a worker takes each step's table from: a [`RendezvousMgr`] in a process
/// whose steps exchange only among its own devices, or a manager whose tables send
/// the receives of values produced on other tasks over the network.
pub trait StepTables: Send + Sync {
    /// The table of `step_id`, created on first use; `Aborted` once the step was
    /// cleaned up.
    fn find_or_create(&self, step_id: u64) -> Result<Arc<dyn Rendezvous>>;
    /// Ends `step_id` here (see [`RendezvousMgr::cleanup`]).
    fn cleanup(&self, step_id: u64);
}

/// How many cleaned-up step ids a manager remembers to refuse late receives.
pub const CLEANED_UP_WINDOW: usize = 4096;

#[derive(Default)]
struct State {
    tables: HashMap<u64, Arc<LocalRendezvous>>,
    cleaned: HashSet<u64>,
    cleaned_order: VecDeque<u64>,
}

/// A worker's per-step tables; see the module docs.
#[derive(Default)]
pub struct RendezvousMgr {
    state: Mutex<State>,
}

impl RendezvousMgr {
    /// An empty manager.
    pub fn new() -> RendezvousMgr {
        RendezvousMgr::default()
    }

    /// The table of `step_id`, created on first use; `Aborted` when the step was
    /// cleaned up already.
    pub fn find_or_create(&self, step_id: u64) -> Result<Arc<LocalRendezvous>> {
        let mut st = self.state.lock();
        if st.cleaned.contains(&step_id) {
            return Err(Status::aborted(format!(
                "Step {step_id} has been cleaned up on this worker: it finished or was aborted"
            )));
        }
        Ok(Arc::clone(st.tables.entry(step_id).or_default()))
    }

    /// Ends `step_id` here: forgets its table and aborts it with `Aborted`
    /// (completing any receive still waiting in it), and refuses later requests
    /// for the step. Cleaning up a step twice, or one never seen, is harmless.
    pub fn cleanup(&self, step_id: u64) {
        let table = {
            let mut st = self.state.lock();
            if st.cleaned.insert(step_id) {
                st.cleaned_order.push_back(step_id);
                if st.cleaned_order.len() > CLEANED_UP_WINDOW {
                    if let Some(old) = st.cleaned_order.pop_front() {
                        st.cleaned.remove(&old);
                    }
                }
            }
            st.tables.remove(&step_id)
        };
        if let Some(t) = table {
            t.abort(Status::aborted(format!("Cleanup {step_id}")));
        }
    }

    /// Aborts every table with `status` and forgets them (the worker is going
    /// away or its session ended).
    pub fn abort_all(&self, status: Status) {
        let tables: Vec<Arc<LocalRendezvous>> = {
            let mut st = self.state.lock();
            st.tables.drain().map(|(_, t)| t).collect()
        };
        for t in tables {
            t.abort(status.clone());
        }
    }

    /// The number of steps with a table.
    pub fn len(&self) -> usize {
        self.state.lock().tables.len()
    }

    /// True when no step has a table.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl StepTables for RendezvousMgr {
    fn find_or_create(&self, step_id: u64) -> Result<Arc<dyn Rendezvous>> {
        Ok(RendezvousMgr::find_or_create(self, step_id)?)
    }

    fn cleanup(&self, step_id: u64) {
        RendezvousMgr::cleanup(self, step_id)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::key::{FrameIter, ParsedKey};
    use graph::{Code, Tensor};
    use std::sync::mpsc;

    fn key() -> ParsedKey {
        ParsedKey::new(
            "/job:w/replica:0/task:1/device:CPU:0",
            7,
            "/job:w/replica:0/task:0/device:CPU:0",
            "x:0",
        )
        .unwrap()
    }

    #[test]
    fn the_first_of_run_and_peer_creates_the_table() {
        let m = RendezvousMgr::new();
        // A peer's receive arrives first and waits…
        let (tx, rx) = mpsc::channel();
        let pending = m
            .find_or_create(5)
            .unwrap()
            .recv(&key(), FrameIter::ROOT, || {
                Box::new(move |v| tx.send(v).unwrap())
            });
        assert!(pending.is_none());
        assert_eq!(m.len(), 1);
        // …then the step's _Send fills the same table.
        m.find_or_create(5)
            .unwrap()
            .send(&key(), FrameIter::ROOT, Some(Tensor::scalar(3i32)))
            .unwrap();
        assert_eq!(rx.recv().unwrap().unwrap(), Some(Tensor::scalar(3i32)));
        m.cleanup(5);
        assert!(m.is_empty());
    }

    #[test]
    fn cleanup_aborts_waiters_and_refuses_late_requests() {
        let m = RendezvousMgr::new();
        let (tx, rx) = mpsc::channel();
        let t = m.find_or_create(9).unwrap();
        assert!(t
            .recv(&key(), FrameIter::ROOT, || Box::new(move |v| tx
                .send(v)
                .unwrap()))
            .is_none());
        m.cleanup(9);
        let e = rx.recv().unwrap().unwrap_err();
        assert_eq!(e.code(), Code::Aborted);
        let e = m.find_or_create(9).err().expect("refused");
        assert_eq!(e.code(), Code::Aborted, "{e}");
        assert!(m.is_empty());
        m.cleanup(9); // twice: harmless
        m.cleanup(10); // never seen: harmless, and refused from now on
        assert!(m.find_or_create(10).is_err());
        assert!(m.find_or_create(11).is_ok());
    }

    #[test]
    fn the_window_of_cleaned_up_steps_is_bounded() {
        let m = RendezvousMgr::new();
        for s in 0..(CLEANED_UP_WINDOW as u64 + 10) {
            m.cleanup(s);
        }
        let st = m.state.lock();
        assert_eq!(st.cleaned.len(), CLEANED_UP_WINDOW);
        assert_eq!(st.cleaned_order.len(), CLEANED_UP_WINDOW);
        assert!(!st.cleaned.contains(&0) && st.cleaned.contains(&(CLEANED_UP_WINDOW as u64 + 9)));
    }

    #[test]
    fn abort_all_completes_every_waiter() {
        let m = RendezvousMgr::new();
        let (tx, rx) = mpsc::channel();
        for s in [1, 2] {
            let tx = tx.clone();
            assert!(m
                .find_or_create(s)
                .unwrap()
                .recv(&key(), FrameIter::ROOT, || Box::new(move |v| tx
                    .send(v)
                    .unwrap()))
                .is_none());
        }
        m.abort_all(Status::unavailable("worker shutting down"));
        for _ in 0..2 {
            assert_eq!(rx.recv().unwrap().unwrap_err().code(), Code::Unavailable);
        }
        assert!(m.is_empty());
    }
}
