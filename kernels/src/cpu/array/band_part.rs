//! `MatrixBandPart` (TensorFlow's `matrix_band_part_op.cc`): each innermost matrix
//! with the entries outside the band `-num_lower ..= num_upper` around the
//! diagonal zeroed (a negative bound keeps that whole triangle).

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor};

use super::elems::{dispatch_elem, int_scalar, Elem, INDEX_DTYPES};
use crate::cpu::types::POD_DTYPES;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// `MatrixBandPart` for element storage `E`.
struct BandPartKernel<E>(PhantomData<fn(E)>);

fn bound(t: &Tensor, what: &str, limit: usize, of: &str) -> Result<i64> {
    if t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "{what} must be scalar, got shape {}",
            t.shape()
        )));
    }
    let v = int_scalar(t)?;
    if v > limit as i64 {
        return Err(Status::invalid_argument(format!(
            "{what} must be negative or less or equal to number of {of} ({limit}) got: {v}"
        )));
    }
    Ok(v)
}

impl<E: Elem> OpKernel for BandPartKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.rank() < 2 {
            return Err(Status::invalid_argument(format!(
                "input must be at least 2-dim, received shape: {}",
                x.shape()
            )));
        }
        let d = x.dims();
        let (rows, cols) = (d[d.len() - 2], d[d.len() - 1]);
        let lower = bound(ctx.input(1)?, "num_lower", rows, "rows")?;
        let upper = bound(ctx.input(2)?, "num_upper", cols, "columns")?;
        let src = E::view(x)?;
        let out = E::build(ctx.allocator(), x.dtype(), x.shape().clone(), |o| {
            for (i, (dst, s)) in o.iter_mut().zip(src).enumerate() {
                let (m, n) = (
                    ((i / cols.max(1)) % rows.max(1)) as i64,
                    (i % cols.max(1)) as i64,
                );
                if (lower < 0 || m - n <= lower) && (upper < 0 || n - m <= upper) {
                    dst.clone_from(s);
                }
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(BandPartKernel::<E>(PhantomData)) as Box<dyn OpKernel>))
}

/// Registers MatrixBandPart.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("MatrixBandPart", make)
            .type_constraint("T", POD_DTYPES)
            .type_constraint("Tindex", INDEX_DTYPES),
    );
}

#[cfg(test)]
mod tests {
    use graph::Tensor;

    use crate::testutil::run_op;

    #[test]
    fn keeps_the_band() {
        let x = Tensor::new(&[3, 3], (1..=9).collect::<Vec<i32>>()).unwrap();
        let out = run_op(
            "MatrixBandPart",
            &[],
            vec![x, Tensor::scalar(0i64), Tensor::scalar(-1i64)],
        )
        .unwrap();
        assert_eq!(
            out[0].as_slice::<i32>().unwrap(),
            &[1, 2, 3, 0, 5, 6, 0, 0, 9]
        );
    }
}
