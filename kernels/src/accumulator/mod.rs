//! Conditional accumulators (TensorFlow's `ConditionalAccumulator`), hosted as
//! queues are.
//!
//! - [`state`] — [`AccumulatorState`], the state machine (semantics documented
//!   there).
//!
//! [`ConditionalAccumulator`] hosts an `AccumulatorState` behind a lock that
//! serves as its mailbox: a message (apply, take, set global step, cancel) is
//! handled by whichever thread sends it, one at a time, and the completions of
//! waiting takes it causes run after the lock is released, posting to the waiting
//! executors' device mailboxes. A take that cannot complete waits in the
//! accumulator (its completion held here), so no device thread blocks.
//!
//! Lock order: the accumulator lock is never held while a completion runs.

pub mod state;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use graph::{Result, Status, Tensor};
use rendezvous::sync::Mutex;

use crate::resource::Resource;
pub use state::{
    AccumulatorMsg, AccumulatorSpec, AccumulatorState, Applied, Reply, RequestId, Transition,
};

/// The completion of a waiting take.
pub type Responder = Box<dyn FnOnce(Result<Tensor>) + Send>;

struct Hosted {
    state: AccumulatorState,
    waiters: HashMap<RequestId, Responder>,
}

/// An accumulator resource; see the module docs.
pub struct ConditionalAccumulator {
    spec: state::AccumulatorSpec,
    hosted: Mutex<Hosted>,
    next_id: AtomicU64,
}

impl Resource for ConditionalAccumulator {
    fn type_name(&self) -> &'static str {
        "ConditionalAccumulator"
    }
}

type Run = Vec<Box<dyn FnOnce() + Send>>;

impl ConditionalAccumulator {
    /// An empty accumulator at global step 0 (`Unimplemented` for a dtype that is
    /// not a float type).
    pub fn new(spec: AccumulatorSpec) -> Result<ConditionalAccumulator> {
        Ok(ConditionalAccumulator {
            hosted: Mutex::new(Hosted {
                state: AccumulatorState::new(spec.clone())?,
                waiters: HashMap::new(),
            }),
            spec,
            next_id: AtomicU64::new(1),
        })
    }

    /// The definition.
    pub fn spec(&self) -> &AccumulatorSpec {
        &self.spec
    }

    /// A fresh request id.
    pub fn next_id(&self) -> RequestId {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Handles `msg` under the lock; returns the reply and the completions of
    /// other requests to run after the lock is released. When the reply is
    /// `Waiting`, the responder `make` builds is stored for request `id`.
    fn send(&self, msg: AccumulatorMsg, waiter: Option<(RequestId, Maker<'_>)>) -> Reply {
        let (reply, run) = {
            let mut h = self.hosted.lock();
            let Transition { reply, completed } = h.state.handle(msg);
            let mut run: Run = Vec::with_capacity(completed.len());
            for (id, r) in completed {
                if let Some(f) = h.waiters.remove(&id) {
                    run.push(Box::new(move || f(r)));
                }
            }
            if let (Reply::Waiting, Some((id, make))) = (&reply, waiter) {
                let accumulator = &self.spec.name;
                tracing::debug!(%accumulator, request = id, "take waits for gradients");
                h.waiters.insert(id, make());
            }
            (reply, run)
        };
        run.into_iter().for_each(|f| f());
        reply
    }

    /// Applies `gradient` computed at `local_step`: accumulated, or dropped as
    /// stale; an error leaves the accumulator unchanged. May complete a waiting
    /// take.
    pub fn apply(&self, local_step: i64, gradient: Tensor) -> Result<Applied> {
        match self.send(
            AccumulatorMsg::Apply {
                local_step,
                gradient,
            },
            None,
        ) {
            Reply::Applied(r) => r,
            other => Err(unexpected(&other)),
        }
    }

    /// Takes the reduced gradient once `num_required` are in. Returns the result at
    /// once when the take completes (or fails) now; otherwise stores the
    /// completion `make` builds, to be called exactly once later, and returns
    /// `None`.
    pub fn take(
        &self,
        id: RequestId,
        num_required: i32,
        make: impl FnOnce() -> Responder,
    ) -> Option<Result<Tensor>> {
        let mut make = Some(make);
        let mut maker = || match make.take() {
            Some(m) => m(),
            None => Box::new(|_| {}) as Responder,
        };
        match self.send(
            AccumulatorMsg::Take { id, num_required },
            Some((id, &mut maker)),
        ) {
            Reply::Taken(r) => Some(r),
            Reply::Waiting => None,
            other => Some(Err(unexpected(&other))),
        }
    }

    /// Sets the global step.
    pub fn set_global_step(&self, step: i64) {
        let _ = self.send(AccumulatorMsg::SetGlobalStep(step), None);
    }

    /// Gives up a waiting take with `status` (no effect once it completed).
    pub fn cancel(&self, id: RequestId, status: Status) {
        let _ = self.send(AccumulatorMsg::Cancel { id, status }, None);
    }

    /// Gradients accumulated since the last take.
    pub fn num_accumulated(&self) -> usize {
        self.hosted.lock().state.num_accumulated()
    }

    /// The global step.
    pub fn global_step(&self) -> i64 {
        self.hosted.lock().state.global_step()
    }

    /// Takes waiting.
    pub fn waiting(&self) -> usize {
        self.hosted.lock().state.waiting()
    }
}

type Maker<'a> = &'a mut dyn FnMut() -> Responder;

fn unexpected(r: &Reply) -> Status {
    Status::internal(format!("conditional accumulator: unexpected reply {r:?}"))
}

#[cfg(all(test, not(loom)))]
mod tests;
