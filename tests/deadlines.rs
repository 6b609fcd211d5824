//! Deadlines and errors stop busy steps: a while loop that never waits for anything
//! (so its executor never returns to its device's mailbox) still stops within
//! milliseconds when the step times out or another partition fails, and the session
//! runs normal steps afterwards.

use std::time::{Duration, Instant};

use actorflow::graph::builder::{while_loop, WhileOptions};
use actorflow::{
    ops, Code, DType, Output, RunArgs, RunOptions, Scope, Session, SessionOptions, Shape, Tensor,
};

fn cpu(i: usize) -> String {
    format!("/device:CPU:{i}")
}

/// `while i < n: i += 1` on `s`'s device, `n` fed: with `n = i32::MAX` it runs
/// 2^31 iterations, many minutes.
fn counter(s: &Scope, n: &Output) -> Output {
    let i0 = ops::scalar(s, 0i32).unwrap();
    while_loop(
        s,
        |b, v| ops::less(b, &v[0], n),
        |b, v| Ok(vec![ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?]),
        &[i0],
        &WhileOptions::default(),
    )
    .unwrap()
    .remove(0)
}

fn session(s: &Scope, devices: usize, default_timeout: Option<Duration>) -> Session {
    Session::new(
        &s.graph_def(),
        SessionOptions::default()
            .with_cpu_devices(devices)
            .with_default_timeout(default_timeout),
    )
    .unwrap()
}

/// The bound a stopped step must meet: far below the minutes the loop would run,
/// far above the 50 ms, so a loaded 2-core CI machine meets it.
const PROMPTLY: Duration = Duration::from_secs(1);

#[test]
fn a_deadline_stops_a_busy_loop() {
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let out = counter(&s, &n);
    let sess = session(&s, 1, None);
    let (nn, on) = (n.name(), out.name());
    // compile the step first, so that the timing below is the step's alone
    let small = sess
        .run(&[(&nn, Tensor::scalar(3i32))], &[&on], &[])
        .unwrap();
    assert_eq!(small[0], Tensor::scalar(3i32));

    let opts = RunOptions::default().with_timeout(Duration::from_millis(1));
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let e = sess
            .run_with(
                &RunArgs::new()
                    .feed(&nn, Tensor::scalar(i32::MAX))
                    .fetch(&on)
                    .options(opts.clone()),
            )
            .unwrap_err();
        let took = t.elapsed();
        times.push(took);
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        assert!(took < PROMPTLY, "the busy step stopped after {took:?}");
        // the next step is a normal one
        let out = sess
            .run(&[(&nn, Tensor::scalar(1000i32))], &[&on], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(1000i32));
    }
    // the bound, met by the best of the three (one may be descheduled)
    let best = times.iter().min().copied().unwrap_or_default();
    println!("a 1 ms deadline stopped the busy loop after {times:?}");
    assert!(best < Duration::from_millis(50), "{times:?}");
}

#[test]
fn a_session_default_timeout_stops_a_busy_loop() {
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let out = counter(&s, &n);
    let sess = session(&s, 1, Some(Duration::from_millis(20)));
    let (nn, on) = (n.name(), out.name());
    let t = Instant::now();
    let e = sess
        .run(&[(&nn, Tensor::scalar(i32::MAX))], &[&on], &[])
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    // this first step also compiles the graph
    assert!(
        t.elapsed() < PROMPTLY + Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    let out = sess
        .run(&[(&nn, Tensor::scalar(10i32))], &[&on], &[])
        .unwrap();
    assert_eq!(out[0], Tensor::scalar(10i32));
}

#[test]
fn an_error_in_another_partition_stops_a_busy_loop() {
    let s = Scope::new();
    let d0 = s.with_device(&cpu(0));
    let d1 = s.with_device(&cpu(1));
    // cpu:0 loops for minutes; cpu:1 counts to m, then fails
    let n = ops::placeholder(&d0, DType::I32, Shape::scalar()).unwrap();
    let busy = counter(&d0, &n);
    let m = ops::placeholder(&d1, DType::I32, Shape::scalar()).unwrap();
    let short = counter(&d1, &m);
    let text = ops::constant(&d1, Tensor::string_scalar("not a number")).unwrap();
    let bad = ops::string_to_number(
        &d1.with_control_dependencies(&[short.op()]),
        &text,
        DType::F32,
    )
    .unwrap();
    let sess = session(&s, 2, None);
    let (nn, mn, bn, sn) = (n.name(), m.name(), busy.name(), short.name());
    // compile first: the loops alone, on both devices
    let out = sess
        .run(
            &[(&nn, Tensor::scalar(5i32)), (&mn, Tensor::scalar(7i32))],
            &[&bn, &sn],
            &[],
        )
        .unwrap();
    assert_eq!(out, vec![Tensor::scalar(5i32), Tensor::scalar(7i32)]);

    let t = Instant::now();
    let e = sess
        .run(
            &[
                (&nn, Tensor::scalar(i32::MAX)),
                (&mn, Tensor::scalar(20_000i32)),
            ],
            &[&bn, &bad.name()],
            &[],
        )
        .unwrap_err();
    let took = t.elapsed();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert_eq!(e.node(), Some(bad.op().name()));
    // cpu:1's 20 000 iterations take tens of milliseconds; cpu:0's loop, minutes
    assert!(
        took < PROMPTLY + Duration::from_secs(2),
        "stopped after {took:?}"
    );
    let out = sess
        .run(
            &[(&nn, Tensor::scalar(100i32)), (&mn, Tensor::scalar(3i32))],
            &[&bn, &sn],
            &[],
        )
        .unwrap();
    assert_eq!(out, vec![Tensor::scalar(100i32), Tensor::scalar(3i32)]);
}
