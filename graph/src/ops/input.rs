//! Batching helpers of input pipelines (TensorFlow's `tf.compat.v1.train.batch`
//! and `shuffle_batch`, `training/input.py`), and `local_variables_initializer`.
//!
//! Each helper adds a queue (`FIFOQueueV2`, `PaddingFIFOQueueV2` with
//! `dynamic_pad`, or `RandomShuffleQueueV2`), an enqueue op of its input tensors
//! (`QueueEnqueueV2`, or `QueueEnqueueManyV2` with `enqueue_many`), a
//! [`QueueRunnerSpec`] that runs that op in `num_threads` loops (stored in the
//! [`QUEUE_RUNNERS`] collection, for `start_queue_runners`), and the dequeue that
//! makes the batches: `QueueDequeueManyV2`, or `QueueDequeueUpToV2` with
//! `allow_smaller_final_batch` (so the last batch before the queue closes may be
//! smaller rather than being dropped). Once the queue is closed and drained the
//! dequeue fails with `OutOfRange`.
//!
//! As in TensorFlow, element shapes must be known: fully, or (with `dynamic_pad`)
//! in rank; with `enqueue_many` the first dimension of every input is the batch
//! dimension and is not part of the element.
//!
//! ```
//! use actorflow_graph::builder::Scope;
//! use actorflow_graph::{ops, DType, Shape, Tensor};
//! let s = Scope::new();
//! let x = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
//! let y = ops::scalar(&s, 3i32).unwrap();
//! let b = ops::shuffle_batch(&s, &[x, y], 16, 64, 16, &ops::ShuffleBatchOptions {
//!     num_threads: 2,
//!     seed: Some(7),
//!     ..Default::default()
//! }).unwrap();
//! assert_eq!(b.tensors[0].dtype(), DType::F32);
//! assert_eq!(b.runner.enqueue_ops.len(), 2); // one op, run in two loops
//! assert_eq!(ops::QueueRunnerSpec::all_in(&s).unwrap(), [b.runner]);
//! ```

use crate::builder::{Operation, Output, Scope};
use crate::ops::io::{QueueRunnerSpec, QUEUE_RUNNERS};
use crate::ops::state::LOCAL_VARIABLES;
use crate::{DType, Result, Shape, Status};

/// The options of [`batch`], with TensorFlow's defaults.
#[derive(Clone, Debug)]
pub struct BatchOptions {
    /// Loops running the enqueue op (the order of elements is nondeterministic
    /// when more than one).
    pub num_threads: usize,
    /// The most elements the queue holds.
    pub capacity: usize,
    /// Each input is a batch of elements along its first dimension.
    pub enqueue_many: bool,
    /// Element shapes (`None`: inferred from the inputs).
    pub shapes: Option<Vec<Shape>>,
    /// Allow unknown dimensions: batches are padded (zeros, empty strings) to the
    /// largest element, through a `PaddingFIFOQueueV2`.
    pub dynamic_pad: bool,
    /// The last batch may be smaller than `batch_size` (`QueueDequeueUpToV2`).
    pub allow_smaller_final_batch: bool,
    /// The queue's shared name (empty: not shared).
    pub shared_name: String,
    /// The name scope of the nodes (`"batch"`).
    pub name: String,
}

impl Default for BatchOptions {
    fn default() -> BatchOptions {
        BatchOptions {
            num_threads: 1,
            capacity: 32,
            enqueue_many: false,
            shapes: None,
            dynamic_pad: false,
            allow_smaller_final_batch: false,
            shared_name: String::new(),
            name: "batch".to_owned(),
        }
    }
}

/// The options of [`shuffle_batch`], with TensorFlow's defaults.
#[derive(Clone, Debug)]
pub struct ShuffleBatchOptions {
    /// Loops running the enqueue op.
    pub num_threads: usize,
    /// The op seed (`None`: a fresh random seed per session), turned into the
    /// queue's `seed`/`seed2` by [`get_seed`](crate::ops::get_seed).
    pub seed: Option<i64>,
    /// Each input is a batch of elements along its first dimension.
    pub enqueue_many: bool,
    /// Element shapes (`None`: inferred from the inputs).
    pub shapes: Option<Vec<Shape>>,
    /// The last batch may be smaller than `batch_size` (`QueueDequeueUpToV2`).
    pub allow_smaller_final_batch: bool,
    /// The queue's shared name (empty: not shared).
    pub shared_name: String,
    /// The name scope of the nodes (`"shuffle_batch"`).
    pub name: String,
}

