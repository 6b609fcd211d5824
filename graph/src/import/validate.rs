//! Whole-graph checks of an imported graph, reported all at once: `Problems`
//! collects every problem with the node it concerns, and `validate` finds them —
//! empty and duplicate node names, nodes calling or referring to functions of the
//! graph's library that inlining left (a `func` attribute of an op that is not a
//! call: actorflow runs no function at run time), ops the registry does not
//! know, attributes the op does not define or of the wrong kind, what the op's own
//! validation finds (missing required attributes, disallowed types, input counts),
//! malformed and dangling inputs, inputs reading an output the producer lacks, and
//! edges whose producer's type cannot feed the consumer's input, and attributes out
//! of the range TensorFlow accepts (minimums, shapes of more than 254 dimensions or
//! 2^63 - 1 elements, `int32` attributes such as `parallel_iterations`). At most
//! [`MAX_LISTED_PROBLEMS`] are spelled out in the status message.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::attr::referenced_functions;
use crate::node_def::TensorId;
use crate::op_def::{AttrType, NodeSignature, OpRegistry};
use crate::{AttrValue, Code, GraphDef, NodeDef, Result, Status};

/// The most problems listed in one status message; the rest are counted.
pub const MAX_LISTED_PROBLEMS: usize = 100;

/// Attributes TensorFlow's runtime reads as `int32` (`GetNodeAttr` into an `int`
/// fails above 2^31 - 1), by op and attribute; their lower bounds are the ops'
/// own minimums (`parallel_iterations: int >= 1`).
const INT32_ATTRS: &[(&str, &str)] = &[
    ("Enter", "parallel_iterations"),
    ("RefEnter", "parallel_iterations"),
];

struct Problem {
    code: Code,
    node: Option<String>,
    text: String,
}

/// Problems found while importing a graph; see the module docs.
#[derive(Default)]
pub(crate) struct Problems {
    list: Vec<Problem>,
}

impl Problems {
    /// Records a problem of node `n`.
    pub(crate) fn node(&mut self, name: &str, op: &str, code: Code, what: impl std::fmt::Display) {
        self.list.push(Problem {
            code,
            node: Some(name.to_owned()),
            text: format!("node '{name}' (op {op}): {what}"),
        });
    }

    /// How many problems were recorded.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Records a problem that concerns no single node.
    pub(crate) fn graph(&mut self, code: Code, what: impl Into<String>) {
        self.list.push(Problem {
            code,
            node: None,
            text: what.into(),
        });
    }

    /// `Ok` when nothing was recorded, else one status listing every problem. Its code
    /// is the problems' common code (`NotFound` when every problem is an unknown op,
    /// `Unimplemented` when every one is an unsupported feature), `InvalidArgument`
    /// when they differ; it names the node when all problems concern one node.
    pub(crate) fn into_result(self) -> Result<()> {
        let Some(first) = self.list.first() else {
            return Ok(());
        };
        let code = if self.list.iter().all(|p| p.code == first.code) {
            first.code
        } else {
            Code::InvalidArgument
        };
        let one_node = first
            .node
            .clone()
            .filter(|n| self.list.iter().all(|p| p.node.as_ref() == Some(n)));
        let message = if let [only] = self.list.as_slice() {
            only.text.clone()
        } else {
            let mut m = format!("{} problems importing the graph:", self.list.len());
            for p in self.list.iter().take(MAX_LISTED_PROBLEMS) {
                m.push_str("\n  ");
                m.push_str(&p.text);
            }
            if self.list.len() > MAX_LISTED_PROBLEMS {
                m.push_str(&format!(
                    "\n  … and {} more",
                    self.list.len() - MAX_LISTED_PROBLEMS
                ));
            }
            m
        };
        let status = Status::new(code, message);
        Err(match one_node {
            Some(n) => status.with_node(n),
            None => status,
        })
    }
}

