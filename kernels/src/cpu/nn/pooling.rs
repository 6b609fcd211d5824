//! Max and average pooling over `NHWC` tensors and their gradients, after
//! TensorFlow's `maxpooling_op.cc`, `avgpooling_op.cc` and `pooling_ops_common.h`:
//! `MaxPool`, `MaxPoolV2`, `MaxPoolGrad`, `MaxPoolGradV2`, `MaxPoolGradGrad`,
//! `MaxPoolWithArgmax`, `MaxPoolGradWithArgmax`, `AvgPool` and `AvgPoolGrad`.
//!
//! TensorFlow's CPU kernels take `NHWC` only (`NCHW` is `InvalidArgument`, as there).
//! A window's maximum is its first largest element in row-major order (ties go to
//! the first, as TensorFlow's `SpatialMaxPoolWithArgMaxHelper`); padded positions
//! never count. `AvgPool` divides by the number of real elements in the window;
//! `AvgPoolGrad` spreads each gradient with TensorFlow's `GetBroadcastSize`
//! windows (which, where a window starts in the padding and is longer than the
//! input, count more elements than the forward pass; kept for TensorFlow's answers).
//!
//! Every kernel makes one pass over its output, each output row (or input row, for
//! the gradients shaped like the input) gathering what it needs, so rows are
//! independent and run on rayon's threads once the work is large enough
//! ([`PAR_MIN_WORK`]).

use std::marker::PhantomData;

use graph::ops::pooling::{windowed_output_size, Padding};
use graph::{DType, Result, Status, Tensor, TensorType};
use rayon::prelude::*;

