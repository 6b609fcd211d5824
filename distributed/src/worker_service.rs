//! The worker half of a server: TensorFlow's `WorkerService` on this process's
//! devices (TensorFlow's `Worker`/`GraphMgr`/`SessionMgr`).
//!
//! - A master opens a worker session (`CreateWorkerSession`) and registers its
//!   task's piece of each step (`RegisterGraph`); the session's [`LocalWorker`]
//!   partitions the piece by device and plans it once.
//! - `RunGraph` runs a registered piece for one step id, with the master's values
//!   for its client-terminated `_Recv`s (`send`) and the keys of the
//!   client-terminated `_Send`s to return (`recv_key`). A master that gives up on
//!   the call (its step failed elsewhere, its deadline passed) cancels it, and the
//!   worker aborts its part of the step.
//! - `RecvTensor` serves a peer's receive from the step's local table, created by
//!   whichever of the `RunGraph` and the `RecvTensor` comes first, and answers when
//!   the `_Send` has run. A key naming another incarnation of a device is
//!   `Aborted` (this worker restarted since the master placed the step).
//! - A partial run (`is_partial`) is one step over several `RunGraph` calls
//!   with the same step id: the first starts it, each delivers its `send`s and
//!   answers once its `recv_key`s have values, and the one marked
//!   `is_last_partial_run` also waits for the step to end.
//! - `CleanupGraph` ends a step here: a peer's receive still waiting fails, and a
//!   later one is refused; a partial run still waiting for feeds fails.
//!
//! Sessions share the devices' default container (variables on a `ps` task are
//! shared by every client, as with TensorFlow) unless the master asks for
//! `isolate_session_state`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use actors::worker::{
    LocalWorker, PartialCall, RegisterGraphRequest, RunGraphRequest, WorkerInterface,
};
use actors::Runtime;
use graph::import::{graph_def_from_tf_proto, ImportOptions};
use graph::{Result, Status};
use proto::tensorflow as pb;
use proto::tensorflow::worker_service_server::WorkerService;
use rendezvous::{ParsedKey, StepTables};
use tonic::{Request, Response};

use crate::cluster::TaskName;
use crate::remote_rendezvous::RpcTables;
use crate::wire;

/// The container every worker session shares unless isolated (TensorFlow's
/// default container name).
pub const SHARED_CONTAINER: &str = "localhost";

/// The worker of a server; see the module docs.
pub struct WorkerState {
    runtime: Runtime,
    task: TaskName,
    tables: Arc<RpcTables>,
    sessions: RwLock<HashMap<String, Arc<LocalWorker>>>,
    /// The session of masters that call no `CreateWorkerSession`.
    legacy: Arc<LocalWorker>,
    devices: Vec<pb::DeviceAttributes>,
    incarnations: HashMap<String, u64>,
    max_allocation_bytes: Option<usize>,
    /// `RecvTensor` calls served.
    recv_tensor_calls: std::sync::atomic::AtomicU64,
    /// The hosts whose masters may create sessions and run graphs (`None`: any).
    allowed_masters: Option<std::collections::HashSet<std::net::IpAddr>>,
}

fn device_attributes(runtime: &Runtime) -> Vec<pb::DeviceAttributes> {
    runtime
        .devices()
        .iter()
        .map(|d| pb::DeviceAttributes {
            name: d.ctx.name.clone(),
            device_type: d.ctx.device_type.clone(),
            memory_limit: i64::try_from(d.ctx.max_allocation_bytes).unwrap_or(i64::MAX),
            incarnation: d.ctx.incarnation,
            physical_device_desc: "device: actorflow CPU".into(),
            ..Default::default()
        })
        .collect()
}

impl WorkerState {
    /// The worker of `runtime`'s devices, the devices of `task`, taking its steps'
    /// tables from `tables`.
    pub fn new(
        runtime: Runtime,
        task: TaskName,
        tables: Arc<RpcTables>,
        max_allocation_bytes: Option<usize>,
    ) -> WorkerState {
        let devices = device_attributes(&runtime);
        let incarnations = devices
            .iter()
            .map(|d| (d.name.clone(), d.incarnation))
            .collect();
        let legacy = Arc::new(
            LocalWorker::new(&runtime, Arc::from(SHARED_CONTAINER), max_allocation_bytes)
                .with_step_tables(Arc::clone(&tables) as Arc<dyn StepTables>)
                .sharing_default_container(),
        );
        WorkerState {
            runtime,
            task,
            tables,
            sessions: RwLock::new(HashMap::new()),
            legacy,
            devices,
            incarnations,
            max_allocation_bytes,
            recv_tensor_calls: std::sync::atomic::AtomicU64::new(0),
            allowed_masters: None,
        }
    }

