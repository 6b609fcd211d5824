//! The graphs the optimizers build: names, slots, colocation, control
//! dependencies and errors. (Their values are checked end to end in the root
//! crate's `tests/training.rs`.)

use crate::builder::Scope;
use crate::ops::{self, ResourceVariable, Variable};
use crate::train::*;
use crate::{Code, DType, GraphDef, Shape, Tensor};

fn vec_var(s: &Scope, name: &str, v: &[f32]) -> Variable {
    let init = ops::constant(s, Tensor::vector(v)).unwrap();
    Variable::new(s, name, &init, true).unwrap()
}

fn class_of(g: &GraphDef, node: &str) -> Vec<String> {
    g.find(node)
        .unwrap_or_else(|| panic!("no node {node}"))
        .get_attr::<Vec<String>>("_class")
        .unwrap_or_default()
}

fn inputs_of(g: &GraphDef, node: &str) -> Vec<String> {
    g.find(node).unwrap().input.clone()
}

#[test]
fn adam_builds_tensorflows_layout() {
    let s = Scope::new();
    let b = vec_var(&s, "b", &[0.0, 0.0]);
    let a = vec_var(&s, "a", &[1.0, 2.0]);
    let step = get_or_create_global_step(&s).unwrap();
    let opt = AdamOptimizer::new(0.01);
    let ga = ops::constant(&s, Tensor::vector(&[1.0f32, 1.0])).unwrap();
    let gb = ops::constant(&s, Tensor::vector(&[2.0f32, 2.0])).unwrap();
    let train_op = opt
        .apply_gradients(
            &s,
            &[
                GradAndVar {
                    grad: Some(gb.into()),
                    var: VarRef::from(&b),
                },
                GradAndVar {
                    grad: Some(ga.into()),
                    var: VarRef::from(&a),
                },
            ],
            Some(&step),
        )
        .unwrap();
    let g = s.graph_def();
    assert_eq!(train_op.name(), "Adam/increment_global_step");
    assert_eq!(train_op.op_type(), "AssignAdd");
    // slots: <var>/Adam and <var>/Adam_1, colocated with their variable
    for v in ["a", "b"] {
        for slot in [format!("{v}/Adam"), format!("{v}/Adam_1")] {
            assert_eq!(g.find(&slot).unwrap().op, "VariableV2");
            assert_eq!(class_of(&g, &slot), [format!("loc:@{v}")]);
        }
        let apply = format!("Adam/update_{v}/ApplyAdam");
        assert_eq!(class_of(&g, &apply), [format!("loc:@{v}")]);
        let ins = inputs_of(&g, &apply);
        assert_eq!(ins[0], v);
        assert_eq!(ins[1], format!("{v}/Adam"));
        assert_eq!(ins[2], format!("{v}/Adam_1"));
        // the power comes through a read colocated with it, not a reference edge
        // (which would colocate every update with the power)
        let read = g.find(&ins[3]).unwrap();
        assert_eq!(read.op, "Identity");
        assert_eq!(read.input, ["beta1_power"]);
    }
    assert_eq!(
        opt.get_slot(&VarRef::from(&a), "m").unwrap().name(),
        "a/Adam"
    );
    assert_eq!(opt.get_slot_names(), ["m", "v"]);
    // the beta powers sit with the first variable by name, start at the betas,
    // and are updated after every variable's update
    assert_eq!(class_of(&g, "beta1_power"), ["loc:@a"]);
    let (p1, _) = opt.beta_powers().unwrap();
    assert_eq!(p1.name(), "beta1_power");
    let upd = g
        .node
        .iter()
        .find(|n| n.name.starts_with("Adam/update_beta1") && n.op == "Assign")
        .expect("beta1 update");
    let mul = upd.input[1].clone();
    let deps = inputs_of(&g, &mul);
    assert!(
        deps.contains(&"^Adam/update_a/ApplyAdam".to_owned()),
        "{deps:?}"
    );
    assert!(
        deps.contains(&"^Adam/update_b/ApplyAdam".to_owned()),
        "{deps:?}"
    );
    // global step: after the update group, colocated with the step
    assert!(inputs_of(&g, "Adam/increment_global_step").contains(&"^Adam/update".to_owned()));
    assert_eq!(
        class_of(&g, "Adam/increment_global_step"),
        ["loc:@global_step"]
    );
    // every slot and power is a global variable with an initializer, none trainable
    let globals: Vec<String> = global_variables(&s)
        .unwrap()
        .iter()
        .map(|v| v.name().to_owned())
        .collect();
    for n in [
        "a/Adam",
        "a/Adam_1",
        "beta1_power",
        "beta2_power",
        "global_step",
    ] {
        assert!(globals.contains(&n.to_owned()), "{n} in {globals:?}");
    }
    assert_eq!(trainable_variables(&s).unwrap().len(), 2);
    global_variables_initializer(&s).unwrap();
    // a second apply reuses the slots and powers
    let g2 = ops::constant(&s, Tensor::vector(&[1.0f32, 1.0])).unwrap();
    opt.apply_gradients(
        &s,
        &[GradAndVar {
            grad: Some(g2.into()),
            var: VarRef::from(&a),
        }],
        None,
    )
    .unwrap();
    assert!(s.find_operation("a/Adam_2").is_none());
    assert!(s.find_operation("beta1_power_1").is_none());
}

