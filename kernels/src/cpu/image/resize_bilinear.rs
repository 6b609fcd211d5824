//! `ResizeBilinear` and `ResizeBilinearGrad` (TensorFlow's
//! `resize_bilinear_op.cc`).
//!
//! The forward kernel reads every input type as `f32` and interpolates in `f32`
//! exactly as TensorFlow's `compute_lerp` does (horizontally along the top and
//! bottom rows, then vertically), so its float32 output matches TensorFlow's; an
//! output as large as the input is the input cast to float32. The gradient
//! spreads each float32 output gradient over its four input pixels with the same
//! weights, in TensorFlow's order, accumulating in the output type (`f32` for
//! `half` and `bfloat16`, rounded at the end). Images run in parallel once the
//! work is large enough ([`PAR_MIN_WORK`]).

use graph::{DType, Result, Status};
use rayon::prelude::*;

use super::resizer_state::{interpolations, resize_scale, ResizeFlags, ResizeKernel, ResizerState};
use crate::cpu::types::{FloatType, Numeric};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::{dispatch_float, dispatch_numeric};

/// Below this many output elements a kernel runs on the calling thread.
pub const PAR_MIN_WORK: usize = 1 << 15;

/// Runs `f(image, chunk)` over the `batch` images of `out` (each `chunk` long),
/// in parallel when `work` is large.
pub(super) fn for_images<T: Send>(
    out: &mut [T],
    chunk: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if chunk == 0 {
        return;
    }
    if work >= PAR_MIN_WORK && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, c)| f(i, c));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// `top + (bottom - top) * y` of the two horizontal interpolations.
#[inline]
fn lerp4(tl: f32, tr: f32, bl: f32, br: f32, x: f32, y: f32) -> f32 {
    let top = tl + (tr - tl) * x;
    let bottom = bl + (br - bl) * x;
    top + (bottom - top) * y
}

/// Marks the [`ResizeKernel`] of `ResizeBilinear`.
pub struct Bilinear;

impl<T: Numeric + Copy + Send + Sync> OpKernel for ResizeKernel<T, Bilinear> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (images, size) = (ctx.input(0)?, ctx.input(1)?);
        let st = ResizerState::new(self.flags, images, size)?;
        let x: Vec<f32> = images
            .as_slice::<T>()?
            .iter()
            .map(|v| v.to_f32().unwrap_or(f32::NAN))
            .collect();
        let mut out = ctx.allocate(DType::F32, &st.out_dims()[..])?;
        let o = out.as_mut_slice::<f32>()?;
        if st.out_height == st.in_height && st.out_width == st.in_width {
            o.copy_from_slice(&x);
            return ctx.set_output(0, out);
        }
        let sampling = self.flags.sampling();
        let ys = interpolations(sampling, st.out_height, st.in_height, st.height_scale);
        let xs = interpolations(sampling, st.out_width, st.in_width, st.width_scale);
        let ch = st.channels;
        let in_row = st.in_width * ch;
        let in_img = st.in_height * in_row;
        let out_img = st.out_height * st.out_width * ch;
        for_images(o, out_img, o.len(), |b, img| {
            let xb = &x[b * in_img..(b + 1) * in_img];
            for (y, row) in ys.iter().zip(img.chunks_exact_mut(st.out_width * ch)) {
                let top = &xb[y.lower * in_row..(y.lower + 1) * in_row];
                let bottom = &xb[y.upper * in_row..(y.upper + 1) * in_row];
                for (xi, px) in xs.iter().zip(row.chunks_exact_mut(ch)) {
                    let (l, r) = (xi.lower * ch, xi.upper * ch);
                    for (c, v) in px.iter_mut().enumerate() {
                        *v = lerp4(
                            top[l + c],
                            top[r + c],
                            bottom[l + c],
                            bottom[r + c],
                            xi.lerp,
                            y.lerp,
                        );
                    }
                }
            }
        });
        ctx.set_output(0, out)
    }
}

/// An output type of `ResizeBilinearGrad` and the type it accumulates in.
pub trait BilinearGradElem: FloatType + Send + Sync {
    /// `f32` for `float`, `half` and `bfloat16`; `f64` for `double`.
    type Acc: Copy + Default + Send + Sync + std::ops::AddAssign;
    /// `Acc(v)` of a float32 weight product.
    fn acc(v: f32) -> Self::Acc;
    /// The accumulated value in this type.
    fn from_acc(a: Self::Acc) -> Self;
}

macro_rules! grad_elem {
    ($($t:ty => $acc:ty, $v:ident => $to:expr, $a:ident => $from:expr);*) => {$(
        impl BilinearGradElem for $t {
            type Acc = $acc;
            fn acc($v: f32) -> $acc { $to }
            fn from_acc($a: $acc) -> $t { $from }
        }
    )*};
}
grad_elem!(
    f32 => f32, v => v, a => a;
    f64 => f64, v => f64::from(v), a => a;
    graph::f16 => f32, v => v, a => graph::f16::from_f32(a);
    graph::bf16 => f32, v => v, a => graph::bf16::from_f32(a)
);

/// Marks the [`ResizeKernel`] of `ResizeBilinearGrad`: the gradient with respect
/// to `original_image`, shaped `[grads batch, original height, original width,
/// grads channels]` (as TensorFlow's kernel, which reads only the original
/// image's shape).
pub struct BilinearGrad;

