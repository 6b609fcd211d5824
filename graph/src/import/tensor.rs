//! Conversion between TensorFlow's [`TensorProto`] / [`TensorShapeProto`] and
//! actorflow's [`Tensor`], [`TensorShape`] and [`Shape`].
//!
//! Reading accepts both of TensorFlow's representations: `tensor_content` (raw
//! little-endian bytes; for strings TensorFlow's length-prefixed list) and the typed
//! repeated field of the dtype (`float_val`, `int_val` for the small integer types,
//! `half_val` holding the bits of `half`/`bfloat16` values, …), where fewer values
//! than elements repeat the last one (a single value fills the whole shape) and no
//! values at all mean zeros. Values in a field that does not belong to the dtype are
//! an error. Writing uses one typed value for tensors whose elements are all equal,
//! `tensor_content` for other POD tensors, and `string_val` /
//! `resource_handle_val` for strings and resources.
//!
//! Dtypes actorflow cannot hold (complex, quantized, variant, float8, int4 …) are
//! `Unimplemented`; `DT_INVALID`, reference types and unknown numbers are
//! `InvalidArgument`. A tensor whose elements would take more than a caller-given
//! number of bytes is refused before anything is allocated.

use bytes::Bytes;
use half::{bf16, f16};

use crate::proto::tensor::{Dim, ResourceHandleProto, TensorProto, TensorShapeProto};
use crate::proto::types::data_type_name;
use crate::tensor::ResourceHandle;
use crate::{DType, DataType, Result, Shape, Status, Tensor, TensorShape, TensorType};

/// The default limit on the bytes one decoded tensor may take (2 GiB, protobuf's own
/// message size limit).
pub const DEFAULT_MAX_TENSOR_BYTES: usize = 1 << 31;

/// The edge type for a TensorFlow `DataType` number (`_REF` numbers set `is_ref`).
pub fn data_type_from_proto(v: i32) -> Result<DataType> {
    match DType::from_tf_enum(v) {
        Ok(t) => Ok(t),
        Err(_) if v == 0 => Err(Status::invalid_argument("data type DT_INVALID")),
        Err(_) => {
            let name = data_type_name(v);
            if name.starts_with("DT_") {
                Err(Status::unimplemented(format!(
                    "data type {name} is not supported by actorflow"
                )))
            } else {
                Err(Status::invalid_argument(format!(
                    "unknown data type number {v}"
                )))
            }
        }
    }
}

/// The dtype for a TensorFlow `DataType` number that must not be a reference type
/// (tensors and `type` attributes).
pub fn dtype_from_proto(v: i32) -> Result<DType> {
    let t = data_type_from_proto(v)?;
    if t.is_ref {
        return Err(Status::invalid_argument(format!(
            "reference type {} is not allowed here",
            data_type_name(v)
        )));
    }
    Ok(t.dtype)
}

/// A partial shape: unknown rank, or dimensions with -1 for unknown.
pub fn shape_from_proto(p: &TensorShapeProto) -> Result<Shape> {
    if p.unknown_rank {
        if !p.dim.is_empty() {
            return Err(Status::invalid_argument(
                "a shape of unknown rank lists dimensions",
            ));
        }
        return Ok(Shape::unknown());
    }
    let mut dims = Vec::with_capacity(p.dim.len());
    for d in &p.dim {
        dims.push(match d.size {
            -1 => None,
            s => Some(dim_size(s)?),
        });
    }
    let shape = Shape::from_dims(&dims);
    shape.check_valid()?;
    Ok(shape)
}

fn dim_size(s: i64) -> Result<usize> {
    usize::try_from(s).map_err(|_| Status::invalid_argument(format!("invalid dimension size {s}")))
}

/// A fully known shape (a missing shape is a scalar, as in TensorFlow).
pub fn tensor_shape_from_proto(p: Option<&TensorShapeProto>) -> Result<TensorShape> {
    let Some(p) = p else {
        return Ok(TensorShape::scalar());
    };
    if p.unknown_rank {
        return Err(Status::invalid_argument(
            "a tensor's shape has unknown rank",
        ));
    }
    let dims = p
        .dim
        .iter()
        .map(|d| dim_size(d.size))
        .collect::<Result<Vec<_>>>()?;
    let shape = TensorShape::from(dims);
    shape.check_valid()?;
    Ok(shape)
}

