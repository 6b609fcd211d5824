//! Symbolic gradients by graph extension (TensorFlow whitepaper §4.1,
//! `gradients_util.py`): [`gradients`] adds to a graph the nodes computing
//! `d(sum ys)/d xs`, walking backwards from `ys` through the ops between `xs` and
//! `ys`, calling each op's registered [`GradFn`] and summing the contributions to
//! an output with `AddN`.
//!
//! - [`registry`] — gradient functions by op name (TensorFlow's
//!   `REGISTER_GRADIENT` / `NotDifferentiable`).
//! - [`indexed_slices`] — sparse gradients ([`IndexedSlices`]) and how
//!   contributions to one tensor are summed.
//! - [`recompute`] — gradients that recompute activations between checkpoints
//!   instead of keeping them ([`recomputed_gradients`]).
//! - [`math_grad`], [`nn_grad`], [`conv_grad`], [`pooling_grad`], [`array_grad`],
//!   [`image_grad`], [`control_flow_grad`], [`state_grad`], [`tensor_array_grad`],
//!   [`data_flow_grad`], [`sparse_grad`]: the gradient functions,
//!   one file per family (TensorFlow's `math_grad.py`, …).
//!
//! Gradients of ops inside a cond branch or loop body are built in that context, so
//! they run (or are dead) with the branch.

pub mod array_grad;
pub mod control_flow_grad;
pub mod conv_grad;
pub mod data_flow_grad;
pub mod image_grad;
pub mod indexed_slices;
pub mod math_grad;
pub mod nn_grad;
pub mod pooling_grad;
pub mod recompute;
pub mod registry;
pub mod sparse_grad;
pub mod state_grad;
pub mod tensor_array_grad;
pub(crate) mod while_grad;

/// Registers every built-in gradient function.
pub fn register_all_gradients(r: &GradientRegistry) {
    array_grad::register_all_gradients(r);
    control_flow_grad::register_all_gradients(r);
    conv_grad::register_all_gradients(r);
    data_flow_grad::register_all_gradients(r);
    image_grad::register_all_gradients(r);
    math_grad::register_all_gradients(r);
    nn_grad::register_all_gradients(r);
    pooling_grad::register_all_gradients(r);
    sparse_grad::register_all_gradients(r);
    state_grad::register_all_gradients(r);
    tensor_array_grad::register_all_gradients(r);
}

use std::collections::{HashMap, HashSet, VecDeque};

use indexed_slices::{aggregate, gate, passes_slices};

use crate::builder::{Operation, Output, Scope};
use crate::node_def::TensorId;
use crate::{NodeDef, Result, Status};

/// Node name -> its data inputs as (source node, source port), in input order.
type EdgeMap = HashMap<String, Vec<(String, usize)>>;
pub use indexed_slices::{Gradient, IndexedSlices};
pub use recompute::recomputed_gradients;
pub use registry::{GradFn, GradientRegistry, SparseGradFn};

/// What a gradient function sees of the op it differentiates.
pub struct GradContext<'a> {
    /// Where to add the gradient nodes (the op's context, a `<op>_grad` name scope).
    pub scope: &'a Scope,
    /// The op.
    pub op: &'a Operation,
    /// Its definition (attributes with defaults).
    pub node: &'a NodeDef,
    /// Its data inputs.
    pub inputs: &'a [Output],
    /// The gradient flowing into each of its outputs (`None`: no gradient).
    pub grads: &'a [Option<Output>],
}

impl GradContext<'_> {
    /// Output `i` of the op.
    pub fn output(&self, i: usize) -> Result<Output> {
        self.op.output(i)
    }

    /// Input `i` of the op.
    pub fn input(&self, i: usize) -> Result<Output> {
        self.inputs
            .get(i)
            .cloned()
            .ok_or_else(|| Status::internal(format!("{} has no input {i}", self.op.name())))
    }

    /// The gradient of output `i`, or zeros shaped like it when none flows in.
    pub fn grad(&self, i: usize) -> Result<Output> {
        match self.grads.get(i).cloned().flatten() {
            Some(g) => Ok(g),
            None => crate::ops::zeros_like(self.scope, &self.op.output(i)?),
        }
    }
}

/// The data inputs of `op`, as outputs of the nodes they come from.
pub fn op_inputs(s: &Scope, op: &Operation) -> Result<Vec<Output>> {
    let def = node_def(s, op.name())?;
    def.data_inputs()
        .map(|i| {
            let t = TensorId::parse(i)?;
            s.find_operation(t.node)
                .ok_or_else(|| {
                    Status::not_found(format!(
                        "input '{i}' of '{}' is not in the graph",
                        op.name()
                    ))
                })?
                .output(t.port as usize)
        })
        .collect()
}