use crate::cpu::types::{FLOAT_DTYPES, NUMERIC_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use crate::{dispatch_float, dispatch_numeric};

/// Below this many window-element visits a kernel runs on the calling thread.
pub const PAR_MIN_WORK: usize = 1 << 15;

/// An element type of the pooling kernels.
pub trait PoolElem: TensorType + PartialOrd + Send + Sync {
    /// The smallest finite value (Eigen's `NumTraits<T>::lowest()`).
    fn lowest() -> Self;
    /// `self + o` (wrapping for integers, as TensorFlow's).
    fn add(self, o: Self) -> Self;
}

macro_rules! pool_int {
    ($($t:ty),*) => {$(
        impl PoolElem for $t {
            fn lowest() -> $t { <$t>::MIN }
            fn add(self, o: $t) -> $t { self.wrapping_add(o) }
        }
    )*};
}
pool_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! pool_float {
    ($($t:ty),*) => {$(
        impl PoolElem for $t {
            fn lowest() -> $t { <$t>::MIN }
            fn add(self, o: $t) -> $t { self + o }
        }
    )*};
}
pool_float!(f32, f64, graph::f16, graph::bf16);

/// A float element of `AvgPool`: the pooling element plus division by a count.
pub trait AvgElem: PoolElem + Copy {
    /// `self / n` in this type.
    fn div_count(self, n: usize) -> Self;
    /// `T(v)` of a `double` coefficient.
    fn from_f64(v: f64) -> Self;
    /// `self * o`.
    fn mul(self, o: Self) -> Self;
}

macro_rules! avg_float {
    ($($t:ty => $from:expr),*) => {$(
        impl AvgElem for $t {
            fn div_count(self, n: usize) -> $t { self / $from(n as f64) }
            fn from_f64(v: f64) -> $t { $from(v) }
            fn mul(self, o: $t) -> $t { self * o }
        }
    )*};
}
avg_float!(f32 => |v: f64| v as f32, f64 => |v: f64| v,
    graph::f16 => graph::f16::from_f64, graph::bf16 => graph::bf16::from_f64);

/// The window attributes of a pooling node: `ksize`, `strides` and padding.
#[derive(Clone, Debug)]
struct Window {
    ksize: Vec<i64>,
    strides: Vec<i64>,
    padding: Padding,
    explicit: Vec<i64>,
}

/// Rejects a `data_format` other than `NHWC`, as TensorFlow's CPU kernels.
fn require_nhwc(c: &OpKernelConstruction<'_>, what: &str) -> Result<()> {
    if !c.node.attr.contains_key("data_format") {
        return Ok(());
    }
    let f: String = c.attr("data_format")?;
    match f.as_str() {
        "NHWC" => Ok(()),
        "NCHW" | "NCHW_VECT_C" => Err(Status::invalid_argument(format!(
            "Default {what} only supports NHWC on device type CPU"
        ))),
        _ => Err(Status::invalid_argument("Invalid data format")),
    }
}

/// TensorFlow's attribute checks on `ksize`/`strides` (in the op's constructor).
fn check_window_lists(ksize: &[i64], strides: &[i64]) -> Result<()> {
    if ksize.len() != 4 {
        return Err(Status::invalid_argument(
            "Sliding window ksize field must specify 4 dimensions",
        ));
    }
    if strides.len() != 4 {
        return Err(Status::invalid_argument(
            "Sliding window stride field must specify 4 dimensions",
        ));
    }
    if ksize[0] != 1 || strides[0] != 1 {
        return Err(Status::unimplemented(
            "Pooling is not yet supported on the batch dimension.",
        ));
    }
    Ok(())
}

impl Window {
    fn from_attrs(c: &OpKernelConstruction<'_>) -> Result<Window> {
        let ksize: Vec<i64> = c.attr("ksize")?;
        let strides: Vec<i64> = c.attr("strides")?;
        check_window_lists(&ksize, &strides)?;
        let padding = Padding::parse(&c.attr::<String>("padding")?)?;
        let explicit: Vec<i64> = if c.node.attr.contains_key("explicit_paddings") {
            c.attr("explicit_paddings")?
        } else {
            vec![]
        };
        if let Padding::Explicit(..) = padding {
            if explicit.len() != 8 {
                return Err(Status::invalid_argument(format!(
                    "explicit_paddings attribute must contain 8 values, but got: {}",
                    explicit.len()
                )));
            }
            if explicit.iter().any(|&p| p < 0) {
                return Err(Status::invalid_argument(
                    "All elements of explicit_paddings must be nonnegative",
                ));
            }
            let k = &ksize;
            for (i, side) in ["Top", "Bottom", "Left", "Right"].iter().enumerate() {
                let dim = 1 + i / 2;
                if explicit[2 + i] >= k[dim] {
                    return Err(Status::invalid_argument(format!(
                        "{side} padding {} needs to be smaller than the window size {}",
                        explicit[2 + i],
                        k[dim]
                    )));
                }
            }
            if explicit[0] != 0 || explicit[1] != 0 || explicit[6] != 0 || explicit[7] != 0 {
                return Err(Status::unimplemented(
                    "Pooling is not yet supported on the batch or depth dimension.",
                ));
            }
        }
        Ok(Window {
            ksize,
            strides,
            padding,
            explicit,
        })
    }

    /// A window from `MaxPoolV2`'s tensor inputs.
    fn from_inputs(ctx: &OpKernelContext<'_>, first: usize, padding: Padding) -> Result<Window> {
        let ints = |i: usize| -> Result<Vec<i64>> {
            let t = ctx.input(i)?;
            Ok(t.as_slice::<i32>()?.iter().map(|&v| v as i64).collect())
        };
        let (ksize, strides) = (ints(first)?, ints(first + 1)?);
        check_window_lists(&ksize, &strides)?;
        Ok(Window {
            ksize,
            strides,
            padding,
            explicit: vec![],
        })
    }

    fn padding_for(&self, dim: usize) -> Padding {
        match self.padding {
            Padding::Explicit(..) => {
                Padding::Explicit(self.explicit[2 * dim], self.explicit[2 * dim + 1])
            }
            p => p,
        }
    }

    /// TensorFlow's `PoolParameters` for an input of shape `dims`.
    fn params(&self, dims: &[usize]) -> Result<Params> {
        if dims.len() != 4 {
            return Err(Status::invalid_argument(format!(
                "tensor_in_shape must have 2 spatial dimensions. {} 0",
                dims.len()
            )));
        }
        if self.ksize.iter().any(|&k| k <= 0) {
            let list: Vec<String> = self.ksize.iter().map(i64::to_string).collect();
            return Err(Status::invalid_argument(format!(
                "Sliding window ksize must be positive. The specified or inferred ksize is: {}",
                list.join(",")
            )));
        }
        let (kr, kc, kd) = (self.ksize[1], self.ksize[2], self.ksize[3]);
        let depth = dims[3] as i64;
        if kd != 1 && (kr != 1 || kc != 1) {
            return Err(Status::unimplemented(
                "MaxPooling supports exactly one of pooling across depth or pooling across \
                 width/height.",
            ));
        }
        let mut p = Params {
            batch: dims[0],
            in_rows: dims[1],
            in_cols: dims[2],
            depth: dims[3],
            out_rows: dims[1],
            out_cols: dims[2],
            out_depth: dims[3],
            k_rows: kr as usize,
            k_cols: kc as usize,
            k_depth: kd as usize,
            s_rows: self.strides[1] as usize,
            s_cols: self.strides[2] as usize,
            pad_rows: 0,
            pad_cols: 0,
        };
        if kd == 1 {
            let (r, pr) =
                windowed_output_size(dims[1] as i64, kr, self.strides[1], self.padding_for(1))?;
            let (c, pc) =
                windowed_output_size(dims[2] as i64, kc, self.strides[2], self.padding_for(2))?;
            p.out_rows = r as usize;
            p.out_cols = c as usize;
            p.pad_rows = pr as usize;
            p.pad_cols = pc as usize;
        } else {
            if depth % kd != 0 {
                return Err(Status::unimplemented(
                    "Depthwise max pooling requires the depth window to evenly divide the \
                     input depth",
                ));
            }
            if self.strides[3] != kd {
                return Err(Status::unimplemented(
                    "Depthwise max pooling requires the depth window to equal the depth stride",
                ));
            }
            p.out_depth = (depth / kd) as usize;
        }
        Ok(p)
    }
}

/// The geometry of one pooling (TensorFlow's `PoolParameters`), `NHWC`.
#[derive(Clone, Copy, Debug)]
struct Params {
    batch: usize,
    in_rows: usize,
    in_cols: usize,
    depth: usize,
    out_rows: usize,
    out_cols: usize,
    out_depth: usize,
    k_rows: usize,
    k_cols: usize,
    k_depth: usize,
    s_rows: usize,
    s_cols: usize,
    pad_rows: usize,
    pad_cols: usize,
}

impl Params {
    fn out_dims(&self) -> [usize; 4] {
        [self.batch, self.out_rows, self.out_cols, self.out_depth]
    }

    fn in_dims(&self) -> [usize; 4] {
        [self.batch, self.in_rows, self.in_cols, self.depth]
    }

    /// The input rows of output row `r` (start inclusive, end exclusive).
    fn rows_of(&self, r: usize) -> (usize, usize) {
        span(r, self.s_rows, self.pad_rows, self.k_rows, self.in_rows)
    }

    fn cols_of(&self, c: usize) -> (usize, usize) {
        span(c, self.s_cols, self.pad_cols, self.k_cols, self.in_cols)
    }

    /// Window visits of a forward pass, for the parallelism threshold.
    fn work(&self) -> usize {
        self.batch
            .saturating_mul(self.out_rows)
            .saturating_mul(self.out_cols)
            .saturating_mul(self.depth)
            .saturating_mul(self.k_rows.saturating_mul(self.k_cols))
    }
}

/// `[max(o*s - pad, 0), min(o*s - pad + k, n))`, empty when the window lies in
/// the padding.
fn span(o: usize, s: usize, pad: usize, k: usize, n: usize) -> (usize, usize) {
    let start = (o * s) as i64 - pad as i64;
    let lo = start.max(0) as usize;
    let hi = (start + k as i64).clamp(0, n as i64) as usize;
    (lo.min(hi), hi)
}

/// Runs `f(row_index, row)` over `rows` of `out` (each `row_len` long), in
/// parallel when `work` is large.
fn for_rows<T: Send>(
    out: &mut [T],
    row_len: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) -> Result<()> + Sync + Send,
) -> Result<()> {
    if row_len == 0 {
        return Ok(());
    }
    if work >= PAR_MIN_WORK && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(row_len)
            .enumerate()
            .try_for_each(|(i, row)| f(i, row))
    } else {
        out.chunks_mut(row_len)
            .enumerate()
            .try_for_each(|(i, row)| f(i, row))
    }
}

