//! Image resizing ops (TensorFlow's `image_ops.cc`): `ResizeBilinear`,
//! `ResizeBilinearGrad`, `ResizeNearestNeighbor` and `ResizeNearestNeighborGrad`,
//! with TensorFlow's attributes, type sets and shape functions, plus the
//! `tf.compat.v1.image`-style builders [`resize_bilinear`] and
//! [`resize_nearest_neighbor`].
//!
//! Images are `NHWC`; `size` is an int32 `[new_height, new_width]`.
//! `ResizeBilinear` always outputs float32, whatever the input type.
//!
//! # Examples
//! ```
//! use actorflow_graph::builder::Scope;
//! use actorflow_graph::ops::{self, ResizeOptions};
//! use actorflow_graph::{DType, Shape};
//!
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::U8, Shape::known(&[1, 4, 6, 3])).unwrap();
//! let size = ops::index_vector(&s, &[8, 12]).unwrap();
//! let y = ops::resize_bilinear(&s, &x, &size, &ResizeOptions::default()).unwrap();
//! assert_eq!((y.dtype(), y.shape()), (DType::F32, Shape::known(&[1, 8, 12, 3])));
//! ```

use crate::builder::{OpBuilder, Output, Scope};
use crate::op_def::shape_fn::{with_rank, with_value};
use crate::op_def::{InferenceContext, OpDef};
use crate::{NodeDef, OpRegistry, Result, Shape};

/// The input types of `ResizeBilinear` (TensorFlow lists `bfloat16` twice).
const RESIZE_BILINEAR_TYPES: &str =
    "{int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}";

/// The types of `ResizeNearestNeighbor`.
const RESIZE_NEAREST_TYPES: &str =
    "{int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}";

/// The types of `ResizeNearestNeighborGrad`.
const RESIZE_NEAREST_GRAD_TYPES: &str = "{uint8, int8, int32, half, float, double, bfloat16}";

/// Registers the image ops.
pub fn register_all_ops(r: &OpRegistry) {
    let flags = |b: crate::op_def::OpDefBuilder| {
        b.attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
    };
    r.register(
        flags(
            OpDef::build("ResizeBilinear")
                .input("images: T")
                .input("size: int32")
                .output("resized_images: float")
                .attr(&format!("T: {RESIZE_BILINEAR_TYPES}")),
        )
        .shape_fn(resize_shape),
    );
    r.register(
        flags(
            OpDef::build("ResizeBilinearGrad")
                .input("grads: float")
                .input("original_image: T")
                .output("output: T")
                .attr("T: {float, bfloat16, half, double}"),
        )
        .shape_fn(resize_bilinear_grad_shape),
    );
    r.register(
        flags(
            OpDef::build("ResizeNearestNeighbor")
                .input("images: T")
                .input("size: int32")
                .output("resized_images: T")
                .attr(&format!("T: {RESIZE_NEAREST_TYPES}")),
        )
        .shape_fn(resize_shape),
    );
    r.register(
        flags(
            OpDef::build("ResizeNearestNeighborGrad")
                .input("grads: T")
                .input("size: int32")
                .output("output: T")
                .attr(&format!("T: {RESIZE_NEAREST_GRAD_TYPES}")),
        )
        .shape_fn(resize_nearest_neighbor_grad_shape),
    );
}

/// The `[height, width]` held by the `size` input (rank 1, two elements): each
/// known when `size` is a constant (a negative value stays unknown; the kernel
/// rejects it).
fn sized(c: &InferenceContext<'_>, i: usize) -> Result<[Option<usize>; 2]> {
    let size = with_rank(&c.input(i), 1)?;
    with_value(size.dim(0), 2)?;
    let values = c
        .input_tensor(i)
        .and_then(|t| t.as_slice::<i32>().ok())
        .filter(|v| v.len() == 2);
    Ok(match values {
        Some(v) => [usize::try_from(v[0]).ok(), usize::try_from(v[1]).ok()],
        None => [None, None],
    })
}

/// TensorFlow's `ResizeShapeFn`: `[batch, height, width, channels]` with the
/// height and width from `size`.
fn resize_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = with_rank(&c.input(0), 4)?;
    let [h, w] = sized(c, 1)?;
    c.set_output(0, Shape::from_dims(&[input.dim(0), h, w, input.dim(3)]))
}

/// `ResizeBilinearGrad`: shaped like `original_image`.
fn resize_bilinear_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = c.input(1);
    c.set_output(0, s)
}

/// `ResizeNearestNeighborGrad`: `grads` (rank 4) with the height and width from
/// `size`.
fn resize_nearest_neighbor_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = with_rank(&c.input(0), 4)?;
    let [h, w] = sized(c, 1)?;
    c.set_output(0, Shape::from_dims(&[input.dim(0), h, w, input.dim(3)]))
}

/// The attributes shared by the resize ops, with TensorFlow's defaults (both
/// false). `half_pixel_centers` with `align_corners` is an `InvalidArgument` when
/// the kernel runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizeOptions {
    /// Maps the corner pixels of input and output onto each other (scale
    /// `(in - 1) / (out - 1)`).
    pub align_corners: bool,
    /// Pixel centers at half-integer coordinates (TensorFlow 2's `tf.image.resize`
    /// sampling).
    pub half_pixel_centers: bool,
}

impl ResizeOptions {
    /// The options of an existing resize node (for its gradient).
    pub fn from_node(node: &NodeDef) -> Result<ResizeOptions> {
        Ok(ResizeOptions {
            align_corners: node.get_attr_or("align_corners", false)?,
            half_pixel_centers: node.get_attr_or("half_pixel_centers", false)?,
        })
    }

