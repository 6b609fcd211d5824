//! The sorted string table of a tensor bundle's `.index` file: LevelDB's table
//! layout, as TensorFlow's `tensorflow/core/lib/io/table_builder.cc` writes it.
//!
//! ```text
//! data block*   entries, then the restart array, then a 5-byte trailer
//! metaindex     an empty block (TensorFlow writes no filter or meta entries)
//! index         one entry per data block: a key >= the block's last key and
//!               < the next block's first, and the block's handle
//! footer        metaindex handle, index handle (varint64 offset and size each),
//!               zero-padded to 40 bytes, then the magic number (8 bytes)
//! ```
//!
//! A block entry is `varint32 shared, varint32 non_shared, varint32 value_len,
//! key[shared..], value`, where `shared` is the prefix it has in common with the
//! previous key (0 at every restart point: every 16 entries in data blocks, every
//! entry in the index). The block ends with each restart point's offset and their
//! count (fixed32 each). The trailer is the compression type (0: none, what
//! TensorFlow's bundle writer uses) and the masked CRC-32C of the block and that
//! byte.
//!
//! The reader loads every entry (an index file is small: one entry per tensor)
//! and checks every block's checksum; anything malformed is `DataLoss` naming the
//! file.
//!
//! This is hand-written rather than taken from a LevelDB crate: the bytes must be
//! TensorFlow's exactly (its separator keys, restart interval, block size and
//! trailer), and the format is a few hundred lines.

use std::path::Path;

use graph::{Result, Status};

use super::crc32c::{crc32c, extend as crc32c_extend, mask, unmask};

/// The footer's magic number (`kTableMagicNumber`).
const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// A block handle's largest encoding: two varint64s.
const MAX_HANDLE_LEN: usize = 20;
/// The footer: two padded handles and the magic number.
pub const FOOTER_LEN: usize = 2 * MAX_HANDLE_LEN + 8;
/// The trailer after each block: the compression type and a masked CRC-32C.
const TRAILER_LEN: usize = 5;
/// Data blocks are cut once they reach this size (TensorFlow's `TableOptions`).
const BLOCK_SIZE: usize = 256 * 1024;
/// Entries between restart points in data blocks.
const RESTART_INTERVAL: usize = 16;
/// No compression.
const NO_COMPRESSION: u8 = 0;
/// Snappy, which TensorFlow's table format allows but its bundle writer does not
/// use.
const SNAPPY: u8 = 1;

/// Appends `v` as a varint (7 bits a byte, low first).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint of at most `max_bytes` bytes from `buf` at `*pos`.
pub fn get_varint(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..max_bytes {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

fn fixed32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Where a block lies in the file (its size excludes the trailer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct BlockHandle {
    offset: u64,
    size: u64,
}

impl BlockHandle {
    fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.offset);
        put_varint(out, self.size);
    }

    fn decode(buf: &[u8], pos: &mut usize) -> Option<BlockHandle> {
        Some(BlockHandle {
            offset: get_varint(buf, pos, 10)?,
            size: get_varint(buf, pos, 10)?,
        })
    }
}

/// One block under construction.
struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    interval: usize,
    counter: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    fn new(interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            interval,
            counter: 0,
            last_key: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The block's size once finished.
    fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.counter += 1;
    }

    /// The finished block; the builder starts afresh.
    fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts = vec![0];
        self.counter = 0;
        self.last_key.clear();
        out
    }
}

/// Shortens `start` to a key in `[start, limit)` where one exists (LevelDB's
/// bytewise `FindShortestSeparator`).
fn shortest_separator(start: &mut Vec<u8>, limit: &[u8]) {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common >= start.len().min(limit.len()) {
        return; // one is a prefix of the other
    }
    let b = start[common];
    if b < 0xff && b + 1 < limit[common] {
        start[common] = b + 1;
        start.truncate(common + 1);
    }
}

