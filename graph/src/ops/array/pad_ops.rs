//! Ops that grow or mirror a tensor: Tile, Pad, PadV2, MirrorPad, ReverseV2 and
//! ReverseSequence (each batch row's first `seq_lengths[b]` steps reversed) —
//! signatures, shape functions and builder functions.

use super::{const_ints, index_vector, shape_of, with_rank};
use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::merge_dim;
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status, Tensor};

/// Registers the tiling, padding and reversing ops.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("Tile")
            .input("input: T")
            .input("multiples: Tmultiples")
            .output("output: T")
            .attr("T: type")
            .attr("Tmultiples: {int32, int64} = DT_INT32")
            .shape_fn(tile_shape),
    );
    r.register(
        OpDef::build("Pad")
            .input("input: T")
            .input("paddings: Tpaddings")
            .output("output: T")
            .attr("T: type")
            .attr("Tpaddings: {int32, int64} = DT_INT32")
            .shape_fn(pad_shape),
    );
    r.register(
        OpDef::build("PadV2")
            .input("input: T")
            .input("paddings: Tpaddings")
            .input("constant_values: T")
            .output("output: T")
            .attr("T: type")
            .attr("Tpaddings: {int32, int64} = DT_INT32")
            .shape_fn(pad_v2_shape),
    );
    r.register(
        OpDef::build("MirrorPad")
            .input("input: T")
            .input("paddings: Tpaddings")
            .output("output: T")
            .attr("T: type")
            .attr("Tpaddings: {int32, int64} = DT_INT32")
            .attr("mode: {'REFLECT', 'SYMMETRIC'}")
            .shape_fn(pad_shape),
    );
    r.register(
        OpDef::build("ReverseV2")
            .input("tensor: T")
            .input("axis: Tidx")
            .output("output: T")
            .attr("Tidx: {int32, int64} = DT_INT32")
            .attr(
                "T: {uint8, int8, uint16, int16, int32, uint32, int64, uint64, bool, bfloat16, \
                 half, float, double, complex64, complex128, string}",
            )
            .shape_fn(reverse_shape),
    );
    r.register(
        OpDef::build("ReverseSequence")
            .input("input: T")
            .input("seq_lengths: Tlen")
            .output("output: T")
            .attr("seq_dim: int")
            .attr("batch_dim: int = 0")
            .attr("T: type")
            .attr("Tlen: {int32, int64} = DT_INT64")
            .shape_fn(reverse_sequence_shape),
    );
}

fn unknown_of_rank(rank: Option<usize>) -> Shape {
    rank.map_or_else(Shape::unknown, Shape::unknown_with_rank)
}

fn tile_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let m = with_rank(&c.input(1), 1, "Tile's multiples")?;
    let rank = input.rank().or(m.dim(0));
    if let (Some(r), Some(k)) = (input.rank(), m.dim(0)) {
        if r != k {
            return Err(Status::invalid_argument(format!(
                "Expected multiples argument to be a vector of length {r} but got length {k}"
            )));
        }
    }
    let Some(mult) = const_ints(c.input_tensor(1)) else {
        return c.set_output(0, unknown_of_rank(rank));
    };
    let mut out = Vec::with_capacity(mult.len());
    for (i, &k) in mult.iter().enumerate() {
        if k < 0 {
            return Err(Status::invalid_argument(format!(
                "Expected multiples[{i}] >= 0, but got {k}"
            )));
        }
        let d = input.dims().and_then(|d| d.get(i).copied().flatten());
        out.push(d.and_then(|d| d.checked_mul(k as usize)));
    }
    c.set_output(0, shape_of(&out))
}

