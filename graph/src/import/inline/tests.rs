//! Inlining on hand-written libraries: the shape of the flat graph (names,
//! inputs, gating, devices, renamed attributes), that it validates, and every
//! error. Running inlined graphs is `tests/functions.rs`'s job.

use super::*;
use crate::import::{graph_def_from_tf_text, ImportOptions};
use crate::Tensor;

fn import(src: &str) -> crate::Result<GraphDef> {
    graph_def_from_tf_text(src, &ImportOptions::default())
}

fn node<'g>(g: &'g GraphDef, name: &str) -> &'g NodeDef {
    g.find(name)
        .unwrap_or_else(|| panic!("no node '{name}' in {:#?}", names(g)))
}

fn names(g: &GraphDef) -> Vec<&str> {
    g.node.iter().map(|n| n.name.as_str()).collect()
}

const X: &str =
    r#"node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }"#;

/// `double(a: float) -> (y: float)`: y = a * 2.
const DOUBLE: &str = r#"
  function {
    signature { name: "double" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "two" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2 } } } }
    node_def { name: "mul" op: "Mul" input: "a" input: "two:output:0" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "mul:z:0" }
  }"#;

fn call(name: &str, f: &str, inputs: &[&str], tin: usize, tout: usize) -> String {
    let list = |n| "type: DT_FLOAT ".repeat(n);
    let inputs: String = inputs.iter().map(|i| format!("input: \"{i}\" ")).collect();
    format!(
        r#"node {{ name: "{name}" op: "StatefulPartitionedCall" {inputs}
          attr {{ key: "f" value {{ func {{ name: "{f}" }} }} }}
          attr {{ key: "Tin" value {{ list {{ {} }} }} }}
          attr {{ key: "Tout" value {{ list {{ {} }} }} }}
          attr {{ key: "config_proto" value {{ s: "\n\007\n\003CPU\020\001\377" }} }}
          attr {{ key: "executor_type" value {{ s: "" }} }} }}"#,
        list(tin),
        list(tout)
    )
}

fn identity(name: &str, input: &str) -> String {
    format!(
        r#"node {{ name: "{name}" op: "Identity" input: "{input}" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}"#
    )
}

#[test]
fn a_call_becomes_its_body_between_identities() {
    let src = format!(
        "{X} {} {} library {{ {DOUBLE} }}",
        call("c", "double", &["x"], 1, 1),
        identity("out", "c")
    );
    let g = import(&src).unwrap();
    let input = node(&g, "Func/c/input/_0");
    assert_eq!(
        (input.op.as_str(), input.input.as_slice()),
        ("Identity", &["x".to_owned()][..])
    );
    assert_eq!(input.get_attr::<DType>("T").unwrap(), DType::F32);
    let mul = node(&g, "c/mul");
    assert_eq!(mul.input, ["Func/c/input/_0", "c/two"]);
    // The input-less constant waits for the call's inputs.
    assert_eq!(node(&g, "c/two").input, ["^Func/c/inputs_ready"]);
    assert_eq!(node(&g, "Func/c/inputs_ready").input, ["^Func/c/input/_0"]);
    // A pure function: no output control node, the output reads the body.
    assert!(g.find("Func/c/output_control_node").is_none());
    assert_eq!(node(&g, "Func/c/output/_0").input, ["c/mul"]);
    // Readers of c:0 read the output Identity; `c` stays fetchable.
    assert_eq!(node(&g, "out").input, ["Func/c/output/_0"]);
    let c = node(&g, "c");
    assert_eq!(c.op, "IdentityN");
    assert_eq!(c.input, ["Func/c/output/_0"]);
    // The call's runtime attributes went with it.
    assert!(g.node.iter().all(|n| !n.attr.contains_key("config_proto")));
    assert_eq!(g.node.len(), 8, "{:?}", names(&g));
}

