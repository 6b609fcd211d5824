//! Op signatures: [`OpDef`] (typed inputs and outputs, attributes with kinds,
//! defaults and allowed values, flags, shape function), built declaratively with
//! [`OpDefBuilder`] in TensorFlow's `REGISTER_OP` spec syntax, kept in the
//! [`OpRegistry`], and used to validate a [`NodeDef`] and resolve its edge types.
//!
//! - [`parse`] — the spec syntax (`"x: N * T"`, `"T: {float, int32} = DT_FLOAT"`).
//! - [`registry`] — the registry of every op.
//! - [`shape_fn`] — shape inference context and the common shape functions.
//!
//! A node's list counts (`N`, `num_split`, `num` …) come from untrusted graphs, so
//! they are checked before anything is sized by them: a count is a non-negative
//! `int` at least its attribute's minimum, the inputs it implies must be the node's
//! actual inputs, and no node stands for more than [`MAX_ARITY`] inputs or outputs.

pub mod parse;
pub mod registry;
pub mod shape_fn;

use crate::AttrMap;
use std::fmt;

use smallvec::SmallVec;

use crate::{AttrValue, DType, DataType, NodeDef, Result, Shape, Status};
pub use registry::OpRegistry;
pub use shape_fn::{InferenceContext, ShapeFn};

/// The most inputs, and the most outputs, one node may have (1,048,576). TensorFlow
/// sets no such limit, but the runtime keeps a slot per output, so a count beyond
/// this (say `num_split: 4611686018427387904`) can only be a corrupt graph, and is
/// refused before anything is sized by it.
pub const MAX_ARITY: usize = 1 << 20;

/// The element type of an argument: fixed, or named by a `type` attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElemType {
    /// A fixed dtype (`"x: float"`).
    Fixed(DType),
    /// The dtype held by this `type` attribute (`"x: T"`).
    Attr(String),
}

/// How many tensors an argument stands for, and of which types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgType {
    /// One tensor.
    Single(ElemType),
    /// `N` tensors of one type, `N` an `int` attribute (`"values: N * T"`).
    Repeated {
        /// The `int` attribute holding the count.
        number_attr: String,
        /// The common element type.
        elem: ElemType,
    },
    /// One tensor per element of a `list(type)` attribute (`"components: Tcomponents"`).
    TypeList(String),
}

/// A named input or output of an op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgDef {
    /// The argument's name.
    pub name: String,
    /// Its type and arity.
    pub ty: ArgType,
    /// True for a reference argument (`"ref: Ref(T)"`).
    pub is_ref: bool,
}

/// The kind of an attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttrType {
    /// `string`.
    String,
    /// `int`.
    Int,
    /// `float`.
    Float,
    /// `bool`.
    Bool,
    /// `type`.
    Type,
    /// `shape`.
    Shape,
    /// `tensor`.
    Tensor,
    /// `func`.
    Func,
    /// `list(…)` of the inner kind.
    List(Box<AttrType>),
}

impl fmt::Display for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrType::String => f.write_str("string"),
            AttrType::Int => f.write_str("int"),
            AttrType::Float => f.write_str("float"),
            AttrType::Bool => f.write_str("bool"),
            AttrType::Type => f.write_str("type"),
            AttrType::Shape => f.write_str("shape"),
            AttrType::Tensor => f.write_str("tensor"),
            AttrType::Func => f.write_str("func"),
            AttrType::List(i) => write!(f, "list({i})"),
        }
    }
}

/// An attribute of an op.
#[derive(Clone, Debug, PartialEq)]
pub struct AttrDef {
    /// The attribute's name.
    pub name: String,
    /// Its kind.
    pub ty: AttrType,
    /// The value used when a node does not set it; `None` makes it required.
    pub default: Option<AttrValue>,
    /// For `type` and `list(type)`: the allowed dtypes.
    pub allowed_types: Option<Vec<DType>>,
    /// For `string` and `list(string)`: the allowed values.
    pub allowed_strings: Option<Vec<String>>,
    /// For `int`: the minimum value; for lists: the minimum length.
    pub minimum: Option<i64>,
}

