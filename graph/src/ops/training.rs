//! Optimizer update ops (TensorFlow's `training_ops.cc`, whitepaper §4.1): fused
//! kernels that update a variable, and the slot variables an optimizer keeps for
//! it, in place from a gradient.
//!
//! Each op comes in two forms with TensorFlow's names, inputs and attributes:
//! `Apply*` takes reference variables (`Ref(T)` inputs, the `VariableV2` output)
//! and outputs the updated reference; `ResourceApply*` takes resource handles (the
//! `VarHandleOp` output) and has no outputs. Every op has `use_locking` (default
//! false): with it the kernel holds the locks of all the variables it updates for
//! the whole update, so concurrent updates are serialised; without it each
//! variable is locked only while that variable itself is written (TensorFlow's
//! unlocked, Hogwild-style update, without data races).
//!
//! | op | inputs after the variables | update |
//! |---|---|---|
//! | `ApplyGradientDescent` | `alpha, delta` | `var -= alpha * delta` |
//! | `ApplyMomentum` | `lr, grad, momentum` | `accum = accum * momentum + grad`; `var -= lr * accum` (Nesterov: `var -= grad * lr + accum * momentum * lr`) |
//! | `ApplyAdagrad` | `lr, grad` | `accum += grad * grad` (unless `update_slots` is false); `var -= grad * lr * rsqrt(accum)` |
//! | `ApplyAdam` | `beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad` | see [`apply_adam`] |
//! | `ApplyRMSProp` | `lr, rho, momentum, epsilon, grad` | see [`apply_rms_prop`] |
//! | `ApplyCenteredRMSProp` | `lr, rho, momentum, epsilon, grad` (variables `var, mg, ms, mom`) | see [`apply_centered_rms_prop`] |
//! | `ApplyAdadelta` | `lr, rho, epsilon, grad` | see [`apply_adadelta`] |
//! | `ApplyProximalGradientDescent` | `alpha, l1, l2, delta` | see [`apply_proximal_gradient_descent`] |
//! | `ApplyProximalAdagrad` | `lr, l1, l2, grad` | see [`apply_proximal_adagrad`] |
//! | `ApplyFtrl` | `grad, lr, l1, l2, lr_power` | see [`apply_ftrl`] |
//! | `ApplyFtrlV2` | `grad, lr, l1, l2, l2_shrinkage, lr_power` | see [`apply_ftrl`] |
//!
//! Hyper-parameters are scalars of the variable's dtype; the gradient has the
//! variable's shape.
//!
//! - [`adaptive`] — the builders of `ApplyCenteredRMSProp` and `ApplyAdadelta`.
//! - [`regularized`] — the builders of the L1/L2-regularised families
//!   (`ApplyProximalGradientDescent`, `ApplyProximalAdagrad`, `ApplyFtrl`,
//!   `ApplyFtrlV2`).

pub mod adaptive;
pub mod regularized;

pub use adaptive::*;
pub use regularized::*;

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// One optimizer family: its name (`Apply<name>`), its variable inputs (`Ref(T)`
/// or `resource`), its other inputs in order (`true`: shaped like the variable,
/// i.e. the gradient; `false`: a scalar), and whether it has `use_nesterov`.
struct Family {
    name: &'static str,
    vars: &'static [&'static str],
    rest: &'static [(&'static str, bool)],
    nesterov: bool,
    /// Has `update_slots` (`ApplyAdagrad`: false leaves the accumulator alone).
    update_slots: bool,
    /// Has `multiply_linear_by_lr` (the FTRL ops).
    linear_by_lr: bool,
}

