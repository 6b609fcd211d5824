//! [`QueueRunner`]: TensorFlow's `tf.train.QueueRunner`. Each enqueue op runs in its
//! own loop (a thread, or a tokio task) on a session until the coordinator stops or
//! the op fails. When the last loop ends because its input is exhausted or its queue
//! closed (`OutOfRange`, `Cancelled`), it runs the close op, so consumers drain the
//! queue and then see `OutOfRange`. Any other error stops the coordinator with it.
//! A watcher runs the cancel op (close with `cancel_pending_enqueues`) when the
//! coordinator stops, so loops blocked on a full queue end too.
//!
//! [`start_queue_runners`] starts the runners a graph's builders recorded
//! (`tf.compat.v1.train.start_queue_runners`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use graph::ops::QueueRunnerSpec;
use graph::{Code, Status};

use super::Coordinator;
use crate::session::Session;

/// See the module docs.
#[derive(Clone, Debug)]
pub struct QueueRunner {
    /// Enqueue ops, one loop each.
    pub enqueue_ops: Vec<String>,
    /// Closes the queue (pending enqueues may finish).
    pub close_op: String,
    /// Closes the queue, cancelling pending enqueues.
    pub cancel_op: String,
}

fn ends_input(e: &Status) -> bool {
    matches!(e.code(), Code::OutOfRange | Code::Cancelled)
}

struct Shared {
    session: Session,
    coord: Coordinator,
    runner: QueueRunner,
    remaining: AtomicUsize,
}

impl Shared {
    fn finish_loop(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Err(e) = self.session.run(&[], &[], &[&self.runner.close_op]) {
                if !ends_input(&e) {
                    self.coord.request_stop(Some(e));
                }
            }
        }
    }

    fn handle(&self, r: graph::Result<()>) -> bool {
        match r {
            Ok(()) => true,
            Err(e) if ends_input(&e) => false,
            Err(e) => {
                self.coord.request_stop(Some(e));
                false
            }
        }
    }
}

impl QueueRunner {
    /// A runner for these ops.
    pub fn new(enqueue_ops: Vec<String>, close_op: &str, cancel_op: &str) -> QueueRunner {
        QueueRunner {
            enqueue_ops,
            close_op: close_op.to_owned(),
            cancel_op: cancel_op.to_owned(),
        }
    }

    fn shared(&self, session: &Session, coord: &Coordinator) -> Arc<Shared> {
        Arc::new(Shared {
            session: session.clone(),
            coord: coord.clone(),
            runner: self.clone(),
            remaining: AtomicUsize::new(self.enqueue_ops.len()),
        })
    }

    /// Starts one thread per enqueue op plus the cancel watcher, registered with the
    /// coordinator (so `coord.join()` waits for them).
    pub fn start_threads(&self, session: &Session, coord: &Coordinator) {
        let shared = self.shared(session, coord);
        for op in &self.enqueue_ops {
            let (sh, op) = (Arc::clone(&shared), op.clone());
            coord.register_thread(std::thread::spawn(move || {
                while !sh.coord.should_stop() {
                    if !sh.handle(sh.session.run(&[], &[], &[&op]).map(|_| ())) {
                        break;
                    }
                }
                sh.finish_loop();
            }));
        }
        let sh = shared;
        coord.register_thread(std::thread::spawn(move || {
            // Wait for the stop, or for the loops to end on their own.
            while !sh
                .coord
                .wait_for_stop(Some(std::time::Duration::from_millis(50)))
            {
                if sh.remaining.load(Ordering::Acquire) == 0 {
                    return;
                }
            }
            let _ = sh.session.run(&[], &[], &[&sh.runner.cancel_op]);
        }));
    }

    /// Spawns one tokio task per enqueue op on the current runtime; await the
    /// returned handles (or watch the coordinator) to know when they end. When the
    /// coordinator stops, call [`QueueRunner::cancel`] to unblock a loop waiting on a
    /// full queue.
    pub fn spawn_tasks(
        &self,
        session: &Session,
        coord: &Coordinator,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = self.shared(session, coord);
        self.enqueue_ops
            .iter()
            .map(|op| {
                let (sh, op) = (Arc::clone(&shared), op.clone());
                tokio::spawn(async move {
                    while !sh.coord.should_stop() {
                        let req = crate::session::RunArgs::new().target(&op);
                        if !sh.handle(sh.session.run_async(&req).await.map(|_| ())) {
                            break;
                        }
                    }
                    let close = crate::session::RunArgs::new().target(&sh.runner.close_op);
                    if sh.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                        if let Err(e) = sh.session.run_async(&close).await {
                            if !ends_input(&e) {
                                sh.coord.request_stop(Some(e));
                            }
                        }
                    }
                })
            })
            .collect()
    }

    /// Runs the cancel op: closes the queue and fails blocked enqueues.
    pub fn cancel(&self, session: &Session) -> graph::Result<()> {
        session.run(&[], &[], &[&self.cancel_op]).map(|_| ())
    }
}

impl From<&QueueRunnerSpec> for QueueRunner {
    fn from(spec: &QueueRunnerSpec) -> QueueRunner {
        QueueRunner::new(spec.enqueue_ops.clone(), &spec.close_op, &spec.cancel_op)
    }
}

/// `tf.compat.v1.train.start_queue_runners`: starts the threads of every runner in
/// `specs`, registered with `coord`, and returns the runners. The specs are what
/// the graph's builders (`string_input_producer`, `batch`, `shuffle_batch`)
/// recorded in its `QUEUE_RUNNERS` collection; a session holds only the
/// `GraphDef`, so pass them along, e.g. `&QueueRunnerSpec::all_in(&scope)?`.
///
/// Stop the input with `coord.request_stop(None)` then `coord.join()`; the runners
/// close their queues with pending enqueues cancelled, so no loop stays blocked.
pub fn start_queue_runners(
    session: &Session,
    coord: &Coordinator,
    specs: &[QueueRunnerSpec],
) -> Vec<QueueRunner> {
    specs
        .iter()
        .map(|spec| {
            let runner = QueueRunner::from(spec);
            runner.start_threads(session, coord);
            runner
        })
        .collect()
}
