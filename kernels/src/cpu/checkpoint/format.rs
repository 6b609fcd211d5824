//! Reading and writing the checkpoint file format (specified in the parent
//! module's docs): [`write_checkpoint`] streams tensors to any writer,
//! [`CheckpointReader`] loads and verifies a whole file, [`read_index`] lists a
//! file's tensors (name, dtype, shape) without loading or verifying their data,
//! and [`reseal`] recomputes the checksums of damaged bytes (for fuzzing).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use graph::{DType, Result, Status, Tensor, TensorShape};

use crate::cpu::checkpoint::crc32c;

/// The first 8 bytes of every checkpoint file.
pub const MAGIC: [u8; 8] = *b"AFLWCKPT";
/// The last 8 bytes of every checkpoint file.
pub const END_MAGIC: [u8; 8] = *b"AFLWEND\n";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Bytes in the header (magic, version, flags, record count).
pub const HEADER_LEN: usize = 24;
/// Bytes in the footer (payload length, file CRC, end magic).
pub const FOOTER_LEN: usize = 20;
/// The longest tensor name, in bytes.
pub const MAX_NAME_LEN: usize = 65_535;
/// The highest rank.
pub const MAX_RANK: usize = 254;
/// The most metadata bytes a record can have (name length, name, dtype, rank,
/// dimensions).
const MAX_META_LEN: usize = 4 + MAX_NAME_LEN + 4 + 4 + 8 * MAX_RANK;

/// Writes through to `out`, keeping the CRC-32C of the whole payload and of the
/// current record.
struct Sink<'a> {
    out: &'a mut dyn Write,
    file_crc: u32,
    record_crc: u32,
    written: u64,
}

impl Sink<'_> {
    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b)?;
        self.file_crc = crc32c::extend(self.file_crc, b);
        self.record_crc = crc32c::extend(self.record_crc, b);
        self.written += b.len() as u64;
        Ok(())
    }
}

/// The bytes of a tensor's data section.
fn data_len(t: &Tensor) -> Result<u64> {
    if t.dtype() == DType::String {
        Ok(t.as_strings()?
            .iter()
            .map(|s| 8 + s.len() as u64)
            .sum::<u64>())
    } else {
        Ok(t.as_bytes()?.len() as u64)
    }
}

/// Checks that `tensors` can be written: unique, non-empty names and POD or
/// string dtypes. `InvalidArgument` otherwise.
pub fn validate(tensors: &[(&str, &Tensor)]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (name, t) in tensors {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Status::invalid_argument(format!(
                "a saved tensor needs a name of 1 to {MAX_NAME_LEN} bytes, got {}",
                name.len()
            )));
        }
        if t.rank() > MAX_RANK {
            return Err(Status::invalid_argument(format!(
                "tensor '{name}' has rank {}; a checkpoint holds ranks up to {MAX_RANK}",
                t.rank()
            )));
        }
        if !seen.insert(*name) {
            return Err(Status::invalid_argument(format!(
                "tensor name '{name}' is saved twice"
            )));
        }
        if !(t.dtype().is_pod() || t.dtype() == DType::String) {
            return Err(Status::invalid_argument(format!(
                "tensor '{name}' has dtype {}, which a checkpoint cannot hold",
                t.dtype()
            )));
        }
    }
    Ok(())
}

