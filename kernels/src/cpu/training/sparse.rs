//! The sparse optimizer kernels (`SparseApply*` and `ResourceSparseApply*`):
//! each row `indices[k]` of the variable and its slots is updated from row `k`
//! of the gradient, in index order (a row named twice is updated twice), with
//! the math of TensorFlow's CPU kernels. Shapes, scalars and every index are
//! checked before the first write, with every variable's lock held for the
//! whole update (whatever `use_locking` says: the update touches few rows, and
//! a failing one then leaves every variable unchanged).

use std::marker::PhantomData;
use std::sync::Arc;

use graph::{DType, Result, Status, Tensor};
use smallvec::SmallVec;

use crate::cpu::array::elems::{dispatch_index, IndexElem};
use crate::cpu::training::apply::{distinct_variables, with_locked, ScalarRule, Vars};
use crate::cpu::training::regularized::{proximal, FtrlParams};
use crate::cpu::training::update::{adadelta_step, MAX_VARS};
use crate::cpu::types::FloatType;
use crate::dispatch_float;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::KernelFactory;

/// The sparse optimizer families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SparseFamily {
    /// `SparseApplyAdagrad`.
    Adagrad,
    /// `SparseApplyMomentum`.
    Momentum,
    /// `SparseApplyRMSProp`.
    RmsProp,
    /// `SparseApplyFtrl`.
    Ftrl,
    /// `SparseApplyFtrlV2` (with `l2_shrinkage`).
    FtrlV2,
    /// `SparseApplyCenteredRMSProp`.
    CenteredRmsProp,
    /// `SparseApplyAdadelta`.
    Adadelta,
    /// `SparseApplyProximalGradientDescent`.
    ProximalGradientDescent,
    /// `SparseApplyProximalAdagrad`.
    ProximalAdagrad,
}

impl SparseFamily {
    fn vars(self) -> &'static [&'static str] {
        match self {
            SparseFamily::Adagrad | SparseFamily::Momentum | SparseFamily::ProximalAdagrad => {
                &["var", "accum"]
            }
            SparseFamily::RmsProp => &["var", "ms", "mom"],
            SparseFamily::Ftrl | SparseFamily::FtrlV2 => &["var", "accum", "linear"],
            SparseFamily::CenteredRmsProp => &["var", "mg", "ms", "mom"],
            SparseFamily::Adadelta => &["var", "accum", "accum_update"],
            SparseFamily::ProximalGradientDescent => &["var"],
        }
    }

    /// The other inputs in order.
    fn rest(self) -> &'static [&'static str] {
        match self {
            SparseFamily::Adagrad => &["lr", "grad", "indices"],
            SparseFamily::Momentum => &["lr", "grad", "indices", "momentum"],
            SparseFamily::RmsProp => &["lr", "rho", "momentum", "epsilon", "grad", "indices"],
            SparseFamily::Ftrl => &["grad", "indices", "lr", "l1", "l2", "lr_power"],
            SparseFamily::FtrlV2 => &[
                "grad",
                "indices",
                "lr",
                "l1",
                "l2",
                "l2_shrinkage",
                "lr_power",
            ],
            SparseFamily::CenteredRmsProp => {
                &["lr", "rho", "momentum", "epsilon", "grad", "indices"]
            }
            SparseFamily::Adadelta => &["lr", "rho", "epsilon", "grad", "indices"],
            SparseFamily::ProximalGradientDescent => &["alpha", "l1", "l2", "grad", "indices"],
            SparseFamily::ProximalAdagrad => &["lr", "l1", "l2", "grad", "indices"],
        }
    }

    /// What TensorFlow's kernel requires of the scalar `name`'s value.
    fn rule(self, name: &str, linear_by_lr: bool) -> ScalarRule {
        match (self, name) {
            (SparseFamily::Ftrl | SparseFamily::FtrlV2, "lr") if linear_by_lr => {
                ScalarRule::NonNegative
            }
            (SparseFamily::Ftrl | SparseFamily::FtrlV2 | SparseFamily::ProximalAdagrad, "lr") => {
                ScalarRule::Positive
            }
            (
                SparseFamily::Ftrl | SparseFamily::FtrlV2 | SparseFamily::ProximalAdagrad,
                "l1" | "l2" | "l2_shrinkage",
            ) => ScalarRule::NonNegative,
            (SparseFamily::Ftrl | SparseFamily::FtrlV2, "lr_power") => ScalarRule::NonPositive,
            _ => ScalarRule::Any,
        }
    }

    fn position(self, name: &str) -> usize {
        self.rest().iter().position(|n| *n == name).unwrap_or(0)
    }
}

