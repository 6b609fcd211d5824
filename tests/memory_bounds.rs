//! Memory is bounded by live work: runtimes created and dropped leave nothing
//! behind (their rendezvous keys included).
//!
//! Memory is read from `/proc/self/status` (Linux); elsewhere those assertions are
//! skipped with a printed reason. The tests of this binary run in parallel, so the
//! bounds leave room for the others' allocations while staying far below what the
//! defects they guard against cost.

use std::sync::Mutex;

use actorflow::{
    ops, DType, Runtime, RuntimeOptions, Scope, Session, SessionOptions, Shape, Tensor,
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
        let rt = Runtime::new(RuntimeOptions { cpu_devices: 2 }).unwrap();
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
