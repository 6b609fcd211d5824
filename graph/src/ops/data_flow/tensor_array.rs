//! TensorArrays (TensorFlow's `TensorArrayV3` family and Python's `tf.TensorArray`
//! in graph mode): a per-step array of tensors, written and read by index, that a
//! `while_loop` fills one element per iteration (the building block of `map_fn`,
//! `scan` and `dynamic_rnn`).
//!
//! Every op on an array takes its `handle` and a `flow` scalar and the ops that
//! change it return a new flow: chaining flows orders the ops through data edges,
//! which is what carries the order through loop frames and gradients. The
//! [`TensorArray`] builder holds a handle and the latest flow; its mutating methods
//! return a new `TensorArray` with the new flow, as Python's do.
//!
//! Kernels: `kernels::cpu::data_flow::tensor_array`; gradients:
//! `gradients::tensor_array_grad`.

use std::sync::{Arc, Mutex};

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{ops, DType, OpRegistry, Result, Shape, Status};

/// Registers the TensorArray ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("TensorArrayV3")
            .input("size: int32")
            .output("handle: resource")
            .output("flow: float")
            .attr("dtype: type")
            .attr("element_shape: shape = { unknown_rank: true }")
            .attr("dynamic_size: bool = false")
            .attr("clear_after_read: bool = true")
            .attr("identical_element_shapes: bool = false")
            .attr("tensor_array_name: string = ''")
            .stateful()
            .shape_fn(handle_and_flow),
    );
    r.register(
        OpDef::build("TensorArrayGradV3")
            .input("handle: resource")
            .input("flow_in: float")
            .output("grad_handle: resource")
            .output("flow_out: float")
            .attr("source: string")
            .stateful()
            .shape_fn(handle_and_flow),
    );
    r.register(
        OpDef::build("TensorArrayGradWithShape")
            .input("handle: resource")
            .input("flow_in: float")
            .input("shape_to_prepend: int32")
            .output("grad_handle: resource")
            .output("flow_out: float")
            .attr("source: string")
            .stateful()
            .shape_fn(handle_and_flow),
    );
    r.register(
        OpDef::build("TensorArrayWriteV3")
            .input("handle: resource")
            .input("index: int32")
            .input("value: T")
            .input("flow_in: float")
            .output("flow_out: float")
            .attr("T: type")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("TensorArrayReadV3")
            .input("handle: resource")
            .input("index: int32")
            .input("flow_in: float")
            .output("value: dtype")
            .attr("dtype: type")
            .stateful(),
    );
    r.register(
        OpDef::build("TensorArrayGatherV3")
            .input("handle: resource")
            .input("indices: int32")
            .input("flow_in: float")
            .output("value: dtype")
            .attr("dtype: type")
            .attr("element_shape: shape = { unknown_rank: true }")
            .stateful()
            .shape_fn(gather_shape),
    );
    r.register(
        OpDef::build("TensorArrayScatterV3")
            .input("handle: resource")
            .input("indices: int32")
            .input("value: T")
            .input("flow_in: float")
            .output("flow_out: float")
            .attr("T: type")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("TensorArrayConcatV3")
            .input("handle: resource")
            .input("flow_in: float")
            .output("value: dtype")
            .output("lengths: int64")
            .attr("dtype: type")
            .attr("element_shape_except0: shape = { unknown_rank: true }")
            .stateful()
            .shape_fn(concat_shape),
    );
    r.register(
        OpDef::build("TensorArraySplitV3")
            .input("handle: resource")
            .input("value: T")
            .input("lengths: int64")
            .input("flow_in: float")
            .output("flow_out: float")
            .attr("T: type")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("TensorArraySizeV3")
            .input("handle: resource")
            .input("flow_in: float")
            .output("size: int32")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("TensorArrayCloseV3")
            .input("handle: resource")
            .stateful()
            .shape_fn(shape_fn::no_outputs),
    );
}

/// The handle (a `[2]` vector in TensorFlow's shape functions, a legacy of string
/// handles) and the flow scalar.
fn handle_and_flow(c: &mut InferenceContext<'_>) -> Result<()> {
    c.set_output(0, Shape::known(&[2]))?;
    c.set_output(1, Shape::scalar())
}

/// `[len(indices)] + element_shape`.
fn gather_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let n = match c.input(1).dims() {
        Some([n]) => *n,
        _ => None,
    };
    let element: Shape = c.attr("element_shape")?;
    let out = match element.dims() {
        Some(d) => {
            let mut all = vec![n];
            all.extend_from_slice(d);
            Shape::from_dims(&all)
        }
        None => Shape::unknown(),
    };
    c.set_output(0, out)
}

/// `[?] + element_shape_except0` and a vector of lengths.
fn concat_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let rest: Shape = c.attr("element_shape_except0")?;
    let out = match rest.dims() {
        Some(d) => {
            let mut all = vec![None];
            all.extend_from_slice(d);
            Shape::from_dims(&all)
        }
        None => Shape::unknown(),
    };
    c.set_output(0, out)?;
    c.set_output(1, Shape::from_dims(&[None]))
}

