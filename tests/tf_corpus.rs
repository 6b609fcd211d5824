//! Runs every TensorFlow graph in `tests/fixtures/tf_corpus/` and compares actorflow's
//! answers with TensorFlow's.
//!
//! `scripts/gen_tf_corpus.py` built each graph with `tf.compat.v1` (control flow v1),
//! ran it in TensorFlow and wrote, per fixture directory, `graph.pb`, the feeds and
//! TensorFlow's outputs as `.npy`, and a `manifest.json` saying how to run it: `init`
//! targets (each its own step), then `steps` runs of the step (`feeds`, `fetches`,
//! `targets`), comparing the last; then, if the manifest names `after` tensors, one
//! more step fetching them (numbered after the fetches). Integers and booleans must
//! match exactly; floats within the manifest's per-dtype `rtol`/`atol`
//! (`|a - e| <= atol + rtol * |e|`), with NaN matching NaN and infinities matching
//! exactly.
//!
//! Placement independence: the corpus, and the graphs `tests/tf_export.rs` exports,
//! also run spread over 2, 3 and 4 devices by the cost model and over 3 devices by a
//! seeded random placer, each run bounded by the runtime's own deadline.
//!
//! Every fixture runs (a panic is caught and counted as a failure), and the test fails
//! once, listing every failing fixture. A fixture whose manifest carries
//! `known_failure` is run and reported but does not fail the test.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;

use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::{npy, Session, SessionOptions, Tensor};
use serde::Deserialize;

/// Relative and absolute tolerance of one floating dtype.
#[derive(Clone, Copy, Debug, Deserialize)]
struct Tolerance {
    rtol: f64,
    atol: f64,
}

/// A fixture's `manifest.json`.
#[derive(Debug, Deserialize)]
struct Manifest {
    feeds: BTreeMap<String, String>,
    fetches: Vec<String>,
    #[serde(default)]
    init: Vec<String>,
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default = "one")]
    steps: usize,
    #[serde(default)]
    after: Vec<String>,
    tolerance: BTreeMap<String, Tolerance>,
    #[serde(default)]
    known_failure: Option<String>,
}

fn one() -> usize {
    1
}

/// A directory of fixtures in the manifest format: TensorFlow's graphs with
/// TensorFlow's answers (`out_<i>.npy`), or actorflow's exported graphs with the
/// answers `scripts/check_tf_export.py` confirms in TensorFlow (`want_<i>.npy`, see
/// `tests/tf_export.rs`).
#[derive(Clone, Copy, Debug)]
struct Corpus {
    dir: &'static str,
    answers: &'static str,
    at_least: usize,
}

const TF_CORPUS: Corpus = Corpus {
    dir: "tests/fixtures/tf_corpus",
    answers: "out",
    at_least: 40,
};

const TF_EXPORT: Corpus = Corpus {
    dir: "tests/fixtures/tf_export",
    answers: "want",
    at_least: 7,
};

/// Compares one fetched tensor with TensorFlow's; `Err` says how they differ.
fn compare(got: &Tensor, want: &Tensor, tol: &BTreeMap<String, Tolerance>) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!(
            "dtype {} where TensorFlow has {}",
            got.dtype().name(),
            want.dtype().name()
        ));
    }
    if got.dims() != want.dims() {
        return Err(format!(
            "shape {:?} where TensorFlow has {:?}",
            got.dims(),
            want.dims()
        ));
    }
    let dtype = want.dtype();
    if !dtype.is_float() {
        if got == want {
            return Ok(());
        }
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        let at = g
            .as_ref()
            .zip(w.as_ref())
            .and_then(|(g, w)| g.iter().zip(w).position(|(a, b)| a != b));
        return Err(match (at, g, w) {
            (Some(i), Some(g), Some(w)) => {
                format!("element {i} is {} where TensorFlow has {}", g[i], w[i])
            }
            _ => format!("got {got:?}, TensorFlow has {want:?}"),
        });
    }
    let t = tol.get(dtype.name()).copied().ok_or_else(|| {
        format!(
            "the manifest states no tolerance for {} outputs",
            dtype.name()
        )
    })?;
    let (g, w) = match (got.to_f64_vec(), want.to_f64_vec()) {
        (Some(g), Some(w)) => (g, w),
        _ => return Err("float tensors without float elements".into()),
    };
    for (i, (&a, &e)) in g.iter().zip(&w).enumerate() {
        let ok = if e.is_nan() || a.is_nan() {
            e.is_nan() && a.is_nan()
        } else if e.is_infinite() || a.is_infinite() {
            a == e
        } else {
            (a - e).abs() <= t.atol + t.rtol * e.abs()
        };
        if !ok {
            return Err(format!(
                "element {i} is {a} where TensorFlow has {e} (rtol {}, atol {})",
                t.rtol, t.atol
            ));
        }
    }
    Ok(())
}

