//! actorflow's runtime: sessions, devices and executors as actors.
//!
//! The actors' logic is plain state machines (executor, device worker, session
//! state, step tracker); the `runtime` feature (on by default) adds the actix hosts,
//! the `Runtime` and the `Session` handle. The loom models build without it.
//!
//! - [`runtime`] — the actor system (actix) and its devices.
//! - [`session`] — the session handle, its master state machine and actor.
//! - [`device`] — the device actor and its data-plane worker.
//! - [`input`] — coordinator and queue runners (feature `runtime`).
//! - [`saved_model`] — loading and writing SavedModels (feature `runtime`).
//! - [`worker`] — the worker role: `WorkerInterface` and the `LocalWorker`.
//! - [`executor`] — the per-partition executor state machine.
//! - [`step`] — a step's shared state across partitions.
//! - [`stats`] — step statistics.

#![warn(missing_docs)]
#![deny(unsafe_code)]

mod contain;
pub mod device;
pub mod executor;
#[cfg(feature = "runtime")]
pub mod input;
#[cfg(feature = "runtime")]
pub mod runtime;
#[cfg(feature = "runtime")]
pub mod saved_model;
pub mod session;
pub mod stats;
pub mod step;
pub mod worker;

pub use graph::passes::optimize::{OptLevel, OptimizerOptions, RewriterConfig, Toggle};
#[cfg(feature = "runtime")]
pub use runtime::{Runtime, RuntimeOptions};
pub use session::state::{CompiledStep, SessionOptions};
#[cfg(feature = "runtime")]
pub use session::{
    FetchToken, PartialRun, RunArgs, RunMetadata, RunOptions, RunOutput, Session, SessionBackend,
    TraceLevel,
};
