//! The worker role, split from the master as TensorFlow splits them: a master
//! prunes, places and partitions a step **by task** and talks to each task's worker
//! only through [`WorkerInterface`]; the worker partitions its piece **by device**,
//! builds the executors' plans, and runs them with a per-step rendezvous.
//!
//! - [`WorkerInterface`] — `register_graph`, `run_graph`, `abort_step`,
//!   `cleanup_step`, `deregister_graph`, `cleanup` (TensorFlow's `WorkerInterface`, minus the RPCs
//!   a later layer adds). A session in one process uses [`LocalWorker`]; the
//!   network's worker client is one more implementation.
//! - [`LocalWorker`] — the worker of this process's devices for one session (its
//!   kernels of stateful ops, its default container, its allocation limit).
//!
//! Feeds and fetches reach a piece in two ways, as in TensorFlow: in-process, a
//! master passes `_Arg` values and takes `_Retval`s through the step's call frame
//! (the fast path a local session uses: no key, no table entry); across processes,
//! it sends values under rendezvous keys for the piece's client-terminated `_Recv`s
//! and names the keys of its client-terminated `_Send`s to get back (`send`,
//! `recv_key` of TensorFlow's `RunGraphRequest`).

use std::sync::Arc;
use std::time::Duration;

use graph::passes::partition::PartitionOptions;
use graph::{Graph, GraphDef, OpRegistry, Result, Tensor};
use rendezvous::CompletionReceiver;

use crate::step::StepResult;

#[cfg(feature = "runtime")]
mod local;
pub mod partial_step;
#[cfg(feature = "runtime")]
pub use local::LocalWorker;

/// A piece's nodes as its worker receives them.
#[derive(Clone, Debug)]
pub enum PieceGraph {
    /// Nodes to validate and index (from a peer, a file, a test).
    Nodes(GraphDef),
    /// A graph this process built and validated already (a session's step,
    /// handed to its in-process worker): the worker does not index it again.
    Validated(Graph),
}

impl PieceGraph {
    /// The nodes, given up.
    pub fn into_graph_def(self) -> GraphDef {
        match self {
            PieceGraph::Nodes(gd) => gd,
            PieceGraph::Validated(g) => g.into_graph_def(),
        }
    }

    /// The graph, validated against the global registry unless it was already.
    pub fn into_graph(self) -> Result<Graph> {
        match self {
            PieceGraph::Nodes(gd) => Graph::from_nodes(gd.node, OpRegistry::global()),
            PieceGraph::Validated(g) => Ok(g),
        }
    }
}

impl Default for PieceGraph {
    fn default() -> PieceGraph {
        PieceGraph::Nodes(GraphDef::default())
    }
}

impl From<GraphDef> for PieceGraph {
    fn from(gd: GraphDef) -> PieceGraph {
        PieceGraph::Nodes(gd)
    }
}

impl From<Graph> for PieceGraph {
    fn from(g: Graph) -> PieceGraph {
        PieceGraph::Validated(g)
    }
}

/// A task's piece of a step, to be registered with its worker.
#[derive(Clone, Debug, Default)]
pub struct RegisterGraphRequest {
    /// The piece: every node's `device` is the full name of the device it was
    /// placed on, one of the worker's.
    pub graph: PieceGraph,
    /// Register it for partial runs: its `_Arg`s and `_Retval`s become
    /// client-terminated `_Recv`s and `_Send`s, so feeds can arrive and fetches
    /// leave while it runs (TensorFlow registers a partial run's graph without
    /// its function-call convention the same way).
    pub partial: bool,
    /// How the worker's partitioning by device makes transfers: `bfloat16`
    /// transfers and recv scheduling (TensorFlow's `GraphOptions.
    /// enable_bfloat16_sendrecv` and `enable_recv_scheduling`). Recv scheduling
    /// is skipped for a partial run, whose feeds may wait for its fetches.
    pub partition: PartitionOptions,
}

/// What registering a piece gave.
#[derive(Clone, Debug)]
pub struct RegisteredGraph {
    /// Names the piece in later calls.
    pub handle: Arc<str>,
    /// Its per-device partitions (device name, nodes), for inspection.
    pub partitions: Vec<(String, GraphDef)>,
    /// Send/Recv pairs the worker's partitioning inserted between its devices.
    pub transfers: usize,
    /// The `_Recv`s of those that recv scheduling made wait.
    pub scheduled_recvs: usize,
}

/// One run of a registered piece.
#[derive(Debug, Default)]
pub struct RunGraphRequest {
    /// The registered piece.
    pub handle: Arc<str>,
    /// The step (the same id on every worker the step runs on).
    pub step_id: u64,
    /// In-process feeds: the piece's `_Arg` values, by index.
    pub args: Vec<Tensor>,
    /// Values for the piece's client-terminated `_Recv`s, by full rendezvous key.
    pub sends: Vec<(String, Tensor)>,
    /// Full rendezvous keys of client-terminated `_Send`s whose values to return.
    pub recv_keys: Vec<String>,
    /// Collect per-node statistics.
    pub collect_stats: bool,
    /// Abort the run with `DeadlineExceeded` after this long.
    pub timeout: Option<Duration>,
    /// The caller's span for the step (partition spans nest under it).
    pub span: Option<tracing::Span>,
    /// One call of a partial run (TensorFlow's `is_partial`); `None` runs the
    /// whole step.
    pub partial: Option<PartialCall>,
}

/// One call of a partial run: a step that keeps running between calls, fed and
/// fetched a part at a time (TensorFlow's `partial_run`). The first call for a
/// step id starts it; each call delivers its feeds (and `sends`) and completes
/// once its fetches (and `recv_keys`) have values; the last one also waits for
/// the step to end and reports its status and statistics. `args` and the
/// result's `retvals` are unused: feeds and fetches go by index here.
#[derive(Debug, Default)]
pub struct PartialCall {
    /// Feeds of this call, by `_Arg` index (a piece registered for partial runs).
    pub feeds: Vec<(usize, Tensor)>,
    /// Fetches of this call, by `_Retval` index; their values come back as the
    /// result's `retvals`, in this order.
    pub fetches: Vec<usize>,
    /// The run's last call.
    pub last: bool,
}

/// A worker as a master sees it; see the module docs.
///
/// A partial run ([`PartialCall`]) is ended by its last call, or abandoned with
/// `abort_step` followed by `cleanup_step`.
pub trait WorkerInterface: Send + Sync {
    /// Registers a piece (partitioning it by device and building its plans once);
    /// its handle serves every later run.
    fn register_graph(&self, req: RegisterGraphRequest) -> Result<RegisteredGraph>;

    /// Runs a registered piece for one step. The receiver completes when every
    /// partition of the piece has finished (or the run failed or was aborted); the
    /// result's `retvals` are the `_Retval`s, `recvs` the values under `recv_keys`.
    fn run_graph(&self, req: RunGraphRequest) -> Result<CompletionReceiver<StepResult>>;

    /// Aborts the worker's part of a step (another worker failed, the master's
    /// deadline passed): its partitions stop and its rendezvous fails every waiter.
    fn abort_step(&self, step_id: u64, status: graph::Status);

    /// Ends a step on this worker (TensorFlow's `CleanupGraph`): its table is
    /// dropped and a peer's receive still waiting in it fails with `Aborted`, as
    /// does one that arrives later.
    fn cleanup_step(&self, step_id: u64);

    /// Forgets a registered piece.
    fn deregister_graph(&self, handle: &str) -> Result<()>;

    /// Ends the session on this worker: every piece is forgotten and the session's
    /// default container dropped.
    fn cleanup(&self);
}
