//! [`Runtime`]: the actor system a session runs on — an actix `System` on its own
//! thread hosting the session actors, and one [`DeviceActor`] per device on its own
//! arbiter, each owning its data-plane thread. It can be started standalone or from
//! inside a tokio runtime (it never touches the caller's runtime), is shared by
//! cloning, and shuts down cleanly: every thread it started is joined.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};
use std::time::{SystemTime, UNIX_EPOCH};

use actix::{Actor, Addr};
use actix_rt::{Arbiter, ArbiterHandle, System};
use graph::{DeviceName, Result, Status};
use kernels::DeviceContext;
use rendezvous::{completion, mailbox, MailboxSender};

use crate::device::{DeviceActor, DeviceMsg, StopDevice};

/// How a runtime is made (non-exhaustive: build it with the `with_*` setters).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuntimeOptions {
    /// The number of CPU devices (`/device:CPU:0` …), each its own actor and thread.
    pub cpu_devices: usize,
    /// The job the devices belong to (`localhost` in one process; a cluster
    /// server's own job, e.g. `worker`).
    pub job: String,
    /// The task the devices belong to within their job.
    pub task: u32,
}

impl Default for RuntimeOptions {
    fn default() -> RuntimeOptions {
        RuntimeOptions {
            cpu_devices: 1,
            job: "localhost".into(),
            task: 0,
        }
    }
}

impl RuntimeOptions {
    graph::option_setters! {
        /// Sets [`cpu_devices`](Self::cpu_devices).
        with_cpu_devices => cpu_devices: usize;
        /// Sets [`job`](Self::job).
        with_job => job: String as into;
        /// Sets [`task`](Self::task).
        with_task => task: u32;
    }
}

/// One device of a runtime.
pub struct DeviceHandle {
    /// Its full name.
    pub name: DeviceName,
    /// What its kernels see.
    pub ctx: Arc<DeviceContext>,
    pub(crate) mailbox: MailboxSender<DeviceMsg>,
    actor: Addr<DeviceActor>,
}

struct Control {
    thread: Option<JoinHandle<()>>,
    arbiters: Vec<Arbiter>,
    shut_down: bool,
}

struct RuntimeInner {
    devices: Vec<DeviceHandle>,
    system: System,
    system_arbiter: ArbiterHandle,
    system_thread: ThreadId,
    control: Mutex<Control>,
    next_step: AtomicU64,
    next_session: AtomicU64,
}

/// A handle to a running actor system; see the module docs.
///
/// # Examples
/// ```
/// use actorflow_actors::{Runtime, RuntimeOptions};
/// let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(2)).unwrap();
/// assert_eq!(rt.device_names()[1], "/job:localhost/replica:0/task:0/device:CPU:1");
/// rt.shutdown();
/// ```
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

fn incarnation(i: usize) -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(i as u64) | 1
}

/// Where a runtime's step ids start: a random 56-bit value, so that the ids of
/// steps that several masters of a cluster run on one worker do not collide
/// (TensorFlow draws each step id at random in the same range).
fn first_step_id() -> u64 {
    let h = std::collections::hash_map::RandomState::new();
    let x = std::hash::BuildHasher::hash_one(&h, incarnation(0));
    (x & ((1 << 56) - 1)).max(1)
}

