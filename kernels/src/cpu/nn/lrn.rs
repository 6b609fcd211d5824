//! Local response normalization, after TensorFlow's `lrn_op.cc` (CPU): `LRN` and
//! `LRNGrad` over the last dimension of a 4-D tensor.
//!
//! With `N_d = bias + alpha * sum(x_j^2, |j - d| <= depth_radius)`, `LRN` gives
//! `x_d * N_d^-beta`, and `LRNGrad` gives `dx_i = g_i N_i^-beta - 2 alpha beta x_i
//! sum(g_j y_j / N_j)` over the windows holding `i`. Sums accumulate in `double`
//! (`float` for `half`/`bfloat16`), each row of channels on its own, rows on
//! rayon's threads when the tensor is large.

use std::marker::PhantomData;

use graph::{bf16, f16, DType, Result, Status, TensorType};
use rayon::prelude::*;

use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// Tensors with at least this many window visits are normalized on rayon's
/// threads.
const PAR_MIN_WORK: usize = 1 << 15;

/// An element type of the LRN kernels, computed in `f64`.
pub trait LrnElem: TensorType + Copy + Send + Sync {
    /// Widens.
    fn widen(self) -> f64;
    /// Rounds.
    fn narrow(v: f64) -> Self;
}

impl LrnElem for f32 {
    fn widen(self) -> f64 {
        self as f64
    }
    fn narrow(v: f64) -> f32 {
        v as f32
    }
}

impl LrnElem for f64 {
    fn widen(self) -> f64 {
        self
    }
    fn narrow(v: f64) -> f64 {
        v
    }
}

impl LrnElem for f16 {
    fn widen(self) -> f64 {
        f16::to_f64(self)
    }
    fn narrow(v: f64) -> f16 {
        f16::from_f64(v)
    }
}

impl LrnElem for bf16 {
    fn widen(self) -> f64 {
        bf16::to_f64(self)
    }
    fn narrow(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
}

/// The attributes of `LRN` and `LRNGrad`.
#[derive(Clone, Copy, Debug)]
struct Lrn {
    radius: usize,
    bias: f64,
    alpha: f64,
    beta: f64,
}

impl Lrn {
    fn from_attrs(c: &OpKernelConstruction<'_>) -> Result<Lrn> {
        let r: i64 = c.attr("depth_radius")?;
        if r > i32::MAX as i64 {
            return Err(Status::invalid_argument(format!(
                "depth_radius = {r} larger than int max"
            )));
        }
        let radius = usize::try_from(r).map_err(|_| {
            Status::invalid_argument(format!("depth_radius = {r} must be non-negative"))
        })?;
        Ok(Lrn {
            radius,
            bias: c.attr::<f32>("bias")? as f64,
            alpha: c.attr::<f32>("alpha")? as f64,
            beta: c.attr::<f32>("beta")? as f64,
        })
    }

    /// `N_d` of every channel of one row.
    fn norms<T: LrnElem>(&self, x: &[T], out: &mut [f64]) {
        let depth = x.len();
        for (d, n) in out.iter_mut().enumerate() {
            let lo = d.saturating_sub(self.radius);
            let hi = (d + self.radius + 1).min(depth);
            let s: f64 = x[lo..hi]
                .iter()
                .map(|v| {
                    let v = v.widen();
                    v * v
                })
                .sum();
            *n = self.bias + self.alpha * s;
        }
    }

    fn work(&self, len: usize) -> usize {
        len.saturating_mul(2 * self.radius.min(1 << 20) + 1)
    }
}

/// Runs `f(row index, out row)` over rows of `depth`, in parallel when large.
fn rows<T: Send>(out: &mut [T], depth: usize, work: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if depth == 0 {
        return;
    }
    if work >= PAR_MIN_WORK && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(depth)
            .enumerate()
            .for_each(|(i, r)| f(i, r));
    } else {
        out.chunks_mut(depth).enumerate().for_each(|(i, r)| f(i, r));
    }
}