fn node_def(s: &Scope, name: &str) -> Result<NodeDef> {
    s.with_graph(|g| g.find(name).map(|id| g.node(id).def.clone()))
        .ok_or_else(|| Status::not_found(format!("node '{name}' is not in the graph")))
}

/// Whether gradients flow through `o`: floats, and resource handles (a
/// `ReadVariableOp` passes its gradient to the handle, as TensorFlow's
/// `_IsBackpropagatable` allows).
fn is_float(o: &Output) -> bool {
    o.dtype().is_float() || o.dtype() == crate::DType::Resource
}

/// Adds the gradients of `sum(ys)` with respect to each of `xs` (TensorFlow's
/// `tf.gradients`): `grad_ys` weights each y (default: ones). Returns one gradient
/// per x, `None` where x does not affect any y (or only through integer or
/// non-differentiable paths). An op on the path without a gradient function is an
/// `Unimplemented` error naming it.
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, gradients::gradients, ops, DType, Shape};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
/// let y = ops::mul(&s, &x, &x).unwrap();
/// let g = gradients(&s, &[y], &[x], None).unwrap();
/// assert!(g[0].is_some()); // dy/dx = 2x
/// ```
pub fn gradients(
    s: &Scope,
    ys: &[Output],
    xs: &[Output],
    grad_ys: Option<&[Output]>,
) -> Result<Vec<Option<Output>>> {
    let g = gradients_impl(s, ys, xs, grad_ys, GradCall::default())?;
    densify(s, xs, g)
}

/// [`gradients`], keeping sparse gradients sparse: the gradient of a variable
/// read only through `Gather`/`GatherV2` (axis 0) or `ResourceGather` is a
/// [`Gradient::Sparse`] of the gathered rows (TensorFlow's `IndexedSlices`, what
/// `tf.gradients` returns there), any other a [`Gradient::Dense`].
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::gradients::{sparse_gradients, Gradient};
/// use actorflow_graph::{ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let table = ops::placeholder(&s, DType::F32, Shape::known(&[1000, 8])).unwrap();
/// let ids = ops::constant(&s, Tensor::vector(&[3i32, 7])).unwrap();
/// let axis = ops::scalar(&s, 0i32).unwrap();
/// let rows = ops::gather(&s, &table, &ids, &axis).unwrap();
/// let g = sparse_gradients(&s, &[rows], &[table], None).unwrap();
/// assert!(matches!(g[0], Some(Gradient::Sparse(_)))); // two rows, not 1000
/// ```
pub fn sparse_gradients(
    s: &Scope,
    ys: &[Output],
    xs: &[Output],
    grad_ys: Option<&[Output]>,
) -> Result<Vec<Option<Gradient>>> {
    gradients_impl(s, ys, xs, grad_ys, GradCall::default())
}

/// Each gradient made dense where it is, next to its x.
fn densify(s: &Scope, xs: &[Output], grads: Vec<Option<Gradient>>) -> Result<Vec<Option<Output>>> {
    let gs = s.with_name_scope("gradients");
    grads
        .into_iter()
        .zip(xs)
        .map(|(g, x)| match g {
            None => Ok(None),
            Some(Gradient::Dense(o)) => Ok(Some(o)),
            Some(g) => {
                let sc = gs.with_context(s.context_of(x.op().name()));
                g.to_dense(&sc).map(Some)
            }
        })
        .collect()
}

/// Where a gradient walk runs: the top level, or the body of a loop's gradient.
#[derive(Clone, Copy, Default)]
pub(crate) struct GradCall {
    /// The context whose nested loops are units (`None`: the root).
    pub(crate) base: Option<usize>,
    /// Where every gradient node goes (`None`: the context of the op it
    /// differentiates).
    pub(crate) target: Option<usize>,
    /// Do not walk past the xs (a loop body's variables feed back into it).
    pub(crate) stop_at_xs: bool,
    /// TensorFlow's `gate_gradients`: an op's input gradients are all computed
    /// before any of them is used.
    pub(crate) gate: bool,
}

/// [`gradients`] with gated gradients (TensorFlow's `gate_gradients=True`, what its
/// optimizers use: `GATE_OP`): every op's input gradients exist before any is used,
/// so an update applied as soon as its gradient exists cannot change a variable
/// that another gradient of the same op still has to read.
pub fn gated_gradients(
    s: &Scope,
    ys: &[Output],
    xs: &[Output],
    grad_ys: Option<&[Output]>,
) -> Result<Vec<Option<Output>>> {
    let g = gated_sparse_gradients(s, ys, xs, grad_ys)?;
    densify(s, xs, g)
}

