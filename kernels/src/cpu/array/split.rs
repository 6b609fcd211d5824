//! Kernels that cut a tensor along one dimension: Split, SplitV and Unpack. Each
//! views the input as an `[outer, row]` matrix around the axis and copies every
//! piece's rows with `memcpy`; a single piece is the input itself.

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};

use super::elems::{dispatch_elem, int_scalar, int_values, Elem};
use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// Cuts `src` (`[outer, Σ rows]`) into pieces `[outer, rows[i]]` of `shapes[i]`.
pub(crate) fn split_rows<E: Elem>(
    alloc: Allocator<'_>,
    dtype: DType,
    src: &[E],
    outer: usize,
    rows: &[usize],
    shapes: Vec<TensorShape>,
) -> Result<Vec<Tensor>> {
    let in_row: usize = rows.iter().sum();
    if src.len() != outer * in_row {
        return Err(Status::internal("split: input size mismatch"));
    }
    let mut start = 0;
    let mut out = Vec::with_capacity(rows.len());
    for (&row, shape) in rows.iter().zip(shapes) {
        let t = E::build(alloc, dtype, shape, |o| {
            if o.len() != outer * row {
                return Err(Status::internal("split: output size mismatch"));
            }
            for k in 0..outer {
                let s = k * in_row + start;
                o[k * row..(k + 1) * row].clone_from_slice(&src[s..s + row]);
            }
            Ok(())
        })?;
        start += row;
        out.push(t);
    }
    Ok(out)
}
fn split_dim_error(rank: usize, raw: i64) -> Status {
    Status::invalid_argument(format!(
        "-input rank(-{rank}) <= split_dim < input rank ({rank}), but got {raw}"
    ))
}

fn canonical_split_dim(raw: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let d = if raw < 0 { raw + r } else { raw };
    if !(0..r).contains(&d) {
        return Err(split_dim_error(rank, raw));
    }
    Ok(d as usize)
}

/// Splits `value` along `axis` into pieces of `sizes` and sets them as outputs.
fn emit_split<E: Elem>(
    ctx: &mut OpKernelContext<'_>,
    value: &Tensor,
    axis: usize,
    sizes: &[usize],
) -> Result<()> {
    let dims = value.dims();
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let rows: Vec<usize> = sizes.iter().map(|&s| s * inner).collect();
    let shapes = sizes
        .iter()
        .map(|&s| {
            let mut d = dims.to_vec();
            d[axis] = s;
            TensorShape::from(d)
        })
        .collect();
    let pieces = split_rows::<E>(
        ctx.allocator(),
        value.dtype(),
        E::view(value)?,
        outer,
        &rows,
        shapes,
    )?;
    for (i, p) in pieces.into_iter().enumerate() {
        ctx.set_output(i, p)?;
    }
    Ok(())
}

/// `Split`: `num_split` equal pieces.
struct SplitKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for SplitKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let num = ctx.num_outputs();
        let dim_t = ctx.input(0)?;
        if dim_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "split_dim must be a scalar but has rank {}",
                dim_t.rank()
            )));
        }
        let raw = int_scalar(dim_t)?;
        let value = ctx.take_input(1)?;
        let axis = canonical_split_dim(raw, value.rank())?;
        if num == 0 {
            return Err(Status::invalid_argument(
                "Number of ways to split should be > 0, but got 0",
            ));
        }
        let d = value.dims()[axis];
        if d % num != 0 {
            return Err(Status::invalid_argument(format!(
                "Number of ways to split should evenly divide the split dimension, but got split_dim {axis} (size = {d}) and num_split {num}"
            )));
        }
        if num == 1 {
            return ctx.set_output(0, value);
        }
        emit_split::<E>(ctx, &value, axis, &vec![d / num; num])
    }
}

