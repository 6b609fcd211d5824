//! Shape inference: the [`InferenceContext`] a [`ShapeFn`] reads input shapes (and
//! constant input values, when known) from and writes output shapes to, plus the
//! shape functions many ops share.

use crate::{AttrValue, FromAttr, NodeDef, Result, Shape, Status, Tensor};

/// Infers the output shapes of one node.
pub type ShapeFn = fn(&mut InferenceContext<'_>) -> Result<()>;

/// What a shape function sees of a node.
pub struct InferenceContext<'a> {
    node: &'a NodeDef,
    inputs: &'a [Shape],
    input_tensors: &'a [Option<Tensor>],
    outputs: Vec<Shape>,
}

impl<'a> InferenceContext<'a> {
    /// A context for `node` (attributes with defaults filled in) with these input
    /// shapes, constant input values (or `None`) and number of outputs.
    pub fn new(
        node: &'a NodeDef,
        inputs: &'a [Shape],
        input_tensors: &'a [Option<Tensor>],
        num_outputs: usize,
    ) -> InferenceContext<'a> {
        InferenceContext {
            node,
            inputs,
            input_tensors,
            outputs: vec![Shape::unknown(); num_outputs],
        }
    }

    /// The node.
    pub fn node(&self) -> &NodeDef {
        self.node
    }

    /// Reads an attribute.
    pub fn attr<T: FromAttr>(&self, name: &str) -> Result<T> {
        self.node.get_attr(name)
    }

    /// The raw attribute value, if set.
    pub fn attr_value(&self, name: &str) -> Option<&AttrValue> {
        self.node.attr.get(name)
    }

    /// The number of data inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// The number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The shape of input `i` (unknown when out of range).
    pub fn input(&self, i: usize) -> Shape {
        self.inputs.get(i).cloned().unwrap_or_default()
    }

    /// The value of input `i` when it is a known constant.
    pub fn input_tensor(&self, i: usize) -> Option<&Tensor> {
        self.input_tensors.get(i).and_then(Option::as_ref)
    }

    /// Sets the shape of output `i`.
    pub fn set_output(&mut self, i: usize, s: Shape) -> Result<()> {
        let n = self.outputs.len();
        let slot = self
            .outputs
            .get_mut(i)
            .ok_or_else(|| Status::internal(format!("output {i} of {n} set by shape fn")))?;
        *slot = s;
        Ok(())
    }

    /// The output shapes.
    pub fn into_outputs(self) -> Vec<Shape> {
        self.outputs
    }
}

/// Every output has the shape of input 0.
pub fn unchanged(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = c.input(0);
    for i in 0..c.num_outputs() {
        c.set_output(i, s.clone())?;
    }
    Ok(())
}

/// Output 0 is a scalar.
pub fn scalar(c: &mut InferenceContext<'_>) -> Result<()> {
    c.set_output(0, Shape::scalar())
}

/// Outputs have no shape (for ops with none, like `NoOp`).
pub fn no_outputs(_: &mut InferenceContext<'_>) -> Result<()> {
    Ok(())
}

/// The numpy broadcast of two partial shapes, or `InvalidArgument`.
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Result<Shape> {
    let (Some(da), Some(db)) = (a.dims(), b.dims()) else {
        return Ok(Shape::unknown());
    };
    let rank = da.len().max(db.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let x = if i + da.len() >= rank {
            da[i + da.len() - rank]
        } else {
            Some(1)
        };
        let y = if i + db.len() >= rank {
            db[i + db.len() - rank]
        } else {
            Some(1)
        };
        out.push(match (x, y) {
            (Some(1), y) => y,
            (x, Some(1)) => x,
            (Some(x), Some(y)) if x == y => Some(x),
            (Some(_), Some(_)) => {
                return Err(Status::invalid_argument(format!(
                    "incompatible shapes: {a} vs. {b}"
                )))
            }
            (Some(x), None) | (None, Some(x)) => Some(x),
            (None, None) => None,
        });
    }
    Ok(Shape::from_dims(&out))
}

/// Output 0 is the broadcast of inputs 0 and 1.
pub fn broadcast_binary(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = broadcast_shapes(&c.input(0), &c.input(1))?;
    c.set_output(0, s)
}

/// Output 0 has the shape of the `shape` attribute.
pub fn from_shape_attr(c: &mut InferenceContext<'_>) -> Result<()> {
    let s: Shape = c.attr("shape")?;
    c.set_output(0, s)
}

