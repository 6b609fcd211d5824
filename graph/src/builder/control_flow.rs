//! Control-flow builders with TensorFlow v1's node structure (`control_flow_ops.py`):
//! [`cond`] and [`while_loop`], nestable to any depth.
//!
//! Each branch or loop body is built in a *control-flow context*. A node created in
//! a context whose input comes from an enclosing context gets that value through the
//! context: a cond branch through `Switch(value, pred)[branch]`, a loop body through
//! a constant `Enter` into the loop's frame — recursively through every level, and
//! once per value (memoized). A node with no data inputs waits on the context's
//! pivot, so constants in an untaken branch are dead and constants in a loop body run
//! once per iteration. Control dependencies on nodes outside the context are carried
//! in the same way, through a token value. Using a value created inside a context
//! from outside it (other than a loop's `Exit` or a cond's `Merge`) is an error.

use std::collections::HashMap;

use crate::builder::{Operation, Output, Scope};
use crate::{DType, Result, Shape, Status, Tensor};

/// What kind of context a branch or body is.
pub(crate) enum ContextKind {
    /// One branch of a `cond`.
    Cond {
        /// The predicate (an `Identity` in the enclosing context).
        pred: Output,
        /// 1 for the true branch, 0 for the false one.
        branch: usize,
    },
    /// The body (and predicate) of a `while_loop`.
    While {
        /// The loop's frame.
        frame_name: String,
        /// Its `parallel_iterations`.
        parallel_iterations: i64,
    },
}

/// A control-flow context.
pub(crate) struct ContextInfo {
    /// The enclosing context.
    pub(crate) parent: Option<usize>,
    /// What it is.
    pub(crate) kind: ContextKind,
    /// Values brought in, by the name of the outside tensor (and of the result).
    pub(crate) external: HashMap<String, Output>,
    /// Nodes with no data inputs wait on this.
    pub(crate) pivot: Option<Output>,
    /// A loop's constant `Enter`s: (the outside value, the `Enter`'s output).
    pub(crate) const_enters: Vec<(Output, Output)>,
    /// A finished loop's structure (for its gradient).
    pub(crate) loop_record: Option<LoopRecord>,
    /// Set on the loop that computes another loop's gradient.
    pub(crate) backprop: Option<BackpropState>,
}

impl ContextInfo {
    fn new(parent: Option<usize>, kind: ContextKind, pivot: Option<Output>) -> ContextInfo {
        ContextInfo {
            parent,
            kind,
            external: HashMap::new(),
            pivot,
            const_enters: Vec::new(),
            loop_record: None,
            backprop: None,
        }
    }
}

/// The nodes of a built `while_loop`, per loop variable where it is a list.
#[derive(Clone)]
pub(crate) struct LoopRecord {
    /// The frame.
    pub(crate) frame_name: String,
    /// Its `parallel_iterations`.
    pub(crate) parallel_iterations: i64,
    /// The loop variables' `Enter`s.
    pub(crate) enters: Vec<Output>,
    /// Their values in the body (`Identity(Switch:1)`).
    pub(crate) idents: Vec<Output>,
    /// What the body returns for them (the `NextIteration` inputs).
    pub(crate) results: Vec<Output>,
    /// Their `Exit`s.
    pub(crate) exits: Vec<Output>,
    /// Their shape invariants.
    pub(crate) invariants: Vec<Shape>,
    /// The `LoopCond`.
    pub(crate) loop_cond: Output,
    /// Every `Enter` and `Exit` node of the loop (they live in the enclosing context
    /// but belong to the loop).
    pub(crate) boundary: Vec<String>,
}

/// The state of a loop that runs another loop's gradient (TensorFlow's
/// `GradLoopState`): forward values the gradient needs are pushed on a stack in
/// each forward iteration and popped in the matching backward one. A token loop
/// variable in each loop orders the pushes (and the pops) of successive
/// iterations, so parallel iterations cannot reorder a stack.
pub(crate) struct BackpropState {
    /// The forward loop's context.
    pub(crate) forward: usize,
    /// The forward loop's token in the body: pushes wait on it.
    pub(crate) fwd_token: Output,
    /// The backward loop's token in its body: pops wait on it.
    pub(crate) bwd_token: Option<Output>,
    /// The pushes added so far (the next forward token waits on them).
    pub(crate) pushes: Vec<Operation>,
    /// The pops added so far.
    pub(crate) pops: Vec<Operation>,
}

