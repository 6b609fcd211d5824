//! Ops on sparse tensors (TensorFlow's `sparse_ops.cc`). A sparse tensor is the
//! triple TensorFlow's `SparseTensor` holds: `indices` (an int64 `[nnz, rank]`
//! matrix of coordinates), `values` (a `[nnz]` vector) and `dense_shape` (an int64
//! `[rank]` vector); [`SparseTensor`] bundles the three outputs.
//!
//! - `SparseTensorDenseMatMul`: a sparse matrix times a dense one (`adjoint_a`,
//!   `adjoint_b`).
//! - `SparseToDense`: a dense tensor of `output_shape` filled with
//!   `default_value`, `sparse_values` at `sparse_indices` (checked to be sorted,
//!   unique and in bounds with `validate_indices`).
//! - `SparseReorder`: the entries in row-major (lexicographic) index order.
//! - `SparseReduceSum` (dense output) and `SparseReduceSumSparse` (sparse output):
//!   sums over `reduction_axes`.
//! - `SparseTensorDenseAdd`: a sparse tensor added to a dense one of its shape.
//!
//! Their gradients (TensorFlow's `sparse_grad.py`) are in
//! [`crate::gradients::sparse_grad`].

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{merge_dim, shape_from_shape_input, with_rank};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// A sparse tensor as three graph outputs (TensorFlow's `tf.SparseTensor`).
#[derive(Clone, Debug)]
pub struct SparseTensor {
    /// `[nnz, rank]` int64 coordinates of the stored values.
    pub indices: Output,
    /// `[nnz]` values.
    pub values: Output,
    /// `[rank]` int64 dense shape.
    pub dense_shape: Output,
}

/// Registers the sparse ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("SparseTensorDenseMatMul")
            .input("a_indices: Tindices")
            .input("a_values: T")
            .input("a_shape: int64")
            .input("b: T")
            .output("product: T")
            .attr("T: type")
            .attr("Tindices: {int32, int64} = DT_INT64")
            .attr("adjoint_a: bool = false")
            .attr("adjoint_b: bool = false")
            .shape_fn(sparse_dense_matmul_shape),
    );
    r.register(
        OpDef::build("SparseToDense")
            .input("sparse_indices: Tindices")
            .input("output_shape: Tindices")
            .input("sparse_values: T")
            .input("default_value: T")
            .output("dense: T")
            .attr("validate_indices: bool = true")
            .attr("T: type")
            .attr("Tindices: {int32, int64}")
            .shape_fn(|c| {
                let out = shape_from_shape_input(c, 1)?;
                c.set_output(0, out)
            }),
    );
    r.register(
        OpDef::build("SparseReorder")
            .input("input_indices: int64")
            .input("input_values: T")
            .input("input_shape: int64")
            .output("output_indices: int64")
            .output("output_values: T")
            .attr("T: type")
            .shape_fn(|c| {
                let indices = with_rank(&c.input(0), 2)?;
                let values = with_rank(&c.input(1), 1)?;
                with_rank(&c.input(2), 1)?;
                c.set_output(0, indices)?;
                c.set_output(1, values)
            }),
    );
    let reduce = |name: &str| {
        OpDef::build(name)
            .input("input_indices: int64")
            .input("input_values: T")
            .input("input_shape: int64")
            .input("reduction_axes: int32")
            .attr("keep_dims: bool = false")
            .attr("T: numbertype")
    };
    r.register(
        reduce("SparseReduceSum")
            .output("output: T")
            .shape_fn(sparse_reduce_shape),
    );
    r.register(
        reduce("SparseReduceSumSparse")
            .output("output_indices: int64")
            .output("output_values: T")
            .output("output_shape: int64")
            // TensorFlow infers nothing here (not even ranks).
            .shape_fn(|_| Ok(())),
    );
    r.register(
        OpDef::build("SparseTensorDenseAdd")
            .input("a_indices: Tindices")
            .input("a_values: T")
            .input("a_shape: Tindices")
            .input("b: T")
            .output("output: T")
            .attr("T: numbertype")
            .attr("Tindices: {int32, int64}")
            .shape_fn(|c| {
                let b = c.input(3);
                c.set_output(0, b)
            }),
    );
}

