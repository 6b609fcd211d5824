//! Variable kernels: reference variables (`VariableV2`, `Assign*`,
//! `IsVariableInitialized`) and resource variables (`VarHandleOp`, `*VariableOp`).
//! Both kinds are [`Var`]s in the device's resource manager, keyed by container
//! (the session's default when empty) and shared name (the node name when empty).

use std::marker::PhantomData;
use std::sync::Arc;

use graph::{DType, ResourceHandle, Result, Status, Tensor};

use crate::cpu::math::elem::Arith;
use crate::cpu::types::NUMERIC_DTYPES;
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use crate::resource::Var;

struct VariableKernel {
    container: String,
    shared_name: String,
    dtype: DType,
}

impl OpKernel for VariableKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let step = ctx.step();
        let container = step.container(&self.container).to_owned();
        let var = step
            .device
            .resources
            .lookup_or_create(&container, &self.shared_name, || {
                Ok(Var::new(&self.shared_name, self.dtype))
            })?;
        if var.dtype() != self.dtype {
            return Err(Status::invalid_argument(format!(
                "variable {} exists with dtype {}, requested {}",
                self.shared_name,
                var.dtype(),
                self.dtype
            )));
        }
        ctx.set_output_ref(0, var)
    }
}

fn make_variable(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let shared: String = c.attr("shared_name")?;
    Ok(Box::new(VariableKernel {
        container: c.attr("container")?,
        shared_name: if shared.is_empty() {
            c.name().to_owned()
        } else {
            shared
        },
        dtype: c.attr("dtype")?,
    }))
}

struct AssignKernel {
    validate_shape: bool,
}

impl OpKernel for AssignKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let value = ctx.take_input(1)?;
        let var = Arc::clone(ctx.input_ref(0)?);
        var.assign(value, self.validate_shape)?;
        ctx.set_output_ref(0, var)
    }
}

fn check_same_shape(var: &Var, cur: &Tensor, value: &Tensor) -> Result<()> {
    if cur.shape() != value.shape() {
        return Err(Status::invalid_argument(format!(
            "Cannot update variable {} with shape {} using a Tensor with shape {}, shapes must be equal.",
            var.name(),
            cur.shape(),
            value.shape()
        )));
    }
    Ok(())
}

/// Adds (`SUB = false`) or subtracts `value` into `var` in place (integers wrap,
/// as TensorFlow's do).
fn update_var<T: Arith>(var: &Var, value: &Tensor, sub: bool) -> Result<()> {
    var.update(|cur| {
        check_same_shape(var, cur, value)?;
        let v = value.as_slice::<T>()?;
        let dst = cur.as_mut_slice::<T>()?;
        if sub {
            dst.iter_mut().zip(v).for_each(|(d, &x)| *d = d.tf_sub(x));
        } else {
            dst.iter_mut().zip(v).for_each(|(d, &x)| *d = d.tf_add(x));
        }
        Ok(())
    })
}

struct AssignUpdateKernel<T> {
    sub: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: Arith> OpKernel for AssignUpdateKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let var = Arc::clone(ctx.input_ref(0)?);
        update_var::<T>(&var, ctx.input(1)?, self.sub)?;
        ctx.set_output_ref(0, var)
    }
}

fn make_assign_update(c: &OpKernelConstruction<'_>, sub: bool) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(AssignUpdateKernel::<T> { sub, _t: PhantomData }) as Box<dyn OpKernel>))
}

struct IsInitializedKernel;

impl OpKernel for IsInitializedKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let init = ctx.input_ref(0)?.is_initialized();
        ctx.set_output(0, Tensor::scalar(init))
    }
}

struct VarHandleKernel {
    container: String,
    shared_name: String,
}

impl OpKernel for VarHandleKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let step = ctx.step();
        let h = ResourceHandle {
            device: step.device.name.clone(),
            container: step.container(&self.container).to_owned(),
            name: self.shared_name.clone(),
            type_name: "Var".into(),
        };
        ctx.set_output(0, Tensor::resource_scalar(h))
    }
}

fn make_var_handle(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let shared: String = c.attr("shared_name")?;
    Ok(Box::new(VarHandleKernel {
        container: c.attr("container")?,
        shared_name: if shared.is_empty() {
            c.name().to_owned()
        } else {
            shared
        },
    }))
}

/// The resource handle of input 0.
pub(crate) fn handle(ctx: &OpKernelContext<'_>) -> Result<ResourceHandle> {
    let t = ctx.input(0)?;
    t.as_resource_handles()?
        .first()
        .cloned()
        .ok_or_else(|| Status::invalid_argument("empty resource handle tensor"))
}

/// The variable behind input 0's handle; a missing one is `FailedPrecondition`, as
/// reading an uninitialised variable is.
pub(crate) fn lookup_var(ctx: &OpKernelContext<'_>, dtype: DType) -> Result<Arc<Var>> {
    let h = handle(ctx)?;
    let var = ctx
        .step()
        .device
        .resources
        .lookup::<Var>(&h.container, &h.name)
        .map_err(|e| {
            Status::failed_precondition(format!(
                "Error while reading resource variable {} from Container: {}. This could mean that the variable was uninitialized. {e}",
                h.name, h.container
            ))
        })?;
    if var.dtype() != dtype {
        return Err(Status::invalid_argument(format!(
            "Trying to access resource variable {} of dtype {} as {dtype}",
            h.name,
            var.dtype()
        )));
    }
    Ok(var)
}

