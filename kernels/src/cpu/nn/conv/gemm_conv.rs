//! The three `Conv2D` computations as matrix products over [`im2col`] blocks, on
//! `NHWC` slices of one [`ConvScalar`] type:
//!
//! - forward: `out[block] = patches[block] · filter` (per group);
//! - backprop input: `col2im(dy[block] · filterᵀ)`;
//! - backprop filter: `Σ patches[block]ᵀ · dy[block]` over every image and block.
//!
//! A 1×1 window with unit strides and no padding skips `im2col`: the image itself
//! is the patch matrix. Blocks of output pixels keep the patch buffer near
//! [`BLOCK_ELEMS`]. Work of at least [`PAR_FLOPS`] multiply-adds runs on rayon:
//! across images when one image is smaller than that, else inside each product.

use rayon::prelude::*;

use graph::Result;

use super::im2col::{col2im, im2col, ConvScalar};
use super::params::Geometry;
use crate::cpu::linalg::gemm::{MatRef, PAR_FLOPS};
use crate::cpu::nn::epilogue::PAR_FINISH_ELEMS;

/// The most elements a patch-matrix block holds (at least one row).
pub const BLOCK_ELEMS: usize = 1 << 20;

/// How work is spread: across images, or inside each product.
#[derive(Clone, Copy)]
enum Spread {
    Images,
    Product(usize),
}

fn spread(g: &Geometry) -> Spread {
    let threads = rayon::current_num_threads();
    let total = g.flops();
    let per_image = total / g.batch.max(1);
    // Whole images per thread need no synchronisation inside the products; a
    // product split over threads pays it for every block. Split products only
    // when there are too few images to keep every thread busy.
    let images_fill_threads = g.batch >= 2 * threads || per_image < PAR_FLOPS;
    if threads > 1 && g.batch > 1 && total >= PAR_FLOPS && images_fill_threads {
        Spread::Images
    } else if total >= PAR_FLOPS {
        Spread::Product(threads)
    } else {
        Spread::Product(1)
    }
}

/// Output pixels per block.
fn block_rows(g: &Geometry) -> usize {
    (BLOCK_ELEMS / g.patch().max(1)).clamp(1, g.out_pixels().max(1))
}

/// A 1×1 window with unit strides and no padding: the image is its own patch
/// matrix.
fn is_pointwise(g: &Geometry) -> bool {
    let unit = |d: &super::params::Dim| d.filter == 1 && d.stride == 1 && d.pad == 0;
    unit(&g.rows)
        && unit(&g.cols)
        && g.groups() == 1
        && g.out_pixels() == g.rows.input * g.cols.input
}

/// Work done on whole rows of finished output (`out_depth` elements each) while
/// they are still in cache: nothing for `Conv2D`, a bias or batch norm and an
/// activation for `_FusedConv2D`.
pub type Finish<'a, T> = &'a (dyn Fn(&mut [T]) + Sync);

/// `Conv2D`: `out` (`g.output_shape()`) from `input` and the `HWIO` `filter`,
/// with `finish` applied to every block of output rows once it is computed
/// (an empty window, `k = 0`, gives zeros, then finished).
pub fn forward<T: ConvScalar>(
    g: &Geometry,
    input: &[T],
    filter: &[T],
    out: &mut [T],
    finish: Finish<'_, T>,
) -> Result<()> {
    let (p, k, od) = (g.out_pixels(), g.patch(), g.out_depth);
    if out.is_empty() {
        return Ok(());
    }
    if k == 0 {
        out.fill(T::default());
        finish(out);
        return Ok(());
    }
    if is_pointwise(g) {
        let threads = match spread(g) {
            Spread::Product(t) => t,
            Spread::Images => rayon::current_num_threads(),
        };
        let a = MatRef::new(input, g.batch * p, k, k, 1)?;
        let b = MatRef::new(filter, k, od, od, 1)?;
        T::matmul(a, b, out, threads)?;
        // Finish in row chunks on the product's threads when it used several
        // and the output is large enough to pay for waking them.
        if threads > 1 && out.len() >= PAR_FINISH_ELEMS {
            let rows = (g.batch * p).div_ceil(threads).max(1);
            out.par_chunks_mut(rows * od).for_each(finish);
        } else {
            finish(out);
        }
        return Ok(());
    }
    let in_image = g.in_image();
    let image = |bufs: &mut Buffers<T>, (n, dst): (usize, &mut [T]), threads: usize| {
        let src = &input[n * in_image..(n + 1) * in_image];
        forward_image(g, src, filter, dst, bufs, threads, finish)
    };
    // Each rayon job reuses one patch buffer for all its images.
    match spread(g) {
        Spread::Images => out
            .par_chunks_mut(p * od)
            .enumerate()
            .try_for_each_init(Buffers::default, |b, job| image(b, job, 1)),
        Spread::Product(t) => {
            let mut b = Buffers::default();
            out.chunks_mut(p * od)
                .enumerate()
                .try_for_each(|job| image(&mut b, job, t))
        }
    }
}

/// A patch block and a group's product, kept across the images of one job.
struct Buffers<T> {
    col: Vec<T>,
    tmp: Vec<T>,
}

impl<T> Default for Buffers<T> {
    fn default() -> Self {
        Buffers {
            col: Vec::new(),
            tmp: Vec::new(),
        }
    }
}

/// `buf` holding at least `len` elements; the first `len` returned.
fn at_least<T: Clone + Default>(buf: &mut Vec<T>, len: usize) -> &mut [T] {
    if buf.len() < len {
        buf.resize(len, T::default());
    }
    &mut buf[..len]
}

