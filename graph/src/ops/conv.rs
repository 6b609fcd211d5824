//! Convolution ops (TensorFlow's `nn_ops.cc`): `Conv2D`, its two gradients
//! `Conv2DBackpropInput` and `Conv2DBackpropFilter`, `_FusedConv2D` (written by
//! the remapper pass, never by a builder), and the depthwise family
//! `DepthwiseConv2dNative{,BackpropInput,BackpropFilter}`, with TensorFlow's
//! attributes, type sets and shape functions (`common_shape_fns.cc`'s
//! `Conv2DShapeWithExplicitPadding`, `DepthwiseConv2DNativeShapeWithExplicitPadding`
//! and the backprop shapes), plus builder functions after `tf.nn` (`conv2d`,
//! `conv2d_transpose`, `depthwise_conv2d_native`, …).
//!
//! Shape functions check what TensorFlow's do and with its messages: ranks, the
//! attribute lengths, positive strides and dilations, explicit paddings, the
//! channel relation of input and filter, and output sizes that would be negative.
//! Unknown dimensions stay unknown.

use crate::builder::{OpBuilder, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{NodeDef, OpRegistry, Result, Shape, Status};

/// `Conv2D`'s and `Conv2DBackpropInput`'s type set.
const CONV_TYPES: &str = "{half, bfloat16, float, double, int32}";
/// `Conv2DBackpropFilter`'s and the depthwise ops' type set.
const CONV_FLOAT_TYPES: &str = "{half, bfloat16, float, double}";

/// Registers the convolution ops.
pub fn register_all_ops(r: &OpRegistry) {
    let with_window_attrs = |b: crate::op_def::OpDefBuilder, types: &str, cudnn: bool| {
        let b = b.attr(&format!("T: {types}")).attr("strides: list(int)");
        let b = if cudnn {
            b.attr("use_cudnn_on_gpu: bool = true")
        } else {
            b
        };
        b.attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
            .attr("explicit_paddings: list(int) = []")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .attr("dilations: list(int) = [1, 1, 1, 1]")
    };
    r.register(with_window_attrs(
        OpDef::build("Conv2D")
            .input("input: T")
            .input("filter: T")
            .output("output: T")
            .shape_fn(conv2d_shape),
        CONV_TYPES,
        true,
    ));
    r.register(with_window_attrs(
        OpDef::build("Conv2DBackpropInput")
            .input("input_sizes: int32")
            .input("filter: T")
            .input("out_backprop: T")
            .output("output: T")
            .shape_fn(conv2d_backprop_input_shape),
        CONV_TYPES,
        true,
    ));
    r.register(with_window_attrs(
        OpDef::build("Conv2DBackpropFilter")
            .input("input: T")
            .input("filter_sizes: int32")
            .input("out_backprop: T")
            .output("output: T")
            .shape_fn(backprop_filter_shape),
        CONV_FLOAT_TYPES,
        true,
    ));
    // Grappler's remapper writes Conv2D + BiasAdd/FusedBatchNorm (+ activation)
    // as one node (see `passes::remapper`); TensorFlow registers no gradient for
    // it. `args` are the bias, or the batch norm's scale, offset, mean and
    // variance; `host_args` are GPU side inputs, not used on the CPU.
    r.register(
        OpDef::build("_FusedConv2D")
            .input("input: T")
            .input("filter: T")
            .input("args: TArgs")
            .input("host_args: num_host_args * float")
            .output("output: T")
            .attr("T: {half, float, double}")
            .attr("TArgs: list(type) >= 1")
            .attr("num_args: int >= 0")
            .attr("num_host_args: int >= 0 = 0")
            .attr("strides: list(int)")
            .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
            .attr("explicit_paddings: list(int) = []")
            .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
            .attr("filter_format: {'HWIO', 'OIHW', 'OIHW_VECT_I'} = 'HWIO'")
            .attr("dilations: list(int) = [1, 1, 1, 1]")
            .attr("use_cudnn_on_gpu: bool = true")
            .attr("fused_ops: list(string) = []")
            .attr("epsilon: float = 0.0001")
            .attr("leakyrelu_alpha: float = 0.2")
            .shape_fn(conv2d_shape),
    );
    r.register(with_window_attrs(
        OpDef::build("DepthwiseConv2dNative")
            .input("input: T")
            .input("filter: T")
            .output("output: T")
            .shape_fn(depthwise_shape),
        CONV_FLOAT_TYPES,
        false,
    ));
    r.register(with_window_attrs(
        OpDef::build("DepthwiseConv2dNativeBackpropInput")
            .input("input_sizes: int32")
            .input("filter: T")
            .input("out_backprop: T")
            .output("output: T")
            .shape_fn(depthwise_backprop_input_shape),
        CONV_FLOAT_TYPES,
        false,
    ));
    r.register(with_window_attrs(
        OpDef::build("DepthwiseConv2dNativeBackpropFilter")
            .input("input: T")
            .input("filter_sizes: int32")
            .input("out_backprop: T")
            .output("output: T")
            .shape_fn(backprop_filter_shape),
        CONV_FLOAT_TYPES,
        false,
    ));
}

/// `s` with rank `rank`, else TensorFlow's `WithRank` error.
fn with_rank(s: &Shape, rank: usize) -> Result<Shape> {
    match s.rank() {
        None => Ok(Shape::unknown_with_rank(rank)),
        Some(r) if r == rank => Ok(s.clone()),
        Some(r) => Err(Status::invalid_argument(format!(
            "Shape must be rank {rank} but is rank {r}"
        ))),
    }
}

/// Merges two dimensions; TensorFlow's `Merge` error when both are known and differ.
fn merge_dim(a: Option<usize>, b: Option<usize>) -> Result<Option<usize>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => Err(Status::invalid_argument(format!(
            "Dimensions must be equal, but are {x} and {y}"
        ))),
        (Some(x), _) | (None, Some(x)) => Ok(Some(x)),
        (None, None) => Ok(None),
    }
}

