//! Sparse optimizer kernels against TensorFlow's (fixtures from
//! `kernels/tests/fixtures/gen_sparse_updates.py`: two steps of each
//! `ResourceSparseApply*` with duplicate indices), in both forms, plus errors.

use graph::{Code, DType, NodeDef, Shape, Tensor};
use serde_json::Value;

use crate::testutil::{run_node_in, test_device, test_step};
use crate::{Entry, StepContext};

const FIXTURES: &str = include_str!("../../../tests/fixtures/sparse_updates.json");

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn slot_names(family: &str) -> &'static [&'static str] {
    match family {
        "Adagrad" | "Momentum" => &["accum"],
        "RMSProp" => &["ms", "mom"],
        _ => &["accum", "linear"],
    }
}

fn rest_names(family: &str) -> &'static [&'static str] {
    match family {
        "Adagrad" => &["lr", "grad", "indices"],
        "Momentum" => &["lr", "grad", "indices", "momentum"],
        "RMSProp" => &["lr", "rho", "momentum", "epsilon", "grad", "indices"],
        "Ftrl" => &["grad", "indices", "lr", "l1", "l2", "lr_power"],
        _ => &[
            "grad",
            "indices",
            "lr",
            "l1",
            "l2",
            "l2_shrinkage",
            "lr_power",
        ],
    }
}

/// A variable named `name` holding `value`: (the entry to pass, its reader).
fn make_var(step: &StepContext, name: &str, value: Tensor, resource: bool) -> Entry {
    if resource {
        let h = NodeDef::new(name, "VarHandleOp")
            .with_attr("dtype", DType::F32)
            .with_attr("shape", Shape::unknown());
        let handle = run_node_in(step, h, vec![]).unwrap()[0].clone();
        let a = NodeDef::new("a", "AssignVariableOp")
            .with_input(name)
            .with_input("x")
            .with_attr("dtype", DType::F32);
        run_node_in(step, a, vec![handle.clone(), Entry::Value(value)]).unwrap();
        handle
    } else {
        let v = NodeDef::new(name, "VariableV2")
            .with_attr("dtype", DType::F32)
            .with_attr("shape", Shape::known(value.dims()));
        let var = run_node_in(step, v, vec![]).unwrap()[0].clone();
        let a = NodeDef::new("a", "Assign")
            .with_input(name)
            .with_input("x")
            .with_attr("T", DType::F32);
        run_node_in(step, a, vec![var.clone(), Entry::Value(value)]).unwrap();
        var
    }
}

fn value_of(step: &StepContext, e: &Entry, resource: bool) -> Vec<f32> {
    let t = if resource {
        let r = NodeDef::new("r", "ReadVariableOp")
            .with_input("h")
            .with_attr("dtype", DType::F32);
        run_node_in(step, r, vec![e.clone()]).unwrap()[0]
            .to_tensor()
            .unwrap()
    } else {
        e.to_tensor().unwrap()
    };
    t.to_f64_vec().unwrap().iter().map(|&v| v as f32).collect()
}

fn node(family: &str, resource: bool, flags: &Value) -> NodeDef {
    let prefix = if resource { "Resource" } else { "" };
    let mut n = NodeDef::new("apply", format!("{prefix}SparseApply{family}"));
    for _ in 0..1 + slot_names(family).len() + rest_names(family).len() {
        n = n.with_input("x");
    }
    n = n
        .with_attr("T", DType::F32)
        .with_attr("Tindices", DType::I32);
    if let Some(o) = flags.as_object() {
        for (k, v) in o {
            n = n.with_attr(k, v.as_bool().unwrap());
        }
    }
    n
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 2e-6 * w.abs().max(1.0),
            "{what}[{i}]: got {g}, TensorFlow {w}"
        );
    }
}

