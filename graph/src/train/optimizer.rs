//! The [`Optimizer`] trait (TensorFlow v1's `tf.compat.v1.train.Optimizer`):
//! `compute_gradients` adds the backward graph, `apply_gradients` adds one fused
//! update op per variable (and the global step's increment), `minimize` does
//! both. An optimizer implements three hooks — [`Optimizer::create_slots`],
//! [`Optimizer::apply_dense`] and optionally [`Optimizer::finish`] — and gets
//! the rest. Sparse gradients (the rows a `Gather` read,
//! [`IndexedSlices`]) go to [`Optimizer::apply_sparse_duplicate_indices`],
//! which by default sums the rows of duplicate indices and calls
//! [`Optimizer::apply_sparse`], which by default makes them dense: an
//! optimizer with a sparse update overrides either (TensorFlow's
//! `_apply_sparse_duplicate_indices` and `_apply_sparse`).
//!
//! Graph layout of `apply_gradients` on an optimizer named `Adam` (names made
//! unique as usual):
//!
//! ```text
//! <var>/Adam, <var>/Adam_1        slot variables (created once, colocated)
//! Adam/update_<var>/ApplyAdam     one update per variable (colocated with it)
//! Adam/update                     NoOp after every update (and `finish`'s ops)
//! Adam/increment_global_step      AssignAdd(global_step, 1) after the update,
//!                                 when a global step is given
//! ```
//!
//! The returned operation is the last of these: run it as a target once per
//! training step.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::{gated_sparse_gradients, Gradient, IndexedSlices};
use crate::ops;
use crate::train::slots::SlotStore;
use crate::train::variables::{float_scalar, trainable_variables, VarKind, VarRef};
use crate::{DType, Result, Status};

/// A gradient and the variable it belongs to (`None`: the loss does not depend
/// on the variable).
#[derive(Clone, Debug)]
pub struct GradAndVar {
    /// d(loss)/d(var): a tensor shaped like the variable, or rows of it
    /// (`Output`s convert with `.into()`).
    pub grad: Option<Gradient>,
    /// The variable.
    pub var: VarRef,
}

/// A hyper-parameter: a constant, or a scalar tensor computed in the graph (a
/// decaying learning rate). Either is converted to each variable's dtype.
#[derive(Clone, Debug)]
pub enum Hyper {
    /// A constant.
    Value(f64),
    /// A scalar tensor.
    Tensor(Output),
}

impl From<f64> for Hyper {
    fn from(v: f64) -> Hyper {
        Hyper::Value(v)
    }
}

impl From<f32> for Hyper {
    fn from(v: f32) -> Hyper {
        Hyper::Value(v as f64)
    }
}

impl From<Output> for Hyper {
    fn from(o: Output) -> Hyper {
        Hyper::Tensor(o)
    }
}

impl From<&Output> for Hyper {
    fn from(o: &Output) -> Hyper {
        Hyper::Tensor(o.clone())
    }
}

impl Hyper {
    /// The hyper-parameter as a scalar of `dtype` in `s` (a `Const` named `name`,
    /// or the tensor, cast when its dtype differs).
    pub fn to_output(&self, s: &Scope, dtype: DType, name: &str) -> Result<Output> {
        match self {
            Hyper::Value(v) => s
                .op("Const")
                .name(name)
                .attr("dtype", dtype)
                .attr("value", float_scalar(dtype, *v)?)
                .build1(),
            Hyper::Tensor(t) if t.dtype() == dtype => Ok(t.clone()),
            Hyper::Tensor(t) => ops::cast(s, t, dtype),
        }
    }
}

/// A scalar of `dtype` holding `v`, named `name`, in `s`.
pub(crate) fn constant_of(s: &Scope, dtype: DType, v: f64, name: &str) -> Result<Output> {
    Hyper::Value(v).to_output(s, dtype, name)
}

/// `v` read as a value of `dtype` ([`VarRef::read`], colocated with `v`), cast
/// when the dtypes differ. Consumers take this read, never the reference itself:
/// a reference edge would colocate every consumer with `v` (and so every
/// variable an Adam updates with its `beta1_power`).
pub(crate) fn read_as(s: &Scope, v: &VarRef, dtype: DType) -> Result<Output> {
    let value = v.read(s)?;
    if v.dtype() == dtype {
        Ok(value)
    } else {
        ops::cast(s, &value, dtype)
    }
}

