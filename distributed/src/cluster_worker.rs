//! [`ClusterWorker`]: how a master's session reaches every task of its cluster
//! (TensorFlow's `MasterSession` run path, behind actorflow's `WorkerInterface`).
//!
//! The session's master state prunes and places a step on the cluster's devices
//! and hands the placed step here. Registering it:
//! - turns the step's feeds and fetches into **client-terminated** `_Recv`s and
//!   `_Send`s on the master's own CPU:0 (TensorFlow's client device), keyed
//!   `client;incarnation;client;name;0:0`, so values cross as TensorFlow's do, by
//!   key in `RunGraph`, and the graph is never rewritten per call;
//! - partitions it **by task** (one `_Send`/`_Recv` pair per tensor and
//!   destination task, whatever the destination devices); each task's worker
//!   partitions its piece again by device;
//! - registers each piece with its task (`RegisterGraph`, concurrently; the
//!   master's own task in-process) and keeps the handles for every later run.
//!
//! Running it sends `RunGraph` to every task at once under a fresh step id (the
//! feeds and fetch keys only to the master's task), and ends the step on every
//! task with `CleanupGraph` whatever happened. The first error fails the step:
//! the other tasks' calls are cancelled (their workers abort the step, failing
//! receives waiting for it), and a transport failure or a missed deadline is an
//! error within a bound, never a hang.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use actors::stats::StatsCollector;
use actors::step::StepResult;
use actors::worker::{
    LocalWorker, PartialCall, RegisterGraphRequest, RegisteredGraph, RunGraphRequest,
    WorkerInterface,
};
use graph::passes::partition::{
    client_terminated, partition_by_location_with, PartitionDevice, PartitionOptions,
};
use graph::{Graph, GraphDef, NodeDef, OpRegistry, Result, Status, Tensor};
use proto::tensorflow as pb;
use rendezvous::{completion, CompletionReceiver, FrameIter, ParsedKey};

use crate::cluster::TaskName;
use crate::peers::{block_on, bounded, WorkerClient};
use crate::wire;

/// How the master reaches one task.
#[derive(Clone)]
pub enum Link {
    /// The master's own task, in-process.
    Local(Arc<LocalWorker>),
    /// Another task, over gRPC.
    Remote(WorkerClient),
}

/// A task of the session's cluster.
#[derive(Clone)]
pub struct Task {
    /// Its name.
    pub name: TaskName,
    /// How it is reached.
    pub link: Link,
}

/// A device of the cluster, as the master knows it.
#[derive(Clone, Debug)]
pub struct ClusterDevice {
    /// Full name and incarnation.
    pub device: PartitionDevice,
    /// Index of its task in the session's task list.
    pub task: usize,
}

/// A feed's `_Arg` index, a task that consumes it, and its key there.
type ArgKey = (usize, usize, String);
/// A task and a rendezvous key in it.
type TaskKey = (usize, String);

struct Piece {
    /// (task index, the task's handle of its piece).
    per_task: Vec<(usize, String)>,
    /// The number of feeds, and where each goes (a feed used on several tasks
    /// goes to each).
    args: usize,
    arg_keys: Vec<ArgKey>,
    /// Where each fetch comes from, by `_Retval` index.
    retval_keys: Vec<TaskKey>,
}

/// Bounds on the master's calls to workers.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The most a control call (`RegisterGraph`, `CleanupGraph`, `GetStatus`, …)
    /// may take.
    pub rpc_timeout: Duration,
    /// How often the master asks every other task of a session's cluster for its
    /// status (`GetStatus`); `None` turns the checks off.
    pub health_check_interval: Option<Duration>,
    /// How long a health check may go unanswered: a task that does not answer in
    /// time, or answers with other device incarnations (it restarted), fails
    /// every running step of the session.
    pub health_check_timeout: Duration,
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            rpc_timeout: Duration::from_secs(30),
            health_check_interval: Some(Duration::from_secs(1)),
            health_check_timeout: Duration::from_secs(5),
        }
    }
}

