//! Gradients of `while_loop`s (TensorFlow v1's `control_flow_grad.py` and
//! `GradLoopState`): the gradient of a whole loop is another loop that runs its
//! body's gradient once per forward iteration, last iteration first.
//!
//! To that end the forward loop gets two more loop variables: a counter (its exit is
//! the number of iterations, which the backward loop counts down) and a token that
//! orders the stack pushes of successive iterations. Every forward value the body's
//! gradient needs is pushed on a stack (`StackV2`/`StackPushV2`) in each forward
//! iteration and popped (`StackPopV2`) in the matching backward one; the hook that
//! does this sits in the builder's `bring_in`, so gradient functions are written as
//! if the forward values were at hand. The backward loop carries the gradient of
//! each float loop variable and one accumulator per constant the body reads.
//!
//! Bodies may hold `cond`s (nested to any depth): a value computed inside a branch
//! is pushed inside that branch, so only in the iterations that took it, and popped
//! behind a guard that is live only in the backward iterations whose forward one
//! took it (`Identity(Switch(token, popped predicate))`, one per enclosing cond).
//! The tokens wait for pushes and pops through `ControlTrigger`s, which run even when
//! a guarded push or pop did not.
//!
//! Bodies may hold loops too (TensorFlow's nested `GradLoopState`s), directly or
//! inside conds, to any depth. The inner loop is one unit of the outer body's
//! gradient walk, and its gradient loop is built inside the outer gradient loop.
//! Its stacks sit outside every loop, so one stack collects every execution of the
//! inner loop in order, and the inner loop's tokens continue the outer ones (an
//! execution's pushes, and pops, wait for the previous execution's). The inner
//! loop's iteration count is itself an outer-loop value, pushed and popped like any
//! other, and so is every outer-body value the inner gradient reads.

use crate::builder::control_flow::{while_loop_with, BackpropState, ContextKind, LoopRecord};
use crate::builder::{Operation, Output, Scope, WhileOptions};
use crate::gradients::{gradients_impl, GradCall};
use crate::{ops, DType, Result, Shape, Status, Tensor};

/// The inputs of a loop as a gradient unit: its loop variables' initial values,
/// then the outside values of its constant `Enter`s.
pub(crate) fn loop_inputs(s: &Scope, ctx: usize) -> Result<Vec<Output>> {
    let (rec, consts) = record(s, ctx)?;
    let mut v = Vec::with_capacity(rec.enters.len() + consts.len());
    for e in &rec.enters {
        let ins = crate::gradients::op_inputs(s, e.op())?;
        v.push(
            ins.into_iter()
                .next()
                .ok_or_else(|| Status::internal(format!("Enter '{}' has no input", e.name())))?,
        );
    }
    v.extend(consts.into_iter().map(|(outside, _)| outside));
    Ok(v)
}

/// The loop's `Exit`s (its outputs as a gradient unit).
pub(crate) fn loop_exits(s: &Scope, ctx: usize) -> Result<Vec<Output>> {
    Ok(record(s, ctx)?.0.exits)
}

fn record(s: &Scope, ctx: usize) -> Result<(LoopRecord, Vec<(Output, Output)>)> {
    s.with_context_info(ctx, |c| {
        c.loop_record.clone().map(|r| (r, c.const_enters.clone()))
    })
    .ok_or_else(|| Status::internal(format!("context {ctx} is not a finished while loop")))
}

/// Adds a loop variable to the finished loop `ctx`: `Enter(init)` in the enclosing
/// context, `Merge`, `Switch` on the loop's predicate, the body value and the
/// `Exit`. The back edge is closed later with [`close_loop_var`].
fn add_loop_var(
    s: &Scope,
    ctx: usize,
    rec: &LoopRecord,
    init: &Output,
) -> Result<(Operation, Output, Output)> {
    let parent = s.parent_context(ctx);
    let outer = s.with_context(parent).without_control_dependencies();
    let inner = s.with_context(Some(ctx)).without_control_dependencies();
    let enter = outer
        .op("Enter")
        .raw()
        .input(init)
        .attr("frame_name", rec.frame_name.as_str())
        .attr("is_constant", false)
        .attr("parallel_iterations", rec.parallel_iterations)
        .build1()?;
    let merge = inner
        .op("Merge")
        .raw()
        .input_list(&[enter.clone(), enter.clone()])
        .build()?;
    let sw = inner
        .op("Switch")
        .raw()
        .input(&merge.output(0)?)
        .input(&rec.loop_cond)
        .build()?;
    let id = inner.op("Identity").raw().input(&sw.output(1)?).build1()?;
    let exit = inner.op("Exit").raw().input(&sw.output(0)?).build1()?;
    s.set_context_of(exit.op().name(), parent);
    s.with_context_info(ctx, |c| {
        if let Some(r) = c.loop_record.as_mut() {
            r.boundary.push(enter.op().name().to_owned());
            r.boundary.push(exit.op().name().to_owned());
        }
    });
    Ok((merge, id, exit))
}

