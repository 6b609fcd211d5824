//! Fused batch normalization, after TensorFlow's `fused_batch_norm_op.cc` (CPU):
//! `FusedBatchNorm{,V2,V3}` and `FusedBatchNormGrad{,V2,V3}`, training and
//! inference, channel-last (`NHWC`, `NDHWC`) and channel-first (`NCHW`, `NCDHW`).
//!
//! `x` and `y` are `T` (`float`, `half`, `bfloat16`); statistics and every
//! intermediate are `U` = `float`, with sums accumulated in `double`. In training
//! the normalization uses the biased batch variance, the `batch_variance` output
//! is Bessel-corrected (`n / max(n - 1, 1)`), and an `exponential_avg_factor`
//! other than 1 blends both outputs into the running `mean`/`variance`;
//! `reserve_space_1`/`_2` hold the batch mean and the biased variance, which
//! `FusedBatchNormGrad` reads back. In inference TensorFlow leaves the reserve
//! spaces uninitialised; here they hold the given mean and variance. V3's
//! `reserve_space_3` is a scalar 0, the gradients' reserve outputs empty vectors,
//! as TensorFlow's CPU kernels. An empty `x` gives NaN statistics, as TensorFlow.
//!
//! Channels are independent: the statistics of channel-last tensors are summed
//! over row blocks on rayon's threads and combined; channel-first tensors are
//! handled one channel per task.

use std::marker::PhantomData;

use graph::{bf16, f16, DType, Result, Status, Tensor, TensorType};
use rayon::prelude::*;

use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// Tensors with at least this many elements are normalized on rayon's threads.
const PAR_MIN_ELEMS: usize = 1 << 15;

/// An element type of `x`: converts to and from `float`.
pub trait BnElem: TensorType + Copy + Send + Sync {
    /// Widens to `float`.
    fn to_f32(self) -> f32;
    /// Rounds a `float`.
    fn from_f32(v: f32) -> Self;
}

impl BnElem for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> f32 {
        v
    }
}

impl BnElem for f16 {
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(v: f32) -> f16 {
        f16::from_f32(v)
    }
}

impl BnElem for bf16 {
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
}

/// How a batch-norm tensor lays out its channels: `outer` blocks of `channels`
/// runs of `inner` elements (`inner` is 1 for channel-last formats).
#[derive(Clone, Copy, Debug)]
struct Layout {
    outer: usize,
    channels: usize,
    inner: usize,
}

impl Layout {
    fn of(dims: &[usize], channel_first: bool) -> Layout {
        if channel_first {
            Layout {
                outer: dims[0],
                channels: dims[1],
                inner: dims[2..].iter().product(),
            }
        } else {
            let channels = dims[dims.len() - 1];
            Layout {
                outer: dims[..dims.len() - 1].iter().product(),
                channels,
                inner: 1,
            }
        }
    }

    /// Elements per channel.
    fn per_channel(&self) -> usize {
        self.outer * self.inner
    }

    /// `f(channel, flat index)` summed per channel, in `double`.
    fn channel_sums(&self, f: impl Fn(usize, usize) -> f64 + Sync) -> Vec<f64> {
        let c = self.channels;
        let len = self.outer * c * self.inner;
        if c == 0 {
            return vec![];
        }
        if self.inner == 1 {
            let add_rows = |mut acc: Vec<f64>, rows: std::ops::Range<usize>| {
                for row in rows {
                    for (k, a) in acc.iter_mut().enumerate() {
                        *a += f(k, row * c + k);
                    }
                }
                acc
            };
            if len >= PAR_MIN_ELEMS {
                let rows_per_task = (PAR_MIN_ELEMS / 4 / c).max(1);
                let tasks = self.outer.div_ceil(rows_per_task);
                (0..tasks)
                    .into_par_iter()
                    .map(|t| {
                        let end = ((t + 1) * rows_per_task).min(self.outer);
                        add_rows(vec![0.0; c], t * rows_per_task..end)
                    })
                    .reduce(
                        || vec![0.0; c],
                        |mut a, b| {
                            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                            a
                        },
                    )
            } else {
                add_rows(vec![0.0; c], 0..self.outer)
            }
        } else {
            let one = |k: usize| -> f64 {
                (0..self.outer)
                    .map(|n| {
                        let start = (n * c + k) * self.inner;
                        (start..start + self.inner).map(|i| f(k, i)).sum::<f64>()
                    })
                    .sum()
            };
            if len >= PAR_MIN_ELEMS {
                (0..c).into_par_iter().map(one).collect()
            } else {
                (0..c).map(one).collect()
            }
        }
    }

