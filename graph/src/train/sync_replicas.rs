//! [`SyncReplicasOptimizer`] (`tf.compat.v1.train.SyncReplicasOptimizer`,
//! `sync_replicas_optimizer.py`): synchronous training with between-graph
//! replication. Every worker builds the same model and wraps its optimizer in a
//! `SyncReplicasOptimizer`; the workers then run their train ops as if alone,
//! and the chief's queue runner turns their gradients into one update per step:
//!
//! ```text
//! worker (train op, per step)                 chief (queue runner, per step)
//!   gradients at its local step                 take `replicas_to_aggregate`
//!   → AccumulatorApplyGradient (one per var)      from every accumulator (waits)
//!   → dequeue a token from sync_token_q         → the wrapped optimizer's update
//!   → local_step = token                          and global step + 1
//!                                               → enqueue `total_num_replicas`
//!                                                 tokens holding the new step
//! ```
//!
//! An accumulator drops gradients computed at a local step behind its global
//! step (a stale replica's), so every update averages gradients of the current
//! variables. Graph layout (names made unique as usual), as TensorFlow's:
//!
//! ```text
//! NoOp, sync_rep_local_step           the local step: a local variable
//!                                     colocated with the NoOp (on the worker)
//! Assign                              local_step_init_op: local step = global step
//! report_uninitialized_variables/…    ready_for_local_init_op
//! sync_replicas/conditional_accumulator, …/AccumulatorApplyGradient,
//!   …/AccumulatorTakeGradient         one accumulator per variable, with it,
//!                                     shared as `<var>:0/grad_accum`
//! <optimizer>/update_<var>/…          the wrapped optimizer's update (root scope)
//! sync_token_q, dummy_queue           FIFO queues on the global step's device
//! sync_token_q_Dequeue, Assign_1      the train op: token → local step
//! sync_token_q_EnqueueMany            the chief's sync op (after the update)
//! sync_replicas/SetGlobalStep…,       chief_init_op: local step and every
//!   sync_replicas/group_deps          accumulator's global step = global step
//! ```
//!
//! Before training, every worker runs its local variables' initializer and then
//! [`SyncReplicasOptimizer::local_step_init_op`] (the chief:
//! [`SyncReplicasOptimizer::chief_init_op`]) once
//! [`SyncReplicasOptimizer::ready_for_local_init_op`] reports no uninitialised
//! variable; the chief also runs [`SyncReplicasOptimizer::get_init_tokens_op`]
//! and starts [`SyncReplicasOptimizer::chief_queue_runner`]. The root crate's
//! `SyncReplicasHook` does all of this for a `MonitoredTrainingSession`.

use std::sync::Mutex;

