//! TensorFlow Serving's JSON encodings (its `util/json_tensor.cc` and the
//! printing half of `model_servers/http_rest_api_util.cc`), as pure functions:
//!
//! - predict requests: [`PredictJson::parse`], then [`PredictJson::inputs`]
//!   with the signature's input specs; the row format (`"instances"`: one
//!   value, list or object per instance, stacked along a new 0th dimension)
//!   and the columnar format (`"inputs"`: one tensor, or an object of named
//!   tensors); `{"b64": "…"}` for binary strings;
//! - predict responses: [`predict_response`] (`"predictions"` per instance, or
//!   `"outputs"`); outputs whose key ends in `_bytes` are written as
//!   `{"b64": "…"}`;
//! - classify and regress requests: [`ExampleJson::parse`] into a
//!   `tensorflow.serving.Input` of `tf.Example`s; their responses:
//!   [`classify_response`], [`regress_response`];
//! - errors: [`error_body`];
//! - the model status and metadata responses in the proto3 JSON mapping:
//!   [`status_json`], [`metadata_json`] (see [`proto_json`]).
//!
//! TensorFlow Serving reads JSON with rapidjson and writes it with rapidjson's
//! `PrettyWriter`; [`reader`] and [`writer`] reproduce both, byte for byte
//! where a client can see it: the parse error messages and offsets, numbers
//! told apart as rapidjson does (`1` is an integer, `1.0` a double), `NaN`,
//! `Infinity` and `-Infinity` accepted and written bare, floats written with
//! six significant digits when those read back as the same `float` (nine, or
//! seventeen for doubles, when not) and a `.0` added to whole numbers, and the
//! writer's layout (four-space indents, each instance on one line).
//!
//! Every error is `InvalidArgument` (a dtype no conversion exists for:
//! `Unimplemented`) with TensorFlow Serving's message. Where TensorFlow Serving
//! refuses a dtype (`half`, `bfloat16`, `uint16`), these functions convert it
//! as the other floats and integers; nothing else is accepted that it refuses.

use std::collections::{BTreeMap, BTreeSet};

use actors::saved_model::TensorSpec;
use bytes::Bytes;
use graph::{bf16, f16, DType, Result, Status, Tensor};
use proto::tensorflow::serving as pb;
use proto::tensorflow::{feature, BytesList, Example, Feature, Features, FloatList, Int64List};

use self::reader::{Document, JsonType, Value};
use self::writer::PrettyWriter;

/// The key of a signature name in a request.
const SIGNATURE_KEY: &str = "signature_name";
/// The key of the row format's tensors.
const INSTANCES_KEY: &str = "instances";
/// The key of the columnar format's tensors.
const INPUTS_KEY: &str = "inputs";
/// The key of the examples' shared context in classify and regress requests.
const CONTEXT_KEY: &str = "context";
/// The key of the examples in classify and regress requests.
const EXAMPLES_KEY: &str = "examples";
/// The key of the row format's response.
const PREDICTIONS_KEY: &str = "predictions";
/// The key of the columnar format's response.
const OUTPUTS_KEY: &str = "outputs";
/// The key of classify and regress responses.
const RESULTS_KEY: &str = "results";
/// The key of an error message.
const ERROR_KEY: &str = "error";
/// The key of a base64-encoded binary string.
const BASE64_KEY: &str = "b64";
/// Outputs whose key ends so are binary strings, written base64-encoded.
const BYTES_SUFFIX: &str = "_bytes";
/// The most dimensions a tensor may have (TensorFlow's `TensorShape` limit).
const MAX_RANK: usize = 254;

/// How a predict request gave its tensors, which is how the response gives its
/// outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `"instances"` in, `"predictions"` out.
    Row,
    /// `"inputs"` in, `"outputs"` out.
    Columnar,
}

/// A parsed predict request whose tensors await the signature's input specs
/// (TensorFlow Serving looks the model and signature up between the two steps,
/// so a malformed body is reported before an unknown model).
#[derive(Debug)]
pub struct PredictJson {
    doc: Document,
    signature_name: String,
}

impl PredictJson {
    /// Parses a predict request body: a JSON object with an optional
    /// `"signature_name"` string.
    pub fn parse(body: &[u8]) -> Result<PredictJson> {
        let doc = parse_object(body)?;
        let signature_name = signature_name(&doc)?;
        Ok(PredictJson {
            doc,
            signature_name,
        })
    }

    /// The signature the request names; empty for the default one.
    pub fn signature_name(&self) -> &str {
        &self.signature_name
    }

    /// The input tensors by input key, of the dtypes `specs` give, and the
    /// request's format. Every input of `specs` must be given.
    pub fn inputs(
        &self,
        specs: &BTreeMap<String, TensorSpec>,
    ) -> Result<(Format, Vec<(String, Tensor)>)> {
        if specs.is_empty() {
            return Err(Status::invalid_argument(format!(
                "Failed to get input map for signature: {}",
                if self.signature_name.is_empty() {
                    "DEFAULT"
                } else {
                    &self.signature_name
                }
            )));
        }
        let dtypes: BTreeMap<&str, DType> =
            specs.iter().map(|(k, s)| (k.as_str(), s.dtype)).collect();
        let root = self.doc.root();
        let instances = root.find(INSTANCES_KEY);
        let inputs = root.find(INPUTS_KEY);
        match (instances, inputs) {
            (Some(_), Some(_)) => Err(format_error(
                root,
                "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist ",
            )),
            (Some(list), None) => {
                if !list.is_array() {
                    return Err(format_error(root, "Expecting 'instances' to be an list/array"));
                }
                if list.is_empty() {
                    return Err(format_error(root, "No values in 'instances' array"));
                }
                Ok((Format::Row, tensors_from_instances(list, &dtypes)?))
            }
            (None, Some(value)) => Ok((Format::Columnar, tensors_from_inputs(value, &dtypes)?)),
            (None, None) => Err(Status::invalid_argument("Missing 'inputs' or 'instances' key")),
        }
    }
}

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

/// The body of an error response: `{"error": message}`.
pub fn error_body(message: &str) -> Vec<u8> {
    let mut w = PrettyWriter::new();
    w.start_object();
    w.key(ERROR_KEY.as_bytes());
    w.string(message.as_bytes());
    w.end_object();
    w.into_bytes()
}

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

/// The body of a model status response: the proto3 JSON mapping of
/// `GetModelStatusResponse` as TensorFlow Serving prints it (protobuf's
/// printer with whitespace and every field without presence; `json_name`s,
/// which these messages set to their proto names).
pub fn status_json(response: &pb::GetModelStatusResponse) -> Result<Vec<u8>> {
    proto_json::to_json(response, proto_json::Names::Json).map(String::into_bytes)
}

/// The body of a model metadata response, as TensorFlow Serving writes it: it
/// prints the model spec and the `signature_def` metadata (a `SignatureDefMap`
/// in an `Any`, unpacked) on their own, with proto field names, and joins them
/// into `{"model_spec": …, "metadata": {"signature_def": …}}`.
pub fn metadata_json(response: &pb::GetModelMetadataResponse) -> Result<Vec<u8>> {
    use prost::Message;
    let spec = proto_json::to_json(
        &response.model_spec.clone().unwrap_or_default(),
        proto_json::Names::Proto,
    )?;
    let any = response.metadata.get("signature_def").ok_or_else(|| {
        Status::internal(
            "Failed to find 'signature_def' key in the GetModelMetadataResponse metadata map.",
        )
    })?;
    let map = pb::SignatureDefMap::decode(any.value.as_slice())
        .map_err(|_| Status::internal("Failed to unpack 'Any' object to 'SignatureDefMap'."))?;
    let signatures = proto_json::to_json(&map, proto_json::Names::Proto)?;
    Ok(format!(
        "{{\n\"model_spec\":{spec},\n\"metadata\": {{\"signature_def\": {signatures}}}\n}}\n"
    )
    .into_bytes())
}

// ---------------------------------------------------------------------------
// Requests.

/// Parses `body`, which must be a JSON object.
fn parse_object(body: &[u8]) -> Result<Document> {
    let doc = Document::parse(body)?;
    if !doc.root().is_object() {
        return Err(format_error(doc.root(), "Is not object"));
    }
    Ok(doc)
}

/// The request's `"signature_name"`, empty when it has none.
fn signature_name(doc: &Document) -> Result<String> {
    match doc.root().find(SIGNATURE_KEY) {
        None => Ok(String::new()),
        Some(v) => match v.as_bytes() {
            Some(s) => Ok(String::from_utf8_lossy(s).into_owned()),
            None => Err(format_error(
                doc.root(),
                "not formatted correctly. 'signature_name' key must be a string value.",
            )),
        },
    }
}

/// `InvalidArgument`: "JSON Value: VALUE WHAT".
fn format_error(value: Value<'_>, what: &str) -> Status {
    Status::invalid_argument(format!("JSON Value: {} {what}", debug_string(value)))
}

/// A value as TensorFlow Serving quotes it in errors: pretty-printed, lists on
/// one line, cut off once 256 bytes are written.
fn debug_string(value: Value<'_>) -> String {
    String::from_utf8_lossy(&writer::debug_string(value)).into_owned()
}

/// `status` as TensorFlow's `Status::ToString` writes it, for nesting in
/// another message.
fn status_string(status: &Status) -> String {
    format!("{}: {}", status.code().name(), status.message())
}

fn type_error(value: Value<'_>, dtype: DType) -> Status {
    Status::invalid_argument(format!(
        "JSON Value: {} Type: {} is not of expected type: {}",
        debug_string(value),
        value.json_type().name(),
        dtype.op_spec_name()
    ))
}

/// True for `{"b64": "<string>"}` (that one key only).
fn is_base64_object(value: Value<'_>) -> bool {
    value.is_object() && value.len() == 1 && value.find(BASE64_KEY).is_some_and(|v| v.is_string())
}

/// True for an object that names tensors (an object that is not base64 data).
fn is_named_object(value: Value<'_>) -> bool {
    value.is_object() && !is_base64_object(value)
}

/// Decodes `{"b64": "…"}` (standard alphabet; padding optional, but correct
/// when given; whitespace ignored, as absl's `Base64Unescape`).
fn decode_base64_object(value: Value<'_>) -> Result<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let Some(data) = value
        .find(BASE64_KEY)
        .and_then(|v| v.as_bytes())
        .filter(|_| is_base64_object(value))
    else {
        return Err(Status::invalid_argument(format!(
            "JSON Value: {} not formatted correctly for base64 data",
            debug_string(value)
        )));
    };
    let compact: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    ENGINE
        .decode(compact)
        .map_err(|_| Status::invalid_argument("Unable to base64 decode"))
}