/// Writes a whole checkpoint holding `tensors` (records sorted by name) to `out`.
/// Validates first ([`validate`]), so an invalid request writes nothing; I/O
/// errors may leave a partial file, which is why callers write to a temporary
/// file and rename it ([`write_atomically`](super::atomic::write_atomically)).
pub fn write_checkpoint(out: &mut dyn Write, tensors: &[(&str, &Tensor)]) -> Result<()> {
    validate(tensors)?;
    let mut sorted: Vec<&(&str, &Tensor)> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut sink = Sink {
        out,
        file_crc: 0,
        record_crc: 0,
        written: 0,
    };
    sink.put(&MAGIC)?;
    sink.put(&VERSION.to_le_bytes())?;
    sink.put(&0u32.to_le_bytes())?;
    sink.put(&(sorted.len() as u64).to_le_bytes())?;
    for (name, t) in sorted {
        let dims = t.dims();
        let body_len = 4 + name.len() as u64 + 4 + 4 + 8 * dims.len() as u64 + data_len(t)?;
        sink.record_crc = 0;
        sink.put(&body_len.to_le_bytes())?;
        sink.put(&(name.len() as u32).to_le_bytes())?;
        sink.put(name.as_bytes())?;
        sink.put(&(t.dtype().tf_enum() as u32).to_le_bytes())?;
        sink.put(&(dims.len() as u32).to_le_bytes())?;
        for &d in dims {
            sink.put(&(d as u64).to_le_bytes())?;
        }
        if t.dtype() == DType::String {
            for s in t.as_strings()? {
                sink.put(&(s.len() as u64).to_le_bytes())?;
                sink.put(s)?;
            }
        } else {
            sink.put(t.as_bytes()?)?;
        }
        let crc = sink.record_crc;
        sink.put(&crc.to_le_bytes())?;
    }
    let (payload_len, file_crc) = (sink.written, sink.file_crc);
    sink.put(&payload_len.to_le_bytes())?;
    sink.put(&file_crc.to_le_bytes())?;
    sink.put(&END_MAGIC)?;
    Ok(())
}

/// One tensor of a checkpoint, as its record describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The name it was saved under.
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: TensorShape,
}

/// A loaded and verified checkpoint file.
pub struct CheckpointReader {
    path: PathBuf,
    data: Bytes,
    entries: Vec<(TensorInfo, Range<usize>)>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for CheckpointReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CheckpointReader({}, {} tensors)",
            self.path.display(),
            self.entries.len()
        )
    }
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> Status {
    Status::data_loss(format!(
        "checkpoint file {} is truncated or corrupt: {why}",
        path.display()
    ))
}

/// A bounds-checked little-endian cursor over a byte slice.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    }
}

/// Parses the header: the format version and the record count.
fn parse_header(path: &Path, header: &[u8]) -> Result<(u32, u64)> {
    let mut c = Cursor {
        buf: header,
        pos: 0,
    };
    let short = || corrupt(path, "shorter than a header");
    let magic = c.take(8).ok_or_else(short)?;
    if magic != MAGIC {
        return Err(Status::data_loss(format!(
            "{} is not an actorflow checkpoint (bad magic)",
            path.display()
        )));
    }
    let version = c.u32().ok_or_else(short)?;
    let _flags = c.u32().ok_or_else(short)?;
    Ok((version, c.u64().ok_or_else(short)?))
}

fn unsupported(path: &Path, version: u32) -> Status {
    Status::unimplemented(format!(
        "checkpoint {} has format version {version}; this build reads version {VERSION}",
        path.display()
    ))
}

/// Parses a record's metadata from `c` (positioned after the length field):
/// the tensor's info, leaving `c` at the start of its data.
fn parse_meta(path: &Path, c: &mut Cursor<'_>) -> Result<TensorInfo> {
    let short = || corrupt(path, "record shorter than its metadata");
    let name_len = c.u32().ok_or_else(short)? as usize;
    let name = c.take(name_len).ok_or_else(short)?;
    let name = std::str::from_utf8(name)
        .map_err(|_| corrupt(path, "a tensor name is not UTF-8"))?
        .to_owned();
    let dt = c.u32().ok_or_else(short)?;
    let dtype = i32::try_from(dt)
        .ok()
        .and_then(|v| DType::from_tf_enum(v).ok())
        .filter(|d| !d.is_ref)
        .map(|d| d.dtype)
        .filter(|d| d.is_pod() || *d == DType::String)
        .ok_or_else(|| corrupt(path, format!("tensor '{name}' has unknown dtype code {dt}")))?;
    let rank = c.u32().ok_or_else(short)? as usize;
    if rank > MAX_RANK {
        return Err(corrupt(path, format!("tensor '{name}' has rank {rank}")));
    }
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        let d = c.u64().ok_or_else(short)?;
        dims.push(usize::try_from(d).map_err(|_| corrupt(path, "a dimension overflows"))?);
    }
    let shape = TensorShape::new(&dims);
    shape
        .checked_num_elements()
        .map_err(|_| corrupt(path, format!("tensor '{name}' has too many elements")))?;
    Ok(TensorInfo { name, dtype, shape })
}

