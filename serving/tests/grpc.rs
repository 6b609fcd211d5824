//! The gRPC API end to end: a [`ModelServer`] on 127.0.0.1 over SavedModels
//! copied into temporary base paths (TensorFlow 2.21's fixtures under
//! tests/fixtures/saved_model, and a classify/regress model written here),
//! called through the generated tonic clients. Predict answers as a local
//! session over the same SavedModel does; metadata, status, version and label
//! selection, classify, regress, multi-inference, config reloads and every
//! error answer as TensorFlow Serving's gRPC server does (codes and messages);
//! and the server keeps serving after each bad request.
//!
//! Warmup is off in these servers: they test the API, not the warmup.

mod common;

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use actorflow_serving::{ModelConfig, VersionPolicy};
use actors::saved_model::{
    SavedModel, CLASSIFY_METHOD_NAME, PREDICT_METHOD_NAME, REGRESS_METHOD_NAME,
};
use graph::import::{tensor_from_proto, tensor_to_proto};
use graph::Tensor;
use prost::Message;
use proto::tensorflow::serving as pb;
use proto::tensorflow::TensorProto;
use tonic::transport::Channel;

use common::{
    base_path, fixture, grpc_options, start, with_clients, write_classify_regress_model,
    LOAD_TIMEOUT,
};
use pb::model_spec::VersionChoice;
use pb::prediction_service_client::PredictionServiceClient;

fn spec(name: &str, version: Option<VersionChoice>, signature: &str) -> Option<pb::ModelSpec> {
    Some(pb::ModelSpec {
        name: name.into(),
        version_choice: version,
        signature_name: signature.into(),
    })
}

