//! The element-wise math of the optimizers, in TensorFlow's operation order
//! (`training_ops.cc`'s CPU functors), so that results match TensorFlow's to the
//! last bit in f32 and f64.
//!
//! An optimizer updates its variables in stages, one variable per stage,
//! usually the slots first and the variable itself (index 0) last. A stage sees
//! the values of the variables updated before it and of those named by
//! [`Update::reads_old`] (`vals[j]`, as they were before their own stage; empty
//! for the others), the scalar inputs in the op's input order (`rest[j]`, the
//! gradient's place holding zero) and the gradient.

use crate::cpu::types::FloatType;

/// The most variables one update writes (`ApplyCenteredRMSProp`: var, mg, ms,
/// mom).
pub const MAX_VARS: usize = 4;

/// The values a stage reads, by variable index.
pub type Vals<'a, T> = [&'a [T]; MAX_VARS];

/// One optimizer's update; see the module docs.
pub trait Update<T: FloatType>: Send + Sync + 'static {
    /// The variables in the order their stages run.
    fn order(&self) -> &'static [usize];

    /// The variables whose values from before the update a stage reads before
    /// their own stage has run (FTRL's linear term reads the variable); an
    /// unlocked update snapshots these first.
    fn reads_old(&self) -> &'static [usize] {
        &[]
    }

    /// Writes variable `k` in place.
    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]);
}

/// Variables of at least this many elements are updated on rayon's threads.
pub const PAR_MIN_ELEMS: usize = 1 << 15;

