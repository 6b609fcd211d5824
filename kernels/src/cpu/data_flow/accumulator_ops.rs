//! Conditional accumulator kernels (TensorFlow's `conditional_accumulator_op.cc`
//! and `conditional_accumulator_base_op.h`), for both handle kinds:
//!
//! - `ConditionalAccumulator` / `ResourceConditionalAccumulator` find or create a
//!   [`ConditionalAccumulator`] in the device's resource manager under (container,
//!   shared name) and output its handle: a `Ref(string)` to the pair
//!   `[container, name]`, as TensorFlow's, or a `resource` handle.
//! - `*AccumulatorApplyGradient`, `*AccumulatorNumAccumulated` and
//!   `*AccumulatorSetGlobalStep` are synchronous: applying never waits.
//! - `*AccumulatorTakeGradient` is asynchronous: it completes at once when enough
//!   gradients are in, and otherwise waits in the accumulator, registered with the
//!   step's cancellation, so an aborted or timed-out step gives up the wait and
//!   the device thread was never blocked.
//!
//! Errors are TensorFlow's: a scalar argument of another shape, a
//! `num_required < 1`, a gradient of the wrong dtype or shape are
//! `InvalidArgument` (the executor adds the node's name).

use std::sync::Arc;

use graph::ops::ReductionType;
use graph::{DType, ResourceHandle, Result, Shape, Status, Tensor};

use crate::accumulator::{AccumulatorSpec, ConditionalAccumulator, Responder};
use crate::cpu::types::FLOAT_DTYPES;
use crate::entry::Entry;
use crate::op_kernel::{
    AsyncOpKernel, AsyncStatus, OpKernel, OpKernelConstruction, OpKernelContext, Outputs,
};
use crate::registry::{KernelDef, KernelRegistry};
use crate::resource::Var;

struct CreateAccumulator {
    spec: AccumulatorSpec,
    container: String,
    resource: bool,
}

impl OpKernel for CreateAccumulator {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let step = ctx.step();
        let container = step.container(&self.container).to_owned();
        let name = &self.spec.name;
        let acc = step
            .device
            .resources
            .lookup_or_create(&container, name, || {
                ConditionalAccumulator::new(self.spec.clone())
            })?;
        // TensorFlow does not compare a shared accumulator's definition; a dtype or
        // reduction that differs would change every result silently, so those are
        // errors here (the first creator's shape stands, as in TensorFlow).
        let theirs = acc.spec();
        if theirs.dtype != self.spec.dtype || theirs.reduction != self.spec.reduction {
            return Err(Status::invalid_argument(format!(
                "Shared conditional accumulator '{name}' exists for {} gradients reduced by {}, \
                 requested {} reduced by {}",
                theirs.dtype,
                theirs.reduction.as_str(),
                self.spec.dtype,
                self.spec.reduction.as_str()
            )));
        }
        if self.resource {
            let h = ResourceHandle {
                device: step.device.name.clone(),
                container,
                name: name.clone(),
                type_name: "ConditionalAccumulator".into(),
            };
            return ctx.set_output(0, Tensor::resource_scalar(h));
        }
        let pair = Tensor::from_strings(&[2], vec![container, name.clone()])?;
        let handle = Var::new(name, DType::String);
        handle.assign(pair, false)?;
        ctx.set_output_ref(0, Arc::new(handle))
    }
}

fn make_accumulator(c: &OpKernelConstruction<'_>, resource: bool) -> Result<Box<dyn OpKernel>> {
    let reduction = match c.attr::<String>("reduction_type")?.as_str() {
        "MEAN" => ReductionType::Mean,
        "SUM" => ReductionType::Sum,
        other => {
            return Err(Status::invalid_argument(format!(
                "reduction_type must be 'MEAN' or 'SUM', got '{other}'"
            )))
        }
    };
    let shared: String = c.attr("shared_name")?;
    let name = if shared.is_empty() {
        c.name().to_owned()
    } else {
        shared
    };
    let shape: Shape = c.attr("shape")?;
    shape.check_valid()?;
    Ok(Box::new(CreateAccumulator {
        spec: AccumulatorSpec {
            name,
            dtype: c.attr("dtype")?,
            shape,
            reduction,
        },
        container: c.attr("container")?,
        resource,
    }))
}

/// The accumulator behind input 0: a `Ref(string)` pair, a string pair, or a
/// resource handle.
fn accumulator_of(ctx: &OpKernelContext<'_>) -> Result<Arc<ConditionalAccumulator>> {
    let handle = match ctx.input_ref(0) {
        Ok(var) => var.read()?,
        Err(_) => ctx.input(0)?.clone(),
    };
    let (container, name) = match handle.dtype() {
        DType::Resource => {
            let h = handle
                .as_resource_handles()?
                .first()
                .ok_or_else(|| Status::invalid_argument("empty accumulator handle"))?;
            (h.container.clone(), h.name.clone())
        }
        DType::String => match handle.as_strings()? {
            [c, n] => (
                String::from_utf8_lossy(c).into_owned(),
                String::from_utf8_lossy(n).into_owned(),
            ),
            other => {
                return Err(Status::invalid_argument(format!(
                    "Handle must have 2 elements, but had shape {} ({} elements)",
                    handle.shape(),
                    other.len()
                )))
            }
        },
        other => {
            return Err(Status::invalid_argument(format!(
                "an accumulator handle is a string pair or a resource, got {other}"
            )))
        }
    };
    ctx.step()
        .device
        .resources
        .lookup::<ConditionalAccumulator>(&container, &name)
}

