//! Tests of the text format of `GraphDef`: TensorFlow's own files (every
//! `.pbtxt` fixture reads and writes back byte for byte), TensorFlow-style
//! input, write/parse round trips of every message and field, the scalar and
//! string syntax, and malformed input.

use std::collections::BTreeMap;

use super::*;
use crate::proto::attr::{AttrValue, AttrValueKind, ListValue, NameAttrList};
use crate::proto::graph::{
    FunctionDef, FunctionDefLibrary, GradientDef, NodeDef, OpDef, VersionDef,
};
use crate::proto::tensor::{
    Dim, DtypeAndShape, ResourceHandleProto, TensorProto, TensorShapeProto, VariantTensorDataProto,
};

/// Text as TensorFlow's Python `text_format` prints it (abridged from a real graph).
const TF_STYLE: &str = r#"
node {
  name: "Const"
  op: "Const"
  attr {
    key: "dtype"
    value {
      type: DT_FLOAT
    }
  }
  attr {
    key: "value"
    value {
      tensor {
        dtype: DT_FLOAT
        tensor_shape {
          dim {
            size: 2
          }
        }
        tensor_content: "\000\000\200?\000\000\000@"
      }
    }
  }
}
node {
  name: "v"
  op: "VariableV2"
  device: "/device:CPU:0"
  attr {
    key: "_class"
    value {
      list {
        s: "loc:@v"
      }
    }
  }
  attr {
    key: "shape"
    value {
      shape {
        dim { size: -1 }
        dim { size: 3 }
      }
    }
  }
}
node {
  name: "add"
  op: "AddV2"
  input: "Const"
  input: "v:0"
  input: "^init"
}
library {
  function {
    signature {
      name: "f"
      input_arg { name: "x" type: DT_FLOAT }
    }
    node_def { name: "y" op: "Identity" input: "x" }
    ret { key: "y" value: "y:output:0" }
  }
}
versions {
  producer: 1882
  min_consumer: 12
}
"#;

