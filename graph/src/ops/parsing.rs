//! Parsing ops (TensorFlow's `parsing_ops.cc` and `string_ops.cc`): `DecodeCSV`,
//! `DecodeRaw` and `StringToNumber`, which turn the string records of a reader into
//! numbers, and the `tf.Example` parsers ([`example`]: `ParseExample`,
//! `ParseExampleV2`, `ParseSingleExample`).
//!
//! Naming the line of a malformed CSV record: `DecodeCSV` sees only the records,
//! so its errors carry the record's index in the batch and its text. The pipeline
//! also has the reader's keys (`"<file>:<line>"`); [`decode_csv_with_key`] builds
//! `DecodeCSVWithKey`, an actorflow extension with the same attributes and kernel
//! as `DecodeCSV` plus a `keys` input of the records' shape, whose errors also name
//! the key of the offending record, so a malformed line fails with
//! `InvalidArgument` naming its file and line.
//!
//! ```
//! use actorflow_graph::builder::Scope;
//! use actorflow_graph::{ops, Tensor};
//! let s = Scope::new();
//! let line = ops::constant(&s, Tensor::string_scalar("1,2.5,x")).unwrap();
//! let key = ops::constant(&s, Tensor::string_scalar("data.csv:2")).unwrap();
//! let defaults = [
//!     ops::constant(&s, Tensor::vector::<i32>(&[])).unwrap(), // required
//!     ops::constant(&s, Tensor::vector(&[0.0f32])).unwrap(),
//!     ops::constant(&s, Tensor::from_strings(&[1], vec!["?"]).unwrap()).unwrap(),
//! ];
//! let cols = ops::decode_csv_with_key(&s, &key, &line, &defaults, &ops::DecodeCsvOptions::default()).unwrap();
//! assert_eq!(cols.len(), 3);
//! assert_eq!(cols[1].dtype(), actorflow_graph::DType::F32);
//! ```

pub mod example;

pub use example::{
    parse_example, parse_example_v2, parse_single_example, DenseFeature, ExampleSpec,
    ParsedFeatures, RaggedFeature, SparseFeature,
};

use crate::builder::{Output, Scope};
use crate::op_def::{InferenceContext, OpDef, OpDefBuilder};
use crate::{DType, OpRegistry, Result, Shape, Status};

/// Registers the parsing ops.
pub fn register_all_ops(r: &OpRegistry) {
    example::register_all_ops(r);
    r.register(csv_attrs(
        OpDef::build("DecodeCSV").input("records: string"),
    ));
    r.register(csv_attrs(
        OpDef::build("DecodeCSVWithKey")
            .input("keys: string")
            .input("records: string"),
    ));
    r.register(
        OpDef::build("DecodeRaw")
            .input("bytes: string")
            .output("output: out_type")
            .attr(
                "out_type: {half, float, double, int32, uint16, uint8, int16, int8, int64, complex64, \
                 complex128, bool, bfloat16}",
            )
            .attr("little_endian: bool = true")
            .shape_fn(decode_raw_shape),
    );
    r.register(
        OpDef::build("StringToNumber")
            .input("string_tensor: string")
            .output("output: out_type")
            .attr("out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT")
            .shape_fn(crate::op_def::shape_fn::unchanged),
    );
}

fn csv_attrs(b: OpDefBuilder) -> OpDefBuilder {
    b.input("record_defaults: OUT_TYPE")
        .output("output: OUT_TYPE")
        .attr("OUT_TYPE: list({float, double, int32, int64, string})")
        .attr("field_delim: string = ','")
        .attr("use_quote_delim: bool = true")
        .attr("na_value: string = ''")
        .attr("select_cols: list(int) = []")
        .shape_fn(decode_csv_shape)
}

fn decode_csv_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let keyed = c.node().op == "DecodeCSVWithKey";
    let records = usize::from(keyed);
    let rec = c.input(records);
    if keyed {
        rec.merge(&c.input(0)).map_err(|_| {
            Status::invalid_argument(format!(
                "keys of shape {} do not match records of shape {rec}",
                c.input(0)
            ))
        })?;
    }
    for i in records + 1..c.num_inputs() {
        let d = c.input(i);
        match d.rank() {
            Some(r) if r > 1 => {
                return Err(Status::invalid_argument(format!(
                    "Shape must be at most rank 1 but is rank {r} for record default {}",
                    i - records - 1
                )))
            }
            Some(1) if d.dim(0).is_some_and(|n| n > 1) => {
                return Err(Status::invalid_argument(
                    "Shape of a default must be a length-0 or length-1 vector, or a scalar.",
                ))
            }
            _ => {}
        }
    }
    for i in 0..c.num_outputs() {
        c.set_output(i, rec.clone())?;
    }
    Ok(())
}

fn decode_raw_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = match c.input(0).dims() {
        Some(d) => {
            let mut d = d.to_vec();
            d.push(None);
            Shape::from_dims(&d)
        }
        None => Shape::unknown(),
    };
    c.set_output(0, s)
}