/// A master session's workers; see the module docs.
pub struct ClusterWorker {
    session_handle: String,
    tasks: Vec<Task>,
    /// The master's own task (index into `tasks`), which hosts the feeds and fetches.
    client_task: usize,
    client_device: PartitionDevice,
    devices: Vec<PartitionDevice>,
    device_task: Vec<usize>,
    by_name: HashMap<String, usize>,
    runtime: tokio::runtime::Handle,
    options: ClusterOptions,
    pieces: RwLock<HashMap<Arc<str>, Arc<Piece>>>,
    next_handle: AtomicU64,
    running: Arc<Running>,
    /// Partial runs started and not yet ended, by step id.
    partials: Arc<Mutex<HashSet<u64>>>,
    on_cleanup: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Dropped (with the session) to stop the health checks.
    _health: Option<tokio::sync::oneshot::Sender<()>>,
}

/// The session's running steps (each with the sender that aborts it), and the
/// failure that ended the session, if one did.
#[derive(Default)]
struct Running {
    steps: Mutex<HashMap<u64, tokio::sync::oneshot::Sender<Status>>>,
    failed: Mutex<Option<Status>>,
}

impl Running {
    fn steps(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, tokio::sync::oneshot::Sender<Status>>> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fails every running step with `status`.
    fn abort_all(&self, status: &Status) {
        let steps: Vec<_> = self.steps().drain().collect();
        for (_, tx) in steps {
            let _ = tx.send(status.clone());
        }
    }
}

/// Asks every remote task for its status every `interval` until `stop` is
/// dropped; see [`ClusterOptions::health_check_interval`]. `expected` holds each
/// task's device incarnations by name.
async fn health_checks(
    tasks: Vec<(TaskName, WorkerClient, HashMap<String, u64>)>,
    running: std::sync::Weak<Running>,
    interval: Duration,
    timeout: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tick.tick() => {}
        }
        let mut checks = tokio::task::JoinSet::new();
        for (name, client, expected) in &tasks {
            let (peer, mut c, expected) = (name.to_string(), client.clone(), expected.clone());
            checks.spawn(async move {
                let r = bounded(
                    timeout,
                    "GetStatus",
                    &peer,
                    c.get_status(pb::GetStatusRequest {}),
                )
                .await;
                let restarted = r.as_ref().is_ok_and(|st| {
                    st.device_attributes.iter().any(|d| {
                        expected
                            .get(&d.name)
                            .is_some_and(|&inc| inc != d.incarnation)
                    })
                });
                match r {
                    Err(e) => Err(Status::unavailable(format!(
                        "health check of {peer} failed: {}",
                        e.message()
                    ))),
                    Ok(_) if restarted => Err(Status::aborted(format!(
                        "{peer} restarted (its devices have new incarnations); create a new session"
                    ))),
                    Ok(_) => Ok(()),
                }
            });
        }
        let mut failures = Vec::new();
        loop {
            tokio::select! {
                _ = &mut stop => return,
                r = checks.join_next() => match r {
                    None => break,
                    Some(Ok(Err(e))) => failures.push(e),
                    Some(_) => {}
                },
            }
        }
        let Some(running) = running.upgrade() else {
            return;
        };
        for status in failures {
            tracing::warn!(error = %status, "health check failed; aborting the session's steps");
            if status.code() == graph::Code::Aborted {
                *running.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(status.clone());
            }
            running.abort_all(&status);
        }
    }
}

