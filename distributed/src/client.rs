//! The client of a cluster's master: a [`Session`] whose master is a server's
//! `MasterService` (TensorFlow's `GrpcSession`), opened with
//! [`Connect::connect`]`("grpc://host:port", graph, options)`. It is the handle
//! users know: `run`, `run_with` (timeouts, tracing), `run_async`, `extend`,
//! `close`, `list_devices`.
//!
//! Every call carries a bound: a step by its `RunOptions` timeout (or the
//! session's default), control calls by [`ClientOptions::rpc_timeout`]. `close`
//! tells the master without waiting longer than that bound, so it never blocks on
//! a dead peer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actors::{RunArgs, RunOutput, Session, SessionBackend, SessionOptions, TraceLevel};
use graph::import::graph_def_to_tf_proto;
use graph::{GraphDef, Result, Status};
use proto::tensorflow as pb;
use proto::tensorflow::master_service_client::MasterServiceClient;
use rendezvous::{completion, CompletionReceiver};
use tonic::transport::Channel;

use crate::peers::{block_on, bounded, channel, PeerOptions};
use crate::wire;

/// How a client reaches its master.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// The most a control call (`CreateSession`, `ExtendSession`, `CloseSession`,
    /// `ListDevices`) may take.
    pub rpc_timeout: Duration,
    /// Connection settings.
    pub peer: PeerOptions,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            rpc_timeout: Duration::from_secs(30),
            peer: PeerOptions::default(),
        }
    }
}

/// The tokio runtime that drives every client of this process (two threads,
/// started on first use).
fn client_runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("actorflow-grpc-client")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| Status::resource_exhausted(format!("cannot start the RPC runtime: {e}")))
}

/// Runs `f` on the client runtime and waits for it.
fn call<T: Send + 'static>(
    f: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    block_on(client_runtime()?.handle(), f)
}

/// A session on a remote master; see the module docs.
pub struct GrpcSession {
    target: String,
    client: MasterServiceClient<Channel>,
    handle: String,
    options: SessionOptions,
    client_options: ClientOptions,
    closed: AtomicBool,
}

/// The `host:port` of a `grpc://host:port` target.
fn address(target: &str) -> Result<&str> {
    target.strip_prefix("grpc://").ok_or_else(|| {
        Status::invalid_argument(format!(
            "unsupported target '{target}': expected grpc://host:port"
        ))
    })
}

impl GrpcSession {
    /// Opens a session holding `graph` on the master at `target`.
    pub fn create(
        target: &str,
        graph: &GraphDef,
        options: SessionOptions,
        client_options: ClientOptions,
    ) -> Result<GrpcSession> {
        let addr = address(target)?;
        let rt = client_runtime()?;
        let client = MasterServiceClient::new(channel(addr, &client_options.peer, rt.handle())?)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let req = pb::CreateSessionRequest {
            graph_def: Some(graph_def_to_tf_proto(graph)),
            config: Some(pb::ConfigProto {
                allow_soft_placement: options.allow_soft_placement,
                operation_timeout_in_ms: options
                    .default_timeout
                    .map_or(0, |d| d.as_millis().min(i64::MAX as u128) as i64),
                graph_options: Some(pb::GraphOptions {
                    enable_bfloat16_sendrecv: options.enable_bfloat16_sendrecv,
                    enable_recv_scheduling: options.enable_recv_scheduling,
                    ..crate::wire::graph_options_of(&options.optimizer, &options.rewrite_options)
                }),
                ..Default::default()
            }),
            target: target.to_owned(),
        };
        let mut c = client.clone();
        let d = client_options.rpc_timeout;
        let t = target.to_owned();
        let resp =
            call(async move { bounded(d, "CreateSession", &t, c.create_session(req)).await })?;
        Ok(GrpcSession {
            target: target.to_owned(),
            client,
            handle: resp.session_handle,
            options,
            client_options,
            closed: AtomicBool::new(false),
        })
    }

