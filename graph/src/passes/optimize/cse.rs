//! Common subexpression elimination (TensorFlow's `OptimizerCSE`, a global value
//! numbering after Click, PLDI '95): nodes are visited in topological order (loop
//! back edges ignored), each gets a value number (its *class*: the first node seen
//! with the same key), and every later member of a class is removed, its consumers
//! rewired to the class's *survivor*.
//!
//! Two nodes are equivalent when they have the same op, attributes (floats bit
//! for bit; colocation groups, `_class`, are ignored: the step is placed, and
//! each node's device is compared instead), assigned device, loop frame, data inputs (by class and port, sorted
//! for commutative ops as TensorFlow sorts them) and set of control inputs (by
//! class). Never merged: stateful and asynchronous ops, nodes with reference
//! inputs or outputs, control flow, transfers, `_Arg`/`_Retval` and placeholders
//! (`is_structural` in the parent module).
//!
//! Names survive where the client uses them: when a fetched or target node joins
//! a class whose survivor is not one, it becomes the survivor; two protected nodes
//! are never merged. A removed node's control consumers wait on the survivor,
//! whose control inputs are the removed node's own (equal by the key).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::passes::control_flow::build_control_flow_info;
use crate::passes::place::topological_order;
use crate::{AttrValue, Graph, Node, NodeDef, NodeId};

/// The result of [`eliminate_common_subexpressions`].
#[derive(Clone, Debug)]
pub struct CseOutcome {
    /// The step's nodes after the pass (the input's order, removed nodes left
    /// out); empty when it merged nothing.
    pub nodes: Vec<NodeDef>,
    /// Nodes removed.
    pub merged: usize,
}

/// A node's identity for value numbering, inputs by class.
#[derive(PartialEq, Eq)]
struct Key {
    data: Vec<(NodeId, i32)>,
    control: Vec<NodeId>,
    frame: usize,
}

/// Whether `n` may ever be merged with another node.
fn is_candidate(n: &Node) -> bool {
    !n.op_def.is_stateful
        && !n.op_def.is_async
        && !super::is_structural(n.op())
        && !n.sig.inputs.iter().any(|t| t.is_ref)
        && !n.sig.outputs.iter().any(|t| t.is_ref)
}

/// Attribute equality with floats compared bit for bit (TensorFlow compares the
/// serialized protos, so `0.0` and `-0.0` differ, and so do two NaNs' payloads).
fn attr_eq(a: &AttrValue, b: &AttrValue) -> bool {
    match (a, b) {
        (AttrValue::F(x), AttrValue::F(y)) => x.to_bits() == y.to_bits(),
        (AttrValue::List(x), AttrValue::List(y)) => {
            x.f.len() == y.f.len()
                && x.f
                    .iter()
                    .zip(&y.f)
                    .all(|(p, q)| p.to_bits() == q.to_bits())
                && crate::ListValue {
                    f: Vec::new(),
                    ..(**x).clone()
                } == crate::ListValue {
                    f: Vec::new(),
                    ..(**y).clone()
                }
        }
        _ => a == b,
    }
}

/// Attributes that only constrain placement, which is done when the pass runs.
fn placement_only(name: &str) -> bool {
    name == "_class"
}

fn attrs_eq(a: &NodeDef, b: &NodeDef) -> bool {
    let a = a.attr.iter().filter(|(k, _)| !placement_only(k));
    let mut b = b.attr.iter().filter(|(k, _)| !placement_only(k));
    for (ka, va) in a {
        match b.next() {
            Some((kb, vb)) if ka == kb && attr_eq(va, vb) => {}
            _ => return false,
        }
    }
    b.next().is_none()
}

/// A cheap hash of an attribute value: enough to spread constants over buckets
/// (a tensor contributes its dtype, shape and first bytes); equality decides.
fn hash_attr(h: &mut DefaultHasher, v: &AttrValue) {
    std::mem::discriminant(v).hash(h);
    match v {
        AttrValue::S(s) | AttrValue::Placeholder(s) => s.hash(h),
        AttrValue::I(i) => i.hash(h),
        AttrValue::F(f) => f.to_bits().hash(h),
        AttrValue::B(b) => b.hash(h),
        AttrValue::Type(t) => t.hash(h),
        AttrValue::Shape(s) => s.hash(h),
        AttrValue::Tensor(t) => {
            t.dtype().hash(h);
            t.dims().hash(h);
            if let Ok(b) = t.as_bytes() {
                b[..b.len().min(64)].hash(h);
            }
        }
        AttrValue::List(l) => l.len().hash(h),
        AttrValue::Func(f) => f.name.hash(h),
    }
}

