//! `BatchProcessor`: runs one batch, thread-free. It merges the tasks' inputs
//! (concatenated along dimension 0 in task order; padded to the largest inner
//! dimensions with `pad_variable_length_inputs`, and up to an allowed batch
//! size by repeating the last task's first row), calls the runner once, and
//! splits every output by the tasks' rows, dropping the padding.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use graph::tensor::buffer::AlignedBuffer;
use graph::tensor::oom_status;
use graph::{DType, ResourceHandle, Result, Status, Tensor, TensorShape};

use crate::metrics::BatchMetrics;

use super::task::Task;
use super::{BatchRunner, Outputs};

/// Runs batches: merges their inputs, calls the runner, splits its outputs.
pub(super) struct BatchProcessor {
    pub(super) runner: Arc<dyn BatchRunner>,
    pub(super) allowed_batch_sizes: Vec<usize>,
    pub(super) pad_variable_length_inputs: bool,
    pub(super) metrics: Option<BatchMetrics>,
    /// Runner calls so far.
    pub(super) runs: AtomicU64,
}

impl BatchProcessor {
    /// Runs one batch and answers each of its tasks.
    pub(super) fn process(&self, mut tasks: Vec<Task>) {
        tasks.retain(|t| !t.is_cancelled());
        let inner = loop {
            if tasks.is_empty() {
                return;
            }
            let inner = match self.inner_dims(&tasks) {
                Ok(d) => d,
                Err(e) => return fail_all(tasks, &e),
            };
            let (ok, refused): (Vec<Task>, Vec<Task>) =
                tasks.into_iter().partition(|t| can_pad(t, &inner));
            tasks = ok;
            if refused.is_empty() {
                break inner;
            }
            // Without them the largest sizes may shrink: compute them again.
            fail_all(
                refused,
                &Status::invalid_argument("Got empty tensor in batch of non-empty tensors."),
            );
        };
        let rows: usize = tasks.iter().map(|t| t.rows).sum();
        let padded = if rows == 0 {
            0
        } else {
            round_to_allowed(&self.allowed_batch_sizes, rows)
        };
        let inputs = match merge_inputs(&tasks, &inner, padded) {
            Ok(inputs) => inputs,
            Err(e) => return fail_all(tasks, &e),
        };
        if let Some(m) = &self.metrics {
            m.batch(padded, padded - rows);
        }
        self.runs.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(tasks = tasks.len(), rows, padded, "running a batch");
        let result =
            catch_unwind(AssertUnwindSafe(|| self.runner.run(inputs))).unwrap_or_else(|p| {
                Err(Status::internal(format!(
                    "the batch runner panicked: {}",
                    panic_message(p.as_ref())
                )))
            });
        match result.and_then(|outputs| split_outputs(outputs, &tasks, padded)) {
            Ok(shares) => {
                for (t, share) in tasks.into_iter().zip(shares) {
                    t.answer(Ok(share));
                }
            }
            Err(e) => fail_all(tasks, &e),
        }
    }

    /// Per input, the dimensions past the 0th of the merged tensor: the tasks'
    /// own (all equal) or, with variable-length padding, the largest of each.
    fn inner_dims(&self, tasks: &[Task]) -> Result<Vec<Vec<usize>>> {
        let first = &tasks[0];
        let mut inner: Vec<Vec<usize>> = first
            .inputs
            .iter()
            .map(|t| t.dims()[1..].to_vec())
            .collect();
        for t in &tasks[1..] {
            if t.keys != first.keys {
                return Err(Status::internal(
                    "One or more tasks does not conform to batch signature",
                ));
            }
            for (max, x) in inner.iter_mut().zip(&t.inputs) {
                let dims = &x.dims()[1..];
                if dims.len() != max.len() {
                    return Err(Status::internal("tasks of different ranks share a batch"));
                }
                if self.pad_variable_length_inputs {
                    for (m, &d) in max.iter_mut().zip(dims) {
                        *m = (*m).max(d);
                    }
                } else if dims != max.as_slice() {
                    return Err(Status::internal("tasks of different shapes share a batch"));
                }
            }
        }
        Ok(inner)
    }
}

/// Answers every task with `e`.
fn fail_all(tasks: Vec<Task>, e: &Status) {
    for t in tasks {
        t.answer(Err(e.clone()));
    }
}

/// False when one of `task`'s inputs must be padded to `inner` but has no
/// element to pad with.
fn can_pad(task: &Task, inner: &[Vec<usize>]) -> bool {
    task.inputs.iter().zip(inner).all(|(t, want)| {
        t.dims()[1..] == want[..] || task.rows == 0 || want.contains(&0) || t.num_elements() > 0
    })
}

