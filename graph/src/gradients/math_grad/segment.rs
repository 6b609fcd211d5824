//! Gradients of the segment reductions, as TensorFlow's `math_grad.py` builds them:
//!
//! - `SegmentSum`/`SegmentMean`: the (count-divided) gradient gathered back by id.
//! - `SegmentMax`/`Min`, `UnsortedSegmentMax`/`Min`: the gradient to the selected
//!   elements, split evenly between ties.
//! - `SegmentProd`/`UnsortedSegmentProd`: the product of the other elements, without
//!   dividing by zeros (one zero: only it gets the product of the rest; two: none).
//! - `UnsortedSegmentSum`: the gradient gathered back, zero for negative ids
//!   (TensorFlow's `_GatherDropNegatives`).
//! - `SparseSegmentSum`/`Mean`/`SqrtN` (and `…WithNumSegments`): the matching
//!   `SparseSegment…Grad` op (a dense gradient, also for `sparse_gradient`).

use super::shapes::{float_scalar, shape_of, static_dims};
use crate::builder::{Output, Scope};
use crate::gradients::{GradContext, GradFn, GradientRegistry};
use crate::ops;
use crate::{DType, Result, Tensor};

type Grads = Result<Vec<Option<Output>>>;

/// `[g, None…]` for an op with `n` inputs.
fn first_of(g: Output, n: usize) -> Vec<Option<Output>> {
    let mut v = vec![Some(g)];
    v.resize(n, None);
    v
}

/// `params` gathered by `ids` (negative ids clipped to 0) and zeroed where the id
/// is negative; also the clipped ids and the mask (`ids >= 0` broadcast over the
/// gathered slices), which a second call can reuse.
fn gather_drop_negatives(
    s: &Scope,
    params: &Output,
    ids: &Output,
    reuse: Option<(&Output, &Output)>,
) -> Result<(Output, Output, Output)> {
    let clipped = match reuse {
        Some((c, _)) => c.clone(),
        None => ops::maximum(s, ids, &ops::zeros_like(s, ids)?)?,
    };
    let gathered = ops::gather_along(s, params, &clipped, 0)?;
    let mask = match reuse {
        Some((_, m)) => m.clone(),
        None => {
            let zero = ops::cast(s, &ops::scalar(s, 0i32)?, ids.dtype())?;
            let positive = ops::greater_equal(s, ids, &zero)?;
            // [shape(ids), 1, …, 1], then broadcast over the slices.
            let extra = ops::sub(s, &ops::rank(s, &gathered)?, &ops::rank(s, ids)?)?;
            let ones = ops::fill(
                s,
                &ops::expand_dims_at(s, &extra, 0)?,
                &ops::scalar(s, 1i32)?,
            )?;
            let mask_shape = ops::concat_along(s, &[ops::shape(s, ids)?, ones], 0)?;
            let mask = ops::reshape(s, &positive, &mask_shape)?;
            ops::broadcast_to(s, &mask, &ops::shape(s, &gathered)?)?
        }
    };
    let out = ops::select_v2(s, &mask, &gathered, &ops::zeros_like(s, &gathered)?)?;
    Ok((out, clipped, mask))
}

fn unsorted_segment_sum_grad(c: &GradContext<'_>) -> Grads {
    let (out, _, _) = gather_drop_negatives(c.scope, &c.grad(0)?, &c.input(1)?, None)?;
    Ok(first_of(out, 3))
}

/// `UnsortedSegmentMax`/`Min`.
fn unsorted_segment_min_max_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (data, ids, n) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let g = c.grad(0)?;
    let (gathered, clipped, positive) = gather_drop_negatives(s, &c.output(0)?, &ids, None)?;
    let selected = ops::logical_and(s, &ops::equal(s, &data, &gathered)?, &positive)?;
    let num = ops::unsorted_segment_sum(s, &ops::cast(s, &selected, g.dtype())?, &ids, &n)?;
    let weighted = ops::real_div(s, &g, &num)?;
    let (spread, _, _) = gather_drop_negatives(s, &weighted, &ids, Some((&clipped, &positive)))?;
    let out = ops::select_v2(s, &selected, &spread, &ops::zeros_like(s, &spread)?)?;
    Ok(first_of(out, 3))
}

/// The pieces of the product gradients: `(is_zero, data with zeros as ones)`.
fn zeros_and_nonzero(s: &Scope, data: &Output) -> Result<(Output, Output)> {
    let is_zero = ops::equal(s, data, &float_scalar(s, 0.0, data.dtype())?)?;
    let nonzero = ops::select_v2(s, &is_zero, &ops::ones_like(s, data)?, data)?;
    Ok((is_zero, nonzero))
}

/// The incoming gradient, zeroed for segments with more than one zero.
fn drop_multi_zero_segments(s: &Scope, g: &Output, num_zeros: &Output) -> Result<Output> {
    let many = ops::greater(s, num_zeros, &ops::scalar(s, 1i32)?)?;
    ops::select_v2(s, &many, &ops::zeros_like(s, g)?, g)
}

