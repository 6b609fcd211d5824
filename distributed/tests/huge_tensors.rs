//! A tensor past protobuf's 2 GiB message limit crosses tasks (TensorFlow fails
//! here: tensorflow/tensorflow#31245): 2.25 GiB of int32 made on task 1 reaches
//! task 0 as a chunked `RecvTensor` (1 GiB per gRPC message) and arrives whole
//! and in order (values read at the chunk boundaries and at the end). A test
//! binary of its own: it holds about 5 GiB while it runs.

use actorflow_distributed::Connect;
use actors::{Session, SessionOptions};
use graph::builder::Scope;
use graph::{ops, Tensor};

mod common;
use common::Cluster;

#[test]
fn a_tensor_over_2_gib_crosses_tasks_in_chunks() {
    let c = Cluster::start(&[("worker", 2)], 1);
    let servers = &c.servers;

    // 0, 1, 2, … on task 1: 9 × 2^26 int32 = 2.25 GiB.
    let n: i32 = 9 << 26;
    let s = Scope::new();
    let t1 = s.with_device("/job:worker/task:1");
    let t0 = s.with_device("/job:worker/task:0");
    let x = ops::range(
        &t1,
        &ops::scalar(&s, 0i32).unwrap(),
        &ops::scalar(&s, n).unwrap(),
        &ops::scalar(&s, 1i32).unwrap(),
    )
    .unwrap();
    // On task 0: its largest value, and two values on each side of each
    // 1 GiB chunk boundary and of the end.
    let max = ops::reduce_max_axes(&t0, &x, &[0], false).unwrap();
    let chunk = 1 << 28; // int32s per GiB
    let probes: Vec<i32> = vec![0, chunk - 1, 2 * chunk - 1, n - 2];
    let slices: Vec<_> = probes
        .iter()
        .map(|&b| {
            ops::slice(
                &t0,
                &x,
                &ops::constant(&s, Tensor::vector(&[b])).unwrap(),
                &ops::constant(&s, Tensor::vector(&[2i32])).unwrap(),
            )
            .unwrap()
        })
        .collect();
    let mut fetches = vec![max.name()];
    fetches.extend(slices.iter().map(|o| o.name()));
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();

    let sess = Session::connect(
        &servers[0].target(),
        &s.graph_def(),
        SessionOptions::default(),
    )
    .unwrap();
    let out = sess.run(&[], &fetches, &[]).unwrap();
    assert_eq!(out[0], Tensor::scalar(n - 1));
    for (got, &b) in out[1..].iter().zip(&probes) {
        assert_eq!(got, &Tensor::vector(&[b, b + 1]), "at {b}");
    }
    // One RecvTensor carried it.
    assert_eq!(servers[1].recv_tensor_calls(), 1);
    sess.close().unwrap();
}
