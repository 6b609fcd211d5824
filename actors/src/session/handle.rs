//! The session handle (see [`session`](super)).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actix::{Actor, Addr};
use graph::builder::{NodeRef, TensorRef};
use graph::tensor::memory::AllocatorStats;
use graph::{GraphDef, Result, Status, Tensor};
use ndarray::ArrayViewD;
use rendezvous::{completion, CompletionReceiver};

use super::actor::{SessionActor, SessionCommand, SessionReply, SessionRequest};
use super::state::{signature_hash, CompiledStep, SessionOptions, SessionState, StepSignature};
use crate::runtime::{Runtime, RuntimeOptions};
use crate::stats::StatsCollector;
use crate::step::StepResult;
use crate::worker::{LocalWorker, RunGraphRequest, WorkerInterface};

/// How much a step records about itself (TensorFlow's `RunOptions.TraceLevel`;
/// non-exhaustive, as TensorFlow's has more levels).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceLevel {
    /// Nothing.
    #[default]
    NoTrace,
    /// Per-node statistics (start/end, device, thread, output shapes and bytes).
    FullTrace,
}

/// Options of one step (non-exhaustive: build them with the `with_*` setters,
/// `RunOptions::default().with_timeout(Duration::from_secs(5))`).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// Abort the step with `DeadlineExceeded` after this long.
    pub timeout: Option<Duration>,
    /// What to record.
    pub trace_level: TraceLevel,
}

impl RunOptions {
    graph::option_setters! {
        /// Sets [`timeout`](Self::timeout).
        with_timeout => timeout: Option<Duration> as into;
        /// Sets [`trace_level`](Self::trace_level).
        with_trace_level => trace_level: TraceLevel;
    }
}

/// What a traced step recorded.
#[derive(Clone, Debug, Default)]
pub struct RunMetadata {
    /// Per-partition statistics.
    pub step_stats: Vec<StatsCollector>,
    /// The partition graphs, by device name.
    pub partition_graphs: Vec<(String, GraphDef)>,
}

impl RunMetadata {
    /// The step's peak tensor memory on `device` (the bytes its kernels allocated
    /// there and held at once at most), or `None` when no partition ran there.
    pub fn peak_bytes(&self, device: &str) -> Option<usize> {
        self.step_stats
            .iter()
            .filter(|c| c.device == device)
            .map(|c| c.memory.peak_bytes_in_use)
            .max()
    }

    /// The step's memory on each device it ran on, one entry per partition (see
    /// [`StatsCollector::memory`]).
    pub fn memory(&self) -> impl Iterator<Item = (&str, &AllocatorStats)> {
        self.step_stats
            .iter()
            .map(|c| (c.device.as_str(), &c.memory))
    }
}

/// The result of a step.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// The fetched tensors, in fetch order.
    pub outputs: Vec<Tensor>,
    /// Statistics, when the step was traced.
    pub metadata: Option<RunMetadata>,
}

/// One step's feeds, fetches, targets and options, for [`Session::run_with`] and
/// [`Session::run_async`].
///
/// Each of them takes the builder's handles ([`Output`](graph::builder::Output) for
/// feeds and fetches, [`Operation`](graph::builder::Operation) for targets) or
/// names (`"node:port"`, for graphs imported from files). A fetch's
/// [`FetchToken`] reads its value from the [`RunOutput`].
///
/// ```
/// use actorflow_actors::{RunArgs, Session, SessionOptions};
/// use graph::{builder::Scope, ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
/// let y = ops::add(&s, &x, &x).unwrap();
/// let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
///
/// let mut args = RunArgs::new().feed(&x, Tensor::vector(&[1.0f32, 2.0]));
/// let y_token = args.add_fetch(&y);
/// let out = sess.run_with(&args).unwrap();
/// assert_eq!(out.get::<f32>(y_token).unwrap().as_slice().unwrap(), &[2.0, 4.0]);
/// ```
///
/// Handles are checked by type: an [`Output`](graph::builder::Output) is a tensor,
/// not a node, so it cannot be a target (its [`op`](graph::builder::Output::op)
/// can), and an operation is not a tensor to fetch.
///
/// ```compile_fail
/// # use actorflow_actors::RunArgs;
/// # use graph::{builder::Scope, ops, DType, Shape};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
/// let args = RunArgs::new().target(&x);
/// ```
///
/// ```compile_fail
/// # use actorflow_actors::RunArgs;
/// # use graph::{builder::Scope, ops, DType, Shape};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
/// let args = RunArgs::new().fetch(x.op());
/// ```
#[derive(Clone, Debug, Default)]
pub struct RunArgs {
    /// Feeds: tensor name and value.
    pub feeds: Vec<(String, Tensor)>,
    /// Fetched tensor names.
    pub fetches: Vec<String>,
    /// Target node names.
    pub targets: Vec<String>,
    /// Options.
    pub options: RunOptions,
}

