//! The graph builder: a [`Scope`] (name scopes, device scopes, control-dependency
//! scopes, colocation) over a graph under construction, [`OpBuilder`] to add one
//! node, and the typed handles [`Operation`] and [`Output`].
//!
//! Every node is validated as it is added (op known, attributes, input types) and
//! its output shapes are inferred, so mistakes surface where they are made, naming
//! the node. Type attributes (`T`, `N`, list types) are inferred from the inputs.
//!
//! - [`op_builder`] — `OpBuilder`, `Operation`, `Output`.
//! - [`scope`] — `Scope`, its device stack (specs and device functions) and the
//!   shared graph state.
//! - [`control_flow`] — `cond` and `while_loop` (TensorFlow v1 structure).
//! - [`functional`] — `map_fn`, `scan`, `foldl` and `foldr` over TensorArrays.

pub mod control_flow;
pub mod functional;
pub mod op_builder;
pub mod scope;

pub use control_flow::{cond, while_loop, WhileOptions};
pub use functional::{foldl, foldr, map_fn, scan, FunctionalOptions};
pub use op_builder::{NodeRef, OpBuilder, Operation, Output, TensorRef};
pub use scope::{DeviceFunction, DeviceRequest, Scope};
