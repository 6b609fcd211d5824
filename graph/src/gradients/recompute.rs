//! Gradients that recompute activations instead of keeping them (the
//! whitepaper's §4.1; gradient checkpointing, Chen et al. 2016, "Training Deep
//! Nets with Sublinear Memory Cost").
//!
//! [`recomputed_gradients`] takes, besides `ys` and `xs`, the tensors to keep —
//! the *checkpoints*, each depending on the one before it (a layer's output
//! every few layers, say). The backward pass is built segment by segment from the
//! top: the ops between two checkpoints are copied, the copies read the lower
//! checkpoint (and whatever else the originals read from outside the segment)
//! and wait, through a control edge, for the gradient arriving at the upper
//! checkpoint; that segment's gradients are then taken through the copies. The
//! forward pass therefore runs as before, but every activation inside a segment
//! is dead once the forward pass has used it: the backward pass recomputes the
//! segment when its turn comes. Peak memory falls from all the activations to the
//! checkpoints plus one segment's; the cost is a second forward pass through the
//! recomputed segments. The ops above the last checkpoint are differentiated as
//! they are (their activations are the last computed anyway).
//!
//! The answers equal [`gradients`](super::gradients)': the same kernels run on
//! the same inputs. Segments must be plain dataflow: a stateful op (a random
//! draw would differ when redrawn) or a control-flow node inside one is an
//! `InvalidArgument`/`Unimplemented` error naming it.

use std::collections::{HashMap, HashSet};

use crate::builder::{Operation, Output, Scope};
use crate::node_def::TensorId;
use crate::op_def::OpRegistry;
use crate::{Result, Status};

use super::{aggregate, gradients_impl, GradCall, Gradient};

/// The gradients of `sum(ys)` (weighted by `grad_ys`) with respect to `xs`, as
/// [`gradients`](super::gradients) gives them, with the activations between
/// `checkpoints` recomputed in the backward pass instead of kept from the
/// forward pass (see the module docs). `checkpoints` may come in any order but
/// must form a chain: each depends on another, and `ys` on all of them.
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, gradients, ops, DType, Shape};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
/// let h1 = ops::tanh(&s, &x).unwrap();
/// let h2 = ops::tanh(&s, &h1).unwrap();
/// let y = ops::mul(&s, &h2, &h2).unwrap();
/// // h1 is kept; tanh(h1) is recomputed when the backward pass reaches it
/// let g = gradients::recomputed_gradients(&s, &[y], &[x], &[h1], None).unwrap();
/// assert!(g[0].is_some());
/// ```
pub fn recomputed_gradients(
    s: &Scope,
    ys: &[Output],
    xs: &[Output],
    checkpoints: &[Output],
    grad_ys: Option<&[Output]>,
) -> Result<Vec<Option<Output>>> {
    let graph = Snapshot::of(s);
    let chain = graph.order_chain(checkpoints)?;
    for y in ys {
        if let Some(c) = chain.last() {
            if !graph.depends_on(y.op().name(), c.op().name()) {
                return Err(Status::invalid_argument(format!(
                    "'{}' does not depend on the checkpoint '{}'",
                    y.name(),
                    c.name()
                )));
            }
        }
    }
    graph.check_separates(ys, &chain)?;
    let stop = GradCall {
        stop_at_xs: true,
        ..GradCall::default()
    };
    // xs' gradients, summed over the segments that use them
    let mut total: Vec<Vec<Gradient>> = vec![Vec::new(); xs.len()];
    let mut take = |grads: &[Option<Gradient>]| {
        for (t, g) in total.iter_mut().zip(grads) {
            t.extend(g.iter().cloned());
        }
    };
    // Above the last checkpoint: as it is.
    let Some(top) = chain.last() else {
        return super::gradients(s, ys, xs, grad_ys);
    };
    let mut wrt: Vec<Output> = xs.to_vec();
    wrt.push(top.clone());
    let g = gradients_impl(s, ys, &wrt, grad_ys, stop)?;
    take(&g[..xs.len()]);
    let mut upper_grad = g[xs.len()].clone();
    // Each segment below it, from the top down.
    let rs = s.with_name_scope("recompute");
    for i in (0..chain.len()).rev() {
        let Some(dy) = upper_grad.take() else {
            break; // nothing flows further down
        };
        let dy = dy.to_dense(&rs)?;
        let lower = i.checked_sub(1).map(|j| &chain[j]);
        let ops = graph.segment(&chain[i], lower)?;
        let copied = copy_segment(&rs, &ops, dy.op())?;
        let upper = copied.get(chain[i].op().name()).ok_or_else(|| {
            Status::internal(format!("checkpoint '{}' was not copied", chain[i].name()))
        })?;
        let upper = upper.output(chain[i].index())?;
        let mut wrt: Vec<Output> = xs.to_vec();
        wrt.extend(lower.cloned());
        let g = gradients_impl(s, &[upper], &wrt, Some(&[dy]), stop)?;
        take(&g[..xs.len()]);
        upper_grad = lower.and_then(|_| g[xs.len()].clone());
    }
    let gs = s.with_name_scope("gradients");
    total
        .into_iter()
        .zip(xs)
        .map(|(parts, x)| {
            let sc = gs.with_context(s.context_of(x.op().name()));
            match aggregate(&sc, parts)? {
                None => Ok(None),
                Some(g) => g.to_dense(&sc).map(Some),
            }
        })
        .collect()
}

