//! A partial run's fetch racing the end of its step (`actors::worker::
//! partial_step`): the fetch gets the value when the step sent one, an error when
//! the step ended without one, and never waits forever.
#![cfg(loom)]

use std::sync::Arc;

use actors::worker::partial_step::PartialStep;
use graph::{Code, Tensor};
use loom::thread;
use rendezvous::{FrameIter, LocalRendezvous, ParsedKey, Rendezvous};

fn key() -> (String, ParsedKey) {
    let k = ParsedKey::new("/device:CPU:0", 1, "/device:CPU:0", "fetch").unwrap();
    (k.full_key(FrameIter::ROOT), k)
}

/// The step sends the fetch's value and then ends, while the call asks for it.
#[test]
fn a_fetch_racing_the_send_and_the_end_gets_the_value() {
    loom::model(|| {
        let rv: Arc<dyn Rendezvous> = Arc::new(LocalRendezvous::new());
        let ps = Arc::new(PartialStep::new(Arc::clone(&rv)));
        let (full, k) = key();
        let step = {
            let ps = Arc::clone(&ps);
            thread::spawn(move || {
                rv.send(&k, FrameIter::ROOT, Some(Tensor::scalar(7i32)))
                    .unwrap();
                ps.finish();
            })
        };
        let got = ps.receive(&full).unwrap().wait();
        step.join().unwrap();
        assert_eq!(got.unwrap().unwrap(), Some(Tensor::scalar(7i32)));
    });
}

/// The step ends without sending it: the call gets an error, whichever is first.
#[test]
fn a_fetch_the_step_never_produces_fails_instead_of_waiting() {
    loom::model(|| {
        let rv: Arc<dyn Rendezvous> = Arc::new(LocalRendezvous::new());
        let ps = Arc::new(PartialStep::new(rv));
        let (full, _) = key();
        let step = {
            let ps = Arc::clone(&ps);
            thread::spawn(move || ps.finish())
        };
        let got = ps.receive(&full).unwrap().wait();
        step.join().unwrap();
        assert_eq!(got.unwrap().unwrap_err().code(), Code::InvalidArgument);
    });
}
