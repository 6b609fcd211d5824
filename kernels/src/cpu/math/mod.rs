//! CPU kernels of the element-wise math ops (TensorFlow's `cwise_op_*.cc`,
//! `cast_op.cc`, `select_op.cc`, `aggregate_ops.cc`). Each kernel is monomorphised
//! for its element type when it is built; the registered type sets are exactly
//! TensorFlow's CPU kernel registrations.
//!
//! - [`elem`]: per-type element semantics (wrapping integers, floor division, …).
//! - [`binary`]: the binary kernel framework with broadcasting and buffer reuse.
//! - [`unary`]: the unary kernel framework.
//! - [`arith`]: Add … SquaredDifference.
//! - [`unary_ops`]: Neg … IsFinite.
//! - [`compare`]: Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual.
//! - [`logical`]: LogicalAnd, LogicalOr, LogicalNot.
//! - [`select`]: Select, SelectV2.
//! - [`cast`]: Cast between every pair of dtypes.
//! - [`add_n`]: AddN, the sum of N tensors.
//! - [`grad`]: TanhGrad, SigmoidGrad, RsqrtGrad, SqrtGrad, ReciprocalGrad, InvGrad.
//! - [`accumulate`]: Cumsum, Cumprod.
//! - [`segment`]: UnsortedSegment*, Segment*, Bincount.
//! - [`sparse_segment`]: SparseSegment* and their gradients.
//! - [`clip`] — ClipByValue.

/// Binds `$T` to whichever listed type has dtype `$dt` and evaluates `$body`;
/// other dtypes give `Unimplemented`.
macro_rules! dispatch_types {
    ($dt:expr, $T:ident => $body:expr, [$($ty:ty),* $(,)?]) => {{
        let dt: graph::DType = $dt;
        'dispatch: {
            $(
                if dt == <$ty as graph::TensorType>::DTYPE {
                    type $T = $ty;
                    break 'dispatch $body;
                }
            )*
            Err(graph::Status::unimplemented(format!("dtype {dt} is not supported here")))
        }
    }};
}

/// Registers a CPU kernel for `$op` whose type attribute `$attr` ranges over a
/// type list (`[f32, i64]`) or a named set (`floats`, `numeric`, `signed`);
/// `$make` builds the kernel with `$T` bound to the element type (and `$c` to the
/// `OpKernelConstruction`, when named, for reading attributes with `?`).
macro_rules! register_typed {
    ($r:expr, $op:expr, $attr:literal, floats, $($rest:tt)+) => {
        register_typed!($r, $op, $attr, [f32, f64, graph::f16, graph::bf16], $($rest)+)
    };
    ($r:expr, $op:expr, $attr:literal, numeric, $($rest:tt)+) => {
        register_typed!($r, $op, $attr,
            [f32, f64, graph::f16, graph::bf16, i8, i16, i32, i64, u8, u16, u32, u64], $($rest)+)
    };
    ($r:expr, $op:expr, $attr:literal, signed, $($rest:tt)+) => {
        register_typed!($r, $op, $attr, [f32, f64, graph::f16, graph::bf16, i8, i16, i32, i64], $($rest)+)
    };
    ($r:expr, $op:expr, $attr:literal, [$($ty:ty),* $(,)?], |$c:ident, $T:ident| $make:expr) => {
        $r.register(
            $crate::registry::KernelDef::cpu($op, |$c| {
                let t: graph::DType = $c.attr($attr)?;
                dispatch_types!(t, $T => Ok(Box::new($make) as Box<dyn $crate::op_kernel::OpKernel>), [$($ty),*])
            })
            .type_constraint($attr, &[$(<$ty as graph::TensorType>::DTYPE),*]),
        )
    };
    ($r:expr, $op:expr, $attr:literal, [$($ty:ty),* $(,)?], |$T:ident| $make:expr) => {
        register_typed!($r, $op, $attr, [$($ty),*], |_c, $T| $make)
    };
}

pub mod accumulate;
pub mod add_n;
pub mod arith;
pub mod binary;
pub mod cast;
pub mod clip;
pub mod compare;
pub mod elem;
pub mod grad;
pub mod logical;
pub mod segment;
pub mod select;
pub mod sparse_segment;
pub mod unary;
pub mod unary_ops;

use crate::registry::KernelRegistry;

/// Registers the math kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    arith::register_all_kernels(r);
    unary_ops::register_all_kernels(r);
    compare::register_all_kernels(r);
    logical::register_all_kernels(r);
    select::register_all_kernels(r);
    cast::register_all_kernels(r);
    add_n::register_all_kernels(r);
    accumulate::register_all_kernels(r);
    segment::register_all_kernels(r);
    sparse_segment::register_all_kernels(r);
    clip::register_all_kernels(r);
    grad::register_all_kernels(r);
}
