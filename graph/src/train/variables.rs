//! [`VarRef`]: a handle on a variable of a graph under construction, whichever
//! kind it is (a reference `VariableV2` or a resource `VarHandleOp`), and the
//! variable collections (`tf.GraphKeys.GLOBAL_VARIABLES`, `TRAINABLE_VARIABLES`,
//! `LOCAL_VARIABLES`) resolved into them.
//!
//! Collections hold node names; [`ops::Variable::new`](crate::ops::Variable::new)
//! and [`ops::ResourceVariable::new`](crate::ops::ResourceVariable::new) add
//! their variable to the global (and, when trainable, the trainable)
//! collection, and name its initializer `<variable>/Assign`, which is how
//! [`VarRef::initializer`] finds it.

use crate::builder::{Operation, Output, Scope};
use crate::ops::{self, ResourceVariable, Variable};
use crate::{DType, Result, Shape, Status, Tensor};

pub use crate::ops::state::{GLOBAL_VARIABLES, LOCAL_VARIABLES, TRAINABLE_VARIABLES};

/// Which kind of variable a [`VarRef`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarKind {
    /// A `VariableV2`: consumers take its `Ref(T)` output.
    Ref,
    /// A `VarHandleOp`: consumers take its `resource` handle.
    Resource,
}

/// A variable of a graph under construction: its node, kind, dtype and static
/// shape. Cheap to clone.
#[derive(Clone, Debug)]
pub struct VarRef {
    handle: Output,
    kind: VarKind,
    dtype: DType,
    shape: Shape,
}

impl VarRef {
    /// The variable named `name` in `s`'s graph (`NotFound` if absent,
    /// `InvalidArgument` if the node is not a variable).
    pub fn from_name(s: &Scope, name: &str) -> Result<VarRef> {
        let op = s
            .find_operation(name)
            .ok_or_else(|| Status::not_found(format!("no variable '{name}' in the graph")))?;
        VarRef::from_op(s, &op)
    }

    /// The variable whose node is `op`.
    pub fn from_op(s: &Scope, op: &Operation) -> Result<VarRef> {
        match op.op_type() {
            "VariableV2" | "Variable" => {
                let out = op.output(0)?;
                Ok(VarRef {
                    kind: VarKind::Ref,
                    dtype: out.dtype(),
                    shape: out.shape(),
                    handle: out,
                })
            }
            "VarHandleOp" => {
                let (dtype, shape) = s
                    .with_graph(|g| {
                        let def = &g.node(g.find(op.name())?).def;
                        Some((
                            def.get_attr::<DType>("dtype"),
                            def.get_attr::<Shape>("shape"),
                        ))
                    })
                    .ok_or_else(|| {
                        Status::not_found(format!("no variable '{}' in the graph", op.name()))
                    })?;
                Ok(VarRef {
                    handle: op.output(0)?,
                    kind: VarKind::Resource,
                    dtype: dtype?,
                    shape: shape.unwrap_or_default(),
                })
            }
            other => Err(Status::invalid_argument(format!(
                "'{}' is a {other} node, not a variable",
                op.name()
            ))),
        }
    }

    /// The variable's node name (its name in collections and checkpoints).
    pub fn name(&self) -> &str {
        self.handle.op().name()
    }

    /// The variable's node.
    pub fn op(&self) -> &Operation {
        self.handle.op()
    }

