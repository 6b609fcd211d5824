//! Ops that select elements by position: Slice, StridedSlice, StridedSliceGrad,
//! Gather, GatherV2, OneHot and Where — signatures, shape functions and builder
//! functions.

use super::strided_slice_spec::{validate_strided_slice, StridedSliceMasks};
use super::{const_ints, index_scalar, index_vector, shape_of, with_rank};
use crate::builder::{Output, Scope};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

const MASK_ATTRS: [&str; 5] = [
    "begin_mask: int = 0",
    "end_mask: int = 0",
    "ellipsis_mask: int = 0",
    "new_axis_mask: int = 0",
    "shrink_axis_mask: int = 0",
];

/// Registers the indexing ops.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("Slice")
            .input("input: T")
            .input("begin: Index")
            .input("size: Index")
            .output("output: T")
            .attr("T: type")
            .attr("Index: {int32, int64}")
            .shape_fn(slice_shape),
    );
    let mut b = OpDef::build("StridedSlice")
        .input("input: T")
        .input("begin: Index")
        .input("end: Index")
        .input("strides: Index")
        .output("output: T")
        .attr("T: type")
        .attr("Index: {int16, int32, int64}")
        .shape_fn(strided_slice_shape);
    for a in MASK_ATTRS {
        b = b.attr(a);
    }
    r.register(b);
    let mut b = OpDef::build("StridedSliceGrad")
        .input("shape: Index")
        .input("begin: Index")
        .input("end: Index")
        .input("strides: Index")
        .input("dy: T")
        .output("output: T")
        .attr("T: type")
        .attr("Index: {int32, int64}")
        .shape_fn(strided_slice_grad_shape);
    for a in MASK_ATTRS {
        b = b.attr(a);
    }
    r.register(b);
    r.register(
        OpDef::build("Gather")
            .input("params: Tparams")
            .input("indices: Tindices")
            .output("output: Tparams")
            .attr("validate_indices: bool = true")
            .attr("Tparams: type")
            .attr("Tindices: {int32, int64}")
            .shape_fn(gather_shape),
    );
    r.register(
        OpDef::build("GatherV2")
            .input("params: Tparams")
            .input("indices: Tindices")
            .input("axis: Taxis")
            .output("output: Tparams")
            .attr("batch_dims: int = 0")
            .attr("Tparams: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("Taxis: {int32, int64}")
            .shape_fn(gather_v2_shape),
    );
    r.register(
        OpDef::build("OneHot")
            .input("indices: TI")
            .input("depth: int32")
            .input("on_value: T")
            .input("off_value: T")
            .output("output: T")
            .attr("axis: int = -1")
            .attr("T: type")
            .attr("TI: {uint8, int8, int32, int64} = DT_INT64")
            .shape_fn(one_hot_shape),
    );
    r.register(
        OpDef::build("Where")
            .input("input: T")
            .output("index: int64")
            .attr(
                "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, \
                 qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64, bool} \
                 = DT_BOOL",
            )
            .shape_fn(where_shape),
    );
}

fn unknown_of_rank(rank: Option<usize>) -> Shape {
    rank.map_or_else(Shape::unknown, Shape::unknown_with_rank)
}

fn slice_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let b = with_rank(&c.input(1), 1, "Slice's begin")?;
    let sz = with_rank(&c.input(2), 1, "Slice's size")?;
    let n = b.merge(&sz)?.dim(0);
    if let (Some(n), Some(r)) = (n, input.rank()) {
        if n != r {
            return Err(Status::invalid_argument(format!(
                "Expected begin and size arguments to be 1-D tensors of size {r}, but got shapes {b} and {sz} instead."
            )));
        }
    }
    let rank = input.rank().or(n);
    let (Some(begin), Some(size)) = (const_ints(c.input_tensor(1)), const_ints(c.input_tensor(2)))
    else {
        return c.set_output(0, unknown_of_rank(rank));
    };
    let mut out = Vec::with_capacity(size.len());
    for (i, (&bi, &si)) in begin.iter().zip(&size).enumerate() {
        let dim = input.dim(i).map(|d| d as i64);
        if bi < 0 || dim.is_some_and(|d| bi > d) {
            return Err(Status::invalid_argument(format!(
                "Expected begin[{i}] in [0, {}], but got {bi}",
                dim.unwrap_or(-1)
            )));
        }
        let s = if si == -1 {
            dim.map(|d| d - bi)
        } else {
            Some(si)
        };
        if let Some(s) = s {
            if s < 0 || dim.is_some_and(|d| bi + s > d) {
                return Err(Status::invalid_argument(format!(
                    "Expected size[{i}] in [0, {}], but got {si}",
                    dim.map_or(-1, |d| d - bi)
                )));
            }
        }
        out.push(s.map(|s| s as usize));
    }
    c.set_output(0, shape_of(&out))
}

