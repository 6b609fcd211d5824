//! The REST API, wire-compatible with TensorFlow Serving's
//! (`model_servers/http_server.cc`, `http_rest_api_handler.cc`,
//! `http_rest_api_util.cc`), on hyper's HTTP/1.1 server:
//!
//! | request | answer |
//! |---|---|
//! | `GET /v1/models/NAME` | the status of every version |
//! | `GET /v1/models/NAME/versions/V`, `…/labels/L` | the status of one |
//! | `GET /v1/models/NAME[/versions/V\|/labels/L]/metadata` | the signatures |
//! | `POST /v1/models/NAME[/versions/V\|/labels/L]:predict` | see [`crate::json`] |
//! | `POST …:classify`, `POST …:regress` | see [`crate::json`] |
//! | `GET /monitoring/prometheus/metrics` | [`Metrics::encode`](crate::metrics::Metrics::encode) |
//!
//! Paths match TensorFlow Serving's regular expressions, case-insensitively,
//! with the model name and label percent-decoded. Any other path under `/v1/`
//! is TensorFlow Serving's `Malformed request` (400); any other path at all is
//! 404 with the same error body. Every `/v1/` answer is JSON
//! (`Content-Type: application/json`), an error `{"error": "message"}` under
//! the HTTP status TensorFlow Serving gives its canonical code
//! ([`http_status`]). A request is parsed before its model is looked up, as
//! TensorFlow Serving does, so a malformed body to an unknown model is 400.
//!
//! Beyond TensorFlow Serving: a body larger than
//! [`rest_api_max_body_bytes`](crate::ServerOptions::rest_api_max_body_bytes)
//! is refused with 413 as soon as its `Content-Length` (or, chunked, its size
//! so far) shows it, without reading the rest; a request that takes longer
//! than [`rest_api_timeout`](crate::ServerOptions::rest_api_timeout) (reading
//! its body included) is `DEADLINE_EXCEEDED` (504); an error from parsing the
//! path (`Failed to convert version…`) carries the JSON body every other error
//! does, where TensorFlow Serving sends none.
//!
//! Every `/v1/` request is recorded with
//! [`Metrics::request`](crate::metrics::Metrics::request) under its model and API (`predict`,
//! `classify`, `regress`, `metadata`, `status`; both empty for a path that
//! names none). A bad request only ever gets an answer: the connection, and the
//! server, go on serving.
//!
//! Shutdown is graceful: once `shutdown` completes the listener closes, idle
//! connections close, and each connection finishes the request it is serving
//! (keep-alive off) before [`serve`] returns.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actors::saved_model::DEFAULT_SERVING_SIGNATURE_DEF_KEY;
use bytes::Bytes;
use graph::{Code, Result, Status};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::json;
use crate::manager::VersionRequest;
use crate::metrics::Entrypoint;
use crate::server::ApiState;

/// TensorFlow Serving's path of the Prometheus metrics page.
pub const METRICS_PATH: &str = "/monitoring/prometheus/metrics";

