//! Checkpoints: the `SaveV2`/`RestoreV2` kernels and TensorFlow's checkpoint V2
//! format, the tensor bundle, read and written byte for byte as TensorFlow does.
//!
//! - [`bundle`] — a bundle at a prefix `p` is `p.index` (a sorted string table of
//!   tensor names to dtype, shape, place and checksum) and `p.data-00000-of-00001`
//!   (the tensors' bytes); see its docs for the layout. Writing: [`BundleWriter`].
//! - [`reader`] — [`CheckpointReader`]: a bundle's index, and its tensors whole
//!   or in part.
//! - [`slice`](mod@slice) — tensors saved as slices (partitioned variables): the slice
//!   keys, which stored slices make up a part, and copying between slices.
//! - [`ordered_code`] — TensorFlow's order-preserving encoding that slice keys
//!   are made of.
//! - [`merge`] — merging the bundles of a sharded save.
//! - [`table`] — the sorted string table of the index (LevelDB's layout).
//! - [`crc32c`] — the checksum and its masking.
//! - [`atomic`] — replacing a file atomically (temp file, fsync, rename, fsync
//!   of the directory).
//! - [`save_restore`] — the kernels.
//!
//! A reader checks the index's block checksums and its header's version when it
//! opens a bundle, and each tensor's size and checksum when it reads it. Any
//! failure is `DataLoss` naming the file (and the tensor); a missing bundle is
//! `NotFound`; a newer version or another byte order is `Unimplemented`.
//!
//! Each file is replaced atomically, the data shard before the index, so a crash
//! during a save leaves the previous bundle at that prefix (or none) and at most
//! stray `.<name>.tmp-…` files ([`atomic::remove_stale_temporaries`] deletes
//! those of dead writers).

pub mod atomic;
pub mod bundle;
pub mod crc32c;
pub mod merge;
pub mod ordered_code;
pub mod reader;
pub mod save_restore;
pub mod slice;
pub mod table;

#[cfg(test)]
mod tests;

pub use bundle::{write_bundle, BundleWriter, TensorInfo};
pub use reader::{read_index, CheckpointReader};
pub use save_restore::register_all_kernels;