/// Output 0 is the shape of the `value` tensor attribute (for `Const`).
pub fn from_value_attr(c: &mut InferenceContext<'_>) -> Result<()> {
    let t: Tensor = c.attr("value")?;
    c.set_output(0, Shape::from(t.shape()))
}

/// A shape from a constant rank-1 integer tensor, as `Reshape`, `Fill` and the random
/// ops take it; unknown dimensions (-1) stay unknown.
pub fn shape_from_tensor(t: Option<&Tensor>, rank_hint: Option<usize>) -> Shape {
    let dims: Option<Vec<i64>> = t.and_then(|t| match t.dtype() {
        crate::DType::I32 => t
            .as_slice::<i32>()
            .ok()
            .map(|s| s.iter().map(|&v| v as i64).collect()),
        crate::DType::I64 => t.as_slice::<i64>().ok().map(<[i64]>::to_vec),
        _ => None,
    });
    match (dims, rank_hint) {
        (Some(d), _) => Shape::from_tf_dims(&d),
        (None, Some(r)) => Shape::unknown_with_rank(r),
        (None, None) => Shape::unknown(),
    }
}

/// `s` with rank `rank` (an unknown shape gets `rank` unknown dimensions), else
/// `InvalidArgument` as TensorFlow's `WithRank`.
pub(crate) fn with_rank(s: &Shape, rank: usize) -> Result<Shape> {
    match s.rank() {
        None => Ok(Shape::unknown_with_rank(rank)),
        Some(r) if r == rank => Ok(s.clone()),
        Some(r) => Err(Status::invalid_argument(format!(
            "Shape must be rank {rank} but is rank {r} for shape {s}"
        ))),
    }
}

/// `s` when its rank is unknown or at least `rank`, else `InvalidArgument` as
/// TensorFlow's `WithRankAtLeast`.
pub(crate) fn with_rank_at_least(s: &Shape, rank: usize) -> Result<Shape> {
    match s.rank() {
        Some(r) if r < rank => Err(Status::invalid_argument(format!(
            "Shape must be at least rank {rank} but is rank {r} for shape {s}"
        ))),
        _ => Ok(s.clone()),
    }
}

/// Merges two dimensions; `InvalidArgument` when both are known and differ
/// (TensorFlow's `Merge` of dimensions).
pub(crate) fn merge_dim(a: Option<usize>, b: Option<usize>) -> Result<Option<usize>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => Err(Status::invalid_argument(format!(
            "Dimensions must be equal, but are {x} and {y}"
        ))),
        (Some(x), _) | (None, Some(x)) => Ok(Some(x)),
        (None, None) => Ok(None),
    }
}

/// `d` when it is unknown or equals `value`, else `InvalidArgument` as TensorFlow's
/// `WithValue`.
pub(crate) fn with_value(d: Option<usize>, value: usize) -> Result<Option<usize>> {
    match d {
        Some(x) if x != value => Err(Status::invalid_argument(format!(
            "Dimension must be {value} but is {x}"
        ))),
        _ => Ok(Some(value)),
    }
}

/// `d / divisor` (unknown stays unknown), `InvalidArgument` when `divisor` is not
/// positive or, with `evenly`, does not divide `d`, as TensorFlow's `Divide`.
pub(crate) fn divide_dim(d: Option<usize>, divisor: i64, evenly: bool) -> Result<Option<usize>> {
    if divisor == 1 {
        return Ok(d);
    }
    let Some(x) = d else { return Ok(None) };
    if divisor <= 0 {
        return Err(Status::invalid_argument(format!(
            "Divisor must be positive but is {divisor}"
        )));
    }
    let divisor = divisor as usize;
    if evenly && x % divisor != 0 {
        return Err(Status::invalid_argument(format!(
            "Dimension size must be evenly divisible by {divisor} but is {x}"
        )));
    }
    Ok(Some(x / divisor))
}

/// `d * factor` (unknown stays unknown; a factor of 0 gives 0), `InvalidArgument`
/// for a negative factor, as TensorFlow's `Multiply`.
pub(crate) fn multiply_dim(d: Option<usize>, factor: i64) -> Result<Option<usize>> {
    let f = usize::try_from(factor).map_err(|_| {
        Status::invalid_argument(format!(
            "Negative dimension size caused by multiplying by {factor}"
        ))
    })?;
    Ok(match (d, f) {
        (_, 0) => Some(0),
        (Some(x), f) => Some(x.checked_mul(f).ok_or_else(|| {
            Status::invalid_argument(format!("Dimension size overflows: {x} * {f}"))
        })?),
        (None, _) => None,
    })
}

