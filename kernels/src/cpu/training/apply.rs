//! The generic optimizer kernel: one [`ApplyKernel`] per (family, dtype, form),
//! running an [`Update`]'s stages on the variables under the locking discipline
//! described in the parent module.

use std::marker::PhantomData;
use std::sync::Arc;

use graph::{DType, ResourceHandle, Result, Status, Tensor};
use smallvec::SmallVec;

use crate::cpu::training::regularized::{Ftrl, ProximalAdagrad, ProximalGradientDescent};
use crate::cpu::training::update::{
    run_stage, Adadelta, Adagrad, Adam, CenteredRmsProp, GradientDescent, Momentum, RmsProp,
    Update, Vals, MAX_VARS,
};
use crate::cpu::types::FloatType;
use crate::dispatch_float;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::resource::Var;
use crate::KernelFactory;

/// The optimizer families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `ApplyGradientDescent`.
    GradientDescent,
    /// `ApplyMomentum`.
    Momentum,
    /// `ApplyAdagrad`.
    Adagrad,
    /// `ApplyAdam`.
    Adam,
    /// `ApplyRMSProp`.
    RmsProp,
    /// `ApplyCenteredRMSProp`.
    CenteredRmsProp,
    /// `ApplyAdadelta`.
    Adadelta,
    /// `ApplyProximalGradientDescent`.
    ProximalGradientDescent,
    /// `ApplyProximalAdagrad`.
    ProximalAdagrad,
    /// `ApplyFtrl`.
    Ftrl,
    /// `ApplyFtrlV2` (with `l2_shrinkage`).
    FtrlV2,
}

impl Family {
    /// The variables the op updates, by input name.
    fn vars(self) -> &'static [&'static str] {
        match self {
            Family::GradientDescent | Family::ProximalGradientDescent => &["var"],
            Family::Momentum | Family::Adagrad | Family::ProximalAdagrad => &["var", "accum"],
            Family::Adam => &["var", "m", "v"],
            Family::RmsProp => &["var", "ms", "mom"],
            Family::CenteredRmsProp => &["var", "mg", "ms", "mom"],
            Family::Adadelta => &["var", "accum", "accum_update"],
            Family::Ftrl | Family::FtrlV2 => &["var", "accum", "linear"],
        }
    }

    /// The other inputs, by name, in order.
    fn rest(self) -> &'static [&'static str] {
        match self {
            Family::GradientDescent => &["alpha", "delta"],
            Family::Momentum => &["lr", "grad", "momentum"],
            Family::Adagrad => &["lr", "grad"],
            Family::Adam => &[
                "beta1_power",
                "beta2_power",
                "lr",
                "beta1",
                "beta2",
                "epsilon",
                "grad",
            ],
            Family::RmsProp | Family::CenteredRmsProp => {
                &["lr", "rho", "momentum", "epsilon", "grad"]
            }
            Family::Adadelta => &["lr", "rho", "epsilon", "grad"],
            Family::ProximalGradientDescent => &["alpha", "l1", "l2", "delta"],
            Family::ProximalAdagrad => &["lr", "l1", "l2", "grad"],
            Family::Ftrl => &["grad", "lr", "l1", "l2", "lr_power"],
            Family::FtrlV2 => &["grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power"],
        }
    }

    /// What TensorFlow's kernel requires of the scalar `name`'s value.
    fn rule(self, name: &str) -> ScalarRule {
        match (self, name) {
            (Family::ProximalAdagrad, "lr") => ScalarRule::Positive,
            (Family::ProximalAdagrad, "l1" | "l2") => ScalarRule::NonNegative,
            _ => ScalarRule::Any,
        }
    }

    /// The position of the gradient among [`Family::rest`].
    fn grad_index(self) -> usize {
        match self {
            Family::GradientDescent => 1,
            Family::Momentum | Family::Adagrad => 1,
            Family::Adam => 6,
            Family::RmsProp | Family::CenteredRmsProp => 4,
            Family::Adadelta | Family::ProximalGradientDescent | Family::ProximalAdagrad => 3,
            Family::Ftrl | Family::FtrlV2 => 0,
        }
    }
}

/// What an optimizer kernel requires of a scalar input's value (TensorFlow's
/// checks: FTRL's and proximal Adagrad's learning rates and regularisation
/// strengths).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarRule {
    /// Any value.
    Any,
    /// `> 0`.
    Positive,
    /// `>= 0`.
    NonNegative,
    /// `<= 0`.
    NonPositive,
}

