//! Matrix products and `Range` (TensorFlow's `math_ops.cc`): `MatMul` (rank-2, with
//! `transpose_a`/`transpose_b`), `BatchMatMul` (equal batch dimensions),
//! `BatchMatMulV2` (broadcast batch dimensions), `BatchMatMulV3` (input and output
//! types of their own), `_FusedMatMul` (a `MatMul` with `BiasAdd` and an activation
//! applied to its output, written by the remapper pass, never by a builder: as in
//! TensorFlow it has no gradient), their shape functions and builders, and
//! [`RangeElem`], the size computation `Range`'s shape function and kernel share.
//! [`einsum`](mod@einsum) holds `Einsum` and its equation parser.

pub mod einsum;
pub use einsum::einsum;

use std::fmt::Display;

use crate::builder::{Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{bf16, f16, DType, OpRegistry, Result, Shape, Status, Tensor, TensorType};

/// Registers the matrix product ops and `Range`.
pub fn register_all_ops(r: &OpRegistry) {
    einsum::register_ops(r);
    r.register(
        OpDef::build("MatMul")
            .input("a: T")
            .input("b: T")
            .output("product: T")
            .attr("transpose_a: bool = false")
            .attr("transpose_b: bool = false")
            .attr(
                "T: {bfloat16, half, float, double, int32, int64, uint8, uint16, uint32, \
                 uint64, complex64, complex128}",
            )
            .attr("grad_a: bool = false")
            .attr("grad_b: bool = false")
            .shape_fn(mat_mul_shape),
    );
    let types = [
        (
            "BatchMatMul",
            "{bfloat16, half, float, double, int32, int64, complex64, complex128}",
        ),
        (
            "BatchMatMulV2",
            "{bfloat16, half, float, double, int16, int32, int64, uint8, uint16, uint32, \
             uint64, complex64, complex128}",
        ),
    ];
    for (name, t) in types {
        let shape: fn(&mut InferenceContext<'_>) -> Result<()> = if name == "BatchMatMul" {
            batch_mat_mul_shape
        } else {
            batch_mat_mul_v2_shape
        };
        r.register(
            OpDef::build(name)
                .input("x: T")
                .input("y: T")
                .output("output: T")
                .attr(&format!("T: {t}"))
                .attr("adj_x: bool = false")
                .attr("adj_y: bool = false")
                .attr("grad_x: bool = false")
                .attr("grad_y: bool = false")
                .shape_fn(shape),
        );
    }
    // Grappler's remapper writes MatMul + BiasAdd (+ activation) as one node (see
    // `passes::remapper`); TensorFlow registers no gradient for it.
    r.register(
        OpDef::build("_FusedMatMul")
            .input("a: T")
            .input("b: T")
            .input("args: num_args * T")
            .output("product: T")
            .attr("transpose_a: bool = false")
            .attr("transpose_b: bool = false")
            .attr("T: {bfloat16, half, float}")
            .attr("num_args: int >= 0")
            .attr("fused_ops: list(string) = []")
            .attr("epsilon: float = 0.0001")
            .attr("leakyrelu_alpha: float = 0.2")
            .shape_fn(mat_mul_shape),
    );
    let tin = "{bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, \
               complex128}";
    r.register(
        OpDef::build("BatchMatMulV3")
            .input("x: Ta")
            .input("y: Tb")
            .output("output: Tout")
            .attr(&format!("Ta: {tin}"))
            .attr(&format!("Tb: {tin}"))
            .attr(
                "Tout: {bfloat16, half, float, double, int16, int32, int64, complex64, complex128}",
            )
            .attr("adj_x: bool = false")
            .attr("adj_y: bool = false")
            .attr("grad_x: bool = false")
            .attr("grad_y: bool = false")
            .shape_fn(batch_mat_mul_v2_shape),
    );
    r.register(
        OpDef::build("Range")
            .input("start: Tidx")
            .input("limit: Tidx")
            .input("delta: Tidx")
            .output("output: Tidx")
            .attr(
                "Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, \
                 uint32, uint64} = DT_INT32",
            )
            .shape_fn(range_shape),
    );
}

type Dims = Vec<Option<usize>>;

/// The dimensions of `s` when its rank is known and at least `min` (exactly `min`
/// when `exact`), `None` for an unknown rank.
fn with_rank(s: &Shape, min: usize, exact: bool, what: &str, op: &str) -> Result<Option<Dims>> {
    let Some(d) = s.dims() else {
        return Ok(None);
    };
    if d.len() < min || (exact && d.len() != min) {
        let want = if exact { "" } else { "at least " };
        return Err(Status::invalid_argument(format!(
            "Shape must be {want}rank {min} but is rank {} for '{what}' of {op} (shape {s})",
            d.len()
        )));
    }
    Ok(Some(d.to_vec()))
}

/// Two dimensions that must be equal where both are known.
fn merge_dim(a: Option<usize>, b: Option<usize>, op: &str) -> Result<Option<usize>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => Err(Status::invalid_argument(format!(
            "Dimensions must be equal, but are {x} and {y} for {op}"
        ))),
        (Some(x), _) | (None, Some(x)) => Ok(Some(x)),
        (None, None) => Ok(None),
    }
}

