//! The graph optimizations (constant folding and common subexpression
//! elimination, `SessionOptions::optimizer`; the remapper's fusions,
//! `SessionOptions::rewrite_options`) change no answer: every graph fixture of
//! the repository that can be run generically runs twice, in a session with the
//! optimizations on (TensorFlow's defaults) and in one with them all off, and the
//! two must agree.
//!
//! The fixtures:
//! - the manifest corpora `tests/fixtures/tf_corpus` (TensorFlow's graphs) and
//!   `tests/fixtures/tf_export` (actorflow's exported graphs), in the format
//!   `tests/tf_corpus.rs` documents: `init` targets, `steps` runs of the step,
//!   `after` fetches;
//! - `kernels/tests/fixtures/*_graph.pb` with their `*_graph.json` (feeds,
//!   fetches; string values hex), as `tests/parse_example_graph.rs` runs them.
//!
//! Agreement: the same dtypes and shapes; integers, booleans and strings equal;
//! floats bit for bit, or within the manifest's tolerance where it states one (a
//! kernel may sum in another order); or both runs failing with the same code.
//! Comparing with TensorFlow's answers is `tests/tf_corpus.rs`'s job. The test
//! also checks that the optimizations did change a good share of the graphs, so
//! that the agreement means something.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Duration;

use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::{
    npy, Code, GraphDef, OptimizerOptions, RewriterConfig, Session, SessionOptions, Tensor,
};
use serde::Deserialize;
use serde_json::Value;

/// Relative and absolute tolerance of one floating dtype.
#[derive(Clone, Copy, Debug, Deserialize)]
struct Tolerance {
    rtol: f64,
    atol: f64,
}

/// A fixture's `manifest.json` (see `tests/tf_corpus.rs`).
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
    #[serde(default)]
    tolerance: BTreeMap<String, Tolerance>,
}

fn one() -> usize {
    1
}

/// One generic fixture: a graph and the runs to make on it.
struct Fixture {
    name: String,
    graph: GraphDef,
    init: Vec<String>,
    feeds: Vec<(String, Tensor)>,
    fetches: Vec<String>,
    targets: Vec<String>,
    steps: usize,
    after: Vec<String>,
    tolerance: BTreeMap<String, Tolerance>,
}

/// What one session gave: the fetched values, or the error's code and message;
/// and whether the optimizations changed the step.
struct Outcome {
    result: Result<Vec<Tensor>, (Code, String)>,
    optimized: bool,
}

fn run(f: &Fixture, optimizer: OptimizerOptions, rewriter: RewriterConfig) -> Outcome {
    let options = SessionOptions::default()
        .with_default_timeout(Duration::from_secs(60))
        .with_optimizer(optimizer)
        .with_rewrite_options(rewriter);
    let sess = match Session::new(&f.graph, options) {
        Ok(s) => s,
        Err(e) => {
            return Outcome {
                result: Err((e.code(), e.to_string())),
                optimized: false,
            }
        }
    };
    let feeds: Vec<(&str, Tensor)> = f
        .feeds
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let fetches: Vec<&str> = f.fetches.iter().map(String::as_str).collect();
    let targets: Vec<&str> = f.targets.iter().map(String::as_str).collect();
    let steps = || -> actorflow::Result<Vec<Tensor>> {
        for t in &f.init {
            sess.run(&[], &[], &[t])?;
        }
        let mut out = Vec::new();
        for _ in 0..f.steps.max(1) {
            out = sess.run(&feeds, &fetches, &targets)?;
        }
        if !f.after.is_empty() {
            let after: Vec<&str> = f.after.iter().map(String::as_str).collect();
            out.extend(sess.run(&[], &after, &[])?);
        }
        Ok(out)
    };
    let result = steps().map_err(|e| (e.code(), e.to_string()));
    let names: Vec<&str> = feeds.iter().map(|(n, _)| *n).collect();
    let optimized = sess
        .compiled_step(&names, &fetches, &targets)
        .map(|c| c.optimizations.iter().any(|p| p.changed > 0))
        .unwrap_or(false);
    let _ = sess.close();
    Outcome { result, optimized }
}

fn agree(a: &Tensor, b: &Tensor, tol: Option<Tolerance>) -> Result<(), String> {
    if a.dtype() != b.dtype() || a.dims() != b.dims() {
        return Err(format!(
            "{} {:?} optimized, {} {:?} not",
            a.dtype().name(),
            a.dims(),
            b.dtype().name(),
            b.dims()
        ));
    }
    if a == b {
        return Ok(());
    }
    let (Some(t), true) = (tol, a.dtype().is_float()) else {
        return Err(format!("optimized {a:?}, not {b:?}"));
    };
    let (Some(x), Some(y)) = (a.to_f64_vec(), b.to_f64_vec()) else {
        return Err("float tensors without float elements".into());
    };
    for (i, (&p, &q)) in x.iter().zip(&y).enumerate() {
        let same =
            (p.is_nan() && q.is_nan()) || p == q || (p - q).abs() <= t.atol + t.rtol * q.abs();
        if !same {
            return Err(format!("element {i}: {p} optimized, {q} not"));
        }
    }
    Ok(())
}

