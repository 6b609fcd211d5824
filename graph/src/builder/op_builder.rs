//! [`OpBuilder`] adds one node to a [`Scope`]'s graph; [`Operation`] and [`Output`]
//! are the typed handles it returns.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::builder::Scope;
use crate::op_def::{ArgType, ElemType};
use crate::{AttrValue, DType, DataType, NodeDef, OpRegistry, Result, Shape, Status};

#[derive(Debug)]
pub(crate) struct OpInfo {
    pub(crate) name: String,
    pub(crate) op: String,
    pub(crate) outputs: SmallVec<[DataType; 4]>,
    pub(crate) shapes: Vec<Shape>,
}

/// A node of a graph under construction.
#[derive(Clone)]
pub struct Operation(pub(crate) Arc<OpInfo>);

impl Operation {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The op's name.
    pub fn op_type(&self) -> &str {
        &self.0.op
    }

    /// The number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.0.outputs.len()
    }

    /// Output `index` (`InvalidArgument` when out of range).
    pub fn output(&self, index: usize) -> Result<Output> {
        if index >= self.num_outputs() {
            return Err(Status::invalid_argument(format!(
                "node '{}' has {} outputs, asked for {index}",
                self.name(),
                self.num_outputs()
            )));
        }
        Ok(Output {
            op: self.clone(),
            index,
        })
    }

    /// Every output.
    pub fn outputs(&self) -> Vec<Output> {
        (0..self.num_outputs())
            .map(|index| Output {
                op: self.clone(),
                index,
            })
            .collect()
    }
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Operation({} = {})", self.name(), self.op_type())
    }
}

/// One output of an [`Operation`]: a typed edge source.
#[derive(Clone)]
pub struct Output {
    op: Operation,
    index: usize,
}

impl Output {
    /// The producing operation.
    pub fn op(&self) -> &Operation {
        &self.op
    }

    /// The output index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The edge type.
    pub fn data_type(&self) -> DataType {
        self.op.0.outputs[self.index]
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data_type().dtype
    }

    /// The inferred (partial) shape.
    pub fn shape(&self) -> Shape {
        self.op
            .0
            .shapes
            .get(self.index)
            .cloned()
            .unwrap_or_default()
    }

    /// The tensor name, `node:index`, as feeds and fetches spell it.
    pub fn name(&self) -> String {
        format!("{}:{}", self.op.name(), self.index)
    }

    /// The input string a consumer uses (`node` for index 0, else `node:index`).
    pub fn input_name(&self) -> String {
        if self.index == 0 {
            self.op.name().to_owned()
        } else {
            self.name()
        }
    }
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Output({}, {})", self.name(), self.data_type())
    }
}

impl From<&Output> for Output {
    fn from(o: &Output) -> Output {
        o.clone()
    }
}

/// Adds one node; see [`Scope::op`].
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, Tensor};
/// let s = Scope::new();
/// let a = s.op("Const").attr("dtype", actorflow_graph::DType::F32).attr("value", Tensor::scalar(2.0f32)).build1().unwrap();
/// let b = s.op("AddV2").input(&a).input(&a).build1().unwrap(); // T inferred as float32
/// assert_eq!(b.name(), "AddV2:0");
/// assert!(s.op("AddV2").input(&a).build().is_err()); // one input missing
/// ```
pub struct OpBuilder {
    scope: Scope,
    op: String,
    name: Option<String>,
    inputs: Vec<Vec<Output>>,
    list_inputs: Vec<bool>,
    control_inputs: Vec<String>,
    attrs: Vec<(String, AttrValue)>,
    device: Option<String>,
    raw: bool,
}

impl OpBuilder {
    pub(crate) fn new(scope: &Scope, op: &str) -> OpBuilder {
        OpBuilder {
            scope: scope.clone(),
            op: op.to_owned(),
            name: None,
            inputs: vec![],
            list_inputs: vec![],
            control_inputs: vec![],
            attrs: vec![],
            device: None,
            raw: false,
        }
    }

    /// Skips control-flow context processing: the control-flow builders wire their
    /// structural nodes (Enter, Merge, Switch, Exit) by hand.
    pub(crate) fn raw(mut self) -> OpBuilder {
        self.raw = true;
        self
    }

    /// Adds the next single-tensor input argument.
    pub fn input(mut self, o: impl Into<Output>) -> OpBuilder {
        self.inputs.push(vec![o.into()]);
        self.list_inputs.push(false);
        self
    }

    /// Adds the next list input argument (`N * T` or a type list).
    pub fn input_list(mut self, os: &[Output]) -> OpBuilder {
        self.inputs.push(os.to_vec());
        self.list_inputs.push(true);
        self
    }

    /// Adds a control input.
    pub fn control_input(mut self, op: &Operation) -> OpBuilder {
        self.control_inputs.push(op.name().to_owned());
        self
    }

    /// Sets an attribute.
    pub fn attr(mut self, name: &str, v: impl Into<AttrValue>) -> OpBuilder {
        self.attrs.push((name.to_owned(), v.into()));
        self
    }

    /// Names the node (within the scope's name scope) instead of a generated name.
    pub fn name(mut self, name: &str) -> OpBuilder {
        self.name = Some(name.to_owned());
        self
    }

