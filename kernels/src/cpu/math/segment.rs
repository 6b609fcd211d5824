//! CPU kernels of the dense segment reductions (TensorFlow's
//! `segment_reduction_ops_impl.h`) and `Bincount` (`bincount_op.cc`):
//!
//! - `UnsortedSegmentSum`/`Max`/`Min`/`Prod`: `output[id] ⊕= data[j]` for each
//!   leading index `j` of `segment_ids`, `num_segments` rows starting at the
//!   reduction's identity (0, the lowest value, the highest value, 1); negative ids
//!   are dropped, ids at or past `num_segments` are `InvalidArgument`.
//! - `SegmentSum`/`Mean`/`Max`/`Min`/`Prod`: runs of equal ids in a sorted id vector,
//!   `last id + 1` rows; rows no id names are zeros (ones for `SegmentProd`); unsorted or negative ids are
//!   `InvalidArgument` with TensorFlow's messages, checked run by run as it does.
//! - `Bincount`: weights (or ones) summed by value into `size` bins.
//!
//! Max and min keep the accumulator unless the element compares greater (less), as
//! Eigen's reducers do, so a NaN is skipped rather than propagated. Integers wrap.

use std::marker::PhantomData;

use graph::{DType, Result, Status, TensorShape};

use super::elem::Arith;
use crate::cpu::array::elems::{
    coords_string, dispatch_index, int_scalar, make_shape, IndexElem, INDEX_DTYPES,
};
use crate::cpu::types::NUMERIC_DTYPES;
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// How a segment's elements combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// The sum (0 for an empty segment).
    Sum,
    /// The sum divided by the number of elements (truncating for integers).
    Mean,
    /// The largest element (the lowest value for an empty segment).
    Max,
    /// The smallest element (the highest value for an empty segment).
    Min,
    /// The product (1 for an empty segment).
    Prod,
}

impl Reduction {
    fn from_op(op: &str) -> Reduction {
        if op.ends_with("Mean") {
            Reduction::Mean
        } else if op.ends_with("Max") {
            Reduction::Max
        } else if op.ends_with("Min") {
            Reduction::Min
        } else if op.ends_with("Prod") {
            Reduction::Prod
        } else {
            Reduction::Sum
        }
    }

    /// The accumulator an empty reduction starts from.
    pub fn identity<T: Arith>(self) -> T {
        match self {
            Reduction::Sum | Reduction::Mean => T::zero(),
            Reduction::Prod => T::one(),
            Reduction::Max => T::min_value(),
            Reduction::Min => T::max_value(),
        }
    }

    /// Folds `x` into `acc`.
    #[inline(always)]
    pub fn step<T: Arith>(self, acc: T, x: T) -> T {
        match self {
            Reduction::Sum | Reduction::Mean => acc.tf_add(x),
            Reduction::Prod => acc.tf_mul(x),
            Reduction::Max => {
                if acc < x {
                    x
                } else {
                    acc
                }
            }
            Reduction::Min => {
                if x < acc {
                    x
                } else {
                    acc
                }
            }
        }
    }

    /// Folds the row `src` into the row `acc`.
    #[inline]
    pub fn step_row<T: Arith>(self, acc: &mut [T], src: &[T]) {
        for (a, &b) in acc.iter_mut().zip(src) {
            *a = self.step(*a, b);
        }
    }
}

/// `UnsortedSegment*` for element type `T` and id type `I`.
struct UnsortedSegmentKernel<T, I> {
    reduction: Reduction,
    _t: PhantomData<fn(T, I)>,
}

impl<T: Arith, I: IndexElem> OpKernel for UnsortedSegmentKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let data = ctx.input(0)?;
        let ids = ctx.input(1)?;
        let n_t = ctx.input(2)?;
        if n_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "num_segments should be a scalar, not shape {}",
                n_t.shape()
            )));
        }
        let (dd, di) = (data.dims(), ids.dims());
        if di.len() > dd.len() || dd[..di.len()] != *di {
            return Err(Status::invalid_argument(format!(
                "data.shape = {} does not start with segment_ids.shape = {}",
                data.shape(),
                ids.shape()
            )));
        }
        let n = int_scalar(n_t)?;
        let n = usize::try_from(n).map_err(|_| {
            Status::invalid_argument(format!("Input num_segments == {n} must not be negative."))
        })?;
        let idv = ids.as_slice::<I>()?;
        if let Some(j) = idv.iter().position(|v| v.to_i64() >= n as i64) {
            return Err(Status::invalid_argument(format!(
                "segment_ids{} = {} is out of range [0, {n})",
                coords_string(di, j),
                idv[j].to_i64()
            )));
        }
        let mut out_dims = vec![n];
        out_dims.extend_from_slice(&dd[di.len()..]);
        let inner: usize = dd[di.len()..].iter().product();
        let src = data.as_slice::<T>()?;
        let red = self.reduction;
        let out = ctx
            .allocator()
            .build::<T>(TensorShape::from(out_dims), |o| {
                o.fill(red.identity());
                for (j, id) in idv.iter().enumerate() {
                    let Ok(row) = usize::try_from(id.to_i64()) else {
                        continue;
                    };
                    red.step_row(
                        &mut o[row * inner..(row + 1) * inner],
                        &src[j * inner..(j + 1) * inner],
                    );
                }
            });
        ctx.set_output(0, out?)
    }
}

