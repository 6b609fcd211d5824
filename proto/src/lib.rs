//! TensorFlow's protobuf messages and gRPC services, for every crate that speaks
//! TensorFlow's formats: the graph importer (`GraphDef`, `TensorProto`), the
//! TensorBoard writer (`Event`, `Summary`), and the distributed runtime
//! (`MasterService`, `WorkerService`).
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
//! - [`text`]: the protobuf text format of every message, by reflection over
//!   the descriptors the messages were generated from
//!   ([`text::descriptor_pool`]).
//!
//! Both services are declared in package `tensorflow` (TensorFlow's files say
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
//! oneofs are boxed; enum fields are `i32` (proto3 enums are open) with typed
//! getters and setters; every message implements [`prost::Name`] (type URLs
//! `type.googleapis.com/<full name>`).
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
}

pub mod text;

pub use prost;
pub use tonic;

#[cfg(test)]
mod tests;
