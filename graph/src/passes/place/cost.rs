//! Step 4 of [placement](super): a device for every group with several candidates.
//!
//! The cost model places groups greedily in topological order by simulating
//! execution: each node's compute cost comes from its output shapes, moving an input
//! between devices costs per byte, and a group goes where its first node would finish
//! soonest. An unconstrained `_Arg` alone in its group (a feed) goes where its first
//! consumer went. With a random seed every group instead takes a candidate chosen
//! by a seeded generator (for testing that answers do not depend on placement).

use super::groups::Groups;
use super::PlacementOptions;
use crate::passes::shape_inference::infer_shapes;
use crate::{DType, Graph, Shape};

/// Elements an output of this shape is estimated to hold (unknown dims count 32).
fn estimated_elements(s: &Shape) -> f64 {
    match s.dims() {
        None => 1024.0,
        Some(d) => d.iter().map(|x| x.unwrap_or(32) as f64).product(),
    }
}

/// Estimated nanoseconds of running node `id` (its output elements, a matrix
/// product's multiply-adds).
pub(crate) fn node_cost(
    g: &Graph,
    id: usize,
    shapes: &[Vec<Shape>],
    opts: &PlacementOptions,
) -> f64 {
    let node = g.node(id);
    let out: f64 = shapes[id].iter().map(estimated_elements).sum();
    let work = match node.op() {
        "MatMul" | "BatchMatMul" | "BatchMatMulV2" | "BatchMatMulV3" => {
            // 2·m·n·k: k from the first input's inner dimension.
            let k = g
                .data_input(id, 0)
                .and_then(|e| {
                    shapes[e.src][e.src_output as usize]
                        .dims()
                        .and_then(|d| d.last().copied().flatten())
                })
                .unwrap_or(32) as f64;
            2.0 * out * k
        }
        "Const" | "NoOp" | "_Arg" | "_Retval" | "Identity" | "Placeholder" => 0.0,
        _ => out,
    };
    opts.ns_per_node + work * opts.ns_per_element
}

/// Estimated bytes of output `port` of node `id`.
pub(crate) fn bytes_of(g: &Graph, id: usize, port: usize, shapes: &[Vec<Shape>]) -> f64 {
    let d = g
        .node(id)
        .output_type(port)
        .map(|t| t.dtype)
        .unwrap_or(DType::F32);
    estimated_elements(&shapes[id][port]) * d.size().max(8) as f64
}

/// SplitMix64: a tiny seeded generator, enough to scatter groups over devices.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Assigns a device to every node of a placeable group (`usize::MAX` stays on the
/// nodes of unplaceable ones), visiting nodes in `order`.
pub(super) fn assign(
    g: &Graph,
    groups: &Groups,
    num_devices: usize,
    opts: &PlacementOptions,
    order: &[usize],
) -> Vec<usize> {
    let n = g.num_nodes();
    let mut assigned = vec![usize::MAX; n];
    if let Some(seed) = opts.random_seed {
        let mut rng = SplitMix(seed);
        for (root, cands) in &groups.candidates {
            let d = cands[(rng.next() % cands.len() as u64) as usize];
            for &m in &groups.members[root] {
                assigned[m] = d;
            }
        }
        return assigned;
    }
    let shapes = infer_shapes(g);
    let mut group_device = vec![usize::MAX; n];
    let mut device_free = vec![0.0f64; num_devices];
    let mut finish = vec![0.0f64; n];
    let is_free_arg = |u: usize| {
        g.node(u).op() == "_Arg" && g.node(u).def.device.is_empty() && groups.is_alone(u)
    };
    let mut deferred_args = Vec::new();
    for &u in order {
        let root = groups.root[u];
        let Some(cands) = groups.candidates.get(&root) else {
            continue;
        };
        if is_free_arg(u) {
            deferred_args.push(u);
            continue;
        }
        let cost = node_cost(g, u, &shapes, opts);
        let arrival = |d: usize, assigned: &[usize], finish: &[f64]| -> f64 {
            g.in_edges(u)
                .filter(|e| assigned[e.src] != usize::MAX)
                .map(|e| {
                    let t = finish[e.src];
                    if assigned[e.src] == d || e.is_control() {
                        t
                    } else {
                        t + opts.ns_per_transfer
                            + opts.ns_per_byte * bytes_of(g, e.src, e.src_output as usize, &shapes)
                    }
                })
                .fold(0.0, f64::max)
        };
        let dev = if group_device[root] != usize::MAX {
            group_device[root]
        } else {
            let mut best = cands[0];
            let mut best_t = f64::INFINITY;
            for &d in cands {
                let t = device_free[d].max(arrival(d, &assigned, &finish)) + cost;
                if t < best_t - 1e-9 {
                    best_t = t;
                    best = d;
                }
            }
            group_device[root] = best;
            best
        };
        let start = device_free[dev].max(arrival(dev, &assigned, &finish));
        finish[u] = start + cost;
        device_free[dev] = finish[u];
        assigned[u] = dev;
    }
    for u in deferred_args {
        let cands = &groups.candidates[&groups.root[u]];
        let consumer = g
            .out_edges(u)
            .map(|e| assigned[e.dst])
            .find(|&d| d != usize::MAX && cands.contains(&d));
        assigned[u] = consumer.unwrap_or(cands[0]);
    }
    assigned
}
