//! The candidate samplers (TensorFlow's `candidate_sampler_ops.cc` and
//! `range_sampler.cc`): `UniformCandidateSampler`, `LogUniformCandidateSampler`,
//! and `ComputeAccidentalHits`.
//!
//! Each sampler kernel owns a Philox stream (from `seed`/`seed2`); a run reserves
//! `2048 · num_sampled` words of it and draws through a `SimplePhilox`:
//!
//! - uniform: `Uniform64(range_max)` (exact rejection sampling over 64-bit
//!   draws); probability `1 / range_max` (as a float);
//! - log-uniform: `floor(exp(u · ln(range_max + 1))) - 1` (mod `range_max`) for a
//!   double uniform `u`; probability `ln((k + 2) / (k + 1)) / ln(range_max + 1)`.
//!
//! With `unique`, draws repeat until `num_sampled` distinct classes are had; the
//! expected count of a class is then `-expm1(tries · log1p(-p))` for the number
//! of draws it took, else `p · num_sampled`, in float as TensorFlow computes
//! them. The samples and counts are TensorFlow's for the same seeds.

use std::collections::HashSet;

use graph::{Result, Status, Tensor, TensorShape};

use super::philox::{GuardedPhilox, SimplePhilox};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// How classes are drawn.
#[derive(Clone, Copy)]
enum Sampler {
    /// `UniformSampler`: `1 / range` as a float.
    Uniform { inv_range: f32 },
    /// `LogUniformSampler`: `ln(range + 1)`.
    LogUniform { log_range: f64 },
}

impl Sampler {
    fn sample(self, rng: &mut SimplePhilox<'_>, range: i64) -> i64 {
        match self {
            // `range` is positive: the draw is below it.
            Sampler::Uniform { .. } => rng.uniform64(range as u64) as i64,
            Sampler::LogUniform { log_range } => {
                let v = (rng.rand_double() * log_range).exp() as i64 - 1;
                v % range
            }
        }
    }

    fn probability(self, value: i64) -> f32 {
        match self {
            Sampler::Uniform { inv_range } => inv_range,
            Sampler::LogUniform { log_range } => {
                let v = value as f64;
                (((v + 2.0) / (v + 1.0)).ln() / log_range) as f32
            }
        }
    }
}

/// TensorFlow's `ExpectedCountHelper`.
fn expected_count(p: f32, batch_size: usize, tries: usize) -> f32 {
    if tries == batch_size {
        return p * batch_size as f32;
    }
    -((tries as f32) * (-p).ln_1p()).exp_m1()
}

struct CandidateSamplerKernel {
    num_true: usize,
    num_sampled: usize,
    unique: bool,
    range: i64,
    sampler: Sampler,
    gen: GuardedPhilox,
}

