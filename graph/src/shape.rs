//! Shapes: [`TensorShape`] (every dimension known, the shape of a tensor) and
//! [`Shape`] (TensorFlow's partial shape: unknown rank or unknown dimensions, the
//! shape of a graph edge before it runs).

use std::fmt;

use smallvec::SmallVec;

use crate::{Result, Status};

/// The most dimensions a shape may have (TensorFlow's `TensorShape::MaxDimensions`).
pub const MAX_RANK: usize = 254;

/// The most elements a shape may describe (TensorFlow counts them in an `int64`).
pub const MAX_ELEMENTS: u64 = i64::MAX as u64;

/// `InvalidArgument` unless `dims` (the known ones of a shape of `rank`) are a
/// shape TensorFlow accepts: at most [`MAX_RANK`] of them, whose running product
/// stays at most [`MAX_ELEMENTS`] (as TensorFlow's `TensorShape::AddDim` checks).
fn check_dims(rank: usize, dims: impl Iterator<Item = usize>) -> Result<()> {
    if rank > MAX_RANK {
        return Err(Status::invalid_argument(format!(
            "a shape of {rank} dimensions has more than the {MAX_RANK} allowed"
        )));
    }
    let mut product: u64 = 1;
    for d in dims {
        product = product
            .checked_mul(d as u64)
            .filter(|&p| p <= MAX_ELEMENTS)
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "a shape that is too large: more than 2**63 - 1 elements at dimension {d}"
                ))
            })?;
    }
    Ok(())
}

/// The fully known shape of a tensor. Rank 0 is a scalar. Shapes of rank up to 4
/// are stored inline and clone with a copy.
#[derive(PartialEq, Eq, Hash, Default)]
pub struct TensorShape(SmallVec<[usize; 4]>);

impl Clone for TensorShape {
    #[inline]
    fn clone(&self) -> TensorShape {
        if self.0.spilled() {
            TensorShape(self.0.clone())
        } else {
            let mut buf = [0usize; 4];
            let n = self.0.len();
            buf[..n].copy_from_slice(&self.0);
            TensorShape(SmallVec::from_buf_and_len(buf, n))
        }
    }
}

impl TensorShape {
    /// The scalar shape, as a constant.
    pub const EMPTY: TensorShape = TensorShape(SmallVec::new_const());

    /// The shape with these dimensions.
    pub fn new(dims: &[usize]) -> TensorShape {
        TensorShape(SmallVec::from_slice(dims))
    }

    /// The shape of a scalar.
    pub fn scalar() -> TensorShape {
        TensorShape(SmallVec::new())
    }

    /// The shape of a vector of `n` elements.
    pub fn vector(n: usize) -> TensorShape {
        TensorShape::new(&[n])
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The dimensions, mutably.
    pub fn dims_mut(&mut self) -> &mut SmallVec<[usize; 4]> {
        &mut self.0
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Dimension `i`.
    pub fn dim(&self, i: usize) -> usize {
        self.0[i]
    }

    /// The number of elements (1 for a scalar); `usize::MAX` when the product
    /// overflows (shapes from user input may), so it never panics and a zero
    /// dimension still gives 0. Allocation checks it with
    /// [`TensorShape::checked_num_elements`].
    pub fn num_elements(&self) -> usize {
        self.0.iter().fold(1usize, |acc, &d| acc.saturating_mul(d))
    }

    /// The number of elements, or `InvalidArgument` when it overflows `usize`.
    pub fn checked_num_elements(&self) -> Result<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| {
            acc.checked_mul(d)
                .ok_or_else(|| Status::invalid_argument(format!("shape {self} is too large")))
        })
    }

    /// `InvalidArgument` unless TensorFlow accepts this shape (see
    /// [`Shape::check_valid`]).
    pub fn check_valid(&self) -> Result<()> {
        check_dims(self.0.len(), self.0.iter().copied())
    }

    /// True for rank 0.
    pub fn is_scalar(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends a dimension.
    pub fn push(&mut self, d: usize) {
        self.0.push(d)
    }

    /// Resolves a possibly negative axis against this rank (`-1` is the last axis).
    pub fn canonical_axis(&self, axis: i64) -> Result<usize> {
        canonical_axis(axis, self.rank())
    }
}

/// Resolves a possibly negative `axis` for a tensor of `rank`, as TensorFlow does
/// (`axis` in `[-rank, rank)`).
pub fn canonical_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Status::invalid_argument(format!(
            "axis {axis} is out of range for a tensor of rank {rank}; expected [{}, {r})",
            -r
        )));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

