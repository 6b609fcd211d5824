//! Normalization ops (TensorFlow's `nn_ops.cc`): `FusedBatchNorm`,
//! `FusedBatchNormV2`, `FusedBatchNormV3`, their gradients
//! `FusedBatchNormGrad{,V2,V3}`, and local response normalization (`LRN`,
//! `LRNGrad`), with TensorFlow's attributes, type sets and shape functions
//! (`FusedBatchNormShape`, `FusedBatchNormGradShape`), plus the `tf.nn`-style
//! builders `fused_batch_norm` and `local_response_normalization`.

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{merge_dim, with_rank};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Tensor};

/// The data formats of `FusedBatchNorm` and `FusedBatchNormV2`.
const FORMATS_2D: &str = "data_format: {'NHWC', 'NCHW'} = 'NHWC'";
/// The data formats of the V3 ops (`GetConvnetDataFormat2D3DAttrString`).
const FORMATS_2D_3D: &str = "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'";

/// Registers the normalization ops.
pub fn register_all_ops(r: &OpRegistry) {
    for (name, version) in [
        ("FusedBatchNorm", 1),
        ("FusedBatchNormV2", 2),
        ("FusedBatchNormV3", 3),
    ] {
        let u = if version == 1 { "T" } else { "U" };
        let mut b = OpDef::build(name)
            .input("x: T")
            .input(&format!("scale: {u}"))
            .input(&format!("offset: {u}"))
            .input(&format!("mean: {u}"))
            .input(&format!("variance: {u}"))
            .output("y: T")
            .output(&format!("batch_mean: {u}"))
            .output(&format!("batch_variance: {u}"))
            .output(&format!("reserve_space_1: {u}"))
            .output(&format!("reserve_space_2: {u}"));
        if version == 3 {
            b = b.output("reserve_space_3: U");
        }
        b = if version == 1 {
            b.attr("T: {float}")
        } else {
            b.attr("T: {half, bfloat16, float}").attr("U: {float}")
        };
        r.register(
            b.attr("epsilon: float = 0.0001")
                .attr("exponential_avg_factor: float = 1.0")
                .attr(if version == 3 {
                    FORMATS_2D_3D
                } else {
                    FORMATS_2D
                })
                .attr("is_training: bool = true")
                .shape_fn(fused_batch_norm_shape),
        );
    }
    for (name, version) in [
        ("FusedBatchNormGrad", 1),
        ("FusedBatchNormGradV2", 2),
        ("FusedBatchNormGradV3", 3),
    ] {
        let u = if version == 1 { "T" } else { "U" };
        let scale = if version == 1 { "T" } else { "float" };
        let mut b = OpDef::build(name)
            .input("y_backprop: T")
            .input("x: T")
            .input(&format!("scale: {scale}"))
            .input(&format!("reserve_space_1: {u}"))
            .input(&format!("reserve_space_2: {u}"));
        if version == 3 {
            b = b.input("reserve_space_3: U");
        }
        b = b
            .output("x_backprop: T")
            .output(&format!("scale_backprop: {u}"))
            .output(&format!("offset_backprop: {u}"));
        b = if version == 3 {
            b.output("reserve_space_4: U").output("reserve_space_5: U")
        } else {
            b.output(&format!("reserve_space_3: {u}"))
                .output(&format!("reserve_space_4: {u}"))
        };
        b = if version == 1 {
            b.attr("T: {float}")
        } else {
            b.attr("T: {half, bfloat16, float}").attr("U: {float}")
        };
        r.register(
            b.attr("epsilon: float = 0.0001")
                .attr(if version == 3 {
                    FORMATS_2D_3D
                } else {
                    FORMATS_2D
                })
                .attr("is_training: bool = true")
                .shape_fn(fused_batch_norm_grad_shape),
        );
    }
    let lrn_attrs = |b: crate::op_def::OpDefBuilder| {
        b.attr("depth_radius: int = 5")
            .attr("bias: float = 1.0")
            .attr("alpha: float = 1.0")
            .attr("beta: float = 0.5")
            .attr("T: {half, bfloat16, float} = DT_FLOAT")
    };
    r.register(
        lrn_attrs(OpDef::build("LRN").input("input: T").output("output: T")).shape_fn(lrn_shape),
    );
    r.register(
        lrn_attrs(
            OpDef::build("LRNGrad")
                .input("input_grads: T")
                .input("input_image: T")
                .input("output_image: T")
                .output("output: T"),
        )
        .shape_fn(lrn_grad_shape),
    );
}

