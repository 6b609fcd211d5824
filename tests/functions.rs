//! Graphs whose nodes call functions of the graph's library, imported (every call
//! inlined, see `graph::import::inline`) and run in a session: nested calls, list
//! outputs, attribute placeholders, side effects that must happen, control
//! dependencies on calls, a call in an untaken `cond` branch, and a graph
//! TensorFlow 2.21 traced from nested `tf.function`s
//! (`tests/tf_interop/make_function_fixture.py`). Expected values come from the
//! functions' formulas computed here, or from TensorFlow.

use std::collections::BTreeMap;

use actorflow::graph::import::{graph_def_from_tf_bytes, graph_def_from_tf_text, ImportOptions};
use actorflow::graph::AttrValue;
use actorflow::{DType, GraphDef, NodeDef, Session, SessionOptions, Shape, Tensor};
use serde::Deserialize;
use serde_json::Value;

fn session(src: &str) -> Session {
    let g = graph_def_from_tf_text(src, &ImportOptions::default()).unwrap();
    Session::new(&g, SessionOptions::default()).unwrap()
}

fn floats(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

const FLOAT: &str = r#"attr { key: "T" value { type: DT_FLOAT } }"#;

fn placeholder(name: &str, dtype: &str) -> String {
    format!(
        r#"node {{ name: "{name}" op: "Placeholder" attr {{ key: "dtype" value {{ type: {dtype} }} }} }}"#
    )
}

fn call(name: &str, f: &str, inputs: &[&str], tin: &[&str], tout: &[&str]) -> String {
    let types = |t: &[&str]| t.iter().map(|t| format!("type: {t} ")).collect::<String>();
    let inputs: String = inputs.iter().map(|i| format!("input: \"{i}\" ")).collect();
    format!(
        r#"node {{ name: "{name}" op: "StatefulPartitionedCall" {inputs}
          attr {{ key: "f" value {{ func {{ name: "{f}" }} }} }}
          attr {{ key: "Tin" value {{ list {{ {} }} }} }} attr {{ key: "Tout" value {{ list {{ {} }} }} }} }}"#,
        types(tin),
        types(tout)
    )
}

/// A scalar float variable `v` (shared name `name`), `init` setting it to 0 and
/// `read` reading it.
fn variable(name: &str) -> String {
    format!(
        r#"node {{ name: "v" op: "VarHandleOp" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
             attr {{ key: "shape" value {{ shape {{ }} }} }} attr {{ key: "shared_name" value {{ s: "{name}" }} }} }}
           node {{ name: "zero" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
             attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: 0 }} }} }} }}
           node {{ name: "init" op: "AssignVariableOp" input: "v" input: "zero" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
           node {{ name: "read" op: "ReadVariableOp" input: "v" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}"#
    )
}

fn read_v(sess: &Session) -> f32 {
    sess.run(&[], &["read:0"], &[]).unwrap()[0]
        .scalar_value::<f32>()
        .unwrap()
}

/// `outer(p) = affine(p, double(p))`, `affine[T](a, b) = a * b + a` called by
/// op name with `T` bound, `double(a) = a * 2` through `PartitionedCall`: so
/// `outer(x) = 2x² + x`.
#[test]
fn nested_calls_compute_their_composition() {
    let src = format!(
        r#"{} {} node {{ name: "out" op: "Identity" input: "c" {FLOAT} }}
        library {{
          function {{ signature {{ name: "double" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "y" type: DT_FLOAT }} }}
            node_def {{ name: "two" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
              attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: 2 }} }} }} }}
            node_def {{ name: "mul" op: "Mul" input: "a" input: "two:output:0" {FLOAT} }}
            ret {{ key: "y" value: "mul:z:0" }} }}
          function {{ signature {{ name: "affine" input_arg {{ name: "a" type_attr: "T" }} input_arg {{ name: "b" type_attr: "T" }}
              output_arg {{ name: "y" type_attr: "T" }} attr {{ name: "T" type: "type" }} }}
            node_def {{ name: "ab" op: "Mul" input: "a" input: "b" attr {{ key: "T" value {{ placeholder: "T" }} }} }}
            node_def {{ name: "sum" op: "AddV2" input: "ab:z:0" input: "a" attr {{ key: "T" value {{ placeholder: "T" }} }} }}
            ret {{ key: "y" value: "sum:z:0" }} }}
          function {{ signature {{ name: "outer" input_arg {{ name: "p" type: DT_FLOAT }} output_arg {{ name: "q" type: DT_FLOAT }} }}
            node_def {{ name: "d" op: "PartitionedCall" input: "p"
              attr {{ key: "f" value {{ func {{ name: "double" }} }} }}
              attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }} attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }} }}
            node_def {{ name: "af" op: "affine" input: "p" input: "d:output:0" {FLOAT} }}
            ret {{ key: "q" value: "af:y:0" }} }}
        }}"#,
        placeholder("x", "DT_FLOAT"),
        call("c", "outer", &["x"], &["DT_FLOAT"], &["DT_FLOAT"]),
    );
    let sess = session(&src);
    let x = [1.0f32, -2.0, 0.5, 3.0, 0.0];
    let out = sess
        .run(&[("x:0", Tensor::vector(&x))], &["out:0", "c:0"], &[])
        .unwrap();
    let want: Vec<f32> = x.iter().map(|&x| x * (x * 2.0) + x).collect();
    assert_eq!(floats(&out[0]), want);
    // The call's own name still reads its result.
    assert_eq!(out[1], out[0]);
}

