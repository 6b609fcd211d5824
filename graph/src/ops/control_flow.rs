//! Control-flow primitives (TensorFlow's `control_flow_ops.cc`): `Switch` routes a
//! value to one of two outputs (the other is dead), `Merge` forwards its first live
//! input, `Enter`/`Exit` move values into and out of a loop frame,
//! `NextIteration` to the next iteration, `LoopCond` marks a loop's predicate and
//! `ControlTrigger` runs even when its inputs are dead. The `Ref*` forms carry
//! variable references. The executor gives these ops their meaning; their kernels
//! only forward values.

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape};

/// Registers the control-flow ops.
pub fn register_all_ops(r: &OpRegistry) {
    for (name, data, out) in [
        ("Switch", "data: T", "T"),
        ("RefSwitch", "data: Ref(T)", "Ref(T)"),
    ] {
        let mut b = OpDef::build(name)
            .input(data)
            .input("pred: bool")
            .output(&format!("output_false: {out}"))
            .output(&format!("output_true: {out}"))
            .attr("T: type")
            .shape_fn(switch_shape);
        if name == "RefSwitch" {
            b = b.allows_uninitialized_input();
        }
        r.register(b);
    }
    for (name, inputs, out) in [
        ("Merge", "inputs: N * T", "output: T"),
        ("RefMerge", "inputs: Ref(N * T)", "output: Ref(T)"),
    ] {
        r.register(
            OpDef::build(name)
                .input(inputs)
                .output(out)
                .output("value_index: int32")
                .attr("T: type")
                .attr("N: int >= 1")
                .shape_fn(merge_shape),
        );
    }
    for (name, arg) in [("Enter", "T"), ("RefEnter", "Ref(T)")] {
        r.register(
            OpDef::build(name)
                .input(&format!("data: {arg}"))
                .output(&format!("output: {arg}"))
                .attr("T: type")
                .attr("frame_name: string")
                .attr("is_constant: bool = false")
                .attr("parallel_iterations: int >= 1 = 10")
                .shape_fn(shape_fn::unchanged),
        );
    }
    for (name, arg) in [
        ("Exit", "T"),
        ("RefExit", "Ref(T)"),
        ("NextIteration", "T"),
        ("RefNextIteration", "Ref(T)"),
        ("RefIdentity", "Ref(T)"),
    ] {
        let mut b = OpDef::build(name)
            .input(&format!("data: {arg}"))
            .output(&format!("output: {arg}"))
            .attr("T: type")
            .shape_fn(shape_fn::unchanged);
        if name == "RefIdentity" {
            b = b.allows_uninitialized_input();
        }
        r.register(b);
    }
    r.register(
        OpDef::build("LoopCond")
            .input("input: bool")
            .output("output: bool")
            .shape_fn(shape_fn::unchanged),
    );
    r.register(OpDef::build("ControlTrigger").shape_fn(shape_fn::no_outputs));
}

fn switch_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let pred = c.input(1);
    if let Some(r) = pred.rank() {
        if r != 0 {
            return Err(crate::Status::invalid_argument(format!(
                "Switch predicate must be a scalar, got shape {pred}"
            )));
        }
    }
    let s = c.input(0);
    c.set_output(0, s.clone())?;
    c.set_output(1, s)
}

fn merge_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let mut s = c.input(0);
    for i in 1..c.num_inputs() {
        let o = c.input(i);
        s = match s.merge(&o) {
            Ok(m) => m,
            // Inputs of different ranks or sizes: TensorFlow relaxes to the common rank.
            Err(_) if s.rank() == o.rank() => {
                s.rank().map(Shape::unknown_with_rank).unwrap_or_default()
            }
            Err(_) => Shape::unknown(),
        };
    }
    c.set_output(0, s)?;
    c.set_output(1, Shape::scalar())
}

/// `Switch`: `(output_false, output_true)`; the untaken one is dead.
pub fn switch(s: &Scope, data: &Output, pred: &Output) -> Result<(Output, Output)> {
    let op = s.op("Switch").input(data).input(pred).build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `Merge`: `(output, value_index)`.
pub fn merge(s: &Scope, inputs: &[Output]) -> Result<(Output, Output)> {
    let op = s.op("Merge").input_list(inputs).build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `Enter` into frame `frame_name`.
pub fn enter(
    s: &Scope,
    data: &Output,
    frame_name: &str,
    is_constant: bool,
    parallel_iterations: i64,
) -> Result<Output> {
    s.op("Enter")
        .input(data)
        .attr("frame_name", frame_name)
        .attr("is_constant", is_constant)
        .attr("parallel_iterations", parallel_iterations)
        .build1()
}

/// `Exit`.
pub fn exit(s: &Scope, data: &Output) -> Result<Output> {
    s.op("Exit").input(data).build1()
}

/// `NextIteration`.
pub fn next_iteration(s: &Scope, data: &Output) -> Result<Output> {
    s.op("NextIteration").input(data).build1()
}

/// `LoopCond`.
pub fn loop_cond(s: &Scope, pred: &Output) -> Result<Output> {
    s.op("LoopCond").input(pred).build1()
}

/// `ControlTrigger`.
pub fn control_trigger(s: &Scope) -> Result<Operation> {
    s.op("ControlTrigger").build()
}
