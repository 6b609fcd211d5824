//! Deterministic mutation testing of every reader of outside bytes, in the normal
//! test command (the cargo-fuzz targets in `fuzz/` explore the same readers
//! without a bound).
//!
//! The repository's fixtures — TensorFlow GraphDefs (`.pb`, `.pbtxt`), `.npy`
//! files — and checkpoints written here are mutated by a seeded SplitMix64:
//! byte flips, interesting bytes and integers, truncation, insertion, deletion,
//! duplication, and, on the text form of a graph, field values (ints replaced by
//! 0, -1, 2^31, 2^62, i64::MAX …, dtypes, op names, inputs) and whole lines.
//! Each mutant goes through its reader; a graph that imports is opened in a
//! session on one shared runtime, under a per-session allocation limit, and run
//! with its manifest's feeds and fetches under a short step deadline that the
//! runtime enforces itself.
//!
//! What must hold: no panic (on any thread: a panic hook counts them), no abort
//! (allocation sized by input is fallible: the test finishing proves it), no hang
//! (every step is bounded by its deadline; the whole test by its size), and every
//! failure a `Status` with a canonical code other than `UNKNOWN` or `INTERNAL`
//! (those mean the runtime, not the input, is at fault). A failing mutant is
//! reported with its seed, which reproduces it alone (`MUTATION_SEED=<seed>`).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actorflow::graph::import::{graph_def_from_tf_bytes, graph_def_from_tf_text, ImportOptions};
use actorflow::graph::proto::{graph as pb, text};
use actorflow::kernels::cpu::checkpoint::bundle::{data_path, index_path, write_bundle};
use actorflow::kernels::cpu::checkpoint::table::{read_table, TableBuilder};
use actorflow::kernels::cpu::checkpoint::CheckpointReader;
use actorflow::{npy, Code, DType, GraphDef, RunArgs, RunOptions, Runtime, RuntimeOptions};
use actorflow::{Session, SessionOptions, Status, Tensor};
use prost::Message;

/// Mutants per reader; scaled so the whole test takes seconds in a debug build.
const GRAPH_MUTANTS: u64 = 6000;
const NPY_MUTANTS: u64 = 1200;
const CHECKPOINT_MUTANTS: u64 = 1200;
/// Every step's deadline: the runtime must stop a step (a loop whose bound a
/// mutation made 2^62, a dequeue that will never be served) by itself.
const STEP_DEADLINE: Duration = Duration::from_millis(100);
/// The per-session allocation limit and the constant-size limit at import: a
/// mutated shape must be refused, not allocated.
const MAX_BYTES: usize = 64 << 20;

/// Sebastiano Vigna's SplitMix64: tiny, seedable, good enough to pick mutations.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Integers at the edges of the types readers size things by.
const INTERESTING: [i64; 20] = [
    0,
    -1,
    1,
    2,
    -2,
    7,
    255,
    65_536,
    2_147_483_647,
    2_147_483_648,
    -2_147_483_648,
    4_294_967_295,
    4_294_967_296,
    1 << 40,
    1 << 48,
    1 << 62,
    i64::MAX,
    i64::MIN,
    i64::MAX - 1,
    -(1 << 40),
];

