//! TensorFlow's tensor bundle, against checkpoints TensorFlow 2.21 wrote
//! (`fixtures/bundle/`, made by `tests/tf_interop/make_bundle_fixture.py` at the
//! workspace root):
//!
//! - `tf_basic.*`: every tensor reads back with the values the script saved, and
//!   writing the same tensors in the same order gives TensorFlow's files byte
//!   for byte;
//! - `tf_sliced.*`: what TensorFlow's `Saver` saves for a variable partitioned
//!   into 3 slices and one that is not (the script records its requests and the
//!   values in `tf_sliced.json`): the whole tensors and any slice read back,
//!   `RestoreV2` with the Saver's specs restores each partition, and `SaveV2`
//!   with the Saver's specs writes TensorFlow's files byte for byte. Damaged
//!   slice metadata is `DataLoss`, a slice the stored ones do not cover
//!   `InvalidArgument`.

use std::path::{Path, PathBuf};

use actorflow_kernels::cpu::checkpoint::bundle::{
    data_path, index_path, write_bundle, BundleWriter, CheckpointReader,
};
use actorflow_kernels::cpu::checkpoint::slice::encode_tensor_name_slice;
use actorflow_kernels::cpu::checkpoint::table::{read_table, TableBuilder};
use actorflow_kernels::testutil::run_node;
use graph::ops::checkpoint::TensorSlice;
use graph::proto::tf::BundleEntryProto;
use graph::{bf16, f16, Code, DType, NodeDef, Tensor, TensorShape};
use prost::Message;

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

fn sliced_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundle/tf_sliced")
}

/// What the script recorded in `tf_sliced.json`.
struct SlicedRecord {
    json: serde_json::Value,
}

impl SlicedRecord {
    fn load() -> SlicedRecord {
        let text = std::fs::read_to_string(sliced_fixture().with_extension("json")).unwrap();
        SlicedRecord {
            json: serde_json::from_str(&text).unwrap(),
        }
    }

    fn strings(&self, op: &str, field: &str) -> Vec<String> {
        self.json[op][field]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    fn f32_tensor(v: &serde_json::Value) -> Tensor {
        let shape: Vec<usize> = v["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let values: Vec<f32> = v["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        Tensor::new(&shape, values).unwrap()
    }

    /// A variable's full value as TensorFlow's checkpoint reader assembled it.
    fn tensor(&self, name: &str) -> Tensor {
        Self::f32_tensor(&self.json["tensors"][name])
    }

    /// (name, spec, value) of each slice TensorFlow's RestoreV2 read.
    fn slice_reads(&self) -> Vec<(String, String, Tensor)> {
        self.json["slice_reads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_owned(),
                    r["spec"].as_str().unwrap().to_owned(),
                    Self::f32_tensor(r),
                )
            })
            .collect()
    }
}

fn strings(v: &[String]) -> Tensor {
    Tensor::from_strings(&[v.len()], v.to_vec()).unwrap()
}

fn restore_node(n: usize) -> NodeDef {
    NodeDef::new("restore", "RestoreV2")
        .with_input("p")
        .with_input("n")
        .with_input("s")
        .with_attr("dtypes", vec![DType::F32; n])
}

fn save_node(n: usize) -> NodeDef {
    let mut node = NodeDef::new("save", "SaveV2")
        .with_input("p")
        .with_input("n")
        .with_input("s")
        .with_attr("dtypes", vec![DType::F32; n]);
    for i in 0..n {
        node = node.with_input(format!("t{i}"));
    }
    node
}

/// The part `spec` (a TensorFlow slice) of `t`, cut by hand.
fn cut(t: &Tensor, spec: &str) -> Tensor {
    let slice = TensorSlice::parse(spec).unwrap();
    let b = slice.bounds(t.shape());
    let v = t.as_slice::<f32>().unwrap();
    let cols = t.dims()[1];
    let mut out = Vec::new();
    for r in b[0].0..b[0].1 {
        out.extend_from_slice(&v[r * cols + b[1].0..r * cols + b[1].1]);
    }
    Tensor::new(&[b[0].1 - b[0].0, b[1].1 - b[1].0], out).unwrap()
}

