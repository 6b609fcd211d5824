//! actorflow with real TensorFlow 2.21 processes as peers.
//!
//! A TensorFlow client drives a cluster of actorflow servers through every
//! scenario of `tf_interop/scenarios.py` (arithmetic, variables, cond and
//! while with gradients, queues with queue runners, training, Saver,
//! FULL_TRACE metadata, make_callable, partial_run, callables made from
//! CallableOptions (MakeCallable/RunCallable), errors as TensorFlow's exception
//! classes, list_devices, Session.reset), each checked against a local
//! TensorFlow session.
//!
//! Mixed clusters: one `actorflow server` and
//! one `tf.distribute.Server`, driven by a TensorFlow client. A 4 MiB variable
//! and a fed product live on task 1, their sum on task 0; the client runs it
//! through task 0's master. Both ways round: an actorflow master with a TensorFlow
//! worker, and a TensorFlow master with an actorflow worker (RegisterGraph,
//! RunGraph and RecvTensor in both directions), then the same as a partial run
//! (`is_partial` RunGraphs in both directions).
//!
//! Tensor bundles (checkpoint V2): TensorFlow restores a bundle actorflow wrote
//! (an index of several blocks) and saves the same tensors to the same bytes.
//!
//! Needs TensorFlow: the Python interpreter in `ACTORFLOW_TF_PYTHON` (a virtualenv
//! with `tensorflow-cpu==2.21.*`). Without it the tests print `SKIPPED:` and pass.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python() -> Option<String> {
    match std::env::var("ACTORFLOW_TF_PYTHON") {
        Ok(p) if Path::new(&p).exists() => Some(p),
        _ => {
            eprintln!(
                "SKIPPED: tf_interop needs ACTORFLOW_TF_PYTHON (a Python with TensorFlow 2.21)"
            );
            None
        }
    }
}

