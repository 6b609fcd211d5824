//! Constant folding (TensorFlow's `common_runtime/constant_folding.cc`): the nodes
//! whose value is known at step build are evaluated once, on the CPU, and every
//! tensor that leaves that constant subgraph is replaced by a `Const`.
//!
//! A node is *constant* (in TensorFlow's words, constant foldable) when it is a
//! `Const`; or a `Shape`/`ShapeN`/`Size`/`Rank` whose input shapes are known
//! statically (shape inference over the step, fed `_Arg`s at the shape the runtime
//! checks them against; not through a `Switch`, not downstream of a loop's `Merge`,
//! whose shape inference assumes loop-invariant shapes); or any other node with at
//! least one data input, all of them constant, that is not stateful, asynchronous,
//! control flow, a transfer, an `_Arg`/`_Retval` or a placeholder, reads no files
//! (`MatchingFiles`, `ReadFile`), takes and gives no references or resources,
//! calls no function, has a CPU kernel the
//! [`NodeEvaluator`] runs, and has no statically known output larger than the
//! limit. Control inputs from other nodes are allowed, as in TensorFlow: they are
//! carried over to the replacing `Const` (a shape op's data input becomes one too),
//! so the `Const` runs in the same loop frame, after the same nodes, and is dead
//! exactly when the folded node would have been.
//!
//! Replacement: each output port of a non-`Const` constant node that a
//! non-constant node reads becomes one `Const` on the folded node's device, unless
//! its value is larger than the limit or that device has no `Const` kernel for it.
//! Names: the lowest such port's `Const` takes the folded node's name (so fetches
//! and targets by name, placement and step stats keep it); any other port `p` gets
//! `<node>/__cf__<p>` (TensorFlow's are `<node>/_<n>__cf__<n>`). A constant node
//! still needed as it is (a port that could not be replaced, a control consumer
//! with nothing replacing it) stays with its inputs, and then every port's `Const`
//! takes the `__cf__` name. Constant nodes no longer read are removed.

use std::collections::HashSet;

use super::{NodeEvaluator, StepFacts};
use crate::passes::place::topological_order;
use crate::passes::shape_inference::infer_shapes_with;
use crate::{AttrValue, DType, Graph, Node, NodeDef, NodeId, Result, Shape, Tensor};

/// Options of [`fold_constants`].
#[derive(Clone, Copy, Debug)]
pub struct FoldOptions {
    /// Values larger than this are not turned into `Const`s (nor computed, when
    /// shape inference already knows them to be larger).
    pub max_constant_size_in_bytes: usize,
}

/// The result of [`fold_constants`].
#[derive(Clone, Debug)]
pub struct FoldOutcome {
    /// The step's nodes after the pass; empty when it replaced nothing.
    pub nodes: Vec<NodeDef>,
    /// Non-`Const` nodes replaced and removed.
    pub folded: usize,
    /// `Const`s inserted.
    pub replaced: usize,
}

/// Whether `n` may be evaluated at build (besides having constant inputs).
fn is_foldable(n: &Node, evaluator: &dyn NodeEvaluator) -> bool {
    let plain = |t: &crate::DataType| !t.is_ref && t.dtype != DType::Resource;
    !n.op_def.is_stateful
        && !n.op_def.is_async
        && !super::is_structural(n.op())
        && !reads_the_outside_world(n.op())
        && n.num_inputs() > 0
        && n.sig.inputs.iter().all(plain)
        && n.sig.outputs.iter().all(plain)
        && !n.def.attr.values().any(|v| match v {
            AttrValue::Func(_) => true,
            AttrValue::List(l) => !l.func.is_empty(),
            _ => false,
        })
        && evaluator.can_evaluate(n)
}