fn is_enclosing(scope: &Scope, candidate: Option<usize>, ctx: usize) -> bool {
    let mut c = scope.parent_context(ctx);
    loop {
        if c == candidate {
            return true;
        }
        match c {
            None => return false,
            Some(x) => c = scope.parent_context(x),
        }
    }
}

/// `o` as seen inside context `ctx`.
pub(crate) fn bring_in(scope: &Scope, ctx: usize, o: &Output) -> Result<Output> {
    let pc = scope.context_of(o.op().name());
    if pc == Some(ctx) {
        return Ok(o.clone());
    }
    if let Some(v) = scope.with_context_info(ctx, |c| c.external.get(&o.name()).cloned()) {
        return Ok(v);
    }
    if let Some(fwd) = scope.with_context_info(ctx, |c| c.backprop.as_ref().map(|b| b.forward)) {
        // A gradient loop sees the forward loop's constants directly and its
        // per-iteration values through stacks.
        let outside = scope.with_context_info(fwd, |c| {
            c.const_enters
                .iter()
                .find(|(_, e)| e.name() == o.name())
                .map(|(v, _)| v.clone())
        });
        if let Some(v) = outside {
            let r = bring_in(scope, ctx, &v)?;
            scope.with_context_info(ctx, |c| c.external.insert(o.name(), r.clone()));
            return Ok(r);
        }
        let in_forward_body = pc
            .is_some_and(|c| crate::gradients::while_grad::conds_between(scope, c, fwd).is_some());
        if in_forward_body {
            return crate::gradients::while_grad::accumulate(scope, ctx, fwd, o);
        }
    }
    // A value of a loop that encloses the forward loop: the enclosing gradient loop
    // pops it, and it enters here from there.
    let from_enclosing_gradient = || {
        scope
            .parent_context(ctx)
            .is_some_and(|p| gradient_loop_sees(scope, p, pc))
    };
    if !is_enclosing(scope, pc, ctx) && !from_enclosing_gradient() {
        return Err(Status::invalid_argument(format!(
            "'{}' was created inside a cond branch or while loop and cannot be used outside it (use the loop's or cond's outputs)",
            o.name()
        ))
        .with_node(o.op().name()));
    }
    add_value(scope, ctx, o)
}

/// Whether `ctx` or a context around it is the gradient loop of a forward loop
/// whose body (through conds only) holds context `pc`.
fn gradient_loop_sees(scope: &Scope, ctx: usize, pc: Option<usize>) -> bool {
    let Some(pc) = pc else {
        return false;
    };
    let mut c = Some(ctx);
    while let Some(x) = c {
        let fwd = scope.with_context_info(x, |i| i.backprop.as_ref().map(|b| b.forward));
        if let Some(f) = fwd {
            if crate::gradients::while_grad::conds_between(scope, pc, f).is_some() {
                return true;
            }
        }
        c = scope.parent_context(x);
    }
    false
}

fn add_value(scope: &Scope, ctx: usize, o: &Output) -> Result<Output> {
    let parent = scope.parent_context(ctx);
    let outer_val = match parent {
        Some(p) if scope.context_of(o.op().name()) != Some(p) => bring_in(scope, p, o)?,
        _ => o.clone(),
    };
    let outer = scope.with_context(parent).without_control_dependencies();
    let is_ref = o.data_type().is_ref;
    let v: (Output, usize, Option<(String, i64)>) =
        scope.with_context_info(ctx, |c| match &c.kind {
            ContextKind::Cond { pred, branch } => (pred.clone(), *branch, None),
            ContextKind::While {
                frame_name,
                parallel_iterations,
            } => (
                o.clone(),
                0,
                Some((frame_name.clone(), *parallel_iterations)),
            ),
        });
    let value = match v {
        (pred, branch, None) => {
            let sw = outer
                .op(if is_ref { "RefSwitch" } else { "Switch" })
                .raw()
                .input(&outer_val)
                .input(&pred)
                .build()?;
            sw.output(branch)?
        }
        (_, _, Some((frame, parallel))) => outer
            .op(if is_ref { "RefEnter" } else { "Enter" })
            .raw()
            .input(&outer_val)
            .attr("frame_name", frame.as_str())
            .attr("is_constant", true)
            .attr("parallel_iterations", parallel)
            .build1()?,
    };
    scope.with_context_info(ctx, |c| {
        c.external.insert(o.name(), value.clone());
        c.external.insert(value.name(), value.clone());
        if matches!(c.kind, ContextKind::While { .. }) {
            c.const_enters.push((outer_val.clone(), value.clone()));
        }
    });
    Ok(value)
}

