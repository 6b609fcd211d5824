//! NumPy's `.npy` format: [`read_npy`]/[`from_npy_bytes`] and
//! [`write_npy`]/[`to_npy_bytes`], for feeding tensors to `actorflow run` and
//! writing what it fetches.
//!
//! A file is the magic `\x93NUMPY`, a version (1.0, 2.0 or 3.0), the header's
//! length (2 bytes little-endian in 1.0, 4 bytes after), a Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces
//! and a newline so the data starts on a 64-byte boundary, then the elements.
//!
//! | dtype | descr | | dtype | descr |
//! |---|---|---|---|---|
//! | `F16`/`F32`/`F64` | `<f2`/`<f4`/`<f8` | | `U8`…`U64` | `\|u1`, `<u2`, `<u4`, `<u8` |
//! | `I8`…`I64` | `\|i1`, `<i2`, `<i4`, `<i8` | | `Bool` | `\|b1` |
//! | `String` | `\|S<n>` (fixed width, written with the longest element's length) | | | |
//!
//! Reading also accepts big-endian (`>`) and native (`=`) byte orders, Fortran
//! order (reordered to row-major), and `<U<n>` unicode arrays (stored as UTF-8
//! strings). As NumPy does, reading a `|S<n>` array strips each element's trailing
//! NUL bytes. Writing produces exactly the bytes `numpy.save` writes (version 1.0,
//! or 2.0 when the header needs it). `BF16` and `Resource` tensors have no NumPy
//! dtype and are `Unimplemented`; so are NumPy dtypes actorflow lacks (complex,
//! object arrays, which need pickle, datetimes, records).
//!
//! Malformed input is an error, never a panic: a bad magic, version or header is
//! `InvalidArgument`; missing data bytes are `DataLoss`.
//!
//! ```
//! use actorflow::{npy, Tensor};
//! let t = Tensor::new(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
//! let bytes = npy::to_npy_bytes(&t).unwrap();
//! assert_eq!(&bytes[..6], b"\x93NUMPY");
//! assert_eq!(npy::from_npy_bytes(&bytes).unwrap(), t);
//! ```

use std::path::Path;

use graph::import::DEFAULT_MAX_TENSOR_BYTES;
use graph::tensor::storage_bytes;

use crate::{DType, Result, Status, Tensor, TensorShape};

/// The magic prefix of every `.npy` file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Headers are padded so the data starts at a multiple of this (NumPy's
/// `ARRAY_ALIGN`).
const ARRAY_ALIGN: usize = 64;

/// NumPy pads the header for this many digits of the growth axis so a file can be
/// extended in place (`GROWTH_AXIS_MAX_DIGITS`).
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

const NATIVE: char = if cfg!(target_endian = "little") {
    '<'
} else {
    '>'
};

fn bad(msg: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("not a valid .npy file: {msg}"))
}

/// The element kinds of a parsed `descr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A number or bool with this dtype.
    Pod(DType),
    /// Fixed-width bytes (`S<n>`).
    Bytes,
    /// Fixed-width UCS-4 (`U<n>`).
    Unicode,
}

/// A parsed `descr`: kind, item size in bytes, and whether bytes must be swapped.
#[derive(Clone, Copy, Debug)]
struct Descr {
    kind: Kind,
    itemsize: usize,
    swap: bool,
}

fn numpy_name(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F16 => "f2",
        DType::F32 => "f4",
        DType::F64 => "f8",
        DType::I8 => "i1",
        DType::I16 => "i2",
        DType::I32 => "i4",
        DType::I64 => "i8",
        DType::U8 => "u1",
        DType::U16 => "u2",
        DType::U32 => "u4",
        DType::U64 => "u8",
        DType::Bool => "b1",
        DType::String | DType::BF16 | DType::Resource => return None,
    })
}

