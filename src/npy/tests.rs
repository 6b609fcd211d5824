//! `.npy` reading and writing against files numpy wrote
//! (`scripts/gen_npy_fixtures.py`, values restated here by hand).

use super::*;
use crate::Code;
use graph::f16;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../tests/fixtures/npy/", $name, ".npy")).as_slice()
    };
}

/// Files numpy wrote and the tensors they hold; the writer must reproduce them.
fn writable() -> Vec<(&'static str, &'static [u8], Tensor)> {
    let strings: Vec<&[u8]> = vec![b"hello", b"a\x00b", b""];
    vec![
        (
            "f32_2x3",
            fixture!("f32_2x3"),
            Tensor::new(&[2, 3], vec![0.0f32, 0.5, 1.0, 1.5, 2.0, 2.5]).unwrap(),
        ),
        (
            "f64_scalar",
            fixture!("f64_scalar"),
            Tensor::scalar(-2.5f64),
        ),
        (
            "f64_2x1x3",
            fixture!("f64_2x1x3"),
            Tensor::new(&[2, 1, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.5]).unwrap(),
        ),
        (
            "f16",
            fixture!("f16"),
            Tensor::vector(&[f16::from_f32(1.5), f16::from_f32(-2.0), f16::from_f32(0.25)]),
        ),
        ("i8", fixture!("i8"), Tensor::vector(&[-128i8, 127])),
        ("i16", fixture!("i16"), Tensor::vector(&[-32768i16, 7])),
        (
            "i32_2x2",
            fixture!("i32_2x2"),
            Tensor::new(&[2, 2], vec![1i32, 2, 3, 4]).unwrap(),
        ),
        (
            "i64",
            fixture!("i64"),
            Tensor::vector(&[-(1i64 << 62), 1 << 62]),
        ),
        ("u8", fixture!("u8"), Tensor::vector(&[0u8, 255])),
        ("u16", fixture!("u16"), Tensor::vector(&[65535u16, 1])),
        (
            "u32",
            fixture!("u32"),
            Tensor::vector(&[1u32, 4_000_000_000]),
        ),
        ("u64", fixture!("u64"), Tensor::vector(&[(1u64 << 63) + 5])),
        (
            "bool",
            fixture!("bool"),
            Tensor::vector(&[true, false, true]),
        ),
        (
            "bytes",
            fixture!("bytes"),
            Tensor::from_strings(&[3], strings).unwrap(),
        ),
        (
            "empty_0x4",
            fixture!("empty_0x4"),
            Tensor::zeros(DType::F32, [0usize, 4].as_slice()),
        ),
    ]
}

#[test]
fn reads_what_numpy_wrote() {
    for (name, bytes, want) in writable() {
        let got = from_npy_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
        assert_eq!(got.dims(), want.dims(), "{name}");
    }
}

#[test]
fn writes_exactly_what_numpy_writes() {
    for (name, bytes, t) in writable() {
        assert_eq!(to_npy_bytes(&t).unwrap(), bytes, "{name}");
    }
}

#[test]
fn reads_other_layouts() {
    let u = from_npy_bytes(fixture!("unicode")).unwrap();
    let want: Vec<&[u8]> = vec!["h\u{e9}llo".as_bytes(), b"x"];
    assert_eq!(u, Tensor::from_strings(&[2], want).unwrap());
    let f = from_npy_bytes(fixture!("fortran_2x3")).unwrap();
    assert_eq!(f, Tensor::new(&[2, 3], vec![0i32, 1, 2, 3, 4, 5]).unwrap());
    let b = from_npy_bytes(fixture!("big_endian")).unwrap();
    assert_eq!(b, Tensor::vector(&[0i32, 1, 2]));
    let v2 = from_npy_bytes(fixture!("v2_i32")).unwrap();
    assert_eq!(v2, Tensor::vector(&[7i32, 8, 9]));
}