#[test]
fn reads_tensorflows_partitioned_variable_whole_and_in_slices() {
    let rec = SlicedRecord::load();
    let r = CheckpointReader::open(sliced_fixture()).unwrap();
    // The slices' own entries are not tensors of their own.
    let listed: Vec<(String, Vec<usize>)> = r
        .tensors()
        .map(|i| (i.name.clone(), i.shape.dims().to_vec()))
        .collect();
    assert_eq!(
        listed,
        [
            ("part".to_owned(), vec![10, 4]),
            ("plain".to_owned(), vec![3])
        ]
    );
    let slices: Vec<String> = r
        .saved_slices("part")
        .unwrap()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(slices, ["0,4:0,4", "4,3:0,4", "7,3:0,4"]);
    assert_eq!(r.saved_slices("plain"), None);
    for name in ["part", "plain"] {
        assert_eq!(r.tensor(name).unwrap(), rec.tensor(name), "{name}");
    }
    for (name, spec, want) in rec.slice_reads() {
        let slice = TensorSlice::parse(spec.rsplit(' ').next().unwrap()).unwrap();
        assert_eq!(
            r.tensor_slice(&name, &slice).unwrap(),
            want,
            "{name} {spec}"
        );
    }
    // A slice outside the tensor, or of another rank.
    for bad in ["8,3:-", "-"] {
        let e = r
            .tensor_slice("part", &TensorSlice::parse(bad).unwrap())
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad}: {e}");
    }
}

