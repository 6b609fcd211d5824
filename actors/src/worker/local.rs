//! [`LocalWorker`]: the worker of this process's devices for one session (see
//! [`worker`](super)). It owns what TensorFlow's `WorkerSession` and `GraphMgr`
//! own: the session's view of each device (its allocation limit), the kernels of
//! stateful ops shared by every step (TensorFlow's `OpSegment`), the registered
//! pieces with their per-device plans, and the steps in flight.
//!
//! A run dispatches each partition straight to its device's data-plane mailbox
//! from the calling thread: one hop, no actor round trip.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use graph::passes::partition::{
    client_terminated, partition_with, PartitionDevice, PartitionOptions,
};
use graph::{Graph, GraphDef, Node, OpRegistry, Result, Status};
use kernels::{CallFrame, DeviceContext, KernelRegistry, OpKernel, ResourceMgr, StepContext};
use rendezvous::{completion, CompletionReceiver, FrameIter, LocalRendezvous, ParsedKey};
use rendezvous::{MailboxSender, Rendezvous, StepTables, Value};

use super::partial_step::PartialStep;
use super::{PartialCall, RegisterGraphRequest, RegisteredGraph, RunGraphRequest, WorkerInterface};
use crate::device::{DeviceMsg, PartitionRun};
use crate::executor::{ExecutorPlan, KernelCache};
use crate::runtime::Runtime;
use crate::step::{Finisher, StepResult, StepTracker};

/// Kernels of stateful ops, shared by every step of a session (TensorFlow's
/// `OpSegment`), so a random op continues its stream whichever fetches run it.
#[derive(Default)]
struct SessionKernelCache {
    map: Mutex<HashMap<(usize, String), Arc<dyn OpKernel>>>,
}

struct DeviceKernelCache<'a> {
    cache: &'a SessionKernelCache,
    device: usize,
}

impl KernelCache for DeviceKernelCache<'_> {
    fn get_or_create(
        &self,
        node: &Node,
        create: &mut dyn FnMut() -> Result<Arc<dyn OpKernel>>,
    ) -> Result<Arc<dyn OpKernel>> {
        // Runtime-inserted ops (_Arg, _Send, …) differ per signature: never shared.
        if !node.op_def.is_stateful || node.op().starts_with('_') {
            return create();
        }
        let key = (self.device, node.name().to_owned());
        let mut m = self.cache.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = m.get(&key) {
            return Ok(Arc::clone(k));
        }
        let k = create()?;
        m.insert(key, Arc::clone(&k));
        Ok(k)
    }
}

/// A registered piece: its partitions' plans.
struct Piece {
    partitions: Vec<(usize, Arc<ExecutorPlan>)>,
    /// `_Retval`s of the piece (the call frame's size).
    num_retvals: usize,
    /// A piece registered for partial runs: the rendezvous keys of its feeds'
    /// and fetches' client-terminated transfers, by `_Arg` and `_Retval` index.
    partial_keys: Option<PartialKeys>,
}

