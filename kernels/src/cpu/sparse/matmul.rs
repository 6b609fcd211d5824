//! `SparseTensorDenseMatMul`: `op(A) · op(B)` for a sparse matrix `A` (int32 or
//! int64 indices, values, an int64 `[2]` shape) and a dense matrix `B`, `op`
//! transposing under `adjoint_a`/`adjoint_b` (the types here are real, so the
//! adjoint is the transpose).
//!
//! As TensorFlow's CPU functor: the output starts at zero and each entry
//! `(m, k, a)` adds `a · B[k, :]` to row `m` in entry order (half and bfloat16
//! accumulate in `f32` and round at the end); indices are checked as they are
//! met, `k` before `m`. The indices need not be sorted.

use graph::{bf16, f16, DType, Result, Status, TensorType};

use super::i64_values;
use crate::cpu::array::elems::make_shape;
use crate::cpu::math::elem::Arith;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// An element type and the type TensorFlow sums its products in.
trait MatMulElem: TensorType + Copy {
    type Acc: Arith;
    fn widen(self) -> Self::Acc;
    fn narrow(acc: Self::Acc) -> Self;
}

macro_rules! same_acc {
    ($($t:ty),*) => {$(impl MatMulElem for $t {
        type Acc = $t;
        fn widen(self) -> $t { self }
        fn narrow(acc: $t) -> $t { acc }
    })*};
}
same_acc!(f32, f64, i32);

impl MatMulElem for f16 {
    type Acc = f32;
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(acc: f32) -> f16 {
        f16::from_f32(acc)
    }
}

impl MatMulElem for bf16 {
    type Acc = f32;
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(acc: f32) -> bf16 {
        bf16::from_f32(acc)
    }
}

struct SparseDenseMatMul<T> {
    adjoint_a: bool,
    adjoint_b: bool,
    _t: std::marker::PhantomData<fn(T)>,
}

impl<T: MatMulElem> OpKernel for SparseDenseMatMul<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (ix, vals, shape, b) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.input(3)?);
        let fail = |m: &str| Err(Status::invalid_argument(m.to_owned()));
        if b.rank() != 2 {
            return fail("Tensor 'b' is not a matrix");
        }
        if shape.rank() != 1 {
            return fail("Tensor 'a_shape' is not a vector");
        }
        if shape.num_elements() != 2 {
            return fail("Tensor 'a_shape' must have 2 elements");
        }
        if vals.rank() != 1 {
            return fail("Tensor 'a_values' is not a vector");
        }
        if ix.rank() != 2 {
            return fail("Tensor 'a_indices' is not a matrix");
        }
        let nnz = ix.dims()[0];
        if nnz != vals.num_elements() {
            return fail(
                "Number of rows of a_indices does not match number of entries in a_values",
            );
        }
        if ix.dims()[1] != 2 {
            return fail(
                "Number of columns of a_indices does not match number of entries in a_shape",
            );
        }
        let a_shape = shape.as_slice::<i64>()?;
        let (b0, b1) = (b.dims()[0] as i64, b.dims()[1] as i64);
        let (outer_left, inner_left) = if self.adjoint_a {
            (a_shape[1], a_shape[0])
        } else {
            (a_shape[0], a_shape[1])
        };
        let (inner_right, outer_right) = if self.adjoint_b { (b1, b0) } else { (b0, b1) };
        if inner_left != inner_right {
            return Err(Status::invalid_argument(format!(
                "Cannot multiply A and B because inner dimension does not match: {inner_left} \
                 vs. {inner_right}.  Did you forget a transpose?  Dimensions of A: [{}, {}).  \
                 Dimensions of B: {}",
                a_shape[0],
                a_shape[1],
                b.shape()
            )));
        }
        // TensorFlow aborts on a negative dimension here; actorflow refuses it.
        let out_shape = make_shape(&[outer_left, outer_right])?;
        let (rows, cols) = (out_shape.dim(0), out_shape.dim(1));
        let ix = i64_values(ix)?;
        let (a, bv) = (vals.as_slice::<T>()?, b.as_slice::<T>()?);
        let (lhs, rhs) = if self.adjoint_a { (1, 0) } else { (0, 1) };
        let b_inner = inner_right as usize;
        let b_cols = b.dims()[1];
        let mut acc: Vec<T::Acc> = Vec::new();
        if rows * cols > 0 && !a.is_empty() && !bv.is_empty() {
            acc = ctx
                .allocator()
                .vec(rows * cols, <T::Acc as num_traits::Zero>::zero())?;
            for (i, &value) in a.iter().enumerate() {
                let (m, k) = (ix[2 * i + lhs], ix[2 * i + rhs]);
                let k = usize::try_from(k)
                    .ok()
                    .filter(|&k| k < b_inner)
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "k ({k}) from index[{i},{rhs}] out of bounds (>={b_inner})"
                        ))
                    })?;
                let m = usize::try_from(m)
                    .ok()
                    .filter(|&m| m < rows)
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "m ({m}) from index[{i},{lhs}] out of bounds (>={rows})"
                        ))
                    })?;
                let value = value.widen();
                let row = &mut acc[m * cols..(m + 1) * cols];
                for (n, o) in row.iter_mut().enumerate() {
                    let bkn = if self.adjoint_b {
                        bv[n * b_cols + k]
                    } else {
                        bv[k * b_cols + n]
                    };
                    *o = o.tf_add(value.tf_mul(bkn.widen()));
                }
            }
        }
        let out = ctx.allocator().build::<T>(out_shape, |o| {
            for (o, &s) in o.iter_mut().zip(&acc) {
                *o = T::narrow(s);
            }
        })?;
        ctx.set_output(0, out)
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    let (adjoint_a, adjoint_b) = (c.attr("adjoint_a")?, c.attr("adjoint_b")?);
    macro_rules! k {
        ($t:ty) => {
            Ok(Box::new(SparseDenseMatMul::<$t> {
                adjoint_a,
                adjoint_b,
                _t: std::marker::PhantomData,
            }))
        };
    }
    match t {
        DType::F32 => k!(f32),
        DType::F64 => k!(f64),
        DType::I32 => k!(i32),
        DType::F16 => k!(f16),
        DType::BF16 => k!(bf16),
        other => Err(Status::unimplemented(format!(
            "SparseTensorDenseMatMul does not support {other}"
        ))),
    }
}

