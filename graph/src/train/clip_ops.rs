//! Gradient clipping as graph ops, with TensorFlow's formulas
//! (`tf.clip_by_norm`, `tf.linalg.global_norm`, `tf.clip_by_global_norm`):
//!
//! - [`global_norm`] — `sqrt(2 * sum(l2_loss(t)))` over a list of tensors, each
//!   `L2Loss` colocated with its tensor.
//! - [`clip_by_global_norm`] — every tensor scaled by
//!   `clip_norm * min(1 / global_norm, 1 / clip_norm)`; a NaN or infinite global
//!   norm makes every output NaN (the scale gains `global_norm - global_norm`),
//!   as TensorFlow's does, so a diverged step shows instead of being hidden.
//! - [`clip_gradients_by_global_norm`] — the same over `compute_gradients`'s
//!   pairs: a sparse gradient counts by its rows' values (as TensorFlow counts
//!   `IndexedSlices`) and keeps its indices.
//! - [`clip_by_norm`] — one tensor scaled so that its L2 norm over `axes`
//!   (default: all) is at most `clip_norm`: `t * clip_norm / max(norm,
//!   clip_norm)`, a zero tensor left alone.
//!
//! Each builds its ops under a name scope of TensorFlow's name
//! (`global_norm/…`, `clip_by_global_norm/…`, `clip_by_norm/…`), the result
//! named after the function inside it (`global_norm/global_norm`,
//! `clip_by_norm/clip_by_norm`).

use crate::builder::{Output, Scope};
use crate::gradients::{Gradient, IndexedSlices};
use crate::ops;
use crate::train::optimizer::{GradAndVar, Hyper};
use crate::{Result, Status};

/// The global norm of `t_list`: `sqrt(sum over t of sum(t²))`, built as
/// TensorFlow builds it (`L2Loss` per tensor, stacked, summed, times 2,
/// square-rooted), under the name scope `global_norm`; the last op is named
/// `global_norm/global_norm`. The tensors must share one float dtype;
/// an empty list is `InvalidArgument`.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::{ops, train, Tensor};
/// let s = Scope::new();
/// let a = ops::constant(&s, Tensor::vector(&[3.0f32])).unwrap();
/// let b = ops::constant(&s, Tensor::vector(&[4.0f32])).unwrap();
/// let norm = train::global_norm(&s, &[a, b]).unwrap(); // 5 when run
/// assert_eq!(norm.name(), "global_norm/global_norm:0");
/// ```
pub fn global_norm(s: &Scope, t_list: &[Output]) -> Result<Output> {
    let first = t_list
        .first()
        .ok_or_else(|| Status::invalid_argument("global_norm of an empty list of tensors"))?;
    let dtype = first.dtype();
    if !dtype.is_float() {
        return Err(Status::invalid_argument(format!(
            "global_norm takes float tensors, {} is {dtype}",
            first.name()
        )));
    }
    if let Some(t) = t_list.iter().find(|t| t.dtype() != dtype) {
        return Err(Status::invalid_argument(format!(
            "global_norm takes tensors of one dtype: {} is {dtype}, {} is {}",
            first.name(),
            t.name(),
            t.dtype()
        )));
    }
    let ns = s.with_name_scope("global_norm");
    let mut half_squared = Vec::with_capacity(t_list.len());
    for t in t_list {
        half_squared.push(ops::l2_loss(&ns.colocate_with(t.op()), t)?);
    }
    let stacked = ops::pack(&ns, &half_squared, 0)?;
    let sum = ops::sum_axes(&ns, &stacked, &[0], false)?;
    let two = Hyper::Value(2.0).to_output(&ns, dtype, "two")?;
    let squared = ops::mul(&ns, &sum, &two)?;
    ns.op("Sqrt").name("global_norm").input(&squared).build1()
}