#[test]
fn round_trips_every_numpy_dtype() {
    let tensors = [
        Tensor::new(&[3, 1], vec![1.0f32, -0.0, f32::INFINITY]).unwrap(),
        Tensor::scalar(7u64),
        Tensor::scalar(false),
        Tensor::new(&[1, 2, 1], vec![i16::MIN, i16::MAX]).unwrap(),
        Tensor::from_strings(
            &[2, 2],
            vec![b"a".to_vec(), vec![0, 1, 2], vec![], b"xyz".to_vec()],
        )
        .unwrap(),
        Tensor::string_scalar("only"),
    ];
    for t in tensors {
        let back = from_npy_bytes(&to_npy_bytes(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.dtype(), t.dtype());
        assert_eq!(back.dims(), t.dims());
    }
}

#[test]
fn rejects_what_it_cannot_represent() {
    let e = from_npy_bytes(fixture!("complex")).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    assert!(e.message().contains("complex"), "{e}");
    let e = from_npy_bytes(fixture!("object")).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    assert!(e.message().contains("pickle"), "{e}");
    let bf = Tensor::zeros(DType::BF16, [2usize].as_slice());
    assert_eq!(to_npy_bytes(&bf).unwrap_err().code(), Code::Unimplemented);
}

#[test]
fn rejects_malformed_files() {
    let good = fixture!("i32_2x2");
    let cases: Vec<(&str, Vec<u8>, Code, &str)> = vec![
        ("empty", vec![], Code::InvalidArgument, "magic"),
        (
            "not npy",
            b"PK\x03\x04 zip file....".to_vec(),
            Code::InvalidArgument,
            "magic",
        ),
        (
            "truncated data",
            good[..good.len() - 3].to_vec(),
            Code::DataLoss,
            "truncated",
        ),
        (
            "truncated header",
            good[..40].to_vec(),
            Code::DataLoss,
            "truncated",
        ),
        (
            "trailing bytes",
            [good, b"xx"].concat(),
            Code::InvalidArgument,
            "follow",
        ),
        (
            "bad version",
            [&good[..6], &[9u8, 0], &good[8..]].concat(),
            Code::InvalidArgument,
            "version",
        ),
    ];
    for (what, bytes, code, needle) in cases {
        let e = from_npy_bytes(&bytes).unwrap_err();
        assert_eq!(e.code(), code, "{what}: {e}");
        assert!(e.message().contains(needle), "{what}: {e}");
    }
}

/// A file with the given header dict (padded as numpy pads it) and data.
fn with_header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut b = wrap_header(dict);
    b.extend_from_slice(data);
    b
}

#[test]
fn rejects_malformed_headers() {
    let cases = [
        ("{'descr': '<f4', 'shape': (1,), }", "required"),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            "unexpected",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (a,), }",
            "shape",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
            "','",
        ),
        (
            "{'descr': '<q9', 'fortran_order': False, 'shape': (1,), }",
            "unknown dtype",
        ),
        (
            "{'descr': 4, 'fortran_order': False, 'shape': (1,), }",
            "unexpected value",
        ),
        (
            "{'descr': '<f4', 'fortran_order': 'no', 'shape': (1,), }",
            "wrong kind",
        ),
        ("[1, 2]", "'{'"),
        (
            "{'descr': '<f4', 'fortran_order': False, \
             'shape': (99999999999, 99999999999, 99999999999), }",
            "too many",
        ),
    ];
    for (dict, needle) in cases {
        let e = from_npy_bytes(&with_header(dict, &[0; 4])).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{dict}: {e}");
        assert!(e.message().contains(needle), "{dict}: {e}");
    }
}

#[test]
fn files_on_disk_name_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = dir.join("t.npy");
    write_npy(&p, &Tensor::vector(&[1u8, 2])).unwrap();
    assert_eq!(read_npy(&p).unwrap(), Tensor::vector(&[1u8, 2]));
    let e = read_npy(dir.join("missing.npy")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("missing.npy"), "{e}");
}

/// Zero-width elements take nothing from the file: a header alone must not
/// allocate or loop by its shape (a `|S0` array of 2^40 elements used to abort
/// allocating, a Fortran-ordered one to loop over every element).
#[test]
fn shapes_that_need_no_data_are_bounded_by_the_header_not_trusted() {
    let file = |descr: &str, fortran: bool, shape: &str| {
        let order = if fortran { "True" } else { "False" };
        let h = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
        wrap_header(&h)
    };
    let e = from_npy_bytes(&file("|S0", false, "(1099511627776,)")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("empty strings"), "{e}");
    let e = from_npy_bytes(&file("<U0", true, "(1048576, 1048576)")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // Small ones are arrays of empty strings, as numpy reads them.
    let t = from_npy_bytes(&file("<U0", false, "(3,)")).unwrap();
    assert_eq!(t, Tensor::from_strings(&[3], vec![""; 3]).unwrap());
    let t = from_npy_bytes(&file("|S0", true, "(2, 2)")).unwrap();
    assert_eq!(t, Tensor::from_strings(&[2, 2], vec![""; 4]).unwrap());
    // An empty Fortran array with huge other dims reorders nothing.
    let t = from_npy_bytes(&file("<f4", true, "(0, 1099511627776, 1099511627776)")).unwrap();
    assert_eq!(t.dims(), &[0, 1 << 40, 1 << 40]);
}
