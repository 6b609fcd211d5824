//! Ops that move blocks of space into the batch or the depth and back:
//! SpaceToBatchND, BatchToSpaceND, their 4-D forms SpaceToBatch and BatchToSpace,
//! SpaceToDepth and DepthToSpace — signatures, shape functions (TensorFlow's
//! `SpaceToBatchShapeHelper`, `BatchToSpaceShapeHelper` and the depth ops' shape
//! functions) and builder functions.
//!
//! # Examples
//! ```
//! use actorflow_graph::builder::Scope;
//! use actorflow_graph::{ops, DType, Shape};
//!
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::F32, Shape::known(&[2, 5, 6, 3])).unwrap();
//! let b = ops::space_to_batch_nd_by(&s, &x, &[2, 3], &[[1, 0], [0, 0]]).unwrap();
//! assert_eq!(b.shape(), Shape::known(&[12, 3, 2, 3]));
//! let d = ops::space_to_depth(&s, &x, 2, "NHWC");
//! assert!(d.is_err(), "5 rows do not divide into blocks of 2");
//! ```

use super::pad_ops::paddings_const;
use super::{const_ints, index_vector};
use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{divide_dim, multiply_dim, with_rank, with_rank_at_least};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// Registers the space/batch/depth ops.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("SpaceToBatchND")
            .input("input: T")
            .input("block_shape: Tblock_shape")
            .input("paddings: Tpaddings")
            .output("output: T")
            .attr("T: type")
            .attr("Tblock_shape: {int32, int64} = DT_INT32")
            .attr("Tpaddings: {int32, int64} = DT_INT32")
            .shape_fn(space_to_batch_nd_shape),
    );
    r.register(
        OpDef::build("SpaceToBatch")
            .input("input: T")
            .input("paddings: Tpaddings")
            .output("output: T")
            .attr("T: type")
            .attr("Tpaddings: {int32, int64} = DT_INT32")
            .attr("block_size: int >= 2")
            .shape_fn(space_to_batch_shape),
    );
    r.register(
        OpDef::build("BatchToSpaceND")
            .input("input: T")
            .input("block_shape: Tblock_shape")
            .input("crops: Tcrops")
            .output("output: T")
            .attr("T: type")
            .attr("Tblock_shape: {int32, int64} = DT_INT32")
            .attr("Tcrops: {int32, int64} = DT_INT32")
            .shape_fn(batch_to_space_nd_shape),
    );
    r.register(
        OpDef::build("BatchToSpace")
            .input("input: T")
            .input("crops: Tidx")
            .output("output: T")
            .attr("T: type")
            .attr("block_size: int >= 2")
            .attr("Tidx: {int32, int64} = DT_INT32")
            .shape_fn(batch_to_space_shape),
    );
    for (name, f) in [
        (
            "SpaceToDepth",
            space_to_depth_shape as crate::op_def::ShapeFn,
        ),
        ("DepthToSpace", depth_to_space_shape),
    ] {
        r.register(
            OpDef::build(name)
                .input("input: T")
                .output("output: T")
                .attr("T: type")
                .attr("block_size: int >= 2")
                .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
                .shape_fn(f),
        );
    }
}

/// Which way a space/batch shape function maps the spatial dimensions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Pad, then divide by the block: the batch grows.
    SpaceToBatch,
    /// Multiply by the block, then crop: the batch shrinks.
    BatchToSpace,
}

