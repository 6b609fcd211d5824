//! Comparison kernels (to bool, with broadcasting): Less, LessEqual, Greater,
//! GreaterEqual on every numeric type; Equal and NotEqual also on bool and string,
//! honouring `incompatible_shape_error` (when false, shapes that do not broadcast
//! give a scalar `false` for Equal and `true` for NotEqual, as TensorFlow does).

use std::marker::PhantomData;

use graph::{DType, Result, Tensor, TensorType};

use super::binary::{binary_op, BinaryFn, BinaryToKernel};
use crate::cpu::broadcast::BCast;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

macro_rules! compare_fn {
    ($name:ident, $doc:literal, |$a:ident, $b:ident| $e:expr) => {
        #[doc = $doc]
        pub struct $name;
        impl<T: TensorType + PartialOrd> BinaryFn<T, bool> for $name {
            #[inline(always)]
            fn apply($a: T, $b: T) -> bool {
                $e
            }
        }
    };
}

compare_fn!(LessFn, "`x < y`.", |a, b| a < b);
compare_fn!(LessEqualFn, "`x <= y`.", |a, b| a <= b);
compare_fn!(GreaterFn, "`x > y`.", |a, b| a > b);
compare_fn!(GreaterEqualFn, "`x >= y`.", |a, b| a >= b);

/// `Equal` (`NOT = false`) and `NotEqual` (`NOT = true`) on a POD type.
pub struct EqualityKernel<T, const NOT: bool> {
    incompatible_shape_error: bool,
    _t: PhantomData<fn(T)>,
}

impl<T, const NOT: bool> EqualityKernel<T, NOT> {
    /// A kernel; see the module docs for `incompatible_shape_error`.
    pub fn new(incompatible_shape_error: bool) -> Self {
        EqualityKernel {
            incompatible_shape_error,
            _t: PhantomData,
        }
    }
}

/// The scalar result for shapes that do not broadcast, when errors are off.
fn incompatible_result(a: &Tensor, b: &Tensor, error: bool, not: bool) -> Option<Tensor> {
    if error || a.shape() == b.shape() || BCast::new(a.dims(), b.dims()).is_ok() {
        return None;
    }
    Some(Tensor::scalar(not))
}

impl<T: TensorType, const NOT: bool> OpKernel for EqualityKernel<T, NOT> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (a, b) = (ctx.input(0)?, ctx.input(1)?);
        let out = match incompatible_result(a, b, self.incompatible_shape_error, NOT) {
            Some(t) => t,
            None => binary_op::<T, bool>(ctx.allocator(), a, b, |x, y| (x == y) != NOT)?,
        };
        ctx.set_output(0, out)
    }
}

/// `Equal`/`NotEqual` on strings.
struct StringEqualityKernel<const NOT: bool> {
    incompatible_shape_error: bool,
}

impl<const NOT: bool> OpKernel for StringEqualityKernel<NOT> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (a, b) = (ctx.input(0)?, ctx.input(1)?);
        if let Some(t) = incompatible_result(a, b, self.incompatible_shape_error, NOT) {
            return ctx.set_output(0, t);
        }
        let (xa, xb) = (a.as_strings()?, b.as_strings()?);
        let bc = BCast::new(a.dims(), b.dims())?;
        let out = ctx
            .allocator()
            .build::<bool>(bc.output_shape().clone(), |o| {
                if a.shape() == b.shape() {
                    for ((o, x), y) in o.iter_mut().zip(xa).zip(xb) {
                        *o = (x == y) != NOT;
                    }
                } else {
                    bc.apply_indexed(o, |i, j| (xa.get(i) == xb.get(j)) != NOT);
                }
            })?;
        ctx.set_output(0, out)
    }
}