impl Default for ShuffleBatchOptions {
    fn default() -> ShuffleBatchOptions {
        ShuffleBatchOptions {
            num_threads: 1,
            seed: None,
            enqueue_many: false,
            shapes: None,
            allow_smaller_final_batch: false,
            shared_name: String::new(),
            name: "shuffle_batch".to_owned(),
        }
    }
}

/// What [`batch`] and [`shuffle_batch`] built.
#[derive(Clone, Debug)]
pub struct Batched {
    /// The batches, one per input tensor: `[batch_size] + element shape` (the
    /// first dimension is smaller for a final batch with
    /// `allow_smaller_final_batch`).
    pub tensors: Vec<Output>,
    /// The queue handle.
    pub queue: Output,
    /// The queue runner that fills the queue (also in [`QUEUE_RUNNERS`]).
    pub runner: QueueRunnerSpec,
}

/// What kind of queue a helper builds.
enum QueueKind {
    Fifo,
    Padding,
    Shuffle {
        min_after_dequeue: i64,
        seed: i64,
        seed2: i64,
    },
}

/// The part common to both helpers.
struct Plan<'a> {
    tensors: &'a [Output],
    batch_size: usize,
    capacity: usize,
    num_threads: usize,
    enqueue_many: bool,
    shapes: Option<&'a [Shape]>,
    allow_smaller_final_batch: bool,
    shared_name: &'a str,
    name: &'a str,
    kind: QueueKind,
}

/// `tf.compat.v1.train.batch`: batches of `batch_size` of `tensors`, filled by a
/// queue runner (see the module docs).
///
/// Build-time errors (`InvalidArgument`): no tensors, a zero batch size, capacity
/// or thread count, or element shapes that are not known (fully, or in rank with
/// `dynamic_pad`).
pub fn batch(
    s: &Scope,
    tensors: &[Output],
    batch_size: usize,
    o: &BatchOptions,
) -> Result<Batched> {
    build(
        s,
        Plan {
            tensors,
            batch_size,
            capacity: o.capacity,
            num_threads: o.num_threads,
            enqueue_many: o.enqueue_many,
            shapes: o.shapes.as_deref(),
            allow_smaller_final_batch: o.allow_smaller_final_batch,
            shared_name: &o.shared_name,
            name: &o.name,
            kind: if o.dynamic_pad {
                QueueKind::Padding
            } else {
                QueueKind::Fifo
            },
        },
    )
}

/// `tf.compat.v1.train.shuffle_batch`: batches of `batch_size` drawn at random
/// from a `RandomShuffleQueueV2` of `capacity` elements that keeps at least
/// `min_after_dequeue` until it is closed (so elements mix well), filled by a
/// queue runner. With the same `seed`, one loop and one reader the batches repeat
/// from session to session.
///
/// Build-time errors (`InvalidArgument`): as [`batch`], and `capacity` not above
/// `min_after_dequeue`.
pub fn shuffle_batch(
    s: &Scope,
    tensors: &[Output],
    batch_size: usize,
    capacity: usize,
    min_after_dequeue: usize,
    o: &ShuffleBatchOptions,
) -> Result<Batched> {
    if capacity <= min_after_dequeue {
        return Err(Status::invalid_argument(format!(
            "capacity {capacity} must be bigger than min_after_dequeue {min_after_dequeue}."
        )));
    }
    let (seed, seed2) = crate::ops::random::get_seed(o.seed);
    build(
        s,
        Plan {
            tensors,
            batch_size,
            capacity,
            num_threads: o.num_threads,
            enqueue_many: o.enqueue_many,
            shapes: o.shapes.as_deref(),
            allow_smaller_final_batch: o.allow_smaller_final_batch,
            shared_name: &o.shared_name,
            name: &o.name,
            kind: QueueKind::Shuffle {
                min_after_dequeue: to_i64(min_after_dequeue, "min_after_dequeue")?,
                seed,
                seed2,
            },
        },
    )
}

