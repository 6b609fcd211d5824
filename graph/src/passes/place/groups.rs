//! Colocation groups and their candidate devices (steps 1–3 of [placement](super)).
//!
//! A group is a union-find class of nodes that must share a device. Each group gets
//! either its candidate devices (constraint ∩ kernels, soft placement widening an
//! unsatisfiable constraint) or the error that makes it unplaceable; every member of
//! an unplaceable group carries that error.

use std::collections::{BTreeMap, HashMap};

use super::{KernelSupport, PlacementOptions};
use crate::{AttrValue, DType, DeviceName, Graph, NodeId, Status};

/// Union-find over node ids (path halving; the smaller id is the root).
pub(super) struct UnionFind(Vec<usize>);

impl UnionFind {
    pub(super) fn new(n: usize) -> UnionFind {
        UnionFind((0..n).collect())
    }

    pub(super) fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
}

/// The colocation groups of a graph and what each may be placed on.
pub(super) struct Groups {
    /// Group root of every node.
    pub root: Vec<usize>,
    /// Members of each group, by root.
    pub members: BTreeMap<usize, Vec<NodeId>>,
    /// Candidate devices of each placeable group (never empty), by root.
    pub candidates: BTreeMap<usize, Vec<usize>>,
    /// The error of each unplaceable group, by root.
    pub errors: BTreeMap<usize, Status>,
}

impl Groups {
    /// True when `id` shares its group with no other node.
    pub fn is_alone(&self, id: NodeId) -> bool {
        self.members
            .get(&self.root[id])
            .is_none_or(|m| m.len() == 1)
    }
}

/// Builds the groups: `_class: ["loc:@x"]` attributes, reference and resource edges.
fn union_colocated(g: &Graph) -> UnionFind {
    let n = g.num_nodes();
    let mut uf = UnionFind::new(n);
    // Colocation groups are keyed by the `loc:@name` string, as in TensorFlow: the
    // named node itself may be absent (pruned away because it was fed, say).
    let mut class_leader: HashMap<String, usize> = HashMap::new();
    for id in 0..n {
        let node = g.node(id);
        // Read in place: most nodes have no `_class`, and a typed read of a
        // missing attribute builds an error.
        if let Some(AttrValue::List(classes)) = node.def.attr.get("_class") {
            for c in &classes.s {
                if let Some(target) = c.strip_prefix("loc:@") {
                    let leader = *class_leader
                        .entry(target.to_owned())
                        .or_insert_with(|| g.find(target).unwrap_or(id));
                    uf.union(id, leader);
                }
            }
        }
        for e in g.in_edges(id).filter(|e| !e.is_control()) {
            let t = g.node(e.src).output_type(e.src_output as usize);
            if t.is_some_and(|t| t.is_ref || t.dtype == DType::Resource) {
                uf.union(id, e.src);
            }
        }
    }
    uf
}

/// Steps 1–3 of placement; `pinned` fixes the device of nodes placed before.
pub(super) fn build_groups(
    g: &Graph,
    devices: &[DeviceName],
    kernels: &dyn KernelSupport,
    opts: &PlacementOptions,
    pinned: &[Option<usize>],
) -> Groups {
    let n = g.num_nodes();
    let mut uf = union_colocated(g);
    let root: Vec<usize> = (0..n).map(|id| uf.find(id)).collect();
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (id, &r) in root.iter().enumerate() {
        members.entry(r).or_default().push(id);
    }
    let requests = requested_devices(g);
    let mut candidates = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for (&r, group) in &members {
        match group_candidates(g, devices, kernels, opts, pinned, &requests, group) {
            Ok(c) => {
                candidates.insert(r, c);
            }
            Err(e) => {
                errors.insert(r, e);
            }
        }
    }
    Groups {
        root,
        members,
        candidates,
        errors,
    }
}

