//! The model-server workloads: throughput and tail latency of
//! [`ModelServer`] answering TensorFlow Serving's
//! gRPC `Predict` over 127.0.0.1, with and without inter-request batching, and
//! while a new model version is swapped in.
//!
//! The model is the digits-style MLP of `mlp_step_us` (784→256 ReLU→10, the
//! same seeded truncated-normal weights scaled by `sqrt(1/fan_in)`, zero
//! biases) with a softmax on top, exported with [`SavedModelBuilder`] as
//! version 1 under `<tmp>/mlp` with a `serving_default` predict signature:
//! input `x` (`float32 [-1, 784]`) → output `probabilities` (`float32 [-1, 10]`).
//!
//! The load is a [`LoadGenerator`]: [`CLIENTS`] (64) clients, each a tokio task
//! with a gRPC connection of its own (a tonic `PredictionServiceClient`), each
//! sending a single-example `Predict` (one row of 784 `float32`) as soon as its
//! previous one answered (a closed loop), for a fixed window. Every answer is
//! checked (a `[1, 10]` output summing to 1); every latency is recorded;
//! throughput is answered requests per second of the window, latencies are
//! nearest-rank percentiles. A request that fails, answers wrongly or takes
//! longer than [`REQUEST_TIMEOUT`] is a failure, and a window with any failure
//! fails the benchmark (it reports no figure). The clients run on a tokio
//! runtime of their own in the same process, on the same cores as the server,
//! and connect (each sending one unmeasured request) before the window opens.
//!
//! The batching parameters are TensorFlow Serving's usual CPU choice
//! ([`batching_options`]): `max_batch_size` 32, `batch_timeout_micros` 1000,
//! `num_batch_threads` = the machine's cores, `max_enqueued_batches` 1000, no
//! `allowed_batch_sizes`. Warmup is on (the server's default: one synthetic
//! request per signature before a version serves).
//!
//! Figures, each measured by its own workload on its own server:
//!
//! - `serve_mlp_rps`, `serve_mlp_p99_ms`: requests per second and p99 latency
//!   over a 1 s window, batching on; `serve_mlp_rps_unbatched`,
//!   `serve_mlp_p99_ms_unbatched`: the same with batching off (every request
//!   its own session run).
//! - `serve_mlp_batch32_ms`: milliseconds per session run of the exported model
//!   on a batch of 32 rows, loaded in-process (no server): the compute a full
//!   batch costs, for the latency target `p99 ≤ 2 × batch_timeout + batch-32
//!   time`.
//! - `serve_swap_p99_ms`: p99 latency over a 1.5 s window (batching on) in
//!   which, 0.3 s in, a new version (exported beforehand into a staging
//!   directory) is renamed into the base path; the server's source finds it
//!   (polling every 100 ms), loads and warms it up, and swaps it in for the old
//!   one, which unloads. The repetition fails unless the new version is the only
//!   one serving before the window ends. `serve_steady_p99_ms`: the same window
//!   on the same kind of server without a swap, so that the ratio
//!   swap / steady can be read.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::tensorflow::serving as pb;
use tonic::transport::{Channel, Endpoint};

use pb::prediction_service_client::PredictionServiceClient;

use crate::graph::import::{tensor_from_proto, tensor_to_proto};
use crate::saved_model::{
    MetaGraphOptions, SavedModel, SavedModelBuilder, Signature, TensorSpec,
    DEFAULT_SERVING_SIGNATURE_DEF_KEY, PREDICT_METHOD_NAME, TAG_SERVE,
};
use crate::serving::{BatchingOptions, ModelConfig, ModelServer, ServerOptions, VersionRequest};
use crate::{ops, DType, Result, Scope, Session, SessionOptions, Shape, Status, Tensor};

use super::workloads::REPETITION;
use super::{calibrate, time_per_call, Repetition};

/// The MLP's input, hidden and class sizes (`mlp_step_us`'s).
pub const INPUT: usize = 784;
/// Hidden units.
pub const HIDDEN: usize = 256;
/// Classes.
pub const CLASSES: usize = 10;
/// The model's name on the server.
pub const MODEL: &str = "mlp";
/// The signature's input key.
pub const INPUT_KEY: &str = "x";
/// The signature's output key.
pub const OUTPUT_KEY: &str = "probabilities";

