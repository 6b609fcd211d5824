//! The REST API end to end: a [`ModelServer`] on 127.0.0.1 over SavedModels
//! copied into temporary base paths (TensorFlow 2.21's fixtures under
//! tests/fixtures/saved_model, and a classify/regress model written here),
//! called with plain HTTP/1.1 over TCP. Predict answers as a local session over
//! the same SavedModel does, in TensorFlow Serving's exact layout; status,
//! metadata, classify and regress answer as TensorFlow Serving's REST API
//! does; every bad request gets TensorFlow Serving's HTTP status and error
//! body, and the server keeps serving after it; oversized and slow requests
//! are refused; the metrics page counts the requests; shutdown lets a request
//! in flight finish.
//!
//! Warmup is off in these servers: they test the API, not the warmup.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use actorflow_serving::json::writer::decimal_f32;
use actorflow_serving::{BatchingOptions, ModelConfig, ModelServer, ServerOptions};
use actors::saved_model::SavedModel;
use graph::Tensor;
use serde_json::Value;

use common::{base_path, fixture, options, start, write_classify_regress_model};

fn rest_addr(server: &ModelServer) -> SocketAddr {
    server.rest_addr().expect("the test servers serve REST")
}

/// A server of fixture tf2_keras as model "m" (version 1 under a temporary
/// base path), on the test options as `configure` changes them: the base
/// path's directory (to keep while the server runs), the server and its REST
/// address.
fn keras_server(
    configure: impl FnOnce(&mut ServerOptions),
) -> (tempfile::TempDir, ModelServer, SocketAddr) {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = options(vec![ModelConfig::new(
        "m",
        base_path(tmp.path(), "m", "tf2_keras", &[1]),
    )]);
    configure(&mut o);
    let server = start(o);
    let addr = rest_addr(&server);
    (tmp, server, addr)
}

/// An HTTP response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// The message of an error body, checking it is one.
    fn error(&self) -> String {
        let v = self.json();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 1, "{v}");
        obj["error"].as_str().unwrap().to_owned()
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Writes a request with a `Content-Length` body (none without one).
fn send(s: &mut TcpStream, method: &str, path: &str, body: Option<&[u8]>, close: bool) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    if let Some(b) = body {
        s.write_all(b).unwrap();
    }
}

/// Reads one response (its body sized by `Content-Length`).
fn receive(r: &mut BufReader<TcpStream>) -> Reply {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("no status line: {line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').unwrap();
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    Reply {
        status,
        headers,
        body,
    }
}

/// One request on a connection of its own.
fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&[u8]>) -> Reply {
    let mut s = connect(addr);
    send(&mut s, method, path, body, true);
    receive(&mut BufReader::new(s))
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, None)
}

fn post(addr: SocketAddr, path: &str, body: &str) -> Reply {
    request(addr, "POST", path, Some(body.as_bytes()))
}