/// Builds the kernel of `family` for the node in `c`.
pub fn make(c: &OpKernelConstruction<'_>, family: SparseFamily) -> Result<Box<dyn OpKernel>> {
    let flag = |name: &str| -> Result<bool> {
        if c.node.attr.contains_key(name) {
            c.attr::<bool>(name)
        } else {
            Ok(false)
        }
    };
    let nesterov = flag("use_nesterov")?;
    let update_slots =
        !c.node.attr.contains_key("update_slots") || c.attr::<bool>("update_slots")?;
    let linear_by_lr = flag("multiply_linear_by_lr")?;
    let resource = c.op_def.name.starts_with("Resource");
    let ti: DType = c.attr("Tindices")?;
    dispatch_float!(c.attr::<DType>("T")?, T => {
        dispatch_index!(ti, I => Ok(Box::new(SparseApplyKernel::<T, I> {
            family,
            resource,
            nesterov,
            update_slots,
            linear_by_lr,
            _t: PhantomData,
        }) as Box<dyn OpKernel>))
    })
}

/// The kernel factory of `family` (a plain function, as the registry keeps).
pub fn factory(family: SparseFamily) -> KernelFactory {
    match family {
        SparseFamily::Adagrad => |c| make(c, SparseFamily::Adagrad),
        SparseFamily::Momentum => |c| make(c, SparseFamily::Momentum),
        SparseFamily::RmsProp => |c| make(c, SparseFamily::RmsProp),
        SparseFamily::CenteredRmsProp => |c| make(c, SparseFamily::CenteredRmsProp),
        SparseFamily::Adadelta => |c| make(c, SparseFamily::Adadelta),
        SparseFamily::ProximalGradientDescent => |c| make(c, SparseFamily::ProximalGradientDescent),
        SparseFamily::ProximalAdagrad => |c| make(c, SparseFamily::ProximalAdagrad),
        SparseFamily::Ftrl => |c| make(c, SparseFamily::Ftrl),
        SparseFamily::FtrlV2 => |c| make(c, SparseFamily::FtrlV2),
    }
}

/// A sparse optimizer update of dtype `T` with indices of type `I`.
struct SparseApplyKernel<T, I> {
    family: SparseFamily,
    resource: bool,
    nesterov: bool,
    update_slots: bool,
    linear_by_lr: bool,
    _t: PhantomData<fn(T, I)>,
}

impl<T: FloatType, I: IndexElem> SparseApplyKernel<T, I> {
    fn variables(&self, ctx: &OpKernelContext<'_>) -> Result<Vars> {
        distinct_variables(ctx, self.family.vars(), self.resource, T::DTYPE)
    }

    /// The scalars by position in [`SparseFamily::rest`] (zero at `grad` and
    /// `indices`).
    fn scalars(&self, ctx: &OpKernelContext<'_>) -> Result<SmallVec<[T; 8]>> {
        let base = self.family.vars().len();
        let mut out = SmallVec::new();
        for (j, name) in self.family.rest().iter().enumerate() {
            if matches!(*name, "grad" | "indices") {
                out.push(T::zero());
                continue;
            }
            let t = ctx.input(base + j)?;
            if t.rank() != 0 {
                return Err(Status::invalid_argument(format!(
                    "{name} is not a scalar: {}",
                    t.shape()
                )));
            }
            let v = t.scalar_value::<T>()?;
            self.family.rule(name, self.linear_by_lr).check(name, v)?;
            out.push(v);
        }
        Ok(out)
    }

