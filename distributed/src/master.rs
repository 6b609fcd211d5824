//! The master half of a server: TensorFlow's `MasterService`
//! (`CreateSession`/`ExtendSession`/`RunStep`/`CloseSession`/`ListDevices`/
//! `Reset`, partial runs through `PartialRunSetup` and `RunStep`, and callables
//! through `MakeCallable`/`RunCallable`/`ReleaseCallable`).
//!
//! A master session is the same session actor a local [`Session`] runs (the same
//! pruning, placement and per-signature cache), placing on every device of the
//! cluster and handing each placed step to a [`ClusterWorker`]. Creating one asks
//! every task for its devices (`GetStatus`, bounded) and opens a worker session on
//! each; a task that does not answer makes `CreateSession` fail with
//! `Unavailable`, and the session can be created again once it is back.
//!
//! Nodes whose device request names no job go to the master's own task
//! (TensorFlow's client device), where the cost model spreads them over its
//! devices ([`SessionOptions::default_task`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actors::{PartialRun, RunArgs, RunOptions, Runtime, Session, SessionOptions, TraceLevel};
use graph::import::{graph_def_from_tf_proto, ImportOptions};
use graph::passes::partition::PartitionDevice;
use graph::{DeviceName, GraphDef, Result, Status};
use proto::tensorflow as pb;
use proto::tensorflow::master_service_server::MasterService;
use tonic::{Request, Response};

use crate::cluster::TaskName;
use crate::cluster_worker::{ClusterDevice, ClusterOptions, ClusterWorker, Link, Task};
use crate::peers::{bounded, Peers};
use crate::wire;
use crate::worker_service::{WorkerState, SHARED_CONTAINER};

struct MasterSession {
    session: Session,
    devices: Vec<pb::DeviceAttributes>,
    version: AtomicI64,
    /// Partial runs set up and not yet finished, by handle.
    partial_runs: Mutex<HashMap<String, Arc<PartialRun>>>,
    /// Callables made and not yet released, by handle.
    callables: Mutex<HashMap<i64, Arc<pb::CallableOptions>>>,
    next_handle: AtomicI64,
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A step's options as the client sent them.
fn run_options(o: &pb::RunOptions) -> RunOptions {
    RunOptions::default()
        .with_timeout((o.timeout_in_ms > 0).then(|| Duration::from_millis(o.timeout_in_ms as u64)))
        .with_trace_level(if o.trace_level > 0 {
            TraceLevel::FullTrace
        } else {
            TraceLevel::NoTrace
        })
}

/// What a traced step recorded, as TensorFlow's `RunMetadata`.
fn metadata_of(m: &actors::RunMetadata, partition_graphs: bool) -> pb::RunMetadata {
    pb::RunMetadata {
        step_stats: Some(crate::stats::step_stats_to_proto(&m.step_stats)),
        partition_graphs: if partition_graphs {
            m.partition_graphs
                .iter()
                .map(|(_, g)| graph::import::graph_def_to_tf_proto(g))
                .collect()
        } else {
            Vec::new()
        },
        ..Default::default()
    }
}

/// The master of a server; see the module docs.
pub struct MasterState {
    runtime: Runtime,
    worker: Arc<WorkerState>,
    peers: Arc<Peers>,
    options: ClusterOptions,
    sessions: Mutex<HashMap<String, Arc<MasterSession>>>,
    next_session: AtomicU64,
    nonce: u64,
}

impl MasterState {
    /// The master of the server whose worker is `worker`.
    pub fn new(
        runtime: Runtime,
        worker: Arc<WorkerState>,
        peers: Arc<Peers>,
        options: ClusterOptions,
    ) -> MasterState {
        let nonce = worker.devices().first().map_or(0, |d| d.incarnation);
        MasterState {
            runtime,
            worker,
            peers,
            options,
            sessions: Mutex::new(HashMap::new()),
            next_session: AtomicU64::new(1),
            nonce,
        }
    }

    fn task(&self) -> &TaskName {
        self.worker.task()
    }

    fn session(&self, handle: &str) -> Result<Arc<MasterSession>> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(handle)
            .cloned()
            .ok_or_else(|| {
                Status::aborted(format!(
                    "Session {handle} is not found. Possibly, this master has restarted."
                ))
            })
    }

