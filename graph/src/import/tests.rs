//! Tests of the import API on hand-written graphs: conversion options, every kind
//! of validation problem reported at once, and the file-level entry points.

use super::*;
use crate::{AttrValue, Code, DType, NodeDef, Tensor};

fn text(nodes: &str) -> String {
    format!("{nodes}\nversions {{ producer: 27 }}")
}

const CONST: &str = r#"node { name: "c" op: "Const"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }"#;

#[test]
fn options_and_underscore_attrs() {
    let src = text(&format!(
        r#"{CONST}
        node {{ name: "i" op: "Identity" input: "c" device: "/device:CPU:0"
          attr {{ key: "T" value {{ type: DT_FLOAT }} }}
          attr {{ key: "_class" value {{ list {{ s: "loc:@c" }} }} }}
          attr {{ key: "_output_shapes" value {{ list {{ shape {{ }} }} }} }}
          attr {{ key: "_xla_whatever" value {{ i: 3 }} }} }}"#
    ));
    let g = graph_def_from_tf_text(&src, &ImportOptions::default()).unwrap();
    let i = g.find("i").unwrap();
    assert_eq!(i.device, "/device:CPU:0");
    assert_eq!(i.get_attr::<Vec<String>>("_class").unwrap(), ["loc:@c"]);
    assert_eq!(i.get_attr::<i64>("_xla_whatever").unwrap(), 3);
    assert!(!i.attr.contains_key("_output_shapes"));
    assert_eq!(g.versions.producer, 27);
    let opts = ImportOptions {
        clear_devices: true,
        ..Default::default()
    };
    let g = graph_def_from_tf_text(&src, &opts).unwrap();
    assert_eq!(g.find("i").unwrap().device, "");
}

