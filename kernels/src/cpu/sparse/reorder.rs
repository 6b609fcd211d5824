//! `SparseReorder`: the entries of a sparse tensor in row-major (lexicographic)
//! index order. Indices are not checked against the shape (some ops mark missing
//! values with -1); entries already in order come back as they are. Equal
//! indices keep their relative order (a stable sort, which TensorFlow's `std::sort`
//! also is for up to 16 entries; beyond, TensorFlow leaves their order unspecified).

use std::marker::PhantomData;

use graph::{DType, Result, TensorShape};

use super::{indices_valid, sorted_entries, validate_sparse_shapes};
use crate::cpu::array::elems::{dispatch_elem, Elem, POD_STRING_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

struct SparseReorder<E> {
    dtype: DType,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for SparseReorder<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (ix_t, vals_t, shape_t) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        validate_sparse_shapes(ix_t, vals_t, shape_t)?;
        let (nnz, ndims) = (ix_t.dims()[0], ix_t.dims()[1]);
        let ix = ix_t.as_slice::<i64>()?;
        let shape = shape_t.as_slice::<i64>()?;
        if indices_valid(ix, nnz, shape).is_ok() {
            let (ix_t, vals_t) = (ix_t.clone(), vals_t.clone());
            ctx.set_output(0, ix_t)?;
            return ctx.set_output(1, vals_t);
        }
        let order: Vec<usize> = (0..ndims).collect();
        let perm = sorted_entries(ix, nnz, ndims, &order);
        let vals = E::view(vals_t)?;
        let out_ix = ctx
            .allocator()
            .build::<i64>(TensorShape::new(&[nnz, ndims]), |o| {
                for (k, &p) in perm.iter().enumerate() {
                    o[k * ndims..(k + 1) * ndims].copy_from_slice(&ix[p * ndims..(p + 1) * ndims]);
                }
            })?;
        let out_vals = E::build(ctx.allocator(), self.dtype, TensorShape::vector(nnz), |o| {
            for (k, &p) in perm.iter().enumerate() {
                o[k] = vals[p].clone();
            }
            Ok(())
        })?;
        ctx.set_output(0, out_ix)?;
        ctx.set_output(1, out_vals)
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    dispatch_elem!(dtype, E => Ok(Box::new(SparseReorder::<E> { dtype, _e: PhantomData }) as Box<dyn OpKernel>))
}

/// The kernel for every dtype actorflow has.
pub(super) fn register(r: &mut KernelRegistry) {
    let mut types = POD_STRING_DTYPES.to_vec();
    types.push(DType::Resource);
    r.register(KernelDef::cpu("SparseReorder", make).type_constraint("T", &types));
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::Tensor;

    #[test]
    fn sorts_entries_row_major() {
        let ix = Tensor::new(&[3, 2], vec![1i64, 0, 0, 2, 0, 1]).unwrap();
        let vals = Tensor::from_strings(&[3], vec!["a", "b", "c"]).unwrap();
        let out = run_op(
            "SparseReorder",
            &[],
            vec![ix, vals, Tensor::vector(&[2i64, 3])],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[3, 2], vec![0i64, 1, 0, 2, 1, 0]).unwrap()
        );
        assert_eq!(
            out[1],
            Tensor::from_strings(&[3], vec!["c", "b", "a"]).unwrap()
        );
        let e = run_op(
            "SparseReorder",
            &[],
            vec![
                Tensor::new(&[1, 2], vec![0i64, 0]).unwrap(),
                Tensor::vector(&[1.0f32, 2.0]),
                Tensor::vector(&[2i64, 3]),
            ],
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Number of elements in indices (1) and values (2) do not match"
        );
    }
}
