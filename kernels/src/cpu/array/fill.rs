//! Kernels that write one value (or two) over a whole output: Fill, ZerosLike,
//! OnesLike and OneHot.

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};
use num_traits::One;

use super::elems::{
    dispatch_elem, dispatch_index, int_scalar, int_values, make_shape, Elem, IndexElem,
    INDEX_DTYPES, POD_STRING_DTYPES,
};
use crate::cpu::types::POD_DTYPES;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// `Fill`: `value` (a scalar, or TensorFlow's legacy one-element vector) in every
/// element of a tensor of shape `dims`.
struct FillKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for FillKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dims = ctx.input(0)?;
        let value = ctx.input(1)?;
        if dims.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "dims must represent a vector, got shape {}",
                dims.shape()
            )));
        }
        if !(value.rank() == 0 || (value.rank() == 1 && value.dims()[0] == 1)) {
            return Err(Status::invalid_argument(format!(
                "value must be a scalar, got shape {}",
                value.shape()
            )));
        }
        let shape = make_shape(&int_values(dims)?)?;
        let v = E::view(value)?
            .first()
            .cloned()
            .ok_or_else(|| Status::internal("Fill value has no element"))?;
        let out = E::build(ctx.allocator(), value.dtype(), shape, |o| {
            o.fill(v);
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make_fill(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(FillKernel::<E>(PhantomData))))
}

/// `ZerosLike`: zeros (false, empty strings) of the input's dtype and shape.
struct ZerosLikeKernel;

impl OpKernel for ZerosLikeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let out = ctx.allocate(x.dtype(), x.shape().clone())?;
        ctx.set_output(0, out)
    }
}

/// `OnesLike`: ones (true) of the input's dtype and shape.
struct OnesLikeKernel<E> {
    one: E,
}

impl<E: Elem> OpKernel for OnesLikeKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let out = E::build(ctx.allocator(), x.dtype(), x.shape().clone(), |o| {
            o.fill(self.one.clone());
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make_ones_like(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    let one = match dtype {
        DType::Bool => Tensor::scalar(true),
        d => crate::dispatch_numeric!(d, T => Ok(Tensor::scalar(<T as One>::one())))?,
    };
    dispatch_elem!(dtype, E => {
        let one = E::view(&one)?.first().cloned().unwrap_or_default();
        Ok(Box::new(OnesLikeKernel::<E> { one }))
    })
}

/// `OneHot`: `on_value` at `[.., indices[..], ..]`, `off_value` elsewhere; indices
/// outside `[0, depth)` give a row of `off_value`.
struct OneHotKernel<E, I> {
    axis: i64,
    _t: PhantomData<fn(E, I)>,
}

fn scalar_value<E: Elem>(t: &Tensor, name: &str) -> Result<E> {
    if t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "{name} must be a scalar, but got: {}",
            t.shape()
        )));
    }
    E::view(t)?
        .first()
        .cloned()
        .ok_or_else(|| Status::internal(format!("{name} has no element")))
}

impl<E: Elem, I: IndexElem> OpKernel for OneHotKernel<E, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let indices = ctx.input(0)?;
        let rank = indices.rank();
        let out_rank = rank as i64 + 1;
        if !(self.axis == -1 || (0..out_rank).contains(&self.axis)) {
            return Err(Status::invalid_argument(format!(
                "Expected axis to be -1 or between [0, {out_rank}).  But received: {}",
                self.axis
            )));
        }
        let depth_t = ctx.input(1)?;
        if depth_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "depth must be a scalar, but got: {}",
                depth_t.shape()
            )));
        }
        let on: E = scalar_value(ctx.input(2)?, "on_value")?;
        let off: E = scalar_value(ctx.input(3)?, "off_value")?;
        let depth = int_scalar(depth_t)?;
        if depth < 0 {
            return Err(Status::invalid_argument(format!(
                "depth must be non-negative, got: {depth}"
            )));
        }
        let axis = if self.axis == -1 {
            rank
        } else {
            self.axis as usize
        };
        let mut dims = indices.dims().to_vec();
        dims.insert(axis, depth as usize);
        let shape = TensorShape::from(dims);
        if shape.checked_num_elements().is_err() {
            return Err(Status::invalid_argument(format!(
                "OneHot result would have shape {} + [{depth}], which exceeds 2**63 - 1 elements",
                indices.shape()
            )));
        }
        let idx = indices.as_slice::<I>()?;
        let suffix: usize = indices.dims()[axis..].iter().product();
        let depth = depth as usize;
        let out = E::build(ctx.allocator(), ctx.input(2)?.dtype(), shape, |o| {
            o.fill(off);
            if suffix == 0 {
                return Ok(());
            }
            for (k, &v) in idx.iter().enumerate() {
                let (p, s) = (k / suffix, k % suffix);
                if let Ok(j) = usize::try_from(v.to_i64()) {
                    if j < depth {
                        o[(p * depth + j) * suffix + s] = on.clone();
                    }
                }
            }
            Ok(())
        })?;
        ctx.set_output(0, out)
    }
}

fn make_one_hot(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let axis: i64 = c.attr("axis")?;
    let ti: DType = c.attr("TI")?;
    dispatch_elem!(c.attr::<DType>("T")?, E => {
        dispatch_index!(ti, I => Ok(Box::new(OneHotKernel::<E, I> { axis, _t: PhantomData }) as Box<dyn OpKernel>))
    })
}

