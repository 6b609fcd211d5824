//! The `SaveV2` and `RestoreV2` kernels.

use std::path::PathBuf;

use graph::ops::checkpoint::ShapeAndSlice;
use graph::{DType, Result, Status, Tensor};

use crate::cpu::checkpoint::bundle::{write_bundle, CheckpointReader, TensorInfo};
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The checkpoint path of input 0 (a string scalar).
fn prefix(ctx: &OpKernelContext<'_>) -> Result<PathBuf> {
    let t = ctx.input(0)?;
    if t.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "Input prefix should have a single element, got shape {}",
            t.shape()
        )));
    }
    let s = t.as_strings()?;
    let p = std::str::from_utf8(&s[0])
        .map_err(|_| Status::invalid_argument("the checkpoint prefix is not UTF-8"))?;
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
        let mut tensors = Vec::with_capacity(n);
        for (i, (name, spec)) in names.iter().zip(&specs).enumerate() {
            let t = ctx.input(3 + i)?;
            // A slice spec naming the whole tensor is a whole tensor; real slices
            // (TensorFlow's partitioned variables) are not supported.
            if let Some(sl) = ShapeAndSlice::parse(spec)? {
                if !(sl.is_full() && &sl.full_shape == t.shape()) {
                    return Err(Status::unimplemented(format!(
                        "SaveV2 of a tensor slice ('{name}' with spec '{spec}') is not supported; save whole tensors"
                    )));
                }
            }
            tensors.push((name.as_str(), t));
        }
        write_bundle(&path, &tensors)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Copies the hyper-rectangle `extents` of a row-major array of `dims` whose
/// elements are `unit` items of `src` each.
fn copy_slice<T: Clone>(
    src: &[T],
    unit: usize,
    dims: &[usize],
    extents: &[(usize, usize)],
) -> Vec<T> {
    let rank = dims.len();
    if rank == 0 {
        return src.to_vec();
    }
    let count: usize = extents.iter().map(|e| e.1).product();
    let mut out = Vec::with_capacity(count * unit);
    if count == 0 {
        return out;
    }
    // Row-major strides, in elements.
    let mut strides = vec![1usize; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1];
    }
    let (last_start, last_len) = extents[rank - 1];
    let mut idx: Vec<usize> = extents.iter().map(|e| e.0).collect();
    loop {
        let base: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        let from = (base - idx[rank - 1] + last_start) * unit;
        out.extend_from_slice(&src[from..from + last_len * unit]);
        // Advance the odometer over every dimension but the last.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < extents[d].0 + extents[d].1 {
                break;
            }
            idx[d] = extents[d].0;
        }
    }
}

/// The slice `sl` of tensor `t` (whose shape the caller checked is the full one).
fn slice_tensor(t: &Tensor, sl: &ShapeAndSlice) -> Result<Tensor> {
    let dims = t.dims();
    let shape = sl.slice_shape();
    if t.dtype() == DType::String {
        let v = copy_slice(t.as_strings()?, 1, dims, &sl.extents);
        Tensor::from_strings(shape.dims(), v)
    } else {
        let b = copy_slice(t.as_bytes()?, t.dtype().size(), dims, &sl.extents);
        Tensor::from_raw_bytes(t.dtype(), shape.dims(), &b)
    }
}

struct RestoreV2Kernel {
    dtypes: Vec<DType>,
}

impl RestoreV2Kernel {
    fn check(reader: &CheckpointReader, info: &TensorInfo, want: DType) -> Result<()> {
        if info.dtype != want {
            return Err(Status::invalid_argument(format!(
                "tensor {} in checkpoint {} has dtype {}, but the restore asks for {want}",
                info.name,
                reader.prefix().display(),
                info.dtype
            )));
        }
        Ok(())
    }
}

impl OpKernel for RestoreV2Kernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let path = prefix(ctx)?;
        let n = self.dtypes.len();
        let (names, specs) = names_and_specs(ctx, n)?;
        let reader = CheckpointReader::open(&path)?;
        for (i, (name, spec)) in names.iter().zip(&specs).enumerate() {
            let info = reader.info(name).ok_or_else(|| {
                Status::not_found(format!(
                    "Key {name} not found in checkpoint {}",
                    path.display()
                ))
            })?;
            Self::check(&reader, info, self.dtypes[i])?;
            let t = reader.tensor(name)?;
            let t = match ShapeAndSlice::parse(spec)? {
                None => t,
                Some(sl) => {
                    if sl.full_shape != info.shape {
                        return Err(Status::invalid_argument(format!(
                            "tensor {name} in checkpoint {} has shape {}, but the restore expects {}",
                            path.display(),
                            info.shape,
                            sl.full_shape
                        )));
                    }
                    if sl.is_full() {
                        t
                    } else {
                        slice_tensor(&t, &sl)?
                    }
                }
            };
            ctx.set_output(i, t)?;
        }
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Registers `SaveV2` and `RestoreV2`.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("SaveV2", |_| Ok(Box::new(SaveV2Kernel))));
    r.register(KernelDef::cpu("RestoreV2", |c| {
        Ok(Box::new(RestoreV2Kernel {
            dtypes: c.attr("dtypes")?,
        }))
    }));
}