/// The rank and channel index of a batch-norm `data_format`.
fn format_rank_and_channel(c: &InferenceContext<'_>) -> (usize, bool) {
    let f = c
        .attr::<String>("data_format")
        .unwrap_or_else(|_| "NHWC".to_owned());
    let rank = if f.len() == 5 { 5 } else { 4 };
    (rank, f.starts_with("NC"))
}

/// TensorFlow's `FusedBatchNormShape` (and `FusedBatchNormV3Shape`): `y` is `x`
/// with its channel dimension merged with `scale`, `offset` and, when the
/// running statistics are read (`is_training` false or an
/// `exponential_avg_factor` other than 1), `mean` and `variance`; the statistics
/// outputs are vectors of the channels; V3's `reserve_space_3` is unknown.
fn fused_batch_norm_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let (rank, nc) = format_rank_and_channel(c);
    let x = with_rank(&c.input(0), rank)?;
    let is_training: bool = c.attr("is_training").unwrap_or(true);
    let factor: f32 = c.attr("exponential_avg_factor").unwrap_or(1.0);
    let inputs = if is_training && factor == 1.0 { 3 } else { 5 };
    let ci = if nc { 1 } else { rank - 1 };
    let mut channels = x.dim(ci);
    for i in 1..inputs {
        let v = with_rank(&c.input(i), 1)?;
        channels = merge_dim(channels, v.dim(0))?;
    }
    let mut dims: Vec<Option<usize>> = x
        .dims()
        .map(<[Option<usize>]>::to_vec)
        .unwrap_or_else(|| vec![None; rank]);
    dims[ci] = channels;
    c.set_output(0, Shape::from_dims(&dims))?;
    for o in 1..5 {
        c.set_output(o, Shape::from_dims(&[channels]))?;
    }
    if c.num_outputs() > 5 {
        c.set_output(5, Shape::unknown())?;
    }
    Ok(())
}

/// TensorFlow's `FusedBatchNormGradShape`: `x_backprop` as `y_backprop` merged
/// with `x`; channel vectors for the scale and offset gradients; empty vectors
/// for the reserve outputs.
fn fused_batch_norm_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let (rank, nc) = format_rank_and_channel(c);
    let dy = with_rank(&c.input(0), rank)?;
    let x = with_rank(&c.input(1), rank)?;
    let dy = dy.merge(&x)?;
    let ci = if nc { 1 } else { rank - 1 };
    let mut channels = dy.dim(ci);
    for i in 2..5 {
        let v = with_rank(&c.input(i), 1)?;
        channels = merge_dim(channels, v.dim(0))?;
    }
    let mut dims: Vec<Option<usize>> = dy
        .dims()
        .map(<[Option<usize>]>::to_vec)
        .unwrap_or_else(|| vec![None; rank]);
    dims[ci] = channels;
    c.set_output(0, Shape::from_dims(&dims))?;
    c.set_output(1, Shape::from_dims(&[channels]))?;
    c.set_output(2, Shape::from_dims(&[channels]))?;
    c.set_output(3, Shape::known(&[0]))?;
    c.set_output(4, Shape::known(&[0]))
}

fn lrn_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = with_rank(&c.input(0), 4)?;
    c.set_output(0, s)
}

fn lrn_grad_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = with_rank(&c.input(0), 4)?
        .merge(&c.input(1))?
        .merge(&c.input(2))?;
    c.set_output(0, s)
}

/// Settings of [`fused_batch_norm`], as `tf.compat.v1.nn.fused_batch_norm`'s
/// keyword arguments.
#[derive(Clone, Debug)]
pub struct FusedBatchNormOpts {
    /// Added to the variance (raised to at least 1.001e-5, as TensorFlow does).
    pub epsilon: f32,
    /// `NHWC`, `NCHW`, `NDHWC` or `NCDHW`.
    pub data_format: String,
    /// Normalize by the batch statistics (true) or by `mean`/`variance`.
    pub is_training: bool,
    /// The weight of the batch statistics in the running averages.
    pub exponential_avg_factor: f32,
}

