//! A TensorFlow 2.21 `tf.compat.v1` graph of the conv-free pieces of a CNN runs in
//! actorflow with TensorFlow's answers: `MaxPool` -> `FusedBatchNormV3`
//! (training) -> `AvgPool` -> `LRN` -> `FusedBatchNormV3` (inference) -> a sum
//! of squares, and `tf.gradients` of it with respect to the input, the scale and
//! the offset (`MaxPoolGrad`, `FusedBatchNormGradV3` in both modes, `AvgPoolGrad`,
//! `LRNGrad`, as TensorFlow's `nn_grad.py` builds them).
//!
//! `kernels/tests/fixtures/gen_pool_norm.py` wrote the graph
//! (`pool_norm_graph.pb`), the feeds, the fetches and TensorFlow's outputs
//! (`pool_norm_graph.json`).

use std::path::PathBuf;

use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::{Session, SessionOptions, Tensor};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures")
}

/// A float32 fixture tensor.
fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    assert_eq!(v["dtype"], "float32");
    let vals: Vec<f32> = v["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|x| x.as_f64().expect("float") as f32)
        .collect();
    Tensor::new(&shape, vals).expect("fixture tensor")
}

#[test]
fn tensorflow_pooling_and_batch_norm_graph_runs_with_tensorflows_answers() {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("pool_norm_graph.json")).expect("json"),
    )
    .expect("fixture JSON");
    let graph = load_graph_def(
        &fixtures().join("pool_norm_graph.pb"),
        &ImportOptions::default(),
    )
    .expect("import");
    let sess = Session::new(&graph, SessionOptions::default()).expect("session");
    let feeds: Vec<(&str, Tensor)> = doc["feeds"]
        .as_object()
        .expect("feeds")
        .iter()
        .map(|(k, v)| (k.as_str(), tensor(v)))
        .collect();
    let fetches: Vec<&str> = doc["fetches"]
        .as_array()
        .expect("fetches")
        .iter()
        .map(|f| f.as_str().expect("fetch"))
        .collect();
    let got = sess.run(&feeds, &fetches, &[]).expect("run");
    let want: Vec<Tensor> = doc["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .map(tensor)
        .collect();
    assert_eq!(got.len(), want.len());
    for ((name, g), w) in fetches.iter().zip(&got).zip(&want) {
        assert_eq!(g.dims(), w.dims(), "{name}");
        let (g, w) = (
            g.to_f64_vec().expect("floats"),
            w.to_f64_vec().expect("floats"),
        );
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
                "{name}[{i}]: actorflow {a}, TensorFlow {b}"
            );
        }
    }
    let _ = sess.close();
}