/// The product's (rows, cols) of two (possibly transposed) matrix shapes, checking
/// that the contracted dimensions agree. `a` and `b` have rank at least 2.
fn product_dims(
    a: &[Option<usize>],
    b: &[Option<usize>],
    ta: bool,
    tb: bool,
    op: &str,
) -> Result<Dims> {
    let (ra, rb) = (a.len(), b.len());
    let (rows, a_inner) = if ta {
        (a[ra - 1], a[ra - 2])
    } else {
        (a[ra - 2], a[ra - 1])
    };
    let (b_inner, cols) = if tb {
        (b[rb - 1], b[rb - 2])
    } else {
        (b[rb - 2], b[rb - 1])
    };
    merge_dim(a_inner, b_inner, op)?;
    Ok(vec![rows, cols])
}

/// `MatMul`'s and `_FusedMatMul`'s shape function (TensorFlow's `MatMulShape`).
fn mat_mul_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let op = c.node().op.clone();
    let a = with_rank(&c.input(0), 2, true, "a", &op)?;
    let b = with_rank(&c.input(1), 2, true, "b", &op)?;
    let (ta, tb): (bool, bool) = (c.attr("transpose_a")?, c.attr("transpose_b")?);
    let a = a.unwrap_or_else(|| vec![None, None]);
    let b = b.unwrap_or_else(|| vec![None, None]);
    let out = product_dims(&a, &b, ta, tb, &op)?;
    c.set_output(0, Shape::from_dims(&out))
}

fn batch_mat_mul_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let op = c.node().op.clone();
    let a = with_rank(&c.input(0), 2, false, "x", &op)?;
    let b = with_rank(&c.input(1), 2, false, "y", &op)?;
    let (Some(a), Some(b)) = (a, b) else {
        return c.set_output(0, Shape::unknown());
    };
    let (adj_x, adj_y): (bool, bool) = (c.attr("adj_x")?, c.attr("adj_y")?);
    let batch = Shape::from_dims(&a[..a.len() - 2]).merge(&Shape::from_dims(&b[..b.len() - 2]))?;
    let mut out = batch.dims().map(<[_]>::to_vec).unwrap_or_default();
    out.extend(product_dims(&a, &b, adj_x, adj_y, &op)?);
    c.set_output(0, Shape::from_dims(&out))
}

fn batch_mat_mul_v2_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let op = c.node().op.clone();
    let a = with_rank(&c.input(0), 2, false, "x", &op)?;
    let b = with_rank(&c.input(1), 2, false, "y", &op)?;
    let (Some(a), Some(b)) = (a, b) else {
        return c.set_output(0, Shape::unknown());
    };
    let (adj_x, adj_y): (bool, bool) = (c.attr("adj_x")?, c.attr("adj_y")?);
    let batch = shape_fn::broadcast_shapes(
        &Shape::from_dims(&a[..a.len() - 2]),
        &Shape::from_dims(&b[..b.len() - 2]),
    )?;
    let mut out = batch.dims().map(<[_]>::to_vec).unwrap_or_default();
    out.extend(product_dims(&a, &b, adj_x, adj_y, &op)?);
    c.set_output(0, Shape::from_dims(&out))
}

