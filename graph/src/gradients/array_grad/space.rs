//! Gradients of the ops that move blocks between space, batch and depth: each is
//! the opposite op applied to the gradient, as TensorFlow's `array_grad.py` builds
//! it (`SpaceToBatch`/`BatchToSpace` through the `ND` forms with an int64 block
//! `[block_size, block_size]`); the block shape, paddings and crops get none.

use crate::builder::Output;
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{Result, Tensor};

type Grads = Result<Vec<Option<Output>>>;

/// `SpaceToBatchND`: `BatchToSpaceND(grad, block_shape, paddings)`.
fn space_to_batch_nd_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::batch_to_space_nd(c.scope, &c.grad(0)?, &c.input(1)?, &c.input(2)?)?;
    Ok(vec![Some(g), None, None])
}

/// `BatchToSpaceND`: `SpaceToBatchND(grad, block_shape, crops)`.
fn batch_to_space_nd_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::space_to_batch_nd(c.scope, &c.grad(0)?, &c.input(1)?, &c.input(2)?)?;
    Ok(vec![Some(g), None, None])
}

/// The int64 `[block_size, block_size]` of a 4-D form.
fn square_block(c: &GradContext<'_>) -> Result<Output> {
    let b: i64 = c.node.get_attr("block_size")?;
    ops::constant(c.scope, Tensor::vector(&[b, b]))
}

/// `SpaceToBatch`: `BatchToSpaceND(grad, [b, b], paddings)`.
fn space_to_batch_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::batch_to_space_nd(c.scope, &c.grad(0)?, &square_block(c)?, &c.input(1)?)?;
    Ok(vec![Some(g), None])
}

/// `BatchToSpace`: `SpaceToBatchND(grad, [b, b], crops)`.
fn batch_to_space_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::space_to_batch_nd(c.scope, &c.grad(0)?, &square_block(c)?, &c.input(1)?)?;
    Ok(vec![Some(g), None])
}

/// `SpaceToDepth` and `DepthToSpace`: the other one, same block and format
/// (`NCHW_VECT_C`, which needs qint8, has none, as in TensorFlow).
fn depth_grad(c: &GradContext<'_>, to_depth: bool) -> Grads {
    let b: i64 = c.node.get_attr("block_size")?;
    let format: String = c.node.get_attr_or("data_format", "NHWC".to_owned())?;
    if format == "NCHW_VECT_C" {
        return Err(crate::Status::invalid_argument(format!(
            "Cannot compute {} gradient with NCHW_VECT_C. NCHW_VECT_C requires qint8 data type.",
            c.node.op
        )));
    }
    let g = c.grad(0)?;
    let g = if to_depth {
        ops::space_to_depth(c.scope, &g, b, &format)?
    } else {
        ops::depth_to_space(c.scope, &g, b, &format)?
    };
    Ok(vec![Some(g)])
}

pub(super) fn register(r: &GradientRegistry) {
    r.register("SpaceToBatchND", space_to_batch_nd_grad);
    r.register("BatchToSpaceND", batch_to_space_nd_grad);
    r.register("SpaceToBatch", space_to_batch_grad);
    r.register("BatchToSpace", batch_to_space_grad);
    r.register("SpaceToDepth", |c| depth_grad(c, false));
    r.register("DepthToSpace", |c| depth_grad(c, true));
}