/// `outer(p) = inner(p) + double(p)` where `inner` is called by op name and
/// `double` through a call op; `inner(q) = double(q)`.
#[test]
fn nested_calls_inline_recursively() {
    let lib = format!(
        r#"library {{ {DOUBLE}
          function {{
            signature {{ name: "inner" input_arg {{ name: "q" type: DT_FLOAT }} output_arg {{ name: "r" type: DT_FLOAT }} }}
            node_def {{ name: "d" op: "PartitionedCall" input: "q"
              attr {{ key: "f" value {{ func {{ name: "double" }} }} }}
              attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }}
              attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }} }}
            ret {{ key: "r" value: "d:output:0" }}
          }}
          function {{
            signature {{ name: "outer" input_arg {{ name: "p" type: DT_FLOAT }} output_arg {{ name: "s" type: DT_FLOAT }} }}
            node_def {{ name: "i" op: "inner" input: "p" }}
            node_def {{ name: "d" op: "PartitionedCall" input: "p"
              attr {{ key: "f" value {{ func {{ name: "double" }} }} }}
              attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }}
              attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }} }}
            node_def {{ name: "add" op: "AddV2" input: "i:r:0" input: "d:output:0"
              attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
            ret {{ key: "s" value: "add:z:0" }}
          }}
        }}"#
    );
    let src = format!(
        "{X} {} {} {lib}",
        call("c", "outer", &["x"], 1, 1),
        identity("out", "c")
    );
    let g = import(&src).unwrap();
    assert_eq!(
        node(&g, "c/add").input,
        ["Func/c/i/output/_0", "Func/c/d/output/_0"]
    );
    assert_eq!(
        node(&g, "c/i/d/mul").input,
        ["Func/c/i/d/input/_0", "c/i/d/two"]
    );
    assert_eq!(node(&g, "Func/c/i/d/input/_0").input, ["Func/c/i/input/_0"]);
    assert_eq!(node(&g, "Func/c/i/input/_0").input, ["Func/c/input/_0"]);
    assert_eq!(node(&g, "Func/c/d/input/_0").input, ["Func/c/input/_0"]);
    // Constants of the innermost body wait for its inputs, which wait for the
    // outer ones.
    assert_eq!(node(&g, "c/i/d/two").input, ["^Func/c/i/d/inputs_ready"]);
    assert_eq!(node(&g, "c/i").op, "IdentityN");
    assert_eq!(node(&g, "out").input, ["Func/c/output/_0"]);
    assert!(g
        .node
        .iter()
        .all(|n| !n.op.contains("Call") && n.op != "inner"));
}

/// A function with list outputs: `halves(v) -> (parts: 2 * float, last: float)`
/// splits `v` in two and also returns the second part alone.
#[test]
fn list_outputs_expand_in_signature_order() {
    let src = format!(
        r#"{X}
        node {{ name: "c" op: "halves" input: "x" attr {{ key: "N" value {{ i: 2 }} }} }}
        {} {} {}
        library {{ function {{
          signature {{ name: "halves"
            input_arg {{ name: "v" type: DT_FLOAT }}
            output_arg {{ name: "parts" type: DT_FLOAT number_attr: "N" }}
            output_arg {{ name: "last" type: DT_FLOAT }}
            attr {{ name: "N" type: "int" }} }}
          node_def {{ name: "axis" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
            attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 0 }} }} }} }}
          node_def {{ name: "s" op: "Split" input: "axis:output:0" input: "v"
            attr {{ key: "T" value {{ type: DT_FLOAT }} }} attr {{ key: "num_split" value {{ placeholder: "N" }} }} }}
          ret {{ key: "parts" value: "s:output" }}
          ret {{ key: "last" value: "s:output:1" }}
        }} }}"#,
        identity("p0", "c"),
        identity("p1", "c:1"),
        identity("l", "c:2"),
    );
    let g = import(&src).unwrap();
    assert_eq!(node(&g, "c/s").get_attr::<i64>("num_split").unwrap(), 2);
    assert_eq!(node(&g, "Func/c/output/_0").input, ["c/s"]);
    assert_eq!(node(&g, "Func/c/output/_1").input, ["c/s:1"]);
    assert_eq!(node(&g, "Func/c/output/_2").input, ["c/s:1"]);
    assert_eq!(node(&g, "p1").input, ["Func/c/output/_1"]);
    assert_eq!(node(&g, "l").input, ["Func/c/output/_2"]);
    assert_eq!(
        node(&g, "c").get_attr::<Vec<DType>>("T").unwrap(),
        [DType::F32; 3]
    );
}

