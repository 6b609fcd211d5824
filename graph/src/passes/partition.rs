//! Partitioning (TensorFlow's `graph_partition.cc`): splits a placed graph into one
//! node list per device. Every data edge between devices becomes a `_Send` on the
//! source device and a `_Recv` on the destination, **one pair per (tensor,
//! destination device)** however many consumers read it there. A control edge
//! between devices becomes a dummy `Const` on the source (run after the source), sent
//! to a `_Recv` followed by an `Identity` that the destination waits on (so a dead
//! source makes the destination dead, as a local control edge would).
//!
//! **Loops across devices.** A `_Recv` has no inputs, so on its own it would run once
//! in the root frame. For an edge inside a loop frame, the destination device gets a
//! *control loop* for that frame (once per frame and device, nested loops stacked):
//! `Enter → Merge → Switch(LoopCond) → NextIteration → Merge`, driven by the frame's
//! `LoopCond` (received from its device every iteration), and every `_Recv` of the
//! frame on that device waits on the control loop's `Merge`. Each partition thus
//! iterates in step with the one that decides the loop, and Send/Recv pairs meet
//! under keys carrying the same frame and iteration. A device that hosts part of a
//! frame spread over several devices but has no `NextIteration` of it gets a
//! control loop too, so the loop invariants there are read in every iteration. (The
//! placer keeps each loop variable's `Enter`/`Merge`/`Switch`/`NextIteration`/`Exit`
//! together, so no back edge ever crosses devices.)
//!
//! **Forwarded variable references.** An `Identity` of a reference variable
//! (`v/read`) forwards the reference unread: on one device its consumer reads the
//! variable when the consumer runs, after its control inputs (the assignments
//! `tf.control_dependencies` orders it after). A shared `_Send` would read it as
//! soon as `v/read` ran. So a cross-device edge from such a node into a consumer
//! with control inputs gets a `_Send`/`_Recv` pair of its own, and that `_Send`
//! waits for the consumer's control inputs (brought to the variable's device as
//! control transfers when they run elsewhere). No cycle can arise: that pair feeds
//! the consumer alone, so a control input that depended on it would depend on the
//! consumer. A consumer without control inputs shares the pair, reading the
//! variable early as TensorFlow's partitions do.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::node_def::TensorId;
use crate::passes::control_flow::{build_control_flow_info, ControlFlowInfo};
use crate::{DType, Graph, NodeDef, Result, Status, Tensor};

/// A device as partitioning names it.
#[derive(Clone, Debug)]
pub struct PartitionDevice {
    /// Full device name.
    pub name: String,
    /// Its incarnation (part of rendezvous keys).
    pub incarnation: u64,
}

/// The partitions of a graph.
#[derive(Clone, Debug, Default)]
pub struct Partitions {
    /// Node lists by device index.
    pub per_device: BTreeMap<usize, Vec<NodeDef>>,
    /// The number of `_Send`/`_Recv` pairs inserted.
    pub transfers: usize,
}

fn transfer_attrs(
    n: NodeDef,
    tensor_name: &str,
    src: &PartitionDevice,
    dst: &PartitionDevice,
) -> NodeDef {
    n.with_attr("tensor_name", tensor_name)
        .with_attr("send_device", src.name.clone())
        .with_attr("send_device_incarnation", src.incarnation as i64)
        .with_attr("recv_device", dst.name.clone())
        .with_attr("client_terminated", false)
}

fn tensor_ref(node: &str, port: i32) -> String {
    if port == 0 {
        node.to_owned()
    } else {
        format!("{node}:{port}")
    }
}

struct Partitioner<'a> {
    g: &'a Graph,
    assignment: &'a [usize],
    devices: &'a [PartitionDevice],
    cf: ControlFlowInfo,
    /// Nodes whose output may be a forwarded variable reference.
    refs: Vec<bool>,
    out: Partitions,
    extra: Vec<(usize, NodeDef)>,
    recvs: HashMap<(usize, i32, usize), String>,
    ctrl_recvs: HashMap<(usize, usize), String>,
    /// Dedicated pairs of forwarded references, by (source, port, consumer).
    ref_recvs: HashMap<(usize, i32, usize), String>,
    control_loops: HashMap<(usize, usize), String>,
}

