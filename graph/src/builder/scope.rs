//! [`Scope`]: where the builder adds nodes. A scope is a cheap, cloneable view of a
//! shared graph under construction plus the context new nodes inherit: a name
//! prefix, a device, control dependencies and a colocation target. Derived scopes
//! (`with_*`) share the graph and change only the context.
//!
//! Devices follow TensorFlow's device stack (`tf.device` in `ops.py`). A scope
//! holds a stack of device layers, outermost first: device specs
//! ([`Scope::with_device`]) and device functions ([`Scope::with_device_fn`], e.g.
//! [`replica_device_setter`](crate::train::replica_device_setter)). A new node's
//! device starts as its innermost spec (the builder's own
//! [`OpBuilder::device`](crate::builder::OpBuilder::device), else the scope's
//! innermost `with_device`), then every layer further out is applied, innermost
//! first: a function maps the node (op type, name, device so far) to a device; a
//! spec fills the fields the device so far leaves unset. Consecutive specs do
//! not merge: `with_device` replaces the spec it nests in (so without device
//! functions a node's device is exactly the innermost spec, as it always was).
//! Inside [`Scope::colocate_with`] the device functions are suspended, as
//! TensorFlow's `colocate_with` suspends them: the node requests its innermost
//! spec and follows its colocation target.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use smallvec::SmallVec;

use crate::builder::control_flow::ContextInfo;
use crate::builder::op_builder::{OpInfo, Operation, Output};
use crate::builder::OpBuilder;
use crate::op_def::InferenceContext;
use crate::{DeviceName, Graph, GraphDef, NodeDef, OpRegistry, Result, Shape, Status, Tensor};

/// What a device function sees of the node it places: its op type, its name and
/// the device requested so far (by inner device scopes or the builder).
#[derive(Clone, Copy, Debug)]
pub struct DeviceRequest<'a> {
    /// The op type (`VariableV2`, `MatMul`, …).
    pub op_type: &'a str,
    /// The node's full name.
    pub name: &'a str,
    /// The device requested so far (`""`: none).
    pub device: &'a str,
}

