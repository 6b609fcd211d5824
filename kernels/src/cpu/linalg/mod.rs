//! CPU kernels of the linalg ops: `MatMul`, `BatchMatMul`, `BatchMatMulV2`,
//! `BatchMatMulV3` and `Range`.
//!
//! - [`plan`]: shape checks, output shape and batch broadcasting of a product.
//! - [`gemm`]: `f32`/`f64` products through the `gemm` crate (the one `unsafe`
//!   call, behind checked strided views).
//! - [`naive`]: the other types (`half`, `bfloat16`, integers, V3's mixed types).
//! - [`range`]: the `Range` kernel.
//! - [`fused_matmul`]: `_FusedMatMul` (MatMul + BiasAdd + activation in one pass).
//! - [`einsum`]: `Einsum` (contractions through `gemm` or a label odometer).
//!
//! Kernels read their inputs in place (transposes are strides, never copies) and
//! allocate the output once; the registered type combinations are TensorFlow's CPU
//! ones, so others are `NotFound` as there.

pub mod einsum;
pub mod fused_matmul;
pub mod gemm;
pub mod naive;
pub mod plan;
pub mod range;

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor};

use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use gemm::GemmScalar;
use naive::{Accum, Lift, Lower};
use plan::{Flavor, Plan};

/// Transposes and shape rules of one product node.
#[derive(Clone, Copy, Debug)]
pub struct ProductAttrs {
    /// Transpose (adjoint) the first operand.
    pub adj_x: bool,
    /// Transpose (adjoint) the second operand.
    pub adj_y: bool,
    /// Whose shape rules apply.
    pub flavor: Flavor,
}

impl ProductAttrs {
    fn from_node(c: &OpKernelConstruction<'_>, flavor: Flavor) -> Result<ProductAttrs> {
        let (x, y) = if flavor == Flavor::MatMul {
            ("transpose_a", "transpose_b")
        } else {
            ("adj_x", "adj_y")
        };
        Ok(ProductAttrs {
            adj_x: c.attr(x)?,
            adj_y: c.attr(y)?,
            flavor,
        })
    }

    fn plan(&self, x: &Tensor, y: &Tensor) -> Result<Plan> {
        Plan::new(x.shape(), y.shape(), self.adj_x, self.adj_y, self.flavor)
    }
}

/// `f32`/`f64` products through `gemm`.
pub struct GemmKernel<T> {
    attrs: ProductAttrs,
    _t: PhantomData<fn(T)>,
}

impl<T: GemmScalar> OpKernel for GemmKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (x, y) = (ctx.input(0)?, ctx.input(1)?);
        let plan = self.attrs.plan(x, y)?;
        let mut out = ctx.allocate(T::DTYPE, plan.out_shape().clone())?;
        if !plan.is_trivial() {
            let dst = out.as_mut_slice::<T>()?;
            gemm::batched_gemm(&plan, x.as_slice::<T>()?, y.as_slice::<T>()?, dst)?;
        }
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Products of inputs `A` and `B` accumulated in `C`, output `O`.
pub struct LoopKernel<A, B, C, O> {
    attrs: ProductAttrs,
    _t: PhantomData<fn(A, B, C, O)>,
}

impl<A: Lift<C>, B: Lift<C>, C: Accum, O: Lower<C>> OpKernel for LoopKernel<A, B, C, O> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (x, y) = (ctx.input(0)?, ctx.input(1)?);
        let plan = self.attrs.plan(x, y)?;
        let mut out = ctx.allocate(O::DTYPE, plan.out_shape().clone())?;
        if !plan.is_trivial() {
            let dst = out.as_mut_slice::<O>()?;
            naive::batched_loop::<A, B, C, O>(&plan, x.as_slice()?, y.as_slice()?, dst)?;
        }
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn gemm_kernel<T: GemmScalar>(attrs: ProductAttrs) -> Box<dyn OpKernel> {
    Box::new(GemmKernel::<T> {
        attrs,
        _t: PhantomData,
    })
}

fn loop_kernel<A: Lift<C>, B: Lift<C>, C: Accum, O: Lower<C>>(
    attrs: ProductAttrs,
) -> Box<dyn OpKernel> {
    Box::new(LoopKernel::<A, B, C, O> {
        attrs,
        _t: PhantomData,
    })
}

