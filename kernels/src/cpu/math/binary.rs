//! The element-wise binary kernel framework, with numpy broadcasting.
//! [`BinaryKernel`] is generic over the element type and the function and writes
//! into an input's buffer when that input is uniquely held and already has the
//! output's shape (TensorFlow's buffer forwarding); [`BinaryToKernel`] changes the
//! element type (comparisons). The functions themselves live in `arith`, `compare`
//! and `logical`.

use std::marker::PhantomData;

use graph::{Result, Tensor, TensorType};

use crate::allocator::Allocator;
use crate::cpu::broadcast::BCast;
use crate::cpu::types::{Numeric, ScalarElem};
use crate::op_kernel::{OpKernel, OpKernelContext};

pub use super::arith::{AddFn, MulFn, SubFn};

/// A binary element function from `A` to `O`.
pub trait BinaryFn<A, O>: Send + Sync + 'static {
    /// True when [`BinaryFn::check`] must run before the elements are computed.
    const CHECKS: bool = false;

    /// Applies the function.
    fn apply(a: A, b: A) -> O;

    /// Validates the right operand (integer division by zero, negative integer
    /// exponents). The kernel calls it only when [`BinaryFn::CHECKS`] is set, the
    /// shapes broadcast and the output is not empty.
    #[inline]
    fn check(_b: &[A]) -> Result<()> {
        Ok(())
    }
}

/// Runs `F: (T, T) -> T` element-wise over two broadcast inputs, in place when it can.
pub struct BinaryKernel<T, F>(PhantomData<fn(T, F)>);

/// Runs `F: (A, A) -> O` element-wise (comparisons and other type-changing ops).
pub struct BinaryToKernel<A, O, F>(PhantomData<fn(A, O, F)>);

impl<T, F> BinaryKernel<T, F> {
    /// A new kernel.
    pub fn new() -> Self {
        BinaryKernel(PhantomData)
    }
}

impl<T, F> Default for BinaryKernel<T, F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A, O, F> BinaryToKernel<A, O, F> {
    /// A new kernel.
    pub fn new() -> Self {
        BinaryToKernel(PhantomData)
    }
}

impl<A, O, F> Default for BinaryToKernel<A, O, F> {
    fn default() -> Self {
        Self::new()
    }
}

/// True when a tensor of shape `small` broadcast against one of shape `big` gives
/// `big` with `small`'s elements repeating as a block: `small` without its leading
/// 1s is a suffix of `big`.
fn is_suffix_broadcast(small: &[usize], big: &[usize]) -> bool {
    if small.len() > big.len() {
        return false;
    }
    let lead = small.iter().take_while(|&&d| d == 1).count();
    let core = &small[lead..];
    big.ends_with(core)
}

/// `out[i] = f(out[i], ys[i mod len])` (or `f(ys[…], out[i])` when `swapped`).
#[inline(always)]
fn apply_repeating<T: Copy>(out: &mut [T], ys: &[T], swapped: bool, f: impl Fn(T, T) -> T) {
    match ys {
        [] => {}
        [y] => {
            let y = *y;
            if swapped {
                out.iter_mut().for_each(|o| *o = f(y, *o));
            } else {
                out.iter_mut().for_each(|o| *o = f(*o, y));
            }
        }
        _ => {
            for chunk in out.chunks_exact_mut(ys.len()) {
                if swapped {
                    chunk.iter_mut().zip(ys).for_each(|(o, &y)| *o = f(y, *o));
                } else {
                    chunk.iter_mut().zip(ys).for_each(|(o, &y)| *o = f(*o, y));
                }
            }
        }
    }
}

/// `f` over `a` and `b` broadcast together, writing into `a`'s or `b`'s buffer when
/// it is uniquely held and has the output's shape.
pub fn binary_op_same<T: TensorType>(
    alloc: Allocator<'_>,
    mut a: Tensor,
    mut b: Tensor,
    f: impl Fn(T, T) -> T,
) -> Result<Tensor> {
    if a.dims().is_empty() && b.dims().is_empty() {
        // Scalars (held inline): no buffers, no broadcasting.
        return Ok(Tensor::scalar(f(
            a.scalar_value::<T>()?,
            b.scalar_value::<T>()?,
        )));
    }
    if is_suffix_broadcast(b.dims(), a.dims()) && a.is_unique() {
        let ys = b.as_slice::<T>()?;
        let mut out = a;
        apply_repeating(out.as_mut_slice::<T>()?, ys, false, f);
        return Ok(out);
    }
    if is_suffix_broadcast(a.dims(), b.dims()) && b.is_unique() {
        let xs = a.as_slice::<T>()?;
        let mut out = b;
        apply_repeating(out.as_mut_slice::<T>()?, xs, true, f);
        return Ok(out);
    }
    binary_op::<T, T>(alloc, &a, &b, f)
}

/// `f` over `a` and `b` broadcast together into a new tensor.
pub fn binary_op<A: TensorType, O: TensorType>(
    alloc: Allocator<'_>,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(A, A) -> O,
) -> Result<Tensor> {
    if a.dims().is_empty() && b.dims().is_empty() {
        return Ok(Tensor::scalar(f(
            a.scalar_value::<A>()?,
            b.scalar_value::<A>()?,
        )));
    }
    let (xa, xb) = (a.as_slice::<A>()?, b.as_slice::<A>()?);
    if a.shape() == b.shape() {
        return alloc.build::<O>(a.shape().clone(), |o| {
            for ((o, &x), &y) in o.iter_mut().zip(xa).zip(xb) {
                *o = f(x, y);
            }
        });
    }
    let bc = BCast::new(a.dims(), b.dims())?;
    alloc.build::<O>(bc.output_shape().clone(), |o| bc.apply(xa, xb, o, f))
}

