//! `SparseToDense`: a tensor of shape `output_shape` holding `default_value`
//! except at `sparse_indices`, which get `sparse_values` (or the one scalar value).
//!
//! As TensorFlow's CPU kernel: `sparse_indices` is a scalar, a vector or an
//! `[n, rank]` matrix (a scalar or vector addresses a vector); with
//! `validate_indices` the indices must be in bounds, sorted and unique (the
//! first offender is named); without it a repeated index keeps its last value and
//! an index out of bounds is still an error ("Indices are not valid (out of
//! bounds)").

use std::marker::PhantomData;

use graph::{DType, Result, Status};

use super::{i64_values, indices_valid};
use crate::cpu::array::elems::{dispatch_elem, make_shape, Elem, POD_STRING_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

struct SparseToDense<E> {
    dtype: DType,
    validate_indices: bool,
    _e: PhantomData<fn(E)>,
}

/// TensorFlow's `CheckSparseToDenseShapes`; returns `(entries, rank)`.
fn check_shapes(
    indices: &graph::Tensor,
    output_shape: &graph::Tensor,
    values: &graph::Tensor,
    default_value: &graph::Tensor,
) -> Result<(usize, usize)> {
    if indices.rank() > 2 {
        return Err(Status::invalid_argument(format!(
            "sparse_indices should be a scalar, vector, or matrix, got shape {}",
            indices.shape()
        )));
    }
    let num_elems = indices.dims().first().copied().unwrap_or(1);
    let num_dims = indices.dims().get(1).copied().unwrap_or(1);
    if output_shape.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "output_shape must be rank 1, got shape {}",
            output_shape.shape()
        )));
    }
    if output_shape.num_elements() != num_dims {
        return Err(Status::invalid_argument(format!(
            "output_shape has incorrect number of elements: {} should be: {num_dims}",
            output_shape.num_elements()
        )));
    }
    if values.rank() != 0 && (values.rank() != 1 || values.num_elements() != num_elems) {
        return Err(Status::invalid_argument(format!(
            "sparse_values has incorrect shape {}, should be [] or [{num_elems}]",
            values.shape()
        )));
    }
    if default_value.rank() != 0 {
        return Err(Status::invalid_argument(
            "default_value should be a scalar.",
        ));
    }
    Ok((num_elems, num_dims))
}

impl<E: Elem> OpKernel for SparseToDense<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (indices, output_shape) = (ctx.input(0)?, ctx.input(1)?);
        let (values, default_value) = (ctx.input(2)?, ctx.input(3)?);
        let (num_elems, num_dims) = check_shapes(indices, output_shape, values, default_value)?;
        let dims = i64_values(output_shape)?;
        let shape = make_shape(&dims)?;
        let ix = i64_values(indices)?;
        if self.validate_indices {
            indices_valid(&ix, num_elems, &dims)?;
        }
        let vals = E::view(values)?;
        let dflt = E::view(default_value)?
            .first()
            .cloned()
            .ok_or_else(|| Status::internal("empty default_value"))?;
        let out_dims = shape.dims().to_vec();
        let mut strides = vec![1usize; num_dims];
        for d in (0..num_dims.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * out_dims[d + 1];
        }
        let out = E::build(ctx.allocator(), self.dtype, shape.clone(), |out| {
            out.fill(dflt);
            for n in 0..num_elems {
                let mut flat = 0usize;
                for d in 0..num_dims {
                    let i = usize::try_from(ix[n * num_dims + d])
                        .ok()
                        .filter(|&i| i < out_dims[d])
                        .ok_or_else(|| {
                            Status::invalid_argument(format!(
                                "Indices are not valid (out of bounds).  Shape: {shape}"
                            ))
                        })?;
                    flat += i * strides[d];
                }
                let v = if values.rank() == 0 {
                    &vals[0]
                } else {
                    &vals[n]
                };
                out[flat] = v.clone();
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    let validate_indices: bool = c.attr("validate_indices")?;
    dispatch_elem!(dtype, E => Ok(Box::new(SparseToDense::<E> {
        dtype,
        validate_indices,
        _e: PhantomData,
    }) as Box<dyn OpKernel>))
}

/// The kernel for every real type, bool and string, with int32 or int64 indices.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("SparseToDense", make)
            .type_constraint("T", POD_STRING_DTYPES)
            .type_constraint("Tindices", &[DType::I32, DType::I64]),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Result, Tensor};

    fn to_dense(ix: Tensor, shape: Tensor, vals: Tensor, validate: bool) -> Result<Tensor> {
        run_op(
            "SparseToDense",
            &[("validate_indices", AttrValue::from(validate))],
            vec![ix, shape, vals, Tensor::scalar(-1i32)],
        )
        .map(|mut v| v.remove(0))
    }

    #[test]
    fn fills_the_default_around_the_values() {
        let ix = Tensor::new(&[2, 2], vec![0i64, 1, 1, 0]).unwrap();
        let shape = Tensor::vector(&[2i64, 2]);
        let y = to_dense(ix.clone(), shape.clone(), Tensor::vector(&[5i32, 6]), true).unwrap();
        assert_eq!(y, Tensor::new(&[2, 2], vec![-1i32, 5, 6, -1]).unwrap());
        // A scalar value for every index; vector indices into a vector.
        let y = to_dense(
            Tensor::vector(&[3i32, 1]),
            Tensor::vector(&[4i32]),
            Tensor::scalar(7i32),
            false,
        )
        .unwrap();
        assert_eq!(y, Tensor::vector(&[-1i32, 7, -1, 7]));
        let e = to_dense(
            Tensor::vector(&[3i32, 1]),
            Tensor::vector(&[4i32]),
            Tensor::scalar(7i32),
            true,
        )
        .unwrap_err();
        assert!(
            e.message().starts_with("indices[1] = [1] is out of order"),
            "{e}"
        );
        let e = to_dense(
            Tensor::vector(&[3i32, 9]),
            Tensor::vector(&[4i32]),
            Tensor::scalar(7i32),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Indices are not valid (out of bounds).  Shape: [4]"
        );
    }
}