fn pad_common(c: &mut InferenceContext<'_>) -> Result<()> {
    let p = with_rank(&c.input(1), 2, "the paddings")?;
    if let Some(k) = p.dim(1).filter(|&k| k != 2) {
        return Err(Status::invalid_argument(format!(
            "paddings must be a matrix with 2 columns: {p} (dimension 1 must be 2 but is {k})"
        )));
    }
    let input = c.input(0);
    if let (Some(r), Some(n)) = (input.rank(), p.dim(0)) {
        if r != n {
            return Err(Status::invalid_argument(format!(
                "The first dimension of paddings must be the rank of inputs{p} {input}"
            )));
        }
    }
    let rank = input.rank().or(p.dim(0));
    let Some(pads) = const_ints(c.input_tensor(1)) else {
        return c.set_output(0, unknown_of_rank(rank));
    };
    let mut out = Vec::with_capacity(pads.len() / 2);
    for (i, pair) in pads.chunks(2).enumerate() {
        let (a, b) = (pair[0], pair.get(1).copied().unwrap_or(0));
        if a < 0 || b < 0 {
            return Err(Status::invalid_argument(format!(
                "Paddings must be non-negative: {a} {b}"
            )));
        }
        let d = input.dims().and_then(|d| d.get(i).copied().flatten());
        out.push(d.map(|d| d + a as usize + b as usize));
    }
    c.set_output(0, shape_of(&out))
}

fn pad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    pad_common(c)
}

fn pad_v2_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let v = c.input(2);
    if v.rank().is_some_and(|r| r != 0) {
        return Err(Status::invalid_argument(format!(
            "constant_values must be a scalar. Found: {v}"
        )));
    }
    pad_common(c)
}

fn reverse_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let axis = c.input(1);
    if let Some(r) = axis.rank().filter(|&r| r != 1) {
        return Err(Status::invalid_argument(format!(
            "'dims' must be 1-dimension, not {r}"
        )));
    }
    c.set_output(0, input)
}
/// `Tile` by the multiples held by `multiples`.
pub fn tile(s: &Scope, x: &Output, multiples: &Output) -> Result<Output> {
    s.op("Tile").input(x).input(multiples).build1()
}

/// `Tile` by constant multiples.
pub fn tile_by(s: &Scope, x: &Output, multiples: &[i64]) -> Result<Output> {
    let m = index_vector(s, multiples)?;
    tile(s, x, &m)
}

/// A `Const` `[n, 2]` int32 (int64 when a value does not fit) of `(before, after)`
/// pairs.
pub(super) fn paddings_const(s: &Scope, paddings: &[[i64; 2]]) -> Result<Output> {
    let flat: Vec<i64> = paddings.iter().flatten().copied().collect();
    let t = if flat.iter().all(|&v| i32::try_from(v).is_ok()) {
        let v: Vec<i32> = flat.iter().map(|&v| v as i32).collect();
        Tensor::new(&[paddings.len(), 2], v)?
    } else {
        Tensor::new(&[paddings.len(), 2], flat)?
    };
    super::constant(s, t)
}

/// `Pad` with zeros by the `[rank, 2]` paddings held by `paddings`.
pub fn pad(s: &Scope, x: &Output, paddings: &Output) -> Result<Output> {
    s.op("Pad").input(x).input(paddings).build1()
}

/// `Pad` with zeros by constant `(before, after)` paddings per dimension.
pub fn pad_by(s: &Scope, x: &Output, paddings: &[[i64; 2]]) -> Result<Output> {
    let p = paddings_const(s, paddings)?;
    pad(s, x, &p)
}

/// `PadV2`: `Pad` with `constant_values` (a scalar of `x`'s dtype).
pub fn pad_v2(
    s: &Scope,
    x: &Output,
    paddings: &Output,
    constant_values: &Output,
) -> Result<Output> {
    s.op("PadV2")
        .input(x)
        .input(paddings)
        .input(constant_values)
        .build1()
}

/// `MirrorPad` in `mode` `"REFLECT"` or `"SYMMETRIC"`.
pub fn mirror_pad(s: &Scope, x: &Output, paddings: &Output, mode: &str) -> Result<Output> {
    s.op("MirrorPad")
        .input(x)
        .input(paddings)
        .attr("mode", mode)
        .build1()
}

