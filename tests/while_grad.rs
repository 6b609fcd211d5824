//! Gradients through `while_loop` (the backward loop with stacks), checked against
//! hand-derived derivatives and central differences run through the session.

use actorflow::graph::builder::{cond, while_loop, WhileOptions};
use actorflow::graph::gradients::gradients;
use actorflow::{ops, DType, Output, Scope, Shape, Tensor};

mod any_placement;
use any_placement::AnyPlacement;

/// Every step runs on one device and spread over several, which must agree.
fn session(s: &Scope) -> AnyPlacement {
    AnyPlacement::new(&s.graph_def()).unwrap()
}

fn f64_of(t: &Tensor) -> Vec<f64> {
    t.as_slice::<f64>().unwrap().to_vec()
}

/// `acc = acc0 * x^n` by a loop: returns (x, acc0, n, acc).
fn power_loop(s: &Scope, parallel: i64) -> (Output, Output, Output, Output) {
    let x = ops::placeholder(s, DType::F64, Shape::scalar()).unwrap();
    let acc0 = ops::placeholder(s, DType::F64, Shape::scalar()).unwrap();
    let n = ops::placeholder(s, DType::I32, Shape::scalar()).unwrap();
    let i0 = ops::scalar(s, 0i32).unwrap();
    let out = while_loop(
        s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                ops::mul(b, &v[1], &x)?,
            ])
        },
        &[i0, acc0.clone()],
        &WhileOptions {
            parallel_iterations: parallel,
            ..Default::default()
        },
    )
    .unwrap();
    (x, acc0, n, out[1].clone())
}

#[test]
fn gradient_of_a_power_loop() {
    for parallel in [1, 10, 32] {
        let s = Scope::new();
        let (x, acc0, n, acc) = power_loop(&s, parallel);
        let g = gradients(
            &s,
            std::slice::from_ref(&acc),
            &[x.clone(), acc0.clone()],
            None,
        )
        .unwrap();
        let (gx, ga) = (g[0].clone().unwrap(), g[1].clone().unwrap());
        let sess = session(&s);
        for (xv, a0, nv) in [
            (1.5f64, 2.0f64, 5i32),
            (0.5, 1.0, 1),
            (2.0, 3.0, 0),
            (-1.25, 0.5, 7),
        ] {
            let feeds = [
                (x.name(), Tensor::scalar(xv)),
                (acc0.name(), Tensor::scalar(a0)),
                (n.name(), Tensor::scalar(nv)),
            ];
            let feeds: Vec<(&str, Tensor)> =
                feeds.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let out = sess
                .run(&feeds, &[&acc.name(), &gx.name(), &ga.name()], &[])
                .unwrap();
            let p = nv as f64;
            assert!((f64_of(&out[0])[0] - a0 * xv.powf(p)).abs() < 1e-12);
            // d/dx a0 x^n = n a0 x^(n-1); d/da0 = x^n
            let want_gx = if nv == 0 {
                0.0
            } else {
                p * a0 * xv.powf(p - 1.0)
            };
            assert!(
                (f64_of(&out[1])[0] - want_gx).abs() < 1e-9,
                "parallel {parallel}, x {xv}, n {nv}: {} vs {want_gx}",
                out[1]
            );
            assert!((f64_of(&out[2])[0] - xv.powf(p)).abs() < 1e-9);
        }
    }
}