/// `halves[N](v) -> (parts: N * float, last: float)` splits `v` into `N` pieces
/// and also returns the last one alone.
#[test]
fn list_outputs_come_out_in_signature_order() {
    let src = format!(
        r#"{}
        node {{ name: "c" op: "halves" input: "x" attr {{ key: "N" value {{ i: 3 }} }} }}
        node {{ name: "p1" op: "Identity" input: "c:1" {FLOAT} }}
        library {{ function {{
          signature {{ name: "halves" input_arg {{ name: "v" type: DT_FLOAT }}
            output_arg {{ name: "parts" type: DT_FLOAT number_attr: "N" }} output_arg {{ name: "last" type: DT_FLOAT }}
            attr {{ name: "N" type: "int" }} }}
          node_def {{ name: "axis" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
            attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 0 }} }} }} }}
          node_def {{ name: "s" op: "Split" input: "axis:output:0" input: "v"
            {FLOAT} attr {{ key: "num_split" value {{ placeholder: "N" }} }} }}
          ret {{ key: "parts" value: "s:output" }} ret {{ key: "last" value: "s:output:2" }} }} }}"#,
        placeholder("x", "DT_FLOAT"),
    );
    let sess = session(&src);
    let x: Vec<f32> = (1..=6).map(|i| i as f32).collect();
    let out = sess
        .run(
            &[("x:0", Tensor::vector(&x))],
            &["c:0", "p1:0", "c:2", "c:3"],
            &[],
        )
        .unwrap();
    let pieces: Vec<Vec<f32>> = x.chunks(2).map(<[f32]>::to_vec).collect();
    assert_eq!(floats(&out[0]), pieces[0]);
    assert_eq!(floats(&out[1]), pieces[1]);
    assert_eq!(floats(&out[2]), pieces[2]);
    assert_eq!(floats(&out[3]), pieces[2]);
}

