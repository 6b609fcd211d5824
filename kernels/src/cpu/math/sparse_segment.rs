//! CPU kernels of the sparse segment reductions (TensorFlow's
//! `segment_reduction_ops_impl.h`), the embedding-bag ops:
//!
//! - `SparseSegmentSum`/`Mean`/`SqrtN` (and `…WithNumSegments`): segment
//!   `segment_ids[i]` (sorted) reduces the rows `data[indices[i]]`; a segment
//!   without rows is zeros; `Mean` divides by the number of rows, `SqrtN` by its
//!   square root. Without `num_segments` there are `last id + 1` segments.
//! - `SparseSegmentSumGrad`/`MeanGrad`/`SqrtNGrad`: `output[indices[i]] +=
//!   grad[segment_ids[i]] · w`, `w` the reduction's weight of that segment (ids
//!   need not be sorted), `output_dim0` rows.
//!
//! Errors are TensorFlow's, checked in its order (segment by segment for the
//! forward ops).

use std::marker::PhantomData;

use graph::{DType, Result, Status};

use super::elem::Arith;
use super::segment::sorted_runs;
use crate::cpu::array::elems::{dispatch_index, int_scalar, make_shape, IndexElem, INDEX_DTYPES};
use crate::cpu::types::{FLOAT_DTYPES, NUMERIC_DTYPES};
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// How a segment's rows combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Norm {
    Sum,
    Mean,
    SqrtN,
}

impl Norm {
    fn from_op(op: &str) -> Norm {
        if op.contains("Mean") {
            Norm::Mean
        } else if op.contains("SqrtN") {
            Norm::SqrtN
        } else {
            Norm::Sum
        }
    }

    /// The weight of each row of a segment of `count` rows.
    fn weight<T: Arith>(self, count: usize) -> Option<T> {
        match self {
            Norm::Sum => None,
            Norm::Mean => T::from_usize(count),
            Norm::SqrtN => T::from_f64((count as f64).sqrt()),
        }
    }
}

/// The values of an index vector as `i64`.
fn index_values<I: IndexElem>(t: &graph::Tensor) -> Result<Vec<i64>> {
    Ok(t.as_slice::<I>()?.iter().map(|v| v.to_i64()).collect())
}

fn check_vectors(indices: &graph::Tensor, ids: &graph::Tensor) -> Result<()> {
    if indices.rank() != 1 {
        return Err(Status::invalid_argument("indices should be a vector."));
    }
    if ids.rank() != 1 {
        return Err(Status::invalid_argument("segment_ids should be a vector."));
    }
    Ok(())
}

fn check_same_size(indices: &graph::Tensor, ids: &graph::Tensor) -> Result<()> {
    if indices.num_elements() != ids.num_elements() {
        return Err(Status::invalid_argument(
            "segment_ids and indices should have same size.",
        ));
    }
    Ok(())
}

/// `SparseSegment{Sum,Mean,SqrtN}[WithNumSegments]` for data `T`, indices `I` and
/// segment ids `S`.
struct SparseSegmentKernel<T, I, S> {
    norm: Norm,
    with_num_segments: bool,
    _t: PhantomData<fn(T, I, S)>,
}

