//! [`ExecutorPlan`]: everything about a partition that does not change between steps,
//! built once (TensorFlow's `ImmutableExecutorState`): per node its kernel, where its
//! inputs live in its frame's input array, its out-edges with precomputed destination
//! slots, and its control-flow role; per loop frame its nodes, input-array size and
//! initial pending counts. A step does no graph work, no string hashing and no
//! kernel construction.
//!
//! Building checks the graph: every node has a kernel for the device; the graph has
//! no cycle except through `NextIteration` back edges; every node's inputs come from
//! one frame; no `Exit` sits outside a loop frame; every `Enter`'s
//! `parallel_iterations` is at least 1.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use graph::{Graph, Node, NodeId, OpRegistry, Result, Status, Tensor};
use kernels::{DeviceContext, Entry, KernelRegistry, OpKernel, OpKernelConstruction};

use super::pending_counts::{PendingCount, PendingCounts};

/// How the executor runs a node's kernel.
pub enum KernelKind {
    /// A `Const`: its value is forwarded without calling the kernel.
    Const(Entry),
    /// A routing op, run by the executor itself
    /// ([`OpKernel::route`]).
    Route(kernels::Route),
    /// `compute` on the executor's thread.
    Sync,
    /// `compute` of a kernel that reports [`OpKernel::is_expensive`]: on the
    /// device's pool while other nodes are ready, completing later as an
    /// asynchronous kernel does (see [`kernels::CpuThreads`]).
    Expensive,
    /// `compute_async`; may complete later through the device's mailbox.
    Async,
}

/// The immutable facts about one node.
pub struct NodeItem {
    /// The node's name.
    pub name: Arc<str>,
    /// The op's name.
    pub op: Arc<str>,
    /// The kernel.
    pub kernel: Arc<dyn OpKernel>,
    /// How to run it.
    pub kind: KernelKind,
    /// Offset of input 0 in its frame's per-iteration input array.
    pub input_start: usize,
    /// Data inputs.
    pub num_inputs: usize,
    /// Outputs.
    pub num_outputs: usize,
    /// Its data out-edges in [`ExecutorPlan::edges`].
    pub out_edges: Range<usize>,
    /// Its control out-edges in [`ExecutorPlan::control_edges`].
    pub out_control: Range<usize>,
    /// Index of its counts in its frame's pending counts.
    pub pending_id: usize,
    /// The frame the node runs in.
    pub frame: usize,
    /// For `Enter`: the frame it enters.
    pub enter_frame: usize,
    /// `Merge`/`RefMerge`.
    pub is_merge: bool,
    /// `Enter`/`RefEnter`.
    pub is_enter: bool,
    /// An `Enter` whose value is loop invariant (`is_constant`).
    pub is_constant_enter: bool,
    /// `Exit`/`RefExit`.
    pub is_exit: bool,
    /// `NextIteration`/`RefNextIteration`.
    pub is_next_iteration: bool,
    /// `ControlTrigger`: runs even when its inputs are dead.
    pub is_control_trigger: bool,
    /// Send/Recv: runs even when dead, to carry deadness across devices.
    pub is_transfer: bool,
    /// May leave outputs unset (dead) without being dead: `Switch`, `Recv`.
    pub may_produce_dead: bool,
    /// Some consumer is a `Merge` or `ControlTrigger` (slow propagation path).
    pub any_consumer_merge_or_trigger: bool,
    /// Per input: the op takes a reference there (else references are read).
    pub input_is_ref: Box<[bool]>,
    /// `Identity`: a reference arriving on its input is passed on unread, so its
    /// consumers read the variable when they run — TensorFlow's `v/read` shares the
    /// variable's buffer, and in-place updates that run before a consumer are
    /// visible to it.
    pub forwards_ref: bool,
    /// Some input may arrive as a variable reference: its producer has a reference
    /// output, or is an `Identity` passing one on. Only such nodes look for
    /// references to read (or forward) before they run.
    pub may_receive_ref: bool,
    /// `Enter`, `Exit` or `NextIteration` (cached [`Self::is_enter_exit_or_next_iter`]):
    /// its outputs go to another frame or iteration.
    pub moves_frames: bool,
}

