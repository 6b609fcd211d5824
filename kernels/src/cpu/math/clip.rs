//! The CPU kernel of `ClipByValue` (TensorFlow's `cwise_op_clip.cc`): each
//! element clamped to `[clip_value_min, clip_value_max]`, each bound a scalar or
//! shaped like the input. The clamp is `max(min(x, hi), lo)` with C++'s
//! `std::min`/`std::max`, so a NaN input stays NaN and `lo > hi` gives `lo`.

use std::marker::PhantomData;

use graph::{Result, Status};

use super::elem::Arith;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::KernelRegistry;

/// `ClipByValue` for element type `T`.
struct ClipKernel<T>(PhantomData<fn(T)>);

impl<T: Arith> OpKernel for ClipKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (x, lo, hi) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let fits = |b: &graph::Tensor| b.shape() == x.shape() || b.rank() == 0;
        if !fits(lo) || !fits(hi) {
            return Err(Status::invalid_argument(format!(
                "clip_value_min and clip_value_max must be either of the same shape as input, \
                 or a scalar. input shape: {}clip_value_min shape: {}clip_value_max shape: {}",
                x.shape(),
                lo.shape(),
                hi.shape()
            )));
        }
        let (xs, ls, hs) = (x.as_slice::<T>()?, lo.as_slice::<T>()?, hi.as_slice::<T>()?);
        let at = |s: &[T], i: usize| if s.len() == 1 { s[0] } else { s[i] };
        let out = ctx.allocator().build::<T>(x.shape().clone(), |o| {
            for (i, (y, &v)) in o.iter_mut().zip(xs).enumerate() {
                let (l, h) = (at(ls, i), at(hs, i));
                let m = if h < v { h } else { v };
                *y = if m < l { l } else { m };
            }
        });
        ctx.set_output(0, out?)
    }
}

/// Registers ClipByValue for TensorFlow's CPU types.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed! {
        r, "ClipByValue", "T", [f32, f64, graph::f16, graph::bf16, i8, i16, i32, i64, u8, u16],
        |T| ClipKernel::<T>(PhantomData)
    }
}

#[cfg(test)]
mod tests {
    use graph::Tensor;

    use crate::testutil::run_op;

    #[test]
    fn clamps_with_scalar_and_tensor_bounds() {
        let x = Tensor::vector(&[-3.0f32, 0.5, f32::NAN, 9.0]);
        let lo = Tensor::scalar(-1.0f32);
        let hi = Tensor::vector(&[1.0f32, 0.0, 1.0, 2.0]);
        let out = run_op("ClipByValue", &[], vec![x, lo, hi])
            .unwrap()
            .remove(0);
        let v = out.as_slice::<f32>().unwrap();
        assert_eq!((v[0], v[1], v[3]), (-1.0, 0.0, 2.0));
        assert!(v[2].is_nan());
    }
}
