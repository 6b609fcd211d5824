//! [`MonitoredTrainingSession`]: what TensorFlow's `tf.compat.v1.train.
//! MonitoredTrainingSession` gives its users — a session wrapper that initialises
//! or restores the model (the latest checkpoint of `checkpoint_dir` wins, so a
//! killed run picks up where it stopped), starts the graph's queue runners under a
//! [`Coordinator`], and runs [`SessionRunHook`]s around every step: checkpoints
//! every N steps or seconds, step-rate and tensor logging, stop at step N and
//! TensorBoard summaries. A step that fails with `OutOfRange` (an input pipeline ran
//! out of epochs) ends training cleanly, as in TensorFlow.
//!
//! On a cluster (`TrainingConfig::master` names a master, `grpc://host:port`),
//! the session is the master's, and it **recovers by itself** as TensorFlow's
//! `_RecoverableSession` does: a step that fails with `Aborted` or `Unavailable`
//! (a worker or parameter server died or restarted) closes the session, opens a
//! new one as soon as the cluster answers again (retrying for up to
//! [`TrainingConfig::recovery_timeout`]), restores the newest checkpoint,
//! initialises the local variables, restarts the queue runners and runs the step
//! again; the caller only sees the global step go back to the checkpoint's.
//!
//! Restoring falls back: a damaged or missing newest checkpoint is skipped with a
//! warning and the next newest readable one restored (the rule is in
//! [`checkpoint_management`](super::checkpoint_management)). The variables are
//! initialised from scratch, at step 0, only when `checkpoint_dir` holds no
//! checkpoint at all; when it holds some but none restores, opening the session
//! fails with `DataLoss` naming each, unless
//! [`TrainingConfig::start_fresh_if_checkpoints_unreadable`] says to start from
//! scratch anyway (with a warning).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actors::input::{start_queue_runners, Coordinator, QueueRunner};
use actors::{Session, SessionOptions};
use graph::builder::Scope;
use graph::ops::{local_variables_initializer, QueueRunnerSpec};
use graph::train::{global_step, global_variables_initializer};
use graph::{Code, Result, Status, Tensor};

use crate::tensorboard::FileWriter;
use crate::train::checkpoint_management::LatestRestore;
use crate::train::saver::{Saver, SaverOptions};

/// The save prefix's base name of the checkpoints in `checkpoint_dir`
/// (`model.ckpt-<step>`).
pub const CHECKPOINT_BASENAME: &str = "model.ckpt";

/// Code run around each step (TensorFlow's `SessionRunHook`).
pub trait SessionRunHook: Send {
    /// Once, after the session is initialised or restored.
    fn begin(&mut self, _session: &Session, _global_step: i64) -> Result<()> {
        Ok(())
    }
    /// Tensors to fetch along with the step.
    fn before_run(&mut self, _global_step: i64) -> Vec<String> {
        Vec::new()
    }
    /// After the step, with the global step it reached and the tensors asked for.
    /// Returns `true` to request a stop.
    fn after_run(
        &mut self,
        session: &Session,
        global_step: i64,
        fetched: &[Tensor],
    ) -> Result<bool>;
    /// Once, when the session closes.
    fn end(&mut self, _session: &Session, _global_step: i64) -> Result<()> {
        Ok(())
    }
}