/// The values of one tensor being filled, in TensorFlow's element types.
#[derive(Debug)]
enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    Str(Vec<Bytes>),
}

impl Values {
    /// Empty values of `dtype`; `None` for a dtype JSON does not convert to.
    fn new(dtype: DType) -> Option<Values> {
        Some(match dtype {
            DType::F32 => Values::F32(Vec::new()),
            DType::F64 => Values::F64(Vec::new()),
            DType::F16 => Values::F16(Vec::new()),
            DType::BF16 => Values::BF16(Vec::new()),
            DType::I8 => Values::I8(Vec::new()),
            DType::I16 => Values::I16(Vec::new()),
            DType::I32 => Values::I32(Vec::new()),
            DType::I64 => Values::I64(Vec::new()),
            DType::U8 => Values::U8(Vec::new()),
            DType::U16 => Values::U16(Vec::new()),
            DType::U32 => Values::U32(Vec::new()),
            DType::U64 => Values::U64(Vec::new()),
            DType::Bool => Values::Bool(Vec::new()),
            DType::String => Values::Str(Vec::new()),
            DType::Resource => return None,
        })
    }

    /// Adds one JSON scalar (TensorFlow Serving's `AddValueToTensor`): any
    /// number for floats; for the integer types narrower than 64 bits a number
    /// that is an `int32` (then cast, as a `TensorProto`'s `int_val` is), for
    /// `int64`, `uint32` and `uint64` one in range; `true`/`false` for bools;
    /// strings for strings.
    fn push(&mut self, v: Value<'_>, dtype: DType) -> Result<()> {
        let ok = match self {
            Values::F32(x) => v.as_f64().map(|d| x.push(d as f32)),
            Values::F64(x) => v.as_f64().map(|d| x.push(d)),
            Values::F16(x) => v.as_f64().map(|d| x.push(f16::from_f64(d))),
            Values::BF16(x) => v.as_f64().map(|d| x.push(bf16::from_f64(d))),
            Values::I8(x) => v.as_i32().map(|i| x.push(i as i8)),
            Values::I16(x) => v.as_i32().map(|i| x.push(i as i16)),
            Values::I32(x) => v.as_i32().map(|i| x.push(i)),
            Values::U8(x) => v.as_i32().map(|i| x.push(i as u8)),
            Values::U16(x) => v.as_i32().map(|i| x.push(i as u16)),
            Values::I64(x) => v.as_i64().map(|i| x.push(i)),
            Values::U32(x) => v.as_u32().map(|i| x.push(i)),
            Values::U64(x) => v.as_u64().map(|i| x.push(i)),
            Values::Bool(x) => v.as_bool().map(|b| x.push(b)),
            Values::Str(x) => v.as_bytes().map(|s| x.push(Bytes::copy_from_slice(s))),
        };
        ok.ok_or_else(|| type_error(v, dtype))
    }

    fn push_bytes(&mut self, b: Vec<u8>) {
        if let Values::Str(x) = self {
            x.push(Bytes::from(b));
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::F32(x) => x.len(),
            Values::F64(x) => x.len(),
            Values::F16(x) => x.len(),
            Values::BF16(x) => x.len(),
            Values::I8(x) => x.len(),
            Values::I16(x) => x.len(),
            Values::I32(x) => x.len(),
            Values::I64(x) => x.len(),
            Values::U8(x) => x.len(),
            Values::U16(x) => x.len(),
            Values::U32(x) => x.len(),
            Values::U64(x) => x.len(),
            Values::Bool(x) => x.len(),
            Values::Str(x) => x.len(),
        }
    }

    fn into_tensor(self, shape: &[usize]) -> Result<Tensor> {
        match self {
            Values::F32(x) => Tensor::new(shape, x),
            Values::F64(x) => Tensor::new(shape, x),
            Values::F16(x) => Tensor::new(shape, x),
            Values::BF16(x) => Tensor::new(shape, x),
            Values::I8(x) => Tensor::new(shape, x),
            Values::I16(x) => Tensor::new(shape, x),
            Values::I32(x) => Tensor::new(shape, x),
            Values::I64(x) => Tensor::new(shape, x),
            Values::U8(x) => Tensor::new(shape, x),
            Values::U16(x) => Tensor::new(shape, x),
            Values::U32(x) => Tensor::new(shape, x),
            Values::U64(x) => Tensor::new(shape, x),
            Values::Bool(x) => Tensor::new(shape, x),
            Values::Str(x) => Tensor::from_strings(shape, x),
        }
    }
}

/// One input tensor being filled from JSON (TensorFlow Serving fills a
/// `TensorProto`; this fills the values and converts once).
#[derive(Debug)]
struct TensorFill {
    dtype: DType,
    values: Values,
}

impl TensorFill {
    fn new(dtype: DType, example: Value<'_>) -> Result<TensorFill> {
        let values = Values::new(dtype).ok_or_else(|| {
            Status::unimplemented(format!(
                "Conversion of JSON Value: {} to type: {}",
                debug_string(example),
                dtype.op_spec_name()
            ))
        })?;
        Ok(TensorFill { dtype, values })
    }

    /// Adds the values of `v`, a scalar or a (nested) list whose shape is
    /// `shape` (TensorFlow Serving's `FillTensorProto`): every leaf at depth
    /// `shape.len()`, every list of the size its level says. Returns how many
    /// values it added.
    fn fill(&mut self, v: Value<'_>, shape: &[usize]) -> Result<usize> {
        let before = self.values.len();
        self.fill_level(v, 0, shape)?;
        Ok(self.values.len() - before)
    }

    fn fill_level(&mut self, v: Value<'_>, level: usize, shape: &[usize]) -> Result<()> {
        let rank = shape.len();
        if !v.is_array() {
            if level != rank {
                return Err(Status::invalid_argument(format!(
                    "JSON Value: {} found at incorrect level: {} in the JSON DOM. Expected at level: {rank}",
                    debug_string(v),
                    level + 1
                )));
            }
            if v.is_object() {
                if self.dtype != DType::String {
                    return Err(type_error(v, self.dtype));
                }
                let b = decode_base64_object(v)?;
                self.values.push_bytes(b);
                return Ok(());
            }
            return self.values.push(v, self.dtype);
        }
        if level >= rank {
            return Err(Status::invalid_argument(format!(
                "Encountered list at unexpected level: {level} expected < {rank}"
            )));
        }
        if v.len() != shape[level] {
            return Err(Status::invalid_argument(format!(
                "Encountered list at unexpected size: {} at level: {level} expected size: {}",
                v.len(),
                shape[level]
            )));
        }
        for item in v.items() {
            self.fill_level(item, level + 1, shape)?;
        }
        Ok(())
    }
}

/// The shape a JSON value describes: the sizes of its first lists, nested
/// (TensorFlow Serving's `GetDenseTensorShape`); a scalar has none.
fn dense_shape(mut v: Value<'_>) -> Result<Vec<usize>> {
    let mut dims = Vec::new();
    while v.is_array() {
        if dims.len() == MAX_RANK {
            return Err(Status::invalid_argument(format!(
                "JSON Value: {} nests lists more than {MAX_RANK} deep, the most dimensions a tensor has",
                debug_string(v)
            )));
        }
        dims.push(v.len());
        match v.item(0) {
            Some(first) => v = first,
            None => break,
        }
    }
    Ok(dims)
}

/// A shape as TensorFlow Serving prints it: `[2,3]`.
fn shape_string(dims: &[usize]) -> String {
    let d: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", d.join(","))
}

/// One named input of the row format, filled instance by instance.
#[derive(Debug)]
struct RowInput {
    fill: TensorFill,
    /// The shape of each instance's value, and its size (set by the first).
    item: Option<(Vec<usize>, usize)>,
}

impl RowInput {
    /// Adds one instance's value (TensorFlow Serving's `AddInstanceItem`).
    fn add(&mut self, v: Value<'_>) -> Result<()> {
        let shape = dense_shape(v)?;
        let size = self.fill.fill(v, &shape)?;
        match &self.item {
            None => self.item = Some((shape, size)),
            Some((_, want)) if *want != size => {
                return Err(Status::invalid_argument(format!(
                    "Expecting tensor size: {want} but got: {size}"
                )))
            }
            Some((want, _)) if *want != shape => {
                return Err(Status::invalid_argument(format!(
                    "Expecting shape {} but got: {}",
                    shape_string(want),
                    shape_string(&shape)
                )))
            }
            Some(_) => {}
        }
        Ok(())
    }
}

/// The row format: `"instances"`, a non-empty list of one value per instance
/// (one input) or of one object of named values per instance (several).
fn tensors_from_instances(
    list: Value<'_>,
    dtypes: &BTreeMap<&str, DType>,
) -> Result<Vec<(String, Tensor)>> {
    let first = list
        .item(0)
        .ok_or_else(|| Status::invalid_argument("No values in 'instances' array"))?;
    if !first.is_object() && dtypes.len() > 1 {
        return Err(Status::invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input tensors required as per tensorinfo_map",
        ));
    }
    let objects = is_named_object(first);
    let names: BTreeSet<&str> = dtypes.keys().copied().collect();
    let mut inputs: BTreeMap<&str, RowInput> = BTreeMap::new();
    let mut add = |name: &str, v: Value<'_>| -> Result<()> {
        let Some((&key, &dtype)) = dtypes.get_key_value(name) else {
            return Err(Status::invalid_argument(format!(
                "JSON object: does not have named input: {name}"
            )));
        };
        let input = match inputs.entry(key) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(RowInput {
                fill: TensorFill::new(dtype, v)?,
                item: None,
            }),
        };
        input.add(v)
    };
    let mut count = 0usize;
    for elem in list.items() {
        if objects {
            if !is_named_object(elem) {
                return Err(Status::invalid_argument(format!(
                    "Expecting object but got list at item {count} of input list"
                )));
            }
            let mut keys = BTreeSet::new();
            for (key, v) in elem.members() {
                let name = String::from_utf8_lossy(key);
                if !keys.insert(name.clone().into_owned()) {
                    return Err(Status::invalid_argument(format!(
                        "Failed to process element: {count} key: {name} of 'instances' list. Error: INVALID_ARGUMENT: JSON object: named input {name} is given twice"
                    )));
                }
                add(&name, v).map_err(|e| {
                    Status::invalid_argument(format!(
                        "Failed to process element: {count} key: {name} of 'instances' list. Error: {}",
                        status_string(&e)
                    ))
                })?;
            }
            if !keys.iter().map(String::as_str).eq(names.iter().copied()) {
                return Err(Status::invalid_argument(format!(
                    "Failed to process element: {count} of 'instances' list. JSON object: {} keys must be equal to: {}",
                    debug_string(elem),
                    names.iter().copied().collect::<Vec<_>>().join(",")
                )));
            }
        } else {
            if is_named_object(elem) {
                return Err(Status::invalid_argument(format!(
                    "Expecting value/list but got object at item {count} of input list"
                )));
            }
            let name = names.first().copied().unwrap_or_default();
            add(name, elem).map_err(|e| {
                Status::invalid_argument(format!(
                    "Failed to process element: {count} of 'instances' list. Error: {}",
                    status_string(&e)
                ))
            })?;
        }
        count += 1;
    }
    let mut out = Vec::with_capacity(inputs.len());
    for (name, input) in inputs {
        let mut shape = vec![count];
        if let Some((item, _)) = &input.item {
            shape.extend_from_slice(item);
        }
        out.push((name.to_owned(), input.fill.values.into_tensor(&shape)?));
    }
    Ok(out)
}

