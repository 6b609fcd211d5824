//! The model lifecycle end to end: versions appearing under a base path are
//! loaded and swapped in while a client keeps sending requests, a broken
//! version never replaces a good one, labels and specific versions, config
//! reloads, warmup files, and batching merging concurrent requests into fewer
//! session runs. The models are SavedModels actorflow writes: `y = x · w` with
//! `w = scale · I`, so an answer tells which version gave it.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actorflow_serving::manager::{VersionRequest, VersionState};
use actorflow_serving::{
    BatchingOptions, ModelConfig, ModelServer, Models, ServerOptions, VersionPolicy,
};
use actors::saved_model::PREDICT_METHOD_NAME;
use actors::saved_model::{MetaGraphOptions, SavedModelBuilder, Signature, TensorSpec};
use actors::{Session, SessionOptions};
use graph::builder::Scope;
use graph::{ops, Code, DType, Shape, Status, Tensor};
use prost::Message;

use common::http;

/// Writes version `version` of a model computing `x · (scale · I)` (x: `[n, 2]`
/// float32) under `base`, atomically: built beside it, then renamed in, as a
/// deployment would, so the source never sees half a version.
fn export(base: &Path, version: i64, scale: f32) {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(2)])).unwrap();
    let w0 = ops::constant(&s, Tensor::new(&[2, 2], vec![0.0f32; 4]).unwrap()).unwrap();
    let w = ops::Variable::new(&s, "w", &w0, true).unwrap();
    let y = ops::mat_mul(&s, &x, &w.value, false, false).unwrap();
    let set = ops::assign(
        &s,
        &w.var,
        &ops::constant(
            &s,
            Tensor::new(&[2, 2], vec![scale, 0.0, 0.0, scale]).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let session = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    session.run(&[], &[], &[set.op().name()]).unwrap();
    let sig = Signature::new(PREDICT_METHOD_NAME)
        .input("x", TensorSpec::of(&x))
        .output("y", TensorSpec::of(&y));
    std::fs::create_dir_all(base).unwrap();
    let staging = base.join(format!(".staging-{version}"));
    let mut b = SavedModelBuilder::new(&staging).unwrap();
    b.add_meta_graph_and_variables(
        &s,
        &session,
        &["serve"],
        MetaGraphOptions::default().with_signature("serving_default", sig),
    )
    .unwrap();
    b.save().unwrap();
    std::fs::rename(&staging, base.join(version.to_string())).unwrap();
}

/// The first prediction's first value of `POST /v1/models/m:predict` on
/// `[[1, 2]]`, or the failure.
fn predict_scale(addr: SocketAddr, path: &str) -> Result<f64, String> {
    let (code, body) = http(addr, "POST", path, r#"{"instances": [[1.0, 2.0]]}"#);
    if code != 200 {
        return Err(format!("HTTP {code}: {body}"));
    }
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    let p = &v["predictions"][0];
    let (a, b) = (p[0].as_f64(), p[1].as_f64());
    match (a, b) {
        (Some(a), Some(b)) if (b - 2.0 * a).abs() < 1e-6 => Ok(a),
        _ => Err(format!("unexpected answer {body}")),
    }
}

fn start(models: Vec<ModelConfig>) -> ModelServer {
    let mut o = ServerOptions::local(models);
    o.poll_wait = Duration::from_millis(50);
    ModelServer::start(o).unwrap()
}

/// [`start`], once every model has a version available.
fn start_available(models: Vec<ModelConfig>) -> ModelServer {
    let server = start(models);
    server
        .wait_until_available(Duration::from_secs(60))
        .unwrap();
    server
}

/// Why version `version` of model "m" failed to load.
fn load_error(models: &Models, version: i64) -> Status {
    models
        .status("m", Some(&VersionRequest::Specific(version)))
        .unwrap()[0]
        .error
        .clone()
        .unwrap()
}

#[test]
fn a_new_version_is_swapped_in_while_a_client_keeps_sending() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("m");
    export(&base, 1, 1.0);
    let server = start_available(vec![ModelConfig::new("m", &base)]);
    let addr = server.rest_addr().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let client = {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
                match predict_scale(addr, "/v1/models/m:predict") {
                    Ok(s) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        if seen.last() != Some(&s) {
                            seen.push(s);
                        }
                    }
                    Err(e) => {
                        eprintln!("failed request: {e}");
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            seen
        })
    };
    // Some answers from version 1, then version 2 arrives.
    while ok.load(Ordering::Relaxed) < 20 {
        std::thread::sleep(Duration::from_millis(5));
    }
    export(&base, 2, 2.0);
    let models = server.models().clone();
    models
        .wait_for(Duration::from_secs(60), |m| {
            m.available_versions("m") == vec![2]
        })
        .unwrap();
    let after = ok.load(Ordering::Relaxed);
    while ok.load(Ordering::Relaxed) < after + 20 {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Release);
    let seen = client.join().unwrap();
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed during the swap"
    );
    assert_eq!(
        seen,
        vec![1.0, 2.0],
        "answers went from version 1 to version 2, once"
    );
    // Version 1 reaches END once its last request has gone.
    models
        .wait_for(Duration::from_secs(30), |m| {
            m.status("m", Some(&VersionRequest::Specific(1)))
                .map(|s| s[0].state == VersionState::End)
                .unwrap_or(false)
        })
        .unwrap();
    let (code, body) = http(addr, "GET", "/v1/models/m", "");
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let states: Vec<(String, String)> = v["model_version_status"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["version"].as_str().unwrap().to_owned(),
                s["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(states.contains(&("2".into(), "AVAILABLE".into())), "{body}");
    assert!(states.contains(&("1".into(), "END".into())), "{body}");
}

#[test]
fn a_broken_version_does_not_replace_a_good_one() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("m");
    export(&base, 1, 1.0);
    let server = start_available(vec![ModelConfig::new("m", &base)]);
    let addr = server.rest_addr().unwrap();
    // Version 2: a saved_model.pb that is not a SavedModel.
    let broken = base.join("2");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("saved_model.pb"), b"\x0a\xffnot a protobuf").unwrap();
    let models = server.models().clone();
    models
        .wait_for(Duration::from_secs(60), |m| {
            m.status("m", Some(&VersionRequest::Specific(2)))
                .map(|s| s[0].state == VersionState::End && s[0].error.is_some())
                .unwrap_or(false)
        })
        .unwrap();
    // Version 1 keeps serving.
    assert_eq!(models.available_versions("m"), vec![1]);
    assert_eq!(predict_scale(addr, "/v1/models/m:predict"), Ok(1.0));
    let err = load_error(&models, 2);
    assert_eq!(err.code(), Code::DataLoss, "{err}");
    let (code, body) = http(addr, "GET", "/v1/models/m/versions/2", "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("DATA_LOSS"), "{body}");
    // A good version 3 replaces version 1.
    export(&base, 3, 3.0);
    models
        .wait_for(Duration::from_secs(60), |m| {
            m.available_versions("m") == vec![3]
        })
        .unwrap();
    assert_eq!(predict_scale(addr, "/v1/models/m:predict"), Ok(3.0));
}

