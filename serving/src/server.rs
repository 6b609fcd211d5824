//! [`ModelServer`]: the source, the manager, the load threads, and the REST and
//! gRPC front ends on one tokio runtime, started together and stopped together.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use graph::{Result, Status};

use crate::config::{ModelConfig, ServerOptions};
use crate::manager::{Loader, Manager, ManagerMsg, Models};
use crate::metrics::Metrics;
use crate::servable::Servable;
use crate::source::Source;

/// What the front ends share: the models, the metrics, the options, and the
/// way to replace the model config (`ModelService/HandleReloadConfigRequest`).
pub struct ApiState {
    /// The models serving.
    pub models: Models,
    /// The server's metrics.
    pub metrics: Arc<Metrics>,
    /// The server's options.
    pub options: ServerOptions,
    reload: Box<dyn Fn(Vec<ModelConfig>) -> Result<()> + Send + Sync>,
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiState")
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

impl ApiState {
    /// Serves `models` from now on: new models load, models left out unload,
    /// versions and labels follow the new configs.
    pub fn reload(&self, models: Vec<ModelConfig>) -> Result<()> {
        (self.reload)(models)
    }
}

/// A running model server; see the module docs. Dropping it stops it.
pub struct ModelServer {
    grpc_addr: SocketAddr,
    rest_addr: Option<SocketAddr>,
    state: Arc<ApiState>,
    source: Arc<Mutex<Source>>,
    manager: Manager,
    tokio: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer")
            .field("grpc_addr", &self.grpc_addr)
            .field("rest_addr", &self.rest_addr)
            .finish_non_exhaustive()
    }
}

impl ModelServer {
    /// Binds the ports, starts loading the configured models and serves. The
    /// models load in the background: [`ModelServer::wait_until_available`]
    /// waits for them.
    pub fn start(options: ServerOptions) -> Result<ModelServer> {
        for m in &options.models {
            if options.models.iter().filter(|o| o.name == m.name).count() > 1 {
                return Err(Status::invalid_argument(format!(
                    "model '{}' is configured twice",
                    m.name
                )));
            }
        }
        if let Some(b) = &options.batching {
            b.validate()?;
        }
        let metrics = Arc::new(Metrics::new());
        let loader: Loader = {
            let session = options.session.clone();
            let batching = options.batching.clone();
            let warmup = options.enable_model_warmup;
            let metrics = Arc::clone(&metrics);
            Arc::new(move |id, dir| {
                let s = Servable::load(
                    id.clone(),
                    dir,
                    session.clone(),
                    batching.as_ref(),
                    Some(Arc::clone(&metrics)),
                )?;
                if warmup {
                    crate::warmup::warm_up(&s, dir)?;
                }
                Ok(s)
            })
        };
        let manager = Manager::start(loader, options.num_load_threads, Some(Arc::clone(&metrics)))?;
        manager.send(ManagerMsg::Configure(configure_msg(&options.models)));
        let source = Arc::new(Mutex::new(Source::start(
            options.models.clone(),
            options.poll_wait,
            manager.sender(),
        )?));
        let reload = {
            let source = Arc::clone(&source);
            let tx = manager.sender();
            let serving = manager.models().clone();
            let allow_unavailable = options.allow_version_labels_for_unavailable_models;
            Box::new(move |models: Vec<ModelConfig>| -> Result<()> {
                let mut names = std::collections::BTreeSet::new();
                for m in &models {
                    if !names.insert(m.name.as_str()) {
                        return Err(Status::invalid_argument(format!(
                            "model '{}' is configured twice",
                            m.name
                        )));
                    }
                    if !allow_unavailable {
                        check_labels(&serving, m)?;
                    }
                }
                tx.send(ManagerMsg::Configure(configure_msg(&models)))
                    .map_err(|_| Status::unavailable("the server is stopping"))?;
                source
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .configure(models);
                Ok(())
            })
        };
        let state = Arc::new(ApiState {
            models: manager.models().clone(),
            metrics,
            options: options.clone(),
            reload,
        });
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(2)
                    .max(2),
            )
            .thread_name("actorflow-serve-api")
            .enable_all()
            .build()
            .map_err(|e| {
                Status::resource_exhausted(format!("cannot start the API runtime: {e}"))
            })?;
        let bind = |port: u16, what: &str| -> Result<tokio::net::TcpListener> {
            let addr = SocketAddr::new(options.host, port);
            let l = std::net::TcpListener::bind(addr)
                .map_err(|e| Status::unavailable(format!("{what} cannot listen on {addr}: {e}")))?;
            l.set_nonblocking(true)
                .map_err(|e| Status::internal(format!("listener: {e}")))?;
            let _e = tokio.enter();
            tokio::net::TcpListener::from_std(l)
                .map_err(|e| Status::internal(format!("listener: {e}")))
        };
        let grpc_listener = bind(options.grpc_port, "the gRPC API")?;
        let grpc_addr = grpc_listener
            .local_addr()
            .map_err(|e| Status::internal(format!("listener address: {e}")))?;
        let rest_listener = options
            .rest_api_port
            .map(|p| bind(p, "the REST API"))
            .transpose()?;
        let rest_addr = rest_listener
            .as_ref()
            .map(|l| l.local_addr())
            .transpose()
            .map_err(|e| Status::internal(format!("listener address: {e}")))?;
        let (shutdown, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        {
            let state = Arc::clone(&state);
            let mut rx = stop_rx.clone();
            tasks.push(tokio.spawn(async move {
                let stop = async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                if let Err(e) = crate::grpc::serve(grpc_listener, state, stop).await {
                    tracing::error!("the gRPC API stopped: {e}");
                }
            }));
        }
        if let Some(l) = rest_listener {
            let state = Arc::clone(&state);
            let mut rx = stop_rx.clone();
            tasks.push(tokio.spawn(async move {
                let stop = async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                if let Err(e) = crate::rest::serve(l, state, stop).await {
                    tracing::error!("the REST API stopped: {e}");
                }
            }));
        }
        tracing::info!(%grpc_addr, rest_addr = ?rest_addr, "model server started");
        Ok(ModelServer {
            grpc_addr,
            rest_addr,
            state,
            source,
            manager,
            tokio: Some(tokio),
            shutdown: Some(shutdown),
            tasks,
        })
    }