/// `bump(v, d) -> d * 2` also adds `d` to the variable, in a node nothing reads:
/// reading the call's result is enough to make it happen, once per step.
#[test]
fn side_effects_happen_when_a_result_is_read() {
    let src = format!(
        r#"{} {} node {{ name: "c" op: "bump" input: "v" input: "d" }}
        node {{ name: "out" op: "Identity" input: "c" {FLOAT} }}
        library {{ function {{
          signature {{ name: "bump" input_arg {{ name: "v" type: DT_RESOURCE }} input_arg {{ name: "d" type: DT_FLOAT }}
            output_arg {{ name: "y" type: DT_FLOAT }} }}
          node_def {{ name: "assign" op: "AssignAddVariableOp" input: "v" input: "d" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
          node_def {{ name: "two" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
            attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: 2 }} }} }} }}
          node_def {{ name: "mul" op: "Mul" input: "d" input: "two:output:0" {FLOAT} }}
          ret {{ key: "y" value: "mul:z:0" }} }} }}"#,
        variable("bumped"),
        placeholder("d", "DT_FLOAT"),
    );
    let sess = session(&src);
    sess.run(&[], &[], &["init"]).unwrap();
    let d = 1.5f32;
    for step in 1..=3 {
        let out = sess
            .run(&[("d:0", Tensor::scalar(d))], &["out:0"], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(d * 2.0));
        assert_eq!(read_v(&sess), d * step as f32);
    }
}

/// `set(v, x)` returns nothing; its assignment is a control output. A read with
/// a control dependency on the call sees the new value, and running the call as
/// a target is enough.
#[test]
fn control_dependencies_on_a_call_wait_for_its_effects() {
    let src = format!(
        r#"{} {} node {{ name: "c" op: "set" input: "v" input: "x" }}
        node {{ name: "after" op: "ReadVariableOp" input: "v" input: "^c" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
        library {{ function {{
          signature {{ name: "set" input_arg {{ name: "v" type: DT_RESOURCE }} input_arg {{ name: "x" type: DT_FLOAT }}
            control_output: "assign" }}
          node_def {{ name: "assign" op: "AssignVariableOp" input: "v" input: "x" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
          control_ret {{ key: "assign" value: "assign" }} }} }}"#,
        variable("set"),
        placeholder("x", "DT_FLOAT"),
    );
    let sess = session(&src);
    sess.run(&[], &[], &["init"]).unwrap();
    for x in [7.0f32, -3.25, 0.5] {
        let out = sess
            .run(&[("x:0", Tensor::scalar(x))], &["after:0"], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(x));
    }
    sess.run(&[("x:0", Tensor::scalar(9.0f32))], &[], &["c"])
        .unwrap();
    assert_eq!(read_v(&sess), 9.0);
}

/// `cast_to[T](a: float) -> T` with `T` bound differently by two calls.
#[test]
fn placeholders_bind_per_call() {
    let src = format!(
        r#"{}
        node {{ name: "i" op: "cast_to" input: "x" attr {{ key: "T" value {{ type: DT_INT32 }} }} }}
        node {{ name: "d" op: "cast_to" input: "x" attr {{ key: "T" value {{ type: DT_DOUBLE }} }} }}
        library {{ function {{
          signature {{ name: "cast_to" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type_attr: "T" }}
            attr {{ name: "T" type: "type" }} }}
          node_def {{ name: "cast" op: "Cast" input: "a" attr {{ key: "SrcT" value {{ type: DT_FLOAT }} }}
            attr {{ key: "DstT" value {{ placeholder: "T" }} }} }}
          ret {{ key: "b" value: "cast:y:0" }} }} }}"#,
        placeholder("x", "DT_FLOAT"),
    );
    let sess = session(&src);
    let x = [1.75f32, -2.5, 0.0, 40.25];
    let out = sess
        .run(&[("x:0", Tensor::vector(&x))], &["i:0", "d:0"], &[])
        .unwrap();
    let ints: Vec<i32> = x.iter().map(|&v| v as i32).collect();
    let doubles: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    assert_eq!(out[0], Tensor::vector(&ints));
    assert_eq!(out[1], Tensor::vector(&doubles));
}

/// `reset(v, d) -> d` sets the variable to 100 from a constant (a body node
/// without inputs). Called in the true branch of a v1 `cond`, it runs only when
/// the branch is taken: the constant waits for the call's (dead) inputs.
#[test]
fn a_call_in_an_untaken_branch_runs_nothing() {
    let src = format!(
        r#"{} {} {}
        node {{ name: "sw" op: "Switch" input: "x" input: "pred" {FLOAT} }}
        node {{ name: "c" op: "reset" input: "v" input: "sw:1" }}
        node {{ name: "m" op: "Merge" input: "c" input: "sw" {FLOAT} attr {{ key: "N" value {{ i: 2 }} }} }}
        library {{ function {{
          signature {{ name: "reset" input_arg {{ name: "v" type: DT_RESOURCE }} input_arg {{ name: "d" type: DT_FLOAT }}
            output_arg {{ name: "y" type: DT_FLOAT }} }}
          node_def {{ name: "hundred" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
            attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: 100 }} }} }} }}
          node_def {{ name: "assign" op: "AssignVariableOp" input: "v" input: "hundred:output:0"
            attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
          ret {{ key: "y" value: "d" }} }} }}"#,
        variable("reset"),
        placeholder("x", "DT_FLOAT"),
        placeholder("pred", "DT_BOOL"),
    );
    let sess = session(&src);
    sess.run(&[], &[], &["init"]).unwrap();
    let run = |pred: bool| {
        let feeds = [
            ("x:0", Tensor::scalar(4.5f32)),
            ("pred:0", Tensor::scalar(pred)),
        ];
        sess.run(&feeds, &["m:0"], &[]).unwrap().remove(0)
    };
    assert_eq!(run(false), Tensor::scalar(4.5f32));
    assert_eq!(read_v(&sess), 0.0, "the untaken branch's call ran");
    assert_eq!(run(true), Tensor::scalar(4.5f32));
    assert_eq!(read_v(&sess), 100.0);
}