/// Names one fetch of a [`RunArgs`]: its place among the step's outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FetchToken(usize);

impl FetchToken {
    /// The fetch's index in [`RunOutput::outputs`].
    pub fn index(self) -> usize {
        self.0
    }
}

impl RunArgs {
    /// An empty request.
    pub fn new() -> RunArgs {
        RunArgs::default()
    }

    /// Adds a feed: `value` replaces `tensor` for this step.
    pub fn feed(mut self, tensor: impl TensorRef, value: Tensor) -> RunArgs {
        self.feeds.push((tensor.tensor_name().into_owned(), value));
        self
    }

    /// Adds a fetch (its value is `outputs[i]` for the `i`-th fetch).
    pub fn fetch(mut self, tensor: impl TensorRef) -> RunArgs {
        self.add_fetch(tensor);
        self
    }

    /// Adds a fetch and returns the token that reads its value.
    pub fn add_fetch(&mut self, tensor: impl TensorRef) -> FetchToken {
        self.fetches.push(tensor.tensor_name().into_owned());
        FetchToken(self.fetches.len() - 1)
    }

    /// Adds a target: a node run for its effect.
    pub fn target(mut self, node: impl NodeRef) -> RunArgs {
        self.targets.push(node.node_name().to_owned());
        self
    }

    /// Sets the options.
    pub fn options(mut self, options: RunOptions) -> RunArgs {
        self.options = options;
        self
    }
}

impl RunOutput {
    /// The fetched tensor `token` names.
    pub fn tensor(&self, token: FetchToken) -> Result<&Tensor> {
        self.outputs.get(token.0).ok_or_else(|| {
            Status::invalid_argument(format!(
                "fetch token {} is out of range: the step fetched {} tensors",
                token.0,
                self.outputs.len()
            ))
        })
    }

    /// The fetched tensor `token` names, viewed as an `ndarray` of `T`
    /// (`InvalidArgument` when its dtype is not `T`'s).
    pub fn get<T: graph::TensorType>(&self, token: FetchToken) -> Result<ArrayViewD<'_, T>> {
        self.tensor(token)?.as_array::<T>()
    }
}

pub(super) struct SessionShared {
    pub(super) runtime: Runtime,
    actor: Addr<SessionActor>,
    cache: RwLock<HashMap<u64, Vec<Arc<CompiledStep>>>>,
    default_container: Arc<str>,
    pub(super) closed: AtomicBool,
    builds: Arc<AtomicU64>,
    pub(super) options: SessionOptions,
    /// The worker this session's master hands its steps to: the runtime's
    /// devices, or a cluster's tasks.
    pub(super) worker: Arc<dyn WorkerInterface>,
    /// The devices its master places on.
    devices: Vec<graph::DeviceName>,
}

/// A session whose master is elsewhere (a cluster's master, reached over the
/// network): what [`Session`] needs of it. The distributed runtime implements it;
/// [`Session::from_backend`] wraps one in the handle users know.
pub trait SessionBackend: Send + Sync {
    /// Adds nodes to the session's graph (all or nothing).
    fn extend(&self, graph: &GraphDef) -> Result<()>;
    /// Runs one step; the receiver completes with its outcome.
    fn run(&self, request: RunArgs) -> CompletionReceiver<Result<RunOutput>>;
    /// Ends the session (its master drops its state); never blocks on a dead peer
    /// for longer than the backend's bound.
    fn close(&self) -> Result<()>;
    /// The full names of every device the session can place on.
    fn list_devices(&self) -> Result<Vec<String>>;
    /// Sets up a partial run (TensorFlow's `PartialRunSetup`); the handle it
    /// returns names the run in [`SessionBackend::partial_run`].
    fn partial_run_setup(
        &self,
        feeds: &[String],
        fetches: &[String],
        targets: &[String],
    ) -> CompletionReceiver<Result<String>>;
    /// One call of the partial run `handle`: `request`'s feeds and fetches (its
    /// targets and options are not used).
    fn partial_run(&self, handle: &str, request: RunArgs) -> CompletionReceiver<Result<RunOutput>>;
}

