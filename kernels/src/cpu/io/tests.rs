use std::path::Path;
use std::time::Duration;

use graph::{Code, DType, NodeDef, Result, Shape, Tensor};

use crate::op_kernel::StepContext;
use crate::testutil::{run_node, run_node_in, test_device, test_step};
use crate::Entry;

/// A temporary directory of its own, removed on drop (a panicking test too).
struct TempDir(tempfile::TempDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = tempfile::Builder::new()
            .prefix(&format!("af_io_{tag}_"))
            .tempdir()
            .unwrap();
        TempDir(d)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn file(&self, name: &str, contents: &[u8]) -> String {
        let p = self.path().join(name);
        std::fs::write(&p, contents).unwrap();
        p.to_str().unwrap().to_owned()
    }
}

fn filename_queue(step: &StepContext) -> Entry {
    let q = NodeDef::new("q", "FIFOQueueV2")
        .with_attr("component_types", vec![DType::String])
        .with_attr("shapes", vec![Shape::scalar()]);
    run_node_in(step, q, vec![]).unwrap()[0].clone()
}

fn enqueue(step: &StepContext, q: &Entry, files: &[&str]) {
    let n = NodeDef::new("enq", "QueueEnqueueManyV2")
        .with_input("q")
        .with_input("x")
        .with_attr("Tcomponents", vec![DType::String]);
    let t = Tensor::from_strings(
        &[files.len()],
        files.iter().map(|s| s.to_string()).collect(),
    )
    .unwrap();
    run_node_in(step, n, vec![q.clone(), Entry::Value(t)]).unwrap();
}

fn close(step: &StepContext, q: &Entry) {
    let n = NodeDef::new("close", "QueueCloseV2").with_input("q");
    run_node_in(step, n, vec![q.clone()]).unwrap();
}

fn text_reader(step: &StepContext, name: &str, skip: i64) -> Entry {
    let n = NodeDef::new(name, "TextLineReaderV2").with_attr("skip_header_lines", skip);
    run_node_in(step, n, vec![]).unwrap()[0].clone()
}

fn read(step: &StepContext, r: &Entry, q: &Entry) -> Result<(String, String)> {
    let n = NodeDef::new("read", "ReaderReadV2")
        .with_input("r")
        .with_input("q");
    let out = run_node_in(step, n, vec![r.clone(), q.clone()])?;
    let s = |e: &Entry| {
        String::from_utf8(e.to_tensor().unwrap().as_strings().unwrap()[0].to_vec()).unwrap()
    };
    Ok((s(&out[0]), s(&out[1])))
}

fn read_up_to(step: &StepContext, r: &Entry, q: &Entry, n: i64) -> Result<Vec<(String, String)>> {
    let node = NodeDef::new("read_up_to", "ReaderReadUpToV2")
        .with_input("r")
        .with_input("q")
        .with_input("n");
    let out = run_node_in(
        step,
        node,
        vec![r.clone(), q.clone(), Entry::Value(Tensor::scalar(n))],
    )?;
    let v = |e: &Entry| -> Vec<String> {
        let t = e.to_tensor().unwrap();
        assert_eq!(t.rank(), 1);
        t.as_strings()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect()
    };
    Ok(v(&out[0]).into_iter().zip(v(&out[1])).collect())
}

fn counter(step: &StepContext, op: &str, r: &Entry) -> i64 {
    let n = NodeDef::new("count", op).with_input("r");
    run_node_in(step, n, vec![r.clone()]).unwrap()[0]
        .to_tensor()
        .unwrap()
        .scalar_value::<i64>()
        .unwrap()
}

