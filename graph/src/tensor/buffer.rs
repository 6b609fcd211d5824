//! Tensor storage: [`AlignedBuffer`], a reference-counted, 64-byte-aligned byte
//! buffer. Alignment comes from the chunk type, so no `unsafe` is needed to view it
//! as typed slices. Cloning an `AlignedBuffer` bumps the refcount;
//! [`AlignedBuffer::make_mut`] writes in place when the buffer is unshared and
//! copies it first otherwise.
//!
//! Every allocation is fallible: sizes come from user input (shapes, files), so a
//! buffer that cannot be had is an [`AllocError`], never an abort. Buffers are
//! taken zeroed from the allocator (`alloc_zeroed`, i.e. calloc: large buffers
//! arrive as untouched zero pages); the one `unsafe` block takes that allocation as
//! initialised chunks.

use std::alloc::Layout;
use std::sync::Arc;

use bytemuck::{Pod, Zeroable};
use bytes::Bytes;

use super::memory::Charged;

/// Alignment of every buffer, in bytes.
pub const BUFFER_ALIGNMENT: usize = 64;

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(64))]
struct Chunk([u8; BUFFER_ALIGNMENT]);

/// Why a buffer could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// The size does not fit the address space (an overflowing shape product, or
    /// more than `isize::MAX` bytes).
    CapacityOverflow,
    /// The allocator refused this many bytes.
    OutOfMemory {
        /// The bytes asked for.
        bytes: usize,
    },
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocError::CapacityOverflow => f.write_str("the size overflows the address space"),
            AllocError::OutOfMemory { bytes } => write!(f, "the allocator refused {bytes} bytes"),
        }
    }
}

impl std::error::Error for AllocError {}

/// Buffers at least this large ask the kernel for transparent huge pages: a
/// 64 MiB tensor then costs 32 page faults instead of 16 384, which is most of
/// the cost of filling a fresh large buffer (a received tensor, a kernel's output).
const HUGE_PAGE_MIN: usize = 4 << 20;

/// Advises the kernel to back `[ptr, ptr + len)` with huge pages where it can.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *const u8, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < HUGE_PAGE_MIN {
        return;
    }
    // The whole 2 MiB pages inside the range.
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + len) / HUGE * HUGE;
    if end <= start {
        return;
    }
    // SAFETY: This is safe because:
    // 1. `[start, end)` lies inside one live allocation this module owns (it was
    //    rounded inwards from `[ptr, ptr + len)`), so no other mapping is touched.
    // 2. `MADV_HUGEPAGE` only changes how the kernel backs the range: it never
    //    changes its contents, its validity or its protection, so no Rust
    //    reference to the memory can observe it; a refusal (THP off) is harmless
    //    and ignored.
    // Tested by `large_buffers_are_aligned_and_hold_their_bytes`.
    #[allow(unsafe_code)]
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_: *const u8, _: usize) {}

/// `n` zeroed chunks, or the allocator's refusal.
fn zeroed_chunks(n: usize) -> Result<Box<[Chunk]>, AllocError> {
    if n == 0 {
        return Ok(Box::default());
    }
    let layout = Layout::array::<Chunk>(n).map_err(|_| AllocError::CapacityOverflow)?;
    let huge = layout.size() >= HUGE_PAGE_MIN;
    // SAFETY: This is safe because:
    // 1. `layout` has a non-zero size (`n > 0` and a chunk is 64 bytes), as
    //    `alloc` and `alloc_zeroed` require.
    // Tested by `zeroed_buffers_are_aligned_and_zeroed` and
    // `impossible_sizes_are_errors_not_aborts`.
    #[allow(unsafe_code)]
    let ptr = unsafe {
        if huge {
            std::alloc::alloc(layout)
        } else {
            std::alloc::alloc_zeroed(layout)
        }
    };
    if ptr.is_null() {
        return Err(AllocError::OutOfMemory {
            bytes: layout.size(),
        });
    }
    if huge {
        // Huge pages first, so that zeroing faults them in 2 MiB at a time.
        advise_huge_pages(ptr, layout.size());
        // SAFETY: This is safe because:
        // 1. `ptr` is non-null, valid for writes of `layout.size()` bytes (it was
        //    just allocated with that layout) and nothing else refers to it.
        // Tested by `large_buffers_are_aligned_and_hold_their_bytes`.
        #[allow(unsafe_code)]
        unsafe {
            std::ptr::write_bytes(ptr, 0, layout.size());
        }
    }
    let slice = std::ptr::slice_from_raw_parts_mut(ptr.cast::<Chunk>(), n);
    // SAFETY: This is safe because:
    // 1. `ptr` is non-null and came from the global allocator with
    //    `Layout::array::<Chunk>(n)`, exactly the layout a `Box<[Chunk]>` of `n`
    //    elements frees itself with, and nothing else owns it.
    // 2. `ptr` is aligned for `Chunk`: the layout has `Chunk`'s alignment.
    // 3. All `n` chunks are initialised: every byte was zeroed (by `alloc_zeroed`
    //    or by `write_bytes`) and `Chunk` is `Zeroable` (a plain byte array), so
    //    zero is a valid value.
    #[allow(unsafe_code)]
    let chunks = unsafe { Box::from_raw(slice) };
    Ok(chunks)
}