/// The window attributes of a convolution node, as its shape function reads them.
struct Window {
    nchw: bool,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    padding: String,
    explicit_paddings: Vec<i64>,
}

impl Window {
    /// Reads and checks the attributes; `what` names the op family in TensorFlow's
    /// messages (`Conv2D`, `DepthwiseConv2D`).
    fn read(c: &InferenceContext<'_>, what: &str) -> Result<Window> {
        let format: String = c.attr("data_format")?;
        let strides: Vec<i64> = c.attr("strides")?;
        let dilations: Vec<i64> = c.attr("dilations")?;
        if strides.len() != 4 {
            let fmt = if what == "Conv2D" {
                format!("Conv2D on data format {format}")
            } else {
                what.to_owned()
            };
            return Err(Status::invalid_argument(format!(
                "{fmt} requires the stride attribute to contain 4 values, but got: {}",
                strides.len()
            )));
        }
        if dilations.len() != 4 {
            let attr = if what == "Conv2D" {
                "dilation"
            } else {
                "dilations"
            };
            return Err(Status::invalid_argument(format!(
                "{what} requires the {attr} attribute to contain 4 values, but got: {}",
                dilations.len()
            )));
        }
        let padding: String = c.attr("padding")?;
        let explicit_paddings: Vec<i64> = c.attr("explicit_paddings")?;
        check_explicit_paddings(&padding, &explicit_paddings)?;
        Ok(Window {
            nchw: format == "NCHW",
            strides,
            dilations,
            padding,
            explicit_paddings,
        })
    }

    /// The index of spatial dimension `i` (0: rows, 1: columns) in a 4-D shape.
    fn spatial(&self, i: usize) -> usize {
        if self.nchw {
            2 + i
        } else {
            1 + i
        }
    }

    fn channel(&self) -> usize {
        if self.nchw {
            1
        } else {
            3
        }
    }

    /// The output size along spatial dimension `i` for input size `input` and
    /// filter size `filter` (TensorFlow's `GetWindowedOutputSizeFromDimsV2`).
    fn output_size(
        &self,
        i: usize,
        input: Option<usize>,
        filter: Option<usize>,
    ) -> Result<Option<usize>> {
        let d = self.spatial(i);
        let (stride, dilation) = (self.strides[d], self.dilations[d]);
        if stride <= 0 {
            return Err(Status::invalid_argument(format!(
                "Stride must be > 0, but got {stride}"
            )));
        }
        if dilation < 1 {
            return Err(Status::invalid_argument(format!(
                "Dilation rate must be >= 1, but got {dilation}"
            )));
        }
        let (Some(input), Some(filter)) = (input, filter) else {
            // SAME needs only the input size.
            return Ok(match (self.padding.as_str(), input) {
                ("SAME", Some(n)) => Some(((n as i64 + stride - 1) / stride) as usize),
                _ => None,
            });
        };
        let effective = (filter as i64 - 1) * dilation + 1;
        let n = input as i64;
        let padded = match self.padding.as_str() {
            "SAME" => return Ok(Some(((n + stride - 1) / stride) as usize)),
            "EXPLICIT" => n + self.explicit_paddings[2 * d] + self.explicit_paddings[2 * d + 1],
            _ => n,
        };
        if padded < effective {
            return Err(Status::invalid_argument(format!(
                "Negative dimension size caused by subtracting {effective} from {padded}"
            )));
        }
        Ok(Some(((padded - effective) / stride + 1) as usize))
    }

