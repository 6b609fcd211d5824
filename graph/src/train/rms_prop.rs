//! [`RMSPropOptimizer`] (`tf.compat.v1.train.RMSPropOptimizer`, not centered):
//! slots `rms` (`<var>/RMSProp`, starting at 1) and `momentum`
//! (`<var>/RMSProp_1`, starting at 0), updated by `ApplyRMSProp`:
//! `ms += (grad² - ms) * (1 - decay)`,
//! `mom = mom * momentum + lr * grad / sqrt(ms + epsilon)`, `var -= mom`.
//! Rows of a sparse gradient (duplicates summed) go to `SparseApplyRMSProp`,
//! which updates only those rows.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, ApplyOptions, RmsPropInputs};
use crate::train::optimizer::{Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::{Result, Status};

/// RMSProp; see the module docs.
#[derive(Debug)]
pub struct RMSPropOptimizer {
    learning_rate: Hyper,
    decay: Hyper,
    momentum: Hyper,
    epsilon: Hyper,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl RMSPropOptimizer {
    /// An optimizer named `RMSProp` with TensorFlow's defaults: decay 0.9,
    /// momentum 0, epsilon 1e-10.
    pub fn new(learning_rate: impl Into<Hyper>) -> RMSPropOptimizer {
        RMSPropOptimizer {
            learning_rate: learning_rate.into(),
            decay: Hyper::Value(0.9),
            momentum: Hyper::Value(0.0),
            epsilon: Hyper::Value(1e-10),
            use_locking: false,
            name: "RMSProp".into(),
            slots: SlotStore::default(),
        }
    }

    /// The mean square's decay (`rho`).
    pub fn decay(mut self, decay: impl Into<Hyper>) -> Self {
        self.decay = decay.into();
        self
    }

    /// The momentum.
    pub fn momentum(mut self, momentum: impl Into<Hyper>) -> Self {
        self.momentum = momentum.into();
        self
    }

    /// The fuzz term under the square root.
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
}

impl Optimizer for RMSPropOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        for v in vars {
            self.slots.get_or_make(s, v, "rms", &self.name, 1.0)?;
            self.slots
                .get_or_make(s, v, "momentum", &format!("{}_1", self.name), 0.0)?;
        }
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let slot = |n: &str| {
            self.get_slot(var, n)
                .ok_or_else(|| Status::internal(format!("no {n} slot for '{}'", var.name())))
        };
        let (ms, mom) = (slot("rms")?.handle(), slot("momentum")?.handle());
        let dt = var.dtype();
        let lr = self.learning_rate.to_output(s, dt, "learning_rate")?;
        let rho = self.decay.to_output(s, dt, "decay")?;
        let momentum = self.momentum.to_output(s, dt, "momentum")?;
        let epsilon = self.epsilon.to_output(s, dt, "epsilon")?;
        let v = var.handle();
        let inputs = RmsPropInputs {
            var: &v,
            ms: &ms,
            mom: &mom,
            lr: &lr,
            rho: &rho,
            momentum: &momentum,
            epsilon: &epsilon,
            grad,
        };
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            use_nesterov: false,
        };
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_rms_prop(s, &inputs, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_rms_prop(s, &inputs, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let slot = |n: &str| {
            self.get_slot(var, n)
                .ok_or_else(|| Status::internal(format!("no {n} slot for '{}'", var.name())))
        };
        let (ms, mom) = (slot("rms")?.handle(), slot("momentum")?.handle());
        let dt = var.dtype();
        let lr = self.learning_rate.to_output(s, dt, "learning_rate")?;
        let rho = self.decay.to_output(s, dt, "decay")?;
        let momentum = self.momentum.to_output(s, dt, "momentum")?;
        let epsilon = self.epsilon.to_output(s, dt, "epsilon")?;
        ops::sparse_apply(
            s,
            "RMSProp",
            var.kind() == VarKind::Resource,
            &[&var.handle(), &ms, &mom],
            &[&lr, &rho, &momentum, &epsilon, &grad.values, &grad.indices],
            self.use_locking,
            false,
        )
    }
}