fn parse_descr(d: &str) -> Result<Descr> {
    let mut chars = d.chars();
    let (order, rest) = match chars.next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, chars.as_str()),
        _ => ('|', d),
    };
    let kind_char = rest.chars().next().ok_or_else(|| bad("empty 'descr'"))?;
    let unsupported = |what: &str| {
        Status::unimplemented(format!(
            "the NumPy dtype '{d}' ({what}) has no actorflow dtype"
        ))
    };
    match kind_char {
        'c' => return Err(unsupported("complex")),
        'O' => return Err(unsupported(
            "Python objects, which need pickle; save strings as bytes, e.g. np.array(x, dtype='S')",
        )),
        'M' | 'm' => return Err(unsupported("datetime")),
        'V' => return Err(unsupported("raw or structured data")),
        _ => {}
    }
    let size: usize = rest[kind_char.len_utf8()..]
        .parse()
        .map_err(|_| bad(format!("cannot parse the dtype '{d}'")))?;
    let big = match order {
        '>' => true,
        '<' => false,
        _ => NATIVE == '>',
    };
    let swap = big != (NATIVE == '>');
    let pod = |dtype: DType| Descr {
        kind: Kind::Pod(dtype),
        itemsize: size,
        swap: swap && size > 1,
    };
    Ok(match (kind_char, size) {
        ('f', 2) => pod(DType::F16),
        ('f', 4) => pod(DType::F32),
        ('f', 8) => pod(DType::F64),
        ('i', 1) => pod(DType::I8),
        ('i', 2) => pod(DType::I16),
        ('i', 4) => pod(DType::I32),
        ('i', 8) => pod(DType::I64),
        ('u', 1) => pod(DType::U8),
        ('u', 2) => pod(DType::U16),
        ('u', 4) => pod(DType::U32),
        ('u', 8) => pod(DType::U64),
        ('b', 1) => pod(DType::Bool),
        ('S', n) => Descr {
            kind: Kind::Bytes,
            itemsize: n,
            swap: false,
        },
        ('U', n) => Descr {
            kind: Kind::Unicode,
            itemsize: n
                .checked_mul(4)
                .ok_or_else(|| bad("'U' item size overflows"))?,
            swap,
        },
        _ => return Err(bad(format!("unknown dtype '{d}'"))),
    })
}

/// A value of the header dict.
#[derive(Debug, PartialEq)]
enum PyValue {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A tiny parser for the Python literal dict NumPy writes.
struct HeaderParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl HeaderParser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        match self.peek() {
            Some(x) if x == c => {
                self.pos += 1;
                Ok(())
            }
            other => Err(bad(format!(
                "header: expected '{}' at byte {}, found {}",
                c as char,
                self.pos,
                other.map_or("the end".to_owned(), |x| format!("'{}'", x as char))
            ))),
        }
    }

    fn string(&mut self) -> Result<String> {
        let q = self.peek().ok_or_else(|| bad("header: unexpected end"))?;
        if q != b'\'' && q != b'"' {
            return Err(bad(format!(
                "header: expected a string at byte {}",
                self.pos
            )));
        }
        self.pos += 1;
        let start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos] != q {
            if self.s[self.pos] == b'\\' {
                return Err(bad("header: escapes in strings are not supported"));
            }
            self.pos += 1;
        }
        if self.pos >= self.s.len() {
            return Err(bad("header: unterminated string"));
        }
        let v = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
        self.pos += 1;
        Ok(v)
    }

    fn word(&mut self) -> &[u8] {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_alphanumeric() {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    fn value(&mut self) -> Result<PyValue> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(PyValue::Str(self.string()?)),
            Some(b'(') => {
                self.pos += 1;
                let mut dims = Vec::new();
                loop {
                    if self.peek() == Some(b')') {
                        self.pos += 1;
                        return Ok(PyValue::Tuple(dims));
                    }
                    let w = self.word();
                    let digits = w.strip_suffix(b"L").unwrap_or(w);
                    let dim = std::str::from_utf8(digits)
                        .ok()
                        .filter(|d| !d.is_empty())
                        .and_then(|d| d.parse::<usize>().ok())
                        .ok_or_else(|| bad("header: 'shape' must be a tuple of sizes"))?;
                    dims.push(dim);
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b')') => {}
                        _ => return Err(bad("header: unterminated 'shape' tuple")),
                    }
                }
            }
            _ => match self.word() {
                b"True" => Ok(PyValue::Bool(true)),
                b"False" => Ok(PyValue::Bool(false)),
                _ => Err(bad(format!(
                    "header: unexpected value at byte {}",
                    self.pos
                ))),
            },
        }
    }

    fn dict(&mut self) -> Result<Vec<(String, PyValue)>> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.pos += 1;
                break;
            }
            let k = self.string()?;
            self.expect(b':')?;
            let v = self.value()?;
            out.push((k, v));
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(bad("header: expected ',' or '}' in the dict")),
            }
        }
        if self.peek().is_some() {
            return Err(bad("header: text after the dict"));
        }
        Ok(out)
    }
}

