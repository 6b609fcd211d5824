//! TensorFlow's tensor bundle (checkpoint V2), read and written byte for byte as
//! TensorFlow's `BundleWriter`/`CheckpointReader` do
//! (`tensorflow/core/util/tensor_bundle/tensor_bundle.cc`).
//!
//! A bundle at `prefix` is two files:
//!
//! - `prefix.data-00000-of-00001`: the tensors' bytes, back to back in the order
//!   they were added. A numeric tensor is its elements' little-endian bytes
//!   (`bool` one byte each); a string tensor is every element's length as a
//!   varint64, then the CRC-32C of those length bytes (4 bytes, little-endian,
//!   unmasked), then every element's bytes.
//! - `prefix.index`: a [sorted string table](super::table) whose entry under the
//!   empty key is a `BundleHeaderProto` (one shard, little-endian, version 1) and
//!   whose other entries, by tensor name, are `BundleEntryProto`s: dtype, shape,
//!   shard, offset, size and the masked CRC-32C of the tensor's bytes.
//!
//! Each file is written atomically (temporary name, fsync, rename), the data
//! before the index, so a crash leaves the previous bundle or none readable. A
//! reader checks the header's version and byte order, and every tensor's size
//! and checksum when it reads it: damage is `DataLoss` naming the file and the
//! tensor.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use graph::import::shape_to_proto;
use graph::import::tensor::tensor_shape_from_proto;
use graph::proto::tf::bundle_header_proto::Endianness;
use graph::proto::tf::{BundleEntryProto, BundleHeaderProto, VersionDef};
use graph::{DType, Result, Shape, Status, Tensor, TensorShape};
use prost::Message;

use super::atomic::write_atomically;
use super::crc32c::{crc32c, extend, mask, unmask};
use super::table::{get_varint, put_varint, read_table, TableBuilder};

/// The bundle format version this code writes (`kTensorBundleVersion`).
pub const BUNDLE_VERSION: i32 = 1;
/// The oldest bundle producer version this code reads (`kTensorBundleMinProducer`).
const MIN_PRODUCER: i32 = 0;

/// The index file of the bundle at `prefix`.
pub fn index_path(prefix: &Path) -> PathBuf {
    append(prefix, ".index")
}

/// Data shard `shard` of `num_shards` of the bundle at `prefix`
/// (`prefix.data-00000-of-00001`).
pub fn data_path(prefix: &Path, shard: usize, num_shards: usize) -> PathBuf {
    append(prefix, &format!(".data-{shard:05}-of-{num_shards:05}"))
}

fn append(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// One tensor of a bundle, as its index entry describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The name it was saved under.
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: TensorShape,
}

/// Extends `crc` with a string length as TensorFlow's checksums see it: its
/// little-endian bytes, 4 when it fits in 32 bits and 8 otherwise (not the varint
/// the data shard holds).
fn extend_length(crc: u32, len: u64) -> u32 {
    match u32::try_from(len) {
        Ok(l) => extend(crc, &l.to_le_bytes()),
        Err(_) => extend(crc, &len.to_le_bytes()),
    }
}

/// Appends the bytes of one tensor as a data shard holds them; returns their
/// (unmasked) checksum as the index entry records it. For numbers that is the
/// CRC-32C of the bytes; for strings, TensorFlow's chain: the lengths (see
/// [`extend_length`]), the masked length checksum as stored, then the bytes.
fn encode_tensor(t: &Tensor, out: &mut Vec<u8>) -> Result<u32> {
    if t.dtype() == DType::String {
        let strings = t.as_strings()?;
        let mut crc = 0;
        for s in strings {
            put_varint(out, s.len() as u64);
            crc = extend_length(crc, s.len() as u64);
        }
        let stored = mask(crc).to_le_bytes();
        out.extend_from_slice(&stored);
        crc = extend(crc, &stored);
        for s in strings {
            out.extend_from_slice(s);
            crc = extend(crc, s);
        }
        Ok(crc)
    } else if t.dtype().is_pod() {
        let b = t.as_bytes()?;
        out.extend_from_slice(b);
        Ok(crc32c(b))
    } else {
        Err(Status::invalid_argument(format!(
            "a checkpoint cannot hold a {} tensor",
            t.dtype()
        )))
    }
}

