//! Element semantics of the math kernels: [`Arith`] gives every numeric type
//! TensorFlow's CPU behaviour (two's-complement wrapping integers, Python-style
//! floor division, NaN-propagating max/min, …) and [`FloatOps`] adds what only
//! floats have. Half and bfloat16 compute each step in `f32` and round the result,
//! as Eigen's `half`/`bfloat16` operators do.
//!
//! Integer division and modulo return 0 for a zero divisor, and integer powers 0
//! for a negative exponent: the kernels reject those inputs first
//! ([`Arith::check_divisor`], [`Arith::check_exponent`]), so these values are never
//! seen, but no element function can panic.

use graph::{bf16, f16, Result, Status};

use crate::cpu::types::{FloatType, Numeric};

/// TensorFlow's element-wise arithmetic for one numeric type.
pub trait Arith: Numeric {
    /// `x + y` (wrapping for integers).
    fn tf_add(self, y: Self) -> Self;
    /// `x - y` (wrapping for integers).
    fn tf_sub(self, y: Self) -> Self;
    /// `x * y` (wrapping for integers).
    fn tf_mul(self, y: Self) -> Self;
    /// `-x` (wrapping for integers).
    fn tf_neg(self) -> Self;
    /// `|x|` (`|MIN| == MIN` for integers).
    fn tf_abs(self) -> Self;
    /// -1, 0 or 1 (NaN for NaN).
    fn tf_sign(self) -> Self;
    /// `Div`: true division for floats, truncating for integers.
    fn tf_div(self, y: Self) -> Self;
    /// `TruncateDiv`: the quotient rounded toward zero.
    fn tf_truncate_div(self, y: Self) -> Self;
    /// `TruncateMod`/`Mod`: the remainder of truncating division (C's `%`, `fmod`).
    fn tf_truncate_mod(self, y: Self) -> Self;
    /// `FloorDiv`: the quotient rounded toward negative infinity.
    fn tf_floor_div(self, y: Self) -> Self;
    /// `FloorMod`: the remainder with the divisor's sign (Python's `%`).
    fn tf_floor_mod(self, y: Self) -> Self;
    /// `Maximum` (NaN if either is NaN).
    fn tf_max(self, y: Self) -> Self;
    /// `Minimum` (NaN if either is NaN).
    fn tf_min(self, y: Self) -> Self;
    /// `Pow` (`powf` for floats, wrapping repeated squaring for integers).
    fn tf_pow(self, y: Self) -> Self;
    /// `Round`: half to even (integers unchanged).
    fn tf_round(self) -> Self;
    /// `InvalidArgument` when an integer divisor is zero.
    fn check_divisor(y: &[Self]) -> Result<()>;
    /// `InvalidArgument` when an integer exponent is negative.
    fn check_exponent(y: &[Self]) -> Result<()>;
}

/// Float-only element functions beyond `num_traits::Float`.
pub trait FloatOps: FloatType + Arith {
    /// Rounds half to even (`rint` in the default rounding mode).
    fn round_even(self) -> Self;
    /// The hyperbolic tangent as TensorFlow's CPU kernel computes it, bit for bit:
    /// see [`tanh_f32`] and [`tanh_f64`]; half types through `f32`.
    fn tf_tanh(self) -> Self;
}

/// A polynomial in `x` by Horner's rule, highest coefficient first, one rounded
/// multiply and one rounded add per step (no fused multiply-add).
macro_rules! horner {
    ($x:expr; $first:expr $(, $c:expr)*) => {{
        let x = $x;
        let p = $first;
        $(let p = p * x + $c;)*
        p
    }};
}

/// `Tanh` of `float32` as TensorFlow 2.21's CPU kernel (Eigen's fast-math
/// `tanh`) computes it: `x` clamped to ±7.9073896 (the smallest input the
/// approximation maps to exactly ±1), then the odd/even rational minimax
/// approximation of degree 9/8, `x·P(x²) / Q(x²)`, evaluated with separate
/// multiplies and adds as TensorFlow's build (without FMA) does; NaN stays NaN.
/// Equal to TensorFlow's output on every input tested (`gen_math.py`'s dense
/// sweep), where the correctly rounded `tanh` differs in about half of them. A
/// loop over a slice of it vectorises: no branches but the clamp's selects.
#[inline(always)]
pub fn tanh_f32(a: f32) -> f32 {
    const CLAMP: f32 = 7.907_389_6;
    // NaN stays NaN.
    let x = a.clamp(-CLAMP, CLAMP);
    let x2 = x * x;
    let p = horner!(x2; 1.394_553_6e-8f32, 2.102_733_6e-5, 0.003_520_756_7, 0.134_021_61);
    let q = horner!(x2; 8.015_777e-7f32, 0.000_332_695_14, 0.025_972_545, 0.467_354_83, 1.0);
    (x2 * x * p + x) / q
}

