//! The text format over reflection: TensorFlow's syntax, the writer's layout,
//! round trips of every scalar kind, errors with positions, and the depth guard.

use bytes::Bytes;

use super::*;
use crate::actorflow::TensorChunks;
use crate::tensorflow::attr_value::Value as AttrKind;
use crate::tensorflow::tensor_shape_proto::Dim;
use crate::tensorflow::*;

fn parse<M: Message + Name + Default>(text: &str) -> M {
    from_text(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn reads_tensorflow_syntax() {
    let t: TensorProto = parse(
        "dtype: DT_STRING # a comment\n\
         tensor_shape < dim { size: 2 } dim: { size: -1 name: 'n' } >\n\
         string_val: '\\000\\x41\\u00e9' \"b\" string_val: [\"\\n\\t\\\\\"]\n\
         float_val: [1, -2.5, inf, -inf, NaN, 1e-3f, .5];\n\
         int_val: 0x1f, int_val: 017 bool_val: [true, False, t, 0]\n\
         uint64_val: 18446744073709551615 int64_val: -9223372036854775808\n\
         half_val: []",
    );
    assert_eq!(t.dtype, DataType::DtString as i32);
    let dims = &t.tensor_shape.as_ref().unwrap().dim;
    assert_eq!(
        (dims[0].size, dims[1].size, dims[1].name.as_str()),
        (2, -1, "n")
    );
    assert_eq!(t.string_val[0][..], *b"\0A\xc3\xa9b");
    assert_eq!(t.string_val[1][..], *b"\n\t\\");
    assert_eq!(
        t.float_val[..4],
        [1.0, -2.5, f32::INFINITY, f32::NEG_INFINITY]
    );
    assert!(t.float_val[4].is_nan());
    assert_eq!(t.float_val[5..], [1e-3, 0.5]);
    assert_eq!(t.int_val, [31, 15]);
    assert_eq!(t.bool_val, [true, false, true, false]);
    assert_eq!((t.uint64_val[0], t.int64_val[0]), (u64::MAX, i64::MIN));
    let a: AttrValue = parse("type: 77");
    assert_eq!(a.value, Some(AttrKind::Type(77)));
    assert_eq!(parse::<GraphDef>(""), GraphDef::default());
}

#[test]
fn writes_tensorflow_layout() {
    let n = NodeDef {
        name: "c".into(),
        op: "Const".into(),
        input: vec!["a".into(), "^b".into()],
        attr: [
            (
                "value".to_string(),
                AttrValue {
                    value: Some(AttrKind::Tensor(Box::new(TensorProto {
                        dtype: DataType::DtFloat as i32,
                        tensor_shape: Some(TensorShapeProto::default()),
                        float_val: vec![2.0, f32::NAN],
                        ..Default::default()
                    }))),
                },
            ),
            (
                "dtype".to_string(),
                AttrValue {
                    value: Some(AttrKind::Type(DataType::DtFloat as i32)),
                },
            ),
            (
                "b".to_string(),
                AttrValue {
                    value: Some(AttrKind::B(false)),
                },
            ),
        ]
        .into(),
        ..Default::default()
    };
    let want = r#"name: "c"
op: "Const"
input: "a"
input: "^b"
attr {
  key: "b"
  value {
    b: false
  }
}
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
      }
      float_val: 2.0
      float_val: nan
    }
  }
}
"#;
    assert_eq!(to_text(&n), want);
    // as in TensorFlow's Python, an entry's default key is left out
    let n = NodeDef {
        attr: [(String::new(), AttrValue::default())].into(),
        ..Default::default()
    };
    assert_eq!(to_text(&n), "attr {\n  value {\n  }\n}\n");
    assert_eq!(parse::<NodeDef>(&to_text(&n)), n);
}

#[test]
fn every_scalar_round_trips() {
    let t = TensorProto {
        dtype: 101,
        tensor_shape: Some(TensorShapeProto {
            dim: vec![Dim {
                size: i64::MIN,
                name: "ü\"'\\".into(),
            }],
            unknown_rank: true,
        }),
        version_number: -1,
        tensor_content: (0..=255u8).collect::<Vec<u8>>().into(),
        float_val: vec![
            -0.0,
            1e-30,
            3.4e38,
            f32::MIN_POSITIVE,
            1e-45,
            f32::NEG_INFINITY,
        ],
        double_val: vec![0.1, 1e300, -5e-324, f64::INFINITY],
        int_val: vec![i32::MIN, i32::MAX],
        string_val: vec![Bytes::new(), Bytes::from_static(&[0, 10, 200, 255])],
        int64_val: vec![i64::MIN, i64::MAX],
        bool_val: vec![true, false],
        half_val: vec![0x3c00],
        uint32_val: vec![u32::MAX],
        uint64_val: vec![u64::MAX],
        ..Default::default()
    };
    let text = to_text(&t);
    assert_eq!(parse::<TensorProto>(&text), t, "{text}");
    assert!(text.contains("dtype: DT_FLOAT_REF\n"), "{text}");
    assert!(text.contains("float_val: -inf\n"), "{text}");
    assert!(text.contains("float_val: 1e-30\n"), "{text}");
    assert!(text.contains("float_val: 3.4e+38\n"), "{text}");
    assert!(text.contains("double_val: 1e+300\n"), "{text}");
    // strings keep their characters beyond ASCII, as in TensorFlow's Python
    assert!(text.contains("name: \"ü\\\"\\'\\\\\"\n"), "{text}");
}

