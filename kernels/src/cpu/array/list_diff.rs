//! `ListDiff` (`tf.compat.v1.setdiff1d`): the elements of vector `x` that are not
//! in vector `y`, in `x`'s order with repeats kept, and their positions in `x`.
//!
//! Membership is C++ `==`, as TensorFlow's `unordered_set`: `-0.0` equals `0.0`
//! and NaN equals nothing, so a NaN in `x` is always kept.

use std::collections::HashSet;
use std::marker::PhantomData;

use bytes::Bytes;
use graph::{DType, Result, Status, Tensor, TensorShape};

use super::elems::{dispatch_elem, Elem};
use crate::cpu::types::NUMERIC_DTYPES;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// An element as a set member (the members of a vector are `Option<Key>`, where
/// `None`, for NaN, equals nothing).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Word(u64),
    Bytes(Bytes),
}

/// The set keys of a vector's elements.
fn keys(t: &Tensor) -> Result<Vec<Option<Key>>> {
    let d = t.dtype();
    if d == DType::String {
        return Ok(t
            .as_strings()?
            .iter()
            .map(|s| Some(Key::Bytes(s.clone())))
            .collect());
    }
    if d.is_float() {
        let v = t
            .to_f64_vec()
            .ok_or_else(|| Status::internal(format!("{d} elements as f64")))?;
        // Every half, bfloat16 and f32 value is exact in f64.
        return Ok(v
            .iter()
            .map(|&x| match x {
                x if x.is_nan() => None,
                0.0 => Some(Key::Word(0)),
                x => Some(Key::Word(x.to_bits())),
            })
            .collect());
    }
    // Integers: equal exactly when their bytes are.
    let size = d.size();
    Ok(t.as_bytes()?
        .chunks_exact(size)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..size].copy_from_slice(c);
            Some(Key::Word(u64::from_le_bytes(w)))
        })
        .collect())
}

/// `ListDiff` of storage class `E`.
struct ListDiffKernel<E> {
    dtype: DType,
    out_idx: DType,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for ListDiffKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (x, y) = (ctx.input(0)?, ctx.input(1)?);
        if x.rank() != 1 {
            return Err(Status::invalid_argument("x should be a 1D vector."));
        }
        if y.rank() != 1 {
            return Err(Status::invalid_argument("y should be a 1D vector."));
        }
        if x.num_elements() >= i32::MAX as usize {
            return Err(Status::invalid_argument("x too large for int32 indexing"));
        }
        let y_set: HashSet<Key> = keys(y)?.into_iter().flatten().collect();
        let kept: Vec<usize> = keys(x)?
            .iter()
            .enumerate()
            .filter(|(_, k)| k.as_ref().is_none_or(|k| !y_set.contains(k)))
            .map(|(i, _)| i)
            .collect();
        let src = E::view(x)?;
        let out = E::build(
            ctx.allocator(),
            self.dtype,
            TensorShape::vector(kept.len()),
            |o| {
                for (slot, &i) in o.iter_mut().zip(&kept) {
                    *slot = src[i].clone();
                }
                Ok(())
            },
        )?;
        let idx = match self.out_idx {
            DType::I64 => Tensor::vector(&kept.iter().map(|&i| i as i64).collect::<Vec<_>>()),
            _ => Tensor::vector(&kept.iter().map(|&i| i as i32).collect::<Vec<_>>()),
        };
        ctx.set_output(0, out)?;
        ctx.set_output(1, idx)
    }
}

fn make_list_diff(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    let out_idx: DType = c.attr("out_idx")?;
    dispatch_elem!(dtype, E => Ok(Box::new(ListDiffKernel::<E> { dtype, out_idx, _e: PhantomData }) as Box<dyn OpKernel>))
}

/// Registers `ListDiff` (numbers and strings, as TensorFlow).
pub(super) fn register(r: &mut KernelRegistry) {
    let mut types = NUMERIC_DTYPES.to_vec();
    types.push(DType::String);
    r.register(
        KernelDef::cpu("ListDiff", make_list_diff)
            .type_constraint("T", &types)
            .type_constraint("out_idx", &[DType::I32, DType::I64]),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, DType, Tensor};

    #[test]
    fn keeps_x_order_and_repeats() {
        let x = Tensor::vector(&[1i32, 2, 3, 4, 5, 6, 2]);
        let y = Tensor::vector(&[1i32, 3, 5]);
        let out = run_op("ListDiff", &[], vec![x, y]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[2i32, 4, 6, 2]));
        assert_eq!(out[1], Tensor::vector(&[1i32, 3, 5, 6]));
        let attrs = [("out_idx", AttrValue::from(DType::I64))];
        let x = Tensor::vector(&[i64::MAX, i64::MAX - 1]);
        let out = run_op("ListDiff", &attrs, vec![x, Tensor::vector(&[i64::MAX])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[i64::MAX - 1]));
        assert_eq!(out[1], Tensor::vector(&[1i64]));
    }

    #[test]
    fn float_membership_is_numeric_equality() {
        let x = Tensor::vector(&[-0.0f32, f32::NAN, 1.5, 2.0]);
        let y = Tensor::vector(&[0.0f32, f32::NAN, 2.0]);
        let out = run_op("ListDiff", &[], vec![x, y]).unwrap();
        let v = out[0].as_slice::<f32>().unwrap();
        assert!(v[0].is_nan());
        assert_eq!(v[1], 1.5);
        assert_eq!(out[1], Tensor::vector(&[1i32, 2]));
        let s = |v: Vec<&'static str>| Tensor::from_strings(&[v.len()], v).unwrap();
        let out = run_op("ListDiff", &[], vec![s(vec!["a", "b", "c"]), s(vec!["b"])]).unwrap();
        assert_eq!(out[0], s(vec!["a", "c"]));
    }

    #[test]
    fn non_vectors_are_errors() {
        let e = run_op(
            "ListDiff",
            &[],
            vec![Tensor::scalar(1i32), Tensor::vector(&[1i32])],
        )
        .unwrap_err();
        assert_eq!(e.code(), graph::Code::InvalidArgument);
    }
}
