//! Inlining of library function calls at import: a graph whose nodes call
//! functions of its `FunctionDefLibrary` (TensorFlow 2's `PartitionedCall` and
//! `StatefulPartitionedCall` with attribute `f`, or a node whose op is the
//! function's name) becomes one flat graph of ordinary ops, recursively, before
//! validation, as TensorFlow's `InlineFunctionBody` does before it runs a graph.
//!
//! - `library` — which nodes are calls, function bodies converted on first use,
//!   argument lists expanded from the call's attributes.
//! - `body` — one call's renamed copy of a body (`<caller>/<node>`), inputs
//!   rewritten from the function form (`arg`, `node:out:i`, `^node`) to graph
//!   tensors, placeholders bound, devices inherited.
//! - `lower` — functional control flow (`If`, `While` and their stateless
//!   forms) lowered to `Switch`/`Merge` and `Enter`/`Exit`/`NextIteration`/
//!   `LoopCond` around calls of its branch, condition and body functions.
//!
//! A call `c` with inputs `x_0 … x_{n-1}` and control inputs `^d…` becomes:
//!
//! ```text
//!   Func/c/input_control_node   NoOp(^d…)                       if c has control inputs
//!   Func/c/input/_i             Identity(x_i, ^input_control_node)   one per input tensor
//!   Func/c/inputs_ready         NoOp(^Func/c/input/_0 …)        if c has inputs
//!   c/<node>                    the body; nodes without inputs wait for
//!                               ^inputs_ready (or ^input_control_node)
//!   Func/c/output_control_node  NoOp(^control_ret…, ^stateful body nodes…,
//!                               ^nested calls with side effects…)  if there are any
//!   Func/c/output/_i            Identity(ret_i, ^output_control_node)  one per output
//!   c                           IdentityN(Func/c/output/_0 …)   (NoOp without outputs)
//! ```
//!
//! and every `c:i` read elsewhere reads `Func/c/output/_i`; `^c` and fetches of
//! `c:i` by name keep working through the node left in `c`'s place (TensorFlow's
//! "keep caller fetchable").
//!
//! The semantics this gives, and where it parts from TensorFlow's inliner:
//!
//! 1. The body runs only once all of the call's inputs and control inputs have
//!    arrived, as a call op would: input-less body nodes wait for them too (where
//!    TensorFlow's inliner gates them only on control inputs), so a call in an
//!    untaken `cond` branch runs nothing, and a call inside a loop keeps its
//!    constants in the loop's frame.
//! 2. A call's outputs are produced once its whole body has run — every
//!    `control_ret` node, every stateful body node (`is_stateful` ops, which
//!    TensorFlow's `PruneFunctionBody` never prunes) and every nested call with side
//!    effects — as a call op's outputs are. TensorFlow's inliner lets data outputs
//!    leave early and makes only `^c` wait; here reading a result is enough to make
//!    the function's side effects happen, whatever the reader. Nothing can deadlock
//!    on this: the waits point into the body, which never depends on its outputs.
//!    One corner differs: a stateful node inside a v1 `cond` of a body, in the
//!    branch not taken, is dead, and so would make the outputs dead. TensorFlow 2
//!    bodies use functional `If` instead.
//! 3. Input Identities take the device of the tensor they forward, output
//!    Identities the device of the body node they read, the auxiliary NoOps and
//!    the node left in the call's place the call's device (as TensorFlow's
//!    multi-device placer does).
//!
//! Errors never panic and name the node: a call of a function the library lacks
//! (`NotFound`), inputs or outputs that disagree with the signature, a dangling or
//! malformed body reference, an unbound placeholder, recursion (a function calling
//! itself, directly or not), nesting deeper than [`MAX_CALL_DEPTH`] (all
//! `InvalidArgument`), and a flat graph over [`MAX_INLINED_NODES`] nodes
//! (`ResourceExhausted`). Functions no node calls are never looked at.

mod body;
mod library;
mod lower;

pub(crate) use library::CALL_OPS;

