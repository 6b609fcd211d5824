//! The window of a convolution kernel: its attributes read and checked once when
//! the kernel is built (TensorFlow's `InitConv2DParameters` and the backprop ops'
//! constructors), and the geometry of one call (`ComputeConv2DDimension`,
//! `ConvBackpropComputeDimensionsV2`): sizes, strides, dilations and the padding
//! before each spatial dimension, all in `NHWC`.
//!
//! Errors carry TensorFlow's canonical codes and messages.

use graph::{Result, Status, Tensor, TensorShape};

use crate::op_kernel::OpKernelConstruction;

/// The padding scheme.
#[derive(Clone, Debug, PartialEq)]
pub enum Padding {
    /// Output size `ceil(in / stride)`, padding split with the extra row after.
    Same,
    /// No padding.
    Valid,
    /// `(before, after)` for the rows and the columns.
    Explicit([(i64, i64); 2]),
}

/// The checked attributes of a convolution node.
#[derive(Clone, Debug)]
pub struct ConvAttrs {
    /// `(rows, cols)` strides, positive.
    pub strides: [i64; 2],
    /// `(rows, cols)` dilations, positive.
    pub dilations: [i64; 2],
    /// The padding.
    pub padding: Padding,
    /// The `data_format` is `NCHW`.
    pub nchw: bool,
}

/// Which kernel reads the attributes: the checks differ slightly by family.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Family {
    /// `Conv2D`.
    Conv2D,
    /// `Conv2DBackpropInput` and `Conv2DBackpropFilter`.
    Conv2DBackprop,
    /// The three depthwise ops.
    Depthwise,
}

impl ConvAttrs {
    /// Reads `strides`, `dilations`, `padding`, `explicit_paddings` and
    /// `data_format` with TensorFlow's checks for `family`.
    pub fn read(c: &OpKernelConstruction<'_>, family: Family) -> Result<ConvAttrs> {
        let format: String = c.attr("data_format")?;
        let nchw = match format.as_str() {
            "NHWC" => false,
            "NCHW" => true,
            _ => return Err(Status::invalid_argument("Invalid data format")),
        };
        let strides: Vec<i64> = c.attr("strides")?;
        let dilations: Vec<i64> = c.attr("dilations")?;
        if strides.len() != 4 {
            return Err(Status::invalid_argument(
                "Sliding window strides field must specify 4 dimensions",
            ));
        }
        let (h, w, n, ch) = if nchw { (2, 3, 0, 1) } else { (1, 2, 0, 3) };
        // Conv2D and its gradients answer Unimplemented here, the depthwise ops
        // InvalidArgument.
        let unsupported = |msg: &str| match family {
            Family::Depthwise => Status::invalid_argument(msg),
            _ => Status::unimplemented(msg),
        };
        if strides[n] != 1 || strides[ch] != 1 {
            return Err(unsupported(
                "Current implementation does not yet support strides in the batch and depth dimensions.",
            ));
        }
        if dilations.len() != 4 {
            return Err(Status::invalid_argument(
                "Sliding window dilations field must specify 4 dimensions",
            ));
        }
        if dilations[n] != 1 || dilations[ch] != 1 {
            return Err(unsupported(
                "Current implementation does not yet support dilations in the batch and depth dimensions.",
            ));
        }
        if family == Family::Depthwise {
            // Non-positive strides fail when the output size is computed.
            if strides[h] != strides[w] {
                return Err(Status::invalid_argument(
                    "Current implementation only supports equal length strides in the row and column dimensions.",
                ));
            }
        } else {
            if strides[h] <= 0 || strides[w] <= 0 {
                return Err(Status::invalid_argument(
                    "Row and column strides should be larger than 0.",
                ));
            }
            if dilations[h] <= 0 || dilations[w] <= 0 {
                return Err(Status::invalid_argument(
                    "Dilated rates should be larger than 0.",
                ));
            }
        }
        let padding_attr: String = c.attr("padding")?;
        let explicit: Vec<i64> = c.attr("explicit_paddings")?;
        let padding = match padding_attr.as_str() {
            "SAME" | "VALID" if !explicit.is_empty() => {
                return Err(Status::invalid_argument(
                    "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT",
                ))
            }
            "SAME" => Padding::Same,
            "VALID" => Padding::Valid,
            "EXPLICIT" => {
                if explicit.len() != 8 {
                    return Err(Status::invalid_argument(format!(
                        "explicit_paddings attribute must contain 8 values, but got: {}",
                        explicit.len()
                    )));
                }
                if explicit.iter().any(|&p| p < 0) {
                    return Err(Status::invalid_argument(
                        "All elements of explicit_paddings must be nonnegative",
                    ));
                }
                let pair = |d: usize| (explicit[2 * d], explicit[2 * d + 1]);
                if pair(n) != (0, 0) || pair(ch) != (0, 0) {
                    return Err(Status::invalid_argument(
                        "Nonzero explicit padding in the batch or depth dimensions is not supported",
                    ));
                }
                Padding::Explicit([pair(h), pair(w)])
            }
            other => {
                return Err(Status::invalid_argument(format!(
                    "Unknown padding type: {other}"
                )))
            }
        };
        Ok(ConvAttrs {
            strides: [strides[h], strides[w]],
            dilations: [dilations[h], dilations[w]],
            padding,
            nchw,
        })
    }

