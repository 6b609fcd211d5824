//! [`RMSPropOptimizer`] (`tf.compat.v1.train.RMSPropOptimizer`): slots `rms`
//! (`<var>/RMSProp`, starting at 1) and `momentum` (`<var>/RMSProp_1`, starting
//! at 0), updated by `ApplyRMSProp`:
//! `ms += (grad² - ms) * (1 - decay)`,
//! `mom = mom * momentum + lr * grad / sqrt(ms + epsilon)`, `var -= mom`.
//!
//! Centered ([`RMSPropOptimizer::centered`]), a third slot `mg` (the mean
//! gradient, starting at 0) is made between the two, as TensorFlow makes it, so
//! the slots are `rms` (`<var>/RMSProp`), `mg` (`<var>/RMSProp_1`) and
//! `momentum` (`<var>/RMSProp_2`), updated by `ApplyCenteredRMSProp`, which
//! divides by `sqrt(ms - mg² + epsilon)` instead.
//!
//! Rows of a sparse gradient (duplicates summed) go to `SparseApplyRMSProp` (or
//! `SparseApplyCenteredRMSProp`), which updates only those rows.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, ApplyOptions, CenteredRmsPropInputs, RmsPropInputs};
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
    centered: bool,
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
            centered: false,
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

    /// Normalises by the estimated variance of the gradient (keeping its mean
    /// in a third slot, `mg`) instead of its second moment (default false).
    pub fn centered(mut self, on: bool) -> Self {
        self.centered = on;
        self
    }

    /// Holds every updated variable's lock for the whole update.
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
            let mut next = 1;
            if self.centered {
                self.slots
                    .get_or_make(s, v, "mg", &format!("{}_{next}", self.name), 0.0)?;
                next += 1;
            }
            self.slots
                .get_or_make(s, v, "momentum", &format!("{}_{next}", self.name), 0.0)?;
        }
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let h = self.hypers(s, var)?;
        let v = var.handle();
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            ..Default::default()
        };
        if let Some(mg) = &h.mg {
            let inputs = CenteredRmsPropInputs {
                var: &v,
                mg,
                ms: &h.ms,
                mom: &h.mom,
                lr: &h.lr,
                rho: &h.rho,
                momentum: &h.momentum,
                epsilon: &h.epsilon,
                grad,
            };
            return match var.kind() {
                VarKind::Ref => Ok(ops::apply_centered_rms_prop(s, &inputs, opts)?.op().clone()),
                VarKind::Resource => ops::resource_apply_centered_rms_prop(s, &inputs, opts),
            };
        }
        let inputs = RmsPropInputs {
            var: &v,
            ms: &h.ms,
            mom: &h.mom,
            lr: &h.lr,
            rho: &h.rho,
            momentum: &h.momentum,
            epsilon: &h.epsilon,
            grad,
        };
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_rms_prop(s, &inputs, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_rms_prop(s, &inputs, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let h = self.hypers(s, var)?;
        let v = var.handle();
        let scalars = [&h.lr, &h.rho, &h.momentum, &h.epsilon];
        let rest = [scalars.as_slice(), &[&grad.values, &grad.indices]].concat();
        let resource = var.kind() == VarKind::Resource;
        match &h.mg {
            Some(mg) => ops::sparse_apply(
                s,
                "CenteredRMSProp",
                resource,
                &[&v, mg, &h.ms, &h.mom],
                &rest,
                self.use_locking,
                false,
            ),
            None => ops::sparse_apply(
                s,
                "RMSProp",
                resource,
                &[&v, &h.ms, &h.mom],
                &rest,
                self.use_locking,
                false,
            ),
        }
    }
}

/// The slots and hyper-parameters of one variable's update.
struct Hypers {
    ms: Output,
    mom: Output,
    mg: Option<Output>,
    lr: Output,
    rho: Output,
    momentum: Output,
    epsilon: Output,
}

impl RMSPropOptimizer {
    fn hypers(&self, s: &Scope, var: &VarRef) -> Result<Hypers> {
        let slot = |n: &str| {
            self.get_slot(var, n)
                .map(|v| v.handle())
                .ok_or_else(|| Status::internal(format!("no {n} slot for '{}'", var.name())))
        };
        let dt = var.dtype();
        Ok(Hypers {
            ms: slot("rms")?,
            mom: slot("momentum")?,
            mg: if self.centered {
                Some(slot("mg")?)
            } else {
                None
            },
            lr: self.learning_rate.to_output(s, dt, "learning_rate")?,
            rho: self.decay.to_output(s, dt, "decay")?,
            momentum: self.momentum.to_output(s, dt, "momentum")?,
            epsilon: self.epsilon.to_output(s, dt, "epsilon")?,
        })
    }
}
