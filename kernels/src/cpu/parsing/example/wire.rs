//! TensorFlow's fast `tf.Example` wire parser (`example_proto_fast_parsing.cc`),
//! byte for byte: it accepts and refuses exactly what TensorFlow's does, which is
//! not quite what a generic protobuf decoder does.
//!
//! - An `Example` may be several concatenated ones; unknown fields of `Example` are
//!   skipped (groups refused), but `Features` holds only map entries, and an entry
//!   is exactly two fields (key and value, either order, a repeated one replacing
//!   the first).
//! - A `Feature`'s kind is its first byte (`bytes_list` 10, `float_list` 18,
//!   `int64_list` 26); an empty `Feature` has no kind; anything after the first list
//!   is ignored.
//! - A float or int64 list is either packed (one packed field, after which the rest
//!   is ignored) or unpacked, as its first tag says.
//! - Limits behave as protobuf's `CodedInputStream::PushLimit`: a length past the
//!   enclosing limit (or of 2^31 or more) leaves the enclosing limit in force.
//!
//! Values go to a `Values` sink: a growable buffer, or a fixed slot of a dense
//! output (`Slot`, TensorFlow's `LimitedArraySlice`) that counts what does not fit
//! (so the caller can report the real count) and refuses a string that does not.
//! Nothing here allocates more than the input can justify.

use bytes::Bytes;

const BYTES_LIST: u8 = 10; // field 1, length-delimited
const FLOAT_LIST: u8 = 18; // field 2, length-delimited
const INT64_LIST: u8 = 26; // field 3, length-delimited
const PACKED: u8 = 10; // field 1, length-delimited
const FIXED32: u8 = 13; // field 1, fixed32
const VARINT: u8 = 8; // field 1, varint

/// A read position in a buffer, bounded by a limit: protobuf's `CodedInputStream`
/// over an array. Invariant: `pos <= limit <= buf.len()`.
struct Stream<'a> {
    buf: &'a [u8],
    pos: usize,
    limit: usize,
}

impl<'a> Stream<'a> {
    fn new(buf: &'a [u8]) -> Stream<'a> {
        Stream {
            buf,
            pos: 0,
            limit: buf.len(),
        }
    }

    /// `ExpectAtEnd`: at the current limit.
    fn at_end(&self) -> bool {
        self.pos >= self.limit
    }

    fn available(&self) -> usize {
        self.limit - self.pos
    }

    /// Consumes `tag` (one byte) if it comes next.
    fn expect_tag(&mut self, tag: u8) -> bool {
        if self.pos < self.limit && self.buf[self.pos] == tag {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// The next byte, or 0 at the limit.
    fn peek(&self) -> u8 {
        if self.pos < self.limit {
            self.buf[self.pos]
        } else {
            0
        }
    }

    /// A varint of at most 10 bytes, bits past 64 dropped.
    fn read_varint64(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            if self.pos >= self.limit {
                return None;
            }
            let b = self.buf[self.pos];
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// A varint of at most 10 bytes, truncated to 32 bits (`ReadVarint32`).
    fn read_varint32(&mut self) -> Option<u32> {
        self.read_varint64().map(|v| v as u32)
    }

    /// `ReadTag`: the next tag, or 0 at the limit or for a malformed one.
    fn read_tag(&mut self) -> u32 {
        if self.at_end() {
            return 0;
        }
        self.read_varint32().unwrap_or(0)
    }

    fn read_raw(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.available() {
            return None;
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }

    fn read_le32(&mut self) -> Option<u32> {
        let b = self.read_raw(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `Skip`: advances `n` bytes, or to the limit (returning false) when fewer remain;
    /// a count of 2^31 or more does nothing and fails.
    fn skip(&mut self, n: u32) -> bool {
        if n > i32::MAX as u32 {
            return false;
        }
        let n = n as usize;
        if n <= self.available() {
            self.pos += n;
            true
        } else {
            self.pos = self.limit;
            false
        }
    }

    /// `PushLimit`: limits reads to the next `len` bytes, unless that reaches past
    /// the current limit; returns the limit to restore.
    fn push_limit(&mut self, len: u32) -> usize {
        let old = self.limit;
        if len <= i32::MAX as u32 && (len as usize) < self.available() {
            self.limit = self.pos + len as usize;
        }
        old
    }

    fn pop_limit(&mut self, old: usize) {
        self.limit = old;
    }

    /// `ParseString`: a length-prefixed run of bytes.
    fn read_string(&mut self) -> Option<&'a [u8]> {
        let len = self.read_varint32()?;
        if len == 0 {
            return Some(&[]);
        }
        if self.at_end() {
            return None;
        }
        self.read_raw(usize::try_from(len).ok()?)
    }

    /// `SkipExtraneousTag`: skips one unknown field.
    fn skip_field(&mut self) -> bool {
        match self.read_tag() & 7 {
            0 => self.read_varint32().is_some(),
            1 => self.read_raw(8).is_some(),
            2 => match self.read_varint32() {
                Some(n) => {
                    self.skip(n);
                    true
                }
                None => false,
            },
            5 => self.read_le32().is_some(),
            _ => false,
        }
    }
}

/// One entry of an example's feature map: the key and the serialized `Feature`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FeatureEntry<'a> {
    /// The feature's key.
    pub name: &'a [u8],
    /// The serialized `Feature` message.
    pub feature: &'a [u8],
}

/// Parses a serialized `Example` into its feature map entries, in wire order
/// (duplicates included: TensorFlow lets the last win), appended to `out`;
/// false for a malformed one.
pub(crate) fn parse_example<'a>(serialized: &'a [u8], out: &mut Vec<FeatureEntry<'a>>) -> bool {
    let mut s = Stream::new(serialized);
    while !s.at_end() {
        if !s.expect_tag(10) {
            if !s.skip_field() {
                return false;
            }
        } else if !parse_features(&mut s, out) {
            return false;
        }
    }
    true
}

fn parse_features<'a>(s: &mut Stream<'a>, out: &mut Vec<FeatureEntry<'a>>) -> bool {
    let Some(len) = s.read_varint32() else {
        return false;
    };
    let old = s.push_limit(len);
    while !s.at_end() {
        if !s.expect_tag(10) {
            return false;
        }
        match parse_map_entry(s) {
            Some(e) => out.push(e),
            None => return false,
        }
    }
    s.pop_limit(old);
    true
}

fn parse_map_entry<'a>(s: &mut Stream<'a>) -> Option<FeatureEntry<'a>> {
    let len = s.read_varint32()?;
    let old = s.push_limit(len);
    let mut e = FeatureEntry {
        name: &[],
        feature: &[],
    };
    for _ in 0..2 {
        match s.read_tag() {
            10 => e.name = s.read_string()?,
            18 => e.feature = s.read_string()?,
            _ => return None,
        }
    }
    if !s.at_end() {
        return None;
    }
    s.pop_limit(old);
    Some(e)
}

/// The kind of a `Feature`: which list it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No list (an empty `Feature`): TensorFlow treats the feature as absent.
    None,
    /// `bytes_list`.
    Bytes,
    /// `float_list`.
    Float,
    /// `int64_list`.
    Int64,
}

