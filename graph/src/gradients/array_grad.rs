//! Gradients of the array ops (TensorFlow's `array_grad.py`): reshapes and
//! layout changes are undone on the gradient (`Reshape` to the input's shape,
//! `Transpose` by the inverse permutation, `Unpack` of a `Pack`, a `SplitV` of a
//! concatenation, …), `Tile` and `BroadcastTo` sum over the copies, `Pad` slices
//! the padding off, and the shape-valued ops are not differentiable.
//!
//! - `index`: Slice, StridedSlice, StridedSliceGrad, Gather, GatherV2.
//! - `space`: SpaceToBatchND, BatchToSpaceND, SpaceToBatch, BatchToSpace,
//!   SpaceToDepth, DepthToSpace.
//! - `scatter`: GatherNd, ScatterNd, TensorScatter*, ReverseSequence, MatrixBandPart.

pub(crate) mod index;
mod scatter;
mod space;

use crate::builder::Output;
use crate::gradients::math_grad::reduction::sum_all;
use crate::gradients::math_grad::shapes::{
    constant_ints, int_const, shape_of, static_dims, sum_to_operand, to_i32,
};
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{DType, Result, Status};

type Grads = Result<Vec<Option<Output>>>;

/// `[Reshape(g, shape(x)), None…]` for ops that only change the shape.
fn reshape_like_input(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let x = c.input(0)?;
    let g = ops::reshape(s, &c.grad(0)?, &shape_of(s, &x, DType::I32)?)?;
    let mut out = vec![Some(g)];
    out.resize(c.inputs.len(), None);
    Ok(out)
}

/// `Transpose` by the inverse permutation (constant when `perm` is).
fn transpose_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let perm = c.input(1)?;
    let inv = match constant_ints(s, &perm) {
        Some(p) => {
            let mut inv = vec![0i64; p.len()];
            for (i, &d) in p.iter().enumerate() {
                let slot = usize::try_from(d)
                    .ok()
                    .and_then(|d| inv.get_mut(d))
                    .ok_or_else(|| {
                        Status::invalid_argument(format!("invalid permutation {p:?}"))
                    })?;
                *slot = i as i64;
            }
            int_const(s, &inv, perm.dtype())?
        }
        None => ops::invert_permutation(s, &perm)?,
    };
    Ok(vec![Some(ops::transpose(s, &c.grad(0)?, &inv)?), None])
}

/// The gradient of a concatenation of `values` along `axis`: a `SplitV` of the
/// incoming gradient into pieces as long as each value along the axis.
fn concat_pieces(c: &GradContext<'_>, values: &[Output], axis: &Output) -> Result<Vec<Output>> {
    let s = c.scope;
    let g = c.grad(0)?;
    if values.len() == 1 {
        return Ok(vec![g]);
    }
    let rank = values[0].shape().rank();
    let static_axis = match (constant_ints(s, axis), rank) {
        (Some(a), Some(r)) if a.len() == 1 && r > 0 => {
            let r = r as i64;
            if a[0] < -r || a[0] >= r {
                return Err(Status::invalid_argument(format!(
                    "ConcatOp : Expected concatenating dimensions in the range [{}, {r}), but got {}",
                    -r, a[0]
                )));
            }
            Some(a[0].rem_euclid(r) as usize)
        }
        _ => None,
    };
    let (sizes, axis) = match static_axis {
        Some(a) => {
            let known: Option<Vec<i64>> = values
                .iter()
                .map(|v| v.shape().dim(a).map(|d| d as i64))
                .collect();
            let sizes = match known {
                Some(k) => int_const(s, &k, DType::I32)?,
                None => {
                    let parts = values
                        .iter()
                        .map(|v| ops::slice_at(s, &ops::shape(s, v)?, &[a as i64], &[1]))
                        .collect::<Result<Vec<_>>>()?;
                    ops::concat_along(s, &parts, 0)?
                }
            };
            (sizes, ops::index_scalar(s, a as i64)?)
        }
        None => {
            let axis = ops::floor_mod(s, &to_i32(s, axis)?, &ops::rank(s, &values[0])?)?;
            let begin = ops::expand_dims_at(s, &axis, 0)?;
            let one = ops::index_vector(s, &[1])?;
            let parts = values
                .iter()
                .map(|v| ops::slice(s, &ops::shape(s, v)?, &begin, &one))
                .collect::<Result<Vec<_>>>()?;
            (ops::concat_along(s, &parts, 0)?, axis)
        }
    };
    ops::split_v(s, &g, &sizes, &axis, values.len())
}

fn concat_v2_grad(c: &GradContext<'_>) -> Grads {
    let n = c.inputs.len() - 1;
    let pieces = concat_pieces(c, &c.inputs[..n], &c.input(n)?)?;
    let mut out: Vec<Option<Output>> = pieces.into_iter().map(Some).collect();
    out.push(None);
    Ok(out)
}

fn concat_grad(c: &GradContext<'_>) -> Grads {
    let pieces = concat_pieces(c, &c.inputs[1..], &c.input(0)?)?;
    Ok(std::iter::once(None)
        .chain(pieces.into_iter().map(Some))
        .collect())
}

/// The gradients of every output (zeros where none flows in).
fn all_grads(c: &GradContext<'_>) -> Result<Vec<Output>> {
    (0..c.op.num_outputs()).map(|i| c.grad(i)).collect()
}

