//! The session handle (see [`session`](super)).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actix::{Actor, Addr};
use graph::{GraphDef, Result, Status, Tensor};
use kernels::{CallFrame, DeviceContext, StepContext};
use rendezvous::{completion, CompletionReceiver, LocalRendezvous, Rendezvous};

use super::actor::{SessionActor, SessionCommand, SessionReply, SessionRequest};
use super::state::{
    self, signature_hash, CompiledStep, SessionOptions, SessionState, StepSignature,
};
use crate::device::{DeviceMsg, PartitionRun};
use crate::runtime::{Runtime, RuntimeOptions};
use crate::stats::StatsCollector;
use crate::step::{StepResult, StepTracker};

/// How much a step records about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceLevel {
    /// Nothing.
    #[default]
    NoTrace,
    /// Per-node statistics (start/end, device, thread, output shapes and bytes).
    FullTrace,
}

/// Options of one step.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Abort the step with `DeadlineExceeded` after this long.
    pub timeout: Option<Duration>,
    /// What to record.
    pub trace_level: TraceLevel,
}

/// What a traced step recorded.
#[derive(Clone, Debug, Default)]
pub struct RunMetadata {
    /// Per-partition statistics.
    pub step_stats: Vec<StatsCollector>,
    /// The partition graphs, by device name.
    pub partition_graphs: Vec<(String, GraphDef)>,
}

/// The result of a step.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// The fetched tensors, in fetch order.
    pub outputs: Vec<Tensor>,
    /// Statistics, when the step was traced.
    pub metadata: Option<RunMetadata>,
}

/// A step request with owned names (for [`Session::run_async`]).
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    /// Feeds: tensor name and value.
    pub feeds: Vec<(String, Tensor)>,
    /// Fetched tensor names.
    pub fetches: Vec<String>,
    /// Target node names.
    pub targets: Vec<String>,
    /// Options.
    pub options: RunOptions,
}

impl RunRequest {
    /// An empty request.
    pub fn new() -> RunRequest {
        RunRequest::default()
    }

    /// Adds a feed.
    pub fn feed(mut self, name: &str, value: Tensor) -> RunRequest {
        self.feeds.push((name.to_owned(), value));
        self
    }

    /// Adds a fetch.
    pub fn fetch(mut self, name: &str) -> RunRequest {
        self.fetches.push(name.to_owned());
        self
    }

    /// Adds a target.
    pub fn target(mut self, name: &str) -> RunRequest {
        self.targets.push(name.to_owned());
        self
    }

    /// Sets the options.
    pub fn options(mut self, options: RunOptions) -> RunRequest {
        self.options = options;
        self
    }
}

struct SessionShared {
    runtime: Runtime,
    actor: Addr<SessionActor>,
    cache: RwLock<HashMap<u64, Vec<Arc<CompiledStep>>>>,
    default_container: Arc<str>,
    closed: AtomicBool,
    builds: Arc<AtomicU64>,
    options: SessionOptions,
    timer: Arc<dyn kernels::Timer>,
    /// The runtime's devices as this session sees them (its allocation limit),
    /// by device index.
    device_ctxs: Vec<Arc<DeviceContext>>,
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
    inner: Arc<SessionShared>,
}

fn closed() -> Status {
    Status::cancelled("Session has been closed.")
}

/// Per-op timeouts on the actor system's timer (no thread per timeout).
struct ArbiterTimer(actix_rt::ArbiterHandle);

impl kernels::Timer for ArbiterTimer {
    fn schedule(&self, after: Duration, f: Box<dyn FnOnce() + Send>) {
        self.0.spawn(async move {
            actix_rt::time::sleep(after).await;
            f();
        });
    }
}

