//! Gradients of the neural-network ops (TensorFlow's `nn_grad.py`): the
//! activations through their gradient kernels (`ReluGrad`, `EluGrad`, …, and the
//! second-order gradients of those kernels), `Softmax`, `LogSoftmax`, the two
//! softmax cross-entropies (with the second-order term TensorFlow adds when the
//! `backprop` output is itself differentiated), `BiasAdd` (via `BiasAddGrad`),
//! `L2Loss` and `TopKV2`.

use crate::builder::{Output, Scope};
use crate::gradients::math_grad::shapes::{int_const, shape_of};
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{DType, Result};

type Grads = Result<Vec<Option<Output>>>;

/// `[kernel(g, features)]`, where `features` is the op's input or output.
fn activation_grad(c: &GradContext<'_>, kernel: &str, use_output: bool) -> Grads {
    let f = if use_output {
        c.output(0)?
    } else {
        c.input(0)?
    };
    let mut b = c.scope.op(kernel).input(&c.grad(0)?).input(&f);
    if kernel == "LeakyReluGrad" {
        b = b.attr("alpha", c.node.get_attr_or("alpha", 0.2f32)?);
    }
    Ok(vec![Some(b.build1()?)])
}

fn relu_grad(c: &GradContext<'_>) -> Grads {
    activation_grad(c, "ReluGrad", true)
}
fn relu6_grad(c: &GradContext<'_>) -> Grads {
    activation_grad(c, "Relu6Grad", false)
}
fn elu_grad(c: &GradContext<'_>) -> Grads {
    activation_grad(c, "EluGrad", true)
}
fn selu_grad(c: &GradContext<'_>) -> Grads {
    activation_grad(c, "SeluGrad", true)
}
fn softplus_grad(c: &GradContext<'_>) -> Grads {
    activation_grad(c, "SoftplusGrad", false)
}
fn softsign_grad(c: &GradContext<'_>) -> Grads {
    activation_grad(c, "SoftsignGrad", false)
}
fn leaky_relu_grad(c: &GradContext<'_>) -> Grads {
    activation_grad(c, "LeakyReluGrad", false)
}

/// Second order of the piecewise-linear activations: `ReluGrad(g, x) = g * mask(x)`
/// is linear in `g` (the same kernel again) and flat in `x`.
fn piecewise_grad_grad(c: &GradContext<'_>) -> Grads {
    let x = c.input(1)?;
    let mut b = c.scope.op(c.op.op_type()).input(&c.grad(0)?).input(&x);
    if c.op.op_type() == "LeakyReluGrad" {
        b = b.attr("alpha", c.node.get_attr_or("alpha", 0.2f32)?);
    }
    Ok(vec![Some(b.build1()?), Some(ops::zeros_like(c.scope, &x)?)])
}

/// Second order of `EluGrad(g, y)`: `(EluGrad(g2, y), g2 * g where y < 0)`.
fn elu_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (g, y, g2) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let zero = super::math_grad::shapes::float_scalar(s, 0.0, y.dtype())?;
    let neg = ops::less(s, &y, &zero)?;
    let gy = ops::select_v2(s, &neg, &ops::mul(s, &g2, &g)?, &ops::zeros_like(s, &y)?)?;
    Ok(vec![Some(ops::elu_grad(s, &g2, &y)?), Some(gy)])
}

/// Second order of `SeluGrad(g, y)`: `(SeluGrad(g2, y), g2 * g where y < 0)`.
fn selu_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (g, y, g2) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let zero = super::math_grad::shapes::float_scalar(s, 0.0, y.dtype())?;
    let neg = ops::less(s, &y, &zero)?;
    let gy = ops::select_v2(s, &neg, &ops::mul(s, &g2, &g)?, &ops::zeros_like(s, &y)?)?;
    Ok(vec![Some(ops::selu_grad(s, &g2, &y)?), Some(gy)])
}

