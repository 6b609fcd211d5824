//! [`Graph`]: a validated, indexed graph. Nodes get dense ids; data and control
//! edges are explicit [`Edge`]s listed per node in both directions, so passes walk
//! the graph without parsing input strings. Built from a [`GraphDef`]: every node is
//! checked against its [`OpDef`] (defaults filled in), every input must name an
//! existing node and port, and edge types must agree.

use std::collections::HashMap;
use std::sync::Arc;

use crate::node_def::{TensorId, CONTROL_PORT};
use crate::op_def::{NodeSignature, OpDef, OpRegistry};
use crate::{DataType, GraphDef, NodeDef, Result, Status};

/// Dense index of a node in a [`Graph`].
pub type NodeId = usize;

/// An edge. Control edges have `src_output == dst_input == CONTROL_PORT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Edge {
    /// Producer.
    pub src: NodeId,
    /// Producer's output index, or [`CONTROL_PORT`].
    pub src_output: i32,
    /// Consumer.
    pub dst: NodeId,
    /// Consumer's input index, or [`CONTROL_PORT`].
    pub dst_input: i32,
}

impl Edge {
    /// True for a control edge.
    pub fn is_control(&self) -> bool {
        self.src_output == CONTROL_PORT
    }
}

/// A node of a [`Graph`].
#[derive(Clone, Debug)]
pub struct Node {
    /// Its definition, attributes defaults filled in.
    pub def: NodeDef,
    /// Its op's definition.
    pub op_def: Arc<OpDef>,
    /// Its resolved edge types.
    pub sig: NodeSignature,
    in_edges: Vec<usize>,
    out_edges: Vec<usize>,
}

impl Node {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The op's name.
    pub fn op(&self) -> &str {
        &self.def.op
    }

    /// The number of data inputs.
    pub fn num_inputs(&self) -> usize {
        self.sig.inputs.len()
    }

    /// The number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.sig.outputs.len()
    }

    /// The type of output `i`.
    pub fn output_type(&self, i: usize) -> Option<DataType> {
        self.sig.outputs.get(i).copied()
    }
}