/// A copy of `chunks`, written once (not zeroed first), or the allocator's
/// refusal.
fn copied_chunks(chunks: &[Chunk]) -> Result<Box<[Chunk]>, AllocError> {
    let mut v: Vec<Chunk> = Vec::new();
    v.try_reserve_exact(chunks.len())
        .map_err(|_| AllocError::OutOfMemory {
            bytes: std::mem::size_of_val(chunks),
        })?;
    advise_huge_pages(v.as_ptr().cast(), std::mem::size_of_val(chunks));
    v.extend_from_slice(chunks);
    Ok(v.into_boxed_slice())
}

/// The chunks that hold `len` bytes.
fn chunks_for(len: usize) -> usize {
    len.div_ceil(BUFFER_ALIGNMENT)
}

/// One allocation: its chunks and the memory counters it is charged to
/// (released when the last buffer handle drops it).
struct Block {
    chunks: Box<[Chunk]>,
    _charged: Option<Charged>,
}

impl Block {
    /// `chunks` holding `len` bytes, charged to the thread's open scope.
    #[inline]
    fn new(chunks: Box<[Chunk]>, len: usize) -> Arc<Block> {
        Arc::new(Block {
            chunks,
            _charged: Charged::current(len),
        })
    }
}

/// A shared, zero-initialised, 64-byte-aligned byte buffer; see the module docs.
#[derive(Clone)]
pub struct AlignedBuffer {
    block: Arc<Block>,
    len: usize,
}

impl AlignedBuffer {
    /// A buffer of `len` zero bytes, or why it cannot be had.
    pub fn try_zeroed(len: usize) -> Result<AlignedBuffer, AllocError> {
        let chunks = zeroed_chunks(chunks_for(len))?;
        Ok(AlignedBuffer {
            block: Block::new(chunks, len),
            len,
        })
    }

    /// A buffer holding a copy of `bytes`, or why it cannot be had.
    pub fn try_from_bytes(bytes: &[u8]) -> Result<AlignedBuffer, AllocError> {
        let mut chunks = zeroed_chunks(chunks_for(bytes.len()))?;
        bytemuck::cast_slice_mut::<Chunk, u8>(&mut chunks)[..bytes.len()].copy_from_slice(bytes);
        Ok(AlignedBuffer {
            block: Block::new(chunks, bytes.len()),
            len: bytes.len(),
        })
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<Chunk, u8>(&self.block.chunks)[..self.len]
    }

    /// The bytes, mutably: in place when unshared, else after copying them into a
    /// fresh buffer (which may fail).
    #[inline]
    pub fn make_mut(&mut self) -> Result<&mut [u8], AllocError> {
        if Arc::get_mut(&mut self.block).is_none() {
            self.block = Block::new(copied_chunks(&self.block.chunks)?, self.len);
        }
        match Arc::get_mut(&mut self.block) {
            Some(b) => Ok(&mut bytemuck::cast_slice_mut::<Chunk, u8>(&mut b.chunks)[..self.len]),
            // A fresh copy is unshared.
            None => Ok(&mut []),
        }
    }

    /// True when no other handle shares the bytes.
    pub fn is_unique(&mut self) -> bool {
        Arc::get_mut(&mut self.block).is_some()
    }

