//! `DepthwiseConv2dNative` and its two gradients (TensorFlow's
//! `depthwise_conv_op.cc`, `depthwise_conv_grad_op.cc`): every input channel `c`
//! convolved with its own `channel_multiplier` filters, output channel
//! `c * multiplier + m`.
//!
//! Depthwise work per output element is one filter window of one channel, too
//! little for a matrix product, so these are direct loops over channel-contiguous
//! rows: the forward pass and the input gradient gather (one output row per
//! task, no two tasks write the same element); the filter gradient sums partial
//! filters of disjoint row ranges. Work of at least [`PAR_MADDS`] multiply-adds
//! runs on rayon.
//!
//! As TensorFlow's CPU kernels: `NHWC` only (`Unimplemented` for `NCHW`), equal
//! row and column strides, and the forward op rejects dilations. The gradient ops
//! accept dilations and ignore them, as TensorFlow's CPU kernels do.

use std::marker::PhantomData;

use rayon::prelude::*;

use graph::{Result, Status, TensorShape};

use super::im2col::{ConvElem, ConvScalar};
use super::params::{sizes_vector, ConvAttrs, Dim, Geometry};
use crate::op_kernel::{OpKernel, OpKernelContext};

/// Work of at least this many multiply-adds is spread over rayon.
pub const PAR_MADDS: usize = 1 << 16;

/// `DepthwiseConv2dNative`.
pub struct DepthwiseKernel<E> {
    pub(super) attrs: ConvAttrs,
    pub(super) _t: PhantomData<fn(E)>,
}

/// `DepthwiseConv2dNativeBackpropInput`.
pub struct DepthwiseBackpropInputKernel<E> {
    pub(super) attrs: ConvAttrs,
    pub(super) _t: PhantomData<fn(E)>,
}

/// `DepthwiseConv2dNativeBackpropFilter`.
pub struct DepthwiseBackpropFilterKernel<E> {
    pub(super) attrs: ConvAttrs,
    pub(super) _t: PhantomData<fn(E)>,
}

fn reject_nchw(a: &ConvAttrs) -> Result<()> {
    if a.nchw {
        return Err(Status::unimplemented(
            "Depthwise convolution on CPU is only supported for NHWC format",
        ));
    }
    Ok(())
}

/// The geometry of a depthwise convolution (`filter_depth` is the channel
/// multiplier; `out_depth = in_depth * multiplier`).
fn geometry(a: &ConvAttrs, input: &TensorShape, filter: &TensorShape) -> Result<Geometry> {
    let (c, m) = (input.dim(3), filter.dim(3));
    Geometry::new(
        a,
        input.dim(0),
        [input.dim(1), input.dim(2)],
        [filter.dim(0), filter.dim(1)],
        (c, m, c * m),
    )
}

/// The multiplier of `g` (its `filter_depth`).
fn multiplier(g: &Geometry) -> usize {
    g.filter_depth
}

fn par_rows(g: &Geometry) -> bool {
    g.batch * g.out_pixels() * g.rows.filter * g.cols.filter * g.out_depth >= PAR_MADDS
}

/// The output index `o` with `o * stride + k * dilation - pad == i`, if any.
#[inline(always)]
fn target(d: &Dim, i: usize, k: usize) -> Option<usize> {
    let t = (i + d.pad).checked_sub(k * d.dilation)?;
    (t % d.stride == 0 && t / d.stride < d.output).then_some(t / d.stride)
}

/// `out[n, oy, ox, c·M + m] = Σ input[n, iy, ix, c] · filter[ky, kx, c, m]`.
pub fn forward<T: ConvScalar>(g: &Geometry, input: &[T], filter: &[T], out: &mut [T]) {
    let (c, m, od) = (g.in_depth, multiplier(g), g.out_depth);
    let row_len = g.cols.output * od;
    if row_len == 0 || out.is_empty() {
        return;
    }
    let row = |(r, row): (usize, &mut [T])| {
        let (n, oy) = (r / g.rows.output, r % g.rows.output);
        row.fill(T::default());
        for (ox, dst) in row.chunks_exact_mut(od).enumerate() {
            for ky in 0..g.rows.filter {
                let Some(iy) = g.rows.source(oy, ky) else {
                    continue;
                };
                for kx in 0..g.cols.filter {
                    let Some(ix) = g.cols.source(ox, kx) else {
                        continue;
                    };
                    let at = ((n * g.rows.input + iy) * g.cols.input + ix) * c;
                    let src = &input[at..at + c];
                    let w = &filter[(ky * g.cols.filter + kx) * od..][..od];
                    if m == 1 {
                        // One filter per channel (MobileNets): a plain zip over
                        // the channels, which vectorizes.
                        for ((d, &w), &x) in dst.iter_mut().zip(w).zip(src) {
                            *d = d.mul_add(x, w);
                        }
                        continue;
                    }
                    for ((d, w), &x) in dst.chunks_exact_mut(m).zip(w.chunks_exact(m)).zip(src) {
                        for (d, &w) in d.iter_mut().zip(w) {
                            *d = d.mul_add(x, w);
                        }
                    }
                }
            }
        }
    };
    if par_rows(g) {
        out.par_chunks_mut(row_len).enumerate().for_each(row);
    } else {
        out.chunks_mut(row_len).enumerate().for_each(row);
    }
}

