//! `Multinomial` (`tf.random.categorical`): `num_samples` class indices per row of
//! a `[batch, classes]` matrix of logits, as TensorFlow's CPU kernel draws them.
//!
//! Each run reserves `batch · ceil4(num_samples) · 2 · 256` blocks of the
//! kernel's Philox stream. Row by row, the unnormalized CDF of
//! `exp(logit - max)` (in double, over the finite logits; a non-finite logit
//! adds nothing) is searched (`upper_bound`) for `u · total` with `u` a double
//! uniform from two words of a `SimplePhilox` over the reserved stream; the rows
//! draw from one sequence, in order. With no finite logit the total is 0 and
//! every sample is `classes`, as in TensorFlow.
//!
//! This is TensorFlow's stream whenever its kernel runs in one shard, i.e. when
//! `batch · 50 · (num_samples · log2(classes) + classes)` is below Eigen's
//! threshold for going parallel (about 2·10⁵ cycles); above it TensorFlow splits
//! the rows among its threads, each shard skipping to `start_row ·
//! (num_samples + 3) / 4` blocks, so its samples then depend on its thread pool.
//! Also, TensorFlow computes the `exp`s with Eigen's vectorized approximation: a
//! uniform landing within an ulp or so of a CDF boundary could pick the
//! neighbouring class.

use graph::{bf16, f16, DType, Result, Status, TensorShape, TensorType};

use super::philox::{GuardedPhilox, SimplePhilox};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// A logit type: compared in its own type, read as a double.
trait Logit: TensorType + Copy + PartialOrd {
    fn lowest() -> Self;
    fn finite(self) -> bool;
    fn as_f64(self) -> f64;
}

macro_rules! logit {
    ($($t:ty => $lowest:expr, $fin:expr, $f64:expr);*) => {$(impl Logit for $t {
        fn lowest() -> Self { $lowest }
        fn finite(self) -> bool { let f: fn($t) -> bool = $fin; f(self) }
        fn as_f64(self) -> f64 { let f: fn($t) -> f64 = $f64; f(self) }
    })*};
}

logit!(
    f32 => f32::MIN, f32::is_finite, f64::from;
    f64 => f64::MIN, f64::is_finite, |x| x;
    f16 => f16::MIN, f16::is_finite, |x: f16| f64::from(x.to_f32());
    bf16 => bf16::MIN, bf16::is_finite, |x: bf16| f64::from(x.to_f32())
);

/// An output index type.
trait Index: TensorType + Copy {
    fn from_usize(v: usize) -> Self;
}

impl Index for i32 {
    fn from_usize(v: usize) -> i32 {
        v as i32
    }
}

impl Index for i64 {
    fn from_usize(v: usize) -> i64 {
        v as i64
    }
}

struct MultinomialKernel<T, O> {
    gen: GuardedPhilox,
    _t: std::marker::PhantomData<fn(T, O)>,
}

impl<T: Logit, O: Index> OpKernel for MultinomialKernel<T, O> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (logits, n) = (ctx.input(0)?, ctx.input(1)?);
        if logits.rank() != 2 {
            return Err(Status::invalid_argument(format!(
                "logits should be a matrix, got shape {}",
                logits.shape()
            )));
        }
        if n.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "num_samples should be a scalar, got shape {}",
                n.shape()
            )));
        }
        let num_samples = n.scalar_value::<i32>()?;
        let samples = usize::try_from(num_samples).map_err(|_| {
            Status::invalid_argument(format!(
                "num_samples should be non-negative, got {num_samples}"
            ))
        })?;
        let (batch, classes) = (logits.dims()[0], logits.dims()[1]);
        if i32::try_from(batch).is_err() {
            return Err(Status::invalid_argument("batch_size cannot exceed max int"));
        }
        if i32::try_from(classes).is_err() {
            return Err(Status::invalid_argument(
                "num_classes cannot exceed max int",
            ));
        }
        if classes == 0 {
            return Err(Status::invalid_argument(
                "num_classes should be positive, got 0",
            ));
        }
        let shape = TensorShape::new(&[batch, samples]);
        if batch * samples == 0 {
            return ctx.set_output(0, ctx.allocate(O::DTYPE, shape)?);
        }
        let x = logits.as_slice::<T>()?;
        let alloc = ctx.allocator();
        let mut cdf = alloc.vec(classes, 0.0f64)?;
        let out = alloc.build::<O>(shape, |out| {
            // Two words per sample, rounded up to four samples per row.
            let per_row = (samples as u64).div_ceil(4) * 4 * 2;
            let mut gen = self.gen.reserve_random_outputs(batch as u64 * per_row, 256);
            let mut rng = SimplePhilox::new(&mut gen);
            for (row, out_row) in x.chunks_exact(classes).zip(out.chunks_exact_mut(samples)) {
                let max = row
                    .iter()
                    .filter(|v| v.finite())
                    .fold(T::lowest(), |m, &v| if v > m { v } else { m })
                    .as_f64();
                let mut total = 0.0f64;
                for (c, &v) in cdf.iter_mut().zip(row) {
                    if v.finite() {
                        total += (v.as_f64() - max).exp();
                    }
                    *c = total;
                }
                for o in out_row.iter_mut() {
                    let target = rng.rand_double() * total;
                    *o = O::from_usize(cdf.partition_point(|&c| c <= target));
                }
            }
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (t, o): (DType, DType) = (c.attr("T")?, c.attr("output_dtype")?);
    let gen = GuardedPhilox::new(c.attr("seed")?, c.attr("seed2")?);
    macro_rules! k {
        ($t:ty, $o:ty) => {
            Ok(Box::new(MultinomialKernel::<$t, $o> {
                gen,
                _t: std::marker::PhantomData,
            }))
        };
    }
    match (t, o) {
        (DType::F32, DType::I64) => k!(f32, i64),
        (DType::F32, DType::I32) => k!(f32, i32),
        (DType::F64, DType::I64) => k!(f64, i64),
        (DType::F64, DType::I32) => k!(f64, i32),
        (DType::F16, DType::I64) => k!(f16, i64),
        (DType::F16, DType::I32) => k!(f16, i32),
        (DType::BF16, DType::I64) => k!(bf16, i64),
        (DType::BF16, DType::I32) => k!(bf16, i32),
        (t, o) => Err(Status::unimplemented(format!(
            "Multinomial does not support {t} logits with {o} output"
        ))),
    }
}

/// The CPU kernel for float logits (half, bfloat16, float, double), as TensorFlow
/// registers it.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("Multinomial", make)
            .type_constraint("T", &[DType::F16, DType::BF16, DType::F32, DType::F64])
            .type_constraint("output_dtype", &[DType::I32, DType::I64]),
    );
}