impl ClusterWorker {
    /// The workers of `tasks` for the master session `session_handle` (already
    /// opened on each), whose cluster devices are `devices`; `client_task` is the
    /// master's own.
    pub fn new(
        session_handle: String,
        tasks: Vec<Task>,
        client_task: usize,
        devices: Vec<ClusterDevice>,
        runtime: tokio::runtime::Handle,
        options: ClusterOptions,
    ) -> Result<ClusterWorker> {
        // The client device: the master task's CPU:0, else its first device.
        let cpu0 = format!("{}/device:CPU:0", tasks[client_task].name.device_prefix());
        let mine = || devices.iter().filter(|d| d.task == client_task);
        let client_device = mine()
            .find(|d| d.device.name == cpu0)
            .or_else(|| mine().next())
            .map(|d| d.device.clone())
            .ok_or_else(|| Status::internal("the master's task has no device"))?;
        let running = Arc::new(Running::default());
        let health = options.health_check_interval.and_then(|interval| {
            let remote: Vec<_> = tasks
                .iter()
                .enumerate()
                .filter_map(|(i, t)| match &t.link {
                    Link::Remote(c) => {
                        let incarnations = devices
                            .iter()
                            .filter(|d| d.task == i)
                            .map(|d| (d.device.name.clone(), d.device.incarnation))
                            .collect();
                        Some((t.name.clone(), c.clone(), incarnations))
                    }
                    Link::Local(_) => None,
                })
                .collect();
            if remote.is_empty() {
                return None;
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            runtime.spawn(health_checks(
                remote,
                Arc::downgrade(&running),
                interval,
                options.health_check_timeout,
                rx,
            ));
            Some(tx)
        });
        Ok(ClusterWorker {
            session_handle,
            tasks,
            client_task,
            client_device,
            by_name: devices
                .iter()
                .enumerate()
                .map(|(i, d)| (d.device.name.clone(), i))
                .collect(),
            device_task: devices.iter().map(|d| d.task).collect(),
            devices: devices.into_iter().map(|d| d.device).collect(),
            runtime,
            options,
            pieces: RwLock::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            running,
            partials: Arc::default(),
            on_cleanup: Mutex::new(None),
            _health: health,
        })
    }

    /// Runs `f` once when the session ends (after its workers were told).
    pub fn on_cleanup(&self, f: Box<dyn FnOnce() + Send>) {
        *self.on_cleanup.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }

    /// The step's feeds and fetches as client-terminated transfers, each on the
    /// task that uses it: a fetch's `_Send` on its producer's device (the value
    /// comes back in that task's `RunGraph` answer), and a feed's `_Recv` on a
    /// device of each task that consumes it (the value goes out in each such
    /// task's `RunGraph` call). No fed or fetched value takes a `RecvTensor` hop
    /// through the master's task, where TensorFlow's master routes every feed
    /// and fetch. Returns the graph and the feed and fetch keys.
    fn client_terminate(&self, gd: GraphDef) -> Result<(GraphDef, Vec<ArgKey>, Vec<TaskKey>)> {
        let task_of = |device: &str| self.by_name.get(device).map(|&i| self.device_task[i]);
        let device_of: HashMap<&str, &str> = gd
            .node
            .iter()
            .map(|n| (n.name.as_str(), n.device.as_str()))
            .collect();
        let producer = |input: &str| -> String {
            let name = input.trim_start_matches('^');
            name.rsplit_once(':')
                .filter(|(_, port)| port.parse::<u32>().is_ok())
                .map_or(name, |(n, _)| n)
                .to_owned()
        };
        // Where each node runs: a fetch on its producer's device.
        let placed: HashMap<String, String> = gd
            .node
            .iter()
            .map(|n| {
                let d = match (n.op.as_str(), n.input.first()) {
                    ("_Retval", Some(i)) => device_of
                        .get(producer(i).as_str())
                        .copied()
                        .unwrap_or(&n.device),
                    _ => &n.device,
                };
                let d = if d.is_empty() || task_of(d).is_none() {
                    self.client_device.name.as_str()
                } else {
                    d
                };
                (n.name.clone(), d.to_owned())
            })
            .collect();
        let feeds: std::collections::HashSet<&str> = gd
            .node
            .iter()
            .filter(|n| n.op == "_Arg")
            .map(|n| n.name.as_str())
            .collect();
        // Each feed's consumers: (task, first device there, consumer indices).
        let mut consumers: HashMap<String, Vec<(usize, String, Vec<usize>)>> = HashMap::new();
        for (i, n) in gd.node.iter().enumerate() {
            for input in &n.input {
                let p = producer(input);
                if !feeds.contains(p.as_str()) {
                    continue;
                }
                let d = &placed[&n.name];
                let t = task_of(d).unwrap_or(self.client_task);
                let per_task = consumers.entry(p).or_default();
                match per_task.iter_mut().find(|(task, _, _)| *task == t) {
                    Some(e) => e.2.push(i),
                    None => per_task.push((t, d.clone(), vec![i])),
                }
            }
        }
        let located = |device: &str| PartitionDevice {
            name: device.to_owned(),
            incarnation: self
                .by_name
                .get(device)
                .map_or(self.client_device.incarnation, |&i| {
                    self.devices[i].incarnation
                }),
        };
        let key = |device: &str, name: &str| -> Result<String> {
            let d = located(device);
            Ok(ParsedKey::new(&d.name, d.incarnation, &d.name, name)?.full_key(FrameIter::ROOT))
        };
        let transfer =
            |n: &NodeDef, name: &str, device: &str| client_terminated(n, name, &located(device));
        let mut args: Vec<ArgKey> = Vec::new();
        let mut rets: Vec<(i64, TaskKey)> = Vec::new();
        let mut nodes = gd.node.clone();
        let mut extra = Vec::new();
        for (i, n) in gd.node.iter().enumerate() {
            match n.op.as_str() {
                "_Arg" => {
                    let index: i64 = n.get_attr("index")?;
                    let index = usize::try_from(index).map_err(|_| {
                        Status::invalid_argument("a negative _Arg index").with_node(&n.name)
                    })?;
                    let uses = consumers.remove(&n.name).unwrap_or_default();
                    if uses.is_empty() {
                        let d = self.client_device.name.clone();
                        args.push((index, self.client_task, key(&d, &n.name)?));
                        nodes[i] = transfer(n, &n.name, &d)?;
                        continue;
                    }
                    for (k, (task, device, users)) in uses.into_iter().enumerate() {
                        let name = if k == 0 {
                            n.name.clone()
                        } else {
                            format!("{}/_feed_task_{task}", n.name)
                        };
                        args.push((index, task, key(&device, &name)?));
                        let recv = transfer(n, &name, &device)?;
                        if k == 0 {
                            nodes[i] = recv;
                            continue;
                        }
                        extra.push(recv);
                        for u in users {
                            for input in &mut nodes[u].input {
                                if producer(input) == n.name {
                                    *input = if input.starts_with('^') {
                                        format!("^{name}")
                                    } else {
                                        name.clone()
                                    };
                                }
                            }
                        }
                    }
                }
                "_Retval" => {
                    let d = &placed[&n.name];
                    let t = task_of(d).unwrap_or(self.client_task);
                    rets.push((n.get_attr("index")?, (t, key(d, &n.name)?)));
                    nodes[i] = transfer(n, &n.name, d)?;
                }
                _ => {}
            }
        }
        nodes.extend(extra);
        args.sort();
        rets.sort_by_key(|r| r.0);
        let out = GraphDef { node: nodes, ..gd };
        Ok((out, args, rets.into_iter().map(|r| r.1).collect()))
    }

    fn piece(&self, handle: &str) -> Result<Arc<Piece>> {
        let pieces = self.pieces.read().unwrap_or_else(|p| p.into_inner());
        pieces
            .get(handle)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("Graph handle is not found: {handle}")))
    }

    /// Forgets the pieces registered on each task (best effort, not waited for).
    fn deregister_pieces(&self, per_task: &[(usize, String)]) {
        for (t, h) in per_task {
            match &self.tasks[*t].link {
                Link::Local(w) => {
                    let _ = w.deregister_graph(h);
                }
                Link::Remote(c) => {
                    let mut c = c.clone();
                    let req = pb::DeregisterGraphRequest {
                        session_handle: self.session_handle.clone(),
                        create_worker_session_called: true,
                        graph_handle: h.clone(),
                    };
                    let d = self.options.rpc_timeout;
                    self.runtime.spawn(async move {
                        let _ = tokio::time::timeout(d, c.deregister_graph(req)).await;
                    });
                }
            }
        }
    }
}

