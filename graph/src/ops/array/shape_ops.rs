//! Ops about shapes and whole-tensor values: Shape, ShapeN, Size, Rank, Reshape,
//! ExpandDims, Squeeze, Fill, ZerosLike, OnesLike, BroadcastTo, BroadcastArgs,
//! BroadcastGradientArgs, InvertPermutation and ConcatOffset — signatures, shape functions and
//! builder functions.

use super::{const_ints, index_scalar, index_vector, shape_of, with_rank};
use crate::builder::{Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape, Status};

/// Registers the shape ops.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("Shape")
            .input("input: T")
            .output("output: out_type")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape_fn(shape_shape),
    );
    r.register(
        OpDef::build("ShapeN")
            .input("input: N * T")
            .output("output: N * out_type")
            .attr("N: int >= 1")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape_fn(shape_n_shape),
    );
    r.register(
        OpDef::build("Size")
            .input("input: T")
            .output("output: out_type")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("Rank")
            .input("input: T")
            .output("output: int32")
            .attr("T: type")
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("Reshape")
            .input("tensor: T")
            .input("shape: Tshape")
            .output("output: T")
            .attr("T: type")
            .attr("Tshape: {int32, int64} = DT_INT32")
            .shape_fn(reshape_shape),
    );
    r.register(
        OpDef::build("ExpandDims")
            .input("input: T")
            .input("dim: Tdim")
            .output("output: T")
            .attr("T: type")
            .attr("Tdim: {int32, int64} = DT_INT32")
            .shape_fn(expand_dims_shape),
    );
    r.register(
        OpDef::build("Squeeze")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .attr("squeeze_dims: list(int) >= 0 = []")
            .shape_fn(squeeze_shape),
    );
    r.register(
        OpDef::build("Fill")
            .input("dims: index_type")
            .input("value: T")
            .output("output: T")
            .attr("T: type")
            .attr("index_type: {int32, int64} = DT_INT32")
            .shape_fn(fill_shape),
    );
    r.register(
        OpDef::build("ZerosLike")
            .input("x: T")
            .output("y: T")
            .attr("T: type")
            .shape_fn(shape_fn::unchanged),
    );
    r.register(
        OpDef::build("OnesLike")
            .input("x: T")
            .output("y: T")
            .attr(
                "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, \
                 int64, uint64, complex64, complex128, bool}",
            )
            .shape_fn(shape_fn::unchanged),
    );
    r.register(
        OpDef::build("BroadcastTo")
            .input("input: T")
            .input("shape: Tidx")
            .output("output: T")
            .attr("T: type")
            .attr("Tidx: {int32, int64} = DT_INT32")
            .shape_fn(broadcast_to_shape_fn),
    );
    r.register(
        OpDef::build("BroadcastArgs")
            .input("s0: T")
            .input("s1: T")
            .output("r0: T")
            .attr("T: {int32, int64} = DT_INT32")
            .shape_fn(broadcast_args_shape),
    );
    r.register(
        OpDef::build("BroadcastGradientArgs")
            .input("s0: T")
            .input("s1: T")
            .output("r0: T")
            .output("r1: T")
            .attr("T: {int32, int64} = DT_INT32")
            .shape_fn(broadcast_gradient_args_shape),
    );
    r.register(
        OpDef::build("InvertPermutation")
            .input("x: T")
            .output("y: T")
            .attr("T: {int32, int64} = DT_INT32")
            .shape_fn(invert_permutation_shape),
    );
    r.register(
        OpDef::build("ConcatOffset")
            .input("concat_dim: int32")
            .input("shape: N * shape_type")
            .output("offset: N * shape_type")
            .attr("N: int >= 2")
            .attr("shape_type: {int32, int64} = DT_INT32")
            .shape_fn(concat_offset_shape),
    );
}

/// `ConcatOffset`: offset `i` has the shape of shape vector `i`.
fn concat_offset_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    for i in 0..c.num_outputs() {
        let s = c.input(i + 1);
        c.set_output(i, s)?;
    }
    Ok(())
}

fn rank_vector(s: &Shape) -> Shape {
    Shape::from_dims(&[s.rank()])
}

fn shape_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let s = rank_vector(&c.input(0));
    c.set_output(0, s)
}

