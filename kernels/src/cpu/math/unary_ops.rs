//! Element-wise unary math kernels: Neg, Abs, Sign, Square, Round (all numeric
//! types TensorFlow registers), the float functions Exp, Expm1, Log, Log1p, Sqrt,
//! Rsqrt, Reciprocal/Inv, Tanh, Sigmoid, Sin, Cos, Floor, Ceil, Rint, Erf, and the
//! float classifiers IsNan, IsInf, IsFinite (to bool).
//!
//! Half and bfloat16 transcendental functions are computed in `f32` and rounded, as
//! Eigen does.

use super::elem::{Arith, FloatOps};
use super::unary::{UnaryFn, UnaryKernel, UnaryToKernel};
use crate::registry::KernelRegistry;

macro_rules! unary_fn {
    ($name:ident, $doc:literal, $bound:ident, |$x:ident| $e:expr) => {
        #[doc = $doc]
        pub struct $name;
        impl<T: $bound> UnaryFn<T, T> for $name {
            #[inline(always)]
            fn apply($x: T) -> T {
                $e
            }
        }
    };
}

macro_rules! classify_fn {
    ($name:ident, $doc:literal, |$x:ident| $e:expr) => {
        #[doc = $doc]
        pub struct $name;
        impl<T: FloatOps> UnaryFn<T, bool> for $name {
            #[inline(always)]
            fn apply($x: T) -> bool {
                $e
            }
        }
    };
}

unary_fn!(NegFn, "`-x` (integers wrap).", Arith, |x| x.tf_neg());
unary_fn!(AbsFn, "`|x|` (`|MIN| == MIN` for integers).", Arith, |x| x
    .tf_abs());
unary_fn!(SignFn, "-1, 0 or 1 (NaN for NaN).", Arith, |x| x.tf_sign());
unary_fn!(SquareFn, "`x * x` (integers wrap).", Arith, |x| x.tf_mul(x));
unary_fn!(
    RoundFn,
    "Rounds half to even; integers are unchanged.",
    Arith,
    |x| x.tf_round()
);
unary_fn!(ExpFn, "`e^x`.", FloatOps, |x| x.exp());
unary_fn!(Expm1Fn, "`e^x - 1`, accurate near 0.", FloatOps, |x| x
    .exp_m1());
unary_fn!(LogFn, "Natural logarithm.", FloatOps, |x| x.ln());
unary_fn!(Log1pFn, "`ln(1 + x)`, accurate near 0.", FloatOps, |x| x
    .ln_1p());
unary_fn!(SqrtFn, "Square root.", FloatOps, |x| x.sqrt());
unary_fn!(RsqrtFn, "`1 / sqrt(x)`.", FloatOps, |x| T::one() / x.sqrt());
unary_fn!(ReciprocalFn, "`1 / x`.", FloatOps, |x| T::one() / x);
unary_fn!(
    TanhFn,
    "Hyperbolic tangent, TensorFlow's bit for bit (`FloatOps::tf_tanh`).",
    FloatOps,
    |x| x.tf_tanh()
);
unary_fn!(SigmoidFn, "`1 / (1 + e^-x)`.", FloatOps, |x| T::one()
    / (T::one() + (-x).exp()));
unary_fn!(SinFn, "Sine.", FloatOps, |x| x.sin());
unary_fn!(CosFn, "Cosine.", FloatOps, |x| x.cos());
unary_fn!(
    FloorFn,
    "Largest integer not greater than `x`.",
    FloatOps,
    |x| x.floor()
);
unary_fn!(
    CeilFn,
    "Smallest integer not less than `x`.",
    FloatOps,
    |x| x.ceil()
);
unary_fn!(RintFn, "Nearest integer, half to even.", FloatOps, |x| x
    .round_even());
/// The error function, which Rust's standard library lacks (from `libm`; half and
/// bfloat16 go through `f32`).
pub trait ErfOps: FloatOps {
    /// `erf(x)`.
    fn tf_erf(self) -> Self;
}

impl ErfOps for f32 {
    fn tf_erf(self) -> Self {
        libm::erff(self)
    }
}

impl ErfOps for f64 {
    fn tf_erf(self) -> Self {
        libm::erf(self)
    }
}

impl ErfOps for graph::f16 {
    fn tf_erf(self) -> Self {
        graph::f16::from_f32(libm::erff(self.to_f32()))
    }
}

impl ErfOps for graph::bf16 {
    fn tf_erf(self) -> Self {
        graph::bf16::from_f32(libm::erff(self.to_f32()))
    }
}

unary_fn!(ErfFn, "The error function.", ErfOps, |x| x.tf_erf());
classify_fn!(IsNanFn, "True for NaN.", |x| x.is_nan());
classify_fn!(IsInfFn, "True for ±infinity.", |x| x.is_infinite());
classify_fn!(IsFiniteFn, "True for neither NaN nor infinite.", |x| x
    .is_finite());

