//! Gradient kernels of the element-wise activations, each taking the forward
//! output `y` and the incoming gradient `dy` (TensorFlow's `SimpleBinaryOp`: the two
//! must have as many elements, no broadcasting; the result has `y`'s shape):
//!
//! - TanhGrad: `dy * (1 - y*y)`;
//! - SigmoidGrad: `dy * y * (1 - y)`;
//! - RsqrtGrad: `-0.5 * (dy * y) * (y * y)`;
//! - SqrtGrad: `(0.5 * dy) / y`;
//! - ReciprocalGrad, InvGrad: `-y * y * dy`.
//!
//! As in Eigen, the last three give 0 where `dy` is 0 (even for `y` = 0 or inf).

use std::marker::PhantomData;

use graph::{Result, Status};

use super::binary::BinaryFn;
use super::elem::FloatOps;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::KernelRegistry;

/// `y` and `dy` element-wise with `F`, into `y`'s or `dy`'s buffer when unique.
pub struct GradKernel<T, F>(PhantomData<fn(T, F)>);

impl<T, F> GradKernel<T, F> {
    /// A new kernel.
    pub fn new() -> Self {
        GradKernel(PhantomData)
    }
}

impl<T, F> Default for GradKernel<T, F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: FloatOps, F: BinaryFn<T, T>> OpKernel for GradKernel<T, F> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let mut dy = ctx.take_input(1)?;
        let mut y = ctx.take_input(0)?;
        if y.num_elements() != dy.num_elements() {
            return Err(Status::invalid_argument(format!(
                "The two arguments to a cwise op must have same number of elements, got {} and {}",
                y.num_elements(),
                dy.num_elements()
            )));
        }
        let out = if y.is_unique() {
            let ds = dy.as_slice::<T>()?;
            y.as_mut_slice::<T>()?
                .iter_mut()
                .zip(ds)
                .for_each(|(o, &d)| *o = F::apply(*o, d));
            y
        } else if dy.is_unique() {
            let ys = y.as_slice::<T>()?;
            dy.as_mut_slice::<T>()?
                .iter_mut()
                .zip(ys)
                .for_each(|(o, &v)| *o = F::apply(v, *o));
            if dy.shape() == y.shape() {
                dy
            } else {
                dy.reshaped(y.shape().clone())?
            }
        } else {
            let (ys, ds) = (y.as_slice::<T>()?, dy.as_slice::<T>()?);
            ctx.allocator().build::<T>(y.shape().clone(), |o| {
                o.iter_mut()
                    .zip(ys)
                    .zip(ds)
                    .for_each(|((o, &v), &d)| *o = F::apply(v, d));
            })?
        };
        ctx.set_output(0, out)
    }
}

#[inline(always)]
fn half<T: FloatOps>() -> T {
    T::one() / (T::one() + T::one())
}

macro_rules! grad_fn {
    ($name:ident, $doc:literal, |$y:ident, $dy:ident| $e:expr) => {
        #[doc = $doc]
        pub struct $name;
        impl<T: FloatOps> BinaryFn<T, T> for $name {
            #[inline(always)]
            fn apply($y: T, $dy: T) -> T {
                $e
            }
        }
    };
}

grad_fn!(TanhGradFn, "`dy * (1 - y*y)`.", |y, dy| dy
    * (T::one() - y * y));
grad_fn!(SigmoidGradFn, "`dy * y * (1 - y)`.", |y, dy| dy
    * y
    * (T::one() - y));
grad_fn!(
    RsqrtGradFn,
    "`-0.5 * (dy * y) * (y * y)`, 0 where `dy` is 0.",
    |y, dy| {
        if dy.is_zero() {
            T::zero()
        } else {
            -half::<T>() * (dy * y) * (y * y)
        }
    }
);
grad_fn!(
    SqrtGradFn,
    "`(0.5 * dy) / y`, 0 where `dy` is 0.",
    |y, dy| {
        if dy.is_zero() {
            T::zero()
        } else {
            (half::<T>() * dy) / y
        }
    }
);
grad_fn!(
    ReciprocalGradFn,
    "`-y * y * dy`, 0 where `dy` is 0.",
    |y, dy| {
        if dy.is_zero() {
            T::zero()
        } else {
            -y * y * dy
        }
    }
);

