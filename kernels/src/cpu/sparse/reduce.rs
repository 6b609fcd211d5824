//! `SparseReduceSum` and `SparseReduceSumSparse`: sums of a sparse tensor over
//! `reduction_axes`, as TensorFlow's `SparseReduceOp`/`SparseReduceSparseOp`: the
//! entries sorted by the kept dimensions then the reduced ones, each run of
//! entries sharing the kept coordinates summed (repeated indices count each
//! time). The dense form writes each sum at its kept coordinates (zeros
//! elsewhere); the sparse form lists the sums in kept-coordinate order, reduced
//! dimensions 0 (with `keep_dims`) or dropped.
//!
//! Indices are not checked against the shape; as in TensorFlow, only a write
//! outside the dense output is an error (`Internal`, "Obtained a write index").

use graph::{DType, Result, Status, Tensor, TensorShape};

use super::{check_sparse_tensor, sorted_entries};
use crate::cpu::math::elem::Arith;
use crate::cpu::types::NUMERIC_DTYPES;
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// What the reduction keeps and drops (TensorFlow's `ReduceDetails`).
struct Reduction {
    /// The dimensions kept, ascending.
    group_dims: Vec<usize>,
    /// The kept dimensions, then the reduced ones: the entries' sort order.
    sort_dims: Vec<usize>,
    /// The output's dimensions.
    out_dims: Vec<usize>,
}

/// TensorFlow's `ValidateInputs` of the sparse reductions, then the shape.
fn validate(shape_t: &Tensor, axes_t: &Tensor) -> Result<Vec<usize>> {
    if shape_t.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "Expected input_shape to be a vector; got shape: {}",
            shape_t.shape()
        )));
    }
    if axes_t.rank() > 1 {
        return Err(Status::invalid_argument(format!(
            "Expected reduction_axes to be a scalar or a vector; got shape: {}",
            axes_t.shape()
        )));
    }
    let n = shape_t.num_elements() as i64;
    for &axis in axes_t.as_slice::<i32>()? {
        let a = i64::from(axis);
        if a < -n || a >= n {
            return Err(Status::invalid_argument(format!(
                "Invalid reduction dimension {axis}, for input with {n} dimensions."
            )));
        }
    }
    let mut dims = Vec::with_capacity(n as usize);
    for &d in shape_t.as_slice::<i64>()? {
        let d = usize::try_from(d).map_err(|_| {
            Status::invalid_argument(format!(
                "Expected shape dimensions to be non-negative, got {d}"
            ))
        })?;
        dims.push(d);
    }
    TensorShape::new(&dims).checked_num_elements()?;
    Ok(dims)
}

fn reduction(dims: &[usize], axes: &[i32], keep_dims: bool) -> Reduction {
    let n = dims.len() as i64;
    let mut reduced: Vec<usize> = axes
        .iter()
        .map(|&a| ((i64::from(a) + n) % n) as usize)
        .collect();
    reduced.sort_unstable();
    reduced.dedup();
    let group_dims: Vec<usize> = (0..dims.len()).filter(|d| !reduced.contains(d)).collect();
    let mut sort_dims = group_dims.clone();
    sort_dims.extend(&reduced);
    let out_dims = if keep_dims {
        (0..dims.len())
            .map(|d| if reduced.contains(&d) { 1 } else { dims[d] })
            .collect()
    } else {
        group_dims.iter().map(|&d| dims[d]).collect()
    };
    Reduction {
        group_dims,
        sort_dims,
        out_dims,
    }
}

/// One sum: the kept coordinates and the value.
type Group<T> = (Vec<i64>, T);

/// The sums of the runs of sorted entries that share their kept coordinates.
fn group_sums<T: Arith>(
    ctx: &OpKernelContext<'_>,
    keep_dims: bool,
) -> Result<(Reduction, Vec<usize>, Vec<Group<T>>)> {
    let (ix_t, vals_t) = (ctx.input(0)?, ctx.input(1)?);
    let (shape_t, axes_t) = (ctx.input(2)?, ctx.input(3)?);
    let dims = validate(shape_t, axes_t)?;
    check_sparse_tensor(ix_t, vals_t, dims.len())?;
    let r = reduction(&dims, axes_t.as_slice::<i32>()?, keep_dims);
    let (ix, vals) = (ix_t.as_slice::<i64>()?, vals_t.as_slice::<T>()?);
    let ndims = dims.len();
    let perm = sorted_entries(ix, vals.len(), ndims, &r.sort_dims);
    let coords =
        |e: usize| -> Vec<i64> { r.group_dims.iter().map(|&d| ix[e * ndims + d]).collect() };
    let mut groups: Vec<Group<T>> = Vec::new();
    for &e in &perm {
        let c = coords(e);
        match groups.last_mut() {
            Some((last, sum)) if *last == c => *sum = sum.tf_add(vals[e]),
            _ => groups.push((c, T::zero().tf_add(vals[e]))),
        }
    }
    Ok((r, dims, groups))
}

struct SparseReduceSum<T> {
    keep_dims: bool,
    _t: std::marker::PhantomData<fn(T)>,
}