/// `grad` with the rows of each index summed into one (TensorFlow's
/// `_deduplicate_indexed_slices`: `Unique`, then `UnsortedSegmentSum`).
pub fn deduplicate_indexed_slices(s: &Scope, grad: &IndexedSlices) -> Result<IndexedSlices> {
    let u = ops::unique(s, &grad.indices, DType::I32, false)?;
    let (unique, positions) = match u.as_slice() {
        [unique, positions, ..] => (unique.clone(), positions.clone()),
        _ => return Err(Status::internal("Unique has two outputs")),
    };
    let n = ops::size(s, &unique)?;
    Ok(IndexedSlices {
        values: ops::unsorted_segment_sum(s, &grad.values, &positions, &n)?,
        indices: unique,
        dense_shape: grad.dense_shape.clone(),
    })
}

/// A `NoOp` named `name` in `s` running after `deps`.
pub(crate) fn group_named(s: &Scope, deps: &[Operation], name: &str) -> Result<Operation> {
    let mut b = s.op("NoOp").name(name);
    for d in deps {
        b = b.control_input(d);
    }
    b.build()
}

/// A gradient-based optimizer; see the module docs. Implementors provide the
/// hooks; callers use [`compute_gradients`](Optimizer::compute_gradients),
/// [`apply_gradients`](Optimizer::apply_gradients) and
/// [`minimize`](Optimizer::minimize).
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::ops::{self, Variable};
/// use actorflow_graph::train::{self, GradientDescentOptimizer, Optimizer, VarRef};
/// use actorflow_graph::Tensor;
/// let s = Scope::new();
/// let w = Variable::new(&s, "w", &ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap(), true).unwrap();
/// let step = train::get_or_create_global_step(&s).unwrap();
/// let opt = GradientDescentOptimizer::new(0.1);
/// // gradients of a hand-computed loss gradient, applied with the global step
/// let g = ops::constant(&s, Tensor::vector(&[0.5f32, -0.5])).unwrap();
/// let train_op = opt
///     .apply_gradients(&s, &[train::GradAndVar { grad: Some(g.into()), var: VarRef::from(&w) }], Some(&step))
///     .unwrap();
/// assert_eq!(train_op.name(), "GradientDescent/increment_global_step");
/// ```
pub trait Optimizer {
    /// The name: the name scope of the update ops and the slots' suffix.
    fn name(&self) -> &str;

    /// The slot and non-slot variables this optimizer created.
    fn slots(&self) -> &SlotStore;

    /// Creates the slots `vars` need (called by `apply_gradients`, before any
    /// update is built; slots already made are reused).
    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()>;

    /// Builds the update of `var` from `grad`, in `s` (the variable's update
    /// name scope, colocated with it).
    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation>;