fn to_i64(v: usize, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| Status::invalid_argument(format!("{what} {v} is too large")))
}

/// The element shapes of `p.tensors` (TensorFlow's `_shapes`), checked against
/// what the queue kind allows.
fn element_shapes(p: &Plan<'_>) -> Result<Vec<Shape>> {
    let shapes = match p.shapes {
        Some(given) => {
            if given.len() != p.tensors.len() {
                return Err(Status::invalid_argument(format!(
                    "{} shapes given for {} tensors",
                    given.len(),
                    p.tensors.len()
                )));
            }
            given.to_vec()
        }
        None => {
            let mut v = Vec::with_capacity(p.tensors.len());
            for t in p.tensors {
                let dims = t
                    .shape()
                    .dims()
                    .map(<[Option<usize>]>::to_vec)
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "Cannot infer Tensor's rank: {}",
                            t.name()
                        ))
                    })?;
                if !p.enqueue_many {
                    v.push(Shape::from_dims(&dims));
                } else if dims.is_empty() {
                    return Err(Status::invalid_argument(format!(
                        "with enqueue_many, {} must have rank at least 1, has shape {}",
                        t.name(),
                        t.shape()
                    )));
                } else {
                    v.push(Shape::from_dims(&dims[1..]));
                }
            }
            v
        }
    };
    let padding = matches!(p.kind, QueueKind::Padding);
    for (t, sh) in p.tensors.iter().zip(&shapes) {
        let ok = if padding {
            sh.rank().is_some()
        } else {
            sh.is_fully_defined()
        };
        if !ok {
            return Err(Status::invalid_argument(format!(
                "All shapes must be {}: the elements of {} have shape {sh}",
                if padding {
                    "of known rank"
                } else {
                    "fully defined"
                },
                t.name()
            )));
        }
    }
    Ok(shapes)
}

fn build(s: &Scope, p: Plan<'_>) -> Result<Batched> {
    if p.tensors.is_empty() {
        return Err(Status::invalid_argument(
            "Expected at least one tensor in batch().",
        ));
    }
    for (what, v) in [
        ("batch_size", p.batch_size),
        ("capacity", p.capacity),
        ("num_threads", p.num_threads),
    ] {
        if v == 0 {
            return Err(Status::invalid_argument(format!("{what} must be > 0")));
        }
    }
    let batch_size = i32::try_from(p.batch_size).map_err(|_| {
        Status::invalid_argument(format!("batch_size {} is too large", p.batch_size))
    })?;
    let shapes = element_shapes(&p)?;
    let types: Vec<DType> = p.tensors.iter().map(Output::dtype).collect();
    let bs = s.with_name_scope(p.name);
    let (op, queue_name) = match p.kind {
        QueueKind::Fifo => ("FIFOQueueV2", "fifo_queue"),
        QueueKind::Padding => ("PaddingFIFOQueueV2", "padding_fifo_queue"),
        QueueKind::Shuffle { .. } => ("RandomShuffleQueueV2", "random_shuffle_queue"),
    };
    let mut q = bs
        .op(op)
        .name(queue_name)
        .attr("component_types", types.clone())
        .attr("shapes", shapes)
        .attr("capacity", to_i64(p.capacity, "capacity")?)
        .attr("shared_name", p.shared_name);
    if let QueueKind::Shuffle {
        min_after_dequeue,
        seed,
        seed2,
    } = p.kind
    {
        q = q
            .attr("min_after_dequeue", min_after_dequeue)
            .attr("seed", seed)
            .attr("seed2", seed2);
    }
    let queue = q.build1()?;
    let (enqueue_op, enqueue_name) = if p.enqueue_many {
        ("QueueEnqueueManyV2", "EnqueueMany")
    } else {
        ("QueueEnqueueV2", "Enqueue")
    };
    let enqueue = bs
        .op(enqueue_op)
        .name(enqueue_name)
        .input(&queue)
        .input_list(p.tensors)
        .build()?;
    let close = close_op(&bs, &queue, queue_name, false)?;
    let cancel = close_op(&bs, &queue, queue_name, true)?;
    let n = crate::ops::scalar(&bs.with_name_scope("n"), batch_size)?;
    let dequeue = if p.allow_smaller_final_batch {
        "QueueDequeueUpToV2"
    } else {
        "QueueDequeueManyV2"
    };
    let tensors = bs
        .op(dequeue)
        .input(&queue)
        .input(&n)
        .attr("component_types", types)
        .build()?
        .outputs();
    let runner = QueueRunnerSpec {
        queue_name: queue.op().name().to_owned(),
        enqueue_ops: vec![enqueue.name().to_owned(); p.num_threads],
        close_op: close.name().to_owned(),
        cancel_op: cancel.name().to_owned(),
    };
    s.add_to_collection(QUEUE_RUNNERS, &runner.to_json());
    Ok(Batched {
        tensors,
        queue,
        runner,
    })
}