/// The signature of an op. See the module docs.
#[derive(Clone)]
pub struct OpDef {
    /// The op's name (`AddV2`).
    pub name: String,
    /// Inputs, in order.
    pub inputs: Vec<ArgDef>,
    /// Outputs, in order.
    pub outputs: Vec<ArgDef>,
    /// Attributes.
    pub attrs: Vec<AttrDef>,
    /// The op has state or side effects: never pruned by CSE, kernels are shared
    /// across the steps of a session.
    pub is_stateful: bool,
    /// Kernels of this op may complete asynchronously (Recv, queue operations).
    pub is_async: bool,
    /// `op(a, b) == op(b, a)`.
    pub is_commutative: bool,
    /// Adds its inputs (AddN): gradients may aggregate through it.
    pub is_aggregate: bool,
    /// Ref inputs may be uninitialised (Assign, IsVariableInitialized).
    pub allows_uninitialized_input: bool,
    /// Infers output shapes from input shapes and attributes.
    pub shape_fn: Option<ShapeFn>,
}

impl fmt::Debug for OpDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpDef")
            .field("name", &self.name)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("attrs", &self.attrs)
            .field("is_stateful", &self.is_stateful)
            .finish_non_exhaustive()
    }
}

/// The resolved edge types of a node.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeSignature {
    /// One type per data input.
    pub inputs: SmallVec<[DataType; 4]>,
    /// One type per output.
    pub outputs: SmallVec<[DataType; 4]>,
}

impl OpDef {
    /// Starts a declarative definition (see [`OpDefBuilder`]).
    pub fn build(name: &str) -> OpDefBuilder {
        OpDefBuilder::new(name)
    }

    /// The attribute definition with this name.
    pub fn attr(&self, name: &str) -> Option<&AttrDef> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// Fills defaults into `node`'s attributes, checks every attribute (kind, allowed
    /// values, minimum; names starting with `_` are the runtime's and pass), resolves
    /// the edge types and checks the number of data inputs. Errors name the node.
    pub fn validate(&self, node: &mut NodeDef) -> Result<NodeSignature> {
        self.validate_inner(node)
            .map_err(|e| e.with_node(&node.name))
    }

    fn validate_inner(&self, node: &mut NodeDef) -> Result<NodeSignature> {
        for a in &self.attrs {
            if !node.attr.contains_key(&a.name) {
                match &a.default {
                    Some(d) => {
                        node.attr.insert(a.name.clone(), d.clone());
                    }
                    None => {
                        return Err(Status::invalid_argument(format!(
                            "{} is missing required attr '{}' ({})",
                            self.name, a.name, a.ty
                        )))
                    }
                }
            }
        }
        for (name, v) in &node.attr {
            if name.starts_with('_') {
                continue;
            }
            let def = self.attr(name).ok_or_else(|| {
                Status::invalid_argument(format!("{} has no attr named '{name}'", self.name))
            })?;
            check_attr(def, v)?;
        }
        let n = node.data_inputs().count();
        let want = args_count(&self.inputs, &node.attr)?;
        if n != want {
            return Err(Status::invalid_argument(format!(
                "{} expects {want} data inputs, got {n}",
                self.name
            )));
        }
        let sig = self.signature(&node.attr)?;
        if node.input.iter().skip(n).any(|i| !i.starts_with('^')) {
            return Err(Status::invalid_argument(
                "control inputs must follow all data inputs",
            ));
        }
        Ok(sig)
    }

    /// Resolves the input and output types from attribute values; `InvalidArgument`
    /// when a count is not a valid `int` or the node would have more than
    /// [`MAX_ARITY`] inputs or outputs (checked before anything is allocated).
    pub fn signature(&self, attrs: &AttrMap) -> Result<NodeSignature> {
        let mut sig = NodeSignature::default();
        sig.inputs.reserve(args_count(&self.inputs, attrs)?);
        sig.outputs.reserve(args_count(&self.outputs, attrs)?);
        for a in &self.inputs {
            expand_arg(a, attrs, &mut sig.inputs)?;
        }
        for a in &self.outputs {
            expand_arg(a, attrs, &mut sig.outputs)?;
        }
        Ok(sig)
    }

    /// The range of flat input indices of input argument `name`.
    pub fn input_range(&self, attrs: &AttrMap, name: &str) -> Result<std::ops::Range<usize>> {
        arg_range(&self.inputs, attrs, name)
    }

