//! Gradients of the ops that select elements by position: `Slice` pads the
//! gradient back to the input's shape, `StridedSlice` scatters it with
//! `StridedSliceGrad` (whose own gradient is the `StridedSlice` again), and
//! `Gather`/`GatherV2` along axis 0 give the gathered rows' gradients as
//! [`IndexedSlices`] (TensorFlow's `_GatherGrad`); along another axis they sum
//! them into the rows they came from with `UnsortedSegmentSum`. The dense
//! functions stay registered for callers that look them up directly.

use crate::builder::{Output, Scope};
use crate::gradients::math_grad::shapes::{
    constant_ints, int_const, shape_of, static_dims, to_i32,
};
use crate::gradients::{GradContext, Gradient, GradientRegistry, IndexedSlices};
use crate::ops::{self, StridedSliceMasks};
use crate::{DType, Result, Status, Tensor};

type Grads = Result<Vec<Option<Output>>>;

/// `Slice(x, begin, size)`: the gradient padded with `begin` before and the rest of
/// `x` after each dimension.
fn slice_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, begin, g, out) = (c.input(0)?, c.input(1)?, c.grad(0)?, c.output(0)?);
    let dt = begin.dtype();
    let paddings = match (static_dims(&x), constant_ints(s, &begin), static_dims(&out)) {
        (Some(dx), Some(b), Some(dout)) if b.len() == dx.len() && dout.len() == dx.len() => {
            let mut p = Vec::with_capacity(2 * dx.len());
            for ((&d, &b), &o) in dx.iter().zip(&b).zip(&dout) {
                p.extend([b, d as i64 - b - o as i64]);
            }
            let t = if dt == DType::I64 {
                Tensor::new(&[dx.len(), 2], p)?
            } else {
                let p: Vec<i32> = p.iter().map(|&v| v as i32).collect();
                Tensor::new(&[dx.len(), 2], p)?
            };
            ops::constant(s, t)?
        }
        _ => {
            let column = ops::pack(s, &[ops::rank(s, &x)?, ops::scalar(s, 1i32)?], 0)?;
            let before = ops::reshape(s, &begin, &column)?;
            let rest = ops::sub(
                s,
                &ops::sub(
                    s,
                    &ops::shape_typed(s, &x, dt)?,
                    &ops::shape_typed(s, &out, dt)?,
                )?,
                &begin,
            )?;
            let after = ops::reshape(s, &rest, &column)?;
            ops::concat_along(s, &[before, after], 1)?
        }
    };
    Ok(vec![Some(ops::pad(s, &g, &paddings)?), None, None])
}

fn masks_of(c: &GradContext<'_>) -> Result<StridedSliceMasks> {
    let n = c.node;
    Ok(StridedSliceMasks {
        begin_mask: n.get_attr_or("begin_mask", 0)?,
        end_mask: n.get_attr_or("end_mask", 0)?,
        ellipsis_mask: n.get_attr_or("ellipsis_mask", 0)?,
        new_axis_mask: n.get_attr_or("new_axis_mask", 0)?,
        shrink_axis_mask: n.get_attr_or("shrink_axis_mask", 0)?,
    })
}

/// `StridedSlice`: `StridedSliceGrad` of the input's shape.
fn strided_slice_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, begin, end, strides) = (c.input(0)?, c.input(1)?, c.input(2)?, c.input(3)?);
    let shape = shape_of(s, &x, begin.dtype())?;
    let g = ops::strided_slice_grad(
        s,
        &shape,
        &begin,
        &end,
        &strides,
        &c.grad(0)?,
        &masks_of(c)?,
    )?;
    Ok(vec![Some(g), None, None, None])
}

/// `StridedSliceGrad`: the same slice of the gradient, for `dy`.
fn strided_slice_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let g = ops::strided_slice(
        s,
        &c.grad(0)?,
        &c.input(1)?,
        &c.input(2)?,
        &c.input(3)?,
        &masks_of(c)?,
    )?;
    Ok(vec![None, None, None, None, Some(g)])
}

