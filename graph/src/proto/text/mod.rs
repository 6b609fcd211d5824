//! The protobuf text format (`.pbtxt`) of TensorFlow's [`GraphDef`]: the
//! workspace's one text-format implementation, [`proto::text`]
//! (reflection over the descriptors the messages are generated from), with
//! errors as `InvalidArgument` statuses.
//!
//! [`parse_graph_def`] reads what TensorFlow's `text_format` / `TextFormat`
//! write: nested messages in `{}` or `<>`, repeated fields repeated or as
//! `[a, b]` lists, `attr` map entries, `DT_*` enum names or numbers, C-style
//! string escapes, adjacent string literals, `inf`/`nan`, `#` comments. As in
//! TensorFlow, a field the `.proto` files do not declare, or a singular field
//! given twice, is an error; they declare every field TensorFlow writes in a
//! `GraphDef`, and its debug information and full types
//! (`experimental_type`, …) are read and dropped. [`write_graph_def`] writes
//! what TensorFlow's Python prints, byte for byte.
//!
//! The parser never panics: malformed input is an error naming the line and
//! column, and nesting is limited to [`MAX_DEPTH`] messages.
//!
//! ```
//! use actorflow_graph::proto::text::{parse_graph_def, write_graph_def};
//! let g = parse_graph_def(r#"
//!     node { name: "c" op: "Const"
//!            attr { key: "dtype" value { type: DT_FLOAT } }
//!            attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
//!     versions { producer: 27 }
//! "#).unwrap();
//! assert_eq!(g.node[0].attr.len(), 2);
//! assert_eq!(parse_graph_def(&write_graph_def(&g)).unwrap(), g);
//! assert!(parse_graph_def("node { name: ").is_err());
//! ```

pub use ::proto::text::{escape_bytes, MAX_DEPTH};

use crate::proto::graph::GraphDef;
use crate::{Result, Status};

/// Parses a `GraphDef` from the text format; see the module docs.
pub fn parse_graph_def(text: &str) -> Result<GraphDef> {
    ::proto::text::from_text(text)
        .map_err(|e| Status::invalid_argument(format!("text format, {e}")).with_source(e))
}

/// Writes a `GraphDef` in the text format; see the module docs.
pub fn write_graph_def(g: &GraphDef) -> String {
    ::proto::text::to_text(g)
}

#[cfg(test)]
mod tests;
