//! [`Server`]: one process of a cluster, serving TensorFlow's `MasterService` and
//! `WorkerService` on one port (TensorFlow's `GrpcServer`): its devices are
//! `/job:J/replica:0/task:T/device:CPU:k`, it binds the address the cluster spec
//! gives its task, and it stops cleanly (every session closed, every step's table
//! aborted, every thread joined).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actors::{Runtime, RuntimeOptions};
use graph::{Result, Status};
use proto::tensorflow::master_service_server::MasterServiceServer;
use proto::tensorflow::worker_service_server::WorkerServiceServer;
use rendezvous::RendezvousMgr;
use tonic::transport::server::TcpIncoming;

use crate::cluster::{ClusterSpec, TaskName};
use crate::cluster_worker::ClusterOptions;
use crate::master::{MasterServer, MasterState};
use crate::peers::{PeerOptions, Peers};
use crate::remote_rendezvous::RpcTables;
use crate::worker_service::{WorkerServer, WorkerState};

/// How a server is made: [`ServerOptions::new`], then set the fields to change
/// (non-exhaustive, so that options can be added).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions {
    /// The cluster.
    pub cluster: ClusterSpec,
    /// This server's job.
    pub job: String,
    /// This server's task in its job.
    pub task: u32,
    /// CPU devices of this task.
    pub cpu_devices: usize,
    /// The most bytes one tensor may take on this task's devices (`None`: the
    /// machine's memory).
    pub max_allocation_bytes: Option<usize>,
    /// Bounds on the master's calls to workers.
    pub cluster_options: ClusterOptions,
    /// How peers are reached.
    pub peer_options: PeerOptions,
    /// Accept the calls that create state and run graphs (`CreateWorkerSession`,
    /// `RegisterGraph`, `RunGraph`) from any host. Off by default: they must come
    /// from a host of the cluster spec (a master of this cluster), where
    /// TensorFlow's servers run any graph from anyone who connects.
    pub accept_any_master: bool,
}

impl ServerOptions {
    /// A server for `task` of `job` in `cluster`, with one CPU device.
    pub fn new(cluster: ClusterSpec, job: &str, task: u32) -> ServerOptions {
        ServerOptions {
            cluster,
            job: job.to_owned(),
            task,
            cpu_devices: 1,
            max_allocation_bytes: None,
            cluster_options: ClusterOptions::default(),
            peer_options: PeerOptions::default(),
            accept_any_master: false,
        }
    }
}

/// A running server; see the module docs. Dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    task: TaskName,
    runtime: Runtime,
    tokio: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    serving: Option<tokio::task::JoinHandle<()>>,
    master: Arc<MasterState>,
    worker: Arc<WorkerState>,
    tables: Arc<RpcTables>,
}

impl Server {
    /// Starts a server on the address its task has in the cluster spec.
    pub fn start(options: ServerOptions) -> Result<Server> {
        let task = TaskName::new(options.job.clone(), options.task);
        let addr = options.cluster.address(&task)?.to_owned();
        let listener = std::net::TcpListener::bind(&addr)
            .map_err(|e| Status::unavailable(format!("{task} cannot listen on {addr}: {e}")))?;
        Server::start_with_listener(options, listener)
    }

