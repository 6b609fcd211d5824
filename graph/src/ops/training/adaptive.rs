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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::ops::training::regularized::tests::signature;
    use crate::{DType, Shape, Tensor};

    #[test]
    fn signatures_match_tensorflow() {
        // TensorFlow 2.21's op registry
        for (op, inputs) in [
            (
                "ApplyCenteredRMSProp",
                "var mg ms mom lr rho momentum epsilon grad",
            ),
            (
                "SparseApplyCenteredRMSProp",
                "var mg ms mom lr rho momentum epsilon grad indices",
            ),
            (
                "ApplyAdadelta",
                "var accum accum_update lr rho epsilon grad",
            ),
            (
                "SparseApplyAdadelta",
                "var accum accum_update lr rho epsilon grad indices",
            ),
        ] {
            for resource in [false, true] {
                let name = if resource {
                    format!("Resource{op}")
                } else {
                    op.to_owned()
                };
                let (ins, attrs, outs) = signature(&name);
                assert_eq!(ins.join(" "), inputs, "{name}");
                assert_eq!(outs, usize::from(!resource), "{name}");
                assert!(attrs.contains(&"use_locking".to_owned()), "{name}");
            }
        }
    }

    #[test]
    fn builders_check_every_slot_shape() {
        let s = Scope::new();
        let var = |n: usize| ops::variable(&s, Shape::known(&[n]), DType::F64).unwrap();
        let (v, mg, ms, mom) = (var(2), var(2), var(2), var(3));
        let x = ops::scalar(&s, 0.1f64).unwrap();
        let g = ops::constant(&s, Tensor::vector(&[1.0f64, 2.0])).unwrap();
        let mut i = CenteredRmsPropInputs {
            var: &v,
            mg: &mg,
            ms: &ms,
            mom: &mom,
            lr: &x,
            rho: &x,
            momentum: &x,
            epsilon: &x,
            grad: &g,
        };
        let e = apply_centered_rms_prop(&s, &i, ApplyOptions::default()).unwrap_err();
        assert!(e.message().contains("mom of 'ApplyCenteredRMSProp"), "{e}");
        i.mom = &ms;
        let out = apply_centered_rms_prop(&s, &i, ApplyOptions::default()).unwrap();
        assert_eq!(out.shape(), Shape::known(&[2]));
        let a = AdadeltaInputs {
            var: &v,
            accum: &mg,
            accum_update: &ms,
            lr: &x,
            rho: &x,
            epsilon: &x,
            grad: &g,
        };
        let out = apply_adadelta(&s, &a, ApplyOptions::default()).unwrap();
        assert_eq!(out.op().op_type(), "ApplyAdadelta");
        assert!(out.data_type().is_ref);
    }
}
