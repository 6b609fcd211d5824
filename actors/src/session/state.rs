//! [`SessionState`]: the master role of a session as a plain state machine — the
//! session's graph, and for each step signature the [`CompiledStep`] built once by
//! rewriting, placing, optimizing ([`graph::passes::optimize`]: constant folding
//! and CSE, as [`SessionOptions::optimizer`] asks) and partitioning it by task, each
//! task's piece registered with its worker (TensorFlow's `MasterSession`), which
//! partitions it by device and plans it. The session actor hosts it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use graph::passes::control_flow::{build_control_flow_info, ControlFlowInfo};
use graph::passes::optimize::{
    optimize_graph, OptimizerOptions, PassReport, RewriterConfig, StepFacts,
};
use graph::passes::partition::PartitionOptions;
use graph::passes::place::{place_graph, KernelSupport, Placement, PlacementOptions};
use graph::passes::prune::{rewrite_for_step, FeedSpec};
use graph::passes::shape_inference::infer_shapes;
use graph::{DeviceName, Graph, GraphDef, NodeDef, OpRegistry, Result, Shape, Status};
use kernels::evaluator::CpuEvaluator;
use kernels::KernelRegistry;

use crate::worker::{RegisterGraphRequest, WorkerInterface};

/// A step signature: feed, fetch and target names, in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StepSignature {
    /// Fed tensor names.
    pub feeds: Vec<String>,
    /// Fetched tensor names.
    pub fetches: Vec<String>,
    /// Target node names.
    pub targets: Vec<String>,
    /// Compiled for partial runs (feeds and fetches by rendezvous key, so they
    /// can cross while the step runs) rather than for whole steps.
    pub partial: bool,
}

impl StepSignature {
    /// A signature from borrowed names.
    pub fn new(feeds: &[&str], fetches: &[&str], targets: &[&str]) -> StepSignature {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        StepSignature {
            feeds: own(feeds),
            fetches: own(fetches),
            targets: own(targets),
            partial: false,
        }
    }

    /// True when it equals the (whole-step) signature of these names.
    pub fn matches(&self, feeds: &[&str], fetches: &[&str], targets: &[&str]) -> bool {
        fn eq(a: &[String], b: &[&str]) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
        }
        !self.partial
            && eq(&self.feeds, feeds)
            && eq(&self.fetches, fetches)
            && eq(&self.targets, targets)
    }
}