impl Partitioner<'_> {
    /// The `Merge` of the control loop of `frame` on device `d`, built on first use.
    fn control_merge(&mut self, frame: usize, d: usize) -> Result<String> {
        if let Some(m) = self.control_loops.get(&(frame, d)) {
            return Ok(m.clone());
        }
        let desc = self.cf.frames[frame].clone();
        let parent = desc
            .parent
            .ok_or_else(|| Status::internal("control loop requested for the root frame"))?;
        let dev = self.devices[d].name.clone();
        let base = format!("_cf/{}/{d}", desc.name);
        let enter_input = if parent == 0 {
            let c = NodeDef::new(format!("{base}/dummy"), "Const")
                .with_attr("dtype", DType::F32)
                .with_attr("value", Tensor::zeros(DType::F32, [0]))
                .with_device(dev.clone());
            let name = c.name.clone();
            self.extra.push((d, c));
            name
        } else {
            self.control_merge(parent, d)?
        };
        let merge = format!("{base}/merge");
        let next = format!("{base}/next");
        let switch = format!("{base}/switch");
        self.control_loops.insert((frame, d), merge.clone());
        let loop_cond = desc.loop_cond.ok_or_else(|| {
            Status::invalid_argument(format!(
                "A cross-device loop must have a pivot predicate: {}",
                desc.name
            ))
        })?;
        let pred = if self.assignment[loop_cond] == d {
            self.g.node(loop_cond).name().to_owned()
        } else {
            self.recv_for(loop_cond, 0, d, frame)?
        };
        let f = DType::F32;
        for n in [
            NodeDef::new(format!("{base}/enter"), "Enter")
                .with_input(enter_input)
                .with_attr("T", f)
                .with_attr("frame_name", desc.name.clone())
                .with_attr("is_constant", false)
                .with_attr("parallel_iterations", desc.parallel_iterations),
            NodeDef::new(merge.clone(), "Merge")
                .with_input(format!("{base}/enter"))
                .with_input(next.clone())
                .with_attr("T", f)
                .with_attr("N", 2i64),
            NodeDef::new(switch.clone(), "Switch")
                .with_input(merge.clone())
                .with_input(pred)
                .with_attr("T", f),
            NodeDef::new(next, "NextIteration")
                .with_input(format!("{switch}:1"))
                .with_attr("T", f),
        ] {
            self.extra.push((d, n.with_device(dev.clone())));
        }
        Ok(merge)
    }

    /// The `_Recv` on device `d` of output `port` of `src`, read in `frame`.
    fn recv_for(&mut self, src: usize, port: i32, d: usize, frame: usize) -> Result<String> {
        if let Some(n) = self.recvs.get(&(src, port, d)) {
            return Ok(n.clone());
        }
        self.transfer(src, port, d, frame, None)
    }

    /// A `_Send`/`_Recv` pair for a forwarded reference read by `dst` alone, the
    /// `_Send` waiting for `dst`'s control inputs (see the module docs).
    fn ref_recv_for(&mut self, src: usize, port: i32, dst: usize, frame: usize) -> Result<String> {
        if let Some(n) = self.ref_recvs.get(&(src, port, dst)) {
            return Ok(n.clone());
        }
        let g = self.g;
        let (sd, d) = (self.assignment[src], self.assignment[dst]);
        let mut waits = Vec::new();
        for e in g.in_edges(dst).filter(|e| e.is_control()) {
            if self.assignment[e.src] == sd {
                waits.push(format!("^{}", g.node(e.src).name()));
            } else {
                waits.push(format!("^{}", self.ctrl_recv_for(e.src, sd, frame)?));
            }
        }
        let rname = self.transfer(src, port, d, frame, Some((dst, waits)))?;
        self.ref_recvs.insert((src, port, dst), rname.clone());
        Ok(rname)
    }

    /// Adds a `_Send` of output `port` of `src` and its `_Recv` on device `d`, read
    /// in `frame`; `reader` names the one consumer of a dedicated pair and the
    /// control inputs of its `_Send`; a shared pair is remembered for the other
    /// consumers on `d`. Returns the `_Recv`'s name.
    fn transfer(
        &mut self,
        src: usize,
        port: i32,
        d: usize,
        frame: usize,
        reader: Option<(usize, Vec<String>)>,
    ) -> Result<String> {
        let g = self.g;
        let sd = self.assignment[src];
        let src_name = g.node(src).name().to_owned();
        let dtype = g
            .node(src)
            .output_type(port as usize)
            .ok_or_else(|| Status::internal("bad port"))?
            .dtype;
        let (mut base, mut tensor_name) = (
            format!("{src_name}/_{port}_{sd}_to_{d}"),
            format!("{src_name}:{port}->{d}"),
        );
        let mut waits = Vec::new();
        let shared = reader.is_none();
        if let Some((dst, w)) = reader {
            let dst_name = g.node(dst).name();
            base = format!("{base}/for/{dst_name}");
            tensor_name = format!("{tensor_name}@{dst_name}");
            waits = w;
        }
        let (sdev, ddev) = (self.devices[sd].clone(), self.devices[d].clone());
        let mut send = NodeDef::new(format!("{base}/send"), "_Send")
            .with_input(tensor_ref(&src_name, port))
            .with_attr("T", dtype)
            .with_device(sdev.name.clone());
        send.input.extend(waits);
        let send = transfer_attrs(send, &tensor_name, &sdev, &ddev);
        let mut recv = transfer_attrs(
            NodeDef::new(format!("{base}/recv"), "_Recv")
                .with_attr("tensor_type", dtype)
                .with_device(ddev.name.clone()),
            &tensor_name,
            &sdev,
            &ddev,
        );
        let rname = recv.name.clone();
        if shared {
            // before the control loop, whose predicate may be this very tensor
            self.recvs.insert((src, port, d), rname.clone());
        }
        if frame != 0 {
            let m = self.control_merge(frame, d)?;
            recv.input.push(format!("^{m}"));
        }
        self.extra.push((sd, send));
        self.extra.push((d, recv));
        self.out.transfers += 1;
        Ok(rname)
    }

    /// The node on device `d` that completes after `src` ran (a control edge): an
    /// `Identity` of a `_Recv`.
    fn ctrl_recv_for(&mut self, src: usize, d: usize, frame: usize) -> Result<String> {
        if let Some(n) = self.ctrl_recvs.get(&(src, d)) {
            return Ok(n.clone());
        }
        let sd = self.assignment[src];
        let src_name = self.g.node(src).name().to_owned();
        let base = format!("{src_name}/_ctrl_{sd}_to_{d}");
        let tensor_name = format!("{base}:ctrl");
        let (sdev, ddev) = (self.devices[sd].clone(), self.devices[d].clone());
        let c = NodeDef::new(format!("{base}/const"), "Const")
            .with_attr("dtype", DType::F32)
            .with_attr("value", Tensor::scalar(0.0f32))
            .with_input(format!("^{src_name}"))
            .with_device(sdev.name.clone());
        let send = transfer_attrs(
            NodeDef::new(format!("{base}/send"), "_Send")
                .with_input(c.name.clone())
                .with_attr("T", DType::F32)
                .with_device(sdev.name.clone()),
            &tensor_name,
            &sdev,
            &ddev,
        );
        let mut recv = transfer_attrs(
            NodeDef::new(format!("{base}/recv"), "_Recv")
                .with_attr("tensor_type", DType::F32)
                .with_device(ddev.name.clone()),
            &tensor_name,
            &sdev,
            &ddev,
        );
        // Consumers wait on an Identity of the received value, not on the `_Recv`
        // itself: a `_Recv` of a dead value runs live (only its output is dead), and
        // a control edge carries the deadness of its source node, so without the
        // Identity a node behind a dead control input on another device would run.
        let identity = NodeDef::new(format!("{base}/identity"), "Identity")
            .with_input(recv.name.clone())
            .with_attr("T", DType::F32)
            .with_device(ddev.name.clone());
        let iname = identity.name.clone();
        self.ctrl_recvs.insert((src, d), iname.clone());
        if frame != 0 {
            let m = self.control_merge(frame, d)?;
            recv.input.push(format!("^{m}"));
        }
        self.extra.push((sd, c));
        self.extra.push((sd, send));
        self.extra.push((d, recv));
        self.extra.push((d, identity));
        self.out.transfers += 1;
        Ok(iname)
    }

    /// Control loops for every device that hosts part of a loop frame spread over
    /// several devices and does not iterate that frame by itself (no
    /// `NextIteration` of it there): without one, a node there that reads only loop
    /// invariants, or an `Enter` sending to another device, would run in the first
    /// iteration only while its consumer waits in every iteration.
    fn add_hosting_control_loops(&mut self) -> Result<()> {
        let g = self.g;
        let nf = self.cf.frames.len();
        if nf == 1 {
            return Ok(());
        }
        let mut hosts: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); nf];
        let mut iterates: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); nf];
        for id in 0..g.num_nodes() {
            let d = self.assignment[id];
            hosts[self.cf.frame_of[id]].insert(d);
            hosts[self.cf.output_frame(g, id)].insert(d);
            if matches!(g.node(id).op(), "NextIteration" | "RefNextIteration") {
                iterates[self.cf.frame_of[id]].insert(d);
            }
        }
        for f in 1..nf {
            if hosts[f].len() > 1 {
                for &d in &hosts[f] {
                    if !iterates[f].contains(&d) {
                        self.control_merge(f, d)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn run(mut self) -> Result<Partitions> {
        let g = self.g;
        self.add_hosting_control_loops()?;
        for id in 0..g.num_nodes() {
            let node = g.node(id);
            let d = self.assignment[id];
            let dev = self
                .devices
                .get(d)
                .ok_or_else(|| Status::internal(format!("device index {d} out of range")))?;
            let mut def = node.def.clone();
            def.device = dev.name.clone();
            // The frame the inputs of this node live in.
            let frame = self.cf.frame_of[id];
            let mut data_index = 0;
            let mut inputs = Vec::with_capacity(def.input.len());
            for s in &node.def.input {
                let t = TensorId::parse(s)?;
                let src = g.find(t.node).ok_or_else(|| {
                    Status::internal(format!("input {s} missing")).with_node(node.name())
                })?;
                if !t.is_control() {
                    data_index += 1;
                }
                if self.assignment[src] == d {
                    inputs.push(s.clone());
                } else if t.is_control() {
                    let r = self.ctrl_recv_for(src, d, frame)?;
                    inputs.push(format!("^{r}"));
                } else {
                    let e = g.data_input(id, data_index - 1).ok_or_else(|| {
                        Status::internal("missing data edge").with_node(node.name())
                    })?;
                    let ordered = g.in_edges(id).any(|e| e.is_control());
                    inputs.push(if self.refs[src] && ordered {
                        self.ref_recv_for(src, e.src_output, id, frame)?
                    } else {
                        self.recv_for(src, e.src_output, d, frame)?
                    });
                }
            }
            // Control inputs must follow data inputs.
            inputs.sort_by_key(|s| s.starts_with('^'));
            def.input = inputs;
            self.out.per_device.entry(d).or_default().push(def);
        }
        for (d, n) in std::mem::take(&mut self.extra) {
            self.out.per_device.entry(d).or_default().push(n);
        }
        Ok(self.out)
    }
}

/// Splits `g` by `assignment` (a device index per node); see the module docs.
pub fn partition(
    g: &Graph,
    assignment: &[usize],
    devices: &[PartitionDevice],
) -> Result<Partitions> {
    if assignment.len() != g.num_nodes() {
        return Err(Status::internal("placement does not cover the graph"));
    }
    Partitioner {
        g,
        assignment,
        devices,
        cf: build_control_flow_info(g)?,
        refs: g.ref_carriers(),
        out: Partitions::default(),
        extra: Vec::new(),
        recvs: HashMap::new(),
        ref_recvs: HashMap::new(),
        ctrl_recvs: HashMap::new(),
        control_loops: HashMap::new(),
    }
    .run()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Scope;
    use crate::{ops, GraphDef, OpRegistry};

    fn devs(n: usize) -> Vec<PartitionDevice> {
        (0..n)
            .map(|i| PartitionDevice {
                name: format!("/job:localhost/replica:0/task:0/device:CPU:{i}"),
                incarnation: 100 + i as u64,
            })
            .collect()
    }

    #[test]
    fn one_transfer_per_tensor_and_destination() {
        let s = Scope::new();
        let a = ops::constant(&s, Tensor::scalar(1.0f32)).unwrap();
        let b = ops::add(&s, &a, &a).unwrap();
        let c = ops::mul(&s, &a, &b).unwrap();
        let d = ops::no_op(&s.with_control_dependencies(&[a.op()])).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let mut assign = vec![1; g.num_nodes()];
        assign[g.find(a.op().name()).unwrap()] = 0;
        let p = partition(&g, &assign, &devs(2)).unwrap();
        // a:0 -> device 1 once (read by b and c), plus one control transfer for d
        assert_eq!(p.transfers, 2);
        let sends = p.per_device[&0].iter().filter(|n| n.op == "_Send").count();
        let recvs = p.per_device[&1].iter().filter(|n| n.op == "_Recv").count();
        assert_eq!((sends, recvs), (2, 2));
        for nodes in p.per_device.values() {
            Graph::from_graph_def(
                &GraphDef {
                    node: nodes.clone(),
                    ..Default::default()
                },
                OpRegistry::global(),
            )
            .unwrap();
        }
        let dn = p.per_device[&1]
            .iter()
            .find(|n| n.name == d.name())
            .unwrap();
        assert!(dn.input[0].starts_with('^') && dn.input[0].ends_with("/identity"));
        let cn = p.per_device[&1]
            .iter()
            .find(|n| n.name == c.op().name())
            .unwrap();
        let bn = p.per_device[&1]
            .iter()
            .find(|n| n.name == b.op().name())
            .unwrap();
        assert_eq!(
            cn.input[0], bn.input[0],
            "both consumers read the same Recv"
        );
    }

    #[test]
    fn a_forwarded_reference_is_sent_after_its_readers_control_inputs() {
        let s = Scope::new();
        let one = ops::scalar(&s, 1.0f32).unwrap();
        let v = ops::Variable::new(&s, "v", &one, true).unwrap();
        let bump = ops::assign_add(&s, &v.var, &one).unwrap();
        let late = ops::no_op(&s).unwrap();
        let ordered = ops::mul(
            &s.with_control_dependencies(&[bump.op(), &late]),
            &v.value,
            &v.value,
        )
        .unwrap();
        let free = ops::mul(&s, &v.value, &one).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let mut assign = vec![0; g.num_nodes()];
        assign[g.find(ordered.op().name()).unwrap()] = 1;
        assign[g.find(free.op().name()).unwrap()] = 1;
        assign[g.find(late.name()).unwrap()] = 2;
        let p = partition(&g, &assign, &devs(3)).unwrap();
        let node = |d: usize, name: &str| {
            p.per_device[&d]
                .iter()
                .find(|n| n.name == name)
                .unwrap_or_else(|| panic!("{name} not on device {d}"))
                .clone()
        };
        // the reader without control inputs shares the early transfer
        let shared = "v/read/_0_0_to_1";
        assert_eq!(node(1, free.op().name()).input[0], format!("{shared}/recv"));
        assert_eq!(node(0, &format!("{shared}/send")).input, vec!["v/read"]);
        // the ordered reader has a pair of its own (one, for both its inputs),
        // sent once the assignment and the node on device 2 have run
        let own = format!("{shared}/for/{}", ordered.op().name());
        let o = node(1, ordered.op().name());
        assert_eq!(o.input[..2], [format!("{own}/recv"), format!("{own}/recv")]);
        let send = node(0, &format!("{own}/send"));
        assert_eq!(
            send.input,
            vec![
                "v/read".to_string(),
                format!("^{}", bump.op().name()),
                format!("^{}/_ctrl_2_to_0/identity", late.name()),
            ]
        );
        // v/read twice, `one`, and control transfers of bump -> 1, late -> 0, late -> 1
        assert_eq!(p.transfers, 6);
        for nodes in p.per_device.values() {
            Graph::from_graph_def(
                &GraphDef {
                    node: nodes.clone(),
                    ..Default::default()
                },
                OpRegistry::global(),
            )
            .unwrap();
        }
    }
}