    /// A 4-D shape in this data format.
    fn shape(
        &self,
        batch: Option<usize>,
        rows: Option<usize>,
        cols: Option<usize>,
        depth: Option<usize>,
    ) -> Shape {
        if self.nchw {
            Shape::from_dims(&[batch, depth, rows, cols])
        } else {
            Shape::from_dims(&[batch, rows, cols, depth])
        }
    }
}

/// TensorFlow's `CheckValidPadding` for 4-D convolutions.
pub(crate) fn check_explicit_paddings(padding: &str, explicit: &[i64]) -> Result<()> {
    if padding == "EXPLICIT" {
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
    } else if !explicit.is_empty() {
        return Err(Status::invalid_argument(
            "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT",
        ));
    }
    Ok(())
}

/// TensorFlow's rejection of explicit padding of the batch or depth dimension.
fn check_explicit_spatial_only(w: &Window) -> Result<()> {
    if w.padding == "EXPLICIT" {
        let c = w.channel();
        let p = &w.explicit_paddings;
        if p[0] != 0 || p[1] != 0 || p[2 * c] != 0 || p[2 * c + 1] != 0 {
            return Err(Status::invalid_argument(
                "Nonzero explicit padding in the batch or depth dimensions is not supported",
            ));
        }
    }
    Ok(())
}

/// Reads the window attributes with every check of TensorFlow's shape functions.
fn window(c: &InferenceContext<'_>, what: &str) -> Result<Window> {
    let w = Window::read(c, what)?;
    check_explicit_spatial_only(&w)?;
    Ok(w)
}

/// `Conv2D`: `[batch, out_rows, out_cols, filter_out]` (in the data format); the
/// input depth must be a multiple of the filter's (grouped convolution), the output
/// depth a multiple of the number of groups.
fn conv2d_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let w = window(c, "Conv2D")?;
    let input = with_rank(&c.input(0), 4)?;
    let filter = with_rank(&c.input(1), 4)?;
    let in_depth = input.dim(w.channel());
    let (filter_in, filter_out) = (filter.dim(2), filter.dim(3));
    if let (Some(i), Some(f)) = (in_depth, filter_in) {
        if f == 0 || i % f != 0 {
            return Err(Status::invalid_argument(format!(
                "Depth of input ({i}) is not a multiple of input depth of filter ({f})"
            )));
        }
        if let Some(o) = filter_out {
            let groups = i / f;
            if o % groups != 0 {
                return Err(Status::invalid_argument(format!(
                    "Depth of output ({o}) is not a multiple of the number of groups ({groups})"
                )));
            }
        }
    }
    let rows = w.output_size(0, input.dim(w.spatial(0)), filter.dim(0))?;
    let cols = w.output_size(1, input.dim(w.spatial(1)), filter.dim(1))?;
    c.set_output(0, w.shape(input.dim(0), rows, cols, filter_out))
}

/// `DepthwiseConv2dNative`: the input depth merged with the filter's, the output
/// depth `in_depth * channel_multiplier`.
fn depthwise_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let w = window(c, "DepthwiseConv2D")?;
    let input = with_rank(&c.input(0), 4)?;
    let filter = with_rank(&c.input(1), 4)?;
    let in_depth = merge_dim(input.dim(w.channel()), filter.dim(2))?;
    let out_depth = in_depth.zip(filter.dim(3)).map(|(d, m)| d * m);
    let rows = w.output_size(0, input.dim(w.spatial(0)), filter.dim(0))?;
    let cols = w.output_size(1, input.dim(w.spatial(1)), filter.dim(1))?;
    c.set_output(0, w.shape(input.dim(0), rows, cols, out_depth))
}

