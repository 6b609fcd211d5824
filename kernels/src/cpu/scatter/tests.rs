//! Scatter and `ResourceGather` kernels on hand-computed values, both forms,
//! and their errors.

use graph::{Code, DType, NodeDef, Shape, Tensor};

use crate::testutil::{run_node_in, test_device, test_step};
use crate::{Entry, StepContext};

fn ref_var(step: &StepContext, value: Tensor) -> Entry {
    let node = NodeDef::new("v", "VariableV2")
        .with_attr("dtype", value.dtype())
        .with_attr("shape", Shape::known(value.dims()));
    let var = run_node_in(step, node, vec![]).unwrap()[0].clone();
    let assign = NodeDef::new("a", "Assign")
        .with_input("v")
        .with_input("x")
        .with_attr("T", value.dtype());
    run_node_in(step, assign, vec![var.clone(), Entry::Value(value)]).unwrap();
    var
}

fn resource_var(step: &StepContext, value: Option<Tensor>) -> Entry {
    let dtype = value.as_ref().map_or(DType::F32, Tensor::dtype);
    let h = NodeDef::new("h", "VarHandleOp")
        .with_attr("dtype", dtype)
        .with_attr("shape", Shape::unknown());
    let handle = run_node_in(step, h, vec![]).unwrap()[0].clone();
    if let Some(value) = value {
        let assign = NodeDef::new("a", "AssignVariableOp")
            .with_input("h")
            .with_input("x")
            .with_attr("dtype", dtype);
        run_node_in(step, assign, vec![handle.clone(), Entry::Value(value)]).unwrap();
    }
    handle
}

fn read(step: &StepContext, handle: &Entry, dtype: DType) -> Tensor {
    let r = NodeDef::new("r", "ReadVariableOp")
        .with_input("h")
        .with_attr("dtype", dtype);
    run_node_in(step, r, vec![handle.clone()]).unwrap()[0]
        .to_tensor()
        .unwrap()
}

fn scatter_node(op: &str, dtype: DType) -> NodeDef {
    let attr = if op.starts_with("ResourceScatter") && !op.contains("Nd") {
        "dtype"
    } else {
        "T"
    };
    NodeDef::new("s", op)
        .with_input("v")
        .with_input("i")
        .with_input("u")
        .with_attr(attr, dtype)
        .with_attr("Tindices", DType::I32)
}