/// One to four byte-level mutations of `input`.
fn mutate_bytes(rng: &mut SplitMix64, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        let at = if len == 0 { 0 } else { rng.below(len) };
        match rng.below(9) {
            0 if len > 0 => b[at] ^= 1 << rng.below(8),
            1 if len > 0 => b[at] = *rng.pick(&[0, 1, 0x7f, 0x80, 0xff, b'9', b'(', b'\'']),
            2 => b.truncate(at),
            3 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(at..at, bytes);
            }
            4 if len > 0 => {
                let end = (at + 1 + rng.below(16)).min(len);
                b.drain(at..end);
            }
            5 if len > 0 => {
                let end = (at + 1 + rng.below(64)).min(len);
                let chunk = b[at..end].to_vec();
                let to = rng.below(len);
                b.splice(to..to, chunk);
            }
            6 if len >= 8 => {
                // A little-endian integer (a length, a count, a dimension).
                let at = rng.below(len - 7);
                let v = *rng.pick(&INTERESTING);
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
            7 if len >= 4 => {
                let at = rng.below(len - 3);
                let v = *rng.pick(&INTERESTING) as u32;
                b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {
                // A protobuf varint of an interesting value (a field's value or a
                // length prefix).
                let mut v = *rng.pick(&INTERESTING) as u64;
                let mut varint = Vec::new();
                loop {
                    let byte = (v & 0x7f) as u8;
                    v >>= 7;
                    if v == 0 {
                        varint.push(byte);
                        break;
                    }
                    varint.push(byte | 0x80);
                }
                b.splice(at..at, varint);
            }
        }
    }
    b
}

/// The byte ranges of whitespace-delimited tokens of `text` that `keep` accepts.
fn tokens(text: &str, keep: impl Fn(&str) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        let sep = c.is_whitespace() || matches!(c, '{' | '}' | ':' | '[' | ']' | ',');
        match (start, sep) {
            (None, false) => start = Some(i),
            (Some(s), true) => {
                if keep(&text[s..i]) {
                    out.push((s, i));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

const DTYPES: [&str; 14] = [
    "DT_FLOAT",
    "DT_DOUBLE",
    "DT_INT32",
    "DT_INT64",
    "DT_UINT8",
    "DT_BOOL",
    "DT_STRING",
    "DT_HALF",
    "DT_BFLOAT16",
    "DT_RESOURCE",
    "DT_COMPLEX64",
    "DT_VARIANT",
    "DT_INVALID",
    "DT_FLOAT_REF",
];

/// One to three mutations of a graph's text form that keep it mostly parseable:
/// field values, dtypes, op names, inputs, whole lines.
fn mutate_text(rng: &mut SplitMix64, text: &str) -> String {
    let mut t = text.to_owned();
    for _ in 0..1 + rng.below(3) {
        let replace = |t: &mut String, (s, e): (usize, usize), with: String| {
            t.replace_range(s..e, &with);
        };
        match rng.below(8) {
            0..=3 => {
                let ints = tokens(&t, |s| s.parse::<i64>().is_ok());
                if !ints.is_empty() {
                    let at = *rng.pick(&ints);
                    let v = if rng.below(4) == 0 {
                        (rng.next() as i64) >> rng.below(64)
                    } else {
                        *rng.pick(&INTERESTING)
                    };
                    replace(&mut t, at, v.to_string());
                }
            }
            4 => {
                let dts = tokens(&t, |s| s.starts_with("DT_"));
                if !dts.is_empty() {
                    let at = *rng.pick(&dts);
                    replace(&mut t, at, rng.pick(&DTYPES).to_string());
                }
            }
            5 | 6 => {
                // A quoted string (op, input, node name, attr key) becomes another
                // one of the file's, or a port or control form of it.
                let strs = tokens(&t, |s| {
                    s.len() > 2 && s.starts_with('"') && s.ends_with('"')
                });
                if strs.len() >= 2 {
                    let at = *rng.pick(&strs);
                    let (s, e) = *rng.pick(&strs);
                    let other = t[s + 1..e - 1].to_owned();
                    let with = match rng.below(4) {
                        0 => format!("\"{other}:{}\"", rng.below(4)),
                        1 => format!("\"^{other}\""),
                        _ => format!("\"{other}\""),
                    };
                    replace(&mut t, at, with);
                }
            }
            _ => {
                let lines: Vec<&str> = t.lines().collect();
                if lines.is_empty() {
                    continue;
                }
                let i = rng.below(lines.len());
                let mut out: Vec<&str> = lines.clone();
                if rng.below(2) == 0 {
                    out.remove(i);
                } else {
                    out.insert(i, lines[rng.below(lines.len())]);
                }
                t = out.join("\n");
            }
        }
    }
    t
}

/// A graph fixture: its bytes, whether binary, and its manifest (feeds, fetches,
/// targets) when it has one.
struct GraphFixture {
    path: PathBuf,
    binary: bool,
    bytes: Vec<u8>,
    feeds: Vec<(String, Tensor)>,
    fetches: Vec<String>,
    targets: Vec<String>,
    init: Vec<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files under `dir` (recursively) whose name ends with `ext`, sorted.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, ext, out);
        } else if p.to_string_lossy().ends_with(ext) {
            out.push(p);
        }
    }
}

fn graph_fixtures() -> Vec<GraphFixture> {
    let mut paths = Vec::new();
    for dir in ["tests/fixtures", "graph/tests/fixtures"] {
        files(&root().join(dir), ".pb", &mut paths);
        files(&root().join(dir), ".pbtxt", &mut paths);
    }
    // SavedModels are not graphs (tests/saved_model.rs damages them).
    paths.retain(|p| {
        p.parent()
            .is_none_or(|d| !d.join("saved_model.pb").is_file())
    });
    paths.sort();
    let strings = |v: Option<&serde_json::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("a fixture reads");
            let dir = path.parent().expect("a fixture is in a directory");
            let manifest: Option<serde_json::Value> = std::fs::read(dir.join("manifest.json"))
                .ok()
                .and_then(|m| serde_json::from_slice(&m).ok());
            let m = manifest.as_ref();
            let feeds = m
                .and_then(|m| m["feeds"].as_object())
                .map(|f| {
                    f.iter()
                        .filter_map(|(name, file)| {
                            let t = npy::read_npy(dir.join(file.as_str()?)).ok()?;
                            Some((name.clone(), t))
                        })
                        .collect()
                })
                .unwrap_or_default();
            GraphFixture {
                binary: path.extension().is_some_and(|e| e == "pb"),
                fetches: strings(m.and_then(|m| m.get("fetches"))),
                targets: strings(m.and_then(|m| m.get("targets"))),
                init: strings(m.and_then(|m| m.get("init"))),
                path,
                bytes,
                feeds,
            }
        })
        .collect()
}