    /// Builds the update of `var` from rows of its gradient whose indices are
    /// unique; by default the rows made dense and [`apply_dense`](Optimizer::apply_dense).
    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        self.apply_dense(s, &grad.to_dense(s)?, var)
    }

    /// Builds the update of `var` from rows of its gradient, indices possibly
    /// repeated; by default their rows summed
    /// ([`deduplicate_indexed_slices`]) and [`apply_sparse`](Optimizer::apply_sparse).
    fn apply_sparse_duplicate_indices(
        &self,
        s: &Scope,
        grad: &IndexedSlices,
        var: &VarRef,
    ) -> Result<Operation> {
        self.apply_sparse(s, &deduplicate_indexed_slices(s, grad)?, var)
    }

    /// Builds what runs after every update (in the optimizer's name scope): by
    /// default a `NoOp` named `name` after `updates`.
    fn finish(&self, s: &Scope, updates: &[Operation], name: &str) -> Result<Operation> {
        group_named(s, updates, name)
    }

    /// The slot `slot` of `var` (`"momentum"`, `"m"`, `"v"`, `"rms"`), if made.
    fn get_slot(&self, var: &VarRef, slot: &str) -> Option<VarRef> {
        self.slots().get(var, slot)
    }

    /// The slot names this optimizer has made, sorted.
    fn get_slot_names(&self) -> Vec<String> {
        self.slots().names()
    }

    /// Adds the gradients of `loss` (a float scalar or tensor, summed) with
    /// respect to `var_list` (default: the trainable variables) and returns them
    /// paired with their variables, `None` where the loss does not depend on a
    /// variable; a variable read only through gathers gets rows
    /// ([`Gradient::Sparse`]). An op on the path without a gradient is
    /// `Unimplemented`.
    fn compute_gradients(
        &self,
        s: &Scope,
        loss: &Output,
        var_list: Option<&[VarRef]>,
    ) -> Result<Vec<GradAndVar>> {
        let vars = match var_list {
            Some(v) => v.to_vec(),
            None => trainable_variables(s)?,
        };
        if vars.is_empty() {
            return Err(Status::invalid_argument("No variables to optimize."));
        }
        if !loss.dtype().is_float() {
            return Err(Status::invalid_argument(format!(
                "the loss {} must be a float tensor, is {}",
                loss.name(),
                loss.dtype()
            )));
        }
        let xs: Vec<Output> = vars.iter().map(VarRef::handle).collect();
        let grads = gated_sparse_gradients(s, std::slice::from_ref(loss), &xs, None)?;
        Ok(grads
            .into_iter()
            .zip(vars)
            .map(|(grad, var)| GradAndVar { grad, var })
            .collect())
    }

    /// Adds one update per variable with a gradient, then (with `global_step`)
    /// the step's increment, and returns the op to run per training step (see
    /// the module docs). Pairs without a gradient are skipped; none at all is
    /// `InvalidArgument`, as is a gradient whose dtype is not its variable's.
    fn apply_gradients(
        &self,
        s: &Scope,
        grads_and_vars: &[GradAndVar],
        global_step: Option<&VarRef>,
    ) -> Result<Operation> {
        let with_grads: Vec<(&Gradient, &VarRef)> = grads_and_vars
            .iter()
            .filter_map(|gv| gv.grad.as_ref().map(|g| (g, &gv.var)))
            .collect();
        if with_grads.is_empty() {
            let names: Vec<&str> = grads_and_vars.iter().map(|gv| gv.var.name()).collect();
            return Err(Status::invalid_argument(format!(
                "No gradients provided for any variable: {names:?}"
            )));
        }
        for (g, v) in &with_grads {
            if g.dtype() != v.dtype() {
                return Err(Status::invalid_argument(format!(
                    "gradient {} is {} but variable '{}' is {}",
                    g.name(),
                    g.dtype(),
                    v.name(),
                    v.dtype()
                )));
            }
            if !v.dtype().is_float() {
                return Err(Status::invalid_argument(format!(
                    "variable '{}' is {}; optimizers update float variables",
                    v.name(),
                    v.dtype()
                )));
            }
        }
        let vars: Vec<VarRef> = with_grads.iter().map(|(_, v)| (*v).clone()).collect();
        self.create_slots(s, &vars)?;
        let ns = s.with_name_scope(self.name());
        let mut updates = Vec::with_capacity(with_grads.len());
        for (g, v) in &with_grads {
            let us = ns
                .with_name_scope(&format!("update_{}", v.name()))
                .colocate_with(v.op());
            let update = match g {
                Gradient::Dense(g) => self.apply_dense(&us, g, v),
                Gradient::Sparse(g) => self.apply_sparse_duplicate_indices(&us, g, v),
            };
            updates.push(update.map_err(|e| e.context(format!("updating '{}'", v.name())))?);
        }
        let update = self.finish(&ns, &updates, "update")?;
        let Some(step) = global_step else {
            return Ok(update);
        };
        if !step.dtype().is_integer() {
            return Err(Status::invalid_argument(format!(
                "global step '{}' must be an integer variable",
                step.name()
            )));
        }
        let after = ns
            .with_control_dependencies(&[&update])
            .colocate_with(step.op());
        let one = after.op("Const").name("increment_global_step/one");
        let one = one
            .attr("dtype", step.dtype())
            .attr("value", integer_one(step.dtype())?)
            .build1()?;
        match step.kind() {
            VarKind::Ref => after
                .op("AssignAdd")
                .name("increment_global_step")
                .input(step.handle())
                .input(&one)
                .build(),
            VarKind::Resource => after
                .op("AssignAddVariableOp")
                .name("increment_global_step")
                .input(step.handle())
                .input(&one)
                .attr("dtype", step.dtype())
                .build(),
        }
    }

    /// `compute_gradients` then `apply_gradients`: the training op.
    fn minimize(
        &self,
        s: &Scope,
        loss: &Output,
        global_step: Option<&VarRef>,
        var_list: Option<&[VarRef]>,
    ) -> Result<Operation> {
        let gv = self.compute_gradients(s, loss, var_list)?;
        if gv.iter().all(|g| g.grad.is_none()) {
            let names: Vec<&str> = gv.iter().map(|g| g.var.name()).collect();
            return Err(Status::invalid_argument(format!(
                "No gradients provided for any variable, check your graph for ops that do not support gradients, between variables {names:?} and loss {}",
                loss.name()
            )));
        }
        self.apply_gradients(s, &gv, global_step)
    }
}

fn integer_one(dtype: DType) -> Result<crate::Tensor> {
    use crate::Tensor;
    Ok(match dtype {
        DType::I64 => Tensor::scalar(1i64),
        DType::I32 => Tensor::scalar(1i32),
        DType::I16 => Tensor::scalar(1i16),
        DType::I8 => Tensor::scalar(1i8),
        DType::U64 => Tensor::scalar(1u64),
        DType::U32 => Tensor::scalar(1u32),
        DType::U16 => Tensor::scalar(1u16),
        DType::U8 => Tensor::scalar(1u8),
        other => {
            return Err(Status::invalid_argument(format!(
                "a global step of dtype {other} cannot be incremented"
            )))
        }
    })
}