    /// The master's handle of the session.
    pub fn handle(&self) -> &str {
        &self.handle
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Status::cancelled("Session has been closed."));
        }
        Ok(())
    }

    /// One `RunStep`: a whole step, or a call of the partial run `partial`.
    fn step(
        &self,
        request: RunArgs,
        partial: Option<String>,
    ) -> CompletionReceiver<Result<RunOutput>> {
        let (tx, rx) = completion();
        if let Err(e) = self.check_open() {
            tx.complete(Err(e));
            return rx;
        }
        let rt = match client_runtime() {
            Ok(rt) => rt,
            Err(e) => {
                tx.complete(Err(e));
                return rx;
            }
        };
        let traced = request.options.trace_level == TraceLevel::FullTrace;
        let mut req = self.step_request(&request);
        req.partial_run_handle = partial.unwrap_or_default();
        let timeout = request.options.timeout.or(self.options.default_timeout);
        let mut c = self.client.clone();
        let t = self.target.clone();
        rt.spawn(async move {
            let f = c.run_step(req);
            // The master enforces the step's deadline; the client's own bound is a
            // little longer, for a master that cannot answer at all.
            let r = match timeout {
                Some(d) => bounded(d + Duration::from_secs(5), "RunStep", &t, f).await,
                None => f
                    .await
                    .map(|r| r.into_inner())
                    .map_err(|s| wire::from_grpc(&s, &t)),
            };
            tx.complete(r.and_then(|r| output_of(r, traced)));
        });
        rx
    }

    fn step_request(&self, r: &RunArgs) -> pb::RunStepRequest {
        let timeout = r.options.timeout.or(self.options.default_timeout);
        pb::RunStepRequest {
            session_handle: self.handle.clone(),
            feed: r.feeds.iter().map(|(n, t)| wire::named(n, t)).collect(),
            fetch: r.fetches.clone(),
            target: r.targets.clone(),
            options: Some(pb::RunOptions {
                trace_level: if r.options.trace_level == TraceLevel::FullTrace {
                    pb::run_options::TraceLevel::FullTrace as i32
                } else {
                    0
                },
                timeout_in_ms: timeout
                    .map_or(0, |d| d.as_millis().clamp(1, i64::MAX as u128) as i64),
                // A traced step's partitions pair its transfers in a trace.
                output_partition_graphs: r.options.trace_level == TraceLevel::FullTrace,
                ..Default::default()
            }),
            store_errors_in_response_body: true,
            ..Default::default()
        }
    }
}

fn output_of(r: pb::RunStepResponse, traced: bool) -> Result<RunOutput> {
    if r.status_code != 0 {
        return Err(wire::status_from_wire(
            r.status_code,
            &r.status_error_message,
        ));
    }
    let outputs = r
        .tensor
        .iter()
        .map(|n| wire::tensor_of(n.tensor.as_ref(), &n.name))
        .collect::<Result<Vec<_>>>()?;
    let metadata = traced.then(|| actors::RunMetadata {
        step_stats: r
            .metadata
            .as_ref()
            .and_then(|m| m.step_stats.as_ref())
            .map(crate::stats::step_stats_from_proto)
            .unwrap_or_default(),
        partition_graphs: r
            .metadata
            .as_ref()
            .map(|m| m.partition_graphs.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|g| {
                graph::import::graph_def_from_tf_proto(g, &graph::import::ImportOptions::default())
                    .ok()
            })
            .map(|g| {
                // A task's piece: its nodes name their devices.
                let device = g.node.first().map(|n| n.device.clone()).unwrap_or_default();
                (device, g)
            })
            .collect(),
    });
    Ok(RunOutput { outputs, metadata })
}