impl ScalarRule {
    /// `InvalidArgument` in TensorFlow's words when `v`, the value of input
    /// `name`, breaks the rule.
    pub(crate) fn check<T: FloatType>(self, name: &str, v: T) -> Result<()> {
        let (ok, what) = match self {
            ScalarRule::Any => (true, ""),
            ScalarRule::Positive => (v > T::zero(), "positive"),
            ScalarRule::NonNegative => (v >= T::zero(), "non-negative"),
            ScalarRule::NonPositive => (v <= T::zero(), "non-positive"),
        };
        if ok {
            return Ok(());
        }
        let desc = match name {
            "l1" => "l1 regularization strength",
            "l2" => "l2 regularization strength",
            "l2_shrinkage" => "l2 shrinkage regularization strength",
            other => other,
        };
        Err(Status::invalid_argument(format!(
            "{desc} is not a {what} scalar: {}",
            v.to_f64()
        )))
    }
}

/// Builds the kernel of `family` for the node in `c` (its `T`, resource or ref
/// form, `use_locking`, `use_nesterov`, `update_slots`, `multiply_linear_by_lr`).
pub fn make(c: &OpKernelConstruction<'_>, family: Family) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    let use_locking: bool = c.attr("use_locking")?;
    let nesterov = if c.node.attr.contains_key("use_nesterov") {
        c.attr::<bool>("use_nesterov")?
    } else {
        false
    };
    let update_slots = if c.node.attr.contains_key("update_slots") {
        c.attr::<bool>("update_slots")?
    } else {
        true
    };
    let linear_by_lr = if c.node.attr.contains_key("multiply_linear_by_lr") {
        c.attr::<bool>("multiply_linear_by_lr")?
    } else {
        false
    };
    let resource = c.op_def.name.starts_with("Resource");
    dispatch_float!(t, T => {
        let update: Box<dyn Update<T>> = match family {
            Family::GradientDescent => Box::new(GradientDescent),
            Family::Momentum => Box::new(Momentum { nesterov }),
            Family::Adagrad => Box::new(Adagrad { update_slots }),
            Family::Adam => Box::new(Adam { nesterov }),
            Family::RmsProp => Box::new(RmsProp),
            Family::CenteredRmsProp => Box::new(CenteredRmsProp),
            Family::Adadelta => Box::new(Adadelta),
            Family::ProximalGradientDescent => Box::new(ProximalGradientDescent),
            Family::ProximalAdagrad => Box::new(ProximalAdagrad),
            Family::Ftrl => Box::new(Ftrl { v2: false, linear_by_lr }),
            Family::FtrlV2 => Box::new(Ftrl { v2: true, linear_by_lr }),
        };
        Ok(Box::new(ApplyKernel::<T> {
            family,
            update,
            resource,
            use_locking,
            _t: PhantomData,
        }) as Box<dyn OpKernel>)
    })
}

/// The kernel factory of `family` (a plain function, as the registry keeps).
pub fn factory(family: Family) -> KernelFactory {
    match family {
        Family::GradientDescent => |c| make(c, Family::GradientDescent),
        Family::Adagrad => |c| make(c, Family::Adagrad),
        Family::Momentum => |c| make(c, Family::Momentum),
        Family::Adam => |c| make(c, Family::Adam),
        Family::RmsProp => |c| make(c, Family::RmsProp),
        Family::CenteredRmsProp => |c| make(c, Family::CenteredRmsProp),
        Family::Adadelta => |c| make(c, Family::Adadelta),
        Family::ProximalGradientDescent => |c| make(c, Family::ProximalGradientDescent),
        Family::ProximalAdagrad => |c| make(c, Family::ProximalAdagrad),
        Family::Ftrl => |c| make(c, Family::Ftrl),
        Family::FtrlV2 => |c| make(c, Family::FtrlV2),
    }
}

/// An optimizer update of dtype `T`; see the module docs.
pub struct ApplyKernel<T: FloatType> {
    family: Family,
    update: Box<dyn Update<T>>,
    resource: bool,
    use_locking: bool,
    _t: PhantomData<fn(T)>,
}

/// The variables an update writes (at most [`MAX_VARS`]: the variable and its
/// slots).
pub(crate) type Vars = SmallVec<[Arc<Var>; MAX_VARS]>;

