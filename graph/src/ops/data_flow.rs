//! Data-flow ops (TensorFlow's `data_flow_ops.cc`): stacks, which keep values across
//! loop iterations (the gradients of while loops push forward values and pop them
//! in reverse), queues, DynamicStitch (which interleaves tensors by index; the
//! gradients of reductions over run-time axes emit it) and DynamicPartition (which
//! splits a tensor's slices by a partition id, the inverse of a stitch; sharded
//! embedding lookups route ids with it).
//!
//! - [`accumulator`] — conditional accumulators (`ConditionalAccumulator`,
//!   `AccumulatorApplyGradient`, `AccumulatorTakeGradient`, …), which aggregate
//!   the gradients of synchronous replicas.
//! - [`tensor_array`] — TensorArrays (`TensorArrayV3`, …) and the [`TensorArray`]
//!   builder.

pub mod accumulator;
pub mod tensor_array;

pub use accumulator::{AccumulatorOptions, ConditionalAccumulator, ReductionType};
pub use tensor_array::{TensorArray, TensorArrayOptions};

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape};

/// Registers the data-flow ops.
pub fn register_all_ops(r: &OpRegistry) {
    register_queues(r);
    accumulator::register_all_ops(r);
    tensor_array::register_all_ops(r);
    r.register(
        OpDef::build("DynamicPartition")
            .input("data: T")
            .input("partitions: int32")
            .output("outputs: num_partitions * T")
            .attr("num_partitions: int >= 1")
            .attr("T: type")
            .shape_fn(dynamic_partition_shape),
    );
    for name in ["DynamicStitch", "ParallelDynamicStitch"] {
        r.register(
            OpDef::build(name)
                .input("indices: N * int32")
                .input("data: N * T")
                .output("merged: T")
                .attr("N: int >= 1")
                .attr("T: type")
                .shape_fn(dynamic_stitch_shape),
        );
    }
    r.register(
        OpDef::build("StackV2")
            .input("max_size: int32")
            .output("handle: resource")
            .attr("elem_type: type")
            .attr("stack_name: string = ''")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("StackPushV2")
            .input("handle: resource")
            .input("elem: T")
            .output("output: T")
            .attr("T: type")
            .attr("swap_memory: bool = false")
            .stateful()
            .shape_fn(|c| {
                let s = c.input(1);
                c.set_output(0, s)
            }),
    );
    r.register(
        OpDef::build("StackPopV2")
            .input("handle: resource")
            .output("elem: elem_type")
            .attr("elem_type: type")
            .stateful(),
    );
    r.register(
        OpDef::build("StackCloseV2")
            .input("handle: resource")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
}

/// `DynamicStitch`: `[max index + 1] + data[0].shape[indices[0].rank:]`, the first
/// dimension known when every index input is a constant.
fn dynamic_stitch_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let n = c.num_inputs() / 2;
    let mut max_index: Option<i64> = Some(-1);
    for i in 0..n {
        let values = c.input_tensor(i).and_then(|t| t.to_f64_vec());
        max_index = match (max_index, values) {
            (Some(m), Some(v)) => Some(v.iter().fold(m, |m, &x| m.max(x as i64))),
            _ => None,
        };
    }
    let first = max_index.and_then(|m| usize::try_from(m + 1).ok());
    let (indices, data) = (c.input(0), c.input(n));
    let out = match (indices.rank(), data.dims()) {
        (Some(r), Some(d)) if d.len() >= r => {
            let mut dims = vec![first];
            dims.extend_from_slice(&d[r..]);
            Shape::from_dims(&dims)
        }
        _ => Shape::unknown(),
    };
    c.set_output(0, out)
}

/// `DynamicPartition`: every output is `[?] + data.shape[partitions.rank:]`, where
/// `partitions`' shape must prefix `data`'s (TensorFlow's `MergePrefix`); unknown
/// when the rank of `partitions` is.
fn dynamic_partition_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let (data, partitions) = (c.input(0), c.input(1));
    let out = match (data.dims(), partitions.dims()) {
        (_, None) => Shape::unknown(),
        (None, Some(_)) => Shape::unknown(),
        (Some(d), Some(p)) => {
            shape_fn::with_rank_at_least(&data, p.len())?;
            for (&a, &b) in d.iter().zip(p) {
                shape_fn::merge_dim(a, b)?;
            }
            let mut dims = vec![None];
            dims.extend_from_slice(&d[p.len()..]);
            Shape::from_dims(&dims)
        }
    };
    for i in 0..c.num_outputs() {
        c.set_output(i, out.clone())?;
    }
    Ok(())
}

