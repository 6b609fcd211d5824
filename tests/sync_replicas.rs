//! `SyncReplicasOptimizer` end to end in one process: parameters on `CPU:0` (by
//! `replica_device_setter`), two replicas on `CPU:1` and `CPU:2` run their train
//! ops from two client threads, the chief's sync op runs from a third, and after
//! N steps the global step is N and the variables are what averaged-gradient SGD
//! gives by hand. Then the same training through `MonitoredTrainingSession` and
//! `SyncReplicasHook`.
//!
//! The replicas meet at a barrier after each step, so neither can take the
//! token meant for the other and every step averages one gradient of each: the
//! results are deterministic.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use actorflow::ops::{self, Variable};
use actorflow::train::{
    get_or_create_global_step, global_variables_initializer, local_variables_initializer,
    with_replica_device_setter, GradientDescentOptimizer, MonitoredTrainingSession, Optimizer,
    ReplicaDeviceSetter, SessionRunHook, SyncReplicasHook, SyncReplicasOptimizer, TrainingConfig,
    VarRef,
};
use actorflow::{Operation, Output, RunArgs, RunOptions, Scope, Session, SessionOptions, Tensor};

const LR: f64 = 0.05;
const STEPS: usize = 6;
/// Each replica's rows `(x, y)`.
const DATA: [[(f32, f32); 2]; 2] = [[(1.0, 3.0), (2.0, 5.0)], [(3.0, 7.0), (4.0, 6.0)]];

fn bounded() -> RunOptions {
    RunOptions::default().with_timeout(Duration::from_secs(30))
}