impl Default for FusedBatchNormOpts {
    fn default() -> FusedBatchNormOpts {
        FusedBatchNormOpts {
            epsilon: 0.001,
            data_format: "NHWC".to_owned(),
            is_training: true,
            exponential_avg_factor: 1.0,
        }
    }
}

/// The outputs of [`fused_batch_norm`]: `y`, the batch (or updated running) mean
/// and variance.
#[derive(Debug)]
pub struct FusedBatchNormOutputs {
    /// The normalized input.
    pub y: Output,
    /// The batch mean (training) or the given mean (inference).
    pub mean: Output,
    /// The Bessel-corrected batch variance (training) or the given variance.
    pub variance: Output,
}

/// `tf.compat.v1.nn.fused_batch_norm`: `FusedBatchNormV3`, with empty running
/// statistics when none are given (training without averaging needs none).
pub fn fused_batch_norm(
    s: &Scope,
    x: &Output,
    scale: &Output,
    offset: &Output,
    mean: Option<&Output>,
    variance: Option<&Output>,
    opts: &FusedBatchNormOpts,
) -> Result<FusedBatchNormOutputs> {
    let empty = || crate::ops::constant(s, Tensor::vector::<f32>(&[]));
    let mean = match mean {
        Some(m) => m.clone(),
        None => empty()?,
    };
    let variance = match variance {
        Some(v) => v.clone(),
        None => empty()?,
    };
    // TensorFlow's cuDNN floor, which the Python wrapper applies on every device.
    let epsilon = opts.epsilon.max(1.001e-5);
    let op = s
        .op("FusedBatchNormV3")
        .input(x)
        .input(scale)
        .input(offset)
        .input(&mean)
        .input(&variance)
        .attr("epsilon", epsilon)
        .attr("data_format", opts.data_format.as_str())
        .attr("is_training", opts.is_training)
        .attr("exponential_avg_factor", opts.exponential_avg_factor)
        .build()?;
    Ok(FusedBatchNormOutputs {
        y: op.output(0)?,
        mean: op.output(1)?,
        variance: op.output(2)?,
    })
}

/// `tf.nn.local_response_normalization` (`LRN`): `input / (bias + alpha *
/// sqr_sum) ** beta`, `sqr_sum` over `depth_radius` channels on each side.
pub fn local_response_normalization(
    s: &Scope,
    input: &Output,
    depth_radius: i64,
    bias: f32,
    alpha: f32,
    beta: f32,
) -> Result<Output> {
    s.op("LRN")
        .input(input)
        .attr("depth_radius", depth_radius)
        .attr("bias", bias)
        .attr("alpha", alpha)
        .attr("beta", beta)
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
    fn batch_norm_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), Some(3), Some(4), None]);
        let c = ph(&s, &[Some(5)]);
        let out = fused_batch_norm(&s, &x, &c, &c, None, None, &Default::default()).unwrap();
        assert_eq!(out.y.shape(), Shape::known(&[2, 3, 4, 5]));
        assert_eq!(out.mean.shape(), Shape::known(&[5]));
        let opts = FusedBatchNormOpts {
            data_format: "NCHW".into(),
            is_training: false,
            ..Default::default()
        };
        let c3 = ph(&s, &[Some(3)]);
        let out = fused_batch_norm(&s, &x, &c3, &c3, Some(&c3), Some(&c3), &opts).unwrap();
        assert_eq!(
            out.y.shape(),
            Shape::from_dims(&[Some(2), Some(3), Some(4), None])
        );
        // Inference reads the running statistics, which must match the channels.
        let e = fused_batch_norm(&s, &x, &c3, &c3, Some(&c), Some(&c3), &opts).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let v = ph(&s, &[Some(3), Some(4)]);
        assert!(fused_batch_norm(&s, &v, &c, &c, None, None, &Default::default()).is_err());
        let y = local_response_normalization(&s, &x, 2, 1.0, 1e-3, 0.75).unwrap();
        assert_eq!(y.shape(), x.shape());
        assert!(local_response_normalization(&s, &v, 2, 1.0, 1.0, 0.5).is_err());
        let n = s.graph_def().find("LRN").cloned().unwrap();
        assert_eq!(n.get_attr::<i64>("depth_radius").unwrap(), 2);
    }
}
