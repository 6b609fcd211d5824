//! How the data-movement kernels see elements: [`Elem`], one Rust type per storage
//! class (1-, 2-, 4- and 8-byte words for the POD dtypes, `bool`, string bytes and
//! resource handles), chosen once per kernel by `dispatch_elem!` from the dtype's
//! element size. A kernel that only moves elements is thus compiled seven times,
//! not once per dtype, and copies contiguous runs with `memcpy`.
//!
//! Also the readers of the small integer control inputs (shapes, permutations,
//! axes, paddings) and the [`IndexElem`] types of large index inputs.

use bytes::Bytes;
use graph::{DType, ResourceHandle, Result, Status, Tensor, TensorShape, TensorType};
use smallvec::SmallVec;

use crate::allocator::Allocator;

/// An element type the data-movement kernels copy (see the module docs).
pub trait Elem: Clone + Default + Send + Sync + 'static {
    /// The elements of `t`, whose dtype belongs to this storage class.
    fn view(t: &Tensor) -> Result<&[Self]>;

    /// A new tensor of `dtype` and `shape` from `alloc` (elements start at zero,
    /// empty or default) whose elements `fill` writes; `ResourceExhausted` when it
    /// cannot be had.
    fn build(
        alloc: Allocator<'_>,
        dtype: DType,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]) -> Result<()>,
    ) -> Result<Tensor>;
}

/// The bytes of a POD (non-bool) tensor, mutably; the tensor is unique, as it was
/// just allocated.
fn pod_bytes_mut(t: &mut Tensor) -> Result<&mut [u8]> {
    macro_rules! arms {
        ($($d:ident => $t:ty),*) => {
            match t.dtype() {
                $(DType::$d => Ok(bytemuck::cast_slice_mut::<$t, u8>(t.as_mut_slice::<$t>()?)),)*
                d => Err(Status::internal(format!("{d} has no word storage"))),
            }
        };
    }
    arms!(F32 => f32, F64 => f64, F16 => graph::f16, BF16 => graph::bf16, I8 => i8,
        I16 => i16, I32 => i32, I64 => i64, U8 => u8, U16 => u16, U32 => u32, U64 => u64)
}

macro_rules! word_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn view(t: &Tensor) -> Result<&[Self]> {
                if t.dtype().size() != std::mem::size_of::<$t>() || t.dtype() == DType::Bool {
                    return Err(Status::internal(format!("{} elements viewed as {}", t.dtype(), stringify!($t))));
                }
                bytemuck::try_cast_slice(t.as_bytes()?)
                    .map_err(|e| Status::internal(format!("misaligned tensor storage: {e}")))
            }

            fn build(alloc: Allocator<'_>, dtype: DType, shape: TensorShape, fill: impl FnOnce(&mut [Self]) -> Result<()>) -> Result<Tensor> {
                if dtype.size() != std::mem::size_of::<$t>() || dtype == DType::Bool {
                    return Err(Status::internal(format!("{dtype} elements built as {}", stringify!($t))));
                }
                let mut t = alloc.zeros(dtype, shape)?;
                let words = bytemuck::try_cast_slice_mut(pod_bytes_mut(&mut t)?)
                    .map_err(|e| Status::internal(format!("misaligned tensor storage: {e}")))?;
                fill(words)?;
                Ok(t)
            }
        }
    )*};
}

word_elem!(u8, u16, u32, u64);

impl Elem for bool {
    fn view(t: &Tensor) -> Result<&[Self]> {
        t.as_slice::<bool>()
    }

    fn build(
        alloc: Allocator<'_>,
        dtype: DType,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]) -> Result<()>,
    ) -> Result<Tensor> {
        let mut t = alloc.zeros(dtype, shape)?;
        fill(t.as_mut_slice::<bool>()?)?;
        Ok(t)
    }
}

impl Elem for Bytes {
    fn view(t: &Tensor) -> Result<&[Self]> {
        t.as_strings()
    }

    fn build(
        alloc: Allocator<'_>,
        dtype: DType,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]) -> Result<()>,
    ) -> Result<Tensor> {
        let mut t = alloc.zeros(dtype, shape)?;
        fill(t.as_strings_mut()?)?;
        Ok(t)
    }
}

impl Elem for ResourceHandle {
    fn view(t: &Tensor) -> Result<&[Self]> {
        t.as_resource_handles()
    }

    fn build(
        alloc: Allocator<'_>,
        dtype: DType,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]) -> Result<()>,
    ) -> Result<Tensor> {
        if dtype != DType::Resource {
            return Err(Status::internal(format!(
                "{dtype} elements built as resource handles"
            )));
        }
        alloc.check(dtype, &shape)?;
        let mut v = alloc.vec(shape.num_elements(), ResourceHandle::default())?;
        fill(&mut v)?;
        Tensor::from_resource_handles(shape.dims(), v)
    }
}

/// Binds `$E` to the [`Elem`] type of dtype `$dtype` and evaluates `$body`.
macro_rules! dispatch_elem {
    ($dtype:expr, $E:ident => $body:expr) => {
        match $dtype {
            graph::DType::U8 | graph::DType::I8 => {
                type $E = u8;
                $body
            }
            graph::DType::Bool => {
                type $E = bool;
                $body
            }
            graph::DType::I16 | graph::DType::U16 | graph::DType::F16 | graph::DType::BF16 => {
                type $E = u16;
                $body
            }
            graph::DType::I32 | graph::DType::U32 | graph::DType::F32 => {
                type $E = u32;
                $body
            }
            graph::DType::I64 | graph::DType::U64 | graph::DType::F64 => {
                type $E = u64;
                $body
            }
            graph::DType::String => {
                type $E = bytes::Bytes;
                $body
            }
            graph::DType::Resource => {
                type $E = graph::ResourceHandle;
                $body
            }
        }
    };
}
pub(crate) use dispatch_elem;

