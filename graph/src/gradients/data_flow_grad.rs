//! Gradients of the data-flow ops, as TensorFlow 2.21's `data_flow_grad.py` builds
//! them:
//!
//! - `DynamicPartition`: the positions of `data`'s slices, partitioned the same
//!   way, stitch the partitions' gradients back into `data`'s layout
//!   (`ParallelDynamicStitch`), reshaped to `data`'s shape.
//! - `DynamicStitch`/`ParallelDynamicStitch`: the gradient gathered at each index
//!   tensor for its data tensor. With a repeated index every writer gets the
//!   position's gradient, though only the last one's value survives (TensorFlow
//!   2.21 does the same; later versions mask out the overwritten writers).
//!
//! Also the ops of `lookup_grad.py` (tables) and `string_ops.py`
//! (`StringToHashBucket*`) declared not differentiable.

use crate::builder::Output;
use crate::gradients::math_grad::shapes::shape_of;
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops;
use crate::{DType, Result};

type Grads = Result<Vec<Option<Output>>>;

fn dynamic_partition_grad(c: &GradContext<'_>) -> Grads {
    let s = c.scope;
    let (data, partitions) = (c.input(0)?, c.input(1)?);
    let n = c.grads.len();
    let prefix = shape_of(s, &partitions, DType::I32)?;
    let count = ops::prod_axes(s, &prefix, &[0], false)?;
    let positions = ops::range(s, &ops::scalar(s, 0i32)?, &count, &ops::scalar(s, 1i32)?)?;
    let positions = ops::reshape(s, &positions, &prefix)?;
    let partitioned = ops::dynamic_partition(s, &positions, &partitions, n)?;
    let grads = (0..n).map(|i| c.grad(i)).collect::<Result<Vec<_>>>()?;
    let stitched = ops::parallel_dynamic_stitch(s, &partitioned, &grads)?;
    let back = ops::reshape(s, &stitched, &shape_of(s, &data, DType::I32)?)?;
    Ok(vec![Some(back), None])
}

fn dynamic_stitch_grad(c: &GradContext<'_>) -> Grads {
    let n = c.inputs.len() / 2;
    let g = c.grad(0)?;
    let mut out = vec![None; n];
    for i in 0..n {
        out.push(Some(ops::gather_along(c.scope, &g, &c.input(i)?, 0)?));
    }
    Ok(out)
}

/// Registers the data-flow gradients and the tables' and string hashes'
/// non-differentiability.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("DynamicPartition", dynamic_partition_grad);
    r.register("DynamicStitch", dynamic_stitch_grad);
    r.register("ParallelDynamicStitch", dynamic_stitch_grad);
    for op in [
        "HashTableV2",
        "InitializeTableV2",
        "LookupTableFindV2",
        "LookupTableInsertV2",
        "LookupTableSizeV2",
        "StringToHashBucketFast",
        "StringToHashBucketStrong",
        "Multinomial",
    ] {
        r.not_differentiable(op);
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::Scope;
    use crate::gradients::gradients;
    use crate::{ops, DType, Shape, Tensor};

    #[test]
    fn partition_gradient_stitches_the_partitions_back() {
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F32, Shape::known(&[4, 2])).unwrap();
        let ids = ops::constant(&s, Tensor::vector(&[1i32, 0, 1, 2])).unwrap();
        let parts = ops::dynamic_partition(&s, &x, &ids, 3).unwrap();
        // Partition 2 gets no gradient: it is filled with zeros.
        let y = ops::add_n(
            &s,
            &[
                ops::sum_axes(&s, &parts[0], &[0, 1], false).unwrap(),
                ops::sum_axes(&s, &parts[1], &[0, 1], false).unwrap(),
            ],
        )
        .unwrap();
        let g = gradients(&s, &[y], &[x], None).unwrap();
        let g = g[0].as_ref().expect("a gradient");
        assert_eq!(g.shape(), Shape::known(&[4, 2]));
        let ops_used: Vec<String> = s.graph_def().node.iter().map(|n| n.op.clone()).collect();
        assert!(ops_used.iter().any(|o| o == "ParallelDynamicStitch"));
    }
}
