//! The gRPC API: TensorFlow Serving's `PredictionService` (`Predict`,
//! `Classify`, `Regress`, `MultiInference`, `GetModelMetadata`) and
//! `ModelService` (`GetModelStatus`, `HandleReloadConfigRequest`) on one port,
//! wire-compatible with TensorFlow Serving: the same package, method paths,
//! messages, canonical codes and error messages, so `tensorflow-serving-api`'s
//! clients call it unchanged.
//!
//! Contract of every handler:
//!
//! 1. Request data never panics the server: a request that cannot be served
//!    (no `ModelSpec`, an unknown model, a malformed `TensorProto`, the wrong
//!    dtype) is answered with a status, and the server goes on serving. The
//!    handlers that run a model run it on a task of its own, so even a panic
//!    deep in a kernel answers `INTERNAL` rather than dropping the connection.
//! 2. Every request is recorded once in [`Metrics::request`](crate::metrics::Metrics::request)
//!    with its API, entry point `GRPC`, canonical code and latency, under its
//!    model's name once the model was found (else `""`, so that unknown names
//!    cannot grow the label sets).
//! 3. Messages larger than the server's
//!    [`grpc_max_message_bytes`](crate::config::ServerOptions::grpc_max_message_bytes)
//!    are refused both ways with gRPC's `RESOURCE_EXHAUSTED`, and one input
//!    tensor decodes to at most four times that many bytes (a few bytes of
//!    `TensorProto` may declare a huge splatted shape).
//!
//! Where TensorFlow Serving's gRPC and REST APIs differ, this is its gRPC
//! behaviour: `Predict` answers a signature the model lacks with
//! `FAILED_PRECONDITION` (`predict_util.cc`), `GetModelStatus` ignores a
//! `version_label` and reports every version (`get_model_status_impl.cc`).

use std::convert::Infallible;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use graph::import::{tensor_from_proto_limited, tensor_to_proto};
use graph::{Result, Status};
use proto::tensorflow::serving::model_service_server::{ModelService, ModelServiceServer};
use proto::tensorflow::serving::prediction_service_server::{
    PredictionService, PredictionServiceServer,
};
use proto::tensorflow::serving::{
    inference_result, metric, model_server_config, model_spec::VersionChoice,
    ClassificationRequest, ClassificationResponse, GetModelMetadataRequest,
    GetModelMetadataResponse, GetModelStatusRequest, GetModelStatusResponse, InferenceResult,
    Metric, ModelSpec, MultiInferenceRequest, MultiInferenceResponse, PredictRequest,
    PredictResponse, RegressionRequest, RegressionResponse, ReloadConfigRequest,
    ReloadConfigResponse,
};
use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, Service};
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;

use actors::saved_model::{
    CLASSIFY_METHOD_NAME, DEFAULT_SERVING_SIGNATURE_DEF_KEY, REGRESS_METHOD_NAME,
};

use crate::api;
use crate::manager::VersionRequest;
use crate::metrics::Entrypoint;
use crate::servable::Servable;
use crate::server::ApiState;

/// The `API` label of each request kind in the request metrics.
mod api_label {
    pub const PREDICT: &str = "predict";
    pub const CLASSIFY: &str = "classify";
    pub const REGRESS: &str = "regress";
    pub const MULTI_INFERENCE: &str = "multi_inference";
    pub const METADATA: &str = "metadata";
    pub const STATUS: &str = "status";
    pub const RELOAD_CONFIG: &str = "reload_config";
}

/// Serves the gRPC API on `listener` until `shutdown` completes; requests in
/// flight then finish. An error means the transport itself failed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ApiState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let max = state.options.grpc_max_message_bytes;
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let prediction = PredictionServiceServer::new(PredictionApi {
        state: Arc::clone(&state),
    })
    .max_decoding_message_size(max)
    .max_encoding_message_size(max);
    let model = ModelServiceServer::new(ModelApi { state })
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    tonic::transport::Server::builder()
        .add_service(TooLargeIsResourceExhausted(prediction))
        .add_service(TooLargeIsResourceExhausted(model))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| Status::unavailable(format!("the gRPC API failed: {e}")))
}

