//! Neural-network ops (TensorFlow's `nn_ops.cc`): the activations (`Relu`, `Relu6`,
//! `Elu`, `Selu`, `Softplus`, `Softsign`, `LeakyRelu`) and their gradients,
//! `Softmax`/`LogSoftmax`, the two softmax cross-entropy losses, `BiasAdd` (and
//! `BiasAddV1`, `BiasAddGrad`), `L2Loss` and (in `top_k`) `TopKV2` and
//! `InTopKV2`, with TensorFlow's attributes, type sets and shape functions, plus
//! their builder functions and [`dropout`], which `tf.nn.dropout` builds from
//! other ops.

mod top_k;
pub use top_k::*;

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{merge_dim, with_rank, with_rank_at_least};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::ops::FLOAT_TYPES;
use crate::{DType, OpRegistry, Result, Shape, Status};

/// `realnumbertype` plus `qint8`, the type set of `Relu` (quantized types are not
/// supported here and dropped by the spec parser).
const RELU_TYPES: &str =
    "{float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8}";

/// `realnumbertype`, the type set of `Relu6` and the `Relu*Grad` ops.
const REAL_TYPES: &str =
    "{float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}";

/// `numbertype`, the type set of the `BiasAdd` family (complex and quantized types
/// are not supported here and dropped by the spec parser).
const BIAS_TYPES: &str =
    "{float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, \
     qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}";

/// Registers the nn ops.
pub fn register_all_ops(r: &OpRegistry) {
    top_k::register_ops(r);
    let unary = |name: &str, types: &str| {
        OpDef::build(name)
            .input("features: T")
            .output("activations: T")
            .attr(&format!("T: {types}"))
            .shape_fn(shape_fn::unchanged)
    };
    r.register(unary("Relu", RELU_TYPES));
    r.register(unary("Relu6", REAL_TYPES));
    for name in ["Elu", "Selu", "Softplus", "Softsign"] {
        r.register(unary(name, FLOAT_TYPES));
    }
    r.register(
        OpDef::build("LeakyRelu")
            .input("features: T")
            .output("activations: T")
            .attr("alpha: float = 0.2")
            .attr(&format!("T: {FLOAT_TYPES} = DT_FLOAT"))
            .shape_fn(shape_fn::unchanged),
    );
    let grad = |name: &str, second: &str, types: &str| {
        OpDef::build(name)
            .input("gradients: T")
            .input(&format!("{second}: T"))
            .output("backprops: T")
            .attr(&format!("T: {types}"))
            .shape_fn(merge_both_inputs)
    };
    r.register(grad("ReluGrad", "features", REAL_TYPES));
    r.register(grad("Relu6Grad", "features", REAL_TYPES));
    r.register(grad("EluGrad", "outputs", FLOAT_TYPES));
    r.register(grad("SeluGrad", "outputs", FLOAT_TYPES));
    r.register(grad("SoftplusGrad", "features", FLOAT_TYPES));
    r.register(grad("SoftsignGrad", "features", FLOAT_TYPES));
    r.register(
        OpDef::build("LeakyReluGrad")
            .input("gradients: T")
            .input("features: T")
            .output("backprops: T")
            .attr("alpha: float = 0.2")
            .attr(&format!("T: {FLOAT_TYPES} = DT_FLOAT"))
            .shape_fn(merge_both_inputs),
    );
    r.register(
        OpDef::build("Softmax")
            .input("logits: T")
            .output("softmax: T")
            .attr(&format!("T: {FLOAT_TYPES}"))
            .shape_fn(softmax_shape),
    );
    r.register(
        OpDef::build("LogSoftmax")
            .input("logits: T")
            .output("logsoftmax: T")
            .attr(&format!("T: {FLOAT_TYPES}"))
            .shape_fn(softmax_shape),
    );
    r.register(
        OpDef::build("SoftmaxCrossEntropyWithLogits")
            .input("features: T")
            .input("labels: T")
            .output("loss: T")
            .output("backprop: T")
            .attr(&format!("T: {FLOAT_TYPES}"))
            .shape_fn(xent_shape),
    );
    r.register(
        OpDef::build("SparseSoftmaxCrossEntropyWithLogits")
            .input("features: T")
            .input("labels: Tlabels")
            .output("loss: T")
            .output("backprop: T")
            .attr(&format!("T: {FLOAT_TYPES}"))
            .attr("Tlabels: {int32, int64} = DT_INT64")
            .shape_fn(sparse_xent_shape),
    );
    r.register(
        OpDef::build("BiasAdd")
            .input("value: T")
            .input("bias: T")
            .output("output: T")
            .attr(&format!("T: {BIAS_TYPES}"))
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .shape_fn(bias_add_shape),
    );
    r.register(
        OpDef::build("BiasAddV1")
            .input("value: T")
            .input("bias: T")
            .output("output: T")
            .attr(&format!("T: {BIAS_TYPES}"))
            .shape_fn(bias_add_shape),
    );
    r.register(
        OpDef::build("BiasAddGrad")
            .input("out_backprop: T")
            .output("output: T")
            .attr(&format!("T: {BIAS_TYPES}"))
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .shape_fn(bias_add_grad_shape),
    );
    r.register(
        OpDef::build("L2Loss")
            .input("t: T")
            .output("output: T")
            .attr(&format!("T: {FLOAT_TYPES}"))
            .shape_fn(shape_fn::scalar),
    );
}

