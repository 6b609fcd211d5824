//! [`FileWriter`], as `tf.compat.v1.summary.FileWriter`, and [`read_events`].

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use graph::proto::summary::{
    event, Event, Histogram, MessageBytes, SourceMetadata, Summary, SummaryExt, FILE_VERSION,
};
use graph::{Code, GraphDef, Result, Status};

use super::record;

/// The `source_metadata.writer` of the first event of files this module writes.
pub const WRITER_NAME: &str = "actorflow.tensorboard";

/// An `io::Error` as a status with the closest canonical code.
pub(crate) fn io_status(e: std::io::Error, what: impl std::fmt::Display) -> Status {
    use std::io::ErrorKind as K;
    let code = match e.kind() {
        K::NotFound => Code::NotFound,
        K::PermissionDenied => Code::PermissionDenied,
        K::AlreadyExists => Code::AlreadyExists,
        K::InvalidInput | K::InvalidData => Code::InvalidArgument,
        K::UnexpectedEof => Code::OutOfRange,
        K::WouldBlock | K::Interrupted | K::TimedOut => Code::Unavailable,
        K::StorageFull | K::OutOfMemory => Code::ResourceExhausted,
        _ => Code::Unknown,
    };
    Status::new(code, format!("{what}: {e}"))
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The host name as `gethostname` gives it, for event file names.
fn hostname() -> String {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let name = from_proc
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_owned());
    name.replace(['/', '\\'], "_")
}

/// Writes TensorBoard event files, as `tf.compat.v1.summary.FileWriter`.
///
/// [`FileWriter::new`] creates `logdir` and the file
/// `events.out.tfevents.<secs>.<hostname>` in it (TensorFlow's `EventsWriter`
/// name: seconds since the epoch, 10 digits), and writes and flushes the first
/// event: `file_version: "brain.Event:2"` with the whole second as its wall time.
/// Every later event gets the current wall time. Events are buffered until
/// [`FileWriter::flush`], [`FileWriter::close`] or drop.
///
/// # Examples
/// ```
/// use actorflow::tensorboard::{read_events, FileWriter};
/// let tmp = tempfile::tempdir().unwrap(); // removed when dropped
/// let mut w = FileWriter::new(tmp.path()).unwrap();
/// w.add_scalar("loss", 0.5, 1).unwrap();
/// w.add_histogram("weights", &[0.1, 0.2, -1.0], 1).unwrap();
/// let path = w.path().to_owned();
/// w.close().unwrap();
/// let events = read_events(&path).unwrap();
/// assert_eq!(events.len(), 3); // file_version, scalar, histogram
/// ```
pub struct FileWriter {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    seen_tags: HashSet<String>,
}

impl FileWriter {
    /// Opens a new event file in `logdir` (created if missing); see the type docs.
    pub fn new(logdir: impl AsRef<Path>) -> Result<FileWriter> {
        FileWriter::with_suffix(logdir, "")
    }

    /// As [`FileWriter::new`], with `suffix` appended to the file name (TensorFlow's
    /// `filename_suffix`), so several writers can share a directory and a second.
    pub fn with_suffix(logdir: impl AsRef<Path>, suffix: &str) -> Result<FileWriter> {
        let logdir = logdir.as_ref();
        std::fs::create_dir_all(logdir)
            .map_err(|e| io_status(e, format!("creating {}", logdir.display())))?;
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let path = logdir.join(format!(
            "events.out.tfevents.{secs:010}.{}{suffix}",
            hostname()
        ));
        let file = File::create(&path)
            .map_err(|e| io_status(e, format!("creating {}", path.display())))?;
        let mut w = FileWriter {
            path,
            out: Some(BufWriter::new(file)),
            seen_tags: HashSet::new(),
        };
        w.add_event(&Event {
            wall_time: secs as f64,
            step: 0,
            what: Some(event::What::FileVersion(FILE_VERSION.to_owned())),
            source_metadata: Some(SourceMetadata {
                writer: WRITER_NAME.to_owned(),
            }),
        })?;
        w.flush()?;
        Ok(w)
    }