/// The variable behind the resource handle of input `i`.
pub(crate) fn lookup_var(ctx: &OpKernelContext<'_>, i: usize, dtype: DType) -> Result<Arc<Var>> {
    let h: ResourceHandle = ctx
        .input(i)?
        .as_resource_handles()?
        .first()
        .cloned()
        .ok_or_else(|| Status::invalid_argument(format!("input {i} is an empty handle")))?;
    let var = ctx
        .step()
        .device
        .resources
        .lookup::<Var>(&h.container, &h.name)
        .map_err(|_| {
            Status::failed_precondition(format!(
                "Attempting to use uninitialized resource variable {} (container {})",
                h.name, h.container
            ))
        })?;
    if var.dtype() != dtype {
        return Err(Status::invalid_argument(format!(
            "Trying to update resource variable {} of dtype {} with a {dtype} update",
            h.name,
            var.dtype()
        )));
    }
    Ok(var)
}

/// The variables of an optimizer op, named `names` in input order: resource
/// handles of `dtype` or reference inputs; `InvalidArgument` when two are the same
/// variable.
pub(crate) fn distinct_variables(
    ctx: &OpKernelContext<'_>,
    names: &[&str],
    resource: bool,
    dtype: DType,
) -> Result<Vars> {
    let mut vars = Vars::new();
    for (i, name) in names.iter().enumerate() {
        let v = if resource {
            lookup_var(ctx, i, dtype)?
        } else {
            Arc::clone(ctx.input_ref(i)?)
        };
        if let Some(j) = vars.iter().position(|w| Arc::ptr_eq(w, &v)) {
            return Err(Status::invalid_argument(format!(
                "{} and {name} are the same variable {}; an optimizer needs distinct variables",
                names[j],
                v.name()
            )));
        }
        vars.push(v);
    }
    Ok(vars)
}

fn uninitialized(var: &Var) -> Status {
    Status::failed_precondition(format!(
        "Attempting to use uninitialized value {}",
        var.name()
    ))
}

impl<T: FloatType> ApplyKernel<T> {
    /// The variables, in input order, checked distinct.
    fn variables(&self, ctx: &OpKernelContext<'_>) -> Result<Vars> {
        distinct_variables(ctx, self.family.vars(), self.resource, T::DTYPE)
    }

    /// The scalar inputs (the gradient's place holding zero), and the gradient.
    fn inputs(&self, ctx: &OpKernelContext<'_>) -> Result<(SmallVec<[T; 8]>, Tensor)> {
        let base = self.family.vars().len();
        let gi = self.family.grad_index();
        let mut rest = SmallVec::new();
        for (j, name) in self.family.rest().iter().enumerate() {
            if j == gi {
                rest.push(T::zero());
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
            self.family.rule(name).check(name, v)?;
            rest.push(v);
        }
        Ok((rest, ctx.input(base + gi)?.clone()))
    }

    fn shape_error(&self, k: usize, a: &Tensor, b: &Tensor) -> Status {
        let what = if k == usize::MAX {
            self.family.rest()[self.family.grad_index()]
        } else {
            self.family.vars()[k]
        };
        Status::invalid_argument(format!(
            "var and {what} do not have the same shape{} {}",
            a.shape(),
            b.shape()
        ))
    }

    /// Every stage with every variable locked (`use_locking`).
    fn run_locked(&self, vars: &[Arc<Var>], rest: &[T], grad: &Tensor) -> Result<()> {
        with_locked(vars, |ts| {
            for k in 1..ts.len() {
                if ts[k].shape() != ts[0].shape() {
                    return Err(self.shape_error(k, ts[0], ts[k]));
                }
            }
            if grad.shape() != ts[0].shape() {
                return Err(self.shape_error(usize::MAX, ts[0], grad));
            }
            let g = grad.as_slice::<T>()?;
            for &k in self.update.order() {
                let (before, after) = ts.split_at_mut(k);
                let Some((dst, after)) = after.split_first_mut() else {
                    return Err(Status::internal("stage of a missing variable"));
                };
                let mut vals: Vals<'_, T> = [&[]; MAX_VARS];
                for (j, t) in before.iter().enumerate() {
                    vals[j] = t.as_slice::<T>()?;
                }
                for (j, t) in after.iter().enumerate() {
                    vals[k + 1 + j] = t.as_slice::<T>()?;
                }
                let d = dst.as_mut_slice::<T>()?;
                run_stage(&*self.update, k, d, &vals, rest, g);
            }
            Ok(())
        })
    }

    /// Each stage under its own variable's lock (no `use_locking`).
    fn run_unlocked(&self, vars: &[Arc<Var>], rest: &[T], grad: &Tensor) -> Result<()> {
        // Validate everything before the first write.
        let shape0 = vars[0].shape().ok_or_else(|| uninitialized(&vars[0]))?;
        for (k, v) in vars.iter().enumerate().skip(1) {
            let s = v.shape().ok_or_else(|| uninitialized(v))?;
            if s != shape0 {
                return Err(Status::invalid_argument(format!(
                    "var and {} do not have the same shape{shape0} {s}",
                    self.family.vars()[k]
                )));
            }
        }
        if grad.shape() != &shape0 {
            return Err(Status::invalid_argument(format!(
                "var and {} do not have the same shape{shape0} {}",
                self.family.rest()[self.family.grad_index()],
                grad.shape()
            )));
        }
        let g = grad.as_slice::<T>()?;
        let mut snapshots: [Option<Tensor>; MAX_VARS] = Default::default();
        // The values stages read before their variable's own stage.
        for &k in self.update.reads_old() {
            snapshots[k] = Some(vars[k].read()?);
        }
        for &k in self.update.order() {
            let mut written = None;
            {
                let mut vals: Vals<'_, T> = [&[]; MAX_VARS];
                for (j, s) in snapshots.iter().enumerate() {
                    if let Some(s) = s {
                        vals[j] = s.as_slice::<T>()?;
                    }
                }
                vars[k].update(|t| {
                    // Another kernel may have replaced the value since the checks.
                    if t.shape() != grad.shape() {
                        return Err(self.shape_error(usize::MAX, t, grad));
                    }
                    run_stage(&*self.update, k, t.as_mut_slice::<T>()?, &vals, rest, g);
                    // Later stages read this variable's new value (the variable
                    // itself, stage 0, runs last wherever a later stage would read
                    // it).
                    if k != 0 {
                        written = Some(t.clone());
                    }
                    Ok(())
                })?;
            }
            snapshots[k] = written;
        }
        Ok(())
    }
}

impl<T: FloatType> OpKernel for ApplyKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let vars = self.variables(ctx)?;
        let (rest, grad) = self.inputs(ctx)?;
        if self.use_locking {
            self.run_locked(&vars, &rest, &grad)?;
        } else {
            self.run_unlocked(&vars, &rest, &grad)?;
        }
        if !self.resource {
            ctx.set_output_ref(0, Arc::clone(&vars[0]))?;
        }
        Ok(())
    }
}

