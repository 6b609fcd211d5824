//! A device: an actix [`DeviceActor`] that owns the device's
//! lifecycle, and the device's data plane, a [`DeviceWorker`] state machine hosting
//! the executors of every step that runs a partition on the device.
//!
//! The data plane runs on one thread per device, fed by a
//! [`mailbox`](rendezvous::mailbox) that spins before it parks: a step start, a
//! Send/Recv arrival or an asynchronous kernel completion reaches a busy device in
//! well under a microsecond, where a wake-up through an actix mailbox costs several
//! (see the README's design notes). actix hosts the actor that starts and stops that
//! thread.
//!
//! - [`worker`] — the data-plane state machine and its thread loop.
//! - `actor`: the actix wrapper (feature `runtime`).

#[cfg(feature = "runtime")]
pub mod actor;
pub mod worker;

#[cfg(feature = "runtime")]
pub use actor::{DeviceActor, StopDevice};
pub use worker::{run_worker, DeviceMsg, DeviceWorker, PartitionRun, WorkerTransition};