const FAMILIES: &[Family] = &[
    Family {
        name: "Adagrad",
        vars: &["var", "accum"],
        rest: &[("lr", false), ("grad", true)],
        nesterov: false,
        update_slots: true,
        linear_by_lr: false,
    },
    Family {
        name: "GradientDescent",
        vars: &["var"],
        rest: &[("alpha", false), ("delta", true)],
        nesterov: false,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "Momentum",
        vars: &["var", "accum"],
        rest: &[("lr", false), ("grad", true), ("momentum", false)],
        nesterov: true,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "Adam",
        vars: &["var", "m", "v"],
        rest: &[
            ("beta1_power", false),
            ("beta2_power", false),
            ("lr", false),
            ("beta1", false),
            ("beta2", false),
            ("epsilon", false),
            ("grad", true),
        ],
        nesterov: true,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "RMSProp",
        vars: &["var", "ms", "mom"],
        rest: &[
            ("lr", false),
            ("rho", false),
            ("momentum", false),
            ("epsilon", false),
            ("grad", true),
        ],
        nesterov: false,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "CenteredRMSProp",
        vars: &["var", "mg", "ms", "mom"],
        rest: &[
            ("lr", false),
            ("rho", false),
            ("momentum", false),
            ("epsilon", false),
            ("grad", true),
        ],
        nesterov: false,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "Adadelta",
        vars: &["var", "accum", "accum_update"],
        rest: &[
            ("lr", false),
            ("rho", false),
            ("epsilon", false),
            ("grad", true),
        ],
        nesterov: false,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "ProximalGradientDescent",
        vars: &["var"],
        rest: &[
            ("alpha", false),
            ("l1", false),
            ("l2", false),
            ("delta", true),
        ],
        nesterov: false,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "ProximalAdagrad",
        vars: &["var", "accum"],
        rest: &[("lr", false), ("l1", false), ("l2", false), ("grad", true)],
        nesterov: false,
        update_slots: false,
        linear_by_lr: false,
    },
    Family {
        name: "Ftrl",
        vars: &["var", "accum", "linear"],
        rest: &[
            ("grad", true),
            ("lr", false),
            ("l1", false),
            ("l2", false),
            ("lr_power", false),
        ],
        nesterov: false,
        update_slots: false,
        linear_by_lr: true,
    },
    Family {
        name: "FtrlV2",
        vars: &["var", "accum", "linear"],
        rest: &[
            ("grad", true),
            ("lr", false),
            ("l1", false),
            ("l2", false),
            ("l2_shrinkage", false),
            ("lr_power", false),
        ],
        nesterov: false,
        update_slots: false,
        linear_by_lr: true,
    },
];

/// Registers the optimizer ops (`Apply*` and `ResourceApply*` of each family).
pub fn register_all_ops(r: &OpRegistry) {
    for f in FAMILIES {
        for resource in [false, true] {
            let name = if resource {
                format!("ResourceApply{}", f.name)
            } else {
                format!("Apply{}", f.name)
            };
            let mut b = OpDef::build(&name);
            for v in f.vars {
                b = b.input(&if resource {
                    format!("{v}: resource")
                } else {
                    format!("{v}: Ref(T)")
                });
            }
            for (arg, _) in f.rest {
                b = b.input(&format!("{arg}: T"));
            }
            if !resource {
                b = b.output("out: Ref(T)");
            }
            b = b
                .attr(&format!("T: {}", crate::ops::NUMERIC_TYPES))
                .attr("use_locking: bool = false");
            if f.nesterov {
                b = b.attr("use_nesterov: bool = false");
            }
            if f.update_slots {
                b = b.attr("update_slots: bool = true");
            }
            if f.linear_by_lr {
                b = b.attr("multiply_linear_by_lr: bool = false");
            }
            if resource {
                b = b.stateful();
            }
            r.register(b.shape_fn(apply_shape));
        }
    }
}

/// The family an `Apply*`/`ResourceApply*` op belongs to.
fn family_of(op: &str) -> Option<&'static Family> {
    let base = op
        .strip_prefix("ResourceApply")
        .or_else(|| op.strip_prefix("Apply"))?;
    FAMILIES.iter().find(|f| f.name == base)
}

