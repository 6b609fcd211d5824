//! Multi-device execution: placement, partitioning, Send/Recv, concurrency, async
//! use from tokio, aborts and timeouts.

use std::sync::Arc;
use std::time::Duration;

use actorflow::{
    ops, Code, DType, OptimizerOptions, Output, RunArgs, RunOptions, Scope, Session,
    SessionOptions, Shape, Tensor,
};

fn cpu(i: usize) -> String {
    format!("/device:CPU:{i}")
}

fn session(s: &Scope, devices: usize) -> Session {
    Session::new(
        &s.graph_def(),
        SessionOptions::default().with_cpu_devices(devices),
    )
    .unwrap()
}

/// y = ((x + 1) * x - 2) built with each op pinned to `devs[i % len]`.
fn pinned_graph(devs: &[String]) -> (Scope, Output, Output) {
    let s = Scope::new();
    let on = |i: usize| s.with_device(&devs[i % devs.len()]);
    let x = ops::placeholder(&on(0), DType::F64, Shape::known(&[3])).unwrap();
    let one = ops::scalar(&on(1), 1.0f64).unwrap();
    let a = ops::add(&on(2), &x, &one).unwrap();
    let b = ops::mul(&on(3), &a, &x).unwrap();
    let two = ops::scalar(&on(4), 2.0f64).unwrap();
    let y = ops::sub(&on(5), &b, &two).unwrap();
    (s, x, y)
}

#[test]
fn multi_device_values_equal_single_device_values() {
    let xv = Tensor::vector(&[1.0f64, -2.0, 3.5]);
    let (s1, x1, y1) = pinned_graph(&[cpu(0)]);
    let want = session(&s1, 1)
        .run(&[(&x1.name(), xv.clone())], &[&y1.name()], &[])
        .unwrap();
    assert_eq!(want[0], Tensor::vector(&[0.0f64, 0.0, 13.75])); // hand-computed: (x+1)x-2
    for n in 2..=4 {
        let devs: Vec<String> = (0..n).map(cpu).collect();
        let (s, x, y) = pinned_graph(&devs);
        let sess = session(&s, n);
        let got = sess
            .run(&[(&x.name(), xv.clone())], &[&y.name()], &[])
            .unwrap();
        assert_eq!(got, want, "{n} devices");
        let c = sess.compiled_step(&[&x.name()], &[&y.name()], &[]).unwrap();
        assert_eq!(c.partitions.len(), n);
        assert!(c.transfers > 0);
    }
}

#[test]
fn a_chain_alternating_across_devices() {
    for devices in [2usize, 3, 4] {
        let s = Scope::new();
        let x = ops::placeholder(&s.with_device(&cpu(0)), DType::F32, Shape::scalar()).unwrap();
        let mut y = x.clone();
        let n = 50;
        for i in 0..n {
            let d = s.with_device(&cpu((i + 1) % devices));
            let one = ops::scalar(&d, 1.0f32).unwrap();
            y = ops::add(&d, &y, &one).unwrap();
        }
        let sess = session(&s, devices);
        let out = sess
            .run(&[(&x.name(), Tensor::scalar(0.5f32))], &[&y.name()], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(0.5f32 + n as f32));
        let c = sess.compiled_step(&[&x.name()], &[&y.name()], &[]).unwrap();
        // the feed lands next to its first consumer; every later edge of the chain
        // crosses a device boundary
        assert_eq!(c.transfers, n - 1, "{devices} devices");
    }
}