fn predict_request(
    spec: Option<pb::ModelSpec>,
    inputs: &[(&str, TensorProto)],
    filter: &[&str],
) -> pb::PredictRequest {
    pb::PredictRequest {
        model_spec: spec,
        inputs: inputs
            .iter()
            .map(|(k, t)| ((*k).to_owned(), t.clone()))
            .collect(),
        output_filter: filter.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// tf1_builder's and tf2_module's input (expected.json's).
fn x() -> Tensor {
    Tensor::new(&[2, 3], vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 2.0]).unwrap()
}

/// tf2_keras's input.
fn features() -> Tensor {
    Tensor::new(&[2, 4], vec![0.5f32, -1.0, 2.0, 0.25, 1.5, 0.0, -0.5, 1.0]).unwrap()
}

fn outputs(r: &pb::PredictResponse) -> Vec<(String, Tensor)> {
    r.outputs
        .iter()
        .map(|(k, p)| (k.clone(), tensor_from_proto(p).unwrap()))
        .collect()
}

fn local(model: &Path, signature: &str, inputs: &[(&str, Tensor)]) -> Vec<(String, Tensor)> {
    SavedModel::load(model, &["serve"])
        .unwrap()
        .run(signature, inputs)
        .unwrap()
        .into_iter()
        .collect()
}

/// Checks an error's code and that its message contains `message`.
#[track_caller]
fn assert_status<T: std::fmt::Debug>(
    r: Result<tonic::Response<T>, tonic::Status>,
    code: tonic::Code,
    message: &str,
) {
    let e = r.unwrap_err();
    assert_eq!(e.code(), code, "{e:?}");
    assert!(e.message().contains(message), "{e:?} lacks {message:?}");
}

fn served_spec(name: &str, version: i64, signature: &str) -> Option<pb::ModelSpec> {
    spec(name, Some(VersionChoice::Version(version)), signature)
}

#[test]
fn predict_answers_as_the_local_session_and_filters_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1]);
    let mut server = start(grpc_options(vec![ModelConfig::new("m", &base)]));
    let want = local(&fixture("tf1_builder"), "serving_default", &[("x", x())]);
    let want_state = local(&fixture("tf1_builder"), "state", &[]);
    with_clients(&server, |(mut p, _)| async move {
        let xp = tensor_to_proto(&x());
        let r = p
            .predict(predict_request(
                spec("m", None, ""),
                &[("x", xp.clone())],
                &[],
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(outputs(&r), want);
        assert_eq!(r.model_spec, served_spec("m", 1, "serving_default"));

        // One output, by filter, with the signature named.
        let r = p
            .predict(predict_request(
                spec("m", Some(VersionChoice::Version(1)), "serving_default"),
                &[("x", xp.clone())],
                &["y"],
            ))
            .await
            .unwrap()
            .into_inner();
        let y: Vec<_> = want.iter().filter(|(k, _)| k == "y").cloned().collect();
        assert_eq!(outputs(&r), y);

        // A signature without inputs; the asset path is this copy's.
        let r = p
            .predict(predict_request(spec("m", None, "state"), &[], &[]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.model_spec, served_spec("m", 1, "state"));
        let got = outputs(&r);
        for key in ["counter", "label"] {
            let g = got.iter().find(|(k, _)| k == key).unwrap();
            let w = want_state.iter().find(|(k, _)| k == key).unwrap();
            assert_eq!(g, w);
        }
        let vocab = &got.iter().find(|(k, _)| k == "vocab").unwrap().1;
        assert_eq!(
            &vocab.as_strings().unwrap()[0][..],
            base.join("1/assets/vocab.txt").to_string_lossy().as_bytes()
        );

        assert_status(
            p.predict(predict_request(spec("m", None, ""), &[("x", xp.clone())], &["zz"]))
                .await,
            tonic::Code::InvalidArgument,
            "output tensor alias not found in signature: zz Outputs expected to be in the set {total,y}.",
        );
        assert_status(
            p.predict(predict_request(
                spec("m", None, ""),
                &[("x", xp.clone())],
                &["y", "y"],
            ))
            .await,
            tonic::Code::InvalidArgument,
            "duplicate output tensor alias: y",
        );
    });
    server.stop();
}

#[test]
fn metadata_and_status_answer_as_tensorflow_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1]);
    let mut server = start(grpc_options(vec![ModelConfig::new("m", &base)]));
    let model = SavedModel::load(fixture("tf1_builder"), &["serve"]).unwrap();
    let signature_defs = model.meta_graph().signature_def.clone();
    with_clients(&server, |(mut p, mut m)| async move {
        let request = |spec: Option<pb::ModelSpec>, fields: &[&str]| pb::GetModelMetadataRequest {
            model_spec: spec,
            metadata_field: fields.iter().map(|s| (*s).to_owned()).collect(),
        };
        let r = p
            .get_model_metadata(request(spec("m", None, ""), &["signature_def"]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.model_spec, served_spec("m", 1, ""));
        assert_eq!(r.metadata.len(), 1);
        let any = &r.metadata["signature_def"];
        assert_eq!(
            any.type_url,
            "type.googleapis.com/tensorflow.serving.SignatureDefMap"
        );
        let map = pb::SignatureDefMap::decode(any.value.as_slice()).unwrap();
        assert_eq!(map.signature_def, signature_defs);
        assert!(map.signature_def.contains_key("serving_default"));
        assert!(map.signature_def.contains_key("state"));

        for (req, code, message) in [
            (
                request(spec("m", None, ""), &[]),
                tonic::Code::InvalidArgument,
                "GetModelMetadataRequest must specify at least one metadata_field",
            ),
            (
                request(spec("m", None, ""), &["signature_def", "tags"]),
                tonic::Code::InvalidArgument,
                "Metadata field tags is not supported",
            ),
            (
                request(None, &["signature_def"]),
                tonic::Code::InvalidArgument,
                "Missing ModelSpec",
            ),
            (
                request(spec("nope", None, ""), &["signature_def"]),
                tonic::Code::NotFound,
                "Servable not found for request: Latest(nope)",
            ),
        ] {
            assert_status(p.get_model_metadata(req).await, code, message);
        }

        let status = |spec: Option<pb::ModelSpec>| pb::GetModelStatusRequest { model_spec: spec };
        let available = pb::GetModelStatusResponse {
            model_version_status: vec![pb::ModelVersionStatus {
                version: 1,
                state: pb::model_version_status::State::Available as i32,
                status: Some(pb::StatusProto::default()),
            }],
        };
        let r = m
            .get_model_status(status(spec("m", None, "")))
            .await
            .unwrap();
        assert_eq!(r.into_inner(), available);
        let r = m
            .get_model_status(status(spec("m", Some(VersionChoice::Version(1)), "")))
            .await
            .unwrap();
        assert_eq!(r.into_inner(), available);
        assert_status(
            m.get_model_status(status(spec("m", Some(VersionChoice::Version(9)), "")))
                .await,
            tonic::Code::NotFound,
            "Could not find version 9 of model m",
        );
        assert_status(
            m.get_model_status(status(spec("nope", None, ""))).await,
            tonic::Code::NotFound,
            "Could not find any versions of model nope",
        );
        assert_status(
            m.get_model_status(status(None)).await,
            tonic::Code::InvalidArgument,
            "Missing ModelSpec",
        );
    });
    server.stop();
}

