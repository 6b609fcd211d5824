//! [`Session`]: a cheap, cloneable, `Send + Sync` handle to a session actor. `run`
//! executes one step and blocks; `run_async` is a future usable from any tokio
//! runtime (or none). Several threads may run steps on one session at once.
//!
//! - [`state`] — the session's master state machine (graph, compiled steps).
//! - `actor`: its actix wrapper (feature `runtime`).
//! - `handle`: the `Session` handle (feature `runtime`).
//!
//! The control plane goes through the actor: extending the graph and compiling a new
//! step signature. The data plane does not: a step whose signature is compiled is
//! dispatched from the calling thread straight to the devices' data-plane mailboxes,
//! so `run` costs a few microseconds, not an actor round trip. Feeds are checked
//! against the compiled step before anything runs.

#[cfg(feature = "runtime")]
pub mod actor;
#[cfg(feature = "runtime")]
mod handle;
#[cfg(feature = "runtime")]
mod partial;
pub mod state;

#[cfg(feature = "runtime")]
pub use handle::{
    FetchToken, RunArgs, RunMetadata, RunOptions, RunOutput, Session, SessionBackend, TraceLevel,
};
#[cfg(feature = "runtime")]
pub use partial::PartialRun;
pub use state::{signature_hash, CompiledStep, SessionOptions, SessionState, StepSignature};