/// Where the gather axis is, as the dense gradient needs it.
struct GatherLayout {
    /// The gradient reshaped so the indices are one dimension.
    values_shape: Output,
    /// The number of rows along the axis (a scalar).
    rows: Output,
    /// The permutation moving the axis first, and its inverse (`None`: axis 0).
    perms: Option<(Output, Output)>,
}

fn static_layout(
    s: &Scope,
    params_shape: &Output,
    params: &Output,
    axis: usize,
    rank: usize,
) -> Result<GatherLayout> {
    let a = axis as i64;
    let (outer, inner, rows) = match static_dims(params) {
        Some(d) => {
            let d: Vec<i64> = d.iter().map(|&v| v as i64).collect();
            (
                int_const(s, &d[..axis], DType::I32)?,
                int_const(s, &d[axis + 1..], DType::I32)?,
                ops::index_scalar(s, d[axis])?,
            )
        }
        None => (
            ops::slice_at(s, params_shape, &[0], &[a])?,
            ops::slice_at(s, params_shape, &[a + 1], &[-1])?,
            ops::gather_along(s, params_shape, &ops::index_scalar(s, a)?, 0)?,
        ),
    };
    let values_shape = ops::concat_along(s, &[outer, ops::index_vector(s, &[-1])?, inner], 0)?;
    let perms = if axis == 0 {
        None
    } else {
        let r = rank as i64;
        let perm: Vec<i64> = std::iter::once(a).chain(0..a).chain(a + 1..r).collect();
        let inv: Vec<i64> = (1..=a).chain(std::iter::once(0)).chain(a + 1..r).collect();
        Some((ops::index_vector(s, &perm)?, ops::index_vector(s, &inv)?))
    };
    Ok(GatherLayout {
        values_shape,
        rows,
        perms,
    })
}

fn dynamic_layout(
    s: &Scope,
    params_shape: &Output,
    params: &Output,
    axis: &Output,
) -> Result<GatherLayout> {
    let rank = ops::rank(s, params)?;
    let axis = ops::floor_mod(s, &to_i32(s, axis)?, &rank)?;
    let (zero, one) = (ops::scalar(s, 0i32)?, ops::scalar(s, 1i32)?);
    let next = ops::add(s, &axis, &one)?;
    let axis_v = ops::expand_dims_at(s, &axis, 0)?;
    let outer = ops::slice(s, params_shape, &ops::index_vector(s, &[0])?, &axis_v)?;
    let inner = ops::slice(
        s,
        params_shape,
        &ops::expand_dims_at(s, &next, 0)?,
        &ops::index_vector(s, &[-1])?,
    )?;
    let values_shape = ops::concat_along(s, &[outer, ops::index_vector(s, &[-1])?, inner], 0)?;
    let tail = ops::range(s, &next, &rank, &one)?;
    let perm = ops::concat_along(
        s,
        &[
            axis_v.clone(),
            ops::range(s, &zero, &axis, &one)?,
            tail.clone(),
        ],
        0,
    )?;
    let inv = ops::concat_along(
        s,
        &[
            ops::range(s, &one, &next, &one)?,
            ops::index_vector(s, &[0])?,
            tail,
        ],
        0,
    )?;
    Ok(GatherLayout {
        values_shape,
        rows: ops::gather_along(s, params_shape, &axis, 0)?,
        perms: Some((perm, inv)),
    })
}

/// The dense gradient of gathering `indices` from `params` along `axis`.
fn gather_dense_grad(c: &GradContext<'_>, axis: Option<&Output>) -> Grads {
    let s = c.scope;
    let (params, indices, g) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let params_shape = shape_of(s, &params, DType::I32)?;
    let rank = params.shape().rank();
    let static_axis = match axis {
        None => Some(0),
        Some(a) => match (constant_ints(s, a), rank) {
            (Some(v), Some(r)) if v.len() == 1 => {
                let r = r as i64;
                if v[0] < -r || v[0] >= r {
                    return Err(Status::invalid_argument(format!(
                        "Expected axis in the range [{}, {r}), but got {}",
                        -r, v[0]
                    )));
                }
                Some(v[0].rem_euclid(r) as usize)
            }
            _ => None,
        },
    };
    let layout = match (static_axis, axis) {
        (Some(a), _) => static_layout(s, &params_shape, &params, a, rank.unwrap_or(1))?,
        (None, Some(a)) => dynamic_layout(s, &params_shape, &params, a)?,
        (None, None) => return Err(Status::internal("gather without an axis")),
    };
    let values = ops::reshape(s, &g, &layout.values_shape)?;
    let flat = ops::reshape_to(s, &indices, &[-1])?;
    let dense = match &layout.perms {
        None => ops::unsorted_segment_sum(s, &values, &flat, &layout.rows)?,
        Some((perm, inv)) => {
            let moved = ops::transpose(s, &values, perm)?;
            let summed = ops::unsorted_segment_sum(s, &moved, &flat, &layout.rows)?;
            ops::transpose(s, &summed, inv)?
        }
    };
    let out = ops::reshape(s, &dense, &params_shape)?;
    let mut grads = vec![Some(out)];
    grads.resize(c.inputs.len(), None);
    Ok(grads)
}

