//! TensorFlow's protobuf messages and gRPC services, for every crate that speaks
//! TensorFlow's formats: the graph importer (`GraphDef`, `TensorProto`), the
//! TensorBoard writer (`Event`, `Summary`), the distributed runtime
//! (`MasterService`, `WorkerService`), and the model server (TensorFlow Serving's
//! `PredictionService`, `ModelService` and configuration files).
//!
//! The messages are generated at build time (prost, through `build.rs` and protox,
//! with no system `protoc`) from actorflow's own `.proto` files under `protos/`,
//! laid out as TensorFlow's are. Those files declare only the fields actorflow
//! reads or writes and the ones a TensorFlow peer sends that matter, but every
//! package, message, enum, service and RPC name, field number and field type is
//! TensorFlow's: the bytes are interchangeable with TensorFlow's own. Fields a
//! file leaves out are dropped when decoding.
//!
//! - [`tensorflow`]: package `tensorflow` (all messages, the `DataType` enum, the
//!   [`master_service_client`](tensorflow::master_service_client) /
//!   [`master_service_server`](tensorflow::master_service_server) and
//!   [`worker_service_client`](tensorflow::worker_service_client) /
//!   [`worker_service_server`](tensorflow::worker_service_server) modules).
//! - [`tensorflow::error`]: package `tensorflow.error`, the canonical status
//!   [`Code`](tensorflow::error::Code).
//! - [`tensorflow::serving`]: package `tensorflow.serving`, TensorFlow Serving's
//!   requests and responses (`PredictRequest`, ...), warmup records
//!   (`PredictionLog`), configuration files (`ModelServerConfig`,
//!   `BatchingParameters`) and the
//!   [`prediction_service_server`](tensorflow::serving::prediction_service_server) /
//!   [`prediction_service_client`](tensorflow::serving::prediction_service_client)
//!   and [`model_service_server`](tensorflow::serving::model_service_server) /
//!   [`model_service_client`](tensorflow::serving::model_service_client) modules
//!   (`/tensorflow.serving.PredictionService/Predict`, ...).
//! - [`text`]: the protobuf text format of every message, by reflection over
//!   the descriptors the messages were generated from
//!   ([`text::descriptor_pool`]).
//!
//! The master and worker services are declared in package `tensorflow` (TensorFlow's files say
//! `tensorflow.grpc`), so their method paths are the ones TensorFlow's processes
//! serve and call: `/tensorflow.MasterService/RunStep`,
//! `/tensorflow.WorkerService/RecvTensor`, ... The generated code sets no message
//! size limits: servers and clients choose theirs with the generated
//! `max_decoding_message_size` / `max_encoding_message_size` (tonic's own default
//! for decoding is 4 MiB; TensorFlow's peers send messages up to 2 GiB). The stubs
//! use tonic's codegen only; the crates that serve or call enable its transport.
//!
//! Conventions of the generated code: maps are `BTreeMap`s (deterministic
//! encoding); `TensorProto.tensor_content` and `TensorProto.string_val` are
//! `bytes::Bytes`; the `tensor` members of the `AttrValue` and `Summary.Value`
//! oneofs and `PredictionLog`'s `session_run_log` are boxed; enum fields are `i32` (proto3 enums are open) with typed
//! getters and setters; every message implements [`prost::Name`] (type URLs
//! `type.googleapis.com/<full name>`). The well-known types are `prost_types`'
//! (`google.protobuf.Any` is [`prost_types::Any`]) and the wrappers are Rust's
//! own: a `google.protobuf.Int64Value` field is an `Option<i64>`, a
//! `StringValue` an `Option<String>`, a `BoolValue` an `Option<bool>`; in a
//! oneof, the bare value (`ModelSpec`'s `VersionChoice::Version(i64)`).
//!
//! ```
//! use actorflow_proto::tensorflow::{GraphDef, NodeDef};
//! use prost::Message;
//!
//! let g = GraphDef {
//!     node: vec![NodeDef { name: "a".into(), op: "NoOp".into(), ..Default::default() }],
//!     ..Default::default()
//! };
//! let bytes = g.encode_to_vec();
//! assert_eq!(GraphDef::decode(bytes.as_slice()).unwrap(), g);
//! ```

#![warn(missing_docs)]

/// Package `actorflow`: actorflow's own extensions of TensorFlow's protocol,
/// carried where TensorFlow's messages reserve room for transports
/// (`transport_options`), so TensorFlow peers ignore them.
pub mod actorflow {
    include!(concat!(env!("OUT_DIR"), "/actorflow.rs"));

    /// The `type_url` of a [`TensorChunks`] in a `google.protobuf.Any`.
    pub const TENSOR_CHUNKS_URL: &str = "type.googleapis.com/actorflow.TensorChunks";
}

/// Package `tensorflow`: every message, enum and service; see the crate docs.
/// (Generated: fields whose `.proto` comment says nothing have no docs.)
#[allow(missing_docs)]
pub mod tensorflow {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));

    /// Package `tensorflow.error`: the canonical status codes.
    pub mod error {
        include!(concat!(env!("OUT_DIR"), "/tensorflow.error.rs"));
    }

    /// Package `tensorflow.serving`: TensorFlow Serving's messages, its model
    /// server's configuration files and its two services; see the crate docs.
    pub mod serving {
        include!(concat!(env!("OUT_DIR"), "/tensorflow.serving.rs"));
    }
}

pub mod text;

pub use prost;
pub use tonic;

#[cfg(test)]
mod tests;
