//! The segment reductions (TensorFlow's `math_ops.cc`), which reduce the slices of
//! `data` that share a segment id:
//!
//! - `UnsortedSegmentSum`/`Max`/`Min`/`Prod`: ids in any order, of any shape that
//!   prefixes `data`'s, `num_segments` rows (negative ids dropped, empty segments
//!   the reduction's identity).
//! - `SegmentSum`/`Mean`/`Max`/`Min`/`Prod`: a sorted id vector; as many rows as
//!   the last id + 1 (gaps are zeros).
//! - `SparseSegmentSum`/`Mean`/`SqrtN` (and `…WithNumSegments`): the rows
//!   `data[indices[i]]` reduced by the sorted `segment_ids[i]` (embedding bags),
//!   and their gradients `SparseSegmentSumGrad`/`MeanGrad`/`SqrtNGrad`, which
//!   scatter the segments' gradients back to `output_dim0` rows.
//! - `Bincount`: the weights (or ones) summed into bins by value.
//!
//! The dense gradient of `Gather` is an `UnsortedSegmentSum`.

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{
    dim_from_scalar_input, merge_dim, merge_shapes, with_rank, with_rank_at_least,
};
use crate::op_def::{InferenceContext, OpDef};
use crate::ops::{FLOAT_TYPES, NUMERIC_TYPES};
use crate::{OpRegistry, Result, Shape, Status};

const IDS: &str = "{int32, int64}";

/// The unsorted segment reductions.
pub const UNSORTED_SEGMENT_OPS: [&str; 4] = [
    "UnsortedSegmentSum",
    "UnsortedSegmentMax",
    "UnsortedSegmentMin",
    "UnsortedSegmentProd",
];

/// The sorted segment reductions.
pub const SEGMENT_OPS: [&str; 5] = [
    "SegmentSum",
    "SegmentMean",
    "SegmentMax",
    "SegmentMin",
    "SegmentProd",
];

/// Registers the segment reductions and `Bincount`.
pub(super) fn register_ops(r: &OpRegistry) {
    for name in UNSORTED_SEGMENT_OPS {
        let ids = if name == "UnsortedSegmentSum" {
            "{int16, int32, int64}"
        } else {
            IDS
        };
        r.register(
            OpDef::build(name)
                .input("data: T")
                .input("segment_ids: Tindices")
                .input("num_segments: Tnumsegments")
                .output("output: T")
                .attr(&format!("T: {NUMERIC_TYPES}"))
                .attr(&format!("Tindices: {ids}"))
                .attr("Tnumsegments: {int32, int64} = DT_INT32")
                .shape_fn(unsorted_segment_shape),
        );
    }
    for name in SEGMENT_OPS {
        r.register(
            OpDef::build(name)
                .input("data: T")
                .input("segment_ids: Tindices")
                .output("output: T")
                .attr(&format!("T: {NUMERIC_TYPES}"))
                .attr(&format!("Tindices: {IDS}"))
                .shape_fn(segment_shape),
        );
    }
    for (red, types) in [
        ("Sum", NUMERIC_TYPES),
        ("Mean", FLOAT_TYPES),
        ("SqrtN", FLOAT_TYPES),
    ] {
        let sparse = |name: String| {
            OpDef::build(&name)
                .input("data: T")
                .input("indices: Tidx")
                .input("segment_ids: Tsegmentids")
                .output("output: T")
                .attr(&format!("T: {types}"))
                .attr("Tidx: {int32, int64} = DT_INT32")
                .attr("Tsegmentids: {int32, int64} = DT_INT32")
                .attr("sparse_gradient: bool = false")
        };
        r.register(sparse(format!("SparseSegment{red}")).shape_fn(sparse_segment_shape));
        r.register(
            sparse(format!("SparseSegment{red}WithNumSegments"))
                .input("num_segments: Tnumsegments")
                .attr("Tnumsegments: {int32, int64} = DT_INT32")
                .shape_fn(sparse_segment_num_shape),
        );
        r.register(
            OpDef::build(&format!("SparseSegment{red}Grad"))
                .input("grad: T")
                .input("indices: Tidx")
                .input("segment_ids: Tsegmentids")
                .input("output_dim0: int32")
                .output("output: T")
                .attr(&format!("T: {FLOAT_TYPES}"))
                .attr("Tidx: {int32, int64} = DT_INT32")
                .attr("Tsegmentids: {int32, int64} = DT_INT32")
                .shape_fn(sparse_segment_grad_shape),
        );
    }
    r.register(
        OpDef::build("Bincount")
            .input("arr: int32")
            .input("size: int32")
            .input("weights: T")
            .output("bins: T")
            .attr("T: {int32, int64, float, double}")
            .shape_fn(bincount_shape),
    );
}