/// The fixture's expected inputs as a JSON list and a float tensor.
fn expected_input(model: &str, key: &str) -> (Value, Tensor) {
    let path = fixture("expected.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = all[model]["inputs"][key].clone();
    let rows = rows(&v);
    let flat: Vec<f32> = rows.concat();
    let t = Tensor::new(&[rows.len(), rows[0].len()], flat).unwrap();
    (v, t)
}

/// What a local session over fixture `model` answers.
fn local(model: &str, inputs: &[(&str, Tensor)]) -> std::collections::BTreeMap<String, Tensor> {
    let m = SavedModel::load(fixture(model), &["serve"]).unwrap();
    m.run("serving_default", inputs).unwrap()
}

/// A JSON list of lists as rows of floats.
fn rows(v: &Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

fn tensor_rows(t: &Tensor) -> Vec<Vec<f32>> {
    let v = t.as_slice::<f32>().unwrap();
    v.chunks(t.dims()[1]).map(<[f32]>::to_vec).collect()
}

/// TensorFlow Serving's row-format layout of a `[n, k]` float output.
fn row_layout(t: &Tensor) -> String {
    let lines: Vec<String> = tensor_rows(t)
        .iter()
        .map(|r| {
            let v: Vec<String> = r.iter().map(|x| decimal_f32(*x)).collect();
            format!("[{}]", v.join(", "))
        })
        .collect();
    format!("{{\n    \"predictions\": [{}\n    ]\n}}", lines.join(", "))
}

#[test]
fn predict_answers_as_a_local_session_in_tensorflow_servings_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = start(options(vec![
        ModelConfig::new("m", base_path(tmp.path(), "m", "tf2_keras", &[1]))
            .with_label("stable", 1),
        ModelConfig::new("t", base_path(tmp.path(), "t", "tf1_builder", &[1])),
    ]));
    let addr = rest_addr(&server);

    // tf2_keras: one input, one output; the row format.
    let (features, x) = expected_input("tf2_keras", "features");
    let want = local("tf2_keras", &[("features", x)]);
    let probs = &want["probs"];
    for path in [
        "/v1/models/m:predict",
        "/v1/models/m/versions/1:predict",
        "/v1/models/m/labels/stable:predict",
    ] {
        let r = post(addr, path, &format!(r#"{{"instances": {features}}}"#));
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(rows(&r.json()["predictions"]), tensor_rows(probs), "{path}");
        assert_eq!(r.text(), row_layout(probs), "{path}");
    }
    // The columnar format, the input named or not, the signature named.
    for body in [
        format!(r#"{{"inputs": {{"features": {features}}}}}"#),
        format!(r#"{{"signature_name": "serving_default", "inputs": {features}}}"#),
    ] {
        let r = post(addr, "/v1/models/m:predict", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(rows(&r.json()["outputs"]), tensor_rows(probs));
    }
    // Instances as objects of named inputs.
    let objects: Vec<Value> = features
        .as_array()
        .unwrap()
        .iter()
        .map(|row| serde_json::json!({ "features": row }))
        .collect();
    let r = post(
        addr,
        "/v1/models/m:predict",
        &serde_json::json!({ "instances": objects }).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), row_layout(probs));

    // tf1_builder: outputs `y` [n, 2] and `total` (a scalar): the columnar
    // format writes both, exactly so; the row format cannot (no 0th dimension).
    let (xs, x) = expected_input("tf1_builder", "x");
    let want = local("tf1_builder", &[("x", x)]);
    let r = post(
        addr,
        "/v1/models/t:predict",
        &format!(r#"{{"inputs": {{"x": {xs}}}}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let y = tensor_rows(&want["y"]);
    let total = want["total"].scalar_value::<f32>().unwrap();
    assert_eq!(
        r.text(),
        format!(
            "{{\n    \"outputs\": {{\n        \"total\": {},\n        \"y\": [\n            [\n                {},\n                {}\n            ],\n            [\n                {},\n                {}\n            ]\n        ]\n    }}\n}}",
            decimal_f32(total),
            decimal_f32(y[0][0]),
            decimal_f32(y[0][1]),
            decimal_f32(y[1][0]),
            decimal_f32(y[1][1]),
        )
    );
    assert_eq!(
        (total, y.clone()),
        (16.75, vec![vec![6.625, 4.25], vec![2.375, 3.5]])
    );
    let r = post(
        addr,
        "/v1/models/t:predict",
        &format!(r#"{{"instances": {xs}}}"#),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.error(), "Tensor name: total has no shape information ");
    server.stop();
}

#[test]
fn status_and_metadata_answer_as_tensorflow_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = start(options(vec![ModelConfig::new(
        "m",
        base_path(tmp.path(), "m", "tf2_keras", &[1]),
    )
    .with_label("stable", 1)]));
    let addr = rest_addr(&server);
    let available = "{\n \"model_version_status\": [\n  {\n   \"version\": \"1\",\n   \"state\": \"AVAILABLE\",\n   \"status\": {\n    \"error_code\": \"OK\",\n    \"error_message\": \"\"\n   }\n  }\n ]\n}\n";
    for path in [
        "/v1/models/m",
        "/v1/models/m/versions/1",
        "/v1/models/m/labels/stable",
        "/V1/MODELS/m",
        "/v1/models/%6D",
    ] {
        let r = get(addr, path);
        assert_eq!((r.status, r.text().as_str()), (200, available), "{path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    let r = get(addr, "/v1/models/m/versions/2");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.error().contains("version 2"), "{}", r.text());
    let r = get(addr, "/v1/models/m/labels/nope");
    assert_eq!(
        (r.status, r.error()),
        (400, "Unrecognized servable version label: nope".into())
    );
    let r = get(addr, "/v1/models/nope");
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.error(), "Could not find any versions of model nope");
    let r = get(addr, "/v1/models");
    assert_eq!(
        (r.status, r.error()),
        (400, "Missing model name in request.".into())
    );

    // Metadata: TensorFlow Serving's joined layout, every signature of the
    // meta graph with its dtypes and shapes.
    for path in [
        "/v1/models/m/metadata",
        "/v1/models/m/versions/1/metadata",
        "/v1/models/m/labels/stable/metadata",
    ] {
        let r = get(addr, path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let text = r.text();
        assert!(
            text.starts_with("{\n\"model_spec\":{\n \"name\": \"m\",\n \"version\": \"1\",\n \"signature_name\": \"\"\n}\n,\n\"metadata\": {\"signature_def\": {\n \"signature_def\": {\n"),
            "{text}"
        );
        assert!(text.ends_with("\n}\n}\n}\n"), "{text}");
        let v = r.json();
        assert_eq!(
            v["model_spec"],
            serde_json::json!({"name": "m", "version": "1", "signature_name": ""})
        );
        let sigs = v["metadata"]["signature_def"]["signature_def"]
            .as_object()
            .unwrap();
        let local = SavedModel::load(fixture("tf2_keras"), &["serve"]).unwrap();
        let want: Vec<&String> = local.meta_graph().signature_def.keys().collect();
        assert_eq!(sigs.keys().collect::<Vec<_>>(), want);
        let sig = &sigs["serving_default"];
        assert_eq!(sig["method_name"], "tensorflow/serving/predict");
        let input = &sig["inputs"]["features"];
        assert_eq!(input["dtype"], "DT_FLOAT");
        let spec = &local.signatures()["serving_default"].inputs["features"];
        assert_eq!(input["name"], spec.name.as_str());
        let dims: Vec<String> = spec
            .shape
            .dims()
            .unwrap()
            .iter()
            .map(|d| d.map_or(-1, |d| d as i64).to_string())
            .collect();
        let got: Vec<&str> = input["tensor_shape"]["dim"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["size"].as_str().unwrap())
            .collect();
        assert_eq!(got, dims);
        assert_eq!(input["tensor_shape"]["unknown_rank"], false);
        assert_eq!(sig["outputs"]["probs"]["dtype"], "DT_FLOAT");
    }
    let r = get(addr, "/v1/models/nope/metadata");
    assert_eq!(
        (r.status, r.error()),
        (404, "Servable not found for request: Latest(nope)".into())
    );
    server.stop();
}

/// A bad request: method, path, body, and the status and error message it
/// gets (any message when empty).
type Case = (
    &'static str,
    &'static str,
    Option<Vec<u8>>,
    u16,
    &'static str,
);

#[test]
fn bad_requests_get_tensorflow_servings_statuses_and_the_server_keeps_serving() {
    let (_tmp, mut server, addr) = keras_server(|_| {});
    let (features, x) = expected_input("tf2_keras", "features");
    let good = format!(r#"{{"instances": {features}}}"#);
    let want = row_layout(&local("tf2_keras", &[("features", x)])["probs"]);
    let nested = format!(r#"{{"instances": {}}}"#, "[".repeat(100_000));
    let cases: Vec<Case> = vec![
        ("POST", "/v1/models/nope:predict", Some(good.clone().into()), 404, "Servable not found for request: Latest(nope)"),
        ("POST", "/v1/models/m/versions/9:predict", Some(good.clone().into()), 404, "Servable not found for request: Specific(m, 9)"),
        ("POST", "/v1/models/m/labels/nope:predict", Some(good.clone().into()), 400, "Unrecognized servable version label: nope"),
        ("POST", "/v1/models/nope:predict", Some(b"instances = [1, 2]".to_vec()), 400, "JSON Parse error: Invalid value. at offset: 0"),
        ("POST", "/v1/models/m:predict", Some(Vec::new()), 400, "JSON Parse error: The document is empty"),
        ("POST", "/v1/models/m:predict", None, 400, "JSON Parse error: The document is empty"),
        ("POST", "/v1/models/m:predict", Some(b"{\"instances\": [\xff".to_vec()), 400, "JSON Parse error: Invalid value. at offset: 15"),
        ("POST", "/v1/models/m:predict", Some(nested.into_bytes()), 400, "JSON Parse error: Invalid value. at offset: 100014"),
        ("POST", "/v1/models/m:predict", Some(br#"{"instances": [{"bogus": [1, 2, 3, 4]}]}"#.to_vec()), 400,
            "Failed to process element: 0 key: bogus of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: bogus"),
        ("POST", "/v1/models/m:predict", Some(br#"{"inputs": {"bogus": [[1, 2, 3, 4]]}}"#.to_vec()), 400,
            "Missing named input: features in 'inputs' object."),
        ("POST", "/v1/models/m:predict", Some(br#"{"instances": [["a", "b", "c", "d"]]}"#.to_vec()), 400,
            "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"a\" Type: String is not of expected type: float"),
        ("POST", "/v1/models/m:predict", Some(br#"{"signature_name": "nope", "instances": [1]}"#.to_vec()), 400,
            "Serving signature name: \"nope\" not found in signature def"),
        ("POST", "/v1/models/m:predict", Some(br#"{"signature_name": 1, "instances": [1]}"#.to_vec()), 400,
            "JSON Value: {\n    \"signature_name\": 1,\n    \"instances\": [1]\n} not formatted correctly. 'signature_name' key must be a string value."),
        ("POST", "/v1/models/m:predict", Some(br#"{"instances": [[1, 2, 3]]}"#.to_vec()), 400, ""),
        ("GET", "/foo", None, 404, "Malformed request: GET /foo"),
        ("GET", "/v1", None, 404, "Malformed request: GET /v1"),
        ("GET", "/v1/foo", None, 400, "Malformed request: GET /v1/foo"),
        ("GET", "/v1/models/m:predict", None, 400, "Malformed request: GET /v1/models/m:predict"),
        ("POST", "/v1/models/m:explode", Some(good.clone().into()), 400, "Malformed request: POST /v1/models/m:explode"),
        ("DELETE", "/v1/models/m", None, 400, "Malformed request: DELETE /v1/models/m"),
        ("POST", "/v1/models/m/versions/99999999999999999999:predict", Some(good.clone().into()), 400,
            "Failed to convert version: 99999999999999999999 to numeric."),
        ("POST", "/v1/models/m:classify", Some(br#"{"examples": [{"x": 1}]}"#.to_vec()), 400, ""),
        ("POST", "/v1/models/m:regress", Some(br#"{"examples": 1}"#.to_vec()), 400,
            "JSON Value: {\n    \"examples\": 1\n} Expecting 'examples' value to be an list/array"),
    ];
    for (method, path, body, status, message) in cases {
        let r = request(addr, method, path, body.as_deref());
        assert_eq!(r.status, status, "{method} {path}: {}", r.text());
        assert_eq!(
            r.header("content-type"),
            Some("application/json"),
            "{method} {path}"
        );
        let got = r.error();
        if message.is_empty() {
            assert!(!got.is_empty());
        } else {
            assert_eq!(got, message, "{method} {path}");
        }
        // The server still answers.
        let r = post(addr, "/v1/models/m:predict", &good);
        assert_eq!(
            (r.status, r.text()),
            (200, want.clone()),
            "after {method} {path}"
        );
    }

    // On one kept-alive connection: a bad request, then good ones.
    let mut s = connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    send(&mut s, "POST", "/v1/models/m:predict", Some(b"{"), false);
    let r = receive(&mut reader);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error(),
        "JSON Parse error: Missing a name for object member. at offset: 1"
    );
    for _ in 0..2 {
        send(
            &mut s,
            "POST",
            "/v1/models/m:predict",
            Some(good.as_bytes()),
            false,
        );
        let r = receive(&mut reader);
        assert_eq!((r.status, r.text()), (200, want.clone()));
    }
    // A CORS preflight without an origin, then with one.
    let r = request(addr, "OPTIONS", "/v1/models/m:predict", None);
    assert_eq!((r.status, r.body.len()), (400, 0));
    let mut s = connect(addr);
    s.write_all(b"OPTIONS /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nOrigin: https://example.com\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(receive(&mut BufReader::new(s)).status, 200);
    server.stop();
}

#[test]
fn oversized_bodies_are_413_without_being_read() {
    let (_tmp, mut server, addr) = keras_server(|o| o.rest_api_max_body_bytes = 1024);
    let (features, _) = expected_input("tf2_keras", "features");
    let good = format!(r#"{{"instances": {features}}}"#);

    // Declared too large: refused on the headers alone, the connection closed.
    let mut s = connect(addr);
    s.write_all(
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n",
    )
    .unwrap();
    let mut reader = BufReader::new(s);
    let r = receive(&mut reader);
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(
        r.error(),
        "Request body of 1000000 bytes is larger than the limit of 1024 bytes"
    );
    let mut rest = Vec::new();
    assert_eq!(
        reader.read_to_end(&mut rest).unwrap(),
        0,
        "the server closed the connection"
    );

    // Chunked, with no declared size: refused once past the limit.
    let mut s = connect(addr);
    s.write_all(
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let chunk = " ".repeat(600);
    for _ in 0..2 {
        s.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
            .unwrap();
    }
    let r = receive(&mut BufReader::new(s));
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(
        r.error(),
        "Request body is larger than the limit of 1024 bytes"
    );

    // Up to the limit is fine.
    let padded = format!("{good:<1024}");
    assert_eq!(padded.len(), 1024);
    let r = post(addr, "/v1/models/m:predict", &padded);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(addr, "/v1/models/m:predict", &format!("{good:<1025}"));
    assert_eq!(r.status, 413);

    let metrics = get(addr, "/monitoring/prometheus/metrics").text();
    assert!(
        metrics.contains(":tensorflow:serving:request_count_total{model_name=\"m\",API=\"predict\",entrypoint=\"REST\",status=\"RESOURCE_EXHAUSTED\"} 3"),
        "{metrics}"
    );
    server.stop();
}

#[test]
fn requests_slower_than_the_timeout_are_deadline_exceeded() {
    let (_tmp, mut server, addr) =
        keras_server(|o| o.rest_api_timeout = Duration::from_millis(300));
    let (features, _) = expected_input("tf2_keras", "features");
    let good = format!(r#"{{"instances": {features}}}"#);

    let began = Instant::now();
    let mut s = connect(addr);
    s.write_all(
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inst",
    )
    .unwrap();
    let r = receive(&mut BufReader::new(s));
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(
        r.error(),
        "Deadline exceeded: the request took longer than 300 ms"
    );
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );

    let r = post(addr, "/v1/models/m:predict", &good);
    assert_eq!(r.status, 200, "{}", r.text());
    let metrics = get(addr, "/monitoring/prometheus/metrics").text();
    assert!(
        metrics.contains("status=\"DEADLINE_EXCEEDED\"} 1"),
        "{metrics}"
    );
    server.stop();
}

#[test]
fn the_metrics_page_counts_the_requests() {
    let (_tmp, mut server, addr) = keras_server(|_| {});
    let (features, _) = expected_input("tf2_keras", "features");
    let good = format!(r#"{{"instances": {features}}}"#);
    for _ in 0..3 {
        assert_eq!(post(addr, "/v1/models/m:predict", &good).status, 200);
    }
    assert_eq!(post(addr, "/v1/models/m:predict", "{").status, 400);
    assert_eq!(post(addr, "/v1/models/nope:predict", &good).status, 404);
    assert_eq!(get(addr, "/v1/models/m").status, 200);
    assert_eq!(get(addr, "/v1/models/m/metadata").status, 200);
    assert_eq!(get(addr, "/v1/foo").status, 400);

    let r = get(addr, "/monitoring/prometheus/metrics");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = r.text();
    let count = |model: &str, api: &str, status: &str, n: u32| {
        let line = format!(
            ":tensorflow:serving:request_count_total{{model_name=\"{model}\",API=\"{api}\",entrypoint=\"REST\",status=\"{status}\"}} {n}\n"
        );
        assert!(text.contains(&line), "{line} in\n{text}");
    };
    count("m", "predict", "OK", 3);
    count("m", "predict", "INVALID_ARGUMENT", 1);
    count("nope", "predict", "NOT_FOUND", 1);
    count("m", "status", "OK", 1);
    count("m", "metadata", "OK", 1);
    count("", "", "INVALID_ARGUMENT", 1);
    assert!(
        text.contains(":tensorflow:serving:request_latency_count{model_name=\"m\",API=\"predict\",entrypoint=\"REST\"} 4\n"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
    server.stop();
}

#[test]
fn classify_and_regress_answer_as_tensorflow_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("c");
    write_classify_regress_model(&base.join("1"));
    let mut server = start(options(vec![ModelConfig::new("c", &base)]));
    let addr = rest_addr(&server);
    let examples =
        r#"[{"age": 20, "names": ["foo", "bar"], "rating": 8.5}, {"img": {"b64": "aGVsbG8="}}]"#;

    let r = post(
        addr,
        "/v1/models/c:classify",
        &format!(r#"{{"signature_name": "classify", "examples": {examples}}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.text(),
        "{\n    \"results\": [[[\"no\", 0.25], [\"yes\", 0.75]], [[\"no\", 0.25], [\"yes\", 0.75]]\n    ]\n}"
    );
    let r = post(
        addr,
        "/v1/models/c/versions/1:regress",
        &format!(
            r#"{{"signature_name": "regress", "context": {{"q": "pizza"}}, "examples": {examples}}}"#
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "{\n    \"results\": [1.5, 1.5]\n}");

    // A signature of another method, and malformed examples.
    let r = post(
        addr,
        "/v1/models/c:regress",
        &format!(r#"{{"signature_name": "classify", "examples": {examples}}}"#),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let r = post(
        addr,
        "/v1/models/c:classify",
        r#"{"signature_name": "classify"}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error(),
        "JSON Value: {\n    \"signature_name\": \"classify\"\n} When method is classify, key 'examples' is expected and was not found"
    );
    let r = post(
        addr,
        "/v1/models/c:classify",
        r#"{"examples": [{"x": [1, 1.5]}]}"#,
    );
    assert_eq!(
        (r.status, r.error()),
        (
            400,
            "Unexpected element type in feature: x expecting type: int64".into()
        )
    );
    let r = post(
        addr,
        "/v1/models/c:classify",
        &format!(r#"{{"signature_name": "classify", "examples": {examples}}}"#),
    );
    assert_eq!(r.status, 200);
    server.stop();
}

#[test]
fn shutdown_stops_accepting_and_lets_the_request_in_flight_finish() {
    let (_tmp, mut server, addr) = keras_server(|_| {});
    let (features, x) = expected_input("tf2_keras", "features");
    let body = format!(r#"{{"instances": {features}}}"#);
    let want = row_layout(&local("tf2_keras", &[("features", x)])["probs"]);

    // A request whose body is half sent, and an idle kept-alive connection.
    let mut s = connect(addr);
    let head = format!(
        "POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (first, second) = body.as_bytes().split_at(body.len() / 2);
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(first).unwrap();
    let idle = connect(addr);
    std::thread::sleep(Duration::from_millis(200));

    let stopping = std::thread::spawn(move || {
        server.stop();
    });
    // The listener closes: new connections are refused.
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "the listener is still open");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The idle connection is closed.
    let mut rest = Vec::new();
    assert_eq!(BufReader::new(idle).read_to_end(&mut rest).unwrap_or(0), 0);
    // The request in flight is answered.
    s.write_all(second).unwrap();
    let r = receive(&mut BufReader::new(s));
    assert_eq!((r.status, r.text()), (200, want));
    stopping.join().unwrap();
}

#[test]
fn concurrent_predicts_through_the_batcher_each_get_their_own_answer() {
    let (_tmp, mut server, addr) = keras_server(|o| {
        o.batching = Some(BatchingOptions {
            max_batch_size: 8,
            batch_timeout: Duration::from_millis(20),
            ..BatchingOptions::default()
        });
        o.enable_model_warmup = true;
    });
    // Eight different one-row requests at once, and what a local session
    // answers each.
    let requests: Vec<(String, String)> = (0..8)
        .map(|i| {
            let row: Vec<f32> = (0..4).map(|j| (i * 4 + j) as f32 * 0.125 - 1.0).collect();
            let want = local(
                "tf2_keras",
                &[("features", Tensor::new(&[1, 4], row.clone()).unwrap())],
            );
            let body = serde_json::json!({ "instances": [row] }).to_string();
            (body, row_layout(&want["probs"]))
        })
        .collect();
    let threads: Vec<_> = requests
        .into_iter()
        .map(|(body, want)| {
            std::thread::spawn(move || {
                let r = post(addr, "/v1/models/m:predict", &body);
                assert_eq!((r.status, r.text()), (200, want));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    server.stop();
}