/// An RNN-like loop `h = tanh(W h + b)` over a vector, checked against central
/// differences of the forward loop.
#[test]
fn gradient_of_a_matrix_loop_matches_numerical() {
    let s = Scope::new();
    let w = ops::placeholder(&s, DType::F64, Shape::known(&[3, 3])).unwrap();
    let b = ops::placeholder(&s, DType::F64, Shape::known(&[3, 1])).unwrap();
    let h0 = ops::placeholder(&s, DType::F64, Shape::known(&[3, 1])).unwrap();
    let i0 = ops::scalar(&s, 0i32).unwrap();
    let out = while_loop(
        &s,
        |c, v| ops::less(c, &v[0], &ops::scalar(c, 4i32)?),
        |c, v| {
            let wh = ops::mat_mul(c, &w, &v[1], false, false)?;
            Ok(vec![
                ops::add(c, &v[0], &ops::scalar(c, 1i32)?)?,
                ops::tanh(c, &ops::add(c, &wh, &b)?)?,
            ])
        },
        &[i0, h0.clone()],
        &WhileOptions::default(),
    )
    .unwrap();
    let loss = ops::sum_axes(&s, &ops::square(&s, &out[1]).unwrap(), &[0, 1], false).unwrap();
    let g = gradients(
        &s,
        std::slice::from_ref(&loss),
        &[w.clone(), b.clone(), h0.clone()],
        None,
    )
    .unwrap();
    let sess = session(&s);
    let wv: Vec<f64> = vec![0.3, -0.2, 0.5, 0.1, 0.4, -0.3, -0.6, 0.2, 0.1];
    let bv: Vec<f64> = vec![0.05, -0.1, 0.2];
    let hv: Vec<f64> = vec![0.7, -0.4, 0.9];
    let run_loss = |wv: &[f64], bv: &[f64], hv: &[f64]| -> f64 {
        let feeds = [
            (w.name(), Tensor::new::<f64>(&[3, 3], wv.to_vec()).unwrap()),
            (b.name(), Tensor::new::<f64>(&[3, 1], bv.to_vec()).unwrap()),
            (h0.name(), Tensor::new::<f64>(&[3, 1], hv.to_vec()).unwrap()),
        ];
        let feeds: Vec<(&str, Tensor)> =
            feeds.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        f64_of(&sess.run(&feeds, &[&loss.name()], &[]).unwrap()[0])[0]
    };
    let feeds = [
        (w.name(), Tensor::new::<f64>(&[3, 3], wv.clone()).unwrap()),
        (b.name(), Tensor::new::<f64>(&[3, 1], bv.clone()).unwrap()),
        (h0.name(), Tensor::new::<f64>(&[3, 1], hv.clone()).unwrap()),
    ];
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let names: Vec<String> = g.iter().map(|g| g.as_ref().unwrap().name()).collect();
    let fetch: Vec<&str> = names.iter().map(String::as_str).collect();
    let got = sess.run(&feeds, &fetch, &[]).unwrap();
    let eps = 1e-6;
    let inputs = [wv.clone(), bv.clone(), hv.clone()];
    for (k, base) in inputs.iter().enumerate() {
        let analytic = f64_of(&got[k]);
        for e in 0..base.len() {
            let mut plus = inputs.clone();
            let mut minus = inputs.clone();
            plus[k][e] += eps;
            minus[k][e] -= eps;
            let num = (run_loss(&plus[0], &plus[1], &plus[2])
                - run_loss(&minus[0], &minus[1], &minus[2]))
                / (2.0 * eps);
            assert!(
                (analytic[e] - num).abs() < 1e-6 * (1.0 + num.abs()),
                "input {k} element {e}: analytic {} numerical {num}",
                analytic[e]
            );
        }
    }
}

/// Running only the forward loop after adding its gradient does not run the stack
/// pushes (they are pruned away), and the session keeps working.
#[test]
fn forward_only_runs_still_work_after_gradient() {
    let s = Scope::new();
    let (x, acc0, n, acc) = power_loop(&s, 10);
    let g = gradients(
        &s,
        std::slice::from_ref(&acc),
        std::slice::from_ref(&x),
        None,
    )
    .unwrap();
    let sess = session(&s);
    let feeds = [
        (x.name(), Tensor::scalar(3.0f64)),
        (acc0.name(), Tensor::scalar(1.0f64)),
        (n.name(), Tensor::scalar(3i32)),
    ];
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    for _ in 0..3 {
        let out = sess.run(&feeds, &[&acc.name()], &[]).unwrap();
        assert_eq!(f64_of(&out[0]), vec![27.0]);
        let out = sess
            .run(&feeds, &[&g[0].as_ref().unwrap().name()], &[])
            .unwrap();
        assert_eq!(f64_of(&out[0]), vec![27.0]); // 3 x^2
    }
}

