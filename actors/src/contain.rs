//! Containing panics: a panic is a bug in the code that raised it, but it must fail
//! only the request it happened in. Uncaught, a kernel's panic would kill its
//! device's thread (and every later step on the device would wait for it), and a
//! panic while compiling a step would stop the actor system's arbiter (and every
//! session on the runtime with it).

use graph::{Result, Status};

/// Runs `f`, turning a panic into an `Internal` error ("`what` panicked: …").
/// Costs nothing until a panic: unwinding is table-driven.
#[inline(always)]
pub(crate) fn contain_panic<R>(what: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        Err(Status::internal(format!("{what} panicked: {msg}")))
    })
}