#[test]
fn bad_requests_get_tensorflow_serving_codes_and_the_server_keeps_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1]);
    let mut server = start(grpc_options(vec![ModelConfig::new("m", &base)]));
    let want = local(&fixture("tf1_builder"), "serving_default", &[("x", x())]);
    with_clients(&server, |(mut p, _)| async move {
        let xp = tensor_to_proto(&x());
        let raw = |dtype: i32, dims: &[i64], content: &[u8]| TensorProto {
            dtype,
            tensor_shape: Some(proto::tensorflow::TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|&size| proto::tensorflow::tensor_shape_proto::Dim {
                        size,
                        name: String::new(),
                    })
                    .collect(),
                unknown_rank: false,
            }),
            tensor_content: content.to_vec().into(),
            ..Default::default()
        };
        let dt_float = 1;
        let mut huge = raw(dt_float, &[1 << 40, 3], &[]);
        huge.float_val = vec![1.0];
        let cases: Vec<(pb::PredictRequest, tonic::Code, &str)> = vec![
            (
                predict_request(None, &[("x", xp.clone())], &[]),
                tonic::Code::InvalidArgument,
                "Missing ModelSpec",
            ),
            (
                predict_request(spec("", None, ""), &[("x", xp.clone())], &[]),
                tonic::Code::InvalidArgument,
                "ModelSpec has no name specified.",
            ),
            (
                predict_request(spec("nope", None, ""), &[("x", xp.clone())], &[]),
                tonic::Code::NotFound,
                "Servable not found for request: Latest(nope)",
            ),
            (
                predict_request(
                    spec("m", Some(VersionChoice::Version(9)), ""),
                    &[("x", xp.clone())],
                    &[],
                ),
                tonic::Code::NotFound,
                "Servable not found for request: Specific(m, 9)",
            ),
            (
                predict_request(
                    spec("m", Some(VersionChoice::VersionLabel("gold".into())), ""),
                    &[("x", xp.clone())],
                    &[],
                ),
                tonic::Code::InvalidArgument,
                "Unrecognized servable version label: gold",
            ),
            (
                predict_request(spec("m", None, "nope"), &[("x", xp.clone())], &[]),
                tonic::Code::FailedPrecondition,
                "Serving signature key \"nope\" not found.",
            ),
            (
                predict_request(spec("m", None, ""), &[("q", xp.clone())], &[]),
                tonic::Code::InvalidArgument,
                "q",
            ),
            (
                predict_request(spec("m", None, ""), &[], &[]),
                tonic::Code::InvalidArgument,
                "missing",
            ),
            (
                predict_request(
                    spec("m", None, ""),
                    &[(
                        "x",
                        tensor_to_proto(&Tensor::new(&[1, 3], vec![1i32, 2, 3]).unwrap()),
                    )],
                    &[],
                ),
                tonic::Code::InvalidArgument,
                "int32",
            ),
            (
                predict_request(
                    spec("m", None, ""),
                    &[("x", tensor_to_proto(&Tensor::vector(&[1.0f32, 2.0])))],
                    &[],
                ),
                tonic::Code::InvalidArgument,
                "shape",
            ),
            (
                predict_request(
                    spec("m", None, ""),
                    &[("x", raw(dt_float, &[1, 3], &[0; 5]))],
                    &[],
                ),
                tonic::Code::InvalidArgument,
                "tensor parsing error: x",
            ),
            (
                predict_request(spec("m", None, ""), &[("x", raw(0, &[1, 3], &[]))], &[]),
                tonic::Code::InvalidArgument,
                "tensor parsing error: x",
            ),
            (
                predict_request(
                    spec("m", None, ""),
                    &[("x", raw(dt_float, &[-5, 3], &[]))],
                    &[],
                ),
                tonic::Code::InvalidArgument,
                "tensor parsing error: x",
            ),
            (
                predict_request(spec("m", None, ""), &[("x", huge)], &[]),
                tonic::Code::InvalidArgument,
                "tensor parsing error: x",
            ),
        ];
        for (request, code, message) in cases {
            assert_status(p.predict(request).await, code, message);
            // Still serving, on the same connection.
            let r = p
                .predict(predict_request(
                    spec("m", None, ""),
                    &[("x", xp.clone())],
                    &[],
                ))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(outputs(&r), want);
        }
    });
    let metrics = server.metrics().encode();
    for line in [
        "request_count_total{model_name=\"m\",API=\"predict\",entrypoint=\"GRPC\",status=\"OK\"} 14",
        "request_count_total{model_name=\"\",API=\"predict\",entrypoint=\"GRPC\",status=\"NOT_FOUND\"} 2",
        "request_count_total{model_name=\"m\",API=\"predict\",entrypoint=\"GRPC\",status=\"FAILED_PRECONDITION\"} 1",
        "request_count_total{model_name=\"m\",API=\"predict\",entrypoint=\"GRPC\",status=\"INVALID_ARGUMENT\"} 8",
        "request_count_total{model_name=\"\",API=\"predict\",entrypoint=\"GRPC\",status=\"INVALID_ARGUMENT\"} 3",
    ] {
        assert!(metrics.contains(line), "no {line} in {metrics}");
    }
    server.stop();
}

