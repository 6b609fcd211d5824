//! Tensors saved as slices (TensorFlow's partitioned variables) in a tensor
//! bundle, as TensorFlow's `BundleWriter::AddSlice` and
//! `BundleReader::GetSliceValue` lay them out:
//!
//! - the full tensor's entry, under its name, has its dtype and full shape and
//!   lists the slices saved (`BundleEntryProto.slices`, in the order added) but
//!   no bytes of its own;
//! - each slice is an ordinary entry under the key
//!   [`encode_tensor_name_slice`] makes of the name and the slice (TensorFlow's
//!   `EncodeTensorNameSlice`: [`ordered_code`](super::ordered_code) fields, so
//!   every slice key starts with a zero byte and sorts before every name).
//!
//! A read of any part of the tensor ([`covering_slices`], TensorFlow's
//! `TensorSliceSet::QueryMeta`) takes the stored slice equal to it when there is
//! one, else every stored slice that meets it, provided that together they
//! cover it; [`copy_intersection`] moves each one's share into place. The
//! stored slices of one tensor never overlap ([`check_stored_slices`]).
//!
//! [`TensorSlice`] itself (the text form `"0,4:-"`, intersection, shapes) is
//! the graph crate's, next to the ops whose `shape_and_slices` it parses.

use graph::ops::checkpoint::{Extent, TensorSlice};
use graph::proto::tf::tensor_slice_proto::extent::HasLength;
use graph::proto::tf::tensor_slice_proto::Extent as ExtentProto;
use graph::proto::tf::TensorSliceProto;
use graph::TensorShape;

use super::ordered_code::{
    read_num_increasing, read_signed_num_increasing, read_string, write_num_increasing,
    write_signed_num_increasing, write_string,
};

/// The `TensorSliceProto` of a slice (TensorFlow's `AsProto`): an empty extent
/// for a full dimension, else its start and length.
pub fn slice_to_proto(slice: &TensorSlice) -> TensorSliceProto {
    TensorSliceProto {
        extent: slice
            .extents()
            .iter()
            .map(|e| match *e {
                Extent::Full => ExtentProto::default(),
                Extent::Range { start, length } => ExtentProto {
                    start: start as i64,
                    has_length: Some(HasLength::Length(length as i64)),
                },
            })
            .collect(),
    }
}

/// The slice a `TensorSliceProto` describes (TensorFlow's `BuildTensorSlice`:
/// an extent without a length, or with length -1, starting at 0 is the full
/// dimension), or why it is malformed.
pub fn slice_from_proto(p: &TensorSliceProto) -> Result<TensorSlice, String> {
    let extents = p
        .extent
        .iter()
        .map(|e| {
            let length = match e.has_length {
                Some(HasLength::Length(l)) => l,
                None => -1,
            };
            if e.start == 0 && length == -1 {
                Ok(Extent::Full)
            } else {
                TensorSlice::check_range(e.start, length)
            }
        })
        .collect::<Result<Vec<_>, String>>()?;
    TensorSlice::new(extents).map_err(|s| s.message().to_owned())
}

/// The key a slice of the tensor `name` is stored under (TensorFlow's
/// `EncodeTensorNameSlice`): the number 0, the name, the rank, then each
/// dimension's start and length as signed numbers (0 and -1 for a full one).
pub fn encode_tensor_name_slice(name: &str, slice: &TensorSlice) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 8 + 4 * slice.rank());
    write_num_increasing(&mut key, 0);
    write_string(&mut key, name.as_bytes());
    write_num_increasing(&mut key, slice.rank() as u64);
    for e in slice.extents() {
        let (start, length) = match *e {
            Extent::Full => (0, -1),
            Extent::Range { start, length } => (start as i64, length as i64),
        };
        write_signed_num_increasing(&mut key, start);
        write_signed_num_increasing(&mut key, length);
    }
    key
}

/// The tensor name and slice a slice key encodes (TensorFlow's
/// `DecodeTensorNameSlice`), or `None` when `key` is not one.
pub fn decode_tensor_name_slice(key: &[u8]) -> Option<(Vec<u8>, TensorSlice)> {
    let mut src = key;
    if read_num_increasing(&mut src)? != 0 {
        return None;
    }
    let name = read_string(&mut src)?;
    let rank = read_num_increasing(&mut src)?;
    if rank == 0 || rank > graph::shape::MAX_RANK as u64 {
        return None;
    }
    let mut extents = Vec::with_capacity(rank as usize);
    for _ in 0..rank {
        let start = read_signed_num_increasing(&mut src)?;
        let length = read_signed_num_increasing(&mut src)?;
        extents.push(if length < 0 {
            Extent::Full
        } else {
            TensorSlice::check_range(start, length).ok()?
        });
    }
    if !src.is_empty() {
        return None;
    }
    Some((name, TensorSlice::new(extents).ok()?))
}

