//! `DynamicPartition`: splits the slices of `data` by the int32 ids in
//! `partitions` (whose shape prefixes `data`'s) into `num_partitions` outputs;
//! `outputs[p]` holds the slices whose id is `p`, in their order in `data`, and has
//! shape `[count(p)] + data.shape[partitions.rank:]`. An id outside
//! `[0, num_partitions)` is `InvalidArgument` naming its coordinates, as in
//! TensorFlow's kernel.

use std::marker::PhantomData;

use graph::{DType, Result, Status, TensorShape};

use crate::cpu::array::elems::{coords_string, dispatch_elem, Elem, POD_STRING_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

struct DynamicPartitionKernel<E> {
    dtype: DType,
    num_partitions: usize,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for DynamicPartitionKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (data, partitions) = (ctx.input(0)?, ctx.input(1)?);
        if !data.dims().starts_with(partitions.dims()) {
            return Err(Status::invalid_argument(format!(
                "data.shape must start with partitions.shape, got data.shape = {}, \
                 partitions.shape = {}",
                data.shape(),
                partitions.shape()
            )));
        }
        let ids = partitions.as_slice::<i32>()?;
        let n = self.num_partitions;
        // Where each partition's slices come from, in order.
        let mut sources: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, &p) in ids.iter().enumerate() {
            let slot = usize::try_from(p).ok().and_then(|p| sources.get_mut(p));
            match slot {
                Some(v) => v.push(i),
                None => {
                    return Err(Status::invalid_argument(format!(
                        "partitions{} = {p} is not in [0, {n})",
                        coords_string(partitions.dims(), i)
                    )))
                }
            }
        }
        let suffix = &data.dims()[partitions.rank()..];
        let slice: usize = suffix.iter().product();
        let src = E::view(data)?;
        let mut outputs = Vec::with_capacity(n);
        for rows in &sources {
            let mut dims = vec![rows.len()];
            dims.extend_from_slice(suffix);
            let out = E::build(
                ctx.allocator(),
                self.dtype,
                TensorShape::new(&dims),
                |out| {
                    for (k, &i) in rows.iter().enumerate() {
                        out[k * slice..(k + 1) * slice]
                            .clone_from_slice(&src[i * slice..(i + 1) * slice]);
                    }
                    Ok(())
                },
            )?;
            outputs.push(out);
        }
        for (p, out) in outputs.into_iter().enumerate() {
            ctx.set_output(p, out)?;
        }
        Ok(())
    }
}

fn make_partition(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let dtype: DType = c.attr("T")?;
    let n: i64 = c.attr("num_partitions")?;
    let num_partitions = usize::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| {
        Status::invalid_argument(format!("num_partitions must be at least 1, got {n}"))
    })?;
    dispatch_elem!(dtype, E => Ok(Box::new(DynamicPartitionKernel::<E> {
        dtype,
        num_partitions,
        _e: PhantomData,
    }) as Box<dyn OpKernel>))
}

/// Registers the partition kernel (every dtype TensorFlow's CPU kernel takes that
/// actorflow has: the POD types, strings and resource handles).
pub fn register_all_kernels(r: &mut KernelRegistry) {
    let mut types = POD_STRING_DTYPES.to_vec();
    types.push(DType::Resource);
    r.register(KernelDef::cpu("DynamicPartition", make_partition).type_constraint("T", &types));
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_node;
    use graph::{AttrValue, Code, NodeDef, Result, Tensor};

    /// The kernel alone (no shape function in front, as TensorFlow's eager mode).
    fn partition(data: Tensor, ids: Tensor, n: i64) -> Result<Vec<Tensor>> {
        let node = NodeDef::new("p", "DynamicPartition")
            .with_input("d")
            .with_input("i")
            .with_attr("T", AttrValue::from(data.dtype()))
            .with_attr("num_partitions", AttrValue::from(n));
        run_node(node, vec![data, ids])
    }

    #[test]
    fn splits_slices_by_id_in_order() {
        let data = Tensor::new(&[4, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        let out = partition(data, Tensor::vector(&[1i32, 0, 1, 1]), 3).unwrap();
        assert_eq!(out[0], Tensor::new(&[1, 2], vec![3.0f32, 4.0]).unwrap());
        assert_eq!(
            out[1],
            Tensor::new(&[3, 2], vec![1.0f32, 2.0, 5.0, 6.0, 7.0, 8.0]).unwrap()
        );
        assert_eq!(out[2].dims(), &[0, 2]);
        // Element-wise ids (partitions of data's full shape), strings.
        let words = Tensor::from_strings(&[2, 2], vec!["a", "b", "c", "d"]).unwrap();
        let ids = Tensor::new(&[2, 2], vec![0i32, 1, 1, 0]).unwrap();
        let out = partition(words, ids, 2).unwrap();
        assert_eq!(out[0], Tensor::from_strings(&[2], vec!["a", "d"]).unwrap());
        assert_eq!(out[1], Tensor::from_strings(&[2], vec!["b", "c"]).unwrap());
    }

    #[test]
    fn bad_ids_and_shapes_are_invalid_arguments() {
        let data = Tensor::new(&[2, 2], vec![1i64, 2, 3, 4]).unwrap();
        let ids = Tensor::new(&[2, 2], vec![0i32, 1, 2, 0]).unwrap();
        let e = partition(data.clone(), ids, 2).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message().contains("partitions[1,0] = 2 is not in [0, 2)"),
            "{e}"
        );
        let e = partition(data, Tensor::vector(&[0i32, 1, 0]), 2).unwrap_err();
        assert!(
            e.message()
                .contains("data.shape must start with partitions.shape"),
            "{e}"
        );
        let e = partition(Tensor::scalar(1.0f32), Tensor::scalar(-1i32), 2).unwrap_err();
        assert!(
            e.message().contains("partitions = -1 is not in [0, 2)"),
            "{e}"
        );
    }
}