/// A hash of a signature computed from borrowed names, without allocating.
pub fn signature_hash(feeds: &[&str], fetches: &[&str], targets: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, group) in [feeds, fetches, targets].iter().enumerate() {
        for s in group.iter() {
            for b in s.bytes().chain([0xff]) {
                h ^= b as u64;
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h ^= 0x100 + k as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One per-device partition of a compiled step, for inspection.
pub struct CompiledPartition {
    /// The device's full name.
    pub device: String,
    /// The partition's nodes.
    pub graph: GraphDef,
}

/// A step signature, built; see the module docs.
pub struct CompiledStep {
    /// The signature.
    pub signature: StepSignature,
    /// The step's piece as registered with the worker.
    pub handle: Arc<str>,
    /// The worker's partitions, by device.
    pub partitions: Vec<CompiledPartition>,
    /// Feeds, in order.
    pub feeds: Vec<FeedSpec>,
    /// Each node of the step and the device it was placed on.
    pub placement: Vec<(String, String)>,
    /// Send/Recv pairs inserted by partitioning.
    pub transfers: usize,
    /// The `_Recv`s of those that recv scheduling made wait
    /// ([`SessionOptions::enable_recv_scheduling`]).
    pub scheduled_recvs: usize,
    /// A partial run's: for each fetch, the feeds (by index) it depends on, so
    /// that a fetch asked for before its feeds were given is an error, not a
    /// wait that never ends (TensorFlow's `CheckFetch`). Empty for a whole step.
    pub fetch_feeds: Vec<Vec<usize>>,
    /// What each graph optimization pass did to the step (none when disabled).
    pub optimizations: Vec<PassReport>,
}

/// For each `_Retval` of `g` by index, the `_Arg`s (by index) it depends on
/// through data or control edges.
fn fetch_feeds(g: &Graph) -> Result<Vec<Vec<usize>>> {
    let index = |id: usize| -> Result<usize> {
        let i: i64 = g.node(id).def.get_attr("index")?;
        usize::try_from(i).map_err(|_| {
            Status::invalid_argument("a negative _Arg or _Retval index")
                .with_node(g.node(id).name())
        })
    };
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut seen = vec![usize::MAX; g.num_nodes()];
    for r in (0..g.num_nodes()).filter(|&i| g.node(i).op() == "_Retval") {
        let mut feeds = Vec::new();
        let mut stack = vec![r];
        seen[r] = r;
        while let Some(id) = stack.pop() {
            if g.node(id).op() == "_Arg" {
                feeds.push(index(id)?);
            }
            for e in g.in_edges(id) {
                if seen[e.src] != r {
                    seen[e.src] = r;
                    stack.push(e.src);
                }
            }
        }
        feeds.sort_unstable();
        out.push((index(r)?, feeds));
    }
    out.sort_by_key(|x| x.0);
    Ok(out.into_iter().map(|x| x.1).collect())
}

struct RegistrySupport<'a>(&'a KernelRegistry);

impl KernelSupport for RegistrySupport<'_> {
    fn supports(&self, node: &NodeDef, device_type: &str) -> bool {
        self.0.supports(node, device_type)
    }
}

/// Session options (TensorFlow's `ConfigProto`, in part).
///
/// Non-exhaustive: build them with the `with_*` setters,
/// `SessionOptions::default().with_cpu_devices(2)`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SessionOptions {
    /// CPU devices of a session's private runtime (ignored for a shared runtime).
    pub cpu_devices: usize,
    /// Fall back to a supported device when a device constraint cannot be met.
    pub allow_soft_placement: bool,
    /// Applied to every step that sets no timeout of its own.
    pub default_timeout: Option<std::time::Duration>,
    /// Place every colocation group on a device chosen by a generator seeded with
    /// this instead of by the cost model (constraints and kernels still respected):
    /// for checking that a graph's answers do not depend on its placement.
    pub random_placement_seed: Option<u64>,
    /// The most bytes one tensor a kernel of this session may allocate (TensorFlow's
    /// per-device memory limit, applied per allocation); a larger one fails its step
    /// with `RESOURCE_EXHAUSTED` naming the node, and the session stays usable.
    /// `None`: the machine's memory
    /// ([`kernels::allocator::default_max_allocation_bytes`]).
    pub max_allocation_bytes: Option<usize>,
    /// The job and task (`/job:worker/replica:0/task:0`) that nodes whose device
    /// request names no job are placed on: a cluster's master sets its own task
    /// (TensorFlow's client device). `None`: any device.
    pub default_task: Option<DeviceName>,
    /// The graph optimizations run on every step built (TensorFlow's
    /// `GraphOptions.optimizer_options`): by default, as TensorFlow's L1, constant
    /// folding and common subexpression elimination.
    pub optimizer: OptimizerOptions,
    /// The graph rewrites of TensorFlow's grappler this runtime implements
    /// (`GraphOptions.rewrite_options`): by default, as in TensorFlow, the
    /// remapper's `MatMul + BiasAdd (+ activation)` fusion.
    pub rewrite_options: RewriterConfig,
    /// Send `float32` tensors between devices and tasks as `bfloat16`, rounded
    /// to nearest even, and widen them on receipt (TensorFlow's
    /// `GraphOptions.enable_bfloat16_sendrecv`, the lossy compression of the
    /// whitepaper's §5.5): half the bytes, about three significant digits. Off
    /// by default; feeds and fetches are never compressed.
    pub enable_bfloat16_sendrecv: bool,
    /// Start each cross-device `_Recv` as late as the step's estimated critical
    /// path allows, so a received tensor does not wait in the receiver's memory
    /// long before it is read (TensorFlow's `GraphOptions.enable_recv_scheduling`,
    /// the whitepaper's §5.2; see [`graph::passes::recv_schedule`]). Off by
    /// default, as in TensorFlow.
    pub enable_recv_scheduling: bool,
    /// Let element-wise kernels write their output into an input buffer that
    /// nothing else holds (TensorFlow's `forward_input_or_allocate_output`; a
    /// buffer another consumer, a fetch or a variable still reads is never
    /// written). On by default, as in TensorFlow, which has no switch for it:
    /// turning it off only measures what it saves.
    pub buffer_forwarding: bool,
    /// TensorFlow's `ConfigProto.inter_op_parallelism_threads`: 1 (or negative)
    /// runs a step's nodes on each device one at a time; 0, the default, lets a
    /// device run expensive kernels (matrix products, convolutions) of
    /// independent branches at once on its cores (see [`kernels::CpuThreads`]).
    pub inter_op_parallelism_threads: i32,
    /// TensorFlow's `ConfigProto.intra_op_parallelism_threads`: the threads one
    /// expensive kernel splits its work over and the branches run on; 0, the
    /// default, every core (rayon's global pool), `n` a pool of `n` threads of
    /// the session's own.
    pub intra_op_parallelism_threads: i32,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            cpu_devices: 1,
            allow_soft_placement: false,
            default_timeout: None,
            random_placement_seed: None,
            max_allocation_bytes: None,
            default_task: None,
            optimizer: OptimizerOptions::default(),
            rewrite_options: RewriterConfig::default(),
            enable_bfloat16_sendrecv: false,
            enable_recv_scheduling: false,
            buffer_forwarding: true,
            inter_op_parallelism_threads: 0,
            intra_op_parallelism_threads: 0,
        }
    }
}

