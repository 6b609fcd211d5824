//! Runs the convolution kernels and shape functions against TensorFlow 2.21
//! (`fixtures/conv.json`, written by `fixtures/gen_conv.py`):
//!
//! - `cases`: each kernel on its own (as TensorFlow's eager mode runs it, with no
//!   shape function in front), its outputs within the case's tolerance, or
//!   TensorFlow's error code and message;
//! - `shapes`: the static shape a node gets when built on placeholders of partly
//!   known shape (and constant size inputs), or the shape function's message.
//!
//! Both run through `common/tf_cases.rs`, which lists every failing case at once.

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;
#[path = "common/tf_cases.rs"]
mod tf_cases;

#[test]
fn kernels_give_tensorflows_outputs_and_errors() {
    tf_cases::check_kernels("tests/fixtures/conv.json", 200);
}

#[test]
fn shape_functions_give_tensorflows_shapes_and_errors() {
    tf_cases::check_shape_fns("tests/fixtures/conv.json", 40);
}