/// `v = v0; repeat n times: v = v < 10 ? (v > 1 ? v * x : v + x * x) : 3 tanh(v) + x`
/// — conds nested two deep in a loop body, every branch taken in some iteration.
fn loop_with_conds(s: &Scope, parallel: i64) -> (Output, Output, Output, Output) {
    let x = ops::placeholder(s, DType::F64, Shape::scalar()).unwrap();
    let v0 = ops::placeholder(s, DType::F64, Shape::scalar()).unwrap();
    let n = ops::placeholder(s, DType::I32, Shape::scalar()).unwrap();
    let i0 = ops::scalar(s, 0i32).unwrap();
    let out = while_loop(
        s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            let small = ops::less(b, &v[1], &ops::scalar(b, 10.0f64)?)?;
            let y = cond(
                b,
                &small,
                |t| {
                    let above_one = ops::greater(t, &v[1], &ops::scalar(t, 1.0f64)?)?;
                    cond(
                        t,
                        &above_one,
                        |tt| Ok(vec![ops::mul(tt, &v[1], &x)?]),
                        |tf| Ok(vec![ops::add(tf, &v[1], &ops::mul(tf, &x, &x)?)?]),
                    )
                },
                |f| {
                    let th = ops::mul(f, &ops::tanh(f, &v[1])?, &ops::scalar(f, 3.0f64)?)?;
                    Ok(vec![ops::add(f, &th, &x)?])
                },
            )?;
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                y[0].clone(),
            ])
        },
        &[i0, v0.clone()],
        &WhileOptions {
            parallel_iterations: parallel,
            ..Default::default()
        },
    )
    .unwrap();
    (x, v0, n, out[1].clone())
}

/// The same function, by hand.
fn loop_with_conds_by_hand(x: f64, v0: f64, n: i32) -> f64 {
    let mut v = v0;
    for _ in 0..n {
        v = if v < 10.0 {
            if v > 1.0 {
                v * x
            } else {
                v + x * x
            }
        } else {
            3.0 * v.tanh() + x
        };
    }
    v
}

#[test]
fn gradient_of_a_loop_with_nested_conds_matches_numerical() {
    for parallel in [1, 10] {
        let s = Scope::new();
        let (x, v0, n, v) = loop_with_conds(&s, parallel);
        let g = gradients(&s, std::slice::from_ref(&v), &[x.clone(), v0.clone()], None).unwrap();
        let (gx, gv0) = (g[0].clone().unwrap(), g[1].clone().unwrap());
        let sess = session(&s);
        for (xv, v0v, nv) in [
            (1.7f64, 0.5f64, 7i32),
            (1.3, 2.0, 5),
            (0.9, 0.25, 3),
            (1.1, 12.0, 4),
            (1.5, 0.5, 0),
        ] {
            let run = |xv: f64, v0v: f64| {
                let feeds = [
                    (x.name(), Tensor::scalar(xv)),
                    (v0.name(), Tensor::scalar(v0v)),
                    (n.name(), Tensor::scalar(nv)),
                ];
                let feeds: Vec<(&str, Tensor)> =
                    feeds.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
                let out = sess
                    .run(&feeds, &[&v.name(), &gx.name(), &gv0.name()], &[])
                    .unwrap();
                (f64_of(&out[0])[0], f64_of(&out[1])[0], f64_of(&out[2])[0])
            };
            let (value, ax, av0) = run(xv, v0v);
            let want = loop_with_conds_by_hand(xv, v0v, nv);
            assert!(
                (value - want).abs() < 1e-9 * (1.0 + want.abs()),
                "{value} vs {want}"
            );
            let eps = 1e-6;
            let f = |a: f64, b: f64| loop_with_conds_by_hand(a, b, nv);
            let nx = (f(xv + eps, v0v) - f(xv - eps, v0v)) / (2.0 * eps);
            let nv0 = (f(xv, v0v + eps) - f(xv, v0v - eps)) / (2.0 * eps);
            assert!(
                (ax - nx).abs() < 1e-5 * (1.0 + nx.abs()),
                "d/dx at {xv},{v0v},{nv}: {ax} vs {nx}"
            );
            assert!(
                (av0 - nv0).abs() < 1e-5 * (1.0 + nv0.abs()),
                "d/dv0 at {xv},{v0v},{nv}: {av0} vs {nv0}"
            );
        }
    }
}

