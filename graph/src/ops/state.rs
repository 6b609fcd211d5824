//! Variables, as TensorFlow has them: reference variables (`VariableV2` and the
//! `Assign*` ops that mutate through a `Ref(T)` edge) and resource variables
//! (`VarHandleOp` and the `*VariableOp`s that take a `resource` handle). Both live
//! in a device's resource manager under (container, shared_name) and persist
//! across steps.

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape};

/// Collection of every variable (`tf.GraphKeys.GLOBAL_VARIABLES`).
pub const GLOBAL_VARIABLES: &str = "variables";
/// Collection of trainable variables (`tf.GraphKeys.TRAINABLE_VARIABLES`).
pub const TRAINABLE_VARIABLES: &str = "trainable_variables";
/// Collection of local (not checkpointed) variables.
pub const LOCAL_VARIABLES: &str = "local_variables";

/// Registers the variable ops.
pub fn register_all_ops(r: &OpRegistry) {
    for name in ["VariableV2", "Variable"] {
        r.register(
            OpDef::build(name)
                .output("ref: Ref(dtype)")
                .attr("shape: shape")
                .attr("dtype: type")
                .attr("container: string = ''")
                .attr("shared_name: string = ''")
                .stateful()
                .shape_fn(shape_fn::from_shape_attr),
        );
    }
    r.register(
        OpDef::build("Assign")
            .input("ref: Ref(T)")
            .input("value: T")
            .output("output_ref: Ref(T)")
            .attr("T: type")
            .attr("validate_shape: bool = true")
            .attr("use_locking: bool = true")
            .allows_uninitialized_input()
            .shape_fn(assign_shape),
    );
    for name in ["AssignAdd", "AssignSub"] {
        r.register(
            OpDef::build(name)
                .input("ref: Ref(T)")
                .input("value: T")
                .output("output_ref: Ref(T)")
                .attr(&format!("T: {}", crate::ops::NUMERIC_TYPES))
                .attr("use_locking: bool = false")
                .shape_fn(shape_fn::unchanged),
        );
    }
    r.register(
        OpDef::build("IsVariableInitialized")
            .input("ref: Ref(dtype)")
            .output("is_initialized: bool")
            .attr("dtype: type")
            .allows_uninitialized_input()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("VarHandleOp")
            .output("resource: resource")
            .attr("container: string = ''")
            .attr("shared_name: string = ''")
            .attr("debug_name: string = ''")
            .attr("dtype: type")
            .attr("shape: shape")
            .attr("allowed_devices: list(string) = []")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("ReadVariableOp")
            .input("resource: resource")
            .output("value: dtype")
            .attr("dtype: type")
            .stateful(),
    );
    r.register(
        OpDef::build("AssignVariableOp")
            .input("resource: resource")
            .input("value: dtype")
            .attr("dtype: type")
            .attr("validate_shape: bool = false")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
    for name in ["AssignAddVariableOp", "AssignSubVariableOp"] {
        r.register(
            OpDef::build(name)
                .input("resource: resource")
                .input("value: dtype")
                .attr("dtype: type")
                .stateful()
                .shape_fn(shape_fn::no_outputs),
        );
    }
    r.register(
        OpDef::build("VarIsInitializedOp")
            .input("resource: resource")
            .output("is_initialized: bool")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("DisableCopyOnRead")
            .input("resource: resource")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
    r.register(
        OpDef::build("DestroyResourceOp")
            .input("resource: resource")
            .attr("ignore_lookup_error: bool = true")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
}

fn assign_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let validate: bool = c.attr("validate_shape")?;
    let s = if validate {
        c.input(0).merge(&c.input(1))?
    } else {
        c.input(1)
    };
    c.set_output(0, s)
}

/// A `VariableV2` (a `Ref(dtype)` output).
pub fn variable(s: &Scope, shape: Shape, dtype: DType) -> Result<Output> {
    s.op("VariableV2")
        .attr("shape", shape)
        .attr("dtype", dtype)
        .build1()
}

/// `Assign`: stores `value` into the variable `var` and outputs the ref.
pub fn assign(s: &Scope, var: &Output, value: &Output) -> Result<Output> {
    s.op("Assign").input(var).input(value).build1()
}

/// `AssignAdd`.
pub fn assign_add(s: &Scope, var: &Output, value: &Output) -> Result<Output> {
    s.op("AssignAdd").input(var).input(value).build1()
}

/// `AssignSub`.
pub fn assign_sub(s: &Scope, var: &Output, value: &Output) -> Result<Output> {
    s.op("AssignSub").input(var).input(value).build1()
}

/// `VarHandleOp`: a handle to a resource variable.
pub fn var_handle_op(s: &Scope, dtype: DType, shape: Shape) -> Result<Output> {
    s.op("VarHandleOp")
        .attr("dtype", dtype)
        .attr("shape", shape)
        .build1()
}

/// `ReadVariableOp`.
pub fn read_variable_op(s: &Scope, handle: &Output, dtype: DType) -> Result<Output> {
    s.op("ReadVariableOp")
        .input(handle)
        .attr("dtype", dtype)
        .build1()
}

/// `AssignVariableOp`.
pub fn assign_variable_op(s: &Scope, handle: &Output, value: &Output) -> Result<Operation> {
    s.op("AssignVariableOp").input(handle).input(value).build()
}

/// A reference variable as `tf.compat.v1.Variable` builds it: the `VariableV2`, an
/// `Assign` initializer from `initial_value`, and an `Identity` that reads it.
#[derive(Clone, Debug)]
pub struct Variable {
    /// The `Ref(T)` output of the `VariableV2` node.
    pub var: Output,
    /// The `Assign` that initialises it.
    pub initializer: Operation,
    /// Reads the current value.
    pub value: Output,
}

impl Variable {
    /// Builds a variable named `name` (in `s`'s name scope), initialised from
    /// `initial_value`, added to the global (and, if `trainable`, trainable)
    /// variables collections.
    pub fn new(s: &Scope, name: &str, initial_value: &Output, trainable: bool) -> Result<Variable> {
        let collections: &[&str] = if trainable {
            &[GLOBAL_VARIABLES, TRAINABLE_VARIABLES]
        } else {
            &[GLOBAL_VARIABLES]
        };
        Variable::in_collections(s, name, initial_value, collections)
    }

    /// A `VariableV2` named `name`, its initializer `<name>/Assign` from
    /// `initial_value` and its read `<name>/read` (both colocated with it), added to
    /// each of `collections`.
    pub(crate) fn in_collections(
        s: &Scope,
        name: &str,
        initial_value: &Output,
        collections: &[&str],
    ) -> Result<Variable> {
        let var = s
            .op("VariableV2")
            .name(name)
            .attr("shape", initial_value.shape())
            .attr("dtype", initial_value.dtype())
            .build1()?;
        let vs = s.colocate_with(var.op());
        let initializer = vs
            .op("Assign")
            .name(&format!("{name}/Assign"))
            .input(&var)
            .input(initial_value)
            .build()?;
        let value = vs
            .op("Identity")
            .name(&format!("{name}/read"))
            .input(&var)
            .build1()?;
        for c in collections {
            s.add_to_collection(c, var.op().name());
        }
        Ok(Variable {
            var,
            initializer,
            value,
        })
    }
}

/// A resource variable as `tf.compat.v1.get_variable(use_resource=True)` builds it.
#[derive(Clone, Debug)]
pub struct ResourceVariable {
    /// The `VarHandleOp` output.
    pub handle: Output,
    /// The `AssignVariableOp` that initialises it.
    pub initializer: Operation,
    /// A `ReadVariableOp` of the current value.
    pub value: Output,
}

impl ResourceVariable {
    /// Builds a resource variable named `name`, initialised from `initial_value`.
    pub fn new(
        s: &Scope,
        name: &str,
        initial_value: &Output,
        trainable: bool,
    ) -> Result<ResourceVariable> {
        let dtype = initial_value.dtype();
        let handle = s
            .op("VarHandleOp")
            .name(name)
            .attr("dtype", dtype)
            .attr("shape", initial_value.shape())
            .attr("shared_name", format!("{}{name}", s.name_prefix()))
            .build1()?;
        let vs = s.colocate_with(handle.op());
        let initializer = vs
            .op("AssignVariableOp")
            .name(&format!("{name}/Assign"))
            .input(&handle)
            .input(initial_value)
            .build()?;
        let value = vs
            .op("ReadVariableOp")
            .name(&format!("{name}/Read/ReadVariableOp"))
            .input(&handle)
            .attr("dtype", dtype)
            .build1()?;
        s.add_to_collection(GLOBAL_VARIABLES, handle.op().name());
        if trainable {
            s.add_to_collection(TRAINABLE_VARIABLES, handle.op().name());
        }
        Ok(ResourceVariable {
            handle,
            initializer,
            value,
        })
    }
}