/// The attributes of `DecodeCSV`, with TensorFlow's defaults.
#[derive(Clone, Debug)]
pub struct DecodeCsvOptions {
    /// The one-byte field delimiter (`","`).
    pub field_delim: String,
    /// Treat `"` as a quote: fields may be quoted, with `""` for a quote inside.
    pub use_quote_delim: bool,
    /// A field equal to this is missing (as an empty field is).
    pub na_value: String,
    /// The (strictly increasing) columns to decode; empty: all.
    pub select_cols: Vec<i64>,
}

impl Default for DecodeCsvOptions {
    fn default() -> DecodeCsvOptions {
        DecodeCsvOptions {
            field_delim: ",".to_owned(),
            use_quote_delim: true,
            na_value: String::new(),
            select_cols: vec![],
        }
    }
}

fn csv_op(s: &Scope, op: &str, o: &DecodeCsvOptions) -> crate::builder::OpBuilder {
    s.op(op)
        .attr("field_delim", o.field_delim.as_str())
        .attr("use_quote_delim", o.use_quote_delim)
        .attr("na_value", o.na_value.as_str())
        .attr("select_cols", o.select_cols.clone())
}

/// `DecodeCSV`: one output per column, each of the shape of `records` and of the
/// dtype of its default (float, double, int32, int64 or string). A default is a
/// 1-element tensor used for an empty or `na_value` field, or an empty tensor for a
/// required column. A malformed record is `InvalidArgument` naming its index in the
/// batch and its text.
pub fn decode_csv(
    s: &Scope,
    records: &Output,
    record_defaults: &[Output],
    o: &DecodeCsvOptions,
) -> Result<Vec<Output>> {
    Ok(csv_op(s, "DecodeCSV", o)
        .input(records)
        .input_list(record_defaults)
        .build()?
        .outputs())
}

/// `DecodeCSVWithKey`: [`decode_csv`] whose errors also name the key of the
/// offending record (`keys`, of the shape of `records`, as `ReaderReadV2` returns
/// them: `"<file>:<line>"`). See the module docs.
pub fn decode_csv_with_key(
    s: &Scope,
    keys: &Output,
    records: &Output,
    record_defaults: &[Output],
    o: &DecodeCsvOptions,
) -> Result<Vec<Output>> {
    Ok(csv_op(s, "DecodeCSVWithKey", o)
        .input(keys)
        .input(records)
        .input_list(record_defaults)
        .build()?
        .outputs())
}

/// `DecodeRaw`: reinterprets each string's bytes as a vector of `out_type`
/// (little- or big-endian); all strings must have one length. The output has the
/// input's shape plus one dimension.
pub fn decode_raw(
    s: &Scope,
    bytes: &Output,
    out_type: DType,
    little_endian: bool,
) -> Result<Output> {
    s.op("DecodeRaw")
        .input(bytes)
        .attr("out_type", out_type)
        .attr("little_endian", little_endian)
        .build1()
}

/// `StringToNumber`: parses each string as `out_type` (float, double, int32,
/// int64, uint32, uint64); `InvalidArgument` for a string that is not one.
pub fn string_to_number(s: &Scope, strings: &Output, out_type: DType) -> Result<Output> {
    s.op("StringToNumber")
        .input(strings)
        .attr("out_type", out_type)
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ops, Tensor};

    #[test]
    fn csv_shapes_follow_records_and_check_defaults() {
        let s = Scope::new();
        let recs = ops::placeholder(&s, DType::String, Shape::known(&[4])).unwrap();
        let d0 = ops::constant(&s, Tensor::vector(&[1i64])).unwrap();
        let d1 = ops::constant(&s, Tensor::string_scalar("x")).unwrap();
        let out = decode_csv(&s, &recs, &[d0.clone(), d1], &DecodeCsvOptions::default()).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].shape(), Shape::known(&[4]));
        assert_eq!(out[0].dtype(), DType::I64);
        assert_eq!(out[1].dtype(), DType::String);
        let two = ops::constant(&s, Tensor::vector(&[1i64, 2])).unwrap();
        let e = decode_csv(&s, &recs, &[two], &DecodeCsvOptions::default()).unwrap_err();
        assert!(e.message().contains("length-0 or length-1"), "{e}");
        let keys = ops::placeholder(&s, DType::String, Shape::known(&[3])).unwrap();
        assert!(
            decode_csv_with_key(&s, &keys, &recs, &[d0], &DecodeCsvOptions::default()).is_err()
        );
        let b = bool::default();
        let bad = ops::constant(&s, Tensor::scalar(b)).unwrap();
        assert!(decode_csv(&s, &recs, &[bad], &DecodeCsvOptions::default()).is_err());
    }

    #[test]
    fn raw_and_number_shapes() {
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::String, Shape::known(&[2, 3])).unwrap();
        let r = decode_raw(&s, &x, DType::I16, false).unwrap();
        assert_eq!(r.shape(), Shape::from_dims(&[Some(2), Some(3), None]));
        let n = string_to_number(&s, &x, DType::I32).unwrap();
        assert_eq!(n.shape(), Shape::known(&[2, 3]));
        assert!(string_to_number(&s, &x, DType::I8).is_err());
    }
}