fn node_hash(n: &Node, key: &Key) -> u64 {
    let mut h = DefaultHasher::new();
    n.op().hash(&mut h);
    n.def.device.hash(&mut h);
    key.data.hash(&mut h);
    key.control.hash(&mut h);
    key.frame.hash(&mut h);
    for (k, v) in n.def.attr.iter().filter(|(k, _)| !placement_only(k)) {
        k.hash(&mut h);
        hash_attr(&mut h, v);
    }
    h.finish()
}

/// Merges equivalent nodes of `g`; see the module docs. `keep` names targets
/// whose names must survive (fetched nodes are found from the `_Retval`s). A graph
/// whose loop frames are malformed is returned unchanged.
pub fn eliminate_common_subexpressions(g: &Graph, keep: &[String]) -> CseOutcome {
    let unchanged = || CseOutcome {
        nodes: Vec::new(),
        merged: 0,
    };
    let Ok(frames) = build_control_flow_info(g) else {
        return unchanged();
    };
    let protected_names = super::protected_names(g, keep);
    let protected: Vec<bool> = g
        .nodes()
        .iter()
        .map(|n| protected_names.contains(n.name()))
        .collect();
    let n = g.num_nodes();
    // class[u]: the first node of u's class; survivor[c]: the member kept.
    let mut class: Vec<NodeId> = (0..n).collect();
    let mut survivor: Vec<NodeId> = (0..n).collect();
    let mut keys: Vec<Option<Key>> = (0..n).map(|_| None).collect();
    let mut buckets: HashMap<u64, Vec<NodeId>> = HashMap::new();
    let mut merged = 0;
    for u in topological_order(g) {
        let node = g.node(u);
        if !is_candidate(node) {
            continue;
        }
        let mut data = vec![(usize::MAX, 0); node.num_inputs()];
        let mut control = Vec::new();
        for e in g.in_edges(u) {
            if e.is_control() {
                control.push(class[e.src]);
            } else if let Some(slot) = data.get_mut(e.dst_input as usize) {
                *slot = (class[e.src], e.src_output);
            }
        }
        if node.op_def.is_commutative {
            data.sort_unstable();
        }
        control.sort_unstable();
        control.dedup();
        let key = Key {
            data,
            control,
            frame: frames.frame_of[u],
        };
        let bucket = buckets.entry(node_hash(node, &key)).or_default();
        let found = bucket.iter().copied().find(|&c| {
            let other = g.node(c);
            other.op() == node.op()
                && other.def.device == node.def.device
                && keys[c].as_ref() == Some(&key)
                && attrs_eq(&other.def, &node.def)
        });
        match found {
            Some(c) if !(protected[u] && protected[survivor[c]]) => {
                class[u] = c;
                if protected[u] {
                    survivor[c] = u;
                }
                merged += 1;
            }
            // Two protected nodes: both stay, the first one numbers the class.
            Some(_) => {}
            None => {
                bucket.push(u);
                keys[u] = Some(key);
            }
        }
    }
    if merged == 0 {
        return unchanged();
    }
    let name_of = |src: NodeId| g.node(survivor[class[src]]).name();
    let mut nodes = Vec::with_capacity(n - merged);
    for (u, node) in g.nodes().iter().enumerate() {
        if survivor[class[u]] != u {
            continue;
        }
        let mut def = node.def.clone();
        let mut input = Vec::with_capacity(def.input.len());
        for i in 0..node.num_inputs() {
            match g.data_input(u, i) {
                Some(e) if e.src_output == 0 => input.push(name_of(e.src).to_owned()),
                Some(e) => input.push(format!("{}:{}", name_of(e.src), e.src_output)),
                None => input.extend(def.input.get(i).cloned()),
            }
        }
        let mut seen = HashSet::new();
        for e in g.in_edges(u).filter(|e| e.is_control()) {
            let src = name_of(e.src);
            if seen.insert(src) {
                input.push(format!("^{src}"));
            }
        }
        def.input = input;
        nodes.push(def);
    }
    CseOutcome { nodes, merged }
}