#[test]
fn sparse_applies_match_tensorflow() {
    let cases: Value = serde_json::from_str(FIXTURES).unwrap();
    for case in cases["sparse_apply"].as_array().unwrap() {
        let family = case["family"].as_str().unwrap();
        for resource in [true, false] {
            let dev = test_device();
            let step = test_step(&dev);
            let shape = [5usize, 3];
            let var = make_var(
                &step,
                "var",
                Tensor::new(&shape, floats(&case["var"])).unwrap(),
                resource,
            );
            let slots: Vec<Entry> = slot_names(family)
                .iter()
                .map(|s| {
                    let t = Tensor::new(&shape, floats(&case["slots"][s])).unwrap();
                    make_var(&step, s, t, resource)
                })
                .collect();
            let what = format!("{family} {} resource={resource}", case["flags"]);
            for (k, st) in case["steps"].as_array().unwrap().iter().enumerate() {
                let idx: Vec<i32> = floats(&st["indices"]).iter().map(|&v| v as i32).collect();
                let n = idx.len();
                let mut inputs = vec![var.clone()];
                inputs.extend(slots.iter().cloned());
                for r in rest_names(family) {
                    inputs.push(Entry::Value(match *r {
                        "grad" => Tensor::new(&[n, 3], floats(&st["grad"])).unwrap(),
                        "indices" => Tensor::vector(&idx),
                        s => Tensor::scalar(case["scalars"][s].as_f64().unwrap() as f32),
                    }));
                }
                run_node_in(&step, node(family, resource, &case["flags"]), inputs).unwrap();
                close(
                    &value_of(&step, &var, resource),
                    &floats(&st["var"]),
                    &format!("{what} step {k} var"),
                );
                for (s, e) in slot_names(family).iter().zip(&slots) {
                    close(
                        &value_of(&step, e, resource),
                        &floats(&st["slots"][s]),
                        &format!("{what} step {k} {s}"),
                    );
                }
            }
        }
    }
}

#[test]
fn sparse_apply_errors() {
    let dev = test_device();
    let step = test_step(&dev);
    let init = Tensor::new(&[3, 2], vec![1.0f32; 6]).unwrap();
    let var = make_var(&step, "var", init.clone(), false);
    let accum = make_var(&step, "accum", init.clone(), false);
    let run = |grad: Tensor, idx: Tensor| {
        run_node_in(
            &step,
            node("Momentum", false, &Value::Null),
            vec![
                var.clone(),
                accum.clone(),
                Entry::Value(Tensor::scalar(0.1f32)),
                Entry::Value(grad),
                Entry::Value(idx),
                Entry::Value(Tensor::scalar(0.9f32)),
            ],
        )
        .unwrap_err()
    };
    let row = Tensor::new(&[1, 2], vec![1.0f32, 1.0]).unwrap();
    let e = run(row.clone(), Tensor::vector(&[3i32]));
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("Index 3 at offset 0 in indices is out of range"),
        "{e}"
    );
    let e = run(row, Tensor::vector(&[0i32, 1]));
    assert!(e.message().contains("same size as indices"), "{e}");
    let e = run(
        Tensor::new(&[1, 3], vec![1.0f32; 3]).unwrap(),
        Tensor::vector(&[0i32]),
    );
    assert!(e.message().contains("match in dimension 1"), "{e}");
    assert_eq!(
        var.to_tensor().unwrap(),
        init,
        "failed updates wrote nothing"
    );
    // an uninitialised resource variable
    let h = NodeDef::new("u", "VarHandleOp")
        .with_attr("dtype", DType::F32)
        .with_attr("shape", Shape::unknown());
    let handle = run_node_in(&step, h, vec![]).unwrap()[0].clone();
    let e = run_node_in(
        &step,
        node("Adagrad", true, &Value::Null),
        vec![
            handle.clone(),
            handle,
            Entry::Value(Tensor::scalar(0.1f32)),
            Entry::Value(Tensor::new(&[1, 2], vec![1.0f32, 1.0]).unwrap()),
            Entry::Value(Tensor::vector(&[0i32])),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
}
