//! Between-graph replicated training on a cluster of processes: a ps and two
//! worker `actorflow server` processes on 127.0.0.1; each worker's client (a
//! thread here, as a worker's own process would run it) builds its graph under
//! `replica_device_setter` and trains the digits MLP through its worker's master,
//! synchronously (`SyncReplicasOptimizer`) and asynchronously. Both reach ≥ 95% on
//! the test split, and so does synchronous training whose float32 transfers
//! travel as bfloat16 (`enable_bfloat16_sendrecv`). Every process is killed when
//! the test ends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use clap::Parser;

#[allow(dead_code)]
#[path = "../examples/distributed_digits.rs"]
mod example;

/// A server process, killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `job`'s task `task` of `cluster` and waits until it listens.
fn server(cluster: &[String], job: &str, task: usize) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_actorflow"));
    cmd.arg("server");
    for c in cluster {
        cmd.args(["--cluster", c]);
    }
    let mut child = cmd
        .args(["--job", job, "--task", &task.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the actorflow binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on"), "{line:?}");
    Proc(child)
}

fn train(mode: &str, extra: &[&str]) -> Vec<example::Report> {
    let ports: Vec<String> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    let cluster = vec![
        format!("ps={}", ports[0]),
        format!("worker={},{}", ports[1], ports[2]),
    ];
    let _ps = server(&cluster, "ps", 0);
    let _workers: Vec<Proc> = (0..2).map(|t| server(&cluster, "worker", t)).collect();
    let mut args = vec!["test", "--mode", mode, "--steps", "400"];
    args.extend_from_slice(extra);
    let cfg = example::Config::parse_from(args);
    let clients: Vec<_> = (0..example::WORKERS)
        .map(|t| {
            let cfg = cfg.clone();
            let master = format!("grpc://{}", ports[1 + t]);
            std::thread::spawn(move || example::train_worker(&cfg, t as u32, &master))
        })
        .collect();
    clients
        .into_iter()
        .map(|c| c.join().unwrap().unwrap())
        .collect()
}

#[test]
fn synchronous_replicas_on_a_ps_reach_95_percent() {
    let r = train("sync", &[]);
    let acc = r[0].accuracy.expect("the chief evaluates");
    assert!(acc >= 0.95, "test accuracy {acc}");
    // One update per global step, from both workers' gradients.
    assert_eq!(r[0].global_step, 400);
    assert!(r.iter().all(|w| w.ran > 0), "{r:?}");
}

#[test]
fn asynchronous_replicas_on_a_ps_reach_95_percent() {
    let r = train("async", &[]);
    let acc = r[0].accuracy.expect("the chief evaluates");
    assert!(acc >= 0.95, "test accuracy {acc}");
    assert!(r.iter().all(|w| w.global_step >= 400), "{r:?}");
}

#[test]
fn bfloat16_transfers_still_reach_95_percent() {
    // Parameters go to the workers and gradients to the ps as bfloat16: three
    // significant digits, enough for SGD on this model (the whitepaper's §5.5).
    let r = train("sync", &["--bfloat16-sendrecv"]);
    let acc = r[0].accuracy.expect("the chief evaluates");
    eprintln!("bfloat16 transfers: test accuracy {acc}");
    assert!(acc >= 0.95, "test accuracy {acc}");
    assert_eq!(r[0].global_step, 400);
}