/// `[a_rows, b_cols]` (after the adjoints), the inner dimensions merged; every
/// operand a matrix, the shape of `a` from the value of `a_shape` when constant.
fn sparse_dense_matmul_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(0), 2)?;
    with_rank(&c.input(1), 1)?;
    let a = with_rank(&shape_from_shape_input(c, 2)?, 2)?;
    let b = with_rank(&c.input(3), 2)?;
    let adjoint_a: bool = c.attr("adjoint_a")?;
    let adjoint_b: bool = c.attr("adjoint_b")?;
    let (a_rows, a_cols) = if adjoint_a {
        (a.dim(1), a.dim(0))
    } else {
        (a.dim(0), a.dim(1))
    };
    let (b_rows, b_cols) = if adjoint_b {
        (b.dim(1), b.dim(0))
    } else {
        (b.dim(0), b.dim(1))
    };
    merge_dim(a_cols, b_rows)?;
    c.set_output(0, Shape::from_dims(&[a_rows, b_cols]))
}

/// TensorFlow's `SparseReduceShapeFn`: with a constant shape and constant axes,
/// the shape without the reduced axes (`keep_dims`: they become 1); otherwise
/// unknown. An axis is taken as `(axis + rank) % rank` with C++'s truncating `%`,
/// as TensorFlow does here (an axis out of range is the kernel's error).
fn sparse_reduce_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let keep_dims: bool = c.attr("keep_dims")?;
    let shape = c.input_tensor(2).and_then(|t| t.as_slice::<i64>().ok());
    let axes = c.input_tensor(3).and_then(|t| t.as_slice::<i32>().ok());
    let (Some(shape), Some(axes)) = (shape, axes) else {
        return c.set_output(0, Shape::unknown());
    };
    let ndims = shape.len() as i64;
    if ndims == 0 {
        return Err(Status::invalid_argument(
            "Number of dims in shape tensor must not be 0",
        ));
    }
    let reduced: Vec<i64> = axes
        .iter()
        .map(|&a| (i64::from(a) + ndims) % ndims)
        .collect();
    let dim = |d: i64| usize::try_from(d).ok();
    let mut dims = Vec::with_capacity(shape.len());
    for (d, &size) in shape.iter().enumerate() {
        if !reduced.contains(&(d as i64)) {
            dims.push(dim(size));
        } else if keep_dims {
            dims.push(Some(1));
        }
    }
    c.set_output(0, Shape::from_dims(&dims))
}

fn sparse_op(s: &Scope, op: &str, inputs: &[&Output]) -> crate::builder::OpBuilder {
    inputs.iter().fold(s.op(op), |b, i| b.input(*i))
}

/// `SparseTensorDenseMatMul`: `op(a) · op(b)` for the sparse matrix `a` (indices,
/// values, shape) and the dense matrix `b`, `op` transposing where `adjoint_a` /
/// `adjoint_b` ask. `a`'s indices need not be ordered.
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let idx = ops::constant(&s, Tensor::new(&[2, 2], vec![0i64, 1, 2, 0]).unwrap()).unwrap();
/// let vals = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
/// let shape = ops::constant(&s, Tensor::vector(&[3i64, 4])).unwrap();
/// let b = ops::placeholder(&s, DType::F32, Shape::known(&[4, 5])).unwrap();
/// let a = ops::SparseTensor { indices: idx, values: vals, dense_shape: shape };
/// let y = ops::sparse_tensor_dense_mat_mul(&s, &a, &b, false, false).unwrap();
/// assert_eq!(y.shape(), Shape::known(&[3, 5]));
/// ```
pub fn sparse_tensor_dense_mat_mul(
    s: &Scope,
    a: &SparseTensor,
    b: &Output,
    adjoint_a: bool,
    adjoint_b: bool,
) -> Result<Output> {
    sparse_op(
        s,
        "SparseTensorDenseMatMul",
        &[&a.indices, &a.values, &a.dense_shape, b],
    )
    .attr("adjoint_a", adjoint_a)
    .attr("adjoint_b", adjoint_b)
    .build1()
}

