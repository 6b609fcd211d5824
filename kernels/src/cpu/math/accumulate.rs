//! CPU kernels of the ops that accumulate along an axis (TensorFlow's
//! `scan_ops.cc` and `segment_reduction_ops_impl.h`):
//!
//! - `Cumsum`/`Cumprod`: running sums/products along a scalar `axis` (negative
//!   counts from the end); `exclusive` starts each run at the identity, `reverse`
//!   runs from the end. Integers wrap as TensorFlow's do.
//! - `UnsortedSegmentSum`: `output[id] += data[j]` for each leading index `j` of
//!   `segment_ids`, rows of `num_segments` starting at zero; negative ids are
//!   dropped, ids at or past `num_segments` are an `InvalidArgument` error.

use std::marker::PhantomData;

use graph::{DType, Result, Status, TensorShape};

use super::elem::Arith;
use crate::cpu::array::elems::{dispatch_index, int_scalar, IndexElem, INDEX_DTYPES};
use crate::cpu::types::NUMERIC_DTYPES;
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// `Cumsum` (`PROD` false) or `Cumprod` (`PROD` true).
struct ScanKernel<T, const PROD: bool> {
    exclusive: bool,
    reverse: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: Arith, const PROD: bool> ScanKernel<T, PROD> {
    fn new(exclusive: bool, reverse: bool) -> Self {
        ScanKernel {
            exclusive,
            reverse,
            _t: PhantomData,
        }
    }
}

impl<T: Arith, const PROD: bool> OpKernel for ScanKernel<T, PROD> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let axis_t = ctx.input(1)?;
        if axis_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "ScanOp: axis must be a scalar, not {}",
                axis_t.shape()
            )));
        }
        let axis = int_scalar(axis_t)?;
        let r = x.rank() as i64;
        if axis < -r || axis >= r {
            return Err(Status::invalid_argument(format!(
                "ScanOp: Expected scan axis in the range [{}, {r}), but got {axis}",
                -r
            )));
        }
        let axis = axis.rem_euclid(r) as usize;
        let dims = x.dims();
        let len = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        let outer: usize = dims[..axis].iter().product();
        let src = x.as_slice::<T>()?;
        let (identity, op): (T, fn(T, T) -> T) = if PROD {
            (T::one(), T::tf_mul)
        } else {
            (T::zero(), T::tf_add)
        };
        let (exclusive, reverse) = (self.exclusive, self.reverse);
        let out = ctx.allocator().build::<T>(x.shape().clone(), |o| {
            for b in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| {
                        let k = if reverse { len - 1 - k } else { k };
                        (b * len + k) * inner + i
                    };
                    let mut acc = identity;
                    for k in 0..len {
                        let p = at(k);
                        if exclusive {
                            o[p] = acc;
                            acc = op(acc, src[p]);
                        } else {
                            acc = op(acc, src[p]);
                            o[p] = acc;
                        }
                    }
                }
            }
        });
        ctx.set_output(0, out?)
    }
}

/// `UnsortedSegmentSum` for element type `T` and id type `I`.
struct UnsortedSegmentSumKernel<T, I>(PhantomData<fn(T, I)>);

impl<T: Arith, I: IndexElem> OpKernel for UnsortedSegmentSumKernel<T, I> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let data = ctx.input(0)?;
        let ids = ctx.input(1)?;
        let n_t = ctx.input(2)?;
        if n_t.rank() != 0 {
            return Err(Status::invalid_argument(format!(
                "num_segments should be a scalar, not shape {}",
                n_t.shape()
            )));
        }
        let n = int_scalar(n_t)?;
        let n = usize::try_from(n).map_err(|_| {
            Status::invalid_argument(format!("Input num_segments == {n} must be non-negative."))
        })?;
        let (dd, di) = (data.dims(), ids.dims());
        if di.len() > dd.len() || dd[..di.len()] != *di {
            return Err(Status::invalid_argument(format!(
                "data.shape = {} does not start with segment_ids.shape = {}",
                data.shape(),
                ids.shape()
            )));
        }
        let mut out_dims = vec![n];
        out_dims.extend_from_slice(&dd[di.len()..]);
        let inner: usize = dd[di.len()..].iter().product();
        let idv = ids.as_slice::<I>()?;
        if let Some(j) = idv.iter().position(|v| v.to_i64() >= n as i64) {
            return Err(Status::invalid_argument(format!(
                "segment_ids[{j}] = {} is out of range [0, {n})",
                idv[j].to_i64()
            )));
        }
        let src = data.as_slice::<T>()?;
        let out = ctx
            .allocator()
            .build::<T>(TensorShape::from(out_dims), |o| {
                for (j, id) in idv.iter().enumerate() {
                    let Ok(row) = usize::try_from(id.to_i64()) else {
                        continue;
                    };
                    let (d, s) = (
                        &mut o[row * inner..(row + 1) * inner],
                        &src[j * inner..(j + 1) * inner],
                    );
                    for (a, &b) in d.iter_mut().zip(s) {
                        *a = a.tf_add(b);
                    }
                }
            });
        ctx.set_output(0, out?)
    }
}