/// Clips `t_list` by the ratio of `clip_norm` to their global norm
/// (`tf.clip_by_global_norm`): returns the scaled tensors and the global norm.
/// When the global norm is at most `clip_norm` the tensors come back unchanged
/// in value; above it, each is multiplied by `clip_norm / global_norm`. A NaN
/// or infinite global norm gives NaN everywhere. `clip_norm` is a positive
/// scalar (a constant, or a tensor cast to the norm's dtype).
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::{ops, train, Tensor};
/// let s = Scope::new();
/// let g = ops::constant(&s, Tensor::vector(&[3.0f32, 4.0])).unwrap();
/// let (clipped, norm) = train::clip_by_global_norm(&s, &[g], 1.0).unwrap();
/// // when run: clipped[0] = [0.6, 0.8], norm = 5
/// assert_eq!(clipped.len(), 1);
/// # let _ = norm;
/// ```
pub fn clip_by_global_norm(
    s: &Scope,
    t_list: &[Output],
    clip_norm: impl Into<Hyper>,
) -> Result<(Vec<Output>, Output)> {
    let norm = global_norm(s, t_list)?;
    let clipped = clip_by_global_norm_with(s, t_list, clip_norm.into(), &norm)?;
    Ok((clipped, norm))
}

/// [`clip_by_global_norm`] with a global norm already computed (TensorFlow's
/// `use_norm`).
pub fn clip_by_global_norm_with(
    s: &Scope,
    t_list: &[Output],
    clip_norm: Hyper,
    use_norm: &Output,
) -> Result<Vec<Output>> {
    let ns = s.with_name_scope("clip_by_global_norm");
    let dtype = use_norm.dtype();
    let clip = clip_norm.to_output(&ns, dtype, "clip_norm")?;
    let one = Hyper::Value(1.0).to_output(&ns, dtype, "one")?;
    // scale = clip_norm * min(1 / norm, 1 / clip_norm), + (norm - norm) so
    // that a NaN or infinite norm poisons the scale
    let finite = ops::mul(
        &ns,
        &clip,
        &ops::minimum(
            &ns,
            &ops::real_div(&ns, &one, use_norm)?,
            &ops::real_div(&ns, &one, &clip)?,
        )?,
    )?;
    let scale = ops::add(&ns, &finite, &ops::sub(&ns, use_norm, use_norm)?)?;
    let mut out = Vec::with_capacity(t_list.len());
    for (i, t) in t_list.iter().enumerate() {
        let cs = ns.colocate_with(t.op());
        let scale_t = if t.dtype() == dtype {
            scale.clone()
        } else {
            ops::cast(&cs, &scale, t.dtype())?
        };
        let scaled = ops::mul(&cs, t, &scale_t)?;
        out.push(
            cs.op("Identity")
                .name(&format!("clip_by_global_norm_{i}"))
                .input(&scaled)
                .build1()?,
        );
    }
    Ok(out)
}

/// [`clip_by_global_norm`] over gradients paired with their variables (what
/// [`Optimizer::compute_gradients`](crate::train::Optimizer::compute_gradients)
/// returns): the global norm counts each dense gradient and the rows of each
/// sparse one (TensorFlow's `IndexedSlices` values, duplicates not summed);
/// sparse gradients come back with their indices; pairs without a gradient
/// stay without. Returns the clipped pairs and the global norm; no gradient at
/// all is `InvalidArgument`.
pub fn clip_gradients_by_global_norm(
    s: &Scope,
    grads_and_vars: &[GradAndVar],
    clip_norm: impl Into<Hyper>,
) -> Result<(Vec<GradAndVar>, Output)> {
    let values: Vec<Output> = grads_and_vars
        .iter()
        .filter_map(|gv| match &gv.grad {
            Some(Gradient::Dense(g)) => Some(g.clone()),
            Some(Gradient::Sparse(g)) => Some(g.values.clone()),
            None => None,
        })
        .collect();
    let norm = global_norm(s, &values)?;
    let mut clipped = clip_by_global_norm_with(s, &values, clip_norm.into(), &norm)?.into_iter();
    let mut out = Vec::with_capacity(grads_and_vars.len());
    for gv in grads_and_vars {
        let grad = match &gv.grad {
            None => None,
            Some(g) => {
                let c = clipped
                    .next()
                    .ok_or_else(|| Status::internal("one clipped tensor per gradient"))?;
                Some(match g {
                    Gradient::Dense(_) => Gradient::Dense(c),
                    Gradient::Sparse(g) => Gradient::Sparse(IndexedSlices {
                        values: c,
                        indices: g.indices.clone(),
                        dense_shape: g.dense_shape.clone(),
                    }),
                })
            }
        };
        out.push(GradAndVar {
            grad,
            var: gv.var.clone(),
        });
    }
    Ok((out, norm))
}

