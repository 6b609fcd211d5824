//! TensorArrays (`TensorArrayV3` and the ops on it): a [`TensorArray`] resource in
//! the step's container of the device's resource manager, so it lives exactly as
//! long as the step, as TensorFlow's per-step TensorArrays do.
//!
//! Each element is written once and read any number of times (once when
//! `clear_after_read`). A gradient TensorArray (`TensorArrayGradV3`, one per
//! forward array and gradient source) sums repeated writes to an index instead,
//! and starts with the forward array's element shapes, so an index nobody wrote a
//! gradient for reads as zeros. Reading an unwritten index of a forward array
//! gives zeros when its element shape is fully known. The `flow` tensors carry no
//! data: they order the ops on one array through data edges (and so through
//! loops and gradients).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use graph::{DType, ResourceHandle, Result, Shape, Status, Tensor, TensorShape};
use rendezvous::sync::Mutex;

use crate::cpu::array::concat::concat_rows;
use crate::cpu::array::elems::{dispatch_elem, Elem};
use crate::cpu::array::split::split_rows;
use crate::cpu::math::elem::Arith;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use crate::resource::Resource;

/// The name prefix of forward TensorArrays in the step container.
const FORWARD: &str = "_tensor_arrays";
/// The name prefix of gradient TensorArrays in the step container.
const GRADS: &str = "_tensor_array_grads";

#[derive(Clone, Default)]
struct Slot {
    /// The value; `None` with `written` set: zeros of `shape` (a gradient slot
    /// nobody wrote, or a forward slot read before any write).
    tensor: Option<Tensor>,
    shape: TensorShape,
    written: bool,
    read: bool,
    cleared: bool,
}

struct State {
    closed: bool,
    dynamic_size: bool,
    gradients_disallowed: bool,
    /// The size of the forward array when its gradient array was made (gradient
    /// arrays stack and concatenate that many elements).
    marked_size: i32,
    element_shape: Shape,
    slots: Vec<Slot>,
}

/// A TensorArray; see the module docs.
pub struct TensorArray {
    name: String,
    dtype: DType,
    is_grad: bool,
    clear_after_read: bool,
    identical_element_shapes: bool,
    /// `sum += value` for the dtype, when it is numeric (gradient arrays only).
    add: Option<fn(&mut Tensor, &Tensor) -> Result<()>>,
    state: Mutex<State>,
}

impl Resource for TensorArray {
    fn type_name(&self) -> &'static str {
        "TensorArray"
    }
}

fn add_into<T: Arith>(sum: &mut Tensor, v: &Tensor) -> Result<()> {
    let src = v.as_slice::<T>()?;
    // `as_mut_slice` copies a shared buffer first: a value another consumer holds
    // is never written.
    let dst = sum.as_mut_slice::<T>()?;
    dst.iter_mut().zip(src).for_each(|(d, &x)| *d = d.tf_add(x));
    Ok(())
}

fn adder(dtype: DType) -> Option<fn(&mut Tensor, &Tensor) -> Result<()>> {
    crate::dispatch_numeric!(dtype, T => Ok::<_, Status>(add_into::<T> as fn(&mut Tensor, &Tensor) -> Result<()>)).ok()
}

/// How a new TensorArray starts.
struct Config {
    dtype: DType,
    size: usize,
    element_shape: Shape,
    identical_element_shapes: bool,
    dynamic_size: bool,
    clear_after_read: bool,
    is_grad: bool,
    marked_size: i32,
}

impl TensorArray {
    fn new(name: String, c: Config) -> TensorArray {
        TensorArray {
            name,
            dtype: c.dtype,
            is_grad: c.is_grad,
            clear_after_read: c.clear_after_read,
            identical_element_shapes: c.identical_element_shapes,
            add: if c.is_grad { adder(c.dtype) } else { None },
            state: Mutex::new(State {
                closed: false,
                dynamic_size: c.dynamic_size,
                gradients_disallowed: false,
                marked_size: c.marked_size,
                element_shape: c.element_shape,
                slots: vec![Slot::default(); c.size],
            }),
        }
    }

    fn err(&self, what: impl std::fmt::Display) -> Status {
        Status::invalid_argument(format!("TensorArray {}: {what}", self.name))
    }

    fn check_open(&self, st: &State) -> Result<()> {
        if st.closed {
            return Err(Status::invalid_argument(format!(
                "TensorArray {} has already been closed.",
                self.name
            )));
        }
        Ok(())
    }

    /// The element dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements.
    pub fn size(&self) -> Result<usize> {
        let st = self.state.lock();
        self.check_open(&st)?;
        Ok(st.slots.len())
    }

    /// How many elements a stack or concat of every index reads.
    fn pack_or_concat_size(&self) -> Result<usize> {
        let st = self.state.lock();
        self.check_open(&st)?;
        Ok(if self.is_grad {
            st.marked_size.max(0) as usize
        } else {
            st.slots.len()
        })
    }

    /// Merges `shape` into the element shape (`InvalidArgument` if incompatible).
    fn merge_element_shape(&self, shape: &Shape) -> Result<()> {
        let mut st = self.state.lock();
        st.element_shape = st.element_shape.merge(shape)?;
        Ok(())
    }

