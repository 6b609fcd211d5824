//! The exchange points of actorflow's runtime and the `sync` shim that every
//! cross-thread structure is built on (so loom can model-check it).
//!
//! - [`sync`] — `std` or `loom` primitives behind one API.
//! - [`key`] — rendezvous keys (`ParsedKey`, `FrameIter`).
//! - [`interface`] — the [`Rendezvous`] trait the kernels and executor see.
//! - [`local`] — the per-step rendezvous table (send never blocks; recv completes a
//!   callback; abort wakes every waiter).
//! - [`mgr`] — a worker's per-step tables, created by whichever of the step's run
//!   and a peer's receive comes first, removed at cleanup.
//! - [`cancel`] — cancellation of a step's waiting operations.
//! - [`handoff`] — mailboxes and one-shot completions that spin, then park.

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod cancel;
pub mod handoff;
pub mod interface;
pub mod key;
pub mod local;
pub mod mgr;
pub mod sync;

pub use cancel::{CancellationManager, CancellationToken};
pub use handoff::{
    completion, mailbox, CompletionReceiver, CompletionSender, MailboxReceiver, MailboxSender,
};
pub use interface::Rendezvous;
pub use key::{FrameIter, ParsedKey};
pub use local::{LocalRendezvous, RecvCallback, Value};
pub use mgr::{RendezvousMgr, StepTables};
