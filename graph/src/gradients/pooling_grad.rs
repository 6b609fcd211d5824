//! Gradients of the pooling and normalization ops (TensorFlow's `nn_grad.py`):
//! `MaxPool`/`MaxPoolV2` through `MaxPoolGrad`/`MaxPoolGradV2`, `MaxPoolGrad`
//! through `MaxPoolGradGrad`, `MaxPoolWithArgmax` through `MaxPoolGradWithArgmax`,
//! `AvgPool` through `AvgPoolGrad` (and back through `AvgPool`), the three
//! `FusedBatchNorm` versions through the matching `FusedBatchNormGrad` (inference
//! gradients computed in `NHWC`, as TensorFlow transposes for its CPU kernel), and
//! `LRN` through `LRNGrad`.

use crate::builder::{OpBuilder, Output};
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{AttrValue, Result};

type Grads = Result<Vec<Option<Output>>>;

/// Copies the named attributes of the differentiated op onto `b`.
fn copy_attrs(c: &GradContext<'_>, mut b: OpBuilder, names: &[&str]) -> Result<OpBuilder> {
    for n in names {
        if let Some(v) = c.node.attr.get(n) {
            b = b.attr(n, v.clone());
        }
    }
    Ok(b)
}

/// `MaxPool`: `MaxPoolGrad(x, y, g)` with the op's window.
fn max_pool_grad(c: &GradContext<'_>) -> Grads {
    let b = c
        .scope
        .op("MaxPoolGrad")
        .input(&c.input(0)?)
        .input(&c.output(0)?)
        .input(&c.grad(0)?);
    let b = copy_attrs(
        c,
        b,
        &[
            "ksize",
            "strides",
            "padding",
            "explicit_paddings",
            "data_format",
        ],
    )?;
    Ok(vec![Some(b.build1()?)])
}

/// `MaxPoolV2`: `MaxPoolGradV2`; the window inputs get none.
fn max_pool_v2_grad(c: &GradContext<'_>) -> Grads {
    let b = c
        .scope
        .op("MaxPoolGradV2")
        .input(&c.input(0)?)
        .input(&c.output(0)?)
        .input(&c.grad(0)?)
        .input(&c.input(1)?)
        .input(&c.input(2)?);
    let b = copy_attrs(c, b, &["padding", "data_format"])?;
    Ok(vec![Some(b.build1()?), None, None])
}

/// `MaxPoolGrad(x, y, g)`: zeros for `x` and `y`, `MaxPoolGradGrad(x, y, gg)` for
/// `g`.
fn max_pool_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, y) = (c.input(0)?, c.input(1)?);
    let b = s
        .op("MaxPoolGradGrad")
        .input(&x)
        .input(&y)
        .input(&c.grad(0)?);
    let b = copy_attrs(c, b, &["ksize", "strides", "padding", "data_format"])?;
    Ok(vec![
        Some(ops::zeros_like(s, &x)?),
        Some(ops::zeros_like(s, &y)?),
        Some(b.build1()?),
    ])
}

/// `MaxPoolGradGrad(x, y, g)`: zeros for `x` and `y`, `MaxPoolGrad(x, y, gg)` for
/// `g`.
fn max_pool_grad_grad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, y) = (c.input(0)?, c.input(1)?);
    let b = s.op("MaxPoolGrad").input(&x).input(&y).input(&c.grad(0)?);
    let b = copy_attrs(c, b, &["ksize", "strides", "padding", "data_format"])?;
    Ok(vec![
        Some(ops::zeros_like(s, &x)?),
        Some(ops::zeros_like(s, &y)?),
        Some(b.build1()?),
    ])
}

/// `MaxPoolWithArgmax`: `MaxPoolGradWithArgmax(x, g, argmax)`.
fn max_pool_with_argmax_grad(c: &GradContext<'_>) -> Grads {
    let b = c
        .scope
        .op("MaxPoolGradWithArgmax")
        .input(&c.input(0)?)
        .input(&c.grad(0)?)
        .input(&c.output(1)?);
    let b = copy_attrs(
        c,
        b,
        &["ksize", "strides", "padding", "include_batch_in_index"],
    )?;
    Ok(vec![Some(b.build1()?)])
}

