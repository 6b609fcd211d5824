//! The checkpoint format and kernels: bit-exact round trips, every kind of damage
//! as `DataLoss`, and the kernels' errors.

use std::path::Path;

use graph::{bf16, f16, Code, DType, NodeDef, Tensor};

use crate::cpu::checkpoint::atomic::write_atomically;
use crate::cpu::checkpoint::format::{
    read_index, read_index_from, reseal, write_checkpoint, CheckpointReader, HEADER_LEN,
};
use crate::testutil::run_node;

/// An empty directory of its own, removed when the guard drops (a panic too).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("actorflow-ckpt-{name}-"))
        .tempdir()
        .unwrap()
}

fn samples() -> Vec<(&'static str, Tensor)> {
    vec![
        (
            "w",
            Tensor::new(
                &[2, 3],
                vec![1.5f32, -2.0, 3.25, f32::MIN_POSITIVE, -0.0, 7.0],
            )
            .unwrap(),
        ),
        ("nan", Tensor::vector(&[f64::NAN, f64::INFINITY, -1e300])),
        ("step", Tensor::scalar(123_456_789_012i64)),
        ("mask", Tensor::vector(&[true, false, true])),
        (
            "bytes",
            Tensor::new(&[2, 2], vec![0u8, 255, 7, 128]).unwrap(),
        ),
        (
            "half",
            Tensor::vector(&[f16::from_f32(1.5), f16::from_f32(-3.0)]),
        ),
        ("brain", Tensor::vector(&[bf16::from_f32(0.25)])),
        ("i32", Tensor::scalar(-7i32)),
        ("empty", Tensor::new(&[0, 3], Vec::<f32>::new()).unwrap()),
        (
            "words",
            Tensor::from_strings(&[3], vec!["", "héllo", "a\0b"]).unwrap(),
        ),
        ("scope/nested/name", Tensor::scalar(0.5f64)),
    ]
}

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype()
        && a.shape() == b.shape()
        && if a.dtype() == DType::String {
            a.as_strings().unwrap() == b.as_strings().unwrap()
        } else {
            a.as_bytes().unwrap() == b.as_bytes().unwrap()
        }
}

fn write(path: &Path, tensors: &[(&str, Tensor)]) {
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    write_atomically(path, true, |w| write_checkpoint(w, &refs)).unwrap();
}

#[test]
fn round_trip_is_bit_exact() {
    let tmp = scratch("roundtrip");
    let d = tmp.path();
    let p = d.join("model.ckpt-1");
    let tensors = samples();
    write(&p, &tensors);
    let r = CheckpointReader::open(&p).unwrap();
    for (name, t) in &tensors {
        let back = r.tensor(name).unwrap();
        assert!(same_bits(&back, t), "{name}: {back:?} != {t:?}");
    }
    // records are sorted by name, and the index agrees with the reader
    let names: Vec<&str> = r.tensors().map(|i| i.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let index = read_index(&p).unwrap();
    assert_eq!(index, r.tensors().cloned().collect::<Vec<_>>());
    assert_eq!(r.tensor("nope").unwrap_err().code(), Code::NotFound);
    // the same tensors in another order give the same bytes
    let q = d.join("again");
    let mut rev = samples();
    rev.reverse();
    write(&q, &rev);
    assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&q).unwrap());
}

