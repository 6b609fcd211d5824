//! Step statistics ([`RunMetadata`]) as a Chrome trace-event JSON timeline, the
//! format `chrome://tracing` and Perfetto (<https://ui.perfetto.dev>) open —
//! TensorFlow's `timeline.py`, for this runtime.
//!
//! Layout of the timeline:
//!
//! - one process (`pid`) per task (`/job:worker/replica:0/task:1`; a local
//!   session is one task), named after the task;
//! - in it, for each of the task's devices, one track (`tid`) per thread that
//!   ran a partition on the device — the device's data-plane thread — named
//!   after the device and the thread, holding one complete (`"ph": "X"`) slice
//!   per executed node, named after the node, with its op, output shapes and
//!   bytes, frame and iteration in `args`;
//! - a `partitions` track per device with a slice per partition per step (steps running at
//!   the same time get more `partitions` tracks);
//! - asynchronous kernels that waited (a `_Recv` whose value had not arrived, a
//!   queue op waiting for room or elements) overlap the nodes that ran while they
//!   waited, so they go on `pending` tracks of their device, one slice per wait;
//!   a device's tracks sit together in its task;
//! - slices on one track never overlap, so every track is a valid stack for
//!   Perfetto's importer;
//! - each `_Send`/`_Recv` pair is a flow arrow: a `"ph": "s"` event inside the Send
//!   slice and a `"ph": "f"` event (binding point `e`, the enclosing slice) inside
//!   the Recv slice, with the same `id`, matched by rendezvous key (tensor name,
//!   sending and receiving device) and frame/iteration;
//! - memory over time: a counter (`"ph": "C"`) per device, `memory CPU:0`, with
//!   two series set after each node: `step bytes`, what the step holds on the
//!   device, and `device bytes`, what the device holds in all (every step and
//!   variable).
//!
//! Times are microseconds since the first partition of the first step added.
//!
//! ```
//! use actorflow::trace::ChromeTrace;
//! use actorflow::{ops, DType, RunArgs, RunOptions, Scope, Session, SessionOptions, Shape};
//! use actorflow::{Tensor, TraceLevel};
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
//! let a = ops::neg(&s.with_device("/device:CPU:0"), &x).unwrap();
//! let b = ops::neg(&s.with_device("/device:CPU:1"), &a).unwrap();
//! let two = SessionOptions::default().with_cpu_devices(2);
//! let sess = Session::new(&s.graph_def(), two).unwrap();
//! let opts = RunOptions::default().with_trace_level(TraceLevel::FullTrace);
//! let args = RunArgs::new().feed(&x, Tensor::scalar(2.0f32)).fetch(&b).options(opts);
//! let out = sess.run_with(&args).unwrap();
//! let mut trace = ChromeTrace::new();
//! trace.add_step("step 0", out.metadata.as_ref().unwrap());
//! let json: serde_json::Value = serde_json::from_str(&trace.to_json_string()).unwrap();
//! assert!(json["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "s"));
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use actors::stats::{NodeStats, StatsCollector};
use rendezvous::FrameIter;
use serde_json::{json, Value};

use crate::{GraphDef, Result, RunMetadata, Status};

/// The category of node slices.
pub const NODE_CATEGORY: &str = "node";
/// The category of memory counters.
pub const MEMORY_CATEGORY: &str = "memory";
/// The category of partition slices.
pub const PARTITION_CATEGORY: &str = "partition";
/// The category (and flow name prefix) of Send→Recv arrows.
pub const TRANSFER_CATEGORY: &str = "transfer";

/// A rendezvous key plus frame and iteration: what pairs a Send with its Recv.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TransferKey {
    tensor: String,
    send_device: String,
    recv_device: String,
    frame_iter: FrameIter,
}

/// Where a transfer's slice lies: pid, tid, start and end in µs.
#[derive(Clone, Copy, Debug)]
struct Slice {
    pid: usize,
    tid: usize,
    ts: f64,
    end: f64,
}