/// A generated service whose "message too large" answers carry gRPC's own code
/// for them, `RESOURCE_EXHAUSTED` (what TensorFlow Serving's gRPC server and
/// every gRPC client library send), where tonic sends `OUT_OF_RANGE`.
#[derive(Clone)]
struct TooLargeIsResourceExhausted<S>(S);

impl<S: NamedService> NamedService for TooLargeIsResourceExhausted<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for TooLargeIsResourceExhausted<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<http::Response<Body>, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let answer = self.0.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            // A request over the limit is refused before the handler runs, with
            // the status in the response's headers.
            if let Some(s) = tonic::Status::from_header_map(response.headers()) {
                if s.code() == tonic::Code::OutOfRange
                    && s.message().contains("message length too large")
                {
                    let mut headers = http::HeaderMap::new();
                    if tonic::Status::resource_exhausted(s.message())
                        .add_header(&mut headers)
                        .is_ok()
                    {
                        for (name, value) in &headers {
                            response.headers_mut().insert(name, value.clone());
                        }
                    }
                }
            }
            Ok(response)
        })
    }
}

/// `tensorflow.serving.PredictionService` over the server's models.
struct PredictionApi {
    state: Arc<ApiState>,
}

/// `tensorflow.serving.ModelService` over the server's models.
struct ModelApi {
    state: Arc<ApiState>,
}

type GrpcResult<T> = std::result::Result<tonic::Response<T>, tonic::Status>;

/// What a handler returns: the model's name for the metrics (`""` until the
/// model was found) and the outcome.
type Outcome<T> = (String, Result<T>);

/// Every handler's envelope: times `work`, records the request and turns its
/// outcome into the gRPC answer. A response larger than the message limit is
/// refused here, as `RESOURCE_EXHAUSTED` (gRPC's code for it; tonic would fail
/// the call mid-stream with `OUT_OF_RANGE`).
async fn handle<T: prost::Message>(
    state: &ApiState,
    api: &'static str,
    work: impl Future<Output = Outcome<T>>,
) -> GrpcResult<T> {
    let start = Instant::now();
    let (model, result) = work.await;
    let limit = state.options.grpc_max_message_bytes;
    let result = result.and_then(|r| match r.encoded_len() {
        n if n > limit => Err(Status::resource_exhausted(format!(
            "the response ({n} bytes) is larger than the gRPC message limit ({limit} bytes)"
        ))),
        _ => Ok(r),
    });
    state.metrics.request(
        &model,
        api,
        Entrypoint::Grpc,
        result.as_ref().err().map(Status::code),
        start.elapsed(),
    );
    match result {
        Ok(r) => Ok(tonic::Response::new(r)),
        Err(e) => {
            tracing::debug!(api, model = %model, error = %e, "gRPC request failed");
            Err(api::status_to_grpc(&e))
        }
    }
}

/// Runs `work` (a handler that runs a model) on a task of its own, so that a
/// panic in it answers `INTERNAL` instead of tearing down the connection.
async fn isolated<T: Send + 'static>(
    work: impl Future<Output = Outcome<T>> + Send + 'static,
) -> Outcome<T> {
    match tokio::spawn(work).await {
        Ok(outcome) => outcome,
        Err(e) => (
            String::new(),
            Err(Status::internal(format!(
                "the request's handler failed: {e}"
            ))),
        ),
    }
}

/// The most bytes one request tensor may decode to; see the module docs.
fn tensor_limit(state: &ApiState) -> usize {
    state.options.grpc_max_message_bytes.saturating_mul(4)
}

#[tonic::async_trait]
impl PredictionService for PredictionApi {
    async fn predict(
        &self,
        request: tonic::Request<PredictRequest>,
    ) -> GrpcResult<PredictResponse> {
        let work = predict(Arc::clone(&self.state), request.into_inner());
        handle(&self.state, api_label::PREDICT, isolated(work)).await
    }

