//! actorflow's model server: TensorFlow Serving's APIs over SavedModels.
//!
//! ```text
//!  base paths ──► Source (polls version dirs, applies the version policy)
//!                   │ AspiredVersions(model, [(version, dir)])
//!                   ▼
//!                Manager (state machine: load, warm up, publish, unload)
//!                   │ Load jobs ──► load threads (SavedModel::load + warmup)
//!                   │ publishes an immutable ServingMap (ArcSwap)
//!                   ▼
//!  REST (hyper) ─┐  Models::get(name, version) — a lock-free read
//!  gRPC (tonic) ─┴► Servable::predict / classify / regress
//!                      └─► Batcher per signature (optional) ─► one session run
//! ```
//!
//! - [`config`]: the server's options (TensorFlow Serving's flag names) and
//!   model configs (`ModelServerConfig`, version policies, labels,
//!   `BatchingParameters`).
//! - [`source`]: the source actor, which lists numbered version directories.
//! - [`manager`]: the manager actor and the [`Models`] handle the APIs read.
//! - [`servable`]: one loaded model version and its predict, classify and
//!   regress entry points.
//! - [`batching`]: the batching actor that merges concurrent requests.
//! - [`warmup`]: replaying `assets.extra/tf_serving_warmup_requests`.
//! - [`metrics`]: Prometheus metrics.
//! - [`rest`] and [`json`]: the REST API and its JSON tensor encodings.
//! - [`grpc`]: `PredictionService` and `ModelService`.
//! - [`server`]: [`ModelServer`], which starts and stops all of it.

#![warn(missing_docs)]

pub mod api;
pub mod batching;
pub mod config;
pub mod grpc;
pub mod json;
pub mod manager;
pub mod metrics;
pub mod rest;
pub mod servable;
pub mod server;
pub mod source;
pub mod warmup;

pub use config::{BatchingOptions, ModelConfig, ServerOptions, VersionPolicy};
pub use manager::{Models, VersionRequest, VersionState, VersionStatus};
pub use servable::{Servable, ServableId};
pub use server::ModelServer;