    /// Only masters on the hosts `ips` (`None`: any host) may create sessions and
    /// register and run graphs.
    pub fn with_allowed_masters(
        mut self,
        ips: Option<std::collections::HashSet<std::net::IpAddr>>,
    ) -> WorkerState {
        self.allowed_masters = ips;
        self
    }

    /// `PermissionDenied` when `from` is not a host of the cluster.
    fn check_master(&self, what: &str, from: Option<std::net::SocketAddr>) -> Result<()> {
        let (Some(allowed), Some(from)) = (&self.allowed_masters, from) else {
            return Ok(());
        };
        if allowed.contains(&from.ip().to_canonical()) {
            return Ok(());
        }
        Err(Status::new(
            graph::Code::PermissionDenied,
            format!(
                "{what} from {from} refused by {}: that host runs no task of this server's cluster (start the server with --accept-any-master to allow it)",
                self.task
            ),
        ))
    }

    /// How many `RecvTensor` calls this worker has served.
    pub fn recv_tensor_calls(&self) -> u64 {
        self.recv_tensor_calls
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// This worker's devices, as `GetStatus` reports them.
    pub fn devices(&self) -> &[pb::DeviceAttributes] {
        &self.devices
    }

    /// The task this worker serves.
    pub fn task(&self) -> &TaskName {
        &self.task
    }

    /// The per-step tables.
    pub fn tables(&self) -> &Arc<RpcTables> {
        &self.tables
    }

    /// Opens a worker session (a master's view of this worker).
    pub fn create_session(&self, handle: &str, isolate: bool) -> Result<Arc<LocalWorker>> {
        if handle.is_empty() {
            return Err(Status::invalid_argument("a worker session needs a handle"));
        }
        let mut sessions = self.sessions.write().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = sessions.get(handle) {
            return Ok(Arc::clone(w));
        }
        let tables = Arc::clone(&self.tables) as Arc<dyn StepTables>;
        let w = if isolate {
            LocalWorker::new(
                &self.runtime,
                Arc::from(format!("__worker_session_{handle}")),
                self.max_allocation_bytes,
            )
            .with_step_tables(tables)
        } else {
            LocalWorker::new(
                &self.runtime,
                Arc::from(SHARED_CONTAINER),
                self.max_allocation_bytes,
            )
            .with_step_tables(tables)
            .sharing_default_container()
        };
        let w = Arc::new(w);
        sessions.insert(handle.to_owned(), Arc::clone(&w));
        Ok(w)
    }

    /// The worker session `handle` (the shared legacy one when the master made
    /// none); `Aborted` for an unknown handle, as TensorFlow answers after a
    /// worker restart.
    pub fn session(&self, handle: &str, created: bool) -> Result<Arc<LocalWorker>> {
        if !created && handle.is_empty() {
            return Ok(Arc::clone(&self.legacy));
        }
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        match sessions.get(handle) {
            Some(w) => Ok(Arc::clone(w)),
            None if !created => Ok(Arc::clone(&self.legacy)),
            None => Err(Status::aborted(format!(
                "Session handle is not found: {handle}. Possibly, this worker (\"{}\") just restarted.",
                self.task
            ))),
        }
    }

    /// Ends a worker session: its pieces are forgotten, its private container (if
    /// any) dropped.
    pub fn delete_session(&self, handle: &str) {
        let w = self
            .sessions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(handle);
        if let Some(w) = w {
            w.cleanup();
        }
    }

    /// Ends a step here (`CleanupGraph`): its table, and a partial run of it in
    /// whichever session runs one.
    pub fn cleanup_step(&self, step_id: u64) {
        self.tables.cleanup(step_id);
        let workers: Vec<Arc<LocalWorker>> = self
            .sessions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .chain([Arc::clone(&self.legacy)])
            .collect();
        for w in workers {
            w.cleanup_step(step_id);
        }
    }

    /// Registers a piece; see the module docs.
    pub fn register_graph(&self, r: &pb::RegisterGraphRequest) -> Result<String> {
        let w = self.session(&r.session_handle, r.create_worker_session_called)?;
        let gd = r
            .graph_def
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("RegisterGraph without a graph_def"))?;
        let graph = graph_def_from_tf_proto(gd, &ImportOptions::default())?;
        let reg = w.register_graph(RegisterGraphRequest {
            graph: graph.into(),
            partition: wire::partition_options_from_proto(r.graph_options.as_ref()),
            ..Default::default()
        })?;
        Ok(reg.handle.to_string())
    }

