//! `SparseTensorDenseAdd`: a dense tensor plus a sparse one of exactly its shape
//! (no broadcasting), as TensorFlow's kernel: the inputs' shapes and every index
//! are checked first, then the values are added into a copy of the dense operand
//! in entry order (repeated indices add up). Ranks 1 to 5 only, as in TensorFlow.

use graph::{DType, Result, Status};

use super::i64_values;
use crate::cpu::math::elem::Arith;
use crate::cpu::types::NUMERIC_DTYPES;
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

struct SparseTensorDenseAdd<T> {
    _t: std::marker::PhantomData<fn(T)>,
}

impl<T: Arith> OpKernel for SparseTensorDenseAdd<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (ix_t, vals_t, shape_t) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let b = ctx.input(3)?;
        if ix_t.rank() != 2 {
            return Err(Status::invalid_argument(format!(
                "Input a_indices should be a matrix but received shape: {}",
                ix_t.shape()
            )));
        }
        if vals_t.rank() != 1 || shape_t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "Inputs a_values and a_shape should be vectors but received shapes: {} and {}",
                vals_t.shape(),
                shape_t.shape()
            )));
        }
        let (nnz, ndims) = (ix_t.dims()[0], ix_t.dims()[1]);
        if vals_t.dims()[0] != nnz {
            return Err(Status::invalid_argument(format!(
                "Dimensions {nnz} and {} are not compatible",
                vals_t.dims()[0]
            )));
        }
        if shape_t.dims()[0] != ndims {
            return Err(Status::invalid_argument(format!(
                "Dimensions {ndims} and {} are not compatible",
                shape_t.dims()[0]
            )));
        }
        if shape_t.num_elements() != b.rank() {
            return Err(Status::invalid_argument(format!(
                "Two operands have different ranks; received: {} and {}",
                shape_t.num_elements(),
                b.rank()
            )));
        }
        let shape = i64_values(shape_t)?;
        for (i, (&a, &d)) in shape.iter().zip(b.dims()).enumerate() {
            if a != d as i64 {
                return Err(Status::invalid_argument(format!(
                    "Dimension {i} does not equal (no broadcasting is supported): sparse side \
                     {a} vs dense side {d}"
                )));
            }
        }
        let ix = i64_values(ix_t)?;
        for z in 0..nnz {
            for d in 0..ndims {
                let idx = ix[z * ndims + d];
                if idx < 0 || idx >= shape[d] {
                    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
                    return Err(Status::invalid_argument(format!(
                        "Sparse tensor has an invalid index on dimension {d}: a_indices({z},{d}) \
                         = {idx}, dense tensor shape: {}",
                        dims.join(" ")
                    )));
                }
            }
        }
        if !(1..=5).contains(&ndims) {
            return Err(Status::invalid_argument(format!(
                "Only tensors with ranks between 1 and 5 are currently supported.  Tensor rank: \
                 {ndims}"
            )));
        }
        let vals = vals_t.as_slice::<T>()?;
        let dims = b.dims().to_vec();
        let mut out = ctx.allocate(T::DTYPE, b.shape().clone())?;
        let o = out.as_mut_slice::<T>()?;
        o.copy_from_slice(b.as_slice::<T>()?);
        for (z, &v) in vals.iter().enumerate() {
            let flat = (0..ndims).fold(0usize, |acc, d| acc * dims[d] + ix[z * ndims + d] as usize);
            o[flat] = o[flat].tf_add(v);
        }
        ctx.set_output(0, out)
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(SparseTensorDenseAdd::<T> {
        _t: std::marker::PhantomData,
    }) as Box<dyn OpKernel>))
}

/// The kernel for every real number type, int32 or int64 indices.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("SparseTensorDenseAdd", make)
            .type_constraint("T", NUMERIC_DTYPES)
            .type_constraint("Tindices", &[DType::I32, DType::I64]),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::Tensor;

    #[test]
    fn adds_entries_into_the_dense_operand() {
        let ix = Tensor::new(&[3, 2], vec![0i32, 1, 1, 2, 0, 1]).unwrap();
        let y = run_op(
            "SparseTensorDenseAdd",
            &[],
            vec![
                ix.clone(),
                Tensor::vector(&[1i64, 2, 3]),
                Tensor::vector(&[2i32, 3]),
                Tensor::new(&[2, 3], vec![10i64; 6]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(
            y[0],
            Tensor::new(&[2, 3], vec![10i64, 14, 10, 10, 10, 12]).unwrap()
        );
        let e = run_op(
            "SparseTensorDenseAdd",
            &[],
            vec![
                ix,
                Tensor::vector(&[1i64, 2, 3]),
                Tensor::vector(&[2i32, 2]),
                Tensor::new(&[2, 3], vec![10i64; 6]).unwrap(),
            ],
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Dimension 1 does not equal (no broadcasting is supported): sparse side 2 vs dense \
             side 3"
        );
    }
}
