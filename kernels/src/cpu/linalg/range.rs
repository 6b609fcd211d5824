//! `Range`: `start, start + delta, …` while short of `limit`, element `i` computed
//! as `start + i * delta` in the element type as TensorFlow does (so float ranges
//! round the same way).
//! The size and its checks are [`graph::ops::RangeElem`]'s, shared with the shape
//! function.

use std::marker::PhantomData;

use graph::ops::RangeElem;
use graph::{DType, Result, Status, Tensor};

use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};

/// The kernel of `Range` over `T`.
pub struct RangeKernel<T>(PhantomData<fn(T)>);

/// The value of a scalar (or, as TensorFlow still allows, length-1 vector) input.
fn scalar_arg<T: RangeElem>(t: &Tensor, what: &str) -> Result<T> {
    let ok = t.rank() == 0 || (t.rank() == 1 && t.dims() == [1]);
    match t.as_slice::<T>()?.first() {
        Some(&v) if ok => Ok(v),
        _ => Err(Status::invalid_argument(format!(
            "{what} must be a scalar, not shape {}",
            t.shape()
        ))),
    }
}

/// `Range(start, limit, delta)` as a tensor.
pub fn range_tensor<T: RangeElem>(
    alloc: Allocator<'_>,
    start: T,
    limit: T,
    delta: T,
) -> Result<Tensor> {
    let size = T::range_size(start, limit, delta)?;
    alloc.build::<T>([size], |o| {
        for (i, x) in o.iter_mut().enumerate() {
            *x = T::range_value(start, i, delta);
        }
    })
}

impl<T: RangeElem> OpKernel for RangeKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let start = scalar_arg::<T>(ctx.input(0)?, "start")?;
        let limit = scalar_arg::<T>(ctx.input(1)?, "limit")?;
        let delta = scalar_arg::<T>(ctx.input(2)?, "delta")?;
        let out = range_tensor(ctx.allocator(), start, limit, delta)?;
        ctx.set_output(0, out)
    }
}

/// Builds the kernel of a `Range` node.
pub fn make_range(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("Tidx")?;
    Ok(match t {
        DType::F32 => Box::new(RangeKernel::<f32>(PhantomData)),
        DType::F64 => Box::new(RangeKernel::<f64>(PhantomData)),
        DType::F16 => Box::new(RangeKernel::<graph::f16>(PhantomData)),
        DType::BF16 => Box::new(RangeKernel::<graph::bf16>(PhantomData)),
        DType::I32 => Box::new(RangeKernel::<i32>(PhantomData)),
        DType::I64 => Box::new(RangeKernel::<i64>(PhantomData)),
        other => return Err(Status::unimplemented(format!("Range of {other}"))),
    })
}

/// The `Tidx` types TensorFlow registers CPU `Range` kernels for.
pub const RANGE_DTYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
];