    /// The output size and the padding before it along spatial dimension `d`
    /// (TensorFlow's `GetWindowedOutputSizeVerbose`), or `InvalidArgument` when the
    /// output size would be negative.
    pub fn output_size(&self, d: usize, input: usize, filter: usize) -> Result<(usize, usize)> {
        let (stride, dilation) = (self.strides[d], self.dilations[d]);
        if stride <= 0 {
            return Err(Status::invalid_argument(format!(
                "Stride must be > 0, but got {stride}"
            )));
        }
        if dilation <= 0 {
            return Err(Status::invalid_argument(format!(
                "Dilation rate must be >= 1, but got {dilation}"
            )));
        }
        let input = input as i64;
        let effective = (filter as i64 - 1) * dilation + 1;
        let (out, before) = match self.padding {
            Padding::Valid => ((input - effective + stride) / stride, 0),
            Padding::Same => {
                let out = (input + stride - 1) / stride;
                let needed = ((out - 1) * stride + effective - input).max(0);
                (out, needed / 2)
            }
            Padding::Explicit(p) => {
                let (b, a) = p[d];
                ((input + b + a - effective + stride) / stride, b)
            }
        };
        if out < 0 {
            return Err(Status::invalid_argument(format!(
                "Computed output size would be negative: {out} [input_size: {input}, \
                 effective_filter_size: {effective}, stride: {stride}]"
            )));
        }
        Ok((out as usize, before as usize))
    }
}

/// One spatial dimension of a convolution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dim {
    /// Input size.
    pub input: usize,
    /// Filter size (undilated).
    pub filter: usize,
    /// Output size.
    pub output: usize,
    /// Stride.
    pub stride: usize,
    /// Dilation.
    pub dilation: usize,
    /// Padding before the first input element.
    pub pad: usize,
}

impl Dim {
    /// The input index read by output `o` through filter tap `k`, if inside.
    #[inline(always)]
    pub fn source(&self, o: usize, k: usize) -> Option<usize> {
        (o * self.stride + k * self.dilation)
            .checked_sub(self.pad)
            .filter(|&i| i < self.input)
    }
}

/// The geometry of one convolution call, `NHWC`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    /// Batch size.
    pub batch: usize,
    /// Rows.
    pub rows: Dim,
    /// Columns.
    pub cols: Dim,
    /// Input depth.
    pub in_depth: usize,
    /// The filter's input depth (`in_depth / groups`).
    pub filter_depth: usize,
    /// Output depth.
    pub out_depth: usize,
}

impl Geometry {
    /// Input, filter and output element counts would all fit; built by callers
    /// from checked shapes.
    pub fn new(
        a: &ConvAttrs,
        batch: usize,
        input: [usize; 2],
        filter: [usize; 2],
        depths: (usize, usize, usize),
    ) -> Result<Geometry> {
        let dim = |d: usize| -> Result<Dim> {
            let (output, pad) = a.output_size(d, input[d], filter[d])?;
            Ok(Dim {
                input: input[d],
                filter: filter[d],
                output,
                stride: a.strides[d] as usize,
                dilation: a.dilations[d] as usize,
                pad,
            })
        };
        Ok(Geometry {
            batch,
            rows: dim(0)?,
            cols: dim(1)?,
            in_depth: depths.0,
            filter_depth: depths.1,
            out_depth: depths.2,
        })
    }

    /// The number of groups.
    pub fn groups(&self) -> usize {
        self.in_depth / self.filter_depth.max(1)
    }

    /// Output pixels per image.
    pub fn out_pixels(&self) -> usize {
        self.rows.output * self.cols.output
    }

    /// Input elements per image.
    pub fn in_image(&self) -> usize {
        self.rows.input * self.cols.input * self.in_depth
    }

    /// Filter taps times filter depth: one row of the patch matrix.
    pub fn patch(&self) -> usize {
        self.rows.filter * self.cols.filter * self.filter_depth
    }

    /// The `NHWC` input shape.
    pub fn input_shape(&self) -> TensorShape {
        TensorShape::new(&[self.batch, self.rows.input, self.cols.input, self.in_depth])
    }

    /// The `NHWC` output shape.
    pub fn output_shape(&self) -> TensorShape {
        TensorShape::new(&[
            self.batch,
            self.rows.output,
            self.cols.output,
            self.out_depth,
        ])
    }

    /// The filter shape `[rows, cols, filter_depth, out_depth]`.
    pub fn filter_shape(&self) -> TensorShape {
        TensorShape::new(&[
            self.rows.filter,
            self.cols.filter,
            self.filter_depth,
            self.out_depth,
        ])
    }

    /// Multiply-adds of the whole convolution.
    pub fn flops(&self) -> usize {
        self.batch
            .saturating_mul(self.out_pixels())
            .saturating_mul(self.patch())
            .saturating_mul(self.out_depth / self.groups().max(1))
    }
}

/// Reads a 1-D `int32` size tensor (`input_sizes`, `filter_sizes`).
pub fn sizes_vector(t: &Tensor, what: &str, op: &str) -> Result<Vec<usize>> {
    if t.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "{op}: {what} input must be 1-dim, not {}",
            t.rank()
        )));
    }
    t.as_slice::<i32>()?
        .iter()
        .map(|&v| {
            usize::try_from(v).map_err(|_| {
                Status::invalid_argument(format!(
                    "Dimension -1 must be >= 0 in {what}: {}",
                    t.as_slice::<i32>()
                        .map(|s| format!("{s:?}"))
                        .unwrap_or_default()
                ))
            })
        })
        .collect()
}