/// How a [`MonitoredTrainingSession`] runs.
#[derive(Clone, Debug)]
pub struct TrainingConfig {
    /// Where checkpoints go and are restored from (`None`: no checkpoints).
    pub checkpoint_dir: Option<PathBuf>,
    /// Save a checkpoint every this many steps.
    pub save_checkpoint_steps: Option<i64>,
    /// … or every this long.
    pub save_checkpoint_secs: Option<Duration>,
    /// Checkpoints kept (default 5).
    pub max_to_keep: Option<usize>,
    /// Log the step rate every this many steps.
    pub log_step_count_steps: Option<i64>,
    /// Stop once the global step reaches this.
    pub last_step: Option<i64>,
    /// TensorBoard event directory for the summaries of `summary_op`.
    pub summary_dir: Option<PathBuf>,
    /// The merged summary tensor to write every `save_summaries_steps` steps.
    pub summary_op: Option<String>,
    /// How often summaries are written (default 100).
    pub save_summaries_steps: Option<i64>,
    /// The session's options.
    pub session_options: SessionOptions,
    /// When `checkpoint_dir` holds checkpoints but none can be restored (all
    /// damaged or missing), start from scratch at step 0 with a warning instead
    /// of failing with `DataLoss` (default: fail, so no progress is lost
    /// silently).
    pub start_fresh_if_checkpoints_unreadable: bool,
    /// The master to run on (`grpc://host:port`, TensorFlow's `master`); `None`:
    /// an in-process session.
    pub master: Option<String>,
    /// How long to keep trying to open a new session after a step failed with
    /// `Aborted` or `Unavailable` (default 5 minutes); the step's error is
    /// returned once it has passed. Also how long a non-chief waits for the
    /// chief to initialise the model.
    pub recovery_timeout: Option<Duration>,
    /// Whether this is the chief (default): the chief restores or initialises
    /// the model and alone saves checkpoints and summaries; any other worker of
    /// a between-graph replicated job waits until the chief has initialised every
    /// global variable (TensorFlow's `WorkerSessionCreator`), then initialises
    /// only its local variables.
    pub is_chief: bool,
}

impl Default for TrainingConfig {
    fn default() -> TrainingConfig {
        TrainingConfig {
            checkpoint_dir: None,
            save_checkpoint_steps: None,
            save_checkpoint_secs: None,
            max_to_keep: None,
            log_step_count_steps: None,
            last_step: None,
            summary_dir: None,
            summary_op: None,
            save_summaries_steps: None,
            session_options: SessionOptions::default(),
            start_fresh_if_checkpoints_unreadable: false,
            master: None,
            recovery_timeout: None,
            is_chief: true,
        }
    }
}

/// Saves a checkpoint every N steps or seconds, and at the end.
pub struct CheckpointSaverHook {
    saver: Arc<Saver>,
    prefix: PathBuf,
    every_steps: Option<i64>,
    every_secs: Option<Duration>,
    last_step: i64,
    last_time: Instant,
    /// Checkpoints written so far (newest last).
    pub saved: Vec<PathBuf>,
}

impl CheckpointSaverHook {
    /// Saves with `saver` under `dir/model.ckpt-<step>` ([`CHECKPOINT_BASENAME`]).
    pub fn new(
        saver: Arc<Saver>,
        dir: PathBuf,
        every_steps: Option<i64>,
        every_secs: Option<Duration>,
    ) -> Self {
        CheckpointSaverHook {
            saver,
            prefix: dir.join(CHECKPOINT_BASENAME),
            every_steps,
            every_secs,
            last_step: i64::MIN,
            last_time: Instant::now(),
            saved: Vec::new(),
        }
    }

    fn save(&mut self, session: &Session, step: i64) -> Result<()> {
        if step == self.last_step {
            return Ok(());
        }
        let path = self.saver.save(session, &self.prefix, Some(step))?;
        tracing::info!(step, path = %path.display(), "checkpoint saved");
        self.saved.push(path);
        self.last_step = step;
        self.last_time = Instant::now();
        Ok(())
    }
}

impl SessionRunHook for CheckpointSaverHook {
    fn begin(&mut self, _session: &Session, global_step: i64) -> Result<()> {
        self.last_step = global_step;
        self.last_time = Instant::now();
        Ok(())
    }

    fn after_run(&mut self, session: &Session, step: i64, _: &[Tensor]) -> Result<bool> {
        let by_steps = self
            .every_steps
            .is_some_and(|n| n > 0 && step - self.last_step >= n);
        let by_time = self
            .every_secs
            .is_some_and(|d| self.last_time.elapsed() >= d);
        if by_steps || by_time {
            self.save(session, step)?;
        }
        Ok(false)
    }

    fn end(&mut self, session: &Session, step: i64) -> Result<()> {
        self.save(session, step)
    }
}

