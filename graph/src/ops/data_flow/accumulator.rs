//! Conditional accumulators (TensorFlow's `ConditionalAccumulator` family in
//! `data_flow_ops.cc` and `tf.compat.v1.ConditionalAccumulator`): a shared
//! aggregate of gradients that drops stale ones.
//!
//! An accumulator holds a global step, a count and a running sum of gradients of
//! one dtype and (partial) shape:
//!
//! - `AccumulatorApplyGradient(handle, local_step, gradient)` adds `gradient` when
//!   `local_step >= ` the accumulator's global step, and silently drops it
//!   otherwise (a stale gradient, computed from variables that have since
//!   changed). It never waits.
//! - `AccumulatorTakeGradient(handle, num_required)` waits (asynchronously, no
//!   thread blocked) until at least `num_required` gradients are in, then outputs
//!   their mean (`reduction_type = "MEAN"`) or sum (`"SUM"`), resets the count and
//!   increments the global step.
//! - `AccumulatorSetGlobalStep` sets the global step; `AccumulatorNumAccumulated`
//!   reads the count.
//!
//! `ConditionalAccumulator` outputs a `Ref(string)` handle (the two strings
//! container and name, as TensorFlow's); `ResourceConditionalAccumulator` a
//! `resource` handle consumed by the `ResourceAccumulator*` ops. Both find or
//! create the accumulator in the device's resource manager under `container`
//! (default: the session's) and `shared_name` (default: the node's name), so
//! accumulators with one shared name are one accumulator. [`ConditionalAccumulator`]
//! builds either kind and the ops on it.

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef, ShapeFn};
use crate::ops::array::with_rank;
use crate::train::variables::with_free_name;
use crate::{DType, OpRegistry, Result, Shape, Status};

/// Registers the accumulator ops (both handle kinds).
pub fn register_all_ops(r: &OpRegistry) {
    for (prefix, handle) in [("", "Ref(string)"), ("Resource", "resource")] {
        let (create, handle_shape): (_, ShapeFn) = if prefix.is_empty() {
            // The reference handle is the string pair (container, name).
            ("ConditionalAccumulator", |c| {
                c.set_output(0, Shape::known(&[2]))
            })
        } else {
            ("ResourceConditionalAccumulator", shape_fn::scalar)
        };
        r.register(
            OpDef::build(create)
                .output(&format!("handle: {handle}"))
                .attr("dtype: numbertype")
                .attr("shape: shape")
                .attr("container: string = ''")
                .attr("shared_name: string = ''")
                .attr("reduction_type: { 'MEAN', 'SUM' } = 'MEAN'")
                .stateful()
                .shape_fn(handle_shape),
        );
        r.register(
            OpDef::build(&format!("{prefix}AccumulatorApplyGradient"))
                .input(&format!("handle: {handle}"))
                .input("local_step: int64")
                .input("gradient: dtype")
                .attr("dtype: numbertype")
                .stateful()
                .shape_fn(|c| {
                    with_rank(&c.input(1), 0, "local_step")?;
                    Ok(())
                }),
        );
        r.register(
            OpDef::build(&format!("{prefix}AccumulatorTakeGradient"))
                .input(&format!("handle: {handle}"))
                .input("num_required: int32")
                .output("average: dtype")
                .attr("dtype: numbertype")
                .stateful()
                .asynchronous()
                .shape_fn(|c| {
                    with_rank(&c.input(1), 0, "num_required")?;
                    // The accumulator's shape is not known here.
                    c.set_output(0, Shape::unknown())
                }),
        );
        r.register(
            OpDef::build(&format!("{prefix}AccumulatorNumAccumulated"))
                .input(&format!("handle: {handle}"))
                .output("num_accumulated: int32")
                .stateful()
                .shape_fn(shape_fn::scalar),
        );
        r.register(
            OpDef::build(&format!("{prefix}AccumulatorSetGlobalStep"))
                .input(&format!("handle: {handle}"))
                .input("new_global_step: int64")
                .stateful()
                .shape_fn(set_global_step_shape),
        );
    }
}

fn set_global_step_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(1), 0, "new_global_step")?;
    Ok(())
}

/// How an accumulator reduces the gradients it took (`reduction_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReductionType {
    /// Their mean (TensorFlow's default).
    #[default]
    Mean,
    /// Their sum.
    Sum,
}

impl ReductionType {
    /// The attribute value: `"MEAN"` or `"SUM"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReductionType::Mean => "MEAN",
            ReductionType::Sum => "SUM",
        }
    }
}

/// Options of a conditional accumulator.
#[derive(Clone, Debug, Default)]
pub struct AccumulatorOptions {
    /// Shared name (empty: the node's name).
    pub shared_name: String,
    /// Container (empty: the session's).
    pub container: String,
    /// Mean or sum.
    pub reduction_type: ReductionType,
    /// Build `ResourceConditionalAccumulator` (a `resource` handle) instead of
    /// `ConditionalAccumulator` (a `Ref(string)` handle).
    pub resource: bool,
}

