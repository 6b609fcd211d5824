//! Gradients of the resize ops (TensorFlow's `image_grad.py`): `ResizeBilinear`
//! through `ResizeBilinearGrad` and `ResizeNearestNeighbor` through
//! `ResizeNearestNeighborGrad`, with the op's `align_corners` and
//! `half_pixel_centers`; the `size` input gets none. `ResizeBilinearGrad` is not
//! differentiable (as registered there); `ResizeNearestNeighborGrad` has no
//! gradient.

use crate::builder::Output;
use crate::gradients::math_grad::shapes::shape_of;
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops::{self, ResizeOptions};
use crate::{DType, Result};

type Grads = Result<Vec<Option<Output>>>;

/// `ResizeBilinear`: `ResizeBilinearGrad(grad, images)`.
fn resize_bilinear_grad(c: &GradContext<'_>) -> Grads {
    let o = ResizeOptions::from_node(c.node)?;
    let g = ops::resize_bilinear_grad(c.scope, &c.grad(0)?, &c.input(0)?, &o)?;
    Ok(vec![Some(g), None])
}

/// `ResizeNearestNeighbor`: `ResizeNearestNeighborGrad(grad, [height, width])`
/// of the image (a constant when its shape is known, else sliced from `Shape`).
fn resize_nearest_neighbor_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let image = c.input(0)?;
    let shape = image.shape();
    let size = match (shape.rank(), shape.dim(1), shape.dim(2)) {
        (Some(4), Some(h), Some(w)) => ops::index_vector(s, &[h as i64, w as i64])?,
        _ => {
            let shape = shape_of(s, &image, DType::I32)?;
            let (b, n) = (ops::index_vector(s, &[1])?, ops::index_vector(s, &[2])?);
            ops::slice(s, &shape, &b, &n)?
        }
    };
    let o = ResizeOptions::from_node(c.node)?;
    let g = ops::resize_nearest_neighbor_grad(s, &c.grad(0)?, &size, &o)?;
    Ok(vec![Some(g), None])
}

/// Registers the image gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("ResizeBilinear", resize_bilinear_grad);
    r.register("ResizeNearestNeighbor", resize_nearest_neighbor_grad);
    r.not_differentiable("ResizeBilinearGrad");
}
