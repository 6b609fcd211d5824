//! Training in the graph (TensorFlow v1's `tf.compat.v1.train`, whitepaper §4.1):
//! variables and their collections, the global step, slot variables, and the
//! optimizers that turn a loss into update ops.
//!
//! - [`variables`] — [`VarRef`] (a reference or resource variable), the global,
//!   trainable and local collections, and variable initializers.
//! - [`global_step`](mod@global_step) — the `global_step` variable and its collection.
//! - [`slots`] — optimizer slot variables, colocated with their variable.
//! - [`optimizer`] — the [`Optimizer`] trait: `compute_gradients`,
//!   `apply_gradients`, `minimize`.
//! - [`gradient_descent`], [`momentum`], [`adagrad`], [`adam`], [`rms_prop`],
//!   [`adadelta`], [`ftrl`], [`proximal`] — the optimizers, each building the
//!   fused `Apply*`/`ResourceApply*` op of its family (and its `SparseApply*`
//!   form for rows of a gradient).
//! - [`clip_ops`] — `global_norm`, `clip_by_global_norm` (also over
//!   gradient/variable pairs, sparse ones included), `clip_by_norm`.
//! - [`learning_rate_decay`] — `exponential_decay`, `piecewise_constant`.
//! - [`replicas`] — data-parallel replicas, synchronous or asynchronous.
//! - [`device_setter`] — `replica_device_setter`: variables on parameter-server
//!   tasks, everything else on the worker.
//! - [`sync_replicas`] — [`SyncReplicasOptimizer`]: between-graph synchronous
//!   replicas through conditional accumulators and a token queue.
//!
//! - [`saver_graph`] — the save and restore nodes of a saver and the `SaverDef`
//!   naming them.
//!
//! Checkpointing these variables is the root crate's `actorflow::train::Saver`.
//!
//! # Examples
//! ```
//! use actorflow_graph::builder::Scope;
//! use actorflow_graph::ops::{self, Variable};
//! use actorflow_graph::train::{self, MomentumOptimizer, Optimizer};
//! use actorflow_graph::{DType, Shape, Tensor};
//! let s = Scope::new();
//! let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
//! let w0 = ops::constant(&s, Tensor::vector(&[0.0f32, 0.0])).unwrap();
//! let w = Variable::new(&s, "w", &w0, true).unwrap();
//! let d = ops::sub(&s, &w.value, &x).unwrap();
//! let loss = ops::sum_axes(&s, &ops::mul(&s, &d, &d).unwrap(), &[0], false).unwrap();
//! let step = train::get_or_create_global_step(&s).unwrap();
//! let opt = MomentumOptimizer::new(0.1, 0.9);
//! let train_op = opt.minimize(&s, &loss, Some(&step), None).unwrap();
//! let init = train::global_variables_initializer(&s).unwrap();
//! // run `init` once, then `train_op` per step, feeding `x`
//! assert!(opt.get_slot(&train::VarRef::from(&w), "momentum").is_some());
//! # let _ = (train_op, init);
//! ```

pub mod adadelta;
pub mod adagrad;
pub mod adam;
pub mod clip_ops;
pub mod device_setter;
pub mod ftrl;
pub mod global_step;
pub mod gradient_descent;
pub mod learning_rate_decay;
pub mod momentum;
pub mod optimizer;
pub mod proximal;
pub mod replicas;
pub mod rms_prop;
pub mod saver_graph;
pub mod slots;
pub mod sync_replicas;
pub mod variables;

#[cfg(test)]
mod optimizer_layout_tests;
#[cfg(test)]
mod tests;

pub use adadelta::AdadeltaOptimizer;
pub use adagrad::AdagradOptimizer;
pub use adam::AdamOptimizer;
pub use clip_ops::{
    clip_by_global_norm, clip_by_global_norm_with, clip_by_norm, clip_gradients_by_global_norm,
    global_norm,
};
pub use device_setter::{
    replica_device_setter, round_robin_strategy, with_replica_device_setter, PsStrategy,
    ReplicaDeviceSetter, STANDARD_PS_OPS,
};
pub use ftrl::FtrlOptimizer;
pub use global_step::{create_global_step, get_or_create_global_step, global_step, GLOBAL_STEP};
pub use gradient_descent::GradientDescentOptimizer;
pub use learning_rate_decay::{exponential_decay, piecewise_constant};
pub use momentum::MomentumOptimizer;
pub use optimizer::{deduplicate_indexed_slices, GradAndVar, Hyper, Optimizer};
pub use proximal::{ProximalAdagradOptimizer, ProximalGradientDescentOptimizer};
pub use replicas::{average_gradients, replicate_minimize, ReplicaMode, Replicated};
pub use rms_prop::RMSPropOptimizer;
pub use slots::SlotStore;
pub use sync_replicas::SyncReplicasOptimizer;
pub use variables::{
    global_variables, global_variables_initializer, local_variable, local_variables,
    local_variables_initializer, report_uninitialized_variables, trainable_variables,
    variables_initializer, VarKind, VarRef, GLOBAL_VARIABLES, LOCAL_VARIABLES, TRAINABLE_VARIABLES,
};