impl SessionBackend for GrpcSession {
    fn extend(&self, graph: &GraphDef) -> Result<()> {
        self.check_open()?;
        let req = pb::ExtendSessionRequest {
            session_handle: self.handle.clone(),
            graph_def: Some(graph_def_to_tf_proto(graph)),
            current_graph_version: 0,
        };
        let mut c = self.client.clone();
        let d = self.client_options.rpc_timeout;
        let t = self.target.clone();
        call(async move { bounded(d, "ExtendSession", &t, c.extend_session(req)).await })
            .map(|_| ())
    }

    fn run(&self, request: RunArgs) -> CompletionReceiver<Result<RunOutput>> {
        self.step(request, None)
    }

    fn partial_run_setup(
        &self,
        feeds: &[String],
        fetches: &[String],
        targets: &[String],
    ) -> CompletionReceiver<Result<String>> {
        let (tx, rx) = completion();
        let rt = match self.check_open().and_then(|_| client_runtime()) {
            Ok(rt) => rt,
            Err(e) => {
                tx.complete(Err(e));
                return rx;
            }
        };
        let req = pb::PartialRunSetupRequest {
            session_handle: self.handle.clone(),
            feed: feeds.to_vec(),
            fetch: fetches.to_vec(),
            target: targets.to_vec(),
            ..Default::default()
        };
        let mut c = self.client.clone();
        let d = self.client_options.rpc_timeout;
        let t = self.target.clone();
        rt.spawn(async move {
            let r = bounded(d, "PartialRunSetup", &t, c.partial_run_setup(req)).await;
            tx.complete(r.map(|r| r.partial_run_handle));
        });
        rx
    }

    fn partial_run(&self, handle: &str, request: RunArgs) -> CompletionReceiver<Result<RunOutput>> {
        self.step(request, Some(handle.to_owned()))
    }

    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let req = pb::CloseSessionRequest {
            session_handle: self.handle.clone(),
        };
        let mut c = self.client.clone();
        let d = self.client_options.rpc_timeout;
        let t = self.target.clone();
        call(async move { bounded(d, "CloseSession", &t, c.close_session(req)).await }).map(|_| ())
    }

    fn list_devices(&self) -> Result<Vec<String>> {
        self.check_open()?;
        let req = pb::ListDevicesRequest {
            session_handle: self.handle.clone(),
        };
        let mut c = self.client.clone();
        let d = self.client_options.rpc_timeout;
        let t = self.target.clone();
        let r = call(async move { bounded(d, "ListDevices", &t, c.list_devices(req)).await })?;
        Ok(r.local_device
            .into_iter()
            .chain(r.remote_device)
            .map(|d| d.name)
            .collect())
    }
}

impl Drop for GrpcSession {
    fn drop(&mut self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            // Told without waiting: dropping a session never blocks.
            if let Ok(rt) = client_runtime() {
                let req = pb::CloseSessionRequest {
                    session_handle: self.handle.clone(),
                };
                let mut c = self.client.clone();
                let d = self.client_options.rpc_timeout;
                rt.spawn(async move {
                    let _ = tokio::time::timeout(d, c.close_session(req)).await;
                });
            }
        }
    }
}

/// Opens sessions on a cluster's master: `Session::connect("grpc://host:port",
/// &graph, options)`.
pub trait Connect: Sized {
    /// A session holding `graph` on the master at `target` (`grpc://host:port`).
    fn connect(target: &str, graph: &GraphDef, options: SessionOptions) -> Result<Self>;

    /// [`Connect::connect`] with explicit RPC bounds.
    fn connect_with(
        target: &str,
        graph: &GraphDef,
        options: SessionOptions,
        client: ClientOptions,
    ) -> Result<Self>;
}

impl Connect for Session {
    fn connect(target: &str, graph: &GraphDef, options: SessionOptions) -> Result<Session> {
        Session::connect_with(target, graph, options, ClientOptions::default())
    }

    fn connect_with(
        target: &str,
        graph: &GraphDef,
        options: SessionOptions,
        client: ClientOptions,
    ) -> Result<Session> {
        let s = GrpcSession::create(target, graph, options, client)?;
        Ok(Session::from_backend(Arc::new(s)))
    }
}
