//! [`Tensor`]: a dtype, a shape and reference-counted storage, in a 16-byte handle.
//!
//! Contract:
//! - Cloning a tensor never copies its elements: a POD scalar is stored in the
//!   handle itself (no heap allocation at all); anything else is one `Arc` to its
//!   metadata and a shared, 64-byte-aligned buffer ([`buffer`]), so cloning is a
//!   refcount bump and [`Tensor::to_bytes`] hands the buffer out as `bytes::Bytes`
//!   without copying.
//! - Mutable access ([`Tensor::as_mut_slice`]) is copy-on-write: it writes in place
//!   when this handle holds the only reference (kernels use that to forward an input
//!   buffer to their output), and copies first otherwise.
//! - Boolean storage holds only 0 or 1.
//! - Allocation sized by user input is fallible: [`Tensor::try_zeros`],
//!   [`Tensor::try_build`] and every constructor returning `Result` report a
//!   tensor that cannot be had as `ResourceExhausted` ("OOM when allocating tensor
//!   with shape [...] and type float: …", TensorFlow's words), never an abort.
//!   [`Tensor::zeros`], [`Tensor::build`], [`Tensor::vector`] and
//!   [`Tensor::from_array`] are for sizes the caller controls and abort on an
//!   allocation failure as `Vec` does.

pub mod buffer;
pub mod element;
mod fmt;
pub mod memory;
mod serde_impl;

use std::sync::Arc;

use bytes::Bytes;
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};

use crate::{DType, Result, Shape, Status, TensorShape};
use buffer::{AlignedBuffer, AllocError};
pub use element::TensorType;

/// A handle to a resource (variable, queue, stack …) in a device's resource manager,
/// the element type of `DType::Resource` tensors (TensorFlow's `ResourceHandleProto`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct ResourceHandle {
    /// The device whose resource manager holds the resource.
    pub device: String,
    /// The container inside the resource manager.
    pub container: String,
    /// The resource's name inside its container.
    pub name: String,
    /// The resource's type (`Var`, `Stack`, `FIFOQueue`, …), for error messages.
    pub type_name: String,
}

#[derive(Clone)]
enum Storage {
    Pod(AlignedBuffer),
    Strings(Arc<Vec<Bytes>>),
    Resources(Arc<Vec<ResourceHandle>>),
}

#[derive(Clone)]
struct TensorData {
    dtype: DType,
    shape: TensorShape,
    storage: Storage,
}

#[derive(Clone)]
enum Repr {
    /// A POD scalar, its little-endian bytes in the low bytes of `bits`.
    Scalar { dtype: DType, bits: u64 },
    /// Everything else.
    Shared(Arc<TensorData>),
}

static SCALAR_SHAPE: TensorShape = TensorShape::EMPTY;

/// An n-dimensional array of one dtype. See the module docs for its contract.
///
/// # Examples
/// ```
/// use actorflow_graph::{Tensor, TensorShape};
/// let t = Tensor::new(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
/// let a = t.as_array::<f32>().unwrap();
/// assert_eq!(a[[1, 0]], 3.0);
/// assert!(t.as_slice::<i32>().is_err()); // wrong dtype is an error, not a panic
/// let s = Tensor::scalar(7i64);
/// assert_eq!(s.scalar_value::<i64>().unwrap(), 7);
/// assert_eq!(s.shape(), &TensorShape::scalar());
/// ```
#[derive(Clone)]
pub struct Tensor(Repr);

fn check_len(shape: &TensorShape, len: usize) -> Result<()> {
    let n = shape.checked_num_elements()?;
    if n != len {
        return Err(Status::invalid_argument(format!(
            "{len} values cannot fill a tensor of shape {shape} ({n} elements)"
        )));
    }
    Ok(())
}

/// TensorFlow's message for a tensor that cannot be allocated: "OOM when
/// allocating tensor with shape \[2,3\] and type float: `why`". A kernel's allocator
/// says where (the device) in `why`; the executor adds the node.
pub fn oom_status(dtype: DType, shape: &TensorShape, why: impl std::fmt::Display) -> Status {
    Status::resource_exhausted(format!(
        "OOM when allocating tensor with shape {shape} and type {dtype}: {why}"
    ))
}