fn shape_n_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    for i in 0..c.num_outputs() {
        let s = rank_vector(&c.input(i));
        c.set_output(i, s)?;
    }
    Ok(())
}

/// The output of a shape-valued input: its constant value, else a shape of the rank
/// its length gives.
fn shape_from_shape_input(c: &InferenceContext<'_>, i: usize) -> Result<Shape> {
    let arg = with_rank(&c.input(i), 1, "a shape tensor")?;
    if let Some(v) = const_ints(c.input_tensor(i)) {
        if let Some(bad) = v.iter().find(|&&d| d < -1) {
            return Err(Status::invalid_argument(format!(
                "Dimension {bad} must be >= -1"
            )));
        }
        return Ok(Shape::from_tf_dims(&v));
    }
    Ok(match arg.dim(0) {
        Some(n) => Shape::unknown_with_rank(n),
        None => Shape::unknown(),
    })
}

fn reshape_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let sizes = c.input(1);
    if let Some(r) = sizes.rank() {
        if r > 1 {
            return Err(Status::invalid_argument(format!(
                "Shape must be at most rank 1 but is rank {r} for the shape of Reshape"
            )));
        }
    }
    let Some(v) = const_ints(c.input_tensor(1)) else {
        let out = match sizes.rank() {
            Some(0) => Shape::unknown_with_rank(1),
            Some(_) => sizes
                .dim(0)
                .map_or_else(Shape::unknown, Shape::unknown_with_rank),
            None => Shape::unknown(),
        };
        return c.set_output(0, out);
    };
    let mut unknown = None;
    for (i, &d) in v.iter().enumerate() {
        if d == -1 {
            if let Some(j) = unknown {
                return Err(Status::invalid_argument(format!(
                    "Only one input size may be -1, not both {j} and {i}"
                )));
            }
            unknown = Some(i);
        } else if d < 0 {
            return Err(Status::invalid_argument(format!(
                "Size {i} must be non-negative, not {d}"
            )));
        }
    }
    let mut out: Vec<Option<usize>> = v.iter().map(|&d| usize::try_from(d).ok()).collect();
    let known_product = v
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize));
    if let (Some(n), Some(product)) = (c.input(0).num_elements(), known_product) {
        match unknown {
            None if product != n => {
                return Err(Status::invalid_argument(format!(
                    "Cannot reshape a tensor with {n} elements to shape {} ({product} elements)",
                    Shape::from_tf_dims(&v)
                )))
            }
            Some(i) if product > 0 => {
                if n % product != 0 {
                    return Err(Status::invalid_argument(format!(
                        "Input to reshape is a tensor with {n} values, but the requested shape requires a multiple of {product}"
                    )));
                }
                out[i] = Some(n / product);
            }
            _ => {}
        }
    }
    c.set_output(0, shape_of(&out))
}

fn expand_dims_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let dim = const_ints(c.input_tensor(1));
    let (Some(dims), Some(dim)) = (input.dims(), dim) else {
        let out = input
            .rank()
            .map_or_else(Shape::unknown, |r| Shape::unknown_with_rank(r + 1));
        return c.set_output(0, out);
    };
    let [d] = dim[..] else {
        return Err(Status::invalid_argument(
            "'dim' input must be a tensor with a single value",
        ));
    };
    let r = dims.len() as i64;
    if d < -1 - r || d > r {
        return Err(Status::invalid_argument(format!(
            "Tried to expand dim index {d} for tensor with {r} dimensions."
        )));
    }
    let at = if d < 0 { d + r + 1 } else { d } as usize;
    let mut out = dims.to_vec();
    out.insert(at, Some(1));
    c.set_output(0, shape_of(&out))
}

