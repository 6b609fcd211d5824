//! Rewrites a session's graph for one step signature (TensorFlow's
//! `subgraph::RewriteGraphForExecution`): each fed tensor is replaced by an `_Arg`
//! node whose index is the feed's position, each fetch gets a `_Retval` whose index
//! is the fetch's position, and the graph is pruned to the nodes the fetches and
//! targets need, walking backwards and stopping at fed tensors.

use std::collections::{HashMap, HashSet};

use crate::node_def::TensorId;
use crate::{DType, Graph, NodeDef, Result, Shape, Status};

/// A fed tensor, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedSpec {
    /// The tensor name as given.
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// The shape a fed value must have (from a `Placeholder`'s `shape`), if declared.
    pub shape: Shape,
}

/// The rewritten graph of one step.
#[derive(Clone, Debug)]
pub struct StepGraph {
    /// Its nodes.
    pub nodes: Vec<NodeDef>,
    /// Feeds, by `_Arg` index.
    pub feeds: Vec<FeedSpec>,
    /// Fetch names, by `_Retval` index.
    pub fetches: Vec<String>,
}

/// Parses a feed or fetch name (`node` means `node:0`) and checks it names an output
/// of `g`: `NotFound` for an unknown node, `InvalidArgument` for a bad port.
pub fn resolve_tensor<'a>(g: &Graph, name: &'a str, what: &str) -> Result<(usize, TensorId<'a>)> {
    let t = TensorId::parse(name)?;
    if t.is_control() {
        return Err(Status::invalid_argument(format!(
            "{what} '{name}' must name a tensor, not a control input"
        )));
    }
    let id = g.find(t.node).ok_or_else(|| {
        Status::not_found(format!(
            "{what} '{name}' names node '{}', which is not in the graph",
            t.node
        ))
    })?;
    if t.port as usize >= g.node(id).num_outputs() {
        return Err(Status::invalid_argument(format!(
            "{what} '{name}': node '{}' has {} outputs",
            t.node,
            g.node(id).num_outputs()
        ))
        .with_node(t.node));
    }
    Ok((id, t))
}

/// `base`, or `base_1`, `base_2`, …: the first name neither a node of `g` nor
/// one already made (`made`) has.
fn fresh(g: &Graph, made: &mut HashSet<String>, base: String) -> String {
    let mut n = base.clone();
    let mut i = 1;
    while g.find(&n).is_some() || !made.insert(n.clone()) {
        n = format!("{base}_{i}");
        i += 1;
    }
    n
}

