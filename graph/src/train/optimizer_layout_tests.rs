//! The graphs the later optimizers build (FTRL, Adadelta, the proximal ones,
//! centered RMSProp): op types per variable kind and gradient kind, slot names
//! and starting values as `tf.compat.v1.train` makes them, the hyper-parameter
//! constants, and the argument checks. (Their values are checked against
//! TensorFlow in the root crate's `tests/sparse_training.rs`.)

use crate::builder::Scope;
use crate::gradients::{Gradient, IndexedSlices};
use crate::ops::{self, ResourceVariable, Variable};
use crate::train::*;
use crate::{Code, DType, GraphDef, Tensor};

/// A [2, 2] float32 variable `w` of either kind.
fn var(s: &Scope, resource: bool) -> VarRef {
    let init = ops::constant(
        s,
        Tensor::new(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap(),
    )
    .unwrap();
    if resource {
        VarRef::from(&ResourceVariable::new(s, "w", &init, true).unwrap())
    } else {
        VarRef::from(&Variable::new(s, "w", &init, true).unwrap())
    }
}

fn dense_grad(s: &Scope) -> Gradient {
    ops::constant(s, Tensor::new(&[2, 2], vec![0.5f32; 4]).unwrap())
        .unwrap()
        .into()
}

fn sparse_grad(s: &Scope) -> Gradient {
    Gradient::Sparse(IndexedSlices {
        values: ops::constant(s, Tensor::new(&[1, 2], vec![0.5f32, 0.5]).unwrap()).unwrap(),
        indices: ops::constant(s, Tensor::vector(&[1i32])).unwrap(),
        dense_shape: ops::constant(s, Tensor::vector(&[2i32, 2])).unwrap(),
    })
}

/// The op types in `g` of the updates under `scope/update_w/`.
fn update_ops(g: &GraphDef, scope: &str) -> Vec<String> {
    let prefix = format!("{scope}/update_w/");
    g.node
        .iter()
        .filter(|n| n.name.starts_with(&prefix) && n.op.contains("Apply"))
        .map(|n| n.op.clone())
        .collect()
}

/// The value the initializer of slot variable `name` assigns.
fn initial_value(g: &GraphDef, name: &str) -> Tensor {
    let assign = g
        .find(&format!("{name}/Assign"))
        .or_else(|| g.find(&format!("{name}/AssignVariableOp")))
        .unwrap_or_else(|| panic!("no initializer of {name}"));
    g.find(&assign.input[1])
        .unwrap()
        .get_attr::<Tensor>("value")
        .unwrap()
}

fn filled(v: f32) -> Tensor {
    Tensor::new(&[2, 2], vec![v; 4]).unwrap()
}

/// Makes an optimizer.
type Make = fn() -> Box<dyn Optimizer>;

/// An optimizer's slots: (slot, variable name, starting value).
type Slots = &'static [(&'static str, &'static str, f32)];

#[test]
fn later_optimizers_build_tensorflows_ops_and_slots() {
    // (make, scope, op family, slots)
    let cases: [(Make, &str, &str, Slots); 7] = [
        (
            || Box::new(FtrlOptimizer::new(0.1)),
            "Ftrl",
            "Ftrl",
            &[("accum", "w/Ftrl", 0.1), ("linear", "w/Ftrl_1", 0.0)],
        ),
        (
            || Box::new(FtrlOptimizer::new(0.1).l2_shrinkage_regularization_strength(0.5)),
            "Ftrl",
            "FtrlV2",
            &[("accum", "w/Ftrl", 0.1), ("linear", "w/Ftrl_1", 0.0)],
        ),
        (
            || Box::new(AdadeltaOptimizer::default()),
            "Adadelta",
            "Adadelta",
            &[
                ("accum", "w/Adadelta", 0.0),
                ("accum_update", "w/Adadelta_1", 0.0),
            ],
        ),
        (
            || Box::new(ProximalGradientDescentOptimizer::new(0.1)),
            "ProximalGradientDescent",
            "ProximalGradientDescent",
            &[],
        ),
        (
            || Box::new(ProximalAdagradOptimizer::new(0.1).initial_accumulator_value(0.3)),
            "ProximalAdagrad",
            "ProximalAdagrad",
            &[("accumulator", "w/ProximalAdagrad", 0.3)],
        ),
        (
            || Box::new(RMSPropOptimizer::new(0.1).centered(true)),
            "RMSProp",
            "CenteredRMSProp",
            &[
                ("rms", "w/RMSProp", 1.0),
                ("mg", "w/RMSProp_1", 0.0),
                ("momentum", "w/RMSProp_2", 0.0),
            ],
        ),
        (
            || Box::new(RMSPropOptimizer::new(0.1)),
            "RMSProp",
            "RMSProp",
            &[("rms", "w/RMSProp", 1.0), ("momentum", "w/RMSProp_1", 0.0)],
        ),
    ];
    for (make, scope, family, slots) in cases {
        for resource in [false, true] {
            for sparse in [false, true] {
                let s = Scope::new();
                let w = var(&s, resource);
                let grad = if sparse {
                    sparse_grad(&s)
                } else {
                    dense_grad(&s)
                };
                let opt = make();
                opt.apply_gradients(
                    &s,
                    &[GradAndVar {
                        grad: Some(grad),
                        var: w.clone(),
                    }],
                    None,
                )
                .unwrap();
                let g = s.graph_def();
                let want = format!(
                    "{}{}Apply{family}",
                    if resource { "Resource" } else { "" },
                    if sparse { "Sparse" } else { "" }
                );
                assert_eq!(update_ops(&g, scope), std::slice::from_ref(&want), "{want}");
                let mut names: Vec<&str> = slots.iter().map(|(n, _, _)| *n).collect();
                names.sort_unstable();
                assert_eq!(opt.get_slot_names(), names, "{want}");
                for (slot, name, value) in slots {
                    let v = opt.get_slot(&w, slot).unwrap();
                    assert_eq!(v.name(), *name, "{want}");
                    assert_eq!(v.kind(), w.kind(), "{want}");
                    assert_eq!(initial_value(&g, name), filled(*value), "{want} {name}");
                }
                // the variables come first, in TensorFlow's input order
                let apply = g.node.iter().find(|n| n.op == want).unwrap();
                let inputs: Vec<&str> = apply.input.iter().map(String::as_str).collect();
                assert_eq!(inputs[0], "w", "{want}");
                if family == "CenteredRMSProp" {
                    assert_eq!(&inputs[1..4], ["w/RMSProp_1", "w/RMSProp", "w/RMSProp_2"]);
                }
            }
        }
    }
}

#[test]
fn ftrl_folds_beta_into_l2_and_checks_its_arguments() {
    let s = Scope::new();
    let w = var(&s, false);
    let opt = FtrlOptimizer::new(0.5)
        .l2_regularization_strength(0.25)
        .beta(1.0)
        .accum_name("acc")
        .linear_name("lin");
    opt.apply_gradients(
        &s,
        &[GradAndVar {
            grad: Some(dense_grad(&s)),
            var: w.clone(),
        }],
        None,
    )
    .unwrap();
    let g = s.graph_def();
    // 0.25 + 1 / (2 * 0.5)
    let l2 = g
        .find("Ftrl/update_w/adjusted_l2_regularization_strength")
        .unwrap();
    assert_eq!(
        l2.get_attr::<Tensor>("value").unwrap(),
        Tensor::scalar(1.25f32)
    );
    assert_eq!(opt.get_slot(&w, "accum").unwrap().name(), "w/acc");
    assert_eq!(opt.get_slot(&w, "linear").unwrap().name(), "w/lin");
    // TensorFlow's ValueErrors, as InvalidArgument
    let bad: [(Box<dyn Optimizer>, &str); 7] = [
        (
            Box::new(FtrlOptimizer::new(0.1).learning_rate_power(0.5)),
            "learning_rate_power",
        ),
        (
            Box::new(FtrlOptimizer::new(0.1).initial_accumulator_value(-1.0)),
            "initial_accumulator_value",
        ),
        (
            Box::new(FtrlOptimizer::new(0.1).l1_regularization_strength(-1.0)),
            "l1_regularization_strength",
        ),
        (
            Box::new(FtrlOptimizer::new(0.1).l2_shrinkage_regularization_strength(-1.0)),
            "l2_shrinkage_regularization_strength",
        ),
        (
            Box::new(ProximalAdagradOptimizer::new(0.1).initial_accumulator_value(0.0)),
            "initial_accumulator_value must be positive",
        ),
        (
            Box::new(ProximalAdagradOptimizer::new(0.1).l2_regularization_strength(-1.0)),
            "l2_regularization_strength",
        ),
        (
            Box::new(ProximalGradientDescentOptimizer::new(0.1).l1_regularization_strength(-1.0)),
            "l1_regularization_strength",
        ),
    ];
    for (opt, what) in bad {
        let s = Scope::new();
        let w = var(&s, true);
        let e = opt
            .apply_gradients(
                &s,
                &[GradAndVar {
                    grad: Some(dense_grad(&s)),
                    var: w,
                }],
                None,
            )
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains(what), "{e}");
    }
}