/// How a fixture's session spreads the graph: over how many devices, by the cost
/// model or a seeded random placer, and whether it schedules its receives
/// (`enable_recv_scheduling`).
#[derive(Clone, Copy, Debug)]
struct Layout {
    devices: usize,
    random_seed: Option<u64>,
    recv_scheduling: bool,
}

const ONE_DEVICE: Layout = Layout {
    devices: 1,
    random_seed: None,
    recv_scheduling: false,
};

/// Runs one fixture; `Err` lists what went wrong.
fn run_fixture(dir: &Path, answers: &str, layout: Layout) -> Result<(), String> {
    let text = std::fs::read_to_string(dir.join("manifest.json"))
        .map_err(|e| format!("reading manifest.json: {e}"))?;
    let m: Manifest =
        serde_json::from_str(&text).map_err(|e| format!("parsing manifest.json: {e}"))?;
    let graph = load_graph_def(&dir.join("graph.pb"), &ImportOptions::default())
        .map_err(|e| format!("import: {e}"))?;
    // The deadline is the runtime's own: a placement that hung a loop fails here.
    let options = SessionOptions::default()
        .with_default_timeout(Duration::from_secs(60))
        .with_cpu_devices(layout.devices)
        .with_random_placement_seed(layout.random_seed)
        .with_enable_recv_scheduling(layout.recv_scheduling);
    let sess = Session::new(&graph, options).map_err(|e| format!("session: {e}"))?;
    let result = run_steps(&sess, dir, answers, &m);
    let _ = sess.close();
    result
}

