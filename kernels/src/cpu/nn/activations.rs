//! Element-wise activation kernels and their gradients: `Relu`, `Relu6`, `Elu`,
//! `Selu`, `Softplus`, `Softsign`, `LeakyRelu` and the matching `*Grad` ops.
//!
//! [`UnaryKernel`] and [`GradKernel`] are generic over the element type and the
//! function, picked once when the kernel is built; they write into an input's
//! buffer when it is uniquely held (TensorFlow's buffer forwarding). The formulas
//! are TensorFlow's (`relu_op_functor.h`, `softplus_op.h`, `softsign_op.h`),
//! including how NaN propagates (`Relu(NaN) = NaN`, `ReluGrad(NaN, x <= 0) = NaN`).

use std::marker::PhantomData;

use graph::{bf16, f16, DType, Result, Status, Tensor, TensorType};

use crate::allocator::Allocator;
use crate::cpu::nn::NnFloat;
use crate::cpu::types::{Numeric, FLOAT_DTYPES, NUMERIC_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use crate::{dispatch_float, dispatch_numeric};

/// An activation: `y = apply(x, param)`, `param` read once from the node.
pub trait UnaryFn<T>: Send + Sync + 'static {
    /// The kernel's constant (`alpha`, a threshold), read when it is built.
    fn param(_c: &OpKernelConstruction<'_>) -> Result<T>;
    /// The activation of one element.
    fn apply(x: T, param: T) -> T;
}

/// An activation gradient: `backprop = apply(gradient, x, param)`.
pub trait GradFn<T>: Send + Sync + 'static {
    /// The kernel's constant, read when it is built.
    fn param(_c: &OpKernelConstruction<'_>) -> Result<T>;
    /// The backprop of one element from its gradient and feature (or output).
    fn apply(g: T, x: T, param: T) -> T;
}

/// Applies `F` element-wise to input 0.
pub struct UnaryKernel<T, F> {
    param: T,
    _f: PhantomData<fn(F)>,
}

/// Applies `F` element-wise to inputs 0 (gradients) and 1 (features), which must
/// have the same shape.
pub struct GradKernel<T, F> {
    param: T,
    op: String,
    _f: PhantomData<fn(F)>,
}

/// `f` over `x`, in `x`'s buffer when it is uniquely held.
pub fn map_unary<T: TensorType>(
    alloc: Allocator<'_>,
    mut x: Tensor,
    f: impl Fn(T) -> T,
) -> Result<Tensor> {
    if x.is_unique() {
        for v in x.as_mut_slice::<T>()? {
            *v = f(*v);
        }
        return Ok(x);
    }
    let src = x.as_slice::<T>()?;
    alloc.build::<T>(x.shape().clone(), |o| {
        for (o, &v) in o.iter_mut().zip(src) {
            *o = f(v);
        }
    })
}

impl<T: TensorType, F: UnaryFn<T>> OpKernel for UnaryKernel<T, F> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.take_input(0)?;
        let p = self.param;
        let out = map_unary::<T>(ctx.allocator(), x, |v| F::apply(v, p))?;
        ctx.set_output(0, out)
    }
}

impl<T: TensorType, F: GradFn<T>> OpKernel for GradKernel<T, F> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (g, x) = (ctx.input(0)?, ctx.input(1)?);
        if g.shape() != x.shape() {
            return Err(Status::invalid_argument(format!(
                "Inputs to operation {op} of type {op} must have the same size and shape.  \
                 Input 0: {} != input 1: {}",
                g.shape(),
                x.shape(),
                op = self.op
            )));
        }
        let x = ctx.take_input(1)?;
        let mut g = ctx.take_input(0)?;
        let p = self.param;
        let out = if g.is_unique() {
            let xs = x.as_slice::<T>()?;
            for (o, &v) in g.as_mut_slice::<T>()?.iter_mut().zip(xs) {
                *o = F::apply(*o, v, p);
            }
            g
        } else {
            let (gs, xs) = (g.as_slice::<T>()?, x.as_slice::<T>()?);
            ctx.allocator().build::<T>(g.shape().clone(), |o| {
                for ((o, &gv), &xv) in o.iter_mut().zip(gs).zip(xs) {
                    *o = F::apply(gv, xv, p);
                }
            })?
        };
        ctx.set_output(0, out)
    }
}

