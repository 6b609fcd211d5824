//! [`AdagradOptimizer`] (`tf.compat.v1.train.AdagradOptimizer`): one slot,
//! `accumulator` (named `<var>/Adagrad`, starting at `initial_accumulator_value`),
//! updated by `ApplyAdagrad`: `accum += grad * grad; var -= lr * grad /
//! sqrt(accum)`. Rows of a sparse gradient (duplicates summed) go to
//! `SparseApplyAdagrad`, which updates only those rows of the variable and the
//! accumulator.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, ApplyOptions};
use crate::train::optimizer::{Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::{Result, Status};

/// Adagrad; see the module docs.
#[derive(Debug)]
pub struct AdagradOptimizer {
    learning_rate: Hyper,
    initial_accumulator_value: f64,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl AdagradOptimizer {
    /// An optimizer named `Adagrad` whose accumulators start at 0.1 (TensorFlow's
    /// default).
    pub fn new(learning_rate: impl Into<Hyper>) -> AdagradOptimizer {
        AdagradOptimizer {
            learning_rate: learning_rate.into(),
            initial_accumulator_value: 0.1,
            use_locking: false,
            name: "Adagrad".into(),
            slots: SlotStore::default(),
        }
    }

    /// The accumulators' starting value (must be positive).
    pub fn initial_accumulator_value(mut self, v: f64) -> Self {
        self.initial_accumulator_value = v;
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

    fn accumulator(&self, var: &VarRef) -> Result<VarRef> {
        self.get_slot(var, "accumulator")
            .ok_or_else(|| Status::internal(format!("no accumulator slot for '{}'", var.name())))
    }
}

impl Optimizer for AdagradOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        if self.initial_accumulator_value <= 0.0 {
            return Err(Status::invalid_argument(format!(
                "initial_accumulator_value must be positive: {}",
                self.initial_accumulator_value
            )));
        }
        for v in vars {
            self.slots.get_or_make(
                s,
                v,
                "accumulator",
                &self.name,
                self.initial_accumulator_value,
            )?;
        }
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let accum = self.accumulator(var)?;
        let lr = self
            .learning_rate
            .to_output(s, var.dtype(), "learning_rate")?;
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            use_nesterov: false,
            ..Default::default()
        };
        let (v, a) = (var.handle(), accum.handle());
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_adagrad(s, &v, &a, &lr, grad, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_adagrad(s, &v, &a, &lr, grad, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let accum = self.accumulator(var)?;
        let lr = self
            .learning_rate
            .to_output(s, var.dtype(), "learning_rate")?;
        ops::sparse_apply(
            s,
            "Adagrad",
            var.kind() == VarKind::Resource,
            &[&var.handle(), &accum.handle()],
            &[&lr, &grad.values, &grad.indices],
            self.use_locking,
            false,
        )
    }
}
