//! Placement (TensorFlow whitepaper §3.2.1 and §4.3): assigns every node one device.
//!
//! 1. **Colocation groups** (union-find, `groups`): nodes named by a
//!    `_class: ["loc:@x"]` attribute join `x`'s group; a reference or resource edge
//!    joins its producer and consumer (a variable and every op touching it).
//! 2. **Constraints**: each group merges its members' requested devices (full or
//!    partial specs); a conflict is an error naming both nodes. A node pinned by an
//!    earlier placement fixes its whole group's device.
//! 3. **Candidates**: the devices matching the group's constraint on which every
//!    member has a kernel. With soft placement an unsatisfiable constraint falls
//!    back to any device with kernels; without it, it is an error.
//! 4. **Cost model** (`cost`): groups with several candidates are placed greedily
//!    in topological order by simulated finish time (or, for tests, by a seeded
//!    random choice).
//! 5. **Control-flow colocation** (`control_flow`): loop skeleton nodes follow
//!    their neighbours so a loop's back edge never crosses devices.
//!
//! A session places its whole graph once ([`place_graph`], TensorFlow's
//! `GraphExecutionState`), so a stateful node keeps one device for the session's
//! life whichever steps use it; nodes added later are placed with the earlier ones
//! pinned. An unplaceable node does not fail the placement of the others: its error
//! is reported by [`Placement::check`] for the steps that need it.

mod control_flow;
pub(crate) mod cost;
mod groups;

use std::collections::VecDeque;

use crate::{DeviceName, Graph, NodeDef, NodeId, Result, Status};

/// Answers whether a device type has a kernel for a node.
pub trait KernelSupport {
    /// True when `device_type` can run `node`.
    fn supports(&self, node: &NodeDef, device_type: &str) -> bool;
}

/// Placement options.
#[derive(Clone, Debug)]
pub struct PlacementOptions {
    /// Fall back to a supported device when a constraint cannot be met.
    pub allow_soft_placement: bool,
    /// Estimated cost of one element of compute, in ns.
    pub ns_per_element: f64,
    /// Fixed cost of running one node, in ns.
    pub ns_per_node: f64,
    /// Fixed cost of moving a tensor between devices, in ns.
    pub ns_per_transfer: f64,
    /// Cost of moving one byte between devices, in ns.
    pub ns_per_byte: f64,
    /// Instead of the cost model, put every colocation group on a candidate chosen
    /// by a generator seeded with this (constraints and kernels still respected).
    pub random_seed: Option<u64>,
    /// Where a colocation group goes when its members' requests name no job: the
    /// job, replica and task of this (partial) name complete its request
    /// (TensorFlow's client device in a cluster: unconstrained ops run on the
    /// master's task). `None`: any device.
    pub default_task: Option<DeviceName>,
}

impl Default for PlacementOptions {
    fn default() -> PlacementOptions {
        PlacementOptions {
            allow_soft_placement: false,
            ns_per_element: 0.5,
            ns_per_node: 50.0,
            ns_per_transfer: 1000.0,
            ns_per_byte: 0.1,
            random_seed: None,
            default_task: None,
        }
    }
}

/// The placement of a whole graph: a device per node, or why it has none.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// Device index per node; `usize::MAX` for a node that could not be placed.
    pub device: Vec<usize>,
    /// The nodes that could not be placed, with the reason, by node id.
    pub errors: Vec<(NodeId, Status)>,
}

impl Placement {
    /// The device of `id`, or the error that kept it from having one.
    pub fn device_of(&self, id: NodeId) -> Result<usize> {
        match self.device.get(id) {
            Some(&d) if d != usize::MAX => Ok(d),
            _ => Err(self
                .errors
                .binary_search_by_key(&id, |(n, _)| *n)
                .map(|i| self.errors[i].1.clone())
                .unwrap_or_else(|_| Status::internal(format!("node {id} was not placed")))),
        }
    }

    /// `Ok` when every node of `ids` has a device, else the first error.
    pub fn check(&self, ids: impl IntoIterator<Item = NodeId>) -> Result<()> {
        ids.into_iter()
            .try_for_each(|id| self.device_of(id).map(|_| ()))
    }
}

