//! TensorFlow's tensor bundle (checkpoint V2), written byte for byte as
//! TensorFlow's `BundleWriter` writes it
//! (`tensorflow/core/util/tensor_bundle/tensor_bundle.cc`); the reader is
//! [`CheckpointReader`], the merge of a sharded save's bundles
//! [`merge_bundles`].
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
//! A tensor saved as slices (a partitioned variable) has an entry under its
//! name that lists the slices, and one ordinary entry per slice under a key
//! made of the name and the slice; see [`slice`](super::slice).
//!
//! Each file is written atomically (temporary name, fsync, rename), the data
//! before the index, so a crash leaves the previous bundle or none readable. A
//! reader checks the header's version and byte order, and every tensor's size
//! and checksum when it reads it: damage is `DataLoss` naming the file and the
//! tensor.
//!
//! A save writes each numeric tensor's bytes from the tensor itself (no copy
//! on our side) and, for large saves, computes their checksums on a second
//! thread meanwhile; the data file is flushed to disk as it grows
//! ([`atomic`](super::atomic)).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use graph::import::shape_to_proto;
use graph::ops::checkpoint::TensorSlice;
use graph::proto::tf::bundle_header_proto::Endianness;
use graph::proto::tf::{BundleEntryProto, BundleHeaderProto, VersionDef};
use graph::{DType, Result, Shape, Status, Tensor, TensorShape};
use prost::Message;

use super::atomic::write_atomically;
use super::crc32c::{crc32c, extend, mask};
use super::slice::{encode_tensor_name_slice, slice_to_proto};
use super::table::{put_varint, TableBuilder};

pub use super::merge::merge_bundles;
pub use super::reader::{read_index, CheckpointReader};

/// The bundle format version this code writes (`kTensorBundleVersion`).
pub const BUNDLE_VERSION: i32 = 1;

/// Saves whose numeric tensors hold at least this many bytes checksum them on
/// a second thread while the first writes them.
const PARALLEL_CHECKSUM_BYTES: usize = 8 << 20;

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
    /// Its shape (the full shape of a tensor saved as slices).
    pub shape: TensorShape,
}