#[derive(Clone)]
pub(super) enum Kind {
    Local(Arc<SessionShared>),
    Remote(Arc<dyn SessionBackend>),
}

impl Drop for SessionShared {
    fn drop(&mut self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            let (tx, _rx) = completion();
            self.actor.do_send(SessionRequest {
                command: SessionCommand::Close,
                reply: tx,
            });
        }
    }
}

/// A session; see the module docs.
///
/// # Examples
/// ```
/// use actorflow_actors::{Session, SessionOptions};
/// use graph::{builder::Scope, ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
/// let y = ops::add(&s, &x, &x).unwrap();
/// let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
/// let out = sess.run(&[(&x.name(), Tensor::vector(&[1.0f32, 2.0]))], &[&y.name()], &[]).unwrap();
/// assert_eq!(out[0], Tensor::vector(&[2.0f32, 4.0]));
/// ```
#[derive(Clone)]
pub struct Session {
    pub(super) kind: Kind,
}

pub(super) fn closed() -> Status {
    Status::cancelled("Session has been closed.")
}

/// What lives as long as the client waits for a step: its `step` span (so the span
/// covers the whole step, and its partitions' spans nest under it).
struct StepGuard {
    _span: tracing::Span,
}

impl Session {
    /// A session on a private runtime with `options.cpu_devices` devices, holding
    /// `graph`.
    pub fn new(graph: &GraphDef, options: SessionOptions) -> Result<Session> {
        let rt = Runtime::new(RuntimeOptions {
            cpu_devices: options.cpu_devices,
            ..Default::default()
        })?;
        Session::in_runtime(&rt, graph, options)
    }

    /// A session on a private runtime holding the graph in the file `path`
    /// (TensorFlow's binary `.pb` or text `.pbtxt`, or actorflow's `.json`; see
    /// [`GraphDef::from_file`]).
    pub fn from_file(
        path: impl AsRef<std::path::Path>,
        options: SessionOptions,
    ) -> Result<Session> {
        Session::new(&GraphDef::from_file(path)?, options)
    }

    /// A session whose master is elsewhere; see [`SessionBackend`].
    pub fn from_backend(backend: Arc<dyn SessionBackend>) -> Session {
        Session {
            kind: Kind::Remote(backend),
        }
    }

    /// A session on a shared runtime (sessions on one runtime share named
    /// containers; each has a private default container).
    pub fn in_runtime(
        runtime: &Runtime,
        graph: &GraphDef,
        options: SessionOptions,
    ) -> Result<Session> {
        let id = runtime.next_session_id();
        let default_container: Arc<str> = Arc::from(format!("__session_{id}"));
        let mut worker = LocalWorker::new(
            runtime,
            Arc::clone(&default_container),
            options.max_allocation_bytes,
        );
        if !options.buffer_forwarding {
            worker = worker.without_buffer_forwarding();
        }
        let (inter, intra) = (
            options.inter_op_parallelism_threads,
            options.intra_op_parallelism_threads,
        );
        if (inter, intra) != (0, 0) {
            worker = worker.with_threads(kernels::CpuThreads::from_config(inter, intra)?);
        }
        let worker = Arc::new(worker);
        let devices = runtime.devices().iter().map(|d| d.name.clone()).collect();
        Session::with_worker(runtime, graph, options, devices, worker, default_container)
    }