/// An activation defined for every float type.
pub trait FloatUnary: UnaryFn<f32> + UnaryFn<f64> + UnaryFn<f16> + UnaryFn<bf16> {}
impl<F: UnaryFn<f32> + UnaryFn<f64> + UnaryFn<f16> + UnaryFn<bf16>> FloatUnary for F {}

/// An activation defined for every real type.
pub trait RealUnary:
    FloatUnary
    + UnaryFn<i8>
    + UnaryFn<i16>
    + UnaryFn<i32>
    + UnaryFn<i64>
    + UnaryFn<u8>
    + UnaryFn<u16>
    + UnaryFn<u32>
    + UnaryFn<u64>
{
}
impl<F> RealUnary for F where
    F: FloatUnary
        + UnaryFn<i8>
        + UnaryFn<i16>
        + UnaryFn<i32>
        + UnaryFn<i64>
        + UnaryFn<u8>
        + UnaryFn<u16>
        + UnaryFn<u32>
        + UnaryFn<u64>
{
}

/// A gradient defined for every float type.
pub trait FloatGrad: GradFn<f32> + GradFn<f64> + GradFn<f16> + GradFn<bf16> {}
impl<F: GradFn<f32> + GradFn<f64> + GradFn<f16> + GradFn<bf16>> FloatGrad for F {}

/// A gradient defined for every real type.
pub trait RealGrad:
    FloatGrad
    + GradFn<i8>
    + GradFn<i16>
    + GradFn<i32>
    + GradFn<i64>
    + GradFn<u8>
    + GradFn<u16>
    + GradFn<u32>
    + GradFn<u64>
{
}
impl<F> RealGrad for F where
    F: FloatGrad
        + GradFn<i8>
        + GradFn<i16>
        + GradFn<i32>
        + GradFn<i64>
        + GradFn<u8>
        + GradFn<u16>
        + GradFn<u32>
        + GradFn<u64>
{
}

fn unary<T: TensorType, F: UnaryFn<T>>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(UnaryKernel::<T, F> {
        param: F::param(c)?,
        _f: PhantomData,
    }))
}

fn grad<T: TensorType, F: GradFn<T>>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(GradKernel::<T, F> {
        param: F::param(c)?,
        op: c.node.op.clone(),
        _f: PhantomData,
    }))
}

fn float_unary<F: FloatUnary>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_float!(t, T => unary::<T, F>(c))
}

fn real_unary<F: RealUnary>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => unary::<T, F>(c))
}

fn float_grad<F: FloatGrad>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_float!(t, T => grad::<T, F>(c))
}

fn real_grad<F: RealGrad>(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => grad::<T, F>(c))
}

fn six<T: Numeric>() -> T {
    T::from_u8(6).unwrap_or_else(T::zero)
}

fn indicator<T: Numeric>(b: bool) -> T {
    if b {
        T::one()
    } else {
        T::zero()
    }
}

/// TensorFlow's SELU `scale`.
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;
/// TensorFlow's SELU `scale * alpha`.
const SELU_SCALE_ALPHA: f64 = 1.758_099_340_847_376_9;