/// Writes the tensors as a bundle at `prefix` (the names must be unique; the
/// index lists them sorted, the data shard in the order given). Missing parent
/// directories are created.
pub fn write_bundle(prefix: &Path, tensors: &[(&str, &Tensor)]) -> Result<()> {
    // Every request error before any file is touched.
    let mut seen = std::collections::HashSet::new();
    for (name, t) in tensors {
        if name.is_empty() {
            return Err(Status::invalid_argument(
                "a checkpoint tensor needs a non-empty name (the empty key is the bundle's header)",
            ));
        }
        if !seen.insert(*name) {
            return Err(Status::invalid_argument(format!(
                "Adding duplicate key: {name}"
            )));
        }
        if !(t.dtype().is_pod() || t.dtype() == DType::String) {
            return Err(Status::invalid_argument(format!(
                "tensor '{name}' has dtype {}, which a checkpoint cannot hold",
                t.dtype()
            )));
        }
    }
    let mut entries: BTreeMap<&str, BundleEntryProto> = BTreeMap::new();
    let mut offset = 0u64;
    let mut buf = Vec::new();
    let data = data_path(prefix, 0, 1);
    write_atomically(&data, true, |w: &mut dyn Write| {
        for (name, t) in tensors {
            buf.clear();
            let crc = encode_tensor(t, &mut buf)
                .map_err(|e| e.context(format_args!("tensor '{name}'")))?;
            let entry = BundleEntryProto {
                dtype: t.dtype().tf_enum(),
                shape: Some(shape_to_proto(&Shape::known(t.dims()))),
                shard_id: 0,
                offset: offset as i64,
                size: buf.len() as i64,
                crc32c: mask(crc),
                slices: Vec::new(),
            };
            entries.insert(name, entry);
            w.write_all(&buf)
                .map_err(|e| Status::from(e).context(format_args!("writing {}", data.display())))?;
            offset += buf.len() as u64;
        }
        Ok(())
    })?;
    let header = BundleHeaderProto {
        num_shards: 1,
        endianness: Endianness::Little as i32,
        version: Some(VersionDef {
            producer: BUNDLE_VERSION,
            ..Default::default()
        }),
    };
    let mut table = TableBuilder::new();
    table.add(b"", &header.encode_to_vec())?;
    for (name, e) in &entries {
        table.add(name.as_bytes(), &e.encode_to_vec())?;
    }
    let index = table.finish();
    write_atomically(&index_path(prefix), true, |w| {
        w.write_all(&index).map_err(|e| {
            Status::from(e).context(format_args!("writing {}", index_path(prefix).display()))
        })
    })
}

/// The tensors of the bundle at `prefix`, sorted by name (its index only).
pub fn read_index(prefix: impl AsRef<Path>) -> Result<Vec<TensorInfo>> {
    Ok(CheckpointReader::open(prefix)?.tensors().cloned().collect())
}

/// The bundle prefix (a file name) whose index or data shard `file_name` is:
/// `model.ckpt-7` for `model.ckpt-7.index` or `model.ckpt-7.data-00000-of-00001`.
pub fn bundle_prefix_of(file_name: &str) -> Option<&str> {
    if let Some(p) = file_name.strip_suffix(".index") {
        return Some(p);
    }
    let (p, shard) = file_name.rsplit_once(".data-")?;
    let (a, b) = shard.split_once("-of-")?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|c| c.is_ascii_digit());
    (digits(a) && digits(b)).then_some(p)
}