/// Shortens `key` to a key >= it (LevelDB's bytewise `FindShortSuccessor`).
fn short_successor(key: &mut Vec<u8>) {
    if let Some(i) = key.iter().position(|&b| b != 0xff) {
        key[i] += 1;
        key.truncate(i + 1);
    }
}

/// Writes a table of sorted entries into a byte buffer.
pub struct TableBuilder {
    out: Vec<u8>,
    data: BlockBuilder,
    index: BlockBuilder,
    last_key: Vec<u8>,
    pending: Option<BlockHandle>,
    entries: usize,
}

impl Default for TableBuilder {
    fn default() -> TableBuilder {
        TableBuilder::new()
    }
}

impl TableBuilder {
    /// An empty table.
    pub fn new() -> TableBuilder {
        TableBuilder {
            out: Vec::new(),
            data: BlockBuilder::new(RESTART_INTERVAL),
            index: BlockBuilder::new(1),
            last_key: Vec::new(),
            pending: None,
            entries: 0,
        }
    }

    /// Adds an entry; keys must be added in strictly increasing byte order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.entries > 0 && key <= self.last_key.as_slice() {
            return Err(Status::internal(format!(
                "table keys out of order: {:?} after {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&self.last_key)
            )));
        }
        // An entry of twice the block size or more starts a block of its own.
        if self.entries > 0 && key.len() + value.len() >= 2 * BLOCK_SIZE {
            self.flush();
        }
        if let Some(h) = self.pending.take() {
            shortest_separator(&mut self.last_key, key);
            let mut v = Vec::new();
            h.encode(&mut v);
            self.index.add(&self.last_key, &v);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.entries += 1;
        self.data.add(key, value);
        if self.data.size_estimate() >= BLOCK_SIZE {
            self.flush();
        }
        Ok(())
    }

    fn flush(&mut self) {
        if self.data.is_empty() {
            return;
        }
        let block = self.data.finish();
        self.pending = Some(self.write_block(&block));
    }

    fn write_block(&mut self, block: &[u8]) -> BlockHandle {
        let handle = BlockHandle {
            offset: self.out.len() as u64,
            size: block.len() as u64,
        };
        self.out.extend_from_slice(block);
        let crc = crc32c_extend(crc32c(block), &[NO_COMPRESSION]);
        self.out.push(NO_COMPRESSION);
        self.out.extend_from_slice(&mask(crc).to_le_bytes());
        handle
    }

    /// The table's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.flush();
        let meta = BlockBuilder::new(RESTART_INTERVAL).finish();
        let meta_handle = self.write_block(&meta);
        if let Some(h) = self.pending.take() {
            short_successor(&mut self.last_key);
            let mut v = Vec::new();
            h.encode(&mut v);
            self.index.add(&self.last_key, &v);
        }
        let index = self.index.finish();
        let index_handle = self.write_block(&index);
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        meta_handle.encode(&mut footer);
        index_handle.encode(&mut footer);
        footer.resize(2 * MAX_HANDLE_LEN, 0);
        footer.extend_from_slice(&(MAGIC as u32).to_le_bytes());
        footer.extend_from_slice(&((MAGIC >> 32) as u32).to_le_bytes());
        self.out.extend_from_slice(&footer);
        self.out
    }
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> Status {
    Status::data_loss(format!(
        "checkpoint index {} is truncated or corrupt: {why}",
        path.display()
    ))
}

/// The checked contents of the block `h` of `file`.
fn read_block<'a>(path: &Path, file: &'a [u8], h: BlockHandle, what: &str) -> Result<&'a [u8]> {
    let start = usize::try_from(h.offset).map_err(|_| corrupt(path, "a block offset overflows"))?;
    let len = usize::try_from(h.size).map_err(|_| corrupt(path, "a block size overflows"))?;
    let end = start
        .checked_add(len)
        .and_then(|e| e.checked_add(TRAILER_LEN))
        .filter(|&e| e <= file.len())
        .ok_or_else(|| {
            corrupt(
                path,
                format!("the {what} block lies past the end of the file"),
            )
        })?;
    let block = &file[start..start + len];
    let kind = file[start + len];
    let stored = fixed32(file, start + len + 1).unwrap_or_default();
    let crc = crc32c_extend(crc32c(block), &[kind]);
    if unmask(stored) != crc {
        return Err(corrupt(
            path,
            format!("the {what} block's checksum does not match"),
        ));
    }
    debug_assert!(end <= file.len());
    match kind {
        NO_COMPRESSION => Ok(block),
        SNAPPY => Err(Status::unimplemented(format!(
            "checkpoint index {} has a snappy-compressed {what} block; TensorFlow's bundle writer does not compress, and this reader does not decompress",
            path.display()
        ))),
        k => Err(corrupt(path, format!("the {what} block has compression type {k}"))),
    }
}