/// The rendezvous keys of a partial run's feeds and fetches, by index.
type PartialKeys = (Vec<String>, Vec<String>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Per-op timeouts on the actor system's timer (no thread per timeout).
struct ArbiterTimer(actix_rt::ArbiterHandle);

impl kernels::Timer for ArbiterTimer {
    fn schedule(&self, after: Duration, f: Box<dyn FnOnce() + Send>) {
        self.0.spawn(async move {
            actix_rt::time::sleep(after).await;
            f();
        });
    }
}

/// The worker of this process's devices for one session; see the module docs.
pub struct LocalWorker {
    /// The session's view of each runtime device, by device index.
    devices: Vec<Arc<DeviceContext>>,
    /// Each device's data-plane mailbox and resources (not the `Runtime`: the
    /// session actor holds its worker, and a runtime that its own actors kept
    /// alive would never shut down when its last handle went).
    mailboxes: Vec<MailboxSender<DeviceMsg>>,
    resources: Vec<Arc<ResourceMgr>>,
    arbiter: actix_rt::ArbiterHandle,
    by_name: HashMap<String, usize>,
    default_container: Arc<str>,
    kernels: SessionKernelCache,
    pieces: RwLock<HashMap<Arc<str>, Arc<Piece>>>,
    next_handle: AtomicU64,
    /// Partial runs in flight, by step id.
    partials: Arc<Mutex<HashMap<u64, Arc<PartialStep>>>>,
    /// A cluster worker's per-step tables, shared with the server answering its
    /// peers' receives; `None` in-process (each step gets a fresh table).
    tables: Option<Arc<dyn StepTables>>,
    /// Whether `cleanup` drops the default container (a session's private one) or
    /// leaves it (a cluster worker's, shared by every session as TensorFlow's
    /// workers share theirs unless `isolate_session_state`).
    owns_container: bool,
    timer: Arc<dyn kernels::Timer>,
}

impl LocalWorker {
    /// The worker of `runtime`'s devices for a session whose private container is
    /// `default_container`; `max_allocation_bytes` limits each of its allocations.
    pub fn new(
        runtime: &Runtime,
        default_container: Arc<str>,
        max_allocation_bytes: Option<usize>,
    ) -> LocalWorker {
        let devices: Vec<Arc<DeviceContext>> = runtime
            .devices()
            .iter()
            .map(|d| match max_allocation_bytes {
                Some(limit) => Arc::new(d.ctx.view_with_max_allocation_bytes(limit)),
                None => Arc::clone(&d.ctx),
            })
            .collect();
        let by_name = runtime
            .devices()
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.to_string(), i))
            .collect();
        LocalWorker {
            devices,
            mailboxes: runtime
                .devices()
                .iter()
                .map(|d| d.mailbox.clone())
                .collect(),
            resources: runtime
                .devices()
                .iter()
                .map(|d| Arc::clone(&d.ctx.resources))
                .collect(),
            arbiter: runtime.system_arbiter().clone(),
            by_name,
            default_container,
            kernels: SessionKernelCache::default(),
            pieces: RwLock::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            partials: Arc::default(),
            tables: None,
            owns_container: true,
            timer: Arc::new(ArbiterTimer(runtime.system_arbiter().clone())),
        }
    }

    /// The same worker whose kernels never write an output into an input's buffer
    /// (to measure what buffer forwarding saves; see
    /// [`DeviceContext::forward_buffers`]).
    pub fn without_buffer_forwarding(mut self) -> LocalWorker {
        for d in &mut self.devices {
            *d = Arc::new(d.view_without_forwarding());
        }
        self
    }

    /// The same worker whose devices run their kernels on `threads` (see
    /// [`kernels::CpuThreads`]).
    pub fn with_threads(mut self, threads: kernels::CpuThreads) -> LocalWorker {
        for d in &mut self.devices {
            *d = Arc::new(d.view_with_threads(threads.clone()));
        }
        self
    }

    /// The same worker taking each step's table from `tables`, where a peer's
    /// receive may have created it first (a worker of a cluster).
    pub fn with_step_tables(mut self, tables: Arc<dyn StepTables>) -> LocalWorker {
        self.tables = Some(tables);
        self
    }

    /// The same worker leaving its default container in place when its session
    /// ends (a container shared with other sessions).
    pub fn sharing_default_container(mut self) -> LocalWorker {
        self.owns_container = false;
        self
    }

    fn piece(&self, handle: &str) -> Result<Arc<Piece>> {
        let pieces = self.pieces.read().unwrap_or_else(|p| p.into_inner());
        pieces.get(handle).cloned().ok_or_else(|| {
            Status::aborted(format!(
                "Graph handle is not found: {handle}. Possibly, this worker just restarted."
            ))
        })
    }

    fn arm_timeout(
        &self,
        tracker: &Arc<StepTracker>,
        d: Duration,
    ) -> tokio::sync::oneshot::Sender<()> {
        let weak = Arc::downgrade(tracker);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        self.arbiter.spawn(async move {
            tokio::select! {
                _ = actix_rt::time::sleep(d) => {
                    if let Some(t) = weak.upgrade() {
                        tracing::debug!(step = t.step_id, "step deadline exceeded");
                        t.abort(Status::deadline_exceeded(format!("step timed out after {d:?}")));
                    }
                }
                _ = rx => {}
            }
        });
        tx
    }

    /// `gd` with its `_Arg`s and `_Retval`s as client-terminated transfers on
    /// their devices, and their keys by index (see [`RegisterGraphRequest::partial`]).
    fn client_terminate(&self, mut gd: GraphDef) -> Result<(GraphDef, PartialKeys)> {
        let mut args = Vec::new();
        let mut rets = Vec::new();
        for n in &mut gd.node {
            let list = match n.op.as_str() {
                "_Arg" => &mut args,
                "_Retval" => &mut rets,
                _ => continue,
            };
            let index: i64 = n.get_attr("index")?;
            let index = usize::try_from(index).map_err(|_| {
                Status::invalid_argument("a negative _Arg or _Retval index").with_node(&n.name)
            })?;
            let d = self
                .by_name
                .get(&n.device)
                .map(|&i| &self.devices[i])
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "node is assigned to '{}', which is not a device of this worker",
                        n.device
                    ))
                    .with_node(&n.name)
                })?;
            let device = PartitionDevice {
                name: d.name.clone(),
                incarnation: d.incarnation,
            };
            let key = ParsedKey::new(&device.name, device.incarnation, &device.name, &n.name)?
                .full_key(FrameIter::ROOT);
            list.push((index, key));
            *n = client_terminated(n, &n.name, &device)?;
        }
        args.sort();
        rets.sort();
        let keys = |v: Vec<(usize, String)>| v.into_iter().map(|(_, k)| k).collect();
        Ok((gd, (keys(args), keys(rets))))
    }

    /// The step's table: from the shared tables (a cluster worker), else new.
    fn step_rendezvous(&self, step_id: u64) -> Result<Arc<dyn Rendezvous>> {
        Ok(match &self.tables {
            Some(m) => m.find_or_create(step_id)?,
            None => Arc::new(LocalRendezvous::new()),
        })
    }

    /// Dispatches every partition of `piece` for the step of `req` on the table
    /// `rendezvous`; `finish` runs when the step ends.
    fn start(
        &self,
        piece: &Piece,
        req: RunGraphRequest,
        rendezvous: Arc<dyn Rendezvous>,
        finish: Option<Finisher>,
    ) -> CompletionReceiver<StepResult> {
        let step_id = req.step_id;
        let span = req
            .span
            .unwrap_or_else(|| tracing::debug_span!("step", step_id));
        let call_frame = Arc::new(CallFrame::new(req.args, piece.num_retvals));
        let mailboxes = piece
            .partitions
            .iter()
            .map(|(d, _)| self.mailboxes[*d].clone())
            .collect();
        let step_container: Arc<str> = Arc::from(format!("__step_{step_id}"));
        let cancellation = Arc::new(rendezvous::CancellationManager::new());
        let (tracker, rx) = StepTracker::new(
            step_id,
            piece.partitions.len(),
            Arc::clone(&rendezvous),
            Arc::clone(&call_frame),
            mailboxes,
        );
        tracker.set_cancellation(Arc::clone(&cancellation));
        tracker.set_step_resources(
            Arc::clone(&step_container),
            piece
                .partitions
                .iter()
                .map(|(d, _)| Arc::clone(&self.resources[*d]))
                .collect(),
        );
        // Only a step that needs one pays for a finisher: the deadline's timer is
        // cancelled when the step ends.
        let deadline = req.timeout.map(|d| self.arm_timeout(&tracker, d));
        if deadline.is_some() || finish.is_some() {
            tracker.set_finisher(Box::new(move |rendezvous, result| {
                drop(deadline);
                if let Some(f) = finish {
                    f(rendezvous, result);
                }
            }));
        }
        for (device, plan) in &piece.partitions {
            let step = Arc::new(StepContext {
                step_id,
                device: Arc::clone(&self.devices[*device]),
                rendezvous: Arc::clone(&rendezvous),
                call_frame: Arc::clone(&call_frame),
                default_container: Arc::clone(&self.default_container),
                step_container: Arc::clone(&step_container),
                cancellation: Arc::clone(&cancellation),
                timer: Arc::clone(&self.timer),
            });
            let run = DeviceMsg::Run(Box::new(PartitionRun {
                plan: Arc::clone(plan),
                step,
                tracker: Arc::clone(&tracker),
                collect_stats: req.collect_stats,
                step_span: span.clone(),
            }));
            if self.mailboxes[*device].send(run).is_err() {
                tracker.partition_done(Err(Status::cancelled("the runtime has shut down")), None);
            }
        }
        rx
    }

    /// One call of a partial run (see [`PartialCall`]).
    fn run_partial(
        &self,
        mut req: RunGraphRequest,
        call: PartialCall,
    ) -> Result<CompletionReceiver<StepResult>> {
        let piece = self.piece(&req.handle)?;
        let step_id = req.step_id;
        let mut sends = std::mem::take(&mut req.sends);
        let keyed = std::mem::take(&mut req.recv_keys);
        let mut by_index = Vec::with_capacity(call.fetches.len());
        if !call.feeds.is_empty() || !call.fetches.is_empty() {
            let (args, rets) = piece.partial_keys.as_ref().ok_or_else(|| {
                Status::invalid_argument("the graph was not registered for partial runs")
            })?;
            let find = |keys: &[String], i: usize, what: &str| {
                keys.get(i).cloned().ok_or_else(|| {
                    Status::invalid_argument(format!("the partial run has no {what} {i}"))
                })
            };
            for (i, t) in call.feeds {
                sends.push((find(args, i, "feed")?, t));
            }
            for i in call.fetches {
                by_index.push(find(rets, i, "fetch")?);
            }
        }
        let ps = {
            let mut partials = lock(&self.partials);
            match partials.get(&step_id) {
                Some(ps) => Arc::clone(ps),
                None => {
                    let rendezvous = self.step_rendezvous(step_id)?;
                    let ps = Arc::new(PartialStep::new(Arc::clone(&rendezvous)));
                    let ended = Arc::clone(&ps);
                    let finish: Finisher = Box::new(move |_, _| ended.finish());
                    let done = self.start(&piece, req, rendezvous, Some(finish));
                    ps.set_done(done);
                    partials.insert(step_id, Arc::clone(&ps));
                    ps
                }
            }
        };
        deliver_sends(&**ps.rendezvous(), sends)?;
        let waits = keyed
            .iter()
            .chain(&by_index)
            .map(|k| ps.receive(k))
            .collect::<Result<Vec<_>>>()?;
        let (tx, rx) = completion();
        let partials = Arc::clone(&self.partials);
        let last = call.last;
        self.arbiter.spawn(async move {
            let mut result = StepResult {
                status: Ok(()),
                retvals: Vec::new(),
                stats: Vec::new(),
                recvs: Vec::new(),
            };
            let mut values = Vec::with_capacity(waits.len());
            for w in waits {
                match w.await {
                    Some(Ok(v)) => values.push(v),
                    Some(Err(e)) => {
                        result.status = Err(e);
                        break;
                    }
                    None => {
                        result.status = Err(Status::cancelled("the worker stopped"));
                        break;
                    }
                }
            }
            if result.status.is_ok() {
                let mut values = values.into_iter();
                result.recvs = keyed.into_iter().zip(values.by_ref()).collect();
                result.retvals = values.collect();
            }
            if last {
                let done = ps.take_done();
                let ended = match done {
                    Some(d) => d.await,
                    None => None,
                };
                match ended {
                    Some(r) => {
                        if result.status.is_ok() {
                            result.status = r.status;
                        }
                        result.stats = r.stats;
                    }
                    None if result.status.is_ok() => {
                        result.status = Err(Status::cancelled(
                            "the partial run's step ended without an outcome",
                        ));
                    }
                    None => {}
                }
                lock(&partials).remove(&step_id);
            }
            tx.complete(result);
        });
        Ok(rx)
    }
}