    /// True when both view the same allocation.
    pub fn ptr_eq(&self, other: &AlignedBuffer) -> bool {
        Arc::ptr_eq(&self.block, &other.block)
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes as a `Bytes`, without copying; the buffer lives as long as it.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from_owner(self.clone())
    }
}

/// An [`AlignedBuffer`] of a known length filled piece by piece (from a network
/// stream's chunks) with exactly one copy of each byte and no zeroing first: the
/// chunks are reserved up front and pushed as the bytes arrive.
pub struct AlignedBufferBuilder {
    chunks: Vec<Chunk>,
    len: usize,
    /// The bytes of a partly filled chunk.
    tail: Chunk,
    tail_len: usize,
    filled: usize,
}

impl AlignedBufferBuilder {
    /// A builder of a `len`-byte buffer, or why it cannot be had.
    pub fn try_with_len(len: usize) -> Result<AlignedBufferBuilder, AllocError> {
        let n = chunks_for(len);
        let mut chunks: Vec<Chunk> = Vec::new();
        if n.checked_mul(BUFFER_ALIGNMENT)
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(AllocError::CapacityOverflow);
        }
        chunks
            .try_reserve_exact(n)
            .map_err(|_| AllocError::OutOfMemory {
                bytes: n * BUFFER_ALIGNMENT,
            })?;
        advise_huge_pages(chunks.as_ptr().cast(), n * BUFFER_ALIGNMENT);
        Ok(AlignedBufferBuilder {
            chunks,
            len,
            tail: Chunk([0; BUFFER_ALIGNMENT]),
            tail_len: 0,
            filled: 0,
        })
    }

    /// The bytes still to come.
    pub fn remaining(&self) -> usize {
        self.len - self.filled
    }

    /// Appends the first `min(bytes.len(), remaining())` bytes of `bytes` and
    /// returns how many it took.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> usize {
        let take = bytes.len().min(self.remaining());
        let mut rest = &bytes[..take];
        if self.tail_len > 0 {
            let n = rest.len().min(BUFFER_ALIGNMENT - self.tail_len);
            self.tail.0[self.tail_len..self.tail_len + n].copy_from_slice(&rest[..n]);
            self.tail_len += n;
            rest = &rest[n..];
            if self.tail_len == BUFFER_ALIGNMENT {
                self.chunks.push(self.tail);
                self.tail_len = 0;
            }
        }
        if rest.is_empty() {
            self.filled += take;
            return take;
        }
        // The tail is empty here: it was full or had nothing.
        let whole = rest.chunks_exact(BUFFER_ALIGNMENT);
        let left = whole.remainder();
        self.chunks
            .extend(whole.map(bytemuck::pod_read_unaligned::<Chunk>));
        self.tail.0[..left.len()].copy_from_slice(left);
        self.tail_len = left.len();
        self.filled += take;
        take
    }

    /// The buffer, once every byte has arrived (`None` before).
    pub fn finish(mut self) -> Option<AlignedBuffer> {
        if self.filled != self.len {
            return None;
        }
        if self.tail_len > 0 {
            self.tail.0[self.tail_len..].fill(0);
            self.chunks.push(self.tail);
        }
        Some(AlignedBuffer {
            block: Block::new(self.chunks.into_boxed_slice(), self.len),
            len: self.len,
        })
    }
}

impl AsRef<[u8]> for AlignedBuffer {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_aligned_and_hold_their_bytes() {
        // Over the huge-page threshold, odd sizes included.
        for len in [HUGE_PAGE_MIN, HUGE_PAGE_MIN + 65, 9 << 20] {
            let b = AlignedBuffer::try_zeroed(len).unwrap();
            assert_eq!(b.len(), len);
            assert!(b.as_bytes().iter().all(|&x| x == 0));
            assert_eq!(b.as_bytes().as_ptr() as usize % BUFFER_ALIGNMENT, 0);
            let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let c = AlignedBuffer::try_from_bytes(&data).unwrap();
            assert_eq!(c.as_bytes(), &data[..]);
            let mut builder = AlignedBufferBuilder::try_with_len(len).unwrap();
            for piece in data.chunks(100_003) {
                builder.extend_from_slice(piece);
            }
            assert_eq!(builder.finish().unwrap().as_bytes(), &data[..]);
        }
    }

