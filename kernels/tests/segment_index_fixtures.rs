//! Runs the segment and index kernels and shape functions against TensorFlow 2.21
//! (`fixtures/segment_index.json`, written by `fixtures/gen_segment_index.py`):
//! the segment reductions, Unique, TopKV2, InTopKV2, Bincount, MatrixBandPart,
//! ClipByValue, GatherNd, ScatterNd, the TensorScatter ops, ReverseSequence and
//! Einsum, with their error codes and messages.

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;
#[path = "common/tf_cases.rs"]
mod tf_cases;

#[test]
fn kernels_give_tensorflows_outputs_and_errors() {
    tf_cases::check_kernels("tests/fixtures/segment_index.json", 600);
}

#[test]
fn shape_functions_give_tensorflows_shapes_and_errors() {
    tf_cases::check_shape_fns("tests/fixtures/segment_index.json", 80);
}
