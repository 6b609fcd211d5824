//! [`SyncReplicasHook`]: what TensorFlow's `SyncReplicasOptimizer.
//! make_session_run_hook(is_chief)` does for a [`MonitoredTrainingSession`]
//! (`_SyncReplicasOptimizerHook`): once the session is initialised, check that
//! every global variable is (`ready_for_local_init_op`), run the local init (the
//! chief's also sets the accumulators' global steps), and on the chief fill the
//! token queue and start the chief's sync loop.
//!
//! The sync loop differs from TensorFlow's queue runner in one way, so that
//! closing never hangs: TensorFlow's chief thread blocks in
//! `AccumulatorTakeGradient` until the workers' gradients arrive and is left
//! behind (a daemon thread) when training ends. Here the loop first reads every
//! accumulator's count and runs the sync op only once each holds
//! `replicas_to_aggregate` gradients, so the op never waits, and between polls it
//! watches for the stop that [`SessionRunHook::end`] requests, then joins.
//! Nothing is lost by the check: only the chief takes gradients, so a count
//! never falls between the check and the take. When training ends the chief
//! closes the token queue, so the other workers' steps waiting for a token end
//! with `OutOfRange` (their `MonitoredTrainingSession`s stop) instead of hanging.
//!
//! [`MonitoredTrainingSession`]: super::MonitoredTrainingSession

use std::thread::JoinHandle;
use std::time::Duration;

use actors::input::Coordinator;
use actors::{RunArgs, RunOptions, Session};
use graph::builder::Scope;
use graph::train::{Optimizer, SyncReplicasOptimizer};
use graph::{Result, Status, Tensor};

use super::monitored::SessionRunHook;

/// What only the chief runs.
struct ChiefOps {
    init_tokens_op: String,
    /// Closes the token queue (at the end of training).
    close_tokens_op: String,
    sync_op: String,
    counts: Vec<String>,
    required: i32,
}

/// See the module docs.
pub struct SyncReplicasHook {
    local_init_op: String,
    ready_for_local_init_op: String,
    chief: Option<ChiefOps>,
    /// The chief's op closing the token queue, run by `end`.
    close_tokens_op: Option<String>,
    /// How long the sync loop sleeps when the gradients are not all in.
    pub poll_interval: Duration,
    /// The deadline of each of the sync loop's steps.
    pub step_timeout: Duration,
    coord: Coordinator,
    thread: Option<JoinHandle<()>>,
}

impl SyncReplicasHook {
    /// The hook of `opt` (after its `apply_gradients`), building in `s`'s graph
    /// what it runs: for the chief, `get_init_tokens_op(num_tokens)` and one
    /// `AccumulatorNumAccumulated` per accumulator. Build it before the session.
    pub fn new<O: Optimizer>(
        opt: &SyncReplicasOptimizer<O>,
        s: &Scope,
        is_chief: bool,
        num_tokens: i64,
    ) -> Result<SyncReplicasHook> {
        let chief = if is_chief {
            let hs = s.with_name_scope("sync_replicas_hook");
            let counts = opt
                .accumulators()?
                .iter()
                .map(|(acc, _)| acc.num_accumulated(&hs.colocate_with(acc.handle.op())))
                .map(|o| o.map(|o| o.name()))
                .collect::<Result<Vec<_>>>()?;
            let runner = opt.chief_queue_runner()?;
            let sync_op = runner
                .enqueue_ops
                .first()
                .cloned()
                .ok_or_else(|| Status::internal("the chief queue runner has no sync op"))?;
            let tokens = opt.sync_token_queue()?;
            let close = graph::ops::queue_close(&hs.colocate_with(tokens.op()), &tokens, false)?;
            Some(ChiefOps {
                init_tokens_op: opt.get_init_tokens_op(num_tokens)?.name().to_owned(),
                close_tokens_op: close.name().to_owned(),
                sync_op,
                counts,
                required: i32::try_from(opt.replicas_to_aggregate()).unwrap_or(i32::MAX),
            })
        } else {
            None
        };
        Ok(SyncReplicasHook {
            local_init_op: if is_chief {
                opt.chief_init_op()?
            } else {
                opt.local_step_init_op()?
            }
            .name()
            .to_owned(),
            ready_for_local_init_op: opt.ready_for_local_init_op()?.name(),
            close_tokens_op: chief.as_ref().map(|c| c.close_tokens_op.clone()),
            chief,
            poll_interval: Duration::from_millis(1),
            step_timeout: Duration::from_secs(300),
            coord: Coordinator::new(),
            thread: None,
        })
    }