/// The parsed header: dtype, Fortran order, shape.
fn parse_header(text: &[u8]) -> Result<(Descr, bool, Vec<usize>)> {
    let entries = HeaderParser { s: text, pos: 0 }.dict()?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in entries {
        match (k.as_str(), v) {
            ("descr", PyValue::Str(s)) => descr = Some(parse_descr(&s)?),
            ("descr", PyValue::Tuple(_)) => {
                return Err(Status::unimplemented(
                    "structured (record) NumPy arrays have no actorflow dtype",
                ))
            }
            ("fortran_order", PyValue::Bool(b)) => fortran = Some(b),
            ("shape", PyValue::Tuple(t)) => shape = Some(t),
            (k @ ("descr" | "fortran_order" | "shape"), v) => {
                return Err(bad(format!(
                    "header: '{k}' has the wrong kind of value {v:?}"
                )))
            }
            (k, _) => return Err(bad(format!("header: unexpected key '{k}'"))),
        }
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => Err(bad(
            "header: 'descr', 'fortran_order' and 'shape' are all required",
        )),
    }
}

/// Reorders `n` items of `itemsize` bytes from column-major to row-major.
fn fortran_to_c(data: &[u8], dims: &[usize], itemsize: usize) -> Vec<u8> {
    let n: usize = dims.iter().product();
    let mut fstride = vec![1usize; dims.len()];
    for k in 1..dims.len() {
        fstride[k] = fstride[k - 1] * dims[k - 1];
    }
    let mut out = Vec::with_capacity(data.len());
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let src: usize = idx.iter().zip(&fstride).map(|(i, s)| i * s).sum();
        out.extend_from_slice(&data[src * itemsize..(src + 1) * itemsize]);
        for k in (0..dims.len()).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

/// An array of zero-width strings (`|S0`, `<U0`): every element is empty and the
/// file holds no data for them, so their number is bounded by what one decoded
/// tensor may take ([`DEFAULT_MAX_TENSOR_BYTES`], as for a constant that one value
/// fills) instead of by the file's size.
fn zero_width_strings(dims: &[usize]) -> Result<Tensor> {
    let shape = TensorShape::from(dims.to_vec());
    match storage_bytes(DType::String, &shape) {
        Some(b) if b <= DEFAULT_MAX_TENSOR_BYTES => Tensor::try_zeros(DType::String, shape),
        _ => Err(bad(format!(
            "the shape {dims:?} of empty strings would take more than \
             {DEFAULT_MAX_TENSOR_BYTES} bytes"
        ))),
    }
}

/// Decodes a `.npy` file's bytes; see the module docs.
pub fn from_npy_bytes(bytes: &[u8]) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("it does not start with the magic \\x93NUMPY"));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            let b = bytes
                .get(8..12)
                .ok_or_else(|| Status::data_loss("truncated .npy file: no header length"))?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        _ => return Err(bad(format!("unsupported format version {major}.{minor}"))),
    };
    let header = bytes.get(start..start + hlen).ok_or_else(|| {
        Status::data_loss(format!(
            "truncated .npy file: the header should take {hlen} bytes, the file has {}",
            bytes.len() - start
        ))
    })?;
    if major < 3 && !header.is_ascii() {
        return Err(bad("the header is not ASCII"));
    }
    let (descr, fortran, dims) = parse_header(header)?;
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(format!("the shape {dims:?} has too many elements")))?;
    let data_len = n
        .checked_mul(descr.itemsize)
        .ok_or_else(|| bad(format!("the shape {dims:?} has too many bytes")))?;
    let data = &bytes[start + hlen..];
    if data.len() < data_len {
        return Err(Status::data_loss(format!(
            "truncated .npy file: {n} elements of {} bytes need {data_len} bytes of data, found {}",
            descr.itemsize,
            data.len()
        )));
    }
    if data.len() > data_len {
        return Err(bad(format!(
            "{} bytes follow the {data_len} bytes of array data",
            data.len() - data_len
        )));
    }
    if descr.itemsize == 0 && !matches!(descr.kind, Kind::Pod(_)) {
        return zero_width_strings(&dims);
    }
    let mut data = if fortran && dims.len() > 1 {
        fortran_to_c(data, &dims, descr.itemsize)
    } else {
        data.to_vec()
    };
    let unit = match descr.kind {
        Kind::Unicode => 4,
        _ => descr.itemsize,
    };
    if descr.swap && unit > 1 {
        data.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
    }
    match descr.kind {
        Kind::Pod(dtype) => Tensor::from_raw_bytes(dtype, &dims, &data),
        Kind::Bytes => {
            let items: Vec<Vec<u8>> = data
                .chunks_exact(descr.itemsize)
                .map(|c| {
                    let end = c.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                    c[..end].to_vec()
                })
                .collect();
            Tensor::from_strings(&dims, items)
        }
        Kind::Unicode => {
            let mut items = Vec::with_capacity(n);
            for (i, c) in data.chunks_exact(descr.itemsize).enumerate() {
                let mut s = String::new();
                for u in c.chunks_exact(4) {
                    let cp = u32::from_le_bytes([u[0], u[1], u[2], u[3]]);
                    s.push(char::from_u32(cp).ok_or_else(|| {
                        bad(format!("element {i} holds the invalid code point {cp:#x}"))
                    })?);
                }
                items.push(s.trim_end_matches('\0').as_bytes().to_vec());
            }
            Tensor::from_strings(&dims, items)
        }
    }
}