/// The runs of equal ids in a sorted id vector, as `(id, start, end)`, checked as
/// TensorFlow's sorted segment kernels check them: each run against the next
/// ("not increasing"), then against `rows`, then by `check(start, end)`.
pub fn sorted_runs(
    ids: &[i64],
    rows: usize,
    mut check: impl FnMut(usize, usize) -> Result<()>,
) -> Result<Vec<(usize, usize, usize)>> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < ids.len() {
        let id = ids[start];
        let mut end = start + 1;
        while end < ids.len() && ids[end] == id {
            end += 1;
        }
        if end < ids.len() && ids[end] < id {
            return Err(Status::invalid_argument("segment ids are not increasing"));
        }
        match usize::try_from(id) {
            Ok(r) if r < rows => runs.push((r, start, end)),
            _ => {
                return Err(Status::invalid_argument(format!(
                    "Segment id {id} out of range [0, {rows}), possibly because 'segment_ids' \
                     input is not sorted."
                )))
            }
        }
        check(start, end)?;
        start = end;
    }
    Ok(runs)
}

/// Divides the sum `acc` of `count` elements as `Mean` does.
pub fn mean_of<T: Arith>(acc: &mut [T], count: usize) {
    let n = T::from_usize(count).unwrap_or_else(T::one);
    for a in acc {
        *a = a.tf_div(n);
    }
}

/// `Segment*` for element type `T` and id type `I`.
struct SegmentKernel<T, I> {
    reduction: Reduction,
    _t: PhantomData<fn(T, I)>,
}

impl<T: Arith, I: IndexElem> OpKernel for SegmentKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let data = ctx.input(0)?;
        let ids = ctx.input(1)?;
        if data.rank() < 1 {
            return Err(Status::invalid_argument("input must be at least rank 1"));
        }
        if ids.rank() != 1 {
            return Err(Status::invalid_argument("segment_ids should be a vector."));
        }
        if ids.num_elements() != data.dims()[0] {
            return Err(Status::invalid_argument(
                "segment_ids should be the same size as dimension 0 of input.",
            ));
        }
        let idv: Vec<i64> = ids.as_slice::<I>()?.iter().map(|v| v.to_i64()).collect();
        let rows = idv.last().map_or(0, |&l| l.saturating_add(1));
        let rows = usize::try_from(rows)
            .map_err(|_| Status::invalid_argument("segment ids must be >= 0"))?;
        let runs = sorted_runs(&idv, rows, |_, _| Ok(()))?;
        let mut out_dims = data.dims().to_vec();
        out_dims[0] = rows;
        let shape = make_shape(&out_dims.iter().map(|&d| d as i64).collect::<Vec<_>>())?;
        let inner: usize = data.dims()[1..].iter().product();
        let src = data.as_slice::<T>()?;
        let red = self.reduction;
        let out = ctx.allocator().build::<T>(shape, |o| {
            // Rows no id names: 1 for a product, else 0.
            if red == Reduction::Prod {
                o.fill(T::one());
            }
            for &(row, start, end) in &runs {
                let acc = &mut o[row * inner..(row + 1) * inner];
                acc.fill(red.identity());
                for j in start..end {
                    red.step_row(acc, &src[j * inner..(j + 1) * inner]);
                }
                if red == Reduction::Mean {
                    mean_of(acc, end - start);
                }
            }
        });
        ctx.set_output(0, out?)
    }
}

/// `Bincount` for weight type `T`.
struct BincountKernel<T>(PhantomData<fn(T)>);