/// The kind of a serialized `Feature` and its list (what follows the kind byte);
/// `None` for a first byte that is no list ("Unsupported datatype.").
pub(crate) fn feature_kind(feature: &[u8]) -> Option<(Kind, &[u8])> {
    let Some((&tag, list)) = feature.split_first() else {
        return Some((Kind::None, feature));
    };
    let kind = match tag {
        BYTES_LIST => Kind::Bytes,
        FLOAT_LIST => Kind::Float,
        INT64_LIST => Kind::Int64,
        _ => return None,
    };
    Some((kind, list))
}

/// Where a list's values go.
pub(crate) trait Values<T> {
    /// `push_back`: appends `v`; a full slot only counts it.
    fn push(&mut self, v: T);
    /// `construct_at_end`: appends `v`, or false when a slot is full.
    fn try_push(&mut self, v: T) -> bool;
    /// How many of `n` more values would be stored (all, for a buffer).
    fn room(&self, n: usize) -> usize;
    /// `resize(size() + n)`: makes room for `n` more values, counting them all,
    /// and returns the stored part of the new room (`room(n)` elements, zeroed).
    fn grow(&mut self, n: usize) -> &mut [T];
}

impl<T: Default + Clone> Values<T> for Vec<T> {
    fn push(&mut self, v: T) {
        Vec::push(self, v);
    }

    fn try_push(&mut self, v: T) -> bool {
        Vec::push(self, v);
        true
    }

    fn room(&self, n: usize) -> usize {
        n
    }

    fn grow(&mut self, n: usize) -> &mut [T] {
        let start = self.len();
        self.resize(start + n, T::default());
        &mut self[start..]
    }
}

/// A fixed slot of a dense output (TensorFlow's `LimitedArraySlice`): holds
/// `out.len()` values and counts any beyond. Invariant: the first
/// `min(count, out.len())` elements of `out` are written.
pub(crate) struct Slot<'s, T> {
    out: &'s mut [T],
    count: usize,
}

