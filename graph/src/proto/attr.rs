//! TensorFlow's attribute messages (`attr_value.proto`): [`AttrValue`] with its
//! oneof [`AttrValueKind`] (whose `Tensor` member is boxed), [`ListValue`] and
//! [`NameAttrList`]. Maps are `BTreeMap`s, so encoding is deterministic.

pub use ::proto::tensorflow::attr_value::{ListValue, Value as AttrValueKind};
pub use ::proto::tensorflow::{AttrValue, NameAttrList};