/// `SplitV`: pieces of the given sizes (one may be -1).
struct SplitVKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for SplitVKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let num = ctx.num_outputs();
        let dim_t = ctx.input(2)?;
        if dim_t.num_elements() != 1 {
            return Err(Status::invalid_argument(
                "split_dim_tensor must have exactly one element.",
            ));
        }
        let raw = int_scalar(dim_t)?;
        let sizes_t = ctx.input(1)?;
        if !(sizes_t.rank() == 1 && sizes_t.num_elements() == num) {
            return Err(Status::invalid_argument(format!(
                "size of the split_tensor must be 1-D and have the same elements as outputs got {} -D and {} elements",
                sizes_t.rank(),
                sizes_t.num_elements()
            )));
        }
        let mut sizes = int_values(sizes_t)?;
        let value = ctx.take_input(0)?;
        if num == 0 {
            return Err(Status::invalid_argument(
                "Number of ways to split should be > 0, but got 0",
            ));
        }
        let axis = canonical_split_dim(raw, value.rank())?;
        let total = value.dims()[axis] as i64;
        if num == 1 {
            if sizes[0] != total {
                return Err(Status::invalid_argument(format!(
                    "If there is only one output, it must have the same size as the input. Input size: {total} output size: {}",
                    sizes[0]
                )));
            }
            return ctx.set_output(0, value);
        }
        let mut neg = None;
        let mut determined = 0i64;
        for (d, &s) in sizes.iter().enumerate() {
            if s == -1 {
                if neg.is_some() {
                    return Err(Status::invalid_argument(
                        "There can only be one -1 in the input.",
                    ));
                }
                neg = Some(d);
            } else {
                determined = determined.saturating_add(s);
            }
        }
        let ok = match neg {
            None => determined == total,
            Some(_) => determined <= total,
        };
        if !ok {
            return Err(Status::invalid_argument(format!(
                "Determined shape must either match input shape along split_dim exactly if fully specified, or be less than the size of the input along split_dim if not fully specified.  Got: {determined}"
            )));
        }
        if let Some(d) = neg {
            sizes[d] = total - determined;
        }
        let mut out = Vec::with_capacity(num);
        for (i, &s) in sizes.iter().enumerate() {
            if s < 0 {
                return Err(Status::invalid_argument(format!(
                    "Split size at index {i} must be >= 0. Got: {s}"
                )));
            }
            out.push(s as usize);
        }
        if out.iter().sum::<usize>() != total as usize {
            return Err(Status::invalid_argument(format!(
                "Split sizes {sizes:?} do not add up to the input size {total}"
            )));
        }
        emit_split::<E>(ctx, &value, axis, &out)
    }
}