/// Registers the comparison kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(r, "Less", "T", numeric, |T| {
        BinaryToKernel::<T, bool, LessFn>::new()
    });
    register_typed!(r, "LessEqual", "T", numeric, |T| BinaryToKernel::<
        T,
        bool,
        LessEqualFn,
    >::new());
    register_typed!(r, "Greater", "T", numeric, |T| BinaryToKernel::<
        T,
        bool,
        GreaterFn,
    >::new());
    register_typed!(r, "GreaterEqual", "T", numeric, |T| BinaryToKernel::<
        T,
        bool,
        GreaterEqualFn,
    >::new());
    register_typed!(
        r,
        "Equal",
        "T",
        [
            f32,
            f64,
            graph::f16,
            graph::bf16,
            i8,
            i16,
            i32,
            i64,
            u8,
            u16,
            u32,
            u64,
            bool
        ],
        |c, T| EqualityKernel::<T, false>::new(c.attr("incompatible_shape_error")?)
    );
    register_typed!(
        r,
        "NotEqual",
        "T",
        [
            f32,
            f64,
            graph::f16,
            graph::bf16,
            i8,
            i16,
            i32,
            i64,
            u8,
            u16,
            u32,
            u64,
            bool
        ],
        |c, T| EqualityKernel::<T, true>::new(c.attr("incompatible_shape_error")?)
    );
    r.register(
        KernelDef::cpu("Equal", |c| {
            Ok(Box::new(StringEqualityKernel::<false> {
                incompatible_shape_error: c.attr("incompatible_shape_error")?,
            }))
        })
        .type_constraint("T", &[DType::String]),
    );
    r.register(
        KernelDef::cpu("NotEqual", |c| {
            Ok(Box::new(StringEqualityKernel::<true> {
                incompatible_shape_error: c.attr("incompatible_shape_error")?,
            }))
        })
        .type_constraint("T", &[DType::String]),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, Tensor};

    fn run2(op: &str, a: Tensor, b: Tensor) -> graph::Result<Tensor> {
        run_op(op, &[], vec![a, b]).map(|mut v| v.remove(0))
    }

    #[test]
    fn ordered_comparisons_broadcast() {
        let a = Tensor::new(&[2, 2], vec![1i32, 5, -3, 2]).unwrap();
        let b = Tensor::vector(&[2i32, 2]);
        let b2 = |v: [bool; 4]| Tensor::new(&[2, 2], v.to_vec()).unwrap();
        assert_eq!(
            run2("Less", a.clone(), b.clone()).unwrap(),
            b2([true, false, true, false])
        );
        assert_eq!(
            run2("LessEqual", a.clone(), b.clone()).unwrap(),
            b2([true, false, true, true])
        );
        assert_eq!(
            run2("Greater", a.clone(), b.clone()).unwrap(),
            b2([false, true, false, false])
        );
        assert_eq!(
            run2("GreaterEqual", a, b).unwrap(),
            b2([false, true, false, true])
        );
        let n = run2(
            "Less",
            Tensor::vector(&[f32::NAN, 1.0]),
            Tensor::scalar(f32::NAN),
        )
        .unwrap();
        assert_eq!(n, Tensor::vector(&[false, false]));
        assert_eq!(
            run2("Greater", Tensor::scalar(7u64), Tensor::scalar(3u64)).unwrap(),
            Tensor::scalar(true)
        );
    }

    #[test]
    fn equality_on_every_kind() {
        let nan = run2(
            "Equal",
            Tensor::vector(&[f32::NAN, 0.0]),
            Tensor::vector(&[f32::NAN, -0.0]),
        )
        .unwrap();
        assert_eq!(nan, Tensor::vector(&[false, true]));
        let ne = run2(
            "NotEqual",
            Tensor::vector(&[f32::NAN, 0.0]),
            Tensor::vector(&[f32::NAN, -0.0]),
        )
        .unwrap();
        assert_eq!(ne, Tensor::vector(&[true, false]));
        let b = run2(
            "Equal",
            Tensor::vector(&[true, false]),
            Tensor::scalar(true),
        )
        .unwrap();
        assert_eq!(b, Tensor::vector(&[true, false]));
        let s = run2(
            "Equal",
            Tensor::from_strings(&[2], vec!["a", "b"]).unwrap(),
            Tensor::string_scalar("a"),
        )
        .unwrap();
        assert_eq!(s, Tensor::vector(&[true, false]));
        let s = run2(
            "NotEqual",
            Tensor::from_strings(&[1], vec!["a"]).unwrap(),
            Tensor::from_strings(&[1], vec!["b"]).unwrap(),
        );
        assert_eq!(s.unwrap(), Tensor::vector(&[true]));
    }

    #[test]
    fn incompatible_shapes() {
        let (a, b) = (
            Tensor::vector(&[1.0f32, 2.0]),
            Tensor::vector(&[1.0f32, 2.0, 3.0]),
        );
        let e = run2("Equal", a.clone(), b.clone()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let off = [("incompatible_shape_error", AttrValue::B(false))];
        assert_eq!(
            run_op("Equal", &off, vec![a.clone(), b.clone()]).unwrap()[0],
            Tensor::scalar(false)
        );
        assert_eq!(
            run_op("NotEqual", &off, vec![a.clone(), b.clone()]).unwrap()[0],
            Tensor::scalar(true)
        );
        let s = (
            Tensor::from_strings(&[2], vec!["a", "b"]).unwrap(),
            Tensor::from_strings(&[3], vec!["a", "b", "c"]).unwrap(),
        );
        assert_eq!(
            run_op("NotEqual", &off, vec![s.0, s.1]).unwrap()[0],
            Tensor::scalar(true)
        );
        // Compatible shapes still broadcast with errors off.
        let c = run_op("Equal", &off, vec![a, Tensor::vector(&[1.0f32])]).unwrap();
        assert_eq!(c[0], Tensor::vector(&[true, false]));
    }
}