impl<'s, T> Slot<'s, T> {
    pub(crate) fn new(out: &'s mut [T]) -> Slot<'s, T> {
        Slot { out, count: 0 }
    }

    /// How many values the list had (possibly more than the slot holds).
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// True when the list filled the slot exactly (`EndDistance() == 0`).
    pub(crate) fn is_full(&self) -> bool {
        self.count == self.out.len()
    }
}

impl<T> Values<T> for Slot<'_, T> {
    fn push(&mut self, v: T) {
        if let Some(x) = self.out.get_mut(self.count) {
            *x = v;
        }
        self.count = self.count.saturating_add(1);
    }

    fn try_push(&mut self, v: T) -> bool {
        match self.out.get_mut(self.count) {
            Some(x) => {
                *x = v;
                self.count += 1;
                true
            }
            None => false,
        }
    }

    fn room(&self, n: usize) -> usize {
        n.min(self.out.len().saturating_sub(self.count))
    }

    fn grow(&mut self, n: usize) -> &mut [T] {
        let start = self.count.min(self.out.len());
        let end = start.saturating_add(n).min(self.out.len());
        self.count = start.saturating_add(n);
        &mut self.out[start..end]
    }
}

/// `raw` as a slice of `base` when it lies in it (always, for lists parsed out of
/// `base`), else a copy.
fn sub_bytes(base: &Bytes, raw: &[u8]) -> Bytes {
    if raw.is_empty() {
        return Bytes::new();
    }
    let offset = (raw.as_ptr() as usize).checked_sub(base.as_ptr() as usize);
    match offset {
        Some(o)
            if o.checked_add(raw.len())
                .is_some_and(|end| end <= base.len()) =>
        {
            base.slice(o..o + raw.len())
        }
        _ => Bytes::copy_from_slice(raw),
    }
}

/// Parses a `bytes_list` (the list after the kind byte) into `out`, each value a
/// slice of `base` (which `list` lies in); false when malformed or a slot is full.
pub(crate) fn parse_bytes_list(list: &[u8], base: &Bytes, out: &mut impl Values<Bytes>) -> bool {
    let mut s = Stream::new(list);
    let Some(len) = s.read_varint32() else {
        return false;
    };
    let old = s.push_limit(len);
    while !s.at_end() {
        if !s.expect_tag(10) {
            return false;
        }
        let Some(n) = s.read_varint32() else {
            return false;
        };
        if n > i32::MAX as u32 {
            return false;
        }
        let Some(raw) = s.read_raw(n as usize) else {
            return false;
        };
        if !out.try_push(sub_bytes(base, raw)) {
            return false;
        }
    }
    s.pop_limit(old);
    true
}

/// Parses a `float_list` into `out`; false when malformed.
pub(crate) fn parse_float_list(list: &[u8], out: &mut impl Values<f32>) -> bool {
    let mut s = Stream::new(list);
    let Some(len) = s.read_varint32() else {
        return false;
    };
    let old = s.push_limit(len);
    if !s.at_end() {
        match s.peek() {
            PACKED => {
                s.expect_tag(PACKED);
                let Some(packed_len) = s.read_varint32() else {
                    return false;
                };
                // TensorFlow counts packed_len / 4 values and copies those that fit
                // from the packed bytes (which must be there); a trailing partial
                // value and anything after the packed field are ignored.
                let n = packed_len as usize / 4;
                let stored = out.room(n);
                let Some(raw) = s.read_raw(stored * 4) else {
                    return false;
                };
                for (x, b) in out.grow(n).iter_mut().zip(raw.chunks_exact(4)) {
                    *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            FIXED32 => {
                let region = out.grow(s.available() / 5);
                let mut i = 0;
                while !s.at_end() {
                    if !s.expect_tag(FIXED32) {
                        return false;
                    }
                    let Some(bits) = s.read_le32() else {
                        return false;
                    };
                    if let Some(x) = region.get_mut(i) {
                        *x = f32::from_bits(bits);
                    }
                    i += 1;
                }
            }
            _ => return false,
        }
    }
    s.pop_limit(old);
    true
}

/// Parses an `int64_list` into `out`; false when malformed.
pub(crate) fn parse_int64_list(list: &[u8], out: &mut impl Values<i64>) -> bool {
    let mut s = Stream::new(list);
    let Some(len) = s.read_varint32() else {
        return false;
    };
    let old = s.push_limit(len);
    if !s.at_end() {
        match s.peek() {
            PACKED => {
                s.expect_tag(PACKED);
                let Some(packed_len) = s.read_varint32() else {
                    return false;
                };
                let packed_old = s.push_limit(packed_len);
                while !s.at_end() {
                    match s.read_varint64() {
                        Some(v) => out.push(v as i64),
                        None => return false,
                    }
                }
                s.pop_limit(packed_old);
            }
            VARINT => {
                while !s.at_end() {
                    if !s.expect_tag(VARINT) {
                        return false;
                    }
                    match s.read_varint64() {
                        Some(v) => out.push(v as i64),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    s.pop_limit(old);
    true
}
