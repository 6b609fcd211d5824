//! Loom models of actorflow's cross-thread protocols. The models live in `tests/`
//! and exercise the real rendezvous, hand-offs, step tracker and executor state
//! machines: built with `RUSTFLAGS="--cfg loom"`, the `rendezvous::sync` shim swaps
//! in loom's primitives. Run them with `.ci/loom` (or the README's test command):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p loom-tests --release
//! ```
//!
//! Without `--cfg loom` the models compile to nothing.

/// What the executor models share: executors driven over loom channels (as device
/// mailboxes drive them in production) and the step context of a model step.
#[cfg(loom)]
pub mod harness {
    use std::sync::Arc;

    use actors::executor::{
        ExecutorHost, ExecutorMsg, ExecutorState, ExecutorTransition, TaggedNode,
    };
    use kernels::{AsyncDone, CallFrame, DeviceContext, StepContext};
    use loom::sync::mpsc::{channel, Receiver, Sender};
    use loom::thread;
    use rendezvous::LocalRendezvous;

    /// Posts asynchronous completions to the executor's channel.
    struct ChannelHost(Sender<ExecutorMsg>);

    impl ExecutorHost for ChannelHost {
        fn async_done(&mut self, node: TaggedNode) -> AsyncDone {
            let tx = self.0.clone();
            AsyncDone::new(move |result| {
                let _ = tx.send(ExecutorMsg::KernelDone { node, result });
            })
        }
    }

    /// Runs `ex` to completion on this thread, handling its completions in order.
    pub fn drive(mut ex: ExecutorState) -> graph::Result<()> {
        let (tx, rx): (Sender<ExecutorMsg>, Receiver<ExecutorMsg>) = channel();
        let mut host = ChannelHost(tx);
        let mut t = ex.start(&mut host);
        loop {
            match t {
                ExecutorTransition::Done(r) => return r,
                ExecutorTransition::Running => {
                    let msg = rx.recv().expect("a running executor gets its completions");
                    t = ex.handle(msg, &mut host);
                }
            }
        }
    }

    /// Step 1's context on `device`, sharing `rendezvous` and `frame`.
    pub fn step_context(
        device: &Arc<DeviceContext>,
        rendezvous: &Arc<LocalRendezvous>,
        frame: &Arc<CallFrame>,
    ) -> Arc<StepContext> {
        Arc::new(StepContext {
            step_id: 1,
            device: Arc::clone(device),
            rendezvous: Arc::clone(rendezvous) as Arc<dyn rendezvous::Rendezvous>,
            call_frame: Arc::clone(frame),
            default_container: Arc::from("c"),
            step_container: Arc::from("__step_1"),
            cancellation: Default::default(),
            timer: Arc::new(kernels::ThreadTimer),
        })
    }

    /// Runs `a` on a second loom thread and `b` on this one; both must succeed.
    pub fn run_pair(a: ExecutorState, b: ExecutorState) {
        let other = thread::spawn(move || drive(a));
        drive(b).expect("this thread's executor succeeds");
        other
            .join()
            .expect("the other thread finishes")
            .expect("the other thread's executor succeeds");
    }
}
