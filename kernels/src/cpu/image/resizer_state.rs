//! The validation and geometry the resize kernels share (TensorFlow's
//! `image_resizer_state.h`): the checks on images, sizes and attributes with
//! TensorFlow's messages, the float32 scale of each axis
//! ([`resize_scale`]) and the two ways an output index maps back into the input
//! ([`Sampling`]). All coordinate arithmetic is in `f32`, as TensorFlow's, so
//! indices and interpolation weights agree with it bit for bit.

use std::marker::PhantomData;

use graph::{Result, Status, Tensor};

use crate::op_kernel::OpKernelConstruction;

/// The `align_corners`/`half_pixel_centers` attributes of a resize node.
#[derive(Clone, Copy, Debug)]
pub struct ResizeFlags {
    /// Corner pixels of input and output coincide.
    pub align_corners: bool,
    /// Pixel centers at half-integer coordinates.
    pub half_pixel_centers: bool,
}

impl ResizeFlags {
    /// Reads the attributes (both default to false).
    pub fn from_attrs(c: &OpKernelConstruction<'_>) -> Result<ResizeFlags> {
        let get = |n: &str| -> Result<bool> {
            if c.node.attr.contains_key(n) {
                c.attr(n)
            } else {
                Ok(false)
            }
        };
        Ok(ResizeFlags {
            align_corners: get("align_corners")?,
            half_pixel_centers: get("half_pixel_centers")?,
        })
    }

    /// TensorFlow rejects `half_pixel_centers` together with `align_corners`.
    pub fn check(&self) -> Result<()> {
        if self.half_pixel_centers && self.align_corners {
            return Err(Status::invalid_argument(
                "If half_pixel_centers is True, align_corners must be False.",
            ));
        }
        Ok(())
    }

    /// How output indices map back into the input.
    pub fn sampling(&self) -> Sampling {
        if self.half_pixel_centers {
            Sampling::HalfPixel
        } else {
            Sampling::Legacy
        }
    }
}

/// A resize kernel over elements `T`; the marker `Op` says which of the four
/// ops it computes (each implements `OpKernel` in its own module).
pub struct ResizeKernel<T, Op> {
    /// The node's attributes.
    pub flags: ResizeFlags,
    _t: PhantomData<fn(T, Op)>,
}

impl<T, Op> ResizeKernel<T, Op> {
    /// The kernel of a node with these attributes.
    pub fn new(flags: ResizeFlags) -> ResizeKernel<T, Op> {
        ResizeKernel {
            flags,
            _t: PhantomData,
        }
    }
}

/// TensorFlow's `CalculateResizeScale`: input pixels per output pixel.
pub fn resize_scale(in_size: usize, out_size: usize, align_corners: bool) -> f32 {
    if align_corners && out_size > 1 {
        (in_size as i64 - 1) as f32 / (out_size - 1) as f32
    } else {
        in_size as f32 / out_size as f32
    }
}

/// Where an output index samples the input (TensorFlow's scalers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// `LegacyScaler`: `x * scale`.
    Legacy,
    /// `HalfPixelScaler`: `(x + 0.5) * scale - 0.5`.
    HalfPixel,
}

impl Sampling {
    /// The input coordinate of output index `x` for bilinear interpolation.
    pub fn bilinear(self, x: usize, scale: f32) -> f32 {
        match self {
            Sampling::Legacy => x as f32 * scale,
            Sampling::HalfPixel => (x as f32 + 0.5) * scale - 0.5,
        }
    }

    /// The input index of output index `x` for nearest-neighbour sampling,
    /// clamped to `[0, in_size)` (TensorFlow's `HalfPixelScalerForNN` keeps the
    /// 0.5 and floors; `align_corners` rounds half away from zero).
    pub fn nearest(self, x: usize, scale: f32, align_corners: bool, in_size: usize) -> usize {
        let v = match self {
            Sampling::Legacy => x as f32 * scale,
            Sampling::HalfPixel => (x as f32 + 0.5) * scale,
        };
        let i = if align_corners { v.round() } else { v.floor() } as i64;
        i.min(in_size as i64 - 1).max(0) as usize
    }
}

/// The input rows (or columns) one output row interpolates between, and the
/// weight of the second (TensorFlow's `CachedInterpolation`).
#[derive(Clone, Copy, Debug)]
pub struct Interpolation {
    /// The lower input index.
    pub lower: usize,
    /// The upper input index.
    pub upper: usize,
    /// The weight of `upper`.
    pub lerp: f32,
}

