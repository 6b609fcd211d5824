//! [`PartialStep`]: a partial run in flight on a worker (see
//! [`PartialCall`](super::PartialCall)). A call's fetches wait in the step's
//! table; the end of the step answers every fetch still waiting, so no call
//! waits for a value that can no longer come. A receive and the end of the step
//! are ordered by the state's lock (`loom_partial` checks the race).

use std::sync::Arc;

use graph::{Result, Status};
use rendezvous::sync::Mutex;
use rendezvous::{completion, CompletionReceiver, CompletionSender, ParsedKey, RecvCallback};
use rendezvous::{Rendezvous, Value};

use crate::step::StepResult;

/// Where a partial run's fetch value goes: taken by whichever comes first, the
/// value or the end of the step.
type Slot = Arc<Mutex<Option<CompletionSender<Result<Value>>>>>;

/// A partial run in flight on this worker: its step's table, and the calls
/// waiting for values in it.
pub struct PartialStep {
    rendezvous: Arc<dyn Rendezvous>,
    state: Mutex<PartialState>,
}

#[derive(Default)]
pub(crate) struct PartialState {
    /// The step's outcome, taken by the last call.
    done: Option<CompletionReceiver<StepResult>>,
    /// The step has ended: a value not in the table now never will be.
    finished: bool,
    /// Fetches still waiting, by key.
    waiting: Vec<(String, Slot)>,
}

fn never_produced(key: &str) -> Status {
    Status::invalid_argument(format!(
        "the step finished without producing a value for '{key}' (an untaken branch, or a fetch its graph never computes)"
    ))
}

impl PartialStep {
    /// The partial run of the step whose table is `rendezvous`.
    pub fn new(rendezvous: Arc<dyn Rendezvous>) -> PartialStep {
        PartialStep {
            rendezvous,
            state: Mutex::new(PartialState::default()),
        }
    }

    /// The step's table.
    pub fn rendezvous(&self) -> &Arc<dyn Rendezvous> {
        &self.rendezvous
    }

    /// Keeps the step's outcome for the run's last call.
    pub fn set_done(&self, done: CompletionReceiver<StepResult>) {
        self.state.lock().done = Some(done);
    }

    /// The step's outcome (once).
    pub fn take_done(&self) -> Option<CompletionReceiver<StepResult>> {
        self.state.lock().done.take()
    }

    /// The value under `key`, now or once the step sends it; an error once the
    /// step has ended without it.
    pub fn receive(&self, key: &str) -> Result<CompletionReceiver<Result<Value>>> {
        let (k, fi) = ParsedKey::parse(key)?;
        let (tx, rx) = completion();
        // The lock orders this against the end of the step (see `finish`).
        let mut st = self.state.lock();
        if st.finished {
            let got = self
                .rendezvous
                .recv(&k, fi, &mut || Box::new(|_: Result<Value>| {}))
                .unwrap_or_else(|| Err(never_produced(key)));
            tx.complete(got);
            return Ok(rx);
        }
        let slot: Slot = Arc::new(Mutex::new(Some(tx)));
        let got = self.rendezvous.recv(&k, fi, &mut || -> RecvCallback {
            let slot = Arc::clone(&slot);
            Box::new(move |v| {
                if let Some(tx) = slot.lock().take() {
                    tx.complete(v);
                }
            })
        });
        match got {
            Some(v) => {
                if let Some(tx) = slot.lock().take() {
                    tx.complete(v);
                }
            }
            None => st.waiting.push((key.to_owned(), slot)),
        }
        Ok(rx)
    }

    /// The step ended: every fetch still waiting never gets a value (a failed
    /// step's table was aborted first, which answered them with its error).
    pub fn finish(&self) {
        let waiting = {
            let mut st = self.state.lock();
            st.finished = true;
            std::mem::take(&mut st.waiting)
        };
        for (key, slot) in waiting {
            if let Some(tx) = slot.lock().take() {
                tx.complete(Err(never_produced(&key)));
            }
        }
    }
}
