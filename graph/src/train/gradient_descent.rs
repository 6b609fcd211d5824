//! [`GradientDescentOptimizer`] (`tf.compat.v1.train.GradientDescentOptimizer`):
//! `var -= learning_rate * grad`, through `ApplyGradientDescent` or
//! `ResourceApplyGradientDescent`. No slots. Rows of a sparse gradient are
//! scattered without summing duplicates first, as TensorFlow does:
//! `ScatterSub(var, indices, values * lr)` on a reference variable,
//! `ResourceScatterAdd(var, indices, -values * lr)` on a resource one.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, ApplyOptions, ScatterOp};
use crate::train::optimizer::{Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::Result;

/// Plain gradient descent; see the module docs.
#[derive(Debug)]
pub struct GradientDescentOptimizer {
    learning_rate: Hyper,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl GradientDescentOptimizer {
    /// An optimizer named `GradientDescent` with this learning rate (a constant
    /// or a scalar tensor).
    pub fn new(learning_rate: impl Into<Hyper>) -> GradientDescentOptimizer {
        GradientDescentOptimizer {
            learning_rate: learning_rate.into(),
            use_locking: false,
            name: "GradientDescent".into(),
            slots: SlotStore::default(),
        }
    }

    /// Holds each variable's lock for its whole update.
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

impl Optimizer for GradientDescentOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, _s: &Scope, _vars: &[VarRef]) -> Result<()> {
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let lr = self
            .learning_rate
            .to_output(s, var.dtype(), "learning_rate")?;
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            use_nesterov: false,
            ..Default::default()
        };
        match var.kind() {
            VarKind::Ref => Ok(
                ops::apply_gradient_descent(s, &var.handle(), &lr, grad, opts)?
                    .op()
                    .clone(),
            ),
            VarKind::Resource => {
                ops::resource_apply_gradient_descent(s, &var.handle(), &lr, grad, opts)
            }
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        self.apply_sparse_duplicate_indices(s, grad, var)
    }

    fn apply_sparse_duplicate_indices(
        &self,
        s: &Scope,
        grad: &IndexedSlices,
        var: &VarRef,
    ) -> Result<Operation> {
        let lr = self
            .learning_rate
            .to_output(s, var.dtype(), "learning_rate")?;
        match var.kind() {
            VarKind::Ref => {
                let delta = ops::mul(s, &grad.values, &lr)?;
                let out = s
                    .op("ScatterSub")
                    .input(var.handle())
                    .input(&grad.indices)
                    .input(&delta)
                    .attr("use_locking", self.use_locking)
                    .build1()?;
                Ok(out.op().clone())
            }
            VarKind::Resource => {
                let delta = ops::mul(s, &ops::neg(s, &grad.values)?, &lr)?;
                ops::resource_scatter(s, ScatterOp::Add, &var.handle(), &grad.indices, &delta)
            }
        }
    }
}
