//! Between-graph replicated training of the digits MLP (64 → 128 ReLU → 10,
//! Adam) on a cluster of **processes**: one parameter server and two workers on
//! 127.0.0.1, each an `actorflow` server in its own process (this example re-runs
//! itself with `--role`). Each worker runs its own client and graph, built under
//! `replica_device_setter` (variables on `/job:ps/task:0`, everything else on the
//! worker), and trains through a `MonitoredTrainingSession` whose master is its
//! own server; worker 0 is the chief (it initialises the model and evaluates it).
//!
//! - `--mode sync`: `SyncReplicasOptimizer` averages both workers' gradients into
//!   one update per global step (accumulators and a token queue on the ps, the
//!   chief's sync loop from `SyncReplicasHook`).
//! - `--mode async`: each worker applies its own gradients (Downpour-style).
//!
//! The last line printed is `test_accuracy=<fraction>` (the chief's evaluation of
//! the test split after training).
//!
//! ```sh
//! cargo run --release --example distributed_digits -- --mode sync
//! cargo run --release --example distributed_digits -- --mode async
//! ```

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actorflow::ops;
use actorflow::train::{
    get_or_create_global_step, with_replica_device_setter, AdamOptimizer, MonitoredTrainingSession,
    Optimizer, ReplicaDeviceSetter, SessionRunHook, SyncReplicasHook, SyncReplicasOptimizer,
    TrainingConfig,
};
use actorflow::{
    ClusterSpec, Code, DType, Output, Result, Scope, Server, ServerOptions, SessionOptions, Shape,
    Status, Tensor,
};
use clap::{Parser, ValueEnum};

const PIXELS: usize = 64;
const HIDDEN: usize = 128;
const CLASSES: usize = 10;
/// Worker tasks (replicas).
pub const WORKERS: usize = 2;

/// How the workers' gradients reach the variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Averaged by `SyncReplicasOptimizer`, one update per global step.
    Sync,
    /// Each worker applies its own.
    Async,
}

/// A child process's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// The parameter server.
    Ps,
    /// A worker with its own client.
    Worker,
}

#[derive(Clone, Debug, Parser)]
#[command(about = "The digits MLP trained by 1 ps + 2 worker processes, sync or async")]
pub struct Config {
    /// How the workers' gradients reach the variables.
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    pub mode: Mode,
    /// Train until the global step reaches this.
    #[arg(long, default_value_t = 600)]
    pub steps: i64,
    /// Examples per worker step.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Adam's step size.
    #[arg(long, default_value_t = 0.003)]
    pub learning_rate: f64,
    /// The directory holding train-*.csv and test-*.csv.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits"))]
    pub data_dir: PathBuf,
    /// The most the whole run may take, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Send float32 tensors between tasks as bfloat16 (the lossy transfers of
    /// the whitepaper's §5.5, TensorFlow's `enable_bfloat16_sendrecv`).
    #[arg(long)]
    pub bfloat16_sendrecv: bool,
    /// (internal) This process's role in the cluster.
    #[arg(long, value_enum, hide = true)]
    pub role: Option<Role>,
    /// (internal) The cluster: `ps=ADDR;worker=ADDR,ADDR`.
    #[arg(long, hide = true)]
    pub cluster: Option<String>,
    /// (internal) This process's task index.
    #[arg(long, default_value_t = 0, hide = true)]
    pub task: u32,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Status + '_ {
    move |e| Status::unavailable(format!("{what}: {e}"))
}

/// Rows of the `<prefix>-*.csv` shards: pixels / 16 and labels.
fn load(dir: &std::path::Path, prefix: &str) -> Result<(Vec<f32>, Vec<i32>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io("data dir"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{prefix}-")) && n.ends_with(".csv"))
        })
        .collect();
    files.sort();
    let (mut px, mut labels) = (Vec::new(), Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(io("data file"))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Vec<&str> = line.split(',').collect();
            let bad = || Status::invalid_argument(format!("{}: bad row", f.display()));
            if v.len() != PIXELS + 1 {
                return Err(bad());
            }
            for p in &v[..PIXELS] {
                px.push(p.trim().parse::<f32>().map_err(|_| bad())? / 16.0);
            }
            labels.push(v[PIXELS].trim().parse::<i32>().map_err(|_| bad())?);
        }
    }
    if labels.is_empty() {
        return Err(Status::not_found(format!(
            "no {prefix}-*.csv rows in {}",
            dir.display()
        )));
    }
    Ok((px, labels))
}

fn spec_of(cluster: &str) -> Result<ClusterSpec> {
    let mut spec = ClusterSpec::new();
    for job in cluster.split(';') {
        let (name, addrs) = job
            .split_once('=')
            .ok_or_else(|| Status::invalid_argument(format!("bad cluster job '{job}'")))?;
        let addrs: Vec<String> = addrs.split(',').map(str::to_owned).collect();
        spec = spec.with_job(name, &addrs)?;
    }
    Ok(spec)
}

/// The worker's graph: the MLP on fed batches, trained sync or async.
struct Model {
    scope: Scope,
    x: Output,
    y: Output,
    loss: Output,
    train_op: String,
    predictions: Output,
    hook: Option<SyncReplicasHook>,
}