/// Runs `u`'s stage `k` over `dst`, split into element ranges on rayon's
/// threads when it is large: every stage is element-wise (element `i` reads only
/// element `i` of the values and the gradient), so the split changes no bit.
pub fn run_stage<T: FloatType, U: Update<T> + ?Sized>(
    u: &U,
    k: usize,
    dst: &mut [T],
    vals: &Vals<'_, T>,
    rest: &[T],
    grad: &[T],
) {
    use rayon::prelude::*;
    let n = dst.len();
    let whole = |v: &[T]| v.len() == n;
    if n < PAR_MIN_ELEMS || grad.len() != n || !vals.iter().all(|v| v.is_empty() || whole(v)) {
        return u.stage(k, dst, vals, rest, grad);
    }
    let chunk = (n / (4 * rayon::current_num_threads())).max(PAR_MIN_ELEMS / 4);
    dst.par_chunks_mut(chunk).enumerate().for_each(|(c, d)| {
        let r = c * chunk..c * chunk + d.len();
        let mut part: Vals<'_, T> = [&[]; MAX_VARS];
        for (p, v) in part.iter_mut().zip(vals) {
            if !v.is_empty() {
                *p = &v[r.clone()];
            }
        }
        u.stage(k, d, &part, rest, &grad[r]);
    });
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

    fn stage(&self, _k: usize, var: &mut [T], _vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
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

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
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

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
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

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
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

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
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

/// `ApplyCenteredRMSProp` (`rest = [lr, rho, momentum, epsilon, grad]`,
/// variables `[var, mg, ms, mom]`): RMSProp normalised by the estimated
/// variance `ms - mg²` instead of the second moment.
pub struct CenteredRmsProp;

impl<T: FloatType> Update<T> for CenteredRmsProp {
    fn order(&self) -> &'static [usize] {
        &[2, 1, 3, 0]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
        let [lr, rho, momentum, epsilon, ..] = *rest else {
            return;
        };
        let c = one::<T>() - rho;
        match k {
            2 => {
                // ms += (grad² - ms) * (1 - rho)
                for (ms, &g) in dst.iter_mut().zip(grad) {
                    *ms = *ms + (g * g - *ms) * c;
                }
            }
            1 => {
                // mg += (grad - mg) * (1 - rho)
                for (mg, &g) in dst.iter_mut().zip(grad) {
                    *mg = *mg + (g - *mg) * c;
                }
            }
            3 => {
                // mom = mom * momentum + grad * lr / sqrt(ms - mg² + epsilon)
                let (mg, ms) = (vals[1], vals[2]);
                for (((mom, &g), &mg), &ms) in dst.iter_mut().zip(grad).zip(mg).zip(ms) {
                    let denom = (ms - mg * mg) + epsilon;
                    *mom = *mom * momentum + (g * lr) / denom.sqrt();
                }
            }
            _ => {
                // var -= mom
                for (v, &mom) in dst.iter_mut().zip(vals[3]) {
                    *v = *v - mom;
                }
            }
        }
    }
}

/// `ApplyAdadelta` (`rest = [lr, rho, epsilon, grad]`, variables
/// `[var, accum, accum_update]`). The variable's step reads `accum_update` as it
/// was before this update, so that stage runs before `accum_update`'s.
pub struct Adadelta;

/// Adadelta's step before the learning rate:
/// `sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad`.
pub(crate) fn adadelta_step<T: FloatType>(accum_update: T, accum: T, epsilon: T, g: T) -> T {
    (accum_update + epsilon).sqrt() * (one::<T>() / (accum + epsilon).sqrt()) * g
}

impl<T: FloatType> Update<T> for Adadelta {
    fn order(&self) -> &'static [usize] {
        &[1, 0, 2]
    }

    fn reads_old(&self) -> &'static [usize] {
        &[2]
    }

    fn stage(&self, k: usize, dst: &mut [T], vals: &Vals<'_, T>, rest: &[T], grad: &[T]) {
        let [lr, rho, epsilon, ..] = *rest else {
            return;
        };
        let c = one::<T>() - rho;
        match k {
            1 => {
                // accum = accum * rho + grad² * (1 - rho)
                for (a, &g) in dst.iter_mut().zip(grad) {
                    *a = *a * rho + g * g * c;
                }
            }
            0 => {
                // var -= step * lr, with the old accum_update
                for (((v, &g), &a), &u) in dst.iter_mut().zip(grad).zip(vals[1]).zip(vals[2]) {
                    *v = *v - adadelta_step(u, a, epsilon, g) * lr;
                }
            }
            _ => {
                // accum_update = accum_update * rho + step² * (1 - rho)
                for ((u, &g), &a) in dst.iter_mut().zip(grad).zip(vals[1]) {
                    let step = adadelta_step(*u, a, epsilon, g);
                    *u = *u * rho + step * step * c;
                }
            }
        }
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;
    use crate::cpu::training::regularized::{Ftrl, ProximalAdagrad, ProximalGradientDescent};

    /// Every update, run by [`run_stage`] over ranges on rayon's threads, writes
    /// exactly the bits one sequential stage writes.
    #[test]
    fn split_stages_write_the_bits_of_one_stage() {
        let updates: Vec<Box<dyn Update<f32>>> = vec![
            Box::new(GradientDescent),
            Box::new(Adagrad { update_slots: true }),
            Box::new(Momentum { nesterov: true }),
            Box::new(Adam { nesterov: false }),
            Box::new(RmsProp),
            Box::new(CenteredRmsProp),
            Box::new(Adadelta),
            Box::new(ProximalGradientDescent),
            Box::new(ProximalAdagrad),
            Box::new(Ftrl {
                v2: true,
                linear_by_lr: false,
            }),
        ];
        let n = 3 * PAR_MIN_ELEMS + 17;
        let ramp = |seed: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 997.0 + 0.05)
                .collect()
        };
        let grad: Vec<f32> = ramp(9).iter().map(|g| g - 0.5).collect();
        let rest = [0.9f32, 0.05, 0.01, 0.02, 0.5, 1e-3, 0.9, 1e-7];
        for u in &updates {
            let mut seq: Vec<Vec<f32>> = (0..MAX_VARS).map(ramp).collect();
            let mut par = seq.clone();
            for &k in u.order() {
                for (vars, split) in [(&mut seq, false), (&mut par, true)] {
                    let mut dst = std::mem::take(&mut vars[k]);
                    let mut vals: Vals<'_, f32> = [&[]; MAX_VARS];
                    for (j, v) in vars.iter().enumerate() {
                        if j != k {
                            vals[j] = v;
                        }
                    }
                    if split {
                        run_stage(&**u, k, &mut dst, &vals, &rest, &grad);
                    } else {
                        u.stage(k, &mut dst, &vals, &rest, &grad);
                    }
                    vars[k] = dst;
                }
            }
            for (a, b) in seq.iter().zip(&par) {
                assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));
            }
            assert!(
                seq[0].iter().zip(ramp(0)).any(|(x, y)| *x != y),
                "no update"
            );
        }
    }
}
