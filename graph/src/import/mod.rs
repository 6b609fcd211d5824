//! Reading and writing TensorFlow's `GraphDef` (binary and text format).
//!
//! Importing turns a TensorFlow graph — a binary `.pb`, a text `.pbtxt`, or an
//! already-decoded [`proto::graph::GraphDef`](crate::proto::graph::GraphDef) — into
//! actorflow's [`GraphDef`], ready for [`Graph::from_graph_def`](crate::Graph):
//!
//! - [`graph_def_from_tf_bytes`], [`graph_def_from_tf_text`],
//!   [`graph_def_from_tf_proto`], and [`load_graph_def`], which picks the format by
//!   file extension (`.pb`, `.pbtxt`/`.txt`, or `.json` for actorflow's own JSON),
//!   or [`load_graph_def_as`] with a [`GraphFormat`]. With the default options they
//!   are also `GraphDef`'s own constructors: [`GraphDef::from_file`],
//!   [`GraphDef::from_pb_file`], [`GraphDef::from_pb_bytes`], ….
//! - Conversion ([`convert`], [`attr`], [`tensor`]): constants decode from either of
//!   TensorFlow's tensor representations; `_output_shapes` is dropped, `_class` and
//!   other `_` attributes are kept, devices are kept unless
//!   [`ImportOptions::clear_devices`].
//! - Function libraries ([`inline`]): every call of a function of the graph's
//!   `FunctionDefLibrary` (`StatefulPartitionedCall`, `PartitionedCall`, a node
//!   whose op is a function) is inlined, recursively, and functional control flow
//!   (`If`, `While`) is lowered to `Switch`/`Merge` and loop frames, so that the
//!   graph is flat and runnable; functions nothing calls are ignored.
//! - Validation ([`validate`], on by default): every problem in the flat graph —
//!   unknown ops, attributes the op lacks or of the wrong kind, dangling inputs,
//!   other uses of library functions, unsupported dtypes — is collected and
//!   returned in one status, one line per problem (`node 'x' (op Y): …`). Its
//!   code is `NotFound` when the only problems are unknown ops, `Unimplemented`
//!   when they are only unsupported dtypes, and `InvalidArgument` otherwise. A
//!   graph whose calls cannot be inlined reports only that.
//!
//! Exporting ([`graph_def_to_tf_bytes`], [`graph_def_to_tf_text`],
//! [`save_graph_def`]) writes graphs TensorFlow's `import_graph_def` loads.
//!
//! Malformed input is an error, never a panic: undecodable binary data is
//! `DataLoss` (as in TensorFlow's `ReadBinaryProto`), text syntax errors are
//! `InvalidArgument` with a line and column.
//!
//! ```
//! use actorflow_graph::import::{graph_def_from_tf_text, graph_def_to_tf_bytes, graph_def_from_tf_bytes, ImportOptions};
//! use actorflow_graph::{Code, Tensor};
//! let text = r#"
//!   node { name: "c" op: "Const"
//!     attr { key: "dtype" value { type: DT_FLOAT } }
//!     attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } } float_val: 2 } } } }
//!   node { name: "y" op: "Identity" input: "c" attr { key: "T" value { type: DT_FLOAT } } }
//! "#;
//! let opts = ImportOptions::default();
//! let g = graph_def_from_tf_text(text, &opts).unwrap();
//! assert_eq!(g.node[0].get_attr::<Tensor>("value").unwrap(), Tensor::vector(&[2.0f32; 3]));
//! let bytes = graph_def_to_tf_bytes(&g).unwrap();
//! assert_eq!(graph_def_from_tf_bytes(&bytes, &opts).unwrap(), g);
//!
//! let bad = r#"node { name: "a" op: "NoSuchOp" } node { name: "b" op: "Identity" input: "zz" }"#;
//! let e = graph_def_from_tf_text(bad, &opts).unwrap_err();
//! assert_eq!(e.code(), Code::InvalidArgument);
//! assert!(e.message().contains("node 'a' (op NoSuchOp)"));
//! assert!(e.message().contains("input 'zz' names no node"));
//! ```

pub mod attr;
pub mod convert;
pub mod inline;
pub mod tensor;
pub mod validate;

use std::path::Path;

use prost::Message;

use crate::proto::graph as pb;
use crate::proto::text;
use crate::{GraphDef, OpRegistry, Result, Status};

pub use attr::{attr_from_proto, attr_to_proto};
pub use convert::graph_def_to_tf_proto;
pub use tensor::{
    shape_from_proto, shape_to_proto, tensor_from_proto, tensor_from_proto_limited,
    tensor_to_content_proto, tensor_to_proto, DEFAULT_MAX_TENSOR_BYTES,
};

/// How to import a graph (non-exhaustive: build it with the `with_*` setters).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportOptions {
    /// Clear every node's requested device (TensorFlow's `clear_devices`).
    pub clear_devices: bool,
    /// Check the graph against the global [`OpRegistry`] and report every problem;
    /// when false only conversion problems are errors.
    pub validate: bool,
    /// The most bytes one constant tensor may decode to (a single value can fill a
    /// huge shape); larger tensors are errors.
    pub max_tensor_bytes: usize,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            clear_devices: false,
            validate: true,
            max_tensor_bytes: DEFAULT_MAX_TENSOR_BYTES,
        }
    }
}