/// Feeds `(placeholder, value)` pairs and fetches `fetch` (all f64 scalars).
fn run_scalars(
    sess: &AnyPlacement,
    feeds: &[(&Output, f64)],
    ints: &[(&Output, i32)],
    fetch: &[&Output],
) -> Vec<f64> {
    let mut f: Vec<(String, Tensor)> = feeds
        .iter()
        .map(|(o, v)| (o.name(), Tensor::scalar(*v)))
        .collect();
    f.extend(ints.iter().map(|(o, v)| (o.name(), Tensor::scalar(*v))));
    let f: Vec<(&str, Tensor)> = f.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
    let names: Vec<String> = fetch.iter().map(|o| o.name()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    sess.run(&f, &names, &[])
        .unwrap()
        .iter()
        .map(|t| f64_of(t)[0])
        .collect()
}

/// `v = v0; n times: { s = v / 2; u = v; m times: u = u x + s; v = y tanh(u) }`: a
/// loop in a loop body that reads a value of the outer body as a constant.
fn nested_by_hand(x: f64, y: f64, v0: f64, n: i32, m: i32) -> f64 {
    let mut v = v0;
    for _ in 0..n {
        let s = 0.5 * v;
        let mut u = v;
        for _ in 0..m {
            u = u * x + s;
        }
        v = y * u.tanh();
    }
    v
}

#[test]
fn gradient_of_a_loop_nested_in_a_loop_body_matches_numerical() {
    for (outer_par, inner_par) in [(1, 1), (10, 10), (1, 32), (32, 1)] {
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
        let y = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
        let v0 = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
        let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
        let m = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
        let i0 = ops::scalar(&s, 0i32).unwrap();
        let out = while_loop(
            &s,
            |b, v| ops::less(b, &v[0], &n),
            |b, v| {
                let half = ops::mul(b, &v[1], &ops::scalar(b, 0.5f64)?)?;
                let inner = while_loop(
                    b,
                    |c, w| ops::less(c, &w[0], &m),
                    |c, w| {
                        Ok(vec![
                            ops::add(c, &w[0], &ops::scalar(c, 1i32)?)?,
                            ops::add(c, &ops::mul(c, &w[1], &x)?, &half)?,
                        ])
                    },
                    &[ops::scalar(b, 0i32)?, v[1].clone()],
                    &WhileOptions {
                        parallel_iterations: inner_par,
                        ..Default::default()
                    },
                )?;
                Ok(vec![
                    ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                    ops::mul(b, &y, &ops::tanh(b, &inner[1])?)?,
                ])
            },
            &[i0, v0.clone()],
            &WhileOptions {
                parallel_iterations: outer_par,
                ..Default::default()
            },
        )
        .unwrap();
        let v = out[1].clone();
        let g = gradients(
            &s,
            std::slice::from_ref(&v),
            &[x.clone(), y.clone(), v0.clone()],
            None,
        )
        .unwrap();
        let g: Vec<Output> = g.into_iter().map(Option::unwrap).collect();
        let sess = session(&s);
        for (xv, yv, v0v, nv, mv) in [
            (0.7f64, 1.3f64, 0.4f64, 3i32, 2i32),
            (1.1, 0.9, -0.3, 4, 3),
            (0.5, 1.5, 0.8, 1, 5),
            (0.9, 1.2, 0.6, 3, 0),
            (0.9, 1.2, 0.6, 0, 3),
        ] {
            let got = run_scalars(
                &sess,
                &[(&x, xv), (&y, yv), (&v0, v0v)],
                &[(&n, nv), (&m, mv)],
                &[&v, &g[0], &g[1], &g[2]],
            );
            let want = nested_by_hand(xv, yv, v0v, nv, mv);
            assert!((got[0] - want).abs() < 1e-12, "{} vs {want}", got[0]);
            let eps = 1e-6;
            let f = |a: f64, b: f64, c: f64| nested_by_hand(a, b, c, nv, mv);
            let num = [
                (f(xv + eps, yv, v0v) - f(xv - eps, yv, v0v)) / (2.0 * eps),
                (f(xv, yv + eps, v0v) - f(xv, yv - eps, v0v)) / (2.0 * eps),
                (f(xv, yv, v0v + eps) - f(xv, yv, v0v - eps)) / (2.0 * eps),
            ];
            for k in 0..3 {
                assert!(
                    (got[1 + k] - num[k]).abs() < 1e-6 * (1.0 + num[k].abs()),
                    "parallel ({outer_par}, {inner_par}), input {k} at ({xv}, {yv}, {v0v}, {nv}, {mv}): {} vs {}",
                    got[1 + k],
                    num[k]
                );
            }
        }
    }
}

/// Three loops deep: `v = v0 x^(a b c)`, so `dv/dx = a b c v0 x^(a b c - 1)`.
#[test]
fn gradient_of_loops_nested_three_deep() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let v0 = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let counts: Vec<Output> = (0..3)
        .map(|_| ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap())
        .collect();
    fn level(b: &Scope, v: &Output, x: &Output, counts: &[Output]) -> actorflow::Result<Output> {
        let Some((n, rest)) = counts.split_first() else {
            return ops::mul(b, v, x);
        };
        let out = while_loop(
            b,
            |c, w| ops::less(c, &w[0], n),
            |c, w| {
                Ok(vec![
                    ops::add(c, &w[0], &ops::scalar(c, 1i32)?)?,
                    level(c, &w[1], x, rest)?,
                ])
            },
            &[ops::scalar(b, 0i32)?, v.clone()],
            &WhileOptions::default(),
        )?;
        Ok(out[1].clone())
    }
    let v = level(&s, &v0, &x, &counts).unwrap();
    let g = gradients(&s, std::slice::from_ref(&v), &[x.clone(), v0.clone()], None).unwrap();
    let (gx, gv0) = (g[0].clone().unwrap(), g[1].clone().unwrap());
    let sess = session(&s);
    for (xv, v0v, abc) in [
        (1.1f64, 0.5f64, [2, 3, 2]),
        (0.9, 2.0, [1, 1, 4]),
        (1.3, 1.5, [3, 0, 2]),
        (-0.8, 1.0, [2, 2, 1]),
    ] {
        let ints: Vec<(&Output, i32)> = counts.iter().zip(abc).collect();
        let got = run_scalars(&sess, &[(&x, xv), (&v0, v0v)], &ints, &[&v, &gx, &gv0]);
        let p = abc.iter().product::<i32>();
        let pf = f64::from(p);
        assert!((got[0] - v0v * xv.powi(p)).abs() < 1e-12);
        let want_gx = if p == 0 {
            0.0
        } else {
            pf * v0v * xv.powi(p - 1)
        };
        assert!(
            (got[1] - want_gx).abs() < 1e-9 * (1.0 + want_gx.abs()),
            "{abc:?}: {} vs {want_gx}",
            got[1]
        );
        assert!((got[2] - xv.powi(p)).abs() < 1e-9, "{abc:?}: {}", got[2]);
    }
}