/// The flat input index (within its image) of the first maximum of every output
/// element of image row `(b, r)`, `usize::MAX` for a window entirely in padding.
fn argmax_row<T: PoolElem>(p: &Params, x: &[T], b: usize, r: usize, arg: &mut [usize]) {
    let img = p.in_rows * p.in_cols * p.depth;
    let xb = &x[b * img..(b + 1) * img];
    let (h0, h1) = p.rows_of(r);
    let mut best: Vec<T> = vec![T::lowest(); p.depth];
    for c in 0..p.out_cols {
        let (w0, w1) = p.cols_of(c);
        let a = &mut arg[c * p.depth..(c + 1) * p.depth];
        a.fill(usize::MAX);
        for h in h0..h1 {
            for w in w0..w1 {
                let base = (h * p.in_cols + w) * p.depth;
                let px = &xb[base..base + p.depth];
                for d in 0..p.depth {
                    if a[d] == usize::MAX || best[d] < px[d] {
                        best[d] = px[d];
                        a[d] = base + d;
                    }
                }
            }
        }
    }
}

/// `MaxPool`/`MaxPoolV2` of `x` (spatial or depth windows).
fn max_pool<T: PoolElem>(p: &Params, x: &[T], out: &mut [T]) -> Result<()> {
    let img = p.in_rows * p.in_cols * p.depth;
    if p.k_depth != 1 {
        // Depth windows: each pixel's channels in groups of k_depth.
        return for_rows(out, p.out_depth, p.work() * p.k_depth, |i, o| {
            let px = &x[i * p.depth..(i + 1) * p.depth];
            for (g, v) in o.iter_mut().enumerate() {
                let grp = &px[g * p.k_depth..(g + 1) * p.k_depth];
                let mut m = T::lowest();
                for &e in grp {
                    if m < e {
                        m = e;
                    }
                }
                *v = m;
            }
            Ok(())
        });
    }
    let row_len = p.out_cols * p.depth;
    for_rows(out, row_len, p.work(), |i, o| {
        let (b, r) = (i / p.out_rows, i % p.out_rows);
        let xb = &x[b * img..(b + 1) * img];
        let (h0, h1) = p.rows_of(r);
        for (c, oc) in o.chunks_exact_mut(p.depth).enumerate() {
            let (w0, w1) = p.cols_of(c);
            // From `lowest()`, as TensorFlow: a window of -inf gives lowest().
            oc.fill(T::lowest());
            for h in h0..h1 {
                for w in w0..w1 {
                    let base = (h * p.in_cols + w) * p.depth;
                    for (m, &v) in oc.iter_mut().zip(&xb[base..base + p.depth]) {
                        if *m < v {
                            *m = v;
                        }
                    }
                }
            }
        }
        Ok(())
    })
}

