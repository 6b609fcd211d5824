//! Gradients of the TensorArray ops (TensorFlow's `tensor_array_grad.py`).
//!
//! The gradient of an array is another array, made by `TensorArrayGradV3` on first
//! use for each forward array and gradient computation (its `source`, the
//! `gradients` name scope the computation runs in) and shared by every later use:
//! a read's gradient writes into it at the read's index (writes to one index sum),
//! a write's gradient reads it back at the written index. Gathers and scatters,
//! concats and splits pair up the same way. What flows between the ops along the
//! graph is only the arrays' flow scalars, whose data edges order the writes into
//! the gradient array before the reads out of it — in loops too, where the flow is
//! a loop variable like any other.

use crate::builder::{Output, Scope};
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops::TensorArray;
use crate::{DType, Result, Shape, Status};

type Grads = Result<Vec<Option<Output>>>;

/// Registers the TensorArray gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("TensorArrayReadV3", read_grad);
    r.register("TensorArrayWriteV3", write_grad);
    r.register("TensorArrayGatherV3", gather_grad);
    r.register("TensorArrayScatterV3", scatter_grad);
    r.register("TensorArrayConcatV3", concat_grad);
    r.register("TensorArraySplitV3", split_grad);
    for op in [
        "TensorArrayV3",
        "TensorArrayGradV3",
        "TensorArrayGradWithShape",
        "TensorArraySizeV3",
        "TensorArrayCloseV3",
    ] {
        r.not_differentiable(op);
    }
}

/// The gradient computation a gradient function runs in: its scope's name up to
/// and including the first component that starts with `gradients` (the scope of
/// the outermost `gradients` call), so that two `gradients` calls get two gradient
/// arrays. Python's `_GetGradSource` takes the last such component; here the
/// gradient of a loop body is built by a nested call inside its gradient loop
/// (`gradients/while_grad/while/gradients/...`), which must still see the arrays
/// of the call around it.
fn grad_source(s: &Scope) -> Result<String> {
    let prefix = s.name_prefix().trim_end_matches('/');
    let parts: Vec<&str> = prefix.split('/').collect();
    let last = parts
        .iter()
        .position(|p| p.starts_with("gradients"))
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "Expected op/tensor name to start with gradients (excluding scope), got: {prefix}"
            ))
        })?;
    Ok(parts[..=last].join("/"))
}

/// The forward array of `c`'s op (input 0) at `flow`, as the gradient sees it.
fn forward(c: &GradContext<'_>, flow: &Output, dtype_attr: &str) -> Result<TensorArray> {
    let dtype: DType = c.node.get_attr(dtype_attr)?;
    Ok(TensorArray::from_handle(
        &c.input(0)?,
        flow,
        dtype,
        Shape::unknown(),
    ))
}

/// A flow that follows both the incoming gradient flow and the op's own output
/// flow (Python's `write_barrier`): the gradient array is read only after the
/// forward op ran.
fn write_barrier(c: &GradContext<'_>, flow: &Output) -> Result<Output> {
    let s = c.scope;
    let flow_out = s
        .op("Identity")
        .name("flow_out")
        .input(&c.output(0)?)
        .build()?;
    s.with_control_dependencies(&[&flow_out])
        .op("Identity")
        .name("write_barrier")
        .input(flow)
        .build1()
}

/// `read(index)`: the gradient written into the gradient array at `index`.
fn read_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (index, flow, grad) = (c.input(1)?, c.input(2)?, c.grad(0)?);
    let g = forward(c, &flow, "dtype")?.grad(s, &grad_source(s)?, Some(&flow))?;
    let w = g.write(s, &index, &grad)?;
    Ok(vec![None, None, Some(w.flow().clone())])
}

/// `write(index, value)`: the value's gradient is what the gradient array holds
/// at `index`; the flow's gradient passes on.
fn write_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let flow = write_barrier(c, &c.grad(0)?)?;
    let g = forward(c, &flow, "T")?.grad(s, &grad_source(s)?, Some(&flow))?;
    let grad = g.read(s, &c.input(1)?)?;
    Ok(vec![None, None, Some(grad), Some(flow)])
}

/// `gather(indices)`: the gradient scattered into the gradient array.
fn gather_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (indices, flow, grad) = (c.input(1)?, c.input(2)?, c.grad(0)?);
    let g = forward(c, &flow, "dtype")?.grad(s, &grad_source(s)?, Some(&flow))?;
    let u = g.scatter(s, &indices, &grad)?;
    Ok(vec![None, None, Some(u.flow().clone())])
}

/// `scatter(indices, value)`: the value's gradient gathered from the gradient
/// array.
fn scatter_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let flow = write_barrier(c, &c.grad(0)?)?;
    let g = forward(c, &flow, "T")?.grad(s, &grad_source(s)?, Some(&flow))?;
    let grad = g.gather(s, &c.input(1)?)?;
    Ok(vec![None, None, Some(grad), Some(flow)])
}

/// `concat()`: the gradient split into the gradient array by the forward
/// lengths.
fn concat_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (flow, grad, lengths) = (c.input(1)?, c.grad(0)?, c.output(1)?);
    let g = forward(c, &flow, "dtype")?.grad(s, &grad_source(s)?, Some(&flow))?;
    let u = g.split(s, &grad, &lengths)?;
    Ok(vec![None, Some(u.flow().clone())])
}

/// `split(value, lengths)`: the value's gradient is the gradient array
/// concatenated.
fn split_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let flow = write_barrier(c, &c.grad(0)?)?;
    let g = forward(c, &flow, "T")?.grad(s, &grad_source(s)?, Some(&flow))?;
    let grad = g.concat(s)?;
    Ok(vec![None, Some(grad), None, Some(flow)])
}
