//! Element-type traits for generic kernels and the dtype dispatch macros.
//!
//! [`ScalarElem`] reads the value of a rank-0 tensor held in its handle ("inline
//! scalar") without building a slice view, for the scalar fast paths (binary kernels
//! on two scalars, the `Switch` predicate). Anything else (another dtype, a tensor
//! with heap storage) answers `None` and takes the general path, so a fast path
//! never changes a result or an error.
//!
//! `dispatch_float!`, `dispatch_numeric!`, `dispatch_int!` and `dispatch_all!` bind a
//! type alias to the Rust type of a dtype and evaluate an expression (typically
//! building a kernel monomorphised for it); other dtypes give `Unimplemented`.

use graph::{bf16, f16, DType, Tensor, TensorType};
use num_traits::{Bounded, FromPrimitive, Num, NumCast, ToPrimitive};

/// The float dtypes.
pub const FLOAT_DTYPES: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];
/// The integer dtypes.
pub const INT_DTYPES: &[DType] = &[
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
];
/// Floats and integers.
pub const NUMERIC_DTYPES: &[DType] = &[
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
];
/// Every POD dtype (numeric and bool).
pub const POD_DTYPES: &[DType] = &[
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
];

/// A numeric element type.
pub trait Numeric:
    TensorType + Num + NumCast + ToPrimitive + FromPrimitive + PartialOrd + Bounded
{
    /// True for float types.
    const IS_FLOAT: bool;
}

macro_rules! numeric {
    ($($t:ty => $f:expr),*) => {$(impl Numeric for $t { const IS_FLOAT: bool = $f; })*};
}
numeric!(f32 => true, f64 => true, f16 => true, bf16 => true,
    i8 => false, i16 => false, i32 => false, i64 => false,
    u8 => false, u16 => false, u32 => false, u64 => false);

/// An element type whose inline scalar can be read directly.
pub trait ScalarElem: TensorType {
    /// The value of `t` when it is an inline scalar of this element type.
    fn read_inline(t: &Tensor) -> Option<Self>;
}

/// The element bytes of `t` when it is an inline scalar of `T`'s dtype.
#[inline(always)]
fn inline_bytes<T: TensorType>(t: &Tensor) -> Option<&[u8]> {
    if t.is_inline_scalar() && t.dtype() == T::DTYPE {
        t.as_bytes().ok()
    } else {
        None
    }
}

macro_rules! pod_scalar {
    ($($t:ty),* $(,)?) => {$(
        impl ScalarElem for $t {
            #[inline(always)]
            fn read_inline(t: &Tensor) -> Option<Self> {
                let b = inline_bytes::<$t>(t)?;
                let b: [u8; std::mem::size_of::<$t>()] = b.try_into().ok()?;
                Some(<$t>::from_ne_bytes(b))
            }
        }
    )*};
}

pod_scalar!(f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64);

impl ScalarElem for bool {
    #[inline(always)]
    fn read_inline(t: &Tensor) -> Option<Self> {
        // Boolean storage holds only 0 or 1.
        inline_bytes::<bool>(t)?.first().map(|&b| b != 0)
    }
}

/// A float element type.
pub trait FloatType: Numeric + num_traits::Float {}
impl FloatType for f32 {}
impl FloatType for f64 {}
impl FloatType for f16 {}
impl FloatType for bf16 {}

/// An integer element type.
pub trait IntType: Numeric + num_traits::PrimInt {}
macro_rules! int_type {
    ($($t:ty),*) => {$(impl IntType for $t {})*};
}
int_type!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Binds `$T` to the Rust type of `$dt` among the listed dtypes and evaluates
/// `$body`; any other dtype is `Unimplemented` ("… (`$what` only)"). The
/// `dispatch_*` macros below are this with their dtype lists.
#[doc(hidden)]
#[macro_export]
macro_rules! __dispatch_among {
    ($dt:expr, $T:ident => $body:expr, $what:literal, [$($variant:ident => $ty:ty),+ $(,)?]) => {
        match $dt {
            $(graph::DType::$variant => {
                type $T = $ty;
                $body
            })+
            other => Err(graph::Status::unimplemented(format!(
                concat!("dtype {} is not supported here (", $what, " only)"),
                other
            ))),
        }
    };
}

/// Binds `$T` to the float type of `$dt` and evaluates `$body`.
#[macro_export]
macro_rules! dispatch_float {
    ($dt:expr, $T:ident => $body:expr) => {
        $crate::__dispatch_among!($dt, $T => $body, "floats",
            [F32 => f32, F64 => f64, F16 => graph::f16, BF16 => graph::bf16])
    };
}

/// Binds `$T` to the integer type of `$dt` and evaluates `$body`.
#[macro_export]
macro_rules! dispatch_int {
    ($dt:expr, $T:ident => $body:expr) => {
        $crate::__dispatch_among!($dt, $T => $body, "integers",
            [I8 => i8, I16 => i16, I32 => i32, I64 => i64,
             U8 => u8, U16 => u16, U32 => u32, U64 => u64])
    };
}

/// Binds `$T` to the numeric type of `$dt` and evaluates `$body`.
#[macro_export]
macro_rules! dispatch_numeric {
    ($dt:expr, $T:ident => $body:expr) => {
        $crate::__dispatch_among!($dt, $T => $body, "numeric",
            [F32 => f32, F64 => f64, F16 => graph::f16, BF16 => graph::bf16,
             I8 => i8, I16 => i16, I32 => i32, I64 => i64,
             U8 => u8, U16 => u16, U32 => u32, U64 => u64])
    };
}

/// Binds `$T` to the type of any POD `$dt` (numeric or bool) and evaluates `$body`.
#[macro_export]
macro_rules! dispatch_pod_kernel {
    ($dt:expr, $T:ident => $body:expr) => {
        graph::dispatch_pod!($dt, $T => $body,
            Err(graph::Status::unimplemented(format!("dtype {} is not supported here", $dt))))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inline_scalars_of_their_own_dtype_only() {
        assert_eq!(f32::read_inline(&Tensor::scalar(1.5f32)), Some(1.5));
        assert_eq!(i32::read_inline(&Tensor::scalar(-7i32)), Some(-7));
        assert_eq!(u64::read_inline(&Tensor::scalar(u64::MAX)), Some(u64::MAX));
        assert_eq!(i8::read_inline(&Tensor::scalar(-128i8)), Some(-128));
        assert_eq!(
            f16::read_inline(&Tensor::scalar(f16::from_f32(0.5))),
            Some(f16::from_f32(0.5))
        );
        assert_eq!(
            bf16::read_inline(&Tensor::scalar(bf16::from_f32(-2.0))),
            Some(bf16::from_f32(-2.0))
        );
        assert_eq!(bool::read_inline(&Tensor::scalar(true)), Some(true));
        assert_eq!(bool::read_inline(&Tensor::scalar(false)), Some(false));
        // another dtype, or not a scalar: the general path decides
        assert_eq!(f32::read_inline(&Tensor::scalar(1i32)), None);
        assert_eq!(i64::read_inline(&Tensor::scalar(1i32)), None);
        assert_eq!(f32::read_inline(&Tensor::vector(&[1.0f32])), None);
        assert_eq!(bool::read_inline(&Tensor::string_scalar("x")), None);
    }
}