/// Every entry of a block, in order.
fn block_entries(path: &Path, block: &[u8], what: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let bad = |why: &str| corrupt(path, format!("{what} block: {why}"));
    if block.len() < 4 {
        return Err(bad("shorter than its restart count"));
    }
    let restarts = fixed32(block, block.len() - 4).unwrap_or_default() as usize;
    let limit = restarts
        .checked_mul(4)
        .and_then(|r| r.checked_add(4))
        .and_then(|r| block.len().checked_sub(r))
        .ok_or_else(|| bad("its restart array does not fit"))?;
    let mut out = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut pos = 0;
    while pos < limit {
        let header = |pos: &mut usize| get_varint(&block[..limit], pos, 5);
        let (shared, non_shared, value_len) =
            match (header(&mut pos), header(&mut pos), header(&mut pos)) {
                (Some(a), Some(b), Some(c)) => (a as usize, b as usize, c as usize),
                _ => return Err(bad("an entry's header is cut off")),
            };
        if shared > key.len() {
            return Err(bad("an entry shares more than the previous key"));
        }
        let key_end = pos.checked_add(non_shared).filter(|&e| e <= limit);
        let value_end = key_end
            .and_then(|k| k.checked_add(value_len))
            .filter(|&e| e <= limit)
            .ok_or_else(|| bad("an entry runs past the block"))?;
        let key_end = key_end.unwrap_or(value_end);
        key.truncate(shared);
        key.extend_from_slice(&block[pos..key_end]);
        out.push((key.clone(), block[key_end..value_end].to_vec()));
        pos = value_end;
    }
    Ok(out)
}