/// The kernel TensorFlow registers on CPU: half, bfloat16, float, double, int32
/// values with int32 or int64 indices.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("SparseTensorDenseMatMul", make)
            .type_constraint(
                "T",
                &[DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32],
            )
            .type_constraint("Tindices", &[DType::I32, DType::I64]),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Result, Tensor};

    fn matmul(ix: Tensor, a_shape: &[i64], b: Tensor, adj: (bool, bool)) -> Result<Tensor> {
        let n = ix.dims()[0];
        let vals: Vec<f64> = (1..=n).map(|v| v as f64).collect();
        run_op(
            "SparseTensorDenseMatMul",
            &[
                ("adjoint_a", AttrValue::from(adj.0)),
                ("adjoint_b", AttrValue::from(adj.1)),
            ],
            vec![ix, Tensor::vector(&vals), Tensor::vector(a_shape), b],
        )
        .map(|mut v| v.remove(0))
    }

    #[test]
    fn products_with_and_without_adjoints() {
        // A = [[0, 1], [2, 0], [0, 0]] (entries 1 at (0,1), 2 at (1,0)).
        let ix = Tensor::new(&[2, 2], vec![0i64, 1, 1, 0]).unwrap();
        let b = Tensor::new(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]).unwrap();
        let y = matmul(ix.clone(), &[3, 2], b.clone(), (false, false)).unwrap();
        assert_eq!(
            y,
            Tensor::new(&[3, 2], vec![3.0f64, 4.0, 2.0, 4.0, 0.0, 0.0]).unwrap()
        );
        // Aᵀ·Bᵀ with A of shape [2, 3]: rows of the product are A's columns.
        let b3 = Tensor::new(&[1, 2], vec![5.0f64, 7.0]).unwrap();
        let y = matmul(ix.clone(), &[2, 3], b3, (true, true)).unwrap();
        assert_eq!(y, Tensor::new(&[3, 1], vec![14.0f64, 5.0, 0.0]).unwrap());
        let e = matmul(ix.clone(), &[3, 3], b.clone(), (false, false)).unwrap_err();
        assert!(e
            .message()
            .starts_with("Cannot multiply A and B because inner dimension"));
        let bad = Tensor::new(&[1, 2], vec![0i64, 5]).unwrap();
        let e = matmul(bad, &[3, 2], b, (false, false)).unwrap_err();
        assert_eq!(e.message(), "k (5) from index[0,1] out of bounds (>=2)");
    }
}
