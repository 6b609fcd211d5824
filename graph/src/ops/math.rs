//! Element-wise math ops (TensorFlow's `math_ops.cc`): arithmetic with numpy
//! broadcasting, unary functions, comparisons, logic, `Select`/`SelectV2`, `Cast`,
//! `AddN`, `ClipByValue`, and the gradients of the element-wise activations, plus
//! the scans (`accumulate`) and the segment reductions and `Bincount` (`segment`).
//! Signatures, attribute defaults and type sets are TensorFlow's (complex types are
//! left out).

mod accumulate;
mod segment;
pub use accumulate::*;
pub use segment::*;

use crate::builder::{Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::ops::{FLOAT_TYPES, NUMERIC_TYPES};
use crate::{DType, OpRegistry, Result, Shape};

/// Floats and signed integers.
const SIGNED_TYPES: &str = "{bfloat16, half, float, double, int8, int16, int32, int64}";

/// Registers the math ops.
pub fn register_all_ops(r: &OpRegistry) {
    register_binary(r);
    register_unary(r);
    register_logic(r);
    accumulate::register_ops(r);
    segment::register_ops(r);
    r.register(
        OpDef::build("Cast")
            .input("x: SrcT")
            .output("y: DstT")
            .attr("SrcT: type")
            .attr("DstT: type")
            .attr("Truncate: bool = false")
            .shape_fn(shape_fn::unchanged),
    );
    r.register(
        OpDef::build("AddN")
            .input("inputs: N * T")
            .output("sum: T")
            .attr("N: int >= 1")
            .attr(&format!("T: {NUMERIC_TYPES}"))
            .commutative()
            .aggregate()
            .shape_fn(add_n_shape),
    );
    r.register(
        OpDef::build("ClipByValue")
            .input("t: T")
            .input("clip_value_min: T")
            .input("clip_value_max: T")
            .output("output: T")
            .attr(&format!("T: {NUMERIC_TYPES}"))
            .shape_fn(shape_fn::unchanged),
    );
    for name in [
        "TanhGrad",
        "SigmoidGrad",
        "RsqrtGrad",
        "SqrtGrad",
        "ReciprocalGrad",
        "InvGrad",
    ] {
        r.register(
            OpDef::build(name)
                .input("y: T")
                .input("dy: T")
                .output("z: T")
                .attr(&format!("T: {FLOAT_TYPES}"))
                .shape_fn(shape_fn::unchanged),
        );
    }
}

fn register_binary(r: &OpRegistry) {
    let add_types = "{bfloat16, half, float, double, uint8, int8, int16, int32, int64, string}";
    let mod_types = "{int32, int64, bfloat16, half, float, double}";
    let sq_types = "{bfloat16, half, float, double, int32, int64}";
    // (op, type set, commutative)
    let ops: [(&str, &str, bool); 16] = [
        ("Add", add_types, false),
        ("AddV2", NUMERIC_TYPES, true),
        ("Sub", NUMERIC_TYPES, false),
        ("Mul", NUMERIC_TYPES, true),
        ("Div", NUMERIC_TYPES, false),
        ("RealDiv", NUMERIC_TYPES, false),
        ("DivNoNan", FLOAT_TYPES, false),
        ("FloorDiv", NUMERIC_TYPES, false),
        ("FloorMod", NUMERIC_TYPES, false),
        ("TruncateDiv", NUMERIC_TYPES, false),
        ("TruncateMod", mod_types, false),
        ("Mod", mod_types, false),
        ("Maximum", NUMERIC_TYPES, false),
        ("Minimum", NUMERIC_TYPES, false),
        ("Pow", SIGNED_TYPES, false),
        ("SquaredDifference", sq_types, true),
    ];
    for (name, types, commutative) in ops {
        let mut b = OpDef::build(name)
            .input("x: T")
            .input("y: T")
            .output("z: T")
            .attr(&format!("T: {types}"))
            .shape_fn(shape_fn::broadcast_binary);
        if commutative {
            b = b.commutative();
        }
        if name == "AddV2" {
            b = b.aggregate();
        }
        r.register(b);
    }
    r.register(
        OpDef::build("Atan2")
            .input("y: T")
            .input("x: T")
            .output("z: T")
            .attr(&format!("T: {FLOAT_TYPES}"))
            .shape_fn(shape_fn::broadcast_binary),
    );
    for name in ["Less", "LessEqual", "Greater", "GreaterEqual"] {
        r.register(
            OpDef::build(name)
                .input("x: T")
                .input("y: T")
                .output("z: bool")
                .attr(&format!("T: {NUMERIC_TYPES}"))
                .shape_fn(shape_fn::broadcast_binary),
        );
    }
    for name in ["Equal", "NotEqual"] {
        r.register(
            OpDef::build(name)
                .input("x: T")
                .input("y: T")
                .output("z: bool")
                .attr("T: type")
                .attr("incompatible_shape_error: bool = true")
                .commutative()
                .shape_fn(equality_shape),
        );
    }
}

fn register_unary(r: &OpRegistry) {
    let float_fns = [
        "Exp", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Tanh", "Sigmoid", "Sin", "Cos", "Floor",
        "Ceil", "Rint", "Erf",
    ];
    let mut ops: Vec<(&str, &str)> = float_fns.iter().map(|&n| (n, FLOAT_TYPES)).collect();
    ops.extend([
        ("Neg", SIGNED_TYPES),
        ("Abs", SIGNED_TYPES),
        ("Sign", SIGNED_TYPES),
        ("Reciprocal", SIGNED_TYPES),
        ("Inv", SIGNED_TYPES),
        ("Round", SIGNED_TYPES),
        ("Square", NUMERIC_TYPES),
    ]);
    for (name, types) in ops {
        r.register(
            OpDef::build(name)
                .input("x: T")
                .output("y: T")
                .attr(&format!("T: {types}"))
                .shape_fn(shape_fn::unchanged),
        );
    }
    for name in ["IsNan", "IsInf", "IsFinite"] {
        r.register(
            OpDef::build(name)
                .input("x: T")
                .output("y: bool")
                .attr(&format!("T: {FLOAT_TYPES}"))
                .shape_fn(shape_fn::unchanged),
        );
    }
}

fn register_logic(r: &OpRegistry) {
    for name in ["LogicalAnd", "LogicalOr"] {
        r.register(
            OpDef::build(name)
                .input("x: bool")
                .input("y: bool")
                .output("z: bool")
                .commutative()
                .shape_fn(shape_fn::broadcast_binary),
        );
    }
    r.register(
        OpDef::build("LogicalNot")
            .input("x: bool")
            .output("y: bool")
            .shape_fn(shape_fn::unchanged),
    );
    let select = |name: &str, f: shape_fn::ShapeFn| {
        OpDef::build(name)
            .input("condition: bool")
            .input("t: T")
            .input("e: T")
            .output("output: T")
            .attr("T: type")
            .shape_fn(f)
    };
    r.register(select("Select", select_shape));
    r.register(select("SelectV2", select_v2_shape));
}

/// `Equal`/`NotEqual`: the broadcast shape; with `incompatible_shape_error` false,
/// shapes known not to broadcast give a scalar, and an unknown dimension facing a
/// known one above 1 gives an unknown shape (TensorFlow's helper, dimension by
/// dimension from the left).
fn equality_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let strict: bool = c.attr("incompatible_shape_error")?;
    if strict {
        return shape_fn::broadcast_binary(c);
    }
    let (a, b) = (c.input(0), c.input(1));
    let (Some(da), Some(db)) = (a.dims(), b.dims()) else {
        return c.set_output(0, Shape::unknown());
    };
    let rank = da.len().max(db.len());
    let pad = |d: &[Option<usize>], i: usize| {
        if i + d.len() >= rank {
            d[i + d.len() - rank]
        } else {
            Some(1)
        }
    };
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        out.push(match (pad(da, i), pad(db, i)) {
            (Some(1), y) => y,
            (x, Some(1)) => x,
            (Some(x), Some(y)) if x == y => Some(x),
            (Some(_), Some(_)) => return c.set_output(0, Shape::scalar()),
            (None, Some(_)) | (Some(_), None) => return c.set_output(0, Shape::unknown()),
            (None, None) => None,
        });
    }
    c.set_output(0, Shape::from_dims(&out))
}

