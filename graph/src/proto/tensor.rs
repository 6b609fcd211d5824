//! TensorFlow's tensor messages: [`TensorProto`] (`tensor.proto`, with
//! `tensor_content` and `string_val` as `bytes::Bytes`), [`TensorShapeProto`] and
//! its [`Dim`] (`tensor_shape.proto`), [`ResourceHandleProto`] and its
//! [`DtypeAndShape`] (`resource_handle.proto`), and [`VariantTensorDataProto`].
//! Conversion to and from actorflow's [`Tensor`](crate::Tensor) lives in
//! [`crate::import`].

pub use ::proto::tensorflow::resource_handle_proto::DtypeAndShape;
pub use ::proto::tensorflow::tensor_shape_proto::Dim;
pub use ::proto::tensorflow::{
    ResourceHandleProto, TensorProto, TensorShapeProto, VariantTensorDataProto,
};