    /// Writes `values[i]` at `indices[i]`, in order, stopping at the first error.
    pub fn write_many(&self, indices: &[i32], values: Vec<Tensor>) -> Result<()> {
        let mut st = self.state.lock();
        for (&index, value) in indices.iter().zip(values) {
            self.write_locked(&mut st, index, value)?;
        }
        Ok(())
    }

    fn write_locked(&self, st: &mut State, index: i32, value: Tensor) -> Result<()> {
        self.check_open(st)?;
        let len = st.slots.len();
        if index < 0 || (!st.dynamic_size && index as usize >= len) {
            return Err(self.err(format!(
                "Tried to write to index {index} but array is not resizeable and size is: {len}"
            )));
        }
        let i = index as usize;
        if i >= len {
            st.slots.resize(i + 1, Slot::default());
        }
        if value.dtype() != self.dtype {
            return Err(self.err(format!(
                "Could not write to TensorArray index {index} because the value dtype is {} but TensorArray dtype is {}.",
                value.dtype(),
                self.dtype
            )));
        }
        if !st.element_shape.is_compatible_with(value.shape()) {
            return Err(self.err(format!(
                "Could not write to TensorArray index {index} because the value shape is {} which is incompatible with the TensorArray's inferred element shape: {} (consider setting infer_shape=False).",
                value.shape(),
                st.element_shape
            )));
        } else if self.identical_element_shapes && !st.element_shape.is_fully_defined() {
            st.element_shape = Shape::known(value.dims());
        }
        let add = self.add;
        let slot = &mut st.slots[i];
        if slot.read {
            return Err(self.err(format!(
                "Could not write to TensorArray index {index} because it has already been read."
            )));
        }
        if !slot.written {
            slot.shape = value.shape().clone();
            slot.tensor = Some(value);
            slot.written = true;
            return Ok(());
        }
        if !self.is_grad {
            return Err(self.err(format!(
                "Could not write to TensorArray index {index} because it has already been written to."
            )));
        }
        if value.shape() != &slot.shape {
            return Err(self.err(format!(
                "Could not aggregate to TensorArray index {index} because the existing shape is {} but the new input shape is {}.",
                slot.shape,
                value.shape()
            )));
        }
        match slot.tensor.take() {
            None => slot.tensor = Some(value),
            Some(mut sum) => {
                let add = add.ok_or_else(|| {
                    self.err(format!("cannot aggregate writes of dtype {}", self.dtype))
                })?;
                add(&mut sum, &value)?;
                slot.tensor = Some(sum);
                st.gradients_disallowed = true;
            }
        }
        Ok(())
    }

    /// Reads the elements at `indices`, in order.
    pub fn read_many(&self, indices: &[i32]) -> Result<Vec<Tensor>> {
        let mut st = self.state.lock();
        indices
            .iter()
            .map(|&i| self.read_locked(&mut st, i))
            .collect()
    }

    fn read_locked(&self, st: &mut State, index: i32) -> Result<Tensor> {
        self.check_open(st)?;
        let len = st.slots.len();
        if index < 0 || (!self.is_grad && index as usize >= len) {
            return Err(Status::invalid_argument(format!(
                "Tried to read from index {index} but array size is: {len}"
            )));
        }
        let i = index as usize;
        if i >= len || !st.slots[i].written {
            // Zeros: a gradient slot knows its own shape; otherwise the element
            // shape must be fully known.
            let shape = match st.slots.get(i) {
                Some(s) if self.is_grad && s.shape.rank() > 0 => s.shape.clone(),
                _ => st.element_shape.to_tensor_shape().ok_or_else(|| {
                    self.err(format!(
                        "Could not read from TensorArray index {index}.  Furthermore, the element shape is not fully defined: {}.  It is possible you are working with a resizeable TensorArray and stop_gradients is not allowing the gradients to be written.  If you set the full element_shape property on the forward TensorArray, the proper all-zeros tensor will be returned instead of incurring this error.",
                        st.element_shape
                    ))
                })?,
            };
            if i >= len {
                st.slots.resize(i + 1, Slot::default());
                for s in &mut st.slots[len..] {
                    s.shape = shape.clone();
                    s.written = true;
                }
            } else {
                st.slots[i].shape = shape;
                st.slots[i].written = true;
            }
        }
        let (dtype, clear) = (self.dtype, self.clear_after_read);
        let slot = &mut st.slots[i];
        if slot.cleared {
            return Err(self.err(format!(
                "Could not read index {index} twice because it was cleared after a previous read (perhaps try setting clear_after_read = false?)."
            )));
        }
        let value = match &slot.tensor {
            Some(t) => t.clone(),
            None => Tensor::zeros(dtype, slot.shape.clone()),
        };
        if clear {
            slot.tensor = None;
            slot.cleared = true;
        } else {
            slot.tensor = Some(value.clone());
        }
        slot.read = true;
        Ok(value)
    }

    /// Closes the array, dropping its elements.
    pub fn close(&self) {
        let mut st = self.state.lock();
        st.slots.clear();
        st.closed = true;
    }

