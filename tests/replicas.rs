//! Training idioms across devices (whitepaper §7): synchronous data-parallel
//! replicas equal one device on the concatenated batch; asynchronous replicas each
//! apply their own updates from concurrent client threads; model-parallel layers on
//! different devices train like the same model on one device.

use std::collections::HashMap;

use actorflow::ops::{self, Variable};
use actorflow::train::{
    get_or_create_global_step, replicate_minimize, GradientDescentOptimizer, Optimizer, ReplicaMode,
};
use actorflow::{DType, Output, Result, Scope, Session, SessionOptions, Shape, Tensor};

const CPU: [&str; 3] = ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"];
const ROWS: usize = 8;
const IN: usize = 3;
const HIDDEN: usize = 5;
const OUT: usize = 2;

fn session(s: &Scope, devices: usize) -> Session {
    Session::new(
        &s.graph_def(),
        SessionOptions::default().with_cpu_devices(devices),
    )
    .expect("session")
}

fn matrix(rows: usize, cols: usize, seed: usize) -> Tensor {
    Tensor::build::<f32>([rows, cols], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (((i * 7 + seed * 5) % 11) as f32 - 5.0) / 8.0)
    })
}

/// The rows `lo..hi` of a row-major f32 matrix.
fn rows(t: &Tensor, lo: usize, hi: usize) -> Tensor {
    let cols = t.shape().dims()[1];
    let data = t.as_slice::<f32>().expect("f32");
    Tensor::new(&[hi - lo, cols], data[lo * cols..hi * cols].to_vec()).expect("rows")
}

/// `mean((tanh(x w1) w2 - t)^2)`.
fn mlp_loss(s: &Scope, x: &Output, t: &Output, w1: &Output, w2: &Output) -> Result<Output> {
    let h = ops::tanh(s, &ops::mat_mul(s, x, w1, false, false)?)?;
    let y = ops::mat_mul(s, &h, w2, false, false)?;
    let d = ops::sub(s, &y, t)?;
    ops::mean_axes(s, &ops::mul(s, &d, &d)?, &[0, 1], false)
}

struct Model {
    w1: Variable,
    w2: Variable,
}

impl Model {
    fn new(s1: &Scope, s2: &Scope) -> Model {
        let w1 = ops::constant(s1, matrix(IN, HIDDEN, 1)).unwrap();
        let w2 = ops::constant(s2, matrix(HIDDEN, OUT, 2)).unwrap();
        Model {
            w1: Variable::new(s1, "w1", &w1, true).unwrap(),
            w2: Variable::new(s2, "w2", &w2, true).unwrap(),
        }
    }

    fn init(&self, sess: &Session) {
        sess.run(
            &[],
            &[],
            &[self.w1.initializer.name(), self.w2.initializer.name()],
        )
        .unwrap();
    }

    fn values(&self, sess: &Session) -> Vec<Tensor> {
        sess.run(&[], &[&self.w1.value.name(), &self.w2.value.name()], &[])
            .unwrap()
    }
}

fn assert_close(a: &[Tensor], b: &[Tensor], what: &str) {
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.shape(), y.shape());
        for (p, q) in x
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .zip(y.as_slice::<f32>().unwrap())
        {
            assert!(
                (p - q).abs() <= 1e-6 * (1.0 + q.abs()),
                "{what}: {p} vs {q}"
            );
        }
    }
}

fn placement(sess: &Session, targets: &[&str]) -> HashMap<String, String> {
    sess.placement(&[], &[], targets)
        .unwrap()
        .into_iter()
        .collect()
}