/// `bump(v: resource, d: float) -> (y: float)`: adds `d` to the variable and
/// returns `d * 2`; the assignment is a stateful body node nobody reads.
const BUMP: &str = r#"
  function {
    signature { name: "bump" input_arg { name: "v" type: DT_RESOURCE } input_arg { name: "d" type: DT_FLOAT }
      output_arg { name: "y" type: DT_FLOAT } is_stateful: true }
    node_def { name: "assign" op: "AssignAddVariableOp" input: "v" input: "d" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "two" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2 } } } }
    node_def { name: "mul" op: "Mul" input: "d" input: "two:output:0" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "mul:z:0" }
  }"#;

const VAR: &str = r#"node { name: "v" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { } } } attr { key: "shared_name" value { s: "v" } } }"#;

#[test]
fn side_effects_gate_outputs_and_control_readers() {
    let src = format!(
        r#"{VAR} {X}
        node {{ name: "c" op: "bump" input: "v" input: "x" }}
        {}
        node {{ name: "after" op: "NoOp" input: "^c" }}
        library {{ {BUMP} }}"#,
        identity("out", "c")
    );
    let g = import(&src).unwrap();
    assert_eq!(node(&g, "Func/c/output_control_node").input, ["^c/assign"]);
    assert_eq!(
        node(&g, "Func/c/output/_0").input,
        ["c/mul", "^Func/c/output_control_node"]
    );
    assert_eq!(node(&g, "after").input, ["^c"]);
    assert_eq!(node(&g, "c").input, ["Func/c/output/_0"]);
    assert_eq!(
        node(&g, "Func/c/input/_0").get_attr::<DType>("T").unwrap(),
        DType::Resource
    );
}

/// A call's control inputs gate its whole body, through its input Identities
/// and, for nodes without inputs, the input control node.
#[test]
fn control_inputs_of_a_call_gate_the_body() {
    let src = format!(
        r#"{X} node {{ name: "first" op: "NoOp" }}
        node {{ name: "c" op: "zero" input: "^first" }}
        node {{ name: "d" op: "double" input: "x" input: "^first" input: "^c" }}
        library {{ {DOUBLE}
          function {{ signature {{ name: "zero" output_arg {{ name: "z" type: DT_FLOAT }} }}
            node_def {{ name: "k" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
              attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: 0 }} }} }} }}
            ret {{ key: "z" value: "k:output:0" }} }} }}"#
    );
    let g = import(&src).unwrap();
    assert_eq!(node(&g, "Func/c/input_control_node").input, ["^first"]);
    assert_eq!(node(&g, "c/k").input, ["^Func/c/input_control_node"]);
    assert_eq!(
        node(&g, "Func/d/input_control_node").input,
        ["^first", "^c"]
    );
    assert_eq!(
        node(&g, "Func/d/input/_0").input,
        ["x", "^Func/d/input_control_node"]
    );
}

#[test]
fn placeholders_bind_from_the_call() {
    let lib = r#"library { function {
        signature { name: "cast_to" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "b" type_attr: "T" }
          attr { name: "T" type: "type" } }
        node_def { name: "cast" op: "Cast" input: "a" attr { key: "SrcT" value { type: DT_FLOAT } }
          attr { key: "DstT" value { placeholder: "T" } } }
        ret { key: "b" value: "cast:y:0" } } }"#;
    let with = |attrs: &str| {
        format!(
            r#"{X} node {{ name: "c" op: "PartitionedCall" input: "x"
              attr {{ key: "f" value {{ func {{ name: "cast_to" {attrs} }} }} }}
              attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }}
              attr {{ key: "Tout" value {{ list {{ type: DT_INT32 }} }} }} }} {lib}"#
        )
    };
    let g = import(&with(r#"attr { key: "T" value { type: DT_INT32 } }"#)).unwrap();
    assert_eq!(
        node(&g, "c/cast").get_attr::<DType>("DstT").unwrap(),
        DType::I32
    );
    assert_eq!(
        node(&g, "Func/c/output/_0").get_attr::<DType>("T").unwrap(),
        DType::I32
    );
    // Called by op name, the node's attributes bind them.
    let g = import(&format!(
        r#"{X} node {{ name: "c" op: "cast_to" input: "x" attr {{ key: "T" value {{ type: DT_INT64 }} }} }} {lib}"#
    ))
    .unwrap();
    assert_eq!(
        node(&g, "c/cast").get_attr::<DType>("DstT").unwrap(),
        DType::I64
    );
    // Unbound: the signature needs T for its output first.
    let e = import(&with("")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("attr 'T' is not set"), "{e}");
    assert_eq!(e.node(), Some("c"));
}

#[test]
fn an_unbound_placeholder_names_the_body_node() {
    let src = format!(
        r#"{X} node {{ name: "c" op: "f" input: "x" }}
        library {{ function {{
          signature {{ name: "f" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type: DT_FLOAT }} }}
          node_def {{ name: "id" op: "Identity" input: "a" attr {{ key: "T" value {{ placeholder: "U" }} }} }}
          ret {{ key: "b" value: "id:output:0" }} }} }}"#
    );
    let e = import(&src).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.node(), Some("c/id"));
    assert!(e.message().contains("placeholder 'U'"), "{e}");
}

