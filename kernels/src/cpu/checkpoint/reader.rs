//! [`CheckpointReader`]: a tensor bundle's index, read and checked when opened,
//! and its tensors read from the data shards on demand (TensorFlow's
//! `BundleReader`), whole or in part, whether the bundle holds a tensor whole
//! or as slices (see [`slice`](super::slice)).
//!
//! Opening checks the index's blocks, its header's version and byte order, and
//! every entry: dtype, shape, place, and for a tensor saved as slices that its
//! slices fit its shape, do not overlap, and are stored with its dtype and
//! their shapes. Reading a tensor checks its size and checksum. Damage is
//! `DataLoss` naming the file (and the tensor).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use graph::import::tensor::tensor_shape_from_proto;
use graph::ops::checkpoint::TensorSlice;
use graph::proto::tf::bundle_header_proto::Endianness;
use graph::proto::tf::{BundleEntryProto, BundleHeaderProto};
use graph::tensor::buffer::{AlignedBuffer, AllocError};
use graph::{DType, Result, Status, Tensor, TensorShape};
use prost::Message;

use super::bundle::{data_path, extend_length, index_path, TensorInfo, BUNDLE_VERSION};
use super::crc32c::{crc32c, extend, mask, unmask};
use super::slice::{
    check_stored_slices, copy_intersection, covering_slices, decode_tensor_name_slice,
    encode_tensor_name_slice, slice_from_proto,
};
use super::table::{get_varint, read_table};

/// The oldest bundle producer version this code reads (`kTensorBundleMinProducer`).
const MIN_PRODUCER: i32 = 0;

/// `DataLoss` for a damaged file.
pub(super) fn corrupt(path: &Path, why: impl std::fmt::Display) -> Status {
    Status::data_loss(format!(
        "checkpoint {} is truncated or corrupt: {why}",
        path.display()
    ))
}

/// A key as text for messages: a name as it is, a slice key as
/// `name[slice]`, anything else lossily.
pub(super) fn key_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) => s.to_owned(),
        Err(_) => match decode_tensor_name_slice(key) {
            Some((name, slice)) => format!("{}[{slice}]", String::from_utf8_lossy(&name)),
            None => String::from_utf8_lossy(key).into_owned(),
        },
    }
}

/// An index's entries in key order (keys as bytes: slice keys are not text).
pub(super) type RawEntries = Vec<(Vec<u8>, BundleEntryProto)>;

/// The header and entries of a bundle's index (`prefix` names it in errors),
/// the header's version and byte order checked.
pub(super) fn parse_raw(prefix: &Path, index: &[u8]) -> Result<(BundleHeaderProto, RawEntries)> {
    let path = index_path(prefix);
    let table = read_table(&path, index)?;
    let mut it = table.into_iter();
    let header = match it.next() {
        Some((k, v)) if k.is_empty() => BundleHeaderProto::decode(v.as_slice()).map_err(|e| {
            corrupt(&path, format!("its header does not parse: {e}")).with_source(e)
        })?,
        _ => return Err(corrupt(&path, "it has no header entry")),
    };
    let version = header.version.clone().unwrap_or_default();
    if version.producer < MIN_PRODUCER
        || version.min_consumer > BUNDLE_VERSION
        || version.bad_consumers.contains(&BUNDLE_VERSION)
    {
        return Err(Status::unimplemented(format!(
            "checkpoint {} has bundle version {} (readable by {} and later); this build reads version {BUNDLE_VERSION}",
            prefix.display(),
            version.producer,
            version.min_consumer
        )));
    }
    if header.endianness != Endianness::Little as i32 {
        return Err(Status::unimplemented(format!(
            "checkpoint {} was written big-endian; this build reads little-endian bundles",
            prefix.display()
        )));
    }
    let mut entries = Vec::new();
    for (k, v) in it {
        let e = BundleEntryProto::decode(v.as_slice()).map_err(|err| {
            corrupt(
                &path,
                format!("tensor '{}': its entry does not parse: {err}", key_text(&k)),
            )
            .with_source(err)
        })?;
        entries.push((k, e));
    }
    Ok((header, entries))
}

/// Where one stored tensor (a whole tensor, or one slice of one) lies.
#[derive(Clone, Debug)]
struct Stored {
    dtype: DType,
    shape: TensorShape,
    shard: usize,
    offset: u64,
    size: u64,
    crc32c: u32,
}

