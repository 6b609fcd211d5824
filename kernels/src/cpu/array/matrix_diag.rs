//! `MatrixDiag`, `MatrixDiagV2` and `MatrixDiagV3`: batches of matrices built from
//! their diagonals `k[0]..=k[1]`, every other element `padding_value`.
//!
//! `diagonal` is `[..., max_diag_len]` for one diagonal and `[..., num_diags,
//! max_diag_len]` for a band, highest diagonal first. A diagonal shorter than
//! `max_diag_len` sits at the left or right of its row of `diagonal`, as `align`
//! says for superdiagonals and subdiagonals (`"RIGHT_LEFT"`: superdiagonals
//! right-aligned, subdiagonals left-aligned; MatrixDiag and MatrixDiagV2 align
//! both left). `num_rows`/`num_cols` of `-1` take the smallest size that fits;
//! both `-1` give a square matrix. Validation and messages follow TensorFlow's
//! `MatrixDiagOp`.

use std::marker::PhantomData;

use graph::{DType, Result, Status, TensorShape};

use super::elems::{dispatch_elem, int_values, Elem};
use crate::cpu::types::POD_DTYPES;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// The band and size one step asks for.
#[derive(Clone, Copy, Debug)]
struct Band {
    lower: i64,
    upper: i64,
    num_rows: i64,
    num_cols: i64,
}

/// `MatrixDiag*` of storage class `E`.
struct MatrixDiagKernel<E> {
    dtype: DType,
    left_align_super: bool,
    left_align_sub: bool,
    _e: PhantomData<fn(E)>,
}

/// The one value of a scalar (or one-element) int32 input.
fn int_input(ctx: &OpKernelContext<'_>, i: usize, what: &str) -> Result<i64> {
    let t = ctx.input(i)?;
    match int_values(t)?.first() {
        Some(&v) => Ok(v),
        None => Err(Status::invalid_argument(format!(
            "{what} must have at least one element, received shape: {}",
            t.shape()
        ))),
    }
}

fn read_band(ctx: &OpKernelContext<'_>) -> Result<Band> {
    if ctx.num_inputs() == 1 {
        return Ok(Band {
            lower: 0,
            upper: 0,
            num_rows: -1,
            num_cols: -1,
        });
    }
    let k = ctx.input(1)?;
    if k.rank() > 1 {
        return Err(Status::invalid_argument(format!(
            "diag_index must be a scalar or vector, received shape: {}",
            k.shape()
        )));
    }
    let kv = int_values(k)?;
    if k.rank() == 1 && !(1..=2).contains(&kv.len()) {
        return Err(Status::invalid_argument(format!(
            "diag_index must have only one or two elements, received {} elements.",
            kv.len()
        )));
    }
    let lower = *kv.first().ok_or_else(|| {
        Status::invalid_argument(
            "diag_index must have only one or two elements, received 0 elements.",
        )
    })?;
    let upper = kv.get(1).copied().unwrap_or(lower);
    Ok(Band {
        lower,
        upper,
        num_rows: int_input(ctx, 2, "num_rows")?,
        num_cols: int_input(ctx, 3, "num_cols")?,
    })
}

impl<E: Elem> MatrixDiagKernel<E> {
    /// Where diagonal `d`'s values start in its row of `diagonal`.
    fn content_offset(&self, d: i64, max_len: i64, rows: i64, cols: i64) -> i64 {
        let left = (d >= 0 && self.left_align_super) || (d <= 0 && self.left_align_sub);
        if left {
            return 0;
        }
        let diag_len = (rows + d.min(0)).min(cols - d.max(0));
        max_len - diag_len
    }
}