#[test]
fn devices_colocation_and_frames_are_renamed() {
    let src = format!(
        r#"{X} node {{ name: "c" op: "f" input: "x" device: "/job:w/task:1/device:CPU:0" }}
        library {{ function {{
          signature {{ name: "f" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type: DT_FLOAT }} }}
          node_def {{ name: "e" op: "Enter" input: "a" device: "/device:CPU:1"
            attr {{ key: "T" value {{ type: DT_FLOAT }} }} attr {{ key: "frame_name" value {{ s: "loop" }} }}
            attr {{ key: "_class" value {{ list {{ s: "loc:@a" s: "loc:@x2" s: "loc:@elsewhere" }} }} }} }}
          node_def {{ name: "x2" op: "Exit" input: "e:output:0" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
          ret {{ key: "b" value: "x2:output:0" }} }} }}"#
    );
    let g = import(&src).unwrap();
    let e = node(&g, "c/e");
    assert_eq!(e.device, "/job:w/task:1/device:CPU:1");
    assert_eq!(e.get_attr::<String>("frame_name").unwrap(), "c/loop");
    assert_eq!(
        e.get_attr::<Vec<String>>("_class").unwrap(),
        ["loc:@Func/c/input/_0", "loc:@c/x2", "loc:@elsewhere"]
    );
    assert_eq!(node(&g, "c/x2").device, "/job:w/task:1/device:CPU:0");
    assert_eq!(
        node(&g, "Func/c/output/_0").device,
        "/job:w/task:1/device:CPU:0"
    );
    let opts = ImportOptions::default().with_clear_devices(true);
    let g = graph_def_from_tf_text(&src, &opts).unwrap();
    assert!(g.node.iter().all(|n| n.device.is_empty()));
}

#[test]
fn unused_functions_are_never_read() {
    // A broken function nobody calls: undefined attr kinds, dangling inputs, no ret.
    let src = format!(
        r#"{X} {} library {{ {DOUBLE} function {{
          signature {{ name: "broken" output_arg {{ name: "y" type: DT_FLOAT }} }}
          node_def {{ name: "n" op: "NoSuchOp" input: "nowhere" attr {{ key: "s" value {{ s: "\377" }} }} }} }}
          gradient {{ function_name: "double" gradient_func: "broken" }} }}"#,
        identity("out", "x")
    );
    let g = import(&src).unwrap();
    assert_eq!(names(&g), ["x", "out"]);
}