/// Runs when a call of a step has finished, with its result.
type Ended = Box<dyn FnOnce(&StepResult) + Send>;

impl ClusterWorker {
    /// Runs `calls` as one call of the step of `req` (`partial`: of a partial
    /// run, and whether it is the last); the result's `retvals` are the values
    /// under `keys`, in order. `ended` runs when the call has finished.
    fn launch(
        &self,
        req: RunGraphRequest,
        partial: Option<bool>,
        calls: Vec<TaskCall>,
        keys: Vec<String>,
        ended: Option<Ended>,
    ) -> CompletionReceiver<StepResult> {
        let step_id = req.step_id;
        let (tx, rx) = completion();
        let (abort_tx, abort_rx) = tokio::sync::oneshot::channel();
        self.running.steps().insert(step_id, abort_tx);
        let run = StepRun {
            session_handle: self.session_handle.clone(),
            step_id,
            collect_stats: req.collect_stats,
            timeout: req.timeout,
            rpc_timeout: self.options.rpc_timeout,
            span: req.span,
            partial,
        };
        let running = Arc::clone(&self.running);
        self.runtime.spawn(async move {
            let mut result = run.run(calls, abort_rx).await;
            running.steps().remove(&step_id);
            if result.status.is_ok() {
                let mut got: HashMap<String, Option<Tensor>> =
                    std::mem::take(&mut result.recvs).into_iter().collect();
                result.retvals = keys.iter().map(|k| got.remove(k).flatten()).collect();
            }
            if let Some(f) = ended {
                f(&result);
            }
            tx.complete(result);
        });
        rx
    }

