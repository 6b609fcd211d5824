//! Ops that build matrices from their diagonals: MatrixDiag, MatrixDiagV2 and
//! MatrixDiagV3 (TensorFlow's `array_ops.cc`; `tf.eye` and `tf.linalg.diag` emit
//! MatrixDiagV3), and MatrixBandPart (`tf.linalg.band_part`: the diagonals from
//! `-num_lower` to `num_upper` kept, negative meaning all) — signatures, shape
//! functions and builders.
//!
//! `diagonal` holds diagonals `k[0]..=k[1]` of each matrix (one diagonal: shape
//! `[..., max_diag_len]`; a band: `[..., num_diags, max_diag_len]`, the highest
//! diagonal first). The output is `[..., num_rows, num_cols]`; a `-1` size is the
//! smallest that fits (both `-1`: square).

use super::const_ints;
use crate::builder::{Output, Scope};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// Registers the diagonal ops.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("MatrixDiag")
            .input("diagonal: T")
            .output("output: T")
            .attr("T: type")
            .shape_fn(matrix_diag_shape),
    );
    for name in ["MatrixDiagV2", "MatrixDiagV3"] {
        let mut b = OpDef::build(name)
            .input("diagonal: T")
            .input("k: int32")
            .input("num_rows: int32")
            .input("num_cols: int32")
            .input("padding_value: T")
            .output("output: T")
            .attr("T: type");
        if name == "MatrixDiagV3" {
            b = b.attr(
                "align: {'LEFT_RIGHT', 'RIGHT_LEFT', 'LEFT_LEFT', 'RIGHT_RIGHT'} = 'RIGHT_LEFT'",
            );
        }
        r.register(b.shape_fn(matrix_diag_shape));
    }
    r.register(
        OpDef::build("MatrixBandPart")
            .input("input: T")
            .input("num_lower: Tindex")
            .input("num_upper: Tindex")
            .output("band: T")
            .attr("T: type")
            .attr("Tindex: {int32, int64} = DT_INT64")
            .shape_fn(crate::op_def::shape_fn::unchanged),
    );
}

/// `MatrixBandPart`: the innermost matrices of `input` with the entries outside the
/// band `-num_lower ..= num_upper` (a negative bound: unbounded) zeroed.
pub fn matrix_band_part(
    s: &Scope,
    input: &Output,
    num_lower: &Output,
    num_upper: &Output,
) -> Result<Output> {
    s.op("MatrixBandPart")
        .input(input)
        .input(num_lower)
        .input(num_upper)
        .build1()
}

/// The lowest and highest diagonal, the number of rows and the number of columns
/// asked for (`-1`: derive), when the inputs holding them are constants.
fn band_and_size(c: &InferenceContext<'_>) -> Option<(i64, i64, i64, i64)> {
    if c.num_inputs() == 1 {
        return Some((0, 0, -1, -1));
    }
    let k = const_ints(c.input_tensor(1))?;
    let (lo, hi) = match k[..] {
        [d] => (d, d),
        [lo, hi] => (lo, hi),
        _ => return None,
    };
    let rows = *const_ints(c.input_tensor(2))?.first()?;
    let cols = *const_ints(c.input_tensor(3))?.first()?;
    Some((lo, hi, rows, cols))
}

fn matrix_diag_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let diag = c.input(0);
    let Some(dims) = diag.dims().map(<[Option<usize>]>::to_vec) else {
        return c.set_output(0, Shape::unknown());
    };
    if dims.is_empty() {
        return Err(Status::invalid_argument(
            "diagonal must be at least 1-dim, received shape: []",
        ));
    }
    let Some((lo, hi, rows, cols)) = band_and_size(c) else {
        // Unknown band: the rank is that of `diagonal` or one more.
        return c.set_output(0, Shape::unknown());
    };
    if lo > hi {
        return Err(Status::invalid_argument(format!(
            "lower_diag_index must not be larger than upper_diag_index: {lo} > {hi}"
        )));
    }
    let band = lo != hi;
    if band && dims.len() < 2 {
        return Err(Status::invalid_argument(
            "diagonal must be at least 2-dim when it holds several diagonals",
        ));
    }
    let max_len = dims[dims.len() - 1].map(|d| d as i64);
    let keep = dims.len() - if band { 2 } else { 1 };
    let (r, cl) = match max_len {
        Some(len) => {
            let min_rows = len - hi.min(0);
            let min_cols = len + lo.max(0);
            match (rows, cols) {
                (-1, -1) => {
                    let n = min_rows.max(min_cols);
                    (Some(n), Some(n))
                }
                (-1, c) => (Some(min_rows), Some(c)),
                (r, -1) => (Some(r), Some(min_cols)),
                (r, c) => (Some(r), Some(c)),
            }
        }
        None => ((rows >= 0).then_some(rows), (cols >= 0).then_some(cols)),
    };
    let mut out: Vec<Option<usize>> = dims[..keep].to_vec();
    out.push(r.and_then(|v| usize::try_from(v).ok()));
    out.push(cl.and_then(|v| usize::try_from(v).ok()));
    c.set_output(0, Shape::from_dims(&out))
}

#[cfg(test)]
mod tests {
    use crate::builder::{Output, Scope};
    use crate::ops::{constant, placeholder, scalar};
    use crate::{DType, Result, Shape, Tensor};

    fn diag_v3(s: &Scope, d: &Output, k: Tensor, rows: i32, cols: i32) -> Result<Output> {
        let k = constant(s, k)?;
        let (r, c, p) = (scalar(s, rows)?, scalar(s, cols)?, scalar(s, 0.0f32)?);
        s.op("MatrixDiagV3")
            .input(d)
            .input(&k)
            .input(&r)
            .input(&c)
            .input(&p)
            .build1()
    }

    #[test]
    fn matrix_diag_shapes() {
        let s = Scope::new();
        let d = placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(3)])).unwrap();
        let y = diag_v3(&s, &d, Tensor::scalar(0i32), -1, -1).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, Some(3), Some(3)]));
        let y = diag_v3(&s, &d, Tensor::scalar(1i32), -1, 5).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, Some(3), Some(5)]));
        let band = placeholder(&s, DType::F32, Shape::known(&[2, 3])).unwrap();
        // Shapes TensorFlow gives for these bands.
        let y = diag_v3(&s, &band, Tensor::vector(&[-1i32, 0]), -1, -1).unwrap();
        assert_eq!(y.shape(), Shape::known(&[3, 3]));
        let y = diag_v3(&s, &band, Tensor::vector(&[1i32, 2]), -1, -1).unwrap();
        assert_eq!(y.shape(), Shape::known(&[4, 4]));
        assert!(diag_v3(&s, &band, Tensor::vector(&[1i32, 0]), -1, -1).is_err());
        let v1 = s.op("MatrixDiag").input(&band).build1().unwrap();
        assert_eq!(v1.shape(), Shape::known(&[2, 3, 3]));
        let sc = scalar(&s, 1.0f32).unwrap();
        assert!(s.op("MatrixDiag").input(&sc).build1().is_err());
    }
}
