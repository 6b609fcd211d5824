//! Lowering of TensorFlow 2's functional control flow into actorflow's v1 control
//! flow, as TensorFlow's `lower_if_op.cc` and `lower_while_op.cc` do before a
//! graph runs. The branches, condition and body become calls of their library
//! functions, which the inliner then inlines like any other call.
//!
//! `If`/`StatelessIf` `n` (inputs `cond, x…`, `then_branch`, `else_branch`):
//!
//! ```text
//!   n/switch_pred  Switch(cond, cond)      n/pivot_f, n/pivot_t  Identity of its outputs
//!   n/input_i      Switch(x_i, cond)       (the If's control inputs gate n/switch_pred)
//!   n/then         then_branch(n/input_i:1 …, ^n/pivot_t)
//!   n/else         else_branch(n/input_i:0 …, ^n/pivot_f)
//!   n/output_j     Merge(n/then:j, n/else:j)          what readers of n:j read
//!   n/branch_executed  Merge(n/pivot_t, n/pivot_f, ^n/then, ^n/else)
//!   n              IdentityN(n/output_j …, ^n/branch_executed)  (NoOp without outputs)
//! ```
//!
//! `While`/`StatelessWhile` `w` (loop variables `x…`, `cond`, `body`), its frame
//! named `w`:
//!
//! ```text
//!   w/LoopControlInputs  NoOp(^the While's control inputs)   gating every Enter
//!   w/enter_i       Enter(x_i)             w/merge_i  Merge(w/enter_i, w/next_iteration_i)
//!   w/cond          cond(w/merge_i …, ^w/merge_0)     w/LoopCond  LoopCond(w/cond:0)
//!   w/switch_i      Switch(w/merge_i, w/LoopCond)
//!   w/body          body(w/switch_i:1 …, ^w/loop_body_control)
//!   w/loop_body_control  Identity(w/switch_0:1)
//!   w/next_iteration_i   NextIteration(w/body:i)
//!   w/exit_i        Exit(w/switch_i:0)                 what readers of w:i read
//!   w               IdentityN(w/exit_i …)
//! ```
//!
//! A predicate of another type than `bool` (TensorFlow converts it at run time)
//! is `Unimplemented`. Names another node already has get a suffix
//! (`w/enter_0_1`), as TensorFlow's `Graph::NewName` gives one.

use crate::AttrMap;

use crate::{AttrValue, DType, NameAttrList, NodeDef, Result, Status};

/// The functional control-flow ops lowered here.
pub(super) const FUNCTIONAL_OPS: [&str; 4] = ["If", "StatelessIf", "While", "StatelessWhile"];

/// A lowered functional op.
pub(super) struct Lowered {
    /// The new nodes; some call library functions.
    pub nodes: Vec<NodeDef>,
    /// The tensor readers of each output now read.
    pub outputs: Vec<String>,
    /// The node left in the op's place, named as it was.
    pub stand_in: NodeDef,
}

/// Lowers functional op `n`; `is_function` says whether a name is a library
/// function (branches, conditions and bodies must be), `fresh` turns a wished
/// node name into one no node has.
pub(super) fn lower(
    n: &NodeDef,
    is_function: &dyn Fn(&str) -> bool,
    fresh: &mut dyn FnMut(String) -> String,
) -> Result<Lowered> {
    let func = |k: &str| -> Result<NameAttrList> {
        match n.attr.get(k) {
            Some(AttrValue::Func(f)) if is_function(&f.name) => Ok(f.clone()),
            Some(AttrValue::Func(f)) => Err(Status::not_found(format!(
                "attr '{k}' names function '{}', which the graph's library does not define",
                f.name
            ))),
            Some(v) => Err(Status::invalid_argument(format!(
                "attr '{k}' has kind {}, expected func",
                v.kind()
            ))),
            None => Err(Status::invalid_argument(format!("missing attr '{k}'"))),
        }
    };
    let name = |infix: &str| fresh(format!("{}/{infix}", n.name));
    if n.op.ends_with("If") {
        lower_if(n, func("then_branch")?, func("else_branch")?, name)
    } else {
        lower_while(n, func("cond")?, func("body")?, name)
    }
}

