//! Recv scheduling (`SessionOptions::enable_recv_scheduling`, TensorFlow's
//! `GraphOptions.enable_recv_scheduling`, the whitepaper's §5.2) on the model
//! where it matters, `actorflow::bench::recv_schedule`'s: eight 4 MiB weights on
//! task 1 of a two-task gRPC cluster, read one per stage by a chain on task 0.
//!
//! - Unscheduled, every `_Recv` asks for its weight when the step starts, and the
//!   weights arrive long before the chain reads them: task 0's peak holds
//!   (nearly) all eight and the chain's vector, 36 MiB (each stage's sum is
//!   forwarded into the received buffer), at least five weights' worth however
//!   the transfers and the chain race.
//! - Scheduled, each `_Recv` waits for a node of the chain, through a
//!   `ControlTrigger` on task 0: at most three 4 MiB vectors are alive at once
//!   (the chain's, the weight it is adding, the next weight arriving).
//! - The answers are bit-identical either way, and equal the value computed
//!   here by hand.
//!
//! Whether scheduling changes no answer on every other graph is checked by the
//! placement suites (`tests/any_placement`, `tests/tf_corpus.rs`), which run
//! half their layouts with it on. The servers bind 127.0.0.1 on free ports and
//! stop when the test ends.

use actorflow::bench::recv_schedule::{
    staged_session, traced_step, ELEMENTS, STAGES, TANH_PER_STAGE,
};
use actorflow::{RunArgs, RunOptions, TraceLevel};

/// The chain's value, computed in `f32` as the kernels do it element by element
/// (every element is the same), times the number of elements.
fn expected_sum() -> f64 {
    let mut h = 0.5f32;
    for i in 0..STAGES {
        for _ in 0..TANH_PER_STAGE {
            h = h.tanh();
        }
        h += 0.01 * (i + 1) as f32;
    }
    f64::from(h) * ELEMENTS as f64
}

#[test]
fn scheduled_receives_lower_the_receivers_peak_and_change_no_answer() {
    const MIB: usize = 1 << 20;
    let mut results = Vec::new();
    for scheduled in [false, true] {
        let (_servers, sess, model) = staged_session(scheduled).unwrap();
        let (value, peak) = traced_step(&sess, &model).unwrap();
        // A second step: the same answer.
        let (again, peak_again) = traced_step(&sess, &model).unwrap();
        assert_eq!(value.to_bits(), again.to_bits());
        let peak = peak.max(peak_again);
        // Task 0's partition graph waits on the chain only when scheduled.
        let md = sess
            .run_with(
                &RunArgs::new()
                    .fetch(model.output.as_str())
                    .options(RunOptions::default().with_trace_level(TraceLevel::FullTrace)),
            )
            .unwrap()
            .metadata
            .unwrap();
        let triggers = md
            .partition_graphs
            .iter()
            .flat_map(|(_, g)| &g.node)
            .filter(|n| n.op == "ControlTrigger" && n.device.contains("/task:0/"))
            .count();
        let waiting_recvs = md
            .partition_graphs
            .iter()
            .flat_map(|(_, g)| &g.node)
            .filter(|n| n.op == "_Recv" && n.input.iter().any(|i| i.contains("/_recv_wait_")))
            .count();
        if scheduled {
            assert!(triggers > 0);
            // Every weight's but the first: `w0` is read after four `Tanh`s, 2.1
            // ms into the estimated 23 ms step, sooner than its transfer (0.84
            // ms estimated) and the prefetch margin (1/16 of the step) allow.
            assert_eq!(waiting_recvs, STAGES - 1);
        } else {
            assert_eq!((triggers, waiting_recvs), (0, 0));
        }
        results.push((value, peak));
    }
    let [(off, peak_off), (on, peak_on)] = results[..] else {
        unreachable!()
    };
    assert_eq!(off.to_bits(), on.to_bits());
    let want = expected_sum();
    assert!(
        (f64::from(on) - want).abs() <= 1e-4 * want.abs(),
        "{on} against {want}"
    );
    let weight = ELEMENTS * 4;
    assert!(
        (5 * weight..=(STAGES + 1) * weight).contains(&peak_off),
        "unscheduled peak {} MiB",
        peak_off / MIB
    );
    assert!(
        peak_on <= 3 * weight,
        "scheduled peak {} MiB against {} MiB unscheduled",
        peak_on / MIB,
        peak_off / MIB
    );
}