/// The columnar format: `"inputs"`, one tensor (one input) or an object of
/// tensors by input name, each of any shape.
fn tensors_from_inputs(
    value: Value<'_>,
    dtypes: &BTreeMap<&str, DType>,
) -> Result<Vec<(String, Tensor)>> {
    let one = |name: &str, dtype: DType, v: Value<'_>| -> Result<(String, Tensor)> {
        let shape = dense_shape(v)?;
        let mut fill = TensorFill::new(dtype, v)?;
        fill.fill(v, &shape)?;
        Ok((name.to_owned(), fill.values.into_tensor(&shape)?))
    };
    if !is_named_object(value) {
        if dtypes.len() > 1 {
            return Err(Status::invalid_argument(
                "inputs is a plain value/list, but expecting an object as multiple input tensors required as per tensorinfo_map",
            ));
        }
        let Some((&name, &dtype)) = dtypes.iter().next() else {
            return Ok(Vec::new());
        };
        return Ok(vec![one(name, dtype, value)?]);
    }
    let mut out = Vec::with_capacity(dtypes.len());
    for (&name, &dtype) in dtypes {
        let v = value.find(name).ok_or_else(|| {
            Status::invalid_argument(format!("Missing named input: {name} in 'inputs' object."))
        })?;
        out.push(one(name, dtype, v)?);
    }
    Ok(out)
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

// ---------------------------------------------------------------------------
// Responses.

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

pub mod reader {
    //! A JSON reader that accepts what TensorFlow Serving's rapidjson reader
    //! accepts (`kParseIterativeFlag | kParseNanAndInfFlag |
    //! kParseStopWhenDoneFlag`) and reports its errors with rapidjson's
    //! messages and byte offsets:
    //!
    //! - `NaN`, `Inf`, `Infinity` (signed or not) are numbers;
    //! - anything after the first complete value is ignored, and a NUL byte
    //!   ends the input, as rapidjson's stream does;
    //! - strings are bytes: invalid UTF-8 passes through, `\u` escapes become
    //!   UTF-8 (a high surrogate must be followed by a low one);
    //! - an integer that fits 64 bits is an integer (signed when it fits
    //!   `i64`), any other number a double (correctly rounded);
    //! - an object keeps duplicate keys; [`Value::find`] returns the first.
    //!
    //! Parsing is iterative and the document is a flat arena (values, list
    //! items and object members in three vectors, linked by index), so no
    //! nesting depth overflows the stack, in parsing or in dropping.

    use graph::{Result, Status};

    /// Index of a value in its document.
    type Id = u32;