fn masks(c: &InferenceContext<'_>) -> Result<StridedSliceMasks> {
    Ok(StridedSliceMasks {
        begin_mask: c.attr("begin_mask")?,
        end_mask: c.attr("end_mask")?,
        ellipsis_mask: c.attr("ellipsis_mask")?,
        new_axis_mask: c.attr("new_axis_mask")?,
        shrink_axis_mask: c.attr("shrink_axis_mask")?,
    })
}

fn strided_slice_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let mut spec = Shape::unknown();
    for i in 1..4 {
        spec = spec.merge(&with_rank(
            &c.input(i),
            1,
            "StridedSlice's begin, end and strides",
        )?)?;
    }
    let strides = const_ints(c.input_tensor(3));
    let (Some(dims), Some(_), Some(strides)) = (input.dims(), spec.dim(0), strides) else {
        return c.set_output(0, Shape::unknown());
    };
    let in_dims: Vec<i64> = dims.iter().map(|d| d.map_or(-1, |v| v as i64)).collect();
    let begin = const_ints(c.input_tensor(1));
    let end = const_ints(c.input_tensor(2));
    let info = validate_strided_slice(
        begin.as_deref(),
        end.as_deref(),
        &strides,
        &in_dims,
        &masks(c)?,
    )?;
    c.set_output(0, Shape::from_tf_dims(&info.final_shape))
}

fn strided_slice_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let sh = with_rank(&c.input(0), 1, "StridedSliceGrad's shape")?;
    let out = match const_ints(c.input_tensor(0)) {
        Some(v) => Shape::from_tf_dims(&v),
        None => unknown_of_rank(sh.dim(0)),
    };
    c.set_output(0, out)
}

fn at_least(s: &Shape, rank: i64) -> Result<()> {
    match s.rank() {
        Some(r) if (r as i64) < rank => Err(Status::invalid_argument(format!(
            "Shape must be at least rank {rank} but is rank {r}"
        ))),
        _ => Ok(()),
    }
}

fn gather_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let params = c.input(0);
    let indices = c.input(1);
    at_least(&params, 1)?;
    let (Some(p), Some(i)) = (params.dims(), indices.dims()) else {
        return c.set_output(0, Shape::unknown());
    };
    let mut out = i.to_vec();
    out.extend_from_slice(&p[1..]);
    c.set_output(0, shape_of(&out))
}

fn gather_v2_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let params = c.input(0);
    let indices = c.input(1);
    at_least(&params, 1)?;
    with_rank(&c.input(2), 0, "GatherV2's axis")?;
    let batch_dims: i64 = c.attr("batch_dims")?;
    let axis = const_ints(c.input_tensor(2)).and_then(|v| v.first().copied());
    let (Some(p), Some(i)) = (params.dims(), indices.dims()) else {
        return c.set_output(0, Shape::unknown());
    };
    let (pr, ir) = (p.len() as i64, i.len() as i64);
    let bd = if batch_dims < 0 {
        batch_dims + ir
    } else {
        batch_dims
    };
    let Some(axis) = axis else {
        let r = usize::try_from(pr + ir - 1 - bd).unwrap_or(0);
        return c.set_output(0, Shape::unknown_with_rank(r));
    };
    at_least(&params, if axis < 0 { -axis } else { axis + 1 })?;
    at_least(&indices, batch_dims.abs())?;
    at_least(&params, bd + 1)?;
    let axis = if axis < 0 { axis + pr } else { axis } as usize;
    let bd = bd.max(0) as usize;
    if bd > axis {
        return Err(Status::invalid_argument(format!(
            "batch_dims ({bd}) must be less than or equal to axis ({axis})."
        )));
    }
    let mut out = p[..axis].to_vec();
    out.extend_from_slice(&i[bd.min(i.len())..]);
    out.extend_from_slice(&p[axis + 1..]);
    c.set_output(0, shape_of(&out))
}

fn one_hot_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let axis: i64 = c.attr("axis")?;
    if axis < -1 {
        return Err(Status::invalid_argument("axis must be >= -1"));
    }
    with_rank(&c.input(1), 0, "OneHot's depth")?;
    let depth = const_ints(c.input_tensor(1)).and_then(|v| v.first().copied());
    if let Some(d) = depth.filter(|&d| d < 0) {
        return Err(Status::invalid_argument(format!(
            "Dimension size, given by scalar input 1, must be non-negative but is {d}"
        )));
    }
    let Some(dims) = c.input(0).dims().map(<[_]>::to_vec) else {
        return c.set_output(0, Shape::unknown());
    };
    // -1: the new last axis; else an index into the output's dimensions.
    let at = match usize::try_from(axis) {
        Err(_) => dims.len(),
        Ok(a) if a <= dims.len() => a,
        Ok(a) => {
            return Err(Status::invalid_argument(format!(
                "Expected axis to be -1 or between [0, {}).  But received: {a}",
                dims.len() + 1
            )))
        }
    };
    let mut out = dims;
    out.insert(at, depth.map(|d| d as usize));
    c.set_output(0, shape_of(&out))
}

