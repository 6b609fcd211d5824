//! The `train_digits` example's graph under a `MonitoredTrainingSession`: training
//! learns, checkpoints are written every N steps, and a run killed without closing
//! (no final checkpoint) resumes from its last periodic checkpoint and continues to
//! the requested step; hooks and `OutOfRange`-free stopping by step.

#[allow(dead_code)]
mod common;
use common::TempDir;
use std::path::PathBuf;

use actorflow::train::{latest_checkpoint, MonitoredTrainingSession};
use actorflow::{SavedModel, Tensor};

// train_convnet includes train_digits (its MLP and data loading): one copy
#[allow(dead_code)]
#[path = "../examples/train_convnet.rs"]
mod convnet_example;
use convnet_example::digits as example;

fn config(dir: &TempDir, steps: i64) -> example::Config {
    example::Config {
        data_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/digits"),
        steps,
        batch_size: 32,
        learning_rate: 0.003,
        checkpoint_dir: dir.0.join("ckpt"),
        save_steps: 20,
        logdir: dir.0.join("events"),
        trace: dir.0.join("trace.json"),
        export_dir: dir.0.join("saved_model"),
        fresh: false,
        seed: 7,
        quiet: true,
    }
}

fn train_until_stop(
    sess: &mut MonitoredTrainingSession,
    m: &example::Model,
    limit: usize,
) -> Vec<f32> {
    let mut losses = Vec::new();
    while !sess.should_stop() && losses.len() < limit {
        let v = sess.run(&[], &[&m.loss.name()], &[&m.train_op]).unwrap();
        losses.push(v[0].scalar_value::<f32>().unwrap());
    }
    losses
}

#[test]
fn a_killed_run_resumes_from_its_last_checkpoint() {
    let dir = TempDir::new("resume");
    let cfg = config(&dir, 120);
    // First run: 50 steps, then "killed" (dropped without close: no final save).
    let m = example::build(&cfg).unwrap();
    let tc = example::training_config(&cfg, &m);
    let mut sess = MonitoredTrainingSession::new(&m.scope, &tc, Vec::new()).unwrap();
    assert!(sess.restored_from().is_none());
    let first = train_until_stop(&mut sess, &m, 50);
    assert_eq!(sess.global_step(), 50);
    drop(sess);
    let latest = latest_checkpoint(&cfg.checkpoint_dir).unwrap().unwrap();
    assert!(
        latest.to_string_lossy().ends_with("model.ckpt-40"),
        "{}",
        latest.display()
    );

    // Second run: a fresh graph and session restore step 40 and train on to 120.
    let m = example::build(&cfg).unwrap();
    let mut sess = MonitoredTrainingSession::new(&m.scope, &tc, Vec::new()).unwrap();
    assert_eq!(sess.restored_from(), Some(&latest));
    assert_eq!(sess.global_step(), 40);
    let second = train_until_stop(&mut sess, &m, 1000);
    assert_eq!(second.len(), 80, "stops at last_step");
    assert_eq!(sess.global_step(), 120);
    // It kept learning from where it was, not from scratch.
    let early: f32 = first[..10].iter().sum::<f32>() / 10.0;
    let late: f32 = second[second.len() - 20..].iter().sum::<f32>() / 20.0;
    assert!(late < 0.5 * early, "loss {early} -> {late}");
    let acc = example::evaluate(&cfg, &m, sess.session()).unwrap();
    assert!(acc > 0.8, "test accuracy after 120 steps: {acc}");
    sess.close().unwrap();
    let latest = latest_checkpoint(&cfg.checkpoint_dir).unwrap().unwrap();
    assert!(latest.to_string_lossy().ends_with("model.ckpt-120"));
    // TensorBoard events were written.
    let events = std::fs::read_dir(&cfg.logdir).unwrap().count();
    assert!(events >= 1);

    // The SavedModel of the last checkpoint classifies the test split as the
    // training graph did.
    let export = cfg.export_dir.join("120");
    assert_eq!(
        example::export_saved_model(&cfg, &latest, &export).unwrap(),
        export
    );
    let (px, labels) = example::load_csv(&example::shards(&cfg.data_dir, "test").unwrap()).unwrap();
    let images = Tensor::new::<f32>(&[labels.len(), example::PIXELS], px).unwrap();
    let model = SavedModel::load(&export, &["serve"]).unwrap();
    let out = model.run("serving_default", &[("images", images)]).unwrap();
    let classes = out["classes"].as_slice::<i64>().unwrap();
    let hits = classes
        .iter()
        .zip(&labels)
        .filter(|(c, l)| **c == i64::from(**l))
        .count();
    assert_eq!(hits as f64 / labels.len() as f64, acc);
    let p = out["probabilities"].as_slice::<f32>().unwrap();
    assert_eq!(p.len(), labels.len() * example::CLASSES);
    let row: f32 = p[..example::CLASSES].iter().sum();
    assert!((row - 1.0).abs() < 1e-5, "{row}");
    tensorflow_serves_the_export(&export, &images_json(&cfg), classes);

    // Started again after it finished: restored at its last step, nothing to run.
    let m = example::build(&cfg).unwrap();
    let sess = MonitoredTrainingSession::new(&m.scope, &tc, Vec::new()).unwrap();
    assert_eq!(sess.global_step(), 120);
    assert!(sess.should_stop());
}