/// Rewrites and prunes `g` for this signature; see the module docs.
pub fn rewrite_for_step(
    g: &Graph,
    feeds: &[&str],
    fetches: &[&str],
    targets: &[&str],
) -> Result<StepGraph> {
    let mut used: HashSet<String> = HashSet::new();
    // Fed tensors.
    let mut fed: HashMap<(usize, i32), String> = HashMap::new();
    let mut feed_specs = Vec::new();
    let mut arg_nodes = Vec::new();
    for (i, &f) in feeds.iter().enumerate() {
        let (id, t) = resolve_tensor(g, f, "feed")?;
        if fed.contains_key(&(id, t.port)) {
            return Err(Status::invalid_argument(format!(
                "tensor '{f}' is fed more than once"
            )));
        }
        let node = g.node(id);
        let ty = node.sig.outputs[t.port as usize];
        let shape = if node.op() == "Placeholder" || node.op() == "PlaceholderWithDefault" {
            node.def.get_attr::<Shape>("shape").unwrap_or_default()
        } else {
            Shape::unknown()
        };
        let arg = fresh(g, &mut used, format!("_arg_{}_{}", t.node, t.port));
        fed.insert((id, t.port), arg.clone());
        arg_nodes.push(
            NodeDef::new(arg, "_Arg")
                .with_attr("T", ty.dtype)
                .with_attr("index", i as i64),
        );
        feed_specs.push(FeedSpec {
            name: f.to_owned(),
            dtype: ty.dtype,
            shape,
        });
    }
    // Fetches and targets: the roots of the backward walk.
    let mut keep = vec![false; g.num_nodes()];
    let mut stack = Vec::new();
    let mut retvals = Vec::new();
    for (i, &f) in fetches.iter().enumerate() {
        let (id, t) = resolve_tensor(g, f, "fetch")?;
        let node = g.node(id);
        let src = match fed.get(&(id, t.port)) {
            Some(arg) => arg.clone(),
            None => {
                stack.push(id);
                if t.port == 0 {
                    t.node.to_owned()
                } else {
                    format!("{}:{}", t.node, t.port)
                }
            }
        };
        let name = fresh(g, &mut used, format!("_retval_{}_{}_{i}", t.node, t.port));
        retvals.push(
            NodeDef::new(name, "_Retval")
                .with_input(src)
                .with_attr("T", node.sig.outputs[t.port as usize].dtype)
                .with_attr("index", i as i64),
        );
    }
    for &tname in targets {
        let name = tname.strip_prefix('^').unwrap_or(tname);
        let id = g
            .find(name)
            .ok_or_else(|| Status::not_found(format!("target '{tname}' is not in the graph")))?;
        stack.push(id);
    }
    while let Some(u) = stack.pop() {
        if keep[u] {
            continue;
        }
        keep[u] = true;
        for e in g.in_edges(u) {
            if !e.is_control() && fed.contains_key(&(e.src, e.src_output)) {
                continue;
            }
            if !keep[e.src] {
                stack.push(e.src);
            }
        }
    }
    let mut nodes = Vec::with_capacity(keep.iter().filter(|&&k| k).count());
    for (id, n) in g.nodes().iter().enumerate() {
        if !keep[id] {
            continue;
        }
        if fed.is_empty() {
            nodes.push(n.def.clone());
            continue;
        }
        let mut data_index = 0;
        let mut rewired = Vec::with_capacity(n.def.input.len());
        for s in &n.def.input {
            let t = TensorId::parse(s)?;
            if t.is_control() {
                rewired.push(s.clone());
                continue;
            }
            let e = g
                .data_input(id, data_index)
                .ok_or_else(|| Status::internal("missing data edge").with_node(n.name()))?;
            match fed.get(&(e.src, e.src_output)) {
                Some(arg) => rewired.push(arg.clone()),
                None => rewired.push(s.clone()),
            }
            data_index += 1;
        }
        nodes.push(NodeDef {
            name: n.def.name.clone(),
            op: n.def.op.clone(),
            input: rewired,
            device: n.def.device.clone(),
            attr: n.def.attr.clone(),
        });
    }
    // Only the _Args a kept node reads (or a fetch returns) are needed.
    let mut read = vec![false; arg_nodes.len()];
    if !arg_nodes.is_empty() {
        let index: HashMap<&str, usize> = arg_nodes
            .iter()
            .enumerate()
            .map(|(i, a)| (a.name.as_str(), i))
            .collect();
        for input in nodes.iter().chain(retvals.iter()).flat_map(|n| &n.input) {
            if let Some(&i) = index.get(input.as_str()) {
                read[i] = true;
            }
        }
    }
    let mut out: Vec<NodeDef> = Vec::with_capacity(arg_nodes.len() + nodes.len() + retvals.len());
    out.extend(
        arg_nodes
            .into_iter()
            .zip(read)
            .filter_map(|(a, read)| read.then_some(a)),
    );
    out.extend(nodes);
    out.extend(retvals);
    Ok(StepGraph {
        nodes: out,
        feeds: feed_specs,
        fetches: fetches.iter().map(|s| s.to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Scope;
    use crate::{ops, Code, OpRegistry, Tensor};

    #[test]
    fn prunes_and_rewires_feeds() {
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
        let c = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        let y = ops::add(&s, &x, &c).unwrap();
        let unused = ops::mul(&s, &c, &c).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let sg = rewrite_for_step(&g, &[&x.name()], &[&y.name()], &[]).unwrap();
        let names: Vec<&str> = sg.nodes.iter().map(|n| n.name.as_str()).collect();
        assert!(names.contains(&"_arg_Placeholder_0"));
        assert!(
            !names.contains(&"Placeholder"),
            "the fed placeholder is cut off"
        );
        assert!(!names.contains(&unused.op().name()));
        assert_eq!(sg.feeds[0].shape, Shape::known(&[2]));
        let add = sg.nodes.iter().find(|n| n.op == "AddV2").unwrap();
        assert_eq!(add.input[0], "_arg_Placeholder_0");
        assert!(Graph::from_graph_def(
            &crate::GraphDef {
                node: sg.nodes,
                ..Default::default()
            },
            OpRegistry::global()
        )
        .is_ok());
    }

    #[test]
    fn bad_names_are_errors() {
        let s = Scope::new();
        let c = ops::constant(&s, Tensor::scalar(1.0f32)).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        assert_eq!(
            rewrite_for_step(&g, &[], &["nope:0"], &[])
                .unwrap_err()
                .code(),
            Code::NotFound
        );
        assert_eq!(
            rewrite_for_step(&g, &[], &["Const:3"], &[])
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
        assert_eq!(
            rewrite_for_step(&g, &["zz"], &[], &[]).unwrap_err().code(),
            Code::NotFound
        );
        assert_eq!(
            rewrite_for_step(&g, &[], &[], &["zz"]).unwrap_err().code(),
            Code::NotFound
        );
        let n = c.name();
        assert!(rewrite_for_step(&g, &[&n, &n], &[], &[]).is_err());
        // fetching a fed tensor returns the feed
        let sg = rewrite_for_step(&g, &[&n], &[&n], &[]).unwrap();
        assert_eq!(sg.nodes.len(), 2);
    }
}
