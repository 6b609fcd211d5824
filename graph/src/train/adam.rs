//! [`AdamOptimizer`] (`tf.compat.v1.train.AdamOptimizer`): slots `m`
//! (`<var>/Adam`) and `v` (`<var>/Adam_1`), both starting at 0, and two non-slot
//! scalars `beta1_power` and `beta2_power` (starting at `beta1`, `beta2`),
//! colocated with the first variable by name, as TensorFlow v1 keeps them.
//! Each step runs `ApplyAdam` per variable with the current powers, then
//! multiplies the powers by `beta1` and `beta2`.
//!
//! Rows of a sparse gradient (duplicates summed) follow TensorFlow's
//! `_apply_sparse_shared`: every row of `m` and `v` decays (`m = m * beta1`,
//! an assignment), the gradient's rows are scattered in (`m[i] += g * (1 -
//! beta1)`, `v[i] += g² * (1 - beta2)`), and the whole variable moves by
//! `lr_t * m / (sqrt(v) + epsilon)`, as the dense update does.
//!
//! TensorFlow keeps the powers in float32 and casts them per variable; here they
//! have the dtype of the first variable (by name) and are cast for variables of
//! other dtypes, so float64 models stay float64 throughout.

use crate::builder::{Operation, Output, Scope};
use crate::gradients::IndexedSlices;
use crate::ops::{self, AdamInputs, ApplyOptions, ScatterOp};
use crate::train::optimizer::{constant_of, group_named, read_as, Hyper, Optimizer};
use crate::train::slots::SlotStore;
use crate::train::variables::{VarKind, VarRef};
use crate::{Result, Status};

/// Adam; see the module docs.
#[derive(Debug)]
pub struct AdamOptimizer {
    learning_rate: Hyper,
    beta1: f64,
    beta2: f64,
    epsilon: Hyper,
    use_nesterov: bool,
    use_locking: bool,
    name: String,
    slots: SlotStore,
}

impl AdamOptimizer {
    /// An optimizer named `Adam` with TensorFlow's defaults: beta1 0.9, beta2
    /// 0.999, epsilon 1e-8.
    pub fn new(learning_rate: impl Into<Hyper>) -> AdamOptimizer {
        AdamOptimizer {
            learning_rate: learning_rate.into(),
            beta1: 0.9,
            beta2: 0.999,
            epsilon: Hyper::Value(1e-8),
            use_nesterov: false,
            use_locking: false,
            name: "Adam".into(),
            slots: SlotStore::default(),
        }
    }

    /// The decay rates of the first and second moments.
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
        self.beta1 = beta1;
        self.beta2 = beta2;
        self
    }

    /// The fuzz term of the denominator.
    pub fn epsilon(mut self, epsilon: impl Into<Hyper>) -> Self {
        self.epsilon = epsilon.into();
        self
    }

    /// Nesterov momentum (`ApplyAdam`'s `use_nesterov`, NAdam-style).
    pub fn use_nesterov(mut self, on: bool) -> Self {
        self.use_nesterov = on;
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

    /// The `beta1_power` and `beta2_power` variables, once created.
    pub fn beta_powers(&self) -> Option<(VarRef, VarRef)> {
        Some((
            self.slots.non_slot("beta1_power")?,
            self.slots.non_slot("beta2_power")?,
        ))
    }

    fn powers(&self) -> Result<(VarRef, VarRef)> {
        self.beta_powers()
            .ok_or_else(|| Status::internal("Adam's beta powers were not created"))
    }
}

