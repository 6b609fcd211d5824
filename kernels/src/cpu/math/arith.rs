//! Arithmetic binary kernels: Add (numbers and strings), AddV2, Sub, Mul, Div,
//! RealDiv, DivNoNan, FloorDiv, FloorMod, TruncateDiv, TruncateMod, Mod, Maximum,
//! Minimum, Pow, SquaredDifference and Atan2. Integer division and modulo by zero and
//! negative integer exponents are `InvalidArgument`, as in TensorFlow.

use bytes::{Bytes, BytesMut};
use graph::{DType, Result};

use super::binary::{BinaryFn, BinaryKernel};
use super::elem::{Arith, FloatOps};
use crate::cpu::broadcast::BCast;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

macro_rules! arith_fn {
    ($name:ident, $doc:literal, |$a:ident, $b:ident| $e:expr) => {
        #[doc = $doc]
        pub struct $name;
        impl<T: Arith> BinaryFn<T, T> for $name {
            #[inline(always)]
            fn apply($a: T, $b: T) -> T {
                $e
            }
        }
    };
    ($name:ident, $doc:literal, check = $check:ident, |$a:ident, $b:ident| $e:expr) => {
        #[doc = $doc]
        pub struct $name;
        impl<T: Arith> BinaryFn<T, T> for $name {
            const CHECKS: bool = true;
            #[inline(always)]
            fn apply($a: T, $b: T) -> T {
                $e
            }
            fn check(b: &[T]) -> Result<()> {
                T::$check(b)
            }
        }
    };
}

arith_fn!(
    AddFn,
    "`x + y` (integers wrap, as in TensorFlow).",
    |a, b| a.tf_add(b)
);
arith_fn!(SubFn, "`x - y`.", |a, b| a.tf_sub(b));
arith_fn!(MulFn, "`x * y`.", |a, b| a.tf_mul(b));
arith_fn!(
    DivFn,
    "`x / y`, truncating for integers.",
    check = check_divisor,
    |a, b| a.tf_div(b)
);
arith_fn!(
    DivNoNanFn,
    "`x / y`, or 0 where `y` is 0.",
    |a, b| if b.is_zero() { T::zero() } else { a.tf_div(b) }
);
arith_fn!(
    FloorDivFn,
    "`floor(x / y)`.",
    check = check_divisor,
    |a, b| a.tf_floor_div(b)
);
arith_fn!(
    FloorModFn,
    "`x - floor(x / y) * y` (Python's `%`).",
    check = check_divisor,
    |a, b| a.tf_floor_mod(b)
);
arith_fn!(
    TruncateDivFn,
    "`trunc(x / y)`.",
    check = check_divisor,
    |a, b| a.tf_truncate_div(b)
);
arith_fn!(
    TruncateModFn,
    "The remainder of truncating division (C's `%`, `fmod`).",
    check = check_divisor,
    |a, b| a.tf_truncate_mod(b)
);
arith_fn!(MaximumFn, "`max(x, y)`, NaN if either is NaN.", |a, b| a
    .tf_max(b));
arith_fn!(MinimumFn, "`min(x, y)`, NaN if either is NaN.", |a, b| a
    .tf_min(b));
arith_fn!(PowFn, "`x ** y`.", check = check_exponent, |a, b| a
    .tf_pow(b));
arith_fn!(SquaredDifferenceFn, "`(x - y) * (x - y)`.", |a, b| {
    let d = a.tf_sub(b);
    d.tf_mul(d)
});

/// `Atan2(y, x)`: the angle of the point `(x, y)`, in `[-pi, pi]` (C's `atan2`;
/// half and bfloat16 through `f32`).
pub struct Atan2Fn;

impl<T: FloatOps> BinaryFn<T, T> for Atan2Fn {
    #[inline(always)]
    fn apply(y: T, x: T) -> T {
        num_traits::Float::atan2(y, x)
    }
}

/// `Add` on strings: concatenation, with broadcasting.
struct StringAddKernel;

fn concat(a: &Bytes, b: &Bytes) -> Bytes {
    let mut s = BytesMut::with_capacity(a.len() + b.len());
    s.extend_from_slice(a);
    s.extend_from_slice(b);
    s.freeze()
}