impl OpKernel for CandidateSamplerKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let classes = ctx.input(0)?;
        if classes.rank() != 2 {
            return Err(Status::invalid_argument("true_classes must be a matrix"));
        }
        let cols = classes.dims()[1];
        if cols != self.num_true {
            // TensorFlow's message names the two the other way round.
            return Err(Status::invalid_argument(format!(
                "true_classes must have num_true columns, expected: {cols} was: {}",
                self.num_true
            )));
        }
        if self.unique && self.num_sampled as i64 > self.range {
            return Err(Status::invalid_argument("Sampler's range is too small."));
        }
        let true_classes = classes.as_slice::<i64>()?;
        for &c in true_classes {
            if c < 0 || c >= self.range {
                return Err(Status::invalid_argument(format!(
                    "`true_candidate` out of range [0, {}), received {c}",
                    self.range
                )));
            }
        }
        let n = self.num_sampled;
        let mut gen = self.gen.reserve_samples32(2048 * n as u64);
        let mut rng = SimplePhilox::new(&mut gen);
        let mut sampled = Vec::with_capacity(n);
        let tries = if self.unique {
            let mut used = HashSet::with_capacity(n);
            let mut tries = 0usize;
            while sampled.len() < n {
                tries += 1;
                let v = self.sampler.sample(&mut rng, self.range);
                if used.insert(v) {
                    sampled.push(v);
                }
            }
            tries
        } else {
            for _ in 0..n {
                sampled.push(self.sampler.sample(&mut rng, self.range));
            }
            n
        };
        let count = |v: i64| expected_count(self.sampler.probability(v), n, tries);
        let alloc = ctx.allocator();
        let candidates =
            alloc.build::<i64>(TensorShape::vector(n), |o| o.copy_from_slice(&sampled))?;
        let true_counts = alloc.build::<f32>(classes.shape().clone(), |o| {
            for (o, &c) in o.iter_mut().zip(true_classes) {
                *o = count(c);
            }
        })?;
        let sampled_counts = alloc.build::<f32>(TensorShape::vector(n), |o| {
            for (o, &c) in o.iter_mut().zip(&sampled) {
                *o = count(c);
            }
        })?;
        ctx.set_output(0, candidates)?;
        ctx.set_output(1, true_counts)?;
        ctx.set_output(2, sampled_counts)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn make_sampler(c: &OpKernelConstruction<'_>, log_uniform: bool) -> Result<Box<dyn OpKernel>> {
    let positive = |name: &str| -> Result<usize> {
        let v: i64 = c.attr(name)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v >= 1)
            .ok_or_else(|| Status::invalid_argument(format!("{name} must be positive, got {v}")))
    };
    let (num_true, num_sampled) = (positive("num_true")?, positive("num_sampled")?);
    let range: i64 = c.attr("range_max")?;
    if range <= 0 {
        return Err(Status::invalid_argument("range_max must be positive"));
    }
    let sampler = if log_uniform {
        Sampler::LogUniform {
            log_range: (range as f64).ln_1p(),
        }
    } else {
        Sampler::Uniform {
            inv_range: (1.0 / range as f64) as f32,
        }
    };
    Ok(Box::new(CandidateSamplerKernel {
        num_true,
        num_sampled,
        unique: c.attr("unique")?,
        range,
        sampler,
        gen: GuardedPhilox::new(c.attr("seed")?, c.attr("seed2")?),
    }))
}

struct AccidentalHitsKernel {
    num_true: i64,
}

impl OpKernel for AccidentalHitsKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (classes, sampled) = (ctx.input(0)?, ctx.input(1)?);
        if classes.rank() != 2 || classes.dims()[1] as i64 != self.num_true {
            return Err(Status::invalid_argument(
                "true_candidates must be a batch_size * num_true matrix",
            ));
        }
        if sampled.rank() != 1 {
            return Err(Status::invalid_argument(
                "sampled_candidates must be a vector, which is typically an output from \
                 CandidateSampler",
            ));
        }
        // A class sampled more than once is named by its last position.
        let mut position = std::collections::HashMap::new();
        for (i, &v) in sampled.as_slice::<i64>()?.iter().enumerate() {
            position.insert(v, i as i64);
        }
        let cols = classes.dims()[1];
        let (mut rows, mut ids) = (Vec::new(), Vec::new());
        for (k, c) in classes.as_slice::<i64>()?.iter().enumerate() {
            if let Some(&p) = position.get(c) {
                rows.push((k / cols) as i32);
                ids.push(p);
            }
        }
        let weights = vec![-f32::MAX; rows.len()];
        ctx.set_output(0, Tensor::vector(&rows))?;
        ctx.set_output(1, Tensor::vector(&ids))?;
        ctx.set_output(2, Tensor::vector(&weights))
    }
}

/// Registers the samplers and `ComputeAccidentalHits`.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("UniformCandidateSampler", |c| {
        make_sampler(c, false)
    }));
    r.register(KernelDef::cpu("LogUniformCandidateSampler", |c| {
        make_sampler(c, true)
    }));
    r.register(KernelDef::cpu("ComputeAccidentalHits", |c| {
        Ok(Box::new(AccidentalHitsKernel {
            num_true: c.attr("num_true")?,
        }))
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_counts_follow_tensorflow() {
        assert_eq!(expected_count(0.25, 4, 4), 1.0);
        let p = 0.1f32;
        let want = -((7.0f32) * (-p).ln_1p()).exp_m1();
        assert_eq!(expected_count(p, 4, 7), want);
        let log = Sampler::LogUniform {
            log_range: 10f64.ln_1p(),
        };
        let total: f32 = (0..10).map(|k| log.probability(k)).sum();
        assert!((total - 1.0).abs() < 1e-6);
    }
}