impl Runtime {
    /// Starts a runtime.
    pub fn new(options: RuntimeOptions) -> Result<Runtime> {
        if options.cpu_devices == 0 {
            return Err(Status::invalid_argument(
                "a runtime needs at least one device",
            ));
        }
        let n = options.cpu_devices;
        let job = options.job.clone();
        let task = options.task;
        if job.is_empty() || !job.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Status::invalid_argument(format!(
                "invalid job name '{job}': letters, digits and '_' only"
            )));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("actorflow-system".into())
            .spawn(move || {
                let runner = System::new();
                let mut arbiters = Vec::new();
                let mut devices = Vec::new();
                for i in 0..n {
                    let name = DeviceName {
                        job: Some(job.clone()),
                        task: Some(task),
                        ..DeviceName::local_cpu(i as u32)
                    };
                    let ctx =
                        Arc::new(DeviceContext::new(&name.to_string(), "CPU", incarnation(i)));
                    let (mtx, mrx) = mailbox();
                    let arbiter = Arbiter::new();
                    let actor_ctx = Arc::clone(&ctx);
                    let actor_tx = mtx.clone();
                    let actor = DeviceActor::start_in_arbiter(&arbiter.handle(), move |_| {
                        DeviceActor::new(actor_ctx, actor_tx, mrx)
                    });
                    arbiters.push(arbiter);
                    devices.push(DeviceHandle {
                        name,
                        ctx,
                        mailbox: mtx,
                        actor,
                    });
                }
                let _ = tx.send((
                    System::current(),
                    Arbiter::current(),
                    std::thread::current().id(),
                    arbiters,
                    devices,
                ));
                let _ = runner.run();
            })
            .map_err(|e| {
                Status::resource_exhausted(format!("cannot start the actor system: {e}"))
            })?;
        let (system, system_arbiter, system_thread, arbiters, devices) = rx
            .recv()
            .map_err(|_| Status::internal("the actor system failed to start"))?;
        tracing::debug!(devices = n, "runtime started");
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                devices,
                system,
                system_arbiter,
                system_thread,
                control: Mutex::new(Control {
                    thread: Some(thread),
                    arbiters,
                    shut_down: false,
                }),
                next_step: AtomicU64::new(first_step_id()),
                next_session: AtomicU64::new(1),
            }),
        })
    }

    /// The full names of the devices, in index order.
    pub fn device_names(&self) -> Vec<String> {
        self.inner
            .devices
            .iter()
            .map(|d| d.name.to_string())
            .collect()
    }

    /// The devices.
    pub fn devices(&self) -> &[DeviceHandle] {
        &self.inner.devices
    }

    pub(crate) fn system_arbiter(&self) -> &ArbiterHandle {
        &self.inner.system_arbiter
    }

    pub(crate) fn next_step_id(&self) -> u64 {
        self.inner.next_step.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn next_session_id(&self) -> u64 {
        self.inner.next_session.fetch_add(1, Ordering::Relaxed)
    }

    /// True once shut down.
    pub fn is_shut_down(&self) -> bool {
        self.inner
            .control
            .lock()
            .map(|c| c.shut_down)
            .unwrap_or(true)
    }

    /// Drops a container (and every resource in it) on every device, as
    /// `tf.Session.reset(target, containers)` does.
    pub fn reset_container(&self, container: &str) {
        for d in &self.inner.devices {
            d.ctx.resources.cleanup(container);
        }
    }

    /// Stops every device and the actor system and joins their threads. Steps still
    /// running fail with `Cancelled`. Idempotent; also done when the last handle is
    /// dropped.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

impl RuntimeInner {
    fn shutdown(&self) {
        let mut c = match self.control.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        if c.shut_down {
            return;
        }
        c.shut_down = true;
        let on_system_thread = std::thread::current().id() == self.system_thread;
        for d in &self.devices {
            let (tx, rx) = completion();
            d.actor.do_send(StopDevice(tx));
            if !on_system_thread {
                let _ = rx.wait();
            }
        }
        for a in c.arbiters.drain(..) {
            a.stop();
            if !on_system_thread {
                let _ = a.join();
            }
        }
        self.system.stop();
        if let Some(t) = c.thread.take() {
            if !on_system_thread {
                let _ = t.join();
            }
        }
        tracing::debug!("runtime shut down");
    }
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Blocks on `rt` until the process receives SIGINT (Ctrl-C) or SIGTERM;
/// `ready` runs once the handlers are in place (a line saying a server
/// listens, printed there, is never followed by a signal the process misses).
/// `rt` needs its I/O driver (`enable_all`). The servers' `wait_for_signal`,
/// on their own runtimes.
pub fn wait_for_signal(rt: &tokio::runtime::Runtime, ready: impl FnOnce()) -> Result<()> {
    rt.block_on(async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let handler = |e: std::io::Error| Status::internal(format!("signal handler: {e}"));
            let mut term = signal(SignalKind::terminate()).map_err(handler)?;
            let mut int = signal(SignalKind::interrupt()).map_err(handler)?;
            ready();
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let c = tokio::signal::ctrl_c();
            ready();
            let _ = c.await;
        }
        Ok(())
    })
}