/// A loop inside a cond inside a loop body: `v = v < 1 ? (v x^m, by a loop) : v / 2 + x`.
fn loop_in_cond_by_hand(x: f64, v0: f64, n: i32, m: i32) -> f64 {
    let mut v = v0;
    for _ in 0..n {
        v = if v < 1.0 {
            let mut u = v;
            for _ in 0..m {
                u *= x;
            }
            u + 0.25
        } else {
            v / 2.0 + x
        };
    }
    v
}

#[test]
fn gradient_of_a_loop_in_a_cond_in_a_loop_body_matches_numerical() {
    for parallel in [1, 10] {
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
        let v0 = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
        let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
        let m = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
        let out = while_loop(
            &s,
            |b, v| ops::less(b, &v[0], &n),
            |b, v| {
                let small = ops::less(b, &v[1], &ops::scalar(b, 1.0f64)?)?;
                let r = cond(
                    b,
                    &small,
                    |t| {
                        let inner = while_loop(
                            t,
                            |c, w| ops::less(c, &w[0], &m),
                            |c, w| {
                                Ok(vec![
                                    ops::add(c, &w[0], &ops::scalar(c, 1i32)?)?,
                                    ops::mul(c, &w[1], &x)?,
                                ])
                            },
                            &[ops::scalar(t, 0i32)?, v[1].clone()],
                            &WhileOptions {
                                parallel_iterations: parallel,
                                ..Default::default()
                            },
                        )?;
                        Ok(vec![ops::add(t, &inner[1], &ops::scalar(t, 0.25f64)?)?])
                    },
                    |f| {
                        let half = ops::mul(f, &v[1], &ops::scalar(f, 0.5f64)?)?;
                        Ok(vec![ops::add(f, &half, &x)?])
                    },
                )?;
                Ok(vec![
                    ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                    r[0].clone(),
                ])
            },
            &[ops::scalar(&s, 0i32).unwrap(), v0.clone()],
            &WhileOptions {
                parallel_iterations: parallel,
                ..Default::default()
            },
        )
        .unwrap();
        let v = out[1].clone();
        let g = gradients(&s, std::slice::from_ref(&v), &[x.clone(), v0.clone()], None).unwrap();
        let (gx, gv0) = (g[0].clone().unwrap(), g[1].clone().unwrap());
        let sess = session(&s);
        for (xv, v0v, nv, mv) in [
            (0.8f64, 0.5f64, 5i32, 3i32),
            (1.2, 2.5, 4, 2),
            (0.6, 0.9, 3, 0),
            (0.7, 3.0, 6, 4),
            // Both branches, in either order.
            (0.3, 2.0, 5, 2),
            (1.5, 0.9, 4, 2),
        ] {
            let got = run_scalars(
                &sess,
                &[(&x, xv), (&v0, v0v)],
                &[(&n, nv), (&m, mv)],
                &[&v, &gx, &gv0],
            );
            let want = loop_in_cond_by_hand(xv, v0v, nv, mv);
            assert!((got[0] - want).abs() < 1e-12, "{} vs {want}", got[0]);
            let eps = 1e-6;
            let f = |a: f64, b: f64| loop_in_cond_by_hand(a, b, nv, mv);
            let nx = (f(xv + eps, v0v) - f(xv - eps, v0v)) / (2.0 * eps);
            let nv0 = (f(xv, v0v + eps) - f(xv, v0v - eps)) / (2.0 * eps);
            assert!(
                (got[1] - nx).abs() < 1e-6 * (1.0 + nx.abs()),
                "d/dx at {xv},{v0v},{nv},{mv}: {} vs {nx}",
                got[1]
            );
            assert!(
                (got[2] - nv0).abs() < 1e-6 * (1.0 + nv0.abs()),
                "d/dv0 at {xv},{v0v},{nv},{mv}: {} vs {nv0}",
                got[2]
            );
        }
    }
}