/// Registers the unary math kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(r, "Neg", "T", signed, |T| UnaryKernel::<T, NegFn>::new());
    register_typed!(r, "Abs", "T", signed, |T| UnaryKernel::<T, AbsFn>::new());
    register_typed!(r, "Sign", "T", signed, |T| UnaryKernel::<T, SignFn>::new());
    register_typed!(r, "Square", "T", numeric, |T| {
        UnaryKernel::<T, SquareFn>::new()
    });
    register_typed!(
        r,
        "Round",
        "T",
        [f32, f64, graph::f16, graph::bf16, i32, i64],
        |T| { UnaryKernel::<T, RoundFn>::new() }
    );
    register_typed!(r, "Exp", "T", floats, |T| UnaryKernel::<T, ExpFn>::new());
    register_typed!(r, "Expm1", "T", floats, |T| UnaryKernel::<T, Expm1Fn>::new(
    ));
    register_typed!(r, "Log", "T", floats, |T| UnaryKernel::<T, LogFn>::new());
    register_typed!(r, "Log1p", "T", floats, |T| UnaryKernel::<T, Log1pFn>::new(
    ));
    register_typed!(r, "Sqrt", "T", floats, |T| UnaryKernel::<T, SqrtFn>::new());
    register_typed!(r, "Rsqrt", "T", floats, |T| UnaryKernel::<T, RsqrtFn>::new(
    ));
    for op in ["Reciprocal", "Inv"] {
        register_typed!(r, op, "T", floats, |T| UnaryKernel::<T, ReciprocalFn>::new(
        ));
    }
    register_typed!(r, "Tanh", "T", floats, |T| UnaryKernel::<T, TanhFn>::new());
    register_typed!(r, "Sigmoid", "T", floats, |T| {
        UnaryKernel::<T, SigmoidFn>::new()
    });
    register_typed!(r, "Sin", "T", floats, |T| UnaryKernel::<T, SinFn>::new());
    register_typed!(r, "Cos", "T", floats, |T| UnaryKernel::<T, CosFn>::new());
    register_typed!(r, "Floor", "T", floats, |T| UnaryKernel::<T, FloorFn>::new(
    ));
    register_typed!(r, "Ceil", "T", floats, |T| UnaryKernel::<T, CeilFn>::new());
    register_typed!(r, "Rint", "T", [f32, f64], |T| {
        UnaryKernel::<T, RintFn>::new()
    });
    register_typed!(r, "Erf", "T", floats, |T| UnaryKernel::<T, ErfFn>::new());
    register_typed!(r, "IsNan", "T", floats, |T| {
        UnaryToKernel::<T, bool, IsNanFn>::new()
    });
    register_typed!(r, "IsInf", "T", floats, |T| {
        UnaryToKernel::<T, bool, IsInfFn>::new()
    });
    register_typed!(r, "IsFinite", "T", floats, |T| UnaryToKernel::<
        T,
        bool,
        IsFiniteFn,
    >::new());
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{bf16, f16, Code, Tensor};

    fn run1(op: &str, x: Tensor) -> graph::Result<Tensor> {
        run_op(op, &[], vec![x]).map(|mut v| v.remove(0))
    }

    fn f32s(t: &Tensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }

    #[test]
    fn integer_unary_ops_wrap() {
        assert_eq!(
            run1("Neg", Tensor::vector(&[i32::MIN, -3, 4])).unwrap(),
            Tensor::vector(&[i32::MIN, 3, -4])
        );
        assert_eq!(
            run1("Abs", Tensor::vector(&[i8::MIN, -5])).unwrap(),
            Tensor::vector(&[i8::MIN, 5])
        );
        assert_eq!(
            run1("Sign", Tensor::vector(&[-5i64, 0, 7])).unwrap(),
            Tensor::vector(&[-1i64, 0, 1])
        );
        assert_eq!(
            run1("Square", Tensor::vector(&[16u8, 200])).unwrap(),
            Tensor::vector(&[0u8, 64])
        );
        assert_eq!(
            run1("Square", Tensor::scalar(65536i32)).unwrap(),
            Tensor::scalar(0i32)
        );
        assert_eq!(
            run1("Round", Tensor::vector(&[-5i32, 7])).unwrap(),
            Tensor::vector(&[-5i32, 7])
        );
    }

    #[test]
    fn float_special_values() {
        let s = f32s(
            &run1(
                "Sign",
                Tensor::vector(&[f32::NAN, -0.0, 2.0, f32::NEG_INFINITY]),
            )
            .unwrap(),
        );
        assert!(s[0].is_nan());
        assert_eq!(&s[1..], &[0.0, 1.0, -1.0]);
        let r = f32s(&run1("Rsqrt", Tensor::vector(&[0.0f32, -0.0, -1.0, 4.0])).unwrap());
        assert_eq!((r[0], r[1], r[3]), (f32::INFINITY, f32::NEG_INFINITY, 0.5));
        assert!(r[2].is_nan());
        let l = f32s(&run1("Log1p", Tensor::vector(&[1e-10f32, -1.0, -2.0])).unwrap());
        assert_eq!((l[0], l[1]), (1e-10, f32::NEG_INFINITY));
        assert!(l[2].is_nan());
        let e = f32s(&run1("Expm1", Tensor::vector(&[1e-10f32, -1000.0, 1000.0])).unwrap());
        assert_eq!(e, vec![1e-10, -1.0, f32::INFINITY]);
        let g = f32s(&run1("Sigmoid", Tensor::vector(&[-100.0f32, 0.0, 100.0])).unwrap());
        assert_eq!(g, vec![0.0, 0.5, 1.0]);
        let t = f32s(&run1("Tanh", Tensor::vector(&[-20.0f32, 0.0, f32::INFINITY])).unwrap());
        assert_eq!(t, vec![-1.0, 0.0, 1.0]);
        assert_eq!(
            f32s(&run1("Reciprocal", Tensor::vector(&[-0.0f32, 4.0])).unwrap()),
            vec![f32::NEG_INFINITY, 0.25]
        );
    }

    #[test]
    fn rounding_is_half_to_even() {
        let x = Tensor::vector(&[0.5f32, 1.5, 2.5, -0.5, -2.5, 2.6, 0.49999997]);
        let want = vec![0.0f32, 2.0, 2.0, -0.0, -2.0, 3.0, 0.0];
        assert_eq!(f32s(&run1("Round", x.clone()).unwrap()), want);
        assert_eq!(f32s(&run1("Rint", x).unwrap()), want);
        let h = run1(
            "Round",
            Tensor::vector(&[f16::from_f32(2.5), f16::from_f32(-3.5)]),
        )
        .unwrap();
        assert_eq!(
            h,
            Tensor::vector(&[f16::from_f32(2.0), f16::from_f32(-4.0)])
        );
        assert_eq!(
            f32s(&run1("Floor", Tensor::vector(&[-1.5f32, 1.5])).unwrap()),
            vec![-2.0, 1.0]
        );
        assert_eq!(
            f32s(&run1("Ceil", Tensor::vector(&[-1.5f32, 1.5])).unwrap()),
            vec![-1.0, 2.0]
        );
    }

    #[test]
    fn classifiers_and_shapes() {
        let x = Tensor::new(
            &[2, 2],
            vec![f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1.0],
        )
        .unwrap();
        assert_eq!(
            run1("IsInf", x.clone()).unwrap(),
            Tensor::new(&[2, 2], vec![true, true, false, false]).unwrap()
        );
        assert_eq!(
            run1("IsNan", x.clone()).unwrap(),
            Tensor::new(&[2, 2], vec![false, false, true, false]).unwrap()
        );
        assert_eq!(
            run1("IsFinite", x).unwrap(),
            Tensor::new(&[2, 2], vec![false, false, false, true]).unwrap()
        );
        let b = run1("IsNan", Tensor::vector(&[bf16::NAN, bf16::ONE])).unwrap();
        assert_eq!(b, Tensor::vector(&[true, false]));
        let empty = run1("Exp", Tensor::zeros(graph::DType::F64, [3, 0])).unwrap();
        assert_eq!(empty.dims(), &[3, 0]);
        assert_eq!(
            run1("Exp", Tensor::scalar(0.0f64)).unwrap(),
            Tensor::scalar(1.0f64)
        );
    }

    #[test]
    fn erf_matches_reference_values() {
        // erf(0.5) = 0.5204998778130465, erf(-1) = -0.8427007929497149 (A&S table 7.1).
        let x = Tensor::vector(&[0.0f64, 0.5, -1.0, 6.0, f64::NEG_INFINITY]);
        let y = run1("Erf", x).unwrap();
        let y = y.as_slice::<f64>().unwrap();
        let want = [0.0, 0.5204998778130465, -0.8427007929497149, 1.0, -1.0];
        for (a, e) in y.iter().zip(want) {
            assert!((a - e).abs() <= 1e-15, "{a} vs {e}");
        }
        let y = f32s(&run1("Erf", Tensor::vector(&[0.5f32, f32::NAN])).unwrap());
        assert!((y[0] - 0.520_499_9).abs() <= 1e-7);
        assert!(y[1].is_nan());
        let h = run1("Erf", Tensor::scalar(f16::from_f32(-1.0))).unwrap();
        assert_eq!(h, Tensor::scalar(f16::from_f32(-0.8427)));
    }

    #[test]
    fn kernel_type_sets_follow_tensorflow() {
        // TensorFlow registers no integer Reciprocal and no half Rint kernels.
        assert_eq!(
            run1("Reciprocal", Tensor::scalar(2i32)).unwrap_err().code(),
            Code::NotFound
        );
        assert_eq!(
            run1("Rint", Tensor::scalar(f16::ONE)).unwrap_err().code(),
            Code::NotFound
        );
        assert_eq!(
            run1("Exp", Tensor::scalar(1i32)).unwrap_err().code(),
            Code::InvalidArgument
        );
    }
}