#[test]
fn a_wrong_shaped_gradient_names_the_update() {
    for resource in [false, true] {
        let s = Scope::new();
        let w = var(&s, resource);
        let g = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0, 3.0])).unwrap();
        let built = FtrlOptimizer::new(0.1).apply_gradients(
            &s,
            &[GradAndVar {
                grad: Some(g.into()),
                var: w,
            }],
            None,
        );
        if resource {
            // a handle carries no shape to check when the graph is built: the
            // kernel refuses the update when it runs
            assert!(built.is_ok());
            continue;
        }
        let e = built.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(
            e.message().contains("grad of 'Ftrl/update_w/ApplyFtrl'"),
            "{e}"
        );
    }
}

#[test]
fn clip_ops_and_schedules_build_tensorflows_names() {
    let s = Scope::new();
    let a = ops::constant(&s, Tensor::vector(&[3.0f32])).unwrap();
    let (clipped, norm) = clip_by_global_norm(&s, std::slice::from_ref(&a), 1.0).unwrap();
    assert_eq!(norm.name(), "global_norm/global_norm:0");
    assert_eq!(
        clipped[0].name(),
        "clip_by_global_norm/clip_by_global_norm_0:0"
    );
    // a second call gets its own scopes
    let (_, norm2) = clip_by_global_norm(&s, std::slice::from_ref(&a), 1.0).unwrap();
    assert_eq!(norm2.name(), "global_norm_1/global_norm:0");
    let c = clip_by_norm(&s, &a, 1.0, None).unwrap();
    assert_eq!(c.name(), "clip_by_norm/clip_by_norm:0");
    let step = get_or_create_global_step(&s).unwrap();
    let x = step.read(&s).unwrap();
    let lr = exponential_decay(&s, 0.1, &x, 100.0, 0.9, false).unwrap();
    assert_eq!(lr.dtype(), DType::F32);
    let lr64 = ops::scalar(&s, 0.1f64).unwrap();
    assert_eq!(
        exponential_decay(&s, &lr64, &x, 100.0, 0.9, true)
            .unwrap()
            .dtype(),
        DType::F64
    );
    let i = ops::scalar(&s, 1i32).unwrap();
    assert!(exponential_decay(&s, &i, &x, 100.0, 0.9, true).is_err());
    let pc = piecewise_constant(&s, &x, &[10i64], &[1.0f64, 0.5]).unwrap();
    assert_eq!(pc.dtype(), DType::F64);
}