#[test]
fn messages_over_the_limit_are_resource_exhausted() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1]);
    let mut o = grpc_options(vec![ModelConfig::new("m", &base)]);
    o.grpc_max_message_bytes = 4096;
    let mut server = start(o);
    with_clients(&server, |(mut p, _)| async move {
        // 12 kB of tensor_content.
        let big = Tensor::new(&[1000, 3], vec![0.5f32; 3000]).unwrap();
        let mut big = tensor_to_proto(&big);
        big.float_val.clear();
        big.tensor_content = vec![0u8; 12_000].into();
        assert_status(
            p.predict(predict_request(spec("m", None, ""), &[("x", big)], &[]))
                .await,
            tonic::Code::ResourceExhausted,
            "message length too large",
        );
        // A few bytes asking for one value in 3000 places: a small request whose
        // 8 kB answer is over the limit.
        let mut splat = tensor_to_proto(&Tensor::new(&[1000, 3], vec![0.5f32; 3000]).unwrap());
        assert_eq!(splat.float_val.len(), 1);
        splat.tensor_content = Default::default();
        assert_status(
            p.predict(predict_request(
                spec("m", None, ""),
                &[("x", splat)],
                &["y"],
            ))
            .await,
            tonic::Code::ResourceExhausted,
            "larger than the gRPC message limit (4096 bytes)",
        );
        let r = p
            .predict(predict_request(
                spec("m", None, ""),
                &[("x", tensor_to_proto(&x()))],
                &[],
            ))
            .await
            .unwrap();
        assert_eq!(r.into_inner().outputs.len(), 2);
    });
    server.stop();
}