/// The metrics page's content type (prometheus-client writes OpenMetrics).
const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a connection may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the REST API on `listener` until `shutdown` completes, then stops
/// accepting and returns once the requests in flight have been answered.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ApiState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    connections.spawn(connection(stream, Arc::clone(&state), stop_rx.clone()));
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait a little
                    // rather than spin.
                    tracing::warn!("the REST API cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection until the client closes it or, after `stop`, until
/// it has finished the request in flight.
async fn connection(
    stream: tokio::net::TcpStream,
    state: Arc<ApiState>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let service = hyper::service::service_fn(move |req| {
        let state = Arc::clone(&state);
        async move { Ok::<_, Infallible>(handle(&state, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("REST connection: {e}");
                }
                return;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The API a `/v1/` path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `POST …:predict`.
    Predict,
    /// `POST …:classify`.
    Classify,
    /// `POST …:regress`.
    Regress,
    /// `GET /v1/models/NAME[…]`.
    Status,
    /// `GET …/metadata`.
    Metadata,
}

impl Api {
    /// The API's name in the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Api::Predict => "predict",
            Api::Classify => "classify",
            Api::Regress => "regress",
            Api::Status => "status",
            Api::Metadata => "metadata",
        }
    }
}

/// A `/v1/` request's path, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The API.
    pub api: Api,
    /// The model's name (percent-decoded; empty for `GET /v1/models`).
    pub model: String,
    /// Which version.
    pub version: VersionRequest,
}

/// Parses a `/v1/` request as TensorFlow Serving's `ParseModelInfo` and
/// `ProcessRequest` do. Errors are `InvalidArgument`: `Malformed request:
/// METHOD PATH` for a path or method no API has, `Failed to convert version:
/// V to numeric.` for a version beyond `i64`, `Missing model name in
/// request.` for `GET /v1/models`.
pub fn route(method: &str, path: &str) -> Result<Route> {
    let malformed = || Status::invalid_argument(format!("Malformed request: {method} {path}"));
    let parsed = match method {
        "POST" => parse_post(path),
        "GET" => parse_get(path),
        _ => None,
    }
    .ok_or_else(malformed)?;
    let version = match (parsed.version, parsed.label) {
        (Some(v), _) => VersionRequest::Specific(v.parse::<i64>().map_err(|_| {
            Status::invalid_argument(format!("Failed to convert version: {v} to numeric."))
        })?),
        (None, Some(l)) => VersionRequest::Label(percent_decode(l)),
        (None, None) => VersionRequest::Latest,
    };
    let api = match (method, parsed.action) {
        ("POST", "predict") => Api::Predict,
        ("POST", "classify") => Api::Classify,
        ("POST", "regress") => Api::Regress,
        ("GET", "metadata") => Api::Metadata,
        ("GET", _) => Api::Status,
        _ => return Err(malformed()),
    };
    let model = percent_decode(parsed.model);
    if model.is_empty() {
        return Err(Status::invalid_argument("Missing model name in request."));
    }
    Ok(Route {
        api,
        model,
        version,
    })
}

/// The captures of TensorFlow Serving's path expressions.
#[derive(Debug, Default)]
struct PathParts<'a> {
    model: &'a str,
    version: Option<&'a str>,
    label: Option<&'a str>,
    /// The `:method` of a POST, the `/metadata` of a GET (as written).
    action: &'a str,
}

/// Strips `prefix` from `s`, ASCII case-insensitively.
fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The longest non-empty run of `s` before any `/` or `:` (`[^/:]+`), and the
/// rest.
fn segment(s: &str) -> Option<(&str, &str)> {
    let end = s.find(['/', ':']).unwrap_or(s.len());
    (end > 0).then(|| s.split_at(end))
}

/// `(?:/versions/(\d+))|(?:/labels/([^/:]+))` at the start of `s`, if there:
/// (version, label, rest).
fn version_or_label(s: &str) -> Option<(Option<&str>, Option<&str>, &str)> {
    if let Some(rest) = strip_prefix_ci(s, "/versions/") {
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if end > 0 {
            return Some((Some(&rest[..end]), None, &rest[end..]));
        }
    } else if let Some(rest) = strip_prefix_ci(s, "/labels/") {
        let (label, rest) = segment(rest)?;
        return Some((None, Some(label), rest));
    }
    None
}

/// `(?i)/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)`.
fn parse_post(path: &str) -> Option<PathParts<'_>> {
    let rest = strip_prefix_ci(path, "/v1/models/")?;
    let (model, rest) = segment(rest)?;
    let (version, label, rest) = version_or_label(rest).unwrap_or((None, None, rest));
    let action = rest.strip_prefix(':')?;
    ["classify", "regress", "predict"]
        .iter()
        .any(|m| m.eq_ignore_ascii_case(action))
        .then_some(PathParts {
            model,
            version,
            label,
            action,
        })
}