/// Extends `crc` with a string length as TensorFlow's checksums see it: its
/// little-endian bytes, 4 when it fits in 32 bits and 8 otherwise (not the varint
/// the data shard holds).
pub(super) fn extend_length(crc: u32, len: u64) -> u32 {
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

/// The entry of a tensor of `dtype` and `shape` whose place is not known yet.
fn entry_of(dtype: DType, shape: &TensorShape) -> BundleEntryProto {
    BundleEntryProto {
        dtype: dtype.tf_enum(),
        shape: Some(shape_to_proto(&Shape::known(shape.dims()))),
        ..Default::default()
    }
}

/// Builds a bundle (TensorFlow's `BundleWriter`): [`add`](Self::add) whole
/// tensors and [`add_slice`](Self::add_slice) slices of larger ones, then
/// [`finish`](Self::finish) writes the files. Adding checks a request and
/// touches no file, so a save that any request spoils writes nothing.
///
/// # Examples
/// ```
/// use actorflow_kernels::cpu::checkpoint::bundle::{BundleWriter, CheckpointReader};
/// use graph::ops::checkpoint::TensorSlice;
/// use graph::{Tensor, TensorShape};
/// let dir = tempfile::tempdir().unwrap();
/// let prefix = dir.path().join("model.ckpt");
/// let (top, bottom) = (Tensor::vector(&[1.0f32, 2.0]), Tensor::vector(&[3.0f32]));
/// let full = TensorShape::new(&[3]);
/// let mut w = BundleWriter::new(&prefix);
/// w.add_slice("v", &full, &TensorSlice::parse("0,2").unwrap(), &top).unwrap();
/// w.add_slice("v", &full, &TensorSlice::parse("2,1").unwrap(), &bottom).unwrap();
/// w.finish().unwrap();
/// let r = CheckpointReader::open(&prefix).unwrap();
/// assert_eq!(r.tensor("v").unwrap(), Tensor::vector(&[1.0f32, 2.0, 3.0]));
/// ```
pub struct BundleWriter<'a> {
    prefix: PathBuf,
    /// What the data shard holds, in order: each entry's key and tensor.
    data: Vec<(Vec<u8>, &'a Tensor)>,
    /// Every entry by key; the places of `data`'s are filled by `finish`.
    entries: BTreeMap<Vec<u8>, BundleEntryProto>,
    /// The slices added of each tensor saved as slices.
    slices: BTreeMap<String, Vec<TensorSlice>>,
}

impl<'a> BundleWriter<'a> {
    /// A writer of the bundle at `prefix` (missing parent directories are
    /// created when it finishes).
    pub fn new(prefix: impl Into<PathBuf>) -> BundleWriter<'a> {
        BundleWriter {
            prefix: prefix.into(),
            data: Vec::new(),
            entries: BTreeMap::new(),
            slices: BTreeMap::new(),
        }
    }

    fn check_name_and_dtype(name: &str, t: &Tensor) -> Result<()> {
        if name.is_empty() {
            return Err(Status::invalid_argument(
                "a checkpoint tensor needs a non-empty name (the empty key is the bundle's header)",
            ));
        }
        if !(t.dtype().is_pod() || t.dtype() == DType::String) {
            return Err(Status::invalid_argument(format!(
                "tensor '{name}' has dtype {}, which a checkpoint cannot hold",
                t.dtype()
            )));
        }
        Ok(())
    }

    /// Adds the whole tensor `t` as `name`. A name already added is
    /// `InvalidArgument` (TensorFlow's "Adding duplicate key").
    pub fn add(&mut self, name: &str, t: &'a Tensor) -> Result<()> {
        Self::check_name_and_dtype(name, t)?;
        if self.entries.contains_key(name.as_bytes()) {
            return Err(Status::invalid_argument(format!(
                "Adding duplicate key: {name}"
            )));
        }
        self.entries
            .insert(name.as_bytes().to_vec(), entry_of(t.dtype(), t.shape()));
        self.data.push((name.as_bytes().to_vec(), t));
        Ok(())
    }

    /// Adds `t` as the part `slice` of the tensor `name` of shape `full_shape`
    /// (TensorFlow's `AddSlice`): `t`'s shape must be the slice's. A slice
    /// that is the whole tensor is added as the whole tensor; otherwise the
    /// entry of `name` lists it and it is stored under its slice key. Slices of
    /// one name must agree on dtype and full shape and must not overlap, and a
    /// name cannot be both whole and sliced: `InvalidArgument`.
    pub fn add_slice(
        &mut self,
        name: &str,
        full_shape: &TensorShape,
        slice: &TensorSlice,
        t: &'a Tensor,
    ) -> Result<()> {
        Self::check_name_and_dtype(name, t)?;
        let slice_shape = slice
            .slice_shape(full_shape)
            .map_err(|e| e.context(format_args!("saving a slice of tensor '{name}'")))?;
        if &slice_shape != t.shape() {
            return Err(Status::invalid_argument(format!(
                "Slice in shape_and_slice specification does not match the shape of the tensor to save: {slice} of {full_shape} is {slice_shape}, tensor '{name}': {}",
                t.shape()
            )));
        }
        if slice.covers(full_shape) {
            return self.add(name, t);
        }
        if let Some(e) = self.entries.get(name.as_bytes()) {
            if e.slices.is_empty() {
                return Err(Status::invalid_argument(format!(
                    "Adding duplicate key: {name} (saved whole, then as a slice)"
                )));
            }
            let want = entry_of(t.dtype(), full_shape);
            if (e.dtype, &e.shape) != (want.dtype, &want.shape) {
                return Err(Status::invalid_argument(format!(
                    "the slices of tensor '{name}' disagree: this one is a {} slice of {full_shape}, an earlier one of another dtype or full shape",
                    t.dtype()
                )));
            }
        }
        let added = self.slices.get(name).map(Vec::as_slice).unwrap_or(&[]);
        if let Some(other) = added.iter().find(|o| o.intersect(slice).is_some()) {
            return Err(Status::invalid_argument(format!(
                "Overlapping slices of tensor '{name}': existing slice = {other}, new slice = {slice}"
            )));
        }
        let full = self
            .entries
            .entry(name.as_bytes().to_vec())
            .or_insert_with(|| entry_of(t.dtype(), full_shape));
        full.slices.push(slice_to_proto(slice));
        self.slices
            .entry(name.to_owned())
            .or_default()
            .push(slice.clone());
        let key = encode_tensor_name_slice(name, slice);
        self.entries
            .insert(key.clone(), entry_of(t.dtype(), t.shape()));
        self.data.push((key, t));
        Ok(())
    }

    /// Writes the data shard, then the index, each atomically.
    pub fn finish(mut self) -> Result<()> {
        let data = data_path(&self.prefix, 0, 1);
        let mut places = Vec::new();
        write_atomically(&data, true, |w| {
            places = write_data(w, &self.data)?;
            Ok(())
        })
        .map_err(|e| e.context(format_args!("writing {}", data.display())))?;
        for ((key, _), (offset, size, crc)) in self.data.iter().zip(places) {
            if let Some(e) = self.entries.get_mut(key) {
                e.offset = offset as i64;
                e.size = size as i64;
                e.crc32c = mask(crc);
            }
        }
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
        for (key, e) in &self.entries {
            table.add(key, &e.encode_to_vec())?;
        }
        let index = table.finish();
        let index_file = index_path(&self.prefix);
        write_atomically(&index_file, true, |w| {
            w.write_all(&index).map_err(|e| {
                Status::from(e).context(format_args!("writing {}", index_file.display()))
            })
        })
    }
}

