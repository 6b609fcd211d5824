//! A vector of examples (TensorFlow's `FastParseExample`): dense outputs
//! `[batch, …]`, sparse outputs of rank 2, ragged row splits `[batch + 1]`.
//!
//! The examples are cut into TensorFlow's minibatches (about 50,000 serialized
//! bytes each, between min(8, batch) and 64 of them), parsed in parallel when the
//! batch is large, each into its own slice of the fixed-length dense outputs and
//! its own buffers of variable-length, sparse and ragged values, which are then
//! merged in order. The first failing example (by index) is the error; the same
//! minibatches as TensorFlow's make even the counts in its messages the same.
//!
//! Cost: one pass over the serialized bytes, plus one copy of the buffered values
//! when merging; fixed-length dense values are written in place.

use std::collections::HashMap;

use bytes::Bytes;
use graph::ops::parsing::example::tf_type_name;
use graph::{DType, Result, Status, Tensor};
use rayon::prelude::*;

use super::wire::{self, FeatureEntry, Kind};
use super::{
    concat_lists, kind_dtype, text, unparsable, values_name, Alloc, Config, DenseConfig, List,
    Parsed, SlotsMut, Target,
};

/// TensorFlow's target size of a minibatch, in serialized bytes.
const MINIBATCH_BYTES: usize = 50_000;

/// Batches of at least this many serialized bytes are parsed in parallel.
const PARALLEL_BYTES: usize = 2 * MINIBATCH_BYTES;

/// TensorFlow's minibatches: the first example of each, then the batch size.
fn minibatch_starts(serialized: &[Bytes]) -> Vec<usize> {
    let n = serialized.len();
    let (mut count, mut bytes) = (0usize, 0usize);
    for s in serialized {
        if bytes == 0 {
            count += 1;
        }
        bytes = bytes.saturating_add(s.len() + 1);
        if bytes > MINIBATCH_BYTES {
            bytes = 0;
        }
    }
    let m = n.min(8).max(count.min(64));
    (0..=m).map(|i| n * i / m.max(1)).collect()
}

/// Values of one variable-length, sparse or ragged feature in one minibatch:
/// example `i`'s are `list[ends[i - 1]..ends[i]]`.
struct Buffer {
    list: List,
    ends: Vec<usize>,
}

impl Buffer {
    fn new(dtype: DType) -> Buffer {
        Buffer {
            list: List::new(dtype),
            ends: vec![],
        }
    }

    /// Ends the current example's values.
    fn end_example(&mut self) {
        self.ends.push(self.list.len());
    }

    /// The number of values of each example.
    fn counts(&self) -> impl Iterator<Item = usize> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.ends.iter().zip(starts).map(|(e, s)| e - s)
    }
}

/// One minibatch being parsed: `slots[d]` are fixed dense feature `d`'s values for
/// these examples (`None` for a variable-length one, buffered in `varlen[d]`).
struct Minibatch<'o> {
    start: usize,
    end: usize,
    slots: Vec<Option<SlotsMut<'o>>>,
    varlen: Vec<Buffer>,
    sparse: Vec<Buffer>,
    ragged: Vec<Buffer>,
}

/// What a minibatch leaves to merge.
struct Buffers {
    varlen: Vec<Buffer>,
    sparse: Vec<Buffer>,
    ragged: Vec<Buffer>,
}

/// Which features one example has set.
struct Found {
    dense: Vec<bool>,
    sparse: Vec<bool>,
    ragged: Vec<bool>,
}

/// What every example of a batch shares.
struct Batch<'b> {
    cfg: &'b Config,
    index: HashMap<&'b [u8], Target>,
    serialized: &'b [Bytes],
    names: &'b [Bytes],
}