/// The bytes of element storage a tensor of `dtype` and `shape` takes (for strings
/// and resources, their handles), or `None` when that overflows `usize`.
pub fn storage_bytes(dtype: DType, shape: &TensorShape) -> Option<usize> {
    let elem = match dtype {
        DType::String => std::mem::size_of::<Bytes>(),
        DType::Resource => std::mem::size_of::<ResourceHandle>(),
        d => d.size(),
    };
    shape.checked_num_elements().ok()?.checked_mul(elem)
}

/// A `Vec` of `n` copies of `value`, or `ResourceExhausted` (as [`oom_status`]
/// words it, for a tensor of `dtype` and `shape`) when it cannot be allocated.
fn try_filled_vec<T: Clone>(
    n: usize,
    value: T,
    dtype: DType,
    shape: &TensorShape,
) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let bytes = n.saturating_mul(std::mem::size_of::<T>());
        oom_status(dtype, shape, AllocError::OutOfMemory { bytes })
    })?;
    v.resize(n, value);
    Ok(v)
}

/// A POD tensor from its bytes (already checked to fit the shape).
fn pod(dtype: DType, shape: TensorShape, bytes: &[u8]) -> Result<Tensor> {
    if shape.rank() == 0 && bytes.len() <= 8 {
        let mut bits = 0u64;
        bytemuck::bytes_of_mut(&mut bits)[..bytes.len()].copy_from_slice(bytes);
        return Ok(Tensor(Repr::Scalar { dtype, bits }));
    }
    let buf = AlignedBuffer::try_from_bytes(bytes).map_err(|e| oom_status(dtype, &shape, e))?;
    Ok(shared(dtype, shape, Storage::Pod(buf)))
}

/// [`pod`] for bytes already in memory, whose copy only the allocator can refuse:
/// then the process aborts, as a `Vec` would.
fn pod_in_memory(dtype: DType, shape: TensorShape, bytes: &[u8]) -> Tensor {
    match pod(dtype, shape, bytes) {
        Ok(t) => t,
        Err(_) => abort_out_of_memory(bytes.len()),
    }
}

/// What std does when an infallible allocation fails.
#[cold]
fn abort_out_of_memory(bytes: usize) -> ! {
    let layout = std::alloc::Layout::from_size_align(bytes, buffer::BUFFER_ALIGNMENT)
        .unwrap_or(std::alloc::Layout::new::<u8>());
    std::alloc::handle_alloc_error(layout)
}

fn shared(dtype: DType, shape: TensorShape, storage: Storage) -> Tensor {
    Tensor(Repr::Shared(Arc::new(TensorData {
        dtype,
        shape,
        storage,
    })))
}

impl Tensor {
    /// A tensor of this shape holding `data` (row-major).
    pub fn new<T: TensorType>(shape: &[usize], data: Vec<T>) -> Result<Tensor> {
        Tensor::from_slice(shape, &data)
    }

    /// A tensor of this shape holding a copy of `data` (row-major).
    pub fn from_slice<T: TensorType>(shape: &[usize], data: &[T]) -> Result<Tensor> {
        let shape = TensorShape::new(shape);
        check_len(&shape, data.len())?;
        pod(T::DTYPE, shape, T::as_bytes(data))
    }

    /// A rank-0 tensor (stored in the handle: no allocation).
    #[inline]
    pub fn scalar<T: TensorType>(v: T) -> Tensor {
        let mut bits = 0u64;
        let b = T::as_bytes(std::slice::from_ref(&v));
        bytemuck::bytes_of_mut(&mut bits)[..b.len()].copy_from_slice(b);
        Tensor(Repr::Scalar {
            dtype: T::DTYPE,
            bits,
        })
    }

    /// A rank-1 tensor (a copy of memory the caller holds; see the module docs).
    pub fn vector<T: TensorType>(v: &[T]) -> Tensor {
        pod_in_memory(T::DTYPE, TensorShape::vector(v.len()), T::as_bytes(v))
    }