fn squeeze_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let input = c.input(0);
    let Some(dims) = input.dims() else {
        return c.set_output(0, Shape::unknown());
    };
    let rank = dims.len() as i64;
    let squeeze: Vec<i64> = c.attr("squeeze_dims")?;
    let mut wrapped = Vec::with_capacity(squeeze.len());
    for &d in &squeeze {
        if d < -rank || d >= rank {
            return Err(Status::invalid_argument(format!(
                "Tried to squeeze dim index {d} for tensor with {rank} dimensions."
            )));
        }
        wrapped.push(if d < 0 { d + rank } else { d } as usize);
    }
    let mut out = Vec::new();
    for (i, &d) in dims.iter().enumerate() {
        if !wrapped.is_empty() {
            if wrapped.contains(&i) {
                if let Some(v) = d.filter(|&v| v != 1) {
                    return Err(Status::invalid_argument(format!(
                        "Can not squeeze dim[{i}], expected a dimension of 1, got {v}"
                    )));
                }
            } else {
                out.push(d);
            }
        } else {
            match d {
                Some(1) => {}
                Some(v) => out.push(Some(v)),
                // An unknown dimension may or may not be squeezed.
                None => return c.set_output(0, Shape::unknown()),
            }
        }
    }
    c.set_output(0, shape_of(&out))
}

fn fill_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(0), 1, "Fill's dims")?;
    with_rank(&c.input(1), 0, "Fill's value")?;
    if let Some(v) = const_ints(c.input_tensor(0)) {
        if v.iter().any(|&d| d < 0) {
            return Err(Status::invalid_argument("Fill dimensions must be >= 0"));
        }
    }
    let out = shape_from_shape_input(c, 0)?;
    c.set_output(0, out)
}

fn broadcast_to_shape_fn(c: &mut InferenceContext<'_>) -> Result<()> {
    let out = shape_from_shape_input(c, 1)?;
    let (Some(od), Some(id)) = (out.dims(), c.input(0).dims().map(<[_]>::to_vec)) else {
        return c.set_output(0, out);
    };
    let mut od = od.to_vec();
    if id.len() > od.len() {
        return Err(Status::invalid_argument(format!(
            "Rank of input ({}) must be no greater than rank of output shape ({}).",
            id.len(),
            od.len()
        )));
    }
    let off = od.len() - id.len();
    for (i, d) in id.iter().enumerate() {
        if let Some(v) = d.filter(|&v| v > 1) {
            match od[off + i] {
                Some(o) if o != v => {
                    return Err(Status::invalid_argument(format!(
                        "Unable to broadcast tensor of shape {} to tensor of shape {out}",
                        c.input(0)
                    )))
                }
                _ => od[off + i] = Some(v),
            }
        }
    }
    c.set_output(0, shape_of(&od))
}

fn broadcast_args_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let x = with_rank(&c.input(0), 1, "BroadcastArgs' s0")?;
    let y = with_rank(&c.input(1), 1, "BroadcastArgs' s1")?;
    let n = match (x.dim(0), y.dim(0)) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    c.set_output(0, shape_of(&[n]))
}

fn broadcast_gradient_args_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(&c.input(0), 1, "BroadcastGradientArgs' s0")?;
    with_rank(&c.input(1), 1, "BroadcastGradientArgs' s1")?;
    c.set_output(0, shape_of(&[None]))?;
    c.set_output(1, shape_of(&[None]))
}

fn invert_permutation_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let x = with_rank(&c.input(0), 1, "InvertPermutation's x")?;
    c.set_output(0, x)
}

/// `Shape` as int32.
pub fn shape(s: &Scope, x: &Output) -> Result<Output> {
    shape_typed(s, x, DType::I32)
}

/// `Shape` with `out_type` int32 or int64.
pub fn shape_typed(s: &Scope, x: &Output, out_type: DType) -> Result<Output> {
    s.op("Shape").input(x).attr("out_type", out_type).build1()
}

/// Dimension `i` of `x` as an int32 scalar: a constant when the builder knows
/// it, else `shape(x)[i]` read at run time.
pub fn dim_size(s: &Scope, x: &Output, i: usize) -> Result<Output> {
    if let Some(d) = x.shape().dim(i) {
        return crate::ops::scalar(s, d as i32);
    }
    let shape = shape(s, x)?;
    let masks = crate::ops::StridedSliceMasks {
        shrink_axis_mask: 1,
        ..Default::default()
    };
    let i = i as i64;
    crate::ops::strided_slice_at(s, &shape, &[i], &[i + 1], &[1], &masks)
}

/// `ShapeN` (int32): the shape of every input.
pub fn shape_n(s: &Scope, xs: &[Output]) -> Result<Vec<Output>> {
    Ok(s.op("ShapeN").input_list(xs).build()?.outputs())
}

