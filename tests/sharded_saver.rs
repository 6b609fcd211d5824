//! The graph TensorFlow 2.21's `Saver(sharded=True)` builds for variables on two
//! devices (`fixtures/saver/sharded.pbtxt`, made by
//! `tf_interop/make_sharded_saver_fixture.py`): a save writes one shard per
//! device under `<prefix>_temp/` and `MergeV2Checkpoints` merges them into
//! `<prefix>.index` + `.data-0000{0,1}-of-00002`; the restore op reads them back.

use std::path::Path;

use actorflow::kernels::cpu::checkpoint::CheckpointReader;
use actorflow::{GraphDef, Session, SessionOptions, Tensor};

fn fixture() -> GraphDef {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/saver/sharded.pbtxt");
    GraphDef::from_file(p).unwrap()
}

fn session(g: &GraphDef) -> Session {
    Session::new(g, SessionOptions::default().with_cpu_devices(2)).unwrap()
}

#[test]
fn tensorflows_sharded_saver_graph_saves_two_shards_and_restores() {
    let g = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("ckpt/model.ckpt");
    let prefix_str = prefix.display().to_string();
    let sess = session(&g);
    sess.run(&[], &[], &["init"]).unwrap();
    let out = sess
        .run(
            &[("save/Const:0", Tensor::string_scalar(prefix_str.clone()))],
            &["save/Identity:0"],
            &[],
        )
        .unwrap();
    assert_eq!(out[0], Tensor::string_scalar(prefix_str.clone()));
    let mut files: Vec<String> = std::fs::read_dir(tmp.path().join("ckpt"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    // The shards' temporary directory is gone; two data shards, one index.
    assert_eq!(
        files,
        [
            "model.ckpt.data-00000-of-00002",
            "model.ckpt.data-00001-of-00002",
            "model.ckpt.index"
        ]
    );
    let r = CheckpointReader::open(&prefix).unwrap();
    assert_eq!(r.tensor("a").unwrap(), Tensor::vector(&[1.0f32, 2.0, 3.0]));
    assert_eq!(
        r.tensor("b").unwrap(),
        Tensor::new(&[2, 2], vec![7i64, 8, 9, 10]).unwrap()
    );

    // A fresh session (uninitialised variables) restores both.
    let fresh = session(&g);
    fresh
        .run(
            &[("save/Const:0", Tensor::string_scalar(prefix_str))],
            &[],
            &["save/restore_all"],
        )
        .unwrap();
    let v = fresh.run(&[], &["a:0", "b:0"], &[]).unwrap();
    assert_eq!(v[0], Tensor::vector(&[1.0f32, 2.0, 3.0]));
    assert_eq!(v[1], Tensor::new(&[2, 2], vec![7i64, 8, 9, 10]).unwrap());
}