/// TensorFlow's `Apply*ShapeFn`: the slot variables (ref forms) and the gradient
/// merge with the variable's shape, every other input is a scalar; the ref forms
/// output the variable's shape.
fn apply_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let node = c.node().name.clone();
    let op = c.node().op.clone();
    let fam = family_of(&op).ok_or_else(|| Status::internal(format!("{op} is no optimizer op")))?;
    let resource = op.starts_with("Resource");
    let num_vars = fam.vars.len();
    let mut s = if resource {
        Shape::unknown()
    } else {
        c.input(0)
    };
    if !resource {
        for (i, name) in fam.vars.iter().enumerate().skip(1) {
            s = s.merge(&c.input(i)).map_err(|e| {
                Status::invalid_argument(format!(
                    "{name} of '{node}' must have the shape of var: {}",
                    e.message()
                ))
            })?;
        }
    }
    for (k, (name, shaped)) in fam.rest.iter().enumerate() {
        let input = c.input(num_vars + k);
        if *shaped {
            s = s.merge(&input).map_err(|e| {
                Status::invalid_argument(format!(
                    "{name} of '{node}' must have the shape of var: {}",
                    e.message()
                ))
            })?;
        } else if let Some(rank) = input.rank() {
            if rank != 0 {
                return Err(Status::invalid_argument(format!(
                    "Shape must be rank 0 but is rank {rank} for {name} of '{node}'"
                )));
            }
        }
    }
    if c.num_outputs() > 0 {
        c.set_output(0, s)?;
    }
    Ok(())
}

/// The attributes every optimizer op has (`use_nesterov` and
/// `multiply_linear_by_lr` only where the op has them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Hold every updated variable's lock for the whole update.
    pub use_locking: bool,
    /// Nesterov momentum (`ApplyMomentum`, `ApplyAdam`; ignored elsewhere).
    pub use_nesterov: bool,
    /// Keep FTRL's linear term multiplied by the learning rate (`ApplyFtrl`,
    /// `ApplyFtrlV2`; ignored elsewhere).
    pub multiply_linear_by_lr: bool,
}

/// Builds `op` (an `Apply*` or `ResourceApply*` of [`FAMILIES`]) from its
/// variables and its other inputs in TensorFlow's order, with the attributes of
/// `opts` the op has.
pub(crate) fn build_apply(
    s: &Scope,
    op: &str,
    vars: &[&Output],
    rest: &[&Output],
    opts: ApplyOptions,
) -> Result<Operation> {
    let fam = family_of(op).ok_or_else(|| Status::internal(format!("{op} is no optimizer op")))?;
    let mut b = s.op(op);
    for v in vars {
        b = b.input(*v);
    }
    for r in rest {
        b = b.input(*r);
    }
    // `T` comes from the first non-resource input (the variables of the resource
    // forms are handles).
    if let Some(first) = rest.first() {
        b = b.attr("T", first.dtype());
    }
    b = b.attr("use_locking", opts.use_locking);
    if fam.nesterov {
        b = b.attr("use_nesterov", opts.use_nesterov);
    }
    if fam.linear_by_lr {
        b = b.attr("multiply_linear_by_lr", opts.multiply_linear_by_lr);
    }
    b.build()
}

/// `ApplyGradientDescent`: `var -= alpha * delta`; returns the updated reference.
pub fn apply_gradient_descent(
    s: &Scope,
    var: &Output,
    alpha: &Output,
    delta: &Output,
    opts: ApplyOptions,
) -> Result<Output> {
    build_apply(s, "ApplyGradientDescent", &[var], &[alpha, delta], opts)?.output(0)
}

/// `ResourceApplyGradientDescent` on the variable behind handle `var`.
pub fn resource_apply_gradient_descent(
    s: &Scope,
    var: &Output,
    alpha: &Output,
    delta: &Output,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(
        s,
        "ResourceApplyGradientDescent",
        &[var],
        &[alpha, delta],
        opts,
    )
}

/// `ApplyAdagrad(var, accum, lr, grad)`: `accum += grad * grad`, then `var -= grad
/// * lr / sqrt(accum)`; returns the updated reference.
pub fn apply_adagrad(
    s: &Scope,
    var: &Output,
    accum: &Output,
    lr: &Output,
    grad: &Output,
    opts: ApplyOptions,
) -> Result<Output> {
    build_apply(s, "ApplyAdagrad", &[var, accum], &[lr, grad], opts)?.output(0)
}

