//! The checkpoint kernels: `SaveV2` (whole tensors, and slices of larger ones
//! as TensorFlow's `Saver` saves partitioned variables), `RestoreV2` (whole
//! tensors or any slice of one, however the checkpoint stores it; large
//! restores read their tensors in parallel), `MergeV2Checkpoints`,
//! `ShardedFilename` and `ShardedFilespec`.

use std::path::PathBuf;

use graph::ops::checkpoint::{ShapeAndSlice, TensorSlice};
use graph::{DType, Result, Status, Tensor};
use rayon::prelude::*;

use crate::cpu::checkpoint::bundle::{merge_bundles, BundleWriter, CheckpointReader};
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The checkpoint path of input 0 (a non-empty string scalar).
fn prefix(ctx: &OpKernelContext<'_>) -> Result<PathBuf> {
    let p = string_scalar(ctx, 0, "prefix")?;
    if p.is_empty() {
        return Err(Status::invalid_argument("the checkpoint prefix is empty"));
    }
    Ok(PathBuf::from(p))
}

/// Inputs 1 and 2 (`tensor_names`, `shape_and_slices`) as strings, checked to be
/// vectors of `n` elements.
fn names_and_specs(ctx: &OpKernelContext<'_>, n: usize) -> Result<(Vec<String>, Vec<String>)> {
    let mut out = Vec::with_capacity(2);
    for (i, what) in [(1, "tensor_names"), (2, "shape_and_slices")] {
        let t = ctx.input(i)?;
        if t.rank() != 1 || t.num_elements() != n {
            return Err(Status::invalid_argument(format!(
                "Expected {what} to be a vector of {n} elements, got shape {}",
                t.shape()
            )));
        }
        let v = t
            .as_strings()?
            .iter()
            .map(|b| {
                String::from_utf8(b.to_vec()).map_err(|_| {
                    Status::invalid_argument(format!("an entry of {what} is not UTF-8"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        out.push(v);
    }
    let specs = out.pop().unwrap_or_default();
    let names = out.pop().unwrap_or_default();
    Ok((names, specs))
}

struct SaveV2Kernel;

impl OpKernel for SaveV2Kernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let path = prefix(ctx)?;
        let n = ctx.num_inputs().saturating_sub(3);
        let (names, specs) = names_and_specs(ctx, n)?;
        let mut writer = BundleWriter::new(&path);
        for (i, (name, spec)) in names.iter().zip(&specs).enumerate() {
            let t = ctx.input(3 + i)?;
            match ShapeAndSlice::parse(spec)? {
                None => writer.add(name, t)?,
                Some(sl) => {
                    if &sl.slice_shape != t.shape() {
                        return Err(Status::invalid_argument(format!(
                            "Slice in shape_and_slice specification does not match the shape of the tensor to save: {spec}, tensor: {} ('{name}')",
                            t.shape()
                        )));
                    }
                    writer.add_slice(name, &sl.full_shape, &sl.slice, t)?;
                }
            }
        }
        writer.finish()
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Restores whose tensors hold at least this many bytes read them in parallel.
const PARALLEL_RESTORE_BYTES: usize = 8 << 20;

struct RestoreV2Kernel {
    dtypes: Vec<DType>,
}

impl OpKernel for RestoreV2Kernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let path = prefix(ctx)?;
        let n = self.dtypes.len();
        let (names, specs) = names_and_specs(ctx, n)?;
        let reader = CheckpointReader::open(&path)?;
        // Every request checked before anything is read.
        let mut requests = Vec::with_capacity(n);
        let mut bytes = 0usize;
        for (i, (name, spec)) in names.iter().zip(&specs).enumerate() {
            let info = reader.info(name).ok_or_else(|| {
                Status::not_found(format!(
                    "Key {name} not found in checkpoint {}",
                    path.display()
                ))
            })?;
            if info.dtype != self.dtypes[i] {
                return Err(Status::invalid_argument(format!(
                    "tensor {name} in checkpoint {} has dtype {}, but the restore asks for {}",
                    path.display(),
                    info.dtype,
                    self.dtypes[i]
                )));
            }
            let slice = match ShapeAndSlice::parse(spec)? {
                None => None,
                Some(sl) if sl.full_shape != info.shape => {
                    return Err(Status::invalid_argument(format!(
                        "tensor_name = {name}; shape in shape_and_slice spec {} does not match the shape stored in checkpoint: {} (checkpoint {})",
                        sl.full_shape,
                        info.shape,
                        path.display()
                    )))
                }
                Some(sl) => Some(sl.slice),
            };
            bytes =
                bytes.saturating_add(info.shape.num_elements().saturating_mul(info.dtype.size()));
            requests.push((name.as_str(), slice));
        }
        let read = |(name, slice): &(&str, Option<TensorSlice>)| match slice {
            None => reader.tensor(name),
            Some(s) => reader.tensor_slice(name, s),
        };
        let tensors: Vec<Result<Tensor>> = if bytes >= PARALLEL_RESTORE_BYTES && n > 1 {
            requests.par_iter().map(read).collect()
        } else {
            requests.iter().map(read).collect()
        };
        for (i, t) in tensors.into_iter().enumerate() {
            ctx.set_output(i, t?)?;
        }
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Input `i`, checked to be a scalar (TensorFlow's message otherwise).
fn scalar_input<'a>(ctx: &'a OpKernelContext<'_>, i: usize, what: &str) -> Result<&'a Tensor> {
    let t = ctx.input(i)?;
    if t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "Input {what} should have a single element, got shape {}",
            t.shape()
        )));
    }
    Ok(t)
}

/// A scalar string input, as UTF-8.
fn string_scalar(ctx: &OpKernelContext<'_>, i: usize, what: &str) -> Result<String> {
    let t = scalar_input(ctx, i, what)?;
    String::from_utf8(t.as_strings()?[0].to_vec())
        .map_err(|_| Status::invalid_argument(format!("the checkpoint {what} is not UTF-8")))
}

/// A scalar int32 input.
fn int_scalar(ctx: &OpKernelContext<'_>, i: usize, what: &str) -> Result<i32> {
    scalar_input(ctx, i, what)?.scalar_value::<i32>()
}

/// `ShardedFilename`: `basename-00001-of-00004`.
struct ShardedFilenameKernel;

impl OpKernel for ShardedFilenameKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let base = string_scalar(ctx, 0, "basename")?;
        let shard = int_scalar(ctx, 1, "shard")?;
        let num = int_scalar(ctx, 2, "num_shards")?;
        ctx.set_output(
            0,
            Tensor::string_scalar(format!("{base}-{shard:05}-of-{num:05}")),
        )
    }
}

/// `ShardedFilespec`: `basename-?????-of-00004`, the glob of every shard.
struct ShardedFilespecKernel;

impl OpKernel for ShardedFilespecKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let base = string_scalar(ctx, 0, "basename")?;
        let num = int_scalar(ctx, 1, "num_shards")?;
        ctx.set_output(
            0,
            Tensor::string_scalar(format!("{base}-?????-of-{num:05}")),
        )
    }
}

