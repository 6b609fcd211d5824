//! Builders of the adaptive optimizer ops added to RMSProp's family:
//! `ApplyCenteredRMSProp` (RMSProp normalised by the gradient's estimated
//! variance) and `ApplyAdadelta` (a learning rate from the ratio of the update's
//! and the gradient's running RMS), each with its `ResourceApply*` form. Their
//! op definitions are registered with the other optimizer ops by the parent
//! module.

use crate::builder::{Operation, Output, Scope};
use crate::ops::training::{build_apply, ApplyOptions};
use crate::Result;

/// The inputs of `ApplyCenteredRMSProp`, in TensorFlow's order.
#[derive(Clone, Copy, Debug)]
pub struct CenteredRmsPropInputs<'a> {
    /// The variable.
    pub var: &'a Output,
    /// The mean-gradient slot.
    pub mg: &'a Output,
    /// The mean-square slot.
    pub ms: &'a Output,
    /// The momentum slot.
    pub mom: &'a Output,
    /// The learning rate (scalar).
    pub lr: &'a Output,
    /// The decay of the means (scalar).
    pub rho: &'a Output,
    /// The momentum (scalar).
    pub momentum: &'a Output,
    /// The fuzz term (scalar).
    pub epsilon: &'a Output,
    /// The gradient.
    pub grad: &'a Output,
}

impl CenteredRmsPropInputs<'_> {
    fn vars(&self) -> [&Output; 4] {
        [self.var, self.mg, self.ms, self.mom]
    }

    fn rest(&self) -> [&Output; 5] {
        [self.lr, self.rho, self.momentum, self.epsilon, self.grad]
    }
}

/// `ApplyCenteredRMSProp`: `ms += (grad² - ms) * (1 - rho)`,
/// `mg += (grad - mg) * (1 - rho)`,
/// `mom = mom * momentum + grad * lr / sqrt(ms - mg² + epsilon)`, `var -= mom`.
pub fn apply_centered_rms_prop(
    s: &Scope,
    i: &CenteredRmsPropInputs<'_>,
    opts: ApplyOptions,
) -> Result<Output> {
    build_apply(s, "ApplyCenteredRMSProp", &i.vars(), &i.rest(), opts)?.output(0)
}

/// `ResourceApplyCenteredRMSProp`.
pub fn resource_apply_centered_rms_prop(
    s: &Scope,
    i: &CenteredRmsPropInputs<'_>,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(
        s,
        "ResourceApplyCenteredRMSProp",
        &i.vars(),
        &i.rest(),
        opts,
    )
}

/// The inputs of `ApplyAdadelta`, in TensorFlow's order.
#[derive(Clone, Copy, Debug)]
pub struct AdadeltaInputs<'a> {
    /// The variable.
    pub var: &'a Output,
    /// The squared-gradient accumulator slot.
    pub accum: &'a Output,
    /// The squared-update accumulator slot.
    pub accum_update: &'a Output,
    /// The learning rate (scalar).
    pub lr: &'a Output,
    /// The accumulators' decay (scalar).
    pub rho: &'a Output,
    /// The fuzz term (scalar).
    pub epsilon: &'a Output,
    /// The gradient.
    pub grad: &'a Output,
}

impl AdadeltaInputs<'_> {
    fn vars(&self) -> [&Output; 3] {
        [self.var, self.accum, self.accum_update]
    }

    fn rest(&self) -> [&Output; 4] {
        [self.lr, self.rho, self.epsilon, self.grad]
    }
}

/// `ApplyAdadelta`: `accum = accum * rho + grad² * (1 - rho)`,
/// `update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad`,
/// `var -= update * lr`, `accum_update = accum_update * rho + update² * (1 - rho)`.
pub fn apply_adadelta(s: &Scope, i: &AdadeltaInputs<'_>, opts: ApplyOptions) -> Result<Output> {
    build_apply(s, "ApplyAdadelta", &i.vars(), &i.rest(), opts)?.output(0)
}

/// `ResourceApplyAdadelta`.
pub fn resource_apply_adadelta(
    s: &Scope,
    i: &AdadeltaInputs<'_>,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(s, "ResourceApplyAdadelta", &i.vars(), &i.rest(), opts)
}
