//! `Cast` between every pair of POD dtypes, with TensorFlow's CPU conversion rules:
//!
//! - same dtype (strings included): the input is forwarded;
//! - to bool: `x != 0` (NaN is true); from bool: 0 or 1;
//! - integer to integer: two's-complement wrap (C++ `static_cast`);
//! - integer to float: round to nearest even; to half/bfloat16 through `f32`;
//! - float to float: round to nearest even, to half/bfloat16 through `f32` (so
//!   `f64 -> bf16` rounds twice, as Eigen does); with `Truncate`, the pairs TensorFlow
//!   specialises (`f32`/`f64 -> half`, `f32 -> bfloat16`, `f64 -> f32`) zero the
//!   dropped mantissa bits first, so they round toward zero;
//! - float to integer: truncation toward zero. NaN and out-of-range values follow
//!   x86, as TensorFlow's do: `int32`/`int64` get their minimum, `uint64` gets 2^63
//!   (negative values that fit `int64` wrap); narrower types take the `int32`
//!   result and saturate (8/16-bit) and `uint32` wraps values in `[-2^31, 2^32)`
//!   and gives 2^31 otherwise. TensorFlow's own narrow-type results for
//!   out-of-range inputs are undefined behaviour that depends on the tensor's size
//!   and the source type (vectorised and scalar code paths differ); these are its
//!   large-tensor results for `f32` and `bfloat16` inputs.
//!
//! Any other pair (strings, resources) is `Unimplemented` when the kernel is built.

use std::marker::PhantomData;

use graph::{bf16, f16, DType, Result, Status, Tensor, TensorType};

use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The kind of a cast's source type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `bool`.
    Bool,
    /// An integer type.
    Int,
    /// A float type.
    Float,
}

/// How a cast reads a source element.
pub trait CastSrc: TensorType {
    /// The source's kind.
    const KIND: Kind;
    /// `x != 0` (NaN is non-zero).
    fn nonzero(self) -> bool;
    /// The exact value of a bool or integer (0 for floats).
    fn int_value(self) -> i128;
    /// The exact value of a float (0 for others).
    fn float_value(self) -> f64;
    /// The value with its `bits` lowest bits cleared (floats other than NaN).
    fn truncated(self, bits: u32) -> Self {
        let _ = bits;
        self
    }
}

/// How a cast builds a destination element.
pub trait CastDst: TensorType {
    /// Converts one element.
    fn from_src<S: CastSrc>(s: S) -> Self;
}

macro_rules! int_src {
    ($($t:ty),*) => {$(
        impl CastSrc for $t {
            const KIND: Kind = Kind::Int;
            #[inline(always)]
            fn nonzero(self) -> bool { self != 0 }
            #[inline(always)]
            fn int_value(self) -> i128 { self as i128 }
            #[inline(always)]
            fn float_value(self) -> f64 { 0.0 }
        }
    )*};
}
int_src!(i8, i16, i32, i64, u8, u16, u32, u64);

impl CastSrc for bool {
    const KIND: Kind = Kind::Bool;
    #[inline(always)]
    fn nonzero(self) -> bool {
        self
    }
    #[inline(always)]
    fn int_value(self) -> i128 {
        self as i128
    }
    #[inline(always)]
    fn float_value(self) -> f64 {
        0.0
    }
}

macro_rules! float_src {
    ($($t:ty => $bits:ty),*) => {$(
        impl CastSrc for $t {
            const KIND: Kind = Kind::Float;
            #[inline(always)]
            fn nonzero(self) -> bool { self.float_value() != 0.0 }
            #[inline(always)]
            fn int_value(self) -> i128 { 0 }
            #[inline(always)]
            fn float_value(self) -> f64 { self.into() }
            #[inline(always)]
            fn truncated(self, bits: u32) -> Self {
                if self.is_nan() { self } else { <$t>::from_bits(self.to_bits() & <$bits>::MAX.checked_shl(bits).unwrap_or(0)) }
            }
        }
    )*};
}
float_src!(f32 => u32, f64 => u64, f16 => u16, bf16 => u16);

/// `int32` from a float value: truncation, x86's "integer indefinite" (the
/// minimum) for NaN and out-of-range values. Written as a select so the loop
/// vectorises.
#[inline(always)]
fn f2i32(v: f64) -> i32 {
    let r = v as i32;
    if v > -2147483649.0 && v < 2147483648.0 {
        r
    } else {
        i32::MIN
    }
}

#[inline(always)]
fn f2i64(v: f64) -> i64 {
    let r = v as i64;
    if (-9223372036854775808.0..9223372036854775808.0).contains(&v) {
        r
    } else {
        i64::MIN
    }
}

#[inline(always)]
fn f2u64(v: f64) -> u64 {
    const INDEFINITE: u64 = 1 << 63;
    if v.is_nan() {
        INDEFINITE
    } else if v >= 0.0 {
        if v < 18446744073709551616.0 {
            v as u64
        } else {
            INDEFINITE
        }
    } else if v >= -9223372036854775808.0 {
        (v as i64) as u64
    } else {
        INDEFINITE
    }
}