    async fn classify(
        &self,
        request: tonic::Request<ClassificationRequest>,
    ) -> GrpcResult<ClassificationResponse> {
        let work = classify(Arc::clone(&self.state), request.into_inner());
        handle(&self.state, api_label::CLASSIFY, isolated(work)).await
    }

    async fn regress(
        &self,
        request: tonic::Request<RegressionRequest>,
    ) -> GrpcResult<RegressionResponse> {
        let work = regress(Arc::clone(&self.state), request.into_inner());
        handle(&self.state, api_label::REGRESS, isolated(work)).await
    }

    async fn multi_inference(
        &self,
        request: tonic::Request<MultiInferenceRequest>,
    ) -> GrpcResult<MultiInferenceResponse> {
        let work = multi_inference(Arc::clone(&self.state), request.into_inner());
        handle(&self.state, api_label::MULTI_INFERENCE, isolated(work)).await
    }

    async fn get_model_metadata(
        &self,
        request: tonic::Request<GetModelMetadataRequest>,
    ) -> GrpcResult<GetModelMetadataResponse> {
        let work = async { metadata(&self.state, &request.into_inner()) };
        handle(&self.state, api_label::METADATA, work).await
    }
}

#[tonic::async_trait]
impl ModelService for ModelApi {
    async fn get_model_status(
        &self,
        request: tonic::Request<GetModelStatusRequest>,
    ) -> GrpcResult<GetModelStatusResponse> {
        let work = async { model_status(&self.state, &request.into_inner()) };
        handle(&self.state, api_label::STATUS, work).await
    }

    async fn handle_reload_config_request(
        &self,
        request: tonic::Request<ReloadConfigRequest>,
    ) -> GrpcResult<ReloadConfigResponse> {
        let work = async {
            (
                String::new(),
                reload_config(&self.state, request.into_inner()),
            )
        };
        handle(&self.state, api_label::RELOAD_CONFIG, work).await
    }
}

/// Runs `f` on the servable that `spec` names (with the signature as the
/// request gave it); the outcome carries the model's name once the model was
/// found. A spec that names no model, or a model or version not available, is
/// the outcome's error and `f` does not run.
async fn with_servable<T>(
    state: &ApiState,
    spec: Option<&ModelSpec>,
    f: impl AsyncFnOnce(Arc<Servable>, String) -> Result<T>,
) -> Outcome<T> {
    let found = api::version_request(spec).and_then(|(name, version, signature)| {
        let servable = state.models.get(&name, &version)?;
        Ok((name, servable, signature))
    });
    match found {
        Ok((name, servable, signature)) => (name, f(servable, signature).await),
        Err(e) => (String::new(), Err(e)),
    }
}

/// `Predict` (TensorFlow Serving's `TensorflowPredictor::Predict` and
/// `RunPredict`): the model and version, the signature (`FAILED_PRECONDITION`
/// when the model lacks it), the inputs decoded (`INVALID_ARGUMENT` naming a
/// malformed one), then the servable checks them against the signature and
/// runs it; the response holds the outputs `output_filter` names (every one
/// when it is empty).
async fn predict(state: Arc<ApiState>, request: PredictRequest) -> Outcome<PredictResponse> {
    let spec = request.model_spec.as_ref();
    with_servable(&state, spec, async |servable, signature| {
        let key = servable
            .signature(&signature)
            .map_err(|e| Status::failed_precondition(e.message()))?
            .0
            .to_owned();
        let limit = tensor_limit(&state);
        let mut inputs = Vec::with_capacity(request.inputs.len());
        for (k, p) in request.inputs {
            let t = tensor_from_proto_limited(&p, limit).map_err(|e| {
                Status::invalid_argument(format!("tensor parsing error: {k}: {}", e.message()))
            })?;
            inputs.push((k, t));
        }
        let prediction = servable
            .predict(&key, inputs, &request.output_filter)
            .await?;
        Ok(PredictResponse {
            model_spec: Some(api::model_spec(&servable, &prediction.signature)),
            outputs: prediction
                .outputs
                .iter()
                .map(|(k, t)| (k.clone(), tensor_to_proto(t)))
                .collect(),
        })
    })
    .await
}