impl<E: Elem> OpKernel for MatrixDiagKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let Band {
            lower,
            upper,
            mut num_rows,
            mut num_cols,
        } = read_band(ctx)?;
        let padding = if ctx.num_inputs() > 1 {
            let p = ctx.input(4)?;
            E::view(p)?.first().cloned().ok_or_else(|| {
                Status::invalid_argument(format!(
                    "padding_value must have one element, received shape: {}",
                    p.shape()
                ))
            })?
        } else {
            E::default()
        };
        let diagonal = ctx.input(0)?;
        let dims = diagonal.dims();
        let rank = dims.len();
        if rank == 0 {
            return Err(Status::invalid_argument(format!(
                "diagonal must be at least 1-dim, received shape: {}",
                diagonal.shape()
            )));
        }
        if lower > upper {
            return Err(Status::invalid_argument(format!(
                "lower_diag_index must not be larger than upper_diag_index: {lower} > {upper}"
            )));
        }
        let num_diags = upper - lower + 1;
        if lower != upper && (rank < 2 || dims[rank - 2] as i64 != num_diags) {
            return Err(Status::invalid_argument(
                "The number of diagonals provided in the input does not match the \
                 lower_diag_index and upper_diag_index range.",
            ));
        }
        let max_len = dims[rank - 1] as i64;
        let min_rows = max_len - upper.min(0);
        let min_cols = max_len + lower.max(0);
        if num_rows != -1 && num_rows < min_rows {
            return Err(Status::invalid_argument("The number of rows is too small."));
        }
        if num_cols != -1 && num_cols < min_cols {
            return Err(Status::invalid_argument(
                "The number of columns is too small.",
            ));
        }
        match (num_rows, num_cols) {
            (-1, -1) => {
                num_rows = min_rows.max(min_cols);
                num_cols = num_rows;
            }
            (-1, _) => num_rows = min_rows,
            (_, -1) => num_cols = min_cols,
            _ => {}
        }
        if num_rows != min_rows && num_cols != min_cols {
            return Err(Status::invalid_argument(
                "The number of rows or columns is not consistent with the specified d_lower, \
                 d_upper, and diagonal.",
            ));
        }
        let keep = rank - if num_diags == 1 { 1 } else { 2 };
        let mut out_dims = dims[..keep].to_vec();
        out_dims.extend([num_rows as usize, num_cols as usize]);
        let batch: usize = dims[..keep].iter().product();
        let src = E::view(diagonal)?;
        let (rows, cols) = (num_rows as usize, num_cols as usize);
        let per_batch = (num_diags * max_len) as usize;
        let out = E::build(
            ctx.allocator(),
            self.dtype,
            TensorShape::new(&out_dims),
            |o| {
                for b in 0..batch {
                    for r in 0..rows {
                        for c in 0..cols {
                            let d = c as i64 - r as i64;
                            let slot = &mut o[(b * rows + r) * cols + c];
                            if d < lower || d > upper {
                                *slot = padding.clone();
                                continue;
                            }
                            let offset = self.content_offset(d, max_len, num_rows, num_cols);
                            let in_diag = c as i64 - d.max(0) + offset;
                            let at = b * per_batch + ((upper - d) * max_len + in_diag) as usize;
                            *slot = src.get(at).cloned().ok_or_else(|| {
                                Status::internal(format!("diagonal element {at} out of range"))
                            })?;
                        }
                    }
                }
                Ok(())
            },
        )?;
        ctx.set_output(0, out)
    }
}

fn make_matrix_diag(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    // MatrixDiag and MatrixDiagV2 have no `align` and align both kinds left.
    let align = c
        .attr::<String>("align")
        .unwrap_or_else(|_| "LEFT_LEFT".into());
    let left_align_super = align == "LEFT_LEFT" || align == "LEFT_RIGHT";
    let left_align_sub = align == "LEFT_LEFT" || align == "RIGHT_LEFT";
    dispatch_elem!(dtype, E => Ok(Box::new(MatrixDiagKernel::<E> {
        dtype,
        left_align_super,
        left_align_sub,
        _e: PhantomData,
    }) as Box<dyn OpKernel>))
}