impl fmt::Display for TensorShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for TensorShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<&[usize]> for TensorShape {
    fn from(d: &[usize]) -> TensorShape {
        TensorShape::new(d)
    }
}

impl<const N: usize> From<[usize; N]> for TensorShape {
    fn from(d: [usize; N]) -> TensorShape {
        TensorShape::new(&d)
    }
}

impl From<Vec<usize>> for TensorShape {
    fn from(d: Vec<usize>) -> TensorShape {
        TensorShape(SmallVec::from_vec(d))
    }
}

impl serde::Serialize for TensorShape {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.as_slice().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for TensorShape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(TensorShape::from(Vec::<usize>::deserialize(d)?))
    }
}

/// A partially known shape: unknown rank (`dims() == None`), or a list of dimensions
/// each known (`Some(n)`) or unknown (`None`).
///
/// In JSON it is `null` for unknown rank, else a list with `-1` for unknown
/// dimensions, as TensorFlow prints shapes.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(Option<SmallVec<[Option<usize>; 4]>>);

impl Shape {
    /// A shape of unknown rank.
    pub fn unknown() -> Shape {
        Shape(None)
    }

    /// A shape of known rank whose dimensions are all unknown.
    pub fn unknown_with_rank(rank: usize) -> Shape {
        Shape(Some(SmallVec::from_elem(None, rank)))
    }

    /// A fully known shape.
    pub fn known(dims: &[usize]) -> Shape {
        Shape(Some(dims.iter().map(|&d| Some(d)).collect()))
    }

    /// A shape from per-dimension knowledge.
    pub fn from_dims(dims: &[Option<usize>]) -> Shape {
        Shape(Some(SmallVec::from_slice(dims)))
    }

    /// A shape from TensorFlow's encoding: `-1` for an unknown dimension.
    pub fn from_tf_dims(dims: &[i64]) -> Shape {
        Shape(Some(
            dims.iter()
                .map(|&d| if d < 0 { None } else { Some(d as usize) })
                .collect(),
        ))
    }

    /// The scalar shape.
    pub fn scalar() -> Shape {
        Shape::known(&[])
    }

    /// The dimensions, or `None` for unknown rank.
    pub fn dims(&self) -> Option<&[Option<usize>]> {
        self.0.as_deref()
    }

    /// `InvalidArgument` unless TensorFlow accepts this shape: at most
    /// [`MAX_RANK`] dimensions whose known sizes multiply to at most
    /// [`MAX_ELEMENTS`].
    ///
    /// # Examples
    /// ```
    /// use actorflow_graph::Shape;
    /// assert!(Shape::from_dims(&[None, Some(1 << 40)]).check_valid().is_ok());
    /// assert!(Shape::known(&[1 << 40, 1 << 40]).check_valid().is_err());
    /// assert!(Shape::unknown_with_rank(255).check_valid().is_err());
    /// ```
    pub fn check_valid(&self) -> Result<()> {
        match self.dims() {
            None => Ok(()),
            Some(d) => check_dims(d.len(), d.iter().flatten().copied()),
        }
    }

    /// The rank, if known.
    pub fn rank(&self) -> Option<usize> {
        self.0.as_ref().map(|d| d.len())
    }

    /// Dimension `i`, if the rank is known and the dimension is.
    pub fn dim(&self, i: usize) -> Option<usize> {
        self.0.as_ref().and_then(|d| d.get(i).copied().flatten())
    }

    /// True when the rank and every dimension are known.
    pub fn is_fully_defined(&self) -> bool {
        matches!(&self.0, Some(d) if d.iter().all(Option::is_some))
    }

    /// The tensor shape, if fully defined.
    pub fn to_tensor_shape(&self) -> Option<TensorShape> {
        let d = self.0.as_ref()?;
        d.iter()
            .copied()
            .collect::<Option<SmallVec<[usize; 4]>>>()
            .map(TensorShape)
    }