/// The smallest allowed size ≥ `rows`; `rows` itself when none is (or none is
/// given), as TensorFlow's `RoundToLowestAllowedBatchSize`.
fn round_to_allowed(allowed: &[usize], rows: usize) -> usize {
    allowed.iter().copied().find(|&a| a >= rows).unwrap_or(rows)
}

/// The text of a panic's payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

/// The runner's inputs: per key, the tasks' tensors padded to `inner` and
/// concatenated along dimension 0, then padded to `padded` rows.
fn merge_inputs(
    tasks: &[Task],
    inner: &[Vec<usize>],
    padded: usize,
) -> Result<Vec<(String, Tensor)>> {
    let first = &tasks[0];
    let mut merged = Vec::with_capacity(first.keys.len());
    for (i, (key, want)) in first.keys.iter().zip(inner).enumerate() {
        let parts: Vec<&Tensor> = tasks.iter().map(|t| &t.inputs[i]).collect();
        let t = match parts.as_slice() {
            // One task, nothing to pad: its own tensor, no copy.
            [only] if only.dims()[0] == padded && only.dims()[1..] == want[..] => (*only).clone(),
            _ => concat_rows(&parts, want, padded)?,
        };
        merged.push((key.clone(), t));
    }
    Ok(merged)
}

/// `parts` (same dtype and rank) concatenated along dimension 0 into a tensor
/// of shape `[padded, inner...]` (see [`write_rows`]).
fn concat_rows(parts: &[&Tensor], inner: &[usize], padded: usize) -> Result<Tensor> {
    let dtype = parts
        .first()
        .map(|t| t.dtype())
        .ok_or_else(|| Status::internal("an empty batch was merged"))?;
    let mut dims = Vec::with_capacity(inner.len() + 1);
    dims.push(padded);
    dims.extend_from_slice(inner);
    let shape = TensorShape::new(&dims);
    let too_large = || oom_status(dtype, &shape, "the size overflows the address space");
    let total = shape.checked_num_elements().map_err(|_| too_large())?;
    let part_dims: Vec<&[usize]> = parts.iter().map(|t| t.dims()).collect();
    match dtype {
        DType::String => {
            let srcs: Vec<&[Bytes]> = parts
                .iter()
                .map(|t| t.as_strings())
                .collect::<Result<_>>()?;
            let mut out = try_vec(total, Bytes::new(), dtype, &shape)?;
            write_rows(&mut out, &srcs, &part_dims, inner, 1)?;
            Tensor::from_strings(&dims, out)
        }
        DType::Resource => {
            let srcs: Vec<&[ResourceHandle]> = parts
                .iter()
                .map(|t| t.as_resource_handles())
                .collect::<Result<_>>()?;
            let mut out = try_vec(total, ResourceHandle::default(), dtype, &shape)?;
            write_rows(&mut out, &srcs, &part_dims, inner, 1)?;
            Tensor::from_resource_handles(&dims, out)
        }
        _ => {
            let unit = dtype.size();
            let bytes = total.checked_mul(unit).ok_or_else(too_large)?;
            let mut buf =
                AlignedBuffer::try_zeroed(bytes).map_err(|e| oom_status(dtype, &shape, e))?;
            let srcs: Vec<&[u8]> = parts.iter().map(|t| t.as_bytes()).collect::<Result<_>>()?;
            let dst = buf.make_mut().map_err(|e| oom_status(dtype, &shape, e))?;
            write_rows(dst, &srcs, &part_dims, inner, unit)?;
            Tensor::from_buffer(dtype, &dims, buf)
        }
    }
}

/// A vector of `n` copies of `value`, or `ResourceExhausted`.
fn try_vec<E: Clone>(n: usize, value: E, dtype: DType, shape: &TensorShape) -> Result<Vec<E>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|e| oom_status(dtype, shape, e))?;
    v.resize(n, value);
    Ok(v)
}

/// Writes the parts' rows one after the other into `dst` (`[padded, inner...]`,
/// `unit` words per element: the element size for POD bytes, else 1), each part
/// padded to `inner` with its first element, then fills the rows past them with
/// the first row of the last part that has rows.
fn write_rows<E: Clone>(
    dst: &mut [E],
    srcs: &[&[E]],
    src_dims: &[&[usize]],
    inner: &[usize],
    unit: usize,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let row = inner
        .iter()
        .try_fold(unit, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Status::internal("batch row size overflows"))?;
    let mut off = 0;
    let mut pad_row = None;
    for (src, dims) in srcs.iter().zip(src_dims) {
        let rows = dims[0];
        let end = rows
            .checked_mul(row)
            .and_then(|n| n.checked_add(off))
            .filter(|&e| e <= dst.len())
            .ok_or_else(|| Status::internal("merged batch is smaller than its parts"))?;
        place(&mut dst[off..end], src, dims, inner, unit)?;
        if rows > 0 {
            pad_row = Some(off);
        }
        off = end;
    }
    if off < dst.len() {
        let start = pad_row.ok_or_else(|| Status::internal("no row to pad a batch with"))?;
        let (head, tail) = dst.split_at_mut(off);
        let src_row = &head[start..start + row];
        for r in tail.chunks_exact_mut(row) {
            r.clone_from_slice(src_row);
        }
    }
    Ok(())
}

