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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops;
    use crate::{DType, OpRegistry, Shape, Tensor};

    /// `op`'s input names, its attributes' names and its number of outputs.
    pub(crate) fn signature(op: &str) -> (Vec<String>, Vec<String>, usize) {
        let d = OpRegistry::global().lookup(op).unwrap();
        (
            d.inputs.iter().map(|a| a.name.clone()).collect(),
            d.attrs.iter().map(|a| a.name.clone()).collect(),
            d.outputs.len(),
        )
    }

    #[test]
    fn signatures_match_tensorflow() {
        // TensorFlow 2.21's op registry
        for (op, inputs) in [
            ("ApplyProximalGradientDescent", "var alpha l1 l2 delta"),
            (
                "SparseApplyProximalGradientDescent",
                "var alpha l1 l2 grad indices",
            ),
            ("ApplyProximalAdagrad", "var accum lr l1 l2 grad"),
            (
                "SparseApplyProximalAdagrad",
                "var accum lr l1 l2 grad indices",
            ),
            ("ApplyFtrl", "var accum linear grad lr l1 l2 lr_power"),
            (
                "SparseApplyFtrl",
                "var accum linear grad indices lr l1 l2 lr_power",
            ),
            (
                "ApplyFtrlV2",
                "var accum linear grad lr l1 l2 l2_shrinkage lr_power",
            ),
            (
                "SparseApplyFtrlV2",
                "var accum linear grad indices lr l1 l2 l2_shrinkage lr_power",
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
                assert_eq!(
                    attrs.contains(&"multiply_linear_by_lr".to_owned()),
                    op.contains("Ftrl"),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn ftrl_builders_pick_the_form_and_check_shapes() {
        let s = Scope::new();
        let v = ops::variable(&s, Shape::known(&[3]), DType::F32).unwrap();
        let a = ops::variable(&s, Shape::known(&[3]), DType::F32).unwrap();
        let l = ops::variable(&s, Shape::known(&[3]), DType::F32).unwrap();
        let x = ops::scalar(&s, 0.1f32).unwrap();
        let g = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0, 3.0])).unwrap();
        let mut i = FtrlInputs {
            var: &v,
            accum: &a,
            linear: &l,
            grad: &g,
            lr: &x,
            l1: &x,
            l2: &x,
            l2_shrinkage: None,
            lr_power: &x,
        };
        let opts = ApplyOptions {
            multiply_linear_by_lr: true,
            ..Default::default()
        };
        let out = apply_ftrl(&s, &i, opts).unwrap();
        assert_eq!(out.op().op_type(), "ApplyFtrl");
        assert_eq!(out.shape(), Shape::known(&[3]));
        let def = s.graph_def();
        let n = def.find(out.op().name()).unwrap();
        assert!(n.get_attr::<bool>("multiply_linear_by_lr").unwrap());
        i.l2_shrinkage = Some(&x);
        assert_eq!(
            apply_ftrl(&s, &i, opts).unwrap().op().op_type(),
            "ApplyFtrlV2"
        );
        // a gradient of the wrong shape names the input and the node
        let g2 = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        i.grad = &g2;
        let e = apply_ftrl(&s, &i, opts).unwrap_err();
        assert!(e.message().contains("grad of 'ApplyFtrlV2"), "{e}");
        // proximal descent: a non-scalar l1
        let e = apply_proximal_gradient_descent(&s, &v, &x, &g, &x, &g, opts).unwrap_err();
        assert!(e.message().contains("rank 0"), "{e}");
        let h = ops::var_handle_op(&s, DType::F32, Shape::known(&[3])).unwrap();
        let op = resource_apply_proximal_gradient_descent(&s, &h, &x, &x, &x, &g, opts).unwrap();
        assert_eq!(op.num_outputs(), 0);
    }
}