/// Each error names the node at fault and says what is wrong.
#[test]
fn errors_name_the_node() {
    let f = |body: &str| {
        format!(
            r#"function {{ signature {{ name: "f" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type: DT_FLOAT }} }}
            {body} }}"#
        )
    };
    let id = |name: &str, input: &str| {
        format!(
            r#"node_def {{ name: "{name}" op: "Identity" input: "{input}" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}"#
        )
    };
    let ret = r#"ret { key: "b" value: "i:output:0" }"#;
    let good = f(&format!("{} {ret}", id("i", "a")));
    let cases: Vec<(String, Code, &str, &str)> = vec![
        (
            format!("{X} {} library {{ {good} }}", call("c", "g", &["x"], 1, 1)),
            Code::NotFound,
            "c",
            "calls function 'g', which the graph's library does not define",
        ),
        (
            format!(
                "{X} {} library {{ {good} }}",
                call("c", "f", &["x", "x"], 2, 1)
            ),
            Code::InvalidArgument,
            "c",
            "calls function 'f' with 2 input(s), but its signature takes 1",
        ),
        (
            format!("{X} {} library {{ {good} }}", call("c", "f", &["x"], 1, 2)),
            Code::InvalidArgument,
            "c",
            "Tout is [float32, float32], but function 'f' returns [float32]",
        ),
        (
            format!(
                "{X} {} {} library {{ {good} }}",
                call("c", "f", &["x"], 1, 1),
                identity("r", "c:1")
            ),
            Code::InvalidArgument,
            "r",
            "input 'c:1' reads output 1 of the call to function 'f', which has 1 output(s)",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&format!("{} {ret}", id("i", "zz")))
            ),
            Code::InvalidArgument,
            "c/i",
            "input 'zz' names no argument or node of function 'f'",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&format!("{} {} {ret}", id("j", "a"), id("i", "j:out:0")))
            ),
            Code::InvalidArgument,
            "c/i",
            "node 'j' has no output argument 'out' (it has: output)",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&format!("{} {} {ret}", id("j", "a"), id("i", "j:output:1")))
            ),
            Code::InvalidArgument,
            "c/i",
            "input 'j:output:1' reads tensor 1 of output 'output', which has 1",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&format!("{} {ret}", id("i", "a:1")))
            ),
            Code::InvalidArgument,
            "c/i",
            "input 'a:1' reads tensor 1 of a list of 1",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&id("i", "a"))
            ),
            Code::InvalidArgument,
            "c",
            "function 'f' returns nothing for its output 'b'",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&format!(
                    r#"{} {ret} control_ret {{ key: "k" value: "ghost" }}"#,
                    id("i", "a")
                ))
            ),
            Code::InvalidArgument,
            "c",
            "control output 'k' of function 'f' names 'ghost'",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&format!("{} {} {ret}", id("i", "a"), id("i", "a")))
            ),
            Code::InvalidArgument,
            "c/i",
            "function 'f' has two nodes of this name",
        ),
        (
            format!(
                "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
                f(&format!("{} {ret}", id("i", "j")))
                    .replace("node_def", r#"node_def { name: "j" op: "NoOp" } node_def"#)
            ),
            Code::InvalidArgument,
            "c/i",
            "names a body node of 'f' without saying which output",
        ),
    ];
    for (src, code, node, want) in cases {
        let e = import(&src).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
        assert_eq!(e.node(), Some(node), "{e}");
        assert!(e.message().contains(want), "'{e}' should contain '{want}'");
    }
}

/// `f` calls `g` calls `f`: found wherever the cycle closes, by the call that
/// closes it; a function calling itself directly too.
#[test]
fn recursion_is_an_error() {
    let calls = |from: &str, to: &str| {
        format!(
            r#"function {{ signature {{ name: "{from}" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type: DT_FLOAT }} }}
              node_def {{ name: "n" op: "{to}" input: "a" }} ret {{ key: "b" value: "n:b:0" }} }}"#
        )
    };
    let src = format!(
        "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} {} }}",
        calls("f", "g"),
        calls("g", "f")
    );
    let e = import(&src).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.node(), Some("c/n/n"));
    assert!(
        e.message()
            .contains("function 'f' calls itself (f -> g -> f)"),
        "{e}"
    );
    let src = format!(
        "{X} node {{ name: \"c\" op: \"f\" input: \"x\" }} library {{ {} }}",
        calls("f", "f")
    );
    let e = import(&src).unwrap_err();
    assert!(e.message().contains("(f -> f)"), "{e}");
}

