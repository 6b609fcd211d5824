//! Gradients of the math ops (TensorFlow's `math_grad.py`): the element-wise unary
//! functions (through the `TanhGrad`/`SigmoidGrad`/`SqrtGrad`/`RsqrtGrad`/
//! `ReciprocalGrad` kernels where TensorFlow uses them, and the second-order
//! gradients of those kernels), `AddN`, `Cast`, `Select`/`SelectV2`, `ClipByValue`, and the ops
//! declared not differentiable (comparisons, logic, rounding, random numbers).
//!
//! - `shapes`: constant folding of shape arithmetic and the broadcast reductions.
//! - `binary`: Add … SquaredDifference, with broadcasting.
//! - `reduction`: Sum, Mean, Max, Min, Prod, Cumsum, Cumprod.
//! - `segment`: UnsortedSegment*, Segment*, SparseSegment*.
//! - `matmul`: MatMul, BatchMatMul, BatchMatMulV2.
//! - `einsum`: Einsum (TensorFlow's `linalg_grad.py`).

mod binary;
mod einsum;
mod matmul;
pub(crate) mod reduction;
mod segment;
pub(crate) mod shapes;

use crate::builder::Output;
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::Result;
use shapes::{float_scalar, sum_to_operand};

type Grads = Result<Vec<Option<Output>>>;

/// `[f(c, x, g)]` for a unary op with input `x` and incoming gradient `g`.
macro_rules! unary_grad {
    ($name:ident, |$c:ident, $x:ident, $g:ident| $body:expr) => {
        fn $name($c: &GradContext<'_>) -> Grads {
            let $x = $c.input(0)?;
            let $g = $c.grad(0)?;
            let out: Output = $body;
            Ok(vec![Some(out)])
        }
    };
}

unary_grad!(neg_grad, |c, _x, g| ops::neg(c.scope, &g)?);
unary_grad!(abs_grad, |c, x, g| ops::mul(
    c.scope,
    &g,
    &ops::sign(c.scope, &x)?
)?);
unary_grad!(sign_grad, |c, x, _g| ops::zeros_like(c.scope, &x)?);
unary_grad!(exp_grad, |c, _x, g| ops::mul(c.scope, &g, &c.output(0)?)?);
unary_grad!(expm1_grad, |c, x, g| ops::mul(
    c.scope,
    &g,
    &ops::exp(c.scope, &x)?
)?);
unary_grad!(log_grad, |c, x, g| ops::mul(
    c.scope,
    &g,
    &ops::reciprocal(c.scope, &x)?
)?);
unary_grad!(log1p_grad, |c, x, g| {
    let s = c.scope;
    let one = float_scalar(s, 1.0, x.dtype())?;
    ops::mul(s, &g, &ops::reciprocal(s, &ops::add(s, &one, &x)?)?)?
});
unary_grad!(square_grad, |c, x, g| {
    let s = c.scope;
    let two = float_scalar(s, 2.0, x.dtype())?;
    ops::mul(s, &g, &ops::mul(s, &x, &two)?)?
});
unary_grad!(sin_grad, |c, x, g| ops::mul(
    c.scope,
    &g,
    &ops::cos(c.scope, &x)?
)?);
unary_grad!(cos_grad, |c, x, g| {
    let s = c.scope;
    ops::mul(s, &ops::neg(s, &g)?, &ops::sin(s, &x)?)?
});

/// A unary op whose gradient is the kernel `kernel(y, g)` of its output `y`
/// (`Tanh` → `TanhGrad`, …).
fn output_kernel_grad(c: &GradContext<'_>, kernel: &str) -> Grads {
    let y = c.output(0)?;
    let g = c.scope.op(kernel).input(&y).input(&c.grad(0)?).build1()?;
    Ok(vec![Some(g)])
}

fn tanh_grad(c: &GradContext<'_>) -> Grads {
    output_kernel_grad(c, "TanhGrad")
}
fn sigmoid_grad(c: &GradContext<'_>) -> Grads {
    output_kernel_grad(c, "SigmoidGrad")
}
fn sqrt_grad(c: &GradContext<'_>) -> Grads {
    output_kernel_grad(c, "SqrtGrad")
}
fn rsqrt_grad(c: &GradContext<'_>) -> Grads {
    output_kernel_grad(c, "RsqrtGrad")
}
fn reciprocal_grad(c: &GradContext<'_>) -> Grads {
    output_kernel_grad(c, "ReciprocalGrad")
}