#[test]
fn parses_tensorflow_output() {
    let g = parse_graph_def(TF_STYLE).unwrap();
    assert_eq!(g.node.len(), 3);
    let c = &g.node[0];
    let Some(AttrValueKind::Tensor(t)) = &c.attr["value"].value else {
        panic!("{c:?}")
    };
    assert_eq!(t.tensor_content[..], [0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
    assert_eq!(t.tensor_shape.as_ref().unwrap().dim[0].size, 2);
    let v = &g.node[1];
    assert_eq!(v.device, "/device:CPU:0");
    let Some(AttrValueKind::Shape(s)) = &v.attr["shape"].value else {
        panic!()
    };
    assert_eq!(s.dim.iter().map(|d| d.size).collect::<Vec<_>>(), [-1, 3]);
    assert_eq!(g.node[2].input, ["Const", "v:0", "^init"]);
    let lib = g.library.as_ref().unwrap();
    assert_eq!(lib.function[0].signature.as_ref().unwrap().name, "f");
    assert_eq!(lib.function[0].node_def[0].op, "Identity");
    assert_eq!(g.versions.as_ref().unwrap().producer, 1882);
}

fn attr(kind: AttrValueKind) -> AttrValue {
    AttrValue { value: Some(kind) }
}

fn shape(dims: &[i64]) -> TensorShapeProto {
    TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    }
}

fn rich_graph() -> GraphDef {
    let every_field = TensorProto {
        dtype: 1,
        tensor_shape: Some(shape(&[2, -1])),
        version_number: 1,
        tensor_content: (0..=255u8).collect::<Vec<u8>>().into(),
        float_val: vec![1.5, -0.0, f32::INFINITY, f32::NEG_INFINITY, 1e-30, 3.4e38],
        double_val: vec![0.1, 1e300],
        int_val: vec![i32::MIN, -1, 0, i32::MAX],
        string_val: vec![
            bytes::Bytes::from_static(b"a\"b'c\\"),
            bytes::Bytes::from_static(&[0, 10, 200, 255]),
        ],
        scomplex_val: vec![1.0, 2.0],
        int64_val: vec![i64::MIN, i64::MAX],
        bool_val: vec![true, false],
        dcomplex_val: vec![3.0, 4.0],
        half_val: vec![0x3c00],
        resource_handle_val: vec![ResourceHandleProto {
            device: "/cpu:0".into(),
            container: "c".into(),
            name: "n".into(),
            hash_code: u64::MAX,
            maybe_type_name: "Var".into(),
            dtypes_and_shapes: vec![DtypeAndShape {
                dtype: 1,
                shape: Some(shape(&[3])),
            }],
        }],
        variant_val: vec![VariantTensorDataProto {
            type_name: "T".into(),
            metadata: vec![1, 2],
            tensors: vec![TensorProto {
                dtype: 3,
                ..Default::default()
            }],
        }],
        uint32_val: vec![u32::MAX],
        uint64_val: vec![u64::MAX],
        float8_val: vec![7],
    };
    let func = NameAttrList {
        name: "f".into(),
        attr: BTreeMap::from([("T".to_string(), attr(AttrValueKind::Type(101)))]),
    };
    let list = ListValue {
        s: vec![b"x".to_vec(), vec![]],
        i: vec![-1, 2],
        f: vec![0.5],
        b: vec![true],
        r#type: vec![1, 19, 77],
        shape: vec![
            shape(&[]),
            TensorShapeProto {
                dim: vec![],
                unknown_rank: true,
            },
        ],
        tensor: vec![TensorProto::default()],
        func: vec![func.clone()],
    };
    let attrs = BTreeMap::from([
        ("a_list".to_string(), attr(AttrValueKind::List(list))),
        (
            "b_s".to_string(),
            attr(AttrValueKind::S(b"\x01\xff\n".to_vec())),
        ),
        ("c_i".to_string(), attr(AttrValueKind::I(0))),
        ("d_f".to_string(), attr(AttrValueKind::F(f32::NAN))),
        ("e_b".to_string(), attr(AttrValueKind::B(false))),
        ("f_type".to_string(), attr(AttrValueKind::Type(0))),
        (
            "g_shape".to_string(),
            attr(AttrValueKind::Shape(shape(&[1, 2]))),
        ),
        (
            "h_tensor".to_string(),
            attr(AttrValueKind::Tensor(Box::new(every_field))),
        ),
        (
            "i_ph".to_string(),
            attr(AttrValueKind::Placeholder("T".into())),
        ),
        ("j_func".to_string(), attr(AttrValueKind::Func(func))),
        ("k_empty".to_string(), AttrValue::default()),
        (String::new(), attr(AttrValueKind::S(vec![]))),
    ]);
    GraphDef {
        node: vec![
            NodeDef {
                name: "n/ü".into(),
                op: "Op".into(),
                input: vec!["a:1".into(), "^b".into()],
                device: "/job:w/task:0".into(),
                attr: attrs,
            },
            NodeDef::default(),
        ],
        library: Some(FunctionDefLibrary {
            function: vec![FunctionDef {
                signature: Some(OpDef {
                    name: "f".into(),
                    ..Default::default()
                }),
                node_def: vec![NodeDef {
                    name: "inner".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            gradient: vec![GradientDef {
                function_name: "f".into(),
                gradient_func: "g".into(),
            }],
            ..Default::default()
        }),
        version: 3,
        versions: Some(VersionDef {
            producer: 27,
            min_consumer: -1,
            bad_consumers: vec![1, 2],
        }),
    }
}

/// Equality that treats NaN floats as equal to each other (via the binary form).
fn same(a: &GraphDef, b: &GraphDef) -> bool {
    use prost::Message;
    a.encode_to_vec() == b.encode_to_vec()
}

#[test]
fn every_field_round_trips() {
    let g = rich_graph();
    let text = write_graph_def(&g);
    let back = parse_graph_def(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(same(&g, &back), "{text}\n{back:?}");
    assert!(text.contains("type: DT_FLOAT_REF"), "{text}");
    assert!(text.contains("type: 77"), "{text}");
    assert!(text.contains("f: nan"), "{text}");
    assert!(text.contains("float_val: -inf"), "{text}");
    assert!(text.contains("s: \"\\001\\377\\n\""), "{text}");
}

#[test]
fn escapes_cover_every_byte() {
    let all: Vec<u8> = (0..=255u8).collect();
    let e = escape_bytes(&all);
    assert!(e.is_ascii());
    let text = format!("node {{ name: \"x\" attr {{ key: \"k\" value {{ s: \"{e}\" }} }} }}");
    let g = parse_graph_def(&text).unwrap();
    assert_eq!(g.node[0].attr["k"].value, Some(AttrValueKind::S(all)));
}

#[test]
fn alternative_syntax() {
    let text = "node < name: 'a' 'b' op: \"Const\", input: [\"x\", 'y'] ; attr: [{ key: 'k' value: { list: { i: [1, 0x2, -3] type: [DT_INT32, 1] } } }] >\n\
                # a comment\nversions: { producer: 5 }";
    let g = parse_graph_def(text).unwrap();
    let n = &g.node[0];
    assert_eq!(n.name, "ab");
    assert_eq!(n.input, ["x", "y"]);
    let Some(AttrValueKind::List(l)) = &n.attr["k"].value else {
        panic!()
    };
    assert_eq!(l.i, [1, 2, -3]);
    assert_eq!(l.r#type, [3, 1]);
    assert!(parse_graph_def("").unwrap().node.is_empty());
}

#[test]
fn malformed_text_is_a_clear_error() {
    let cases = [
        ("node { name: \"x\" ", "end of input"),
        (
            "node { bogus: 1 }",
            "field 'bogus' not found for message 'tensorflow.NodeDef'",
        ),
        ("node { name: 1 }", "expected a string"),
        ("node { name \"x\" }", "expected ':'"),
        ("node { name: 'a' name: 'b' }", "'name' is already set"),
        (
            "node { attr { key: 'k' value { i: 1 s: 'x' } } }",
            "already set for oneof 'value'",
        ),
        ("versions { producer: 1.5 }", "expected an integer"),
        ("versions { producer: 99999999999 }", "out of range"),
        (
            "node { attr { key: 'k' value { type: DT_BOGUS } } }",
            "value 'DT_BOGUS' was not found for enum 'tensorflow.DataType'",
        ),
        (
            "node { attr { key: 'k' value { b: maybe } } }",
            "expected 'true' or 'false'",
        ),
        (
            "node { attr { key: 'k' value { f: x } } }",
            "expected a number",
        ),
        ("node { name: \"\\xff\" }", "not valid utf-8"),
        ("node }", "expected ':' or a message value"),
        ("}", "expected a field name"),
        ("node { input: [\"a\" \"b\" }", "expected ',' or ']'"),
        ("[type.googleapis.com/x] {}", "message type 'x' not found"),
    ];
    for (text, want) in cases {
        let e = parse_graph_def(text).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument);
        assert!(e.message().contains(want), "{text}: {e}");
        assert!(
            e.message().starts_with("text format, line 1 column "),
            "{text}: {e}"
        );
    }
}

/// `node { attr { key: "k" value { <value> } } }`, parsed, and its value.
fn attr_value(value: &str) -> Result<AttrValueKind> {
    let g = parse_graph_def(&format!(
        "node {{ attr {{ key: 'k' value {{ {value} }} }} }}"
    ))?;
    Ok(g.node[0].attr["k"]
        .value
        .clone()
        .unwrap_or(AttrValueKind::I(-999)))
}

#[test]
fn integers_floats_bools_and_types() {
    use AttrValueKind::{Type, B, F, I};
    for (text, want) in [
        ("i: -12", I(-12)),
        ("i: 0x1f", I(31)),
        ("i: 017", I(15)),
        ("i: 9223372036854775807", I(i64::MAX)),
        ("i: -9223372036854775808", I(i64::MIN)),
        ("f: 1.5e2", F(150.0)),
        ("f: 2f", F(2.0)),
        ("f: .5", F(0.5)),
        ("f: -inf", F(f32::NEG_INFINITY)),
        ("f: Infinity", F(f32::INFINITY)),
        ("b: True", B(true)),
        ("b: t", B(true)),
        ("b: 0", B(false)),
        ("type: DT_HALF", Type(19)),
        ("type: 101", Type(101)),
    ] {
        assert_eq!(attr_value(text).unwrap(), want, "{text}");
    }
    assert!(matches!(attr_value("f: NaN").unwrap(), F(f) if f.is_nan()));
    for bad in [
        "i: 9223372036854775808",
        "i: 1.5",
        "i: 09",
        "i: 99999999999999999999999",
        "f: 0x10",
        "f: 1..2",
        "b: 2",
        "type: DT_NOPE",
    ] {
        assert!(attr_value(bad).is_err(), "{bad}");
    }
    for (text, ok) in [
        ("versions { producer: -1 }", true),
        ("versions { producer: 4294967296 }", false),
        (
            "node { attr { key: 'k' value { tensor { uint32_val: -1 } } } }",
            false,
        ),
        (
            "node { attr { key: 'k' value { tensor { uint32_val: 4294967295 } } } }",
            true,
        ),
    ] {
        assert_eq!(parse_graph_def(text).is_ok(), ok, "{text}");
    }
}

#[test]
fn strings_lists_and_comments() {
    let g = parse_graph_def(
        "node { name: 'a_1' # c\n input: \"b\\n\\101\\x41\\u00e9\" input: [] input: ['x', \"y\"] \
         attr { key: 'k' value { list <> } } }",
    )
    .unwrap();
    assert_eq!(g.node[0].name, "a_1");
    assert_eq!(g.node[0].input, ["b\nAAé", "x", "y"]);
    assert_eq!(
        g.node[0].attr["k"].value,
        Some(AttrValueKind::List(ListValue::default()))
    );
    for bad in [
        "node { name: \"abc",
        "node { name: '\\",
        "node { name: \"\\q\" }",
        "node { name: \"\\400\" }",
        "node { name: \"\\u12\" }",
        "node { name: \"\\ud800\" }",
        "node { name: 'x' @ }",
        "node { name: \"a\nb\" }",
        "node { input: [\"x\",] }",
    ] {
        let e = parse_graph_def(bad).unwrap_err();
        assert!(e.message().contains("line 1 column"), "{bad}: {e}");
    }
    let e = parse_graph_def("node {\n  ~ }").unwrap_err();
    assert!(e.message().contains("line 2 column 3"), "{e}");
}

#[test]
fn nesting_is_bounded() {
    let ok =
        "library { function { signature { input_arg { handle_data { shape { dim {} } } } } } }";
    assert!(parse_graph_def(ok).is_ok());
    let deep = "node { ".to_owned() + &"attr { key: 'k' value { func { ".repeat(MAX_DEPTH);
    let e = parse_graph_def(&deep).unwrap_err();
    assert!(e.message().contains("nested more than 100 deep"), "{e}");
    let e = parse_graph_def(&"node {".repeat(100_000)).unwrap_err();
    assert!(e.message().contains("nested"), "{e}");
}

/// Every `.pbtxt` file TensorFlow wrote for the tests, by path from the
/// repository root.
const TF_FILES: [&str; 7] = [
    "graph/tests/fixtures/basic.pbtxt",
    "graph/tests/fixtures/complex.pbtxt",
    "graph/tests/fixtures/cond.pbtxt",
    "graph/tests/fixtures/dtypes.pbtxt",
    "graph/tests/fixtures/functions.pbtxt",
    "graph/tests/fixtures/variables.pbtxt",
    "tests/fixtures/saver/sharded.pbtxt",
];

#[test]
fn tensorflow_files_read_and_write_back_byte_for_byte() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for path in TF_FILES {
        let text = std::fs::read_to_string(root.join(path)).unwrap();
        let g = parse_graph_def(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!g.node.is_empty(), "{path}");
        assert_eq!(write_graph_def(&g), text, "{path}");
    }
}

/// What TensorFlow 2.21 writes beyond what actorflow keeps: a node's full type
/// and debug information, a function argument's full type, the graph's stack
/// traces (abridged from `str(graph_def)` of a `tf.function` with a tensor list).
const TF_EXTRAS: &str = r#"node {
  name: "TensorListReserve"
  op: "TensorListReserve"
  input: "Const"
  input: "num_elements"
  attr {
    key: "element_dtype"
    value {
      type: DT_FLOAT
    }
  }
  experimental_debug_info {
    original_node_names: "a/b"
    original_func_names: "f"
  }
  experimental_type {
    type_id: TFT_PRODUCT
    args {
      type_id: TFT_ARRAY
      args {
        type_id: TFT_TENSOR
        args {
          type_id: TFT_FLOAT
        }
      }
    }
  }
}
library {
  function {
    signature {
      name: "f"
      output_arg {
        name: "handle"
        type: DT_VARIANT
        experimental_full_type {
          type_id: TFT_ARRAY
          args {
            type_id: TFT_LEGACY_VARIANT
            s: "x"
          }
        }
      }
    }
  }
}
debug_info {
  files: "x.py"
  traces {
    key: "TensorListReserve"
    value {
      file_line_cols {
        line: 3
        func: "f"
      }
    }
  }
  name_to_trace_id {
    key: "TensorListReserve"
    value: 7
  }
}
"#;

#[test]
fn tensorflows_debug_information_and_full_types_are_read_past() {
    let g = parse_graph_def(TF_EXTRAS).unwrap();
    assert_eq!(g.node[0].attr.len(), 1);
    let f = &g.library.as_ref().unwrap().function[0];
    assert_eq!(f.signature.as_ref().unwrap().output_arg[0].name, "handle");
    let text = write_graph_def(&g);
    for dropped in ["experimental", "debug_info", "TFT_"] {
        assert!(!text.contains(dropped), "{text}");
    }
    assert!(parse_graph_def("node { experimental_type { type_id: TFT_NOPE } }").is_err());
}