impl ImportOptions {
    crate::option_setters! {
        /// Sets [`clear_devices`](Self::clear_devices).
        with_clear_devices => clear_devices: bool;
        /// Sets [`validate`](Self::validate).
        with_validate => validate: bool;
        /// Sets [`max_tensor_bytes`](Self::max_tensor_bytes).
        with_max_tensor_bytes => max_tensor_bytes: usize;
    }
}

/// Imports a decoded TensorFlow `GraphDef`; see the module docs.
pub fn graph_def_from_tf_proto(p: &pb::GraphDef, opts: &ImportOptions) -> Result<GraphDef> {
    let mut problems = validate::Problems::default();
    let c = convert::graph_from_proto(p, opts, &mut problems);
    finish_import(c, p.library.as_ref(), opts, problems)
}

/// Inlines the library's functions into a converted graph and validates it.
fn finish_import(
    mut c: convert::Converted,
    library: Option<&pb::FunctionDefLibrary>,
    opts: &ImportOptions,
    mut problems: validate::Problems,
) -> Result<GraphDef> {
    let before = problems.len();
    let registry = OpRegistry::global();
    inline::inline_functions(&mut c.graph, library, opts, registry, &mut problems);
    // A failed inlining leaves calls half done: validating them would only add noise.
    if opts.validate && problems.len() == before {
        validate::validate(
            &c.graph,
            &c.functions,
            &c.converted_badly,
            registry,
            &mut problems,
        );
    }
    problems.into_result()?;
    Ok(c.graph)
}

/// Imports a binary (serialised protobuf) TensorFlow `GraphDef`. It streams: each
/// node is decoded and converted before the next is read, so the graph is never
/// held twice (as TensorFlow's messages and as actorflow's nodes).
pub fn graph_def_from_tf_bytes(bytes: &[u8], opts: &ImportOptions) -> Result<GraphDef> {
    let mut problems = validate::Problems::default();
    let (c, library) =
        convert::graph_from_proto_bytes(bytes, opts, &mut problems).map_err(|e| {
            Status::data_loss(format!(
                "cannot parse {} bytes as a binary TensorFlow GraphDef: {e}",
                bytes.len()
            ))
            .with_source(e)
        })?;
    finish_import(c, library.as_ref(), opts, problems)
}

/// Imports a TensorFlow `GraphDef` in protobuf text format (`.pbtxt`).
pub fn graph_def_from_tf_text(text: &str, opts: &ImportOptions) -> Result<GraphDef> {
    let p = text::parse_graph_def(text)?;
    graph_def_from_tf_proto(&p, opts)
}

/// Imports actorflow's own JSON form, applying the same options and validation.
pub fn graph_def_from_json(json: &str, opts: &ImportOptions) -> Result<GraphDef> {
    let mut g = GraphDef::from_json(json)?;
    convert::apply_options(&mut g, opts);
    if opts.validate {
        let mut problems = validate::Problems::default();
        let none = Default::default();
        validate::validate(
            &g,
            &none,
            &Default::default(),
            OpRegistry::global(),
            &mut problems,
        );
        problems.into_result()?;
    }
    Ok(g)
}

/// The format of a graph file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GraphFormat {
    /// A binary (serialised protobuf) TensorFlow `GraphDef`, `.pb`.
    Binary,
    /// TensorFlow's protobuf text format, `.pbtxt` (or `.txt`).
    Text,
    /// actorflow's own JSON form, `.json`.
    Json,
}

impl GraphFormat {
    /// The format `path`'s extension names (case-insensitive); `InvalidArgument`
    /// for any other extension.
    pub fn of_path(path: &Path) -> Result<GraphFormat> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        match ext.as_str() {
            "pb" => Ok(GraphFormat::Binary),
            "pbtxt" | "txt" => Ok(GraphFormat::Text),
            "json" => Ok(GraphFormat::Json),
            _ => Err(Status::invalid_argument(format!(
                "cannot tell the format of '{}': expected a .pb, .pbtxt (or .txt) or .json file",
                path.display()
            ))),
        }
    }
}

/// Reads a graph from a file, its format chosen by extension: `.pb` binary,
/// `.pbtxt` or `.txt` text format, `.json` actorflow's JSON.
pub fn load_graph_def(path: &Path, opts: &ImportOptions) -> Result<GraphDef> {
    load_graph_def_as(path, GraphFormat::of_path(path)?, opts)
}

/// Reads a graph in `format` from a file, whatever its name.
pub fn load_graph_def_as(
    path: &Path,
    format: GraphFormat,
    opts: &ImportOptions,
) -> Result<GraphDef> {
    let bytes = std::fs::read(path)
        .map_err(|e| Status::from(e).context(format_args!("reading '{}'", path.display())))?;
    let in_file = |e: Status| e.context(format_args!("'{}'", path.display()));
    if format == GraphFormat::Binary {
        return graph_def_from_tf_bytes(&bytes, opts).map_err(in_file);
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| in_file(Status::data_loss("the file is not valid UTF-8")))?;
    if format == GraphFormat::Json {
        graph_def_from_json(&text, opts).map_err(in_file)
    } else {
        graph_def_from_tf_text(&text, opts).map_err(in_file)
    }
}

