//! Tensors into predict response bodies (TensorFlow Serving's
//! `MakeJsonFromTensors`): [`predict_response`] writes `"predictions"`, one
//! entry per instance (the row format), or `"outputs"` (the columnar format);
//! string outputs whose key ends in `_bytes` are written as `{"b64": "…"}`.

use std::collections::BTreeMap;

use bytes::Bytes;
use graph::{bf16, f16, DType, Result, Status, Tensor};

use super::predict_request::Format;
use super::writer::{self, PrettyWriter};
use super::{BASE64_KEY, BYTES_SUFFIX, OUTPUTS_KEY, PREDICTIONS_KEY};

/// The body of a predict response: in the row format `{"predictions": […]}`,
/// one entry per instance (the outputs' 0th dimension, which they must share):
/// the output's value when there is one output, else an object by output key;
/// in the columnar format `{"outputs": …}`, the output's value when there is
/// one, else an object by output key.
pub fn predict_response(outputs: &BTreeMap<String, Tensor>, format: Format) -> Result<Vec<u8>> {
    if outputs.is_empty() {
        return Err(Status::invalid_argument(
            "Cannot convert empty tensor map to JSON",
        ));
    }
    let tensors = outputs
        .iter()
        .map(|(k, t)| OutputTensor::new(k, t))
        .collect::<Result<Vec<_>>>()?;
    let mut w = PrettyWriter::new();
    match format {
        Format::Row => {
            let mut batch: Option<usize> = None;
            for t in &tensors {
                let Some(&rows) = t.dims.first() else {
                    return Err(Status::invalid_argument(format!(
                        "Tensor name: {} has no shape information ",
                        t.name
                    )));
                };
                if let Some(b) = batch.filter(|&b| b != rows) {
                    return Err(Status::invalid_argument(format!(
                        "Tensor name: {} has inconsistent batch size: {rows} expecting: {b}",
                        t.name
                    )));
                }
                batch = Some(rows);
            }
            let objects = tensors.len() > 1;
            let mut offsets = vec![0usize; tensors.len()];
            w.start_object();
            w.key(PREDICTIONS_KEY.as_bytes());
            w.start_array();
            for _ in 0..batch.unwrap_or(0) {
                if objects {
                    w.start_object();
                }
                w.set_single_line_arrays(true);
                for (t, offset) in tensors.iter().zip(offsets.iter_mut()) {
                    if objects {
                        w.key(t.name.as_bytes());
                    }
                    t.write(&mut w, &t.dims[1..], offset)?;
                }
                w.set_single_line_arrays(false);
                if objects {
                    w.end_object();
                }
            }
            w.end_array();
            w.end_object();
        }
        Format::Columnar => {
            let objects = tensors.len() > 1;
            w.start_object();
            w.key(OUTPUTS_KEY.as_bytes());
            if objects {
                w.start_object();
            }
            for t in &tensors {
                if objects {
                    w.key(t.name.as_bytes());
                }
                let mut offset = 0;
                t.write(&mut w, t.dims, &mut offset)?;
            }
            if objects {
                w.end_object();
            }
            w.end_object();
        }
    }
    Ok(w.into_bytes())
}

/// The elements of an output tensor, viewed once.
#[derive(Debug)]
enum Elements<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    Bool(&'a [bool]),
    Str(&'a [Bytes]),
}

/// One output being written.
#[derive(Debug)]
struct OutputTensor<'a> {
    name: &'a str,
    dims: &'a [usize],
    elements: Elements<'a>,
    /// A string output whose key ends in `_bytes`: base64-encoded.
    as_base64: bool,
}

