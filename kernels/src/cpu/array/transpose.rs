//! Kernels that permute or mirror the element order: Transpose (no copy when the
//! permutation only moves dimensions of size 1) and ReverseV2. Both are one
//! [`strided_copy`] with permuted or negated source strides.

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};
use smallvec::SmallVec;

use super::copy::{signed_strides, strided_copy, Layout};
use super::elems::{dispatch_elem, int_values, Elem, INDEX_DTYPES};
use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// Validates `perm` for a tensor of rank `dims` as TensorFlow does (negative
/// entries count from the end) and returns it canonical.
pub fn check_permutation(perm: &[i64], dims: usize) -> Result<SmallVec<[usize; 8]>> {
    if perm.len() != dims {
        return Err(Status::invalid_argument(format!(
            "transpose expects a vector of size {dims}. But input(1) is a vector of size {}",
            perm.len()
        )));
    }
    let mut seen = vec![false; dims];
    let mut out = SmallVec::with_capacity(dims);
    for &p in perm {
        let d = if p < 0 { p + dims as i64 } else { p };
        let Some(slot) = usize::try_from(d).ok().filter(|&u| u < dims) else {
            return Err(Status::invalid_argument(format!(
                "{d} is out of range [0 .. {dims})"
            )));
        };
        seen[slot] = true;
        out.push(slot);
    }
    if let Some(missing) = seen.iter().position(|&s| !s) {
        let p: Vec<String> = perm.iter().map(ToString::to_string).collect();
        return Err(Status::invalid_argument(format!(
            "{missing} is missing from {{{}}}.",
            p.join(",")
        )));
    }
    Ok(out)
}

/// `x` permuted by `perm` (canonical): a view when only unit dimensions move.
pub fn transpose_tensor<E: Elem>(
    alloc: Allocator<'_>,
    x: &Tensor,
    perm: &[usize],
) -> Result<Tensor> {
    let in_dims = x.dims();
    let out_dims: Vec<usize> = perm.iter().map(|&p| in_dims[p]).collect();
    let moved: Vec<usize> = perm.iter().copied().filter(|&p| in_dims[p] != 1).collect();
    if moved.windows(2).all(|w| w[0] < w[1]) {
        return x.reshaped(out_dims);
    }
    let in_strides = signed_strides(in_dims);
    let src_strides: SmallVec<[isize; 8]> = perm.iter().map(|&p| in_strides[p]).collect();
    let dst_strides = signed_strides(&out_dims);
    let src = E::view(x)?;
    E::build(alloc, x.dtype(), TensorShape::from(out_dims.clone()), |o| {
        strided_copy(
            &out_dims,
            src,
            Layout {
                base: 0,
                strides: &src_strides,
            },
            o,
            Layout {
                base: 0,
                strides: &dst_strides,
            },
        )
    })
}

/// `Transpose`.
struct TransposeKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for TransposeKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let perm_t = ctx.input(1)?;
        if perm_t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "perm must be rank 1, got shape {}",
                perm_t.shape()
            )));
        }
        let perm = int_values(perm_t)?;
        let x = ctx.take_input(0)?;
        let perm = check_permutation(&perm, x.rank())?;
        let out = transpose_tensor::<E>(ctx.allocator(), &x, &perm)?;
        ctx.set_output(0, out)
    }
}

/// `ReverseV2`.
struct ReverseKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for ReverseKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let axis_t = ctx.input(1)?;
        if axis_t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "'dims' must be 1-dimension, not {}",
                axis_t.rank()
            )));
        }
        let axes = int_values(axis_t)?;
        let x = ctx.take_input(0)?;
        let r = x.rank();
        if r == 0 {
            return ctx.set_output(0, x);
        }
        let mut rev = vec![false; r];
        for (k, &a) in axes.iter().enumerate() {
            let c = if a < 0 { a + r as i64 } else { a };
            let Some(c) = usize::try_from(c).ok().filter(|&c| c < r) else {
                return Err(Status::invalid_argument(format!(
                    "'axis'[{k}] = {a} is out of valid range [0, {}",
                    r - 1
                )));
            };
            if rev[c] {
                return Err(Status::invalid_argument(format!(
                    "axis {c} specified more than once."
                )));
            }
            rev[c] = true;
        }
        if r > 8 {
            return Err(Status::unimplemented(
                "reverse is not implemented for tensors of rank > 8.",
            ));
        }
        let dims = x.dims().to_vec();
        if !rev.iter().zip(&dims).any(|(&rv, &d)| rv && d > 1) {
            return ctx.set_output(0, x);
        }
        let strides = signed_strides(&dims);
        let mut base = 0usize;
        let mut src_strides = strides.clone();
        for i in 0..r {
            if rev[i] && dims[i] > 0 {
                base += (dims[i] - 1) * strides[i] as usize;
                src_strides[i] = -strides[i];
            }
        }
        let src = E::view(&x)?;
        let out = E::build(ctx.allocator(), x.dtype(), x.shape().clone(), |o| {
            strided_copy(
                &dims,
                src,
                Layout {
                    base,
                    strides: &src_strides,
                },
                o,
                Layout {
                    base: 0,
                    strides: &strides,
                },
            )
        })?;
        ctx.set_output(0, out)
    }
}