impl Optimizer for AdamOptimizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn slots(&self) -> &SlotStore {
        &self.slots
    }

    fn create_slots(&self, s: &Scope, vars: &[VarRef]) -> Result<()> {
        let Some(first) = vars.iter().min_by(|a, b| a.name().cmp(b.name())) else {
            return Ok(());
        };
        self.slots
            .get_or_make_non_slot(s, "beta1_power", self.beta1, first.dtype(), first)?;
        self.slots
            .get_or_make_non_slot(s, "beta2_power", self.beta2, first.dtype(), first)?;
        for v in vars {
            self.slots.get_or_make(s, v, "m", &self.name, 0.0)?;
            self.slots
                .get_or_make(s, v, "v", &format!("{}_1", self.name), 0.0)?;
        }
        Ok(())
    }

    fn apply_dense(&self, s: &Scope, grad: &Output, var: &VarRef) -> Result<Operation> {
        let slot = |n: &str| {
            self.get_slot(var, n)
                .ok_or_else(|| Status::internal(format!("no {n} slot for '{}'", var.name())))
        };
        let (m, v) = (slot("m")?.handle(), slot("v")?.handle());
        let (p1, p2) = self.powers()?;
        let dt = var.dtype();
        let beta1_power = read_as(s, &p1, dt)?;
        let beta2_power = read_as(s, &p2, dt)?;
        let lr = self.learning_rate.to_output(s, dt, "learning_rate")?;
        let beta1 = constant_of(s, dt, self.beta1, "beta1")?;
        let beta2 = constant_of(s, dt, self.beta2, "beta2")?;
        let epsilon = self.epsilon.to_output(s, dt, "epsilon")?;
        let x = var.handle();
        let inputs = AdamInputs {
            var: &x,
            m: &m,
            v: &v,
            beta1_power: &beta1_power,
            beta2_power: &beta2_power,
            lr: &lr,
            beta1: &beta1,
            beta2: &beta2,
            epsilon: &epsilon,
            grad,
        };
        let opts = ApplyOptions {
            use_locking: self.use_locking,
            use_nesterov: self.use_nesterov,
            ..Default::default()
        };
        match var.kind() {
            VarKind::Ref => Ok(ops::apply_adam(s, &inputs, opts)?.op().clone()),
            VarKind::Resource => ops::resource_apply_adam(s, &inputs, opts),
        }
    }

    fn apply_sparse(&self, s: &Scope, grad: &IndexedSlices, var: &VarRef) -> Result<Operation> {
        let slot = |n: &str| {
            self.get_slot(var, n)
                .ok_or_else(|| Status::internal(format!("no {n} slot for '{}'", var.name())))
        };
        let (m, v) = (slot("m")?, slot("v")?);
        let (p1, p2) = self.powers()?;
        let dt = var.dtype();
        let beta1_power = read_as(s, &p1, dt)?;
        let beta2_power = read_as(s, &p2, dt)?;
        let lr_t = self.learning_rate.to_output(s, dt, "learning_rate")?;
        let beta1 = constant_of(s, dt, self.beta1, "beta1")?;
        let beta2 = constant_of(s, dt, self.beta2, "beta2")?;
        let epsilon = self.epsilon.to_output(s, dt, "epsilon")?;
        let one = constant_of(s, dt, 1.0, "one")?;
        // lr = lr_t * sqrt(1 - beta2_power) / (1 - beta1_power)
        let lr = ops::div(
            s,
            &ops::mul(s, &lr_t, &ops::sqrt(s, &ops::sub(s, &one, &beta2_power)?)?)?,
            &ops::sub(s, &one, &beta1_power)?,
        )?;
        let g = &grad.values;
        let m_rows = ops::mul(s, g, &ops::sub(s, &one, &beta1)?)?;
        let m_t = decay_then_scatter(s, &m, &beta1, &grad.indices, &m_rows)?;
        let v_rows = ops::mul(s, &ops::mul(s, g, g)?, &ops::sub(s, &one, &beta2)?)?;
        let v_t = decay_then_scatter(s, &v, &beta2, &grad.indices, &v_rows)?;
        let step = ops::div(
            s,
            &ops::mul(s, &lr, &m_t)?,
            &ops::add(s, &ops::sqrt(s, &v_t)?, &epsilon)?,
        )?;
        let var_update = match var.kind() {
            VarKind::Ref => ops::assign_sub(s, &var.handle(), &step)?.op().clone(),
            VarKind::Resource => s
                .op("AssignSubVariableOp")
                .input(var.handle())
                .input(&step)
                .attr("dtype", dt)
                .build()?,
        };
        group_named(
            s,
            &[var_update, m_t.op().clone(), v_t.op().clone()],
            "update",
        )
    }

    fn finish(&self, s: &Scope, updates: &[Operation], name: &str) -> Result<Operation> {
        let (p1, p2) = self.powers()?;
        let deps: Vec<&Operation> = updates.iter().collect();
        let after = s.with_control_dependencies(&deps);
        let mut all = updates.to_vec();
        for (p, beta, n) in [
            (&p1, self.beta1, "update_beta1"),
            (&p2, self.beta2, "update_beta2"),
        ] {
            let ps = after.with_name_scope(n).colocate_with(p.op());
            let b = constant_of(&ps, p.dtype(), beta, "beta")?;
            let cur = read_as(&ps, p, p.dtype())?;
            let next = ops::mul(&ps, &cur, &b)?;
            all.push(p.assign(&ps, &next)?);
        }
        group_named(s, &all, name)
    }
}

/// `slot = slot * decay`, then `slot[indices] += rows`; returns the slot's value
/// after both (TensorFlow's `state_ops.assign` then `scatter_add`).
fn decay_then_scatter(
    s: &Scope,
    slot: &VarRef,
    decay: &Output,
    indices: &Output,
    rows: &Output,
) -> Result<Output> {
    let decayed = ops::mul(s, &slot.read(s)?, decay)?;
    let assign = slot.assign(s, &decayed)?;
    let after = s.with_control_dependencies(&[&assign]);
    match slot.kind() {
        VarKind::Ref => ops::scatter(&after, ScatterOp::Add, &slot.handle(), indices, rows),
        VarKind::Resource => {
            let scatter =
                ops::resource_scatter(&after, ScatterOp::Add, &slot.handle(), indices, rows)?;
            slot.read(&s.with_control_dependencies(&[&scatter]))
        }
    }
}