    /// Starts a gradient array with the shapes of `fwd`'s written elements
    /// (`prepend` before each): "soft" zeros until written.
    fn copy_shapes_from(&self, fwd: &TensorArray, prepend: &TensorShape) -> Result<()> {
        let mut st = self.state.lock();
        let f = fwd.state.lock();
        self.check_open(&st)?;
        fwd.check_open(&f)?;
        if st.slots.len() != f.slots.len() {
            return Err(Status::invalid_argument(format!(
                "TensorArray sizes do not match during CopyShapesFrom: {} has size {} but rhs {} has size {}",
                self.name,
                st.slots.len(),
                fwd.name,
                f.slots.len()
            )));
        }
        for (g, s) in st.slots.iter_mut().zip(&f.slots) {
            if s.written {
                let mut dims = prepend.dims().to_vec();
                dims.extend_from_slice(s.shape.dims());
                g.shape = TensorShape::from(dims);
                g.written = true;
            }
        }
        Ok(())
    }
}

/// Makes forward array names unique whatever kernel instance runs.
static TENSOR_ARRAY_IDS: AtomicU64 = AtomicU64::new(0);

fn handle_tensor(ctx: &OpKernelContext<'_>, name: String) -> Tensor {
    let step = ctx.step();
    Tensor::resource_scalar(ResourceHandle {
        device: step.device.name.clone(),
        container: step.step_container.to_string(),
        name,
        type_name: "TensorArray".into(),
    })
}

fn input_handle(ctx: &OpKernelContext<'_>) -> Result<ResourceHandle> {
    let t = ctx.input(0)?;
    t.as_resource_handles()?.first().cloned().ok_or_else(|| {
        Status::invalid_argument(format!(
            "Tensor array handle must be a scalar resource, but had shape: {}",
            t.shape()
        ))
    })
}

fn lookup(ctx: &OpKernelContext<'_>) -> Result<Arc<TensorArray>> {
    let h = input_handle(ctx)?;
    ctx.step()
        .device
        .resources
        .lookup::<TensorArray>(&h.container, &h.name)
        .map_err(|e| {
            Status::invalid_argument(format!(
                "TensorArray {} is not available: {}",
                h.name,
                e.message()
            ))
        })
}

fn scalar_index(ctx: &OpKernelContext<'_>, i: usize) -> Result<i32> {
    let t = ctx.input(i)?;
    if t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "TensorArray index must be scalar, but had shape: {}",
            t.shape()
        )));
    }
    t.scalar_value::<i32>()
}

fn index_vector(ctx: &OpKernelContext<'_>, i: usize) -> Result<Vec<i32>> {
    let t = ctx.input(i)?;
    if t.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "Expected indices to be a vector, but received shape: {}",
            t.shape()
        )));
    }
    Ok(t.as_slice::<i32>()?.to_vec())
}

fn check_dtype(ta: &TensorArray, want: DType, writing: bool) -> Result<()> {
    if ta.dtype == want {
        return Ok(());
    }
    Err(Status::invalid_argument(if writing {
        format!(
            "TensorArray dtype is {} but Op is trying to write dtype {want}.",
            ta.dtype
        )
    } else {
        format!(
            "TensorArray dtype is {} but Op requested dtype {want}.",
            ta.dtype
        )
    }))
}

fn set_flow(ctx: &mut OpKernelContext<'_>, flow_input: usize) -> Result<()> {
    let flow = ctx.take_input(flow_input)?;
    ctx.set_output(0, flow)
}

/// `TensorArrayV3`.
struct CreateKernel {
    dtype: DType,
    element_shape: Shape,
    dynamic_size: bool,
    clear_after_read: bool,
    identical_element_shapes: bool,
    array_name: String,
}

impl OpKernel for CreateKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let size = ctx.input(0)?;
        if size.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "TensorArray size must be scalar, but had shape: {}",
                size.shape()
            )));
        }
        let size = size.scalar_value::<i32>()?;
        if size < 0 {
            return Err(Status::invalid_argument("Size should be >= 0."));
        }
        let id = TENSOR_ARRAY_IDS.fetch_add(1, Ordering::Relaxed);
        let name = format!("{FORWARD}{}_{id}", self.array_name);
        let ta = TensorArray::new(
            format!("{}_{id}", self.array_name),
            Config {
                dtype: self.dtype,
                size: size as usize,
                element_shape: self.element_shape.clone(),
                identical_element_shapes: self.identical_element_shapes,
                dynamic_size: self.dynamic_size,
                clear_after_read: self.clear_after_read,
                is_grad: false,
                marked_size: -1,
            },
        );
        let step = ctx.step();
        step.device
            .resources
            .create(&step.step_container, &name, ta)?;
        let h = handle_tensor(ctx, name);
        ctx.set_output(0, h)?;
        ctx.set_output(1, Tensor::scalar(0f32))
    }
}

/// `TensorArrayGradV3` and `TensorArrayGradWithShape`.
struct GradKernel {
    source: String,
    with_shape: bool,
}

