//! Logging ops (TensorFlow's `logging_ops.cc`): `Assert`, which fails the step
//! with `InvalidArgument` when its condition is false, printing its data.

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, OpDef};
use crate::{OpRegistry, Result};

/// Registers the logging ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("Assert")
            .input("condition: bool")
            .input("data: T")
            .attr("T: list(type)")
            .attr("summarize: int = 3")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
}

/// `Assert`: fails the step with `InvalidArgument` when the scalar `condition` is
/// false, the message listing the first `summarize` elements of each of `data`.
pub fn assert(s: &Scope, condition: &Output, data: &[Output], summarize: i64) -> Result<Operation> {
    s.op("Assert")
        .input(condition)
        .input_list(data)
        .attr("summarize", summarize)
        .build()
}