    /// A range of a document's pool (bytes, items or members).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Span {
        start: u32,
        len: u32,
    }

    impl Span {
        fn range(self) -> std::ops::Range<usize> {
            self.start as usize..self.start as usize + self.len as usize
        }
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Node {
        Null,
        Bool(bool),
        /// An integer that fits `i64`.
        Int(i64),
        /// An integer above `i64::MAX` that fits `u64`.
        Uint(u64),
        Double(f64),
        /// Bytes of `Document::text`.
        Str(Span),
        /// Ids in `Document::items`.
        Array(Span),
        /// Pairs in `Document::members`.
        Object(Span),
    }

    /// The JSON type of a value, as rapidjson names them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum JsonType {
        /// `null`.
        Null,
        /// `false`.
        False,
        /// `true`.
        True,
        /// `{…}`.
        Object,
        /// `[…]`.
        Array,
        /// `"…"`.
        String,
        /// A number.
        Number,
    }

    impl JsonType {
        /// rapidjson's name of the type (TensorFlow Serving's `JsonTypeString`).
        pub fn name(self) -> &'static str {
            match self {
                JsonType::Null => "Null",
                JsonType::False => "False",
                JsonType::True => "True",
                JsonType::Object => "Object",
                JsonType::Array => "Array",
                JsonType::String => "String",
                JsonType::Number => "Number",
            }
        }
    }

    /// A parsed JSON document; see the module docs.
    #[derive(Debug)]
    pub struct Document {
        nodes: Vec<Node>,
        items: Vec<Id>,
        members: Vec<(Span, Id)>,
        text: Vec<u8>,
        root: Id,
    }

    /// A value of a document.
    #[derive(Clone, Copy, Debug)]
    pub struct Value<'a> {
        doc: &'a Document,
        id: Id,
    }

    impl Document {
        /// Parses `json`. Errors are `InvalidArgument`: "JSON Parse error:
        /// MESSAGE at offset: OFFSET" with rapidjson's message and the byte offset.
        pub fn parse(json: &[u8]) -> Result<Document> {
            if json.is_empty() {
                return Err(Status::invalid_argument(
                    "JSON Parse error: The document is empty",
                ));
            }
            if json.len() >= u32::MAX as usize {
                return Err(Status::invalid_argument(
                    "JSON Parse error: the document is larger than 4 GiB",
                ));
            }
            Parser::new(json).run().map_err(|e| {
                Status::invalid_argument(format!(
                    "JSON Parse error: {} at offset: {}",
                    e.kind.message(),
                    e.offset
                ))
            })
        }

        /// The document's top-level value.
        pub fn root(&self) -> Value<'_> {
            Value {
                doc: self,
                id: self.root,
            }
        }
    }

    impl<'a> Value<'a> {
        fn node(self) -> Node {
            self.doc.nodes[self.id as usize]
        }

        /// Its JSON type.
        pub fn json_type(self) -> JsonType {
            match self.node() {
                Node::Null => JsonType::Null,
                Node::Bool(false) => JsonType::False,
                Node::Bool(true) => JsonType::True,
                Node::Int(_) | Node::Uint(_) | Node::Double(_) => JsonType::Number,
                Node::Str(_) => JsonType::String,
                Node::Array(_) => JsonType::Array,
                Node::Object(_) => JsonType::Object,
            }
        }

        /// True for an object.
        pub fn is_object(self) -> bool {
            matches!(self.node(), Node::Object(_))
        }

        /// True for an array.
        pub fn is_array(self) -> bool {
            matches!(self.node(), Node::Array(_))
        }

        /// True for a string.
        pub fn is_string(self) -> bool {
            matches!(self.node(), Node::Str(_))
        }

        /// The items of an array or members of an object; 0 for others.
        pub fn len(self) -> usize {
            match self.node() {
                Node::Array(s) | Node::Object(s) => s.len as usize,
                _ => 0,
            }
        }

        /// True for an empty array or object, or a value that is neither.
        pub fn is_empty(self) -> bool {
            self.len() == 0
        }

        /// Item `i` of an array.
        pub fn item(self, i: usize) -> Option<Value<'a>> {
            match self.node() {
                Node::Array(s) if i < s.len as usize => Some(Value {
                    doc: self.doc,
                    id: self.doc.items[s.start as usize + i],
                }),
                _ => None,
            }
        }

        /// The items of an array (none for others).
        pub fn items(self) -> impl Iterator<Item = Value<'a>> + 'a {
            let ids: &'a [Id] = match self.node() {
                Node::Array(s) => &self.doc.items[s.range()],
                _ => &[],
            };
            let doc = self.doc;
            ids.iter().map(move |&id| Value { doc, id })
        }

        /// The members of an object in document order, duplicates included
        /// (none for others).
        pub fn members(self) -> impl Iterator<Item = (&'a [u8], Value<'a>)> + 'a {
            let m: &'a [(Span, Id)] = match self.node() {
                Node::Object(s) => &self.doc.members[s.range()],
                _ => &[],
            };
            let doc = self.doc;
            m.iter()
                .map(move |&(k, id)| (&doc.text[k.range()], Value { doc, id }))
        }

        /// The first member of an object named `key`.
        pub fn find(self, key: &str) -> Option<Value<'a>> {
            self.members()
                .find(|(k, _)| *k == key.as_bytes())
                .map(|(_, v)| v)
        }

        /// A string's bytes.
        pub fn as_bytes(self) -> Option<&'a [u8]> {
            match self.node() {
                Node::Str(s) => Some(&self.doc.text[s.range()]),
                _ => None,
            }
        }

        /// `true` or `false`.
        pub fn as_bool(self) -> Option<bool> {
            match self.node() {
                Node::Bool(b) => Some(b),
                _ => None,
            }
        }

        /// A number as a double (rapidjson's `GetDouble`; integers convert).
        pub fn as_f64(self) -> Option<f64> {
            match self.node() {
                Node::Int(i) => Some(i as f64),
                Node::Uint(u) => Some(u as f64),
                Node::Double(d) => Some(d),
                _ => None,
            }
        }

        /// A number written as a double (with a fraction, an exponent, or too
        /// large for 64 bits; rapidjson's `IsDouble`).
        pub fn as_double(self) -> Option<f64> {
            match self.node() {
                Node::Double(d) => Some(d),
                _ => None,
            }
        }

        /// An integer that fits `i32` (rapidjson's `IsInt`).
        pub fn as_i32(self) -> Option<i32> {
            match self.node() {
                Node::Int(i) => i32::try_from(i).ok(),
                _ => None,
            }
        }

        /// An integer that fits `u32` (rapidjson's `IsUint`).
        pub fn as_u32(self) -> Option<u32> {
            match self.node() {
                Node::Int(i) => u32::try_from(i).ok(),
                _ => None,
            }
        }

        /// An integer that fits `i64` (rapidjson's `IsInt64`).
        pub fn as_i64(self) -> Option<i64> {
            match self.node() {
                Node::Int(i) => Some(i),
                _ => None,
            }
        }

        /// An integer that fits `u64` (rapidjson's `IsUint64`).
        pub fn as_u64(self) -> Option<u64> {
            match self.node() {
                Node::Int(i) => u64::try_from(i).ok(),
                Node::Uint(u) => Some(u),
                _ => None,
            }
        }

        /// A number as it was parsed: an integer (signed or not) or a double.
        pub(super) fn number(self) -> Option<Number> {
            match self.node() {
                Node::Int(i) => Some(Number::Int(i)),
                Node::Uint(u) => Some(Number::Uint(u)),
                Node::Double(d) => Some(Number::Double(d)),
                _ => None,
            }
        }
    }

    /// A number as parsed.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub(super) enum Number {
        Int(i64),
        Uint(u64),
        Double(f64),
    }

    /// rapidjson's parse error codes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum ErrorKind {
        DocumentEmpty,
        ValueInvalid,
        ObjectMissName,
        ObjectMissColon,
        ObjectMissCommaOrCurlyBracket,
        ArrayMissCommaOrSquareBracket,
        StringUnicodeEscapeInvalidHex,
        StringUnicodeSurrogateInvalid,
        StringEscapeInvalid,
        StringMissQuotationMark,
        StringInvalidEncoding,
        NumberTooBig,
        NumberMissFraction,
        NumberMissExponent,
    }

    impl ErrorKind {
        /// rapidjson's `GetParseError_En`.
        fn message(self) -> &'static str {
            match self {
                ErrorKind::DocumentEmpty => "The document is empty.",
                ErrorKind::ValueInvalid => "Invalid value.",
                ErrorKind::ObjectMissName => "Missing a name for object member.",
                ErrorKind::ObjectMissColon => "Missing a colon after a name of object member.",
                ErrorKind::ObjectMissCommaOrCurlyBracket => {
                    "Missing a comma or '}' after an object member."
                }
                ErrorKind::ArrayMissCommaOrSquareBracket => {
                    "Missing a comma or ']' after an array element."
                }
                ErrorKind::StringUnicodeEscapeInvalidHex => {
                    "Incorrect hex digit after \\u escape in string."
                }
                ErrorKind::StringUnicodeSurrogateInvalid => {
                    "The surrogate pair in string is invalid."
                }
                ErrorKind::StringEscapeInvalid => "Invalid escape character in string.",
                ErrorKind::StringMissQuotationMark => "Missing a closing quotation mark in string.",
                ErrorKind::StringInvalidEncoding => "Invalid encoding in string.",
                ErrorKind::NumberTooBig => "Number too big to be stored in double.",
                ErrorKind::NumberMissFraction => "Miss fraction part in number.",
                ErrorKind::NumberMissExponent => "Miss exponent in number.",
            }
        }
    }

    #[derive(Debug)]
    struct ParseError {
        kind: ErrorKind,
        offset: usize,
    }

    type Parsed<T> = std::result::Result<T, ParseError>;

    /// rapidjson's iterative parser's states (those it can be in between
    /// tokens).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum State {
        Start,
        ObjectInitial,
        MemberKey,
        KeyValueDelimiter,
        MemberValue,
        MemberDelimiter,
        ArrayInitial,
        Element,
        ElementDelimiter,
        Finish,
    }

    /// An array or object being parsed: where its children start on the
    /// pending stacks.
    #[derive(Clone, Copy, Debug)]
    struct Frame {
        object: bool,
        start: u32,
    }

    struct Parser<'a> {
        src: &'a [u8],
        pos: usize,
        doc: Document,
        frames: Vec<Frame>,
        /// Values of the open arrays, innermost last.
        pending_items: Vec<Id>,
        /// Members of the open objects, innermost last.
        pending_members: Vec<(Span, Id)>,
        /// The key of the member whose value is being parsed, per open object.
        keys: Vec<Span>,
    }

    impl<'a> Parser<'a> {
        fn new(src: &'a [u8]) -> Parser<'a> {
            // rapidjson's UTF-8 memory stream skips a byte order mark, byte by
            // byte; offsets still count from the first byte.
            let mut pos = 0;
            for b in [0xEF, 0xBB, 0xBF] {
                if src.get(pos) == Some(&b) {
                    pos += 1;
                }
            }
            Parser {
                src,
                pos,
                doc: Document {
                    nodes: Vec::new(),
                    items: Vec::new(),
                    members: Vec::new(),
                    text: Vec::new(),
                    root: 0,
                },
                frames: Vec::new(),
                pending_items: Vec::new(),
                pending_members: Vec::new(),
                keys: Vec::new(),
            }
        }

        /// The next byte; 0 at the end (a NUL byte ends the input too).
        fn peek(&self) -> u8 {
            self.src.get(self.pos).copied().unwrap_or(0)
        }

        fn consume(&mut self, b: u8) -> bool {
            if self.peek() == b && b != 0 {
                self.pos += 1;
                true
            } else {
                false
            }
        }

        fn error<T>(&self, kind: ErrorKind, offset: usize) -> Parsed<T> {
            Err(ParseError { kind, offset })
        }

        fn skip_whitespace(&mut self) {
            while matches!(self.peek(), b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            }
        }

        fn add(&mut self, node: Node) -> Id {
            let id = self.doc.nodes.len() as Id;
            self.doc.nodes.push(node);
            id
        }

        fn run(mut self) -> Parsed<Document> {
            let mut state = State::Start;
            self.skip_whitespace();
            loop {
                let c = self.peek();
                if c == 0 {
                    break;
                }
                state = self.step(state, c)?;
                if state == State::Finish {
                    return Ok(self.doc);
                }
                self.skip_whitespace();
            }
            // The input ended before the document did.
            let kind = match state {
                State::Start => ErrorKind::DocumentEmpty,
                State::ObjectInitial | State::MemberDelimiter => ErrorKind::ObjectMissName,
                State::MemberKey => ErrorKind::ObjectMissColon,
                State::MemberValue => ErrorKind::ObjectMissCommaOrCurlyBracket,
                State::KeyValueDelimiter | State::ArrayInitial | State::ElementDelimiter => {
                    ErrorKind::ValueInvalid
                }
                State::Element => ErrorKind::ArrayMissCommaOrSquareBracket,
                State::Finish => return Ok(self.doc),
            };
            self.error(kind, self.pos)
        }

        /// One token in `state` (rapidjson's `Predict` and `Transit`).
        fn step(&mut self, state: State, c: u8) -> Parsed<State> {
            let value_expected = matches!(
                state,
                State::Start
                    | State::KeyValueDelimiter
                    | State::ArrayInitial
                    | State::ElementDelimiter
            );
            if value_expected {
                return match c {
                    b'[' | b'{' => {
                        self.pos += 1;
                        self.frames.push(Frame {
                            object: c == b'{',
                            start: if c == b'{' {
                                self.pending_members.len() as u32
                            } else {
                                self.pending_items.len() as u32
                            },
                        });
                        Ok(if c == b'{' {
                            State::ObjectInitial
                        } else {
                            State::ArrayInitial
                        })
                    }
                    b']' if state == State::ArrayInitial => self.close(),
                    b']' | b'}' | b',' | b':' => {
                        let kind = if state == State::Start {
                            ErrorKind::DocumentEmpty
                        } else {
                            ErrorKind::ValueInvalid
                        };
                        self.error(kind, self.pos)
                    }
                    _ => {
                        let node = self.scalar(c)?;
                        let id = self.add(node);
                        Ok(self.completed(id))
                    }
                };
            }
            match (state, c) {
                (State::ObjectInitial | State::MemberDelimiter, b'"') => {
                    self.pos += 1;
                    let key = self.string()?;
                    self.keys.push(key);
                    Ok(State::MemberKey)
                }
                (State::ObjectInitial, b'}') => self.close(),
                (State::ObjectInitial | State::MemberDelimiter, _) => {
                    self.error(ErrorKind::ObjectMissName, self.pos)
                }
                (State::MemberKey, b':') => {
                    self.pos += 1;
                    Ok(State::KeyValueDelimiter)
                }
                (State::MemberKey, _) => self.error(ErrorKind::ObjectMissColon, self.pos),
                (State::MemberValue, b',') => {
                    self.pos += 1;
                    Ok(State::MemberDelimiter)
                }
                (State::MemberValue, b'}') => self.close(),
                (State::MemberValue, _) => {
                    self.error(ErrorKind::ObjectMissCommaOrCurlyBracket, self.pos)
                }
                (State::Element, b',') => {
                    self.pos += 1;
                    Ok(State::ElementDelimiter)
                }
                (State::Element, b']') => self.close(),
                (State::Element, _) => {
                    self.error(ErrorKind::ArrayMissCommaOrSquareBracket, self.pos)
                }
                // Value states are handled above; Finish ends the loop.
                _ => self.error(ErrorKind::ValueInvalid, self.pos),
            }
        }

        /// Closes the innermost array or object at its `]` or `}`.
        fn close(&mut self) -> Parsed<State> {
            self.pos += 1;
            let Some(frame) = self.frames.pop() else {
                return self.error(ErrorKind::ValueInvalid, self.pos);
            };
            let node = if frame.object {
                let start = self.doc.members.len() as u32;
                let children = self.pending_members.drain(frame.start as usize..);
                let len = children.len() as u32;
                self.doc.members.extend(children);
                Node::Object(Span { start, len })
            } else {
                let start = self.doc.items.len() as u32;
                let children = self.pending_items.drain(frame.start as usize..);
                let len = children.len() as u32;
                self.doc.items.extend(children);
                Node::Array(Span { start, len })
            };
            let id = self.add(node);
            Ok(self.completed(id))
        }

        /// A value is complete: it joins its parent, or ends the document.
        fn completed(&mut self, id: Id) -> State {
            match self.frames.last() {
                None => {
                    self.doc.root = id;
                    State::Finish
                }
                Some(f) if f.object => {
                    let key = self.keys.pop().unwrap_or(Span { start: 0, len: 0 });
                    self.pending_members.push((key, id));
                    State::MemberValue
                }
                Some(_) => {
                    self.pending_items.push(id);
                    State::Element
                }
            }
        }

        /// A string, number or literal starting with `c`.
        fn scalar(&mut self, c: u8) -> Parsed<Node> {
            match c {
                b'"' => {
                    self.pos += 1;
                    Ok(Node::Str(self.string()?))
                }
                b'n' => self.literal(b"null", Node::Null),
                b't' => self.literal(b"true", Node::Bool(true)),
                b'f' => self.literal(b"false", Node::Bool(false)),
                _ => self.number(),
            }
        }

        fn literal(&mut self, word: &[u8], node: Node) -> Parsed<Node> {
            self.pos += 1;
            for &b in &word[1..] {
                if !self.consume(b) {
                    return self.error(ErrorKind::ValueInvalid, self.pos);
                }
            }
            Ok(node)
        }

        /// The rest of a string after its opening quote, decoded into the
        /// document's text.
        fn string(&mut self) -> Parsed<Span> {
            let start = self.doc.text.len();
            loop {
                let c = self.peek();
                match c {
                    b'\\' => {
                        let escape = self.pos;
                        self.pos += 1;
                        let e = self.peek();
                        let simple = match e {
                            b'"' => Some(b'"'),
                            b'\\' => Some(b'\\'),
                            b'/' => Some(b'/'),
                            b'b' => Some(0x08),
                            b'f' => Some(0x0C),
                            b'n' => Some(b'\n'),
                            b'r' => Some(b'\r'),
                            b't' => Some(b'\t'),
                            _ => None,
                        };
                        if let Some(s) = simple {
                            self.pos += 1;
                            self.doc.text.push(s);
                        } else if e == b'u' {
                            self.pos += 1;
                            let mut cp = self.hex4(escape)?;
                            if (0xD800..=0xDBFF).contains(&cp) {
                                if !(self.consume(b'\\') && self.consume(b'u')) {
                                    return self
                                        .error(ErrorKind::StringUnicodeSurrogateInvalid, escape);
                                }
                                let low = self.hex4(escape)?;
                                if !(0xDC00..=0xDFFF).contains(&low) {
                                    return self
                                        .error(ErrorKind::StringUnicodeSurrogateInvalid, escape);
                                }
                                cp = (((cp - 0xD800) << 10) | (low - 0xDC00)) + 0x10000;
                            }
                            push_utf8(&mut self.doc.text, cp);
                        } else {
                            return self.error(ErrorKind::StringEscapeInvalid, escape);
                        }
                    }
                    b'"' => {
                        self.pos += 1;
                        let len = self.doc.text.len() - start;
                        return Ok(Span {
                            start: start as u32,
                            len: len as u32,
                        });
                    }
                    0 => return self.error(ErrorKind::StringMissQuotationMark, self.pos),
                    c if c < 0x20 => return self.error(ErrorKind::StringInvalidEncoding, self.pos),
                    _ => {
                        // Copy the run of plain bytes at once.
                        let run = self.src[self.pos..]
                            .iter()
                            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                            .unwrap_or(self.src.len() - self.pos);
                        self.doc
                            .text
                            .extend_from_slice(&self.src[self.pos..self.pos + run]);
                        self.pos += run;
                    }
                }
            }
        }

        fn hex4(&mut self, escape: usize) -> Parsed<u32> {
            let mut v = 0u32;
            for _ in 0..4 {
                let d = match self.peek() {
                    c @ b'0'..=b'9' => c - b'0',
                    c @ b'a'..=b'f' => c - b'a' + 10,
                    c @ b'A'..=b'F' => c - b'A' + 10,
                    _ => return self.error(ErrorKind::StringUnicodeEscapeInvalidHex, escape),
                };
                self.pos += 1;
                v = (v << 4) | u32::from(d);
            }
            Ok(v)
        }

        /// A number (or `NaN`, `Inf`, `Infinity`), as rapidjson's
        /// `ParseNumber` delimits it.
        fn number(&mut self) -> Parsed<Node> {
            let start = self.pos;
            let minus = self.consume(b'-');
            let digits_start = self.pos;
            match self.peek() {
                b'0' => self.pos += 1,
                b'1'..=b'9' => {
                    while self.peek().is_ascii_digit() {
                        self.pos += 1;
                    }
                }
                b'N' | b'I' => {
                    if self.consume(b'N') {
                        if self.consume(b'a') && self.consume(b'N') {
                            return Ok(Node::Double(f64::NAN));
                        }
                        return self.error(ErrorKind::ValueInvalid, self.pos);
                    }
                    self.pos += 1;
                    if !(self.consume(b'n') && self.consume(b'f')) {
                        return self.error(ErrorKind::ValueInvalid, self.pos);
                    }
                    if self.peek() == b'i' {
                        for b in *b"inity" {
                            if !self.consume(b) {
                                return self.error(ErrorKind::ValueInvalid, self.pos);
                            }
                        }
                    }
                    return Ok(Node::Double(if minus {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    }));
                }
                _ => return self.error(ErrorKind::ValueInvalid, self.pos),
            }
            let int_end = self.pos;
            let mut is_double = false;
            if self.consume(b'.') {
                is_double = true;
                if !self.peek().is_ascii_digit() {
                    return self.error(ErrorKind::NumberMissFraction, self.pos);
                }
                while self.peek().is_ascii_digit() {
                    self.pos += 1;
                }
            }
            if self.consume(b'e') || self.consume(b'E') {
                is_double = true;
                if !self.consume(b'+') {
                    self.consume(b'-');
                }
                if !self.peek().is_ascii_digit() {
                    return self.error(ErrorKind::NumberMissExponent, self.pos);
                }
                while self.peek().is_ascii_digit() {
                    self.pos += 1;
                }
            }
            if !is_double {
                // Digits only; they are ASCII.
                let digits = std::str::from_utf8(&self.src[digits_start..int_end]).unwrap_or("");
                if let Ok(u) = digits.parse::<u64>() {
                    if !minus {
                        return Ok(match i64::try_from(u) {
                            Ok(i) => Node::Int(i),
                            Err(_) => Node::Uint(u),
                        });
                    }
                    if u <= 1u64 << 63 {
                        return Ok(Node::Int((u as i64).wrapping_neg()));
                    }
                }
            }
            let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
            match text.parse::<f64>() {
                Ok(d) if d.is_finite() => Ok(Node::Double(d)),
                _ => self.error(ErrorKind::NumberTooBig, start),
            }
        }
    }

    /// Appends code point `cp` (any value below 0x110000, surrogates included,
    /// as rapidjson's encoder writes them) in UTF-8.
    fn push_utf8(out: &mut Vec<u8>, cp: u32) {
        if cp < 0x80 {
            out.push(cp as u8);
        } else if cp < 0x800 {
            out.push(0xC0 | (cp >> 6) as u8);
            out.push(0x80 | (cp & 0x3F) as u8);
        } else if cp < 0x10000 {
            out.push(0xE0 | (cp >> 12) as u8);
            out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
            out.push(0x80 | (cp & 0x3F) as u8);
        } else {
            out.push(0xF0 | (cp >> 18) as u8);
            out.push(0x80 | ((cp >> 12) & 0x3F) as u8);
            out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
            out.push(0x80 | (cp & 0x3F) as u8);
        }
    }
}