/// `ResourceApplyAdagrad`.
pub fn resource_apply_adagrad(
    s: &Scope,
    var: &Output,
    accum: &Output,
    lr: &Output,
    grad: &Output,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(s, "ResourceApplyAdagrad", &[var, accum], &[lr, grad], opts)
}

/// The inputs of `ApplyMomentum`, in TensorFlow's order.
#[derive(Clone, Copy, Debug)]
pub struct MomentumInputs<'a> {
    /// The variable (a reference, or a handle for the resource form).
    pub var: &'a Output,
    /// The accumulator slot.
    pub accum: &'a Output,
    /// The learning rate (scalar).
    pub lr: &'a Output,
    /// The gradient.
    pub grad: &'a Output,
    /// The momentum (scalar).
    pub momentum: &'a Output,
}

/// `ApplyMomentum`: `accum = accum * momentum + grad`, then `var -= lr * accum`, or
/// with `use_nesterov`, `var -= grad * lr + accum * momentum * lr`.
pub fn apply_momentum(s: &Scope, i: &MomentumInputs<'_>, opts: ApplyOptions) -> Result<Output> {
    build_apply(
        s,
        "ApplyMomentum",
        &[i.var, i.accum],
        &[i.lr, i.grad, i.momentum],
        opts,
    )?
    .output(0)
}

/// `ResourceApplyMomentum`.
pub fn resource_apply_momentum(
    s: &Scope,
    i: &MomentumInputs<'_>,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(
        s,
        "ResourceApplyMomentum",
        &[i.var, i.accum],
        &[i.lr, i.grad, i.momentum],
        opts,
    )
}

/// The inputs of `ApplyAdam`, in TensorFlow's order.
#[derive(Clone, Copy, Debug)]
pub struct AdamInputs<'a> {
    /// The variable.
    pub var: &'a Output,
    /// The first-moment slot.
    pub m: &'a Output,
    /// The second-moment slot.
    pub v: &'a Output,
    /// `beta1 ^ t` (scalar).
    pub beta1_power: &'a Output,
    /// `beta2 ^ t` (scalar).
    pub beta2_power: &'a Output,
    /// The learning rate (scalar).
    pub lr: &'a Output,
    /// The first-moment decay (scalar).
    pub beta1: &'a Output,
    /// The second-moment decay (scalar).
    pub beta2: &'a Output,
    /// The denominator's fuzz term (scalar).
    pub epsilon: &'a Output,
    /// The gradient.
    pub grad: &'a Output,
}

impl AdamInputs<'_> {
    fn rest(&self) -> [&Output; 7] {
        [
            self.beta1_power,
            self.beta2_power,
            self.lr,
            self.beta1,
            self.beta2,
            self.epsilon,
            self.grad,
        ]
    }
}

/// `ApplyAdam`: with `alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power)`,
/// `m += (grad - m) * (1 - beta1)`, `v += (grad² - v) * (1 - beta2)`, then
/// `var -= m * alpha / (sqrt(v) + epsilon)`, or with `use_nesterov`,
/// `var -= (grad * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon)`.
pub fn apply_adam(s: &Scope, i: &AdamInputs<'_>, opts: ApplyOptions) -> Result<Output> {
    build_apply(s, "ApplyAdam", &[i.var, i.m, i.v], &i.rest(), opts)?.output(0)
}

/// `ResourceApplyAdam`.
pub fn resource_apply_adam(s: &Scope, i: &AdamInputs<'_>, opts: ApplyOptions) -> Result<Operation> {
    build_apply(s, "ResourceApplyAdam", &[i.var, i.m, i.v], &i.rest(), opts)
}

/// The inputs of `ApplyRMSProp`, in TensorFlow's order.
#[derive(Clone, Copy, Debug)]
pub struct RmsPropInputs<'a> {
    /// The variable.
    pub var: &'a Output,
    /// The mean-square slot.
    pub ms: &'a Output,
    /// The momentum slot.
    pub mom: &'a Output,
    /// The learning rate (scalar).
    pub lr: &'a Output,
    /// The mean-square decay (scalar).
    pub rho: &'a Output,
    /// The momentum (scalar).
    pub momentum: &'a Output,
    /// The fuzz term (scalar).
    pub epsilon: &'a Output,
    /// The gradient.
    pub grad: &'a Output,
}

