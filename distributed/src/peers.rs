//! [`Peers`]: gRPC clients of a cluster's workers, one channel per task, made on
//! first use and shared (TensorFlow's `WorkerCache`). Channels connect lazily and
//! reconnect by themselves; every call carries a deadline, so a dead or frozen peer
//! is an error within a bound, never a hang.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use graph::{Result, Status};
use proto::tensorflow::worker_service_client::WorkerServiceClient;
use tonic::transport::{Channel, Endpoint};

use crate::cluster::{ClusterSpec, TaskName};
use crate::wire;

/// A worker's gRPC client.
pub type WorkerClient = WorkerServiceClient<Channel>;

/// How peers are reached.
#[derive(Clone, Debug)]
pub struct PeerOptions {
    /// The most a connection attempt may take.
    pub connect_timeout: Duration,
    /// How often a connection pings its peer (HTTP/2 keepalive), busy or idle.
    pub keepalive_interval: Duration,
    /// How long a ping may go unanswered before the connection is declared dead
    /// and every call on it fails with `Unavailable`: a frozen or partitioned
    /// peer is detected within `keepalive_interval + keepalive_timeout`.
    pub keepalive_timeout: Duration,
    /// Mutual TLS on every connection (`None`: plaintext, as TensorFlow's).
    pub tls: Option<crate::tls::Tls>,
}

impl Default for PeerOptions {
    fn default() -> PeerOptions {
        PeerOptions {
            connect_timeout: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(2),
            keepalive_timeout: Duration::from_secs(5),
            tls: None,
        }
    }
}

/// HTTP/2 flow-control windows: large enough that a big tensor streams at memory
/// speed instead of waiting for window updates every 64 KiB (the protocol's
/// default).
pub const STREAM_WINDOW: u32 = 32 << 20;
/// The connection-level window (several streams in flight).
pub const CONNECTION_WINDOW: u32 = 64 << 20;
/// The largest HTTP/2 frame.
pub const MAX_FRAME: u32 = (1 << 24) - 1;

/// The clients of a cluster's workers; see the module docs.
pub struct Peers {
    cluster: ClusterSpec,
    options: PeerOptions,
    runtime: tokio::runtime::Handle,
    channels: Mutex<HashMap<TaskName, Channel>>,
}

/// The channel to `addr` (`host:port`), connecting on first use.
pub fn channel(
    addr: &str,
    options: &PeerOptions,
    runtime: &tokio::runtime::Handle,
) -> Result<Channel> {
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut ep = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| Status::invalid_argument(format!("invalid address '{addr}': {e}")))?
        .connect_timeout(options.connect_timeout)
        .http2_keep_alive_interval(options.keepalive_interval)
        .keep_alive_timeout(options.keepalive_timeout)
        .keep_alive_while_idle(true)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .tcp_nodelay(true);
    if let Some(tls) = &options.tls {
        ep = ep
            .tls_config(tls.client())
            .map_err(crate::tls::setup_error)?;
    }
    let _enter = runtime.enter();
    Ok(ep.connect_lazy())
}

impl Peers {
    /// The clients of `cluster`'s tasks, driven by `runtime`.
    pub fn new(
        cluster: ClusterSpec,
        options: PeerOptions,
        runtime: tokio::runtime::Handle,
    ) -> Peers {
        Peers {
            cluster,
            options,
            runtime,
            channels: Mutex::new(HashMap::new()),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &ClusterSpec {
        &self.cluster
    }

    /// The tokio runtime the clients run on.
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// The channel to `task` (one per task, shared by every call).
    pub fn channel(&self, task: &TaskName) -> Result<Channel> {
        let mut m = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = m.get(task) {
            return Ok(c.clone());
        }
        let c = channel(self.cluster.address(task)?, &self.options, &self.runtime)?;
        m.insert(task.clone(), c.clone());
        Ok(c)
    }

    /// The client of `task`.
    pub fn client(&self, task: &TaskName) -> Result<WorkerClient> {
        Ok(WorkerServiceClient::new(self.channel(task)?)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX))
    }

    /// Forgets `task`'s client (after a transport failure: the next call
    /// reconnects from scratch).
    pub fn forget(&self, task: &TaskName) {
        self.channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task);
    }
}

/// Awaits the RPC `f` to `peer` for at most `d`: its answer, its error (see
/// [`wire::from_grpc`]), or `Unavailable` saying which call got no answer.
pub async fn bounded<T>(
    d: Duration,
    what: &str,
    peer: &str,
    f: impl std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    match tokio::time::timeout(d, f).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(wire::from_grpc(&s, peer)),
        Err(_) => Err(Status::unavailable(format!(
            "{what} to {peer} got no answer within {d:?}"
        ))),
    }
}

/// Runs `f` on `runtime` and waits for it, from a thread outside that runtime
/// (the session actor, a client's caller).
pub fn block_on<T: Send + 'static>(
    runtime: &tokio::runtime::Handle,
    f: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = rendezvous::completion();
    runtime.spawn(async move { tx.complete(f.await) });
    rx.wait()
        .unwrap_or_else(|| Err(Status::cancelled("the RPC runtime stopped")))
}