/// A chain of distinct functions deeper than [`MAX_CALL_DEPTH`] is refused; one
/// exactly that deep is fine.
#[test]
fn nesting_depth_is_bounded() {
    let chain = |depth: usize| {
        let mut lib = String::new();
        for i in 0..depth {
            let body = if i + 1 == depth {
                r#"node_def { name: "n" op: "Identity" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
                   ret { key: "b" value: "n:output:0" }"#
                    .to_owned()
            } else {
                format!(
                    r#"node_def {{ name: "n" op: "f{}" input: "a" }} ret {{ key: "b" value: "n:b:0" }}"#,
                    i + 1
                )
            };
            lib.push_str(&format!(
                r#"function {{ signature {{ name: "f{i}" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type: DT_FLOAT }} }} {body} }}"#
            ));
        }
        format!("{X} node {{ name: \"c\" op: \"f0\" input: \"x\" }} library {{ {lib} }}")
    };
    let g = import(&chain(MAX_CALL_DEPTH)).unwrap();
    assert!(g
        .find(&format!("c{}", "/n".repeat(MAX_CALL_DEPTH)))
        .is_some());
    let e = import(&chain(MAX_CALL_DEPTH + 1)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("nest more than 64 deep"), "{e}");
    assert_eq!(
        e.node(),
        Some(format!("c{}", "/n".repeat(MAX_CALL_DEPTH)).as_str())
    );
}

/// Twenty-four levels of a function calling the next twice would make 2^24
/// copies: the node budget stops it, before building anything, with
/// RESOURCE_EXHAUSTED.
#[test]
fn exponential_growth_is_bounded() {
    let mut lib = String::new();
    let levels = 24;
    for i in 0..levels {
        let body = if i + 1 == levels {
            r#"node_def { name: "n" op: "Identity" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
               ret { key: "b" value: "n:output:0" }"#
                .to_owned()
        } else {
            format!(
                r#"node_def {{ name: "l" op: "g{n}" input: "a" }} node_def {{ name: "r" op: "g{n}" input: "a" }}
                   node_def {{ name: "s" op: "AddV2" input: "l:b:0" input: "r:b:0" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
                   ret {{ key: "b" value: "s:z:0" }}"#,
                n = i + 1
            )
        };
        lib.push_str(&format!(
            r#"function {{ signature {{ name: "g{i}" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type: DT_FLOAT }} }} {body} }}"#
        ));
    }
    let e = import(&format!(
        "{X} node {{ name: \"c\" op: \"g0\" input: \"x\" }} library {{ {lib} }}"
    ))
    .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert_eq!(e.node(), Some("c"));
}

/// Names the flat graph would reuse get a suffix instead.
#[test]
fn auxiliary_names_never_collide() {
    let src = format!(
        "{X} node {{ name: \"Func/c/input/_0\" op: \"NoOp\" }} {} library {{ {DOUBLE} }}",
        call("c", "double", &["x"], 1, 1)
    );
    let g = import(&src).unwrap();
    assert_eq!(node(&g, "c/mul").input, ["Func/c/input/_0_1", "c/two"]);
}

/// The full FunctionDef survives the text format both ways.
#[test]
fn libraries_round_trip_through_text() {
    let src = format!(
        r#"library {{ {DOUBLE} {BUMP}
          function {{ signature {{ name: "g" input_arg {{ name: "l" type_list_attr: "Ts" }}
              output_arg {{ name: "o" type_attr: "T" number_attr: "N" is_ref: true handle_data {{ dtype: DT_FLOAT shape {{ dim {{ size: 2 }} }} }} }}
              attr {{ name: "N" type: "int" default_value {{ i: 2 }} has_minimum: true minimum: 1 }}
              attr {{ name: "T" type: "type" allowed_values {{ list {{ type: DT_FLOAT }} }} }}
              control_output: "side" summary: "s" description: "d" deprecation {{ version: 3 explanation: "no" }}
              is_stateful: true is_commutative: true is_aggregate: true allows_uninitialized_input: true
              is_distributed_communication: true }}
            attr {{ key: "_noinline" value {{ b: true }} }}
            arg_attr {{ key: 0 value {{ attr {{ key: "_user" value {{ s: "u" }} }} }} }}
            resource_arg_unique_id {{ key: 0 value: 7 }}
            control_ret {{ key: "side" value: "n" }} }}
          gradient {{ function_name: "g" gradient_func: "double" }}
          registered_gradients {{ gradient_func: "double" registered_op_type: "Foo" }} }}"#
    );
    let p = crate::proto::text::parse_graph_def(&src).unwrap();
    let lib = p.library.as_ref().unwrap();
    let g = &lib.function[2];
    assert_eq!(
        g.signature.as_ref().unwrap().output_arg[0]
            .handle_data
            .len(),
        1
    );
    assert_eq!(g.resource_arg_unique_id.get(&0), Some(&7));
    assert_eq!(
        lib.function[0].ret.get("y").map(String::as_str),
        Some("mul:z:0")
    );
    let text = crate::proto::text::write_graph_def(&p);
    assert_eq!(crate::proto::text::parse_graph_def(&text).unwrap(), p);
    use prost::Message;
    assert_eq!(
        pb::GraphDef::decode(p.encode_to_vec().as_slice()).unwrap(),
        p
    );
}

