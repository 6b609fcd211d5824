//! `TopKV2` (the `k` largest entries of each last-axis row and their indices,
//! ties to the lower index) and `InTopKV2` (whether each target's prediction is
//! among its row's `k` largest) — TensorFlow's `nn_ops.cc` signatures, shape
//! functions and builders.

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{dim_from_scalar_input, merge_dim, with_rank, with_rank_at_least};
use crate::op_def::{InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape, Status};

/// Registers TopKV2 and InTopKV2.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("TopKV2")
            .input("input: T")
            .input("k: Tk")
            .output("values: T")
            .output("indices: index_type")
            .attr("sorted: bool = true")
            .attr(
                "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, \
                 uint32, uint64}",
            )
            .attr("Tk: {int16, int32, int64} = DT_INT32")
            .attr("index_type: {int16, int32, int64} = DT_INT32")
            .shape_fn(top_k_shape),
    );
    r.register(
        OpDef::build("InTopKV2")
            .input("predictions: float")
            .input("targets: T")
            .input("k: T")
            .output("precision: bool")
            .attr("T: {int32, int64} = DT_INT32")
            .shape_fn(in_top_k_shape),
    );
}

/// `input.shape[:-1] + [k]`.
fn top_k_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = with_rank_at_least(&c.input(0), 1)?;
    let k = dim_from_scalar_input(c, 1)?;
    let out = match input.dims() {
        None => Shape::unknown(),
        Some(d) => {
            let last = d[d.len() - 1];
            if let (Some(n), Some(k)) = (last, k) {
                if n < k {
                    return Err(Status::invalid_argument(format!(
                        "input must have last dimension >= k = {k} but is {n}"
                    )));
                }
            }
            let mut out = d[..d.len() - 1].to_vec();
            out.push(k);
            Shape::from_dims(&out)
        }
    };
    c.set_output(0, out.clone())?;
    c.set_output(1, out)
}

/// `[batch]`, from `predictions` (a matrix) and `targets` (a vector).
fn in_top_k_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let p = with_rank(&c.input(0), 2)?;
    let t = with_rank(&c.input(1), 1)?;
    let batch = merge_dim(p.dim(0), t.dim(0))?;
    c.set_output(0, Shape::from_dims(&[batch]))
}

/// `TopKV2`: `(values, indices)` of the `k` largest entries of each row along the
/// last axis (`sorted`: in descending order; ties to the lower index), the indices
/// of `index_type`.
pub fn top_k(
    s: &Scope,
    input: &Output,
    k: &Output,
    sorted: bool,
    index_type: DType,
) -> Result<(Output, Output)> {
    let op = s
        .op("TopKV2")
        .input(input)
        .input(k)
        .attr("sorted", sorted)
        .attr("index_type", index_type)
        .build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `InTopKV2`: whether `predictions[i, targets[i]]` is among the `k` largest of row
/// `i` (false when a prediction of the row is not finite or the target is out of
/// range).
pub fn in_top_k(s: &Scope, predictions: &Output, targets: &Output, k: &Output) -> Result<Output> {
    s.op("InTopKV2")
        .input(predictions)
        .input(targets)
        .input(k)
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{placeholder, scalar};

    #[test]
    fn top_k_shapes() {
        let s = Scope::new();
        let x = placeholder(&s, DType::F32, Shape::from_dims(&[Some(2), None, Some(6)])).unwrap();
        let k = scalar(&s, 3i32).unwrap();
        let (v, i) = top_k(&s, &x, &k, true, DType::I64).unwrap();
        assert_eq!(v.shape(), Shape::from_dims(&[Some(2), None, Some(3)]));
        assert_eq!(i.dtype(), DType::I64);
        let big = scalar(&s, 7i32).unwrap();
        assert!(top_k(&s, &x, &big, true, DType::I32).is_err());
        let p = placeholder(&s, DType::F32, Shape::known(&[4, 6])).unwrap();
        let t = placeholder(&s, DType::I32, Shape::from_dims(&[None])).unwrap();
        let one = scalar(&s, 1i32).unwrap();
        assert_eq!(
            in_top_k(&s, &p, &t, &one).unwrap().shape(),
            Shape::known(&[4])
        );
    }
}
