//! Ops that address slices by n-dimensional indices (TensorFlow's `array_ops.cc`):
//! `GatherNd` reads the slices `params[indices[i, :]]`, `ScatterNd` sums updates
//! into a zero tensor of a given shape, and `TensorScatterUpdate`/`Add`/`Sub` write
//! updates into a copy of a tensor — signatures, shape functions (TensorFlow's
//! `GatherNdShape` and `ScatterNdShapeHelper`, with their messages) and builder
//! functions.
//!
//! The last dimension of `indices` is the depth `r` of each index; `indices`' other
//! dimensions index the slices, each `shape[r:]` (params' or the output's).

use super::{const_ints, shape_of};
use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::{merge_shapes, shape_from_tensor, with_rank, with_rank_at_least};
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// Registers GatherNd, ScatterNd and the TensorScatter ops.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("GatherNd")
            .input("params: Tparams")
            .input("indices: Tindices")
            .output("output: Tparams")
            .attr("Tparams: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("bad_indices_policy: string = ''")
            .shape_fn(gather_nd_shape),
    );
    r.register(
        OpDef::build("ScatterNd")
            .input("indices: Tindices")
            .input("updates: T")
            .input("shape: Tindices")
            .output("output: T")
            .attr("T: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("bad_indices_policy: string = ''")
            .shape_fn(scatter_nd_shape),
    );
    for (name, ids) in [
        ("TensorScatterUpdate", "{int16, int32, int64, uint16}"),
        ("TensorScatterAdd", "{int32, int64}"),
        ("TensorScatterSub", "{int32, int64}"),
        ("TensorScatterMax", "{int32, int64}"),
        ("TensorScatterMin", "{int32, int64}"),
    ] {
        r.register(
            OpDef::build(name)
                .input("tensor: T")
                .input("indices: Tindices")
                .input("updates: T")
                .output("output: T")
                .attr("T: type")
                .attr(&format!("Tindices: {ids}"))
                .attr("bad_indices_policy: string = ''")
                .shape_fn(tensor_scatter_shape),
        );
    }
}

/// `indices.shape[:-1] + params.shape[r:]`.
fn gather_nd_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let params = c.input(0);
    let indices = with_rank_at_least(&c.input(1), 1)?;
    let (Some(p), Some(i)) = (params.dims(), indices.dims()) else {
        return c.set_output(0, Shape::unknown());
    };
    let Some(r) = i[i.len() - 1] else {
        return c.set_output(0, Shape::unknown());
    };
    if r > p.len() {
        return Err(Status::invalid_argument(format!(
            "indices.shape[-1] must be <= params.rank, but saw indices shape: {indices} and params shape: {params}"
        )));
    }
    let mut out = i[..i.len() - 1].to_vec();
    out.extend_from_slice(&p[r..]);
    c.set_output(0, shape_of(&out))
}

fn scatter_nd_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let indices = with_rank_at_least(&c.input(0), 1)?;
    let updates = with_rank_at_least(&c.input(1), 1)?;
    let rank = with_rank(&c.input(2), 1)?.dim(0);
    let out = shape_from_tensor(c.input_tensor(2), rank);
    if let Some(v) = const_ints(c.input_tensor(2)) {
        if let Some(d) = v.iter().find(|&&d| d < -1) {
            return Err(Status::invalid_argument(format!(
                "Dimension {d} must be >= 0"
            )));
        }
    }
    scatter_nd_check(&indices, &updates, &out)?;
    c.set_output(0, out)
}

fn tensor_scatter_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let out = with_rank_at_least(&c.input(0), 1)?;
    let indices = with_rank_at_least(&c.input(1), 1)?;
    scatter_nd_check(&indices, &c.input(2), &out)?;
    c.set_output(0, out)
}

fn slice_dims(s: &Shape, from: usize, to: Option<usize>) -> Shape {
    match s.dims() {
        Some(d) => {
            let to = to.unwrap_or(d.len()).min(d.len());
            shape_of(&d[from.min(to)..to])
        }
        None => Shape::unknown(),
    }
}