#[test]
fn fan_out_to_another_device_uses_one_transfer() {
    let s = Scope::new();
    let d0 = s.with_device(&cpu(0));
    let d1 = s.with_device(&cpu(1));
    let x = ops::constant(&d0, Tensor::vector(&[1i64, 2, 3])).unwrap();
    let x2 = ops::add(&d0, &x, &x).unwrap();
    let consumers: Vec<Output> = (0..5).map(|_| ops::mul(&d1, &x2, &x2).unwrap()).collect();
    let mut total = consumers[0].clone();
    for c in &consumers[1..] {
        total = ops::add(&d1, &total, c).unwrap();
    }
    // Unoptimized: constant folding would compute the whole graph at build, and
    // CSE merge the five consumers.
    let sess = Session::new(
        &s.graph_def(),
        SessionOptions::default()
            .with_cpu_devices(2)
            .with_optimizer(OptimizerOptions::disabled()),
    )
    .unwrap();
    assert_eq!(
        sess.run(&[], &[&total.name()], &[]).unwrap()[0],
        Tensor::vector(&[20i64, 80, 180])
    );
    let c = sess.compiled_step(&[], &[&total.name()], &[]).unwrap();
    assert_eq!(
        c.transfers, 1,
        "five consumers of one tensor share one Send/Recv pair"
    );
    let recvs: usize = c
        .partitions
        .iter()
        .map(|p| p.graph.node.iter().filter(|n| n.op == "_Recv").count())
        .sum();
    assert_eq!(recvs, 1);
}

#[test]
fn explicit_placement_and_colocation_are_honoured() {
    let s = Scope::new();
    let init = ops::scalar(&s, 3.0f32).unwrap();
    let v = ops::Variable::new(&s.with_device(&cpu(2)), "v", &init, true).unwrap();
    let doubled = ops::add(&s.colocate_with(v.var.op()), &v.value, &v.value).unwrap();
    let elsewhere = ops::mul(&s.with_device(&cpu(1)), &doubled, &doubled).unwrap();
    let sess = session(&s, 3);
    sess.run(&[], &[], &[v.initializer.name()]).unwrap();
    assert_eq!(
        sess.run(&[], &[&elsewhere.name()], &[]).unwrap()[0],
        Tensor::scalar(36.0f32)
    );
    let placement: std::collections::HashMap<String, String> = sess
        .placement(&[], &[&elsewhere.name()], &[])
        .unwrap()
        .into_iter()
        .collect();
    let dev = |n: &str| placement[n].rsplit('/').next().unwrap().to_string();
    assert_eq!(dev("v"), "device:CPU:2");
    assert_eq!(dev("v/read"), "device:CPU:2");
    assert_eq!(dev(doubled.op().name()), "device:CPU:2");
    assert_eq!(dev(elsewhere.op().name()), "device:CPU:1");
    // an impossible constraint is a clear error
    let s = Scope::new();
    ops::scalar(&s.with_device("/device:CPU:7"), 1.0f32).unwrap();
    let sess = session(&s, 2);
    let e = sess.run(&[], &["Const:0"], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("/device:CPU:7"), "{e}");
    // ... unless soft placement is on
    let soft = Session::new(
        &s.graph_def(),
        SessionOptions::default()
            .with_cpu_devices(2)
            .with_allow_soft_placement(true),
    )
    .unwrap();
    assert_eq!(
        soft.run(&[], &["Const:0"], &[]).unwrap()[0],
        Tensor::scalar(1.0f32)
    );
}

