//! Training on a cluster survives a parameter server's restart: a
//! `MonitoredTrainingSession` whose master is a worker task, with its variables on
//! a `ps` task, loses the ps mid-training (its variables die with it), opens a new
//! session once the ps is back, restores the newest checkpoint and trains on to
//! the last step, ending where an uninterrupted run would.

#[allow(dead_code)]
mod common;
use common::TempDir;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use actorflow::train::{self, MonitoredTrainingSession, TrainingConfig};
use actorflow::{ops, ClusterSpec, Scope, Server, ServerOptions, Tensor};

/// A model whose state after `k` steps is known by hand: `w = [k, 2k]` and the
/// global step `k`, both on the ps task.
struct Counter {
    scope: Scope,
    train: String,
    w: String,
    step: String,
}

fn counter() -> Counter {
    let s = Scope::new();
    let ps = s.with_device("/job:ps/task:0");
    let w0 = ops::constant(&ps, Tensor::vector(&[0.0f32, 0.0])).unwrap();
    let w = ops::Variable::new(&ps, "w", &w0, true).unwrap();
    let step = train::get_or_create_global_step(&ps).unwrap();
    let delta = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
    let bump = ops::assign_add(&ps, &w.var, &delta).unwrap();
    let one = ops::scalar(&s, 1i64).unwrap();
    let tick = step.assign_add(&ps, &one).unwrap();
    let train_op = ops::group(&s, &[bump.op(), &tick]).unwrap();
    let step_value = step.read(&s).unwrap();
    Counter {
        scope: s,
        train: train_op.name().to_owned(),
        w: w.value.name(),
        step: step_value.name(),
    }
}

fn start(spec: &ClusterSpec, job: &str, l: TcpListener) -> Server {
    Server::start_with_listener(ServerOptions::new(spec.clone(), job, 0), l).unwrap()
}

#[test]
fn training_resumes_from_the_last_checkpoint_after_the_ps_restarts() {
    let (ps_l, worker_l) = (
        TcpListener::bind("127.0.0.1:0").unwrap(),
        TcpListener::bind("127.0.0.1:0").unwrap(),
    );
    let ps_addr: SocketAddr = ps_l.local_addr().unwrap();
    let spec = ClusterSpec::new()
        .with_job("ps", &[ps_addr.to_string()])
        .unwrap()
        .with_job("worker", &[worker_l.local_addr().unwrap().to_string()])
        .unwrap();
    let mut ps = start(&spec, "ps", ps_l);
    let worker = start(&spec, "worker", worker_l);

    let dir = TempDir::new("cluster_training");
    let m = counter();
    let cfg = TrainingConfig {
        master: Some(worker.target()),
        checkpoint_dir: Some(dir.0.clone()),
        save_checkpoint_steps: Some(5),
        last_step: Some(20),
        recovery_timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    let mut sess = MonitoredTrainingSession::new(&m.scope, &cfg, Vec::new()).unwrap();
    for _ in 0..7 {
        sess.run(&[], &[], &[&m.train]).unwrap();
    }
    assert_eq!(sess.global_step(), 7);

    // The ps dies (and its variables with it) and comes back 0.5 s later.
    ps.stop();
    drop(ps);
    let spec2 = spec.clone();
    let restart = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        let l = TcpListener::bind(ps_addr).unwrap();
        start(&spec2, "ps", l)
    });
    let t0 = Instant::now();
    // The next step recovers by itself: a new session restored at step 5.
    sess.run(&[], &[], &[&m.train]).unwrap();
    assert_eq!(sess.recoveries(), 1);
    assert_eq!(sess.global_step(), 6, "restored at 5, then one step");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    while !sess.should_stop() {
        sess.run(&[], &[], &[&m.train]).unwrap();
    }
    assert_eq!(sess.global_step(), 20);
    let out = sess.session().run(&[], &[&m.w, &m.step], &[]).unwrap();
    assert_eq!(out[0], Tensor::vector(&[20.0f32, 40.0]));
    assert_eq!(out[1], Tensor::scalar(20i64));
    sess.close().unwrap();
    let _ps = restart.join().unwrap();
}