/// The accumulator, checked to hold `dtype` gradients (TensorFlow's signature
/// check).
fn typed_accumulator(
    ctx: &OpKernelContext<'_>,
    dtype: DType,
) -> Result<Arc<ConditionalAccumulator>> {
    let acc = accumulator_of(ctx)?;
    if acc.spec().dtype != dtype {
        return Err(Status::invalid_argument(format!(
            "conditional accumulator '{}' holds {} gradients; this op is for {dtype}",
            acc.spec().name,
            acc.spec().dtype
        )));
    }
    Ok(acc)
}

/// Input `i`, which must be a scalar (`InvalidArgument` naming `what`).
fn scalar_input<T: graph::TensorType>(
    ctx: &OpKernelContext<'_>,
    i: usize,
    what: &str,
) -> Result<T> {
    let t = ctx.input(i)?;
    if t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "Argument {what} must be scalar, but had bad shape {}",
            t.shape()
        )));
    }
    t.scalar_value::<T>()
}

struct ApplyGradientKernel {
    dtype: DType,
}

impl OpKernel for ApplyGradientKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let acc = typed_accumulator(ctx, self.dtype)?;
        let local_step = scalar_input::<i64>(ctx, 1, "local_step")?;
        let gradient = ctx.take_input(2)?;
        let outcome = acc.apply(local_step, gradient)?;
        tracing::trace!(accumulator = %acc.spec().name, local_step, ?outcome, "gradient applied");
        Ok(())
    }
}

struct TakeGradientKernel {
    dtype: DType,
}

impl OpKernel for TakeGradientKernel {
    fn compute(&self, _ctx: &mut OpKernelContext<'_>) -> Result<()> {
        Err(Status::internal("AccumulatorTakeGradient is asynchronous"))
    }
    fn as_async(&self) -> Option<&dyn AsyncOpKernel> {
        Some(self)
    }
}

fn one_output(t: Tensor) -> Outputs {
    let mut o = Outputs::new();
    o.push(Entry::Value(t));
    o
}

impl AsyncOpKernel for TakeGradientKernel {
    fn compute_async(&self, ctx: &mut OpKernelContext<'_>) -> Result<AsyncStatus> {
        let acc = typed_accumulator(ctx, self.dtype)?;
        let num_required = scalar_input::<i32>(ctx, 1, "num_required")?;
        let id = acc.next_id();
        let cancellation = Arc::clone(&ctx.step().cancellation);
        let on_cancel = Arc::clone(&acc);
        let token = cancellation
            .register(move || {
                on_cancel.cancel(
                    id,
                    Status::cancelled("TakeGrad operation was cancelled: the step was aborted"),
                )
            })
            .ok_or_else(|| Status::cancelled("TakeGrad operation was cancelled"))?;
        let ready = {
            let cm = Arc::clone(&cancellation);
            let done = &mut *ctx;
            acc.take(id, num_required, move || -> Responder {
                let done = done.defer();
                Box::new(move |r: Result<Tensor>| {
                    cm.deregister(token);
                    if let Ok(done) = done {
                        done.done(r.map(one_output));
                    }
                })
            })
        };
        match ready {
            Some(r) => {
                cancellation.deregister(token);
                ctx.set_output(0, r?)?;
                Ok(AsyncStatus::Ready)
            }
            None => {
                // A cancellation that ran between the registration and the take
                // found nothing to cancel: give the take up now (a no-op when
                // the callback did cancel it, or it completed meanwhile).
                if cancellation.is_cancelled() {
                    acc.cancel(id, Status::cancelled("TakeGrad operation was cancelled"));
                }
                Ok(AsyncStatus::Pending)
            }
        }
    }
}

struct NumAccumulatedKernel;

impl OpKernel for NumAccumulatedKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = accumulator_of(ctx)?.num_accumulated();
        ctx.set_output(0, Tensor::scalar(i32::try_from(n).unwrap_or(i32::MAX)))
    }
}

struct SetGlobalStepKernel;

impl OpKernel for SetGlobalStepKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let acc = accumulator_of(ctx)?;
        acc.set_global_step(scalar_input::<i64>(ctx, 1, "new_global_step")?);
        Ok(())
    }
}

/// Registers the accumulator kernels (float dtypes).
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("ConditionalAccumulator", |c| make_accumulator(c, false))
            .type_constraint("dtype", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ResourceConditionalAccumulator", |c| {
            make_accumulator(c, true)
        })
        .type_constraint("dtype", FLOAT_DTYPES),
    );
    for (apply, take, count, set_step) in [
        (
            "AccumulatorApplyGradient",
            "AccumulatorTakeGradient",
            "AccumulatorNumAccumulated",
            "AccumulatorSetGlobalStep",
        ),
        (
            "ResourceAccumulatorApplyGradient",
            "ResourceAccumulatorTakeGradient",
            "ResourceAccumulatorNumAccumulated",
            "ResourceAccumulatorSetGlobalStep",
        ),
    ] {
        r.register(
            KernelDef::cpu(apply, |c| {
                Ok(Box::new(ApplyGradientKernel {
                    dtype: c.attr("dtype")?,
                }))
            })
            .type_constraint("dtype", FLOAT_DTYPES),
        );
        r.register(
            KernelDef::cpu(take, |c| {
                Ok(Box::new(TakeGradientKernel {
                    dtype: c.attr("dtype")?,
                }))
            })
            .type_constraint("dtype", FLOAT_DTYPES),
        );
        r.register(KernelDef::cpu(count, |_| {
            Ok(Box::new(NumAccumulatedKernel))
        }));
        r.register(KernelDef::cpu(set_step, |_| {
            Ok(Box::new(SetGlobalStepKernel))
        }));
    }
}