impl<T: Arith, I: IndexElem, S: IndexElem> OpKernel for SparseSegmentKernel<T, I, S> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let data = ctx.input(0)?;
        let indices = ctx.input(1)?;
        let ids = ctx.input(2)?;
        let num_segments = if self.with_num_segments {
            let n = ctx.input(3)?;
            if n.rank() != 0 {
                return Err(Status::invalid_argument(format!(
                    "num_segments should be a scalar, not shape {}",
                    n.shape()
                )));
            }
            Some(int_scalar(n)?)
        } else {
            None
        };
        check_vectors(indices, ids)?;
        check_same_size(indices, ids)?;
        if data.rank() < 1 {
            return Err(Status::invalid_argument("Shape must be at least rank 1"));
        }
        let idx = index_values::<I>(indices)?;
        let seg = index_values::<S>(ids)?;
        let last = seg.last().copied();
        let rows = num_segments.unwrap_or_else(|| last.map_or(0, |l| l.saturating_add(1)));
        let rows = usize::try_from(rows)
            .map_err(|_| Status::invalid_argument("segment ids must be >= 0"))?;
        if let (Some(_), Some(l)) = (num_segments, last) {
            if l >= rows as i64 {
                return Err(Status::invalid_argument(
                    "segment ids must be < num_segments",
                ));
            }
        }
        let n_rows = data.dims()[0];
        let runs = sorted_runs(&seg, rows, |start, end| {
            match (start..end).find(|&k| !matches!(usize::try_from(idx[k]), Ok(r) if r < n_rows)) {
                Some(k) => Err(Status::invalid_argument(format!(
                    "Bad: indices[{k}] == {} out of range [0, {n_rows})",
                    idx[k]
                ))),
                None => Ok(()),
            }
        })?;
        let mut out_dims: Vec<i64> = data.dims().iter().map(|&d| d as i64).collect();
        out_dims[0] = rows as i64;
        let shape = make_shape(&out_dims)?;
        let inner: usize = data.dims()[1..].iter().product();
        let src = data.as_slice::<T>()?;
        let norm = self.norm;
        let out = ctx.allocator().build::<T>(shape, |o| {
            for &(row, start, end) in &runs {
                let acc = &mut o[row * inner..(row + 1) * inner];
                for &i in &idx[start..end] {
                    let i = i as usize;
                    for (a, &b) in acc.iter_mut().zip(&src[i * inner..(i + 1) * inner]) {
                        *a = a.tf_add(b);
                    }
                }
                if let Some(w) = norm.weight::<T>(end - start) {
                    for a in acc.iter_mut() {
                        *a = a.tf_div(w);
                    }
                }
            }
        });
        ctx.set_output(0, out?)
    }
}

/// `SparseSegment{Sum,Mean,SqrtN}Grad` for gradient `T`, indices `I` and segment
/// ids `S`.
struct SparseSegmentGradKernel<T, I, S> {
    norm: Norm,
    _t: PhantomData<fn(T, I, S)>,
}

impl<T: Arith, I: IndexElem, S: IndexElem> OpKernel for SparseSegmentGradKernel<T, I, S> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let grad = ctx.input(0)?;
        let indices = ctx.input(1)?;
        let ids = ctx.input(2)?;
        let dim0 = ctx.input(3)?;
        check_vectors(indices, ids)?;
        if dim0.rank() != 0 {
            return Err(Status::invalid_argument("output_dim0 should be a scalar."));
        }
        check_same_size(indices, ids)?;
        let m = int_scalar(dim0)?;
        let m = usize::try_from(m).map_err(|_| {
            Status::invalid_argument(format!("Expected a non-negative size, got {m}"))
        })?;
        let Some(&num_segments) = grad.dims().first() else {
            return Err(Status::invalid_argument("Index must be less than 0, got 0"));
        };
        let idx = index_values::<I>(indices)?;
        let seg = index_values::<S>(ids)?;
        if seg.iter().any(|&s| s >= num_segments as i64) {
            return Err(Status::invalid_argument("Invalid number of segments"));
        }
        let mut counts = vec![0usize; num_segments];
        for &s in &seg {
            let slot = usize::try_from(s)
                .ok()
                .and_then(|s| counts.get_mut(s))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "Segment id {s} out of range [0, {num_segments})."
                    ))
                })?;
            *slot += 1;
        }
        if let Some(&i) = idx
            .iter()
            .find(|&&i| !matches!(usize::try_from(i), Ok(r) if r < m))
        {
            return Err(Status::invalid_argument(format!(
                "Index {i} out of range [0, {m})."
            )));
        }
        let mut out_dims: Vec<i64> = grad.dims().iter().map(|&d| d as i64).collect();
        out_dims[0] = m as i64;
        let shape = make_shape(&out_dims)?;
        let inner: usize = grad.dims()[1..].iter().product();
        let src = grad.as_slice::<T>()?;
        let norm = self.norm;
        let out = ctx.allocator().build::<T>(shape, |o| {
            for (&i, &s) in idx.iter().zip(&seg) {
                let (i, s) = (i as usize, s as usize);
                let w = norm.weight::<T>(counts[s]);
                let dst = &mut o[i * inner..(i + 1) * inner];
                for (a, &g) in dst.iter_mut().zip(&src[s * inner..(s + 1) * inner]) {
                    *a = a.tf_add(w.map_or(g, |w| g.tf_div(w)));
                }
            }
        });
        ctx.set_output(0, out?)
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let op = c.node.op.as_str();
    let norm = Norm::from_op(op);
    let grad = op.ends_with("Grad");
    let with_num_segments = op.ends_with("WithNumSegments");
    let (ti, ts): (DType, DType) = (c.attr("Tidx")?, c.attr("Tsegmentids")?);
    dispatch_numeric!(c.attr::<DType>("T")?, T => {
        dispatch_index!(ti, I => {
            dispatch_index!(ts, S => Ok(if grad {
                Box::new(SparseSegmentGradKernel::<T, I, S> { norm, _t: PhantomData }) as Box<dyn OpKernel>
            } else {
                Box::new(SparseSegmentKernel::<T, I, S> { norm, with_num_segments, _t: PhantomData }) as Box<dyn OpKernel>
            }))
        })
    })
}