/// Rewrites the inputs and control inputs of a node about to be created in `ctx`;
/// see the module docs.
pub(crate) fn enter_context(
    scope: &mut Scope,
    ctx: usize,
    inputs: &mut [Vec<Output>],
    control: &mut Vec<String>,
) -> Result<()> {
    control.extend(scope.control_dependencies().iter().cloned());
    *scope = scope.without_control_dependencies();
    for arg in inputs.iter_mut() {
        for o in arg.iter_mut() {
            *o = bring_in(scope, ctx, o)?;
        }
    }
    let mut kept = Vec::with_capacity(control.len());
    for c in control.drain(..) {
        let pc = scope.context_of(&c);
        if pc == Some(ctx) {
            kept.push(c);
            continue;
        }
        let op = scope
            .find_operation(&c)
            .ok_or_else(|| Status::not_found(format!("control input '{c}' is not in the graph")))?;
        // A token that exists only after `c` ran, brought into the context.
        let token = scope
            .with_context(pc)
            .without_control_dependencies()
            .op("Const")
            .attr("dtype", DType::F32)
            .attr("value", Tensor::scalar(0.0f32))
            .control_input(&op)
            .build1()?;
        let v = bring_in(scope, ctx, &token)?;
        kept.push(v.op().name().to_owned());
    }
    if inputs.iter().all(Vec::is_empty) {
        if let Some(p) = scope.with_context_info(ctx, |c| c.pivot.clone()) {
            let name = p.op().name().to_owned();
            if !kept.contains(&name) {
                kept.push(name);
            }
        }
    }
    *control = kept;
    Ok(())
}

/// `cond(pred, true_fn, false_fn)`: builds both branches, each in its own context,
/// and returns one `Merge` per output — the taken branch's value (TensorFlow v1's
/// `tf.cond`). The branches must return the same number of tensors, of equal types.
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::{cond, Scope}, ops, DType, Shape};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
/// let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
/// let out = cond(&s, &p, |b| Ok(vec![ops::mul(b, &x, &x)?]), |b| Ok(vec![ops::add(b, &x, &x)?])).unwrap();
/// assert_eq!(out[0].op().op_type(), "Merge");
/// ```
pub fn cond(
    s: &Scope,
    pred: &Output,
    true_fn: impl FnOnce(&Scope) -> Result<Vec<Output>>,
    false_fn: impl FnOnce(&Scope) -> Result<Vec<Output>>,
) -> Result<Vec<Output>> {
    if pred.dtype() != DType::Bool {
        return Err(Status::invalid_argument(format!(
            "cond predicate must be bool, got {}",
            pred.dtype()
        )));
    }
    let cs = s.with_name_scope("cond");
    let sw = cs.op("Switch").input(pred).input(pred).build()?;
    let pivot_t = cs
        .op("Identity")
        .name("switch_t")
        .input(&sw.output(1)?)
        .build1()?;
    let pivot_f = cs
        .op("Identity")
        .name("switch_f")
        .input(&sw.output(0)?)
        .build1()?;
    let pred_id = cs.op("Identity").name("pred_id").input(pred).build1()?;
    let parent = s.context();
    let branch = |branch: usize,
                  pivot: Output,
                  f: &mut dyn FnMut(&Scope) -> Result<Vec<Output>>|
     -> Result<Vec<Output>> {
        let ctx = cs.add_context(ContextInfo::new(
            parent,
            ContextKind::Cond {
                pred: pred_id.clone(),
                branch,
            },
            Some(pivot),
        ));
        let bs = cs.with_context(Some(ctx));
        let outs = f(&bs)?;
        outs.iter().map(|o| bring_in(&bs, ctx, o)).collect()
    };
    let mut tf = Some(true_fn);
    let mut ff = Some(false_fn);
    let res_t = branch(1, pivot_t, &mut |b| (tf.take().expect("called once"))(b))?;
    let res_f = branch(0, pivot_f, &mut |b| (ff.take().expect("called once"))(b))?;
    if res_t.len() != res_f.len() {
        return Err(Status::invalid_argument(format!(
            "cond branches return different numbers of tensors: {} (true) and {} (false)",
            res_t.len(),
            res_f.len()
        )));
    }
    let outer = cs.with_context(parent).without_control_dependencies();
    let mut merges = Vec::with_capacity(res_t.len());
    for (f, t) in res_f.iter().zip(&res_t) {
        if f.dtype() != t.dtype() {
            return Err(Status::invalid_argument(format!(
                "cond branches return different types: {} (false) and {} (true)",
                f.dtype(),
                t.dtype()
            )));
        }
        let op = if f.data_type().is_ref && t.data_type().is_ref {
            "RefMerge"
        } else {
            "Merge"
        };
        let m = outer
            .op(op)
            .raw()
            .input_list(&[f.clone(), t.clone()])
            .build()?;
        outer.record_cond_merge(m.name(), &pred_id);
        merges.push(m.output(0)?);
    }
    Ok(merges)
}