fn build(cfg: &Config, task: u32) -> Result<Model> {
    let root = Scope::new();
    let s = with_replica_device_setter(
        &root,
        &ReplicaDeviceSetter {
            ps_tasks: 1,
            worker_device: format!("/job:worker/task:{task}"),
            ..Default::default()
        },
    )?;
    let step = get_or_create_global_step(&s)?;
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(PIXELS)]))?;
    let y = ops::placeholder(&s, DType::I32, Shape::from_dims(&[None]))?;
    let dense = |name: &str, rows: usize, cols: usize, seed: i64| -> Result<(Output, Output)> {
        let dims = ops::constant(&s, Tensor::vector(&[rows as i32, cols as i32]))?;
        let init = ops::mul(
            &s,
            &ops::truncated_normal(&s, &dims, DType::F32, seed, 0)?,
            &ops::scalar(&s, (2.0 / rows as f32).sqrt())?,
        )?;
        let w = ops::Variable::new(&s, &format!("{name}_w"), &init, true)?;
        let zeros = ops::constant(&s, Tensor::zeros(DType::F32, vec![cols]))?;
        let b = ops::Variable::new(&s, &format!("{name}_b"), &zeros, true)?;
        Ok((w.value, b.value))
    };
    let (w1, b1) = dense("hidden", PIXELS, HIDDEN, 7)?;
    let (w2, b2) = dense("logits", HIDDEN, CLASSES, 8)?;
    let h = ops::relu(
        &s,
        &ops::bias_add(&s, &ops::mat_mul(&s, &x, &w1, false, false)?, &b1, "NHWC")?,
    )?;
    let logits = ops::bias_add(&s, &ops::mat_mul(&s, &h, &w2, false, false)?, &b2, "NHWC")?;
    let (xent, _) = ops::sparse_softmax_cross_entropy_with_logits(&s, &logits, &y)?;
    let loss = ops::mean_axes(&s, &xent, &[0], false)?;
    let predictions = ops::arg_max_axis(&s, &logits, 1, DType::I32)?;
    let adam = AdamOptimizer::new(cfg.learning_rate);
    let (train_op, hook) = match cfg.mode {
        Mode::Async => (adam.minimize(&s, &loss, Some(&step), None)?, None),
        Mode::Sync => {
            let opt = SyncReplicasOptimizer::new(adam, WORKERS, Some(WORKERS));
            let op = opt.minimize(&s, &loss, Some(&step), None)?;
            let hook = SyncReplicasHook::new(&opt, &s, task == 0, -1)?;
            (op, Some(hook))
        }
    };
    Ok(Model {
        scope: root,
        x,
        y,
        loss,
        train_op: train_op.name().to_owned(),
        predictions,
        hook,
    })
}

/// What a worker's training did.
#[derive(Debug)]
pub struct Report {
    /// Steps it ran.
    pub ran: usize,
    /// The global step at its end.
    pub global_step: i64,
    /// Its last batch's loss.
    pub loss: f32,
    /// The chief's test accuracy (`None` on other workers).
    pub accuracy: Option<f64>,
}

/// Worker `task`'s client: builds its graph and trains through the master at
/// `master` to `cfg.steps`; the chief then evaluates the test split.
pub fn train_worker(cfg: &Config, task: u32, master: &str) -> Result<Report> {
    let (px, labels) = load(&cfg.data_dir, "train")?;
    let mut m = build(cfg, task)?;
    let hooks: Vec<Box<dyn SessionRunHook>> = m
        .hook
        .take()
        .map(|h| Box::new(h) as Box<dyn SessionRunHook>)
        .into_iter()
        .collect();
    let tc = TrainingConfig {
        master: Some(master.to_owned()),
        is_chief: task == 0,
        last_step: Some(cfg.steps),
        session_options: SessionOptions::default()
            .with_enable_bfloat16_sendrecv(cfg.bfloat16_sendrecv),
        ..Default::default()
    };
    let mut sess = MonitoredTrainingSession::new(&m.scope, &tc, hooks)?;
    // Each worker draws its own batches (a simple LCG seeded by its task).
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(task);
    let (xn, yn, loss) = (m.x.name(), m.y.name(), m.loss.name());
    let mut last = f32::NAN;
    let mut ran = 0;
    while !sess.should_stop() {
        let (mut bx, mut by) = (Vec::new(), Vec::new());
        for _ in 0..cfg.batch_size {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let i = (rng >> 33) as usize % labels.len();
            bx.extend_from_slice(&px[i * PIXELS..(i + 1) * PIXELS]);
            by.push(labels[i]);
        }
        let feeds = [
            (xn.as_str(), Tensor::new(&[cfg.batch_size, PIXELS], bx)?),
            (yn.as_str(), Tensor::vector(&by)),
        ];
        match sess.run(&feeds, &[&loss], &[&m.train_op]) {
            Ok(v) => last = v[0].scalar_value::<f32>()?,
            // The chief closed the token queue: training is over.
            Err(e) if e.code() == Code::OutOfRange => break,
            Err(e) => return Err(e),
        }
        ran += 1;
    }
    let accuracy = if task == 0 {
        let (tx, tl) = load(&cfg.data_dir, "test")?;
        let x = Tensor::new(&[tl.len(), PIXELS], tx)?;
        let out = sess
            .session()
            .run(&[(&xn, x)], &[&m.predictions.name()], &[])?;
        let hits = out[0]
            .as_slice::<i32>()?
            .iter()
            .zip(&tl)
            .filter(|(p, l)| p == l)
            .count();
        Some(hits as f64 / tl.len() as f64)
    } else {
        None
    };
    let report = Report {
        ran,
        global_step: sess.global_step(),
        loss: last,
        accuracy,
    };
    sess.close()?;
    Ok(report)
}