/// `Classify` (TensorFlow Serving's `TensorflowClassificationServiceImpl`).
async fn classify(
    state: Arc<ApiState>,
    request: ClassificationRequest,
) -> Outcome<ClassificationResponse> {
    let spec = request.model_spec.as_ref();
    let input = request.input.unwrap_or_default();
    with_servable(&state, spec, async |servable, signature| {
        let (key, result) = servable.classify(&signature, &input).await?;
        Ok(ClassificationResponse {
            model_spec: Some(api::model_spec(&servable, &key)),
            result: Some(result),
        })
    })
    .await
}

/// `Regress` (TensorFlow Serving's `TensorflowRegressionServiceImpl`).
async fn regress(state: Arc<ApiState>, request: RegressionRequest) -> Outcome<RegressionResponse> {
    let spec = request.model_spec.as_ref();
    let input = request.input.unwrap_or_default();
    with_servable(&state, spec, async |servable, signature| {
        let (key, result) = servable.regress(&signature, &input).await?;
        Ok(RegressionResponse {
            model_spec: Some(api::model_spec(&servable, &key)),
            result: Some(result),
        })
    })
    .await
}

/// `MultiInference` (TensorFlow Serving's `RunMultiInferenceWithServerCore`
/// and `TensorFlowMultiInferenceRunner::Infer`), with its checks and messages:
/// the version is the first task's, every task names the same model, no
/// signature twice, each one the model has, each task `classify` or
/// `regress`. Where TensorFlow Serving runs the union of the tasks' outputs in
/// one session run, each task here is its own classify or regress call on the
/// shared input (the same answers, one run per task).
async fn multi_inference(
    state: Arc<ApiState>,
    request: MultiInferenceRequest,
) -> Outcome<MultiInferenceResponse> {
    let no_spec = ModelSpec::default();
    let first = request
        .tasks
        .first()
        .and_then(|t| t.model_spec.as_ref())
        .unwrap_or(&no_spec);
    with_servable(&state, Some(first), async |servable, _| {
        enum Method {
            Classify,
            Regress,
        }
        let mut tasks: Vec<(String, Method)> = Vec::with_capacity(request.tasks.len());
        for task in &request.tasks {
            let spec = task.model_spec.as_ref().unwrap_or(&no_spec);
            if spec.name.is_empty() {
                return Err(Status::invalid_argument(
                    "Found ModelSpec with an empty model name.",
                ));
            }
            if spec.name != first.name {
                return Err(Status::invalid_argument(
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name.",
                ));
            }
            let key = if spec.signature_name.is_empty() {
                DEFAULT_SERVING_SIGNATURE_DEF_KEY
            } else {
                spec.signature_name.as_str()
            };
            if tasks.iter().any(|(k, _)| k == key) {
                return Err(Status::invalid_argument(format!(
                    "Duplicate evaluation of signature: {key}"
                )));
            }
            if servable.signature(key).is_err() {
                return Err(Status::invalid_argument(format!(
                    "Requested signature not found in model graph: {key}"
                )));
            }
            let method = match task.method_name.as_str() {
                CLASSIFY_METHOD_NAME => Method::Classify,
                REGRESS_METHOD_NAME => Method::Regress,
                other => {
                    return Err(Status::unimplemented(format!(
                        "Unsupported signature method_name: {other}"
                    )))
                }
            };
            tasks.push((key.to_owned(), method));
        }
        let input = request.input.clone().unwrap_or_default();
        let mut results = Vec::with_capacity(tasks.len());
        for (key, method) in &tasks {
            let result = match method {
                Method::Classify => servable
                    .classify(key, &input)
                    .await
                    .map(|(_, r)| inference_result::Result::ClassificationResult(r))?,
                Method::Regress => servable
                    .regress(key, &input)
                    .await
                    .map(|(_, r)| inference_result::Result::RegressionResult(r))?,
            };
            results.push(InferenceResult {
                model_spec: Some(api::model_spec(&servable, key)),
                result: Some(result),
            });
        }
        Ok(MultiInferenceResponse { results })
    })
    .await
}