#[test]
fn restore_v2_restores_each_partition_with_the_savers_specs() {
    let rec = SlicedRecord::load();
    let prefix = Tensor::string_scalar(sliced_fixture().display().to_string());
    let names = rec.strings("restore", "tensor_names");
    let specs = rec.strings("restore", "shape_and_slices");
    let out = run_node(
        restore_node(names.len()),
        vec![prefix.clone(), strings(&names), strings(&specs)],
    )
    .unwrap();
    let part = rec.tensor("part");
    assert_eq!(out[0], cut(&part, "0,4:0,4"));
    assert_eq!(out[1], cut(&part, "4,3:0,4"));
    assert_eq!(out[2], cut(&part, "7,3:0,4"));
    assert_eq!(out[3], rec.tensor("plain"));
    // Every slice TensorFlow read, in one RestoreV2.
    let reads = rec.slice_reads();
    let names: Vec<String> = reads.iter().map(|r| r.0.clone()).collect();
    let specs: Vec<String> = reads.iter().map(|r| r.1.clone()).collect();
    let out = run_node(
        restore_node(reads.len()),
        vec![prefix.clone(), strings(&names), strings(&specs)],
    )
    .unwrap();
    for (got, (name, spec, want)) in out.iter().zip(&reads) {
        assert_eq!(got, want, "{name} {spec}");
    }
    // A spec whose full shape is not the stored one, and a malformed spec.
    for (spec, why) in [
        (
            "10 5 0,4:0,4",
            "does not match the shape stored in checkpoint: [10,4]",
        ),
        ("10 4 0,4", "Mismatching ranks"),
        ("10 4 0,4:x", "Expected a pair of numbers"),
    ] {
        let e = run_node(
            restore_node(1),
            vec![
                prefix.clone(),
                strings(&["part".to_owned()]),
                strings(&[spec.to_owned()]),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{spec}: {e}");
        assert!(e.message().contains(why), "{spec}: {e}");
    }
}

#[test]
fn save_v2_with_the_savers_specs_writes_tensorflows_bytes() {
    let rec = SlicedRecord::load();
    let names = rec.strings("save", "tensor_names");
    let specs = rec.strings("save", "shape_and_slices");
    let part = rec.tensor("part");
    let tmp = tempfile::tempdir().unwrap();
    let ours = tmp.path().join("ours");
    let mut inputs = vec![
        Tensor::string_scalar(ours.display().to_string()),
        strings(&names),
        strings(&specs),
    ];
    for (name, spec) in names.iter().zip(&specs) {
        inputs.push(if spec.is_empty() {
            rec.tensor(name)
        } else {
            cut(&part, spec.rsplit(' ').next().unwrap())
        });
    }
    run_node(save_node(names.len()), inputs).unwrap();
    let read = |p: PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(
        read(data_path(&ours, 0, 1)),
        read(data_path(&sliced_fixture(), 0, 1)),
        "data"
    );
    assert_eq!(
        read(index_path(&ours)),
        read(index_path(&sliced_fixture())),
        "index"
    );
}

#[test]
fn sliced_saves_round_trip_in_any_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("sliced");
    // A [4, 6] tensor in four column and row blocks, added out of order; a
    // string tensor in two slices; a whole tensor beside them.
    let full = Tensor::new(&[4, 6], (0..24).map(|i| i as f32).collect()).unwrap();
    let blocks = ["2,2:0,3", "0,2:3,3", "0,2:0,3", "2,2:3,3"];
    let parts: Vec<Tensor> = blocks.iter().map(|b| cut(&full, b)).collect();
    let words = Tensor::from_strings(&[3], vec!["a", "", "long word"]).unwrap();
    let (w0, w1) = (
        Tensor::from_strings(&[1], vec!["a"]).unwrap(),
        Tensor::from_strings(&[2], vec!["", "long word"]).unwrap(),
    );
    let whole = Tensor::scalar(7i64);
    let shape = TensorShape::new(&[4, 6]);
    let mut w = BundleWriter::new(&prefix);
    for (b, t) in blocks.iter().zip(&parts) {
        w.add_slice("m", &shape, &TensorSlice::parse(b).unwrap(), t)
            .unwrap();
    }
    let wshape = TensorShape::new(&[3]);
    w.add_slice("words", &wshape, &TensorSlice::parse("1,2").unwrap(), &w1)
        .unwrap();
    w.add_slice("words", &wshape, &TensorSlice::parse("0,1").unwrap(), &w0)
        .unwrap();
    w.add("step", &whole).unwrap();
    // A slice that is the whole tensor is the whole tensor.
    let v = Tensor::vector(&[1.0f32, 2.0]);
    w.add_slice(
        "v",
        &TensorShape::new(&[2]),
        &TensorSlice::parse("0,2").unwrap(),
        &v,
    )
    .unwrap();
    w.finish().unwrap();
    let r = CheckpointReader::open(&prefix).unwrap();
    let names: Vec<&str> = r.tensors().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["m", "step", "v", "words"]);
    assert_eq!(r.saved_slices("v"), None);
    assert_eq!(r.tensor("m").unwrap(), full);
    assert_eq!(r.tensor("words").unwrap(), words);
    assert_eq!(r.tensor("step").unwrap(), whole);
    assert_eq!(r.tensor("v").unwrap(), v);
    for spec in ["1,2:2,3", "0,4:5,1", "3,1:-", "-:0,6", "2,2:3,3"] {
        let s = TensorSlice::parse(spec).unwrap();
        assert_eq!(r.tensor_slice("m", &s).unwrap(), cut(&full, spec), "{spec}");
    }
    let s = TensorSlice::parse("1,2").unwrap();
    assert_eq!(r.tensor_slice("words", &s).unwrap(), w1);
    let s = TensorSlice::parse("0,2").unwrap();
    assert_eq!(
        r.tensor_slice("words", &s).unwrap(),
        Tensor::from_strings(&[2], vec!["a", ""]).unwrap()
    );
    // Slices of a tensor saved whole.
    let s = TensorSlice::parse("1,1").unwrap();
    assert_eq!(r.tensor_slice("v", &s).unwrap(), Tensor::vector(&[2.0f32]));

    // Requests that cannot make a bundle: refused before any file is written.
    let bad = tmp.path().join("bad");
    let mut w = BundleWriter::new(&bad);
    let one = |spec: &str| TensorSlice::parse(spec).unwrap();
    w.add_slice("m", &shape, &one("0,2:0,3"), &parts[2])
        .unwrap();
    for (what, e) in [
        (
            "overlap",
            w.add_slice("m", &shape, &one("1,2:0,3"), &parts[0]),
        ),
        (
            "shape",
            w.add_slice("m", &shape, &one("0,1:0,3"), &parts[0]),
        ),
        (
            "full shape",
            w.add_slice("m", &TensorShape::new(&[4, 7]), &one("2,2:0,3"), &parts[0]),
        ),
        ("whole after slice", w.add("m", &whole)),
        (
            "outside",
            w.add_slice("x", &shape, &one("3,2:0,3"), &parts[0]),
        ),
    ] {
        let e = e.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{what}: {e}");
    }
    w.add("n", &whole).unwrap();
    let e = w
        .add_slice("n", &shape, &one("0,2:0,3"), &parts[0])
        .unwrap_err();
    assert!(e.message().contains("duplicate key"), "{e}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
    // Slices that do not cover what is asked.
    w.finish().unwrap();
    let r = CheckpointReader::open(&bad).unwrap();
    let e = r.tensor("m").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message().contains("Does not have sufficient slices"),
        "{e}"
    );
    assert_eq!(
        r.tensor_slice("m", &one("1,1:1,2")).unwrap(),
        cut(&full, "1,1:1,2")
    );
}

