//! [`Rendezvous`]: what the transfer kernels and the executor see of a step's
//! exchange table (TensorFlow's `RendezvousInterface`). In one process it is a
//! [`LocalRendezvous`](crate::LocalRendezvous); on a worker of a cluster, a table
//! whose receives of values produced on another task's devices go over the network.
//!
//! The contract is the local table's: a producer never blocks; a receive returns
//! the value (or the abort status) at once when it is there, else registers a
//! callback that runs when it arrives or the table is aborted; after an abort every
//! waiter is completed with the status and later calls fail with it. The key names
//! the receiving device (`dst_device`), which is all a remote table needs to choose
//! the peer and the allocation.

use graph::{Result, Status};

use crate::key::{FrameIter, ParsedKey};
use crate::local::{RecvCallback, Value};

/// A step's exchange table; see the module docs.
pub trait Rendezvous: Send + Sync {
    /// Delivers `value` under `key` in `fi`. Never blocks; fails only after an abort.
    fn send(&self, key: &ParsedKey, fi: FrameIter, value: Value) -> Result<()>;

    /// Receives under `key` in `fi`: the value (or the abort status) when it is
    /// available now, else `None` after registering the callback `make_callback`
    /// builds (called at most once, and only when the value is not there, so the
    /// fast path allocates nothing).
    fn recv(
        &self,
        key: &ParsedKey,
        fi: FrameIter,
        make_callback: &mut dyn FnMut() -> RecvCallback,
    ) -> Option<Result<Value>>;

    /// Aborts: completes every waiter with `status` (the first abort wins) and makes
    /// later sends and receives fail with it.
    fn abort(&self, status: Status);

    /// The abort status, if aborted.
    fn abort_status(&self) -> Option<Status>;
}
