//! CPU kernels of the convolution ops (TensorFlow's `conv_ops.cc`,
//! `conv_grad_input_ops.cc`, `conv_grad_filter_ops.cc` and
//! `depthwise_conv_op.cc`).
//!
//! - [`params`]: the window attributes, checked once per kernel, and the geometry
//!   of one call (output sizes and paddings).
//! - [`im2col`]: patch matrices, their transpose, and the element types
//!   convolutions compute in.
//! - [`gemm_conv`]: `Conv2D` and its gradients as matrix products.
//! - [`conv2d`]: the `Conv2D`, `Conv2DBackpropInput` and `Conv2DBackpropFilter`
//!   kernels.
//! - [`depthwise`]: the three depthwise kernels, as direct loops.
//! - [`fused`]: `_FusedConv2D`, a `Conv2D` with a bias or batch norm and an
//!   activation applied to its output blocks.
//!
//! The registered types are TensorFlow's CPU ones: `half`, `bfloat16`, `float`,
//! `double` for all six, and `int32` for `Conv2D` and `Conv2DBackpropInput`.

pub mod conv2d;
pub mod depthwise;
pub mod fused;
pub mod gemm_conv;
pub mod im2col;
pub mod params;

use std::marker::PhantomData;

use graph::{bf16, f16, DType, Result, Status};

use crate::op_kernel::{OpKernel, OpKernelConstruction};
use crate::registry::{KernelDef, KernelRegistry};
use params::{ConvAttrs, Family};

/// `Conv2D`'s and `Conv2DBackpropInput`'s CPU types.
const CONV_DTYPES: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32];
/// The other ops' CPU types.
const FLOAT_DTYPES: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];

/// Builds `K<E>` for the node's `T`.
macro_rules! by_type {
    ($c:expr, $family:expr, $kernel:ident) => {{
        let attrs = ConvAttrs::read($c, $family)?;
        let t: DType = $c.attr("T")?;
        match t {
            DType::F32 => boxed::<$kernel<f32>>($kernel {
                attrs,
                _t: PhantomData,
            }),
            DType::F64 => boxed::<$kernel<f64>>($kernel {
                attrs,
                _t: PhantomData,
            }),
            DType::F16 => boxed::<$kernel<f16>>($kernel {
                attrs,
                _t: PhantomData,
            }),
            DType::BF16 => boxed::<$kernel<bf16>>($kernel {
                attrs,
                _t: PhantomData,
            }),
            DType::I32 => boxed::<$kernel<i32>>($kernel {
                attrs,
                _t: PhantomData,
            }),
            other => Err(Status::unimplemented(format!(
                "no CPU convolution kernel for {other}"
            ))),
        }
    }};
}

fn boxed<K: OpKernel + 'static>(k: K) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(k))
}

fn make_conv2d(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    use conv2d::Conv2DKernel;
    by_type!(c, Family::Conv2D, Conv2DKernel)
}

fn make_conv2d_backprop_input(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    use conv2d::Conv2DBackpropInputKernel;
    by_type!(c, Family::Conv2DBackprop, Conv2DBackpropInputKernel)
}

fn make_conv2d_backprop_filter(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    use conv2d::Conv2DBackpropFilterKernel;
    by_type!(c, Family::Conv2DBackprop, Conv2DBackpropFilterKernel)
}

fn make_depthwise(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    use depthwise::DepthwiseKernel;
    by_type!(c, Family::Depthwise, DepthwiseKernel)
}

fn make_depthwise_backprop_input(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    use depthwise::DepthwiseBackpropInputKernel;
    by_type!(c, Family::Depthwise, DepthwiseBackpropInputKernel)
}

fn make_depthwise_backprop_filter(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    use depthwise::DepthwiseBackpropFilterKernel;
    by_type!(c, Family::Depthwise, DepthwiseBackpropFilterKernel)
}

/// Registers the convolution kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    fused::register_all_kernels(r);
    r.register(KernelDef::cpu("Conv2D", make_conv2d).type_constraint("T", CONV_DTYPES));
    r.register(
        KernelDef::cpu("Conv2DBackpropInput", make_conv2d_backprop_input)
            .type_constraint("T", CONV_DTYPES),
    );
    r.register(
        KernelDef::cpu("Conv2DBackpropFilter", make_conv2d_backprop_filter)
            .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("DepthwiseConv2dNative", make_depthwise).type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu(
            "DepthwiseConv2dNativeBackpropInput",
            make_depthwise_backprop_input,
        )
        .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu(
            "DepthwiseConv2dNativeBackpropFilter",
            make_depthwise_backprop_filter,
        )
        .type_constraint("T", FLOAT_DTYPES),
    );
}

#[cfg(test)]
mod tests;
