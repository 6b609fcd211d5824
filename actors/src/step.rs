//! [`StepTracker`]: the shared state of one step across its partitions. Each
//! partition reports once ([`StepTracker::partition_done`]); the last report
//! completes the client's [`CompletionReceiver`] with the step's status, the
//! fetched values and the statistics. The first error wins; any error (or
//! [`StepTracker::abort`], for timeouts and cancellation) aborts the step's
//! rendezvous and tells every device running a partition to stop it, so no
//! partition waits forever.
//!
//! Lock order: the tracker's lock is released before the rendezvous is aborted,
//! devices are messaged or the client is completed.
//!
//! Abort order: the rendezvous is aborted (recording the step's status) before the
//! step's cancellation manager is cancelled, so a busy executor that sees the
//! cancellation flag finds the status there (`loom_cancel` checks this); then each
//! device is told, for executors waiting on completions.

use std::sync::Arc;

use graph::{Result, Status, Tensor};
use kernels::{CallFrame, ResourceMgr};
use rendezvous::sync::atomic::{AtomicUsize, Ordering};
use rendezvous::sync::Mutex;
use rendezvous::{completion, CompletionReceiver, CompletionSender, MailboxSender, Rendezvous};

use crate::device::DeviceMsg;
use crate::stats::StatsCollector;

/// What a finished step delivers to its client.
pub struct StepResult {
    /// The step's status.
    pub status: Result<()>,
    /// The fetched values (`None` for a fetch that was never produced).
    pub retvals: Vec<Option<Tensor>>,
    /// Per-partition statistics, when requested.
    pub stats: Vec<StatsCollector>,
    /// Values the step's client-terminated `_Send`s delivered, by rendezvous key
    /// (a worker's `recv_key`s; filled by the finisher).
    pub recvs: Vec<(String, Option<Tensor>)>,
}

/// Runs once when a step finishes, before its client is completed: it may add to
/// the result (the values a worker's master asked for by key) and drop the step
/// from whatever registry found it.
pub type Finisher = Box<dyn FnOnce(&dyn Rendezvous, &mut StepResult) + Send>;

struct TrackerState {
    error: Option<Status>,
    done: Option<CompletionSender<StepResult>>,
    stats: Vec<StatsCollector>,
    step_container: Option<(Arc<str>, Vec<Arc<ResourceMgr>>)>,
    cancellation: Option<Arc<rendezvous::CancellationManager>>,
    finisher: Option<Finisher>,
}

/// The shared state of one step; see the module docs.
pub struct StepTracker {
    /// The step's id.
    pub step_id: u64,
    remaining: AtomicUsize,
    state: Mutex<TrackerState>,
    rendezvous: Arc<dyn Rendezvous>,
    call_frame: Arc<CallFrame>,
    devices: Vec<MailboxSender<DeviceMsg>>,
}

impl StepTracker {
    /// A tracker for `partitions` partitions running on `devices`, and the
    /// receiver the client waits on.
    pub fn new(
        step_id: u64,
        partitions: usize,
        rendezvous: Arc<dyn Rendezvous>,
        call_frame: Arc<CallFrame>,
        devices: Vec<MailboxSender<DeviceMsg>>,
    ) -> (Arc<StepTracker>, CompletionReceiver<StepResult>) {
        let (tx, rx) = completion();
        let t = Arc::new(StepTracker {
            step_id,
            remaining: AtomicUsize::new(partitions),
            state: Mutex::new(TrackerState {
                error: None,
                done: Some(tx),
                stats: Vec::new(),
                step_container: None,
                cancellation: None,
                finisher: None,
            }),
            rendezvous,
            call_frame,
            devices,
        });
        if partitions == 0 {
            t.finish();
        }
        (t, rx)
    }

    /// Names the step's container and the resource managers holding it, dropped
    /// when the step finishes.
    pub fn set_step_resources(&self, container: Arc<str>, managers: Vec<Arc<ResourceMgr>>) {
        self.state.lock().step_container = Some((container, managers));
    }

    /// Sets what runs when the step finishes (see [`Finisher`]).
    pub fn set_finisher(&self, f: Finisher) {
        self.state.lock().finisher = Some(f);
    }

    /// The step's cancellation manager, cancelled when the step is aborted.
    pub fn set_cancellation(&self, c: Arc<rendezvous::CancellationManager>) {
        self.state.lock().cancellation = Some(c);
    }

    /// Records that a partition finished.
    pub fn partition_done(&self, result: Result<()>, stats: Option<StatsCollector>) {
        let mut first_error = None;
        {
            let mut st = self.state.lock();
            if let Some(s) = stats {
                st.stats.push(s);
            }
            if let Err(e) = result {
                if st.error.is_none() {
                    st.error = Some(e.clone());
                    first_error = Some(e);
                }
            }
        }
        if let Some(e) = first_error {
            self.stop_everywhere(e);
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish();
        }
    }

    /// Aborts the step with `status` (the first error wins).
    pub fn abort(&self, status: Status) {
        let first = {
            let mut st = self.state.lock();
            if st.error.is_none() {
                st.error = Some(status.clone());
                true
            } else {
                false
            }
        };
        if first {
            self.stop_everywhere(status);
        }
    }

    /// True once an error was recorded.
    pub fn is_aborted(&self) -> bool {
        self.state.lock().error.is_some()
    }

    fn stop_everywhere(&self, status: Status) {
        tracing::debug!(step = self.step_id, error = %status, "step aborted");
        self.rendezvous.abort(status.clone());
        let cancellation = self.state.lock().cancellation.clone();
        if let Some(c) = cancellation {
            c.cancel();
        }
        for d in &self.devices {
            let _ = d.send(DeviceMsg::Abort {
                step_id: self.step_id,
                status: status.clone(),
            });
        }
    }

    fn finish(&self) {
        let (done, status, stats, step_container, finisher) = {
            let mut st = self.state.lock();
            let status = match st.error.clone() {
                Some(e) => Err(e),
                None => Ok(()),
            };
            (
                st.done.take(),
                status,
                std::mem::take(&mut st.stats),
                st.step_container.take(),
                st.finisher.take(),
            )
        };
        if let Some((name, managers)) = step_container {
            for m in managers {
                m.cleanup(&name);
            }
        }
        let mut result = StepResult {
            status,
            retvals: self.call_frame.take_retvals(),
            stats,
            recvs: Vec::new(),
        };
        if let Some(f) = finisher {
            f(&*self.rendezvous, &mut result);
        }
        if let Some(done) = done {
            done.complete(result);
        }
    }
}
