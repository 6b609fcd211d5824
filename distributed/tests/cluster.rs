//! In-process clusters of servers on 127.0.0.1 (free ports): values equal the
//! local session's, errors keep their code and node, failed and timed-out steps
//! leave no state behind, and every server is stopped at the end.

use std::time::Duration;

mod common;
use common::Cluster;

use actorflow_distributed::{Connect, Server, ServerOptions};
use actors::{RunArgs, RunOptions, Session, SessionOptions, TraceLevel};
use graph::builder::{cond, while_loop, Scope, WhileOptions};
use graph::ops::{self, QueueOptions};
use graph::{Code, DType, GraphDef, Shape, Tensor};

fn local(gd: &GraphDef, feeds: &[(&str, Tensor)], fetches: &[&str]) -> Vec<Tensor> {
    let mut g = gd.clone();
    for n in &mut g.node {
        n.device.clear();
    }
    let s = Session::new(&g, SessionOptions::default()).unwrap();
    s.run(feeds, fetches, &[]).unwrap()
}

#[test]
fn a_fed_scalar_crosses_to_task_1_and_back() {
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let y = ops::add(&s.with_device("/job:worker/task:1"), &x, &x).unwrap();
    let z = ops::mul(&s, &y, &y).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    for v in [1.0f32, 2.5, -3.0] {
        let out = sess
            .run(
                &[(&x.name(), Tensor::scalar(v))],
                &[&y.name(), &z.name()],
                &[],
            )
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(2.0 * v));
        assert_eq!(out[1], Tensor::scalar(4.0 * v * v));
    }
    let devices = sess.list_devices().unwrap();
    assert!(devices.contains(&"/job:worker/replica:0/task:0/device:CPU:0".to_string()));
    assert!(devices.contains(&"/job:worker/replica:0/task:1/device:CPU:0".to_string()));
    sess.close().unwrap();
    let e = sess.run(&[], &[&y.name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::Cancelled);
    // Every step's tables are gone on every task.
    std::thread::sleep(Duration::from_millis(100));
    for srv in &c.servers {
        assert_eq!(srv.live_steps(), 0);
    }
}

#[test]
fn a_while_loop_whose_body_spans_two_tasks_matches_the_local_session() {
    let c = Cluster::start(&[("worker", 2)], 2);
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let i0 = ops::scalar(&s, 0i32).unwrap();
    let a0 = ops::scalar(&s, 1.0f32).unwrap();
    let out = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            let i = ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?;
            let remote = b.with_device("/job:worker/task:1/device:CPU:1");
            let a = ops::mul(&remote, &v[1], &ops::scalar(&remote, 1.5f32)?)?;
            let a = ops::add(b, &a, &ops::scalar(b, 0.25f32)?)?;
            Ok(vec![i, a])
        },
        &[i0, a0],
        &WhileOptions::default(),
    )
    .unwrap();
    let gd = s.graph_def();
    let sess = Session::connect(&c.target(0), &gd, SessionOptions::default()).unwrap();
    for k in [0, 1, 7] {
        let feeds = [(n.name(), Tensor::scalar(k))];
        let feeds: Vec<(&str, Tensor)> =
            feeds.iter().map(|(a, b)| (a.as_str(), b.clone())).collect();
        let got = sess
            .run(&feeds, &[&out[0].name(), &out[1].name()], &[])
            .unwrap();
        let want = local(&gd, &feeds, &[&out[0].name(), &out[1].name()]);
        assert_eq!(got, want, "n = {k}");
    }
}

#[test]
fn a_cond_with_branches_on_two_tasks() {
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
    let out = cond(
        &s,
        &p,
        |b| {
            Ok(vec![ops::mul(
                &b.with_device("/job:worker/task:1"),
                &x,
                &x,
            )?])
        },
        |b| Ok(vec![ops::add(b, &x, &x)?]),
    )
    .unwrap();
    let gd = s.graph_def();
    let sess = Session::connect(&c.target(1), &gd, SessionOptions::default()).unwrap();
    for (pv, xv) in [(true, 3.0f32), (false, 3.0), (true, -2.0)] {
        let feeds = [
            (x.name(), Tensor::scalar(xv)),
            (p.name(), Tensor::scalar(pv)),
        ];
        let feeds: Vec<(&str, Tensor)> =
            feeds.iter().map(|(a, b)| (a.as_str(), b.clone())).collect();
        let got = sess.run(&feeds, &[&out[0].name()], &[]).unwrap();
        assert_eq!(got, local(&gd, &feeds, &[&out[0].name()]));
    }
}

