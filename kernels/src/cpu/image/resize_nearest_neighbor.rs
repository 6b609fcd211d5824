//! `ResizeNearestNeighbor` and `ResizeNearestNeighborGrad` (TensorFlow's
//! `resize_nearest_neighbor_op.cc`): each output pixel copies the input pixel its
//! coordinate floors (or, with `align_corners`, rounds) to; the gradient sums
//! every incoming pixel into the input pixel it was copied from, with
//! TensorFlow's arithmetic (wrapping integers, `half` rounding each sum).

use graph::{DType, Result, Status};

use super::resize_bilinear::for_images;
use super::resizer_state::{read_size, resize_scale, ResizeFlags, ResizeKernel, ResizerState};
use crate::cpu::math::elem::Arith;
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};

/// TensorFlow's limit on the input height and width.
const MAX_SIDE: usize = 1 << 24;

/// The input index of each of `out_size` output indices along one axis.
fn indices(flags: ResizeFlags, out_size: usize, in_size: usize, scale: f32) -> Vec<usize> {
    let s = flags.sampling();
    (0..out_size)
        .map(|i| s.nearest(i, scale, flags.align_corners, in_size))
        .collect()
}

/// Marks the [`ResizeKernel`] of `ResizeNearestNeighbor`.
pub struct Nearest;

impl<T: Arith + Copy + Send + Sync> OpKernel for ResizeKernel<T, Nearest> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (images, size) = (ctx.input(0)?, ctx.input(1)?);
        let st = ResizerState::new(self.flags, images, size)?;
        if st.in_height >= MAX_SIDE || st.in_width >= MAX_SIDE {
            return Err(Status::invalid_argument(
                "nearest neighbor requires max height & width of 2^24",
            ));
        }
        let ys = indices(self.flags, st.out_height, st.in_height, st.height_scale);
        let xs = indices(self.flags, st.out_width, st.in_width, st.width_scale);
        let x = images.as_slice::<T>()?;
        let ch = st.channels;
        let (in_img, out_img) = (
            st.in_height * st.in_width * ch,
            st.out_height * st.out_width * ch,
        );
        let mut out = ctx.allocate(T::DTYPE, &st.out_dims()[..])?;
        let o = out.as_mut_slice::<T>()?;
        let work = o.len();
        for_images(o, out_img, work, |b, img| {
            let xb = &x[b * in_img..(b + 1) * in_img];
            for (&y, row) in ys.iter().zip(img.chunks_exact_mut(st.out_width * ch)) {
                for (&xi, px) in xs.iter().zip(row.chunks_exact_mut(ch)) {
                    let at = (y * st.in_width + xi) * ch;
                    px.copy_from_slice(&xb[at..at + ch]);
                }
            }
        });
        ctx.set_output(0, out)
    }
}

/// Marks the [`ResizeKernel`] of `ResizeNearestNeighborGrad`, shaped
/// `[batch, size[0], size[1], channels]`.
pub struct NearestGrad;

impl<T: Arith + Copy + Send + Sync> OpKernel for ResizeKernel<T, NearestGrad> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (grads, size) = (ctx.input(0)?, ctx.input(1)?);
        let g = grads.dims();
        if g.len() != 4 {
            return Err(Status::invalid_argument(format!(
                "input must be 4-dimensional{g:?}"
            )));
        }
        let (oh, ow) = read_size(size, "shape_t's elements must be positive")?;
        let (batch, ih, iw, ch) = (g[0], g[1], g[2], g[3]);
        let mut out = ctx.allocate(T::DTYPE, &[batch, oh, ow, ch][..])?;
        let align = self.flags.align_corners;
        let ys = indices(self.flags, ih, oh, resize_scale(oh, ih, align));
        let xs = indices(self.flags, iw, ow, resize_scale(ow, iw, align));
        let gs = grads.as_slice::<T>()?;
        let o = out.as_mut_slice::<T>()?;
        let (g_img, o_img) = (ih * iw * ch, oh * ow * ch);
        for_images(o, o_img, gs.len(), |b, img| {
            let gb = &gs[b * g_img..(b + 1) * g_img];
            for (&y, grow) in ys.iter().zip(gb.chunks_exact((iw * ch).max(1))) {
                for (&xi, gpx) in xs.iter().zip(grow.chunks_exact(ch.max(1))) {
                    let at = (y * ow + xi) * ch;
                    for (v, &gv) in img[at..at + ch].iter_mut().zip(gpx) {
                        *v = v.tf_add(gv);
                    }
                }
            }
        });
        ctx.set_output(0, out)
    }
}

pub(super) fn make_resize_nearest_neighbor(
    c: &OpKernelConstruction<'_>,
) -> Result<Box<dyn OpKernel>> {
    let flags = ResizeFlags::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(ResizeKernel::<T, Nearest>::new(flags)) as Box<dyn OpKernel>))
}

pub(super) fn make_resize_nearest_neighbor_grad(
    c: &OpKernelConstruction<'_>,
) -> Result<Box<dyn OpKernel>> {
    let flags = ResizeFlags::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(ResizeKernel::<T, NearestGrad>::new(flags)) as Box<dyn OpKernel>))
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Tensor};

    #[test]
    fn doubles_and_folds_back() {
        let attrs = [
            ("align_corners", AttrValue::from(false)),
            ("half_pixel_centers", AttrValue::from(true)),
        ];
        let x = Tensor::new(&[1, 2, 2, 1], vec![1i32, 2, 3, 4]).unwrap();
        let out = run_op(
            "ResizeNearestNeighbor",
            &attrs,
            vec![x, Tensor::vector(&[4i32, 4])],
        )
        .unwrap();
        let want = [1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4];
        assert_eq!(out[0], Tensor::new(&[1, 4, 4, 1], want.to_vec()).unwrap());
        let back = run_op(
            "ResizeNearestNeighborGrad",
            &attrs,
            vec![out[0].clone(), Tensor::vector(&[2i32, 2])],
        )
        .unwrap();
        assert_eq!(
            back[0],
            Tensor::new(&[1, 2, 2, 1], vec![4i32, 8, 12, 16]).unwrap()
        );
    }
}