/// The files of the bundle at `prefix` that exist: its index and data shards.
pub fn bundle_files(prefix: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (prefix.parent(), prefix.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(bundle_prefix_of)
                .is_some_and(|p| p == name)
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// An entry of a bundle's index: where a tensor's bytes are.
#[derive(Clone, Debug)]
struct Entry {
    info: TensorInfo,
    shard: usize,
    offset: u64,
    size: u64,
    crc32c: u32,
    sliced: bool,
}

/// A bundle's index, read and checked; tensors are read from the data shards on
/// demand.
pub struct CheckpointReader {
    prefix: PathBuf,
    num_shards: usize,
    entries: BTreeMap<String, Entry>,
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

fn corrupt(path: &Path, why: impl std::fmt::Display) -> Status {
    Status::data_loss(format!(
        "checkpoint {} is truncated or corrupt: {why}",
        path.display()
    ))
}

/// The header and entries of a bundle's index (`prefix` names it in errors),
/// the header's version and byte order checked.
fn parse_raw(
    prefix: &Path,
    index: &[u8],
) -> Result<(BundleHeaderProto, Vec<(String, BundleEntryProto)>)> {
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
        let name =
            String::from_utf8(k).map_err(|_| corrupt(&path, "a tensor name is not UTF-8"))?;
        let e = BundleEntryProto::decode(v.as_slice()).map_err(|err| {
            corrupt(
                &path,
                format!("tensor '{name}': its entry does not parse: {err}"),
            )
            .with_source(err)
        })?;
        entries.push((name, e));
    }
    Ok((header, entries))
}

/// Merges the bundles at `inputs` (the shards of a sharded save) into one at
/// `dest`, as TensorFlow's `MergeV2Checkpoints` does: their entries in one
/// index (a key in two bundles is an error unless both hold slices of it), their
/// data shards renamed to `dest.data-NNNNN-of-MMMMM` in order of first use, then
/// their index files deleted. An input without an index is `NotFound` unless
/// `allow_missing_files` (at least one must exist).
pub fn merge_bundles(inputs: &[PathBuf], dest: &Path, allow_missing_files: bool) -> Result<()> {
    if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            Status::from(e).context(format_args!("creating directory {}", dir.display()))
        })?;
    }
    let mut header: Option<BundleHeaderProto> = None;
    let mut merged: BTreeMap<String, BundleEntryProto> = BTreeMap::new();
    // Data files in order of first use, each with its new shard id.
    let mut files: Vec<PathBuf> = Vec::new();
    let mut merged_from = Vec::new();
    for prefix in inputs {
        let index = index_path(prefix);
        let bytes = match std::fs::read(&index) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && allow_missing_files => continue,
            Err(e) => {
                return Err(
                    Status::from(e).context(format_args!("merging checkpoint {}", index.display()))
                )
            }
        };
        let (h, entries) = parse_raw(prefix, &bytes)?;
        match &mut header {
            None => header = Some(h.clone()),
            Some(first) => {
                if first.endianness != h.endianness || first.version != h.version {
                    return Err(Status::invalid_argument(format!(
                        "checkpoint {} has another byte order or version than {}",
                        prefix.display(),
                        inputs[0].display()
                    )));
                }
                first.num_shards += h.num_shards;
            }
        }
        let shards = usize::try_from(h.num_shards).unwrap_or(0);
        for (key, mut e) in entries {
            if let Some(have) = merged.get_mut(&key) {
                if have.slices.is_empty()
                    || e.slices.is_empty()
                    || have.dtype != e.dtype
                    || have.shape != e.shape
                {
                    return Err(Status::invalid_argument(format!(
                        "Duplicate tensor keyed by {key} encountered, when merging prefix: {}",
                        prefix.display()
                    )));
                }
                have.slices.append(&mut e.slices);
                continue;
            }
            let shard = usize::try_from(e.shard_id).unwrap_or(usize::MAX);
            if shard >= shards {
                return Err(corrupt(
                    &index,
                    format!("tensor '{key}': shard {} of {shards}", e.shard_id),
                ));
            }
            let file = data_path(prefix, shard, shards);
            let id = match files.iter().position(|f| f == &file) {
                Some(i) => i,
                None => {
                    files.push(file);
                    files.len() - 1
                }
            };
            e.shard_id = id as i32;
            merged.insert(key, e);
        }
        merged_from.push(index);
    }
    let Some(header) = header else {
        return Err(Status::not_found(format!(
            "none of the {} checkpoints to merge into {} exists",
            inputs.len(),
            dest.display()
        )));
    };
    for (i, f) in files.iter().enumerate() {
        let to = data_path(dest, i, files.len());
        std::fs::rename(f, &to).map_err(|e| {
            Status::from(e).context(format_args!("renaming {} to {}", f.display(), to.display()))
        })?;
    }
    let mut table = TableBuilder::new();
    table.add(b"", &header.encode_to_vec())?;
    for (name, e) in &merged {
        table.add(name.as_bytes(), &e.encode_to_vec())?;
    }
    let index = table.finish();
    let dest_index = index_path(dest);
    write_atomically(&dest_index, true, |w| {
        w.write_all(&index)
            .map_err(|e| Status::from(e).context(format_args!("writing {}", dest_index.display())))
    })?;
    for f in merged_from {
        if f != dest_index {
            let _ = std::fs::remove_file(f);
        }
    }
    Ok(())
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
        let mut entries = BTreeMap::new();
        for (name, e) in raw {
            let bad = |why: String| corrupt(&path, format!("tensor '{name}': {why}"));
            let dtype = DType::from_tf_enum(e.dtype)
                .ok()
                .filter(|d| !d.is_ref && (d.dtype.is_pod() || d.dtype == DType::String))
                .map(|d| d.dtype)
                .ok_or_else(|| bad(format!("unsupported dtype number {}", e.dtype)))?;
            let shape = tensor_shape_from_proto(e.shape.as_ref())
                .map_err(|s| bad(s.message().to_owned()))?;
            shape
                .checked_num_elements()
                .map_err(|_| bad("too many elements".into()))?;
            let shard = usize::try_from(e.shard_id)
                .ok()
                .filter(|&s| s < num_shards)
                .ok_or_else(|| bad(format!("shard {} of {num_shards}", e.shard_id)))?;
            let (offset, size) = match (u64::try_from(e.offset), u64::try_from(e.size)) {
                (Ok(o), Ok(s)) => (o, s),
                _ => return Err(bad(format!("offset {} size {}", e.offset, e.size))),
            };
            let info = TensorInfo {
                name: name.clone(),
                dtype,
                shape,
            };
            entries.insert(
                name,
                Entry {
                    info,
                    shard,
                    offset,
                    size,
                    crc32c: e.crc32c,
                    sliced: !e.slices.is_empty(),
                },
            );
        }
        Ok(CheckpointReader {
            prefix: prefix.to_owned(),
            num_shards,
            entries,
        })
    }

    /// The bundle's prefix.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Every tensor, sorted by name.
    pub fn tensors(&self) -> impl Iterator<Item = &TensorInfo> {
        self.entries.values().map(|e| &e.info)
    }

    /// The tensor saved as `name`, if any.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.entries.get(name).map(|e| &e.info)
    }

    /// Reads and checks the tensor saved as `name`.
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let e = self.entries.get(name).ok_or_else(|| {
            Status::not_found(format!(
                "Key {name} not found in checkpoint {}",
                self.prefix.display()
            ))
        })?;
        if e.sliced {
            return Err(Status::unimplemented(format!(
                "tensor {name} of checkpoint {} was saved as slices (a partitioned variable); reading slices is not supported",
                self.prefix.display()
            )));
        }
        let path = data_path(&self.prefix, e.shard, self.num_shards);
        let bad = |why: String| corrupt(&path, format!("tensor '{name}': {why}"));
        let len = usize::try_from(e.size).map_err(|_| bad("its size overflows".into()))?;
        let info = &e.info;
        let n = info.shape.num_elements();
        if info.dtype != DType::String && Some(len) != n.checked_mul(info.dtype.size()) {
            return Err(bad(format!(
                "{len} bytes for a {} tensor of shape {}",
                info.dtype, info.shape
            )));
        }
        let mut f = File::open(&path).map_err(|err| {
            Status::from(err).context(format_args!("reading checkpoint data {}", path.display()))
        })?;
        // Checked against the file before anything is allocated: a damaged entry
        // must not ask for terabytes.
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
        let mut buf = vec![0u8; len];
        f.seek(SeekFrom::Start(e.offset))
            .and_then(|_| f.read_exact(&mut buf))
            .map_err(|err| match err.kind() {
                std::io::ErrorKind::UnexpectedEof => bad("the data file ends before it".into()),
                _ => Status::from(err).context(format_args!("reading {}", path.display())),
            })?;
        let (t, crc) = if info.dtype == DType::String {
            decode_strings(&buf, &info.shape).map_err(bad)?
        } else {
            let t = Tensor::from_raw_bytes(info.dtype, info.shape.dims(), &buf)?;
            (t, crc32c(&buf))
        };
        if crc != unmask(e.crc32c) {
            return Err(bad("its checksum does not match".into()));
        }
        Ok(t)
    }
}