    /// TensorFlow's checks; returns the row length and the rows to update.
    fn check(
        &self,
        ts: &[&mut Tensor],
        grad: &Tensor,
        indices: &Tensor,
    ) -> Result<(usize, Vec<usize>)> {
        let var = &ts[0];
        for (k, t) in ts.iter().enumerate().skip(1) {
            if t.shape() != var.shape() {
                return Err(Status::invalid_argument(format!(
                    "var and {} do not have the same shape{} {}",
                    self.family.vars()[k],
                    var.shape(),
                    t.shape()
                )));
            }
        }
        if var.rank() < 1 {
            return Err(Status::invalid_argument(
                "var must be at least 1 dimensional",
            ));
        }
        if indices.rank() != 1 {
            return Err(Status::invalid_argument("indices must be one-dimensional"));
        }
        if grad.rank() != var.rank() {
            return Err(Status::invalid_argument(format!(
                "var and grad do not have the same rank{} {}",
                var.shape(),
                grad.shape()
            )));
        }
        for d in 1..var.rank() {
            if var.dims()[d] != grad.dims()[d] {
                return Err(Status::invalid_argument(format!(
                    "var and grad must match in dimension {d}"
                )));
            }
        }
        let n = indices.dims()[0];
        if grad.dims()[0] != n {
            return Err(Status::invalid_argument(
                "grad must be the same size as indices in the first dimension.",
            ));
        }
        let rows = var.dims()[0];
        let inner = var.num_elements().checked_div(rows).unwrap_or(0);
        let mut starts = Vec::with_capacity(n);
        for (i, v) in indices.as_slice::<I>()?.iter().enumerate() {
            match usize::try_from(v.to_i64()) {
                Ok(r) if r < rows => starts.push(r * inner),
                _ => {
                    return Err(Status::invalid_argument(format!(
                        "Index {} at offset {i} in indices is out of range",
                        v.to_i64()
                    )))
                }
            }
        }
        Ok((inner, starts))
    }

