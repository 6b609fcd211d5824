//! The CPU kernel of `RandomShuffle` (TensorFlow's `random_shuffle_op.cc`): a
//! random permutation of its input's rows (dimension 0), for every dtype.
//!
//! Contract:
//! - An input with at most one element or at most one row (a scalar included) is
//!   returned as is, without drawing from the stream.
//! - Otherwise a run with `n` rows reserves `ceil((n - 1) / 4)` Philox blocks of the
//!   kernel's [`GuardedPhilox`] (TensorFlow's `ReserveSamples32(n - 1)`) and draws
//!   exactly `n - 1` words from them, one per Fisher–Yates swap (`i` with
//!   `i + word % (n - i)`), so for a given `seed`/`seed2` it reproduces TensorFlow's
//!   permutations bit for bit, run after run. Both seeds 0 means a random seed.
//! - Whole rows move: row `i` of the output is row `perm[i]` of the input, copied
//!   as one contiguous run of elements (`memcpy` for POD dtypes, reference-count
//!   bumps for strings and resource handles).

use std::marker::PhantomData;

use graph::{DType, Result, Status};

use super::philox::{GuardedPhilox, SingleSample};
use crate::cpu::array::elems::{dispatch_elem, Elem};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// `RandomShuffle` for the dtypes whose storage class is `E`; see the module docs.
pub struct RandomShuffleKernel<E> {
    gen: GuardedPhilox,
    dtype: DType,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> RandomShuffleKernel<E> {
    /// The permutation of `n >= 2` rows of the next run: `perm[i]` is the input row
    /// that becomes output row `i`.
    fn permutation(&self, n: usize) -> Result<Vec<usize>> {
        let n32 = u32::try_from(n).map_err(|_| {
            Status::invalid_argument(format!(
                "RandomShuffle supports at most 2^32 - 1 rows, got {n}"
            ))
        })?;
        let samples = u64::from(n32 - 1);
        let mut local = self.gen.reserve_samples128(samples.div_ceil(4));
        let mut words = SingleSample::new(&mut local);
        let mut perm: Vec<usize> = (0..n).collect();
        for i in 0..n - 1 {
            // n - i >= 2 and fits u32, as n does.
            let j = i + (words.next_u32() % (n32 - i as u32)) as usize;
            perm.swap(i, j);
        }
        Ok(perm)
    }
}

impl<E: Elem> OpKernel for RandomShuffleKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let rows = input.dims().first().copied().unwrap_or(0);
        if input.num_elements() <= 1 || rows <= 1 {
            let same = input.clone();
            return ctx.set_output(0, same);
        }
        let perm = self.permutation(rows)?;
        let per_row = input.num_elements() / rows;
        let src = E::view(input)?;
        let out = E::build(ctx.allocator(), self.dtype, input.shape().clone(), |out| {
            for (dst, &p) in out.chunks_exact_mut(per_row).zip(&perm) {
                dst.clone_from_slice(&src[p * per_row..(p + 1) * per_row]);
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make_shuffle(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    let gen = GuardedPhilox::new(c.attr("seed")?, c.attr("seed2")?);
    dispatch_elem!(dtype, E => Ok(Box::new(RandomShuffleKernel::<E> {
        gen,
        dtype,
        _e: PhantomData,
    }) as Box<dyn OpKernel>))
}

/// Registers `RandomShuffle` for every dtype (TensorFlow's `TF_CALL_ALL_TYPES`).
pub fn register(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("RandomShuffle", make_shuffle));
}

#[cfg(test)]
#[path = "shuffle_tests.rs"]
mod tests;