/// `DynamicPartition`: splits the slices of `data` by `partitions` (int32 ids in
/// `[0, num_partitions)`, of a shape that prefixes `data`'s) into
/// `num_partitions` outputs, `outputs[p]` holding the slices whose id is `p` in
/// their order in `data`.
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let data = ops::placeholder(&s, DType::F32, Shape::known(&[4, 3])).unwrap();
/// let ids = ops::constant(&s, Tensor::vector(&[1i32, 0, 1, 1])).unwrap();
/// let parts = ops::dynamic_partition(&s, &data, &ids, 2).unwrap();
/// assert_eq!(parts.len(), 2);
/// assert_eq!(parts[1].shape(), Shape::from_dims(&[None, Some(3)]));
/// ```
pub fn dynamic_partition(
    s: &Scope,
    data: &Output,
    partitions: &Output,
    num_partitions: usize,
) -> Result<Vec<Output>> {
    Ok(s.op("DynamicPartition")
        .input(data)
        .input(partitions)
        .attr("num_partitions", num_partitions as i64)
        .build()?
        .outputs())
}

/// `DynamicStitch`: `merged[indices[m][i, ...]] = data[m][i, ..., :]`, the later
/// input (then the later position) winning for a repeated index; as many rows as
/// the largest index plus one.
pub fn dynamic_stitch(s: &Scope, indices: &[Output], data: &[Output]) -> Result<Output> {
    stitch(s, "DynamicStitch", indices, data)
}

/// `ParallelDynamicStitch`: [`dynamic_stitch`] where the order among repeated
/// indices is left undefined (actorflow's kernel applies the same order).
pub fn parallel_dynamic_stitch(s: &Scope, indices: &[Output], data: &[Output]) -> Result<Output> {
    stitch(s, "ParallelDynamicStitch", indices, data)
}

fn stitch(s: &Scope, op: &str, indices: &[Output], data: &[Output]) -> Result<Output> {
    if indices.len() != data.len() || indices.is_empty() {
        return Err(crate::Status::invalid_argument(format!(
            "{op} needs as many index tensors as data tensors (at least one), got {} and {}",
            indices.len(),
            data.len()
        )));
    }
    s.op(op).input_list(indices).input_list(data).build1()
}