/// A validated, indexed graph. See the module docs.
///
/// # Examples
/// ```
/// use actorflow_graph::{DType, Graph, GraphDef, NodeDef, OpRegistry, Tensor};
/// let gd = GraphDef {
///     node: vec![
///         NodeDef::new("c", "Const").with_attr("dtype", DType::F32).with_attr("value", Tensor::scalar(1.0f32)),
///         NodeDef::new("n", "Identity").with_input("c").with_attr("T", DType::F32),
///     ],
///     ..Default::default()
/// };
/// let g = Graph::from_graph_def(&gd, OpRegistry::global()).unwrap();
/// let n = g.find("n").unwrap();
/// assert_eq!(g.data_input(n, 0).unwrap().src, g.find("c").unwrap());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    /// Seeded per process (a graph may come from a peer), and fast.
    by_name: HashMap<String, NodeId, foldhash::fast::RandomState>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Validates and indexes a `GraphDef`. Nodes may appear in any order; the first
    /// problem found is returned, naming its node.
    pub fn from_graph_def(gd: &GraphDef, registry: &OpRegistry) -> Result<Graph> {
        let mut g = Graph::new();
        g.extend(&gd.node, registry)?;
        Ok(g)
    }

    /// [`from_graph_def`](Self::from_graph_def) of nodes the caller gives up: they
    /// become the graph's without a copy.
    pub fn from_nodes(nodes: Vec<NodeDef>, registry: &OpRegistry) -> Result<Graph> {
        let mut g = Graph::new();
        g.nodes.reserve_exact(nodes.len());
        g.by_name.reserve(nodes.len());
        g.extend_in_place(nodes, registry)?;
        Ok(g)
    }

    /// Adds nodes whose inputs name nodes already present or among `defs`. On error
    /// the graph is unchanged.
    pub fn extend(&mut self, defs: &[NodeDef], registry: &OpRegistry) -> Result<()> {
        let (nodes, edges) = (self.nodes.len(), self.edges.len());
        self.nodes.reserve(defs.len());
        self.by_name.reserve(defs.len());
        self.extend_in_place(defs.iter().cloned(), registry)
            .inspect_err(|_| self.truncate(nodes, edges))
    }

    /// Takes the graph back to its first `nodes` nodes and `edges` edges, undoing
    /// an extension that failed (the nodes it added are the last ones, their edges
    /// the last edges, pushed last onto their sources' out-edge lists).
    fn truncate(&mut self, nodes: usize, edges: usize) {
        for n in self.nodes.drain(nodes..) {
            self.by_name.remove(&n.def.name);
        }
        for e in self.edges.drain(edges..) {
            if let Some(src) = self.nodes.get_mut(e.src) {
                while src.out_edges.last().is_some_and(|&x| x >= edges) {
                    src.out_edges.pop();
                }
            }
        }
    }

    fn extend_in_place(
        &mut self,
        defs: impl IntoIterator<Item = NodeDef>,
        registry: &OpRegistry,
    ) -> Result<()> {
        let first = self.nodes.len();
        for mut def in defs {
            if def.name.is_empty() {
                return Err(Status::invalid_argument("a node has an empty name"));
            }
            let op_def = registry
                .lookup(&def.op)
                .map_err(|e| e.with_node(&def.name))?;
            let sig = op_def.validate(&mut def)?;
            let id = self.nodes.len();
            match self.by_name.entry(def.name.clone()) {
                std::collections::hash_map::Entry::Occupied(_) => {
                    return Err(Status::invalid_argument(format!(
                        "duplicate node name '{}'",
                        def.name
                    ))
                    .with_node(&def.name))
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(id);
                }
            }
            self.nodes.push(Node {
                def,
                op_def,
                sig,
                in_edges: vec![],
                out_edges: vec![],
            });
        }
        for id in first..self.nodes.len() {
            let inputs = std::mem::take(&mut self.nodes[id].def.input);
            let linked = self.link_inputs(id, &inputs);
            self.nodes[id].def.input = inputs;
            linked?;
        }
        Ok(())
    }

    /// Adds the edges into node `id` that its `inputs` name.
    fn link_inputs(&mut self, id: NodeId, inputs: &[String]) -> Result<()> {
        let mut data_index = 0;
        self.nodes[id].in_edges.reserve_exact(inputs.len());
        for s in inputs {
            let t = TensorId::parse(s).map_err(|e| e.with_node(self.nodes[id].name()))?;
            let src = self.find(t.node).ok_or_else(|| {
                Status::invalid_argument(format!("input '{s}' names no node in the graph"))
                    .with_node(self.nodes[id].name())
            })?;
            if t.is_control() {
                self.add_edge(src, CONTROL_PORT, id, CONTROL_PORT);
                continue;
            }
            let Some(&in_t) = self.nodes[id].sig.inputs.get(data_index) else {
                return Err(Status::invalid_argument(format!(
                    "input '{s}' is past the node's {} data inputs",
                    self.nodes[id].sig.inputs.len()
                ))
                .with_node(self.nodes[id].name()));
            };
            self.check_edge_type(src, t.port, self.nodes[id].name(), data_index, in_t, s)?;
            self.add_edge(src, t.port, id, data_index as i32);
            data_index += 1;
        }
        Ok(())
    }

    /// Adds one node whose inputs all name nodes already in the graph (the builder's
    /// path: no copy of the graph). On error the graph is unchanged.
    pub fn add_node(&mut self, def: NodeDef, registry: &OpRegistry) -> Result<NodeId> {
        let mut def = def;
        if def.name.is_empty() {
            return Err(Status::invalid_argument("a node has an empty name"));
        }
        if self.by_name.contains_key(&def.name) {
            return Err(
                Status::invalid_argument(format!("duplicate node name '{}'", def.name))
                    .with_node(&def.name),
            );
        }
        let op_def = registry
            .lookup(&def.op)
            .map_err(|e| e.with_node(&def.name))?;
        let sig = op_def.validate(&mut def)?;
        let mut edges = Vec::with_capacity(def.input.len());
        let mut data_index = 0;
        for s in &def.input {
            let t = TensorId::parse(s).map_err(|e| e.with_node(&def.name))?;
            let src = self.find(t.node).ok_or_else(|| {
                Status::invalid_argument(format!("input '{s}' names no node in the graph"))
                    .with_node(&def.name)
            })?;
            if t.is_control() {
                edges.push((src, CONTROL_PORT, CONTROL_PORT));
                continue;
            }
            self.check_edge_type(
                src,
                t.port,
                &def.name,
                data_index,
                sig.inputs[data_index],
                s,
            )?;
            edges.push((src, t.port, data_index as i32));
            data_index += 1;
        }
        let id = self.nodes.len();
        self.by_name.insert(def.name.clone(), id);
        self.nodes.push(Node {
            def,
            op_def,
            sig,
            in_edges: vec![],
            out_edges: vec![],
        });
        for (src, port, input) in edges {
            self.add_edge(src, port, id, input);
        }
        Ok(id)
    }

    /// Rewires data input `input` of `dst` to come from `src:src_output` (the builder
    /// uses it to close a loop's back edge into `Merge`, as TensorFlow's
    /// `_update_input` does).
    pub fn replace_input(
        &mut self,
        dst: NodeId,
        input: usize,
        src: NodeId,
        src_output: i32,
    ) -> Result<()> {
        let name = self.nodes[dst].def.name.clone();
        let in_t = *self.nodes[dst].sig.inputs.get(input).ok_or_else(|| {
            Status::invalid_argument(format!("node has no input {input}")).with_node(&name)
        })?;
        let src_name = self.nodes[src].def.name.clone();
        let label = format!("{src_name}:{src_output}");
        self.check_edge_type(src, src_output, &name, input, in_t, &label)?;
        let pos = self.nodes[dst]
            .in_edges
            .iter()
            .position(|&e| self.edges[e].dst_input == input as i32)
            .ok_or_else(|| Status::internal("data edge missing").with_node(&name))?;
        let e = self.nodes[dst].in_edges[pos];
        let old_src = self.edges[e].src;
        self.nodes[old_src].out_edges.retain(|&x| x != e);
        self.edges[e].src = src;
        self.edges[e].src_output = src_output;
        self.nodes[src].out_edges.push(e);
        let text = if src_output == 0 { src_name } else { label };
        let mut data_index = 0;
        for s in self.nodes[dst].def.input.iter_mut() {
            if s.starts_with('^') {
                continue;
            }
            if data_index == input {
                *s = text;
                break;
            }
            data_index += 1;
        }
        Ok(())
    }

    fn check_edge_type(
        &self,
        src: NodeId,
        port: i32,
        dst_name: &str,
        data_index: usize,
        in_t: DataType,
        label: &str,
    ) -> Result<()> {
        let out_t = self.nodes[src].output_type(port as usize).ok_or_else(|| {
            Status::invalid_argument(format!(
                "input '{label}': node '{}' has {} outputs",
                self.nodes[src].name(),
                self.nodes[src].num_outputs()
            ))
            .with_node(dst_name)
        })?;
        if !out_t.can_feed(in_t) {
            return Err(Status::invalid_argument(format!(
                "input {data_index} of node '{dst_name}' was passed {out_t} from {label} incompatible with expected {in_t}"
            ))
            .with_node(dst_name));
        }
        Ok(())
    }

    fn add_edge(&mut self, src: NodeId, src_output: i32, dst: NodeId, dst_input: i32) {
        let e = self.edges.len();
        self.edges.push(Edge {
            src,
            src_output,
            dst,
            dst_input,
        });
        self.nodes[src].out_edges.push(e);
        self.nodes[dst].in_edges.push(e);
    }

    /// The number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// All nodes, indexed by [`NodeId`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Node `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// Node `id`, mutably (to set its device; edges cannot change this way).
    pub fn node_def_mut(&mut self, id: NodeId) -> &mut NodeDef {
        &mut self.nodes[id].def
    }

    /// All edges.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The id of the node with this name.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// Edges into `id` (data and control).
    pub fn in_edges(&self, id: NodeId) -> impl Iterator<Item = &Edge> + '_ {
        self.nodes[id].in_edges.iter().map(move |&e| &self.edges[e])
    }

    /// Edges out of `id` (data and control).
    pub fn out_edges(&self, id: NodeId) -> impl Iterator<Item = &Edge> + '_ {
        self.nodes[id]
            .out_edges
            .iter()
            .map(move |&e| &self.edges[e])
    }

    /// The data edge into input `i` of `id`.
    pub fn data_input(&self, id: NodeId, i: usize) -> Option<&Edge> {
        self.in_edges(id).find(|e| e.dst_input == i as i32)
    }

    /// For every node, whether its output may carry a variable reference: a reference
    /// output type, or an `Identity` (which forwards references unread) fed by such a
    /// node. Identity chains are acyclic (a cycle must pass a `NextIteration`), so the
    /// walk up an Identity chain ends. The executor forwards such references and the
    /// placer keeps their readers with the variable, so that a read happens when the
    /// reader runs, after the control dependencies that order it with assignments.
    pub fn ref_carriers(&self) -> Vec<bool> {
        let g = self;
        let n = g.num_nodes();
        // 0 = unknown, 1 = no, 2 = yes
        let mut memo = vec![0u8; n];
        for start in 0..n {
            let mut chain = Vec::new();
            let mut id = start;
            let answer = loop {
                if memo[id] != 0 {
                    break memo[id] == 2;
                }
                let node = g.node(id);
                if node.sig.outputs.iter().any(|t| t.is_ref) {
                    memo[id] = 2;
                    break true;
                }
                if node.op() != "Identity" {
                    memo[id] = 1;
                    break false;
                }
                match g.in_edges(id).find(|e| !e.is_control()) {
                    Some(e) if !chain.contains(&e.src) && e.src != id => {
                        chain.push(id);
                        id = e.src;
                    }
                    _ => {
                        memo[id] = 1;
                        break false;
                    }
                }
            };
            for c in chain {
                memo[c] = if answer { 2 } else { 1 };
            }
        }
        memo.into_iter().map(|m| m == 2).collect()
    }

    /// The serialisable form (attributes with defaults filled in).
    pub fn to_graph_def(&self) -> GraphDef {
        GraphDef {
            node: self.nodes.iter().map(|n| n.def.clone()).collect(),
            ..Default::default()
        }
    }

    /// [`to_graph_def`](Self::to_graph_def), giving the nodes up instead of
    /// copying them.
    pub fn into_graph_def(self) -> GraphDef {
        GraphDef {
            node: self.into_nodes(),
            ..Default::default()
        }
    }

    /// The nodes' definitions, in id order, given up.
    pub fn into_nodes(self) -> Vec<NodeDef> {
        self.nodes.into_iter().map(|n| n.def).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Code, DType, Tensor};

    fn c(name: &str, v: f32) -> NodeDef {
        NodeDef::new(name, "Const")
            .with_attr("dtype", DType::F32)
            .with_attr("value", Tensor::scalar(v))
    }

    fn add(name: &str, a: &str, b: &str) -> NodeDef {
        NodeDef::new(name, "AddV2")
            .with_input(a)
            .with_input(b)
            .with_attr("T", DType::F32)
    }

    #[test]
    fn builds_edges_in_any_order() {
        let gd = GraphDef {
            node: vec![
                add("s", "a", "b:0"),
                c("a", 1.0),
                c("b", 2.0),
                NodeDef::new("n", "NoOp").with_input("^s"),
            ],
            ..Default::default()
        };
        let g = Graph::from_graph_def(&gd, OpRegistry::global()).unwrap();
        let s = g.find("s").unwrap();
        assert_eq!(g.in_edges(s).count(), 2);
        assert_eq!(g.data_input(s, 1).unwrap().src, g.find("b").unwrap());
        let n = g.find("n").unwrap();
        assert!(g.in_edges(n).all(Edge::is_control));
        assert_eq!(g.to_graph_def().node.len(), 4);
    }

    #[test]
    fn errors_name_the_node() {
        let reg = OpRegistry::global();
        let cases: Vec<(Vec<NodeDef>, &str, Code)> = vec![
            (
                vec![add("s", "a", "zz"), c("a", 1.0)],
                "names no node",
                Code::InvalidArgument,
            ),
            (
                vec![add("s", "a", "a:3"), c("a", 1.0)],
                "has 1 outputs",
                Code::InvalidArgument,
            ),
            (
                vec![NodeDef::new("u", "Bogus")],
                "not registered",
                Code::NotFound,
            ),
            (
                vec![c("a", 1.0), c("a", 2.0)],
                "duplicate",
                Code::InvalidArgument,
            ),
            (
                vec![
                    c("a", 1.0),
                    NodeDef::new("i", "Const")
                        .with_attr("dtype", DType::I32)
                        .with_attr("value", Tensor::scalar(1i32)),
                    add("s", "a", "i"),
                ],
                "incompatible with expected float32",
                Code::InvalidArgument,
            ),
        ];
        for (nodes, msg, code) in cases {
            let e = Graph::from_graph_def(
                &GraphDef {
                    node: nodes,
                    ..Default::default()
                },
                reg,
            )
            .unwrap_err();
            assert_eq!(e.code(), code, "{e}");
            assert!(e.message().contains(msg), "{e}");
            assert!(e.node().is_some(), "{e}");
        }
    }

    #[test]
    fn from_nodes_equals_from_graph_def() {
        let nodes = vec![add("s", "a", "b:0"), c("a", 1.0), c("b", 2.0)];
        let reg = OpRegistry::global();
        let g1 = Graph::from_graph_def(
            &GraphDef {
                node: nodes.clone(),
                ..Default::default()
            },
            reg,
        )
        .unwrap();
        let g2 = Graph::from_nodes(nodes, reg).unwrap();
        assert_eq!(g1.edges(), g2.edges());
        assert_eq!(g1.to_graph_def(), g2.clone().into_graph_def());
        assert_eq!(
            g2.into_nodes()[0].attr["T"],
            crate::AttrValue::Type(DType::F32)
        );
    }

    #[test]
    fn failed_extend_leaves_graph_unchanged() {
        let reg = OpRegistry::global();
        let mut g = Graph::from_graph_def(
            &GraphDef {
                node: vec![c("a", 1.0)],
                ..Default::default()
            },
            reg,
        )
        .unwrap();
        assert!(g
            .extend(&[c("b", 1.0), add("s", "a", "missing")], reg)
            .is_err());
        assert_eq!(g.num_nodes(), 1);
        assert!(g.find("b").is_none());
        // `s`'s first input linked an edge out of `a` before the second failed.
        assert_eq!(g.edges().len(), 0);
        assert_eq!(g.out_edges(0).count(), 0);
        g.extend(&[add("s", "a", "a")], reg).unwrap();
        assert_eq!(g.num_nodes(), 2);
        assert_eq!(g.out_edges(0).count(), 2);
        let s = g.find("s").unwrap();
        assert_eq!(g.in_edges(s).count(), 2);
    }
}
