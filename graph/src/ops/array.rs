//! Array ops: constants, placeholders, identity and friends, shapes, reshaping,
//! slicing, concatenation, gathering, padding, tiling (TensorFlow's `array_ops.cc`).
//!
//! This file holds the constants, placeholders and identity ops and the helpers the
//! families share; the other ops live in submodules, one per concept, whose builder
//! functions are re-exported here:
//!
//! - [`shape_ops`]: Shape, ShapeN, Size, Rank, Reshape, ExpandDims, Squeeze, Fill,
//!   ZerosLike, OnesLike, BroadcastTo, BroadcastArgs, BroadcastGradientArgs,
//!   InvertPermutation, ConcatOffset.
//! - [`layout_ops`]: Transpose, ConcatV2, Concat, Split, SplitV, Pack, Unpack.
//! - [`pad_ops`]: Tile, Pad, PadV2, MirrorPad, ReverseV2, ReverseSequence.
//! - [`index_ops`]: Slice, StridedSlice, StridedSliceGrad, Gather, GatherV2,
//!   OneHot, Where.
//! - [`diag_ops`]: MatrixDiag, MatrixDiagV2, MatrixDiagV3, MatrixBandPart.
//! - [`set_ops`] — ListDiff, Unique, UniqueWithCounts.
//! - [`scatter_nd_ops`]: GatherNd, ScatterNd, TensorScatterUpdate/Add/Sub.
//! - [`space_ops`]: SpaceToBatchND, BatchToSpaceND, SpaceToBatch, BatchToSpace,
//!   SpaceToDepth, DepthToSpace.
//! - [`strided_slice_spec`]: TensorFlow's `ValidateStridedSliceOp`, shared by the
//!   StridedSlice shape function and the CPU kernels.

pub mod diag_ops;
pub mod index_ops;
pub mod layout_ops;
pub mod pad_ops;
pub mod scatter_nd_ops;
pub mod set_ops;
pub mod shape_ops;
pub mod space_ops;
pub mod strided_slice_spec;

pub use diag_ops::matrix_band_part;
pub use index_ops::*;
pub use layout_ops::*;
pub use pad_ops::*;
pub use scatter_nd_ops::*;
pub use set_ops::unique;
pub use shape_ops::*;
pub use space_ops::*;
pub use strided_slice_spec::StridedSliceMasks;

use crate::builder::{Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape, Status, Tensor, TensorType};

/// Registers the array ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("Const")
            .output("output: dtype")
            .attr("value: tensor")
            .attr("dtype: type")
            .shape_fn(shape_fn::from_value_attr),
    );
    r.register(
        OpDef::build("Placeholder")
            .output("output: dtype")
            .attr("dtype: type")
            .attr("shape: shape = { unknown_rank: true }")
            .shape_fn(shape_fn::from_shape_attr),
    );
    r.register(
        OpDef::build("PlaceholderWithDefault")
            .input("input: dtype")
            .output("output: dtype")
            .attr("dtype: type")
            .attr("shape: shape")
            .shape_fn(placeholder_with_default_shape),
    );
    for name in ["Identity", "StopGradient", "PreventGradient", "Snapshot"] {
        let mut b = OpDef::build(name)
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .shape_fn(shape_fn::unchanged);
        if name == "PreventGradient" {
            b = b.attr("message: string = ''");
        }
        r.register(b);
    }
    r.register(
        OpDef::build("IdentityN")
            .input("input: T")
            .output("output: T")
            .attr("T: list(type) >= 1")
            .shape_fn(identity_n_shape),
    );
    shape_ops::register_ops(r);
    layout_ops::register_ops(r);
    pad_ops::register_ops(r);
    index_ops::register_ops(r);
    diag_ops::register_ops(r);
    set_ops::register_ops(r);
    space_ops::register_ops(r);
    scatter_nd_ops::register_ops(r);
}

fn placeholder_with_default_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let declared: Shape = c.attr("shape")?;
    let input = c.input(0);
    input
        .merge(&declared)
        .map_err(|e| e.context("PlaceholderWithDefault input does not match its shape"))?;
    c.set_output(0, declared)
}