impl RmsPropInputs<'_> {
    fn rest(&self) -> [&Output; 5] {
        [self.lr, self.rho, self.momentum, self.epsilon, self.grad]
    }
}

/// `ApplyRMSProp`: `ms += (grad² - ms) * (1 - rho)`,
/// `mom = mom * momentum + grad * lr / sqrt(ms + epsilon)`, `var -= mom`.
pub fn apply_rms_prop(s: &Scope, i: &RmsPropInputs<'_>, opts: ApplyOptions) -> Result<Output> {
    build_apply(s, "ApplyRMSProp", &[i.var, i.ms, i.mom], &i.rest(), opts)?.output(0)
}

/// `ResourceApplyRMSProp`.
pub fn resource_apply_rms_prop(
    s: &Scope,
    i: &RmsPropInputs<'_>,
    opts: ApplyOptions,
) -> Result<Operation> {
    build_apply(
        s,
        "ResourceApplyRMSProp",
        &[i.var, i.ms, i.mom],
        &i.rest(),
        opts,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::{DType, Tensor};

    #[test]
    fn signatures_match_tensorflow() {
        let r = OpRegistry::global();
        let adam = r.lookup("ApplyAdam").unwrap();
        let names: Vec<&str> = adam.inputs.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "var",
                "m",
                "v",
                "beta1_power",
                "beta2_power",
                "lr",
                "beta1",
                "beta2",
                "epsilon",
                "grad"
            ]
        );
        assert!(adam.attr("use_nesterov").is_some());
        assert_eq!(adam.outputs.len(), 1);
        let rms = r.lookup("ResourceApplyRMSProp").unwrap();
        assert!(rms.outputs.is_empty());
        assert!(rms.attr("use_nesterov").is_none());
        assert!(rms.attr("use_locking").is_some());
        let gd = r.lookup("ApplyGradientDescent").unwrap();
        let names: Vec<&str> = gd.inputs.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["var", "alpha", "delta"]);
        let m = r.lookup("ResourceApplyMomentum").unwrap();
        let names: Vec<&str> = m.inputs.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["var", "accum", "lr", "grad", "momentum"]);
    }

    #[test]
    fn builders_infer_types_and_check_shapes() {
        let s = Scope::new();
        let v = ops::variable(&s, Shape::known(&[3]), DType::F32).unwrap();
        let a = ops::variable(&s, Shape::known(&[3]), DType::F32).unwrap();
        let lr = ops::scalar(&s, 0.1f32).unwrap();
        let g = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0, 3.0])).unwrap();
        let out = apply_momentum(
            &s,
            &MomentumInputs {
                var: &v,
                accum: &a,
                lr: &lr,
                grad: &g,
                momentum: &lr,
            },
            ApplyOptions {
                use_nesterov: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(out.shape(), Shape::known(&[3]));
        assert!(out.data_type().is_ref);
        let def = s.graph_def();
        let n = def.find(out.op().name()).unwrap();
        assert!(n.get_attr::<bool>("use_nesterov").unwrap());
        assert_eq!(n.get_attr::<DType>("T").unwrap(), DType::F32);
        // a gradient of the wrong shape, a non-scalar learning rate
        let g2 = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        let e = apply_gradient_descent(&s, &v, &lr, &g2, ApplyOptions::default()).unwrap_err();
        assert!(e.message().contains("delta"), "{e}");
        let e = apply_gradient_descent(&s, &v, &g, &g, ApplyOptions::default()).unwrap_err();
        assert!(e.message().contains("rank 0"), "{e}");
        let h = ops::var_handle_op(&s, DType::F32, Shape::known(&[3])).unwrap();
        let op = resource_apply_gradient_descent(&s, &h, &lr, &g, ApplyOptions::default()).unwrap();
        assert_eq!(op.num_outputs(), 0);
    }
}