    /// `y[i] = (x[i] - mean[k]) · factor[k] + offset[k]` for the channel `k` of
    /// `i`, reading `x` from `xs` or, when `None`, from `y` itself (`x`'s buffer
    /// forwarded). Zipped slices, no per-element index arithmetic or bounds
    /// checks, so the loops vectorize.
    fn normalize<T: BnElem>(
        &self,
        xs: Option<&[T]>,
        y: &mut [T],
        mean: &[f32],
        factor: &[f32],
        offset: &[f32],
    ) {
        let (c, inner) = (self.channels, self.inner);
        if c == 0 || inner == 0 || y.is_empty() {
            return;
        }
        let norm = |x: T, m: f32, f: f32, b: f32| T::from_f32((x.to_f32() - m) * f + b);
        // A block is whole rows of channels (channel-last) or one channel's run.
        let block = if inner == 1 {
            c * (PAR_MIN_ELEMS / 8 / c).max(1)
        } else {
            inner
        };
        let (mean, factor, offset) = (&mean[..c], &factor[..c], &offset[..c]);
        let body = |(j, o): (usize, &mut [T])| {
            let x = xs.map(|x| &x[j * block..j * block + o.len()]);
            if inner == 1 {
                for (r, o) in o.chunks_exact_mut(c).enumerate() {
                    let per_channel = mean.iter().zip(factor).zip(offset);
                    match x {
                        Some(x) => {
                            let x = &x[r * c..(r + 1) * c];
                            for ((o, &x), ((&m, &f), &b)) in o.iter_mut().zip(x).zip(per_channel) {
                                *o = norm(x, m, f, b);
                            }
                        }
                        None => {
                            for (o, ((&m, &f), &b)) in o.iter_mut().zip(per_channel) {
                                *o = norm(*o, m, f, b);
                            }
                        }
                    }
                }
            } else {
                let k = j % c;
                let (m, f, b) = (mean[k], factor[k], offset[k]);
                match x {
                    Some(x) => o
                        .iter_mut()
                        .zip(x)
                        .for_each(|(o, &x)| *o = norm(x, m, f, b)),
                    None => o.iter_mut().for_each(|o| *o = norm(*o, m, f, b)),
                }
            }
        };
        if y.len() >= PAR_MIN_ELEMS {
            y.par_chunks_mut(block).enumerate().for_each(body);
        } else {
            y.chunks_mut(block).enumerate().for_each(body);
        }
    }

    /// `out[i] = f(channel of i, i)` over the whole tensor.
    fn map<O: Send>(&self, out: &mut [O], f: impl Fn(usize, usize) -> O + Sync) {
        let (c, inner) = (self.channels, self.inner);
        let chunk = if inner == 1 { c } else { inner };
        if chunk == 0 {
            return;
        }
        let body = |(j, o): (usize, &mut [O])| {
            let base = j * chunk;
            for (k, v) in o.iter_mut().enumerate() {
                let ch = if inner == 1 { k } else { j % c };
                *v = f(ch, base + k);
            }
        };
        if out.len() >= PAR_MIN_ELEMS {
            out.par_chunks_mut(chunk).enumerate().for_each(body);
        } else {
            out.chunks_mut(chunk).enumerate().for_each(body);
        }
    }
}

