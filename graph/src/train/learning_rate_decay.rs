//! Learning-rate schedules as graph ops (`tf.compat.v1.train`'s
//! `exponential_decay` and `piecewise_constant`): scalar tensors computed from
//! the global step each time they run, to pass to an optimizer as its
//! learning rate ([`Hyper::Tensor`]).
//!
//! - [`exponential_decay`] — `learning_rate * decay_rate ^ (step / decay_steps)`,
//!   the exponent floored with `staircase`, under the name scope
//!   `ExponentialDecay`.
//! - [`piecewise_constant`] — `values[i]` on the `i`th interval cut by
//!   `boundaries` (`x <= b[0]`, `b[0] < x <= b[1]`, …, `x > b[last]`), built
//!   without control flow: the index is the number of boundaries below `x`.
//!
//! A constant learning rate is a float32 tensor, as a Python float is in
//! TensorFlow; a tensor keeps its dtype. An optimizer casts either to each
//! variable's dtype.

use crate::builder::{Output, Scope};
use crate::ops;
use crate::train::optimizer::Hyper;
use crate::{DType, Result, Status, Tensor, TensorType};

/// `learning_rate * decay_rate ^ (global_step / decay_steps)` (the exponent
/// floored when `staircase`), computed in the learning rate's dtype (float32
/// for a constant) under the name scope `ExponentialDecay` (the result is
/// `ExponentialDecay/decayed_learning_rate`). `global_step` is an integer or float scalar (the global step's read
/// value, see [`crate::train::VarRef::read`]).
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::train::{self, GradientDescentOptimizer};
/// let s = Scope::new();
/// let step = train::get_or_create_global_step(&s).unwrap();
/// let step_value = step.read(&s).unwrap();
/// // 0.1, then 0.1 * 0.96 every 1000 steps
/// let lr = train::exponential_decay(&s, 0.1, &step_value, 1000.0, 0.96, true).unwrap();
/// assert_eq!(lr.name(), "ExponentialDecay/decayed_learning_rate:0");
/// let opt = GradientDescentOptimizer::new(lr);
/// # let _ = opt;
/// ```
pub fn exponential_decay(
    s: &Scope,
    learning_rate: impl Into<Hyper>,
    global_step: &Output,
    decay_steps: impl Into<Hyper>,
    decay_rate: impl Into<Hyper>,
    staircase: bool,
) -> Result<Output> {
    let ns = s.with_name_scope("ExponentialDecay");
    let lr = match learning_rate.into() {
        Hyper::Value(v) => Hyper::Value(v).to_output(&ns, DType::F32, "initial_learning_rate")?,
        Hyper::Tensor(t) => t,
    };
    let dtype = lr.dtype();
    if !dtype.is_float() {
        return Err(Status::invalid_argument(format!(
            "exponential_decay needs a float learning rate, {} is {dtype}",
            lr.name()
        )));
    }
    let decay_steps = decay_steps.into().to_output(&ns, dtype, "decay_steps")?;
    let decay_rate = decay_rate.into().to_output(&ns, dtype, "decay_rate")?;
    let step = if global_step.dtype() == dtype {
        global_step.clone()
    } else {
        ops::cast(&ns, global_step, dtype)?
    };
    let mut p = ops::real_div(&ns, &step, &decay_steps)?;
    if staircase {
        p = ops::floor(&ns, &p)?;
    }
    let factor = ops::pow(&ns, &decay_rate, &p)?;
    ns.op("Mul")
        .name("decayed_learning_rate")
        .input(&lr)
        .input(&factor)
        .build1()
}

/// The piecewise-constant schedule: `values[0]` while `x <= boundaries[0]`,
/// `values[i]` while `boundaries[i-1] < x <= boundaries[i]`, and the last value
/// once `x > boundaries[last]`. `boundaries` (strictly increasing) are cast to
/// `x`'s dtype; the result has the values' dtype. There must be one more value
/// than boundaries.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::train;
/// let s = Scope::new();
/// let step = train::get_or_create_global_step(&s).unwrap();
/// let x = step.read(&s).unwrap();
/// // 1.0 up to step 100 (included), 0.5 up to 200, then 0.1
/// let lr = train::piecewise_constant(&s, &x, &[100i64, 200], &[1.0f32, 0.5, 0.1]).unwrap();
/// assert_eq!(lr.dtype(), actorflow_graph::DType::F32);
/// ```
pub fn piecewise_constant<B: TensorType + PartialOrd, V: TensorType>(
    s: &Scope,
    x: &Output,
    boundaries: &[B],
    values: &[V],
) -> Result<Output> {
    if values.len() != boundaries.len() + 1 {
        return Err(Status::invalid_argument(format!(
            "The length of boundaries should be 1 less than the length of values: {} boundaries, {} values",
            boundaries.len(),
            values.len()
        )));
    }
    if let Some(w) = boundaries
        .windows(2)
        .find(|w| w[0].partial_cmp(&w[1]).is_none() || w[0] >= w[1])
    {
        return Err(Status::invalid_argument(format!(
            "boundaries must be strictly increasing: {:?} then {:?}",
            w[0], w[1]
        )));
    }
    let ns = s.with_name_scope("PiecewiseConstant");
    let values = ops::constant(&ns, Tensor::vector(values))?;
    let index = if boundaries.is_empty() {
        ops::scalar(&ns, 0i32)?
    } else {
        let b = ops::constant(&ns, Tensor::vector(boundaries))?;
        let b = if B::DTYPE == x.dtype() {
            b
        } else {
            ops::cast(&ns, &b, x.dtype())?
        };
        // the number of boundaries strictly below x
        let below = ops::cast(&ns, &ops::greater(&ns, x, &b)?, DType::I32)?;
        ops::sum_axes(&ns, &below, &[0], false)?
    };
    let axis = ops::scalar(&ns, 0i32)?;
    ops::gather(&ns, &values, &index, &axis)
}