/// `(?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:\/(metadata))?`,
/// with the regular expression's preferences: a model name when one fits, a
/// version or label when one fits.
fn parse_get(path: &str) -> Option<PathParts<'_>> {
    let rest = strip_prefix_ci(path, "/v1/models")?;
    /// `/metadata` or nothing, and the end: the subresource as written.
    fn end(s: &str) -> Option<&str> {
        if s.is_empty() {
            return Some("");
        }
        strip_prefix_ci(s, "/metadata")
            .filter(|r| r.is_empty())
            .map(|_| &s[1..])
    }
    /// `(version or label)? (/metadata)?` and the end.
    fn tail(s: &str) -> Option<(Option<&str>, Option<&str>, &str)> {
        if let Some((version, label, rest)) = version_or_label(s) {
            if let Some(action) = end(rest) {
                return Some((version, label, action));
            }
        }
        end(s).map(|action| (None, None, action))
    }
    let named = rest
        .strip_prefix('/')
        .and_then(segment)
        .and_then(|(model, rest)| tail(rest).map(|t| (model, t)));
    let (model, (version, label, action)) = named.or_else(|| tail(rest).map(|t| ("", t)))?;
    Some(PathParts {
        model,
        version,
        label,
        action,
    })
}

/// `%XX` decoded, as curl's `curl_easy_unescape` decodes (anything else kept).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The HTTP status TensorFlow Serving answers a canonical code with
/// (`ToHTTPStatusCode`).
pub fn http_status(code: Code) -> StatusCode {
    let n = match code {
        Code::Ok => 200,
        Code::Cancelled => 499,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::DeadlineExceeded => 504,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::PermissionDenied => 403,
        Code::ResourceExhausted => 429,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::Unauthenticated => 401,
        _ => 500,
    };
    StatusCode::from_u16(n).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Why a request failed.
#[derive(Debug)]
enum Failure {
    /// With the status's code and message.
    Status(Status),
    /// The body is over the limit: 413, and the connection closes (the rest of
    /// the body is never read).
    TooLarge(Status),
}

impl From<Status> for Failure {
    fn from(s: Status) -> Failure {
        Failure::Status(s)
    }
}

/// Answers one request.
async fn handle(state: &ApiState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    if path == METRICS_PATH {
        return reply(
            StatusCode::OK,
            METRICS_CONTENT_TYPE,
            state.metrics.encode().into_bytes(),
        );
    }
    if strip_prefix_ci(&path, "/v1/").is_none() {
        let e = Status::not_found(format!("Malformed request: {method} {path}"));
        return reply(
            StatusCode::NOT_FOUND,
            "application/json",
            json::error_body(e.message()),
        );
    }
    if method == Method::OPTIONS {
        // A CORS preflight (TensorFlow Serving answers it without a body).
        let origin = req
            .headers()
            .get("origin")
            .and_then(|o| o.to_str().ok())
            .unwrap_or("");
        let ok = origin.contains("http://") || origin.contains("https://");
        let status = if ok {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = status;
        return r;
    }
    let start = Instant::now();
    let (model, api, outcome) = match route(method.as_str(), &path) {
        Err(e) => (String::new(), "", Err(Failure::Status(e))),
        Ok(route) => {
            let outcome =
                with_deadline(state.options.rest_api_timeout, answer(state, &route, req)).await;
            (route.model, route.api.name(), outcome)
        }
    };
    let (status, body, close, code) = match outcome {
        Ok(body) => (StatusCode::OK, body, false, None),
        Err(Failure::Status(e)) => (http_status(e.code()), error_body(&e), false, Some(e.code())),
        Err(Failure::TooLarge(e)) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            error_body(&e),
            true,
            Some(e.code()),
        ),
    };
    state
        .metrics
        .request(&model, api, Entrypoint::Rest, code, start.elapsed());
    let mut r = reply(status, "application/json", body);
    if close {
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// `{"error": message}`, the message with its node as TensorFlow writes it.
fn error_body(e: &Status) -> Vec<u8> {
    json::error_body(&crate::api::status_proto(Some(e)).error_message)
}

fn reply(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// `answer` within `timeout` (none when zero, as TensorFlow Serving's
/// `--rest_api_timeout_in_ms=0`), else `DEADLINE_EXCEEDED`.
async fn with_deadline(
    timeout: Duration,
    answer: impl Future<Output = std::result::Result<Vec<u8>, Failure>>,
) -> std::result::Result<Vec<u8>, Failure> {
    if timeout.is_zero() {
        return answer.await;
    }
    match tokio::time::timeout(timeout, answer).await {
        Ok(r) => r,
        Err(_) => Err(Failure::Status(Status::deadline_exceeded(format!(
            "Deadline exceeded: the request took longer than {} ms",
            timeout.as_millis()
        )))),
    }
}

/// The body of the answer to `route`.
async fn answer(
    state: &ApiState,
    route: &Route,
    req: Request<Incoming>,
) -> std::result::Result<Vec<u8>, Failure> {
    let models = &state.models;
    match route.api {
        Api::Status => {
            let version = match &route.version {
                VersionRequest::Latest => None,
                v => Some(v),
            };
            let statuses = models.status(&route.model, version)?;
            Ok(json::status_json(&crate::api::status_response(
                &route.model,
                &statuses,
            ))?)
        }
        Api::Metadata => {
            let servable = models.get(&route.model, &route.version)?;
            Ok(json::metadata_json(&crate::api::metadata_response(
                &servable,
            ))?)
        }
        Api::Predict => {
            let body = read_body(req, state.options.rest_api_max_body_bytes).await?;
            let request = json::PredictJson::parse(&body)?;
            let servable = models.get(&route.model, &route.version)?;
            let key = match request.signature_name() {
                "" => DEFAULT_SERVING_SIGNATURE_DEF_KEY,
                k => k,
            };
            let signature = servable.model().signatures().get(key).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Serving signature name: \"{key}\" not found in signature def"
                ))
            })?;
            let (format, inputs) = request.inputs(&signature.inputs)?;
            let prediction = servable.predict(key, inputs, &[]).await?;
            Ok(json::predict_response(&prediction.outputs, format)?)
        }
        Api::Classify => {
            let body = read_body(req, state.options.rest_api_max_body_bytes).await?;
            let request = json::ExampleJson::parse(&body)?;
            let servable = models.get(&route.model, &route.version)?;
            let (_, result) = servable
                .classify(&request.signature_name, &request.input)
                .await?;
            Ok(json::classify_response(&result)?)
        }
        Api::Regress => {
            let body = read_body(req, state.options.rest_api_max_body_bytes).await?;
            let request = json::ExampleJson::parse(&body)?;
            let servable = models.get(&route.model, &route.version)?;
            let (_, result) = servable
                .regress(&request.signature_name, &request.input)
                .await?;
            Ok(json::regress_response(&result)?)
        }
    }
}

