//! Restarting from checkpoints that went bad: a `MonitoredTrainingSession` falls
//! back past a damaged or missing newest checkpoint to the newest readable one
//! (found through the state file, or by file name when the state file is empty
//! or gone), warns about each it skips, refuses to start from scratch when
//! checkpoints exist but none loads (unless told to), and its next saves write a
//! state file listing only readable checkpoints. A save also deletes the
//! temporary files of saves killed mid-way, and nothing else.

#[allow(dead_code)]
mod common;
use common::TempDir;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use actorflow::train::{self, MonitoredTrainingSession, Saver, TrainingConfig};
use actorflow::{ops, Code, Result, Scope, Session, SessionOptions, Tensor};

/// A model whose state after `k` steps is known by hand: `w = [k, 2k]` and
/// global step `k`.
struct Counter {
    scope: Scope,
    init: String,
    train: String,
    w: String,
    step: String,
}

fn counter() -> Counter {
    let s = Scope::new();
    let w0 = ops::constant(&s, Tensor::vector(&[0.0f32, 0.0])).unwrap();
    let w = ops::Variable::new(&s, "w", &w0, true).unwrap();
    let step = train::get_or_create_global_step(&s).unwrap();
    let delta = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
    let bump = ops::assign_add(&s, &w.var, &delta).unwrap();
    let one = ops::scalar(&s, 1i64).unwrap();
    let tick = step.assign_add(&s, &one).unwrap();
    let train_op = ops::group(&s, &[bump.op(), &tick]).unwrap();
    let step_value = step.read(&s).unwrap();
    let init = train::global_variables_initializer(&s).unwrap();
    Counter {
        scope: s,
        init: init.name().to_owned(),
        train: train_op.name().to_owned(),
        w: w.value.name(),
        step: step_value.name(),
    }
}

/// Checkpoints every 10 steps into `dir`, keeping 3.
fn config(dir: &Path) -> TrainingConfig {
    TrainingConfig {
        checkpoint_dir: Some(dir.to_owned()),
        save_checkpoint_steps: Some(10),
        max_to_keep: Some(3),
        ..Default::default()
    }
}

/// `w` and the global step in `sess`.
fn values(m: &Counter, sess: &Session) -> (Tensor, Tensor) {
    let out = sess.run(&[], &[&m.w, &m.step], &[]).unwrap();
    (out[0].clone(), out[1].clone())
}

/// What a session at step `k` holds.
fn at_step(k: i64) -> (Tensor, Tensor) {
    (
        Tensor::vector(&[k as f32, 2.0 * k as f32]),
        Tensor::scalar(k),
    )
}

/// Opens a session on a fresh graph (a restarted process), runs `steps` steps
/// and closes it (a final checkpoint); returns where it restored from and the
/// step it opened at.
fn run(dir: &Path, cfg: &TrainingConfig, steps: usize) -> (Option<PathBuf>, i64) {
    let m = counter();
    let mut sess = MonitoredTrainingSession::new(&m.scope, cfg, Vec::new()).unwrap();
    let opened = (sess.restored_from().cloned(), sess.global_step());
    assert_eq!(
        values(&m, sess.session()),
        at_step(opened.1),
        "restored values in {}",
        dir.display()
    );
    for _ in 0..steps {
        sess.run(&[], &[], &[&m.train]).unwrap();
    }
    sess.close().unwrap();
    opened
}

/// The first run of every test: 30 steps, checkpoints at 10, 20 and 30.
fn thirty_steps(dir: &TempDir) -> TrainingConfig {
    let cfg = config(&dir.0);
    assert_eq!(run(&dir.0, &cfg, 30), (None, 0));
    assert_eq!(
        files(&dir.0),
        state_and_bundles(&["model.ckpt-10", "model.ckpt-20", "model.ckpt-30"])
    );
    cfg
}

/// The state file and the files of the bundles (TensorFlow's checkpoint V2) at
/// these prefixes, sorted as `files` lists them.
fn state_and_bundles(prefixes: &[&str]) -> Vec<String> {
    let mut v = vec!["checkpoint".to_owned()];
    for p in prefixes {
        v.push(format!("{p}.data-00000-of-00001"));
        v.push(format!("{p}.index"));
        v.push(format!("{p}.meta"));
    }
    v
}

/// The data shard of the checkpoint at `prefix`.
fn data(prefix: &Path) -> PathBuf {
    PathBuf::from(format!("{}.data-00000-of-00001", prefix.display()))
}

/// Deletes the checkpoint at `prefix` (its index and data shard).
fn delete(prefix: &Path) {
    std::fs::remove_file(format!("{}.index", prefix.display())).unwrap();
    std::fs::remove_file(data(prefix)).unwrap();
    std::fs::remove_file(format!("{}.meta", prefix.display())).unwrap();
}