/// Writes the tensors back to back; returns each one's offset, size and
/// (unmasked) checksum. Numeric tensors are written from their own bytes; in a
/// large save their checksums are computed on a second thread meanwhile.
fn write_data(w: &mut dyn Write, data: &[(Vec<u8>, &Tensor)]) -> Result<Vec<(u64, u64, u32)>> {
    let numeric_bytes: usize = data
        .iter()
        .filter(|(_, t)| t.dtype().is_pod())
        .map(|(_, t)| t.byte_size())
        .sum();
    let parallel = numeric_bytes >= PARALLEL_CHECKSUM_BYTES;
    std::thread::scope(|scope| {
        let checksums = parallel.then(|| {
            scope.spawn(|| {
                data.iter()
                    .map(|(_, t)| t.as_bytes().map(crc32c).unwrap_or(0))
                    .collect::<Vec<u32>>()
            })
        });
        let mut places = Vec::with_capacity(data.len());
        let mut offset = 0u64;
        let mut buf = Vec::new();
        for (_, t) in data {
            let (size, crc) = if t.dtype().is_pod() {
                let bytes = t.as_bytes()?;
                w.write_all(bytes)?;
                (bytes.len(), if parallel { 0 } else { crc32c(bytes) })
            } else {
                buf.clear();
                let crc = encode_tensor(t, &mut buf)?;
                w.write_all(&buf)?;
                (buf.len(), crc)
            };
            places.push((offset, size as u64, crc));
            offset += size as u64;
        }
        if let Some(h) = checksums {
            let crcs = h
                .join()
                .map_err(|_| Status::internal("the checkpoint checksum thread panicked"))?;
            for ((place, (_, t)), crc) in places.iter_mut().zip(data).zip(crcs) {
                if t.dtype().is_pod() {
                    place.2 = crc;
                }
            }
        }
        Ok(places)
    })
}

/// Writes the tensors as a bundle at `prefix` (the names must be unique; the
/// index lists them sorted, the data shard in the order given). Missing parent
/// directories are created.
pub fn write_bundle(prefix: &Path, tensors: &[(&str, &Tensor)]) -> Result<()> {
    let mut w = BundleWriter::new(prefix);
    for (name, t) in tensors {
        w.add(name, t)?;
    }
    w.finish()
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

#[cfg(test)]
mod tests {
    use super::super::crc32c::unmask;
    use super::super::reader::{decode_strings, parse_raw};
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
            if k == b"w" {
                e.shape = Some(shape_to_proto(&Shape::known(&[1 << 20, 1 << 20])));
                e.size = 4 << 40;
            }
            table.add(k, &e.encode_to_vec()).unwrap();
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