impl<T: Arith> OpKernel for BincountKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let arr = ctx.input(0)?;
        let size_t = ctx.input(1)?;
        let weights = ctx.input(2)?;
        if size_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "Shape must be rank 0 but is rank {}",
                size_t.rank()
            )));
        }
        let size = int_scalar(size_t)?;
        let size = usize::try_from(size)
            .map_err(|_| Status::invalid_argument(format!("size ({size}) must be non-negative")))?;
        let values = arr.as_slice::<i32>()?;
        let w = weights.as_slice::<T>()?;
        if !w.is_empty() && w.len() != values.len() {
            return Err(Status::invalid_argument(
                "Input indices and weights must have the same size.",
            ));
        }
        if values.iter().any(|&v| v < 0) {
            return Err(Status::invalid_argument("Input arr must be non-negative!"));
        }
        let out = ctx.allocator().build::<T>([size], |o| {
            for (i, &v) in values.iter().enumerate() {
                if let Some(bin) = o.get_mut(v as usize) {
                    *bin = bin.tf_add(w.get(i).copied().unwrap_or_else(T::one));
                }
            }
        });
        ctx.set_output(0, out?)
    }
}

fn make_segment(c: &OpKernelConstruction<'_>, sorted: bool) -> Result<Box<dyn OpKernel>> {
    let reduction = Reduction::from_op(&c.node.op);
    let ti: DType = c.attr("Tindices")?;
    dispatch_numeric!(c.attr::<DType>("T")?, T => {
        dispatch_index!(ti, I => Ok(if sorted {
            Box::new(SegmentKernel::<T, I> { reduction, _t: PhantomData }) as Box<dyn OpKernel>
        } else {
            Box::new(UnsortedSegmentKernel::<T, I> { reduction, _t: PhantomData }) as Box<dyn OpKernel>
        }))
    })
}

/// Registers the dense segment reductions and Bincount.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for op in graph::ops::UNSORTED_SEGMENT_OPS {
        r.register(
            KernelDef::cpu(op, |c| make_segment(c, false))
                .type_constraint("T", NUMERIC_DTYPES)
                .type_constraint("Tindices", &[DType::I16, DType::I32, DType::I64]),
        );
    }
    for op in graph::ops::SEGMENT_OPS {
        r.register(
            KernelDef::cpu(op, |c| make_segment(c, true))
                .type_constraint("T", NUMERIC_DTYPES)
                .type_constraint("Tindices", INDEX_DTYPES),
        );
    }
    r.register(
        KernelDef::cpu("Bincount", |c| {
            dispatch_numeric!(c.attr::<DType>("T")?, T => Ok(Box::new(BincountKernel::<T>(PhantomData)) as Box<dyn OpKernel>))
        })
        .type_constraint("T", NUMERIC_DTYPES),
    );
}

#[cfg(test)]
mod tests {
    use graph::{Code, Tensor};

    use crate::testutil::run_op;

    #[test]
    fn unsorted_segments_drop_negative_ids() {
        let data = Tensor::new(&[4, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        let ids = Tensor::vector(&[2i64, 0, 2, -1]);
        let run = |op: &str| {
            run_op(
                op,
                &[],
                vec![data.clone(), ids.clone(), Tensor::scalar(3i32)],
            )
            .unwrap()
            .remove(0)
        };
        assert_eq!(
            run("UnsortedSegmentSum").as_slice::<f32>().unwrap(),
            &[3.0, 4.0, 0.0, 0.0, 6.0, 8.0]
        );
        assert_eq!(
            run("UnsortedSegmentMax").as_slice::<f32>().unwrap(),
            &[3.0, 4.0, f32::MIN, f32::MIN, 5.0, 6.0]
        );
        assert_eq!(
            run("UnsortedSegmentProd").as_slice::<f32>().unwrap(),
            &[3.0, 4.0, 1.0, 1.0, 5.0, 12.0]
        );
        let e = run_op(
            "UnsortedSegmentSum",
            &[],
            vec![
                Tensor::new(&[2, 2], vec![1.0f32; 4]).unwrap(),
                Tensor::new(&[2, 2], vec![0i32, 1, 3, 0]).unwrap(),
                Tensor::scalar(3i32),
            ],
        )
        .unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (
                Code::InvalidArgument,
                "segment_ids[1,0] = 3 is out of range [0, 3)"
            )
        );
    }

    #[test]
    fn sorted_segments() {
        let data = Tensor::vector(&[1i32, 2, 3, 4, 5]);
        let ids = Tensor::vector(&[0i32, 0, 2, 2, 2]);
        let out = run_op("SegmentMean", &[], vec![data.clone(), ids]).unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[1, 0, 4]);
        let e = run_op(
            "SegmentSum",
            &[],
            vec![data, Tensor::vector(&[0i32, 1, 0, 2, 2])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "segment ids are not increasing");
    }
}