    /// Each task's share of a call: the feeds it consumes (`feed` by `_Arg`
    /// index; `None` for one this call does not give) and the fetches it
    /// produces (by `_Retval` index). A task with neither is left out unless
    /// `every_task`.
    fn task_calls<'a>(
        &self,
        piece: &Piece,
        feed: impl Fn(usize) -> Option<&'a Tensor>,
        fetches: &[usize],
        every_task: bool,
    ) -> Vec<TaskCall> {
        piece
            .per_task
            .iter()
            .map(|(t, h)| TaskCall {
                task: self.tasks[*t].clone(),
                handle: h.clone(),
                sends: piece
                    .arg_keys
                    .iter()
                    .filter(|(_, task, _)| task == t)
                    .filter_map(|(i, _, k)| Some((k.clone(), feed(*i)?.clone())))
                    .collect(),
                recv_keys: fetches
                    .iter()
                    .map(|i| &piece.retval_keys[*i])
                    .filter(|(task, _)| task == t)
                    .map(|(_, k)| k.clone())
                    .collect(),
            })
            .filter(|c| every_task || !c.sends.is_empty() || !c.recv_keys.is_empty())
            .collect()
    }

    /// One call of a partial run: to every task when it starts or ends the run,
    /// else to the tasks it feeds or fetches from.
    fn run_partial(
        &self,
        piece: &Piece,
        req: RunGraphRequest,
        call: PartialCall,
    ) -> Result<CompletionReceiver<StepResult>> {
        let step_id = req.step_id;
        let mut keys = Vec::with_capacity(call.fetches.len());
        for i in &call.fetches {
            let (_, k) = piece.retval_keys.get(*i).ok_or_else(|| {
                Status::invalid_argument(format!("the partial run has no fetch {i}"))
            })?;
            keys.push(k.clone());
        }
        if let Some((i, _)) = call.feeds.iter().find(|(i, _)| *i >= piece.args) {
            return Err(Status::invalid_argument(format!(
                "the partial run has no feed {i}"
            )));
        }
        let first = self
            .partials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(step_id);
        let calls = self.task_calls(
            piece,
            |i| call.feeds.iter().find(|(j, _)| *j == i).map(|(_, v)| v),
            &call.fetches,
            first || call.last,
        );
        // The run ends with its last call, or with a failed one (whose tasks
        // were told).
        let partials = Arc::clone(&self.partials);
        let last = call.last;
        let ended: Ended = Box::new(move |r| {
            if last || r.status.is_err() {
                partials
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&step_id);
            }
        });
        Ok(self.launch(req, Some(last), calls, keys, Some(ended)))
    }
}