/// The interpolation of every output index along an axis of `in_size` inputs.
pub fn interpolations(
    sampling: Sampling,
    out_size: usize,
    in_size: usize,
    scale: f32,
) -> Vec<Interpolation> {
    (0..out_size)
        .map(|i| {
            let v = sampling.bilinear(i, scale);
            let f = v.floor();
            Interpolation {
                lower: (f as i64).max(0) as usize,
                upper: (v.ceil() as i64).min(in_size as i64 - 1).max(0) as usize,
                lerp: v - f,
            }
        })
        .collect()
}

/// An image batch and its requested size, validated as TensorFlow's
/// `ImageResizerState::ValidateAndCalculateOutputSize`.
#[derive(Clone, Copy, Debug)]
pub struct ResizerState {
    /// Images in the batch.
    pub batch: usize,
    /// Input height and width.
    pub in_height: usize,
    /// Input width.
    pub in_width: usize,
    /// Channels per pixel.
    pub channels: usize,
    /// Output height.
    pub out_height: usize,
    /// Output width.
    pub out_width: usize,
    /// Input rows per output row.
    pub height_scale: f32,
    /// Input columns per output column.
    pub width_scale: f32,
}

/// The `[height, width]` held by a `size` input, both positive, with
/// TensorFlow's messages (`positive` is the message for a value below 1).
pub fn read_size(size: &Tensor, positive: &str) -> Result<(usize, usize)> {
    if size.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "shape_t must be 1-dimensional{:?}",
            size.dims()
        )));
    }
    if size.num_elements() != 2 {
        return Err(Status::invalid_argument(format!(
            "shape_t must have two elements{:?}",
            size.dims()
        )));
    }
    let v = size.as_slice::<i32>()?;
    if v[0] <= 0 || v[1] <= 0 {
        return Err(Status::invalid_argument(positive.to_owned()));
    }
    Ok((v[0] as usize, v[1] as usize))
}

impl ResizerState {
    /// Validates `images` (`[batch, height, width, channels]`, non-empty
    /// image with at least one channel) and `size`.
    pub fn new(flags: ResizeFlags, images: &Tensor, size: &Tensor) -> Result<ResizerState> {
        flags.check()?;
        let d = images.dims();
        if d.len() != 4 {
            return Err(Status::invalid_argument(format!(
                "input must be 4-dimensional{d:?}"
            )));
        }
        if d[3] == 0 {
            return Err(Status::invalid_argument(
                "image must have at least one channel",
            ));
        }
        if d[1] == 0 || d[2] == 0 {
            return Err(Status::invalid_argument(
                "input image must be of non-zero size",
            ));
        }
        if d[1] >= i32::MAX as usize || d[2] >= i32::MAX as usize {
            return Err(Status::invalid_argument(
                "input sizes must be between 0 and max int32",
            ));
        }
        let (out_height, out_width) = read_size(size, "output dimensions must be positive")?;
        Ok(ResizerState {
            batch: d[0],
            in_height: d[1],
            in_width: d[2],
            channels: d[3],
            out_height,
            out_width,
            height_scale: resize_scale(d[1], out_height, flags.align_corners),
            width_scale: resize_scale(d[2], out_width, flags.align_corners),
        })
    }

    /// `[batch, out_height, out_width, channels]`.
    pub fn out_dims(&self) -> [usize; 4] {
        [self.batch, self.out_height, self.out_width, self.channels]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_and_indices_as_tensorflow() {
        assert_eq!(resize_scale(4, 8, false), 0.5);
        assert_eq!(resize_scale(4, 7, true), 0.5);
        assert_eq!(resize_scale(4, 1, true), 4.0);
        // Half-pixel sampling before the first center clamps to pixel 0 with a
        // weight on the (same) upper pixel.
        let i = interpolations(Sampling::HalfPixel, 8, 4, 0.5);
        assert_eq!((i[0].lower, i[0].upper, i[0].lerp), (0, 0, 0.75));
        assert_eq!((i[7].lower, i[7].upper), (3, 3));
        assert_eq!(Sampling::HalfPixel.nearest(0, 0.5, false, 4), 0);
        assert_eq!(Sampling::Legacy.nearest(3, 1.5, true, 4), 3); // round(4.5) = 5
        assert_eq!(Sampling::Legacy.nearest(1, 1.5, true, 4), 2); // round(1.5) = 2
    }

    #[test]
    fn sizes_must_be_two_positive_values() {
        assert_eq!(read_size(&Tensor::vector(&[3i32, 4]), "x").unwrap(), (3, 4));
        assert!(read_size(&Tensor::vector(&[3i32, 0]), "x").is_err());
        assert!(read_size(&Tensor::vector(&[3i32]), "x").is_err());
        assert!(read_size(&Tensor::scalar(3i32), "x").is_err());
    }
}
