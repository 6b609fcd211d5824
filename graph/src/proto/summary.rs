//! TensorBoard's protobuf messages, the helpers that build and serialize them, and
//! the [`Histogram`] that fills a [`HistogramProto`].
//!
//! The messages are the generated types of the `actorflow-proto` crate, with
//! TensorFlow's field numbers and types: [`Event`], [`LogMessage`],
//! [`SessionLog`], [`TaggedRunMetadata`], [`SourceMetadata`]
//! (`tensorflow/core/util/event.proto`), [`Summary`], [`SummaryMetadata`]
//! (`tensorflow/core/framework/summary.proto`) and [`HistogramProto`]. The bytes
//! prost writes are the bytes TensorFlow's C++ protobuf writes for the same
//! message (fields in number order, proto3 defaults left out, repeated doubles
//! packed).
//!
//! `Summary.Value.tensor` is a [`TensorProto`](super::tensor::TensorProto), as in
//! TensorFlow: a tensor summary read and written again (as `MergeSummary` does)
//! keeps its values, though not necessarily its exact bytes (unpacked repeated
//! fields come back packed, fields the proto crate does not declare are dropped).
//!
//! [`MessageBytes`] serializes the messages for crates that do not depend on prost
//! themselves, and [`SummaryExt`] builds the summaries the summary ops write.
//!
//! ```
//! use actorflow_graph::proto::summary::{Histogram, MessageBytes, Summary, SummaryExt};
//! let mut h = Histogram::new();
//! for v in [1.0, 2.0, 2.5] {
//!     h.add(v);
//! }
//! let s = Summary::histogram("weights", h.to_proto(false));
//! let bytes = s.to_bytes();
//! assert_eq!(Summary::from_bytes(&bytes).unwrap(), s);
//! ```

use std::sync::OnceLock;

use prost::Message;

pub use ::proto::tensorflow::{
    event, log_message, session_log, summary, summary_metadata, DataClass, Event, HistogramProto,
    LogMessage, SessionLog, SourceMetadata, Summary, SummaryMetadata, TaggedRunMetadata,
};

use crate::{Result, Status};

/// The `file_version` of the first event of every event file.
pub const FILE_VERSION: &str = "brain.Event:2";

/// Serialization of TensorBoard's messages, for crates that do not depend on prost
/// themselves.
pub trait MessageBytes: Sized {
    /// The serialized message.
    fn to_bytes(&self) -> Vec<u8>;

    /// Parses a serialized message; malformed bytes are `InvalidArgument`.
    fn from_bytes(bytes: &[u8]) -> Result<Self>;
}

macro_rules! message_bytes {
    ($($t:ident => $what:literal),*) => {$(
        impl MessageBytes for $t {
            fn to_bytes(&self) -> Vec<u8> {
                self.encode_to_vec()
            }

            fn from_bytes(bytes: &[u8]) -> Result<$t> {
                $t::decode(bytes).map_err(|e| {
                    Status::invalid_argument(format!("cannot parse {}: {e}", $what)).with_source(e)
                })
            }
        }
    )*};
}

message_bytes!(Event => "Event", Summary => "Summary", HistogramProto => "HistogramProto");

/// The summaries the summary ops write (`Summary::scalar(tag, v)` with this trait
/// in scope).
pub trait SummaryExt {
    /// A summary of one scalar (`simple_value`), as `ScalarSummary` writes it.
    fn scalar(tag: &str, value: f32) -> Summary;

    /// A summary of one histogram, as `HistogramSummary` writes it.
    fn histogram(tag: &str, histo: HistogramProto) -> Summary;
}

impl SummaryExt for Summary {
    fn scalar(tag: &str, value: f32) -> Summary {
        Summary {
            value: vec![summary::Value {
                tag: tag.to_owned(),
                value: Some(summary::value::Value::SimpleValue(value)),
                ..Default::default()
            }],
        }
    }

    fn histogram(tag: &str, histo: HistogramProto) -> Summary {
        Summary {
            value: vec![summary::Value {
                tag: tag.to_owned(),
                value: Some(summary::value::Value::Histo(histo)),
                ..Default::default()
            }],
        }
    }
}

/// TensorFlow's default histogram bucket limits: `-DBL_MAX`, then `-1e20·…` down to
/// `-1e-12` (limits growing by a factor 1.1 from `1e-12` while below `1e20`,
/// negated), `0`, the same limits positive, and `DBL_MAX`.
pub fn default_bucket_limits() -> &'static [f64] {
    static LIMITS: OnceLock<Vec<f64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut pos = Vec::new();
        let mut v = 1.0e-12_f64;
        while v < 1.0e20 {
            pos.push(v);
            v *= 1.1;
        }
        pos.push(f64::MAX);
        let mut all: Vec<f64> = pos.iter().rev().map(|&x| -x).collect();
        all.push(0.0);
        all.extend_from_slice(&pos);
        all
    })
}

