//! `Unique` and `UniqueWithCounts` (TensorFlow's `unique_op.cc`): the distinct
//! values of a vector in order of first occurrence, each element's position among
//! them and (with counts) how often each occurs. Values are compared as TensorFlow's
//! hash map compares them: `-0.0` equals `0.0`, and a NaN equals nothing, not even
//! itself, so every NaN is a value of its own.

use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;

use bytes::Bytes;
use graph::{DType, Result, Status, Tensor, TensorType};

use super::elems::{dispatch_elem, Elem, POD_STRING_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// Where the distinct values are: the position of each one's first occurrence, each
/// element's distinct-value index, and the counts.
struct Groups {
    firsts: Vec<usize>,
    idx: Vec<usize>,
    counts: Vec<usize>,
}

/// Groups `keys` (`None`: a value equal to nothing).
fn group<K: Hash + Eq>(keys: impl Iterator<Item = Option<K>>) -> Groups {
    let mut seen: HashMap<K, usize> = HashMap::new();
    let mut g = Groups {
        firsts: Vec::new(),
        idx: Vec::new(),
        counts: Vec::new(),
    };
    for (i, k) in keys.enumerate() {
        let next = g.firsts.len();
        let at = match k {
            Some(k) => *seen.entry(k).or_insert(next),
            None => next,
        };
        if at == next {
            g.firsts.push(i);
            g.counts.push(0);
        }
        g.counts[at] += 1;
        g.idx.push(at);
    }
    g
}

/// The comparison key of each element of a POD tensor: its bits, with `-0.0` as
/// `0.0` and NaN as `None`.
fn pod_groups(x: &Tensor) -> Result<Groups> {
    fn floats<T: TensorType>(x: &Tensor) -> Result<Groups> {
        Ok(group(x.as_slice::<T>()?.iter().map(|v| {
            let f = v.to_f64();
            if f.is_nan() {
                None
            } else if f == 0.0 {
                Some(0u64)
            } else {
                Some(f.to_bits())
            }
        })))
    }
    fn words<E: Elem + Hash + Eq + Copy>(x: &Tensor) -> Result<Groups> {
        Ok(group(E::view(x)?.iter().map(|&v| Some(v))))
    }
    match x.dtype() {
        DType::F16 => floats::<graph::f16>(x),
        DType::BF16 => floats::<graph::bf16>(x),
        DType::F32 => floats::<f32>(x),
        DType::F64 => floats::<f64>(x),
        DType::Bool => words::<bool>(x),
        DType::String => Ok(group(
            x.as_strings()?.iter().map(|v: &Bytes| Some(v.clone())),
        )),
        d => match d.size() {
            1 => words::<u8>(x),
            2 => words::<u16>(x),
            4 => words::<u32>(x),
            _ => words::<u64>(x),
        },
    }
}

/// `Unique`/`UniqueWithCounts` for element storage `E`, positions of type `I`.
struct UniqueKernel<E, I> {
    counts: bool,
    _t: PhantomData<fn(E, I)>,
}

impl<E: Elem, I: TensorType + num_traits::FromPrimitive> OpKernel for UniqueKernel<E, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.rank() != 1 {
            return Err(Status::invalid_argument("unique expects a 1D vector."));
        }
        let g = pod_groups(x)?;
        let src = E::view(x)?;
        let alloc = ctx.allocator();
        let y = E::build(alloc, x.dtype(), [g.firsts.len()].into(), |o| {
            for (d, &f) in o.iter_mut().zip(&g.firsts) {
                *d = src[f].clone();
            }
            Ok(())
        })?;
        let index = |v: usize| {
            I::from_usize(v).ok_or_else(|| {
                Status::invalid_argument(format!("{v} does not fit the out_idx type {}", I::DTYPE))
            })
        };
        let idx: Vec<I> = g.idx.iter().map(|&v| index(v)).collect::<Result<_>>()?;
        let idx = Tensor::new(&[idx.len()], idx)?;
        let x_len = x.num_elements();
        ctx.set_output(0, y)?;
        ctx.set_output(1, idx)?;
        if self.counts {
            let c: Vec<I> = g.counts.iter().map(|&v| index(v)).collect::<Result<_>>()?;
            ctx.set_output(2, Tensor::new(&[c.len()], c)?)?;
        }
        debug_assert_eq!(x_len, g.idx.len());
        Ok(())
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let counts = c.node.op == "UniqueWithCounts";
    let out: DType = c.attr("out_idx")?;
    dispatch_elem!(c.attr::<DType>("T")?, E => match out {
        DType::I64 => Ok(Box::new(UniqueKernel::<E, i64> { counts, _t: PhantomData }) as Box<dyn OpKernel>),
        _ => Ok(Box::new(UniqueKernel::<E, i32> { counts, _t: PhantomData }) as Box<dyn OpKernel>),
    })
}

/// Registers Unique and UniqueWithCounts.
pub(super) fn register(r: &mut KernelRegistry) {
    for op in ["Unique", "UniqueWithCounts"] {
        r.register(
            KernelDef::cpu(op, make)
                .type_constraint("T", POD_STRING_DTYPES)
                .type_constraint("out_idx", &[DType::I32, DType::I64]),
        );
    }
}

#[cfg(test)]
mod tests {
    use graph::{AttrValue, DType, Tensor};

    use crate::testutil::run_op;

    #[test]
    fn first_occurrence_order_and_counts() {
        let x = Tensor::vector(&[3.0f32, -0.0, 3.0, 0.0, f32::NAN, f32::NAN]);
        let attrs = [("out_idx", AttrValue::Type(DType::I64))];
        let out = run_op("UniqueWithCounts", &attrs, vec![x]).unwrap();
        let y = out[0].as_slice::<f32>().unwrap();
        assert_eq!(&y[..2], &[3.0, -0.0]);
        assert_eq!(y.len(), 4, "each NaN is its own value");
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[0, 1, 0, 1, 2, 3]);
        assert_eq!(out[2].as_slice::<i64>().unwrap(), &[2, 2, 1, 1]);
        let e = run_op("Unique", &[], vec![Tensor::scalar(1i32)]).unwrap_err();
        assert_eq!(e.code(), graph::Code::InvalidArgument);
    }
}