/// `MergeV2Checkpoints`: the shards of a sharded save into one bundle; see
/// [`merge_bundles`]. With `delete_old_dirs`, each shard's directory (when it is
/// not the destination's) is then removed if empty, as TensorFlow does.
struct MergeV2CheckpointsKernel {
    delete_old_dirs: bool,
    allow_missing_files: bool,
}

impl OpKernel for MergeV2CheckpointsKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let t = ctx.input(0)?;
        if t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "checkpoint_prefixes must be a vector, got shape {}",
                t.shape()
            )));
        }
        let inputs = t
            .as_strings()?
            .iter()
            .map(|b| {
                std::str::from_utf8(b)
                    .map(PathBuf::from)
                    .map_err(|_| Status::invalid_argument("a checkpoint prefix is not UTF-8"))
            })
            .collect::<Result<Vec<_>>>()?;
        let dest = PathBuf::from(string_scalar(ctx, 1, "destination_prefix")?);
        merge_bundles(&inputs, &dest, self.allow_missing_files)?;
        if self.delete_old_dirs {
            let dest_dir = dest.parent().map(PathBuf::from);
            for p in &inputs {
                let dir = p.parent().map(PathBuf::from);
                if dir.is_some() && dir != dest_dir {
                    // Not recursive: a directory something else still uses stays.
                    let _ = dir.map(std::fs::remove_dir);
                }
            }
        }
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Registers `SaveV2`, `RestoreV2`, `MergeV2Checkpoints`, `ShardedFilename` and
/// `ShardedFilespec`.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("ShardedFilename", |_| {
        Ok(Box::new(ShardedFilenameKernel))
    }));
    r.register(KernelDef::cpu("ShardedFilespec", |_| {
        Ok(Box::new(ShardedFilespecKernel))
    }));
    r.register(KernelDef::cpu("MergeV2Checkpoints", |c| {
        Ok(Box::new(MergeV2CheckpointsKernel {
            delete_old_dirs: c.attr("delete_old_dirs")?,
            allow_missing_files: c.attr("allow_missing_files")?,
        }))
    }));
    r.register(KernelDef::cpu("SaveV2", |_| Ok(Box::new(SaveV2Kernel))));
    r.register(KernelDef::cpu("RestoreV2", |c| {
        Ok(Box::new(RestoreV2Kernel {
            dtypes: c.attr("dtypes")?,
        }))
    }));
}