    /// Every task's devices: this task's, then the others' by `GetStatus`.
    async fn cluster_devices(&self) -> Result<Vec<(usize, Vec<pb::DeviceAttributes>)>> {
        let tasks = self.peers.cluster().tasks();
        let mut set = tokio::task::JoinSet::new();
        let mut out = Vec::new();
        for (i, t) in tasks.iter().enumerate() {
            if t == self.task() {
                out.push((i, self.worker.devices().to_vec()));
                continue;
            }
            let mut c = self.peers.client(t)?;
            let t = t.clone();
            let d = self.options.rpc_timeout.min(Duration::from_secs(10));
            set.spawn(async move {
                let r = bounded(
                    d,
                    "GetStatus",
                    &t.to_string(),
                    c.get_status(pb::GetStatusRequest {}),
                )
                .await;
                (i, r.map(|r| r.device_attributes))
            });
        }
        while let Some(r) = set.join_next().await {
            let (i, r) = r.map_err(|e| Status::internal(format!("GetStatus: {e}")))?;
            out.push((i, r?));
        }
        out.sort_by_key(|x| x.0);
        Ok(out)
    }

    /// Opens a session on every task; see the module docs.
    pub async fn create_session(
        self: &Arc<Self>,
        r: pb::CreateSessionRequest,
    ) -> Result<pb::CreateSessionResponse> {
        let config = r.config.clone().unwrap_or_default();
        let graph = match &r.graph_def {
            Some(g) => graph_def_from_tf_proto(g, &ImportOptions::default())?,
            None => GraphDef::default(),
        };
        let handle = format!(
            "{:016x}{:08x}",
            self.nonce,
            self.next_session.fetch_add(1, Ordering::Relaxed)
        );
        let tasks = self.peers.cluster().tasks();
        let found = self.cluster_devices().await?;
        let mut cluster_tasks = Vec::new();
        let mut devices = Vec::new();
        let mut attrs = Vec::new();
        let mut client_task = 0;
        for (i, devs) in &found {
            let t = &tasks[*i];
            let link = if t == self.task() {
                client_task = cluster_tasks.len();
                Link::Local(
                    self.worker
                        .create_session(&handle, config.isolate_session_state)?,
                )
            } else {
                Link::Remote(self.peers.client(t)?)
            };
            for d in devs {
                devices.push(ClusterDevice {
                    device: PartitionDevice {
                        name: d.name.clone(),
                        incarnation: d.incarnation,
                    },
                    task: cluster_tasks.len(),
                });
            }
            attrs.extend(devs.iter().cloned());
            cluster_tasks.push(Task {
                name: t.clone(),
                link,
            });
        }
        // Open a worker session on every other task.
        let mut set = tokio::task::JoinSet::new();
        for t in &cluster_tasks {
            if let Link::Remote(c) = &t.link {
                let mut c = c.clone();
                let req = pb::CreateWorkerSessionRequest {
                    session_handle: handle.clone(),
                    server_def: Some(pb::ServerDef {
                        cluster: Some(self.peers.cluster().to_proto()),
                        job_name: t.name.job.clone(),
                        task_index: t.name.task as i32,
                        protocol: "grpc".into(),
                        ..Default::default()
                    }),
                    isolate_session_state: config.isolate_session_state,
                    cluster_device_attributes: attrs.clone(),
                    master_task: self.task().to_string(),
                    master_incarnation: self.nonce as i64,
                };
                let name = t.name.clone();
                let d = self.options.rpc_timeout;
                set.spawn(async move {
                    bounded(
                        d,
                        "CreateWorkerSession",
                        &name.to_string(),
                        c.create_worker_session(req),
                    )
                    .await
                    .map(|_| ())
                });
            }
        }
        while let Some(r) = set.join_next().await {
            if let Err(e) = r.unwrap_or_else(|e| Err(Status::internal(e.to_string()))) {
                self.worker.delete_session(&handle);
                return Err(e);
            }
        }
        let cw = ClusterWorker::new(
            handle.clone(),
            cluster_tasks,
            client_task,
            devices,
            tokio::runtime::Handle::current(),
            self.options.clone(),
        )?;
        let me = Arc::downgrade(self);
        let h2 = handle.clone();
        cw.on_cleanup(Box::new(move || {
            if let Some(m) = me.upgrade() {
                m.worker.delete_session(&h2);
            }
        }));
        let names = attrs
            .iter()
            .map(|d| DeviceName::parse(&d.name))
            .collect::<Result<Vec<_>>>()?;
        let partition = wire::partition_options_from_proto(config.graph_options.as_ref());
        let options = SessionOptions::default()
            .with_allow_soft_placement(config.allow_soft_placement)
            .with_optimizer(wire::optimizer_options_from_proto(&config))
            .with_rewrite_options(wire::rewriter_config_from_proto(&config))
            .with_enable_bfloat16_sendrecv(partition.bfloat16_transfers)
            .with_enable_recv_scheduling(partition.recv_scheduling)
            .with_default_timeout(
                (config.operation_timeout_in_ms > 0)
                    .then(|| Duration::from_millis(config.operation_timeout_in_ms as u64)),
            )
            .with_default_task(DeviceName {
                job: Some(self.task().job.clone()),
                replica: Some(0),
                task: Some(self.task().task),
                ..Default::default()
            });
        let runtime = self.runtime.clone();
        let session = tokio::task::spawn_blocking(move || {
            Session::with_worker(
                &runtime,
                &graph,
                options,
                names,
                Arc::new(cw),
                Arc::from(SHARED_CONTAINER),
            )
        })
        .await
        .map_err(|e| Status::internal(format!("CreateSession: {e}")))??;
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                handle.clone(),
                Arc::new(MasterSession {
                    session,
                    devices: attrs,
                    version: AtomicI64::new(0),
                    partial_runs: Mutex::default(),
                    callables: Mutex::default(),
                    next_handle: AtomicI64::new(1),
                }),
            );
        tracing::debug!(session = %handle, "master session created");
        Ok(pb::CreateSessionResponse {
            session_handle: handle,
            graph_version: 0,
        })
    }

    async fn extend_session(
        &self,
        r: pb::ExtendSessionRequest,
    ) -> Result<pb::ExtendSessionResponse> {
        let s = self.session(&r.session_handle)?;
        // The new nodes alone: their inputs may name nodes the session already
        // has, so the import only converts them, and the session's extend checks
        // them against the whole graph (all or nothing).
        let only_convert = ImportOptions::default().with_validate(false);
        let g = match &r.graph_def {
            Some(g) => graph_def_from_tf_proto(g, &only_convert)?,
            None => GraphDef::default(),
        };
        let s2 = Arc::clone(&s);
        tokio::task::spawn_blocking(move || s2.session.extend(&g))
            .await
            .map_err(|e| Status::internal(format!("ExtendSession: {e}")))??;
        Ok(pb::ExtendSessionResponse {
            new_graph_version: s.version.fetch_add(1, Ordering::Relaxed) + 1,
        })
    }

    async fn run_step(&self, r: pb::RunStepRequest) -> Result<pb::RunStepResponse> {
        let s = self.session(&r.session_handle)?;
        if !r.partial_run_handle.is_empty() {
            return self.partial_run(&s, r).await;
        }
        let mut req = RunArgs::new();
        for f in &r.feed {
            req = req.feed(&f.name, wire::tensor_of(f.tensor.as_ref(), &f.name)?);
        }
        req.fetches.clone_from(&r.fetch);
        req.targets.clone_from(&r.target);
        let o = r.options.clone().unwrap_or_default();
        req.options = run_options(&o);
        let out = s.session.run_async(&req).await?;
        let mut resp = pb::RunStepResponse::default();
        for (name, t) in r.fetch.iter().zip(&out.outputs) {
            resp.tensor.push(wire::named(name, t));
        }
        if let Some(m) = &out.metadata {
            resp.metadata = Some(metadata_of(m, o.output_partition_graphs));
        }
        Ok(resp)
    }

    async fn partial_run_setup(
        &self,
        r: pb::PartialRunSetupRequest,
    ) -> Result<pb::PartialRunSetupResponse> {
        let s = self.session(&r.session_handle)?;
        let run = s
            .session
            .partial_run_setup_async(&refs(&r.feed), &refs(&r.fetch), &refs(&r.target))
            .await?;
        let handle = s.next_handle.fetch_add(1, Ordering::Relaxed).to_string();
        if !run.is_finished() {
            lock(&s.partial_runs).insert(handle.clone(), Arc::new(run));
        }
        Ok(pb::PartialRunSetupResponse {
            partial_run_handle: handle,
        })
    }

    /// One call of a partial run; the run is forgotten once it has finished.
    async fn partial_run(
        &self,
        s: &MasterSession,
        r: pb::RunStepRequest,
    ) -> Result<pb::RunStepResponse> {
        let run = lock(&s.partial_runs)
            .get(&r.partial_run_handle)
            .cloned()
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Must run 'setup' before performing partial runs! (no partial run {})",
                    r.partial_run_handle
                ))
            })?;
        let feeds = r
            .feed
            .iter()
            .map(|f| Ok((f.name.clone(), wire::tensor_of(f.tensor.as_ref(), &f.name)?)))
            .collect::<Result<Vec<_>>>()?;
        let out = run.run_async(feeds, r.fetch.clone()).await;
        if run.is_finished() {
            lock(&s.partial_runs).remove(&r.partial_run_handle);
        }
        Ok(pb::RunStepResponse {
            tensor: r
                .fetch
                .iter()
                .zip(&out?)
                .map(|(name, t)| wire::named(name, t))
                .collect(),
            ..Default::default()
        })
    }

    async fn make_callable(&self, r: pb::MakeCallableRequest) -> Result<pb::MakeCallableResponse> {
        let s = self.session(&r.session_handle)?;
        let o = r.options.unwrap_or_default();
        if !o.tensor_connection.is_empty() {
            return Err(Status::unimplemented(
                "MakeCallable: tensor_connection is not supported; feed the tensor instead",
            ));
        }
        // Compiled now, so that a bad signature fails here and the first run is fast.
        let session = s.session.clone();
        let (feeds, fetches, targets) = (o.feed.clone(), o.fetch.clone(), o.target.clone());
        tokio::task::spawn_blocking(move || {
            session
                .compiled_step(&refs(&feeds), &refs(&fetches), &refs(&targets))
                .map(|_| ())
        })
        .await
        .map_err(|e| Status::internal(format!("MakeCallable: {e}")))??;
        let handle = s.next_handle.fetch_add(1, Ordering::Relaxed);
        lock(&s.callables).insert(handle, Arc::new(o));
        Ok(pb::MakeCallableResponse { handle })
    }

    async fn run_callable(&self, r: pb::RunCallableRequest) -> Result<pb::RunCallableResponse> {
        let s = self.session(&r.session_handle)?;
        let o = lock(&s.callables).get(&r.handle).cloned().ok_or_else(|| {
            Status::invalid_argument(format!(
                "Attempted to run callable {} that was not found in session {}",
                r.handle, r.session_handle
            ))
        })?;
        if r.feed.len() != o.feed.len() {
            return Err(Status::invalid_argument(format!(
                "Invalid number of feed values for callable {}: expected {}, got {}",
                r.handle,
                o.feed.len(),
                r.feed.len()
            )));
        }
        let mut req = RunArgs::new();
        for (name, t) in o.feed.iter().zip(&r.feed) {
            req = req.feed(name, wire::tensor_of(Some(t), name)?);
        }
        req.fetches.clone_from(&o.fetch);
        req.targets.clone_from(&o.target);
        let ro = o.run_options.clone().unwrap_or_default();
        req.options = run_options(&ro);
        let out = s.session.run_async(&req).await?;
        Ok(pb::RunCallableResponse {
            fetch: out
                .outputs
                .iter()
                .map(graph::import::tensor_to_content_proto)
                .collect(),
            metadata: out
                .metadata
                .as_ref()
                .map(|m| metadata_of(m, ro.output_partition_graphs)),
        })
    }

    fn release_callable(&self, r: &pb::ReleaseCallableRequest) -> Result<()> {
        let s = self.session(&r.session_handle)?;
        let removed = lock(&s.callables).remove(&r.handle);
        removed.map(|_| ()).ok_or_else(|| {
            Status::invalid_argument(format!(
                "Attempted to release callable {} that was not found in session {}",
                r.handle, r.session_handle
            ))
        })
    }

    async fn close_session(&self, handle: &str) -> Result<()> {
        let s = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(handle)
            .ok_or_else(|| Status::aborted(format!("Session {handle} is not found.")))?;
        tokio::task::spawn_blocking(move || {
            // Unfinished partial runs end (their steps aborted) before the session.
            drop(std::mem::take(&mut *lock(&s.partial_runs)));
            s.session.close()
        })
        .await
        .map_err(|e| Status::internal(format!("CloseSession: {e}")))?
    }

    async fn list_devices(&self, handle: &str) -> Result<pb::ListDevicesResponse> {
        let mine = format!("{}/", self.task().device_prefix());
        let all = if handle.is_empty() {
            self.cluster_devices()
                .await?
                .into_iter()
                .flat_map(|(_, d)| d)
                .collect()
        } else {
            self.session(handle)?.devices.clone()
        };
        let (local_device, remote_device) =
            all.into_iter().partition(|d| d.name.starts_with(&mine));
        Ok(pb::ListDevicesResponse {
            local_device,
            remote_device,
        })
    }

    async fn reset(&self, r: pb::ResetRequest) -> Result<()> {
        let handles: Vec<String> = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        for h in handles {
            let _ = self.close_session(&h).await;
        }
        let containers = if r.container.is_empty() {
            vec![SHARED_CONTAINER.to_owned()]
        } else {
            r.container
        };
        for t in self.peers.cluster().tasks() {
            if &t == self.task() {
                for c in &containers {
                    self.runtime.reset_container(c);
                }
                continue;
            }
            let mut c = self.peers.client(&t)?;
            let req = pb::CleanupAllRequest {
                container: containers.clone(),
            };
            bounded(
                self.options.rpc_timeout,
                "CleanupAll",
                &t.to_string(),
                c.cleanup_all(req),
            )
            .await?;
        }
        Ok(())
    }

    /// Closes every session (the server is stopping).
    pub fn close_all(&self) {
        let all: Vec<Arc<MasterSession>> = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in all {
            drop(std::mem::take(&mut *lock(&s.partial_runs)));
            let _ = s.session.close();
        }
    }
}

