//! Pooling ops (TensorFlow's `nn_ops.cc`): `MaxPool`, `MaxPoolV2`, `MaxPoolGrad`,
//! `MaxPoolGradV2`, `MaxPoolGradGrad`, `MaxPoolWithArgmax`, `MaxPoolGradWithArgmax`,
//! `AvgPool` and `AvgPoolGrad`, with TensorFlow's attributes, type sets and shape
//! functions (`common_shape_fns.cc`), plus the `tf.nn`-style builders `max_pool` and
//! `avg_pool`.
//!
//! [`windowed_output_size`] is TensorFlow's `GetWindowedOutputSizeVerbose`, shared
//! by the shape functions here and the CPU kernels, so both agree on every size and
//! error.

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::with_rank;
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// `realnumbertype` plus `qint8`, the type set of `MaxPool` and `MaxPoolV2`
/// (quantized types are dropped by the spec parser).
const MAX_POOL_TYPES: &str =
    "{half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, qint8}";

/// `realnumbertype`, the type set of the max-pool gradients and `MaxPoolWithArgmax`.
const REAL_TYPES: &str =
    "{float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}";

/// The type set of `AvgPool` and `AvgPoolGrad`.
const AVG_POOL_TYPES: &str = "{half, bfloat16, float, double}";

/// Registers the pooling ops.
pub fn register_all_ops(r: &OpRegistry) {
    let windows = |b: crate::op_def::OpDefBuilder| {
        b.attr("ksize: list(int) >= 4")
            .attr("strides: list(int) >= 4")
    };
    r.register(
        windows(
            OpDef::build("AvgPool")
                .input("value: T")
                .output("output: T"),
        )
        .attr("padding: {'SAME', 'VALID'}")
        .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
        .attr(&format!("T: {AVG_POOL_TYPES}"))
        .shape_fn(avg_pool_shape),
    );
    r.register(
        windows(
            OpDef::build("AvgPoolGrad")
                .input("orig_input_shape: int32")
                .input("grad: T")
                .output("output: T"),
        )
        .attr("padding: {'SAME', 'VALID'}")
        .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
        .attr(&format!("T: {AVG_POOL_TYPES}"))
        .shape_fn(avg_pool_grad_shape),
    );
    r.register(
        OpDef::build("MaxPool")
            .input("input: T")
            .output("output: T")
            .attr(&format!("T: {MAX_POOL_TYPES} = DT_FLOAT"))
            .attr("ksize: list(int) >= 4")
            .attr("strides: list(int) >= 4")
            .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
            .attr("explicit_paddings: list(int) = []")
            .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
            .shape_fn(max_pool_shape),
    );
    r.register(
        OpDef::build("MaxPoolV2")
            .input("input: T")
            .input("ksize: int32")
            .input("strides: int32")
            .output("output: T")
            .attr(&format!("T: {MAX_POOL_TYPES} = DT_FLOAT"))
            .attr("padding: {'SAME', 'VALID'}")
            .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
            .shape_fn(max_pool_v2_shape),
    );
    r.register(
        windows(
            OpDef::build("MaxPoolGrad")
                .input("orig_input: T")
                .input("orig_output: T")
                .input("grad: T")
                .output("output: T"),
        )
        .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
        .attr("explicit_paddings: list(int) = []")
        .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
        .attr(&format!("T: {REAL_TYPES} = DT_FLOAT"))
        .shape_fn(first_input_rank4),
    );
    r.register(
        OpDef::build("MaxPoolGradV2")
            .input("orig_input: T")
            .input("orig_output: T")
            .input("grad: T")
            .input("ksize: int32")
            .input("strides: int32")
            .output("output: T")
            .attr("padding: {'SAME', 'VALID'}")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .attr(&format!("T: {REAL_TYPES} = DT_FLOAT"))
            .shape_fn(first_input_rank4),
    );
    r.register(
        windows(
            OpDef::build("MaxPoolGradGrad")
                .input("orig_input: T")
                .input("orig_output: T")
                .input("grad: T")
                .output("output: T"),
        )
        .attr("padding: {'SAME', 'VALID'}")
        .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
        .attr(&format!("T: {REAL_TYPES}"))
        .shape_fn(max_pool_grad_grad_shape),
    );
    r.register(
        windows(
            OpDef::build("MaxPoolWithArgmax")
                .input("input: T")
                .output("output: T")
                .output("argmax: Targmax"),
        )
        .attr("Targmax: {int32, int64} = DT_INT64")
        .attr("padding: {'SAME', 'VALID'}")
        .attr("include_batch_in_index: bool = false")
        .attr(&format!("T: {REAL_TYPES}"))
        .shape_fn(max_pool_with_argmax_shape),
    );
    r.register(
        windows(
            OpDef::build("MaxPoolGradWithArgmax")
                .input("input: T")
                .input("grad: T")
                .input("argmax: Targmax")
                .output("output: T"),
        )
        .attr("padding: {'SAME', 'VALID'}")
        .attr("include_batch_in_index: bool = false")
        .attr("Targmax: {int32, int64}")
        .attr(&format!("T: {REAL_TYPES}"))
        .shape_fn(first_input_rank4),
    );
}