use crate::builder::{Operation, Output, Scope};
use crate::ops::{self, AccumulatorOptions, ConditionalAccumulator, QueueOptions, QueueRunnerSpec};
use crate::train::optimizer::{group_named, GradAndVar, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{
    global_variables, report_uninitialized_variables, with_free_name, VarRef, LOCAL_VARIABLES,
};
use crate::{DType, Result, Shape, Status, Tensor, TensorShape};

/// What `apply_gradients` built (the accessors' answers).
#[derive(Clone)]
struct Built {
    /// The root name scope on the global step's device.
    global_step_scope: Scope,
    global_step: VarRef,
    local_step: VarRef,
    local_step_init_op: Operation,
    chief_init_op: Operation,
    ready_for_local_init_op: Output,
    sync_token_queue: Output,
    chief_queue_runner: QueueRunnerSpec,
    accumulators: Vec<(ConditionalAccumulator, VarRef)>,
}

/// Synchronous replicas around an optimizer; see the module docs.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::ops::{self, Variable};
/// use actorflow_graph::train::{self, GradientDescentOptimizer, Optimizer, SyncReplicasOptimizer};
/// use actorflow_graph::Tensor;
/// let s = Scope::new();
/// let w = Variable::new(&s, "w", &ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap(), true).unwrap();
/// let loss = ops::sum_axes(&s, &ops::mul(&s, &w.value, &w.value).unwrap(), &[0], false).unwrap();
/// let step = train::get_or_create_global_step(&s).unwrap();
/// let opt = SyncReplicasOptimizer::new(GradientDescentOptimizer::new(0.1), 2, Some(2));
/// let train_op = opt.minimize(&s, &loss, Some(&step), None).unwrap();
/// let chief = opt.chief_queue_runner().unwrap();
/// assert_eq!(chief.enqueue_ops, ["sync_token_q_EnqueueMany"]);
/// assert_eq!(train_op.op_type(), "Assign");
/// ```
pub struct SyncReplicasOptimizer<O: Optimizer> {
    opt: O,
    replicas_to_aggregate: usize,
    total_num_replicas: usize,
    name: String,
    built: Mutex<Option<Built>>,
}

impl<O: Optimizer> SyncReplicasOptimizer<O> {
    /// Wraps `opt`: each update averages `replicas_to_aggregate` gradients per
    /// variable; `total_num_replicas` (default: `replicas_to_aggregate`) workers
    /// run train ops (more than aggregated: backup workers; fewer: workers
    /// contribute several batches per update). Named `sync_replicas`.
    pub fn new(
        opt: O,
        replicas_to_aggregate: usize,
        total_num_replicas: Option<usize>,
    ) -> SyncReplicasOptimizer<O> {
        SyncReplicasOptimizer {
            opt,
            replicas_to_aggregate,
            total_num_replicas: total_num_replicas.unwrap_or(replicas_to_aggregate),
            name: "sync_replicas".into(),
            built: Mutex::new(None),
        }
    }

    /// Renames the optimizer (the name scope of the accumulators).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.opt
    }

    /// Gradients per update.
    pub fn replicas_to_aggregate(&self) -> usize {
        self.replicas_to_aggregate
    }

    /// Workers running train ops.
    pub fn total_num_replicas(&self) -> usize {
        self.total_num_replicas
    }

    /// Tokens the chief enqueues per update: `max(total_num_replicas,
    /// replicas_to_aggregate)`.
    pub fn tokens_per_step(&self) -> usize {
        self.total_num_replicas.max(self.replicas_to_aggregate)
    }

    fn built(&self, what: &str) -> Result<Built> {
        self.built
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "{what} should be called after apply_gradients()"
                ))
            })
    }

    /// The chief's queue runner: the sync op (take, update, tokens) run in a loop,
    /// with the close ops of `dummy_queue` (TensorFlow's runner closes a dummy
    /// queue, never the token queue). Not in the `QUEUE_RUNNERS` collection: only
    /// the chief runs it.
    pub fn chief_queue_runner(&self) -> Result<QueueRunnerSpec> {
        Ok(self.built("chief_queue_runner()")?.chief_queue_runner)
    }

    /// Sets this worker's local step to the global step.
    pub fn local_step_init_op(&self) -> Result<Operation> {
        Ok(self.built("local_step_init_op()")?.local_step_init_op)
    }

    /// The chief's local init: [`Self::local_step_init_op`] and every
    /// accumulator's global step set to the global step.
    pub fn chief_init_op(&self) -> Result<Operation> {
        Ok(self.built("chief_init_op()")?.chief_init_op)
    }

    /// The names of the global variables (as of `apply_gradients`) not yet
    /// initialised: empty once the local init may run.
    pub fn ready_for_local_init_op(&self) -> Result<Output> {
        Ok(self
            .built("ready_for_local_init_op()")?
            .ready_for_local_init_op)
    }

    /// This worker's local step variable (`sync_rep_local_step`).
    pub fn local_step(&self) -> Result<VarRef> {
        Ok(self.built("local_step()")?.local_step)
    }

    /// The token queue's handle (`sync_token_q`).
    pub fn sync_token_queue(&self) -> Result<Output> {
        Ok(self.built("sync_token_queue()")?.sync_token_queue)
    }

    /// The accumulators and their variables, in variable order.
    pub fn accumulators(&self) -> Result<Vec<(ConditionalAccumulator, VarRef)>> {
        Ok(self.built("accumulators()")?.accumulators)
    }

    /// The op filling the token queue with `num_tokens` tokens holding the global
    /// step (`-1`: `replicas_to_aggregate`), for the chief to run once before
    /// training so that workers can start when `total_num_replicas <
    /// replicas_to_aggregate`; fewer than `replicas_to_aggregate -
    /// total_num_replicas` is `InvalidArgument`. With no tokens it is a `NoOp`
    /// named `no_init_tokens`.
    pub fn get_init_tokens_op(&self, num_tokens: i64) -> Result<Operation> {
        let b = self.built("get_init_tokens_op()")?;
        let needed = self.replicas_to_aggregate as i64 - self.total_num_replicas as i64;
        let n = match num_tokens {
            -1 => self.replicas_to_aggregate as i64,
            n if n < needed => {
                return Err(Status::invalid_argument(format!(
                    "Too few tokens to finish the first step: {n} (given) vs {needed} (needed)"
                )))
            }
            n => n,
        };
        let s = &b.global_step_scope;
        if n <= 0 {
            return with_free_name("no_init_tokens", |name| s.op("NoOp").name(name).build());
        }
        let step = b.global_step.read(s)?;
        let tokens = ops::fill_to(s, &[n], &step)?;
        with_free_name("sync_token_q_EnqueueMany", |name| {
            s.op("QueueEnqueueManyV2")
                .name(name)
                .input(&b.sync_token_queue)
                .input_list(std::slice::from_ref(&tokens))
                .build()
        })
    }
}

