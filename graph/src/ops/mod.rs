//! Op signatures and builder functions, one file per op family as in TensorFlow's
//! `core/ops/`. Each family has `register_all_ops(registry)` with one
//! `OpDef::build(…)` per op, and typed builder functions (`add`, `mat_mul`, …) that
//! add a node to a [`Scope`](crate::builder::Scope).
//!
//! - [`array`](mod@array) — constants, placeholders, identity, shapes, slicing, concatenation.
//! - [`math`] — element-wise arithmetic, comparisons, logic, reductions, matmul, cast.
//! - [`reduction`] — Sum, Mean, Max, Min, Prod, All, Any, ArgMax, ArgMin.
//! - [`linalg`] — MatMul, BatchMatMul.
//! - [`nn`] — activations, softmax, cross-entropy, bias add.
//! - [`pooling`] — max and average pooling and their gradients.
//! - [`normalization`] — fused batch norm, local response normalization.
//! - [`conv`] — Conv2D, DepthwiseConv2dNative and their gradients.
//! - [`image`] — ResizeBilinear, ResizeNearestNeighbor and their gradients.
//! - [`random`] — seeded random number ops, `Multinomial`.
//! - [`state`] — reference and resource variables.
//! - [`scatter`](mod@scatter) — `ResourceGather` and the scatter updates of variables.
//! - [`control_flow`] — Switch/Merge/Enter/Exit/NextIteration/LoopCond.
//! - [`data_flow`] — queues, stacks, TensorArrays, DynamicPartition/DynamicStitch.
//! - [`sparse`] — sparse tensors: matmul, to-dense, reorder, reduce-sum, dense add.
//! - [`lookup`] — hash tables as resources (`HashTableV2`, `LookupTableFindV2`, …).
//! - [`string`] — `StringToHashBucketFast`/`Strong`.
//! - [`candidate_sampling`] — the samplers behind `nce_loss`/`sampled_softmax_loss`.
//! - [`rnn`] — `dynamic_rnn`, `bidirectional_dynamic_rnn`, LSTM and GRU cells.
//! - [`input`] — `batch`, `shuffle_batch`: queue-fed batching helpers.
//! - [`function`] — `_Arg`/`_Retval`, how a step's feeds and fetches enter the graph.
//! - [`sendrecv`] — `_Send`/`_Recv`, inserted by partitioning.
//! - [`no_op`](mod@no_op) — `NoOp`.
//! - [`summary`] — TensorBoard summaries.
//! - [`logging`] — `Assert`.
//! - [`training`] — fused optimizer updates (`ApplyAdam`, `ResourceApplyAdam`, …).
//! - [`sparse_training`] — their sparse forms (`SparseApplyMomentum`, …).
//! - [`checkpoint`] — `SaveV2`/`RestoreV2`.

pub mod array;
pub mod candidate_sampling;
pub mod checkpoint;
pub mod control_flow;
pub mod conv;
pub mod data_flow;
pub mod function;
pub mod image;
pub mod input;
pub mod io;
pub mod linalg;
pub mod logging;
pub mod lookup;
pub mod math;
pub mod nn;
pub mod no_op;
pub mod normalization;
pub mod parsing;
pub mod pooling;
pub mod random;
pub mod reduction;
pub mod rnn;
pub mod scatter;
pub mod sendrecv;
pub mod sparse;
pub mod sparse_training;
pub mod state;
pub mod string;
pub mod summary;
pub mod training;

pub use array::*;
pub use candidate_sampling::*;
pub use checkpoint::*;
pub use control_flow::*;
pub use conv::*;
pub use data_flow::*;
pub use image::*;
pub use input::*;
pub use io::*;
pub use linalg::*;
pub use logging::*;
pub use lookup::*;
pub use math::*;
pub use nn::*;
pub use no_op::*;
pub use normalization::*;
pub use parsing::*;
pub use pooling::*;
pub use random::*;
pub use reduction::*;
pub use scatter::*;
pub use sparse::*;
pub use sparse_training::*;
pub use state::*;
pub use string::*;
pub use training::*;

use crate::OpRegistry;

/// Registers every built-in op.
pub fn register_all_ops(r: &OpRegistry) {
    array::register_all_ops(r);
    candidate_sampling::register_all_ops(r);
    checkpoint::register_all_ops(r);
    control_flow::register_all_ops(r);
    conv::register_all_ops(r);
    data_flow::register_all_ops(r);
    logging::register_all_ops(r);
    lookup::register_all_ops(r);
    function::register_all_ops(r);
    image::register_all_ops(r);
    io::register_all_ops(r);
    linalg::register_all_ops(r);
    math::register_all_ops(r);
    nn::register_all_ops(r);
    no_op::register_all_ops(r);
    normalization::register_all_ops(r);
    parsing::register_all_ops(r);
    pooling::register_all_ops(r);
    random::register_all_ops(r);
    reduction::register_all_ops(r);
    scatter::register_all_ops(r);
    sendrecv::register_all_ops(r);
    sparse::register_all_ops(r);
    sparse_training::register_all_ops(r);
    state::register_all_ops(r);
    string::register_all_ops(r);
    summary::register_all_ops(r);
    training::register_all_ops(r);
}

/// The dtypes TensorFlow's arithmetic ops accept, as a spec string.
pub(crate) const NUMERIC_TYPES: &str =
    "{bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64}";

/// Real floating-point dtypes.
pub(crate) const FLOAT_TYPES: &str = "{bfloat16, half, float, double}";

/// Helpers the ops' unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    use crate::builder::{Output, Scope};
    use crate::{DType, Shape};

    /// A placeholder of `dtype` and the partial shape `dims`.
    pub(crate) fn placeholder_of(s: &Scope, dtype: DType, dims: &[Option<usize>]) -> Output {
        super::placeholder(s, dtype, Shape::from_dims(dims)).expect("a valid placeholder")
    }
}