/// True when value `v` may be given to an attribute of kind `ty`.
fn kind_matches(ty: &AttrType, v: &AttrValue) -> bool {
    match (ty, v) {
        (_, AttrValue::Placeholder(_)) => true,
        (AttrType::List(inner), AttrValue::List(l)) => {
            l.kind().is_none_or(|k| k == inner.to_string())
        }
        (AttrType::List(_), _) | (_, AttrValue::List(_)) => false,
        (t, v) => t.to_string() == v.kind(),
    }
}

/// Checks `g` against `registry`; `functions` are the names the graph's library
/// defines and `converted_badly` the names of nodes whose attributes failed to
/// convert (their op validation is skipped, its complaints would only repeat
/// those).
pub(crate) fn validate(
    g: &GraphDef,
    functions: &BTreeSet<String>,
    converted_badly: &HashSet<String>,
    registry: &OpRegistry,
    problems: &mut Problems,
) {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(g.node.len());
    for (i, n) in g.node.iter().enumerate() {
        if n.name.is_empty() {
            problems.graph(
                Code::InvalidArgument,
                format!("node #{i} (op {}) has an empty name", n.op),
            );
        } else if index.contains_key(n.name.as_str()) {
            problems.node(&n.name, &n.op, Code::InvalidArgument, "duplicate node name");
        } else {
            index.insert(&n.name, i);
        }
    }
    let sigs: Vec<Option<NodeSignature>> = g
        .node
        .iter()
        .map(|n| {
            check_node(
                n,
                functions,
                converted_badly.contains(&n.name),
                registry,
                problems,
            )
        })
        .collect();
    for i in 0..g.node.len() {
        check_inputs(i, g, &index, &sigs, problems);
    }
}

/// Checks one node's op and attributes; its edge types when it is valid.
fn check_node(
    n: &NodeDef,
    functions: &BTreeSet<String>,
    converted_badly: bool,
    registry: &OpRegistry,
    problems: &mut Problems,
) -> Option<NodeSignature> {
    let mut ok = true;
    for (k, v) in &n.attr {
        let mut used = vec![];
        referenced_functions(v, &mut used);
        for f in used.into_iter().filter(|f| functions.contains(*f)) {
            problems.node(
                &n.name,
                &n.op,
                Code::InvalidArgument,
                format!("attr '{k}' refers to function '{f}' of the graph's library; graph functions are not supported"),
            );
            ok = false;
        }
    }
    if functions.contains(&n.op) {
        let what = format!(
            "calls function '{}' of the graph's library; graph functions are not supported",
            n.op
        );
        problems.node(&n.name, &n.op, Code::InvalidArgument, what);
        return None;
    }
    let Ok(def) = registry.lookup(&n.op) else {
        problems.node(
            &n.name,
            &n.op,
            Code::NotFound,
            format!("op '{}' is not registered in actorflow", n.op),
        );
        return None;
    };
    for (k, v) in &n.attr {
        if k.starts_with('_') {
            continue;
        }
        match def.attr(k) {
            None => {
                problems.node(
                    &n.name,
                    &n.op,
                    Code::InvalidArgument,
                    format!("attr '{k}' is not defined by op {}", n.op),
                );
                ok = false;
            }
            Some(d) if !kind_matches(&d.ty, v) => {
                let what = format!("attr '{k}' has kind {}, expected {}", v.kind(), d.ty);
                problems.node(&n.name, &n.op, Code::InvalidArgument, what);
                ok = false;
            }
            Some(_) => {}
        }
    }
    for &(op, attr) in INT32_ATTRS {
        if n.op != op {
            continue;
        }
        if let Some(AttrValue::I(v)) = n.attr.get(attr) {
            if i32::try_from(*v).is_err() {
                let what = format!("attr '{attr}' has value {v} out of range for an int32");
                problems.node(&n.name, &n.op, Code::InvalidArgument, what);
                ok = false;
            }
        }
    }
    if !ok || converted_badly {
        return None;
    }
    let mut copy = n.clone();
    match def.validate(&mut copy) {
        Ok(sig) => Some(sig),
        Err(e) => {
            problems.node(&n.name, &n.op, e.code(), e.message());
            None
        }
    }
}