/// Registers Cumsum, Cumprod and UnsortedSegmentSum.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(r, "Cumsum", "T", numeric, |c, T| {
        ScanKernel::<T, false>::new(c.attr("exclusive")?, c.attr("reverse")?)
    });
    register_typed!(r, "Cumprod", "T", numeric, |c, T| {
        ScanKernel::<T, true>::new(c.attr("exclusive")?, c.attr("reverse")?)
    });
    r.register(
        KernelDef::cpu("UnsortedSegmentSum", |c| {
            let ti: DType = c.attr("Tindices")?;
            dispatch_numeric!(c.attr::<DType>("T")?, T => {
                dispatch_index!(ti, I => Ok(Box::new(UnsortedSegmentSumKernel::<T, I>(PhantomData)) as Box<dyn OpKernel>))
            })
        })
        .type_constraint("T", NUMERIC_DTYPES)
        .type_constraint("Tindices", INDEX_DTYPES),
    );
}

#[cfg(test)]
mod tests {
    use graph::{AttrValue, Code, Tensor};

    use crate::testutil::run_op;

    fn scan(
        op: &str,
        x: Tensor,
        axis: i32,
        exclusive: bool,
        reverse: bool,
    ) -> graph::Result<Tensor> {
        let attrs = [
            ("exclusive", AttrValue::from(exclusive)),
            ("reverse", AttrValue::from(reverse)),
        ];
        Ok(run_op(op, &attrs, vec![x, Tensor::scalar(axis)])?.remove(0))
    }

    #[test]
    fn cumsum_and_cumprod_along_each_axis() {
        let x = Tensor::new(&[2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let f = |t: Tensor| t.as_slice::<f64>().unwrap().to_vec();
        assert_eq!(
            f(scan("Cumsum", x.clone(), 1, false, false).unwrap()),
            [1.0, 3.0, 6.0, 4.0, 9.0, 15.0]
        );
        assert_eq!(
            f(scan("Cumsum", x.clone(), -1, true, false).unwrap()),
            [0.0, 1.0, 3.0, 0.0, 4.0, 9.0]
        );
        assert_eq!(
            f(scan("Cumsum", x.clone(), 1, false, true).unwrap()),
            [6.0, 5.0, 3.0, 15.0, 11.0, 6.0]
        );
        assert_eq!(
            f(scan("Cumsum", x.clone(), 0, true, true).unwrap()),
            [4.0, 5.0, 6.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(
            f(scan("Cumprod", x.clone(), 1, false, false).unwrap()),
            [1.0, 2.0, 6.0, 4.0, 20.0, 120.0]
        );
        assert_eq!(
            f(scan("Cumprod", x.clone(), 1, true, true).unwrap()),
            [6.0, 3.0, 1.0, 30.0, 6.0, 1.0]
        );
        assert_eq!(
            f(scan("Cumprod", x.clone(), 0, false, false).unwrap()),
            [1.0, 2.0, 3.0, 4.0, 10.0, 18.0]
        );
        let i = Tensor::vector(&[i32::MAX, 1]);
        let out = scan("Cumsum", i, 0, false, false).unwrap();
        assert_eq!(
            out.as_slice::<i32>().unwrap(),
            &[i32::MAX, i32::MIN],
            "wraps"
        );
        let e = scan("Cumsum", x.clone(), 2, false, false).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_op("Cumsum", &[], vec![x, Tensor::vector(&[0i32])]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn unsorted_segment_sum_drops_negative_ids() {
        let data = Tensor::new(&[4, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        let ids = Tensor::vector(&[2i64, 0, 2, -1]);
        let out = run_op(
            "UnsortedSegmentSum",
            &[],
            vec![data.clone(), ids, Tensor::scalar(3i32)],
        )
        .unwrap()
        .remove(0);
        assert_eq!(out.dims(), &[3, 2]);
        assert_eq!(
            out.as_slice::<f32>().unwrap(),
            &[3.0, 4.0, 0.0, 0.0, 6.0, 8.0]
        );
        // Two leading id dimensions.
        let ids = Tensor::new(&[2, 2], vec![1i32, 1, 0, 1]).unwrap();
        let d = Tensor::new(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
        let out = run_op(
            "UnsortedSegmentSum",
            &[],
            vec![d, ids, Tensor::scalar(2i64)],
        )
        .unwrap()
        .remove(0);
        assert_eq!(out.as_slice::<i32>().unwrap(), &[3, 7]);
        let e = run_op(
            "UnsortedSegmentSum",
            &[],
            vec![
                data.clone(),
                Tensor::vector(&[0i32, 3, 0, 0]),
                Tensor::scalar(3i32),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("out of range"), "{}", e.message());
        let e = run_op(
            "UnsortedSegmentSum",
            &[],
            vec![
                data.clone(),
                Tensor::vector(&[0i32, 1]),
                Tensor::scalar(3i32),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_op(
            "UnsortedSegmentSum",
            &[],
            vec![data, Tensor::vector(&[0i32; 4]), Tensor::scalar(-1i32)],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }
}