impl OpKernel for GradKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let h = input_handle(ctx)?;
        let fwd_name = h.name.strip_prefix(FORWARD).ok_or_else(|| {
            Status::invalid_argument(format!("Wrong input container. {}", h.name))
        })?;
        let fwd = lookup(ctx)?;
        let (size, marked, element_shape) = {
            let mut st = fwd.state.lock();
            fwd.check_open(&st)?;
            // Once gradients are computed the forward array may not grow.
            st.dynamic_size = false;
            if st.gradients_disallowed {
                return Err(Status::invalid_argument(format!(
                    "Unable to create a gradients TensorArray for {fwd_name}.  Perhaps you used the multiple_writes_aggregate flag on a previous write?  Gradient calculation is impossible when multiple writes are performed to the same index."
                )));
            }
            (st.slots.len(), st.marked_size, st.element_shape.clone())
        };
        let (prepend, element_shape) = if self.with_shape {
            let t = ctx.input(2)?;
            let dims = t.as_slice::<i32>()?;
            if t.rank() != 1 || dims.iter().any(|&d| d < 0) {
                return Err(Status::invalid_argument(format!(
                    "shape_to_prepend must be a vector of non-negative sizes, got {t:?}"
                )));
            }
            let prepend: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let shape = match element_shape.dims() {
                None => Shape::unknown(),
                Some(d) => {
                    let mut all: Vec<Option<usize>> = prepend.iter().map(|&p| Some(p)).collect();
                    all.extend_from_slice(d);
                    Shape::from_dims(&all)
                }
            };
            (TensorShape::from(prepend), shape)
        } else {
            (TensorShape::scalar(), element_shape)
        };
        let grad_name = format!("{fwd_name}@{}", self.source);
        let key = format!("{GRADS}{grad_name}");
        let step = ctx.step();
        step.device
            .resources
            .lookup_or_create(&step.step_container, &key, || {
                let g = TensorArray::new(
                    grad_name.clone(),
                    Config {
                        dtype: fwd.dtype,
                        size,
                        element_shape,
                        identical_element_shapes: fwd.identical_element_shapes,
                        dynamic_size: false,
                        clear_after_read: true,
                        is_grad: true,
                        marked_size: marked.max(size as i32),
                    },
                );
                g.copy_shapes_from(&fwd, &prepend)?;
                Ok(g)
            })?;
        let h = handle_tensor(ctx, key);
        ctx.set_output(0, h)?;
        ctx.set_output(1, Tensor::scalar(0f32))
    }
}

/// `TensorArrayWriteV3(handle, index, value, flow_in)`.
struct WriteKernel;

impl OpKernel for WriteKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let index = scalar_index(ctx, 1)?;
        let ta = lookup(ctx)?;
        let value = ctx.take_input(2)?;
        check_dtype(&ta, value.dtype(), true)?;
        ta.write_many(&[index], vec![value])?;
        set_flow(ctx, 3)
    }
}

/// `TensorArrayReadV3(handle, index, flow_in)`.
struct ReadKernel {
    dtype: DType,
}

impl OpKernel for ReadKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let index = scalar_index(ctx, 1)?;
        let ta = lookup(ctx)?;
        check_dtype(&ta, self.dtype, false)?;
        let mut v = ta.read_many(&[index])?;
        ctx.set_output(0, v.remove(0))
    }
}

/// `TensorArrayGatherV3(handle, indices, flow_in)`: the elements at `indices`,
/// stacked.
struct GatherKernel<E> {
    dtype: DType,
    element_shape: Shape,
    _e: std::marker::PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for GatherKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let ta = lookup(ctx)?;
        check_dtype(&ta, self.dtype, false)?;
        ta.merge_element_shape(&self.element_shape)?;
        let indices = index_vector(ctx, 1)?;
        if indices.is_empty() {
            let mut dims = vec![0];
            dims.extend_from_slice(
                self.element_shape
                    .to_tensor_shape()
                    .ok_or_else(|| {
                        Status::unimplemented(format!(
                            "TensorArray has size zero, but element shape {} is not fully defined. Currently only static shapes are supported when packing zero-size TensorArrays.",
                            self.element_shape
                        ))
                    })?
                    .dims(),
            );
            return ctx.set_output(0, Tensor::zeros(self.dtype, TensorShape::from(dims)));
        }
        let values = ta.read_many(&indices)?;
        let first = values[0].shape().clone();
        if !self.element_shape.is_compatible_with(&first) {
            return Err(Status::invalid_argument(format!(
                "TensorArray was passed element_shape {} which does not match the Tensor at index 0: {first}",
                self.element_shape
            )));
        }
        for (i, v) in values.iter().enumerate().skip(1) {
            if v.shape() != &first {
                return Err(Status::invalid_argument(format!(
                    "TensorArray has inconsistent shapes.  Index 0 has shape: {first} but index {i} has shape: {}",
                    v.shape()
                )));
            }
        }
        let mut dims = vec![values.len()];
        dims.extend_from_slice(first.dims());
        let parts: Vec<&[E]> = values.iter().map(|v| E::view(v)).collect::<Result<_>>()?;
        let row = first.num_elements();
        let out = concat_rows::<E>(
            ctx.allocator(),
            self.dtype,
            TensorShape::from(dims),
            &parts,
            &vec![row; parts.len()],
            1,
        )?;
        ctx.set_output(0, out)
    }
}