/// How [`TensorArray::new`] makes an array (Python's `tf.TensorArray` arguments).
#[derive(Clone, Debug)]
pub struct TensorArrayOptions {
    /// The shape of every element, as far as known.
    pub element_shape: Shape,
    /// Writes past the end grow the array.
    pub dynamic_size: bool,
    /// A read releases the element (it cannot be read again).
    pub clear_after_read: bool,
    /// Every element has the same shape: the first write fixes it, and later writes
    /// are checked against it (Python's `infer_shape`).
    pub infer_shape: bool,
    /// The array's name in its container (default: the op's name).
    pub tensor_array_name: String,
}

impl Default for TensorArrayOptions {
    fn default() -> Self {
        TensorArrayOptions {
            element_shape: Shape::unknown(),
            dynamic_size: false,
            clear_after_read: true,
            infer_shape: true,
            tensor_array_name: String::new(),
        }
    }
}

/// A TensorArray in a graph being built: its handle and its latest flow; see the
/// module docs. Copies made by the mutating methods share the element shape
/// learned from writes, as Python's do.
#[derive(Clone, Debug)]
pub struct TensorArray {
    handle: Output,
    flow: Output,
    dtype: DType,
    infer_shape: bool,
    element_shape: Arc<Mutex<Shape>>,
}

impl TensorArray {
    /// `TensorArrayV3`: a new array of `size` (an `int32` scalar) elements of
    /// `dtype`.
    pub fn new(
        s: &Scope,
        dtype: DType,
        size: &Output,
        options: &TensorArrayOptions,
    ) -> Result<TensorArray> {
        let op = s
            .op("TensorArrayV3")
            .input(size)
            .attr("dtype", dtype)
            .attr("element_shape", options.element_shape.clone())
            .attr("dynamic_size", options.dynamic_size)
            .attr("clear_after_read", options.clear_after_read)
            .attr("identical_element_shapes", options.infer_shape)
            .attr("tensor_array_name", options.tensor_array_name.as_str())
            .build()?;
        Ok(TensorArray {
            handle: op.output(0)?,
            flow: op.output(1)?,
            dtype,
            infer_shape: options.infer_shape,
            element_shape: Arc::new(Mutex::new(options.element_shape.clone())),
        })
    }

    /// An array from an existing handle and flow (an array carried into a loop:
    /// the handle enters as a constant and the flow as a loop variable).
    pub fn from_handle(handle: &Output, flow: &Output, dtype: DType, element_shape: Shape) -> Self {
        TensorArray {
            handle: handle.clone(),
            flow: flow.clone(),
            dtype,
            infer_shape: true,
            element_shape: Arc::new(Mutex::new(element_shape)),
        }
    }

    /// The same array at another flow (the loop variable inside a loop body, or
    /// the loop's exit after it).
    pub fn with_flow(&self, flow: &Output) -> TensorArray {
        TensorArray {
            flow: flow.clone(),
            ..self.clone()
        }
    }

    /// The resource handle.
    pub fn handle(&self) -> &Output {
        &self.handle
    }

    /// The latest flow.
    pub fn flow(&self) -> &Output {
        &self.flow
    }