    /// A session whose master places on `devices` and hands each step to `worker`
    /// (the master of a cluster: `devices` are the cluster's, and `worker` reaches
    /// every task); its actor runs on `runtime`.
    pub fn with_worker(
        runtime: &Runtime,
        graph: &GraphDef,
        options: SessionOptions,
        devices: Vec<graph::DeviceName>,
        worker: Arc<dyn WorkerInterface>,
        default_container: Arc<str>,
    ) -> Result<Session> {
        let _span = tracing::debug_span!("session_create", session = %default_container).entered();
        let builds = Arc::new(AtomicU64::new(0));
        let st = SessionState::new(
            devices.clone(),
            Arc::clone(&worker),
            options.clone(),
            Arc::clone(&builds),
        );
        let actor = SessionActor::start_in_arbiter(runtime.system_arbiter(), move |_| {
            SessionActor::new(st)
        });
        let s = Session {
            kind: Kind::Local(Arc::new(SessionShared {
                runtime: runtime.clone(),
                actor,
                cache: RwLock::new(HashMap::new()),
                default_container,
                closed: AtomicBool::new(false),
                builds,
                options,
                worker,
                devices,
            })),
        };
        if !graph.node.is_empty() {
            s.extend(graph)?;
        }
        Ok(s)
    }

    /// The runtime the session's master runs on (`None` for a session whose master
    /// is in another process).
    pub fn runtime(&self) -> Option<&Runtime> {
        match &self.kind {
            Kind::Local(s) => Some(&s.runtime),
            Kind::Remote(_) => None,
        }
    }

    /// How many step signatures have been compiled (graph work done) by this
    /// process (0 for a session whose master is in another process).
    pub fn graph_builds(&self) -> u64 {
        match &self.kind {
            Kind::Local(s) => s.builds.load(Ordering::Relaxed),
            Kind::Remote(_) => 0,
        }
    }

    /// The session's private container (empty for a session whose master is in
    /// another process).
    pub fn default_container(&self) -> &str {
        match &self.kind {
            Kind::Local(s) => &s.default_container,
            Kind::Remote(_) => "",
        }
    }

    /// The tensor memory of each device of the session's runtime now (TensorFlow's
    /// `AllocatorStats`, `tf.config.experimental.get_memory_info`): bytes in use,
    /// their peak, the largest allocation and the allocation count, over every
    /// session of the runtime. `Unimplemented` for a session whose master is in
    /// another process.
    pub fn memory_stats(&self) -> Result<Vec<(String, AllocatorStats)>> {
        let s = self.local("memory_stats")?;
        Ok(s.runtime
            .devices()
            .iter()
            .map(|d| (d.name.to_string(), d.ctx.memory.stats()))
            .collect())
    }

    /// The full names of every device the session can place on (a cluster
    /// session: every task's).
    pub fn list_devices(&self) -> Result<Vec<String>> {
        match &self.kind {
            Kind::Local(s) => Ok(s.devices.iter().map(ToString::to_string).collect()),
            Kind::Remote(b) => b.list_devices(),
        }
    }

    fn local(&self, what: &str) -> Result<&Arc<SessionShared>> {
        match &self.kind {
            Kind::Local(s) => Ok(s),
            Kind::Remote(_) => Err(Status::unimplemented(format!(
                "{what} is not available from a session whose master is in another process"
            ))),
        }
    }

    pub(super) fn request(
        &self,
        command: SessionCommand,
    ) -> Result<CompletionReceiver<SessionReply>> {
        let inner = self.local("this call")?;
        if inner.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let (tx, rx) = completion();
        inner.actor.do_send(SessionRequest { command, reply: tx });
        Ok(rx)
    }

    /// Adds nodes to the session's graph (all or nothing).
    pub fn extend(&self, graph: &GraphDef) -> Result<()> {
        if let Kind::Remote(b) = &self.kind {
            return b.extend(graph);
        }
        match self.request(SessionCommand::Extend(graph.clone()))?.wait() {
            Some(SessionReply::Extended(r)) => r,
            _ => Err(closed()),
        }
    }

    /// Closes the session: later calls fail with `Cancelled`; its default container
    /// is dropped. Steps already running finish.
    pub fn close(&self) -> Result<()> {
        let inner = match &self.kind {
            Kind::Local(s) => s,
            Kind::Remote(b) => return b.close(),
        };
        let rx = self.request(SessionCommand::Close)?;
        inner.closed.store(true, Ordering::Release);
        let _ = rx.wait();
        Ok(())
    }