/// Requests a stop once the global step reaches `last_step`.
pub struct StopAtStepHook {
    /// The step to stop at.
    pub last_step: i64,
}

impl SessionRunHook for StopAtStepHook {
    fn after_run(&mut self, _: &Session, step: i64, _: &[Tensor]) -> Result<bool> {
        Ok(step >= self.last_step)
    }
}

/// Logs the steps per second every N steps (a `tracing` event at INFO).
pub struct StepCounterHook {
    every_steps: i64,
    mark: Option<(i64, Instant)>,
    /// The last rate measured.
    pub last_rate: Option<f64>,
}

impl StepCounterHook {
    /// Logs every `every_steps` steps.
    pub fn new(every_steps: i64) -> Self {
        StepCounterHook {
            every_steps: every_steps.max(1),
            mark: None,
            last_rate: None,
        }
    }
}

impl SessionRunHook for StepCounterHook {
    fn after_run(&mut self, _: &Session, step: i64, _: &[Tensor]) -> Result<bool> {
        match self.mark {
            None => self.mark = Some((step, Instant::now())),
            Some((s0, t0)) if step - s0 >= self.every_steps => {
                let rate = (step - s0) as f64 / t0.elapsed().as_secs_f64().max(1e-9);
                tracing::info!(step, steps_per_sec = rate, "global_step/sec");
                self.last_rate = Some(rate);
                self.mark = Some((step, Instant::now()));
            }
            Some(_) => {}
        }
        Ok(false)
    }
}

/// Logs the values of some tensors every N steps (TensorFlow's `LoggingTensorHook`).
pub struct LoggingTensorHook {
    tensors: Vec<String>,
    every_steps: i64,
    /// The last values fetched, by tensor.
    pub last: Vec<(String, Tensor)>,
}

impl LoggingTensorHook {
    /// Logs `tensors` every `every_steps` steps.
    pub fn new(tensors: Vec<String>, every_steps: i64) -> Self {
        LoggingTensorHook {
            tensors,
            every_steps: every_steps.max(1),
            last: Vec::new(),
        }
    }
}

impl SessionRunHook for LoggingTensorHook {
    fn before_run(&mut self, step: i64) -> Vec<String> {
        if (step + 1) % self.every_steps == 0 {
            self.tensors.clone()
        } else {
            Vec::new()
        }
    }

    fn after_run(&mut self, _: &Session, step: i64, fetched: &[Tensor]) -> Result<bool> {
        if !fetched.is_empty() {
            self.last = self
                .tensors
                .iter()
                .cloned()
                .zip(fetched.iter().cloned())
                .collect();
            for (name, t) in &self.last {
                tracing::info!(step, tensor = name.as_str(), value = %t, "tensor");
            }
        }
        Ok(false)
    }
}

/// Writes a serialized `Summary` tensor to TensorBoard event files every N steps.
pub struct SummarySaverHook {
    writer: FileWriter,
    summary: String,
    every_steps: i64,
}

impl SummarySaverHook {
    /// Writes `summary` (a string tensor holding a `Summary`) into `writer`.
    pub fn new(writer: FileWriter, summary: String, every_steps: i64) -> Self {
        SummarySaverHook {
            writer,
            summary,
            every_steps: every_steps.max(1),
        }
    }
}

impl SessionRunHook for SummarySaverHook {
    fn before_run(&mut self, step: i64) -> Vec<String> {
        if (step + 1) % self.every_steps == 0 {
            vec![self.summary.clone()]
        } else {
            Vec::new()
        }
    }

    fn after_run(&mut self, _: &Session, step: i64, fetched: &[Tensor]) -> Result<bool> {
        if let Some(t) = fetched.first() {
            let bytes = t
                .as_strings()
                .ok()
                .and_then(|v| v.first().map(|b| b.to_vec()))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "summary '{}' is not a string scalar",
                        self.summary
                    ))
                })?;
            self.writer.add_summary(&bytes, step)?;
        }
        Ok(false)
    }

    fn end(&mut self, _: &Session, _: i64) -> Result<()> {
        self.writer.flush()
    }
}

