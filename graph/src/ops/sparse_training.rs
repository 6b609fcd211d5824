//! Sparse optimizer update ops (TensorFlow's `training_ops.cc`): like their
//! dense `Apply*` counterparts (see [`crate::ops::training`]) but the gradient
//! holds only some rows of the variable, named by `indices`, and only those rows
//! of the variable and its slots change. Rows named twice are updated twice, one
//! after the other, as TensorFlow's CPU kernels do (optimizers sum duplicates
//! first).
//!
//! | op | inputs after the variables |
//! |---|---|
//! | `SparseApplyAdagrad` | `lr, grad, indices` |
//! | `SparseApplyMomentum` | `lr, grad, indices, momentum` |
//! | `SparseApplyRMSProp` | `lr, rho, momentum, epsilon, grad, indices` |
//! | `SparseApplyFtrl` | `grad, indices, lr, l1, l2, lr_power` |
//! | `SparseApplyFtrlV2` | `grad, indices, lr, l1, l2, l2_shrinkage, lr_power` |
//! | `SparseApplyCenteredRMSProp` | `lr, rho, momentum, epsilon, grad, indices` (variables `var, mg, ms, mom`) |
//! | `SparseApplyAdadelta` | `lr, rho, epsilon, grad, indices` (variables `var, accum, accum_update`) |
//! | `SparseApplyProximalGradientDescent` | `alpha, l1, l2, grad, indices` (variable `var` alone) |
//! | `SparseApplyProximalAdagrad` | `lr, l1, l2, grad, indices` |
//!
//! Each has a `ResourceSparseApply*` form taking resource handles and
//! outputting nothing. `grad` has shape `[N] + var.shape[1:]` and `indices`
//! shape `[N]`; the other inputs are scalars.

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// What one input after the variables is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arg {
    Scalar,
    Grad,
    Indices,
}

/// One sparse optimizer family: `SparseApply<name>`, its variables, its other
/// inputs in order, and its extra boolean attributes (with their defaults).
struct Family {
    name: &'static str,
    vars: &'static [&'static str],
    rest: &'static [(&'static str, Arg)],
    flags: &'static [&'static str],
}

use Arg::{Grad, Indices, Scalar};

const FAMILIES: &[Family] = &[
    Family {
        name: "Adagrad",
        vars: &["var", "accum"],
        rest: &[("lr", Scalar), ("grad", Grad), ("indices", Indices)],
        flags: &["update_slots: bool = true"],
    },
    Family {
        name: "Momentum",
        vars: &["var", "accum"],
        rest: &[
            ("lr", Scalar),
            ("grad", Grad),
            ("indices", Indices),
            ("momentum", Scalar),
        ],
        flags: &["use_nesterov: bool = false"],
    },
    Family {
        name: "RMSProp",
        vars: &["var", "ms", "mom"],
        rest: &[
            ("lr", Scalar),
            ("rho", Scalar),
            ("momentum", Scalar),
            ("epsilon", Scalar),
            ("grad", Grad),
            ("indices", Indices),
        ],
        flags: &[],
    },
    Family {
        name: "Ftrl",
        vars: &["var", "accum", "linear"],
        rest: &[
            ("grad", Grad),
            ("indices", Indices),
            ("lr", Scalar),
            ("l1", Scalar),
            ("l2", Scalar),
            ("lr_power", Scalar),
        ],
        flags: &["multiply_linear_by_lr: bool = false"],
    },
    Family {
        name: "FtrlV2",
        vars: &["var", "accum", "linear"],
        rest: &[
            ("grad", Grad),
            ("indices", Indices),
            ("lr", Scalar),
            ("l1", Scalar),
            ("l2", Scalar),
            ("l2_shrinkage", Scalar),
            ("lr_power", Scalar),
        ],
        flags: &["multiply_linear_by_lr: bool = false"],
    },
    Family {
        name: "CenteredRMSProp",
        vars: &["var", "mg", "ms", "mom"],
        rest: &[
            ("lr", Scalar),
            ("rho", Scalar),
            ("momentum", Scalar),
            ("epsilon", Scalar),
            ("grad", Grad),
            ("indices", Indices),
        ],
        flags: &[],
    },
    Family {
        name: "Adadelta",
        vars: &["var", "accum", "accum_update"],
        rest: &[
            ("lr", Scalar),
            ("rho", Scalar),
            ("epsilon", Scalar),
            ("grad", Grad),
            ("indices", Indices),
        ],
        flags: &[],
    },
    Family {
        name: "ProximalGradientDescent",
        vars: &["var"],
        rest: &[
            ("alpha", Scalar),
            ("l1", Scalar),
            ("l2", Scalar),
            ("grad", Grad),
            ("indices", Indices),
        ],
        flags: &[],
    },
    Family {
        name: "ProximalAdagrad",
        vars: &["var", "accum"],
        rest: &[
            ("lr", Scalar),
            ("l1", Scalar),
            ("l2", Scalar),
            ("grad", Grad),
            ("indices", Indices),
        ],
        flags: &[],
    },
];

/// Registers `SparseApply*` and `ResourceSparseApply*` of every family.
pub fn register_all_ops(r: &OpRegistry) {
    for f in FAMILIES {
        for resource in [false, true] {
            let prefix = if resource { "Resource" } else { "" };
            let mut b = OpDef::build(&format!("{prefix}SparseApply{}", f.name));
            for v in f.vars {
                let ty = if resource { "resource" } else { "Ref(T)" };
                b = b.input(&format!("{v}: {ty}"));
            }
            for (arg, kind) in f.rest {
                let ty = if *kind == Indices { "Tindices" } else { "T" };
                b = b.input(&format!("{arg}: {ty}"));
            }
            if resource {
                b = b.stateful();
            } else {
                b = b.output("out: Ref(T)");
            }
            b = b
                .attr(&format!("T: {}", crate::ops::NUMERIC_TYPES))
                .attr("Tindices: {int32, int64}")
                .attr("use_locking: bool = false");
            for flag in f.flags {
                b = b.attr(flag);
            }
            r.register(b.shape_fn(sparse_apply_shape));
        }
    }
}

