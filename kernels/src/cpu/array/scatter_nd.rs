//! Kernels that address slices by n-dimensional indices (TensorFlow's
//! `gather_nd_op.cc` and `scatter_nd_op.cc`): `GatherNd` copies the slices
//! `params[index]`; `ScatterNd` sums updates into zeros of a given shape (booleans
//! or-ed, strings concatenated, as TensorFlow's `ADD` does for them);
//! `TensorScatterUpdate`/`Add`/`Sub`/`Max`/`Min` assign, add, subtract or keep the
//! larger or smaller of them into a copy of a
//! tensor (the last of duplicate assignments wins).
//!
//! Each index is a row of `indices`' last dimension (its depth `r`) and selects the
//! slice `shape[r:]`. Shapes are checked in TensorFlow's order with its messages;
//! every index is checked before anything is written, and a bad one is named by
//! its position, as TensorFlow does.

use std::marker::PhantomData;

use bytes::{Bytes, BytesMut};
use graph::{DType, Result, Status, Tensor, TensorShape};

use super::elems::{
    coords_string, dispatch_elem, dispatch_index, int_values, make_shape, Elem, IndexElem,
};
use crate::allocator::Allocator;
use crate::cpu::math::elem::Arith;
use crate::cpu::types::NUMERIC_DTYPES;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The flat offset of every index row of `idx` (depth `depth`) into a tensor of
/// `dims`, in units of the slice `dims[depth:]`; `Err(row)` names the first row
/// out of range.
pub(crate) fn slice_offsets<I: IndexElem>(
    idx: &[I],
    depth: usize,
    dims: &[usize],
) -> std::result::Result<Vec<usize>, usize> {
    let rows = idx.len().checked_div(depth).unwrap_or(0);
    let mut out = Vec::with_capacity(rows);
    for r in 0..rows {
        let mut off = 0usize;
        for (k, &d) in dims[..depth].iter().enumerate() {
            match usize::try_from(idx[r * depth + k].to_i64()) {
                Ok(v) if v < d => off = off * d + v,
                _ => return Err(r),
            }
        }
        out.push(off);
    }
    Ok(out)
}

/// `[a, b, c]`: an index row as TensorFlow prints it in these messages.
pub(crate) fn index_row<I: IndexElem>(idx: &[I], depth: usize, row: usize) -> String {
    let v: Vec<String> = idx[row * depth..(row + 1) * depth]
        .iter()
        .map(|v| v.to_i64().to_string())
        .collect();
    format!("[{}]", v.join(", "))
}

/// `GatherNd` for element storage `E` and index type `I`.
struct GatherNdKernel<E, I> {
    node: String,
    _t: PhantomData<fn(E, I)>,
}

impl<E: Elem, I: IndexElem> OpKernel for GatherNdKernel<E, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let params = ctx.input(0)?;
        let indices = ctx.input(1)?;
        if params.rank() < 1 {
            return Err(Status::invalid_argument("params must be at least a vector"));
        }
        if indices.rank() < 1 {
            return Err(Status::invalid_argument(
                "indices must be at least a vector",
            ));
        }
        let (pd, id) = (params.dims(), indices.dims());
        let depth = id[id.len() - 1];
        if depth > pd.len() {
            return Err(Status::invalid_argument(format!(
                "index innermost dimension length must be <= params rank; saw: {depth} vs. {}",
                pd.len()
            )));
        }
        let outer = &id[..id.len() - 1];
        let n: usize = outer.iter().product();
        if n > 0 && params.num_elements() == 0 {
            return Err(Status::invalid_argument(format!(
                "Requested more than 0 entries, but params is empty.  Params shape: {}",
                params.shape()
            )));
        }
        let mut out_dims = outer.to_vec();
        out_dims.extend_from_slice(&pd[depth..]);
        let slice: usize = pd[depth..].iter().product();
        let idx = indices.as_slice::<I>()?;
        let offsets = if depth == 0 {
            vec![0; n]
        } else {
            slice_offsets(idx, depth, pd).map_err(|row| {
                Status::invalid_argument(format!(
                    "indices{} = {} does not index into param shape {}, node name: {}",
                    coords_string(outer, row),
                    index_row(idx, depth, row),
                    params.shape(),
                    self.node
                ))
            })?
        };
        let src = E::view(params)?;
        let out = E::build(
            ctx.allocator(),
            params.dtype(),
            TensorShape::from(out_dims),
            |o| {
                for (k, &off) in offsets.iter().enumerate() {
                    o[k * slice..(k + 1) * slice]
                        .clone_from_slice(&src[off * slice..(off + 1) * slice]);
                }
                Ok(())
            },
        )?;
        ctx.set_output(0, out)
    }
}

