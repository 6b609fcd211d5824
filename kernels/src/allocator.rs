//! [`Allocator`]: how kernels allocate the tensors whose sizes come from their
//! inputs (outputs and large temporaries), TensorFlow's per-device allocator.
//!
//! Contract:
//! - An allocation never aborts the process. A tensor larger than the device's
//!   per-allocation limit ([`DeviceContext::max_allocation_bytes`]), whose size
//!   overflows, or that the system allocator refuses is `ResourceExhausted`:
//!   "OOM when allocating tensor with shape \[2,3\] and type float32 on
//!   /job:localhost/replica:0/task:0/device:CPU:0 …", and the executor adds the
//!   node. The step fails; the session stays usable.
//! - The limit check is one comparison against a number the device holds (no lock,
//!   no atomic, no accounting of live bytes): it bounds a single allocation, as
//!   TensorFlow's per-device `memory_limit` bounds the allocations its BFC
//!   allocator hands out.
//! - The limit defaults to [`default_max_allocation_bytes`], the machine's memory:
//!   with overcommit, a larger allocation might be granted and the process killed
//!   when it is touched, so it is refused before it is made.
//!
//! [`DeviceContext::max_allocation_bytes`]: crate::DeviceContext::max_allocation_bytes

use std::sync::OnceLock;

use graph::tensor::storage_bytes;
use graph::{DType, Result, Status, Tensor, TensorShape, TensorType};

/// Allocates tensors for kernels on one device under its per-allocation limit; see
/// the module docs. Cheap to copy: a device name and a number.
///
/// # Examples
/// ```
/// use actorflow_kernels::allocator::Allocator;
/// use graph::{Code, DType};
/// let a = Allocator::new("/device:CPU:0", 1 << 20);
/// assert_eq!(a.zeros(DType::F32, [2, 3]).unwrap().num_elements(), 6);
/// let e = a.zeros(DType::F32, [1 << 20]).unwrap_err(); // 4 MiB > 1 MiB
/// assert_eq!(e.code(), Code::ResourceExhausted);
/// assert!(e.message().starts_with(
///     "OOM when allocating tensor with shape [1048576] and type float32 on /device:CPU:0"
/// ), "{e}");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Allocator<'a> {
    device: &'a str,
    max_bytes: usize,
}

impl<'a> Allocator<'a> {
    /// An allocator for `device` refusing single allocations above `max_bytes`.
    pub fn new(device: &'a str, max_bytes: usize) -> Allocator<'a> {
        Allocator { device, max_bytes }
    }

    /// An allocator with no limit of its own (tools and tests): allocations are
    /// still fallible.
    pub fn unlimited() -> Allocator<'static> {
        Allocator::new("the host", usize::MAX)
    }

    /// The most bytes one allocation may take.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The bytes a tensor of `dtype` and `shape` takes, or `ResourceExhausted` when
    /// it is more than the limit (or overflows).
    #[inline]
    pub fn check(&self, dtype: DType, shape: &TensorShape) -> Result<usize> {
        match storage_bytes(dtype, shape) {
            Some(bytes) if bytes <= self.max_bytes => Ok(bytes),
            bytes => Err(self.over_limit(dtype, shape, bytes)),
        }
    }

    #[cold]
    #[inline(never)]
    fn over_limit(&self, dtype: DType, shape: &TensorShape, bytes: Option<usize>) -> Status {
        let why = match bytes {
            Some(b) => format!(
                "{b} bytes is more than the {} bytes one allocation may take \
                 (SessionOptions::max_allocation_bytes)",
                self.max_bytes
            ),
            None => "its size overflows the address space".to_owned(),
        };
        self.oom(dtype, shape, why)
    }

    #[cold]
    #[inline(never)]
    fn refused(&self, dtype: DType, shape: &TensorShape, bytes: usize) -> Status {
        self.oom(
            dtype,
            shape,
            format_args!("the system allocator refused {bytes} bytes"),
        )
    }

