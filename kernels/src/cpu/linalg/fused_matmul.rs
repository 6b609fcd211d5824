//! `_FusedMatMul` on the CPU (TensorFlow's `matmul_op_fused.cc`, with the output
//! kernels of `fused_eigen_output_kernels.h`): `a · b`, plus a bias along the last
//! dimension, then an activation, in one kernel and one output buffer.
//!
//! - [`FusedComputation`]: what a node's `fused_ops`, `num_args` and
//!   `leakyrelu_alpha` ask for, checked when the kernel is built, with TensorFlow
//!   2.21's messages (`Fused MatMul must have at least one fused op.`,
//!   `Fusion is not implemented: [...]`, the `num_args` message). The patterns are
//!   TensorFlow's CPU ones: `BiasAdd`, alone or followed by `Relu`, `Relu6`, `Elu`,
//!   `LeakyRelu`, `Tanh` or `Sigmoid`.
//! - [`FusedMatMulKernel`]: the checks of TensorFlow's `Compute` (its messages, in
//!   its order), then the product. For `f32`, `gemm` computes the product exactly
//!   as `MatMul` calls it, and one pass then adds the bias and applies the
//!   activation while the output is still in cache, on the threads `gemm` used
//!   (TensorFlow hands that pass to Eigen's contraction as an output kernel, per
//!   output block; `gemm` takes no such callback, and splitting the call into row
//!   blocks measured slower: see `gemm_bias_activation`). `bfloat16` and `half` go
//!   through the linalg loop kernel (accumulating in `f32`), then add and
//!   activate in the element type, as Eigen rounds after each operation.
//!
//! The bias and the activation are computed as TensorFlow's output kernels write
//! them (`x < 0 ? alpha * x : x` for `LeakyRelu`, NaN propagating through `Relu`
//! and `Relu6`); `Tanh` and `Sigmoid` are the math kernels' functions, so a fused
//! node and the ops it replaces agree.
//!
//! Two cases differ from TensorFlow's Eigen kernel on purpose:
//! 1. A bias whose length is not the output's column count is `InvalidArgument`
//!    with the message of TensorFlow's oneDNN kernel (the Eigen kernel reads past a
//!    short bias and ignores the tail of a long one).
//! 2. With an empty contracted dimension (`k = 0`) the output is
//!    `activation(bias)` on every row, as the unfused `MatMul` + `BiasAdd` +
//!    activation computes; TensorFlow's fused kernel returns zeros there, which
//!    would make the remapper rewrite change a graph's answers.
//!
//! TensorFlow registers no gradient for `_FusedMatMul`; the remapper only writes it
//! into graphs that are not differentiated afterwards.

use std::marker::PhantomData;

use graph::{bf16, f16, DType, Result, Status, TensorShape};

use super::gemm::{gemm_into, GemmScalar, PAR_FLOPS};
use super::naive;
use super::plan::{Flavor, Plan};
use crate::cpu::math::elem::FloatOps;
use crate::cpu::nn::epilogue::{Channels, Epilogue, FusedActivation};
use crate::cpu::nn::NnFloat;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// A node's fused computation: `BiasAdd`, then [`FusedActivation`] (TensorFlow's
/// `FusedComputationType`, bias-add family: the only one its MatMul kernel runs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FusedComputation {
    /// The activation after the bias.
    pub activation: FusedActivation,
}

/// The `fused_ops` TensorFlow 2.21's CPU `_FusedMatMul` kernel accepts, after
/// `BiasAdd`.
pub const CPU_ACTIVATIONS: &[&str] = &["Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"];