/// `Unpack`: one output per index of `axis`, without that dimension.
struct UnpackKernel<E> {
    axis: i64,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for UnpackKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let num = ctx.num_outputs();
        let value = ctx.take_input(0)?;
        let r = value.rank() as i64;
        let axis = if self.axis < 0 {
            self.axis + r
        } else {
            self.axis
        };
        if !(0..r).contains(&axis) {
            return Err(Status::invalid_argument(format!(
                "axis = {} not in [{}, {r})",
                self.axis, -r
            )));
        }
        let axis = axis as usize;
        if value.dims()[axis] != num {
            return Err(Status::invalid_argument(format!(
                "Input shape axis {axis} must equal {num}, got shape {}",
                value.shape()
            )));
        }
        let mut dims = value.dims().to_vec();
        dims.remove(axis);
        let outer: usize = dims[..axis].iter().product();
        let row: usize = dims[axis..].iter().product();
        let shapes = vec![TensorShape::from(dims); num];
        let pieces = split_rows::<E>(
            ctx.allocator(),
            value.dtype(),
            E::view(&value)?,
            outer,
            &vec![row; num],
            shapes,
        )?;
        for (i, p) in pieces.into_iter().enumerate() {
            ctx.set_output(i, p)?;
        }
        Ok(())
    }
}
/// Registers the split and unpack kernels.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu(
        "Split",
        |c| dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(SplitKernel::<E>(PhantomData)))),
    ));
    r.register(
        KernelDef::cpu("SplitV", |c| {
            dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(SplitVKernel::<E>(PhantomData))))
        })
        .type_constraint("Tlen", &[DType::I8, DType::I32, DType::I64]),
    );
    r.register(KernelDef::cpu("Unpack", |c| {
        let axis: i64 = c.attr("axis")?;
        dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(UnpackKernel::<E> { axis, _e: PhantomData })))
    }));
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, DType, Tensor};

    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::new(dims, (0..n as i32).collect()).unwrap()
    }

    #[test]
    fn unpack() {
        let attrs = [("num", AttrValue::I(3)), ("axis", AttrValue::I(-1))];
        let out = run_op("Unpack", &attrs, vec![iota(&[2, 3])]).unwrap();
        assert_eq!(
            out,
            vec![
                Tensor::vector(&[0, 3]),
                Tensor::vector(&[1, 4]),
                Tensor::vector(&[2, 5])
            ]
        );
        let attrs = [("num", AttrValue::I(2))];
        let out = run_op("Unpack", &attrs, vec![Tensor::vector(&[true, false])]).unwrap();
        assert_eq!(out, vec![Tensor::scalar(true), Tensor::scalar(false)]);
        let attrs = [("num", AttrValue::I(3))];
        assert_eq!(
            run_op("Unpack", &attrs, vec![iota(&[2, 3])])
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn split_and_split_v() {
        let attrs = [("num_split", AttrValue::I(2))];
        let out = run_op("Split", &attrs, vec![Tensor::scalar(1i32), iota(&[2, 4])]).unwrap();
        assert_eq!(
            out,
            vec![
                Tensor::new(&[2, 2], vec![0, 1, 4, 5]).unwrap(),
                Tensor::new(&[2, 2], vec![2, 3, 6, 7]).unwrap()
            ]
        );
        let out = run_op(
            "Split",
            &attrs,
            vec![Tensor::scalar(-2i32), Tensor::zeros(DType::F32, [0, 3])],
        )
        .unwrap();
        assert_eq!(out[1].dims(), &[0, 3]);
        let e = run_op("Split", &attrs, vec![Tensor::scalar(0i32), iota(&[5])]).unwrap_err();
        assert_eq!(e.message(), "Number of ways to split should evenly divide the split dimension, but got split_dim 0 (size = 5) and num_split 2");
        let e = run_op("Split", &attrs, vec![Tensor::scalar(3i32), iota(&[4])]).unwrap_err();
        assert_eq!(
            e.message(),
            "-input rank(-1) <= split_dim < input rank (1), but got 3"
        );
        let one = [("num_split", AttrValue::I(1))];
        let x = Tensor::zeros(DType::F32, [64]);
        assert!(
            run_op("Split", &one, vec![Tensor::scalar(0i32), x.clone()]).unwrap()[0]
                .shares_buffer_with(&x)
        );

        let attrs = [("num_split", AttrValue::I(3))];
        let out = run_op(
            "SplitV",
            &attrs,
            vec![
                iota(&[5]),
                Tensor::vector(&[1i64, -1, 2]),
                Tensor::scalar(0i32),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                Tensor::vector(&[0]),
                Tensor::vector(&[1, 2]),
                Tensor::vector(&[3, 4])
            ]
        );
        let out = run_op(
            "SplitV",
            &attrs,
            vec![
                iota(&[2, 2]),
                Tensor::vector(&[0i8, 2, 0]),
                Tensor::scalar(1i32),
            ],
        )
        .unwrap();
        assert_eq!(out[0].dims(), &[2, 0]);
        let e = run_op(
            "SplitV",
            &attrs,
            vec![
                iota(&[5]),
                Tensor::vector(&[1i32, -1, -1]),
                Tensor::scalar(0i32),
            ],
        )
        .unwrap_err();
        assert_eq!(e.message(), "There can only be one -1 in the input.");
        let e = run_op(
            "SplitV",
            &attrs,
            vec![
                iota(&[5]),
                Tensor::vector(&[-2i32, 6, 1]),
                Tensor::scalar(0i32),
            ],
        )
        .unwrap_err();
        assert_eq!(e.message(), "Split size at index 0 must be >= 0. Got: -2");
        let e = run_op(
            "SplitV",
            &attrs,
            vec![
                iota(&[5]),
                Tensor::vector(&[1i32, 6, -1]),
                Tensor::scalar(0i32),
            ],
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("Determined shape must either match"),
            "{e}"
        );
    }
}