/// Element types the scatter kernels write: their slice of a tensor and a new
/// tensor of them.
trait Slots: Clone + Send + Sync + 'static {
    fn slots(t: &Tensor) -> Result<&[Self]>;
    fn build(
        alloc: Allocator<'_>,
        dtype: DType,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]),
    ) -> Result<Tensor>;
}

macro_rules! pod_slots {
    ($($t:ty),*) => {$(
        impl Slots for $t {
            fn slots(t: &Tensor) -> Result<&[Self]> {
                t.as_slice::<$t>()
            }
            fn build(alloc: Allocator<'_>, _: DType, shape: TensorShape, fill: impl FnOnce(&mut [Self])) -> Result<Tensor> {
                alloc.build::<$t>(shape, fill)
            }
        }
    )*};
}
pod_slots! { f32, f64, graph::f16, graph::bf16, i8, i16, i32, i64, u8, u16, u32, u64, bool }

impl Slots for Bytes {
    fn slots(t: &Tensor) -> Result<&[Self]> {
        t.as_strings()
    }
    fn build(
        alloc: Allocator<'_>,
        dtype: DType,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]),
    ) -> Result<Tensor> {
        <Bytes as Elem>::build(alloc, dtype, shape, |o| {
            fill(o);
            Ok(())
        })
    }
}

/// How an update meets the element it lands on.
type Combine<T> = fn(&mut T, &T);

fn assign<T: Clone>(a: &mut T, b: &T) {
    a.clone_from(b);
}
fn add<T: Arith>(a: &mut T, b: &T) {
    *a = a.tf_add(*b);
}
fn sub<T: Arith>(a: &mut T, b: &T) {
    *a = a.tf_sub(*b);
}
fn max<T: Arith>(a: &mut T, b: &T) {
    *a = a.tf_max(*b);
}
fn min<T: Arith>(a: &mut T, b: &T) {
    *a = a.tf_min(*b);
}
fn or(a: &mut bool, b: &bool) {
    *a |= *b;
}
fn concat(a: &mut Bytes, b: &Bytes) {
    let mut s = BytesMut::with_capacity(a.len() + b.len());
    s.extend_from_slice(a);
    s.extend_from_slice(b);
    *a = s.freeze();
}

/// TensorFlow's `ValidEmptyOutputShape`: indices and updates both empty, or all
/// three counts non-zero.
fn valid_empty(inputs: usize, indices: usize, updates: usize) -> bool {
    (indices == 0 && updates == 0) || (inputs != 0 && indices != 0 && updates != 0)
}

/// `ScatterNd` (no `tensor` input: zeros of the `shape` input) or a
/// `TensorScatter*` op, for element type `T` and index type `I`.
struct ScatterNdKernel<T, I> {
    combine: Combine<T>,
    /// A `TensorScatter*` op (inputs `tensor, indices, updates`) rather than
    /// `ScatterNd` (`indices, updates, shape`).
    into_tensor: bool,
    _t: PhantomData<fn(T, I)>,
}

fn rank_at_least_one(what: &str, t: &Tensor) -> Result<()> {
    if t.rank() < 1 {
        return Err(Status::invalid_argument(format!(
            "{what} shape must have rank at least one. Found:{}",
            t.shape()
        )));
    }
    Ok(())
}

