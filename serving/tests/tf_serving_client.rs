//! TensorFlow Serving's own Python client (tensorflow-serving-api 2.21's gRPC
//! stubs, tests/tf_interop/serving_client.py) against actorflow's model
//! server: Predict answers equal a local session's over the same SavedModel,
//! and GetModelMetadata, GetModelStatus and the errors read as the client
//! expects them from TensorFlow Serving.
//!
//! Needs the Python in `ACTORFLOW_TF_PYTHON` (TensorFlow 2.21 with
//! tensorflow-serving-api; `.ci/tf-python` provides one). Without it the test
//! prints `SKIPPED:` and passes; with it, the client must work.

mod common;

use std::path::Path;
use std::process::Command;

use actorflow_serving::ModelConfig;
use actors::saved_model::SavedModel;
use graph::Tensor;
use serde_json::{json, Value};

use common::{base_path, fixture, grpc_options, start};

fn python() -> Option<String> {
    match std::env::var("ACTORFLOW_TF_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            eprintln!(
                "==========================================================================\n\
                 SKIPPED: ACTORFLOW_TF_PYTHON unset: TensorFlow Serving's Python client \
                 (serving/tests/tf_serving_client.rs) did not run\n\
                 =========================================================================="
            );
            None
        }
    }
}

fn sorted<'a>(keys: impl Iterator<Item = &'a String>) -> Vec<&'a str> {
    let mut v: Vec<&str> = keys.map(String::as_str).collect();
    v.sort_unstable();
    v
}

/// A tensor's values as f32s.
fn floats(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

/// A JSON nested list's numbers, flattened.
fn json_floats(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(items) => items.iter().flat_map(json_floats).collect(),
        n => vec![n.as_f64().expect("a number") as f32],
    }
}

#[test]
fn tensorflow_serving_python_client() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1]);
    let mut server = start(grpc_options(vec![ModelConfig::new("m", &base)]));

    let x = [[1.0f32, 2.0, 3.0], [-1.0, 0.5, 2.0]];
    let model = SavedModel::load(fixture("tf1_builder"), &["serve"]).unwrap();
    let xt = Tensor::new(&[2, 3], x.concat()).unwrap();
    let want = model.run("serving_default", &[("x", xt)]).unwrap();

    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tf_interop/serving_client.py");
    let out = Command::new("timeout")
        .arg("300")
        .arg(&py)
        .arg(&script)
        .arg(server.grpc_addr().to_string())
        .arg("m")
        .arg(json!({ "x": x }).to_string())
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .output()
        .expect("the Python client runs");
    server.stop();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_str(stdout.trim()).expect("the client prints JSON");

    let spec = json!({"name": "m", "version": 1, "signature_name": "serving_default"});
    for key in ["predict", "predict_after_errors"] {
        let p = &got[key];
        assert_eq!(p["model_spec"], spec, "{key}");
        let outputs = p["outputs"].as_object().unwrap();
        assert_eq!(sorted(outputs.keys()), sorted(want.keys()), "{key}");
        for (k, t) in &want {
            let o = &outputs[k];
            assert_eq!(o["dtype"], "float32", "{key} {k}");
            let dims: Vec<usize> = t.dims().to_vec();
            assert_eq!(o["shape"], json!(dims), "{key} {k}");
            assert_eq!(json_floats(&o["values"]), floats(t), "{key} {k}");
        }
    }
    let filtered = got["predict_filtered"]["outputs"].as_object().unwrap();
    assert_eq!(sorted(filtered.keys()), vec!["total"]);

    let meta = &got["metadata"];
    assert_eq!(
        meta["model_spec"],
        json!({"name": "m", "version": 1, "signature_name": ""})
    );
    assert_eq!(
        meta["type_url"],
        "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    );
    let sigs = meta["signatures"].as_object().unwrap();
    let defs = &model.meta_graph().signature_def;
    assert_eq!(sorted(sigs.keys()), sorted(defs.keys()));
    let serving = &sigs["serving_default"];
    assert_eq!(serving["method_name"], "tensorflow/serving/predict");
    assert_eq!(
        serving["inputs"]["x"],
        json!({
            "name": model.signatures()["serving_default"].inputs["x"].name,
            "dtype": "float32",
            "shape": [-1, 3],
        })
    );
    assert_eq!(serving["outputs"]["total"]["shape"], json!([]));

    assert_eq!(
        got["status"],
        json!([{"version": 1, "state": "AVAILABLE", "error_code": 0, "error_message": ""}])
    );
    assert_eq!(
        got["errors"],
        json!({
            "unknown_model": "NOT_FOUND",
            "unknown_input": "INVALID_ARGUMENT",
            "int32_input": "INVALID_ARGUMENT",
            "unknown_signature": "FAILED_PRECONDITION",
            "metadata_field": "INVALID_ARGUMENT",
        })
    );
}