/// TensorFlow's `SpaceToBatchShapeHelper`/`BatchToSpaceShapeHelper`: `input` of
/// rank at least `1 + M` for a block shape of `M` values (its shape
/// `block_shape_shape`, its values when constant) and `[M, 2]` paddings or crops.
fn space_batch_shape(
    dir: Direction,
    input: &Shape,
    block_shape_shape: &Shape,
    block: Option<Vec<i64>>,
    amounts_shape: &Shape,
    amounts: Option<Vec<i64>>,
) -> Result<Shape> {
    if block_shape_shape.rank() != Some(1) {
        return Err(Status::invalid_argument("block_shape must have rank 1."));
    }
    let m = block_shape_shape
        .dim(0)
        .ok_or_else(|| Status::invalid_argument("block_shape must have known size."))?;
    let input = with_rank_at_least(input, m + 1)?;
    amounts_shape.merge(&Shape::known(&[m, 2]))?;
    let block = block.filter(|b| b.len() == m);
    let amounts = amounts.filter(|a| a.len() == 2 * m);
    let mut batch = input.dim(0);
    match &block {
        Some(b) => {
            for &v in b {
                if v < 1 {
                    return Err(Status::invalid_argument("block_shape must be positive"));
                }
                batch = match dir {
                    Direction::SpaceToBatch => multiply_dim(batch, v)?,
                    Direction::BatchToSpace => divide_dim(batch, v, true)?,
                };
            }
        }
        None if m > 0 => batch = None,
        None => {}
    }
    let mut out = vec![batch];
    out.resize(m + 1, None);
    if let Some(a) = &amounts {
        for d in 0..m {
            let (start, end) = (a[2 * d], a[2 * d + 1]);
            if start < 0 || end < 0 {
                return Err(Status::invalid_argument(match dir {
                    Direction::SpaceToBatch => "paddings cannot be negative",
                    Direction::BatchToSpace => "crops cannot be negative",
                }));
            }
            let (Some(b), Some(n)) = (&block, input.dim(d + 1)) else {
                continue;
            };
            let n = n as i64;
            out[d + 1] = match dir {
                Direction::SpaceToBatch => {
                    divide_dim(Some((n + start + end) as usize), b[d], true)?
                }
                Direction::BatchToSpace => {
                    let size = n * b[d] - start - end;
                    if size < 0 {
                        return Err(Status::invalid_argument(format!(
                            "Negative dimension size caused by subtracting {} from {}",
                            start + end,
                            n * b[d]
                        )));
                    }
                    Some(size as usize)
                }
            };
        }
    }
    match input.dims() {
        Some(dims) => out.extend_from_slice(&dims[m + 1..]),
        None => return Ok(Shape::unknown()),
    }
    Ok(Shape::from_dims(&out))
}

/// The ND forms: block shape and paddings (or crops) from inputs 1 and 2.
fn nd_shape(c: &mut InferenceContext<'_>, dir: Direction) -> Result<()> {
    let (block, amounts) = (c.input_tensor(1), c.input_tensor(2));
    let s = space_batch_shape(
        dir,
        &c.input(0),
        &c.input(1),
        const_ints(block),
        &c.input(2),
        const_ints(amounts),
    )?;
    c.set_output(0, s)
}

fn space_to_batch_nd_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    nd_shape(c, Direction::SpaceToBatch)
}

fn batch_to_space_nd_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    nd_shape(c, Direction::BatchToSpace)
}

/// The 4-D forms: a rank-4 input and the block `[block_size, block_size]`.
fn four_d(c: &InferenceContext<'_>, dir: Direction) -> Result<Shape> {
    let input = with_rank(&c.input(0), 4)?;
    let b: i64 = c.attr("block_size")?;
    space_batch_shape(
        dir,
        &input,
        &Shape::known(&[2]),
        Some(vec![b, b]),
        &c.input(1),
        const_ints(c.input_tensor(1)),
    )
}

fn space_to_batch_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = four_d(c, Direction::SpaceToBatch)?;
    c.set_output(0, s)
}

fn batch_to_space_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = four_d(c, Direction::BatchToSpace)?;
    c.set_output(0, s)
}

/// The (N, H, W, C) indices of a depth op's `data_format` and its rank.
fn depth_layout(c: &InferenceContext<'_>) -> Result<([usize; 4], usize)> {
    let f: String = c.attr("data_format")?;
    Ok(match f.as_str() {
        "NHWC" => ([0, 1, 2, 3], 4),
        "NCHW" => ([0, 2, 3, 1], 4),
        _ => ([0, 2, 3, 1], 5),
    })
}

/// SpaceToDepth and DepthToSpace: height and width divided (or multiplied) by
/// `block_size`, the depth multiplied (or divided) by its square. (For
/// `NCHW_VECT_C` only the rank is checked; no CPU kernel takes it.)
fn depth_shape(c: &mut InferenceContext<'_>, to_depth: bool) -> Result<()> {
    let (idx, rank) = depth_layout(c)?;
    let input = with_rank(&c.input(0), rank)?;
    if rank == 5 {
        return c.set_output(0, Shape::unknown_with_rank(5));
    }
    let b: i64 = c.attr("block_size")?;
    let [n, h, w, d] = idx.map(|i| input.dim(i));
    let (h, w, d) = if to_depth {
        (
            divide_dim(h, b, true)?,
            divide_dim(w, b, true)?,
            multiply_dim(d, b * b)?,
        )
    } else {
        (
            multiply_dim(h, b)?,
            multiply_dim(w, b)?,
            divide_dim(d, b * b, true)?,
        )
    };
    let mut out = [None; 4];
    for (i, v) in idx.into_iter().zip([n, h, w, d]) {
        out[i] = v;
    }
    c.set_output(0, Shape::from_dims(&out))
}

fn space_to_depth_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    depth_shape(c, true)
}

fn depth_to_space_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    depth_shape(c, false)
}