    fn cached(
        &self,
        h: u64,
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Option<Arc<CompiledStep>> {
        let cache = self.local("").ok()?.cache.read();
        let cache = cache.unwrap_or_else(|p| p.into_inner());
        cache
            .get(&h)?
            .iter()
            .find(|c| c.signature.matches(feeds, fetches, targets))
            .cloned()
    }

    fn remember(&self, h: u64, c: &Arc<CompiledStep>) {
        let Ok(inner) = self.local("") else { return };
        let mut cache = inner.cache.write().unwrap_or_else(|p| p.into_inner());
        let v = cache.entry(h).or_default();
        if !v.iter().any(|x| Arc::ptr_eq(x, c)) {
            v.push(Arc::clone(c));
        }
    }

    /// The compiled step of a signature, building it on first use (for inspection:
    /// placement, partitions, transfers).
    pub fn compiled_step(
        &self,
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Arc<CompiledStep>> {
        self.local("a compiled step")?;
        let h = signature_hash(feeds, fetches, targets);
        if let Some(c) = self.cached(h, feeds, fetches, targets) {
            return Ok(c);
        }
        let sig = StepSignature::new(feeds, fetches, targets);
        match self.request(SessionCommand::Prepare(sig))?.wait() {
            Some(SessionReply::Prepared(Ok(c))) => {
                self.remember(h, &c);
                Ok(c)
            }
            Some(SessionReply::Prepared(Err(e))) => Err(e),
            _ => Err(closed()),
        }
    }

    async fn compiled_step_async(
        &self,
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Arc<CompiledStep>> {
        let h = signature_hash(feeds, fetches, targets);
        if let Some(c) = self.cached(h, feeds, fetches, targets) {
            return Ok(c);
        }
        let sig = StepSignature::new(feeds, fetches, targets);
        match self.request(SessionCommand::Prepare(sig))?.await {
            Some(SessionReply::Prepared(Ok(c))) => {
                self.remember(h, &c);
                Ok(c)
            }
            Some(SessionReply::Prepared(Err(e))) => Err(e),
            _ => Err(closed()),
        }
    }

    /// The device of every node of a step, as placement chose.
    pub fn placement(
        &self,
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<(String, String)>> {
        Ok(self
            .compiled_step(feeds, fetches, targets)?
            .placement
            .clone())
    }

    /// Runs one step and returns the fetched tensors: the positional form, with
    /// tensors and nodes named by strings; [`Session::run_with`] takes a
    /// [`RunArgs`] (typed handles, options, metadata).
    pub fn run(
        &self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        Ok(self
            .run_named(&RunOptions::default(), feeds, fetches, targets)?
            .outputs)
    }

    /// Runs the step `args` describes and waits for it.
    pub fn run_with(&self, args: &RunArgs) -> Result<RunOutput> {
        if let Kind::Remote(b) = &self.kind {
            return b.run(args.clone()).wait().unwrap_or_else(|| Err(lost()));
        }
        let feeds: smallvec::SmallVec<[(&str, Tensor); 8]> = args
            .feeds
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect();
        let fetches: smallvec::SmallVec<[&str; 8]> =
            args.fetches.iter().map(String::as_str).collect();
        let targets: smallvec::SmallVec<[&str; 8]> =
            args.targets.iter().map(String::as_str).collect();
        self.run_named(&args.options, &feeds, &fetches, &targets)
    }

    fn run_named(
        &self,
        options: &RunOptions,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<RunOutput> {
        let inner = match &self.kind {
            Kind::Local(s) => s,
            Kind::Remote(b) => {
                let req = RunArgs {
                    feeds: feeds
                        .iter()
                        .map(|(n, t)| (n.to_string(), t.clone()))
                        .collect(),
                    fetches: fetches.iter().map(|s| s.to_string()).collect(),
                    targets: targets.iter().map(|s| s.to_string()).collect(),
                    options: options.clone(),
                };
                return b.run(req).wait().unwrap_or_else(|| Err(lost()));
            }
        };
        if inner.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let names: smallvec::SmallVec<[&str; 8]> = feeds.iter().map(|(n, _)| *n).collect();
        let compiled = self.compiled_step(&names, fetches, targets)?;
        let args = feeds.iter().map(|(_, t)| t.clone()).collect();
        let (rx, guard) = launch(inner, &compiled, args, options)?;
        let result = rx.wait();
        drop(guard);
        self.finish(result, &compiled, options)
    }

    /// Runs the step `args` describes; a future that any executor (tokio or
    /// other) can drive.
    pub async fn run_async(&self, args: &RunArgs) -> Result<RunOutput> {
        let inner = match &self.kind {
            Kind::Local(s) => s,
            Kind::Remote(b) => return b.run(args.clone()).await.unwrap_or_else(|| Err(lost())),
        };
        if inner.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let feeds: Vec<&str> = args.feeds.iter().map(|(n, _)| n.as_str()).collect();
        let fetches: Vec<&str> = args.fetches.iter().map(String::as_str).collect();
        let targets: Vec<&str> = args.targets.iter().map(String::as_str).collect();
        let compiled = self.compiled_step_async(&feeds, &fetches, &targets).await?;
        let values = args.feeds.iter().map(|(_, t)| t.clone()).collect();
        let (rx, guard) = launch(inner, &compiled, values, &args.options)?;
        let result = rx.await;
        drop(guard);
        self.finish(result, &compiled, &args.options)
    }
}

/// A fed value must have its tensor's dtype and fit its declared shape.
pub(super) fn check_feed(spec: &graph::passes::prune::FeedSpec, t: &Tensor) -> Result<()> {
    let node = spec.name.split(':').next().unwrap_or(&spec.name);
    if t.dtype() != spec.dtype {
        return Err(Status::invalid_argument(format!(
            "Cannot feed value of type {} for tensor '{}', which has type {}",
            t.dtype(),
            spec.name,
            spec.dtype
        ))
        .with_node(node));
    }
    if !spec.shape.is_compatible_with(t.shape()) {
        return Err(Status::invalid_argument(format!(
            "Cannot feed value of shape {} for tensor '{}', which has shape {}",
            t.shape(),
            spec.name,
            spec.shape
        ))
        .with_node(node));
    }
    Ok(())
}

/// A fetch that produced nothing.
pub(super) fn no_value(name: &str) -> Status {
    Status::invalid_argument(format!(
        "fetch '{name}' produced no value: it is on an untaken branch (dead) or was never computed"
    ))
    .with_node(name.split(':').next().unwrap_or(name))
}

pub(super) fn lost() -> Status {
    Status::cancelled("the session's master stopped before the step finished")
}

fn launch(
    inner: &SessionShared,
    compiled: &CompiledStep,
    args: Vec<Tensor>,
    options: &RunOptions,
) -> Result<(CompletionReceiver<StepResult>, StepGuard)> {
    for (spec, t) in compiled.feeds.iter().zip(&args) {
        check_feed(spec, t)?;
    }
    let step_id = inner.runtime.next_step_id();
    let span = tracing::debug_span!("step", step_id);
    let _entered = span.clone().entered();
    let rx = inner.worker.run_graph(RunGraphRequest {
        handle: Arc::clone(&compiled.handle),
        step_id,
        args,
        collect_stats: options.trace_level == TraceLevel::FullTrace,
        timeout: options.timeout.or(inner.options.default_timeout),
        span: Some(span.clone()),
        ..Default::default()
    })?;
    Ok((rx, StepGuard { _span: span }))
}

impl Session {
    fn finish(
        &self,
        result: Option<StepResult>,
        compiled: &CompiledStep,
        options: &RunOptions,
    ) -> Result<RunOutput> {
        let r = result
            .ok_or_else(|| Status::cancelled("the runtime stopped before the step finished"))?;
        r.status?;
        let mut outputs = Vec::with_capacity(r.retvals.len());
        for (i, v) in r.retvals.into_iter().enumerate() {
            let name = &compiled.signature.fetches[i];
            outputs.push(v.ok_or_else(|| no_value(name))?);
        }
        let metadata = (options.trace_level == TraceLevel::FullTrace).then(|| RunMetadata {
            step_stats: r.stats,
            partition_graphs: compiled
                .partitions
                .iter()
                .map(|p| (p.device.clone(), p.graph.clone()))
                .collect(),
        });
        Ok(RunOutput { outputs, metadata })
    }
}
