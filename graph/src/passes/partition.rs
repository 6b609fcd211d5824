//! Partitioning (TensorFlow's `graph_partition.cc`): splits a placed graph into one
//! node list per *location*. [`partition`] makes every device its own location;
//! [`partition_by_location`] groups devices (a master splitting a step by task, each
//! worker splitting its piece by device again: see *Two levels* below).
//!
//! Every data edge between locations becomes a `_Send` on the source's device and a
//! `_Recv` in the destination location, **one pair per (tensor, destination
//! location)** however many consumers read it there. A control edge between
//! locations becomes a dummy `Const` on the source (run after the source), sent to a
//! `_Recv` followed by an `Identity` that the destination waits on (so a dead source
//! makes the destination dead, as a local control edge would). An edge inside one
//! location stays as it is, whatever the devices of its ends.
//!
//! **Loops across locations.** A `_Recv` has no inputs, so on its own it would run
//! once in the root frame. For an edge inside a loop frame, the destination location
//! gets a *control loop* for that frame (once per frame and location, nested loops
//! stacked): `Enter → Merge → Switch(pivot) → NextIteration → Merge`, driven by the
//! frame's pivot predicate (its `LoopCond`, received from its location every
//! iteration), and every `_Recv` of the frame in that location waits on the control
//! loop's `Merge`. Each partition thus iterates in step with the one that decides
//! the loop, and Send/Recv pairs meet under keys carrying the same frame and
//! iteration. A location that hosts part of a frame spread over several locations
//! but has no `NextIteration` of it gets a control loop too, so the loop invariants
//! there are read in every iteration. (The placer keeps each loop variable's
//! `Enter`/`Merge`/`Switch`/`NextIteration`/`Exit` together, so no back edge ever
//! crosses devices.)
//!
//! **Forwarded variable references.** An `Identity` of a reference variable
//! (`v/read`) forwards the reference unread: in one location its consumer reads the
//! variable when the consumer runs, after its control inputs (the assignments
//! `tf.control_dependencies` orders it after). A shared `_Send` would read it as
//! soon as `v/read` ran. So an edge between locations from such a node into a
//! consumer with control inputs gets a `_Send`/`_Recv` pair of its own, and that
//! `_Send` waits for the consumer's control inputs (brought to the variable's
//! location as control transfers when they run elsewhere). No cycle can arise: that
//! pair feeds the consumer alone, so a control input that depended on it would
//! depend on the consumer. A consumer without control inputs shares the pair,
//! reading the variable early as TensorFlow's partitions do.
//!
//! **Placement of inserted nodes.** Every node of the output, original or inserted,
//! carries the full name of its device in `device`. A `_Send`, and a control
//! transfer's `Const`, go on the source node's device. A shared `_Recv` goes on the
//! device of the consumer that first asks for it (nodes in order, after the control
//! loops of spread frames); the consumers on other devices of its location read it
//! across devices. A control transfer's `_Recv` and `Identity` likewise. The control
//! loop of (frame, location) goes on the device of the first node (in node order)
//! of that location that runs in the frame or whose output enters it (an `Enter`);
//! an outer frame's loop that no node there runs in goes with its inner loop.
//!
//! **Names.** Inserted nodes are named after the locations they connect:
//! `{src}/_{port}_{from}_to_{to}/{send,recv}` (with `/for/{consumer}` for a
//! dedicated reference pair), `{src}/_ctrl_{from}_to_{to}/{const,send,recv,identity}`
//! and `_cf/{frame}/{at}/{dummy,enter,merge,switch,next}`, where a location is
//! written as its index when each device is its own location (the device index, as
//! [`partition`] names them) and as `loc{index}` otherwise, so the names a worker's
//! per-device partition of a piece adds never collide with those of the first level.
//!
//! **Lossy transfers** (whitepaper §5.5, TensorFlow's `enable_bfloat16_sendrecv`).
//! With [`PartitionOptions::bfloat16_transfers`], a data transfer of a `float32`
//! tensor (a variable's value read through a reference included) sends it as
//! `bfloat16`: a `Cast` to `bfloat16` (`{base}/to_bf16`, rounding to nearest even,
//! as TensorFlow's cast does) on the source's device feeds the `_Send`, and the
//! consumers read a `Cast` back to `float32` (`{base}/from_bf16`) of the `_Recv`,
//! on the `_Recv`'s device. Other dtypes, control transfers and the client's feeds
//! and fetches (client-terminated, never partition transfers) travel unchanged.
//!
//! **Recv scheduling** (whitepaper §5.2, TensorFlow's `enable_recv_scheduling`).
//! With [`PartitionOptions::recv_scheduling`], a data `_Recv` of the root frame
//! may wait, through a `ControlTrigger` named `{x}/_recv_wait_{at}` on the device
//! of the node `x` it waits for, until `x` has run; which `x` (if any) is
//! [`recv_schedule`]'s choice.
//!
//! **Two levels.** A location's piece is a plain graph whose nodes name their
//! devices, and [`partition`] splits it by device again: the edges between devices
//! of one location, left alone here, become transfers there, and a frame spread
//! over devices of the piece gets that level's control loops. A piece that lacks
//! its frame's `LoopCond` (it runs in another location) still has a pivot: the
//! predicate of a loop `Switch` (one whose data input is a `Merge` fed by a
//! `NextIteration`): the `_Recv` of the `LoopCond` that this level gave the
//! piece's control loop and loop variables.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::node_def::TensorId;
use crate::passes::control_flow::{build_control_flow_info, ControlFlowInfo};
use crate::passes::recv_schedule::{self, Transfer};
use crate::{DType, Graph, NodeDef, NodeId, Result, Status, Tensor};

