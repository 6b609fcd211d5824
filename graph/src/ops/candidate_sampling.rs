//! Candidate sampling (TensorFlow's `candidate_sampling_ops.cc`), behind
//! `nce_loss` and `sampled_softmax_loss`:
//!
//! - `UniformCandidateSampler` / `LogUniformCandidateSampler`: `num_sampled`
//!   classes drawn from `[0, range_max)` uniformly, or log-uniformly (Zipfian:
//!   `P(k) = log((k + 2) / (k + 1)) / log(range_max + 1)`), without repeats when
//!   `unique`; with the expected count of each true and each sampled class in such
//!   a draw (`p · num_sampled`, or `1 - (1 - p)^tries` for a unique draw that took
//!   `tries` attempts).
//! - `ComputeAccidentalHits`: where a sampled class equals one of a row's true
//!   classes, as sparse `(row, position in the sample, -FLT_MAX)` triples.
//!
//! The samplers are stateful (a Philox stream per kernel, from `seed`/`seed2`, that
//! continues across runs) and not differentiable: the losses stop gradients at
//! their outputs.

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{with_rank, with_value};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape};

/// The two range samplers actorflow has kernels for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CandidateSampler {
    /// `UniformCandidateSampler`.
    Uniform,
    /// `LogUniformCandidateSampler`.
    LogUniform,
}

impl CandidateSampler {
    /// The op's name.
    pub fn op_name(self) -> &'static str {
        match self {
            CandidateSampler::Uniform => "UniformCandidateSampler",
            CandidateSampler::LogUniform => "LogUniformCandidateSampler",
        }
    }
}

/// Registers the candidate-sampling ops.
pub fn register_all_ops(r: &OpRegistry) {
    for k in [CandidateSampler::Uniform, CandidateSampler::LogUniform] {
        r.register(
            OpDef::build(k.op_name())
                .input("true_classes: int64")
                .output("sampled_candidates: int64")
                .output("true_expected_count: float")
                .output("sampled_expected_count: float")
                .attr("num_true: int >= 1")
                .attr("num_sampled: int >= 1")
                .attr("unique: bool")
                .attr("range_max: int >= 1")
                .attr("seed: int = 0")
                .attr("seed2: int = 0")
                .stateful()
                .shape_fn(sampler_shape),
        );
    }
    r.register(
        OpDef::build("ComputeAccidentalHits")
            .input("true_classes: int64")
            .input("sampled_candidates: int64")
            .output("indices: int32")
            .output("ids: int64")
            .output("weights: float")
            .attr("num_true: int")
            .attr("seed: int = 0")
            .attr("seed2: int = 0")
            .shape_fn(accidental_hits_shape),
    );
}

/// `[num_sampled]`, `[batch, num_true]`, `[num_sampled]`; `true_classes` a matrix.
fn sampler_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let num_sampled: i64 = c.attr("num_sampled")?;
    let num_true: i64 = c.attr("num_true")?;
    let classes = with_rank(&c.input(0), 2)?;
    let sampled = Shape::from_dims(&[usize::try_from(num_sampled).ok()]);
    c.set_output(0, sampled.clone())?;
    c.set_output(
        1,
        Shape::from_dims(&[classes.dim(0), usize::try_from(num_true).ok()]),
    )?;
    c.set_output(2, sampled)
}

/// Three vectors of unknown length; `true_classes` a `[batch, num_true]` matrix and
/// `sampled_candidates` a vector.
fn accidental_hits_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let num_true: i64 = c.attr("num_true")?;
    let classes = with_rank(&c.input(0), 2)?;
    if let Ok(n) = usize::try_from(num_true) {
        with_value(classes.dim(1), n)?;
    }
    with_rank(&c.input(1), 1)?;
    for i in 0..3 {
        c.set_output(i, Shape::unknown_with_rank(1))?;
    }
    Ok(())
}

/// The outputs of a candidate sampler.
#[derive(Clone, Debug)]
pub struct SampledCandidates {
    /// `[num_sampled]` int64 classes.
    pub sampled_candidates: Output,
    /// `[batch, num_true]` float: the expected count of each true class.
    pub true_expected_count: Output,
    /// `[num_sampled]` float: the expected count of each sampled class.
    pub sampled_expected_count: Output,
}

