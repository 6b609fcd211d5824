//! The gradient of `Einsum`, as TensorFlow's `linalg_grad.py` builds it: the
//! gradient with respect to an operand is another einsum, of the output gradient
//! and the other operand, with the equation turned around
//! (`"{out},{other}->{input}"`). Labels only the operand has (reductions) are put
//! back by broadcasting (after an einsum that restores repeated labels or the
//! order, when those are involved), and the gradient of an operand whose
//! broadcast (`...`) dimensions were broadcast is summed back over them.
//!
//! Subscripts are handled as text, `...` included, as in TensorFlow.

use super::shapes::{reduced_shape, shape_of, static_dims};
use crate::builder::{Output, Scope};
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{DType, Result, Status};

type Grads = Result<Vec<Option<Output>>>;

const ELLIPSIS: &str = "...";

/// The labels of `subs` (its characters other than `.`).
fn labels(subs: &str) -> impl Iterator<Item = char> + '_ {
    subs.chars().filter(|&c| c != '.')
}

/// The axis of `label` in `subs`: from the start before the ellipsis, from the
/// end (negative) after it; the leftmost occurrence.
fn axis_of(subs: &str, label: char) -> Option<i64> {
    let mut parts = subs.splitn(2, ELLIPSIS);
    let head = parts.next().unwrap_or_default();
    if let Some(i) = head.find(label) {
        return Some(i as i64);
    }
    let tail = parts.next()?;
    tail.find(label).map(|i| i as i64 - tail.len() as i64)
}

/// `x[start..end]` for the ellipsis of `subs` (`end` counted from the end; `(0,
/// 0)` without one).
fn ellipsis_span(subs: &str) -> (usize, usize) {
    match subs.find(ELLIPSIS) {
        None => (0, 0),
        Some(start) => (start, subs.len() - start - ELLIPSIS.len()),
    }
}

/// The entries of the int32 vector `shape` at `axes` (negative from the end).
fn dims_at(s: &Scope, x: &Output, shape: &Output, axes: &[i64]) -> Result<Output> {
    if let Some(d) = static_dims(x) {
        let r = d.len() as i64;
        let v: Vec<i64> = axes
            .iter()
            .map(|&a| d[a.rem_euclid(r) as usize] as i64)
            .collect();
        return ops::index_vector(s, &v);
    }
    let idx = ops::floor_mod(s, &ops::index_vector(s, axes)?, &ops::rank(s, x)?)?;
    ops::gather_along(s, shape, &idx, 0)
}

/// The gradient of the unary einsum `input_subs -> output_subs` that sums the
/// labels of `reduced` (TensorFlow's `_GetGradReduced`).
fn grad_reduced(
    s: &Scope,
    output_grad: &Output,
    output_subs: &str,
    input_subs: &str,
    input: &Output,
    reduced: &[char],
) -> Result<Output> {
    let shape = shape_of(s, input, DType::I32)?;
    let reduced_subs: String = reduced.iter().collect();
    let axes: Vec<i64> = reduced
        .iter()
        .map(|&l| axis_of(input_subs, l).ok_or_else(|| Status::internal("label not found")))
        .collect::<Result<_>>()?;
    let has_repeats = |t: &str| {
        let v: Vec<char> = labels(t).collect();
        v.iter().enumerate().any(|(i, c)| v[i + 1..].contains(c))
    };
    let kept: String = input_subs
        .chars()
        .filter(|c| !reduced.contains(c))
        .collect();
    if !has_repeats(input_subs) && !has_repeats(output_subs) && kept == output_subs {
        // Broadcasting the gradient, reshaped with 1s at the reduced axes, is enough.
        let kept_shape = reduced_shape(s, input, &ops::index_vector(s, &axes)?)?;
        let g = ops::reshape(s, output_grad, &kept_shape)?;
        return ops::broadcast_to(s, &g, &shape);
    }
    // Prepend the reduced labels: broadcast to "reduced + output", then the einsum
    // back to the input's subscripts.
    let reduced_dims = dims_at(s, input, &shape, &axes)?;
    let grad_shape = ops::shape_typed(s, output_grad, DType::I32)?;
    let full = ops::concat_along(s, &[reduced_dims, grad_shape.clone()], 0)?;
    let ones = ops::index_vector(s, &vec![1; reduced.len()])?;
    let kept_shape = ops::concat_along(s, &[ones, grad_shape], 0)?;
    let g = ops::broadcast_to(s, &ops::reshape(s, output_grad, &kept_shape)?, &full)?;
    ops::einsum(
        s,
        &[g],
        &format!("{reduced_subs}{output_subs}->{input_subs}"),
    )
}

