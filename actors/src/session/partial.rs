//! Partial runs (TensorFlow's `partial_run_setup` / `partial_run`): one step fed
//! and fetched a part at a time, so a client can look at some results before it
//! decides the next feeds, while stateful ops still run once.
//!
//! The setup compiles the signature for partial runs (its feeds and fetches are
//! client-terminated `_Recv`s and `_Send`s, as TensorFlow compiles a partial
//! run's graph without the function-call convention) and starts the step; each
//! call hands its feeds to the running step and waits for its fetches; the call
//! that has given every feed and taken every fetch also waits for the step to
//! end and reports its status. A failed call ends the run; dropping an unfinished
//! run aborts its step.

use std::sync::{Arc, Mutex};

use graph::{Result, Status, Tensor};

use super::actor::{SessionCommand, SessionReply};
use super::handle::{check_feed, closed, lost, no_value, Kind, SessionShared};
use super::state::{CompiledStep, StepSignature};
use super::{RunArgs, Session, SessionBackend};
use crate::step::StepResult;
use crate::worker::{PartialCall, RunGraphRequest};

/// A partial run; see the module docs.
///
/// # Examples
/// ```
/// use actorflow_actors::{Session, SessionOptions};
/// use graph::{builder::Scope, ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let a = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
/// let b = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
/// let c = ops::add(&s, &a, &b).unwrap();
/// let d = ops::mul(&s, &c, &c).unwrap();
/// let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
/// let run = sess
///     .partial_run_setup(&[&a.name(), &b.name()], &[&c.name(), &d.name()], &[])
///     .unwrap();
/// let c_val = run
///     .run(&[(&a.name(), Tensor::scalar(1.0f32)), (&b.name(), Tensor::scalar(2.0f32))], &[&c.name()])
///     .unwrap();
/// assert_eq!(c_val[0], Tensor::scalar(3.0f32));
/// let d_val = run.run(&[], &[&d.name()]).unwrap();
/// assert_eq!(d_val[0], Tensor::scalar(9.0f32));
/// ```
pub struct PartialRun {
    feeds: Vec<String>,
    fetches: Vec<String>,
    progress: Mutex<Progress>,
    kind: PartialKind,
}

struct Progress {
    fed: Vec<bool>,
    fetched: Vec<bool>,
    finished: bool,
}

enum PartialKind {
    Local {
        shared: Arc<SessionShared>,
        compiled: Arc<CompiledStep>,
        step_id: u64,
        span: tracing::Span,
    },
    Remote {
        backend: Arc<dyn SessionBackend>,
        handle: String,
    },
}

/// One call, checked: feeds by index, fetches by index, and whether it is the last.
struct Call {
    feeds: Vec<(usize, Tensor)>,
    fetches: Vec<usize>,
    last: bool,
}