/// Tracks of one device: track names by tid, and the packed tracks (partitions,
/// pending kernels): their kind, tid and the end of their last slice.
#[derive(Default)]
struct DeviceTracks {
    threads: Vec<String>,
    lanes: Vec<(&'static str, usize, f64)>,
}

/// A Chrome trace being built from one or more traced steps; see the module docs.
#[derive(Default)]
pub struct ChromeTrace {
    origin: Option<Instant>,
    devices: Vec<(String, DeviceTracks)>,
    /// Until [`ChromeTrace::to_json`] places them in their tasks, events hold
    /// their device's index as `pid` and its track's index as `tid`.
    events: Vec<Value>,
    flows: u64,
    nodes: usize,
}

/// `_Send`/`_Recv` attributes of a partition graph node.
/// The transfers of partition graph `g` (of `device`), keyed by device and node
/// name. A node placed on a device of its own (a cluster task's piece, which its
/// worker partitions again by device) is keyed by that device too.
fn transfer_attrs(g: &GraphDef, device: &str) -> HashMap<String, (String, String, String)> {
    let mut out = HashMap::new();
    for n in g
        .node
        .iter()
        .filter(|n| matches!(n.op.as_str(), "_Send" | "_HostSend" | "_Recv" | "_HostRecv"))
    {
        let (Ok(tensor), Ok(src), Ok(dst)) = (
            n.get_attr::<String>("tensor_name"),
            n.get_attr::<String>("send_device"),
            n.get_attr::<String>("recv_device"),
        ) else {
            continue;
        };
        if !n.device.is_empty() && n.device != device {
            out.insert(
                format!("{}\u{0}{}", n.device, n.name),
                (tensor.clone(), src.clone(), dst.clone()),
            );
        }
        out.insert(format!("{device}\u{0}{}", n.name), (tensor, src, dst));
    }
    out
}

fn micros(d: std::time::Duration) -> f64 {
    d.as_nanos() as f64 / 1000.0
}

impl ChromeTrace {
    /// An empty trace.
    pub fn new() -> ChromeTrace {
        ChromeTrace::default()
    }

    /// The number of node slices added so far.
    pub fn node_events(&self) -> usize {
        self.nodes
    }

    /// The number of Send→Recv arrows added so far.
    pub fn flows(&self) -> u64 {
        self.flows
    }

    fn ts(&self, t: Instant) -> f64 {
        let origin = self.origin.unwrap_or(t);
        match t.checked_duration_since(origin) {
            Some(d) => micros(d),
            None => -micros(origin.duration_since(t)),
        }
    }

    fn pid(&mut self, device: &str) -> usize {
        if let Some(i) = self.devices.iter().position(|(d, _)| d == device) {
            return i;
        }
        self.devices
            .push((device.to_owned(), DeviceTracks::default()));
        self.devices.len() - 1
    }

    fn tid(&mut self, pid: usize, thread: &str) -> usize {
        let tracks = &mut self.devices[pid].1;
        if let Some(i) = tracks.threads.iter().position(|t| t == thread) {
            return i;
        }
        tracks.threads.push(thread.to_owned());
        tracks.threads.len() - 1
    }

    /// A track of kind `kind` (`partitions`, `pending`) of `pid` free from `ts`
    /// on, now busy until `end`; a new one when all are busy.
    fn packed_tid(&mut self, pid: usize, kind: &'static str, ts: f64, end: f64) -> usize {
        let tracks = &mut self.devices[pid].1;
        if let Some(lane) = tracks
            .lanes
            .iter_mut()
            .find(|(k, _, busy_until)| *k == kind && *busy_until <= ts)
        {
            lane.2 = end;
            return lane.1;
        }
        let n = tracks.lanes.iter().filter(|(k, _, _)| *k == kind).count();
        let tid = self.tid(pid, &format!("{kind} #{n}"));
        self.devices[pid].1.lanes.push((kind, tid, end));
        tid
    }