/// Whether `data_format` puts channels first, or `InvalidArgument`.
fn channel_first(c: &OpKernelConstruction<'_>) -> Result<bool> {
    let f: String = c.attr("data_format")?;
    match f.as_str() {
        "NHWC" | "NDHWC" => Ok(false),
        "NCHW" | "NCDHW" => Ok(true),
        _ => Err(Status::invalid_argument("Invalid data format")),
    }
}

fn vector_of(t: &Tensor, what: &str) -> Result<()> {
    if t.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "{what} must be 1-dimensional{:?}",
            t.dims()
        )));
    }
    Ok(())
}

fn channels_match(t: &Tensor, c: usize, prefix: &str, what: &str) -> Result<()> {
    if t.num_elements() != c {
        return Err(Status::invalid_argument(format!(
            "{prefix}{what} must have the same number of elements as the channels of x, got {} and {c}",
            t.num_elements()
        )));
    }
    Ok(())
}

fn f32_vec(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.as_slice::<f32>()?.to_vec())
}

/// `FusedBatchNorm`, `FusedBatchNormV2` and `FusedBatchNormV3`.
pub struct FusedBatchNormKernel<T> {
    epsilon: f32,
    factor: f32,
    is_training: bool,
    channel_first: bool,
    v3: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: BnElem> OpKernel for FusedBatchNormKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.rank() != 4 && x.rank() != 5 {
            return Err(Status::invalid_argument(format!(
                "input must be 4 or 5-dimensional{:?}",
                x.dims()
            )));
        }
        let (scale, offset, mean_in, var_in) =
            (ctx.input(1)?, ctx.input(2)?, ctx.input(3)?, ctx.input(4)?);
        vector_of(scale, "scale")?;
        vector_of(offset, "offset")?;
        vector_of(mean_in, "estimated_mean")?;
        vector_of(var_in, "estimated_variance")?;
        let l = Layout::of(x.dims(), self.channel_first);
        let c = l.channels;
        channels_match(scale, c, "", "scale")?;
        channels_match(offset, c, "", "offset")?;
        let uses_running = !self.is_training || self.factor != 1.0;
        if uses_running {
            let prefix = if self.is_training {
                "When exponential_avg_factor != 1, "
            } else {
                "When is_training=false, "
            };
            channels_match(mean_in, c, prefix, "mean")?;
            channels_match(var_in, c, prefix, "variance")?;
        }
        let (scale, offset) = (f32_vec(scale)?, f32_vec(offset)?);
        let (running_mean, running_var) = (f32_vec(mean_in)?, f32_vec(var_in)?);
        let xs = x.as_slice::<T>()?;
        let n = l.per_channel();
        let x_shape = x.shape().clone();
        let reserve3 = Tensor::scalar(0.0f32);
        if x.num_elements() == 0 {
            let y = ctx.allocate(T::DTYPE, x_shape)?;
            let nan = Tensor::vector(&vec![f32::NAN; c]);
            ctx.set_output(0, y)?;
            ctx.set_output(1, nan.clone())?;
            ctx.set_output(2, nan)?;
            ctx.set_output(3, Tensor::vector(&vec![0.0f32; c]))?;
            ctx.set_output(4, Tensor::vector(&vec![0.0f32; c]))?;
            if self.v3 {
                ctx.set_output(5, reserve3)?;
            }
            return Ok(());
        }
        let (mean, var) = if self.is_training {
            let inv_n = 1.0 / n as f64;
            let mean: Vec<f32> = l
                .channel_sums(|_, i| xs[i].to_f32() as f64)
                .into_iter()
                .map(|s| (s * inv_n) as f32)
                .collect();
            let var: Vec<f32> = l
                .channel_sums(|k, i| {
                    let d = (xs[i].to_f32() - mean[k]) as f64;
                    d * d
                })
                .into_iter()
                .map(|s| (s * inv_n) as f32)
                .collect();
            (mean, var)
        } else {
            (running_mean.clone(), running_var.clone())
        };
        let factor: Vec<f32> = var
            .iter()
            .zip(&scale)
            .map(|(&v, &s)| (1.0 / (v + self.epsilon).sqrt()) * s)
            .collect();
        // `y` takes `x`'s buffer when nothing else holds it (TensorFlow's
        // kernel forwards it too); `x` is read from it then.
        let mut y = ctx.forward_input_or_allocate(0, T::DTYPE, &x_shape)?;
        let xs = match ctx.input(0) {
            Ok(x) => Some(x.as_slice::<T>()?),
            Err(_) => None,
        };
        l.normalize(xs, y.as_mut_slice::<T>()?, &mean, &factor, &offset);
        let (out_mean, out_var) = if self.is_training {
            let bessel = n as f32 / (n.saturating_sub(1).max(1)) as f32;
            let corrected: Vec<f32> = var.iter().map(|&v| v * bessel).collect();
            if self.factor == 1.0 {
                (mean.clone(), corrected)
            } else {
                let (f, keep) = (self.factor, 1.0 - self.factor);
                let blend = |old: &[f32], new: &[f32]| -> Vec<f32> {
                    old.iter()
                        .zip(new)
                        .map(|(&o, &v)| keep * o + f * v)
                        .collect()
                };
                (blend(&running_mean, &mean), blend(&running_var, &corrected))
            }
        } else {
            (running_mean.clone(), running_var.clone())
        };
        ctx.set_output(0, y)?;
        ctx.set_output(1, Tensor::vector(&out_mean))?;
        ctx.set_output(2, Tensor::vector(&out_var))?;
        ctx.set_output(3, Tensor::vector(&mean))?;
        ctx.set_output(4, Tensor::vector(&var))?;
        if self.v3 {
            ctx.set_output(5, reserve3)?;
        }
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// `FusedBatchNormGrad`, `FusedBatchNormGradV2` and `FusedBatchNormGradV3`.
/// Training: with `m`, `v` the saved batch mean and biased variance and
/// `r = rsqrt(v + epsilon)`, `dx = scale r (dy - mean(dy) - (x - m) r^2
/// mean(dy (x - m)))`, `dscale = sum(dy (x - m) r)`, `doffset = sum(dy)`.
/// Inference (channel-last only, as TensorFlow's CPU kernel): `dx = dy scale r`
/// with the population statistics.
pub struct FusedBatchNormGradKernel<T> {
    epsilon: f32,
    is_training: bool,
    channel_first: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: BnElem> OpKernel for FusedBatchNormGradKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (dy, x) = (ctx.input(0)?, ctx.input(1)?);
        for t in [dy, x] {
            if t.rank() != 4 && t.rank() != 5 {
                return Err(Status::invalid_argument(format!(
                    "input must be 4 or 5-dimensional{:?}",
                    t.dims()
                )));
            }
        }
        let (scale, m_in, v_in) = (ctx.input(2)?, ctx.input(3)?, ctx.input(4)?);
        vector_of(scale, "scale")?;
        vector_of(m_in, "saved mean")?;
        vector_of(v_in, "saved variance")?;
        if x.dims() != dy.dims() {
            return Err(Status::invalid_argument(format!(
                "x and y_backprop must have same shape, but x has shape {:?} and y_backprop has shape {:?}",
                x.dims(),
                dy.dims()
            )));
        }
        let l = Layout::of(x.dims(), self.channel_first);
        let c = l.channels;
        channels_match(scale, c, "", "scale")?;
        channels_match(m_in, c, "", "reserve_space_1")?;
        channels_match(v_in, c, "", "reserve_space_2")?;
        if !self.is_training && self.channel_first {
            return Err(Status::invalid_argument(
                "The implementation of FusedBatchNormGrad with is_training=False only support \
                 NHWC tensor format for now.",
            ));
        }
        let (scale, mean, var) = (f32_vec(scale)?, f32_vec(m_in)?, f32_vec(v_in)?);
        let (xs, gs) = (x.as_slice::<T>()?, dy.as_slice::<T>()?);
        let n = l.per_channel();
        let r: Vec<f32> = var
            .iter()
            .map(|&v| 1.0 / (v + self.epsilon).sqrt())
            .collect();
        let sum_dy = l.channel_sums(|_, i| gs[i].to_f32() as f64);
        let sum_dy_xc =
            l.channel_sums(|k, i| (gs[i].to_f32() as f64) * ((xs[i].to_f32() - mean[k]) as f64));
        let x_dims = x.dims().to_vec();
        let mut dx = ctx.allocate(T::DTYPE, &x_dims[..])?;
        if n > 0 {
            let inv_n = 1.0 / n as f64;
            if self.is_training {
                let mean_dy: Vec<f32> = sum_dy.iter().map(|&s| (s * inv_n) as f32).collect();
                let coef2: Vec<f32> = (0..c)
                    .map(|k| (r[k] as f64 * r[k] as f64 * sum_dy_xc[k] * inv_n) as f32)
                    .collect();
                let coef1: Vec<f32> = (0..c).map(|k| scale[k] * r[k]).collect();
                l.map(dx.as_mut_slice::<T>()?, |k, i| {
                    let xc = xs[i].to_f32() - mean[k];
                    T::from_f32(coef1[k] * (gs[i].to_f32() - mean_dy[k] - xc * coef2[k]))
                });
            } else {
                let coef: Vec<f32> = (0..c).map(|k| scale[k] * r[k]).collect();
                l.map(dx.as_mut_slice::<T>()?, |k, i| {
                    T::from_f32(gs[i].to_f32() * coef[k])
                });
            }
        }
        let dscale: Vec<f32> = (0..c)
            .map(|k| (sum_dy_xc[k] * r[k] as f64) as f32)
            .collect();
        let doffset: Vec<f32> = sum_dy.iter().map(|&s| s as f32).collect();
        ctx.set_output(0, dx)?;
        ctx.set_output(1, Tensor::vector(&dscale))?;
        ctx.set_output(2, Tensor::vector(&doffset))?;
        ctx.set_output(3, Tensor::vector::<f32>(&[]))?;
        ctx.set_output(4, Tensor::vector::<f32>(&[]))
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn make_batch_norm(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let epsilon: f32 = c.attr("epsilon")?;
    let factor: f32 = c.attr("exponential_avg_factor")?;
    let is_training: bool = c.attr("is_training")?;
    let channel_first = channel_first(c)?;
    let v3 = c.node.op == "FusedBatchNormV3";
    let t: DType = c.attr("T")?;
    macro_rules! k {
        ($t:ty) => {
            Ok(Box::new(FusedBatchNormKernel::<$t> {
                epsilon,
                factor,
                is_training,
                channel_first,
                v3,
                _t: PhantomData,
            }) as Box<dyn OpKernel>)
        };
    }
    match t {
        DType::F32 => k!(f32),
        DType::F16 => k!(f16),
        DType::BF16 => k!(bf16),
        other => Err(Status::unimplemented(format!(
            "FusedBatchNorm does not support {other}"
        ))),
    }
}

fn make_batch_norm_grad(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let epsilon: f32 = c.attr("epsilon")?;
    let is_training: bool = c.attr("is_training")?;
    let channel_first = channel_first(c)?;
    let t: DType = c.attr("T")?;
    macro_rules! k {
        ($t:ty) => {
            Ok(Box::new(FusedBatchNormGradKernel::<$t> {
                epsilon,
                is_training,
                channel_first,
                _t: PhantomData,
            }) as Box<dyn OpKernel>)
        };
    }
    match t {
        DType::F32 => k!(f32),
        DType::F16 => k!(f16),
        DType::BF16 => k!(bf16),
        other => Err(Status::unimplemented(format!(
            "FusedBatchNormGrad does not support {other}"
        ))),
    }
}

/// Registers the batch-norm kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    let types = &[DType::F32, DType::F16, DType::BF16];
    for op in ["FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"] {
        r.register(KernelDef::cpu(op, make_batch_norm).type_constraint("T", types));
    }
    for op in [
        "FusedBatchNormGrad",
        "FusedBatchNormGradV2",
        "FusedBatchNormGradV3",
    ] {
        r.register(KernelDef::cpu(op, make_batch_norm_grad).type_constraint("T", types));
    }
}