    /// The range of flat output indices of output argument `name`.
    pub fn output_range(&self, attrs: &AttrMap, name: &str) -> Result<std::ops::Range<usize>> {
        arg_range(&self.outputs, attrs, name)
    }
}

fn arg_range(args: &[ArgDef], attrs: &AttrMap, name: &str) -> Result<std::ops::Range<usize>> {
    let mut start = 0usize;
    for a in args {
        let n = arg_count(a, attrs)?;
        if a.name == name {
            return Ok(start..start + n);
        }
        start = start.saturating_add(n);
    }
    Err(Status::invalid_argument(format!(
        "no argument named '{name}'"
    )))
}

fn elem_dtype(e: &ElemType, attrs: &AttrMap) -> Result<DType> {
    match e {
        ElemType::Fixed(d) => Ok(*d),
        ElemType::Attr(a) => match attrs.get(a) {
            Some(AttrValue::Type(d)) => Ok(*d),
            Some(v) => Err(Status::invalid_argument(format!(
                "attr '{a}' has kind {}, expected type",
                v.kind()
            ))),
            None => Err(Status::invalid_argument(format!("missing attr '{a}'"))),
        },
    }
}

/// The count held by `number_attr`: a non-negative `int` of at most [`MAX_ARITY`].
fn repeat_count(number_attr: &str, attrs: &AttrMap) -> Result<usize> {
    match attrs.get(number_attr) {
        Some(AttrValue::I(n)) => match usize::try_from(*n) {
            Ok(n) if n <= MAX_ARITY => Ok(n),
            Ok(_) => Err(Status::invalid_argument(format!(
                "attr '{number_attr}' is {n}, more than the {MAX_ARITY} tensors an argument may stand for"
            ))),
            Err(_) => Err(Status::invalid_argument(format!(
                "attr '{number_attr}' must be a non-negative int, got {n}"
            ))),
        },
        Some(v) => Err(Status::invalid_argument(format!(
            "attr '{number_attr}' must be a non-negative int, got {v:?}"
        ))),
        None => Err(Status::invalid_argument(format!(
            "missing attr '{number_attr}'"
        ))),
    }
}

/// How many tensors argument `a` stands for, without allocating anything.
fn arg_count(a: &ArgDef, attrs: &AttrMap) -> Result<usize> {
    match &a.ty {
        ArgType::Single(_) => Ok(1),
        ArgType::Repeated { number_attr, .. } => repeat_count(number_attr, attrs),
        ArgType::TypeList(attr) => match attrs.get(attr) {
            Some(AttrValue::List(l)) => Ok(l.type_.len()),
            Some(v) => Err(Status::invalid_argument(format!(
                "attr '{attr}' has kind {}, expected list(type)",
                v.kind()
            ))),
            None => Err(Status::invalid_argument(format!("missing attr '{attr}'"))),
        },
    }
}

/// How many tensors `args` stand for together: at most [`MAX_ARITY`].
fn args_count(args: &[ArgDef], attrs: &AttrMap) -> Result<usize> {
    let mut total = 0usize;
    for a in args {
        total = total.saturating_add(arg_count(a, attrs)?);
    }
    if total > MAX_ARITY {
        return Err(Status::invalid_argument(format!(
            "the node would have {total} inputs or outputs, more than the {MAX_ARITY} allowed"
        )));
    }
    Ok(total)
}

fn expand_arg(a: &ArgDef, attrs: &AttrMap, out: &mut SmallVec<[DataType; 4]>) -> Result<()> {
    let mk = |d: DType| DataType {
        dtype: d,
        is_ref: a.is_ref,
    };
    match &a.ty {
        ArgType::Single(e) => out.push(mk(elem_dtype(e, attrs)?)),
        ArgType::Repeated { number_attr, elem } => {
            let n = repeat_count(number_attr, attrs)?;
            let d = elem_dtype(elem, attrs)?;
            out.extend(std::iter::repeat_n(mk(d), n));
        }
        ArgType::TypeList(attr) => match attrs.get(attr) {
            Some(AttrValue::List(l)) => out.extend(l.type_.iter().map(|&d| mk(d))),
            Some(v) => {
                return Err(Status::invalid_argument(format!(
                    "attr '{attr}' has kind {}, expected list(type)",
                    v.kind()
                )))
            }
            None => return Err(Status::invalid_argument(format!("missing attr '{attr}'"))),
        },
    }
    Ok(())
}