    fn bounded(&self) -> RunOptions {
        RunOptions::default().with_timeout(self.step_timeout)
    }

    /// `FailedPrecondition` naming the uninitialised variables, if any.
    fn check_ready(&self, session: &Session) -> Result<()> {
        let out = session.run_with(
            &RunArgs::new()
                .fetch(&self.ready_for_local_init_op)
                .options(self.bounded()),
        )?;
        let names = out
            .outputs
            .first()
            .ok_or_else(|| Status::internal("ready_for_local_init_op fetched nothing"))?
            .as_strings()?
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect::<Vec<_>>();
        if names.is_empty() {
            return Ok(());
        }
        Err(Status::failed_precondition(format!(
            "Model is not ready for SyncReplicasOptimizer local init: uninitialized variables {names:?} (local init op {})",
            self.local_init_op
        )))
    }
}

/// The sync loop; see the module docs.
fn chief_loop(
    session: Session,
    coord: Coordinator,
    ops: ChiefOps,
    poll: Duration,
    opts: RunOptions,
) {
    let counts = RunArgs {
        fetches: ops.counts.clone(),
        options: opts.clone(),
        ..Default::default()
    };
    let ready = |t: &Tensor| t.scalar_value::<i32>().is_ok_and(|n| n >= ops.required);
    while !coord.should_stop() {
        let all_in = coord.stop_on_error(|| {
            session
                .run_with(&counts)
                .map(|o| o.outputs.iter().all(ready))
        });
        match all_in {
            Err(_) => return,
            Ok(false) => {
                coord.wait_for_stop(Some(poll));
            }
            Ok(true) => {
                if coord
                    .stop_on_error(|| {
                        session.run_with(&RunArgs::new().target(&ops.sync_op).options(opts.clone()))
                    })
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

impl SessionRunHook for SyncReplicasHook {
    fn begin(&mut self, session: &Session, _global_step: i64) -> Result<()> {
        self.check_ready(session)?;
        let opts = self.bounded();
        session.run_with(
            &RunArgs::new()
                .target(&self.local_init_op)
                .options(opts.clone()),
        )?;
        if let Some(chief) = self.chief.take() {
            session.run_with(
                &RunArgs::new()
                    .target(&chief.init_tokens_op)
                    .options(opts.clone()),
            )?;
            let (session, coord, poll) = (session.clone(), self.coord.clone(), self.poll_interval);
            self.thread = Some(std::thread::spawn(move || {
                chief_loop(session, coord, chief, poll, opts)
            }));
        }
        Ok(())
    }

    fn after_run(
        &mut self,
        _session: &Session,
        _global_step: i64,
        _fetched: &[Tensor],
    ) -> Result<bool> {
        match self.coord.error() {
            Some(e) => Err(e.context("the chief's sync loop failed")),
            None => Ok(false),
        }
    }

    fn end(&mut self, session: &Session, _global_step: i64) -> Result<()> {
        self.coord.request_stop(None);
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| Status::internal("the chief's sync loop panicked"))?;
        }
        if let Some(close) = &self.close_tokens_op {
            // The other workers' steps waiting for a token end with `OutOfRange`
            // (their sessions stop) instead of waiting for a chief that is gone.
            session.run_with(&RunArgs::new().target(close).options(self.bounded()))?;
        }
        match self.coord.error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for SyncReplicasHook {
    /// A hook dropped without `end` still stops its sync loop (which then ends
    /// within one poll).
    fn drop(&mut self) {
        self.coord.request_stop(None);
    }
}