/// Copies `src` (shape `src_dims`) into `dst` (shape `[src_dims[0], inner...]`),
/// filling what `src` does not cover with `src`'s first element.
fn place<E: Clone>(
    dst: &mut [E],
    src: &[E],
    src_dims: &[usize],
    inner: &[usize],
    unit: usize,
) -> Result<()> {
    if src_dims[1..] == *inner {
        if dst.len() != src.len() {
            return Err(Status::internal("a batch part does not match its size"));
        }
        dst.clone_from_slice(src);
        return Ok(());
    }
    if dst.is_empty() {
        return Ok(());
    }
    let pattern = src.get(..unit).ok_or_else(|| {
        Status::invalid_argument("Got empty tensor in batch of non-empty tensors.")
    })?;
    for e in dst.chunks_exact_mut(unit) {
        e.clone_from_slice(pattern);
    }
    // Dimensions in words: the innermost scaled by the element size.
    let mut s: Vec<usize> = src_dims.to_vec();
    let mut d: Vec<usize> = std::iter::once(src_dims[0])
        .chain(inner.iter().copied())
        .collect();
    if let (Some(a), Some(b)) = (s.last_mut(), d.last_mut()) {
        *a *= unit;
        *b *= unit;
    }
    let fits = s.len() == d.len()
        && s.iter().zip(&d).all(|(a, b)| a <= b)
        && s.iter().product::<usize>() == src.len()
        && d.iter().product::<usize>() == dst.len();
    if !fits {
        return Err(Status::internal(
            "a batch part does not fit its padded shape",
        ));
    }
    copy_box(dst, src, &s, &d);
    Ok(())
}

/// Copies the box `src` (dims `s`, row-major) into the corner of `dst` (dims `d`,
/// each ≥ `s`'s). [`place`] has checked the sizes.
fn copy_box<E: Clone>(dst: &mut [E], src: &[E], s: &[usize], d: &[usize]) {
    if s.len() == 1 {
        dst[..s[0]].clone_from_slice(&src[..s[0]]);
        return;
    }
    let (ss, ds): (usize, usize) = (s[1..].iter().product(), d[1..].iter().product());
    if ss == 0 {
        return;
    }
    for (i, chunk) in src.chunks_exact(ss).enumerate().take(s[0]) {
        copy_box(&mut dst[i * ds..(i + 1) * ds], chunk, &s[1..], &d[1..]);
    }
}

/// Each task's rows of every output, after checking every output has `padded`
/// rows (TensorFlow's `SplitOutputTensors` messages).
fn split_outputs(outputs: Outputs, tasks: &[Task], padded: usize) -> Result<Vec<Outputs>> {
    for t in outputs.values() {
        match t.dims().first() {
            None => return Err(Status::internal("Batched output tensor has 0 dimensions")),
            Some(&n) if n != padded => {
                return Err(Status::internal(
                    "Batched output tensor's 0th dimension does not equal the sum of the 0th \
                     dimension sizes of the input tensors",
                ))
            }
            Some(_) => {}
        }
    }
    if let [only] = tasks {
        if only.rows == padded {
            return Ok(vec![outputs]);
        }
    }
    let mut shares = Vec::with_capacity(tasks.len());
    let mut start = 0;
    for task in tasks {
        let mut share = Outputs::new();
        for (k, t) in &outputs {
            share.insert(k.clone(), slice_rows(t, start, task.rows)?);
        }
        shares.push(share);
        start += task.rows;
    }
    Ok(shares)
}

/// Rows `start..start + len` of `t` (rank ≥ 1, at least that many rows).
fn slice_rows(t: &Tensor, start: usize, len: usize) -> Result<Tensor> {
    let mut dims = t.dims().to_vec();
    dims[0] = len;
    let row = t.dims()[1..]
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Status::internal("output row size overflows"))?;
    let (a, b) = (start * row, (start + len) * row);
    match t.dtype() {
        DType::String => Tensor::from_strings(&dims, t.as_strings()?[a..b].to_vec()),
        DType::Resource => {
            Tensor::from_resource_handles(&dims, t.as_resource_handles()?[a..b].to_vec())
        }
        dtype => {
            let unit = dtype.size();
            Tensor::from_raw_bytes(dtype, &dims, &t.as_bytes()?[a * unit..b * unit])
        }
    }
}