impl Batch<'_> {
    fn name(&self, e: usize) -> std::borrow::Cow<'_, str> {
        match self.names.get(e) {
            Some(n) if !self.names.is_empty() => text(n),
            _ => "<unknown>".into(),
        }
    }

    /// Parses the examples of `mb`, stopping at the first error.
    fn parse_minibatch(&self, mb: &mut Minibatch<'_>) -> Result<()> {
        let mut entries = Vec::new();
        let mut found = Found {
            dense: vec![false; self.cfg.dense.len()],
            sparse: vec![false; self.cfg.sparse.len()],
            ragged: vec![false; self.cfg.ragged.len()],
        };
        for e in mb.start..mb.end {
            self.parse_example(e, mb, &mut entries, &mut found)?;
        }
        Ok(())
    }

    /// TensorFlow's `FastParseSerializedExample`: example `e` into `mb`.
    fn parse_example<'s>(
        &'s self,
        e: usize,
        mb: &mut Minibatch<'_>,
        entries: &mut Vec<FeatureEntry<'s>>,
        found: &mut Found,
    ) -> Result<()> {
        let cfg = self.cfg;
        let base = self
            .serialized
            .get(e)
            .ok_or_else(|| Status::internal(format!("no example {e}")))?;
        entries.clear();
        if !wire::parse_example(base, entries) {
            return Err(unparsable(base));
        }
        found.dense.fill(false);
        found.sparse.fill(false);
        found.ragged.fill(false);
        let local = e - mb.start;
        for entry in entries.iter().rev() {
            let Some(&target) = self.index.get(entry.name) else {
                continue;
            };
            let example_error = |suffix: &str| {
                Status::invalid_argument(format!(
                    "Name: {}, Key: {}, Index: {e}.  {suffix}",
                    self.name(e),
                    text(entry.name)
                ))
            };
            let parse_error = || example_error("Can't parse serialized Example.");
            let (kind, list) = wire::feature_kind(entry.feature)
                .ok_or_else(|| Status::invalid_argument("Unsupported datatype."))?;
            let example_dtype = kind_dtype(kind);
            match target {
                Target::Dense(d) => {
                    let Some(example_dtype) = example_dtype else {
                        continue;
                    };
                    if std::mem::replace(&mut found.dense[d], true) {
                        continue;
                    }
                    let dc = &cfg.dense[d];
                    if example_dtype != dc.dtype {
                        return Err(example_error(&format!(
                            "Data types don't match. Data type: {} but expected type: {}",
                            tf_type_name(example_dtype),
                            tf_type_name(dc.dtype)
                        )));
                    }
                    if let Some(slots) = &mut mb.slots[d] {
                        let at = local * dc.stride..(local + 1) * dc.stride;
                        match slots.parse(at, list, base) {
                            None => return Err(parse_error()),
                            Some((count, false)) => {
                                return Err(example_error(&format!(
                                    "Number of {} values != expected.  Values size: {count} but output shape: {}",
                                    values_name(dc.dtype),
                                    dc.shape
                                )))
                            }
                            Some((_, true)) => {}
                        }
                    } else {
                        let buf = &mut mb.varlen[d];
                        if !buf.list.parse(list, base) {
                            return Err(parse_error());
                        }
                        let total = buf.list.len();
                        // (A stride of 0 takes no values; TensorFlow divides by it.)
                        if !total.is_multiple_of(dc.stride) {
                            return Err(example_error(&format!(
                                "Number of {} values is not a multiple of stride length. Saw {total} values but output shape is: {}",
                                values_name(dc.dtype),
                                dc.shape
                            )));
                        }
                        buf.end_example();
                    }
                }
                Target::Sparse(d) | Target::Ragged(d) => {
                    let (seen, buf, dtype) = match target {
                        Target::Sparse(_) => {
                            (&mut found.sparse[d], &mut mb.sparse[d], cfg.sparse[d].dtype)
                        }
                        _ => (&mut found.ragged[d], &mut mb.ragged[d], cfg.ragged[d].dtype),
                    };
                    if std::mem::replace(seen, true) {
                        continue;
                    }
                    if let Some(t) = example_dtype.filter(|&t| t != dtype) {
                        return Err(example_error(&format!(
                            "Data types don't match. Expected type: {}, Actual type: {}",
                            tf_type_name(dtype),
                            tf_type_name(t)
                        )));
                    }
                    if kind != Kind::None && !buf.list.parse(list, base) {
                        return Err(parse_error());
                    }
                    buf.end_example();
                }
            }
        }
        for (d, dc) in cfg.dense.iter().enumerate() {
            if found.dense[d] {
                continue;
            }
            match &mut mb.slots[d] {
                Some(slots) => {
                    if dc.default.num_elements() == 0 {
                        return Err(Status::invalid_argument(format!(
                            "Name: {}, Feature: {} (data type: {}) is required but could not be found.",
                            self.name(e),
                            text(&dc.key),
                            tf_type_name(dc.dtype)
                        )));
                    }
                    slots.fill(local * dc.stride..(local + 1) * dc.stride, &dc.default)?;
                }
                None => mb.varlen[d].end_example(),
            }
        }
        for (d, seen) in found.sparse.iter().enumerate() {
            if !seen {
                mb.sparse[d].end_example();
            }
        }
        for (d, seen) in found.ragged.iter().enumerate() {
            if !seen {
                mb.ragged[d].end_example();
            }
        }
        Ok(())
    }
}