/// What lives as long as the client waits for a step: its `step` span (so the span
/// covers the whole step, and its partitions' spans nest under it) and its deadline
/// timer, cancelled when this is dropped.
struct StepGuard {
    _span: tracing::Span,
    _cancel: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Session {
    /// A session on a private runtime with `options.cpu_devices` devices, holding
    /// `graph`.
    pub fn new(graph: &GraphDef, options: SessionOptions) -> Result<Session> {
        let rt = Runtime::new(RuntimeOptions {
            cpu_devices: options.cpu_devices,
        })?;
        Session::in_runtime(&rt, graph, options)
    }

    /// A session on a shared runtime (sessions on one runtime share named
    /// containers; each has a private default container).
    pub fn in_runtime(
        runtime: &Runtime,
        graph: &GraphDef,
        options: SessionOptions,
    ) -> Result<Session> {
        let id = runtime.next_session_id();
        let _span = tracing::debug_span!("session_create", session = id).entered();
        let default_container: Arc<str> = Arc::from(format!("__session_{id}"));
        let device_ctxs: Vec<Arc<DeviceContext>> = runtime
            .devices()
            .iter()
            .map(|d| match options.max_allocation_bytes {
                Some(limit) => Arc::new(d.ctx.view_with_max_allocation_bytes(limit)),
                None => Arc::clone(&d.ctx),
            })
            .collect();
        let devices = runtime
            .devices()
            .iter()
            .zip(&device_ctxs)
            .map(|(d, ctx)| state::SessionDevice {
                name: d.name.clone(),
                ctx: Arc::clone(ctx),
            })
            .collect();
        let builds = Arc::new(AtomicU64::new(0));
        let st = SessionState::new(
            devices,
            options.clone(),
            Arc::clone(&default_container),
            Arc::clone(&builds),
        );
        let actor = SessionActor::start_in_arbiter(runtime.system_arbiter(), move |_| {
            SessionActor::new(st)
        });
        let s = Session {
            inner: Arc::new(SessionShared {
                runtime: runtime.clone(),
                actor,
                cache: RwLock::new(HashMap::new()),
                default_container,
                closed: AtomicBool::new(false),
                builds,
                options,
                timer: Arc::new(ArbiterTimer(runtime.system_arbiter().clone())),
                device_ctxs,
            }),
        };
        if !graph.node.is_empty() {
            s.extend(graph)?;
        }
        Ok(s)
    }

    /// The runtime the session runs on.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// How many step signatures have been compiled (graph work done).
    pub fn graph_builds(&self) -> u64 {
        self.inner.builds.load(Ordering::Relaxed)
    }

    /// The session's private container.
    pub fn default_container(&self) -> &str {
        &self.inner.default_container
    }

    fn request(&self, command: SessionCommand) -> Result<CompletionReceiver<SessionReply>> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let (tx, rx) = completion();
        self.inner
            .actor
            .do_send(SessionRequest { command, reply: tx });
        Ok(rx)
    }

    /// Adds nodes to the session's graph (all or nothing).
    pub fn extend(&self, graph: &GraphDef) -> Result<()> {
        match self.request(SessionCommand::Extend(graph.clone()))?.wait() {
            Some(SessionReply::Extended(r)) => r,
            _ => Err(closed()),
        }
    }

    /// Closes the session: later calls fail with `Cancelled`; its default container
    /// is dropped. Steps already running finish.
    pub fn close(&self) -> Result<()> {
        let rx = self.request(SessionCommand::Close)?;
        self.inner.closed.store(true, Ordering::Release);
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
        let cache = self.inner.cache.read().unwrap_or_else(|p| p.into_inner());
        cache
            .get(&h)?
            .iter()
            .find(|c| c.signature.matches(feeds, fetches, targets))
            .cloned()
    }

    fn remember(&self, h: u64, c: &Arc<CompiledStep>) {
        let mut cache = self.inner.cache.write().unwrap_or_else(|p| p.into_inner());
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

    /// Runs one step and returns the fetched tensors.
    pub fn run(
        &self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        Ok(self
            .run_with(&RunOptions::default(), feeds, fetches, targets)?
            .outputs)
    }

    /// Runs one step with options.
    pub fn run_with(
        &self,
        options: &RunOptions,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<RunOutput> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let names: smallvec::SmallVec<[&str; 8]> = feeds.iter().map(|(n, _)| *n).collect();
        let compiled = self.compiled_step(&names, fetches, targets)?;
        let args = feeds.iter().map(|(_, t)| t.clone()).collect();
        let (rx, guard) = self.launch(&compiled, args, options)?;
        let result = rx.wait();
        drop(guard);
        self.finish(result, &compiled, options)
    }

    /// Runs one step; a future that any executor (tokio or other) can drive.
    pub async fn run_async(&self, request: RunRequest) -> Result<RunOutput> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let feeds: Vec<&str> = request.feeds.iter().map(|(n, _)| n.as_str()).collect();
        let fetches: Vec<&str> = request.fetches.iter().map(String::as_str).collect();
        let targets: Vec<&str> = request.targets.iter().map(String::as_str).collect();
        let compiled = self.compiled_step_async(&feeds, &fetches, &targets).await?;
        let args = request.feeds.iter().map(|(_, t)| t.clone()).collect();
        let (rx, guard) = self.launch(&compiled, args, &request.options)?;
        let result = rx.await;
        drop(guard);
        self.finish(result, &compiled, &request.options)
    }