/// A fixture's JSON: the calls TensorFlow made, in order (feeds, answers, the
/// variable after the call), and the variable the function graph captures.
#[derive(Deserialize)]
struct Fixture {
    calls: Vec<Call>,
    variable: Captured,
}

#[derive(Deserialize)]
struct Call {
    inputs: BTreeMap<String, Value>,
    outputs: BTreeMap<String, Value>,
    variable_after: Value,
}

#[derive(Deserialize)]
struct Captured {
    placeholder: String,
    initial: Value,
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/functions");

/// A JSON value as the fixtures write them: an integer is an `int32` scalar, a
/// float a `float32` scalar, a list a `float32` vector.
fn tensor(v: &Value) -> Tensor {
    match v {
        Value::Array(a) => {
            let x: Vec<f32> = a.iter().map(|x| x.as_f64().unwrap() as f32).collect();
            Tensor::vector(&x)
        }
        v if v.is_i64() => Tensor::scalar(v.as_i64().unwrap() as i32),
        v => Tensor::scalar(v.as_f64().unwrap() as f32),
    }
}

fn close(got: &Tensor, want: &Value) -> bool {
    let (got, want) = (floats(got), floats(&tensor(want)));
    got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(g, w)| (g - w).abs() <= 1e-6 + 1e-6 * w.abs())
}

