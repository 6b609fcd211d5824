//! [`MomentumOptimizer`] (`tf.compat.v1.train.MomentumOptimizer`): one slot,
//! `momentum` (the accumulator, named `<var>/Momentum`), updated by
//! `ApplyMomentum`: `accum = accum * momentum + grad; var -= lr * accum`, or
//! with Nesterov momentum `var -= lr * grad + lr * momentum * accum`. Rows of a
//! sparse gradient (duplicates summed) go to `SparseApplyMomentum`, which
//! updates only those rows of the variable and the accumulator.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, ApplyOptions, MomentumInputs};
use crate::train::optimizer::{Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::{Result, Status};

/// Gradient descent with momentum; see the module docs.
#[derive(Debug)]
pub struct MomentumOptimizer {
    learning_rate: Hyper,
    momentum: Hyper,
    use_nesterov: bool,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl MomentumOptimizer {
    /// An optimizer named `Momentum`.
    pub fn new(learning_rate: impl Into<Hyper>, momentum: impl Into<Hyper>) -> MomentumOptimizer {
        MomentumOptimizer {
            learning_rate: learning_rate.into(),
            momentum: momentum.into(),
            use_nesterov: false,
            use_locking: false,
            name: "Momentum".into(),
            slots: SlotStore::default(),
        }
    }

    /// Nesterov momentum.
    pub fn use_nesterov(mut self, on: bool) -> Self {
        self.use_nesterov = on;
        self
    }

    /// Holds the variable's and the accumulator's locks for the whole update.
    pub fn use_locking(mut self, on: bool) -> Self {
        self.use_locking = on;
        self
    }

    /// Renames the optimizer (its name scope and slot suffix).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }
}

impl Optimizer for MomentumOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        for v in vars {
            self.slots.get_or_make(s, v, "momentum", &self.name, 0.0)?;
        }
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let accum = self
            .get_slot(var, "momentum")
            .ok_or_else(|| Status::internal(format!("no momentum slot for '{}'", var.name())))?;
        let lr = self
            .learning_rate
            .to_output(s, var.dtype(), "learning_rate")?;
        let momentum = self.momentum.to_output(s, var.dtype(), "momentum")?;
        let (v, a) = (var.handle(), accum.handle());
        let inputs = MomentumInputs {
            var: &v,
            accum: &a,
            lr: &lr,
            grad,
            momentum: &momentum,
        };
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            use_nesterov: self.use_nesterov,
            ..Default::default()
        };
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_momentum(s, &inputs, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_momentum(s, &inputs, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let accum = self
            .get_slot(var, "momentum")
            .ok_or_else(|| Status::internal(format!("no momentum slot for '{}'", var.name())))?;
        let lr = self
            .learning_rate
            .to_output(s, var.dtype(), "learning_rate")?;
        let momentum = self.momentum.to_output(s, var.dtype(), "momentum")?;
        ops::sparse_apply(
            s,
            "Momentum",
            var.kind() == VarKind::Resource,
            &[&var.handle(), &accum.handle()],
            &[&lr, &grad.values, &grad.indices, &momentum],
            self.use_locking,
            self.use_nesterov,
        )
    }
}
