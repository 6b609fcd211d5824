//! Classify and regress bodies: [`ExampleJson::parse`] reads a request into a
//! `tensorflow.serving.Input` of `tf.Example`s (TensorFlow Serving's
//! `FillClassificationRequestFromJson` and `FillRegressionRequestFromJson`);
//! [`classify_response`] and [`regress_response`] write the results
//! (`MakeJsonFromClassificationResult`, `MakeJsonFromRegressionResult`).

use graph::{Result, Status};
use proto::tensorflow::serving as pb;
use proto::tensorflow::{feature, BytesList, Example, Feature, Features, FloatList, Int64List};

use super::reader::{JsonType, Value};
use super::writer::{self, PrettyWriter};
use super::{
    decode_base64_object, format_error, is_base64_object, parse_object, signature_name,
    CONTEXT_KEY, EXAMPLES_KEY, RESULTS_KEY,
};

/// A parsed classify or regress request.
#[derive(Clone, Debug, PartialEq)]
pub struct ExampleJson {
    /// The signature the request names; empty for the default one.
    pub signature_name: String,
    /// Its examples: an `ExampleList`, or an `ExampleListWithContext` when the
    /// request has a `"context"`.
    pub input: pb::Input,
}

impl ExampleJson {
    /// Parses a classify or regress request body: `"examples"`, a non-empty
    /// list of objects of features, and optionally `"context"`, an object of
    /// features every example shares. A feature is a value or a list of
    /// values of one kind: integers and booleans (`int64_list`), other numbers
    /// (`float_list`), strings and `{"b64": …}` (`bytes_list`).
    pub fn parse(body: &[u8]) -> Result<ExampleJson> {
        let doc = parse_object(body)?;
        let signature_name = signature_name(&doc)?;
        let root = doc.root();
        let context = root
            .find(CONTEXT_KEY)
            .map(example_from_object)
            .transpose()?;
        let Some(list) = root.find(EXAMPLES_KEY) else {
            return Err(format_error(
                root,
                "When method is classify, key 'examples' is expected and was not found",
            ));
        };
        if !list.is_array() {
            return Err(format_error(
                root,
                "Expecting 'examples' value to be an list/array",
            ));
        }
        if list.is_empty() {
            return Err(format_error(root, "'examples' value is an empty array"));
        }
        let examples = list
            .items()
            .map(example_from_object)
            .collect::<Result<Vec<_>>>()?;
        let kind = match context {
            Some(context) => pb::input::Kind::ExampleListWithContext(pb::ExampleListWithContext {
                examples,
                context: Some(context),
            }),
            None => pb::input::Kind::ExampleList(pb::ExampleList { examples }),
        };
        Ok(ExampleJson {
            signature_name,
            input: pb::Input { kind: Some(kind) },
        })
    }
}

/// The body of a classify response: `{"results": [[[label, score], …], …]}`,
/// one list of classes per example.
pub fn classify_response(result: &pb::ClassificationResult) -> Result<Vec<u8>> {
    if result.classifications.is_empty() {
        return Err(Status::invalid_argument(
            "Cannot convert empty ClassificationResults to JSON",
        ));
    }
    let mut w = PrettyWriter::new();
    w.start_object();
    w.key(RESULTS_KEY.as_bytes());
    w.start_array();
    for c in &result.classifications {
        w.set_single_line_arrays(true);
        w.start_array();
        for class in &c.classes {
            w.start_array();
            w.string(class.label.as_bytes());
            w.raw_number(&writer::decimal_f32(class.score));
            w.end_array();
        }
        w.end_array();
        w.set_single_line_arrays(false);
    }
    w.end_array();
    w.end_object();
    Ok(w.into_bytes())
}