    #[test]
    fn built_buffers_hold_their_pieces_in_order() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        // Pieces that straddle chunk boundaries in every way.
        for cut in [1usize, 3, 63, 64, 65, 200, 999, 1000] {
            let mut b = AlignedBufferBuilder::try_with_len(data.len()).unwrap();
            for piece in data.chunks(cut) {
                assert_eq!(b.extend_from_slice(piece), piece.len());
            }
            assert_eq!(b.remaining(), 0);
            let buf = b.finish().unwrap();
            assert_eq!(buf.as_bytes(), &data[..]);
            assert_eq!(buf.as_bytes().as_ptr() as usize % BUFFER_ALIGNMENT, 0);
        }
        // Extra bytes are not taken; an unfinished buffer is not handed out.
        let mut b = AlignedBufferBuilder::try_with_len(10).unwrap();
        assert_eq!(b.extend_from_slice(&[1; 4]), 4);
        assert_eq!(b.extend_from_slice(&[2; 20]), 6);
        assert_eq!(
            b.finish().unwrap().as_bytes(),
            &[1, 1, 1, 1, 2, 2, 2, 2, 2, 2]
        );
        let mut b = AlignedBufferBuilder::try_with_len(10).unwrap();
        b.extend_from_slice(&[1; 9]);
        assert!(b.finish().is_none());
        assert!(AlignedBufferBuilder::try_with_len(0)
            .unwrap()
            .finish()
            .unwrap()
            .is_empty());
        assert!(AlignedBufferBuilder::try_with_len(usize::MAX).is_err());
    }

    #[test]
    fn zeroed_buffers_are_aligned_and_zeroed() {
        for len in [0usize, 1, 63, 64, 65, 1000, 1 << 20] {
            let b = AlignedBuffer::try_zeroed(len).unwrap();
            assert_eq!(b.len(), len);
            assert!(b.as_bytes().iter().all(|&x| x == 0));
            assert_eq!(b.as_bytes().as_ptr() as usize % BUFFER_ALIGNMENT, 0);
        }
        let b = AlignedBuffer::try_from_bytes(&[7; 100]).unwrap();
        assert_eq!(b.as_bytes(), &[7; 100]);
        assert_eq!(b.as_bytes().as_ptr() as usize % BUFFER_ALIGNMENT, 0);
    }

    #[test]
    fn shared_bytes_do_not_copy_and_writes_copy_on_share() {
        let mut buf = AlignedBuffer::try_from_bytes(&[1, 2, 3]).unwrap();
        let bytes = buf.to_bytes();
        assert_eq!(&bytes[..], &[1, 2, 3]);
        assert_eq!(bytes.as_ptr(), buf.as_bytes().as_ptr());
        assert!(!buf.is_unique());
        buf.make_mut().unwrap()[0] = 9;
        assert_eq!(&bytes[..], &[1, 2, 3], "the shared view is unchanged");
        assert_eq!(buf.as_bytes(), &[9, 2, 3]);
        assert!(buf.is_unique());
        // A large shared buffer (huge pages advised): the copy is aligned and
        // holds every byte.
        let big: Vec<u8> = (0..(5 << 20) + 3).map(|i| (i % 251) as u8).collect();
        let mut buf = AlignedBuffer::try_from_bytes(&big).unwrap();
        let shared = buf.clone();
        buf.make_mut().unwrap()[1] = 0;
        assert_eq!(buf.as_bytes().as_ptr() as usize % BUFFER_ALIGNMENT, 0);
        assert_eq!(&buf.as_bytes()[2..], &big[2..]);
        assert_eq!(buf.as_bytes()[..2], [0, 0]);
        assert_eq!(shared.as_bytes(), &big[..]);
    }

    /// Sizes no machine has used to abort the process in `Arc::new_zeroed_slice`.
    #[test]
    fn impossible_sizes_are_errors_not_aborts() {
        assert_eq!(
            AlignedBuffer::try_zeroed(usize::MAX).err(),
            Some(AllocError::CapacityOverflow)
        );
        assert_eq!(
            AlignedBuffer::try_zeroed(isize::MAX as usize).err(),
            Some(AllocError::CapacityOverflow)
        );
        // Half the address space passes the layout check and is refused by the
        // allocator (no machine has 2^62 bytes to map).
        assert!(matches!(
            AlignedBuffer::try_zeroed(1 << 62),
            Err(AllocError::OutOfMemory { .. })
        ));
    }
}