/// How a listed tensor is stored.
#[derive(Clone, Debug)]
enum Layout {
    /// Whole, in one place.
    Whole(Stored),
    /// As these slices (checked), each under its slice key.
    Sliced(Vec<TensorSlice>),
}

/// A tensor the index lists, and how it is stored.
#[derive(Clone, Debug)]
struct Entry {
    info: TensorInfo,
    layout: Layout,
}

/// A bundle's index, read and checked; tensors are read from the data shards on
/// demand. The tensors it lists are those saved whole and those saved as
/// slices (under their full shape); the slices' own entries are not listed.
pub struct CheckpointReader {
    prefix: PathBuf,
    num_shards: usize,
    entries: BTreeMap<String, Entry>,
    /// The stored slices of tensors saved as slices, by slice key.
    slices: HashMap<Vec<u8>, Stored>,
}

impl std::fmt::Debug for CheckpointReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CheckpointReader({}, {} tensors)",
            self.prefix.display(),
            self.entries.len()
        )
    }
}

/// The dtype, shape and place of an entry, checked (`bad` words the damage).
fn stored_of(
    e: &BundleEntryProto,
    num_shards: usize,
    bad: &dyn Fn(String) -> Status,
) -> Result<Stored> {
    let (dtype, shape) = dtype_and_shape(e, bad)?;
    let shard = usize::try_from(e.shard_id)
        .ok()
        .filter(|&s| s < num_shards)
        .ok_or_else(|| bad(format!("shard {} of {num_shards}", e.shard_id)))?;
    let (offset, size) = match (u64::try_from(e.offset), u64::try_from(e.size)) {
        (Ok(o), Ok(s)) => (o, s),
        _ => return Err(bad(format!("offset {} size {}", e.offset, e.size))),
    };
    Ok(Stored {
        dtype,
        shape,
        shard,
        offset,
        size,
        crc32c: e.crc32c,
    })
}

fn dtype_and_shape(
    e: &BundleEntryProto,
    bad: &dyn Fn(String) -> Status,
) -> Result<(DType, TensorShape)> {
    let dtype = DType::from_tf_enum(e.dtype)
        .ok()
        .filter(|d| !d.is_ref && (d.dtype.is_pod() || d.dtype == DType::String))
        .map(|d| d.dtype)
        .ok_or_else(|| bad(format!("unsupported dtype number {}", e.dtype)))?;
    let shape =
        tensor_shape_from_proto(e.shape.as_ref()).map_err(|s| bad(s.message().to_owned()))?;
    shape
        .checked_num_elements()
        .map_err(|_| bad("too many elements".into()))?;
    Ok((dtype, shape))
}

impl CheckpointReader {
    /// Reads the index of the bundle at `prefix`: `NotFound` when there is none,
    /// `DataLoss` naming the file when it is damaged, `Unimplemented` for a
    /// version or byte order this code does not read.
    pub fn open(prefix: impl AsRef<Path>) -> Result<CheckpointReader> {
        let prefix = prefix.as_ref();
        let path = index_path(prefix);
        let bytes = std::fs::read(&path).map_err(|e| {
            Status::from(e).context(format_args!("reading checkpoint index {}", path.display()))
        })?;
        CheckpointReader::parse(prefix, &bytes)
    }

