//! Clusters of `actorflow server` processes on 127.0.0.1: a step spans two
//! processes; a worker killed (SIGKILL) mid-step fails the step within a bound
//! and a session opens again once the worker is restarted; SIGTERM stops a server
//! cleanly. Every process a test starts is killed when the test ends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actorflow::ops::{self, QueueOptions};
use actorflow::{
    Code, Connect, DType, RunArgs, RunOptions, Scope, Session, SessionOptions, Shape, Tensor,
};

/// A server process, killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

fn cluster_flag(ports: &[u16]) -> String {
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    format!("worker={}", addrs.join(","))
}

/// Starts task `task` and waits for its "listening on" line.
fn start(ports: &[u16], task: usize) -> Proc {
    start_with(ports, task, &[])
}

/// [`start`] with more flags.
fn start_with(ports: &[u16], task: usize, flags: &[&str]) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_actorflow"))
        .args([
            "server",
            "--cluster",
            &cluster_flag(ports),
            "--job",
            "worker",
        ])
        .args(["--task", &task.to_string()])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the actorflow binary starts");
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    assert!(line.starts_with("listening on"), "{line:?}");
    Proc(child)
}

fn target(ports: &[u16], task: usize) -> String {
    format!("grpc://127.0.0.1:{}", ports[task])
}

#[test]
fn a_step_spans_two_processes() {
    let ports = free_ports(2);
    let _w0 = start(&ports, 0);
    let _w1 = start(&ports, 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let y = ops::add(&s.with_device("/job:worker/task:1"), &x, &x).unwrap();
    let sess = Session::connect(
        &target(&ports, 0),
        &s.graph_def(),
        SessionOptions::default(),
    )
    .unwrap();
    for v in [1.5f32, -2.0, 1e6] {
        let out = sess
            .run(&[(&x.name(), Tensor::scalar(v))], &[&y.name()], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(2.0 * v));
    }
    let devices = sess.list_devices().unwrap();
    assert_eq!(devices.len(), 2, "{devices:?}");
    sess.close().unwrap();
}

#[test]
fn a_worker_killed_mid_step_fails_the_step_within_the_bound_and_a_restart_recovers() {
    let ports = free_ports(2);
    let _w0 = start(&ports, 0);
    let mut w1 = start(&ports, 1);
    let s = Scope::new();
    let remote = s.with_device("/job:worker/task:1");
    let q = ops::fifo_queue(&remote, &[DType::F32], &QueueOptions::default()).unwrap();
    let deq = ops::queue_dequeue(&remote, &q, &[DType::F32]).unwrap();
    let y = ops::add(&s, &deq[0], &deq[0]).unwrap();
    let gd = s.graph_def();
    let sess = Session::connect(&target(&ports, 0), &gd, SessionOptions::default()).unwrap();
    let name = y.name();
    let step = {
        let sess = sess.clone();
        std::thread::spawn(move || {
            // Waits on task 1's empty queue until task 1 dies.
            let t0 = Instant::now();
            let r = sess.run_with(&RunArgs::new().fetch(&name).options(RunOptions::default()));
            (r, t0.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    w1.0.kill().unwrap();
    let _ = w1.0.wait();
    let (r, _) = step.join().unwrap();
    let e = r.unwrap_err();
    assert!(matches!(e.code(), Code::Unavailable | Code::Aborted), "{e}");
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "{:?}",
        killed.elapsed()
    );
    // The session reports the failure; a new one works once task 1 is back.
    drop(w1);
    let _w1 = start(&ports, 1);
    let s2 = Scope::new();
    let x = ops::scalar(&s2.with_device("/job:worker/task:1"), 3.0f32).unwrap();
    let z = ops::mul(&s2, &x, &x).unwrap();
    let sess = Session::connect(
        &target(&ports, 0),
        &s2.graph_def(),
        SessionOptions::default(),
    )
    .unwrap();
    assert_eq!(
        sess.run(&[], &[&z.name()], &[]).unwrap()[0],
        Tensor::scalar(9.0f32)
    );
}

#[test]
fn sigterm_stops_a_server_cleanly() {
    let ports = free_ports(1);
    let mut w = start(&ports, 0);
    let pid = w.0.id().to_string();
    let st = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    loop {
        if let Some(status) = w.0.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_frozen_worker_fails_the_step_within_the_bound() {
    let ports = free_ports(2);
    let _w0 = start(&ports, 0);
    let w1 = start(&ports, 1);
    let s = Scope::new();
    let remote = s.with_device("/job:worker/task:1");
    let q = ops::fifo_queue(&remote, &[DType::F32], &QueueOptions::default()).unwrap();
    let deq = ops::queue_dequeue(&remote, &q, &[DType::F32]).unwrap();
    let y = ops::add(&s, &deq[0], &deq[0]).unwrap();
    let sess = Session::connect(
        &target(&ports, 0),
        &s.graph_def(),
        SessionOptions::default(),
    )
    .unwrap();
    let name = y.name();
    let step = std::thread::spawn(move || sess.run(&[], &[&name], &[]));
    std::thread::sleep(Duration::from_millis(300));
    let pid = w1.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let frozen = Instant::now();
    let r = step.join().unwrap();
    let waited = frozen.elapsed();
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    let e = r.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    // keepalive 2 s + 5 s by default
    assert!(waited < Duration::from_secs(12), "{waited:?}");
}

/// A CA and a certificate for 127.0.0.1 signed by it, as PEM files in `dir`:
/// (cert, key, ca).
fn certificates(dir: &std::path::Path) -> [String; 3] {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let files = [
        ("cert.pem", cert.pem()),
        ("key.pem", key.serialize_pem()),
        ("ca.pem", ca.pem()),
    ];
    files.map(|(name, pem)| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p.to_string_lossy().into_owned()
    })
}

#[test]
fn a_cluster_over_mutual_tls_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("actorflow-tls-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let [cert, key, ca] = certificates(&dir);
    let tls = ["--tls-cert", &cert, "--tls-key", &key, "--tls-ca", &ca];
    let ports = free_ports(2);
    let _w0 = start_with(&ports, 0, &tls);
    let _w1 = start_with(&ports, 1, &tls);
    // x * 2 on task 1, fetched through task 0's master by the CLI over TLS.
    let s = Scope::new();
    let two = ops::scalar(&s, 2.0f32).unwrap();
    let x = ops::scalar(&s, 21.0f32).unwrap();
    let y = s
        .with_device("/job:worker/task:1")
        .op("Mul")
        .name("y")
        .input(&x)
        .input(&two)
        .build1()
        .unwrap();
    let graph = dir.join("g.json");
    std::fs::write(&graph, s.graph_def().to_json().unwrap()).unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_actorflow"))
            .args(["run", &graph.to_string_lossy(), "--fetch", &y.name()])
            .args(["--master", &target(&ports, 0)])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&tls);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "y:0 (float32 []) = 42"
    );
    // Without TLS the server refuses the client: a clear error, exit code
    // UNAVAILABLE (14).
    let o = run(&[]);
    assert_eq!(
        o.status.code(),
        Some(14),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Half the flags is a usage error.
    let o = run(&["--tls-cert", &cert]);
    assert_eq!(
        o.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