/// `MaxPool`.
pub struct MaxPoolKernel<T> {
    window: Window,
    _t: PhantomData<fn(T)>,
}

fn run_max_pool<T: PoolElem>(ctx: &mut OpKernelContext<'_>, window: &Window) -> Result<()> {
    let x = ctx.input(0)?;
    let p = window.params(x.dims())?;
    let mut out = ctx.allocate(T::DTYPE, &p.out_dims()[..])?;
    max_pool(&p, x.as_slice::<T>()?, out.as_mut_slice::<T>()?)?;
    ctx.set_output(0, out)
}

impl<T: PoolElem> OpKernel for MaxPoolKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        run_max_pool::<T>(ctx, &self.window)
    }
}

/// `MaxPoolV2`: the window from the `ksize`/`strides` inputs.
pub struct MaxPoolV2Kernel<T> {
    padding: Padding,
    _t: PhantomData<fn(T)>,
}

impl<T: PoolElem> OpKernel for MaxPoolV2Kernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let window = Window::from_inputs(ctx, 1, self.padding)?;
        run_max_pool::<T>(ctx, &window)
    }
}

/// Checks that `t` has the shape `want`, as TensorFlow's gradient kernels.
fn expect_shape(t: &Tensor, want: &[usize], what: &str) -> Result<()> {
    if t.dims() != want {
        return Err(Status::invalid_argument(format!(
            "Expected {what} shape to be {want:?}, but got {:?}",
            t.dims()
        )));
    }
    Ok(())
}

fn rank4(t: &Tensor, what: &str) -> Result<()> {
    if t.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "{what} must be 4-dimensional"
        )));
    }
    Ok(())
}

/// `MaxPoolGrad`/`MaxPoolGradV2`: each output gradient goes to its window's
/// first maximum in `orig_input` (recomputed; `orig_output` is only checked for
/// its shape, as TensorFlow's CPU kernel).
fn run_max_pool_grad<T: PoolElem>(ctx: &mut OpKernelContext<'_>, window: &Window) -> Result<()> {
    let (x, y, g) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    rank4(x, "orig_input")?;
    rank4(y, "orig_output")?;
    rank4(g, "grad")?;
    let p = window.params(x.dims())?;
    if p.k_depth != 1 {
        return Err(Status::unimplemented(
            "Depthwise max pooling is not supported by MaxPoolGrad on CPU",
        ));
    }
    expect_shape(y, &p.out_dims(), "orig_output")?;
    expect_shape(g, &p.out_dims(), "grad")?;
    let (xs, gs) = (x.as_slice::<T>()?, g.as_slice::<T>()?);
    let mut out = ctx.allocate(T::DTYPE, &p.in_dims()[..])?;
    let o = out.as_mut_slice::<T>()?;
    let img = p.in_rows * p.in_cols * p.depth;
    if img > 0 && p.depth > 0 {
        let image = |(b, o): (usize, &mut [T])| max_pool_grad_image(&p, xs, gs, b, o);
        if p.work() >= PAR_MIN_WORK && p.batch > 1 && rayon::current_num_threads() > 1 {
            o.par_chunks_mut(img).enumerate().for_each(image);
        } else {
            o.chunks_mut(img).enumerate().for_each(image);
        }
    }
    ctx.set_output(0, out)
}

/// One image `b` of `MaxPoolGrad`: for each output element, the first maximum
/// of its window (row-major, the first element kept on ties and NaN, as
/// [`argmax_row`]) receives its gradient, added into `o` (the image's input
/// gradient, zeroed). One pass over the windows, as TensorFlow's CPU kernel;
/// a window entirely in the padding passes nothing.
fn max_pool_grad_image<T: PoolElem>(p: &Params, xs: &[T], gs: &[T], b: usize, o: &mut [T]) {
    let depth = p.depth;
    let img = p.in_rows * p.in_cols * depth;
    let out_img = p.out_rows * p.out_cols * depth;
    let xb = &xs[b * img..(b + 1) * img];
    let gb = &gs[b * out_img..(b + 1) * out_img];
    let mut best = vec![T::lowest(); depth];
    let mut at = vec![0usize; depth];
    for r in 0..p.out_rows {
        let (h0, h1) = p.rows_of(r);
        for c in 0..p.out_cols {
            let (w0, w1) = p.cols_of(c);
            if h0 >= h1 || w0 >= w1 {
                continue;
            }
            let first = (h0 * p.in_cols + w0) * depth;
            best.copy_from_slice(&xb[first..first + depth]);
            for (d, a) in at.iter_mut().enumerate() {
                *a = first + d;
            }
            for h in h0..h1 {
                for w in w0..w1 {
                    let base = (h * p.in_cols + w) * depth;
                    if base == first {
                        continue;
                    }
                    let px = &xb[base..base + depth];
                    for (d, ((m, a), &v)) in best.iter_mut().zip(at.iter_mut()).zip(px).enumerate()
                    {
                        if *m < v {
                            *m = v;
                            *a = base + d;
                        }
                    }
                }
            }
            let g = &gb[(r * p.out_cols + c) * depth..][..depth];
            for (&a, &gv) in at.iter().zip(g) {
                o[a] = o[a].add(gv);
            }
        }
    }
}