impl Session {
    /// Sets up a partial run of `feeds`, `fetches` and `targets` and starts its
    /// step (TensorFlow's `partial_run_setup`); see [`PartialRun`].
    pub fn partial_run_setup(
        &self,
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<PartialRun> {
        let sig = partial_signature(feeds, fetches, targets);
        let shared = match &self.kind {
            Kind::Remote(b) => {
                let h = b
                    .partial_run_setup(&sig.feeds, &sig.fetches, &sig.targets)
                    .wait();
                return remote_run(b, sig, h);
            }
            Kind::Local(s) => s,
        };
        let compiled = match self.request(SessionCommand::Prepare(sig.clone()))?.wait() {
            Some(SessionReply::Prepared(c)) => c?,
            _ => return Err(closed()),
        };
        let (run, rx) = PartialRun::start(shared, compiled, sig)?;
        let r = match rx {
            Ok(rx) => rx.wait(),
            Err(e) => {
                run.abandon();
                return Err(e);
            }
        };
        run.started(r)?;
        Ok(run)
    }

    /// [`Session::partial_run_setup`] as a future.
    pub async fn partial_run_setup_async(
        &self,
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<PartialRun> {
        let sig = partial_signature(feeds, fetches, targets);
        let shared = match &self.kind {
            Kind::Remote(b) => {
                let h = b
                    .partial_run_setup(&sig.feeds, &sig.fetches, &sig.targets)
                    .await;
                return remote_run(b, sig, h);
            }
            Kind::Local(s) => s,
        };
        let compiled = match self.request(SessionCommand::Prepare(sig.clone()))?.await {
            Some(SessionReply::Prepared(c)) => c?,
            _ => return Err(closed()),
        };
        let (run, rx) = PartialRun::start(shared, compiled, sig)?;
        let r = match rx {
            Ok(rx) => rx.await,
            Err(e) => {
                run.abandon();
                return Err(e);
            }
        };
        run.started(r)?;
        Ok(run)
    }
}

fn partial_signature(feeds: &[&str], fetches: &[&str], targets: &[&str]) -> StepSignature {
    StepSignature {
        partial: true,
        ..StepSignature::new(feeds, fetches, targets)
    }
}

fn remote_run(
    backend: &Arc<dyn SessionBackend>,
    sig: StepSignature,
    handle: Option<Result<String>>,
) -> Result<PartialRun> {
    let handle = handle.unwrap_or_else(|| Err(lost()))?;
    Ok(PartialRun::new(
        sig,
        PartialKind::Remote {
            backend: Arc::clone(backend),
            handle,
        },
    ))
}

type Started = Result<rendezvous::CompletionReceiver<StepResult>>;

impl PartialRun {
    fn new(sig: StepSignature, kind: PartialKind) -> PartialRun {
        PartialRun {
            progress: Mutex::new(Progress {
                fed: vec![false; sig.feeds.len()],
                fetched: vec![false; sig.fetches.len()],
                finished: false,
            }),
            feeds: sig.feeds,
            fetches: sig.fetches,
            kind,
        }
    }

    /// The run, and the receiver of its first call (which starts the step).
    fn start(
        shared: &Arc<SessionShared>,
        compiled: Arc<CompiledStep>,
        sig: StepSignature,
    ) -> Result<(PartialRun, Started)> {
        if shared.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(closed());
        }
        let step_id = shared.runtime.next_step_id();
        let span = tracing::debug_span!("partial_run", step_id);
        // A run with nothing to feed or fetch is over once its targets ran.
        let last = sig.feeds.is_empty() && sig.fetches.is_empty();
        let rx = shared.worker.run_graph(RunGraphRequest {
            handle: Arc::clone(&compiled.handle),
            step_id,
            timeout: shared.options.default_timeout,
            span: Some(span.clone()),
            partial: Some(PartialCall {
                last,
                ..Default::default()
            }),
            ..Default::default()
        });
        let run = PartialRun::new(
            sig,
            PartialKind::Local {
                shared: Arc::clone(shared),
                compiled,
                step_id,
                span,
            },
        );
        if last {
            run.lock().finished = true;
        }
        Ok((run, rx))
    }

    /// Checks the first call's outcome.
    fn started(&self, r: Option<StepResult>) -> Result<()> {
        let out = self.outcome(r, &[]).map(|_| ());
        if out.is_err() {
            self.abandon();
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks a call against the setup and what earlier calls gave and took
    /// (TensorFlow's messages), and records it.
    fn check<'a>(
        &self,
        feeds: impl Iterator<Item = (&'a str, &'a Tensor)>,
        fetches: impl Iterator<Item = &'a str>,
    ) -> Result<Call> {
        let mut p = self.lock();
        if p.finished {
            return Err(Status::invalid_argument(
                "Must run 'setup' before performing partial runs! (this partial run has ended)",
            ));
        }
        let mut call = Call {
            feeds: Vec::new(),
            fetches: Vec::new(),
            last: false,
        };
        for (name, t) in feeds {
            let i = self.feeds.iter().position(|f| f == name).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "The feed {name} was not specified in partial_run_setup."
                ))
            })?;
            if p.fed[i] || call.feeds.iter().any(|(j, _)| *j == i) {
                return Err(Status::invalid_argument(format!(
                    "The feed {name} has already been fed."
                )));
            }
            if let PartialKind::Local { compiled, .. } = &self.kind {
                check_feed(&compiled.feeds[i], t)?;
            }
            call.feeds.push((i, t.clone()));
        }
        for name in fetches {
            let i = self.fetches.iter().position(|f| f == name).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "The fetch {name} was not specified in partial_run_setup."
                ))
            })?;
            if p.fetched[i] || call.fetches.contains(&i) {
                return Err(Status::invalid_argument(format!(
                    "The fetch {name} has already been fetched."
                )));
            }
            if let PartialKind::Local { compiled, .. } = &self.kind {
                let given = |j: usize| p.fed[j] || call.feeds.iter().any(|(k, _)| *k == j);
                let needs = compiled.fetch_feeds.get(i).map_or(&[][..], Vec::as_slice);
                if !needs.iter().all(|&j| given(j)) {
                    return Err(Status::invalid_argument(format!(
                        "Fetch {name} can't be computed from the feeds that have been fed so far."
                    )));
                }
            }
            call.fetches.push(i);
        }
        for (i, _) in &call.feeds {
            p.fed[*i] = true;
        }
        for i in &call.fetches {
            p.fetched[*i] = true;
        }
        call.last = p.fed.iter().chain(&p.fetched).all(|x| *x);
        p.finished = call.last;
        Ok(call)
    }

    /// Feeds `feeds` to the running step and returns the values of `fetches`,
    /// waiting for them (TensorFlow's `partial_run`). Each feed and fetch of the
    /// setup may be given once.
    pub fn run(&self, feeds: &[(&str, Tensor)], fetches: &[&str]) -> Result<Vec<Tensor>> {
        let call = self.check(feeds.iter().map(|(n, t)| (*n, t)), fetches.iter().copied())?;
        match &self.kind {
            PartialKind::Remote { backend, handle } => {
                let r = backend
                    .partial_run(handle, self.remote_request(&call))
                    .wait();
                self.remote_outcome(r, &call)
            }
            PartialKind::Local { .. } => {
                let wanted = call.fetches.clone();
                let r = self.dispatch(call).map(|rx| rx.wait());
                self.local_outcome(r, &wanted)
            }
        }
    }

    /// [`PartialRun::run`] as a future.
    pub async fn run_async(
        &self,
        feeds: Vec<(String, Tensor)>,
        fetches: Vec<String>,
    ) -> Result<Vec<Tensor>> {
        let call = self.check(
            feeds.iter().map(|(n, t)| (n.as_str(), t)),
            fetches.iter().map(String::as_str),
        )?;
        match &self.kind {
            PartialKind::Remote { backend, handle } => {
                let r = backend
                    .partial_run(handle, self.remote_request(&call))
                    .await;
                self.remote_outcome(r, &call)
            }
            PartialKind::Local { .. } => {
                let wanted = call.fetches.clone();
                let r = match self.dispatch(call) {
                    Ok(rx) => Ok(rx.await),
                    Err(e) => Err(e),
                };
                self.local_outcome(r, &wanted)
            }
        }
    }

    /// True once every feed was given and every fetch taken, or a call failed
    /// (in a session whose master is in another process: once every feed and
    /// fetch went through).
    pub fn is_finished(&self) -> bool {
        self.lock().finished
    }

    fn remote_request(&self, call: &Call) -> RunArgs {
        RunArgs {
            feeds: call
                .feeds
                .iter()
                .map(|(i, t)| (self.feeds[*i].clone(), t.clone()))
                .collect(),
            fetches: call
                .fetches
                .iter()
                .map(|i| self.fetches[*i].clone())
                .collect(),
            ..Default::default()
        }
    }

    /// A remote call's outcome. The master decides whether a failed call ended
    /// the run (a step that failed) or left it as it was (a call it refused), so
    /// the call is undone here and the master answers the next one.
    fn remote_outcome(
        &self,
        r: Option<Result<super::RunOutput>>,
        call: &Call,
    ) -> Result<Vec<Tensor>> {
        let r = r.unwrap_or_else(|| Err(lost())).map(|o| o.outputs);
        if r.is_err() {
            let mut p = self.lock();
            for (i, _) in &call.feeds {
                p.fed[*i] = false;
            }
            for i in &call.fetches {
                p.fetched[*i] = false;
            }
            p.finished = false;
        }
        r
    }

    fn dispatch(&self, call: Call) -> Result<rendezvous::CompletionReceiver<StepResult>> {
        let PartialKind::Local {
            shared,
            compiled,
            step_id,
            span,
        } = &self.kind
        else {
            return Err(Status::internal("a remote partial run dispatched locally"));
        };
        let _entered = span.clone().entered();
        shared.worker.run_graph(RunGraphRequest {
            handle: Arc::clone(&compiled.handle),
            step_id: *step_id,
            span: Some(span.clone()),
            partial: Some(PartialCall {
                feeds: call.feeds,
                fetches: call.fetches,
                last: call.last,
            }),
            ..Default::default()
        })
    }

    fn local_outcome(
        &self,
        r: Result<Option<StepResult>>,
        wanted: &[usize],
    ) -> Result<Vec<Tensor>> {
        let out = r.and_then(|r| self.outcome(r, wanted));
        if out.is_err() {
            self.abandon();
        }
        out
    }

    /// The values of a call's fetches (`wanted`, by index) from its result.
    fn outcome(&self, r: Option<StepResult>, wanted: &[usize]) -> Result<Vec<Tensor>> {
        let r = r.ok_or_else(|| {
            Status::cancelled("the runtime stopped before the partial run's call finished")
        })?;
        r.status?;
        r.retvals
            .into_iter()
            .zip(wanted)
            .map(|(v, i)| v.ok_or_else(|| no_value(&self.fetches[*i])))
            .collect()
    }

    /// Ends an unfinished run's step on its worker.
    fn abandon(&self) {
        self.lock().finished = true;
        if let PartialKind::Local {
            shared, step_id, ..
        } = &self.kind
        {
            shared
                .worker
                .abort_step(*step_id, Status::cancelled("the partial run was abandoned"));
            shared.worker.cleanup_step(*step_id);
        }
    }
}

impl Drop for PartialRun {
    fn drop(&mut self) {
        if !self.lock().finished {
            self.abandon();
        }
    }
}