/// How a pooling window pads its input (TensorFlow's `Padding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// No padding: only full windows.
    Valid,
    /// `ceil(in / stride)` outputs, the padding split with the odd element after.
    Same,
    /// The given `(before, after)` padding.
    Explicit(i64, i64),
}

impl Padding {
    /// `SAME`, `VALID` or `EXPLICIT` (whose amounts come from `explicit_paddings`).
    pub fn parse(s: &str) -> Result<Padding> {
        match s {
            "SAME" => Ok(Padding::Same),
            "VALID" => Ok(Padding::Valid),
            "EXPLICIT" => Ok(Padding::Explicit(0, 0)),
            other => Err(Status::invalid_argument(format!(
                "Unknown padding type: {other}"
            ))),
        }
    }
}

/// TensorFlow's `GetWindowedOutputSizeVerbose` without dilation: the number of
/// windows of `k` along `input` at `stride`, and the padding before the first.
/// `InvalidArgument` for a stride below 1 or a negative size, with TensorFlow's
/// messages. (Sizes are `i64`, and divisions truncate toward zero, as in C++.)
pub fn windowed_output_size(input: i64, k: i64, stride: i64, p: Padding) -> Result<(i64, i64)> {
    if stride <= 0 {
        return Err(Status::invalid_argument(format!(
            "Stride must be > 0, but got {stride}"
        )));
    }
    let (out, before) = match p {
        Padding::Valid => ((input - k + stride) / stride, 0),
        Padding::Explicit(b, a) => ((input + b + a - k + stride) / stride, b),
        Padding::Same => {
            let out = (input + stride - 1) / stride;
            let needed = ((out - 1) * stride + k - input).max(0);
            (out, needed / 2)
        }
    };
    if out < 0 {
        return Err(Status::invalid_argument(format!(
            "Computed output size would be negative: {out} [input_size: {input}, \
             effective_filter_size: {k}, stride: {stride}]"
        )));
    }
    Ok((out, before))
}

/// Spatial layout of a 4-D pooling tensor: the (batch, rows, cols, depth) indices.
fn layout(format: &str) -> [usize; 4] {
    if format.starts_with("NCHW") {
        [0, 2, 3, 1]
    } else {
        [0, 1, 2, 3]
    }
}