/// The session wrapper; see the module docs.
pub struct MonitoredTrainingSession {
    session: Session,
    hooks: Vec<Box<dyn SessionRunHook>>,
    coord: Coordinator,
    runners: Vec<QueueRunner>,
    step_tensor: String,
    step: i64,
    stop: bool,
    restored_from: Option<PathBuf>,
    opener: Opener,
    recoveries: usize,
}

/// What opening (and re-opening) the session needs.
struct Opener {
    graph: graph::GraphDef,
    config: TrainingConfig,
    saver: Option<Arc<Saver>>,
    init_global: String,
    init_local: String,
    /// The names of the uninitialised global variables (a string vector).
    report_uninitialized: String,
    step_tensor: String,
    specs: Vec<QueueRunnerSpec>,
}

/// A session opened, initialised or restored, with its queue runners started.
struct Opened {
    session: Session,
    restored_from: Option<PathBuf>,
    step: i64,
    coord: Coordinator,
    runners: Vec<QueueRunner>,
}

impl Opener {
    fn open(&self) -> Result<Opened> {
        let config = &self.config;
        let session = match &config.master {
            Some(master) => {
                use distributed::Connect;
                Session::connect(master, &self.graph, config.session_options.clone())?
            }
            None => Session::new(&self.graph, config.session_options.clone())?,
        };
        if !config.is_chief {
            return self.open_as_worker(session);
        }
        let outcome = match (&config.checkpoint_dir, &self.saver) {
            (Some(dir), Some(saver)) => {
                saver.restore_newest_readable(&session, dir.join(CHECKPOINT_BASENAME))?
            }
            _ => LatestRestore::NoCheckpoint,
        };
        let latest = match outcome {
            LatestRestore::Restored { path, skipped, .. } => {
                tracing::info!(path = %path.display(), skipped = skipped.len(), "restored from checkpoint");
                Some(path)
            }
            LatestRestore::NoCheckpoint => None,
            LatestRestore::NoneReadable { error, .. } => {
                if !config.start_fresh_if_checkpoints_unreadable {
                    return Err(Status::data_loss(format!(
                        "{}; refusing to start training from step 0 \
                         (set TrainingConfig::start_fresh_if_checkpoints_unreadable to allow it)",
                        error.message()
                    )));
                }
                tracing::warn!(error = %error, "no checkpoint restores; starting from step 0 as configured");
                None
            }
        };
        if latest.is_none() {
            session.run(&[], &[], &[&self.init_global])?;
        }
        session.run(&[], &[], &[&self.init_local])?;
        let step = read_step(&session, &self.step_tensor)?;
        let coord = Coordinator::new();
        let runners = start_queue_runners(&session, &coord, &self.specs);
        Ok(Opened {
            session,
            restored_from: latest,
            step,
            coord,
            runners,
        })
    }
}

impl Opener {
    /// A non-chief's session: once the chief has initialised the model (polled),
    /// its local variables and queue runners.
    fn open_as_worker(&self, session: Session) -> Result<Opened> {
        let deadline = Instant::now()
            + self
                .config
                .recovery_timeout
                .unwrap_or(Duration::from_secs(300));
        loop {
            let out = session.run(&[], &[&self.report_uninitialized], &[])?;
            let missing = out.first().map_or(0, |t| t.num_elements());
            if missing == 0 {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Status::deadline_exceeded(format!(
                    "the chief has not initialised the model: {} variables are still \
                     uninitialised ({})",
                    missing, out[0]
                )));
            }
            tracing::debug!(missing, "waiting for the chief to initialise the model");
            std::thread::sleep(Duration::from_millis(100));
        }
        session.run(&[], &[], &[&self.init_local])?;
        let step = read_step(&session, &self.step_tensor)?;
        let coord = Coordinator::new();
        let runners = start_queue_runners(&session, &coord, &self.specs);
        Ok(Opened {
            session,
            restored_from: None,
            step,
            coord,
            runners,
        })
    }
}

/// Whether a step's error means the cluster lost a task (TensorFlow's
/// `_PREEMPTION_ERRORS`), so a new session may succeed.
fn is_preemption(e: &Status) -> bool {
    matches!(e.code(), Code::Aborted | Code::Unavailable)
}

