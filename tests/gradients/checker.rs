//! A gradient checker after TensorFlow's `gradient_checker`: builds a function of
//! float64 placeholders, adds its symbolic gradients with `gradients()`, and
//! compares the full Jacobian they give (one run per output element, feeding a
//! one-hot `grad_ys`) with central differences of the forward graph run in the
//! same session (two runs per input element).

use actorflow::graph::gradients::gradients;
use actorflow::{ops, DType, Output, Result, Scope, Shape, Tensor};

use crate::any_placement::AnyPlacement;

/// Checker settings.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// The central-difference step.
    pub eps: f64,
    /// The largest allowed `|analytic - numeric| / max(1, |numeric|)`.
    pub tol: f64,
    /// Also build the function on placeholders of unknown shape (the gradient
    /// functions' run-time shape arithmetic), not only on fully known shapes
    /// (their static paths).
    pub unknown_shapes: bool,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            eps: 1e-6,
            tol: 1e-6,
            unknown_shapes: true,
        }
    }
}

/// A float64 tensor of shape `dims`.
pub fn t(dims: &[usize], values: &[f64]) -> Tensor {
    Tensor::new(dims, values.to_vec()).expect("values match dims")
}

/// `n` deterministic values in `[lo, hi)` (a small LCG seeded by `seed`).
pub fn vals(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((x >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// A float64 tensor of shape `dims` with values from [`vals`].
pub fn rand(dims: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let n = dims.iter().product();
    t(dims, &vals(n, seed, lo, hi))
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().expect("a float tensor")
}

/// Checks `f`'s gradients at `inputs` with the default settings.
pub fn check(
    name: &str,
    inputs: impl Into<Vec<Tensor>>,
    f: impl Fn(&Scope, &[Output]) -> Result<Output>,
) {
    check_opts(name, inputs, Opts::default(), f)
}

/// Checks `f`'s gradients at `inputs`.
pub fn check_opts(
    name: &str,
    inputs: impl Into<Vec<Tensor>>,
    opts: Opts,
    f: impl Fn(&Scope, &[Output]) -> Result<Output>,
) {
    let inputs = inputs.into();
    check_on(name, &inputs, opts, true, &f);
    if opts.unknown_shapes {
        check_on(name, &inputs, opts, false, &f);
    }
}

fn check_on(
    name: &str,
    inputs: &[Tensor],
    opts: Opts,
    known: bool,
    f: &dyn Fn(&Scope, &[Output]) -> Result<Output>,
) {
    let mode = if known {
        "known shapes"
    } else {
        "unknown shapes"
    };
    let s = Scope::new();
    let xs: Vec<Output> = inputs
        .iter()
        .map(|v| {
            let shape = if known {
                Shape::known(v.dims())
            } else {
                Shape::unknown()
            };
            ops::placeholder(&s, v.dtype(), shape).expect("placeholder")
        })
        .collect();
    let y = f(&s, &xs).unwrap_or_else(|e| panic!("{name} ({mode}): building: {e}"));
    assert_eq!(
        y.dtype(),
        DType::F64,
        "{name}: the checked function must return float64"
    );
    let dy = ops::placeholder(&s, y.dtype(), Shape::unknown()).expect("placeholder");
    let grads = gradients(
        &s,
        std::slice::from_ref(&y),
        &xs,
        Some(std::slice::from_ref(&dy)),
    )
    .unwrap_or_else(|e| panic!("{name} ({mode}): gradients: {e}"));
    let sess = AnyPlacement::new(&s.graph_def())
        .unwrap_or_else(|e| panic!("{name} ({mode}): session: {e}"));
    let names: Vec<String> = xs.iter().map(Output::name).collect();
    let run_y = |vals: &[Tensor]| -> Tensor {
        let feeds: Vec<(&str, Tensor)> = names
            .iter()
            .map(String::as_str)
            .zip(vals.iter().cloned())
            .collect();
        sess.run(&feeds, &[&y.name()], &[])
            .unwrap_or_else(|e| panic!("{name} ({mode}): forward: {e}"))
            .remove(0)
    };
    let y0 = run_y(inputs);
    let m = y0.num_elements();
    let ydims = y0.dims().to_vec();
    // analytic[i][k][j] = d y_j / d x_i[k]
    let mut analytic: Vec<Vec<Vec<f64>>> = inputs
        .iter()
        .map(|x| vec![vec![0.0; m]; x.num_elements()])
        .collect();
    let fetched: Vec<(usize, String)> = grads
        .iter()
        .enumerate()
        .filter_map(|(i, g)| g.as_ref().map(|g| (i, g.name())))
        .collect();
    if !fetched.is_empty() {
        for j in 0..m {
            let mut onehot = vec![0.0; m];
            onehot[j] = 1.0;
            let mut feeds: Vec<(&str, Tensor)> = names
                .iter()
                .map(String::as_str)
                .zip(inputs.iter().cloned())
                .collect();
            let dyn_name = dy.name();
            feeds.push((&dyn_name, Tensor::new(&ydims, onehot).expect("one-hot")));
            let fetch: Vec<&str> = fetched.iter().map(|(_, n)| n.as_str()).collect();
            let out = sess
                .run(&feeds, &fetch, &[])
                .unwrap_or_else(|e| panic!("{name} ({mode}): gradient run: {e}"));
            for ((i, _), g) in fetched.iter().zip(&out) {
                assert_eq!(
                    g.dims(),
                    inputs[*i].dims(),
                    "{name} ({mode}): the gradient of input {i} has the wrong shape"
                );
                for (k, v) in f64s(g).into_iter().enumerate() {
                    analytic[*i][k][j] = v;
                }
            }
        }
    }
    for (i, x) in inputs.iter().enumerate() {
        if !x.dtype().is_float() {
            continue;
        }
        let base = f64s(x);
        for k in 0..base.len() {
            let perturbed = |delta: f64| {
                let mut v = base.clone();
                v[k] += delta;
                let mut all = inputs.to_vec();
                all[i] = Tensor::new(x.dims(), v).expect("same shape");
                f64s(&run_y(&all))
            };
            let (plus, minus) = (perturbed(opts.eps), perturbed(-opts.eps));
            for j in 0..m {
                let numeric = (plus[j] - minus[j]) / (2.0 * opts.eps);
                let a = analytic[i][k][j];
                let err = (a - numeric).abs() / numeric.abs().max(1.0);
                assert!(
                    err <= opts.tol,
                    "{name} ({mode}): d y[{j}] / d x{i}[{k}]: symbolic {a}, numerical {numeric} (error {err:e})"
                );
            }
        }
    }
}