/// The kernel for inputs `ta`, `tb` and output `tout`, or `Unimplemented`.
fn product_kernel(
    ta: DType,
    tb: DType,
    tout: DType,
    attrs: ProductAttrs,
) -> Result<Box<dyn OpKernel>> {
    use graph::{bf16, f16};
    use DType::*;
    Ok(match (ta, tb, tout) {
        (F32, F32, F32) => gemm_kernel::<f32>(attrs),
        (F64, F64, F64) => gemm_kernel::<f64>(attrs),
        (F16, F16, F16) => loop_kernel::<f16, f16, f32, f16>(attrs),
        (BF16, BF16, BF16) => loop_kernel::<bf16, bf16, f32, bf16>(attrs),
        (I16, I16, I16) => loop_kernel::<i16, i16, i16, i16>(attrs),
        (I32, I32, I32) => loop_kernel::<i32, i32, i32, i32>(attrs),
        (I64, I64, I64) => loop_kernel::<i64, i64, i64, i64>(attrs),
        (BF16, I8, BF16) => loop_kernel::<bf16, i8, bf16, bf16>(attrs),
        (BF16, U8, BF16) => loop_kernel::<bf16, u8, bf16, bf16>(attrs),
        (I8, BF16, BF16) => loop_kernel::<i8, bf16, bf16, bf16>(attrs),
        (U8, BF16, BF16) => loop_kernel::<u8, bf16, bf16, bf16>(attrs),
        (I8, I8, I32) => loop_kernel::<i8, i8, i32, i32>(attrs),
        (I8, U8, I32) => loop_kernel::<i8, u8, i32, i32>(attrs),
        (U8, I8, I32) => loop_kernel::<u8, i8, i32, i32>(attrs),
        (U8, U8, I32) => loop_kernel::<u8, u8, i32, i32>(attrs),
        _ => {
            return Err(Status::unimplemented(format!(
                "no CPU matrix product of {ta} by {tb} into {tout}"
            )))
        }
    })
}

fn make_same_type(c: &OpKernelConstruction<'_>, flavor: Flavor) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    product_kernel(t, t, t, ProductAttrs::from_node(c, flavor)?)
}

fn make_v3(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let attrs = ProductAttrs::from_node(c, Flavor::Broadcast)?;
    product_kernel(c.attr("Ta")?, c.attr("Tb")?, c.attr("Tout")?, attrs)
}

/// `MatMul`'s and `BatchMatMul`'s CPU types in TensorFlow.
const MATMUL_DTYPES: &[DType] = &[
    DType::BF16,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::I32,
    DType::I64,
];
/// `BatchMatMulV2` adds `int16`.
const V2_DTYPES: &[DType] = &[
    DType::BF16,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::I16,
    DType::I32,
    DType::I64,
];
/// `BatchMatMulV3`'s CPU (Ta, Tb, Tout) combinations in TensorFlow.
const V3_COMBOS: &[(DType, DType, DType)] = {
    use DType::*;
    &[
        (BF16, BF16, BF16),
        (F32, F32, F32),
        (F64, F64, F64),
        (I16, I16, I16),
        (I32, I32, I32),
        (I64, I64, I64),
        (BF16, I8, BF16),
        (BF16, U8, BF16),
        (I8, BF16, BF16),
        (U8, BF16, BF16),
        (I8, I8, I32),
        (I8, U8, I32),
        (U8, I8, I32),
        (U8, U8, I32),
    ]
};

/// Registers the linalg kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("MatMul", |c| make_same_type(c, Flavor::MatMul))
            .type_constraint("T", MATMUL_DTYPES),
    );
    r.register(
        KernelDef::cpu("BatchMatMul", |c| make_same_type(c, Flavor::BatchMatMul))
            .type_constraint("T", MATMUL_DTYPES),
    );
    r.register(
        KernelDef::cpu("BatchMatMulV2", |c| make_same_type(c, Flavor::Broadcast))
            .type_constraint("T", V2_DTYPES),
    );
    for &(ta, tb, tout) in V3_COMBOS {
        r.register(
            KernelDef::cpu("BatchMatMulV3", make_v3)
                .type_constraint("Ta", &[ta])
                .type_constraint("Tb", &[tb])
                .type_constraint("Tout", &[tout]),
        );
    }
    fused_matmul::register_all_kernels(r);
    einsum::register_all_kernels(r);
    r.register(
        KernelDef::cpu("Range", range::make_range).type_constraint("Tidx", range::RANGE_DTYPES),
    );
}

#[cfg(test)]
mod tests;