pub mod writer {
    //! rapidjson's `PrettyWriter` as TensorFlow Serving uses it, and the
    //! number formats it writes.
    //!
    //! The layout: four spaces of indent per level; an object's members one per
    //! line (`"key": value`); an array's items one per line, or, while
    //! single-line arrays are on (TensorFlow Serving turns them on for each
    //! instance of a row-format response), separated by `, ` with no line
    //! breaks. The switch is read as each token is written, as rapidjson reads
    //! its format flag, which is what gives TensorFlow Serving's responses their
    //! shape (`"predictions": [[1.0, 2.0], [3.0, 4.0]` and then the closing
    //! bracket on a line of its own).

    use super::reader::{Number, Value};

    #[derive(Clone, Copy, Debug)]
    struct Level {
        in_array: bool,
        values: usize,
    }

    /// rapidjson's `PrettyWriter<StringBuffer>`; see the module docs. Strings
    /// are bytes and are written as given (invalid UTF-8 included), escaping
    /// `"`, `\` and control characters as rapidjson does.
    #[derive(Debug, Default)]
    pub struct PrettyWriter {
        out: Vec<u8>,
        stack: Vec<Level>,
        single_line_arrays: bool,
        /// Stop writing once the output reaches this many bytes (for error
        /// messages).
        limit: Option<usize>,
    }

    impl PrettyWriter {
        /// An empty writer.
        pub fn new() -> PrettyWriter {
            PrettyWriter::default()
        }

        /// The bytes written.
        pub fn into_bytes(self) -> Vec<u8> {
            self.out
        }

        /// rapidjson's `kFormatSingleLineArray` on or off.
        pub fn set_single_line_arrays(&mut self, on: bool) {
            self.single_line_arrays = on;
        }

        /// False once a limit is set and reached: nothing more is written.
        fn in_limit(&self) -> bool {
            self.limit.is_none_or(|l| self.out.len() < l)
        }

        fn indent(&mut self) {
            let n = self.stack.len() * 4;
            self.out.extend(std::iter::repeat_n(b' ', n));
        }

        /// What goes before a value (rapidjson's `PrettyPrefix`).
        fn prefix(&mut self) {
            let single = self.single_line_arrays;
            let Some(level) = self.stack.last().copied() else {
                return;
            };
            if level.in_array {
                if level.values > 0 {
                    self.out.push(b',');
                    if single {
                        self.out.push(b' ');
                    }
                }
                if !single {
                    self.out.push(b'\n');
                    self.indent();
                }
            } else {
                if level.values > 0 {
                    if level.values % 2 == 0 {
                        self.out.extend_from_slice(b",\n");
                    } else {
                        self.out.extend_from_slice(b": ");
                    }
                } else {
                    self.out.push(b'\n');
                }
                if level.values % 2 == 0 {
                    self.indent();
                }
            }
            if let Some(l) = self.stack.last_mut() {
                l.values += 1;
            }
        }

        /// `{`.
        pub fn start_object(&mut self) -> bool {
            if !self.in_limit() {
                return false;
            }
            self.prefix();
            self.out.push(b'{');
            self.stack.push(Level {
                in_array: false,
                values: 0,
            });
            true
        }

        /// `}`.
        pub fn end_object(&mut self) -> bool {
            if !self.in_limit() {
                return false;
            }
            let empty = self.stack.pop().is_none_or(|l| l.values == 0);
            if !empty {
                self.out.push(b'\n');
                self.indent();
            }
            self.out.push(b'}');
            true
        }

        /// `[`.
        pub fn start_array(&mut self) -> bool {
            if !self.in_limit() {
                return false;
            }
            self.prefix();
            self.out.push(b'[');
            self.stack.push(Level {
                in_array: true,
                values: 0,
            });
            true
        }

        /// `]`.
        pub fn end_array(&mut self) -> bool {
            if !self.in_limit() {
                return false;
            }
            let empty = self.stack.pop().is_none_or(|l| l.values == 0);
            if !empty && !self.single_line_arrays {
                self.out.push(b'\n');
                self.indent();
            }
            self.out.push(b']');
            true
        }

        /// An object's key.
        pub fn key(&mut self, s: &[u8]) -> bool {
            self.string(s)
        }