impl NodeItem {
    /// True for `Enter`, `Exit` and `NextIteration`, which move values between frames
    /// or iterations.
    pub fn is_enter_exit_or_next_iter(&self) -> bool {
        self.is_enter || self.is_exit || self.is_next_iteration
    }
}

/// A data out-edge with its destination resolved. Indices are `u32` (checked when
/// the plan is built) so that an edge fits in 20 bytes.
#[derive(Clone, Copy, Debug)]
pub struct EdgeInfo {
    /// Destination node.
    pub dst: u32,
    /// Source output index.
    pub src_slot: u32,
    /// Destination slot in the destination frame's input array.
    pub input_slot: u32,
    /// The destination's `pending_id` (so activation need not read its item).
    pub dst_pending: u32,
    /// Last edge reading this output: the value may be moved, not cloned.
    pub is_last: bool,
}

/// A control out-edge with its destination resolved.
#[derive(Clone, Copy, Debug)]
pub struct ControlEdgeInfo {
    /// Destination node.
    pub dst: u32,
    /// The destination's `pending_id`.
    pub dst_pending: u32,
}

/// `v` as a `u32` plan index; `ResourceExhausted` for a graph too large to index.
fn index32(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v)
        .map_err(|_| Status::resource_exhausted(format!("graph too large: {what} {v} exceeds u32")))
}

/// A loop frame (or the root frame, index 0) as built once.
pub struct FrameInfo {
    /// The frame's name (`""` for the root).
    pub name: String,
    /// Hash of the name, part of frame instance ids.
    pub name_hash: u64,
    /// The enclosing frame.
    pub parent: Option<usize>,
    /// Bound on live iterations.
    pub parallel_iterations: usize,
    /// Nodes running in this frame.
    pub nodes: Vec<usize>,
    /// Size of the per-iteration input array.
    pub total_inputs: usize,
    /// `Enter` nodes feeding this frame.
    pub input_count: usize,
    /// Initial pending counts, indexed by `pending_id`.
    pub initial_pending: PendingCounts,
}

/// A partition ready to run; see the module docs.
///
/// Constants of the root frame whose consumers are ordinary root-frame nodes are
/// *folded*: they never run; their values are written into their consumers' input
/// slots when a step starts and those consumers wait for one input less.
pub struct ExecutorPlan {
    /// Nodes by dense id.
    pub nodes: Vec<NodeItem>,
    /// Data edges, grouped by source.
    pub edges: Vec<EdgeInfo>,
    /// Control edges, grouped by source.
    pub control_edges: Vec<ControlEdgeInfo>,
    /// Frames; 0 is the root.
    pub frames: Vec<FrameInfo>,
    /// Nodes of the root frame with no inputs: the step starts them.
    pub root_nodes: Vec<usize>,
    /// The device the kernels belong to.
    pub device: Arc<DeviceContext>,
    /// Root-frame input slots prefilled at step start (folded constants).
    pub const_fills: Vec<(usize, Tensor)>,
    /// The most outputs any node has.
    pub max_outputs: usize,
    /// Propagation states of finished steps, reused by later steps.
    pool: std::sync::Mutex<Vec<super::propagator::PropagatorState>>,
}

/// Propagation states kept for reuse per plan.
const POOL_LIMIT: usize = 4;

impl ExecutorPlan {
    /// A propagation state for a new step (reused when one is free).
    pub fn take_propagator(&self) -> super::propagator::PropagatorState {
        let pooled = self.pool.lock().ok().and_then(|mut p| p.pop());
        match pooled {
            Some(mut p) => {
                p.reset(self);
                p
            }
            None => super::propagator::PropagatorState::new(self),
        }
    }