/// [`gated_gradients`], keeping sparse gradients sparse (see
/// [`sparse_gradients`]): what the optimizers' `compute_gradients` uses.
pub fn gated_sparse_gradients(
    s: &Scope,
    ys: &[Output],
    xs: &[Output],
    grad_ys: Option<&[Output]>,
) -> Result<Vec<Option<Gradient>>> {
    gradients_impl(
        s,
        ys,
        xs,
        grad_ys,
        GradCall {
            gate: true,
            ..GradCall::default()
        },
    )
}

/// What the backward walk visits: an op, or a whole `while_loop` (its gradient is
/// a loop of its body's gradient, see [`while_grad`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Unit {
    Op(String),
    Loop(usize),
}

/// The unit `node` belongs to: the outermost loop nested in `base` that holds it
/// (its `Enter`s and `Exit`s included), or the node itself.
fn unit_of(s: &Scope, node: &str, base: Option<usize>) -> Unit {
    let mut c = s.loop_of_boundary(node).or_else(|| s.context_of(node));
    let mut found = None;
    while c != base {
        match c {
            None => return Unit::Op(node.to_owned()),
            Some(x) => {
                if s.is_while_context(x) {
                    found = Some(x);
                }
                c = s.parent_context(x);
            }
        }
    }
    match found {
        Some(l) => Unit::Loop(l),
        None => Unit::Op(node.to_owned()),
    }
}

/// Whether context `c` is `base` or nested in it (`None`: the root).
fn within(s: &Scope, mut c: Option<usize>, base: Option<usize>) -> bool {
    loop {
        if c == base {
            return true;
        }
        match c {
            None => return false,
            Some(x) => c = s.parent_context(x),
        }
    }
}