/// The output has the merged shape of both inputs (the activation gradients).
fn merge_both_inputs(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = c.input(0).merge(&c.input(1))?;
    c.set_output(0, s)
}

fn softmax_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = with_rank_at_least(&c.input(0), 1)?;
    c.set_output(0, s)
}

/// Loss `[batch]` and backprop `[batch, classes]` from logits and labels that are
/// both 2-D, or broadcast to 2-D.
fn xent_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    if let Ok(logits) = with_rank(&c.input(0), 2) {
        if let Ok(m) = logits.merge(&c.input(1)) {
            c.set_output(0, Shape::from_dims(&[m.dim(0)]))?;
            return c.set_output(1, m);
        }
    }
    let b = shape_fn::broadcast_shapes(&c.input(0), &c.input(1))?;
    match b.rank() {
        Some(2) => {
            c.set_output(0, Shape::from_dims(&[b.dim(0)]))?;
            c.set_output(1, b)
        }
        Some(r) => Err(Status::invalid_argument(format!(
            "Shape must be broadcasted with rank 2, but is rank {r}"
        ))),
        None => Err(Status::invalid_argument(
            "Shape must be broadcasted with rank 2, but is rank is unknown.",
        )),
    }
}

fn sparse_xent_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let features = with_rank(&c.input(0), 2)?;
    let labels = with_rank(&c.input(1), 1)?;
    let batch = merge_dim(features.dim(0), labels.dim(0))?;
    c.set_output(0, Shape::from_dims(&[batch]))?;
    c.set_output(1, Shape::from_dims(&[batch, features.dim(1)]))
}

fn is_nchw(c: &InferenceContext<'_>) -> bool {
    c.attr::<String>("data_format").is_ok_and(|f| f == "NCHW")
}

/// TensorFlow's `BiasAddShape`: the input's shape (rank at least 2, or 3 for
/// `NCHW`) with its bias dimension merged with the bias length.
fn bias_add_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let nchw = is_nchw(c);
    let input = with_rank_at_least(&c.input(0), if nchw { 3 } else { 2 })?;
    let bias = with_rank(&c.input(1), 1)?;
    let Some(dims) = input.dims() else {
        return c.set_output(0, Shape::unknown());
    };
    let mut out = dims.to_vec();
    let channel = if nchw { 1 } else { out.len() - 1 };
    out[channel] = merge_dim(out[channel], bias.dim(0))?;
    c.set_output(0, Shape::from_dims(&out))
}

/// TensorFlow's `BiasAddGradShape`: a vector as long as the bias dimension.
fn bias_add_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let nchw = is_nchw(c);
    let input = with_rank_at_least(&c.input(0), if nchw { 3 } else { 2 })?;
    let channel = match input.rank() {
        None => None,
        Some(r) => input.dim(if nchw { 1 } else { r - 1 }),
    };
    c.set_output(0, Shape::from_dims(&[channel]))
}

/// `Relu`: `max(features, 0)`.
pub fn relu(s: &Scope, features: &Output) -> Result<Output> {
    s.op("Relu").input(features).build1()
}

/// `Relu6`: `min(max(features, 0), 6)`.
pub fn relu6(s: &Scope, features: &Output) -> Result<Output> {
    s.op("Relu6").input(features).build1()
}

/// `Elu`: `exp(features) - 1` where negative, else `features`.
pub fn elu(s: &Scope, features: &Output) -> Result<Output> {
    s.op("Elu").input(features).build1()
}

/// `Selu`: the scaled exponential linear unit.
pub fn selu(s: &Scope, features: &Output) -> Result<Output> {
    s.op("Selu").input(features).build1()
}