/// The gradient of `Gather`/`GatherV2` along axis 0 with no batch dimensions
/// (TensorFlow's `_GatherGrad`): the output gradient's rows, one per index, as
/// [`IndexedSlices`] of a tensor shaped like `params` (`params_shape`).
pub(crate) fn gather_rows_grad(
    c: &GradContext<'_>,
    params_shape: Output,
    indices: &Output,
) -> Result<Vec<Option<Gradient>>> {
    let s = c.scope;
    let g = c.grad(0)?;
    let size = ops::expand_dims_at(s, &ops::size(s, indices)?, 0)?;
    let inner = match constant_ints(s, &params_shape) {
        Some(d) if !d.is_empty() => int_const(s, &d[1..], DType::I32)?,
        _ => ops::slice_at(s, &to_i32(s, &params_shape)?, &[1], &[-1])?,
    };
    let values_shape = ops::concat_along(s, &[size.clone(), inner], 0)?;
    let values = ops::reshape(s, &g, &values_shape)?;
    let indices = ops::reshape(s, indices, &size)?;
    let mut grads = vec![Some(Gradient::Sparse(IndexedSlices {
        values,
        indices,
        dense_shape: params_shape,
    }))];
    grads.resize(c.inputs.len(), None);
    Ok(grads)
}

fn dense(g: Grads) -> Result<Vec<Option<Gradient>>> {
    Ok(g?.into_iter().map(|g| g.map(Gradient::Dense)).collect())
}

fn gather_grad(c: &GradContext<'_>) -> Grads {
    gather_dense_grad(c, None)
}

fn gather_sparse_grad(c: &GradContext<'_>) -> Result<Vec<Option<Gradient>>> {
    let params_shape = shape_of(c.scope, &c.input(0)?, DType::I32)?;
    gather_rows_grad(c, params_shape, &c.input(1)?)
}

fn gather_v2_grad(c: &GradContext<'_>) -> Grads {
    let batch_dims: i64 = c.node.get_attr_or("batch_dims", 0)?;
    if batch_dims != 0 {
        return Err(Status::unimplemented(format!(
            "the gradient of GatherV2 with batch_dims = {batch_dims} is not supported"
        )));
    }
    let axis = c.input(2)?;
    gather_dense_grad(c, Some(&axis))
}

/// `GatherV2`: rows ([`IndexedSlices`]) along a constant axis 0, else dense.
fn gather_v2_sparse_grad(c: &GradContext<'_>) -> Result<Vec<Option<Gradient>>> {
    let batch_dims: i64 = c.node.get_attr_or("batch_dims", 0)?;
    let axis0 = matches!(constant_ints(c.scope, &c.input(2)?).as_deref(), Some([0]));
    if batch_dims != 0 || !axis0 {
        return dense(gather_v2_grad(c));
    }
    gather_sparse_grad(c)
}

/// Registers the indexing gradients.
pub(super) fn register(r: &GradientRegistry) {
    r.register("Slice", slice_grad);
    r.register("StridedSlice", strided_slice_grad);
    r.register("StridedSliceGrad", strided_slice_grad_grad);
    r.register("Gather", gather_grad);
    r.register("GatherV2", gather_v2_grad);
    r.register_sparse("Gather", gather_sparse_grad);
    r.register_sparse("GatherV2", gather_v2_sparse_grad);
}
