//! CPU kernels of the data-flow ops.
//!
//! - [`stack`] — `StackV2` and friends.
//! - [`tensor_array`] — `TensorArrayV3` and the ops on TensorArrays.
//! - [`queue_ops`] — the queue ops (queues themselves: [`crate::queue`]).
//! - [`dynamic_stitch`] — `DynamicStitch`, `ParallelDynamicStitch`.
//! - [`dynamic_partition`] — `DynamicPartition`.
//! - [`accumulator_ops`] — the conditional accumulator ops (accumulators
//!   themselves: [`crate::accumulator`]).

pub mod accumulator_ops;
pub mod dynamic_partition;
pub mod dynamic_stitch;
pub mod queue_ops;
pub mod stack;
pub mod tensor_array;

use crate::registry::KernelRegistry;

/// Registers the data-flow kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    queue_ops::register_all_kernels(r);
    stack::register_all_kernels(r);
    tensor_array::register_all_kernels(r);
    dynamic_stitch::register_all_kernels(r);
    dynamic_partition::register_all_kernels(r);
    accumulator_ops::register_all_kernels(r);
}