/// `dx[n, iy, ix, c] = Σ dy[n, oy, ox, c·M + m] · filter[ky, kx, c, m]` over the
/// windows that read `(iy, ix)`.
pub fn backprop_input<T: ConvScalar>(g: &Geometry, filter: &[T], dy: &[T], dx: &mut [T]) {
    let (c, m, od) = (g.in_depth, multiplier(g), g.out_depth);
    let row_len = g.cols.input * c;
    if row_len == 0 || dx.is_empty() {
        return;
    }
    let row = |(r, row): (usize, &mut [T])| {
        let (n, iy) = (r / g.rows.input, r % g.rows.input);
        row.fill(T::default());
        if m == 0 {
            return;
        }
        for (ix, dst) in row.chunks_exact_mut(c).enumerate() {
            for ky in 0..g.rows.filter {
                let Some(oy) = target(&g.rows, iy, ky) else {
                    continue;
                };
                for kx in 0..g.cols.filter {
                    let Some(ox) = target(&g.cols, ix, kx) else {
                        continue;
                    };
                    let at = ((n * g.rows.output + oy) * g.cols.output + ox) * od;
                    let grad = &dy[at..at + od];
                    let w = &filter[(ky * g.cols.filter + kx) * od..][..od];
                    if m == 1 {
                        for ((d, &gr), &w) in dst.iter_mut().zip(grad).zip(w) {
                            *d = d.mul_add(gr, w);
                        }
                        continue;
                    }
                    for ((d, gr), w) in dst
                        .iter_mut()
                        .zip(grad.chunks_exact(m))
                        .zip(w.chunks_exact(m))
                    {
                        *d = gr.iter().zip(w).fold(*d, |s, (&a, &b)| s.mul_add(a, b));
                    }
                }
            }
        }
    };
    if par_rows(g) {
        dx.par_chunks_mut(row_len).enumerate().for_each(row);
    } else {
        dx.chunks_mut(row_len).enumerate().for_each(row);
    }
}

/// `dw[ky, kx, c, m] = Σ input[n, iy, ix, c] · dy[n, oy, ox, c·M + m]`.
pub fn backprop_filter<T: ConvScalar>(g: &Geometry, input: &[T], dy: &[T], dw: &mut [T]) {
    let (c, m, od) = (g.in_depth, multiplier(g), g.out_depth);
    dw.fill(T::default());
    let rows = g.batch * g.rows.output;
    if dw.is_empty() || rows == 0 || g.cols.output == 0 {
        return;
    }
    let partial = |range: std::ops::Range<usize>| -> Vec<T> {
        let mut acc = vec![T::default(); dw.len()];
        for r in range {
            let (n, oy) = (r / g.rows.output, r % g.rows.output);
            for ox in 0..g.cols.output {
                let at = ((n * g.rows.output + oy) * g.cols.output + ox) * od;
                let grad = &dy[at..at + od];
                for ky in 0..g.rows.filter {
                    let Some(iy) = g.rows.source(oy, ky) else {
                        continue;
                    };
                    for kx in 0..g.cols.filter {
                        let Some(ix) = g.cols.source(ox, kx) else {
                            continue;
                        };
                        let at = ((n * g.rows.input + iy) * g.cols.input + ix) * c;
                        let src = &input[at..at + c];
                        let tap = &mut acc[(ky * g.cols.filter + kx) * od..][..od];
                        if m == 1 {
                            for ((t, &gv), &x) in tap.iter_mut().zip(grad).zip(src) {
                                *t = t.mul_add(x, gv);
                            }
                            continue;
                        }
                        for ((t, gr), &x) in
                            tap.chunks_exact_mut(m).zip(grad.chunks_exact(m)).zip(src)
                        {
                            for (t, &gv) in t.iter_mut().zip(gr) {
                                *t = t.mul_add(x, gv);
                            }
                        }
                    }
                }
            }
        }
        acc
    };
    let sums: Vec<Vec<T>> = if par_rows(g) {
        let chunks = rayon::current_num_threads().clamp(1, rows);
        let per = rows.div_ceil(chunks);
        (0..chunks)
            .into_par_iter()
            .map(|i| partial(i * per..((i + 1) * per).min(rows)))
            .collect()
    } else {
        vec![partial(0..rows)]
    };
    for s in sums {
        for (d, v) in dw.iter_mut().zip(s) {
            *d = d.add(v);
        }
    }
}

