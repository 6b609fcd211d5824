//! Predict request bodies into tensors (TensorFlow Serving's
//! `FillPredictRequestFromJson`): [`PredictJson::parse`] reads the body, then
//! [`PredictJson::inputs`] converts its tensors with the signature's input
//! specs, from the row format (`"instances"`: one value, list or object per
//! instance, stacked along a new 0th dimension) or the columnar format
//! (`"inputs"`: one tensor, or an object of named tensors); `{"b64": "…"}` for
//! binary strings.
//!
//! Each tensor's values are filled in TensorFlow's element types and converted
//! to a tensor once (TensorFlow Serving fills a `TensorProto`).

use std::collections::{BTreeMap, BTreeSet};

use actors::saved_model::TensorSpec;
use bytes::Bytes;
use graph::{bf16, f16, DType, Result, Status, Tensor};

use super::reader::{Document, Value};
use super::{
    debug_string, decode_base64_object, format_error, is_base64_object, parse_object,
    signature_name, INPUTS_KEY, INSTANCES_KEY,
};

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

/// True for an object that names tensors (an object that is not base64 data).
fn is_named_object(value: Value<'_>) -> bool {
    value.is_object() && !is_base64_object(value)
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

#[cfg(test)]
mod tests;
