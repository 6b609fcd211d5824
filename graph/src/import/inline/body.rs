//! One call's copy of a function body: TensorFlow's `InstantiateFunction` and the
//! renaming half of `InlineFunctionBody`. Each body node becomes `<caller>/<node>`
//! (`<caller>_1/<node>` … should that name be taken)
//! with its attribute placeholders bound from the call's attributes, its device
//! its own (the caller's filling what it leaves unset) or else the caller's, its
//! `_class` colocations and `Enter` frame names renamed with it, and its inputs
//! rewritten from the function form to graph tensors:
//!
//! - `arg` is every tensor of argument `arg` (its input Identities), `arg:i` the
//!   i-th;
//! - `node:out` is every tensor of output argument `out` of body node `node`,
//!   `node:out:i` the i-th; the flat output index comes from the node's op: the
//!   registered [`OpDef`](crate::op_def::OpDef)'s output arguments with the
//!   node's attributes (defaults filled), a library function's signature, or a
//!   call op's single list output `output`;
//! - `^node` (or `^arg`) is a control input.
//!
//! A reference to anything else is an error naming the body node.

use crate::AttrMap;
use std::collections::HashMap;
use std::ops::Range;

use super::library::{arg_dtypes, Function, CALL_OPS};
use crate::op_def::OpRegistry;
use crate::proto::graph as pb;
use crate::{AttrValue, DeviceName, NodeDef, Result, Status};

/// What a body copy needs to know about its call.
pub(super) struct Call<'a> {
    /// The call node's name.
    pub name: &'a str,
    /// What every body node's name is prefixed with (`<caller>/`).
    pub prefix: &'a str,
    /// The call node's device.
    pub device: &'a str,
    /// The attributes placeholders are bound from.
    pub attrs: &'a AttrMap,
    /// Each input argument's name and the graph tensors it stands for.
    pub args: Vec<(String, Vec<String>)>,
    /// The node every input-less body node waits for (nested calls included),
    /// when the call has inputs.
    pub anchor: Option<&'a str>,
}

/// A problem with one body node (its inlined name and op).
pub(super) struct NodeError {
    pub node: String,
    pub op: String,
    pub status: Status,
}

/// A body copied for one call, in graph form.
pub(super) struct Copy {
    /// The body nodes, renamed.
    pub nodes: Vec<NodeDef>,
    /// The graph tensor of each output, in signature order, flattened.
    pub rets: Vec<String>,
    /// The nodes the function's `control_ret` names, renamed.
    pub control_rets: Vec<String>,
}

/// Where a body node's output arguments start and end among its outputs.
type Layout = Vec<(String, Range<usize>)>;

struct Scope<'a> {
    call: &'a Call<'a>,
    fname: &'a str,
    prefix: String,
    /// Body node name → its output layout (or why it has none).
    nodes: HashMap<&'a str, Result<Layout>>,
}

/// Copies `f`'s body for `call`; `signature` finds other library functions'
/// signatures (for `node:out:i` references to nested calls).
pub(super) fn copy_body<'a>(
    f: &'a Function,
    call: &'a Call<'a>,
    registry: &OpRegistry,
    signature: &dyn Fn(&str) -> Option<&'a pb::OpDef>,
) -> std::result::Result<Copy, NodeError> {
    let prefix = call.prefix.to_owned();
    let fname = f.sig.name.as_str();
    let err = |n: &NodeDef, status: Status| NodeError {
        node: format!("{prefix}{}", n.name),
        op: n.op.clone(),
        status,
    };
    // Bind placeholders first: output layouts depend on the bound attributes.
    let mut bound = Vec::with_capacity(f.body.len());
    for n in &f.body {
        let mut attr = AttrMap::new();
        for (k, v) in &n.attr {
            let v = bind(v, call.attrs).map_err(|p| {
                err(
                    n,
                    Status::invalid_argument(format!(
                        "attr '{k}' is placeholder '{p}', which the call to '{fname}' does not set"
                    )),
                )
            })?;
            attr.insert(k.clone(), v);
        }
        bound.push(attr);
    }
    let mut scope = Scope {
        call,
        fname,
        prefix: prefix.clone(),
        nodes: HashMap::with_capacity(f.body.len()),
    };
    for (n, attr) in f.body.iter().zip(&bound) {
        if scope.nodes.contains_key(n.name.as_str()) {
            return Err(err(
                n,
                Status::invalid_argument(format!("function '{fname}' has two nodes of this name")),
            ));
        }
        let layout = output_layout(&n.op, attr, registry, signature);
        scope.nodes.insert(&n.name, layout);
    }
    let caller_device = DeviceName::parse(call.device).ok();
    let mut nodes = Vec::with_capacity(f.body.len());
    for (n, attr) in f.body.iter().zip(bound) {
        let mut data = vec![];
        let mut control = vec![];
        for s in &n.input {
            let r = match s.strip_prefix('^') {
                Some(c) => scope.control(c).map(|v| control.extend(v)),
                None if !control.is_empty() => Err(Status::invalid_argument(format!(
                    "data input '{s}' follows a control input"
                ))),
                None => scope.data(s).map(|v| data.extend(v)),
            };
            r.map_err(|e| err(n, e))?;
        }
        if let (Some(a), true) = (call.anchor, data.is_empty() && control.is_empty()) {
            control.push(a.to_owned());
        }
        let mut input = data;
        input.extend(control.into_iter().map(|c| format!("^{c}")));
        let mut node = NodeDef {
            name: format!("{prefix}{}", n.name),
            op: n.op.clone(),
            input,
            device: device(&n.device, call.device, caller_device.as_ref()),
            attr,
        };
        scope.rename_attrs(&mut node);
        nodes.push(node);
    }
    let ret_err = |status: Status| NodeError {
        node: call.name.to_owned(),
        op: String::new(),
        status,
    };
    let out_types = arg_dtypes(&f.sig.output_arg, call.attrs).map_err(ret_err)?;
    let mut rets = vec![];
    for (a, types) in f.sig.output_arg.iter().zip(&out_types) {
        let Some(r) = f.ret.get(&a.name) else {
            return Err(ret_err(Status::invalid_argument(format!(
                "function '{fname}' returns nothing for its output '{}'",
                a.name
            ))));
        };
        let tensors = scope.data(r).map_err(|e| {
            ret_err(Status::invalid_argument(format!(
                "output '{}' of function '{fname}': {}",
                a.name,
                e.message()
            )))
        })?;
        if tensors.len() != types.len() {
            return Err(ret_err(Status::invalid_argument(format!(
                "output '{}' of function '{fname}' returns '{r}', {} tensor(s), but its signature says {}",
                a.name,
                tensors.len(),
                types.len()
            ))));
        }
        rets.extend(tensors);
    }
    let mut control_rets = vec![];
    for (k, v) in &f.control_ret {
        if !scope.nodes.contains_key(v.as_str()) {
            return Err(ret_err(Status::invalid_argument(format!(
                "control output '{k}' of function '{fname}' names '{v}', which is not a node of its body"
            ))));
        }
        control_rets.push(format!("{prefix}{v}"));
    }
    Ok(Copy {
        nodes,
        rets,
        control_rets,
    })
}