use crate::AttrMap;
use std::collections::{HashMap, HashSet};

use body::{copy_body, Call, NodeError};
use library::{arg_dtypes, Library};

use super::validate::Problems;
use super::ImportOptions;
use crate::node_def::TensorId;
use crate::op_def::OpRegistry;
use crate::proto::graph as pb;
use crate::{AttrValue, Code, DType, GraphDef, NodeDef, Status};

/// How deeply calls may nest (a function calling a function … this many times).
pub const MAX_CALL_DEPTH: usize = 64;

/// The most nodes a graph may have once inlined (a few levels of functions that
/// call the next one twice grow the graph exponentially).
pub const MAX_INLINED_NODES: usize = 1 << 21;

/// Inlines every call in `g`, recursively; problems go to `problems` (the graph is
/// then incomplete and must not be used). A graph without calls is left as it is.
pub(crate) fn inline_functions(
    g: &mut GraphDef,
    library: Option<&pb::FunctionDefLibrary>,
    opts: &ImportOptions,
    registry: &OpRegistry,
    problems: &mut Problems,
) {
    let (lib, errors) = Library::new(library, opts);
    if !g.node.iter().any(|n| lib.is_call(n) || is_functional(n)) {
        return;
    }
    for e in errors {
        problems.graph(e.code(), e.message());
    }
    let mut inliner = Inliner {
        used: g.node.iter().map(|n| n.name.clone()).collect(),
        devices: g
            .node
            .iter()
            .map(|n| (n.name.clone(), n.device.clone()))
            .collect(),
        lib,
        registry,
        out: Vec::with_capacity(g.node.len()),
        sizes: HashMap::new(),
        outputs: HashMap::new(),
        stack: vec![],
        problems,
        over_budget: false,
    };
    for n in std::mem::take(&mut g.node) {
        inliner.emit(n);
    }
    inliner.read_outputs();
    g.node = inliner.out;
}

/// The state of one graph's inlining.
struct Inliner<'a, 'p> {
    lib: Library<'a>,
    registry: &'a OpRegistry,
    /// The flat graph so far.
    out: Vec<NodeDef>,
    /// Every node name taken (the graph's and those made so far).
    used: HashSet<String>,
    /// Each node's device, by name.
    devices: HashMap<String, String>,
    /// [`Library::inlined_size`]'s estimates, by function.
    sizes: HashMap<String, u64>,
    /// What readers of each inlined call's (or lowered op's) outputs read
    /// instead, and what it was, by node name.
    outputs: HashMap<String, (Vec<String>, String)>,
    /// The functions being inlined, outermost first.
    stack: Vec<String>,
    problems: &'p mut Problems,
    over_budget: bool,
}

impl Inliner<'_, '_> {
    fn push(&mut self, n: NodeDef) {
        if self.out.len() >= MAX_INLINED_NODES {
            if !self.over_budget {
                self.over_budget = true;
                self.problems.graph(Code::ResourceExhausted, too_big());
            }
            return;
        }
        self.used.insert(n.name.clone());
        self.devices.insert(n.name.clone(), n.device.clone());
        self.out.push(n);
    }

    /// Adds `n` to the flat graph: inlined if it is a call, lowered if it is
    /// functional control flow, as it is otherwise. Whether it has side effects
    /// (a stateful op, or a call or lowered op whose functions have some), or
    /// `None` after recording a problem.
    fn emit(&mut self, n: NodeDef) -> Option<bool> {
        if self.lib.is_call(&n) {
            return self.expand(n);
        }
        if is_functional(&n) {
            return self.lower(n);
        }
        let stateful = self.registry.lookup(&n.op).is_ok_and(|d| d.is_stateful);
        self.push(n);
        Some(stateful)
    }