/// Puts the values a master sent into the step's table, under their keys.
fn deliver_sends(rendezvous: &dyn Rendezvous, sends: Vec<(String, graph::Tensor)>) -> Result<()> {
    for (key, t) in sends {
        let (k, fi) = ParsedKey::parse(&key)?;
        rendezvous.send(&k, fi, Some(t))?;
    }
    Ok(())
}

/// Takes the values of a finished step's client-terminated `_Send`s by key; a key
/// nothing was sent under is `InvalidArgument` (TensorFlow's "not found" for an
/// unknown `recv_key`).
fn collect_recvs(rendezvous: &dyn Rendezvous, keys: &[String], result: &mut StepResult) {
    for key in keys {
        let got = ParsedKey::parse(key).and_then(|(k, fi): (ParsedKey, FrameIter)| {
            rendezvous
                .recv(&k, fi, &mut || Box::new(|_: Result<Value>| {}))
                .unwrap_or_else(|| {
                    Err(Status::invalid_argument(format!(
                        "the step finished without a value under '{key}'"
                    )))
                })
        });
        match got {
            Ok(v) => result.recvs.push((key.clone(), v)),
            Err(e) => {
                if result.status.is_ok() {
                    result.status = Err(e);
                }
                return;
            }
        }
    }
}

impl WorkerInterface for LocalWorker {
    fn register_graph(&self, req: RegisterGraphRequest) -> Result<RegisteredGraph> {
        let (g, partial_keys) = if req.partial {
            let (gd, keys) = self.client_terminate(req.graph.into_graph_def())?;
            (
                Graph::from_nodes(gd.node, OpRegistry::global())?,
                Some(keys),
            )
        } else {
            (req.graph.into_graph()?, None)
        };
        let assignment = g
            .nodes()
            .iter()
            .map(|n| {
                self.by_name.get(&n.def.device).copied().ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "node is assigned to '{}', which is not a device of this worker",
                        n.def.device
                    ))
                    .with_node(n.name())
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let pdevs: Vec<PartitionDevice> = self
            .devices
            .iter()
            .map(|d| PartitionDevice {
                name: d.name.clone(),
                incarnation: d.incarnation,
            })
            .collect();
        let popts = PartitionOptions {
            recv_scheduling: req.partition.recv_scheduling && !req.partial,
            ..req.partition
        };
        let num_retvals = g.nodes().iter().filter(|n| n.op() == "_Retval").count();
        let (pieces, transfers, scheduled_recvs) = match assignment.split_first() {
            // A piece on one device is its own partition: partitioning it would
            // copy every node and change none.
            Some((&d, rest)) if rest.iter().all(|&x| x == d) => (vec![(d, g)], 0, 0),
            _ => {
                let parts = partition_with(&g, &assignment, &pdevs, &popts)?;
                // The partitions hold copies of every node: the piece's graph goes.
                drop(g);
                let graphs = parts
                    .per_device
                    .into_iter()
                    .map(|(d, nodes)| Ok((d, Graph::from_nodes(nodes, OpRegistry::global())?)))
                    .collect::<Result<Vec<_>>>()?;
                (graphs, parts.transfers, parts.scheduled_recvs)
            }
        };
        let registry = KernelRegistry::global();
        let mut partitions = Vec::with_capacity(pieces.len());
        let mut graphs = Vec::with_capacity(pieces.len());
        for (device, pg) in pieces {
            let plan = ExecutorPlan::build(
                &pg,
                &self.devices[device],
                registry,
                &DeviceKernelCache {
                    cache: &self.kernels,
                    device,
                },
            )?;
            partitions.push((device, Arc::new(plan)));
            graphs.push((self.devices[device].name.clone(), pg.into_graph_def()));
        }
        let handle: Arc<str> = Arc::from(format!(
            "{:016x}",
            self.next_handle.fetch_add(1, Ordering::Relaxed)
        ));
        let piece = Arc::new(Piece {
            partitions,
            num_retvals,
            partial_keys,
        });
        self.pieces
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(Arc::clone(&handle), piece);
        Ok(RegisteredGraph {
            handle,
            partitions: graphs,
            transfers,
            scheduled_recvs,
        })
    }