fn dims_proto(dims: impl Iterator<Item = i64>) -> Vec<Dim> {
    dims.map(|size| Dim {
        size,
        name: String::new(),
    })
    .collect()
}

/// A partial shape as TensorFlow writes it.
pub fn shape_to_proto(s: &Shape) -> TensorShapeProto {
    match s.to_tf_dims() {
        None => TensorShapeProto {
            dim: vec![],
            unknown_rank: true,
        },
        Some(d) => TensorShapeProto {
            dim: dims_proto(d.into_iter()),
            unknown_rank: false,
        },
    }
}

/// A tensor shape as TensorFlow writes it.
pub fn tensor_shape_to_proto(s: &TensorShape) -> TensorShapeProto {
    TensorShapeProto {
        dim: dims_proto(s.dims().iter().map(|&d| d as i64)),
        unknown_rank: false,
    }
}

/// The tensor a `TensorProto` holds, refusing tensors of more than
/// [`DEFAULT_MAX_TENSOR_BYTES`]; see the module docs.
pub fn tensor_from_proto(p: &TensorProto) -> Result<Tensor> {
    tensor_from_proto_limited(p, DEFAULT_MAX_TENSOR_BYTES)
}

/// The typed field that holds values of `dtype`.
fn own_field(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float_val",
        DType::F64 => "double_val",
        DType::I32 | DType::I16 | DType::I8 | DType::U8 | DType::U16 => "int_val",
        DType::I64 => "int64_val",
        DType::U32 => "uint32_val",
        DType::U64 => "uint64_val",
        DType::Bool => "bool_val",
        DType::F16 | DType::BF16 => "half_val",
        DType::String => "string_val",
        DType::Resource => "resource_handle_val",
    }
}

fn check_fields(p: &TensorProto, dtype: DType) -> Result<usize> {
    let fields = [
        ("float_val", p.float_val.len()),
        ("double_val", p.double_val.len()),
        ("int_val", p.int_val.len()),
        ("string_val", p.string_val.len()),
        ("scomplex_val", p.scomplex_val.len()),
        ("int64_val", p.int64_val.len()),
        ("bool_val", p.bool_val.len()),
        ("dcomplex_val", p.dcomplex_val.len()),
        ("half_val", p.half_val.len()),
        ("resource_handle_val", p.resource_handle_val.len()),
        ("variant_val", p.variant_val.len()),
        ("uint32_val", p.uint32_val.len()),
        ("uint64_val", p.uint64_val.len()),
        ("float8_val", p.float8_val.len()),
    ];
    let own = own_field(dtype);
    let mut count = 0;
    for (name, len) in fields {
        if len == 0 {
            continue;
        }
        if name != own {
            return Err(Status::invalid_argument(format!(
                "a {dtype} TensorProto holds values in {name}"
            )));
        }
        if !p.tensor_content.is_empty() {
            return Err(Status::invalid_argument(format!(
                "a TensorProto holds both tensor_content and {name}"
            )));
        }
        count = len;
    }
    Ok(count)
}

/// Fills `n` elements from `vals`: none are zeros (`default`), fewer repeat the last.
fn splat<S: Copy, T: Clone>(
    vals: &[S],
    n: usize,
    default: T,
    conv: impl Fn(S) -> T,
) -> Result<Vec<T>> {
    if vals.len() > n && n > 0 {
        return Err(Status::invalid_argument(format!(
            "{} values for a tensor of {n} elements",
            vals.len()
        )));
    }
    let mut out: Vec<T> = Vec::with_capacity(n);
    out.extend(vals.iter().take(n).map(|&v| conv(v)));
    let fill = out.last().cloned().unwrap_or(default);
    out.resize(n, fill);
    Ok(out)
}

fn pod<S: Copy, T: TensorType>(
    dims: &[usize],
    vals: &[S],
    n: usize,
    conv: impl Fn(S) -> T,
) -> Result<Tensor> {
    Tensor::new(dims, splat(vals, n, T::default(), conv)?)
}