/// `Select`: `t` and `e` merged; a condition of rank other than 0 (or a vector
/// against a scalar) must match them, a vector condition their first dimension.
fn select_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let data = c.input(1).merge(&c.input(2))?;
    let cond = c.input(0);
    let (Some(cond_rank), Some(data_rank)) = (cond.rank(), data.rank()) else {
        return c.set_output(0, data);
    };
    if cond_rank == 0 {
        return c.set_output(0, data);
    }
    if cond_rank != 1 || data_rank == 0 {
        let merged = data.merge(&cond)?;
        return c.set_output(0, merged);
    }
    Shape::from_dims(&[data.dim(0)]).merge(&cond)?;
    c.set_output(0, data)
}

/// `SelectV2`: the broadcast of all three inputs.
fn select_v2_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let te = shape_fn::broadcast_shapes(&c.input(1), &c.input(2))?;
    let s = shape_fn::broadcast_shapes(&c.input(0), &te)?;
    c.set_output(0, s)
}

/// `AddN`: every input merged, from the last to the first.
fn add_n_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let n = c.num_inputs();
    let mut cur = c.input(n.saturating_sub(1));
    for i in (0..n.saturating_sub(1)).rev() {
        cur = c
            .input(i)
            .merge(&cur)
            .map_err(|e| e.context(format!("From merging shape {i} with other shapes.")))?;
    }
    c.set_output(0, cur)
}