pub(crate) fn gradients_impl(
    s: &Scope,
    ys: &[Output],
    xs: &[Output],
    grad_ys: Option<&[Output]>,
    call: GradCall,
) -> Result<Vec<Option<Gradient>>> {
    if let Some(g) = grad_ys {
        if g.len() != ys.len() {
            return Err(Status::invalid_argument(format!(
                "{} grad_ys for {} ys",
                g.len(),
                ys.len()
            )));
        }
    }
    // A snapshot of the data edges between units: unit -> its inputs, and the
    // units consuming each unit.
    let names: Vec<String> =
        s.with_graph(|g| g.nodes().iter().map(|n| n.name().to_owned()).collect());
    let node_inputs: EdgeMap = s.with_graph(|g| {
        let mut m = HashMap::new();
        for (id, n) in g.nodes().iter().enumerate() {
            let v: Vec<(String, usize)> = g
                .in_edges(id)
                .filter(|e| !e.is_control())
                .map(|e| (g.node(e.src).name().to_owned(), e.src_output as usize))
                .collect();
            m.insert(n.name().to_owned(), v);
        }
        m
    });
    let base = if call.target.is_some() {
        call.base
    } else {
        s.context()
    };
    let mut unit_map: HashMap<String, Unit> = HashMap::new();
    for n in &names {
        unit_map.insert(n.clone(), unit_of(s, n, base));
    }
    let unit = |n: &str| -> Unit {
        unit_map
            .get(n)
            .cloned()
            .unwrap_or_else(|| Unit::Op(n.to_owned()))
    };
    let mut unit_inputs: HashMap<Unit, Vec<Output>> = HashMap::new();
    let mut consumers: HashMap<Unit, Vec<Unit>> = HashMap::new();
    for n in &names {
        let u = unit(n);
        if unit_inputs.contains_key(&u) {
            continue;
        }
        let ins = match &u {
            Unit::Op(name) => node_inputs
                .get(name)
                .into_iter()
                .flatten()
                .filter_map(|(src, port)| s.find_operation(src).and_then(|o| o.output(*port).ok()))
                .collect(),
            Unit::Loop(l) => while_grad::loop_inputs(s, *l)?,
        };
        for i in &ins {
            consumers
                .entry(unit(i.op().name()))
                .or_default()
                .push(u.clone());
        }
        unit_inputs.insert(u, ins);
    }
    let x_units: HashSet<Unit> = xs.iter().map(|x| unit(x.op().name())).collect();
    for x in xs {
        if let Unit::Loop(_) = unit(x.op().name()) {
            return Err(Status::unimplemented(format!(
                "gradient with respect to '{}', a tensor inside a while loop",
                x.name()
            )));
        }
    }
    // Units reachable forward from xs …
    let mut reached: HashSet<Unit> = HashSet::new();
    let mut stack: Vec<Unit> = x_units.iter().cloned().collect();
    while let Some(u) = stack.pop() {
        if reached.insert(u.clone()) {
            stack.extend(consumers.get(&u).into_iter().flatten().cloned());
        }
    }
    // … and backward from ys: the units between.
    let mut between: HashSet<Unit> = HashSet::new();
    let mut stack: Vec<Unit> = ys.iter().map(|y| unit(y.op().name())).collect();
    while let Some(u) = stack.pop() {
        if reached.contains(&u) && between.insert(u.clone()) {
            if call.stop_at_xs && x_units.contains(&u) {
                continue;
            }
            stack.extend(
                unit_inputs
                    .get(&u)
                    .into_iter()
                    .flatten()
                    .map(|i| unit(i.op().name())),
            );
        }
    }
    // Pending counts: consumers in `between` whose gradients a unit must wait for.
    let mut pending: HashMap<Unit, usize> = HashMap::new();
    for u in &between {
        if call.stop_at_xs && x_units.contains(u) {
            continue;
        }
        for i in unit_inputs.get(u).into_iter().flatten() {
            let src = unit(i.op().name());
            if between.contains(&src) {
                *pending.entry(src).or_default() += 1;
            }
        }
    }
    let gs = s.with_name_scope("gradients");
    // Called inside a cond branch or loop body, every gradient of a value from
    // outside it is computed there (it depends on that branch's or iteration's
    // values), as TensorFlow builds it in the caller's context.
    let place = |name: &str| {
        call.target.or_else(|| {
            let c = s.context_of(name);
            if within(s, c, base) {
                c
            } else {
                base
            }
        })
    };
    let mut contributions: HashMap<(String, usize), Vec<Gradient>> = HashMap::new();
    for (i, y) in ys.iter().enumerate() {
        let g = match grad_ys {
            Some(g) => g[i].clone(),
            None => crate::ops::ones_like(&gs.with_context(place(y.op().name())), y)?,
        };
        contributions
            .entry((y.op().name().to_owned(), y.index()))
            .or_default()
            .push(Gradient::Dense(g));
    }
    let registry = GradientRegistry::global();
    let mut ready: VecDeque<Unit> = between
        .iter()
        .filter(|u| pending.get(*u).copied().unwrap_or(0) == 0)
        .cloned()
        .collect();
    let mut done: HashSet<Unit> = HashSet::new();
    let x_names: HashSet<&str> = xs.iter().map(|x| x.op().name()).collect();
    while let Some(u) = ready.pop_front() {
        if !done.insert(u.clone()) {
            continue;
        }
        let inputs = unit_inputs.get(&u).cloned().unwrap_or_default();
        let is_source = x_units.contains(&u)
            && (call.stop_at_xs
                || !inputs
                    .iter()
                    .any(|i| between.contains(&unit(i.op().name()))));
        let in_grads: Vec<Option<Gradient>> = match &u {
            Unit::Loop(l) => {
                let exits = while_grad::loop_exits(s, *l)?;
                let mut exit_grads = Vec::with_capacity(exits.len());
                for e in &exits {
                    let key = (e.op().name().to_owned(), 0);
                    let parts = contributions.remove(&key).unwrap_or_default();
                    let sc = gs.with_context(place(e.op().name()));
                    // Rows reaching a loop are made dense.
                    let g = aggregate(&sc, parts)?.filter(|_| is_float(e));
                    exit_grads.push(g.map(|g| g.to_dense(&sc)).transpose()?);
                }
                if exit_grads.iter().all(Option::is_none) {
                    vec![None; inputs.len()]
                } else {
                    // Nested in the body of a loop being differentiated, the
                    // gradient loop goes inside that loop's gradient loop.
                    let sc = gs.with_context(call.target.or_else(|| s.parent_context(*l)));
                    while_grad::loop_gradients(&sc, *l, &exit_grads)?
                        .into_iter()
                        .map(|g| g.map(Gradient::Dense))
                        .collect()
                }
            }
            Unit::Op(name) => {
                let op = s
                    .find_operation(name)
                    .ok_or_else(|| Status::internal(format!("node '{name}' vanished")))?;
                let ctx_scope = gs
                    .with_context(place(name))
                    .with_name_scope(&format!("{name}_grad"));
                let mut out_grads = Vec::with_capacity(op.num_outputs());
                for port in 0..op.num_outputs() {
                    let parts = contributions
                        .remove(&(name.clone(), port))
                        .unwrap_or_default();
                    let g = aggregate(&ctx_scope, parts)?;
                    // Gradients of non-float outputs do not flow.
                    out_grads
                        .push(g.filter(|_| op.output(port).map(|o| is_float(&o)).unwrap_or(false)));
                }
                // Keep the gradients reaching the xs themselves.
                if x_names.contains(name.as_str()) {
                    for (port, g) in out_grads.iter().enumerate() {
                        if let Some(g) = g {
                            if xs
                                .iter()
                                .any(|x| x.op().name() == name && x.index() == port)
                            {
                                contributions
                                    .entry((name.clone(), port))
                                    .or_default()
                                    .push(g.clone());
                            }
                        }
                    }
                }
                if out_grads.iter().all(Option::is_none) || is_source {
                    vec![None; inputs.len()]
                } else {
                    let g = match out_grads.as_slice() {
                        [Some(Gradient::Sparse(x))] if passes_slices(op.op_type()) => {
                            let mut g = vec![Some(Gradient::Sparse(x.clone()))];
                            g.resize(inputs.len(), None);
                            g
                        }
                        _ => op_gradient(registry, s, &op, &ctx_scope, &inputs, &out_grads)?,
                    };
                    if call.gate {
                        // Only the gradients the walk uses are gated: a gate on an
                        // unused one (a MatMul's gradient for its fed input) would
                        // make every step compute it.
                        let used = g
                            .into_iter()
                            .zip(&inputs)
                            .map(|(g, i)| g.filter(|_| between.contains(&unit(i.op().name()))))
                            .collect();
                        gate(&ctx_scope, used)?
                    } else {
                        g
                    }
                }
            }
        };
        if is_source {
            continue;
        }
        for (inp, g) in inputs.iter().zip(in_grads) {
            let src = unit(inp.op().name());
            if let Some(g) = g {
                contributions
                    .entry((inp.op().name().to_owned(), inp.index()))
                    .or_default()
                    .push(g);
            }
            if between.contains(&src) {
                let p = pending.entry(src.clone()).or_default();
                *p = p.saturating_sub(1);
                if *p == 0 {
                    ready.push_back(src);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(xs.len());
    for x in xs {
        let key = (x.op().name().to_owned(), x.index());
        let parts = contributions.get(&key).cloned().unwrap_or_default();
        out.push(aggregate(&gs.with_context(place(x.op().name())), parts)?);
    }
    Ok(out)
}

/// Calls the registered gradient function of `op`.
/// Its output gradients are made dense first; a sparse-aware function
/// ([`GradientRegistry::register_sparse`]) is preferred to a dense one.
fn op_gradient(
    registry: &GradientRegistry,
    s: &Scope,
    op: &Operation,
    ctx_scope: &Scope,
    inputs: &[Output],
    out_grads: &[Option<Gradient>],
) -> Result<Vec<Option<Gradient>>> {
    let name = op.name();
    let out_grads = out_grads
        .iter()
        .map(|g| g.as_ref().map(|g| g.to_dense(ctx_scope)).transpose())
        .collect::<Result<Vec<_>>>()?;
    let out_grads = out_grads.as_slice();
    if let Some(f) = registry.lookup_sparse(op.op_type()) {
        let def = node_def(s, name)?;
        let gctx = GradContext {
            scope: ctx_scope,
            op,
            node: &def,
            inputs,
            grads: out_grads,
        };
        let r = f(&gctx).map_err(|e| e.context(format!("gradient of '{name}'")).with_node(name))?;
        return check_count(op, r, inputs.len());
    }
    match registry.lookup(op.op_type()) {
        registry::Lookup::NotDifferentiable => Ok(vec![None; inputs.len()]),
        registry::Lookup::Missing => Err(Status::unimplemented(format!(
            "No gradient defined for operation '{name}' (op type: {})",
            op.op_type()
        ))
        .with_node(name)),
        registry::Lookup::Found(f) => {
            let def = node_def(s, name)?;
            let gctx = GradContext {
                scope: ctx_scope,
                op,
                node: &def,
                inputs,
                grads: out_grads,
            };
            let r =
                f(&gctx).map_err(|e| e.context(format!("gradient of '{name}'")).with_node(name))?;
            let r = r.into_iter().map(|g| g.map(Gradient::Dense)).collect();
            check_count(op, r, inputs.len())
        }
    }
}

fn check_count(
    op: &Operation,
    r: Vec<Option<Gradient>>,
    inputs: usize,
) -> Result<Vec<Option<Gradient>>> {
    if r.len() != inputs {
        return Err(Status::internal(format!(
            "gradient function of {} returned {} gradients for {inputs} inputs",
            op.op_type(),
            r.len(),
        )));
    }
    Ok(r)
}