fn identity_n_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    for i in 0..c.num_outputs() {
        let s = c.input(i);
        c.set_output(i, s)?;
    }
    Ok(())
}

/// The values of a constant integer tensor (any integer dtype) as `i64`, or `None`
/// when the tensor is unknown or not of an integer dtype.
pub(crate) fn const_ints(t: Option<&Tensor>) -> Option<Vec<i64>> {
    fn conv<T: TensorType>(t: &Tensor) -> Option<Vec<i64>> {
        let s = t.as_slice::<T>().ok()?;
        Some(s.iter().map(|v| v.to_f64() as i64).collect())
    }
    let t = t?;
    match t.dtype() {
        DType::I32 => t
            .as_slice::<i32>()
            .ok()
            .map(|s| s.iter().map(|&v| i64::from(v)).collect()),
        DType::I64 => t.as_slice::<i64>().ok().map(<[i64]>::to_vec),
        DType::I16 => conv::<i16>(t),
        DType::I8 => conv::<i8>(t),
        DType::U8 => conv::<u8>(t),
        _ => None,
    }
}

/// `InvalidArgument` unless the partial shape `s` has rank `rank` (or an unknown
/// rank), as TensorFlow's `WithRank`.
pub(crate) fn with_rank(s: &Shape, rank: usize, what: &str) -> Result<Shape> {
    match s.rank() {
        Some(r) if r != rank => Err(Status::invalid_argument(format!(
            "Shape must be rank {rank} but is rank {r} for {what}"
        ))),
        Some(_) => Ok(s.clone()),
        None => Ok(Shape::unknown_with_rank(rank)),
    }
}

/// A partial shape from TensorFlow dimensions (`-1` unknown).
pub(crate) fn shape_of(dims: &[Option<usize>]) -> Shape {
    Shape::from_dims(dims)
}

/// A `Const` int32 vector holding `values` (int64 when one does not fit int32, as
/// TensorFlow's Python converts lists).
pub fn index_vector(s: &Scope, values: &[i64]) -> Result<Output> {
    if values.iter().all(|&v| i32::try_from(v).is_ok()) {
        let v: Vec<i32> = values.iter().map(|&v| v as i32).collect();
        constant(s, Tensor::vector(&v))
    } else {
        constant(s, Tensor::vector(values))
    }
}

/// A `Const` int32 scalar (int64 when it does not fit int32).
pub fn index_scalar(s: &Scope, value: i64) -> Result<Output> {
    match i32::try_from(value) {
        Ok(v) => scalar(s, v),
        Err(_) => scalar(s, value),
    }
}

/// A `Const` node holding `value`.
pub fn constant(s: &Scope, value: Tensor) -> Result<Output> {
    s.op("Const")
        .attr("dtype", value.dtype())
        .attr("value", value)
        .build1()
}

/// A scalar `Const`.
pub fn scalar<T: TensorType>(s: &Scope, v: T) -> Result<Output> {
    constant(s, Tensor::scalar(v))
}

/// A `Placeholder` of this dtype and (partial) shape.
pub fn placeholder(s: &Scope, dtype: DType, shape: Shape) -> Result<Output> {
    s.op("Placeholder")
        .attr("dtype", dtype)
        .attr("shape", shape)
        .build1()
}

/// A `PlaceholderWithDefault`: `input` unless fed.
pub fn placeholder_with_default(s: &Scope, input: &Output, shape: Shape) -> Result<Output> {
    s.op("PlaceholderWithDefault")
        .input(input)
        .attr("dtype", input.dtype())
        .attr("shape", shape)
        .build1()
}

/// `Identity`.
pub fn identity(s: &Scope, x: &Output) -> Result<Output> {
    s.op("Identity").input(x).build1()
}

/// `IdentityN`.
pub fn identity_n(s: &Scope, xs: &[Output]) -> Result<Vec<Output>> {
    Ok(s.op("IdentityN").input_list(xs).build()?.outputs())
}

/// `StopGradient`.
pub fn stop_gradient(s: &Scope, x: &Output) -> Result<Output> {
    s.op("StopGradient").input(x).build1()
}