/// `MasterService` over a [`MasterState`].
pub struct MasterServer(pub Arc<MasterState>);

type Reply<T> = std::result::Result<Response<T>, tonic::Status>;

fn reply<T>(r: Result<T>) -> Reply<T> {
    r.map(Response::new).map_err(|e| wire::to_grpc(&e))
}

#[tonic::async_trait]
impl MasterService for MasterServer {
    async fn create_session(
        &self,
        r: Request<pb::CreateSessionRequest>,
    ) -> Reply<pb::CreateSessionResponse> {
        reply(self.0.create_session(r.into_inner()).await)
    }

    async fn extend_session(
        &self,
        r: Request<pb::ExtendSessionRequest>,
    ) -> Reply<pb::ExtendSessionResponse> {
        reply(self.0.extend_session(r.into_inner()).await)
    }

    async fn partial_run_setup(
        &self,
        r: Request<pb::PartialRunSetupRequest>,
    ) -> Reply<pb::PartialRunSetupResponse> {
        reply(self.0.partial_run_setup(r.into_inner()).await)
    }

    async fn run_step(&self, r: Request<pb::RunStepRequest>) -> Reply<pb::RunStepResponse> {
        // The client's deadline (TensorFlow's sets the call's to the step's
        // timeout): tonic answers CANCELLED when it passes, so the step ends a
        // little before it, with DEADLINE_EXCEEDED as TensorFlow reports it.
        let call_deadline =
            grpc_timeout(r.metadata()).map(|d| d.saturating_sub(deadline_margin(d)));
        let mut r = r.into_inner();
        if let Some(d) = call_deadline {
            let o = r.options.get_or_insert_with(Default::default);
            let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1);
            if o.timeout_in_ms <= 0 || o.timeout_in_ms > ms {
                o.timeout_in_ms = ms;
            }
        }
        let in_body = r.store_errors_in_response_body;
        match self.0.run_step(r).await {
            Ok(resp) => Ok(Response::new(resp)),
            Err(e) if in_body => Ok(Response::new(pb::RunStepResponse {
                status_code: e.code() as i32,
                status_error_message: wire::message_of(&e),
                ..Default::default()
            })),
            Err(e) => Err(wire::to_grpc(&e)),
        }
    }

    async fn close_session(
        &self,
        r: Request<pb::CloseSessionRequest>,
    ) -> Reply<pb::CloseSessionResponse> {
        reply(
            self.0
                .close_session(&r.into_inner().session_handle)
                .await
                .map(|_| pb::CloseSessionResponse {}),
        )
    }

    async fn list_devices(
        &self,
        r: Request<pb::ListDevicesRequest>,
    ) -> Reply<pb::ListDevicesResponse> {
        reply(self.0.list_devices(&r.into_inner().session_handle).await)
    }

    async fn reset(&self, r: Request<pb::ResetRequest>) -> Reply<pb::ResetResponse> {
        reply(
            self.0
                .reset(r.into_inner())
                .await
                .map(|_| pb::ResetResponse {}),
        )
    }

    async fn make_callable(
        &self,
        r: Request<pb::MakeCallableRequest>,
    ) -> Reply<pb::MakeCallableResponse> {
        reply(self.0.make_callable(r.into_inner()).await)
    }

    async fn run_callable(
        &self,
        r: Request<pb::RunCallableRequest>,
    ) -> Reply<pb::RunCallableResponse> {
        // The client's deadline bounds the step, as for RunStep.
        let call_deadline =
            grpc_timeout(r.metadata()).map(|d| d.saturating_sub(deadline_margin(d)));
        let r = r.into_inner();
        let fut = self.0.run_callable(r);
        reply(match call_deadline {
            Some(d) => tokio::time::timeout(d, fut).await.unwrap_or_else(|_| {
                Err(Status::deadline_exceeded(format!(
                    "step timed out after {d:?}"
                )))
            }),
            None => fut.await,
        })
    }

    async fn release_callable(
        &self,
        r: Request<pb::ReleaseCallableRequest>,
    ) -> Reply<pb::ReleaseCallableResponse> {
        reply(
            self.0
                .release_callable(&r.into_inner())
                .map(|_| pb::ReleaseCallableResponse {}),
        )
    }
}

