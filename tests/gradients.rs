//! The per-op gradient functions checked against central differences of the
//! forward graph run in a session (TensorFlow's `gradient_checker`, in
//! `gradients/checker.rs`), op family by op family; then an MLP trained end to end
//! with the symbolic gradients, gradients with respect to variables, inside a cond,
//! and the errors for ops without a gradient.

mod any_placement;
#[path = "gradients/array.rs"]
mod array;
#[path = "gradients/checker.rs"]
mod checker;
#[allow(dead_code)]
#[path = "graph_fixture/mod.rs"]
mod graph_fixture;
#[path = "gradients/math.rs"]
mod math;
#[path = "gradients/model_ops.rs"]
mod model_ops;
#[path = "gradients/nn.rs"]
mod nn;
#[path = "gradients/pooling.rs"]
mod pooling;
#[path = "gradients/resize_space.rs"]
mod resize_space;
#[path = "gradients/segment.rs"]
mod segment;
#[path = "gradients/tensor_array.rs"]
mod tensor_array;

use actorflow::graph::builder::cond;
use actorflow::graph::gradients::gradients;
use actorflow::{ops, Code, DType, Output, Result, Scope, Shape, Tensor};

use any_placement::AnyPlacement;
use checker::{check, rand, t};

/// Every step runs on one device and spread over several, which must agree.
fn session(s: &Scope) -> AnyPlacement {
    AnyPlacement::new(&s.graph_def()).unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.as_slice::<f64>().unwrap().to_vec()
}

/// `mean(xent(relu(x·w1 + b1)·w2 + b2, labels))` for a 4×3 batch, 5 hidden units
/// and 3 classes.
fn mlp_loss(s: &Scope, x: &Tensor, w: &[Output], sparse: bool) -> Result<Output> {
    let xin = ops::constant(s, x.clone())?;
    let h = ops::relu(
        s,
        &ops::bias_add(
            s,
            &ops::mat_mul(s, &xin, &w[0], false, false)?,
            &w[1],
            "NHWC",
        )?,
    )?;
    let logits = ops::bias_add(s, &ops::mat_mul(s, &h, &w[2], false, false)?, &w[3], "NHWC")?;
    let loss = if sparse {
        let labels = ops::constant(s, Tensor::vector(&[0i32, 2, 1, 2]))?;
        ops::sparse_softmax_cross_entropy_with_logits(s, &logits, &labels)?.0
    } else {
        let labels = ops::constant(
            s,
            t(&[4, 3], &[1., 0., 0., 0., 0., 1., 0., 1., 0., 0., 0., 1.]),
        )?;
        ops::softmax_cross_entropy_with_logits(s, &logits, &labels)?.0
    };
    ops::mean_axes(s, &loss, &[0], false)
}

fn mlp_params() -> Vec<Tensor> {
    vec![
        rand(&[3, 5], 1, -1.0, 1.0),
        rand(&[5], 2, -0.5, 0.5),
        rand(&[5, 3], 3, -1.0, 1.0),
        rand(&[3], 4, -0.5, 0.5),
    ]
}

#[test]
fn mlp_loss_gradients_match_numerical() {
    let x = rand(&[4, 3], 5, -2.0, 2.0);
    for sparse in [false, true] {
        check(
            &format!("MLP (sparse labels: {sparse})"),
            mlp_params(),
            |s, w| mlp_loss(s, &x, w, sparse),
        );
    }
}

#[test]
fn mlp_trains_by_gradient_descent() {
    let s = Scope::new();
    let x = rand(&[4, 3], 5, -2.0, 2.0);
    let w: Vec<Output> = mlp_params()
        .iter()
        .map(|p| ops::placeholder(&s, DType::F64, Shape::known(p.dims())).unwrap())
        .collect();
    let loss = mlp_loss(&s, &x, &w, false).unwrap();
    let grads: Vec<Output> = gradients(&s, std::slice::from_ref(&loss), &w, None)
        .unwrap()
        .into_iter()
        .map(|g| g.expect("every parameter affects the loss"))
        .collect();
    let sess = session(&s);
    let names: Vec<String> = w.iter().map(Output::name).collect();
    let mut fetch = vec![loss.name()];
    fetch.extend(grads.iter().map(Output::name));
    let fetch: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let mut params = mlp_params();
    let mut first = None;
    let mut last = 0.0;
    for _ in 0..300 {
        let feeds: Vec<(&str, Tensor)> = names
            .iter()
            .map(String::as_str)
            .zip(params.iter().cloned())
            .collect();
        let out = sess.run(&feeds, &fetch, &[]).unwrap();
        last = f64s(&out[0])[0];
        first.get_or_insert(last);
        for (p, g) in params.iter_mut().zip(&out[1..]) {
            let v: Vec<f64> = f64s(p)
                .iter()
                .zip(f64s(g))
                .map(|(a, b)| a - 0.5 * b)
                .collect();
            *p = Tensor::new(p.dims(), v).unwrap();
        }
    }
    let first = first.unwrap();
    assert!(last < 0.05 && last < first / 10.0, "loss {first} -> {last}");
}