/// What the mutants of one reader came to.
#[derive(Default)]
struct Tally {
    /// Successes by stage ("import", "run" …).
    ok: BTreeMap<String, usize>,
    /// Failures by stage and code.
    codes: BTreeMap<String, usize>,
    /// Mutants that broke a rule: (seed, what happened).
    broken: Vec<(u64, String)>,
}

impl Tally {
    fn result<T>(&mut self, seed: u64, what: &str, r: Result<T, Status>) -> Option<T> {
        match r {
            Ok(v) => {
                *self.ok.entry(what.to_owned()).or_default() += 1;
                Some(v)
            }
            Err(e) => {
                *self
                    .codes
                    .entry(format!("{what}: {:?}", e.code()))
                    .or_default() += 1;
                if matches!(e.code(), Code::Unknown | Code::Internal) {
                    self.broken.push((seed, format!("{what}: {e}")));
                }
                None
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        for (c, n) in other.ok {
            *self.ok.entry(c).or_default() += n;
        }
        for (c, n) in other.codes {
            *self.codes.entry(c).or_default() += n;
        }
        self.broken.extend(other.broken);
    }

    /// Runs `f`, recording a panic on this thread as a broken mutant.
    fn guard<T>(&mut self, seed: u64, what: &str, f: impl FnOnce() -> T) -> Option<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Some(v),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.broken.push((seed, format!("{what} panicked: {msg}")));
                None
            }
        }
    }
}

/// The mutant being tried, for the panic hook.
static CURRENT_SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Panics on any thread (kernels run on the runtime's), counted by a hook.
fn count_panics() -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = Arc::clone(&seen);
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current().name().unwrap_or("?").to_owned();
        let seed = CURRENT_SEED.load(std::sync::atomic::Ordering::Relaxed);
        let what = format!("seed {seed}, thread '{thread}': {info}");
        // Printed at once too: a panic on a runtime thread may leave the step
        // waiting, and the message must not wait for the end.
        eprintln!("panic: {what}");
        if let Ok(mut s) = hook_seen.lock() {
            s.push(what);
        }
    }));
    seen
}

