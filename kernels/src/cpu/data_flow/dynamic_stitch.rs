//! `DynamicStitch` and `ParallelDynamicStitch`: interleave the slices of `N` data
//! tensors into one, `merged[indices[m][i, ...]] = data[m][i, ..., :]`.
//!
//! The output's first dimension is the largest index plus one and its other
//! dimensions are `data[0].shape[indices[0].rank:]`. Every `data[m]` must start
//! with `indices[m]`'s shape and end with the same slice shape. When an index
//! repeats, the later input (then the later position) wins, as in TensorFlow's CPU
//! kernel; `ParallelDynamicStitch` runs the same sequential copy, which is one of
//! the orders it allows. Rows no index names are zero (TensorFlow leaves them
//! uninitialised).

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};

use crate::cpu::array::elems::{dispatch_elem, Elem, POD_STRING_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The stitch of element storage class `E`.
struct DynamicStitchKernel<E> {
    dtype: DType,
    _e: PhantomData<fn(E)>,
}

/// Checks the inputs; returns the merged shape and the slice size.
fn merged_shape(indices: &[&Tensor], data: &[&Tensor]) -> Result<(TensorShape, usize)> {
    let mut max_index = -1i64;
    for t in indices {
        if let Some(m) = t.as_slice::<i32>()?.iter().max() {
            max_index = max_index.max(i64::from(*m));
        }
    }
    let (d0, i0) = (data[0].dims(), indices[0].dims());
    for (m, (ind, dat)) in indices.iter().zip(data).enumerate() {
        if !dat.dims().starts_with(ind.dims()) {
            return Err(Status::invalid_argument(format!(
                "data[{m}].shape = {} does not start with indices[{m}].shape = {}",
                dat.shape(),
                ind.shape()
            )));
        }
        if m > 0 && d0.get(i0.len()..) != dat.dims().get(ind.rank()..) {
            return Err(Status::invalid_argument(format!(
                "Need data[0].shape[{}:] = data[{m}].shape[{}:], got data[0].shape = {}, \
                 data[{m}].shape = {}, indices[0].shape = {}, indices[{m}].shape = {}",
                i0.len(),
                ind.rank(),
                data[0].shape(),
                dat.shape(),
                indices[0].shape(),
                ind.shape()
            )));
        }
    }
    let slice_dims = &d0[i0.len()..];
    let mut dims = vec![(max_index + 1) as usize];
    dims.extend_from_slice(slice_dims);
    Ok((TensorShape::new(&dims), slice_dims.iter().product()))
}

impl<E: Elem> OpKernel for DynamicStitchKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs() / 2;
        if n == 0 || !ctx.num_inputs().is_multiple_of(2) {
            return Err(Status::invalid_argument(
                "DynamicStitchOp: Must have an even, nonzero number of arguments",
            ));
        }
        let mut inputs = Vec::with_capacity(2 * n);
        for i in 0..2 * n {
            inputs.push(ctx.input(i)?);
        }
        let (indices, data) = inputs.split_at(n);
        let (shape, slice) = merged_shape(indices, data)?;
        let rows = shape.dim(0);
        let out = E::build(ctx.allocator(), self.dtype, shape, |out| {
            for (ind, dat) in indices.iter().zip(data) {
                let src = E::view(dat)?;
                for (i, &k) in ind.as_slice::<i32>()?.iter().enumerate() {
                    let row = usize::try_from(k)
                        .ok()
                        .filter(|&r| r < rows)
                        .ok_or_else(|| {
                            Status::invalid_argument(format!("indices[{i}] is out of range"))
                        })?;
                    out[row * slice..(row + 1) * slice]
                        .clone_from_slice(&src[i * slice..(i + 1) * slice]);
                }
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make_stitch(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    dispatch_elem!(dtype, E => Ok(Box::new(DynamicStitchKernel::<E> { dtype, _e: PhantomData }) as Box<dyn OpKernel>))
}

/// Registers the stitch kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for op in ["DynamicStitch", "ParallelDynamicStitch"] {
        r.register(KernelDef::cpu(op, make_stitch).type_constraint("T", POD_STRING_DTYPES));
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op_lists;
    use graph::{Code, Result, Tensor};

    fn stitch(indices: Vec<Tensor>, data: Vec<Tensor>) -> Result<Tensor> {
        run_op_lists(
            "DynamicStitch",
            &[],
            vec![indices, data],
            Some(&[true, true]),
        )
        .map(|mut v| v.remove(0))
    }

    #[test]
    fn interleaves_slices_by_index() {
        // TensorFlow's documented example: the later of two equal indices wins.
        let indices = vec![
            Tensor::scalar(6i32),
            Tensor::vector(&[4i32, 1]),
            Tensor::new(&[2, 2], vec![5i32, 2, 0, 3]).unwrap(),
        ];
        let data = vec![
            Tensor::vector(&[61.0f32, 62.0]),
            Tensor::new(&[2, 2], vec![41.0f32, 42.0, 11.0, 12.0]).unwrap(),
            Tensor::new(
                &[2, 2, 2],
                vec![51.0f32, 52.0, 21.0, 22.0, 1.0, 2.0, 31.0, 32.0],
            )
            .unwrap(),
        ];
        let out = stitch(indices, data).unwrap();
        let want: Vec<f32> = vec![
            1.0, 2.0, 11.0, 12.0, 21.0, 22.0, 31.0, 32.0, 41.0, 42.0, 51.0, 52.0, 61.0, 62.0,
        ];
        assert_eq!(out, Tensor::new(&[7, 2], want).unwrap());
        let out = stitch(
            vec![Tensor::vector(&[0i32, 1]), Tensor::vector(&[1i32])],
            vec![Tensor::vector(&[1i64, 2]), Tensor::vector(&[9i64])],
        )
        .unwrap();
        assert_eq!(out, Tensor::vector(&[1i64, 9]));
        // Strings, and an unnamed row left empty.
        let out = stitch(
            vec![Tensor::vector(&[2i32])],
            vec![Tensor::from_strings(&[1], vec!["c"]).unwrap()],
        )
        .unwrap();
        assert_eq!(out, Tensor::from_strings(&[3], vec!["", "", "c"]).unwrap());
    }

    #[test]
    fn bad_shapes_and_indices_are_errors() {
        let e = stitch(
            vec![Tensor::vector(&[0i32, 1])],
            vec![Tensor::vector(&[1.0f32])],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("does not start with"), "{e}");
        let e = stitch(
            vec![Tensor::vector(&[0i32]), Tensor::vector(&[1i32])],
            vec![
                Tensor::new(&[1, 2], vec![1.0f32, 2.0]).unwrap(),
                Tensor::new(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap(),
            ],
        )
        .unwrap_err();
        assert!(e.message().starts_with("Need data[0].shape[1:]"), "{e}");
        let e = stitch(
            vec![Tensor::vector(&[-1i32, 0])],
            vec![Tensor::vector(&[1.0f32, 2.0])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "indices[0] is out of range");
    }
}