/// Runs `f` on the values of `vars` (in their order) with all their locks held,
/// taken in address order. Up to [`MAX_VARS`] variables; an uninitialised one is
/// `FailedPrecondition`.
pub fn with_locked(
    vars: &[Arc<Var>],
    f: impl FnOnce(&mut [&mut Tensor]) -> Result<()>,
) -> Result<()> {
    let mut order: SmallVec<[usize; MAX_VARS]> = (0..vars.len()).collect();
    order.sort_by_key(|&i| Arc::as_ptr(&vars[i]) as usize);
    // Puts the locked values back in `vars`' order and runs `f`.
    fn in_order(
        held: [Option<(usize, &mut Tensor)>; MAX_VARS],
        f: impl FnOnce(&mut [&mut Tensor]) -> Result<()>,
    ) -> Result<()> {
        let mut slots: [Option<&mut Tensor>; MAX_VARS] = Default::default();
        for (i, t) in held.into_iter().flatten() {
            slots[i] = Some(t);
        }
        let mut ts: SmallVec<[&mut Tensor; MAX_VARS]> = slots.into_iter().flatten().collect();
        f(&mut ts)
    }
    match *order.as_slice() {
        [a] => vars[a].update(|ta| f(&mut [ta])),
        [a, b] => vars[a].update(|ta| {
            vars[b].update(|tb| in_order([Some((a, ta)), Some((b, tb)), None, None], f))
        }),
        [a, b, c] => vars[a].update(|ta| {
            vars[b].update(|tb| {
                vars[c]
                    .update(|tc| in_order([Some((a, ta)), Some((b, tb)), Some((c, tc)), None], f))
            })
        }),
        [a, b, c, d] => vars[a].update(|ta| {
            vars[b].update(|tb| {
                vars[c].update(|tc| {
                    vars[d].update(|td| {
                        in_order(
                            [Some((a, ta)), Some((b, tb)), Some((c, tc)), Some((d, td))],
                            f,
                        )
                    })
                })
            })
        }),
        _ => Err(Status::internal(format!(
            "with_locked takes 1 to {MAX_VARS} variables, got {}",
            vars.len()
        ))),
    }
}