fn script(name: &str) -> String {
    format!("{}/tests/tf_interop/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `n` ports of 127.0.0.1 free a moment ago.
fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// Waits for `child`'s first line of output and checks it starts with `ready`.
fn wait_ready(mut child: Child, ready: &str) -> Proc {
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    let _ = BufReader::new(out).read_line(&mut line);
    let p = Proc(child);
    assert!(line.starts_with(ready), "a server did not start: {line:?}");
    p
}

/// Runs the client against a cluster whose task `af_task` is actorflow's and the
/// other TensorFlow's.
fn mixed(py: &str, af_task: usize) {
    let ports = free_ports(2);
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let tf_task = 1 - af_task;
    let _af = wait_ready(
        Command::new(env!("CARGO_BIN_EXE_actorflow"))
            .args([
                "server",
                "--cluster",
                &format!("worker={}", addrs.join(",")),
            ])
            .args(["--job", "worker", "--task", &af_task.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the actorflow binary starts"),
        "listening on",
    );
    let spec = format!("{{\"worker\": [\"{}\", \"{}\"]}}", addrs[0], addrs[1]);
    let _tf = wait_ready(
        Command::new(py)
            .arg(script("tf_server.py"))
            .args([spec.as_str(), "worker", &tf_task.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python starts"),
        "ready",
    );
    let out = Command::new("timeout")
        .args(["120", py])
        .arg(script("tf_client.py"))
        .arg(format!("grpc://{}", addrs[0]))
        .stderr(Stdio::null())
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for want in ["result=2097158.0", "partial=6.0,2097158.0"] {
        assert!(
            stdout.lines().any(|l| l == want),
            "client output: {stdout:?} ({})",
            out.status
        );
    }
}

#[test]
fn an_actorflow_master_runs_a_graph_on_a_tensorflow_worker() {
    if let Some(py) = python() {
        mixed(&py, 0);
    }
}

#[test]
fn a_tensorflow_master_runs_a_graph_on_an_actorflow_worker() {
    if let Some(py) = python() {
        mixed(&py, 1);
    }
}

/// Every scenario of `scenarios.py`: a TensorFlow 2.21 client runs it on a
/// cluster of two actorflow servers and in a local TensorFlow session, and the
/// values agree.
#[test]
fn a_tensorflow_client_drives_an_actorflow_cluster() {
    let Some(py) = python() else {
        return;
    };
    let ports = free_ports(2);
    let cluster = format!("worker=127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1]);
    let _servers: Vec<Proc> = (0..2)
        .map(|t| {
            wait_ready(
                Command::new(env!("CARGO_BIN_EXE_actorflow"))
                    .args(["server", "--cluster", &cluster, "--job", "worker"])
                    .args(["--task", &t.to_string()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("the actorflow binary starts"),
                "listening on",
            )
        })
        .collect();
    let out = Command::new("timeout")
        .args(["300", &py])
        .arg(script("scenarios.py"))
        .arg(format!("grpc://127.0.0.1:{}", ports[0]))
        .stderr(Stdio::null())
        .output()
        .expect("the scenarios run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL "))
        .collect();
    let failed: Vec<&&str> = results.iter().filter(|l| l.starts_with("FAIL")).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    for name in [
        "arithmetic",
        "variables",
        "control_flow",
        "queues",
        "training",
        "saver",
        "run_metadata",
        "callables",
        "partial_run",
        "callable_from_options",
        "errors",
        "list_devices",
        "reset",
    ] {
        assert!(
            results.contains(&format!("PASS {name}").as_str()),
            "{name} did not run: {stdout}"
        );
    }
}

/// A tensor bundle actorflow wrote is read by TensorFlow's `RestoreV2`, and
/// TensorFlow's `SaveV2` of the same tensors in the same order gives the same
/// bytes, which actorflow reads back. The 2 500 long names make an index of
/// several blocks (TensorFlow's separator keys between them).
#[test]
fn tensorflow_and_actorflow_read_and_write_the_same_bundles() {
    use actorflow::graph::bf16;
    use actorflow::kernels::cpu::checkpoint::bundle::{
        data_path, index_path, write_bundle, CheckpointReader,
    };
    use actorflow::Tensor;
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let long = "x".repeat(300);
    let mut tensors: Vec<(String, Tensor)> = vec![
        (
            "w".into(),
            Tensor::new(&[2, 3], vec![1.5f32, -2.0, 3.25, 0.0, 0.125, 7.0]).unwrap(),
        ),
        ("step".into(), Tensor::scalar(9i64)),
        ("mask".into(), Tensor::vector(&[true, false])),
        ("brain".into(), Tensor::vector(&[bf16::from_f32(0.5)])),
        (
            "words".into(),
            Tensor::from_strings(&[3], vec!["a".to_string(), String::new(), long]).unwrap(),
        ),
        (
            "nothing".into(),
            Tensor::from_strings::<String>(&[0], vec![]).unwrap(),
        ),
    ];
    let scope = "tower/layer/".repeat(20);
    for i in (0..2500).rev() {
        tensors.push((
            format!("{i:05}/{scope}kernel"),
            Tensor::vector(&[i as f32, -1.0]),
        ));
    }
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let ours = tmp.path().join("ours/model.ckpt");
    write_bundle(&ours, &refs).unwrap();
    let index = std::fs::read(index_path(&ours)).unwrap();
    assert!(
        index.len() > 2 * 256 * 1024,
        "an index of several blocks: {}",
        index.len()
    );
    let names = tmp.path().join("names.txt");
    let list: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).collect();
    std::fs::write(&names, list.join("\n")).unwrap();
    let theirs = tmp.path().join("theirs/model.ckpt");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    let out = Command::new(&py)
        .arg(script("bundle_peer.py"))
        .args([&ours, &theirs, &names])
        .stderr(Stdio::inherit())
        .output()
        .expect("the TensorFlow peer runs");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("ok"),
        "TensorFlow could not read actorflow's bundle: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(std::fs::read(index_path(&theirs)).unwrap(), index, "index");
    assert_eq!(
        std::fs::read(data_path(&theirs, 0, 1)).unwrap(),
        std::fs::read(data_path(&ours, 0, 1)).unwrap(),
        "data"
    );
    let r = CheckpointReader::open(&theirs).unwrap();
    for (name, t) in &tensors {
        assert_eq!(&r.tensor(name).unwrap(), t, "{name}");
    }
}

/// A bundle actorflow saved with slices (TensorFlow's partitioned variables:
/// row blocks, column blocks, a string tensor in two slices, beside a whole
/// tensor) is read by TensorFlow's checkpoint reader, which puts each tensor
/// together from its slices, and by its `RestoreV2` with the same slice specs;
/// TensorFlow's `SaveV2` of those slices with those specs gives the same bytes.
#[test]
fn tensorflow_reads_and_rewrites_a_sliced_bundle_actorflow_saved() {
    use actorflow::graph::ops::checkpoint::ShapeAndSlice;
    use actorflow::kernels::cpu::checkpoint::bundle::{data_path, index_path, BundleWriter};
    use actorflow::Tensor;
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let part = Tensor::new(&[10, 4], (0..40).map(|i| i as f32 - 8.5).collect()).unwrap();
    let cols = Tensor::new(&[3, 4], (0..12).map(|i| i as i64 * 1000).collect()).unwrap();
    let words = ["alpha", "", "gamma", "delta"];
    // (name, spec, the slice's value), in the order saved.
    let cut_f32 = |rows: std::ops::Range<usize>| {
        let v = &part.as_slice::<f32>().unwrap()[rows.start * 4..rows.end * 4];
        Tensor::new(&[rows.len(), 4], v.to_vec()).unwrap()
    };
    let cut_cols = |c: std::ops::Range<usize>| {
        let v = cols.as_slice::<i64>().unwrap();
        let out: Vec<i64> = (0..3)
            .flat_map(|r| v[r * 4 + c.start..r * 4 + c.end].to_vec())
            .collect();
        Tensor::new(&[3, c.len()], out).unwrap()
    };
    let saved: Vec<(&str, &str, Tensor)> = vec![
        ("part", "10 4 0,4:0,4", cut_f32(0..4)),
        ("part", "10 4 4,3:0,4", cut_f32(4..7)),
        ("part", "10 4 7,3:0,4", cut_f32(7..10)),
        ("cols", "3 4 -:2,2", cut_cols(2..4)),
        ("cols", "3 4 -:0,2", cut_cols(0..2)),
        (
            "words",
            "4 1,3",
            Tensor::from_strings(&[3], words[1..].to_vec()).unwrap(),
        ),
        (
            "words",
            "4 0,1",
            Tensor::from_strings(&[1], words[..1].to_vec()).unwrap(),
        ),
        ("plain", "", Tensor::vector(&[1.5f32, -2.0, 3.0])),
    ];
    let ours = tmp.path().join("ours/model.ckpt");
    let mut w = BundleWriter::new(&ours);
    for (name, spec, t) in &saved {
        match ShapeAndSlice::parse(spec).unwrap() {
            None => w.add(name, t).unwrap(),
            Some(sl) => w.add_slice(name, &sl.full_shape, &sl.slice, t).unwrap(),
        }
    }
    w.finish().unwrap();
    let requests = tmp.path().join("requests.json");
    let names: Vec<&str> = saved.iter().map(|s| s.0).collect();
    let specs: Vec<&str> = saved.iter().map(|s| s.1).collect();
    std::fs::write(
        &requests,
        serde_json::json!({"tensor_names": names, "shape_and_slices": specs}).to_string(),
    )
    .unwrap();
    let theirs = tmp.path().join("theirs/model.ckpt");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    let out = Command::new(&py)
        .arg(script("bundle_peer.py"))
        .arg("--slices")
        .args([&ours, &theirs, &requests])
        .stderr(Stdio::inherit())
        .output()
        .expect("the TensorFlow peer runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("ok"),
        "TensorFlow could not read actorflow's sliced bundle: {stdout}"
    );
    let reply: serde_json::Value = serde_json::from_str(lines.next().unwrap_or("")).unwrap();
    let read = &reply["tensors"];
    let listed: Vec<&String> = read.as_object().unwrap().keys().collect();
    assert_eq!(listed, ["cols", "part", "plain", "words"]);
    let f64s = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let as_f64 = |t: &Tensor| -> Vec<f64> {
        match t.dtype() {
            actorflow::DType::F32 => t
                .as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|&x| x as f64)
                .collect(),
            _ => t
                .as_slice::<i64>()
                .unwrap()
                .iter()
                .map(|&x| x as f64)
                .collect(),
        }
    };
    assert_eq!(read["part"]["shape"], serde_json::json!([10, 4]));
    assert_eq!(f64s(&read["part"]["values"]), as_f64(&part));
    assert_eq!(read["cols"]["dtype"], "int64");
    assert_eq!(f64s(&read["cols"]["values"]), as_f64(&cols));
    assert_eq!(read["words"]["shape"], serde_json::json!([4]));
    assert_eq!(read["plain"]["values"], serde_json::json!([1.5, -2.0, 3.0]));
    // Each slice as TensorFlow's RestoreV2 read it.
    for ((name, spec, t), got) in saved.iter().zip(reply["restored"].as_array().unwrap()) {
        if t.dtype() == actorflow::DType::String {
            let want: Vec<String> = t
                .as_strings()
                .unwrap()
                .iter()
                .map(|b| String::from_utf8(b.to_vec()).unwrap())
                .collect();
            assert_eq!(got, &serde_json::json!(want), "{name} {spec}");
        } else {
            assert_eq!(f64s(got), as_f64(t), "{name} {spec}");
        }
    }
    assert_eq!(
        std::fs::read(index_path(&theirs)).unwrap(),
        std::fs::read(index_path(&ours)).unwrap(),
        "index"
    );
    assert_eq!(
        std::fs::read(data_path(&theirs, 0, 1)).unwrap(),
        std::fs::read(data_path(&ours, 0, 1)).unwrap(),
        "data"
    );
}