impl CheckpointReader {
    /// Reads and verifies the checkpoint at `path`: `NotFound` when it does not
    /// exist, `DataLoss` naming the file when it is truncated or any checksum
    /// fails.
    pub fn open(path: impl AsRef<Path>) -> Result<CheckpointReader> {
        let path = path.as_ref();
        let data = std::fs::read(path).map_err(|e| {
            Status::from(e).context(format!("reading checkpoint {}", path.display()))
        })?;
        CheckpointReader::parse(path, Bytes::from(data))
    }

    /// Verifies and indexes checkpoint bytes (`path` names them in errors).
    pub fn parse(path: &Path, data: Bytes) -> Result<CheckpointReader> {
        let len = data.len();
        if len < HEADER_LEN + FOOTER_LEN {
            if data.get(..8).is_some_and(|m| m != MAGIC) {
                return Err(Status::data_loss(format!(
                    "{} is not an actorflow checkpoint (bad magic)",
                    path.display()
                )));
            }
            return Err(corrupt(path, format!("only {len} bytes")));
        }
        let (version, count) = parse_header(path, &data[..HEADER_LEN])?;
        let payload_len = len - FOOTER_LEN;
        let mut f = Cursor {
            buf: &data[payload_len..],
            pos: 0,
        };
        let (recorded_len, recorded_crc, end) = match (f.u64(), f.u32(), f.take(8)) {
            (Some(l), Some(c), Some(e)) => (l, c, e),
            _ => return Err(corrupt(path, "no footer")),
        };
        if end != END_MAGIC {
            return Err(corrupt(path, "no end marker (the file was cut short?)"));
        }
        if recorded_len != payload_len as u64 {
            return Err(corrupt(
                path,
                format!("the footer records {recorded_len} bytes of tensors, the file has {payload_len}"),
            ));
        }
        let payload = &data[..payload_len];
        if version != VERSION {
            // A damaged version field is data loss, an intact one a newer format.
            if crc32c::crc32c(payload) != recorded_crc {
                return Err(corrupt(path, "file checksum mismatch"));
            }
            return Err(unsupported(path, version));
        }
        let mut c = Cursor {
            buf: payload,
            pos: HEADER_LEN,
        };
        let mut entries = Vec::new();
        let mut by_name = HashMap::new();
        for i in 0..count {
            let start = c.pos;
            let body_len = c
                .u64()
                .ok_or_else(|| corrupt(path, format!("record {i} of {count} is missing")))?;
            let body = usize::try_from(body_len)
                .ok()
                .and_then(|n| c.take(n))
                .ok_or_else(|| corrupt(path, format!("record {i} runs past the end")))?;
            let crc_end = c.pos;
            let crc = c
                .u32()
                .ok_or_else(|| corrupt(path, format!("record {i} has no checksum")))?;
            let mut rc = Cursor { buf: body, pos: 0 };
            let info = parse_meta(path, &mut rc);
            if crc32c::crc32c(&payload[start..crc_end]) != crc {
                let what = match &info {
                    Ok(i) => format!("tensor '{}'", i.name),
                    Err(_) => format!("record {i}"),
                };
                return Err(corrupt(path, format!("checksum mismatch in {what}")));
            }
            let info = info?;
            let data_start = crc_end - body.len() + rc.pos;
            let range = data_start..crc_end;
            check_data(path, &info, &payload[range.clone()])?;
            if by_name.insert(info.name.clone(), entries.len()).is_some() {
                return Err(corrupt(
                    path,
                    format!("tensor '{}' appears twice", info.name),
                ));
            }
            entries.push((info, range));
        }
        if c.pos != payload_len {
            return Err(corrupt(
                path,
                format!("{} stray bytes after the last record", payload_len - c.pos),
            ));
        }
        if crc32c::crc32c(payload) != recorded_crc {
            return Err(corrupt(path, "file checksum mismatch"));
        }
        Ok(CheckpointReader {
            path: path.to_owned(),
            data,
            entries,
            by_name,
        })
    }

