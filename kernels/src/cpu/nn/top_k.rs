//! `TopKV2` and `InTopKV2` (TensorFlow's `topk_op.cc` and `in_topk_op.cc`).
//!
//! `TopKV2` orders each last-axis row by value, larger first and equal values by
//! lower index, and keeps the first `k`. With no NaN in a row this order is total,
//! so any selection gives TensorFlow's answer; a row with a NaN (which compares
//! neither greater nor less) is ordered by the insertion sort `std::sort` runs on
//! short rows, which is where TensorFlow's places it. `sorted = false` returns the
//! same sorted order (TensorFlow's is unspecified).
//!
//! `InTopKV2` is true when fewer than `k` predictions of the row are greater than
//! the target's; false when the target is out of range or any prediction of the
//! row is not finite.

use std::cmp::Ordering;
use std::marker::PhantomData;

use graph::{DType, Result, Status, TensorType};

use crate::cpu::array::elems::{dispatch_index, int_scalar, IndexElem};
use crate::cpu::types::{Numeric, NUMERIC_DTYPES};
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The positions of `row`'s entries in TensorFlow's top-k order, the first `k`.
pub fn top_k_order<T: Numeric>(row: &[T], k: usize) -> Vec<usize> {
    let before = |a: usize, b: usize| row[a] > row[b] || (row[a] == row[b] && a < b);
    let mut idx: Vec<usize> = (0..row.len()).collect();
    if row.iter().any(|v| v.partial_cmp(v).is_none()) {
        // std::__insertion_sort with the same comparator.
        for i in 1..idx.len() {
            let v = idx[i];
            if before(v, idx[0]) {
                idx.copy_within(0..i, 1);
                idx[0] = v;
            } else {
                let mut j = i;
                while before(v, idx[j - 1]) {
                    idx[j] = idx[j - 1];
                    j -= 1;
                }
                idx[j] = v;
            }
        }
        idx.truncate(k);
        return idx;
    }
    let order = |a: &usize, b: &usize| {
        row[*b]
            .partial_cmp(&row[*a])
            .unwrap_or(Ordering::Equal)
            .then(a.cmp(b))
    };
    if k < idx.len() && k > 0 {
        idx.select_nth_unstable_by(k - 1, order);
        idx.truncate(k);
    } else {
        idx.truncate(k);
    }
    idx.sort_unstable_by(order);
    idx
}

/// `TopKV2` for values `T`, `k` of type `K` and indices of type `O`.
struct TopKKernel<T, K, O>(PhantomData<fn(T, K, O)>);

impl<T: Numeric, K: IndexElem, O: TensorType + num_traits::FromPrimitive> OpKernel
    for TopKKernel<T, K, O>
{
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let k_t = ctx.input(1)?;
        if k_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "k must be scalar, got shape {}",
                k_t.shape()
            )));
        }
        let k = k_t.as_slice::<K>()?[0].to_i64();
        let k = usize::try_from(k)
            .map_err(|_| Status::invalid_argument(format!("Need k >= 0, got {k}")))?;
        let x = ctx.input(0)?;
        if x.rank() < 1 {
            return Err(Status::invalid_argument(format!(
                "input must be >= 1-D, got shape {}",
                x.shape()
            )));
        }
        let cols = x.dims()[x.rank() - 1];
        if cols < k {
            return Err(Status::invalid_argument(format!(
                "input must have at least k columns. Had {cols}, needed {k}"
            )));
        }
        if O::from_usize(cols).is_none() {
            return Err(Status::invalid_argument(format!(
                "num_cols ({cols}) does not fit the index type {}",
                O::DTYPE
            )));
        }
        let mut dims = x.dims().to_vec();
        dims[x.rank() - 1] = k;
        let src = x.as_slice::<T>()?;
        let rows = src.len().checked_div(cols).unwrap_or(0);
        let mut values = Vec::with_capacity(rows * k);
        let mut indices = Vec::with_capacity(rows * k);
        for r in 0..rows {
            let row = &src[r * cols..(r + 1) * cols];
            for i in top_k_order(row, k) {
                values.push(row[i]);
                indices.push(O::from_usize(i).unwrap_or_else(O::default));
            }
        }
        ctx.set_output(0, graph::Tensor::new(&dims, values)?)?;
        ctx.set_output(1, graph::Tensor::new(&dims, indices)?)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// `InTopKV2` for targets and `k` of type `I`.