/// Checks the stored slices of a tensor of `shape` as TensorFlow's
/// `RegisterTensorSlice` does: each fits the shape and none overlaps another.
/// Returns why not.
pub fn check_stored_slices(shape: &TensorShape, slices: &[TensorSlice]) -> Result<(), String> {
    for (i, s) in slices.iter().enumerate() {
        s.slice_shape(shape)
            .map_err(|e| format!("slice {s}: {}", e.message()))?;
        if let Some(other) = slices[..i].iter().find(|o| o.intersect(s).is_some()) {
            return Err(format!(
                "Overlapping slices: existing slice = {other}, new slice = {s}"
            ));
        }
    }
    Ok(())
}

/// The elements of `slice` of a tensor of `shape` (which it fits).
fn elements(shape: &TensorShape, slice: &TensorSlice) -> u128 {
    slice
        .bounds(shape)
        .iter()
        .map(|(a, b)| (b - a) as u128)
        .product()
}

/// Which of the `stored` slices (checked by [`check_stored_slices`]) supply
/// `want` (which fits `shape`), as indices into `stored`: the one equal to it
/// when stored, else every one that meets it if together they cover it
/// (TensorFlow's `QueryMeta`). `None` when they do not cover it.
pub fn covering_slices(
    shape: &TensorShape,
    stored: &[TensorSlice],
    want: &TensorSlice,
) -> Option<Vec<usize>> {
    if let Some(i) = stored.iter().position(|s| s == want) {
        return Some(vec![i]);
    }
    let mut covered = 0u128;
    let mut out = Vec::new();
    for (i, s) in stored.iter().enumerate() {
        if let Some(common) = want.intersect(s) {
            covered += elements(shape, &common);
            out.push(i);
        }
    }
    // The stored slices do not overlap, so their shares add up.
    (covered == elements(shape, want)).then_some(out)
}