/// Second order of `SoftplusGrad(g, x) = g / (1 + e^-x)`:
/// `(SoftplusGrad(g2, x), g2 g / (e^-x + 2 + e^x))`.
fn softplus_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (g, x, g2) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let two = super::math_grad::shapes::float_scalar(s, 2.0, x.dtype())?;
    let e_neg = ops::exp(s, &ops::neg(s, &x)?)?;
    let denom = ops::add(s, &ops::add(s, &e_neg, &two)?, &ops::exp(s, &x)?)?;
    let d2x = ops::real_div(s, &ops::mul(s, &g2, &g)?, &denom)?;
    Ok(vec![Some(ops::softplus_grad(s, &g2, &x)?), Some(d2x)])
}

/// `(g - sum(g * y, -1)) * y` for `y = softmax(x)`.
fn softmax_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (y, g) = (c.output(0)?, c.grad(0)?);
    let dot = ops::sum_axes(s, &ops::mul(s, &g, &y)?, &[-1], true)?;
    Ok(vec![Some(ops::mul(s, &ops::sub(s, &g, &dot)?, &y)?)])
}

/// `g - sum(g, -1) * exp(y)` for `y = log_softmax(x)`.
fn log_softmax_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (y, g) = (c.output(0)?, c.grad(0)?);
    let total = ops::sum_axes(s, &g, &[-1], true)?;
    let softmax = ops::exp(s, &y)?;
    Ok(vec![Some(ops::sub(
        s,
        &g,
        &ops::mul(s, &total, &softmax)?,
    )?)])
}

/// `expand_dims(v, -1) * m` (TensorFlow's `_BroadcastMul`).
fn broadcast_mul(s: &Scope, v: &Output, m: &Output) -> Result<Output> {
    ops::mul(s, &ops::expand_dims_at(s, v, -1)?, m)
}

/// The logits gradient of both cross-entropies: `g_loss * backprop`, plus, when
/// the `backprop` output has a gradient `gg`, `(gg - sum(gg * p, -1)) * p` for
/// `p = softmax(logits)`.
fn xent_logits_grad(c: &GradContext<'_>) -> Result<Output> {
    let s = c.scope;
    let grad = broadcast_mul(s, &c.grad(0)?, &c.output(1)?)?;
    match c.grads.get(1).cloned().flatten() {
        None => Ok(grad),
        Some(gg) => {
            let p = ops::softmax(s, &c.input(0)?)?;
            let dot = ops::sum_axes(s, &ops::mul(s, &gg, &p)?, &[-1], true)?;
            let extra = ops::mul(s, &ops::sub(s, &gg, &dot)?, &p)?;
            ops::add(s, &grad, &extra)
        }
    }
}

/// `SoftmaxCrossEntropyWithLogits`: logits as above; labels `-g_loss * log_softmax`,
/// minus the `backprop` output's gradient when it has one (`backprop = p - labels`;
/// TensorFlow leaves that term out, which the numerical check shows is needed).
fn softmax_xent_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let logits_grad = xent_logits_grad(c)?;
    let log_p = ops::neg(s, &ops::log_softmax(s, &c.input(0)?)?)?;
    let mut labels_grad = broadcast_mul(s, &c.grad(0)?, &log_p)?;
    if let Some(gg) = c.grads.get(1).cloned().flatten() {
        labels_grad = ops::sub(s, &labels_grad, &gg)?;
    }
    Ok(vec![Some(logits_grad), Some(labels_grad)])
}

/// `SparseSoftmaxCrossEntropyWithLogits`: logits as above; integer labels get none.
fn sparse_softmax_xent_grad(c: &GradContext<'_>) -> Grads {
    Ok(vec![Some(xent_logits_grad(c)?), None])
}

/// `BiasAdd`: the value gets the gradient, the bias its sum over all but the
/// channel dimension.
fn bias_add_grad(c: &GradContext<'_>) -> Grads {
    let g = c.grad(0)?;
    let format: String = c.node.get_attr_or("data_format", "NHWC".to_owned())?;
    let gb = ops::bias_add_grad(c.scope, &g, &format)?;
    Ok(vec![Some(g), Some(gb)])
}