/// Reads a `.npy` file; errors name the file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| Status::from(e).context(format_args!("reading '{}'", path.display())))?;
    from_npy_bytes(&bytes).map_err(|e| e.context(format_args!("'{}'", path.display())))
}

/// The header dict exactly as `numpy.save` writes it, growth padding included.
fn header_text(descr: &str, dims: &[usize]) -> String {
    let shape = match dims {
        [] => "()".to_owned(),
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    if let Some(first) = dims.first() {
        let digits = first.to_string().len();
        h.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    h
}

/// Magic, version, header length and padded header, as NumPy's `_wrap_header`:
/// version 1.0 when the padded header's length fits two bytes, else 2.0.
fn wrap_header(header: &str) -> Vec<u8> {
    let hlen = header.len() + 1;
    let pad = |len_bytes: usize| ARRAY_ALIGN - (MAGIC.len() + 2 + len_bytes + hlen) % ARRAY_ALIGN;
    let mut out = Vec::with_capacity(hlen + 2 * ARRAY_ALIGN);
    out.extend_from_slice(MAGIC);
    let padding = if hlen + pad(2) <= u16::MAX as usize {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&((hlen + pad(2)) as u16).to_le_bytes());
        pad(2)
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&((hlen + pad(4)) as u32).to_le_bytes());
        pad(4)
    };
    out.extend_from_slice(header.as_bytes());
    out.extend(std::iter::repeat_n(b' ', padding));
    out.push(b'\n');
    out
}

/// Encodes a tensor as a `.npy` file's bytes; see the module docs.
pub fn to_npy_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let dims = t.dims();
    if t.dtype() == DType::String {
        let items = t.as_strings()?;
        let width = items.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let mut out = wrap_header(&header_text(&format!("|S{width}"), dims));
        for s in items {
            out.extend_from_slice(s);
            out.extend(std::iter::repeat_n(0u8, width - s.len()));
        }
        return Ok(out);
    }
    let name = numpy_name(t.dtype()).ok_or_else(|| {
        Status::unimplemented(format!(
            "{} tensors have no NumPy dtype; cast them (e.g. to float32) to save them",
            t.dtype()
        ))
    })?;
    let order = if t.dtype().size() == 1 { '|' } else { NATIVE };
    let mut out = wrap_header(&header_text(&format!("{order}{name}"), dims));
    out.extend_from_slice(t.as_bytes()?);
    Ok(out)
}

/// Writes a tensor to a `.npy` file; errors name the file.
pub fn write_npy(path: impl AsRef<Path>, t: &Tensor) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_npy_bytes(t).map_err(|e| e.context(format_args!("'{}'", path.display())))?;
    std::fs::write(path, bytes)
        .map_err(|e| Status::from(e).context(format_args!("writing '{}'", path.display())))
}

#[cfg(test)]
mod tests;