/// `TensorArrayConcatV3(handle, flow_in)`: every element joined along its first
/// dimension, and each element's length there.
struct ConcatKernel<E> {
    dtype: DType,
    element_shape_except0: Shape,
    _e: std::marker::PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for ConcatKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let ta = lookup(ctx)?;
        check_dtype(&ta, self.dtype, false)?;
        let n = ta.pack_or_concat_size()?;
        if n == 0 {
            let rest = self.element_shape_except0.to_tensor_shape().ok_or_else(|| {
                Status::unimplemented(format!(
                    "TensorArray has size zero, but element_shape_except0 {} is not fully defined. Currently only static shapes are supported when concatenating zero-size TensorArrays.",
                    self.element_shape_except0
                ))
            })?;
            let mut dims = vec![0];
            dims.extend_from_slice(rest.dims());
            ctx.set_output(0, Tensor::zeros(self.dtype, TensorShape::from(dims)))?;
            return ctx.set_output(1, Tensor::new(&[0], Vec::<i64>::new())?);
        }
        let indices: Vec<i32> = (0..n as i32).collect();
        let values = ta.read_many(&indices)?;
        let mut lengths = Vec::with_capacity(n);
        let mut except0: Option<TensorShape> = None;
        for (i, v) in values.iter().enumerate() {
            if v.rank() == 0 {
                return Err(Status::invalid_argument(format!(
                    "Concat saw a scalar shape at index {i} but requires at least vectors.  Did you mean to call pack?"
                )));
            }
            lengths.push(v.dims()[0] as i64);
            let rest = TensorShape::from(v.dims()[1..].to_vec());
            match &except0 {
                None => {
                    if !self.element_shape_except0.is_compatible_with(&rest) {
                        return Err(Status::invalid_argument(format!(
                            "TensorArray was passed element_shape_except0 {} but index 0 has (excepting dimension 0) shape: {rest} which does not match.",
                            self.element_shape_except0
                        )));
                    }
                    except0 = Some(rest);
                }
                Some(e) if e != &rest => {
                    return Err(Status::invalid_argument(format!(
                        "TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: {e} but index {i} has (excepting dimension 0) shape: {rest}"
                    )))
                }
                Some(_) => {}
            }
        }
        let rest = except0.unwrap_or_else(TensorShape::scalar);
        let mut dims = vec![lengths.iter().sum::<i64>() as usize];
        dims.extend_from_slice(rest.dims());
        let parts: Vec<&[E]> = values.iter().map(|v| E::view(v)).collect::<Result<_>>()?;
        let rows: Vec<usize> = values.iter().map(|v| v.num_elements()).collect();
        let out = concat_rows::<E>(
            ctx.allocator(),
            self.dtype,
            TensorShape::from(dims),
            &parts,
            &rows,
            1,
        )?;
        ctx.set_output(0, out)?;
        ctx.set_output(1, Tensor::new(&[n], lengths)?)
    }
}

/// `TensorArrayScatterV3(handle, indices, value, flow_in)`: row `i` of `value` to
/// `indices[i]`.
struct ScatterKernel<E>(std::marker::PhantomData<fn(E)>);

impl<E: Elem> OpKernel for ScatterKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let ta = lookup(ctx)?;
        let indices = index_vector(ctx, 1)?;
        let value = ctx.take_input(2)?;
        check_dtype(&ta, value.dtype(), true)?;
        if value.rank() == 0 {
            return Err(Status::invalid_argument(format!(
                "Input value for unpack must be at least a vector but received shape: {}",
                value.shape()
            )));
        }
        let rows = value.dims()[0];
        if indices.len() != rows {
            return Err(Status::invalid_argument(format!(
                "Expected len(indices) == values.shape[0], but saw: {} vs. {rows}",
                indices.len()
            )));
        }
        let max_index = indices.iter().copied().max().unwrap_or(-1);
        let mut size = ta.size()? as i64;
        if ta.state.lock().dynamic_size && size < max_index as i64 + 1 {
            size = max_index as i64 + 1;
        }
        if max_index as i64 >= size {
            return Err(Status::invalid_argument(format!(
                "Max scatter index must be < array size ({max_index} vs. {size})"
            )));
        }
        let element = TensorShape::from(value.dims()[1..].to_vec());
        let row = element.num_elements();
        let pieces = split_rows::<E>(
            ctx.allocator(),
            value.dtype(),
            E::view(&value)?,
            1,
            &vec![row; rows],
            vec![element; rows],
        )?;
        ta.write_many(&indices, pieces)?;
        set_flow(ctx, 3)
    }
}

/// `TensorArraySplitV3(handle, value, lengths, flow_in)`: consecutive pieces of
/// `value` along its first dimension, `lengths[i]` rows to element `i`.
struct SplitKernel<E>(std::marker::PhantomData<fn(E)>);

