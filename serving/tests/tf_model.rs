//! A SavedModel that TensorFlow 2.21 wrote the way Estimator exports did
//! (`fixtures/tf_serving_model/`, made by `fixtures/make_tf_serving_model.py`):
//! tf.Example inputs parsed by `ParseExampleV2`, classify, regress and predict
//! signatures, and TensorFlow Serving's own warmup records. Served over REST and
//! gRPC, its answers must be TensorFlow's (`expected.json`, computed by the
//! script in a TensorFlow session).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use actorflow_serving::{ModelConfig, ModelServer, ServerOptions};
use proto::tensorflow::serving as pb;
use proto::tensorflow::{feature, BytesList, Example, Feature, Features, FloatList, Int64List};
use serde_json::Value;

use common::{http_json, with_clients};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf_serving_model")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn start() -> ModelServer {
    // The fixture directory is the base path (version 1 under it); warmup on,
    // so TensorFlow Serving's warmup records run before the model serves.
    common::start(ServerOptions::local(vec![ModelConfig::new("m", fixture())]))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * (1.0 + b.abs())
}

fn assert_scores(got: &[Vec<f64>], want: &Value, what: &str) {
    let want: Vec<Vec<f64>> = serde_json::from_value(want.clone()).unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.len(), w.len(), "{what}");
        for (a, b) in g.iter().zip(w) {
            assert!(close(*a, *b), "{what}: {got:?} vs {want:?}");
        }
    }
}

/// The case's examples as tf.Example protos (the JSON maps feature names to
/// value lists: floats, integers or strings).
fn examples(case: &Value) -> (Vec<Example>, Option<Example>) {
    fn example(v: &Value) -> Example {
        let mut feature = BTreeMap::new();
        for (k, values) in v.as_object().unwrap() {
            let values = values.as_array().unwrap();
            let kind = match k.as_str() {
                "x" => feature::Kind::FloatList(FloatList {
                    value: values.iter().map(|x| x.as_f64().unwrap() as f32).collect(),
                }),
                "bias" => feature::Kind::Int64List(Int64List {
                    value: values.iter().map(|x| x.as_i64().unwrap()).collect(),
                }),
                _ => feature::Kind::BytesList(BytesList {
                    value: values
                        .iter()
                        .map(|x| x.as_str().unwrap().as_bytes().to_vec())
                        .collect(),
                }),
            };
            feature.insert(k.clone(), Feature { kind: Some(kind) });
        }
        Example {
            features: Some(Features {
                feature: feature.into_iter().collect(),
            }),
        }
    }
    let list = case["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(example)
        .collect();
    let context = (!case["context"].is_null()).then(|| example(&case["context"]));
    (list, context)
}

fn input(case: &Value) -> pb::Input {
    let (examples, context) = examples(case);
    pb::Input {
        kind: Some(match context {
            None => pb::input::Kind::ExampleList(pb::ExampleList { examples }),
            Some(c) => pb::input::Kind::ExampleListWithContext(pb::ExampleListWithContext {
                examples,
                context: Some(c),
            }),
        }),
    }
}

#[test]
fn classify_regress_and_predict_over_rest_give_tensorflows_answers() {
    let server = start();
    let addr = server.rest_addr().unwrap();
    let want = expected();
    for (name, case) in want["cases"].as_object().unwrap() {
        let mut body = serde_json::json!({ "examples": case["examples"] });
        if !case["context"].is_null() {
            body["context"] = case["context"].clone();
        }
        // classify: [[label, score], ...] per example
        let (code, got) = http_json(addr, "POST", "/v1/models/m:classify", &body.to_string());
        assert_eq!(code, 200, "{name}: {got}");
        let results = got["results"].as_array().unwrap();
        let labels: Vec<Vec<String>> = results
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p[0].as_str().unwrap().to_owned())
                    .collect()
            })
            .collect();
        let scores: Vec<Vec<f64>> = results
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p[1].as_f64().unwrap())
                    .collect()
            })
            .collect();
        let want_labels: Vec<Vec<String>> =
            serde_json::from_value(want["classify"][name]["classes"].clone()).unwrap();
        assert_eq!(labels, want_labels, "{name}");
        assert_scores(&scores, &want["classify"][name]["scores"], name);
        // regress
        let mut rbody = body.clone();
        rbody["signature_name"] = "regress".into();
        let (code, got) = http_json(addr, "POST", "/v1/models/m:regress", &rbody.to_string());
        assert_eq!(code, 200, "{name}: {got}");
        let values: Vec<f64> = serde_json::from_value(got["results"].clone()).unwrap();
        let want_values: Vec<f64> = serde_json::from_value(want["regress"][name].clone()).unwrap();
        assert_eq!(values.len(), want_values.len(), "{name}");
        for (a, b) in values.iter().zip(&want_values) {
            assert!(close(*a, *b), "{name}: {values:?} vs {want_values:?}");
        }
    }
    // predict, row format
    let body = serde_json::json!({
        "signature_name": "predict",
        "instances": want["predict"]["x"],
    });
    let (code, got) = http_json(addr, "POST", "/v1/models/m:predict", &body.to_string());
    assert_eq!(code, 200, "{got}");
    let scores: Vec<Vec<f64>> = serde_json::from_value(got["predictions"].clone()).unwrap();
    assert_scores(&scores, &want["predict"]["scores"], "predict");
    // A missing required feature is TensorFlow's InvalidArgument, as HTTP 400.
    let body = r#"{"examples": [{"bias": [1]}]}"#;
    let (code, got) = http_json(addr, "POST", "/v1/models/m:classify", body);
    assert_eq!(code, 400, "{got}");
    assert!(got["error"].as_str().unwrap().contains('x'), "{got}");
    // A classify call on the predict signature is refused by method name.
    let body = r#"{"signature_name": "predict", "examples": [{"x": [1.0, 2.0]}]}"#;
    let (code, got) = http_json(addr, "POST", "/v1/models/m:classify", body);
    assert_eq!(code, 400, "{got}");
    // metadata lists the four signatures with their methods
    let (code, got) = http_json(addr, "GET", "/v1/models/m/metadata", "");
    assert_eq!(code, 200, "{got}");
    let sigs = &got["metadata"]["signature_def"]["signature_def"];
    for (k, method) in [
        ("serving_default", "tensorflow/serving/classify"),
        ("scores_only", "tensorflow/serving/classify"),
        ("regress", "tensorflow/serving/regress"),
        ("predict", "tensorflow/serving/predict"),
    ] {
        assert_eq!(sigs[k]["method_name"], method, "{got}");
    }
}