/// The device `op` requested.
fn device_of(s: &Scope, op: &Operation) -> String {
    s.with_graph(|g| g.find(op.name()).map(|id| g.node(id).def.device.clone()))
        .unwrap_or_default()
}

/// `s` requesting `op`'s device and colocated with it (TensorFlow's
/// `ops.device(var.device)` around ops that must sit with the variable).
fn with_device_of(s: &Scope, op: &Operation) -> Scope {
    s.with_device(&device_of(s, op)).colocate_with(op)
}

/// A FIFO queue of scalars of `dtype` named `name` (made unique) and shared as
/// `name`.
fn fifo(s: &Scope, name: &str, dtype: DType, capacity: Option<i64>) -> Result<Output> {
    let o = QueueOptions {
        shapes: vec![Shape::scalar()],
        capacity,
        shared_name: name.to_owned(),
        container: String::new(),
    };
    with_free_name(name, |n| {
        s.op("FIFOQueueV2")
            .name(n)
            .attr("component_types", vec![dtype])
            .attr("shapes", o.shapes.clone())
            .attr("capacity", o.capacity.unwrap_or(-1))
            .attr("shared_name", o.shared_name.as_str())
            .attr("container", o.container.as_str())
            .build1()
    })
}

fn close(s: &Scope, queue: &Output, base: &str, cancel: bool) -> Result<Operation> {
    with_free_name(base, |n| {
        s.op("QueueCloseV2")
            .name(n)
            .input(queue)
            .attr("cancel_pending_enqueues", cancel)
            .build()
    })
}