fn range_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    for (i, what) in ["start", "limit", "delta"].iter().enumerate() {
        with_rank(&c.input(i), 0, true, what, "Range")?;
    }
    let (Some(s), Some(l), Some(d)) = (c.input_tensor(0), c.input_tensor(1), c.input_tensor(2))
    else {
        return c.set_output(0, Shape::unknown_with_rank(1));
    };
    fn size<T: RangeElem>(s: &Tensor, l: &Tensor, d: &Tensor) -> Result<Option<usize>> {
        Ok(Some(T::range_size(
            s.scalar_value()?,
            l.scalar_value()?,
            d.scalar_value()?,
        )?))
    }
    let n = match s.dtype() {
        DType::F32 => size::<f32>(s, l, d)?,
        DType::F64 => size::<f64>(s, l, d)?,
        DType::F16 => size::<f16>(s, l, d)?,
        DType::BF16 => size::<bf16>(s, l, d)?,
        DType::I8 => size::<i8>(s, l, d)?,
        DType::I16 => size::<i16>(s, l, d)?,
        DType::I32 => size::<i32>(s, l, d)?,
        DType::I64 => size::<i64>(s, l, d)?,
        DType::U16 => size::<u16>(s, l, d)?,
        DType::U32 => size::<u32>(s, l, d)?,
        DType::U64 => size::<u64>(s, l, d)?,
        _ => None,
    };
    c.set_output(0, Shape::from_dims(&[n]))
}

/// An element type of `Range`: how many elements `Range(start, limit, delta)` has
/// and what each is, as TensorFlow computes them (in the element type itself, so
/// `half` ranges round as TensorFlow's do).
pub trait RangeElem: TensorType + PartialOrd + Display {
    /// The number of elements, or `InvalidArgument` as TensorFlow: `delta` is zero,
    /// its sign does not lead from `start` to `limit`, or the size is too large.
    fn range_size(start: Self, limit: Self, delta: Self) -> Result<usize>;
    /// Element `i`: `start + T(i) * delta`, each operation rounded to the element
    /// type (TensorFlow 2.21's CPU kernel; integers wrap, which is exact since the
    /// result lies between `start` and `limit`).
    fn range_value(start: Self, i: usize, delta: Self) -> Self;
}

/// TensorFlow's checks of the sign of `delta` against `start` and `limit` (NaNs
/// fail them, as in TensorFlow).
fn check_range<T: PartialOrd + Display>(start: T, limit: T, delta: T, zero: T) -> Result<()> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    if delta == zero {
        return Err(Status::invalid_argument(format!(
            "Requires delta != 0: {delta}"
        )));
    }
    if delta > zero {
        if !matches!(start.partial_cmp(&limit), Some(Less | Equal)) {
            return Err(Status::invalid_argument(format!(
                "Requires start <= limit when delta > 0: {start}/{limit}"
            )));
        }
    } else if !matches!(start.partial_cmp(&limit), Some(Greater | Equal)) {
        return Err(Status::invalid_argument(format!(
            "Requires start >= limit when delta < 0: {start}/{limit}"
        )));
    }
    Ok(())
}

/// 2^63, the bound TensorFlow puts on a float range's size.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

macro_rules! range_float {
    ($($t:ty),*) => {$(
        impl RangeElem for $t {
            fn range_size(start: $t, limit: $t, delta: $t) -> Result<usize> {
                use num_traits::{Float, Zero};
                check_range(start, limit, delta, <$t>::zero())?;
                let n = Float::ceil(Float::abs((limit - start) / delta));
                // Below 2^63 (and not NaN), as TensorFlow requires.
                match num_traits::ToPrimitive::to_f64(&n) {
                    Some(f) if f < TWO_POW_63 => Ok(f as usize),
                    _ => Err(Status::invalid_argument(
                        "Requires ((limit - start) / delta) <= 9223372036854775807",
                    )),
                }
            }
            fn range_value(start: $t, i: usize, delta: $t) -> $t {
                start + <$t as num_traits::NumCast>::from(i as f64).unwrap_or(<$t>::INFINITY) * delta
            }
        }
    )*};
}
range_float!(f32, f64, f16, bf16);