#[test]
fn classify_and_regress_over_grpc_give_tensorflows_answers() {
    let server = start();
    let want = expected();
    with_clients(&server, |(mut p, mut m)| async move {
        for (name, case) in want["cases"].as_object().unwrap() {
            let spec = |sig: &str| {
                Some(pb::ModelSpec {
                    name: "m".into(),
                    signature_name: sig.into(),
                    ..Default::default()
                })
            };
            let r = p
                .classify(pb::ClassificationRequest {
                    model_spec: spec("scores_only"),
                    input: Some(input(case)),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(r.model_spec.as_ref().unwrap().signature_name, "scores_only");
            assert_eq!(
                r.model_spec.as_ref().unwrap().version_choice,
                Some(pb::model_spec::VersionChoice::Version(1))
            );
            let c = r.result.unwrap().classifications;
            let scores: Vec<Vec<f64>> = c
                .iter()
                .map(|cl| cl.classes.iter().map(|k| f64::from(k.score)).collect())
                .collect();
            assert_scores(&scores, &want["classify"][name]["scores"], name);
            assert!(c
                .iter()
                .all(|cl| cl.classes.iter().all(|k| k.label.is_empty())));
            let r = p
                .regress(pb::RegressionRequest {
                    model_spec: spec("regress"),
                    input: Some(input(case)),
                })
                .await
                .unwrap()
                .into_inner();
            let values: Vec<f64> = r
                .result
                .unwrap()
                .regressions
                .iter()
                .map(|x| f64::from(x.value))
                .collect();
            let want_values: Vec<f64> =
                serde_json::from_value(want["regress"][name].clone()).unwrap();
            for (a, b) in values.iter().zip(&want_values) {
                assert!(close(*a, *b), "{name}: {values:?} vs {want_values:?}");
            }
            assert_eq!(values.len(), want_values.len());
        }
        let s = m
            .get_model_status(pb::GetModelStatusRequest {
                model_spec: Some(pb::ModelSpec {
                    name: "m".into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(s.model_version_status.len(), 1);
        assert_eq!(s.model_version_status[0].version, 1);
        assert_eq!(s.model_version_status[0].state, 30);
    });
}