macro_rules! binary_builders {
    ($($f:ident => $op:literal, $doc:literal;)*) => {$(
        #[doc = $doc]
        pub fn $f(s: &Scope, x: &Output, y: &Output) -> Result<Output> {
            s.op($op).input(x).input(y).build1()
        }
    )*};
}

macro_rules! unary_builders {
    ($($f:ident => $op:literal, $doc:literal;)*) => {$(
        #[doc = $doc]
        pub fn $f(s: &Scope, x: &Output) -> Result<Output> {
            s.op($op).input(x).build1()
        }
    )*};
}

binary_builders! {
    add => "AddV2", "`AddV2`: `x + y` with broadcasting.";
    add_v1 => "Add", "`Add`: `x + y` with broadcasting; concatenates strings.";
    sub => "Sub", "`Sub`: `x - y` with broadcasting.";
    mul => "Mul", "`Mul`: `x * y` with broadcasting.";
    div => "Div", "`Div`: `x / y`, truncating for integers.";
    real_div => "RealDiv", "`RealDiv`: `x / y` for floats.";
    div_no_nan => "DivNoNan", "`DivNoNan`: `x / y`, 0 where `y` is 0.";
    floor_div => "FloorDiv", "`FloorDiv`: `floor(x / y)`.";
    floor_mod => "FloorMod", "`FloorMod`: the remainder with `y`'s sign (Python's `%`).";
    truncate_div => "TruncateDiv", "`TruncateDiv`: `x / y` rounded toward zero.";
    truncate_mod => "TruncateMod", "`TruncateMod`: the remainder with `x`'s sign (C's `%`).";
    modulo => "Mod", "`Mod`: as `TruncateMod`.";
    maximum => "Maximum", "`Maximum`: `max(x, y)`, NaN if either is NaN.";
    minimum => "Minimum", "`Minimum`: `min(x, y)`, NaN if either is NaN.";
    pow => "Pow", "`Pow`: `x ** y`.";
    squared_difference => "SquaredDifference", "`SquaredDifference`: `(x - y) * (x - y)`.";
    equal => "Equal", "`Equal`: `x == y` (incompatible shapes are an error).";
    not_equal => "NotEqual", "`NotEqual`: `x != y` (incompatible shapes are an error).";
    less => "Less", "`Less`: `x < y`.";
    less_equal => "LessEqual", "`LessEqual`: `x <= y`.";
    greater => "Greater", "`Greater`: `x > y`.";
    greater_equal => "GreaterEqual", "`GreaterEqual`: `x >= y`.";
    logical_and => "LogicalAnd", "`LogicalAnd`: `x && y`.";
    logical_or => "LogicalOr", "`LogicalOr`: `x || y`.";
}