impl<E: Elem> OpKernel for SplitKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let ta = lookup(ctx)?;
        let lengths_t = ctx.input(2)?;
        if lengths_t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "Expected lengths to be a vector, received shape: {}",
                lengths_t.shape()
            )));
        }
        let lengths = lengths_t.as_slice::<i64>()?.to_vec();
        let value = ctx.take_input(1)?;
        if value.rank() == 0 {
            return Err(Status::invalid_argument(format!(
                "Expected value to be at least a vector, but received shape: {}",
                value.shape()
            )));
        }
        if lengths.iter().any(|&l| l < 0) {
            return Err(Status::invalid_argument(format!(
                "Expected lengths to be non-negative, got {lengths:?}"
            )));
        }
        let total: i64 = lengths.iter().sum();
        if total != value.dims()[0] as i64 {
            return Err(Status::invalid_argument(format!(
                "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is {total} and value's shape is: {}",
                value.shape()
            )));
        }
        let n = lengths.len();
        let mut size = ta.size()?;
        if ta.state.lock().dynamic_size && size < n {
            size = n;
        }
        if size != n {
            return Err(Status::invalid_argument(format!(
                "TensorArray's size is not equal to the size of lengths ({size} vs. {n}), and the TensorArray is not marked as dynamically resizeable"
            )));
        }
        check_dtype(&ta, value.dtype(), true)?;
        let per_row: usize = value.dims()[1..].iter().product();
        let shapes: Vec<TensorShape> = lengths
            .iter()
            .map(|&l| {
                let mut d = value.dims().to_vec();
                d[0] = l as usize;
                TensorShape::from(d)
            })
            .collect();
        let rows: Vec<usize> = lengths.iter().map(|&l| l as usize * per_row).collect();
        let pieces = split_rows::<E>(
            ctx.allocator(),
            value.dtype(),
            E::view(&value)?,
            1,
            &rows,
            shapes,
        )?;
        let indices: Vec<i32> = (0..n as i32).collect();
        ta.write_many(&indices, pieces)?;
        set_flow(ctx, 3)
    }
}

/// `TensorArraySizeV3(handle, flow_in)`.
struct SizeKernel;

impl OpKernel for SizeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = lookup(ctx)?.size()?;
        ctx.set_output(0, Tensor::scalar(n as i32))
    }
}

/// `TensorArrayCloseV3(handle)`.
struct CloseKernel;

impl OpKernel for CloseKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        lookup(ctx)?.close();
        Ok(())
    }
}

/// Registers the TensorArray kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu(
        "TensorArrayV3",
        |c: &OpKernelConstruction<'_>| {
            let name: String = c.attr("tensor_array_name")?;
            Ok(Box::new(CreateKernel {
                dtype: c.attr("dtype")?,
                element_shape: c.attr("element_shape")?,
                dynamic_size: c.attr("dynamic_size")?,
                clear_after_read: c.attr("clear_after_read")?,
                identical_element_shapes: c.attr("identical_element_shapes").unwrap_or(false),
                array_name: if name.is_empty() {
                    c.name().to_owned()
                } else {
                    name
                },
            }))
        },
    ));
    r.register(KernelDef::cpu("TensorArrayGradV3", |c| {
        Ok(Box::new(GradKernel {
            source: c.attr("source")?,
            with_shape: false,
        }))
    }));
    r.register(KernelDef::cpu("TensorArrayGradWithShape", |c| {
        Ok(Box::new(GradKernel {
            source: c.attr("source")?,
            with_shape: true,
        }))
    }));
    r.register(KernelDef::cpu("TensorArrayWriteV3", |_| {
        Ok(Box::new(WriteKernel))
    }));
    r.register(KernelDef::cpu("TensorArrayReadV3", |c| {
        Ok(Box::new(ReadKernel {
            dtype: c.attr("dtype")?,
        }))
    }));
    r.register(KernelDef::cpu("TensorArrayGatherV3", |c| {
        let dtype: DType = c.attr("dtype")?;
        let element_shape: Shape = c.attr("element_shape")?;
        dispatch_elem!(dtype, E => Ok(Box::new(GatherKernel::<E> { dtype, element_shape, _e: std::marker::PhantomData })))
    }));
    r.register(KernelDef::cpu("TensorArrayConcatV3", |c| {
        let dtype: DType = c.attr("dtype")?;
        let element_shape_except0: Shape = c.attr("element_shape_except0")?;
        dispatch_elem!(dtype, E => Ok(Box::new(ConcatKernel::<E> { dtype, element_shape_except0, _e: std::marker::PhantomData })))
    }));
    r.register(KernelDef::cpu("TensorArrayScatterV3", |c| {
        dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(ScatterKernel::<E>(std::marker::PhantomData))))
    }));
    r.register(KernelDef::cpu("TensorArraySplitV3", |c| {
        dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(SplitKernel::<E>(std::marker::PhantomData))))
    }));
    r.register(KernelDef::cpu("TensorArraySizeV3", |_| {
        Ok(Box::new(SizeKernel))
    }));
    r.register(KernelDef::cpu("TensorArrayCloseV3", |_| {
        Ok(Box::new(CloseKernel))
    }));
}

