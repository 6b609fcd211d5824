//! The generic optimizer kernel: one [`ApplyKernel`] per (family, dtype, form),
//! running an [`Update`]'s stages on the variables under the locking discipline
//! described in the parent module.

use std::marker::PhantomData;
use std::sync::Arc;

use graph::{DType, ResourceHandle, Result, Status, Tensor};
use smallvec::SmallVec;

use crate::cpu::training::update::{Adagrad, Adam, GradientDescent, Momentum, RmsProp, Update};
use crate::cpu::types::FloatType;
use crate::dispatch_float;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::resource::Var;

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
}

impl Family {
    /// The variables the op updates, by input name.
    fn vars(self) -> &'static [&'static str] {
        match self {
            Family::GradientDescent => &["var"],
            Family::Momentum | Family::Adagrad => &["var", "accum"],
            Family::Adam => &["var", "m", "v"],
            Family::RmsProp => &["var", "ms", "mom"],
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
            Family::RmsProp => &["lr", "rho", "momentum", "epsilon", "grad"],
        }
    }

    /// The position of the gradient among [`Family::rest`].
    fn grad_index(self) -> usize {
        match self {
            Family::GradientDescent => 1,
            Family::Momentum | Family::Adagrad => 1,
            Family::Adam => 6,
            Family::RmsProp => 4,
        }
    }
}

/// Builds the kernel of `family` for the node in `c` (its `T`, resource or ref
/// form, `use_locking`, `use_nesterov`).
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
    let resource = c.op_def.name.starts_with("Resource");
    dispatch_float!(t, T => {
        let update: Box<dyn Update<T>> = match family {
            Family::GradientDescent => Box::new(GradientDescent),
            Family::Momentum => Box::new(Momentum { nesterov }),
            Family::Adagrad => Box::new(Adagrad { update_slots }),
            Family::Adam => Box::new(Adam { nesterov }),
            Family::RmsProp => Box::new(RmsProp),
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

/// An optimizer update of dtype `T`; see the module docs.
pub struct ApplyKernel<T: FloatType> {
    family: Family,
    update: Box<dyn Update<T>>,
    resource: bool,
    use_locking: bool,
    _t: PhantomData<fn(T)>,
}

/// The variables an update writes (at most three: the variable and two slots).
pub(crate) type Vars = SmallVec<[Arc<Var>; 3]>;

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
            rest.push(t.scalar_value::<T>()?);
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
                let mut vals: [&[T]; 3] = [&[], &[], &[]];
                for (j, t) in before.iter().enumerate() {
                    vals[j] = t.as_slice::<T>()?;
                }
                for (j, t) in after.iter().enumerate() {
                    vals[k + 1 + j] = t.as_slice::<T>()?;
                }
                let d = dst.as_mut_slice::<T>()?;
                self.update.stage(k, d, &vals, rest, g);
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
        let mut snapshots: [Option<Tensor>; 3] = [None, None, None];
        for &k in self.update.order() {
            let mut written = None;
            {
                let mut vals: [&[T]; 3] = [&[], &[], &[]];
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
                    self.update.stage(k, t.as_mut_slice::<T>()?, &vals, rest, g);
                    // Later stages read this variable's new value (the variable
                    // itself, stage 0, is read by none).
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
/// taken in address order. Up to three variables; an uninitialised one is
/// `FailedPrecondition`.
pub fn with_locked(
    vars: &[Arc<Var>],
    f: impl FnOnce(&mut [&mut Tensor]) -> Result<()>,
) -> Result<()> {
    let mut order: SmallVec<[usize; 3]> = (0..vars.len()).collect();
    order.sort_by_key(|&i| Arc::as_ptr(&vars[i]) as usize);
    match *order.as_slice() {
        [a] => vars[a].update(|ta| f(&mut [ta])),
        [a, b] => vars[a].update(|ta| {
            vars[b].update(|tb| {
                let mut slots: [Option<&mut Tensor>; 2] = [None, None];
                slots[a] = Some(ta);
                slots[b] = Some(tb);
                let mut ts: SmallVec<[&mut Tensor; 3]> = slots.into_iter().flatten().collect();
                f(&mut ts)
            })
        }),
        [a, b, c] => vars[a].update(|ta| {
            vars[b].update(|tb| {
                vars[c].update(|tc| {
                    let mut slots: [Option<&mut Tensor>; 3] = [None, None, None];
                    slots[a] = Some(ta);
                    slots[b] = Some(tb);
                    slots[c] = Some(tc);
                    let mut ts: SmallVec<[&mut Tensor; 3]> = slots.into_iter().flatten().collect();
                    f(&mut ts)
                })
            })
        }),
        _ => Err(Status::internal(format!(
            "with_locked takes 1 to 3 variables, got {}",
            vars.len()
        ))),
    }
}