    /// Adds one traced step, labelled `label` (e.g. `"step 3"`) in its partition
    /// slices.
    pub fn add_step(&mut self, label: &str, metadata: &RunMetadata) {
        let mut stats: Vec<&StatsCollector> = metadata.step_stats.iter().collect();
        stats.sort_by(|a, b| a.device.cmp(&b.device).then(a.start.cmp(&b.start)));
        if self.origin.is_none() {
            self.origin = stats.iter().map(|s| s.start).min();
        }
        let mut transfers = HashMap::new();
        for (device, g) in &metadata.partition_graphs {
            transfers.extend(transfer_attrs(g, device));
        }
        let mut sends: HashMap<TransferKey, Vec<Slice>> = HashMap::new();
        let mut recvs: HashMap<TransferKey, Vec<Slice>> = HashMap::new();
        for c in stats {
            let pid = self.pid(&c.device);
            let tid = self.tid(pid, &c.thread);
            let start = self.ts(c.start);
            let end = c.end.map_or_else(
                || c.nodes.iter().map(|n| self.ts(n.end)).fold(start, f64::max),
                |e| self.ts(e),
            );
            let end = end.max(start + 0.001);
            let lane = self.packed_tid(pid, "partitions", start, end);
            self.events.push(json!({
                "name": format!("partition ({label})"), "cat": PARTITION_CATEGORY, "ph": "X",
                "ts": start, "dur": end - start, "pid": pid, "tid": lane,
                "args": { "step": label, "device": c.device, "nodes": c.nodes.len() },
            }));
            let counter = format!("memory {}", split_device(&c.device).1);
            for n in &c.nodes {
                let slice = self.add_node(pid, tid, label, n);
                self.events.push(json!({
                    "name": counter, "cat": MEMORY_CATEGORY, "ph": "C", "ts": slice.end,
                    "pid": pid, "tid": 0,
                    "args": {
                        "step bytes": n.memory.live_bytes,
                        "device bytes": n.memory.device_bytes_in_use,
                    },
                }));
                let Some((tensor, src, dst)) =
                    transfers.get(&format!("{}\u{0}{}", c.device, n.node))
                else {
                    continue;
                };
                let key = TransferKey {
                    tensor: tensor.clone(),
                    send_device: src.clone(),
                    recv_device: dst.clone(),
                    frame_iter: n.frame_iter,
                };
                let side = if n.op.ends_with("Send") {
                    &mut sends
                } else {
                    &mut recvs
                };
                side.entry(key).or_default().push(slice);
            }
        }
        let mut pairs: Vec<(TransferKey, Slice, Slice)> = Vec::new();
        for (key, ss) in sends {
            if let Some(rs) = recvs.get(&key) {
                pairs.extend(ss.iter().zip(rs).map(|(s, r)| (key.clone(), *s, *r)));
            }
        }
        pairs.sort_by(|a, b| a.1.ts.total_cmp(&b.1.ts));
        for (key, s, r) in pairs {
            self.flows += 1;
            let id = self.flows;
            let name = format!("{TRANSFER_CATEGORY} {}", key.tensor);
            let s_ts = (s.ts + s.end) / 2.0;
            // Strictly inside the Recv slice: when the Send happened during the wait,
            // then; else the Recv's middle.
            let f_ts = if s_ts > r.ts && s_ts < r.end {
                s_ts
            } else {
                (r.ts + r.end) / 2.0
            };
            self.events.push(json!({
                "name": name, "cat": TRANSFER_CATEGORY, "ph": "s", "id": id,
                "ts": s_ts, "pid": s.pid, "tid": s.tid,
            }));
            self.events.push(json!({
                "name": name, "cat": TRANSFER_CATEGORY, "ph": "f", "bp": "e", "id": id,
                "ts": f_ts, "pid": r.pid, "tid": r.tid,
                "args": { "from": key.send_device, "to": key.recv_device },
            }));
        }
    }