    /// A tensor of zeros (empty strings, default handles) of this dtype and shape,
    /// or `ResourceExhausted` when it cannot be allocated (its size overflows, or
    /// the allocator refuses it); see the module docs.
    pub fn try_zeros(dtype: DType, shape: impl Into<TensorShape>) -> Result<Tensor> {
        let shape = shape.into();
        let Ok(n) = shape.checked_num_elements() else {
            return Err(oom_status(dtype, &shape, AllocError::CapacityOverflow));
        };
        match dtype {
            DType::String => {
                let v = try_filled_vec(n, Bytes::new(), dtype, &shape)?;
                Ok(shared(dtype, shape, Storage::Strings(Arc::new(v))))
            }
            DType::Resource => {
                let v = try_filled_vec(n, ResourceHandle::default(), dtype, &shape)?;
                Ok(shared(dtype, shape, Storage::Resources(Arc::new(v))))
            }
            d if shape.rank() == 0 => Ok(Tensor(Repr::Scalar { dtype: d, bits: 0 })),
            d => {
                let buf = n
                    .checked_mul(d.size())
                    .ok_or(AllocError::CapacityOverflow)
                    .and_then(AlignedBuffer::try_zeroed)
                    .map_err(|e| oom_status(d, &shape, e))?;
                Ok(shared(d, shape, Storage::Pod(buf)))
            }
        }
    }

    /// [`Tensor::try_zeros`] for a shape the caller controls: a tensor that cannot
    /// be allocated aborts the process, as a `Vec` would (an overflowing shape
    /// panics). Never for shapes read from input.
    pub fn zeros(dtype: DType, shape: impl Into<TensorShape>) -> Tensor {
        let shape = shape.into();
        match Tensor::try_zeros(dtype, shape.clone()) {
            Ok(t) => t,
            Err(e) => match storage_bytes(dtype, &shape) {
                Some(bytes) => abort_out_of_memory(bytes),
                None => panic!("Tensor::zeros: {e}"),
            },
        }
    }

    /// A tensor of this shape whose elements `fill` writes (they start at zero), or
    /// `ResourceExhausted` when it cannot be allocated; `fill` is not called then.
    pub fn try_build<T: TensorType>(
        shape: impl Into<TensorShape>,
        fill: impl FnOnce(&mut [T]),
    ) -> Result<Tensor> {
        let mut t = Tensor::try_zeros(T::DTYPE, shape)?;
        // The fresh tensor is unique and of dtype T, so this view cannot fail.
        if let Ok(s) = t.as_mut_slice::<T>() {
            fill(s);
        }
        Ok(t)
    }

    /// [`Tensor::try_build`] for a shape the caller controls, aborting as
    /// [`Tensor::zeros`] does.
    pub fn build<T: TensorType>(
        shape: impl Into<TensorShape>,
        fill: impl FnOnce(&mut [T]),
    ) -> Tensor {
        let mut t = Tensor::zeros(T::DTYPE, shape);
        // The fresh tensor is unique and of dtype T, so this view cannot fail.
        if let Ok(s) = t.as_mut_slice::<T>() {
            fill(s);
        }
        t
    }

