//! Gradients of the control-flow ops (TensorFlow's `control_flow_grad.py`), for
//! conds: the gradient of a cond's `Merge` is a `Switch` of the gradient on the same
//! predicate (each branch gets it only when taken); the gradient of a `Switch` that
//! brought a value into a branch is a `Merge` of the branch's gradient and zeros
//! from the other branch, so it is live whichever branch ran. A constant `Enter`
//! passes its gradient through (reached only by gradients taken in a loop body).

use crate::builder::{Operation, Output};
use crate::gradients::{GradContext, GradientRegistry};
use crate::{Result, Status};

fn merge_grad(c: &GradContext<'_>) -> Result<Vec<Option<Output>>> {
    let pred = c.scope.cond_pred_of(c.op.name()).ok_or_else(|| {
        Status::unimplemented(format!(
            "gradient of Merge '{}' that was not built by cond (while-loop gradients use the loop's own gradient construction)",
            c.op.name()
        ))
    })?;
    let g = c.grad(0)?;
    let sw: Operation = c
        .scope
        .op("Switch")
        .name("cond_grad")
        .input(&g)
        .input(&pred)
        .build()?;
    let mut out = vec![None; c.inputs.len()];
    if out.len() >= 2 {
        out[0] = Some(sw.output(0)?);
        out[1] = Some(sw.output(1)?);
    }
    Ok(out)
}

fn switch_grad(c: &GradContext<'_>) -> Result<Vec<Option<Output>>> {
    let (g0, g1) = (
        c.grads.first().cloned().flatten(),
        c.grads.get(1).cloned().flatten(),
    );
    // Zeros for the untaken branch, live exactly when that branch was the one not
    // taken: built from the Switch's inputs (always live), switched again on its
    // predicate, so this works inside a loop's gradient too, where the forward
    // outputs' deadness is gone and the inputs are popped from stacks.
    let zeros = |branch: usize| -> Result<Output> {
        let value = c
            .inputs
            .first()
            .ok_or_else(|| Status::internal("Switch without input"))?;
        let pred = c
            .inputs
            .get(1)
            .ok_or_else(|| Status::internal("Switch without predicate"))?;
        let z = crate::ops::zeros_like(c.scope, value)?;
        c.scope
            .op("Switch")
            .name("cond_grad_zeros")
            .input(&z)
            .input(pred)
            .build()?
            .output(branch)
    };
    let parts = match (g0, g1) {
        (None, None) => return Ok(vec![None, None]),
        (Some(a), Some(b)) => [a, b],
        (Some(a), None) => [a, zeros(1)?],
        (None, Some(b)) => [zeros(0)?, b],
    };
    let m = c
        .scope
        .op("Merge")
        .name("cond_grad")
        .input_list(&parts)
        .build()?;
    Ok(vec![Some(m.output(0)?), None])
}

/// Reached only by a gradient taken inside a loop body (a whole loop is otherwise
/// one unit of the walk, see `while_grad`): a loop invariant's gradient there is
/// the gradient of the value outside, per iteration, as in TensorFlow's
/// `_EnterGrad` outside a gradient loop.
fn enter_grad(c: &GradContext<'_>) -> Result<Vec<Option<Output>>> {
    if c.node.get_attr_or("is_constant", false)? {
        return Ok(vec![c.grads.first().cloned().flatten()]);
    }
    Err(Status::unimplemented(format!(
        "gradient, inside a loop body, through '{}': the value a loop variable enters with (differentiate the whole loop from outside it instead)",
        c.op.name()
    ))
    .with_node(c.op.name()))
}

fn identity_grad(c: &GradContext<'_>) -> Result<Vec<Option<Output>>> {
    Ok(vec![c.grads.first().cloned().flatten()])
}

/// Registers the control-flow gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("Merge", merge_grad);
    r.register("RefMerge", merge_grad);
    r.register("Switch", switch_grad);
    r.register("Enter", enter_grad);
    r.register("RefEnter", enter_grad);
    r.register("RefSwitch", switch_grad);
    for op in [
        "Identity",
        "RefIdentity",
        "Snapshot",
        "PlaceholderWithDefault",
    ] {
        r.register(op, identity_grad);
    }
    for op in [
        "LoopCond",
        "ControlTrigger",
        "NoOp",
        "Const",
        "Placeholder",
        "_Arg",
        "_Retval",
    ] {
        r.not_differentiable(op);
    }
    r.register("StopGradient", |_| Ok(vec![None]));
    r.register("PreventGradient", |c| {
        let msg: String = c.node.get_attr_or("message", String::new())?;
        Err(Status::invalid_argument(format!(
            "Gradient explicitly disabled at '{}'. Reason: {msg}",
            c.op.name()
        )))
    });
}