    /// Reference or resource.
    pub fn kind(&self) -> VarKind {
        self.kind
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The static shape (possibly partial).
    pub fn shape(&self) -> Shape {
        self.shape.clone()
    }

    /// The output that update ops and gradients take: the `Ref(T)` output of a
    /// reference variable, the handle of a resource variable.
    pub fn handle(&self) -> Output {
        self.handle.clone()
    }

    /// A read of the current value, colocated with the variable (`Identity` of a
    /// reference variable, `ReadVariableOp` of a resource variable).
    pub fn read(&self, s: &Scope) -> Result<Output> {
        let s = s.colocate_with(self.op());
        match self.kind {
            VarKind::Ref => ops::identity(&s, &self.handle()),
            VarKind::Resource => ops::read_variable_op(&s, &self.handle(), self.dtype),
        }
    }

    /// Assigns `value` (`Assign` or `AssignVariableOp`), colocated with the
    /// variable.
    pub fn assign(&self, s: &Scope, value: &Output) -> Result<Operation> {
        let s = s.colocate_with(self.op());
        match self.kind {
            VarKind::Ref => Ok(ops::assign(&s, &self.handle(), value)?.op().clone()),
            VarKind::Resource => ops::assign_variable_op(&s, &self.handle(), value),
        }
    }

    /// Adds `value` (`AssignAdd` or `AssignAddVariableOp`), colocated with the
    /// variable.
    pub fn assign_add(&self, s: &Scope, value: &Output) -> Result<Operation> {
        let s = s.colocate_with(self.op());
        match self.kind {
            VarKind::Ref => Ok(ops::assign_add(&s, &self.handle(), value)?.op().clone()),
            VarKind::Resource => s
                .op("AssignAddVariableOp")
                .input(self.handle())
                .input(value)
                .attr("dtype", self.dtype)
                .build(),
        }
    }

    /// The initializer `<name>/Assign` built with the variable, if any.
    pub fn initializer(&self, s: &Scope) -> Option<Operation> {
        s.find_operation(&format!("{}/Assign", self.name()))
    }
}

impl From<&Variable> for VarRef {
    fn from(v: &Variable) -> VarRef {
        VarRef {
            handle: v.var.clone(),
            kind: VarKind::Ref,
            dtype: v.var.dtype(),
            shape: v.var.shape(),
        }
    }
}

impl From<&ResourceVariable> for VarRef {
    fn from(v: &ResourceVariable) -> VarRef {
        VarRef {
            handle: v.handle.clone(),
            kind: VarKind::Resource,
            dtype: v.value.dtype(),
            shape: v.value.shape(),
        }
    }
}

/// The variables of collection `key`, resolved.
pub fn collection_variables(s: &Scope, key: &str) -> Result<Vec<VarRef>> {
    s.collection(key)
        .iter()
        .map(|n| VarRef::from_name(s, n))
        .collect()
}

/// Every global variable (checkpointed by default).
pub fn global_variables(s: &Scope) -> Result<Vec<VarRef>> {
    collection_variables(s, GLOBAL_VARIABLES)
}

/// The trainable variables (what optimizers update by default).
pub fn trainable_variables(s: &Scope) -> Result<Vec<VarRef>> {
    collection_variables(s, TRAINABLE_VARIABLES)
}

/// The local variables (per-process state such as epoch counters; not
/// checkpointed by default).
pub fn local_variables(s: &Scope) -> Result<Vec<VarRef>> {
    collection_variables(s, LOCAL_VARIABLES)
}

/// Builds a node with `build(name)`, trying `base`, `base_1`, `base_2`, … until a
/// name is free.
pub(crate) fn with_free_name<T>(base: &str, build: impl Fn(&str) -> Result<T>) -> Result<T> {
    for i in 0..10_000 {
        let name = if i == 0 {
            base.to_owned()
        } else {
            format!("{base}_{i}")
        };
        match build(&name) {
            Err(e) if e.code() == crate::Code::AlreadyExists => continue,
            r => return r,
        }
    }
    Err(Status::already_exists(format!("no free name for '{base}'")))
}

/// A `NoOp` named `name` (made unique) that runs after every initializer of
/// `vars` (`tf.compat.v1.variables_initializer`). A variable without an
/// initializer is `FailedPrecondition`.
pub fn variables_initializer(s: &Scope, vars: &[VarRef], name: &str) -> Result<Operation> {
    let mut inits = Vec::with_capacity(vars.len());
    for v in vars {
        inits.push(v.initializer(s).ok_or_else(|| {
            Status::failed_precondition(format!(
                "variable '{}' has no initializer '{}/Assign'",
                v.name(),
                v.name()
            ))
        })?);
    }
    with_free_name(name, |n| {
        let mut b = s.op("NoOp").name(n);
        for i in &inits {
            b = b.control_input(i);
        }
        b.build()
    })
}

/// Initializes every global variable (`tf.compat.v1.global_variables_initializer`,
/// a `NoOp` named `init`).
pub fn global_variables_initializer(s: &Scope) -> Result<Operation> {
    variables_initializer(s, &global_variables(s)?, "init")
}

/// Initializes every local variable (`tf.compat.v1.local_variables_initializer`,
/// a `NoOp` named `init_local`).
pub fn local_variables_initializer(s: &Scope) -> Result<Operation> {
    variables_initializer(s, &local_variables(s)?, "init_local")
}

/// `tf.compat.v1.report_uninitialized_variables`: a string vector of the names
/// of `vars` that are not initialised when it runs (empty when all are), built
/// in the name scope `report_uninitialized_variables` on the CPU (an
/// `IsVariableInitialized` or `VarIsInitializedOp` per variable, each with its
/// variable, then `Pack`, `LogicalNot` and a boolean mask of a constant holding
/// the names).
pub fn report_uninitialized_variables(s: &Scope, vars: &[VarRef]) -> Result<Output> {
    let ns = s.with_name_scope("report_uninitialized_variables");
    let mut flags = Vec::with_capacity(vars.len());
    for v in vars {
        let vs = ns.colocate_with(v.op());
        flags.push(match v.kind() {
            VarKind::Ref => vs
                .op("IsVariableInitialized")
                .input(v.handle())
                .attr("dtype", v.dtype())
                .build1()?,
            VarKind::Resource => vs.op("VarIsInitializedOp").input(v.handle()).build1()?,
        });
    }
    let cpu = ns.with_device("/device:CPU:0");
    let names: Vec<String> = vars.iter().map(|v| v.name().to_owned()).collect();
    let names = ops::constant(&cpu, Tensor::from_strings(&[names.len()], names)?)?;
    if vars.is_empty() {
        return Ok(names);
    }
    let uninitialized = ops::logical_not(&cpu, &ops::pack(&cpu, &flags, 0)?)?;
    let at = ops::where_(&cpu, &uninitialized)?;
    let at = ops::reshape(&cpu, &at, &ops::constant(&cpu, Tensor::vector(&[-1i64]))?)?;
    ops::gather_v1(&cpu, &names, &at)
}

/// A reference variable in the local collection only (not trainable, not
/// checkpointed): a `VariableV2` named `name`, its initializer `<name>/Assign`
/// from `initial_value`, and its read `<name>/read`.
pub fn local_variable(s: &Scope, name: &str, initial_value: &Output) -> Result<Variable> {
    Variable::in_collections(s, name, initial_value, &[LOCAL_VARIABLES])
}

/// A scalar tensor of float `dtype` holding `v` (rounded to the dtype).
pub(crate) fn float_scalar(dtype: DType, v: f64) -> Result<Tensor> {
    Ok(match dtype {
        DType::F64 => Tensor::scalar(v),
        DType::F32 => Tensor::scalar(v as f32),
        DType::F16 => Tensor::scalar(crate::f16::from_f64(v)),
        DType::BF16 => Tensor::scalar(crate::bf16::from_f64(v)),
        other => {
            return Err(Status::invalid_argument(format!(
                "optimizers update float variables, not {other}"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_resolve_both_kinds() {
        let s = Scope::new();
        let init = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        let w = Variable::new(&s, "w", &init, true).unwrap();
        let r = ResourceVariable::new(&s, "r", &init, false).unwrap();
        let c = ops::scalar(&s, 0i64).unwrap();
        let l = local_variable(&s, "counter", &c).unwrap();
        let g = global_variables(&s).unwrap();
        assert_eq!(g.iter().map(VarRef::name).collect::<Vec<_>>(), ["w", "r"]);
        assert_eq!(g[0].kind(), VarKind::Ref);
        assert_eq!(g[1].kind(), VarKind::Resource);
        assert_eq!(g[1].shape(), Shape::known(&[2]));
        assert_eq!(g[1].dtype(), DType::F32);
        assert_eq!(trainable_variables(&s).unwrap().len(), 1);
        assert_eq!(local_variables(&s).unwrap()[0].name(), "counter");
        assert_eq!(VarRef::from(&w).name(), "w");
        assert_eq!(VarRef::from(&r).kind(), VarKind::Resource);
        assert_eq!(g[0].initializer(&s).unwrap().name(), w.initializer.name());
        let init_op = global_variables_initializer(&s).unwrap();
        assert_eq!(init_op.name(), "init");
        let def = s.graph_def();
        let n = def.find("init").unwrap();
        assert!(n.input.contains(&"^w/Assign".to_owned()));
        assert!(n.input.contains(&"^r/Assign".to_owned()));
        assert!(!n.input.contains(&"^counter/Assign".to_owned()));
        assert_eq!(global_variables_initializer(&s).unwrap().name(), "init_1");
        assert_eq!(
            local_variables_initializer(&s).unwrap().name(),
            "init_local"
        );
        let _ = l;
        assert_eq!(
            VarRef::from_name(&s, "nope").unwrap_err().code(),
            crate::Code::NotFound
        );
        assert_eq!(
            VarRef::from_op(&s, init.op()).unwrap_err().code(),
            crate::Code::InvalidArgument
        );
    }
}
