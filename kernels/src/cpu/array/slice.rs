//! Kernels that cut a box out of a tensor: Slice, StridedSlice (TensorFlow's
//! `ValidateStridedSliceOp`, shared with the shape function, in
//! `graph::ops::array::strided_slice_spec`) and StridedSliceGrad. A slice that
//! takes everything forwards its input without copying; others are one
//! [`strided_copy`].

use std::marker::PhantomData;

use graph::ops::array::strided_slice_spec::{
    check_arg_shapes, validate_strided_slice, StridedSliceInfo, StridedSliceMasks,
};
use graph::{DType, Result, Status, TensorShape};
use smallvec::SmallVec;

use super::copy::{signed_strides, strided_copy, Layout};
use super::elems::{dispatch_elem, int_values, make_shape, Elem, INDEX_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The largest rank TensorFlow's slice kernels handle.
const MAX_SLICE_RANK: usize = 8;

/// The source layout of a box starting at `begin` with per-dimension `steps` in a
/// tensor of `dims`.
fn box_layout(
    dims: &[usize],
    begin: &[i64],
    steps: &[i64],
) -> Result<(usize, SmallVec<[isize; 8]>)> {
    let strides = signed_strides(dims);
    let mut base: i128 = 0;
    let mut out = SmallVec::with_capacity(dims.len());
    for ((&s, &b), &st) in strides.iter().zip(begin).zip(steps) {
        base += b as i128 * s as i128;
        out.push(
            isize::try_from(st as i128 * s as i128)
                .map_err(|_| Status::internal("slice stride overflows"))?,
        );
    }
    let base = usize::try_from(base)
        .map_err(|_| Status::internal(format!("slice starts at offset {base}")))?;
    Ok((base, out))
}

/// `Slice`.
struct SliceKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for SliceKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let (bt, st) = (ctx.input(1)?, ctx.input(2)?);
        let r = input.rank();
        if !(bt.rank() == 1 && st.rank() == 1 && bt.num_elements() == r && st.num_elements() == r) {
            return Err(Status::invalid_argument(format!(
                "Expected begin and size arguments to be 1-D tensors of size {r}, but got shapes {} and {} instead.",
                bt.shape(),
                st.shape()
            )));
        }
        let (begin, size) = (int_values(bt)?, int_values(st)?);
        let mut out = Vec::with_capacity(r);
        let mut identity = true;
        for i in 0..r {
            let d = input.dims()[i] as i64;
            let b = begin[i];
            let s = if size[i] == -1 { d - b } else { size[i] };
            if d == 0 {
                if !(b == 0 && s == 0) {
                    return Err(Status::invalid_argument(format!(
                        "Expected begin[{i}] == 0 (got {b}) and size[{i}] == 0 (got {s}) when input.dim_size({i}) == 0"
                    )));
                }
            } else {
                if !(0..=d).contains(&b) {
                    return Err(Status::invalid_argument(format!(
                        "Expected begin[{i}] in [0, {d}], but got {b}"
                    )));
                }
                if !(s >= 0 && b + s <= d) {
                    return Err(Status::invalid_argument(format!(
                        "Expected size[{i}] in [0, {}], but got {s}",
                        d - b
                    )));
                }
            }
            identity &= b == 0 && s == d;
            out.push(s as usize);
        }
        if identity {
            return ctx.set_output(0, input);
        }
        let shape = TensorShape::from(out.clone());
        if shape.num_elements() == 0 {
            return ctx.set_output(0, ctx.allocate(input.dtype(), shape)?);
        }
        if r > MAX_SLICE_RANK {
            return Err(Status::unimplemented(
                "SliceOp : Unhandled input dimensions",
            ));
        }
        let ones = vec![1i64; r];
        let (base, strides) = box_layout(input.dims(), &begin, &ones)?;
        let dst = signed_strides(&out);
        let src = E::view(&input)?;
        let t = E::build(ctx.allocator(), input.dtype(), shape, |o| {
            strided_copy(
                &out,
                src,
                Layout {
                    base,
                    strides: &strides,
                },
                o,
                Layout {
                    base: 0,
                    strides: &dst,
                },
            )
        })?;
        ctx.set_output(0, t)
    }
}

fn masks_of(c: &OpKernelConstruction<'_>) -> Result<StridedSliceMasks> {
    Ok(StridedSliceMasks {
        begin_mask: c.attr("begin_mask")?,
        end_mask: c.attr("end_mask")?,
        ellipsis_mask: c.attr("ellipsis_mask")?,
        new_axis_mask: c.attr("new_axis_mask")?,
        shrink_axis_mask: c.attr("shrink_axis_mask")?,
    })
}