/// Fixture `name`'s graph with a variable in place of the captured resource
/// placeholder, `init_v` setting it to its initial value and `read_v` reading it.
fn fixture(name: &str) -> (GraphDef, Fixture) {
    let f: Fixture =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/{name}.json")).unwrap())
            .unwrap();
    let text = std::fs::read_to_string(format!("{FIXTURES}/{name}.pbtxt")).unwrap();
    let bytes = std::fs::read(format!("{FIXTURES}/{name}.pb")).unwrap();
    let opts = ImportOptions::default();
    let mut g = graph_def_from_tf_text(&text, &opts).unwrap();
    // The text and the binary file say the same, down to the function bodies.
    assert_eq!(graph_def_from_tf_bytes(&bytes, &opts).unwrap(), g);
    assert!(g.node.iter().all(|n| !n.op.contains("PartitionedCall")
        && !n.op.contains("If")
        && !n.op.contains("While")));
    let handle = f.variable.placeholder.trim_end_matches(":0");
    let initial = tensor(&f.variable.initial);
    let node = g.node.iter_mut().find(|n| n.name == handle).unwrap();
    *node = NodeDef::new(handle, "VarHandleOp")
        .with_attr("dtype", DType::F32)
        .with_attr("shape", Shape::known(initial.dims()))
        .with_attr(
            "shared_name",
            AttrValue::from(format!("fixture_{name}").as_str()),
        );
    g.node.push(
        NodeDef::new("initial_v", "Const")
            .with_attr("dtype", DType::F32)
            .with_attr("value", initial),
    );
    g.node.push(
        NodeDef::new("init_v", "AssignVariableOp")
            .with_input(handle)
            .with_input("initial_v")
            .with_attr("dtype", DType::F32),
    );
    g.node.push(
        NodeDef::new("read_v", "ReadVariableOp")
            .with_input(handle)
            .with_attr("dtype", DType::F32),
    );
    (g, f)
}

/// Runs fixture `name`'s calls in order in one session and compares each answer
/// and the variable after it with TensorFlow's.
fn run_fixture(name: &str) -> (GraphDef, Fixture) {
    let (g, f) = fixture(name);
    let sess = Session::new(&g, SessionOptions::default()).unwrap();
    sess.run(&[], &[], &["init_v"]).unwrap();
    for (i, call) in f.calls.iter().enumerate() {
        let feeds: Vec<(&str, Tensor)> = call
            .inputs
            .iter()
            .map(|(k, v)| (k.as_str(), tensor(v)))
            .collect();
        let fetches: Vec<&str> = call.outputs.keys().map(String::as_str).collect();
        let out = sess.run(&feeds, &fetches, &[]).unwrap();
        for ((n, want), got) in call.outputs.iter().zip(&out) {
            assert!(
                close(got, want),
                "{name} call {i}: {n} is {got:?}, TensorFlow's {want}"
            );
        }
        let v = sess.run(&[], &["read_v:0"], &[]).unwrap();
        assert!(
            close(&v[0], &call.variable_after),
            "{name} call {i}: the variable is {v:?}, TensorFlow's {}",
            call.variable_after
        );
    }
    (g, f)
}

/// TensorFlow 2.21's `outer` (calling `inner`, which reads and updates a
/// variable and calls `square_plus`) gives TensorFlow's answers, and updates the
/// variable as TensorFlow did, though nothing reads the update.
#[test]
fn a_tensorflow_function_graph_runs_as_in_tensorflow() {
    let (g, f) = run_fixture("nested");
    // Reading one result of the call alone is enough for the update to happen.
    let sess = Session::new(&g, SessionOptions::default()).unwrap();
    sess.run(&[], &[], &["init_v"]).unwrap();
    let call = &f.calls[0];
    let feeds: Vec<(&str, Tensor)> = call
        .inputs
        .iter()
        .map(|(k, v)| (k.as_str(), tensor(v)))
        .collect();
    sess.run(&feeds, &["StatefulPartitionedCall:1"], &[])
        .unwrap();
    let v = sess.run(&[], &["read_v:0"], &[]).unwrap();
    assert!(close(&v[0], &call.variable_after), "{v:?}");
}

/// TensorFlow 2.21's `While` and `If` (lowered to Enter/Merge/Switch/Exit and
/// Switch/Merge around inlined calls) loop and branch as in TensorFlow, the
/// variable counting the calls that took the branch updating it.
#[test]
fn tensorflow_functional_control_flow_runs_as_in_tensorflow() {
    run_fixture("control_flow");
}

