//! Optimizer kernels against TensorFlow's (fixtures from
//! `kernels/tests/fixtures/gen_training.py`: three steps of each optimizer run by
//! `tf.raw_ops.ResourceApply*`), in both forms and both locking modes, plus the
//! error cases.

use std::sync::Arc;

use graph::{Code, DType, NodeDef, ResourceHandle, Tensor};
use serde_json::Value;

use crate::resource::Var;
use crate::testutil::{run_node_in, test_device, test_step};
use crate::Entry;

const FIXTURES: &str = include_str!("../../../tests/fixtures/training.json");

fn dtype_of(name: &str) -> DType {
    match name {
        "float32" => DType::F32,
        _ => DType::F64,
    }
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("fixture arrays are arrays")
        .iter()
        .map(|x| x.as_f64().expect("fixture values are numbers"))
        .collect()
}

fn tensor(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
    match dtype {
        DType::F32 => Tensor::new(shape, v.iter().map(|&x| x as f32).collect()).unwrap(),
        _ => Tensor::new(shape, v.to_vec()).unwrap(),
    }
}

fn scalar(dtype: DType, v: f64) -> Tensor {
    match dtype {
        DType::F32 => Tensor::scalar(v as f32),
        _ => Tensor::scalar(v),
    }
}

/// Input names after the variables, in TensorFlow's order.
fn rest_names(op: &str) -> &'static [&'static str] {
    match op {
        "GradientDescent" => &["alpha", "delta"],
        "Momentum" => &["lr", "grad", "momentum"],
        "Adam" => &[
            "beta1_power",
            "beta2_power",
            "lr",
            "beta1",
            "beta2",
            "epsilon",
            "grad",
        ],
        "RMSProp" | "CenteredRMSProp" => &["lr", "rho", "momentum", "epsilon", "grad"],
        "Adadelta" => &["lr", "rho", "epsilon", "grad"],
        "ProximalGradientDescent" => &["alpha", "l1", "l2", "delta"],
        "ProximalAdagrad" => &["lr", "l1", "l2", "grad"],
        "Ftrl" => &["grad", "lr", "l1", "l2", "lr_power"],
        "FtrlV2" => &["grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power"],
        other => panic!("no fixture inputs for {other}"),
    }
}

fn assert_close(got: &Tensor, want: &[f64], dtype: DType, what: &str) {
    let got = got.to_f64_vec().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    let rtol = if dtype == DType::F32 { 2e-6 } else { 1e-13 };
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rtol * w.abs().max(1e-3),
            "{what}[{i}]: got {g}, TensorFlow {w}"
        );
    }
}