/// An accumulator in a graph under construction (TensorFlow's
/// `ConditionalAccumulator` Python class): its handle, dtype and shape, and the
/// builders of the ops on it. See the module docs.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::ops::{self, AccumulatorOptions, ConditionalAccumulator};
/// use actorflow_graph::{DType, Shape, Tensor};
/// let s = Scope::new();
/// let acc = ConditionalAccumulator::new(&s, DType::F32, Shape::known(&[2]), &AccumulatorOptions::default()).unwrap();
/// let g = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
/// let step = ops::scalar(&s, 0i64).unwrap();
/// let apply = acc.apply_grad(&s, &g, &step).unwrap();
/// let avg = acc.take_grad(&s, &ops::scalar(&s, 1i32).unwrap()).unwrap();
/// assert_eq!(apply.op_type(), "AccumulatorApplyGradient");
/// assert_eq!(avg.shape(), Shape::known(&[2]));
/// // a gradient of another shape is refused where it is built
/// let bad = ops::constant(&s, Tensor::vector(&[1.0f32])).unwrap();
/// assert!(acc.apply_grad(&s, &bad, &step).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct ConditionalAccumulator {
    /// The handle: `Ref(string)` or `resource`.
    pub handle: Output,
    dtype: DType,
    shape: Shape,
}

impl ConditionalAccumulator {
    /// Adds a `ConditionalAccumulator` (or, with `o.resource`,
    /// `ResourceConditionalAccumulator`) node named `conditional_accumulator`
    /// (made unique) for gradients of `dtype` and `shape`.
    pub fn new(
        s: &Scope,
        dtype: DType,
        shape: Shape,
        o: &AccumulatorOptions,
    ) -> Result<ConditionalAccumulator> {
        let op = if o.resource {
            "ResourceConditionalAccumulator"
        } else {
            "ConditionalAccumulator"
        };
        let handle = with_free_name("conditional_accumulator", |name| {
            s.op(op)
                .name(name)
                .attr("dtype", dtype)
                .attr("shape", shape.clone())
                .attr("shared_name", o.shared_name.as_str())
                .attr("container", o.container.as_str())
                .attr("reduction_type", o.reduction_type.as_str())
                .build1()
        })?;
        Ok(ConditionalAccumulator {
            handle,
            dtype,
            shape,
        })
    }