unary_builders! {
    neg => "Neg", "`Neg`: `-x`.";
    abs => "Abs", "`Abs`: `|x|`.";
    sign => "Sign", "`Sign`: -1, 0 or 1.";
    exp => "Exp", "`Exp`: `e^x`.";
    expm1 => "Expm1", "`Expm1`: `e^x - 1`.";
    log => "Log", "`Log`: the natural logarithm.";
    log1p => "Log1p", "`Log1p`: `ln(1 + x)`.";
    sqrt => "Sqrt", "`Sqrt`: the square root.";
    rsqrt => "Rsqrt", "`Rsqrt`: `1 / sqrt(x)`.";
    square => "Square", "`Square`: `x * x`.";
    reciprocal => "Reciprocal", "`Reciprocal`: `1 / x`.";
    inv => "Inv", "`Inv`: `1 / x` (the older name of `Reciprocal`).";
    tanh => "Tanh", "`Tanh`: the hyperbolic tangent.";
    sigmoid => "Sigmoid", "`Sigmoid`: `1 / (1 + e^-x)`.";
    sin => "Sin", "`Sin`: the sine.";
    cos => "Cos", "`Cos`: the cosine.";
    floor => "Floor", "`Floor`: the largest integer not above `x`.";
    ceil => "Ceil", "`Ceil`: the smallest integer not below `x`.";
    round => "Round", "`Round`: the nearest integer, half to even.";
    rint => "Rint", "`Rint`: the nearest integer, half to even.";
    is_nan => "IsNan", "`IsNan`: true for NaN.";
    is_inf => "IsInf", "`IsInf`: true for ±infinity.";
    is_finite => "IsFinite", "`IsFinite`: true for finite values.";
    logical_not => "LogicalNot", "`LogicalNot`: `!x`.";
}

binary_builders! {
    tanh_grad => "TanhGrad", "`TanhGrad(y, dy)`: `dy * (1 - y*y)`.";
    sigmoid_grad => "SigmoidGrad", "`SigmoidGrad(y, dy)`: `dy * y * (1 - y)`.";
    rsqrt_grad => "RsqrtGrad", "`RsqrtGrad(y, dy)`: `-0.5 * dy * y^3`.";
    sqrt_grad => "SqrtGrad", "`SqrtGrad(y, dy)`: `0.5 * dy / y`.";
    reciprocal_grad => "ReciprocalGrad", "`ReciprocalGrad(y, dy)`: `-dy * y*y`.";
    inv_grad => "InvGrad", "`InvGrad(y, dy)`: as `ReciprocalGrad`.";
}

/// `Select`: `t` where `condition`, else `e` (v1 shapes: equal, or a vector
/// condition over the first dimension, or a scalar condition).
pub fn select(s: &Scope, condition: &Output, t: &Output, e: &Output) -> Result<Output> {
    s.op("Select").input(condition).input(t).input(e).build1()
}

/// `SelectV2`: `t` where `condition`, else `e`, all three broadcast together.
pub fn select_v2(s: &Scope, condition: &Output, t: &Output, e: &Output) -> Result<Output> {
    s.op("SelectV2").input(condition).input(t).input(e).build1()
}

/// `Cast`: `x` converted to `dtype`.
pub fn cast(s: &Scope, x: &Output, dtype: DType) -> Result<Output> {
    s.op("Cast").input(x).attr("DstT", dtype).build1()
}

/// `ClipByValue`: `t` clipped to `[clip_value_min, clip_value_max]` (each a scalar
/// or shaped like `t`).
pub fn clip_by_value(s: &Scope, t: &Output, lo: &Output, hi: &Output) -> Result<Output> {
    s.op("ClipByValue").input(t).input(lo).input(hi).build1()
}

