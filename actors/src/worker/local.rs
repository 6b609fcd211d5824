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

use graph::passes::partition::{partition, PartitionDevice};
use graph::{Graph, GraphDef, Node, OpRegistry, Result, Status};
use kernels::{CallFrame, DeviceContext, KernelRegistry, OpKernel, ResourceMgr, StepContext};
use rendezvous::{CompletionReceiver, FrameIter, LocalRendezvous, ParsedKey};
use rendezvous::{MailboxSender, Rendezvous, StepTables, Value};

use super::{RegisterGraphRequest, RegisteredGraph, RunGraphRequest, WorkerInterface};
use crate::device::{DeviceMsg, PartitionRun};
use crate::executor::{ExecutorPlan, KernelCache};
use crate::runtime::Runtime;
use crate::step::{StepResult, StepTracker};

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
            tables: None,
            owns_container: true,
            timer: Arc::new(ArbiterTimer(runtime.system_arbiter().clone())),
        }
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
        let g = Graph::from_graph_def(&req.graph, OpRegistry::global())?;
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
        let parts = partition(&g, &assignment, &pdevs)?;
        let registry = KernelRegistry::global();
        let mut partitions = Vec::with_capacity(parts.per_device.len());
        let mut graphs = Vec::with_capacity(parts.per_device.len());
        for (device, nodes) in parts.per_device {
            let gd = GraphDef {
                node: nodes,
                ..Default::default()
            };
            let pg = Graph::from_graph_def(&gd, OpRegistry::global())?;
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
            graphs.push((self.devices[device].name.clone(), gd));
        }
        let num_retvals = g.nodes().iter().filter(|n| n.op() == "_Retval").count();
        let handle: Arc<str> = Arc::from(format!(
            "{:016x}",
            self.next_handle.fetch_add(1, Ordering::Relaxed)
        ));
        let piece = Arc::new(Piece {
            partitions,
            num_retvals,
        });
        self.pieces
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(Arc::clone(&handle), piece);
        Ok(RegisteredGraph {
            handle,
            partitions: graphs,
            transfers: parts.transfers,
        })
    }

    fn run_graph(&self, req: RunGraphRequest) -> Result<CompletionReceiver<StepResult>> {
        let piece = self.piece(&req.handle)?;
        let step_id = req.step_id;
        let span = req
            .span
            .unwrap_or_else(|| tracing::debug_span!("step", step_id));
        let rendezvous: Arc<dyn Rendezvous> = match &self.tables {
            Some(m) => m.find_or_create(step_id)?,
            None => Arc::new(LocalRendezvous::new()),
        };
        deliver_sends(&*rendezvous, req.sends)?;
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
        // cancelled when the step ends, and the asked-for keys are collected.
        let deadline = req.timeout.map(|d| self.arm_timeout(&tracker, d));
        let recv_keys = req.recv_keys;
        if deadline.is_some() || !recv_keys.is_empty() {
            tracker.set_finisher(Box::new(move |rendezvous, result| {
                drop(deadline);
                if !recv_keys.is_empty() && result.status.is_ok() {
                    collect_recvs(rendezvous, &recv_keys, result);
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
        Ok(rx)
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
        if self.owns_container {
            for d in &self.devices {
                d.resources.cleanup(&self.default_container);
            }
        }
    }
}
