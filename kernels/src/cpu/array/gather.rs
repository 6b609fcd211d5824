//! Kernels that select elements by computed positions: Gather, GatherV2 (with
//! `batch_dims`) and Where. Gather validates every index before copying, as
//! TensorFlow's CPU kernel, and copies each selected slice with `memcpy`.

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape, TensorType};

use super::elems::{
    coords_string, dispatch_elem, dispatch_index, int_scalar, Elem, IndexElem, INDEX_DTYPES,
};
use crate::cpu::types::POD_DTYPES;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// `Gather` (no axis input) and `GatherV2`.
struct GatherKernel<E, I> {
    batch_dims: i64,
    _t: PhantomData<fn(E, I)>,
}

/// The largest value of index type `I`, for TensorFlow's "too large" check.
fn index_max(d: DType) -> i64 {
    match d {
        DType::I8 => i64::from(i8::MAX),
        DType::I16 => i64::from(i16::MAX),
        DType::I32 => i64::from(i32::MAX),
        DType::U8 => i64::from(u8::MAX),
        _ => i64::MAX,
    }
}

impl<E: Elem, I: IndexElem> OpKernel for GatherKernel<E, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let axis = if ctx.num_inputs() == 3 {
            let a = ctx.input(2)?;
            if a.rank() != 0 {
                return Err(Status::invalid_argument("axis must be scalar"));
            }
            Some(int_scalar(a)?)
        } else {
            None
        };
        let out = gather::<E, I>(ctx, ctx.input(0)?, ctx.input(1)?, axis, self.batch_dims)?;
        ctx.set_output(0, out)
    }
}

/// Gathers `indices` from `params` along `axis` (`None`: `batch_dims`) with
/// `batch_dims` leading batch dimensions, with TensorFlow's checks and messages
/// (`GatherV2`; `ResourceGather` on a variable's value).
pub(crate) fn gather<E: Elem, I: IndexElem>(
    ctx: &OpKernelContext<'_>,
    params: &Tensor,
    indices: &Tensor,
    axis: Option<i64>,
    batch_dims: i64,
) -> Result<Tensor> {
    if params.rank() < 1 {
        return Err(Status::invalid_argument(
            "params must be at least 1 dimensional",
        ));
    }
    let pr = params.rank() as i64;
    let (mut axis, axis_is_set) = match axis {
        Some(a) => (a, true),
        None => (0, false),
    };
    let min_rank = if axis < 0 { -axis } else { axis + 1 };
    if pr < min_rank {
        return Err(Status::invalid_argument(format!(
            "Shape must be at least rank {min_rank} but is rank {pr}"
        )));
    }
    if axis < 0 {
        axis += pr;
    }
    let mut bd = batch_dims;
    let ir = indices.rank() as i64;
    if bd != 0 {
        if !(-ir..=ir).contains(&bd) {
            return Err(Status::invalid_argument(format!(
                "Expected batch_dims in the range [{}, {ir}], but got {bd}",
                -ir
            )));
        }
        if bd < 0 {
            bd += ir;
        }
        if !axis_is_set {
            axis = bd;
        }
        if bd >= pr {
            return Err(Status::invalid_argument(format!(
                "batch_dims ({bd}) must be less than rank(params) ({pr})."
            )));
        }
        if axis < bd {
            return Err(Status::invalid_argument(format!(
                "batch_dims ({bd}) must be less than or equal to axis ({axis})."
            )));
        }
        for i in 0..bd as usize {
            if params.dims()[i] != indices.dims()[i] {
                return Err(Status::invalid_argument(format!(
                    "params.shape[{i}]: {} should be equal to indices.shape[{i}]: {}",
                    params.dims()[i],
                    indices.dims()[i]
                )));
            }
        }
    }
    let (axis, bd) = (axis as usize, bd as usize);
    let pd = params.dims();
    let gather_dim = pd[axis];
    if gather_dim as i64 > index_max(I::DTYPE) {
        return Err(Status::invalid_argument(format!(
            "params.shape[{axis}] too large for {} indexing: {gather_dim} > {}",
            I::DTYPE,
            index_max(I::DTYPE)
        )));
    }
    let mut out_dims = pd[..axis].to_vec();
    out_dims.extend_from_slice(&indices.dims()[bd..]);
    out_dims.extend_from_slice(&pd[axis + 1..]);
    let shape = TensorShape::from(out_dims);
    let batch: usize = pd[..bd].iter().product();
    let outer: usize = pd[bd..axis].iter().product();
    let inner: usize = pd[axis + 1..].iter().product();
    let per_batch: usize = indices.dims()[bd..].iter().product();
    let idx = indices.as_slice::<I>()?;
    if let Some(k) = idx
        .iter()
        .position(|v| !matches!(usize::try_from(v.to_i64()), Ok(u) if u < gather_dim))
    {
        return Err(Status::invalid_argument(format!(
            "indices{} = {} is not in [0, {gather_dim})",
            coords_string(indices.dims(), k),
            idx[k].to_i64()
        )));
    }
    if shape.num_elements() == 0 {
        return ctx.allocate(params.dtype(), shape);
    }
    let src = E::view(params)?;
    let out = E::build(ctx.allocator(), params.dtype(), shape, |o| {
        for b in 0..batch {
            let bidx = &idx[b * per_batch..(b + 1) * per_batch];
            for q in 0..outer {
                let p0 = (b * outer + q) * gather_dim;
                let o0 = (b * outer + q) * per_batch;
                for (n, v) in bidx.iter().enumerate() {
                    let s = (p0 + v.to_i64() as usize) * inner;
                    let d = (o0 + n) * inner;
                    o[d..d + inner].clone_from_slice(&src[s..s + inner]);
                }
            }
        }
        Ok(())
    })?;
    Ok(out)
}