/// `[dim] + data.shape[skip:]` (unknown when `data`'s rank is).
fn rows_then_slice(data: &Shape, skip: usize, dim: Option<usize>) -> Shape {
    match data.dims() {
        Some(d) => {
            let mut out = vec![dim];
            out.extend_from_slice(&d[skip.min(d.len())..]);
            Shape::from_dims(&out)
        }
        None => Shape::unknown(),
    }
}

/// TensorFlow's `SegmentReductionWithNumSegmentsShapeFn`: `[num_segments] +
/// data.shape[rank(segment_ids):]`, `segment_ids`' shape a prefix of `data`'s.
fn unsorted_segment_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(2), 0)?;
    let (data, ids) = (c.input(0), c.input(1));
    let Some(di) = ids.dims() else {
        return c.set_output(0, Shape::unknown());
    };
    if let Some(dd) = data.dims() {
        with_rank_at_least(&data, di.len())?;
        for (&a, &b) in dd.iter().zip(di) {
            merge_dim(a, b)?;
        }
    }
    let n = dim_from_scalar_input(c, 2)?;
    c.set_output(0, rows_then_slice(&data, di.len(), n))
}

/// TensorFlow's `SegmentReductionShapeFn`: `[?] + data.shape[1:]`.
fn segment_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let data = with_rank_at_least(&c.input(0), 1)?;
    with_rank(&c.input(1), 1)?;
    c.set_output(0, rows_then_slice(&data, 1, None))
}

/// The checks of `SparseSegmentReductionShapeFn`: `data` of rank at least 1,
/// `indices` and `segment_ids` vectors of one length.
fn sparse_segment_checks(c: &InferenceContext<'_>) -> Result<Shape> {
    let data = with_rank_at_least(&c.input(0), 1)?;
    let indices = with_rank(&c.input(1), 1)?;
    let ids = with_rank(&c.input(2), 1)?;
    merge_shapes(&indices, &ids)?;
    Ok(data)
}

fn sparse_segment_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let data = sparse_segment_checks(c)?;
    c.set_output(0, rows_then_slice(&data, 1, None))
}

/// `[num_segments] + data.shape[1:]`.
fn sparse_segment_num_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let data = sparse_segment_checks(c)?;
    with_rank(&c.input(3), 0)?;
    let n = non_negative_scalar(c, 3, "num_segments")?;
    c.set_output(0, rows_then_slice(&data, 1, n))
}

/// `[output_dim0] + grad.shape[1:]`.
fn sparse_segment_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let grad = with_rank_at_least(&c.input(0), 1)?;
    with_rank(&c.input(1), 1)?;
    with_rank(&c.input(3), 0)?;
    let n = non_negative_scalar(c, 3, "output_dim0")?;
    c.set_output(0, rows_then_slice(&grad, 1, n))
}

/// The value of scalar input `i` when it is a constant ("Cannot specify a negative
/// value for `what`" when negative).
fn non_negative_scalar(c: &InferenceContext<'_>, i: usize, what: &str) -> Result<Option<usize>> {
    dim_from_scalar_input(c, i).map_err(|_| {
        Status::invalid_argument(format!("Cannot specify a negative value for {what}"))
    })
}

/// `[size]` (a vector of unknown length when `size` is not a constant).
fn bincount_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(1), 0)?;
    let size = dim_from_scalar_input(c, 1).map_err(|_| {
        let v = crate::ops::array::const_ints(c.input_tensor(1)).unwrap_or_default();
        Status::invalid_argument(format!(
            "size ({}) must be non-negative",
            v.first().copied().unwrap_or(-1)
        ))
    })?;
    c.set_output(0, Shape::from_dims(&[size]))
}

fn segment_op(s: &Scope, op: &str, inputs: &[&Output]) -> Result<Output> {
    let mut b = s.op(op);
    for i in inputs {
        b = b.input(*i);
    }
    b.build1()
}

/// `UnsortedSegmentSum`: `output[i, ...] = sum of data[j..., ...]` over the `j` with
/// `segment_ids[j...] == i`, for `i < num_segments` (a scalar).
pub fn unsorted_segment_sum(
    s: &Scope,
    data: &Output,
    segment_ids: &Output,
    num_segments: &Output,
) -> Result<Output> {
    segment_op(s, "UnsortedSegmentSum", &[data, segment_ids, num_segments])
}