fn run_steps(sess: &Session, dir: &Path, answers: &str, m: &Manifest) -> Result<(), String> {
    for target in &m.init {
        sess.run(&[], &[], &[target])
            .map_err(|e| format!("init target {target}: {e}"))?;
    }
    let mut feeds = Vec::new();
    for (name, file) in &m.feeds {
        let t = npy::read_npy(dir.join(file)).map_err(|e| format!("reading {file}: {e}"))?;
        feeds.push((name.as_str(), t));
    }
    let fetches: Vec<&str> = m.fetches.iter().map(String::as_str).collect();
    let targets: Vec<&str> = m.targets.iter().map(String::as_str).collect();
    let mut outputs = Vec::new();
    for step in 0..m.steps.max(1) {
        outputs = sess
            .run(&feeds, &fetches, &targets)
            .map_err(|e| format!("step {step}: {e}"))?;
    }
    if !m.after.is_empty() {
        let after: Vec<&str> = m.after.iter().map(String::as_str).collect();
        outputs.extend(
            sess.run(&[], &after, &[])
                .map_err(|e| format!("fetching {after:?} after the steps: {e}"))?,
        );
    }
    let names = m.fetches.iter().chain(&m.after);
    let mut problems = Vec::new();
    for (i, (name, got)) in names.zip(&outputs).enumerate() {
        let file = format!("{answers}_{i}.npy");
        let want = npy::read_npy(dir.join(&file)).map_err(|e| format!("reading {file}: {e}"))?;
        if let Err(why) = compare(got, &want, &m.tolerance) {
            problems.push(format!("fetch {i} ({name}): {why}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

#[test]
fn every_fixture_matches_tensorflow() {
    check_corpus(TF_CORPUS, &[ONE_DEVICE]);
}

/// Placement independence: the same answers whatever devices the placer spreads a
/// graph over (loops, conds, gradients of loops and stateful nodes included), for
/// TensorFlow's graphs and for the graphs actorflow exports; half the layouts also
/// schedule their receives, which must change no answer either.
#[test]
fn every_fixture_matches_tensorflow_on_any_placement() {
    let mut layouts: Vec<Layout> = (2..=4)
        .map(|devices| Layout {
            devices,
            random_seed: None,
            recv_scheduling: devices == 4,
        })
        .collect();
    layouts.extend((1..=4).map(|seed| Layout {
        devices: 3,
        random_seed: Some(seed),
        recv_scheduling: seed % 2 == 0,
    }));
    check_corpus(TF_CORPUS, &layouts);
    check_corpus(TF_EXPORT, &layouts);
}

fn check_corpus(corpus: Corpus, layouts: &[Layout]) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(corpus.dir);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the corpus directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= corpus.at_least,
        "only {} fixtures in {}",
        dirs.len(),
        corpus.dir
    );
    let only = std::env::var("TF_CORPUS_ONLY").ok();
    let (mut passed, mut failed, mut known) = (Vec::new(), Vec::new(), Vec::new());
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let known_failure = std::fs::read_to_string(dir.join("manifest.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Manifest>(&t).ok())
            .and_then(|m| m.known_failure);
        let outcome = layouts.iter().try_for_each(|&layout| {
            catch_unwind(AssertUnwindSafe(|| {
                run_fixture(dir, corpus.answers, layout)
            }))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(p))))
            .map_err(|e| format!("{layout:?}: {e}"))
        });
        match (outcome, known_failure) {
            (Ok(()), None) => passed.push(name),
            (Ok(()), Some(reason)) => {
                eprintln!("{name}: passes, but is marked known_failure ({reason})");
                passed.push(name);
            }
            (Err(e), Some(reason)) => known.push(format!("{name}: {reason} [{e}]")),
            (Err(e), None) => failed.push(format!("{name}: {e}")),
        }
    }
    eprintln!(
        "{}: {} passed, {} known failures, {} failed",
        corpus.dir,
        passed.len(),
        known.len(),
        failed.len()
    );
    for k in &known {
        eprintln!("known failure: {k}");
    }
    assert!(
        failed.is_empty(),
        "{} of {} fixtures differ from TensorFlow:\n{}",
        failed.len(),
        passed.len() + failed.len() + known.len(),
        failed.join("\n")
    );
}

#[test]
fn float_comparison_rules() {
    let tol: BTreeMap<String, Tolerance> = [(
        "float32".to_string(),
        Tolerance {
            rtol: 1e-5,
            atol: 1e-6,
        },
    )]
    .into_iter()
    .collect();
    let v = |x: &[f32]| Tensor::vector(x);
    assert!(compare(&v(&[f32::NAN, 1.0]), &v(&[f32::NAN, 1.000_001]), &tol).is_ok());
    assert!(compare(&v(&[1.0]), &v(&[f32::NAN]), &tol).is_err());
    assert!(compare(&v(&[f32::INFINITY]), &v(&[f32::NEG_INFINITY]), &tol).is_err());
    assert!(compare(&v(&[1.0]), &v(&[1.001]), &tol).is_err());
    assert!(compare(&Tensor::vector(&[1i32]), &Tensor::vector(&[2i32]), &tol).is_err());
    assert!(compare(&Tensor::vector(&[1.0f64]), &Tensor::vector(&[1.0f64]), &tol).is_err());
    assert!(compare(&v(&[1.0, 2.0]), &v(&[1.0]), &tol).is_err());
}
