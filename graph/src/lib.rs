//! actorflow's data model, with no threads: tensors, the op registry, graphs, the
//! graph builder and the graph passes.
//!
//! ```
//! use actorflow_graph::{builder::Scope, ops, DType, Shape, Tensor};
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
//! let one = ops::constant(&s, Tensor::vector(&[1.0f32, 1.0])).unwrap();
//! let y = ops::add(&s, &x, &one).unwrap();
//! assert_eq!(y.shape(), Shape::known(&[2]));
//! assert_eq!(s.graph_def().node.len(), 3);
//! ```

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod attr_map;
pub mod attr_value;
pub mod builder;
pub mod device;
pub mod dtype;
pub mod gradients;
pub mod graph;
pub mod import;
pub mod node_def;
pub mod op_def;
pub mod ops;
pub mod passes;
pub mod proto;
pub mod shape;
pub mod status;
pub mod tensor;
pub mod train;

pub use attr_map::AttrMap;
pub use attr_value::{AttrValue, FromAttr, ListValue, NameAttrList};
pub use device::DeviceName;
pub use dtype::{DType, DataType};
pub use graph::{Edge, Graph, Node, NodeId};
pub use half::{bf16, f16};
pub use node_def::{GraphDef, NodeDef, TensorId, VersionDef, CONTROL_PORT};
pub use op_def::{OpDef, OpRegistry};
pub use shape::{Shape, TensorShape};
pub use status::{Code, Result, Status};
pub use tensor::{ResourceHandle, Tensor, TensorType};

/// Builder setters for the `#[non_exhaustive]` option structs of actorflow's
/// crates: `with_field(value) -> Self` for each named field, so that options are
/// built as `Options::default().with_a(1).with_b(x)` from other crates. A field
/// declared `as into` takes anything that converts into its type (an `Option<T>`
/// field takes `T` or `Option<T>`, a `String` field a `&str`).
#[doc(hidden)]
#[macro_export]
macro_rules! option_setters {
    ($($(#[$m:meta])* $setter:ident => $field:ident: $ty:ty $(as $into:ident)?;)*) => {$(
        $(#[$m])*
        #[must_use]
        #[allow(clippy::useless_conversion)]
        pub fn $setter(mut self, value: $crate::option_setters!(@param $ty $(, $into)?)) -> Self {
            self.$field = value.into();
            self
        }
    )*};
    (@param $ty:ty) => { $ty };
    (@param $ty:ty, into) => { impl Into<$ty> };
}
