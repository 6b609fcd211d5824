//! Runs the resize kernels (bilinear, nearest neighbour and their gradients) and
//! the space/batch/depth kernels against TensorFlow's outputs and error codes
//! (`fixtures/resize_space.json`, written by `fixtures/gen_resize_space.py`).

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;

#[test]
fn fixtures() {
    common::run_fixture_file("tests/fixtures/resize_space.json");
}
