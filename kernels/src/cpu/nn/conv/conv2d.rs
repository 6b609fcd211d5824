//! The `Conv2D`, `Conv2DBackpropInput` and `Conv2DBackpropFilter` kernels: the
//! shape checks of TensorFlow's `conv_ops.cc` (`ComputeConv2DDimension`) and
//! `conv_grad_shape_utils.cc` (`ConvBackpropComputeDimensionsV2`), with their
//! messages, then the products of [`super::gemm_conv`].
//!
//! As TensorFlow's CPU kernels: only `NHWC` (`Conv2D` answers `Unimplemented` for
//! `NCHW`, the backprops `InvalidArgument`); `Conv2D` supports grouped
//! convolution, its gradients do not. Unlike TensorFlow's CPU kernels (which
//! reject them), the backprops support dilations, as its GPU kernels do.

use std::marker::PhantomData;

use graph::{Result, Status, Tensor, TensorShape};

use super::gemm_conv;
use super::im2col::ConvElem;
use super::params::{sizes_vector, ConvAttrs, Geometry};
use crate::op_kernel::{OpKernel, OpKernelContext};

/// `Conv2D`.
pub struct Conv2DKernel<E> {
    pub(super) attrs: ConvAttrs,
    pub(super) _t: PhantomData<fn(E)>,
}

/// `Conv2DBackpropInput`.
pub struct Conv2DBackpropInputKernel<E> {
    pub(super) attrs: ConvAttrs,
    pub(super) _t: PhantomData<fn(E)>,
}

/// `Conv2DBackpropFilter`.
pub struct Conv2DBackpropFilterKernel<E> {
    pub(super) attrs: ConvAttrs,
    pub(super) _t: PhantomData<fn(E)>,
}

/// TensorFlow's `ComputeConv2DDimension` for `NHWC`.
pub(super) fn forward_geometry(
    a: &ConvAttrs,
    input: &TensorShape,
    filter: &TensorShape,
) -> Result<Geometry> {
    if input.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "convolution input must be 4-dimensional: {input}"
        )));
    }
    if filter.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "convolution filter must be 4-dimensional: {filter}"
        )));
    }
    let (in_depth, filter_depth, out_depth) = (input.dim(3), filter.dim(2), filter.dim(3));
    if filter_depth == 0 {
        return Err(Status::invalid_argument(format!(
            "filter depth must be stricly positive, got {filter_depth}"
        )));
    }
    if in_depth % filter_depth != 0 {
        return Err(Status::invalid_argument(format!(
            "input depth must be evenly divisible by filter depth: {in_depth} vs {filter_depth}"
        )));
    }
    let groups = in_depth / filter_depth;
    if groups > 0 && out_depth % groups != 0 {
        return Err(Status::invalid_argument(format!(
            "output depth must be evenly divisible by number of groups: {out_depth} vs {groups}"
        )));
    }
    Geometry::new(
        a,
        input.dim(0),
        [input.dim(1), input.dim(2)],
        [filter.dim(0), filter.dim(1)],
        (in_depth, filter_depth, out_depth),
    )
}

/// TensorFlow's `ConvBackpropComputeDimensionsV2` for `NHWC`: the geometry of the
/// convolution whose gradient this is, checked against `out_backprop`.
pub(super) fn backprop_geometry(
    label: &str,
    a: &ConvAttrs,
    input: &TensorShape,
    filter: &TensorShape,
    dy: &TensorShape,
) -> Result<Geometry> {
    if input.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "{label}: input must be 4-dimensional"
        )));
    }
    if filter.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "{label}: filter must be 4-dimensional"
        )));
    }
    if dy.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "{label}: out_backprop must be 4-dimensional"
        )));
    }
    if input.dim(0) != dy.dim(0) {
        return Err(Status::invalid_argument(format!(
            "{label}: input and out_backprop must have the same batch size. Input batch: {}, \
             outbackprop batch: {}, batch_dim: 0",
            input.dim(0),
            dy.dim(0)
        )));
    }
    let (in_depth, filter_depth) = (input.dim(3), filter.dim(2));
    if filter_depth == 0 || in_depth % filter_depth != 0 {
        return Err(Status::invalid_argument(format!(
            "{label}: input depth must be evenly divisible by filter depth"
        )));
    }
    if filter.dim(3) != dy.dim(3) {
        return Err(Status::invalid_argument(format!(
            "{label}: filter and out_backprop must have the same out_depth"
        )));
    }
    let g = Geometry::new(
        a,
        input.dim(0),
        [input.dim(1), input.dim(2)],
        [filter.dim(0), filter.dim(1)],
        (in_depth, filter_depth, filter.dim(3)),
    )?;
    for (i, d) in [g.rows, g.cols].iter().enumerate() {
        let actual = dy.dim(1 + i);
        if actual != d.output {
            return Err(Status::invalid_argument(format!(
                "{label}: Size of out_backprop doesn't match computed: actual = {actual}, \
                 computed = {} spatial_dim: {} input: {} filter: {} output: {actual} \
                 stride: {} dilation: {}",
                d.output,
                1 + i,
                d.input,
                d.filter,
                d.stride,
                d.dilation
            )));
        }
    }
    Ok(g)
}