impl<T: Slots, I: IndexElem> ScatterNdKernel<T, I> {
    /// The output shape, after `ScatterNdOp`'s or `TensorScatterOp`'s checks.
    fn checked_shape(&self, ctx: &OpKernelContext<'_>) -> Result<TensorShape> {
        let (indices, updates) = if self.into_tensor {
            (ctx.input(1)?, ctx.input(2)?)
        } else {
            (ctx.input(0)?, ctx.input(1)?)
        };
        rank_at_least_one("Indices", indices)?;
        rank_at_least_one("Updates", updates)?;
        let (shape, inputs) = if self.into_tensor {
            let t = ctx.input(0)?;
            (t.shape().clone(), t.num_elements())
        } else {
            let s = ctx.input(2)?;
            (make_shape(&int_values(s)?)?, s.num_elements())
        };
        if !valid_empty(inputs, indices.num_elements(), updates.num_elements()) {
            return Err(Status::invalid_argument(
                "Indices and updates specified for empty output shape",
            ));
        }
        let (id, ud, sd) = (indices.dims(), updates.dims(), shape.dims());
        let outer = id.len() - 1;
        if (0..outer).any(|i| ud.get(i) != Some(&id[i])) {
            return Err(Status::invalid_argument(if self.into_tensor {
                format!(
                    "Outer dimensions of indices and update must match. Indices shape: {}, \
                     updates shape:{}",
                    indices.shape(),
                    updates.shape()
                )
            } else {
                format!(
                    "Dimensions [0,{outer}) of indices[shape={}] must match dimensions [0,{outer}) \
                     of updates[shape={}]",
                    indices.shape(),
                    updates.shape()
                )
            }));
        }
        let ix = id[outer];
        let inner_ok = ud.len() as i64 - outer as i64 == sd.len() as i64 - ix as i64;
        let dims_ok = inner_ok && (0..ud.len() - outer).all(|i| ud[outer + i] == sd[ix + i]);
        if !dims_ok {
            return Err(Status::invalid_argument(if !self.into_tensor {
                format!(
                    "Dimensions [{ix},{}) of input[shape={shape}] must match dimensions \
                     [{outer},{}) of updates[shape={}]",
                    sd.len(),
                    ud.len(),
                    updates.shape()
                )
            } else if !inner_ok {
                format!(
                    "Inner dimensions of output shape must match inner dimensions of updates \
                     shape. Output: {shape} updates: {}",
                    updates.shape()
                )
            } else {
                format!(
                    "The inner {} dimensions of output.shape={shape} must match the inner {} \
                     dimensions of updates.shape={}",
                    sd.len() - ix,
                    ud.len() - outer,
                    updates.shape()
                )
            }));
        }
        if !self.into_tensor && ctx.input(2)?.rank() != 1 {
            return Err(Status::invalid_argument("Shape must be a vector"));
        }
        if sd.is_empty() {
            return Err(Status::invalid_argument(format!(
                "Output must be at least 1-D, got shape: {shape}"
            )));
        }
        Ok(shape)
    }
}

impl<T: Slots, I: IndexElem> OpKernel for ScatterNdKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape = self.checked_shape(ctx)?;
        let (indices, updates) = if self.into_tensor {
            (ctx.input(1)?, ctx.input(2)?)
        } else {
            (ctx.input(0)?, ctx.input(1)?)
        };
        let id = indices.dims();
        let depth = if id.len() > 1 { id[id.len() - 1] } else { 1 };
        if shape.num_elements() > 0 && !(1..=7).contains(&depth) {
            return Err(Status::invalid_argument(format!(
                "Only indices.shape[-1] values between 1 and 5 are currently supported.  \
                 Requested rank: {depth}"
            )));
        }
        let idx = indices.as_slice::<I>()?;
        let offsets = if shape.num_elements() == 0 {
            Vec::new()
        } else {
            slice_offsets(idx, depth, shape.dims()).map_err(|row| {
                Status::invalid_argument(format!(
                    "indices{} = {} does not index into shape {shape}",
                    coords_string(&id[..id.len() - 1], row),
                    index_row(idx, depth, row)
                ))
            })?
        };
        let slice: usize = shape.dims()[depth.min(shape.rank())..].iter().product();
        let src = T::slots(updates)?;
        let base = if self.into_tensor {
            Some(T::slots(ctx.input(0)?)?)
        } else {
            None
        };
        let combine = self.combine;
        let out = T::build(ctx.allocator(), updates.dtype(), shape, |o| {
            if let Some(b) = base {
                o.clone_from_slice(b);
            }
            for (k, &off) in offsets.iter().enumerate() {
                let dst = &mut o[off * slice..(off + 1) * slice];
                for (d, s) in dst.iter_mut().zip(&src[k * slice..(k + 1) * slice]) {
                    combine(d, s);
                }
            }
        })?;
        ctx.set_output(0, out)
    }
}

