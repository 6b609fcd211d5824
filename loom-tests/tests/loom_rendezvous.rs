//! The rendezvous under concurrent send, recv and abort.
#![cfg(loom)]

use std::sync::Arc;

use graph::{Code, Status, Tensor};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use rendezvous::{FrameIter, LocalRendezvous, ParsedKey};

fn key() -> ParsedKey {
    ParsedKey::new("/device:CPU:0", 1, "/device:CPU:1", "edge").unwrap()
}

/// Send and recv race: whichever comes first, the value arrives exactly once,
/// either at once or through the callback.
#[test]
fn send_and_recv_race() {
    loom::model(|| {
        let r = Arc::new(LocalRendezvous::new());
        let got = Arc::new(AtomicUsize::new(0));
        let r2 = Arc::clone(&r);
        let sender = thread::spawn(move || {
            r2.send(&key(), FrameIter::ROOT, Some(Tensor::scalar(7i32)))
                .unwrap();
        });
        let g = Arc::clone(&got);
        let now = r.recv(&key(), FrameIter::ROOT, move || {
            Box::new(move |v| {
                assert_eq!(v.unwrap(), Some(Tensor::scalar(7i32)));
                g.fetch_add(1, Ordering::SeqCst);
            })
        });
        if let Some(v) = now {
            assert_eq!(v.unwrap(), Some(Tensor::scalar(7i32)));
            got.fetch_add(1, Ordering::SeqCst);
        }
        sender.join().unwrap();
        assert_eq!(got.load(Ordering::SeqCst), 1);
        assert_eq!(r.pending(), 0);
    });
}

/// An abort racing a pending recv: the receiver learns the error exactly once.
#[test]
fn abort_during_recv() {
    loom::model(|| {
        let r = Arc::new(LocalRendezvous::new());
        let outcomes = Arc::new(AtomicUsize::new(0));
        let r2 = Arc::clone(&r);
        let aborter = thread::spawn(move || r2.abort(Status::cancelled("stop")));
        let o = Arc::clone(&outcomes);
        let now = r.recv(&key(), FrameIter::ROOT, move || {
            Box::new(move |v| {
                assert_eq!(v.unwrap_err().code(), Code::Cancelled);
                o.fetch_add(1, Ordering::SeqCst);
            })
        });
        if let Some(v) = now {
            assert_eq!(v.unwrap_err().code(), Code::Cancelled);
            outcomes.fetch_add(1, Ordering::SeqCst);
        }
        aborter.join().unwrap();
        assert_eq!(outcomes.load(Ordering::SeqCst), 1);
    });
}

/// A send racing an abort either delivers (before the abort) or fails; a later
/// recv sees the value or the abort, never nothing.
#[test]
fn send_racing_abort() {
    loom::model(|| {
        let r = Arc::new(LocalRendezvous::new());
        let r2 = Arc::clone(&r);
        let sender = thread::spawn(move || r2.send(&key(), FrameIter::ROOT, None).is_ok());
        r.abort(Status::aborted("abort"));
        let sent = sender.join().unwrap();
        let v = r.recv(&key(), FrameIter::ROOT, || {
            Box::new(|_| panic!("must not wait after an abort"))
        });
        assert!(v.expect("after an abort recv answers at once").is_err());
        let _ = sent;
    });
}