/// How transfers are made, beyond the graph and its placement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionOptions {
    /// Send `float32` tensors as `bfloat16` (TensorFlow's
    /// `GraphOptions.enable_bfloat16_sendrecv`): see *Lossy transfers* in the
    /// module docs.
    pub bfloat16_transfers: bool,
    /// Start each `_Recv` of the root frame as late as the step's estimated
    /// critical path allows (TensorFlow's `GraphOptions.enable_recv_scheduling`):
    /// see [`recv_schedule`]. Callers leave it off
    /// for partial runs.
    pub recv_scheduling: bool,
}

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
    /// Node lists by location index: by device index for [`partition`], by
    /// `location[d]` for [`partition_by_location`]. Every node names its device.
    pub per_device: BTreeMap<usize, Vec<NodeDef>>,
    /// The number of `_Send`/`_Recv` pairs inserted.
    pub transfers: usize,
    /// The `_Recv`s made to wait by [`PartitionOptions::recv_scheduling`].
    pub scheduled_recvs: usize,
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

/// A feed's `_Arg` or a fetch's `_Retval` as a **client-terminated** transfer on
/// `device`: a `_Recv` (for an `_Arg`) or a `_Send` (for a `_Retval`, keeping
/// its input) whose tensor name is `name`, so its value crosses by rendezvous key
/// (`device;incarnation;device;name;0:0`) between the step and whoever drives it
/// (TensorFlow's rendezvous convention for a master's feeds and fetches, and for a
/// partial run's). Errors on any other op.
pub fn client_terminated(
    n: &NodeDef,
    name: &str,
    device: &PartitionDevice,
) -> crate::Result<NodeDef> {
    let t: crate::DType = n.get_attr("T")?;
    let (op, dtype_attr) = match n.op.as_str() {
        "_Arg" => ("_Recv", "tensor_type"),
        "_Retval" => ("_Send", "T"),
        other => {
            return Err(crate::Status::internal(format!(
                "only _Arg and _Retval become client-terminated transfers, not {other}"
            ))
            .with_node(&n.name))
        }
    };
    let mut d = transfer_attrs(NodeDef::new(name.to_owned(), op), name, device, device)
        .with_attr("client_terminated", true)
        .with_attr(dtype_attr, t)
        .with_device(device.name.clone());
    if op == "_Send" {
        d.input.clone_from(&n.input);
    }
    Ok(d)
}

fn tensor_ref(node: &str, port: i32) -> String {
    if port == 0 {
        node.to_owned()
    } else {
        format!("{node}:{port}")
    }
}

/// Per frame, the predicate its control loops switch on: its `LoopCond`, else the
/// predicate of a loop `Switch` of the frame (see the module docs).
fn frame_pivots(g: &Graph, cf: &ControlFlowInfo) -> Vec<Option<(NodeId, i32)>> {
    let mut pivots: Vec<Option<(NodeId, i32)>> = cf
        .frames
        .iter()
        .map(|f| f.loop_cond.map(|lc| (lc, 0)))
        .collect();
    let is = |id: NodeId, ops: &[&str]| ops.contains(&g.node(id).op());
    for id in 0..g.num_nodes() {
        let f = cf.frame_of[id];
        if pivots[f].is_some() || !is(id, &["Switch", "RefSwitch"]) {
            continue;
        }
        let (Some(data), Some(pred)) = (g.data_input(id, 0), g.data_input(id, 1)) else {
            continue;
        };
        let loop_merge = is(data.src, &["Merge", "RefMerge"])
            && g.in_edges(data.src)
                .any(|e| !e.is_control() && is(e.src, &["NextIteration", "RefNextIteration"]));
        if loop_merge {
            pivots[f] = Some((pred.src, pred.src_output));
        }
    }
    pivots
}