    /// TensorFlow's wording: "OOM when allocating tensor with shape [2,3] and type
    /// float on `device` by allocator cpu: `why`".
    fn oom(&self, dtype: DType, shape: &TensorShape, why: impl std::fmt::Display) -> Status {
        Status::resource_exhausted(format!(
            "OOM when allocating tensor with shape {shape} and type {dtype} on {} \
             by allocator cpu: {why}",
            self.device
        ))
    }

    /// A tensor of zeros (empty strings, default handles).
    #[inline]
    pub fn zeros(&self, dtype: DType, shape: impl Into<TensorShape>) -> Result<Tensor> {
        let shape = shape.into();
        let bytes = self.check(dtype, &shape)?;
        Tensor::try_zeros(dtype, shape.clone()).map_err(|_| self.refused(dtype, &shape, bytes))
    }

    /// A tensor whose elements `fill` writes (they start at zero); `fill` is not
    /// called when the tensor cannot be had.
    #[inline]
    pub fn build<T: TensorType>(
        &self,
        shape: impl Into<TensorShape>,
        fill: impl FnOnce(&mut [T]),
    ) -> Result<Tensor> {
        let mut t = self.zeros(T::DTYPE, shape)?;
        fill(t.as_mut_slice::<T>()?);
        Ok(t)
    }

    /// A temporary `Vec` of `n` copies of `value`, sized like an output (a
    /// broadcast index table, per-row scratch), under the same limit.
    pub fn vec<T: Clone>(&self, n: usize, value: T) -> Result<Vec<T>> {
        let shape = || TensorShape::vector(n);
        let bytes = n
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= self.max_bytes)
            .ok_or_else(|| self.over_limit(DType::U8, &shape(), n.checked_mul(size_of::<T>())))?;
        let mut v = Vec::new();
        v.try_reserve_exact(n)
            .map_err(|_| self.refused(DType::U8, &shape(), bytes))?;
        v.resize(n, value);
        Ok(v)
    }
}

/// The limit devices get when none is set: the machine's memory (the smaller of
/// the physical memory and the cgroup's `memory.max`, read once), or `usize::MAX`
/// where neither can be read (every allocation is still fallible then).
pub fn default_max_allocation_bytes() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let physical = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| parse_meminfo_total(&s));
        let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        match (physical, cgroup) {
            (Some(p), Some(c)) => p.min(c),
            (Some(b), None) | (None, Some(b)) => b,
            (None, None) => usize::MAX,
        }
    })
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn parse_meminfo_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::Code;

    #[test]
    fn limits_and_refusals_are_resource_exhausted() {
        let a = Allocator::new("/device:CPU:0", 1000);
        assert_eq!(
            a.check(DType::F64, &TensorShape::new(&[125])).unwrap(),
            1000
        );
        let e = a.zeros(DType::F64, [126]).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted);
        assert!(
            e.message().contains("1008 bytes is more than the 1000"),
            "{e}"
        );
        let e = a.zeros(DType::F32, [usize::MAX, 2]).unwrap_err();
        assert!(e.message().contains("overflows"), "{e}");
        let e = a.vec(1001, 0u8).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted);
        assert_eq!(a.vec(3, 7u32).unwrap(), vec![7, 7, 7]);
        let t = a
            .build::<i32>([3], |o| o.copy_from_slice(&[1, 2, 3]))
            .unwrap();
        assert_eq!(t, Tensor::vector(&[1, 2, 3]));

        // Within the limit but refused by the system allocator.
        let unlimited = Allocator::new("/device:CPU:0", usize::MAX);
        let e = unlimited.zeros(DType::F32, [1usize << 60]).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted);
        assert!(e.message().contains("the system allocator refused"), "{e}");
        assert!(unlimited.vec(1usize << 61, 0u64).is_err());
    }

    #[test]
    fn default_limit_is_the_machines_memory() {
        assert_eq!(
            parse_meminfo_total("MemTotal:       16318204 kB\nMemFree: 1 kB\n"),
            Some(16318204 * 1024)
        );
        assert_eq!(parse_meminfo_total("nothing"), None);
        assert!(default_max_allocation_bytes() >= 1 << 20);
    }
}
