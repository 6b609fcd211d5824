//! A step's memory is bounded by its live work, not by how long it runs: long loops
//! run in flat memory, `parallel_iterations` is a bound and not a size, and
//! runtimes created and dropped leave nothing behind (their rendezvous keys
//! included).
//!
//! Memory is read from `/proc/self/status` (Linux); elsewhere those assertions are
//! skipped with a printed reason. The tests of this binary run in parallel, so the
//! bounds leave room for the others' allocations while staying far below what the
//! defects they guard against cost.

use std::sync::Mutex;

use actorflow::graph::builder::{while_loop, WhileOptions};
use actorflow::{
    ops, Code, DType, Output, Runtime, RuntimeOptions, Scope, Session, SessionOptions, Shape,
    Tensor,
};

const MIB: u64 = 1 << 20;

/// Serialises the tests that measure memory, so that one's allocations do not show
/// in another's figures.
static MEASURING: Mutex<()> = Mutex::new(());

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets `VmHWM` to the current RSS (Linux's `clear_refs` 5); false if it cannot.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `while i < n: (i + 1, a + 1.0)`, `n` fed (the benchmark's loop).
fn two_variable_loop(s: &Scope, parallel_iterations: i64) -> (Output, Output) {
    let n = ops::placeholder(s, DType::I32, Shape::scalar()).unwrap();
    let i0 = ops::scalar(s, 0i32).unwrap();
    let a0 = ops::scalar(s, 0.0f32).unwrap();
    let outs = while_loop(
        s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                ops::add(b, &v[1], &ops::scalar(b, 1.0f32)?)?,
            ])
        },
        &[i0, a0],
        &WhileOptions {
            parallel_iterations,
            ..Default::default()
        },
    )
    .unwrap();
    (n, outs[0].clone())
}

#[test]
fn a_long_loop_runs_in_flat_memory() {
    const ITERATIONS: i32 = 10_000_000;
    let _serial = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let s = Scope::new();
    let (n, out) = two_variable_loop(&s, 10);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let (nn, on) = (n.name(), out.name());
    let run = |iterations: i32| {
        let r = sess
            .run(&[(&nn, Tensor::scalar(iterations))], &[&on], &[])
            .unwrap();
        assert_eq!(r[0], Tensor::scalar(iterations));
    };
    run(1000); // compiles the step and warms the pooled state
    let (Some(before), true) = (status_bytes("VmRSS"), reset_peak()) else {
        println!("skipped the memory figures: no /proc/self/status or clear_refs");
        run(ITERATIONS);
        return;
    };
    run(ITERATIONS);
    let (after, peak) = (
        status_bytes("VmRSS").unwrap_or(0),
        status_bytes("VmHWM").unwrap_or(0),
    );
    println!(
        "{ITERATIONS} iterations: RSS {} KiB before, {} KiB after, peak {} KiB",
        before >> 10,
        after >> 10,
        peak >> 10
    );
    // The ready queue used to grow by ~140 B per iteration (1.4 GB here) and keep it.
    let bound = 32 * MIB;
    assert!(
        peak.saturating_sub(before) < bound && after.saturating_sub(before) < bound,
        "RSS {} MiB before, {} MiB after, {} MiB at the peak of a {ITERATIONS}-iteration loop",
        before / MIB,
        after / MIB,
        peak / MIB
    );
}

#[test]
fn parallel_iterations_is_a_bound_not_a_size() {
    let _serial = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let before = status_bytes("VmRSS");
    let s = Scope::new();
    let (n, out) = two_variable_loop(&s, i32::MAX as i64);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    for iterations in [0, 1, 17, 5000] {
        let r = sess
            .run(
                &[(&n.name(), Tensor::scalar(iterations))],
                &[&out.name()],
                &[],
            )
            .unwrap();
        assert_eq!(r[0], Tensor::scalar(iterations));
    }
    // The iteration ring was sized by the attribute: 2^31 slots, ~150 GB.
    if let (Some(before), Some(after)) = (before, status_bytes("VmRSS")) {
        println!(
            "parallel_iterations = i32::MAX: RSS {} KiB before, {} KiB after",
            before >> 10,
            after >> 10
        );
        assert!(
            after.saturating_sub(before) < 64 * MIB,
            "RSS grew from {} MiB to {} MiB",
            before / MIB,
            after / MIB
        );
    }
}

