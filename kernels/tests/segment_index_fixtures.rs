//! Runs kernels and shape functions against TensorFlow 2.21:
//!
//! - `fixtures/segment_index.json` (written by `fixtures/gen_segment_index.py`):
//!   the segment reductions, Unique, TopKV2, InTopKV2, Bincount,
//!   MatrixBandPart, ClipByValue, GatherNd, ScatterNd, the TensorScatter ops,
//!   ReverseSequence and Einsum, with their error codes and messages.
//! - `fixtures/model_ops.json` (written by `fixtures/gen_model_ops.py`):
//!   DynamicPartition, the sparse ops (SparseTensorDenseMatMul, SparseToDense,
//!   SparseReorder, SparseReduceSum(Sparse), SparseTensorDenseAdd),
//!   StringToHashBucketFast/Strong, ComputeAccidentalHits and the argument
//!   errors of Multinomial and the candidate samplers; and hash tables, step by
//!   step on one table (their gradients are checked in the root crate's
//!   `gradients` test, their draws in `random_fixtures`).

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;
#[path = "common/tf_cases.rs"]
mod tf_cases;

use std::path::Path;

use graph::{AttrMap, AttrValue, NodeDef, Tensor};
use kernels::testutil::{run_node_in, test_device, test_step};
use kernels::Entry;
use serde::Deserialize;
use serde_json::Value;

#[test]
fn kernels_give_tensorflows_outputs_and_errors() {
    tf_cases::check_kernels("tests/fixtures/segment_index.json", 600);
}

#[test]
fn shape_functions_give_tensorflows_shapes_and_errors() {
    tf_cases::check_shape_fns("tests/fixtures/segment_index.json", 80);
}

#[test]
fn model_op_kernels_give_tensorflows_outputs_and_errors() {
    tf_cases::check_kernels("tests/fixtures/model_ops.json", 230);
}

#[test]
fn model_op_shape_functions_give_tensorflows_shapes_and_errors() {
    tf_cases::check_shape_fns("tests/fixtures/model_ops.json", 90);
}

#[derive(Deserialize)]
struct Tables {
    tables: Vec<Table>,
}

/// One table and the ops run on it in order.
#[derive(Deserialize)]
struct Table {
    name: String,
    key_dtype: AttrValue,
    value_dtype: AttrValue,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    op: String,
    inputs: Vec<Value>,
    #[serde(default)]
    attrs: AttrMap,
    #[serde(default)]
    outputs: Vec<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[test]
fn hash_tables_follow_tensorflow_step_by_step() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/model_ops.json");
    let file: Tables = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(file.tables.len() >= 20);
    let mut failures = Vec::new();
    for t in &file.tables {
        let device = test_device();
        let step = test_step(&device);
        let table = NodeDef::new("table", "HashTableV2")
            .with_attr("key_dtype", t.key_dtype.clone())
            .with_attr("value_dtype", t.value_dtype.clone())
            .with_attr("shared_name", AttrValue::from(t.name.as_str()));
        let handle = run_node_in(&step, table, vec![]).unwrap().remove(0);
        for (k, s) in t.steps.iter().enumerate() {
            let what = format!("{} step {k} ({})", t.name, s.op);
            let mut node = NodeDef::new(format!("step{k}"), s.op.as_str()).with_input("table");
            let mut inputs = vec![handle.clone()];
            for (i, v) in s.inputs.iter().enumerate() {
                node = node.with_input(format!("in{i}"));
                inputs.push(Entry::Value(common::tensor(v)));
            }
            for (a, v) in &s.attrs {
                node = node.with_attr(a, v.clone());
            }
            match (run_node_in(&step, node, inputs), &s.error) {
                (Ok(out), None) => {
                    let got: Vec<Tensor> = out
                        .into_iter()
                        .map(|e| match e {
                            Entry::Value(t) => t,
                            other => panic!("{what}: output {other:?}"),
                        })
                        .collect();
                    let want: Vec<Tensor> = s.outputs.iter().map(common::tensor).collect();
                    if got != want {
                        failures.push(format!("{what}: got {got:?}, TensorFlow {want:?}"));
                    }
                }
                (Err(e), Some(code)) => {
                    let msg = s.message.as_deref().unwrap_or("");
                    if e.code().name() != code || !e.message().contains(msg) {
                        failures.push(format!("{what}: got {e}, TensorFlow {code}: {msg}"));
                    }
                }
                (Ok(out), Some(code)) => {
                    failures.push(format!("{what}: got {out:?}, TensorFlow {code}"))
                }
                (Err(e), None) => failures.push(format!("{what}: unexpected {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing steps:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