/// Second order of `BiasAddGrad`: the bias-shaped gradient broadcast back along
/// the channel dimension.
fn bias_add_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, g) = (c.input(0)?, c.grad(0)?);
    let format: String = c.node.get_attr_or("data_format", "NHWC".to_owned())?;
    let shape = ops::shape(s, &x)?;
    let g = if format == "NCHW" {
        // [C] -> [C, 1, …, 1] (rank(x) - 1 dimensions).
        let tail = match x.shape().rank() {
            Some(r) => int_const(s, &vec![1; r.saturating_sub(2)], DType::I32)?,
            None => {
                let n = ops::sub(s, &ops::rank(s, &x)?, &ops::scalar(s, 2i32)?)?;
                ops::fill(s, &ops::expand_dims_at(s, &n, 0)?, &ops::scalar(s, 1i32)?)?
            }
        };
        let dims = ops::concat_along(s, &[ops::index_vector(s, &[-1])?, tail], 0)?;
        ops::reshape(s, &g, &dims)?
    } else {
        g
    };
    Ok(vec![Some(ops::broadcast_to(s, &g, &shape)?)])
}

/// `L2Loss`: `x * g`.
fn l2_loss_grad(c: &GradContext<'_>) -> Grads {
    Ok(vec![Some(ops::mul(c.scope, &c.input(0)?, &c.grad(0)?)?)])
}

/// `TopKV2` (TensorFlow's `_TopKGrad`): the values' gradient scattered to the
/// selected positions (`row * n + index` in the flattened input) with one
/// `ScatterNd`; `k` gets none.
fn top_k_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, idx) = (c.input(0)?, c.output(1)?);
    let in_shape = shape_of(s, &x, DType::I64)?;
    let last = |shape: &Output| -> Result<Output> {
        let at = ops::sub(s, &ops::size(s, shape)?, &ops::scalar(s, 1i32)?)?;
        ops::gather_along(s, shape, &at, 0)
    };
    let k = last(&shape_of(s, &idx, DType::I64)?)?;
    let n = last(&in_shape)?;
    let rows_by_k = ops::pack(s, &[ops::scalar(s, -1i64)?, k], 0)?;
    let ind_2d = ops::reshape(s, &ops::cast(s, &idx, DType::I64)?, &rows_by_k)?;
    let rows = ops::gather_along(
        s,
        &ops::shape_typed(s, &ind_2d, DType::I64)?,
        &ops::scalar(s, 0i32)?,
        0,
    )?;
    let starts = ops::range(s, &ops::scalar(s, 0i64)?, &ops::mul(s, &rows, &n)?, &n)?;
    let flat = ops::add(s, &ind_2d, &ops::expand_dims_at(s, &starts, 1)?)?;
    let flat = ops::expand_dims_at(s, &ops::reshape_to(s, &flat, &[-1])?, 1)?;
    let total = ops::prod_axes(s, &in_shape, &[0], true)?;
    let values = ops::reshape_to(s, &c.grad(0)?, &[-1])?;
    let g = ops::scatter_nd(s, &flat, &values, &total)?;
    Ok(vec![Some(ops::reshape(s, &g, &in_shape)?), None])
}

/// Registers the nn gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("Relu", relu_grad);
    r.register("Relu6", relu6_grad);
    r.register("Elu", elu_grad);
    r.register("Selu", selu_grad);
    r.register("Softplus", softplus_grad);
    r.register("Softsign", softsign_grad);
    r.register("LeakyRelu", leaky_relu_grad);
    for op in ["ReluGrad", "Relu6Grad", "LeakyReluGrad"] {
        r.register(op, piecewise_grad_grad);
    }
    r.register("EluGrad", elu_grad_grad);
    r.register("SeluGrad", selu_grad_grad);
    r.register("SoftplusGrad", softplus_grad_grad);
    r.register("Softmax", softmax_grad);
    r.register("LogSoftmax", log_softmax_grad);
    r.register("SoftmaxCrossEntropyWithLogits", softmax_xent_grad);
    r.register(
        "SparseSoftmaxCrossEntropyWithLogits",
        sparse_softmax_xent_grad,
    );
    r.register("BiasAdd", bias_add_grad);
    r.register("BiasAddV1", bias_add_grad);
    r.register("BiasAddGrad", bias_add_grad_grad);
    r.register("L2Loss", l2_loss_grad);
    r.register("TopKV2", top_k_grad);
}