/// Concurrent clients of every serving workload.
pub const CLIENTS: usize = 64;
/// The window of the throughput and latency workloads.
pub const LOAD_WINDOW: Duration = Duration::from_millis(1000);
/// The window of `serve_swap_p99_ms` and `serve_steady_p99_ms`.
pub const SWAP_WINDOW: Duration = Duration::from_millis(1500);
/// When, into [`SWAP_WINDOW`], the new version is dropped into the base path.
pub const SWAP_AT: Duration = Duration::from_millis(300);
/// A request answering later than this is a failure.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most requests one window sends (all clients together).
pub const MAX_REQUESTS: u64 = 2_000_000;
/// `max_batch_size` of [`batching_options`].
pub const MAX_BATCH_SIZE: usize = 32;
/// `batch_timeout_micros` of [`batching_options`].
pub const BATCH_TIMEOUT: Duration = Duration::from_micros(1000);
/// `max_enqueued_batches` of [`batching_options`].
pub const MAX_ENQUEUED_BATCHES: usize = 1000;

/// The machine's cores.
fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The batching parameters of the batched workloads (see the module docs).
pub fn batching_options() -> BatchingOptions {
    BatchingOptions {
        max_batch_size: MAX_BATCH_SIZE,
        batch_timeout: BATCH_TIMEOUT,
        max_enqueued_batches: MAX_ENQUEUED_BATCHES,
        num_batch_threads: cores(),
        allowed_batch_sizes: Vec::new(),
        pad_variable_length_inputs: false,
    }
}

// ---------------------------------------------------------------------------
// The model.
// ---------------------------------------------------------------------------

/// Writes the MLP SavedModel (see the module docs) to `export_dir`, which must
/// not exist or be empty; the builder writes it beside and renames it in, so a
/// source polling the parent never sees half of it. `version` varies the
/// weights' second seed, so that each version is a different model of the same
/// shape (version 1 has `mlp_step_us`'s weights).
pub fn export_mlp(export_dir: &Path, version: i64) -> Result<PathBuf> {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(INPUT)]))?;
    let weights = |name: &str, rows: usize, cols: usize, seed: i64| -> Result<ops::Variable> {
        let dims = ops::constant(&s, Tensor::vector(&[rows as i32, cols as i32]))?;
        let scale = ops::scalar(&s, (1.0 / rows as f64).sqrt() as f32)?;
        let init = ops::mul(
            &s,
            &ops::truncated_normal(&s, &dims, DType::F32, seed, version - 1)?,
            &scale,
        )?;
        ops::Variable::new(&s, name, &init, true)
    };
    let bias = |name: &str, n: usize| -> Result<ops::Variable> {
        ops::Variable::new(
            &s,
            name,
            &ops::constant(&s, Tensor::zeros(DType::F32, vec![n]))?,
            true,
        )
    };
    let (w1, b1) = (weights("w1", INPUT, HIDDEN, 1)?, bias("b1", HIDDEN)?);
    let (w2, b2) = (weights("w2", HIDDEN, CLASSES, 2)?, bias("b2", CLASSES)?);
    let h = ops::mat_mul(&s, &x, &w1.value, false, false)?;
    let h = ops::relu(&s, &ops::bias_add(&s, &h, &b1.value, "NHWC")?)?;
    let logits = ops::bias_add(
        &s,
        &ops::mat_mul(&s, &h, &w2.value, false, false)?,
        &b2.value,
        "NHWC",
    )?;
    let probabilities = ops::softmax(&s, &logits)?;
    let session = Session::new(&s.graph_def(), SessionOptions::default())?;
    let inits: Vec<&str> = [&w1, &b1, &w2, &b2]
        .iter()
        .map(|v| v.initializer.name())
        .collect();
    session.run(&[], &[], &inits)?;
    let signature = Signature::new(PREDICT_METHOD_NAME)
        .input(INPUT_KEY, TensorSpec::of(&x))
        .output(OUTPUT_KEY, TensorSpec::of(&probabilities));
    let mut b = SavedModelBuilder::new(export_dir)?;
    b.add_meta_graph_and_variables(
        &s,
        &session,
        &[TAG_SERVE],
        MetaGraphOptions::default().with_signature(DEFAULT_SERVING_SIGNATURE_DEF_KEY, signature),
    )?;
    b.save()
}

/// `rows` rows of 784 pixels in [0, 1] (`mlp_step_us`'s images).
pub fn images(rows: usize) -> Tensor {
    Tensor::build::<f32>([rows, INPUT], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, p)| *p = ((i * 7) % 17) as f32 / 16.0)
    })
}