/// Clips `t` so that its L2 norm over `axes` (all axes when `None`) is at most
/// `clip_norm` (`tf.clip_by_norm`): `t * clip_norm / max(norm, clip_norm)`,
/// where a zero norm leaves `t` unchanged (and gives no NaN). A negative
/// `clip_norm` counts as zero.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::{ops, train, Tensor};
/// let s = Scope::new();
/// let t = ops::constant(&s, Tensor::new(&[2, 2], vec![3.0f32, 4.0, 0.3, 0.4]).unwrap()).unwrap();
/// // each row to norm at most 1: [[0.6, 0.8], [0.3, 0.4]] when run
/// let clipped = train::clip_by_norm(&s, &t, 1.0, Some(&[1])).unwrap();
/// assert_eq!(clipped.shape(), t.shape());
/// ```
pub fn clip_by_norm(
    s: &Scope,
    t: &Output,
    clip_norm: impl Into<Hyper>,
    axes: Option<&[i64]>,
) -> Result<Output> {
    let ns = s.with_name_scope("clip_by_norm");
    let dtype = t.dtype();
    if !dtype.is_float() {
        return Err(Status::invalid_argument(format!(
            "clip_by_norm takes a float tensor, {} is {dtype}",
            t.name()
        )));
    }
    let clip = match clip_norm.into() {
        Hyper::Value(v) => Hyper::Value(v.max(0.0)).to_output(&ns, dtype, "clip_norm")?,
        h @ Hyper::Tensor(_) => {
            let c = h.to_output(&ns, dtype, "clip_norm")?;
            let zero = Hyper::Value(0.0).to_output(&ns, dtype, "zero")?;
            ops::maximum(&ns, &c, &zero)?
        }
    };
    let squares = ops::mul(&ns, t, t)?;
    let l2sum = match axes {
        Some(axes) => ops::sum_axes(&ns, &squares, axes, true)?,
        None => match t.shape().rank() {
            Some(rank) => {
                let all: Vec<i64> = (0..rank as i64).collect();
                ops::sum_axes(&ns, &squares, &all, true)?
            }
            None => {
                let zero = ops::scalar(&ns, 0i32)?;
                let one = ops::scalar(&ns, 1i32)?;
                let all = ops::range(&ns, &zero, &ops::rank(&ns, t)?, &one)?;
                ops::sum(&ns, &squares, &all, true)?
            }
        },
    };
    // sqrt only where the sum is positive (no NaN gradient through sqrt(0))
    let zero = Hyper::Value(0.0).to_output(&ns, dtype, "zero_norm")?;
    let positive = ops::greater(&ns, &l2sum, &zero)?;
    let safe = ops::select_v2(&ns, &positive, &l2sum, &ops::ones_like(&ns, &l2sum)?)?;
    let l2norm = ops::select_v2(&ns, &positive, &ops::sqrt(&ns, &safe)?, &l2sum)?;
    let scaled = ops::mul(&ns, t, &clip)?;
    let clipped = ops::real_div(&ns, &scaled, &ops::maximum(&ns, &l2norm, &clip)?)?;
    ns.op("Identity")
        .name("clip_by_norm")
        .input(&clipped)
        .build1()
}