    /// The file this reader read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every tensor's info, sorted by name.
    pub fn tensors(&self) -> impl Iterator<Item = &TensorInfo> {
        self.entries.iter().map(|(i, _)| i)
    }

    /// The info of tensor `name`, if saved.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| &self.entries[i].0)
    }

    /// Tensor `name` (`NotFound` naming the file when it was not saved).
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let &i = self.by_name.get(name).ok_or_else(|| {
            Status::not_found(format!(
                "Key {name} not found in checkpoint {}",
                self.path.display()
            ))
        })?;
        let (info, range) = &self.entries[i];
        decode(info, self.data.slice(range.clone()))
    }
}

/// Checks that a record's data section has exactly the bytes its dtype and shape
/// need.
fn check_data(path: &Path, info: &TensorInfo, data: &[u8]) -> Result<()> {
    let n = info.shape.num_elements();
    let ok = if info.dtype == DType::String {
        let mut c = Cursor { buf: data, pos: 0 };
        (0..n).all(|_| {
            c.u64()
                .and_then(|l| usize::try_from(l).ok())
                .and_then(|l| c.take(l))
                .is_some()
        }) && c.pos == data.len()
    } else {
        n.checked_mul(info.dtype.size()) == Some(data.len())
    };
    if ok {
        Ok(())
    } else {
        Err(corrupt(
            path,
            format!(
                "tensor '{}' ({} {}) has {} data bytes",
                info.name,
                info.dtype,
                info.shape,
                data.len()
            ),
        ))
    }
}

/// A tensor from its (checked) data section.
fn decode(info: &TensorInfo, data: Bytes) -> Result<Tensor> {
    if info.dtype == DType::String {
        let mut c = Cursor { buf: &data, pos: 0 };
        let mut values = Vec::with_capacity(info.shape.num_elements());
        for _ in 0..info.shape.num_elements() {
            let l = c
                .u64()
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| Status::internal("checked string data ended early"))?;
            let start = c.pos;
            c.take(l)
                .ok_or_else(|| Status::internal("checked string data ended early"))?;
            values.push(data.slice(start..start + l));
        }
        Tensor::from_strings(info.shape.dims(), values)
    } else {
        Tensor::from_raw_bytes(info.dtype, info.shape.dims(), &data)
    }
}