/// Nodes in topological order, loop back edges (`NextIteration` outputs) ignored;
/// nodes on other cycles (rejected later by the executor) come last.
pub(crate) fn topological_order(g: &Graph) -> Vec<usize> {
    let n = g.num_nodes();
    let is_back = |src: usize| matches!(g.node(src).op(), "NextIteration" | "RefNextIteration");
    let mut indeg = vec![0usize; n];
    for e in g.edges() {
        if !is_back(e.src) {
            indeg[e.dst] += 1;
        }
    }
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(u) = queue.pop_front() {
        order.push(u);
        if is_back(u) {
            continue;
        }
        for e in g.out_edges(u) {
            indeg[e.dst] -= 1;
            if indeg[e.dst] == 0 {
                queue.push_back(e.dst);
            }
        }
    }
    let mut in_order = vec![false; n];
    order.iter().for_each(|&u| in_order[u] = true);
    order.extend((0..n).filter(|&u| !in_order[u]));
    order
}

/// Places `g` on `devices` (full names; their types come from the names), keeping
/// every node of `pinned` (by node id; shorter than the graph is fine) where it is.
/// Never fails as a whole; see [`Placement`].
pub fn place_graph(
    g: &Graph,
    devices: &[DeviceName],
    kernels: &dyn KernelSupport,
    opts: &PlacementOptions,
    pinned: &[Option<usize>],
) -> Placement {
    let n = g.num_nodes();
    if devices.is_empty() {
        return Placement {
            device: vec![usize::MAX; n],
            errors: (0..n)
                .map(|id| (id, Status::failed_precondition("no devices to place on")))
                .collect(),
        };
    }
    let groups = groups::build_groups(g, devices, kernels, opts, pinned);
    let order = topological_order(g);
    let mut device = cost::assign(g, &groups, devices.len(), opts, &order);
    control_flow::colocate_control_flow(g, devices, kernels, pinned, &order, &mut device);
    let mut errors: Vec<(NodeId, Status)> = groups
        .errors
        .iter()
        .flat_map(|(root, e)| groups.members[root].iter().map(move |&m| (m, e.clone())))
        .collect();
    errors.sort_by_key(|(id, _)| *id);
    Placement { device, errors }
}

