//! Input-pipeline ops (TensorFlow's `io_ops.cc`, whitepaper §4.5): readers that turn
//! a queue of filenames into records, `MatchingFiles`, and the epoch counter
//! `CountUpTo` (`state_ops.cc`) that [`string_input_producer`] uses to stop after
//! `num_epochs`.
//!
//! A reader (`TextLineReaderV2`, `FixedLengthRecordReaderV2`) is a resource in its
//! device's resource manager, found by container and shared name as queues are.
//! `ReaderReadV2` takes the reader and a queue of filename strings: it returns the
//! next record of the current file, dequeuing the next filename when that file is
//! exhausted. Keys are `"<filename>:<line>"` (text lines, 1-based) or
//! `"<filename>:<record index>"` (fixed-length records, 0-based).
//!
//! ```
//! use actorflow_graph::builder::Scope;
//! use actorflow_graph::ops;
//! let s = Scope::new();
//! let files = vec!["a.csv".to_owned(), "b.csv".to_owned()];
//! let (queue, runner) = ops::string_input_producer(&s, &files, Some(2), false, None, 32).unwrap();
//! let reader = ops::text_line_reader(&s, 1, &ops::ReaderOptions::default()).unwrap();
//! let (key, value) = ops::reader_read(&s, &reader, &queue).unwrap();
//! assert_eq!(runner.queue_name, queue.op().name());
//! assert_eq!(s.collection(ops::QUEUE_RUNNERS).len(), 1);
//! # let _ = (key, value);
//! ```

use serde::{Deserialize, Serialize};

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::ops::state::LOCAL_VARIABLES;
use crate::{DType, OpRegistry, Result, Shape, Status, Tensor};

/// The collection holding every [`QueueRunnerSpec`], as JSON
/// (`tf.GraphKeys.QUEUE_RUNNERS`).
pub const QUEUE_RUNNERS: &str = "queue_runners";

/// Registers the input ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("TextLineReaderV2")
            .output("reader_handle: resource")
            .attr("skip_header_lines: int = 0")
            .attr("container: string = ''")
            .attr("shared_name: string = ''")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("FixedLengthRecordReaderV2")
            .output("reader_handle: resource")
            .attr("header_bytes: int = 0")
            .attr("record_bytes: int")
            .attr("footer_bytes: int = 0")
            .attr("hop_bytes: int = 0")
            .attr("container: string = ''")
            .attr("shared_name: string = ''")
            .attr("encoding: string = ''")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    // TensorFlow does not mark the reader verbs stateful; here the flag keeps two
    // reads of one reader from ever being merged and shares their kernels.
    r.register(
        OpDef::build("ReaderReadV2")
            .input("reader_handle: resource")
            .input("queue_handle: resource")
            .output("key: string")
            .output("value: string")
            .stateful()
            .asynchronous()
            .shape_fn(two_scalars),
    );
    r.register(
        OpDef::build("ReaderReadUpToV2")
            .input("reader_handle: resource")
            .input("queue_handle: resource")
            .input("num_records: int64")
            .output("keys: string")
            .output("values: string")
            .stateful()
            .asynchronous()
            .shape_fn(two_vectors),
    );
    for (name, out) in [
        ("ReaderNumRecordsProducedV2", "records_produced: int64"),
        ("ReaderNumWorkUnitsCompletedV2", "units_completed: int64"),
    ] {
        r.register(
            OpDef::build(name)
                .input("reader_handle: resource")
                .output(out)
                .stateful()
                .shape_fn(shape_fn::scalar),
        );
    }
    r.register(
        OpDef::build("ReaderResetV2")
            .input("reader_handle: resource")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
    r.register(
        OpDef::build("MatchingFiles")
            .input("pattern: string")
            .output("filenames: string")
            .shape_fn(matching_files_shape),
    );
    r.register(
        OpDef::build("CountUpTo")
            .input("ref: Ref(T)")
            .output("output: T")
            .attr("limit: int")
            .attr("T: {int32, int64}")
            .shape_fn(count_up_to_shape),
    );
}

fn two_scalars(c: &mut InferenceContext<'_>) -> Result<()> {
    c.set_output(0, Shape::scalar())?;
    c.set_output(1, Shape::scalar())
}

fn two_vectors(c: &mut InferenceContext<'_>) -> Result<()> {
    if c.input(2).rank().is_some_and(|r| r != 0) {
        return Err(Status::invalid_argument(format!(
            "num_records must be a scalar, got shape {}",
            c.input(2)
        )));
    }
    c.set_output(0, Shape::from_dims(&[None]))?;
    c.set_output(1, Shape::from_dims(&[None]))
}