/// The body of a regress response: `{"results": [value, …]}`, one value per
/// example.
pub fn regress_response(result: &pb::RegressionResult) -> Result<Vec<u8>> {
    if result.regressions.is_empty() {
        return Err(Status::invalid_argument(
            "Cannot convert empty RegressionResults to JSON",
        ));
    }
    let mut w = PrettyWriter::new();
    w.start_object();
    w.key(RESULTS_KEY.as_bytes());
    w.set_single_line_arrays(true);
    w.start_array();
    for r in &result.regressions {
        w.raw_number(&writer::decimal_f32(r.value));
    }
    w.end_array();
    w.end_object();
    Ok(w.into_bytes())
}

/// A `tf.Example` from a JSON object of features (TensorFlow Serving's
/// `MakeExampleFromJsonObject`).
fn example_from_object(v: Value<'_>) -> Result<Example> {
    if !v.is_object() {
        return Err(Status::invalid_argument(format!(
            "Example must be JSON object but got JSON {}",
            v.json_type().name()
        )));
    }
    let mut features: Option<Features> = None;
    for (key, content) in v.members() {
        let name = String::from_utf8_lossy(key).into_owned();
        let mut f = Feature::default();
        if content.is_array() {
            for item in content.items() {
                add_to_feature(item, &name, &mut f)?;
            }
        } else {
            add_to_feature(content, &name, &mut f)?;
        }
        features
            .get_or_insert_with(Features::default)
            .feature
            .insert(name, f);
    }
    Ok(Example { features })
}