    fn apply(&self, b: OpBuilder) -> OpBuilder {
        b.attr("align_corners", self.align_corners)
            .attr("half_pixel_centers", self.half_pixel_centers)
    }
}

/// `ResizeBilinear` (`tf.compat.v1.image.resize_bilinear`): `images`
/// `[batch, height, width, channels]` of any real type, resized to the int32
/// `[new_height, new_width]` held by `size` by bilinear interpolation; float32.
pub fn resize_bilinear(
    s: &Scope,
    images: &Output,
    size: &Output,
    o: &ResizeOptions,
) -> Result<Output> {
    o.apply(s.op("ResizeBilinear").input(images).input(size))
        .build1()
}

/// `ResizeBilinearGrad`: the gradient of `ResizeBilinear` (float32 `grads`) with
/// respect to `original_image`, in its type.
pub fn resize_bilinear_grad(
    s: &Scope,
    grads: &Output,
    original_image: &Output,
    o: &ResizeOptions,
) -> Result<Output> {
    o.apply(
        s.op("ResizeBilinearGrad")
            .input(grads)
            .input(original_image),
    )
    .build1()
}

/// `ResizeNearestNeighbor` (`tf.compat.v1.image.resize_nearest_neighbor`):
/// `images` resized to `size` by copying the nearest input pixel; same type.
pub fn resize_nearest_neighbor(
    s: &Scope,
    images: &Output,
    size: &Output,
    o: &ResizeOptions,
) -> Result<Output> {
    o.apply(s.op("ResizeNearestNeighbor").input(images).input(size))
        .build1()
}

/// `ResizeNearestNeighborGrad`: each pixel of `grads` summed into the input pixel
/// it was copied from, for an input of spatial `size`.
pub fn resize_nearest_neighbor_grad(
    s: &Scope,
    grads: &Output,
    size: &Output,
    o: &ResizeOptions,
) -> Result<Output> {
    o.apply(s.op("ResizeNearestNeighborGrad").input(grads).input(size))
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ops, Code, DType, Tensor};

    use crate::ops::testing::placeholder_of as ph;

    #[test]
    fn resize_shapes_and_types() {
        let s = Scope::new();
        let o = ResizeOptions::default();
        let x = ph(&s, DType::I32, &[Some(2), Some(5), Some(7), Some(3)]);
        let size = ops::index_vector(&s, &[3, 9]).unwrap();
        let y = resize_bilinear(&s, &x, &size, &o).unwrap();
        assert_eq!(y.dtype(), DType::F32);
        assert_eq!(y.shape(), Shape::known(&[2, 3, 9, 3]));
        let y = resize_nearest_neighbor(&s, &x, &size, &o).unwrap();
        assert_eq!(y.dtype(), DType::I32);
        assert_eq!(y.shape(), Shape::known(&[2, 3, 9, 3]));
        let fed = ops::placeholder(&s, DType::I32, Shape::known(&[2])).unwrap();
        let y = resize_bilinear(&s, &x, &fed, &o).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[Some(2), None, None, Some(3)]));
        let g = ph(&s, DType::F32, &[Some(2), Some(3), Some(9), Some(3)]);
        let xf = ph(&s, DType::F64, &[Some(2), Some(5), Some(7), Some(3)]);
        let dx = resize_bilinear_grad(&s, &g, &xf, &o).unwrap();
        assert_eq!((dx.dtype(), dx.shape()), (DType::F64, xf.shape()));
        let hw = ops::index_vector(&s, &[5, 7]).unwrap();
        let dx = resize_nearest_neighbor_grad(&s, &g, &hw, &o).unwrap();
        assert_eq!(dx.shape(), Shape::known(&[2, 5, 7, 3]));
        let n = s.graph_def().find(dx.op().name()).cloned().unwrap();
        assert_eq!(ResizeOptions::from_node(&n).unwrap(), o);
    }

    #[test]
    fn resize_rejects_what_tensorflow_rejects() {
        let s = Scope::new();
        let o = ResizeOptions {
            align_corners: true,
            half_pixel_centers: false,
        };
        let size = ops::index_vector(&s, &[3, 9]).unwrap();
        let x3 = ph(&s, DType::F32, &[Some(5), Some(7), Some(3)]);
        let e = resize_bilinear(&s, &x3, &size, &o).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let x = ph(&s, DType::F32, &[Some(1), Some(5), Some(7), Some(3)]);
        let three = ops::index_vector(&s, &[3, 9, 1]).unwrap();
        let e = resize_nearest_neighbor(&s, &x, &three, &o).unwrap_err();
        assert!(e.message().contains("Dimension must be 2 but is 3"), "{e}");
        let m = ops::constant(&s, Tensor::new(&[1, 2], vec![3i32, 9]).unwrap()).unwrap();
        assert!(resize_bilinear(&s, &x, &m, &o).is_err());
        // The types TensorFlow lists: no bool images, no int64 nearest gradients.
        let b = ph(&s, DType::Bool, &[Some(1), Some(2), Some(2), Some(1)]);
        assert!(resize_nearest_neighbor(&s, &b, &size, &o).is_err());
        let i = ph(&s, DType::I64, &[Some(1), Some(2), Some(2), Some(1)]);
        assert!(resize_nearest_neighbor_grad(&s, &i, &size, &o).is_err());
        let i = ph(&s, DType::I32, &[Some(1), Some(2), Some(2), Some(1)]);
        let g = ph(&s, DType::F32, &[Some(1), Some(2), Some(2), Some(1)]);
        assert!(resize_bilinear_grad(&s, &g, &i, &o).is_err());
    }
}