/// TensorFlow's `testWhileGrad_StopGrad` (`control_flow_ops_py_test.py`): a loop of
/// two float variables, `(x, y) -> (x^2 + y^2, y^2)` while `x < 100`, from (3, 2),
/// with `StopGradient`s on either exit; the expected values are TensorFlow's.
#[test]
fn while_gradients_with_stop_gradient_match_tensorflow() {
    let s = Scope::new();
    let x = ops::constant(&s, Tensor::scalar(3.0f32)).unwrap();
    let y = ops::constant(&s, Tensor::scalar(2.0f32)).unwrap();
    let out = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &ops::scalar(b, 100.0f32)?),
        |b, v| {
            let y1 = ops::square(b, &v[1])?;
            Ok(vec![ops::add(b, &ops::square(b, &v[0])?, &y1)?, y1])
        },
        &[x.clone(), y.clone()],
        &WhileOptions::default(),
    )
    .unwrap();
    let (rx, ry) = (out[0].clone(), out[1].clone());
    let sg = |o: &Output| ops::stop_gradient(&s, o).unwrap();
    let sum = |a: &Output, b: &Output| ops::add(&s, a, b).unwrap();
    let cases: Vec<(Output, &Output, Option<f32>)> = vec![
        (rx.clone(), &y, Some(136.0)),
        (ry.clone(), &y, Some(32.0)),
        (sg(&rx), &y, None),
        (sg(&ry), &y, None),
        (sg(&ops::square(&s, &rx).unwrap()), &y, None),
        (sg(&sum(&rx, &ry)), &x, None),
        (sum(&rx, &ry), &y, Some(168.0)),
        (sum(&rx, &sg(&ry)), &y, Some(136.0)),
        (sum(&sg(&rx), &ry), &y, Some(32.0)),
    ];
    let grads: Vec<Option<Output>> = cases
        .iter()
        .map(|(target, wrt, _)| {
            gradients(
                &s,
                std::slice::from_ref(target),
                std::slice::from_ref(*wrt),
                None,
            )
            .unwrap()[0]
                .clone()
        })
        .collect();
    let sess = session(&s);
    for (k, ((_, _, want), g)) in cases.iter().zip(&grads).enumerate() {
        let got = g.as_ref().map(|g| {
            sess.run(&[], &[&g.name()], &[]).unwrap()[0]
                .scalar_value::<f32>()
                .unwrap()
        });
        assert_eq!(got, *want, "case {k}");
    }
}

