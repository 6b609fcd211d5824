//! The checkpoint format and kernels: bit-exact round trips, every kind of damage
//! as `DataLoss`, and the kernels' errors.

use std::path::Path;

use graph::{bf16, f16, Code, DType, NodeDef, Tensor};

use crate::cpu::checkpoint::bundle::{
    data_path, index_path, read_index, write_bundle, CheckpointReader,
};
use crate::cpu::checkpoint::table;
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

fn write(prefix: &Path, tensors: &[(&str, Tensor)]) {
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    write_bundle(prefix, &refs).unwrap();
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
    // the index lists them sorted by name, and read_index agrees with the reader
    let names: Vec<&str> = r.tensors().map(|i| i.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let index = read_index(&p).unwrap();
    assert_eq!(index, r.tensors().cloned().collect::<Vec<_>>());
    assert_eq!(r.tensor("nope").unwrap_err().code(), Code::NotFound);
}

#[test]
fn index_damage_is_data_loss_naming_the_file() {
    let tmp = scratch("damage");
    let d = tmp.path();
    let p = d.join("ckpt");
    write(&p, &samples());
    let index = index_path(&p);
    let good = std::fs::read(&index).unwrap();
    let check = |bytes: &[u8], what: &str| {
        std::fs::write(&index, bytes).unwrap();
        match CheckpointReader::open(&p) {
            Err(e) => {
                assert_eq!(e.code(), Code::DataLoss, "{what}: {e}");
                assert!(e.message().contains(".index"), "{what}: {e}");
            }
            Ok(_) => panic!("{what}: damage went unnoticed"),
        }
    };
    for cut in [0, 1, 8, good.len() / 2, good.len() - 8, good.len() - 1] {
        check(&good[..cut], &format!("cut at {cut}"));
    }
    // Every bit flip in the blocks and the footer's handles and magic is caught
    // (the footer's zero padding carries nothing).
    let footer = good.len() - table::FOOTER_LEN;
    for i in (0..footer).chain(good.len() - 8..good.len()) {
        let mut b = good.clone();
        b[i] ^= 1 << (i % 8);
        check(&b, &format!("flip at {i}"));
    }
    std::fs::write(
        &index,
        "hello, this is just some text file of words\n".repeat(3),
    )
    .unwrap();
    let e = CheckpointReader::open(&p).unwrap_err();
    assert!(e.message().contains("bad magic"), "{e}");
    let e = CheckpointReader::open(d.join("missing")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[test]
fn a_newer_version_or_byte_order_is_unimplemented_not_corruption() {
    use graph::proto::tf::{BundleHeaderProto, VersionDef};
    use prost::Message;
    let tmp = scratch("version");
    let p = tmp.path().join("ckpt");
    for header in [
        BundleHeaderProto {
            num_shards: 1,
            endianness: 0,
            version: Some(VersionDef {
                producer: 3,
                min_consumer: 2,
                ..Default::default()
            }),
        },
        BundleHeaderProto {
            num_shards: 1,
            endianness: 1,
            version: Some(VersionDef {
                producer: 1,
                ..Default::default()
            }),
        },
    ] {
        let mut t = table::TableBuilder::new();
        t.add(b"", &header.encode_to_vec()).unwrap();
        std::fs::write(index_path(&p), t.finish()).unwrap();
        let e = CheckpointReader::open(&p).unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{e}");
        assert_eq!(read_index(&p).unwrap_err().code(), Code::Unimplemented);
    }
}

#[test]
fn invalid_requests_write_nothing() {
    let tmp = scratch("invalid");
    let p = tmp.path().join("ckpt");
    let t = Tensor::scalar(1.0f32);
    let e = write_bundle(&p, &[("a", &t), ("a", &t)]).unwrap_err();
    assert!(e.message().contains("duplicate key"), "{e}");
    let e = write_bundle(&p, &[("", &t)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
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
    assert!(
        e.message()
            .contains("does not match the shape stored in checkpoint: [4,3]"),
        "{e}"
    );
    // saving twice under one name, or a tensor that is not its slice's shape,
    // is refused and keeps the files
    let before = (
        std::fs::read(index_path(&p)).unwrap(),
        std::fs::read(data_path(&p, 0, 1)).unwrap(),
    );
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
            strings(&["8 3 0,3:-"]),
            w.clone(),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("does not match the shape"), "{e}");
    assert_eq!(
        (
            std::fs::read(index_path(&p)).unwrap(),
            std::fs::read(data_path(&p, 0, 1)).unwrap()
        ),
        before
    );
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
    // The data shard holds the tensors in the order saved: the last is
    // "scope/nested/name", which a cut end damages.
    let data = data_path(&p, 0, 1);
    let mut b = std::fs::read(&data).unwrap();
    b.truncate(b.len() - 3);
    std::fs::write(&data, &b).unwrap();
    let e = run_node(
        restore_node(&[DType::F64]),
        vec![
            Tensor::string_scalar(p.display().to_string()),
            strings(&["scope/nested/name"]),
            strings(&[""]),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert!(e.message().contains(&data.display().to_string()), "{e}");
}

#[test]
fn large_saves_and_restores_take_the_parallel_paths_and_stay_exact() {
    // 18 MiB of numbers: checksummed on a second thread, flushed to disk in
    // the background as the file grows, and restored in parallel.
    let tmp = scratch("large");
    let p = tmp.path().join("big");
    let big = Tensor::build::<f32>([3 << 20], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i % 1009) as f32 * 0.5 - 7.0)
    });
    let bytes = Tensor::build::<u8>([6 << 20], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i * 31 % 251) as u8)
    });
    let words = strings(&["between", "the", "big", "ones"]);
    write(
        &p,
        &[
            ("big", big.clone()),
            ("words", words.clone()),
            ("bytes", bytes.clone()),
        ],
    );
    let len = std::fs::metadata(data_path(&p, 0, 1)).unwrap().len();
    assert!(len > crate::cpu::checkpoint::atomic::SYNC_EVERY, "{len}");
    let out = run_node(
        restore_node(&[DType::U8, DType::String, DType::F32]),
        vec![
            Tensor::string_scalar(p.display().to_string()),
            strings(&["bytes", "words", "big"]),
            strings(&["", "", ""]),
        ],
    )
    .unwrap();
    assert!(same_bits(&out[0], &bytes));
    assert_eq!(out[1], words);
    assert!(same_bits(&out[2], &big));
    // Every byte is where the format says: the data file is the tensors back
    // to back.
    let data = std::fs::read(data_path(&p, 0, 1)).unwrap();
    let n = big.byte_size();
    assert_eq!(&data[..n], big.as_bytes().unwrap());
    assert_eq!(
        &data[data.len() - bytes.byte_size()..],
        bytes.as_bytes().unwrap()
    );
}