        /// A string.
        pub fn string(&mut self, s: &[u8]) -> bool {
            if !self.in_limit() {
                return false;
            }
            self.prefix();
            self.out.push(b'"');
            for &b in s {
                match b {
                    b'"' => self.out.extend_from_slice(b"\\\""),
                    b'\\' => self.out.extend_from_slice(b"\\\\"),
                    0x08 => self.out.extend_from_slice(b"\\b"),
                    0x0C => self.out.extend_from_slice(b"\\f"),
                    b'\n' => self.out.extend_from_slice(b"\\n"),
                    b'\r' => self.out.extend_from_slice(b"\\r"),
                    b'\t' => self.out.extend_from_slice(b"\\t"),
                    b if b < 0x20 => {
                        const HEX: &[u8; 16] = b"0123456789ABCDEF";
                        self.out.extend_from_slice(b"\\u00");
                        self.out.push(HEX[usize::from(b >> 4)]);
                        self.out.push(HEX[usize::from(b & 0xF)]);
                    }
                    b => self.out.push(b),
                }
            }
            self.out.push(b'"');
            true
        }

        /// A number written as given (rapidjson's `RawValue` of a number).
        pub fn raw_number(&mut self, s: &str) -> bool {
            if !self.in_limit() {
                return false;
            }
            self.prefix();
            self.out.extend_from_slice(s.as_bytes());
            true
        }

        /// A signed integer.
        pub fn int(&mut self, v: i64) -> bool {
            self.raw_number(&v.to_string())
        }

        /// An unsigned integer.
        pub fn uint(&mut self, v: u64) -> bool {
            self.raw_number(&v.to_string())
        }

        /// `true` or `false`.
        pub fn bool(&mut self, v: bool) -> bool {
            self.raw_number(if v { "true" } else { "false" })
        }

        /// `null`.
        pub fn null(&mut self) -> bool {
            self.raw_number("null")
        }

        /// Writes `v` (rapidjson's `Value::Accept`); false when writing
        /// stopped (at the limit, or at a non-finite double, which rapidjson's
        /// writer refuses).
        fn value(&mut self, v: Value<'_>) -> bool {
            use super::reader::JsonType;
            match v.json_type() {
                JsonType::Null => self.null(),
                JsonType::False => self.bool(false),
                JsonType::True => self.bool(true),
                JsonType::String => self.string(v.as_bytes().unwrap_or_default()),
                JsonType::Number => match v.number() {
                    Some(Number::Int(i)) => self.int(i),
                    Some(Number::Uint(u)) => self.uint(u),
                    Some(Number::Double(d)) => match rapidjson_dtoa(d) {
                        Some(s) => self.raw_number(&s),
                        None => false,
                    },
                    None => false,
                },
                JsonType::Object => {
                    if !self.start_object() {
                        return false;
                    }
                    for (k, m) in v.members() {
                        if !self.key(k) || !self.value(m) {
                            return false;
                        }
                    }
                    self.end_object()
                }
                JsonType::Array => {
                    if !self.start_array() {
                        return false;
                    }
                    for item in v.items() {
                        if !self.value(item) {
                            return false;
                        }
                    }
                    self.end_array()
                }
            }
        }
    }

    /// How TensorFlow Serving quotes a JSON value in an error message
    /// (`JsonValueToDebugString`): pretty-printed with single-line arrays,
    /// stopping at the first token that would start past 256 bytes.
    pub fn debug_string(v: Value<'_>) -> Vec<u8> {
        let mut w = PrettyWriter {
            single_line_arrays: true,
            limit: Some(256),
            ..PrettyWriter::default()
        };
        // Each level of nesting writes at least one byte, so the recursion
        // stops within 256 levels.
        w.value(v);
        w.out
    }

    /// A `float` as TensorFlow Serving writes it (`WriteDecimal<float>`): six
    /// significant digits (`%g`) when they read back as the same float, else
    /// nine; `.0` appended to a number with neither a point nor an exponent;
    /// `NaN`, `Infinity`, `-Infinity` bare.
    pub fn decimal_f32(v: f32) -> String {
        decimal(f64::from(v), |s| s.parse::<f32>().ok().map(f64::from), 9)
    }

    /// A `double` as TensorFlow Serving writes it: as [`decimal_f32`], with
    /// seventeen digits when six do not read back.
    pub fn decimal_f64(v: f64) -> String {
        decimal(v, |s| s.parse::<f64>().ok(), 17)
    }

    fn decimal(v: f64, read: impl Fn(&str) -> Option<f64>, max_digits: usize) -> String {
        if v.is_nan() {
            return "NaN".to_owned();
        }
        if v.is_infinite() {
            return if v < 0.0 { "-Infinity" } else { "Infinity" }.to_owned();
        }
        let mut s = format_g(v, 6);
        if read(&s) != Some(v) {
            s = format_g(v, max_digits);
        }
        if !s.contains('.') && !s.contains('e') {
            s.push_str(".0");
        }
        s
    }

    /// C's `printf("%.{precision}g", v)` of a finite `v`.
    pub fn format_g(v: f64, precision: usize) -> String {
        let p = precision.max(1);
        if v == 0.0 {
            return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
        }
        // The exponent after rounding to p significant digits decides the style.
        let sci = format!("{:.*e}", p - 1, v);
        let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        if exp < -4 || exp >= p as i32 {
            let mantissa = strip_zeros(mantissa);
            let sign = if exp < 0 { '-' } else { '+' };
            format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
        } else {
            let decimals = (p as i32 - 1 - exp).max(0) as usize;
            strip_zeros(&format!("{v:.decimals$}")).to_owned()
        }
    }

    /// `1.2300` → `1.23`, `4.000` → `4`; numbers without a point unchanged.
    fn strip_zeros(s: &str) -> &str {
        if !s.contains('.') {
            return s;
        }
        s.trim_end_matches('0').trim_end_matches('.')
    }

    /// rapidjson's `Writer::Double` (Grisu2's shortest digits, `Prettify`'s
    /// layout: `1.0`, `0.001`, `1e30`, `1.5e-7`); `None` for NaN and the
    /// infinities, which it refuses.
    pub fn rapidjson_dtoa(d: f64) -> Option<String> {
        if !d.is_finite() {
            return None;
        }
        if d == 0.0 {
            return Some(if d.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned());
        }
        let sci = format!("{:e}", d.abs());
        let (mantissa, exp) = sci.split_once('e')?;
        let exp: i32 = exp.parse().ok()?;
        let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
        let length = digits.len() as i32;
        // value = digits × 10^k; kk = the decimal exponent of the first digit + 1.
        let kk = exp + 1;
        let k = kk - length;
        let mut out = String::new();
        if d < 0.0 {
            out.push('-');
        }
        if (0..).contains(&k) && kk <= 21 {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', k as usize));
            out.push_str(".0");
        } else if 0 < kk && kk <= 21 {
            out.push_str(&digits[..kk as usize]);
            out.push('.');
            out.push_str(&digits[kk as usize..]);
        } else if -6 < kk && kk <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-kk) as usize));
            out.push_str(&digits);
        } else {
            out.push_str(&digits[..1]);
            if length > 1 {
                out.push('.');
                out.push_str(&digits[1..]);
            }
            out.push('e');
            out.push_str(&(kk - 1).to_string());
        }
        Some(out)
    }
}

pub mod proto_json {
    //! The proto3 JSON mapping as TensorFlow Serving prints its status and
    //! metadata responses: protobuf's `MessageToJsonString` with
    //! `add_whitespace` and `always_print_fields_with_no_presence`, by
    //! reflection over [`proto::text::descriptor_pool`]:
    //!
    //! - one space of indent per level, `"name": value`, a newline at the end;
    //! - fields in field-number order; a field without presence (a proto3
    //!   scalar, enum, repeated or map field) always, a field with presence (a
    //!   message, a oneof member) when set;
    //! - 64-bit integers as strings, enums by name, bytes in base64, floats with
    //!   `%.6g` (`%.9g` when that does not read back; doubles `%.15g`/`%.17g`),
    //!   `"NaN"`, `"Infinity"`, `"-Infinity"`;
    //! - map keys as strings (sorted here; protobuf leaves the order open);
    //! - the wrapper types as their value, `google.protobuf.Any` as `"@type"`
    //!   and the fields of the message it holds (or `"value"` for a well-known
    //!   type). Timestamp, Duration, FieldMask and Struct are printed as plain
    //!   messages: no message of the serving APIs holds one.