#[test]
fn eight_client_threads_run_steps_concurrently() {
    let devs: Vec<String> = (0..3).map(cpu).collect();
    let (s, x, y) = pinned_graph(&devs);
    let sess = session(&s, 3);
    let (xn, yn) = (Arc::new(x.name()), Arc::new(y.name()));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (sess, xn, yn) = (sess.clone(), Arc::clone(&xn), Arc::clone(&yn));
            std::thread::spawn(move || {
                for i in 0..200 {
                    let v = (t * 1000 + i) as f64;
                    let out = sess
                        .run(&[(&xn, Tensor::vector(&[v, 0.0, 1.0]))], &[&yn], &[])
                        .unwrap();
                    assert_eq!(out[0], Tensor::vector(&[(v + 1.0) * v - 2.0, -2.0, 0.0]));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(sess.graph_builds(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_embeds_in_tokio() {
    let (s, x, y) = pinned_graph(&[cpu(0), cpu(1)]);
    let sess = session(&s, 2);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let sess = sess.clone();
        let req = RunArgs::new()
            .feed(&x, Tensor::vector(&[i as f64, 1.0, 2.0]))
            .fetch(&y);
        tasks.push(tokio::spawn(async move {
            sess.run_async(&req).await.unwrap().outputs.remove(0)
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let v = i as f64;
        assert_eq!(
            t.await.unwrap(),
            Tensor::vector(&[(v + 1.0) * v - 2.0, 0.0, 4.0])
        );
    }
    // the blocking API works from a blocking task too
    let (sess2, xn, yn) = (sess.clone(), x.name(), y.name());
    let out = tokio::task::spawn_blocking(move || {
        sess2.run(&[(&xn, Tensor::vector(&[0.0f64; 3]))], &[&yn], &[])
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out[0], Tensor::vector(&[-2.0f64; 3]));
}

/// A `_Recv` nobody sends to: its step can only end by an abort.
fn stuck_recv(s: &Scope, device: &str, name: &str) -> Output {
    s.op("_Recv")
        .name(name)
        .device(device)
        .attr("tensor_type", DType::F32)
        .attr("tensor_name", "never_sent")
        .attr(
            "send_device",
            "/job:localhost/replica:0/task:0/device:CPU:0",
        )
        .attr("send_device_incarnation", 1i64)
        .attr(
            "recv_device",
            "/job:localhost/replica:0/task:0/device:CPU:0",
        )
        .build1()
        .unwrap()
}

#[test]
fn an_error_in_one_partition_aborts_every_partition() {
    let s = Scope::new();
    let waiting = stuck_recv(&s, &cpu(0), "waiting");
    let w2 = ops::add(&s.with_device(&cpu(0)), &waiting, &waiting).unwrap();
    let p = ops::placeholder(&s.with_device(&cpu(1)), DType::F32, Shape::scalar()).unwrap();
    let q = ops::add(&s.with_device(&cpu(1)), &p, &p).unwrap();
    let ok = ops::scalar(&s.with_device(&cpu(1)), 2.0f32).unwrap();
    let sess = session(&s, 2);
    // cpu:1 fails (unfed placeholder) while cpu:0 waits forever: the step still ends
    let e = sess.run(&[], &[&w2.name(), &q.name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.node(), Some(p.op().name()));
    assert_eq!(
        sess.run(&[], &[&ok.name()], &[]).unwrap()[0],
        Tensor::scalar(2.0f32)
    );
}

#[test]
fn a_timeout_cancels_a_step_that_would_never_finish() {
    let s = Scope::new();
    let waiting = stuck_recv(&s, &cpu(1), "waiting");
    let ok = ops::scalar(&s.with_device(&cpu(0)), 2.0f32).unwrap();
    let sess = session(&s, 2);
    let opts = RunOptions::default().with_timeout(Duration::from_millis(50));
    let t = std::time::Instant::now();
    let e = sess
        .run_with(&RunArgs::new().fetch(&waiting).options(opts.clone()))
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(
        sess.run(&[], &[&ok.name()], &[]).unwrap()[0],
        Tensor::scalar(2.0f32)
    );
    // the session-wide default timeout applies too
    let sess = Session::new(
        &s.graph_def(),
        SessionOptions::default()
            .with_cpu_devices(2)
            .with_default_timeout(Duration::from_millis(30)),
    )
    .unwrap();
    assert_eq!(
        sess.run(&[], &[&waiting.name()], &[]).unwrap_err().code(),
        Code::DeadlineExceeded
    );
}

#[test]
fn traced_steps_report_per_node_statistics() {
    let (s, x, y) = pinned_graph(&[cpu(0), cpu(1)]);
    let sess = session(&s, 2);
    let opts = RunOptions::default().with_trace_level(actorflow::TraceLevel::FullTrace);
    let out = sess
        .run_with(
            &RunArgs::new()
                .feed(&x, Tensor::vector(&[1.0f64, 2.0, 3.0]))
                .fetch(&y)
                .options(opts.clone()),
        )
        .unwrap();
    let md = out.metadata.unwrap();
    assert_eq!(md.step_stats.len(), 2);
    assert_eq!(md.partition_graphs.len(), 2);
    let names: Vec<&str> = md
        .step_stats
        .iter()
        .flat_map(|p| p.nodes.iter().map(|n| &*n.node))
        .collect();
    assert!(names.contains(&y.op().name()));
    assert!(md.step_stats.iter().all(|p| p.end.is_some()));
}

/// A stateful node keeps one device for the session's life (TensorFlow places the
/// whole graph once): variables initialised one per step, read alone and together,
/// a queue filled in one step and drained in another, then the graph extended by a
/// step reading everything, under the cost model and seeded random placement.
#[test]
fn stateful_nodes_keep_their_device_across_steps_and_extensions() {
    const VARS: usize = 6;
    for (devices, random_placement_seed) in [(2, None), (3, None), (4, None), (3, Some(7))] {
        let s = Scope::new();
        // heavy independent initialisers and readers, so the cost model spreads them
        let zeros = Tensor::zeros(DType::F32, [128, 128]);
        let mut vars = Vec::new();
        let mut reads = Vec::new();
        for i in 0..VARS {
            let init = ops::add(
                &s,
                &ops::constant(&s, zeros.clone()).unwrap(),
                &ops::scalar(&s, i as f32).unwrap(),
            )
            .unwrap();
            let v = ops::Variable::new(&s, &format!("v{i}"), &init, true).unwrap();
            let sq = ops::mul(&s, &v.value, &v.value).unwrap();
            reads.push(ops::sum_axes(&s, &sq, &[0, 1], false).unwrap());
            vars.push(v);
        }
        let q = ops::fifo_queue(&s, &[DType::F32], &ops::QueueOptions::default()).unwrap();
        let enqueue = ops::queue_enqueue(&s, &q, &[reads[3].clone()]).unwrap();
        let dequeued = ops::queue_dequeue(&s, &q, &[DType::F32]).unwrap().remove(0);
        let sess = Session::new(
            &s.graph_def(),
            SessionOptions::default()
                .with_cpu_devices(devices)
                .with_random_placement_seed(random_placement_seed)
                .with_default_timeout(Duration::from_secs(60)),
        )
        .unwrap();
        let device_of = |fetches: &[&str], targets: &[&str], node: &str| -> String {
            sess.placement(&[], fetches, targets)
                .unwrap()
                .into_iter()
                .find(|(n, _)| n == node)
                .map(|(_, d)| d)
                .unwrap_or_else(|| panic!("{node} is not in the step"))
        };
        let mut homes = Vec::new();
        for v in &vars {
            sess.run(&[], &[], &[v.initializer.name()]).unwrap();
            homes.push(device_of(&[], &[v.initializer.name()], v.var.op().name()));
        }
        let want = |i: usize| Tensor::scalar((128 * 128 * i * i) as f32);
        for (i, r) in reads.iter().enumerate() {
            assert_eq!(sess.run(&[], &[&r.name()], &[]).unwrap()[0], want(i));
            assert_eq!(device_of(&[&r.name()], &[], &format!("v{i}")), homes[i]);
        }
        let all: Vec<String> = reads.iter().map(Output::name).collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = sess.run(&[], &all, &[]).unwrap();
        assert_eq!(out, (0..VARS).map(want).collect::<Vec<_>>());
        for (i, home) in homes.iter().enumerate() {
            assert_eq!(&device_of(&all, &[], &format!("v{i}")), home);
        }
        // the queue: filled by one step, drained by another
        sess.run(&[], &[], &[enqueue.name()]).unwrap();
        assert_eq!(sess.run(&[], &[&dequeued.name()], &[]).unwrap()[0], want(3));
        // nodes added later join the variables where they are
        let known = s.graph_def().node.len();
        let total = ops::add_n(&s, &reads).unwrap();
        let mut added = s.graph_def();
        added.node.drain(..known);
        sess.extend(&added).unwrap();
        let sum: usize = (0..VARS).map(|i| 128 * 128 * i * i).sum();
        assert_eq!(
            sess.run(&[], &[&total.name()], &[]).unwrap()[0],
            Tensor::scalar(sum as f32)
        );
        for (i, home) in homes.iter().enumerate() {
            assert_eq!(&device_of(&[&total.name()], &[], &format!("v{i}")), home);
        }
        let spread: std::collections::BTreeSet<&String> = homes.iter().collect();
        println!("{devices} devices, seed {random_placement_seed:?}: variables on {spread:?}");
        assert!(spread.len() >= 2, "the variables were not spread");
    }
}

/// Four independent chains of two 64×64 products of a fed matrix, each fetched:
/// small integers, so every order of summation gives the same exact answers.
fn branches_graph() -> (Scope, Output, Vec<Output>) {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
    let ends = (0..4)
        .map(|b| {
            let w = Tensor::build::<f32>([64, 64], |v| {
                v.iter_mut()
                    .enumerate()
                    .for_each(|(i, w)| *w = ((i * 3 + b) % 5) as f32 - 2.0)
            });
            let w = ops::constant(&s, w).unwrap();
            let h = ops::mat_mul(&s, &x, &w, false, false).unwrap();
            ops::mat_mul(&s, &h, &w, false, false).unwrap()
        })
        .collect();
    (s, x, ends)
}

#[test]
fn independent_branches_answer_alike_on_any_threads_and_errors_name_the_node() {
    let (s, x, ends) = branches_graph();
    let fetches: Vec<String> = ends.iter().map(|e| e.name()).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let input = Tensor::build::<f32>([64, 64], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i % 7) as f32 - 3.0)
    });
    let mut answers = Vec::new();
    for (inter, intra) in [(0, 0), (1, 1), (0, 1), (2, 3), (-1, 0)] {
        let opts = SessionOptions::default()
            .with_inter_op_parallelism_threads(inter)
            .with_intra_op_parallelism_threads(intra);
        let sess = Session::new(&s.graph_def(), opts).unwrap();
        let run = || sess.run(&[(&*x.name(), input.clone())], &fetches, &[]);
        for _ in 0..3 {
            answers.push(run().unwrap());
        }
        // A wrong feed fails the step in one of the branches' products, named,
        // and the session goes on.
        let bad = Tensor::build::<f32>([3, 5], |v| v.fill(1.0));
        let err = sess.run(&[(&*x.name(), bad)], &fetches, &[]).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err}");
        assert!(
            err.node().is_some_and(|n| n.starts_with("MatMul")),
            "{err:?}"
        );
        assert_eq!(run().unwrap(), answers[0]);
    }
    assert!(answers.iter().all(|a| *a == answers[0]));
    // Branch 0 by hand: (x · w) · w.
    let xv = input.as_slice::<f32>().unwrap();
    let w = |i: usize| ((i * 3) % 5) as f32 - 2.0;
    let product = |a: &[f32]| -> Vec<f32> {
        (0..64 * 64)
            .map(|ij| {
                (0..64)
                    .map(|k| a[ij / 64 * 64 + k] * w(k * 64 + ij % 64))
                    .sum()
            })
            .collect()
    };
    let expected = product(&product(xv));
    assert_eq!(answers[0][0].as_slice::<f32>().unwrap(), &expected[..]);
}

#[test]
fn a_negative_intra_op_thread_count_is_refused() {
    let (s, _, _) = branches_graph();
    let opts = SessionOptions::default().with_intra_op_parallelism_threads(-2);
    let Err(err) = Session::new(&s.graph_def(), opts) else {
        panic!("a session with -2 intra-op threads was made");
    };
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(
        err.message().contains("intra_op_parallelism_threads"),
        "{err}"
    );
}
