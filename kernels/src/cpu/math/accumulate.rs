//! CPU kernels of the scans (TensorFlow's `scan_ops.cc`): `Cumsum`/`Cumprod`,
//! running sums/products along a scalar `axis` (negative counts from the end);
//! `exclusive` starts each run at the identity, `reverse` runs from the end.
//! Integers wrap as TensorFlow's do. The segment reductions are in
//! [`segment`](super::segment).

use std::marker::PhantomData;

use graph::{Result, Status};

use super::elem::Arith;
use crate::cpu::array::elems::int_scalar;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::KernelRegistry;

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

/// Registers Cumsum and Cumprod.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(r, "Cumsum", "T", numeric, |c, T| {
        ScanKernel::<T, false>::new(c.attr("exclusive")?, c.attr("reverse")?)
    });
    register_typed!(r, "Cumprod", "T", numeric, |c, T| {
        ScanKernel::<T, true>::new(c.attr("exclusive")?, c.attr("reverse")?)
    });
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
}