    /// The number of elements, if fully defined.
    pub fn num_elements(&self) -> Option<usize> {
        self.to_tensor_shape().map(|s| s.num_elements())
    }

    /// TensorFlow's encoding: `None` for unknown rank, else dims with `-1` unknown.
    pub fn to_tf_dims(&self) -> Option<Vec<i64>> {
        self.0.as_ref().map(|d| {
            d.iter()
                .map(|x| x.map(|v| v as i64).unwrap_or(-1))
                .collect()
        })
    }

    /// True when a tensor of shape `t` has this shape.
    pub fn is_compatible_with(&self, t: &TensorShape) -> bool {
        match &self.0 {
            None => true,
            Some(d) => {
                d.len() == t.rank()
                    && d.iter()
                        .zip(t.dims())
                        .all(|(a, b)| a.is_none_or(|a| a == *b))
            }
        }
    }

    /// True when some tensor could have both shapes.
    pub fn is_compatible(&self, other: &Shape) -> bool {
        self.merge(other).is_ok()
    }

    /// The most specific shape compatible with both, or `InvalidArgument`.
    pub fn merge(&self, other: &Shape) -> Result<Shape> {
        match (&self.0, &other.0) {
            (None, _) => Ok(other.clone()),
            (_, None) => Ok(self.clone()),
            (Some(a), Some(b)) => {
                if a.len() != b.len() {
                    return Err(Status::invalid_argument(format!(
                        "shapes {self} and {other} have different ranks"
                    )));
                }
                let mut out = SmallVec::new();
                for (x, y) in a.iter().zip(b) {
                    out.push(match (x, y) {
                        (Some(x), Some(y)) if x != y => {
                            return Err(Status::invalid_argument(format!(
                                "shapes {self} and {other} are incompatible"
                            )))
                        }
                        (Some(x), _) => Some(*x),
                        (None, y) => *y,
                    });
                }
                Ok(Shape(Some(out)))
            }
        }
    }
}

impl From<&TensorShape> for Shape {
    fn from(t: &TensorShape) -> Shape {
        Shape::known(t.dims())
    }
}

impl From<TensorShape> for Shape {
    fn from(t: TensorShape) -> Shape {
        Shape::known(t.dims())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("<unknown>"),
            Some(d) => {
                f.write_str("[")?;
                for (i, x) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    match x {
                        Some(v) => write!(f, "{v}")?,
                        None => f.write_str("?")?,
                    }
                }
                f.write_str("]")
            }
        }
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Shape {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_tf_dims().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(match Option::<Vec<i64>>::deserialize(d)? {
            None => Shape::unknown(),
            Some(v) => Shape::from_tf_dims(&v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_shape_basics() {
        let s = TensorShape::new(&[2, 3, 4]);
        assert_eq!(s.num_elements(), 24);
        assert_eq!(s.to_string(), "[2,3,4]");
        assert_eq!(TensorShape::scalar().num_elements(), 1);
        assert_eq!(TensorShape::new(&[0, 5]).num_elements(), 0);
        assert_eq!(s.canonical_axis(-1).unwrap(), 2);
        assert!(s.canonical_axis(3).is_err());
        assert!(s.canonical_axis(-4).is_err());
        assert!(TensorShape::new(&[usize::MAX, 2])
            .checked_num_elements()
            .is_err());
    }

    #[test]
    fn partial_shapes_merge_and_match() {
        let a = Shape::from_dims(&[None, Some(3)]);
        let b = Shape::known(&[2, 3]);
        assert!(a.is_compatible_with(&TensorShape::new(&[7, 3])));
        assert!(!a.is_compatible_with(&TensorShape::new(&[7, 4])));
        assert!(!a.is_compatible_with(&TensorShape::new(&[3])));
        assert_eq!(a.merge(&b).unwrap(), b);
        assert!(Shape::known(&[2]).merge(&Shape::known(&[3])).is_err());
        assert!(Shape::unknown().is_compatible_with(&TensorShape::scalar()));
        assert_eq!(a.to_string(), "[?,3]");
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, "[-1,3]");
        assert_eq!(serde_json::from_str::<Shape>(&json).unwrap(), a);
        assert_eq!(
            serde_json::from_str::<Shape>("null").unwrap(),
            Shape::unknown()
        );
    }
}