#[test]
fn sync_sgd_on_two_replicas_equals_one_device_on_the_concatenated_batch() {
    // Two replicas on CPU:1 and CPU:2, variables on CPU:0.
    let s = Scope::new();
    let ps = s.with_device(CPU[0]);
    let m = Model::new(&ps, &ps);
    let step = get_or_create_global_step(&ps).unwrap();
    let mut feeds = Vec::new();
    let r = replicate_minimize(
        &s,
        &GradientDescentOptimizer::new(0.5),
        &CPU[1..],
        ReplicaMode::Sync,
        Some(&step),
        None,
        |rs, _| {
            let x = ops::placeholder(rs, DType::F32, Shape::known(&[ROWS / 2, IN]))?;
            let t = ops::placeholder(rs, DType::F32, Shape::known(&[ROWS / 2, OUT]))?;
            feeds.push((x.name(), t.name()));
            mlp_loss(rs, &x, &t, &m.w1.value, &m.w2.value)
        },
    )
    .unwrap();
    assert_eq!(r.train_ops.len(), 1);
    let init = actorflow::train::global_variables_initializer(&s).unwrap();
    let sess = session(&s, 3);
    sess.run(&[], &[], &[init.name()]).unwrap();

    // The same model on one device, on the whole batch.
    let s1 = Scope::new();
    let m1 = Model::new(&s1, &s1);
    let x1 = ops::placeholder(&s1, DType::F32, Shape::known(&[ROWS, IN])).unwrap();
    let t1 = ops::placeholder(&s1, DType::F32, Shape::known(&[ROWS, OUT])).unwrap();
    let loss1 = mlp_loss(&s1, &x1, &t1, &m1.w1.value, &m1.w2.value).unwrap();
    let train1 = GradientDescentOptimizer::new(0.5)
        .minimize(&s1, &loss1, None, None)
        .unwrap();
    let single = session(&s1, 1);
    m1.init(&single);

    for k in 0..5 {
        let x = matrix(ROWS, IN, 10 + k);
        let t = matrix(ROWS, OUT, 20 + k);
        let mut fed = Vec::new();
        for (i, (xn, tn)) in feeds.iter().enumerate() {
            let (lo, hi) = (i * ROWS / 2, (i + 1) * ROWS / 2);
            fed.push((xn.as_str(), rows(&x, lo, hi)));
            fed.push((tn.as_str(), rows(&t, lo, hi)));
        }
        sess.run(&fed, &[], &[r.train_ops[0].name()]).unwrap();
        single
            .run(
                &[(&x1.name(), x.clone()), (&t1.name(), t.clone())],
                &[],
                &[train1.name()],
            )
            .unwrap();
        assert_close(
            &m.values(&sess),
            &m1.values(&single),
            &format!("after step {k}"),
        );
    }
    let v = sess.run(&[], &[&step.handle().name()], &[]).unwrap();
    assert_eq!(v[0], Tensor::scalar(5i64), "one global step per sync step");

    // Each replica's forward and backward pass ran on its device; updates on CPU:0.
    let all_feeds: Vec<&str> = feeds
        .iter()
        .flat_map(|(x, t)| [x.as_str(), t.as_str()])
        .collect();
    let placed: HashMap<String, String> = sess
        .placement(&all_feeds, &[], &[r.train_ops[0].name()])
        .unwrap()
        .into_iter()
        .collect();
    for (node, device) in &placed {
        if node.starts_with("replica_0/") && !node.contains("/_") {
            assert!(device.ends_with("CPU:1"), "{node} on {device}");
        }
        if node.starts_with("replica_1/") && !node.contains("/_") {
            assert!(device.ends_with("CPU:2"), "{node} on {device}");
        }
        if node.contains("ApplyGradientDescent") {
            assert!(device.ends_with("CPU:0"), "{node} on {device}");
        }
    }
    assert!(placed.keys().any(|n| n.contains("gradients")));
}

