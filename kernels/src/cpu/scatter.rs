//! Sparse reads and in-place updates of variables (TensorFlow's
//! `scatter_op.cc`, `scatter_nd_op.cc` and `resource_variable_ops.cc`):
//! `ResourceGather`, `VariableShape`, `Scatter*` / `ScatterNd*` on reference
//! variables (outputting the reference) and `ResourceScatter*` /
//! `ResourceScatterNd*` on resource handles.
//!
//! Every update runs under the variable's lock ([`Var::update`], whatever
//! `use_locking` says: the lock is cheap and keeps concurrent scatters from
//! racing on memory), checks shapes and every index before the first write, so
//! a failing update leaves the variable as it was, and writes the buffer in
//! place, copying it first only when a fetch or another consumer still holds
//! it. Duplicate indices apply one after the other (they accumulate for
//! `Add`/`Sub`/`Mul`/`Div`/`Min`/`Max`; for `Update` the last wins here, an
//! order TensorFlow leaves undefined).

use std::marker::PhantomData;
use std::sync::Arc;

use graph::ops::ScatterOp;
use graph::{DType, Result, Status, Tensor, TensorShape, TensorType};

use crate::cpu::array::elems::{coords_string, dispatch_elem, dispatch_index, IndexElem};
use crate::cpu::array::gather::gather;
use crate::cpu::array::scatter_nd::{index_row, slice_offsets};
use crate::cpu::math::elem::Arith;
use crate::cpu::state::lookup_var;
use crate::cpu::types::{NUMERIC_DTYPES, POD_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use crate::resource::Var;

/// `ResourceGather`: `Gather` (with `batch_dims`) from the variable's value.
struct ResourceGatherKernel<E, I> {
    dtype: DType,
    batch_dims: i64,
    _t: PhantomData<fn(E, I)>,
}

impl<E: crate::cpu::array::elems::Elem, I: IndexElem> OpKernel for ResourceGatherKernel<E, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let params = lookup_var(ctx, self.dtype)?.read()?;
        let out = gather::<E, I>(ctx, &params, ctx.input(1)?, None, self.batch_dims)?;
        ctx.set_output(0, out)
    }
}

fn make_resource_gather(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("dtype")?;
    let batch_dims: i64 = c.attr("batch_dims")?;
    let ti: DType = c.attr("Tindices")?;
    dispatch_elem!(dtype, E => {
        dispatch_index!(ti, I => Ok(Box::new(ResourceGatherKernel::<E, I> {
            dtype,
            batch_dims,
            _t: PhantomData,
        }) as Box<dyn OpKernel>))
    })
}

/// `VariableShape`: the variable's shape as an `out_type` vector.
struct VariableShapeKernel {
    out_type: DType,
}

impl OpKernel for VariableShapeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = crate::cpu::state::handle(ctx)?;
        let var = ctx
            .step()
            .device
            .resources
            .lookup::<Var>(&h.container, &h.name)
            .map_err(|_| {
                Status::not_found(format!(
                    "Resource {}/{} does not exist.",
                    h.container, h.name
                ))
            })?;
        let shape = var.read()?.shape().clone();
        let dims = shape.dims();
        let t = if self.out_type == DType::I64 {
            Tensor::vector(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>())
        } else {
            let mut v = Vec::with_capacity(dims.len());
            for &d in dims {
                v.push(i32::try_from(d).map_err(|_| {
                    Status::invalid_argument(format!(
                        "VariableShape: dimension {d} does not fit an int32; use out_type int64"
                    ))
                })?);
            }
            Tensor::vector(&v)
        };
        ctx.set_output(0, t)
    }
}

/// Where the updates go: the first element of each addressed slice (in
/// elements), the slice length, and whether `updates` is one scalar for all.
struct Plan {
    starts: Vec<usize>,
    slice: usize,
    scalar: bool,
}

/// A row or `Nd` scatter of element type `T` with index type `I` (see the
/// module docs); `combine(dst, update)` is the op's element update.
struct ScatterKernel<T, I> {
    node: String,
    nd: bool,
    resource: bool,
    combine: fn(&mut T, T),
    /// Rejects updates the combine cannot take (integer division by zero).
    check: fn(&[T]) -> Result<()>,
    _t: PhantomData<fn(I)>,
}