fn base() -> Tensor {
    Tensor::new(&[3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap()
}

/// Runs `op` (`Scatter<op>` and `ResourceScatter<op>`) on `base()` and
/// returns both results, which must agree.
fn both_forms(op: &str, indices: Tensor, updates: Tensor) -> Tensor {
    let dev = test_device();
    let step = test_step(&dev);
    let v = ref_var(&step, base());
    let out = run_node_in(
        &step,
        scatter_node(&format!("Scatter{op}"), DType::F32),
        vec![
            v,
            Entry::Value(indices.clone()),
            Entry::Value(updates.clone()),
        ],
    )
    .unwrap();
    let via_ref = out[0].to_tensor().unwrap();
    let h = resource_var(&step, Some(base()));
    let none = run_node_in(
        &step,
        scatter_node(&format!("ResourceScatter{op}"), DType::F32),
        vec![h.clone(), Entry::Value(indices), Entry::Value(updates)],
    )
    .unwrap();
    assert!(none.is_empty());
    assert_eq!(read(&step, &h, DType::F32), via_ref, "{op}");
    via_ref
}

fn t(v: &[f32]) -> Tensor {
    Tensor::new(&[v.len() / 2, 2], v.to_vec()).unwrap()
}

#[test]
fn duplicate_indices_accumulate() {
    let idx = Tensor::vector(&[2i32, 0, 2]);
    let upd = t(&[1.0, 1.0, 10.0, 10.0, 2.0, 0.5]);
    assert_eq!(
        both_forms("Add", idx.clone(), upd.clone()),
        t(&[11.0, 12.0, 3.0, 4.0, 8.0, 7.5])
    );
    assert_eq!(
        both_forms("Sub", idx.clone(), upd.clone()),
        t(&[-9.0, -8.0, 3.0, 4.0, 2.0, 4.5])
    );
    assert_eq!(
        both_forms("Mul", idx.clone(), upd.clone()),
        t(&[10.0, 20.0, 3.0, 4.0, 10.0, 3.0])
    );
    assert_eq!(
        both_forms("Div", idx.clone(), upd.clone()),
        t(&[0.1, 0.2, 3.0, 4.0, 2.5, 12.0])
    );
    assert_eq!(
        both_forms("Min", idx.clone(), upd.clone()),
        t(&[1.0, 2.0, 3.0, 4.0, 1.0, 0.5])
    );
    assert_eq!(
        both_forms("Max", idx, upd),
        t(&[10.0, 10.0, 3.0, 4.0, 5.0, 6.0])
    );
}

#[test]
fn update_and_scalar_updates() {
    let idx = Tensor::vector(&[2i32, 0]);
    assert_eq!(
        both_forms("Update", idx.clone(), t(&[7.0, 8.0, 9.0, 10.0])),
        t(&[9.0, 10.0, 3.0, 4.0, 7.0, 8.0])
    );
    assert_eq!(
        both_forms("Add", idx, Tensor::scalar(1.0f32)),
        t(&[2.0, 3.0, 3.0, 4.0, 6.0, 7.0])
    );
    // indices of higher rank: updates are indices.shape + [2]
    let idx = Tensor::new(&[2, 1], vec![1i32, 1]).unwrap();
    let upd = Tensor::new(&[2, 1, 2], vec![1.0f32, 1.0, 2.0, 2.0]).unwrap();
    assert_eq!(
        both_forms("Add", idx, upd),
        t(&[1.0, 2.0, 6.0, 7.0, 5.0, 6.0])
    );
}

#[test]
fn nd_forms_address_slices_and_elements() {
    let dev = test_device();
    let step = test_step(&dev);
    // rows
    let v = ref_var(&step, base());
    let out = run_node_in(
        &step,
        scatter_node("ScatterNdAdd", DType::F32),
        vec![
            v,
            Entry::Value(Tensor::new(&[2, 1], vec![1i32, 1]).unwrap()),
            Entry::Value(t(&[1.0, 1.0, 1.0, 1.0])),
        ],
    )
    .unwrap();
    assert_eq!(
        out[0].to_tensor().unwrap(),
        t(&[1.0, 2.0, 5.0, 6.0, 5.0, 6.0])
    );
    // elements, through a handle
    let h = resource_var(&step, Some(base()));
    for (op, want) in [
        ("ResourceScatterNdSub", [1.0f32, -1.0, 3.0, 4.0, 5.0, 6.0]),
        ("ResourceScatterNdUpdate", [1.0, 9.0, 3.0, 4.0, 5.0, 6.0]),
    ] {
        let u = if op.ends_with("Sub") { 3.0f32 } else { 9.0 };
        run_node_in(
            &step,
            scatter_node(op, DType::F32),
            vec![
                h.clone(),
                Entry::Value(Tensor::new(&[1, 2], vec![0i32, 1]).unwrap()),
                Entry::Value(Tensor::vector(&[u])),
            ],
        )
        .unwrap();
        assert_eq!(read(&step, &h, DType::F32), t(&want), "{op}");
    }
    let e = run_node_in(
        &step,
        scatter_node("ResourceScatterNdAdd", DType::F32),
        vec![
            h.clone(),
            Entry::Value(Tensor::new(&[1, 2], vec![3i32, 0]).unwrap()),
            Entry::Value(Tensor::vector(&[1.0f32])),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("indices[0] = [3, 0] does not index into shape [3,2]"),
        "{e}"
    );
}

#[test]
fn integer_scatters_wrap_and_reject_zero_divisors() {
    let dev = test_device();
    let step = test_step(&dev);
    let v = ref_var(&step, Tensor::vector(&[i32::MAX, 6]));
    let out = run_node_in(
        &step,
        scatter_node("ScatterAdd", DType::I32),
        vec![
            v.clone(),
            Entry::Value(Tensor::vector(&[0i32])),
            Entry::Value(Tensor::vector(&[1i32])),
        ],
    )
    .unwrap();
    assert_eq!(out[0].to_tensor().unwrap(), Tensor::vector(&[i32::MIN, 6]));
    let e = run_node_in(
        &step,
        scatter_node("ScatterDiv", DType::I32),
        vec![
            v.clone(),
            Entry::Value(Tensor::vector(&[1i32])),
            Entry::Value(Tensor::vector(&[0i32])),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(v.to_tensor().unwrap(), Tensor::vector(&[i32::MIN, 6]));
}

#[test]
fn errors_leave_the_variable_unchanged() {
    let dev = test_device();
    let step = test_step(&dev);
    let v = ref_var(&step, base());
    let run = |op: &str, idx: Tensor, upd: Tensor| {
        run_node_in(
            &step,
            scatter_node(op, DType::F32),
            vec![v.clone(), Entry::Value(idx), Entry::Value(upd)],
        )
        .unwrap_err()
    };
    let e = run(
        "ScatterAdd",
        Tensor::vector(&[0i32, 3]),
        t(&[1.0, 1.0, 1.0, 1.0]),
    );
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("indices[1] = 3 is not in [0, 3)"),
        "{e}"
    );
    assert_eq!(e.node(), Some("s"));
    let e = run("ScatterSub", Tensor::vector(&[-1i32]), t(&[1.0, 1.0]));
    assert!(
        e.message().contains("indices[0] = -1 is not in [0, 3)"),
        "{e}"
    );
    let e = run(
        "ScatterUpdate",
        Tensor::vector(&[0i32]),
        Tensor::vector(&[1.0f32, 2.0, 3.0]),
    );
    assert!(
        e.message()
            .contains("Must have updates.shape = indices.shape + params.shape[1:]"),
        "{e}"
    );
    assert_eq!(v.to_tensor().unwrap(), base());
    // uninitialised variables
    let h = resource_var(&step, None);
    let e = run_node_in(
        &step,
        scatter_node("ResourceScatterAdd", DType::F32),
        vec![
            h,
            Entry::Value(Tensor::vector(&[0i32])),
            Entry::Value(Tensor::vector(&[1.0f32])),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    let node = NodeDef::new("w", "VariableV2")
        .with_attr("dtype", DType::F32)
        .with_attr("shape", Shape::known(&[2]));
    let w = run_node_in(&step, node, vec![]).unwrap()[0].clone();
    let e = run_node_in(
        &step,
        scatter_node("ScatterAdd", DType::F32),
        vec![
            w,
            Entry::Value(Tensor::vector(&[0i32])),
            Entry::Value(Tensor::vector(&[1.0f32])),
        ],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
}

#[test]
fn a_held_value_is_never_written() {
    let dev = test_device();
    let step = test_step(&dev);
    let h = resource_var(&step, Some(base()));
    let before = read(&step, &h, DType::F32);
    run_node_in(
        &step,
        scatter_node("ResourceScatterAdd", DType::F32),
        vec![
            h.clone(),
            Entry::Value(Tensor::vector(&[0i32])),
            Entry::Value(t(&[1.0, 1.0])),
        ],
    )
    .unwrap();
    assert_eq!(
        before,
        base(),
        "a read taken before the update kept its value"
    );
    assert_eq!(
        read(&step, &h, DType::F32),
        t(&[2.0, 3.0, 3.0, 4.0, 5.0, 6.0])
    );
}

#[test]
fn resource_gather_reads_rows() {
    let dev = test_device();
    let step = test_step(&dev);
    let h = resource_var(&step, Some(base()));
    let g = NodeDef::new("g", "ResourceGather")
        .with_input("h")
        .with_input("i")
        .with_attr("dtype", DType::F32)
        .with_attr("Tindices", DType::I64);
    let out = run_node_in(
        &step,
        g.clone(),
        vec![h.clone(), Entry::Value(Tensor::vector(&[2i64, 2, 0]))],
    )
    .unwrap();
    assert_eq!(
        out[0].to_tensor().unwrap(),
        t(&[5.0, 6.0, 5.0, 6.0, 1.0, 2.0])
    );
    let e = run_node_in(
        &step,
        g,
        vec![h.clone(), Entry::Value(Tensor::vector(&[3i64]))],
    )
    .unwrap_err();
    assert!(
        e.message().contains("indices[0] = 3 is not in [0, 3)"),
        "{e}"
    );
    let shape = NodeDef::new("vs", "VariableShape").with_input("h");
    let out = run_node_in(&step, shape, vec![h]).unwrap();
    assert_eq!(out[0].to_tensor().unwrap(), Tensor::vector(&[3i32, 2]));
}

const FIXTURES: &str = include_str!("../../../tests/fixtures/sparse_updates.json");

fn fixture_tensor<T: graph::TensorType>(v: &serde_json::Value, f: impl Fn(f64) -> T) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let values: Vec<T> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| f(x.as_f64().unwrap()))
        .collect();
    Tensor::new(&shape, values).unwrap()
}

/// TensorFlow's `ResourceScatter*` results (gen_sparse_updates.py), checked on
/// both forms.
#[test]
fn scatters_match_tensorflow() {
    let cases: serde_json::Value = serde_json::from_str(FIXTURES).unwrap();
    for case in cases["scatter"].as_array().unwrap() {
        let op = case["op"].as_str().unwrap();
        let var = fixture_tensor(&case["var"], |x| x as f32);
        let idx = fixture_tensor(&case["indices"], |x| x as i32);
        let upd = fixture_tensor(&case["updates"], |x| x as f32);
        for prefix in ["", "Resource"] {
            let dev = test_device();
            let step = test_step(&dev);
            let (target, read_back): (Entry, bool) = if prefix.is_empty() {
                (ref_var(&step, var.clone()), false)
            } else {
                (resource_var(&step, Some(var.clone())), true)
            };
            let r = run_node_in(
                &step,
                scatter_node(&format!("{prefix}{op}"), DType::F32),
                vec![
                    target.clone(),
                    Entry::Value(idx.clone()),
                    Entry::Value(upd.clone()),
                ],
            );
            let what = format!("{prefix}{op}");
            if let Some(err) = case.get("error") {
                let e = r.unwrap_err();
                assert_eq!(e.code(), Code::InvalidArgument, "{what}");
                let want = err["message"].as_str().unwrap();
                assert!(e.message().contains(want), "{what}: {e} vs {want}");
                continue;
            }
            r.unwrap();
            let got = if read_back {
                read(&step, &target, DType::F32)
            } else {
                target.to_tensor().unwrap()
            };
            let got = got.to_f64_vec().unwrap();
            let want: Vec<f64> = case["out"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{what}[{i}]: got {g}, TensorFlow {w}"
                );
            }
        }
    }
}