/// Registers the sparse segment reductions and their gradients.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    let ops: [(&'static str, &[DType]); 9] = [
        ("SparseSegmentSum", NUMERIC_DTYPES),
        ("SparseSegmentSumWithNumSegments", NUMERIC_DTYPES),
        ("SparseSegmentMean", FLOAT_DTYPES),
        ("SparseSegmentMeanWithNumSegments", FLOAT_DTYPES),
        ("SparseSegmentSqrtN", FLOAT_DTYPES),
        ("SparseSegmentSqrtNWithNumSegments", FLOAT_DTYPES),
        ("SparseSegmentSumGrad", FLOAT_DTYPES),
        ("SparseSegmentMeanGrad", FLOAT_DTYPES),
        ("SparseSegmentSqrtNGrad", FLOAT_DTYPES),
    ];
    for (op, types) in ops {
        r.register(
            KernelDef::cpu(op, make)
                .type_constraint("T", types)
                .type_constraint("Tidx", INDEX_DTYPES)
                .type_constraint("Tsegmentids", INDEX_DTYPES),
        );
    }
}

#[cfg(test)]
mod tests {
    use graph::Tensor;

    use crate::testutil::run_op;

    #[test]
    fn embedding_bags_and_their_gradients() {
        let data = Tensor::new(&[3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let idx = Tensor::vector(&[2i32, 0, 2]);
        let seg = Tensor::vector(&[0i32, 0, 2]);
        let out = run_op(
            "SparseSegmentMean",
            &[],
            vec![data, idx.clone(), seg.clone()],
        )
        .unwrap();
        assert_eq!(
            out[0].as_slice::<f32>().unwrap(),
            &[3.0, 4.0, 0.0, 0.0, 5.0, 6.0]
        );
        let g = Tensor::new(&[3, 2], vec![1.0f32, 1.0, 0.0, 0.0, 2.0, 2.0]).unwrap();
        let out = run_op(
            "SparseSegmentMeanGrad",
            &[],
            vec![g, idx, seg, Tensor::scalar(4i32)],
        )
        .unwrap();
        assert_eq!(
            out[0].as_slice::<f32>().unwrap(),
            &[0.5, 0.5, 0.0, 0.0, 2.5, 2.5, 0.0, 0.0]
        );
    }
}
