//! Gradients of the state ops (TensorFlow's `state_grad.py` and the gradient
//! registrations of `resource_variable_ops.py`): a `ReadVariableOp` passes its
//! gradient to the resource handle it read, so `gradients(loss, [handle])` gives the
//! gradient with respect to the variable's value, as `tf.gradients` does for a
//! resource variable. Reference variables are their own output, so gradients with
//! respect to a `VariableV2` output need nothing here. Assignments and the
//! variable-creating and -querying ops are not differentiable. A
//! `ResourceGather`'s gradient is the gathered rows (`IndexedSlices`).

use crate::gradients::array_grad::index::gather_rows_grad;
use crate::gradients::{GradContext, Gradient, GradientRegistry};
use crate::ops;
use crate::Status;

/// `ResourceGather` (TensorFlow's `_GatherGrad` registration for it): the
/// gathered rows' gradients as `IndexedSlices` of the variable, whose shape is
/// the handle's static `shape` attribute when fully known, else a
/// `VariableShape`.
fn resource_gather_grad(c: &GradContext<'_>) -> crate::Result<Vec<Option<Gradient>>> {
    let batch_dims: i64 = c.node.get_attr_or("batch_dims", 0)?;
    if batch_dims != 0 {
        return Err(Status::unimplemented(format!(
            "the gradient of ResourceGather with batch_dims = {batch_dims} is not supported"
        )));
    }
    let handle = c.input(0)?;
    let static_shape = c.scope.with_graph(|g| {
        let id = g.find(handle.op().name())?;
        let def = &g.node(id).def;
        if def.op != "VarHandleOp" {
            return None;
        }
        def.get_attr::<crate::Shape>("shape").ok()?.to_tf_dims()
    });
    let params_shape = match static_shape {
        Some(d) => ops::constant(
            c.scope,
            crate::Tensor::vector(&d.iter().map(|&v| v as i32).collect::<Vec<_>>()),
        )?,
        None => ops::variable_shape(c.scope, &handle)?,
    };
    gather_rows_grad(c, params_shape, &c.input(1)?)
}

fn read_variable_grad(c: &GradContext<'_>) -> crate::Result<Vec<Option<crate::builder::Output>>> {
    Ok(vec![c.grads.first().cloned().flatten()])
}

/// Registers the state gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("ReadVariableOp", read_variable_grad);
    r.register_sparse("ResourceGather", resource_gather_grad);
    for op in [
        "VariableV2",
        "Variable",
        "VarHandleOp",
        "Assign",
        "AssignAdd",
        "AssignSub",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        "IsVariableInitialized",
        "VarIsInitializedOp",
        "DestroyResourceOp",
        "VariableShape",
        "CountUpTo",
    ] {
        r.not_differentiable(op);
    }
}
