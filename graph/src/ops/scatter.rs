//! Sparse reads and updates of variables, as TensorFlow has them
//! (`state_ops.cc`, `resource_variable_ops.cc`): `ResourceGather` and
//! `VariableShape` read a resource variable; the `Scatter*` ops update rows of a
//! reference variable in place and output its reference; the
//! `ResourceScatter*` ops do the same through a resource handle and output
//! nothing. `*ScatterNd*` forms address slices by index tuples instead of rows.
//!
//! | op | update of each addressed slice |
//! |---|---|
//! | `Scatter{Update,Add,Sub,Mul,Div,Min,Max}` | `=`, `+=`, `-=`, `*=`, `/=`, `min=`, `max=` |
//! | `ScatterNd{Update,Add,Sub}` | `=`, `+=`, `-=` |
//!
//! `updates` has shape `indices.shape + var.shape[1:]` (Nd:
//! `indices.shape[:-1] + var.shape[indices.shape[-1]:]`), or is a scalar
//! applied to every addressed element. Duplicate indices accumulate (`Update`
//! leaves their order undefined, as TensorFlow does).

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape, Status};

/// The dtypes of `ScatterMin`/`ScatterMax` (TensorFlow's `realnumbertypes`
/// that have an order).
const ORDERED_TYPES: &str = "{half, bfloat16, float, double, int32, int64}";

/// How a scatter op combines an update with the value it addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterOp {
    /// Replaces the value.
    Update,
    /// Adds to it.
    Add,
    /// Subtracts from it.
    Sub,
    /// Multiplies it.
    Mul,
    /// Divides it.
    Div,
    /// Keeps the smaller.
    Min,
    /// Keeps the larger.
    Max,
}

impl ScatterOp {
    /// Every kind, in TensorFlow's listing order.
    pub const ALL: [ScatterOp; 7] = [
        ScatterOp::Update,
        ScatterOp::Add,
        ScatterOp::Sub,
        ScatterOp::Mul,
        ScatterOp::Div,
        ScatterOp::Min,
        ScatterOp::Max,
    ];

    /// The suffix of the op names (`Scatter<suffix>`, `ResourceScatter<suffix>`).
    pub fn suffix(self) -> &'static str {
        match self {
            ScatterOp::Update => "Update",
            ScatterOp::Add => "Add",
            ScatterOp::Sub => "Sub",
            ScatterOp::Mul => "Mul",
            ScatterOp::Div => "Div",
            ScatterOp::Min => "Min",
            ScatterOp::Max => "Max",
        }
    }

    /// The kind named by an op (`ScatterAdd`, `ResourceScatterNdSub`, …).
    pub fn of_op(op: &str) -> Option<ScatterOp> {
        let base = op.strip_prefix("Resource").unwrap_or(op);
        let base = base.strip_prefix("Scatter")?;
        let base = base.strip_prefix("Nd").unwrap_or(base);
        ScatterOp::ALL.into_iter().find(|k| k.suffix() == base)
    }

    /// Whether the `Nd` forms exist (`Update`, `Add`, `Sub`).
    pub fn has_nd(self) -> bool {
        matches!(self, ScatterOp::Update | ScatterOp::Add | ScatterOp::Sub)
    }

    /// The dtype constraint of `T`/`dtype`.
    fn types(self) -> &'static str {
        match self {
            ScatterOp::Update => "type",
            ScatterOp::Min | ScatterOp::Max => ORDERED_TYPES,
            _ => crate::ops::NUMERIC_TYPES,
        }
    }
}

