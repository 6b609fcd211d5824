//! `ArgMax` and `ArgMin`: the index of the largest (smallest) element along one
//! dimension, with TensorFlow's CPU semantics: ties give the first index; the scan
//! starts from the type's lowest (highest) finite value at index 0 and moves only
//! to strictly greater (smaller) elements, so NaNs are skipped and an all-NaN (or
//! all -inf, for `ArgMax`) slice gives 0.

use std::marker::PhantomData;

use graph::{bf16, f16, DType, Result, Status, Tensor, TensorType};

use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};

/// An element type the arg-reductions compare.
pub trait ArgElem: TensorType + PartialOrd {
    /// Where an `ArgMax` scan starts (the lowest finite value, `false`).
    const LOWEST: Self;
    /// Where an `ArgMin` scan starts (the highest finite value, `true`).
    const HIGHEST: Self;
}

macro_rules! arg_elem {
    ($($t:ty),*) => {$(
        impl ArgElem for $t {
            const LOWEST: $t = <$t>::MIN;
            const HIGHEST: $t = <$t>::MAX;
        }
    )*};
}
arg_elem!(f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64);

impl ArgElem for bool {
    const LOWEST: bool = false;
    const HIGHEST: bool = true;
}

/// An index type of `output_type`.
pub trait IndexType: TensorType {
    /// The index, truncated to the type as C++'s conversion does.
    fn from_index(i: usize) -> Self;
}

macro_rules! index_type {
    ($($t:ty),*) => {$(
        impl IndexType for $t {
            #[inline(always)]
            fn from_index(i: usize) -> $t {
                i as $t
            }
        }
    )*};
}
index_type!(i16, u16, i32, i64);

/// `ArgMax` (`MAX = true`) or `ArgMin` over elements `T`, indices `O`.
pub struct ArgKernel<T, O, const MAX: bool>(PhantomData<fn(T, O)>);

/// The most dimensions TensorFlow's CPU kernel handles.
const MAX_RANK: usize = 7;

/// The dimension to reduce: a scalar of `int16`, `int32` or `int64`.
fn dimension(t: &Tensor) -> Result<i64> {
    if t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "dim must be a scalar, but received tensor of shape: {}",
            t.shape()
        )));
    }
    match t.dtype() {
        DType::I16 => Ok(t.scalar_value::<i16>()? as i64),
        DType::I32 => Ok(t.scalar_value::<i32>()? as i64),
        DType::I64 => t.scalar_value::<i64>(),
        other => Err(Status::invalid_argument(format!(
            "dimension must be int16, int32 or int64, got {other}"
        ))),
    }
}

impl<T: ArgElem, O: IndexType, const MAX: bool> ArgKernel<T, O, MAX> {
    #[inline(always)]
    fn better(v: T, best: T) -> bool {
        if MAX {
            v > best
        } else {
            v < best
        }
    }

    fn start() -> T {
        if MAX {
            T::LOWEST
        } else {
            T::HIGHEST
        }
    }

    /// The output for `input` reduced along `dim`.
    fn arg(alloc: Allocator<'_>, input: &Tensor, dim: i64) -> Result<Tensor> {
        let dims = input.dims();
        let rank = dims.len();
        let r = rank as i64;
        let axis = if dim < 0 { dim + r } else { dim };
        if axis < 0 || axis >= r {
            return Err(Status::invalid_argument(format!(
                "Expected dimension in the range [{}, {r}), but got {dim}",
                -r
            )));
        }
        let axis = axis as usize;
        let n = dims[axis];
        if n == 0 {
            return Err(Status::invalid_argument(format!(
                "Reduction axis {dim} is empty in shape {}",
                input.shape()
            )));
        }
        let out_dims: Vec<usize> = dims
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != axis)
            .map(|(_, &d)| d)
            .collect();
        let product = |d: &[usize]| {
            d.iter()
                .try_fold(1usize, |a, &b| a.checked_mul(b))
                .ok_or_else(|| {
                    Status::invalid_argument(format!("shape {} is too large", input.shape()))
                })
        };
        let (outer, inner) = (product(&dims[..axis])?, product(&dims[axis + 1..])?);
        if outer * inner == 0 {
            return alloc.zeros(O::DTYPE, out_dims);
        }
        if rank > MAX_RANK {
            return Err(Status::invalid_argument(format!(
                "Argmax and Argmin only support up to {MAX_RANK} input dimensions, but got \
                 {rank}. Inputs shape: {}",
                input.shape()
            )));
        }
        let x = input.as_slice::<T>()?;
        alloc.build::<O>(out_dims, |out| {
            if inner == 1 {
                for (o, row) in out.iter_mut().zip(x.chunks_exact(n)) {
                    let (mut best, mut best_i) = (Self::start(), 0);
                    for (i, &v) in row.iter().enumerate() {
                        if Self::better(v, best) {
                            best = v;
                            best_i = i;
                        }
                    }
                    *o = O::from_index(best_i);
                }
                return;
            }
            let mut best = vec![Self::start(); inner];
            let mut best_i = vec![0usize; inner];
            for (o, block) in out.chunks_exact_mut(inner).zip(x.chunks_exact(n * inner)) {
                best.fill(Self::start());
                best_i.fill(0);
                for (k, row) in block.chunks_exact(inner).enumerate() {
                    for ((b, bi), &v) in best.iter_mut().zip(best_i.iter_mut()).zip(row) {
                        if Self::better(v, *b) {
                            *b = v;
                            *bi = k;
                        }
                    }
                }
                for (o, &i) in o.iter_mut().zip(&best_i) {
                    *o = O::from_index(i);
                }
            }
        })
    }
}

impl<T: ArgElem, O: IndexType, const MAX: bool> OpKernel for ArgKernel<T, O, MAX> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dim = dimension(ctx.input(1)?)?;
        let out = Self::arg(ctx.allocator(), ctx.input(0)?, dim)?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn boxed<T: ArgElem, const MAX: bool>(out: DType) -> Result<Box<dyn OpKernel>> {
    Ok(match out {
        DType::I64 => Box::new(ArgKernel::<T, i64, MAX>(PhantomData)),
        DType::I32 => Box::new(ArgKernel::<T, i32, MAX>(PhantomData)),
        DType::I16 => Box::new(ArgKernel::<T, i16, MAX>(PhantomData)),
        DType::U16 => Box::new(ArgKernel::<T, u16, MAX>(PhantomData)),
        other => {
            return Err(Status::unimplemented(format!(
                "output_type {other} is not supported"
            )))
        }
    })
}

/// Builds the kernel of an `ArgMax` (`MAX = true`) or `ArgMin` node.
pub fn make_arg<const MAX: bool>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    let out: DType = c.attr("output_type")?;
    if t == DType::Bool {
        return boxed::<bool, MAX>(out);
    }
    crate::dispatch_numeric!(t, T => boxed::<T, MAX>(out))
}