/// `GetModelMetadata` (TensorFlow Serving's `GetModelMetadataImpl`): the
/// request must name at least one metadata field, each `signature_def`.
fn metadata(
    state: &ApiState,
    request: &GetModelMetadataRequest,
) -> Outcome<GetModelMetadataResponse> {
    let checked = (|| {
        let spec = request
            .model_spec
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("Missing ModelSpec"))?;
        if request.metadata_field.is_empty() {
            return Err(Status::invalid_argument(
                "GetModelMetadataRequest must specify at least one metadata_field",
            ));
        }
        if let Some(f) = request
            .metadata_field
            .iter()
            .find(|f| f.as_str() != api::SIGNATURE_DEF_FIELD)
        {
            return Err(Status::invalid_argument(format!(
                "Metadata field {f} is not supported"
            )));
        }
        let (name, version, _) = api::version_request(Some(spec))?;
        state.models.get(&name, &version).map(|s| (name, s))
    })();
    match checked {
        Ok((name, servable)) => (name, Ok(api::metadata_response(&servable))),
        Err(e) => (String::new(), Err(e)),
    }
}

/// `GetModelStatus` (TensorFlow Serving's `GetModelStatusImpl`): every version
/// of the model the manager knows, or the one `version` names; a
/// `version_label` is ignored, as there.
fn model_status(
    state: &ApiState,
    request: &GetModelStatusRequest,
) -> Outcome<GetModelStatusResponse> {
    let Some(spec) = request.model_spec.as_ref() else {
        return (
            String::new(),
            Err(Status::invalid_argument("Missing ModelSpec")),
        );
    };
    let version = match spec.version_choice {
        Some(VersionChoice::Version(v)) => Some(VersionRequest::Specific(v)),
        Some(VersionChoice::VersionLabel(_)) | None => None,
    };
    match state.models.status(&spec.name, version.as_ref()) {
        Ok(statuses) => (
            spec.name.clone(),
            Ok(api::status_response(&spec.name, &statuses)),
        ),
        Err(e) => (String::new(), Err(e)),
    }
}

/// `HandleReloadConfigRequest` (TensorFlow Serving's `ModelServiceImpl`): a
/// `model_config_list` replaces the served models (relative base paths are
/// taken relative to the server's working directory); any other config is
/// `INVALID_ARGUMENT`. The call returns once the new config is in place, not
/// once its models have loaded: `GetModelStatus` shows them load. The
/// response's status is OK (a failure is the call's gRPC status, as there),
/// and each of `metric_names` is answered with an increase of 0: no metric
/// of this server counts per reload.
fn reload_config(state: &ApiState, request: ReloadConfigRequest) -> Result<ReloadConfigResponse> {
    let config = request.config.unwrap_or_default();
    match config.config {
        Some(model_server_config::Config::ModelConfigList(_)) => {}
        _ => {
            return Err(Status::invalid_argument(
                "ServerModelConfig type not supported by HandleReloadConfigRequest. \
                 Only ModelConfigList is currently supported",
            ))
        }
    }
    let models = crate::config::model_configs(&config, Path::new("."))?;
    tracing::info!(
        models = ?models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
        "reloading the model config"
    );
    state.reload(models)?;
    Ok(ReloadConfigResponse {
        status: Some(api::status_proto(None)),
        metric: request
            .metric_names
            .into_iter()
            .map(|name| Metric {
                name,
                value_increase: Some(metric::ValueIncrease::Int64ValueIncrease(0)),
            })
            .collect(),
    })
}