#[test]
fn unknown_ops_are_listed_together_as_not_found() {
    let src = text(
        r#"node { name: "a" op: "NoSuchOpA" }
           node { name: "b" op: "NoSuchOpB" input: "a" }
           node { name: "c" op: "NoSuchOpC" input: "b:1" }"#,
    );
    let e = graph_def_from_tf_text(&src, &ImportOptions::default()).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let m = e.message();
    assert!(m.starts_with("3 problems"), "{e}");
    for (n, op) in [("a", "NoSuchOpA"), ("b", "NoSuchOpB"), ("c", "NoSuchOpC")] {
        assert!(
            m.contains(&format!(
                "node '{n}' (op {op}): op '{op}' is not registered"
            )),
            "{e}"
        );
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let src = text(&format!(
        r#"{CONST}
        node {{ name: "c" op: "NoOp" }}
        node {{ name: "unknown" op: "Bogus" }}
        node {{ name: "extra_attr" op: "Identity" input: "c"
          attr {{ key: "T" value {{ type: DT_FLOAT }} }}
          attr {{ key: "colour" value {{ s: "red" }} }} }}
        node {{ name: "wrong_kind" op: "Identity" input: "c" attr {{ key: "T" value {{ i: 1 }} }} }}
        node {{ name: "missing_attr" op: "Identity" input: "c" }}
        node {{ name: "dangling" op: "Identity" input: "nowhere:0" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "bad_port" op: "Identity" input: "c:3" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "bad_input" op: "Identity" input: "x:y" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "too_many" op: "Identity" input: "c" input: "c" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "complex" op: "Identity" input: "c" attr {{ key: "T" value {{ type: DT_COMPLEX64 }} }} }}
        node {{ name: "wrong_type" op: "Identity" input: "c" attr {{ key: "T" value {{ type: DT_INT32 }} }} }}
        node {{ op: "NoOp" }}"#
    ));
    let e = graph_def_from_tf_text(&src, &ImportOptions::default()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let m = e.message();
    let want = [
        "node 'c' (op NoOp): duplicate node name",
        "node 'unknown' (op Bogus): op 'Bogus' is not registered",
        "node 'extra_attr' (op Identity): attr 'colour' is not defined by op Identity",
        "node 'wrong_kind' (op Identity): attr 'T' has kind int, expected type",
        "node 'missing_attr' (op Identity): Identity is missing required attr 'T'",
        "node 'dangling' (op Identity): input 'nowhere:0' names no node in the graph",
        "node 'bad_port' (op Identity): input 'c:3' reads output 3 of node 'c' (op Const), which has 1 output(s)",
        "node 'bad_input' (op Identity): malformed tensor name 'x:y'",
        "node 'too_many' (op Identity): Identity expects 1 data inputs, got 2",
        "node 'complex' (op Identity): attr 'T': data type DT_COMPLEX64 is not supported",
        "node 'wrong_type' (op Identity): input 0 ('c') is float32, expected int32",
        "node #12 (op NoOp) has an empty name",
    ];
    for w in want {
        assert!(m.contains(w), "missing '{w}' in:\n{m}");
    }
    assert!(m.starts_with(&format!("{} problems", want.len())), "{m}");
    // Without validation only conversion problems remain.
    let opts = ImportOptions {
        validate: false,
        ..Default::default()
    };
    let e = graph_def_from_tf_text(&src, &opts).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    assert_eq!(e.node(), Some("complex"));
}

/// Calls of library functions are inlined (see `inline::tests`); any other use
/// of a library function (a `func` attribute of an op that is not a call) is
/// still reported.
#[test]
fn library_functions_used_by_nodes() {
    let src = r#"
      node { name: "call" op: "f" }
      node { name: "pc" op: "PartitionedCall" attr { key: "f" value { func { name: "g" } } } }
      node { name: "uses" op: "NoOp" attr { key: "_f" value { func { name: "f" } } } }
      node { name: "ok" op: "NoOp" attr { key: "_f" value { func { name: "not_in_library" } } } }
      library { function { signature { name: "f" } } function { signature { name: "g" } } }"#;
    let e = graph_def_from_tf_text(src, &ImportOptions::default()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.node(), Some("uses"));
    assert!(
        e.message()
            .contains("node 'uses' (op NoOp): attr '_f' refers to function 'f'"),
        "{e}"
    );
    let ok = src.replace(
        r#"node { name: "uses" op: "NoOp" attr { key: "_f" value { func { name: "f" } } } }"#,
        "",
    );
    let g = graph_def_from_tf_text(&ok, &ImportOptions::default()).unwrap();
    assert_eq!(g.find("call").unwrap().op, "NoOp");
    assert_eq!(g.find("pc").unwrap().op, "NoOp");
    // An unused library is fine.
    let src = format!("{CONST} library {{ function {{ signature {{ name: \"f\" }} }} }}");
    assert_eq!(
        graph_def_from_tf_text(&src, &ImportOptions::default())
            .unwrap()
            .node
            .len(),
        1
    );
}

#[test]
fn tensor_limit_applies_to_constants() {
    let src = r#"node { name: "big" op: "Const"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1000 } } float_val: 1 } } } }"#;
    let opts = ImportOptions {
        max_tensor_bytes: 100,
        ..Default::default()
    };
    let e = graph_def_from_tf_text(src, &opts).unwrap_err();
    assert!(
        e.message().contains("node 'big' (op Const): attr 'value'"),
        "{e}"
    );
    assert!(graph_def_from_tf_text(src, &ImportOptions::default()).is_ok());
}

#[test]
fn binary_errors_are_data_loss() {
    let g = GraphDef {
        node: vec![NodeDef::new("c", "Const")
            .with_attr("dtype", DType::F32)
            .with_attr("value", Tensor::vector(&[1.0f32, 2.0]))],
        ..Default::default()
    };
    let bytes = graph_def_to_tf_bytes(&g).unwrap();
    let opts = ImportOptions::default();
    assert_eq!(graph_def_from_tf_bytes(&bytes, &opts).unwrap(), g);
    let e = graph_def_from_tf_bytes(&bytes[..bytes.len() - 3], &opts).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert!(e.message().contains("binary TensorFlow GraphDef"), "{e}");
    // Field 1 (node) as a varint instead of a message.
    let e = graph_def_from_tf_bytes(&[0x08, 0x01], &opts).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert!(graph_def_from_tf_bytes(&[], &opts).unwrap().node.is_empty());
}

#[test]
fn json_goes_through_the_same_checks() {
    let g = GraphDef {
        node: vec![NodeDef::new("x", "Placeholder")
            .with_attr("dtype", DType::F32)
            .with_attr("_output_shapes", AttrValue::empty_list())
            .with_device("/cpu:0")],
        ..Default::default()
    };
    let opts = ImportOptions {
        clear_devices: true,
        ..Default::default()
    };
    let back = graph_def_from_json(&g.to_json().unwrap(), &opts).unwrap();
    assert_eq!(back.node[0].device, "");
    assert!(!back.node[0].attr.contains_key("_output_shapes"));
    let bad = GraphDef {
        node: vec![NodeDef::new("x", "Nope")],
        ..Default::default()
    };
    let e = graph_def_from_json(&bad.to_json().unwrap(), &opts).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[test]
fn files_by_extension() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let opts = ImportOptions::default();
    let e = load_graph_def(&dir.join("missing.pb"), &opts).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("missing.pb"), "{e}");
    let e = load_graph_def(&dir.join("graph.onnx"), &opts).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(save_graph_def(&dir.join("graph.onnx"), &GraphDef::default()).is_err());
    let bad_text = dir.join("bad.pbtxt");
    std::fs::write(&bad_text, b"node { name: \xff }").unwrap();
    let e = load_graph_def(&bad_text, &opts).unwrap_err();
    assert!(
        e.message().contains("bad.pbtxt") && e.message().contains("UTF-8"),
        "{e}"
    );
    std::fs::write(&bad_text, "node { name: 'x' op: }").unwrap();
    let e = load_graph_def(&bad_text, &opts).unwrap_err();
    assert!(e.message().contains("line 1"), "{e}");
    let upper = dir.join("g.PBTXT");
    std::fs::write(&upper, CONST).unwrap();
    assert_eq!(load_graph_def(&upper, &opts).unwrap().node.len(), 1);
}

/// Attributes out of the range TensorFlow accepts are INVALID_ARGUMENT naming the
/// node, found at import before anything is sized by them.
#[test]
fn attrs_out_of_range_are_invalid_argument_naming_the_node() {
    let enter = |pi: i64| {
        format!(
            r#"{CONST}
            node {{ name: "e" op: "Enter" input: "c"
              attr {{ key: "T" value {{ type: DT_FLOAT }} }}
              attr {{ key: "frame_name" value {{ s: "w" }} }}
              attr {{ key: "parallel_iterations" value {{ i: {pi} }} }} }}"#
        )
    };
    let placeholder = |dims: &str| {
        format!(
            r#"node {{ name: "p" op: "Placeholder"
              attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
              attr {{ key: "shape" value {{ shape {{ {dims} }} }} }} }}"#
        )
    };
    let split = |n: i64| {
        format!(
            r#"{CONST}
            node {{ name: "axis" op: "Const"
              attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
              attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 0 }} }} }} }}
            node {{ name: "s" op: "Split" input: "axis" input: "c"
              attr {{ key: "T" value {{ type: DT_FLOAT }} }}
              attr {{ key: "num_split" value {{ i: {n} }} }} }}"#
        )
    };
    let dim = |d: i64| format!("dim {{ size: {d} }} ");
    let cases = [
        (
            enter(0),
            "e",
            "parallel_iterations' has value 0 less than minimum 1",
        ),
        (enter(-3), "e", "less than minimum 1"),
        (
            enter(1 << 31),
            "e",
            "value 2147483648 out of range for an int32",
        ),
        (
            placeholder(&dim(1 << 40).repeat(2)),
            "p",
            "more than 2**63 - 1 elements",
        ),
        (placeholder(&dim(1).repeat(255)), "p", "255 dimensions"),
        (placeholder(&dim(-2)), "p", "invalid dimension size -2"),
        (split(0), "s", "num_split' has value 0 less than minimum 1"),
        (split(1 << 40), "s", "more than the 1048576"),
    ];
    for (src, node, want) in cases {
        let e = graph_def_from_tf_text(&text(&src), &ImportOptions::default()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(e.node(), Some(node), "{e}");
        assert!(e.message().contains(want), "'{e}' should contain '{want}'");
    }
    // The largest values TensorFlow accepts still import.
    for src in [
        enter(i32::MAX as i64),
        placeholder(&format!("{}{}", dim(-1), dim(1 << 62))),
        placeholder(&format!("{}{}{}", dim(0), dim(1 << 62), dim(1 << 62))),
    ] {
        graph_def_from_tf_text(&text(&src), &ImportOptions::default()).unwrap();
    }
}