    /// A tensor from its dtype, shape and raw little-endian element bytes (as in
    /// TensorFlow's `tensor_content`). Booleans are normalised to 0/1.
    pub fn from_raw_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
        if !dtype.is_pod() {
            return Err(Status::invalid_argument(format!(
                "{dtype} tensors have no raw byte representation"
            )));
        }
        let shape = TensorShape::new(shape);
        let n = shape.checked_num_elements()?;
        if n.checked_mul(dtype.size()) != Some(bytes.len()) {
            return Err(Status::invalid_argument(format!(
                "{} bytes cannot fill a {dtype} tensor of shape {shape}",
                bytes.len()
            )));
        }
        let mut t = pod(dtype, shape, bytes)?;
        if dtype == DType::Bool && bytes.iter().any(|&b| b > 1) {
            // The fresh tensor is unique: normalised in place, no second copy.
            for b in t.pod_bytes_mut()? {
                *b = (*b != 0) as u8;
            }
        }
        Ok(t)
    }

    /// A tensor of `dtype` and `shape` over `buffer` (its raw little-endian
    /// element bytes), without copying; `InvalidArgument` when the sizes differ.
    /// Booleans are normalised to 0/1.
    pub fn from_buffer(dtype: DType, shape: &[usize], buffer: AlignedBuffer) -> Result<Tensor> {
        if !dtype.is_pod() {
            return Err(Status::invalid_argument(format!(
                "{dtype} tensors have no raw byte representation"
            )));
        }
        let shape = TensorShape::new(shape);
        let n = shape.checked_num_elements()?;
        if n.checked_mul(dtype.size()) != Some(buffer.len()) {
            return Err(Status::invalid_argument(format!(
                "{} bytes cannot fill a {dtype} tensor of shape {shape}",
                buffer.len()
            )));
        }
        let normalise = dtype == DType::Bool && buffer.as_bytes().iter().any(|&b| b > 1);
        let mut t = if shape.rank() == 0 {
            // Scalars live inline.
            pod(dtype, shape, buffer.as_bytes())?
        } else {
            shared(dtype, shape, Storage::Pod(buffer))
        };
        if normalise {
            for b in t.pod_bytes_mut()? {
                *b = (*b != 0) as u8;
            }
        }
        Ok(t)
    }

    /// A string tensor of this shape.
    pub fn from_strings<S: Into<Bytes>>(shape: &[usize], values: Vec<S>) -> Result<Tensor> {
        let shape = TensorShape::new(shape);
        check_len(&shape, values.len())?;
        let v = values.into_iter().map(Into::into).collect();
        Ok(shared(DType::String, shape, Storage::Strings(Arc::new(v))))
    }

    /// A scalar string tensor.
    pub fn string_scalar(s: impl Into<Bytes>) -> Tensor {
        shared(
            DType::String,
            TensorShape::scalar(),
            Storage::Strings(Arc::new(vec![s.into()])),
        )
    }

    /// A resource tensor of this shape.
    pub fn from_resource_handles(shape: &[usize], handles: Vec<ResourceHandle>) -> Result<Tensor> {
        let shape = TensorShape::new(shape);
        check_len(&shape, handles.len())?;
        Ok(shared(
            DType::Resource,
            shape,
            Storage::Resources(Arc::new(handles)),
        ))
    }

    /// A scalar resource tensor.
    pub fn resource_scalar(handle: ResourceHandle) -> Tensor {
        shared(
            DType::Resource,
            TensorShape::scalar(),
            Storage::Resources(Arc::new(vec![handle])),
        )
    }

    /// A tensor copied from an ndarray view (any layout).
    pub fn from_array<T: TensorType, D: ndarray::Dimension>(
        a: ndarray::ArrayView<'_, T, D>,
    ) -> Tensor {
        let shape = TensorShape::new(a.shape());
        match a.as_slice() {
            Some(s) => pod_in_memory(T::DTYPE, shape, T::as_bytes(s)),
            None => Tensor::build::<T>(shape, |o| {
                for (o, &v) in o.iter_mut().zip(a.iter()) {
                    *o = v;
                }
            }),
        }
    }

    /// The element type.
    #[inline]
    pub fn dtype(&self) -> DType {
        match &self.0 {
            Repr::Scalar { dtype, .. } => *dtype,
            Repr::Shared(d) => d.dtype,
        }
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &TensorShape {
        match &self.0 {
            Repr::Scalar { .. } => &SCALAR_SHAPE,
            Repr::Shared(d) => &d.shape,
        }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.shape().dims()
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape().rank()
    }

    /// The number of elements.
    pub fn num_elements(&self) -> usize {
        self.shape().num_elements()
    }

    /// True for a rank-0 POD tensor held in the handle.
    #[inline]
    pub fn is_inline_scalar(&self) -> bool {
        matches!(self.0, Repr::Scalar { .. })
    }

    /// Bytes of element storage (strings: total string bytes).
    pub fn byte_size(&self) -> usize {
        match &self.0 {
            Repr::Scalar { dtype, .. } => dtype.size(),
            Repr::Shared(d) => match &d.storage {
                Storage::Pod(b) => b.len(),
                Storage::Strings(s) => s.iter().map(Bytes::len).sum(),
                Storage::Resources(r) => r.len() * std::mem::size_of::<ResourceHandle>(),
            },
        }
    }

    /// True when no other tensor shares this one's storage, so writing to it in
    /// place is invisible to anyone else (inline scalars are always unique).
    pub fn is_unique(&mut self) -> bool {
        match &mut self.0 {
            Repr::Scalar { .. } => true,
            Repr::Shared(d) => match Arc::get_mut(d) {
                None => false,
                Some(d) => match &mut d.storage {
                    Storage::Pod(b) => b.is_unique(),
                    Storage::Strings(s) => Arc::get_mut(s).is_some(),
                    Storage::Resources(r) => Arc::get_mut(r).is_some(),
                },
            },
        }
    }

    /// True when both tensors view the same heap buffer.
    pub fn shares_buffer_with(&self, other: &Tensor) -> bool {
        match (&self.0, &other.0) {
            (Repr::Shared(a), Repr::Shared(b)) => match (&a.storage, &b.storage) {
                (Storage::Pod(x), Storage::Pod(y)) => x.ptr_eq(y),
                (Storage::Strings(x), Storage::Strings(y)) => Arc::ptr_eq(x, y),
                (Storage::Resources(x), Storage::Resources(y)) => Arc::ptr_eq(x, y),
                _ => false,
            },
            _ => false,
        }
    }

    fn type_error(&self, want: DType) -> Status {
        Status::invalid_argument(format!(
            "expected a {want} tensor, got a {} tensor of shape {}",
            self.dtype(),
            self.shape()
        ))
    }

    /// The raw element bytes of a POD tensor.
    #[inline]
    pub fn as_bytes(&self) -> Result<&[u8]> {
        match &self.0 {
            Repr::Scalar { dtype, bits } => Ok(&bytemuck::bytes_of(bits)[..dtype.size()]),
            Repr::Shared(d) => match &d.storage {
                Storage::Pod(b) => Ok(b.as_bytes()),
                _ => Err(Status::invalid_argument(format!(
                    "{} tensors have no raw byte representation",
                    d.dtype
                ))),
            },
        }
    }

    /// The elements' bytes as a `Bytes`, without copying heap storage.
    pub fn to_bytes(&self) -> Result<Bytes> {
        match &self.0 {
            Repr::Shared(d) => match &d.storage {
                Storage::Pod(b) => Ok(b.to_bytes()),
                _ => Err(self.type_error(DType::U8)),
            },
            Repr::Scalar { .. } => Ok(Bytes::copy_from_slice(self.as_bytes()?)),
        }
    }

    /// The elements as a slice; `InvalidArgument` when `T` is not the dtype.
    #[inline]
    pub fn as_slice<T: TensorType>(&self) -> Result<&[T]> {
        if T::DTYPE != self.dtype() {
            return Err(self.type_error(T::DTYPE));
        }
        Ok(T::cast(self.as_bytes()?))
    }

    /// The elements as a mutable slice, copying the storage first if it is shared.
    #[inline]
    pub fn as_mut_slice<T: TensorType>(&mut self) -> Result<&mut [T]> {
        if T::DTYPE != self.dtype() {
            return Err(self.type_error(T::DTYPE));
        }
        Ok(T::cast_mut(self.pod_bytes_mut()?))
    }

    /// The element bytes of a POD tensor, mutably (copy-on-write). Private: a
    /// `bool` tensor's bytes must stay 0 or 1.
    #[inline]
    fn pod_bytes_mut(&mut self) -> Result<&mut [u8]> {
        match &mut self.0 {
            Repr::Scalar { dtype, bits } => {
                let n = dtype.size();
                Ok(&mut bytemuck::bytes_of_mut(bits)[..n])
            }
            Repr::Shared(d) => {
                let d = Arc::make_mut(d);
                match &mut d.storage {
                    Storage::Pod(b) => match b.make_mut() {
                        Ok(bytes) => Ok(bytes),
                        Err(e) => Err(oom_status(d.dtype, &d.shape, e)),
                    },
                    _ => Err(Status::internal("POD dtype with non-POD storage")),
                }
            }
        }
    }

    /// A zero-copy ndarray view.
    pub fn as_array<T: TensorType>(&self) -> Result<ArrayViewD<'_, T>> {
        let s = self.as_slice::<T>()?;
        ArrayViewD::from_shape(IxDyn(self.dims()), s)
            .map_err(|e| Status::internal(format!("ndarray view: {e}")))
    }

    /// A zero-copy mutable ndarray view (copy-on-write, as [`Tensor::as_mut_slice`]).
    pub fn as_array_mut<T: TensorType>(&mut self) -> Result<ArrayViewMutD<'_, T>> {
        let shape = IxDyn(self.dims());
        let s = self.as_mut_slice::<T>()?;
        ArrayViewMutD::from_shape(shape, s)
            .map_err(|e| Status::internal(format!("ndarray view: {e}")))
    }

    /// The value of a one-element tensor.
    #[inline]
    pub fn scalar_value<T: TensorType>(&self) -> Result<T> {
        let s = self.as_slice::<T>()?;
        if s.len() != 1 {
            return Err(Status::invalid_argument(format!(
                "expected a scalar, got shape {}",
                self.shape()
            )));
        }
        Ok(s[0])
    }

    /// The elements of a string tensor.
    pub fn as_strings(&self) -> Result<&[Bytes]> {
        match &self.0 {
            Repr::Shared(d) => match &d.storage {
                Storage::Strings(s) => Ok(s),
                _ => Err(self.type_error(DType::String)),
            },
            _ => Err(self.type_error(DType::String)),
        }
    }

    /// The elements of a string tensor, mutably (copy-on-write).
    pub fn as_strings_mut(&mut self) -> Result<&mut [Bytes]> {
        let err = self.type_error(DType::String);
        match &mut self.0 {
            Repr::Shared(d) => match &mut Arc::make_mut(d).storage {
                Storage::Strings(s) => Ok(Arc::make_mut(s).as_mut_slice()),
                _ => Err(err),
            },
            _ => Err(err),
        }
    }

    /// The elements of a resource tensor.
    pub fn as_resource_handles(&self) -> Result<&[ResourceHandle]> {
        match &self.0 {
            Repr::Shared(d) => match &d.storage {
                Storage::Resources(r) => Ok(r),
                _ => Err(self.type_error(DType::Resource)),
            },
            _ => Err(self.type_error(DType::Resource)),
        }
    }

    /// The same elements under another shape with as many elements; no copy.
    pub fn reshaped(&self, shape: impl Into<TensorShape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.checked_num_elements()? != self.num_elements() {
            return Err(Status::invalid_argument(format!(
                "cannot reshape a tensor of shape {} ({} elements) to {shape}",
                self.shape(),
                self.num_elements()
            )));
        }
        match &self.0 {
            Repr::Scalar { dtype, bits } if shape.rank() == 0 => Ok(Tensor(Repr::Scalar {
                dtype: *dtype,
                bits: *bits,
            })),
            Repr::Scalar { dtype, .. } => pod(*dtype, shape, self.as_bytes()?),
            Repr::Shared(d) => match &d.storage {
                Storage::Pod(b) if shape.rank() == 0 && b.len() <= 8 => {
                    pod(d.dtype, shape, b.as_bytes())
                }
                storage => Ok(shared(d.dtype, shape, storage.clone())),
            },
        }
    }

    /// `InvalidArgument` unless the dtype is `dtype`.
    pub fn expect_dtype(&self, dtype: DType) -> Result<()> {
        if self.dtype() != dtype {
            return Err(self.type_error(dtype));
        }
        Ok(())
    }

    /// `InvalidArgument` unless the shape is compatible with `shape`.
    pub fn expect_shape(&self, shape: &Shape) -> Result<()> {
        if !shape.is_compatible_with(self.shape()) {
            return Err(Status::invalid_argument(format!(
                "expected shape {shape}, got {}",
                self.shape()
            )));
        }
        Ok(())
    }

    /// The elements converted to `f64` (for tests and printing), or `None` for
    /// string and resource tensors.
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        fn conv<T: TensorType>(t: &Tensor) -> Option<Vec<f64>> {
            t.as_slice::<T>()
                .ok()
                .map(|s| s.iter().map(|v| v.to_f64()).collect())
        }
        crate::dispatch_pod!(self.dtype(), T => conv::<T>(self), None)
    }
}

impl PartialEq for Tensor {
    /// Equal dtypes, shapes and elements; floats compare bit for bit.
    fn eq(&self, other: &Tensor) -> bool {
        if self.dtype() != other.dtype() || self.shape() != other.shape() {
            return false;
        }
        match self.dtype() {
            DType::String => self.as_strings().ok() == other.as_strings().ok(),
            DType::Resource => self.as_resource_handles().ok() == other.as_resource_handles().ok(),
            _ => match (self.as_bytes(), other.as_bytes()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            },
        }
    }
}

#[cfg(test)]
mod tests;