/// Runs every fixture case with the given form and locking.
fn run_cases(resource: bool, use_locking: bool) {
    let cases: Value = serde_json::from_str(FIXTURES).unwrap();
    for case in cases["cases"].as_array().unwrap() {
        let op = case["op"].as_str().unwrap();
        let dtype = dtype_of(case["dtype"].as_str().unwrap());
        let shape: Vec<usize> = floats(&case["shape"]).iter().map(|&d| d as usize).collect();
        let slots: Vec<&str> = case["slots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let names: Vec<&str> = std::iter::once("var")
            .chain(slots.iter().copied())
            .collect();
        let dev = test_device();
        let step = test_step(&dev);
        let mut var_entries = Vec::new();
        let mut vars = Vec::new();
        for n in &names {
            let v = Var::new(n, dtype);
            v.assign(tensor(dtype, &shape, &floats(&case["init"][n])), true)
                .unwrap();
            let v = if resource {
                let v = dev.resources.create("c", n, v).unwrap();
                let h = ResourceHandle {
                    device: dev.name.clone(),
                    container: "c".into(),
                    name: (*n).into(),
                    type_name: "Var".into(),
                };
                var_entries.push(Entry::Value(Tensor::resource_scalar(h)));
                v
            } else {
                let v = Arc::new(v);
                var_entries.push(Entry::Ref(Arc::clone(&v)));
                v
            };
            vars.push(v);
        }
        let op_name = if resource {
            format!("ResourceApply{op}")
        } else {
            format!("Apply{op}")
        };
        let mut node = NodeDef::new("apply", &op_name)
            .with_attr("T", dtype)
            .with_attr("use_locking", use_locking);
        for n in names.iter().chain(rest_names(op)) {
            node = node.with_input(*n);
        }
        let nesterov = case["nesterov"].as_bool().unwrap();
        if op == "Momentum" || op == "Adam" {
            node = node.with_attr("use_nesterov", nesterov);
        }
        for (k, v) in case["attrs"].as_object().into_iter().flatten() {
            node = node.with_attr(k, v.as_bool().expect("fixture attrs are flags"));
        }
        let what = format!(
            "{op_name} {dtype} nesterov={nesterov} {} locking={use_locking} {:?}",
            case["attrs"], case["scalars"][0]
        );
        for (t, expect) in case["expect"].as_array().unwrap().iter().enumerate() {
            let mut inputs = var_entries.clone();
            let grad = tensor(dtype, &shape, &floats(&case["grads"][t]));
            for r in rest_names(op) {
                inputs.push(Entry::Value(if *r == "grad" || *r == "delta" {
                    grad.clone()
                } else {
                    scalar(dtype, case["scalars"][t][r].as_f64().unwrap())
                }));
            }
            let out = run_node_in(&step, node.clone(), inputs).unwrap();
            if !resource {
                // the ref forms output the updated variable
                assert_close(
                    &out[0].to_tensor().unwrap(),
                    &floats(&expect["var"]),
                    dtype,
                    &what,
                );
            }
            for (n, v) in names.iter().zip(&vars) {
                assert_close(
                    &v.read().unwrap(),
                    &floats(&expect[n]),
                    dtype,
                    &format!("{what} step {t} {n}"),
                );
            }
        }
    }
}

#[test]
fn ref_forms_match_tensorflow() {
    run_cases(false, false);
    run_cases(false, true);
}

#[test]
fn resource_forms_match_tensorflow() {
    run_cases(true, false);
    run_cases(true, true);
}

#[test]
fn hand_computed_momentum_and_descent() {
    // var = [1, 2], accum = [0.5, -1], grad = [1, 1], lr = 0.1, momentum = 0.9:
    // accum = [0.5*0.9+1, -1*0.9+1] = [1.45, 0.1]; var -= 0.1*accum = [0.855, 1.99]
    let var = Arc::new(Var::new("v", DType::F64));
    var.assign(Tensor::vector(&[1.0f64, 2.0]), true).unwrap();
    let acc = Arc::new(Var::new("a", DType::F64));
    acc.assign(Tensor::vector(&[0.5f64, -1.0]), true).unwrap();
    let node = NodeDef::new("m", "ApplyMomentum")
        .with_input("v")
        .with_input("a")
        .with_input("lr")
        .with_input("g")
        .with_input("mom")
        .with_attr("T", DType::F64);
    let dev = test_device();
    let step = test_step(&dev);
    run_node_in(
        &step,
        node,
        vec![
            Entry::Ref(Arc::clone(&var)),
            Entry::Ref(Arc::clone(&acc)),
            Tensor::scalar(0.1f64).into(),
            Tensor::vector(&[1.0f64, 1.0]).into(),
            Tensor::scalar(0.9f64).into(),
        ],
    )
    .unwrap();
    let a = acc.read().unwrap().to_f64_vec().unwrap();
    assert!(
        (a[0] - 1.45).abs() < 1e-15 && (a[1] - 0.1).abs() < 1e-15,
        "{a:?}"
    );
    let v = var.read().unwrap().to_f64_vec().unwrap();
    assert!(
        (v[0] - 0.855).abs() < 1e-15 && (v[1] - 1.99).abs() < 1e-15,
        "{v:?}"
    );
    // gradient descent: [0.855, 1.99] - 0.5 * [0.1, -0.2] = [0.805, 2.09]
    let gd = NodeDef::new("gd", "ApplyGradientDescent")
        .with_input("v")
        .with_input("a")
        .with_input("d")
        .with_attr("T", DType::F64);
    let out = run_node_in(
        &step,
        gd,
        vec![
            Entry::Ref(Arc::clone(&var)),
            Tensor::scalar(0.5f64).into(),
            Tensor::vector(&[0.1f64, -0.2]).into(),
        ],
    )
    .unwrap();
    let v = out[0].to_tensor().unwrap().to_f64_vec().unwrap();
    assert!(
        (v[0] - 0.805).abs() < 1e-15 && (v[1] - 2.09).abs() < 1e-15,
        "{v:?}"
    );
}

fn gd_node(use_locking: bool) -> NodeDef {
    NodeDef::new("gd", "ApplyGradientDescent")
        .with_input("v")
        .with_input("a")
        .with_input("d")
        .with_attr("T", DType::F32)
        .with_attr("use_locking", use_locking)
}

#[test]
fn errors_name_the_problem_and_leave_variables_unchanged() {
    let dev = test_device();
    let step = test_step(&dev);
    for locking in [false, true] {
        let var = Arc::new(Var::new("v", DType::F32));
        // uninitialised
        let e = run_node_in(
            &step,
            gd_node(locking),
            vec![
                Entry::Ref(Arc::clone(&var)),
                Tensor::scalar(0.1f32).into(),
                Tensor::vector(&[1.0f32]).into(),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
        assert!(e.message().contains("uninitialized"), "{e}");
        var.assign(Tensor::vector(&[1.0f32, 2.0]), true).unwrap();
        // gradient of the wrong shape
        let e = run_node_in(
            &step,
            gd_node(locking),
            vec![
                Entry::Ref(Arc::clone(&var)),
                Tensor::scalar(0.1f32).into(),
                Tensor::vector(&[1.0f32]).into(),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message()
                .contains("var and delta do not have the same shape"),
            "{e}"
        );
        // a non-scalar learning rate
        let e = run_node_in(
            &step,
            gd_node(locking),
            vec![
                Entry::Ref(Arc::clone(&var)),
                Tensor::vector(&[0.1f32, 0.1]).into(),
                Tensor::vector(&[1.0f32, 1.0]).into(),
            ],
        )
        .unwrap_err();
        assert!(e.message().contains("alpha is not a scalar"), "{e}");
        assert_eq!(var.read().unwrap(), Tensor::vector(&[1.0f32, 2.0]));
        // a slot of another shape
        let acc = Arc::new(Var::new("a", DType::F32));
        acc.assign(Tensor::vector(&[0.0f32; 3]), true).unwrap();
        let m = NodeDef::new("m", "ApplyMomentum")
            .with_input("v")
            .with_input("a")
            .with_input("lr")
            .with_input("g")
            .with_input("mom")
            .with_attr("T", DType::F32)
            .with_attr("use_locking", locking);
        let inputs = |a: &Arc<Var>| {
            vec![
                Entry::Ref(Arc::clone(&var)),
                Entry::Ref(Arc::clone(a)),
                Tensor::scalar(0.1f32).into(),
                Tensor::vector(&[1.0f32, 1.0]).into(),
                Tensor::scalar(0.9f32).into(),
            ]
        };
        let e = run_node_in(&step, m.clone(), inputs(&acc)).unwrap_err();
        assert!(
            e.message()
                .contains("var and accum do not have the same shape"),
            "{e}"
        );
        assert_eq!(acc.read().unwrap(), Tensor::vector(&[0.0f32; 3]));
        // the same variable as var and accum
        let e = run_node_in(&step, m, inputs(&var)).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("same variable"), "{e}");
    }
}

#[test]
fn resource_form_errors() {
    let dev = test_device();
    let step = test_step(&dev);
    let handle = Tensor::resource_scalar(ResourceHandle {
        device: dev.name.clone(),
        container: "c".into(),
        name: "missing".into(),
        type_name: "Var".into(),
    });
    let node = NodeDef::new("gd", "ResourceApplyGradientDescent")
        .with_input("v")
        .with_input("a")
        .with_input("d")
        .with_attr("T", DType::F32);
    let inputs = |h: &Tensor| {
        vec![
            Entry::Value(h.clone()),
            Tensor::scalar(0.1f32).into(),
            Tensor::vector(&[1.0f32]).into(),
        ]
    };
    let e = run_node_in(&step, node.clone(), inputs(&handle)).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    dev.resources
        .create("c", "missing", Var::new("missing", DType::F64))
        .unwrap();
    let e = run_node_in(&step, node, inputs(&handle)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // integer variables have no optimizer kernels
    let int_node = NodeDef::new("gd", "ApplyGradientDescent")
        .with_input("v")
        .with_input("a")
        .with_input("d")
        .with_attr("T", DType::I32);
    let v = Arc::new(Var::new("i", DType::I32));
    assert!(run_node_in(
        &step,
        int_node,
        vec![
            Entry::Ref(v),
            Tensor::scalar(1i32).into(),
            Tensor::scalar(1i32).into()
        ]
    )
    .is_err());
}

#[test]
fn concurrent_locked_updates_are_serialised() {
    // Eight threads each apply `var -= 1 * 1` a hundred times with use_locking:
    // no update is lost.
    let dev = test_device();
    let var = Arc::new(Var::new("v", DType::F64));
    var.assign(Tensor::new(&[64], vec![0.0f64; 64]).unwrap(), true)
        .unwrap();
    let acc = Arc::new(Var::new("a", DType::F64));
    acc.assign(Tensor::new(&[64], vec![0.0f64; 64]).unwrap(), true)
        .unwrap();
    std::thread::scope(|sc| {
        for _ in 0..8 {
            let (var, acc, dev) = (Arc::clone(&var), Arc::clone(&acc), Arc::clone(&dev));
            sc.spawn(move || {
                let step = test_step(&dev);
                // momentum 0: accum = grad, var -= lr * accum
                let node = NodeDef::new("m", "ApplyMomentum")
                    .with_input("v")
                    .with_input("a")
                    .with_input("lr")
                    .with_input("g")
                    .with_input("mom")
                    .with_attr("T", DType::F64)
                    .with_attr("use_locking", true);
                for _ in 0..100 {
                    run_node_in(
                        &step,
                        node.clone(),
                        vec![
                            Entry::Ref(Arc::clone(&var)),
                            Entry::Ref(Arc::clone(&acc)),
                            Tensor::scalar(1.0f64).into(),
                            Tensor::new(&[64], vec![1.0f64; 64]).unwrap().into(),
                            Tensor::scalar(0.0f64).into(),
                        ],
                    )
                    .unwrap();
                }
            });
        }
    });
    let v = var.read().unwrap().to_f64_vec().unwrap();
    assert!(v.iter().all(|&x| x == -800.0), "{v:?}");
}

#[test]
fn opposite_lock_orders_do_not_deadlock() {
    // Threads update (a, b) and (b, a) as (var, accum) with use_locking: locks are
    // taken in address order, so they never wait on each other in a cycle.
    let dev = test_device();
    let a = Arc::new(Var::new("a", DType::F32));
    let b = Arc::new(Var::new("b", DType::F32));
    for v in [&a, &b] {
        v.assign(Tensor::vector(&[0.0f32; 8]), true).unwrap();
    }
    std::thread::scope(|sc| {
        for swap in [false, true, false, true] {
            let (x, y) = if swap { (&b, &a) } else { (&a, &b) };
            let (x, y, dev) = (Arc::clone(x), Arc::clone(y), Arc::clone(&dev));
            sc.spawn(move || {
                let step = test_step(&dev);
                let node = NodeDef::new("m", "ApplyMomentum")
                    .with_input("v")
                    .with_input("a")
                    .with_input("lr")
                    .with_input("g")
                    .with_input("mom")
                    .with_attr("T", DType::F32)
                    .with_attr("use_locking", true);
                for _ in 0..200 {
                    run_node_in(
                        &step,
                        node.clone(),
                        vec![
                            Entry::Ref(Arc::clone(&x)),
                            Entry::Ref(Arc::clone(&y)),
                            Tensor::scalar(0.0f32).into(),
                            Tensor::vector(&[1.0f32; 8]).into(),
                            Tensor::scalar(0.0f32).into(),
                        ],
                    )
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(a.read().unwrap(), Tensor::vector(&[1.0f32; 8]));
}

#[test]
fn hand_computed_adagrad() {
    // var = [1, 2], accum = [0.1, 3], grad = [0.3, -1], lr = 0.5:
    // accum += grad² = [0.19, 4]; var -= 0.5 * grad / sqrt(accum)
    //   = [1 - 0.15 / sqrt(0.19), 2 + 0.5 / 2] = [0.655877..., 2.25]
    for update_slots in [true, false] {
        let var = Arc::new(Var::new("v", DType::F64));
        var.assign(Tensor::vector(&[1.0f64, 2.0]), true).unwrap();
        let acc = Arc::new(Var::new("a", DType::F64));
        acc.assign(Tensor::vector(&[0.1f64, 3.0]), true).unwrap();
        let node = NodeDef::new("ada", "ApplyAdagrad")
            .with_input("v")
            .with_input("a")
            .with_input("lr")
            .with_input("g")
            .with_attr("T", DType::F64)
            .with_attr("update_slots", update_slots);
        let dev = test_device();
        let step = test_step(&dev);
        run_node_in(
            &step,
            node,
            vec![
                Entry::Ref(Arc::clone(&var)),
                Entry::Ref(Arc::clone(&acc)),
                Tensor::scalar(0.5f64).into(),
                Tensor::vector(&[0.3f64, -1.0]).into(),
            ],
        )
        .unwrap();
        let want_acc: [f64; 2] = if update_slots {
            [0.19, 4.0]
        } else {
            [0.1, 3.0]
        };
        let a = acc.read().unwrap().to_f64_vec().unwrap();
        let v = var.read().unwrap().to_f64_vec().unwrap();
        for i in 0..2 {
            assert!((a[i] - want_acc[i]).abs() < 1e-15, "{a:?}");
            let g = [0.3, -1.0][i];
            let want = [1.0, 2.0][i] - 0.5 * g / want_acc[i].sqrt();
            assert!((v[i] - want).abs() < 1e-15, "{v:?} vs {want}");
        }
    }
}