#[test]
fn resource_variables_get_resource_slots_and_ops() {
    let s = Scope::new();
    let init = ops::constant(&s, Tensor::vector(&[1.0f64, 2.0])).unwrap();
    let r = ResourceVariable::new(&s, "r", &init, true).unwrap();
    let g = ops::constant(&s, Tensor::vector(&[1.0f64, 1.0])).unwrap();
    for (opt, op, slots) in [
        (
            Box::new(MomentumOptimizer::new(0.1, 0.9)) as Box<dyn Optimizer>,
            "ResourceApplyMomentum",
            vec!["r/Momentum"],
        ),
        (
            Box::new(RMSPropOptimizer::new(0.1)),
            "ResourceApplyRMSProp",
            vec!["r/RMSProp", "r/RMSProp_1"],
        ),
        (
            Box::new(GradientDescentOptimizer::new(0.1)),
            "ResourceApplyGradientDescent",
            vec![],
        ),
    ] {
        let t = opt
            .apply_gradients(
                &s,
                &[GradAndVar {
                    grad: Some(g.clone().into()),
                    var: VarRef::from(&r),
                }],
                None,
            )
            .unwrap();
        let gd = s.graph_def();
        let apply = gd
            .node
            .iter()
            .find(|n| n.op == op)
            .unwrap_or_else(|| panic!("no {op}"));
        assert!(inputs_of(&gd, t.name()).contains(&format!("^{}", apply.name)));
        for sl in slots {
            assert_eq!(gd.find(sl).unwrap().op, "VarHandleOp", "{sl}");
        }
    }
    // the RMSProp mean square starts at one
    let gd = s.graph_def();
    let assign = gd.find("r/RMSProp/Assign").unwrap();
    let init = gd.find(&assign.input[1]).unwrap();
    assert_eq!(
        init.get_attr::<Tensor>("value").unwrap(),
        Tensor::vector(&[1.0f64, 1.0])
    );
}

#[test]
fn errors_are_clear() {
    let s = Scope::new();
    let w = vec_var(&s, "w", &[1.0, 2.0]);
    let opt = GradientDescentOptimizer::new(0.1);
    // no gradient at all
    let e = opt
        .apply_gradients(
            &s,
            &[GradAndVar {
                grad: None,
                var: VarRef::from(&w),
            }],
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("No gradients"), "{e}");
    // a gradient of another dtype
    let g64 = ops::constant(&s, Tensor::vector(&[1.0f64, 1.0])).unwrap();
    let e = opt
        .apply_gradients(
            &s,
            &[GradAndVar {
                grad: Some(g64.into()),
                var: VarRef::from(&w),
            }],
            None,
        )
        .unwrap_err();
    assert!(e.message().contains("float64"), "{e}");
    // nothing to optimize
    let empty = Scope::new();
    let x = ops::scalar(&empty, 1.0f32).unwrap();
    let e = opt.minimize(&empty, &x, None, None).unwrap_err();
    assert!(e.message().contains("No variables"), "{e}");
    // a loss that does not depend on the variables
    let c = ops::scalar(&s, 3.0f32).unwrap();
    let loss = ops::mul(&s, &c, &c).unwrap();
    let e = opt.minimize(&s, &loss, None, None).unwrap_err();
    assert!(e.message().contains("No gradients provided"), "{e}");
    // slots need a fully defined shape
    let v = ops::variable(&s, Shape::from_dims(&[None]), DType::F32).unwrap();
    let vr = VarRef::from_op(&s, v.op()).unwrap();
    let g = ops::constant(&s, Tensor::vector(&[1.0f32])).unwrap();
    let e = MomentumOptimizer::new(0.1, 0.9)
        .apply_gradients(
            &s,
            &[GradAndVar {
                grad: Some(g.into()),
                var: vr,
            }],
            None,
        )
        .unwrap_err();
    assert!(e.message().contains("fully defined shape"), "{e}");
}

#[test]
fn hyper_parameters_may_be_tensors() {
    let s = Scope::new();
    let w = vec_var(&s, "w", &[1.0, 2.0]);
    let lr = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let g = ops::constant(&s, Tensor::vector(&[1.0f32, 1.0])).unwrap();
    GradientDescentOptimizer::new(&lr)
        .apply_gradients(
            &s,
            &[GradAndVar {
                grad: Some(g.into()),
                var: VarRef::from(&w),
            }],
            None,
        )
        .unwrap();
    let gd = s.graph_def();
    let apply = gd
        .find("GradientDescent/update_w/ApplyGradientDescent")
        .unwrap();
    // the float64 learning rate is cast to the variable's float32
    assert_eq!(gd.find(&apply.input[1]).unwrap().op, "Cast");
}
