//! Data-parallel training (whitepaper §7, Figure 7): one model, replicated on
//! several devices, whose variables live on a parameter device. Each replica
//! builds its forward pass and its gradients on its own device; the updates run
//! where the variables are (optimizers colocate them), so partitioning turns the
//! gradients into Send/Recv pairs towards the parameter device and the variables'
//! values into pairs back.
//!
//! - [`ReplicaMode::Sync`]: the replicas' gradients are averaged (on the
//!   variable's device) and applied once: one train op per step, equivalent to one
//!   replica on the concatenated batch when the loss is a mean.
//! - [`ReplicaMode::Async`]: every replica applies its own gradients — one train op
//!   per replica, meant to be run by independent client threads (Downpour-style).
//!
//! Model parallelism needs no helper: put layers in different device scopes
//! (`Scope::with_device`), and placement and partitioning do the rest.

use crate::builder::{Operation, Output, Scope};
use crate::ops;
use crate::train::optimizer::{constant_of, GradAndVar, Optimizer};
use crate::train::variables::{trainable_variables, VarRef};
use crate::{Result, Status};

/// How the replicas' gradients reach the variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaMode {
    /// Average the gradients of all replicas; one update per step.
    Sync,
    /// Each replica applies its own gradients.
    Async,
}

/// What [`replicate_minimize`] built.
#[derive(Clone, Debug)]
pub struct Replicated {
    /// Each replica's loss, in device order.
    pub losses: Vec<Output>,
    /// [`ReplicaMode::Sync`]: one op running every replica and the averaged update.
    /// [`ReplicaMode::Async`]: one op per replica, in device order.
    pub train_ops: Vec<Operation>,
}

/// The average of each variable's gradient over `per_replica` (each replica's
/// [`Optimizer::compute_gradients`], over the same variables in the same order),
/// built colocated with the variable. A variable without a gradient in every
/// replica has none; one with a gradient in only some replicas is
/// `InvalidArgument` (the replicas are not the same model).
pub fn average_gradients(s: &Scope, per_replica: &[Vec<GradAndVar>]) -> Result<Vec<GradAndVar>> {
    let Some(first) = per_replica.first() else {
        return Err(Status::invalid_argument("no replicas to average"));
    };
    let mut out = Vec::with_capacity(first.len());
    for (i, gv) in first.iter().enumerate() {
        let mut grads = Vec::with_capacity(per_replica.len());
        for (r, replica) in per_replica.iter().enumerate() {
            let other = replica.get(i).filter(|o| o.var.name() == gv.var.name());
            let Some(other) = other else {
                return Err(Status::invalid_argument(format!(
                    "replica {r} has no gradient entry for variable '{}' at position {i}",
                    gv.var.name()
                )));
            };
            grads.extend(other.grad.clone());
        }
        let grad = match grads.len() {
            0 => None,
            n if n != per_replica.len() => {
                return Err(Status::invalid_argument(format!(
                    "variable '{}' has a gradient in {n} of {} replicas",
                    gv.var.name(),
                    per_replica.len()
                )))
            }
            1 => Some(grads.remove(0)),
            n => {
                let vs = s
                    .with_name_scope(&format!("average_{}", gv.var.name()))
                    .colocate_with(gv.var.op());
                let dense = grads
                    .iter()
                    .map(|g| g.to_dense(&vs))
                    .collect::<Result<Vec<_>>>()?;
                let sum = ops::add_n(&vs, &dense)?;
                let scale = constant_of(&vs, gv.var.dtype(), 1.0 / n as f64, "scale")?;
                Some(ops::mul(&vs, &sum, &scale)?.into())
            }
        };
        out.push(GradAndVar {
            grad,
            var: gv.var.clone(),
        });
    }
    Ok(out)
}

/// Builds `model` once per device in `devices` (in a name scope `replica_<i>` on
/// that device; `model(scope, i)` returns replica `i`'s loss, reading variables
/// created beforehand on the parameter device), the gradients of each loss on its
/// replica's device with respect to `var_list` (default: the trainable variables),
/// and the updates of `optimizer` as `mode` says. `global_step` is incremented once
/// per update (once per step in sync mode, once per replica step in async mode).
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::ops::{self, Variable};
/// use actorflow_graph::train::{replicate_minimize, GradientDescentOptimizer, ReplicaMode};
/// use actorflow_graph::{DType, Shape, Tensor};
/// let s = Scope::new();
/// let ps = s.with_device("/device:CPU:0");
/// let w = Variable::new(&ps, "w", &ops::constant(&ps, Tensor::vector(&[0.0f32, 0.0])).unwrap(), true).unwrap();
/// let r = replicate_minimize(
///     &s,
///     &GradientDescentOptimizer::new(0.1),
///     &["/device:CPU:1", "/device:CPU:2"],
///     ReplicaMode::Sync,
///     None,
///     None,
///     |rs, _| {
///         let x = ops::placeholder(rs, DType::F32, Shape::known(&[2]))?;
///         let d = ops::sub(rs, &w.value, &x)?;
///         ops::sum_axes(rs, &ops::mul(rs, &d, &d)?, &[0], false)
///     },
/// )
/// .unwrap();
/// assert_eq!((r.losses.len(), r.train_ops.len()), (2, 1));
/// ```
pub fn replicate_minimize<O: Optimizer + ?Sized>(
    s: &Scope,
    optimizer: &O,
    devices: &[&str],
    mode: ReplicaMode,
    global_step: Option<&VarRef>,
    var_list: Option<&[VarRef]>,
    mut model: impl FnMut(&Scope, usize) -> Result<Output>,
) -> Result<Replicated> {
    if devices.is_empty() {
        return Err(Status::invalid_argument(
            "replicate_minimize needs at least one device",
        ));
    }
    let vars = match var_list {
        Some(v) => v.to_vec(),
        None => trainable_variables(s)?,
    };
    let mut losses = Vec::with_capacity(devices.len());
    let mut grads = Vec::with_capacity(devices.len());
    for (i, device) in devices.iter().enumerate() {
        let rs = s
            .with_device(device)
            .with_name_scope(&format!("replica_{i}"));
        let loss = model(&rs, i)?;
        grads.push(optimizer.compute_gradients(&rs, &loss, Some(&vars))?);
        losses.push(loss);
    }
    let train_ops = match mode {
        ReplicaMode::Sync => {
            let avg = average_gradients(&s.with_name_scope("average_gradients"), &grads)?;
            vec![optimizer.apply_gradients(s, &avg, global_step)?]
        }
        ReplicaMode::Async => grads
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let rs = s.with_name_scope(&format!("replica_{i}"));
                optimizer.apply_gradients(&rs, g, global_step)
            })
            .collect::<Result<_>>()?,
    };
    Ok(Replicated { losses, train_ops })
}