/// Every entry of the table `file` (the bytes of `path`), in key order, each
/// block's checksum checked.
pub fn read_table(path: &Path, file: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if file.len() < FOOTER_LEN {
        return Err(corrupt(
            path,
            format!("only {} bytes, shorter than a footer", file.len()),
        ));
    }
    let footer = &file[file.len() - FOOTER_LEN..];
    let magic = u64::from(fixed32(footer, 40).unwrap_or_default())
        | (u64::from(fixed32(footer, 44).unwrap_or_default()) << 32);
    if magic != MAGIC {
        return Err(corrupt(path, "not a table (bad magic number)"));
    }
    let mut pos = 0;
    let handles = &footer[..2 * MAX_HANDLE_LEN];
    let meta = BlockHandle::decode(handles, &mut pos).ok_or_else(|| corrupt(path, "bad footer"))?;
    let index =
        BlockHandle::decode(handles, &mut pos).ok_or_else(|| corrupt(path, "bad footer"))?;
    // TensorFlow writes no meta entries; the block is checked all the same.
    block_entries(
        path,
        read_block(path, file, meta, "metaindex")?,
        "metaindex",
    )?;
    let index_block = read_block(path, file, index, "index")?;
    let mut out = Vec::new();
    for (_, handle) in block_entries(path, index_block, "index")? {
        let mut p = 0;
        let h = BlockHandle::decode(&handle, &mut p)
            .ok_or_else(|| corrupt(path, "an index entry is not a block handle"))?;
        let block = read_block(path, file, h, "data")?;
        out.extend(block_entries(path, block, "data")?);
    }
    if out.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(corrupt(path, "its keys are not in order"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(entries: &[(Vec<u8>, Vec<u8>)]) {
        let mut b = TableBuilder::new();
        for (k, v) in entries {
            b.add(k, v).unwrap();
        }
        let bytes = b.finish();
        assert_eq!(read_table(Path::new("t"), &bytes).unwrap(), entries);
    }

    #[test]
    fn empty_table_is_two_empty_blocks_and_a_footer() {
        let bytes = TableBuilder::new().finish();
        // metaindex (8 + 5), index (8 + 5), footer 48.
        assert_eq!(bytes.len(), 13 + 13 + 48);
        // An empty block: one restart at 0, count 1.
        assert_eq!(&bytes[..8], &[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(bytes[8], 0, "no compression");
        // Footer: metaindex at 0 size 8, index at 13 size 8, zero padding, magic.
        let f = &bytes[26..];
        assert_eq!(&f[..4], &[0, 8, 13, 8]);
        assert!(f[4..40].iter().all(|&b| b == 0));
        assert_eq!(&f[40..], &[0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb]);
        assert!(read_table(Path::new("t"), &bytes).unwrap().is_empty());
    }

    #[test]
    fn entries_share_prefixes_and_restart_every_sixteen() {
        let entries: Vec<_> = (0..40)
            .map(|i| {
                (
                    format!("layer/{i:03}/kernel").into_bytes(),
                    vec![i as u8; i % 7],
                )
            })
            .collect();
        roundtrip(&entries);
        let mut b = BlockBuilder::new(RESTART_INTERVAL);
        b.add(b"abc", b"1");
        b.add(b"abd", b"2");
        // shared 2, non-shared 1, value 1, "d", "2".
        assert_eq!(&b.buf[7..], &[2, 1, 1, b'd', b'2']);
        let block = b.finish();
        assert_eq!(&block[block.len() - 8..], &[0, 0, 0, 0, 1, 0, 0, 0]);
    }

    #[test]
    fn large_tables_span_blocks_with_separator_keys() {
        // ~1 MiB of values: several data blocks.
        let entries: Vec<_> = (0..64)
            .map(|i| (format!("v{i:04}").into_bytes(), vec![7u8; 16 * 1024 + i]))
            .collect();
        roundtrip(&entries);
    }

    #[test]
    fn separators_are_leveldbs() {
        let mut s = b"abcd".to_vec();
        shortest_separator(&mut s, b"abzz");
        assert_eq!(s, b"abd");
        let mut s = b"abc".to_vec();
        shortest_separator(&mut s, b"abcd");
        assert_eq!(s, b"abc", "a prefix is left alone");
        let mut s = b"ab\xff".to_vec();
        shortest_separator(&mut s, b"ac");
        assert_eq!(s, b"ab\xff", "ab\\xff + 1 would not be < ac");
        let mut k = b"\xff\xffa\xff".to_vec();
        short_successor(&mut k);
        assert_eq!(k, b"\xff\xffb");
        let mut k = b"\xff".to_vec();
        short_successor(&mut k);
        assert_eq!(k, b"\xff");
    }

    #[test]
    fn damage_is_data_loss_and_order_is_checked() {
        let mut b = TableBuilder::new();
        b.add(b"a", b"xyz").unwrap();
        b.add(b"b", b"uvw").unwrap();
        assert_eq!(
            b.add(b"b", b"again").unwrap_err().code(),
            graph::Code::Internal
        );
        let bytes = b.finish();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            match read_table(Path::new("t"), &bad) {
                // Padding bytes of the footer carry nothing.
                Ok(e) => assert_eq!(e.len(), 2, "byte {i}"),
                Err(e) => assert!(
                    matches!(e.code(), graph::Code::DataLoss | graph::Code::Unimplemented),
                    "byte {i}: {e}"
                ),
            }
        }
        for n in 0..bytes.len() {
            assert!(
                read_table(Path::new("t"), &bytes[..n]).is_err(),
                "truncated to {n}"
            );
        }
        assert_eq!(unmask(mask(0x1234_5678)), 0x1234_5678);
    }
}