fn register_queues(r: &OpRegistry) {
    let common = |b: crate::op_def::OpDefBuilder| {
        b.output("handle: resource")
            .attr("capacity: int = -1")
            .attr("container: string = ''")
            .attr("shared_name: string = ''")
            .stateful()
            .shape_fn(shape_fn::scalar)
    };
    for name in ["FIFOQueueV2", "PaddingFIFOQueueV2"] {
        r.register(common(
            OpDef::build(name)
                .attr("component_types: list(type) >= 1")
                .attr("shapes: list(shape) >= 0 = []"),
        ));
    }
    r.register(common(
        OpDef::build("RandomShuffleQueueV2")
            .attr("component_types: list(type) >= 1")
            .attr("shapes: list(shape) >= 0 = []")
            .attr("min_after_dequeue: int = 0")
            .attr("seed: int = 0")
            .attr("seed2: int = 0"),
    ));
    r.register(common(
        OpDef::build("PriorityQueueV2")
            .attr("component_types: list(type) >= 0 = []")
            .attr("shapes: list(shape) >= 0"),
    ));
    for name in ["QueueEnqueueV2", "QueueEnqueueManyV2"] {
        r.register(
            OpDef::build(name)
                .input("handle: resource")
                .input("components: Tcomponents")
                .attr("Tcomponents: list(type) >= 1")
                .attr("timeout_ms: int = -1")
                .stateful()
                .asynchronous()
                .shape_fn(shape_fn::no_outputs),
        );
    }
    r.register(
        OpDef::build("QueueDequeueV2")
            .input("handle: resource")
            .output("components: component_types")
            .attr("component_types: list(type) >= 1")
            .attr("timeout_ms: int = -1")
            .stateful()
            .asynchronous(),
    );
    for name in ["QueueDequeueManyV2", "QueueDequeueUpToV2"] {
        r.register(
            OpDef::build(name)
                .input("handle: resource")
                .input("n: int32")
                .output("components: component_types")
                .attr("component_types: list(type) >= 1")
                .attr("timeout_ms: int = -1")
                .stateful()
                .asynchronous(),
        );
    }
    r.register(
        OpDef::build("QueueCloseV2")
            .input("handle: resource")
            .attr("cancel_pending_enqueues: bool = false")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
    r.register(
        OpDef::build("QueueIsClosedV2")
            .input("handle: resource")
            .output("is_closed: bool")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("QueueSizeV2")
            .input("handle: resource")
            .output("size: int32")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
}

/// Options of a queue.
#[derive(Clone, Debug, Default)]
pub struct QueueOptions {
    /// Element shapes (empty: unspecified).
    pub shapes: Vec<Shape>,
    /// Maximum elements (`None`: unbounded).
    pub capacity: Option<i64>,
    /// Shared name (empty: the node's name).
    pub shared_name: String,
    /// Container (empty: the session's).
    pub container: String,
}

fn queue_op(s: &Scope, op: &str, types: &[DType], o: &QueueOptions) -> crate::builder::OpBuilder {
    s.op(op)
        .attr("component_types", types.to_vec())
        .attr("shapes", o.shapes.clone())
        .attr("capacity", o.capacity.unwrap_or(-1))
        .attr("shared_name", o.shared_name.as_str())
        .attr("container", o.container.as_str())
}

/// `FIFOQueueV2`: a first-in first-out queue of tuples of `types`.
pub fn fifo_queue(s: &Scope, types: &[DType], o: &QueueOptions) -> Result<Output> {
    queue_op(s, "FIFOQueueV2", types, o).build1()
}

/// `PaddingFIFOQueueV2`: FIFO; batches pad elements to a common shape.
pub fn padding_fifo_queue(s: &Scope, types: &[DType], o: &QueueOptions) -> Result<Output> {
    queue_op(s, "PaddingFIFOQueueV2", types, o).build1()
}

/// `PriorityQueueV2`: elements carry an int64 priority first; smallest first.
pub fn priority_queue(s: &Scope, types: &[DType], o: &QueueOptions) -> Result<Output> {
    queue_op(s, "PriorityQueueV2", types, o).build1()
}

/// `RandomShuffleQueueV2`: dequeues a random element, keeping `min_after_dequeue`.
pub fn random_shuffle_queue(
    s: &Scope,
    types: &[DType],
    o: &QueueOptions,
    min_after_dequeue: i64,
    seed: i64,
    seed2: i64,
) -> Result<Output> {
    queue_op(s, "RandomShuffleQueueV2", types, o)
        .attr("min_after_dequeue", min_after_dequeue)
        .attr("seed", seed)
        .attr("seed2", seed2)
        .build1()
}

/// `QueueEnqueueV2`.
pub fn queue_enqueue(s: &Scope, queue: &Output, components: &[Output]) -> Result<Operation> {
    s.op("QueueEnqueueV2")
        .input(queue)
        .input_list(components)
        .build()
}

/// `QueueEnqueueManyV2`.
pub fn queue_enqueue_many(s: &Scope, queue: &Output, components: &[Output]) -> Result<Operation> {
    s.op("QueueEnqueueManyV2")
        .input(queue)
        .input_list(components)
        .build()
}

/// `QueueDequeueV2`.
pub fn queue_dequeue(s: &Scope, queue: &Output, types: &[DType]) -> Result<Vec<Output>> {
    Ok(s.op("QueueDequeueV2")
        .input(queue)
        .attr("component_types", types.to_vec())
        .build()?
        .outputs())
}

/// `QueueDequeueManyV2`.
pub fn queue_dequeue_many(
    s: &Scope,
    queue: &Output,
    n: &Output,
    types: &[DType],
) -> Result<Vec<Output>> {
    Ok(s.op("QueueDequeueManyV2")
        .input(queue)
        .input(n)
        .attr("component_types", types.to_vec())
        .build()?
        .outputs())
}

/// `QueueDequeueUpToV2`.
pub fn queue_dequeue_up_to(
    s: &Scope,
    queue: &Output,
    n: &Output,
    types: &[DType],
) -> Result<Vec<Output>> {
    Ok(s.op("QueueDequeueUpToV2")
        .input(queue)
        .input(n)
        .attr("component_types", types.to_vec())
        .build()?
        .outputs())
}

/// `QueueCloseV2`.
pub fn queue_close(s: &Scope, queue: &Output, cancel_pending_enqueues: bool) -> Result<Operation> {
    s.op("QueueCloseV2")
        .input(queue)
        .attr("cancel_pending_enqueues", cancel_pending_enqueues)
        .build()
}

/// `QueueSizeV2`.
pub fn queue_size(s: &Scope, queue: &Output) -> Result<Output> {
    s.op("QueueSizeV2").input(queue).build1()
}

/// `QueueIsClosedV2`.
pub fn queue_is_closed(s: &Scope, queue: &Output) -> Result<Output> {
    s.op("QueueIsClosedV2").input(queue).build1()
}

/// `StackV2`: a stack of `elem_type` values holding at most `max_size` (-1: no
/// bound), living for the step.
pub fn stack(s: &Scope, max_size: &Output, elem_type: DType, stack_name: &str) -> Result<Output> {
    s.op("StackV2")
        .input(max_size)
        .attr("elem_type", elem_type)
        .attr("stack_name", stack_name)
        .build1()
}

/// `StackPushV2`: pushes `elem` and outputs it.
pub fn stack_push(s: &Scope, handle: &Output, elem: &Output) -> Result<Output> {
    s.op("StackPushV2").input(handle).input(elem).build1()
}

/// `StackPopV2`.
pub fn stack_pop(s: &Scope, handle: &Output, elem_type: DType) -> Result<Output> {
    s.op("StackPopV2")
        .input(handle)
        .attr("elem_type", elem_type)
        .build1()
}

/// `StackCloseV2`.
pub fn stack_close(s: &Scope, handle: &Output) -> Result<Operation> {
    s.op("StackCloseV2").input(handle).build()
}

#[cfg(test)]
mod tests {
    use crate::builder::Scope;
    use crate::ops::{constant, placeholder};
    use crate::{DType, Shape, Tensor};

    #[test]
    fn dynamic_partition_shapes() {
        let s = Scope::new();
        let data = placeholder(&s, DType::F32, Shape::known(&[4, 3, 2])).unwrap();
        let ids = placeholder(&s, DType::I32, Shape::known(&[4, 3])).unwrap();
        let parts = crate::ops::dynamic_partition(&s, &data, &ids, 3).unwrap();
        assert_eq!(parts.len(), 3);
        for p in &parts {
            assert_eq!(p.shape(), Shape::from_dims(&[None, Some(2)]));
        }
        let bad = placeholder(&s, DType::I32, Shape::known(&[5])).unwrap();
        let e = crate::ops::dynamic_partition(&s, &data, &bad, 2).unwrap_err();
        assert!(
            e.message()
                .contains("Dimensions must be equal, but are 4 and 5"),
            "{e}"
        );
        let deep = placeholder(&s, DType::I32, Shape::known(&[4, 3, 2, 1])).unwrap();
        let e = crate::ops::dynamic_partition(&s, &data, &deep, 2).unwrap_err();
        assert!(e.message().contains("at least rank 4 but is rank 3"), "{e}");
        let unknown = placeholder(&s, DType::I32, Shape::unknown()).unwrap();
        let parts = crate::ops::dynamic_partition(&s, &data, &unknown, 2).unwrap();
        assert_eq!(parts[0].shape(), Shape::unknown());
        let stitched =
            crate::ops::dynamic_stitch(&s, std::slice::from_ref(&ids), std::slice::from_ref(&data))
                .unwrap();
        assert_eq!(stitched.shape(), Shape::from_dims(&[None, Some(2)]));
        assert!(crate::ops::parallel_dynamic_stitch(&s, &[ids], &[]).is_err());
    }

    #[test]
    fn dynamic_stitch_shapes() {
        let s = Scope::new();
        let i0 = constant(&s, Tensor::vector(&[0i32, 4])).unwrap();
        let i1 = constant(&s, Tensor::new(&[1, 1], vec![2i32]).unwrap()).unwrap();
        let d0 = placeholder(&s, DType::F32, Shape::from_dims(&[Some(2), None])).unwrap();
        let d1 = placeholder(&s, DType::F32, Shape::from_dims(&[Some(1), Some(1), None])).unwrap();
        let stitch = |indices: &[crate::builder::Output]| {
            s.op("DynamicStitch")
                .input_list(indices)
                .input_list(&[d0.clone(), d1.clone()])
                .build1()
                .unwrap()
        };
        // Constant indices give the first dimension: the largest index plus one.
        let y = stitch(&[i0.clone(), i1]);
        assert_eq!(y.shape(), Shape::from_dims(&[Some(5), None]));
        let fed = placeholder(&s, DType::I32, Shape::known(&[1, 1])).unwrap();
        let y = stitch(&[i0, fed]);
        assert_eq!(y.shape(), Shape::from_dims(&[None, None]));
    }
}
