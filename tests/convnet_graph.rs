//! A TensorFlow 2.21 `tf.compat.v1` convnet runs in actorflow with TensorFlow's
//! answers: `Conv2D` (SAME) → `BiasAdd` → `Relu` → `Conv2D` (stride 2, VALID) →
//! mean of squares, and `tf.gradients` of that loss with respect to the input and
//! every weight (`Conv2DBackpropInput`, `Conv2DBackpropFilter`, `BiasAddGrad`,
//! `ReluGrad`, as TensorFlow's Python built them).
//!
//! `kernels/tests/fixtures/gen_conv.py` wrote the graph (`convnet_graph.pb`), the
//! feed, the fetches and TensorFlow's outputs (`convnet_graph.json`).

use std::path::PathBuf;

use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::{Session, SessionOptions, Tensor};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures")
}

/// A float32 fixture tensor.
fn tensor(v: &Value) -> Tensor {
    assert_eq!(v["dtype"], "float32");
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    let vals: Vec<f32> = v["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|x| x.as_f64().expect("float") as f32)
        .collect();
    Tensor::new(&shape, vals).expect("fixture tensor")
}

#[test]
fn tensorflow_convnet_and_its_gradients_run_with_tensorflows_answers() {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("convnet_graph.json")).expect("json"),
    )
    .expect("fixture JSON");
    let graph = load_graph_def(
        &fixtures().join("convnet_graph.pb"),
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
            g.to_f64_vec().expect("float"),
            w.to_f64_vec().expect("float"),
        );
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                "{name}[{i}]: {a}, TensorFlow {b}"
            );
        }
    }
    let _ = sess.close();
}
