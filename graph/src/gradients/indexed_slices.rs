//! Sparse gradients (TensorFlow's `IndexedSlices`, `indexed_slices.py`): the
//! gradient of a `Gather` from a large table is non-zero only in the gathered
//! rows, so it is kept as those rows (`values`), their row numbers (`indices`,
//! possibly repeated) and the table's shape (`dense_shape`), never as a table of
//! zeros. A [`Gradient`] is either that or a dense tensor.
//!
//! Rules (TensorFlow's `gradients_util.py`):
//! - contributions to one tensor that are all sparse are concatenated, still
//!   sparse; a mix is made dense (`UnsortedSegmentSum`, TensorFlow's
//!   `_IndexedSlicesToTensor`) and summed with `AddN`;
//! - a gradient function that is not sparse-aware gets its output gradients
//!   dense; `Identity`, `Snapshot` and `ReadVariableOp` pass a sparse gradient
//!   through unchanged;
//! - the public dense entry points make every result dense at the end.

use crate::builder::{Output, Scope};
use crate::gradients::math_grad::shapes::constant_ints;
use crate::ops;
use crate::{DType, Result};

/// A sparse gradient: row `indices[i]` of a tensor of shape `dense_shape` gets
/// `values[i]` (rows named twice sum).
#[derive(Clone, Debug)]
pub struct IndexedSlices {
    /// The rows, shaped `[N] + dense_shape[1:]`.
    pub values: Output,
    /// Their row numbers, an int32 or int64 vector of length `N`.
    pub indices: Output,
    /// The shape of the dense tensor (an int32 or int64 vector).
    pub dense_shape: Output,
}

/// A gradient: dense, or sparse rows; see the module docs.
#[derive(Clone, Debug)]
pub enum Gradient {
    /// A tensor shaped like what it is the gradient of.
    Dense(Output),
    /// Rows of it.
    Sparse(IndexedSlices),
}

impl From<Output> for Gradient {
    fn from(o: Output) -> Gradient {
        Gradient::Dense(o)
    }
}

impl From<IndexedSlices> for Gradient {
    fn from(s: IndexedSlices) -> Gradient {
        Gradient::Sparse(s)
    }
}

impl IndexedSlices {
    /// The dense tensor: `UnsortedSegmentSum(values, indices, dense_shape[0])`
    /// (TensorFlow's `_IndexedSlicesToTensor`), in `s`.
    pub fn to_dense(&self, s: &Scope) -> Result<Output> {
        let rows = match constant_ints(s, &self.dense_shape) {
            Some(d) if !d.is_empty() => ops::index_scalar(s, d[0])?,
            _ => ops::gather_along(s, &self.dense_shape, &ops::index_scalar(s, 0)?, 0)?,
        };
        ops::unsorted_segment_sum(s, &self.values, &self.indices, &rows)
    }
}

impl Gradient {
    /// The element dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Gradient::Dense(o) => o.dtype(),
            Gradient::Sparse(x) => x.values.dtype(),
        }
    }

    /// The dense tensor (made in `s` when sparse).
    pub fn to_dense(&self, s: &Scope) -> Result<Output> {
        match self {
            Gradient::Dense(o) => Ok(o.clone()),
            Gradient::Sparse(x) => x.to_dense(s),
        }
    }

    /// The tensor when dense.
    pub fn as_dense(&self) -> Option<&Output> {
        match self {
            Gradient::Dense(o) => Some(o),
            Gradient::Sparse(_) => None,
        }
    }

    /// The rows when sparse.
    pub fn as_sparse(&self) -> Option<&IndexedSlices> {
        match self {
            Gradient::Dense(_) => None,
            Gradient::Sparse(x) => Some(x),
        }
    }

    /// A name for messages (the values' tensor when sparse).
    pub fn name(&self) -> String {
        match self {
            Gradient::Dense(o) => o.name(),
            Gradient::Sparse(x) => x.values.name(),
        }
    }

    /// The tensors this gradient is made of.
    pub(crate) fn parts(&self) -> Vec<&Output> {
        match self {
            Gradient::Dense(o) => vec![o],
            Gradient::Sparse(x) => vec![&x.values, &x.indices, &x.dense_shape],
        }
    }
}