#[cfg(test)]
mod tests {
    use crate::op_kernel::StepContext;
    use crate::testutil::{run_node_in, test_device, test_step};
    use crate::Entry;
    use graph::{Code, DType, NodeDef, Shape, Tensor};

    fn v(t: Tensor) -> Entry {
        Entry::Value(t)
    }

    fn flow() -> Entry {
        v(Tensor::scalar(0f32))
    }

    fn run(step: &StepContext, node: NodeDef, inputs: Vec<Entry>) -> graph::Result<Vec<Tensor>> {
        run_node_in(step, node, inputs).map(|o| o.iter().map(|e| e.to_tensor().unwrap()).collect())
    }

    fn create(step: &StepContext, size: i32, shape: Shape, dynamic: bool, clear: bool) -> Entry {
        let n = NodeDef::new("ta", "TensorArrayV3")
            .with_input("size")
            .with_attr("dtype", DType::F32)
            .with_attr("element_shape", shape)
            .with_attr("dynamic_size", dynamic)
            .with_attr("clear_after_read", clear);
        v(run(step, n, vec![v(Tensor::scalar(size))])
            .unwrap()
            .remove(0))
    }

    fn write(step: &StepContext, h: &Entry, i: i32, x: Tensor) -> graph::Result<Vec<Tensor>> {
        let n = NodeDef::new("w", "TensorArrayWriteV3")
            .with_input("h")
            .with_input("i")
            .with_input("v")
            .with_input("f")
            .with_attr("T", x.dtype());
        run(step, n, vec![h.clone(), v(Tensor::scalar(i)), v(x), flow()])
    }

    fn read(step: &StepContext, h: &Entry, i: i32) -> graph::Result<Tensor> {
        let n = NodeDef::new("r", "TensorArrayReadV3")
            .with_input("h")
            .with_input("i")
            .with_input("f")
            .with_attr("dtype", DType::F32);
        run(step, n, vec![h.clone(), v(Tensor::scalar(i)), flow()]).map(|mut o| o.remove(0))
    }

    fn grad(step: &StepContext, h: &Entry, source: &str) -> Entry {
        let n = NodeDef::new("g", "TensorArrayGradV3")
            .with_input("h")
            .with_input("f")
            .with_attr("source", source);
        v(run(step, n, vec![h.clone(), flow()]).unwrap().remove(0))
    }

    fn message(r: graph::Result<impl std::fmt::Debug>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        e.message().to_owned()
    }

    #[test]
    fn write_once_read_once_and_the_errors() {
        let dev = test_device();
        let step = test_step(&dev);
        let h = create(&step, 2, Shape::known(&[2]), false, true);
        write(&step, &h, 0, Tensor::vector(&[1f32, 2.0])).unwrap();
        let m = message(write(&step, &h, 0, Tensor::vector(&[3f32, 4.0])));
        assert!(m.contains("because it has already been written to"), "{m}");
        let m = message(write(&step, &h, 2, Tensor::vector(&[3f32, 4.0])));
        assert!(
            m.contains("Tried to write to index 2 but array is not resizeable and size is: 2"),
            "{m}"
        );
        let m = message(write(&step, &h, 1, Tensor::vector(&[1f32, 2.0, 3.0])));
        assert!(
            m.contains("incompatible with the TensorArray's inferred element shape: [2]"),
            "{m}"
        );
        let m = message(write(&step, &h, 1, Tensor::vector(&[1i32, 2])));
        assert!(
            m.contains("TensorArray dtype is float32 but Op is trying to write dtype int32"),
            "{m}"
        );
        assert_eq!(read(&step, &h, 0).unwrap(), Tensor::vector(&[1f32, 2.0]));
        let m = message(read(&step, &h, 0));
        assert!(
            m.contains("Could not read index 0 twice because it was cleared"),
            "{m}"
        );
        // Unwritten, with a fully known element shape: zeros.
        assert_eq!(read(&step, &h, 1).unwrap(), Tensor::vector(&[0f32, 0.0]));
        let m = message(read(&step, &h, 5));
        assert!(
            m.contains("Tried to read from index 5 but array size is: 2"),
            "{m}"
        );
        let close = NodeDef::new("c", "TensorArrayCloseV3").with_input("h");
        run(&step, close, vec![h.clone()]).unwrap();
        let m = message(read(&step, &h, 1));
        assert!(m.contains("has already been closed"), "{m}");
        // Unknown element shape: an unwritten read is an error naming why.
        let h = create(&step, 1, Shape::unknown(), false, true);
        let m = message(read(&step, &h, 0));
        assert!(m.contains("the element shape is not fully defined"), "{m}");
    }

