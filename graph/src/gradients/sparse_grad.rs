//! Gradients of the sparse ops, as TensorFlow's `sparse_grad.py` builds them
//! (the indices and shapes get none):
//!
//! - `SparseTensorDenseMatMul`: for `b`, the product of `a` (adjoint flipped) with
//!   the gradient (transposed back when `adjoint_b`); for `a`'s values, the dot
//!   product of the gradient's row and `b`'s row that each entry pairs (a batch of
//!   1×k·k×1 products, one per entry).
//! - `SparseToDense`: the gradient at the indices for the values (summed for a
//!   scalar value, which every index shares), the rest of its sum for the default.
//! - `SparseReorder`: the gradient put back in the input's entry order (the
//!   inverse of the reordering of the entries' positions).
//! - `SparseTensorDenseAdd`: the gradient at the indices for the values, as is
//!   for the dense operand.
//! - `SparseReduceSum`: the gradient, reshaped to the kept-dimensions shape, at
//!   each entry's reduced position.

use crate::builder::{Output, Scope};
use crate::gradients::math_grad::shapes::sum_to_operand;
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{DType, Result};

type Grads = Result<Vec<Option<Output>>>;

/// Column `j` of the `[nnz, rank]` index matrix.
fn index_column(s: &Scope, indices: &Output, j: i64) -> Result<Output> {
    ops::gather_along(s, indices, &ops::index_scalar(s, j)?, 1)
}

fn sparse_dense_matmul_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (indices, values, shape, b) = (c.input(0)?, c.input(1)?, c.input(2)?, c.input(3)?);
    let adj_a: bool = c.node.get_attr("adjoint_a")?;
    let adj_b: bool = c.node.get_attr("adjoint_b")?;
    let g = c.grad(0)?;
    let a = ops::SparseTensor {
        indices: indices.clone(),
        values,
        dense_shape: shape,
    };
    let mut b_grad = ops::sparse_tensor_dense_mat_mul(s, &a, &g, !adj_a, false)?;
    if adj_b {
        b_grad = ops::transpose_perm(s, &b_grad, &[1, 0])?;
    }
    let (rows, cols) = (index_column(s, &indices, 0)?, index_column(s, &indices, 1)?);
    let parts_a = ops::gather_along(s, &g, if adj_a { &cols } else { &rows }, 0)?;
    let b_rows = if adj_b {
        ops::transpose_perm(s, &b, &[1, 0])?
    } else {
        b
    };
    let parts_b = ops::gather_along(s, &b_rows, if adj_a { &rows } else { &cols }, 0)?;
    // Each entry's value gradient is a (1×k)·(k×1) product, laid out as
    // TensorFlow lays it out for each pair of adjoints.
    let (x, y, adj_x, adj_y) = match (adj_a, adj_b) {
        (false, false) => (-2, -2, false, true),
        (true, false) => (-1, -1, true, false),
        (false, true) => (-2, -1, false, false),
        (true, true) => (-1, -2, true, true),
    };
    let prod = ops::batch_mat_mul(
        s,
        &ops::expand_dims_at(s, &parts_a, x)?,
        &ops::expand_dims_at(s, &parts_b, y)?,
        adj_x,
        adj_y,
    )?;
    let values_grad = ops::squeeze(s, &prod, &[-2, -1])?;
    Ok(vec![None, Some(values_grad), None, Some(b_grad)])
}

fn sparse_to_dense_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (indices, output_shape, values) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let g = c.grad(0)?;
    // Scalar and vector indices address a vector: one index per row of a
    // `[n, rank]` matrix, as the kernel reads them (a no-op for a matrix).
    let rank = ops::size_typed(s, &output_shape, indices.dtype())?;
    let minus_one = ops::cast(s, &ops::index_vector(s, &[-1])?, indices.dtype())?;
    let matrix_shape = ops::concat_along(s, &[minus_one, ops::expand_dims_at(s, &rank, 0)?], 0)?;
    let matrix = ops::reshape(s, &indices, &matrix_shape)?;
    let gathered = ops::gather_nd(s, &g, &matrix)?;
    // `[n]`, summed to a scalar for a scalar value (whether known now or only at
    // run time).
    let values_grad = sum_to_operand(s, &values, &gathered)?.apply(s, &gathered)?;
    let total = ops::sum(s, &g, &shapes_all_axes(s, &g)?, false)?;
    let at_indices = ops::sum(s, &gathered, &shapes_all_axes(s, &gathered)?, false)?;
    let default_grad = ops::sub(s, &total, &at_indices)?;
    Ok(vec![None, None, Some(values_grad), Some(default_grad)])
}

fn shapes_all_axes(s: &Scope, x: &Output) -> Result<Output> {
    crate::gradients::math_grad::shapes::all_axes(s, x)
}

fn sparse_reorder_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (indices, shape) = (c.input(0)?, c.input(2)?);
    let num_entries = ops::dim_size(s, &indices, 0)?;
    let positions = ops::range(
        s,
        &ops::scalar(s, 0i32)?,
        &num_entries,
        &ops::scalar(s, 1i32)?,
    )?;
    let unordered = ops::SparseTensor {
        indices,
        values: positions,
        dense_shape: shape,
    };
    let ordered = ops::sparse_reorder(s, &unordered)?;
    let inverse = ops::invert_permutation(s, &ordered.values)?;
    let g = ops::gather_along(s, &c.grad(1)?, &inverse, 0)?;
    Ok(vec![None, Some(g), None])
}

fn sparse_dense_add_grad(c: &GradContext<'_>) -> Grads {
    let g = c.grad(0)?;
    let values = ops::gather_nd(c.scope, &g, &c.input(0)?)?;
    Ok(vec![None, Some(values), None, Some(g)])
}

/// `math_ops.reduced_shape` of a shape vector: `shape` (int64) with the `axes`
/// (int32 scalar or vector, negative from the end) set to 1, as int32.
fn reduced_shape(s: &Scope, shape: &Output, axes: &Output) -> Result<Output> {
    let shape = ops::cast(s, shape, DType::I32)?;
    let rank = ops::size(s, &shape)?;
    let axes = ops::floor_mod(s, &ops::add(s, axes, &rank)?, &rank)?;
    let all = ops::range(s, &ops::scalar(s, 0i32)?, &rank, &ops::scalar(s, 1i32)?)?;
    let ones = ops::ones_like(s, &axes)?;
    ops::dynamic_stitch(s, &[all, axes], &[shape, ones])
}

fn sparse_reduce_sum_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (indices, shape, axes) = (c.input(0)?, c.input(2)?, c.input(3)?);
    let kept = reduced_shape(s, &shape, &axes)?;
    let g = ops::reshape(s, &c.grad(0)?, &kept)?;
    let scale = ops::floor_div(s, &shape, &ops::cast(s, &kept, DType::I64)?)?;
    let at = ops::floor_div(s, &indices, &scale)?;
    Ok(vec![None, Some(ops::gather_nd(s, &g, &at)?), None, None])
}

/// Registers the sparse gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("SparseTensorDenseMatMul", sparse_dense_matmul_grad);
    r.register("SparseToDense", sparse_to_dense_grad);
    r.register("SparseReorder", sparse_reorder_grad);
    r.register("SparseTensorDenseAdd", sparse_dense_add_grad);
    r.register("SparseReduceSum", sparse_reduce_sum_grad);
}
