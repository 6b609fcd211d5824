//! A step aborted while an executor is busy: the real step tracker aborts the step
//! (deadline) on one thread while a real executor runs a loop on another, long
//! enough to read the cancellation flag several times. Whatever the interleaving,
//! the executor either finishes with the right value or stops with the step's own
//! status — never a bare `Cancelled`: the rendezvous is aborted before the flag is
//! set, and the flag's Release/Acquire makes that abort visible to the executor.
#![cfg(loom)]

use std::sync::Arc;

use actors::executor::{ExecutorPlan, ExecutorState, NoKernelCache, CANCELLATION_CHECK_INTERVAL};
use actors::step::StepTracker;
use graph::builder::{while_loop, Scope, WhileOptions};
use graph::passes::prune::rewrite_for_step;
use graph::{ops, Code, Graph, NodeDef, OpRegistry, Status, Tensor};
use kernels::{CallFrame, DeviceContext, StepContext};
use loom::thread;
use loom_tests::harness::drive;
use rendezvous::{CancellationManager, LocalRendezvous, Rendezvous};

/// The nodes of `while i < n: i += 1`, fetching the exit.
fn counter(n: i32) -> Vec<NodeDef> {
    let s = Scope::new();
    let i0 = ops::scalar(&s, 0i32).unwrap();
    let out = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &ops::scalar(b, n)?),
        |b, v| Ok(vec![ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?]),
        &[i0],
        &WhileOptions::default(),
    )
    .unwrap();
    let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
    let fetch = out[0].name();
    rewrite_for_step(&g, &[], &[fetch.as_str()], &[])
        .unwrap()
        .nodes
}

#[test]
fn an_abort_stops_a_busy_executor_with_the_step_status() {
    // ~8 nodes per iteration: the executor reads the flag two or three times
    let iterations = 3 * CANCELLATION_CHECK_INTERVAL as i32 / 8;
    let nodes = counter(iterations);
    loom::model(move || {
        let device = Arc::new(DeviceContext::new(
            "/job:localhost/replica:0/task:0/device:CPU:0",
            "CPU",
            1,
        ));
        let plan = ExecutorPlan::build_from_nodes(&nodes, &device, &NoKernelCache).unwrap();
        let rendezvous: Arc<dyn Rendezvous> = Arc::new(LocalRendezvous::new());
        let frame = Arc::new(CallFrame::new(vec![], 1));
        let cancellation = Arc::new(CancellationManager::new());
        let (tracker, _done) =
            StepTracker::new(1, 1, Arc::clone(&rendezvous), Arc::clone(&frame), vec![]);
        tracker.set_cancellation(Arc::clone(&cancellation));
        let step = Arc::new(StepContext {
            step_id: 1,
            device,
            rendezvous,
            call_frame: Arc::clone(&frame),
            default_container: Arc::from("c"),
            step_container: Arc::from("__step_1"),
            cancellation,
            timer: Arc::new(kernels::ThreadTimer),
        });
        let ex = ExecutorState::new(Arc::new(plan), step, None);
        let aborter = {
            let tracker = Arc::clone(&tracker);
            thread::spawn(move || tracker.abort(Status::deadline_exceeded("step timed out")))
        };
        let r = drive(ex);
        aborter.join().unwrap();
        match r {
            Ok(()) => assert_eq!(frame.take_retvals(), vec![Some(Tensor::scalar(iterations))]),
            Err(e) => assert_eq!(e.code(), Code::DeadlineExceeded, "{e}"),
        }
    });
}