fn check_inputs(
    dst: usize,
    g: &GraphDef,
    index: &HashMap<&str, usize>,
    sigs: &[Option<NodeSignature>],
    problems: &mut Problems,
) {
    let Some(n) = g.node.get(dst) else {
        return;
    };
    let mut data_index = 0;
    for s in &n.input {
        let t = match TensorId::parse(s) {
            Ok(t) => t,
            Err(e) => {
                problems.node(&n.name, &n.op, Code::InvalidArgument, e.message());
                continue;
            }
        };
        let Some(&src) = index.get(t.node) else {
            let what = format!("input '{s}' names no node in the graph");
            problems.node(&n.name, &n.op, Code::InvalidArgument, what);
            data_index += usize::from(!t.is_control());
            continue;
        };
        if t.is_control() {
            continue;
        }
        let i = data_index;
        data_index += 1;
        let (Some(Some(src_sig)), Some(src_node)) = (sigs.get(src), g.node.get(src)) else {
            continue;
        };
        let port = usize::try_from(t.port).unwrap_or(usize::MAX);
        let Some(&out_t) = src_sig.outputs.get(port) else {
            let what = format!(
                "input '{s}' reads output {} of node '{}' (op {}), which has {} output(s)",
                t.port,
                src_node.name,
                src_node.op,
                src_sig.outputs.len()
            );
            problems.node(&n.name, &n.op, Code::InvalidArgument, what);
            continue;
        };
        let in_t = sigs
            .get(dst)
            .and_then(|s| s.as_ref())
            .and_then(|s| s.inputs.get(i));
        if let Some(&in_t) = in_t {
            if !out_t.can_feed(in_t) {
                let what = format!("input {i} ('{s}') is {out_t}, expected {in_t}");
                problems.node(&n.name, &n.op, Code::InvalidArgument, what);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_pick_a_code_and_list_everything() {
        let mut p = Problems::default();
        p.node("a", "Foo", Code::NotFound, "op 'Foo' is not registered");
        p.node("b", "Bar", Code::NotFound, "op 'Bar' is not registered");
        let e = p.into_result().unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        assert!(e.message().starts_with("2 problems"), "{e}");
        assert!(
            e.message().contains("node 'a' (op Foo)") && e.message().contains("node 'b' (op Bar)")
        );
        assert_eq!(e.node(), None);

        let mut p = Problems::default();
        p.node("a", "Foo", Code::NotFound, "x");
        p.node("a", "Foo", Code::InvalidArgument, "y");
        let e = p.into_result().unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.node(), Some("a"));

        let mut p = Problems::default();
        for i in 0..MAX_LISTED_PROBLEMS + 5 {
            p.graph(Code::InvalidArgument, format!("p{i}"));
        }
        let e = p.into_result().unwrap_err();
        assert!(e.message().ends_with("… and 5 more"), "{e}");
        assert!(Problems::default().into_result().is_ok());
    }

    #[test]
    fn kinds() {
        use crate::DType;
        let list_type = AttrType::List(Box::new(AttrType::Type));
        assert!(kind_matches(&AttrType::Type, &AttrValue::Type(DType::F32)));
        assert!(!kind_matches(&AttrType::Int, &AttrValue::Type(DType::F32)));
        assert!(kind_matches(&list_type, &AttrValue::empty_list()));
        assert!(kind_matches(&list_type, &AttrValue::from(vec![DType::F32])));
        assert!(!kind_matches(&list_type, &AttrValue::from(vec![1i64])));
        assert!(!kind_matches(&AttrType::Int, &AttrValue::empty_list()));
        assert!(!kind_matches(&list_type, &AttrValue::I(1)));
        assert!(kind_matches(
            &AttrType::Int,
            &AttrValue::Placeholder("N".into())
        ));
    }
}