/// An `If` without outputs whose true branch sets the variable: a read with a
/// control dependency on it sees the update when the branch is taken and the old
/// value when not (the node left in the If's place waits for whichever branch
/// ran); a `While` counting to `n` (both lowered to v1 control flow).
#[test]
fn functional_if_and_while_run() {
    let src = format!(
        r#"{} {} {} {}
        node {{ name: "if" op: "If" input: "p" input: "v" input: "x"
          attr {{ key: "Tcond" value {{ type: DT_BOOL }} }}
          attr {{ key: "Tin" value {{ list {{ type: DT_RESOURCE type: DT_FLOAT }} }} }}
          attr {{ key: "Tout" value {{ list {{ }} }} }}
          attr {{ key: "then_branch" value {{ func {{ name: "set" }} }} }}
          attr {{ key: "else_branch" value {{ func {{ name: "nothing" }} }} }} }}
        node {{ name: "after" op: "ReadVariableOp" input: "v" input: "^if" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "w" op: "StatelessWhile" input: "zero_i" input: "n"
          attr {{ key: "T" value {{ list {{ type: DT_INT32 type: DT_INT32 }} }} }}
          attr {{ key: "cond" value {{ func {{ name: "less" }} }} }}
          attr {{ key: "body" value {{ func {{ name: "step" }} }} }} }}
        node {{ name: "zero_i" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
          attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 0 }} }} }} }}
        library {{
          function {{ signature {{ name: "set" input_arg {{ name: "v" type: DT_RESOURCE }} input_arg {{ name: "x" type: DT_FLOAT }} }}
            node_def {{ name: "assign" op: "AssignVariableOp" input: "v" input: "x" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }} }}
          function {{ signature {{ name: "nothing" input_arg {{ name: "v" type: DT_RESOURCE }} input_arg {{ name: "x" type: DT_FLOAT }} }} }}
          function {{ signature {{ name: "less" input_arg {{ name: "i" type: DT_INT32 }} input_arg {{ name: "n" type: DT_INT32 }}
              output_arg {{ name: "b" type: DT_BOOL }} }}
            node_def {{ name: "l" op: "Less" input: "i" input: "n" attr {{ key: "T" value {{ type: DT_INT32 }} }} }}
            ret {{ key: "b" value: "l:z:0" }} }}
          function {{ signature {{ name: "step" input_arg {{ name: "i" type: DT_INT32 }} input_arg {{ name: "n" type: DT_INT32 }}
              output_arg {{ name: "j" type: DT_INT32 }} output_arg {{ name: "m" type: DT_INT32 }} }}
            node_def {{ name: "one" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
              attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 1 }} }} }} }}
            node_def {{ name: "add" op: "AddV2" input: "i" input: "one:output:0" attr {{ key: "T" value {{ type: DT_INT32 }} }} }}
            ret {{ key: "j" value: "add:z:0" }} ret {{ key: "m" value: "n" }} }}
        }}"#,
        variable("if"),
        placeholder("x", "DT_FLOAT"),
        placeholder("p", "DT_BOOL"),
        placeholder("n", "DT_INT32"),
    );
    let sess = session(&src);
    sess.run(&[], &[], &["init"]).unwrap();
    let mut want = 0.0f32;
    for (p, x) in [(false, 1.0f32), (true, 2.5), (false, 7.0), (true, -4.0)] {
        if p {
            want = x;
        }
        let feeds = [("p:0", Tensor::scalar(p)), ("x:0", Tensor::scalar(x))];
        let out = sess.run(&feeds, &["after:0"], &[]).unwrap();
        assert_eq!(out[0], Tensor::scalar(want), "p = {p}, x = {x}");
    }
    for n in [0i32, 1, 5] {
        let out = sess
            .run(&[("n:0", Tensor::scalar(n))], &["w:0", "w:1"], &[])
            .unwrap();
        assert_eq!(out, [Tensor::scalar(n), Tensor::scalar(n)]);
    }
}