/// `SparseToDense`: a tensor of shape `output_shape` (a vector) holding
/// `sparse_values` (a vector, or a scalar for every index) at `sparse_indices` (a
/// scalar, vector or `[n, rank]` matrix) and `default_value` (a scalar)
/// elsewhere. With `validate_indices` the indices must be sorted and unique
/// (`InvalidArgument` naming the first offender); out-of-bounds indices are an
/// error either way.
pub fn sparse_to_dense(
    s: &Scope,
    sparse_indices: &Output,
    output_shape: &Output,
    sparse_values: &Output,
    default_value: &Output,
    validate_indices: bool,
) -> Result<Output> {
    sparse_op(
        s,
        "SparseToDense",
        &[sparse_indices, output_shape, sparse_values, default_value],
    )
    .attr("validate_indices", validate_indices)
    .build1()
}

/// `SparseReorder`: `sp` with its entries sorted into row-major index order (a
/// no-op copy when they already are).
pub fn sparse_reorder(s: &Scope, sp: &SparseTensor) -> Result<SparseTensor> {
    let op = sparse_op(
        s,
        "SparseReorder",
        &[&sp.indices, &sp.values, &sp.dense_shape],
    )
    .build()?;
    Ok(SparseTensor {
        indices: op.output(0)?,
        values: op.output(1)?,
        dense_shape: sp.dense_shape.clone(),
    })
}

/// `SparseReduceSum`: the dense sum of `sp` over `reduction_axes` (an int32 scalar
/// or vector; negative axes count from the end; an empty vector reduces nothing,
/// giving the dense tensor with repeated indices summed), keeping the reduced
/// axes as 1 with `keep_dims`.
pub fn sparse_reduce_sum(
    s: &Scope,
    sp: &SparseTensor,
    reduction_axes: &Output,
    keep_dims: bool,
) -> Result<Output> {
    sparse_op(
        s,
        "SparseReduceSum",
        &[&sp.indices, &sp.values, &sp.dense_shape, reduction_axes],
    )
    .attr("keep_dims", keep_dims)
    .build1()
}

/// `SparseReduceSumSparse`: [`sparse_reduce_sum`] with a sparse result (only the
/// positions some entry of `sp` reduces into).
pub fn sparse_reduce_sum_sparse(
    s: &Scope,
    sp: &SparseTensor,
    reduction_axes: &Output,
    keep_dims: bool,
) -> Result<SparseTensor> {
    let op = sparse_op(
        s,
        "SparseReduceSumSparse",
        &[&sp.indices, &sp.values, &sp.dense_shape, reduction_axes],
    )
    .attr("keep_dims", keep_dims)
    .build()?;
    Ok(SparseTensor {
        indices: op.output(0)?,
        values: op.output(1)?,
        dense_shape: op.output(2)?,
    })
}

