//! `actorflow serve` as a process, with TensorFlow Serving's flags: one model
//! from `--model_base_path`, several from a `--model_config_file` (version
//! policies, labels) with batching from `--batching_parameters_file`, bad flags
//! and files, and SIGTERM. Every process a test starts is killed when it ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actorflow::saved_model::{MetaGraphOptions, PREDICT_METHOD_NAME};
use actorflow::{
    ops, DType, SavedModelBuilder, Scope, Session, SessionOptions, Shape, Signature, Tensor,
    TensorSpec,
};

/// A server process, killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes version `version` of `y = x + offset` (x: float32 `[n]`) under `base`.
fn export(base: &Path, version: i64, offset: f32) {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None])).unwrap();
    let c = ops::constant(&s, Tensor::scalar(offset)).unwrap();
    let y = ops::add(&s, &x, &c).unwrap();
    let session = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let sig = Signature::new(PREDICT_METHOD_NAME)
        .input("x", TensorSpec::of(&x))
        .output("y", TensorSpec::of(&y));
    let mut b = SavedModelBuilder::new(base.join(version.to_string())).unwrap();
    b.add_meta_graph_and_variables(
        &s,
        &session,
        &["serve"],
        MetaGraphOptions::default().with_signature("serving_default", sig),
    )
    .unwrap();
    b.save().unwrap();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `actorflow serve` with `flags` on free ports of 127.0.0.1 and waits
/// for its two "listening on" lines; the process and the REST address.
fn serve(flags: &[&str]) -> (Proc, SocketAddr) {
    let (grpc, rest) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_actorflow"))
        .args(["serve", "--host", "127.0.0.1"])
        .args([
            "--port",
            &grpc.to_string(),
            "--rest_api_port",
            &rest.to_string(),
        ])
        .args(["--file_system_poll_wait_seconds", "1"])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the actorflow binary starts");
    let out = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(out).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(first, format!("gRPC listening on 127.0.0.1:{grpc}"));
    let second = lines.next().unwrap().unwrap();
    assert_eq!(second, format!("REST listening on 127.0.0.1:{rest}"));
    (Proc(child), SocketAddr::from(([127, 0, 0, 1], rest)))
}

fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let (code, body) = http_raw(addr, method, path, body);
    (
        code,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

fn http_raw(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, body.to_owned())
}

/// Predicts `[1, 2]` with `path` once the model answers (it loads in the
/// background); the predictions.
fn predict(addr: SocketAddr, path: &str) -> Vec<f64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, v) = http(addr, "POST", path, r#"{"instances": [1.0, 2.0]}"#);
        if code == 200 {
            return serde_json::from_value(v["predictions"].clone()).unwrap();
        }
        assert!(Instant::now() < deadline, "no answer: {code} {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn one_model_from_its_base_path_then_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("adder");
    export(&base, 1, 10.0);
    export(&base, 2, 20.0);
    let (mut p, addr) = serve(&[
        "--model_name",
        "adder",
        "--model_base_path",
        base.to_str().unwrap(),
    ]);
    // The latest version serves.
    assert_eq!(predict(addr, "/v1/models/adder:predict"), vec![21.0, 22.0]);
    let (code, v) = http(addr, "GET", "/v1/models/adder", "");
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["model_version_status"][0]["version"], "2");
    assert_eq!(v["model_version_status"][0]["state"], "AVAILABLE");
    let (code, text) = http_raw(addr, "GET", "/monitoring/prometheus/metrics", "");
    assert_eq!(code, 200, "{text}");
    assert!(
        text.contains(":tensorflow:serving:available_versions{model_name=\"adder\"} 1"),
        "{text}"
    );

    let pid = p.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let t0 = Instant::now();
    loop {
        if let Some(status) = p.0.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn models_from_a_config_file_with_labels_and_batching() {
    let tmp = tempfile::tempdir().unwrap();
    export(&tmp.path().join("a"), 1, 1.0);
    export(&tmp.path().join("a"), 2, 2.0);
    export(&tmp.path().join("b"), 5, 50.0);
    // Base paths relative to the config file, as TensorFlow Serving takes them.
    let config = tmp.path().join("models.config");
    std::fs::write(
        &config,
        r#"model_config_list {
  config {
    name: "a"
    base_path: "a"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 2 }
  }
  config { name: "b" base_path: "b" }
}
"#,
    )
    .unwrap();
    let batching = tmp.path().join("batching.config");
    std::fs::write(
        &batching,
        "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 2000 }\n\
         num_batch_threads { value: 2 }\nallowed_batch_sizes: 4\nallowed_batch_sizes: 8\n",
    )
    .unwrap();
    let (_p, addr) = serve(&[
        "--model_config_file",
        config.to_str().unwrap(),
        "--enable_batching",
        "--batching_parameters_file",
        batching.to_str().unwrap(),
    ]);
    assert_eq!(predict(addr, "/v1/models/b:predict"), vec![51.0, 52.0]);
    assert_eq!(
        predict(addr, "/v1/models/a/labels/stable:predict"),
        vec![2.0, 3.0]
    );
    assert_eq!(
        predict(addr, "/v1/models/a/labels/canary:predict"),
        vec![3.0, 4.0]
    );
    assert_eq!(
        predict(addr, "/v1/models/a/versions/1:predict"),
        vec![2.0, 3.0]
    );
    assert_eq!(predict(addr, "/v1/models/a:predict"), vec![3.0, 4.0]);
    let (code, v) = http(
        addr,
        "POST",
        "/v1/models/c:predict",
        r#"{"instances": [1.0]}"#,
    );
    assert_eq!(code, 404, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("Servable not found"),
        "{v}"
    );
}

#[test]
fn bad_flags_and_files_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_actorflow"))
            .arg("serve")
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // No model at all: INVALID_ARGUMENT (3).
    let (code, err) = run(&[]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("--model_base_path"), "{err}");
    // A config file that does not parse names the file and the place.
    let bad = tmp.path().join("bad.config");
    std::fs::write(&bad, "model_config_list { config { nme: 'x' } }").unwrap();
    let (code, err) = run(&["--model_config_file", bad.to_str().unwrap()]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("bad.config"), "{err}");
    // A missing config file: NOT_FOUND (5).
    let (code, err) = run(&["--model_config_file", "/nonexistent/models.config"]);
    assert_eq!(code, Some(5), "{err}");
    // Batching parameters that contradict each other.
    let b = tmp.path().join("b.config");
    std::fs::write(&b, "max_batch_size { value: 8 } allowed_batch_sizes: 4").unwrap();
    let base = tmp.path().join("m");
    let (code, err) = run(&[
        "--model_base_path",
        base.to_str().unwrap(),
        "--enable_batching",
        "--batching_parameters_file",
        b.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("allowed_batch_sizes"), "{err}");
    // Both ways of naming models at once: a usage error (64).
    let (code, err) = run(&[
        "--model_base_path",
        base.to_str().unwrap(),
        "--model_config_file",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(64), "{err}");
}