/// What is left after inlining is checked as any graph is: a body op actorflow
/// lacks is reported by validation, under its inlined name.
#[test]
fn inlined_nodes_are_validated() {
    let src = format!(
        r#"{X} node {{ name: "c" op: "f" input: "x" }} library {{ function {{
          signature {{ name: "f" input_arg {{ name: "a" type: DT_FLOAT }} }}
          node_def {{ name: "p" op: "NoSuchOp" input: "a" }} }} }}"#
    );
    let e = import(&src).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains("node 'c/p' (op NoSuchOp)"), "{e}");
    let g = graph_def_from_tf_text(&src, &ImportOptions::default().with_validate(false)).unwrap();
    assert_eq!(node(&g, "c").op, "NoOp");
    let _ = Tensor::scalar(0f32);
}

/// `If` lowers to Switch/Merge around calls of its branches (then inlined); the
/// If's readers read the output Merges, `^if` the node left in its place.
#[test]
fn if_lowers_to_switch_and_merge() {
    let src = format!(
        r#"{X} node {{ name: "p" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_BOOL }} }} }}
        node {{ name: "if" op: "StatelessIf" input: "p" input: "x" input: "^x"
          attr {{ key: "Tcond" value {{ type: DT_BOOL }} }}
          attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }} attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }}
          attr {{ key: "then_branch" value {{ func {{ name: "double" }} }} }}
          attr {{ key: "else_branch" value {{ func {{ name: "double" }} }} }} }}
        {} node {{ name: "after" op: "NoOp" input: "^if" }}
        library {{ {DOUBLE} }}"#,
        identity("out", "if"),
    );
    let g = import(&src).unwrap();
    assert_eq!(node(&g, "if/switch_pred").input, ["p", "p", "^x"]);
    assert_eq!(node(&g, "if/input_0").input, ["x", "p"]);
    assert_eq!(node(&g, "Func/if/then/input/_0").input[0], "if/input_0:1");
    assert_eq!(
        node(&g, "Func/if/then/input_control_node").input,
        ["^if/pivot_t"]
    );
    assert_eq!(node(&g, "Func/if/else/input/_0").input[0], "if/input_0");
    assert_eq!(
        node(&g, "if/output_0").input,
        ["Func/if/then/output/_0", "Func/if/else/output/_0"]
    );
    assert_eq!(
        node(&g, "if/branch_executed").input,
        ["if/pivot_t", "if/pivot_f", "^if/then", "^if/else"]
    );
    assert_eq!(node(&g, "out").input, ["if/output_0"]);
    let stand_in = node(&g, "if");
    assert_eq!(stand_in.op, "IdentityN");
    assert_eq!(stand_in.input, ["if/output_0", "^if/branch_executed"]);
    assert_eq!(node(&g, "after").input, ["^if"]);
}