fn where_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let r = c.input(0).rank();
    c.set_output(0, shape_of(&[None, r]))
}

/// `Slice`: `size[i]` elements (`-1`: to the end) from `begin[i]` in every dimension.
pub fn slice(s: &Scope, x: &Output, begin: &Output, size: &Output) -> Result<Output> {
    s.op("Slice").input(x).input(begin).input(size).build1()
}

/// `Slice` with constant begin and size.
pub fn slice_at(s: &Scope, x: &Output, begin: &[i64], size: &[i64]) -> Result<Output> {
    let b = index_vector(s, begin)?;
    let z = index_vector(s, size)?;
    slice(s, x, &b, &z)
}

/// `StridedSlice` (Python's `x[b:e:s, ...]`) with the masks in `masks`.
pub fn strided_slice(
    s: &Scope,
    x: &Output,
    begin: &Output,
    end: &Output,
    strides: &Output,
    masks: &StridedSliceMasks,
) -> Result<Output> {
    s.op("StridedSlice")
        .input(x)
        .input(begin)
        .input(end)
        .input(strides)
        .attr("begin_mask", masks.begin_mask)
        .attr("end_mask", masks.end_mask)
        .attr("ellipsis_mask", masks.ellipsis_mask)
        .attr("new_axis_mask", masks.new_axis_mask)
        .attr("shrink_axis_mask", masks.shrink_axis_mask)
        .build1()
}

/// `StridedSlice` with constant begin, end and strides.
pub fn strided_slice_at(
    s: &Scope,
    x: &Output,
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
    masks: &StridedSliceMasks,
) -> Result<Output> {
    let (b, e, st) = (
        index_vector(s, begin)?,
        index_vector(s, end)?,
        index_vector(s, strides)?,
    );
    strided_slice(s, x, &b, &e, &st, masks)
}

/// `StridedSliceGrad`: `dy` scattered into zeros of `shape` where the slice took
/// its elements (the gradient of `StridedSlice`).
pub fn strided_slice_grad(
    s: &Scope,
    shape: &Output,
    begin: &Output,
    end: &Output,
    strides: &Output,
    dy: &Output,
    masks: &StridedSliceMasks,
) -> Result<Output> {
    s.op("StridedSliceGrad")
        .input(shape)
        .input(begin)
        .input(end)
        .input(strides)
        .input(dy)
        .attr("begin_mask", masks.begin_mask)
        .attr("end_mask", masks.end_mask)
        .attr("ellipsis_mask", masks.ellipsis_mask)
        .attr("new_axis_mask", masks.new_axis_mask)
        .attr("shrink_axis_mask", masks.shrink_axis_mask)
        .build1()
}

/// The legacy `Gather` (axis 0).
pub fn gather_v1(s: &Scope, params: &Output, indices: &Output) -> Result<Output> {
    s.op("Gather").input(params).input(indices).build1()
}

/// `GatherV2`: slices of `params` along `axis` (a scalar tensor) at `indices`.
pub fn gather(s: &Scope, params: &Output, indices: &Output, axis: &Output) -> Result<Output> {
    gather_batched(s, params, indices, axis, 0)
}

/// `GatherV2` along a constant axis.
pub fn gather_along(s: &Scope, params: &Output, indices: &Output, axis: i64) -> Result<Output> {
    let a = index_scalar(s, axis)?;
    gather(s, params, indices, &a)
}

/// `GatherV2` with `batch_dims` leading batch dimensions shared by params and
/// indices.
pub fn gather_batched(
    s: &Scope,
    params: &Output,
    indices: &Output,
    axis: &Output,
    batch_dims: i64,
) -> Result<Output> {
    s.op("GatherV2")
        .input(params)
        .input(indices)
        .input(axis)
        .attr("batch_dims", batch_dims)
        .build1()
}

/// `OneHot`: `on_value` where the index matches, `off_value` elsewhere, along a new
/// dimension of size `depth` (an int32 scalar) at `axis` (-1: last).
pub fn one_hot(
    s: &Scope,
    indices: &Output,
    depth: &Output,
    on_value: &Output,
    off_value: &Output,
    axis: i64,
) -> Result<Output> {
    s.op("OneHot")
        .input(indices)
        .input(depth)
        .input(on_value)
        .input(off_value)
        .attr("axis", axis)
        .build1()
}

