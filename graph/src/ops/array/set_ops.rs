//! Set operations on vectors: ListDiff (`tf.compat.v1.setdiff1d`, which the
//! gradients of reductions over run-time axes emit), Unique and UniqueWithCounts
//! (the distinct values in order of first occurrence, each element's position
//! among them, and how often each occurs) — signatures, shape functions and
//! builders.

use super::with_rank;
use crate::builder::{Output, Scope};
use crate::op_def::{InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape};

/// Registers the set ops.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("ListDiff")
            .input("x: T")
            .input("y: T")
            .output("out: T")
            .output("idx: out_idx")
            .attr("T: type")
            .attr("out_idx: {int32, int64} = DT_INT32")
            .shape_fn(list_diff_shape),
    );
    r.register(
        OpDef::build("Unique")
            .input("x: T")
            .output("y: T")
            .output("idx: out_idx")
            .attr("T: type")
            .attr("out_idx: {int32, int64} = DT_INT32")
            .shape_fn(unique_shape),
    );
    r.register(
        OpDef::build("UniqueWithCounts")
            .input("x: T")
            .output("y: T")
            .output("idx: out_idx")
            .output("count: out_idx")
            .attr("T: type")
            .attr("out_idx: {int32, int64} = DT_INT32")
            .shape_fn(unique_shape),
    );
}

/// `Unique`: the values a vector of unknown length, the positions shaped like `x`
/// (a vector: `UniqueWithCounts` does not check, as in TensorFlow).
fn unique_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let x = c.input(0);
    c.set_output(0, Shape::unknown_with_rank(1))?;
    c.set_output(1, x.clone())?;
    if c.num_outputs() == 3 {
        return c.set_output(2, Shape::unknown_with_rank(1));
    }
    with_rank(&x, 1, "the x input of Unique")?;
    Ok(())
}

/// `Unique` (or `UniqueWithCounts` when `with_counts`): the distinct values of the
/// vector `x` in order of first occurrence, each element's index among them (of
/// `out_idx`), and (with counts) how often each occurs.
pub fn unique(s: &Scope, x: &Output, out_idx: DType, with_counts: bool) -> Result<Vec<Output>> {
    let op = if with_counts {
        "UniqueWithCounts"
    } else {
        "Unique"
    };
    Ok(s.op(op)
        .input(x)
        .attr("out_idx", out_idx)
        .build()?
        .outputs())
}

/// `ListDiff`: two vectors of a length known only when it runs.
fn list_diff_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(0), 1, "the x input of ListDiff")?;
    with_rank(&c.input(1), 1, "the y input of ListDiff")?;
    c.set_output(0, Shape::unknown_with_rank(1))?;
    c.set_output(1, Shape::unknown_with_rank(1))
}

#[cfg(test)]
mod tests {
    use crate::builder::Scope;
    use crate::ops::{placeholder, scalar};
    use crate::{DType, Shape};

    #[test]
    fn list_diff_shapes() {
        let s = Scope::new();
        let x = placeholder(&s, DType::I32, Shape::known(&[5])).unwrap();
        let y = placeholder(&s, DType::I32, Shape::from_dims(&[None])).unwrap();
        let op = s.op("ListDiff").input(&x).input(&y).build().unwrap();
        assert_eq!(op.output(0).unwrap().shape(), Shape::from_dims(&[None]));
        assert_eq!(op.output(1).unwrap().dtype(), DType::I32);
        let sc = scalar(&s, 1i32).unwrap();
        assert!(s.op("ListDiff").input(&sc).input(&y).build().is_err());
    }
}
