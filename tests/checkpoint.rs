//! Checkpoints end to end: a `Saver` round-trips variables of many dtypes and
//! shapes bit-exactly into a fresh session, keeps the newest N, finds the latest
//! after a restart, and turns every kind of damage or mismatch into a clear error
//! without ever losing the previous checkpoint.

use std::path::{Path, PathBuf};

use actorflow::graph::{bf16, f16};
use actorflow::train::{self, Saver, SaverOptions, VarRef};
use actorflow::{ops, Code, DType, Operation, Output, Scope, Session, SessionOptions, Tensor};

/// An empty directory of its own, removed when the guard drops (a panic too).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("actorflow-checkpoint-{name}-"))
        .tempdir()
        .unwrap()
}

fn files(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The files of the bundles (TensorFlow's checkpoint V2) at these prefixes.
/// The files of the Saver's checkpoints at `prefixes`: the bundle and the
/// `.meta` graph, in name order.
fn bundles(prefixes: &[&str]) -> Vec<String> {
    prefixes
        .iter()
        .flat_map(|p| {
            [
                format!("{p}.data-00000-of-00001"),
                format!("{p}.index"),
                format!("{p}.meta"),
            ]
        })
        .collect()
}

fn session(s: &Scope) -> Session {
    Session::new(&s.graph_def(), SessionOptions::default()).unwrap()
}

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype()
        && a.shape() == b.shape()
        && if a.dtype() == DType::String {
            a.as_strings().unwrap() == b.as_strings().unwrap()
        } else {
            a.as_bytes().unwrap() == b.as_bytes().unwrap()
        }
}

/// A graph with variables of many dtypes and shapes (reference and resource),
/// the ops that set them to "trained" values, and the reads of their values.
struct Model {
    scope: Scope,
    init: Operation,
    train: Operation,
    reads: Vec<(String, Output, Tensor)>,
}

fn model() -> Model {
    let s = Scope::new();
    let cases: Vec<(&str, Tensor, Tensor, bool)> = vec![
        (
            "dense/w",
            Tensor::new(&[2, 3], vec![0.0f32; 6]).unwrap(),
            Tensor::new(
                &[2, 3],
                vec![1.5f32, -0.0, f32::MIN_POSITIVE, 3e38, -7.25, 1e-40],
            )
            .unwrap(),
            false,
        ),
        (
            "scale",
            Tensor::scalar(0.0f64),
            Tensor::scalar(std::f64::consts::PI),
            false,
        ),
        (
            "counts",
            Tensor::vector(&[0i64; 3]),
            Tensor::vector(&[i64::MIN, -1, i64::MAX]),
            false,
        ),
        (
            "grid",
            Tensor::new(&[2, 2, 2], vec![0i32; 8]).unwrap(),
            Tensor::new(&[2, 2, 2], (0..8).map(|i| i * 1000 - 3).collect()).unwrap(),
            false,
        ),
        (
            "mask",
            Tensor::vector(&[false; 4]),
            Tensor::vector(&[true, false, false, true]),
            false,
        ),
        (
            "pixels",
            Tensor::new(&[1, 3], vec![0u8; 3]).unwrap(),
            Tensor::new(&[1, 3], vec![0u8, 128, 255]).unwrap(),
            false,
        ),
        (
            "half",
            Tensor::vector(&[f16::from_f32(0.0); 2]),
            Tensor::vector(&[f16::from_f32(1.5), f16::from_f32(-65504.0)]),
            false,
        ),
        (
            "brain",
            Tensor::vector(&[bf16::from_f32(0.0)]),
            Tensor::vector(&[bf16::from_f32(-2.5)]),
            false,
        ),
        (
            "empty",
            Tensor::new(&[0, 4], Vec::<f32>::new()).unwrap(),
            Tensor::new(&[0, 4], Vec::<f32>::new()).unwrap(),
            false,
        ),
        (
            "res/table",
            Tensor::new(&[3, 2], vec![0.0f64; 6]).unwrap(),
            Tensor::new(&[3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, f64::NAN]).unwrap(),
            true,
        ),
        (
            "res/step",
            Tensor::scalar(0i64),
            Tensor::scalar(77i64),
            true,
        ),
    ];
    let mut sets = Vec::new();
    let mut reads = Vec::new();
    for (name, init, trained, resource) in cases {
        let c = ops::constant(&s, init).unwrap();
        let t = ops::constant(&s, trained.clone()).unwrap();
        let (var, value) = if resource {
            let v = ops::ResourceVariable::new(&s, name, &c, true).unwrap();
            (VarRef::from(&v), v.value)
        } else {
            let v = ops::Variable::new(&s, name, &c, true).unwrap();
            (VarRef::from(&v), v.value)
        };
        sets.push(var.assign(&s, &t).unwrap());
        reads.push((name.to_owned(), value, trained));
    }
    let init = train::global_variables_initializer(&s).unwrap();
    let refs: Vec<&Operation> = sets.iter().collect();
    let train = ops::group(&s, &refs).unwrap();
    Model {
        scope: s,
        init,
        train,
        reads,
    }
}

fn read_all(sess: &Session, m: &Model) -> Vec<Tensor> {
    let names: Vec<String> = m.reads.iter().map(|(_, o, _)| o.name()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    sess.run(&[], &refs, &[]).unwrap()
}

#[test]
fn round_trip_into_a_fresh_session_is_bit_exact() {
    let tmp = scratch("roundtrip");
    let dir = tmp.path();
    let m = model();
    let saver = Saver::new(&m.scope).unwrap();
    assert_eq!(saver.variables().len(), m.reads.len());
    let sess = session(&m.scope);
    sess.run(&[], &[], &[m.init.name(), m.train.name()])
        .unwrap();
    let path = saver
        .save(&sess, dir.join("model.ckpt"), Some(100))
        .unwrap();
    assert_eq!(path, dir.join("model.ckpt-100"));
    // the checkpoint lists every variable with its dtype and shape
    let index = train::read_index(&path).unwrap();
    for (name, _, t) in &m.reads {
        let info = index.iter().find(|i| &i.name == name).unwrap();
        assert_eq!((info.dtype, &info.shape), (t.dtype(), t.shape()), "{name}");
    }
    // a fresh session over the same graph, never initialised
    let fresh = session(&m.scope);
    saver.restore(&fresh, &path).unwrap();
    for ((name, _, want), got) in m.reads.iter().zip(read_all(&fresh, &m)) {
        assert!(same_bits(&got, want), "{name}: {got:?} != {want:?}");
    }
    // and back over values that have moved on
    sess.run(&[], &[], &[m.init.name()]).unwrap();
    saver.restore(&sess, &path).unwrap();
    for ((name, _, want), got) in m.reads.iter().zip(read_all(&sess, &m)) {
        assert!(same_bits(&got, want), "{name}");
    }
}

#[test]
fn chosen_variables_only() {
    let tmp = scratch("chosen");
    let dir = tmp.path();
    let m = model();
    let some: Vec<VarRef> = train::global_variables(&m.scope)
        .unwrap()
        .into_iter()
        .filter(|v| v.name().starts_with("res/"))
        .collect();
    let saver = Saver::with_options(
        &m.scope,
        SaverOptions {
            var_list: Some(some),
            ..Default::default()
        },
    )
    .unwrap();
    let sess = session(&m.scope);
    sess.run(&[], &[], &[m.init.name(), m.train.name()])
        .unwrap();
    let path = saver.save(&sess, dir.join("part"), None).unwrap();
    let names: Vec<String> = train::read_index(&path)
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["res/step", "res/table"]);
}

/// A small model: one float variable and the global step, with a train op that
/// bumps both.
fn counter_model() -> (Scope, Operation, Operation, Output, Output) {
    let s = Scope::new();
    let w0 = ops::constant(&s, Tensor::vector(&[0.0f32, 0.0])).unwrap();
    let w = ops::Variable::new(&s, "w", &w0, true).unwrap();
    let step = train::get_or_create_global_step(&s).unwrap();
    let one = ops::constant(&s, Tensor::vector(&[1.0f32, 1.0])).unwrap();
    let bump = ops::assign_add(&s, &w.var, &one).unwrap();
    let g1 = ops::scalar(&s, 1i64).unwrap();
    let tick = step.assign_add(&s, &g1).unwrap();
    let train_op = ops::group(&s, &[bump.op(), &tick]).unwrap();
    let init = train::global_variables_initializer(&s).unwrap();
    let step_value = step.read(&s).unwrap();
    (s, init, train_op, w.value, step_value)
}

#[test]
fn keeps_the_newest_n_and_resumes_after_a_restart() {
    let tmp = scratch("keep");
    let dir = tmp.path();
    let (s, init, train_op, w, step) = counter_model();
    let saver = Saver::with_options(
        &s,
        SaverOptions {
            max_to_keep: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let sess = session(&s);
    sess.run(&[], &[], &[init.name()]).unwrap();
    let prefix = dir.join("model.ckpt");
    for i in 1..=4i64 {
        sess.run(&[], &[], &[train_op.name()]).unwrap();
        saver.save(&sess, &prefix, Some(i)).unwrap();
    }
    assert_eq!(
        files(dir),
        [
            &["checkpoint".to_string()][..],
            &bundles(&["model.ckpt-3", "model.ckpt-4"])
        ]
        .concat(),
        "older checkpoints are deleted"
    );
    assert_eq!(
        saver.last_checkpoints(),
        [dir.join("model.ckpt-3"), dir.join("model.ckpt-4")]
    );
    // the state file is TensorFlow's text format with paths relative to the dir
    let text = std::fs::read_to_string(dir.join("checkpoint")).unwrap();
    assert_eq!(
        text,
        "model_checkpoint_path: \"model.ckpt-4\"\n\
         all_model_checkpoint_paths: \"model.ckpt-3\"\n\
         all_model_checkpoint_paths: \"model.ckpt-4\"\n"
    );
    let state = train::get_checkpoint_state(dir).unwrap().unwrap();
    assert_eq!(state.model_checkpoint_path, dir.join("model.ckpt-4"));
    // a restarted process: a new graph and session find and restore the latest
    let (s2, _init2, train2, w2, step2) = counter_model();
    let saver2 = Saver::with_options(
        &s2,
        SaverOptions {
            max_to_keep: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let sess2 = session(&s2);
    let latest = train::latest_checkpoint(dir).unwrap().unwrap();
    assert_eq!(latest, dir.join("model.ckpt-4"));
    saver2.restore(&sess2, &latest).unwrap();
    let out = sess2.run(&[], &[&w2.name(), &step2.name()], &[]).unwrap();
    assert_eq!(out[0], Tensor::vector(&[4.0f32, 4.0]));
    assert_eq!(out[1], Tensor::scalar(4i64));
    assert_eq!(
        sess.run(&[], &[&w.name(), &step.name()], &[]).unwrap(),
        out,
        "the same values as the first process"
    );
    // adopting the recorded checkpoints, it goes on deleting the oldest
    saver2.recover_last_checkpoints(&state.all_model_checkpoint_paths);
    sess2.run(&[], &[], &[train2.name()]).unwrap();
    saver2.save(&sess2, &prefix, Some(5)).unwrap();
    assert_eq!(
        files(dir),
        [
            &["checkpoint".to_string()][..],
            &bundles(&["model.ckpt-4", "model.ckpt-5"])
        ]
        .concat()
    );
    // no state file, or one pointing at a deleted checkpoint: no latest
    assert_eq!(train::latest_checkpoint(dir.join("nowhere")).unwrap(), None);
    std::fs::remove_file(dir.join("model.ckpt-5.index")).unwrap();
    assert_eq!(train::latest_checkpoint(dir).unwrap(), None);
}

#[test]
fn damaged_checkpoints_are_data_loss_naming_the_file() {
    let tmp = scratch("damaged");
    let dir = tmp.path();
    let (s, init, train_op, _, _) = counter_model();
    let saver = Saver::new(&s).unwrap();
    let sess = session(&s);
    sess.run(&[], &[], &[init.name(), train_op.name()]).unwrap();
    let path = saver.save(&sess, dir.join("model.ckpt"), Some(1)).unwrap();
    let read = |p: &Path, ext: &str| std::fs::read(format!("{}{ext}", p.display())).unwrap();
    let (index, data) = (read(&path, ".index"), read(&path, ".data-00000-of-00001"));
    let fresh = session(&s);
    let bad = dir.join("bad.ckpt");
    // Damage to the index (its blocks, the footer's handles and magic) or to the
    // data shard.
    let footer = index.len() - 48;
    let mut cases: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    for n in [1, 30, index.len() / 2, index.len() - 1] {
        cases.push((
            format!("index cut to {n}"),
            index[..n].to_vec(),
            data.clone(),
        ));
    }
    for i in [0, 9, footer / 2, footer - 3, footer, index.len() - 1] {
        let mut b = index.clone();
        b[i] ^= 0x10;
        cases.push((format!("index bit flip at {i}"), b, data.clone()));
    }
    cases.push((
        "data cut".into(),
        index.clone(),
        data[..data.len() / 2].to_vec(),
    ));
    for i in [0, data.len() / 2, data.len() - 1] {
        let mut b = data.clone();
        b[i] ^= 0x10;
        cases.push((format!("data bit flip at {i}"), index.clone(), b));
    }
    for (what, index, data) in cases {
        std::fs::write(format!("{}.index", bad.display()), &index).unwrap();
        std::fs::write(format!("{}.data-00000-of-00001", bad.display()), &data).unwrap();
        let e = saver.restore(&fresh, &bad).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{what}: {e}");
        assert!(
            e.message().contains(&bad.display().to_string()),
            "{what}: {e}"
        );
    }
    // a missing checkpoint is NotFound
    let e = saver.restore(&fresh, dir.join("missing")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // the good one still restores, and the session is usable after the errors
    saver.restore(&fresh, &path).unwrap();
}

#[test]
fn a_failed_save_leaves_the_previous_checkpoint_intact() {
    let tmp = scratch("failed");
    let dir = tmp.path();
    let (s, init, train_op, w, _) = counter_model();
    let saver = Saver::new(&s).unwrap();
    let sess = session(&s);
    sess.run(&[], &[], &[init.name(), train_op.name()]).unwrap();
    let prefix = dir.join("model.ckpt");
    let first = saver.save(&sess, &prefix, Some(1)).unwrap();
    let first_files = bundles(&["model.ckpt-1"]);
    let first_bytes: Vec<Vec<u8>> = first_files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    let state_before = std::fs::read(dir.join("checkpoint")).unwrap();
    sess.run(&[], &[], &[train_op.name()]).unwrap();
    // 1. the data shard's path is taken by a directory: the write completes,
    //    the rename fails
    std::fs::create_dir(dir.join("model.ckpt-2.data-00000-of-00001")).unwrap();
    let e = saver.save(&sess, &prefix, Some(2)).unwrap_err();
    assert!(e.message().contains("model.ckpt-2"), "{e}");
    // 2. the directory cannot be made (a file is in the way), as an unwritable
    //    directory would fail
    std::fs::write(dir.join("blocker"), b"a file").unwrap();
    let e = saver
        .save(&sess, dir.join("blocker/model.ckpt"), Some(2))
        .unwrap_err();
    assert!(e.message().contains("blocker"), "{e}");
    // 3. a save killed mid-way leaves only a stray temporary file behind
    std::fs::write(
        dir.join(".model.ckpt-3.index.tmp-999-0"),
        &first_bytes[1][..40],
    )
    .unwrap();
    // the previous checkpoint and the state file are untouched and still load
    for (f, b) in first_files.iter().zip(&first_bytes) {
        assert_eq!(&std::fs::read(dir.join(f)).unwrap(), b, "{f}");
    }
    assert_eq!(std::fs::read(dir.join("checkpoint")).unwrap(), state_before);
    assert_eq!(saver.last_checkpoints(), std::slice::from_ref(&first));
    assert_eq!(train::latest_checkpoint(dir).unwrap(), Some(first.clone()));
    assert_eq!(
        files(dir),
        [
            ".model.ckpt-3.index.tmp-999-0",
            "blocker",
            "checkpoint",
            "model.ckpt-1.data-00000-of-00001",
            "model.ckpt-1.index",
            "model.ckpt-1.meta",
            "model.ckpt-2.data-00000-of-00001"
        ]
    );
    let fresh = session(&s);
    saver.restore(&fresh, &first).unwrap();
    assert_eq!(
        fresh.run(&[], &[&w.name()], &[]).unwrap()[0],
        Tensor::vector(&[1.0f32, 1.0])
    );
}

#[test]
fn a_mismatched_variable_is_a_clear_error() {
    let tmp = scratch("mismatch");
    let dir = tmp.path();
    let (s, init, _, _, _) = counter_model();
    let saver = Saver::new(&s).unwrap();
    let sess = session(&s);
    sess.run(&[], &[], &[init.name()]).unwrap();
    let path = saver.save(&sess, dir.join("model.ckpt"), None).unwrap();
    let other = |t: Tensor| {
        let s = Scope::new();
        let c = ops::constant(&s, t).unwrap();
        ops::Variable::new(&s, "w", &c, true).unwrap();
        let saver = Saver::new(&s).unwrap();
        let sess = session(&s);
        saver.restore(&sess, &path).unwrap_err()
    };
    let e = other(Tensor::vector(&[0.0f32; 3]));
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("shape [3]"), "{e}");
    assert!(e.message().contains("'w'"), "{e}");
    let e = other(Tensor::vector(&[0.0f64; 2]));
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("float64"), "{e}");
    // a variable the checkpoint does not have
    let s2 = Scope::new();
    let c = ops::scalar(&s2, 1.0f32).unwrap();
    ops::Variable::new(&s2, "unknown", &c, true).unwrap();
    let e = Saver::new(&s2)
        .unwrap()
        .restore(&session(&s2), &path)
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("unknown"), "{e}");
    // a saver with nothing to save
    assert_eq!(
        Saver::new(&Scope::new()).unwrap_err().code(),
        Code::InvalidArgument
    );
}

/// The child side of `a_killed_save_leaves_a_loadable_checkpoint`: with
/// `ACTORFLOW_SAVE_LOOP_DIR` set, saves a 4 MB variable (every element the step
/// number) over and over until killed; otherwise does nothing.
#[test]
fn save_loop_child() {
    let Some(dir) = std::env::var_os("ACTORFLOW_SAVE_LOOP_DIR") else {
        return;
    };
    let (s, fill, _, step) = big_model();
    let saver = Saver::with_options(
        &s,
        SaverOptions {
            max_to_keep: 3,
            ..Default::default()
        },
    )
    .unwrap();
    let sess = session(&s);
    let prefix = PathBuf::from(dir).join("model.ckpt");
    for i in 1.. {
        sess.run(
            &[(&step.name(), Tensor::scalar(i as f32))],
            &[],
            &[fill.name()],
        )
        .unwrap();
        saver.save(&sess, &prefix, Some(i)).unwrap();
    }
}

/// A variable `big` of 2^20 floats and an op filling it with the fed `step`.
fn big_model() -> (Scope, Operation, Output, Output) {
    let s = Scope::new();
    let zeros = ops::constant(&s, Tensor::zeros(DType::F32, [1usize << 20].as_slice())).unwrap();
    let big = ops::Variable::new(&s, "big", &zeros, true).unwrap();
    let step = ops::placeholder(&s, DType::F32, actorflow::Shape::scalar()).unwrap();
    let filled = ops::fill_to(&s, &[1 << 20], &step).unwrap();
    let fill = ops::assign(&s, &big.var, &filled).unwrap();
    (s, fill.op().clone(), big.value, step)
}

/// Kills and reaps the child when dropped (a panicking test's too), so it has
/// stopped writing before the directory it writes into is removed.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_killed_save_leaves_a_loadable_checkpoint() {
    let tmp = scratch("killed");
    let dir = tmp.path();
    // declared after `tmp`, so dropped (the child killed) before it
    let mut child = KillOnDrop(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "save_loop_child", "--test-threads=1"])
            .env("ACTORFLOW_SAVE_LOOP_DIR", dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // wait for a few saves, then kill it wherever it is (SIGKILL on Unix)
    let started = std::time::Instant::now();
    while !matches!(
        train::get_checkpoint_state(dir),
        Ok(Some(st)) if st.all_model_checkpoint_paths.len() >= 2
    ) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the child never saved"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(37));
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // the latest checkpoint loads, whole: every element is its step
    let (s, _, big, _) = big_model();
    let saver = Saver::new(&s).unwrap();
    let latest = train::latest_checkpoint(dir).unwrap().unwrap();
    let sess = session(&s);
    saver.restore(&sess, &latest).unwrap();
    let v = sess.run(&[], &[&big.name()], &[]).unwrap()[0].clone();
    let v = v.as_slice::<f32>().unwrap();
    let step: f32 = latest
        .to_string_lossy()
        .rsplit('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        v.iter().all(|&x| x == step),
        "checkpoint {} is mixed",
        latest.display()
    );
    // and so does every other checkpoint left (temporary files aside)
    for f in files(dir) {
        if let Some(prefix) = f.strip_suffix(".index") {
            let r = train::CheckpointReader::open(dir.join(prefix)).unwrap();
            r.tensor("big").unwrap();
        } else if f.starts_with("model.ckpt-") {
            // A data shard (a killed save may leave one whose index it never
            // wrote) or a checkpoint's graph.
            assert!(
                f.ends_with(".data-00000-of-00001") || f.ends_with(".meta"),
                "stray file {f}"
            );
        } else {
            assert!(f == "checkpoint" || f.starts_with('.'), "stray file {f}");
        }
    }
    // the next save into the directory deletes the temporary file the killed
    // save may have left
    saver
        .save(&sess, dir.join("model.ckpt"), Some(step as i64 + 1))
        .unwrap();
    let left: Vec<String> = files(dir)
        .into_iter()
        .filter(|f| f.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}
