//! TensorBoard support end to end: event files against one written by TensorFlow's
//! own `tf.compat.v1.summary.FileWriter` (tests/fixtures/tensorboard/, made by
//! scripts/gen_tensorboard_fixtures.py), the summary ops run in a session, damaged
//! files, and write → read round trips.

use std::path::{Path, PathBuf};

use actorflow::ops::{self, summary as summary_ops};
use actorflow::tensorboard::summary::value::Value;
use actorflow::tensorboard::{
    default_bucket_limits, event, parse_events, read_events, record, Event, FileWriter, Histogram,
    MessageBytes, Summary, SummaryExt, FILE_VERSION,
};
use actorflow::{Code, DType, Scope, Session, SessionOptions, Shape, Tensor};

/// The histogram input of the fixture (scripts/gen_tensorboard_fixtures.py).
const VALUES: [f64; 10] = [-3.5, -1.0, 0.0, 0.0, 1e-13, 0.5, 1.0, 2.0, 3.0, 700000.0];

fn fixture() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tensorboard");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("events.out.tfevents.")
        })
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one fixture event file in {}",
        dir.display()
    );
    files.remove(0)
}

/// An empty directory of its own, removed when the guard drops (a panic too).
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("actorflow-tb-{name}-"))
        .tempdir()
        .unwrap()
}

fn summary_of(e: &Event) -> &Summary {
    match &e.what {
        Some(event::What::Summary(s)) => s,
        other => panic!("not a summary event: {other:?}"),
    }
}

#[test]
fn tensorflow_fixture_parses_and_reencodes_byte_for_byte() {
    let path = fixture();
    let bytes = std::fs::read(&path).unwrap();
    let events = read_events(&path).unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[0].what,
        Some(event::What::FileVersion(FILE_VERSION.into()))
    );
    assert_eq!(
        events[0].wall_time.fract(),
        0.0,
        "TensorFlow stamps the first event with whole seconds"
    );
    assert_eq!((events[1].step, events[2].step), (3, 7));
    // Our encoding of TensorFlow's events, framed by us, is TensorFlow's file.
    let mut ours = Vec::new();
    for e in &events {
        record::write_record(&mut ours, &e.to_bytes());
    }
    assert_eq!(ours, bytes);
    // The record payloads are exactly our message encodings too.
    for (data, e) in record::read_records(&bytes)
        .unwrap()
        .into_iter()
        .zip(&events)
    {
        assert_eq!(data, e.to_bytes().as_slice());
    }
}

#[test]
fn histogram_buckets_equal_tensorflows() {
    let events = read_events(fixture()).unwrap();
    let s = summary_of(&events[1]);
    let weights = s.value.iter().find(|v| v.tag == "weights").unwrap();
    let Some(Value::Histo(tf)) = &weights.value else {
        panic!("no histogram")
    };
    let ours = Histogram::from_values(VALUES).to_proto(false);
    assert_eq!(&ours, tf);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&ours.bucket_limit), bits(&tf.bucket_limit));
    assert!(tf
        .bucket_limit
        .iter()
        .all(|l| default_bucket_limits().contains(l)));
    assert_eq!(ours.to_bytes(), tf.to_bytes());
}

#[test]
fn summary_ops_in_a_session_match_tensorflows_output() {
    // The fixture's graph: tf.compat.v1.summary.scalar("loss", placeholder) and
    // .histogram("weights", float64 constant), merged with merge_all.
    let s = Scope::new();
    let loss = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let w = ops::constant(&s, Tensor::vector(&VALUES)).unwrap();
    summary_ops::summary_scalar(&s, "loss", &loss).unwrap();
    summary_ops::summary_histogram(&s, "weights", &w).unwrap();
    let merged = summary_ops::merge_all_summaries(&s).unwrap().unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let out = sess
        .run(
            &[(&loss.name(), Tensor::scalar(0.25f32))],
            &[&merged.name()],
            &[],
        )
        .unwrap();
    let ours = out[0].as_strings().unwrap()[0].clone();
    let events = read_events(fixture()).unwrap();
    assert_eq!(ours.as_ref(), summary_of(&events[1]).to_bytes().as_slice());

    // A non-finite value fails the step, as in TensorFlow.
    let bad = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
    let h = summary_ops::summary_histogram(&s, "bad", &bad).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let e = sess
        .run(
            &[(&bad.name(), Tensor::vector(&[1.0f32, f32::NAN]))],
            &[&h.name()],
            &[],
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("Nan in summary histogram for: bad"),
        "{e}"
    );
}