/// Places all of `g` (see the module docs); the first unplaceable node is an error.
pub fn place(
    g: &Graph,
    devices: &[DeviceName],
    kernels: &dyn KernelSupport,
    opts: &PlacementOptions,
) -> Result<Vec<usize>> {
    if devices.is_empty() {
        return Err(Status::failed_precondition("no devices to place on"));
    }
    let p = place_graph(g, devices, kernels, opts, &[]);
    match p.errors.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(p.device),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Scope;
    use crate::{ops, Code, DType, OpRegistry, Tensor};

    struct AllKernels;
    impl KernelSupport for AllKernels {
        fn supports(&self, node: &NodeDef, _: &str) -> bool {
            node.op != "NoKernelHere"
        }
    }

    fn devices(n: u32) -> Vec<DeviceName> {
        (0..n).map(DeviceName::local_cpu).collect()
    }

    fn graph(s: &Scope) -> Graph {
        Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap()
    }

    #[test]
    fn honours_explicit_and_partial_constraints() {
        let s = Scope::new();
        let a = ops::constant(&s.with_device("/device:CPU:2"), Tensor::scalar(1.0f32)).unwrap();
        let b = ops::constant(
            &s.with_device("/job:localhost/replica:0/task:0/device:CPU:1"),
            Tensor::scalar(1.0f32),
        )
        .unwrap();
        let c = ops::add(&s, &a, &b).unwrap();
        let g = graph(&s);
        let p = place(&g, &devices(3), &AllKernels, &PlacementOptions::default()).unwrap();
        assert_eq!(p[g.find(a.op().name()).unwrap()], 2);
        assert_eq!(p[g.find(b.op().name()).unwrap()], 1);
        assert!(p[g.find(c.op().name()).unwrap()] < 3);
    }

    #[test]
    fn colocates_variables_with_their_users() {
        let s = Scope::new();
        let init = ops::constant(&s, Tensor::scalar(1.0f32)).unwrap();
        let v = ops::Variable::new(&s.with_device("/device:CPU:1"), "v", &init, true).unwrap();
        let other = ops::add(&s.colocate_with(v.var.op()), &init, &init).unwrap();
        let g = graph(&s);
        let p = place(&g, &devices(2), &AllKernels, &PlacementOptions::default()).unwrap();
        for name in ["v", "v/Assign", "v/read", other.op().name()] {
            assert_eq!(p[g.find(name).unwrap()], 1, "{name}");
        }
    }

    #[test]
    fn a_reader_of_a_variable_follows_it_over_its_own_request() {
        // As TensorFlow's placer does ("Ignoring device specification … because
        // the input edge … is a reference connection"): replica_device_setter
        // puts the variable on one device and ops reading it on another.
        let s = Scope::new();
        let init = ops::constant(&s, Tensor::scalar(1.0f32)).unwrap();
        let v = ops::Variable::new(&s.with_device("/device:CPU:1"), "v", &init, true).unwrap();
        let on0 = s.with_device("/device:CPU:0");
        let read = ops::identity(&on0.colocate_with(v.var.op()), &v.var).unwrap();
        let plain = ops::add(&on0, &v.value, &v.value).unwrap();
        let g = graph(&s);
        let p = place(&g, &devices(2), &AllKernels, &PlacementOptions::default()).unwrap();
        assert_eq!(p[g.find(read.op().name()).unwrap()], 1);
        // An op reading the variable's value (not the reference) keeps its request.
        assert_eq!(p[g.find(plain.op().name()).unwrap()], 0);
    }

    #[test]
    fn impossible_constraints_are_errors_unless_soft() {
        let s = Scope::new();
        let a = ops::constant(&s.with_device("/device:CPU:9"), Tensor::scalar(1.0f32)).unwrap();
        let g = graph(&s);
        let e = place(&g, &devices(2), &AllKernels, &PlacementOptions::default()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.node(), Some(a.op().name()));
        let soft = PlacementOptions {
            allow_soft_placement: true,
            ..Default::default()
        };
        assert!(place(&g, &devices(2), &AllKernels, &soft).is_ok());

        let s = Scope::new();
        let x = ops::constant(&s.with_device("/device:CPU:0"), Tensor::scalar(1.0f32)).unwrap();
        ops::identity(&s.with_device("/device:CPU:1").colocate_with(x.op()), &x).unwrap();
        let e = place(
            &graph(&s),
            &devices(2),
            &AllKernels,
            &PlacementOptions::default(),
        )
        .unwrap_err();
        assert!(e.message().contains("Cannot colocate"), "{e}");
    }

    #[test]
    fn cost_model_spreads_independent_heavy_work() {
        let s = Scope::new();
        let big = Tensor::zeros(DType::F32, [512, 512]);
        let a = ops::constant(&s, big.clone()).unwrap();
        let b = ops::constant(&s, big).unwrap();
        // two independent heavy element-wise chains
        let mut x = a.clone();
        let mut y = b.clone();
        for _ in 0..4 {
            x = ops::mul(&s, &x, &x).unwrap();
            y = ops::mul(&s, &y, &y).unwrap();
        }
        let g = graph(&s);
        let p = place(&g, &devices(2), &AllKernels, &PlacementOptions::default()).unwrap();
        assert_ne!(
            p[g.find(x.op().name()).unwrap()],
            p[g.find(y.op().name()).unwrap()]
        );
        // and a chain of cheap scalar ops stays on one device
        let s = Scope::new();
        let mut z = ops::constant(&s, Tensor::scalar(1.0f32)).unwrap();
        for _ in 0..10 {
            z = ops::add(&s, &z, &z).unwrap();
        }
        let g = graph(&s);
        let p = place(&g, &devices(4), &AllKernels, &PlacementOptions::default()).unwrap();
        assert!(p.iter().all(|&d| d == p[0]));
    }
}
