//! A worker's per-step tables (`RendezvousMgr`) under the races a cluster makes:
//! a peer's `RecvTensor` racing the step's local `_Send`, an abort racing a pending
//! `RecvTensor`, and the step's cleanup racing a late `RecvTensor`. In each, the
//! receive completes exactly once (never hangs) and no table outlives the cleanup.
#![cfg(loom)]

use std::sync::Arc;

use graph::{Code, Result, Status, Tensor};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use rendezvous::{FrameIter, ParsedKey, RendezvousMgr, Value};

const STEP: u64 = 42;

fn key() -> ParsedKey {
    ParsedKey::new(
        "/job:worker/replica:0/task:1/device:CPU:0",
        3,
        "/job:worker/replica:0/task:0/device:CPU:0",
        "y:0",
    )
    .unwrap()
}

/// A peer's receive through the manager; `check` sees its one outcome, now or
/// through the callback. Returns false when the manager refused the step.
fn peer_recv(m: &RendezvousMgr, done: &Arc<AtomicUsize>, check: fn(Result<Value>)) -> bool {
    let table = match m.find_or_create(STEP) {
        Ok(t) => t,
        Err(e) => {
            assert_eq!(e.code(), Code::Aborted);
            done.fetch_add(1, Ordering::SeqCst);
            return false;
        }
    };
    let d = Arc::clone(done);
    let now = table.recv(&key(), FrameIter::ROOT, move || {
        Box::new(move |v| {
            check(v);
            d.fetch_add(1, Ordering::SeqCst);
        })
    });
    if let Some(v) = now {
        check(v);
        done.fetch_add(1, Ordering::SeqCst);
    }
    true
}

#[test]
fn recv_tensor_races_the_local_send() {
    loom::model(|| {
        let m = Arc::new(RendezvousMgr::new());
        let done = Arc::new(AtomicUsize::new(0));
        let m2 = Arc::clone(&m);
        let run = thread::spawn(move || {
            m2.find_or_create(STEP)
                .unwrap()
                .send(&key(), FrameIter::ROOT, Some(Tensor::scalar(5i32)))
                .unwrap();
        });
        assert!(peer_recv(&m, &done, |v| {
            assert_eq!(v.unwrap(), Some(Tensor::scalar(5i32)));
        }));
        run.join().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 1);
        assert_eq!(m.len(), 1, "one table, whoever came first");
        m.cleanup(STEP);
        assert!(m.is_empty());
    });
}

#[test]
fn an_abort_races_a_pending_recv_tensor() {
    loom::model(|| {
        let m = Arc::new(RendezvousMgr::new());
        let done = Arc::new(AtomicUsize::new(0));
        let m2 = Arc::clone(&m);
        let abort = thread::spawn(move || {
            m2.find_or_create(STEP)
                .unwrap()
                .abort(Status::unavailable("task 1 died"));
        });
        assert!(peer_recv(&m, &done, |v| {
            assert_eq!(v.unwrap_err().code(), Code::Unavailable);
        }));
        abort.join().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 1, "the receive completed once");
    });
}

#[test]
fn cleanup_races_a_late_recv_tensor() {
    loom::model(|| {
        let m = Arc::new(RendezvousMgr::new());
        let done = Arc::new(AtomicUsize::new(0));
        let m2 = Arc::clone(&m);
        let cleanup = thread::spawn(move || m2.cleanup(STEP));
        // Either refused (the cleanup came first) or completed by the cleanup's
        // abort: never left waiting.
        peer_recv(&m, &done, |v| {
            assert_eq!(v.unwrap_err().code(), Code::Aborted);
        });
        cleanup.join().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 1, "the receive completed once");
        assert!(m.is_empty(), "no table outlives the cleanup");
    });
}
