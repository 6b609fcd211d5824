//! `_FusedConv2D` on the CPU (TensorFlow's `conv_ops_fused_impl.h`): a `Conv2D`
//! whose output rows get a `BiasAdd` or an inference `FusedBatchNorm`, then an
//! activation, as each block of them is computed, in one kernel and one output
//! buffer. The remapper pass (`graph::passes::remapper`) writes it.
//!
//! - [`FusedConv`]: what a node's `fused_ops`, `num_args`, `epsilon` and
//!   `leakyrelu_alpha` ask for, checked when the kernel is built, with
//!   TensorFlow 2.21's messages and codes. The patterns are its CPU ones:
//!   `BiasAdd` or `FusedBatchNorm`, alone or followed by `Relu`, `Relu6`, `Elu`
//!   or `LeakyRelu`.
//! - [`FusedConv2DKernel`]: `Conv2D`'s checks and product
//!   ([`gemm_conv::forward`]), each finished block of output rows passed through
//!   an [`Epilogue`] while it is still in cache. The product is `Conv2D`'s own,
//!   and the epilogue computes what `BiasAdd`/`FusedBatchNorm` and the activation
//!   kernels compute, so a fused node gives its unfused graph's answers.
//!
//! Where TensorFlow's CPU kernel has no answer, this one gives the unfused ops'
//! answer rather than an error, so that fusing never changes what a graph
//! computes:
//! 1. grouped convolutions (TensorFlow: `Unimplemented`);
//! 2. `half` (allowed by the op, refused by TensorFlow's CPU kernel): the
//!    convolution and the epilogue run in `float`, rounded once.
//!
//! Vectors whose length is not the output depth are `InvalidArgument`
//! (TensorFlow's CPU kernel reads past a short one; the bias message is its GPU
//! kernel's). The arguments may be any float type (`TArgs`: the remapper writes
//! `float` for a batch norm's vectors whatever `T` is). `NCHW` is
//! `Unimplemented`, as in TensorFlow. No gradient is registered, as in
//! TensorFlow: the remapper only rewrites graphs that are not differentiated
//! afterwards.

use std::borrow::Cow;
use std::marker::PhantomData;

use graph::{f16, DType, Result, Status, Tensor};

use super::conv2d::forward_geometry;
use super::gemm_conv;
use super::im2col::ConvElem;
use super::params::{ConvAttrs, Family};
use crate::cpu::nn::epilogue::{Channels, Epilogue, EpilogueFloat, FusedActivation};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The activations TensorFlow 2.21's CPU `_FusedConv2D` accepts after the
/// bias or the batch norm.
pub const CPU_ACTIVATIONS: &[&str] = &["Relu", "Relu6", "Elu", "LeakyRelu"];

/// The per-channel step before the activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// `BiasAdd`: one argument, the bias.
    BiasAdd,
    /// Inference `FusedBatchNorm`: four arguments, scale, offset, mean and
    /// variance, and the node's `epsilon`.
    FusedBatchNorm {
        /// Added to the variance.
        epsilon: f32,
    },
}

/// A node's fused computation (TensorFlow's `FusedComputationType` for
/// convolutions).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FusedConv {
    /// The step after the convolution.
    pub step: Step,
    /// The activation after the step.
    pub activation: FusedActivation,
}