/// The single-example `Predict` every client sends.
pub fn predict_request() -> pb::PredictRequest {
    pb::PredictRequest {
        model_spec: Some(pb::ModelSpec {
            name: MODEL.into(),
            version_choice: None,
            signature_name: DEFAULT_SERVING_SIGNATURE_DEF_KEY.into(),
        }),
        inputs: [(INPUT_KEY.to_owned(), tensor_to_proto(&images(1)))]
            .into_iter()
            .collect(),
        output_filter: vec![OUTPUT_KEY.into()],
    }
}

/// Checks an answer to [`predict_request`]: one row of 10 probabilities
/// summing to 1.
pub fn check_answer(r: &pb::PredictResponse) -> std::result::Result<(), String> {
    let p = r
        .outputs
        .get(OUTPUT_KEY)
        .ok_or_else(|| format!("the answer has no output '{OUTPUT_KEY}'"))?;
    let t = tensor_from_proto(p).map_err(|e| format!("the answer's tensor: {e}"))?;
    if t.dtype() != DType::F32 || t.dims() != [1, CLASSES] {
        return Err(format!(
            "the answer is {} {}, not float32 [1, {CLASSES}]",
            t.dtype(),
            t.shape()
        ));
    }
    let sum: f32 = t.as_slice::<f32>().map_err(|e| e.to_string())?.iter().sum();
    if (sum - 1.0).abs() > 1e-3 {
        return Err(format!("the probabilities sum to {sum}"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The load generator.
// ---------------------------------------------------------------------------

/// A closed-loop gRPC load: `clients` concurrent clients, each with a
/// connection of its own, each sending its next request as soon as the previous
/// one answered, for `duration` or until `max_requests` have been sent,
/// whichever comes first. Every request is bounded by `request_timeout`, so a
/// run ends within `duration + request_timeout` (plus the connects, bounded by
/// `request_timeout` too).
#[derive(Clone, Debug)]
pub struct LoadGenerator {
    /// Concurrent clients (connections).
    pub clients: usize,
    /// How long the clients keep sending.
    pub duration: Duration,
    /// The most requests of one run, all clients together.
    pub max_requests: u64,
    /// A request not answered within this is a failure.
    pub request_timeout: Duration,
}

/// What a [`LoadGenerator`] run measured.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Requests answered correctly.
    pub ok: u64,
    /// Requests that failed, answered wrongly or timed out.
    pub failed: u64,
    /// The first failure, when there was one.
    pub first_failure: Option<String>,
    /// From the window's start until the last client stopped.
    pub elapsed: Duration,
    /// The latency of every correctly answered request, ascending.
    pub latencies: Vec<Duration>,
}

impl LoadReport {
    /// Correct answers per second.
    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The nearest-rank `q`-quantile (0 < q ≤ 1) of the latencies; zero when
    /// there are none.
    pub fn percentile(&self, q: f64) -> Duration {
        let n = self.latencies.len();
        if n == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        self.latencies[rank - 1]
    }

    /// The median latency.
    pub fn p50(&self) -> Duration {
        self.percentile(0.50)
    }

    /// The 99th-percentile latency.
    pub fn p99(&self) -> Duration {
        self.percentile(0.99)
    }

    /// `Unavailable` naming `what`, the failure count and the first failure
    /// when any request failed, or when none was answered.
    pub fn check(&self, what: &str) -> Result<()> {
        if self.failed > 0 {
            return Err(Status::unavailable(format!(
                "{what}: {} of {} requests failed; the first: {}",
                self.failed,
                self.failed + self.ok,
                self.first_failure.as_deref().unwrap_or("?")
            )));
        }
        if self.ok == 0 {
            return Err(Status::unavailable(format!(
                "{what}: no request was answered in {:?}",
                self.elapsed
            )));
        }
        Ok(())
    }
}

/// What one client measured.
#[derive(Default)]
struct ClientStats {
    latencies: Vec<Duration>,
    failed: u64,
    first_failure: Option<String>,
}

/// Checks one answer.
pub type AnswerCheck = fn(&pb::PredictResponse) -> std::result::Result<(), String>;

impl LoadGenerator {
    /// [`CLIENTS`] clients for `duration`, at most [`MAX_REQUESTS`] requests,
    /// each within [`REQUEST_TIMEOUT`].
    pub fn new(duration: Duration) -> LoadGenerator {
        LoadGenerator {
            clients: CLIENTS,
            duration,
            max_requests: MAX_REQUESTS,
            request_timeout: REQUEST_TIMEOUT,
        }
    }

    /// Sends `request` to the `PredictionService` at `addr` from the clients,
    /// on `rt`; each answer must pass `check`. Failures are counted in the
    /// report (see [`LoadReport::check`]); an error means the clients could not
    /// connect or warm up.
    pub fn run(
        &self,
        rt: &tokio::runtime::Runtime,
        addr: SocketAddr,
        request: &pb::PredictRequest,
        check: AnswerCheck,
    ) -> Result<LoadReport> {
        self.run_with(rt, addr, request, check, |_| Ok(()))
            .map(|(r, ())| r)
    }

    /// [`LoadGenerator::run`], calling `during` on a thread of its own with the
    /// instant the window opened, while the clients send; returns what it
    /// returned too (its error once the clients have stopped).
    pub fn run_with<T: Send + 'static>(
        &self,
        rt: &tokio::runtime::Runtime,
        addr: SocketAddr,
        request: &pb::PredictRequest,
        check: AnswerCheck,
        during: impl FnOnce(Instant) -> Result<T> + Send + 'static,
    ) -> Result<(LoadReport, T)> {
        let this = self.clone();
        rt.block_on(async move {
            // Connect every client and send one unmeasured request on each, so
            // that the window holds no connection set-up.
            let mut connecting = tokio::task::JoinSet::new();
            for _ in 0..this.clients.max(1) {
                let (request, timeout) = (request.clone(), this.request_timeout);
                connecting.spawn(async move {
                    let mut c = connect(addr, timeout).await?;
                    let first = tokio::time::timeout(timeout, c.predict(request))
                        .await
                        .map_err(|_| {
                            Status::deadline_exceeded(format!(
                                "the first request of a client took over {timeout:?}"
                            ))
                        })?
                        .map_err(|e| {
                            Status::unavailable(format!("the first request of a client: {e}"))
                        })?;
                    check(first.get_ref()).map_err(|e| {
                        Status::internal(format!("the first answer of a client: {e}"))
                    })?;
                    Ok::<_, Status>(c)
                });
            }
            let mut clients = Vec::with_capacity(this.clients);
            while let Some(c) = connecting.join_next().await {
                clients.push(c.map_err(|e| Status::internal(format!("a client panicked: {e}")))??);
            }
            let issued = Arc::new(AtomicU64::new(0));
            let start = Instant::now();
            let end = start + this.duration;
            let during = tokio::task::spawn_blocking(move || during(start));
            let mut running = tokio::task::JoinSet::new();
            for c in clients {
                running.spawn(client(
                    c,
                    request.clone(),
                    end,
                    Arc::clone(&issued),
                    this.max_requests,
                    this.request_timeout,
                    check,
                ));
            }
            let mut report = LoadReport::default();
            while let Some(stats) = running.join_next().await {
                let stats =
                    stats.map_err(|e| Status::internal(format!("a client panicked: {e}")))?;
                report.ok += stats.latencies.len() as u64;
                report.failed += stats.failed;
                if report.first_failure.is_none() {
                    report.first_failure = stats.first_failure;
                }
                report.latencies.extend(stats.latencies);
            }
            report.elapsed = start.elapsed();
            report.latencies.sort_unstable();
            let during = during
                .await
                .map_err(|e| Status::internal(format!("the load's side task panicked: {e}")))??;
            Ok((report, during))
        })
    }
}

/// A `PredictionService` client on a connection of its own.
async fn connect(addr: SocketAddr, timeout: Duration) -> Result<PredictionServiceClient<Channel>> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| Status::invalid_argument(format!("{addr}: {e}")))?
        .connect_timeout(timeout)
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|e| Status::unavailable(format!("connecting to {addr}: {e}")))?;
    Ok(PredictionServiceClient::new(channel))
}

