//! Mailboxes, completions and the step tracker under concurrency.
#![cfg(loom)]

use std::sync::Arc;

use graph::{Code, Status};
use kernels::CallFrame;
use loom::thread;
use rendezvous::{completion, mailbox, LocalRendezvous};

/// Two producers and the consumer: every message arrives once, in per-producer
/// order, and a close after them ends the consumer.
#[test]
fn mailbox_two_producers_then_close() {
    loom::model(|| {
        let (tx, rx) = mailbox::<u32>();
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    tx.send(p * 10).unwrap();
                    tx.send(p * 10 + 1).unwrap();
                })
            })
            .collect();
        let mut got = Vec::new();
        while got.len() < 4 {
            rx.drain(&mut got);
        }
        for p in producers {
            p.join().unwrap();
        }
        tx.close();
        assert_eq!(rx.recv(), None);
        for p in 0..2 {
            let mine: Vec<u32> = got.iter().copied().filter(|v| v / 10 == p).collect();
            assert_eq!(mine, vec![p * 10, p * 10 + 1]);
        }
    });
}

/// A close racing a parked receiver wakes it.
#[test]
fn close_wakes_a_waiting_receiver() {
    loom::model(|| {
        let (tx, rx) = mailbox::<u8>();
        let closer = thread::spawn(move || tx.close());
        assert_eq!(rx.recv(), None);
        closer.join().unwrap();
    });
}

/// A completion completed or dropped on another thread wakes its waiter.
#[test]
fn completion_wakes_its_waiter() {
    loom::model(|| {
        let (tx, rx) = completion::<u8>();
        let t = thread::spawn(move || tx.complete(3));
        assert_eq!(rx.wait(), Some(3));
        t.join().unwrap();
        let (tx, rx) = completion::<u8>();
        let t = thread::spawn(move || drop(tx));
        assert_eq!(rx.wait(), None);
        t.join().unwrap();
    });
}

/// Two partitions report while an abort (a timeout) races them: the client gets
/// exactly one result, carrying the first error.
#[test]
fn step_tracker_partitions_and_abort() {
    loom::model(|| {
        let rv = Arc::new(LocalRendezvous::new());
        let frame = Arc::new(CallFrame::new(vec![], 0));
        let (tracker, rx) =
            actors::step::StepTracker::new(9, 2, Arc::clone(&rv) as _, frame, vec![]);
        let t1 = Arc::clone(&tracker);
        let a = thread::spawn(move || t1.partition_done(Ok(()), None));
        let t2 = Arc::clone(&tracker);
        let b = thread::spawn(move || t2.abort(Status::deadline_exceeded("timeout")));
        tracker.partition_done(Err(Status::internal("kernel failed")), None);
        a.join().unwrap();
        b.join().unwrap();
        let result = rx.wait().expect("the tracker completes its client");
        let code = result.status.unwrap_err().code();
        assert!(code == Code::Internal || code == Code::DeadlineExceeded);
        assert!(rv.abort_status().is_some(), "the rendezvous is aborted");
    });
}