fn kind_matches(ty: &AttrType, v: &AttrValue) -> bool {
    match (ty, v) {
        (AttrType::String, AttrValue::S(_))
        | (AttrType::Int, AttrValue::I(_))
        | (AttrType::Float, AttrValue::F(_))
        | (AttrType::Bool, AttrValue::B(_))
        | (AttrType::Type, AttrValue::Type(_))
        | (AttrType::Shape, AttrValue::Shape(_))
        | (AttrType::Tensor, AttrValue::Tensor(_))
        | (AttrType::Func, AttrValue::Func(_))
        | (_, AttrValue::Placeholder(_)) => true,
        (AttrType::List(inner), AttrValue::List(l)) => match l.kind() {
            None => true,
            Some(k) => k == inner.to_string(),
        },
        _ => false,
    }
}

fn check_attr(def: &AttrDef, v: &AttrValue) -> Result<()> {
    if !kind_matches(&def.ty, v) {
        return Err(Status::invalid_argument(format!(
            "attr '{}' has kind {}, expected {}",
            def.name,
            v.kind(),
            def.ty
        )));
    }
    if let Some(allowed) = &def.allowed_types {
        let types: &[DType] = match v {
            AttrValue::Type(t) => std::slice::from_ref(t),
            AttrValue::List(l) => &l.type_,
            _ => &[],
        };
        if let Some(bad) = types.iter().find(|t| !allowed.contains(t)) {
            // TensorFlow's message and type names (`half`, `float`, …).
            let names: Vec<_> = allowed.iter().map(|d| d.op_spec_name()).collect();
            return Err(Status::invalid_argument(format!(
                "Value for attr '{}' of {} is not in the list of allowed values: {}",
                def.name,
                bad.op_spec_name(),
                names.join(", ")
            )));
        }
    }
    if let Some(allowed) = &def.allowed_strings {
        let strings: &[String] = match v {
            AttrValue::S(s) => std::slice::from_ref(s),
            AttrValue::List(l) => &l.s,
            _ => &[],
        };
        if let Some(bad) = strings.iter().find(|s| !allowed.contains(s)) {
            return Err(Status::invalid_argument(format!(
                "Value for attr '{}' of \"{bad}\" is not in the list of allowed values: {}",
                def.name,
                allowed.join(", ")
            )));
        }
    }
    if let Some(min) = def.minimum {
        let (what, val) = match v {
            AttrValue::I(i) => ("value", *i),
            AttrValue::List(l) => ("length", l.len() as i64),
            _ => ("value", min),
        };
        if val < min {
            return Err(Status::invalid_argument(format!(
                "attr '{}' has {what} {val} less than minimum {min}",
                def.name
            )));
        }
    }
    let shapes: &[Shape] = match v {
        AttrValue::Shape(s) => std::slice::from_ref(s),
        AttrValue::List(l) => &l.shape,
        _ => &[],
    };
    for s in shapes {
        s.check_valid().map_err(|e| {
            Status::invalid_argument(format!("attr '{}': {}", def.name, e.message()))
        })?;
    }
    Ok(())
}

/// Builds an [`OpDef`] from TensorFlow-style spec strings.
///
/// # Examples
/// ```
/// use actorflow_graph::op_def::OpDef;
/// let def = OpDef::build("AddN")
///     .input("inputs: N * T")
///     .output("sum: T")
///     .attr("N: int >= 1")
///     .attr("T: {float, double, int32, int64}")
///     .aggregate()
///     .commutative()
///     .finish()
///     .unwrap();
/// assert_eq!(def.inputs[0].name, "inputs");
/// assert!(def.attr("N").unwrap().minimum == Some(1));
/// ```
pub struct OpDefBuilder {
    def: OpDef,
    errors: Vec<String>,
}

impl OpDefBuilder {
    fn new(name: &str) -> OpDefBuilder {
        OpDefBuilder {
            def: OpDef {
                name: name.to_owned(),
                inputs: vec![],
                outputs: vec![],
                attrs: vec![],
                is_stateful: false,
                is_async: false,
                is_commutative: false,
                is_aggregate: false,
                allows_uninitialized_input: false,
                shape_fn: None,
            },
            errors: vec![],
        }
    }