    /// Starts a server on an already bound listener (tests bind every task's port
    /// first, then build the cluster spec from them).
    pub fn start_with_listener(
        options: ServerOptions,
        listener: std::net::TcpListener,
    ) -> Result<Server> {
        let task = TaskName::new(options.job.clone(), options.task);
        options.cluster.address(&task)?;
        let addr = listener
            .local_addr()
            .map_err(|e| Status::internal(format!("listener address: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Status::internal(format!("listener: {e}")))?;
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("actorflow-grpc-{}-{}", options.job, options.task))
            .enable_all()
            .build()
            .map_err(|e| {
                Status::resource_exhausted(format!("cannot start the RPC runtime: {e}"))
            })?;
        let runtime = Runtime::new(
            RuntimeOptions::default()
                .with_cpu_devices(options.cpu_devices)
                .with_job(options.job.clone())
                .with_task(options.task),
        )?;
        let peers = Arc::new(Peers::new(
            options.cluster.clone(),
            options.peer_options.clone(),
            tokio.handle().clone(),
        ));
        let tables = Arc::new(RpcTables::new(
            Arc::new(RendezvousMgr::new()),
            &task,
            Arc::clone(&peers),
        ));
        let allowed = (!options.accept_any_master).then(|| {
            let mut ips: std::collections::HashSet<std::net::IpAddr> = options
                .cluster
                .tasks()
                .iter()
                .filter_map(|t| options.cluster.address(t).ok())
                .filter_map(|a| std::net::ToSocketAddrs::to_socket_addrs(a).ok())
                .flatten()
                .map(|a| a.ip().to_canonical())
                .collect();
            ips.insert(addr.ip().to_canonical());
            ips
        });
        let worker = Arc::new(
            WorkerState::new(
                runtime.clone(),
                task.clone(),
                Arc::clone(&tables),
                options.max_allocation_bytes,
            )
            .with_allowed_masters(allowed),
        );
        let master = Arc::new(MasterState::new(
            runtime.clone(),
            Arc::clone(&worker),
            peers,
            options.cluster_options.clone(),
        ));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let incoming = {
            let _e = tokio.enter();
            let l = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| Status::internal(format!("listener: {e}")))?;
            TcpIncoming::from(l).with_nodelay(Some(true))
        };
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = &options.peer_options.tls {
            builder = builder
                .tls_config(tls.server())
                .map_err(crate::tls::setup_error)?;
        }
        let router = builder
            .http2_keepalive_interval(Some(options.peer_options.keepalive_interval))
            .http2_keepalive_timeout(Some(options.peer_options.keepalive_timeout))
            .initial_stream_window_size(crate::peers::STREAM_WINDOW)
            .initial_connection_window_size(crate::peers::CONNECTION_WINDOW)
            .max_frame_size(crate::peers::MAX_FRAME)
            .add_service(
                MasterServiceServer::new(MasterServer(Arc::clone(&master)))
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX),
            )
            .add_service(crate::tensor_coding::WorkerRoutes::new(
                WorkerServiceServer::new(WorkerServer(Arc::clone(&worker)))
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX),
                Arc::clone(&worker),
            ));
        let t2 = task.clone();
        let serving = tokio.spawn(async move {
            let r = router
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = r {
                tracing::error!(task = %t2, "server stopped: {e}");
            }
        });
        tracing::info!(%task, %addr, "server started");
        Ok(Server {
            addr,
            task,
            runtime,
            tokio: Some(tokio),
            shutdown: Some(tx),
            serving: Some(serving),
            master,
            worker,
            tables,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its target for a client: `grpc://host:port`.
    pub fn target(&self) -> String {
        format!("grpc://{}", self.addr)
    }

    /// Its task.
    pub fn task(&self) -> &TaskName {
        &self.task
    }

    /// Its devices' runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// How many `RecvTensor` calls its worker has served (a tensor that several
    /// consumers on another task need crosses once per step).
    pub fn recv_tensor_calls(&self) -> u64 {
        self.worker.recv_tensor_calls()
    }

    /// The number of steps with a table on this worker (0 when every step was
    /// cleaned up).
    pub fn live_steps(&self) -> usize {
        self.tables.len() + self.tables.local().len()
    }

    /// Blocks until the server stops (another thread's [`Server::stop`], or a
    /// serving error).
    pub fn join(&mut self) {
        if let (Some(rt), Some(s)) = (&self.tokio, self.serving.take()) {
            let _ = rt.block_on(s);
        }
    }

    /// Blocks until the process receives SIGINT (Ctrl-C) or SIGTERM; `ready` runs
    /// once the handlers are in place (a line saying the server listens, printed
    /// there, is never followed by a signal the server misses).
    pub fn wait_for_signal(&self, ready: impl FnOnce()) -> Result<()> {
        let rt = self
            .tokio
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("the server has stopped"))?;
        actors::runtime::wait_for_signal(rt, ready)
    }

    /// Stops serving: sessions are closed, steps aborted, threads joined.
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.master.close_all();
        self.tables.abort_all(Status::unavailable(format!(
            "{} is shutting down",
            self.task
        )));
        if let Some(rt) = self.tokio.take() {
            if let Some(s) = self.serving.take() {
                let _ =
                    rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), s).await });
            }
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        self.runtime.shutdown();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