struct Partitioner<'a> {
    g: &'a Graph,
    assignment: &'a [usize],
    devices: &'a [PartitionDevice],
    /// Location per device.
    location: &'a [usize],
    /// Each device is its own location: names carry plain indices.
    by_device: bool,
    cf: ControlFlowInfo,
    /// Per frame, the predicate its control loops switch on.
    pivots: Vec<Option<(NodeId, i32)>>,
    /// Per (frame, location), the device of its control loop.
    loop_devices: HashMap<(usize, usize), usize>,
    /// Nodes whose output may be a forwarded variable reference.
    refs: Vec<bool>,
    out: Partitions,
    /// Inserted nodes, by location.
    extra: Vec<(usize, NodeDef)>,
    /// Shared `_Recv`s, by (source, port, location).
    recvs: HashMap<(usize, i32, usize), String>,
    /// Control transfers' `Identity`s, by (source, location).
    ctrl_recvs: HashMap<(usize, usize), String>,
    /// Dedicated pairs of forwarded references, by (source, port, consumer).
    ref_recvs: HashMap<(usize, i32, usize), String>,
    /// Control loops' `Merge`s, by (frame, location).
    control_loops: HashMap<(usize, usize), String>,
    /// Data transfers into the root frame, for recv scheduling.
    root_transfers: Vec<Transfer>,
    /// Index in `root_transfers`, by the name its readers read.
    transfer_read_as: HashMap<String, usize>,
    options: PartitionOptions,
}