/// `UnsortedSegment{Sum,Max,Min,Prod}` by name (`reduction` is `"Sum"`, `"Max"`,
/// `"Min"` or `"Prod"`).
pub fn unsorted_segment_reduce(
    s: &Scope,
    reduction: &str,
    data: &Output,
    segment_ids: &Output,
    num_segments: &Output,
) -> Result<Output> {
    segment_op(
        s,
        &format!("UnsortedSegment{reduction}"),
        &[data, segment_ids, num_segments],
    )
}

/// `Segment{Sum,Mean,Max,Min,Prod}` over sorted `segment_ids` (`reduction` is
/// `"Sum"`, `"Mean"`, `"Max"`, `"Min"` or `"Prod"`).
pub fn segment_reduce(
    s: &Scope,
    reduction: &str,
    data: &Output,
    segment_ids: &Output,
) -> Result<Output> {
    segment_op(s, &format!("Segment{reduction}"), &[data, segment_ids])
}

/// `SegmentSum` over sorted `segment_ids`.
pub fn segment_sum(s: &Scope, data: &Output, segment_ids: &Output) -> Result<Output> {
    segment_reduce(s, "Sum", data, segment_ids)
}

/// `SparseSegment{Sum,Mean,SqrtN}` (`reduction`), or its `WithNumSegments` form when
/// `num_segments` is given.
pub fn sparse_segment_reduce(
    s: &Scope,
    reduction: &str,
    data: &Output,
    indices: &Output,
    segment_ids: &Output,
    num_segments: Option<&Output>,
) -> Result<Output> {
    match num_segments {
        None => segment_op(
            s,
            &format!("SparseSegment{reduction}"),
            &[data, indices, segment_ids],
        ),
        Some(n) => segment_op(
            s,
            &format!("SparseSegment{reduction}WithNumSegments"),
            &[data, indices, segment_ids, n],
        ),
    }
}

/// `SparseSegment{Sum,Mean,SqrtN}Grad` (`reduction`): the gradient of the
/// reduction scattered back to `output_dim0` rows.
pub fn sparse_segment_reduce_grad(
    s: &Scope,
    reduction: &str,
    grad: &Output,
    indices: &Output,
    segment_ids: &Output,
    output_dim0: &Output,
) -> Result<Output> {
    segment_op(
        s,
        &format!("SparseSegment{reduction}Grad"),
        &[grad, indices, segment_ids, output_dim0],
    )
}

/// `Bincount`: `bins[v] = sum of weights[i]` over `arr[i] == v < size` (an empty
/// `weights` counts ones).
pub fn bincount(s: &Scope, arr: &Output, size: &Output, weights: &Output) -> Result<Output> {
    segment_op(s, "Bincount", &[arr, size, weights])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{placeholder, scalar};
    use crate::DType;

    #[test]
    fn segment_shapes() {
        let s = Scope::new();
        let x = placeholder(&s, DType::F32, Shape::known(&[4, 3])).unwrap();
        let ids = placeholder(&s, DType::I32, Shape::known(&[4])).unwrap();
        let n = scalar(&s, 5i32).unwrap();
        let out = unsorted_segment_reduce(&s, "Max", &x, &ids, &n).unwrap();
        assert_eq!(out.shape(), Shape::known(&[5, 3]));
        let bad = placeholder(&s, DType::I32, Shape::known(&[3])).unwrap();
        let e = unsorted_segment_reduce(&s, "Prod", &x, &bad, &n).unwrap_err();
        assert!(e
            .message()
            .contains("Dimensions must be equal, but are 4 and 3"));
        let out = segment_reduce(&s, "Mean", &x, &ids).unwrap();
        assert_eq!(out.shape(), Shape::from_dims(&[None, Some(3)]));
        let out = sparse_segment_reduce(&s, "Sum", &x, &ids, &ids, Some(&n)).unwrap();
        assert_eq!(out.shape(), Shape::known(&[5, 3]));
        let e = sparse_segment_reduce(&s, "Mean", &x, &ids, &bad, None).unwrap_err();
        assert!(e
            .message()
            .contains("Dimension 0 in both shapes must be equal"));
        let d0 = scalar(&s, 9i32).unwrap();
        let g = sparse_segment_reduce_grad(&s, "SqrtN", &x, &ids, &ids, &d0).unwrap();
        assert_eq!(g.shape(), Shape::known(&[9, 3]));
        let w = placeholder(&s, DType::F32, Shape::known(&[0])).unwrap();
        assert_eq!(
            bincount(&s, &ids, &n, &w).unwrap().shape(),
            Shape::known(&[5])
        );
    }
}
