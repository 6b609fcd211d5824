//! TensorFlow's tensor bundle, against a checkpoint TensorFlow 2.21 wrote
//! (`fixtures/bundle/tf_basic.*`, made by `tests/tf_interop/make_bundle_fixture.py`
//! at the workspace root): every tensor reads back with the values the script
//! saved, and writing the same tensors in the same order gives TensorFlow's files
//! byte for byte.

use std::path::{Path, PathBuf};

use actorflow_kernels::cpu::checkpoint::bundle::{
    data_path, index_path, write_bundle, CheckpointReader,
};
use graph::{bf16, f16, DType, Tensor};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundle/tf_basic")
}

/// The script's tensors, in its order.
fn fixture_tensors() -> Vec<(&'static str, Tensor)> {
    let long = "x".repeat(200);
    vec![
        (
            "w",
            Tensor::new(&[2, 3], vec![1.5f32, -2.0, 3.25, 0.0, 0.125, 7.0]).unwrap(),
        ),
        ("global_step", Tensor::scalar(42i64)),
        ("mask", Tensor::vector(&[true, false, true])),
        (
            "b16",
            Tensor::vector(&[bf16::from_f32(1.5), bf16::from_f32(-0.25)]),
        ),
        (
            "names",
            Tensor::from_strings(&[3], vec!["hello".to_string(), String::new(), long]).unwrap(),
        ),
        (
            "h",
            Tensor::vector(&[f16::from_f32(0.5), f16::from_f32(-3.0)]),
        ),
        ("empty", Tensor::new::<f32>(&[0, 3], vec![]).unwrap()),
        (
            "no_strings",
            Tensor::from_strings::<String>(&[0], vec![]).unwrap(),
        ),
        ("u8", Tensor::vector(&[0u8, 1, 254, 255])),
        (
            "i32",
            Tensor::new(&[2, 2], vec![1i32, -1, i32::MAX, i32::MIN]).unwrap(),
        ),
        ("f64", Tensor::vector(&[3.5f64, -1e300])),
        ("layer/1/kernel", Tensor::vector(&[2.0f32])),
        ("layer/0/kernel", Tensor::vector(&[1.0f32])),
    ]
}

#[test]
fn reads_what_tensorflow_wrote() {
    let r = CheckpointReader::open(fixture()).unwrap();
    let mut expected = fixture_tensors();
    expected.sort_by(|a, b| a.0.cmp(b.0));
    let listed: Vec<_> = r.tensors().map(|i| i.name.clone()).collect();
    let names: Vec<_> = expected.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(listed, names);
    for (name, t) in &expected {
        let got = r.tensor(name).unwrap();
        assert_eq!(&got, t, "{name}");
        let info = r.info(name).unwrap();
        assert_eq!((info.dtype, &info.shape), (t.dtype(), t.shape()), "{name}");
    }
    assert_eq!(r.info("names").unwrap().dtype, DType::String);
}

#[test]
fn writes_what_tensorflow_writes_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("ours");
    let tensors = fixture_tensors();
    let refs: Vec<_> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    write_bundle(&prefix, &refs).unwrap();
    let read = |p: PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(
        read(data_path(&prefix, 0, 1)),
        read(data_path(&fixture(), 0, 1)),
        "data"
    );
    assert_eq!(
        read(index_path(&prefix)),
        read(index_path(&fixture())),
        "index"
    );
}
