//! Ops that accumulate along an axis (TensorFlow's `math_ops.cc`): the scans
//! `Cumsum` and `Cumprod` (with `exclusive` and `reverse`). The gradient of `Prod`
//! uses two `Cumprod`s. The segment reductions live in `segment`.

use crate::builder::{Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::ops::array::with_rank;
use crate::ops::NUMERIC_TYPES;
use crate::{OpRegistry, Result};

/// Registers Cumsum and Cumprod.
pub(super) fn register_ops(r: &OpRegistry) {
    for name in ["Cumsum", "Cumprod"] {
        r.register(
            OpDef::build(name)
                .input("x: T")
                .input("axis: Tidx")
                .output("out: T")
                .attr("exclusive: bool = false")
                .attr("reverse: bool = false")
                .attr(&format!("T: {NUMERIC_TYPES}"))
                .attr("Tidx: {int32, int64} = DT_INT32")
                .shape_fn(scan_shape),
        );
    }
}

/// The scans: `x`'s shape; `axis` must be a scalar.
fn scan_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(1), 0, "the scan's axis")?;
    shape_fn::unchanged(c)
}

fn scan(
    s: &Scope,
    op: &str,
    x: &Output,
    axis: &Output,
    exclusive: bool,
    reverse: bool,
) -> Result<Output> {
    s.op(op)
        .input(x)
        .input(axis)
        .attr("exclusive", exclusive)
        .attr("reverse", reverse)
        .build1()
}

/// `Cumsum`: running sums of `x` along the scalar `axis`; `exclusive` leaves each
/// element out of its own sum, `reverse` runs from the end.
pub fn cumsum(
    s: &Scope,
    x: &Output,
    axis: &Output,
    exclusive: bool,
    reverse: bool,
) -> Result<Output> {
    scan(s, "Cumsum", x, axis, exclusive, reverse)
}

/// `Cumprod`: running products of `x` along the scalar `axis` (see [`cumsum`]).
pub fn cumprod(
    s: &Scope,
    x: &Output,
    axis: &Output,
    exclusive: bool,
    reverse: bool,
) -> Result<Output> {
    scan(s, "Cumprod", x, axis, exclusive, reverse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{placeholder, scalar};
    use crate::{DType, Shape};

    #[test]
    fn accumulate_shapes() {
        let s = Scope::new();
        let x = placeholder(&s, DType::F32, Shape::known(&[2, 3])).unwrap();
        let a = scalar(&s, 1i32).unwrap();
        assert_eq!(
            cumsum(&s, &x, &a, false, true).unwrap().shape(),
            Shape::known(&[2, 3])
        );
        let v = placeholder(&s, DType::I32, Shape::known(&[2])).unwrap();
        assert!(
            cumprod(&s, &x, &v, false, false).is_err(),
            "axis must be a scalar"
        );
    }
}