/// The graph's data edges, read once.
struct Snapshot {
    /// node → its data inputs (node, port).
    inputs: HashMap<String, Vec<(String, usize)>>,
    /// node → its control inputs.
    controls: HashMap<String, Vec<String>>,
    /// node → its op type.
    op: HashMap<String, String>,
    /// Nodes in the order they were added (a topological order).
    order: Vec<String>,
    /// Nodes inside a control-flow context.
    in_context: HashSet<String>,
}

impl Snapshot {
    fn of(s: &Scope) -> Snapshot {
        let mut snap = s.with_graph(|g| {
            let mut snap = Snapshot {
                inputs: HashMap::new(),
                controls: HashMap::new(),
                op: HashMap::new(),
                order: Vec::new(),
                in_context: HashSet::new(),
            };
            for (id, n) in g.nodes().iter().enumerate() {
                let name = n.name().to_owned();
                let (mut data, mut ctl) = (Vec::new(), Vec::new());
                for e in g.in_edges(id) {
                    let src = g.node(e.src).name().to_owned();
                    if e.is_control() {
                        ctl.push(src);
                    } else {
                        data.push((src, e.src_output as usize));
                    }
                }
                snap.inputs.insert(name.clone(), data);
                snap.controls.insert(name.clone(), ctl);
                snap.op.insert(name.clone(), n.def.op.clone());
                snap.order.push(name);
            }
            snap
        });
        let in_context: HashSet<String> = snap
            .order
            .iter()
            .filter(|n| s.context_of(n).is_some() || s.loop_of_boundary(n).is_some())
            .cloned()
            .collect();
        snap.in_context = in_context;
        snap
    }

    /// Every node `node` depends on through data edges, itself included.
    fn ancestors(&self, node: &str) -> HashSet<String> {
        self.ancestors_until(node, None)
    }

    /// The nodes `node` depends on (itself included) without passing through
    /// `stop`.
    fn ancestors_until(&self, node: &str, stop: Option<&str>) -> HashSet<String> {
        let mut seen = HashSet::new();
        let mut stack = vec![node.to_owned()];
        while let Some(n) = stack.pop() {
            if Some(n.as_str()) != stop && seen.insert(n.clone()) {
                stack.extend(
                    self.inputs
                        .get(&n)
                        .into_iter()
                        .flatten()
                        .map(|(src, _)| src.clone()),
                );
            }
        }
        seen
    }

    /// The nodes whose values depend on the step's data: placeholders and
    /// stateful ops other than variables and their reads (queues, readers,
    /// random draws), and everything computed from them. Weights and constants
    /// are not.
    fn data_dependent(&self) -> HashSet<String> {
        let registry = OpRegistry::global();
        let mut out: HashSet<String> = HashSet::new();
        for n in &self.order {
            let op = self.op.get(n).map(String::as_str).unwrap_or_default();
            let is_data = op.starts_with("Placeholder")
                || (registry.lookup(op).is_ok_and(|d| d.is_stateful)
                    && !matches!(
                        op,
                        "VariableV2" | "Variable" | "VarHandleOp" | "ReadVariableOp"
                    ));
            let from_data = self
                .inputs
                .get(n)
                .into_iter()
                .flatten()
                .any(|(src, _)| out.contains(src));
            if is_data || from_data {
                out.insert(n.clone());
            }
        }
        out
    }

    /// An error unless every checkpoint separates what is above it from what is
    /// below: a value computed below a checkpoint from the step's data and read
    /// above it other than through the checkpoint (a skip connection across it)
    /// would get no gradient from the recomputed segment.
    fn check_separates(&self, ys: &[Output], chain: &[Output]) -> Result<()> {
        let data = self.data_dependent();
        let tops: Vec<&str> = ys.iter().map(|y| y.op().name()).collect();
        for (i, c) in chain.iter().enumerate() {
            let c_name = c.op().name();
            let below = self.ancestors(c_name);
            let uppers: Vec<&str> = match chain.get(i + 1) {
                Some(u) => vec![u.op().name()],
                None => tops.clone(),
            };
            for u in uppers {
                if let Some(skip) = self
                    .ancestors_until(u, Some(c_name))
                    .into_iter()
                    .find(|n| n != c_name && below.contains(n) && data.contains(n))
                {
                    return Err(Status::invalid_argument(format!(
                        "checkpoint '{}' does not separate the graph: '{u}' also reads                          '{skip}', computed below it (checkpoint a tensor every path                          passes through)",
                        c.name()
                    )));
                }
            }
        }
        Ok(())
    }

