//! Recv scheduling (whitepaper §5.2; TensorFlow's
//! `GraphOptions.enable_recv_scheduling`): partitioning asks, for every data
//! transfer into the root frame, after which node of the receiving device its
//! `_Recv` should start, so that a tensor crossing devices or tasks arrives
//! shortly before its first reader needs it instead of as soon as it is produced,
//! and does not sit in the receiver's memory meanwhile.
//!
//! **The estimate.** The graph is costed with the placer's cost model (each node's
//! output elements, a matrix product's multiply-adds; a transfer costs a fixed
//! latency plus its bytes). Every loop is contracted to one unit (its `Enter`s,
//! body and `Exit`s), so the units form a DAG (back edges stay inside a unit).
//! Over that DAG the critical path gives each unit its earliest (ASAP) and latest
//! (ALAP) start and finish with unlimited parallelism; the step's estimated length
//! is the longest path.
//!
//! **The choice.** A transfer's latest start is the latest start of its first
//! reader minus its own cost, brought forward by [`PREFETCH`] of the step's length
//! to absorb estimation errors. Its `_Recv` waits for the node `x` on the
//! `_Recv`'s device, in the root frame, whose latest finish is no later than that,
//! and that finishes last in the ASAP schedule; when even that `x` finishes no
//! later than the transfer's source (the `_Recv` would not start later), the
//! `_Recv` is left alone. Partitioning adds the edge as `x → ControlTrigger →
//! _Recv`: a `ControlTrigger` runs live even when `x` is dead, so the wait never
//! kills a received value.
//!
//! **Why this is safe.** Every added edge goes from a node that finishes, in the
//! ALAP schedule, no later than the `_Recv` starts, and the `_Recv`'s readers
//! start after it: the ALAP schedule still satisfies every edge, old and new. So
//! the new edges close no cycle (times rise strictly along any path), and the
//! estimated step is no longer than before (a schedule of the old length exists).
//! The argument needs the whole step's dependencies in view, so nothing is
//! scheduled when some are out of sight:
//! - the graph holds partition transfers already (a task's piece, whose paths
//!   through other tasks are not in it: the master's task-level partitioning
//!   schedules the transfers between tasks);
//! - ops that wait for each other through shared state (queues, barriers,
//!   accumulators, staging areas, readers, mutexes, collectives): when a step has
//!   two or more of them, no `_Recv` waits for one of them or anything after one,
//!   since one of them might wait for a node after the `_Recv`;
//! - partial runs, whose feeds may depend on earlier fetches: their callers do not
//!   ask for scheduling.
//!
//! Transfers inside loops are left alone: their control loop already paces them
//! iteration by iteration.

use std::collections::VecDeque;

use crate::passes::control_flow::ControlFlowInfo;
use crate::passes::place::cost::{bytes_of, node_cost};
use crate::passes::place::PlacementOptions;
use crate::passes::shape_inference::infer_shapes;
use crate::{Graph, NodeId};

/// The share of the estimated step by which a `_Recv` starts ahead of its
/// latest start.
pub const PREFETCH: f64 = 1.0 / 16.0;

/// A data transfer into the root frame, as partitioning made it.
#[derive(Clone, Debug)]
pub(crate) struct Transfer {
    /// The node whose output crosses.
    pub src: NodeId,
    /// That output.
    pub port: i32,
    /// The device of the `_Recv`.
    pub device: usize,
    /// The nodes that read the received value.
    pub readers: Vec<NodeId>,
    /// The `_Recv`'s name.
    pub recv: String,
}

/// Op names of kernels that may wait for another node of the same step through
/// shared state.
const WAITING_OPS: [&str; 9] = [
    "Queue",
    "Barrier",
    "Accumulator",
    "Stage",
    "Unstage",
    "Reader",
    "Mutex",
    "Collective",
    "Dequeue",
];

/// Whether node `v` may wait for another node of its step: an op of
/// [`WAITING_OPS`] with inputs (the ops that make the queue, barrier or mutex
/// itself have none and never wait).
fn may_wait(g: &Graph, v: NodeId) -> bool {
    let node = g.node(v);
    node.def.input.iter().any(|i| !i.starts_with('^'))
        && WAITING_OPS.iter().any(|w| node.op().contains(w))
}