impl<T: BilinearGradElem> OpKernel for ResizeKernel<T, BilinearGrad> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        self.flags.check()?;
        let (grads, original) = (ctx.input(0)?, ctx.input(1)?);
        let g = grads.dims();
        if g.len() != 4 {
            return Err(Status::invalid_argument(format!(
                "input_grad must be 4-dimensional{g:?}"
            )));
        }
        let (batch, rh, rw, ch) = (g[0], g[1], g[2], g[3]);
        if rh == 0 || rw == 0 {
            return Err(Status::invalid_argument(
                "resized dimensions must be positive",
            ));
        }
        let od = original.dims();
        if od.len() != 4 {
            return Err(Status::invalid_argument(format!(
                "original_image must be 4-dimensional{od:?}"
            )));
        }
        let (oh, ow) = (od[1], od[2]);
        if oh == 0 || ow == 0 {
            return Err(Status::invalid_argument(
                "original dimensions must be positive",
            ));
        }
        if oh >= i32::MAX as usize || ow >= i32::MAX as usize {
            return Err(Status::invalid_argument(
                "original sizes must be between 0 and max int32",
            ));
        }
        let sampling = self.flags.sampling();
        let ys = interpolations(
            sampling,
            rh,
            oh,
            resize_scale(oh, rh, self.flags.align_corners),
        );
        let xs = interpolations(
            sampling,
            rw,
            ow,
            resize_scale(ow, rw, self.flags.align_corners),
        );
        let gs = grads.as_slice::<f32>()?;
        let mut acc = vec![T::Acc::default(); batch * oh * ow * ch];
        let (g_img, o_img) = (rh * rw * ch, oh * ow * ch);
        for_images(&mut acc, o_img, gs.len(), |b, img| {
            let gb = &gs[b * g_img..(b + 1) * g_img];
            for (y, grow) in ys.iter().zip(gb.chunks_exact(rw * ch)) {
                let (top, bottom) = (y.lower * ow * ch, y.upper * ow * ch);
                let inv_y = 1.0 - y.lerp;
                for (xi, gpx) in xs.iter().zip(grow.chunks_exact(ch)) {
                    let (l, r) = (xi.lower * ch, xi.upper * ch);
                    let inv_x = 1.0 - xi.lerp;
                    for (c, &gv) in gpx.iter().enumerate() {
                        img[top + l + c] += T::acc(gv * inv_y * inv_x);
                        img[top + r + c] += T::acc(gv * inv_y * xi.lerp);
                        img[bottom + l + c] += T::acc(gv * y.lerp * inv_x);
                        img[bottom + r + c] += T::acc(gv * y.lerp * xi.lerp);
                    }
                }
            }
        });
        let mut out = ctx.allocate(T::DTYPE, &[batch, oh, ow, ch][..])?;
        for (o, a) in out.as_mut_slice::<T>()?.iter_mut().zip(acc) {
            *o = T::from_acc(a);
        }
        ctx.set_output(0, out)
    }
}

pub(super) fn make_resize_bilinear(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let flags = ResizeFlags::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(ResizeKernel::<T, Bilinear>::new(flags)) as Box<dyn OpKernel>))
}

pub(super) fn make_resize_bilinear_grad(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let flags = ResizeFlags::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_float!(t, T => Ok(Box::new(ResizeKernel::<T, BilinearGrad>::new(flags)) as Box<dyn OpKernel>))
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, Tensor};

    fn flags(align: bool, half: bool) -> Vec<(&'static str, AttrValue)> {
        vec![
            ("align_corners", AttrValue::from(align)),
            ("half_pixel_centers", AttrValue::from(half)),
        ]
    }

    #[test]
    fn upsamples_a_ramp() {
        // 1x1x2x1 [0, 4] to width 4: legacy samples 0, 0.5, 1, 1.5 (clamped).
        let x = Tensor::new(&[1, 1, 2, 1], vec![0u8, 4]).unwrap();
        let size = Tensor::vector(&[1i32, 4]);
        let out = run_op(
            "ResizeBilinear",
            &flags(false, false),
            vec![x.clone(), size.clone()],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[1, 1, 4, 1], vec![0.0f32, 2.0, 4.0, 4.0]).unwrap()
        );
        let out = run_op(
            "ResizeBilinear",
            &flags(true, false),
            vec![x.clone(), size.clone()],
        )
        .unwrap();
        let v = out[0].as_slice::<f32>().unwrap();
        assert_eq!(v[0], 0.0);
        assert_eq!(v[3], 4.0);
        let e = run_op("ResizeBilinear", &flags(true, true), vec![x, size]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn gradient_sums_to_the_incoming_total() {
        let x = Tensor::zeros(graph::DType::F64, [2, 3, 2, 1]);
        let g = Tensor::new(&[2, 5, 4, 1], (0..40).map(|v| v as f32).collect()).unwrap();
        let out = run_op("ResizeBilinearGrad", &flags(false, true), vec![g, x]).unwrap();
        assert_eq!(out[0].dims(), [2, 3, 2, 1]);
        let total: f64 = out[0].as_slice::<f64>().unwrap().iter().sum();
        // Each share is a float32 product of weights summing to 1.
        assert!(
            (total - (0..40).sum::<i32>() as f64).abs() < 1e-4,
            "{total}"
        );
    }
}