    use graph::{Result, Status};
    use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};

    /// Which field names to print.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Names {
        /// Each field's `json_name` (lowerCamelCase unless the `.proto` sets one).
        Json,
        /// The names in the `.proto` (`preserve_proto_field_names`).
        Proto,
    }

    const WRAPPERS: [&str; 9] = [
        "google.protobuf.DoubleValue",
        "google.protobuf.FloatValue",
        "google.protobuf.Int64Value",
        "google.protobuf.UInt64Value",
        "google.protobuf.Int32Value",
        "google.protobuf.UInt32Value",
        "google.protobuf.BoolValue",
        "google.protobuf.StringValue",
        "google.protobuf.BytesValue",
    ];

    /// `message` in the proto3 JSON mapping; see the module docs.
    pub fn to_json<M: prost::Message + prost::Name>(message: &M, names: Names) -> Result<String> {
        let pool = proto::text::descriptor_pool();
        let desc = pool
            .get_message_by_name(&M::full_name())
            .ok_or_else(|| Status::internal(format!("no descriptor of {}", M::full_name())))?;
        let dynamic =
            DynamicMessage::decode(desc, message.encode_to_vec().as_slice()).map_err(|e| {
                Status::internal(format!("Failed to convert proto to json. Error: {e}"))
            })?;
        let mut p = Printer {
            out: String::new(),
            indent: 0,
            names,
        };
        p.message(&dynamic)?;
        p.newline();
        Ok(p.out)
    }

    struct Printer {
        out: String,
        indent: usize,
        names: Names,
    }

    impl Printer {
        fn newline(&mut self) {
            self.out.push('\n');
            self.out.extend(std::iter::repeat_n(' ', self.indent));
        }

        fn comma(&mut self, first: &mut bool) {
            if *first {
                *first = false;
            } else {
                self.out.push(',');
            }
        }

        fn message(&mut self, m: &DynamicMessage) -> Result<()> {
            let desc = m.descriptor();
            let name = desc.full_name();
            if name == "google.protobuf.Any" {
                return self.any(m);
            }
            if WRAPPERS.contains(&name) {
                let f = desc
                    .get_field(1)
                    .ok_or_else(|| Status::internal(format!("{name} has no field 1")))?;
                return self.value(&m.get_field(&f), &f.kind());
            }
            self.out.push('{');
            self.indent += 1;
            let mut first = true;
            self.fields(m, &mut first)?;
            self.indent -= 1;
            if !first {
                self.newline();
            }
            self.out.push('}');
            Ok(())
        }

        fn fields(&mut self, m: &DynamicMessage, first: &mut bool) -> Result<()> {
            let mut fields: Vec<FieldDescriptor> = m
                .descriptor()
                .fields()
                .filter(|f| f.is_list() || f.is_map() || !f.supports_presence() || m.has_field(f))
                .collect();
            fields.sort_by_key(|f| f.number());
            for f in fields {
                self.comma(first);
                self.newline();
                let name = match self.names {
                    Names::Json => f.json_name().to_owned(),
                    Names::Proto => f.name().to_owned(),
                };
                self.quoted(&name);
                self.out.push_str(": ");
                self.value(&m.get_field(&f), &f.kind())?;
            }
            Ok(())
        }

        fn any(&mut self, m: &DynamicMessage) -> Result<()> {
            let url = m
                .get_field_by_number(1)
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let bytes = m
                .get_field_by_number(2)
                .and_then(|v| v.as_bytes().cloned())
                .unwrap_or_default();
            if url.is_empty() && bytes.is_empty() {
                self.out.push_str("{}");
                return Ok(());
            }
            if url.is_empty() {
                return Err(Status::internal("broken Any: missing type URL"));
            }
            let type_name = url.rsplit('/').next().unwrap_or_default();
            let desc = proto::text::descriptor_pool()
                .get_message_by_name(type_name)
                .ok_or_else(|| Status::internal(format!("Any of unknown type {url}")))?;
            let inner = DynamicMessage::decode(desc, bytes)
                .map_err(|e| Status::internal(format!("Any of type {url} does not decode: {e}")))?;
            self.out.push('{');
            self.indent += 1;
            self.newline();
            self.out.push_str("\"@type\": ");
            self.quoted(&url);
            let mut first = false;
            let inner_name = inner.descriptor().full_name().to_owned();
            if inner_name.starts_with("google.protobuf.") {
                self.comma(&mut first);
                self.newline();
                self.out.push_str("\"value\": ");
                self.message(&inner)?;
            } else {
                self.fields(&inner, &mut first)?;
            }
            self.indent -= 1;
            self.newline();
            self.out.push('}');
            Ok(())
        }

        fn value(&mut self, v: &Value, kind: &Kind) -> Result<()> {
            match v {
                Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
                Value::I32(i) => self.out.push_str(&i.to_string()),
                Value::U32(u) => self.out.push_str(&u.to_string()),
                Value::I64(i) => self.quoted(&i.to_string()),
                Value::U64(u) => self.quoted(&u.to_string()),
                Value::F32(x) => self.float(
                    f64::from(*x),
                    |s| s.parse::<f32>().ok().map(f64::from),
                    6,
                    9,
                ),
                Value::F64(x) => self.float(*x, |s| s.parse::<f64>().ok(), 15, 17),
                Value::String(s) => self.quoted(s),
                Value::Bytes(b) => {
                    use base64::Engine;
                    let s = base64::engine::general_purpose::STANDARD.encode(b);
                    self.out.push('"');
                    self.out.push_str(&s);
                    self.out.push('"');
                }
                Value::EnumNumber(n) => match kind {
                    Kind::Enum(e) if e.full_name() == "google.protobuf.NullValue" => {
                        self.out.push_str("null")
                    }
                    Kind::Enum(e) => match e.get_value(*n) {
                        Some(ev) => self.quoted(ev.name()),
                        None => self.out.push_str(&n.to_string()),
                    },
                    _ => self.out.push_str(&n.to_string()),
                },
                Value::Message(m) => self.message(m)?,
                Value::List(items) => {
                    self.out.push('[');
                    self.indent += 1;
                    let mut first = true;
                    for item in items {
                        self.comma(&mut first);
                        self.newline();
                        self.value(item, kind)?;
                    }
                    self.indent -= 1;
                    if !first {
                        self.newline();
                    }
                    self.out.push(']');
                }
                Value::Map(map) => {
                    let value_kind = match kind {
                        Kind::Message(entry) if entry.is_map_entry() => {
                            entry.map_entry_value_field().kind()
                        }
                        _ => return Err(Status::internal("a map field of a non-map kind")),
                    };
                    let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    self.out.push('{');
                    self.indent += 1;
                    let mut first = true;
                    for (k, v) in entries {
                        self.comma(&mut first);
                        self.newline();
                        match k {
                            MapKey::Bool(b) => self.quoted(if *b { "true" } else { "false" }),
                            MapKey::I32(i) => self.quoted(&i.to_string()),
                            MapKey::I64(i) => self.quoted(&i.to_string()),
                            MapKey::U32(u) => self.quoted(&u.to_string()),
                            MapKey::U64(u) => self.quoted(&u.to_string()),
                            MapKey::String(s) => self.quoted(s),
                        }
                        self.out.push_str(": ");
                        self.value(v, &value_kind)?;
                    }
                    self.indent -= 1;
                    if !first {
                        self.newline();
                    }
                    self.out.push('}');
                }
            }
            Ok(())
        }

        /// protobuf's `SimpleFtoa`/`SimpleDtoa`: `digits` significant digits
        /// when they read back, else `max_digits`.
        fn float(
            &mut self,
            v: f64,
            read: impl Fn(&str) -> Option<f64>,
            digits: usize,
            max_digits: usize,
        ) {
            if v.is_nan() {
                self.out.push_str("\"NaN\"");
            } else if v.is_infinite() {
                self.out.push_str(if v > 0.0 {
                    "\"Infinity\""
                } else {
                    "\"-Infinity\""
                });
            } else {
                let mut s = super::writer::format_g(v, digits);
                if read(&s) != Some(v) {
                    s = super::writer::format_g(v, max_digits);
                }
                self.out.push_str(&s);
            }
        }

        /// A string in quotes, escaped as protobuf's JSON writer escapes.
        fn quoted(&mut self, s: &str) {
            self.out.push('"');
            for c in s.chars() {
                match c {
                    '\n' => self.out.push_str("\\n"),
                    '\r' => self.out.push_str("\\r"),
                    '\t' => self.out.push_str("\\t"),
                    '"' => self.out.push_str("\\\""),
                    '\u{0C}' => self.out.push_str("\\f"),
                    '\u{08}' => self.out.push_str("\\b"),
                    '\\' => self.out.push_str("\\\\"),
                    c if must_escape(c) => {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            self.out.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                    c => self.out.push(c),
                }
            }
            self.out.push('"');
        }
    }

    /// The characters protobuf's JSON writer writes as `\u` escapes.
    fn must_escape(c: char) -> bool {
        let u = u32::from(c);
        matches!(
            u,
            0x3C | 0x3E
                | 0xFEFF
                | 0xFFF9
                | 0xFFFA
                | 0xFFFB
                | 0x00AD
                | 0x06DD
                | 0x070F
                | 0x17B4
                | 0x17B5
                | 0xE0001
        ) || [
            (0x0000, 0x001F),
            (0x007F, 0x009F),
            (0x0600, 0x0603),
            (0x200B, 0x200F),
            (0x2028, 0x202E),
            (0x2060, 0x2064),
            (0x206A, 0x206F),
            (0x1D173, 0x1D17A),
            (0xE0020, 0xE007F),
        ]
        .iter()
        .any(|&(lo, hi)| (lo..=hi).contains(&u))
    }
}

#[cfg(test)]
mod tests {
    //! Expectations computed by hand from TensorFlow Serving's sources and its
    //! `json_tensor_test.cc`, `http_rest_api_handler_test.cc` and REST API
    //! documentation examples.

    use super::reader::Document;
    use super::writer::{decimal_f32, decimal_f64, format_g, rapidjson_dtoa};
    use super::*;
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

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    fn parse_err(json: &str) -> String {
        Document::parse(json.as_bytes())
            .unwrap_err()
            .message()
            .to_owned()
    }

    // --- The reader.

    #[test]
    fn parse_errors_carry_rapidjsons_messages_and_offsets() {
        assert_eq!(parse_err(""), "JSON Parse error: The document is empty");
        let cases = [
            ("   ", "The document is empty. at offset: 3"),
            ("]", "The document is empty. at offset: 0"),
            ("instances = [1, 2]", "Invalid value. at offset: 0"),
            (
                "{\"a\" 1}",
                "Missing a colon after a name of object member. at offset: 5",
            ),
            (
                "[1 2]",
                "Missing a comma or ']' after an array element. at offset: 3",
            ),
            (
                "{\"a\":1 \"b\":2}",
                "Missing a comma or '}' after an object member. at offset: 7",
            ),
            ("{1:2}", "Missing a name for object member. at offset: 1"),
            (
                "{\"a\":1,}",
                "Missing a name for object member. at offset: 7",
            ),
            ("[1,]", "Invalid value. at offset: 3"),
            ("[", "Invalid value. at offset: 1"),
            ("{", "Missing a name for object member. at offset: 1"),
            (
                "{\"a\"",
                "Missing a colon after a name of object member. at offset: 4",
            ),
            ("{\"a\":", "Invalid value. at offset: 5"),
            (
                "{\"a\":1",
                "Missing a comma or '}' after an object member. at offset: 6",
            ),
            (
                "[1",
                "Missing a comma or ']' after an array element. at offset: 2",
            ),
            (
                "\"abc",
                "Missing a closing quotation mark in string. at offset: 4",
            ),
            (
                "\"a\\x\"",
                "Invalid escape character in string. at offset: 2",
            ),
            (
                "\"\\u12G4\"",
                "Incorrect hex digit after \\u escape in string. at offset: 1",
            ),
            (
                "\"\\uD800\"",
                "The surrogate pair in string is invalid. at offset: 1",
            ),
            (
                "\"\\uD800\\u0041\"",
                "The surrogate pair in string is invalid. at offset: 1",
            ),
            ("[\"a\u{1}\"]", "Invalid encoding in string. at offset: 3"),
            ("[1.]", "Miss fraction part in number. at offset: 3"),
            ("[1e]", "Miss exponent in number. at offset: 3"),
            ("[-]", "Invalid value. at offset: 2"),
            (
                "[1e400]",
                "Number too big to be stored in double. at offset: 1",
            ),
            ("[nul]", "Invalid value. at offset: 4"),
            ("[Infinit]", "Invalid value. at offset: 8"),
            ("[Nan]", "Invalid value. at offset: 3"),
            ("[1,\0 2]", "Invalid value. at offset: 3"),
        ];
        for (json, want) in cases {
            assert_eq!(
                parse_err(json),
                format!("JSON Parse error: {want}"),
                "{json:?}"
            );
        }
    }

