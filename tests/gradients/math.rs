//! Numerical checks of the math gradients: broadcasting binary ops, unary
//! functions, reductions, scans, matrix products, casts and selects.

use actorflow::{ops, Output, Result, Scope, Tensor};

use crate::checker::{check, check_opts, rand, t, Opts};

type Bin = fn(&Scope, &Output, &Output) -> Result<Output>;

/// Operand shape pairs covering no broadcast, scalar, row, column and rank
/// broadcasting in both directions.
const SHAPES: [(&[usize], &[usize]); 5] = [
    (&[2, 3], &[2, 3]),
    (&[2, 3], &[]),
    (&[3], &[2, 3]),
    (&[2, 1], &[1, 3]),
    (&[4, 1, 3], &[2, 1]),
];

fn check_binary(name: &str, f: Bin, lo: f64, hi: f64) {
    for (i, (a, b)) in SHAPES.iter().enumerate() {
        let x = rand(a, 10 + i as u64, lo, hi);
        let y = rand(b, 20 + i as u64, lo, hi);
        check(&format!("{name} {a:?} {b:?}"), [x, y], |s, v| {
            f(s, &v[0], &v[1])
        });
    }
}

#[test]
fn add_sub_mul_with_broadcasting() {
    check_binary("AddV2", ops::add, -2.0, 2.0);
    check_binary("Add", ops::add_v1, -2.0, 2.0);
    check_binary("Sub", ops::sub, -2.0, 2.0);
    check_binary("Mul", ops::mul, -2.0, 2.0);
}

#[test]
fn divisions_with_broadcasting() {
    check_binary("Div", ops::div, 0.5, 2.0);
    check_binary("RealDiv", ops::real_div, 0.5, 2.0);
    check_binary("DivNoNan", ops::div_no_nan, 0.5, 2.0);
}

#[test]
fn maximum_minimum_pow_squared_difference() {
    // Random operands never tie.
    check_binary("Maximum", ops::maximum, -2.0, 2.0);
    check_binary("Minimum", ops::minimum, -2.0, 2.0);
    check_binary("Pow", ops::pow, 0.5, 2.0);
    check_binary("SquaredDifference", ops::squared_difference, -2.0, 2.0);
    // FloorMod away from its jumps: x in (0.1, 0.9) * y keeps floor(x / y) fixed.
    let x = t(&[2, 2], &[0.3, 2.5, -0.7, 5.2]);
    let y = t(&[2], &[1.0, 2.0]);
    check("FloorMod", [x, y], |s, v| ops::floor_mod(s, &v[0], &v[1]));
}

#[test]
fn pow_at_nonpositive_bases_has_a_finite_exponent_gradient() {
    // d/dy x^y at x = 0 is taken as 0 (TensorFlow's mask), and x^2 is smooth.
    let x = t(&[3], &[0.0, -1.5, 2.0]);
    let y = t(&[3], &[2.0, 2.0, 2.0]);
    let s = Scope::new();
    let (px, py) = (ops::constant(&s, x).unwrap(), ops::constant(&s, y).unwrap());
    let z = ops::pow(&s, &px, &py).unwrap();
    let g = actorflow::graph::gradients::gradients(&s, &[z], &[px, py], None).unwrap();
    let sess = crate::any_placement::AnyPlacement::new(&s.graph_def()).unwrap();
    let out = sess
        .run(
            &[],
            &[
                &g[0].as_ref().unwrap().name(),
                &g[1].as_ref().unwrap().name(),
            ],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[0.0, -3.0, 4.0]);
    let gy = out[1].as_slice::<f64>().unwrap();
    assert_eq!(&gy[..2], &[0.0, 0.0]);
    assert!((gy[2] - 4.0 * 2f64.ln()).abs() < 1e-12);
}

#[test]
fn add_n() {
    let xs: Vec<Tensor> = (0..3).map(|i| rand(&[2, 3], i, -1.0, 1.0)).collect();
    check("AddN", xs, |s, v| {
        let sq = ops::mul(s, &v[0], &v[0])?;
        ops::add_n(s, &[sq, v[1].clone(), v[2].clone(), v[0].clone()])
    });
}

type Un = fn(&Scope, &Output) -> Result<Output>;

