//! [`AdadeltaOptimizer`] (`tf.compat.v1.train.AdadeltaOptimizer`, Zeiler 2012):
//! slots `accum` (`<var>/Adadelta`) and `accum_update` (`<var>/Adadelta_1`),
//! both starting at 0, updated by `ApplyAdadelta`:
//! `accum = rho * accum + (1 - rho) * grad²`,
//! `update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad`,
//! `var -= lr * update`, `accum_update = rho * accum_update + (1 - rho) * update²`.
//! Rows of a sparse gradient (duplicates summed) go to `SparseApplyAdadelta`,
//! which updates only those rows.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, AdadeltaInputs, ApplyOptions};
use crate::train::optimizer::{Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::{Result, Status};

/// Adadelta; see the module docs.
#[derive(Debug)]
pub struct AdadeltaOptimizer {
    learning_rate: Hyper,
    rho: Hyper,
    epsilon: Hyper,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl Default for AdadeltaOptimizer {
    fn default() -> Self {
        AdadeltaOptimizer::new(0.001)
    }
}

impl AdadeltaOptimizer {
    /// An optimizer named `Adadelta` with TensorFlow's defaults: rho 0.95,
    /// epsilon 1e-8 (TensorFlow's default learning rate, 0.001, is
    /// [`AdadeltaOptimizer::default`]; the paper's form is a learning rate of 1).
    pub fn new(learning_rate: impl Into<Hyper>) -> AdadeltaOptimizer {
        AdadeltaOptimizer {
            learning_rate: learning_rate.into(),
            rho: Hyper::Value(0.95),
            epsilon: Hyper::Value(1e-8),
            use_locking: false,
            name: "Adadelta".into(),
            slots: SlotStore::default(),
        }
    }

    /// The accumulators' decay.
    pub fn rho(mut self, rho: impl Into<Hyper>) -> Self {
        self.rho = rho.into();
        self
    }

    /// The conditioning term under both square roots.
    pub fn epsilon(mut self, epsilon: impl Into<Hyper>) -> Self {
        self.epsilon = epsilon.into();
        self
    }

    /// Holds all three variables' locks for the whole update.
    pub fn use_locking(mut self, on: bool) -> Self {
        self.use_locking = on;
        self
    }

    /// Renames the optimizer (its name scope and slot suffix).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    /// The slots and scalars of `var`'s update: `[accum, accum_update]`,
    /// `[lr, rho, epsilon]`.
    fn parts(&self, s: &Scope, var: &VarRef) -> Result<([Output; 2], [Output; 3])> {
        let slot = |n: &str| {
            self.get_slot(var, n)
                .map(|v| v.handle())
                .ok_or_else(|| Status::internal(format!("no {n} slot for '{}'", var.name())))
        };
        let dt = var.dtype();
        Ok((
            [slot("accum")?, slot("accum_update")?],
            [
                self.learning_rate.to_output(s, dt, "lr")?,
                self.rho.to_output(s, dt, "rho")?,
                self.epsilon.to_output(s, dt, "epsilon")?,
            ],
        ))
    }
}

impl Optimizer for AdadeltaOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        for v in vars {
            // the second slot's name is made unique: `<var>/Adadelta_1`
            self.slots.get_or_make(s, v, "accum", &self.name, 0.0)?;
            self.slots
                .get_or_make(s, v, "accum_update", &self.name, 0.0)?;
        }
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let ([accum, accum_update], [lr, rho, epsilon]) = self.parts(s, var)?;
        let v = var.handle();
        let inputs = AdadeltaInputs {
            var: &v,
            accum: &accum,
            accum_update: &accum_update,
            lr: &lr,
            rho: &rho,
            epsilon: &epsilon,
            grad,
        };
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            ..Default::default()
        };
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_adadelta(s, &inputs, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_adadelta(s, &inputs, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let ([accum, accum_update], [lr, rho, epsilon]) = self.parts(s, var)?;
        ops::sparse_apply(
            s,
            "Adadelta",
            var.kind() == VarKind::Resource,
            &[&var.handle(), &accum, &accum_update],
            &[&lr, &rho, &epsilon, &grad.values, &grad.indices],
            self.use_locking,
            false,
        )
    }
}