/// TensorFlow's `ScatterNdShapeHelper`: the outer dimensions of `indices` and
/// `updates` agree, and the slices of `updates` are the output's `shape[r:]`.
pub(crate) fn scatter_nd_check(indices: &Shape, updates: &Shape, output: &Shape) -> Result<()> {
    let count = |s: &Shape| s.num_elements();
    if count(output) == Some(0)
        && (count(indices).is_some_and(|n| n > 0) || count(updates).is_some_and(|n| n > 0))
    {
        return Err(Status::invalid_argument(
            "Indices and updates specified for empty input",
        ));
    }
    let (Some(ri), Some(ru)) = (indices.rank(), updates.rank()) else {
        return Ok(());
    };
    if ru == 0 {
        return Ok(());
    }
    let outer = ri - 1;
    let Some(ix) = indices.dim(outer) else {
        return Ok(());
    };
    let prefix_i = slice_dims(indices, 0, Some(outer));
    let prefix_u = slice_dims(updates, 0, Some(outer));
    if let Err(e) = merge_shapes(&prefix_i, &prefix_u) {
        return Err(Status::invalid_argument(format!(
            "Dimensions [0,{outer}) of indices[shape={indices}] = {prefix_i} must match dimensions [0,{outer}) of updates[shape={updates}] = {prefix_u}: {}",
            e.message()
        )));
    }
    let suffix_o = slice_dims(output, ix, None);
    let suffix_u = slice_dims(updates, outer, None);
    if let Err(e) = merge_shapes(&suffix_o, &suffix_u) {
        let ro = output.rank().map_or("?".to_owned(), |r| r.to_string());
        return Err(Status::invalid_argument(format!(
            "Dimensions [{ix},{ro}) of input[shape={output}] = {suffix_o} must match dimensions [{outer},{ru}) of updates[shape={updates}] = {suffix_u}: {}",
            e.message()
        )));
    }
    Ok(())
}

/// `GatherNd`: the slices `params[indices[..., :]]`.
pub fn gather_nd(s: &Scope, params: &Output, indices: &Output) -> Result<Output> {
    s.op("GatherNd").input(params).input(indices).build1()
}

/// `ScatterNd`: zeros of `shape` with `updates` summed in at `indices`.
pub fn scatter_nd(s: &Scope, indices: &Output, updates: &Output, shape: &Output) -> Result<Output> {
    s.op("ScatterNd")
        .input(indices)
        .input(updates)
        .input(shape)
        .build1()
}

/// `TensorScatterUpdate`/`Add`/`Sub`/`Max`/`Min` (`op`): `tensor` with `updates` written,
/// added or subtracted at `indices`.
pub fn tensor_scatter(
    s: &Scope,
    op: &str,
    tensor: &Output,
    indices: &Output,
    updates: &Output,
) -> Result<Output> {
    s.op(op)
        .input(tensor)
        .input(indices)
        .input(updates)
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{index_vector, placeholder};
    use crate::DType;

    #[test]
    fn nd_shapes() {
        let s = Scope::new();
        let p = placeholder(&s, DType::F32, Shape::known(&[3, 4, 5])).unwrap();
        let i = placeholder(&s, DType::I32, Shape::known(&[2, 6, 2])).unwrap();
        assert_eq!(
            gather_nd(&s, &p, &i).unwrap().shape(),
            Shape::known(&[2, 6, 5])
        );
        let deep = placeholder(&s, DType::I32, Shape::known(&[2, 4])).unwrap();
        assert!(gather_nd(&s, &p, &deep).is_err());
        let i = placeholder(&s, DType::I32, Shape::known(&[5, 1])).unwrap();
        let u = placeholder(&s, DType::F32, Shape::known(&[5, 3])).unwrap();
        let shape = index_vector(&s, &[7, 3]).unwrap();
        assert_eq!(
            scatter_nd(&s, &i, &u, &shape).unwrap().shape(),
            Shape::known(&[7, 3])
        );
        let bad = placeholder(&s, DType::F32, Shape::known(&[5, 2])).unwrap();
        let e = scatter_nd(&s, &i, &bad, &shape).unwrap_err();
        assert!(e
            .message()
            .starts_with("Dimensions [1,2) of input[shape=[7,3]]"));
        let t = placeholder(&s, DType::F32, Shape::known(&[6, 3])).unwrap();
        let out = tensor_scatter(&s, "TensorScatterAdd", &t, &i, &u).unwrap();
        assert_eq!(out.shape(), Shape::known(&[6, 3]));
    }
}