impl<T: TensorType, I: IndexElem> ScatterKernel<T, I> {
    /// TensorFlow's `ScatterUpdateOp` checks: `updates` is a scalar or
    /// `indices.shape + params.shape[1:]`, and every index is a row.
    fn plan_rows(&self, params: &TensorShape, indices: &Tensor, updates: &Tensor) -> Result<Plan> {
        if params.rank() < 1 {
            return Err(Status::invalid_argument(format!(
                "params must be at least 1-D, got shape {params}"
            )));
        }
        let scalar = updates.rank() == 0;
        let mut want: Vec<usize> = indices.dims().to_vec();
        want.extend_from_slice(&params.dims()[1..]);
        if !scalar && updates.dims() != want.as_slice() {
            return Err(Status::invalid_argument(format!(
                "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], \
                 got updates.shape {}, indices.shape {}, params.shape {params}",
                updates.shape(),
                indices.shape()
            )));
        }
        let rows = params.dim(0);
        let slice = params.num_elements().checked_div(rows).unwrap_or(0);
        let idx = indices.as_slice::<I>()?;
        let mut starts = Vec::with_capacity(idx.len());
        for (k, v) in idx.iter().enumerate() {
            match usize::try_from(v.to_i64()) {
                Ok(r) if r < rows => starts.push(r * slice),
                _ => {
                    return Err(Status::invalid_argument(format!(
                        "indices{} = {} is not in [0, {rows})",
                        coords_string(indices.dims(), k),
                        v.to_i64()
                    ))
                    .with_node(&self.node))
                }
            }
        }
        Ok(Plan {
            starts,
            slice,
            scalar,
        })
    }

    /// TensorFlow's `ScatterNd*` checks on a variable of shape `params`.
    fn plan_nd(&self, params: &TensorShape, indices: &Tensor, updates: &Tensor) -> Result<Plan> {
        if params.rank() < 1 {
            return Err(Status::invalid_argument(format!(
                "Output must be at least 1-D, got shape: {params}"
            )));
        }
        if indices.rank() < 1 {
            return Err(Status::invalid_argument(format!(
                "Indices shape must have rank at least one. Found:{}",
                indices.shape()
            )));
        }
        let (id, ud, pd) = (indices.dims(), updates.dims(), params.dims());
        let outer = id.len() - 1;
        let depth = id[outer];
        if depth > pd.len() {
            return Err(Status::invalid_argument(format!(
                "Index innermost dimension length must be <= params rank; saw: {depth} vs. {}",
                pd.len()
            )));
        }
        if (0..outer).any(|i| ud.get(i) != Some(&id[i])) {
            return Err(Status::invalid_argument(format!(
                "Dimensions [0,{outer}) of indices[shape={}] must match dimensions [0,{outer}) \
                 of updates[shape={}]",
                indices.shape(),
                updates.shape()
            )));
        }
        if ud.len() < outer || ud[outer..] != pd[depth..] {
            return Err(Status::invalid_argument(format!(
                "Dimensions [{depth},{}) of input[shape={params}] must match dimensions \
                 [{outer},{}) of updates[shape={}]",
                pd.len(),
                ud.len(),
                updates.shape()
            )));
        }
        let slice: usize = pd[depth..].iter().product();
        let idx = indices.as_slice::<I>()?;
        let starts = if depth == 0 {
            vec![0; id[..outer].iter().product()]
        } else {
            slice_offsets(idx, depth, pd).map_err(|row| {
                Status::invalid_argument(format!(
                    "indices{} = {} does not index into shape {params}",
                    coords_string(&id[..outer], row),
                    index_row(idx, depth, row)
                ))
                .with_node(&self.node)
            })?
        };
        Ok(Plan {
            starts: starts.into_iter().map(|s| s * slice).collect(),
            slice,
            scalar: false,
        })
    }
}

impl<T: TensorType, I: IndexElem> OpKernel for ScatterKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let var = if self.resource {
            lookup_var(ctx, T::DTYPE)?
        } else {
            Arc::clone(ctx.input_ref(0)?)
        };
        let (indices, updates) = (ctx.input(1)?, ctx.input(2)?);
        let u = updates.as_slice::<T>()?;
        (self.check)(u)?;
        var.update(|cur| {
            let plan = if self.nd {
                self.plan_nd(cur.shape(), indices, updates)?
            } else {
                self.plan_rows(cur.shape(), indices, updates)?
            };
            if plan.starts.is_empty() || plan.slice == 0 {
                return Ok(());
            }
            let dst = cur.as_mut_slice::<T>()?;
            let combine = self.combine;
            for (k, &start) in plan.starts.iter().enumerate() {
                let row = &mut dst[start..start + plan.slice];
                if plan.scalar {
                    row.iter_mut().for_each(|d| combine(d, u[0]));
                } else {
                    let src = &u[k * plan.slice..(k + 1) * plan.slice];
                    row.iter_mut().zip(src).for_each(|(d, &x)| combine(d, x));
                }
            }
            Ok(())
        })?;
        if !self.resource {
            ctx.set_output_ref(0, var)?;
        }
        Ok(())
    }
}

