//! CPU kernels of the stateful random ops (TensorFlow's `random_op.cc`):
//! `RandomUniform`, `RandomStandardNormal`, `TruncatedNormal` and
//! `RandomUniformInt`, which reproduce TensorFlow's output bit for bit for a given
//! `seed`/`seed2`.
//!
//! - [`philox`]: the Philox4x32-10 generator and the guarded per-kernel stream.
//! - [`distributions`]: uniform, normal, truncated normal and uniform integer
//!   groups, and the fill loop.
//! - [`shuffle`]: `RandomShuffle`, a permutation of its input's rows.
//! - [`multinomial`]: class indices drawn from logits (`Multinomial`).
//! - [`candidate_sampler`]: the samplers behind `nce_loss`
//!   (`UniformCandidateSampler`, `LogUniformCandidateSampler`) and
//!   `ComputeAccidentalHits`.
//!
//! Each kernel owns a [`GuardedPhilox`]; every run reserves `256` blocks per output
//! value (as TensorFlow does) and fills from the start of its reservation, so a
//! second run continues the stream with the next values. Both seeds 0 means a
//! random seed.

pub mod candidate_sampler;
pub mod distributions;
pub mod multinomial;
pub mod philox;
pub mod shuffle;

use graph::{DType, Result, Status, Tensor, TensorShape};

use crate::cpu::types::FLOAT_DTYPES;
use crate::dispatch_float;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use distributions::{fill, Distribution, Normal, RandomInt, TruncatedNormal, Uniform, UniformInt};
pub use philox::{GuardedPhilox, Philox4x32, SimplePhilox};

/// Blocks of 128 bits TensorFlow reserves per output value.
const SAMPLES_PER_OUTPUT: u64 = 256;

/// The output shape held by a `shape` input: a vector of `int32` or `int64`
/// non-negative dimensions with fewer than 2^63 elements in all.
pub fn shape_from_tensor(t: &Tensor) -> Result<TensorShape> {
    if t.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "shape must be a vector of {{int32,int64}}, got shape {}",
            t.shape()
        )));
    }
    let dims: Vec<i64> = match t.dtype() {
        DType::I32 => t.as_slice::<i32>()?.iter().map(|&d| d as i64).collect(),
        DType::I64 => t.as_slice::<i64>()?.to_vec(),
        _ => {
            return Err(Status::invalid_argument(
                "shape must be a vector of {int32,int64}.",
            ))
        }
    };
    let mut n: i64 = 1;
    for &d in &dims {
        if d < 0 {
            return Err(Status::invalid_argument(format!(
                "Dimension {d} must be >= 0"
            )));
        }
        n = n.checked_mul(d).ok_or_else(|| {
            let s: Vec<String> = dims.iter().map(i64::to_string).collect();
            Status::invalid_argument(format!(
                "Shape [{}] would have more than 2**63 - 1 elements",
                s.join(",")
            ))
        })?;
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    Ok(TensorShape::new(&shape))
}

/// A random op whose distribution is fixed when the kernel is built.
pub struct RandomKernel<D: Distribution> {
    gen: GuardedPhilox,
    dist: D,
}

impl<D: Distribution> OpKernel for RandomKernel<D> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape = shape_from_tensor(ctx.input(0)?)?;
        let n = shape.num_elements() as u64;
        // The generator advances only once the output is had, as TensorFlow
        // allocates before it reserves samples.
        let out = ctx.allocator().build::<D::Elem>(shape, |data| {
            let base = self.gen.reserve_random_outputs(n, SAMPLES_PER_OUTPUT);
            fill(&self.dist, base, data)
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// `RandomUniformInt`, whose range arrives as inputs.
pub struct RandomUniformIntKernel<I> {
    gen: GuardedPhilox,
    _i: std::marker::PhantomData<fn(I)>,
}

impl<I: RandomInt> OpKernel for RandomUniformIntKernel<I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (minval, maxval) = (ctx.input(1)?, ctx.input(2)?);
        for (name, t) in [("minval", minval), ("maxval", maxval)] {
            if t.rank() != 0 {
                return Err(Status::invalid_argument(format!(
                    "{name} must be 0-D, got shape {}",
                    t.shape()
                )));
            }
        }
        let (lo, hi) = (minval.scalar_value::<I>()?, maxval.scalar_value::<I>()?);
        let shape = shape_from_tensor(ctx.input(0)?)?;
        let n = shape.num_elements();
        if n == 0 {
            // Checked after the early exit, as in TensorFlow: zero impossible
            // values are fine.
            return ctx.set_output(0, ctx.allocate(I::DTYPE, shape)?);
        }
        if lo >= hi {
            return Err(Status::invalid_argument(format!(
                "Need minval < maxval, got {lo} >= {hi}"
            )));
        }
        let dist = UniformInt::new(lo, hi);
        let out = ctx.allocator().build::<I>(shape, |data| {
            let base = self
                .gen
                .reserve_random_outputs(n as u64, SAMPLES_PER_OUTPUT);
            fill(&dist, base, data)
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn seeded(c: &OpKernelConstruction<'_>) -> Result<GuardedPhilox> {
    Ok(GuardedPhilox::new(c.attr("seed")?, c.attr("seed2")?))
}

fn make_uniform(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (dtype, gen): (DType, _) = (c.attr("dtype")?, seeded(c)?);
    dispatch_float!(dtype, T => Ok(Box::new(RandomKernel { gen, dist: Uniform::<T>::new() }) as Box<dyn OpKernel>))
}

fn make_normal(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (dtype, gen): (DType, _) = (c.attr("dtype")?, seeded(c)?);
    dispatch_float!(dtype, T => Ok(Box::new(RandomKernel { gen, dist: Normal::<T>::new() }) as Box<dyn OpKernel>))
}

fn make_truncated(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (dtype, gen): (DType, _) = (c.attr("dtype")?, seeded(c)?);
    dispatch_float!(dtype, T => {
        Ok(Box::new(RandomKernel { gen, dist: TruncatedNormal::<T>::new() }) as Box<dyn OpKernel>)
    })
}

fn make_uniform_int(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (dtype, gen): (DType, _) = (c.attr("Tout")?, seeded(c)?);
    use std::marker::PhantomData as P;
    match dtype {
        DType::I32 => Ok(Box::new(RandomUniformIntKernel::<i32> { gen, _i: P })),
        DType::I64 => Ok(Box::new(RandomUniformIntKernel::<i64> { gen, _i: P })),
        other => Err(Status::unimplemented(format!(
            "RandomUniformInt does not support {other}"
        ))),
    }
}

/// Registers the random kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("RandomUniform", make_uniform).type_constraint("dtype", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("RandomStandardNormal", make_normal).type_constraint("dtype", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("TruncatedNormal", make_truncated).type_constraint("dtype", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("RandomUniformInt", make_uniform_int)
            .type_constraint("Tout", &[DType::I32, DType::I64]),
    );
    shuffle::register(r);
    multinomial::register(r);
    candidate_sampler::register(r);
}

#[cfg(test)]
mod tests;