/// Sums gradient contributions (see the module docs): one stays as is; all
/// sparse are concatenated; otherwise every one is made dense and `AddN`ed.
pub(crate) fn aggregate(s: &Scope, mut parts: Vec<Gradient>) -> Result<Option<Gradient>> {
    match parts.len() {
        0 => return Ok(None),
        1 => return Ok(parts.pop()),
        _ => {}
    }
    if parts.iter().all(|p| matches!(p, Gradient::Sparse(_))) {
        let slices: Vec<&IndexedSlices> = parts.iter().filter_map(Gradient::as_sparse).collect();
        let wide = slices.iter().any(|x| x.indices.dtype() == DType::I64);
        let mut values = Vec::with_capacity(slices.len());
        let mut indices = Vec::with_capacity(slices.len());
        for x in &slices {
            values.push(x.values.clone());
            indices.push(if wide && x.indices.dtype() != DType::I64 {
                ops::cast(s, &x.indices, DType::I64)?
            } else {
                x.indices.clone()
            });
        }
        return Ok(Some(Gradient::Sparse(IndexedSlices {
            values: ops::concat_along(s, &values, 0)?,
            indices: ops::concat_along(s, &indices, 0)?,
            dense_shape: slices[0].dense_shape.clone(),
        })));
    }
    let dense = parts
        .iter()
        .map(|p| p.to_dense(s))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Gradient::Dense(ops::add_n(s, &dense)?)))
}

/// `grads` behind one gate (TensorFlow's `control_flow_ops.tuple`): each tensor
/// of each gradient becomes an `Identity` that waits for all of them. Fewer than
/// two gradients: unchanged.
pub(crate) fn gate(s: &Scope, grads: Vec<Option<Gradient>>) -> Result<Vec<Option<Gradient>>> {
    if grads.iter().flatten().count() < 2 {
        return Ok(grads);
    }
    let s = s.with_name_scope("tuple");
    let mut g = s.op("NoOp");
    for part in grads.iter().flatten().flat_map(Gradient::parts) {
        g = g.control_input(part.op());
    }
    let group = g.build()?;
    let wait = |o: &Output| s.op("Identity").input(o).control_input(&group).build1();
    grads
        .into_iter()
        .map(|g| {
            Ok(match g {
                None => None,
                Some(Gradient::Dense(o)) => Some(Gradient::Dense(wait(&o)?)),
                Some(Gradient::Sparse(x)) => Some(Gradient::Sparse(IndexedSlices {
                    values: wait(&x.values)?,
                    indices: wait(&x.indices)?,
                    dense_shape: x.dense_shape,
                })),
            })
        })
        .collect()
}

/// Whether `op`'s gradient is its output gradient, passed to input 0 as is (so
/// a sparse one stays sparse).
pub(crate) fn passes_slices(op: &str) -> bool {
    matches!(op, "Identity" | "Snapshot" | "ReadVariableOp")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gradients::{gradients, sparse_gradients};
    use crate::{Shape, Tensor};

    #[test]
    fn gathers_give_rows_and_mixed_uses_are_dense() {
        let s = Scope::new();
        let table = ops::placeholder(&s, DType::F32, Shape::known(&[6, 2])).unwrap();
        let axis = ops::scalar(&s, 0i32).unwrap();
        let ids = ops::constant(&s, Tensor::vector(&[1i32, 4, 1])).unwrap();
        let a = ops::gather(&s, &table, &ids, &axis).unwrap();
        let b = ops::gather(&s, &table, &ids, &axis).unwrap();
        let g = sparse_gradients(&s, &[a.clone(), b], std::slice::from_ref(&table), None).unwrap();
        let Some(Gradient::Sparse(x)) = &g[0] else {
            panic!("two gathers give rows: {g:?}");
        };
        assert_eq!(x.values.op().op_type(), "ConcatV2");
        let dense = gradients(
            &s,
            std::slice::from_ref(&a),
            std::slice::from_ref(&table),
            None,
        )
        .unwrap();
        assert_eq!(
            dense[0].as_ref().unwrap().op().op_type(),
            "UnsortedSegmentSum"
        );
        let c = ops::mul(&s, &table, &table).unwrap();
        let g = sparse_gradients(&s, &[a, c], &[table], None).unwrap();
        let Some(Gradient::Dense(d)) = &g[0] else {
            panic!("a dense use makes the sum dense: {g:?}");
        };
        assert_eq!(d.op().op_type(), "AddN");
    }
}