/// A shape from a constant `int32` size input, or `None` when it is not constant.
fn const_sizes(c: &InferenceContext<'_>, i: usize) -> Option<Vec<i64>> {
    let t = c.input_tensor(i)?;
    t.as_slice::<i32>()
        .ok()
        .map(|s| s.iter().map(|&v| v as i64).collect())
}

/// `Conv2DBackpropInput`: the shape `input_sizes` holds (4 values), or its two
/// spatial sizes with the batch of `out_backprop` and the depth of `filter`.
fn conv2d_backprop_input_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let w = window(c, "Conv2D")?;
    with_rank(&c.input(0), 1)?;
    let filter = with_rank(&c.input(1), 4)?;
    let dy = with_rank(&c.input(2), 4)?;
    merge_dim(dy.dim(w.channel()), filter.dim(3))?;
    let out = match const_sizes(c, 0) {
        // TensorFlow keeps only the batch of `out_backprop` then.
        None => Shape::from_dims(&[dy.dim(0), None, None, None]),
        Some(v) if v.len() == 4 => Shape::from_tf_dims(&v),
        Some(v) if v.len() == 2 => {
            let dim = |x: i64| usize::try_from(x).ok();
            w.shape(dy.dim(0), dim(v[0]), dim(v[1]), filter.dim(2))
        }
        Some(v) => {
            return Err(Status::invalid_argument(format!(
            "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: {}",
            v.len()
        )))
        }
    };
    c.set_output(0, out)
}

/// `DepthwiseConv2dNativeBackpropInput`: the rank-4 shape `input_sizes` holds.
fn depthwise_backprop_input_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    window(c, "DepthwiseConv2D")?;
    sizes_output(c, 0)
}

/// The backprop-filter ops: the rank-4 shape `filter_sizes` holds.
fn backprop_filter_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    sizes_output(c, 1)
}

fn sizes_output(c: &mut InferenceContext<'_>, i: usize) -> Result<()> {
    with_rank(&c.input(i), 1)?;
    let s = shape_fn::shape_from_tensor(c.input_tensor(i), Some(4));
    let s = with_rank(&s, 4)?;
    c.set_output(0, s)
}

/// The window attributes of a convolution: what `tf.nn.conv2d` and friends take
/// besides their tensors.
///
/// # Examples
///
/// ```
/// use actorflow_graph::ops::{self, ConvOptions};
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::{DType, Shape};
///
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::known(&[1, 8, 8, 3])).unwrap();
/// let w = ops::placeholder(&s, DType::F32, Shape::known(&[3, 3, 3, 16])).unwrap();
/// let y = ops::conv2d(&s, &x, &w, &ConvOptions::new(&[1, 2, 2, 1], "SAME")).unwrap();
/// assert_eq!(y.shape(), Shape::known(&[1, 4, 4, 16]));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ConvOptions {
    /// The window stride along each of the 4 dimensions.
    pub strides: Vec<i64>,
    /// `"SAME"`, `"VALID"` or `"EXPLICIT"`.
    pub padding: String,
    /// With `"EXPLICIT"`: (before, after) for each of the 4 dimensions.
    pub explicit_paddings: Vec<i64>,
    /// `"NHWC"` or `"NCHW"`.
    pub data_format: String,
    /// The filter dilation along each of the 4 dimensions.
    pub dilations: Vec<i64>,
}

impl ConvOptions {
    /// `strides` and `padding`, NHWC, no dilation.
    pub fn new(strides: &[i64], padding: &str) -> ConvOptions {
        ConvOptions {
            strides: strides.to_vec(),
            padding: padding.to_owned(),
            explicit_paddings: Vec::new(),
            data_format: "NHWC".to_owned(),
            dilations: vec![1; 4],
        }
    }

    /// `"EXPLICIT"` padding with these 8 values.
    pub fn explicit(strides: &[i64], paddings: &[i64]) -> ConvOptions {
        ConvOptions {
            explicit_paddings: paddings.to_vec(),
            ..ConvOptions::new(strides, "EXPLICIT")
        }
    }

    /// The same options in data format `format`.
    pub fn with_data_format(mut self, format: &str) -> ConvOptions {
        self.data_format = format.to_owned();
        self
    }