    /// Returns a finished step's propagation state for reuse.
    pub fn return_propagator(&self, p: super::propagator::PropagatorState) {
        if let Ok(mut pool) = self.pool.lock() {
            if pool.len() < POOL_LIMIT {
                pool.push(p);
            }
        }
    }
}

/// Kernels of stateful ops shared across the plans of a session (TensorFlow's
/// `OpSegment`): a random op continues its stream whatever the fetches.
pub trait KernelCache {
    /// The cached kernel of `node`, or the one `create` builds (then cached).
    fn get_or_create(
        &self,
        node: &Node,
        create: &mut dyn FnMut() -> Result<Arc<dyn OpKernel>>,
    ) -> Result<Arc<dyn OpKernel>>;
}

/// Hashes for frame ids (FNV-1a; deterministic across processes and partitions).
pub fn hash64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Combines two hashes.
pub fn hash64_combine(a: u64, b: u64) -> u64 {
    a ^ (b
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(a << 6)
        .wrapping_add(a >> 2))
}

fn op_is(n: &Node, names: &[&str]) -> bool {
    names.contains(&n.op())
}

/// Checks that the graph is acyclic once `NextIteration` out-edges are removed.
fn check_acyclic(g: &Graph) -> Result<()> {
    let n = g.num_nodes();
    let mut indeg = vec![0usize; n];
    for e in g.edges() {
        if !op_is(g.node(e.src), &["NextIteration", "RefNextIteration"]) {
            indeg[e.dst] += 1;
        }
    }
    let mut queue: VecDeque<NodeId> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut seen = 0;
    while let Some(u) = queue.pop_front() {
        seen += 1;
        if op_is(g.node(u), &["NextIteration", "RefNextIteration"]) {
            continue;
        }
        for e in g.out_edges(u) {
            indeg[e.dst] -= 1;
            if indeg[e.dst] == 0 {
                queue.push_back(e.dst);
            }
        }
    }
    if seen < n {
        let stuck = (0..n).find(|&i| indeg[i] > 0).unwrap_or(0);
        let name = g.node(stuck).name().to_owned();
        return Err(Status::invalid_argument(format!(
            "Graph contains a cycle that does not pass through a NextIteration node (node '{name}' is on or after it); cycles are only allowed in while loops"
        ))
        .with_node(name));
    }
    Ok(())
}

/// Checks that every `Enter` allows at least one iteration at a time
/// (`InvalidArgument` naming the first that does not).
fn check_parallel_iterations(g: &Graph) -> Result<()> {
    for id in 0..g.num_nodes() {
        let node = g.node(id);
        if !op_is(node, &["Enter", "RefEnter"]) {
            continue;
        }
        let p: i64 = node.def.get_attr_or("parallel_iterations", 10)?;
        if p < 1 {
            return Err(Status::invalid_argument(format!(
                "parallel_iterations must be a positive integer, got {p} on Enter node '{}'",
                node.name()
            ))
            .with_node(node.name()));
        }
    }
    Ok(())
}