/// TensorFlow's checks of a depthwise node's input and filter shapes.
fn check_forward_shapes(input: &TensorShape, filter: &TensorShape) -> Result<()> {
    if input.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "input must be 4-dimensional{input}"
        )));
    }
    if filter.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "filter must be 4-dimensional: {filter}"
        )));
    }
    if input.dim(3) != filter.dim(2) {
        return Err(Status::invalid_argument(format!(
            "input and filter must have the same depth: {} vs {}",
            input.dim(3),
            filter.dim(2)
        )));
    }
    Ok(())
}

/// The geometry of a depthwise gradient, checked against `out_backprop` with
/// TensorFlow's messages. TensorFlow's CPU gradient kernels ignore the dilations
/// (for the sizes too), and so does this.
fn backprop_geometry(
    label: &str,
    a: &ConvAttrs,
    input: &TensorShape,
    filter: &TensorShape,
    dy: &TensorShape,
) -> Result<Geometry> {
    for (what, s) in [("input", input), ("filter", filter), ("out_backprop", dy)] {
        if s.rank() != 4 {
            return Err(Status::invalid_argument(format!(
                "{label}: {what} must be 4-dimensional"
            )));
        }
    }
    if input.dim(0) != dy.dim(0) {
        return Err(Status::invalid_argument(format!(
            "{label}: input and out_backprop must have the same batch size"
        )));
    }
    if input.dim(3) != filter.dim(2) {
        return Err(Status::invalid_argument(format!(
            "{label}: input and filter must have the same in_depth"
        )));
    }
    if filter.dim(2) * filter.dim(3) != dy.dim(3) {
        return Err(Status::invalid_argument(format!(
            "{label}: depth_multiplier * in_depth not equal to out_depth"
        )));
    }
    let undilated = ConvAttrs {
        dilations: [1, 1],
        ..a.clone()
    };
    let g = geometry(&undilated, input, filter)?;
    for (what, d, actual) in [("rows", g.rows, dy.dim(1)), ("columns", g.cols, dy.dim(2))] {
        if actual != d.output {
            return Err(Status::invalid_argument(format!(
                "{label}: Number of {what} of out_backprop doesn't match computed: \
                 actual = {actual}, computed = {}",
                d.output
            )));
        }
    }
    Ok(g)
}

impl<E: ConvElem> OpKernel for DepthwiseKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, filter) = (ctx.input(0)?, ctx.input(1)?);
        reject_nchw(&self.attrs)?;
        check_forward_shapes(input.shape(), filter.shape())?;
        let [dh, dw] = self.attrs.dilations;
        if dh != 1 || dw != 1 {
            return Err(Status::unimplemented(format!(
                "Current kernel implementation does not support dilations, received [1 {dh} {dw} 1]"
            )));
        }
        let g = geometry(&self.attrs, input.shape(), filter.shape())?;
        let mut out = ctx.allocate(E::DTYPE, g.output_shape())?;
        let x = E::widen(input.as_slice::<E>()?);
        let w = E::widen(filter.as_slice::<E>()?);
        E::compute_into(out.as_mut_slice::<E>()?, |dst| {
            forward(&g, &x, &w, dst);
            Ok(())
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

impl<E: ConvElem> OpKernel for DepthwiseBackpropInputKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        reject_nchw(&self.attrs)?;
        let (sizes, filter, dy) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let v = sizes_vector(sizes, "input_sizes", "DepthwiseConv2DBackpropInput")?;
        let input_shape = TensorShape::new(&v);
        let g = backprop_geometry(
            "DepthwiseConv2DBackpropInput",
            &self.attrs,
            &input_shape,
            filter.shape(),
            dy.shape(),
        )?;
        let mut out = ctx.allocate(E::DTYPE, input_shape)?;
        let w = E::widen(filter.as_slice::<E>()?);
        let dy = E::widen(dy.as_slice::<E>()?);
        E::compute_into(out.as_mut_slice::<E>()?, |dst| {
            backprop_input(&g, &w, &dy, dst);
            Ok(())
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

impl<E: ConvElem> OpKernel for DepthwiseBackpropFilterKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        reject_nchw(&self.attrs)?;
        let (input, sizes, dy) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let v = sizes_vector(sizes, "filter_sizes", "DepthwiseConv2DBackpropFilter")?;
        let filter_shape = TensorShape::new(&v);
        let g = backprop_geometry(
            "DepthwiseConv2DBackpropFilter",
            &self.attrs,
            input.shape(),
            &filter_shape,
            dy.shape(),
        )?;
        let mut out = ctx.allocate(E::DTYPE, filter_shape)?;
        let x = E::widen(input.as_slice::<E>()?);
        let dy = E::widen(dy.as_slice::<E>()?);
        E::compute_into(out.as_mut_slice::<E>()?, |dst| {
            backprop_filter(&g, &x, &dy, dst);
            Ok(())
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}