/// Second order: the gradients of `TanhGrad(a, b) = b (1 - a²)` …, TensorFlow's
/// `_TanhGradGrad` and friends.
fn kernel_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (a, b, g) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let dt = g.dtype();
    let mul = |x: &Output, y: &Output| ops::mul(s, x, y);
    let kernel = |name: &str, x: &Output, y: &Output| s.op(name).input(x).input(y).build1();
    let (ga, gb) = match c.op.op_type() {
        "TanhGrad" => {
            let m2 = float_scalar(s, -2.0, dt)?;
            (
                mul(&mul(&mul(&g, &m2)?, &b)?, &a)?,
                kernel("TanhGrad", &a, &g)?,
            )
        }
        "SigmoidGrad" => {
            let gb = mul(&g, &b)?;
            let two = float_scalar(s, 2.0, dt)?;
            let ga = ops::sub(s, &gb, &mul(&mul(&two, &gb)?, &a)?)?;
            (ga, kernel("SigmoidGrad", &a, &g)?)
        }
        "SqrtGrad" => {
            // y = 0.5 b / a
            let ga_ = ops::real_div(s, &g, &a)?;
            let y = c.output(0)?;
            let half = float_scalar(s, 0.5, dt)?;
            (ops::neg(s, &mul(&ga_, &y)?)?, mul(&half, &ga_)?)
        }
        "RsqrtGrad" => {
            let k = float_scalar(s, -1.5, dt)?;
            let ga = mul(&mul(&mul(&k, &g)?, &b)?, &ops::square(s, &a)?)?;
            (ga, kernel("RsqrtGrad", &a, &g)?)
        }
        _ => {
            // ReciprocalGrad / InvGrad: y = -b a²
            let m2 = float_scalar(s, -2.0, dt)?;
            let ga = mul(&mul(&mul(&g, &m2)?, &b)?, &a)?;
            (ga, kernel("ReciprocalGrad", &a, &g)?)
        }
    };
    Ok(vec![Some(ga), Some(gb)])
}

fn add_n_grad(c: &GradContext<'_>) -> Grads {
    let g = c.grad(0)?;
    Ok(vec![Some(g); c.inputs.len()])
}

/// `Cast` between float types passes the gradient back cast to the source type;
/// other casts pass none.
fn cast_grad(c: &GradContext<'_>) -> Grads {
    let x = c.input(0)?;
    let g = c.grad(0)?;
    if x.dtype().is_float() && g.dtype().is_float() {
        Ok(vec![Some(ops::cast(c.scope, &g, x.dtype())?)])
    } else {
        Ok(vec![None])
    }
}

/// `Select`: the gradient goes to `t` where the condition holds, else to `e`.
fn select_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (cond, g) = (c.input(0)?, c.grad(0)?);
    let zeros = ops::zeros_like(s, &c.input(1)?)?;
    Ok(vec![
        None,
        Some(ops::select(s, &cond, &g, &zeros)?),
        Some(ops::select(s, &cond, &zeros, &g)?),
    ])
}

/// `SelectV2`: as `Select`, each side summed back over its broadcast axes.
fn select_v2_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (cond, g, out) = (c.input(0)?, c.grad(0)?, c.output(0)?);
    let zero = float_scalar(s, 0.0, g.dtype())?;
    let gx = ops::select_v2(s, &cond, &g, &zero)?;
    let gy = ops::select_v2(s, &cond, &zero, &g)?;
    let rx = sum_to_operand(s, &c.input(1)?, &out)?;
    let ry = sum_to_operand(s, &c.input(2)?, &out)?;
    Ok(vec![None, Some(rx.apply(s, &gx)?), Some(ry.apply(s, &gy)?)])
}

/// `ClipByValue` (TensorFlow 2.21's `clip_ops.py`): the gradient goes to `t` where
/// it lies inside the bounds, to a bound where `t` passes it (summed over the
/// bound's broadcast axes).
fn clip_by_value_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, lo, hi, g) = (c.input(0)?, c.input(1)?, c.input(2)?, c.grad(0)?);
    let zero = float_scalar(s, 0.0, g.dtype())?;
    let below = ops::less(s, &x, &lo)?;
    let above = ops::greater(s, &x, &hi)?;
    let gx = ops::select_v2(s, &ops::logical_or(s, &below, &above)?, &zero, &g)?;
    let glo = ops::select_v2(s, &below, &g, &zero)?;
    let ghi = ops::select_v2(s, &above, &g, &zero)?;
    let rlo = sum_to_operand(s, &lo, &x)?;
    let rhi = sum_to_operand(s, &hi, &x)?;
    Ok(vec![
        Some(gx),
        Some(rlo.apply(s, &glo)?),
        Some(rhi.apply(s, &ghi)?),
    ])
}

