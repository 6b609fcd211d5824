//! Conversion of whole graphs between TensorFlow's
//! [`proto::GraphDef`](crate::proto::graph::GraphDef) and actorflow's [`GraphDef`].
//!
//! Importing keeps every node's name, op, inputs and attributes, drops the
//! `_output_shapes` attribute (shape hints actorflow infers itself), keeps `_class`
//! (colocation) and every other `_`-prefixed attribute, keeps or clears devices as
//! [`ImportOptions::clear_devices`] says, and records each attribute that fails to
//! convert as a problem of its node instead of stopping at the first. The library's
//! function names are returned for validation. Exporting is the reverse and cannot
//! fail.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::attr::{attr_from_proto, attr_to_proto};
use super::validate::Problems;
use super::ImportOptions;
use crate::proto::graph as pb;
use crate::{GraphDef, NodeDef, VersionDef};

/// The attribute TensorFlow uses for output shape hints, dropped on import.
pub const OUTPUT_SHAPES_ATTR: &str = "_output_shapes";

/// A converted graph with what validation needs to know about it.
pub(crate) struct Converted {
    /// The graph.
    pub graph: GraphDef,
    /// The names of the functions the graph's library defines.
    pub functions: BTreeSet<String>,
    /// Indices of nodes with attributes that failed to convert.
    pub converted_badly: HashSet<usize>,
}

/// Converts a TensorFlow graph, recording conversion problems in `problems`.
pub(crate) fn graph_from_proto(
    p: &pb::GraphDef,
    opts: &ImportOptions,
    problems: &mut Problems,
) -> Converted {
    let mut converted_badly = HashSet::new();
    let mut node = Vec::with_capacity(p.node.len());
    for (i, n) in p.node.iter().enumerate() {
        let mut attr = BTreeMap::new();
        for (k, v) in &n.attr {
            if k == OUTPUT_SHAPES_ATTR {
                continue;
            }
            match attr_from_proto(v, opts.max_tensor_bytes) {
                Ok(a) => {
                    attr.insert(k.clone(), a);
                }
                Err(e) => {
                    problems.node(
                        &n.name,
                        &n.op,
                        e.code(),
                        format_args!("attr '{k}': {}", e.message()),
                    );
                    converted_badly.insert(i);
                }
            }
        }
        node.push(NodeDef {
            name: n.name.clone(),
            op: n.op.clone(),
            input: n.input.clone(),
            device: if opts.clear_devices {
                String::new()
            } else {
                n.device.clone()
            },
            attr,
        });
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
