//! actorflow's distributed runtime: the only crate that knows the network.
//!
//! A cluster is a set of [`Server`]s, one per task (`/job:worker/replica:0/task:0`,
//! …), each serving TensorFlow's `MasterService` and `WorkerService` over gRPC
//! with TensorFlow's message and method names. A client opens a session on any
//! server's master ([`Connect::connect`]); the master prunes and places each step
//! over the whole cluster, partitions it **by task** and registers each piece with
//! its task's worker ([`cluster_worker`]); each worker partitions its piece **by
//! device** and runs it on its device actors; tensors that cross tasks travel by
//! `RecvTensor` ([`remote_rendezvous`]).
//!
//! ```no_run
//! use actorflow_distributed::{ClusterSpec, Connect, Server, ServerOptions};
//! use actors::{Session, SessionOptions};
//! use graph::{builder::Scope, ops, DType, Shape, Tensor};
//!
//! let cluster = ClusterSpec::parse(&["worker=127.0.0.1:2222,127.0.0.1:2223"]).unwrap();
//! let _w0 = Server::start(ServerOptions::new(cluster.clone(), "worker", 0)).unwrap();
//! let _w1 = Server::start(ServerOptions::new(cluster, "worker", 1)).unwrap();
//!
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
//! let y = ops::add(&s.with_device("/job:worker/task:1"), &x, &x).unwrap();
//! let sess = Session::connect("grpc://127.0.0.1:2222", &s.graph_def(), SessionOptions::default()).unwrap();
//! let out = sess.run(&[(&x.name(), Tensor::scalar(2.0f32))], &[&y.name()], &[]).unwrap();
//! assert_eq!(out[0], Tensor::scalar(4.0f32));
//! ```

#![warn(missing_docs)]

pub mod client;
pub mod cluster;
pub mod cluster_worker;
pub mod master;
pub mod peers;
pub mod remote_rendezvous;
pub mod server;
pub mod stats;
pub mod tensor_coding;
pub mod tls;
pub mod wire;
pub mod worker_service;

pub use client::{ClientOptions, Connect, GrpcSession};
pub use cluster::{ClusterSpec, TaskName};
pub use cluster_worker::ClusterOptions;
pub use peers::PeerOptions;
pub use server::{Server, ServerOptions};
pub use tls::Tls;