/// `Softplus`: `log(exp(features) + 1)`.
pub fn softplus(s: &Scope, features: &Output) -> Result<Output> {
    s.op("Softplus").input(features).build1()
}

/// `Softsign`: `features / (abs(features) + 1)`.
pub fn softsign(s: &Scope, features: &Output) -> Result<Output> {
    s.op("Softsign").input(features).build1()
}

/// `LeakyRelu`: `features` where positive, else `alpha * features`.
pub fn leaky_relu(s: &Scope, features: &Output, alpha: f32) -> Result<Output> {
    s.op("LeakyRelu")
        .input(features)
        .attr("alpha", alpha)
        .build1()
}

/// `Softmax` over the last dimension.
pub fn softmax(s: &Scope, logits: &Output) -> Result<Output> {
    s.op("Softmax").input(logits).build1()
}

/// `LogSoftmax` over the last dimension.
pub fn log_softmax(s: &Scope, logits: &Output) -> Result<Output> {
    s.op("LogSoftmax").input(logits).build1()
}

/// `SoftmaxCrossEntropyWithLogits`: `(loss, backprop)` for 2-D (or broadcast to
/// 2-D) logits and label distributions.
pub fn softmax_cross_entropy_with_logits(
    s: &Scope,
    features: &Output,
    labels: &Output,
) -> Result<(Output, Output)> {
    let op = s
        .op("SoftmaxCrossEntropyWithLogits")
        .input(features)
        .input(labels)
        .build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `SparseSoftmaxCrossEntropyWithLogits`: `(loss, backprop)` for `[batch, classes]`
/// logits and `[batch]` class indices (`int32` or `int64`).
pub fn sparse_softmax_cross_entropy_with_logits(
    s: &Scope,
    features: &Output,
    labels: &Output,
) -> Result<(Output, Output)> {
    let op = s
        .op("SparseSoftmaxCrossEntropyWithLogits")
        .input(features)
        .input(labels)
        .build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `BiasAdd`: adds the 1-D `bias` along the channel dimension of `value`
/// (`data_format` `"NHWC"`: the last; `"NCHW"`: dimension 1).
pub fn bias_add(s: &Scope, value: &Output, bias: &Output, data_format: &str) -> Result<Output> {
    s.op("BiasAdd")
        .input(value)
        .input(bias)
        .attr("data_format", data_format)
        .build1()
}

/// `BiasAddV1`: `BiasAdd` along the last dimension (no `data_format`).
pub fn bias_add_v1(s: &Scope, value: &Output, bias: &Output) -> Result<Output> {
    s.op("BiasAddV1").input(value).input(bias).build1()
}

/// `L2Loss`: `sum(t ** 2) / 2`.
pub fn l2_loss(s: &Scope, t: &Output) -> Result<Output> {
    s.op("L2Loss").input(t).build1()
}

/// `ReluGrad`: `gradients` where `features > 0`, else 0.
pub fn relu_grad(s: &Scope, gradients: &Output, features: &Output) -> Result<Output> {
    s.op("ReluGrad").input(gradients).input(features).build1()
}

/// `Relu6Grad`: `gradients` where `0 < features < 6`, else 0.
pub fn relu6_grad(s: &Scope, gradients: &Output, features: &Output) -> Result<Output> {
    s.op("Relu6Grad").input(gradients).input(features).build1()
}

/// `EluGrad`, from the `Elu` op's outputs.
pub fn elu_grad(s: &Scope, gradients: &Output, outputs: &Output) -> Result<Output> {
    s.op("EluGrad").input(gradients).input(outputs).build1()
}

/// `SeluGrad`, from the `Selu` op's outputs.
pub fn selu_grad(s: &Scope, gradients: &Output, outputs: &Output) -> Result<Output> {
    s.op("SeluGrad").input(gradients).input(outputs).build1()
}

/// `SoftplusGrad`, from the `Softplus` op's inputs.
pub fn softplus_grad(s: &Scope, gradients: &Output, features: &Output) -> Result<Output> {
    s.op("SoftplusGrad")
        .input(gradients)
        .input(features)
        .build1()
}

/// `SoftsignGrad`, from the `Softsign` op's inputs.
pub fn softsign_grad(s: &Scope, gradients: &Output, features: &Output) -> Result<Output> {
    s.op("SoftsignGrad")
        .input(gradients)
        .input(features)
        .build1()
}

/// `LeakyReluGrad`, from the `LeakyRelu` op's inputs.
pub fn leaky_relu_grad(
    s: &Scope,
    gradients: &Output,
    features: &Output,
    alpha: f32,
) -> Result<Output> {
    s.op("LeakyReluGrad")
        .input(gradients)
        .input(features)
        .attr("alpha", alpha)
        .build1()
}

/// `BiasAddGrad`: sums `out_backprop` over every dimension but the channel one.
pub fn bias_add_grad(s: &Scope, out_backprop: &Output, data_format: &str) -> Result<Output> {
    s.op("BiasAddGrad")
        .input(out_backprop)
        .attr("data_format", data_format)
        .build1()
}

/// `tf.nn.dropout` as TensorFlow 2.21 builds it in a graph (`nn_ops._dropout`;
/// TF1's `tf.compat.v1.nn.dropout(x, keep_prob)` is `rate = 1 - keep_prob`):
/// under the name scope `dropout`, `x * (1 / (1 - rate))`, a `RandomUniform` of
/// `noise_shape` (default: `x`'s shape) seeded by `seed` as
/// [`get_seed`](crate::ops::get_seed) seeds it, and a `SelectV2` keeping the
/// scaled value where the uniform draw is at least `rate`, zero elsewhere. Each
/// element survives with probability `1 - rate` and the expected output is `x`;
/// with a seed the mask is TensorFlow's for that seed, and a new one each run.
/// (TensorFlow 1.x built the same mask as `floor(keep_prob + uniform)`.)
///
/// `rate == 0` returns `x` itself; a rate outside `[0, 1)` or an `x` that is not
/// floating point is `InvalidArgument`.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::{ops, DType, Shape};
///
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::known(&[8, 16])).unwrap();
/// let y = ops::dropout(&s, &x, 0.5, None, Some(7)).unwrap();
/// assert_eq!(y.shape(), x.shape());
/// assert_eq!(y.op().op_type(), "SelectV2");
/// ```
pub fn dropout(
    s: &Scope,
    x: &Output,
    rate: f64,
    noise_shape: Option<&Output>,
    seed: Option<i64>,
) -> Result<Output> {
    use crate::gradients::math_grad::shapes::{float_scalar, shape_of};
    if !(0.0..1.0).contains(&rate) {
        return Err(Status::invalid_argument(format!(
            "`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate={rate}"
        )));
    }
    let dtype = x.dtype();
    if !dtype.is_float() {
        return Err(Status::invalid_argument(format!(
            "`x.dtype` must be a floating point tensor as `x` will be scaled. Received: \
             x_dtype={dtype}"
        )));
    }
    if rate == 0.0 {
        return Ok(x.clone());
    }
    let s = &s.with_name_scope("dropout");
    let scaled = crate::ops::mul(s, x, &float_scalar(s, 1.0 / (1.0 - rate), dtype)?)?;
    let shape = match noise_shape {
        Some(n) => n.clone(),
        None => shape_of(s, x, DType::I32)?,
    };
    let (seed, seed2) = crate::ops::get_seed(seed);
    let uniform = crate::ops::random_uniform(s, &shape, dtype, seed, seed2)?;
    let keep = crate::ops::greater_equal(s, &uniform, &float_scalar(s, rate, dtype)?)?;
    let zero = float_scalar(s, 0.0, dtype)?;
    crate::ops::select_v2(s, &keep, &scaled, &zero)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ops, DType};

    fn ph(s: &Scope, dtype: DType, dims: &[Option<usize>]) -> Output {
        ops::placeholder(s, dtype, Shape::from_dims(dims)).unwrap()
    }

    #[test]
    fn activation_signatures_and_shapes() {
        let s = Scope::new();
        let x = ph(&s, DType::F32, &[Some(2), None]);
        for y in [
            relu(&s, &x).unwrap(),
            relu6(&s, &x).unwrap(),
            elu(&s, &x).unwrap(),
            selu(&s, &x).unwrap(),
            softplus(&s, &x).unwrap(),
            softsign(&s, &x).unwrap(),
            leaky_relu(&s, &x, 0.1).unwrap(),
        ] {
            assert_eq!(y.shape(), x.shape());
            assert_eq!(y.dtype(), DType::F32);
        }
        let n = s.graph_def().find("LeakyRelu").cloned().unwrap();
        assert_eq!(n.get_attr::<f32>("alpha").unwrap(), 0.1);
        // Relu takes integers, Elu only floats.
        let i = ph(&s, DType::I32, &[Some(3)]);
        assert!(relu(&s, &i).is_ok());
        assert_eq!(
            elu(&s, &i).unwrap_err().code(),
            crate::Code::InvalidArgument
        );
        // Gradients merge the shapes of both inputs.
        let g = ph(&s, DType::F32, &[None, Some(5)]);
        assert_eq!(
            relu_grad(&s, &g, &x).unwrap().shape(),
            Shape::known(&[2, 5])
        );
        let bad = ph(&s, DType::F32, &[Some(3), Some(5)]);
        assert!(relu_grad(&s, &bad, &x).is_err());
    }

    #[test]
    fn softmax_and_losses() {
        let s = Scope::new();
        let scalar = ph(&s, DType::F32, &[]);
        assert!(softmax(&s, &scalar).is_err());
        let logits = ph(&s, DType::F32, &[None, Some(4)]);
        assert_eq!(log_softmax(&s, &logits).unwrap().shape(), logits.shape());
        let labels = ph(&s, DType::F32, &[Some(8), None]);
        let (loss, bp) = softmax_cross_entropy_with_logits(&s, &logits, &labels).unwrap();
        assert_eq!(loss.shape(), Shape::known(&[8]));
        assert_eq!(bp.shape(), Shape::known(&[8, 4]));
        // A row of labels broadcasts against the logits.
        let row = ph(&s, DType::F32, &[Some(4)]);
        let (loss, _) = softmax_cross_entropy_with_logits(&s, &logits, &row).unwrap();
        assert_eq!(loss.shape(), Shape::from_dims(&[None]));
        let v = ph(&s, DType::F32, &[Some(4)]);
        assert!(softmax_cross_entropy_with_logits(&s, &v, &row).is_err());
        let idx = ph(&s, DType::I32, &[Some(6)]);
        let (loss, bp) = sparse_softmax_cross_entropy_with_logits(&s, &logits, &idx).unwrap();
        assert_eq!(loss.shape(), Shape::known(&[6]));
        assert_eq!(bp.shape(), Shape::known(&[6, 4]));
        let n = s
            .graph_def()
            .find("SparseSoftmaxCrossEntropyWithLogits")
            .cloned()
            .unwrap();
        assert_eq!(n.get_attr::<DType>("Tlabels").unwrap(), DType::I32);
        let idx7 = ph(&s, DType::I64, &[Some(7)]);
        let fixed = ph(&s, DType::F32, &[Some(6), Some(4)]);
        assert!(sparse_softmax_cross_entropy_with_logits(&s, &fixed, &idx7).is_err());
        let f = ph(&s, DType::F16, &[Some(3), Some(2)]);
        assert_eq!(l2_loss(&s, &f).unwrap().shape(), Shape::scalar());
    }

    #[test]
    fn bias_add_shapes() {
        let s = Scope::new();
        let x = ph(&s, DType::F32, &[Some(2), Some(3), None]);
        let b = ph(&s, DType::F32, &[Some(5)]);
        assert_eq!(
            bias_add(&s, &x, &b, "NHWC").unwrap().shape(),
            Shape::known(&[2, 3, 5])
        );
        let b3 = ph(&s, DType::F32, &[Some(3)]);
        assert_eq!(
            bias_add(&s, &x, &b3, "NCHW").unwrap().shape(),
            Shape::from_dims(&[Some(2), Some(3), None])
        );
        assert!(bias_add(&s, &x, &b, "NCHW").is_err());
        assert!(bias_add(&s, &x, &b, "NDHWC").is_err());
        assert_eq!(
            bias_add_v1(&s, &x, &b).unwrap().shape(),
            Shape::known(&[2, 3, 5])
        );
        let v = ph(&s, DType::F32, &[Some(5)]);
        assert!(bias_add(&s, &v, &b, "NHWC").is_err());
        assert_eq!(
            bias_add_grad(&s, &x, "NHWC").unwrap().shape(),
            Shape::from_dims(&[None])
        );
        assert_eq!(
            bias_add_grad(&s, &x, "NCHW").unwrap().shape(),
            Shape::known(&[3])
        );
        let m = ph(&s, DType::F32, &[Some(2), Some(3)]);
        assert!(bias_add_grad(&s, &m, "NCHW").is_err());
        let scalar = ph(&s, DType::F32, &[]);
        assert!(bias_add_grad(&s, &scalar, "NHWC").is_err());
        let unknown = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
        assert_eq!(
            bias_add(&s, &unknown, &b, "NHWC").unwrap().shape(),
            Shape::unknown()
        );
    }
}
