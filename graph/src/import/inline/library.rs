//! The graph's function library as the inliner reads it: which nodes are calls and
//! of what ([`CallTarget`]), each function's body converted to actorflow's node
//! form on first use ([`Function`]), and how an argument list expands to tensors
//! once the call's attributes are known ([`arg_dtypes`], TensorFlow's
//! `ArgNumType`).
//!
//! A function is converted only when something calls it, so functions nobody calls
//! (gradients, a SavedModel's restore functions) cost nothing and cannot fail the
//! import. `GradientDef`s are not read.

use crate::AttrMap;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use crate::import::attr::attr_from_proto;
use crate::import::convert::node_from_proto;
use crate::import::tensor::dtype_from_proto;
use crate::import::ImportOptions;
use crate::op_def::MAX_ARITY;
use crate::proto::graph as pb;
use crate::{AttrValue, DType, NodeDef, Result, Status};

/// The ops that call the function named by their `f` attribute (TensorFlow 2's
/// `tf.function` calls).
pub(crate) const CALL_OPS: [&str; 2] = ["PartitionedCall", "StatefulPartitionedCall"];

/// A library function ready to inline.
pub(super) struct Function {
    /// The signature: name, arguments, attributes.
    pub sig: pb::OpDef,
    /// The defaults of the signature's attributes, converted.
    pub attr_defaults: AttrMap,
    /// The body: attributes converted (placeholders unbound), inputs in the
    /// function form (`arg`, `node:out:i`, `^node`), devices cleared when the
    /// import options say so.
    pub body: Vec<NodeDef>,
    /// Output argument name → the body tensor it returns.
    pub ret: BTreeMap<String, String>,
    /// Control output name → the body node that must run.
    pub control_ret: BTreeMap<String, String>,
}

/// What a call node calls.
pub(super) struct CallTarget {
    /// The function's name.
    pub name: String,
    /// The attributes the function is instantiated with: `f`'s attributes for a
    /// call op, the node's own for a node whose op is the function.
    pub attrs: AttrMap,
    /// For a call op, its `Tin` and `Tout` (what it says the signature is).
    pub declared: Option<(Vec<DType>, Vec<DType>)>,
}

/// The library, by function name.
pub(super) struct Library<'a> {
    defs: HashMap<&'a str, &'a pb::FunctionDef>,
    converted: HashMap<&'a str, Rc<Function>>,
    opts: &'a ImportOptions,
}

impl<'a> Library<'a> {
    /// Indexes `library`; a name defined twice, differently, is an error (as in
    /// TensorFlow's `FunctionLibraryDefinition`), the same definition twice is not.
    pub fn new(
        library: Option<&'a pb::FunctionDefLibrary>,
        opts: &'a ImportOptions,
    ) -> (Library<'a>, Vec<Status>) {
        let mut defs: HashMap<&str, &pb::FunctionDef> = HashMap::new();
        let mut errors = vec![];
        for f in library.map(|l| l.function.as_slice()).unwrap_or_default() {
            let Some(name) = f.signature.as_ref().map(|s| s.name.as_str()) else {
                continue;
            };
            match defs.get(name) {
                Some(old) if *old != f => errors.push(Status::invalid_argument(format!(
                    "the graph's library defines function '{name}' twice, differently"
                ))),
                Some(_) => {}
                None => {
                    defs.insert(name, f);
                }
            }
        }
        let lib = Library {
            defs,
            converted: HashMap::new(),
            opts,
        };
        (lib, errors)
    }

    /// True when `n` calls a function: its op is a call op, or a function of the
    /// library (the library comes first, as in TensorFlow).
    pub fn is_call(&self, n: &NodeDef) -> bool {
        CALL_OPS.contains(&n.op.as_str()) || self.defs.contains_key(n.op.as_str())
    }

    /// The signature of library function `name`.
    pub fn signature(&self, name: &str) -> Option<&'a pb::OpDef> {
        self.defs.get(name).and_then(|f| f.signature.as_ref())
    }

    /// What call node `n` calls; `NotFound` when the function is not in the library.
    pub fn target(&self, n: &NodeDef) -> Result<CallTarget> {
        let t = if CALL_OPS.contains(&n.op.as_str()) {
            let f = match n.attr.get("f") {
                Some(AttrValue::Func(f)) => f,
                Some(v) => {
                    return Err(Status::invalid_argument(format!(
                        "attr 'f' has kind {}, expected func",
                        v.kind()
                    )))
                }
                None => return Err(Status::invalid_argument("missing attr 'f'")),
            };
            let types = |k: &str| match n.attr.get(k) {
                Some(AttrValue::List(l)) => Ok(l.type_.clone()),
                None => Ok(vec![]),
                Some(v) => Err(Status::invalid_argument(format!(
                    "attr '{k}' has kind {}, expected list(type)",
                    v.kind()
                ))),
            };
            CallTarget {
                name: f.name.clone(),
                attrs: f.attr.clone(),
                declared: Some((types("Tin")?, types("Tout")?)),
            }
        } else {
            CallTarget {
                name: n.op.clone(),
                attrs: n.attr.clone(),
                declared: None,
            }
        };
        if !self.defs.contains_key(t.name.as_str()) {
            return Err(Status::not_found(format!(
                "calls function '{}', which the graph's library does not define",
                t.name
            )));
        }
        Ok(t)
    }

    /// An estimate of how many nodes inlining one call of `name` makes: its body,
    /// an Identity per argument and result, the auxiliary NoOps and the node left
    /// in the call's place, and the same for every call it makes, functional
    /// control flow's included (saturating; a cycle counts once, expanding it is
    /// an error anyway). Computed from the
    /// protos, so that a graph that would explode is refused before it is built.
    pub fn inlined_size(&self, name: &str, memo: &mut HashMap<String, u64>) -> u64 {
        if let Some(&n) = memo.get(name) {
            return n;
        }
        let Some(def) = self.defs.get(name) else {
            return 0;
        };
        memo.insert(name.to_owned(), 0); // a cycle counts as nothing
        let sig = def.signature.as_ref();
        let args = sig.map_or(0, |s| s.input_arg.len() + s.output_arg.len());
        let mut n = (def.node_def.len() + args + 4) as u64;
        for node in &def.node_def {
            if self.defs.contains_key(node.op.as_str()) {
                n = n.saturating_add(self.inlined_size(&node.op, memo));
                continue;
            }
            // Call ops and functional control flow: every function an attribute
            // names (`f`; `then_branch`, `else_branch`; `cond`, `body`), and the
            // lowering's own nodes.
            for a in node.attr.values() {
                if let Some(crate::proto::attr::AttrValueKind::Func(f)) = &a.value {
                    let lowering = 4 * node.input.len() as u64 + 8;
                    n = n
                        .saturating_add(self.inlined_size(&f.name, memo))
                        .saturating_add(lowering);
                }
            }
        }
        memo.insert(name.to_owned(), n);
        n
    }

    /// Function `name`, converted on first use. Every attribute that fails to
    /// convert is listed in the error.
    pub fn get(&mut self, name: &str) -> Result<Rc<Function>> {
        if let Some(f) = self.converted.get(name) {
            return Ok(f.clone());
        }
        let Some((&key, &def)) = self.defs.get_key_value(name) else {
            return Err(Status::not_found(format!(
                "the graph's library does not define function '{name}'"
            )));
        };
        let f = Rc::new(convert(def, self.opts)?);
        self.converted.insert(key, f.clone());
        Ok(f)
    }
}