struct ReadVariableKernel {
    dtype: DType,
}

impl OpKernel for ReadVariableKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let v = lookup_var(ctx, self.dtype)?.read()?;
        ctx.set_output(0, v)
    }
}

struct AssignVariableKernel {
    dtype: DType,
    validate_shape: bool,
}

impl OpKernel for AssignVariableKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = handle(ctx)?;
        let value = ctx.take_input(1)?;
        let var = ctx
            .step()
            .device
            .resources
            .lookup_or_create(&h.container, &h.name, || Ok(Var::new(&h.name, self.dtype)))?;
        var.assign(value, self.validate_shape)
    }
}

struct AssignUpdateVariableKernel<T> {
    sub: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: Arith> OpKernel for AssignUpdateVariableKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let var = lookup_var(ctx, T::DTYPE)?;
        update_var::<T>(&var, ctx.input(1)?, self.sub)
    }
}

fn make_update_variable(c: &OpKernelConstruction<'_>, sub: bool) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("dtype")?;
    dispatch_numeric!(t, T => Ok(Box::new(AssignUpdateVariableKernel::<T> { sub, _t: PhantomData }) as Box<dyn OpKernel>))
}

struct VarIsInitializedKernel;

impl OpKernel for VarIsInitializedKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = handle(ctx)?;
        let init = ctx
            .step()
            .device
            .resources
            .lookup::<Var>(&h.container, &h.name)
            .map(|v| v.is_initialized())
            .unwrap_or(false);
        ctx.set_output(0, Tensor::scalar(init))
    }
}

/// `DisableCopyOnRead`: TensorFlow switches a variable out of its copy-on-read
/// mode (TensorFlow 2's save functions call it before reading each variable).
/// actorflow's reads share the variable's immutable buffer and an update
/// replaces it, so there is no mode to switch; what remains is TensorFlow's
/// check that the variable exists.
struct DisableCopyOnReadKernel;

impl OpKernel for DisableCopyOnReadKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = handle(ctx)?;
        match ctx
            .step()
            .device
            .resources
            .lookup::<Var>(&h.container, &h.name)
        {
            Ok(_) => Ok(()),
            Err(e) => Err(Status::failed_precondition(format!(
                "Could not find variable {}. This could mean that the variable has been deleted. \
                 In TF1, it can also mean the variable is uninitialized. Debug info: container={}, \
                 status error message={}",
                h.name,
                h.container,
                e.message()
            ))),
        }
    }
}

struct DestroyResourceKernel {
    ignore_lookup_error: bool,
}

impl OpKernel for DestroyResourceKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = handle(ctx)?;
        match ctx.step().device.resources.delete(&h.container, &h.name) {
            Err(e) if !self.ignore_lookup_error => Err(e),
            _ => Ok(()),
        }
    }
}

/// Registers the variable kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for op in ["VariableV2", "Variable"] {
        r.register(KernelDef::cpu(op, make_variable));
    }
    r.register(KernelDef::cpu("Assign", |c| {
        Ok(Box::new(AssignKernel {
            validate_shape: c.attr("validate_shape")?,
        }))
    }));
    r.register(
        KernelDef::cpu("AssignAdd", |c| make_assign_update(c, false))
            .type_constraint("T", NUMERIC_DTYPES),
    );
    r.register(
        KernelDef::cpu("AssignSub", |c| make_assign_update(c, true))
            .type_constraint("T", NUMERIC_DTYPES),
    );
    r.register(KernelDef::cpu("IsVariableInitialized", |_| {
        Ok(Box::new(IsInitializedKernel))
    }));
    r.register(KernelDef::cpu("VarHandleOp", make_var_handle));
    r.register(KernelDef::cpu("ReadVariableOp", |c| {
        Ok(Box::new(ReadVariableKernel {
            dtype: c.attr("dtype")?,
        }))
    }));
    r.register(KernelDef::cpu("AssignVariableOp", |c| {
        Ok(Box::new(AssignVariableKernel {
            dtype: c.attr("dtype")?,
            validate_shape: c.attr("validate_shape")?,
        }))
    }));
    r.register(
        KernelDef::cpu("AssignAddVariableOp", |c| make_update_variable(c, false))
            .type_constraint("dtype", NUMERIC_DTYPES),
    );
    r.register(
        KernelDef::cpu("AssignSubVariableOp", |c| make_update_variable(c, true))
            .type_constraint("dtype", NUMERIC_DTYPES),
    );
    r.register(KernelDef::cpu("VarIsInitializedOp", |_| {
        Ok(Box::new(VarIsInitializedKernel))
    }));
    r.register(KernelDef::cpu("DisableCopyOnRead", |_| {
        Ok(Box::new(DisableCopyOnReadKernel))
    }));
    r.register(KernelDef::cpu("DestroyResourceOp", |c| {
        Ok(Box::new(DestroyResourceKernel {
            ignore_lookup_error: c.attr("ignore_lookup_error")?,
        }))
    }));
}