/// `MaxPoolGrad`.
pub struct MaxPoolGradKernel<T> {
    window: Window,
    _t: PhantomData<fn(T)>,
}

impl<T: PoolElem> OpKernel for MaxPoolGradKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        run_max_pool_grad::<T>(ctx, &self.window)
    }
}

/// `MaxPoolGradV2`.
pub struct MaxPoolGradV2Kernel<T> {
    padding: Padding,
    _t: PhantomData<fn(T)>,
}

impl<T: PoolElem> OpKernel for MaxPoolGradV2Kernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let window = Window::from_inputs(ctx, 3, self.padding)?;
        run_max_pool_grad::<T>(ctx, &window)
    }
}

/// `MaxPoolGradGrad`: each output element takes `grad` at the first input of its
/// window equal to `orig_output` there (zero when none is).
pub struct MaxPoolGradGradKernel<T> {
    window: Window,
    _t: PhantomData<fn(T)>,
}

impl<T: PoolElem> OpKernel for MaxPoolGradGradKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (x, y, g) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        rank4(x, "orig_input")?;
        rank4(y, "orig_output")?;
        rank4(g, "grad")?;
        let p = self.window.params(x.dims())?;
        if p.k_depth != 1 {
            return Err(Status::unimplemented(
                "MaxPoolGradGrad is not yet supported on the depth dimension.",
            ));
        }
        expect_shape(y, &p.out_dims(), "orig_output")?;
        expect_shape(g, &p.in_dims(), "grad")?;
        let (xs, ys, gs) = (x.as_slice::<T>()?, y.as_slice::<T>()?, g.as_slice::<T>()?);
        let img = p.in_rows * p.in_cols * p.depth;
        let mut out = ctx.allocate(T::DTYPE, &p.out_dims()[..])?;
        let o = out.as_mut_slice::<T>()?;
        let row_len = p.out_cols * p.depth;
        for_rows(o, row_len, p.work(), |i, row| {
            let (b, r) = (i / p.out_rows, i % p.out_rows);
            let (h0, h1) = p.rows_of(r);
            let yrow = &ys[i * row_len..(i + 1) * row_len];
            for c in 0..p.out_cols {
                let (w0, w1) = p.cols_of(c);
                for d in 0..p.depth {
                    let want = yrow[c * p.depth + d];
                    let mut found = None;
                    'win: for h in h0..h1 {
                        for w in w0..w1 {
                            let at = b * img + (h * p.in_cols + w) * p.depth + d;
                            if xs[at] == want {
                                found = Some(gs[at]);
                                break 'win;
                            }
                        }
                    }
                    row[c * p.depth + d] = found.unwrap_or_default();
                }
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

/// An argmax index type.
pub trait ArgIndex: TensorType + Copy + Send + Sync {
    /// From a flat index.
    fn from_usize(v: usize) -> Self;
    /// To a flat index (negative values become `None`).
    fn to_usize(self) -> Option<usize>;
}

impl ArgIndex for i64 {
    fn from_usize(v: usize) -> i64 {
        v as i64
    }
    fn to_usize(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

impl ArgIndex for i32 {
    fn from_usize(v: usize) -> i32 {
        v as i32
    }
    fn to_usize(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

/// `MaxPoolWithArgmax`: the maxima and their flat indices
/// (`(y * width + x) * channels + c`, plus `b * height * width * channels` with
/// `include_batch_in_index`).
pub struct MaxPoolWithArgmaxKernel<T, I> {
    window: Window,
    include_batch: bool,
    _t: PhantomData<fn(T, I)>,
}

impl<T: PoolElem, I: ArgIndex> OpKernel for MaxPoolWithArgmaxKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.num_elements() == 0 {
            // TensorFlow's kernel rejects an empty input.
            return Err(Status::invalid_argument(
                "tensor_in must not be empty for MaxPoolWithArgmax",
            ));
        }
        let p = self.window.params(x.dims())?;
        if p.k_depth != 1 {
            return Err(Status::unimplemented(
                "Depthwise max pooling is not supported by MaxPoolWithArgmax",
            ));
        }
        let xs = x.as_slice::<T>()?;
        let img = p.in_rows * p.in_cols * p.depth;
        let n = p.out_dims().iter().product();
        let mut arg = vec![usize::MAX; n];
        for_rows(&mut arg, p.out_cols * p.depth, p.work(), |i, a| {
            argmax_row(&p, xs, i / p.out_rows.max(1), i % p.out_rows.max(1), a);
            Ok(())
        })?;
        let out_img = p.out_rows * p.out_cols * p.depth;
        let mut vals = Vec::with_capacity(n);
        let mut idx = Vec::with_capacity(n);
        for (k, &a) in arg.iter().enumerate() {
            let b = k / out_img.max(1);
            if a == usize::MAX {
                vals.push(T::lowest());
                idx.push(I::from_usize(0));
            } else {
                vals.push(xs[b * img + a]);
                let off = if self.include_batch { b * img } else { 0 };
                idx.push(I::from_usize(a + off));
            }
        }
        let dims = p.out_dims();
        ctx.set_output(0, Tensor::new(&dims, vals)?)?;
        ctx.set_output(1, Tensor::new(&dims, idx)?)
    }
}

/// `MaxPoolGradWithArgmax`: each gradient added at its `argmax` index (which must
/// lie in its own image; TensorFlow aborts the process there, this is
/// `InvalidArgument`).
pub struct MaxPoolGradWithArgmaxKernel<T, I> {
    window: Window,
    include_batch: bool,
    _t: PhantomData<fn(T, I)>,
}

impl<T: PoolElem, I: ArgIndex> OpKernel for MaxPoolGradWithArgmaxKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (x, g, a) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let p = self.window.params(x.dims())?;
        expect_shape(g, &p.out_dims(), "grad")?;
        expect_shape(a, &p.out_dims(), "argmax")?;
        let (gs, args) = (g.as_slice::<T>()?, a.as_slice::<I>()?);
        let img = p.in_rows * p.in_cols * p.depth;
        let out_img = p.out_rows * p.out_cols * p.depth;
        let mut out = ctx.allocate(T::DTYPE, &p.in_dims()[..])?;
        let o = out.as_mut_slice::<T>()?;
        let include_batch = self.include_batch;
        for_rows(o, img, p.work(), |b, image| {
            let start = if include_batch { b * img } else { 0 };
            for k in b * out_img..(b + 1) * out_img {
                let at = args[k]
                    .to_usize()
                    .and_then(|i| i.checked_sub(start))
                    .filter(|&i| i < img)
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "Invalid argmax index for the gradient of max pooling at {k}"
                        ))
                    })?;
                image[at] = image[at].add(gs[k]);
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

/// `AvgPool`: each window's sum over its real elements (row-major, in `T`)
/// divided by their count.
pub struct AvgPoolKernel<T> {
    window: Window,
    _t: PhantomData<fn(T)>,
}

impl<T: AvgElem> OpKernel for AvgPoolKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let p = self.window.params(x.dims())?;
        if p.k_depth != 1 {
            return Err(Status::unimplemented(
                "Non-spatial pooling is not yet supported. Volunteers? :)",
            ));
        }
        let xs = x.as_slice::<T>()?;
        let img = p.in_rows * p.in_cols * p.depth;
        let mut out = ctx.allocate(T::DTYPE, &p.out_dims()[..])?;
        let o = out.as_mut_slice::<T>()?;
        for_rows(o, p.out_cols * p.depth, p.work(), |i, row| {
            let (b, r) = (i / p.out_rows, i % p.out_rows);
            let xb = &xs[b * img..(b + 1) * img];
            let (h0, h1) = p.rows_of(r);
            for (c, oc) in row.chunks_exact_mut(p.depth).enumerate() {
                let (w0, w1) = p.cols_of(c);
                oc.fill(T::default());
                for h in h0..h1 {
                    for w in w0..w1 {
                        let base = (h * p.in_cols + w) * p.depth;
                        for (s, &v) in oc.iter_mut().zip(&xb[base..base + p.depth]) {
                            *s = s.add(v);
                        }
                    }
                }
                let n = (h1 - h0) * (w1 - w0);
                oc.iter_mut().for_each(|s| *s = s.div_count(n));
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

/// TensorFlow's `GetBroadcastSize`: the first input row and the number of rows
/// an output row's gradient is spread over.
fn broadcast_size(o: usize, n: usize, k: usize, s: usize, pad: usize) -> (usize, usize) {
    let mut index = o * s;
    let mut size = k;
    if index < pad {
        size = k + index - pad;
        index = 0;
    } else {
        index -= pad;
    }
    if index + k > n {
        size = (n.saturating_sub(index)).min(k);
    }
    (index, size)
}

/// For each of `n_in` inputs, the outputs (in order) whose broadcast window holds
/// it, as offsets into one flat list: `(starts, outputs)`.
fn broadcast_owners(sizes: &[(usize, usize)], n_in: usize) -> (Vec<usize>, Vec<usize>) {
    let mut lists: Vec<Vec<usize>> = vec![Vec::new(); n_in];
    for (o, &(start, size)) in sizes.iter().enumerate() {
        for l in lists.iter_mut().skip(start).take(size) {
            l.push(o);
        }
    }
    let mut starts = Vec::with_capacity(n_in + 1);
    let mut flat = Vec::new();
    for l in lists {
        starts.push(flat.len());
        flat.extend(l);
    }
    starts.push(flat.len());
    (starts, flat)
}

/// `AvgPoolGrad`: every input gathers `grad * (1 / window size)` from the outputs
/// whose (TensorFlow `GetBroadcastSize`) windows hold it, in output order.
pub struct AvgPoolGradKernel<T> {
    window: Window,
    _t: PhantomData<fn(T)>,
}

impl<T: AvgElem> OpKernel for AvgPoolGradKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (shape, g) = (ctx.input(0)?, ctx.input(1)?);
        if shape.rank() != 1 || shape.num_elements() != 4 {
            return Err(Status::invalid_argument(
                "out_backprop must be 1-dimensional and 4 elements",
            ));
        }
        rank4(g, "out_backprop")?;
        let dims: Vec<usize> = shape
            .as_slice::<i32>()?
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| {
                    Status::invalid_argument(format!(
                        "orig_input_shape must be non-negative, got {d}"
                    ))
                })
            })
            .collect::<Result<_>>()?;
        let p = self.window.params(&dims)?;
        if p.k_depth != 1 {
            return Err(Status::unimplemented(
                "Non-spatial pooling is not yet supported. Volunteers? :)",
            ));
        }
        expect_shape(g, &p.out_dims(), "out_backprop")?;
        let gs = g.as_slice::<T>()?;
        let row_sizes: Vec<(usize, usize)> = (0..p.out_rows)
            .map(|r| broadcast_size(r, p.in_rows, p.k_rows, p.s_rows, p.pad_rows))
            .collect();
        let col_sizes: Vec<(usize, usize)> = (0..p.out_cols)
            .map(|c| broadcast_size(c, p.in_cols, p.k_cols, p.s_cols, p.pad_cols))
            .collect();
        let (rstart, rown) = broadcast_owners(&row_sizes, p.in_rows);
        let (cstart, cown) = broadcast_owners(&col_sizes, p.in_cols);
        let out_img = p.out_rows * p.out_cols * p.depth;
        let mut out = ctx.allocate(T::DTYPE, &p.in_dims()[..])?;
        let o = out.as_mut_slice::<T>()?;
        for_rows(o, p.in_cols * p.depth, p.work(), |i, row| {
            let (b, h) = (i / p.in_rows, i % p.in_rows);
            for w in 0..p.in_cols {
                let px = &mut row[w * p.depth..(w + 1) * p.depth];
                for &r in &rown[rstart[h]..rstart[h + 1]] {
                    for &c in &cown[cstart[w]..cstart[w + 1]] {
                        let n = row_sizes[r].1 * col_sizes[c].1;
                        let coeff = T::from_f64(1.0 / n as f64);
                        let base = b * out_img + (r * p.out_cols + c) * p.depth;
                        for (v, &gv) in px.iter_mut().zip(&gs[base..base + p.depth]) {
                            *v = v.add(gv.mul(coeff));
                        }
                    }
                }
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn padding_attr(c: &OpKernelConstruction<'_>) -> Result<Padding> {
    Padding::parse(&c.attr::<String>("padding")?)
}

fn make_max_pool(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    require_nhwc(c, "MaxPoolingOp")?;
    let window = Window::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(MaxPoolKernel::<T> { window, _t: PhantomData }) as Box<dyn OpKernel>))
}

fn make_max_pool_v2(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let f: String = c.attr("data_format")?;
    if f != "NHWC" {
        return Err(Status::invalid_argument(format!(
            "MaxPoolingV2Op only supports NHWC or NCHW_VECT_C. Got: {f}"
        )));
    }
    let padding = padding_attr(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(MaxPoolV2Kernel::<T> { padding, _t: PhantomData }) as Box<dyn OpKernel>))
}

fn make_max_pool_grad(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    require_nhwc(c, "MaxPoolingGradOp")?;
    let window = Window::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(MaxPoolGradKernel::<T> { window, _t: PhantomData }) as Box<dyn OpKernel>))
}

fn make_max_pool_grad_v2(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    require_nhwc(c, "MaxPoolingGradOp")?;
    let padding = padding_attr(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(MaxPoolGradV2Kernel::<T> { padding, _t: PhantomData }) as Box<dyn OpKernel>))
}