/// TensorFlow's `MaxPoolShapeImpl`/`AvgPoolShape` for a rank-4 input and known
/// `ksize`/`strides`: each spatial dimension windowed, and for max pooling the
/// depth pooled by its window too.
// The window attributes travel as TensorFlow names them; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn pool_output(
    op: &str,
    input: &Shape,
    format: &str,
    ksize: &[i64],
    strides: &[i64],
    padding: &str,
    explicit: &[i64],
    depth_pooling: bool,
) -> Result<Shape> {
    let input = with_rank(input, 4)?;
    if strides.len() != 4 {
        return Err(Status::invalid_argument(format!(
            "{op} requires the stride attribute to contain 4 values, but got: {}",
            strides.len()
        )));
    }
    if ksize.len() != 4 {
        return Err(Status::invalid_argument(format!(
            "{op} requires the ksize attribute to contain 4 values, but got: {}",
            ksize.len()
        )));
    }
    let idx = layout(format);
    let pad = Padding::parse(padding)?;
    let explicit_for = |d: usize| -> Result<Padding> {
        match pad {
            Padding::Explicit(..) => {
                if explicit.len() != 8 {
                    return Err(Status::invalid_argument(format!(
                        "explicit_paddings attribute must contain 8 values, but got: {}",
                        explicit.len()
                    )));
                }
                let (b, a) = (explicit[2 * d], explicit[2 * d + 1]);
                if b < 0 || a < 0 {
                    return Err(Status::invalid_argument(
                        "All elements of explicit_paddings must be nonnegative",
                    ));
                }
                Ok(Padding::Explicit(b, a))
            }
            other => Ok(other),
        }
    };
    let mut out = [None; 4];
    out[idx[0]] = input.dim(idx[0]);
    for &d in &idx[1..3] {
        out[d] = match input.dim(d) {
            None => None,
            Some(n) => {
                let (o, _) =
                    windowed_output_size(n as i64, ksize[d], strides[d], explicit_for(d)?)?;
                Some(o as usize)
            }
        };
    }
    let depth = idx[3];
    out[depth] = match input.dim(depth) {
        Some(n) if depth_pooling && ksize[depth] != 1 => {
            let (o, _) =
                windowed_output_size(n as i64, ksize[depth], strides[depth], Padding::Valid)?;
            Some(o as usize)
        }
        other => other,
    };
    Ok(Shape::from_dims(&out))
}

fn format_attr(c: &InferenceContext<'_>) -> String {
    c.attr::<String>("data_format")
        .unwrap_or_else(|_| "NHWC".to_owned())
}

fn avg_pool_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let ksize: Vec<i64> = c.attr("ksize")?;
    let strides: Vec<i64> = c.attr("strides")?;
    let padding: String = c.attr("padding")?;
    let s = pool_output(
        "AvgPool",
        &c.input(0),
        &format_attr(c),
        &ksize,
        &strides,
        &padding,
        &[],
        false,
    )?;
    c.set_output(0, s)
}

fn max_pool_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let ksize: Vec<i64> = c.attr("ksize")?;
    let strides: Vec<i64> = c.attr("strides")?;
    let padding: String = c.attr("padding")?;
    let explicit: Vec<i64> = c.attr("explicit_paddings").unwrap_or_default();
    let s = pool_output(
        "MaxPool",
        &c.input(0),
        &format_attr(c),
        &ksize,
        &strides,
        &padding,
        &explicit,
        true,
    )?;
    c.set_output(0, s)
}

/// The values of a constant int32 vector input.
fn const_ints(c: &InferenceContext<'_>, i: usize) -> Option<Vec<i64>> {
    let t = c.input_tensor(i)?;
    t.as_slice::<i32>()
        .ok()
        .map(|v| v.iter().map(|&x| x as i64).collect())
}

/// `MaxPoolV2`: as `MaxPool` when `ksize` and `strides` are constants, else a rank-4
/// shape of unknown dimensions.
fn max_pool_v2_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = with_rank(&c.input(0), 4)?;
    for i in [1, 2] {
        let v = with_rank(&c.input(i), 1)?;
        if let Some(n) = v.dim(0) {
            if n != 4 {
                let what = if i == 1 { "ksize" } else { "stride" };
                return Err(Status::invalid_argument(format!(
                    "MaxPool requires the {what} attribute to contain 4 values, but got: {n}"
                )));
            }
        }
    }
    let (Some(ksize), Some(strides)) = (const_ints(c, 1), const_ints(c, 2)) else {
        return c.set_output(0, Shape::unknown_with_rank(4));
    };
    let padding: String = c.attr("padding")?;
    let s = pool_output(
        "MaxPool",
        &input,
        &format_attr(c),
        &ksize,
        &strides,
        &padding,
        &[],
        true,
    )?;
    c.set_output(0, s)
}

/// `UnchangedShapeWithRank(c, 4)` of the first input.
fn first_input_rank4(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = with_rank(&c.input(0), 4)?;
    c.set_output(0, s)
}

/// `AvgPoolGrad`: the shape held by `orig_input_shape`, of rank 4.
fn avg_pool_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let v = with_rank(&c.input(0), 1)?;
    if let Some(n) = v.dim(0) {
        if n != 4 {
            return Err(Status::invalid_argument(format!(
                "Shape must be rank 4 but is rank {n}"
            )));
        }
    }
    let s = crate::op_def::shape_fn::shape_from_tensor(c.input_tensor(0), Some(4));
    let s = with_rank(&s, 4)?;
    c.set_output(0, s)
}