impl FusedComputation {
    /// Checks a node's attributes as TensorFlow's `InitializeFusedComputation`
    /// does: a non-empty `fused_ops` (`InvalidArgument`), one of the CPU patterns
    /// (`Unimplemented`), then exactly one extra argument, the bias
    /// (`InvalidArgument`).
    pub fn from_attrs(
        fused_ops: &[String],
        num_args: i64,
        leakyrelu_alpha: f32,
    ) -> Result<FusedComputation> {
        if fused_ops.is_empty() {
            return Err(Status::invalid_argument(
                "Fused MatMul must have at least one fused op.",
            ));
        }
        let ops: Vec<&str> = fused_ops.iter().map(String::as_str).collect();
        let activation = match ops.as_slice() {
            ["BiasAdd"] => Some(FusedActivation::Identity),
            ["BiasAdd", act] => FusedActivation::named(act, CPU_ACTIVATIONS, leakyrelu_alpha),
            _ => None,
        };
        let Some(activation) = activation else {
            return Err(Status::unimplemented(format!(
                "Fusion is not implemented: [{}]",
                ops.join(",")
            )));
        };
        if num_args != 1 {
            return Err(Status::invalid_argument(
                "Fused MatMul with BiasAdd must have one extra argument: bias or 4 extra \
                 arguments: bias, side_input, conv_input_scale and side_input_scale",
            ));
        }
        Ok(FusedComputation { activation })
    }
}

/// TensorFlow's checks of the two operands, with its messages and in its order.
fn check_operands(a: &TensorShape, b: &TensorShape, ta: bool, tb: bool) -> Result<()> {
    let bad = |m: String| Err(Status::invalid_argument(m));
    if a.rank() != b.rank() {
        return bad(format!("In[0] and In[1] has different ndims: {a} vs. {b}"));
    }
    if a.rank() != 2 {
        return bad(format!("In[0] is not a matrix. Instead it has shape {a}"));
    }
    if b.rank() != 2 {
        return bad(format!("In[1] is not a matrix. Instead it has shape {b}"));
    }
    let ka = a.dims()[if ta { 0 } else { 1 }];
    let kb = b.dims()[if tb { 1 } else { 0 }];
    if ka != kb {
        return bad(format!("Matrix size-incompatible: In[0]: {a}, In[1]: {b}"));
    }
    Ok(())
}

/// The bias must be a vector (TensorFlow's message, shape appended without a
/// space) with one element per output column (its oneDNN kernel's message).
fn check_bias(bias: &TensorShape, n: usize) -> Result<()> {
    if bias.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "bias must be 1-dimensional{bias}"
        )));
    }
    if bias.dims()[0] != n {
        return Err(Status::invalid_argument(format!(
            "Must provide as many biases as the channel size: {bias} vs. {n}"
        )));
    }
    Ok(())
}

/// The operands of one product: its plan and the input buffers.
#[derive(Clone, Copy)]
pub struct Operands<'a, T> {
    plan: &'a Plan,
    a: &'a [T],
    b: &'a [T],
}

/// An element type of the fused kernel: float arithmetic (rounding after each
/// operation for `half` and `bfloat16`) and its product.
pub trait FusedElem: NnFloat + FloatOps {
    /// `out = act(a · b + bias)` (`k > 0`, `out` non-empty, every row
    /// `bias.len()` long).
    fn product(p: Operands<'_, Self>, out: &mut [Self], e: &Epilogue<'_, Self>) -> Result<()>;
}

impl FusedElem for f32 {
    fn product(p: Operands<'_, f32>, out: &mut [f32], e: &Epilogue<'_, f32>) -> Result<()> {
        gemm_bias_activation(p, out, e)
    }
}

macro_rules! loop_product {
    ($($t:ty),*) => {$(
        impl FusedElem for $t {
            fn product(p: Operands<'_, $t>, out: &mut [$t], e: &Epilogue<'_, $t>) -> Result<()> {
                naive::batched_loop::<$t, $t, f32, $t>(p.plan, p.a, p.b, out)?;
                let threads = if p.plan.flops_per_product() >= PAR_FLOPS / 8 {
                    rayon::current_num_threads()
                } else {
                    1
                };
                e.finish(out, threads);
                Ok(())
            }
        }
    )*};
}
loop_product!(f16, bf16);

