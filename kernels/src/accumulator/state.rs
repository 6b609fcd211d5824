//! [`AccumulatorState`]: a conditional accumulator as a plain state machine
//! (TensorFlow's `ConditionalAccumulatorBase` and `ConditionalAccumulator<T>`).
//! [`AccumulatorState::handle`] takes one [`AccumulatorMsg`] and returns a
//! [`Transition`]: the reply to that message and the waiting takes it completed;
//! the host runs those completions.
//!
//! Semantics:
//! - An apply whose `local_step` is behind the global step is dropped silently
//!   (it is stale) and not checked further. Otherwise the gradient must have the
//!   accumulator's dtype, a shape compatible with its (partial) shape and, when
//!   gradients are already in, their exact shape (`InvalidArgument` otherwise,
//!   leaving the accumulator unchanged). Applies never wait.
//! - Takes wait in FIFO order: the head take is served first, when at least its
//!   `num_required` gradients are in. Serving one increments the global step,
//!   reduces the sum (divided by the count for `Mean`), hands it over and resets
//!   the count to 0, so the next take waits for fresh gradients.
//! - A `num_required` below 1 is `InvalidArgument`, at once.
//! - A cancelled take (its step aborted) completes with the given status and
//!   leaves the queue of takes; the next one may then be served.
//! - `SetGlobalStep` sets the global step (lowering it is allowed, with a
//!   warning, as in TensorFlow).

use std::collections::VecDeque;

use graph::ops::ReductionType;
use graph::{DType, Result, Shape, Status, Tensor};

use crate::cpu::math::elem::Arith;
use crate::dispatch_float;

/// What defines an accumulator.
#[derive(Clone, Debug, PartialEq)]
pub struct AccumulatorSpec {
    /// Its name in messages (the shared name).
    pub name: String,
    /// The gradients' dtype (a float type).
    pub dtype: DType,
    /// The gradients' (partial) shape.
    pub shape: Shape,
    /// Mean or sum.
    pub reduction: ReductionType,
}

/// Identifies a waiting take.
pub type RequestId = u64;

/// A message to an accumulator.
#[derive(Debug)]
pub enum AccumulatorMsg {
    /// Add `gradient`, computed at `local_step`.
    Apply {
        /// The step the gradient was computed at.
        local_step: i64,
        /// The gradient.
        gradient: Tensor,
    },
    /// Take the reduced gradient once `num_required` are in.
    Take {
        /// The request.
        id: RequestId,
        /// Gradients needed (at least 1).
        num_required: i32,
    },
    /// Set the global step.
    SetGlobalStep(i64),
    /// Give up a waiting take with `status` (no effect once it completed).
    Cancel {
        /// The request.
        id: RequestId,
        /// What it completes with.
        status: Status,
    },
}

/// What happened to an applied gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Added to the sum.
    Accumulated,
    /// Dropped: its local step is behind the global step.
    Stale,
}

/// The reply to one message.
#[derive(Debug)]
#[must_use]
pub enum Reply {
    /// An apply's outcome.
    Applied(Result<Applied>),
    /// A take that completed (or failed) at once.
    Taken(Result<Tensor>),
    /// A take that waits; it completes in a later transition.
    Waiting,
    /// `SetGlobalStep` and `Cancel`.
    Done,
}

/// The effects of one message.
#[derive(Debug)]
#[must_use]
pub struct Transition {
    /// The reply to the message itself.
    pub reply: Reply,
    /// Waiting takes this message completed, in completion order.
    pub completed: Vec<(RequestId, Result<Tensor>)>,
}

/// Element arithmetic on gradients of one dtype, chosen once per accumulator.
#[derive(Clone, Copy)]
struct GradMath {
    /// `sum += g` (same shape).
    add: fn(&mut Tensor, &Tensor) -> Result<()>,
    /// `sum /= n`.
    divide: fn(&mut Tensor, usize) -> Result<()>,
}

fn add_into<T: Arith>(sum: &mut Tensor, g: &Tensor) -> Result<()> {
    let src = g.as_slice::<T>()?;
    let dst = sum.as_mut_slice::<T>()?;
    dst.iter_mut().zip(src).for_each(|(d, &x)| *d = d.tf_add(x));
    Ok(())
}

fn divide_by<T: Arith>(sum: &mut Tensor, n: usize) -> Result<()> {
    let n = T::from_usize(n)
        .ok_or_else(|| Status::internal(format!("count {n} does not fit the dtype")))?;
    sum.as_mut_slice::<T>()?
        .iter_mut()
        .for_each(|d| *d = d.tf_div(n));
    Ok(())
}

impl GradMath {
    fn for_dtype(dtype: DType) -> Result<GradMath> {
        dispatch_float!(dtype, T => Ok(GradMath {
            add: add_into::<T>,
            divide: divide_by::<T>,
        }))
    }
}

struct Take {
    id: RequestId,
    num_required: usize,
}