    /// Runs a registered piece for one step; see the module docs.
    pub async fn run_graph(&self, r: pb::RunGraphRequest) -> Result<pb::RunGraphResponse> {
        let w = self.session(&r.session_handle, r.create_worker_session_called)?;
        let step_id = u64::try_from(r.step_id)
            .map_err(|_| Status::invalid_argument(format!("invalid step id {}", r.step_id)))?;
        let sends = r
            .send
            .iter()
            .map(|n| Ok((n.name.clone(), wire::tensor_of(n.tensor.as_ref(), &n.name)?)))
            .collect::<Result<Vec<_>>>()?;
        let collect_stats = r
            .exec_opts
            .as_ref()
            .is_some_and(|o| o.record_timeline || o.record_costs);
        let rx = w.run_graph(RunGraphRequest {
            handle: Arc::from(r.graph_handle.as_str()),
            step_id,
            sends,
            recv_keys: r.recv_key,
            collect_stats,
            span: Some(tracing::debug_span!("run_graph", step_id, task = %self.task)),
            partial: r.is_partial.then(|| PartialCall {
                last: r.is_last_partial_run,
                ..Default::default()
            }),
            ..Default::default()
        })?;
        // A master that drops the call (it gave up on the step) aborts it here.
        let guard = AbortOnDrop {
            worker: Some(Arc::clone(&w)),
            step_id,
        };
        let result = rx.await;
        let mut guard = guard;
        guard.worker = None;
        let result = result
            .ok_or_else(|| Status::cancelled("the worker stopped before the step finished"))?;
        result.status?;
        let mut resp = pb::RunGraphResponse::default();
        for (key, v) in result.recvs {
            let t = v.ok_or_else(|| {
                Status::invalid_argument(format!("The tensor returned for {key} was not valid."))
            })?;
            resp.recv.push(wire::named(&key, &t));
        }
        if collect_stats {
            resp.step_stats = Some(crate::stats::step_stats_to_proto(&result.stats));
        }
        Ok(resp)
    }

    /// Serves a peer's receive; see the module docs.
    pub async fn recv_tensor(&self, r: &pb::RecvTensorRequest) -> Result<pb::RecvTensorResponse> {
        self.recv_tensor_calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (key, fi) = ParsedKey::parse(&r.rendezvous_key)?;
        match self.incarnations.get(&key.src_device) {
            None => {
                return Err(Status::invalid_argument(format!(
                    "RecvTensor for '{}': {} is not a device of this worker ({})",
                    r.rendezvous_key, key.src_device, self.task
                )))
            }
            Some(&inc) if inc != key.src_incarnation => {
                return Err(Status::aborted(format!(
                    "RecvTensor expects a different device incarnation: {:016x} vs. {inc:016x}. Your worker job (\"{}\") was probably restarted. Check your worker job for the reason why it was restarted.",
                    key.src_incarnation, self.task
                )))
            }
            Some(_) => {}
        }
        let step_id = u64::try_from(r.step_id)
            .map_err(|_| Status::invalid_argument(format!("invalid step id {}", r.step_id)))?;
        let table = self.tables.local().find_or_create(step_id)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut tx = Some(tx);
        let got = rendezvous::Rendezvous::recv(&*table, &key, fi, &mut || {
            let tx = tx.take();
            Box::new(move |v| {
                if let Some(tx) = tx {
                    let _ = tx.send(v);
                }
            })
        });
        let v = match got {
            Some(v) => v,
            None => rx
                .await
                .unwrap_or_else(|_| Err(Status::aborted("the step's table went away"))),
        };
        let v = v?;
        Ok(pb::RecvTensorResponse {
            is_dead: v.is_none(),
            tensor: v.as_ref().map(graph::import::tensor_to_content_proto),
            send_start_micros: now_micros(),
            ..Default::default()
        })
    }
}

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

struct AbortOnDrop {
    worker: Option<Arc<LocalWorker>>,
    step_id: u64,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            w.abort_step(
                self.step_id,
                Status::cancelled("the master cancelled the step"),
            );
        }
    }
}

/// `WorkerService` over a [`WorkerState`].
pub struct WorkerServer(pub Arc<WorkerState>);

type Reply<T> = std::result::Result<Response<T>, tonic::Status>;

