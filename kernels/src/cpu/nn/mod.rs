//! CPU kernels of the nn ops (TensorFlow's `relu_op`, `softplus_op`, `softsign_op`,
//! `softmax_op`, `xent_op`, `sparse_xent_op`, `bias_op` and `l2loss_op`), and the
//! float helpers they share.
//!
//! - [`activations`]: `Relu`, `Relu6`, `Elu`, `Selu`, `Softplus`, `Softsign`,
//!   `LeakyRelu` and their gradients.
//! - [`softmax`]: `Softmax`, `LogSoftmax` and the two cross-entropy losses.
//! - [`bias`]: `BiasAdd`, `BiasAddV1`, `BiasAddGrad` and `L2Loss`.
//! - [`pooling`]: `MaxPool`/`AvgPool` and their gradients (`maxpooling_op`, `avgpooling_op`).
//! - [`batch_norm`]: `FusedBatchNorm{,V2,V3}` and their gradients.
//! - [`lrn`]: `LRN` and `LRNGrad`.
//! - [`conv`]: `Conv2D`, `_FusedConv2D`, `DepthwiseConv2dNative` and their gradients.
//! - [`epilogue`]: the bias or batch norm and activation fused contractions apply.
//! - [`top_k`]: `TopKV2`, `InTopKV2`.
//!
//! Element-wise arithmetic follows TensorFlow's Eigen expressions operation by
//! operation, so `half` and `bfloat16` round after each step as Eigen does; sums
//! follow [`row_sum`].

pub mod activations;
pub mod batch_norm;
pub mod bias;
pub mod conv;
pub mod epilogue;
pub mod lrn;
pub mod pooling;
pub mod softmax;
pub mod top_k;

use graph::{bf16, f16};

use crate::cpu::types::FloatType;
use crate::registry::KernelRegistry;

/// A float element type with a wider accumulator for sums and TensorFlow's way of
/// turning constants into it.
pub trait NnFloat: FloatType {
    /// The type sums of this type accumulate in.
    type Acc: FloatType;
    /// Widens to the accumulator type.
    fn to_acc(self) -> Self::Acc;
    /// Rounds an accumulated value back.
    fn from_acc(a: Self::Acc) -> Self;
    /// `static_cast<T>(v)` of a C++ constant: exact for `double`, through `float`
    /// for the others (as Eigen's `half`/`bfloat16` constructors convert).
    fn constant(v: f64) -> Self;
    /// `T(v)` of a `float` attribute.
    fn from_attr_f32(v: f32) -> Self;
}

impl NnFloat for f32 {
    type Acc = f64;
    fn to_acc(self) -> f64 {
        self as f64
    }
    fn from_acc(a: f64) -> f32 {
        a as f32
    }
    fn constant(v: f64) -> f32 {
        v as f32
    }
    fn from_attr_f32(v: f32) -> f32 {
        v
    }
}

impl NnFloat for f64 {
    type Acc = f64;
    fn to_acc(self) -> f64 {
        self
    }
    fn from_acc(a: f64) -> f64 {
        a
    }
    fn constant(v: f64) -> f64 {
        v
    }
    fn from_attr_f32(v: f32) -> f64 {
        v as f64
    }
}

impl NnFloat for f16 {
    type Acc = f32;
    fn to_acc(self) -> f32 {
        self.to_f32()
    }
    fn from_acc(a: f32) -> f16 {
        f16::from_f32(a)
    }
    fn constant(v: f64) -> f16 {
        f16::from_f32(v as f32)
    }
    fn from_attr_f32(v: f32) -> f16 {
        f16::from_f32(v)
    }
}

impl NnFloat for bf16 {
    type Acc = f32;
    fn to_acc(self) -> f32 {
        self.to_f32()
    }
    fn from_acc(a: f32) -> bf16 {
        bf16::from_f32(a)
    }
    fn constant(v: f64) -> bf16 {
        bf16::from_f32(v as f32)
    }
    fn from_attr_f32(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
}

/// Sums shorter than this are taken one element at a time in `T`, as Eigen's
/// scalar reduction path does (it vectorizes only reductions of at least one
/// packet, 8 floats with AVX); longer ones accumulate in the wider
/// [`NnFloat::Acc`], which is closer to Eigen's lane-wise partial sums than a long
/// `half` running sum would be.
pub const SEQUENTIAL_SUM_MAX: usize = 8;

/// The sum of `len` values, rounded to `T`; see [`SEQUENTIAL_SUM_MAX`].
pub fn row_sum<T: NnFloat>(len: usize, values: impl Iterator<Item = T>) -> T {
    if len < SEQUENTIAL_SUM_MAX {
        values.fold(T::zero(), |s, v| s + v)
    } else {
        T::from_acc(values.fold(<T::Acc as num_traits::Zero>::zero(), |s, v| s + v.to_acc()))
    }
}

/// Registers the nn kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    activations::register_all_kernels(r);
    softmax::register_all_kernels(r);
    bias::register_all_kernels(r);
    pooling::register_all_kernels(r);
    batch_norm::register_all_kernels(r);
    lrn::register_all_kernels(r);
    conv::register_all_kernels(r);
    top_k::register_all_kernels(r);
}
