//! CPU kernels of the reduction ops: `Sum`, `Mean`, `Max`, `Min`, `Prod`, `All`,
//! `Any` ([`ReductionKernel`]) and `ArgMax`, `ArgMin` ([`arg`]).
//!
//! - [`reducers`]: what each op accumulates, per dtype (TensorFlow's overflow, NaN
//!   and empty-reduction rules).
//! - [`engine`]: the loops: dimension collapsing, row and column fast paths, rayon.
//! - [`arg`]: the arg-reductions.
//!
//! `reduction_indices` may be a scalar or a tensor of `int32`/`int64` axes (any
//! rank, flattened, as TensorFlow's kernel reads it); negative axes count from the
//! end; an axis out of range or given twice is `InvalidArgument`. No axes (or only
//! axes of size 1) returns the input's buffer under the output shape; reducing
//! empty dimensions gives the op's identity.

pub mod arg;
pub mod engine;
pub mod reducers;

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};

use crate::allocator::Allocator;
use crate::cpu::types::{NUMERIC_DTYPES, POD_DTYPES};
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use reducers::{
    AllReducer, AnyReducer, MaxReducer, MeanReducer, MinReducer, ProdReducer, ReduceElem, Reducer,
    SumReducer,
};

/// Which axes of a rank-`rank` tensor `axes` (`int32` or `int64`) names, with
/// TensorFlow's checks (range, duplicates).
pub fn reduction_axes(axes: &Tensor, rank: usize) -> Result<Vec<bool>> {
    let values: Vec<i64> = match axes.dtype() {
        DType::I32 => axes.as_slice::<i32>()?.iter().map(|&a| a as i64).collect(),
        DType::I64 => axes.as_slice::<i64>()?.to_vec(),
        other => {
            return Err(Status::invalid_argument(format!(
                "reduction_indices must be int32 or int64, got {other}"
            )))
        }
    };
    let r = rank as i64;
    let mut reduced = vec![false; rank];
    for a in values {
        if a < -r || a >= r {
            return Err(Status::invalid_argument(format!(
                "Invalid reduction dimension ({a} for input with {rank} dimension(s)"
            )));
        }
        let i = (if a < 0 { a + r } else { a }) as usize;
        if reduced[i] {
            return Err(Status::invalid_argument(format!(
                "Invalid reduction arguments: Axes contains duplicate dimension: {i}"
            )));
        }
        reduced[i] = true;
    }
    Ok(reduced)
}

/// The output shape: reduced dimensions dropped, or kept as 1 with `keep_dims`.
fn output_shape(dims: &[usize], reduced: &[bool], keep_dims: bool) -> TensorShape {
    let mut out = TensorShape::scalar();
    for (&d, &r) in dims.iter().zip(reduced) {
        if !r {
            out.push(d);
        } else if keep_dims {
            out.push(1);
        }
    }
    out
}

/// Reduces `input` over `reduced` with `R`.
pub fn reduce_tensor<R: Reducer>(
    alloc: Allocator<'_>,
    input: &Tensor,
    reduced: &[bool],
    keep_dims: bool,
) -> Result<Tensor> {
    let shape = output_shape(input.dims(), reduced, keep_dims);
    // Checked: with an empty input, the kept dimensions alone may multiply past
    // what any tensor holds.
    let (n_in, n_out) = (input.num_elements(), shape.checked_num_elements()?);
    if n_out == 0 {
        return alloc.zeros(input.dtype(), shape);
    }
    if n_in == 0 {
        return alloc.build::<R::In>(shape, |o| o.fill(R::empty()));
    }
    if n_in == n_out {
        // Nothing (or only dimensions of size 1) to reduce: the input itself.
        return input.reshaped(shape);
    }
    let x = input.as_slice::<R::In>()?;
    let acc = engine::reduce(x, input.dims(), reduced, R::init(), R::lift, R::combine);
    let n = n_in / n_out;
    alloc.build::<R::In>(shape, |o| {
        for (o, &a) in o.iter_mut().zip(&acc) {
            *o = R::finish(a, n);
        }
    })
}

/// The kernel of one reduction op `R`.
pub struct ReductionKernel<R> {
    keep_dims: bool,
    _r: PhantomData<fn(R)>,
}

impl<R: Reducer> OpKernel for ReductionKernel<R> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let reduced = reduction_axes(ctx.input(1)?, input.rank())?;
        let out = reduce_tensor::<R>(ctx.allocator(), input, &reduced, self.keep_dims)?;
        ctx.set_output(0, out)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn boxed<R: Reducer>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ReductionKernel::<R> {
        keep_dims: c.attr("keep_dims")?,
        _r: PhantomData,
    }))
}

/// The numeric reductions, by op.
#[derive(Clone, Copy)]
enum Op {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

fn numeric<T: ReduceElem>(op: Op, c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    match op {
        Op::Sum => boxed::<SumReducer<T>>(c),
        Op::Mean => boxed::<MeanReducer<T>>(c),
        Op::Max => boxed::<MaxReducer<T>>(c),
        Op::Min => boxed::<MinReducer<T>>(c),
        Op::Prod => boxed::<ProdReducer<T>>(c),
    }
}

fn make_numeric(op: Op, c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => numeric::<T>(op, c))
}

const TIDX: &[DType] = &[DType::I32, DType::I64];

/// Registers the reduction kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    let ops: [(&'static str, crate::KernelFactory); 5] = [
        ("Sum", |c| make_numeric(Op::Sum, c)),
        ("Mean", |c| make_numeric(Op::Mean, c)),
        ("Max", |c| make_numeric(Op::Max, c)),
        ("Min", |c| make_numeric(Op::Min, c)),
        ("Prod", |c| make_numeric(Op::Prod, c)),
    ];
    for (op, f) in ops {
        r.register(
            KernelDef::cpu(op, f)
                .type_constraint("T", NUMERIC_DTYPES)
                .type_constraint("Tidx", TIDX),
        );
    }
    r.register(KernelDef::cpu("All", boxed::<AllReducer>).type_constraint("Tidx", TIDX));
    r.register(KernelDef::cpu("Any", boxed::<AnyReducer>).type_constraint("Tidx", TIDX));
    r.register(
        KernelDef::cpu("ArgMax", arg::make_arg::<true>)
            .type_constraint("T", POD_DTYPES)
            .type_constraint("Tidx", &[DType::I16, DType::I32, DType::I64])
            .type_constraint(
                "output_type",
                &[DType::I16, DType::U16, DType::I32, DType::I64],
            ),
    );
    r.register(
        KernelDef::cpu("ArgMin", arg::make_arg::<false>)
            .type_constraint("T", POD_DTYPES)
            .type_constraint("Tidx", TIDX)
            .type_constraint("output_type", &[DType::I32, DType::I64]),
    );
}

#[cfg(test)]
mod tests;