/// `Tanh` of `float64` as TensorFlow 2.21's CPU kernel computes it: `x`
/// clamped to ±17.714196154005176, then the odd/even rational minimax
/// approximation of degree 19/18, evaluated as [`tanh_f32`]'s is.
#[inline(always)]
pub fn tanh_f64(a: f64) -> f64 {
    const CLAMP: f64 = 17.714_196_154_005_176;
    // NaN stays NaN.
    let x = a.clamp(-CLAMP, CLAMP);
    let x2 = x * x;
    let p = horner!(x2;
        2.615_800_786_048_223e-23f64, 7.653_486_226_874_932e-19, 3.130_948_823_138_668e-15,
        4.230_391_814_820_918e-12, 2.461_837_913_129_367_6e-9, 6.864_436_768_249_707e-7,
        9.383_908_767_426_888e-5, 0.005_980_971_172_444_116, 0.151_847_196_402_843_22);
    let q = horner!(x2;
        6.463_747_022_670_968e-21f64, 5.782_506_856_739_004e-17, 1.293_019_623_712_688e-13,
        1.123_643_448_069_622e-10, 4.492_975_677_839_634e-8, 8.785_185_266_237_659e-6,
        0.000_829_516_119_271_623_2, 0.034_374_481_084_504_03, 0.485_180_529_736_176_04, 1.0);
    (x2 * x * p + x) / q
}

fn division_by_zero() -> Status {
    Status::invalid_argument("Integer division by zero")
}

/// Integer power by repeated squaring, wrapping like TensorFlow's.
macro_rules! int_pow {
    ($t:ty, $x:expr, $e:expr) => {{
        let (mut base, mut e, mut acc): ($t, u64, $t) = ($x, $e, 1);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc.wrapping_mul(base);
            }
            e >>= 1;
            base = base.wrapping_mul(base);
        }
        acc
    }};
}

macro_rules! int_common {
    ($t:ty) => {
        #[inline(always)]
        fn tf_add(self, y: Self) -> Self {
            self.wrapping_add(y)
        }
        #[inline(always)]
        fn tf_sub(self, y: Self) -> Self {
            self.wrapping_sub(y)
        }
        #[inline(always)]
        fn tf_mul(self, y: Self) -> Self {
            self.wrapping_mul(y)
        }
        #[inline(always)]
        fn tf_neg(self) -> Self {
            self.wrapping_neg()
        }
        #[inline(always)]
        fn tf_div(self, y: Self) -> Self {
            if y == 0 {
                0
            } else {
                self.wrapping_div(y)
            }
        }
        #[inline(always)]
        fn tf_truncate_div(self, y: Self) -> Self {
            self.tf_div(y)
        }
        #[inline(always)]
        fn tf_truncate_mod(self, y: Self) -> Self {
            if y == 0 {
                0
            } else {
                self.wrapping_rem(y)
            }
        }
        #[inline(always)]
        fn tf_max(self, y: Self) -> Self {
            if self < y {
                y
            } else {
                self
            }
        }
        #[inline(always)]
        fn tf_min(self, y: Self) -> Self {
            if y < self {
                y
            } else {
                self
            }
        }
        #[inline(always)]
        fn tf_round(self) -> Self {
            self
        }
        fn check_divisor(y: &[Self]) -> Result<()> {
            if y.contains(&0) {
                return Err(division_by_zero());
            }
            Ok(())
        }
    };
}

macro_rules! signed_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            int_common!($t);
            #[inline(always)]
            fn tf_abs(self) -> Self {
                self.wrapping_abs()
            }
            #[inline(always)]
            fn tf_sign(self) -> Self {
                self.signum()
            }
            #[inline(always)]
            fn tf_floor_div(self, y: Self) -> Self {
                if y == 0 {
                    return 0;
                }
                let q = self.wrapping_div(y);
                let r = self.wrapping_rem(y);
                if r != 0 && ((r < 0) != (y < 0)) {
                    q.wrapping_sub(1)
                } else {
                    q
                }
            }
            #[inline(always)]
            fn tf_floor_mod(self, y: Self) -> Self {
                if y == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(y);
                if r != 0 && ((r < 0) != (y < 0)) {
                    r.wrapping_add(y)
                } else {
                    r
                }
            }
            #[inline(always)]
            fn tf_pow(self, y: Self) -> Self {
                if y < 0 {
                    return 0;
                }
                int_pow!($t, self, y as u64)
            }
            fn check_exponent(y: &[Self]) -> Result<()> {
                if y.iter().any(|&v| v < 0) {
                    return Err(Status::invalid_argument(
                        "Integers to negative integer powers are not allowed",
                    ));
                }
                Ok(())
            }
        }
    )*};
}

