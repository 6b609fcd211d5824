//! Runs the convolution kernels and shape functions against TensorFlow 2.21
//! (`fixtures/conv.json`, written by `fixtures/gen_conv.py`):
//!
//! - `cases`: each kernel on its own (as TensorFlow's eager mode runs it, with no
//!   shape function in front), its outputs within the case's tolerance, or
//!   TensorFlow's error code and message;
//! - `shapes`: the static shape a node gets when built on placeholders of partly
//!   known shape (and constant size inputs), or the shape function's message.

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use graph::builder::Scope;
use graph::{ops, AttrValue, DType, NodeDef, Shape, Tensor};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
    shapes: Vec<ShapeCase>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    op: String,
    attrs: BTreeMap<String, AttrValue>,
    inputs: Vec<Value>,
    #[serde(default)]
    outputs: Vec<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    rtol: Option<f64>,
    #[serde(default)]
    atol: Option<f64>,
}

#[derive(Deserialize)]
struct ShapeCase {
    name: String,
    op: String,
    attrs: BTreeMap<String, AttrValue>,
    inputs: Vec<Value>,
    #[serde(default)]
    shape: Option<Vec<Option<usize>>>,
    #[serde(default)]
    message: Option<String>,
}

fn load() -> File {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conv.json");
    let text = std::fs::read_to_string(&path).expect("conv.json");
    serde_json::from_str(&text).expect("conv.json parses")
}

#[test]
fn kernels_give_tensorflows_outputs_and_errors() {
    let file = load();
    assert!(file.cases.len() > 200, "{} cases", file.cases.len());
    let mut failures = Vec::new();
    for c in &file.cases {
        let outcome = std::panic::catch_unwind(|| run_case(c));
        if let Err(e) = outcome {
            failures.push(format!("{}: {}", c.name, panic_text(&*e)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn run_case(c: &Case) {
    {
        let inputs: Vec<Tensor> = c.inputs.iter().map(common::tensor).collect();
        let mut node = NodeDef::new("node", c.op.as_str());
        for i in 0..inputs.len() {
            node = node.with_input(format!("in{i}"));
        }
        for (k, v) in &c.attrs {
            node = node.with_attr(k, v.clone());
        }
        let result = kernels::testutil::run_node(node, inputs);
        match (&c.error, result) {
            (Some(code), Err(e)) => {
                assert_eq!(e.code().name(), code, "{}: {e}", c.name);
                let want = c.message.as_deref().expect("an error case has a message");
                assert!(
                    e.message().contains(want),
                    "{}: message {:?}\nTensorFlow: {want:?}",
                    c.name,
                    e.message()
                );
            }
            (Some(code), Ok(out)) => panic!("{}: expected {code}, got {out:?}", c.name),
            (None, Err(e)) => panic!("{}: unexpected error {e}", c.name),
            (None, Ok(out)) => {
                assert_eq!(out.len(), c.outputs.len(), "{}", c.name);
                for (g, w) in out.iter().zip(&c.outputs) {
                    let w = common::tensor(w);
                    let (rt, at) = common::default_tol(w.dtype());
                    common::assert_close(
                        &c.name,
                        g,
                        &w,
                        c.rtol.unwrap_or(rt),
                        c.atol.unwrap_or(at),
                    );
                }
            }
        }
    }
}

#[test]
fn shape_functions_give_tensorflows_shapes_and_errors() {
    let file = load();
    assert!(file.shapes.len() > 40);
    let mut failures = Vec::new();
    for c in &file.shapes {
        if let Err(e) = std::panic::catch_unwind(|| run_shape_case(c)) {
            failures.push(format!("{}: {}", c.name, panic_text(&*e)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing shapes:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn run_shape_case(c: &ShapeCase) {
    {
        let s = Scope::new();
        let mut b = s.op(&c.op);
        for inp in &c.inputs {
            let o = if let Some(vals) = inp.get("const") {
                let v: Vec<i32> = vals
                    .as_array()
                    .expect("const values")
                    .iter()
                    .map(|x| x.as_i64().expect("int") as i32)
                    .collect();
                ops::constant(&s, Tensor::vector(&v)).expect("const")
            } else {
                let shape = match inp["shape"].as_array() {
                    None => Shape::unknown(),
                    Some(dims) => Shape::from_dims(
                        &dims
                            .iter()
                            .map(|d| d.as_u64().map(|d| d as usize))
                            .collect::<Vec<_>>(),
                    ),
                };
                let dtype = match inp["dtype"].as_str() {
                    Some("int32") => DType::I32,
                    _ => DType::F32,
                };
                ops::placeholder(&s, dtype, shape).expect("placeholder")
            };
            b = b.input(&o);
        }
        for (k, v) in &c.attrs {
            b = b.attr(k, v.clone());
        }
        match (b.build1(), &c.shape, &c.message) {
            (Ok(y), Some(dims), _) => {
                assert_eq!(y.shape(), Shape::from_dims(dims), "{}", c.name)
            }
            (Ok(y), None, None) => assert_eq!(y.shape(), Shape::unknown(), "{}", c.name),
            (Ok(y), None, Some(m)) => panic!("{}: got {}, TensorFlow: {m}", c.name, y.shape()),
            (Err(e), _, Some(m)) => assert!(
                e.message().contains(m.as_str()),
                "{}: {e}\nTensorFlow: {m}",
                c.name
            ),
            (Err(e), _, None) => panic!("{}: unexpected error {e}", c.name),
        }
    }
}