    fn depends_on(&self, node: &str, on: &str) -> bool {
        self.ancestors(node).contains(on)
    }

    /// The checkpoints, lowest first; an error unless each depends on the one
    /// before it.
    fn order_chain(&self, checkpoints: &[Output]) -> Result<Vec<Output>> {
        let pos: HashMap<&str, usize> = self
            .order
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let mut chain = checkpoints.to_vec();
        chain.sort_by_key(|c| pos.get(c.op().name()).copied().unwrap_or(usize::MAX));
        chain.dedup_by(|a, b| a.name() == b.name());
        for c in &chain {
            if !pos.contains_key(c.op().name()) {
                return Err(Status::not_found(format!(
                    "checkpoint '{}' is not in the graph",
                    c.name()
                )));
            }
            if self.in_context.contains(c.op().name()) {
                return Err(Status::unimplemented(format!(
                    "checkpoint '{}' is inside a cond or while_loop",
                    c.name()
                )));
            }
        }
        for w in chain.windows(2) {
            if !self.depends_on(w[1].op().name(), w[0].op().name()) {
                return Err(Status::invalid_argument(format!(
                    "checkpoints must form a chain: '{}' does not depend on '{}'",
                    w[1].name(),
                    w[0].name()
                )));
            }
        }
        Ok(chain)
    }

    /// The ops that compute `upper` from `lower` (from the graph's inputs when
    /// `lower` is `None`), in topological order: `upper`'s ancestors that are
    /// neither `lower` nor its ancestors, less the sources (ops with no data
    /// input: constants, placeholders, variables), which are read as they are.
    fn segment(&self, upper: &Output, lower: Option<&Output>) -> Result<Vec<String>> {
        let below = lower
            .map(|l| self.ancestors(l.op().name()))
            .unwrap_or_default();
        let above = self.ancestors(upper.op().name());
        let registry = OpRegistry::global();
        let mut ops = Vec::new();
        for n in &self.order {
            if !above.contains(n) || below.contains(n) {
                continue;
            }
            if self.inputs.get(n).is_none_or(Vec::is_empty) {
                continue;
            }
            let op = self.op.get(n).map(String::as_str).unwrap_or_default();
            if self.in_context.contains(n) {
                return Err(Status::unimplemented(format!(
                    "cannot recompute '{n}' ({op}): it is inside a cond or while_loop; \
                     put a checkpoint after the loop"
                )));
            }
            if registry.lookup(op).is_ok_and(|d| d.is_stateful) {
                // Reading a variable gives the same value again within a step
                // (its update depends on the gradients): the backward pass
                // reads the forward pass's read. Anything else stateful would
                // not give the same value again.
                if op == "ReadVariableOp" {
                    continue;
                }
                return Err(Status::invalid_argument(format!(
                    "cannot recompute '{n}': {op} is stateful and would not give the \
                     same value again; put a checkpoint after it"
                )));
            }
            ops.push(n.clone());
        }
        Ok(ops)
    }
}

/// Copies `ops` (topologically ordered) into `s`: each copy reads the copies of
/// its inputs inside the segment and the original tensors outside it, and the
/// copies that read nothing inside the segment wait for `gate`. Returns original
/// name → copy.
fn copy_segment(s: &Scope, ops: &[String], gate: &Operation) -> Result<HashMap<String, Operation>> {
    let mut copies: HashMap<String, Operation> = HashMap::new();
    for name in ops {
        let mut def = s
            .with_graph(|g| g.find(name).map(|id| g.node(id).def.clone()))
            .ok_or_else(|| Status::not_found(format!("node '{name}' is not in the graph")))?;
        let mut reads_copy = false;
        let mut inputs = Vec::with_capacity(def.input.len());
        for i in &def.input {
            if let Some(ctl) = i.strip_prefix('^') {
                inputs.push(match copies.get(ctl) {
                    Some(c) => format!("^{}", c.name()),
                    None => i.clone(),
                });
                continue;
            }
            let t = TensorId::parse(i)?;
            match copies.get(t.node) {
                Some(c) => {
                    reads_copy = true;
                    inputs.push(c.output(t.port as usize)?.input_name());
                }
                None => inputs.push(i.clone()),
            }
        }
        if !reads_copy {
            inputs.push(format!("^{}", gate.name()));
        }
        def.input = inputs;
        def.name = s.unique_name(name.rsplit('/').next().unwrap_or(name), false)?;
        let op = s.add_node(def)?;
        copies.insert(name.clone(), op);
    }
    Ok(copies)
}