macro_rules! range_int {
    ($($t:ty),*) => {$(
        impl RangeElem for $t {
            fn range_size(start: $t, limit: $t, delta: $t) -> Result<usize> {
                check_range(start, limit, delta, 0)?;
                let span = (limit as i128 - start as i128).unsigned_abs();
                let step = (delta as i128).unsigned_abs();
                usize::try_from(span.div_ceil(step)).map_err(|_| {
                    Status::invalid_argument("Requires ((limit - start) / delta) <= 9223372036854775807")
                })
            }
            fn range_value(start: $t, i: usize, delta: $t) -> $t {
                start.wrapping_add((i as $t).wrapping_mul(delta))
            }
        }
    )*};
}
range_int!(i8, i16, i32, i64, u16, u32, u64);

/// `MatMul`: `a · b` of two matrices, either transposed first.
pub fn mat_mul(
    s: &Scope,
    a: &Output,
    b: &Output,
    transpose_a: bool,
    transpose_b: bool,
) -> Result<Output> {
    s.op("MatMul")
        .input(a)
        .input(b)
        .attr("transpose_a", transpose_a)
        .attr("transpose_b", transpose_b)
        .build1()
}

/// `BatchMatMulV2` (what `tf.linalg.matmul` builds for batches): the matrix
/// products of the last two dimensions, batch dimensions broadcast; `adj_x`/`adj_y`
/// transpose the matrices first.
pub fn batch_mat_mul(
    s: &Scope,
    x: &Output,
    y: &Output,
    adj_x: bool,
    adj_y: bool,
) -> Result<Output> {
    s.op("BatchMatMulV2")
        .input(x)
        .input(y)
        .attr("adj_x", adj_x)
        .attr("adj_y", adj_y)
        .build1()
}

/// `BatchMatMulV3`: as [`batch_mat_mul`], with the output of type `tout` (inputs
/// converted to it, e.g. `int8 × int8 → int32`).
pub fn batch_mat_mul_v3(
    s: &Scope,
    x: &Output,
    y: &Output,
    tout: DType,
    adj_x: bool,
    adj_y: bool,
) -> Result<Output> {
    s.op("BatchMatMulV3")
        .input(x)
        .input(y)
        .attr("Tout", tout)
        .attr("adj_x", adj_x)
        .attr("adj_y", adj_y)
        .build1()
}

