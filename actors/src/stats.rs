//! Step statistics: what each node did (TensorFlow's `NodeExecStats`), collected by
//! executors when a step asks for tracing.
//!
//! A [`StatsCollector`] covers one partition in one step: its device, the thread
//! that ran it (every node of a partition runs on its device's data-plane thread,
//! asynchronous completions included), its start and end, and one [`NodeStats`] per
//! executed node. An asynchronous kernel that went pending (a `_Recv` waiting for
//! its value, a queue op waiting for room or elements) is recorded when it
//! completes, its start being when its kernel was called.
//!
//! Memory: a collector owns its step's [`MemoryCounter`] on the device, which the
//! executor charges every buffer its kernels allocate to (besides the device's own
//! counter). Each node records what its kernel allocated and the step's bytes live
//! after it ([`NodeMemory`]: memory over time); the collector's
//! [`StatsCollector::memory`] is the step's peak, largest allocation and
//! allocation count on the device, taken when the partition ends.

use std::sync::Arc;
use std::time::Instant;

use graph::tensor::memory::{AllocatorStats, MemoryCounter};
use graph::TensorShape;
use kernels::Entry;
use rendezvous::FrameIter;

/// A kernel still computing: (node index, frame, iteration), when it was called,
/// its frame and iteration, and, for an expensive kernel run off the executor's
/// thread, the counter of what it allocates.
type Pending = (
    (usize, usize, i64),
    Instant,
    FrameIter,
    Option<Arc<MemoryCounter>>,
);

/// One executed node.
#[derive(Clone, Debug)]
pub struct NodeStats {
    /// The node's name.
    pub node: Arc<str>,
    /// The op.
    pub op: Arc<str>,
    /// When its kernel started.
    pub start: Instant,
    /// When it finished.
    pub end: Instant,
    /// Shapes of its outputs (`None` for dead or reference outputs).
    pub output_shapes: Vec<Option<TensorShape>>,
    /// Bytes of its outputs.
    pub output_bytes: usize,
    /// True when it ran dead (its kernel was skipped).
    pub is_dead: bool,
    /// The loop frame instance and iteration it ran in (the root frame is
    /// `(0, 0)`); a `_Send` and the `_Recv` it feeds share it.
    pub frame_iter: FrameIter,
    /// True when its asynchronous kernel went pending: `start..end` then includes
    /// the wait (for a `_Recv`, until its value arrived), during which other nodes
    /// of the partition ran.
    pub waited: bool,
    /// What it allocated, and the step's memory on the device after it.
    pub memory: NodeMemory,
}

/// One node's memory (TensorFlow's `AllocatorMemoryUsed` of a `NodeExecStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeMemory {
    /// Bytes its kernel allocated (outputs, copies, temporaries made tensors).
    pub allocated_bytes: u64,
    /// Bytes the step held on the device after it ran.
    pub live_bytes: usize,
    /// The step's peak on the device so far.
    pub peak_bytes: usize,
    /// Bytes in use on the device after it ran, every step and variable included.
    pub device_bytes_in_use: usize,
}

/// The statistics of one partition in one step.
#[derive(Clone, Debug)]
pub struct StatsCollector {
    /// The device's name.
    pub device: String,
    /// The thread that ran the partition.
    pub thread: String,
    /// When the partition started.
    pub start: Instant,
    /// When it finished (set at the end).
    pub end: Option<Instant>,
    /// Executed nodes, in order of completion.
    pub nodes: Vec<NodeStats>,
    /// The step's memory on the device: its peak, its largest allocation, its
    /// allocations and what it still held when the partition ended (fetches,
    /// variables' new values, tensors handed to other devices). Set at the end.
    pub memory: AllocatorStats,
    /// Asynchronous kernels still pending: (node index, frame, iteration) and when
    /// their kernel was called.
    pending: Vec<Pending>,
    /// The step's counter on the device, charged by the executor.
    counter: Arc<MemoryCounter>,
}