/// The `NHWC` input shape a `Conv2DBackpropInput`'s `input_sizes` names (4
/// values, or the 2 spatial sizes).
fn input_sizes_shape(
    sizes: &Tensor,
    filter: &TensorShape,
    dy: &TensorShape,
) -> Result<TensorShape> {
    let v = sizes_vector(sizes, "input_sizes", "Conv2DBackpropInput")?;
    if (v.len() == 4 || v.len() == 2) && dy.rank() != 4 {
        return Err(Status::invalid_argument(format!(
            "input_sizes must be 4-dimensional, got: {}",
            dy.rank()
        )));
    }
    match v.len() {
        4 => Ok(TensorShape::new(&v)),
        2 if dy.rank() == 4 && filter.rank() == 4 => {
            Ok(TensorShape::new(&[dy.dim(0), v[0], v[1], filter.dim(2)]))
        }
        2 => Ok(TensorShape::new(&[0, v[0], v[1], 0])),
        n => Err(Status::invalid_argument(format!(
            "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: {n}"
        ))),
    }
}

fn reject_nchw(a: &ConvAttrs, op: &str) -> Result<()> {
    if a.nchw {
        return Err(Status::invalid_argument(format!(
            "{op} only supports NHWC."
        )));
    }
    Ok(())
}

impl<E: ConvElem> OpKernel for Conv2DKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, filter) = (ctx.input(0)?, ctx.input(1)?);
        if self.attrs.nchw {
            return Err(Status::unimplemented(
                "The Conv2D op currently only supports the NHWC tensor format on the CPU. \
                 The op was given the format: NCHW",
            ));
        }
        let g = forward_geometry(&self.attrs, input.shape(), filter.shape())?;
        let mut out = ctx.allocate(E::DTYPE, g.output_shape())?;
        let x = E::widen(input.as_slice::<E>()?);
        let w = E::widen(filter.as_slice::<E>()?);
        E::compute_into(out.as_mut_slice::<E>()?, |dst| {
            gemm_conv::forward(&g, &x, &w, dst, &|_| {})
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

impl<E: ConvElem> OpKernel for Conv2DBackpropInputKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        const LABEL: &str = "Conv2DCustomBackpropInput";
        reject_nchw(&self.attrs, "Conv2DCustomBackpropInputOp")?;
        let (sizes, filter, dy) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let input_shape = input_sizes_shape(sizes, filter.shape(), dy.shape())?;
        if input_shape.rank() == 4 && filter.rank() == 4 && input_shape.dim(3) != filter.dims()[2] {
            let (i, f) = (input_shape.dim(3), filter.dims()[2]);
            if f != 0 && i % f == 0 {
                return Err(Status::invalid_argument(format!(
                    "Gradients for grouped convolutions are not supported on CPU. Please file a \
                     feature request if you run into this issue. Computed input depth {i} \
                     doesn't match filter input depth {f}"
                )));
            }
        }
        let g = backprop_geometry(LABEL, &self.attrs, &input_shape, filter.shape(), dy.shape())?;
        let mut out = ctx.allocate(E::DTYPE, input_shape)?;
        let w = E::widen(filter.as_slice::<E>()?);
        let dy = E::widen(dy.as_slice::<E>()?);
        E::compute_into(out.as_mut_slice::<E>()?, |dst| {
            gemm_conv::backprop_input(&g, &w, &dy, dst)
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

impl<E: ConvElem> OpKernel for Conv2DBackpropFilterKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        const LABEL: &str = "Conv2DCustomBackpropFilter";
        reject_nchw(&self.attrs, "Conv2DCustomBackpropFilterOp")?;
        let (input, sizes, dy) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let v = sizes_vector(sizes, "filter_sizes", "Conv2DBackpropFilter")?;
        // A size vector of another length fails below as a filter of that rank.
        let filter_shape = TensorShape::new(&v);
        if input.rank() == 4
            && v.len() == 4
            && input.dims()[3] != v[2]
            && v[2] != 0
            && input.dims()[3] % v[2] == 0
        {
            // TensorFlow's CPU kernel sizes the gradient with the input depth.
            let requested = v[0] * v[1] * input.dims()[3] * v[3];
            return Err(Status::invalid_argument(format!(
                "filter_size does not have enough elements, requested {requested}, got {}",
                filter_shape.num_elements()
            )));
        }
        let g = backprop_geometry(LABEL, &self.attrs, input.shape(), &filter_shape, dy.shape())?;
        let mut out = ctx.allocate(E::DTYPE, filter_shape)?;
        let x = E::widen(input.as_slice::<E>()?);
        let dy = E::widen(dy.as_slice::<E>()?);
        E::compute_into(out.as_mut_slice::<E>()?, |dst| {
            gemm_conv::backprop_filter(&g, &x, &dy, dst)
        })?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}