fn files(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Flips bytes in the middle of a checkpoint's data shard (its tensor data), as a
/// bad disk sector would.
fn corrupt(prefix: &Path) {
    let path = data(prefix);
    let mut b = std::fs::read(&path).unwrap();
    let mid = b.len() / 2;
    for x in &mut b[mid..mid + 4] {
        *x ^= 0xA5;
    }
    std::fs::write(path, b).unwrap();
}

/// The state file `dir` would hold listing `all` (oldest first), newest last.
fn state_listing(all: &[&str]) -> String {
    let mut s = format!(
        "model_checkpoint_path: \"{}\"\n",
        all.last().copied().unwrap_or_default()
    );
    for p in all {
        s.push_str(&format!("all_model_checkpoint_paths: \"{p}\"\n"));
    }
    s
}

fn state_file(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(train::CHECKPOINT_STATE_FILE)).unwrap()
}

/// A `Write` into a shared buffer, for the log capture.
#[derive(Clone)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with this thread's `tracing` events at WARN and above written to a
/// buffer; returns its result and the text logged.
fn warnings<R>(f: impl FnOnce() -> R) -> (R, String) {
    let buf = Buffer(Arc::new(Mutex::new(Vec::new())));
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let r = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    (r, text)
}

#[test]
fn a_corrupt_newest_checkpoint_falls_back_and_leaves_the_state_file() {
    let dir = TempDir::new("corrupt");
    let cfg = thirty_steps(&dir);
    let bad = dir.0.join("model.ckpt-30");
    corrupt(&bad);
    let bad_bytes = std::fs::read(data(&bad)).unwrap();
    // Restarted: step 20's checkpoint, with step 20's values (checked in
    // `run`), and a warning naming the skipped file and its DataLoss.
    let ((from, step), logged) = warnings(|| run(&dir.0, &cfg, 5));
    assert_eq!(from, Some(dir.0.join("model.ckpt-20")));
    assert_eq!(step, 20);
    assert!(logged.contains("WARN"), "{logged}");
    assert!(logged.contains(&bad.display().to_string()), "{logged}");
    assert!(
        logged.contains("DATA_LOSS") || logged.contains("DataLoss"),
        "{logged}"
    );
    // The final save at step 25 wrote a state file without the damaged
    // checkpoint, which stays on disk as it was.
    assert_eq!(
        state_file(&dir.0),
        state_listing(&["model.ckpt-10", "model.ckpt-20", "model.ckpt-25"])
    );
    assert_eq!(std::fs::read(data(&bad)).unwrap(), bad_bytes);
    // The next run restores step 25 without a warning, and keeping 3 goes on:
    // saving at 35 deletes step 10.
    let ((from, step), logged) = warnings(|| run(&dir.0, &cfg, 10));
    assert_eq!((from, step), (Some(dir.0.join("model.ckpt-25")), 25));
    assert_eq!(logged, "");
    assert_eq!(
        state_file(&dir.0),
        state_listing(&["model.ckpt-20", "model.ckpt-25", "model.ckpt-35"])
    );
    assert_eq!(
        files(&dir.0),
        state_and_bundles(&[
            "model.ckpt-20",
            "model.ckpt-25",
            "model.ckpt-30",
            "model.ckpt-35"
        ])
    );
}

#[test]
fn a_deleted_newest_checkpoint_falls_back() {
    let dir = TempDir::new("deleted");
    let cfg = thirty_steps(&dir);
    delete(&dir.0.join("model.ckpt-30"));
    let ((from, step), logged) = warnings(|| run(&dir.0, &cfg, 0));
    assert_eq!((from, step), (Some(dir.0.join("model.ckpt-20")), 20));
    assert!(logged.contains("model.ckpt-30"), "{logged}");
    // the final save (at 20, the step it opened at) is skipped; nothing new
    assert_eq!(
        files(&dir.0),
        state_and_bundles(&["model.ckpt-10", "model.ckpt-20"])
    );
}

#[test]
fn without_a_state_file_the_checkpoint_files_are_found_by_step() {
    let dir = TempDir::new("stateless");
    let cfg = thirty_steps(&dir);
    // an empty state file: the highest step found wins
    std::fs::write(dir.0.join("checkpoint"), b"").unwrap();
    // names that are not checkpoints of `model.ckpt` are never tried
    std::fs::write(dir.0.join("model.ckpt-99.bak"), b"junk").unwrap();
    std::fs::write(dir.0.join("other.ckpt-99.index"), b"junk").unwrap();
    std::fs::create_dir(dir.0.join("model.ckpt-98")).unwrap();
    let ((from, step), logged) = warnings(|| run(&dir.0, &cfg, 0));
    assert_eq!((from, step), (Some(dir.0.join("model.ckpt-30")), 30));
    assert_eq!(logged, "");
    // no state file, and the newest damaged: the next highest step
    std::fs::remove_file(dir.0.join("checkpoint")).unwrap();
    corrupt(&dir.0.join("model.ckpt-30"));
    let (from, step) = run(&dir.0, &cfg, 5);
    assert_eq!((from, step), (Some(dir.0.join("model.ckpt-20")), 20));
    // the files found older than the one restored are kept, the damaged one is
    // not listed
    assert_eq!(
        state_file(&dir.0),
        state_listing(&["model.ckpt-10", "model.ckpt-20", "model.ckpt-25"])
    );
}

