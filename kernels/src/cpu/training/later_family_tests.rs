//! The optimizer families added after the first five (centered RMSProp,
//! Adadelta, the proximal ones, FTRL), beyond their TensorFlow fixtures (which
//! `tests` runs): hand-computed updates, and errors that name the node and the
//! problem and leave every variable unchanged, for four variables too.

use std::sync::Arc;

use graph::{Code, DType, NodeDef, Tensor};

use crate::resource::Var;
use crate::testutil::{run_node_in, test_device, test_step};
use crate::Entry;

/// A node `apply` of `op` with `n` inputs.
fn apply_node(op: &str, n: usize, use_locking: bool) -> NodeDef {
    let mut node = NodeDef::new("apply", op)
        .with_attr("T", DType::F32)
        .with_attr("use_locking", use_locking);
    for _ in 0..n {
        node = node.with_input("x");
    }
    node
}

fn f32_var(v: &[f32]) -> Arc<Var> {
    let x = Arc::new(Var::new("v", DType::F32));
    x.assign(Tensor::vector(v), true).unwrap();
    x
}

#[test]
fn later_families_name_the_node_and_the_problem() {
    let dev = test_device();
    let step = test_step(&dev);
    let s = |v: f32| Entry::Value(Tensor::scalar(v));
    for locking in [false, true] {
        // ApplyCenteredRMSProp (four variables) with a gradient of the wrong shape
        let vars: Vec<Arc<Var>> = (0..4).map(|_| f32_var(&[1.0, 2.0])).collect();
        let mut inputs: Vec<Entry> = vars.iter().map(|v| Entry::Ref(Arc::clone(v))).collect();
        inputs.extend([s(0.1), s(0.9), s(0.5), s(1e-7)]);
        let mut bad = inputs.clone();
        bad.push(Tensor::vector(&[1.0f32]).into());
        let e =
            run_node_in(&step, apply_node("ApplyCenteredRMSProp", 9, locking), bad).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(e.node(), Some("apply"), "{e}");
        assert!(
            e.message()
                .contains("var and grad do not have the same shape"),
            "{e}"
        );
        // the same variable as ms and mom
        let mut same = inputs.clone();
        same[3] = Entry::Ref(Arc::clone(&vars[2]));
        same.push(Tensor::vector(&[1.0f32, 1.0]).into());
        let e =
            run_node_in(&step, apply_node("ApplyCenteredRMSProp", 9, locking), same).unwrap_err();
        assert!(
            e.message().contains("ms and mom are the same variable"),
            "{e}"
        );
        // a slot of another shape
        let mut short = inputs.clone();
        short[1] = Entry::Ref(f32_var(&[0.0]));
        short.push(Tensor::vector(&[1.0f32, 1.0]).into());
        let e =
            run_node_in(&step, apply_node("ApplyCenteredRMSProp", 9, locking), short).unwrap_err();
        assert!(
            e.message()
                .contains("var and mg do not have the same shape"),
            "{e}"
        );
        for v in &vars {
            assert_eq!(v.read().unwrap(), Tensor::vector(&[1.0f32, 2.0]));
        }
        // ApplyFtrl: the gradient comes first
        let (v, a, l) = (
            f32_var(&[1.0, 2.0]),
            f32_var(&[0.1, 0.1]),
            f32_var(&[0.0, 0.0]),
        );
        let e = run_node_in(
            &step,
            apply_node("ApplyFtrl", 8, locking),
            vec![
                Entry::Ref(Arc::clone(&v)),
                Entry::Ref(a),
                Entry::Ref(l),
                Tensor::vector(&[1.0f32, 1.0, 1.0]).into(),
                s(0.1),
                s(0.0),
                s(0.0),
                s(-0.5),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(e.node(), Some("apply"), "{e}");
        assert!(
            e.message()
                .contains("var and grad do not have the same shape"),
            "{e}"
        );
        assert_eq!(v.read().unwrap(), Tensor::vector(&[1.0f32, 2.0]));
        // ApplyProximalAdagrad insists on a positive learning rate and
        // non-negative regularisation, as TensorFlow's kernel does
        for (lr, l1, l2, what) in [
            (0.0f32, 0.0f32, 0.0f32, "lr is not a positive scalar"),
            (
                0.1,
                -0.1,
                0.0,
                "l1 regularization strength is not a non-negative scalar",
            ),
            (
                0.1,
                0.0,
                -0.1,
                "l2 regularization strength is not a non-negative scalar",
            ),
        ] {
            let (v, a) = (f32_var(&[1.0, 2.0]), f32_var(&[0.1, 0.1]));
            let e = run_node_in(
                &step,
                apply_node("ApplyProximalAdagrad", 6, locking),
                vec![
                    Entry::Ref(Arc::clone(&v)),
                    Entry::Ref(a),
                    s(lr),
                    s(l1),
                    s(l2),
                    Tensor::vector(&[1.0f32, 1.0]).into(),
                ],
            )
            .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
            assert!(e.message().contains(what), "{e}");
            assert_eq!(v.read().unwrap(), Tensor::vector(&[1.0f32, 2.0]));
        }
    }
}

#[test]
fn hand_computed_proximal_and_adadelta() {
    let dev = test_device();
    let step = test_step(&dev);
    let s = |v: f64| Entry::Value(Tensor::scalar(v));
    let var = |v: &[f64]| {
        let x = Arc::new(Var::new("v", DType::F64));
        x.assign(Tensor::vector(v), true).unwrap();
        x
    };
    // ProximalGradientDescent, alpha 0.5, l1 0.2, l2 1: prox = var - 0.5 * grad =
    // [0.5, -0.05, 2]; shrink by 0.1 and divide by 1.5: [0.4/1.5, 0, 1.9/1.5]
    let v = var(&[1.0, 0.0, 2.0]);
    let node = NodeDef::new("pgd", "ApplyProximalGradientDescent")
        .with_attr("T", DType::F64)
        .with_input("v")
        .with_input("a")
        .with_input("l1")
        .with_input("l2")
        .with_input("d");
    let out = run_node_in(
        &step,
        node,
        vec![
            Entry::Ref(Arc::clone(&v)),
            s(0.5),
            s(0.2),
            s(1.0),
            Tensor::vector(&[1.0f64, 0.1, 0.0]).into(),
        ],
    )
    .unwrap();
    let got = out[0].to_tensor().unwrap().to_f64_vec().unwrap();
    for (g, w) in got.iter().zip([0.4 / 1.5, 0.0, 1.9 / 1.5]) {
        assert!((g - w).abs() < 1e-15, "{got:?}");
    }
    // Adadelta, lr 1, rho 0.5, epsilon 0: accum = 0.5 * 1 + 0.5 * 4 = 2.5;
    // update = sqrt(0.5) / sqrt(2.5) * 2; var -= update;
    // accum_update = 0.5 * 0.5 + 0.5 * update²
    let (v, a, u) = (var(&[1.0]), var(&[1.0]), var(&[0.5]));
    let node = NodeDef::new("ada", "ApplyAdadelta")
        .with_attr("T", DType::F64)
        .with_input("v")
        .with_input("a")
        .with_input("u")
        .with_input("lr")
        .with_input("rho")
        .with_input("eps")
        .with_input("g");
    run_node_in(
        &step,
        node,
        vec![
            Entry::Ref(Arc::clone(&v)),
            Entry::Ref(Arc::clone(&a)),
            Entry::Ref(Arc::clone(&u)),
            s(1.0),
            s(0.5),
            s(0.0),
            Tensor::vector(&[2.0f64]).into(),
        ],
    )
    .unwrap();
    let update = (0.5f64).sqrt() / (2.5f64).sqrt() * 2.0;
    let close = |x: &Arc<Var>, w: f64| {
        let got = x.read().unwrap().to_f64_vec().unwrap()[0];
        assert!((got - w).abs() < 1e-14, "{got} vs {w}");
    };
    close(&a, 2.5);
    close(&v, 1.0 - update);
    close(&u, 0.25 + 0.5 * update * update);
}
