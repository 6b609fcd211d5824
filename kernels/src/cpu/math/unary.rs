//! The element-wise unary kernel framework. [`UnaryKernel`] maps `T -> T` and writes
//! into its input's buffer when the input is uniquely held (TensorFlow's
//! `forward_input_or_allocate_output`); [`UnaryToKernel`] changes the element type
//! (`IsNan` and friends). The functions live in `unary_ops` and `logical`.

use std::marker::PhantomData;

use graph::{Result, Tensor, TensorType};

use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelContext};

/// A unary element function from `A` to `O`.
pub trait UnaryFn<A, O>: Send + Sync + 'static {
    /// Applies the function.
    fn apply(x: A) -> O;
}

/// Runs `F: T -> T` element-wise, in place when the input is uniquely held.
pub struct UnaryKernel<T, F>(PhantomData<fn(T, F)>);

/// Runs `F: A -> O` element-wise into a new tensor.
pub struct UnaryToKernel<A, O, F>(PhantomData<fn(A, O, F)>);

impl<T, F> UnaryKernel<T, F> {
    /// A new kernel.
    pub fn new() -> Self {
        UnaryKernel(PhantomData)
    }
}

impl<T, F> Default for UnaryKernel<T, F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A, O, F> UnaryToKernel<A, O, F> {
    /// A new kernel.
    pub fn new() -> Self {
        UnaryToKernel(PhantomData)
    }
}

impl<A, O, F> Default for UnaryToKernel<A, O, F> {
    fn default() -> Self {
        Self::new()
    }
}

/// `f` over every element of `x`, in `x`'s buffer when it is uniquely held.
pub fn unary_op_same<T: TensorType>(
    alloc: Allocator<'_>,
    mut x: Tensor,
    f: impl Fn(T) -> T,
) -> Result<Tensor> {
    if x.is_unique() {
        x.as_mut_slice::<T>()?.iter_mut().for_each(|v| *v = f(*v));
        return Ok(x);
    }
    unary_op::<T, T>(alloc, &x, f)
}

/// `f` over every element of `x` into a new tensor.
pub fn unary_op<A: TensorType, O: TensorType>(
    alloc: Allocator<'_>,
    x: &Tensor,
    f: impl Fn(A) -> O,
) -> Result<Tensor> {
    let xs = x.as_slice::<A>()?;
    alloc.build::<O>(x.shape().clone(), |o| {
        o.iter_mut().zip(xs).for_each(|(o, &v)| *o = f(v));
    })
}

impl<T: TensorType, F: UnaryFn<T, T>> OpKernel for UnaryKernel<T, F> {
    #[inline]
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.take_input(0)?;
        let out = unary_op_same::<T>(ctx.allocator(), x, F::apply)?;
        ctx.set_output(0, out)
    }
}

impl<A: TensorType, O: TensorType, F: UnaryFn<A, O>> OpKernel for UnaryToKernel<A, O, F> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let out = unary_op::<A, O>(ctx.allocator(), ctx.input(0)?, F::apply)?;
        ctx.set_output(0, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::DType;

    #[test]
    fn writes_in_place_only_when_unique() {
        let x = Tensor::zeros(DType::F64, [32]);
        let ptr = x.as_bytes().unwrap().as_ptr();
        let out = unary_op_same::<f64>(Allocator::unlimited(), x, |v| v + 2.0).unwrap();
        assert_eq!(out.as_bytes().unwrap().as_ptr(), ptr);
        let shared = out.clone();
        let again = unary_op_same::<f64>(Allocator::unlimited(), out, |v| v * 3.0).unwrap();
        assert!(!again.shares_buffer_with(&shared));
        assert_eq!(shared.as_slice::<f64>().unwrap()[0], 2.0);
        assert_eq!(again.as_slice::<f64>().unwrap()[0], 6.0);
    }

    #[test]
    fn type_changing_map_keeps_shape() {
        let x = Tensor::new(&[2, 0], Vec::<f32>::new()).unwrap();
        let out = unary_op::<f32, bool>(Allocator::unlimited(), &x, |v| v > 0.0).unwrap();
        assert_eq!((out.dtype(), out.dims()), (DType::Bool, &[2usize, 0][..]));
        assert!(
            unary_op::<i32, bool>(Allocator::unlimited(), &x, |v| v > 0).is_err(),
            "wrong dtype is an error"
        );
    }
}
