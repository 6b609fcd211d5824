//! Checkpoints: the `SaveV2`/`RestoreV2` kernels and actorflow's checkpoint file
//! format (TensorFlow's ops and attributes, actorflow's own bytes).
//!
//! - [`format`](mod@format) — writing, reading and verifying the format below.
//! - [`crc32c`] — the checksum.
//! - [`atomic`] — replacing a file atomically (temp file, fsync, rename, fsync
//!   of the directory).
//! - [`save_restore`] — the kernels.
//!
//! # The file format (version 1)
//!
//! A checkpoint is one file at exactly the path the `prefix` input names. All
//! integers are little-endian; CRC-32C is the Castagnoli CRC (as in iSCSI and
//! TFRecord, unmasked).
//!
//! ```text
//! header   magic       8 bytes   "AFLWCKPT"
//!          version     u32       1
//!          flags       u32       0 (reserved)
//!          count       u64       number of records
//! record   length      u64       bytes in body            ┐ count times, sorted
//!          body:                                          │ by name, names unique
//!            name_len  u32                                │
//!            name      name_len bytes of UTF-8 (1..=65535)│
//!            dtype     u32       TensorFlow's DataType    │
//!                                enum (DT_FLOAT = 1, …)   │
//!            rank      u32       0..=254                  │
//!            dims      u64 × rank                         │
//!            data      the elements, row-major: POD dtypes│
//!                      as their little-endian bytes;      │
//!                      strings as (u64 length, bytes)     │
//!          crc         u32       CRC-32C of length + body ┘
//! footer   payload_len u64       bytes before the footer (header + records)
//!          file_crc    u32       CRC-32C of those bytes
//!          end magic   8 bytes   "AFLWEND\n"
//! ```
//!
//! A reader checks, in order: the magic and version, the footer's end magic and
//! recorded length (a truncated file fails here), every record's checksum (the
//! error names the damaged tensor), that each record's data fits its dtype and
//! shape, and the whole-file checksum. Any failure is `DataLoss` naming the
//! file; a missing file is `NotFound`; a newer version is `Unimplemented`.
//!
//! Files are replaced atomically, so a crash during a save leaves the previous
//! file at that path (or none) and at most a stray `.<name>.tmp-…` file
//! ([`atomic::remove_stale_temporaries`] deletes those of dead writers).

pub mod atomic;
pub mod bundle;
pub mod crc32c;
pub mod format;
pub mod save_restore;
pub mod table;

#[cfg(test)]
mod tests;

pub use format::{read_index, write_checkpoint, CheckpointReader, TensorInfo};
pub use save_restore::register_all_kernels;