/// Registers `ResourceGather`, `VariableShape` and the scatter ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("ResourceGather")
            .input("resource: resource")
            .input("indices: Tindices")
            .output("output: dtype")
            .attr("batch_dims: int = 0")
            .attr("validate_indices: bool = true")
            .attr("dtype: type")
            .attr("Tindices: {int32, int64}")
            .stateful(),
    );
    r.register(
        OpDef::build("VariableShape")
            .input("input: resource")
            .output("output: out_type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .stateful()
            .shape_fn(|c| c.set_output(0, Shape::unknown_with_rank(1))),
    );
    for k in ScatterOp::ALL {
        let locking = if k == ScatterOp::Update {
            "use_locking: bool = true"
        } else {
            "use_locking: bool = false"
        };
        r.register(
            OpDef::build(&format!("Scatter{}", k.suffix()))
                .input("ref: Ref(T)")
                .input("indices: Tindices")
                .input("updates: T")
                .output("output_ref: Ref(T)")
                .attr(&format!("T: {}", k.types()))
                .attr("Tindices: {int32, int64}")
                .attr(locking)
                .shape_fn(scatter_shape),
        );
        r.register(
            OpDef::build(&format!("ResourceScatter{}", k.suffix()))
                .input("resource: resource")
                .input("indices: Tindices")
                .input("updates: dtype")
                .attr(&format!("dtype: {}", k.types()))
                .attr("Tindices: {int32, int64}")
                .stateful()
                .shape_fn(shape_fn::no_outputs),
        );
        if !k.has_nd() {
            continue;
        }
        r.register(
            OpDef::build(&format!("ScatterNd{}", k.suffix()))
                .input("ref: Ref(T)")
                .input("indices: Tindices")
                .input("updates: T")
                .output("output_ref: Ref(T)")
                .attr(&format!("T: {}", k.types()))
                .attr("Tindices: {int32, int64}")
                .attr(locking)
                .attr("bad_indices_policy: string = ''")
                .shape_fn(scatter_nd_shape),
        );
        r.register(
            OpDef::build(&format!("ResourceScatterNd{}", k.suffix()))
                .input("ref: resource")
                .input("indices: Tindices")
                .input("updates: T")
                .attr(&format!("T: {}", k.types()))
                .attr("Tindices: {int32, int64}")
                .attr("use_locking: bool = true")
                .attr("bad_indices_policy: string = ''")
                .stateful()
                .shape_fn(shape_fn::no_outputs),
        );
    }
}

/// TensorFlow's `ScatterUpdateShape`: `updates` is a scalar or
/// `indices.shape + ref.shape[1:]`; the output is the reference's shape.
fn scatter_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let (var, indices, updates) = (c.input(0), c.input(1), c.input(2));
    if let (Some(v), Some(i), Some(u)) = (var.dims(), indices.dims(), updates.dims()) {
        if !u.is_empty() && !v.is_empty() {
            let want: Vec<Option<usize>> = i.iter().chain(&v[1..]).copied().collect();
            Shape::from_dims(&want)
                .merge(&updates)
                .map_err(|_| shape_error(c, &var, &indices, &updates))?;
        }
    }
    c.set_output(0, var)
}

/// `ScatterNd*` on a reference: `indices.shape[-1]` is at most the rank of the
/// reference; the output is the reference's shape.
fn scatter_nd_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let (var, indices) = (c.input(0), c.input(1));
    if let (Some(v), Some(i)) = (var.dims(), indices.dims()) {
        if let Some(Some(depth)) = i.last() {
            if *depth > v.len() {
                return Err(Status::invalid_argument(format!(
                    "The last dimension of indices of '{}' ({depth}) must be at most the rank of ref ({})",
                    c.node().name,
                    v.len()
                )));
            }
        }
    }
    c.set_output(0, var)
}

fn shape_error(c: &InferenceContext<'_>, var: &Shape, indices: &Shape, updates: &Shape) -> Status {
    Status::invalid_argument(format!(
        "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], got \
         updates.shape {updates}, indices.shape {indices}, params.shape {var} (node '{}')",
        c.node().name
    ))
}

/// `ResourceGather`: rows `indices` of the resource variable `handle` of `dtype`.
pub fn resource_gather(
    s: &Scope,
    handle: &Output,
    indices: &Output,
    dtype: DType,
) -> Result<Output> {
    s.op("ResourceGather")
        .input(handle)
        .input(indices)
        .attr("dtype", dtype)
        .build1()
}

/// `VariableShape`: the shape of the resource variable `handle` as an int32
/// vector.
pub fn variable_shape(s: &Scope, handle: &Output) -> Result<Output> {
    s.op("VariableShape").input(handle).build1()
}