    /// Reads an index file's bytes (of the bundle at `prefix`).
    pub fn parse(prefix: &Path, index: &[u8]) -> Result<CheckpointReader> {
        let path = index_path(prefix);
        let (header, raw) = parse_raw(prefix, index)?;
        let num_shards = usize::try_from(header.num_shards)
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| corrupt(&path, format!("it has {} data shards", header.num_shards)))?;
        // The tensors saved as slices first: their slices' keys say which other
        // entries are slices rather than tensors.
        let mut sliced: BTreeMap<String, (DType, TensorShape, Vec<TensorSlice>)> = BTreeMap::new();
        let mut slice_keys: HashMap<Vec<u8>, (String, TensorSlice)> = HashMap::new();
        for (key, e) in raw.iter().filter(|(_, e)| !e.slices.is_empty()) {
            let name = String::from_utf8(key.clone())
                .map_err(|_| corrupt(&path, "the name of a sliced tensor is not UTF-8"))?;
            let bad = |why: String| corrupt(&path, format!("tensor '{name}': {why}"));
            let (dtype, shape) = dtype_and_shape(e, &bad)?;
            let slices = e
                .slices
                .iter()
                .map(slice_from_proto)
                .collect::<std::result::Result<Vec<_>, String>>()
                .map_err(|why| bad(format!("a slice is malformed: {why}")))?;
            check_stored_slices(&shape, &slices).map_err(bad)?;
            for s in &slices {
                slice_keys.insert(
                    encode_tensor_name_slice(&name, s),
                    (name.clone(), s.clone()),
                );
            }
            sliced.insert(name, (dtype, shape, slices));
        }
        let mut entries = BTreeMap::new();
        let mut slices = HashMap::new();
        for (key, e) in raw.into_iter().filter(|(_, e)| e.slices.is_empty()) {
            if let Some((name, slice)) = slice_keys.get(&key) {
                let bad =
                    |why: String| corrupt(&path, format!("tensor '{name}', slice {slice}: {why}"));
                let stored = stored_of(&e, num_shards, &bad)?;
                let (dtype, shape, _) = &sliced[name];
                let want = slice
                    .slice_shape(shape)
                    .map_err(|s| bad(s.message().to_owned()))?;
                if stored.dtype != *dtype || stored.shape != want {
                    return Err(bad(format!(
                        "it is stored as {} {} but the tensor is {dtype} and the slice {want}",
                        stored.dtype, stored.shape
                    )));
                }
                slices.insert(key, stored);
                continue;
            }
            if decode_tensor_name_slice(&key).is_some() {
                // A slice no tensor lists: not a tensor of its own (TensorFlow's
                // checkpoint reader leaves such keys out too).
                continue;
            }
            let name =
                String::from_utf8(key).map_err(|_| corrupt(&path, "a tensor name is not UTF-8"))?;
            let bad = |why: String| corrupt(&path, format!("tensor '{name}': {why}"));
            let stored = stored_of(&e, num_shards, &bad)?;
            let info = TensorInfo {
                name: name.clone(),
                dtype: stored.dtype,
                shape: stored.shape.clone(),
            };
            entries.insert(
                name,
                Entry {
                    info,
                    layout: Layout::Whole(stored),
                },
            );
        }
        for (name, (dtype, shape, list)) in sliced {
            if let Some(missing) = list
                .iter()
                .find(|s| !slices.contains_key(&encode_tensor_name_slice(&name, s)))
            {
                return Err(corrupt(
                    &path,
                    format!("tensor '{name}': its slice {missing} is listed but not stored"),
                ));
            }
            let info = TensorInfo {
                name: name.clone(),
                dtype,
                shape,
            };
            entries.insert(
                name,
                Entry {
                    info,
                    layout: Layout::Sliced(list),
                },
            );
        }
        Ok(CheckpointReader {
            prefix: prefix.to_owned(),
            num_shards,
            entries,
            slices,
        })
    }

    /// The bundle's prefix.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Every tensor, sorted by name (a tensor saved as slices once, with its
    /// full shape).
    pub fn tensors(&self) -> impl Iterator<Item = &TensorInfo> {
        self.entries.values().map(|e| &e.info)
    }

    /// The tensor saved as `name`, if any.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.entries.get(name).map(|e| &e.info)
    }

    /// The slices `name` was saved as, or `None` when it was saved whole (or is
    /// not in the bundle).
    pub fn saved_slices(&self, name: &str) -> Option<&[TensorSlice]> {
        match &self.entries.get(name)?.layout {
            Layout::Sliced(s) => Some(s),
            Layout::Whole(_) => None,
        }
    }

    fn entry(&self, name: &str) -> Result<&Entry> {
        self.entries.get(name).ok_or_else(|| {
            Status::not_found(format!(
                "Key {name} not found in checkpoint {}",
                self.prefix.display()
            ))
        })
    }

    /// Reads and checks the tensor saved as `name`; one saved as slices is put
    /// together from them.
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let e = self.entry(name)?;
        match &e.layout {
            Layout::Whole(stored) => self.read(name, stored),
            Layout::Sliced(_) => self.tensor_slice(name, &TensorSlice::full(e.info.shape.rank())),
        }
    }

    /// Reads and checks the part `slice` of the tensor saved as `name`
    /// (TensorFlow's `LookupSlice`), whether the bundle holds it whole or as
    /// slices: the stored slice equal to it when there is one, else its share
    /// of every stored slice that meets it. A slice that does not fit the
    /// tensor's shape, or that its stored slices do not cover, is
    /// `InvalidArgument`.
    pub fn tensor_slice(&self, name: &str, slice: &TensorSlice) -> Result<Tensor> {
        let e = self.entry(name)?;
        let shape = &e.info.shape;
        let out_shape = slice.slice_shape(shape).map_err(|s| {
            s.context(format_args!(
                "tensor {name} of checkpoint {}",
                self.prefix.display()
            ))
        })?;
        let stored = match &e.layout {
            Layout::Whole(stored) => {
                let whole = self.read(name, stored)?;
                if slice.covers(shape) {
                    return Ok(whole);
                }
                return part_of(
                    &whole,
                    shape,
                    &TensorSlice::full(shape.rank()),
                    slice,
                    &out_shape,
                );
            }
            Layout::Sliced(stored) => stored,
        };
        let Some(plan) = covering_slices(shape, stored, slice) else {
            return Err(Status::invalid_argument(format!(
                "Does not have sufficient slices for partitioned tensor {name} to restore in slice_spec: {slice} (checkpoint {})",
                self.prefix.display()
            )));
        };
        let place = |s: &TensorSlice| {
            let key = encode_tensor_name_slice(name, s);
            // Every listed slice was found stored when the index was read.
            self.slices
                .get(&key)
                .ok_or_else(|| Status::internal(format!("slice {s} of tensor {name} went missing")))
        };
        let read_slice = |s: &TensorSlice| self.read(&format!("{name}[{s}]"), place(s)?);
        // Each part's place checked before the result is allocated: its size is
        // then bounded by the data files'.
        for &i in &plan {
            let s = &stored[i];
            self.open_checked(&format!("{name}[{s}]"), place(s)?)?;
        }
        if let [only] = plan.as_slice() {
            let s = &stored[*only];
            if s == slice || (s.covers(shape) && slice.covers(shape)) {
                return read_slice(s);
            }
        }
        let dtype = e.info.dtype;
        let n = out_shape.num_elements();
        if dtype == DType::String {
            let mut out = vec![Bytes::new(); n];
            for &i in &plan {
                let part = read_slice(&stored[i])?;
                copy_intersection(shape, &stored[i], part.as_strings()?, slice, &mut out, 1);
            }
            return Tensor::from_strings(out_shape.dims(), out);
        }
        let mut buf = n
            .checked_mul(dtype.size())
            .ok_or(AllocError::CapacityOverflow)
            .and_then(AlignedBuffer::try_zeroed)
            .map_err(|err| graph::tensor::oom_status(dtype, &out_shape, err))?;
        let dst = buf
            .make_mut()
            .map_err(|err| graph::tensor::oom_status(dtype, &out_shape, err))?;
        for &i in &plan {
            let part = read_slice(&stored[i])?;
            copy_intersection(
                shape,
                &stored[i],
                part.as_bytes()?,
                slice,
                dst,
                dtype.size(),
            );
        }
        Tensor::from_buffer(dtype, out_shape.dims(), buf)
    }

    /// Opens the data file of the stored tensor `e` (`what` names it in
    /// errors) and checks, before anything is allocated for it, that its size
    /// suits its dtype and shape and that it lies inside the file: a damaged
    /// entry must not ask for terabytes. Returns the file, its path and the
    /// size.
    fn open_checked(&self, what: &str, e: &Stored) -> Result<(File, PathBuf, usize)> {
        let path = data_path(&self.prefix, e.shard, self.num_shards);
        let bad = |why: String| corrupt(&path, format!("tensor '{what}': {why}"));
        let len = usize::try_from(e.size).map_err(|_| bad("its size overflows".into()))?;
        let n = e.shape.num_elements();
        let fits = if e.dtype == DType::String {
            // At least a one-byte length per string and the length checksum.
            n.checked_add(4).is_some_and(|min| len >= min)
        } else {
            Some(len) == n.checked_mul(e.dtype.size())
        };
        if !fits {
            return Err(bad(format!(
                "{len} bytes for a {} tensor of shape {}",
                e.dtype, e.shape
            )));
        }
        let f = File::open(&path).map_err(|err| {
            Status::from(err).context(format_args!("reading checkpoint data {}", path.display()))
        })?;
        let file_len = f
            .metadata()
            .map_err(|err| Status::from(err).context(format_args!("reading {}", path.display())))?
            .len();
        if e.offset
            .checked_add(e.size)
            .is_none_or(|end| end > file_len)
        {
            return Err(bad(format!(
                "it lies at bytes {}..+{} of a file of {file_len}",
                e.offset, e.size
            )));
        }
        Ok((f, path, len))
    }

    /// Reads and checks one stored tensor (`what` names it in errors).
    fn read(&self, what: &str, e: &Stored) -> Result<Tensor> {
        let (f, path, len) = self.open_checked(what, e)?;
        let bad = |why: String| corrupt(&path, format!("tensor '{what}': {why}"));
        let read_into = |buf: &mut [u8]| {
            f.read_exact_at(buf, e.offset)
                .map_err(|err| match err.kind() {
                    std::io::ErrorKind::UnexpectedEof => bad("the data file ends before it".into()),
                    _ => Status::from(err).context(format_args!("reading {}", path.display())),
                })
        };
        let (t, crc) = if e.dtype == DType::String {
            let mut buf = vec![0u8; len];
            read_into(&mut buf)?;
            decode_strings(&buf, &e.shape).map_err(bad)?
        } else {
            // Read straight into the tensor's own buffer: no second copy.
            let mut buf = AlignedBuffer::try_zeroed(len)
                .map_err(|err| graph::tensor::oom_status(e.dtype, &e.shape, err))?;
            let bytes = buf
                .make_mut()
                .map_err(|err| graph::tensor::oom_status(e.dtype, &e.shape, err))?;
            read_into(bytes)?;
            let crc = crc32c(bytes);
            (Tensor::from_buffer(e.dtype, e.shape.dims(), buf)?, crc)
        };
        if crc != unmask(e.crc32c) {
            return Err(bad("its checksum does not match".into()));
        }
        Ok(t)
    }
}

