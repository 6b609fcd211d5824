//! [`FtrlOptimizer`] (`tf.compat.v1.train.FtrlOptimizer`, FTRL-proximal of
//! McMahan et al., 2013): slots `accum` (`<var>/Ftrl`, starting at
//! `initial_accumulator_value`) and `linear` (`<var>/Ftrl_1`, starting at 0),
//! updated by `ApplyFtrl`, or by `ApplyFtrlV2` when the L2 shrinkage is
//! positive. The L2 strength given to the op is TensorFlow's adjusted one,
//! `l2 + beta / (2 * max(learning_rate, 1e-36))`. Rows of a sparse gradient
//! (duplicates summed) go to `SparseApplyFtrl`/`SparseApplyFtrlV2`, which update
//! only those rows.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, ApplyOptions, FtrlInputs};
use crate::train::optimizer::{constant_of, Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::{Result, Status};

/// FTRL-proximal; see the module docs.
#[derive(Debug)]
pub struct FtrlOptimizer {
    learning_rate: Hyper,
    learning_rate_power: f64,
    initial_accumulator_value: f64,
    l1: f64,
    l2: f64,
    l2_shrinkage: f64,
    beta: f64,
    use_locking: bool,
    name: String,
    accum_name: Option<String>,
    linear_name: Option<String>,
    slots: SlotStore,
}

/// The scalars of one variable's update, in its dtype.
struct FtrlHypers {
    lr: Output,
    l1: Output,
    l2: Output,
    l2_shrinkage: Option<Output>,
    lr_power: Output,
}

impl FtrlOptimizer {
    /// An optimizer named `Ftrl` with TensorFlow's defaults: learning-rate power
    /// -0.5, accumulators starting at 0.1, no regularisation.
    pub fn new(learning_rate: impl Into<Hyper>) -> FtrlOptimizer {
        FtrlOptimizer {
            learning_rate: learning_rate.into(),
            learning_rate_power: -0.5,
            initial_accumulator_value: 0.1,
            l1: 0.0,
            l2: 0.0,
            l2_shrinkage: 0.0,
            beta: 0.0,
            use_locking: false,
            name: "Ftrl".into(),
            accum_name: None,
            linear_name: None,
            slots: SlotStore::default(),
        }
    }

    /// How the learning rate decreases with the accumulated squared gradient
    /// (at most 0; 0 keeps it fixed).
    pub fn learning_rate_power(mut self, p: f64) -> Self {
        self.learning_rate_power = p;
        self
    }

    /// The accumulators' starting value (at least 0).
    pub fn initial_accumulator_value(mut self, v: f64) -> Self {
        self.initial_accumulator_value = v;
        self
    }

    /// The L1 regularisation strength (at least 0).
    pub fn l1_regularization_strength(mut self, v: f64) -> Self {
        self.l1 = v;
        self
    }

    /// The L2 (stabilisation) regularisation strength (at least 0).
    pub fn l2_regularization_strength(mut self, v: f64) -> Self {
        self.l2 = v;
        self
    }

    /// The L2 shrinkage strength, a magnitude penalty added to the gradient
    /// (at least 0; positive selects `ApplyFtrlV2`).
    pub fn l2_shrinkage_regularization_strength(mut self, v: f64) -> Self {
        self.l2_shrinkage = v;
        self
    }

    /// The paper's `beta`, folded into the L2 strength (default 0).
    pub fn beta(mut self, v: f64) -> Self {
        self.beta = v;
        self
    }

    /// Holds all three variables' locks for the whole update.
    pub fn use_locking(mut self, on: bool) -> Self {
        self.use_locking = on;
        self
    }

    /// Renames the optimizer (its name scope and default slot suffix).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    /// The suffix of the accumulator slots (default: the optimizer's name).
    pub fn accum_name(mut self, name: &str) -> Self {
        self.accum_name = Some(name.to_owned());
        self
    }

    /// The suffix of the linear slots (default: the optimizer's name, made
    /// unique after the accumulator's).
    pub fn linear_name(mut self, name: &str) -> Self {
        self.linear_name = Some(name.to_owned());
        self
    }

    /// TensorFlow's argument checks (its constructor's `ValueError`s).
    fn check(&self) -> Result<()> {
        let bad = |what: &str, v: f64, need: &str| {
            Err(Status::invalid_argument(format!(
                "{what} {v} needs to be {need}"
            )))
        };
        if self.initial_accumulator_value.is_nan() || self.initial_accumulator_value < 0.0 {
            return bad(
                "initial_accumulator_value",
                self.initial_accumulator_value,
                "positive or zero",
            );
        }
        if self.learning_rate_power.is_nan() || self.learning_rate_power > 0.0 {
            return bad(
                "learning_rate_power",
                self.learning_rate_power,
                "negative or zero",
            );
        }
        for (what, v) in [
            ("l1_regularization_strength", self.l1),
            ("l2_regularization_strength", self.l2),
            ("l2_shrinkage_regularization_strength", self.l2_shrinkage),
        ] {
            if v.is_nan() || v < 0.0 {
                return bad(what, v, "positive or zero");
            }
        }
        Ok(())
    }

    fn slot(&self, var: &VarRef, slot: &str) -> Result<Output> {
        self.get_slot(var, slot)
            .map(|v| v.handle())
            .ok_or_else(|| Status::internal(format!("no {slot} slot for '{}'", var.name())))
    }

    /// The learning rate, the regularisation strengths (L2 adjusted by `beta`)
    /// and the power, as scalars of `var`'s dtype.
    fn hypers(&self, s: &Scope, var: &VarRef) -> Result<FtrlHypers> {
        let dt = var.dtype();
        let lr = self.learning_rate.to_output(s, dt, "learning_rate")?;
        let l2 = match &self.learning_rate {
            // no beta: the L2 strength as given
            _ if self.beta == 0.0 => {
                constant_of(s, dt, self.l2, "adjusted_l2_regularization_strength")?
            }
            Hyper::Value(lr) => constant_of(
                s,
                dt,
                self.l2 + self.beta / (2.0 * lr.max(1e-36)),
                "adjusted_l2_regularization_strength",
            )?,
            Hyper::Tensor(_) => {
                // l2 + beta / (2 * max(lr, 1e-36)), in the graph
                let floor = constant_of(s, dt, 1e-36, "min_learning_rate")?;
                let two = constant_of(s, dt, 2.0, "two")?;
                let denom = ops::mul(s, &two, &ops::maximum(s, &lr, &floor)?)?;
                let beta = constant_of(s, dt, self.beta, "beta")?;
                let l2 = constant_of(s, dt, self.l2, "l2_regularization_strength")?;
                ops::add(s, &l2, &ops::real_div(s, &beta, &denom)?)?
            }
        };
        Ok(FtrlHypers {
            lr,
            l1: constant_of(s, dt, self.l1, "l1_regularization_strength")?,
            l2,
            l2_shrinkage: if self.l2_shrinkage > 0.0 {
                Some(constant_of(
                    s,
                    dt,
                    self.l2_shrinkage,
                    "l2_shrinkage_regularization_strength",
                )?)
            } else {
                None
            },
            lr_power: constant_of(s, dt, self.learning_rate_power, "learning_rate_power")?,
        })
    }
}

impl Optimizer for FtrlOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        self.check()?;
        let accum_name = self.accum_name.as_deref().unwrap_or(&self.name);
        let linear_name = self.linear_name.as_deref().unwrap_or(&self.name);
        for v in vars {
            self.slots
                .get_or_make(s, v, "accum", accum_name, self.initial_accumulator_value)?;
            self.slots.get_or_make(s, v, "linear", linear_name, 0.0)?;
        }
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let (accum, linear) = (self.slot(var, "accum")?, self.slot(var, "linear")?);
        let h = self.hypers(s, var)?;
        let v = var.handle();
        let inputs = FtrlInputs {
            var: &v,
            accum: &accum,
            linear: &linear,
            grad,
            lr: &h.lr,
            l1: &h.l1,
            l2: &h.l2,
            l2_shrinkage: h.l2_shrinkage.as_ref(),
            lr_power: &h.lr_power,
        };
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            ..Default::default()
        };
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_ftrl(s, &inputs, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_ftrl(s, &inputs, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let (accum, linear) = (self.slot(var, "accum")?, self.slot(var, "linear")?);
        let h = self.hypers(s, var)?;
        let v = var.handle();
        let (family, rest) = match &h.l2_shrinkage {
            None => (
                "Ftrl",
                vec![
                    &grad.values,
                    &grad.indices,
                    &h.lr,
                    &h.l1,
                    &h.l2,
                    &h.lr_power,
                ],
            ),
            Some(shrinkage) => (
                "FtrlV2",
                vec![
                    &grad.values,
                    &grad.indices,
                    &h.lr,
                    &h.l1,
                    &h.l2,
                    shrinkage,
                    &h.lr_power,
                ],
            ),
        };
        ops::sparse_apply(
            s,
            family,
            var.kind() == VarKind::Resource,
            &[&v, &accum, &linear],
            &rest,
            self.use_locking,
            false,
        )
    }
}