/// The largest message protobuf implementations read (2 GiB - 1).
const MAX_PROTO_BYTES: usize = i32::MAX as usize;

/// Serialises a graph as a binary TensorFlow `GraphDef`; `InvalidArgument` when it
/// exceeds protobuf's 2 GiB limit.
pub fn graph_def_to_tf_bytes(g: &GraphDef) -> Result<Vec<u8>> {
    let p = graph_def_to_tf_proto(g);
    let len = p.encoded_len();
    if len > MAX_PROTO_BYTES {
        return Err(Status::invalid_argument(format!(
            "the GraphDef takes {len} bytes, more than protobuf's limit of {MAX_PROTO_BYTES}"
        )));
    }
    Ok(p.encode_to_vec())
}

/// Writes a graph as a TensorFlow `GraphDef` in text format.
pub fn graph_def_to_tf_text(g: &GraphDef) -> String {
    text::write_graph_def(&graph_def_to_tf_proto(g))
}

/// Writes a graph to a file, its format chosen by extension as in
/// [`load_graph_def`].
pub fn save_graph_def(path: &Path, g: &GraphDef) -> Result<()> {
    save_graph_def_as(path, GraphFormat::of_path(path)?, g)
}

/// Writes a graph to a file in `format`, whatever its name.
pub fn save_graph_def_as(path: &Path, format: GraphFormat, g: &GraphDef) -> Result<()> {
    let data = match format {
        GraphFormat::Binary => graph_def_to_tf_bytes(g)?,
        GraphFormat::Text => graph_def_to_tf_text(g).into_bytes(),
        GraphFormat::Json => g.to_json()?.into_bytes(),
    };
    std::fs::write(path, data)
        .map_err(|e| Status::from(e).context(format_args!("writing '{}'", path.display())))
}

/// Loading and saving TensorFlow's graph files, with the default
/// [`ImportOptions`] (validated, devices kept); the functions of
/// [`import`](self) take other options.
///
/// ```
/// use actorflow_graph::{builder::Scope, ops, GraphDef, Tensor};
/// let s = Scope::new();
/// ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
/// let g = s.graph_def();
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("model.pb");
/// g.save(&path).unwrap();
/// assert_eq!(GraphDef::from_file(&path).unwrap(), g);
/// assert_eq!(GraphDef::from_pb_bytes(&g.to_pb_bytes().unwrap()).unwrap(), g);
/// assert_eq!(GraphDef::from_pbtxt(&g.to_pbtxt()).unwrap(), g);
/// ```
impl GraphDef {
    /// Reads a graph file, its format chosen by its extension (`.pb`, `.pbtxt` or
    /// `.txt`, `.json`).
    pub fn from_file(path: impl AsRef<Path>) -> Result<GraphDef> {
        load_graph_def(path.as_ref(), &ImportOptions::default())
    }

    /// Reads a binary TensorFlow `GraphDef` file, whatever its extension.
    pub fn from_pb_file(path: impl AsRef<Path>) -> Result<GraphDef> {
        load_graph_def_as(
            path.as_ref(),
            GraphFormat::Binary,
            &ImportOptions::default(),
        )
    }

    /// Reads a TensorFlow `GraphDef` in text format, whatever its extension.
    pub fn from_pbtxt_file(path: impl AsRef<Path>) -> Result<GraphDef> {
        load_graph_def_as(path.as_ref(), GraphFormat::Text, &ImportOptions::default())
    }

    /// Reads actorflow's JSON form from a file, whatever its extension.
    pub fn from_json_file(path: impl AsRef<Path>) -> Result<GraphDef> {
        load_graph_def_as(path.as_ref(), GraphFormat::Json, &ImportOptions::default())
    }

    /// Decodes a binary TensorFlow `GraphDef`.
    pub fn from_pb_bytes(bytes: &[u8]) -> Result<GraphDef> {
        graph_def_from_tf_bytes(bytes, &ImportOptions::default())
    }

    /// Parses a TensorFlow `GraphDef` in text format.
    pub fn from_pbtxt(text: &str) -> Result<GraphDef> {
        graph_def_from_tf_text(text, &ImportOptions::default())
    }

    /// The graph as a binary TensorFlow `GraphDef` (what `tf.io.write_graph(...,
    /// as_text=False)` writes).
    pub fn to_pb_bytes(&self) -> Result<Vec<u8>> {
        graph_def_to_tf_bytes(self)
    }

    /// The graph as a TensorFlow `GraphDef` in text format.
    pub fn to_pbtxt(&self) -> String {
        graph_def_to_tf_text(self)
    }

    /// Writes the graph to a file, its format chosen by its extension.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        save_graph_def(path.as_ref(), self)
    }
}

#[cfg(test)]
mod tests;