/// Rewrites the fixture's index through `edit` (key, entry) into a bundle at
/// `dir/damaged` that shares the fixture's data.
fn damaged(dir: &Path, edit: impl Fn(&[u8], &mut BundleEntryProto) -> bool) -> PathBuf {
    let src = sliced_fixture();
    let dest = dir.join("damaged");
    std::fs::copy(data_path(&src, 0, 1), data_path(&dest, 0, 1)).unwrap();
    let index = std::fs::read(index_path(&src)).unwrap();
    let entries = read_table(&index_path(&src), &index).unwrap();
    let mut t = TableBuilder::new();
    for (k, v) in entries {
        if k.is_empty() {
            t.add(&k, &v).unwrap();
            continue;
        }
        let mut e = BundleEntryProto::decode(v.as_slice()).unwrap();
        if edit(&k, &mut e) {
            t.add(&k, &e.encode_to_vec()).unwrap();
        }
    }
    std::fs::write(index_path(&dest), t.finish()).unwrap();
    dest
}

#[test]
fn damaged_slice_metadata_is_data_loss() {
    use graph::proto::tf::tensor_slice_proto::extent::HasLength;
    let tmp = tempfile::tempdir().unwrap();
    let is_slice = |k: &[u8]| k.first() == Some(&0);
    type Edit = Box<dyn Fn(&[u8], &mut BundleEntryProto) -> bool>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "a zero-length extent",
            Box::new(|k, e| {
                if k == b"part" {
                    e.slices[0].extent[0].has_length = Some(HasLength::Length(0));
                }
                true
            }),
        ),
        (
            "overlapping slices",
            Box::new(|k, e| {
                if k == b"part" {
                    e.slices[1].extent[0].start = 3;
                }
                true
            }),
        ),
        (
            "a slice past the shape",
            Box::new(|k, e| {
                if k == b"part" {
                    e.slices[2].extent[0].has_length = Some(HasLength::Length(4));
                }
                true
            }),
        ),
        (
            "a slice of another rank",
            Box::new(|k, e| {
                if k == b"part" {
                    e.slices[2].extent.pop();
                }
                true
            }),
        ),
        (
            "a listed slice missing",
            Box::new(|k, _| {
                k != encode_tensor_name_slice("part", &TensorSlice::parse("4,3:0,4").unwrap())
            }),
        ),
        (
            "a slice stored with another shape",
            Box::new(move |k, e| {
                if is_slice(k) {
                    e.shape.as_mut().unwrap().dim[0].size = 2;
                }
                true
            }),
        ),
        (
            "a slice stored with another dtype",
            Box::new(move |k, e| {
                if is_slice(k) {
                    e.dtype = DType::F64.tf_enum();
                }
                true
            }),
        ),
    ];
    for (what, edit) in cases {
        let p = damaged(tmp.path(), edit);
        let e = CheckpointReader::open(&p).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{what}: {e}");
        assert!(e.message().contains("damaged.index"), "{what}: {e}");
        assert!(e.message().contains("'part'"), "{what}: {e}");
    }
    // A slice's checksum is checked when it is read.
    let p = damaged(tmp.path(), |k, e| {
        if is_slice(k) {
            e.crc32c ^= 1;
        }
        true
    });
    let r = CheckpointReader::open(&p).unwrap();
    let e = r.tensor("part").unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert_eq!(
        r.tensor("plain").unwrap(),
        SlicedRecord::load().tensor("plain")
    );
    // A slice no tensor lists is left out; slices that do not cover a read
    // are InvalidArgument.
    let p = damaged(tmp.path(), |k, e| {
        if k == b"part" {
            e.slices.remove(1);
        }
        true
    });
    let r = CheckpointReader::open(&p).unwrap();
    assert_eq!(r.tensors().count(), 2);
    let e = r.tensor("part").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let top = TensorSlice::parse("0,4:0,4").unwrap();
    assert_eq!(r.tensor_slice("part", &top).unwrap().dims(), [4, 4]);
}