#[test]
fn unary_functions() {
    let cases: [(&str, Un, f64, f64); 20] = [
        ("Neg", ops::neg, -2.0, 2.0),
        ("Abs", ops::abs, 0.2, 2.0),
        ("Abs<0", ops::abs, -2.0, -0.2),
        ("Sign", ops::sign, -2.0, 2.0),
        ("Exp", ops::exp, -2.0, 2.0),
        ("Expm1", ops::expm1, -2.0, 2.0),
        ("Log", ops::log, 0.2, 3.0),
        ("Log1p", ops::log1p, -0.5, 3.0),
        ("Sqrt", ops::sqrt, 0.2, 3.0),
        ("Rsqrt", ops::rsqrt, 0.2, 3.0),
        ("Square", ops::square, -2.0, 2.0),
        ("Reciprocal", ops::reciprocal, 0.3, 3.0),
        ("Inv", ops::inv, -3.0, -0.3),
        ("Tanh", ops::tanh, -2.0, 2.0),
        ("Sigmoid", ops::sigmoid, -3.0, 3.0),
        ("Sin", ops::sin, -3.0, 3.0),
        ("Cos", ops::cos, -3.0, 3.0),
        ("Floor", ops::floor, 0.1, 0.9),
        ("Ceil", ops::ceil, 1.1, 1.9),
        ("Round", ops::round, 2.1, 2.4),
    ];
    for (i, (name, f, lo, hi)) in cases.into_iter().enumerate() {
        let x = rand(&[2, 3], 100 + i as u64, lo, hi);
        check(name, [x], |s, v| f(s, &v[0]));
    }
}

#[test]
fn second_order_through_the_gradient_kernels() {
    // d/dx of (d/dx f) exercises TanhGrad's, SigmoidGrad's, … own gradients.
    let cases: [(&str, Un, f64, f64); 5] = [
        ("Tanh''", ops::tanh, -2.0, 2.0),
        ("Sigmoid''", ops::sigmoid, -2.0, 2.0),
        ("Sqrt''", ops::sqrt, 0.5, 3.0),
        ("Rsqrt''", ops::rsqrt, 0.5, 3.0),
        ("Reciprocal''", ops::reciprocal, 0.5, 3.0),
    ];
    for (i, (name, f, lo, hi)) in cases.into_iter().enumerate() {
        let x = rand(&[5], 200 + i as u64, lo, hi);
        let w = rand(&[5], 300 + i as u64, -1.0, 1.0);
        // y = sum(w * f'(x)) through gradients with grad_ys = w.
        check(name, [x, w], |s, v| {
            let y = f(s, &v[0])?;
            let g = actorflow::graph::gradients::gradients(
                s,
                &[y],
                std::slice::from_ref(&v[0]),
                Some(std::slice::from_ref(&v[1])),
            )?;
            Ok(g[0].clone().expect("a gradient"))
        });
    }
}

#[test]
fn reductions_with_keep_dims_and_negative_axes() {
    type Red = fn(&Scope, &Output, &[i64], bool) -> Result<Output>;
    let reds: [(&str, Red); 5] = [
        ("Sum", ops::sum_axes),
        ("Mean", ops::mean_axes),
        ("Max", ops::reduce_max_axes),
        ("Min", ops::reduce_min_axes),
        ("Prod", ops::prod_axes),
    ];
    let axes: [&[i64]; 6] = [&[0], &[-1], &[0, 2], &[1, -3], &[], &[0, 1, 2]];
    for (r, (name, f)) in reds.into_iter().enumerate() {
        for (a, ax) in axes.iter().enumerate() {
            for keep in [false, true] {
                let x = rand(&[2, 3, 2], 400 + (r * 10 + a) as u64, 0.5, 1.5);
                check(&format!("{name} {ax:?} keep_dims={keep}"), [x], |s, v| {
                    f(s, &v[0], ax, keep)
                });
            }
        }
    }
}

#[test]
fn max_splits_ties_and_prod_handles_zeros() {
    // Tied maxima share the gradient evenly (TensorFlow's convention, checked by hand).
    let s = Scope::new();
    let x = ops::constant(&s, t(&[2, 2], &[3.0, 3.0, 1.0, 2.0])).unwrap();
    let y = ops::reduce_max_axes(&s, &x, &[1], false).unwrap();
    let g = actorflow::graph::gradients::gradients(&s, &[y], &[x], None).unwrap();
    let sess = crate::any_placement::AnyPlacement::new(&s.graph_def()).unwrap();
    let out = sess
        .run(&[], &[&g[0].as_ref().unwrap().name()], &[])
        .unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[0.5, 0.5, 0.0, 1.0]);
    // Prod with one and with two zeros in a group: the product of the others.
    let x = t(&[2, 3], &[2.0, 0.0, 3.0, 0.0, 0.0, 5.0]);
    check("Prod with zeros", [x], |s, v| {
        ops::prod_axes(s, &v[0], &[1], false)
    });
}

#[test]
fn reductions_over_run_time_axes() {
    // Axes fed at run time take the dynamic reduced-shape path even with known shapes.
    let x = rand(&[2, 3, 2], 7, 0.5, 1.5);
    for (name, op) in [
        ("Sum", "Sum"),
        ("Mean", "Mean"),
        ("Max", "Max"),
        ("Prod", "Prod"),
    ] {
        for keep in [false, true] {
            check(
                &format!("{name} over an Identity of the axes, keep_dims={keep}"),
                [x.clone()],
                |s, v| {
                    let axes = ops::identity(s, &ops::index_vector(s, &[-1, 0])?)?;
                    s.op(op)
                        .input(&v[0])
                        .input(&axes)
                        .attr("keep_dims", keep)
                        .build1()
                },
            );
        }
    }
}