impl StatsCollector {
    /// A collector for a partition on `device`, started now.
    pub fn new(device: &str) -> StatsCollector {
        StatsCollector {
            device: device.to_owned(),
            thread: std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_owned(),
            start: Instant::now(),
            end: None,
            nodes: Vec::new(),
            memory: AllocatorStats::default(),
            pending: Vec::new(),
            counter: Arc::new(MemoryCounter::new()),
        }
    }

    /// The step's memory counter on the device, which the executor charges.
    pub fn counter(&self) -> &Arc<MemoryCounter> {
        &self.counter
    }

    /// Ends the partition now, taking its memory figures.
    pub fn finish(&mut self) {
        self.end = Some(Instant::now());
        self.memory = self.counter.stats();
    }

    /// Records a node.
    pub fn record(&mut self, n: NodeStats) {
        self.nodes.push(n);
    }

    /// Records a node that finished now, with its outputs; `start` is when its
    /// kernel was called and the step's allocation total then
    /// ([`MemoryCounter::total_bytes`]); `device` is the device's counter.
    pub fn record_outputs(
        &mut self,
        (node, op): (&Arc<str>, &Arc<str>),
        (start, allocated_before): (Instant, u64),
        outputs: &[Entry],
        frame_iter: FrameIter,
        is_dead: bool,
        device: &MemoryCounter,
    ) {
        let memory = NodeMemory {
            allocated_bytes: self.counter.total_bytes() - allocated_before,
            live_bytes: self.counter.bytes_in_use(),
            peak_bytes: self.counter.peak_bytes_in_use(),
            device_bytes_in_use: device.bytes_in_use(),
        };
        self.nodes.push(NodeStats {
            node: Arc::clone(node),
            op: Arc::clone(op),
            start,
            end: Instant::now(),
            output_shapes: outputs
                .iter()
                .map(|o| match o {
                    Entry::Value(t) => Some(t.shape().clone()),
                    _ => None,
                })
                .collect(),
            output_bytes: outputs.iter().map(Entry::byte_size).sum(),
            is_dead,
            frame_iter,
            waited: false,
            memory,
        });
    }

    /// Remembers that the asynchronous kernel of `tagged` (node index, frame,
    /// iteration) went pending after being called at `start`.
    pub fn kernel_pending(&mut self, tagged: (usize, usize, i64), start: Instant, fi: FrameIter) {
        self.pending.push((tagged, start, fi, None));
    }

    /// Remembers that the expensive kernel of `tagged` went to the device's pool
    /// at `start`, counting what it allocates on `kernel`.
    pub fn kernel_offloaded(
        &mut self,
        tagged: (usize, usize, i64),
        start: Instant,
        fi: FrameIter,
        kernel: Arc<MemoryCounter>,
    ) {
        self.pending.push((tagged, start, fi, Some(kernel)));
    }

    /// Records the asynchronous kernel of `tagged`, which went pending (see
    /// [`StatsCollector::kernel_pending`]) and has now completed with `outputs`
    /// (what it allocated on completion is not its own: it is counted where its
    /// value was made).
    pub fn async_done(
        &mut self,
        tagged: (usize, usize, i64),
        names: (&Arc<str>, &Arc<str>),
        outputs: &[Entry],
        is_dead: bool,
        device: &MemoryCounter,
    ) {
        let Some(i) = self.pending.iter().position(|p| p.0 == tagged) else {
            return;
        };
        let (_, start, fi, kernel) = self.pending.swap_remove(i);
        let now = self.counter.total_bytes();
        self.record_outputs(names, (start, now), outputs, fi, is_dead, device);
        if let Some(n) = self.nodes.last_mut() {
            match kernel {
                // An offloaded kernel computed all along: what it allocated is its own.
                Some(k) => n.memory.allocated_bytes = k.total_bytes(),
                None => n.waited = true,
            }
        }
    }
}