    fn run_graph(&self, mut req: RunGraphRequest) -> Result<CompletionReceiver<StepResult>> {
        if let Some(call) = req.partial.take() {
            return self.run_partial(req, call);
        }
        let piece = self.piece(&req.handle)?;
        let rendezvous = self.step_rendezvous(req.step_id)?;
        deliver_sends(&*rendezvous, std::mem::take(&mut req.sends))?;
        let recv_keys = std::mem::take(&mut req.recv_keys);
        let finish = (!recv_keys.is_empty()).then(|| -> Finisher {
            Box::new(move |rendezvous, result| {
                if result.status.is_ok() {
                    collect_recvs(rendezvous, &recv_keys, result);
                }
            })
        });
        Ok(self.start(&piece, req, rendezvous, finish))
    }

    fn abort_step(&self, step_id: u64, status: Status) {
        // Every device running a partition of the step stops it, which aborts the
        // step's table and, through its tracker, the rest of the step. Nothing is
        // registered per step for this: a mailbox delivers in order, so an abort
        // sent after `run_graph` returned finds the partitions it dispatched.
        for m in &self.mailboxes {
            let _ = m.send(DeviceMsg::Abort {
                step_id,
                status: status.clone(),
            });
        }
    }

    fn cleanup_step(&self, step_id: u64) {
        lock(&self.partials).remove(&step_id);
        if let Some(m) = &self.tables {
            m.cleanup(step_id);
        }
    }

    fn deregister_graph(&self, handle: &str) -> Result<()> {
        self.pieces
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(handle)
            .map(|_| ())
            .ok_or_else(|| Status::not_found(format!("Graph handle is not found: {handle}")))
    }

    fn cleanup(&self) {
        self.pieces
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        lock(&self.partials).clear();
        if self.owns_container {
            for d in &self.devices {
                d.resources.cleanup(&self.default_container);
            }
        }
    }
}
