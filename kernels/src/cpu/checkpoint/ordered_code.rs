//! TensorFlow's `OrderedCode` (`tensorflow/core/lib/strings/ordered_code.cc`):
//! encodings of numbers and strings whose byte order is their value order, so
//! that concatenated fields sort field by field. A tensor bundle keys each
//! stored slice of a partitioned tensor with them
//! ([`encode_tensor_name_slice`](super::slice::encode_tensor_name_slice)).
//!
//! - An unsigned number: one byte counting its big-endian bytes (leading zeros
//!   dropped; 0 has none), then those bytes.
//! - A string: its bytes with `0x00` written `00 FF` and `0xFF` written `FF 00`,
//!   then the terminator `00 01`.
//! - A signed number (at most 10 bytes): its two's complement, sign-extended to
//!   the shortest whole number of bytes `n` that leaves `n + 1` sign bits, whose
//!   first `n` bits are then flipped. A reader counts the leading bits that
//!   differ from the sign bit to learn `n`. One byte holds `-64..64`, two
//!   `-2^13..2^13`, and so on.

/// Appends the unsigned number `v`.
pub fn write_num_increasing(out: &mut Vec<u8>, v: u64) {
    let bytes = v.to_be_bytes();
    let skip = (v.leading_zeros() / 8) as usize;
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// Reads an unsigned number from the front of `src`, advancing it; `None` when
/// it is cut off or longer than 8 bytes.
pub fn read_num_increasing(src: &mut &[u8]) -> Option<u64> {
    let (&len, rest) = src.split_first()?;
    let len = len as usize;
    if len > 8 || rest.len() < len {
        return None;
    }
    let v = rest[..len].iter().fold(0u64, |v, &b| (v << 8) | b as u64);
    *src = &rest[len..];
    Some(v)
}

/// Appends the string `s`.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            0x00 => out.extend_from_slice(&[0x00, 0xFF]),
            0xFF => out.extend_from_slice(&[0xFF, 0x00]),
            b => out.push(b),
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Reads a string from the front of `src`, advancing it; `None` when it has no
/// terminator or an escape TensorFlow never writes.
pub fn read_string(src: &mut &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < src.len() {
        match src[i] {
            0x00 => match src.get(i + 1)? {
                0x01 => {
                    *src = &src[i + 2..];
                    return Some(out);
                }
                0xFF => out.push(0x00),
                _ => return None,
            },
            0xFF => match src.get(i + 1)? {
                0x00 => out.push(0xFF),
                _ => return None,
            },
            b => {
                out.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    None
}

/// The most bytes a signed number takes.
const MAX_SIGNED_LEN: usize = 10;

/// The bytes the signed number `v` takes: the fewest `n` whose `7n - 1` value
/// bits hold it.
fn signed_len(v: i64) -> usize {
    // The magnitude's bits, sign excluded (as TensorFlow counts them in `~v`
    // for a negative `v`).
    let x = if v < 0 { !v } else { v } as u64;
    let bits = 64 - x.leading_zeros() as usize;
    (1..=MAX_SIGNED_LEN)
        .find(|n| bits < 7 * n)
        .unwrap_or(MAX_SIGNED_LEN)
}

/// The header of an `n`-byte signed number: its first `n` bits set, in a
/// field of `8n` bits (held in the low bits of a `u128`).
fn header_bits(n: usize) -> u128 {
    ((1u128 << n) - 1) << (8 * n - n)
}

/// Appends the signed number `v`.
pub fn write_signed_num_increasing(out: &mut Vec<u8>, v: i64) {
    let n = signed_len(v);
    let field = (v as i128 as u128) & ((1u128 << (8 * n)) - 1);
    let coded = field ^ header_bits(n);
    out.extend_from_slice(&coded.to_be_bytes()[16 - n..]);
}

/// Reads a signed number from the front of `src`, advancing it; `None` when it
/// is cut off or does not fit an `i64`.
pub fn read_signed_num_increasing(src: &mut &[u8]) -> Option<i64> {
    let &first = src.first()?;
    // Flip a negative number's bits so that its length bits read as ones.
    let flip: u8 = if first & 0x80 == 0 { 0xFF } else { 0 };
    let mut n = 0;
    for &b in src.iter().take(2) {
        let ones = (b ^ flip).leading_ones() as usize;
        n += ones;
        if ones < 8 {
            break;
        }
    }
    if n == 0 || n > MAX_SIGNED_LEN || src.len() < n {
        return None;
    }
    let field = src[..n].iter().fold(0u128, |v, &b| (v << 8) | b as u128) ^ header_bits(n);
    // Sign-extend the 8n-bit field.
    let shift = 128 - 8 * n;
    let v = ((field << shift) as i128) >> shift;
    let v = i64::try_from(v).ok()?;
    *src = &src[n..];
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        write_signed_num_increasing(&mut out, v);
        out
    }

    #[test]
    fn signed_numbers_match_tensorflows_examples_and_order() {
        // The examples in ordered_code.cc, and the bytes TensorFlow 2.21 wrote
        // in the slice keys of tests/fixtures/bundle/tf_sliced.index.
        assert_eq!(signed(0x424242), [0xf0, 0x42, 0x42, 0x42]);
        assert_eq!(signed(-0x800), [0x38, 0x00]);
        assert_eq!(signed(0), [0x80]);
        assert_eq!(signed(4), [0x84]);
        assert_eq!(signed(-1), [0x7f]);
        assert_eq!(signed(63), [0xbf]);
        assert_eq!(signed(64), [0xc0, 0x40]);
        assert_eq!(signed(-64), [0x40]);
        assert_eq!(signed(-65), [0x3f, 0xbf]);
        assert_eq!(signed(i64::MAX).len(), 10);
        assert_eq!(signed(i64::MIN).len(), 10);
        let mut values: Vec<i64> = vec![i64::MIN, i64::MAX, 0, -1, 1];
        for shift in 0..63 {
            for base in [1i64 << shift, -(1i64 << shift)] {
                values.extend([base - 1, base, base + 1]);
            }
        }
        values.sort();
        values.dedup();
        let coded: Vec<Vec<u8>> = values.iter().map(|&v| signed(v)).collect();
        for (v, c) in values.iter().zip(&coded) {
            let mut src = c.as_slice();
            assert_eq!(read_signed_num_increasing(&mut src), Some(*v), "{v}");
            assert!(src.is_empty());
        }
        assert!(
            coded.windows(2).all(|w| w[0] < w[1]),
            "byte order is value order"
        );
        for cut in [&[][..], &[0xc0][..], &[0xff, 0xff, 0xff][..]] {
            let mut src = cut;
            assert_eq!(read_signed_num_increasing(&mut src), None, "{cut:?}");
        }
    }

    #[test]
    fn unsigned_numbers_and_strings_round_trip() {
        let mut out = Vec::new();
        write_num_increasing(&mut out, 0);
        write_num_increasing(&mut out, 2);
        write_num_increasing(&mut out, 0x1234);
        write_num_increasing(&mut out, u64::MAX);
        assert_eq!(&out[..6], [0x00, 0x01, 0x02, 0x02, 0x12, 0x34]);
        let mut src = out.as_slice();
        for v in [0, 2, 0x1234, u64::MAX] {
            assert_eq!(read_num_increasing(&mut src), Some(v));
        }
        assert!(src.is_empty());
        assert_eq!(read_num_increasing(&mut &[9u8, 0][..]), None);
        let mut out = Vec::new();
        write_string(&mut out, b"a\x00b\xffc");
        assert_eq!(out, b"a\x00\xffb\xff\x00c\x00\x01");
        let mut src = out.as_slice();
        assert_eq!(read_string(&mut src).as_deref(), Some(&b"a\x00b\xffc"[..]));
        assert!(src.is_empty());
        for bad in [&b"abc"[..], b"a\x00", b"a\x00\x02", b"\xff\x01"] {
            assert_eq!(read_string(&mut &bad[..]), None, "{bad:?}");
        }
    }
}