macro_rules! unsigned_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            int_common!($t);
            #[inline(always)]
            fn tf_abs(self) -> Self {
                self
            }
            #[inline(always)]
            fn tf_sign(self) -> Self {
                (self != 0) as $t
            }
            #[inline(always)]
            fn tf_floor_div(self, y: Self) -> Self {
                self.tf_div(y)
            }
            #[inline(always)]
            fn tf_floor_mod(self, y: Self) -> Self {
                self.tf_truncate_mod(y)
            }
            #[inline(always)]
            fn tf_pow(self, y: Self) -> Self {
                int_pow!($t, self, y as u64)
            }
            fn check_exponent(_y: &[Self]) -> Result<()> {
                Ok(())
            }
        }
    )*};
}

signed_arith!(i8, i16, i32, i64);
unsigned_arith!(u8, u16, u32, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn tf_add(self, y: Self) -> Self {
                self + y
            }
            #[inline(always)]
            fn tf_sub(self, y: Self) -> Self {
                self - y
            }
            #[inline(always)]
            fn tf_mul(self, y: Self) -> Self {
                self * y
            }
            #[inline(always)]
            fn tf_neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn tf_abs(self) -> Self {
                num_traits::Float::abs(self)
            }
            #[inline(always)]
            fn tf_sign(self) -> Self {
                let zero = <$t as num_traits::Zero>::zero();
                let one = <$t as num_traits::One>::one();
                if self > zero {
                    one
                } else if self < zero {
                    -one
                } else if self == zero {
                    zero
                } else {
                    self
                }
            }
            #[inline(always)]
            fn tf_div(self, y: Self) -> Self {
                self / y
            }
            #[inline(always)]
            fn tf_truncate_div(self, y: Self) -> Self {
                num_traits::Float::trunc(self / y)
            }
            #[inline(always)]
            fn tf_truncate_mod(self, y: Self) -> Self {
                self % y
            }
            #[inline(always)]
            fn tf_floor_div(self, y: Self) -> Self {
                num_traits::Float::floor(self / y)
            }
            #[inline(always)]
            fn tf_floor_mod(self, y: Self) -> Self {
                let zero = <$t as num_traits::Zero>::zero();
                let m = self % y;
                if m != zero && ((y < zero) != (m < zero)) {
                    m + y
                } else {
                    m
                }
            }
            #[inline(always)]
            fn tf_max(self, y: Self) -> Self {
                if num_traits::Float::is_nan(self) {
                    self
                } else if num_traits::Float::is_nan(y) || self < y {
                    y
                } else {
                    self
                }
            }
            #[inline(always)]
            fn tf_min(self, y: Self) -> Self {
                if num_traits::Float::is_nan(self) {
                    self
                } else if num_traits::Float::is_nan(y) || y < self {
                    y
                } else {
                    self
                }
            }
            #[inline(always)]
            fn tf_pow(self, y: Self) -> Self {
                num_traits::Float::powf(self, y)
            }
            #[inline(always)]
            fn tf_round(self) -> Self {
                FloatOps::round_even(self)
            }
            fn check_divisor(_y: &[Self]) -> Result<()> {
                Ok(())
            }
            fn check_exponent(_y: &[Self]) -> Result<()> {
                Ok(())
            }
        }
    )*};
}

float_arith!(f32, f64, f16, bf16);

impl FloatOps for f32 {
    #[inline(always)]
    fn round_even(self) -> Self {
        self.round_ties_even()
    }
    #[inline(always)]
    fn tf_tanh(self) -> Self {
        tanh_f32(self)
    }
}

impl FloatOps for f64 {
    #[inline(always)]
    fn round_even(self) -> Self {
        self.round_ties_even()
    }
    #[inline(always)]
    fn tf_tanh(self) -> Self {
        tanh_f64(self)
    }
}

impl FloatOps for f16 {
    #[inline(always)]
    fn round_even(self) -> Self {
        f16::from_f32(self.to_f32().round_ties_even())
    }
    #[inline(always)]
    fn tf_tanh(self) -> Self {
        f16::from_f32(tanh_f32(self.to_f32()))
    }
}