/// Validates the begin/end/strides inputs (at `first..first + 3`) against an input
/// of `dims`.
fn validate(
    ctx: &OpKernelContext<'_>,
    first: usize,
    dims: &[usize],
    masks: &StridedSliceMasks,
) -> Result<StridedSliceInfo> {
    let (b, e, s) = (
        ctx.input(first)?,
        ctx.input(first + 1)?,
        ctx.input(first + 2)?,
    );
    check_arg_shapes(Some(b.shape()), Some(e.shape()), s.shape())?;
    let (b, e, s) = (int_values(b)?, int_values(e)?, int_values(s)?);
    let in_dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    validate_strided_slice(Some(&b), Some(&e), &s, &in_dims, masks)
}

/// `StridedSlice`.
struct StridedSliceKernel<E> {
    masks: StridedSliceMasks,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for StridedSliceKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let info = validate(ctx, 1, input.dims(), &self.masks)?;
        let final_shape = info.final_tensor_shape()?;
        if info.is_identity {
            return ctx.set_output(0, input.reshaped(final_shape)?);
        }
        let processing = info.processing_tensor_shape()?;
        if processing.num_elements() == 0 {
            return ctx.set_output(0, ctx.allocate(input.dtype(), final_shape)?);
        }
        if input.rank() > MAX_SLICE_RANK {
            return Err(Status::unimplemented(format!(
                "Unhandled input dimensions {}",
                input.rank()
            )));
        }
        let (base, strides) = box_layout(input.dims(), &info.begin, &info.strides)?;
        let pdims = processing.dims();
        let dst = signed_strides(pdims);
        let src = E::view(&input)?;
        let t = E::build(ctx.allocator(), input.dtype(), final_shape, |o| {
            strided_copy(
                pdims,
                src,
                Layout {
                    base,
                    strides: &strides,
                },
                o,
                Layout {
                    base: 0,
                    strides: &dst,
                },
            )
        })?;
        ctx.set_output(0, t)
    }
}

/// `StridedSliceGrad`: `dy` written where `StridedSlice` read, zeros elsewhere.
struct StridedSliceGradKernel<E> {
    masks: StridedSliceMasks,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for StridedSliceGradKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape_t = ctx.input(0)?;
        if shape_t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "shape must be 1-D, got shape.shape = {}",
                shape_t.shape()
            )));
        }
        let input_shape = make_shape(&int_values(shape_t)?)?;
        let info = validate(ctx, 1, input_shape.dims(), &self.masks)?;
        let final_shape = info.final_tensor_shape()?;
        let dy = ctx.input(4)?;
        if dy.shape() != &final_shape {
            return Err(Status::invalid_argument(format!(
                "shape of dy was {} instead of {final_shape}",
                dy.shape()
            )));
        }
        let processing = info.processing_tensor_shape()?;
        if processing.num_elements() > 0 && input_shape.rank() > MAX_SLICE_RANK {
            return Err(Status::unimplemented(format!(
                "Unhandled input dimensions {}",
                input_shape.rank()
            )));
        }
        let src = E::view(dy)?;
        let pdims = processing.dims().to_vec();
        let (base, strides) = if processing.num_elements() > 0 {
            box_layout(input_shape.dims(), &info.begin, &info.strides)?
        } else {
            (0, SmallVec::new())
        };
        let dense = signed_strides(&pdims);
        let t = E::build(ctx.allocator(), dy.dtype(), input_shape, |o| {
            if pdims.iter().product::<usize>() == 0 {
                return Ok(());
            }
            strided_copy(
                &pdims,
                src,
                Layout {
                    base: 0,
                    strides: &dense,
                },
                o,
                Layout {
                    base,
                    strides: &strides,
                },
            )
        })?;
        ctx.set_output(0, t)
    }
}

/// Registers the slice kernels.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("Slice", |c| {
            dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(SliceKernel::<E>(PhantomData))))
        })
        .type_constraint("Index", INDEX_DTYPES),
    );
    r.register(
        KernelDef::cpu("StridedSlice", |c| {
            let masks = masks_of(c)?;
            dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(StridedSliceKernel::<E> { masks, _e: PhantomData })))
        })
        .type_constraint("Index", &[DType::I16, DType::I32, DType::I64]),
    );
    r.register(
        KernelDef::cpu("StridedSliceGrad", |c| {
            let masks = masks_of(c)?;
            dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(StridedSliceGradKernel::<E> { masks, _e: PhantomData })))
        })
        .type_constraint("Index", INDEX_DTYPES),
    );
}

#[cfg(test)]
mod tests;