#[test]
fn truncation_and_bit_flips_are_data_loss() {
    let tmp = scratch("damage");
    let d = tmp.path();
    let p = d.join("ckpt");
    write(&p, &samples());
    let good = std::fs::read(&p).unwrap();
    let bad = d.join("bad");
    let check = |bytes: &[u8], what: &str| {
        std::fs::write(&bad, bytes).unwrap();
        let e = CheckpointReader::open(&bad).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{what}: {e}");
        assert!(
            e.message().contains(&bad.display().to_string()),
            "{what}: {e}"
        );
    };
    for cut in [
        0,
        1,
        8,
        23,
        24,
        40,
        good.len() / 2,
        good.len() - 21,
        good.len() - 1,
    ] {
        check(&good[..cut], &format!("cut at {cut}"));
    }
    // every single bit flip anywhere is caught (a sample of bits per byte)
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 1 << (i % 8);
        check(&b, &format!("flip at {i}"));
    }
    // a damaged record names its tensor
    let at = good
        .windows(5)
        .position(|w| w == b"words")
        .expect("the name is in the file");
    let mut b = good.clone();
    b[at + 40] ^= 0x40;
    std::fs::write(&bad, &b).unwrap();
    let e = CheckpointReader::open(&bad).unwrap_err();
    assert!(e.message().contains("'words'"), "{e}");
    // appended garbage is caught too
    let mut b = good.clone();
    b.extend_from_slice(b"junk");
    check(&b, "appended");
    // not a checkpoint at all
    std::fs::write(&bad, b"hello, this is just some text file of words").unwrap();
    let e = CheckpointReader::open(&bad).unwrap_err();
    assert!(e.message().contains("not an actorflow checkpoint"), "{e}");
    let e = CheckpointReader::open(d.join("missing")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[test]
fn a_newer_version_is_unimplemented_not_corruption() {
    let tmp = scratch("version");
    let d = tmp.path();
    let p = d.join("ckpt");
    write(&p, &samples()[..2]);
    let mut b = std::fs::read(&p).unwrap();
    b[8] = 2;
    // recompute the file checksum as a version-2 writer would have
    let n = b.len() - 20;
    let crc = crate::cpu::checkpoint::crc32c::crc32c(&b[..n]);
    b[n + 8..n + 12].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let e = CheckpointReader::open(&p).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e}");
    assert_eq!(read_index(&p).unwrap_err().code(), Code::Unimplemented);
    // without the matching checksum the same version field is damage
    b[n + 8] ^= 1;
    std::fs::write(&p, &b).unwrap();
    assert_eq!(read_index(&p).unwrap_err().code(), Code::DataLoss);
}

/// Damage the checksums would catch first, resealed so the structural checks see
/// it: a record length near u64::MAX (an unchecked sum in `read_index` used to
/// overflow), dims whose product overflows, a huge name length. Each is
/// `DataLoss` from both readers; resealing intact bytes changes nothing.
#[test]
fn resealed_structural_damage_is_data_loss_in_both_readers() {
    let mut good = Vec::new();
    let tensors = samples();
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    write_checkpoint(&mut good, &refs).unwrap();
    let mut same = good.clone();
    reseal(&mut same);
    assert_eq!(same, good);
    let path = Path::new("mem.ckpt");
    let index = |b: &[u8]| read_index_from(path, std::io::Cursor::new(b), b.len() as u64);
    assert_eq!(index(&good).unwrap().len(), tensors.len());
    // The first record starts after the header: length, name_len, name, dtype,
    // rank, dims.
    let first = HEADER_LEN;
    let name_len = u32::from_le_bytes(good[first + 8..first + 12].try_into().unwrap()) as usize;
    let rank_at = first + 12 + name_len + 4;
    let cases: [(usize, Vec<u8>); 4] = [
        (first, (u64::MAX - 3).to_le_bytes().to_vec()),
        (first, (u64::MAX).to_le_bytes().to_vec()),
        (first + 8, u32::MAX.to_le_bytes().to_vec()),
        (rank_at, 255u32.to_le_bytes().to_vec()),
    ];
    for (at, patch) in cases {
        let mut b = good.clone();
        b[at..at + patch.len()].copy_from_slice(&patch);
        reseal(&mut b);
        let e = CheckpointReader::parse(path, b.clone().into()).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{e}");
        let e = index(&b).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{e}");
    }
}