/// `Size` as int32.
pub fn size(s: &Scope, x: &Output) -> Result<Output> {
    size_typed(s, x, DType::I32)
}

/// `Size` with `out_type` int32 or int64.
pub fn size_typed(s: &Scope, x: &Output, out_type: DType) -> Result<Output> {
    s.op("Size").input(x).attr("out_type", out_type).build1()
}

/// `Rank`.
pub fn rank(s: &Scope, x: &Output) -> Result<Output> {
    s.op("Rank").input(x).build1()
}

/// `Reshape` of `x` to the shape held by `shape` (one `-1` is inferred).
pub fn reshape(s: &Scope, x: &Output, shape: &Output) -> Result<Output> {
    s.op("Reshape").input(x).input(shape).build1()
}

/// `Reshape` of `x` to constant `dims` (one `-1` is inferred).
pub fn reshape_to(s: &Scope, x: &Output, dims: &[i64]) -> Result<Output> {
    let shape = index_vector(s, dims)?;
    reshape(s, x, &shape)
}

/// `ExpandDims`: inserts a dimension of size 1 at index `axis` (a scalar tensor).
pub fn expand_dims(s: &Scope, x: &Output, axis: &Output) -> Result<Output> {
    s.op("ExpandDims").input(x).input(axis).build1()
}

/// `ExpandDims` at a constant axis.
pub fn expand_dims_at(s: &Scope, x: &Output, axis: i64) -> Result<Output> {
    let a = index_scalar(s, axis)?;
    expand_dims(s, x, &a)
}

/// `Squeeze`: removes the listed dimensions of size 1 (every one when `dims` is
/// empty).
pub fn squeeze(s: &Scope, x: &Output, dims: &[i64]) -> Result<Output> {
    s.op("Squeeze")
        .input(x)
        .attr("squeeze_dims", dims.to_vec())
        .build1()
}

/// `Fill`: a tensor of shape `dims` (a vector tensor) holding the scalar `value`.
pub fn fill(s: &Scope, dims: &Output, value: &Output) -> Result<Output> {
    s.op("Fill").input(dims).input(value).build1()
}

/// `Fill` to constant dims.
pub fn fill_to(s: &Scope, dims: &[i64], value: &Output) -> Result<Output> {
    let d = index_vector(s, dims)?;
    fill(s, &d, value)
}

/// `ZerosLike`.
pub fn zeros_like(s: &Scope, x: &Output) -> Result<Output> {
    s.op("ZerosLike").input(x).build1()
}

/// `OnesLike`.
pub fn ones_like(s: &Scope, x: &Output) -> Result<Output> {
    s.op("OnesLike").input(x).build1()
}

/// `BroadcastTo`: `x` broadcast to the shape held by `shape`.
pub fn broadcast_to(s: &Scope, x: &Output, shape: &Output) -> Result<Output> {
    s.op("BroadcastTo").input(x).input(shape).build1()
}

/// `BroadcastTo` constant dims.
pub fn broadcast_to_dims(s: &Scope, x: &Output, dims: &[i64]) -> Result<Output> {
    let d = index_vector(s, dims)?;
    broadcast_to(s, x, &d)
}

/// `BroadcastArgs`: the broadcast shape of two shape vectors.
pub fn broadcast_args(s: &Scope, s0: &Output, s1: &Output) -> Result<Output> {
    s.op("BroadcastArgs").input(s0).input(s1).build1()
}

/// `BroadcastGradientArgs`: the axes along which the gradients of two broadcast
/// operands must be summed (`r0`, `r1`).
pub fn broadcast_gradient_args(s: &Scope, s0: &Output, s1: &Output) -> Result<(Output, Output)> {
    let op = s.op("BroadcastGradientArgs").input(s0).input(s1).build()?;
    Ok((op.output(0)?, op.output(1)?))
}