/// `While` lowers to a frame named after it: Enter, Merge with NextIteration,
/// the condition's call feeding LoopCond, Switch, the body's call, Exit.
#[test]
fn while_lowers_to_a_frame() {
    let src = format!(
        r#"{X} node {{ name: "w" op: "While" input: "x"
          attr {{ key: "T" value {{ list {{ type: DT_FLOAT }} }} }}
          attr {{ key: "parallel_iterations" value {{ i: 3 }} }}
          attr {{ key: "cond" value {{ func {{ name: "small" }} }} }}
          attr {{ key: "body" value {{ func {{ name: "double" }} }} }} }}
        {} library {{ {DOUBLE}
          function {{ signature {{ name: "small" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "b" type: DT_BOOL }} }}
            node_def {{ name: "ten" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
              attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: 10 }} }} }} }}
            node_def {{ name: "less" op: "Less" input: "a" input: "ten:output:0" {{T}} }}
            ret {{ key: "b" value: "less:z:0" }} }} }}"#,
        identity("out", "w"),
    )
    .replace("{T}", r#"attr { key: "T" value { type: DT_FLOAT } }"#);
    let g = import(&src).unwrap();
    let enter = node(&g, "w/enter_0");
    assert_eq!(enter.get_attr::<String>("frame_name").unwrap(), "w");
    assert_eq!(enter.get_attr::<i64>("parallel_iterations").unwrap(), 3);
    assert_eq!(
        node(&g, "w/merge_0").input,
        ["w/enter_0", "w/next_iteration_0"]
    );
    assert_eq!(
        node(&g, "Func/w/cond/input_control_node").input,
        ["^w/merge_0"]
    );
    assert_eq!(node(&g, "w/LoopCond").input, ["Func/w/cond/output/_0"]);
    assert_eq!(node(&g, "w/switch_0").input, ["w/merge_0", "w/LoopCond"]);
    assert_eq!(node(&g, "Func/w/body/input/_0").input[0], "w/switch_0:1");
    assert_eq!(
        node(&g, "w/next_iteration_0").input,
        ["Func/w/body/output/_0"]
    );
    assert_eq!(node(&g, "w/exit_0").input, ["w/switch_0"]);
    assert_eq!(node(&g, "out").input, ["w/exit_0"]);
    assert_eq!(node(&g, "w").input, ["w/exit_0"]);
}

#[test]
fn functional_control_flow_errors() {
    let if_node = |tcond: &str, then: &str| {
        format!(
            r#"{X} node {{ name: "p" op: "Placeholder" attr {{ key: "dtype" value {{ type: {tcond} }} }} }}
            node {{ name: "if" op: "If" input: "p" input: "x"
              attr {{ key: "Tcond" value {{ type: {tcond} }} }}
              attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }} attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }}
              attr {{ key: "then_branch" value {{ func {{ name: "{then}" }} }} }}
              attr {{ key: "else_branch" value {{ func {{ name: "double" }} }} }} }}
            library {{ {DOUBLE} }}"#
        )
    };
    let e = import(&if_node("DT_BOOL", "nowhere")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert_eq!(e.node(), Some("if"));
    assert!(
        e.message()
            .contains("attr 'then_branch' names function 'nowhere'"),
        "{e}"
    );
    let e = import(&if_node("DT_INT32", "double")).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e}");
    assert!(e.message().contains("only bool predicates"), "{e}");
    let w = format!(
        r#"{X} node {{ name: "w" op: "StatelessWhile" input: "x" input: "x"
          attr {{ key: "T" value {{ list {{ type: DT_FLOAT }} }} }}
          attr {{ key: "cond" value {{ func {{ name: "double" }} }} }}
          attr {{ key: "body" value {{ func {{ name: "double" }} }} }} }}
        library {{ {DOUBLE} }}"#
    );
    let e = import(&w).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("has 2 input(s), but T lists 1"), "{e}");
}

/// Lowered and inlined names that another node already has get a suffix
/// (`if/input_0_1`, a body under `c_1/`) instead of colliding.
#[test]
fn lowered_and_body_names_never_collide() {
    let src = format!(
        r#"{X} node {{ name: "p" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_BOOL }} }} }}
        node {{ name: "if/input_0" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "if" op: "If" input: "p" input: "if/input_0"
          attr {{ key: "Tcond" value {{ type: DT_BOOL }} }}
          attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }} attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }}
          attr {{ key: "then_branch" value {{ func {{ name: "double" }} }} }}
          attr {{ key: "else_branch" value {{ func {{ name: "double" }} }} }} }}
        node {{ name: "c/mul" op: "NoOp" }}
        {} library {{ {DOUBLE} }}"#,
        call("c", "double", &["x"], 1, 1)
    );
    let g = import(&src).unwrap();
    assert_eq!(node(&g, "if/input_0_1").input, ["if/input_0", "p"]);
    assert_eq!(node(&g, "c_1/mul").input, ["Func/c/input/_0", "c_1/two"]);
    assert_eq!(node(&g, "c/mul").op, "NoOp");
}
