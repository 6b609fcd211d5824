//! TFRecord framing: the container format of TensorBoard event files, of
//! TensorFlow Serving's warmup requests and of `TFRecordDataset` files. Each
//! record is
//!
//! ```text
//! u64   length of data, little-endian
//! u32   masked CRC-32C of those 8 length bytes, little-endian
//! [u8]  data
//! u32   masked CRC-32C of the data, little-endian
//! ```
//!
//! [`read_records`] checks both CRCs and reports a corrupt or truncated record as
//! `DataLoss`, as TensorFlow's `RecordReader` does.

use graph::{Result, Status};

use crate::cpu::checkpoint::crc32c::{crc32c, mask};

/// The masked CRC-32C of `data`, as TFRecord stores it.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    mask(crc32c(data))
}

/// Bytes of framing before a record's data.
pub const HEADER_LEN: usize = 12;
/// Bytes of framing after a record's data.
pub const FOOTER_LEN: usize = 4;

/// Appends one framed record holding `data` to `out`.
pub fn write_record(out: &mut Vec<u8>, data: &[u8]) {
    let len = (data.len() as u64).to_le_bytes();
    out.reserve(HEADER_LEN + data.len() + FOOTER_LEN);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
}

/// One framed record holding `data`.
pub fn encode_record(data: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    write_record(&mut v, data);
    v
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// Splits `bytes` into the data of its records, checking the framing: a record
/// cut short, a length CRC or a data CRC that does not match is `DataLoss`
/// naming the record's byte offset.
pub fn read_records(bytes: &[u8]) -> Result<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < HEADER_LEN {
            return Err(Status::data_loss(format!(
                "truncated record at {pos}: {} bytes of a {HEADER_LEN}-byte header",
                rest.len()
            )));
        }
        let (len_bytes, crc_bytes) = (&rest[..8], &rest[8..HEADER_LEN]);
        if masked_crc32c(len_bytes) != le_u32(crc_bytes) {
            return Err(Status::data_loss(format!(
                "corrupted record at {pos}: length CRC mismatch"
            )));
        }
        let mut l = [0u8; 8];
        l.copy_from_slice(len_bytes);
        let len = u64::from_le_bytes(l);
        let avail = (rest.len() - HEADER_LEN) as u64;
        if len.saturating_add(FOOTER_LEN as u64) > avail {
            return Err(Status::data_loss(format!(
                "truncated record at {pos}: {len} data bytes announced, {} bytes left",
                avail.saturating_sub(FOOTER_LEN as u64)
            )));
        }
        let len = len as usize;
        let data = &rest[HEADER_LEN..HEADER_LEN + len];
        let crc = le_u32(&rest[HEADER_LEN + len..]);
        if masked_crc32c(data) != crc {
            return Err(Status::data_loss(format!(
                "corrupted record at {pos}: data CRC mismatch"
            )));
        }
        out.push(data);
        pos += HEADER_LEN + len + FOOTER_LEN;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::Code;

    #[test]
    fn records_round_trip() {
        let mut buf = Vec::new();
        write_record(&mut buf, b"hello");
        write_record(&mut buf, b"");
        write_record(&mut buf, &[7u8; 300]);
        assert_eq!(buf.len(), 3 * (HEADER_LEN + FOOTER_LEN) + 305);
        let recs = read_records(&buf).unwrap();
        assert_eq!(recs, vec![&b"hello"[..], &b""[..], &[7u8; 300][..]]);
        assert!(read_records(&[]).unwrap().is_empty());
    }

    #[test]
    fn damage_is_data_loss() {
        let buf = encode_record(b"payload");
        for cut in 1..buf.len() {
            let e = read_records(&buf[..cut]).unwrap_err();
            assert_eq!(e.code(), Code::DataLoss, "cut at {cut}");
        }
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            let e = read_records(&bad).unwrap_err();
            assert_eq!(e.code(), Code::DataLoss, "flip at {i}");
        }
        // A huge announced length with a valid length CRC is truncation, not a panic.
        let mut huge = Vec::new();
        let len = u64::MAX.to_le_bytes();
        huge.extend_from_slice(&len);
        huge.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
        assert!(read_records(&huge)
            .unwrap_err()
            .message()
            .contains("truncated"));
    }
}