impl Partitioner<'_> {
    fn loc_of(&self, id: NodeId) -> usize {
        self.location[self.assignment[id]]
    }

    /// How names write location `l` (see the module docs).
    fn tag(&self, l: usize) -> String {
        if self.by_device {
            l.to_string()
        } else {
            format!("loc{l}")
        }
    }

    /// The `Merge` of the control loop of `frame` in location `l`, built on first
    /// use; `near` is the device of the node that needs it, where the loop goes when
    /// no node of `l` runs in the frame (an outer frame of a nested loop).
    fn control_merge(&mut self, frame: usize, l: usize, near: usize) -> Result<String> {
        if let Some(m) = self.control_loops.get(&(frame, l)) {
            return Ok(m.clone());
        }
        let desc = self.cf.frames[frame].clone();
        let parent = desc
            .parent
            .ok_or_else(|| Status::internal("control loop requested for the root frame"))?;
        let d = self.loop_devices.get(&(frame, l)).copied().unwrap_or(near);
        let dev = self.devices[d].name.clone();
        let base = format!("_cf/{}/{}", desc.name, self.tag(l));
        let enter_input = if parent == 0 {
            let c = NodeDef::new(format!("{base}/dummy"), "Const")
                .with_attr("dtype", DType::F32)
                .with_attr("value", Tensor::zeros(DType::F32, [0]))
                .with_device(dev.clone());
            let name = c.name.clone();
            self.extra.push((l, c));
            name
        } else {
            self.control_merge(parent, l, d)?
        };
        let merge = format!("{base}/merge");
        let next = format!("{base}/next");
        let switch = format!("{base}/switch");
        self.control_loops.insert((frame, l), merge.clone());
        let (pivot, port) = self.pivots[frame].ok_or_else(|| {
            Status::invalid_argument(format!(
                "A cross-device loop must have a pivot predicate: {}",
                desc.name
            ))
        })?;
        let pred = if self.loc_of(pivot) == l {
            tensor_ref(self.g.node(pivot).name(), port)
        } else {
            self.recv_for(pivot, port, d, frame)?
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
            self.extra.push((l, n.with_device(dev.clone())));
        }
        Ok(merge)
    }

    /// The `_Recv` in the location of device `d` of output `port` of `src`, read in
    /// `frame`; a new one goes on `d`.
    fn recv_for(&mut self, src: usize, port: i32, d: usize, frame: usize) -> Result<String> {
        if let Some(n) = self.recvs.get(&(src, port, self.location[d])) {
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
            if self.loc_of(e.src) == self.location[sd] {
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
    /// consumers in `d`'s location. Returns the `_Recv`'s name.
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
        let (sl, dl) = (self.location[sd], self.location[d]);
        let src_name = g.node(src).name().to_owned();
        let dtype = g
            .node(src)
            .output_type(port as usize)
            .ok_or_else(|| Status::internal("bad port"))?
            .dtype;
        let (mut base, mut tensor_name) = (
            format!("{src_name}/_{port}_{}_to_{}", self.tag(sl), self.tag(dl)),
            format!("{src_name}:{port}->{}", self.tag(dl)),
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
        let lossy = self.options.bfloat16_transfers && dtype == DType::F32;
        let wire = if lossy { DType::BF16 } else { dtype };
        let mut sent = tensor_ref(&src_name, port);
        if lossy {
            let cast = cast_node(format!("{base}/to_bf16"), sent, DType::F32, DType::BF16)
                .with_device(sdev.name.clone());
            sent = cast.name.clone();
            self.extra.push((sl, cast));
        }
        let mut send = NodeDef::new(format!("{base}/send"), "_Send")
            .with_input(sent)
            .with_attr("T", wire)
            .with_device(sdev.name.clone());
        send.input.extend(waits);
        let send = transfer_attrs(send, &tensor_name, &sdev, &ddev);
        let mut recv = transfer_attrs(
            NodeDef::new(format!("{base}/recv"), "_Recv")
                .with_attr("tensor_type", wire)
                .with_device(ddev.name.clone()),
            &tensor_name,
            &sdev,
            &ddev,
        );
        let widen = lossy.then(|| {
            cast_node(
                format!("{base}/from_bf16"),
                recv.name.clone(),
                DType::BF16,
                DType::F32,
            )
            .with_device(ddev.name.clone())
        });
        let rname = widen.as_ref().map_or(&recv.name, |w| &w.name).clone();
        if shared {
            // before the control loop, whose predicate may be this very tensor
            self.recvs.insert((src, port, dl), rname.clone());
        }
        if frame != 0 {
            let m = self.control_merge(frame, dl, d)?;
            recv.input.push(format!("^{m}"));
        } else {
            self.transfer_read_as
                .insert(rname.clone(), self.root_transfers.len());
            self.root_transfers.push(Transfer {
                src,
                port,
                device: d,
                readers: Vec::new(),
                recv: recv.name.clone(),
            });
        }
        self.extra.push((sl, send));
        self.extra.push((dl, recv));
        self.extra.extend(widen.map(|w| (dl, w)));
        self.out.transfers += 1;
        Ok(rname)
    }

    /// The node in the location of device `d` that completes after `src` ran (a
    /// control edge): an `Identity` of a `_Recv`, both new ones on `d`.
    fn ctrl_recv_for(&mut self, src: usize, d: usize, frame: usize) -> Result<String> {
        let dl = self.location[d];
        if let Some(n) = self.ctrl_recvs.get(&(src, dl)) {
            return Ok(n.clone());
        }
        let sd = self.assignment[src];
        let sl = self.location[sd];
        let src_name = self.g.node(src).name().to_owned();
        let base = format!("{src_name}/_ctrl_{}_to_{}", self.tag(sl), self.tag(dl));
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
        // Identity a node behind a dead control input in another location would run.
        let identity = NodeDef::new(format!("{base}/identity"), "Identity")
            .with_input(recv.name.clone())
            .with_attr("T", DType::F32)
            .with_device(ddev.name.clone());
        let iname = identity.name.clone();
        self.ctrl_recvs.insert((src, dl), iname.clone());
        if frame != 0 {
            let m = self.control_merge(frame, dl, d)?;
            recv.input.push(format!("^{m}"));
        }
        self.extra.push((sl, c));
        self.extra.push((sl, send));
        self.extra.push((dl, recv));
        self.extra.push((dl, identity));
        self.out.transfers += 1;
        Ok(iname)
    }

    /// Control loops for every location that hosts part of a loop frame spread over
    /// several locations and does not iterate that frame by itself (no
    /// `NextIteration` of it there): without one, a node there that reads only loop
    /// invariants, or an `Enter` sending to another location, would run in the
    /// first iteration only while its consumer waits in every iteration. Also
    /// records where each (frame, location)'s control loop goes.
    fn add_hosting_control_loops(&mut self) -> Result<()> {
        let g = self.g;
        let nf = self.cf.frames.len();
        if nf == 1 {
            return Ok(());
        }
        let mut hosts: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); nf];
        let mut iterates: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); nf];
        for id in 0..g.num_nodes() {
            let (d, l) = (self.assignment[id], self.loc_of(id));
            for f in [self.cf.frame_of[id], self.cf.output_frame(g, id)] {
                hosts[f].insert(l);
                self.loop_devices.entry((f, l)).or_insert(d);
            }
            if matches!(g.node(id).op(), "NextIteration" | "RefNextIteration") {
                iterates[self.cf.frame_of[id]].insert(l);
            }
        }
        for f in 1..nf {
            if hosts[f].len() > 1 {
                for &l in &hosts[f] {
                    if !iterates[f].contains(&l) {
                        let d = self.loop_devices[&(f, l)];
                        self.control_merge(f, l, d)?;
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
            let l = self.location[d];
            let mut def = node.def.clone();
            def.device = self.devices[d].name.clone();
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
                if self.loc_of(src) == l {
                    inputs.push(s.clone());
                } else if t.is_control() {
                    let r = self.ctrl_recv_for(src, d, frame)?;
                    inputs.push(format!("^{r}"));
                } else {
                    let e = g.data_input(id, data_index - 1).ok_or_else(|| {
                        Status::internal("missing data edge").with_node(node.name())
                    })?;
                    let ordered = g.in_edges(id).any(|e| e.is_control());
                    let r = if self.refs[src] && ordered {
                        self.ref_recv_for(src, e.src_output, id, frame)?
                    } else {
                        self.recv_for(src, e.src_output, d, frame)?
                    };
                    if let Some(&t) = self.transfer_read_as.get(&r) {
                        self.root_transfers[t].readers.push(id);
                    }
                    inputs.push(r);
                }
            }
            // Control inputs must follow data inputs.
            inputs.sort_by_key(|s| s.starts_with('^'));
            def.input = inputs;
            self.out.per_device.entry(l).or_default().push(def);
        }
        if self.options.recv_scheduling {
            self.add_recv_waits();
        }
        for (l, n) in std::mem::take(&mut self.extra) {
            self.out.per_device.entry(l).or_default().push(n);
        }
        Ok(self.out)
    }

    /// Makes the root frame's `_Recv`s wait as [`recv_schedule`] chooses: each
    /// waits on a `ControlTrigger` (one per node waited for, on its device) run
    /// after the chosen node.
    fn add_recv_waits(&mut self) {
        let g = self.g;
        let picks = recv_schedule::schedule(
            g,
            &self.cf,
            self.assignment,
            self.location,
            &self.root_transfers,
        );
        let index: HashMap<String, usize> = self
            .extra
            .iter()
            .enumerate()
            .map(|(i, (_, n))| (n.name.clone(), i))
            .collect();
        let mut triggers: HashMap<NodeId, String> = HashMap::new();
        let transfers = std::mem::take(&mut self.root_transfers);
        for (t, x) in transfers.iter().zip(picks) {
            let (Some(x), Some(&i)) = (x, index.get(&t.recv)) else {
                continue;
            };
            let trigger = triggers.entry(x).or_insert_with(|| {
                let d = self.assignment[x];
                let l = self.location[d];
                let name = format!("{}/_recv_wait_{}", g.node(x).name(), self.tag(l));
                let t = NodeDef::new(name.clone(), "ControlTrigger")
                    .with_input(format!("^{}", g.node(x).name()))
                    .with_device(self.devices[d].name.clone());
                self.extra.push((l, t));
                name
            });
            self.extra[i].1.input.push(format!("^{trigger}"));
            self.out.scheduled_recvs += 1;
        }
    }
}

