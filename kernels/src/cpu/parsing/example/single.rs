//! One example (TensorFlow's `FastParseSingleExample`), for `ParseSingleExample`
//! and a scalar `ParseExampleV2`: dense outputs of the feature's own shape (a
//! variable-length one `[rows, inner…]`, unpadded), sparse outputs of rank 1, and
//! ragged values with empty row splits. Its messages name only the key.

use bytes::Bytes;
use graph::ops::parsing::example::tf_type_name;
use graph::{DType, Result, Status, Tensor};

use super::wire::{self, Kind};
use super::{kind_dtype, text, unparsable, Alloc, Config, List, Parsed, SlotsMut, Target};

/// The list name TensorFlow's single-example messages use for a dtype.
fn list_name(t: DType) -> &'static str {
    match t {
        DType::String => "bytes_list",
        DType::I64 => "int64_list",
        _ => "float_list",
    }
}

/// Parses one serialized example.
pub(crate) fn parse_single(cfg: &Config, serialized: &Bytes, alloc: Alloc<'_>) -> Result<Parsed> {
    let index = cfg.index();
    let mut dense: Vec<Option<Tensor>> = cfg
        .dense
        .iter()
        .map(|dc| {
            (!dc.variable_length)
                .then(|| alloc(dc.dtype, &dc.fixed_dims()))
                .transpose()
        })
        .collect::<Result<_>>()?;
    let mut dense_seen = vec![false; cfg.dense.len()];
    let mut sparse: Vec<Option<List>> = cfg.sparse.iter().map(|_| None).collect();
    let mut ragged: Vec<Option<List>> = cfg.ragged.iter().map(|_| None).collect();
    let mut entries = Vec::new();
    if !wire::parse_example(serialized, &mut entries) {
        return Err(unparsable(serialized));
    }
    for entry in entries.iter().rev() {
        let Some(&target) = index.get(entry.name) else {
            continue;
        };
        let key = text(entry.name);
        let example_error =
            |suffix: &str| Status::invalid_argument(format!("Key: {key}.  {suffix}"));
        let parse_error = |what: &str| {
            Status::invalid_argument(format!(
                "Key: {key}.  Can't parse serialized Example: {what}"
            ))
        };
        let (kind, list) = wire::feature_kind(entry.feature)
            .ok_or_else(|| Status::invalid_argument("Unsupported datatype."))?;
        let Some(example_dtype) = kind_dtype(kind) else {
            continue;
        };
        let (dtype, divisor) = match target {
            Target::Dense(d) => {
                if std::mem::replace(&mut dense_seen[d], true) {
                    continue;
                }
                let dc = &cfg.dense[d];
                if example_dtype != dc.dtype {
                    return Err(example_error(&format!(
                        "Data types don't match. Data type: {} but expected type: {}",
                        tf_type_name(example_dtype),
                        tf_type_name(dc.dtype)
                    )));
                }
                if let Some(t) = &mut dense[d] {
                    let name = list_name(dc.dtype);
                    let n = t.num_elements();
                    match SlotsMut::of(t)?.parse(0..n, list, serialized) {
                        None => return Err(parse_error(&format!("Parsing {name} failed."))),
                        Some((_, false)) => {
                            return Err(parse_error(&format!("Some {name} slice was not parsed.")))
                        }
                        Some((_, true)) => continue,
                    }
                }
                (dc.dtype, dc.stride)
            }
            Target::Sparse(d) | Target::Ragged(d) => {
                let (slot, dtype) = match target {
                    Target::Sparse(_) => (&sparse[d], cfg.sparse[d].dtype),
                    _ => (&ragged[d], cfg.ragged[d].dtype),
                };
                if slot.is_some() {
                    continue;
                }
                if example_dtype != dtype {
                    return Err(example_error(&format!(
                        "Data types don't match. Expected type: {}, Actual type: {}",
                        tf_type_name(dtype),
                        tf_type_name(example_dtype)
                    )));
                }
                (dtype, 1)
            }
        };
        let mut values = List::new(dtype);
        if !values.parse(list, serialized) {
            return Err(parse_error(match kind {
                Kind::Int64 => "Parsing int64_list failed.",
                Kind::Float => "Parsing float_list failed.",
                _ => "Could not get num elements in bytes_list.",
            }));
        }
        let n = values.len();
        // (A divisor of 0 takes no values; TensorFlow divides by it.)
        if !n.is_multiple_of(divisor) {
            return Err(Status::invalid_argument(format!(
                "Error while parsing feature with key {key}: number of elements should be divisible by {divisor}, found {n} instead"
            )));
        }
        match target {
            Target::Dense(d) => {
                let dc = &cfg.dense[d];
                let mut dims = vec![n.checked_div(divisor).unwrap_or(0)];
                dims.extend(dc.inner_dims());
                dense[d] = Some(values.into_tensor(&dims)?);
            }
            Target::Sparse(d) => sparse[d] = Some(values),
            Target::Ragged(d) => ragged[d] = Some(values),
        }
    }
    let mut out = Parsed::default();
    for (d, (dc, t)) in cfg.dense.iter().zip(dense).enumerate() {
        out.dense_values.push(match t {
            Some(t) if dense_seen[d] => t,
            _ if dc.variable_length => {
                let mut dims = vec![0];
                dims.extend(dc.inner_dims());
                alloc(dc.dtype, &dims)?
            }
            _ if dc.default.num_elements() == 0 => {
                return Err(Status::invalid_argument(format!(
                    "Feature: {} (data type: {}) is required but could not be found.",
                    text(&dc.key),
                    tf_type_name(dc.dtype)
                )))
            }
            _ => dc.default.clone(),
        });
    }
    for (c, values) in cfg.sparse.iter().zip(sparse) {
        let values = values.unwrap_or_else(|| List::new(c.dtype));
        let n = values.len();
        let indices: Vec<i64> = (0..n as i64).collect();
        out.sparse_indices.push(Tensor::new(&[n, 1], indices)?);
        out.sparse_values.push(values.into_tensor(&[n])?);
        out.sparse_shapes.push(Tensor::vector(&[n as i64]));
    }
    for (c, values) in cfg.ragged.iter().zip(ragged) {
        let values = values.unwrap_or_else(|| List::new(c.dtype));
        let n = values.len();
        out.ragged_values.push(values.into_tensor(&[n])?);
        out.ragged_splits.push(alloc(c.splits_dtype, &[0])?);
    }
    Ok(out)
}