#[test]
fn variables_on_a_ps_task_are_shared_by_two_clients() {
    let c = Cluster::start(&[("ps", 1), ("worker", 2)], 1);
    let s = Scope::new();
    let ps = s.with_device("/job:ps/task:0");
    let init = ops::scalar(&ps, 0.0f32).unwrap();
    let v = ops::Variable::new(&ps, "counter", &init, false).unwrap();
    let one = ops::scalar(&s, 1.0f32).unwrap();
    let bump = ops::assign_add(&s, &v.var, &one).unwrap();
    let gd = s.graph_def();
    // Two clients, each through its own worker's master.
    let a = Session::connect(&c.target(1), &gd, SessionOptions::default()).unwrap();
    let b = Session::connect(&c.target(2), &gd, SessionOptions::default()).unwrap();
    a.run(&[], &[], &[v.initializer.name()]).unwrap();
    for _ in 0..3 {
        a.run(&[], &[&bump.name()], &[]).unwrap();
        b.run(&[], &[&bump.name()], &[]).unwrap();
    }
    let got = b.run(&[], &[&v.value.name()], &[]).unwrap();
    assert_eq!(got[0], Tensor::scalar(6.0f32));
    // Closing a client's session leaves the shared variable in place.
    a.close().unwrap();
    let got = b.run(&[], &[&v.value.name()], &[]).unwrap();
    assert_eq!(got[0], Tensor::scalar(6.0f32));
}

#[test]
fn errors_keep_their_code_and_node_and_the_session_stays_usable() {
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
    let w = s.with_device("/job:worker/task:1");
    let m = ops::mat_mul(&w, &x, &x, false, false).unwrap();
    let ok = ops::add(&s, &x, &x).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    // A kernel error on task 1 names its node.
    let e = sess
        .run(
            &[(&x.name(), Tensor::vector(&[1.0f32, 2.0]))],
            &[&m.name()],
            &[],
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert_eq!(e.node(), Some(m.op().name()), "{e}");
    // Unknown names, wrong dtypes.
    let e = sess.run(&[], &["nope:0"], &[]).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let e = sess
        .run(&[(&x.name(), Tensor::scalar(1i32))], &[&ok.name()], &[])
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // Still usable.
    let out = sess
        .run(&[(&x.name(), Tensor::scalar(2.0f32))], &[&ok.name()], &[])
        .unwrap();
    assert_eq!(out[0], Tensor::scalar(4.0f32));
    std::thread::sleep(Duration::from_millis(100));
    for srv in &c.servers {
        assert_eq!(srv.live_steps(), 0);
    }
}

#[test]
fn a_step_waiting_on_another_task_times_out_and_the_next_one_runs() {
    let c = Cluster::start(&[("ps", 1), ("worker", 1)], 1);
    let s = Scope::new();
    let ps = s.with_device("/job:ps/task:0");
    let q = ops::fifo_queue(&ps, &[DType::F32], &QueueOptions::default()).unwrap();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let enq = ops::queue_enqueue(&ps, &q, std::slice::from_ref(&x)).unwrap();
    let deq = ops::queue_dequeue(&ps, &q, &[DType::F32]).unwrap();
    let twice = ops::add(&s, &deq[0], &deq[0]).unwrap();
    let sess = Session::connect(&c.target(1), &s.graph_def(), SessionOptions::default()).unwrap();
    let opts = RunOptions::default().with_timeout(Duration::from_millis(200));
    let t0 = std::time::Instant::now();
    let e = sess
        .run_with(&RunArgs::new().fetch(&twice).options(opts.clone()))
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    sess.run(&[(&x.name(), Tensor::scalar(4.0f32))], &[], &[enq.name()])
        .unwrap();
    let out = sess.run(&[], &[&twice.name()], &[]).unwrap();
    assert_eq!(out[0], Tensor::scalar(8.0f32));
    std::thread::sleep(Duration::from_millis(100));
    for srv in &c.servers {
        assert_eq!(srv.live_steps(), 0);
    }
}

#[test]
fn a_traced_step_returns_every_tasks_statistics() {
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let x2 = ops::mul(&s.with_device("/job:worker/task:0"), &x, &x).unwrap();
    let y = ops::add(&s.with_device("/job:worker/task:1"), &x2, &x2).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    let opts = RunOptions::default().with_trace_level(TraceLevel::FullTrace);
    let out = sess
        .run_with(
            &RunArgs::new()
                .feed(&x, Tensor::scalar(1.0f32))
                .fetch(&y)
                .options(opts.clone()),
        )
        .unwrap();
    let m = out.metadata.expect("traced");
    let devices: Vec<&str> = m.step_stats.iter().map(|c| c.device.as_str()).collect();
    assert!(devices.iter().any(|d| d.contains("task:0")), "{devices:?}");
    assert!(devices.iter().any(|d| d.contains("task:1")), "{devices:?}");
    assert!(m
        .step_stats
        .iter()
        .flat_map(|c| &c.nodes)
        .any(|n| &*n.node == y.op().name()));
}

#[test]
fn a_session_cannot_open_while_a_task_is_down_and_can_once_it_is_back() {
    let mut c = Cluster::start(&[("worker", 2)], 1);
    let addr = c.servers[1].local_addr();
    c.servers[1].stop();
    c.servers.pop();
    let s = Scope::new();
    let x = ops::scalar(&s, 1.0f32).unwrap();
    let y = ops::add(&s.with_device("/job:worker/task:1"), &x, &x).unwrap();
    let t0 = std::time::Instant::now();
    let e = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default())
        .err()
        .expect("task 1 is down");
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(t0.elapsed() < Duration::from_secs(15));
    // Back on the same address.
    let l = std::net::TcpListener::bind(addr).unwrap();
    c.servers.push(
        Server::start_with_listener(ServerOptions::new(c.spec.clone(), "worker", 1), l).unwrap(),
    );
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    assert_eq!(
        sess.run(&[], &[&y.name()], &[]).unwrap()[0],
        Tensor::scalar(2.0f32)
    );
}