/// One client's closed loop: requests until `end` or until `issued` reaches
/// `max`.
async fn client(
    mut c: PredictionServiceClient<Channel>,
    request: pb::PredictRequest,
    end: Instant,
    issued: Arc<AtomicU64>,
    max: u64,
    timeout: Duration,
    check: AnswerCheck,
) -> ClientStats {
    let mut stats = ClientStats::default();
    let fail = |stats: &mut ClientStats, why: String| {
        stats.failed += 1;
        if stats.first_failure.is_none() {
            stats.first_failure = Some(why);
        }
    };
    while Instant::now() < end && issued.fetch_add(1, Ordering::Relaxed) < max {
        let t = Instant::now();
        match tokio::time::timeout(timeout, c.predict(request.clone())).await {
            Ok(Ok(answer)) => match check(answer.get_ref()) {
                Ok(()) => stats.latencies.push(t.elapsed()),
                Err(e) => fail(&mut stats, format!("a wrong answer: {e}")),
            },
            Ok(Err(e)) => fail(&mut stats, format!("{:?}: {}", e.code(), e.message())),
            Err(_) => fail(&mut stats, format!("no answer within {timeout:?}")),
        }
    }
    stats
}

// ---------------------------------------------------------------------------
// The served model.
// ---------------------------------------------------------------------------