/// The accumulator's state; see the module docs.
pub struct AccumulatorState {
    spec: AccumulatorSpec,
    math: GradMath,
    /// Gradients in `sum` since the last take.
    counter: usize,
    global_step: i64,
    /// The running sum; `Some` exactly when `counter > 0`.
    sum: Option<Tensor>,
    takes: VecDeque<Take>,
}

impl AccumulatorState {
    /// An empty accumulator at global step 0; `Unimplemented` for a dtype other
    /// than a float type.
    pub fn new(spec: AccumulatorSpec) -> Result<AccumulatorState> {
        let math = GradMath::for_dtype(spec.dtype).map_err(|_| {
            Status::unimplemented(format!(
                "conditional accumulator '{}': dtype {} is not supported (float types only)",
                spec.name, spec.dtype
            ))
        })?;
        Ok(AccumulatorState {
            spec,
            math,
            counter: 0,
            global_step: 0,
            sum: None,
            takes: VecDeque::new(),
        })
    }

    /// The definition.
    pub fn spec(&self) -> &AccumulatorSpec {
        &self.spec
    }

    /// Gradients accumulated since the last take.
    pub fn num_accumulated(&self) -> usize {
        self.counter
    }

    /// The global step.
    pub fn global_step(&self) -> i64 {
        self.global_step
    }

    /// Takes waiting.
    pub fn waiting(&self) -> usize {
        self.takes.len()
    }

    /// Handles one message; see the module docs.
    pub fn handle(&mut self, msg: AccumulatorMsg) -> Transition {
        let mut completed = Vec::new();
        let reply = match msg {
            AccumulatorMsg::Apply {
                local_step,
                gradient,
            } => {
                let r = self.apply(local_step, gradient);
                self.flush(&mut completed);
                Reply::Applied(r)
            }
            AccumulatorMsg::Take { id, num_required } => match usize::try_from(num_required) {
                Ok(n) if n >= 1 => {
                    self.takes.push_back(Take {
                        id,
                        num_required: n,
                    });
                    self.flush(&mut completed);
                    match completed.iter().position(|(c, _)| *c == id) {
                        Some(i) => Reply::Taken(completed.remove(i).1),
                        None => Reply::Waiting,
                    }
                }
                _ => Reply::Taken(Err(Status::invalid_argument(format!(
                    "Argument num_required must be positive, but was {num_required}"
                )))),
            },
            AccumulatorMsg::SetGlobalStep(step) => {
                if step < self.global_step {
                    tracing::warn!(
                        accumulator = %self.spec.name,
                        current = self.global_step,
                        new = step,
                        "Attempt to set the global step of a conditional accumulator to a smaller value"
                    );
                }
                self.global_step = step;
                Reply::Done
            }
            AccumulatorMsg::Cancel { id, status } => {
                if let Some(i) = self.takes.iter().position(|t| t.id == id) {
                    self.takes.remove(i);
                    completed.push((id, Err(status)));
                    self.flush(&mut completed);
                }
                Reply::Done
            }
        };
        Transition { reply, completed }
    }

    fn shape_mismatch(&self, expected: impl std::fmt::Display, got: &Tensor) -> Status {
        Status::invalid_argument(format!(
            "Shape mismatch: expected {expected}, got {} (conditional accumulator '{}')",
            got.shape(),
            self.spec.name
        ))
    }

    fn apply(&mut self, local_step: i64, gradient: Tensor) -> Result<Applied> {
        if local_step < self.global_step {
            return Ok(Applied::Stale);
        }
        if gradient.dtype() != self.spec.dtype {
            return Err(Status::invalid_argument(format!(
                "conditional accumulator '{}' holds {} gradients, got a {} gradient",
                self.spec.name,
                self.spec.dtype,
                gradient.dtype()
            )));
        }
        if let Some(sum) = &self.sum {
            if sum.shape() != gradient.shape() {
                return Err(self.shape_mismatch(sum.shape(), &gradient));
            }
        }
        if !self.spec.shape.is_compatible_with(gradient.shape()) {
            return Err(self.shape_mismatch(&self.spec.shape, &gradient));
        }
        match &mut self.sum {
            Some(sum) => (self.math.add)(sum, &gradient)?,
            None => self.sum = Some(gradient),
        }
        self.counter += 1;
        Ok(Applied::Accumulated)
    }

    /// Serves waiting takes from the head while their requirement is met.
    fn flush(&mut self, completed: &mut Vec<(RequestId, Result<Tensor>)>) {
        while let Some(head) = self.takes.front() {
            if self.counter < head.num_required {
                break;
            }
            let id = head.id;
            self.takes.pop_front();
            completed.push((id, self.take_now()));
        }
    }

    fn take_now(&mut self) -> Result<Tensor> {
        let n = std::mem::take(&mut self.counter);
        let mut sum = self.sum.take().ok_or_else(|| {
            Status::internal(format!(
                "conditional accumulator '{}' counted {n} gradients but holds none",
                self.spec.name
            ))
        })?;
        self.global_step += 1;
        if self.spec.reduction == ReductionType::Mean {
            (self.math.divide)(&mut sum, n)?;
        }
        Ok(sum)
    }
}