/// `InvertPermutation`.
pub fn invert_permutation(s: &Scope, x: &Output) -> Result<Output> {
    s.op("InvertPermutation").input(x).build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{constant, placeholder};
    use crate::{Code, Tensor};

    fn ph(s: &Scope, dims: &[Option<usize>]) -> Output {
        placeholder(s, DType::F32, Shape::from_dims(dims)).unwrap()
    }

    #[test]
    fn shape_size_rank_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), None]);
        assert_eq!(shape(&s, &x).unwrap().shape(), Shape::known(&[2]));
        assert_eq!(shape_typed(&s, &x, DType::I64).unwrap().dtype(), DType::I64);
        assert_eq!(size(&s, &x).unwrap().shape(), Shape::scalar());
        assert_eq!(rank(&s, &x).unwrap().dtype(), DType::I32);
        let u = placeholder(&s, DType::F32, Shape::unknown()).unwrap();
        assert_eq!(shape(&s, &u).unwrap().shape(), Shape::from_dims(&[None]));
        let n = shape_n(&s, &[x.clone(), u]).unwrap();
        assert_eq!(n.len(), 2);
        assert!(shape_typed(&s, &x, DType::F32).is_err());
    }

    #[test]
    fn reshape_infers_and_checks() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), Some(6)]);
        assert_eq!(
            reshape_to(&s, &x, &[3, -1]).unwrap().shape(),
            Shape::known(&[3, 4])
        );
        assert_eq!(
            reshape_to(&s, &x, &[12]).unwrap().shape(),
            Shape::known(&[12])
        );
        let e = reshape_to(&s, &x, &[5, -1]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(reshape_to(&s, &x, &[5]).is_err());
        assert!(reshape_to(&s, &x, &[-1, -1]).is_err());
        let y = ph(&s, &[None, Some(6)]);
        assert_eq!(
            reshape_to(&s, &y, &[-1, 3]).unwrap().shape(),
            Shape::from_dims(&[None, Some(3)])
        );
        let dims = placeholder(&s, DType::I32, Shape::known(&[3])).unwrap();
        assert_eq!(
            reshape(&s, &x, &dims).unwrap().shape(),
            Shape::unknown_with_rank(3)
        );
    }

    #[test]
    fn expand_squeeze_fill_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(2), Some(1)]);
        assert_eq!(
            expand_dims_at(&s, &x, -1).unwrap().shape(),
            Shape::known(&[2, 1, 1])
        );
        assert_eq!(
            expand_dims_at(&s, &x, 0).unwrap().shape(),
            Shape::known(&[1, 2, 1])
        );
        assert!(expand_dims_at(&s, &x, 3).is_err());
        assert_eq!(squeeze(&s, &x, &[]).unwrap().shape(), Shape::known(&[2]));
        assert_eq!(squeeze(&s, &x, &[-1]).unwrap().shape(), Shape::known(&[2]));
        assert!(squeeze(&s, &x, &[0]).is_err());
        assert!(squeeze(&s, &x, &[2]).is_err());
        let v = constant(&s, Tensor::scalar(1.5f32)).unwrap();
        assert_eq!(
            fill_to(&s, &[2, 3], &v).unwrap().shape(),
            Shape::known(&[2, 3])
        );
        assert!(fill_to(&s, &[-2], &v).is_err());
        assert_eq!(zeros_like(&s, &x).unwrap().shape(), x.shape());
        assert_eq!(ones_like(&s, &x).unwrap().shape(), x.shape());
    }

    #[test]
    fn broadcast_shapes() {
        let s = Scope::new();
        let x = ph(&s, &[Some(3)]);
        assert_eq!(
            broadcast_to_dims(&s, &x, &[2, 3]).unwrap().shape(),
            Shape::known(&[2, 3])
        );
        assert!(broadcast_to_dims(&s, &x, &[2, 4]).is_err());
        assert!(broadcast_to_dims(&s, &x, &[]).is_err());
        let a = constant(&s, Tensor::vector(&[2i32, 1])).unwrap();
        let b = constant(&s, Tensor::vector(&[3i32])).unwrap();
        assert_eq!(
            broadcast_args(&s, &a, &b).unwrap().shape(),
            Shape::known(&[2])
        );
        let (r0, r1) = broadcast_gradient_args(&s, &a, &b).unwrap();
        assert_eq!(
            (r0.shape(), r1.dtype()),
            (Shape::from_dims(&[None]), DType::I32)
        );
        assert_eq!(
            invert_permutation(&s, &b).unwrap().shape(),
            Shape::known(&[1])
        );
    }
}
