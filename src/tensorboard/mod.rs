//! TensorBoard event files: [`FileWriter`] writes what `tf.compat.v1.summary.FileWriter`
//! writes, [`read_events`] reads it back.
//!
//! An event file is a sequence of TFRecord records ([`record`]: length, masked
//! CRC-32C of the length, data, masked CRC-32C of the data; [`crc32c`]), each a
//! serialized [`Event`]. The first event holds `file_version: "brain.Event:2"`;
//! later ones hold summaries (the serialized [`Summary`] that the `ScalarSummary`,
//! `HistogramSummary` and `MergeSummary` ops output, see
//! [`graph::ops::summary`]) or the graph.
//!
//! ```
//! use actorflow::ops::{self, summary};
//! use actorflow::tensorboard::{read_events, FileWriter};
//! use actorflow::{DType, Scope, Session, SessionOptions, Shape, Tensor};
//!
//! let s = Scope::new();
//! let loss = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
//! summary::summary_scalar(&s, "loss", &loss).unwrap();
//! let merged = summary::merge_all_summaries(&s).unwrap().unwrap();
//! let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
//!
//! let tmp = tempfile::tempdir().unwrap(); // removed when dropped
//! let mut w = FileWriter::new(tmp.path()).unwrap();
//! w.add_graph(&s.graph_def()).unwrap();
//! for step in 0..3 {
//!     let out = sess
//!         .run(&[(&loss.name(), Tensor::scalar(1.0f32 / (step + 1) as f32))], &[&merged.name()], &[])
//!         .unwrap();
//!     w.add_summary(&out[0].as_strings().unwrap()[0], step).unwrap();
//! }
//! let path = w.path().to_owned();
//! w.close().unwrap();
//! assert_eq!(read_events(&path).unwrap().len(), 5); // version, graph, 3 summaries
//! ```
//!
//! # Checking a file with TensorBoard's own reader
//!
//! `scripts/check_tensorboard.py` loads event files with the `tensorboard`
//! package's `EventAccumulator` and prints the scalars, histograms and graph it
//! finds (it exits non-zero when a file does not load):
//!
//! ```text
//! /work/venv/bin/python scripts/check_tensorboard.py LOGDIR_OR_FILE
//! ```
//!
//! Then `tensorboard --logdir LOGDIR` shows the same data in a browser.

pub mod crc32c;
/// TFRecord framing (in `kernels`, which TensorFlow Serving's warmup files
/// and record readers share).
pub use kernels::record;
mod writer;

pub use graph::proto::summary::{
    default_bucket_limits, event, summary, Event, Histogram, HistogramProto, MessageBytes, Summary,
    SummaryExt, SummaryMetadata, FILE_VERSION,
};
pub use writer::{parse_events, read_events, FileWriter, WRITER_NAME};

use graph::{GraphDef, Result};

/// The `GraphDef` proto bytes of `g`, as the graph event carries them: the
/// importer's binary export, the one encoder of TensorFlow's `GraphDef`.
pub fn graph_bytes(g: &GraphDef) -> Result<Vec<u8>> {
    graph::import::graph_def_to_tf_bytes(g)
}
