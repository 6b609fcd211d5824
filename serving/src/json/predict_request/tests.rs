//! Predict requests as TensorFlow Serving's `json_tensor_test.cc` and REST API
//! documentation examples read them, and responses read back as the tensors
//! written.

use super::*;
use crate::json::predict_response;
use crate::json::tests::outputs;
use graph::Shape;

fn specs(inputs: &[(&str, DType)]) -> BTreeMap<String, TensorSpec> {
    inputs
        .iter()
        .map(|(k, d)| {
            (
                (*k).to_owned(),
                TensorSpec::new(format!("{k}:0"), *d, Shape::unknown()),
            )
        })
        .collect()
}

fn predict(json: &str, inputs: &[(&str, DType)]) -> Result<(Format, BTreeMap<String, Tensor>)> {
    let req = PredictJson::parse(json.as_bytes())?;
    let (format, tensors) = req.inputs(&specs(inputs))?;
    Ok((format, tensors.into_iter().collect()))
}

fn predict_err(json: &str, inputs: &[(&str, DType)]) -> String {
    let e = predict(json, inputs).unwrap_err();
    assert_eq!(e.code(), graph::Code::InvalidArgument, "{e}");
    e.message().to_owned()
}

#[test]
fn deep_nesting_neither_overflows_nor_is_refused() {
    // json_tensor_test.cc's DeeplyNestedWellFormed: an unused key nested
    // 500000 deep.
    let mut json = String::from(r#"{"instances":[1], "nested":"#);
    json.push_str(&"[".repeat(500_000));
    json.push_str(&"]".repeat(500_000));
    json.push('}');
    let (_, t) = predict(&json, &[("default", DType::I32)]).unwrap();
    assert_eq!(t["default"], Tensor::new(&[1], vec![1i32]).unwrap());
    // DeeplyNestedMalformed: the error quotes a bounded prefix of it.
    let mut json = String::from(r#"{"signature_name":"#);
    json.push_str(&"[".repeat(500_000));
    json.push_str(&"]".repeat(500_000));
    json.push('}');
    let e = predict_err(&json, &[("default", DType::I32)]);
    assert!(
        e.ends_with(" not formatted correctly. 'signature_name' key must be a string value."),
        "{e}"
    );
    assert!(e.len() < 400, "{}", e.len());
    // Lists nested deeper than a tensor's rank can be are refused.
    let json = format!(r#"{{"inputs": {}1{}}}"#, "[".repeat(300), "]".repeat(300));
    let e = predict_err(&json, &[("default", DType::I32)]);
    assert!(e.contains("nests lists more than 254 deep"), "{e}");
}

// --- Predict requests.

#[test]
fn row_format_single_unnamed_tensor() {
    let (format, t) = predict(
        r#"{"instances": [[1,2],[3,4],[5,6]]}"#,
        &[("default", DType::I32)],
    )
    .unwrap();
    assert_eq!(format, Format::Row);
    assert_eq!(
        t["default"],
        Tensor::new(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]).unwrap()
    );
    // With a signature name, and from a buffer with more after the object.
    let req = PredictJson::parse(br#"{"signature_name": "predict_images", "instances": [[1,2]]}X"#)
        .unwrap();
    assert_eq!(req.signature_name(), "predict_images");
    let (_, t) = req.inputs(&specs(&[("default", DType::I32)])).unwrap();
    assert_eq!(t[0].1, Tensor::new(&[1, 2], vec![1i32, 2]).unwrap());
}

#[test]
fn numbers_convert_as_tensorflow_serving_converts_them() {
    let (_, t) = predict(
        r#"{"instances": [1, 2.0, 3, 4, 5.003, 0.007, 0.0]}"#,
        &[("x", DType::F32)],
    )
    .unwrap();
    assert_eq!(
        t["x"],
        Tensor::new(&[7], vec![1f32, 2.0, 3.0, 4.0, 5.003, 0.007, 0.0]).unwrap()
    );
    let (_, t) = predict(
        r#"{"instances": [1.0, 2, 3, 4, 0.662, 0, 0.0]}"#,
        &[("x", DType::F64)],
    )
    .unwrap();
    assert_eq!(
        t["x"],
        Tensor::new(&[7], vec![1f64, 2.0, 3.0, 4.0, 0.662, 0.0, 0.0]).unwrap()
    );
    // FloatTensorWithPrecisionLoss: integer and double literals alike.
    for json in [
        r#"{"instances": [1435774380]}"#,
        r#"{"instances": [1435774380.0]}"#,
    ] {
        let (_, t) = predict(json, &[("x", DType::F32)]).unwrap();
        assert_eq!(t["x"], Tensor::new(&[1], vec![1435774380f32]).unwrap());
    }
    // Beyond float's range: infinities; below it: signed zeros.
    let (_, t) = predict(
        r#"{"instances": [1.79769e+308, -1.79769e+308, 2.22507e-308, -2.22507e-308]}"#,
        &[("x", DType::F32)],
    )
    .unwrap();
    let v = t["x"].as_slice::<f32>().unwrap().to_vec();
    assert_eq!(v[..2], [f32::INFINITY, f32::NEG_INFINITY]);
    assert_eq!(
        (v[2].to_bits(), v[3].to_bits()),
        (0.0f32.to_bits(), (-0.0f32).to_bits())
    );
    // Integers: int_val's range for the narrow types, then cast as
    // TensorFlow casts a TensorProto's int_val; 64-bit ones in range.
    let (_, t) = predict(r#"{"instances": [300, -1]}"#, &[("x", DType::U8)]).unwrap();
    assert_eq!(t["x"], Tensor::new(&[2], vec![44u8, 255]).unwrap());
    let (_, t) = predict(
        r#"{"instances": [-9223372036854775808, 7]}"#,
        &[("x", DType::I64)],
    )
    .unwrap();
    assert_eq!(t["x"], Tensor::new(&[2], vec![i64::MIN, 7]).unwrap());
    let (_, t) = predict(
        r#"{"instances": [18446744073709551615]}"#,
        &[("x", DType::U64)],
    )
    .unwrap();
    assert_eq!(t["x"], Tensor::new(&[1], vec![u64::MAX]).unwrap());
    let (_, t) = predict(r#"{"instances": [4294967295]}"#, &[("x", DType::U32)]).unwrap();
    assert_eq!(t["x"], Tensor::new(&[1], vec![u32::MAX]).unwrap());
    let (_, t) = predict(r#"{"instances": [true, false]}"#, &[("x", DType::Bool)]).unwrap();
    assert_eq!(t["x"], Tensor::new(&[2], vec![true, false]).unwrap());
    let (_, t) = predict(r#"{"instances": [1.5, -2]}"#, &[("x", DType::F16)]).unwrap();
    assert_eq!(
        t["x"],
        Tensor::new(&[2], vec![f16::from_f32(1.5), f16::from_f32(-2.0)]).unwrap()
    );
    let (_, t) = predict(r#"{"instances": [0.25]}"#, &[("x", DType::BF16)]).unwrap();
    assert_eq!(
        t["x"],
        Tensor::new(&[1], vec![bf16::from_f32(0.25)]).unwrap()
    );
    let cases = [
        (DType::I32, "3000000000", "int32"),
        (DType::I32, "1.0", "int32"),
        (DType::I64, "9223372036854775808", "int64"),
        (DType::U32, "-1", "uint32"),
        (DType::U64, "-1", "uint64"),
        (DType::Bool, "1", "bool"),
        (DType::F32, "true", "float"),
        (DType::String, "1", "string"),
    ];
    for (dtype, v, name) in cases {
        let e = predict_err(&format!(r#"{{"inputs": [{v}]}}"#), &[("x", dtype)]);
        let ty = match v {
            "true" => "True",
            _ => "Number",
        };
        assert_eq!(
            e,
            format!("JSON Value: {v} Type: {ty} is not of expected type: {name}"),
            "{dtype:?} {v}"
        );
    }
}

#[test]
fn base64_strings() {
    let (_, t) = predict(
        r#"{"instances": [ { "b64" : "aGVsbG8=" }, { "b64": "d29ybGQ=" } ]}"#,
        &[("default", DType::String)],
    )
    .unwrap();
    assert_eq!(
        t["default"],
        Tensor::from_strings(&[2], vec!["hello", "world"]).unwrap()
    );
    let (_, t) = predict(
        r#"{"instances": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}"#,
        &[("default", DType::String)],
    )
    .unwrap();
    assert_eq!(
        t["default"],
        Tensor::from_strings(&[2, 1], vec!["hello", "world"]).unwrap()
    );
    let (_, t) = predict(
        r#"{"instances": [{"default": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}]}"#,
        &[("default", DType::String)],
    )
    .unwrap();
    assert_eq!(
        t["default"],
        Tensor::from_strings(&[1, 2, 1], vec!["hello", "world"]).unwrap()
    );
    // Unpadded, and with whitespace, as absl decodes; binary bytes.
    let (_, t) = predict(
        r#"{"inputs": [{"b64": "aGVsbG8"}, {"b64": "//79\n"}]}"#,
        &[("s", DType::String)],
    )
    .unwrap();
    assert_eq!(
        t["s"],
        Tensor::from_strings(
            &[2],
            vec![
                Bytes::from_static(b"hello"),
                Bytes::from_static(b"\xff\xfe\xfd")
            ]
        )
        .unwrap()
    );
    assert_eq!(
        predict_err(r#"{"inputs": {"b64": "a!!"}}"#, &[("s", DType::String)]),
        "Unable to base64 decode"
    );
    assert_eq!(
        predict_err(r#"{"inputs": [{"b64": 1}]}"#, &[("s", DType::String)]),
        "JSON Value: {\n    \"b64\": 1\n} not formatted correctly for base64 data"
    );
    assert_eq!(
        predict_err(r#"{"inputs": [{"b64": "AAAA"}]}"#, &[("s", DType::F32)]),
        "JSON Value: {\n    \"b64\": \"AAAA\"\n} Type: Object is not of expected type: float"
    );
}

#[test]
fn row_format_multiple_named_tensors() {
    let inputs = [
        ("int_tensor", DType::I32),
        ("str_tensor", DType::String),
        ("float_tensor", DType::F32),
        ("dbl_tensor", DType::F64),
    ];
    let (format, t) = predict(
        r#"{
              "instances": [
                {
                  "int_tensor": [[1,2],[3,4],[5,6]],
                  "str_tensor": ["foo", "bar"],
                  "float_tensor": [1.0, NaN],
                  "dbl_tensor": [NaN]
                },
                {
                  "int_tensor": [[7,8],[9,0],[1,2]],
                  "str_tensor": ["baz", "bat"],
                  "float_tensor": [2.0, Infinity],
                  "dbl_tensor": [2.0]
                }
              ]
            }"#,
        &inputs,
    )
    .unwrap();
    assert_eq!(format, Format::Row);
    assert_eq!(
        t["int_tensor"],
        Tensor::new(&[2, 3, 2], vec![1i32, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]).unwrap()
    );
    assert_eq!(
        t["str_tensor"],
        Tensor::from_strings(&[2, 2], vec!["foo", "bar", "baz", "bat"]).unwrap()
    );
    let f = t["float_tensor"].as_slice::<f32>().unwrap();
    assert_eq!(t["float_tensor"].dims(), [2, 2]);
    assert!(f[1].is_nan());
    assert_eq!((f[0], f[2], f[3]), (1.0, 2.0, f32::INFINITY));
    let d = t["dbl_tensor"].as_slice::<f64>().unwrap();
    assert_eq!(t["dbl_tensor"].dims(), [2, 1]);
    assert!(d[0].is_nan() && d[1] == 2.0);
}

#[test]
fn columnar_format() {
    let want = Tensor::new(&[1, 3, 2], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
    let (format, t) = predict(
        r#"{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]]}}"#,
        &[("int_tensor", DType::I32)],
    )
    .unwrap();
    assert_eq!(format, Format::Columnar);
    assert_eq!(t["int_tensor"], want);
    let (_, t) = predict(
        r#"{"inputs": [[[1,2],[3,4],[5,6]]]}"#,
        &[("int_tensor", DType::I32)],
    )
    .unwrap();
    assert_eq!(t["int_tensor"], want);
    let (_, t) = predict(
        r#"{
              "inputs": {
                "int_tensor": [[[1,2],[3,4],[5,6]]],
                "str_tensor": ["foo", "bar"],
                "bin_tensor": { "b64" : "aGVsbG8=" },
                "ignored": 1
              }
            }"#,
        &[
            ("int_tensor", DType::I32),
            ("str_tensor", DType::String),
            ("bin_tensor", DType::String),
        ],
    )
    .unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!(t["int_tensor"], want);
    assert_eq!(
        t["str_tensor"],
        Tensor::from_strings(&[2], vec!["foo", "bar"]).unwrap()
    );
    assert_eq!(
        t["bin_tensor"],
        Tensor::from_strings(&[], vec!["hello"]).unwrap()
    );
    // A scalar, and inputs of different 0th dimensions.
    let (_, t) = predict(r#"{"inputs": 7.5}"#, &[("x", DType::F64)]).unwrap();
    assert_eq!(t["x"], Tensor::new(&[], vec![7.5f64]).unwrap());
    let (_, t) = predict(
        r#"{"inputs": {"a": [1, 2, 3], "b": [[1.5]]}}"#,
        &[("a", DType::I64), ("b", DType::F32)],
    )
    .unwrap();
    assert_eq!(t["a"], Tensor::new(&[3], vec![1i64, 2, 3]).unwrap());
    assert_eq!(t["b"], Tensor::new(&[1, 1], vec![1.5f32]).unwrap());
    // An empty list.
    let (_, t) = predict(r#"{"inputs": []}"#, &[("x", DType::F32)]).unwrap();
    assert_eq!(t["x"], Tensor::new::<f32>(&[0], vec![]).unwrap());
}

#[test]
fn request_errors() {
    let one = [("default", DType::I32)];
    let two = [("int_tensor", DType::I32), ("str_tensor", DType::String)];
    assert_eq!(
        predict_err("", &one),
        "JSON Parse error: The document is empty"
    );
    assert_eq!(
        predict_err("instances = [1, 2]", &one),
        "JSON Parse error: Invalid value. at offset: 0"
    );
    assert_eq!(predict_err("[1]", &one), "JSON Value: [1] Is not object");
    assert_eq!(
        predict_err(r#"{"signature_name": 5, "instances": [[1,2]]}"#, &one),
        "JSON Value: {\n    \"signature_name\": 5,\n    \"instances\": [[1, 2]]\n} not formatted correctly. 'signature_name' key must be a string value."
    );
    assert_eq!(
        predict_err(r#"{"instances": [1], "inputs": [1]}"#, &one),
        "JSON Value: {\n    \"instances\": [1],\n    \"inputs\": [1]\n} Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "
    );
    assert_eq!(
        predict_err(r#"{"instances": 1}"#, &one),
        "JSON Value: {\n    \"instances\": 1\n} Expecting 'instances' to be an list/array"
    );
    assert_eq!(
        predict_err(r#"{"instances": []}"#, &one),
        "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array"
    );
    assert_eq!(
        predict_err(r#"{"x": 1}"#, &one),
        "Missing 'inputs' or 'instances' key"
    );
    assert_eq!(
        PredictJson::parse(br#"{"instances": [1]}"#)
            .unwrap()
            .inputs(&BTreeMap::new())
            .unwrap_err()
            .message(),
        "Failed to get input map for signature: DEFAULT"
    );
    let cases = [
        (
            r#"{"instances": [[1,2],[3,4],[5,6,7]]}"#,
            "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 but got: 3",
        ),
        (
            r#"{"instances": [[1,2],[3,4],[[5,6]]]}"#,
            "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [2] but got: [1,2]",
        ),
        (
            r#"{"instances": [1, [1]]}"#,
            "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [] but got: [1]",
        ),
        (
            r#"{"instances": [[1,2],["a", "b"]]}"#,
            "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"a\" Type: String is not of expected type: int32",
        ),
        (
            r#"{"instances": [[1,2],[3,{"k":1}]]}"#,
            "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: {\n    \"k\": 1\n} Type: Object is not of expected type: int32",
        ),
        (
            r#"{"instances": [1, {"default": 1}]}"#,
            "Expecting value/list but got object at item 1 of input list",
        ),
        (
            r#"{"inputs": [[1,2],3]}"#,
            "JSON Value: 3 found at incorrect level: 2 in the JSON DOM. Expected at level: 2",
        ),
        (r#"{"inputs": [1,[2]]}"#, "Encountered list at unexpected level: 1 expected < 1"),
        (
            r#"{"inputs": [[1,2],[3]]}"#,
            "Encountered list at unexpected size: 1 at level: 1 expected size: 2",
        ),
        (r#"{"inputs": {"other": [1]}}"#, "Missing named input: default in 'inputs' object."),
    ];
    for (json, want) in cases {
        assert_eq!(predict_err(json, &one), want, "{json}");
    }
    let cases = [
        (
            r#"{"instances": [[1]]}"#,
            "instances is a plain list, but expecting list of objects as multiple input tensors required as per tensorinfo_map",
        ),
        (
            r#"{"inputs": [1]}"#,
            "inputs is a plain value/list, but expecting an object as multiple input tensors required as per tensorinfo_map",
        ),
        (
            r#"{"instances": [{"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"]},
                                  {"int_tensor": [[[7,8],[9,0],[1,2]]], "str_tensor": ["baz", "bat"]}]}"#,
            "Failed to process element: 1 key: int_tensor of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [3,2] but got: [1,3,2]",
        ),
        (
            r#"{"instances": [{"int_tensor": [[1,2],[3,4],[5,6],[7,8]], "str_tensor": ["foo", "bar"]},
                                  {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"]}]}"#,
            "Failed to process element: 1 key: int_tensor of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 8 but got: 6",
        ),
        (
            r#"{"instances": [{"int_tensor": [1], "str_tensor": ["a"]}, [1, 20, 30]]}"#,
            "Expecting object but got list at item 1 of input list",
        ),
        (
            r#"{"instances": [{"int_tensor": [1]}]}"#,
            "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"int_tensor\": [1]\n} keys must be equal to: int_tensor,str_tensor",
        ),
        (
            r#"{"instances": [{"int_tensor": [1], "bogus": 1}]}"#,
            "Failed to process element: 0 key: bogus of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: bogus",
        ),
        (
            r#"{"instances": [{"int_tensor": [1], "str_tensor": ["a"], "int_tensor": [2]}]}"#,
            "Failed to process element: 0 key: int_tensor of 'instances' list. Error: INVALID_ARGUMENT: JSON object: named input int_tensor is given twice",
        ),
        (r#"{"inputs": {"int_tensor": [1]}}"#, "Missing named input: str_tensor in 'inputs' object."),
    ];
    for (json, want) in cases {
        assert_eq!(predict_err(json, &two), want, "{json}");
    }
}

#[test]
fn resource_inputs_are_unimplemented() {
    let req = PredictJson::parse(br#"{"inputs": [1]}"#).unwrap();
    let e = req.inputs(&specs(&[("r", DType::Resource)])).unwrap_err();
    assert_eq!(e.code(), graph::Code::Unimplemented);
    assert_eq!(
        e.message(),
        "Conversion of JSON Value: [1] to type: resource"
    );
}

// --- Responses read back.

#[test]
fn responses_read_back_as_the_tensors_written() {
    let t = Tensor::new(&[2, 3], vec![0.1f32, -2.5, 1e-7, 3.4e38, 0.447_510_15, 7.0]).unwrap();
    let body = predict_response(&outputs(vec![("x", t.clone())]), Format::Columnar).unwrap();
    let doc = Document::parse(&body).unwrap();
    let v = doc.root().find("outputs").unwrap();
    let shape = dense_shape(v).unwrap();
    let mut fill = TensorFill::new(DType::F32, v).unwrap();
    fill.fill(v, &shape).unwrap();
    assert_eq!(fill.values.into_tensor(&shape).unwrap(), t);
}
