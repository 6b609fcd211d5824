//! The work a fused contraction does on its finished output rows (TensorFlow's
//! `fused_eigen_output_kernels.h`): a per-channel affine step (`BiasAdd`, or an
//! inference `FusedBatchNorm`) along the last dimension, then an activation.
//! `_FusedMatMul` and `_FusedConv2D` share it.
//!
//! Each step is computed as TensorFlow's output kernels write it, and as the
//! kernels it replaces compute it, so that a fused node and the ops it replaces
//! agree bit for bit where their products do:
//! - `BiasAdd`: `x + bias[c]`;
//! - `FusedBatchNorm`: `(x - mean[c]) * factor[c] + offset[c]`, with
//!   `factor = (1 / sqrt(variance + epsilon)) * scale` computed once per call,
//!   as the `FusedBatchNorm` kernel does;
//! - `Relu` and `Relu6` as Eigen's `cwiseMax(0)`/`cwiseMin(6)` (NaN stays NaN),
//!   `Elu` as `x < 0 ? exp(x) - 1 : x`, `LeakyRelu` as `x < 0 ? alpha * x : x`,
//!   `Tanh` and `Sigmoid` as the math kernels' functions.

use std::borrow::Cow;

use rayon::prelude::*;

use crate::cpu::math::elem::FloatOps;
use crate::cpu::math::unary::UnaryFn;
use crate::cpu::math::unary_ops::{SigmoidFn, TanhFn};
use crate::cpu::nn::NnFloat;