/// A model server serving the MLP from a directory of its own, and the clients'
/// runtime. Dropped, it stops the clients' runtime, then the server, then
/// removes the directory.
struct Served {
    rt: Option<tokio::runtime::Runtime>,
    server: Option<ModelServer>,
    dir: PathBuf,
    base: PathBuf,
    request: pb::PredictRequest,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        if let Some(mut s) = self.server.take() {
            s.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A directory of its own under the system's temporary directory, emptied.
fn bench_dir(what: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("actorflow_bench_{what}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Status::internal(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

impl Served {
    /// Exports version 1 under `<tmp>/…/mlp`, starts a server on 127.0.0.1
    /// (gRPC only, warmup on, batching as `batching` says) and waits until it
    /// serves.
    fn start(what: &str, batching: bool) -> Result<Served> {
        let dir = bench_dir(what)?;
        let mut served = Served {
            rt: None,
            server: None,
            base: dir.join(MODEL),
            dir,
            request: predict_request(),
        };
        export_mlp(&served.base.join("1"), 1)?;
        let mut o = ServerOptions::local(vec![ModelConfig::new(MODEL, &served.base)]);
        o.rest_api_port = None;
        o.enable_model_warmup = true;
        o.batching = batching.then(batching_options);
        let server = ModelServer::start(o)?;
        let server = served.server.insert(server);
        server.wait_until_available(Duration::from_secs(60))?;
        served.rt = Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores())
                .thread_name("actorflow-bench-client")
                .enable_all()
                .build()
                .map_err(|e| {
                    Status::resource_exhausted(format!("cannot start the clients' runtime: {e}"))
                })?,
        );
        Ok(served)
    }

    fn server(&self) -> Result<&ModelServer> {
        self.server
            .as_ref()
            .ok_or_else(|| Status::internal("the server is not running"))
    }

    fn runtime(&self) -> Result<&tokio::runtime::Runtime> {
        self.rt
            .as_ref()
            .ok_or_else(|| Status::internal("the clients' runtime is not running"))
    }

    /// One window of [`CLIENTS`] clients; `during` runs meanwhile. Fails when
    /// any request failed.
    fn load<T: Send + 'static>(
        &self,
        what: &str,
        window: Duration,
        during: impl FnOnce(Instant) -> Result<T> + Send + 'static,
    ) -> Result<(LoadReport, T)> {
        let server = self.server()?;
        let servable = server.models().get(MODEL, &VersionRequest::Latest)?;
        let runs = servable.batch_runs();
        let (report, t) = LoadGenerator::new(window).run_with(
            self.runtime()?,
            server.grpc_addr(),
            &self.request,
            check_answer,
            during,
        )?;
        report.check(what)?;
        // Requests per session run, when every request went through the
        // batchers of the version serving when the window opened (batching on,
        // no swap); about, since the clients' first requests ran just before.
        let runs = servable.batch_runs() - runs;
        let same = server.models().available_versions(MODEL) == [servable.id().version];
        let mean_batch = (runs > 0 && same).then(|| report.ok as f64 / runs as f64);
        tracing::info!(
            what,
            requests = report.ok,
            rps = report.throughput(),
            p50_ms = millis(report.p50()),
            p99_ms = millis(report.p99()),
            max_ms = millis(report.percentile(1.0)),
            mean_batch = ?mean_batch,
            "serving window"
        );
        Ok((report, t))
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rps(what: &'static str, batching: bool) -> Result<Repetition> {
    let s = Served::start(what, batching)?;
    Ok(Box::new(move || {
        let (r, ()) = s.load(what, LOAD_WINDOW, |_| Ok(()))?;
        Ok(r.throughput())
    }))
}

fn p99(what: &'static str, batching: bool, window: Duration) -> Result<Repetition> {
    let s = Served::start(what, batching)?;
    Ok(Box::new(move || {
        let (r, ()) = s.load(what, window, |_| Ok(()))?;
        Ok(millis(r.p99()))
    }))
}

/// Requests per second, batching on (see the module docs).
pub fn serve_mlp_rps() -> Result<Repetition> {
    rps("serve_mlp_rps", true)
}

/// Requests per second, batching off.
pub fn serve_mlp_rps_unbatched() -> Result<Repetition> {
    rps("serve_mlp_rps_unbatched", false)
}

/// p99 latency in ms, batching on.
pub fn serve_mlp_p99_ms() -> Result<Repetition> {
    p99("serve_mlp_p99_ms", true, LOAD_WINDOW)
}

/// p99 latency in ms, batching off.
pub fn serve_mlp_p99_ms_unbatched() -> Result<Repetition> {
    p99("serve_mlp_p99_ms_unbatched", false, LOAD_WINDOW)
}

/// p99 latency in ms over [`SWAP_WINDOW`] without a swap (batching on).
pub fn serve_steady_p99_ms() -> Result<Repetition> {
    p99("serve_steady_p99_ms", true, SWAP_WINDOW)
}

/// p99 latency in ms over [`SWAP_WINDOW`] in which a new version is swapped in
/// (batching on; see the module docs). Repetition `i` drops version `i + 2`.
pub fn serve_swap_p99_ms() -> Result<Repetition> {
    const WHAT: &str = "serve_swap_p99_ms";
    let s = Served::start(WHAT, true)?;
    let staging = s.dir.join("staging");
    let mut next = 2i64;
    Ok(Box::new(move || {
        let version = next;
        next += 1;
        let staged = staging.join(version.to_string());
        export_mlp(&staged, version)?;
        let target = s.base.join(version.to_string());
        let models = s.server()?.models().clone();
        let (r, swap) = s.load(WHAT, SWAP_WINDOW, move |start| {
            std::thread::sleep((start + SWAP_AT).saturating_duration_since(Instant::now()));
            std::fs::rename(&staged, &target).map_err(|e| {
                Status::internal(format!(
                    "moving {} to {}: {e}",
                    staged.display(),
                    target.display()
                ))
            })?;
            let dropped = Instant::now();
            let left = (start + SWAP_WINDOW).saturating_duration_since(dropped);
            models
                .wait_for(left, |m| m.available_versions(MODEL) == [version])
                .map_err(|e| {
                    e.context(format!(
                        "{WHAT}: version {version} had not replaced the old one when the window closed"
                    ))
                })?;
            Ok(dropped.elapsed())
        })?;
        tracing::info!(
            version,
            swap_ms = millis(swap),
            "{WHAT}: the new version was the only one serving"
        );
        Ok(millis(r.p99()))
    }))
}

/// Milliseconds per session run of the exported model on 32 rows, loaded
/// in-process.
pub fn serve_mlp_batch32_ms() -> Result<Repetition> {
    let dir = bench_dir("serve_mlp_batch32_ms")?;
    let loaded = export_mlp(&dir.join("1"), 1)
        .and_then(|d| SavedModel::load_with(d, &[TAG_SERVE], SessionOptions::default()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = loaded?;
    let batch = images(MAX_BATCH_SIZE);
    Ok(Box::new(move || {
        let run = || {
            model
                .run_outputs(
                    DEFAULT_SERVING_SIGNATURE_DEF_KEY,
                    &[(INPUT_KEY, batch.clone())],
                    &[OUTPUT_KEY],
                )
                .map(|_| ())
        };
        let n = calibrate(REPETITION, run)?;
        Ok(time_per_call(n, run)? * 1e3)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let r = LoadReport {
            ok: 100,
            latencies: (1..=100).map(Duration::from_millis).collect(),
            elapsed: Duration::from_secs(2),
            ..LoadReport::default()
        };
        assert_eq!(r.p50(), Duration::from_millis(50));
        assert_eq!(r.p99(), Duration::from_millis(99));
        assert_eq!(r.percentile(1.0), Duration::from_millis(100));
        assert_eq!(r.throughput(), 50.0);
        r.check("t").unwrap();
        let failed = LoadReport {
            failed: 1,
            first_failure: Some("Unavailable: x".into()),
            ..r
        };
        assert_eq!(
            failed.check("t").unwrap_err().code(),
            crate::Code::Unavailable
        );
        assert_eq!(LoadReport::default().p99(), Duration::ZERO);
        assert!(LoadReport::default().check("t").is_err());
    }
}