/// Adds one JSON value to a feature (TensorFlow Serving's
/// `AddValueToFeature`); every value of a feature must be of one kind, the
/// kind its first value gave it.
fn add_to_feature(v: Value<'_>, name: &str, f: &mut Feature) -> Result<()> {
    use feature::Kind;
    /// The kinds of list a JSON value can go to.
    #[derive(PartialEq)]
    enum List {
        Bytes,
        Float,
        Int64,
    }
    let list = match v.json_type() {
        JsonType::True | JsonType::False => List::Int64,
        JsonType::String => List::Bytes,
        JsonType::Object if is_base64_object(v) => List::Bytes,
        JsonType::Number if v.as_double().is_some() => List::Float,
        JsonType::Number => List::Int64,
        JsonType::Null | JsonType::Array | JsonType::Object => {
            return Err(Status::invalid_argument(format!(
                "Feature: {name} has element with unexpected JSON type: {}",
                v.json_type().name()
            )))
        }
    };
    let compatible = match &f.kind {
        None => true,
        Some(Kind::BytesList(_)) => list == List::Bytes,
        Some(Kind::FloatList(_)) => list == List::Float,
        Some(Kind::Int64List(_)) => list == List::Int64,
    };
    if !compatible {
        let kind = match f.kind {
            Some(Kind::BytesList(_)) => "bytes",
            Some(Kind::FloatList(_)) => "float",
            Some(Kind::Int64List(_)) => "int64",
            None => "UNKNOWN",
        };
        return Err(Status::invalid_argument(format!(
            "Unexpected element type in feature: {name} expecting type: {kind}"
        )));
    }
    match list {
        List::Bytes => {
            let bytes = match v.as_bytes() {
                Some(s) => s.to_vec(),
                None => decode_base64_object(v)?,
            };
            if let Kind::BytesList(l) = f
                .kind
                .get_or_insert_with(|| Kind::BytesList(BytesList::default()))
            {
                l.value.push(bytes);
            }
        }
        List::Float => {
            let d = v.as_f64().unwrap_or_default();
            if let Kind::FloatList(l) = f
                .kind
                .get_or_insert_with(|| Kind::FloatList(FloatList::default()))
            {
                l.value.push(d as f32);
            }
        }
        List::Int64 => {
            let i = match (v.as_bool(), v.as_i64()) {
                (Some(b), _) => i64::from(b),
                (None, Some(i)) => i,
                (None, None) => {
                    return Err(Status::invalid_argument(format!(
                        "Feature: {name} has uint64_t element. Only int64_t is supported."
                    )))
                }
            };
            if let Kind::Int64List(l) = f
                .kind
                .get_or_insert_with(|| Kind::Int64List(Int64List::default()))
            {
                l.value.push(i);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Classify and regress requests and responses as TensorFlow Serving's
    //! `json_tensor_test.cc` and REST API documentation examples give them.

    use super::*;
    use crate::json::tests::text;

    fn feature(kind: feature::Kind) -> Feature {
        Feature { kind: Some(kind) }
    }

    fn bytes(v: &[&str]) -> Feature {
        feature(feature::Kind::BytesList(BytesList {
            value: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        }))
    }

    fn floats(v: &[f32]) -> Feature {
        feature(feature::Kind::FloatList(FloatList { value: v.to_vec() }))
    }

    fn ints(v: &[i64]) -> Feature {
        feature(feature::Kind::Int64List(Int64List { value: v.to_vec() }))
    }

    fn example(f: Vec<(&str, Feature)>) -> Example {
        Example {
            features: Some(Features {
                feature: f.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            }),
        }
    }

    #[test]
    fn example_requests_without_context() {
        let r = ExampleJson::parse(
            br#"{
              "examples": [
                { "names": [ "foo", "bar" ], "ratings": [ 8.0, 9.0 ], "age": 20 },
                { "names": [ "baz" ], "ratings": 6.0 },
                {}
              ]
            }"#,
        )
        .unwrap();
        assert_eq!(r.signature_name, "");
        assert_eq!(
            r.input,
            pb::Input {
                kind: Some(pb::input::Kind::ExampleList(pb::ExampleList {
                    examples: vec![
                        example(vec![
                            ("names", bytes(&["foo", "bar"])),
                            ("ratings", floats(&[8.0, 9.0])),
                            ("age", ints(&[20])),
                        ]),
                        example(vec![
                            ("names", bytes(&["baz"])),
                            ("ratings", floats(&[6.0]))
                        ]),
                        Example { features: None },
                    ],
                })),
            }
        );
    }

    #[test]
    fn example_requests_with_context_and_signature() {
        let r = ExampleJson::parse(
            br#"{
              "signature_name": "custom_signture",
              "context": { "query": "pizza", "location": [ "sfo" ] },
              "examples": [
                { "names": [ "foo", "bar" ], "ratings": [ 8.0, 9.0, -Infinity ], "age": 20 },
                { "names": [ "baz", { "b64": "aGVsbG8=" } ], "ratings": 6.0, "intboolmix": [ 1, true, false ] },
                { "names": "bar", "ratings": -Infinity, "empty": [] }
              ]
            }"#,
        )
        .unwrap();
        assert_eq!(r.signature_name, "custom_signture");
        assert_eq!(
            r.input,
            pb::Input {
                kind: Some(pb::input::Kind::ExampleListWithContext(
                    pb::ExampleListWithContext {
                        context: Some(example(vec![
                            ("query", bytes(&["pizza"])),
                            ("location", bytes(&["sfo"]))
                        ])),
                        examples: vec![
                            example(vec![
                                ("names", bytes(&["foo", "bar"])),
                                ("ratings", floats(&[8.0, 9.0, f32::NEG_INFINITY])),
                                ("age", ints(&[20])),
                            ]),
                            example(vec![
                                ("names", bytes(&["baz", "hello"])),
                                ("ratings", floats(&[6.0])),
                                ("intboolmix", ints(&[1, 1, 0])),
                            ]),
                            example(vec![
                                ("names", bytes(&["bar"])),
                                ("ratings", floats(&[f32::NEG_INFINITY])),
                                ("empty", Feature::default()),
                            ]),
                        ],
                    }
                )),
            }
        );
    }

    #[test]
    fn example_request_errors() {
        let cases = [
            (
                r#"{"signature_name": [ "hello" ], "examples": [ { "names": [ "foo", "bar" ] } ]}"#,
                "JSON Value: {\n    \"signature_name\": [\"hello\"],\n    \"examples\": [{\n            \"names\": [\"foo\", \"bar\"]\n        }]\n} not formatted correctly. 'signature_name' key must be a string value.",
            ),
            (
                r#"{"context": [ { "names": [ "foo", "bar" ] } ]}"#,
                "Example must be JSON object but got JSON Array",
            ),
            (
                r#"{"context": {}}"#,
                "JSON Value: {\n    \"context\": {}\n} When method is classify, key 'examples' is expected and was not found",
            ),
            (
                r#"{"examples": { "names": [ "foo", "bar" ] }}"#,
                "JSON Value: {\n    \"examples\": {\n        \"names\": [\"foo\", \"bar\"]\n    }\n} Expecting 'examples' value to be an list/array",
            ),
            (
                r#"{"examples": []}"#,
                "JSON Value: {\n    \"examples\": []\n} 'examples' value is an empty array",
            ),
            (
                r#"{"examples": [ [ { "names": [ "foo", "bar" ] } ] ]}"#,
                "Example must be JSON object but got JSON Array",
            ),
            (
                r#"{"examples": [ { "names": [ 10, null ] } ]}"#,
                "Feature: names has element with unexpected JSON type: Null",
            ),
            (
                r#"{"examples": [ { "names": [ 10, 10.0 ] } ]}"#,
                "Unexpected element type in feature: names expecting type: int64",
            ),
            (
                r#"{"examples": [ { "names": [ "a", 1 ] } ]}"#,
                "Unexpected element type in feature: names expecting type: bytes",
            ),
            (
                r#"{"examples": [ { "names": [ 1.5, {"b64": "!"} ] } ]}"#,
                "Unexpected element type in feature: names expecting type: float",
            ),
            (
                r#"{"examples": [ { "names": [ "a", {"b64": "!"} ] } ]}"#,
                "Unable to base64 decode",
            ),
            (
                r#"{"examples": [ { "names": [ 10, { "test": 10 } ] } ]}"#,
                "Feature: names has element with unexpected JSON type: Object",
            ),
            (
                r#"{"examples": [ { "names": [ [10], 20 ] } ]}"#,
                "Feature: names has element with unexpected JSON type: Array",
            ),
            (
                r#"{"examples": [ { "names": [ 20, 18446744073709551603 ] } ]}"#,
                "Feature: names has uint64_t element. Only int64_t is supported.",
            ),
        ];
        for (json, want) in cases {
            let e = ExampleJson::parse(json.as_bytes()).unwrap_err();
            assert_eq!(e.code(), graph::Code::InvalidArgument);
            assert_eq!(e.message(), want, "{json}");
        }
    }

    #[test]
    fn classify_and_regress_responses() {
        let class = |label: &str, score: f32| pb::Class {
            label: label.to_owned(),
            score,
        };
        let result = pb::ClassificationResult {
            classifications: vec![
                pb::Classifications {
                    classes: vec![class("car", 0.2), class("bike", 0.7), class("bus", 0.1)],
                },
                pb::Classifications {
                    classes: vec![class("car", 0.7), class("bike", 0.1), class("bus", 0.2)],
                },
            ],
        };
        assert_eq!(
            text(classify_response(&result).unwrap()),
            "{\n    \"results\": [[[\"car\", 0.2], [\"bike\", 0.7], [\"bus\", 0.1]], [[\"car\", 0.7], [\"bike\", 0.1], [\"bus\", 0.2]]\n    ]\n}"
        );
        let regressions = [0.2, f32::INFINITY, 1.0, f32::NEG_INFINITY, f32::NAN]
            .into_iter()
            .map(|value| pb::Regression { value })
            .collect();
        assert_eq!(
            text(regress_response(&pb::RegressionResult { regressions }).unwrap()),
            "{\n    \"results\": [0.2, Infinity, 1.0, -Infinity, NaN]\n}"
        );
        assert_eq!(
            classify_response(&pb::ClassificationResult::default())
                .unwrap_err()
                .message(),
            "Cannot convert empty ClassificationResults to JSON"
        );
        assert_eq!(
            regress_response(&pb::RegressionResult::default())
                .unwrap_err()
                .message(),
            "Cannot convert empty RegressionResults to JSON"
        );
    }
}