fn close_loop_var(s: &Scope, ctx: usize, merge: &Operation, next_value: &Output) -> Result<()> {
    let next = s
        .with_context(Some(ctx))
        .op("NextIteration")
        .raw()
        .input(next_value)
        .build1()?;
    s.replace_input(merge, 1, &next)
}

/// The gradients of loop `ctx`'s inputs (see [`loop_inputs`]) from the gradients
/// flowing into its exits.
pub(crate) fn loop_gradients(
    s: &Scope,
    ctx: usize,
    exit_grads: &[Option<Output>],
) -> Result<Vec<Option<Output>>> {
    let (rec, consts) = record(s, ctx)?;
    // The forward loop's enclosing context gets its counter and token; the gradient
    // loop goes where `s` says: there, or into the gradient loop of an enclosing
    // loop when this one is nested in that loop's body.
    let parent = s.parent_context(ctx);
    let outer = s
        .without_control_dependencies()
        .with_name_scope("while_grad");
    let fwd_outer = outer.with_context(parent);
    let inner = s.with_context(Some(ctx)).without_control_dependencies();
    let enclosing = enclosing_tokens(s)?;
    // The forward counter and token.
    let zero_i = ops::scalar(&fwd_outer, 0i32)?;
    let (cnt_merge, cnt_id, cnt_exit) = add_loop_var(s, ctx, &rec, &zero_i)?;
    let one = ops::scalar(&inner, 1i32)?;
    let cnt_next = ops::add(&inner, &cnt_id, &one)?;
    close_loop_var(s, ctx, &cnt_merge, &cnt_next)?;
    // Nested, the tokens continue the enclosing loops' tokens, so the pushes (pops)
    // of one execution of this loop come before the next execution's.
    let tok_init = match (&enclosing, parent) {
        (Some((fwd_tok, _)), Some(p)) => crate::builder::control_flow::bring_in(s, p, fwd_tok)?,
        _ => ops::constant(&fwd_outer, Tensor::scalar(0.0f32))?,
    };
    let (tok_merge, tok_id, tok_exit) = add_loop_var(s, ctx, &rec, &tok_init)?;
    let bwd_tok_init = match &enclosing {
        Some((_, bwd_tok)) => bwd_tok.clone(),
        None => tok_exit.clone(),
    };

    // Which loop variables and constants carry a gradient.
    let float_vars: Vec<usize> = (0..rec.enters.len())
        .filter(|&j| rec.exits[j].dtype().is_float())
        .collect();
    let float_consts: Vec<usize> = (0..consts.len())
        .filter(|&c| consts[c].0.dtype().is_float())
        .collect();
    let mut init = vec![cnt_exit, bwd_tok_init];
    let mut invariants = vec![Shape::scalar(), Shape::scalar()];
    for &j in &float_vars {
        init.push(match exit_grads.get(j).cloned().flatten() {
            Some(g) => g,
            None => ops::zeros_like(&outer, &rec.exits[j])?,
        });
        invariants.push(rec.invariants[j].clone());
    }
    for &c in &float_consts {
        init.push(ops::zeros_like(&outer, &consts[c].0)?);
        invariants.push(consts[c].0.shape());
    }
    let backprop = BackpropState {
        forward: ctx,
        fwd_token: tok_id.clone(),
        bwd_token: None,
        pushes: Vec::new(),
        pops: Vec::new(),
    };
    let ys: Vec<Output> = float_vars.iter().map(|&j| rec.results[j].clone()).collect();
    let mut xs: Vec<Output> = float_vars.iter().map(|&j| rec.idents[j].clone()).collect();
    xs.extend(float_consts.iter().map(|&c| consts[c].1.clone()));
    let nv = float_vars.len();
    let outs = while_loop_with(
        &outer,
        |b, v| ops::greater(b, &v[0], &ops::scalar(b, 0i32)?),
        |b, v| {
            let bctx = b
                .context()
                .ok_or_else(|| Status::internal("gradient loop body outside its loop"))?;
            b.with_context_info(bctx, |c| {
                if let Some(bp) = c.backprop.as_mut() {
                    bp.bwd_token = Some(v[1].clone());
                }
            });
            let cnt = ops::sub(b, &v[0], &ops::scalar(b, 1i32)?)?;
            let call = GradCall {
                base: Some(ctx),
                target: Some(bctx),
                stop_at_xs: true,
                gate: false,
            };
            let g = gradients_impl(b, &ys, &xs, Some(&v[2..2 + nv]), call)?
                .into_iter()
                .map(|g| g.map(|g| g.to_dense(b)).transpose())
                .collect::<Result<Vec<_>>>()?;
            let mut next = vec![cnt];
            for (k, gk) in g.iter().take(nv).enumerate() {
                next.push(match gk {
                    Some(gk) => gk.clone(),
                    None => ops::zeros_like(b, &v[2 + k])?,
                });
            }
            for (k, gk) in g.iter().skip(nv).enumerate() {
                let acc = &v[2 + nv + k];
                next.push(match gk {
                    Some(gk) => ops::add(b, acc, gk)?,
                    None => acc.clone(),
                });
            }
            // The tokens: this iteration's pops (pushes) before the next one's.
            let (pushes, pops) = b
                .with_context_info(bctx, |c| {
                    c.backprop
                        .as_ref()
                        .map(|bp| (bp.pushes.clone(), bp.pops.clone()))
                })
                .unwrap_or_default();
            next.insert(1, token_after(b, &v[1], &pops)?);
            let tok_next = token_after(&inner, &tok_id, &pushes)?;
            close_loop_var(s, ctx, &tok_merge, &tok_next)?;
            Ok(next)
        },
        &init,
        &WhileOptions {
            parallel_iterations: rec.parallel_iterations,
            shape_invariants: Some(invariants),
        },
        Some(backprop),
    )?;
    if enclosing.is_some() {
        // The enclosing loops' next tokens wait for this loop's (see above).
        if let Some(c) = s.context() {
            s.with_context_info(c, |i| {
                if let Some(bp) = i.backprop.as_mut() {
                    bp.pushes.push(tok_exit.op().clone());
                    bp.pops.push(outs[1].op().clone());
                }
            });
        }
    }
    let mut grads = vec![None; rec.enters.len() + consts.len()];
    for (k, &j) in float_vars.iter().enumerate() {
        grads[j] = Some(outs[2 + k].clone());
    }
    for (k, &c) in float_consts.iter().enumerate() {
        grads[rec.enters.len() + c] = Some(outs[2 + nv + k].clone());
    }
    Ok(grads)
}