/// The activation applied after the affine step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FusedActivation {
    /// None.
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, 0), 6)`.
    Relu6,
    /// `exp(x) - 1` below 0.
    Elu,
    /// `alpha * x` below 0 (`leakyrelu_alpha`).
    LeakyRelu(f32),
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
}

impl FusedActivation {
    /// The activation a `fused_ops` entry names, among `allowed`
    /// (`leakyrelu_alpha` for `LeakyRelu`).
    pub fn named(op: &str, allowed: &[&str], leakyrelu_alpha: f32) -> Option<FusedActivation> {
        if !allowed.contains(&op) {
            return None;
        }
        Some(match op {
            "Relu" => FusedActivation::Relu,
            "Relu6" => FusedActivation::Relu6,
            "Elu" => FusedActivation::Elu,
            "LeakyRelu" => FusedActivation::LeakyRelu(leakyrelu_alpha),
            "Tanh" => FusedActivation::Tanh,
            "Sigmoid" => FusedActivation::Sigmoid,
            _ => return None,
        })
    }
}

/// A float type an epilogue computes in.
pub trait EpilogueFloat: NnFloat + FloatOps {}
impl<T: NnFloat + FloatOps> EpilogueFloat for T {}

/// `max(x, 0)` as Eigen's `cwiseMax(0)`: NaN stays NaN.
#[inline(always)]
fn relu<T: EpilogueFloat>(x: T) -> T {
    if x < T::zero() {
        T::zero()
    } else {
        x
    }
}

/// `min(max(x, 0), 6)` as Eigen's `cwiseMax(0).cwiseMin(6)`.
#[inline(always)]
fn relu6<T: EpilogueFloat>(x: T) -> T {
    let (y, six) = (relu(x), T::constant(6.0));
    if six < y {
        six
    } else {
        y
    }
}

/// `x < 0 ? exp(x) - 1 : x`.
#[inline(always)]
fn elu<T: EpilogueFloat>(x: T) -> T {
    if x < T::zero() {
        x.exp() - T::one()
    } else {
        x
    }
}

/// The per-channel step, one value per output channel.
#[derive(Clone, Debug)]
pub enum Channels<'a, T: Clone> {
    /// `x + bias[c]`.
    Bias(Cow<'a, [T]>),
    /// `(x - mean[c]) * factor[c] + offset[c]`.
    Normalize {
        /// The estimated means.
        mean: Cow<'a, [T]>,
        /// `(1 / sqrt(variance + epsilon)) * scale`.
        factor: Vec<T>,
        /// The offsets.
        offset: Cow<'a, [T]>,
    },
}

impl<'a, T: EpilogueFloat> Channels<'a, T> {
    /// A `FusedBatchNorm` step from its four vectors (equal lengths) and
    /// `epsilon`.
    pub fn normalize(
        scale: &[T],
        offset: Cow<'a, [T]>,
        mean: Cow<'a, [T]>,
        variance: &[T],
        epsilon: f32,
    ) -> Channels<'a, T> {
        let eps = T::from_attr_f32(epsilon);
        let factor = variance
            .iter()
            .zip(scale)
            .map(|(&v, &s)| (T::one() / (v + eps).sqrt()) * s)
            .collect();
        Channels::Normalize {
            mean,
            factor,
            offset,
        }
    }

    /// The number of channels.
    pub fn len(&self) -> usize {
        match self {
            Channels::Bias(b) => b.len(),
            Channels::Normalize { mean, .. } => mean.len(),
        }
    }

    /// Whether there are no channels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The affine step and the activation applied to finished output rows.
#[derive(Clone, Debug)]
pub struct Epilogue<'a, T: Clone> {
    channels: Channels<'a, T>,
    activation: FusedActivation,
}

impl<'a, T: EpilogueFloat> Epilogue<'a, T> {
    /// `activation(channels(x))`.
    pub fn new(channels: Channels<'a, T>, activation: FusedActivation) -> Epilogue<'a, T> {
        Epilogue {
            channels,
            activation,
        }
    }

    /// The number of channels (the length of every row).
    pub fn channels(&self) -> usize {
        self.channels.len()
    }

    /// `f(step(x))` over every row of `rows` (whole rows of channels).
    #[inline(always)]
    fn map(&self, rows: &mut [T], f: impl Fn(T) -> T) {
        match &self.channels {
            Channels::Bias(bias) => {
                for row in rows.chunks_exact_mut(bias.len()) {
                    for (o, &b) in row.iter_mut().zip(bias.iter()) {
                        *o = f(*o + b);
                    }
                }
            }
            Channels::Normalize {
                mean,
                factor,
                offset,
            } => {
                let per_channel = || mean.iter().zip(factor.iter()).zip(offset.iter());
                for row in rows.chunks_exact_mut(mean.len()) {
                    for (o, ((&m, &k), &b)) in row.iter_mut().zip(per_channel()) {
                        *o = f((*o - m) * k + b);
                    }
                }
            }
        }
    }

    /// Applies the step and the activation to whole rows, one activation
    /// `match` per call.
    pub fn apply(&self, rows: &mut [T]) {
        if self.channels.is_empty() {
            return;
        }
        match self.activation {
            FusedActivation::Identity => self.map(rows, |x| x),
            FusedActivation::Relu => self.map(rows, relu),
            FusedActivation::Relu6 => self.map(rows, relu6),
            FusedActivation::Elu => self.map(rows, elu),
            FusedActivation::LeakyRelu(alpha) => {
                // `x < 0 ? x * alpha : x` (TensorFlow's output kernel; its
                // standalone LeakyRelu tests `x > 0` instead).
                let (alpha, zero) = (T::from_attr_f32(alpha), T::zero());
                self.map(rows, |x| if x < zero { x * alpha } else { x })
            }
            FusedActivation::Tanh => self.map(rows, <TanhFn as UnaryFn<T, T>>::apply),
            FusedActivation::Sigmoid => self.map(rows, <SigmoidFn as UnaryFn<T, T>>::apply),
        }
    }

    /// [`apply`](Self::apply) over `out`, on rayon's threads when the product
    /// ran on several (`threads > 1`) and `out` has at least [`PAR_FINISH_ELEMS`]
    /// elements.
    pub fn finish(&self, out: &mut [T], threads: usize) {
        let n = self.channels.len();
        if threads < 2 || out.len() < PAR_FINISH_ELEMS || n == 0 {
            self.apply(out);
            return;
        }
        let rows = (out.len() / n).div_ceil(threads).max(1);
        out.par_chunks_mut(rows * n).for_each(|c| self.apply(c));
    }
}

/// Outputs with at least this many elements are finished on every rayon thread
/// (below it, waking the threads costs more than the pass).
pub const PAR_FINISH_ELEMS: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn bias(b: &[f32], act: FusedActivation) -> Epilogue<'static, f32> {
        Epilogue::new(Channels::Bias(Cow::Owned(b.to_vec())), act)
    }

    #[test]
    fn bias_then_each_activation() {
        let cases: [(FusedActivation, [f32; 4]); 5] = [
            (FusedActivation::Identity, [-1.5, 7.0, 1.5, -3.0]),
            (FusedActivation::Relu, [0.0, 7.0, 1.5, 0.0]),
            (FusedActivation::Relu6, [0.0, 6.0, 1.5, 0.0]),
            (FusedActivation::LeakyRelu(0.5), [-0.75, 7.0, 1.5, -1.5]),
            (
                FusedActivation::Elu,
                [(-1.5f32).exp() - 1.0, 7.0, 1.5, (-3f32).exp() - 1.0],
            ),
        ];
        for (act, want) in cases {
            let mut rows = [-2.0, 5.0, 1.0, -5.0];
            bias(&[0.5, 2.0], act).apply(&mut rows);
            assert_eq!(rows, want, "{act:?}");
        }
        let mut nan = [f32::NAN, 1.0];
        bias(&[0.0, 0.0], FusedActivation::Relu6).apply(&mut nan);
        assert!(nan[0].is_nan());
    }

    #[test]
    fn batch_norm_is_the_inference_formula() {
        // variance 3 + epsilon 1 = 4: factor = scale / 2.
        let e = Epilogue::new(
            Channels::normalize(
                &[2.0f64, 4.0],
                Cow::Owned(vec![1.0, -1.0]),
                Cow::Owned(vec![10.0, 0.0]),
                &[3.0, 3.0],
                1.0,
            ),
            FusedActivation::Relu,
        );
        let mut rows = [12.0, 3.0, 8.0, -1.0];
        e.apply(&mut rows);
        assert_eq!(rows, [3.0, 5.0, 0.0, 0.0]);
        assert_eq!(e.channels(), 2);
    }

    #[test]
    fn finishing_on_threads_equals_one_pass() {
        let n = 7;
        let out: Vec<f32> = (0..n * (2 * PAR_FINISH_ELEMS / n + 3))
            .map(|i| (i % 23) as f32 - 11.0)
            .collect();
        let e = bias(
            &[0.25, -1.0, 3.0, 0.0, 2.0, -0.5, 1.0],
            FusedActivation::Elu,
        );
        let (mut a, mut b) = (out.clone(), out);
        e.apply(&mut a);
        e.finish(&mut b, 4);
        assert_eq!(a, b);
    }
}