fn make_gather(c: &OpKernelConstruction<'_>, batch_dims: i64) -> Result<Box<dyn OpKernel>> {
    let ti: DType = c.attr("Tindices")?;
    dispatch_elem!(c.attr::<DType>("Tparams")?, E => {
        dispatch_index!(ti, I => Ok(Box::new(GatherKernel::<E, I> { batch_dims, _t: PhantomData }) as Box<dyn OpKernel>))
    })
}

/// `Where`: the coordinates of the true (non-zero; NaN counts) elements, row-major,
/// for inputs of rank 1 to 8 as TensorFlow's CPU kernel.
struct WhereKernel<T>(PhantomData<fn(T)>);

impl<T: TensorType> OpKernel for WhereKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        if x.rank() == 0 || x.rank() > 8 {
            return Err(Status::invalid_argument(format!(
                "WhereOp : Unhandled input dimensions: {}",
                x.rank()
            )));
        }
        let v = x.as_slice::<T>()?;
        let nonzero = |e: &T| e.to_f64() != 0.0;
        let count = v.iter().filter(|e| nonzero(e)).count();
        let dims = x.dims();
        let r = dims.len();
        let out = ctx.allocator().build::<i64>([count, r], |o| {
            let mut coord = vec![0i64; r];
            let mut rows = o.chunks_mut(r.max(1));
            for e in v {
                if nonzero(e) {
                    if let Some(row) = rows.next() {
                        row[..r].copy_from_slice(&coord);
                    }
                }
                for k in (0..r).rev() {
                    coord[k] += 1;
                    if (coord[k] as usize) < dims[k] {
                        break;
                    }
                    coord[k] = 0;
                }
            }
        });
        ctx.set_output(0, out?)
    }
}

fn make_where(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    crate::dispatch_pod_kernel!(c.attr::<DType>("T")?, T => Ok(Box::new(WhereKernel::<T>(PhantomData)) as Box<dyn OpKernel>))
}