fn no_check<T>(_: &[T]) -> Result<()> {
    Ok(())
}

fn build<T: TensorType>(
    c: &OpKernelConstruction<'_>,
    combine: fn(&mut T, T),
    check: fn(&[T]) -> Result<()>,
) -> Result<Box<dyn OpKernel>> {
    let op = c.op_def.name.as_str();
    let resource = op.starts_with("Resource");
    let nd = op.contains("ScatterNd");
    dispatch_index!(c.attr::<DType>("Tindices")?, I => Ok(Box::new(ScatterKernel::<T, I> {
        node: c.name().to_owned(),
        nd,
        resource,
        combine,
        check,
        _t: PhantomData,
    }) as Box<dyn OpKernel>))
}

/// The element type attribute: `dtype` on `ResourceScatter*`, `T` elsewhere.
fn value_dtype(c: &OpKernelConstruction<'_>) -> Result<DType> {
    if c.op_def.name.starts_with("ResourceScatter") && !c.op_def.name.contains("Nd") {
        c.attr("dtype")
    } else {
        c.attr("T")
    }
}

fn make_update(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    crate::dispatch_pod_kernel!(value_dtype(c)?, T => build::<T>(c, |d, u| *d = u, no_check::<T>))
}

/// How an update combines into an element.
type Combine<T> = fn(&mut T, T);
/// Checks the updates before any is applied (integer division by zero).
type CheckUpdates<T> = fn(&[T]) -> Result<()>;

fn make_arith(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let op = ScatterOp::of_op(&c.op_def.name)
        .ok_or_else(|| Status::internal(format!("{} is no scatter op", c.op_def.name)))?;
    let t = value_dtype(c)?;
    crate::dispatch_numeric!(t, T => {
        let (combine, check): (Combine<T>, CheckUpdates<T>) = match op {
            ScatterOp::Update => (|d, u| *d = u, no_check::<T>),
            ScatterOp::Add => (|d, u| *d = d.tf_add(u), no_check::<T>),
            ScatterOp::Sub => (|d, u| *d = d.tf_sub(u), no_check::<T>),
            ScatterOp::Mul => (|d, u| *d = d.tf_mul(u), no_check::<T>),
            ScatterOp::Div => (|d, u| *d = d.tf_div(u), <T as Arith>::check_divisor),
            ScatterOp::Min => (|d, u| *d = d.tf_min(u), no_check::<T>),
            ScatterOp::Max => (|d, u| *d = d.tf_max(u), no_check::<T>),
        };
        build::<T>(c, combine, check)
    })
}

/// The arithmetic scatter ops (all but `Update`), both forms.
const ARITH_OPS: &[&str] = &[
    "ScatterAdd",
    "ScatterSub",
    "ScatterMul",
    "ScatterDiv",
    "ScatterMin",
    "ScatterMax",
    "ScatterNdAdd",
    "ScatterNdSub",
    "ResourceScatterAdd",
    "ResourceScatterSub",
    "ResourceScatterMul",
    "ResourceScatterDiv",
    "ResourceScatterMin",
    "ResourceScatterMax",
    "ResourceScatterNdAdd",
    "ResourceScatterNdSub",
];

/// Registers `ResourceGather`, `VariableShape` and the scatter kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("ResourceGather", make_resource_gather));
    r.register(KernelDef::cpu("VariableShape", |c| {
        Ok(Box::new(VariableShapeKernel {
            out_type: c.attr("out_type")?,
        }))
    }));
    r.register(KernelDef::cpu("ScatterUpdate", make_update).type_constraint("T", POD_DTYPES));
    r.register(
        KernelDef::cpu("ResourceScatterUpdate", make_update).type_constraint("dtype", POD_DTYPES),
    );
    for op in ["ScatterNdUpdate", "ResourceScatterNdUpdate"] {
        r.register(KernelDef::cpu(op, make_update).type_constraint("T", POD_DTYPES));
    }
    for &op in ARITH_OPS {
        let ty = if op.starts_with("ResourceScatter") && !op.contains("Nd") {
            "dtype"
        } else {
            "T"
        };
        r.register(KernelDef::cpu(op, make_arith).type_constraint(ty, NUMERIC_DTYPES));
    }
}

#[cfg(test)]
mod tests;