#[test]
fn labels_specific_versions_and_config_reloads() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("m");
    for (v, scale) in [(1, 1.0), (2, 2.0), (3, 3.0)] {
        export(&base, v, scale);
    }
    let config = ModelConfig::new("m", &base)
        .with_policy(VersionPolicy::Specific(vec![1, 2]))
        .with_label("stable", 1)
        .with_label("canary", 2);
    let server = start(vec![config]);
    let models = server.models().clone();
    models
        .wait_for(Duration::from_secs(60), |m| {
            m.available_versions("m") == vec![1, 2]
        })
        .unwrap();
    let addr = server.rest_addr().unwrap();
    assert_eq!(
        predict_scale(addr, "/v1/models/m:predict"),
        Ok(2.0),
        "latest"
    );
    assert_eq!(
        predict_scale(addr, "/v1/models/m/versions/1:predict"),
        Ok(1.0)
    );
    assert_eq!(
        predict_scale(addr, "/v1/models/m/labels/stable:predict"),
        Ok(1.0)
    );
    assert_eq!(
        predict_scale(addr, "/v1/models/m/labels/canary:predict"),
        Ok(2.0)
    );
    let (code, body) = http(
        addr,
        "POST",
        "/v1/models/m/versions/3:predict",
        r#"{"instances": [[1.0, 2.0]]}"#,
    );
    assert_eq!(code, 404, "{body}");
    let (code, body) = http(
        addr,
        "POST",
        "/v1/models/m/labels/beta:predict",
        r#"{"instances": [[1.0, 2.0]]}"#,
    );
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        models
            .get("m", &VersionRequest::Label("beta".into()))
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );

    // A label naming a version of "m" that is not available is refused, and
    // changes nothing.
    let bad = ModelConfig::new("m", &base)
        .with_policy(VersionPolicy::Specific(vec![1, 2]))
        .with_label("stable", 3);
    assert_eq!(
        server.reload(vec![bad]).unwrap_err().code(),
        Code::FailedPrecondition
    );
    assert_eq!(
        predict_scale(addr, "/v1/models/m/labels/stable:predict"),
        Ok(1.0)
    );

    // Reload: model "m" serves its latest version only, and a second model
    // "n" appears.
    let n_base = tmp.path().join("n");
    export(&n_base, 7, 7.0);
    server
        .reload(vec![
            ModelConfig::new("m", &base),
            ModelConfig::new("n", &n_base),
        ])
        .unwrap();
    models
        .wait_for(Duration::from_secs(60), |m| {
            m.available_versions("m") == vec![3] && m.available_versions("n") == vec![7]
        })
        .unwrap();
    assert_eq!(predict_scale(addr, "/v1/models/n:predict"), Ok(7.0));
    // Reload without "m": it unloads and is gone.
    server.reload(vec![ModelConfig::new("n", &n_base)]).unwrap();
    models
        .wait_for(Duration::from_secs(60), |m| {
            m.available_versions("m").is_empty()
        })
        .unwrap();
    let (code, _) = http(
        addr,
        "POST",
        "/v1/models/m:predict",
        r#"{"instances": [[1.0, 2.0]]}"#,
    );
    assert_eq!(code, 404);
    // Duplicate names are refused and change nothing.
    let dup = server.reload(vec![
        ModelConfig::new("n", &n_base),
        ModelConfig::new("n", &base),
    ]);
    assert_eq!(dup.unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(predict_scale(addr, "/v1/models/n:predict"), Ok(7.0));
}