impl SessionOptions {
    graph::option_setters! {
        /// Sets [`cpu_devices`](Self::cpu_devices).
        with_cpu_devices => cpu_devices: usize;
        /// Sets [`allow_soft_placement`](Self::allow_soft_placement).
        with_allow_soft_placement => allow_soft_placement: bool;
        /// Sets [`default_timeout`](Self::default_timeout).
        with_default_timeout => default_timeout: Option<std::time::Duration> as into;
        /// Sets [`random_placement_seed`](Self::random_placement_seed).
        with_random_placement_seed => random_placement_seed: Option<u64> as into;
        /// Sets [`max_allocation_bytes`](Self::max_allocation_bytes).
        with_max_allocation_bytes => max_allocation_bytes: Option<usize> as into;
        /// Sets [`default_task`](Self::default_task).
        with_default_task => default_task: Option<DeviceName> as into;
        /// Sets [`optimizer`](Self::optimizer).
        with_optimizer => optimizer: OptimizerOptions;
        /// Sets [`rewrite_options`](Self::rewrite_options).
        with_rewrite_options => rewrite_options: RewriterConfig;
        /// Sets [`enable_bfloat16_sendrecv`](Self::enable_bfloat16_sendrecv).
        with_enable_bfloat16_sendrecv => enable_bfloat16_sendrecv: bool;
        /// Sets [`enable_recv_scheduling`](Self::enable_recv_scheduling).
        with_enable_recv_scheduling => enable_recv_scheduling: bool;
        /// Sets [`buffer_forwarding`](Self::buffer_forwarding).
        with_buffer_forwarding => buffer_forwarding: bool;
        /// Sets [`inter_op_parallelism_threads`](Self::inter_op_parallelism_threads).
        with_inter_op_parallelism_threads => inter_op_parallelism_threads: i32;
        /// Sets [`intra_op_parallelism_threads`](Self::intra_op_parallelism_threads).
        with_intra_op_parallelism_threads => intra_op_parallelism_threads: i32;
    }
}

impl SessionOptions {
    /// How partitioning makes this session's transfers.
    pub fn partition_options(&self) -> PartitionOptions {
        PartitionOptions {
            bfloat16_transfers: self.enable_bfloat16_sendrecv,
            recv_scheduling: self.enable_recv_scheduling,
        }
    }
}

/// The session's master state; see the module docs.
pub struct SessionState {
    graph: Graph,
    devices: Vec<DeviceName>,
    worker: Arc<dyn WorkerInterface>,
    options: SessionOptions,
    cache: HashMap<StepSignature, Arc<CompiledStep>>,
    builds: Arc<AtomicU64>,
    closed: bool,
    /// The whole graph's placement and frames, for its first `placed_nodes` nodes.
    placed: Option<PlacedGraph>,
}

/// What a session knows of its whole graph, computed once per extension: the
/// device of every node (so a stateful node keeps one device for the session's
/// life, whichever steps use it: TensorFlow places the whole graph once and prunes
/// afterwards) and the loop frame of every node (`Err` for a graph whose frames are
/// malformed: the steps that need such nodes fail when partitioned).
struct PlacedGraph {
    placement: Placement,
    frames: std::result::Result<ControlFlowInfo, Status>,
    nodes: usize,
}

