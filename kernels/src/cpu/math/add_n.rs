//! `AddN`: the element-wise sum of N same-shaped tensors, added left to right as
//! TensorFlow does (`((x0 + x1) + x2) + …`, integers wrapping). One input is
//! forwarded; otherwise the sum is written into the buffer of a uniquely held input
//! when there is one. The sum is computed in cache-sized blocks, each accumulated
//! over all inputs before it is stored, so any input's buffer can receive it.

use std::marker::PhantomData;

use graph::{Result, Status};
use smallvec::SmallVec;

use super::elem::Arith;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::KernelRegistry;
use crate::Entry;

/// Elements summed per block (on the stack).
const BLOCK: usize = 512;

/// `AddN` for element type `T`.
pub struct AddNKernel<T> {
    name: String,
    _t: PhantomData<fn(T)>,
}

impl<T> AddNKernel<T> {
    /// A kernel for the node `name` (named in shape errors).
    pub fn new(name: &str) -> Self {
        AddNKernel {
            name: name.to_owned(),
            _t: PhantomData,
        }
    }
}

/// `out = sum(inputs)` where input `reused` (if any) is already in `out`.
fn sum_into<T: Arith>(out: &mut [T], inputs: &[&[T]], reused: Option<usize>) {
    let total = out.len();
    let mut acc = [T::default(); BLOCK];
    let mut start = 0;
    while start < total {
        let end = (start + BLOCK).min(total);
        let acc = &mut acc[..end - start];
        for (i, src) in inputs.iter().enumerate() {
            let src = if reused == Some(i) {
                &out[start..end]
            } else {
                &src[start..end]
            };
            if i == 0 {
                acc.copy_from_slice(src);
            } else {
                acc.iter_mut().zip(src).for_each(|(a, &x)| *a = a.tf_add(x));
            }
        }
        out[start..end].copy_from_slice(acc);
        start = end;
    }
}

impl<T: Arith> OpKernel for AddNKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs();
        if n == 1 {
            let x = ctx.take_input(0)?;
            return ctx.set_output(0, x);
        }
        let shape = ctx.input(0)?.shape().clone();
        for i in 1..n {
            let s = ctx.input(i)?.shape();
            if s != &shape {
                return Err(Status::invalid_argument(format!(
                    "Inputs to operation {} of type AddN must have the same size and shape.  Input 0: {shape} != input {i}: {s}",
                    self.name
                )));
            }
        }
        let reused = (0..n).find(|&i| match ctx.input_entry(i) {
            Some(Entry::Value(t)) => t.is_unique(),
            _ => false,
        });
        let mut out = match reused {
            Some(k) => ctx.take_input(k)?,
            None => ctx.allocate(T::DTYPE, shape)?,
        };
        {
            let inputs: SmallVec<[&[T]; 8]> = (0..n)
                .map(|i| {
                    if reused == Some(i) {
                        Ok(&[][..])
                    } else {
                        ctx.input(i)?.as_slice::<T>()
                    }
                })
                .collect::<Result<_>>()?;
            sum_into(out.as_mut_slice::<T>()?, &inputs, reused);
        }
        ctx.set_output(0, out)
    }
}

/// Registers the AddN kernel.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(r, "AddN", "T", numeric, |c, T| AddNKernel::<T>::new(
        c.name()
    ));
}

#[cfg(test)]
mod tests {
    use crate::testutil::{run_node, run_op_lists};
    use graph::{Code, DType, NodeDef, Tensor};

    fn add_n(xs: Vec<Tensor>) -> graph::Result<Tensor> {
        run_op_lists("AddN", &[], vec![xs], Some(&[true])).map(|mut v| v.remove(0))
    }

    #[test]
    fn sums_in_order() {
        let xs = vec![
            Tensor::vector(&[1.0f32, 2.0]),
            Tensor::vector(&[1.0f32, 2.0]),
            Tensor::vector(&[3.0f32, 4.0]),
        ];
        assert_eq!(add_n(xs).unwrap(), Tensor::vector(&[5.0f32, 8.0]));
        // Left to right: (1e8 + -1e8) + 1 = 1, not 1e8 + (-1e8 + 1) = 0.
        let xs = vec![
            Tensor::scalar(1e8f32),
            Tensor::scalar(-1e8f32),
            Tensor::scalar(1.0f32),
        ];
        assert_eq!(add_n(xs).unwrap(), Tensor::scalar(1.0f32));
        let xs = vec![
            Tensor::scalar(i32::MAX),
            Tensor::scalar(1i32),
            Tensor::scalar(1i32),
        ];
        assert_eq!(add_n(xs).unwrap(), Tensor::scalar(i32::MIN + 1));
        let x = Tensor::new(&[2, 3], (0..6).map(|v| v as f64).collect()).unwrap();
        assert_eq!(add_n(vec![x.clone()]).unwrap(), x);
        let big: Vec<Tensor> = (0..11)
            .map(|k| Tensor::new(&[1000], vec![k as i64; 1000]).unwrap())
            .collect();
        assert!(add_n(big)
            .unwrap()
            .as_slice::<i64>()
            .unwrap()
            .iter()
            .all(|&v| v == 55));
        let e = add_n(vec![
            Tensor::zeros(DType::F32, [0, 2]),
            Tensor::zeros(DType::F32, [0, 2]),
        ])
        .unwrap();
        assert_eq!(e.dims(), &[0, 2]);
    }

    #[test]
    fn shapes_must_match() {
        let e = add_n(vec![Tensor::vector(&[1.0f32, 2.0]), Tensor::scalar(1.0f32)]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let node = NodeDef::new("sum", "AddN")
            .with_input("a")
            .with_input("b")
            .with_attr("N", 2i64)
            .with_attr("T", DType::F32);
        let e = run_node(
            node,
            vec![
                Tensor::vector(&[1.0f32, 2.0]),
                Tensor::vector(&[1.0f32, 2.0, 3.0]),
            ],
        )
        .unwrap_err();
        assert!(
            e.message().contains("Inputs to operation sum of type AddN must have the same size and shape.  Input 0: [2] != input 1: [3]"),
            "{e}"
        );
    }

    #[test]
    fn writes_into_a_unique_input() {
        let a = Tensor::new(&[700], vec![1.0f32; 700]).unwrap();
        let b = Tensor::new(&[700], vec![2.0f32; 700]).unwrap();
        let c = Tensor::new(&[700], vec![4.0f32; 700]).unwrap();
        let keep_a = a.clone();
        let ptr = b.as_bytes().unwrap().as_ptr();
        let out = add_n(vec![a, b, c]).unwrap();
        // a is shared, b is unique and found first.
        assert_eq!(out.as_bytes().unwrap().as_ptr(), ptr);
        assert!(out.as_slice::<f32>().unwrap().iter().all(|&v| v == 7.0));
        assert!(keep_a.as_slice::<f32>().unwrap().iter().all(|&v| v == 1.0));
    }
}
