//! CPU kernels, one module per op family (mirroring `graph::ops`), each with
//! `register_all_kernels`. Kernels are generic over the element type and pick their
//! monomorphised form once, when they are built ([`dispatch`] macros), so `compute`
//! does no dtype matching per element.
//!
//! - [`types`] — element-type traits and the dtype dispatch macros.
//! - [`broadcast`] — numpy broadcasting (`BCast`).
//! - [`array`](mod@array) — constants, placeholders, identity, shapes, slicing, concat, gather.
//! - [`math`] — element-wise, comparisons, reductions, matmul, cast.
//! - [`reduction`] — reductions and arg-reductions.
//! - [`linalg`] — matrix products (gemm).
//! - [`nn`] — activations, softmax, cross-entropy, bias add.
//! - [`image`] — bilinear and nearest-neighbour resizing and their gradients.
//! - [`random`] — seeded random ops (Philox, TensorFlow's generator).
//! - [`state`] — variables.
//! - [`scatter`] — `ResourceGather` and scatter updates of variables.
//! - [`control_flow`] — Switch/Merge/Enter/Exit/NextIteration/LoopCond.
//! - [`data_flow`] — queues, stacks and TensorArrays.
//! - [`function`] — `_Arg`/`_Retval`.
//! - [`sendrecv`] — `_Send`/`_Recv`.
//! - [`no_op`] — `NoOp`.
//! - [`summary`] — TensorBoard summaries.
//! - [`logging`] — `Assert`.
//! - [`training`] — optimizer updates (`ApplyAdam`, …).
//! - [`checkpoint`] — `SaveV2`/`RestoreV2`/`MergeV2Checkpoints`/`ShardedFilename` and
//!   TensorFlow's checkpoint format (the tensor bundle).
//! - [`strings`] — `StringJoin`, `StaticRegexFullMatch`, `StringToHashBucket*`.
//! - [`hash`] — FarmHash `Fingerprint64` and SipHash-2-4, as TensorFlow hashes strings.
//! - [`lookup`] — hash tables as resources (`HashTableV2`, `LookupTableFindV2`, …).
//! - [`sparse`] — sparse tensors: `SparseTensorDenseMatMul`, `SparseToDense`, …
//!
//! [`dispatch`]: crate::dispatch_numeric

pub mod array;
pub mod broadcast;
pub mod checkpoint;
pub mod control_flow;
pub mod data_flow;
pub mod function;
pub mod hash;
pub mod image;
pub mod io;
pub mod linalg;
pub mod logging;
pub mod lookup;
pub mod math;
pub mod nn;
pub mod no_op;
pub mod parsing;
pub mod random;
pub mod reduction;
pub mod scatter;
pub mod sendrecv;
pub mod sparse;
pub mod state;
pub mod strings;
pub mod summary;
pub mod training;
pub mod types;

use crate::registry::KernelRegistry;

/// Registers every CPU kernel.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    array::register_all_kernels(r);
    checkpoint::register_all_kernels(r);
    control_flow::register_all_kernels(r);
    data_flow::register_all_kernels(r);
    function::register_all_kernels(r);
    image::register_all_kernels(r);
    io::register_all_kernels(r);
    linalg::register_all_kernels(r);
    logging::register_all_kernels(r);
    lookup::register_all_kernels(r);
    math::register_all_kernels(r);
    nn::register_all_kernels(r);
    no_op::register_all_kernels(r);
    parsing::register_all_kernels(r);
    random::register_all_kernels(r);
    reduction::register_all_kernels(r);
    scatter::register_all_kernels(r);
    sendrecv::register_all_kernels(r);
    sparse::register_all_kernels(r);
    state::register_all_kernels(r);
    strings::register_all_kernels(r);
    summary::register_all_kernels(r);
    training::register_all_kernels(r);
}