/// `Range`: `start, start + delta, …` up to but excluding `limit` (three scalars of
/// one type).
pub fn range(s: &Scope, start: &Output, limit: &Output, delta: &Output) -> Result<Output> {
    s.op("Range")
        .input(start)
        .input(limit)
        .input(delta)
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::placeholder;
    use crate::Code;

    fn ph(s: &Scope, dt: DType, dims: &[Option<usize>]) -> Output {
        placeholder(s, dt, Shape::from_dims(dims)).unwrap()
    }

    fn konst(s: &Scope, t: Tensor) -> Output {
        s.op("Const")
            .attr("dtype", t.dtype())
            .attr("value", t)
            .build1()
            .unwrap()
    }

    #[test]
    fn mat_mul_shapes() {
        let s = Scope::new();
        let a = ph(&s, DType::F32, &[Some(2), Some(3)]);
        let b = ph(&s, DType::F32, &[Some(3), None]);
        assert_eq!(
            mat_mul(&s, &a, &b, false, false).unwrap().shape(),
            Shape::from_dims(&[Some(2), None])
        );
        assert_eq!(
            mat_mul(&s, &a, &a, false, true).unwrap().shape(),
            Shape::known(&[2, 2])
        );
        assert_eq!(
            mat_mul(&s, &a, &a, true, false).unwrap().shape(),
            Shape::known(&[3, 3])
        );
        let e = mat_mul(&s, &a, &a, false, false).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let r3 = ph(&s, DType::F32, &[Some(1), Some(2), Some(3)]);
        assert!(mat_mul(&s, &r3, &b, false, false).is_err());
        let u = placeholder(&s, DType::F32, Shape::unknown()).unwrap();
        assert_eq!(
            mat_mul(&s, &u, &b, false, false).unwrap().shape(),
            Shape::unknown_with_rank(2)
        );
        let i = ph(&s, DType::I8, &[Some(2), Some(2)]);
        assert!(
            mat_mul(&s, &i, &i, false, false).is_err(),
            "MatMul has no int8"
        );
    }

    #[test]
    fn batch_mat_mul_shapes() {
        let s = Scope::new();
        let x = ph(&s, DType::F32, &[Some(5), Some(1), Some(2), Some(3)]);
        let y = ph(&s, DType::F32, &[Some(4), Some(3), Some(6)]);
        let out = batch_mat_mul(&s, &x, &y, false, false).unwrap();
        assert_eq!(out.shape(), Shape::known(&[5, 4, 2, 6]));
        assert!(batch_mat_mul(&s, &x, &y, true, false).is_err());
        let v1 = s.op("BatchMatMul").input(&x).input(&y).build();
        assert!(v1.is_err(), "BatchMatMul needs equal batch dimensions");
        let x3 = ph(&s, DType::F32, &[None, Some(2), Some(3)]);
        let y3 = ph(&s, DType::F32, &[Some(7), Some(2), Some(3)]);
        let out = s
            .op("BatchMatMul")
            .input(&x3)
            .input(&y3)
            .attr("adj_y", true)
            .build1()
            .unwrap();
        assert_eq!(out.shape(), Shape::known(&[7, 2, 2]));
        let i8s = ph(&s, DType::I8, &[Some(2), Some(4)]);
        let j8s = ph(&s, DType::I8, &[Some(4), Some(3)]);
        let out = batch_mat_mul_v3(&s, &i8s, &j8s, DType::I32, false, false).unwrap();
        assert_eq!(
            (out.shape(), out.dtype()),
            (Shape::known(&[2, 3]), DType::I32)
        );
        let vec = ph(&s, DType::F32, &[Some(3)]);
        assert!(batch_mat_mul(&s, &vec, &y, false, false).is_err());
    }

    #[test]
    fn range_sizes_and_shapes() {
        assert_eq!(i32::range_size(0, 10, 3).unwrap(), 4);
        assert_eq!(i32::range_size(10, 0, -3).unwrap(), 4);
        assert_eq!(i64::range_size(5, 5, 1).unwrap(), 0);
        assert_eq!(i32::range_size(i32::MIN, i32::MAX, i32::MAX).unwrap(), 3);
        assert_eq!(f32::range_size(0.0, 1.0, 0.3).unwrap(), 4);
        assert_eq!(
            f16::range_size(f16::ZERO, f16::from_f32(10.0), f16::from_f32(0.1)).unwrap(),
            100
        );
        assert_eq!(f32::range_size(0.0, 10.0, 0.1).unwrap(), 100);
        for (s, l, d) in [
            (0.0f32, 1.0, 0.0),
            (0.0, 1.0, -1.0),
            (1.0, 0.0, 1.0),
            (0.0, f32::INFINITY, 1.0),
            (f32::NAN, 1.0, 1.0),
            (0.0, 1.0, f32::NAN),
        ] {
            assert_eq!(
                f32::range_size(s, l, d).unwrap_err().code(),
                Code::InvalidArgument,
                "{s} {l} {d}"
            );
        }
        assert!(i64::range_size(0, 1, 0)
            .unwrap_err()
            .message()
            .contains("delta != 0"));
        assert_eq!(i8::range_value(-128, 254, 1), 126);
        assert_eq!(f32::range_value(0.0, 7, 0.1), 7.0 * 0.1f32);

        let s = Scope::new();
        let c = |v: i32| konst(&s, Tensor::scalar(v));
        assert_eq!(
            range(&s, &c(2), &c(9), &c(2)).unwrap().shape(),
            Shape::known(&[4])
        );
        assert!(range(&s, &c(2), &c(9), &c(0)).is_err());
        let p = ph(&s, DType::I32, &[]);
        assert_eq!(
            range(&s, &c(0), &p, &c(1)).unwrap().shape(),
            Shape::unknown_with_rank(1)
        );
        let v = ph(&s, DType::I32, &[Some(1)]);
        assert!(range(&s, &v, &c(3), &c(1)).is_err());
    }
}