/// A worker process: its server, then its own client.
fn worker(cfg: &Config, spec: ClusterSpec) -> Result<()> {
    let server = Server::start(ServerOptions::new(spec, "worker", cfg.task))?;
    let r = train_worker(cfg, cfg.task, &server.target())?;
    println!(
        "worker {} ran {} steps; global_step={} loss={:.4}",
        cfg.task, r.ran, r.global_step, r.loss
    );
    if let Some(acc) = r.accuracy {
        println!("test_accuracy={acc:.4}");
    }
    Ok(())
}

/// Kills the child processes it holds when dropped.
struct Children(Vec<(String, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The parent: three processes, the workers' output, the chief's accuracy.
fn orchestrate(cfg: &Config) -> Result<f64> {
    let free = || -> Result<String> {
        let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("bind"))?;
        Ok(l.local_addr().map_err(io("bind"))?.to_string())
    };
    let ps = free()?;
    let workers = (0..WORKERS).map(|_| free()).collect::<Result<Vec<_>>>()?;
    let cluster = format!("ps={ps};worker={}", workers.join(","));
    let exe = std::env::current_exe().map_err(io("current_exe"))?;
    let spawn = |role: &str, task: usize| -> Result<Child> {
        Command::new(&exe)
            .args([
                "--role",
                role,
                "--task",
                &task.to_string(),
                "--cluster",
                &cluster,
            ])
            .args([
                "--mode",
                if cfg.mode == Mode::Sync {
                    "sync"
                } else {
                    "async"
                },
            ])
            .args(["--steps", &cfg.steps.to_string()])
            .args(["--batch-size", &cfg.batch_size.to_string()])
            .args(["--learning-rate", &cfg.learning_rate.to_string()])
            .args(cfg.bfloat16_sendrecv.then_some("--bfloat16-sendrecv"))
            .arg("--data-dir")
            .arg(&cfg.data_dir)
            // A child whose parent is gone sees its stdin close and exits.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(io("spawn"))
    };
    let mut children = Children(Vec::new());
    children.0.push(("ps 0".into(), spawn("ps", 0)?));
    for t in 0..WORKERS {
        children
            .0
            .push((format!("worker {t}"), spawn("worker", t)?));
    }
    let deadline = Instant::now() + Duration::from_secs(cfg.timeout_secs);
    // Every worker must finish; the first to fail (or the deadline) ends the run.
    let mut done = vec![false; children.0.len()];
    done[0] = true;
    while done.iter().any(|d| !d) {
        for (i, (name, child)) in children.0.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            if let Some(status) = child.try_wait().map_err(io("wait"))? {
                if !status.success() {
                    return Err(Status::internal(format!("{name} exited with {status}")));
                }
                done[i] = true;
            }
        }
        if Instant::now() > deadline {
            return Err(Status::deadline_exceeded(format!(
                "the workers did not finish in {} s",
                cfg.timeout_secs
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut accuracy = None;
    for (name, child) in children.0.iter_mut().skip(1) {
        let mut out = String::new();
        if let Some(o) = child.stdout.as_mut() {
            o.read_to_string(&mut out).map_err(io("read"))?;
        }
        for line in out.lines() {
            println!("[{name}] {line}");
            if let Some(v) = line.strip_prefix("test_accuracy=") {
                accuracy = v.parse::<f64>().ok();
            }
        }
    }
    accuracy.ok_or_else(|| Status::internal("the chief printed no test accuracy"))
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let cfg = Config::parse();
    match (cfg.role, &cfg.cluster) {
        (None, _) => {
            let acc = orchestrate(&cfg)?;
            println!("test_accuracy={acc:.4}");
            Ok(())
        }
        (Some(_), None) => Err(Status::invalid_argument("--role needs --cluster")),
        (Some(role), Some(cluster)) => {
            let spec = spec_of(cluster)?;
            // Exit when the parent goes away (its end of stdin closes).
            std::thread::spawn(|| {
                let mut sink = String::new();
                let _ = BufReader::new(std::io::stdin()).read_line(&mut sink);
                std::process::exit(0);
            });
            match role {
                Role::Ps => {
                    let _server = Server::start(ServerOptions::new(spec, "ps", cfg.task))?;
                    loop {
                        std::thread::park();
                    }
                }
                Role::Worker => worker(&cfg, spec),
            }
        }
    }
}