    /// The gradients' dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The gradients' (partial) shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    fn is_resource(&self) -> bool {
        self.handle.dtype() == DType::Resource
    }

    fn op_name(&self, base: &str) -> String {
        if self.is_resource() {
            format!("Resource{base}")
        } else {
            base.to_owned()
        }
    }

    /// `AccumulatorApplyGradient`: adds `grad` unless `local_step` (cast to int64
    /// when it is another integer type) is behind the accumulator's global step.
    /// A gradient of another dtype, or of a static shape incompatible with the
    /// accumulator's, is `InvalidArgument` here.
    pub fn apply_grad(&self, s: &Scope, grad: &Output, local_step: &Output) -> Result<Operation> {
        if grad.dtype() != self.dtype {
            return Err(Status::invalid_argument(format!(
                "gradient {} is {}, the accumulator {} holds {}",
                grad.name(),
                grad.dtype(),
                self.handle.op().name(),
                self.dtype
            )));
        }
        if !self.shape.is_compatible(&grad.shape()) {
            return Err(Status::invalid_argument(format!(
                "Shapes {} and {} are incompatible: gradient {} for accumulator {}",
                grad.shape(),
                self.shape,
                grad.name(),
                self.handle.op().name()
            )));
        }
        let step = match local_step.dtype() {
            DType::I64 => local_step.clone(),
            t if t.is_integer() => crate::ops::cast(s, local_step, DType::I64)?,
            t => {
                return Err(Status::invalid_argument(format!(
                    "local_step {} must be an integer, is {t}",
                    local_step.name()
                )))
            }
        };
        s.op(&self.op_name("AccumulatorApplyGradient"))
            .input(&self.handle)
            .input(&step)
            .input(grad)
            .attr("dtype", self.dtype)
            .build()
    }

    /// `AccumulatorTakeGradient`: waits for `num_required` (int32 scalar)
    /// gradients and outputs their mean or sum, shaped as the accumulator.
    pub fn take_grad(&self, s: &Scope, num_required: &Output) -> Result<Output> {
        let op = s
            .op(&self.op_name("AccumulatorTakeGradient"))
            .input(&self.handle)
            .input(num_required)
            .attr("dtype", self.dtype)
            .build()?;
        s.set_output_shape(&op, 0, self.shape.clone()).output(0)
    }

    /// `AccumulatorNumAccumulated`: the gradients accumulated so far (int32).
    pub fn num_accumulated(&self, s: &Scope) -> Result<Output> {
        s.op(&self.op_name("AccumulatorNumAccumulated"))
            .input(&self.handle)
            .build1()
    }

    /// `AccumulatorSetGlobalStep` from `new_global_step` (cast to int64 when it is
    /// another integer type), named `name` (made unique) in `s`.
    pub fn set_global_step(
        &self,
        s: &Scope,
        new_global_step: &Output,
        name: &str,
    ) -> Result<Operation> {
        let step = if new_global_step.dtype() == DType::I64 {
            new_global_step.clone()
        } else {
            crate::ops::cast(s, new_global_step, DType::I64)?
        };
        with_free_name(name, |name| {
            s.op(&self.op_name("AccumulatorSetGlobalStep"))
                .name(name)
                .input(&self.handle)
                .input(&step)
                .build()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::Tensor;

    #[test]
    fn both_handle_kinds_build_tensorflows_ops() {
        let s = Scope::new();
        for resource in [false, true] {
            let o = AccumulatorOptions {
                shared_name: "w:0/grad_accum".into(),
                reduction_type: ReductionType::Sum,
                resource,
                ..Default::default()
            };
            let acc = ConditionalAccumulator::new(&s, DType::F64, Shape::known(&[3]), &o).unwrap();
            let g = ops::constant(&s, Tensor::vector(&[1.0f64, 2.0, 3.0])).unwrap();
            let step = ops::scalar(&s, 4i32).unwrap();
            let apply = acc.apply_grad(&s, &g, &step).unwrap();
            let take = acc.take_grad(&s, &ops::scalar(&s, 2i32).unwrap()).unwrap();
            let n = acc.num_accumulated(&s).unwrap();
            let set = acc.set_global_step(&s, &step, "SetGlobalStep").unwrap();
            let gd = s.graph_def();
            let p = if resource { "Resource" } else { "" };
            let create = gd.find(acc.handle.op().name()).unwrap();
            assert_eq!(
                create.op,
                if resource {
                    "ResourceConditionalAccumulator"
                } else {
                    "ConditionalAccumulator"
                }
            );
            assert_eq!(create.get_attr::<String>("reduction_type").unwrap(), "SUM");
            assert_eq!(
                create.get_attr::<String>("shared_name").unwrap(),
                "w:0/grad_accum"
            );
            assert_eq!(apply.op_type(), format!("{p}AccumulatorApplyGradient"));
            // the int32 step is cast to int64
            let cast = gd.find(&gd.find(apply.name()).unwrap().input[1]).unwrap();
            assert_eq!(cast.op, "Cast");
            assert_eq!(take.op().op_type(), format!("{p}AccumulatorTakeGradient"));
            assert_eq!(take.shape(), Shape::known(&[3]));
            assert_eq!(take.dtype(), DType::F64);
            assert_eq!(n.dtype(), DType::I32);
            assert_eq!(set.op_type(), format!("{p}AccumulatorSetGlobalStep"));
            assert!(set.name().starts_with("SetGlobalStep"));
        }
        assert_eq!(
            s.graph_def()
                .find("conditional_accumulator")
                .map(|n| n.op.clone()),
            Some("ConditionalAccumulator".to_owned())
        );
        assert!(s.graph_def().find("conditional_accumulator_1").is_some());
    }

    #[test]
    fn bad_arguments_are_refused_where_built() {
        let s = Scope::new();
        let acc = ConditionalAccumulator::new(
            &s,
            DType::F32,
            Shape::from_dims(&[None, Some(2)]),
            &AccumulatorOptions::default(),
        )
        .unwrap();
        let step = ops::scalar(&s, 0i64).unwrap();
        let ok = ops::placeholder(&s, DType::F32, Shape::from_dims(&[Some(5), Some(2)])).unwrap();
        acc.apply_grad(&s, &ok, &step).unwrap();
        let wrong_dtype = ops::constant(&s, Tensor::vector(&[1.0f64, 2.0])).unwrap();
        let e = acc.apply_grad(&s, &wrong_dtype, &step).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument);
        let wrong_shape = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        let e = acc.apply_grad(&s, &wrong_shape, &step).unwrap_err();
        assert!(e.message().contains("incompatible"), "{e}");
        let float_step = ops::scalar(&s, 0.5f32).unwrap();
        assert!(acc.apply_grad(&s, &ok, &float_step).is_err());
        // the op's own shape function checks the step's rank
        let vec_step = ops::constant(&s, Tensor::vector(&[0i64, 1])).unwrap();
        let e = s
            .op("AccumulatorApplyGradient")
            .input(&acc.handle)
            .input(&vec_step)
            .input(&ok)
            .build()
            .unwrap_err();
        assert!(e.message().contains("rank 0"), "{e}");
        // an unknown reduction is not an allowed value
        let e = s
            .op("ConditionalAccumulator")
            .attr("dtype", DType::F32)
            .attr("shape", Shape::scalar())
            .attr("reduction_type", "MAX")
            .build()
            .unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument);
    }
}