    #[test]
    fn reader_tells_numbers_apart_as_rapidjson_does() {
        let doc = Document::parse(
            b"[1, 1.0, -0, 2147483648, 9223372036854775808, 18446744073709551616, \
              -9223372036854775808, -9223372036854775809, NaN, -Infinity, Inf, 1e2, 0.1]",
        )
        .unwrap();
        let v: Vec<_> = doc.root().items().collect();
        assert_eq!((v[0].as_i32(), v[0].as_double()), (Some(1), None));
        assert_eq!((v[1].as_i32(), v[1].as_double()), (None, Some(1.0)));
        assert_eq!(v[2].as_i64(), Some(0));
        assert_eq!(
            (v[3].as_i32(), v[3].as_u32(), v[3].as_i64()),
            (None, Some(1 << 31), Some(1 << 31))
        );
        assert_eq!((v[4].as_i64(), v[4].as_u64()), (None, Some(1 << 63)));
        assert_eq!(
            (v[5].as_u64(), v[5].as_double()),
            (None, Some(18446744073709551616.0))
        );
        assert_eq!(v[6].as_i64(), Some(i64::MIN));
        assert_eq!(
            (v[7].as_i64(), v[7].as_double()),
            (None, Some(-9223372036854775809.0))
        );
        assert!(v[8].as_double().unwrap().is_nan());
        assert_eq!(v[9].as_double(), Some(f64::NEG_INFINITY));
        assert_eq!(v[10].as_double(), Some(f64::INFINITY));
        assert_eq!(v[11].as_double(), Some(100.0));
        assert_eq!(v[12].as_double(), Some(0.1));
        assert!(v.iter().all(|x| x.json_type() == JsonType::Number));
    }

    #[test]
    fn reader_strings_escapes_bom_and_trailing_input() {
        let doc = Document::parse(
            "\u{FEFF}{\"s\": \"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\", \"s\": 2} trailing"
                .as_bytes(),
        )
        .unwrap();
        let root = doc.root();
        assert_eq!(root.len(), 2, "duplicate keys are kept");
        assert_eq!(
            root.find("s").unwrap().as_bytes().unwrap(),
            "a\"\\/\u{8}\u{c}\n\r\té😀".as_bytes()
        );
        // Invalid UTF-8 passes through, as rapidjson does not validate.
        let doc = Document::parse(b"[\"\xff\xfe\"]").unwrap();
        assert_eq!(doc.root().item(0).unwrap().as_bytes().unwrap(), b"\xff\xfe");
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

    // --- The writer.

    #[test]
    fn floats_are_written_as_tensorflow_serving_writes_them() {
        // json_tensor_test.cc's FromJsonSingleFloatTensorSixDigitPrecision.
        let cases: [(f32, &str); 14] = [
            (9000000.0, "9e+06"),
            (999999.0, "999999.0"),
            (0.5, "0.5"),
            (0.0003, "0.0003"),
            (0.00003, "3e-05"),
            (555557.5, "555557.5"),
            (0.1, "0.1"),
            (2.0, "2.0"),
            (-0.0, "-0.0"),
            (1435774380.0, "1.43577434e+09"),
            (0.447_510_15, "0.447510153"),
            (f32::MAX, "3.40282347e+38"),
            (1e-7, "1e-07"),
            (100000.0, "100000.0"),
        ];
        for (v, want) in cases {
            assert_eq!(decimal_f32(v), want, "{v:e}");
        }
        assert_eq!(decimal_f32(f32::NAN), "NaN");
        assert_eq!(decimal_f32(f32::INFINITY), "Infinity");
        assert_eq!(decimal_f32(f32::NEG_INFINITY), "-Infinity");
        assert_eq!(decimal_f64(0.1), "0.1");
        assert_eq!(decimal_f64(6.625), "6.625");
        assert_eq!(decimal_f64(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(decimal_f64(0.123456789), "0.123456789");
        assert_eq!(decimal_f64(1e100), "1e+100");
        assert_eq!(format_g(123456789.0, 9), "123456789");
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(999999.5, 6), "1e+06");
    }

    #[test]
    fn debug_doubles_are_written_as_rapidjson_writes_them() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.5, "-2.5"),
            (1e30, "1e30"),
            (1.5e-7, "1.5e-7"),
            (0.001, "0.001"),
            (123.456, "123.456"),
            (1e20, "100000000000000000000.0"),
            (1e21, "1e21"),
            (0.0, "0.0"),
        ];
        for (v, want) in cases {
            assert_eq!(rapidjson_dtoa(v).as_deref(), Some(want), "{v:e}");
        }
        assert_eq!(rapidjson_dtoa(f64::NAN), None);
    }

    #[test]
    fn error_bodies() {
        // json_tensor_test.cc's MakeJsonFromTensors.StatusError.
        assert_eq!(
            text(error_body("Bad key: \"key\"")),
            "{\n    \"error\": \"Bad key: \\\"key\\\"\"\n}"
        );
        assert_eq!(
            text(error_body("tab\there \u{1}")),
            "{\n    \"error\": \"tab\\there \\u0001\"\n}"
        );
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
        let req =
            PredictJson::parse(br#"{"signature_name": "predict_images", "instances": [[1,2]]}X"#)
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

    // --- Predict responses.

    fn outputs(list: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
        list.into_iter().map(|(k, t)| (k.to_owned(), t)).collect()
    }

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

    // --- Classify and regress.

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

    // --- Status and metadata.

    #[test]
    fn status_json_matches_tensorflow_servings_printer() {
        let response = pb::GetModelStatusResponse {
            model_version_status: vec![
                pb::ModelVersionStatus {
                    version: 123,
                    state: 30,
                    status: Some(pb::StatusProto::default()),
                },
                pb::ModelVersionStatus {
                    version: 124,
                    state: 50,
                    status: Some(pb::StatusProto {
                        error_code: 5,
                        error_message: "not <found>\n".to_owned(),
                    }),
                },
            ],
        };
        assert_eq!(
            text(status_json(&response).unwrap()),
            r#"{
 "model_version_status": [
  {
   "version": "123",
   "state": "AVAILABLE",
   "status": {
    "error_code": "OK",
    "error_message": ""
   }
  },
  {
   "version": "124",
   "state": "END",
   "status": {
    "error_code": "NOT_FOUND",
    "error_message": "not \u003cfound\u003e\n"
   }
  }
 ]
}
"#
        );
        assert_eq!(
            text(status_json(&pb::GetModelStatusResponse::default()).unwrap()),
            "{\n \"model_version_status\": []\n}\n"
        );
    }

    #[test]
    fn metadata_json_is_joined_as_tensorflow_serving_joins_it() {
        use graph::proto::tf::{
            tensor_info, tensor_shape_proto, SignatureDef, TensorInfo, TensorShapeProto,
        };
        use prost::{Message, Name};
        let dim = |size| tensor_shape_proto::Dim {
            size,
            name: String::new(),
        };
        let sig = SignatureDef {
            inputs: [(
                "x".to_owned(),
                TensorInfo {
                    encoding: Some(tensor_info::Encoding::Name("x:0".to_owned())),
                    dtype: DType::F32.tf_enum(),
                    tensor_shape: Some(TensorShapeProto {
                        dim: vec![dim(-1), dim(3)],
                        unknown_rank: false,
                    }),
                },
            )]
            .into_iter()
            .collect(),
            method_name: "tensorflow/serving/predict".to_owned(),
            ..SignatureDef::default()
        };
        let map = pb::SignatureDefMap {
            signature_def: [("serving_default".to_owned(), sig)].into_iter().collect(),
        };
        let response = pb::GetModelMetadataResponse {
            model_spec: Some(pb::ModelSpec {
                name: "m".to_owned(),
                version_choice: Some(pb::model_spec::VersionChoice::Version(1)),
                signature_name: String::new(),
            }),
            metadata: [(
                "signature_def".to_owned(),
                prost_types::Any {
                    type_url: pb::SignatureDefMap::type_url(),
                    value: map.encode_to_vec(),
                },
            )]
            .into_iter()
            .collect(),
        };
        assert_eq!(
            text(metadata_json(&response).unwrap()),
            r#"{
"model_spec":{
 "name": "m",
 "version": "1",
 "signature_name": ""
}
,
"metadata": {"signature_def": {
 "signature_def": {
  "serving_default": {
   "inputs": {
    "x": {
     "name": "x:0",
     "dtype": "DT_FLOAT",
     "tensor_shape": {
      "dim": [
       {
        "size": "-1",
        "name": ""
       },
       {
        "size": "3",
        "name": ""
       }
      ],
      "unknown_rank": false
     }
    }
   },
   "outputs": {},
   "method_name": "tensorflow/serving/predict",
   "defaults": {}
  }
 }
}
}
}
"#
        );
        let e = metadata_json(&pb::GetModelMetadataResponse::default()).unwrap_err();
        assert_eq!(e.code(), graph::Code::Internal);
    }

    #[test]
    fn proto_json_prints_any_wrappers_bytes_and_floats() {
        use graph::proto::tf::{TensorProto, TensorShapeProto};
        let t = TensorProto {
            dtype: DType::F32.tf_enum(),
            tensor_shape: Some(TensorShapeProto::default()),
            float_val: vec![0.1, f32::NAN, 1e10],
            double_val: vec![0.1, -0.0],
            tensor_content: b"\x00\xff".to_vec().into(),
            int64_val: vec![-5],
            ..TensorProto::default()
        };
        let s = proto_json::to_json(&t, proto_json::Names::Proto).unwrap();
        assert!(
            s.contains("\n \"float_val\": [\n  0.1,\n  \"NaN\",\n  1e+10\n ],"),
            "{s}"
        );
        assert!(s.contains("\n \"double_val\": [\n  0.1,\n  -0\n ],"), "{s}");
        assert!(s.contains("\n \"tensor_content\": \"AP8=\","), "{s}");
        assert!(s.contains("\n \"int64_val\": [\n  \"-5\"\n ],"), "{s}");
        assert!(
            s.contains("\n \"tensor_shape\": {\n  \"dim\": [],\n  \"unknown_rank\": false\n },"),
            "{s}"
        );
        let s = proto_json::to_json(&t, proto_json::Names::Json).unwrap();
        assert!(s.contains("\"floatVal\""), "{s}");
        let any = prost_types::Any {
            type_url: "type.googleapis.com/tensorflow.serving.ModelSpec".to_owned(),
            value: prost::Message::encode_to_vec(&pb::ModelSpec {
                name: "m".to_owned(),
                version_choice: Some(pb::model_spec::VersionChoice::VersionLabel(
                    "stable".to_owned(),
                )),
                signature_name: "s".to_owned(),
            }),
        };
        let response = pb::GetModelMetadataResponse {
            model_spec: None,
            metadata: [("x".to_owned(), any)].into_iter().collect(),
        };
        assert_eq!(
            proto_json::to_json(&response, proto_json::Names::Proto).unwrap(),
            "{\n \"metadata\": {\n  \"x\": {\n   \"@type\": \"type.googleapis.com/tensorflow.serving.ModelSpec\",\n   \"name\": \"m\",\n   \"signature_name\": \"s\",\n   \"version_label\": \"stable\"\n  }\n }\n}\n"
        );
    }
}