/// `AvgPool`: `AvgPoolGrad(shape(x), g)`.
fn avg_pool_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let shape = ops::shape(s, &c.input(0)?)?;
    let b = s.op("AvgPoolGrad").input(&shape).input(&c.grad(0)?);
    let b = copy_attrs(c, b, &["ksize", "strides", "padding", "data_format"])?;
    Ok(vec![Some(b.build1()?)])
}

/// `AvgPoolGrad(shape, g)`: none for the shape, `AvgPool(gg)` for `g`.
fn avg_pool_grad_grad(c: &GradContext<'_>) -> Grads {
    let b = c.scope.op("AvgPool").input(&c.grad(0)?);
    let b = copy_attrs(c, b, &["ksize", "strides", "padding", "data_format"])?;
    Ok(vec![None, Some(b.build1()?)])
}

/// `LRN`: `LRNGrad(g, x, y)`.
fn lrn_grad(c: &GradContext<'_>) -> Grads {
    let b = c
        .scope
        .op("LRNGrad")
        .input(&c.grad(0)?)
        .input(&c.input(0)?)
        .input(&c.output(0)?);
    let b = copy_attrs(c, b, &["depth_radius", "bias", "alpha", "beta"])?;
    Ok(vec![Some(b.build1()?)])
}

/// TensorFlow's `_BaseFusedBatchNormGrad`: in training, the grad op of the same
/// version on the saved statistics (`reserve_space_1`/`_2`, and V3's
/// `reserve_space_3`); in inference, on the population `mean`/`variance` inputs,
/// in `NHWC` (`NDHWC`), transposing channel-first tensors there and back.
fn fused_batch_norm_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let op = c.op.op_type();
    let grad_op = match op {
        "FusedBatchNorm" => "FusedBatchNormGrad",
        "FusedBatchNormV2" => "FusedBatchNormGradV2",
        _ => "FusedBatchNormGradV3",
    };
    let v3 = grad_op == "FusedBatchNormGradV3";
    let is_training: bool = c.node.get_attr_or("is_training", true)?;
    let format: String = c.node.get_attr_or("data_format", "NHWC".to_owned())?;
    let epsilon: f32 = c.node.get_attr_or("epsilon", 0.0001f32)?;
    let (mut x, mut dy) = (c.input(0)?, c.grad(0)?);
    let scale = c.input(1)?;
    let (rs1, rs2, fmt) = if is_training {
        (c.output(3)?, c.output(4)?, format.clone())
    } else {
        let (to_last, fmt) = match format.as_str() {
            "NCHW" => (Some(vec![0, 2, 3, 1]), "NHWC"),
            "NCDHW" => (Some(vec![0, 2, 3, 4, 1]), "NDHWC"),
            "NDHWC" => (None, "NDHWC"),
            _ => (None, "NHWC"),
        };
        if let Some(p) = &to_last {
            x = ops::transpose_perm(s, &x, p)?;
            dy = ops::transpose_perm(s, &dy, p)?;
        }
        (c.input(3)?, c.input(4)?, fmt.to_owned())
    };
    let mut b = s
        .op(grad_op)
        .input(&dy)
        .input(&x)
        .input(&scale)
        .input(&rs1)
        .input(&rs2);
    if v3 {
        b = b.input(&c.output(5)?);
    }
    let grad = b
        .attr("epsilon", epsilon)
        .attr("data_format", AttrValue::from(fmt.as_str()))
        .attr("is_training", is_training)
        .build()?;
    let mut dx = grad.output(0)?;
    if !is_training {
        match format.as_str() {
            "NCHW" => dx = ops::transpose_perm(s, &dx, &[0, 3, 1, 2])?,
            "NCDHW" => dx = ops::transpose_perm(s, &dx, &[0, 4, 1, 2, 3])?,
            _ => {}
        }
    }
    Ok(vec![
        Some(dx),
        Some(grad.output(1)?),
        Some(grad.output(2)?),
        None,
        None,
    ])
}

/// Registers the pooling and normalization gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("MaxPool", max_pool_grad);
    r.register("MaxPoolV2", max_pool_v2_grad);
    r.register("MaxPoolGrad", max_pool_grad_grad);
    r.register("MaxPoolGradGrad", max_pool_grad_grad_grad);
    r.register("MaxPoolWithArgmax", max_pool_with_argmax_grad);
    r.register("AvgPool", avg_pool_grad);
    r.register("AvgPoolGrad", avg_pool_grad_grad);
    r.register("LRN", lrn_grad);
    for op in ["FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"] {
        r.register(op, fused_batch_norm_grad);
    }
}