#[test]
fn invalid_requests_write_nothing() {
    let mut sink = Vec::new();
    let t = Tensor::scalar(1.0f32);
    let e = write_checkpoint(&mut sink, &[("a", &t), ("a", &t)]).unwrap_err();
    assert!(e.message().contains("saved twice"), "{e}");
    let e = write_checkpoint(&mut sink, &[("", &t)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(sink.is_empty());
}

fn strings(v: &[&str]) -> Tensor {
    let owned: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    Tensor::from_strings(&[v.len()], owned).unwrap()
}

fn save_node(dtypes: &[DType]) -> NodeDef {
    let mut n = NodeDef::new("save", "SaveV2")
        .with_input("p")
        .with_input("n")
        .with_input("s")
        .with_attr("dtypes", dtypes.to_vec());
    for i in 0..dtypes.len() {
        n = n.with_input(format!("t{i}"));
    }
    n
}

fn restore_node(dtypes: &[DType]) -> NodeDef {
    NodeDef::new("restore", "RestoreV2")
        .with_input("p")
        .with_input("n")
        .with_input("s")
        .with_attr("dtypes", dtypes.to_vec())
}

#[test]
fn save_and_restore_kernels() {
    let tmp = scratch("kernels");
    let d = tmp.path();
    let p = d.join("sub/dir/model.ckpt");
    let prefix = Tensor::string_scalar(p.display().to_string());
    let w = Tensor::new(&[4, 3], (0..12).map(|i| i as f32).collect()).unwrap();
    let step = Tensor::scalar(42i64);
    let words = Tensor::from_strings(&[2, 2], vec!["a", "b", "c", "d"]).unwrap();
    let mut inputs = vec![
        prefix.clone(),
        strings(&["w", "step", "words"]),
        strings(&["", "", ""]),
    ];
    inputs.extend([w.clone(), step.clone(), words.clone()]);
    run_node(save_node(&[DType::F32, DType::I64, DType::String]), inputs).unwrap();
    // restore in another order, one of them as a slice
    let out = run_node(
        restore_node(&[DType::I64, DType::F32, DType::F32, DType::String]),
        vec![
            prefix.clone(),
            strings(&["step", "w", "w", "words"]),
            strings(&["", "", "4 3 1,2:0,2", "2 2 -:1,1"]),
        ],
    )
    .unwrap();
    assert_eq!(out[0], step);
    assert_eq!(out[1], w);
    assert_eq!(
        out[2],
        Tensor::new(&[2, 2], vec![3.0f32, 4.0, 6.0, 7.0]).unwrap()
    );
    assert_eq!(
        out[3],
        Tensor::from_strings(&[2, 1], vec!["b", "d"]).unwrap()
    );
    // wrong dtype, missing key, wrong full shape: clear errors naming the file
    let e = run_node(
        restore_node(&[DType::F64]),
        vec![prefix.clone(), strings(&["w"]), strings(&[""])],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("has dtype float"), "{e}");
    let e = run_node(
        restore_node(&[DType::F32]),
        vec![prefix.clone(), strings(&["v"]), strings(&[""])],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("model.ckpt"), "{e}");
    let e = run_node(
        restore_node(&[DType::F32]),
        vec![prefix.clone(), strings(&["w"]), strings(&["3 4 -:-"])],
    )
    .unwrap_err();
    assert!(e.message().contains("has shape [4,3]"), "{e}");
    // saving twice under one name, or a real slice, is refused and keeps the file
    let before = std::fs::read(&p).unwrap();
    let e = run_node(
        save_node(&[DType::F32, DType::F32]),
        vec![
            prefix.clone(),
            strings(&["w", "w"]),
            strings(&["", ""]),
            w.clone(),
            w.clone(),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = run_node(
        save_node(&[DType::F32]),
        vec![
            prefix.clone(),
            strings(&["w"]),
            strings(&["8 3 0,4:-"]),
            w.clone(),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    assert_eq!(std::fs::read(&p).unwrap(), before);
    // a full-slice spec is a whole tensor
    run_node(
        save_node(&[DType::F32]),
        vec![
            prefix.clone(),
            strings(&["w"]),
            strings(&["4 3 -:-"]),
            w.clone(),
        ],
    )
    .unwrap();
    // names and specs of the wrong length
    let e = run_node(
        restore_node(&[DType::F32]),
        vec![prefix, strings(&["w", "x"]), strings(&[""])],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

#[test]
fn restore_of_a_damaged_file_is_data_loss() {
    let tmp = scratch("kernel-damage");
    let d = tmp.path();
    let p = d.join("ckpt");
    write(&p, &samples());
    let mut b = std::fs::read(&p).unwrap();
    b.truncate(b.len() - 3);
    std::fs::write(&p, &b).unwrap();
    let e = run_node(
        restore_node(&[DType::I64]),
        vec![
            Tensor::string_scalar(p.display().to_string()),
            strings(&["step"]),
            strings(&[""]),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::DataLoss);
    assert!(e.message().contains(&p.display().to_string()), "{e}");
}
