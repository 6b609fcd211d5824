//! The `actorflow` binary end to end: `run` on graphs written here (actorflow
//! JSON) and on TensorFlow's own graphs (graph/tests/fixtures/*.pb), `.npy`
//! feeds and outputs (checked byte for byte against hand-built files), traces,
//! TensorBoard summaries, `inspect`, `bench`, `--help`, and errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output as ProcessOutput};

use actorflow::ops::{self, summary};
use actorflow::tensorboard::{event, read_events, Summary};
use actorflow::{npy, DType, Output, Scope, Shape, Tensor};
use serde_json::Value;

fn actorflow(args: &[&str]) -> ProcessOutput {
    Command::new(env!("CARGO_BIN_EXE_actorflow"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the actorflow binary runs")
}

fn stdout(o: &ProcessOutput) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &ProcessOutput) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects success.
fn ok(args: &[&str]) -> String {
    let o = actorflow(args);
    assert!(
        o.status.success(),
        "{args:?}: {}\n{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs and expects failure with `code` (the canonical code's number) and a
/// message containing `needle`; never a panic.
fn fails(args: &[&str], code: i32, needle: &str) -> String {
    let o = actorflow(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    err
}

/// An empty directory of its own, removed when the guard drops (a panic too);
/// the `actorflow` runs writing into it are waited for while it lives.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("actorflow-cli-{name}-"))
        .tempdir()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn tf_fixture(name: &str) -> String {
    format!("{}/graph/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A `.npy` file as numpy writes it: the header dict padded with spaces to 127
/// bytes and a newline (NumPy also reserves room for 21 digits of the first
/// dimension), then the data.
fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while 10 + h.len() + 1 < 128 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    b
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A float placeholder named `name`.
fn placeholder(s: &Scope, name: &str, shape: &[usize]) -> Output {
    s.op("Placeholder")
        .name(name)
        .attr("dtype", DType::F32)
        .attr("shape", Shape::known(shape))
        .build1()
        .unwrap()
}

/// `x` under the name `name` (an `Identity`).
fn named(s: &Scope, name: &str, x: &Output) -> Output {
    s.op("Identity").name(name).input(x).build1().unwrap()
}

/// y = 3x + 1 on a fed x[2], a bool y > 5, an int32 constant and strings.
fn arithmetic_graph(dir: &Path) -> PathBuf {
    let s = Scope::new();
    let x = placeholder(&s, "x", &[2]);
    let three = ops::scalar(&s, 3.0f32).unwrap();
    let one = ops::scalar(&s, 1.0f32).unwrap();
    let y = named(
        &s,
        "y",
        &ops::add(&s, &ops::mul(&s, &x, &three).unwrap(), &one).unwrap(),
    );
    named(
        &s,
        "big",
        &ops::greater(&s, &y, &ops::scalar(&s, 5.0f32).unwrap()).unwrap(),
    );
    let k = ops::constant(&s, Tensor::new(&[2, 2], vec![1i32, -2, 3, 70000]).unwrap()).unwrap();
    named(&s, "k", &k);
    let words = ops::constant(&s, Tensor::from_strings(&[2], vec!["ab", "c"]).unwrap()).unwrap();
    named(&s, "words", &words);
    let path = dir.join("arith.json");
    std::fs::write(&path, s.graph_def().to_json().unwrap()).unwrap();
    path
}

#[test]
fn run_prints_fetches_and_writes_npy_files() {
    let tmp = temp_dir("run");
    let dir = tmp.path();
    let graph = arithmetic_graph(dir);
    let feed = dir.join("x.npy");
    std::fs::write(&feed, npy_bytes("<f4", "(2,)", &f32_bytes(&[1.0, 2.0]))).unwrap();
    let out = dir.join("out");
    let text = ok(&[
        "run",
        s(&graph),
        "--feed",
        &format!("x={}", s(&feed)),
        "--fetch",
        "y",
        "--fetch",
        "big:0",
        "--fetch",
        "k",
        "--fetch",
        "words",
        "--out",
        s(&out),
    ]);
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "y (float32 [2]) = [4, 7]",
            "big:0 (bool [2]) = [false, true]",
            "k (int32 [2,2]) = [1, -2, 3, 70000]",
            "words (string [2]) = [\"ab\", \"c\"]",
        ]
    );
    let read = |i: usize| std::fs::read(out.join(format!("{i}.npy"))).unwrap();
    assert_eq!(read(0), npy_bytes("<f4", "(2,)", &f32_bytes(&[4.0, 7.0])));
    assert_eq!(read(1), npy_bytes("|b1", "(2,)", &[0, 1]));
    let ints: Vec<u8> = [1i32, -2, 3, 70000]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(read(2), npy_bytes("<i4", "(2, 2)", &ints));
    assert_eq!(read(3), npy_bytes("|S2", "(2,)", b"abc\0"));
}

#[test]
fn run_tensorflow_graphs() {
    let tmp = temp_dir("tf");
    let dir = tmp.path();
    let feed = dir.join("x.npy");
    std::fs::write(
        &feed,
        npy_bytes("<f4", "(1, 3)", &f32_bytes(&[1.0, 2.0, 3.0])),
    )
    .unwrap();
    // basic.pb: out = (x·[[1,2],[3,4],[5,6]] + [0.5,-0.5]) · 2 = [[45, 55]].
    for file in ["basic.pb", "basic.pbtxt"] {
        let out = dir.join(file);
        let text = ok(&[
            "run",
            &tf_fixture(file),
            "--feed",
            &format!("x:0={}", s(&feed)),
            "--fetch",
            "out:0",
            "--out",
            s(&out),
            "--clear-devices",
        ]);
        assert_eq!(text, "out:0 (float32 [1,2]) = [45, 55]\n");
        let got = std::fs::read(out.join("0.npy")).unwrap();
        assert_eq!(got, npy_bytes("<f4", "(1, 2)", &f32_bytes(&[45.0, 55.0])));
    }
    // variables.pb: each --init runs alone, in order: init, then v += [1, 1].
    let text = ok(&[
        "run",
        &tf_fixture("variables.pb"),
        "--init",
        "init",
        "--init",
        "inc",
        "--fetch",
        "v/read:0",
        "--fetch",
        "r_value:0",
    ]);
    assert_eq!(
        text,
        "v/read:0 (float32 [2]) = [2, 2]\nr_value:0 (float32 []) = 3\n"
    );
    // Three main steps of v += [1, 1] after init.
    let text = ok(&[
        "run",
        &tf_fixture("variables.pb"),
        "--init",
        "init",
        "--target",
        "inc",
        "--steps",
        "3",
    ]);
    assert_eq!(text, "");
    // A graph with a feature actorflow lacks (a complex64 constant) is rejected.
    let err = fails(
        &["run", &tf_fixture("complex.pb"), "--fetch", "out"],
        12,
        "UNIMPLEMENTED",
    );
    assert!(err.contains("DT_COMPLEX64"), "{err}");
}

/// x (CPU:0) → y = 2x (CPU:0) → z = y + 1 (CPU:1) → w = z·z (CPU:0).
fn two_device_graph(dir: &Path) -> PathBuf {
    let s = Scope::new();
    let d0 = s.with_device("/device:CPU:0");
    let d1 = s.with_device("/device:CPU:1");
    let x = placeholder(&d0, "x", &[2]);
    let y = ops::mul(&d0, &x, &ops::scalar(&d0, 2.0f32).unwrap()).unwrap();
    let z = ops::add(&d1, &y, &ops::scalar(&d1, 1.0f32).unwrap()).unwrap();
    named(&d0, "w", &ops::mul(&d0, &z, &z).unwrap());
    let path = dir.join("two.json");
    std::fs::write(&path, s.graph_def().to_json().unwrap()).unwrap();
    path
}

fn check_trace(path: &Path, steps: usize) {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    // One process (the task), each device's tracks in it.
    let processes = evs.iter().filter(|e| e["name"] == "process_name").count();
    assert_eq!(processes, 1);
    for device in ["CPU:0 ", "CPU:1 "] {
        assert!(evs.iter().any(|e| e["name"] == "thread_name"
            && e["args"]["name"].as_str().unwrap_or("").starts_with(device)));
    }
    let of_op = |op: &str| {
        evs.iter()
            .filter(|e| e["cat"] == "node" && e["args"]["op"] == op)
            .count()
    };
    assert_eq!(of_op("_Send"), 2 * steps);
    assert_eq!(of_op("_Recv"), 2 * steps);
    assert_eq!(of_op("_Retval"), steps);
    assert_eq!(evs.iter().filter(|e| e["ph"] == "s").count(), 2 * steps);
    assert_eq!(evs.iter().filter(|e| e["ph"] == "f").count(), 2 * steps);
}

#[test]
fn trace_writes_a_chrome_trace() {
    let tmp = temp_dir("trace");
    let dir = tmp.path();
    let graph = two_device_graph(dir);
    let feed = dir.join("x.npy");
    npy::write_npy(&feed, &Tensor::vector(&[1.0f32, -2.0])).unwrap();
    let feed_arg = format!("x:0={}", s(&feed));
    let t1 = dir.join("run.json");
    let text = ok(&[
        "run",
        s(&graph),
        "--devices",
        "2",
        "--feed",
        &feed_arg,
        "--fetch",
        "w",
        "--trace",
        s(&t1),
    ]);
    assert_eq!(text, "w (float32 [2]) = [9, 9]\n");
    check_trace(&t1, 1);
    let t2 = dir.join("trace.json");
    ok(&[
        "trace",
        s(&graph),
        "-o",
        s(&t2),
        "--devices",
        "2",
        "--feed",
        &feed_arg,
        "--fetch",
        "w",
        "--steps",
        "2",
    ]);
    check_trace(&t2, 2);
}

#[test]
fn run_writes_tensorboard_summaries() {
    let tmp = temp_dir("summaries");
    let dir = tmp.path();
    let sc = Scope::new();
    let zero = ops::scalar(&sc, 0.0f32).unwrap();
    let v = ops::Variable::new(&sc, "counter", &zero, false).unwrap();
    let inc = ops::assign_add(&sc, &v.var, &ops::scalar(&sc, 1.0f32).unwrap()).unwrap();
    summary::summary_scalar(&sc, "count", &inc).unwrap();
    let c = ops::constant(&sc, Tensor::vector(&[1.0f32, 2.0, 3.0])).unwrap();
    summary::summary_histogram(&sc, "spread", &ops::mul(&sc, &inc, &c).unwrap()).unwrap();
    summary::merge_all_summaries(&sc).unwrap();
    let graph = dir.join("summaries.json");
    std::fs::write(&graph, sc.graph_def().to_json().unwrap()).unwrap();
    let logdir = dir.join("logs");
    ok(&[
        "run",
        s(&graph),
        "--init",
        v.initializer.name(),
        "--steps",
        "3",
        "--summaries",
        s(&logdir),
    ]);
    let files: Vec<PathBuf> = std::fs::read_dir(&logdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let events = read_events(&files[0]).unwrap();
    assert_eq!(events.len(), 5, "file version, graph, three summaries");
    assert!(matches!(events[1].what, Some(event::What::GraphDef(_))));
    for (step, e) in events[2..].iter().enumerate() {
        assert_eq!(e.step, step as i64);
        let Some(event::What::Summary(Summary { value })) = &e.what else {
            panic!("not a summary: {e:?}");
        };
        let tags: Vec<&str> = value.iter().map(|v| v.tag.as_str()).collect();
        assert_eq!(tags, ["count", "spread"]);
        assert_eq!(
            value[0].value,
            Some(actorflow::tensorboard::summary::value::Value::SimpleValue(
                step as f32 + 1.0
            ))
        );
    }
}

#[test]
fn inspect_shows_ops_placement_and_partitions() {
    let tmp = temp_dir("inspect");
    let dir = tmp.path();
    let graph = two_device_graph(dir);
    let dot = dir.join("g.dot");
    let svg = dir.join("g.svg");
    let o = actorflow(&[
        "inspect",
        s(&graph),
        "--devices",
        "2",
        "--nodes",
        "--dot",
        s(&dot),
        "--svg",
        s(&svg),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for needle in [
        "graph ",
        ": 7 nodes",
        "ops:",
        "     2  Const",
        "     2  Mul",
        "     1  AddV2",
        "     1  Identity",
        "     1  Placeholder",
        "optimizations:",
        "  constant_folding: 7 -> 7 nodes (0 folded)",
        "  common_subexpression_elimination: 7 -> 7 nodes (0 merged)",
        "  remapper: 7 -> 7 nodes (0 fused)",
        "placement (7 nodes in the step):",
        "device:CPU:1",
        "partitions: 2 (2 Send/Recv pairs, 0 receives scheduled)",
        "1 sends, 1 recvs",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
    let dot_text = std::fs::read_to_string(&dot).unwrap();
    assert!(dot_text.starts_with("digraph"));
    assert_eq!(dot_text.matches("subgraph \"cluster_device").count(), 2);
    if svg.exists() {
        assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    } else {
        assert!(stderr(&o).contains("skipped --svg"), "{}", stderr(&o));
    }
    for view in ["placement", "graph"] {
        let p = dir.join(format!("{view}.dot"));
        ok(&[
            "inspect",
            s(&graph),
            "--devices",
            "2",
            "--view",
            view,
            "--dot",
            s(&p),
        ]);
        assert!(std::fs::read_to_string(&p).unwrap().contains("-> \"w\""));
    }
    let text = ok(&[
        "inspect",
        &tf_fixture("basic.pbtxt"),
        "--fetch",
        "out:0",
        "--feed",
        "x:0",
    ]);
    assert!(
        text.contains("graph ") && text.contains("1  MatMul"),
        "{text}"
    );
    assert!(
        text.contains("partitions: 1 (0 Send/Recv pairs, 0 receives scheduled)"),
        "{text}"
    );
}

#[test]
fn inspect_counts_the_receives_recv_scheduling_delays() {
    // The recv-scheduling workload's model on two devices of one process: the
    // weights on CPU:1, the chain that reads one per stage on CPU:0.
    let tmp = temp_dir("staged");
    let dir = tmp.path();
    let sc = Scope::new();
    let model =
        actorflow::bench::recv_schedule::staged_model(&sc, "/device:CPU:1", "/device:CPU:0")
            .unwrap();
    let path = dir.join("staged.json");
    std::fs::write(&path, sc.graph_def().to_json().unwrap()).unwrap();
    let inspect = |extra: &[&str]| {
        let mut args = vec![
            "inspect",
            s(&path),
            "--devices",
            "2",
            "--fetch",
            &model.output,
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let stages = actorflow::bench::recv_schedule::STAGES;
    let off = inspect(&[]);
    assert!(
        off.contains(&format!("({stages} Send/Recv pairs, 0 receives scheduled)")),
        "{off}"
    );
    // Every weight's receive but the first's (read 2.1 ms into the estimated
    // step, sooner than its transfer and the prefetch margin allow) waits.
    let on = inspect(&["--enable-recv-scheduling"]);
    assert!(
        on.contains(&format!(
            "({stages} Send/Recv pairs, {} receives scheduled)",
            stages - 1
        )),
        "{on}"
    );
}

#[test]
fn bench_json_has_exactly_the_figure_keys() {
    let o = ok(&[
        "bench",
        "--json",
        "--filter",
        "run_overhead",
        "--repetitions",
        "1",
    ]);
    let v: Value = serde_json::from_str(o.trim()).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["run_overhead_us"]);
    assert!(v["run_overhead_us"].as_f64().unwrap() > 0.0);
    fails(
        &["bench", "--filter", "no_such_figure"],
        5,
        "no benchmark figure matches",
    );
}

#[test]
fn help_for_every_subcommand() {
    let top = ok(&["--help"]);
    for sub in ["run", "trace", "inspect", "bench"] {
        assert!(top.contains(sub), "{top}");
        let h = ok(&[sub, "--help"]);
        assert!(h.contains("Usage: actorflow"), "{h}");
    }
    assert!(ok(&["run", "--help"]).contains("--feed <NAME=FILE.npy>"));
    assert!(ok(&["inspect", "--help"]).contains("--svg <FILE.svg>"));
    assert!(ok(&["bench", "--help"]).contains("--filter <NAME>"));
}

#[test]
fn errors_exit_with_their_code_and_message() {
    let tmp = temp_dir("errors");
    let dir = tmp.path();
    let graph = arithmetic_graph(dir);
    let g = s(&graph);
    let missing = dir.join("missing.json");
    fails(&["run", s(&missing)], 5, "NOT_FOUND");
    fails(
        &["run", g, "--feed", "x"],
        3,
        "--feed expects NAME=FILE.npy",
    );
    fails(&["run", g, "--fetch", "nope:0"], 5, "nope");
    fails(&["run", g, "--fetch", "y"], 3, "placeholder");
    let bad = dir.join("bad.npy");
    std::fs::write(&bad, b"not numpy at all").unwrap();
    fails(
        &[
            "run",
            g,
            "--feed",
            &format!("x={}", s(&bad)),
            "--fetch",
            "y",
        ],
        3,
        "not a valid .npy file",
    );
    let truncated = dir.join("short.npy");
    std::fs::write(&truncated, npy_bytes("<f4", "(2,)", &[0u8; 4])).unwrap();
    fails(
        &[
            "run",
            g,
            "--feed",
            &format!("x={}", s(&truncated)),
            "--fetch",
            "y",
        ],
        15,
        "DATA_LOSS",
    );
    // A feed (or graph) path that is a directory, or that goes through a file.
    let feed_dir = dir.join("dir.npy");
    std::fs::create_dir_all(&feed_dir).unwrap();
    for (path, code, name) in [
        (feed_dir.clone(), 3, "INVALID_ARGUMENT"),
        (bad.join("x.npy"), 5, "NOT_FOUND"),
    ] {
        let err = fails(
            &[
                "run",
                g,
                "--feed",
                &format!("x={}", s(&path)),
                "--fetch",
                "y",
            ],
            code,
            name,
        );
        assert!(err.contains(s(&path)), "the error names the path: {err}");
    }
    let graph_dir = dir.join("graph_dir.pb");
    std::fs::create_dir_all(&graph_dir).unwrap();
    fails(&["run", s(&graph_dir)], 3, "INVALID_ARGUMENT");
    let ints = dir.join("ints.npy");
    npy::write_npy(&ints, &Tensor::vector(&[1i32, 2])).unwrap();
    fails(
        &[
            "run",
            g,
            "--feed",
            &format!("x={}", s(&ints)),
            "--fetch",
            "y",
        ],
        3,
        "Cannot feed value of type int32",
    );
    let junk = dir.join("junk.pb");
    std::fs::write(&junk, b"\xff\xff\xff garbage").unwrap();
    fails(&["run", s(&junk)], 15, "DATA_LOSS");
    fails(
        &["run", g, "--fetch", "y", "--timeout", "0"],
        3,
        "--timeout",
    );
    fails(&["inspect", g, "--fetch", "nope"], 5, "nope");
    let o = actorflow(&["run"]);
    assert_eq!(
        o.status.code(),
        Some(64),
        "a usage error (EX_USAGE, not UNKNOWN)"
    );
    assert!(stderr(&o).contains("Usage"));
}

#[test]
fn inspect_lists_a_checkpoints_tensors() {
    let tmp = temp_dir("inspect-ckpt");
    let prefix = tmp.path().join("model.ckpt-7");
    let w = actorflow::Tensor::new(&[2, 3], vec![0.5f32; 6]).unwrap();
    let step = actorflow::Tensor::scalar(7i64);
    actorflow::kernels::cpu::checkpoint::write_bundle(
        &prefix,
        &[("w", &w), ("global_step", &step)],
    )
    .unwrap();
    let out = ok(&["inspect", &prefix.display().to_string()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("checkpoint {}: 2 tensors", prefix.display())
    );
    let words = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(lines[1]), ["global_step", "int64", "[]"]);
    assert_eq!(words(lines[2]), ["w", "float32", "[2,3]"]);
    // A damaged index is DATA_LOSS (the exit code is the canonical code, 15).
    std::fs::write(tmp.path().join("model.ckpt-7.index"), b"junk").unwrap();
    let e = fails(&["inspect", &prefix.display().to_string()], 15, "DATA_LOSS");
    assert!(e.contains("model.ckpt-7.index"), "{e}");
}