/// A `Cast` of `input` from `from` to `to` (rounding to nearest even).
fn cast_node(name: String, input: String, from: DType, to: DType) -> NodeDef {
    NodeDef::new(name, "Cast")
        .with_input(input)
        .with_attr("SrcT", from)
        .with_attr("DstT", to)
        .with_attr("Truncate", false)
}

/// Splits `g` by `assignment` (a device index per node), each device its own
/// location: `partition_by_location` with `location[d] = d`. See the module docs.
pub fn partition(
    g: &Graph,
    assignment: &[usize],
    devices: &[PartitionDevice],
) -> Result<Partitions> {
    partition_with(g, assignment, devices, &PartitionOptions::default())
}

/// [`partition`] with `options`.
pub fn partition_with(
    g: &Graph,
    assignment: &[usize],
    devices: &[PartitionDevice],
    options: &PartitionOptions,
) -> Result<Partitions> {
    let identity: Vec<usize> = (0..devices.len()).collect();
    partition_by_location_with(g, assignment, devices, &identity, options)
}

/// Splits `g` by location: `assignment` gives each node's device index, `location[d]`
/// gives device d's location (e.g. its task). Edges between nodes of one location
/// stay as they are, whatever their devices; every other edge becomes a transfer, one
/// per (tensor, destination location). `per_device` of the result is keyed by
/// location, and every node names its device, so each location's piece can be split
/// by device again with [`partition`]. See the module docs.
pub fn partition_by_location(
    g: &Graph,
    assignment: &[usize],
    devices: &[PartitionDevice],
    location: &[usize],
) -> Result<Partitions> {
    partition_by_location_with(
        g,
        assignment,
        devices,
        location,
        &PartitionOptions::default(),
    )
}

