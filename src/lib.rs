//! actorflow: a TensorFlow-1.x-style dataflow runtime in which every moving part —
//! sessions, devices, executors, queues, rendezvous points — is an actor.
//!
//! Build a graph with a [`Scope`] and the [`ops`] builders, open a [`Session`], and
//! run steps with feeds and fetches:
//!
//! ```
//! use actorflow::{ops, DType, Scope, Session, SessionOptions, Shape, Tensor};
//!
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
//! let w = ops::constant(&s, Tensor::vector(&[3.0f32, 4.0])).unwrap();
//! let y = ops::mul(&s, &x, &w).unwrap();
//!
//! let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
//! let out = sess.run(&[(&x.name(), Tensor::vector(&[1.0f32, 2.0]))], &[&y.name()], &[]).unwrap();
//! assert_eq!(out[0], Tensor::vector(&[3.0f32, 8.0]));
//! ```
//!
//! The layers are crates, re-exported here: [`graph`] (tensors, ops, graphs, passes),
//! [`kernels`] (kernels and resources), [`rendezvous`] (exchange points and the sync
//! shim) and [`actors`] (the runtime).

#![warn(missing_docs)]

pub use actors;
pub mod bench;
pub mod dot;
pub mod logging;
pub mod npy;
pub mod tensorboard;
pub mod trace;
pub mod train;
pub use distributed;
pub use graph;
pub use kernels;
pub use rendezvous;

pub use actors::input::{start_queue_runners, Coordinator, QueueRunner};
pub use actors::{
    CompiledStep, PartialRun, RunMetadata, RunOptions, RunOutput, RunRequest, Runtime,
    RuntimeOptions, Session, SessionBackend, SessionOptions, TraceLevel,
};
pub use distributed::{ClusterSpec, Connect, Server, ServerOptions};
pub use graph::builder::{Operation, Output, Scope};
pub use graph::{
    ops, Code, DType, DeviceName, GraphDef, NodeDef, Result, Shape, Status, Tensor, TensorShape,
};
