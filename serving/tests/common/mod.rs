//! What the serving integration tests share: the SavedModel fixtures copied
//! into base paths, test servers started and loaded, a plain HTTP/1.1 client,
//! gRPC clients, and a classify/regress model written here.
//!
//! Each test binary compiles this module on its own and uses part of it, so
//! the items carry `#[allow(dead_code)]`.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use actorflow_serving::{ModelConfig, ModelServer, ServerOptions};
use actors::saved_model::{
    MetaGraphOptions, SavedModelBuilder, Signature, TensorSpec, CLASSIFY_METHOD_NAME,
    PREDICT_METHOD_NAME, REGRESS_METHOD_NAME,
};
use actors::{Session, SessionOptions};
use graph::builder::Scope;
use graph::{ops, DType, Shape, Tensor};
use proto::tensorflow::serving::model_service_client::ModelServiceClient;
use proto::tensorflow::serving::prediction_service_client::PredictionServiceClient;
use tonic::transport::Channel;

/// How long a test server may take to load its models.
#[allow(dead_code)]
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// TensorFlow 2.21's SavedModel fixture `name` (tests/fixtures/saved_model).
#[allow(dead_code)]
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/saved_model")
        .join(name)
}

#[allow(dead_code)]
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// A base path `<tmp>/<dir>` holding fixture `model` as each of `versions`.
#[allow(dead_code)]
pub fn base_path(tmp: &Path, dir: &str, model: &str, versions: &[i64]) -> PathBuf {
    let base = tmp.join(dir);
    for v in versions {
        copy_dir(&fixture(model), &base.join(v.to_string()));
    }
    base
}

/// Options for a test server: both APIs on 127.0.0.1, no warmup.
#[allow(dead_code)]
pub fn options(models: Vec<ModelConfig>) -> ServerOptions {
    let mut o = ServerOptions::local(models);
    o.enable_model_warmup = false;
    o
}

/// Options for a test server: gRPC only, no warmup.
#[allow(dead_code)]
pub fn grpc_options(models: Vec<ModelConfig>) -> ServerOptions {
    let mut o = options(models);
    o.rest_api_port = None;
    o
}

/// A server on `o`, once every configured model has a version available.
#[allow(dead_code)]
pub fn start(o: ServerOptions) -> ModelServer {
    let server = ModelServer::start(o).unwrap();
    server.wait_until_available(LOAD_TIMEOUT).unwrap();
    server
}

/// One HTTP/1.1 request on a connection of its own; the status and body.
#[allow(dead_code)]
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// [`http`] with the body read as JSON (`null` when it is not).
#[allow(dead_code)]
pub fn http_json(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let (status, body) = http(addr, method, path, body);
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// A gRPC client of each service, on one connection.
#[allow(dead_code)]
pub type Clients = (
    PredictionServiceClient<Channel>,
    ModelServiceClient<Channel>,
);

/// Runs `f` with clients of `server` on a runtime of the test's own; the
/// clients are gone when it returns.
#[allow(dead_code)]
pub fn with_clients<F, Fut>(server: &ModelServer, f: F)
where
    F: FnOnce(Clients) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = server.grpc_addr();
    rt.block_on(async move {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        f((
            PredictionServiceClient::new(channel.clone()),
            ModelServiceClient::new(channel),
        ))
        .await
    });
}

/// Writes a model with a classify signature (`classes` "no", "yes" scored
/// 0.25, 0.75 for every example), a regress one (1.5 for every example) and a
/// predict one, each reading a `[n]` string tensor of serialized examples.
#[allow(dead_code)]
pub fn write_classify_regress_model(dir: &Path) {
    let s = Scope::new();
    let examples = ops::placeholder(&s, DType::String, Shape::from_dims(&[None])).unwrap();
    let n = ops::shape(&s, &examples).unwrap();
    let one = ops::constant(&s, Tensor::vector(&[1i32])).unwrap();
    let axis = ops::constant(&s, Tensor::scalar(0i32)).unwrap();
    let multiples = ops::concat(&s, &[n.clone(), one], &axis).unwrap();
    let score_row = Tensor::new(&[1, 2], vec![0.25f32, 0.75]).unwrap();
    let scores = ops::tile(&s, &ops::constant(&s, score_row).unwrap(), &multiples).unwrap();
    let class_row = Tensor::from_strings(&[1, 2], vec!["no", "yes"]).unwrap();
    let classes = ops::tile(&s, &ops::constant(&s, class_row).unwrap(), &multiples).unwrap();
    let value = ops::constant(&s, Tensor::scalar(1.5f32)).unwrap();
    let values = ops::fill(&s, &n, &value).unwrap();
    let session = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let input = TensorSpec::of(&examples);
    let options = MetaGraphOptions::default()
        .with_signature(
            "classify",
            Signature::new(CLASSIFY_METHOD_NAME)
                .input("inputs", input.clone())
                .output("classes", TensorSpec::of(&classes))
                .output("scores", TensorSpec::of(&scores)),
        )
        .with_signature(
            "regress",
            Signature::new(REGRESS_METHOD_NAME)
                .input("inputs", input.clone())
                .output("outputs", TensorSpec::of(&values)),
        )
        .with_signature(
            "serving_default",
            Signature::new(PREDICT_METHOD_NAME)
                .input("inputs", input)
                .output("scores", TensorSpec::of(&scores)),
        );
    let mut b = SavedModelBuilder::new(dir).unwrap();
    b.add_meta_graph_and_variables(&s, &session, &["serve"], options)
        .unwrap();
    b.save().unwrap();
}