/// A `PredictionLog` asking for `x` = `[[1, 2]]` under input key `key`.
fn warmup_record(key: &str) -> Vec<u8> {
    use proto::tensorflow::serving as pb;
    let x = graph::import::tensor_to_proto(&Tensor::new(&[1, 2], vec![1.0f32, 2.0]).unwrap());
    let log = pb::PredictionLog {
        log_type: Some(pb::prediction_log::LogType::PredictLog(pb::PredictLog {
            request: Some(pb::PredictRequest {
                model_spec: Some(pb::ModelSpec {
                    name: "m".into(),
                    ..Default::default()
                }),
                inputs: [(key.to_owned(), x)].into_iter().collect(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    kernels::record::encode_record(&log.encode_to_vec())
}

#[test]
fn warmup_requests_run_before_a_version_serves_and_a_failing_one_fails_the_load() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("m");
    export(&base, 1, 1.0);
    let extra = base.join("1/assets.extra");
    std::fs::create_dir_all(&extra).unwrap();
    let mut records = warmup_record("x");
    records.extend(warmup_record("x"));
    std::fs::write(extra.join("tf_serving_warmup_requests"), records).unwrap();
    let server = start_available(vec![ModelConfig::new("m", &base)]);
    assert_eq!(
        predict_scale(server.rest_addr().unwrap(), "/v1/models/m:predict"),
        Ok(1.0)
    );

    // Version 2's warmup asks for an input the model does not have.
    let staging = tmp.path().join("v2");
    export(&staging, 2, 2.0);
    let extra = staging.join("2/assets.extra");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::write(
        extra.join("tf_serving_warmup_requests"),
        warmup_record("nope"),
    )
    .unwrap();
    std::fs::rename(staging.join("2"), base.join("2")).unwrap();
    let models = server.models().clone();
    models
        .wait_for(Duration::from_secs(60), |m| {
            m.status("m", Some(&VersionRequest::Specific(2)))
                .map(|s| s[0].state == VersionState::End)
                .unwrap_or(false)
        })
        .unwrap();
    let err = load_error(&models, 2);
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.to_string().contains("warmup"), "{err}");
    assert_eq!(models.available_versions("m"), vec![1]);
}

#[test]
fn batching_merges_concurrent_requests_into_fewer_session_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("m");
    export(&base, 1, 3.0);
    let mut o = ServerOptions::local(vec![ModelConfig::new("m", &base)]);
    o.batching = Some(BatchingOptions {
        max_batch_size: 64,
        batch_timeout: Duration::from_millis(200),
        num_batch_threads: 1,
        ..BatchingOptions::default()
    });
    o.enable_model_warmup = false;
    let server = ModelServer::start(o).unwrap();
    server
        .wait_until_available(Duration::from_secs(60))
        .unwrap();
    let servable = server.models().get("m", &VersionRequest::Latest).unwrap();
    let before = servable.batch_runs();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    const N: usize = 16;
    let answers = rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..N {
            let s = servable.clone();
            handles.push(tokio::spawn(async move {
                // Request i: i+1 rows, row r = [i, r].
                let rows = i + 1;
                let data: Vec<f32> = (0..rows).flat_map(|r| [i as f32, r as f32]).collect();
                let x = Tensor::new(&[rows, 2], data).unwrap();
                s.predict("", vec![("x".into(), x)], &[]).await
            }));
        }
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    for (i, a) in answers.into_iter().enumerate() {
        let y = &a.unwrap().outputs["y"];
        let want: Vec<f32> = (0..=i)
            .flat_map(|r| [3.0 * i as f32, 3.0 * r as f32])
            .collect();
        assert_eq!(y, &Tensor::new(&[i + 1, 2], want).unwrap(), "request {i}");
    }
    let runs = servable.batch_runs() - before;
    // 16 requests of 1..=16 rows (136 rows) fit in three batches of 64.
    assert!(
        (1..=4).contains(&runs),
        "{N} requests took {runs} session runs"
    );
    let metrics = server.metrics().encode();
    assert!(
        metrics.contains(":tensorflow:serving:batching_session:processed_batch_size_count{model_name=\"m\",signature=\"serving_default\"}"),
        "{metrics}"
    );
}
