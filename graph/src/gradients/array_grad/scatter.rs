//! Gradients of the ops that address slices by n-dimensional indices and of the
//! sequence and band ops, as TensorFlow's `array_grad.py` builds them:
//!
//! - `GatherNd`: the gradient scattered back with `ScatterNd` (TensorFlow's
//!   `IndexedSlices` for depth-1 indices, made dense).
//! - `ScatterNd`: the gradient gathered at the indices for the updates.
//! - `TensorScatterUpdate`: the gradient with the overwritten slices zeroed for the
//!   tensor, gathered for the updates; `TensorScatterAdd`/`Sub`: the gradient as is
//!   for the tensor, gathered (negated for `Sub`) for the updates.
//! - `TensorScatterMax`/`Min`: the gradient goes to whichever of the tensor's
//!   element and the updates equal the result, split evenly between ties.
//! - `ReverseSequence`: the same reversal of the gradient.
//! - `MatrixBandPart`: the same band of the gradient.

use crate::builder::Output;
use crate::gradients::math_grad::shapes::shape_of;
use crate::gradients::{GradContext, GradFn, GradientRegistry};
use crate::ops;
use crate::Result;

type Grads = Result<Vec<Option<Output>>>;

fn gather_nd_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (params, indices) = (c.input(0)?, c.input(1)?);
    let shape = shape_of(s, &params, indices.dtype())?;
    let g = ops::scatter_nd(s, &indices, &c.grad(0)?, &shape)?;
    Ok(vec![Some(g), None])
}

fn scatter_nd_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::gather_nd(c.scope, &c.grad(0)?, &c.input(0)?)?;
    Ok(vec![None, Some(g), None])
}

fn tensor_scatter_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (indices, g) = (c.input(1)?, c.grad(0)?);
    let gathered = ops::gather_nd(s, &g, &indices)?;
    let (tensor_grad, updates_grad) = match c.node.op.as_str() {
        "TensorScatterUpdate" => {
            let zeros = ops::zeros_like(s, &c.input(2)?)?;
            let cleared = ops::tensor_scatter(
                s,
                "TensorScatterUpdate",
                &ops::identity(s, &g)?,
                &indices,
                &zeros,
            )?;
            (cleared, gathered)
        }
        "TensorScatterSub" => (ops::identity(s, &g)?, ops::neg(s, &gathered)?),
        _ => (ops::identity(s, &g)?, gathered),
    };
    Ok(vec![Some(tensor_grad), None, Some(updates_grad)])
}

fn reverse_sequence_grad(c: &GradContext<'_>) -> Grads {
    let (seq_dim, batch_dim): (i64, i64) = (
        c.node.get_attr("seq_dim")?,
        c.node.get_attr_or("batch_dim", 0)?,
    );
    let g = ops::reverse_sequence(c.scope, &c.grad(0)?, &c.input(1)?, seq_dim, batch_dim)?;
    Ok(vec![Some(g), None])
}

fn matrix_band_part_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::matrix_band_part(c.scope, &c.grad(0)?, &c.input(1)?, &c.input(2)?)?;
    Ok(vec![Some(g), None, None])
}

/// Registers the n-d indexing, sequence and band gradients.
/// `TensorScatterMax`/`Min(x, indices, y)` (TensorFlow's
/// `_TensorScatterMinOrMaxGrad`): an element's gradient goes to `x` where `x`
/// equals the output and to each update equal to the output there, divided by how
/// many of them there are.
fn tensor_scatter_min_max_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, indices, y, out, g) = (
        c.input(0)?,
        c.input(1)?,
        c.input(2)?,
        c.output(0)?,
        c.grad(0)?,
    );
    let dt = g.dtype();
    let x_ind = ops::cast(s, &ops::equal(s, &x, &out)?, dt)?;
    let y_out = ops::gather_nd(s, &out, &indices)?;
    let y_ind = ops::cast(s, &ops::equal(s, &y, &y_out)?, dt)?;
    let shape = shape_of(s, &x, indices.dtype())?;
    let ys_ind = ops::scatter_nd(s, &indices, &y_ind, &shape)?;
    let count = ops::add(s, &x_ind, &ys_ind)?;
    let share = ops::real_div(s, &g, &count)?;
    let x_grad = ops::mul(s, &share, &x_ind)?;
    let y_grad = ops::mul(s, &ops::gather_nd(s, &share, &indices)?, &y_ind)?;
    Ok(vec![Some(x_grad), None, Some(y_grad)])
}

pub(super) fn register(r: &GradientRegistry) {
    let table: [(&str, GradFn); 9] = [
        ("TensorScatterMax", tensor_scatter_min_max_grad),
        ("TensorScatterMin", tensor_scatter_min_max_grad),
        ("GatherNd", gather_nd_grad),
        ("ScatterNd", scatter_nd_grad),
        ("TensorScatterUpdate", tensor_scatter_grad),
        ("TensorScatterAdd", tensor_scatter_grad),
        ("TensorScatterSub", tensor_scatter_grad),
        ("ReverseSequence", reverse_sequence_grad),
        ("MatrixBandPart", matrix_band_part_grad),
    ];
    for (op, f) in table {
        r.register(op, f);
    }
}
