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