fn types(n: &NodeDef, k: &str) -> Result<Vec<DType>> {
    match n.attr.get(k) {
        Some(AttrValue::List(l)) => Ok(l.type_.clone()),
        None => Ok(vec![]),
        Some(v) => Err(Status::invalid_argument(format!(
            "attr '{k}' has kind {}, expected list(type)",
            v.kind()
        ))),
    }
}

/// A node of op `op` named `name` on `n`'s device.
fn node(n: &NodeDef, name: String, op: &str, input: Vec<String>) -> NodeDef {
    NodeDef {
        name,
        op: op.to_owned(),
        input,
        device: n.device.clone(),
        attr: AttrMap::new(),
    }
}

fn with_t(mut node: NodeDef, t: DType) -> NodeDef {
    node.attr.insert("T".into(), AttrValue::Type(t));
    node
}

fn merge(n: &NodeDef, name: String, a: String, b: String, t: DType) -> NodeDef {
    let mut m = with_t(node(n, name, "Merge", vec![a, b]), t);
    m.attr.insert("N".into(), AttrValue::I(2));
    m
}

/// A call of `f` (op = the function's name, attributes = `f`'s).
fn call(n: &NodeDef, name: String, f: &NameAttrList, input: Vec<String>) -> NodeDef {
    NodeDef {
        attr: f.attr.clone(),
        ..node(n, name, &f.name, input)
    }
}

fn port(node: &str, i: usize) -> String {
    if i == 0 {
        node.to_owned()
    } else {
        format!("{node}:{i}")
    }
}

fn split_inputs(n: &NodeDef) -> (Vec<String>, Vec<String>) {
    let data = n.data_inputs().map(str::to_owned).collect();
    let control = n.control_inputs().map(|c| format!("^{c}")).collect();
    (data, control)
}

fn lower_if(
    n: &NodeDef,
    then_f: NameAttrList,
    else_f: NameAttrList,
    mut fresh: impl FnMut(&str) -> String,
) -> Result<Lowered> {
    let name = &n.name;
    if let Some(AttrValue::Type(t)) = n.attr.get("Tcond") {
        if *t != DType::Bool {
            return Err(Status::unimplemented(format!(
                "the predicate is {t}; only bool predicates are lowered"
            )));
        }
    }
    let tin = types(n, "Tin")?;
    let tout = types(n, "Tout")?;
    let (data, control) = split_inputs(n);
    let Some((pred, xs)) = data.split_first() else {
        return Err(Status::invalid_argument(format!(
            "{} has no predicate input",
            n.op
        )));
    };
    if xs.len() != tin.len() {
        return Err(Status::invalid_argument(format!(
            "{} has {} input(s) after the predicate, but Tin lists {}",
            n.op,
            xs.len(),
            tin.len()
        )));
    }
    let mut nodes = vec![];
    let switch_pred = fresh("switch_pred");
    let mut sp = with_t(
        node(
            n,
            switch_pred.clone(),
            "Switch",
            vec![pred.clone(), pred.clone()],
        ),
        DType::Bool,
    );
    sp.input.extend(control);
    nodes.push(sp);
    let (pivot_f, pivot_t) = (fresh("pivot_f"), fresh("pivot_t"));
    nodes.push(with_t(
        node(n, pivot_f.clone(), "Identity", vec![switch_pred.clone()]),
        DType::Bool,
    ));
    nodes.push(with_t(
        node(
            n,
            pivot_t.clone(),
            "Identity",
            vec![format!("{switch_pred}:1")],
        ),
        DType::Bool,
    ));
    let (mut then_in, mut else_in) = (vec![], vec![]);
    for (i, (x, &t)) in xs.iter().zip(&tin).enumerate() {
        let s = fresh(&format!("input_{i}"));
        nodes.push(with_t(
            node(n, s.clone(), "Switch", vec![x.clone(), pred.clone()]),
            t,
        ));
        then_in.push(format!("{s}:1"));
        else_in.push(s);
    }
    then_in.push(format!("^{pivot_t}"));
    else_in.push(format!("^{pivot_f}"));
    let (then_c, else_c) = (fresh("then"), fresh("else"));
    nodes.push(call(n, then_c.clone(), &then_f, then_in));
    nodes.push(call(n, else_c.clone(), &else_f, else_in));
    let mut outputs = vec![];
    for (j, &t) in tout.iter().enumerate() {
        let o = fresh(&format!("output_{j}"));
        nodes.push(merge(n, o.clone(), port(&then_c, j), port(&else_c, j), t));
        outputs.push(o);
    }
    let executed = fresh("branch_executed");
    let mut be = merge(n, executed.clone(), pivot_t, pivot_f, DType::Bool);
    be.input
        .extend([format!("^{then_c}"), format!("^{else_c}")]);
    nodes.push(be);
    let stand_in = if outputs.is_empty() {
        node(n, name.clone(), "NoOp", vec![format!("^{executed}")])
    } else {
        let mut input = outputs.clone();
        input.push(format!("^{executed}"));
        let mut s = node(n, name.clone(), "IdentityN", input);
        s.attr.insert("T".into(), AttrValue::from(tout.as_slice()));
        s
    };
    Ok(Lowered {
        nodes,
        outputs,
        stand_in,
    })
}

