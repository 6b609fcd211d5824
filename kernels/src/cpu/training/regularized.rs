//! The L1/L2-regularised optimizer updates: FTRL-proximal (`ApplyFtrl`,
//! `ApplyFtrlV2`) and the forward-backward splitting ones
//! (`ApplyProximalGradientDescent`, `ApplyProximalAdagrad`), as dense
//! [`Update`]s and as the per-element math their sparse kernels share, in
//! TensorFlow's operation order (`training_ops.cc`).

use crate::cpu::training::update::{Update, Vals};
use crate::cpu::types::FloatType;

/// `-1`, `0` or `1` as `x` is negative, zero (or NaN) or positive (Eigen's
/// `sign`).
fn sign<T: FloatType>(x: T) -> T {
    if x > T::zero() {
        T::one()
    } else if x < T::zero() {
        -T::one()
    } else {
        T::zero()
    }
}

/// The proximal step of forward-backward splitting: `prox = var - lr * grad`
/// shrunk towards zero by `lr * l1` (when `l1 > 0`) and scaled by
/// `1 / (1 + l2 * lr)`.
pub fn proximal<T: FloatType>(var: T, grad: T, lr: T, l1: T, l2: T) -> T {
    let prox = var - grad * lr;
    let denom = T::one() + l2 * lr;
    if l1 > T::zero() {
        sign(prox) * (prox.abs() - lr * l1).max(T::zero()) / denom
    } else {
        prox / denom
    }
}

/// `ApplyProximalGradientDescent` (`rest = [alpha, l1, l2, delta]`, variables
/// `[var]`): `var = proximal(var - alpha * delta)`.
pub struct ProximalGradientDescent;

impl<T: FloatType> Update<T> for ProximalGradientDescent {
    fn order(&self) -> &'static [usize] {
        &[0]
    }

    fn stage(&self, _k: usize, var: &mut [T], _vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
        let [lr, l1, l2, ..] = *rest else {
            return;
        };
        for (v, &g) in var.iter_mut().zip(grad) {
            *v = proximal(*v, g, lr, l1, l2);
        }
    }
}

/// `ApplyProximalAdagrad` (`rest = [lr, l1, l2, grad]`, variables
/// `[var, accum]`): `accum += grad²`, then the proximal step with the Adagrad
/// learning rate `lr / sqrt(accum)`.
pub struct ProximalAdagrad;

impl<T: FloatType> Update<T> for ProximalAdagrad {
    fn order(&self) -> &'static [usize] {
        &[1, 0]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
        let [lr, l1, l2, ..] = *rest else {
            return;
        };
        if k == 1 {
            for (a, &g) in dst.iter_mut().zip(grad) {
                *a = *a + g * g;
            }
        } else {
            for ((v, &g), &a) in dst.iter_mut().zip(grad).zip(vals[1]) {
                *v = proximal(*v, g, lr * (T::one() / a.sqrt()), l1, l2);
            }
        }
    }
}

/// The scalars of an FTRL update.
#[derive(Clone, Copy, Debug)]
pub struct FtrlParams<T> {
    /// The learning rate.
    pub lr: T,
    /// L1 regularisation.
    pub l1: T,
    /// L2 (stabilisation) regularisation.
    pub l2: T,
    /// L2 shrinkage (`ApplyFtrlV2`; zero for `ApplyFtrl`).
    pub l2_shrinkage: T,
    /// The learning-rate power (non-positive).
    pub lr_power: T,
    /// `ApplyFtrlV2`: the gradient gains `2 * l2_shrinkage * var`.
    pub v2: bool,
    /// `multiply_linear_by_lr`: the linear term is kept multiplied by `lr`.
    pub linear_by_lr: bool,
}

impl<T: FloatType> FtrlParams<T> {
    /// `accum ^ -lr_power` (a square root for TensorFlow's special case -0.5).
    fn accum_power(&self, a: T) -> T {
        if self.lr_power == T::from(-0.5).unwrap_or_else(T::zero) {
            a.sqrt()
        } else {
            a.powf(-self.lr_power)
        }
    }

    /// The new linear term from the old one, the gradient, the old variable and
    /// the old accumulator.
    pub fn linear(&self, lin: T, g: T, var: T, accum: T) -> T {
        let two = T::one() + T::one();
        let g_lin = if self.v2 {
            g + two * self.l2_shrinkage * var
        } else {
            g
        };
        let sigma = self.accum_power(accum + g * g) - self.accum_power(accum);
        if self.linear_by_lr {
            lin + (g_lin * self.lr - sigma * var)
        } else {
            lin + (g_lin - sigma / self.lr * var)
        }
    }

    /// The new variable from the new linear term and the new accumulator.
    pub fn var(&self, lin: T, new_accum: T) -> T {
        let two = T::one() + T::one();
        let (l1, quadratic) = if self.linear_by_lr {
            (
                self.l1 * self.lr,
                self.accum_power(new_accum) + two * self.l2 * self.lr,
            )
        } else {
            (
                self.l1,
                self.accum_power(new_accum) / self.lr + two * self.l2,
            )
        };
        if lin.abs() > l1 {
            (l1 * sign(lin) - lin) / quadratic
        } else {
            T::zero()
        }
    }
}

/// `ApplyFtrl`/`ApplyFtrlV2` (`rest = [grad, lr, l1, l2, lr_power]`, V2 with
/// `l2_shrinkage` before `lr_power`; variables `[var, accum, linear]`): the
/// linear term first (it reads the old variable and accumulator), then the
/// accumulator, then the variable.
pub struct Ftrl {
    /// `ApplyFtrlV2`.
    pub v2: bool,
    /// `multiply_linear_by_lr`.
    pub linear_by_lr: bool,
}

impl Ftrl {
    /// The update's scalars from the op's (`rest[0]` is the gradient's place).
    pub fn params<T: FloatType>(&self, rest: &[T]) -> FtrlParams<T> {
        let at = |i: usize| rest.get(i).copied().unwrap_or_else(T::zero);
        let (l2_shrinkage, lr_power) = if self.v2 {
            (at(4), at(5))
        } else {
            (T::zero(), at(4))
        };
        FtrlParams {
            lr: at(1),
            l1: at(2),
            l2: at(3),
            l2_shrinkage,
            lr_power,
            v2: self.v2,
            linear_by_lr: self.linear_by_lr,
        }
    }
}

impl<T: FloatType> Update<T> for Ftrl {
    fn order(&self) -> &'static [usize] {
        &[2, 1, 0]
    }

    fn reads_old(&self) -> &'static [usize] {
        &[0, 1]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
        let p = self.params(rest);
        match k {
            2 => {
                for (((lin, &g), &x), &a) in dst.iter_mut().zip(grad).zip(vals[0]).zip(vals[1]) {
                    *lin = p.linear(*lin, g, x, a);
                }
            }
            1 => {
                for (a, &g) in dst.iter_mut().zip(grad) {
                    *a = *a + g * g;
                }
            }
            _ => {
                for ((x, &lin), &a) in dst.iter_mut().zip(vals[2]).zip(vals[1]) {
                    *x = p.var(lin, a);
                }
            }
        }
    }
}