/// `MaxPoolGradGrad`: the max pool's output shape, merged with `orig_output`;
/// `orig_input` and `grad` must agree.
fn max_pool_grad_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let ksize: Vec<i64> = c.attr("ksize")?;
    let strides: Vec<i64> = c.attr("strides")?;
    let padding: String = c.attr("padding")?;
    let out = pool_output(
        "MaxPool",
        &c.input(0),
        &format_attr(c),
        &ksize,
        &strides,
        &padding,
        &[],
        true,
    )?;
    with_rank(&c.input(0), 4)?.merge(&c.input(2))?;
    let out = out.merge(&c.input(1))?;
    c.set_output(0, out)
}

fn max_pool_with_argmax_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let ksize: Vec<i64> = c.attr("ksize")?;
    let strides: Vec<i64> = c.attr("strides")?;
    let padding: String = c.attr("padding")?;
    let s = pool_output(
        "MaxPool",
        &c.input(0),
        "NHWC",
        &ksize,
        &strides,
        &padding,
        &[],
        true,
    )?;
    c.set_output(0, s.clone())?;
    c.set_output(1, s)
}

/// TensorFlow's `_get_sequence` for pooling: one value for every spatial
/// dimension, two spatial values, or all four, as the 4-element attribute for
/// `data_format`.
fn pool_sequence(v: &[i64], data_format: &str, what: &str) -> Result<Vec<i64>> {
    let spatial: Vec<i64> = match v.len() {
        1 => vec![v[0], v[0]],
        2 => v.to_vec(),
        4 => return Ok(v.to_vec()),
        n => {
            return Err(Status::invalid_argument(format!(
                "{what} should be of length 1, 2 or 4 but was {n}"
            )))
        }
    };
    Ok(if data_format.starts_with("NC") {
        vec![1, 1, spatial[0], spatial[1]]
    } else {
        vec![1, spatial[0], spatial[1], 1]
    })
}

/// `tf.nn.max_pool` (2-D): `MaxPool` with `ksize`/`strides` of 1, 2 or 4 values.
pub fn max_pool(
    s: &Scope,
    input: &Output,
    ksize: &[i64],
    strides: &[i64],
    padding: &str,
    data_format: &str,
) -> Result<Output> {
    s.op("MaxPool")
        .input(input)
        .attr("ksize", pool_sequence(ksize, data_format, "ksize")?)
        .attr("strides", pool_sequence(strides, data_format, "strides")?)
        .attr("padding", padding)
        .attr("data_format", data_format)
        .build1()
}

/// `MaxPoolV2`: `ksize` and `strides` as int32 tensors.
pub fn max_pool_v2(
    s: &Scope,
    input: &Output,
    ksize: &Output,
    strides: &Output,
    padding: &str,
    data_format: &str,
) -> Result<Output> {
    s.op("MaxPoolV2")
        .input(input)
        .input(ksize)
        .input(strides)
        .attr("padding", padding)
        .attr("data_format", data_format)
        .build1()
}