/// One image of [`forward`], block by block and group by group, each block
/// finished once all its groups are in.
fn forward_image<T: ConvScalar>(
    g: &Geometry,
    src: &[T],
    filter: &[T],
    dst: &mut [T],
    bufs: &mut Buffers<T>,
    threads: usize,
    finish: Finish<'_, T>,
) -> Result<()> {
    let (p, k, od) = (g.out_pixels(), g.patch(), g.out_depth);
    let groups = g.groups();
    let og = od / groups;
    let rows = block_rows(g);
    for first in (0..p).step_by(rows) {
        let n = rows.min(p - first);
        let col = at_least(&mut bufs.col, n * k);
        let out = &mut dst[first * od..(first + n) * od];
        for gi in 0..groups {
            im2col(g, src, gi * g.filter_depth, first, col);
            let a = MatRef::new(col, n, k, k, 1)?;
            let b = MatRef::new(&filter[gi * og..], k, og, od, 1)?;
            if groups == 1 {
                T::matmul(a, b, out, threads)?;
            } else {
                let tmp = at_least(&mut bufs.tmp, n * og);
                T::matmul(a, b, tmp, threads)?;
                for (row, t) in out.chunks_exact_mut(od).zip(tmp.chunks_exact(og)) {
                    row[gi * og..(gi + 1) * og].copy_from_slice(t);
                }
            }
        }
        finish(out);
    }
    Ok(())
}

/// `Conv2DBackpropInput` (one group): `dx` (`g.input_shape()`) from the filter
/// and `dy` (`g.output_shape()`).
pub fn backprop_input<T: ConvScalar>(
    g: &Geometry,
    filter: &[T],
    dy: &[T],
    dx: &mut [T],
) -> Result<()> {
    let (p, k, od) = (g.out_pixels(), g.patch(), g.out_depth);
    dx.fill(T::default());
    if dx.is_empty() || k == 0 || od == 0 || p == 0 {
        return Ok(());
    }
    // filterᵀ: [od, k] read from the [k, od] filter.
    let wt = MatRef::new(filter, od, k, 1, od)?;
    if is_pointwise(g) {
        let a = MatRef::new(dy, g.batch * p, od, od, 1)?;
        let threads = match spread(g) {
            Spread::Product(t) => t,
            Spread::Images => rayon::current_num_threads(),
        };
        return T::matmul(a, wt, dx, threads);
    }
    let in_image = g.in_image();
    let image = |col: &mut Vec<T>, (n, dst): (usize, &mut [T]), threads: usize| -> Result<()> {
        let rows = block_rows(g);
        let dy = &dy[n * p * od..(n + 1) * p * od];
        for first in (0..p).step_by(rows) {
            let m = rows.min(p - first);
            let col = at_least(col, m * k);
            let a = MatRef::new(&dy[first * od..], m, od, od, 1)?;
            T::matmul(a, wt, col, threads)?;
            col2im(g, col, first, dst);
        }
        Ok(())
    };
    match spread(g) {
        Spread::Images => dx
            .par_chunks_mut(in_image)
            .enumerate()
            .try_for_each_init(Vec::new, |col, job| image(col, job, 1)),
        Spread::Product(t) => {
            let mut col = Vec::new();
            dx.chunks_mut(in_image)
                .enumerate()
                .try_for_each(|job| image(&mut col, job, t))
        }
    }
}

/// `Conv2DBackpropFilter` (one group): `dw` (`g.filter_shape()`) from the input
/// and `dy`.
pub fn backprop_filter<T: ConvScalar>(
    g: &Geometry,
    input: &[T],
    dy: &[T],
    dw: &mut [T],
) -> Result<()> {
    let (p, k, od) = (g.out_pixels(), g.patch(), g.out_depth);
    dw.fill(T::default());
    if dw.is_empty() || p == 0 || g.batch == 0 {
        return Ok(());
    }
    if is_pointwise(g) {
        // dw [k, od] = inputᵀ [k, N·p] · dy [N·p, od].
        let a = MatRef::new(input, k, g.batch * p, 1, k)?;
        let b = MatRef::new(dy, g.batch * p, od, od, 1)?;
        let threads = match spread(g) {
            Spread::Product(t) => t,
            Spread::Images => rayon::current_num_threads(),
        };
        return T::matmul(a, b, dw, threads);
    }
    let in_image = g.in_image();
    // The sum over images `images` into a fresh [k, od] buffer.
    let partial = |images: std::ops::Range<usize>, threads: usize| -> Result<Vec<T>> {
        let rows = block_rows(g);
        let mut col = vec![T::default(); rows * k];
        let mut tmp = vec![T::default(); k * od];
        let mut acc = vec![T::default(); k * od];
        for n in images {
            let src = &input[n * in_image..(n + 1) * in_image];
            let dy = &dy[n * p * od..(n + 1) * p * od];
            for first in (0..p).step_by(rows) {
                let m = rows.min(p - first);
                let col = &mut col[..m * k];
                im2col(g, src, 0, first, col);
                let a = MatRef::new(col, k, m, 1, k)?;
                let b = MatRef::new(&dy[first * od..], m, od, od, 1)?;
                T::matmul(a, b, &mut tmp, threads)?;
                for (s, &v) in acc.iter_mut().zip(&tmp) {
                    *s = s.add(v);
                }
            }
        }
        Ok(acc)
    };
    let sums = match spread(g) {
        Spread::Images => {
            let chunks = rayon::current_num_threads().min(g.batch);
            let per = g.batch.div_ceil(chunks);
            (0..chunks)
                .into_par_iter()
                .map(|c| partial(c * per..((c + 1) * per).min(g.batch), 1))
                .collect::<Result<Vec<_>>>()?
        }
        Spread::Product(t) => vec![partial(0..g.batch, t)?],
    };
    for s in sums {
        for (d, v) in dw.iter_mut().zip(s) {
            *d = d.add(v);
        }
    }
    Ok(())
}