/// What a candidate sampler draws.
#[derive(Clone, Copy, Debug)]
pub struct SamplerOptions {
    /// Columns of `true_classes`.
    pub num_true: i64,
    /// Classes to draw.
    pub num_sampled: i64,
    /// Draw without repeats (`num_sampled <= range_max` then).
    pub unique: bool,
    /// Classes are `[0, range_max)`.
    pub range_max: i64,
    /// Op seed (with `seed2`; both 0: a random seed).
    pub seed: i64,
    /// Second seed.
    pub seed2: i64,
}

/// `UniformCandidateSampler` or `LogUniformCandidateSampler` (`kind`) on the int64
/// `[batch, num_true]` matrix `true_classes` (TensorFlow's
/// `tf.random.uniform_candidate_sampler`, `log_uniform_candidate_sampler`).
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, ops, DType, Shape};
/// use actorflow_graph::ops::{CandidateSampler, SamplerOptions};
/// let s = Scope::new();
/// let labels = ops::placeholder(&s, DType::I64, Shape::from_dims(&[None, Some(1)])).unwrap();
/// let o = SamplerOptions { num_true: 1, num_sampled: 8, unique: true, range_max: 1000, seed: 1, seed2: 2 };
/// let c = ops::candidate_sampler(&s, CandidateSampler::LogUniform, &labels, &o).unwrap();
/// assert_eq!(c.sampled_candidates.shape(), Shape::known(&[8]));
/// assert_eq!(c.true_expected_count.shape(), Shape::from_dims(&[None, Some(1)]));
/// ```
pub fn candidate_sampler(
    s: &Scope,
    kind: CandidateSampler,
    true_classes: &Output,
    o: &SamplerOptions,
) -> Result<SampledCandidates> {
    let op = s
        .op(kind.op_name())
        .input(true_classes)
        .attr("num_true", o.num_true)
        .attr("num_sampled", o.num_sampled)
        .attr("unique", o.unique)
        .attr("range_max", o.range_max)
        .attr("seed", o.seed)
        .attr("seed2", o.seed2)
        .build()?;
    Ok(SampledCandidates {
        sampled_candidates: op.output(0)?,
        true_expected_count: op.output(1)?,
        sampled_expected_count: op.output(2)?,
    })
}

/// The accidental hits of a sample: `(indices, ids, weights)` where row
/// `indices[i]` of `true_classes` (`[batch, num_true]`) contains
/// `sampled_candidates[ids[i]]`, and `weights[i]` is `-FLT_MAX` (to add to those
/// logits). For a class sampled twice, the later position is named.
pub fn compute_accidental_hits(
    s: &Scope,
    true_classes: &Output,
    sampled_candidates: &Output,
    num_true: i64,
) -> Result<(Output, Output, Output)> {
    let op = s
        .op("ComputeAccidentalHits")
        .input(true_classes)
        .input(sampled_candidates)
        .attr("num_true", num_true)
        .build()?;
    Ok((op.output(0)?, op.output(1)?, op.output(2)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::placeholder;
    use crate::DType;

    #[test]
    fn sampler_and_hits_shapes() {
        let s = Scope::new();
        let labels = placeholder(&s, DType::I64, Shape::known(&[4, 2])).unwrap();
        let o = SamplerOptions {
            num_true: 2,
            num_sampled: 5,
            unique: false,
            range_max: 10,
            seed: 0,
            seed2: 0,
        };
        let c = candidate_sampler(&s, CandidateSampler::Uniform, &labels, &o).unwrap();
        assert_eq!(c.sampled_candidates.shape(), Shape::known(&[5]));
        assert_eq!(c.true_expected_count.shape(), Shape::known(&[4, 2]));
        assert_eq!(c.sampled_expected_count.dtype(), DType::F32);
        let vector = placeholder(&s, DType::I64, Shape::known(&[4])).unwrap();
        assert!(candidate_sampler(&s, CandidateSampler::LogUniform, &vector, &o).is_err());
        let (idx, ids, w) = compute_accidental_hits(&s, &labels, &c.sampled_candidates, 2).unwrap();
        assert_eq!(idx.shape(), Shape::unknown_with_rank(1));
        assert_eq!(
            (idx.dtype(), ids.dtype(), w.dtype()),
            (DType::I32, DType::I64, DType::F32)
        );
        let e = compute_accidental_hits(&s, &labels, &c.sampled_candidates, 3).unwrap_err();
        assert!(e.message().contains("Dimension must be 3 but is 2"), "{e}");
    }
}