/// [`partition_by_location`] with `options`.
pub fn partition_by_location_with(
    g: &Graph,
    assignment: &[usize],
    devices: &[PartitionDevice],
    location: &[usize],
    options: &PartitionOptions,
) -> Result<Partitions> {
    if assignment.len() != g.num_nodes() {
        return Err(Status::internal("placement does not cover the graph"));
    }
    if location.len() != devices.len() {
        return Err(Status::internal(format!(
            "{} locations given for {} devices",
            location.len(),
            devices.len()
        )));
    }
    if let Some(&d) = assignment.iter().find(|&&d| d >= devices.len()) {
        return Err(Status::internal(format!("device index {d} out of range")));
    }
    let cf = build_control_flow_info(g)?;
    Partitioner {
        g,
        assignment,
        devices,
        location,
        by_device: location.iter().enumerate().all(|(d, &l)| d == l),
        pivots: frame_pivots(g, &cf),
        cf,
        loop_devices: HashMap::new(),
        refs: g.ref_carriers(),
        out: Partitions::default(),
        extra: Vec::new(),
        recvs: HashMap::new(),
        root_transfers: Vec::new(),
        transfer_read_as: HashMap::new(),
        ref_recvs: HashMap::new(),
        ctrl_recvs: HashMap::new(),
        control_loops: HashMap::new(),
        options: *options,
    }
    .run()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::builder::{while_loop, Operation, Output, Scope, WhileOptions};
    use crate::passes::place::{place, KernelSupport, PlacementOptions};
    use crate::{ops, AttrValue, DeviceName, GraphDef, OpRegistry};

    /// `n` CPU devices of one task, for partitioning tests.
    pub(crate) fn devs(n: usize) -> Vec<PartitionDevice> {
        (0..n)
            .map(|i| PartitionDevice {
                name: format!("/job:localhost/replica:0/task:0/device:CPU:{i}"),
                incarnation: 100 + i as u64,
            })
            .collect()
    }

    /// `a` read by `b` and `c` (`c` also reads `b`), and a control edge `a → d`.
    fn fan_out() -> (Graph, [Output; 3], Operation) {
        let s = Scope::new();
        let a = ops::constant(&s, Tensor::scalar(1.0f32)).unwrap();
        let b = ops::add(&s, &a, &a).unwrap();
        let c = ops::mul(&s, &a, &b).unwrap();
        let d = ops::no_op(&s.with_control_dependencies(&[a.op()])).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        (g, [a, b, c], d)
    }

    #[test]
    fn one_transfer_per_tensor_and_destination() {
        let (g, [a, b, c], d) = fan_out();
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
    fn bfloat16_transfers_cast_float32_tensors_only() {
        let s = Scope::new();
        let a = ops::constant(&s, Tensor::scalar(1.5f32)).unwrap();
        let i = ops::constant(&s, Tensor::scalar(3i32)).unwrap();
        let b = ops::add(&s, &a, &a).unwrap();
        let c = ops::mul(&s, &a, &b).unwrap();
        let j = ops::add(&s, &i, &i).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let mut assign = vec![1; g.num_nodes()];
        assign[g.find(a.op().name()).unwrap()] = 0;
        assign[g.find(i.op().name()).unwrap()] = 0;
        let options = PartitionOptions {
            bfloat16_transfers: true,
            ..Default::default()
        };
        let p = partition_with(&g, &assign, &devs(2), &options).unwrap();
        assert_eq!(p.transfers, 2);
        let find = |d: usize, pred: &dyn Fn(&NodeDef) -> bool| -> Vec<NodeDef> {
            p.per_device[&d]
                .iter()
                .filter(|n| pred(n))
                .cloned()
                .collect()
        };
        // a: a Cast to bfloat16 feeds its _Send, on device 0.
        let to = find(0, &|n| n.op == "Cast");
        assert_eq!(to.len(), 1);
        assert_eq!(to[0].input, [a.op().name()]);
        assert_eq!(to[0].attr["DstT"], AttrValue::Type(DType::BF16));
        let sends = find(0, &|n| n.op == "_Send");
        let sa = sends.iter().find(|n| n.input[0] == to[0].name).unwrap();
        assert_eq!(sa.attr["T"], AttrValue::Type(DType::BF16));
        // i (int32) travels as it is.
        let si = sends.iter().find(|n| n.input[0] == i.op().name()).unwrap();
        assert_eq!(si.attr["T"], AttrValue::Type(DType::I32));
        // On device 1, both consumers of a read one Cast back to float32.
        let from = find(1, &|n| n.op == "Cast");
        assert_eq!(from.len(), 1);
        assert_eq!(from[0].attr["DstT"], AttrValue::Type(DType::F32));
        let recv = find(1, &|n| n.name == from[0].input[0]);
        assert_eq!(recv[0].attr["tensor_type"], AttrValue::Type(DType::BF16));
        for n in [b.op().name(), c.op().name()] {
            let node = find(1, &|x| x.name == n);
            assert_eq!(node[0].input[0], from[0].name, "{n}");
        }
        let jn = find(1, &|x| x.name == j.op().name());
        assert!(jn[0].input[0].ends_with("/recv"));
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
        // Off by default.
        let plain = partition(&g, &assign, &devs(2)).unwrap();
        assert!(plain.per_device.values().flatten().all(|n| n.op != "Cast"));
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

    struct AllKernels;
    impl KernelSupport for AllKernels {
        fn supports(&self, _: &NodeDef, _: &str) -> bool {
            true
        }
    }

    /// `g` placed on `n` CPUs by the placer (explicit devices honoured, loop
    /// skeletons kept together).
    fn placed(s: &Scope, n: u32) -> (Graph, Vec<usize>) {
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let names: Vec<DeviceName> = (0..n).map(DeviceName::local_cpu).collect();
        let a = place(&g, &names, &AllKernels, &PlacementOptions::default()).unwrap();
        (g, a)
    }

    fn cpu(i: usize) -> String {
        format!("/device:CPU:{i}")
    }

    /// A piece as a worker partitions it: its devices read from the node names.
    fn by_device(nodes: &[NodeDef], devices: &[PartitionDevice]) -> Result<Partitions> {
        let gd = GraphDef {
            node: nodes.to_vec(),
            ..Default::default()
        };
        let g = Graph::from_graph_def(&gd, OpRegistry::global())?;
        let assign: Vec<usize> = g
            .nodes()
            .iter()
            .map(|n| devices.iter().position(|d| d.name == n.def.device).unwrap())
            .collect();
        partition(&g, &assign, devices)
    }

    /// `i < 5: (i + 1, x * 2 + 1)` with the condition on CPU:0 and the body of `x`
    /// on CPU:0 and CPU:3; returns the graph's scope.
    fn spread_loop() -> Scope {
        let s = Scope::new();
        let i0 = ops::scalar(&s.with_device(&cpu(0)), 0i32).unwrap();
        let x0 = ops::scalar(&s.with_device(&cpu(1)), 1.0f32).unwrap();
        while_loop(
            &s,
            |b, v| ops::less(&b.with_device(&cpu(0)), &v[0], &ops::scalar(b, 5i32)?),
            |b, v| {
                let (b0, b3) = (b.with_device(&cpu(0)), b.with_device(&cpu(3)));
                let twice = ops::mul(&b3, &v[1], &ops::scalar(&b3, 2.0f32)?)?;
                Ok(vec![
                    ops::add(&b0, &v[0], &ops::scalar(&b0, 1i32)?)?,
                    ops::add(&b0, &twice, &ops::scalar(&b0, 1.0f32)?)?,
                ])
            },
            &[i0, x0],
            &WhileOptions::default(),
        )
        .unwrap();
        s
    }

    #[test]
    fn a_tensor_read_on_two_devices_of_a_location_costs_one_pair() {
        let (g, [a, b, c], d) = fan_out();
        let mut assign = vec![3; g.num_nodes()];
        assign[g.find(a.op().name()).unwrap()] = 0;
        assign[g.find(b.op().name()).unwrap()] = 2;
        let devices = devs(4);
        let p = partition_by_location(&g, &assign, &devices, &[0, 0, 1, 1]).unwrap();
        // a:0 -> location 1 once (read on CPU:2 and CPU:3), a's control edge to d
        assert_eq!(p.transfers, 2);
        assert_eq!(p.per_device.keys().copied().collect::<Vec<_>>(), [0, 1]);
        let node = |l: usize, name: &str| {
            p.per_device[&l]
                .iter()
                .find(|n| n.name == name)
                .unwrap_or_else(|| panic!("{name} not in location {l}"))
                .clone()
        };
        let recv = node(1, &format!("{}/_0_loc0_to_loc1/recv", a.op().name()));
        assert_eq!(
            recv.device, devices[2].name,
            "on the first consumer's device"
        );
        assert_eq!(
            recv.get_attr::<String>("recv_device").unwrap(),
            devices[2].name
        );
        let send = node(0, &format!("{}/_0_loc0_to_loc1/send", a.op().name()));
        assert_eq!(send.device, devices[0].name);
        assert_eq!(
            send.get_attr::<String>("send_device").unwrap(),
            devices[0].name
        );
        assert_eq!(
            node(1, b.op().name()).input,
            [recv.name.clone(), recv.name.clone()]
        );
        assert_eq!(node(1, c.op().name()).input[0], recv.name);
        let ctrl = format!("{}/_ctrl_loc0_to_loc1/identity", a.op().name());
        assert_eq!(node(1, &ctrl).device, devices[3].name, "next to d");
        assert_eq!(node(1, d.name()).input, [format!("^{ctrl}")]);
        for (l, nodes) in &p.per_device {
            for n in nodes {
                let at = devices.iter().position(|d| d.name == n.device).unwrap();
                assert_eq!(at / 2, *l, "{} is in its device's location", n.name);
            }
        }
        // the worker of location 1 moves the Recv's value and b to CPU:3 for c
        let second = by_device(&p.per_device[&1], &devices).unwrap();
        assert_eq!(second.transfers, 2);
        assert_eq!(
            second.per_device.keys().copied().collect::<Vec<_>>(),
            [2, 3]
        );
        // each device its own location: the device partition itself
        let flat = partition(&g, &assign, &devices).unwrap();
        let same = partition_by_location(&g, &assign, &devices, &[0, 1, 2, 3]).unwrap();
        assert_eq!(
            (flat.per_device, flat.transfers),
            (same.per_device, same.transfers)
        );
    }

    #[test]
    fn a_piece_without_the_loop_cond_is_split_by_device_again() {
        let s = spread_loop();
        let (g, assign) = placed(&s, 4);
        let devices = devs(4);
        let lc = (0..g.num_nodes())
            .find(|&i| g.node(i).op() == "LoopCond")
            .unwrap();
        assert_eq!(assign[lc], 0);
        assert!(
            (0..g.num_nodes()).any(|i| assign[i] == 3),
            "the body spans locations"
        );
        let p = partition_by_location(&g, &assign, &devices, &[0, 0, 1, 1]).unwrap();
        let piece = &p.per_device[&1];
        assert!(piece.iter().all(|n| n.op != "LoopCond"));
        let merge = piece
            .iter()
            .find(|n| n.name.ends_with("/loc1/merge"))
            .expect("location 1 iterates by a control loop");
        assert!(
            [&devices[2].name, &devices[3].name].contains(&&merge.device),
            "in location 1"
        );
        for nodes in p.per_device.values() {
            let gd = GraphDef {
                node: nodes.clone(),
                ..Default::default()
            };
            let pg = Graph::from_graph_def(&gd, OpRegistry::global()).unwrap();
            let cf = build_control_flow_info(&pg).unwrap();
            assert_eq!(cf.frames.len(), 2, "the piece runs the loop's frame");
            // the worker's split: names of both levels never collide
            let second = by_device(nodes, &devices).unwrap();
            let mut names = BTreeSet::new();
            for n in second.per_device.values().flatten() {
                assert!(names.insert(n.name.clone()), "{} twice", n.name);
            }
        }
    }
}