#[test]
fn writer_round_trip() {
    let tmp = temp_dir("roundtrip");
    // not there yet: the writer creates its log directory
    let dir = tmp.path().join("logs");
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
    summary_ops::summary_histogram(&s, "x", &x).unwrap();
    let gd = s.graph_def();

    let mut w = FileWriter::new(&dir).unwrap();
    let name = w.path().file_name().unwrap().to_string_lossy().into_owned();
    let parts: Vec<&str> = name.splitn(5, '.').collect();
    assert_eq!(&parts[..3], ["events", "out", "tfevents"]);
    assert!(
        parts[3].len() == 10 && parts[3].bytes().all(|b| b.is_ascii_digit()),
        "{name}"
    );
    assert!(!parts[4].is_empty(), "host name in {name}");
    // The first event is on disk before anything else is written.
    let first = read_events(w.path()).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0].what,
        Some(event::What::FileVersion(FILE_VERSION.into()))
    );

    w.add_graph(&gd).unwrap();
    w.add_scalar("loss", 0.5, 1).unwrap();
    w.add_scalar("loss", 0.25, 2).unwrap();
    w.add_histogram("h", &VALUES, 2).unwrap();
    assert_eq!(
        w.add_histogram("h", &[f64::INFINITY], 3)
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    let mut with_meta = Summary::scalar("m", 1.0);
    with_meta.value[0].metadata = Some(actorflow::tensorboard::SummaryMetadata {
        display_name: "M".into(),
        ..Default::default()
    });
    w.add_summary(&with_meta.to_bytes(), 4).unwrap();
    w.add_summary(&with_meta.to_bytes(), 5).unwrap();
    assert_eq!(
        w.add_summary(&[0xff, 0xff], 6).unwrap_err().code(),
        Code::InvalidArgument
    );
    let path = w.path().to_owned();
    w.close().unwrap();

    let events = read_events(&path).unwrap();
    assert_eq!(events.len(), 7);
    assert!(matches!(&events[1].what, Some(event::What::GraphDef(b)) if !b.is_empty()));
    let v = &summary_of(&events[3]).value[0];
    assert_eq!(
        (events[3].step, v.tag.as_str(), &v.value),
        (2, "loss", &Some(Value::SimpleValue(0.25)))
    );
    let Some(Value::Histo(h)) = &summary_of(&events[4]).value[0].value else {
        panic!("no histogram")
    };
    assert_eq!(h, &Histogram::from_values(VALUES).to_proto(false));
    // Metadata is kept on the first value of a tag only, as TensorFlow's writer does.
    assert!(summary_of(&events[5]).value[0].metadata.is_some());
    assert!(summary_of(&events[6]).value[0].metadata.is_none());
    assert!(events.windows(2).all(|p| p[0].wall_time <= p[1].wall_time));
}

#[test]
fn truncated_or_corrupted_files_are_data_loss() {
    let bytes = std::fs::read(fixture()).unwrap();
    let records = record::read_records(&bytes).unwrap();
    let first_len = record::HEADER_LEN + records[0].len() + record::FOOTER_LEN;
    // Every cut inside a record is caught; a cut between records is a shorter file.
    for cut in 1..bytes.len() {
        match parse_events(&bytes[..cut]) {
            Ok(ev) => assert!(cut == first_len || ev.len() == 2, "cut at {cut} parsed"),
            Err(e) => assert_eq!(e.code(), Code::DataLoss, "cut at {cut}: {e}"),
        }
    }
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        let e = parse_events(&bad).unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "flip at {i}");
    }
    // A well-framed record that is not an Event.
    let junk = record::encode_record(&[0xff, 0xff, 0xff]);
    assert_eq!(parse_events(&junk).unwrap_err().code(), Code::DataLoss);
    // Through the file API, naming the file.
    let tmp = temp_dir("damaged");
    let dir = tmp.path();
    let p = dir.join("events.out.tfevents.0000000000.cut");
    std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
    let e = read_events(&p).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss);
    assert!(
        e.message().contains("events.out.tfevents.0000000000.cut"),
        "{e}"
    );
    assert_eq!(
        read_events(dir.join("missing")).unwrap_err().code(),
        Code::NotFound
    );
}