#[test]
fn any_is_expanded_when_its_type_is_known() {
    let chunks = TensorChunks { content_bytes: 7 };
    let req = RecvTensorRequest {
        transport_options: Some(prost_types::Any {
            type_url: crate::actorflow::TENSOR_CHUNKS_URL.into(),
            value: chunks.encode_to_vec(),
        }),
        ..Default::default()
    };
    let text = to_text(&req);
    assert!(
        text.contains("transport_options {\n  [type.googleapis.com/actorflow.TensorChunks] {\n"),
        "{text}"
    );
    assert_eq!(parse::<RecvTensorRequest>(&text), req);
    // an unknown type stays as its two fields
    let unknown = RecvTensorRequest {
        transport_options: Some(prost_types::Any {
            type_url: "type.googleapis.com/x.Y".into(),
            value: vec![1, 2],
        }),
        ..Default::default()
    };
    assert_eq!(parse::<RecvTensorRequest>(&to_text(&unknown)), unknown);
}

#[test]
fn errors_say_what_and_where() {
    let cases = [
        (
            "name: \"x\"\nbogus: 1",
            2,
            1,
            "field 'bogus' not found for message 'tensorflow.NodeDef'",
        ),
        ("name: 1", 1, 7, "expected a string"),
        ("name \"x\"", 1, 6, "expected ':'"),
        ("name: \"x\" name: \"y\"", 1, 17, "already set"),
        (
            "attr { key: 'k' value { type: DT_BOGUS } }",
            1,
            31,
            "DT_BOGUS",
        ),
        ("name: \"\\q\"", 1, 8, "invalid string escape"),
        ("name: \"\\xff\"", 1, 7, "not valid utf-8"),
        ("input: [\"a\" \"b\" }", 1, 17, "expected ',' or ']'"),
        ("attr { key: 'k'", 1, 16, "end of input"),
        ("}", 1, 1, "a field name"),
        ("name: 'ü' @", 1, 11, "invalid token"),
        ("op: 'x'\n\n  name: 'ü' op: 'y'", 3, 17, "already set"),
    ];
    for (text, line, column, want) in cases {
        let e = from_text::<NodeDef>(text).unwrap_err();
        assert!(e.message().contains(want), "{text}: {e}");
        assert_eq!((e.line(), e.column()), (line, column), "{text}: {e}");
    }
    let e = from_text::<VersionDef>("producer: 99999999999").unwrap_err();
    assert!(e.to_string().starts_with("line 1 column 11: "), "{e}");
    assert!(e.message().contains("out of range"), "{e}");
}

/// An `AttrValue` text nesting `funcs` functions: 3 messages each.
fn nested_attr(funcs: usize) -> String {
    "func { attr { key: 'a' value { ".repeat(funcs) + "i: 1" + &" } } }".repeat(funcs)
}

#[test]
fn nesting_is_bounded_and_what_passes_decodes() {
    let ok = nested_attr(MAX_DEPTH / 3);
    from_text::<AttrValue>(&ok).unwrap();
    // the deepest accepted nesting decodes as binary too
    let braces =
        "func { ".to_owned() + &"attr { key: 'a' value { func { ".repeat((MAX_DEPTH - 1) / 3);
    let depth = braces.matches('{').count();
    assert_eq!(depth, MAX_DEPTH);
    let text = braces + &"}".repeat(depth);
    let a = from_text::<AttrValue>(&text).unwrap();
    AttrValue::decode(a.encode_to_vec().as_slice()).unwrap();
    let e = from_text::<AttrValue>(&("func {".to_owned() + &text + "}")).unwrap_err();
    assert!(e.message().contains("nested more than 100 deep"), "{e}");
    // nothing recursive meets the input, however deep
    for deep in ["a { ".repeat(100_000), "<".repeat(1_000_000)] {
        let e = from_text::<GraphDef>(&deep).unwrap_err();
        assert_eq!(e.line(), 1, "{e}");
        assert!(e.message().contains("nested"), "{e}");
    }
    // brackets in strings and comments do not count
    let quoted = format!(
        "name: '{}' # {}\n op: \"\\\"{{\"",
        "{".repeat(200),
        "<".repeat(200)
    );
    assert_eq!(parse::<NodeDef>(&quoted).op, "\"{");
}

#[test]
fn every_message_has_a_descriptor() {
    let pool = descriptor_pool();
    for name in [
        "tensorflow.GraphDef",
        "tensorflow.CheckpointState",
        "tensorflow.MetaGraphDef",
        "tensorflow.RunStepRequest",
        "actorflow.TensorChunks",
        "google.protobuf.Any",
    ] {
        assert!(pool.get_message_by_name(name).is_some(), "{name}");
    }
    assert_eq!(
        <GraphDef as Name>::type_url(),
        "type.googleapis.com/tensorflow.GraphDef"
    );
}
