//! `ReverseSequence` (TensorFlow's `reverse_sequence_op.cc`): along `seq_dim`, the
//! first `seq_lengths[b]` entries of each slice `b` along `batch_dim` reversed, the
//! rest copied. Checks and messages are TensorFlow's.

use std::marker::PhantomData;

use graph::{DType, Result, Status};

use super::copy::strides_of;
use super::elems::{dispatch_elem, dispatch_index, Elem, IndexElem, INDEX_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// `ReverseSequence` for element storage `E` and length type `L`.
struct ReverseSequenceKernel<E, L> {
    seq_dim: i64,
    batch_dim: i64,
    _t: PhantomData<fn(E, L)>,
}

impl<E: Elem, L: IndexElem> OpKernel for ReverseSequenceKernel<E, L> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let lens_t = ctx.input(1)?;
        if lens_t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "seq_lengths must be 1-dim, not {}",
                lens_t.rank()
            )));
        }
        let (sd, bd) = (self.seq_dim, self.batch_dim);
        if sd == bd {
            return Err(Status::invalid_argument(format!(
                "batch_dim == seq_dim == {sd}"
            )));
        }
        let rank = x.rank() as i64;
        if sd >= rank {
            return Err(Status::invalid_argument(format!(
                "seq_dim must be < input rank ( {sd} vs. {rank})"
            )));
        }
        if bd >= rank {
            return Err(Status::invalid_argument(format!(
                "batch_dim must be < input rank ( {bd} vs. {rank})"
            )));
        }
        let (Ok(sd), Ok(bd)) = (usize::try_from(sd), usize::try_from(bd)) else {
            return Err(Status::invalid_argument(format!(
                "seq_dim ({sd}) and batch_dim ({bd}) must be non-negative"
            )));
        };
        let dims = x.dims();
        let lens: Vec<i64> = lens_t.as_slice::<L>()?.iter().map(|v| v.to_i64()).collect();
        if lens.len() != dims[bd] {
            return Err(Status::invalid_argument(format!(
                "Length of seq_lengths != input.dims({bd}), ({} vs. {})",
                lens.len(),
                dims[bd]
            )));
        }
        for (d, &l) in lens.iter().enumerate() {
            if l < 0 {
                return Err(Status::invalid_argument(format!("seq_lens({d}) < 0")));
            }
            if l > dims[sd] as i64 {
                return Err(Status::invalid_argument(format!(
                    "seq_lens({d}) > input.dims({sd})"
                )));
            }
        }
        let strides = strides_of(dims);
        let (ss, bs) = (strides[sd], strides[bd]);
        let (sn, bn) = (dims[sd], dims[bd]);
        let src = E::view(x)?;
        let out = E::build(ctx.allocator(), x.dtype(), x.shape().clone(), |o| {
            for (i, d) in o.iter_mut().enumerate() {
                let s = (i / ss) % sn;
                let len = lens[(i / bs) % bn] as usize;
                let from = if s < len {
                    i + (len - 1 - s) * ss - s * ss
                } else {
                    i
                };
                d.clone_from(&src[from]);
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (seq_dim, batch_dim): (i64, i64) = (c.attr("seq_dim")?, c.attr("batch_dim")?);
    let tl: DType = c.attr("Tlen")?;
    dispatch_elem!(c.attr::<DType>("T")?, E => {
        dispatch_index!(tl, L => Ok(Box::new(ReverseSequenceKernel::<E, L> { seq_dim, batch_dim, _t: PhantomData }) as Box<dyn OpKernel>))
    })
}

/// Registers ReverseSequence.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("ReverseSequence", make).type_constraint("Tlen", INDEX_DTYPES));
}

#[cfg(test)]
mod tests {
    use graph::{AttrValue, Tensor};

    use crate::testutil::run_op;

    #[test]
    fn reverses_each_prefix() {
        let x = Tensor::new(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        let attrs = [("seq_dim", AttrValue::I(1)), ("batch_dim", AttrValue::I(0))];
        let out = run_op(
            "ReverseSequence",
            &attrs,
            vec![x, Tensor::vector(&[2i64, 3])],
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[2, 1, 3, 6, 5, 4]);
    }
}