impl<O: Optimizer> Optimizer for SyncReplicasOptimizer<O> {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        self.opt.slots()
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        self.opt.create_slots(s, vars)
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        self.opt.apply_dense(s, grad, var)
    }

    fn compute_gradients(
        &self,
        s: &Scope,
        loss: &Output,
        var_list: Option<&[VarRef]>,
    ) -> Result<Vec<GradAndVar>> {
        self.opt.compute_gradients(s, loss, var_list)
    }

    /// Builds the replica's train op (returned) and the chief's ops (see the
    /// module docs). No pairs, or no global step, is `InvalidArgument`.
    fn apply_gradients(
        &self,
        s: &Scope,
        grads_and_vars: &[GradAndVar],
        global_step: Option<&VarRef>,
    ) -> Result<Operation> {
        if grads_and_vars.is_empty() {
            return Err(Status::invalid_argument(
                "Must supply at least one variable",
            ));
        }
        let global_step = global_step.ok_or_else(|| {
            Status::invalid_argument("Global step is required to check staleness")
        })?;
        if !global_step.dtype().is_integer() {
            return Err(Status::invalid_argument(format!(
                "global step '{}' must be an integer variable",
                global_step.name()
            )));
        }
        if self.replicas_to_aggregate == 0 {
            return Err(Status::invalid_argument(
                "replicas_to_aggregate must be at least 1",
            ));
        }
        let num_required = i32::try_from(self.replicas_to_aggregate).map_err(|_| {
            Status::invalid_argument(format!(
                "replicas_to_aggregate {} does not fit an int32",
                self.replicas_to_aggregate
            ))
        })?;

        // The local step, on this worker: colocated with a NoOp placed as any of
        // its ops would be.
        let local_anchor = s.op("NoOp").build()?;
        let ls = with_device_of(s, &local_anchor);
        let local_step = with_free_name("sync_rep_local_step", |n| {
            if s.find_operation(&format!("{}{n}", s.name_prefix()))
                .is_some()
            {
                return Err(Status::already_exists(n.to_owned()));
            }
            let zero = ls
                .op("Const")
                .name(&format!("{n}/initial_value"))
                .attr("dtype", global_step.dtype())
                .attr(
                    "value",
                    Tensor::zeros(global_step.dtype(), TensorShape::scalar()),
                )
                .build1()?;
            ops::Variable::in_collections(&ls, n, &zero, &[LOCAL_VARIABLES])
        })?;
        let local_step_value = local_step.value.clone();
        let local_step = VarRef::from(&local_step);
        let local_step_init_op = {
            let step = global_step.read(s)?;
            local_step.assign(&with_device_of(s, local_step.op()), &step)?
        };
        let ready_for_local_init_op = report_uninitialized_variables(s, &global_variables(s)?)?;

        // One accumulator per variable with a gradient, with the variable.
        let ns = s.with_name_scope(&self.name);
        let mut train_ops = Vec::new();
        let mut aggregated = Vec::with_capacity(grads_and_vars.len());
        let mut accumulators = Vec::new();
        for gv in grads_and_vars {
            let Some(grad) = &gv.grad else {
                aggregated.push(GradAndVar {
                    grad: None,
                    var: gv.var.clone(),
                });
                continue;
            };
            let vs = with_device_of(&ns, gv.var.op());
            // The accumulators take dense gradients (rows are made dense).
            let grad = &grad.to_dense(&vs)?;
            let acc = ConditionalAccumulator::new(
                &vs,
                grad.dtype(),
                gv.var.shape(),
                &AccumulatorOptions {
                    shared_name: format!("{}:0/grad_accum", gv.var.name()),
                    ..Default::default()
                },
            )?;
            train_ops.push(acc.apply_grad(&vs, grad, &local_step_value)?);
            let n = ops::scalar(&vs, num_required)?;
            aggregated.push(GradAndVar {
                grad: Some(acc.take_grad(&vs, &n)?.into()),
                var: gv.var.clone(),
            });
            accumulators.push((acc, gv.var.clone()));
        }

        // The update and the token queue, on the global step's device, in the
        // root name scope.
        let gs = s
            .with_root_name_scope()
            .with_device(&device_of(s, global_step.op()));
        let update_op = self
            .opt
            .apply_gradients(&gs, &aggregated, Some(global_step))?;
        let sync_token_queue = fifo(&gs, "sync_token_q", global_step.dtype(), None)?;
        let dummy_queue = fifo(&gs, "dummy_queue", DType::I32, Some(1))?;

        // The train op: after every gradient is in, wait for a token and make its
        // step the local step.
        let train_op_refs: Vec<&Operation> = train_ops.iter().collect();
        let token = with_free_name("sync_token_q_Dequeue", |n| {
            gs.with_control_dependencies(&train_op_refs)
                .op("QueueDequeueV2")
                .name(n)
                .input(&sync_token_queue)
                .attr("component_types", vec![global_step.dtype()])
                .build1()
        })?;
        let train_op = local_step.assign(&with_device_of(&gs, local_step.op()), &token)?;

        // The sync op: after the update, one token per worker holding the new
        // global step (read after the update: values are not aliased here).
        let after = gs.with_control_dependencies(&[&update_op]);
        let new_step = global_step.read(&after)?;
        let tokens = ops::fill_to(&after, &[self.tokens_per_step() as i64], &new_step)?;
        let sync_op = with_free_name("sync_token_q_EnqueueMany", |n| {
            after
                .op("QueueEnqueueManyV2")
                .name(n)
                .input(&sync_token_queue)
                .input_list(std::slice::from_ref(&tokens))
                .build()
        })?;
        let chief_queue_runner = QueueRunnerSpec {
            queue_name: dummy_queue.op().name().to_owned(),
            enqueue_ops: vec![sync_op.name().to_owned()],
            close_op: close(&gs, &dummy_queue, "dummy_queue_Close", false)?
                .name()
                .to_owned(),
            cancel_op: close(&gs, &dummy_queue, "dummy_queue_Close", true)?
                .name()
                .to_owned(),
        };

        // The chief's local init: its local step and every accumulator's step.
        let mut chief_init = vec![local_step_init_op.clone()];
        for (acc, var) in &accumulators {
            let vs = with_device_of(&ns, var.op());
            let step = global_step.read(&vs)?;
            chief_init.push(acc.set_global_step(&vs, &step, "SetGlobalStep")?);
        }
        let chief_init_op = with_free_name("group_deps", |n| group_named(&ns, &chief_init, n))?;

        *self.built.lock().unwrap_or_else(|p| p.into_inner()) = Some(Built {
            global_step_scope: gs,
            global_step: global_step.clone(),
            local_step,
            local_step_init_op,
            chief_init_op,
            ready_for_local_init_op,
            sync_token_queue,
            chief_queue_runner,
            accumulators,
        });
        Ok(train_op)
    }
}

#[cfg(test)]
mod tests;