#[test]
fn text_lines_across_files_with_headers_and_tf_keys() {
    let d = TempDir::new("lines");
    let a = d.file("a.csv", b"h1\nh2\nx\r\n\ny");
    let b = d.file("b.csv", b"only header\n");
    let c = d.file("c.csv", b"h\nz\n");
    let dev = test_device();
    let step = test_step(&dev);
    let q = filename_queue(&step);
    let r = text_reader(&step, "r", 1);
    enqueue(&step, &q, &[&a, &b, &c]);
    close(&step, &q);
    let mut got = vec![];
    let e = loop {
        match read(&step, &r, &q) {
            Ok(kv) => got.push(kv),
            Err(e) => break e,
        }
    };
    let want = [
        (format!("{a}:2"), "h2"),
        (format!("{a}:3"), "x"),
        (format!("{a}:4"), ""),
        (format!("{a}:5"), "y"),
        (format!("{c}:2"), "z"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(e.code(), Code::OutOfRange, "{e}");
    assert_eq!(counter(&step, "ReaderNumRecordsProducedV2", &r), 5);
    assert_eq!(counter(&step, "ReaderNumWorkUnitsCompletedV2", &r), 3);
    run_node_in(
        &step,
        NodeDef::new("reset", "ReaderResetV2").with_input("r"),
        vec![r.clone()],
    )
    .unwrap();
    assert_eq!(counter(&step, "ReaderNumRecordsProducedV2", &r), 0);
}

#[test]
fn fixed_length_records_with_header_footer_and_hop() {
    let d = TempDir::new("fixed");
    // header "HH", records of 3 bytes, footer "F"; the trailing "xy" is too short
    let f = d.file("r.bin", b"HHabcdefghiFxy");
    let dev = test_device();
    let step = test_step(&dev);
    let mk = |name: &str, hop: i64, footer: i64| {
        let n = NodeDef::new(name, "FixedLengthRecordReaderV2")
            .with_attr("header_bytes", 2i64)
            .with_attr("record_bytes", 3i64)
            .with_attr("footer_bytes", footer)
            .with_attr("hop_bytes", hop);
        run_node_in(&step, n, vec![]).unwrap()[0].clone()
    };
    let q = filename_queue(&step);
    enqueue(&step, &q, &[&f, &f, &f]);
    let plain = mk("plain", 0, 0);
    let got = read_up_to(&step, &plain, &q, 10).unwrap();
    let vals: Vec<&str> = got.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(vals, ["abc", "def", "ghi", "Fxy"]);
    assert_eq!(got[0].0, format!("{f}:0"));
    assert_eq!(got[3].0, format!("{f}:3"));
    // a 3-byte footer keeps the last record from overlapping "Fxy"
    let footed = mk("footed", 0, 3);
    let vals: Vec<String> = read_up_to(&step, &footed, &q, 10)
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(vals, ["abc", "def", "ghi"]);
    // overlapping windows: a record every 2 bytes
    let hop = mk("hop", 2, 0);
    let vals: Vec<String> = read_up_to(&step, &hop, &q, 10)
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(vals, ["abc", "cde", "efg", "ghi", "iFx"]);
    let e = NodeDef::new("z", "FixedLengthRecordReaderV2")
        .with_attr("record_bytes", 3i64)
        .with_attr("encoding", "GZIP");
    assert_eq!(
        run_node_in(&step, e, vec![]).unwrap_err().code(),
        Code::Unimplemented
    );
    let e = NodeDef::new("neg", "FixedLengthRecordReaderV2").with_attr("record_bytes", -1i64);
    let e = run_node_in(&step, e, vec![]).unwrap_err();
    assert!(
        e.message().contains("record_bytes must be >= 0 not -1"),
        "{e}"
    );
}

#[test]
fn missing_files_are_not_found_and_skipped() {
    let d = TempDir::new("missing");
    let ok = d.file("ok.txt", b"1\n2\n");
    let gone = format!("{}/gone.txt", d.path().display());
    let dev = test_device();
    let step = test_step(&dev);
    let q = filename_queue(&step);
    let r = text_reader(&step, "r", 0);
    enqueue(&step, &q, &[&gone, &ok]);
    let e = read(&step, &r, &q).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains(&gone), "{e}");
    assert_eq!(
        read(&step, &r, &q).unwrap(),
        (format!("{ok}:1"), "1".into())
    );
}

#[test]
fn read_up_to_stops_at_file_ends() {
    let d = TempDir::new("upto");
    let a = d.file("a", b"1\n2\n3\n");
    let b = d.file("b", b"4\n");
    let dev = test_device();
    let step = test_step(&dev);
    let q = filename_queue(&step);
    let r = text_reader(&step, "r", 0);
    enqueue(&step, &q, &[&a, &b]);
    close(&step, &q);
    let vals = |v: Vec<(String, String)>| v.into_iter().map(|(_, v)| v).collect::<Vec<_>>();
    assert_eq!(vals(read_up_to(&step, &r, &q, 2).unwrap()), ["1", "2"]);
    assert_eq!(vals(read_up_to(&step, &r, &q, 5).unwrap()), ["3"]);
    assert!(read_up_to(&step, &r, &q, 0).unwrap().is_empty());
    assert_eq!(vals(read_up_to(&step, &r, &q, 5).unwrap()), ["4"]);
    assert_eq!(
        read_up_to(&step, &r, &q, 5).unwrap_err().code(),
        Code::OutOfRange
    );
    assert_eq!(
        read_up_to(&step, &r, &q, -1).unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[test]
fn reads_wait_for_filenames_without_blocking_and_serialize() {
    let d = TempDir::new("wait");
    let a = d.file("a", b"l1\nl2\n");
    let dev = test_device();
    let step = test_step(&dev);
    let q = filename_queue(&step);
    let r = text_reader(&step, "r", 0);
    let got = std::thread::scope(|sc| {
        let t1 = sc.spawn(|| read(&step, &r, &q));
        let t2 = sc.spawn(|| read(&step, &r, &q));
        std::thread::sleep(Duration::from_millis(50));
        enqueue(&step, &q, &[&a]);
        let mut v = vec![t1.join().unwrap().unwrap().1, t2.join().unwrap().unwrap().1];
        v.sort();
        v
    });
    assert_eq!(
        got,
        ["l1", "l2"],
        "two waiting reads share one file, in order"
    );
    assert_eq!(counter(&step, "ReaderNumRecordsProducedV2", &r), 2);
}

#[test]
fn cancelling_the_step_fails_waiting_reads() {
    let dev = test_device();
    let step = test_step(&dev);
    let q = filename_queue(&step);
    let r = text_reader(&step, "r", 0);
    let errs = std::thread::scope(|sc| {
        let t1 = sc.spawn(|| read(&step, &r, &q));
        let t2 = sc.spawn(|| read(&step, &r, &q));
        std::thread::sleep(Duration::from_millis(50));
        step.cancellation.cancel();
        [
            t1.join().unwrap().unwrap_err(),
            t2.join().unwrap().unwrap_err(),
        ]
    });
    for e in errs {
        assert_eq!(e.code(), Code::Cancelled, "{e}");
    }
    assert_eq!(q.to_tensor().unwrap().dtype(), DType::Resource);
}

#[test]
fn shared_readers_and_wrong_queues() {
    let d = TempDir::new("shared");
    let a = d.file("a", b"1\n2\n");
    let dev = test_device();
    let step = test_step(&dev);
    let q = filename_queue(&step);
    let mk = |name: &str, skip: i64| {
        let n = NodeDef::new(name, "TextLineReaderV2")
            .with_attr("skip_header_lines", skip)
            .with_attr("shared_name", "shared");
        run_node_in(&step, n, vec![])
    };
    let r1 = mk("r1", 0).unwrap()[0].clone();
    let r2 = mk("r2", 0).unwrap()[0].clone();
    assert_eq!(mk("r3", 1).unwrap_err().code(), Code::InvalidArgument);
    enqueue(&step, &q, &[&a]);
    assert_eq!(read(&step, &r1, &q).unwrap().1, "1");
    assert_eq!(
        read(&step, &r2, &q).unwrap().1,
        "2",
        "the same reader behind both handles"
    );
    // a queue of int32 tensors is not a filename queue
    let iq = NodeDef::new("iq", "FIFOQueueV2").with_attr("component_types", vec![DType::I32]);
    let iq = run_node_in(&step, iq, vec![]).unwrap()[0].clone();
    let n = NodeDef::new("enq", "QueueEnqueueV2")
        .with_input("q")
        .with_input("x")
        .with_attr("Tcomponents", vec![DType::I32]);
    run_node_in(
        &step,
        n,
        vec![iq.clone(), Entry::Value(Tensor::scalar(1i32))],
    )
    .unwrap();
    let r4 = text_reader(&step, "r4", 0);
    let e = read(&step, &r4, &iq).unwrap_err();
    assert!(
        e.message()
            .contains("Expected queue with single string component"),
        "{e}"
    );
}

#[test]
fn matching_files_sorts_all_patterns() {
    let d = TempDir::new("glob");
    let b = d.file("b.csv", b"");
    let a = d.file("a.csv", b"");
    let t = d.file("t.txt", b"");
    let dir = d.path().display().to_string();
    let node = NodeDef::new("m", "MatchingFiles").with_input("p");
    let pats =
        Tensor::from_strings(&[2], vec![format!("{dir}/*.txt"), format!("{dir}/?.csv")]).unwrap();
    let out = run_node(node.clone(), vec![pats]).unwrap();
    assert_eq!(out[0], Tensor::from_strings(&[3], vec![a, b, t]).unwrap());
    let none = run_node(
        node.clone(),
        vec![Tensor::string_scalar(format!("{dir}/*.json"))],
    )
    .unwrap();
    assert_eq!(none[0].dims(), &[0]);
    let bad = Tensor::from_strings(&[1, 1], vec!["x"]).unwrap();
    assert_eq!(
        run_node(node, vec![bad]).unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[test]
fn count_up_to_counts_then_reports_out_of_range() {
    let dev = test_device();
    let step = test_step(&dev);
    for dtype in [DType::I32, DType::I64] {
        let v = NodeDef::new(format!("v{dtype}"), "VariableV2")
            .with_attr("dtype", dtype)
            .with_attr("shape", Shape::scalar());
        let var = run_node_in(&step, v, vec![]).unwrap()[0].clone();
        let count = NodeDef::new("c", "CountUpTo")
            .with_input("v")
            .with_attr("T", dtype)
            .with_attr("limit", 2i64);
        let e = run_node_in(&step, count.clone(), vec![var.clone()]).unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "uninitialized: {e}");
        let zero = Tensor::zeros(dtype, graph::TensorShape::scalar());
        let Entry::Ref(v) = &var else {
            panic!("not a ref")
        };
        v.assign(zero, true).unwrap();
        let outs: Vec<f64> = (0..2)
            .map(|_| {
                run_node_in(&step, count.clone(), vec![var.clone()]).unwrap()[0]
                    .to_tensor()
                    .unwrap()
                    .to_f64_vec()
                    .unwrap()[0]
            })
            .collect();
        assert_eq!(outs, [0.0, 1.0]);
        let e = run_node_in(&step, count.clone(), vec![var.clone()]).unwrap_err();
        assert_eq!(e.code(), Code::OutOfRange);
        assert!(e.message().contains("Reached limit of 2"), "{e}");
        assert_eq!(var.to_tensor().unwrap().to_f64_vec().unwrap(), [2.0]);
    }
}
