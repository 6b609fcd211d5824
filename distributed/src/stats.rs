//! Step statistics across processes: a worker's [`StatsCollector`]s travel as
//! TensorFlow's `StepStats` (wall-clock microseconds and nanoseconds, one
//! `DeviceStepStats` per partition, the op in `timeline_label` as TensorFlow writes
//! it: `name = Op()`), and a master turns them back into collectors on its own
//! clock, so a traced step of a cluster reports every task's nodes. Each node's
//! memory travels as TensorFlow's `AllocatorMemoryUsed`; a partition's figures
//! are rebuilt from its nodes' (its peak, what it allocated in all and what it
//! held after its last node; not its allocation count or largest allocation,
//! which `StepStats` does not carry).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actors::stats::{NodeMemory, NodeStats, StatsCollector};
use proto::tensorflow as pb;
use rendezvous::FrameIter;

/// Maps this process's `Instant`s to wall-clock nanoseconds since the epoch.
struct Clock {
    now: Instant,
    wall_nanos: i128,
}

impl Clock {
    fn now() -> Clock {
        Clock {
            now: Instant::now(),
            wall_nanos: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as i128)
                .unwrap_or(0),
        }
    }

    fn nanos(&self, t: Instant) -> i64 {
        let delta = match self.now.checked_duration_since(t) {
            Some(d) => -(d.as_nanos() as i128),
            None => t.duration_since(self.now).as_nanos() as i128,
        };
        (self.wall_nanos + delta) as i64
    }

    fn instant(&self, nanos: i64) -> Instant {
        let delta = nanos as i128 - self.wall_nanos;
        if delta >= 0 {
            self.now + Duration::from_nanos(delta as u64)
        } else {
            self.now
                .checked_sub(Duration::from_nanos((-delta) as u64))
                .unwrap_or(self.now)
        }
    }
}

/// TensorFlow's `StepStats` of a step's partitions.
pub fn step_stats_to_proto(stats: &[StatsCollector]) -> pb::StepStats {
    let clock = Clock::now();
    pb::StepStats {
        dev_stats: stats
            .iter()
            .map(|c| pb::DeviceStepStats {
                device: c.device.clone(),
                thread_names: [(0u32, c.thread.clone())].into_iter().collect(),
                node_stats: c
                    .nodes
                    .iter()
                    .map(|n| {
                        let start = clock.nanos(n.start);
                        let rel = clock.nanos(n.end) - start;
                        pb::NodeExecStats {
                            node_name: n.node.to_string(),
                            all_start_micros: start / 1000,
                            all_start_nanos: start,
                            op_start_rel_micros: 0,
                            op_end_rel_micros: rel / 1000,
                            all_end_rel_micros: rel / 1000,
                            op_end_rel_nanos: rel,
                            all_end_rel_nanos: rel,
                            memory: vec![pb::AllocatorMemoryUsed {
                                allocator_name: "cpu".into(),
                                total_bytes: n.memory.allocated_bytes as i64,
                                peak_bytes: n.memory.peak_bytes as i64,
                                live_bytes: n.memory.live_bytes as i64,
                                allocator_bytes_in_use: n.memory.device_bytes_in_use as i64,
                                ..Default::default()
                            }],
                            timeline_label: format!(
                                "{} = {}(){}",
                                n.node,
                                n.op,
                                if n.is_dead { " [dead]" } else { "" }
                            ),
                            ..Default::default()
                        }
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The collectors a peer's `StepStats` describe, on this process's clock.
pub fn step_stats_from_proto(p: &pb::StepStats) -> Vec<StatsCollector> {
    let clock = Clock::now();
    p.dev_stats
        .iter()
        .map(|d| {
            let mut c = StatsCollector::new(&d.device);
            c.thread = d.thread_names.values().next().cloned().unwrap_or_default();
            let mut first: Option<Instant> = None;
            let mut last: Option<Instant> = None;
            for n in &d.node_stats {
                let start_nanos = if n.all_start_nanos != 0 {
                    n.all_start_nanos
                } else {
                    n.all_start_micros.saturating_mul(1000)
                };
                let rel = if n.all_end_rel_nanos != 0 {
                    n.all_end_rel_nanos
                } else {
                    n.all_end_rel_micros.saturating_mul(1000)
                };
                let start = clock.instant(start_nanos);
                let end = clock.instant(start_nanos.saturating_add(rel.max(0)));
                first = Some(first.map_or(start, |f| f.min(start)));
                last = Some(last.map_or(end, |l| l.max(end)));
                let label = n.timeline_label.as_str();
                let memory = n
                    .memory
                    .first()
                    .map_or_else(NodeMemory::default, |m| NodeMemory {
                        allocated_bytes: m.total_bytes.max(0) as u64,
                        live_bytes: m.live_bytes.max(0) as usize,
                        peak_bytes: m.peak_bytes.max(0) as usize,
                        device_bytes_in_use: m.allocator_bytes_in_use.max(0) as usize,
                    });
                c.memory.peak_bytes_in_use = c.memory.peak_bytes_in_use.max(memory.peak_bytes);
                c.memory.bytes_in_use = memory.live_bytes;
                c.memory.total_bytes += memory.allocated_bytes;
                let op = label
                    .split_once(" = ")
                    .and_then(|(_, r)| r.split('(').next())
                    .unwrap_or("");
                c.record(NodeStats {
                    node: n.node_name.as_str().into(),
                    op: op.into(),
                    start,
                    end,
                    output_shapes: Vec::new(),
                    output_bytes: 0,
                    is_dead: label.ends_with("[dead]"),
                    frame_iter: FrameIter::default(),
                    waited: false,
                    memory,
                });
            }
            if let Some(f) = first {
                c.start = f;
            }
            c.end = last;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_on_the_same_clock() {
        let mut c = StatsCollector::new("/job:w/replica:0/task:1/device:CPU:0");
        let t0 = Instant::now();
        c.record(NodeStats {
            node: "a".into(),
            op: "AddV2".into(),
            start: t0,
            end: t0 + Duration::from_micros(250),
            output_shapes: vec![],
            output_bytes: 4,
            is_dead: false,
            frame_iter: FrameIter::default(),
            waited: false,
            memory: NodeMemory {
                allocated_bytes: 4000,
                live_bytes: 6000,
                peak_bytes: 9000,
                device_bytes_in_use: 10_000,
            },
        });
        let p = step_stats_to_proto(std::slice::from_ref(&c));
        let n = &p.dev_stats[0].node_stats[0];
        assert_eq!(n.timeline_label, "a = AddV2()");
        assert_eq!(n.all_end_rel_micros, 250);
        let back = step_stats_from_proto(&p);
        assert_eq!(back[0].device, c.device);
        let b = &back[0].nodes[0];
        assert_eq!((&*b.node, &*b.op), ("a", "AddV2"));
        assert_eq!(b.end.duration_since(b.start), Duration::from_micros(250));
        assert_eq!(b.memory, c.nodes[0].memory);
        let m = back[0].memory;
        assert_eq!(
            (m.peak_bytes_in_use, m.bytes_in_use, m.total_bytes),
            (9000, 6000, 4000)
        );
        let skew = if b.start > t0 {
            b.start - t0
        } else {
            t0 - b.start
        };
        assert!(skew < Duration::from_millis(50), "{skew:?}");
    }
}