/// Options of [`while_loop`].
#[derive(Clone, Debug)]
pub struct WhileOptions {
    /// How many iterations may run at once (TensorFlow's default: 10).
    pub parallel_iterations: i64,
    /// Per loop variable, the shape it keeps across iterations; default: the shape
    /// it enters with.
    pub shape_invariants: Option<Vec<Shape>>,
}

impl Default for WhileOptions {
    fn default() -> WhileOptions {
        WhileOptions {
            parallel_iterations: 10,
            shape_invariants: None,
        }
    }
}

/// `while_loop(cond, body, loop_vars)`: repeats `body` while `cond` holds, with
/// TensorFlow v1's structure (`Enter → Merge → LoopCond → Switch → Identity → body →
/// NextIteration → Merge`, `Switch → Exit`). Returns the `Exit` of every loop
/// variable.
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::{while_loop, Scope, WhileOptions}, ops, Tensor};
/// let s = Scope::new();
/// let i0 = ops::scalar(&s, 0i32).unwrap();
/// let out = while_loop(
///     &s,
///     |b, v| ops::sub(b, &ops::scalar(b, 10i32)?, &v[0]), // stand-in predicate type check below
///     |b, v| Ok(vec![ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?]),
///     &[i0],
///     &WhileOptions::default(),
/// );
/// assert!(out.is_err()); // the predicate must be a bool
/// ```
pub fn while_loop(
    s: &Scope,
    cond_fn: impl FnOnce(&Scope, &[Output]) -> Result<Output>,
    body_fn: impl FnOnce(&Scope, &[Output]) -> Result<Vec<Output>>,
    loop_vars: &[Output],
    options: &WhileOptions,
) -> Result<Vec<Output>> {
    while_loop_with(s, cond_fn, body_fn, loop_vars, options, None)
}