#[test]
fn the_health_checks_fail_a_step_whose_peer_died_while_it_waits_on_its_own_task() {
    // Task 1's piece is done at once; task 0's waits on an empty queue with no
    // deadline and no call in flight to task 1: only the master's health checks
    // (every second by default) notice that task 1 went away.
    let mut c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let q = ops::fifo_queue(&s, &[DType::F32], &QueueOptions::default()).unwrap();
    let deq = ops::queue_dequeue(&s, &q, &[DType::F32]).unwrap();
    let one = ops::scalar(&s, 1.0f32).unwrap();
    let t1 = ops::add(&s.with_device("/job:worker/task:1"), &one, &one).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    let mut victim = c.servers.pop().unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        victim.stop();
    });
    let t0 = std::time::Instant::now();
    let e = sess
        .run(&[], &[&deq[0].name()], &[t1.op().name()])
        .unwrap_err();
    killer.join().unwrap();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("task:1"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    assert_eq!(c.servers[0].live_steps(), 0);
}

#[test]
fn a_tensor_with_several_consumers_on_another_task_crosses_once_per_step() {
    let c = Cluster::start(&[("worker", 2)], 2);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
    let x0 = ops::neg(&s.with_device("/job:worker/task:0"), &x).unwrap();
    let t1 = s.with_device("/job:worker/task:1/device:CPU:0");
    let t1b = s.with_device("/job:worker/task:1/device:CPU:1");
    // Three consumers on task 1, two of its devices.
    let a = ops::add(&t1, &x0, &x0).unwrap();
    let b = ops::mul(&t1, &x0, &x0).unwrap();
    let d = ops::sub(&t1b, &x0, &a).unwrap();
    let total = ops::add_n(&t1, &[a, b, d]).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    let feed = Tensor::vector(&[1.0f32, 2.0, 3.0]);
    let run = || {
        sess.run(&[(&x.name(), feed.clone())], &[&total.name()], &[])
            .unwrap()
    };
    // With y = −x: 2y + y² + (y − 2y) = y + y² = x² − x.
    assert_eq!(run()[0], Tensor::vector(&[0.0f32, 2.0, 6.0]));
    let (before0, before1) = (
        c.servers[0].recv_tensor_calls(),
        c.servers[1].recv_tensor_calls(),
    );
    for _ in 0..5 {
        run();
    }
    // Task 0 serves −x once per step (to task 1); the total comes back in task
    // 1's RunGraph answer, without a RecvTensor.
    assert_eq!(c.servers[0].recv_tensor_calls() - before0, 5);
    assert_eq!(c.servers[1].recv_tensor_calls() - before1, 0);
}