/// TensorFlow's `testCallGradInLoop`: `gradients` called inside a loop body, of a
/// body value with respect to a value outside the loop, is computed per iteration
/// (TensorFlow's expected value: 10 iterations of d/dp sum([1, 2, 3] p^2) at p = 5).
#[test]
fn gradients_taken_inside_a_loop_body() {
    let s = Scope::new();
    let params = ops::constant(&s, Tensor::scalar(5.0f32)).unwrap();
    let params_1 = ops::square(&s, &params).unwrap();
    let out = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &ops::scalar(b, 10i32)?),
        |b, v| {
            let data = ops::constant(b, Tensor::vector(&[1.0f32, 2.0, 3.0]))?;
            let data = ops::mul(b, &data, &params_1)?;
            let g = gradients(b, &[data], std::slice::from_ref(&params), None)?;
            let g = g[0].clone().expect("params reaches data");
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                ops::add(b, &v[1], &g)?,
            ])
        },
        &[
            ops::scalar(&s, 0i32).unwrap(),
            ops::scalar(&s, 0.0f32).unwrap(),
        ],
        &WhileOptions::default(),
    )
    .unwrap();
    let got = session(&s).run(&[], &[&out[1].name()], &[]).unwrap();
    assert_eq!(got[0].scalar_value::<f32>().unwrap(), 600.0);
}

/// Inside a loop body, the gradient through the value a loop variable entered
/// with is a clear error (the whole loop must be differentiated from outside).
#[test]
fn gradient_inside_a_body_through_a_loop_variable_is_a_clear_error() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let e = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &ops::scalar(b, 10.0f32)?),
        |b, v| {
            let y = ops::square(b, &v[0])?;
            gradients(b, std::slice::from_ref(&y), std::slice::from_ref(&x), None)?;
            Ok(vec![y])
        },
        std::slice::from_ref(&x),
        &WhileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.code(), actorflow::Code::Unimplemented, "{e}");
}

/// `gradients` called inside a cond branch is computed in that branch: only when
/// it is taken.
#[test]
fn gradients_taken_inside_a_cond_branch() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
    let out = cond(
        &s,
        &p,
        |t| {
            let y = ops::mul(t, &ops::square(t, &x)?, &ops::scalar(t, 3.0f64)?)?;
            let g = gradients(t, std::slice::from_ref(&y), std::slice::from_ref(&x), None)?;
            Ok(vec![g[0].clone().expect("x reaches y")])
        },
        |f| Ok(vec![ops::neg(f, &x)?]),
    )
    .unwrap();
    let sess = session(&s);
    for (pv, want) in [(true, 6.0 * 1.5), (false, -1.5)] {
        let feeds = [
            (x.name(), Tensor::scalar(1.5f64)),
            (p.name(), Tensor::scalar(pv)),
        ];
        let feeds: Vec<(&str, Tensor)> =
            feeds.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let got = sess.run(&feeds, &[&out[0].name()], &[]).unwrap();
        assert_eq!(f64_of(&got[0]), vec![want]);
    }
}