fn reply<T>(r: Result<T>) -> Reply<T> {
    r.map(Response::new).map_err(|e| wire::to_grpc(&e))
}

#[tonic::async_trait]
impl WorkerService for WorkerServer {
    async fn get_status(&self, _: Request<pb::GetStatusRequest>) -> Reply<pb::GetStatusResponse> {
        reply(Ok(pb::GetStatusResponse {
            device_attributes: self.0.devices.clone(),
        }))
    }

    async fn create_worker_session(
        &self,
        r: Request<pb::CreateWorkerSessionRequest>,
    ) -> Reply<pb::CreateWorkerSessionResponse> {
        self.0
            .check_master("CreateWorkerSession", r.remote_addr())
            .map_err(|e| wire::to_grpc(&e))?;
        let r = r.into_inner();
        reply(
            self.0
                .create_session(&r.session_handle, r.isolate_session_state)
                .map(|_| pb::CreateWorkerSessionResponse {}),
        )
    }

    async fn delete_worker_session(
        &self,
        r: Request<pb::DeleteWorkerSessionRequest>,
    ) -> Reply<pb::DeleteWorkerSessionResponse> {
        self.0.delete_session(&r.into_inner().session_handle);
        reply(Ok(pb::DeleteWorkerSessionResponse {}))
    }

    async fn register_graph(
        &self,
        r: Request<pb::RegisterGraphRequest>,
    ) -> Reply<pb::RegisterGraphResponse> {
        self.0
            .check_master("RegisterGraph", r.remote_addr())
            .map_err(|e| wire::to_grpc(&e))?;
        let r = r.into_inner();
        let st = Arc::clone(&self.0);
        // Partitioning and planning are CPU work: off the RPC threads.
        let h = tokio::task::spawn_blocking(move || st.register_graph(&r))
            .await
            .unwrap_or_else(|e| Err(Status::internal(format!("RegisterGraph failed: {e}"))));
        reply(h.map(|graph_handle| pb::RegisterGraphResponse { graph_handle }))
    }

    async fn deregister_graph(
        &self,
        r: Request<pb::DeregisterGraphRequest>,
    ) -> Reply<pb::DeregisterGraphResponse> {
        let r = r.into_inner();
        reply(
            self.0
                .session(&r.session_handle, r.create_worker_session_called)
                .and_then(|w| w.deregister_graph(&r.graph_handle))
                .map(|_| pb::DeregisterGraphResponse {}),
        )
    }

    async fn run_graph(&self, r: Request<pb::RunGraphRequest>) -> Reply<pb::RunGraphResponse> {
        self.0
            .check_master("RunGraph", r.remote_addr())
            .map_err(|e| wire::to_grpc(&e))?;
        let r = r.into_inner();
        let in_body = r.store_errors_in_response_body;
        match self.0.run_graph(r).await {
            Ok(resp) => Ok(Response::new(resp)),
            Err(e) if in_body => Ok(Response::new(pb::RunGraphResponse {
                status_code: e.code() as i32,
                status_error_message: wire::message_of(&e),
                ..Default::default()
            })),
            Err(e) => Err(wire::to_grpc(&e)),
        }
    }

    async fn cleanup_graph(
        &self,
        r: Request<pb::CleanupGraphRequest>,
    ) -> Reply<pb::CleanupGraphResponse> {
        if let Ok(step) = u64::try_from(r.into_inner().step_id) {
            self.0.cleanup_step(step);
        }
        reply(Ok(pb::CleanupGraphResponse {}))
    }

    async fn cleanup_all(
        &self,
        r: Request<pb::CleanupAllRequest>,
    ) -> Reply<pb::CleanupAllResponse> {
        for c in r.into_inner().container {
            self.0.runtime.reset_container(&c);
        }
        reply(Ok(pb::CleanupAllResponse {}))
    }

    async fn recv_tensor(
        &self,
        r: Request<pb::RecvTensorRequest>,
    ) -> Reply<pb::RecvTensorResponse> {
        reply(self.0.recv_tensor(r.get_ref()).await)
    }

    async fn logging(&self, _: Request<pb::LoggingRequest>) -> Reply<pb::LoggingResponse> {
        Err(tonic::Status::unimplemented(
            "Logging: this worker keeps no RPC logs; trace a step with RunOptions instead",
        ))
    }

    async fn tracing(&self, _: Request<pb::TracingRequest>) -> Reply<pb::TracingResponse> {
        Err(tonic::Status::unimplemented(
            "Tracing: use RunOptions trace_level FULL_TRACE for per-step statistics",
        ))
    }
}