/// Whether `u` could be the first node folded: a shape op (its value may come
/// from shapes alone), or a foldable node whose data inputs are all `Const`s.
/// Every folded node is one of these or reads only folded nodes, so a graph
/// without one has nothing to fold, and the pass skips the shape inference.
fn may_start_folding(g: &Graph, u: NodeId, evaluator: &dyn NodeEvaluator) -> bool {
    let node = g.node(u);
    match node.op() {
        "Const" => false,
        "Shape" | "ShapeN" | "Size" | "Rank" => true,
        _ => {
            g.in_edges(u)
                .filter(|e| !e.is_control())
                .all(|e| g.node(e.src).op() == "Const")
                && is_foldable(node, evaluator)
        }
    }
}

/// Ops that declare no state but read files, whose answers may change between
/// steps: evaluated at run time, never at build.
fn reads_the_outside_world(op: &str) -> bool {
    matches!(op, "MatchingFiles" | "ReadFile")
}

/// Whether a statically known output of `n` is larger than `max` bytes.
fn known_too_large(n: &Node, shapes: &[Shape], max: usize) -> bool {
    shapes.iter().zip(&n.sig.outputs).any(|(s, t)| {
        s.num_elements()
            .is_some_and(|e| e.saturating_mul(t.dtype.size()) > max)
    })
}

/// A shape as the `out_type` vector `Shape` gives, or `None` when a dimension does
/// not fit.
fn shape_tensor(dims: &[usize], out: DType) -> Option<Tensor> {
    match out {
        DType::I32 => {
            let v: Option<Vec<i32>> = dims.iter().map(|&d| i32::try_from(d).ok()).collect();
            Some(Tensor::vector(&v?))
        }
        DType::I64 => {
            let v: Option<Vec<i64>> = dims.iter().map(|&d| i64::try_from(d).ok()).collect();
            Some(Tensor::vector(&v?))
        }
        _ => None,
    }
}

fn count_tensor(n: usize, out: DType) -> Option<Tensor> {
    match out {
        DType::I32 => i32::try_from(n).ok().map(Tensor::scalar),
        DType::I64 => i64::try_from(n).ok().map(Tensor::scalar),
        _ => None,
    }
}

/// The outputs of the shape op `n` from its inputs' static shapes, if known.
fn shape_op_value(n: &Node, inputs: &[&Shape]) -> Option<Vec<Tensor>> {
    let out = n.sig.outputs.first()?.dtype;
    let full = |s: &Shape| s.to_tensor_shape();
    match n.op() {
        "Shape" => Some(vec![shape_tensor(full(inputs.first()?)?.dims(), out)?]),
        "ShapeN" => inputs
            .iter()
            .map(|s| shape_tensor(full(s)?.dims(), out))
            .collect(),
        "Size" => Some(vec![count_tensor(
            full(inputs.first()?)?.num_elements(),
            out,
        )?]),
        "Rank" => Some(vec![count_tensor(inputs.first()?.rank()?, out)?]),
        _ => None,
    }
}

/// For every node, whether its statically inferred shapes may be wrong: it is (or
/// reads, through data edges) a loop `Merge`, whose shape inference ignores the
/// back edge and so assumes each loop variable keeps its initial shape.
fn loop_dependent(g: &Graph, order: &[NodeId]) -> Vec<bool> {
    let mut bad = vec![false; g.num_nodes()];
    for &u in order {
        let n = g.node(u);
        let loop_merge = matches!(n.op(), "Merge" | "RefMerge")
            && g.in_edges(u)
                .any(|e| matches!(g.node(e.src).op(), "NextIteration" | "RefNextIteration"));
        bad[u] = loop_merge
            || g.in_edges(u)
                .any(|e| !e.is_control() && bad[e.src] && !is_back_edge(g, e.src));
    }
    bad
}

fn is_back_edge(g: &Graph, src: NodeId) -> bool {
    matches!(g.node(src).op(), "NextIteration" | "RefNextIteration")
}