impl OpKernel for StringAddKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (a, b) = (ctx.input(0)?, ctx.input(1)?);
        let (xa, xb) = (a.as_strings()?, b.as_strings()?);
        let bc = BCast::new(a.dims(), b.dims())?;
        let mut out = ctx
            .allocator()
            .zeros(DType::String, bc.output_shape().clone())?;
        let dst = out.as_strings_mut()?;
        if a.shape() == b.shape() {
            for ((o, x), y) in dst.iter_mut().zip(xa).zip(xb) {
                *o = concat(x, y);
            }
        } else {
            bc.apply_indexed(dst, |i, j| match (xa.get(i), xb.get(j)) {
                (Some(x), Some(y)) => concat(x, y),
                _ => Bytes::new(),
            });
        }
        ctx.set_output(0, out)
    }
}

/// Registers the arithmetic kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(
        r,
        "Add",
        "T",
        [f32, f64, graph::f16, graph::bf16, i8, i16, i32, i64, u8],
        |T| { BinaryKernel::<T, AddFn>::new() }
    );
    r.register(
        KernelDef::cpu("Add", |_| Ok(Box::new(StringAddKernel)))
            .type_constraint("T", &[DType::String]),
    );
    register_typed!(r, "AddV2", "T", numeric, |T| BinaryKernel::<T, AddFn>::new(
    ));
    register_typed!(r, "Sub", "T", numeric, |T| BinaryKernel::<T, SubFn>::new());
    register_typed!(r, "Mul", "T", numeric, |T| BinaryKernel::<T, MulFn>::new());
    register_typed!(r, "Div", "T", numeric, |T| BinaryKernel::<T, DivFn>::new());
    register_typed!(
        r,
        "RealDiv",
        "T",
        floats,
        |T| BinaryKernel::<T, DivFn>::new()
    );
    register_typed!(r, "DivNoNan", "T", floats, |T| {
        BinaryKernel::<T, DivNoNanFn>::new()
    });
    register_typed!(r, "FloorDiv", "T", numeric, |T| {
        BinaryKernel::<T, FloorDivFn>::new()
    });
    register_typed!(r, "FloorMod", "T", numeric, |T| {
        BinaryKernel::<T, FloorModFn>::new()
    });
    register_typed!(r, "TruncateDiv", "T", numeric, |T| BinaryKernel::<
        T,
        TruncateDivFn,
    >::new());
    for op in ["TruncateMod", "Mod"] {
        register_typed!(r, op, "T", [f32, f64, i32, i64], |T| BinaryKernel::<
            T,
            TruncateModFn,
        >::new());
    }
    register_typed!(r, "Maximum", "T", numeric, |T| {
        BinaryKernel::<T, MaximumFn>::new()
    });
    register_typed!(r, "Minimum", "T", numeric, |T| {
        BinaryKernel::<T, MinimumFn>::new()
    });
    register_typed!(r, "Pow", "T", signed, |T| BinaryKernel::<T, PowFn>::new());
    register_typed!(
        r,
        "Atan2",
        "T",
        floats,
        |T| BinaryKernel::<T, Atan2Fn>::new()
    );
    register_typed!(
        r,
        "SquaredDifference",
        "T",
        [f32, f64, graph::f16, graph::bf16, i32, i64],
        |T| { BinaryKernel::<T, SquaredDifferenceFn>::new() }
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::{run_node, run_op};
    use graph::{Code, DType, NodeDef, Tensor};

    fn run2(op: &str, a: Tensor, b: Tensor) -> graph::Result<Tensor> {
        run_op(op, &[], vec![a, b]).map(|mut v| v.remove(0))
    }

    #[test]
    fn atan2_quadrants_and_signed_zeros() {
        use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
        let y = Tensor::vector(&[1.0f64, 1.0, -1.0, 0.0, -0.0, 1.0]);
        let x = Tensor::vector(&[1.0f64, -1.0, -1.0, -1.0, -1.0, 0.0]);
        let z = run2("Atan2", y, x).unwrap();
        let want = [
            FRAC_PI_4,
            3.0 * FRAC_PI_4,
            -3.0 * FRAC_PI_4,
            PI,
            -PI,
            FRAC_PI_2,
        ];
        assert_eq!(z.as_slice::<f64>().unwrap(), &want);
        // Broadcasting, and no integer kernel (as in TensorFlow).
        let z = run2(
            "Atan2",
            Tensor::vector(&[0.0f32, 2.0]),
            Tensor::scalar(2.0f32),
        )
        .unwrap();
        assert_eq!(z, Tensor::vector(&[0.0f32, std::f32::consts::FRAC_PI_4]));
        assert!(run2("Atan2", Tensor::scalar(1i32), Tensor::scalar(1i32)).is_err());
    }

    #[test]
    fn add_sub_mul_broadcast() {
        let a = Tensor::new(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let b = Tensor::vector(&[10.0f32, 20.0]);
        assert_eq!(
            run2("AddV2", a.clone(), b.clone()).unwrap(),
            Tensor::new(&[2, 2], vec![11.0f32, 22.0, 13.0, 24.0]).unwrap()
        );
        assert_eq!(
            run2("Sub", b.clone(), a.clone()).unwrap(),
            Tensor::new(&[2, 2], vec![9.0f32, 18.0, 7.0, 16.0]).unwrap()
        );
        assert_eq!(
            run2("Mul", Tensor::scalar(3i64), Tensor::vector(&[1i64, -2])).unwrap(),
            Tensor::vector(&[3i64, -6])
        );
        let col = Tensor::new(&[2, 1], vec![1i32, 2]).unwrap();
        let row = Tensor::new(&[1, 3], vec![10i32, 20, 30]).unwrap();
        assert_eq!(
            run2("Add", col, row).unwrap(),
            Tensor::new(&[2, 3], vec![11i32, 21, 31, 12, 22, 32]).unwrap()
        );
    }

    #[test]
    fn empty_and_scalar_shapes() {
        let e = Tensor::zeros(graph::DType::F32, [0, 3]);
        assert_eq!(
            run2("Mul", e.clone(), Tensor::vector(&[1.0f32, 2.0, 3.0]))
                .unwrap()
                .dims(),
            &[0, 3]
        );
        assert_eq!(
            run2("Sub", Tensor::scalar(5u8), Tensor::scalar(7u8)).unwrap(),
            Tensor::scalar(254u8)
        );
        // A zero divisor is no error when nothing is computed.
        let z = run2(
            "FloorDiv",
            Tensor::zeros(graph::DType::I32, [0]),
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(z.dims(), &[0]);
    }

    #[test]
    fn integers_wrap_like_tensorflow() {
        assert_eq!(
            run2("AddV2", Tensor::scalar(i32::MAX), Tensor::scalar(1i32)).unwrap(),
            Tensor::scalar(i32::MIN)
        );
        assert_eq!(
            run2("Mul", Tensor::scalar(200u8), Tensor::scalar(2u8)).unwrap(),
            Tensor::scalar(144u8)
        );
        assert_eq!(
            run2("Sub", Tensor::scalar(0u64), Tensor::scalar(1u64)).unwrap(),
            Tensor::scalar(u64::MAX)
        );
        assert_eq!(
            run2("Div", Tensor::scalar(i32::MIN), Tensor::scalar(-1i32)).unwrap(),
            Tensor::scalar(i32::MIN)
        );
        assert_eq!(
            run2("Pow", Tensor::scalar(2i32), Tensor::scalar(31i32)).unwrap(),
            Tensor::scalar(i32::MIN)
        );
        let d = run2(
            "SquaredDifference",
            Tensor::scalar(i32::MAX),
            Tensor::scalar(i32::MIN),
        )
        .unwrap();
        assert_eq!(d, Tensor::scalar(1i32));
    }

    #[test]
    fn division_and_modulo_semantics() {
        let x = Tensor::vector(&[-7i32, 7, -7, 7]);
        let y = Tensor::vector(&[2i32, -2, -2, 2]);
        assert_eq!(
            run2("Div", x.clone(), y.clone()).unwrap(),
            Tensor::vector(&[-3i32, -3, 3, 3])
        );
        assert_eq!(
            run2("FloorDiv", x.clone(), y.clone()).unwrap(),
            Tensor::vector(&[-4i32, -4, 3, 3])
        );
        assert_eq!(
            run2("FloorMod", x.clone(), y.clone()).unwrap(),
            Tensor::vector(&[1i32, -1, -1, 1])
        );
        assert_eq!(
            run2("TruncateMod", x.clone(), y.clone()).unwrap(),
            Tensor::vector(&[-1i32, 1, -1, 1])
        );
        assert_eq!(
            run2("Mod", x, y).unwrap(),
            Tensor::vector(&[-1i32, 1, -1, 1])
        );
        let f = run2(
            "FloorMod",
            Tensor::vector(&[-7.0f32, 1.0]),
            Tensor::vector(&[2.0f32, 0.0]),
        )
        .unwrap();
        let v = f.as_slice::<f32>().unwrap();
        assert_eq!(v[0], 1.0);
        assert!(v[1].is_nan());
        let n = run2(
            "DivNoNan",
            Tensor::vector(&[1.0f64, f64::NAN, 3.0]),
            Tensor::vector(&[0.0f64, 0.0, 2.0]),
        )
        .unwrap();
        assert_eq!(n, Tensor::vector(&[0.0f64, 0.0, 1.5]));
        let r = run2(
            "RealDiv",
            Tensor::vector(&[1.0f32, -1.0]),
            Tensor::scalar(0.0f32),
        )
        .unwrap();
        assert_eq!(r, Tensor::vector(&[f32::INFINITY, f32::NEG_INFINITY]));
    }

    #[test]
    fn integer_errors() {
        for op in [
            "Div",
            "FloorDiv",
            "FloorMod",
            "TruncateDiv",
            "TruncateMod",
            "Mod",
        ] {
            let e = run2(op, Tensor::vector(&[1i32, 2]), Tensor::vector(&[1i32, 0])).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{op}");
            assert!(
                e.message().contains("Integer division by zero"),
                "{op}: {e}"
            );
        }
        let e = run2("FloorDiv", Tensor::vector(&[1u8, 2]), Tensor::scalar(0u8)).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run2(
            "Pow",
            Tensor::vector(&[1i64, 2]),
            Tensor::vector(&[-1i64, 2]),
        )
        .unwrap_err();
        assert!(
            e.message()
                .contains("Integers to negative integer powers are not allowed"),
            "{e}"
        );
        // The kernel reports incompatible shapes before a zero divisor.
        let node = NodeDef::new("d", "Div")
            .with_input("x")
            .with_input("y")
            .with_attr("T", DType::I32);
        let e = run_node(
            node,
            vec![Tensor::vector(&[1i32, 2]), Tensor::vector(&[0i32, 1, 2])],
        )
        .unwrap_err();
        assert!(
            e.message().contains("Incompatible shapes: [2] vs. [3]"),
            "{e}"
        );
    }

    #[test]
    fn maximum_minimum_propagate_nan() {
        let a = Tensor::vector(&[f32::NAN, 1.0, 3.0]);
        let b = Tensor::vector(&[1.0f32, f32::NAN, 2.0]);
        let mx = run2("Maximum", a.clone(), b.clone()).unwrap();
        let v = mx.as_slice::<f32>().unwrap();
        assert!(v[0].is_nan() && v[1].is_nan() && v[2] == 3.0);
        let mn = run2("Minimum", a, b).unwrap();
        assert_eq!(mn.as_slice::<f32>().unwrap()[2], 2.0);
        assert_eq!(
            run2("Maximum", Tensor::scalar(-3i8), Tensor::vector(&[-5i8, 4])).unwrap(),
            Tensor::vector(&[-3i8, 4])
        );
    }

    #[test]
    fn string_add_concatenates() {
        let a = Tensor::from_strings(&[2], vec!["a", "b"]).unwrap();
        let out = run2("Add", a.clone(), Tensor::string_scalar("c")).unwrap();
        assert_eq!(out, Tensor::from_strings(&[2], vec!["ac", "bc"]).unwrap());
        let out = run2("Add", a.clone(), a).unwrap();
        assert_eq!(out, Tensor::from_strings(&[2], vec!["aa", "bb"]).unwrap());
    }

    #[test]
    fn kernel_type_sets_follow_tensorflow() {
        // TensorFlow has no integer RealDiv kernel and no uint16 Add (v1) kernel.
        let e = run2("RealDiv", Tensor::scalar(1i32), Tensor::scalar(1i32)).unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        let e = run2("Add", Tensor::scalar(1u16), Tensor::scalar(1u16)).unwrap_err();
        assert_eq!(
            e.code(),
            Code::InvalidArgument,
            "uint16 is outside Add's type set"
        );
        assert!(run2("AddV2", Tensor::scalar(1u16), Tensor::scalar(1u16)).is_ok());
    }
}