/// Merges two partial shapes dimension by dimension, with TensorFlow's `Merge`
/// messages ("Shapes must be equal rank, …", "Dimension i in both shapes must be
/// equal, …").
pub(crate) fn merge_shapes(a: &Shape, b: &Shape) -> Result<Shape> {
    let (Some(da), Some(db)) = (a.dims(), b.dims()) else {
        return Ok(if a.rank().is_some() {
            a.clone()
        } else {
            b.clone()
        });
    };
    if da.len() != db.len() {
        return Err(Status::invalid_argument(format!(
            "Shapes must be equal rank, but are {} and {}",
            da.len(),
            db.len()
        )));
    }
    let mut out = Vec::with_capacity(da.len());
    for (i, (&x, &y)) in da.iter().zip(db).enumerate() {
        out.push(merge_dim(x, y).map_err(|_| {
            Status::invalid_argument(format!(
                "Dimension {i} in both shapes must be equal, but are {} and {}. Shapes are {a} and {b}.",
                x.unwrap_or(0),
                y.unwrap_or(0)
            ))
        })?);
    }
    Ok(Shape::from_dims(&out))
}

/// TensorFlow's `MakeShapeFromShapeTensor`: input `i` is a rank-1 shape vector;
/// its value when it is a constant (`-1` entries unknown, anything below that
/// `InvalidArgument`), else a shape of as many unknown dimensions as the vector
/// has elements (unknown when that is unknown).
pub(crate) fn shape_from_shape_input(c: &InferenceContext<'_>, i: usize) -> Result<Shape> {
    let vector = with_rank(&c.input(i), 1)?;
    let values: Option<Vec<i64>> = c.input_tensor(i).and_then(|t| match t.dtype() {
        crate::DType::I32 => t
            .as_slice::<i32>()
            .ok()
            .map(|v| v.iter().map(|&d| i64::from(d)).collect()),
        crate::DType::I64 => t.as_slice::<i64>().ok().map(<[i64]>::to_vec),
        _ => None,
    });
    if let Some(bad) = values.iter().flatten().find(|&&d| d < -1) {
        return Err(Status::invalid_argument(format!(
            "Invalid value in tensor used for shape: {bad}"
        )));
    }
    Ok(match values {
        Some(v) => Shape::from_tf_dims(&v),
        None => match vector.dim(0) {
            Some(n) => Shape::unknown_with_rank(n),
            None => Shape::unknown(),
        },
    })
}

/// The dimension a scalar integer input gives (TensorFlow's
/// `MakeDimForScalarInput`): its value when the input is a known constant, else
/// unknown; a negative value is `InvalidArgument`.
pub(crate) fn dim_from_scalar_input(c: &InferenceContext<'_>, i: usize) -> Result<Option<usize>> {
    let Some(t) = c.input_tensor(i) else {
        return Ok(None);
    };
    let v = match t.dtype() {
        crate::DType::I32 => t.as_slice::<i32>()?.first().map(|&v| i64::from(v)),
        crate::DType::I64 => t.as_slice::<i64>()?.first().copied(),
        _ => None,
    };
    match v {
        Some(d) if d < 0 => Err(Status::invalid_argument(format!(
            "Dimension size, given by scalar input {i}, must be non-negative but is {d}"
        ))),
        Some(d) => Ok(Some(d as usize)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_partial_shapes() {
        let s = |d: &[Option<usize>]| Shape::from_dims(d);
        assert_eq!(
            broadcast_shapes(&s(&[Some(2), Some(1)]), &s(&[Some(3)])).unwrap(),
            s(&[Some(2), Some(3)])
        );
        assert_eq!(
            broadcast_shapes(&s(&[None, Some(3)]), &s(&[Some(1)])).unwrap(),
            s(&[None, Some(3)])
        );
        assert!(broadcast_shapes(&s(&[Some(2)]), &s(&[Some(3)])).is_err());
        assert_eq!(
            broadcast_shapes(&Shape::unknown(), &s(&[Some(3)])).unwrap(),
            Shape::unknown()
        );
        assert_eq!(
            shape_from_tensor(Some(&Tensor::vector(&[2i32, -1])), None),
            s(&[Some(2), None])
        );
    }
}
