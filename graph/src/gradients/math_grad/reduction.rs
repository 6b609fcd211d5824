//! Gradients of the reductions (`Sum`, `Mean`, `Max`, `Min`, `Prod`, with
//! `keep_dims` and negative axes) and the scans (`Cumsum`, `Cumprod`), as
//! TensorFlow's `math_grad.py`: the incoming gradient is
//! reshaped to the kept-dimensions shape and broadcast back to the input.

use super::shapes::{
    all_axes, constant_ints, dynamic_axis_mask, float_scalar, int_const, reduced_shape, shape_of,
    static_axes, static_dims, to_i32,
};
use crate::builder::{Output, Scope};
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{DType, Result};

type Grads = Result<Vec<Option<Output>>>;

/// `grad` reshaped to the kept-dimensions shape (unless the op kept them).
fn grad_kept_dims(c: &GradContext<'_>, g: &Output) -> Result<Output> {
    let keep: bool = c.node.get_attr_or("keep_dims", false)?;
    if keep {
        return Ok(g.clone());
    }
    let kept = reduced_shape(c.scope, &c.input(0)?, &c.input(1)?)?;
    ops::reshape(c.scope, g, &kept)
}

/// The gradient of `Sum`: the incoming gradient broadcast back to the input.
fn sum_like(c: &GradContext<'_>) -> Result<Output> {
    let s = c.scope;
    let x = c.input(0)?;
    let g = grad_kept_dims(c, &c.grad(0)?)?;
    ops::broadcast_to(s, &g, &shape_of(s, &x, DType::I32)?)
}

fn sum_grad(c: &GradContext<'_>) -> Grads {
    Ok(vec![Some(sum_like(c)?), None])
}

/// `Sum`'s gradient divided by the number of elements averaged.
fn mean_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let sum_grad = sum_like(c)?;
    let (x, y) = (c.input(0)?, c.output(0)?);
    let dt = sum_grad.dtype();
    let factor = match (static_dims(&x), static_dims(&y)) {
        (Some(dx), Some(dy)) => {
            let n_in: usize = dx.iter().product();
            let n_out: usize = dy.iter().product();
            float_scalar(s, (n_in / n_out.max(1)) as f64, dt)?
        }
        _ => {
            let n_in = ops::prod_axes(s, &ops::shape(s, &x)?, &[0], false)?;
            let n_out = ops::prod_axes(s, &ops::shape(s, &y)?, &[0], false)?;
            let n_out = ops::maximum(s, &n_out, &ops::scalar(s, 1i32)?)?;
            ops::cast(s, &ops::floor_div(s, &n_in, &n_out)?, dt)?
        }
    };
    Ok(vec![Some(ops::real_div(s, &sum_grad, &factor)?), None])
}

/// `Max` and `Min`: the gradient goes to the selected elements, split evenly
/// between ties.
fn min_max_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let x = c.input(0)?;
    let y = grad_kept_dims(c, &c.output(0)?)?;
    let g = grad_kept_dims(c, &c.grad(0)?)?;
    let indicators = ops::cast(s, &ops::equal(s, &y, &x)?, g.dtype())?;
    let counts = ops::sum(s, &indicators, &c.input(1)?, true)?;
    let share = ops::real_div(s, &indicators, &counts)?;
    Ok(vec![Some(ops::mul(s, &share, &g)?), None])
}

/// The reduced axes and the others, as int32 vectors, and their concatenation
/// (the permutation moving the reduced axes first).
struct AxisSplit {
    reduced: Output,
    other: Output,
    perm: Output,
}

fn split_axes(s: &Scope, x: &Output, axes: &Output) -> Result<AxisSplit> {
    if let Some(rank) = x.shape().rank() {
        if let Some(mut red) = static_axes(s, axes, rank)? {
            red.sort_unstable();
            red.dedup();
            let other: Vec<i64> = (0..rank)
                .filter(|i| !red.contains(i))
                .map(|i| i as i64)
                .collect();
            let red: Vec<i64> = red.iter().map(|&i| i as i64).collect();
            let perm: Vec<i64> = red.iter().chain(&other).copied().collect();
            return Ok(AxisSplit {
                reduced: int_const(s, &red, DType::I32)?,
                other: int_const(s, &other, DType::I32)?,
                perm: int_const(s, &perm, DType::I32)?,
            });
        }
    }
    let rank = ops::rank(s, x)?;
    let flat = ops::reshape_to(s, &to_i32(s, axes)?, &[-1])?;
    let reduced = ops::floor_mod(s, &flat, &rank)?;
    let mask = dynamic_axis_mask(s, x, axes)?;
    let others = ops::where_(s, &ops::logical_not(s, &mask)?)?;
    let other = ops::cast(s, &ops::reshape_to(s, &others, &[-1])?, DType::I32)?;
    let perm = ops::concat_along(s, &[reduced.clone(), other.clone()], 0)?;
    Ok(AxisSplit {
        reduced,
        other,
        perm,
    })
}