    fn record<T>(&mut self, r: Result<T>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.errors.push(e.message().to_owned());
                None
            }
        }
    }

    /// Adds an input: `"name: T"`, `"name: float"`, `"name: N * T"`,
    /// `"name: Tlist"`, `"name: Ref(T)"`.
    pub fn input(mut self, spec: &str) -> OpDefBuilder {
        if let Some(a) = self.record(parse::parse_arg(spec)) {
            self.def.inputs.push(a);
        }
        self
    }

    /// Adds an output, in the syntax of [`OpDefBuilder::input`].
    pub fn output(mut self, spec: &str) -> OpDefBuilder {
        if let Some(a) = self.record(parse::parse_arg(spec)) {
            self.def.outputs.push(a);
        }
        self
    }

    /// Adds an attribute: `"name: kind"`, `"name: kind = default"`, kinds as in
    /// TensorFlow (`int >= 1`, `{float, int32}`, `list(type)`, `{'SAME', 'VALID'}`).
    pub fn attr(mut self, spec: &str) -> OpDefBuilder {
        if let Some(a) = self.record(parse::parse_attr(spec)) {
            self.def.attrs.push(a);
        }
        self
    }

    /// Marks the op stateful.
    pub fn stateful(mut self) -> OpDefBuilder {
        self.def.is_stateful = true;
        self
    }

    /// Marks the op's kernels asynchronous.
    pub fn asynchronous(mut self) -> OpDefBuilder {
        self.def.is_async = true;
        self
    }

    /// Marks the op commutative.
    pub fn commutative(mut self) -> OpDefBuilder {
        self.def.is_commutative = true;
        self
    }

    /// Marks the op an aggregation.
    pub fn aggregate(mut self) -> OpDefBuilder {
        self.def.is_aggregate = true;
        self
    }

    /// Allows uninitialised ref inputs.
    pub fn allows_uninitialized_input(mut self) -> OpDefBuilder {
        self.def.allows_uninitialized_input = true;
        self
    }

    /// Sets the shape function.
    pub fn shape_fn(mut self, f: ShapeFn) -> OpDefBuilder {
        self.def.shape_fn = Some(f);
        self
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The definition, or the spec errors, checked for consistency: every attribute
    /// an argument names exists with the right kind.
    pub fn finish(mut self) -> Result<OpDef> {
        let list_type = AttrType::List(Box::new(AttrType::Type));
        let type_lists: Vec<String> = self
            .def
            .attrs
            .iter()
            .filter(|a| a.ty == list_type)
            .map(|a| a.name.clone())
            .collect();
        for a in self
            .def
            .inputs
            .iter_mut()
            .chain(self.def.outputs.iter_mut())
        {
            if let ArgType::Single(ElemType::Attr(t)) = &a.ty {
                if type_lists.contains(t) {
                    a.ty = ArgType::TypeList(t.clone());
                }
            }
        }
        let attr_kind = |n: &str| self.def.attr(n).map(|a| a.ty.clone());
        let mut problems = std::mem::take(&mut self.errors);
        for a in self.def.inputs.iter().chain(&self.def.outputs) {
            let needs: Vec<(&str, AttrType)> = match &a.ty {
                ArgType::Single(ElemType::Attr(t)) => vec![(t, AttrType::Type)],
                ArgType::Single(ElemType::Fixed(_)) => vec![],
                ArgType::Repeated { number_attr, elem } => {
                    let mut v = vec![(number_attr.as_str(), AttrType::Int)];
                    if let ElemType::Attr(t) = elem {
                        v.push((t, AttrType::Type));
                    }
                    v
                }
                ArgType::TypeList(t) => vec![(t, AttrType::List(Box::new(AttrType::Type)))],
            };
            for (n, kind) in needs {
                match attr_kind(n) {
                    Some(k) if k == kind => {}
                    Some(k) => problems.push(format!(
                        "attr '{n}' is {k}, argument '{}' needs {kind}",
                        a.name
                    )),
                    None => {
                        problems.push(format!("argument '{}' names undefined attr '{n}'", a.name))
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(self.def)
        } else {
            Err(Status::invalid_argument(format!(
                "bad definition of op {}: {}",
                self.def.name,
                problems.join("; ")
            )))
        }
    }
}

#[cfg(test)]
mod tests;