/// The labels of `input_subs` in none of `others` (in order, once each).
fn only_in(input_subs: &str, others: &[&str]) -> Vec<char> {
    let mut out = Vec::new();
    for l in labels(input_subs) {
        if !others.iter().any(|o| o.contains(l)) && !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// The gradient with respect to one operand of a binary einsum, before
/// un-broadcasting (TensorFlow's `_GetGradWrt`).
fn grad_wrt(
    s: &Scope,
    output_grad: &Output,
    other: &Output,
    input: &Output,
    input_subs: &str,
    other_subs: &str,
    output_subs: &str,
) -> Result<Output> {
    let reduced = only_in(input_subs, &[output_subs, other_subs]);
    let left: String = input_subs
        .chars()
        .filter(|c| !reduced.contains(c))
        .collect();
    let g = ops::einsum(
        s,
        &[output_grad.clone(), other.clone()],
        &format!("{output_subs},{other_subs}->{left}"),
    )?;
    if reduced.is_empty() {
        return Ok(g);
    }
    grad_reduced(s, &g, &left, input_subs, input, &reduced)
}

/// `g` summed over the axes `start + r` (`r` the broadcast reduction indices of
/// `x`'s ellipsis against `y`'s) and reshaped to `x`'s shape.
fn unbroadcast(s: &Scope, g: &Output, x: &Output, r: &Output, start: usize) -> Result<Output> {
    let axes = ops::add(s, r, &ops::scalar(s, start as i32)?)?;
    let summed = ops::sum(s, g, &axes, false)?;
    ops::reshape(s, &summed, &shape_of(s, x, DType::I32)?)
}

/// The ellipsis part of `x`'s shape (`start..rank - end`).
fn ellipsis_shape(s: &Scope, x: &Output, (start, end): (usize, usize)) -> Result<Output> {
    let shape = shape_of(s, x, DType::I32)?;
    let rank = ops::rank(s, x)?;
    let stop = ops::sub(s, &rank, &ops::scalar(s, end as i32)?)?;
    let len = ops::sub(s, &stop, &ops::scalar(s, start as i32)?)?;
    ops::slice(
        s,
        &shape,
        &ops::index_vector(s, &[start as i64])?,
        &ops::expand_dims_at(s, &len, 0)?,
    )
}

fn einsum_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let equation: String = c.node.get_attr("equation")?;
    let (input_subs, output_subs) = equation
        .split_once("->")
        .ok_or_else(|| Status::invalid_argument(format!("bad einsum equation {equation}")))?;
    let g = c.grad(0)?;
    if c.inputs.len() == 1 {
        let x = c.input(0)?;
        let reduced = only_in(input_subs, &[output_subs]);
        let gx = if reduced.is_empty() {
            ops::einsum(s, &[g], &format!("{output_subs}->{input_subs}"))?
        } else {
            grad_reduced(s, &g, output_subs, input_subs, &x, &reduced)?
        };
        return Ok(vec![Some(gx)]);
    }
    let (xs, ys) = input_subs
        .split_once(',')
        .ok_or_else(|| Status::invalid_argument(format!("bad einsum equation {equation}")))?;
    let (mut xs, mut ys) = (xs.to_owned(), ys.to_owned());
    if output_subs.contains(ELLIPSIS) {
        for sub in [&mut xs, &mut ys] {
            if !sub.contains(ELLIPSIS) {
                sub.push_str(ELLIPSIS);
            }
        }
    }
    let (x, y) = (c.input(0)?, c.input(1)?);
    let gx = grad_wrt(s, &g, &y, &x, &xs, &ys, output_subs)?;
    let gy = grad_wrt(s, &g, &x, &y, &ys, &xs, output_subs)?;
    if !output_subs.contains(ELLIPSIS) {
        return Ok(vec![Some(gx), Some(gy)]);
    }
    let (bx, by) = (ellipsis_span(&xs), ellipsis_span(&ys));
    if let (Some(dx), Some(dy)) = (static_dims(&x), static_dims(&y)) {
        if dx[bx.0..dx.len() - bx.1] == dy[by.0..dy.len() - by.1] {
            return Ok(vec![Some(gx), Some(gy)]);
        }
    }
    let (rx, ry) =
        ops::broadcast_gradient_args(s, &ellipsis_shape(s, &x, bx)?, &ellipsis_shape(s, &y, by)?)?;
    Ok(vec![
        Some(unbroadcast(s, &gx, &x, &rx, bx.0)?),
        Some(unbroadcast(s, &gy, &y, &ry, by.0)?),
    ])
}

/// Registers Einsum's gradient.
pub(super) fn register(r: &GradientRegistry) {
    r.register("Einsum", einsum_grad);
}
