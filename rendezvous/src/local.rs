//! [`LocalRendezvous`]: the exchange table of one step inside one process.
//!
//! Contract (TensorFlow's `rendezvous.h`): **a producer never blocks**. `send`
//! stores the value, or hands it to a waiting receiver; `recv` completes its
//! callback with the value when it arrives, or with the abort status. After
//! `abort`, every waiter is completed with the status and later sends and receives
//! fail with it. A value is a tensor or `None` for a dead tensor (deadness crosses
//! devices like any value).
//!
//! Callbacks run outside the table's lock, on the thread that completes them.
//! The table lives as long as its step: dropping it drops whatever was never
//! received, so nothing leaks across steps.

use std::collections::{HashMap, VecDeque};

use graph::{Result, Status, Tensor};

use crate::interface::Rendezvous;
use crate::key::{FrameIter, ParsedKey};
use crate::sync::Mutex;

/// What a receiver gets: a tensor, or `None` for a dead one.
pub type Value = Option<Tensor>;

/// Completes a pending receive.
pub type RecvCallback = Box<dyn FnOnce(Result<Value>) + Send>;

enum Slot {
    Values(VecDeque<Value>),
    Waiters(VecDeque<RecvCallback>),
}

#[derive(Default)]
struct State {
    table: HashMap<(u64, FrameIter), Slot>,
    aborted: Option<Status>,
}

/// The exchange points of one step; see the module docs.
pub struct LocalRendezvous {
    state: Mutex<State>,
}

/// Tables alive in this process (for leak tests).
static LIVE_TABLES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The number of rendezvous tables alive in this process.
pub fn live_tables() -> usize {
    LIVE_TABLES.load(std::sync::atomic::Ordering::Relaxed)
}

impl Default for LocalRendezvous {
    fn default() -> LocalRendezvous {
        LIVE_TABLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LocalRendezvous {
            state: Mutex::new(State::default()),
        }
    }
}