    /// Lowers functional op `n` (see `lower`) and inlines the calls it makes.
    fn lower(&mut self, n: NodeDef) -> Option<bool> {
        let lib = &self.lib;
        let used = &mut self.used;
        let mut fresh = |base: String| fresh_name(used, base);
        let lowered = match lower::lower(&n, &|f| lib.signature(f).is_some(), &mut fresh) {
            Ok(l) => l,
            Err(e) => {
                self.fail(&n.name, &n.op, &e);
                return None;
            }
        };
        let mut side_effects = false;
        for m in lowered.nodes {
            side_effects |= self.emit(m)?;
        }
        self.push(lowered.stand_in);
        let what = format!("the {} '{}'", n.op, n.name);
        self.outputs.insert(n.name, (lowered.outputs, what));
        Some(side_effects)
    }

    /// A node name no node has, `base` if free.
    fn fresh(&mut self, base: String) -> String {
        fresh_name(&mut self.used, base)
    }

    fn fail(&mut self, name: &str, op: &str, e: &Status) {
        let mut what = e.message().to_owned();
        if !self.stack.is_empty() {
            what.push_str(&format!(" (inlining {})", self.stack.join(" -> ")));
        }
        self.problems.node(name, op, e.code(), what);
    }

    /// Replaces call `call` by its function's body; whether the body has side
    /// effects, or `None` after recording a problem.
    fn expand(&mut self, call: NodeDef) -> Option<bool> {
        if self.over_budget {
            return None;
        }
        let target = match self.lib.target(&call) {
            Ok(t) => t,
            Err(e) => {
                self.fail(&call.name, &call.op, &e);
                return None;
            }
        };
        if self.stack.is_empty() {
            let size = self.lib.inlined_size(&target.name, &mut self.sizes);
            if size.saturating_add(self.out.len() as u64) > MAX_INLINED_NODES as u64 {
                self.over_budget = true;
                let e = Status::resource_exhausted(format!("{} (about {size})", too_big()));
                self.fail(&call.name, &call.op, &e);
                return None;
            }
        }
        if let Some(i) = self.stack.iter().position(|f| *f == target.name) {
            let mut chain = self.stack[i..].to_vec();
            chain.push(target.name.clone());
            let e = Status::invalid_argument(format!(
                "function '{}' calls itself ({}); recursive functions cannot be inlined",
                target.name,
                chain.join(" -> ")
            ));
            self.fail(&call.name, &call.op, &e);
            return None;
        }
        if self.stack.len() >= MAX_CALL_DEPTH {
            let e = Status::invalid_argument(format!("calls nest more than {MAX_CALL_DEPTH} deep"));
            self.fail(&call.name, &call.op, &e);
            return None;
        }
        let f = match self.lib.get(&target.name) {
            Ok(f) => f,
            Err(e) => {
                self.fail(&call.name, &call.op, &e);
                return None;
            }
        };
        let mut attrs = target.attrs;
        for (k, v) in &f.attr_defaults {
            if !attrs.contains_key(k) {
                attrs.insert(k.clone(), v.clone());
            }
        }
        let types = arg_dtypes(&f.sig.input_arg, &attrs)
            .and_then(|i| Ok((i, arg_dtypes(&f.sig.output_arg, &attrs)?)));
        let (in_types, out_types) = match types {
            Ok((i, o)) => (i, o),
            Err(e) => {
                let e = Status::invalid_argument(format!(
                    "function '{}': {}",
                    target.name,
                    e.message()
                ));
                self.fail(&call.name, &call.op, &e);
                return None;
            }
        };
        let flat_in: Vec<DType> = in_types.iter().flatten().copied().collect();
        let flat_out: Vec<DType> = out_types.iter().flatten().copied().collect();
        if let Err(e) = check_call(&call, &target.name, &flat_in, &flat_out, &target.declared) {
            self.fail(&call.name, &call.op, &e);
            return None;
        }
        self.stack.push(target.name.clone());
        let r = self.expand_checked(call, &f, &attrs, &in_types, &flat_out);
        self.stack.pop();
        r
    }