/// Registers Gather, GatherV2 and Where.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("Gather", |c| make_gather(c, 0)).type_constraint("Tindices", INDEX_DTYPES),
    );
    r.register(
        KernelDef::cpu("GatherV2", |c| make_gather(c, c.attr("batch_dims")?))
            .type_constraint("Tindices", &[DType::I16, DType::I32, DType::I64])
            .type_constraint("Taxis", INDEX_DTYPES),
    );
    r.register(KernelDef::cpu("Where", make_where).type_constraint("T", POD_DTYPES));
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, DType, Tensor};

    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::new(dims, (0..n as i32).collect()).unwrap()
    }

    #[test]
    fn gathers_along_axes() {
        let p = iota(&[3, 2]);
        let out = run_op(
            "Gather",
            &[],
            vec![p.clone(), Tensor::vector(&[2i32, 0, 2])],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[3, 2], vec![4, 5, 0, 1, 4, 5]).unwrap()
        );
        let out = run_op(
            "GatherV2",
            &[],
            vec![
                p.clone(),
                Tensor::new(&[2, 1], vec![1i64, 0]).unwrap(),
                Tensor::scalar(1i32),
            ],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[3, 2, 1], vec![1, 0, 3, 2, 5, 4]).unwrap()
        );
        let out = run_op(
            "GatherV2",
            &[],
            vec![p.clone(), Tensor::scalar(1i16), Tensor::scalar(-1i64)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::vector(&[1, 3, 5]));
        let s = Tensor::from_strings(&[3], vec!["a", "b", "c"]).unwrap();
        let out = run_op(
            "GatherV2",
            &[],
            vec![s, Tensor::vector(&[2i32, 2]), Tensor::scalar(0i32)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::from_strings(&[2], vec!["c", "c"]).unwrap());
        let out = run_op("Gather", &[], vec![p, Tensor::vector::<i32>(&[])]).unwrap();
        assert_eq!(out[0].dims(), &[0, 2]);
    }

    #[test]
    fn gathers_with_batch_dims() {
        let p = iota(&[2, 3]);
        let idx = Tensor::new(&[2, 2], vec![2i32, 0, 1, 1]).unwrap();
        let attrs = [("batch_dims", AttrValue::I(1))];
        let out = run_op(
            "GatherV2",
            &attrs,
            vec![p.clone(), idx.clone(), Tensor::scalar(1i32)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::new(&[2, 2], vec![2, 0, 4, 4]).unwrap());
        let attrs = [("batch_dims", AttrValue::I(-1))];
        let out = run_op(
            "GatherV2",
            &attrs,
            vec![p.clone(), idx, Tensor::scalar(1i32)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::new(&[2, 2], vec![2, 0, 4, 4]).unwrap());
    }

    #[test]
    fn gather_errors() {
        let p = iota(&[2, 2]);
        let e = run_op(
            "GatherV2",
            &[],
            vec![
                p.clone(),
                Tensor::new(&[2, 2], vec![0i32, 1, 2, 0]).unwrap(),
                Tensor::scalar(0i32),
            ],
        )
        .unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (Code::InvalidArgument, "indices[1,0] = 2 is not in [0, 2)")
        );
        let e = run_op(
            "GatherV2",
            &[],
            vec![p.clone(), Tensor::scalar(-1i64), Tensor::scalar(0i32)],
        )
        .unwrap_err();
        assert_eq!(e.message(), "indices = -1 is not in [0, 2)");
        let e = run_op(
            "Gather",
            &[],
            vec![Tensor::scalar(1.0f32), Tensor::vector(&[0i32])],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_op(
            "GatherV2",
            &[],
            vec![p.clone(), Tensor::vector(&[0i32]), Tensor::scalar(2i32)],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let attrs = [("batch_dims", AttrValue::I(1))];
        let e = run_op(
            "GatherV2",
            &attrs,
            vec![
                p,
                Tensor::new(&[3, 1], vec![0i32; 3]).unwrap(),
                Tensor::scalar(1i32),
            ],
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "params.shape[0]: 2 should be equal to indices.shape[0]: 3"
        );
    }

    #[test]
    fn where_coordinates() {
        let x = Tensor::new(&[2, 2], vec![0.0f32, f32::NAN, -0.0, 2.0]).unwrap();
        let out = run_op("Where", &[], vec![x]).unwrap();
        assert_eq!(out[0], Tensor::new(&[2, 2], vec![0i64, 1, 1, 1]).unwrap());
        let out = run_op("Where", &[], vec![Tensor::vector(&[false, true, true])]).unwrap();
        assert_eq!(out[0], Tensor::new(&[2, 1], vec![1i64, 2]).unwrap());
        let e = run_op("Where", &[], vec![Tensor::scalar(true)]).unwrap_err();
        assert_eq!(e.message(), "WhereOp : Unhandled input dimensions: 0");
        let out = run_op("Where", &[], vec![Tensor::zeros(DType::U64, [3, 0])]).unwrap();
        assert_eq!(out[0].dims(), &[0, 2]);
    }
}