/// Every dtype except `Resource` (the kernels TensorFlow registers for
/// `TF_CALL_POD_STRING_TYPES`).
pub const POD_STRING_DTYPES: &[DType] = &[
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
    DType::String,
];

/// The integer types of the small control inputs.
pub const INDEX_DTYPES: &[DType] = &[DType::I32, DType::I64];

/// Small vectors of control values (shapes, axes, permutations).
pub type Ints = SmallVec<[i64; 8]>;

/// The values of an integer tensor (int8/16/32/64, uint8) as `i64`.
pub fn int_values(t: &Tensor) -> Result<Ints> {
    fn conv<T: IndexElem>(t: &Tensor) -> Result<Ints> {
        Ok(t.as_slice::<T>()?.iter().map(|v| v.to_i64()).collect())
    }
    match t.dtype() {
        DType::I32 => conv::<i32>(t),
        DType::I64 => conv::<i64>(t),
        DType::I16 => conv::<i16>(t),
        DType::I8 => conv::<i8>(t),
        DType::U8 => conv::<u8>(t),
        d => Err(Status::invalid_argument(format!(
            "expected an integer tensor, got {d}"
        ))),
    }
}

/// The one value of a one-element integer tensor.
pub fn int_scalar(t: &Tensor) -> Result<i64> {
    let v = int_values(t)?;
    match v[..] {
        [x] => Ok(x),
        _ => Err(Status::invalid_argument(format!(
            "expected a single value, got shape {}",
            t.shape()
        ))),
    }
}

/// A shape from dimension values, with TensorFlow's `MakeShape` errors.
pub fn make_shape(dims: &[i64]) -> Result<TensorShape> {
    let mut out = TensorShape::scalar();
    for &d in dims {
        if d < 0 {
            return Err(Status::invalid_argument(format!(
                "Dimension {d} must be >= 0"
            )));
        }
        out.push(d as usize);
    }
    if out.checked_num_elements().is_err() {
        return Err(Status::invalid_argument(format!(
            "Shape {out} would have more than 2**63 - 1 elements"
        )));
    }
    Ok(out)
}

/// An integer type of a large index input (Gather's indices, OneHot's indices).
pub trait IndexElem: TensorType {
    /// The value as `i64`.
    fn to_i64(self) -> i64;
}

macro_rules! index_elem {
    ($($t:ty),*) => {$(impl IndexElem for $t {
        #[inline(always)]
        fn to_i64(self) -> i64 {
            i64::from(self)
        }
    })*};
}
index_elem!(i8, i16, i32, i64, u8);

/// Binds `$I` to the index type of `$dtype` (int8/16/32/64, uint8).
macro_rules! dispatch_index {
    ($dtype:expr, $I:ident => $body:expr) => {
        match $dtype {
            graph::DType::I32 => {
                type $I = i32;
                $body
            }
            graph::DType::I64 => {
                type $I = i64;
                $body
            }
            graph::DType::I16 => {
                type $I = i16;
                $body
            }
            graph::DType::I8 => {
                type $I = i8;
                $body
            }
            graph::DType::U8 => {
                type $I = u8;
                $body
            }
            other => Err(graph::Status::unimplemented(format!(
                "index dtype {other} is not supported"
            ))),
        }
    };
}
pub(crate) use dispatch_index;

/// `[a,b,c]` as TensorFlow prints an element's coordinates (empty for a scalar).
pub fn coords_string(dims: &[usize], mut flat: usize) -> String {
    if dims.is_empty() {
        return String::new();
    }
    let mut c = vec![0usize; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        if d > 0 {
            c[k] = flat % d;
            flat /= d;
        }
    }
    let parts: Vec<String> = c.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_views_and_builds() {
        let t = Tensor::vector(&[1.5f32, -2.0]);
        let w = <u32 as Elem>::view(&t).unwrap();
        assert_eq!(w, &[1.5f32.to_bits(), (-2.0f32).to_bits()]);
        let b = <u32 as Elem>::build(
            Allocator::unlimited(),
            DType::F32,
            TensorShape::vector(2),
            |o| {
                o.copy_from_slice(&[w[1], w[0]]);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(b, Tensor::vector(&[-2.0f32, 1.5]));
        assert!(<u64 as Elem>::view(&t).is_err());
        assert!(<u8 as Elem>::view(&Tensor::scalar(true)).is_err());
        let s = Tensor::from_strings(&[2], vec!["a", "b"]).unwrap();
        assert_eq!(<Bytes as Elem>::view(&s).unwrap()[1], Bytes::from("b"));
    }

    #[test]
    fn control_values() {
        assert_eq!(
            &int_values(&Tensor::vector(&[3i64, -1])).unwrap()[..],
            &[3, -1]
        );
        assert_eq!(int_scalar(&Tensor::vector(&[7u8])).unwrap(), 7);
        assert!(int_scalar(&Tensor::vector(&[1i32, 2])).is_err());
        assert!(int_values(&Tensor::scalar(1.0f32)).is_err());
        assert_eq!(make_shape(&[2, 0]).unwrap(), TensorShape::new(&[2, 0]));
        assert_eq!(
            make_shape(&[-1]).unwrap_err().message(),
            "Dimension -1 must be >= 0"
        );
        assert!(make_shape(&[i64::MAX, 4]).is_err());
        assert_eq!(coords_string(&[2, 3], 4), "[1,1]");
        assert_eq!(coords_string(&[], 0), "");
    }
}