/// The environment variable that turns [`child_trainer`] into a training run.
const CHILD_DIR: &str = "ACTORFLOW_TRAIN_CHILD_DIR";

/// Runs only as the child of [`a_run_killed_with_sigkill_resumes_with_its_global_step`]:
/// trains (practically) forever, checkpointing every 20 steps, until it is killed.
#[test]
#[ignore = "the child process of a_run_killed_with_sigkill_resumes_with_its_global_step"]
fn child_trainer() {
    let dir =
        std::env::var_os(CHILD_DIR).expect("run by the SIGKILL test, which sets the directory");
    let dir = TempDir(PathBuf::from(dir));
    let cfg = config(&dir, 1_000_000);
    let m = example::build(&cfg).unwrap();
    let tc = example::training_config(&cfg, &m);
    let mut sess = MonitoredTrainingSession::new(&m.scope, &tc, Vec::new()).unwrap();
    train_until_stop(&mut sess, &m, usize::MAX);
    std::mem::forget(dir);
}

#[test]
fn a_run_killed_with_sigkill_resumes_with_its_global_step() {
    let dir = TempDir::new("sigkill");
    let cfg = config(&dir, 1_000_000);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_trainer", "--ignored", "--test-threads=1"])
        .env(CHILD_DIR, &dir.0)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the child has written a checkpoint past step 60, then SIGKILL it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let step_of = |p: &std::path::Path| -> i64 {
        p.to_string_lossy()
            .rsplit('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    loop {
        if let Ok(Some(p)) = latest_checkpoint(&cfg.checkpoint_dir) {
            if step_of(&p) >= 60 {
                break;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the training child exited by itself: {status}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint at step 60 within 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    let latest = latest_checkpoint(&cfg.checkpoint_dir).unwrap().unwrap();
    let saved = step_of(&latest);
    assert!(saved >= 60 && saved % 20 == 0, "{}", latest.display());

    // A fresh process image (here: a fresh graph and session) resumes there.
    let cfg = config(&dir, saved + 20);
    let m = example::build(&cfg).unwrap();
    let tc = example::training_config(&cfg, &m);
    let mut sess = MonitoredTrainingSession::new(&m.scope, &tc, Vec::new()).unwrap();
    assert_eq!(sess.restored_from(), Some(&latest));
    assert_eq!(sess.global_step(), saved);
    let more = train_until_stop(&mut sess, &m, 1000);
    assert_eq!(more.len(), 20);
    assert_eq!(sess.global_step(), saved + 20);
    sess.close().unwrap();
}

/// The first 50 test images as `{"images": [[…64 pixels…], …]}`.
fn images_json(cfg: &example::Config) -> String {
    let (px, _) = example::load_csv(&example::shards(&cfg.data_dir, "test").unwrap()).unwrap();
    let rows: Vec<&[f32]> = px.chunks(example::PIXELS).take(50).collect();
    serde_json::json!({ "images": rows }).to_string()
}

/// TensorFlow 2.21 (when `ACTORFLOW_TF_PYTHON` names one) loads the exported
/// SavedModel with both of its loaders and classifies as actorflow did.
fn tensorflow_serves_the_export(export: &std::path::Path, inputs: &str, classes: &[i64]) {
    let py = match std::env::var("ACTORFLOW_TF_PYTHON") {
        Ok(p) if std::path::Path::new(&p).exists() => p,
        _ => {
            eprintln!("SKIPPED: TensorFlow serving the export needs ACTORFLOW_TF_PYTHON");
            return;
        }
    };
    let dir = TempDir::new("tf-serves");
    let json = dir.0.join("inputs.json");
    std::fs::write(&json, inputs).unwrap();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tf_interop/saved_model_peer.py");
    let out = std::process::Command::new(py)
        .arg(script)
        .arg("saved_model")
        .arg(export)
        .args(["serve", "serving_default"])
        .arg(&json)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "TensorFlow could not serve the export"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let got: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    for api in ["v1", "v2"] {
        let theirs: Vec<i64> = got[api]["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_i64().unwrap())
            .collect();
        assert_eq!(theirs, classes[..50], "{api}");
    }
}

/// `examples/train_convnet.rs`: on the same batches, the convnet ends with a
/// higher test accuracy than `train_digits`' MLP.
#[test]
fn the_convnet_example_beats_the_mlp_on_the_same_batches() {
    let cfg = convnet_example::Config {
        data_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/digits"),
        steps: 400,
        batch_size: 32,
        learning_rate: 0.003,
        dropout: 0.25,
        seed: 7,
    };
    let (mlp, convnet) = convnet_example::run(&cfg).unwrap();
    assert!(mlp > 0.8, "the MLP learned little: {mlp}");
    assert!(convnet > mlp, "convnet {convnet}, MLP {mlp}");
}
