//! Conversion of whole graphs between TensorFlow's
//! [`proto::GraphDef`](crate::proto::graph::GraphDef) and actorflow's [`GraphDef`].
//!
//! Importing keeps every node's name, op, inputs and attributes, drops the
//! `_output_shapes` attribute (shape hints actorflow infers itself) and the
//! attributes of call ops that only TensorFlow's function runtime reads
//! (`config_proto`, `executor_type` …: the call is inlined), keeps `_class`
//! (colocation) and every other `_`-prefixed attribute, keeps or clears devices as
//! [`ImportOptions::clear_devices`] says, and records each attribute that fails to
//! convert as a problem of its node instead of stopping at the first. Function
//! bodies convert node by node the same way (`node_from_proto`), when a call
//! needs them. The library's function names are returned for validation.
//! Exporting is the reverse and cannot fail.

use std::collections::{BTreeSet, HashSet};

use super::attr::{attr_from_proto, attr_to_proto};
use super::validate::Problems;
use super::{inline, ImportOptions};
use crate::proto::graph as pb;
use crate::{GraphDef, NodeDef, Status, VersionDef};

/// The attribute TensorFlow uses for output shape hints, dropped on import.
pub const OUTPUT_SHAPES_ATTR: &str = "_output_shapes";

/// A converted graph with what validation needs to know about it.
pub(crate) struct Converted {
    /// The graph.
    pub graph: GraphDef,
    /// The names of the functions the graph's library defines.
    pub functions: BTreeSet<String>,
    /// Names of nodes with attributes that failed to convert.
    pub converted_badly: HashSet<String>,
}

/// Converts a TensorFlow graph, recording conversion problems in `problems`.
pub(crate) fn graph_from_proto(
    p: &pb::GraphDef,
    opts: &ImportOptions,
    problems: &mut Problems,
) -> Converted {
    let mut c = Converter::new(opts, p.node.len());
    for n in &p.node {
        c.node(n, problems);
    }
    c.finish(p.versions.as_ref(), p.library.as_ref())
}

/// Converts a serialised TensorFlow graph one node at a time: each `NodeDef` is
/// decoded, converted and dropped before the next, so a large graph is never
/// held both as TensorFlow's messages and as actorflow's nodes. The fields other
/// than `node` (versions, library) are decoded together afterwards, as protobuf
/// merges them. Returns the graph and its function library.
pub(crate) fn graph_from_proto_bytes(
    bytes: &[u8],
    opts: &ImportOptions,
    problems: &mut Problems,
) -> std::result::Result<(Converted, Option<pb::FunctionDefLibrary>), prost::DecodeError> {
    use prost::bytes::Buf;
    use prost::encoding::{decode_key, skip_field, DecodeContext, WireType};
    use prost::Message;
    /// `GraphDef.node`'s field number.
    const NODE: u32 = 1;
    let mut buf = bytes;
    let mut rest: Vec<u8> = Vec::new();
    let mut c = Converter::new(opts, 0);
    while buf.has_remaining() {
        let start = bytes.len() - buf.remaining();
        let (tag, wire_type) = decode_key(&mut buf)?;
        if tag == NODE && wire_type == WireType::LengthDelimited {
            let n = pb::NodeDef::decode_length_delimited(&mut buf)?;
            c.node(&n, problems);
        } else {
            skip_field(wire_type, tag, &mut buf, DecodeContext::default())?;
            rest.extend_from_slice(&bytes[start..bytes.len() - buf.remaining()]);
        }
    }
    let other = pb::GraphDef::decode(rest.as_slice())?;
    let converted = c.finish(other.versions.as_ref(), other.library.as_ref());
    Ok((converted, other.library))
}

/// Converts nodes one by one; see [`graph_from_proto`].
struct Converter<'a> {
    opts: &'a ImportOptions,
    node: Vec<NodeDef>,
    converted_badly: HashSet<String>,
}