/// `tf.nn.max_pool_with_argmax`: `(output, argmax)` with `Targmax` int64.
pub fn max_pool_with_argmax(
    s: &Scope,
    input: &Output,
    ksize: &[i64],
    strides: &[i64],
    padding: &str,
    include_batch_in_index: bool,
) -> Result<(Output, Output)> {
    let op = s
        .op("MaxPoolWithArgmax")
        .input(input)
        .attr("ksize", pool_sequence(ksize, "NHWC", "ksize")?)
        .attr("strides", pool_sequence(strides, "NHWC", "strides")?)
        .attr("padding", padding)
        .attr("include_batch_in_index", include_batch_in_index)
        .build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `tf.nn.avg_pool` (2-D): `AvgPool` with `ksize`/`strides` of 1, 2 or 4 values.
pub fn avg_pool(
    s: &Scope,
    value: &Output,
    ksize: &[i64],
    strides: &[i64],
    padding: &str,
    data_format: &str,
) -> Result<Output> {
    s.op("AvgPool")
        .input(value)
        .attr("ksize", pool_sequence(ksize, data_format, "ksize")?)
        .attr("strides", pool_sequence(strides, data_format, "strides")?)
        .attr("padding", padding)
        .attr("data_format", data_format)
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ops, Code, DType};

    fn ph(s: &Scope, dims: &[Option<usize>]) -> Output {
        ops::placeholder(s, DType::F32, Shape::from_dims(dims)).unwrap()
    }

    #[test]
    fn windowed_sizes_as_tensorflow() {
        assert_eq!(
            windowed_output_size(5, 2, 2, Padding::Valid).unwrap(),
            (2, 0)
        );
        assert_eq!(
            windowed_output_size(5, 2, 2, Padding::Same).unwrap(),
            (3, 0)
        );
        assert_eq!(
            windowed_output_size(5, 3, 1, Padding::Same).unwrap(),
            (5, 1)
        );
        assert_eq!(
            windowed_output_size(4, 5, 1, Padding::Valid).unwrap(),
            (0, 0)
        );
        // (4 - 7 + 2) / 2 truncates to 0, as in C++.
        assert_eq!(
            windowed_output_size(4, 7, 2, Padding::Valid).unwrap(),
            (0, 0)
        );
        let e = windowed_output_size(4, 7, 1, Padding::Valid).unwrap_err();
        assert!(e.message().contains("would be negative: -2"), "{e}");
        let e = windowed_output_size(4, 1, 0, Padding::Same).unwrap_err();
        assert_eq!(e.message(), "Stride must be > 0, but got 0");
        assert_eq!(
            windowed_output_size(5, 2, 1, Padding::Explicit(1, 0)).unwrap(),
            (5, 1)
        );
    }

    #[test]
    fn pooling_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), Some(5), Some(7), Some(3)]);
        let y = max_pool(&s, &x, &[2], &[2], "SAME", "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::known(&[2, 3, 4, 3]));
        let y = avg_pool(&s, &x, &[3, 2], &[1, 2], "VALID", "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::known(&[2, 3, 3, 3]));
        let y = avg_pool(&s, &x, &[2], &[2], "VALID", "NCHW").unwrap();
        assert_eq!(y.shape(), Shape::known(&[2, 5, 3, 1]));
        // Depth pooling divides the channels.
        let y = max_pool(&s, &x, &[1, 1, 1, 3], &[1, 1, 1, 3], "VALID", "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::known(&[2, 5, 7, 1]));
        let u = ph(&s, &[None, Some(4), None, Some(3)]);
        let y = max_pool(&s, &u, &[2], &[2], "VALID", "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, Some(2), None, Some(3)]));
        let (o, a) = max_pool_with_argmax(&s, &x, &[2], &[2], "VALID", false).unwrap();
        assert_eq!(o.shape(), Shape::known(&[2, 2, 3, 3]));
        assert_eq!(a.dtype(), DType::I64);
        let v = ph(&s, &[Some(5), Some(7), Some(3)]);
        let e = max_pool(&s, &v, &[2], &[2], "VALID", "NHWC").unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(max_pool(&s, &x, &[9], &[1], "VALID", "NHWC").is_err());
        assert!(max_pool(&s, &x, &[1, 2, 3], &[1], "VALID", "NHWC").is_err());
        let ks = ops::index_vector(&s, &[1, 2, 2, 1]).unwrap();
        let y = max_pool_v2(&s, &x, &ks, &ks, "VALID", "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::known(&[2, 2, 3, 3]));
        let k = ops::placeholder(&s, DType::I32, Shape::known(&[4])).unwrap();
        let y = max_pool_v2(&s, &x, &k, &k, "VALID", "NHWC").unwrap();
        assert_eq!(y.shape(), Shape::unknown_with_rank(4));
        let shape = ops::index_vector(&s, &[2, 5, 7, 3]).unwrap();
        let g = s
            .op("AvgPoolGrad")
            .input(&shape)
            .input(ph(&s, &[Some(2), Some(3), Some(4), Some(3)]))
            .attr("ksize", vec![1i64, 2, 2, 1])
            .attr("strides", vec![1i64, 2, 2, 1])
            .attr("padding", "SAME")
            .build1()
            .unwrap();
        assert_eq!(g.shape(), Shape::known(&[2, 5, 7, 3]));
    }
}
