//! The proximal optimizers (forward-backward splitting, Duchi & Singer 2009),
//! whose update shrinks the variable towards zero by an L1 strength and scales
//! it down by an L2 strength after each gradient step:
//!
//! - [`ProximalGradientDescentOptimizer`]
//!   (`tf.compat.v1.train.ProximalGradientDescentOptimizer`): no slots,
//!   `ApplyProximalGradientDescent`.
//! - [`ProximalAdagradOptimizer`] (`tf.compat.v1.train.ProximalAdagradOptimizer`):
//!   one slot, `accumulator` (`<var>/ProximalAdagrad`, starting at
//!   `initial_accumulator_value`), `ApplyProximalAdagrad` with the learning
//!   rate `lr / sqrt(accum)`.
//!
//! Rows of a sparse gradient (duplicates summed) go to the `SparseApply*`
//! forms, which update only those rows.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, ApplyOptions, ProximalAdagradInputs};
use crate::train::optimizer::{constant_of, Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::{Result, Status};

/// The learning rate and the regularisation strengths of one update, in the
/// variable's dtype: `[lr, l1, l2]`.
fn scalars(s: &Scope, var: &VarRef, lr: &Hyper, l1: f64, l2: f64) -> Result<[Output; 3]> {
    let dt = var.dtype();
    Ok([
        lr.to_output(s, dt, "learning_rate")?,
        constant_of(s, dt, l1, "l1_regularization_strength")?,
        constant_of(s, dt, l2, "l2_regularization_strength")?,
    ])
}

/// The regularisation strengths must be non-negative (TensorFlow's kernels
/// refuse negative ones).
fn check_strengths(l1: f64, l2: f64) -> Result<()> {
    for (what, v) in [
        ("l1_regularization_strength", l1),
        ("l2_regularization_strength", l2),
    ] {
        if v.is_nan() || v < 0.0 {
            return Err(Status::invalid_argument(format!(
                "{what} {v} needs to be positive or zero"
            )));
        }
    }
    Ok(())
}

fn apply_options(use_locking: bool) -> ApplyOptions {
    ApplyOptions {
        use_locking,
        ..Default::default()
    }
}

/// Proximal gradient descent; see the module docs.
#[derive(Debug)]
pub struct ProximalGradientDescentOptimizer {
    learning_rate: Hyper,
    l1: f64,
    l2: f64,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl ProximalGradientDescentOptimizer {
    /// An optimizer named `ProximalGradientDescent` without regularisation
    /// (plain gradient descent until [`l1_regularization_strength`] or
    /// [`l2_regularization_strength`] say otherwise).
    ///
    /// [`l1_regularization_strength`]: Self::l1_regularization_strength
    /// [`l2_regularization_strength`]: Self::l2_regularization_strength
    pub fn new(learning_rate: impl Into<Hyper>) -> ProximalGradientDescentOptimizer {
        ProximalGradientDescentOptimizer {
            learning_rate: learning_rate.into(),
            l1: 0.0,
            l2: 0.0,
            use_locking: false,
            name: "ProximalGradientDescent".into(),
            slots: SlotStore::default(),
        }
    }

    /// The L1 regularisation strength (at least 0).
    pub fn l1_regularization_strength(mut self, v: f64) -> Self {
        self.l1 = v;
        self
    }

    /// The L2 regularisation strength (at least 0).
    pub fn l2_regularization_strength(mut self, v: f64) -> Self {
        self.l2 = v;
        self
    }

    /// Holds the variable's lock for its whole update.
    pub fn use_locking(mut self, on: bool) -> Self {
        self.use_locking = on;
        self
    }

    /// Renames the optimizer (its name scope).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }
}

impl Optimizer for ProximalGradientDescentOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, _s: &Scope, _vars: &[VarRef]) -> Result<()> {
        check_strengths(self.l1, self.l2)
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let [lr, l1, l2] = scalars(s, var, &self.learning_rate, self.l1, self.l2)?;
        let v = var.handle();
        let opts = apply_options(self.use_locking);
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_proximal_gradient_descent(
                s, &v, &lr, &l1, &l2, grad, opts,
            )?
            .op()
            .clone()),
            VarKind::Resource => {
                ops::resource_apply_proximal_gradient_descent(s, &v, &lr, &l1, &l2, grad, opts)
            }
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let [lr, l1, l2] = scalars(s, var, &self.learning_rate, self.l1, self.l2)?;
        ops::sparse_apply(
            s,
            "ProximalGradientDescent",
            var.kind() == VarKind::Resource,
            &[&var.handle()],
            &[&lr, &l1, &l2, &grad.values, &grad.indices],
            self.use_locking,
            false,
        )
    }
}

/// Proximal Adagrad; see the module docs.
#[derive(Debug)]
pub struct ProximalAdagradOptimizer {
    learning_rate: Hyper,
    initial_accumulator_value: f64,
    l1: f64,
    l2: f64,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl ProximalAdagradOptimizer {
    /// An optimizer named `ProximalAdagrad` whose accumulators start at 0.1
    /// (TensorFlow's default), without regularisation.
    pub fn new(learning_rate: impl Into<Hyper>) -> ProximalAdagradOptimizer {
        ProximalAdagradOptimizer {
            learning_rate: learning_rate.into(),
            initial_accumulator_value: 0.1,
            l1: 0.0,
            l2: 0.0,
            use_locking: false,
            name: "ProximalAdagrad".into(),
            slots: SlotStore::default(),
        }
    }

    /// The accumulators' starting value (must be positive).
    pub fn initial_accumulator_value(mut self, v: f64) -> Self {
        self.initial_accumulator_value = v;
        self
    }

    /// The L1 regularisation strength (at least 0).
    pub fn l1_regularization_strength(mut self, v: f64) -> Self {
        self.l1 = v;
        self
    }

    /// The L2 regularisation strength (at least 0).
    pub fn l2_regularization_strength(mut self, v: f64) -> Self {
        self.l2 = v;
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

    fn accumulator(&self, var: &VarRef) -> Result<Output> {
        self.get_slot(var, "accumulator")
            .map(|v| v.handle())
            .ok_or_else(|| Status::internal(format!("no accumulator slot for '{}'", var.name())))
    }
}

impl Optimizer for ProximalAdagradOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        if self.initial_accumulator_value.is_nan() || self.initial_accumulator_value <= 0.0 {
            return Err(Status::invalid_argument(format!(
                "initial_accumulator_value must be positive: {}",
                self.initial_accumulator_value
            )));
        }
        check_strengths(self.l1, self.l2)?;
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
        let [lr, l1, l2] = scalars(s, var, &self.learning_rate, self.l1, self.l2)?;
        let v = var.handle();
        let inputs = ProximalAdagradInputs {
            var: &v,
            accum: &accum,
            lr: &lr,
            l1: &l1,
            l2: &l2,
            grad,
        };
        let opts = apply_options(self.use_locking);
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_proximal_adagrad(s, &inputs, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_proximal_adagrad(s, &inputs, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let accum = self.accumulator(var)?;
        let [lr, l1, l2] = scalars(s, var, &self.learning_rate, self.l1, self.l2)?;
        ops::sparse_apply(
            s,
            "ProximalAdagrad",
            var.kind() == VarKind::Resource,
            &[&var.handle(), &accum],
            &[&lr, &l1, &l2, &grad.values, &grad.indices],
            self.use_locking,
            false,
        )
    }
}