/// Registers the math gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    binary::register(r);
    matmul::register(r);
    reduction::register(r);
    segment::register(r);
    einsum::register(r);
    r.register("Neg", neg_grad);
    r.register("Abs", abs_grad);
    r.register("Sign", sign_grad);
    r.register("Exp", exp_grad);
    r.register("Expm1", expm1_grad);
    r.register("Log", log_grad);
    r.register("Log1p", log1p_grad);
    r.register("Square", square_grad);
    r.register("Sin", sin_grad);
    r.register("Cos", cos_grad);
    r.register("Tanh", tanh_grad);
    r.register("Sigmoid", sigmoid_grad);
    r.register("Sqrt", sqrt_grad);
    r.register("Rsqrt", rsqrt_grad);
    r.register("Reciprocal", reciprocal_grad);
    r.register("Inv", reciprocal_grad);
    for op in [
        "TanhGrad",
        "SigmoidGrad",
        "SqrtGrad",
        "RsqrtGrad",
        "ReciprocalGrad",
        "InvGrad",
    ] {
        r.register(op, kernel_grad_grad);
    }
    r.register("AddN", add_n_grad);
    r.register("Cast", cast_grad);
    r.register("Select", select_grad);
    r.register("SelectV2", select_v2_grad);
    r.register("ClipByValue", clip_by_value_grad);
    // TensorFlow registers these as returning no gradient.
    for op in ["Floor", "Ceil", "Round", "Rint"] {
        r.register(op, |_| Ok(vec![None]));
    }
    for op in [
        "Less",
        "LessEqual",
        "Greater",
        "GreaterEqual",
        "Equal",
        "NotEqual",
        "LogicalAnd",
        "LogicalOr",
        "LogicalNot",
        "IsNan",
        "IsInf",
        "IsFinite",
        "Range",
        "RandomUniform",
        "RandomStandardNormal",
        "TruncatedNormal",
        "RandomUniformInt",
    ] {
        r.not_differentiable(op);
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::Scope;
    use crate::gradients::registry::Lookup;
    use crate::gradients::{gradients, GradientRegistry};
    use crate::{ops, DType, Shape};

    #[test]
    fn every_foundation_op_has_a_gradient_or_is_declared_not_differentiable() {
        let r = GradientRegistry::global();
        let differentiable = [
            "Add",
            "AddV2",
            "AddN",
            "Sub",
            "Mul",
            "Div",
            "RealDiv",
            "Maximum",
            "Minimum",
            "Pow",
            "SquaredDifference",
            "Neg",
            "Abs",
            "Sign",
            "Exp",
            "Log",
            "Log1p",
            "Sqrt",
            "Rsqrt",
            "Square",
            "Reciprocal",
            "Tanh",
            "Sigmoid",
            "Relu",
            "Relu6",
            "Elu",
            "Softplus",
            "Softmax",
            "LogSoftmax",
            "SoftmaxCrossEntropyWithLogits",
            "SparseSoftmaxCrossEntropyWithLogits",
            "MatMul",
            "BatchMatMulV2",
            "BiasAdd",
            "L2Loss",
            "Sum",
            "Mean",
            "Max",
            "Min",
            "Prod",
            "Reshape",
            "Transpose",
            "ConcatV2",
            "Split",
            "SplitV",
            "Slice",
            "StridedSlice",
            "Gather",
            "GatherV2",
            "Pack",
            "Unpack",
            "ExpandDims",
            "Squeeze",
            "Tile",
            "Pad",
            "Fill",
            "Cast",
            "Select",
            "SelectV2",
            "Identity",
            "ReadVariableOp",
            "FloorMod",
        ];
        for op in differentiable {
            assert!(r.has_gradient(op), "{op} has no gradient function");
            assert!(
                crate::OpRegistry::global().contains(op),
                "{op} is not an op"
            );
        }
        let none = [
            "Less",
            "Equal",
            "LogicalAnd",
            "LogicalNot",
            "ArgMax",
            "ArgMin",
            "Shape",
            "Size",
            "Rank",
            "OneHot",
            "Range",
            "RandomUniform",
            "RandomStandardNormal",
            "ZerosLike",
            "OnesLike",
            "BroadcastGradientArgs",
            "VarHandleOp",
            "Assign",
        ];
        for op in none {
            assert!(
                matches!(r.lookup(op), Lookup::NotDifferentiable),
                "{op} should be declared not differentiable"
            );
        }
        // FloorDiv passes no gradient (TensorFlow's function returning None).
        assert!(r.has_gradient("FloorDiv"));
    }

    /// The number of nodes of each op type in the graph.
    fn count(s: &Scope, op: &str) -> usize {
        s.with_graph(|g| g.nodes().iter().filter(|n| n.op() == op).count())
    }

    #[test]
    fn known_shapes_fold_the_broadcast_arithmetic() {
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F32, Shape::known(&[2, 3])).unwrap();
        let y = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
        let z = ops::mul(&s, &x, &y).unwrap();
        let g = gradients(&s, &[z], &[x, y], None).unwrap();
        assert_eq!(g[0].as_ref().unwrap().shape(), Shape::known(&[2, 3]));
        assert_eq!(g[1].as_ref().unwrap().shape(), Shape::known(&[3]));
        assert_eq!(count(&s, "BroadcastGradientArgs"), 0);
        assert_eq!(count(&s, "Shape"), 0);
        // Unknown shapes compute the reduction axes at run time.
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
        let y = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
        let z = ops::mul(&s, &x, &y).unwrap();
        gradients(&s, &[z], &[x, y], None).unwrap();
        assert_eq!(count(&s, "BroadcastGradientArgs"), 1);
    }
}