    /// The element dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The element shape as far as known.
    pub fn element_shape(&self) -> Shape {
        self.element_shape
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn merge_element_shape(&self, shape: &Shape) -> Result<()> {
        let mut es = self.element_shape.lock().unwrap_or_else(|p| p.into_inner());
        if self.infer_shape {
            *es = es.merge(shape).map_err(|_| {
                Status::invalid_argument(format!(
                    "Inconsistent shapes: saw {shape} but expected {es} (and infer_shape=True)"
                ))
            })?;
        }
        Ok(())
    }

    fn check_dtype(&self, value: &Output) -> Result<()> {
        if value.dtype() != self.dtype {
            return Err(Status::invalid_argument(format!(
                "TensorArray dtype is {} but Op is trying to write dtype {}",
                self.dtype,
                value.dtype()
            )));
        }
        Ok(())
    }

    fn element_shape_attr(&self) -> Shape {
        let es = self.element_shape();
        if es.rank().is_some() {
            es
        } else {
            Shape::unknown()
        }
    }

    /// `TensorArrayWriteV3`: `value` at `index` (an `int32` scalar).
    pub fn write(&self, s: &Scope, index: &Output, value: &Output) -> Result<TensorArray> {
        self.check_dtype(value)?;
        self.merge_element_shape(&value.shape())?;
        let ws = s.with_name_scope("TensorArrayWrite");
        let flow = ws
            .op("TensorArrayWriteV3")
            .input(&self.handle)
            .input(index)
            .input(value)
            .input(&self.flow)
            .build1()?;
        Ok(self.with_flow(&flow))
    }

    /// `TensorArrayReadV3`: the element at `index`.
    pub fn read(&self, s: &Scope, index: &Output) -> Result<Output> {
        let op = s
            .op("TensorArrayReadV3")
            .input(&self.handle)
            .input(index)
            .input(&self.flow)
            .attr("dtype", self.dtype)
            .build()?;
        s.set_output_shape(&op, 0, self.element_shape()).output(0)
    }

    /// `TensorArrayGatherV3`: the elements at `indices` (an `int32` vector),
    /// stacked.
    pub fn gather(&self, s: &Scope, indices: &Output) -> Result<Output> {
        s.op("TensorArrayGatherV3")
            .input(&self.handle)
            .input(indices)
            .input(&self.flow)
            .attr("dtype", self.dtype)
            .attr("element_shape", self.element_shape_attr())
            .build1()
    }

    /// Every element, stacked (`gather(range(size()))`).
    pub fn stack(&self, s: &Scope) -> Result<Output> {
        let ss = s.with_name_scope("TensorArrayStack");
        let size = self.size(&ss)?;
        let range = ops::range(
            &ss,
            &ops::scalar(&ss, 0i32)?,
            &size,
            &ops::scalar(&ss, 1i32)?,
        )?;
        self.gather(&ss, &range)
    }

    /// `TensorArrayScatterV3`: row `i` of `value` to element `indices[i]`.
    pub fn scatter(&self, s: &Scope, indices: &Output, value: &Output) -> Result<TensorArray> {
        self.check_dtype(value)?;
        if let Some(d) = value.shape().dims() {
            if !d.is_empty() {
                self.merge_element_shape(&Shape::from_dims(&d[1..]))?;
            }
        }
        let ss = s.with_name_scope("TensorArrayScatter");
        let flow = ss
            .op("TensorArrayScatterV3")
            .input(&self.handle)
            .input(indices)
            .input(value)
            .input(&self.flow)
            .build1()?;
        Ok(self.with_flow(&flow))
    }

    /// Row `i` of `value` to element `i`, for every row.
    pub fn unstack(&self, s: &Scope, value: &Output) -> Result<TensorArray> {
        let us = s.with_name_scope("TensorArrayUnstack");
        let rows = ops::dim_size(&us, value, 0)?;
        let range = ops::range(
            &us,
            &ops::scalar(&us, 0i32)?,
            &rows,
            &ops::scalar(&us, 1i32)?,
        )?;
        self.scatter(&us, &range, value)
    }

    /// `TensorArrayConcatV3`: every element joined along its first dimension.
    pub fn concat(&self, s: &Scope) -> Result<Output> {
        let rest = match self.element_shape().dims() {
            Some(d) if !d.is_empty() => Shape::from_dims(&d[1..]),
            _ => Shape::unknown(),
        };
        let op = s
            .op("TensorArrayConcatV3")
            .input(&self.handle)
            .input(&self.flow)
            .attr("dtype", self.dtype)
            .attr("element_shape_except0", rest)
            .build()?;
        op.output(0)
    }

    /// `TensorArraySplitV3`: consecutive pieces of `value` along its first
    /// dimension, `lengths[i]` rows (any integer vector) to element `i`.
    pub fn split(&self, s: &Scope, value: &Output, lengths: &Output) -> Result<TensorArray> {
        self.check_dtype(value)?;
        let ss = s.with_name_scope("TensorArraySplit");
        let lengths = if lengths.dtype() == DType::I64 {
            lengths.clone()
        } else {
            ops::cast(&ss, lengths, DType::I64)?
        };
        let flow = ss
            .op("TensorArraySplitV3")
            .input(&self.handle)
            .input(value)
            .input(&lengths)
            .input(&self.flow)
            .build1()?;
        Ok(self.with_flow(&flow))
    }

    /// `TensorArraySizeV3`.
    pub fn size(&self, s: &Scope) -> Result<Output> {
        s.op("TensorArraySizeV3")
            .input(&self.handle)
            .input(&self.flow)
            .build1()
    }

    /// `TensorArrayCloseV3`.
    pub fn close(&self, s: &Scope) -> Result<Operation> {
        s.op("TensorArrayCloseV3").input(&self.handle).build()
    }

    /// `TensorArrayGradV3`: the gradient array of this one for the gradient
    /// computation `source` (made on first use, shared by every later call), at a
    /// flow that follows `flow` (default: this array's) and the array's creation.
    pub fn grad(&self, s: &Scope, source: &str, flow: Option<&Output>) -> Result<TensorArray> {
        let flow = flow.unwrap_or(&self.flow);
        let gs = s.with_name_scope("TensorArrayGrad");
        let g = gs
            .op("TensorArrayGradV3")
            .input(&self.handle)
            .input(flow)
            .attr("source", source)
            .build()?;
        let flow = gs
            .with_control_dependencies(&[&g])
            .op("Identity")
            .name("gradient_flow")
            .input(flow)
            .build1()?;
        Ok(TensorArray {
            handle: g.output(0)?,
            flow,
            dtype: self.dtype,
            infer_shape: self.infer_shape,
            element_shape: Arc::new(Mutex::new(self.element_shape())),
        })
    }
}