#[test]
fn feeds_and_fetches_go_straight_to_the_tasks_that_use_them() {
    // x is fed and used on both tasks (by two nodes on task 1), and fetched;
    // y on task 1 and z on task 0 are fetched. No value crosses by RecvTensor:
    // each task gets x in its RunGraph call and answers its fetches in its
    // RunGraph answer.
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let t0 = s.with_device("/job:worker/task:0");
    let t1 = s.with_device("/job:worker/task:1");
    let y = ops::mul(&t1, &x, &x).unwrap();
    let z = ops::add(&t0, &x, &ops::scalar(&t0, 1.0f32).unwrap()).unwrap();
    let w = ops::sub(&t1, &y, &x).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    for v in [3.0f32, -0.5] {
        let out = sess
            .run(
                &[(&x.name(), Tensor::scalar(v))],
                &[&y.name(), &z.name(), &x.name(), &w.name()],
                &[],
            )
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(v * v));
        assert_eq!(out[1], Tensor::scalar(v + 1.0));
        assert_eq!(out[2], Tensor::scalar(v));
        assert_eq!(out[3], Tensor::scalar(v * v - v));
    }
    assert_eq!(c.servers[0].recv_tensor_calls(), 0);
    assert_eq!(c.servers[1].recv_tensor_calls(), 0);
    // A step fed nothing still sees a missing feed as an error.
    let e = sess.run(&[], &[&y.name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}

#[test]
fn a_feed_the_step_does_not_need_is_accepted_as_locally() {
    // TensorFlow prunes a feed nothing reads; the step runs. Here the unused
    // feed comes first, so the used one keeps argument index 1.
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let unused = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let y = ops::neg(&s.with_device("/job:worker/task:1"), &x).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    let feeds = [
        (unused.name(), Tensor::scalar(7i32)),
        (x.name(), Tensor::scalar(2.0f32)),
    ];
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let want = local(&s.graph_def(), &feeds, &[&y.name()]);
    assert_eq!(sess.run(&feeds, &[&y.name()], &[]).unwrap(), want);
    assert_eq!(want[0], Tensor::scalar(-2.0f32));
}

#[test]
fn workers_refuse_graphs_from_hosts_outside_their_cluster() {
    use proto::tensorflow as pb;
    use proto::tensorflow::worker_service_client::WorkerServiceClient;
    let c = Cluster::start(&[("worker", 1)], 1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = c.servers[0].local_addr();
    // 127.0.0.2 is this machine too (loopback), but not a host of the cluster.
    let register = |from: &str| {
        let ep = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .local_address(Some(from.parse().unwrap()));
        rt.block_on(async {
            let mut c = WorkerServiceClient::new(ep.connect().await.unwrap());
            c.register_graph(pb::RegisterGraphRequest {
                graph_def: Some(Default::default()),
                ..Default::default()
            })
            .await
        })
    };
    let e = register("127.0.0.2").unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("127.0.0.2"), "{e:?}");
    // From the cluster's host it is served.
    register("127.0.0.1").unwrap();
}

#[test]
fn extend_adds_nodes_that_read_the_sessions_graph() {
    // ExtendSession carries only the new nodes; their inputs name nodes the
    // session already has (as TensorFlow's Python client sends them).
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let y = ops::mul(&s.with_device("/job:worker/task:1"), &x, &x).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    let before = s.graph_def().node.len();
    let z = ops::add(&s, &y, &x).unwrap();
    let new = GraphDef {
        node: s.graph_def().node[before..].to_vec(),
        ..Default::default()
    };
    sess.extend(&new).unwrap();
    let out = sess
        .run(&[(&x.name(), Tensor::scalar(3.0f32))], &[&z.name()], &[])
        .unwrap();
    assert_eq!(out[0], Tensor::scalar(12.0f32));
    // A node reading a node that does not exist, or of an unknown op: refused,
    // and the session keeps its graph.
    let mut bad = new.clone();
    bad.node[0].name = "dangling".into();
    bad.node[0].input[0] = "nowhere:0".into();
    let e = sess.extend(&bad).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let mut unknown = new.clone();
    unknown.node[0].name = "strange".into();
    unknown.node[0].op = "NoSuchOp".into();
    assert!(sess.extend(&unknown).is_err());
    let out = sess
        .run(&[(&x.name(), Tensor::scalar(2.0f32))], &[&z.name()], &[])
        .unwrap();
    assert_eq!(out[0], Tensor::scalar(6.0f32));
}