/// Like [`tensor_from_proto`], refusing tensors of more than `max_bytes`.
pub fn tensor_from_proto_limited(p: &TensorProto, max_bytes: usize) -> Result<Tensor> {
    let dtype = dtype_from_proto(p.dtype)?;
    let shape = tensor_shape_from_proto(p.tensor_shape.as_ref())?;
    let n = shape.checked_num_elements()?;
    let elem_bytes = match dtype {
        DType::String => std::mem::size_of::<Bytes>(),
        DType::Resource => std::mem::size_of::<ResourceHandle>(),
        d => d.size(),
    };
    if n.checked_mul(elem_bytes).is_none_or(|b| b > max_bytes) {
        return Err(Status::invalid_argument(format!(
            "a {dtype} tensor of shape {shape} would take more than the {max_bytes} bytes allowed"
        )));
    }
    let given = check_fields(p, dtype)?;
    let dims = shape.dims();
    if !p.tensor_content.is_empty() {
        return match dtype {
            DType::String => Tensor::from_strings(dims, decode_string_list(&p.tensor_content, n)?),
            DType::Resource => Err(Status::unimplemented(
                "resource tensors in tensor_content are not supported",
            )),
            d => Tensor::from_raw_bytes(d, dims, &p.tensor_content),
        };
    }
    if given > n && n > 0 {
        return Err(Status::invalid_argument(format!(
            "{given} values for a tensor of shape {shape} ({n} elements)"
        )));
    }
    match dtype {
        DType::F32 => pod(dims, &p.float_val, n, |v| v),
        DType::F64 => pod(dims, &p.double_val, n, |v| v),
        DType::I32 => pod(dims, &p.int_val, n, |v| v),
        DType::I16 => pod(dims, &p.int_val, n, |v| v as i16),
        DType::I8 => pod(dims, &p.int_val, n, |v| v as i8),
        DType::U8 => pod(dims, &p.int_val, n, |v| v as u8),
        DType::U16 => pod(dims, &p.int_val, n, |v| v as u16),
        DType::I64 => pod(dims, &p.int64_val, n, |v| v),
        DType::U32 => pod(dims, &p.uint32_val, n, |v| v),
        DType::U64 => pod(dims, &p.uint64_val, n, |v| v),
        DType::Bool => pod(dims, &p.bool_val, n, |v| v),
        DType::F16 => pod(dims, &p.half_val, n, |v| f16::from_bits(v as u16)),
        DType::BF16 => pod(dims, &p.half_val, n, |v| bf16::from_bits(v as u16)),
        DType::String => {
            let idx: Vec<usize> = (0..p.string_val.len()).collect();
            let strings = splat(&idx, n, Bytes::new(), |i| {
                p.string_val.get(i).cloned().unwrap_or_default()
            })?;
            Tensor::from_strings(dims, strings)
        }
        DType::Resource => {
            let idx: Vec<usize> = (0..p.resource_handle_val.len()).collect();
            let handles = splat(&idx, n, ResourceHandle::default(), |i| {
                p.resource_handle_val
                    .get(i)
                    .map(handle_from_proto)
                    .unwrap_or_default()
            })?;
            Tensor::from_resource_handles(dims, handles)
        }
    }
}