/// The streaming binary import gives what decoding the whole message first gives,
/// for TensorFlow's own files (one with a function library and versions), and for
/// a message whose fields are interleaved (protobuf merges repeated occurrences of
/// a singular field, in order).
#[test]
fn streaming_binary_import_equals_whole_message_decode() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let opts = ImportOptions::default();
    for name in ["functions.pb", "cond.pb", "variables.pb", "complex.pb"] {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let whole = pb::GraphDef::decode(bytes.as_slice()).unwrap();
        assert!(!whole.node.is_empty(), "{name}");
        // Errors too (complex.pb holds a dtype actorflow does not support).
        assert_eq!(
            graph_def_from_tf_bytes(&bytes, &opts).map_err(|e| e.to_string()),
            graph_def_from_tf_proto(&whole, &opts).map_err(|e| e.to_string()),
            "{name}"
        );
    }
    let bytes = std::fs::read(dir.join("functions.pb")).unwrap();
    let whole = pb::GraphDef::decode(bytes.as_slice()).unwrap();
    assert!(whole.library.is_some() && whole.versions.is_some());
    // Versions first, then the nodes one message each, with a second versions
    // message in between that protobuf merges into the first.
    let mut interleaved = Vec::new();
    let versions = pb::GraphDef {
        versions: whole.versions.clone(),
        ..Default::default()
    };
    versions.encode(&mut interleaved).unwrap();
    for (i, n) in whole.node.iter().enumerate() {
        pb::GraphDef {
            node: vec![n.clone()],
            ..Default::default()
        }
        .encode(&mut interleaved)
        .unwrap();
        if i == 0 {
            pb::GraphDef {
                library: whole.library.clone(),
                ..Default::default()
            }
            .encode(&mut interleaved)
            .unwrap();
        }
    }
    assert_eq!(
        pb::GraphDef::decode(interleaved.as_slice()).unwrap(),
        whole,
        "the interleaved message means the same"
    );
    assert_eq!(
        graph_def_from_tf_bytes(&interleaved, &opts).unwrap(),
        graph_def_from_tf_proto(&whole, &opts).unwrap()
    );
}
