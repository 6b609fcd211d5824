//! Merging the bundles of a sharded save into one, as TensorFlow's
//! `MergeBundles` (the `MergeV2Checkpoints` kernel) does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use graph::proto::tf::{BundleEntryProto, BundleHeaderProto};
use graph::{Result, Status};
use prost::Message;

use super::atomic::write_atomically;
use super::bundle::{data_path, index_path};
use super::reader::{corrupt, key_text, parse_raw};
use super::table::TableBuilder;

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
    let mut merged: BTreeMap<Vec<u8>, BundleEntryProto> = BTreeMap::new();
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
                        "Duplicate tensor keyed by {} encountered, when merging prefix: {}",
                        key_text(&key),
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
                    format!(
                        "tensor '{}': shard {} of {shards}",
                        key_text(&key),
                        e.shard_id
                    ),
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
        table.add(name, &e.encode_to_vec())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::checkpoint::bundle::write_bundle;
    use crate::cpu::checkpoint::reader::CheckpointReader;
    use graph::Tensor;

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
            .map(|(k, e)| (std::str::from_utf8(k).unwrap(), e.shard_id))
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
}