/// Folds the constant subgraphs of `g`; see the module docs. Evaluation failures
/// are not errors: the node is left to fail (or not) at run time.
pub fn fold_constants(
    g: &Graph,
    options: &FoldOptions,
    facts: &StepFacts<'_>,
) -> Result<FoldOutcome> {
    let n = g.num_nodes();
    let unchanged = || FoldOutcome {
        nodes: Vec::new(),
        folded: 0,
        replaced: 0,
    };
    if !(0..n).any(|u| may_start_folding(g, u, facts.evaluator)) {
        return Ok(unchanged());
    }
    let max = options.max_constant_size_in_bytes;
    let order = topological_order(g);
    let shapes = infer_shapes_with(g, &|u| {
        let node = g.node(u);
        if node.op() != "_Arg" {
            return None;
        }
        let i = node.def.get_attr::<i64>("index").ok()?;
        Some(vec![facts
            .arg_shapes
            .get(usize::try_from(i).ok()?)?
            .clone()])
    });
    let unreliable = loop_dependent(g, &order);
    // values[u]: the outputs of constant node u; deps[u]: the non-constant nodes
    // its replacement must wait for (sorted, deduplicated).
    let mut values: Vec<Option<Vec<Tensor>>> = vec![None; n];
    let mut deps: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    let mut internal = false;
    for &u in &order {
        let node = g.node(u);
        let value = if node.op() == "Const" {
            if node.sig.outputs.iter().any(|t| t.dtype == DType::Resource) {
                continue;
            }
            match node.def.get_attr::<Tensor>("value") {
                Ok(t) => vec![t],
                Err(_) => continue,
            }
        } else if let Some(v) = shape_value(g, u, &shapes, &unreliable) {
            v
        } else {
            let mut inputs = Vec::with_capacity(node.num_inputs());
            for i in 0..node.num_inputs() {
                let Some(e) = g.data_input(u, i) else { break };
                match values[e.src]
                    .as_ref()
                    .and_then(|v| v.get(e.src_output as usize))
                {
                    Some(t) => inputs.push(t.clone()),
                    None => break,
                }
            }
            if inputs.len() != node.num_inputs()
                || known_too_large(node, &shapes[u], max)
                || !is_foldable(node, facts.evaluator)
            {
                continue;
            }
            match facts.evaluator.evaluate(node, &inputs) {
                Ok(outs) if outs.len() == node.num_outputs() => outs,
                _ => continue,
            }
        };
        let mut d = Vec::new();
        for e in g.in_edges(u) {
            if values[e.src].is_some() {
                d.extend_from_slice(&deps[e.src]);
            } else {
                d.push(e.src);
            }
        }
        d.sort_unstable();
        d.dedup();
        deps[u] = d;
        values[u] = Some(value);
        internal |= node.op() != "Const";
    }
    if !internal {
        return Ok(unchanged());
    }
    let is_const = |u: NodeId| values[u].is_some();
    // Ports replaced by a Const, per constant node.
    let mut ports: Vec<Vec<i32>> = vec![Vec::new(); n];
    let mut needed = vec![false; n];
    let protected = super::protected_names(g, facts.keep);
    for u in (0..n).filter(|&u| is_const(u) && g.node(u).op() != "Const") {
        let node = g.node(u);
        let mut p: Vec<i32> = g
            .out_edges(u)
            .filter(|e| !e.is_control() && !is_const(e.dst))
            .map(|e| e.src_output)
            .collect();
        p.sort_unstable();
        p.dedup();
        for &port in &p {
            let ok = values[u]
                .as_ref()
                .and_then(|v| v.get(port as usize))
                .is_some_and(|t| {
                    t.byte_size() <= max
                        && facts
                            .evaluator
                            .supports_const(&const_def(node.name(), node, t, &[]))
                });
            if ok {
                ports[u].push(port);
            } else {
                needed[u] = true;
            }
        }
        let control_consumer = g.out_edges(u).any(|e| e.is_control() && !is_const(e.dst));
        if ports[u].is_empty() && (control_consumer || protected.contains(node.name())) {
            needed[u] = true;
        }
    }
    // A Const node read by a non-constant node stays; so do the inputs of every
    // constant node that stays.
    for u in (0..n).filter(|&u| is_const(u) && g.node(u).op() == "Const") {
        if g.out_edges(u).any(|e| !is_const(e.dst)) || protected.contains(g.node(u).name()) {
            needed[u] = true;
        }
    }
    let mut stack: Vec<NodeId> = (0..n).filter(|&u| needed[u]).collect();
    while let Some(u) = stack.pop() {
        for e in g.in_edges(u) {
            if is_const(e.src) && !needed[e.src] {
                needed[e.src] = true;
                stack.push(e.src);
            }
        }
    }
    if (0..n).all(|u| ports[u].is_empty()) {
        return Ok(unchanged());
    }
    // Names of the Consts, per (node, port).
    let mut used: HashSet<String> = g.nodes().iter().map(|x| x.def.name.clone()).collect();
    let mut const_name: Vec<Vec<(i32, String)>> = vec![Vec::new(); n];
    for u in 0..n {
        let name = g.node(u).name();
        for (k, &port) in ports[u].iter().enumerate() {
            let cname = if k == 0 && !needed[u] {
                name.to_owned()
            } else {
                fresh(&mut used, format!("{name}/__cf__{port}"))
            };
            const_name[u].push((port, cname));
        }
    }
    let lookup = |u: NodeId, port: i32| -> Option<&str> {
        const_name[u]
            .iter()
            .find(|(p, _)| *p == port)
            .map(|(_, s)| s.as_str())
    };
    let mut nodes = Vec::with_capacity(n);
    let mut folded = 0;
    let mut replaced = 0;
    for (u, node) in g.nodes().iter().enumerate() {
        if is_const(u) {
            if needed[u] {
                nodes.push(node.def.clone());
            } else if node.op() != "Const" {
                folded += 1;
            }
            let control: Vec<&str> = deps[u].iter().map(|&d| g.node(d).name()).collect();
            for (port, cname) in &const_name[u] {
                let value = values[u].as_ref().and_then(|v| v.get(*port as usize));
                if let Some(t) = value {
                    nodes.push(const_def(cname, node, t, &control));
                    replaced += 1;
                }
            }
            continue;
        }
        let mut def = node.def.clone();
        for i in 0..node.num_inputs() {
            let Some(e) = g.data_input(u, i) else {
                continue;
            };
            if let (Some(c), Some(slot)) = (lookup(e.src, e.src_output), def.input.get_mut(i)) {
                *slot = c.to_owned();
            }
        }
        nodes.push(def);
    }
    Ok(FoldOutcome {
        nodes,
        folded,
        replaced,
    })
}

