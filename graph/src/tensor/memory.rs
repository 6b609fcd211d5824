//! Memory accounting: who holds how many tensor bytes (TensorFlow's
//! `AllocatorStats` and the memory fields of its step statistics).
//!
//! Contract:
//! - A [`MemoryCounter`] counts the element bytes of the tensor buffers charged to
//!   it: bytes in use now, the peak of that, the largest single allocation, the
//!   number of allocations and the bytes they took in all. Bytes are the tensors'
//!   own (`num_elements × dtype size`), not the allocator's rounding, so a figure
//!   can be computed by hand from the shapes.
//! - A buffer is charged when it is allocated, to the counters of the
//!   [`ChargeScope`] open on the allocating thread (none: uncharged), and released
//!   when its last handle drops, on whatever thread that happens. The executor
//!   opens a scope for its device (and, when the step collects statistics, for the
//!   step on that device) around the kernels it runs, so every buffer a kernel
//!   allocates — outputs, copies made on write, temporaries that become tensors —
//!   is counted without the kernel knowing; feeds and constants made outside a
//!   kernel are not.
//! - Counting is lock-free: an allocation costs one `fetch_add` per counter plus a
//!   `fetch_max` when it sets a new peak; strings, resources and scalars (stored in
//!   the tensor handle) have no buffer and cost nothing.
//! - Peaks are exact under concurrency: every increment observes the value it
//!   produced, and the peak is the largest of those (the `loom_memory` model
//!   checks it).

use std::cell::RefCell;
use std::sync::Arc;

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A snapshot of a [`MemoryCounter`] (TensorFlow's `AllocatorStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Allocations charged so far.
    pub num_allocs: u64,
    /// Bytes charged and not yet released.
    pub bytes_in_use: usize,
    /// The most bytes in use at any time (since the counter was made or its peak
    /// last reset).
    pub peak_bytes_in_use: usize,
    /// The largest single allocation.
    pub largest_alloc_size: usize,
    /// Bytes of every allocation charged so far, released or not.
    pub total_bytes: u64,
}

/// Live tensor bytes on one device or in one step; see the module docs.
#[derive(Debug, Default)]
pub struct MemoryCounter {
    in_use: AtomicUsize,
    peak: AtomicUsize,
    largest: AtomicUsize,
    allocs: AtomicU64,
    total: AtomicU64,
}

impl MemoryCounter {
    /// A counter with nothing charged.
    pub fn new() -> MemoryCounter {
        MemoryCounter::default()
    }

