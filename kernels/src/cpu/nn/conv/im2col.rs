//! Convolution as matrix products: `im2col` lays one image's receptive fields out
//! as a `[out_rows * out_cols, filter_rows * filter_cols * depth]` patch matrix
//! (zeros where a tap falls in the padding), so that `Conv2D` is that matrix times
//! the `HWIO` filter read as `[patch, out_depth]`; `col2im` adds a patch-matrix
//! gradient back onto the image it came from (the transpose of `im2col`).
//!
//! [`ConvScalar`] is the element type the products run in: `f32`/`f64` through
//! [`gemm_into`], `i32` through a plain wrapping loop. `half` and `bfloat16`
//! convolve in `f32` and round once at the end ([`ConvElem`]).

use std::borrow::Cow;

use graph::{bf16, f16, Result, TensorType};

use crate::cpu::linalg::gemm::{gemm_into, MatRef};

use super::params::Geometry;

/// An element type convolutions compute in.
pub trait ConvScalar: TensorType + Copy + Default + Send + Sync {
    /// `self + o` (wrapping for integers).
    fn add(self, o: Self) -> Self;
    /// `self + a * b` (wrapping for integers).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `c = a · b` (`c` row-major), on `threads` threads.
    fn matmul(
        a: MatRef<'_, Self>,
        b: MatRef<'_, Self>,
        c: &mut [Self],
        threads: usize,
    ) -> Result<()>;
}

macro_rules! gemm_scalar {
    ($($t:ty),*) => {$(
        impl ConvScalar for $t {
            #[inline(always)]
            fn add(self, o: $t) -> $t { self + o }
            #[inline(always)]
            fn mul_add(self, a: $t, b: $t) -> $t { self + a * b }
            fn matmul(a: MatRef<'_, $t>, b: MatRef<'_, $t>, c: &mut [$t], threads: usize) -> Result<()> {
                gemm_into(a, b, c, threads)
            }
        }
    )*};
}
gemm_scalar!(f32, f64);

impl ConvScalar for i32 {
    #[inline(always)]
    fn add(self, o: i32) -> i32 {
        self.wrapping_add(o)
    }
    #[inline(always)]
    fn mul_add(self, a: i32, b: i32) -> i32 {
        self.wrapping_add(a.wrapping_mul(b))
    }
    fn matmul(
        a: MatRef<'_, i32>,
        b: MatRef<'_, i32>,
        c: &mut [i32],
        _threads: usize,
    ) -> Result<()> {
        let n = b.cols();
        for (i, row) in c.chunks_exact_mut(n.max(1)).enumerate().take(a.rows()) {
            row.fill(0);
            for p in 0..a.cols() {
                let x = a.at(i, p);
                if x == 0 {
                    continue;
                }
                for (j, v) in row.iter_mut().enumerate() {
                    *v = v.mul_add(x, b.at(p, j));
                }
            }
        }
        Ok(())
    }
}

/// A tensor element type and the [`ConvScalar`] it convolves in.
pub trait ConvElem: TensorType {
    /// The compute type.
    type Acc: ConvScalar;
    /// The values in the compute type (borrowed when it is the same type).
    fn widen(x: &[Self]) -> Cow<'_, [Self::Acc]>;
    /// Runs `f` on an output buffer of the compute type and stores its values in
    /// `out` (directly when it is the same type, else rounding each once).
    fn compute_into(out: &mut [Self], f: impl FnOnce(&mut [Self::Acc]) -> Result<()>)
        -> Result<()>;
}

macro_rules! same_elem {
    ($($t:ty),*) => {$(
        impl ConvElem for $t {
            type Acc = $t;
            fn widen(x: &[$t]) -> Cow<'_, [$t]> { Cow::Borrowed(x) }
            fn compute_into(out: &mut [$t], f: impl FnOnce(&mut [$t]) -> Result<()>) -> Result<()> {
                f(out)
            }
        }
    )*};
}
same_elem!(f32, f64, i32);

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl ConvElem for $t {
            type Acc = f32;
            fn widen(x: &[$t]) -> Cow<'_, [f32]> { Cow::Owned(x.iter().map(|v| v.to_f32()).collect()) }
            fn compute_into(out: &mut [$t], f: impl FnOnce(&mut [f32]) -> Result<()>) -> Result<()> {
                let mut acc = vec![0f32; out.len()];
                f(&mut acc)?;
                for (o, v) in out.iter_mut().zip(acc) {
                    *o = <$t>::from_f32(v);
                }
                Ok(())
            }
        }
    )*};
}
half_elem!(f16, bf16);

/// Writes the patch-matrix rows of output pixels `first..` (as many as `col`
/// holds, `patch` elements each) of image `image`, channels
/// `[c0, c0 + g.filter_depth)`.
pub fn im2col<T: ConvScalar>(g: &Geometry, image: &[T], c0: usize, first: usize, col: &mut [T]) {
    let (fd, depth) = (g.filter_depth, g.in_depth);
    let patch = g.patch();
    if patch == 0 || g.cols.output == 0 {
        return;
    }
    // With one group and undilated columns, a filter row whose taps all fall
    // inside the image reads `filter_cols * depth` contiguous values: one copy
    // instead of one per tap (a one-channel image's taps are single values).
    let kw = g.cols.filter;
    let row_len = kw * fd;
    let whole_rows = fd == depth && g.cols.dilation == 1 && kw > 0;
    for (i, row) in col.chunks_exact_mut(patch).enumerate() {
        let p = first + i;
        let (oy, ox) = (p / g.cols.output, p % g.cols.output);
        let inside = match (
            g.cols.source(ox, 0),
            g.cols.source(ox, kw.saturating_sub(1)),
        ) {
            (Some(ix), Some(_)) if whole_rows => Some(ix),
            _ => None,
        };
        for (ky, taps) in row.chunks_exact_mut(row_len).enumerate() {
            let Some(iy) = g.rows.source(oy, ky) else {
                taps.fill(T::default());
                continue;
            };
            if let Some(ix) = inside {
                let at = (iy * g.cols.input + ix) * depth;
                taps.copy_from_slice(&image[at..at + row_len]);
                continue;
            }
            for (kx, dst) in taps.chunks_exact_mut(fd).enumerate() {
                match g.cols.source(ox, kx) {
                    Some(ix) => {
                        let at = (iy * g.cols.input + ix) * depth + c0;
                        dst.copy_from_slice(&image[at..at + fd]);
                    }
                    None => dst.fill(T::default()),
                }
            }
        }
    }
}

/// Adds the patch-matrix gradient rows `col` of output pixels `first..` onto the
/// image gradient `image` (one group: `filter_depth == in_depth`).
pub fn col2im<T: ConvScalar>(g: &Geometry, col: &[T], first: usize, image: &mut [T]) {
    let fd = g.filter_depth;
    let patch = g.patch();
    if patch == 0 || g.cols.output == 0 {
        return;
    }
    for (i, row) in col.chunks_exact(patch).enumerate() {
        let p = first + i;
        let (oy, ox) = (p / g.cols.output, p % g.cols.output);
        let mut k = 0;
        for ky in 0..g.rows.filter {
            let iy = g.rows.source(oy, ky);
            for kx in 0..g.cols.filter {
                if let (Some(iy), Some(ix)) = (iy, g.cols.source(ox, kx)) {
                    let at = (iy * g.cols.input + ix) * g.in_depth;
                    for (d, &v) in image[at..at + fd].iter_mut().zip(&row[k..k + fd]) {
                        *d = d.add(v);
                    }
                }
                k += fd;
            }
        }
    }
}