/// Registers the fill kernels.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("Fill", make_fill).type_constraint("index_type", INDEX_DTYPES));
    r.register(
        KernelDef::cpu("ZerosLike", |_| Ok(Box::new(ZerosLikeKernel)))
            .type_constraint("T", POD_STRING_DTYPES),
    );
    r.register(KernelDef::cpu("OnesLike", make_ones_like).type_constraint("T", POD_DTYPES));
    r.register(
        KernelDef::cpu("OneHot", make_one_hot)
            .type_constraint("TI", &[DType::U8, DType::I8, DType::I32, DType::I64]),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{bf16, AttrValue, Code, DType, Tensor};

    #[test]
    fn fill_every_dtype_kind() {
        let out = run_op(
            "Fill",
            &[],
            vec![Tensor::vector(&[2i32, 3]), Tensor::scalar(1.5f64)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::new(&[2, 3], vec![1.5f64; 6]).unwrap());
        let out = run_op(
            "Fill",
            &[],
            vec![Tensor::vector(&[2i64]), Tensor::scalar(true)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::vector(&[true, true]));
        let out = run_op(
            "Fill",
            &[],
            vec![Tensor::vector(&[2i32]), Tensor::string_scalar("ab")],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::from_strings(&[2], vec!["ab", "ab"]).unwrap()
        );
        let out = run_op(
            "Fill",
            &[],
            vec![Tensor::vector::<i32>(&[]), Tensor::scalar(7i8)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::scalar(7i8));
        let out = run_op(
            "Fill",
            &[],
            vec![Tensor::vector(&[0i32, 4]), Tensor::scalar(bf16::ONE)],
        )
        .unwrap();
        assert_eq!(out[0].dims(), &[0, 4]);
        let e = run_op(
            "Fill",
            &[],
            vec![Tensor::vector(&[-1i32]), Tensor::scalar(1i32)],
        )
        .unwrap_err();
        assert_eq!(e.message(), "Dimension -1 must be >= 0");
        let e = run_op(
            "Fill",
            &[],
            vec![Tensor::scalar(2i32), Tensor::scalar(1i32)],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn zeros_and_ones_like() {
        let x = Tensor::new(&[2], vec![3u16, 4]).unwrap();
        assert_eq!(
            run_op("ZerosLike", &[], vec![x.clone()]).unwrap()[0],
            Tensor::vector(&[0u16, 0])
        );
        assert_eq!(
            run_op("OnesLike", &[], vec![x]).unwrap()[0],
            Tensor::vector(&[1u16, 1])
        );
        let b = Tensor::vector(&[false, true]);
        assert_eq!(
            run_op("OnesLike", &[], vec![b.clone()]).unwrap()[0],
            Tensor::vector(&[true, true])
        );
        assert_eq!(
            run_op("ZerosLike", &[], vec![b]).unwrap()[0],
            Tensor::vector(&[false, false])
        );
        let s = Tensor::from_strings(&[1], vec!["x"]).unwrap();
        assert_eq!(
            run_op("ZerosLike", &[], vec![s.clone()]).unwrap()[0],
            Tensor::from_strings(&[1], vec![""]).unwrap()
        );
        assert!(run_op("OnesLike", &[], vec![s]).is_err());
        let h = Tensor::vector(&[graph::f16::from_f32(2.0)]);
        assert_eq!(
            run_op("OnesLike", &[], vec![h]).unwrap()[0],
            Tensor::vector(&[graph::f16::ONE])
        );
    }

    #[test]
    fn one_hot_axes_and_out_of_range() {
        let ins = |i: Tensor| {
            vec![
                i,
                Tensor::scalar(3i32),
                Tensor::scalar(5.0f32),
                Tensor::scalar(-1.0f32),
            ]
        };
        let out = run_op("OneHot", &[], ins(Tensor::vector(&[0i64, 2, 3, -1]))).unwrap();
        let want = vec![5.0f32, -1., -1., -1., -1., 5., -1., -1., -1., -1., -1., -1.];
        assert_eq!(out[0], Tensor::new(&[4, 3], want).unwrap());
        let out = run_op(
            "OneHot",
            &[("axis", AttrValue::I(0))],
            ins(Tensor::vector(&[1u8, 0])),
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[3, 2], vec![-1.0f32, 5., 5., -1., -1., -1.]).unwrap()
        );
        let out = run_op("OneHot", &[], ins(Tensor::scalar(1i32))).unwrap();
        assert_eq!(out[0], Tensor::vector(&[-1.0f32, 5.0, -1.0]));
        let strs = vec![
            Tensor::vector(&[1i32]),
            Tensor::scalar(2i32),
            Tensor::string_scalar("on"),
            Tensor::string_scalar("off"),
        ];
        let out = run_op("OneHot", &[], strs).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_strings(&[1, 2], vec!["off", "on"]).unwrap()
        );
        let e = run_op(
            "OneHot",
            &[("axis", AttrValue::I(2))],
            ins(Tensor::vector(&[1i32])),
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Expected axis to be -1 or between [0, 2).  But received: 2"
        );
        let bad = vec![
            Tensor::vector(&[1i32]),
            Tensor::scalar(-1i32),
            Tensor::scalar(1.0f32),
            Tensor::scalar(0.0f32),
        ];
        assert_eq!(
            run_op("OneHot", &[], bad).unwrap_err().message(),
            "depth must be non-negative, got: -1"
        );
        let out = run_op("OneHot", &[], ins(Tensor::zeros(DType::I32, [0, 2]))).unwrap();
        assert_eq!(out[0].dims(), &[0, 2, 3]);
    }
}