/// `v` with every placeholder replaced by the attribute it names (in nested
/// function attributes too); the first unbound placeholder's name otherwise.
fn bind(v: &AttrValue, attrs: &AttrMap) -> std::result::Result<AttrValue, String> {
    let bind_func = |f: &crate::NameAttrList| -> std::result::Result<crate::NameAttrList, String> {
        let mut attr = AttrMap::new();
        for (k, v) in &f.attr {
            attr.insert(k.clone(), bind(v, attrs)?);
        }
        Ok(crate::NameAttrList {
            name: f.name.clone(),
            attr,
        })
    };
    Ok(match v {
        AttrValue::Placeholder(p) => match attrs.get(p) {
            Some(b) => b.clone(),
            None => return Err(p.clone()),
        },
        AttrValue::Func(f) => AttrValue::Func(bind_func(f)?),
        AttrValue::List(l) if !l.func.is_empty() => {
            let mut l = l.clone();
            l.func = l
                .func
                .iter()
                .map(bind_func)
                .collect::<std::result::Result<_, _>>()?;
            AttrValue::List(l)
        }
        other => other.clone(),
    })
}

/// The device of a body node: its own, with the fields it leaves unset taken from
/// the caller's (TensorFlow's multi-device placement of inlined bodies), or the
/// caller's when it names none.
fn device(own: &str, caller: &str, caller_parsed: Option<&DeviceName>) -> String {
    if own.is_empty() {
        return caller.to_owned();
    }
    match (caller_parsed, DeviceName::parse(own)) {
        (Some(c), Ok(o)) if !caller.is_empty() => c.overridden_by(&o).to_string(),
        _ => own.to_owned(),
    }
}

/// The output arguments of a body node of op `op`, where its flat outputs start
/// and end.
fn output_layout<'a>(
    op: &str,
    attrs: &AttrMap,
    registry: &OpRegistry,
    signature: &dyn Fn(&str) -> Option<&'a pb::OpDef>,
) -> Result<Layout> {
    let from_counts = |names: Vec<String>, counts: Vec<usize>| {
        let mut start = 0;
        names
            .into_iter()
            .zip(counts)
            .map(|(n, c)| {
                let r = start..start + c;
                start += c;
                (n, r)
            })
            .collect()
    };
    if let Some(sig) = signature(op) {
        let types = arg_dtypes(&sig.output_arg, attrs)?;
        let names = sig.output_arg.iter().map(|a| a.name.clone()).collect();
        return Ok(from_counts(names, types.iter().map(Vec::len).collect()));
    }
    if CALL_OPS.contains(&op) {
        let n = match attrs.get("Tout") {
            Some(AttrValue::List(l)) => l.type_.len(),
            _ => 0,
        };
        return Ok(vec![("output".to_owned(), 0..n)]);
    }
    let def = registry
        .lookup(op)
        .map_err(|_| Status::not_found(format!("op '{op}' is not registered in actorflow")))?;
    let mut full = attrs.clone();
    for a in &def.attrs {
        if let (false, Some(d)) = (full.contains_key(&a.name), &a.default) {
            full.insert(a.name.clone(), d.clone());
        }
    }
    def.outputs
        .iter()
        .map(|a| Ok((a.name.clone(), def.output_range(&full, &a.name)?)))
        .collect()
}