/// Parses the batch `serialized` (`names`: empty, or one name per example).
pub(crate) fn parse_batch(
    cfg: &Config,
    serialized: &[Bytes],
    names: &[Bytes],
    alloc: Alloc<'_>,
) -> Result<Parsed> {
    let n = serialized.len();
    let batch = Batch {
        cfg,
        index: cfg.index(),
        serialized,
        names,
    };
    let mut fixed = cfg
        .dense
        .iter()
        .map(|dc| {
            if dc.variable_length {
                return Ok(None);
            }
            let dims: Vec<usize> = std::iter::once(n).chain(dc.fixed_dims()).collect();
            alloc(dc.dtype, &dims).map(Some)
        })
        .collect::<Result<Vec<Option<Tensor>>>>()?;
    let starts = minibatch_starts(serialized);
    let buffers = {
        let mut rest = fixed
            .iter_mut()
            .map(|t| t.as_mut().map(SlotsMut::of).transpose())
            .collect::<Result<Vec<_>>>()?;
        let mut mbs: Vec<Minibatch<'_>> = starts
            .windows(2)
            .map(|w| Minibatch {
                start: w[0],
                end: w[1],
                slots: rest
                    .iter_mut()
                    .zip(&cfg.dense)
                    .map(|(r, dc)| {
                        r.as_mut()
                            .map(|r| r.split_front((w[1] - w[0]).saturating_mul(dc.stride)))
                    })
                    .collect(),
                varlen: cfg.dense.iter().map(|dc| Buffer::new(dc.dtype)).collect(),
                sparse: cfg.sparse.iter().map(|c| Buffer::new(c.dtype)).collect(),
                ragged: cfg.ragged.iter().map(|c| Buffer::new(c.dtype)).collect(),
            })
            .collect();
        let total_bytes: usize = serialized.iter().map(Bytes::len).sum();
        let statuses: Vec<Result<()>> = if mbs.len() > 1 && total_bytes >= PARALLEL_BYTES {
            mbs.par_iter_mut()
                .map(|mb| batch.parse_minibatch(mb))
                .collect()
        } else {
            mbs.iter_mut().map(|mb| batch.parse_minibatch(mb)).collect()
        };
        statuses.into_iter().collect::<Result<()>>()?;
        mbs.into_iter()
            .map(|mb| Buffers {
                varlen: mb.varlen,
                sparse: mb.sparse,
                ragged: mb.ragged,
            })
            .collect::<Vec<_>>()
    };
    let mut out = Parsed::default();
    for (d, (dc, t)) in cfg.dense.iter().zip(fixed).enumerate() {
        out.dense_values.push(match t {
            Some(t) => t,
            None => merge_varlen(dc, d, n, &buffers, alloc)?,
        });
    }
    for (d, c) in cfg.sparse.iter().enumerate() {
        let bufs = || buffers.iter().map(|b| &b.sparse[d]);
        let total: usize = bufs().map(|b| b.list.len()).sum();
        let max = bufs().flat_map(Buffer::counts).max().unwrap_or(0);
        let mut indices = Vec::with_capacity(total.saturating_mul(2));
        for (e, count) in bufs().flat_map(Buffer::counts).enumerate() {
            for j in 0..count {
                indices.push(e as i64);
                indices.push(j as i64);
            }
        }
        out.sparse_indices.push(Tensor::new(&[total, 2], indices)?);
        out.sparse_values.push(concat_lists(
            alloc,
            c.dtype,
            &[total],
            bufs().map(|b| &b.list),
        )?);
        out.sparse_shapes
            .push(Tensor::vector(&[n as i64, max as i64]));
    }
    for (d, c) in cfg.ragged.iter().enumerate() {
        let bufs = || buffers.iter().map(|b| &b.ragged[d]);
        let total: usize = bufs().map(|b| b.list.len()).sum();
        let mut splits = Vec::with_capacity(n + 1);
        splits.push(0i64);
        let mut at = 0i64;
        for count in bufs().flat_map(Buffer::counts) {
            at += count as i64;
            splits.push(at);
        }
        out.ragged_splits.push(match c.splits_dtype {
            DType::I32 => Tensor::new(&[n + 1], splits.iter().map(|&s| s as i32).collect())?,
            _ => Tensor::new(&[n + 1], splits)?,
        });
        out.ragged_values.push(concat_lists(
            alloc,
            c.dtype,
            &[total],
            bufs().map(|b| &b.list),
        )?);
    }
    Ok(out)
}

/// Variable-length dense feature `d` of a batch of `n`: `[n, longest, inner…]`,
/// each example's rows followed by the padding (the default's one value).
fn merge_varlen(
    dc: &DenseConfig,
    d: usize,
    n: usize,
    buffers: &[Buffers],
    alloc: Alloc<'_>,
) -> Result<Tensor> {
    let bufs = || buffers.iter().map(|b| &b.varlen[d]);
    let longest = bufs().flat_map(Buffer::counts).max().unwrap_or(0);
    let rows = longest.checked_div(dc.stride).unwrap_or(0);
    let mut dims = vec![n, rows];
    dims.extend(dc.inner_dims());
    let mut t = alloc(dc.dtype, &dims)?;
    let total = t.num_elements();
    if total == 0 {
        return Ok(t);
    }
    let per_example = total / n.max(1);
    let mut slots = SlotsMut::of(&mut t)?;
    slots.pad(&dc.default)?;
    let mut at = 0usize;
    for b in bufs() {
        let mut from = 0usize;
        for &end in &b.ends {
            slots.put(at, &b.list, from..end)?;
            from = end;
            at += per_example;
        }
    }
    Ok(t)
}