fn matching_files_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    if c.input(0).rank().is_some_and(|r| r > 1) {
        return Err(Status::invalid_argument(format!(
            "pattern must be a scalar or a vector, got shape {}",
            c.input(0)
        )));
    }
    c.set_output(0, Shape::from_dims(&[None]))
}

fn count_up_to_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    if c.input(0).rank().is_some_and(|r| r != 0) {
        return Err(Status::invalid_argument(format!(
            "CountUpTo needs a scalar variable, got shape {}",
            c.input(0)
        )));
    }
    c.set_output(0, Shape::scalar())
}

/// Where a reader lives: container (empty: the session's) and shared name (empty:
/// the node's name).
#[derive(Clone, Debug, Default)]
pub struct ReaderOptions {
    /// Container (empty: the session's default container).
    pub container: String,
    /// Shared name (empty: the node's name).
    pub shared_name: String,
}

/// The layout of a fixed-length record file.
#[derive(Clone, Debug, Default)]
pub struct FixedLengthRecordOptions {
    /// Bytes skipped at the start of every file.
    pub header_bytes: i64,
    /// Bytes at the end of every file that no record may overlap.
    pub footer_bytes: i64,
    /// Distance between record starts; 0 means `record_bytes`.
    pub hop_bytes: i64,
    /// Compression: only `""` (none) is supported.
    pub encoding: String,
    /// Container and shared name.
    pub reader: ReaderOptions,
}

/// `TextLineReaderV2`: a reader whose records are the lines of each file (split on
/// `\n`, a trailing `\r` removed), skipping `skip_header_lines` lines per file.
pub fn text_line_reader(s: &Scope, skip_header_lines: i64, o: &ReaderOptions) -> Result<Output> {
    s.op("TextLineReaderV2")
        .attr("skip_header_lines", skip_header_lines)
        .attr("container", o.container.as_str())
        .attr("shared_name", o.shared_name.as_str())
        .build1()
}

/// `FixedLengthRecordReaderV2`: a reader whose records are `record_bytes`-long
/// slices of each file (see [`FixedLengthRecordOptions`]).
pub fn fixed_length_record_reader(
    s: &Scope,
    record_bytes: i64,
    o: &FixedLengthRecordOptions,
) -> Result<Output> {
    s.op("FixedLengthRecordReaderV2")
        .attr("record_bytes", record_bytes)
        .attr("header_bytes", o.header_bytes)
        .attr("footer_bytes", o.footer_bytes)
        .attr("hop_bytes", o.hop_bytes)
        .attr("encoding", o.encoding.as_str())
        .attr("container", o.reader.container.as_str())
        .attr("shared_name", o.reader.shared_name.as_str())
        .build1()
}