fn convert(def: &pb::FunctionDef, opts: &ImportOptions) -> Result<Function> {
    let sig = def.signature.clone().unwrap_or_default();
    let mut bad = vec![];
    let mut attr_defaults = AttrMap::new();
    for a in &sig.attr {
        if let Some(d) = &a.default_value {
            match attr_from_proto(d, opts.max_tensor_bytes) {
                Ok(v) => {
                    attr_defaults.insert(a.name.clone(), v);
                }
                Err(e) => bad.push(format!("default of attr '{}': {}", a.name, e.message())),
            }
        }
    }
    let body = def
        .node_def
        .iter()
        .map(|n| {
            node_from_proto(n, opts, |k, e| {
                bad.push(format!(
                    "node '{}' (op {}): attr '{k}': {}",
                    n.name,
                    n.op,
                    e.message()
                ))
            })
        })
        .collect();
    if !bad.is_empty() {
        return Err(Status::invalid_argument(format!(
            "function '{}' does not convert: {}",
            sig.name,
            bad.join("; ")
        )));
    }
    Ok(Function {
        sig,
        attr_defaults,
        body,
        ret: def.ret.clone(),
        control_ret: def.control_ret.clone(),
    })
}

/// The dtypes each of `args` stands for once `attrs` are bound: one for a plain
/// argument, `number_attr` of one type, or one per entry of `type_list_attr`
/// (TensorFlow's `ArgNumType`). An attribute missing or of the wrong kind, or a
/// count over [`MAX_ARITY`], is `InvalidArgument`.
pub(super) fn arg_dtypes(args: &[pb::ArgDef], attrs: &AttrMap) -> Result<Vec<Vec<DType>>> {
    let mut total = 0usize;
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        let bad = |what: String| Status::invalid_argument(format!("argument '{}': {what}", a.name));
        let types = if !a.type_list_attr.is_empty() {
            match attrs.get(&a.type_list_attr) {
                Some(AttrValue::List(l)) => l.type_.clone(),
                Some(v) => {
                    return Err(bad(format!(
                        "attr '{}' has kind {}, expected list(type)",
                        a.type_list_attr,
                        v.kind()
                    )))
                }
                None => return Err(bad(format!("attr '{}' is not set", a.type_list_attr))),
            }
        } else {
            let n = if a.number_attr.is_empty() {
                1
            } else {
                match attrs.get(&a.number_attr) {
                    Some(AttrValue::I(n)) => match usize::try_from(*n) {
                        Ok(n) if n <= MAX_ARITY => n,
                        _ => return Err(bad(format!("attr '{}' is {n}", a.number_attr))),
                    },
                    Some(v) => {
                        return Err(bad(format!(
                            "attr '{}' has kind {}, expected int",
                            a.number_attr,
                            v.kind()
                        )))
                    }
                    None => return Err(bad(format!("attr '{}' is not set", a.number_attr))),
                }
            };
            let t = if a.r#type != 0 {
                dtype_from_proto(a.r#type).map_err(|e| bad(e.message().to_owned()))?
            } else if a.type_attr.is_empty() {
                return Err(bad("no type".to_owned()));
            } else {
                match attrs.get(&a.type_attr) {
                    Some(AttrValue::Type(t)) => *t,
                    Some(v) => {
                        return Err(bad(format!(
                            "attr '{}' has kind {}, expected type",
                            a.type_attr,
                            v.kind()
                        )))
                    }
                    None => return Err(bad(format!("attr '{}' is not set", a.type_attr))),
                }
            };
            vec![t; n]
        };
        total = total.saturating_add(types.len());
        if total > MAX_ARITY {
            return Err(bad(format!(
                "the arguments stand for more than {MAX_ARITY} tensors"
            )));
        }
        out.push(types);
    }
    Ok(out)
}