/// The product of the dims of `x` at `axes` (an int32 scalar).
fn dims_product(s: &Scope, x: &Output, axes: &Output) -> Result<Output> {
    if let (Some(d), Some(a)) = (static_dims(x), constant_ints(s, axes)) {
        let p: i64 = a.iter().map(|&i| d[i as usize] as i64).product();
        return ops::index_scalar(s, p);
    }
    let picked = ops::gather_along(s, &ops::shape(s, x)?, axes, 0)?;
    ops::prod_axes(s, &picked, &[0], false)
}

/// `Prod`: each element's gradient is the product of the others in its reduction
/// group, computed without division (so zeros work) as the product of an exclusive
/// forward and an exclusive reverse `Cumprod` over the reduced axes moved first.
fn prod_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let x = c.input(0)?;
    let in_shape = shape_of(s, &x, DType::I32)?;
    let g = grad_kept_dims(c, &c.grad(0)?)?;
    let g = ops::broadcast_to(s, &g, &in_shape)?;
    let split = split_axes(s, &x, &c.input(1)?)?;
    let reduced_num = dims_product(s, &x, &split.reduced)?;
    let other_num = dims_product(s, &x, &split.other)?;
    let permuted = ops::transpose(s, &x, &split.perm)?;
    let permuted_shape = ops::shape(s, &permuted)?;
    let matrix_shape = ops::pack(s, &[reduced_num, other_num], 0)?;
    let reshaped = ops::reshape(s, &permuted, &matrix_shape)?;
    let zero = ops::scalar(s, 0i32)?;
    let left = ops::cumprod(s, &reshaped, &zero, true, false)?;
    let right = ops::cumprod(s, &reshaped, &zero, true, true)?;
    let y = ops::reshape(s, &ops::mul(s, &left, &right)?, &permuted_shape)?;
    let inv = ops::invert_permutation(s, &split.perm)?;
    let out = ops::mul(s, &g, &ops::transpose(s, &y, &inv)?)?;
    Ok(vec![Some(ops::reshape(s, &out, &in_shape)?), None])
}

fn scan_attrs(c: &GradContext<'_>) -> Result<(bool, bool)> {
    Ok((
        c.node.get_attr_or("exclusive", false)?,
        c.node.get_attr_or("reverse", false)?,
    ))
}

/// `Cumsum`: the gradient scanned the other way.
fn cumsum_grad(c: &GradContext<'_>) -> Grads {
    let (exclusive, reverse) = scan_attrs(c)?;
    let g = ops::cumsum(c.scope, &c.grad(0)?, &c.input(1)?, exclusive, !reverse)?;
    Ok(vec![Some(g), None])
}

/// `Cumprod`: `cumsum(prod * g, reversed) / x` (TensorFlow's; undefined where `x`
/// is 0).
fn cumprod_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (exclusive, reverse) = scan_attrs(c)?;
    let (x, axis) = (c.input(0)?, c.input(1)?);
    let prod = ops::cumprod(s, &x, &axis, exclusive, reverse)?;
    let pg = ops::mul(s, &prod, &c.grad(0)?)?;
    let out = ops::cumsum(s, &pg, &axis, exclusive, !reverse)?;
    Ok(vec![Some(ops::real_div(s, &out, &x)?), None])
}

/// The sum of every element of `g` (a scalar).
pub(crate) fn sum_all(s: &Scope, g: &Output) -> Result<Output> {
    ops::sum(s, g, &all_axes(s, g)?, false)
}

/// Registers the reduction and scan gradients.
pub(super) fn register(r: &GradientRegistry) {
    r.register("Sum", sum_grad);
    r.register("Mean", mean_grad);
    r.register("Max", min_max_grad);
    r.register("Min", min_max_grad);
    r.register("Prod", prod_grad);
    r.register("Cumsum", cumsum_grad);
    r.register("Cumprod", cumprod_grad);
    for op in ["ArgMax", "ArgMin", "All", "Any"] {
        r.not_differentiable(op);
    }
}