/// Which seeds to run: `MUTATION_SEED=<seed>` replays one.
fn seeds(base: u64, n: u64) -> Vec<u64> {
    match std::env::var("MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) if s >= base && s < base + n => vec![s],
        Some(_) => vec![],
        None => (base..base + n).collect(),
    }
}

/// Imports a mutant of `f` and, when it imports, runs it: init targets, then the
/// manifest's feeds, fetches and targets (or every node as a target when there is
/// no manifest).
fn graph_mutant(rt: &Runtime, f: &GraphFixture, seed: u64, tally: &mut Tally) {
    CURRENT_SEED.store(seed, std::sync::atomic::Ordering::Relaxed);
    let mut rng = SplitMix64(seed);
    let opts = ImportOptions::default().with_max_tensor_bytes(MAX_BYTES);
    let imported = tally.guard(seed, "import", || {
        if rng.below(4) == 0 {
            // Bytes of the file as it is.
            let b = mutate_bytes(&mut rng, &f.bytes);
            if f.binary {
                graph_def_from_tf_bytes(&b, &opts)
            } else {
                graph_def_from_tf_text(&String::from_utf8_lossy(&b), &opts)
            }
        } else {
            // Field values of its text form, imported as text or re-encoded.
            let proto = if f.binary {
                pb::GraphDef::decode(f.bytes.as_slice()).expect("a fixture decodes")
            } else {
                text::parse_graph_def(&String::from_utf8_lossy(&f.bytes)).expect("a fixture parses")
            };
            let t = mutate_text(&mut rng, &text::write_graph_def(&proto));
            match (rng.below(2), text::parse_graph_def(&t)) {
                (0, Ok(p)) => graph_def_from_tf_bytes(&p.encode_to_vec(), &opts),
                _ => graph_def_from_tf_text(&t, &opts),
            }
        }
    });
    let Some(gd) = imported.and_then(|r| tally.result(seed, "import", r)) else {
        return;
    };
    let mut run = Tally::default();
    let done = catch_unwind(AssertUnwindSafe(|| run_graph(rt, f, &gd, seed, &mut run)));
    tally.merge(run);
    if done.is_err() {
        tally.broken.push((seed, "run panicked".into()));
    }
}

fn run_graph(rt: &Runtime, f: &GraphFixture, gd: &GraphDef, seed: u64, tally: &mut Tally) {
    let options = SessionOptions::default()
        .with_max_allocation_bytes(MAX_BYTES)
        .with_default_timeout(STEP_DEADLINE);
    let Some(sess) = tally.result(seed, "session", Session::in_runtime(rt, gd, options)) else {
        return;
    };
    let run = RunOptions::default().with_timeout(STEP_DEADLINE);
    let every_node: Vec<String>;
    let targets = if f.fetches.is_empty() && f.targets.is_empty() {
        every_node = gd.node.iter().map(|n| n.name.clone()).collect();
        &every_node
    } else {
        &f.targets
    };
    if !f.init.is_empty() {
        let init = RunArgs {
            targets: f.init.clone(),
            options: run.clone(),
            ..Default::default()
        };
        let r = sess.run_with(&init);
        tally.result(seed, "init", r);
    }
    let step = RunArgs {
        feeds: f.feeds.clone(),
        fetches: f.fetches.clone(),
        targets: targets.clone(),
        options: run,
    };
    let started = Instant::now();
    let r = sess.run_with(&step);
    let took = started.elapsed();
    // The deadline is the runtime's: a step may not outlive it by much (the
    // allowance covers a debug build's slowest kernels on a loaded machine).
    if took > STEP_DEADLINE * 20 {
        tally.broken.push((
            seed,
            format!("a step ran {took:?} past a {STEP_DEADLINE:?} deadline"),
        ));
    }
    tally.result(seed, "run", r);
    let _ = sess.close();
}