impl MonitoredTrainingSession {
    /// Opens a session on the graph of `scope` (which must hold a global step, see
    /// `graph::train::get_or_create_global_step`), restores the newest readable
    /// checkpoint of `config.checkpoint_dir` or initialises the variables (see the
    /// module docs for when that is an error), starts the queue runners of the
    /// `QUEUE_RUNNERS` collection and the hooks (the built-in ones `config` asks
    /// for, then `hooks`).
    pub fn new(
        scope: &Scope,
        config: &TrainingConfig,
        hooks: Vec<Box<dyn SessionRunHook>>,
    ) -> Result<Self> {
        let gs = global_step(scope)?.ok_or_else(|| {
            Status::failed_precondition(
                "the graph has no global step (create one with get_or_create_global_step)",
            )
        })?;
        let step_read = gs.read(&scope.with_name_scope("monitored"))?;
        let init_global = global_variables_initializer(scope)?;
        let init_local = local_variables_initializer(scope)?;
        let saver = match &config.checkpoint_dir {
            Some(_) => Some(Arc::new(Saver::with_options(
                scope,
                SaverOptions {
                    max_to_keep: config.max_to_keep.unwrap_or(5),
                    ..Default::default()
                },
            )?)),
            None => None,
        };
        let mut all_hooks: Vec<Box<dyn SessionRunHook>> = Vec::new();
        if let (true, Some(dir), Some(saver)) = (config.is_chief, &config.checkpoint_dir, &saver) {
            std::fs::create_dir_all(dir).map_err(|e| {
                Status::new(Code::PermissionDenied, format!("{}: {e}", dir.display()))
            })?;
            all_hooks.push(Box::new(CheckpointSaverHook::new(
                Arc::clone(saver),
                dir.clone(),
                config.save_checkpoint_steps,
                config.save_checkpoint_secs,
            )));
        }
        if let Some(n) = config.log_step_count_steps {
            all_hooks.push(Box::new(StepCounterHook::new(n)));
        }
        if let Some(n) = config.last_step {
            all_hooks.push(Box::new(StopAtStepHook { last_step: n }));
        }
        if let (true, Some(dir), Some(op)) =
            (config.is_chief, &config.summary_dir, &config.summary_op)
        {
            let mut writer = FileWriter::new(dir)?;
            writer.add_graph(&scope.graph_def())?;
            all_hooks.push(Box::new(SummarySaverHook::new(
                writer,
                op.clone(),
                config.save_summaries_steps.unwrap_or(100),
            )));
        }
        all_hooks.extend(hooks);
        let report_uninitialized = graph::train::report_uninitialized_variables(
            &scope.with_name_scope("monitored"),
            &graph::train::global_variables(scope)?,
        )?
        .name();
        let opener = Opener {
            graph: scope.graph_def(),
            config: config.clone(),
            saver,
            init_global: init_global.name().to_owned(),
            init_local: init_local.name().to_owned(),
            report_uninitialized,
            step_tensor: step_read.name(),
            specs: QueueRunnerSpec::all_in(scope)?,
        };
        let opened = opener.open()?;
        for h in all_hooks.iter_mut() {
            h.begin(&opened.session, opened.step)?;
        }
        Ok(MonitoredTrainingSession {
            session: opened.session,
            hooks: all_hooks,
            coord: opened.coord,
            runners: opened.runners,
            step_tensor: opener.step_tensor.clone(),
            step: opened.step,
            // Restored at or past the last step: nothing more to run.
            stop: config.last_step.is_some_and(|n| opened.step >= n),
            restored_from: opened.restored_from,
            opener,
            recoveries: 0,
        })
    }

    /// How many times the session was re-opened after losing a task.
    pub fn recoveries(&self) -> usize {
        self.recoveries
    }