/// The `grpc-timeout` of a call (`<digits><unit>`, unit one of `HMSmun`).
fn grpc_timeout(m: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let v = m.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// How much earlier than the call's deadline a step ends, so that its
/// answer (aborting the step's partitions on every worker first) leaves before
/// the deadline does, on a loaded machine too: a quarter, between 2 and 250 ms.
/// (5% was too little: with 200 ms and busy cores the answer missed it, and the
/// client saw its own CANCELLED instead of DEADLINE_EXCEEDED.)
fn deadline_margin(d: Duration) -> Duration {
    (d / 4).clamp(Duration::from_millis(2), Duration::from_millis(250))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit() {
        let mut m = tonic::metadata::MetadataMap::new();
        for (v, d) in [
            ("200m", Duration::from_millis(200)),
            ("3S", Duration::from_secs(3)),
            ("2M", Duration::from_secs(120)),
            ("1H", Duration::from_secs(3600)),
            ("1500u", Duration::from_micros(1500)),
            ("99n", Duration::from_nanos(99)),
        ] {
            m.insert("grpc-timeout", v.parse().unwrap());
            assert_eq!(grpc_timeout(&m), Some(d), "{v}");
        }
        for bad in ["", "m", "12x", "-1S"] {
            m.insert("grpc-timeout", bad.parse().unwrap());
            assert_eq!(grpc_timeout(&m), None, "{bad}");
        }
        for (call, margin) in [(200, 50.0), (10, 2.5), (4, 2.0), (60_000, 250.0)] {
            assert_eq!(
                deadline_margin(Duration::from_millis(call)),
                Duration::from_secs_f64(margin / 1000.0),
                "{call} ms"
            );
        }
    }
}