fn make_transpose(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(TransposeKernel::<E>(PhantomData))))
}

fn make_reverse(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(ReverseKernel::<E>(PhantomData))))
}

/// Registers Transpose and ReverseV2.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("Transpose", make_transpose).type_constraint("Tperm", INDEX_DTYPES));
    r.register(KernelDef::cpu("ReverseV2", make_reverse).type_constraint("Tidx", INDEX_DTYPES));
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{Code, DType, Tensor};

    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::new(dims, (0..n as i32).collect()).unwrap()
    }

    #[test]
    fn transposes() {
        let out = run_op(
            "Transpose",
            &[],
            vec![iota(&[2, 3]), Tensor::vector(&[1i32, 0])],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[3, 2], vec![0, 3, 1, 4, 2, 5]).unwrap()
        );
        // 3-D rotation, negative perm entries
        let out = run_op(
            "Transpose",
            &[],
            vec![iota(&[2, 3, 4]), Tensor::vector(&[-1i64, 0, 1])],
        )
        .unwrap();
        assert_eq!(out[0].dims(), &[4, 2, 3]);
        let v = out[0].as_slice::<i32>().unwrap();
        // out[i][j][k] = x[j][k][i]: out[1][1][2] = x[1][2][1]
        assert_eq!(v[6 + 3 + 2], 12 + 2 * 4 + 1);
        // moving unit dims is a view
        let x = Tensor::zeros(DType::F32, [1, 64]);
        let out = run_op(
            "Transpose",
            &[],
            vec![x.clone(), Tensor::vector(&[1i32, 0])],
        )
        .unwrap();
        assert!(out[0].shares_buffer_with(&x));
        assert_eq!(out[0].dims(), &[64, 1]);
        // strings, scalars, empties
        let s = Tensor::from_strings(&[2, 2], vec!["a", "b", "c", "d"]).unwrap();
        let out = run_op("Transpose", &[], vec![s, Tensor::vector(&[1i32, 0])]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_strings(&[2, 2], vec!["a", "c", "b", "d"]).unwrap()
        );
        let out = run_op(
            "Transpose",
            &[],
            vec![Tensor::scalar(true), Tensor::vector::<i32>(&[])],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::scalar(true));
        let out = run_op(
            "Transpose",
            &[],
            vec![Tensor::zeros(DType::I8, [0, 3]), Tensor::vector(&[1i32, 0])],
        )
        .unwrap();
        assert_eq!(out[0].dims(), &[3, 0]);
    }

    #[test]
    fn transpose_errors() {
        let x = iota(&[2, 3]);
        let e = run_op(
            "Transpose",
            &[],
            vec![x.clone(), Tensor::vector(&[0i32, 0])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "1 is missing from {0,0}.");
        let e = run_op(
            "Transpose",
            &[],
            vec![x.clone(), Tensor::vector(&[0i32, 2])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "2 is out of range [0 .. 2)");
        let e = run_op("Transpose", &[], vec![x.clone(), Tensor::vector(&[0i32])]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_op(
            "Transpose",
            &[],
            vec![x, Tensor::new(&[1, 2], vec![1i32, 0]).unwrap()],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn reverses() {
        let out = run_op(
            "ReverseV2",
            &[],
            vec![iota(&[2, 3]), Tensor::vector(&[1i32])],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[2, 3], vec![2, 1, 0, 5, 4, 3]).unwrap()
        );
        let out = run_op(
            "ReverseV2",
            &[],
            vec![iota(&[2, 3]), Tensor::vector(&[0i64, -1])],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[2, 3], vec![5, 4, 3, 2, 1, 0]).unwrap()
        );
        let out = run_op(
            "ReverseV2",
            &[],
            vec![iota(&[2, 3]), Tensor::vector(&[0i32])],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[2, 3], vec![3, 4, 5, 0, 1, 2]).unwrap()
        );
        let s = Tensor::from_strings(&[3], vec!["a", "b", "c"]).unwrap();
        let out = run_op("ReverseV2", &[], vec![s, Tensor::vector(&[0i32])]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_strings(&[3], vec!["c", "b", "a"]).unwrap()
        );
        let out = run_op(
            "ReverseV2",
            &[],
            vec![Tensor::scalar(1.0f32), Tensor::vector(&[5i32])],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::scalar(1.0f32));
        let e = run_op(
            "ReverseV2",
            &[],
            vec![iota(&[2, 3]), Tensor::vector(&[0i32, -2])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "axis 0 specified more than once.");
        let e = run_op(
            "ReverseV2",
            &[],
            vec![iota(&[2, 3]), Tensor::vector(&[2i32])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "'axis'[0] = 2 is out of valid range [0, 1");
        let e = run_op(
            "ReverseV2",
            &[],
            vec![
                Tensor::zeros(DType::F32, vec![2; 9]),
                Tensor::vector(&[0i32]),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented);
        assert!(run_op(
            "ReverseV2",
            &[],
            vec![Tensor::scalar(1i32), Tensor::vector(&[0i32])]
        )
        .is_ok());
    }
}