    /// The event file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `event` as it is (its wall time and step included).
    pub fn add_event(&mut self, event: &Event) -> Result<()> {
        let mut buf = Vec::new();
        record::write_record(&mut buf, &event.to_bytes());
        let path = &self.path;
        let out = self.out.as_mut().ok_or_else(|| {
            Status::failed_precondition(format!("event file {} is closed", path.display()))
        })?;
        out.write_all(&buf)
            .map_err(|e| io_status(e, format!("writing {}", path.display())))
    }

    fn add_now(&mut self, step: i64, what: event::What) -> Result<()> {
        self.add_event(&Event {
            wall_time: now(),
            step,
            what: Some(what),
            source_metadata: None,
        })
    }

    /// Adds a serialized `Summary` (the string scalar a summary op outputs) at
    /// `step`. As TensorFlow's writer, a value's `metadata` is kept only the first
    /// time its tag is seen. Bytes that are not a `Summary` are `InvalidArgument`.
    pub fn add_summary(&mut self, summary: &[u8], step: i64) -> Result<()> {
        let s = Summary::from_bytes(summary)?;
        self.add_summary_proto(s, step)
    }

    /// As [`FileWriter::add_summary`], from the message.
    pub fn add_summary_proto(&mut self, mut summary: Summary, step: i64) -> Result<()> {
        for v in &mut summary.value {
            if !self.seen_tags.insert(v.tag.clone()) {
                v.metadata = None;
            }
        }
        self.add_now(step, event::What::Summary(summary))
    }

    /// Adds one scalar under `tag` at `step` (what `ScalarSummary` would produce).
    pub fn add_scalar(&mut self, tag: &str, value: f32, step: i64) -> Result<()> {
        self.add_summary_proto(Summary::scalar(tag, value), step)
    }

    /// Adds a histogram of `values` under `tag` at `step`, bucketed exactly as
    /// `HistogramSummary` does; a NaN or infinite value is `InvalidArgument`.
    pub fn add_histogram(&mut self, tag: &str, values: &[f64], step: i64) -> Result<()> {
        let mut h = Histogram::new();
        for &v in values {
            if v.is_nan() {
                return Err(Status::invalid_argument(format!(
                    "Nan in summary histogram for: {tag}"
                )));
            }
            if v.is_infinite() {
                return Err(Status::invalid_argument(format!(
                    "Infinity in summary histogram for: {tag}"
                )));
            }
            h.add(v);
        }
        self.add_summary_proto(Summary::histogram(tag, h.to_proto(false)), step)
    }

    /// Adds the graph (TensorFlow's `GraphDef` proto bytes), for TensorBoard's
    /// Graphs tab.
    pub fn add_graph(&mut self, graph: &GraphDef) -> Result<()> {
        let bytes = super::graph_bytes(graph)?;
        self.add_now(0, event::What::GraphDef(bytes))
    }

    /// Writes buffered events to the file.
    pub fn flush(&mut self) -> Result<()> {
        let path = &self.path;
        match self.out.as_mut() {
            Some(out) => out
                .flush()
                .map_err(|e| io_status(e, format!("flushing {}", path.display()))),
            None => Ok(()),
        }
    }

    /// Flushes and closes the file.
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<()> {
        let path = self.path.clone();
        match self.out.take() {
            Some(out) => {
                let file = out.into_inner().map_err(|e| {
                    io_status(e.into_error(), format!("flushing {}", path.display()))
                })?;
                file.sync_all()
                    .map_err(|e| io_status(e, format!("syncing {}", path.display())))
            }
            None => Ok(()),
        }
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; `close` reports them.
        let _ = self.close_inner();
    }
}

/// Parses the events of an event file's bytes: TFRecord framing with both CRCs
/// checked, each record an `Event`. A truncated or corrupt record, or a record
/// that is not an `Event`, is `DataLoss`.
pub fn parse_events(bytes: &[u8]) -> Result<Vec<Event>> {
    record::read_records(bytes)?
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            Event::from_bytes(r).map_err(|e| {
                Status::data_loss(format!("record {i} is not an Event: {}", e.message()))
            })
        })
        .collect()
}

/// Reads every event of the event file at `path` (see [`parse_events`]).
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<Event>> {
    let path = path.as_ref();
    let bytes =
        std::fs::read(path).map_err(|e| io_status(e, format!("reading {}", path.display())))?;
    parse_events(&bytes).map_err(|e| e.context(path.display()))
}