impl FloatOps for bf16 {
    #[inline(always)]
    fn round_even(self) -> Self {
        bf16::from_f32(self.to_f32().round_ties_even())
    }
    #[inline(always)]
    fn tf_tanh(self) -> Self {
        bf16::from_f32(tanh_f32(self.to_f32()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_follows_tensorflow() {
        // (x, y, truncate div, truncate mod, floor div, floor mod)
        let cases = [
            (-7i32, 2, -3, -1, -4, 1),
            (7, -2, -3, 1, -4, -1),
            (-7, -2, 3, -1, 3, -1),
            (7, 2, 3, 1, 3, 1),
            (0, -3, 0, 0, 0, 0),
            (i32::MIN, -1, i32::MIN, 0, i32::MIN, 0),
            (i32::MIN, 3, -715827882, -2, -715827883, 1),
        ];
        for (x, y, td, tm, fd, fm) in cases {
            assert_eq!(x.tf_truncate_div(y), td, "{x} / {y}");
            assert_eq!(x.tf_div(y), td, "{x} / {y}");
            assert_eq!(x.tf_truncate_mod(y), tm, "{x} % {y}");
            assert_eq!(x.tf_floor_div(y), fd, "{x} // {y}");
            assert_eq!(x.tf_floor_mod(y), fm, "{x} mod {y}");
        }
        assert_eq!((-128i8).tf_floor_div(3), -43);
        assert_eq!(7u8.tf_floor_div(2), 3);
        assert_eq!(1i32.tf_div(0), 0, "never panics");
        assert!(i32::check_divisor(&[1, 0]).is_err());
        assert!(f32::check_divisor(&[0.0]).is_ok());
    }

    #[test]
    fn float_division_and_modulo() {
        assert_eq!((-7.0f32).tf_floor_mod(2.0), 1.0);
        assert_eq!(7.5f32.tf_floor_mod(-2.0), -0.5);
        assert_eq!(5.0f32.tf_floor_mod(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert!(1.0f32.tf_floor_mod(0.0).is_nan());
        assert_eq!((-7.5f64).tf_truncate_mod(2.0), -1.5);
        assert_eq!((-7.0f64).tf_truncate_div(2.0), -3.0);
        assert_eq!((-7.0f64).tf_floor_div(2.0), -4.0);
        assert_eq!(
            f16::from_f32(-7.0).tf_floor_mod(f16::from_f32(2.0)),
            f16::from_f32(1.0)
        );
    }

    #[test]
    fn max_min_sign_round() {
        assert!(f32::NAN.tf_max(1.0).is_nan());
        assert!(1.0f32.tf_max(f32::NAN).is_nan());
        assert!(1.0f32.tf_min(f32::NAN).is_nan());
        assert!((-0.0f32).tf_max(0.0).is_sign_negative(), "ties keep x");
        assert!(f32::NAN.tf_sign().is_nan());
        assert!((-0.0f32).tf_sign().is_sign_positive());
        assert_eq!((-3.5f32).tf_sign(), -1.0);
        assert_eq!(i32::MIN.tf_abs(), i32::MIN);
        assert_eq!(i8::MIN.tf_neg(), i8::MIN);
        assert_eq!(0u8.tf_sign(), 0);
        let r: Vec<f32> = [0.5f32, 1.5, 2.5, -0.5, -2.5, 2.6]
            .iter()
            .map(|x| x.tf_round())
            .collect();
        assert_eq!(r, vec![0.0, 2.0, 2.0, -0.0, -2.0, 3.0]);
        assert!(r[3].is_sign_negative());
        assert_eq!(7i32.tf_round(), 7);
        assert_eq!(bf16::from_f32(2.5).tf_round(), bf16::from_f32(2.0));
    }

    #[test]
    fn integer_powers_wrap() {
        assert_eq!(2i32.tf_pow(31), i32::MIN);
        assert_eq!(2i32.tf_pow(32), 0);
        assert_eq!((-3i32).tf_pow(3), -27);
        assert_eq!(0i32.tf_pow(0), 1);
        assert_eq!(7i32.tf_pow(20), -1199696159);
        assert_eq!(3i8.tf_pow(5), -13);
        assert!(i32::check_exponent(&[1, -1]).is_err());
        assert!(f32::check_exponent(&[-1.0]).is_ok());
        assert!((-8.0f32).tf_pow(1.0 / 3.0).is_nan());
    }
}
