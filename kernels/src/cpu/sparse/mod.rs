//! CPU kernels of the sparse ops (TensorFlow's `sparse_*_op.cc`), on the
//! `(indices, values, dense_shape)` triples of `SparseTensor`:
//!
//! - [`matmul`] — `SparseTensorDenseMatMul`.
//! - [`to_dense`] — `SparseToDense`.
//! - [`reorder`] — `SparseReorder`.
//! - [`reduce`] — `SparseReduceSum`, `SparseReduceSumSparse`.
//! - [`dense_add`] — `SparseTensorDenseAdd`.
//!
//! This module holds what they share: reading index matrices and TensorFlow's
//! checks of a sparse tensor (`SparseTensor::Create`, `IndicesValid`,
//! `sparse_utils::ValidateSparseTensor`), with its messages.

pub mod dense_add;
pub mod matmul;
pub mod reduce;
pub mod reorder;
pub mod to_dense;

use std::borrow::Cow;

use graph::{DType, Result, Status, Tensor};

use crate::registry::KernelRegistry;

/// Registers the sparse kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    matmul::register(r);
    to_dense::register(r);
    reorder::register(r);
    reduce::register(r);
    dense_add::register(r);
}

/// The values of an int32 or int64 tensor as `i64`, borrowed when already int64.
pub(crate) fn i64_values(t: &Tensor) -> Result<Cow<'_, [i64]>> {
    match t.dtype() {
        DType::I64 => Ok(Cow::Borrowed(t.as_slice::<i64>()?)),
        DType::I32 => Ok(Cow::Owned(
            t.as_slice::<i32>()?.iter().map(|&v| i64::from(v)).collect(),
        )),
        d => Err(Status::invalid_argument(format!(
            "expected an int32 or int64 tensor, got {d}"
        ))),
    }
}

/// `[a,b,c]`: an index row as TensorFlow's `IndicesValid` prints it.
fn index_string(row: &[i64]) -> String {
    let parts: Vec<String> = row.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(","))
}

/// TensorFlow's `SparseTensor::IndicesValid` for the standard (row-major) order:
/// every index row of the `[nnz, shape.len()]` matrix `ix` within `shape`, each
/// strictly after the previous one; the first row that is not is named
/// ("out of bounds", then "out of order", then "repeated").
pub(crate) fn indices_valid(ix: &[i64], nnz: usize, shape: &[i64]) -> Result<()> {
    let ndims = shape.len();
    if ndims == 0 {
        // Every index of a scalar is the same (empty) one: a second entry repeats
        // it, which TensorFlow names with the bracket it leaves open.
        return match nnz {
            0 | 1 => Ok(()),
            _ => Err(Status::invalid_argument("indices[1] = [ is repeated")),
        };
    }
    let rows: Vec<&[i64]> = ix.chunks_exact(ndims).collect();
    for (n, row) in rows.iter().enumerate() {
        let valid = row.iter().zip(shape).all(|(&i, &d)| i >= 0 && i < d);
        let (mut increasing, mut different) = (true, n == 0);
        if n > 0 {
            for (&i, &p) in row.iter().zip(rows[n - 1]) {
                let diff = i.wrapping_sub(p);
                if diff > 0 {
                    different = true;
                }
                if !different && diff < 0 {
                    increasing = false;
                }
            }
        }
        let index = format!("indices[{n}] = {}", index_string(row));
        if !valid {
            let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
            return Err(Status::invalid_argument(format!(
                "{index} is out of bounds: need 0 <= index < [{}]",
                dims.join(",")
            )));
        }
        if !increasing {
            return Err(Status::invalid_argument(format!(
                "{index} is out of order. Many sparse ops require sorted indices.\n    \
                 Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n"
            )));
        }
        if !different {
            return Err(Status::invalid_argument(format!("{index} is repeated")));
        }
    }
    Ok(())
}