impl ExecutorPlan {
    /// Builds the plan of `g` for `device`; see the module docs for the checks.
    pub fn build(
        g: &Graph,
        device: &Arc<DeviceContext>,
        kernels: &KernelRegistry,
        cache: &dyn KernelCache,
    ) -> Result<ExecutorPlan> {
        check_acyclic(g)?;
        check_parallel_iterations(g)?;
        // Node ids travel as u32 in edges and the ready queue.
        index32(g.num_nodes(), "node count")?;
        let cf = graph::passes::control_flow::build_control_flow_info(g)?;
        let frame_of = &cf.frame_of;
        let n = g.num_nodes();

        // Frames: member nodes, input offsets, pending ids.
        let mut frames: Vec<FrameInfo> = cf
            .frames
            .iter()
            .map(|f| FrameInfo {
                name: f.name.clone(),
                name_hash: hash64(f.name.as_bytes()),
                parent: f.parent,
                parallel_iterations: f.parallel_iterations.max(1) as usize,
                nodes: vec![],
                total_inputs: 0,
                input_count: 0,
                initial_pending: PendingCounts::default(),
            })
            .collect();
        let mut input_start = vec![0usize; n];
        let mut pending_id = vec![0usize; n];
        let mut initial: Vec<Vec<PendingCount>> = vec![vec![]; frames.len()];
        for id in 0..n {
            let node = g.node(id);
            let f = frame_of[id];
            let fr = &mut frames[f];
            pending_id[id] = fr.nodes.len();
            fr.nodes.push(id);
            input_start[id] = fr.total_inputs;
            fr.total_inputs += node.num_inputs();
            let in_edges = g.in_edges(id).count() as u32;
            let control = g.in_edges(id).filter(|e| e.is_control()).count() as u32;
            let pending = if op_is(node, &["Merge", "RefMerge"]) {
                1 + 2 * control
            } else {
                in_edges
            };
            initial[f].push(PendingCount {
                pending,
                dead: 0,
                started: false,
            });
        }
        // Fold root-frame constants into their consumers' input slots.
        let mut folded = vec![false; n];
        let mut const_fills = Vec::new();
        for id in 0..n {
            let node = g.node(id);
            if node.op() != "Const" || frame_of[id] != 0 || g.in_edges(id).next().is_some() {
                continue;
            }
            let plain_consumers = g.out_edges(id).all(|e| {
                let d = g.node(e.dst);
                frame_of[e.dst] == 0 && !op_is(d, &["Merge", "RefMerge", "ControlTrigger"])
            });
            if !plain_consumers {
                continue;
            }
            let value: Tensor = node.def.get_attr("value")?;
            folded[id] = true;
            for e in g.out_edges(id) {
                if !e.is_control() {
                    const_fills.push((input_start[e.dst] + e.dst_input as usize, value.clone()));
                }
                let c = &mut initial[0][pending_id[e.dst]];
                c.pending = c.pending.saturating_sub(1);
            }
        }
        let root_nodes: Vec<usize> = (0..n)
            .filter(|&i| {
                frame_of[i] == 0
                    && !folded[i]
                    && !op_is(g.node(i), &["Merge", "RefMerge"])
                    && initial[0][pending_id[i]].pending == 0
            })
            .collect();
        for (f, init) in initial.into_iter().enumerate() {
            frames[f].initial_pending = PendingCounts::new(init);
        }

        // Edges, grouped by source, with the last reader of each output marked.
        let mut edges = Vec::new();
        let mut control_edges = Vec::new();
        let mut items = Vec::with_capacity(n);
        let emits_ref = g.ref_carriers();
        for id in 0..n {
            let node = g.node(id);
            let e0 = edges.len();
            let c0 = control_edges.len();
            for e in g.out_edges(id) {
                if e.is_control() {
                    control_edges.push(ControlEdgeInfo {
                        dst: index32(e.dst, "node")?,
                        dst_pending: index32(pending_id[e.dst], "pending id")?,
                    });
                } else {
                    let slot = input_start[e.dst] + e.dst_input as usize;
                    edges.push(EdgeInfo {
                        dst: index32(e.dst, "node")?,
                        src_slot: index32(e.src_output as usize, "output")?,
                        input_slot: index32(slot, "input slot")?,
                        dst_pending: index32(pending_id[e.dst], "pending id")?,
                        is_last: false,
                    });
                }
            }
            let mut seen_slots = std::collections::HashSet::new();
            for e in edges[e0..].iter_mut().rev() {
                e.is_last = seen_slots.insert(e.src_slot);
            }
            let any_consumer_merge_or_trigger = g
                .out_edges(id)
                .any(|e| op_is(g.node(e.dst), &["Merge", "RefMerge", "ControlTrigger"]));

            let kernel = cache.get_or_create(node, &mut || {
                let k = kernels.create(&OpKernelConstruction {
                    node: &node.def,
                    op_def: &node.op_def,
                    input_types: &node.sig.inputs,
                    output_types: &node.sig.outputs,
                    device,
                })?;
                Ok(Arc::from(k))
            })?;
            let kind = match kernel.const_value() {
                Some(t) => KernelKind::Const(Entry::Value(t.clone())),
                None if kernel.as_async().is_some() => KernelKind::Async,
                None => match kernel.route() {
                    Some(r) => KernelKind::Route(r),
                    None if kernel.is_expensive() => KernelKind::Expensive,
                    None => KernelKind::Sync,
                },
            };
            let is_enter = op_is(node, &["Enter", "RefEnter"]);
            let enter_frame = if is_enter {
                let name: String = node.def.get_attr("frame_name")?;
                cf.by_name.get(&name).copied().unwrap_or(0)
            } else {
                0
            };
            if is_enter {
                frames[enter_frame].input_count += 1;
            }
            let is_transfer = kernel.is_transfer();
            // A Switch's untaken branch, and a receive of a dead value.
            let may_produce_dead = op_is(node, &["Switch", "RefSwitch"])
                || (is_transfer && kernel.as_async().is_some());
            let is_exit = op_is(node, &["Exit", "RefExit"]);
            let is_next_iteration = op_is(node, &["NextIteration", "RefNextIteration"]);
            let may_receive_ref = g.in_edges(id).any(|e| !e.is_control() && emits_ref[e.src]);
            items.push(NodeItem {
                name: Arc::from(node.name()),
                op: Arc::from(node.op()),
                kernel,
                kind,
                input_start: input_start[id],
                num_inputs: node.num_inputs(),
                num_outputs: node.num_outputs(),
                out_edges: e0..edges.len(),
                out_control: c0..control_edges.len(),
                pending_id: pending_id[id],
                frame: frame_of[id],
                enter_frame,
                is_merge: op_is(node, &["Merge", "RefMerge"]),
                is_enter,
                is_constant_enter: is_enter && node.def.get_attr_or("is_constant", false)?,
                is_exit,
                is_next_iteration,
                is_control_trigger: op_is(node, &["ControlTrigger"]),
                is_transfer,
                may_produce_dead,
                any_consumer_merge_or_trigger,
                input_is_ref: node.sig.inputs.iter().map(|t| t.is_ref).collect(),
                forwards_ref: op_is(node, &["Identity"]),
                may_receive_ref,
                moves_frames: is_enter || is_exit || is_next_iteration,
            });
        }
        let max_outputs = items.iter().map(|i| i.num_outputs).max().unwrap_or(0);
        Ok(ExecutorPlan {
            nodes: items,
            edges,
            control_edges,
            frames,
            root_nodes,
            device: Arc::clone(device),
            const_fills,
            max_outputs,
            pool: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Builds a plan from a `GraphDef`-like node list (tests and tools).
    pub fn build_from_nodes(
        nodes: &[graph::NodeDef],
        device: &Arc<DeviceContext>,
        cache: &dyn KernelCache,
    ) -> Result<ExecutorPlan> {
        let g = Graph::from_graph_def(
            &graph::GraphDef {
                node: nodes.to_vec(),
                ..Default::default()
            },
            OpRegistry::global(),
        )?;
        ExecutorPlan::build(&g, device, KernelRegistry::global(), cache)
    }
}

/// A [`KernelCache`] that caches nothing (every plan builds its own kernels).
pub struct NoKernelCache;

impl KernelCache for NoKernelCache {
    fn get_or_create(
        &self,
        _node: &Node,
        create: &mut dyn FnMut() -> Result<Arc<dyn OpKernel>>,
    ) -> Result<Arc<dyn OpKernel>> {
        create()
    }
}