/// A device function (TensorFlow's `tf.device(function)`): the device of a new
/// node from its [`DeviceRequest`]. An error fails the node's creation.
pub type DeviceFunction = Arc<dyn Fn(&DeviceRequest<'_>) -> Result<String> + Send + Sync>;

/// One entry of a scope's device stack; see the module docs.
#[derive(Clone)]
enum DeviceLayer {
    Spec(String),
    Function(DeviceFunction),
}

#[derive(Default)]
struct GraphState {
    graph: Graph,
    shapes: Vec<Vec<Shape>>,
    used_names: HashMap<String, usize>,
    collections: BTreeMap<String, Vec<String>>,
    contexts: Vec<ContextInfo>,
    node_context: HashMap<String, usize>,
    cond_preds: HashMap<String, Output>,
}

/// A view of a graph under construction; see the module docs.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::{ops, Tensor};
/// let root = Scope::new();
/// let layer = root.with_name_scope("layer");
/// let c = ops::constant(&layer, Tensor::scalar(1.0f32)).unwrap();
/// assert_eq!(c.op().name(), "layer/Const");
/// let gpu = layer.with_device("/device:CPU:1");
/// let d = ops::constant(&gpu, Tensor::scalar(2.0f32)).unwrap();
/// assert_eq!(d.op().name(), "layer/Const_1");
/// let gd = root.graph_def();
/// assert_eq!(gd.find("layer/Const_1").unwrap().device, "/device:CPU:1");
/// ```
#[derive(Clone)]
pub struct Scope {
    state: Arc<Mutex<GraphState>>,
    prefix: String,
    /// Outermost first; see the module docs.
    devices: Vec<DeviceLayer>,
    control_deps: Vec<String>,
    colocation: Option<String>,
    context: Option<usize>,
}

impl Default for Scope {
    fn default() -> Scope {
        Scope::new()
    }
}

impl Scope {
    /// A root scope over a new, empty graph.
    pub fn new() -> Scope {
        Scope {
            state: Arc::new(Mutex::new(GraphState::default())),
            prefix: String::new(),
            devices: vec![],
            control_deps: vec![],
            colocation: None,
            context: None,
        }
    }

    fn lock(&self) -> MutexGuard<'_, GraphState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A scope whose node names start with `name/` (made unique: a second
    /// `with_name_scope("layer")` gives `layer_1/`, as in TensorFlow).
    pub fn with_name_scope(&self, name: &str) -> Scope {
        let mut s = self.clone();
        let full = self
            .unique_name(name, false)
            .unwrap_or_else(|_| format!("{}{name}", self.prefix));
        s.prefix = format!("{full}/");
        s
    }

    /// A scope whose nodes request `device` (full or partial spec). It replaces
    /// the innermost spec; inside a device function it is merged with what the
    /// function makes of it (see the module docs).
    pub fn with_device(&self, device: &str) -> Scope {
        let mut s = self.clone();
        let spec = DeviceLayer::Spec(device.to_owned());
        match s.devices.last_mut() {
            Some(top @ DeviceLayer::Spec(_)) => *top = spec,
            _ => s.devices.push(spec),
        }
        s
    }

    /// A scope whose nodes' devices `f` chooses (TensorFlow's
    /// `tf.device(function)`), applied after the specs nested inside it and
    /// before the ones around it (see the module docs).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use actorflow_graph::builder::{DeviceRequest, Scope};
    /// use actorflow_graph::{ops, Tensor};
    /// let root = Scope::new();
    /// let s = root.with_device_fn(Arc::new(|n: &DeviceRequest<'_>| {
    ///     Ok(if n.op_type == "Const" { "/device:CPU:1".to_owned() } else { n.device.to_owned() })
    /// }));
    /// let c = ops::constant(&s, Tensor::scalar(1.0f32)).unwrap();
    /// assert_eq!(root.graph_def().find(c.op().name()).unwrap().device, "/device:CPU:1");
    /// ```
    pub fn with_device_fn(&self, f: DeviceFunction) -> Scope {
        let mut s = self.clone();
        s.devices.push(DeviceLayer::Function(f));
        s
    }

    /// A scope with no device specs or functions (TensorFlow's
    /// `tf.device(None)`).
    pub fn without_device(&self) -> Scope {
        let mut s = self.clone();
        s.devices.clear();
        s
    }

    /// A scope in the root name scope (TensorFlow's `tf.name_scope("")`), with
    /// everything else unchanged.
    pub fn with_root_name_scope(&self) -> Scope {
        let mut s = self.clone();
        s.prefix.clear();
        s
    }

    /// A scope whose nodes run after `ops` (control dependencies accumulate).
    pub fn with_control_dependencies(&self, ops: &[&Operation]) -> Scope {
        let mut s = self.clone();
        for o in ops {
            if !s.control_deps.iter().any(|c| c == o.name()) {
                s.control_deps.push(o.name().to_owned());
            }
        }
        s
    }

    /// A scope without inherited control dependencies.
    pub fn without_control_dependencies(&self) -> Scope {
        let mut s = self.clone();
        s.control_deps.clear();
        s
    }

    /// A scope whose nodes are colocated with `op` (the `_class` attribute).
    pub fn colocate_with(&self, op: &Operation) -> Scope {
        let mut s = self.clone();
        s.colocation = Some(op.name().to_owned());
        s
    }

    /// Starts a node of op `op_type`.
    pub fn op(&self, op_type: &str) -> OpBuilder {
        OpBuilder::new(self, op_type)
    }

    /// The name prefix (`""` or `"a/b/"`).
    pub fn name_prefix(&self) -> &str {
        &self.prefix
    }

    /// The innermost device spec (`""` when there is none, or when a device
    /// function is innermost).
    pub fn device(&self) -> &str {
        match self.devices.last() {
            Some(DeviceLayer::Spec(d)) => d,
            _ => "",
        }
    }

    /// The device of a new node of op `op_type` named `name`, whose builder
    /// requested `explicit` (see the module docs). Errors name the node.
    pub(crate) fn device_for(
        &self,
        op_type: &str,
        name: &str,
        explicit: Option<&str>,
    ) -> Result<String> {
        let mut outer = self.devices.iter().rev().peekable();
        let innermost = match outer.peek() {
            Some(DeviceLayer::Spec(d)) => {
                let d = d.clone();
                outer.next();
                d
            }
            _ => String::new(),
        };
        let mut device = explicit.map_or(innermost, str::to_owned);
        if self.colocation.is_some() {
            return Ok(device);
        }
        for layer in outer {
            device = match layer {
                DeviceLayer::Function(f) => f(&DeviceRequest {
                    op_type,
                    name,
                    device: &device,
                }),
                DeviceLayer::Spec(spec) => fill_unset(spec, &device),
            }
            .map_err(|e| e.with_node(name))?;
        }
        Ok(device)
    }

    /// True when a device function applies to this scope's nodes.
    pub fn has_device_fn(&self) -> bool {
        self.devices
            .iter()
            .any(|l| matches!(l, DeviceLayer::Function(_)))
    }

    pub(crate) fn control_dependencies(&self) -> &[String] {
        &self.control_deps
    }

    pub(crate) fn colocation(&self) -> Option<&str> {
        self.colocation.as_deref()
    }

    /// A fresh name `prefix + base`, suffixed `_1`, `_2`, … if taken; with `exact`,
    /// a taken name is an `AlreadyExists` error instead.
    pub fn unique_name(&self, base: &str, exact: bool) -> Result<String> {
        let mut st = self.lock();
        let full = format!("{}{base}", self.prefix);
        let taken =
            |st: &GraphState, n: &str| st.used_names.contains_key(n) || st.graph.find(n).is_some();
        if !taken(&st, &full) {
            st.used_names.insert(full.clone(), 0);
            return Ok(full);
        }
        if exact {
            return Err(Status::already_exists(format!(
                "node name '{full}' is already used"
            )));
        }
        let mut i = st.used_names.get(&full).copied().unwrap_or(0);
        loop {
            i += 1;
            let cand = format!("{full}_{i}");
            if !taken(&st, &cand) {
                st.used_names.insert(full.clone(), i);
                st.used_names.insert(cand.clone(), 0);
                return Ok(cand);
            }
        }
    }

    /// The control-flow context (cond branch or loop body) new nodes join.
    pub(crate) fn context(&self) -> Option<usize> {
        self.context
    }

    /// A scope whose nodes join control-flow context `ctx`.
    pub(crate) fn with_context(&self, ctx: Option<usize>) -> Scope {
        let mut s = self.clone();
        s.context = ctx;
        s
    }

    /// Registers a control-flow context; returns its id.
    pub(crate) fn add_context(&self, info: ContextInfo) -> usize {
        let mut st = self.lock();
        st.contexts.push(info);
        st.contexts.len() - 1
    }

    /// Runs `f` on context `id`.
    pub(crate) fn with_context_info<R>(
        &self,
        id: usize,
        f: impl FnOnce(&mut ContextInfo) -> R,
    ) -> R {
        let mut st = self.lock();
        f(&mut st.contexts[id])
    }

    /// The context a node was created in (`None`: the root).
    pub(crate) fn context_of(&self, node: &str) -> Option<usize> {
        self.lock().node_context.get(node).copied()
    }

    /// Moves a node to another context (loop `Exit`s belong to the enclosing one).
    pub(crate) fn set_context_of(&self, node: &str, ctx: Option<usize>) {
        let mut st = self.lock();
        match ctx {
            Some(c) => st.node_context.insert(node.to_owned(), c),
            None => st.node_context.remove(node),
        };
    }

    /// Records that `merge` joins the branches of a cond on `pred` (for gradients).
    pub(crate) fn record_cond_merge(&self, merge: &str, pred: &Output) {
        self.lock()
            .cond_preds
            .insert(merge.to_owned(), pred.clone());
    }

    /// The predicate of the cond whose `Merge` is `merge`.
    pub fn cond_pred_of(&self, merge: &str) -> Option<Output> {
        self.lock().cond_preds.get(merge).cloned()
    }

    /// The branch (1: true, 0: false) a `Switch` built by `cond` feeds, and its
    /// predicate, for a `Switch` bringing a value into a cond branch.
    pub fn cond_switch_branch(&self, switch: &str) -> Option<(usize, Output)> {
        let st = self.lock();
        st.contexts.iter().find_map(|c| match &c.kind {
            crate::builder::control_flow::ContextKind::Cond { pred, branch } => c
                .external
                .values()
                .any(|v| v.op().name() == switch)
                .then(|| (*branch, pred.clone())),
            _ => None,
        })
    }

    /// The loop whose `Enter` or `Exit` `node` is (they live in the enclosing context).
    pub(crate) fn loop_of_boundary(&self, node: &str) -> Option<usize> {
        let st = self.lock();
        st.contexts.iter().position(|c| {
            c.loop_record
                .as_ref()
                .is_some_and(|r| r.boundary.iter().any(|b| b == node))
                || c.const_enters.iter().any(|(_, e)| e.op().name() == node)
        })
    }

    /// Whether context `id` is a `while_loop`'s.
    pub(crate) fn is_while_context(&self, id: usize) -> bool {
        matches!(
            self.lock().contexts[id].kind,
            crate::builder::control_flow::ContextKind::While { .. }
        )
    }

    /// The contexts nested directly in `id`.
    pub(crate) fn child_contexts(&self, id: usize) -> Vec<usize> {
        let st = self.lock();
        (0..st.contexts.len())
            .filter(|&c| st.contexts[c].parent == Some(id))
            .collect()
    }

    /// The parent of context `id`.
    pub(crate) fn parent_context(&self, id: usize) -> Option<usize> {
        self.lock().contexts[id].parent
    }

    /// Overrides the recorded shape of an output (a loop variable's shape invariant).
    pub(crate) fn set_output_shape(&self, op: &Operation, index: usize, shape: Shape) -> Operation {
        let mut st = self.lock();
        if let Some(id) = st.graph.find(op.name()) {
            if let Some(s) = st.shapes[id].get_mut(index) {
                *s = shape;
            }
            let mut shapes = op.0.shapes.clone();
            if let Some(s) = shapes.get_mut(index) {
                *s = st.shapes[id][index].clone();
            }
            return Operation(Arc::new(OpInfo {
                name: op.0.name.clone(),
                op: op.0.op.clone(),
                outputs: op.0.outputs.clone(),
                shapes,
            }));
        }
        op.clone()
    }

    pub(crate) fn add_node(&self, def: NodeDef) -> Result<Operation> {
        let registry = OpRegistry::global();
        let mut st = self.lock();
        let op_def = registry
            .lookup(&def.op)
            .map_err(|e| e.with_node(&def.name))?;
        let mut checked = def.clone();
        let sig = op_def.validate(&mut checked)?;
        let mut shapes = vec![Shape::unknown(); sig.outputs.len()];
        if let Some(f) = op_def.shape_fn {
            let mut in_shapes = Vec::new();
            let mut in_values = Vec::new();
            for s in checked.data_inputs() {
                let t = crate::TensorId::parse(s).map_err(|e| e.with_node(&def.name))?;
                let (shape, value) = match st.graph.find(t.node) {
                    Some(id) => {
                        let shape = st.shapes[id]
                            .get(t.port as usize)
                            .cloned()
                            .unwrap_or_default();
                        let n = st.graph.node(id);
                        let value = (n.op() == "Const")
                            .then(|| n.def.get_attr::<Tensor>("value").ok())
                            .flatten();
                        (shape, value)
                    }
                    None => (Shape::unknown(), None),
                };
                in_shapes.push(shape);
                in_values.push(value);
            }
            let mut ctx =
                InferenceContext::new(&checked, &in_shapes, &in_values, sig.outputs.len());
            f(&mut ctx).map_err(|e| e.with_node(&def.name))?;
            shapes = ctx.into_outputs();
        }
        let id = st.graph.add_node(def, registry)?;
        st.shapes.push(shapes.clone());
        if let Some(c) = self.context {
            let name = st.graph.node(id).def.name.clone();
            st.node_context.insert(name, c);
        }
        let n = st.graph.node(id);
        Ok(Operation(Arc::new(OpInfo {
            name: n.def.name.clone(),
            op: n.def.op.clone(),
            outputs: n.sig.outputs.clone(),
            shapes,
        })))
    }

    /// The operation with this name, if the graph has it.
    pub fn find_operation(&self, name: &str) -> Option<Operation> {
        let st = self.lock();
        let id = st.graph.find(name)?;
        let n = st.graph.node(id);
        Some(Operation(Arc::new(OpInfo {
            name: n.def.name.clone(),
            op: n.def.op.clone(),
            outputs: SmallVec::from_slice(&n.sig.outputs),
            shapes: st.shapes[id].clone(),
        })))
    }

    /// Rewires data input `input` of `op` to `src` (closing a loop's back edge).
    pub fn replace_input(&self, op: &Operation, input: usize, src: &Output) -> Result<()> {
        let mut st = self.lock();
        let dst = st
            .graph
            .find(op.name())
            .ok_or_else(|| Status::not_found(format!("no node '{}'", op.name())))?;
        let s = st
            .graph
            .find(src.op().name())
            .ok_or_else(|| Status::not_found(format!("no node '{}'", src.op().name())))?;
        st.graph.replace_input(dst, input, s, src.index() as i32)
    }

    /// Adds `name` to the named collection (as `tf.add_to_collection`).
    pub fn add_to_collection(&self, key: &str, name: &str) {
        let mut st = self.lock();
        let v = st.collections.entry(key.to_owned()).or_default();
        if !v.iter().any(|x| x == name) {
            v.push(name.to_owned());
        }
    }

    /// The names in a collection, in insertion order.
    pub fn collection(&self, key: &str) -> Vec<String> {
        self.lock()
            .collections
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    /// Every collection by key, in key order (what a `MetaGraphDef` records).
    pub fn collections(&self) -> BTreeMap<String, Vec<String>> {
        self.lock().collections.clone()
    }

    /// A copy of the graph built so far.
    pub fn graph_def(&self) -> GraphDef {
        self.lock().graph.to_graph_def()
    }

    /// Runs `f` on the graph built so far.
    pub fn with_graph<R>(&self, f: impl FnOnce(&Graph) -> R) -> R {
        f(&self.lock().graph)
    }
}

/// `outer` with the fields `device` sets replaced by `device`'s (an outer
/// `tf.device` spec only fills what inner layers left unset).
fn fill_unset(outer: &str, device: &str) -> Result<String> {
    let outer_spec = DeviceName::parse(outer)?;
    let inner = DeviceName::parse(device)?;
    Ok(outer_spec.overridden_by(&inner).to_string())
}