fn scatter<T: Slots>(
    c: &OpKernelConstruction<'_>,
    combine: Combine<T>,
) -> Result<Box<dyn OpKernel>> {
    let into_tensor = c.node.op != "ScatterNd";
    dispatch_index!(c.attr::<DType>("Tindices")?, I => Ok(Box::new(ScatterNdKernel::<T, I> {
        combine,
        into_tensor,
        _t: PhantomData,
    }) as Box<dyn OpKernel>))
}

fn make_scatter(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    let op = c.node.op.as_str();
    match (op, t) {
        ("TensorScatterUpdate", DType::String) => scatter::<Bytes>(c, assign),
        ("TensorScatterUpdate", _) => {
            graph::dispatch_pod!(t, T => scatter::<T>(c, assign::<T>),
                Err(Status::unimplemented(format!("dtype {t} is not supported here"))))
        }
        ("ScatterNd", DType::String) => scatter::<Bytes>(c, concat),
        ("ScatterNd", DType::Bool) => scatter::<bool>(c, or),
        ("TensorScatterSub", _) => {
            crate::dispatch_numeric!(t, T => scatter::<T>(c, sub::<T>))
        }
        ("TensorScatterMax", _) => {
            crate::dispatch_numeric!(t, T => scatter::<T>(c, max::<T>))
        }
        ("TensorScatterMin", _) => {
            crate::dispatch_numeric!(t, T => scatter::<T>(c, min::<T>))
        }
        _ => crate::dispatch_numeric!(t, T => scatter::<T>(c, add::<T>)),
    }
}

fn make_gather_nd(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let ti: DType = c.attr("Tindices")?;
    let node = c.node.name.clone();
    dispatch_elem!(c.attr::<DType>("Tparams")?, E => {
        dispatch_index!(ti, I => Ok(Box::new(GatherNdKernel::<E, I> { node: node.clone(), _t: PhantomData }) as Box<dyn OpKernel>))
    })
}

/// Every numeric dtype, bool and string: ScatterNd's and TensorScatterUpdate's
/// CPU types.
fn all_value_dtypes() -> Vec<DType> {
    let mut v = NUMERIC_DTYPES.to_vec();
    v.extend([DType::Bool, DType::String]);
    v
}

/// Registers GatherNd, ScatterNd and the TensorScatter ops.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("GatherNd", make_gather_nd)
            .type_constraint("Tindices", &[DType::I16, DType::I32, DType::I64]),
    );
    let ids = &[DType::I32, DType::I64];
    for (op, types) in [
        ("ScatterNd", all_value_dtypes()),
        ("TensorScatterUpdate", all_value_dtypes()),
        ("TensorScatterAdd", NUMERIC_DTYPES.to_vec()),
        ("TensorScatterSub", NUMERIC_DTYPES.to_vec()),
        ("TensorScatterMax", NUMERIC_DTYPES.to_vec()),
        ("TensorScatterMin", NUMERIC_DTYPES.to_vec()),
    ] {
        r.register(
            KernelDef::cpu(op, make_scatter)
                .type_constraint("T", &types)
                .type_constraint("Tindices", ids),
        );
    }
}

/// The values of a small index tensor, for tests.
#[cfg(test)]
fn ints(t: &Tensor) -> Vec<i64> {
    t.to_f64_vec().unwrap().iter().map(|&v| v as i64).collect()
}

#[cfg(test)]
mod tests {
    use graph::Tensor;

    use super::ints;
    use crate::testutil::run_op;

    #[test]
    fn gathers_and_scatters_slices() {
        let p = Tensor::new(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        let idx = Tensor::new(&[2, 2], vec![1i64, 2, 0, 0]).unwrap();
        let out = run_op("GatherNd", &[], vec![p.clone(), idx]).unwrap();
        assert_eq!(ints(&out[0]), [6, 1]);
        let rows = Tensor::new(&[2, 1], vec![1i32, 1]).unwrap();
        let shape = Tensor::vector(&[2i32, 3]);
        let out = run_op("ScatterNd", &[], vec![rows.clone(), p.clone(), shape]).unwrap();
        assert_eq!(ints(&out[0]), [0, 0, 0, 5, 7, 9]);
        let out = run_op("TensorScatterUpdate", &[], vec![p.clone(), rows, p]).unwrap();
        assert_eq!(ints(&out[0]), [1, 2, 3, 4, 5, 6], "the last update wins");
    }
}