/// An `ND` op of `input`, a block shape and `[M, 2]` paddings or crops.
fn nd(
    s: &Scope,
    op: &str,
    input: &Output,
    block_shape: &Output,
    amounts: &Output,
) -> Result<Output> {
    s.op(op)
        .input(input)
        .input(block_shape)
        .input(amounts)
        .build1()
}

/// An `ND` op by a constant block shape and paddings or crops.
fn nd_by(
    s: &Scope,
    op: &str,
    input: &Output,
    block_shape: &[i64],
    amounts: &[[i64; 2]],
) -> Result<Output> {
    let b = index_vector(s, block_shape)?;
    let a = paddings_const(s, amounts)?;
    nd(s, op, input, &b, &a)
}

/// `SpaceToBatchND`: the `M` spatial dimensions after the batch of `x`, padded by
/// the `[M, 2]` `pads`, cut into blocks of `block` whose positions move into the
/// batch (block offset major: batch `offset * batch + b`).
pub fn space_to_batch_nd(s: &Scope, x: &Output, block: &Output, pads: &Output) -> Result<Output> {
    nd(s, "SpaceToBatchND", x, block, pads)
}

/// [`space_to_batch_nd`] by the constant block shape `b` and paddings `p`.
pub fn space_to_batch_nd_by(s: &Scope, x: &Output, b: &[i64], p: &[[i64; 2]]) -> Result<Output> {
    nd_by(s, "SpaceToBatchND", x, b, p)
}

/// `BatchToSpaceND`: the inverse of [`space_to_batch_nd`], cropping the `[M, 2]`
/// `crops` off the reassembled spatial dimensions.
pub fn batch_to_space_nd(s: &Scope, x: &Output, block: &Output, crops: &Output) -> Result<Output> {
    nd(s, "BatchToSpaceND", x, block, crops)
}

/// [`batch_to_space_nd`] by the constant block shape `b` and crops `c`.
pub fn batch_to_space_nd_by(s: &Scope, x: &Output, b: &[i64], c: &[[i64; 2]]) -> Result<Output> {
    nd_by(s, "BatchToSpaceND", x, b, c)
}

/// A 4-D op of `x` and `[2, 2]` paddings or crops by square blocks of `b`.
fn four_d_op(s: &Scope, op: &str, x: &Output, amounts: &Output, b: i64) -> Result<Output> {
    s.op(op)
        .input(x)
        .input(amounts)
        .attr("block_size", b)
        .build1()
}

/// `SpaceToBatch`: [`space_to_batch_nd`] of a 4-D `x` by square blocks of
/// `block_size` (at least 2) and `[2, 2]` paddings `pads`.
pub fn space_to_batch(s: &Scope, x: &Output, pads: &Output, block_size: i64) -> Result<Output> {
    four_d_op(s, "SpaceToBatch", x, pads, block_size)
}

/// `BatchToSpace`: [`batch_to_space_nd`] of a 4-D `x` by square blocks of
/// `block_size` and `[2, 2]` `crops`.
pub fn batch_to_space(s: &Scope, x: &Output, crops: &Output, block_size: i64) -> Result<Output> {
    four_d_op(s, "BatchToSpace", x, crops, block_size)
}

/// A depth op of `x` by blocks of `b` in `format`.
fn depth_op(s: &Scope, op: &str, x: &Output, b: i64, format: &str) -> Result<Output> {
    let op = s.op(op).input(x).attr("block_size", b);
    op.attr("data_format", format).build1()
}

/// `SpaceToDepth` (`tf.nn.space_to_depth`): each `block_size` × `block_size`
/// block of pixels becomes one pixel with `block_size²` times the depth (the
/// block's rows, then its columns, then the input depth), in data format
/// `format`. TensorFlow's CPU kernel takes `NHWC` only.
pub fn space_to_depth(s: &Scope, x: &Output, block_size: i64, format: &str) -> Result<Output> {
    depth_op(s, "SpaceToDepth", x, block_size, format)
}