/// Decodes TensorFlow's string-list encoding: every length as a varint, then the
/// bytes of every string.
fn decode_string_list(content: &[u8], n: usize) -> Result<Vec<Bytes>> {
    let bad =
        || Status::invalid_argument(format!("malformed string tensor_content for {n} strings"));
    if n > content.len() {
        return Err(bad());
    }
    let mut buf = content;
    let mut lens = Vec::with_capacity(n);
    for _ in 0..n {
        let len = prost::encoding::decode_varint(&mut buf).map_err(|_| bad())?;
        lens.push(usize::try_from(len).map_err(|_| bad())?);
    }
    let mut out = Vec::with_capacity(n);
    for len in lens {
        let s = buf.get(..len).ok_or_else(bad)?;
        out.push(Bytes::copy_from_slice(s));
        buf = buf.get(len..).ok_or_else(bad)?;
    }
    if !buf.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

fn handle_from_proto(h: &ResourceHandleProto) -> ResourceHandle {
    ResourceHandle {
        device: h.device.clone(),
        container: h.container.clone(),
        name: h.name.clone(),
        type_name: h.maybe_type_name.clone(),
    }
}

fn handle_to_proto(h: &ResourceHandle) -> ResourceHandleProto {
    ResourceHandleProto {
        device: h.device.clone(),
        container: h.container.clone(),
        name: h.name.clone(),
        maybe_type_name: h.type_name.clone(),
        ..Default::default()
    }
}

fn first<T: TensorType>(t: &Tensor) -> Option<T> {
    t.as_slice::<T>().ok()?.first().copied()
}

/// Stores the first element of a POD tensor in its typed field.
fn push_first(p: &mut TensorProto, t: &Tensor) -> Option<()> {
    match t.dtype() {
        DType::F32 => p.float_val.push(first(t)?),
        DType::F64 => p.double_val.push(first(t)?),
        DType::I32 => p.int_val.push(first(t)?),
        DType::I16 => p.int_val.push(first::<i16>(t)?.into()),
        DType::I8 => p.int_val.push(first::<i8>(t)?.into()),
        DType::U8 => p.int_val.push(first::<u8>(t)?.into()),
        DType::U16 => p.int_val.push(first::<u16>(t)?.into()),
        DType::I64 => p.int64_val.push(first(t)?),
        DType::U32 => p.uint32_val.push(first(t)?),
        DType::U64 => p.uint64_val.push(first(t)?),
        DType::Bool => p.bool_val.push(first(t)?),
        DType::F16 => p.half_val.push(first::<f16>(t)?.to_bits().into()),
        DType::BF16 => p.half_val.push(first::<bf16>(t)?.to_bits().into()),
        DType::String | DType::Resource => return None,
    }
    Some(())
}

fn uniform<T: PartialEq>(items: impl Iterator<Item = T>) -> bool {
    let mut items = items;
    match items.next() {
        Some(f) => items.all(|x| x == f),
        None => true,
    }
}

/// The `TensorProto` TensorFlow reads back as `t`; see the module docs.
pub fn tensor_to_proto(t: &Tensor) -> TensorProto {
    let mut p = TensorProto {
        dtype: t.dtype().tf_enum(),
        tensor_shape: Some(tensor_shape_to_proto(t.shape())),
        ..Default::default()
    };
    let n = t.num_elements();
    match t.dtype() {
        DType::String => {
            let s = t.as_strings().unwrap_or_default();
            let take = if uniform(s.iter()) { 1 } else { s.len() };
            p.string_val = s.iter().take(take).cloned().collect();
        }
        DType::Resource => {
            let h = t.as_resource_handles().unwrap_or_default();
            let take = if uniform(h.iter()) { 1 } else { h.len() };
            p.resource_handle_val = h.iter().take(take).map(handle_to_proto).collect();
        }
        d => {
            let bytes = t.as_bytes().unwrap_or_default();
            let splat = n == 1 || (n > 1 && uniform(bytes.chunks_exact(d.size().max(1))));
            if n > 0 && !(splat && push_first(&mut p, t).is_some()) {
                // The tensor's own buffer, shared rather than copied.
                p.tensor_content = t.to_bytes().unwrap_or_default();
            }
        }
    }
    p
}

/// `t` as TensorFlow's `AsProtoTensorContent` writes it, for the wire: numbers in
/// `tensor_content` (the tensor's own buffer, shared, never scanned or
/// compressed), strings and resource handles as [`tensor_to_proto`] writes them.
/// What `RecvTensor` and `RunGraph` carry: a large tensor costs no pass over it.
pub fn tensor_to_content_proto(t: &Tensor) -> TensorProto {
    match t.dtype() {
        DType::String | DType::Resource => tensor_to_proto(t),
        _ => TensorProto {
            dtype: t.dtype().tf_enum(),
            tensor_shape: Some(tensor_shape_to_proto(t.shape())),
            tensor_content: t.to_bytes().unwrap_or_default(),
            ..Default::default()
        },
    }
}

#[cfg(test)]
#[path = "tensor_tests.rs"]
mod tests;