/// `SparseTensorDenseAdd`: the dense `b` plus the sparse `a` of the same shape
/// (repeated indices add up).
pub fn sparse_tensor_dense_add(s: &Scope, a: &SparseTensor, b: &Output) -> Result<Output> {
    sparse_op(
        s,
        "SparseTensorDenseAdd",
        &[&a.indices, &a.values, &a.dense_shape, b],
    )
    .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{constant, placeholder};
    use crate::{DType, Tensor};

    fn sparse(s: &Scope, nnz: usize, rank: usize, shape: Option<&[i64]>) -> SparseTensor {
        SparseTensor {
            indices: placeholder(s, DType::I64, Shape::known(&[nnz, rank])).unwrap(),
            values: placeholder(s, DType::F32, Shape::known(&[nnz])).unwrap(),
            dense_shape: match shape {
                Some(v) => constant(s, Tensor::vector(v)).unwrap(),
                None => placeholder(s, DType::I64, Shape::known(&[rank])).unwrap(),
            },
        }
    }

    #[test]
    fn matmul_shapes_follow_the_adjoints() {
        let s = Scope::new();
        let a = sparse(&s, 3, 2, Some(&[4, 5]));
        let b = placeholder(&s, DType::F32, Shape::known(&[5, 7])).unwrap();
        let y = sparse_tensor_dense_mat_mul(&s, &a, &b, false, false).unwrap();
        assert_eq!(y.shape(), Shape::known(&[4, 7]));
        let bt = placeholder(&s, DType::F32, Shape::known(&[7, 4])).unwrap();
        let y = sparse_tensor_dense_mat_mul(&s, &a, &bt, true, true).unwrap();
        assert_eq!(y.shape(), Shape::known(&[5, 7]));
        let e = sparse_tensor_dense_mat_mul(&s, &a, &bt, false, false).unwrap_err();
        assert!(
            e.message()
                .contains("Dimensions must be equal, but are 5 and 7"),
            "{e}"
        );
        let fed = sparse(&s, 3, 2, None);
        let y = sparse_tensor_dense_mat_mul(&s, &fed, &b, false, false).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, Some(7)]));
        let three = sparse(&s, 3, 3, Some(&[2, 4, 5]));
        let e = sparse_tensor_dense_mat_mul(&s, &three, &b, false, false).unwrap_err();
        assert!(
            e.message().contains("Shape must be rank 2 but is rank 3"),
            "{e}"
        );
    }

    #[test]
    fn reduce_reorder_to_dense_and_add_shapes() {
        let s = Scope::new();
        let sp = sparse(&s, 3, 3, Some(&[4, 5, 6]));
        let axes = constant(&s, Tensor::vector(&[1i32, -1])).unwrap();
        let y = sparse_reduce_sum(&s, &sp, &axes, false).unwrap();
        assert_eq!(y.shape(), Shape::known(&[4]));
        let y = sparse_reduce_sum(&s, &sp, &axes, true).unwrap();
        assert_eq!(y.shape(), Shape::known(&[4, 1, 1]));
        let fed = placeholder(&s, DType::I32, Shape::known(&[1])).unwrap();
        let y = sparse_reduce_sum(&s, &sp, &fed, false).unwrap();
        assert_eq!(y.shape(), Shape::unknown());
        let r = sparse_reduce_sum_sparse(&s, &sp, &axes, false).unwrap();
        assert_eq!(r.indices.shape(), Shape::unknown());
        let reordered = sparse_reorder(&s, &sp).unwrap();
        assert_eq!(reordered.indices.shape(), Shape::known(&[3, 3]));
        let out_shape = constant(&s, Tensor::vector(&[4i64, -1])).unwrap();
        let dflt = constant(&s, Tensor::scalar(0.0f32)).unwrap();
        let d = sparse_to_dense(&s, &sp.indices, &out_shape, &sp.values, &dflt, true).unwrap();
        assert_eq!(d.shape(), Shape::from_dims(&[Some(4), None]));
        let bad = constant(&s, Tensor::vector(&[4i64, -2])).unwrap();
        let e = sparse_to_dense(&s, &sp.indices, &bad, &sp.values, &dflt, true).unwrap_err();
        assert!(
            e.message()
                .contains("Invalid value in tensor used for shape: -2"),
            "{e}"
        );
        let b = placeholder(&s, DType::F32, Shape::known(&[4, 5, 6])).unwrap();
        let y = sparse_tensor_dense_add(&s, &sp, &b).unwrap();
        assert_eq!(y.shape(), Shape::known(&[4, 5, 6]));
    }
}