fn make_max_pool_grad_grad(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    require_nhwc(c, "MaxPoolingGradGradOp")?;
    let window = Window::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(MaxPoolGradGradKernel::<T> { window, _t: PhantomData }) as Box<dyn OpKernel>))
}

fn make_max_pool_with_argmax(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let window = Window::from_attrs(c)?;
    let include_batch: bool = c.attr("include_batch_in_index")?;
    let t: DType = c.attr("T")?;
    let i: DType = c.attr("Targmax")?;
    dispatch_numeric!(t, T => match i {
        DType::I32 => Ok(Box::new(MaxPoolWithArgmaxKernel::<T, i32> { window, include_batch, _t: PhantomData }) as Box<dyn OpKernel>),
        _ => Ok(Box::new(MaxPoolWithArgmaxKernel::<T, i64> { window, include_batch, _t: PhantomData }) as Box<dyn OpKernel>),
    })
}

fn make_max_pool_grad_with_argmax(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let window = Window::from_attrs(c)?;
    let include_batch: bool = c.attr("include_batch_in_index")?;
    let t: DType = c.attr("T")?;
    let i: DType = c.attr("Targmax")?;
    dispatch_numeric!(t, T => match i {
        DType::I32 => Ok(Box::new(MaxPoolGradWithArgmaxKernel::<T, i32> { window, include_batch, _t: PhantomData }) as Box<dyn OpKernel>),
        _ => Ok(Box::new(MaxPoolGradWithArgmaxKernel::<T, i64> { window, include_batch, _t: PhantomData }) as Box<dyn OpKernel>),
    })
}

