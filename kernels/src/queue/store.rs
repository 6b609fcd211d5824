//! Element stores of the queue kinds. A store holds elements (tuples of component
//! tensors) and gives them back one at a time or as a batch:
//!
//! - [`FifoStore`]: enqueued batches kept whole as chunks (rows referenced, never
//!   copied on enqueue); a dequeue of exactly one whole chunk returns it as is, any
//!   other batch copies contiguous row ranges.
//! - [`ShuffleStore`]: elements picked uniformly at random by a seeded generator,
//!   keeping `min_after_dequeue` until the queue closes.
//! - [`PaddingStore`]: FIFO; a batch pads every element to the largest shape in it.
//! - [`PriorityStore`]: smallest int64 priority (component 0) first, FIFO on ties.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use graph::{Result, Status, Tensor, TensorShape};

use crate::allocator::{default_max_allocation_bytes, Allocator};

use super::rows::{as_batch_of_one, num_rows, pad_to, row, stack_elements, stack_rows};

/// A tuple of component tensors.
pub type Tuple = Vec<Tensor>;

/// How a queue keeps its elements.
pub trait ElementStore: Send {
    /// Elements held.
    fn len(&self) -> usize;
    /// Whether no element is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Elements a dequeue may take now (`closed` lifts a shuffle queue's floor).
    fn available(&self, closed: bool) -> usize {
        let _ = closed;
        self.len()
    }
    /// Adds rows `[offset, offset + count)` of every component of `batch`.
    fn push(&mut self, batch: &[Tensor], offset: usize, count: usize) -> Result<()>;
    /// Removes one element.
    fn take_one(&mut self) -> Result<Tuple>;
    /// Removes `n` elements as one batch per component.
    fn take_batch(&mut self, n: usize) -> Result<Tuple>;
}

struct Chunk {
    tensors: Tuple,
    offset: usize,
    count: usize,
}

/// FIFO order with chunked storage; see the module docs.
#[derive(Default)]
pub struct FifoStore {
    chunks: VecDeque<Chunk>,
    len: usize,
}

impl ElementStore for FifoStore {
    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, batch: &[Tensor], offset: usize, count: usize) -> Result<()> {
        if count > 0 {
            self.chunks.push_back(Chunk {
                tensors: batch.to_vec(),
                offset,
                count,
            });
            self.len += count;
        }
        Ok(())
    }

    fn take_one(&mut self) -> Result<Tuple> {
        let c = self
            .chunks
            .front_mut()
            .ok_or_else(|| Status::internal("take from an empty queue"))?;
        let t: Tuple = c
            .tensors
            .iter()
            .map(|t| row(t, c.offset))
            .collect::<Result<_>>()?;
        c.offset += 1;
        c.count -= 1;
        if c.count == 0 {
            self.chunks.pop_front();
        }
        self.len -= 1;
        Ok(t)
    }

    fn take_batch(&mut self, n: usize) -> Result<Tuple> {
        let Some(first) = self.chunks.front() else {
            return Err(Status::internal("take from an empty queue"));
        };
        let components = first.tensors.len();
        // Plan the row ranges, then copy, then consume (nothing is lost on error).
        let mut plan = Vec::new();
        let mut need = n;
        for c in &self.chunks {
            if need == 0 {
                break;
            }
            let k = c.count.min(need);
            plan.push((c, c.offset, k));
            need -= k;
        }
        let mut out = Vec::with_capacity(components);
        for comp in 0..components {
            let parts: Vec<(&Tensor, usize, usize)> = plan
                .iter()
                .map(|(c, o, k)| (&c.tensors[comp], *o, *k))
                .collect();
            out.push(stack_rows(&parts)?);
        }
        let mut need = n;
        while need > 0 {
            let Some(c) = self.chunks.front_mut() else {
                break;
            };
            let k = c.count.min(need);
            c.offset += k;
            c.count -= k;
            need -= k;
            if c.count == 0 {
                self.chunks.pop_front();
            }
        }
        self.len -= n;
        Ok(out)
    }
}

fn split_rows(batch: &[Tensor], offset: usize, count: usize) -> Result<Vec<Tuple>> {
    (offset..offset + count)
        .map(|i| batch.iter().map(|t| row(t, i)).collect())
        .collect()
}

fn stack_tuples(elements: &[Tuple]) -> Result<Tuple> {
    let components = elements.first().map_or(0, Vec::len);
    (0..components)
        .map(|c| {
            let col: Vec<Tensor> = elements.iter().map(|e| e[c].clone()).collect();
            stack_elements(&col)
        })
        .collect()
}

/// Random order; see the module docs.
pub struct ShuffleStore {
    elements: Vec<Tuple>,
    min_after_dequeue: usize,
    rng: u64,
}

impl ShuffleStore {
    /// A store keeping `min_after_dequeue` until closed, seeded by `seed` (0: from
    /// the clock, as TensorFlow does when both seeds are 0).
    pub fn new(min_after_dequeue: usize, seed: u64) -> ShuffleStore {
        let seed = if seed == 0 {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        } else {
            seed
        };
        ShuffleStore {
            elements: Vec::new(),
            min_after_dequeue,
            rng: seed,
        }
    }

    /// SplitMix64.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl ElementStore for ShuffleStore {
    fn len(&self) -> usize {
        self.elements.len()
    }

