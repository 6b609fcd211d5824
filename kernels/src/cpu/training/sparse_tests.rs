//! Sparse optimizer kernels against TensorFlow's (fixtures from
//! `kernels/tests/fixtures/gen_sparse_updates.py`: two steps of each
//! `ResourceSparseApply*`, the first families with duplicate indices, the later
//! ones in float32 and float64), in both forms, plus errors.

use graph::{Code, DType, NodeDef, Shape, Tensor};
use serde_json::Value;

use crate::testutil::{run_node_in, test_device, test_step};
use crate::{Entry, StepContext};

const FIXTURES: &str = include_str!("../../../tests/fixtures/sparse_updates.json");

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// A tensor of `dtype` (float32 or float64) from fixture values.
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

fn slot_names(family: &str) -> &'static [&'static str] {
    match family {
        "Adagrad" | "Momentum" | "ProximalAdagrad" => &["accum"],
        "RMSProp" => &["ms", "mom"],
        "CenteredRMSProp" => &["mg", "ms", "mom"],
        "Adadelta" => &["accum", "accum_update"],
        "ProximalGradientDescent" => &[],
        _ => &["accum", "linear"],
    }
}

fn rest_names(family: &str) -> &'static [&'static str] {
    match family {
        "Adagrad" => &["lr", "grad", "indices"],
        "Momentum" => &["lr", "grad", "indices", "momentum"],
        "RMSProp" | "CenteredRMSProp" => &["lr", "rho", "momentum", "epsilon", "grad", "indices"],
        "Adadelta" => &["lr", "rho", "epsilon", "grad", "indices"],
        "ProximalGradientDescent" => &["alpha", "l1", "l2", "grad", "indices"],
        "ProximalAdagrad" => &["lr", "l1", "l2", "grad", "indices"],
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

/// A variable named `name` holding `value`: the entry to pass (a handle or a
/// reference).
fn make_var(step: &StepContext, name: &str, value: Tensor, resource: bool) -> Entry {
    let dtype = value.dtype();
    if resource {
        let h = NodeDef::new(name, "VarHandleOp")
            .with_attr("dtype", dtype)
            .with_attr("shape", Shape::unknown());
        let handle = run_node_in(step, h, vec![]).unwrap()[0].clone();
        let a = NodeDef::new("a", "AssignVariableOp")
            .with_input(name)
            .with_input("x")
            .with_attr("dtype", dtype);
        run_node_in(step, a, vec![handle.clone(), Entry::Value(value)]).unwrap();
        handle
    } else {
        let v = NodeDef::new(name, "VariableV2")
            .with_attr("dtype", dtype)
            .with_attr("shape", Shape::known(value.dims()));
        let var = run_node_in(step, v, vec![]).unwrap()[0].clone();
        let a = NodeDef::new("a", "Assign")
            .with_input(name)
            .with_input("x")
            .with_attr("T", dtype);
        run_node_in(step, a, vec![var.clone(), Entry::Value(value)]).unwrap();
        var
    }
}

fn value_of(step: &StepContext, e: &Entry, resource: bool, dtype: DType) -> Vec<f64> {
    let t = if resource {
        let r = NodeDef::new("r", "ReadVariableOp")
            .with_input("h")
            .with_attr("dtype", dtype);
        run_node_in(step, r, vec![e.clone()]).unwrap()[0]
            .to_tensor()
            .unwrap()
    } else {
        e.to_tensor().unwrap()
    };
    t.to_f64_vec().unwrap()
}

fn node(family: &str, resource: bool, flags: &Value, dtype: DType) -> NodeDef {
    let prefix = if resource { "Resource" } else { "" };
    let mut n = NodeDef::new("apply", format!("{prefix}SparseApply{family}"));
    for _ in 0..1 + slot_names(family).len() + rest_names(family).len() {
        n = n.with_input("x");
    }
    n = n.with_attr("T", dtype).with_attr("Tindices", DType::I32);
    if let Some(o) = flags.as_object() {
        for (k, v) in o {
            n = n.with_attr(k, v.as_bool().unwrap());
        }
    }
    n
}

fn close(got: &[f64], want: &[f64], dtype: DType, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let rtol = if dtype == DType::F32 { 2e-6 } else { 1e-13 };
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rtol * w.abs().max(1.0),
            "{what}[{i}]: got {g}, TensorFlow {w}"
        );
    }
}

