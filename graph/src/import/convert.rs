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
    let mut converted_badly = HashSet::new();
    let mut node = Vec::with_capacity(p.node.len());
    for n in &p.node {
        node.push(node_from_proto(n, opts, |k, e| {
            problems.node(
                &n.name,
                &n.op,
                e.code(),
                format_args!("attr '{k}': {}", e.message()),
            );
            converted_badly.insert(n.name.clone());
        }));
    }
    let versions = p
        .versions
        .as_ref()
        .map(|v| VersionDef {
            producer: v.producer,
            min_consumer: v.min_consumer,
        })
        .unwrap_or_default();
    let functions = p
        .library
        .as_ref()
        .map(pb::function_names)
        .unwrap_or_default();
    Converted {
        graph: GraphDef { node, versions },
        functions,
        converted_badly,
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