/// A histogram accumulator over TensorFlow's default buckets, as
/// `tensorflow::histogram::Histogram`: values go to the first bucket whose limit
/// is above them, and [`Histogram::to_proto`] encodes it as TensorFlow does.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    limits: &'static [f64],
    buckets: Vec<f64>,
    min: f64,
    max: f64,
    num: f64,
    sum: f64,
    sum_squares: f64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram over [`default_bucket_limits`].
    pub fn new() -> Histogram {
        let limits = default_bucket_limits();
        Histogram {
            limits,
            buckets: vec![0.0; limits.len()],
            min: f64::MAX,
            max: -f64::MAX,
            num: 0.0,
            sum: 0.0,
            sum_squares: 0.0,
        }
    }

    /// A histogram of `values`.
    pub fn from_values(values: impl IntoIterator<Item = f64>) -> Histogram {
        let mut h = Histogram::new();
        for v in values {
            h.add(v);
        }
        h
    }

    /// Adds one value. Callers reject non-finite values first, as the
    /// `HistogramSummary` kernel does; here `NaN` counts in the first bucket and
    /// `DBL_MAX` or more in the last.
    pub fn add(&mut self, value: f64) {
        let b = self.limits.partition_point(|&l| l <= value);
        let last = self.buckets.len() - 1;
        self.buckets[b.min(last)] += 1.0;
        if self.min > value {
            self.min = value;
        }
        if self.max < value {
            self.max = value;
        }
        self.num += 1.0;
        self.sum += value;
        self.sum_squares += value * value;
    }

    /// The number of values added.
    pub fn num(&self) -> f64 {
        self.num
    }

    /// Encodes the histogram. Unless `preserve_zero_buckets`, each run of empty
    /// buckets becomes one empty bucket whose limit is the run's last limit (what
    /// `HistogramSummary` writes); an all-empty histogram still has one bucket.
    pub fn to_proto(&self, preserve_zero_buckets: bool) -> HistogramProto {
        let mut p = HistogramProto {
            min: self.min,
            max: self.max,
            num: self.num,
            sum: self.sum,
            sum_squares: self.sum_squares,
            ..Default::default()
        };
        let n = self.buckets.len();
        let mut i = 0;
        while i < n {
            let mut end = self.limits[i];
            let mut count = self.buckets[i];
            i += 1;
            if !preserve_zero_buckets && count <= 0.0 {
                while i < n && self.buckets[i] <= 0.0 {
                    end = self.limits[i];
                    count = self.buckets[i];
                    i += 1;
                }
            }
            p.bucket_limit.push(end);
            p.bucket.push(count);
        }
        if p.bucket.is_empty() {
            p.bucket_limit.push(f64::MAX);
            p.bucket.push(0.0);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limits_are_tensorflows() {
        let l = default_bucket_limits();
        assert_eq!(l.len(), 1551);
        assert_eq!(l[0], -f64::MAX);
        assert_eq!(l[775], 0.0);
        assert_eq!(l[776], 1e-12);
        assert_eq!(l[777], 1e-12 * 1.1);
        assert_eq!(*l.last().unwrap(), f64::MAX);
        assert!(l[l.len() - 2] < 1e20 && l[l.len() - 2] * 1.1 >= 1e20);
        assert!(l.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn histogram_collapses_empty_runs() {
        let h = Histogram::from_values([0.0, 0.0, 1.0, -1.0]);
        let p = h.to_proto(false);
        assert_eq!(
            (p.min, p.max, p.num, p.sum, p.sum_squares),
            (-1.0, 1.0, 4.0, 0.0, 2.0)
        );
        // Empty run up to the bucket of -1, that bucket, an empty run, the zero bucket,
        // an empty run, the bucket of 1, and the empty run to DBL_MAX.
        assert_eq!(p.bucket, vec![0.0, 1.0, 0.0, 2.0, 0.0, 1.0, 0.0]);
        let l = default_bucket_limits();
        let one = l.partition_point(|&x| x <= 1.0);
        assert_eq!(p.bucket_limit[5], l[one]);
        assert_eq!(p.bucket_limit[3], l[776]);
        assert_eq!(*p.bucket_limit.last().unwrap(), f64::MAX);
        assert_eq!(h.to_proto(true).bucket.len(), l.len());
    }

    #[test]
    fn empty_histogram_has_one_bucket() {
        let p = Histogram::new().to_proto(false);
        assert_eq!(p.bucket_limit, vec![f64::MAX]);
        assert_eq!(p.bucket, vec![0.0]);
        assert_eq!((p.min, p.max, p.num), (f64::MAX, -f64::MAX, 0.0));
    }

    #[test]
    fn messages_use_tensorflows_field_numbers() {
        // Summary { value { tag: "a" simple_value: 1.0 } }
        let bytes = Summary::scalar("a", 1.0).encode_to_vec();
        assert_eq!(
            bytes,
            [0x0a, 0x08, 0x0a, 0x01, b'a', 0x15, 0, 0, 0x80, 0x3f]
        );
        let e = Event {
            wall_time: 1.0,
            step: 2,
            what: Some(event::What::FileVersion(FILE_VERSION.into())),
            source_metadata: None,
        };
        let b = e.encode_to_vec();
        assert_eq!(&b[..11], &[0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0x02]);
        assert_eq!(&b[11..13], &[0x1a, 13]);
        assert_eq!(Event::decode(b.as_slice()).unwrap(), e);
        let h = HistogramProto {
            bucket_limit: vec![1.0],
            bucket: vec![2.0],
            ..Default::default()
        };
        // Packed: tag 6 length-delimited (0x32), 8 bytes.
        assert_eq!(&h.encode_to_vec()[..2], &[0x32, 0x08]);
    }
}