#[test]
fn sparse_applies_match_tensorflow() {
    let cases: Value = serde_json::from_str(FIXTURES).unwrap();
    let mut families = std::collections::BTreeSet::new();
    for case in cases["sparse_apply"].as_array().unwrap() {
        let family = case["family"].as_str().unwrap();
        let dtype = match case["dtype"].as_str() {
            Some("float64") => DType::F64,
            _ => DType::F32,
        };
        families.insert(family);
        for resource in [true, false] {
            let dev = test_device();
            let step = test_step(&dev);
            let shape = [5usize, 3];
            let var = make_var(
                &step,
                "var",
                tensor(dtype, &shape, &floats(&case["var"])),
                resource,
            );
            let slots: Vec<Entry> = slot_names(family)
                .iter()
                .map(|s| {
                    let t = tensor(dtype, &shape, &floats(&case["slots"][s]));
                    make_var(&step, s, t, resource)
                })
                .collect();
            let what = format!("{family} {dtype} {} resource={resource}", case["flags"]);
            for (k, st) in case["steps"].as_array().unwrap().iter().enumerate() {
                let idx: Vec<i32> = floats(&st["indices"]).iter().map(|&v| v as i32).collect();
                let n = idx.len();
                let mut inputs = vec![var.clone()];
                inputs.extend(slots.iter().cloned());
                for r in rest_names(family) {
                    inputs.push(Entry::Value(match *r {
                        "grad" => tensor(dtype, &[n, 3], &floats(&st["grad"])),
                        "indices" => Tensor::vector(&idx),
                        s => scalar(dtype, case["scalars"][s].as_f64().unwrap()),
                    }));
                }
                run_node_in(&step, node(family, resource, &case["flags"], dtype), inputs).unwrap();
                close(
                    &value_of(&step, &var, resource, dtype),
                    &floats(&st["var"]),
                    dtype,
                    &format!("{what} step {k} var"),
                );
                for (s, e) in slot_names(family).iter().zip(&slots) {
                    close(
                        &value_of(&step, e, resource, dtype),
                        &floats(&st["slots"][s]),
                        dtype,
                        &format!("{what} step {k} {s}"),
                    );
                }
            }
        }
    }
    // every sparse kernel family has TensorFlow's answers
    assert_eq!(families.len(), 9, "{families:?}");
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
            node("Momentum", false, &Value::Null, DType::F32),
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
        node("Adagrad", true, &Value::Null, DType::F32),
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

#[test]
fn later_sparse_families_check_like_tensorflow() {
    let dev = test_device();
    let step = test_step(&dev);
    let init = Tensor::new(&[3, 2], vec![1.0f32; 6]).unwrap();
    let vars: Vec<Entry> = ["var", "mg", "ms", "mom"]
        .iter()
        .map(|n| make_var(&step, n, init.clone(), false))
        .collect();
    let s = |v: f32| Entry::Value(Tensor::scalar(v));
    // SparseApplyCenteredRMSProp, four variables: a gradient row of the wrong width
    let mut inputs = vars.clone();
    inputs.extend([s(0.1), s(0.9), s(0.5), s(1e-7)]);
    inputs.push(Entry::Value(Tensor::new(&[1, 3], vec![1.0f32; 3]).unwrap()));
    inputs.push(Entry::Value(Tensor::vector(&[0i32])));
    let e = run_node_in(
        &step,
        node("CenteredRMSProp", false, &Value::Null, DType::F32),
        inputs,
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert_eq!(e.node(), Some("apply"), "{e}");
    assert!(e.message().contains("match in dimension 1"), "{e}");
    // SparseApplyFtrl: TensorFlow's checks of the scalars
    let row = || Entry::Value(Tensor::new(&[1, 2], vec![1.0f32, 1.0]).unwrap());
    let idx = || Entry::Value(Tensor::vector(&[1i32]));
    for (lr, l1, l2, lr_power, what) in [
        (
            0.0f32,
            0.0f32,
            0.0f32,
            -0.5f32,
            "lr is not a positive scalar",
        ),
        (
            0.1,
            -1.0,
            0.0,
            -0.5,
            "l1 regularization strength is not a non-negative",
        ),
        (
            0.1,
            0.0,
            -1.0,
            -0.5,
            "l2 regularization strength is not a non-negative",
        ),
        (0.1, 0.0, 0.0, 0.5, "lr_power is not a non-positive scalar"),
    ] {
        let e = run_node_in(
            &step,
            node("Ftrl", false, &Value::Null, DType::F32),
            vec![
                vars[0].clone(),
                vars[1].clone(),
                vars[2].clone(),
                row(),
                idx(),
                s(lr),
                s(l1),
                s(l2),
                s(lr_power),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains(what), "{e}");
    }
    // SparseApplyProximalGradientDescent: one variable, an index out of range
    let e = run_node_in(
        &step,
        node("ProximalGradientDescent", false, &Value::Null, DType::F32),
        vec![
            vars[3].clone(),
            s(0.1),
            s(0.0),
            s(0.0),
            row(),
            Entry::Value(Tensor::vector(&[3i32])),
        ],
    )
    .unwrap_err();
    assert!(
        e.message()
            .contains("Index 3 at offset 0 in indices is out of range"),
        "{e}"
    );
    for v in &vars {
        assert_eq!(v.to_tensor().unwrap(), init, "failed updates wrote nothing");
    }
    // a zero learning rate is allowed when the linear term carries it
    let flags: Value = serde_json::json!({"multiply_linear_by_lr": true});
    run_node_in(
        &step,
        node("Ftrl", false, &flags, DType::F32),
        vec![
            vars[0].clone(),
            vars[1].clone(),
            vars[2].clone(),
            row(),
            idx(),
            s(0.0),
            s(0.0),
            s(0.0),
            s(-0.5),
        ],
    )
    .unwrap();
}