fn make_avg_pool(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    require_nhwc(c, "AvgPoolingOp")?;
    let window = Window::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_float!(t, T => Ok(Box::new(AvgPoolKernel::<T> { window, _t: PhantomData }) as Box<dyn OpKernel>))
}

fn make_avg_pool_grad(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    require_nhwc(c, "AvgPoolingGradOp")?;
    let window = Window::from_attrs(c)?;
    let t: DType = c.attr("T")?;
    dispatch_float!(t, T => Ok(Box::new(AvgPoolGradKernel::<T> { window, _t: PhantomData }) as Box<dyn OpKernel>))
}

/// Registers the pooling kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    let numeric: [(&'static str, crate::registry::KernelFactory); 6] = [
        ("MaxPool", make_max_pool),
        ("MaxPoolV2", make_max_pool_v2),
        ("MaxPoolGrad", make_max_pool_grad),
        ("MaxPoolGradV2", make_max_pool_grad_v2),
        ("MaxPoolGradGrad", make_max_pool_grad_grad),
        ("MaxPoolWithArgmax", make_max_pool_with_argmax),
    ];
    for (op, f) in numeric {
        r.register(KernelDef::cpu(op, f).type_constraint("T", NUMERIC_DTYPES));
    }
    // TensorFlow's CPU kernel takes int64 indices only (int32: NotFound).
    r.register(
        KernelDef::cpu("MaxPoolGradWithArgmax", make_max_pool_grad_with_argmax)
            .type_constraint("T", NUMERIC_DTYPES)
            .type_constraint("Targmax", &[DType::I64]),
    );
    r.register(KernelDef::cpu("AvgPool", make_avg_pool).type_constraint("T", FLOAT_DTYPES));
    r.register(
        KernelDef::cpu("AvgPoolGrad", make_avg_pool_grad).type_constraint("T", FLOAT_DTYPES),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, Tensor};

    fn attrs(k: i64, s: i64, padding: &str) -> Vec<(&'static str, AttrValue)> {
        vec![
            ("ksize", AttrValue::from(vec![1, k, k, 1])),
            ("strides", AttrValue::from(vec![1, s, s, 1])),
            ("padding", AttrValue::from(padding)),
        ]
    }

    #[test]
    fn max_and_avg_pool_small() {
        // 1x3x3x1: 0..9
        let x = Tensor::new(&[1, 3, 3, 1], (0..9).map(|v| v as f32).collect()).unwrap();
        let out = run_op("MaxPool", &attrs(2, 1, "VALID"), vec![x.clone()]).unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[1, 2, 2, 1], vec![4.0f32, 5.0, 7.0, 8.0]).unwrap()
        );
        // SAME with stride 2: windows [0,1]x[0,1], [0,1]x[2], [2]x[0,1], [2]x[2].
        let out = run_op("AvgPool", &attrs(2, 2, "SAME"), vec![x.clone()]).unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[1, 2, 2, 1], vec![2.0f32, 3.5, 6.5, 8.0]).unwrap()
        );
        let e = run_op(
            "MaxPool",
            &attrs(2, 1, "VALID"),
            vec![Tensor::zeros(graph::DType::F32, [3, 3])],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn argmax_gradient_rejects_foreign_indices() {
        let x = Tensor::zeros(graph::DType::F32, [1, 2, 2, 1]);
        let g = Tensor::new(&[1, 1, 1, 1], vec![1.0f32]).unwrap();
        let a = Tensor::new(&[1, 1, 1, 1], vec![7i64]).unwrap();
        let mut at = attrs(2, 2, "VALID");
        at.push(("Targmax", AttrValue::from(graph::DType::I64)));
        let e = run_op("MaxPoolGradWithArgmax", &at, vec![x.clone(), g.clone(), a]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let a = Tensor::new(&[1, 1, 1, 1], vec![3i64]).unwrap();
        let out = run_op("MaxPoolGradWithArgmax", &at, vec![x, g, a]).unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[1, 2, 2, 1], vec![0.0f32, 0.0, 0.0, 1.0]).unwrap()
        );
    }
}