/// `out = act(a · b + bias)`: one `gemm` call, exactly `MatMul`'s (all of rayon's
/// threads from [`PAR_FLOPS`] flops on, else one), then one pass over the output
/// while it is still in the caches `gemm` left it in, on the same threads.
///
/// `gemm` takes no per-block callback (Eigen's output kernel), and calling it once
/// per row block instead, to finish each block hotter, cost more than the pass it
/// saves: on 16 Xeon cores, 64 × 784 · 784 × 256 took 48 µs as 16 one-thread row
/// blocks against 54 µs as one call, but 256 × 1024 · 1024 × 1024 took 1838 µs
/// against 922 µs, and 1024 × 1024 · 1024 × 4096 finished in 64-row blocks (one
/// call on every thread each) took 33 ms against `MatMul`'s 15 ms
/// (`examples/fused_matmul_timing.rs`).
/// One call also keeps the fused product bit for bit the unfused one.
fn gemm_bias_activation<T: GemmScalar + FusedElem>(
    p: Operands<'_, T>,
    out: &mut [T],
    e: &Epilogue<'_, T>,
) -> Result<()> {
    let (a, b) = p.plan.operands(0, p.a, p.b)?;
    let threads = if p.plan.flops_per_product() >= PAR_FLOPS {
        rayon::current_num_threads()
    } else {
        1
    };
    gemm_into(a, b, out, threads)?;
    e.finish(out, threads);
    Ok(())
}

/// The `_FusedMatMul` kernel for element type `T`.
pub struct FusedMatMulKernel<T> {
    transpose_a: bool,
    transpose_b: bool,
    fused: FusedComputation,
    _t: PhantomData<fn(T)>,
}

impl<T: FusedElem> OpKernel for FusedMatMulKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (ta, tb) = (self.transpose_a, self.transpose_b);
        let (a, b) = (ctx.input(0)?, ctx.input(1)?);
        check_operands(a.shape(), b.shape(), ta, tb)?;
        let plan = Plan::new(a.shape(), b.shape(), ta, tb, Flavor::MatMul)?;
        let mut out = ctx.allocate(T::DTYPE, plan.out_shape().clone())?;
        if plan.out_shape().num_elements() > 0 {
            let bias = ctx.input(2)?;
            check_bias(bias.shape(), plan.n())?;
            let bias = Channels::Bias(bias.as_slice::<T>()?.into());
            let e = Epilogue::new(bias, self.fused.activation);
            let dst = out.as_mut_slice::<T>()?;
            if plan.k() == 0 {
                dst.fill(T::zero());
                e.apply(dst);
            } else {
                let p = Operands {
                    plan: &plan,
                    a: a.as_slice::<T>()?,
                    b: b.as_slice::<T>()?,
                };
                T::product(p, dst, &e)?;
            }
        }
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn kernel<T: FusedElem>(
    c: &OpKernelConstruction<'_>,
    fused: FusedComputation,
) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(FusedMatMulKernel::<T> {
        transpose_a: c.attr("transpose_a")?,
        transpose_b: c.attr("transpose_b")?,
        fused,
        _t: PhantomData,
    }))
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let fused = FusedComputation::from_attrs(
        &c.attr::<Vec<String>>("fused_ops")?,
        c.attr("num_args")?,
        c.attr("leakyrelu_alpha")?,
    )?;
    match c.attr::<DType>("T")? {
        DType::F32 => kernel::<f32>(c, fused),
        DType::F16 => kernel::<f16>(c, fused),
        DType::BF16 => kernel::<bf16>(c, fused),
        t => Err(Status::unimplemented(format!(
            "no CPU _FusedMatMul for {t}"
        ))),
    }
}

/// TensorFlow 2.21's CPU types of `_FusedMatMul`.
pub const FUSED_MATMUL_DTYPES: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// Registers the `_FusedMatMul` CPU kernel.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("_FusedMatMul", make).type_constraint("T", FUSED_MATMUL_DTYPES));
}