/// `MirrorPad` by constant paddings.
pub fn mirror_pad_by(s: &Scope, x: &Output, paddings: &[[i64; 2]], mode: &str) -> Result<Output> {
    let p = paddings_const(s, paddings)?;
    mirror_pad(s, x, &p, mode)
}

/// `input`, its `batch_dim` merged with the length of `seq_lengths`.
fn reverse_sequence_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let lens = with_rank(&c.input(1), 1, "ReverseSequence's seq_lengths")?;
    let seq_dim: i64 = c.attr("seq_dim")?;
    let batch_dim: i64 = c.attr("batch_dim")?;
    let Some(dims) = input.dims() else {
        return c.set_output(0, Shape::unknown());
    };
    let rank = dims.len() as i64;
    if batch_dim >= rank {
        return Err(Status::invalid_argument(format!(
            "batch_dim must be < input rank: {batch_dim} vs. {rank}"
        )));
    }
    if seq_dim >= rank {
        return Err(Status::invalid_argument(format!(
            "seq_dim must be < input rank: {seq_dim} vs. {rank}"
        )));
    }
    let Ok(b) = usize::try_from(batch_dim) else {
        return Err(Status::invalid_argument(format!(
            "batch_dim must be >=0, got {batch_dim}"
        )));
    };
    let mut out = dims.to_vec();
    out[b] = merge_dim(out[b], lens.dim(0))?;
    c.set_output(0, shape_of(&out))
}

/// `ReverseSequence`: the first `seq_lengths[b]` entries along `seq_dim` of each
/// slice `b` along `batch_dim` reversed, the rest unchanged.
pub fn reverse_sequence(
    s: &Scope,
    x: &Output,
    seq_lengths: &Output,
    seq_dim: i64,
    batch_dim: i64,
) -> Result<Output> {
    s.op("ReverseSequence")
        .input(x)
        .input(seq_lengths)
        .attr("seq_dim", seq_dim)
        .attr("batch_dim", batch_dim)
        .build1()
}

/// `ReverseV2` along the axes held by `axis`.
pub fn reverse(s: &Scope, x: &Output, axis: &Output) -> Result<Output> {
    s.op("ReverseV2").input(x).input(axis).build1()
}

/// `ReverseV2` along constant axes.
pub fn reverse_axes(s: &Scope, x: &Output, axes: &[i64]) -> Result<Output> {
    let a = index_vector(s, axes)?;
    reverse(s, x, &a)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{constant, placeholder};
    use crate::DType;

    fn ph(s: &Scope, dims: &[Option<usize>]) -> Output {
        placeholder(s, DType::F32, Shape::from_dims(dims)).unwrap()
    }

    #[test]
    fn tile_pad_reverse_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), None]);
        assert_eq!(
            tile_by(&s, &x, &[3, 2]).unwrap().shape(),
            Shape::from_dims(&[Some(6), None])
        );
        assert!(tile_by(&s, &x, &[3]).is_err());
        assert_eq!(
            pad_by(&s, &x, &[[1, 2], [0, 0]]).unwrap().shape(),
            Shape::from_dims(&[Some(5), None])
        );
        assert!(pad_by(&s, &x, &[[1, 2]]).is_err());
        assert!(pad_by(&s, &x, &[[1, -2], [0, 0]]).is_err());
        let p = constant(&s, Tensor::new(&[2, 2], vec![1i64, 1, 0, 0]).unwrap()).unwrap();
        let cv = constant(&s, Tensor::scalar(1.0f32)).unwrap();
        assert_eq!(
            pad_v2(&s, &x, &p, &cv).unwrap().shape(),
            Shape::from_dims(&[Some(4), None])
        );
        assert_eq!(
            mirror_pad_by(&s, &x, &[[1, 1], [0, 0]], "REFLECT")
                .unwrap()
                .shape(),
            Shape::from_dims(&[Some(4), None])
        );
        assert!(mirror_pad_by(&s, &x, &[[1, 1], [0, 0]], "EDGE").is_err());
        assert_eq!(reverse_axes(&s, &x, &[0]).unwrap().shape(), x.shape());
    }
}
