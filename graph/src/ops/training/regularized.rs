//! Builders of the L1/L2-regularised optimizer ops: the forward-backward
//! splitting updates `ApplyProximalGradientDescent` and `ApplyProximalAdagrad`,
//! and FTRL-proximal (`ApplyFtrl`, `ApplyFtrlV2`), each with its
//! `ResourceApply*` form. Their op definitions are registered with the other
//! optimizer ops by the parent module.

use crate::builder::{Operation, Output, Scope};
use crate::ops::training::{build_apply, ApplyOptions};
use crate::Result;

/// `ApplyProximalGradientDescent(var, alpha, l1, l2, delta)`: with
/// `prox = var - alpha * delta`, `var = sign(prox) * max(|prox| - alpha * l1, 0)
/// / (1 + alpha * l2)` (without the shrinkage when `l1` is 0); returns the
/// updated reference.
pub fn apply_proximal_gradient_descent(
    s: &Scope,
    var: &Output,
    alpha: &Output,
    l1: &Output,
    l2: &Output,
    delta: &Output,
    opts: ApplyOptions,
) -> Result<Output> {
    build_apply(
        s,
        "ApplyProximalGradientDescent",
        &[var],
        &[alpha, l1, l2, delta],
        opts,
    )?
    .output(0)
}

/// `ResourceApplyProximalGradientDescent` on the variable behind handle `var`.
pub fn resource_apply_proximal_gradient_descent(
    s: &Scope,
    var: &Output,
    alpha: &Output,
    l1: &Output,
    l2: &Output,
    delta: &Output,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(
        s,
        "ResourceApplyProximalGradientDescent",
        &[var],
        &[alpha, l1, l2, delta],
        opts,
    )
}

/// The inputs of `ApplyProximalAdagrad`, in TensorFlow's order.
#[derive(Clone, Copy, Debug)]
pub struct ProximalAdagradInputs<'a> {
    /// The variable.
    pub var: &'a Output,
    /// The squared-gradient accumulator slot.
    pub accum: &'a Output,
    /// The learning rate (a positive scalar).
    pub lr: &'a Output,
    /// L1 regularisation (a non-negative scalar).
    pub l1: &'a Output,
    /// L2 regularisation (a non-negative scalar).
    pub l2: &'a Output,
    /// The gradient.
    pub grad: &'a Output,
}

impl ProximalAdagradInputs<'_> {
    fn rest(&self) -> [&Output; 4] {
        [self.lr, self.l1, self.l2, self.grad]
    }
}

/// `ApplyProximalAdagrad`: `accum += grad²`, then the proximal step of
/// [`apply_proximal_gradient_descent`] with the learning rate
/// `lr / sqrt(accum)`.
pub fn apply_proximal_adagrad(
    s: &Scope,
    i: &ProximalAdagradInputs<'_>,
    opts: ApplyOptions,
) -> Result<Output> {
    build_apply(
        s,
        "ApplyProximalAdagrad",
        &[i.var, i.accum],
        &i.rest(),
        opts,
    )?
    .output(0)
}

/// `ResourceApplyProximalAdagrad`.
pub fn resource_apply_proximal_adagrad(
    s: &Scope,
    i: &ProximalAdagradInputs<'_>,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(
        s,
        "ResourceApplyProximalAdagrad",
        &[i.var, i.accum],
        &i.rest(),
        opts,
    )
}

/// The inputs of `ApplyFtrl` and `ApplyFtrlV2`, in TensorFlow's order.
#[derive(Clone, Copy, Debug)]
pub struct FtrlInputs<'a> {
    /// The variable.
    pub var: &'a Output,
    /// The squared-gradient accumulator slot.
    pub accum: &'a Output,
    /// The linear-term slot.
    pub linear: &'a Output,
    /// The gradient.
    pub grad: &'a Output,
    /// The learning rate (scalar).
    pub lr: &'a Output,
    /// L1 regularisation (scalar).
    pub l1: &'a Output,
    /// L2 (stabilisation) regularisation (scalar).
    pub l2: &'a Output,
    /// L2 shrinkage (scalar): present, the op is `ApplyFtrlV2`.
    pub l2_shrinkage: Option<&'a Output>,
    /// The learning-rate power (a non-positive scalar).
    pub lr_power: &'a Output,
}

impl FtrlInputs<'_> {
    /// The op's name after `Apply` and its inputs after the variables.
    fn rest(&self) -> (&'static str, Vec<&Output>) {
        match self.l2_shrinkage {
            None => (
                "Ftrl",
                vec![self.grad, self.lr, self.l1, self.l2, self.lr_power],
            ),
            Some(shrinkage) => (
                "FtrlV2",
                vec![
                    self.grad,
                    self.lr,
                    self.l1,
                    self.l2,
                    shrinkage,
                    self.lr_power,
                ],
            ),
        }
    }
}

/// `ApplyFtrl` (or `ApplyFtrlV2` when `l2_shrinkage` is given, whose gradient
/// gains `2 * l2_shrinkage * var` in the linear term): with
/// `new_accum = accum + grad²`,
/// `linear += grad - (new_accum^-lr_power - accum^-lr_power) / lr * var`,
/// `var = (sign(linear) * l1 - linear) / (new_accum^-lr_power / lr + 2 * l2)`
/// where `|linear| > l1`, else 0; `accum = new_accum`. Returns the updated
/// reference.
pub fn apply_ftrl(s: &Scope, i: &FtrlInputs<'_>, opts: ApplyOptions) -> Result<Output> {
    let (name, rest) = i.rest();
    build_apply(
        s,
        &format!("Apply{name}"),
        &[i.var, i.accum, i.linear],
        &rest,
        opts,
    )?
    .output(0)
}

/// `ResourceApplyFtrl` (or `ResourceApplyFtrlV2` with `l2_shrinkage`).
pub fn resource_apply_ftrl(s: &Scope, i: &FtrlInputs<'_>, opts: ApplyOptions) -> Result<Operation> {
    let (name, rest) = i.rest();
    build_apply(
        s,
        &format!("ResourceApply{name}"),
        &[i.var, i.accum, i.linear],
        &rest,
        opts,
    )
}