/// The forward and backward tokens of the gradient loop that `s` builds in, if it
/// builds in one: the loop being differentiated is nested in the body of the loop
/// that gradient loop differentiates.
fn enclosing_tokens(s: &Scope) -> Result<Option<(Output, Output)>> {
    let Some(c) = s.context() else {
        return Ok(None);
    };
    let tokens = s.with_context_info(c, |i| {
        i.backprop
            .as_ref()
            .map(|bp| (bp.fwd_token.clone(), bp.bwd_token.clone()))
    });
    match tokens {
        None => Ok(None),
        Some((f, Some(b))) => Ok(Some((f, b))),
        Some((_, None)) => Err(Status::internal(
            "nested loop gradient built before its enclosing gradient loop's body began",
        )),
    }
}

/// The context outside every gradient loop around `bctx` (where the stacks go, so
/// that both the forward loops and the gradient loops see them).
fn outside_gradient_loops(s: &Scope, bctx: usize) -> Option<usize> {
    let mut c = bctx;
    loop {
        let p = s.parent_context(c)?;
        if !s.with_context_info(p, |i| i.backprop.is_some()) {
            return Some(p);
        }
        c = p;
    }
}

/// The `cond` contexts from loop `fwd` down to `ctx`, outermost first, with each
/// one's predicate and branch: `Some` when `ctx` is `fwd` itself (an empty list) or
/// lies inside it through conds only.
pub(crate) fn conds_between(
    s: &Scope,
    ctx: usize,
    fwd: usize,
) -> Option<Vec<(usize, Output, usize)>> {
    let mut conds = Vec::new();
    let mut c = ctx;
    while c != fwd {
        let kind = s.with_context_info(c, |i| match &i.kind {
            ContextKind::Cond { pred, branch } => Some((pred.clone(), *branch)),
            ContextKind::While { .. } => None,
        })?;
        conds.push((c, kind.0, kind.1));
        c = s.parent_context(c)?;
    }
    conds.reverse();
    Some(conds)
}