/// `Split(axis, value)`: the outputs' gradients concatenated.
fn split_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::concat(c.scope, &all_grads(c)?, &c.input(0)?)?;
    Ok(vec![None, Some(g)])
}

/// `SplitV(value, sizes, axis)`: the outputs' gradients concatenated.
fn split_v_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::concat(c.scope, &all_grads(c)?, &c.input(2)?)?;
    Ok(vec![Some(g), None, None])
}

fn pack_grad(c: &GradContext<'_>) -> Grads {
    let axis: i64 = c.node.get_attr_or("axis", 0)?;
    let parts = ops::unstack(c.scope, &c.grad(0)?, c.inputs.len(), axis)?;
    Ok(parts.into_iter().map(Some).collect())
}

fn unpack_grad(c: &GradContext<'_>) -> Grads {
    let axis: i64 = c.node.get_attr_or("axis", 0)?;
    Ok(vec![Some(ops::pack(c.scope, &all_grads(c)?, axis)?)])
}

/// `Tile`: the gradient reshaped to `[m0, d0, m1, d1, …]` and summed over the
/// multiples.
fn tile_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, multiples, g) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let (split_shape, axes) = match (static_dims(&x), constant_ints(s, &multiples)) {
        (Some(d), Some(m)) if d.len() == m.len() => {
            let split: Vec<i64> = m
                .iter()
                .zip(&d)
                .flat_map(|(&m, &d)| [m, d as i64])
                .collect();
            let axes: Vec<i64> = (0..d.len() as i64).map(|i| 2 * i).collect();
            (
                int_const(s, &split, DType::I32)?,
                int_const(s, &axes, DType::I32)?,
            )
        }
        _ => {
            let both = ops::pack(s, &[to_i32(s, &multiples)?, ops::shape(s, &x)?], 1)?;
            let split = ops::reshape_to(s, &both, &[-1])?;
            let (zero, two) = (ops::scalar(s, 0i32)?, ops::scalar(s, 2i32)?);
            let axes = ops::range(s, &zero, &ops::size(s, &split)?, &two)?;
            (split, axes)
        }
    };
    let summed = ops::sum(s, &ops::reshape(s, &g, &split_shape)?, &axes, false)?;
    let out = ops::reshape(s, &summed, &shape_of(s, &x, DType::I32)?)?;
    Ok(vec![Some(out), None])
}

/// `Pad`/`PadV2`: the gradient with the padding sliced off.
fn pad_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (x, paddings, g) = (c.input(0)?, c.input(1)?, c.grad(0)?);
    let dt = paddings.dtype();
    let begin = match (constant_ints(s, &paddings), x.shape().rank()) {
        (Some(p), Some(r)) if p.len() == 2 * r => {
            let before: Vec<i64> = p.chunks(2).map(|c| c[0]).collect();
            int_const(s, &before, dt)?
        }
        _ => {
            let size = ops::pack(s, &[ops::rank(s, &x)?, ops::scalar(s, 1i32)?], 0)?;
            let before = ops::slice(s, &paddings, &int_const(s, &[0, 0], DType::I32)?, &size)?;
            ops::reshape_to(s, &before, &[-1])?
        }
    };
    let sizes = shape_of(s, &x, dt)?;
    let mut out = vec![Some(ops::slice(s, &g, &begin, &sizes)?)];
    out.resize(c.inputs.len(), None);
    Ok(out)
}

/// `Fill(dims, value)`: the value gets the sum of the gradient.
fn fill_grad(c: &GradContext<'_>) -> Grads {
    Ok(vec![None, Some(sum_all(c.scope, &c.grad(0)?)?)])
}

/// `BroadcastTo(x, shape)`: summed over the broadcast axes.
fn broadcast_to_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let r = sum_to_operand(s, &c.input(0)?, &c.output(0)?)?;
    Ok(vec![Some(r.apply(s, &c.grad(0)?)?), None])
}

fn reverse_grad(c: &GradContext<'_>) -> Grads {
    let g = ops::reverse(c.scope, &c.grad(0)?, &c.input(1)?)?;
    Ok(vec![Some(g), None])
}

/// `IdentityN`: each gradient passes through.
fn identity_n_grad(c: &GradContext<'_>) -> Grads {
    Ok(c.grads.to_vec())
}

/// Registers the array gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    index::register(r);
    space::register(r);
    scatter::register(r);
    for op in ["Reshape", "ExpandDims", "Squeeze"] {
        r.register(op, reshape_like_input);
    }
    r.register("Transpose", transpose_grad);
    r.register("ConcatV2", concat_v2_grad);
    r.register("Concat", concat_grad);
    r.register("Split", split_grad);
    r.register("SplitV", split_v_grad);
    r.register("Pack", pack_grad);
    r.register("Unpack", unpack_grad);
    r.register("Tile", tile_grad);
    r.register("Pad", pad_grad);
    r.register("PadV2", pad_grad);
    r.register("Fill", fill_grad);
    r.register("BroadcastTo", broadcast_to_grad);
    r.register("ReverseV2", reverse_grad);
    r.register("IdentityN", identity_n_grad);
    for op in [
        "Shape",
        "ShapeN",
        "Size",
        "Rank",
        "ZerosLike",
        "OnesLike",
        "BroadcastArgs",
        "BroadcastGradientArgs",
        "InvertPermutation",
        "OneHot",
        "Where",
    ] {
        r.not_differentiable(op);
    }
}