/// Each node's requested device, parsed (`None`: no request), as TensorFlow's
/// placer sees it: a node reading a reference or resource whose producer asks
/// for a device its own request contradicts takes the producer's request
/// instead (TensorFlow's "Ignoring device specification … because the input
/// edge from … is a reference connection"): a `replica_device_setter` puts an
/// op reading a variable on the worker and the variable on a ps, and the op
/// follows its variable.
fn requested_devices(g: &Graph) -> Vec<Result<Option<DeviceName>, Status>> {
    let n = g.num_nodes();
    let own: Vec<Result<Option<DeviceName>, Status>> = (0..n)
        .map(|id| {
            let node = g.node(id);
            if node.def.device.is_empty() {
                return Ok(None);
            }
            DeviceName::parse(&node.def.device)
                .map(Some)
                .map_err(|e| e.with_node(node.name()))
        })
        .collect();
    // Resolved in an order where producers come first (each node at most once,
    // so reference cycles through loops end).
    let mut done = vec![false; n];
    let mut out = own.clone();
    let mut stack = Vec::new();
    let mut producers: Vec<usize> = Vec::new();
    for start in 0..n {
        stack.push((start, false));
        while let Some((id, ready)) = stack.pop() {
            if done[id] {
                continue;
            }
            producers.clear();
            producers.extend(
                g.in_edges(id)
                    .filter(|e| !e.is_control())
                    .filter(|e| {
                        g.node(e.src)
                            .output_type(e.src_output as usize)
                            .is_some_and(|t| t.is_ref || t.dtype == DType::Resource)
                    })
                    .map(|e| e.src),
            );
            if !ready {
                stack.push((id, true));
                stack.extend(producers.iter().filter(|&&p| !done[p]).map(|&p| (p, false)));
                continue;
            }
            done[id] = true;
            let Ok(Some(mine)) = &own[id] else { continue };
            for &p in &producers {
                if let Ok(Some(theirs)) = &out[p] {
                    if mine.merge(theirs).is_err() {
                        out[id] = Ok(Some(theirs.clone()));
                        break;
                    }
                }
            }
        }
    }
    out
}

fn group_candidates(
    g: &Graph,
    devices: &[DeviceName],
    kernels: &dyn KernelSupport,
    opts: &PlacementOptions,
    pinned: &[Option<usize>],
    requests: &[Result<Option<DeviceName>, Status>],
    members: &[NodeId],
) -> Result<Vec<usize>, Status> {
    let available = || -> String {
        devices
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Nodes placed by an earlier placement keep their device: the group goes there.
    let mut pinned_to: Option<(usize, NodeId)> = None;
    for &m in members {
        if let Some(d) = pinned.get(m).copied().flatten() {
            match pinned_to {
                Some((other, who)) if other != d => {
                    let node = g.node(m);
                    return Err(Status::invalid_argument(format!(
                        "Cannot colocate nodes '{}' and '{}': they were placed on {} and {} by an earlier step",
                        g.node(who).name(),
                        node.name(),
                        devices[other],
                        devices[d]
                    ))
                    .with_node(node.name()));
                }
                _ => pinned_to = Some((d, m)),
            }
        }
    }
    if let Some((d, _)) = pinned_to {
        return Ok(vec![d]);
    }
    let mut spec = DeviceName::default();
    let mut spec_from: Option<&str> = None;
    let mut conflict = None;
    for &m in members {
        let node = g.node(m);
        let d = match &requests[m] {
            Ok(Some(d)) => d,
            Ok(None) => continue,
            Err(e) => return Err(e.clone()),
        };
        match spec.merge(d) {
            Ok(s) => {
                spec = s;
                spec_from.get_or_insert(node.name());
            }
            Err(e) => {
                conflict = Some(
                    Status::invalid_argument(format!(
                        "Cannot colocate nodes '{}' and '{}': {}",
                        spec_from.unwrap_or(""),
                        node.name(),
                        e.message()
                    ))
                    .with_node(node.name()),
                );
                break;
            }
        }
    }
    if let Some(c) = conflict {
        if !opts.allow_soft_placement {
            return Err(c);
        }
        spec = DeviceName::default();
    }
    if let (None, Some(dt)) = (&spec.job, &opts.default_task) {
        spec.job.clone_from(&dt.job);
        spec.replica = spec.replica.or(dt.replica);
        spec.task = spec.task.or(dt.task);
    }
    let supported = |dev: &DeviceName| {
        let ty = dev.device_type.as_deref().unwrap_or("CPU");
        members
            .iter()
            .all(|&m| kernels.supports(&g.node(m).def, ty))
    };
    let cands: Vec<usize> = (0..devices.len())
        .filter(|&i| spec.matches(&devices[i]) && supported(&devices[i]))
        .collect();
    if !cands.is_empty() {
        return Ok(cands);
    }
    let with_kernels: Vec<usize> = (0..devices.len())
        .filter(|&i| supported(&devices[i]))
        .collect();
    let first = g.node(members[0]);
    if with_kernels.is_empty() {
        let missing = members
            .iter()
            .find(|&&m| {
                devices.iter().all(|d| {
                    !kernels.supports(&g.node(m).def, d.device_type.as_deref().unwrap_or("CPU"))
                })
            })
            .map(|&m| g.node(m))
            .unwrap_or(first);
        return Err(Status::invalid_argument(format!(
            "Cannot assign a device for operation '{}': no kernel for op {} on any available device ({})",
            missing.name(),
            missing.op(),
            available()
        ))
        .with_node(missing.name()));
    }
    if !opts.allow_soft_placement {
        let who = spec_from.unwrap_or(first.name());
        return Err(Status::invalid_argument(format!(
            "Cannot assign a device for operation '{who}': could not satisfy explicit device specification '{spec}' because no supported device matches it; available devices: {}",
            available()
        ))
        .with_node(who));
    }
    Ok(with_kernels)
}