/// `Where`: the int64 coordinates (`[n, rank]`) of the true (non-zero) elements.
pub fn where_(s: &Scope, x: &Output) -> Result<Output> {
    s.op("Where").input(x).build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{constant, placeholder, scalar};
    use crate::{Code, DType, Tensor};

    fn ph(s: &Scope, dims: &[Option<usize>]) -> Output {
        placeholder(s, DType::F32, Shape::from_dims(dims)).unwrap()
    }

    #[test]
    fn slice_and_strided_slice_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(4), Some(5), None]);
        assert_eq!(
            slice_at(&s, &x, &[1, 0, 0], &[2, -1, 3]).unwrap().shape(),
            Shape::from_dims(&[Some(2), Some(5), Some(3)])
        );
        assert!(slice_at(&s, &x, &[1, 0], &[2, -1]).is_err());
        assert!(slice_at(&s, &x, &[3, 0, 0], &[2, -1, 1]).is_err());
        let m = StridedSliceMasks {
            shrink_axis_mask: 1,
            ..Default::default()
        };
        let y = strided_slice_at(&s, &x, &[1], &[2], &[1], &m).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[Some(5), None]));
        let m = StridedSliceMasks {
            ellipsis_mask: 1,
            new_axis_mask: 2,
            ..Default::default()
        };
        let y = strided_slice_at(&s, &x, &[0, 0], &[0, 0], &[1, 1], &m).unwrap();
        assert_eq!(
            y.shape(),
            Shape::from_dims(&[Some(4), Some(5), None, Some(1)])
        );
        let m = StridedSliceMasks {
            shrink_axis_mask: 1,
            ..Default::default()
        };
        assert_eq!(
            strided_slice_at(&s, &x, &[9], &[10], &[1], &m)
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
        let shape = constant(&s, Tensor::vector(&[4i32, 5])).unwrap();
        let b = constant(&s, Tensor::vector(&[1i32])).unwrap();
        let dy = ph(&s, &[Some(1), Some(5)]);
        let g =
            strided_slice_grad(&s, &shape, &b, &b, &b, &dy, &StridedSliceMasks::default()).unwrap();
        assert_eq!(g.shape(), Shape::known(&[4, 5]));
    }

    #[test]
    fn gather_shapes() {
        let s = Scope::new();
        let p = ph(&s, &[Some(4), Some(5), Some(6)]);
        let i = placeholder(&s, DType::I32, Shape::known(&[2, 3])).unwrap();
        assert_eq!(
            gather_v1(&s, &p, &i).unwrap().shape(),
            Shape::known(&[2, 3, 5, 6])
        );
        assert_eq!(
            gather_along(&s, &p, &i, 1).unwrap().shape(),
            Shape::known(&[4, 2, 3, 6])
        );
        assert_eq!(
            gather_along(&s, &p, &i, -1).unwrap().shape(),
            Shape::known(&[4, 5, 2, 3])
        );
        assert!(gather_along(&s, &p, &i, 3).is_err());
        let bi = placeholder(&s, DType::I64, Shape::known(&[4, 7])).unwrap();
        let a = scalar(&s, 1i32).unwrap();
        assert_eq!(
            gather_batched(&s, &p, &bi, &a, 1).unwrap().shape(),
            Shape::known(&[4, 7, 6])
        );
        let sc = constant(&s, Tensor::scalar(1.0f32)).unwrap();
        assert!(gather_v1(&s, &sc, &i).is_err());
    }

    #[test]
    fn one_hot_and_where_shapes() {
        let s = Scope::new();
        let i = placeholder(&s, DType::I64, Shape::known(&[2, 3])).unwrap();
        let d = scalar(&s, 4i32).unwrap();
        let on = scalar(&s, 1.0f32).unwrap();
        let off = scalar(&s, 0.0f32).unwrap();
        assert_eq!(
            one_hot(&s, &i, &d, &on, &off, -1).unwrap().shape(),
            Shape::known(&[2, 3, 4])
        );
        assert_eq!(
            one_hot(&s, &i, &d, &on, &off, 0).unwrap().shape(),
            Shape::known(&[4, 2, 3])
        );
        assert!(one_hot(&s, &i, &d, &on, &off, -2).is_err());
        assert_eq!(
            one_hot(&s, &i, &d, &on, &off, 2).unwrap().shape(),
            Shape::known(&[2, 3, 4])
        );
        for axis in [3, i64::MAX] {
            let e = one_hot(&s, &i, &d, &on, &off, axis).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        }
        let b = placeholder(&s, DType::Bool, Shape::known(&[2, 3])).unwrap();
        let w = where_(&s, &b).unwrap();
        assert_eq!(
            (w.dtype(), w.shape()),
            (DType::I64, Shape::from_dims(&[None, Some(2)]))
        );
        let st = placeholder(&s, DType::String, Shape::known(&[2])).unwrap();
        assert!(where_(&s, &st).is_err());
    }
}