    /// Updates one row (`s[k]`: variable `k`'s row) from its gradient row.
    fn row(&self, s: &mut [&mut [T]], g: &[T], rest: &[T]) {
        let one = T::one();
        match self.family {
            SparseFamily::Adagrad => {
                let lr = rest[0];
                let [x, a] = s else { return };
                for ((x, a), &g) in x.iter_mut().zip(a.iter_mut()).zip(g) {
                    if self.update_slots {
                        *a = *a + g * g;
                    }
                    *x = *x - lr * g * (one / a.sqrt());
                }
            }
            SparseFamily::Momentum => {
                let (lr, m) = (rest[0], rest[3]);
                let [x, a] = s else { return };
                for ((x, a), &g) in x.iter_mut().zip(a.iter_mut()).zip(g) {
                    *a = *a * m + g;
                    if self.nesterov {
                        *x = *x - (g * lr + *a * m * lr);
                    } else {
                        *x = *x - *a * lr;
                    }
                }
            }
            SparseFamily::RmsProp => {
                let [lr, rho, momentum, epsilon, ..] = *rest else {
                    return;
                };
                let [x, ms, mom] = s else { return };
                for (((x, ms), mom), &g) in
                    x.iter_mut().zip(ms.iter_mut()).zip(mom.iter_mut()).zip(g)
                {
                    *ms = *ms * rho + g * g * (one - rho);
                    *mom = *mom * momentum + (one / (*ms + epsilon).sqrt()) * lr * g;
                    *x = *x - *mom;
                }
            }
            SparseFamily::Ftrl | SparseFamily::FtrlV2 => {
                let v2 = self.family == SparseFamily::FtrlV2;
                let (l2_shrinkage, lr_power) = if v2 {
                    (rest[5], rest[6])
                } else {
                    (T::zero(), rest[5])
                };
                let p = FtrlParams {
                    lr: rest[2],
                    l1: rest[3],
                    l2: rest[4],
                    l2_shrinkage,
                    lr_power,
                    v2,
                    linear_by_lr: self.linear_by_lr,
                };
                let [x, a, lin] = s else { return };
                for (((x, a), lin), &g) in x.iter_mut().zip(a.iter_mut()).zip(lin.iter_mut()).zip(g)
                {
                    *lin = p.linear(*lin, g, *x, *a);
                    *a = *a + g * g;
                    *x = p.var(*lin, *a);
                }
            }
            SparseFamily::CenteredRmsProp => {
                let [lr, rho, momentum, epsilon, ..] = *rest else {
                    return;
                };
                let [x, mg, ms, mom] = s else { return };
                let rows = x.iter_mut().zip(mg.iter_mut()).zip(ms.iter_mut());
                for (((x, mg), ms), (mom, &g)) in rows.zip(mom.iter_mut().zip(g)) {
                    *ms = *ms * rho + g * g * (one - rho);
                    *mg = *mg * rho + g * (one - rho);
                    let denom = *ms + epsilon - *mg * *mg;
                    *mom = *mom * momentum + (one / denom.sqrt()) * lr * g;
                    *x = *x - *mom;
                }
            }
            SparseFamily::Adadelta => {
                let [lr, rho, epsilon, ..] = *rest else {
                    return;
                };
                let [x, a, u] = s else { return };
                for (((x, a), u), &g) in x.iter_mut().zip(a.iter_mut()).zip(u.iter_mut()).zip(g) {
                    *a = *a * rho + g * g * (one - rho);
                    let step = adadelta_step(*u, *a, epsilon, g);
                    *x = *x - step * lr;
                    *u = *u * rho + step * step * (one - rho);
                }
            }
            SparseFamily::ProximalGradientDescent => {
                let [lr, l1, l2, ..] = *rest else {
                    return;
                };
                let [x] = s else { return };
                for (x, &g) in x.iter_mut().zip(g) {
                    *x = proximal(*x, g, lr, l1, l2);
                }
            }
            SparseFamily::ProximalAdagrad => {
                let [lr, l1, l2, ..] = *rest else {
                    return;
                };
                let [x, a] = s else { return };
                for ((x, a), &g) in x.iter_mut().zip(a.iter_mut()).zip(g) {
                    *a = *a + g * g;
                    *x = proximal(*x, g, lr * (one / a.sqrt()), l1, l2);
                }
            }
        }
    }
}

impl<T: FloatType, I: IndexElem> OpKernel for SparseApplyKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let vars = self.variables(ctx)?;
        let rest = self.scalars(ctx)?;
        let base = self.family.vars().len();
        let grad = ctx.input(base + self.family.position("grad"))?.clone();
        let indices = ctx.input(base + self.family.position("indices"))?.clone();
        with_locked(&vars, |ts| {
            let (inner, starts) = self.check(ts, &grad, &indices)?;
            if inner == 0 {
                return Ok(());
            }
            let g = grad.as_slice::<T>()?;
            let mut slices: SmallVec<[&mut [T]; MAX_VARS]> = SmallVec::new();
            for t in ts.iter_mut() {
                slices.push(t.as_mut_slice::<T>()?);
            }
            for (k, &start) in starts.iter().enumerate() {
                let mut rows: SmallVec<[&mut [T]; MAX_VARS]> = slices
                    .iter_mut()
                    .map(|s| &mut s[start..start + inner])
                    .collect();
                self.row(&mut rows, &g[k * inner..(k + 1) * inner], &rest);
            }
            Ok(())
        })?;
        if !self.resource {
            ctx.set_output_ref(0, Arc::clone(&vars[0]))?;
        }
        Ok(())
    }
}