/// The `nnz` entries of the `[nnz, ndims]` index matrix `ix` sorted by the
/// dimensions `order` (lexicographically, `order[0]` first), as a permutation of
/// `0..nnz`. The sort is stable (TensorFlow's `std::sort` is too for up to 16
/// entries, and leaves the order of equal indices unspecified beyond).
pub(crate) fn sorted_entries(ix: &[i64], nnz: usize, ndims: usize, order: &[usize]) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..nnz).collect();
    perm.sort_by(|&a, &b| {
        let (ra, rb) = (
            &ix[a * ndims..(a + 1) * ndims],
            &ix[b * ndims..(b + 1) * ndims],
        );
        order
            .iter()
            .map(|&d| ra[d].cmp(&rb[d]))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    perm
}

/// TensorFlow's `SparseTensor::Create` checks of an index matrix (int64),
/// values and a shape of `shape_rank` dimensions.
pub(crate) fn check_sparse_tensor(ix: &Tensor, vals: &Tensor, shape_rank: usize) -> Result<()> {
    if vals.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "vals must be a vec, but got: {}",
            vals.shape()
        )));
    }
    let rows = ix.dims().first().copied().unwrap_or(1);
    if rows != vals.dims()[0] {
        return Err(Status::invalid_argument(format!(
            "indices and values rows (indexing dimension) must match. (indices = {rows}, values = {})",
            vals.dims()[0]
        )));
    }
    if ix.rank() != 2 {
        return Err(Status::invalid_argument(format!(
            "indices must be a matrix, but got: {}",
            ix.shape()
        )));
    }
    if ix.dims()[1] != shape_rank {
        return Err(Status::invalid_argument(
            "Order length must be SparseTensor rank.",
        ));
    }
    Ok(())
}

/// `sparse_utils::ValidateSparseTensor`'s shape checks (`kNone` index
/// validation).
pub(crate) fn validate_sparse_shapes(ix: &Tensor, vals: &Tensor, shape: &Tensor) -> Result<()> {
    if ix.rank() != 2 {
        return Err(Status::invalid_argument(format!(
            "Sparse indices must be rank 2 but is rank {}",
            ix.rank()
        )));
    }
    if vals.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "Sparse values must be rank 1 but is rank {}",
            vals.rank()
        )));
    }
    if shape.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "Sparse shape must be rank 1 but is rank {}",
            shape.rank()
        )));
    }
    let (nnz, ndims) = (ix.dims()[0], ix.dims()[1]);
    if vals.dims()[0] != nnz {
        return Err(Status::invalid_argument(format!(
            "Number of elements in indices ({nnz}) and values ({}) do not match",
            vals.dims()[0]
        )));
    }
    if shape.num_elements() != ndims {
        return Err(Status::invalid_argument(format!(
            "Index rank ({ndims}) and shape rank ({}) do not match",
            shape.num_elements()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_validity_names_the_first_offender() {
        assert!(indices_valid(&[0, 1, 1, 0, 1, 2], 3, &[2, 3]).is_ok());
        let e = indices_valid(&[0, 1, 0, 0], 2, &[2, 3]).unwrap_err();
        assert!(
            e.message()
                .starts_with("indices[1] = [0,0] is out of order."),
            "{e}"
        );
        let e = indices_valid(&[0, 1, 0, 1], 2, &[2, 3]).unwrap_err();
        assert_eq!(e.message(), "indices[1] = [0,1] is repeated");
        let e = indices_valid(&[0, 1, -1, 5], 2, &[2, 3]).unwrap_err();
        assert_eq!(
            e.message(),
            "indices[1] = [-1,5] is out of bounds: need 0 <= index < [2,3]"
        );
        assert!(indices_valid(&[], 1, &[]).is_ok());
        assert!(indices_valid(&[], 2, &[]).is_err());
    }

    #[test]
    fn sorting_by_dimension_order_is_stable() {
        let ix = [1, 0, 0, 2, 1, 0, 0, 1];
        assert_eq!(sorted_entries(&ix, 4, 2, &[0, 1]), vec![3, 1, 0, 2]);
        assert_eq!(sorted_entries(&ix, 4, 2, &[1, 0]), vec![0, 2, 3, 1]);
        assert_eq!(sorted_entries(&[], 3, 0, &[]), vec![0, 1, 2]);
    }
}