/// The outputs of node `u` when it is a shape op over reliable, known shapes.
fn shape_value(
    g: &Graph,
    u: NodeId,
    shapes: &[Vec<Shape>],
    unreliable: &[bool],
) -> Option<Vec<Tensor>> {
    let node = g.node(u);
    if !matches!(node.op(), "Shape" | "ShapeN" | "Size" | "Rank") {
        return None;
    }
    let mut inputs = Vec::with_capacity(node.num_inputs());
    for i in 0..node.num_inputs() {
        let e = g.data_input(u, i)?;
        let src = g.node(e.src);
        if unreliable[e.src] || matches!(src.op(), "Switch" | "RefSwitch" | "_SwitchN") {
            return None;
        }
        inputs.push(shapes[e.src].get(e.src_output as usize)?);
    }
    shape_op_value(node, &inputs)
}

/// A `Const` named `name` holding `value`, on `of`'s device, waiting for `control`.
fn const_def(name: &str, of: &Node, value: &Tensor, control: &[&str]) -> NodeDef {
    let mut def = NodeDef::new(name, "Const")
        .with_attr("dtype", value.dtype())
        .with_attr("value", value.clone())
        .with_device(of.def.device.clone());
    def.input = control.iter().map(|c| format!("^{c}")).collect();
    def
}

fn fresh(used: &mut HashSet<String>, base: String) -> String {
    let mut name = base.clone();
    let mut i = 1;
    while !used.insert(name.clone()) {
        name = format!("{base}_{i}");
        i += 1;
    }
    name
}