/// Runs `f` both ways; `Ok(optimized)` when they agree.
fn check(f: &Fixture) -> Result<bool, String> {
    let on = run(f, OptimizerOptions::default(), RewriterConfig::default());
    let off = run(f, OptimizerOptions::disabled(), RewriterConfig::disabled());
    if off.optimized {
        return Err("the step was optimized with the optimizations off".into());
    }
    match (&on.result, &off.result) {
        (Ok(a), Ok(b)) => {
            if a.len() != b.len() {
                return Err(format!("{} values optimized, {} not", a.len(), b.len()));
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let tol = f.tolerance.get(x.dtype().name()).copied();
                agree(x, y, tol).map_err(|e| format!("fetch {i}: {e}"))?;
            }
        }
        (Err((c, _)), Err((d, _))) if c == d => {}
        (a, b) => {
            let say = |r: &Result<Vec<Tensor>, (Code, String)>| match r {
                Ok(_) => "ran".to_owned(),
                Err((_, m)) => format!("failed: {m}"),
            };
            return Err(format!("optimized {}; not optimized {}", say(a), say(b)));
        }
    }
    Ok(on.optimized)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn manifest_fixtures(dir: &str, out: &mut Vec<Fixture>) {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .expect("the corpus directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    dirs.sort();
    for d in dirs {
        let text = std::fs::read_to_string(d.join("manifest.json")).expect("manifest");
        let m: Manifest = serde_json::from_str(&text).expect("manifest JSON");
        let graph =
            load_graph_def(&d.join("graph.pb"), &ImportOptions::default()).expect("graph.pb");
        let feeds = m
            .feeds
            .iter()
            .map(|(n, file)| (n.clone(), npy::read_npy(d.join(file)).expect("feed .npy")))
            .collect();
        out.push(Fixture {
            name: format!(
                "{dir}/{}",
                d.file_name().unwrap_or_default().to_string_lossy()
            ),
            graph,
            init: m.init,
            feeds,
            fetches: m.fetches,
            targets: m.targets,
            steps: m.steps,
            after: m.after,
            tolerance: m.tolerance,
        });
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .filter_map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

/// A `*_graph.json` tensor: float32, int32, int64, bool or (hex) string.
fn json_tensor(v: &Value) -> Option<Tensor> {
    let shape: Vec<usize> = v["shape"]
        .as_array()?
        .iter()
        .map(|d| d.as_u64().map(|d| d as usize))
        .collect::<Option<_>>()?;
    let vals = v["values"].as_array()?;
    let t = match v["dtype"].as_str()? {
        "string" => Tensor::from_strings(
            &shape,
            vals.iter()
                .map(|x| x.as_str().map(unhex))
                .collect::<Option<Vec<_>>>()?,
        ),
        "float32" => Tensor::new(
            &shape,
            vals.iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<Vec<_>>>()?,
        ),
        "int32" => Tensor::new(
            &shape,
            vals.iter()
                .map(|x| x.as_i64().map(|i| i as i32))
                .collect::<Option<Vec<_>>>()?,
        ),
        "int64" => Tensor::new(
            &shape,
            vals.iter().map(Value::as_i64).collect::<Option<Vec<_>>>()?,
        ),
        "bool" => Tensor::new(
            &shape,
            vals.iter()
                .map(Value::as_bool)
                .collect::<Option<Vec<_>>>()?,
        ),
        _ => return None,
    };
    t.ok()
}

fn json_graph_fixtures(dir: &str, out: &mut Vec<Fixture>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .expect("the fixture directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("_graph.json"))
                && p.with_extension("pb").is_file()
        })
        .collect();
    files.sort();
    for json in files {
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("JSON");
        let graph =
            load_graph_def(&json.with_extension("pb"), &ImportOptions::default()).expect("pb");
        let feeds = doc["feeds"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), json_tensor(v).expect("a feed tensor")))
                    .collect()
            })
            .unwrap_or_default();
        let fetches = doc["fetches"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Fixture {
            name: json.display().to_string(),
            graph,
            init: Vec::new(),
            feeds,
            fetches,
            targets: Vec::new(),
            steps: 1,
            after: Vec::new(),
            tolerance: BTreeMap::new(),
        });
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

#[test]
fn every_generic_fixture_gives_the_same_answers_optimized() {
    let mut fixtures = Vec::new();
    manifest_fixtures("tests/fixtures/tf_corpus", &mut fixtures);
    manifest_fixtures("tests/fixtures/tf_export", &mut fixtures);
    json_graph_fixtures("kernels/tests/fixtures", &mut fixtures);
    assert!(fixtures.len() >= 70, "only {} fixtures", fixtures.len());
    let (mut optimized, mut failed) = (Vec::new(), Vec::new());
    for f in &fixtures {
        match catch_unwind(AssertUnwindSafe(|| check(f)))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(p))))
        {
            Ok(true) => optimized.push(f.name.clone()),
            Ok(false) => {}
            Err(e) => failed.push(format!("{}: {e}", f.name)),
        }
    }
    eprintln!(
        "{} fixtures: {} changed by the optimizations, {} disagree",
        fixtures.len(),
        optimized.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "optimized and unoptimized answers differ:\n{}",
        failed.join("\n")
    );
    assert!(
        optimized.len() * 3 >= fixtures.len(),
        "only {} of {} fixtures were changed by the optimizations",
        optimized.len(),
        fixtures.len()
    );
}