    /// Counts an allocation of `bytes`.
    #[inline]
    pub fn charge(&self, bytes: usize) {
        let now = self.in_use.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if now > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
        if bytes > self.largest.load(Ordering::Relaxed) {
            self.largest.fetch_max(bytes, Ordering::Relaxed);
        }
        self.allocs.fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Counts the release of an allocation of `bytes` charged before.
    #[inline]
    pub fn release(&self, bytes: usize) {
        self.in_use.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Bytes in use now.
    pub fn bytes_in_use(&self) -> usize {
        self.in_use.load(Ordering::Relaxed)
    }

    /// Bytes of every allocation so far (a running total: the difference across a
    /// kernel is what that kernel allocated).
    pub fn total_bytes(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The most bytes in use so far.
    pub fn peak_bytes_in_use(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// The counts now.
    pub fn stats(&self) -> AllocatorStats {
        AllocatorStats {
            num_allocs: self.allocs.load(Ordering::Relaxed),
            bytes_in_use: self.bytes_in_use(),
            peak_bytes_in_use: self.peak_bytes_in_use(),
            largest_alloc_size: self.largest.load(Ordering::Relaxed),
            total_bytes: self.total_bytes(),
        }
    }

    /// Starts a new peak from the bytes in use now (TensorFlow's
    /// `ResetPeakMemoryStats`); the other counts keep running.
    pub fn reset_peak(&self) {
        self.peak
            .store(self.in_use.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// The counters a buffer is charged to: its device's and, while a step collects
/// statistics, that step's on the device.
#[derive(Clone, Debug)]
pub struct Charge {
    device: Arc<MemoryCounter>,
    step: Option<Arc<MemoryCounter>>,
    /// One kernel's own count, while it runs off its executor's thread.
    kernel: Option<Arc<MemoryCounter>>,
}

impl Charge {
    /// Charges `bytes` to `device` and `step`.
    pub fn new(device: Arc<MemoryCounter>, step: Option<Arc<MemoryCounter>>) -> Charge {
        Charge {
            device,
            step,
            kernel: None,
        }
    }

    /// Whether a step's statistics count these buffers.
    pub fn counts_step(&self) -> bool {
        self.step.is_some()
    }

    /// The same charge, also counted on `kernel` (what one kernel allocated,
    /// when other kernels charge the same step at the same time).
    pub fn with_kernel(mut self, kernel: Arc<MemoryCounter>) -> Charge {
        self.kernel = Some(kernel);
        self
    }

    /// The charge of this thread's open scope, to carry to another thread.
    pub fn current() -> Option<Charge> {
        SCOPE.try_with(|s| s.borrow().clone()).ok().flatten()
    }

    fn charge(&self, bytes: usize) {
        self.device.charge(bytes);
        for c in [&self.step, &self.kernel].into_iter().flatten() {
            c.charge(bytes);
        }
    }

    fn release(&self, bytes: usize) {
        self.device.release(bytes);
        for c in [&self.step, &self.kernel].into_iter().flatten() {
            c.release(bytes);
        }
    }
}

thread_local! {
    static SCOPE: RefCell<Option<Charge>> = const { RefCell::new(None) };
}

/// Charges the buffers this thread allocates to `charge` until dropped, then
/// restores the scope that was open before (scopes nest).
#[must_use = "the scope ends when the guard drops"]
pub struct ChargeScope {
    prev: Option<Charge>,
}

impl ChargeScope {
    /// Opens a scope charging to `charge`.
    pub fn enter(charge: Charge) -> ChargeScope {
        let prev = SCOPE.with(|s| s.replace(Some(charge)));
        ChargeScope { prev }
    }
}

impl Drop for ChargeScope {
    fn drop(&mut self) {
        let prev = self.prev.take();
        // A thread being torn down has no scope left to restore.
        let _ = SCOPE.try_with(|s| s.replace(prev));
    }
}

/// A charged allocation: released when dropped.
#[derive(Debug)]
pub(crate) struct Charged {
    charge: Charge,
    bytes: usize,
}

impl Charged {
    /// Charges `bytes` to the open scope, if any.
    #[inline]
    pub(crate) fn current(bytes: usize) -> Option<Charged> {
        if bytes == 0 {
            return None;
        }
        SCOPE
            .try_with(|s| {
                s.borrow().as_ref().map(|c| {
                    c.charge(bytes);
                    Charged {
                        charge: c.clone(),
                        bytes,
                    }
                })
            })
            .ok()
            .flatten()
    }
}

impl Drop for Charged {
    fn drop(&mut self) {
        self.charge.release(self.bytes);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{DType, Tensor};

    #[test]
    fn scopes_charge_buffers_until_their_last_handle_drops() {
        let dev = Arc::new(MemoryCounter::new());
        let step = Arc::new(MemoryCounter::new());
        let outside = Tensor::zeros(DType::F32, [10]);
        let (a, b);
        {
            let _s = ChargeScope::enter(Charge::new(Arc::clone(&dev), Some(Arc::clone(&step))));
            a = Tensor::zeros(DType::F32, [100]); // 400 bytes
            b = Tensor::zeros(DType::F64, [25]); // 200 bytes
            let _scalar = Tensor::scalar(1.0f32); // no buffer
            {
                let _inner = ChargeScope::enter(Charge::new(Arc::clone(&dev), None));
                drop(Tensor::zeros(DType::U8, [1000])); // the device only
            }
            drop(Tensor::zeros(DType::I32, [4])); // back in the outer scope
        }
        let after = Tensor::zeros(DType::F32, [10]); // no scope: uncharged
        let d = dev.stats();
        assert_eq!(d.bytes_in_use, 600);
        assert_eq!(d.peak_bytes_in_use, 1600);
        assert_eq!(d.largest_alloc_size, 1000);
        assert_eq!((d.num_allocs, d.total_bytes), (4, 1616));
        let s = step.stats();
        assert_eq!((s.bytes_in_use, s.peak_bytes_in_use), (600, 616));
        assert_eq!((s.num_allocs, s.total_bytes), (3, 616));
        let a2 = a.clone();
        drop(a);
        assert_eq!(dev.bytes_in_use(), 600, "a handle still holds the buffer");
        drop((a2, b, outside, after));
        assert_eq!((dev.bytes_in_use(), step.bytes_in_use()), (0, 0));
        dev.reset_peak();
        assert_eq!(dev.stats().peak_bytes_in_use, 0);
    }

    #[test]
    fn copies_made_on_write_are_charged() {
        let dev = Arc::new(MemoryCounter::new());
        let _s = ChargeScope::enter(Charge::new(Arc::clone(&dev), None));
        let mut t = Tensor::zeros(DType::F32, [8]);
        t.as_mut_slice::<f32>().unwrap()[0] = 1.0; // unique: in place
        assert_eq!(dev.stats().num_allocs, 1);
        let shared = t.clone();
        t.as_mut_slice::<f32>().unwrap()[0] = 2.0; // shared: copied
        assert_eq!((dev.stats().num_allocs, dev.bytes_in_use()), (2, 64));
        assert_eq!(shared.as_slice::<f32>().unwrap()[0], 1.0);
        drop(shared);
        assert_eq!(dev.bytes_in_use(), 32);
    }
}