impl<'a> OutputTensor<'a> {
    fn new(name: &'a str, t: &'a Tensor) -> Result<OutputTensor<'a>> {
        let unsupported = || {
            Status::invalid_argument(format!(
                "Failed to write JSON value for tensor type: {}",
                t.dtype().op_spec_name()
            ))
        };
        let e = |r: Result<Elements<'a>>| r.map_err(|_| unsupported());
        let elements = match t.dtype() {
            DType::F32 => e(t.as_slice().map(Elements::F32))?,
            DType::F64 => e(t.as_slice().map(Elements::F64))?,
            DType::F16 => e(t.as_slice().map(Elements::F16))?,
            DType::BF16 => e(t.as_slice().map(Elements::BF16))?,
            DType::I8 => e(t.as_slice().map(Elements::I8))?,
            DType::I16 => e(t.as_slice().map(Elements::I16))?,
            DType::I32 => e(t.as_slice().map(Elements::I32))?,
            DType::I64 => e(t.as_slice().map(Elements::I64))?,
            DType::U8 => e(t.as_slice().map(Elements::U8))?,
            DType::U16 => e(t.as_slice().map(Elements::U16))?,
            DType::U32 => e(t.as_slice().map(Elements::U32))?,
            DType::U64 => e(t.as_slice().map(Elements::U64))?,
            DType::Bool => e(t.as_slice().map(Elements::Bool))?,
            DType::String => e(t.as_strings().map(Elements::Str))?,
            DType::Resource => return Err(unsupported()),
        };
        Ok(OutputTensor {
            name,
            dims: t.dims(),
            elements,
            as_base64: t.dtype() == DType::String && name.ends_with(BYTES_SUFFIX),
        })
    }

    /// Writes the block of values of shape `dims` that starts at `offset`
    /// (TensorFlow Serving's `AddTensorValues`): a scalar bare, else nested
    /// lists.
    fn write(&self, w: &mut PrettyWriter, dims: &[usize], offset: &mut usize) -> Result<()> {
        let Some((&n, rest)) = dims.split_first() else {
            return self.write_one(w, offset);
        };
        w.start_array();
        for _ in 0..n {
            if rest.is_empty() {
                self.write_one(w, offset)?;
            } else {
                self.write(w, rest, offset)?;
            }
        }
        w.end_array();
        Ok(())
    }

    fn write_one(&self, w: &mut PrettyWriter, offset: &mut usize) -> Result<()> {
        let i = *offset;
        let missing = || {
            Status::internal(format!(
                "output '{}' has fewer values than its shape",
                self.name
            ))
        };
        // The writer has no limit here, so every token is written.
        let _written = match &self.elements {
            Elements::F32(x) => w.raw_number(&writer::decimal_f32(*x.get(i).ok_or_else(missing)?)),
            Elements::F64(x) => w.raw_number(&writer::decimal_f64(*x.get(i).ok_or_else(missing)?)),
            Elements::F16(x) => {
                w.raw_number(&writer::decimal_f32(x.get(i).ok_or_else(missing)?.to_f32()))
            }
            Elements::BF16(x) => {
                w.raw_number(&writer::decimal_f32(x.get(i).ok_or_else(missing)?.to_f32()))
            }
            Elements::I8(x) => w.int(i64::from(*x.get(i).ok_or_else(missing)?)),
            Elements::I16(x) => w.int(i64::from(*x.get(i).ok_or_else(missing)?)),
            Elements::I32(x) => w.int(i64::from(*x.get(i).ok_or_else(missing)?)),
            Elements::I64(x) => w.int(*x.get(i).ok_or_else(missing)?),
            Elements::U8(x) => w.uint(u64::from(*x.get(i).ok_or_else(missing)?)),
            Elements::U16(x) => w.uint(u64::from(*x.get(i).ok_or_else(missing)?)),
            Elements::U32(x) => w.uint(u64::from(*x.get(i).ok_or_else(missing)?)),
            Elements::U64(x) => w.uint(*x.get(i).ok_or_else(missing)?),
            Elements::Bool(x) => w.bool(*x.get(i).ok_or_else(missing)?),
            Elements::Str(x) => {
                let s = x.get(i).ok_or_else(missing)?;
                if self.as_base64 {
                    use base64::Engine;
                    let b64 = base64::engine::general_purpose::STANDARD.encode(s);
                    w.start_object();
                    w.key(BASE64_KEY.as_bytes());
                    w.string(b64.as_bytes());
                    w.end_object()
                } else {
                    w.string(s)
                }
            }
        };
        *offset += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Predict responses as TensorFlow Serving's `json_tensor_test.cc` and
    //! REST API documentation examples write them.

    use super::*;
    use crate::json::tests::{outputs, text};

    #[test]
    fn row_format_response_layout() {
        let t = Tensor::new(&[2, 3, 2], vec![1i32, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]).unwrap();
        let out = outputs(vec![("int_tensor", t)]);
        assert_eq!(
            text(predict_response(&out, Format::Row).unwrap()),
            "{\n    \"predictions\": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]\n    ]\n}"
        );
        let t = Tensor::new(&[5], vec![1i32, 2, 3, 4, 5]).unwrap();
        let out = outputs(vec![("int_tensor", t)]);
        assert_eq!(
            text(predict_response(&out, Format::Row).unwrap()),
            "{\n    \"predictions\": [1, 2, 3, 4, 5\n    ]\n}"
        );
        assert_eq!(
            text(predict_response(&out, Format::Columnar).unwrap()),
            "{\n    \"outputs\": [\n        1,\n        2,\n        3,\n        4,\n        5\n    ]\n}"
        );
        // Floats as FromJsonSingleFloatTensorSixDigitPrecision and NonFinite
        // expect them.
        let t = Tensor::new(
            &[2, 3],
            vec![9000000f32, 999999.0, 0.5, 0.0003, 0.00003, 555557.5],
        )
        .unwrap();
        assert_eq!(
            text(predict_response(&outputs(vec![("f", t)]), Format::Row).unwrap()),
            "{\n    \"predictions\": [[9e+06, 999999.0, 0.5], [0.0003, 3e-05, 555557.5]\n    ]\n}"
        );
        let t = Tensor::new(
            &[2, 2],
            vec![f32::NAN, f32::INFINITY, 3.0, f32::NEG_INFINITY],
        )
        .unwrap();
        assert_eq!(
            text(predict_response(&outputs(vec![("f", t)]), Format::Row).unwrap()),
            "{\n    \"predictions\": [[NaN, Infinity], [3.0, -Infinity]\n    ]\n}"
        );
    }

    #[test]
    fn multiple_outputs_and_bytes() {
        let out = outputs(vec![
            (
                "double_scalar_tensor",
                Tensor::new(&[2], vec![8.0f64, 9.0]).unwrap(),
            ),
            (
                "float_tensor",
                Tensor::new(&[2, 1], vec![1.0f32, 2.0]).unwrap(),
            ),
            (
                "str_tensor",
                Tensor::from_strings(&[2, 2], vec!["foo", "bar", "baz", "bat"]).unwrap(),
            ),
            (
                "str_tensor_bytes",
                Tensor::from_strings(&[2, 2], vec!["hello", "world", "tf", "serving"]).unwrap(),
            ),
        ]);
        assert_eq!(
            text(predict_response(&out, Format::Row).unwrap()),
            r#"{
    "predictions": [
        {
            "double_scalar_tensor": 8.0,
            "float_tensor": [1.0],
            "str_tensor": ["foo", "bar"],
            "str_tensor_bytes": [{
                    "b64": "aGVsbG8="
                }, {
                    "b64": "d29ybGQ="
                }]
        },
        {
            "double_scalar_tensor": 9.0,
            "float_tensor": [2.0],
            "str_tensor": ["baz", "bat"],
            "str_tensor_bytes": [{
                    "b64": "dGY="
                }, {
                    "b64": "c2VydmluZw=="
                }]
        }
    ]
}"#
        );
        assert_eq!(
            text(predict_response(&out, Format::Columnar).unwrap()),
            r#"{
    "outputs": {
        "double_scalar_tensor": [
            8.0,
            9.0
        ],
        "float_tensor": [
            [
                1.0
            ],
            [
                2.0
            ]
        ],
        "str_tensor": [
            [
                "foo",
                "bar"
            ],
            [
                "baz",
                "bat"
            ]
        ],
        "str_tensor_bytes": [
            [
                {
                    "b64": "aGVsbG8="
                },
                {
                    "b64": "d29ybGQ="
                }
            ],
            [
                {
                    "b64": "dGY="
                },
                {
                    "b64": "c2VydmluZw=="
                }
            ]
        ]
    }
}"#
        );
        // Every integer type, bools, halves; a scalar output in columnar.
        let out = outputs(vec![
            ("a", Tensor::new(&[2], vec![i64::MIN, 5]).unwrap()),
            ("b", Tensor::new(&[2], vec![u64::MAX, 0]).unwrap()),
            ("c", Tensor::new(&[2], vec![true, false]).unwrap()),
            ("d", Tensor::new(&[2], vec![-3i8, 4]).unwrap()),
            (
                "e",
                Tensor::new(&[2], vec![f16::from_f32(0.5), f16::from_f32(-1.0)]).unwrap(),
            ),
            ("f", Tensor::new(&[2], vec![65535u16, 7]).unwrap()),
        ]);
        assert_eq!(
            text(predict_response(&out, Format::Row).unwrap()),
            "{\n    \"predictions\": [\n        {\n            \"a\": -9223372036854775808,\n            \"b\": 18446744073709551615,\n            \"c\": true,\n            \"d\": -3,\n            \"e\": 0.5,\n            \"f\": 65535\n        },\n        {\n            \"a\": 5,\n            \"b\": 0,\n            \"c\": false,\n            \"d\": 4,\n            \"e\": -1.0,\n            \"f\": 7\n        }\n    ]\n}"
        );
        let out = outputs(vec![("total", Tensor::scalar(16.75f32))]);
        assert_eq!(
            text(predict_response(&out, Format::Columnar).unwrap()),
            "{\n    \"outputs\": 16.75\n}"
        );
    }

    #[test]
    fn response_errors_and_empty_batches() {
        let e = predict_response(&BTreeMap::new(), Format::Row).unwrap_err();
        assert_eq!(e.message(), "Cannot convert empty tensor map to JSON");
        let out = outputs(vec![("total", Tensor::scalar(1i32))]);
        assert_eq!(
            predict_response(&out, Format::Row).unwrap_err().message(),
            "Tensor name: total has no shape information "
        );
        let out = outputs(vec![
            (
                "int_tensor",
                Tensor::new(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap(),
            ),
            (
                "str_tensor",
                Tensor::from_strings(&[1, 3], vec!["a", "b", "c"]).unwrap(),
            ),
        ]);
        assert_eq!(
            predict_response(&out, Format::Row).unwrap_err().message(),
            "Tensor name: str_tensor has inconsistent batch size: 1 expecting: 2"
        );
        let out = outputs(vec![(
            "int_tensor",
            Tensor::new::<i32>(&[0, 2], vec![]).unwrap(),
        )]);
        assert_eq!(
            text(predict_response(&out, Format::Row).unwrap()),
            "{\n    \"predictions\": []\n}"
        );
        let out = outputs(vec![
            (
                "s",
                Tensor::from_strings::<&str>(&[0, 1, 2], vec![]).unwrap(),
            ),
            ("f", Tensor::new::<f32>(&[0, 3, 4], vec![]).unwrap()),
        ]);
        assert_eq!(
            text(predict_response(&out, Format::Row).unwrap()),
            "{\n    \"predictions\": []\n}"
        );
        let out = outputs(vec![
            ("int_tensor", Tensor::new::<i32>(&[0, 2], vec![]).unwrap()),
            (
                "str_tensor",
                Tensor::from_strings(&[1, 2], vec!["foo", "bar"]).unwrap(),
            ),
        ]);
        assert!(predict_response(&out, Format::Row)
            .unwrap_err()
            .message()
            .contains("inconsistent batch size"));
    }
}
