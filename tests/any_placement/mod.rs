//! A session that runs every step under several placements at once and checks that
//! they agree (`mod any_placement;`): one device; two, three and four devices as the
//! cost model spreads the graph; three devices with seeded random placement (every
//! node on a random device its constraints allow). The four-device layout and one
//! random one also schedule their receives (`enable_recv_scheduling`), so every
//! graph these tests run checks that the waits recv scheduling adds change no
//! answer and close no cycle.
//!
//! Each placement has its own session, so state (variables, queues, stacks) advances
//! the same way in all. A step must give the one-device answers bit for bit (NaN
//! matching NaN) or fail with the same canonical code everywhere; the one-device
//! result is returned, for the test to check against its own reference. Every
//! session has a deadline of its own, so a placement that hangs a loop fails the
//! step instead of the test run.

#![allow(dead_code)] // each test binary uses a part

use std::time::Duration;

use actorflow::{GraphDef, Result, Session, SessionOptions, Tensor};

/// How one session spreads the graph.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub devices: usize,
    pub random_seed: Option<u64>,
    pub recv_scheduling: bool,
}

/// The layouts every step runs under; the first is the reference.
pub const LAYOUTS: [Layout; 6] = [
    Layout {
        devices: 1,
        random_seed: None,
        recv_scheduling: false,
    },
    Layout {
        devices: 2,
        random_seed: None,
        recv_scheduling: false,
    },
    Layout {
        devices: 3,
        random_seed: None,
        recv_scheduling: false,
    },
    Layout {
        devices: 4,
        random_seed: None,
        recv_scheduling: true,
    },
    Layout {
        devices: 3,
        random_seed: Some(1),
        recv_scheduling: false,
    },
    Layout {
        devices: 3,
        random_seed: Some(2),
        recv_scheduling: true,
    },
];

/// The sessions of one graph under every layout; see the module docs.
pub struct AnyPlacement {
    sessions: Vec<(Layout, Session)>,
}

impl AnyPlacement {
    /// Sessions for `graph` under every layout.
    pub fn new(graph: &GraphDef) -> Result<AnyPlacement> {
        let sessions = LAYOUTS
            .iter()
            .map(|&layout| {
                let options = SessionOptions::default()
                    .with_cpu_devices(layout.devices)
                    .with_random_placement_seed(layout.random_seed)
                    .with_enable_recv_scheduling(layout.recv_scheduling)
                    .with_default_timeout(Duration::from_secs(60));
                Session::new(graph, options).map(|s| (layout, s))
            })
            .collect::<Result<_>>()?;
        Ok(AnyPlacement { sessions })
    }

    /// Runs the step in every session; panics when they disagree.
    pub fn run(
        &self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        let mut results = self
            .sessions
            .iter()
            .map(|(layout, s)| (layout, s.run(feeds, fetches, targets)));
        let (_, reference) = results.next().expect("at least one layout");
        for (layout, got) in results {
            if let Err(why) = agree(&reference, &got) {
                panic!("{layout:?} differs from one device on fetches {fetches:?}: {why}");
            }
        }
        reference
    }

    /// Extends the graph of every session.
    pub fn extend(&self, graph: &GraphDef) -> Result<()> {
        self.sessions.iter().try_for_each(|(_, s)| s.extend(graph))
    }
}

fn agree(want: &Result<Vec<Tensor>>, got: &Result<Vec<Tensor>>) -> std::result::Result<(), String> {
    match (want, got) {
        (Ok(w), Ok(g)) => {
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                if !same(w, g) {
                    return Err(format!("fetch {i} is {g:?}, not {w:?}"));
                }
            }
            Ok(())
        }
        (Err(w), Err(g)) if w.code() == g.code() => Ok(()),
        (w, g) => Err(format!("{} where one device gives {}", show(g), show(w))),
    }
}

fn show(r: &Result<Vec<Tensor>>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{e}"),
    }
}

/// Bit-for-bit equal, NaN matching NaN.
fn same(a: &Tensor, b: &Tensor) -> bool {
    if a == b {
        return true;
    }
    if a.dtype() != b.dtype() || a.dims() != b.dims() || !a.dtype().is_float() {
        return false;
    }
    match (a.to_f64_vec(), b.to_f64_vec()) {
        (Some(x), Some(y)) => x
            .iter()
            .zip(&y)
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())),
        _ => false,
    }
}