    /// Requests a device for this node, replacing the scope's innermost device
    /// spec (device functions around it still apply; see [`Scope`]).
    pub fn device(mut self, device: &str) -> OpBuilder {
        self.device = Some(device.to_owned());
        self
    }

    /// Adds the node, inferring type attributes from the inputs. Inside a `cond`
    /// branch or `while_loop` body, inputs from outside come in through `Switch` or
    /// `Enter` nodes, and a node with no data inputs waits on the context's pivot, as
    /// TensorFlow's control-flow contexts do.
    pub fn build(mut self) -> Result<Operation> {
        if let (Some(ctx), false) = (self.scope.context(), self.raw) {
            crate::builder::control_flow::enter_context(
                &mut self.scope,
                ctx,
                &mut self.inputs,
                &mut self.control_inputs,
            )?;
        }
        let registry = OpRegistry::global();
        let op_def = registry.lookup(&self.op)?;
        let mut def = NodeDef::new(String::new(), self.op.clone());
        for (k, v) in &self.attrs {
            def.attr.insert(k.clone(), v.clone());
        }
        if self.inputs.len() != op_def.inputs.len() {
            return Err(Status::invalid_argument(format!(
                "{} takes {} input arguments, got {}",
                self.op,
                op_def.inputs.len(),
                self.inputs.len()
            )));
        }
        for ((arg, given), is_list) in op_def
            .inputs
            .iter()
            .zip(&self.inputs)
            .zip(&self.list_inputs)
        {
            infer_type_attrs(&mut def, &arg.ty, given, *is_list, &arg.name)?;
            for o in given {
                def.input.push(o.input_name());
            }
        }
        let scope = &self.scope;
        let name = scope.unique_name(
            self.name.as_deref().unwrap_or(&self.op),
            self.name.is_some(),
        )?;
        def.device = scope.device_for(&self.op, &name, self.device.as_deref())?;
        def.name = name;
        for c in scope
            .control_dependencies()
            .iter()
            .chain(&self.control_inputs)
        {
            let ctl = format!("^{c}");
            if !def.input.contains(&ctl) {
                def.input.push(ctl);
            }
        }
        if let Some(loc) = scope.colocation() {
            if !def.attr.contains_key("_class") {
                def.attr.insert(
                    "_class".into(),
                    AttrValue::from(vec![format!("loc:@{loc}")]),
                );
            }
        }
        scope.add_node(def)
    }

    /// Adds the node and returns its output 0.
    pub fn build1(self) -> Result<Output> {
        self.build()?.output(0)
    }
}

fn infer_type_attrs(
    def: &mut NodeDef,
    ty: &ArgType,
    given: &[Output],
    is_list: bool,
    arg: &str,
) -> Result<()> {
    let mut set = |k: &str, v: AttrValue| {
        def.attr.get_or_insert(k, v);
    };
    match ty {
        ArgType::Single(e) => {
            if is_list || given.len() != 1 {
                return Err(Status::invalid_argument(format!(
                    "argument '{arg}' of {} takes one tensor",
                    def.op
                )));
            }
            if let ElemType::Attr(t) = e {
                set(t, AttrValue::Type(given[0].dtype()));
            }
        }
        ArgType::Repeated { number_attr, elem } => {
            set(number_attr, AttrValue::I(given.len() as i64));
            if let (ElemType::Attr(t), Some(first)) = (elem, given.first()) {
                set(t, AttrValue::Type(first.dtype()));
            }
        }
        ArgType::TypeList(t) => {
            let types: Vec<DType> = given.iter().map(Output::dtype).collect();
            set(t, AttrValue::from(types));
        }
    }
    Ok(())
}

/// What a feed or a fetch names: a builder's [`Output`] (so a typo is a compile
/// error), or a `"node:port"` string (`"node"` is port 0) for graphs imported from
/// files.
///
/// ```
/// use actorflow_graph::builder::{Scope, TensorRef};
/// use actorflow_graph::{ops, DType, Shape};
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
/// assert_eq!(x.tensor_name(), "Placeholder:0");
/// assert_eq!("y:1".tensor_name(), "y:1");
/// ```
pub trait TensorRef {
    /// The tensor's name as feeds and fetches spell it.
    fn tensor_name(&self) -> Cow<'_, str>;
}

/// What a target names: a builder's [`Operation`], or a node name.
pub trait NodeRef {
    /// The node's name.
    fn node_name(&self) -> &str;
}

impl TensorRef for Output {
    fn tensor_name(&self) -> Cow<'_, str> {
        Cow::Owned(self.name())
    }
}

impl TensorRef for str {
    fn tensor_name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl TensorRef for String {
    fn tensor_name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl<T: TensorRef + ?Sized> TensorRef for &T {
    fn tensor_name(&self) -> Cow<'_, str> {
        (**self).tensor_name()
    }
}

impl NodeRef for Operation {
    fn node_name(&self) -> &str {
        self.name()
    }
}

impl NodeRef for str {
    fn node_name(&self) -> &str {
        self
    }
}

impl NodeRef for String {
    fn node_name(&self) -> &str {
        self
    }
}

impl<T: NodeRef + ?Sized> NodeRef for &T {
    fn node_name(&self) -> &str {
        (**self).node_name()
    }
}