/// The node each transfer's `_Recv` should wait for, or `None`; see the module
/// docs. `assignment` gives each node's device and `location` each device's
/// location.
pub(crate) fn schedule(
    g: &Graph,
    cf: &ControlFlowInfo,
    assignment: &[usize],
    location: &[usize],
    transfers: &[Transfer],
) -> Vec<Option<NodeId>> {
    let mut chosen = vec![None; transfers.len()];
    let n = g.num_nodes();
    let is_partition_transfer = |v: NodeId| {
        let node = g.node(v);
        matches!(node.op(), "_Send" | "_Recv" | "_HostSend" | "_HostRecv")
            && !node
                .def
                .get_attr::<bool>("client_terminated")
                .unwrap_or(false)
    };
    if transfers.is_empty() || (0..n).any(is_partition_transfer) {
        return chosen;
    }
    // Units: a root-frame node is its own; a loop (its Enters, body and Exits) is
    // one, numbered n + its outermost frame.
    let outermost = |mut f: usize| {
        while let Some(p) = cf.frames[f].parent.filter(|&p| p != 0) {
            f = p;
        }
        f
    };
    let unit: Vec<usize> = (0..n)
        .map(|v| match (cf.frame_of[v], cf.output_frame(g, v)) {
            (0, 0) => v,
            (0, f) | (f, _) => n + outermost(f),
        })
        .collect();
    let units = n + cf.frames.len();
    let opts = PlacementOptions::default();
    let shapes = infer_shapes(g);
    let transfer_ns = |src: NodeId, port: usize| {
        opts.ns_per_transfer + opts.ns_per_byte * bytes_of(g, src, port, &shapes)
    };
    let mut cost = vec![0.0f64; units];
    let mut succ: Vec<Vec<(usize, f64)>> = vec![Vec::new(); units];
    let mut indegree = vec![0usize; units];
    let waiting: Vec<NodeId> = (0..n).filter(|&v| may_wait(g, v)).collect();
    let mut tainted = vec![false; units];
    if waiting.len() >= 2 {
        for &v in &waiting {
            tainted[unit[v]] = true;
        }
    }
    for v in 0..n {
        cost[unit[v]] += node_cost(g, v, &shapes, &opts);
        for e in g.in_edges(v) {
            let (a, b) = (unit[e.src], unit[v]);
            if a == b {
                continue;
            }
            let crosses = location[assignment[e.src]] != location[assignment[v]];
            let latency = match (crosses, e.is_control()) {
                (false, _) => 0.0,
                (true, true) => opts.ns_per_transfer,
                (true, false) => transfer_ns(e.src, e.src_output as usize),
            };
            succ[a].push((b, latency));
            indegree[b] += 1;
        }
    }
    for c in &mut cost {
        *c = c.max(1.0);
    }
    // Kahn's order; a cycle between units (a loop fed by its own results) leaves
    // every transfer alone.
    let mut order = Vec::with_capacity(units);
    let mut ready: VecDeque<usize> = (0..units).filter(|&u| indegree[u] == 0).collect();
    while let Some(u) = ready.pop_front() {
        order.push(u);
        for &(s, _) in &succ[u] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push_back(s);
            }
        }
    }
    if order.len() < units {
        return chosen;
    }
    let mut asap = vec![0.0f64; units];
    for &u in &order {
        let finish = asap[u] + cost[u];
        for &(s, latency) in &succ[u] {
            asap[s] = asap[s].max(finish + latency);
            tainted[s] |= tainted[u];
        }
    }
    let asap_finish = |u: usize| asap[u] + cost[u];
    let length = (0..units).map(asap_finish).fold(0.0, f64::max);
    let mut alap_finish = vec![length; units];
    for &u in order.iter().rev() {
        for &(s, latency) in &succ[u] {
            alap_finish[u] = alap_finish[u].min(alap_finish[s] - cost[s] - latency);
        }
    }
    // Per device, the nodes a `_Recv` may wait for, by latest finish, with the
    // one finishing last (ASAP) among each prefix.
    let devices = assignment.iter().copied().max().map_or(0, |m| m + 1);
    let mut candidates: Vec<Vec<NodeId>> = vec![Vec::new(); devices];
    for v in 0..n {
        if unit[v] == v && !tainted[v] {
            candidates[assignment[v]].push(v);
        }
    }
    let best_prefix: Vec<Vec<NodeId>> = candidates
        .iter_mut()
        .map(|c| {
            c.sort_by(|&a, &b| alap_finish[a].total_cmp(&alap_finish[b]));
            c.iter()
                .scan(None::<NodeId>, |best, &v| {
                    if best.is_none_or(|b| asap_finish(v) > asap_finish(b)) {
                        *best = Some(v);
                    }
                    *best
                })
                .collect()
        })
        .collect();
    for (t, pick) in transfers.iter().zip(&mut chosen) {
        let Some(need) = t
            .readers
            .iter()
            .map(|&r| alap_finish[unit[r]] - cost[unit[r]])
            .reduce(f64::min)
        else {
            continue;
        };
        let latest = need - transfer_ns(t.src, t.port as usize) - PREFETCH * length;
        let cands = &candidates[t.device];
        let fits = cands.partition_point(|&v| alap_finish[v] <= latest);
        if fits == 0 {
            continue;
        }
        let x = best_prefix[t.device][fits - 1];
        if asap_finish(x) > asap_finish(unit[t.src]) {
            *pick = Some(x);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::builder::{while_loop, Output, Scope, WhileOptions};
    use crate::ops::{self, QueueOptions};
    use crate::passes::partition::tests::devs;
    use crate::passes::partition::{partition_with, PartitionOptions, Partitions};
    use crate::{DType, Graph, GraphDef, NodeDef, OpRegistry};

    const STAGES: usize = 4;
    const TANH_PER_STAGE: usize = 8;
    const ELEMENTS: i64 = 1 << 16;

    fn scheduling() -> PartitionOptions {
        PartitionOptions {
            recv_scheduling: true,
            ..Default::default()
        }
    }

    /// Device 0 makes `STAGES` vectors at once (`w{i}`); device 1 runs a chain of
    /// `STAGES` stages of `TANH_PER_STAGE` `Tanh`s, stage `i` ending by adding
    /// `w{i}`. `start` makes the chain's first vector. Returns the graph, the
    /// assignment and the chain's node names per stage.
    fn staged(start: impl Fn(&Scope) -> Output) -> (Graph, Vec<usize>, Vec<Vec<String>>) {
        let s = Scope::new();
        let w: Vec<Output> = (0..STAGES)
            .map(|i| {
                let ws = s.with_name_scope(&format!("w{i}"));
                let v = ops::scalar(&ws, i as f32).unwrap();
                ops::fill_to(&ws, &[ELEMENTS], &v).unwrap()
            })
            .collect();
        let mut h = start(&s);
        let mut stages = Vec::new();
        for wi in &w {
            let mut names = Vec::new();
            for _ in 0..TANH_PER_STAGE {
                h = ops::tanh(&s, &h).unwrap();
                names.push(h.op().name().to_owned());
            }
            h = ops::add(&s, &h, wi).unwrap();
            names.push(h.op().name().to_owned());
            stages.push(names);
        }
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let assign = (0..g.num_nodes())
            .map(|v| usize::from(!g.node(v).name().starts_with('w')))
            .collect();
        (g, assign, stages)
    }

    fn fill_start(s: &Scope) -> Output {
        let one = ops::scalar(s, 1.0f32).unwrap();
        ops::fill_to(s, &[ELEMENTS], &one).unwrap()
    }

    fn all_nodes(p: &Partitions) -> Vec<&NodeDef> {
        p.per_device.values().flatten().collect()
    }

    /// The nodes each `_Recv` waits for through a `ControlTrigger`, by the name
    /// scope of the received tensor's source.
    fn waits(p: &Partitions) -> HashMap<String, String> {
        let nodes = all_nodes(p);
        let by_name: HashMap<&str, &NodeDef> =
            nodes.iter().map(|n| (n.name.as_str(), *n)).collect();
        let mut out = HashMap::new();
        for n in nodes.iter().filter(|n| n.op == "_Recv") {
            for i in n.input.iter().filter_map(|i| i.strip_prefix('^')) {
                let t = by_name[i];
                if t.op == "ControlTrigger" {
                    let x = t.input[0].trim_start_matches('^').to_owned();
                    let tensor: String = n.get_attr("tensor_name").unwrap();
                    let src = tensor.split('/').next().unwrap().to_owned();
                    out.insert(src, x);
                }
            }
        }
        out
    }

    /// Every partition imports, and the partitions joined by their transfers (loop
    /// back edges aside) have no cycle.
    fn assert_runnable(p: &Partitions) {
        for nodes in p.per_device.values() {
            let gd = GraphDef {
                node: nodes.clone(),
                ..Default::default()
            };
            Graph::from_graph_def(&gd, OpRegistry::global()).unwrap();
        }
        let nodes = all_nodes(p);
        let index: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut succ = vec![Vec::new(); nodes.len()];
        let mut indegree = vec![0usize; nodes.len()];
        let mut sends = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            if n.op == "_Send" {
                sends.insert(n.get_attr::<String>("tensor_name").unwrap(), i);
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            let mut preds: Vec<usize> = n
                .input
                .iter()
                .map(|s| {
                    let name = s.trim_start_matches('^');
                    index[name.split(':').next().unwrap()]
                })
                .filter(|&p| !(n.op == "Merge" && nodes[p].op == "NextIteration"))
                .collect();
            if n.op == "_Recv" {
                preds.push(sends[&n.get_attr::<String>("tensor_name").unwrap()]);
            }
            for p in preds {
                succ[p].push(i);
                indegree[i] += 1;
            }
        }
        let mut ready: Vec<usize> = (0..nodes.len()).filter(|&i| indegree[i] == 0).collect();
        let mut seen = 0;
        while let Some(u) = ready.pop() {
            seen += 1;
            for &s in &succ[u] {
                indegree[s] -= 1;
                if indegree[s] == 0 {
                    ready.push(s);
                }
            }
        }
        assert_eq!(
            seen,
            nodes.len(),
            "the partitions wait for each other in a cycle"
        );
    }

    #[test]
    fn each_recv_waits_until_shortly_before_its_stage() {
        let (g, assign, stages) = staged(fill_start);
        let p = partition_with(&g, &assign, &devs(2), &scheduling()).unwrap();
        assert_runnable(&p);
        assert_eq!(p.scheduled_recvs, STAGES);
        let got = waits(&p);
        for (i, names) in stages.iter().enumerate() {
            // By the cost model: a stage is 8 Tanh's of 33 µs and an add; the
            // transfer 53 µs, plus 1/16 of the 1.2 ms step ahead: the recv of
            // w{i} starts after the fourth Tanh of stage i.
            assert_eq!(got[&format!("w{i}")], names[3], "w{i}");
        }
        // The waits are ControlTriggers on the receiving device, one per node.
        let triggers: Vec<&NodeDef> = p.per_device[&1]
            .iter()
            .filter(|n| n.op == "ControlTrigger")
            .collect();
        assert_eq!(triggers.len(), STAGES);
        assert!(triggers[0].name.ends_with("/_recv_wait_1"));
        // Off, nothing waits.
        let off = partition_with(&g, &assign, &devs(2), &PartitionOptions::default()).unwrap();
        assert_eq!(off.scheduled_recvs, 0);
        assert!(waits(&off).is_empty());
    }

    #[test]
    fn a_recv_needed_at_once_does_not_wait() {
        // The chain reads w0 first: nothing on device 1 can run before it.
        let s = Scope::new();
        let v = ops::scalar(&s, 1.0f32).unwrap();
        let w = ops::fill_to(&s.with_name_scope("w"), &[ELEMENTS], &v).unwrap();
        let t = s.with_name_scope("t");
        let mut h = ops::tanh(&t, &w).unwrap();
        for _ in 0..4 {
            h = ops::tanh(&t, &h).unwrap();
        }
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let assign: Vec<usize> = (0..g.num_nodes())
            .map(|v| usize::from(g.node(v).name().starts_with("t/")))
            .collect();
        let p = partition_with(&g, &assign, &devs(2), &scheduling()).unwrap();
        assert_eq!((p.transfers, p.scheduled_recvs), (1, 0));
    }

    #[test]
    fn transfers_inside_loops_and_pieces_of_partitions_are_left_alone() {
        // A loop spread node by node over two devices: its transfers run in the
        // loop's frame; only those into the root frame may wait, and the whole
        // stays free of cycles.
        let s = Scope::new();
        let i0 = ops::scalar(&s, 0i32).unwrap();
        let x0 = fill_start(&s);
        let out = while_loop(
            &s,
            |s, v| ops::less(s, &v[0], &ops::scalar(s, 3i32)?),
            |s, v| {
                let one = ops::scalar(s, 1i32)?;
                Ok(vec![ops::add(s, &v[0], &one)?, ops::tanh(s, &v[1])?])
            },
            &[i0, x0],
            &WhileOptions::default(),
        )
        .unwrap();
        let y = ops::tanh(&s, &out[1]).unwrap();
        let _z = ops::tanh(&s, &y).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        // Each loop variable's Enter, Merge, Switch, NextIteration and Exit stay
        // together, as the placer keeps them.
        let plumbing = [
            "Enter",
            "Merge",
            "Switch",
            "NextIteration",
            "Exit",
            "LoopCond",
        ];
        let assign: Vec<usize> = (0..g.num_nodes())
            .map(|v| usize::from(!plumbing.contains(&g.node(v).op())) * (v % 2))
            .collect();
        assert_runnable(
            &partition_with(&g, &assign, &devs(2), &PartitionOptions::default()).unwrap(),
        );
        let p = partition_with(&g, &assign, &devs(2), &scheduling()).unwrap();
        assert_runnable(&p);
        for n in all_nodes(&p).iter().filter(|n| n.op == "_Recv") {
            let in_loop = n.input.iter().any(|i| i.starts_with("^_cf/"));
            let waits = n.input.iter().any(|i| i.contains("/_recv_wait_"));
            assert!(!(in_loop && waits), "{} waits inside a loop", n.name);
        }
        // A piece that already holds transfers (a task's, split again by device)
        // does not show the paths through other pieces: nothing waits there.
        let (g, assign, _) = staged(fill_start);
        let first = partition_with(&g, &assign, &devs(2), &PartitionOptions::default()).unwrap();
        let piece = GraphDef {
            node: first.per_device[&1].clone(),
            ..Default::default()
        };
        let pg = Graph::from_graph_def(&piece, OpRegistry::global()).unwrap();
        let assign: Vec<usize> = (0..pg.num_nodes())
            .map(|v| usize::from(pg.node(v).op() == "_Recv"))
            .collect();
        let p = partition_with(&pg, &assign, &devs(2), &scheduling()).unwrap();
        assert!(p.transfers > 0);
        assert_eq!(p.scheduled_recvs, 0);
    }

    #[test]
    fn nothing_waits_behind_ops_that_may_wait_for_each_other() {
        let queue = |s: &Scope, name: &str| {
            let q = ops::fifo_queue(
                &s.with_name_scope(name),
                &[DType::F32],
                &QueueOptions::default(),
            )
            .unwrap();
            let v = ops::queue_dequeue(s, &q, &[DType::F32]).unwrap().remove(0);
            ops::fill_to(s, &[ELEMENTS], &v).unwrap()
        };
        // One dequeue can only wait for other steps: the chain after it may be
        // waited for.
        let (g, assign, stages) = staged(|s| queue(s, "q"));
        let p = partition_with(&g, &assign, &devs(2), &scheduling()).unwrap();
        assert_eq!(p.scheduled_recvs, STAGES);
        assert_eq!(waits(&p)["w1"], stages[1][3]);
        // Two might wait for each other (an enqueue after a recv, say): nothing
        // after either may be waited for.
        let (g, assign, _) = staged(|s| ops::add(s, &queue(s, "q1"), &queue(s, "q2")).unwrap());
        let p = partition_with(&g, &assign, &devs(2), &scheduling()).unwrap();
        assert_runnable(&p);
        assert_eq!(p.scheduled_recvs, 0);
    }
}