#[cfg(test)]
mod tests {
    use crate::testutil::{run_node_in, test_device, test_step};
    use crate::Entry;
    use graph::{Code, DType, NodeDef, Shape, Tensor};

    fn var_node() -> NodeDef {
        NodeDef::new("v", "VariableV2")
            .with_attr("dtype", DType::F32)
            .with_attr("shape", Shape::known(&[2]))
    }

    #[test]
    fn ref_variable_lifecycle() {
        let dev = test_device();
        let step = test_step(&dev);
        let r = run_node_in(&step, var_node(), vec![]).unwrap();
        let var = r[0].clone();
        let e = var.to_tensor().unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        let init = NodeDef::new("is", "IsVariableInitialized")
            .with_input("v")
            .with_attr("dtype", DType::F32);
        let out = run_node_in(&step, init.clone(), vec![var.clone()]).unwrap();
        assert_eq!(out[0].to_tensor().unwrap(), Tensor::scalar(false));
        let assign = NodeDef::new("a", "Assign")
            .with_input("v")
            .with_input("x")
            .with_attr("T", DType::F32);
        run_node_in(
            &step,
            assign,
            vec![var.clone(), Entry::Value(Tensor::vector(&[1.0f32, 2.0]))],
        )
        .unwrap();
        let add = NodeDef::new("aa", "AssignAdd")
            .with_input("v")
            .with_input("x")
            .with_attr("T", DType::F32);
        let out = run_node_in(
            &step,
            add.clone(),
            vec![var.clone(), Entry::Value(Tensor::vector(&[0.5f32, 0.5]))],
        )
        .unwrap();
        assert_eq!(out[0].to_tensor().unwrap(), Tensor::vector(&[1.5f32, 2.5]));
        let e = run_node_in(
            &step,
            add,
            vec![var.clone(), Entry::Value(Tensor::vector(&[1.0f32]))],
        )
        .unwrap_err();
        assert!(e.message().contains("shapes must be equal"), "{e}");
        assert_eq!(
            var.to_tensor().unwrap(),
            Tensor::vector(&[1.5f32, 2.5]),
            "failed update left the value"
        );
        // the same variable is found again by name in the step's container
        let again = run_node_in(&step, var_node(), vec![]).unwrap();
        assert_eq!(
            again[0].to_tensor().unwrap(),
            Tensor::vector(&[1.5f32, 2.5])
        );
    }

    #[test]
    fn resource_variable_lifecycle() {
        let dev = test_device();
        let step = test_step(&dev);
        let h = NodeDef::new("h", "VarHandleOp")
            .with_attr("dtype", DType::I64)
            .with_attr("shape", Shape::scalar());
        let handle = run_node_in(&step, h, vec![]).unwrap()[0].clone();
        let read = NodeDef::new("r", "ReadVariableOp")
            .with_input("h")
            .with_attr("dtype", DType::I64);
        let e = run_node_in(&step, read.clone(), vec![handle.clone()]).unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        let is_init = NodeDef::new("i", "VarIsInitializedOp").with_input("h");
        let no_copy = NodeDef::new("c", "DisableCopyOnRead").with_input("h");
        let e = run_node_in(&step, no_copy.clone(), vec![handle.clone()]).unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        assert!(e.message().contains("Could not find variable"), "{e}");
        assert_eq!(
            run_node_in(&step, is_init.clone(), vec![handle.clone()]).unwrap()[0]
                .to_tensor()
                .unwrap(),
            Tensor::scalar(false)
        );
        let assign = NodeDef::new("a", "AssignVariableOp")
            .with_input("h")
            .with_input("x")
            .with_attr("dtype", DType::I64);
        run_node_in(
            &step,
            assign,
            vec![handle.clone(), Entry::Value(Tensor::scalar(5i64))],
        )
        .unwrap();
        assert!(run_node_in(&step, no_copy, vec![handle.clone()])
            .unwrap()
            .is_empty());
        let sub = NodeDef::new("s", "AssignSubVariableOp")
            .with_input("h")
            .with_input("x")
            .with_attr("dtype", DType::I64);
        run_node_in(
            &step,
            sub,
            vec![handle.clone(), Entry::Value(Tensor::scalar(2i64))],
        )
        .unwrap();
        assert_eq!(
            run_node_in(&step, read.clone(), vec![handle.clone()]).unwrap()[0]
                .to_tensor()
                .unwrap(),
            Tensor::scalar(3i64)
        );
        let wrong = NodeDef::new("r2", "ReadVariableOp")
            .with_input("h")
            .with_attr("dtype", DType::F32);
        assert_eq!(
            run_node_in(&step, wrong, vec![handle.clone()])
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
        let destroy = NodeDef::new("d", "DestroyResourceOp").with_input("h");
        run_node_in(&step, destroy, vec![handle.clone()]).unwrap();
        assert_eq!(
            run_node_in(&step, read, vec![handle]).unwrap_err().code(),
            Code::FailedPrecondition
        );
    }
}