/// `ReaderReadV2`: the next (key, value) record, scalars.
pub fn reader_read(s: &Scope, reader: &Output, queue: &Output) -> Result<(Output, Output)> {
    let op = s.op("ReaderReadV2").input(reader).input(queue).build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `ReaderReadUpToV2`: up to `num_records` (an int64 scalar) records, as vectors of
/// keys and values; fewer when a file ends.
pub fn reader_read_up_to(
    s: &Scope,
    reader: &Output,
    queue: &Output,
    num_records: &Output,
) -> Result<(Output, Output)> {
    let op = s
        .op("ReaderReadUpToV2")
        .input(reader)
        .input(queue)
        .input(num_records)
        .build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `ReaderNumRecordsProducedV2`: records produced so far (int64 scalar).
pub fn reader_num_records_produced(s: &Scope, reader: &Output) -> Result<Output> {
    s.op("ReaderNumRecordsProducedV2").input(reader).build1()
}

/// `ReaderNumWorkUnitsCompletedV2`: files finished so far (int64 scalar).
pub fn reader_num_work_units_completed(s: &Scope, reader: &Output) -> Result<Output> {
    s.op("ReaderNumWorkUnitsCompletedV2").input(reader).build1()
}

/// `ReaderResetV2`: forgets the current file and zeroes the counters.
pub fn reader_reset(s: &Scope, reader: &Output) -> Result<Operation> {
    s.op("ReaderResetV2").input(reader).build()
}

/// `MatchingFiles`: the files matching a glob pattern (`*`, `?`, `[...]`) or a
/// vector of them, sorted.
pub fn matching_files(s: &Scope, pattern: &Output) -> Result<Output> {
    s.op("MatchingFiles").input(pattern).build1()
}

/// `CountUpTo`: increments the int32/int64 scalar variable `var` (a `Ref`) and
/// outputs its value before the increment; `OutOfRange` ("Reached limit of
/// `limit`") once it has reached `limit`.
pub fn count_up_to(s: &Scope, var: &Output, limit: i64) -> Result<Output> {
    s.op("CountUpTo").input(var).attr("limit", limit).build1()
}

/// What a queue runner needs to keep a queue filled: run `enqueue_ops` over and
/// over (one thread each), run `close_op` when they fail with `OutOfRange` (input
/// exhausted), and `cancel_op` to stop (closing with pending enqueues cancelled).
/// Builders store it as JSON in the [`QUEUE_RUNNERS`] collection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRunnerSpec {
    /// The name of the node producing the queue handle.
    pub queue_name: String,
    /// The enqueue ops to run repeatedly.
    pub enqueue_ops: Vec<String>,
    /// Closes the queue (`QueueCloseV2`).
    pub close_op: String,
    /// Closes the queue, cancelling pending enqueues.
    pub cancel_op: String,
}

impl QueueRunnerSpec {
    /// The spec as JSON, as stored in [`QUEUE_RUNNERS`].
    pub fn to_json(&self) -> String {
        // A struct of strings always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A spec from its JSON form.
    pub fn from_json(s: &str) -> Result<QueueRunnerSpec> {
        serde_json::from_str(s).map_err(|e| {
            Status::invalid_argument(format!("bad queue runner spec: {e}")).with_source(e)
        })
    }

    /// Every spec in `s`'s [`QUEUE_RUNNERS`] collection.
    pub fn all_in(s: &Scope) -> Result<Vec<QueueRunnerSpec>> {
        s.collection(QUEUE_RUNNERS)
            .iter()
            .map(|j| QueueRunnerSpec::from_json(j))
            .collect()
    }
}

/// The filenames of [`string_input_producer`]: a fixed list, or a string vector
/// computed in the graph (such as a [`matching_files`] output).
#[derive(Clone, Debug)]
pub enum Filenames {
    /// A fixed list (must not be empty).
    List(Vec<String>),
    /// A 1-D string tensor.
    Tensor(Output),
}

impl From<&[String]> for Filenames {
    fn from(v: &[String]) -> Filenames {
        Filenames::List(v.to_vec())
    }
}

impl From<&Vec<String>> for Filenames {
    fn from(v: &Vec<String>) -> Filenames {
        Filenames::List(v.clone())
    }
}

impl From<Vec<String>> for Filenames {
    fn from(v: Vec<String>) -> Filenames {
        Filenames::List(v)
    }
}

impl From<&Output> for Filenames {
    fn from(o: &Output) -> Filenames {
        Filenames::Tensor(o.clone())
    }
}

/// `tf.train.limit_epochs`: `tensor`, readable `num_epochs` times; the next read
/// fails with `OutOfRange`. The counter is a local int64 variable `epochs` (in the
/// [`LOCAL_VARIABLES`] collection) initialised by `<epochs>/Assign`, which must run
/// before the first read.
fn limit_epochs(s: &Scope, tensor: &Output, num_epochs: u64) -> Result<Output> {
    if num_epochs == 0 {
        return Err(Status::invalid_argument("num_epochs must be > 0 not 0."));
    }
    let limit = i64::try_from(num_epochs)
        .map_err(|_| Status::invalid_argument(format!("num_epochs {num_epochs} is too large")))?;
    let ls = s.with_name_scope("limit_epochs");
    let zero = crate::ops::constant(&ls, Tensor::scalar(0i64))?;
    let epochs = ls
        .op("VariableV2")
        .name("epochs")
        .attr("shape", Shape::scalar())
        .attr("dtype", DType::I64)
        .build1()?;
    ls.colocate_with(epochs.op())
        .op("Assign")
        .name("epochs/Assign")
        .input(&epochs)
        .input(&zero)
        .build()?;
    ls.add_to_collection(LOCAL_VARIABLES, epochs.op().name());
    let counter = count_up_to(&ls, &epochs, limit)?;
    crate::ops::identity(&ls.with_control_dependencies(&[counter.op()]), tensor)
}

/// `tf.train.string_input_producer`: a `FIFOQueueV2` (`input_producer/fifo_queue`)
/// of string scalars holding at most `capacity`, fed by a `QueueEnqueueManyV2` of
/// the whole list, so each run of the enqueue op adds one epoch.
///
/// With `shuffle`, the list first goes through `RandomShuffle`
/// (`input_producer/RandomShuffle`, seeded as TensorFlow's `get_seed` seeds it from
/// `seed`: `seed = 87654321, seed2 = seed mod (2^31 - 1)`, or both 0, a random
/// seed, for `None`), so every epoch is a fresh permutation of the whole
/// list and epochs never mix; with a seed the order matches TensorFlow's. With
/// `num_epochs` the enqueue fails with `OutOfRange` after that many runs (a
/// `CountUpTo` on the local variable `input_producer/limit_epochs/epochs`,
/// initialised by `input_producer/limit_epochs/epochs/Assign`, guarding an
/// `Identity` between the list and the enqueue), and the queue runner then closes
/// the queue, so readers end with `OutOfRange` once it drains.
///
/// Returns the queue handle and the runner spec (also added to [`QUEUE_RUNNERS`]).
pub fn string_input_producer(
    s: &Scope,
    filenames: impl Into<Filenames>,
    num_epochs: Option<u64>,
    shuffle: bool,
    seed: Option<i64>,
    capacity: usize,
) -> Result<(Output, QueueRunnerSpec)> {
    let ps = s.with_name_scope("input_producer");
    let names = match filenames.into() {
        Filenames::List(v) if v.is_empty() => {
            return Err(Status::invalid_argument(
                "string_input_producer requires a non-null input tensor",
            ))
        }
        Filenames::List(v) => crate::ops::constant(&ps, Tensor::from_strings(&[v.len()], v)?)?,
        Filenames::Tensor(t) => {
            if t.dtype() != DType::String || t.shape().rank().is_some_and(|r| r != 1) {
                return Err(Status::invalid_argument(format!(
                    "string_input_producer needs a 1-D string tensor, got {} of shape {}",
                    t.dtype(),
                    t.shape()
                )));
            }
            t
        }
    };
    let names = if shuffle {
        let (seed, seed2) = crate::ops::random::get_seed(seed);
        crate::ops::random_shuffle(&ps, &names, seed, seed2)?
    } else {
        names
    };
    let names = match num_epochs {
        Some(n) => limit_epochs(&ps, &names, n)?,
        None => names,
    };
    let capacity =
        i64::try_from(capacity).map_err(|_| Status::invalid_argument("capacity is too large"))?;
    let queue = ps
        .op("FIFOQueueV2")
        .name("fifo_queue")
        .attr("component_types", vec![DType::String])
        .attr("shapes", vec![Shape::scalar()])
        .attr("capacity", capacity)
        .build1()?;
    let enqueue = ps
        .op("QueueEnqueueManyV2")
        .name("input_producer_EnqueueMany")
        .input(&queue)
        .input_list(std::slice::from_ref(&names))
        .build()?;
    let close = ps
        .op("QueueCloseV2")
        .name("input_producer_Close")
        .input(&queue)
        .attr("cancel_pending_enqueues", false)
        .build()?;
    let cancel = ps
        .op("QueueCloseV2")
        .name("input_producer_Close_1")
        .input(&queue)
        .attr("cancel_pending_enqueues", true)
        .build()?;
    let spec = QueueRunnerSpec {
        queue_name: queue.op().name().to_owned(),
        enqueue_ops: vec![enqueue.name().to_owned()],
        close_op: close.name().to_owned(),
        cancel_op: cancel.name().to_owned(),
    };
    s.add_to_collection(QUEUE_RUNNERS, &spec.to_json());
    Ok((queue, spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    #[test]
    fn producer_builds_tf_structure() {
        let s = Scope::new();
        let files = vec!["x".to_owned()];
        let (q, spec) = string_input_producer(&s, &files, Some(3), false, None, 8).unwrap();
        assert_eq!(q.op().op_type(), "FIFOQueueV2");
        assert_eq!(
            spec.enqueue_ops,
            ["input_producer/input_producer_EnqueueMany"]
        );
        let g = s.graph_def();
        let cu = g.find("input_producer/limit_epochs/CountUpTo").unwrap();
        assert_eq!(cu.get_attr::<i64>("limit").unwrap(), 3);
        assert_eq!(
            s.collection(LOCAL_VARIABLES),
            ["input_producer/limit_epochs/epochs"]
        );
        assert!(g
            .find("input_producer/limit_epochs/epochs/Assign")
            .is_some());
        let back = QueueRunnerSpec::all_in(&s).unwrap();
        assert_eq!(back, [spec]);
        // without shuffle the list feeds the epoch guard directly
        let id = g.find("input_producer/limit_epochs/Identity").unwrap();
        assert_eq!(id.input[0], "input_producer/Const");
        // bad inputs are rejected at build time
        assert!(string_input_producer(&s, Vec::<String>::new(), None, false, None, 8).is_err());
        let m = ops::scalar(&s, 1.0f32).unwrap();
        assert!(string_input_producer(&s, &m, None, false, None, 8).is_err());
        assert!(string_input_producer(&s, &files, Some(0), false, None, 8).is_err());
    }

    /// The node named `name` in `g`.
    fn node<'a>(g: &'a crate::GraphDef, name: &str) -> &'a crate::NodeDef {
        g.find(name).unwrap_or_else(|| panic!("no node {name}"))
    }

    #[test]
    fn shuffling_producer_permutes_each_epoch_into_a_fifo_queue() {
        // TensorFlow's structure: Const -> RandomShuffle -> limit_epochs Identity ->
        // QueueEnqueueManyV2 into a FIFOQueueV2 (no shuffling queue, which would
        // mix consecutive epochs).
        let s = Scope::new();
        let files = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let (q, spec) = string_input_producer(&s, &files, Some(2), true, Some(5), 8).unwrap();
        assert_eq!(q.op().op_type(), "FIFOQueueV2");
        assert_eq!(q.op().name(), "input_producer/fifo_queue");
        let g = s.graph_def();
        let enqueue = node(&g, &spec.enqueue_ops[0]);
        assert_eq!(enqueue.op, "QueueEnqueueManyV2");
        assert_eq!(
            enqueue.input,
            [
                "input_producer/fifo_queue",
                "input_producer/limit_epochs/Identity"
            ]
        );
        let id = node(&g, "input_producer/limit_epochs/Identity");
        assert_eq!(id.input[0], "input_producer/RandomShuffle");
        assert!(id
            .input
            .contains(&"^input_producer/limit_epochs/CountUpTo".to_owned()));
        let shuffle = node(&g, "input_producer/RandomShuffle");
        assert_eq!(shuffle.op, "RandomShuffle");
        assert_eq!(shuffle.input, ["input_producer/Const"]);
        assert_eq!(shuffle.get_attr::<DType>("T").unwrap(), DType::String);
        // get_seed(5) with no graph seed
        assert_eq!(shuffle.get_attr::<i64>("seed").unwrap(), 87_654_321);
        assert_eq!(shuffle.get_attr::<i64>("seed2").unwrap(), 5);
        assert!(g.node.iter().all(|n| n.op != "RandomShuffleQueueV2"));

        // Endless epochs: the shuffle feeds the enqueue directly; no seed means
        // (0, 0), a random seed.
        let s = Scope::new();
        let (_, spec) = string_input_producer(&s, &files, None, true, None, 8).unwrap();
        let g = s.graph_def();
        let enqueue = node(&g, &spec.enqueue_ops[0]);
        assert_eq!(enqueue.input[1], "input_producer/RandomShuffle");
        let shuffle = node(&g, "input_producer/RandomShuffle");
        assert_eq!(shuffle.get_attr::<i64>("seed").unwrap(), 0);
        assert_eq!(shuffle.get_attr::<i64>("seed2").unwrap(), 0);
    }

    #[test]
    fn reader_builders_set_tf_attrs() {
        let s = Scope::new();
        let r = fixed_length_record_reader(
            &s,
            4,
            &FixedLengthRecordOptions {
                header_bytes: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let n = s.graph_def().find(r.op().name()).cloned().unwrap();
        assert_eq!(n.get_attr::<i64>("record_bytes").unwrap(), 4);
        assert_eq!(n.get_attr::<i64>("header_bytes").unwrap(), 2);
        let t = text_line_reader(&s, 0, &ReaderOptions::default()).unwrap();
        let (q, _) =
            string_input_producer(&s, &["f".to_owned()][..], None, false, None, 4).unwrap();
        let n = ops::scalar(&s, 5i64).unwrap();
        let (k, v) = reader_read_up_to(&s, &t, &q, &n).unwrap();
        assert_eq!(k.shape(), Shape::from_dims(&[None]));
        assert_eq!(v.dtype(), DType::String);
        let p = ops::constant(&s, Tensor::string_scalar("*.csv")).unwrap();
        assert_eq!(matching_files(&s, &p).unwrap().dtype(), DType::String);
    }
}