    fn add_node(&mut self, pid: usize, tid: usize, label: &str, n: &NodeStats) -> Slice {
        let ts = self.ts(n.start);
        let end = self.ts(n.end).max(ts + 0.001);
        let tid = if n.waited {
            self.packed_tid(pid, "pending", ts, end)
        } else {
            tid
        };
        let shapes: Vec<Value> = n
            .output_shapes
            .iter()
            .map(|s| s.as_ref().map_or(Value::Null, |s| json!(s.to_string())))
            .collect();
        self.events.push(json!({
            "name": &*n.node, "cat": NODE_CATEGORY, "ph": "X",
            "ts": ts, "dur": end - ts, "pid": pid, "tid": tid,
            "args": {
                "op": &*n.op, "step": label, "output_shapes": shapes,
                "output_bytes": n.output_bytes, "allocated_bytes": n.memory.allocated_bytes,
                "dead": n.is_dead, "waited": n.waited,
                "frame_id": n.frame_iter.frame_id, "iter": n.frame_iter.iter,
            },
        }));
        self.nodes += 1;
        Slice { pid, tid, ts, end }
    }

    /// The trace as a JSON value: `{"traceEvents": [...], "displayTimeUnit": "ns"}`
    /// with process and thread names first. Each task is a process; each of its
    /// devices' tracks a thread of it, named after the device.
    pub fn to_json(&self) -> Value {
        let mut tasks: Vec<&str> = Vec::new();
        // Per device: its process, and the first of its tracks' thread ids there.
        let mut placed: Vec<(usize, usize)> = Vec::with_capacity(self.devices.len());
        let mut next_tid: Vec<usize> = Vec::new();
        let mut events = Vec::with_capacity(self.events.len() + 4 * self.devices.len());
        for (device, tracks) in &self.devices {
            let (task, short) = split_device(device);
            let pid = match tasks.iter().position(|t| *t == task) {
                Some(p) => p,
                None => {
                    tasks.push(task);
                    next_tid.push(0);
                    events.push(json!({
                        "name": "process_name", "ph": "M", "pid": tasks.len() - 1, "tid": 0,
                        "args": { "name": task },
                    }));
                    events.push(json!({
                        "name": "process_sort_index", "ph": "M", "pid": tasks.len() - 1,
                        "tid": 0, "args": { "sort_index": tasks.len() - 1 },
                    }));
                    tasks.len() - 1
                }
            };
            let first = next_tid[pid];
            next_tid[pid] += tracks.threads.len();
            placed.push((pid, first));
            for (i, thread) in tracks.threads.iter().enumerate() {
                events.push(json!({
                    "name": "thread_name", "ph": "M", "pid": pid, "tid": first + i,
                    "args": { "name": format!("{short} {thread}") },
                }));
                events.push(json!({
                    "name": "thread_sort_index", "ph": "M", "pid": pid, "tid": first + i,
                    "args": { "sort_index": first + i },
                }));
            }
        }
        events.extend(self.events.iter().map(|e| {
            let mut e = e.clone();
            let device = e["pid"].as_u64().unwrap_or(0) as usize;
            let (pid, first) = placed.get(device).copied().unwrap_or_default();
            let tid = e["tid"].as_u64().unwrap_or(0) as usize;
            e["pid"] = json!(pid);
            e["tid"] = json!(first + tid);
            e
        }));
        json!({ "traceEvents": events, "displayTimeUnit": "ns" })
    }

    /// The trace as a JSON string.
    pub fn to_json_string(&self) -> String {
        self.to_json().to_string()
    }

    /// Writes the trace to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json_string())
            .map_err(|e| Status::from(e).context(format_args!("writing '{}'", path.display())))
    }
}

/// A device name's task (`/job:J/replica:R/task:T`) and the rest (`CPU:0`); a
/// name without `/device:` is its own task.
fn split_device(device: &str) -> (&str, &str) {
    match device.find("/device:") {
        Some(i) if i > 0 => (&device[..i], &device[i + "/device:".len()..]),
        _ => (device, device),
    }
}

/// The Chrome trace JSON of one traced step.
pub fn chrome_trace_json(metadata: &RunMetadata) -> String {
    let mut t = ChromeTrace::new();
    t.add_step("step", metadata);
    t.to_json_string()
}