#[test]
fn no_readable_checkpoint_refuses_to_start_unless_told_to() {
    let dir = TempDir::new("unreadable");
    let cfg = thirty_steps(&dir);
    for step in [10, 20, 30] {
        corrupt(&dir.0.join(format!("model.ckpt-{step}")));
    }
    let state_before = state_file(&dir.0);
    let open = |cfg: &TrainingConfig| -> Result<(Counter, MonitoredTrainingSession)> {
        let m = counter();
        let sess = MonitoredTrainingSession::new(&m.scope, cfg, Vec::new())?;
        Ok((m, sess))
    };
    let e = open(&cfg).err().expect("training must not start");
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    for needle in [
        dir.0.display().to_string(),
        "model.ckpt-10".into(),
        "model.ckpt-20".into(),
        "model.ckpt-30".into(),
        "start_fresh_if_checkpoints_unreadable".into(),
    ] {
        assert!(e.message().contains(&needle), "{needle} not in {e}");
    }
    assert_eq!(state_file(&dir.0), state_before, "nothing was written");
    // the state file lists checkpoints that are all gone: the same refusal
    for step in [10, 20, 30] {
        delete(&dir.0.join(format!("model.ckpt-{step}")));
    }
    let e = open(&cfg).err().expect("training must not start");
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert!(e.message().contains("model.ckpt-30"), "{e}");
    // told to: step 0, the initial values, and a warning
    let fresh = TrainingConfig {
        start_fresh_if_checkpoints_unreadable: true,
        ..config(&dir.0)
    };
    let (opened, logged) = warnings(|| open(&fresh));
    let (m, mut sess) = opened.unwrap();
    assert!(logged.contains("starting from step 0"), "{logged}");
    assert_eq!(sess.restored_from(), None);
    assert_eq!(sess.global_step(), 0);
    assert_eq!(values(&m, sess.session()), at_step(0));
    for _ in 0..10 {
        sess.run(&[], &[], &[&m.train]).unwrap();
    }
    sess.close().unwrap();
    assert_eq!(state_file(&dir.0), state_listing(&["model.ckpt-10"]));
    // and that checkpoint restores, without the option
    assert_eq!(
        run(&dir.0, &cfg, 0),
        (Some(dir.0.join("model.ckpt-10")), 10)
    );
}

#[test]
fn a_save_deletes_the_temporaries_of_killed_saves_and_nothing_else() {
    let dir = TempDir::new("stale");
    let m = counter();
    let saver = Saver::new(&m.scope).unwrap();
    let sess = Session::new(&m.scope.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[&m.init]).unwrap();
    // Writers killed mid-save: a process that has exited, and a pid no process
    // can have (above Linux's limit of 2^22).
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--list")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let exited = child.id();
    child.wait().unwrap();
    let gone = 4_194_305u32;
    let me = std::process::id();
    let stale = [
        format!(".model.ckpt-2.index.tmp-{exited}-0"),
        format!(".model.ckpt-3.data-00000-of-00001.tmp-{gone}-0"),
        format!(".model.ckpt-4.index.tmp-{gone}-3"),
        format!(".model.ckpt-4.meta.tmp-{gone}-2"),
        format!(".checkpoint.tmp-{gone}-1"),
    ];
    let others = [
        // this process's own (a save of another thread may be writing it)
        format!(".model.ckpt-3.index.tmp-{me}-0"),
        // not a temporary of this saver's files
        format!(".other.ckpt-3.index.tmp-{gone}-0"),
        format!(".model.ckpt.bak.tmp-{gone}-0"),
        format!(".model.ckpt-3.tmp-{gone}-0"),
        // not our temporary-name pattern
        format!("model.ckpt-3.index.tmp-{gone}-0"),
        format!(".model.ckpt-3.index.tmp-{gone}-0.keep"),
        format!(".model.ckpt-3.index.tmp-{gone}"),
        "notes.txt".to_owned(),
    ];
    // old enough to count as abandoned even where no /proc says the writer is gone
    let old = SystemTime::now() - Duration::from_secs(3600);
    for (i, name) in stale.iter().chain(&others).enumerate() {
        let mut f = std::fs::File::create(dir.0.join(name)).unwrap();
        f.write_all(format!("partial write {i}").as_bytes())
            .unwrap();
        f.set_modified(old).unwrap();
    }
    sess.run(&[], &[], &[&m.train]).unwrap();
    let path = saver
        .save(&sess, dir.0.join("model.ckpt"), Some(1))
        .unwrap();
    let mut want: Vec<String> = others.to_vec();
    want.extend(state_and_bundles(&["model.ckpt-1"]));
    want.sort();
    assert_eq!(files(&dir.0), want);
    for (i, name) in stale.iter().chain(&others).enumerate().skip(stale.len()) {
        assert_eq!(
            std::fs::read_to_string(dir.0.join(name)).unwrap(),
            format!("partial write {i}"),
            "{name} untouched"
        );
    }
    // the checkpoint saved is whole
    let fresh = Session::new(&m.scope.graph_def(), SessionOptions::default()).unwrap();
    saver.restore(&fresh, &path).unwrap();
    assert_eq!(values(&m, &fresh), at_step(1));
}