/// `Scatter<op>` on the reference variable `var`; returns the updated reference.
pub fn scatter(
    s: &Scope,
    op: ScatterOp,
    var: &Output,
    indices: &Output,
    updates: &Output,
) -> Result<Output> {
    s.op(&format!("Scatter{}", op.suffix()))
        .input(var)
        .input(indices)
        .input(updates)
        .build1()
}

/// `ResourceScatter<op>` on the resource variable `handle`.
pub fn resource_scatter(
    s: &Scope,
    op: ScatterOp,
    handle: &Output,
    indices: &Output,
    updates: &Output,
) -> Result<Operation> {
    s.op(&format!("ResourceScatter{}", op.suffix()))
        .input(handle)
        .input(indices)
        .input(updates)
        .attr("dtype", updates.dtype())
        .build()
}

fn nd_name(op: ScatterOp, resource: bool) -> Result<String> {
    if !op.has_nd() {
        return Err(Status::invalid_argument(format!(
            "there is no ScatterNd{} op",
            op.suffix()
        )));
    }
    let prefix = if resource { "Resource" } else { "" };
    Ok(format!("{prefix}ScatterNd{}", op.suffix()))
}

/// `ScatterNd<op>` (`Update`, `Add`, `Sub`) on the reference variable `var`.
pub fn scatter_nd_ref(
    s: &Scope,
    op: ScatterOp,
    var: &Output,
    indices: &Output,
    updates: &Output,
) -> Result<Output> {
    s.op(&nd_name(op, false)?)
        .input(var)
        .input(indices)
        .input(updates)
        .build1()
}

/// `ResourceScatterNd<op>` (`Update`, `Add`, `Sub`) on the resource variable
/// `handle`.
pub fn resource_scatter_nd(
    s: &Scope,
    op: ScatterOp,
    handle: &Output,
    indices: &Output,
    updates: &Output,
) -> Result<Operation> {
    s.op(&nd_name(op, true)?)
        .input(handle)
        .input(indices)
        .input(updates)
        .attr("T", updates.dtype())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{self, placeholder};
    use crate::Tensor;

    #[test]
    fn names_round_trip() {
        for k in ScatterOp::ALL {
            assert_eq!(ScatterOp::of_op(&format!("Scatter{}", k.suffix())), Some(k));
            assert_eq!(
                ScatterOp::of_op(&format!("ResourceScatter{}", k.suffix())),
                Some(k)
            );
        }
        assert_eq!(
            ScatterOp::of_op("ResourceScatterNdSub"),
            Some(ScatterOp::Sub)
        );
        assert!(OpRegistry::global().lookup("ScatterNdMul").is_err());
        assert!(OpRegistry::global()
            .lookup("ResourceScatterNdUpdate")
            .is_ok());
    }

    #[test]
    fn ref_scatter_checks_update_shapes() {
        let s = Scope::new();
        let v = ops::variable(&s, Shape::known(&[4, 3]), DType::F32).unwrap();
        let idx = ops::constant(&s, Tensor::vector(&[0i32, 2])).unwrap();
        let good = placeholder(&s, DType::F32, Shape::known(&[2, 3])).unwrap();
        let out = scatter(&s, ScatterOp::Add, &v, &idx, &good).unwrap();
        assert_eq!(out.shape(), Shape::known(&[4, 3]));
        let scalar = ops::scalar(&s, 1.0f32).unwrap();
        scatter(&s, ScatterOp::Max, &v, &idx, &scalar).unwrap();
        let bad = placeholder(&s, DType::F32, Shape::known(&[2, 4])).unwrap();
        let e = scatter(&s, ScatterOp::Sub, &v, &idx, &bad).unwrap_err();
        assert!(
            e.message().contains("indices.shape + params.shape[1:]"),
            "{e}"
        );
        let nd_idx = placeholder(&s, DType::I32, Shape::known(&[2, 3])).unwrap();
        let e = scatter_nd_ref(&s, ScatterOp::Update, &v, &nd_idx, &good).unwrap_err();
        assert!(e.message().contains("at most the rank"), "{e}");
        assert!(scatter_nd_ref(&s, ScatterOp::Min, &v, &idx, &good).is_err());
    }
}