/// Runs `F::check` on `b` when `F` has one, after the shapes are known to broadcast
/// (TensorFlow reports incompatible shapes first) and only for a non-empty output.
#[inline]
fn check_rhs<A: TensorType, O, F: BinaryFn<A, O>>(a: &Tensor, b: &Tensor) -> Result<()> {
    if F::CHECKS && a.num_elements() > 0 && b.num_elements() > 0 {
        if a.shape() != b.shape() {
            BCast::new(a.dims(), b.dims())?;
        }
        F::check(b.as_slice::<A>()?)?;
    }
    Ok(())
}

impl<T: ScalarElem, F: BinaryFn<T, T>> OpKernel for BinaryKernel<T, F> {
    #[inline]
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        if let Some((a, b)) = ctx.scalar_inputs::<T>() {
            if F::CHECKS {
                F::check(std::slice::from_ref(&b))?;
            }
            return ctx.set_scalar_output_from_input(0, 0, F::apply(a, b));
        }
        let b = ctx.take_input(1)?;
        let a = ctx.take_input(0)?;
        check_rhs::<T, T, F>(&a, &b)?;
        let out = binary_op_same::<T>(ctx.allocator(), a, b, F::apply)?;
        ctx.set_output(0, out)
    }
}

impl<A: ScalarElem, O: TensorType, F: BinaryFn<A, O>> OpKernel for BinaryToKernel<A, O, F> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        if let Some((a, b)) = ctx.scalar_inputs::<A>() {
            if F::CHECKS {
                F::check(std::slice::from_ref(&b))?;
            }
            return ctx.set_scalar_output(0, F::apply(a, b));
        }
        let (a, b) = (ctx.input(0)?, ctx.input(1)?);
        check_rhs::<A, O, F>(a, b)?;
        let out = binary_op::<A, O>(ctx.allocator(), a, b, F::apply)?;
        ctx.set_output(0, out)
    }
}

/// Truncates an `i128` to `T`'s width, two's complement (TensorFlow's integer
/// overflow behaviour).
#[inline(always)]
pub fn wrap_to<T: Numeric>(v: i128) -> T {
    let bits = T::DTYPE.size() * 8;
    let mask: u128 = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let u = (v as u128) & mask;
    let signed = T::min_value() < T::zero();
    if signed && bits < 128 && (u >> (bits - 1)) & 1 == 1 {
        T::from_i128(u as i128 - (1i128 << bits)).unwrap_or_else(T::zero)
    } else {
        T::from_u128(u).unwrap_or_else(T::zero)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::DType;

    #[test]
    fn reuses_a_unique_input_buffer() {
        let a = Tensor::zeros(DType::F32, [64]);
        let ptr = a.as_bytes().unwrap().as_ptr();
        let out = binary_op_same::<f32>(
            Allocator::unlimited(),
            a,
            Tensor::zeros(DType::F32, [64]),
            |x, y| x + y + 1.0,
        )
        .unwrap();
        assert_eq!(out.as_bytes().unwrap().as_ptr(), ptr);
        assert!(out.as_slice::<f32>().unwrap().iter().all(|&v| v == 1.0));
    }

    #[test]
    fn reuses_the_larger_input_when_the_other_broadcasts_as_a_block() {
        let a = Tensor::new(&[2, 8, 3], (0..48).map(|v| v as f32).collect()).unwrap();
        let ptr = a.as_bytes().unwrap().as_ptr();
        let b = Tensor::new(&[1, 3], vec![100.0f32, 200.0, 300.0]).unwrap();
        // b - a: the output is written into a's buffer with the operands swapped.
        let out = binary_op_same::<f32>(Allocator::unlimited(), b, a, |x, y| x - y).unwrap();
        assert_eq!(out.as_bytes().unwrap().as_ptr(), ptr);
        assert_eq!(out.dims(), &[2, 8, 3]);
        let v = out.as_slice::<f32>().unwrap();
        assert_eq!(&v[..4], &[100.0, 199.0, 298.0, 97.0]);
        // A shared input is never written.
        let a = Tensor::new(&[2, 8], vec![1.0f32; 16]).unwrap();
        let keep = a.clone();
        let out =
            binary_op_same::<f32>(Allocator::unlimited(), a, Tensor::scalar(1.0f32), |x, y| {
                x + y
            })
            .unwrap();
        assert!(!out.shares_buffer_with(&keep));
        assert_eq!(keep.as_slice::<f32>().unwrap()[0], 1.0);
        assert_eq!(out.as_slice::<f32>().unwrap()[0], 2.0);
    }

    #[test]
    fn suffix_broadcast_detection() {
        assert!(is_suffix_broadcast(&[], &[2, 3]));
        assert!(is_suffix_broadcast(&[1, 3], &[2, 3]));
        assert!(is_suffix_broadcast(&[2, 3], &[2, 3]));
        assert!(!is_suffix_broadcast(&[2, 1], &[2, 3]));
        assert!(!is_suffix_broadcast(&[1, 3], &[3]));
        assert!(is_suffix_broadcast(&[0], &[2, 0]));
    }

    #[test]
    fn wrap_to_truncates() {
        assert_eq!(wrap_to::<i8>(200), -56);
        assert_eq!(wrap_to::<u16>(-1), u16::MAX);
        assert_eq!(wrap_to::<i64>(i64::MAX as i128 + 1), i64::MIN);
    }
}