#[inline(always)]
fn f2u32(v: f64) -> u32 {
    let t = v.trunc();
    if (-2147483648.0..4294967296.0).contains(&t) {
        (t as i64) as u32
    } else {
        1 << 31
    }
}

macro_rules! int_dst {
    ($($t:ty => |$v:ident| $float:expr),*) => {$(
        impl CastDst for $t {
            #[inline(always)]
            fn from_src<S: CastSrc>(s: S) -> Self {
                match S::KIND {
                    Kind::Bool | Kind::Int => s.int_value() as $t,
                    Kind::Float => {
                        let $v = s.float_value();
                        $float
                    }
                }
            }
        }
    )*};
}
int_dst!(
    i8 => |v| f2i32(v).clamp(i8::MIN as i32, i8::MAX as i32) as i8,
    i16 => |v| f2i32(v).clamp(i16::MIN as i32, i16::MAX as i32) as i16,
    i32 => |v| f2i32(v),
    i64 => |v| f2i64(v),
    u8 => |v| f2i32(v).clamp(0, u8::MAX as i32) as u8,
    u16 => |v| f2i32(v).clamp(0, u16::MAX as i32) as u16,
    u32 => |v| f2u32(v),
    u64 => |v| f2u64(v)
);

impl CastDst for bool {
    #[inline(always)]
    fn from_src<S: CastSrc>(s: S) -> Self {
        s.nonzero()
    }
}

impl CastDst for f32 {
    #[inline(always)]
    fn from_src<S: CastSrc>(s: S) -> Self {
        match S::KIND {
            Kind::Bool | Kind::Int => s.int_value() as f32,
            Kind::Float => s.float_value() as f32,
        }
    }
}

impl CastDst for f64 {
    #[inline(always)]
    fn from_src<S: CastSrc>(s: S) -> Self {
        match S::KIND {
            Kind::Bool | Kind::Int => s.int_value() as f64,
            Kind::Float => s.float_value(),
        }
    }
}

impl CastDst for f16 {
    #[inline(always)]
    fn from_src<S: CastSrc>(s: S) -> Self {
        f16::from_f32(f32::from_src(s))
    }
}

impl CastDst for bf16 {
    #[inline(always)]
    fn from_src<S: CastSrc>(s: S) -> Self {
        bf16::from_f32(f32::from_src(s))
    }
}

/// Converts every element of `x` from `S` to `D`, first clearing `trunc_bits` low
/// bits of each source float when non-zero.
pub fn cast_tensor<S: CastSrc, D: CastDst>(
    alloc: Allocator<'_>,
    x: &Tensor,
    trunc_bits: u32,
) -> Result<Tensor> {
    let xs = x.as_slice::<S>()?;
    alloc.build::<D>(x.shape().clone(), |o| {
        if trunc_bits == 0 {
            o.iter_mut().zip(xs).for_each(|(o, &v)| *o = D::from_src(v));
        } else {
            o.iter_mut()
                .zip(xs)
                .for_each(|(o, &v)| *o = D::from_src(v.truncated(trunc_bits)));
        }
    })
}

/// `Cast` from `S` to `D`.
struct CastKernel<S, D> {
    trunc_bits: u32,
    _t: PhantomData<fn(S, D)>,
}

impl<S: CastSrc, D: CastDst> OpKernel for CastKernel<S, D> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let out = cast_tensor::<S, D>(ctx.allocator(), ctx.input(0)?, self.trunc_bits)?;
        ctx.set_output(0, out)
    }
}

/// `Cast` to the same dtype: forwards the input.
struct IdentityCast;

impl OpKernel for IdentityCast {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.take_input(0)?;
        ctx.set_output(0, x)
    }
}

/// The mantissa bits `Truncate` clears for the pairs TensorFlow specialises.
fn truncation_bits(src: DType, dst: DType) -> u32 {
    match (src, dst) {
        (DType::F32, DType::F16) => 24 - 11,
        (DType::F64, DType::F16) => 53 - 11,
        (DType::F32, DType::BF16) => 24 - 8,
        (DType::F64, DType::F32) => 53 - 24,
        _ => 0,
    }
}

fn make_cast(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let src: DType = c.attr("SrcT")?;
    let dst: DType = c.attr("DstT")?;
    let truncate: bool = c.attr("Truncate")?;
    if src == dst {
        return Ok(Box::new(IdentityCast));
    }
    let unsupported = || {
        Err(Status::unimplemented(format!(
            "Cast {} to {} is not supported",
            src.op_spec_name(),
            dst.op_spec_name()
        )))
    };
    let trunc_bits = if truncate {
        truncation_bits(src, dst)
    } else {
        0
    };
    graph::dispatch_pod!(src, S => graph::dispatch_pod!(dst, D => Ok(Box::new(CastKernel::<S, D> {
        trunc_bits,
        _t: PhantomData,
    }) as Box<dyn OpKernel>), unsupported()), unsupported())
}

/// Registers the cast kernel.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("Cast", make_cast));
}

#[cfg(test)]
mod tests;