/// Registers the MatrixDiag kernels.
pub(super) fn register(r: &mut KernelRegistry) {
    for op in ["MatrixDiag", "MatrixDiagV2", "MatrixDiagV3"] {
        r.register(KernelDef::cpu(op, make_matrix_diag).type_constraint("T", POD_DTYPES));
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Result, Tensor};

    fn diag_v3(diagonal: Tensor, k: Tensor, rows: i32, cols: i32, align: &str) -> Result<Tensor> {
        let pad = Tensor::zeros(diagonal.dtype(), [0usize; 0]);
        let attrs = [("align", AttrValue::from(align))];
        let inputs = vec![diagonal, k, Tensor::scalar(rows), Tensor::scalar(cols), pad];
        run_op("MatrixDiagV3", &attrs, inputs).map(|mut v| v.remove(0))
    }

    fn m(rows: usize, cols: usize, v: Vec<i32>) -> Tensor {
        Tensor::new(&[rows, cols], v).unwrap()
    }

    #[test]
    fn main_diagonal_and_eye() {
        let out = run_op("MatrixDiag", &[], vec![Tensor::vector(&[1.0f32, 1.0])]).unwrap();
        let eye = Tensor::new(&[2, 2], vec![1.0f32, 0.0, 0.0, 1.0]).unwrap();
        assert_eq!(out[0], eye);
        // A batch of two, on a superdiagonal of a 2x3 matrix.
        let d = Tensor::new(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
        let out = diag_v3(d, Tensor::scalar(1i32), -1, -1, "RIGHT_LEFT").unwrap();
        let want = vec![0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0];
        assert_eq!(out, Tensor::new(&[2, 3, 3], want).unwrap());
        let out = diag_v3(
            Tensor::vector(&[7i32, 8]),
            Tensor::scalar(-1i32),
            3,
            2,
            "RIGHT_LEFT",
        )
        .unwrap();
        assert_eq!(out, m(3, 2, vec![0, 0, 7, 0, 0, 8]));
    }

    #[test]
    fn bands_follow_the_alignment() {
        // TensorFlow's documented example: diagonals 1, 0, -1 of a 3x3 matrix.
        let right_left = Tensor::new(&[3, 3], vec![0i32, 1, 2, 4, 5, 6, 8, 9, 0]).unwrap();
        let out = diag_v3(
            right_left,
            Tensor::vector(&[-1i32, 1]),
            -1,
            -1,
            "RIGHT_LEFT",
        )
        .unwrap();
        let want = m(3, 3, vec![4, 1, 0, 8, 5, 2, 0, 9, 6]);
        assert_eq!(out, want);
        let left_right = Tensor::new(&[3, 3], vec![1i32, 2, 0, 4, 5, 6, 0, 8, 9]).unwrap();
        let out = diag_v3(
            left_right,
            Tensor::vector(&[-1i32, 1]),
            -1,
            -1,
            "LEFT_RIGHT",
        )
        .unwrap();
        assert_eq!(out, want);
        let left_left = Tensor::new(&[3, 3], vec![1i32, 2, 0, 4, 5, 6, 8, 9, 0]).unwrap();
        let out = diag_v3(left_left, Tensor::vector(&[-1i32, 1]), -1, -1, "LEFT_LEFT").unwrap();
        assert_eq!(out, want);
    }

    #[test]
    fn padding_and_errors() {
        let inputs = vec![
            Tensor::vector(&[1.0f64, 2.0]),
            Tensor::scalar(0i32),
            Tensor::scalar(2i32),
            Tensor::scalar(3i32),
            Tensor::scalar(-1.0f64),
        ];
        let out = run_op("MatrixDiagV2", &[], inputs).unwrap();
        let want = Tensor::new(&[2, 3], vec![1.0f64, -1.0, -1.0, -1.0, 2.0, -1.0]).unwrap();
        assert_eq!(out[0], want);
        let e = diag_v3(
            Tensor::vector(&[1i32, 2]),
            Tensor::scalar(0i32),
            1,
            -1,
            "RIGHT_LEFT",
        )
        .unwrap_err();
        assert_eq!(e.message(), "The number of rows is too small.");
        let e = diag_v3(
            Tensor::vector(&[1i32, 2]),
            Tensor::vector(&[1i32, 0]),
            -1,
            -1,
            "RIGHT_LEFT",
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "lower_diag_index must not be larger than upper_diag_index: 1 > 0"
        );
        let e = diag_v3(
            Tensor::vector(&[1i32, 2]),
            Tensor::vector(&[-1i32, 1]),
            -1,
            -1,
            "RIGHT_LEFT",
        )
        .unwrap_err();
        assert!(e.message().starts_with("The number of diagonals"), "{e}");
        let e = diag_v3(
            Tensor::scalar(1i32),
            Tensor::scalar(0i32),
            -1,
            -1,
            "RIGHT_LEFT",
        );
        assert!(e.is_err());
    }
}