    fn expand_checked(
        &mut self,
        call: NodeDef,
        f: &library::Function,
        attrs: &AttrMap,
        in_types: &[Vec<DType>],
        out_types: &[DType],
    ) -> Option<bool> {
        let name = call.name.clone();
        let data: Vec<String> = call.data_inputs().map(str::to_owned).collect();
        let controls: Vec<String> = call.control_inputs().map(str::to_owned).collect();
        let noop = |name: String, deps: &[String]| NodeDef {
            name,
            op: "NoOp".into(),
            input: deps.iter().map(|d| format!("^{d}")).collect(),
            device: call.device.clone(),
            attr: AttrMap::new(),
        };
        let identity = |name: String, input: String, t: DType, dep: Option<&String>, device| {
            let mut input = vec![input];
            input.extend(dep.map(|d| format!("^{d}")));
            NodeDef {
                name,
                op: "Identity".into(),
                input,
                device,
                attr: AttrMap::from([("T".to_owned(), AttrValue::Type(t))]),
            }
        };
        // Inputs.
        let input_control =
            (!controls.is_empty()).then(|| self.fresh(format!("Func/{name}/input_control_node")));
        if let Some(ic) = &input_control {
            self.push(noop(ic.clone(), &controls));
        }
        let mut args = Vec::with_capacity(in_types.len());
        let mut identities = Vec::with_capacity(data.len());
        let mut flat = data.iter();
        for (a, types) in f.sig.input_arg.iter().zip(in_types) {
            let mut tensors = Vec::with_capacity(types.len());
            for &t in types {
                let Some(x) = flat.next() else {
                    return None; // check_call matched the counts
                };
                let id = self.fresh(format!("Func/{name}/input/_{}", identities.len()));
                let device = match TensorId::parse(x) {
                    Ok(src) => self.devices.get(src.node).cloned(),
                    Err(_) => None,
                }
                .unwrap_or_else(|| call.device.clone());
                self.push(identity(
                    id.clone(),
                    x.clone(),
                    t,
                    input_control.as_ref(),
                    device,
                ));
                tensors.push(id.clone());
                identities.push(id);
            }
            args.push((a.name.clone(), tensors));
        }
        let anchor = if identities.is_empty() {
            input_control.clone()
        } else {
            let r = self.fresh(format!("Func/{name}/inputs_ready"));
            self.push(noop(r.clone(), &identities));
            Some(r)
        };
        // The body, under `<caller>/` unless a node has a name it would make
        // (then `<caller>_1/` …); its names are taken at once, before nested calls
        // make theirs.
        let mut k = 0;
        let prefix = loop {
            let p = match k {
                0 => format!("{name}/"),
                k => format!("{name}_{k}/"),
            };
            if f.body
                .iter()
                .all(|n| !self.used.contains(&format!("{p}{}", n.name)))
            {
                break p;
            }
            k += 1;
        };
        for n in &f.body {
            self.used.insert(format!("{prefix}{}", n.name));
        }
        let c = Call {
            name: &name,
            prefix: &prefix,
            device: &call.device,
            attrs,
            args,
            anchor: anchor.as_deref(),
        };
        let lib = &self.lib;
        let copy = match copy_body(f, &c, self.registry, &|op| lib.signature(op)) {
            Ok(c) => c,
            Err(NodeError { node, op, status }) => {
                let op = if op.is_empty() { call.op.clone() } else { op };
                self.fail(&node, &op, &status);
                return None;
            }
        };
        let mut side_effects: Vec<String> = copy.control_rets;
        for n in copy.nodes {
            let node_name = n.name.clone();
            if self.emit(n)? {
                side_effects.push(node_name);
            }
        }
        // Outputs.
        let mut seen = HashSet::new();
        side_effects.retain(|s| seen.insert(s.clone()));
        let output_control = (!side_effects.is_empty())
            .then(|| self.fresh(format!("Func/{name}/output_control_node")));
        if let Some(oc) = &output_control {
            self.push(noop(oc.clone(), &side_effects));
        }
        let mut outputs = Vec::with_capacity(out_types.len());
        for (i, (r, &t)) in copy.rets.into_iter().zip(out_types).enumerate() {
            let id = self.fresh(format!("Func/{name}/output/_{i}"));
            let device = match TensorId::parse(&r) {
                Ok(src) => self.devices.get(src.node).cloned(),
                Err(_) => None,
            }
            .unwrap_or_default();
            self.push(identity(id.clone(), r, t, output_control.as_ref(), device));
            outputs.push(id);
        }
        // The node left in the call's place.
        let has_side_effects = output_control.is_some();
        let stand_in = if outputs.is_empty() {
            let deps: Vec<String> = output_control.or(anchor).into_iter().collect();
            noop(name.clone(), &deps)
        } else {
            NodeDef {
                name: name.clone(),
                op: "IdentityN".into(),
                input: outputs.clone(),
                device: call.device.clone(),
                attr: AttrMap::from([("T".to_owned(), AttrValue::from(out_types))]),
            }
        };
        self.push(stand_in);
        let what = format!(
            "the call to function '{}'",
            self.stack.last().map(String::as_str).unwrap_or_default()
        );
        self.outputs.insert(name, (outputs, what));
        Some(has_side_effects)
    }