impl WorkerInterface for ClusterWorker {
    fn register_graph(&self, req: RegisterGraphRequest) -> Result<RegisteredGraph> {
        // Feeds the step does not need have no `_Arg` (pruned), but keep their
        // places in the call: the arguments a run must bring are those up to the
        // highest `_Arg` index.
        let gd = req.graph.into_graph_def();
        let args = gd
            .node
            .iter()
            .filter(|n| n.op == "_Arg")
            .map(|n| {
                n.get_attr::<i64>("index")
                    .map(|i| usize::try_from(i).unwrap_or(0) + 1)
            })
            .try_fold(0, |m, i| i.map(|i| m.max(i)))?;
        let (gd, arg_keys, retval_keys) = self.client_terminate(gd)?;
        let g = Graph::from_graph_def(&gd, OpRegistry::global())?;
        let assignment = g
            .nodes()
            .iter()
            .map(|n| {
                self.by_name.get(&n.def.device).copied().ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "node is assigned to '{}', which is not a device of the cluster",
                        n.def.device
                    ))
                    .with_node(n.name())
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let popts = PartitionOptions {
            recv_scheduling: req.partition.recv_scheduling && !req.partial,
            ..req.partition
        };
        let parts =
            partition_by_location_with(&g, &assignment, &self.devices, &self.device_task, &popts)?;
        let mut per_task = Vec::new();
        let mut partitions = Vec::new();
        let mut remote = Vec::new();
        for (task, nodes) in parts.per_device {
            let piece = GraphDef {
                node: nodes,
                ..Default::default()
            };
            match &self.tasks[task].link {
                Link::Local(w) => {
                    let h = w.register_graph(RegisterGraphRequest {
                        graph: piece.clone().into(),
                        partition: req.partition,
                        ..Default::default()
                    });
                    match h {
                        Ok(h) => per_task.push((task, h.handle.to_string())),
                        Err(e) => {
                            self.deregister_pieces(&per_task);
                            return Err(e);
                        }
                    }
                }
                Link::Remote(c) => remote.push((task, c.clone(), piece.clone())),
            }
            partitions.push((self.tasks[task].name.to_string(), piece));
        }
        if !remote.is_empty() {
            let session_handle = self.session_handle.clone();
            let partition = req.partition;
            let d = self.options.rpc_timeout;
            let names: Vec<TaskName> = self.tasks.iter().map(|t| t.name.clone()).collect();
            let got = block_on(&self.runtime, async move {
                let mut set = tokio::task::JoinSet::new();
                for (task, mut c, piece) in remote {
                    let req = pb::RegisterGraphRequest {
                        session_handle: session_handle.clone(),
                        create_worker_session_called: true,
                        graph_def: Some(graph::import::graph_def_to_tf_proto(&piece)),
                        has_control_flow: piece.node.iter().any(|n| n.op == "Enter"),
                        graph_options: Some(wire::graph_options_of_partition(&partition)),
                        ..Default::default()
                    };
                    let name = names[task].clone();
                    set.spawn(async move {
                        let r =
                            bounded(d, "RegisterGraph", &name.to_string(), c.register_graph(req))
                                .await;
                        (task, r.map(|r| r.graph_handle))
                    });
                }
                let mut out = Vec::new();
                while let Some(r) = set.join_next().await {
                    match r {
                        Ok(x) => out.push(x),
                        Err(e) => return Err(Status::internal(format!("RegisterGraph: {e}"))),
                    }
                }
                Ok(out)
            })?;
            let mut first_error = None;
            for (task, r) in got {
                match r {
                    Ok(h) => per_task.push((task, h)),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = first_error {
                self.deregister_pieces(&per_task);
                return Err(e);
            }
        }
        per_task.sort();
        let handle: Arc<str> = Arc::from(format!(
            "{:016x}",
            self.next_handle.fetch_add(1, Ordering::Relaxed)
        ));
        self.pieces
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                Arc::clone(&handle),
                Arc::new(Piece {
                    per_task,
                    args,
                    arg_keys,
                    retval_keys,
                }),
            );
        Ok(RegisteredGraph {
            handle,
            partitions,
            transfers: parts.transfers,
            scheduled_recvs: parts.scheduled_recvs,
        })
    }

    fn run_graph(&self, mut req: RunGraphRequest) -> Result<CompletionReceiver<StepResult>> {
        let piece = self.piece(&req.handle)?;
        if let Some(e) = &*self
            .running
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        {
            return Err(e.clone());
        }
        if let Some(call) = req.partial.take() {
            return self.run_partial(&piece, req, call);
        }
        if req.args.len() < piece.args {
            return Err(Status::invalid_argument(format!(
                "expected {} feeds, got {}",
                piece.args,
                req.args.len()
            )));
        }
        let fetches: Vec<usize> = (0..piece.retval_keys.len()).collect();
        let calls = self.task_calls(piece.as_ref(), |i| req.args.get(i), &fetches, true);
        let keys: Vec<String> = piece.retval_keys.iter().map(|(_, k)| k.clone()).collect();
        Ok(self.launch(req, None, calls, keys, None))
    }

    fn abort_step(&self, step_id: u64, status: Status) {
        let tx = self.running.steps().remove(&step_id);
        if let Some(tx) = tx {
            let _ = tx.send(status);
        }
    }

    fn cleanup_step(&self, step_id: u64) {
        // Every whole run ends its step on every task itself; an abandoned
        // partial run is ended here.
        let partial = self
            .partials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&step_id);
        if !partial {
            return;
        }
        let status = Status::cancelled("the partial run was abandoned");
        for t in &self.tasks {
            match &t.link {
                Link::Local(w) => {
                    w.abort_step(step_id, status.clone());
                    w.cleanup_step(step_id);
                }
                Link::Remote(c) => {
                    let mut c = c.clone();
                    let req = pb::CleanupGraphRequest {
                        step_id: step_id as i64,
                    };
                    let d = self.options.rpc_timeout;
                    self.runtime.spawn(async move {
                        let _ = tokio::time::timeout(d, c.cleanup_graph(req)).await;
                    });
                }
            }
        }
    }

