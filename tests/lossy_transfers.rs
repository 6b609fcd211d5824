//! Lossy compression of transfers (whitepaper §5.5, TensorFlow's
//! `GraphOptions.enable_bfloat16_sendrecv`): with
//! `SessionOptions::enable_bfloat16_sendrecv`, `float32` tensors cross devices
//! and tasks as `bfloat16` (rounded to nearest even) and are widened on receipt;
//! other dtypes, feeds and fetches travel exactly. The expected values are
//! bfloat16 roundings worked out by hand.

use std::net::TcpListener;

use actorflow::{
    ops, ClusterSpec, Connect, DType, Output, RunArgs, RunOptions, Scope, Server, ServerOptions,
    Session, SessionOptions, Shape, Tensor, TraceLevel,
};

/// Values and their bfloat16 (8 significant bits) roundings to nearest even:
/// 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷ and goes to the even 1; 1 + 3·2⁻⁹ is
/// nearer 1 + 2⁻⁷; 3.3 lies between 3.296875 and 3.3125, nearer the first;
/// 1.5 · 2⁻²⁰ is exact.
const SENT: [f32; 4] = [1.0 + 1.0 / 256.0, 1.0 + 3.0 / 512.0, 3.3, 1.5 / 1_048_576.0];
const ROUNDED: [f32; 4] = [1.0, 1.0 + 1.0 / 128.0, 3.296875, 1.5 / 1_048_576.0];

/// `x` and `i` fed on the first device, `y = x · 1` and `k = i + 0` on the
/// second (a float32 and an int32 tensor that cross), `z = y · 1` back on the
/// first.
fn graph(s: &Scope, first: &str, second: &str) -> (Output, Output, Output, Output, Output) {
    let a = s.with_device(first);
    let b = s.with_device(second);
    let x = ops::placeholder(&a, DType::F32, Shape::known(&[4])).unwrap();
    let xa = ops::identity(&a, &x).unwrap();
    let i = ops::placeholder(&a, DType::I32, Shape::known(&[2])).unwrap();
    let ia = ops::identity(&a, &i).unwrap();
    let y = ops::mul(&b, &xa, &ops::scalar(&b, 1.0f32).unwrap()).unwrap();
    let k = ops::add(&b, &ia, &ops::scalar(&b, 0i32).unwrap()).unwrap();
    let z = ops::mul(&a, &y, &ops::scalar(&a, 1.0f32).unwrap()).unwrap();
    (x, i, y, k, z)
}

fn check(sess: &Session, [x, i, y, k, z]: [&Output; 5], lossy: bool) {
    let feed = Tensor::vector(&SENT);
    let ints = Tensor::vector(&[16_777_217i32, -3]);
    let out = sess
        .run(
            &[(&x.name(), feed.clone()), (&i.name(), ints)],
            &[&x.name(), &y.name(), &k.name(), &z.name()],
            &[],
        )
        .unwrap();
    // A fed tensor fetched back is never compressed.
    assert_eq!(out[0], feed);
    let want = if lossy {
        Tensor::vector(&ROUNDED)
    } else {
        feed
    };
    assert_eq!(out[1], want, "crossed once");
    // The rounded values are bfloat16 values: crossing back changes nothing.
    assert_eq!(out[3], want, "crossed twice");
    assert_eq!(out[2], Tensor::vector(&[16_777_217i32, -3]), "int32 exact");
}

#[test]
fn float32_crosses_devices_as_bfloat16_when_asked() {
    for lossy in [false, true] {
        let s = Scope::new();
        let (x, i, y, k, z) = graph(&s, "/device:CPU:0", "/device:CPU:1");
        let sess = Session::new(
            &s.graph_def(),
            SessionOptions::default()
                .with_cpu_devices(2)
                .with_enable_bfloat16_sendrecv(lossy),
        )
        .unwrap();
        check(&sess, [&x, &i, &y, &k, &z], lossy);
        let c = sess
            .compiled_step(
                &[&x.name(), &i.name()],
                &[&y.name(), &k.name(), &z.name()],
                &[],
            )
            .unwrap();
        let sends: Vec<DType> = c
            .partitions
            .iter()
            .flat_map(|p| &p.graph.node)
            .filter(|n| n.op == "_Send")
            .filter_map(|n| match n.attr.get("T") {
                Some(actorflow::graph::AttrValue::Type(t)) => Some(*t),
                _ => None,
            })
            .collect();
        let mut sorted = sends.clone();
        sorted.sort_by_key(|t| t.name());
        let f = if lossy { DType::BF16 } else { DType::F32 };
        let mut want = vec![f, f, DType::I32];
        want.sort_by_key(|t| t.name());
        assert_eq!(sorted, want, "lossy {lossy}");
    }
}

#[test]
fn float32_crosses_tasks_as_bfloat16_when_asked() {
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
    for lossy in [false, true] {
        let s = Scope::new();
        let (x, i, y, k, z) = graph(&s, "/job:worker/task:0", "/job:worker/task:1");
        let sess = Session::connect(
            &servers[0].target(),
            &s.graph_def(),
            SessionOptions::default().with_enable_bfloat16_sendrecv(lossy),
        )
        .unwrap();
        check(&sess, [&x, &i, &y, &k, &z], lossy);
        // The partition graphs of both tasks: the casts are there only when asked.
        let out = sess
            .run_with(
                &RunArgs::new()
                    .feed(&x, Tensor::vector(&SENT))
                    .feed(&i, Tensor::vector(&[1i32, 2]))
                    .fetch(&z)
                    .options(RunOptions::default().with_trace_level(TraceLevel::FullTrace)),
            )
            .unwrap();
        let md = out.metadata.expect("traced");
        let casts = md
            .partition_graphs
            .iter()
            .flat_map(|(_, g)| &g.node)
            .filter(|n| n.op == "Cast")
            .count();
        // x to task 1 and y back: a narrowing and a widening cast each.
        assert_eq!(casts, if lossy { 4 } else { 0 }, "lossy {lossy}");
        sess.close().unwrap();
    }
    for mut s in servers {
        s.stop();
    }
}
