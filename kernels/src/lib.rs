//! actorflow's kernels: the [`OpKernel`] traits, the [`KernelRegistry`], the
//! resources kernels keep between steps, and the CPU kernels (gemm for matrix products).
//!
//! - [`allocator`] — fallible tensor allocation under the device's limit.
//! - [`entry`] — the values that travel along edges.
//! - [`evaluator`] — running one CPU kernel at step build, for constant folding.
//! - [`op_kernel`] — kernel traits and contexts.
//! - [`registry`] — kernels by op, device type and type constraints.
//! - [`queue`] — queues as actors (state machine, stores, host).
//! - [`accumulator`] — conditional accumulators (state machine, host).
//! - [`resource`] — resource manager, containers, variables.
//! - [`cpu`] — the CPU kernels, one module per op family.
//! - [`testutil`] — running one kernel on given inputs (for tests).

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod accumulator;
pub mod allocator;
pub mod cpu;
pub mod entry;
pub mod evaluator;
pub mod op_kernel;
pub mod queue;
pub mod record;
pub mod registry;
pub mod resource;
pub mod testutil;

pub use allocator::Allocator;
pub use entry::Entry;
pub use op_kernel::{
    AsyncDone, AsyncOpKernel, AsyncStatus, CallFrame, CpuThreads, DeviceContext, OpKernel,
    OpKernelConstruction, OpKernelContext, Outputs, Route, StepContext, ThreadTimer, Timer,
};
pub use registry::{KernelDef, KernelFactory, KernelRegistry, DEVICE_CPU};
pub use resource::{Resource, ResourceMgr, Var};