    #[test]
    fn dynamic_arrays_grow_and_gradient_arrays_sum_writes() {
        let dev = test_device();
        let step = test_step(&dev);
        let h = create(&step, 0, Shape::unknown(), true, false);
        write(&step, &h, 2, Tensor::vector(&[5f32])).unwrap();
        let size = NodeDef::new("s", "TensorArraySizeV3")
            .with_input("h")
            .with_input("f");
        assert_eq!(
            run(&step, size.clone(), vec![h.clone(), flow()]).unwrap()[0],
            Tensor::scalar(3i32)
        );
        write(&step, &h, 0, Tensor::vector(&[1f32])).unwrap();
        // Read twice without clear_after_read.
        assert_eq!(read(&step, &h, 2).unwrap(), read(&step, &h, 2).unwrap());
        // The gradient array: one per source, sized as the forward one, writes sum.
        let g = grad(&step, &h, "gradients");
        assert_eq!(
            run(&step, size.clone(), vec![g.clone(), flow()]).unwrap()[0],
            Tensor::scalar(3i32)
        );
        write(&step, &g, 2, Tensor::vector(&[1f32])).unwrap();
        write(&step, &g, 2, Tensor::vector(&[2.5f32])).unwrap();
        let g_again = grad(&step, &h, "gradients");
        assert_eq!(read(&step, &g_again, 2).unwrap(), Tensor::vector(&[3.5f32]));
        // Index 0 has the forward element's shape: zeros until written.
        assert_eq!(read(&step, &g, 0).unwrap(), Tensor::vector(&[0f32]));
        let m = message(write(&step, &g, 1, Tensor::vector(&[1f32, 2.0])).and(write(
            &step,
            &g,
            1,
            Tensor::vector(&[1f32]),
        )));
        assert!(
            m.contains("Could not aggregate to TensorArray index 1"),
            "{m}"
        );
        // Another source gets another array; the forward array no longer grows.
        let other = grad(&step, &h, "gradients_1");
        assert_eq!(read(&step, &other, 2).unwrap(), Tensor::vector(&[0f32]));
        let m = message(write(&step, &h, 3, Tensor::vector(&[1f32])));
        assert!(m.contains("not resizeable"), "{m}");
        // With a shape to prepend: each gradient element gets the prefix.
        let n = NodeDef::new("gw", "TensorArrayGradWithShape")
            .with_input("h")
            .with_input("f")
            .with_input("p")
            .with_attr("source", "gradients_2");
        let gw = v(run(
            &step,
            n,
            vec![h.clone(), flow(), v(Tensor::vector(&[2i32]))],
        )
        .unwrap()
        .remove(0));
        assert_eq!(
            read(&step, &gw, 0).unwrap(),
            Tensor::zeros(DType::F32, [2usize, 1])
        );
    }

    #[test]
    fn scatter_gather_split_concat() {
        let dev = test_device();
        let step = test_step(&dev);
        let h = create(&step, 3, Shape::unknown(), false, false);
        let x = Tensor::new(&[3, 2], vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let scatter = NodeDef::new("sc", "TensorArrayScatterV3")
            .with_input("h")
            .with_input("i")
            .with_input("v")
            .with_input("f")
            .with_attr("T", DType::F32);
        let bad = Tensor::vector(&[0i32, 3, 1]);
        let m = message(run(
            &step,
            scatter.clone(),
            vec![h.clone(), v(bad), v(x.clone()), flow()],
        ));
        assert!(
            m.contains("Max scatter index must be < array size (3 vs. 3)"),
            "{m}"
        );
        let idx = Tensor::vector(&[2i32, 0, 1]);
        run(&step, scatter, vec![h.clone(), v(idx), v(x), flow()]).unwrap();
        let gather = NodeDef::new("ga", "TensorArrayGatherV3")
            .with_input("h")
            .with_input("i")
            .with_input("f")
            .with_attr("dtype", DType::F32);
        let got = run(
            &step,
            gather,
            vec![h.clone(), v(Tensor::vector(&[0i32, 2])), flow()],
        )
        .unwrap();
        assert_eq!(
            got[0],
            Tensor::new(&[2, 2], vec![3f32, 4.0, 1.0, 2.0]).unwrap()
        );
        // split unevenly, concat back with the lengths
        let h = create(&step, 2, Shape::unknown(), false, true);
        let split = NodeDef::new("sp", "TensorArraySplitV3")
            .with_input("h")
            .with_input("v")
            .with_input("l")
            .with_input("f")
            .with_attr("T", DType::F32);
        let x = Tensor::vector(&[1f32, 2.0, 3.0]);
        let m = message(run(
            &step,
            split.clone(),
            vec![
                h.clone(),
                v(x.clone()),
                v(Tensor::vector(&[1i64, 1])),
                flow(),
            ],
        ));
        assert!(
            m.contains("Expected sum of lengths to be equal to values.shape[0]"),
            "{m}"
        );
        run(
            &step,
            split,
            vec![
                h.clone(),
                v(x.clone()),
                v(Tensor::vector(&[1i64, 2])),
                flow(),
            ],
        )
        .unwrap();
        let concat = NodeDef::new("co", "TensorArrayConcatV3")
            .with_input("h")
            .with_input("f")
            .with_attr("dtype", DType::F32);
        let got = run(&step, concat, vec![h.clone(), flow()]).unwrap();
        assert_eq!(got[0], x);
        assert_eq!(got[1], Tensor::vector(&[1i64, 2]));
        // every array lives in the step's container
        assert_eq!(dev.resources.len(&step.step_container), 2);
    }
}
