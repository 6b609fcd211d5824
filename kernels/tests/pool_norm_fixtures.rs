//! Runs the pooling, fused batch norm and LRN kernels against TensorFlow's outputs
//! and error codes (`fixtures/pool_norm.json`, written by
//! `fixtures/gen_pool_norm.py`).

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;

#[test]
fn fixtures() {
    common::run_fixture_file("tests/fixtures/pool_norm.json");
}