impl Drop for LocalRendezvous {
    fn drop(&mut self) {
        LIVE_TABLES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl LocalRendezvous {
    /// An empty table.
    pub fn new() -> LocalRendezvous {
        LocalRendezvous::default()
    }

    /// Delivers `value` under `key` in `fi`. Never blocks; fails only after an abort.
    pub fn send(&self, key: &ParsedKey, fi: FrameIter, value: Value) -> Result<()> {
        let k = (key.id(), fi);
        let mut st = self.state.lock();
        if let Some(s) = &st.aborted {
            return Err(s.clone());
        }
        let waiter = match st.table.get_mut(&k) {
            Some(Slot::Waiters(w)) => {
                let cb = w.pop_front();
                if w.is_empty() {
                    st.table.remove(&k);
                }
                cb
            }
            Some(Slot::Values(v)) => {
                v.push_back(value);
                return Ok(());
            }
            None => {
                st.table.insert(k, Slot::Values(VecDeque::from([value])));
                return Ok(());
            }
        };
        drop(st);
        if let Some(cb) = waiter {
            cb(Ok(value));
        }
        Ok(())
    }

    /// Receives under `key` in `fi`: returns the value (or the abort status) at once
    /// when it is available, else registers the callback `make_callback` builds and
    /// returns `None`; the callback then runs when the value or an abort arrives.
    pub fn recv(
        &self,
        key: &ParsedKey,
        fi: FrameIter,
        make_callback: impl FnOnce() -> RecvCallback,
    ) -> Option<Result<Value>> {
        let k = (key.id(), fi);
        let mut st = self.state.lock();
        if let Some(s) = &st.aborted {
            return Some(Err(s.clone()));
        }
        match st.table.get_mut(&k) {
            Some(Slot::Values(v)) => {
                let value = v.pop_front();
                if v.is_empty() {
                    st.table.remove(&k);
                }
                Some(Ok(value.flatten()))
            }
            Some(Slot::Waiters(w)) => {
                w.push_back(make_callback());
                None
            }
            None => {
                st.table
                    .insert(k, Slot::Waiters(VecDeque::from([make_callback()])));
                None
            }
        }
    }

    /// Aborts: completes every waiter with `status` (the first abort wins) and makes
    /// later sends and receives fail with it.
    pub fn abort(&self, status: Status) {
        let mut waiters = Vec::new();
        {
            let mut st = self.state.lock();
            if st.aborted.is_some() {
                return;
            }
            st.aborted = Some(status.clone());
            for (_, slot) in st.table.drain() {
                if let Slot::Waiters(w) = slot {
                    waiters.extend(w);
                }
            }
        }
        for cb in waiters {
            cb(Err(status.clone()));
        }
    }

    /// The abort status, if aborted.
    pub fn abort_status(&self) -> Option<Status> {
        self.state.lock().aborted.clone()
    }

    /// The number of keys holding undelivered values or waiting receivers.
    pub fn pending(&self) -> usize {
        self.state.lock().table.len()
    }
}

impl Rendezvous for LocalRendezvous {
    #[inline]
    fn send(&self, key: &ParsedKey, fi: FrameIter, value: Value) -> Result<()> {
        LocalRendezvous::send(self, key, fi, value)
    }

    #[inline]
    fn recv(
        &self,
        key: &ParsedKey,
        fi: FrameIter,
        make_callback: &mut dyn FnMut() -> RecvCallback,
    ) -> Option<Result<Value>> {
        LocalRendezvous::recv(self, key, fi, make_callback)
    }

    fn abort(&self, status: Status) {
        LocalRendezvous::abort(self, status)
    }

    fn abort_status(&self) -> Option<Status> {
        LocalRendezvous::abort_status(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn key(n: &str) -> ParsedKey {
        ParsedKey::new("/device:CPU:0", 1, "/device:CPU:1", n).unwrap()
    }

    #[test]
    fn send_before_recv_and_recv_before_send() {
        let r = LocalRendezvous::new();
        let k = key("a");
        r.send(&k, FrameIter::ROOT, Some(Tensor::scalar(1.0f32)))
            .unwrap();
        let got = r
            .recv(&k, FrameIter::ROOT, || unreachable_cb())
            .unwrap()
            .unwrap();
        assert_eq!(got, Some(Tensor::scalar(1.0f32)));
        assert_eq!(r.pending(), 0);

        let (tx, rx) = mpsc::channel();
        assert!(r
            .recv(&k, FrameIter::new(0, 1), move || Box::new(move |v| tx
                .send(v)
                .unwrap()))
            .is_none());
        assert_eq!(r.pending(), 1);
        r.send(&k, FrameIter::new(0, 1), None).unwrap();
        assert_eq!(rx.recv().unwrap().unwrap(), None); // a dead tensor
        assert_eq!(r.pending(), 0);
    }

    fn unreachable_cb() -> RecvCallback {
        Box::new(|_| panic!("value was available; no callback expected"))
    }

    #[test]
    fn frames_and_iterations_separate_keys() {
        let r = LocalRendezvous::new();
        let k = key("b");
        r.send(&k, FrameIter::new(1, 0), Some(Tensor::scalar(0i32)))
            .unwrap();
        r.send(&k, FrameIter::new(1, 1), Some(Tensor::scalar(1i32)))
            .unwrap();
        let v1 = r
            .recv(&k, FrameIter::new(1, 1), unreachable_cb)
            .unwrap()
            .unwrap();
        assert_eq!(v1, Some(Tensor::scalar(1i32)));
        let v0 = r
            .recv(&k, FrameIter::new(1, 0), unreachable_cb)
            .unwrap()
            .unwrap();
        assert_eq!(v0, Some(Tensor::scalar(0i32)));
    }

    #[test]
    fn abort_wakes_waiters_and_fails_later_calls() {
        let r = LocalRendezvous::new();
        let (tx, rx) = mpsc::channel();
        for n in ["x", "y"] {
            let tx = tx.clone();
            assert!(r
                .recv(&key(n), FrameIter::ROOT, move || Box::new(move |v| tx
                    .send(v)
                    .unwrap()))
                .is_none());
        }
        r.abort(Status::cancelled("step cancelled"));
        for _ in 0..2 {
            assert_eq!(
                rx.recv().unwrap().unwrap_err().code(),
                graph::Code::Cancelled
            );
        }
        assert!(r.send(&key("x"), FrameIter::ROOT, None).is_err());
        assert!(r
            .recv(&key("z"), FrameIter::ROOT, unreachable_cb)
            .unwrap()
            .is_err());
        r.abort(Status::internal("second abort is ignored"));
        assert_eq!(r.abort_status().unwrap().code(), graph::Code::Cancelled);
        assert_eq!(r.pending(), 0);
    }
}
