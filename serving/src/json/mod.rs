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
//!
//! # Layout
//!
//! - `predict_request`: predict request bodies into tensors ([`PredictJson`],
//!   [`Format`]);
//! - `predict_response`: tensors into predict response bodies
//!   ([`predict_response`]);
//! - `classify_regress`: classify and regress requests of `tf.Example`s
//!   ([`ExampleJson`]) and their responses;
//! - [`reader`]: the rapidjson-compatible reader;
//! - [`writer`]: rapidjson's `PrettyWriter` and its number formats;
//! - [`proto_json`]: the proto3 JSON mapping of the status and metadata
//!   responses;
//! - `tests`: the tests of this file's bodies and the helpers the other
//!   modules' tests share (each module's own tests sit beside it).
//!
//! This file holds the keys of the encodings, the error, status and metadata
//! bodies, and the request helpers the parsers share.

mod classify_regress;
mod predict_request;
mod predict_response;
pub mod proto_json;
pub mod reader;
pub mod writer;

#[cfg(test)]
mod tests;

use graph::{Result, Status};
use proto::tensorflow::serving as pb;

use self::reader::{Document, Value};
use self::writer::PrettyWriter;

pub use self::classify_regress::{classify_response, regress_response, ExampleJson};
pub use self::predict_request::{Format, PredictJson};
pub use self::predict_response::predict_response;

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

/// The body of an error response: `{"error": message}`.
pub fn error_body(message: &str) -> Vec<u8> {
    let mut w = PrettyWriter::new();
    w.start_object();
    w.key(ERROR_KEY.as_bytes());
    w.string(message.as_bytes());
    w.end_object();
    w.into_bytes()
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

/// True for `{"b64": "<string>"}` (that one key only).
fn is_base64_object(value: Value<'_>) -> bool {
    value.is_object() && value.len() == 1 && value.find(BASE64_KEY).is_some_and(|v| v.is_string())
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