/// A string tensor from its data-shard bytes, and their checksum as
/// [`encode_tensor`] computes it.
fn decode_strings(buf: &[u8], shape: &TensorShape) -> std::result::Result<(Tensor, u32), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<(&'static str, Tensor)> {
        vec![
            (
                "w",
                Tensor::new(&[2, 3], vec![1.0f32, 2., 3., 4., 5., 6.]).unwrap(),
            ),
            ("global_step", Tensor::scalar(7i64)),
            ("mask", Tensor::vector(&[true, false, true])),
            (
                "names",
                Tensor::from_strings(&[3], vec!["a", "", "long string"]).unwrap(),
            ),
            ("empty", Tensor::new::<f64>(&[0, 4], vec![]).unwrap()),
        ]
    }

    #[test]
    fn round_trips_every_dtype_shape_and_strings() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("sub/model.ckpt-7");
        let tensors = sample();
        let refs: Vec<_> = tensors.iter().map(|(n, t)| (*n, t)).collect();
        write_bundle(&prefix, &refs).unwrap();
        assert!(index_path(&prefix).is_file());
        assert!(dir
            .path()
            .join("sub/model.ckpt-7.data-00000-of-00001")
            .is_file());
        let r = CheckpointReader::open(&prefix).unwrap();
        let names: Vec<_> = r.tensors().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["empty", "global_step", "mask", "names", "w"]);
        for (n, t) in &tensors {
            assert_eq!(&r.tensor(n).unwrap(), t, "{n}");
            assert_eq!(r.info(n).unwrap().shape, *t.shape());
        }
        assert_eq!(r.tensor("nope").unwrap_err().code(), graph::Code::NotFound);
    }

    #[test]
    fn merging_shards_renumbers_their_data_files_as_tensorflow_does() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("model_temp");
        let p0 = tmp.join("part-00000-of-00002");
        let p1 = tmp.join("part-00001-of-00002");
        let one = Tensor::scalar(1.0f32);
        write_bundle(&p0, &[("d", &one), ("b", &Tensor::scalar(2i64))]).unwrap();
        write_bundle(&p1, &[("c", &one), ("a", &Tensor::vector(&[3u8]))]).unwrap();
        let dest = dir.path().join("model");
        merge_bundles(&[p0.clone(), p1.clone()], &dest, false).unwrap();
        // TensorFlow 2.21 merges {b, d} and {a, c} this way: the first input's
        // data file becomes shard 0, and the header counts both shards.
        let (header, entries) =
            parse_raw(&dest, &std::fs::read(index_path(&dest)).unwrap()).unwrap();
        assert_eq!(header.encode_to_vec(), [0x08, 0x02, 0x1a, 0x02, 0x08, 0x01]);
        let shards: Vec<(&str, i32)> = entries
            .iter()
            .map(|(k, e)| (k.as_str(), e.shard_id))
            .collect();
        assert_eq!(shards, [("a", 1), ("b", 0), ("c", 1), ("d", 0)]);
        let r = CheckpointReader::open(&dest).unwrap();
        assert_eq!(r.tensor("a").unwrap(), Tensor::vector(&[3u8]));
        assert_eq!(r.tensor("b").unwrap(), Tensor::scalar(2i64));
        assert!(data_path(&dest, 1, 2).is_file());
        // The inputs' index files are gone, their data files renamed.
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
        // A key in two inputs, a missing input, or no input at all.
        write_bundle(&p0, &[("x", &one)]).unwrap();
        write_bundle(&p1, &[("x", &one)]).unwrap();
        let e = merge_bundles(&[p0.clone(), p1.clone()], &dest, false).unwrap_err();
        assert!(e.message().contains("Duplicate tensor keyed by x"), "{e}");
        let missing = tmp.join("missing");
        let e = merge_bundles(&[missing.clone(), p1.clone()], &dest, false).unwrap_err();
        assert_eq!(e.code(), graph::Code::NotFound, "{e}");
        merge_bundles(&[missing.clone(), p1], &dest, true).unwrap();
        let e = merge_bundles(&[missing], &dest, true).unwrap_err();
        assert_eq!(e.code(), graph::Code::NotFound, "{e}");
    }

    #[test]
    fn file_names_name_their_bundle() {
        assert_eq!(bundle_prefix_of("model.ckpt-7.index"), Some("model.ckpt-7"));
        assert_eq!(
            bundle_prefix_of("model.ckpt-7.data-00000-of-00001"),
            Some("model.ckpt-7")
        );
        assert_eq!(bundle_prefix_of("model.ckpt-7.data-0-of-1"), None);
        assert_eq!(bundle_prefix_of("model.ckpt-7"), None);
        assert_eq!(bundle_prefix_of("checkpoint"), None);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m");
        write_bundle(&p, &[("x", &Tensor::scalar(1.0f32))]).unwrap();
        write_bundle(&dir.path().join("m2"), &[("x", &Tensor::scalar(1.0f32))]).unwrap();
        assert_eq!(bundle_files(&p), vec![data_path(&p, 0, 1), index_path(&p)]);
        assert_eq!(read_index(&p).unwrap()[0].name, "x");
    }

    #[test]
    fn string_layout_is_lengths_checksum_bytes() {
        let mut out = Vec::new();
        // TensorFlow 2.21's bytes for ["hello", "", "x" * 200] (see
        // tests/tf_interop/bundle fixtures): varints, then the masked CRC-32C of
        // the lengths as little-endian u32s.
        let long = "x".repeat(200);
        let t = Tensor::from_strings(&[3], vec!["hello".to_string(), String::new(), long]).unwrap();
        let crc = encode_tensor(&t, &mut out).unwrap();
        assert_eq!(&out[..4], &[0x05, 0x00, 0xc8, 0x01]);
        assert_eq!(&out[4..8], &0x2BAA_8C01u32.to_le_bytes());
        assert_eq!(unmask(0x2BAA_8C01), 0xD094_C493);
        assert_eq!(out.len(), 213);
        assert_eq!(&out[8..13], b"hello");
        let (back, crc2) = decode_strings(&out, &TensorShape::new(&[3])).unwrap();
        assert_eq!((back, crc2), (t, crc));
        // An empty string tensor is its (masked, zero) length checksum alone.
        let mut empty = Vec::new();
        encode_tensor(
            &Tensor::from_strings::<&str>(&[0], vec![]).unwrap(),
            &mut empty,
        )
        .unwrap();
        assert_eq!(empty, [0xd8, 0xea, 0x82, 0xa2]);
    }

    #[test]
    fn duplicate_and_empty_names_are_rejected_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ckpt");
        let t = Tensor::scalar(1.0f32);
        let e = write_bundle(&prefix, &[("a", &t), ("a", &t)]).unwrap_err();
        assert_eq!(e.code(), graph::Code::InvalidArgument);
        assert!(e.message().contains("duplicate key"), "{e}");
        assert!(write_bundle(&prefix, &[("", &t)]).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn damaged_data_is_data_loss_naming_file_and_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ckpt");
        let tensors = sample();
        let refs: Vec<_> = tensors.iter().map(|(n, t)| (*n, t)).collect();
        write_bundle(&prefix, &refs).unwrap();
        let data = data_path(&prefix, 0, 1);
        let good = std::fs::read(&data).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            std::fs::write(&data, &bad).unwrap();
            let r = CheckpointReader::open(&prefix).unwrap();
            let failed: Vec<_> = tensors
                .iter()
                .filter_map(|(n, _)| r.tensor(n).err())
                .collect();
            assert_eq!(failed.len(), 1, "byte {i}");
            assert_eq!(failed[0].code(), graph::Code::DataLoss);
            assert!(
                failed[0].message().contains("data-00000-of-00001"),
                "{}",
                failed[0]
            );
        }
        // An entry claiming more bytes than the file holds fails before it
        // allocates them.
        std::fs::write(&data, &good).unwrap();
        let mut table = TableBuilder::new();
        let (header, mut entries) =
            parse_raw(&prefix, &std::fs::read(index_path(&prefix)).unwrap()).unwrap();
        table.add(b"", &header.encode_to_vec()).unwrap();
        for (k, e) in &mut entries {
            if k == "w" {
                e.shape = Some(shape_to_proto(&Shape::known(&[1 << 20, 1 << 20])));
                e.size = 4 << 40;
            }
            table.add(k.as_bytes(), &e.encode_to_vec()).unwrap();
        }
        std::fs::write(index_path(&prefix), table.finish()).unwrap();
        let e = CheckpointReader::open(&prefix)
            .unwrap()
            .tensor("w")
            .unwrap_err();
        assert_eq!(e.code(), graph::Code::DataLoss, "{e}");
        write_bundle(&prefix, &refs).unwrap();
        std::fs::write(&data, &good[..good.len() - 3]).unwrap();
        let r = CheckpointReader::open(&prefix).unwrap();
        let e = r.tensor("names").unwrap_err();
        assert_eq!(e.code(), graph::Code::DataLoss, "{e}");
        assert!(e.message().contains("'names'"), "{e}");
        assert_eq!(
            CheckpointReader::open(dir.path().join("missing"))
                .unwrap_err()
                .code(),
            graph::Code::NotFound
        );
    }
}
