//! actorflow: a TensorFlow-1.x-style dataflow runtime in which every moving part —
//! sessions, devices, executors, queues, rendezvous points — is an actor.
//!
//! Build a graph with a [`Scope`] and the [`ops`] builders, open a [`Session`], and
//! run steps with feeds and fetches:
//!
//! ```
//! use actorflow::{ops, DType, RunArgs, Scope, Session, SessionOptions, Shape, Tensor};
//!
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::F32, Shape::known(&[2]))?;
//! let w = ops::constant(&s, Tensor::vector(&[3.0f32, 4.0]))?;
//! let y = ops::mul(&s, &x, &w)?;
//!
//! let sess = Session::new(&s.graph_def(), SessionOptions::default())?;
//! let mut args = RunArgs::new().feed(&x, Tensor::vector(&[1.0f32, 2.0]));
//! let y_token = args.add_fetch(&y);
//! let out = sess.run_with(&args)?;
//! assert_eq!(out.get::<f32>(y_token)?.as_slice(), Some(&[3.0f32, 8.0][..]));
//! # Ok::<(), actorflow::Status>(())
//! ```
//!
//! A graph from a file (TensorFlow's `.pb` or `.pbtxt`) is run by tensor and node
//! names: `Session::from_file("model.pb", SessionOptions::default())?.run(&[("x:0",
//! t)], &["y:0"], &[])?`. Errors are [`Status`]es with TensorFlow's canonical
//! [`Code`]s and the failing node's name.
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
pub use serving;

pub use actors::input::{start_queue_runners, Coordinator, QueueRunner};
pub use actors::saved_model::{self, SavedModel, SavedModelBuilder, Signature, TensorSpec};
pub use actors::{
    CompiledStep, OptLevel, OptimizerOptions, PartialRun, RewriterConfig, RunArgs, RunMetadata,
    RunOptions, RunOutput, Runtime, RuntimeOptions, Session, SessionBackend, SessionOptions,
    Toggle, TraceLevel,
};
pub use distributed::{ClusterSpec, Connect, Server, ServerOptions};
pub use graph::builder::{NodeRef, Operation, Output, Scope, TensorRef};
pub use graph::import::{GraphFormat, ImportOptions};
pub use graph::{
    ops, Code, DType, DeviceName, GraphDef, NodeDef, Result, Shape, Status, Tensor, TensorShape,
};

/// The README's code, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