/// The request's body, refused once it is known to be over `limit` bytes.
async fn read_body(req: Request<Incoming>, limit: usize) -> std::result::Result<Bytes, Failure> {
    let too_large = |n: Option<u64>| {
        let size = n.map(|n| format!(" of {n} bytes")).unwrap_or_default();
        Failure::TooLarge(Status::resource_exhausted(format!(
            "Request body{size} is larger than the limit of {limit} bytes"
        )))
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(declared));
    }
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large(None)),
        Err(e) => Err(Failure::Status(Status::invalid_argument(format!(
            "Failed to read the request body: {e}"
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(method: &str, path: &str) -> Route {
        route(method, path).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn err(method: &str, path: &str) -> String {
        let e = route(method, path).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        e.message().to_owned()
    }

    fn r(api: Api, model: &str, version: VersionRequest) -> Route {
        Route {
            api,
            model: model.to_owned(),
            version,
        }
    }

    #[test]
    fn paths_parse_as_tensorflow_servings_expressions() {
        use Api::{Classify, Metadata, Predict, Regress};
        use VersionRequest::{Label, Latest, Specific};
        for (request, want) in [
            ("POST /v1/models/m:predict", r(Predict, "m", Latest)),
            (
                "POST /v1/models/m/versions/3:classify",
                r(Classify, "m", Specific(3)),
            ),
            (
                "POST /v1/models/m/labels/stable:regress",
                r(Regress, "m", Label("stable".into())),
            ),
            (
                "POST /V1/Models/m/VERSIONS/3:predict",
                r(Predict, "m", Specific(3)),
            ),
            ("GET /v1/models/m", r(Api::Status, "m", Latest)),
            (
                "GET /v1/models/m/versions/7",
                r(Api::Status, "m", Specific(7)),
            ),
            (
                "GET /v1/models/m/labels/canary",
                r(Api::Status, "m", Label("canary".into())),
            ),
            ("GET /v1/models/m/metadata", r(Metadata, "m", Latest)),
            (
                "GET /v1/models/m/versions/2/metadata",
                r(Metadata, "m", Specific(2)),
            ),
            (
                "GET /v1/models/m/labels/x/metadata",
                r(Metadata, "m", Label("x".into())),
            ),
            // The expression prefers a model name, then a label, over a subresource.
            (
                "GET /v1/models/metadata",
                r(Api::Status, "metadata", Latest),
            ),
            (
                "GET /v1/models/m/labels/metadata",
                r(Api::Status, "m", Label("metadata".into())),
            ),
            // Only a lower-case `metadata` is the metadata API; an upper-case one
            // matches the expression, and asks for the status.
            ("GET /v1/models/m/METADATA", r(Api::Status, "m", Latest)),
            // Names and labels are percent-decoded.
            (
                "GET /v1/models/my%20model",
                r(Api::Status, "my model", Latest),
            ),
            (
                "POST /v1/models/%6d/labels/a%2Fb:predict",
                r(Predict, "m", Label("a/b".into())),
            ),
            ("GET /v1/models/100%", r(Api::Status, "100%", Latest)),
        ] {
            let (method, path) = request.split_once(' ').unwrap();
            assert_eq!(ok(method, path), want, "{request}");
        }
    }

    #[test]
    fn malformed_paths_are_refused_as_tensorflow_serving_refuses_them() {
        // http_rest_api_handler_test.cc's UnsupportedApiCalls.
        for (method, path) in [
            ("GET", "/v1/foo"),
            ("POST", "/v1/foo"),
            ("GET", "/v1/models/debug/model_name"),
            ("POST", "/v1/models"),
            ("GET", "/v1/models/foo:predict"),
            ("GET", "/v1/models/foo/version/50:predict"),
            ("POST", "/v1/models/foo/version/50:regress"),
            ("POST", "/v1/models/foo/versions/HELLO:regress"),
            ("POST", "/v1/models/foo/metadata"),
            ("POST", "/v1/models/foo/label/some_label:regress"),
            (
                "POST",
                "/v1/models/foo/versions/50/labels/some_label:regress",
            ),
            ("POST", "/v1/models/foo/versions/some_label:regress"),
            ("POST", "/v1/models/foo:PREDICT"),
            ("POST", "/v1/models/foo:explode"),
            ("PUT", "/v1/models/foo:predict"),
            ("GET", "/v1/models/foo/"),
            ("GET", "/v1/models/foo/versions/1/labels/x"),
        ] {
            assert_eq!(
                err(method, path),
                format!("Malformed request: {method} {path}")
            );
        }
        assert_eq!(err("GET", "/v1/models"), "Missing model name in request.");
        assert_eq!(
            err("GET", "/v1/models/versions/3"),
            "Missing model name in request."
        );
        assert_eq!(
            err(
                "POST",
                "/v1/models/foo/versions/18446744073709551615:regress"
            ),
            "Failed to convert version: 18446744073709551615 to numeric."
        );
    }

    #[test]
    fn canonical_codes_map_to_tensorflow_servings_http_statuses() {
        let cases = [
            (Code::Ok, 200),
            (Code::Cancelled, 499),
            (Code::Unknown, 500),
            (Code::InvalidArgument, 400),
            (Code::DeadlineExceeded, 504),
            (Code::NotFound, 404),
            (Code::AlreadyExists, 409),
            (Code::PermissionDenied, 403),
            (Code::ResourceExhausted, 429),
            (Code::FailedPrecondition, 400),
            (Code::Aborted, 409),
            (Code::OutOfRange, 400),
            (Code::Unimplemented, 501),
            (Code::Internal, 500),
            (Code::Unavailable, 503),
            (Code::DataLoss, 500),
            (Code::Unauthenticated, 401),
        ];
        for (code, want) in cases {
            assert_eq!(http_status(code).as_u16(), want, "{code:?}");
        }
    }
}