    /// The same options with `dilations`.
    pub fn with_dilations(mut self, dilations: &[i64]) -> ConvOptions {
        self.dilations = dilations.to_vec();
        self
    }

    /// The options of an existing convolution node (for its gradient).
    pub fn from_node(node: &NodeDef) -> Result<ConvOptions> {
        Ok(ConvOptions {
            strides: node.get_attr("strides")?,
            padding: node.get_attr("padding")?,
            explicit_paddings: node.get_attr_or("explicit_paddings", Vec::new())?,
            data_format: node.get_attr_or("data_format", "NHWC".to_owned())?,
            dilations: node.get_attr_or("dilations", vec![1; 4])?,
        })
    }

    fn apply(&self, b: OpBuilder) -> OpBuilder {
        b.attr("strides", self.strides.clone())
            .attr("padding", self.padding.as_str())
            .attr("explicit_paddings", self.explicit_paddings.clone())
            .attr("data_format", self.data_format.as_str())
            .attr("dilations", self.dilations.clone())
    }
}

/// `Conv2D`: `input` `[batch, rows, cols, in_depth]` (NHWC) convolved with
/// `filter` `[rows, cols, in_depth / groups, out_depth]`.
pub fn conv2d(s: &Scope, input: &Output, filter: &Output, o: &ConvOptions) -> Result<Output> {
    o.apply(s.op("Conv2D").input(input).input(filter)).build1()
}

/// `Conv2DBackpropInput`: the gradient of `Conv2D` with respect to an input of
/// shape `input_sizes` (int32, 4 values or the 2 spatial ones).
pub fn conv2d_backprop_input(
    s: &Scope,
    input_sizes: &Output,
    filter: &Output,
    out_backprop: &Output,
    o: &ConvOptions,
) -> Result<Output> {
    let b = s
        .op("Conv2DBackpropInput")
        .input(input_sizes)
        .input(filter)
        .input(out_backprop);
    o.apply(b).build1()
}

/// `Conv2DBackpropFilter`: the gradient of `Conv2D` with respect to a filter of
/// shape `filter_sizes` (int32, 4 values).
pub fn conv2d_backprop_filter(
    s: &Scope,
    input: &Output,
    filter_sizes: &Output,
    out_backprop: &Output,
    o: &ConvOptions,
) -> Result<Output> {
    let b = s
        .op("Conv2DBackpropFilter")
        .input(input)
        .input(filter_sizes)
        .input(out_backprop);
    o.apply(b).build1()
}

/// `tf.nn.conv2d_transpose`: the transpose of `Conv2D` (`Conv2DBackpropInput` of
/// `value` with `filter` `[rows, cols, out_depth, in_depth]`), of shape
/// `output_shape`.
pub fn conv2d_transpose(
    s: &Scope,
    value: &Output,
    filter: &Output,
    output_shape: &Output,
    o: &ConvOptions,
) -> Result<Output> {
    conv2d_backprop_input(s, output_shape, filter, value, o)
}

/// `DepthwiseConv2dNative`: each input channel convolved with its own
/// `channel_multiplier` filters (`filter` `[rows, cols, in_depth, multiplier]`).
pub fn depthwise_conv2d_native(
    s: &Scope,
    input: &Output,
    filter: &Output,
    o: &ConvOptions,
) -> Result<Output> {
    o.apply(s.op("DepthwiseConv2dNative").input(input).input(filter))
        .build1()
}

/// `DepthwiseConv2dNativeBackpropInput`.
pub fn depthwise_conv2d_native_backprop_input(
    s: &Scope,
    input_sizes: &Output,
    filter: &Output,
    out_backprop: &Output,
    o: &ConvOptions,
) -> Result<Output> {
    let b = s
        .op("DepthwiseConv2dNativeBackpropInput")
        .input(input_sizes)
        .input(filter)
        .input(out_backprop);
    o.apply(b).build1()
}

/// `DepthwiseConv2dNativeBackpropFilter`.
pub fn depthwise_conv2d_native_backprop_filter(
    s: &Scope,
    input: &Output,
    filter_sizes: &Output,
    out_backprop: &Output,
    o: &ConvOptions,
) -> Result<Output> {
    let b = s
        .op("DepthwiseConv2dNativeBackpropFilter")
        .input(input)
        .input(filter_sizes)
        .input(out_backprop);
    o.apply(b).build1()
}

#[cfg(test)]
mod tests;