fn lower_while(
    n: &NodeDef,
    cond: NameAttrList,
    body: NameAttrList,
    mut fresh: impl FnMut(&str) -> String,
) -> Result<Lowered> {
    let name = &n.name;
    let ts = types(n, "T")?;
    let (data, control) = split_inputs(n);
    if data.len() != ts.len() {
        return Err(Status::invalid_argument(format!(
            "{} has {} input(s), but T lists {}",
            n.op,
            data.len(),
            ts.len()
        )));
    }
    if ts.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{} has no loop variables",
            n.op
        )));
    }
    let parallel = match n.attr.get("parallel_iterations") {
        Some(AttrValue::I(p)) => *p,
        _ => 10,
    };
    let mut nodes = vec![];
    let gate = (!control.is_empty()).then(|| fresh("LoopControlInputs"));
    let next: Vec<String> = (0..ts.len())
        .map(|i| fresh(&format!("next_iteration_{i}")))
        .collect();
    if let Some(g) = &gate {
        nodes.push(node(n, g.clone(), "NoOp", control));
    }
    let mut merges = vec![];
    for (i, (x, &t)) in data.iter().zip(&ts).enumerate() {
        let e = fresh(&format!("enter_{i}"));
        let mut enter = with_t(node(n, e.clone(), "Enter", vec![x.clone()]), t);
        enter.input.extend(gate.iter().map(|g| format!("^{g}")));
        enter
            .attr
            .insert("frame_name".into(), AttrValue::S(name.clone()));
        enter
            .attr
            .insert("parallel_iterations".into(), AttrValue::I(parallel));
        nodes.push(enter);
        let m = fresh(&format!("merge_{i}"));
        nodes.push(merge(n, m.clone(), e, next[i].clone(), t));
        merges.push(m);
    }
    let cond_c = fresh("cond");
    let mut cond_in = merges.clone();
    cond_in.push(format!("^{}", merges[0]));
    nodes.push(call(n, cond_c.clone(), &cond, cond_in));
    let loop_cond = fresh("LoopCond");
    nodes.push(node(n, loop_cond.clone(), "LoopCond", vec![cond_c]));
    let body_c = fresh("body");
    let control_node = fresh("loop_body_control");
    let mut body_in = vec![];
    let mut outputs = vec![];
    for (i, (m, &t)) in merges.iter().zip(&ts).enumerate() {
        let s = fresh(&format!("switch_{i}"));
        nodes.push(with_t(
            node(n, s.clone(), "Switch", vec![m.clone(), loop_cond.clone()]),
            t,
        ));
        if i == 0 {
            nodes.push(with_t(
                node(n, control_node.clone(), "Identity", vec![format!("{s}:1")]),
                t,
            ));
        }
        body_in.push(format!("{s}:1"));
        let x = fresh(&format!("exit_{i}"));
        nodes.push(with_t(node(n, x.clone(), "Exit", vec![s]), t));
        outputs.push(x);
        nodes.push(with_t(
            node(n, next[i].clone(), "NextIteration", vec![port(&body_c, i)]),
            t,
        ));
    }
    body_in.push(format!("^{control_node}"));
    nodes.push(call(n, body_c, &body, body_in));
    let mut stand_in = node(n, name.clone(), "IdentityN", outputs.clone());
    stand_in
        .attr
        .insert("T".into(), AttrValue::from(ts.as_slice()));
    Ok(Lowered {
        nodes,
        outputs,
        stand_in,
    })
}