impl<'a> Converter<'a> {
    fn new(opts: &'a ImportOptions, nodes: usize) -> Converter<'a> {
        Converter {
            opts,
            node: Vec::with_capacity(nodes),
            converted_badly: HashSet::new(),
        }
    }

    fn node(&mut self, n: &pb::NodeDef, problems: &mut Problems) {
        let converted_badly = &mut self.converted_badly;
        self.node.push(node_from_proto(n, self.opts, |k, e| {
            problems.node(
                &n.name,
                &n.op,
                e.code(),
                format_args!("attr '{k}': {}", e.message()),
            );
            converted_badly.insert(n.name.clone());
        }));
    }

    fn finish(
        self,
        versions: Option<&pb::VersionDef>,
        library: Option<&pb::FunctionDefLibrary>,
    ) -> Converted {
        let versions = versions
            .map(|v| VersionDef {
                producer: v.producer,
                min_consumer: v.min_consumer,
            })
            .unwrap_or_default();
        let functions = library.map(pb::function_names).unwrap_or_default();
        let mut node = self.node;
        node.shrink_to_fit();
        Converted {
            graph: GraphDef { node, versions },
            functions,
            converted_badly: self.converted_badly,
        }
    }
}

/// The attributes of a call op (`PartitionedCall`, `StatefulPartitionedCall`) that
/// inlining reads; the others say how TensorFlow's runtime would run the call
/// (`config_proto` is a serialised proto, not UTF-8) and go with the call node.
const CALL_ATTRS: [&str; 3] = ["f", "Tin", "Tout"];

/// Converts one node (of a graph or of a function body: its inputs are copied as
/// they are), calling `bad_attr` for each attribute that fails to convert. Drops
/// `_output_shapes`, and of a call op's attributes keeps only [`CALL_ATTRS`];
/// clears the device when [`ImportOptions::clear_devices`] says so.
pub(crate) fn node_from_proto(
    n: &pb::NodeDef,
    opts: &ImportOptions,
    mut bad_attr: impl FnMut(&str, Status),
) -> NodeDef {
    let is_call = inline::CALL_OPS.contains(&n.op.as_str());
    let mut attr = crate::AttrMap::new();
    for (k, v) in &n.attr {
        if k == OUTPUT_SHAPES_ATTR || (is_call && !CALL_ATTRS.contains(&k.as_str())) {
            continue;
        }
        match attr_from_proto(v, opts.max_tensor_bytes) {
            Ok(a) => {
                attr.insert(k.clone(), a);
            }
            Err(e) => bad_attr(k, e),
        }
    }
    NodeDef {
        name: n.name.clone(),
        op: n.op.clone(),
        input: n.input.clone(),
        device: if opts.clear_devices {
            String::new()
        } else {
            n.device.clone()
        },
        attr,
    }
}

/// Applies the import options to a graph that is already in actorflow's form (read
/// from actorflow's JSON): drops `_output_shapes`, clears devices if asked.
pub(crate) fn apply_options(g: &mut GraphDef, opts: &ImportOptions) {
    for n in &mut g.node {
        n.attr.remove(OUTPUT_SHAPES_ATTR);
        if opts.clear_devices {
            n.device.clear();
        }
    }
}

/// The TensorFlow form of an actorflow graph.
pub fn graph_def_to_tf_proto(g: &GraphDef) -> pb::GraphDef {
    pb::GraphDef {
        node: g
            .node
            .iter()
            .map(|n| pb::NodeDef {
                name: n.name.clone(),
                op: n.op.clone(),
                input: n.input.clone(),
                device: n.device.clone(),
                attr: n
                    .attr
                    .iter()
                    .map(|(k, v)| (k.clone(), attr_to_proto(v)))
                    .collect(),
            })
            .collect(),
        library: None,
        version: 0,
        versions: Some(pb::VersionDef {
            producer: g.versions.producer,
            min_consumer: g.versions.min_consumer,
            bad_consumers: vec![],
        }),
    }
}