fn run(sess: &Session, fetches: &[&str], targets: &[&str]) -> Vec<Tensor> {
    sess.run_with(&RunArgs {
        fetches: fetches.iter().map(|s| s.to_string()).collect(),
        targets: targets.iter().map(|s| s.to_string()).collect(),
        options: bounded(),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{fetches:?} {targets:?}: {e}"))
    .outputs
}

fn scalar_f32(t: &Tensor) -> f64 {
    f64::from(t.scalar_value::<f32>().unwrap())
}

struct Model {
    root: Scope,
    w: Output,
    b: Output,
    step: VarRef,
    opts: Vec<SyncReplicasOptimizer<GradientDescentOptimizer>>,
    train_ops: Vec<Operation>,
}

fn setter(worker: usize) -> ReplicaDeviceSetter {
    ReplicaDeviceSetter {
        ps_tasks: 1,
        ps_device: "/device:CPU:0".into(),
        worker_device: format!("/device:CPU:{worker}"),
        ..Default::default()
    }
}

/// `y = w x + b` with loss `mean((w x + b - y)^2)` per replica.
fn model() -> Model {
    let root = Scope::new();
    let ps = with_replica_device_setter(&root, &setter(1)).unwrap();
    let w = Variable::new(&ps, "w", &ops::scalar(&ps, 0.0f32).unwrap(), true).unwrap();
    let b = Variable::new(&ps, "b", &ops::scalar(&ps, 0.0f32).unwrap(), true).unwrap();
    let step = get_or_create_global_step(&ps).unwrap();
    let vars = [VarRef::from(&w), VarRef::from(&b)];
    let mut opts = Vec::new();
    let mut train_ops = Vec::new();
    for (r, rows) in DATA.iter().enumerate() {
        let named = root.with_name_scope(&format!("replica_{r}"));
        let rs = with_replica_device_setter(&named, &setter(r + 1)).unwrap();
        let x = ops::constant(&rs, Tensor::vector(&rows.map(|(x, _)| x))).unwrap();
        let y = ops::constant(&rs, Tensor::vector(&rows.map(|(_, y)| y))).unwrap();
        let pred = ops::add(&rs, &ops::mul(&rs, &w.value, &x).unwrap(), &b.value).unwrap();
        let d = ops::sub(&rs, &pred, &y).unwrap();
        let loss = ops::mean_axes(&rs, &ops::mul(&rs, &d, &d).unwrap(), &[0], false).unwrap();
        let opt = SyncReplicasOptimizer::new(GradientDescentOptimizer::new(LR), 2, Some(2));
        train_ops.push(opt.minimize(&rs, &loss, Some(&step), Some(&vars)).unwrap());
        opts.push(opt);
    }
    Model {
        root,
        w: w.value,
        b: b.value,
        step,
        opts,
        train_ops,
    }
}

/// Averaged-gradient SGD on `DATA`, by hand: `(w, b)` after `steps` updates.
fn expected(steps: usize) -> (f64, f64) {
    let (mut w, mut b) = (0.0f64, 0.0f64);
    for _ in 0..steps {
        let (mut gw, mut gb) = (0.0, 0.0);
        for rows in DATA {
            for (x, y) in rows {
                let (x, y) = (f64::from(x), f64::from(y));
                // d/dw and d/db of mean((w x + b - y)^2) over the replica's 2 rows,
                // averaged over the 2 replicas
                gw += (w * x + b - y) * x / 2.0;
                gb += (w * x + b - y) / 2.0;
            }
        }
        w -= LR * gw;
        b -= LR * gb;
    }
    (w, b)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * (1.0 + b.abs())
}

#[test]
fn hand_computed_reference() {
    // the first step from (0, 0): replica 0's gradient is (-13, -8), replica 1's
    // (-45, -13); their mean (-29, -10.5) times 0.05
    let (w, b) = expected(1);
    assert!(close(w, 1.45) && close(b, 0.525), "{w} {b}");
}

#[test]
fn two_replicas_and_a_chief_train_in_step() {
    let m = model();
    let g = m.root.graph_def();
    for (node, device) in [
        ("w", "/device:CPU:0"),
        ("global_step", "/device:CPU:0"),
        ("sync_token_q", "/device:CPU:0"),
        ("replica_0/NoOp", "/device:CPU:1"),
        ("replica_1/NoOp", "/device:CPU:2"),
        ("replica_1/sync_rep_local_step", "/device:CPU:2"),
        (
            "replica_1/sync_replicas/conditional_accumulator",
            "/device:CPU:0",
        ),
    ] {
        assert_eq!(g.find(node).unwrap().device, device, "{node}");
    }
    let init = global_variables_initializer(&m.root).unwrap();
    let local_init = local_variables_initializer(&m.root).unwrap();
    let init_tokens = m.opts[0].get_init_tokens_op(0).unwrap();
    let step_read = m.step.read(&m.root).unwrap();
    let mut fetch = vec![m.w.name(), m.b.name(), step_read.name()];
    for opt in &m.opts {
        fetch.push(opt.local_step().unwrap().read(&m.root).unwrap().name());
    }
    for (acc, _) in &m.opts[0].accumulators().unwrap() {
        fetch.push(acc.num_accumulated(&m.root).unwrap().name());
    }
    let sess = Session::new(
        &m.root.graph_def(),
        SessionOptions::default().with_cpu_devices(3),
    )
    .unwrap();
    let ready = m.opts[0].ready_for_local_init_op().unwrap().name();
    let not_ready = run(&sess, &[&ready], &[]);
    assert_eq!(
        not_ready[0].as_strings().unwrap().len(),
        3,
        "w, b, global_step"
    );
    run(&sess, &[], &[init.name(), local_init.name()]);
    assert!(run(&sess, &[&ready], &[])[0]
        .as_strings()
        .unwrap()
        .is_empty());
    run(
        &sess,
        &[],
        &[
            m.opts[0].chief_init_op().unwrap().name(),
            m.opts[1].local_step_init_op().unwrap().name(),
            init_tokens.name(),
        ],
    );

    let barrier = Arc::new(Barrier::new(2));
    let workers: Vec<_> = m
        .train_ops
        .iter()
        .map(|op| {
            let (sess, op, barrier) = (sess.clone(), op.name().to_owned(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                for _ in 0..STEPS {
                    run(&sess, &[], &[&op]);
                    barrier.wait();
                }
            })
        })
        .collect();
    let sync_op = m.opts[0].chief_queue_runner().unwrap().enqueue_ops[0].clone();
    let chief = {
        let sess = sess.clone();
        std::thread::spawn(move || {
            for _ in 0..STEPS {
                run(&sess, &[], &[&sync_op]);
            }
        })
    };
    for t in workers {
        t.join().unwrap();
    }
    chief.join().unwrap();

    let names: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let out = run(&sess, &names, &[]);
    let (w, b) = expected(STEPS);
    assert!(
        close(scalar_f32(&out[0]), w),
        "w = {:?}, by hand {w}",
        out[0]
    );
    assert!(
        close(scalar_f32(&out[1]), b),
        "b = {:?}, by hand {b}",
        out[1]
    );
    assert_eq!(out[2], Tensor::scalar(STEPS as i64));
    assert_eq!(
        out[3],
        Tensor::scalar(STEPS as i64),
        "replica 0's local step"
    );
    assert_eq!(
        out[4],
        Tensor::scalar(STEPS as i64),
        "replica 1's local step"
    );
    assert_eq!(out[5], Tensor::scalar(0i32));
    assert_eq!(out[6], Tensor::scalar(0i32));
}

#[test]
fn a_monitored_session_with_the_hook_trains_the_same() {
    let m = model();
    let chief_hook = SyncReplicasHook::new(&m.opts[0], &m.root, true, 0).unwrap();
    let mut worker_hook = SyncReplicasHook::new(&m.opts[1], &m.root, false, 0).unwrap();
    let config = TrainingConfig {
        session_options: SessionOptions::default()
            .with_cpu_devices(3)
            .with_default_timeout(Duration::from_secs(30)),
        ..Default::default()
    };
    let mut mts =
        MonitoredTrainingSession::new(&m.root, &config, vec![Box::new(chief_hook)]).unwrap();
    let sess = mts.session().clone();
    worker_hook.begin(&sess, 0).unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let worker = {
        let (sess, op, barrier) = (
            sess.clone(),
            m.train_ops[1].name().to_owned(),
            Arc::clone(&barrier),
        );
        std::thread::spawn(move || {
            for _ in 0..STEPS {
                run(&sess, &[], &[&op]);
                barrier.wait();
            }
        })
    };
    for i in 0..STEPS {
        mts.run(&[], &[], &[m.train_ops[0].name()]).unwrap();
        // the chief's token came after the update: the step is already counted
        assert_eq!(mts.global_step(), i as i64 + 1);
        barrier.wait();
    }
    worker.join().unwrap();
    worker_hook.end(&sess, STEPS as i64).unwrap();
    let out = run(&sess, &[&m.w.name(), &m.b.name()], &[]);
    // closing stops the chief's loop, which waits for gradients that never come
    mts.close().unwrap();
    let (w, b) = expected(STEPS);
    assert!(
        close(scalar_f32(&out[0]), w),
        "w = {:?}, by hand {w}",
        out[0]
    );
    assert!(
        close(scalar_f32(&out[1]), b),
        "b = {:?}, by hand {b}",
        out[1]
    );
}

#[test]
fn the_hook_refuses_an_uninitialised_model() {
    let m = model();
    let mut hook = SyncReplicasHook::new(&m.opts[1], &m.root, false, -1).unwrap();
    let sess = Session::new(
        &m.root.graph_def(),
        SessionOptions::default().with_cpu_devices(3),
    )
    .unwrap();
    let e = hook.begin(&sess, 0).unwrap_err();
    assert_eq!(e.code(), actorflow::Code::FailedPrecondition, "{e}");
    assert!(e.message().contains("\"w\""), "{e}");
}