/// The context whose iterations `o` is live in: its op's context, except for a
/// `Switch` output that brought a value into a `cond` branch, which lives in that
/// branch (the `Switch` itself sits in the enclosing context).
fn value_context(s: &Scope, o: &Output) -> Option<usize> {
    let ctx = s.context_of(o.op().name())?;
    let name = o.name();
    s.child_contexts(ctx)
        .into_iter()
        .find(|&c| {
            s.with_context_info(c, |i| {
                matches!(i.kind, ContextKind::Cond { .. })
                    && i.external.get(&name).is_some_and(|v| v.name() == name)
            })
        })
        .or(Some(ctx))
}

/// The next value of a token loop variable: `token` once every op of `after` has
/// run or been skipped as dead (a `ControlTrigger` waits for them: a push or pop in
/// an untaken branch must not kill the token).
fn token_after(s: &Scope, token: &Output, after: &[Operation]) -> Result<Output> {
    let mut b = s.op("Identity").raw().input(token);
    if !after.is_empty() {
        let mut t = s.op("ControlTrigger").raw();
        for op in after {
            t = t.control_input(op);
        }
        b = b.control_input(&t.build()?);
    }
    b.build1()
}

/// The popped copy, in gradient loop `bctx`, of forward value `o` of loop `fwd`
/// (memoized): a stack created outside both loops, a push in every forward
/// iteration (that reaches `o`'s cond branch, when `o` is inside conds of the body)
/// and a pop in the matching backward ones, each ordered by its loop's token.
pub(crate) fn accumulate(s: &Scope, bctx: usize, fwd: usize, o: &Output) -> Result<Output> {
    let (fwd_token, bwd_token) = s
        .with_context_info(bctx, |c| {
            c.backprop
                .as_ref()
                .map(|bp| (bp.fwd_token.clone(), bp.bwd_token.clone()))
        })
        .ok_or_else(|| Status::internal("not a gradient loop"))?;
    let bwd_token = bwd_token.ok_or_else(|| {
        Status::internal(format!(
            "forward value '{}' needed before the gradient loop's body began",
            o.name()
        ))
    })?;
    if o.data_type().is_ref || o.dtype() == DType::Resource {
        return Err(Status::unimplemented(format!(
            "gradient of a while loop needs '{}' from every iteration, but it is a reference or resource",
            o.name()
        )));
    }
    let outer = s
        .with_context(outside_gradient_loops(s, bctx))
        .without_control_dependencies()
        .with_name_scope("while_grad");
    let max = ops::scalar(&outer, -1i32)?;
    let stack = outer
        .op("StackV2")
        .name("acc")
        .input(&max)
        .attr("elem_type", o.dtype())
        .build1()?;
    let octx = value_context(s, o).unwrap_or(fwd);
    let conds = conds_between(s, octx, fwd).ok_or_else(|| {
        Status::internal(format!(
            "'{}' is neither in the forward loop nor in a cond inside it",
            o.name()
        ))
    })?;
    // Backward, the pop runs only where the forward push did: behind one switch per
    // enclosing cond on that cond's popped predicate.
    let inb = s.with_context(Some(bctx)).without_control_dependencies();
    let mut guard = bwd_token;
    for (_, pred, branch) in &conds {
        let pred = crate::builder::control_flow::bring_in(s, bctx, pred)?;
        let sw = inb.op("Switch").raw().input(&guard).input(&pred).build()?;
        guard = inb
            .op("Identity")
            .raw()
            .input(&sw.output(*branch)?)
            .build1()?;
    }
    let push = s
        .with_context(Some(octx))
        .without_control_dependencies()
        .op("StackPushV2")
        .input(&stack)
        .input(o)
        .control_input(fwd_token.op())
        .build()?;
    let pop = s
        .with_context(Some(bctx))
        .without_control_dependencies()
        .op("StackPopV2")
        .input(&stack)
        .attr("elem_type", o.dtype())
        .control_input(guard.op())
        .build()?;
    let pop = s.set_output_shape(&pop, 0, o.shape());
    let value = pop.output(0)?;
    s.with_context_info(bctx, |c| {
        c.external.insert(o.name(), value.clone());
        if let Some(bp) = c.backprop.as_mut() {
            bp.pushes.push(push);
            bp.pops.push(pop);
        }
    });
    Ok(value)
}