/// Registers the gradient kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(r, "TanhGrad", "T", floats, |T| {
        GradKernel::<T, TanhGradFn>::new()
    });
    register_typed!(r, "SigmoidGrad", "T", floats, |T| GradKernel::<
        T,
        SigmoidGradFn,
    >::new());
    register_typed!(r, "RsqrtGrad", "T", floats, |T| {
        GradKernel::<T, RsqrtGradFn>::new()
    });
    register_typed!(r, "SqrtGrad", "T", floats, |T| {
        GradKernel::<T, SqrtGradFn>::new()
    });
    for op in ["ReciprocalGrad", "InvGrad"] {
        register_typed!(r, op, "T", floats, |T| {
            GradKernel::<T, ReciprocalGradFn>::new()
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{Code, Tensor};

    fn grad(op: &str, y: Tensor, dy: Tensor) -> graph::Result<Tensor> {
        run_op(op, &[], vec![y, dy]).map(|mut v| v.remove(0))
    }

    #[test]
    fn formulas() {
        let (y, dy) = (
            Tensor::vector(&[0.5f32, 2.0]),
            Tensor::vector(&[2.0f32, 3.0]),
        );
        assert_eq!(
            grad("TanhGrad", y.clone(), dy.clone()).unwrap(),
            Tensor::vector(&[1.5f32, -9.0])
        );
        assert_eq!(
            grad("SigmoidGrad", y.clone(), dy.clone()).unwrap(),
            Tensor::vector(&[0.5f32, -6.0])
        );
        assert_eq!(
            grad("RsqrtGrad", y.clone(), dy.clone()).unwrap(),
            Tensor::vector(&[-0.125f32, -12.0])
        );
        assert_eq!(
            grad("SqrtGrad", y.clone(), dy.clone()).unwrap(),
            Tensor::vector(&[2.0f32, 0.75])
        );
        assert_eq!(
            grad("ReciprocalGrad", y.clone(), dy.clone()).unwrap(),
            Tensor::vector(&[-0.5f32, -12.0])
        );
        assert_eq!(
            grad("InvGrad", y, dy).unwrap(),
            Tensor::vector(&[-0.5f32, -12.0])
        );
    }

    #[test]
    fn zero_gradients_stay_zero() {
        let y = Tensor::vector(&[0.0f64, f64::INFINITY, 0.0]);
        let dy = Tensor::vector(&[0.0f64, 0.0, 1.0]);
        let s = grad("SqrtGrad", y.clone(), dy.clone()).unwrap();
        assert_eq!(s, Tensor::vector(&[0.0f64, 0.0, f64::INFINITY]));
        let r = grad("ReciprocalGrad", y.clone(), dy.clone()).unwrap();
        assert_eq!(r.as_slice::<f64>().unwrap()[..2], [0.0, 0.0]);
        let q = grad("RsqrtGrad", y, dy).unwrap();
        assert_eq!(q.as_slice::<f64>().unwrap()[..2], [0.0, 0.0]);
    }

    #[test]
    fn element_counts_must_match_and_y_gives_the_shape() {
        let e = grad(
            "TanhGrad",
            Tensor::vector(&[0.5f32, 2.0]),
            Tensor::scalar(1.0f32),
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message()
                .contains("must have same number of elements, got 2 and 1"),
            "{e}"
        );
        let y = Tensor::vector(&[0.0f32; 6]);
        let dy = Tensor::new(&[2, 3], vec![1.0f32; 6]).unwrap();
        let keep = y.clone();
        let out = grad("TanhGrad", y, dy).unwrap();
        assert_eq!(out, Tensor::vector(&[1.0f32; 6]));
        assert!(!out.shares_buffer_with(&keep));
        let h = grad(
            "SigmoidGrad",
            Tensor::scalar(graph::f16::from_f32(0.5)),
            Tensor::scalar(graph::f16::ONE),
        )
        .unwrap();
        assert_eq!(h, Tensor::scalar(graph::f16::from_f32(0.25)));
    }
}