#[test]
fn scans() {
    let x = rand(&[2, 3], 9, 0.5, 1.5);
    for exclusive in [false, true] {
        for reverse in [false, true] {
            for axis in [0i32, -1] {
                let label = format!("axis {axis} exclusive {exclusive} reverse {reverse}");
                check(&format!("Cumsum {label}"), [x.clone()], |s, v| {
                    ops::cumsum(s, &v[0], &ops::scalar(s, axis)?, exclusive, reverse)
                });
                check(&format!("Cumprod {label}"), [x.clone()], |s, v| {
                    ops::cumprod(s, &v[0], &ops::scalar(s, axis)?, exclusive, reverse)
                });
            }
        }
    }
}

#[test]
fn unsorted_segment_sum() {
    let data = rand(&[4, 3], 11, -1.0, 1.0);
    check("UnsortedSegmentSum", [data], |s, v| {
        let ids = ops::constant(s, Tensor::vector(&[2i32, 0, -1, 2]))?;
        let n = ops::scalar(s, 3i32)?;
        ops::unsorted_segment_sum(s, &v[0], &ids, &n)
    });
}

#[test]
fn mat_mul_every_transpose() {
    for ta in [false, true] {
        for tb in [false, true] {
            let a = rand(if ta { &[3, 2] } else { &[2, 3] }, 12, -1.0, 1.0);
            let b = rand(if tb { &[4, 3] } else { &[3, 4] }, 13, -1.0, 1.0);
            check(&format!("MatMul ta={ta} tb={tb}"), [a, b], |s, v| {
                ops::mat_mul(s, &v[0], &v[1], ta, tb)
            });
        }
    }
}

#[test]
fn batch_mat_mul_with_broadcasting() {
    let shapes: [(&[usize], &[usize]); 3] = [
        (&[2, 2, 3], &[2, 3, 2]),
        (&[2, 1, 2, 3], &[3, 3, 2]),
        (&[2, 3], &[3, 3, 2]),
    ];
    for (i, (xs, ys)) in shapes.iter().enumerate() {
        for adj_x in [false, true] {
            for adj_y in [false, true] {
                let swap = |d: &[usize], t: bool| {
                    let mut d = d.to_vec();
                    let n = d.len();
                    if t {
                        d.swap(n - 1, n - 2);
                    }
                    d
                };
                let x = rand(&swap(xs, adj_x), 20 + i as u64, -1.0, 1.0);
                let y = rand(&swap(ys, adj_y), 30 + i as u64, -1.0, 1.0);
                check(
                    &format!("BatchMatMulV2 {xs:?} {ys:?} adj {adj_x} {adj_y}"),
                    [x, y],
                    |s, v| ops::batch_mat_mul(s, &v[0], &v[1], adj_x, adj_y),
                );
            }
        }
    }
    let x = rand(&[2, 2, 3], 40, -1.0, 1.0);
    let y = rand(&[2, 3, 2], 41, -1.0, 1.0);
    check("BatchMatMulV3", [x.clone(), y.clone()], |s, v| {
        ops::batch_mat_mul_v3(s, &v[0], &v[1], actorflow::DType::F64, false, false)
    });
    check("BatchMatMul", [x, y], |s, v| {
        s.op("BatchMatMul").input(&v[0]).input(&v[1]).build1()
    });
}

#[test]
fn cast_between_floats() {
    // Through float32 and back: a looser step and tolerance for float32 rounding.
    let opts = Opts {
        eps: 1e-2,
        tol: 1e-4,
        unknown_shapes: true,
    };
    let x = rand(&[2, 2], 14, -1.0, 1.0);
    check_opts("Cast", [x], opts, |s, v| {
        let f = ops::cast(s, &v[0], actorflow::DType::F32)?;
        let three = ops::scalar(s, 3.0f32)?;
        ops::cast(s, &ops::mul(s, &f, &three)?, actorflow::DType::F64)
    });
}

#[test]
fn select_and_select_v2() {
    let x = rand(&[2, 3], 15, -1.0, 1.0);
    let y = rand(&[2, 3], 16, -1.0, 1.0);
    check("Select", [x.clone(), y.clone()], |s, v| {
        let c = ops::constant(
            s,
            Tensor::new(&[2, 3], vec![true, false, true, false, false, true])?,
        )?;
        ops::select(s, &c, &v[0], &v[1])
    });
    check("Select (vector condition)", [x, y], |s, v| {
        let c = ops::constant(s, Tensor::vector(&[false, true]))?;
        ops::select(s, &c, &v[0], &v[1])
    });
    let x = rand(&[3], 17, -1.0, 1.0);
    let y = rand(&[2, 1], 18, -1.0, 1.0);
    check("SelectV2 broadcasting", [x, y], |s, v| {
        let c = ops::constant(s, Tensor::new(&[2, 1], vec![true, false])?)?;
        ops::select_v2(s, &c, &v[0], &v[1])
    });
}
