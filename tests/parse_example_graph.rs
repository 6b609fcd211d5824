//! A TensorFlow 2.21 `tf.compat.v1` graph that parses `tf.Example` protos runs in
//! actorflow with TensorFlow's answers: `tf.io.parse_example` (`ParseExampleV2`
//! with FixedLenFeature, VarLenFeature, FixedLenSequenceFeature and
//! RaggedFeature), the V1 `ParseExample` op and `tf.io.parse_single_example`, as a
//! TF1 input pipeline or a TensorFlow Serving classify/regress signature builds
//! them.
//!
//! `kernels/tests/fixtures/gen_parse_example.py` wrote the graph
//! (`parse_example_graph.pb`), the feeds, the fetches and TensorFlow's outputs
//! (`parse_example_graph.json`, string values hex), and the error TensorFlow gives
//! a batch missing a required feature.

use std::path::PathBuf;

use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::{Session, SessionOptions, Tensor};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures")
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A fixture tensor: float32, int32, int64 or (hex) string.
fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    let vals = v["values"].as_array().expect("values");
    match v["dtype"].as_str().expect("dtype") {
        "string" => Tensor::from_strings(
            &shape,
            vals.iter()
                .map(|x| unhex(x.as_str().expect("hex")))
                .collect(),
        ),
        "float32" => Tensor::new(
            &shape,
            vals.iter()
                .map(|x| x.as_f64().expect("float") as f32)
                .collect(),
        ),
        "int32" => Tensor::new(
            &shape,
            vals.iter()
                .map(|x| x.as_i64().expect("int") as i32)
                .collect(),
        ),
        "int64" => Tensor::new(
            &shape,
            vals.iter().map(|x| x.as_i64().expect("int")).collect(),
        ),
        other => panic!("dtype {other}"),
    }
    .expect("fixture tensor")
}

#[test]
fn tensorflow_parse_example_graph_runs_with_tensorflows_answers() {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("parse_example_graph.json")).expect("json"),
    )
    .expect("fixture JSON");
    let graph = load_graph_def(
        &fixtures().join("parse_example_graph.pb"),
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
        assert_eq!(g, w, "{name}");
    }

    // A batch missing the required "score": TensorFlow's InvalidArgument.
    let missing = &doc["missing"];
    let mut feeds = feeds;
    for (name, t) in &mut feeds {
        if *name == "serialized:0" {
            *t = tensor(&missing["serialized:0"]);
        }
    }
    let fetch = missing["fetch"].as_str().expect("fetch");
    let e = sess.run(&feeds, &[fetch], &[]).unwrap_err();
    assert_eq!(e.code(), actorflow::graph::Code::InvalidArgument, "{e}");
    let message = missing["message"].as_str().expect("message");
    assert!(
        message.ends_with("Feature: score (data type: float) is required but could not be found."),
        "{message}"
    );
    assert!(e.message().contains(message), "{e}\nTensorFlow: {message}");
    let _ = sess.close();
}
