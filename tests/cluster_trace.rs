//! A traced step on a two-task cluster: every task's step statistics come back,
//! and the Perfetto trace shows one process per task, its devices' tracks in it,
//! with the cross-task `_Send`→`_Recv` flow arrows.

use std::net::TcpListener;

use actorflow::trace::{chrome_trace_json, TRANSFER_CATEGORY};
use actorflow::{
    ops, ClusterSpec, Connect, DType, RunArgs, RunOptions, Scope, Server, ServerOptions, Session,
    SessionOptions, Shape, Tensor, TraceLevel,
};
use serde_json::Value;

#[test]
fn a_traced_cluster_step_has_every_task_and_cross_task_flows() {
    let ls: Vec<TcpListener> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let addrs: Vec<String> = ls
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    let spec = ClusterSpec::new().with_job("worker", &addrs).unwrap();
    let servers: Vec<Server> = ls
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            Server::start_with_listener(ServerOptions::new(spec.clone(), "worker", i as u32), l)
                .unwrap()
        })
        .collect();
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    // −x made on task 0 crosses to task 1, (−x)² comes back.
    let x0 = ops::neg(&s.with_device("/job:worker/task:0"), &x).unwrap();
    let y = ops::mul(&s.with_device("/job:worker/task:1"), &x0, &x0).unwrap();
    let z = ops::add(&s, &y, &x).unwrap();
    let sess = Session::connect(
        &servers[0].target(),
        &s.graph_def(),
        SessionOptions::default(),
    )
    .unwrap();
    let opts = RunOptions::default().with_trace_level(TraceLevel::FullTrace);
    let out = sess
        .run_with(
            &RunArgs::new()
                .feed(&x, Tensor::scalar(3.0f32))
                .fetch(&z)
                .options(opts.clone()),
        )
        .unwrap();
    assert_eq!(out.outputs[0], Tensor::scalar(12.0f32));
    let md = out.metadata.expect("traced");
    let json: Value = serde_json::from_str(&chrome_trace_json(&md)).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let mut processes: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    // One process per task, each holding its devices' tracks.
    processes.sort();
    assert_eq!(
        processes,
        [
            "/job:worker/replica:0/task:0",
            "/job:worker/replica:0/task:1"
        ]
    );
    for pid in 0..2 {
        assert!(
            events.iter().any(|e| e["name"] == "thread_name"
                && e["pid"] == pid
                && e["args"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("CPU:0 ")),
            "task {pid}"
        );
    }
    let flows: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["cat"] == TRANSFER_CATEGORY && e["ph"] == "f")
        .map(|e| {
            (
                e["args"]["from"].as_str().unwrap_or(""),
                e["args"]["to"].as_str().unwrap_or(""),
            )
        })
        .collect();
    // −x goes to task 1, x·x comes back.
    assert!(
        flows
            .iter()
            .any(|(f, t)| f.contains("task:0") && t.contains("task:1")),
        "{flows:?}"
    );
    assert!(
        flows
            .iter()
            .any(|(f, t)| f.contains("task:1") && t.contains("task:0")),
        "{flows:?}"
    );
}