    /// Points every read of an inlined call's output `c:i` at `Func/c/output/_i`.
    fn read_outputs(&mut self) {
        if self.outputs.is_empty() {
            return;
        }
        let mut bad = vec![];
        for n in &mut self.out {
            for s in &mut n.input {
                let Ok(t) = TensorId::parse(s) else {
                    continue;
                };
                if t.is_control() {
                    continue;
                }
                let Some((outs, f)) = self.outputs.get(t.node) else {
                    continue;
                };
                match usize::try_from(t.port).ok().and_then(|p| outs.get(p)) {
                    Some(o) => *s = o.clone(),
                    None => bad.push((
                        n.name.clone(),
                        n.op.clone(),
                        format!(
                            "input '{s}' reads output {} of {f}, which has {} output(s)",
                            t.port,
                            outs.len()
                        ),
                    )),
                }
            }
        }
        for (node, op, what) in bad {
            self.problems.node(&node, &op, Code::InvalidArgument, what);
        }
    }
}

/// A name not in `used`, `base` if free, else `base_1`, `base_2` …; taken.
fn fresh_name(used: &mut HashSet<String>, base: String) -> String {
    let mut name = base.clone();
    let mut i = 0;
    while used.contains(&name) {
        i += 1;
        name = format!("{base}_{i}");
    }
    used.insert(name.clone());
    name
}

/// True when `n` is functional control flow to lower.
fn is_functional(n: &NodeDef) -> bool {
    lower::FUNCTIONAL_OPS.contains(&n.op.as_str())
}

fn too_big() -> String {
    format!("inlining the graph's function calls makes more than {MAX_INLINED_NODES} nodes")
}

/// Checks a call's inputs (and a call op's `Tin`/`Tout`) against the signature.
fn check_call(
    call: &NodeDef,
    fname: &str,
    ins: &[DType],
    outs: &[DType],
    declared: &Option<(Vec<DType>, Vec<DType>)>,
) -> Result<(), Status> {
    let n = call.data_inputs().count();
    if n != ins.len() {
        return Err(Status::invalid_argument(format!(
            "calls function '{fname}' with {n} input(s), but its signature takes {}",
            ins.len()
        )));
    }
    if call.input.iter().skip(n).any(|i| !i.starts_with('^')) {
        return Err(Status::invalid_argument(
            "control inputs must follow all data inputs",
        ));
    }
    let Some((tin, tout)) = declared else {
        return Ok(());
    };
    let names = |t: &[DType]| {
        t.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if tin != ins {
        return Err(Status::invalid_argument(format!(
            "Tin is [{}], but function '{fname}' takes [{}]",
            names(tin),
            names(ins)
        )));
    }
    if tout != outs {
        return Err(Status::invalid_argument(format!(
            "Tout is [{}], but function '{fname}' returns [{}]",
            names(tout),
            names(outs)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
