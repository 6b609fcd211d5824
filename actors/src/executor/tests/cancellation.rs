//! A cancelled step stops a busy executor: one running a long loop never returns to
//! its host, so it reads the step's cancellation flag as it runs.

use std::time::{Duration, Instant};

use super::*;

/// Runs a loop of 2^31 iterations (minutes) and cancels it from another thread after
/// `after`, first aborting the rendezvous with `status` when given; returns the
/// executor's result and how long it ran.
fn cancel_busy_loop(after: Duration, status: Option<Status>) -> (Result<()>, Duration) {
    let dev = device();
    let plan = Arc::new(
        ExecutorPlan::build_from_nodes(&counter_loop(i32::MAX, 10), &dev, &NoKernelCache).unwrap(),
    );
    let st = step(&dev, 1);
    let canceller = {
        let st = Arc::clone(&st);
        std::thread::spawn(move || {
            std::thread::sleep(after);
            if let Some(s) = status {
                st.rendezvous.abort(s);
            }
            st.cancellation.cancel();
        })
    };
    let t = Instant::now();
    let mut ex = ExecutorState::new(plan, st, None);
    let mut host = QueueHost::new();
    let r = drive(&mut ex, &mut host);
    let took = t.elapsed();
    canceller.join().unwrap();
    (r, took)
}

#[test]
fn a_cancelled_busy_loop_stops_with_the_abort_status() {
    let (r, took) = cancel_busy_loop(
        Duration::from_millis(20),
        Some(Status::deadline_exceeded("step timed out")),
    );
    let e = r.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(took < Duration::from_secs(2), "stopped after {took:?}");
}

#[test]
fn a_cancellation_without_a_status_is_cancelled() {
    let (r, took) = cancel_busy_loop(Duration::ZERO, None);
    assert_eq!(r.unwrap_err().code(), Code::Cancelled);
    assert!(took < Duration::from_secs(2), "stopped after {took:?}");
}

/// A step cancelled before it starts stops at the first read of the flag.
#[test]
fn a_step_cancelled_before_it_starts_stops_at_the_first_read() {
    let dev = device();
    let plan = Arc::new(
        ExecutorPlan::build_from_nodes(&counter_loop(i32::MAX, 10), &dev, &NoKernelCache).unwrap(),
    );
    let st = step(&dev, 1);
    st.cancellation.cancel();
    let mut ex = ExecutorState::new(plan, st, Some(StatsCollector::new(&dev.name)));
    let mut host = QueueHost::new();
    assert_eq!(
        drive(&mut ex, &mut host).unwrap_err().code(),
        Code::Cancelled
    );
    let ran = ex.take_stats().map(|s| s.nodes.len()).unwrap_or(0);
    assert!(
        ran < CANCELLATION_CHECK_INTERVAL,
        "{ran} nodes ran after the cancellation"
    );
}