    /// Stops the current session's queue runners and replaces the session by a
    /// new one (see the module docs), or returns `cause` once
    /// [`TrainingConfig::recovery_timeout`] has passed.
    fn recover(&mut self, cause: Status) -> Result<()> {
        let deadline = Instant::now()
            + self
                .opener
                .config
                .recovery_timeout
                .unwrap_or(Duration::from_secs(300));
        tracing::warn!(error = %cause, "the step lost its cluster; opening a new session");
        self.coord.request_stop(None);
        for r in &self.runners {
            let _ = r.cancel(&self.session);
        }
        let _ = self.coord.join();
        let _ = self.session.close();
        let mut last = cause;
        loop {
            match self.opener.open() {
                Ok(o) => {
                    tracing::info!(step = o.step, "session re-opened");
                    self.session = o.session;
                    self.coord = o.coord;
                    self.runners = o.runners;
                    self.step = o.step;
                    self.restored_from = o.restored_from;
                    self.recoveries += 1;
                    return Ok(());
                }
                Err(e) if is_preemption(&e) && Instant::now() < deadline => {
                    tracing::debug!(error = %e, "the cluster is not back yet");
                    last = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => {
                    return Err(if is_preemption(&e) { last } else { e });
                }
            }
        }
    }

    /// The checkpoint the session was restored from, if any.
    pub fn restored_from(&self) -> Option<&PathBuf> {
        self.restored_from.as_ref()
    }

    /// The underlying session (for evaluation steps outside the hooks).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The global step after the last step.
    pub fn global_step(&self) -> i64 {
        self.step
    }

    /// Whether training should stop: a hook asked, the input ran out, or a queue
    /// runner failed.
    pub fn should_stop(&self) -> bool {
        self.stop || self.coord.should_stop()
    }

    /// Runs one step with the hooks around it. `OutOfRange` (end of input) marks
    /// the session stopped and is returned as is; so is any other error, after
    /// which the session is still usable.
    pub fn run(
        &mut self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        let extra: Vec<Vec<String>> = self
            .hooks
            .iter_mut()
            .map(|h| h.before_run(self.step))
            .collect();
        let mut all: Vec<&str> = fetches.to_vec();
        for e in &extra {
            all.extend(e.iter().map(String::as_str));
        }
        let out = loop {
            match self.session.run(feeds, &all, targets) {
                Ok(o) => break o,
                Err(e) if is_preemption(&e) => self.recover(e)?,
                Err(e) => {
                    if e.code() == Code::OutOfRange {
                        self.stop = true;
                        self.coord.request_stop(None);
                    }
                    return Err(e);
                }
            }
        };
        self.step = read_step(&self.session, &self.step_tensor)?;
        let mut at = fetches.len();
        for (h, e) in self.hooks.iter_mut().zip(&extra) {
            let mine = &out[at..at + e.len()];
            at += e.len();
            if h.after_run(&self.session, self.step, mine)? {
                self.stop = true;
            }
        }
        Ok(out[..fetches.len()].to_vec())
    }

    /// Ends the hooks (a final checkpoint), stops the queue runners and joins them;
    /// returns the first error a runner reported (end of input is not an error).
    pub fn close(mut self) -> Result<()> {
        let mut first: Option<Status> = None;
        for h in self.hooks.iter_mut() {
            if let Err(e) = h.end(&self.session, self.step) {
                first.get_or_insert(e);
            }
        }
        self.coord.request_stop(None);
        for r in &self.runners {
            let _ = r.cancel(&self.session);
        }
        if let Err(e) = self.coord.join() {
            if e.code() != Code::OutOfRange && e.code() != Code::Cancelled {
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn read_step(session: &Session, tensor: &str) -> Result<i64> {
    let t = session.run(&[], &[tensor], &[])?;
    let t = t
        .first()
        .ok_or_else(|| Status::internal("the global step fetch returned nothing"))?;
    t.as_slice::<i64>()
        .ok()
        .and_then(|s| s.first().copied())
        .or_else(|| {
            t.as_slice::<i32>()
                .ok()
                .and_then(|s| s.first().map(|&v| i64::from(v)))
        })
        .ok_or_else(|| {
            Status::invalid_argument(format!("global step '{tensor}' is not an integer scalar"))
        })
}