#[test]
fn gradients_with_respect_to_variables() {
    // loss = sum(v * v * x): d/dv = 2 v x.
    let s = Scope::new();
    let x = ops::constant(&s, Tensor::vector(&[0.5f64, -1.0, 2.0])).unwrap();
    let init = ops::constant(&s, Tensor::vector(&[1.0f64, 2.0, 3.0])).unwrap();
    let v = ops::variable(&s, Shape::known(&[3]), DType::F64).unwrap();
    let assign = ops::assign(&s, &v, &init).unwrap();
    let vv = ops::mul(&s, &v, &v).unwrap();
    let loss = ops::sum_axes(&s, &ops::mul(&s, &vv, &x).unwrap(), &[0], false).unwrap();
    let gv = gradients(&s, &[loss], &[v], None).unwrap()[0]
        .clone()
        .unwrap();
    // The same through a resource variable: the read's gradient and the handle's.
    let h = ops::var_handle_op(&s, DType::F64, Shape::known(&[3])).unwrap();
    let init_r = ops::assign_variable_op(&s, &h, &init).unwrap();
    let r = ops::read_variable_op(&s, &h, DType::F64).unwrap();
    let r2 = ops::read_variable_op(&s, &h, DType::F64).unwrap();
    let loss_r = ops::sum_axes(
        &s,
        &ops::mul(&s, &ops::mul(&s, &r, &r2).unwrap(), &x).unwrap(),
        &[0],
        false,
    )
    .unwrap();
    let g = gradients(&s, &[loss_r], &[h.clone(), r.clone()], None).unwrap();
    let (gh, gr) = (
        g[0].clone().expect("handle gradient"),
        g[1].clone().expect("read gradient"),
    );
    let sess = session(&s);
    sess.run(&[], &[], &[assign.op().name(), init_r.name()])
        .unwrap();
    let out = sess
        .run(&[], &[&gv.name(), &gh.name(), &gr.name()], &[])
        .unwrap();
    assert_eq!(f64s(&out[0]), [1.0, -4.0, 12.0]);
    assert_eq!(
        f64s(&out[1]),
        [1.0, -4.0, 12.0],
        "both reads reach the handle"
    );
    assert_eq!(f64s(&out[2]), [0.5, -2.0, 6.0], "one read: r2 * x");
}

#[test]
fn gradients_inside_a_cond() {
    // y = p ? x * x : sin(x) * 3, differentiated through the branch taken.
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::known(&[2])).unwrap();
    let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
    let y = cond(
        &s,
        &p,
        |b| Ok(vec![ops::mul(b, &x, &x)?]),
        |b| {
            Ok(vec![ops::mul(
                b,
                &ops::sin(b, &x)?,
                &ops::scalar(b, 3.0f64)?,
            )?])
        },
    )
    .unwrap()
    .remove(0);
    let y = ops::sum_axes(&s, &y, &[0], false).unwrap();
    let g = gradients(&s, &[y], std::slice::from_ref(&x), None).unwrap()[0]
        .clone()
        .unwrap();
    let sess = session(&s);
    let xv = [0.5f64, -1.5];
    for taken in [true, false] {
        let out = sess
            .run(
                &[
                    (&x.name(), Tensor::vector(&xv)),
                    (&p.name(), Tensor::scalar(taken)),
                ],
                &[&g.name()],
                &[],
            )
            .unwrap();
        let want: Vec<f64> = xv
            .iter()
            .map(|&v| if taken { 2.0 * v } else { 3.0 * v.cos() })
            .collect();
        for (a, b) in f64s(&out[0]).iter().zip(&want) {
            assert!((a - b).abs() < 1e-12, "branch {taken}: {a} vs {b}");
        }
    }
}

#[test]
fn ops_without_a_gradient_are_errors_naming_them() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::known(&[3])).unwrap();
    let y = ops::mirror_pad_by(&s, &x, &[[1, 1]], "REFLECT").unwrap();
    let e = gradients(&s, std::slice::from_ref(&y), std::slice::from_ref(&x), None).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    assert!(e.message().contains("MirrorPad"), "{e}");
    // Ops registered as passing no gradient give none, not an error.
    let f = ops::floor(&s, &x).unwrap();
    assert!(gradients(&s, &[f], std::slice::from_ref(&x), None).unwrap()[0].is_none());
    let eq = ops::cast(&s, &ops::equal(&s, &x, &x).unwrap(), DType::F64).unwrap();
    assert!(gradients(&s, &[eq], &[x], None).unwrap()[0].is_none());
}