impl SessionState {
    /// A session placing on `devices`, all of them `worker`'s; `builds` counts
    /// compiled signatures.
    pub fn new(
        devices: Vec<DeviceName>,
        worker: Arc<dyn WorkerInterface>,
        options: SessionOptions,
        builds: Arc<AtomicU64>,
    ) -> SessionState {
        SessionState {
            graph: Graph::new(),
            devices,
            worker,
            options,
            cache: HashMap::new(),
            builds,
            closed: false,
            placed: None,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Status::cancelled("Session has been closed."));
        }
        Ok(())
    }

    /// Adds nodes to the graph (all or nothing).
    pub fn extend(&mut self, gd: &GraphDef) -> Result<()> {
        self.check_open()?;
        self.graph.extend(&gd.node, OpRegistry::global())
    }

    /// The compiled step for `sig`, building it on first use.
    pub fn prepare(&mut self, sig: &StepSignature) -> Result<Arc<CompiledStep>> {
        self.check_open()?;
        if let Some(c) = self.cache.get(sig) {
            return Ok(Arc::clone(c));
        }
        let _span =
            tracing::debug_span!("build_step", fetches = ?sig.fetches, targets = ?sig.targets)
                .entered();
        self.place_graph();
        let c = Arc::new(self.build(sig)?);
        self.builds.fetch_add(1, Ordering::Relaxed);
        self.cache.insert(sig.clone(), Arc::clone(&c));
        Ok(c)
    }

    /// Places the nodes added since the last placement, the earlier ones pinned.
    fn place_graph(&mut self) {
        let n = self.graph.num_nodes();
        if self.placed.as_ref().is_some_and(|p| p.nodes == n) {
            return;
        }
        let pinned: Vec<Option<usize>> = self.placed.as_ref().map_or_else(Vec::new, |p| {
            let d = &p.placement.device;
            d.iter().map(|&d| (d != usize::MAX).then_some(d)).collect()
        });
        let names = &self.devices;
        let popts = PlacementOptions {
            allow_soft_placement: self.options.allow_soft_placement,
            random_seed: self.options.random_placement_seed,
            default_task: self.options.default_task.clone(),
            ..Default::default()
        };
        let registry = KernelRegistry::global();
        let placement = place_graph(
            &self.graph,
            names,
            &RegistrySupport(registry),
            &popts,
            &pinned,
        );
        for (n, &d) in self
            .graph
            .nodes()
            .iter()
            .zip(&placement.device)
            .skip(pinned.len())
        {
            if let Some(dev) = names.get(d) {
                tracing::trace!(node = n.name(), device = %dev, "placed");
            }
        }
        self.placed = Some(PlacedGraph {
            placement,
            frames: build_control_flow_info(&self.graph),
            nodes: n,
        });
    }

    /// The device of every node of the step graph `g`: the whole graph's placement
    /// for the session's nodes; a feed's `_Arg` goes where its first consumer is, a
    /// fetch's `_Retval` where its producer is.
    fn step_assignment(&self, placed: &PlacedGraph, g: &Graph) -> Result<Vec<usize>> {
        let mut a = vec![usize::MAX; g.num_nodes()];
        for (i, n) in g.nodes().iter().enumerate() {
            match self.graph.find(n.name()) {
                Some(orig) => a[i] = placed.placement.device_of(orig)?,
                None if matches!(n.op(), "_Arg" | "_Retval") => {}
                None => {
                    return Err(Status::internal("a step node is not in the session graph")
                        .with_node(n.name()))
                }
            }
        }
        for i in 0..a.len() {
            if a[i] == usize::MAX && g.node(i).op() == "_Arg" {
                a[i] = g
                    .out_edges(i)
                    .map(|e| a[e.dst])
                    .find(|&d| d != usize::MAX)
                    .unwrap_or(0);
            }
        }
        for i in 0..a.len() {
            if a[i] == usize::MAX {
                a[i] = g
                    .data_input(i, 0)
                    .map(|e| a[e.src])
                    .filter(|&d| d != usize::MAX)
                    .unwrap_or(0);
            }
        }
        Ok(a)
    }

    fn build(&self, sig: &StepSignature) -> Result<CompiledStep> {
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let placed = self
            .placed
            .as_ref()
            .ok_or_else(|| Status::internal("the session graph was not placed"))?;
        let mut sg = rewrite_for_step(
            &self.graph,
            &refs(&sig.feeds),
            &refs(&sig.fetches),
            &refs(&sig.targets),
        )?;
        if let Ok(frames) = &placed.frames {
            check_outside_loops(&self.graph, frames, sig)?;
        }
        self.static_feed_shapes(&mut sg.feeds)?;
        let mut g = Graph::from_nodes(std::mem::take(&mut sg.nodes), OpRegistry::global())?;
        let assignment = self.step_assignment(placed, &g)?;
        // The whole step is this process's worker's piece (one task): each node
        // goes with the name of its device.
        let names: Vec<String> = self.devices.iter().map(ToString::to_string).collect();
        for (id, &d) in assignment.iter().enumerate() {
            g.node_def_mut(id).device.clone_from(&names[d]);
        }
        // Optimized after placement, as TensorFlow optimizes placed graphs: CSE
        // merges only nodes on one device, and a folded Const keeps its node's.
        let (g, optimizations) = self.optimize(g, &sg.feeds, sig)?;
        let placement = g
            .nodes()
            .iter()
            .map(|n| (n.def.name.clone(), n.def.device.clone()))
            .collect();
        let fetch_feeds = if sig.partial {
            fetch_feeds(&g)?
        } else {
            Vec::new()
        };
        let nodes = g.num_nodes();
        let registered = self.worker.register_graph(RegisterGraphRequest {
            graph: g.into(),
            partial: sig.partial,
            partition: self.options.partition_options(),
        })?;
        tracing::debug!(
            nodes,
            partitions = registered.partitions.len(),
            transfers = registered.transfers,
            scheduled_recvs = registered.scheduled_recvs,
            "step placed and partitioned"
        );
        Ok(CompiledStep {
            signature: sig.clone(),
            handle: registered.handle,
            partitions: registered
                .partitions
                .into_iter()
                .map(|(device, graph)| CompiledPartition { device, graph })
                .collect(),
            feeds: sg.feeds,
            placement,
            transfers: registered.transfers,
            scheduled_recvs: registered.scheduled_recvs,
            fetch_feeds,
            optimizations,
        })
    }

    /// Runs the graph optimizations the session's options enable on the placed
    /// step `g`; returns it optimized and what each pass did.
    fn optimize(
        &self,
        g: Graph,
        feeds: &[FeedSpec],
        sig: &StepSignature,
    ) -> Result<(Graph, Vec<PassReport>)> {
        let options = &self.options.optimizer;
        let rewriter = &self.options.rewrite_options;
        if options.is_disabled() && rewriter.is_disabled() {
            return Ok((g, Vec::new()));
        }
        let max_allocation = self
            .options
            .max_allocation_bytes
            .unwrap_or_else(kernels::allocator::default_max_allocation_bytes);
        let evaluator = CpuEvaluator::new(KernelRegistry::global(), max_allocation);
        let arg_shapes: Vec<Shape> = feeds.iter().map(|f| f.shape.clone()).collect();
        let facts = StepFacts {
            registry: OpRegistry::global(),
            evaluator: &evaluator,
            arg_shapes: &arg_shapes,
            keep: &sig.targets,
        };
        let (g, passes) = optimize_graph(g, options, rewriter, &facts)?;
        for p in &passes {
            tracing::debug!(
                pass = p.pass,
                nodes_before = p.nodes_before,
                nodes_after = p.nodes_after,
                changed = p.changed,
                "graph optimization"
            );
        }
        Ok((g, passes))
    }

    /// A fed tensor whose node declares no shape (not a `Placeholder`) must still
    /// fit the shape inferred for it statically, as TensorFlow's client checks.
    fn static_feed_shapes(&self, feeds: &mut [FeedSpec]) -> Result<()> {
        if feeds.iter().all(|f| f.shape.dims().is_some()) {
            return Ok(());
        }
        let shapes = infer_shapes(&self.graph);
        for f in feeds.iter_mut().filter(|f| f.shape.dims().is_none()) {
            let (id, t) = graph::passes::prune::resolve_tensor(&self.graph, &f.name, "feed")?;
            let s: &Shape = &shapes[id][t.port as usize];
            f.shape = s.clone();
        }
        Ok(())
    }

    /// Closes the session: drops its default container on every device and every
    /// compiled step. Later calls fail with `Cancelled`.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        for c in self.cache.drain() {
            let _ = self.worker.deregister_graph(&c.1.handle);
        }
        self.worker.cleanup();
    }

    /// The session's graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
}

/// Feeds, fetches and targets must live outside every while loop, as TensorFlow's
/// client requires (its `WhileContext` marks the ops of a loop not fetchable and
/// their outputs not feedable): a value inside a loop exists once per iteration.
fn check_outside_loops(g: &Graph, frames: &ControlFlowInfo, sig: &StepSignature) -> Result<()> {
    let names = sig
        .feeds
        .iter()
        .map(|n| (n, "feedable"))
        .chain(sig.fetches.iter().map(|n| (n, "fetchable")))
        .chain(sig.targets.iter().map(|n| (n, "fetchable")));
    for (name, what) in names {
        let node = name.trim_start_matches('^');
        let node = node.split(':').next().unwrap_or(node);
        let Some(id) = g.find(node) else { continue };
        let f = frames.output_frame(g, id);
        if f != 0 {
            return Err(Status::invalid_argument(format!(
                "Operation '{node}' has been marked as not {what}: it runs inside while loop '{}', once per iteration; use a value that leaves the loop through its Exit",
                frames.frames[f].name
            ))
            .with_node(node));
        }
    }
    Ok(())
}