/// Copies the part that `src_slice` and `dst_slice` (slices of a tensor of
/// `shape`, which both fit) have in common from `src` (the elements of
/// `src_slice`, row-major) into `dst` (those of `dst_slice`), `unit` items per
/// element (a dtype's bytes, or 1 for strings). TensorFlow's
/// `CopyDataFromTensorSliceToTensorSlice`. Returns false, copying nothing,
/// when they do not meet or a buffer is shorter than its slice.
pub fn copy_intersection<T: Clone>(
    shape: &TensorShape,
    src_slice: &TensorSlice,
    src: &[T],
    dst_slice: &TensorSlice,
    dst: &mut [T],
    unit: usize,
) -> bool {
    let Some(common) = src_slice.intersect(dst_slice) else {
        return false;
    };
    let (sb, db, cb) = (
        src_slice.bounds(shape),
        dst_slice.bounds(shape),
        common.bounds(shape),
    );
    let len = |b: &[(usize, usize)]| b.iter().map(|(a, e)| e - a).collect::<Vec<_>>();
    let (sd, dd, cd) = (len(&sb), len(&db), len(&cb));
    let count = |d: &[usize]| d.iter().product::<usize>() * unit;
    if src.len() < count(&sd) || dst.len() < count(&dd) {
        return false;
    }
    let rank = cd.len();
    if cd.contains(&0) {
        return true;
    }
    if rank == 0 {
        dst[..unit].clone_from_slice(&src[..unit]);
        return true;
    }
    // Row-major strides, in items.
    let strides = |d: &[usize]| {
        let mut s = vec![unit; d.len()];
        for i in (0..d.len() - 1).rev() {
            s[i] = s[i + 1] * d[i + 1];
        }
        s
    };
    let (ss, ds) = (strides(&sd), strides(&dd));
    // The innermost dimensions that both slices and their common part take
    // whole are one contiguous run with the dimension outside them.
    let mut k = rank - 1;
    while k > 0 && cd[k] == sd[k] && cd[k] == dd[k] {
        k -= 1;
    }
    let run = cd[k..].iter().product::<usize>() * unit;
    // An odometer over dimensions 0..=k, the run starting at each position.
    let mut idx: Vec<usize> = cb[..=k].iter().map(|b| b.0).collect();
    loop {
        let mut s_off = 0;
        let mut d_off = 0;
        for d in 0..=k {
            s_off += (idx[d] - sb[d].0) * ss[d];
            d_off += (idx[d] - db[d].0) * ds[d];
        }
        dst[d_off..d_off + run].clone_from_slice(&src[s_off..s_off + run]);
        // Dimension k moves by whole runs, so the odometer starts above it.
        let mut d = k;
        loop {
            if d == 0 {
                return true;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < cb[d].1 {
                break;
            }
            idx[d] = cb[d].0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sl(s: &str) -> TensorSlice {
        TensorSlice::parse(s).unwrap()
    }

    #[test]
    fn slice_keys_are_tensorflows() {
        // The key TensorFlow 2.21 wrote for rows 0..4 of the [10, 4] "part" in
        // tests/fixtures/bundle/tf_sliced.index.
        let key = encode_tensor_name_slice("part", &sl("0,4:0,4"));
        assert_eq!(key, b"\x00part\x00\x01\x01\x02\x80\x84\x80\x84".to_vec());
        let full = encode_tensor_name_slice("a\x00b", &sl("-:5,100"));
        assert_eq!(
            full,
            b"\x00a\x00\xffb\x00\x01\x01\x02\x80\x7f\x85\xc0\x64".to_vec()
        );
        for (name, s) in [
            ("part", "0,4:0,4"),
            ("a\x00b", "-:5,100"),
            ("x", "1000000,3"),
        ] {
            let key = encode_tensor_name_slice(name, &sl(s));
            let (n, back) = decode_tensor_name_slice(&key).unwrap();
            assert_eq!((n.as_slice(), back), (name.as_bytes(), sl(s)));
        }
        assert_eq!(decode_tensor_name_slice(b"part"), None);
        let mut long = encode_tensor_name_slice("part", &sl("0,4"));
        long.push(0);
        assert_eq!(decode_tensor_name_slice(&long), None);
    }

    #[test]
    fn protos_round_trip_and_damage_is_refused() {
        for s in ["0,4:-", "-:-", "3,1:0,2:-"] {
            assert_eq!(slice_from_proto(&slice_to_proto(&sl(s))).unwrap(), sl(s));
        }
        let p = slice_to_proto(&sl("0,4:-"));
        assert_eq!(p.extent[1], ExtentProto::default());
        assert_eq!(p.extent[0].has_length, Some(HasLength::Length(4)));
        for (start, has_length) in [
            (-1, Some(HasLength::Length(2))),
            (0, Some(HasLength::Length(0))),
            (3, None),
            (i64::MAX, Some(HasLength::Length(1))),
        ] {
            let bad = TensorSliceProto {
                extent: vec![ExtentProto { start, has_length }],
            };
            assert!(slice_from_proto(&bad).is_err(), "{start} {has_length:?}");
        }
    }

    #[test]
    fn covering_slices_follow_query_meta() {
        let shape = TensorShape::new(&[10, 4]);
        let stored = [sl("0,4:0,4"), sl("4,3:0,4"), sl("7,3:0,4")];
        check_stored_slices(&shape, &stored).unwrap();
        assert_eq!(
            covering_slices(&shape, &stored, &sl("4,3:0,4")),
            Some(vec![1])
        );
        assert_eq!(
            covering_slices(&shape, &stored, &TensorSlice::full(2)),
            Some(vec![0, 1, 2])
        );
        assert_eq!(
            covering_slices(&shape, &stored, &sl("2,3:1,2")),
            Some(vec![0, 1])
        );
        assert_eq!(covering_slices(&shape, &stored[..2], &sl("6,2:-")), None);
        let e = check_stored_slices(&shape, &[sl("0,5:-"), sl("4,3:-")]).unwrap_err();
        assert!(e.contains("Overlapping slices"), "{e}");
        assert!(check_stored_slices(&shape, &[sl("8,3:-")]).is_err());
        assert!(check_stored_slices(&shape, &[sl("-")]).is_err());
    }

    #[test]
    fn copies_land_where_tensorflows_do() {
        let shape = TensorShape::new(&[4, 3, 2]);
        // Two items per element (as a dtype's bytes are): element e is [e, e].
        let full: Vec<u32> = (0..24).flat_map(|v| [v, v]).collect();
        let all = TensorSlice::full(3);
        for spec in ["1,2:-:-", "-:1,2:1,1", "3,1:0,3:0,2", "0,4:2,1:-", "-:-:-"] {
            let s = sl(spec);
            let b = s.bounds(&shape);
            let mut want = Vec::new();
            for i in b[0].0..b[0].1 {
                for j in b[1].0..b[1].1 {
                    for k in b[2].0..b[2].1 {
                        let e = ((i * 3 + j) * 2 + k) as u32;
                        want.extend([e, e]);
                    }
                }
            }
            let mut part = vec![0u32; want.len()];
            assert!(copy_intersection(&shape, &all, &full, &s, &mut part, 2));
            assert_eq!(part, want, "{spec}");
            // And back into a tensor of zeros: only the slice's elements land.
            let mut back = vec![0u32; 48];
            assert!(copy_intersection(&shape, &s, &part, &all, &mut back, 2));
            for (i, (&got, &orig)) in back.iter().zip(&full).enumerate() {
                let e = i / 2;
                let at = [e / 6, e / 2 % 3, e % 2];
                let inside = at.iter().zip(&b).all(|(v, r)| r.0 <= *v && *v < r.1);
                assert_eq!(got, if inside { orig } else { 0 }, "{spec} at {i}");
            }
        }
        // Disjoint slices copy nothing; short buffers are refused.
        let mut dst = vec![0u8; 6];
        assert!(!copy_intersection(
            &shape,
            &sl("0,1:-:-"),
            &[1u8; 6],
            &sl("1,1:-:-"),
            &mut dst,
            1
        ));
        assert!(!copy_intersection(
            &shape,
            &all,
            &[1u8; 5],
            &sl("1,1:-:-"),
            &mut dst,
            1
        ));
        assert_eq!(dst, [0; 6]);
    }
}