impl Scope<'_> {
    fn arg(&self, name: &str) -> Option<&[String]> {
        self.call
            .args
            .iter()
            .find(|(a, _)| a == name)
            .map(|(_, t)| t.as_slice())
    }

    fn tensor(&self, node: &str, port: usize) -> String {
        if port == 0 {
            format!("{}{node}", self.prefix)
        } else {
            format!("{}{node}:{port}", self.prefix)
        }
    }

    /// The graph tensors a data reference stands for.
    fn data(&self, r: &str) -> Result<Vec<String>> {
        let parts: Vec<&str> = r.split(':').collect();
        let index = |s: &str| {
            s.parse::<usize>().map_err(|_| {
                Status::invalid_argument(format!("input '{r}': '{s}' is not an index"))
            })
        };
        let pick = |all: &[String], i: usize| {
            all.get(i).cloned().map(|t| vec![t]).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "input '{r}' reads tensor {i} of a list of {}",
                    all.len()
                ))
            })
        };
        match parts.as_slice() {
            [a] => match self.arg(a) {
                Some(t) => Ok(t.to_vec()),
                None if self.nodes.contains_key(a) => Err(Status::invalid_argument(format!(
                    "input '{r}' names a body node of '{}' without saying which output: \
                     write 'node:output_arg:index'",
                    self.fname
                ))),
                None => Err(self.dangling(r)),
            },
            [a, i] if self.arg(a).is_some() => {
                let all = self.arg(a).unwrap_or_default();
                pick(all, index(i)?)
            }
            [node, out] => {
                let range = self.output_arg(r, node, out)?;
                Ok(range.map(|p| self.tensor(node, p)).collect())
            }
            [node, out, i] => {
                let range = self.output_arg(r, node, out)?;
                let i = index(i)?;
                if i >= range.len() {
                    return Err(Status::invalid_argument(format!(
                        "input '{r}' reads tensor {i} of output '{out}', which has {}",
                        range.len()
                    )));
                }
                Ok(vec![self.tensor(node, range.start + i)])
            }
            _ => Err(Status::invalid_argument(format!("malformed input '{r}'"))),
        }
    }

    fn output_arg(&self, r: &str, node: &str, out: &str) -> Result<Range<usize>> {
        let layout = match self.nodes.get(node) {
            Some(Ok(l)) => l,
            Some(Err(e)) => {
                return Err(Status::new(
                    e.code(),
                    format!("input '{r}': node '{node}': {}", e.message()),
                ))
            }
            None => return Err(self.dangling(r)),
        };
        layout
            .iter()
            .find(|(n, _)| n == out)
            .map(|(_, range)| range.clone())
            .ok_or_else(|| {
                let names: Vec<&str> = layout.iter().map(|(n, _)| n.as_str()).collect();
                Status::invalid_argument(format!(
                    "input '{r}': node '{node}' has no output argument '{out}' (it has: {})",
                    names.join(", ")
                ))
            })
    }

    /// The graph nodes a control reference stands for.
    fn control(&self, name: &str) -> Result<Vec<String>> {
        if let Some(t) = self.arg(name) {
            return Ok(t.iter().map(|t| node_of(t).to_owned()).collect());
        }
        if self.nodes.contains_key(name) {
            return Ok(vec![format!("{}{name}", self.prefix)]);
        }
        Err(self.dangling(&format!("^{name}")))
    }

    fn dangling(&self, r: &str) -> Status {
        Status::invalid_argument(format!(
            "input '{r}' names no argument or node of function '{}'",
            self.fname
        ))
    }

    /// Renames what a body node's attributes say about other body nodes: `_class`
    /// colocations (`loc:@node`, `loc:@arg`) and an `Enter`'s frame name (two
    /// copies of one loop must not share a frame).
    fn rename_attrs(&self, n: &mut NodeDef) {
        if let Some(AttrValue::List(l)) = n.attr.get_mut("_class") {
            for s in &mut l.s {
                let Some(target) = s.strip_prefix("loc:@") else {
                    continue;
                };
                let renamed = match self.arg(target) {
                    Some(t) => t.first().map(|t| node_of(t).to_owned()),
                    None if self.nodes.contains_key(target) => {
                        Some(format!("{}{target}", self.prefix))
                    }
                    None => None,
                };
                if let Some(r) = renamed {
                    *s = format!("loc:@{r}");
                }
            }
        }
        if n.op == "Enter" || n.op == "RefEnter" {
            if let Some(AttrValue::S(frame)) = n.attr.get_mut("frame_name") {
                *frame = format!("{}{frame}", self.prefix);
            }
        }
    }
}

/// The node of a graph tensor name (`node` of `node:3`).
fn node_of(t: &str) -> &str {
    match t.rsplit_once(':') {
        Some((n, p)) if p.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => t,
    }
}