/// `<queue>_Close`, or `<queue>_Close_1` cancelling pending enqueues (TensorFlow's
/// names for a queue runner's close and cancel ops).
fn close_op(
    s: &Scope,
    queue: &Output,
    queue_name: &str,
    cancel_pending_enqueues: bool,
) -> Result<Operation> {
    let suffix = if cancel_pending_enqueues { "_1" } else { "" };
    s.op("QueueCloseV2")
        .name(&format!("{queue_name}_Close{suffix}"))
        .input(queue)
        .attr("cancel_pending_enqueues", cancel_pending_enqueues)
        .build()
}

/// `tf.compat.v1.local_variables_initializer`: a `NoOp` named `init_local` (made
/// unique) that runs the initializer (`<variable>/Assign`) of every variable in the
/// [`LOCAL_VARIABLES`] collection, such as the epoch counters of
/// [`string_input_producer`](crate::ops::string_input_producer). `NotFound` if a
/// local variable has no initializer.
pub fn local_variables_initializer(s: &Scope) -> Result<Operation> {
    let mut init = s.op("NoOp").name("init_local");
    for v in s.collection(LOCAL_VARIABLES) {
        let assign = s.find_operation(&format!("{v}/Assign")).ok_or_else(|| {
            Status::not_found(format!(
                "local variable '{v}' has no initializer '{v}/Assign'"
            ))
        })?;
        init = init.control_input(&assign);
    }
    init.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ops, Tensor};

    fn node(s: &Scope, name: &str) -> crate::NodeDef {
        s.graph_def()
            .find(name)
            .cloned()
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    #[test]
    fn batch_builds_tf_structure() {
        let s = Scope::new();
        let x = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0, 3.0])).unwrap();
        let k = ops::constant(&s, Tensor::string_scalar("k")).unwrap();
        let b = batch(
            &s,
            &[x, k],
            4,
            &BatchOptions {
                num_threads: 3,
                capacity: 10,
                ..Default::default()
            },
        )
        .unwrap();
        let q = node(&s, "batch/fifo_queue");
        assert_eq!(q.op, "FIFOQueueV2");
        assert_eq!(q.get_attr::<i64>("capacity").unwrap(), 10);
        assert_eq!(
            q.get_attr::<Vec<Shape>>("shapes").unwrap(),
            [Shape::known(&[3]), Shape::scalar()]
        );
        assert_eq!(b.runner.enqueue_ops, vec!["batch/Enqueue".to_owned(); 3]);
        assert_eq!(node(&s, "batch/Enqueue").op, "QueueEnqueueV2");
        assert_eq!(b.tensors.len(), 2);
        assert_eq!(b.tensors[0].op().op_type(), "QueueDequeueManyV2");
        assert_eq!(b.tensors[1].dtype(), DType::String);
        let close = node(&s, &b.runner.cancel_op);
        assert!(close.get_attr::<bool>("cancel_pending_enqueues").unwrap());
        assert_eq!(QueueRunnerSpec::all_in(&s).unwrap(), [b.runner]);
        // a second batch gets its own scope; up_to and padding change the ops
        let y = ops::placeholder(&s, DType::I32, Shape::from_dims(&[Some(5), None])).unwrap();
        let b2 = batch(
            &s,
            std::slice::from_ref(&y),
            2,
            &BatchOptions {
                enqueue_many: true,
                dynamic_pad: true,
                allow_smaller_final_batch: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(b2.queue.op().name(), "batch_1/padding_fifo_queue");
        assert_eq!(b2.tensors[0].op().op_type(), "QueueDequeueUpToV2");
        assert_eq!(
            node(&s, "batch_1/padding_fifo_queue")
                .get_attr::<Vec<Shape>>("shapes")
                .unwrap(),
            [Shape::from_dims(&[None])]
        );
        assert_eq!(node(&s, "batch_1/EnqueueMany").op, "QueueEnqueueManyV2");
        assert_eq!(QueueRunnerSpec::all_in(&s).unwrap().len(), 2);
    }

    #[test]
    fn shuffle_batch_sets_seeds_and_checks_capacity() {
        let s = Scope::new();
        let x = ops::scalar(&s, 1.0f32).unwrap();
        let o = ShuffleBatchOptions {
            seed: Some(5),
            ..Default::default()
        };
        let b = shuffle_batch(&s, std::slice::from_ref(&x), 2, 20, 10, &o).unwrap();
        let q = node(&s, b.queue.op().name());
        assert_eq!(q.op, "RandomShuffleQueueV2");
        assert_eq!(q.get_attr::<i64>("min_after_dequeue").unwrap(), 10);
        assert_eq!(
            q.get_attr::<i64>("seed").unwrap(),
            crate::ops::DEFAULT_GRAPH_SEED
        );
        assert_eq!(q.get_attr::<i64>("seed2").unwrap(), 5);
        let unseeded =
            shuffle_batch(&s, std::slice::from_ref(&x), 2, 20, 10, &Default::default()).unwrap();
        let q = node(&s, unseeded.queue.op().name());
        assert_eq!(q.get_attr::<i64>("seed").unwrap(), 0);
        let e = shuffle_batch(&s, std::slice::from_ref(&x), 2, 10, 10, &o).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument);
        assert!(
            e.message()
                .contains("must be bigger than min_after_dequeue"),
            "{e}"
        );
    }

    #[test]
    fn bad_inputs_are_rejected_at_build_time() {
        let s = Scope::new();
        let unknown = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
        let partial = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None])).unwrap();
        let scalar = ops::scalar(&s, 1.0f32).unwrap();
        let o = BatchOptions::default();
        let err = |r: Result<Batched>| r.unwrap_err().message().to_owned();
        assert!(err(batch(&s, &[], 1, &o)).contains("at least one tensor"));
        assert!(err(batch(&s, std::slice::from_ref(&scalar), 0, &o)).contains("batch_size"));
        assert!(err(batch(&s, std::slice::from_ref(&unknown), 1, &o)).contains("rank"));
        assert!(err(batch(&s, std::slice::from_ref(&partial), 1, &o)).contains("fully defined"));
        let many = BatchOptions {
            enqueue_many: true,
            ..Default::default()
        };
        assert!(err(batch(&s, std::slice::from_ref(&scalar), 1, &many)).contains("rank at least 1"));
        // given shapes override inference, and must match the tensors in number
        let given = BatchOptions {
            shapes: Some(vec![Shape::known(&[4])]),
            ..Default::default()
        };
        assert!(batch(&s, std::slice::from_ref(&partial), 1, &given).is_ok());
        let two = BatchOptions {
            shapes: Some(vec![Shape::scalar(); 2]),
            ..Default::default()
        };
        assert!(err(batch(&s, std::slice::from_ref(&scalar), 1, &two)).contains("2 shapes"));
    }

    #[test]
    fn local_initializer_runs_every_local_assign() {
        let s = Scope::new();
        let files = vec!["a".to_owned()];
        ops::string_input_producer(&s, &files, Some(2), false, None, 4).unwrap();
        ops::string_input_producer(&s, &files, Some(3), false, None, 4).unwrap();
        let init = local_variables_initializer(&s).unwrap();
        let n = node(&s, init.name());
        assert_eq!(n.op, "NoOp");
        assert_eq!(
            n.input,
            [
                "^input_producer/limit_epochs/epochs/Assign",
                "^input_producer_1/limit_epochs/epochs/Assign"
            ]
        );
        s.add_to_collection(LOCAL_VARIABLES, "stray");
        assert_eq!(
            local_variables_initializer(&s).unwrap_err().code(),
            crate::Code::NotFound
        );
    }
}