#[test]
fn async_replicas_each_apply_their_own_updates_concurrently() {
    // loss_i = sum(w * c_i): each replica's gradient is c_i whatever w is, so after
    // K steps of each replica w = w0 - lr * K * (c_0 + c_1), exactly (all values are
    // binary fractions), however the threads interleave.
    const K: usize = 40;
    let s = Scope::new();
    let ps = s.with_device(CPU[0]);
    let w0 = [1.0f32, -2.0, 0.5];
    let c = [[1.0f32, 2.0, -0.5], [0.25, -1.0, 4.0]];
    let w = Variable::new(
        &ps,
        "w",
        &ops::constant(&ps, Tensor::vector(&w0)).unwrap(),
        true,
    )
    .unwrap();
    let step = get_or_create_global_step(&ps).unwrap();
    let r = replicate_minimize(
        &s,
        &GradientDescentOptimizer::new(0.125).use_locking(true),
        &CPU[1..],
        ReplicaMode::Async,
        Some(&step),
        None,
        |rs, i| {
            let ci = ops::constant(rs, Tensor::vector(&c[i]))?;
            ops::sum_axes(rs, &ops::mul(rs, &w.value, &ci)?, &[0], false)
        },
    )
    .unwrap();
    assert_eq!(r.train_ops.len(), 2);
    let init = actorflow::train::global_variables_initializer(&s).unwrap();
    let sess = session(&s, 3);
    sess.run(&[], &[], &[init.name()]).unwrap();
    std::thread::scope(|scope| {
        for op in &r.train_ops {
            let sess = sess.clone();
            let name = op.name().to_owned();
            scope.spawn(move || {
                for _ in 0..K {
                    sess.run(&[], &[], &[&name]).unwrap();
                }
            });
        }
    });
    let out = sess
        .run(&[], &[&w.value.name(), &step.handle().name()], &[])
        .unwrap();
    let want: Vec<f32> = (0..3)
        .map(|j| w0[j] - 0.125 * K as f32 * (c[0][j] + c[1][j]))
        .collect();
    assert_eq!(out[0], Tensor::vector(&want));
    assert_eq!(
        out[1],
        Tensor::scalar(2 * K as i64),
        "one step per replica update"
    );
    // Each replica's update ran on the parameter device, its gradient on its own.
    for (i, op) in r.train_ops.iter().enumerate() {
        let placed = placement(&sess, &[op.name()]);
        let update = placed
            .iter()
            .find(|(n, _)| n.contains("ApplyGradientDescent"))
            .expect("an update");
        assert!(update.1.ends_with("CPU:0"), "{update:?}");
        let mul = format!("replica_{i}/Mul");
        assert!(
            placed[&mul].ends_with(&format!("CPU:{}", i + 1)),
            "{mul} on {}",
            placed[&mul]
        );
    }
}

#[test]
fn model_parallel_layers_on_two_devices_train_like_one_device() {
    let build = |devices: [&str; 2]| {
        let s = Scope::new();
        let (d1, d2) = (s.with_device(devices[0]), s.with_device(devices[1]));
        let m = Model::new(&d1, &d2);
        let x = ops::placeholder(&d1, DType::F32, Shape::known(&[ROWS, IN])).unwrap();
        let t = ops::placeholder(&d2, DType::F32, Shape::known(&[ROWS, OUT])).unwrap();
        let h = ops::tanh(
            &d1,
            &ops::mat_mul(&d1, &x, &m.w1.value, false, false).unwrap(),
        )
        .unwrap();
        let y = ops::mat_mul(&d2, &h, &m.w2.value, false, false).unwrap();
        let d = ops::sub(&d2, &y, &t).unwrap();
        let loss = ops::mean_axes(&d2, &ops::mul(&d2, &d, &d).unwrap(), &[0, 1], false).unwrap();
        let train = GradientDescentOptimizer::new(0.5)
            .minimize(&s, &loss, None, None)
            .unwrap();
        (s, m, x, t, h, train)
    };
    let (s2, m2, x2, t2, h2, train2) = build([CPU[1], CPU[2]]);
    let (s1, m1, x1, t1, _, train1) = build([CPU[0], CPU[0]]);
    let split = session(&s2, 3);
    let one = session(&s1, 1);
    m2.init(&split);
    m1.init(&one);
    for k in 0..4 {
        let (x, t) = (matrix(ROWS, IN, 30 + k), matrix(ROWS, OUT, 40 + k));
        split
            .run(
                &[(&x2.name(), x.clone()), (&t2.name(), t.clone())],
                &[],
                &[train2.name()],
            )
            .unwrap();
        one.run(&[(&x1.name(), x), (&t1.name(), t)], &[], &[train1.name()])
            .unwrap();
        assert_close(&m2.values(&split), &m1.values(&one), &format!("step {k}"));
    }
    let placed: HashMap<String, String> = split
        .placement(&[&x2.name(), &t2.name()], &[], &[train2.name()])
        .unwrap()
        .into_iter()
        .collect();
    assert!(placed[h2.op().name()].ends_with("CPU:1"));
    for (node, device) in &placed {
        if node.contains("update_w1/") {
            assert!(device.ends_with("CPU:1"), "{node} on {device}");
        }
        if node.contains("update_w2/") {
            assert!(device.ends_with("CPU:2"), "{node} on {device}");
        }
    }
}