impl FusedConv {
    /// Checks a node's attributes as TensorFlow's `InitializeFusedComputation`
    /// does: a non-empty `fused_ops` (`InvalidArgument`), one of the CPU patterns
    /// (`Unimplemented`), then the argument count of the step
    /// (`InvalidArgument`).
    pub fn from_attrs(
        fused_ops: &[String],
        num_args: i64,
        epsilon: f32,
        leakyrelu_alpha: f32,
    ) -> Result<FusedConv> {
        if fused_ops.is_empty() {
            return Err(Status::invalid_argument(
                "Fused Conv2D must have at least one fused op.",
            ));
        }
        let ops: Vec<&str> = fused_ops.iter().map(String::as_str).collect();
        let step = match ops[0] {
            "BiasAdd" => Some(Step::BiasAdd),
            "FusedBatchNorm" => Some(Step::FusedBatchNorm { epsilon }),
            _ => None,
        };
        let activation = match &ops[1..] {
            [] => Some(FusedActivation::Identity),
            [act] => FusedActivation::named(act, CPU_ACTIVATIONS, leakyrelu_alpha),
            _ => None,
        };
        let (Some(step), Some(activation)) = (step, activation) else {
            return Err(Status::unimplemented(format!(
                "Fusion is not implemented: [{}]",
                ops.join(",")
            )));
        };
        match step {
            Step::BiasAdd if num_args != 1 => Err(Status::invalid_argument(
                "Fused Conv2D with BiasAdd must have one extra argument: bias or 4 extra \
                 arguments: bias, side_input, conv_input_scale and side_input_scale",
            )),
            Step::FusedBatchNorm { .. } if num_args != 4 => Err(Status::invalid_argument(
                "Fused Conv2D with FusedBatchNorm must have four extra arguments: scale, \
                 offset, mean, variance.",
            )),
            _ => Ok(FusedConv { step, activation }),
        }
    }
}

/// A float type `_FusedConv2D` computes in (`float`, `double`).
pub trait FusedConvAcc: EpilogueFloat + super::im2col::ConvScalar {}
impl<A: EpilogueFloat + super::im2col::ConvScalar> FusedConvAcc for A {}

/// The values of one argument vector in the compute type `A` (borrowed when it
/// already is), after TensorFlow's rank check (`{name} must be 1-dimensional`
/// with the shape appended) and our length check.
fn channel_values<'t, A: FusedConvAcc>(
    t: &'t Tensor,
    name: &str,
    depth: usize,
) -> Result<Cow<'t, [A]>> {
    if t.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "{name} must be 1-dimensional{}",
            t.shape()
        )));
    }
    if t.num_elements() != depth {
        return Err(Status::invalid_argument(format!(
            "{name} depth must be equal to out depth{}",
            t.shape()
        )));
    }
    if t.dtype() == A::DTYPE {
        return Ok(Cow::Borrowed(t.as_slice::<A>()?));
    }
    let widened: Vec<A> = match t.dtype() {
        DType::F32 => t
            .as_slice::<f32>()?
            .iter()
            .map(|&v| A::constant(v as f64))
            .collect(),
        DType::F64 => t
            .as_slice::<f64>()?
            .iter()
            .map(|&v| A::constant(v))
            .collect(),
        DType::F16 => t
            .as_slice::<f16>()?
            .iter()
            .map(|v| A::constant(v.to_f64()))
            .collect(),
        other => {
            return Err(Status::invalid_argument(format!(
                "{name} must be a float tensor, got {other}"
            )))
        }
    };
    Ok(Cow::Owned(widened))
}

/// The `_FusedConv2D` kernel for element type `E`.
pub struct FusedConv2DKernel<E> {
    attrs: ConvAttrs,
    fused: FusedConv,
    _t: PhantomData<fn(E)>,
}

impl<E: ConvElem> FusedConv2DKernel<E>
where
    E::Acc: FusedConvAcc,
{
    /// The epilogue of this call from inputs 2.. (`depth` output channels).
    fn epilogue<'t>(
        &self,
        ctx: &'t OpKernelContext<'_>,
        depth: usize,
    ) -> Result<Epilogue<'t, E::Acc>> {
        let channels = match self.fused.step {
            Step::BiasAdd => Channels::Bias(channel_values(ctx.input(2)?, "bias", depth)?),
            Step::FusedBatchNorm { epsilon } => {
                let scale = channel_values(ctx.input(2)?, "scale", depth)?;
                let offset = channel_values(ctx.input(3)?, "offset", depth)?;
                let mean = channel_values(ctx.input(4)?, "estimated_mean", depth)?;
                let var = channel_values(ctx.input(5)?, "estimated_variance", depth)?;
                Channels::normalize(&scale, offset, mean, &var, epsilon)
            }
        };
        Ok(Epilogue::new(channels, self.fused.activation))
    }
}