/// The part `want` of `src` (which holds the part `have` of a tensor of
/// `shape`), of shape `out_shape`.
fn part_of(
    src: &Tensor,
    shape: &TensorShape,
    have: &TensorSlice,
    want: &TensorSlice,
    out_shape: &TensorShape,
) -> Result<Tensor> {
    let n = out_shape.num_elements();
    if src.dtype() == DType::String {
        let mut out = vec![Bytes::new(); n];
        copy_intersection(shape, have, src.as_strings()?, want, &mut out, 1);
        return Tensor::from_strings(out_shape.dims(), out);
    }
    let size = src.dtype().size();
    let mut buf = n
        .checked_mul(size)
        .ok_or(AllocError::CapacityOverflow)
        .and_then(AlignedBuffer::try_zeroed)
        .map_err(|err| graph::tensor::oom_status(src.dtype(), out_shape, err))?;
    let dst = buf
        .make_mut()
        .map_err(|err| graph::tensor::oom_status(src.dtype(), out_shape, err))?;
    copy_intersection(shape, have, src.as_bytes()?, want, dst, size);
    Tensor::from_buffer(src.dtype(), out_shape.dims(), buf)
}

/// The tensors of the bundle at `prefix`, sorted by name (its index only).
pub fn read_index(prefix: impl AsRef<Path>) -> Result<Vec<TensorInfo>> {
    Ok(CheckpointReader::open(prefix)?.tensors().cloned().collect())
}