/// Rewrites the checksums of (possibly damaged) checkpoint bytes in place: each
/// record's CRC, as far as the record lengths can be followed, and the footer's
/// payload length and file CRC; nothing else changes. For fuzzing and mutation
/// tests, so that the reader's structural checks see damage that a checksum would
/// otherwise catch first. Bytes too short for a header and footer are left alone.
pub fn reseal(bytes: &mut [u8]) {
    let Some(payload_len) = bytes.len().checked_sub(FOOTER_LEN) else {
        return;
    };
    if payload_len < HEADER_LEN {
        return;
    }
    let count = u64::from_le_bytes(bytes[16..24].try_into().unwrap_or([0; 8]));
    let mut pos = HEADER_LEN;
    for _ in 0..count {
        let Some(len) = bytes.get(pos..pos + 8) else {
            break;
        };
        let body = u64::from_le_bytes(len.try_into().unwrap_or([0; 8]));
        let crc_at = usize::try_from(body)
            .ok()
            .and_then(|b| b.checked_add(pos + 8))
            .filter(|&c| c + 4 <= payload_len);
        let Some(crc_at) = crc_at else {
            break;
        };
        let crc = crc32c::crc32c(&bytes[pos..crc_at]);
        bytes[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
        pos = crc_at + 4;
    }
    let file_crc = crc32c::crc32c(&bytes[..payload_len]);
    bytes[payload_len..payload_len + 8].copy_from_slice(&(payload_len as u64).to_le_bytes());
    bytes[payload_len + 8..payload_len + 12].copy_from_slice(&file_crc.to_le_bytes());
}

/// Lists the tensors of the checkpoint at `path` from their records' metadata,
/// seeking past the data: cheap for large files, but checksums are not verified
/// (a later [`CheckpointReader::open`] does that). Structural damage is
/// `DataLoss` naming the file.
pub fn read_index(path: impl AsRef<Path>) -> Result<Vec<TensorInfo>> {
    let path = path.as_ref();
    let io = |e: std::io::Error| {
        Status::from(e).context(format!("reading checkpoint {}", path.display()))
    };
    let file = File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    read_index_from(path, file, file_len)
}

/// [`read_index`] over `file_len` bytes read from `r` (positioned at their
/// start); `path` names them in errors.
pub fn read_index_from(path: &Path, r: impl Read + Seek, file_len: u64) -> Result<Vec<TensorInfo>> {
    let mut r = BufReader::new(r);
    let io = |e: std::io::Error| {
        Status::from(e).context(format!("reading checkpoint {}", path.display()))
    };
    let mut header = [0u8; HEADER_LEN];
    if file_len < (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(corrupt(path, format!("only {file_len} bytes")));
    }
    r.read_exact(&mut header).map_err(io)?;
    let (version, count) = parse_header(path, &header)?;
    if version != VERSION {
        // Only the file checksum tells a newer format from a damaged version
        // field: the full read decides (`Unimplemented` or `DataLoss`).
        r.seek(SeekFrom::Start(0)).map_err(io)?;
        let mut all = Vec::new();
        r.take(file_len).read_to_end(&mut all).map_err(io)?;
        return Err(CheckpointReader::parse(path, Bytes::from(all))
            .err()
            .unwrap_or_else(|| unsupported(path, version)));
    }
    let mut out = Vec::new();
    let mut pos = HEADER_LEN as u64;
    for i in 0..count {
        let mut len = [0u8; 8];
        r.read_exact(&mut len)
            .map_err(|_| corrupt(path, format!("record {i} of {count} is missing")))?;
        let body_len = u64::from_le_bytes(len);
        // A damaged length may be near u64::MAX: no unchecked sum.
        let end = body_len
            .checked_add(8 + 4)
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= file_len - FOOTER_LEN as u64)
            .ok_or_else(|| corrupt(path, format!("record {i} runs past the end")))?;
        let meta_len = body_len.min(MAX_META_LEN as u64) as usize;
        let mut meta = vec![0u8; meta_len];
        r.read_exact(&mut meta).map_err(io)?;
        let mut c = Cursor { buf: &meta, pos: 0 };
        out.push(parse_meta(path, &mut c)?);
        let skip = (end - pos - 8) as i64 - meta_len as i64;
        r.seek_relative(skip).map_err(io)?;
        pos = end;
    }
    if pos != file_len - FOOTER_LEN as u64 {
        return Err(corrupt(path, "stray bytes after the last record"));
    }
    let mut footer = [0u8; FOOTER_LEN];
    r.read_exact(&mut footer).map_err(io)?;
    if footer[12..] != END_MAGIC
        || u64::from_le_bytes(footer[..8].try_into().unwrap_or([0; 8])) != pos
    {
        return Err(corrupt(path, "bad footer"));
    }
    Ok(out)
}