    fn deregister_graph(&self, handle: &str) -> Result<()> {
        let p = self
            .pieces
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(handle)
            .ok_or_else(|| Status::not_found(format!("Graph handle is not found: {handle}")))?;
        self.deregister_pieces(&p.per_task);
        Ok(())
    }

    fn cleanup(&self) {
        self.pieces
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        // Remote tasks are told without waiting: closing never blocks on a dead
        // peer (TensorFlow's close can wait minutes for one).
        for t in &self.tasks {
            if let Link::Remote(c) = &t.link {
                let mut c = c.clone();
                let req = pb::DeleteWorkerSessionRequest {
                    session_handle: self.session_handle.clone(),
                };
                let d = self.options.rpc_timeout;
                self.runtime.spawn(async move {
                    let _ = tokio::time::timeout(d, c.delete_worker_session(req)).await;
                });
            }
        }
        if let Some(f) = self
            .on_cleanup
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            f();
        }
    }
}

struct TaskCall {
    task: Task,
    handle: String,
    sends: Vec<(String, Tensor)>,
    recv_keys: Vec<String>,
}

type Outcome = Result<(Vec<(String, Option<Tensor>)>, Vec<StatsCollector>)>;

struct StepRun {
    session_handle: String,
    step_id: u64,
    collect_stats: bool,
    timeout: Option<Duration>,
    rpc_timeout: Duration,
    span: Option<tracing::Span>,
    /// A call of a partial run, and whether it is the last.
    partial: Option<bool>,
}