/// [`while_loop`], optionally as the gradient loop of another loop.
pub(crate) fn while_loop_with(
    s: &Scope,
    cond_fn: impl FnOnce(&Scope, &[Output]) -> Result<Output>,
    body_fn: impl FnOnce(&Scope, &[Output]) -> Result<Vec<Output>>,
    loop_vars: &[Output],
    options: &WhileOptions,
    backprop: Option<BackpropState>,
) -> Result<Vec<Output>> {
    if loop_vars.is_empty() {
        return Err(Status::invalid_argument(
            "while_loop needs at least one loop variable",
        ));
    }
    if let Some(inv) = &options.shape_invariants {
        if inv.len() != loop_vars.len() {
            return Err(Status::invalid_argument(format!(
                "{} shape invariants for {} loop variables",
                inv.len(),
                loop_vars.len()
            )));
        }
    }
    let ws = s.with_name_scope("while");
    let frame_name = format!("{}while_context", ws.name_prefix());
    let parent = s.context();
    let mut info = ContextInfo::new(
        parent,
        ContextKind::While {
            frame_name: frame_name.clone(),
            parallel_iterations: options.parallel_iterations,
        },
        None,
    );
    info.backprop = backprop;
    let ctx = ws.add_context(info);
    let outer = ws.with_context(parent);
    let inner = ws.with_context(Some(ctx));
    let mut merges: Vec<Operation> = Vec::new();
    let mut enters = Vec::new();
    let mut invariants = Vec::new();
    for (i, v) in loop_vars.iter().enumerate() {
        let is_ref = v.data_type().is_ref;
        let enter = outer
            .op(if is_ref { "RefEnter" } else { "Enter" })
            .input(v)
            .attr("frame_name", frame_name.as_str())
            .attr("is_constant", false)
            .attr("parallel_iterations", options.parallel_iterations)
            .build1()?;
        let invariant = match &options.shape_invariants {
            Some(inv) => {
                if !inv[i].is_compatible(&v.shape()) {
                    return Err(Status::invalid_argument(format!(
                        "loop variable {i} enters the loop with shape {}, incompatible with its shape invariant {}",
                        v.shape(),
                        inv[i]
                    )));
                }
                inv[i].clone()
            }
            None => v.shape(),
        };
        let m = inner
            .op(if is_ref { "RefMerge" } else { "Merge" })
            .raw()
            .input_list(&[enter.clone(), enter.clone()])
            .build()?;
        enters.push(enter);
        merges.push(inner.set_output_shape(&m, 0, invariant.clone()));
        invariants.push(invariant);
    }
    let merge_outs: Vec<Output> = merges.iter().map(|m| m.output(0)).collect::<Result<_>>()?;
    inner.with_context_info(ctx, |c| c.pivot = Some(merge_outs[0].clone()));
    let pred = cond_fn(&inner, &merge_outs)?;
    if pred.dtype() != DType::Bool {
        return Err(Status::invalid_argument(format!(
            "while_loop predicate must be bool, got {}",
            pred.dtype()
        )));
    }
    let pred = bring_in(&inner, ctx, &pred)?;
    let lc = inner.op("LoopCond").raw().input(&pred).build1()?;
    let mut switches = Vec::new();
    let mut body_vars: Vec<Output> = Vec::new();
    for m in &merge_outs {
        let is_ref = m.data_type().is_ref;
        let sw = inner
            .op(if is_ref { "RefSwitch" } else { "Switch" })
            .raw()
            .input(m)
            .input(&lc)
            .build()?;
        let id = inner
            .op(if is_ref { "RefIdentity" } else { "Identity" })
            .raw()
            .input(&sw.output(1)?)
            .build1()?;
        switches.push(sw);
        body_vars.push(id);
    }
    inner.with_context_info(ctx, |c| c.pivot = Some(body_vars[0].clone()));
    let results = body_fn(&inner, &body_vars)?;
    if results.len() != loop_vars.len() {
        return Err(Status::invalid_argument(format!(
            "while_loop body returns {} tensors for {} loop variables",
            results.len(),
            loop_vars.len()
        )));
    }
    let mut results_in = Vec::with_capacity(results.len());
    for (i, r) in results.iter().enumerate() {
        let r = bring_in(&inner, ctx, r)?;
        results_in.push(r.clone());
        if r.dtype() != loop_vars[i].dtype() {
            return Err(Status::invalid_argument(format!(
                "loop variable {i} enters the loop as {} but the body returns {}",
                loop_vars[i].dtype(),
                r.dtype()
            )));
        }
        if !invariants[i].is_compatible(&r.shape()) {
            return Err(Status::invalid_argument(format!(
                "loop variable {i} ('{}') enters the loop with shape {}, but has shape {} after one iteration; to allow the shape to vary across iterations, set WhileOptions::shape_invariants to a less specific shape",
                loop_vars[i].name(),
                invariants[i],
                r.shape()
            )));
        }
        let next = inner
            .op(if r.data_type().is_ref {
                "RefNextIteration"
            } else {
                "NextIteration"
            })
            .raw()
            .input(&r)
            .build1()?;
        inner.replace_input(&merges[i], 1, &next)?;
    }
    let mut exits = Vec::new();
    for sw in &switches {
        let f = sw.output(0)?;
        let e = inner
            .op(if f.data_type().is_ref {
                "RefExit"
            } else {
                "Exit"
            })
            .raw()
            .input(&f)
            .build1()?;
        inner.set_context_of(e.op().name(), parent);
        exits.push(e);
    }
    inner.with_context_info(ctx, |c| {
        let mut boundary: Vec<String> = enters
            .iter()
            .chain(&exits)
            .map(|o| o.op().name().to_owned())
            .collect();
        boundary.extend(c.const_enters.iter().map(|(_, e)| e.op().name().to_owned()));
        c.loop_record = Some(LoopRecord {
            frame_name: frame_name.clone(),
            parallel_iterations: options.parallel_iterations,
            enters,
            idents: body_vars,
            results: results_in,
            exits: exits.clone(),
            invariants,
            loop_cond: lc,
            boundary,
        });
    });
    Ok(exits)
}