/// A string tensor from its data-shard bytes, and their checksum as the writer
/// computes it (the lengths, the stored length checksum, the bytes).
pub(super) fn decode_strings(
    buf: &[u8],
    shape: &TensorShape,
) -> std::result::Result<(Tensor, u32), String> {
    let n = shape.num_elements();
    let mut pos = 0;
    let mut crc = 0;
    let mut lengths = Vec::with_capacity(n.min(buf.len()));
    for _ in 0..n {
        let l = get_varint(buf, &mut pos, 10).ok_or("its string lengths are cut off")?;
        crc = extend_length(crc, l);
        lengths.push(usize::try_from(l).map_err(|_| "a string length overflows")?);
    }
    let stored = buf
        .get(pos..pos + 4)
        .ok_or("its length checksum is cut off")?;
    if u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]) != mask(crc) {
        return Err("the length checksum does not match".into());
    }
    crc = extend(crc, stored);
    pos += 4;
    let bytes = Bytes::copy_from_slice(&buf[pos..]);
    crc = extend(crc, &bytes);
    let mut at = 0usize;
    let mut out = Vec::with_capacity(n);
    for l in lengths {
        let end = at
            .checked_add(l)
            .filter(|&e| e <= bytes.len())
            .ok_or("its strings run past its bytes")?;
        out.push(bytes.slice(at..end));
        at = end;
    }
    if at != bytes.len() {
        return Err(format!("{} bytes after its strings", bytes.len() - at));
    }
    let t = Tensor::from_strings(shape.dims(), out).map_err(|s| s.message().to_owned())?;
    Ok((t, crc))
}