    fn launch(
        &self,
        compiled: &CompiledStep,
        args: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(CompletionReceiver<StepResult>, StepGuard)> {
        for (spec, t) in compiled.feeds.iter().zip(&args) {
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
        }
        let rt = &self.inner.runtime;
        let step_id = rt.next_step_id();
        let span = tracing::debug_span!("step", step_id);
        let _entered = span.clone().entered();
        let rendezvous: Arc<dyn Rendezvous> = Arc::new(LocalRendezvous::new());
        let call_frame = Arc::new(CallFrame::new(args, compiled.signature.fetches.len()));
        let devices = rt.devices();
        let mailboxes = compiled
            .partitions
            .iter()
            .map(|p| devices[p.device].mailbox.clone())
            .collect();
        let step_container: Arc<str> = Arc::from(format!("__step_{step_id}"));
        let cancellation = Arc::new(rendezvous::CancellationManager::new());
        let (tracker, rx) = StepTracker::new(
            step_id,
            compiled.partitions.len(),
            Arc::clone(&rendezvous),
            Arc::clone(&call_frame),
            mailboxes,
        );
        tracker.set_cancellation(Arc::clone(&cancellation));
        tracker.set_step_resources(
            Arc::clone(&step_container),
            compiled
                .partitions
                .iter()
                .map(|p| Arc::clone(&devices[p.device].ctx.resources))
                .collect(),
        );
        let collect_stats = options.trace_level == TraceLevel::FullTrace;
        let guard = StepGuard {
            _span: span.clone(),
            _cancel: options
                .timeout
                .or(self.inner.options.default_timeout)
                .map(|d| self.arm_timeout(&tracker, d)),
        };
        for p in &compiled.partitions {
            let dev = &devices[p.device];
            let step = Arc::new(StepContext {
                step_id,
                device: Arc::clone(&self.inner.device_ctxs[p.device]),
                rendezvous: Arc::clone(&rendezvous),
                call_frame: Arc::clone(&call_frame),
                default_container: Arc::clone(&self.inner.default_container),
                step_container: Arc::clone(&step_container),
                cancellation: Arc::clone(&cancellation),
                timer: Arc::clone(&self.inner.timer),
            });
            let run = DeviceMsg::Run(Box::new(PartitionRun {
                plan: Arc::clone(&p.plan),
                step,
                tracker: Arc::clone(&tracker),
                collect_stats,
                step_span: span.clone(),
            }));
            if dev.mailbox.send(run).is_err() {
                tracker.partition_done(Err(Status::cancelled("the runtime has shut down")), None);
            }
        }
        Ok((rx, guard))
    }

    fn arm_timeout(
        &self,
        tracker: &Arc<StepTracker>,
        d: Duration,
    ) -> tokio::sync::oneshot::Sender<()> {
        let weak = Arc::downgrade(tracker);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        self.inner.runtime.system_arbiter().spawn(async move {
            tokio::select! {
                _ = actix_rt::time::sleep(d) => {
                    if let Some(t) = weak.upgrade() {
                        tracing::debug!(step = t.step_id, "step deadline exceeded");
                        t.abort(Status::deadline_exceeded(format!("step timed out after {d:?}")));
                    }
                }
                _ = rx => {}
            }
        });
        tx
    }

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
            outputs.push(v.ok_or_else(|| {
                Status::invalid_argument(format!(
                    "fetch '{name}' produced no value: it is on an untaken branch (dead) or was never computed"
                ))
                .with_node(name.split(':').next().unwrap_or(name))
            })?);
        }
        let metadata = (options.trace_level == TraceLevel::FullTrace).then(|| {
            let names = self.inner.runtime.device_names();
            RunMetadata {
                step_stats: r.stats,
                partition_graphs: compiled
                    .partitions
                    .iter()
                    .map(|p| (names[p.device].clone(), p.graph.clone()))
                    .collect(),
            }
        });
        Ok(RunOutput { outputs, metadata })
    }
}