impl<T: Arith> OpKernel for SparseReduceSum<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (r, dims, groups) = group_sums::<T>(ctx, self.keep_dims)?;
        // Strides of the kept dimensions in the dense output.
        let mut strides = vec![1i64; r.group_dims.len()];
        for d in (0..strides.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].wrapping_mul(dims[r.group_dims[d + 1]] as i64);
        }
        let shape = TensorShape::new(&r.out_dims);
        let size = shape.num_elements();
        let mut writes = Vec::with_capacity(groups.len());
        for (c, sum) in groups {
            let idx = c
                .iter()
                .zip(&strides)
                .fold(0i64, |acc, (&x, &s)| acc.wrapping_add(x.wrapping_mul(s)));
            let at = usize::try_from(idx)
                .ok()
                .filter(|&i| i < size)
                .ok_or_else(|| {
                    Status::internal(format!(
                        "Obtained a write index of {idx} which is outside of bounds of [0, {size})"
                    ))
                })?;
            writes.push((at, sum));
        }
        let out = ctx.allocator().build::<T>(shape, |o| {
            for (at, sum) in writes {
                o[at] = sum;
            }
        })?;
        ctx.set_output(0, out)
    }
}

struct SparseReduceSumSparse<T> {
    keep_dims: bool,
    _t: std::marker::PhantomData<fn(T)>,
}

impl<T: Arith> OpKernel for SparseReduceSumSparse<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (r, _, groups) = group_sums::<T>(ctx, self.keep_dims)?;
        let rank = r.out_dims.len();
        let n = groups.len();
        let indices = ctx
            .allocator()
            .build::<i64>(TensorShape::new(&[n, rank]), |o| {
                for (i, (c, _)) in groups.iter().enumerate() {
                    for (j, &x) in c.iter().enumerate() {
                        let col = if self.keep_dims { r.group_dims[j] } else { j };
                        o[i * rank + col] = x;
                    }
                }
            })?;
        let values = ctx.allocator().build::<T>(TensorShape::vector(n), |o| {
            for (o, (_, sum)) in o.iter_mut().zip(&groups) {
                *o = *sum;
            }
        })?;
        let shape: Vec<i64> = r.out_dims.iter().map(|&d| d as i64).collect();
        ctx.set_output(0, indices)?;
        ctx.set_output(1, values)?;
        ctx.set_output(2, Tensor::vector(&shape))
    }
}

fn make_dense(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (t, keep_dims): (DType, bool) = (c.attr("T")?, c.attr("keep_dims")?);
    dispatch_numeric!(t, T => Ok(Box::new(SparseReduceSum::<T> {
        keep_dims,
        _t: std::marker::PhantomData,
    }) as Box<dyn OpKernel>))
}

fn make_sparse(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let (t, keep_dims): (DType, bool) = (c.attr("T")?, c.attr("keep_dims")?);
    dispatch_numeric!(t, T => Ok(Box::new(SparseReduceSumSparse::<T> {
        keep_dims,
        _t: std::marker::PhantomData,
    }) as Box<dyn OpKernel>))
}

/// The kernels for every real number type.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("SparseReduceSum", make_dense).type_constraint("T", NUMERIC_DTYPES));
    r.register(
        KernelDef::cpu("SparseReduceSumSparse", make_sparse).type_constraint("T", NUMERIC_DTYPES),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, Tensor};

    fn inputs(axes: Tensor) -> Vec<Tensor> {
        vec![
            Tensor::new(&[4, 2], vec![1i64, 2, 0, 1, 1, 0, 0, 1]).unwrap(),
            Tensor::vector(&[1.0f32, 2.0, 3.0, 4.0]),
            Tensor::vector(&[2i64, 3]),
            axes,
        ]
    }

    #[test]
    fn dense_and_sparse_sums() {
        let keep = |k: bool| [("keep_dims", AttrValue::from(k))];
        let y = run_op(
            "SparseReduceSum",
            &keep(false),
            inputs(Tensor::vector(&[1i32])),
        )
        .unwrap();
        assert_eq!(y[0], Tensor::vector(&[6.0f32, 4.0]));
        let y = run_op("SparseReduceSum", &keep(true), inputs(Tensor::scalar(0i32))).unwrap();
        assert_eq!(y[0], Tensor::new(&[1, 3], vec![3.0f32, 6.0, 1.0]).unwrap());
        let y = run_op(
            "SparseReduceSum",
            &keep(false),
            inputs(Tensor::vector(&[0i32, -1])),
        )
        .unwrap();
        assert_eq!(y[0], Tensor::scalar(10.0f32));
        let y = run_op(
            "SparseReduceSumSparse",
            &keep(true),
            inputs(Tensor::vector(&[0i32])),
        )
        .unwrap();
        assert_eq!(
            y[0],
            Tensor::new(&[3, 2], vec![0i64, 0, 0, 1, 0, 2]).unwrap()
        );
        assert_eq!(y[1], Tensor::vector(&[3.0f32, 6.0, 1.0]));
        assert_eq!(y[2], Tensor::vector(&[1i64, 3]));
        let e = run_op(
            "SparseReduceSum",
            &keep(false),
            inputs(Tensor::vector(&[2i32])),
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            e.message(),
            "Invalid reduction dimension 2, for input with 2 dimensions."
        );
    }
}