/// `AddN`: the element-wise sum of same-shaped tensors.
pub fn add_n(s: &Scope, xs: &[Output]) -> Result<Output> {
    s.op("AddN").input_list(xs).build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::placeholder;

    fn ph(s: &Scope, dtype: DType, dims: &[Option<usize>]) -> Output {
        placeholder(s, dtype, Shape::from_dims(dims)).unwrap()
    }

    #[test]
    fn broadcasting_and_unary_shapes() {
        let s = Scope::new();
        let a = ph(&s, DType::F32, &[None, Some(1), Some(5)]);
        let b = ph(&s, DType::F32, &[Some(4), None, Some(1)]);
        assert_eq!(
            add(&s, &a, &b).unwrap().shape(),
            Shape::from_dims(&[Some(4), None, Some(5)])
        );
        assert_eq!(less(&s, &a, &b).unwrap().dtype(), DType::Bool);
        assert_eq!(exp(&s, &a).unwrap().shape(), a.shape());
        let c = ph(&s, DType::F32, &[Some(3)]);
        assert!(mul(&s, &ph(&s, DType::F32, &[Some(2)]), &c).is_err());
        let i = ph(&s, DType::I32, &[Some(2)]);
        assert_eq!(cast(&s, &i, DType::F16).unwrap().dtype(), DType::F16);
        assert!(exp(&s, &i).is_err(), "Exp takes floats only");
        assert!(add_v1(&s, &ph(&s, DType::U16, &[]), &ph(&s, DType::U16, &[])).is_err());
        let st = ph(&s, DType::String, &[Some(2)]);
        assert_eq!(add_v1(&s, &st, &st).unwrap().dtype(), DType::String);
    }

    #[test]
    fn equality_shapes_without_errors() {
        let s = Scope::new();
        let eq = |x: &[Option<usize>], y: &[Option<usize>]| {
            s.op("Equal")
                .input(ph(&s, DType::F32, x))
                .input(ph(&s, DType::F32, y))
                .attr("incompatible_shape_error", false)
                .build1()
                .unwrap()
                .shape()
        };
        assert_eq!(eq(&[Some(2)], &[Some(3)]), Shape::scalar());
        assert_eq!(eq(&[Some(2), Some(1)], &[Some(3)]), Shape::known(&[2, 3]));
        assert_eq!(eq(&[None], &[Some(3)]), Shape::unknown());
        assert_eq!(eq(&[None], &[None]), Shape::from_dims(&[None]));
        assert_eq!(eq(&[Some(2), None], &[Some(3), Some(1)]), Shape::scalar());
        assert!(equal(
            &s,
            &ph(&s, DType::F32, &[Some(2)]),
            &ph(&s, DType::F32, &[Some(3)])
        )
        .is_err());
    }

    #[test]
    fn select_shapes() {
        let s = Scope::new();
        let b = |d: &[Option<usize>]| ph(&s, DType::Bool, d);
        let f = |d: &[Option<usize>]| ph(&s, DType::F32, d);
        let m = [Some(2), Some(3)];
        assert_eq!(
            select(&s, &b(&[Some(2)]), &f(&m), &f(&m)).unwrap().shape(),
            Shape::known(&[2, 3])
        );
        assert_eq!(
            select(&s, &b(&[]), &f(&[None, Some(3)]), &f(&[Some(2), None]))
                .unwrap()
                .shape(),
            Shape::known(&[2, 3])
        );
        assert!(select(&s, &b(&[Some(3)]), &f(&m), &f(&m)).is_err());
        assert!(select(&s, &b(&[Some(2), Some(4)]), &f(&m), &f(&m)).is_err());
        assert!(select(&s, &b(&[Some(2)]), &f(&[]), &f(&[])).is_err());
        assert!(select(&s, &b(&[]), &f(&[Some(2)]), &f(&[Some(3)])).is_err());
        let v2 = select_v2(&s, &b(&[Some(2), Some(1)]), &f(&[Some(3)]), &f(&[])).unwrap();
        assert_eq!(v2.shape(), Shape::known(&[2, 3]));
        assert!(select_v2(&s, &b(&[Some(2)]), &f(&[Some(3)]), &f(&[])).is_err());
    }

    #[test]
    fn add_n_and_grad_shapes() {
        let s = Scope::new();
        let x = ph(&s, DType::F32, &[Some(2), None]);
        let y = ph(&s, DType::F32, &[None, Some(3)]);
        assert_eq!(
            add_n(&s, &[x.clone(), y.clone()]).unwrap().shape(),
            Shape::known(&[2, 3])
        );
        assert!(add_n(&s, &[]).is_err(), "N >= 1");
        assert!(add_n(
            &s,
            &[
                ph(&s, DType::F32, &[Some(2)]),
                ph(&s, DType::F32, &[Some(3)])
            ]
        )
        .is_err());
        let g = tanh_grad(
            &s,
            &ph(&s, DType::F32, &[Some(6)]),
            &ph(&s, DType::F32, &[Some(2), Some(3)]),
        )
        .unwrap();
        assert_eq!(g.shape(), Shape::known(&[6]));
        let def = OpRegistry::global().lookup("AddN").unwrap();
        assert!(def.is_aggregate && def.is_commutative);
        assert!(OpRegistry::global().lookup("AddV2").unwrap().is_aggregate);
    }
}