fn unsorted_segment_prod_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (data, ids, n) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let (is_zero, nonzero) = zeros_and_nonzero(s, &data)?;
    let num_zeros = ops::unsorted_segment_sum(s, &ops::cast(s, &is_zero, DType::I32)?, &ids, &n)?;
    let g = drop_multi_zero_segments(s, &c.grad(0)?, &num_zeros)?;
    let nonzero_prod = ops::unsorted_segment_reduce(s, "Prod", &nonzero, &ids, &n)?;
    let clipped = ops::maximum(s, &ids, &ops::zeros_like(s, &ids)?)?;
    let prod = ops::gather_along(s, &c.output(0)?, &clipped, 0)?;
    let nonzero_prod = ops::gather_along(s, &nonzero_prod, &clipped, 0)?;
    let divided = ops::real_div(s, &prod, &data)?;
    let partial = ops::select_v2(s, &is_zero, &nonzero_prod, &divided)?;
    let (spread, _, _) = gather_drop_negatives(s, &g, &ids, None)?;
    Ok(first_of(ops::mul(s, &spread, &partial)?, 3))
}

fn segment_sum_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::gather_along(c.scope, &c.grad(0)?, &c.input(1)?, 0)?;
    Ok(first_of(g, 2))
}

/// `SegmentMean`: the gradient divided by each segment's size, gathered back.
fn segment_mean_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (data, ids, g) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let ones_shape = match static_dims(&data) {
        Some(d) => {
            let mut v = vec![d[0] as i64];
            v.resize(d.len(), 1);
            ops::index_vector(s, &v)?
        }
        None => {
            let extra = ops::sub(s, &ops::rank(s, &data)?, &ops::scalar(s, 1i32)?)?;
            let ones = ops::fill(
                s,
                &ops::expand_dims_at(s, &extra, 0)?,
                &ops::scalar(s, 1i32)?,
            )?;
            ops::concat_along(s, &[shape_of(s, &ids, DType::I32)?, ones], 0)?
        }
    };
    let ones = ops::fill(s, &ones_shape, &float_scalar(s, 1.0, g.dtype())?)?;
    let counts = ops::segment_sum(s, &ones, &ids)?;
    let scaled = ops::real_div(s, &g, &counts)?;
    Ok(first_of(ops::gather_along(s, &scaled, &ids, 0)?, 2))
}

/// `SegmentMax`/`Min`.
fn segment_min_max_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (data, ids, g) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let gathered = ops::gather_along(s, &c.output(0)?, &ids, 0)?;
    let selected = ops::equal(s, &data, &gathered)?;
    let num = ops::segment_sum(s, &ops::cast(s, &selected, g.dtype())?, &ids)?;
    let weighted = ops::gather_along(s, &ops::real_div(s, &g, &num)?, &ids, 0)?;
    let out = ops::select_v2(s, &selected, &weighted, &ops::zeros_like(s, &data)?)?;
    Ok(first_of(out, 2))
}

fn segment_prod_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (data, ids) = (c.input(0)?, c.input(1)?);
    let (is_zero, nonzero) = zeros_and_nonzero(s, &data)?;
    let num_zeros = ops::segment_sum(s, &ops::cast(s, &is_zero, DType::I32)?, &ids)?;
    let g = drop_multi_zero_segments(s, &c.grad(0)?, &num_zeros)?;
    let nonzero_prod = ops::segment_reduce(s, "Prod", &nonzero, &ids)?;
    let prod = ops::gather_along(s, &c.output(0)?, &ids, 0)?;
    let nonzero_prod = ops::gather_along(s, &nonzero_prod, &ids, 0)?;
    let divided = ops::real_div(s, &prod, &nonzero)?;
    let partial = ops::select_v2(s, &is_zero, &nonzero_prod, &divided)?;
    let spread = ops::gather_along(s, &g, &ids, 0)?;
    Ok(first_of(ops::mul(s, &spread, &partial)?, 2))
}

/// `SparseSegment{Sum,Mean,SqrtN}[WithNumSegments]`: the `…Grad` op with
/// `output_dim0 = shape(data)[0]`.
fn sparse_segment_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let data = c.input(0)?;
    let op = c.node.op.as_str();
    let reduction = ["Mean", "SqrtN"]
        .into_iter()
        .find(|r| op.contains(r))
        .unwrap_or("Sum");
    let dim0 = match static_dims(&data) {
        Some(d) => ops::constant(s, Tensor::scalar(d[0] as i32))?,
        None => ops::gather_along(
            s,
            &shape_of(s, &data, DType::I32)?,
            &ops::scalar(s, 0i32)?,
            0,
        )?,
    };
    let g = ops::sparse_segment_reduce_grad(
        s,
        reduction,
        &c.grad(0)?,
        &c.input(1)?,
        &c.input(2)?,
        &dim0,
    )?;
    Ok(first_of(g, c.inputs.len()))
}

/// Registers the segment reductions' gradients.
pub(super) fn register(r: &GradientRegistry) {
    let table: [(&str, GradFn); 9] = [
        ("UnsortedSegmentSum", unsorted_segment_sum_grad),
        ("UnsortedSegmentMax", unsorted_segment_min_max_grad),
        ("UnsortedSegmentMin", unsorted_segment_min_max_grad),
        ("UnsortedSegmentProd", unsorted_segment_prod_grad),
        ("SegmentSum", segment_sum_grad),
        ("SegmentMean", segment_mean_grad),
        ("SegmentMax", segment_min_max_grad),
        ("SegmentMin", segment_min_max_grad),
        ("SegmentProd", segment_prod_grad),
    ];
    for (op, f) in table {
        r.register(op, f);
    }
    for red in ["Sum", "Mean", "SqrtN"] {
        for suffix in ["", "WithNumSegments"] {
            r.register(&format!("SparseSegment{red}{suffix}"), sparse_segment_grad);
        }
    }
}