macro_rules! activation {
    ($(#[$m:meta])* $name:ident, $bound:ident,
     param: |$c:ident| $param:expr,
     forward: |$x:ident, $p:ident| $e:expr) => {
        $(#[$m])*
        pub struct $name;
        impl<T: $bound> UnaryFn<T> for $name {
            fn param($c: &OpKernelConstruction<'_>) -> Result<T> {
                $param
            }
            #[inline(always)]
            fn apply($x: T, $p: T) -> T {
                $e
            }
        }
    };
}

macro_rules! gradient {
    ($(#[$m:meta])* $name:ident, $bound:ident,
     param: |$c:ident| $param:expr,
     backward: |$g:ident, $x:ident, $p:ident| $e:expr) => {
        $(#[$m])*
        pub struct $name;
        impl<T: $bound> GradFn<T> for $name {
            fn param($c: &OpKernelConstruction<'_>) -> Result<T> {
                $param
            }
            #[inline(always)]
            fn apply($g: T, $x: T, $p: T) -> T {
                $e
            }
        }
    };
}

activation!(
    /// `max(x, 0)`, NaN propagating.
    Relu, Numeric, param: |_c| Ok(T::zero()),
    forward: |x, _p| if x < T::zero() { T::zero() } else { x }
);
activation!(
    /// `min(max(x, 0), 6)`, NaN propagating.
    Relu6, Numeric, param: |_c| Ok(T::zero()),
    forward: |x, _p| if x < T::zero() { T::zero() } else if x > six::<T>() { six::<T>() } else { x }
);
activation!(
    /// `exp(x) - 1` for negative `x`, else `x`.
    Elu, NnFloat, param: |_c| Ok(T::zero()),
    forward: |x, _p| if x < T::zero() { x.exp() - T::one() } else { x }
);
activation!(
    /// `scale_alpha * (exp(x) - 1)` for negative `x`, else `scale * x`.
    Selu, NnFloat, param: |_c| Ok(T::zero()),
    forward: |x, _p| if x < T::zero() {
        T::constant(SELU_SCALE_ALPHA) * (x.exp() - T::one())
    } else {
        T::constant(SELU_SCALE) * x
    }
);
activation!(
    /// `log1p(exp(x))`, with `x` above `-threshold` and `exp(x)` below `threshold`,
    /// `threshold = log(epsilon) + 2` (the kernel's parameter).
    Softplus, NnFloat, param: |_c| Ok(T::epsilon().ln() + T::constant(2.0)),
    forward: |x, threshold| if x > -threshold {
        x
    } else if x < threshold {
        x.exp()
    } else {
        x.exp().ln_1p()
    }
);
activation!(
    /// `x / (|x| + 1)`.
    Softsign, NnFloat, param: |_c| Ok(T::zero()),
    forward: |x, _p| x / (x.abs() + T::one())
);
activation!(
    /// `x` where `x > 0`, else `alpha * x` (`alpha` may exceed 1 or be negative).
    LeakyRelu, NnFloat, param: |c| Ok(T::from_attr_f32(c.attr::<f32>("alpha")?)),
    forward: |x, alpha| if x > T::zero() { x } else { x * alpha }
);

gradient!(
    /// `g * (x > 0)`.
    ReluGrad, Numeric, param: |_c| Ok(T::zero()),
    backward: |g, x, _p| g * indicator::<T>(x > T::zero())
);
gradient!(
    /// `g * (0 < x < 6)`.
    Relu6Grad, Numeric, param: |_c| Ok(T::zero()),
    backward: |g, x, _p| g * indicator::<T>(x > T::zero() && x < six::<T>())
);
gradient!(
    /// `(y + 1) * g` for negative Elu outputs `y`, else `g`.
    EluGrad, NnFloat, param: |_c| Ok(T::zero()),
    backward: |g, y, _p| if y < T::zero() { (y + T::one()) * g } else { g }
);
gradient!(
    /// `g * (y + scale_alpha)` for negative Selu outputs `y`, else `g * scale`.
    SeluGrad, NnFloat, param: |_c| Ok(T::zero()),
    backward: |g, y, _p| if y < T::zero() {
        g * (y + T::constant(SELU_SCALE_ALPHA))
    } else {
        g * T::constant(SELU_SCALE)
    }
);
gradient!(
    /// `g / (exp(-x) + 1)`.
    SoftplusGrad, NnFloat, param: |_c| Ok(T::zero()),
    backward: |g, x, _p| g / ((-x).exp() + T::one())
);
gradient!(
    /// `g / (|x| + 1)^2`.
    SoftsignGrad, NnFloat, param: |_c| Ok(T::zero()),
    backward: |g, x, _p| {
        let d = x.abs() + T::one();
        g / (d * d)
    }
);
gradient!(
    /// `g` where `x > 0`, else `g * alpha`.
    LeakyReluGrad, NnFloat, param: |c| Ok(T::from_attr_f32(c.attr::<f32>("alpha")?)),
    backward: |g, x, alpha| if x > T::zero() { g } else { g * alpha }
);

/// Registers the activation kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    let n = NUMERIC_DTYPES;
    let f = FLOAT_DTYPES;
    r.register(KernelDef::cpu("Relu", real_unary::<Relu>).type_constraint("T", n));
    r.register(KernelDef::cpu("Relu6", real_unary::<Relu6>).type_constraint("T", n));
    r.register(KernelDef::cpu("Elu", float_unary::<Elu>).type_constraint("T", f));
    r.register(KernelDef::cpu("Selu", float_unary::<Selu>).type_constraint("T", f));
    r.register(KernelDef::cpu("Softplus", float_unary::<Softplus>).type_constraint("T", f));
    r.register(KernelDef::cpu("Softsign", float_unary::<Softsign>).type_constraint("T", f));
    r.register(KernelDef::cpu("LeakyRelu", float_unary::<LeakyRelu>).type_constraint("T", f));
    r.register(KernelDef::cpu("ReluGrad", real_grad::<ReluGrad>).type_constraint("T", n));
    r.register(KernelDef::cpu("Relu6Grad", real_grad::<Relu6Grad>).type_constraint("T", n));
    r.register(KernelDef::cpu("EluGrad", float_grad::<EluGrad>).type_constraint("T", f));
    r.register(KernelDef::cpu("SeluGrad", float_grad::<SeluGrad>).type_constraint("T", f));
    r.register(KernelDef::cpu("SoftplusGrad", float_grad::<SoftplusGrad>).type_constraint("T", f));
    r.register(KernelDef::cpu("SoftsignGrad", float_grad::<SoftsignGrad>).type_constraint("T", f));
    r.register(
        KernelDef::cpu("LeakyReluGrad", float_grad::<LeakyReluGrad>).type_constraint("T", f),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{f16, AttrValue, Code, Tensor};

    fn unary(op: &str, x: &[f32]) -> Vec<f32> {
        let out = run_op(op, &[], vec![Tensor::vector(x)]).unwrap();
        out[0].as_slice::<f32>().unwrap().to_vec()
    }

    #[test]
    fn relu_family() {
        let x = [-2.0f32, -0.0, 0.5, 7.0, f32::NAN];
        let r = unary("Relu", &x);
        assert_eq!(&r[..4], &[0.0, 0.0, 0.5, 7.0]);
        assert!(r[4].is_nan());
        let r = unary("Relu6", &x);
        assert_eq!(&r[..4], &[0.0, 0.0, 0.5, 6.0]);
        assert!(r[4].is_nan());
        let out = run_op("Relu", &[], vec![Tensor::vector(&[-3i8, 4])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[0i8, 4]));
        let out = run_op("Relu6", &[], vec![Tensor::vector(&[200u8, 4])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[6u8, 4]));
        let a = [("alpha", AttrValue::F(0.5))];
        let out = run_op("LeakyRelu", &a, vec![Tensor::vector(&[-4.0f32, 3.0])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[-2.0f32, 3.0]));
        // The default alpha is the float 0.2, converted to the element type.
        let out = run_op("LeakyRelu", &[], vec![Tensor::vector(&[-1.0f64])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[-(0.2f32 as f64)]));
    }

    #[test]
    fn smooth_activations() {
        let e = unary("Elu", &[-1.0, 2.0]);
        assert!((e[0] - (-0.632_120_56)).abs() < 1e-6 && e[1] == 2.0);
        let s = unary("Selu", &[-1.0, 2.0]);
        assert!((s[0] - (-1.111_330_7)).abs() < 1e-6 && (s[1] - 2.101_402).abs() < 1e-6);
        // Softplus: x above -threshold (13.94), exp(x) below threshold.
        let p = unary("Softplus", &[0.0, 20.0, -20.0, 1.0]);
        assert!((p[0] - std::f32::consts::LN_2).abs() < 1e-7);
        assert_eq!(p[1], 20.0);
        assert_eq!(p[2], (-20.0f32).exp());
        assert!((p[3] - 1.313_261_7).abs() < 1e-6);
        assert_eq!(unary("Softsign", &[-3.0, 1.0]), vec![-0.75, 0.5]);
        // half rounds after each operation.
        let out = run_op("Elu", &[], vec![Tensor::vector(&[f16::from_f32(-1.0)])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[f16::from_f32(-0.632)]));
    }

    #[test]
    fn gradients() {
        let g = Tensor::vector(&[1.0f32, 2.0, 3.0, f32::NAN]);
        let x = Tensor::vector(&[-1.0f32, 0.0, 5.0, -1.0]);
        let r = run_op("ReluGrad", &[], vec![g.clone(), x.clone()]).unwrap();
        let r = r[0].as_slice::<f32>().unwrap();
        assert_eq!(&r[..3], &[0.0, 0.0, 3.0]);
        assert!(r[3].is_nan(), "NaN * 0 stays NaN, as in TensorFlow");
        let x6 = Tensor::vector(&[3.0f32, 6.0, 5.9, 0.1]);
        let r = run_op("Relu6Grad", &[], vec![Tensor::vector(&[1.0f32; 4]), x6]).unwrap();
        assert_eq!(r[0], Tensor::vector(&[1.0f32, 0.0, 1.0, 1.0]));
        let r = run_op(
            "EluGrad",
            &[],
            vec![
                Tensor::vector(&[2.0f32, 2.0]),
                Tensor::vector(&[-0.5f32, 1.0]),
            ],
        )
        .unwrap();
        assert_eq!(r[0], Tensor::vector(&[1.0f32, 2.0]));
        let r = run_op(
            "SoftplusGrad",
            &[],
            vec![Tensor::vector(&[2.0f64]), Tensor::vector(&[0.0f64])],
        )
        .unwrap();
        assert_eq!(r[0], Tensor::vector(&[1.0f64]));
        let r = run_op(
            "SoftsignGrad",
            &[],
            vec![Tensor::vector(&[8.0f32]), Tensor::vector(&[-1.0f32])],
        )
        .unwrap();
        assert_eq!(r[0], Tensor::vector(&[2.0f32]));
        let a = [("alpha", AttrValue::F(0.25))];
        let r = run_op(
            "LeakyReluGrad",
            &a,
            vec![
                Tensor::vector(&[4.0f32, 4.0]),
                Tensor::vector(&[-1.0f32, 1.0]),
            ],
        )
        .unwrap();
        assert_eq!(r[0], Tensor::vector(&[1.0f32, 4.0]));
        let r = run_op(
            "ReluGrad",
            &[],
            vec![Tensor::vector(&[5i64, 6]), Tensor::vector(&[1i64, -1])],
        )
        .unwrap();
        assert_eq!(r[0], Tensor::vector(&[5i64, 0]));
    }

    #[test]
    fn errors_and_empty_inputs() {
        let e = run_op(
            "ReluGrad",
            &[],
            vec![Tensor::vector(&[1.0f32; 3]), Tensor::vector(&[1.0f32; 2])],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_op("Elu", &[], vec![Tensor::vector(&[1i32])]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let empty = Tensor::zeros(graph::DType::F32, [0, 3]);
        let out = run_op("Selu", &[], vec![empty.clone()]).unwrap();
        assert_eq!(out[0], empty);
        let out = run_op("SeluGrad", &[], vec![empty.clone(), empty.clone()]).unwrap();
        assert_eq!(out[0], empty);
    }

    #[test]
    fn writes_into_a_unique_input() {
        let x = Tensor::zeros(graph::DType::F32, [64]);
        let ptr = x.as_bytes().unwrap().as_ptr();
        let y = super::map_unary::<f32>(crate::Allocator::unlimited(), x, |v| v - 1.0).unwrap();
        assert_eq!(y.as_bytes().unwrap().as_ptr(), ptr);
        let shared = Tensor::zeros(graph::DType::F32, [64]);
        let keep = shared.clone();
        let y =
            super::map_unary::<f32>(crate::Allocator::unlimited(), shared, |v| v - 1.0).unwrap();
        assert!(keep.as_slice::<f32>().unwrap().iter().all(|&v| v == 0.0));
        assert!(y.as_slice::<f32>().unwrap().iter().all(|&v| v == -1.0));
    }
}
