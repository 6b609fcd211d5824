//! The element-wise math of the optimizers, in TensorFlow's operation order
//! (`training_ops.cc`'s CPU functors), so that results match TensorFlow's to the
//! last bit in f32 and f64.
//!
//! An optimizer updates its variables in stages, one variable per stage: first the
//! slots, then the variable itself (index 0). A stage sees the values of the
//! variables updated before it (`vals[j]`; empty for the others), the scalar
//! inputs in the op's input order (`rest[j]`, the gradient's place holding zero)
//! and the gradient.

use crate::cpu::types::FloatType;

/// One optimizer's update; see the module docs.
pub trait Update<T: FloatType>: Send + Sync + 'static {
    /// The variables in the order their stages run (0, the variable, last).
    fn order(&self) -> &'static [usize];

    /// Writes variable `k` in place.
    fn stage(&self, k: usize, dst: &mut [T], vals: &[&[T]; 3], rest: &[T], grad: &[T]);
}

fn one<T: FloatType>() -> T {
    T::one()
}

/// `ApplyGradientDescent`: `var -= alpha * delta` (`rest = [alpha, delta]`).
pub struct GradientDescent;

impl<T: FloatType> Update<T> for GradientDescent {
    fn order(&self) -> &'static [usize] {
        &[0]
    }

    fn stage(&self, _k: usize, var: &mut [T], _vals: &[&[T]; 3], rest: &[T], grad: &[T]) {
        let alpha = rest[0];
        for (v, &g) in var.iter_mut().zip(grad) {
            *v = *v - g * alpha;
        }
    }
}

/// `ApplyAdagrad` (`rest = [lr, grad]`, variables `[var, accum]`).
pub struct Adagrad {
    /// Accumulate the squared gradient (TensorFlow's `update_slots`).
    pub update_slots: bool,
}

impl<T: FloatType> Update<T> for Adagrad {
    fn order(&self) -> &'static [usize] {
        &[1, 0]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &[&[T]; 3], rest: &[T], grad: &[T]) {
        if k == 1 {
            // accum += grad * grad
            if self.update_slots {
                for (a, &g) in dst.iter_mut().zip(grad) {
                    *a = *a + g * g;
                }
            }
        } else {
            // var -= grad * lr * rsqrt(accum)
            let lr = rest[0];
            for ((v, &g), &a) in dst.iter_mut().zip(grad).zip(vals[1]) {
                *v = *v - g * lr * (one::<T>() / a.sqrt());
            }
        }
    }
}

/// `ApplyMomentum` (`rest = [lr, grad, momentum]`, variables `[var, accum]`).
pub struct Momentum {
    /// Nesterov momentum.
    pub nesterov: bool,
}

impl<T: FloatType> Update<T> for Momentum {
    fn order(&self) -> &'static [usize] {
        &[1, 0]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &[&[T]; 3], rest: &[T], grad: &[T]) {
        let (lr, momentum) = (rest[0], rest[2]);
        if k == 1 {
            // accum = accum * momentum + grad
            for (a, &g) in dst.iter_mut().zip(grad) {
                *a = *a * momentum + g;
            }
        } else if self.nesterov {
            // var -= grad * lr + accum * momentum * lr
            for ((v, &g), &a) in dst.iter_mut().zip(grad).zip(vals[1]) {
                *v = *v - (g * lr + a * momentum * lr);
            }
        } else {
            // var -= accum * lr
            for (v, &a) in dst.iter_mut().zip(vals[1]) {
                *v = *v - a * lr;
            }
        }
    }
}

/// `ApplyAdam` (`rest = [beta1_power, beta2_power, lr, beta1, beta2, epsilon,
/// grad]`, variables `[var, m, v]`).
pub struct Adam {
    /// Nesterov momentum.
    pub nesterov: bool,
}

impl<T: FloatType> Update<T> for Adam {
    fn order(&self) -> &'static [usize] {
        &[1, 2, 0]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &[&[T]; 3], rest: &[T], grad: &[T]) {
        let [beta1_power, beta2_power, lr, beta1, beta2, epsilon, ..] = *rest else {
            return;
        };
        match k {
            1 => {
                // m += (grad - m) * (1 - beta1)
                let c = one::<T>() - beta1;
                for (m, &g) in dst.iter_mut().zip(grad) {
                    *m = *m + (g - *m) * c;
                }
            }
            2 => {
                // v += (grad² - v) * (1 - beta2)
                let c = one::<T>() - beta2;
                for (v, &g) in dst.iter_mut().zip(grad) {
                    *v = *v + (g * g - *v) * c;
                }
            }
            _ => {
                let alpha = lr * (one::<T>() - beta2_power).sqrt() / (one::<T>() - beta1_power);
                let (m, v) = (vals[1], vals[2]);
                if self.nesterov {
                    // var -= ((grad * (1 - beta1) + beta1 * m) * alpha) / (sqrt(v) + epsilon)
                    let c = one::<T>() - beta1;
                    for (((x, &g), &m), &v) in dst.iter_mut().zip(grad).zip(m).zip(v) {
                        *x = *x - ((g * c + beta1 * m) * alpha) / (v.sqrt() + epsilon);
                    }
                } else {
                    // var -= (m * alpha) / (sqrt(v) + epsilon)
                    for ((x, &m), &v) in dst.iter_mut().zip(m).zip(v) {
                        *x = *x - (m * alpha) / (v.sqrt() + epsilon);
                    }
                }
            }
        }
    }
}

/// `ApplyRMSProp` (`rest = [lr, rho, momentum, epsilon, grad]`, variables
/// `[var, ms, mom]`).
pub struct RmsProp;

impl<T: FloatType> Update<T> for RmsProp {
    fn order(&self) -> &'static [usize] {
        &[1, 2, 0]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &[&[T]; 3], rest: &[T], grad: &[T]) {
        let [lr, rho, momentum, epsilon, ..] = *rest else {
            return;
        };
        match k {
            1 => {
                // ms += (grad² - ms) * (1 - rho)
                let c = one::<T>() - rho;
                for (ms, &g) in dst.iter_mut().zip(grad) {
                    *ms = *ms + (g * g - *ms) * c;
                }
            }
            2 => {
                // mom = mom * momentum + (grad * lr) / sqrt(ms + epsilon)
                for ((mom, &g), &ms) in dst.iter_mut().zip(grad).zip(vals[1]) {
                    *mom = *mom * momentum + (g * lr) / (ms + epsilon).sqrt();
                }
            }
            _ => {
                // var -= mom
                for (v, &mom) in dst.iter_mut().zip(vals[2]) {
                    *v = *v - mom;
                }
            }
        }
    }
}