fn family_of(op: &str) -> Option<&'static Family> {
    let base = op.strip_prefix("Resource").unwrap_or(op);
    let base = base.strip_prefix("SparseApply")?;
    FAMILIES.iter().find(|f| f.name == base)
}

/// TensorFlow's sparse `Apply*ShapeFn`: the slots (ref forms) merge with the
/// variable; `indices` is a vector whose length is `grad`'s first dimension;
/// `grad`'s other dimensions are the variable's; the rest are scalars.
fn sparse_apply_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let node = c.node().name.clone();
    let op = c.node().op.clone();
    let fam = family_of(&op)
        .ok_or_else(|| Status::internal(format!("{op} is no sparse optimizer op")))?;
    let resource = op.starts_with("Resource");
    let mut var = if resource {
        Shape::unknown()
    } else {
        c.input(0)
    };
    let mismatch = |what: &str, e: Status| {
        Status::invalid_argument(format!("{what} of '{node}': {}", e.message()))
    };
    if !resource {
        for (i, name) in fam.vars.iter().enumerate().skip(1) {
            var = var
                .merge(&c.input(i))
                .map_err(|e| mismatch(&format!("{name} must have the shape of var;"), e))?;
        }
    }
    let n = fam.vars.len();
    let pos = |kind: Arg| fam.rest.iter().position(|(_, k)| *k == kind);
    let (Some(gi), Some(ii)) = (pos(Grad), pos(Indices)) else {
        return Err(Status::internal(format!("{op} has no grad or indices")));
    };
    let (grad, indices) = (c.input(n + gi), c.input(n + ii));
    if let Some(r) = indices.rank() {
        if r != 1 {
            return Err(Status::invalid_argument(format!(
                "Shape must be rank 1 but is rank {r} for indices of '{node}'"
            )));
        }
    }
    if let (Some(g), Some(v)) = (grad.dims(), var.dims()) {
        if g.len() != v.len() || g.is_empty() {
            return Err(Status::invalid_argument(format!(
                "var and grad of '{node}' do not have the same rank: {var} and {grad}"
            )));
        }
        Shape::from_dims(&g[1..])
            .merge(&Shape::from_dims(&v[1..]))
            .map_err(|e| mismatch("var and grad do not have the same shape[1:];", e))?;
    }
    if let (Some(g0), Some(i0)) = (grad.dim(0), indices.dim(0)) {
        if g0 != i0 {
            return Err(Status::invalid_argument(format!(
                "grad must be the same size as indices in the first dimension of '{node}': {g0} vs {i0}"
            )));
        }
    }
    for (k, (name, kind)) in fam.rest.iter().enumerate() {
        if *kind != Scalar {
            continue;
        }
        if let Some(rank) = c.input(n + k).rank() {
            if rank != 0 {
                return Err(Status::invalid_argument(format!(
                    "Shape must be rank 0 but is rank {rank} for {name} of '{node}'"
                )));
            }
        }
    }
    if c.num_outputs() > 0 {
        c.set_output(0, var)?;
    }
    Ok(())
}

/// Builds `SparseApply<family>` (ref variables; `resource`: false) or
/// `ResourceSparseApply<family>` (handles) from the variables and the other
/// inputs in TensorFlow's order (see the module table), with `use_locking` and
/// the family's flag (`use_nesterov` for Momentum; others ignore it).
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::{ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let var = ops::variable(&s, Shape::known(&[4, 2]), DType::F32).unwrap();
/// let accum = ops::variable(&s, Shape::known(&[4, 2]), DType::F32).unwrap();
/// let lr = ops::scalar(&s, 0.1f32).unwrap();
/// let grad = ops::constant(&s, Tensor::new(&[1, 2], vec![1.0f32, 2.0]).unwrap()).unwrap();
/// let idx = ops::constant(&s, Tensor::vector(&[3i32])).unwrap();
/// let op = ops::sparse_apply(&s, "Adagrad", false, &[&var, &accum], &[&lr, &grad, &idx], false, false).unwrap();
/// assert_eq!(op.op_type(), "SparseApplyAdagrad");
/// ```
pub fn sparse_apply(
    s: &Scope,
    family: &str,
    resource: bool,
    vars: &[&Output],
    rest: &[&Output],
    use_locking: bool,
    use_nesterov: bool,
) -> Result<Operation> {
    let fam = FAMILIES
        .iter()
        .find(|f| f.name == family)
        .ok_or_else(|| Status::invalid_argument(format!("no sparse optimizer {family}")))?;
    if vars.len() != fam.vars.len() || rest.len() != fam.rest.len() {
        return Err(Status::invalid_argument(format!(
            "SparseApply{family} takes {} variables and {} other inputs, got {} and {}",
            fam.vars.len(),
            fam.rest.len(),
            vars.len(),
            rest.len()
        )));
    }
    let prefix = if resource { "Resource" } else { "" };
    let mut b = s.op(&format!("{prefix}SparseApply{family}"));
    for v in vars {
        b = b.input(*v);
    }
    for r in rest {
        b = b.input(*r);
    }
    if let Some(k) = fam.rest.iter().position(|(_, k)| *k == Grad) {
        b = b.attr("T", rest[k].dtype());
    }
    b = b.attr("use_locking", use_locking);
    if fam.name == "Momentum" {
        b = b.attr("use_nesterov", use_nesterov);
    }
    b.build()
}