/// `LRN`.
pub struct LrnKernel<T> {
    p: Lrn,
    _t: PhantomData<fn(T)>,
}

impl<T: LrnElem> OpKernel for LrnKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.rank() != 4 {
            return Err(Status::invalid_argument("in must be 4-dimensional"));
        }
        let depth = x.dims()[3];
        let xs = x.as_slice::<T>()?;
        let dims = x.dims().to_vec();
        let mut out = ctx.allocate(T::DTYPE, &dims[..])?;
        let p = self.p;
        rows(out.as_mut_slice::<T>()?, depth, p.work(xs.len()), |i, o| {
            let xr = &xs[i * depth..(i + 1) * depth];
            let mut n = vec![0.0; depth];
            p.norms(xr, &mut n);
            for ((y, &v), &nd) in o.iter_mut().zip(xr).zip(&n) {
                *y = T::narrow(v.widen() * nd.powf(-p.beta));
            }
        });
        ctx.set_output(0, out)
    }
}

/// `LRNGrad`.
pub struct LrnGradKernel<T> {
    p: Lrn,
    _t: PhantomData<fn(T)>,
}

impl<T: LrnElem> OpKernel for LrnGradKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (g, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        for (t, what) in [(g, "input_grads"), (x, "input_image"), (y, "output_image")] {
            if t.rank() != 4 {
                return Err(Status::invalid_argument(format!(
                    "{what} must be 4-dimensional"
                )));
            }
        }
        if g.dims() != x.dims() || x.dims() != y.dims() {
            return Err(Status::invalid_argument(
                "input_grads, input_image, and out_image should have the same shape",
            ));
        }
        let depth = x.dims()[3];
        let (gs, xs, ys) = (g.as_slice::<T>()?, x.as_slice::<T>()?, y.as_slice::<T>()?);
        let dims = x.dims().to_vec();
        let mut out = ctx.allocate(T::DTYPE, &dims[..])?;
        let p = self.p;
        rows(out.as_mut_slice::<T>()?, depth, p.work(xs.len()), |i, o| {
            let span = i * depth..(i + 1) * depth;
            let (gr, xr, yr) = (&gs[span.clone()], &xs[span.clone()], &ys[span]);
            let mut n = vec![0.0; depth];
            p.norms(xr, &mut n);
            // t_j = g_j y_j / N_j, summed over each window.
            let t: Vec<f64> = (0..depth)
                .map(|j| gr[j].widen() * yr[j].widen() / n[j])
                .collect();
            for (d, dx) in o.iter_mut().enumerate() {
                let lo = d.saturating_sub(p.radius);
                let hi = (d + p.radius + 1).min(depth);
                let s: f64 = t[lo..hi].iter().sum();
                let v =
                    gr[d].widen() * n[d].powf(-p.beta) - 2.0 * p.alpha * p.beta * xr[d].widen() * s;
                *dx = T::narrow(v);
            }
        });
        ctx.set_output(0, out)
    }
}

fn make_lrn(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let p = Lrn::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    crate::dispatch_float!(t, T => Ok(Box::new(LrnKernel::<T> { p, _t: PhantomData }) as Box<dyn OpKernel>))
}

fn make_lrn_grad(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let p = Lrn::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    crate::dispatch_float!(t, T => Ok(Box::new(LrnGradKernel::<T> { p, _t: PhantomData }) as Box<dyn OpKernel>))
}

/// Registers `LRN` and `LRNGrad` for float and half, the types TensorFlow's CPU
/// kernels take (its `bfloat16` has none).
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for (op, f) in [
        ("LRN", make_lrn as crate::registry::KernelFactory),
        ("LRNGrad", make_lrn_grad),
    ] {
        r.register(KernelDef::cpu(op, f).type_constraint("T", &[DType::F32, DType::F16]));
    }
}