/// `DepthToSpace` (`tf.nn.depth_to_space`): the inverse of [`space_to_depth`].
pub fn depth_to_space(s: &Scope, x: &Output, block_size: i64, format: &str) -> Result<Output> {
    depth_op(s, "DepthToSpace", x, block_size, format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ops, Code, DType, Tensor};

    fn ph(s: &Scope, dims: &[Option<usize>]) -> Output {
        ops::testing::placeholder_of(s, DType::F32, dims)
    }

    #[test]
    fn space_batch_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), Some(5), Some(6), Some(3)]);
        let y = space_to_batch_nd_by(&s, &x, &[2, 3], &[[1, 0], [0, 0]]).unwrap();
        assert_eq!(y.shape(), Shape::known(&[12, 3, 2, 3]));
        let z = batch_to_space_nd_by(&s, &y, &[2, 3], &[[1, 0], [0, 0]]).unwrap();
        assert_eq!(z.shape(), x.shape());
        // One block dimension: the rest are carried.
        let y = space_to_batch_nd_by(&s, &x, &[5], &[[0, 0]]).unwrap();
        assert_eq!(y.shape(), Shape::known(&[10, 1, 6, 3]));
        let u = ph(&s, &[None, Some(4), None, Some(3)]);
        let y = space_to_batch_nd_by(&s, &u, &[2, 2], &[[0, 0], [0, 0]]).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, Some(2), None, Some(3)]));
        let fed = ops::placeholder(&s, DType::I32, Shape::known(&[2])).unwrap();
        let pads = paddings_const(&s, &[[0, 0], [0, 0]]).unwrap();
        let y = space_to_batch_nd(&s, &x, &fed, &pads).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, None, None, Some(3)]));
        let y = space_to_batch(&s, &x, &paddings_const(&s, &[[1, 0], [0, 0]]).unwrap(), 2).unwrap();
        assert_eq!(y.shape(), Shape::known(&[8, 3, 3, 3]));
        let z = batch_to_space(&s, &y, &paddings_const(&s, &[[1, 0], [0, 0]]).unwrap(), 2).unwrap();
        assert_eq!(z.shape(), x.shape());
    }

    #[test]
    fn space_batch_errors() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), Some(5), Some(6), Some(3)]);
        let e = space_to_batch_nd_by(&s, &x, &[2, 2], &[[0, 0], [0, 0]]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message().contains("evenly divisible by 2 but is 5"),
            "{e}"
        );
        let e = space_to_batch_nd_by(&s, &x, &[0, 1], &[[0, 0], [0, 0]]).unwrap_err();
        assert_eq!(e.message(), "block_shape must be positive");
        let e = space_to_batch_nd_by(&s, &x, &[1, 1], &[[-1, 0], [0, 0]]).unwrap_err();
        assert_eq!(e.message(), "paddings cannot be negative");
        assert!(space_to_batch_nd_by(&s, &x, &[1, 1], &[[0, 0]]).is_err());
        assert!(space_to_batch_nd_by(&s, &x, &[1, 1, 1, 1], &[[0, 0]; 4]).is_err());
        let e = batch_to_space_nd_by(&s, &x, &[3, 1], &[[0, 0], [0, 0]]).unwrap_err();
        assert!(
            e.message().contains("evenly divisible by 3 but is 2"),
            "{e}"
        );
        let e = batch_to_space_nd_by(&s, &x, &[2, 1], &[[6, 5], [0, 0]]).unwrap_err();
        assert!(e.message().contains("Negative dimension"), "{e}");
        let m = ops::constant(&s, Tensor::new(&[1, 2], vec![2i32, 2]).unwrap()).unwrap();
        let pads = paddings_const(&s, &[[0, 0]]).unwrap();
        let e = space_to_batch_nd(&s, &x, &m, &pads).unwrap_err();
        assert_eq!(e.message(), "block_shape must have rank 1.");
        let x3 = ph(&s, &[Some(2), Some(4), Some(4)]);
        assert!(space_to_batch(&s, &x3, &paddings_const(&s, &[[0, 0]; 2]).unwrap(), 2).is_err());
        // block_size >= 2
        let e = space_to_batch(&s, &x, &paddings_const(&s, &[[0, 0]; 2]).unwrap(), 1).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn depth_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), Some(4), Some(6), Some(3)]);
        let y = space_to_depth(&s, &x, 2, "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::known(&[2, 2, 3, 12]));
        let z = depth_to_space(&s, &y, 2, "NHWC").unwrap();
        assert_eq!(z.shape(), x.shape());
        let y = space_to_depth(&s, &x, 2, "NCHW").unwrap_err();
        assert!(y.message().contains("divisible by 2 but is 3"), "{y}");
        let c = ph(&s, &[Some(2), Some(8), Some(4), Some(6)]);
        let y = depth_to_space(&s, &c, 2, "NCHW").unwrap();
        assert_eq!(y.shape(), Shape::known(&[2, 2, 8, 12]));
        assert!(
            depth_to_space(&s, &x, 2, "NHWC").is_err(),
            "3 channels, blocks of 4"
        );
        assert!(
            space_to_depth(&s, &x, 1, "NHWC").is_err(),
            "block_size >= 2"
        );
        let u = ph(&s, &[None, None, Some(6), None]);
        let y = space_to_depth(&s, &u, 3, "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, None, Some(2), None]));
        let v = ph(&s, &[Some(1), Some(1), Some(2), Some(2), Some(4)]);
        let y = space_to_depth(&s, &v, 2, "NCHW_VECT_C").unwrap();
        assert_eq!(y.shape(), Shape::unknown_with_rank(5));
    }
}