impl StepRun {
    async fn call(&self, c: TaskCall) -> Outcome {
        match c.task.link {
            Link::Local(w) => {
                let rx = w.run_graph(RunGraphRequest {
                    handle: Arc::from(c.handle.as_str()),
                    step_id: self.step_id,
                    sends: c.sends,
                    recv_keys: c.recv_keys,
                    collect_stats: self.collect_stats,
                    span: self.span.clone(),
                    partial: self.partial.map(|last| PartialCall {
                        last,
                        ..Default::default()
                    }),
                    ..Default::default()
                })?;
                let r = rx.await.ok_or_else(|| {
                    Status::cancelled("the worker stopped before the step finished")
                })?;
                r.status?;
                Ok((r.recvs, r.stats))
            }
            Link::Remote(mut client) => {
                let req = pb::RunGraphRequest {
                    session_handle: self.session_handle.clone(),
                    create_worker_session_called: true,
                    graph_handle: c.handle,
                    step_id: self.step_id as i64,
                    exec_opts: Some(pb::ExecutorOpts {
                        record_timeline: self.collect_stats,
                        ..Default::default()
                    }),
                    send: c.sends.iter().map(|(k, t)| wire::named(k, t)).collect(),
                    recv_key: c.recv_keys,
                    is_partial: self.partial.is_some(),
                    is_last_partial_run: self.partial == Some(true),
                    store_errors_in_response_body: true,
                    ..Default::default()
                };
                let r = client
                    .run_graph(req)
                    .await
                    .map_err(|s| wire::from_grpc(&s, &c.task.name.to_string()))?
                    .into_inner();
                if r.status_code != 0 {
                    return Err(wire::status_from_wire(
                        r.status_code,
                        &r.status_error_message,
                    ));
                }
                let recvs = r
                    .recv
                    .iter()
                    .map(|n| {
                        Ok((
                            n.name.clone(),
                            Some(wire::tensor_of(n.tensor.as_ref(), &n.name)?),
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let stats = r
                    .step_stats
                    .as_ref()
                    .map(crate::stats::step_stats_from_proto)
                    .unwrap_or_default();
                Ok((recvs, stats))
            }
        }
    }

    async fn run(
        self,
        calls: Vec<TaskCall>,
        mut abort: tokio::sync::oneshot::Receiver<Status>,
    ) -> StepResult {
        let this = Arc::new(self);
        let tasks: Vec<Task> = calls.iter().map(|c| c.task.clone()).collect();
        let mut set = tokio::task::JoinSet::new();
        for c in calls {
            let this = Arc::clone(&this);
            set.spawn(async move { this.call(c).await });
        }
        let deadline = this.timeout.map(|d| (tokio::time::Instant::now() + d, d));
        let sleep = async move {
            match deadline {
                Some((at, d)) => {
                    tokio::time::sleep_until(at).await;
                    d
                }
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        let mut recvs = Vec::new();
        let mut stats = Vec::new();
        let mut error: Option<Status> = None;
        loop {
            tokio::select! {
                // The deadline first: a step past it timed out, whatever else is ready.
                biased;
                d = &mut sleep => {
                    error = Some(Status::deadline_exceeded(format!("step timed out after {d:?}")));
                    break;
                }
                r = set.join_next() => match r {
                    None => break,
                    Some(Ok(Ok((r, s)))) => {
                        recvs.extend(r);
                        stats.extend(s);
                    }
                    Some(Ok(Err(e))) => {
                        // A task whose own copy of the deadline fired first
                        // reports the cancellation it caused: the step timed out.
                        let late = deadline.is_some_and(|(at, _)| tokio::time::Instant::now() >= at);
                        error = Some(match (late, deadline) {
                            (true, Some((_, d))) if e.code() == graph::Code::Cancelled => {
                                Status::deadline_exceeded(format!("step timed out after {d:?}"))
                            }
                            _ => e,
                        });
                        break;
                    }
                    Some(Err(e)) => {
                        error = Some(Status::internal(format!("a step's call failed: {e}")));
                        break;
                    }
                },
                a = &mut abort => {
                    error = Some(a.unwrap_or_else(|_| Status::cancelled("the step was abandoned")));
                    break;
                }
            }
        }
        if let Some(e) = &error {
            // Remote calls are cancelled (their workers abort the step); the master's
            // own task is told directly.
            set.abort_all();
            for t in &tasks {
                if let Link::Local(w) = &t.link {
                    w.abort_step(this.step_id, e.clone());
                }
            }
            while set.join_next().await.is_some() {}
        }
        // A partial run's step lives on between its calls.
        if error.is_none() && this.partial == Some(false) {
            return StepResult {
                status: Ok(()),
                retvals: Vec::new(),
                stats,
                recvs,
            };
        }
        for t in &tasks {
            match &t.link {
                Link::Local(w) => w.cleanup_step(this.step_id),
                Link::Remote(c) => {
                    let mut c = c.clone();
                    let req = pb::CleanupGraphRequest {
                        step_id: this.step_id as i64,
                    };
                    let d = this.rpc_timeout;
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(d, c.cleanup_graph(req)).await;
                    });
                }
            }
        }
        StepResult {
            status: error.map_or(Ok(()), Err),
            retvals: Vec::new(),
            stats,
            recvs,
        }
    }
}