    /// The gRPC API's address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The REST API's address, when it serves one.
    pub fn rest_addr(&self) -> Option<SocketAddr> {
        self.rest_addr
    }

    /// The models serving.
    pub fn models(&self) -> &Models {
        &self.state.models
    }

    /// The server's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.state.metrics
    }

    /// What the front ends share.
    pub fn state(&self) -> &Arc<ApiState> {
        &self.state
    }

    /// Serves `models` from now on; see [`ApiState::reload`].
    pub fn reload(&self, models: Vec<ModelConfig>) -> Result<()> {
        self.state.reload(models)
    }

    /// Waits until every configured model has a version available;
    /// `DeadlineExceeded` after `timeout`, naming the models and their states.
    pub fn wait_until_available(&self, timeout: Duration) -> Result<()> {
        let names: Vec<String> = self
            .state
            .options
            .models
            .iter()
            .map(|m| m.name.clone())
            .collect();
        self.state.models.wait_for(timeout, |m| {
            names.iter().all(|n| !m.available_versions(n).is_empty())
        })
    }

    /// Blocks until the process receives SIGINT or SIGTERM; `ready` runs once
    /// the handlers are in place.
    pub fn wait_for_signal(&self, ready: impl FnOnce()) -> Result<()> {
        let rt = self
            .tokio
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("the server has stopped"))?;
        actors::runtime::wait_for_signal(rt, ready)
    }

    /// Stops serving: the APIs close (requests in flight get 5 s to finish), the
    /// source stops polling, every version unloads.
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        if let Some(rt) = self.tokio.take() {
            let tasks = std::mem::take(&mut self.tasks);
            rt.block_on(async {
                for t in tasks {
                    let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
                }
            });
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        self.source.lock().unwrap_or_else(|e| e.into_inner()).stop();
        self.manager.stop();
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// As TensorFlow Serving checks a reloaded config: a label of a model that
/// serves may only name a version of it that is available now (a model not
/// serving yet may name any).
fn check_labels(serving: &Models, m: &ModelConfig) -> Result<()> {
    let available = serving.available_versions(&m.name);
    if available.is_empty() {
        return Ok(());
    }
    for (label, version) in &m.labels {
        if !available.contains(version) {
            return Err(Status::failed_precondition(format!(
                "Request to assign label to version {version} of model {}, which is not \
                 currently available for inference (label '{label}')",
                m.name
            )));
        }
    }
    Ok(())
}

fn configure_msg(models: &[ModelConfig]) -> Vec<(String, std::collections::BTreeMap<String, i64>)> {
    models
        .iter()
        .map(|m| (m.name.clone(), m.labels.clone()))
        .collect()
}