fn report(name: &str, tally: &Tally, started: Instant) {
    eprintln!(
        "{name}: accepted {:?}\n  failed {:?}\n  in {:?}",
        tally.ok,
        tally.codes,
        started.elapsed()
    );
}

fn assert_clean(name: &str, tally: &Tally, panics: &Mutex<Vec<String>>) {
    let panics = panics.lock().map(|p| p.clone()).unwrap_or_default();
    assert!(
        tally.broken.is_empty() && panics.is_empty(),
        "{name}: {} broken mutants (replay one with MUTATION_SEED=<seed>):\n{}\npanics:\n{}",
        tally.broken.len(),
        tally
            .broken
            .iter()
            .take(20)
            .map(|(s, w)| format!("  seed {s}: {w}"))
            .collect::<Vec<_>>()
            .join("\n"),
        panics
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// All readers in one test: the panic hook is process-wide, and one runtime
/// serves every graph mutant.
#[test]
fn mutants_of_every_fixture_fail_cleanly() {
    let panics = count_panics();
    let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(2)).expect("a runtime starts");

    let started = Instant::now();
    let graphs = graph_fixtures();
    assert!(graphs.len() >= 20, "the graph fixtures are found");
    let mut tally = Tally::default();
    for seed in seeds(0, GRAPH_MUTANTS) {
        let f = &graphs[(seed as usize) % graphs.len()];
        let before = tally.broken.len();
        graph_mutant(&rt, f, seed, &mut tally);
        for b in &mut tally.broken[before..] {
            b.1 = format!("{}: {}", f.path.display(), b.1);
        }
    }
    report("graphs", &tally, started);
    assert_clean("graphs", &tally, &panics);
    assert!(
        seeds(0, GRAPH_MUTANTS).len() < 100 || tally.codes.len() > 3,
        "mutants fail in more than a few ways"
    );

    let started = Instant::now();
    let mut npys = Vec::new();
    files(&root().join("tests/fixtures"), ".npy", &mut npys);
    assert!(npys.len() >= 20, "the .npy fixtures are found");
    let npys: Vec<Vec<u8>> = npys
        .iter()
        .map(|p| std::fs::read(p).expect("reads"))
        .collect();
    let mut tally = Tally::default();
    for seed in seeds(1 << 20, NPY_MUTANTS) {
        let mut rng = SplitMix64(seed);
        let input = rng.below(npys.len());
        let b = mutate_bytes(&mut rng, &npys[input]);
        if let Some(r) = tally.guard(seed, "npy", || npy::from_npy_bytes(&b)) {
            if let Some(t) = tally.result(seed, "npy", r) {
                // What was read re-encodes (dtypes NumPy lacks aside) and reads back.
                let again = npy::to_npy_bytes(&t).and_then(|b| npy::from_npy_bytes(&b));
                if let Some(back) = tally.result(seed, "npy round trip", again) {
                    if back != t {
                        tally
                            .broken
                            .push((seed, "npy round trip changed the tensor".into()));
                    }
                }
            }
        }
    }
    report("npy", &tally, started);
    assert_clean("npy", &tally, &panics);

    let started = Instant::now();
    let ckpts = checkpoint_seed_files();
    let tmp = tempfile::tempdir().expect("a scratch directory");
    let prefix = tmp.path().join("mutant");
    let mut tally = Tally::default();
    for seed in seeds(2 << 20, CHECKPOINT_MUTANTS) {
        let mut rng = SplitMix64(seed);
        let (index, data) = &ckpts[rng.below(ckpts.len())];
        // Mutate the index's bytes (its block checksums catch most of it), or its
        // entries rebuilt into a table with valid checksums (so the damage
        // reaches the entry decoding and the data reads behind them), or the
        // data shard.
        let (index, data) = match rng.below(3) {
            0 => (mutate_bytes(&mut rng, index), data.clone()),
            1 => {
                let entries = read_table(Path::new("seed"), index).expect("a seed's index reads");
                let mut t = TableBuilder::new();
                for (k, v) in &entries {
                    let v = if rng.below(2) == 0 {
                        mutate_bytes(&mut rng, v)
                    } else {
                        v.clone()
                    };
                    t.add(k, &v).expect("the seed's keys are sorted");
                }
                (t.finish(), data.clone())
            }
            _ => (index.clone(), mutate_bytes(&mut rng, data)),
        };
        std::fs::write(data_path(&prefix, 0, 1), &data).expect("writes the data shard");
        let parsed = tally.guard(seed, "checkpoint", || {
            CheckpointReader::parse(&prefix, &index).map(|r| {
                let infos: Vec<_> = r.tensors().cloned().collect();
                let tensors: Vec<_> = infos.iter().map(|i| r.tensor(&i.name)).collect();
                (infos, tensors)
            })
        });
        if let Some((infos, tensors)) = parsed.and_then(|p| tally.result(seed, "checkpoint", p)) {
            // Every tensor the reader returns has its listed dtype and shape.
            for (i, t) in infos.iter().zip(tensors) {
                if let Some(t) = tally.result(seed, "tensor", t) {
                    if (i.dtype, &i.shape) != (t.dtype(), t.shape()) {
                        tally
                            .broken
                            .push((seed, "a tensor differs from its index entry".into()));
                    }
                }
            }
        }
    }
    report("checkpoints", &tally, started);
    assert_clean("checkpoints", &tally, &panics);
    rt.shutdown();
}

/// The checkpoints the mutants start from, as (index, data shard) bytes: every
/// dtype class (floats, ints, bool, strings), scalars, an empty tensor, nested
/// names.
fn checkpoint_seed_files() -> Vec<(Vec<u8>, Vec<u8>)> {
    let sets: Vec<Vec<(&str, Tensor)>> = vec![
        vec![
            (
                "w",
                Tensor::new(&[2, 3], vec![1.5f32, -2.0, 3.25, 0.0, -0.0, 7.0]).unwrap(),
            ),
            ("global_step", Tensor::scalar(42i64)),
        ],
        vec![
            ("a/b/c", Tensor::vector(&[true, false])),
            ("empty", Tensor::new(&[0, 3], Vec::<f64>::new()).unwrap()),
            (
                "words",
                Tensor::from_strings(&[3], vec!["", "hé", "a\0b"]).unwrap(),
            ),
        ],
        vec![
            (
                "bytes",
                Tensor::new(&[2, 2], vec![0u8, 255, 7, 128]).unwrap(),
            ),
            ("i32", Tensor::scalar(-7i32)),
            ("x", Tensor::zeros(DType::F64, [4, 1, 2])),
        ],
    ];
    let tmp = tempfile::tempdir().expect("a scratch directory");
    sets.iter()
        .enumerate()
        .map(|(i, set)| {
            let refs: Vec<(&str, &Tensor)> = set.iter().map(|(n, t)| (*n, t)).collect();
            let prefix = tmp.path().join(format!("seed{i}"));
            write_bundle(&prefix, &refs).expect("a checkpoint writes");
            let read = |p: PathBuf| std::fs::read(p).expect("reads a seed file");
            (read(index_path(&prefix)), read(data_path(&prefix, 0, 1)))
        })
        .collect()
}

/// Writes the seeds' index files to `$ACTORFLOW_CKPT_SEEDS` for
/// `fuzz/seed_corpus.sh` (does nothing when it is unset).
#[test]
fn checkpoint_seeds() {
    let seeds = checkpoint_seed_files();
    for (index, _) in &seeds {
        let r = CheckpointReader::parse(Path::new("seed"), index).expect("a seed reads");
        assert!(r.tensors().count() >= 2);
    }
    if let Some(dir) = std::env::var_os("ACTORFLOW_CKPT_SEEDS") {
        for (i, (index, _)) in seeds.iter().enumerate() {
            std::fs::write(Path::new(&dir).join(format!("seed{i}.index")), index).expect("writes");
        }
    }
}
