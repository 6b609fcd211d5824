//! TensorFlow's protobuf messages as the graph crate uses them: re-exports of the
//! generated types of the `actorflow-proto` crate (one source of truth for every
//! message, generated at build time from `.proto` files with TensorFlow's names
//! and field numbers), grouped as before, with the helpers that belong to
//! actorflow rather than to the wire format.
//!
//! - [`summary`]: `Event`, `Summary`, `HistogramProto` (TensorBoard), and the
//!   [`Histogram`](summary::Histogram) that fills a `HistogramProto`.
//! - [`graph`]: `GraphDef`, `NodeDef`, `VersionDef`, `FunctionDefLibrary`.
//! - [`attr`]: `AttrValue`, `AttrValue.ListValue`, `NameAttrList`.
//! - [`tensor`]: `TensorProto`, `TensorShapeProto`, `ResourceHandleProto`.
//! - [`types`]: the `DataType` enum.
//! - [`text`]: the protobuf text format (`.pbtxt`) of `GraphDef`.
//!
//! [`tf`] is the whole generated package `tensorflow`.

pub use ::proto::tensorflow as tf;

pub mod attr;
pub mod graph;
pub mod summary;
pub mod tensor;
pub mod text;
pub mod types;