/// `parallel_iterations` below 1 is refused, naming the loop's `Enter`: when the
/// graph is built, and when a graph that says so is run.
#[test]
fn parallel_iterations_below_one_is_invalid() {
    let check = |e: &actorflow::Status| {
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        let node = e.node().unwrap_or_default().to_owned();
        assert!(node.ends_with("Enter") || node.contains("Enter_"), "{e}");
        assert!(e.to_string().contains("parallel_iterations"), "{e}");
    };
    for p in [0, -1, i64::MIN] {
        let s = Scope::new();
        let e = while_loop(
            &s,
            |b, v| ops::less(b, &v[0], &ops::scalar(b, 3i32)?),
            |b, v| Ok(vec![ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?]),
            &[ops::scalar(&s, 0i32).unwrap()],
            &WhileOptions {
                parallel_iterations: p,
                ..Default::default()
            },
        )
        .unwrap_err();
        check(&e);

        // A GraphDef from elsewhere that says so.
        let s = Scope::new();
        let (n, out) = two_variable_loop(&s, 10);
        let mut gd = s.graph_def();
        for node in gd.node.iter_mut().filter(|n| n.op == "Enter") {
            node.attr.insert(
                "parallel_iterations".into(),
                actorflow::graph::AttrValue::I(p),
            );
        }
        let e = Session::new(&gd, SessionOptions::default())
            .and_then(|sess| sess.run(&[(&n.name(), Tensor::scalar(3i32))], &[&out.name()], &[]))
            .unwrap_err();
        check(&e);
    }
}

#[test]
fn runtimes_created_and_dropped_leave_no_keys_behind() {
    const CYCLES: usize = 5000;
    let _serial = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    // x on cpu:0 → y on cpu:1 → z on cpu:0: two transfers, two interned keys
    let s = Scope::new();
    let x = ops::placeholder(&s.with_device("/device:CPU:0"), DType::F32, Shape::scalar()).unwrap();
    let y = ops::add(&s.with_device("/device:CPU:1"), &x, &x).unwrap();
    let z = ops::add(&s.with_device("/device:CPU:0"), &y, &x).unwrap();
    let graph = s.graph_def();
    let (xn, zn) = (x.name(), z.name());
    let keys = actorflow::rendezvous::key::live_keys;
    let cycle = || {
        let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(2)).unwrap();
        let sess = Session::in_runtime(&rt, &graph, SessionOptions::default()).unwrap();
        let out = sess
            .run(&[(&xn, Tensor::scalar(2.0f32))], &[&zn], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(6.0f32));
        let held = keys();
        drop(sess);
        rt.shutdown();
        drop(rt);
        held
    };
    let baseline = keys();
    // warm up: thread stacks, allocator arenas, lazily built registries
    for _ in 0..50 {
        assert!(
            cycle() >= baseline + 2,
            "a step's transfers intern their keys"
        );
    }
    assert_eq!(keys(), baseline, "dropping a runtime frees its keys");
    let before = status_bytes("VmRSS");
    for _ in 0..CYCLES {
        let _ = cycle();
    }
    assert_eq!(keys(), baseline, "dropping a runtime frees its keys");
    if let (Some(before), Some(after)) = (before, status_bytes("VmRSS")) {
        println!(
            "{CYCLES} runtimes: RSS {} KiB before, {} KiB after",
            before >> 10,
            after >> 10
        );
        assert!(
            after.saturating_sub(before) < 16 * MIB,
            "RSS grew from {} MiB to {} MiB over {CYCLES} runtimes",
            before / MIB,
            after / MIB
        );
    }
}