#[test]
fn versions_and_labels_select_the_servable() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1, 2]);
    let config = ModelConfig::new("m", &base)
        .with_policy(VersionPolicy::All)
        .with_label("stable", 1)
        .with_label("canary", 2);
    let mut server = start(grpc_options(vec![config]));
    server
        .models()
        .wait_for(LOAD_TIMEOUT, |m| m.available_versions("m").len() == 2)
        .unwrap();
    with_clients(&server, |(mut p, mut m)| async move {
        let xp = tensor_to_proto(&x());
        for (choice, version) in [
            (None, 2),
            (Some(VersionChoice::Version(1)), 1),
            (Some(VersionChoice::Version(2)), 2),
            (Some(VersionChoice::VersionLabel("stable".into())), 1),
            (Some(VersionChoice::VersionLabel("canary".into())), 2),
        ] {
            let r = p
                .predict(predict_request(
                    spec("m", choice.clone(), ""),
                    &[("x", xp.clone())],
                    &["y"],
                ))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(
                r.model_spec,
                served_spec("m", version, "serving_default"),
                "{choice:?}"
            );
            let r = p
                .get_model_metadata(pb::GetModelMetadataRequest {
                    model_spec: spec("m", choice.clone(), ""),
                    metadata_field: vec!["signature_def".into()],
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(r.model_spec, served_spec("m", version, ""), "{choice:?}");
        }
        let versions = |r: pb::GetModelStatusResponse| -> Vec<(i64, i32)> {
            r.model_version_status
                .iter()
                .map(|s| (s.version, s.state))
                .collect()
        };
        // As in TensorFlow Serving, the status ignores a label.
        let r = m
            .get_model_status(pb::GetModelStatusRequest {
                model_spec: spec("m", Some(VersionChoice::VersionLabel("stable".into())), ""),
            })
            .await
            .unwrap();
        assert_eq!(versions(r.into_inner()), vec![(1, 30), (2, 30)]);
        let r = m
            .get_model_status(pb::GetModelStatusRequest {
                model_spec: spec("m", Some(VersionChoice::Version(2)), ""),
            })
            .await
            .unwrap();
        assert_eq!(versions(r.into_inner()), vec![(2, 30)]);
    });
    server.stop();
}

#[test]
fn classify_regress_and_multi_inference() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("c");
    write_classify_regress_model(&base.join("1"));
    let mut server = start(grpc_options(vec![ModelConfig::new("c", &base)]));
    with_clients(&server, |(mut p, _)| async move {
        let examples = |n: usize| {
            Some(pb::Input {
                kind: Some(pb::input::Kind::ExampleList(pb::ExampleList {
                    examples: vec![proto::tensorflow::Example::default(); n],
                })),
            })
        };
        let class = |label: &str, score: f32| pb::Class {
            label: label.into(),
            score,
        };
        let classified = pb::ClassificationResult {
            classifications: vec![
                pb::Classifications {
                    classes: vec![class("no", 0.25), class("yes", 0.75)],
                };
                3
            ],
        };
        let regressed = pb::RegressionResult {
            regressions: vec![pb::Regression { value: 1.5 }; 3],
        };
        let r = p
            .classify(pb::ClassificationRequest {
                model_spec: spec("c", None, "classify"),
                input: examples(3),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.model_spec, served_spec("c", 1, "classify"));
        assert_eq!(r.result.as_ref(), Some(&classified));
        let r = p
            .regress(pb::RegressionRequest {
                model_spec: spec("c", Some(VersionChoice::Version(1)), "regress"),
                input: examples(3),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.model_spec, served_spec("c", 1, "regress"));
        assert_eq!(r.result.as_ref(), Some(&regressed));

        let task = |name: &str, signature: &str, method: &str| pb::InferenceTask {
            model_spec: spec(name, None, signature),
            method_name: method.into(),
        };
        let r = p
            .multi_inference(pb::MultiInferenceRequest {
                tasks: vec![
                    task("c", "classify", CLASSIFY_METHOD_NAME),
                    task("c", "regress", REGRESS_METHOD_NAME),
                ],
                input: examples(3),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            r.results,
            vec![
                pb::InferenceResult {
                    model_spec: served_spec("c", 1, "classify"),
                    result: Some(pb::inference_result::Result::ClassificationResult(
                        classified.clone()
                    )),
                },
                pb::InferenceResult {
                    model_spec: served_spec("c", 1, "regress"),
                    result: Some(pb::inference_result::Result::RegressionResult(
                        regressed.clone()
                    )),
                },
            ]
        );

        assert_status(
            p.classify(pb::ClassificationRequest {
                model_spec: spec("c", None, "regress"),
                input: examples(1),
            })
            .await,
            tonic::Code::InvalidArgument,
            "Expected classification signature method_name to be tensorflow/serving/classify",
        );
        assert_status(
            p.regress(pb::RegressionRequest {
                model_spec: spec("c", None, "regress"),
                input: None,
            })
            .await,
            tonic::Code::InvalidArgument,
            "Input is empty.",
        );
        assert_status(
            p.classify(pb::ClassificationRequest {
                model_spec: spec("nope", None, "classify"),
                input: examples(1),
            })
            .await,
            tonic::Code::NotFound,
            "Latest(nope)",
        );
        let multi = |tasks: Vec<pb::InferenceTask>| pb::MultiInferenceRequest {
            tasks,
            input: examples(2),
        };
        for (request, code, message) in [
            (
                multi(vec![]),
                tonic::Code::InvalidArgument,
                "ModelSpec has no name specified.",
            ),
            (
                multi(vec![
                    task("c", "classify", CLASSIFY_METHOD_NAME),
                    task("c", "classify", CLASSIFY_METHOD_NAME),
                ]),
                tonic::Code::InvalidArgument,
                "Duplicate evaluation of signature: classify",
            ),
            (
                multi(vec![
                    task("c", "classify", CLASSIFY_METHOD_NAME),
                    task("d", "regress", REGRESS_METHOD_NAME),
                ]),
                tonic::Code::InvalidArgument,
                "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
            ),
            (
                multi(vec![
                    task("c", "classify", CLASSIFY_METHOD_NAME),
                    task("", "regress", REGRESS_METHOD_NAME),
                ]),
                tonic::Code::InvalidArgument,
                "Found ModelSpec with an empty model name.",
            ),
            (
                multi(vec![task("c", "zz", CLASSIFY_METHOD_NAME)]),
                tonic::Code::InvalidArgument,
                "Requested signature not found in model graph: zz",
            ),
            (
                multi(vec![task("c", "", PREDICT_METHOD_NAME)]),
                tonic::Code::Unimplemented,
                "Unsupported signature method_name: tensorflow/serving/predict",
            ),
        ] {
            assert_status(p.multi_inference(request).await, code, message);
        }
        // Still serving.
        let r = p
            .classify(pb::ClassificationRequest {
                model_spec: spec("c", None, "classify"),
                input: examples(3),
            })
            .await
            .unwrap();
        assert_eq!(r.into_inner().result, Some(classified));
    });
    server.stop();
}

/// Polls `check` every 20 ms until it holds; panics after [`LOAD_TIMEOUT`].
async fn eventually<Fut: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> Fut) {
    let deadline = Instant::now() + LOAD_TIMEOUT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn reload_config_adds_a_model_and_removes_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1]);
    let keras = base_path(tmp.path(), "k", "tf2_keras", &[1]);
    let mut server = start(grpc_options(vec![ModelConfig::new("m", &base)]));
    let want = local(
        &fixture("tf2_keras"),
        "serving_default",
        &[("features", features())],
    );
    with_clients(&server, |(mut p, mut m)| async move {
        let config_list = |configs: Vec<pb::ModelConfig>| pb::ModelServerConfig {
            config: Some(pb::model_server_config::Config::ModelConfigList(
                pb::ModelConfigList { config: configs },
            )),
        };
        let model_config = |name: &str, base: &Path| pb::ModelConfig {
            name: name.into(),
            base_path: base.to_string_lossy().into_owned(),
            model_platform: "tensorflow".into(),
            ..Default::default()
        };
        let r = m
            .handle_reload_config_request(pb::ReloadConfigRequest {
                config: Some(config_list(vec![model_config("k", &keras)])),
                metric_names: vec![":tensorflow:serving:model_load_events".into()],
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status, Some(pb::StatusProto::default()));
        assert_eq!(
            r.metric,
            vec![pb::Metric {
                name: ":tensorflow:serving:model_load_events".into(),
                value_increase: Some(pb::metric::ValueIncrease::Int64ValueIncrease(0)),
            }]
        );
        let status = |name: &str| pb::GetModelStatusRequest {
            model_spec: spec(name, None, ""),
        };
        eventually("k is available", || {
            let mut m = m.clone();
            let req = status("k");
            async move {
                m.get_model_status(req).await.is_ok_and(|r| {
                    r.into_inner()
                        .model_version_status
                        .iter()
                        .any(|s| s.state == 30)
                })
            }
        })
        .await;
        let r = p
            .predict(predict_request(
                spec("k", None, ""),
                &[("features", tensor_to_proto(&features()))],
                &[],
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(outputs(&r), want);
        // m unloads: its versions end, then the model is forgotten.
        eventually("m is unloaded", || {
            let mut m = m.clone();
            let req = status("m");
            async move {
                match m.get_model_status(req).await {
                    Err(e) => e.code() == tonic::Code::NotFound,
                    Ok(r) => r
                        .into_inner()
                        .model_version_status
                        .iter()
                        .all(|s| s.state == 50),
                }
            }
        })
        .await;
        assert_status(
            p.predict(predict_request(
                spec("m", None, ""),
                &[("x", tensor_to_proto(&x()))],
                &[],
            ))
            .await,
            tonic::Code::NotFound,
            "Servable not found for request: Latest(m)",
        );

        let reload = |config: Option<pb::ModelServerConfig>| pb::ReloadConfigRequest {
            config,
            metric_names: vec![],
        };
        for (request, code, message) in [
            (
                reload(None),
                tonic::Code::InvalidArgument,
                "ServerModelConfig type not supported by HandleReloadConfigRequest. Only ModelConfigList is currently supported",
            ),
            (
                reload(Some(pb::ModelServerConfig {
                    config: Some(pb::model_server_config::Config::CustomModelConfig(
                        Default::default(),
                    )),
                })),
                tonic::Code::InvalidArgument,
                "Only ModelConfigList is currently supported",
            ),
            (
                reload(Some(config_list(vec![
                    model_config("k", &keras),
                    model_config("k", &base),
                ]))),
                tonic::Code::InvalidArgument,
                "configured twice",
            ),
            (
                reload(Some(config_list(vec![pb::ModelConfig {
                    name: "k".into(),
                    ..Default::default()
                }]))),
                tonic::Code::InvalidArgument,
                "has no base_path",
            ),
        ] {
            assert_status(m.handle_reload_config_request(request).await, code, message);
        }
        // The failed reloads changed nothing.
        let r = p
            .predict(predict_request(
                spec("k", None, ""),
                &[("features", tensor_to_proto(&features()))],
                &[],
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(outputs(&r), want);
    });
    server.stop();
}

#[test]
fn stopping_with_a_client_connected_is_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_path(tmp.path(), "m", "tf1_builder", &[1]);
    let mut server = start(grpc_options(vec![ModelConfig::new("m", &base)]));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = server.grpc_addr();
    let mut p = rt.block_on(async {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut p = PredictionServiceClient::new(channel);
        p.predict(predict_request(
            spec("m", None, ""),
            &[("x", tensor_to_proto(&x()))],
            &[],
        ))
        .await
        .unwrap();
        p
    });
    // The connection stays open, idle (its runtime answers the server's
    // GOAWAY and PING), while the server stops.
    let t = Instant::now();
    server.stop();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "stop took {:?}",
        t.elapsed()
    );
    let after = rt.block_on(p.predict(predict_request(
        spec("m", None, ""),
        &[("x", tensor_to_proto(&x()))],
        &[],
    )));
    assert_eq!(after.unwrap_err().code(), tonic::Code::Unavailable);
}