struct InTopKKernel<I>(PhantomData<fn(I)>);

impl<I: IndexElem> OpKernel for InTopKKernel<I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let p = ctx.input(0)?;
        let t = ctx.input(1)?;
        let k_t = ctx.input(2)?;
        if k_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "k must be 0-D, got shape {}",
                k_t.shape()
            )));
        }
        if p.rank() != 2 {
            return Err(Status::invalid_argument(
                "predictions must be 2-dimensional",
            ));
        }
        if t.rank() != 1 {
            return Err(Status::invalid_argument("targets must be 1-dimensional"));
        }
        let (batch, classes) = (p.dims()[0], p.dims()[1]);
        if batch != t.dims()[0] {
            return Err(Status::invalid_argument(format!(
                "First dimension of predictions {batch} must match length of targets {}",
                t.dims()[0]
            )));
        }
        let k = int_scalar(k_t)?;
        let preds = p.as_slice::<f32>()?;
        let targets = t.as_slice::<I>()?;
        let out: Vec<bool> = (0..batch)
            .map(|b| {
                let row = &preds[b * classes..(b + 1) * classes];
                let Some(target) = usize::try_from(targets[b].to_i64())
                    .ok()
                    .filter(|&c| c < classes)
                else {
                    return false;
                };
                let v = row[target];
                if !v.is_finite() || row.iter().any(|x| !x.is_finite()) {
                    return false;
                }
                (row.iter().filter(|&&x| x > v).count() as i64) < k
            })
            .collect();
        ctx.set_output(0, graph::Tensor::new(&[batch], out)?)
    }
}

fn make_top_k(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (tk, out): (DType, DType) = (c.attr("Tk")?, c.attr("index_type")?);
    dispatch_numeric!(c.attr::<DType>("T")?, T => {
        dispatch_index!(tk, K => match out {
            DType::I16 => Ok(Box::new(TopKKernel::<T, K, i16>(PhantomData)) as Box<dyn OpKernel>),
            DType::I64 => Ok(Box::new(TopKKernel::<T, K, i64>(PhantomData)) as Box<dyn OpKernel>),
            _ => Ok(Box::new(TopKKernel::<T, K, i32>(PhantomData)) as Box<dyn OpKernel>),
        })
    })
}

fn make_in_top_k(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    dispatch_index!(c.attr::<DType>("T")?, I => Ok(Box::new(InTopKKernel::<I>(PhantomData)) as Box<dyn OpKernel>))
}

/// Registers TopKV2 and InTopKV2.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    let ints = &[DType::I16, DType::I32, DType::I64];
    r.register(
        KernelDef::cpu("TopKV2", make_top_k)
            .type_constraint("T", NUMERIC_DTYPES)
            .type_constraint("Tk", ints)
            .type_constraint("index_type", ints),
    );
    r.register(
        KernelDef::cpu("InTopKV2", make_in_top_k).type_constraint("T", &[DType::I32, DType::I64]),
    );
}

#[cfg(test)]
mod tests {
    use super::top_k_order;

    #[test]
    fn ties_go_to_the_lower_index_and_nan_where_tensorflow_puts_it() {
        assert_eq!(top_k_order(&[1.0f32, 3.0, 3.0, 2.0], 3), [1, 2, 3]);
        assert_eq!(top_k_order(&[5i32, 5, 5], 2), [0, 1]);
        let nan = [1.0f32, f32::NAN, 3.0, f32::NEG_INFINITY, f32::INFINITY];
        assert_eq!(top_k_order(&nan, 5), [4, 2, 0, 1, 3]);
        assert_eq!(top_k_order(&[2.0f64, 1.0], 0), Vec::<usize>::new());
    }
}
