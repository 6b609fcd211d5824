//! [`CancellationManager`]: callbacks to run when a step is cancelled (aborted by an
//! error elsewhere, timed out, or its runtime stopping), TensorFlow's
//! `CancellationManager`. A waiting asynchronous kernel (a queue dequeue) registers
//! how to give up; completing normally, it deregisters.
//!
//! Contract: each callback runs at most once, outside the manager's lock; a
//! registration after cancellation is refused (the caller fails at once);
//! `deregister` returns false when cancellation already took the callback (then it
//! runs or ran). [`CancellationManager::is_cancelled`] reads an atomic flag without
//! the lock, so a busy executor can poll it (every few hundred nodes) at no
//! measurable cost; the flag is set before any callback runs.

use std::collections::HashMap;

use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::Mutex;

type Callback = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    cancelled: bool,
    next: u64,
    callbacks: HashMap<u64, Callback>,
}

/// See the module docs.
#[derive(Default)]
pub struct CancellationManager {
    state: Mutex<State>,
    /// `state.cancelled`, readable without the lock (set under it, with Release).
    cancelled: AtomicBool,
}

/// Identifies a registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CancellationToken(u64);

impl CancellationManager {
    /// A manager that has not been cancelled.
    pub fn new() -> CancellationManager {
        CancellationManager::default()
    }

    /// Registers `f`; `None` (and `f` dropped) if already cancelled.
    pub fn register(&self, f: impl FnOnce() + Send + 'static) -> Option<CancellationToken> {
        let mut st = self.state.lock();
        if st.cancelled {
            return None;
        }
        let id = st.next;
        st.next += 1;
        st.callbacks.insert(id, Box::new(f));
        Some(CancellationToken(id))
    }

    /// Removes a registration; false if cancellation already took it.
    pub fn deregister(&self, t: CancellationToken) -> bool {
        self.state.lock().callbacks.remove(&t.0).is_some()
    }

    /// Cancels: runs every registered callback once. Idempotent.
    pub fn cancel(&self) {
        let callbacks: Vec<Callback> = {
            let mut st = self.state.lock();
            if st.cancelled {
                return;
            }
            st.cancelled = true;
            self.cancelled.store(true, Ordering::Release);
            st.callbacks.drain().map(|(_, f)| f).collect()
        };
        for f in callbacks {
            f();
        }
    }

    /// True once cancelled; one atomic load (no lock).
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn callbacks_run_once_and_late_registrations_are_refused() {
        let m = CancellationManager::new();
        let n = Arc::new(AtomicUsize::new(0));
        let a = {
            let n = n.clone();
            m.register(move || {
                n.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap()
        };
        let b = {
            let n = n.clone();
            m.register(move || {
                n.fetch_add(10, Ordering::SeqCst);
            })
            .unwrap()
        };
        assert!(m.deregister(b));
        m.cancel();
        m.cancel();
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert!(!m.deregister(a));
        assert!(m.register(|| {}).is_none());
        assert!(m.is_cancelled());
    }
}