    fn available(&self, closed: bool) -> usize {
        if closed {
            self.elements.len()
        } else {
            self.elements.len().saturating_sub(self.min_after_dequeue)
        }
    }

    fn push(&mut self, batch: &[Tensor], offset: usize, count: usize) -> Result<()> {
        self.elements.extend(split_rows(batch, offset, count)?);
        Ok(())
    }

    fn take_one(&mut self) -> Result<Tuple> {
        if self.elements.is_empty() {
            return Err(Status::internal("take from an empty queue"));
        }
        let i = (self.next() % self.elements.len() as u64) as usize;
        Ok(self.elements.swap_remove(i))
    }

    fn take_batch(&mut self, n: usize) -> Result<Tuple> {
        let picked: Vec<Tuple> = (0..n).map(|_| self.take_one()).collect::<Result<_>>()?;
        match stack_tuples(&picked) {
            Ok(b) => Ok(b),
            Err(e) => {
                self.elements.extend(picked);
                Err(e)
            }
        }
    }
}

/// FIFO order with padding on batching; see the module docs.
#[derive(Default)]
pub struct PaddingStore {
    elements: VecDeque<Tuple>,
}

impl ElementStore for PaddingStore {
    fn len(&self) -> usize {
        self.elements.len()
    }

    fn push(&mut self, batch: &[Tensor], offset: usize, count: usize) -> Result<()> {
        self.elements.extend(split_rows(batch, offset, count)?);
        Ok(())
    }

    fn take_one(&mut self) -> Result<Tuple> {
        self.elements
            .pop_front()
            .ok_or_else(|| Status::internal("take from an empty queue"))
    }

    fn take_batch(&mut self, n: usize) -> Result<Tuple> {
        let picked: Vec<Tuple> = self.elements.iter().take(n).cloned().collect();
        let components = picked.first().map_or(0, Vec::len);
        let mut out = Vec::with_capacity(components);
        for c in 0..components {
            let rank = picked[0][c].rank();
            if picked.iter().any(|e| e[c].rank() != rank) {
                return Err(Status::invalid_argument(format!(
                    "component {c} has elements of different ranks; cannot pad them into one batch"
                )));
            }
            let mut max = vec![0usize; rank];
            for e in &picked {
                for (m, d) in max.iter_mut().zip(e[c].dims()) {
                    *m = (*m).max(*d);
                }
            }
            let target = TensorShape::new(&max);
            // The batch may be far larger than the elements (shapes [n, 1] and
            // [1, n] pad to [n, n]): check it before padding anything.
            let mut batch = TensorShape::vector(picked.len());
            max.iter().for_each(|&d| batch.push(d));
            let alloc = Allocator::new("the queue's host", default_max_allocation_bytes());
            alloc.check(picked[0][c].dtype(), &batch)?;
            let padded: Vec<Tensor> = picked
                .iter()
                .map(|e| pad_to(alloc, &e[c], &target))
                .collect::<Result<_>>()?;
            out.push(stack_elements(&padded)?);
        }
        self.elements.drain(..n.min(self.elements.len()));
        Ok(out)
    }
}

/// Smallest priority first; see the module docs.
#[derive(Default)]
pub struct PriorityStore {
    heap: BinaryHeap<Reverse<(i64, u64, Slot)>>,
    seq: u64,
}

/// A tuple ordered by nothing (the heap orders by priority and sequence).
struct Slot(Tuple);

impl PartialEq for Slot {
    fn eq(&self, _: &Slot) -> bool {
        true
    }
}
impl Eq for Slot {}
impl PartialOrd for Slot {
    fn partial_cmp(&self, o: &Slot) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Slot {
    fn cmp(&self, _: &Slot) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl ElementStore for PriorityStore {
    fn len(&self) -> usize {
        self.heap.len()
    }

    fn push(&mut self, batch: &[Tensor], offset: usize, count: usize) -> Result<()> {
        for e in split_rows(batch, offset, count)? {
            let p = e
                .first()
                .ok_or_else(|| {
                    Status::invalid_argument("a priority queue element needs a priority")
                })?
                .scalar_value::<i64>()
                .map_err(|_| {
                    Status::invalid_argument("the priority (component 0) must be an int64 scalar")
                })?;
            self.heap.push(Reverse((p, self.seq, Slot(e))));
            self.seq += 1;
        }
        Ok(())
    }

    fn take_one(&mut self) -> Result<Tuple> {
        self.heap
            .pop()
            .map(|Reverse((_, _, Slot(t)))| t)
            .ok_or_else(|| Status::internal("take from an empty queue"))
    }

    fn take_batch(&mut self, n: usize) -> Result<Tuple> {
        let picked: Vec<Tuple> = (0..n).map(|_| self.take_one()).collect::<Result<_>>()?;
        stack_tuples(&picked)
    }
}

/// The batch form of one element (for enqueueing a single element as rows).
pub fn element_as_batch(t: &[Tensor]) -> Result<Vec<Tensor>> {
    t.iter().map(as_batch_of_one).collect()
}

/// Rows in a batch (the leading dimension all components share).
pub fn batch_rows(batch: &[Tensor]) -> usize {
    batch.first().map_or(0, num_rows)
}