impl<E: ConvElem> OpKernel for FusedConv2DKernel<E>
where
    E::Acc: FusedConvAcc,
{
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        if self.attrs.nchw {
            return Err(Status::unimplemented(
                "Fused conv implementation only supports NHWC tensor format for now.",
            ));
        }
        let (input, filter) = (ctx.input(0)?, ctx.input(1)?);
        let g = forward_geometry(&self.attrs, input.shape(), filter.shape())?;
        let mut out = ctx.allocate(E::DTYPE, g.output_shape())?;
        if out.num_elements() > 0 {
            let e = self.epilogue(ctx, g.out_depth)?;
            let x = E::widen(input.as_slice::<E>()?);
            let w = E::widen(filter.as_slice::<E>()?);
            let finish = |rows: &mut [E::Acc]| e.apply(rows);
            E::compute_into(out.as_mut_slice::<E>()?, |dst| {
                gemm_conv::forward(&g, &x, &w, dst, &finish)
            })?;
        }
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn kernel<E: ConvElem>(c: &OpKernelConstruction<'_>, fused: FusedConv) -> Result<Box<dyn OpKernel>>
where
    E::Acc: FusedConvAcc,
{
    Ok(Box::new(FusedConv2DKernel::<E> {
        attrs: ConvAttrs::read(c, Family::Conv2D)?,
        fused,
        _t: PhantomData,
    }))
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let fused = FusedConv::from_attrs(
        &c.attr::<Vec<String>>("fused_ops")?,
        c.attr("num_args")?,
        c.attr("epsilon")?,
        c.attr("leakyrelu_alpha")?,
    )?;
    match c.attr::<DType>("T")? {
        DType::F32 => kernel::<f32>(c, fused),
        DType::F64 => kernel::<f64>(c, fused),
        DType::F16 => kernel::<f16>(c, fused),
        t => Err(Status::unimplemented(format!(
            "no CPU _FusedConv2D for {t}"
        ))),
    }
}

/// `_FusedConv2D`'s CPU types here: TensorFlow's float ones.
pub const FUSED_CONV_DTYPES: &[DType] = &[DType::F16, DType::F32, DType::F64];

/// Registers the `_FusedConv2D` CPU kernel.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("_FusedConv2D", make).type_constraint("T", FUSED_CONV_DTYPES));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn patterns_and_argument_counts() {
        let f = FusedConv::from_attrs(&ops(&["FusedBatchNorm", "LeakyRelu"]), 4, 0.01, 0.3);
        assert_eq!(
            f.expect("pattern"),
            FusedConv {
                step: Step::FusedBatchNorm { epsilon: 0.01 },
                activation: FusedActivation::LeakyRelu(0.3)
            }
        );
        let f = FusedConv::from_attrs(&ops(&["BiasAdd"]), 1, 0.0, 0.2).expect("pattern");
        assert_eq!(f.activation, FusedActivation::Identity);
        let code = |v: &[&str], n| {
            FusedConv::from_attrs(&ops(v), n, 0.0, 0.2)
                .expect_err("refused")
                .code()
        };
        use graph::Code;
        assert_eq!(code(&[], 1), Code::InvalidArgument);
        assert_eq!(code(&["BiasAdd", "Tanh"], 1), Code::Unimplemented);
        assert_eq!(code(&["Relu"], 1), Code::Unimplemented);
        assert_eq!(code(&["BiasAdd", "Relu", "Relu"], 1), Code::Unimplemented);
        assert_eq!(code(&["BiasAdd"], 4), Code::InvalidArgument);
        assert_eq!(code(&["FusedBatchNorm"], 1), Code::InvalidArgument);
    }
}
