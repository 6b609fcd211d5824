//! A runner for TensorFlow-generated kernel and shape cases that also checks
//! messages (`#[path = "common/tf_cases.rs"] mod tf_cases;` beside `mod common;`):
//!
//! - `cases`: each kernel run on its own, as TensorFlow's eager mode runs it (a
//!   `NodeDef` with every attr the case lists, no shape function in front): its
//!   outputs within the case's tolerance (default: `common::default_tol`), or
//!   TensorFlow's error code and a message containing TensorFlow's. An input that
//!   is a JSON list is a list argument (`N * T`), its tensors in order.
//! - `shapes`: the static shapes a node gets when built on placeholders of partly
//!   known shape (`{"shape": dims or null, "dtype": name}`) and constants
//!   (`{"const": tensor}`, or `{"const": [ints]}` for an int32 vector), or a
//!   message containing TensorFlow's; `"list": true` passes every input as one
//!   list argument.
//!
//! Every failing case is listed at once.

use std::path::Path;

use graph::builder::Scope;
use graph::{ops, AttrMap, DType, NodeDef, Shape, Tensor};
use serde::Deserialize;
use serde_json::Value;

use crate::common::{self, Case};

/// A fixture file: kernel cases and shape cases.
#[derive(Deserialize)]
pub struct File {
    /// Kernel cases.
    pub cases: Vec<Case>,
    /// Shape-function cases.
    #[serde(default)]
    pub shapes: Vec<ShapeCase>,
}

/// One node built for its shapes.
#[derive(Deserialize)]
pub struct ShapeCase {
    name: String,
    op: String,
    #[serde(default)]
    attrs: AttrMap,
    inputs: Vec<Value>,
    #[serde(default)]
    list: bool,
    /// The shape of each output (`null`: unknown rank).
    #[serde(default)]
    shapes: Option<Vec<Option<Vec<Option<usize>>>>>,
    /// The shape of the one output, in files that give only that (absent with no
    /// message: unknown).
    #[serde(default)]
    shape: Option<Vec<Option<usize>>>,
    #[serde(default)]
    message: Option<String>,
}

/// Reads the fixture file at `path` (relative to this crate).
fn load(path: &str) -> File {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `check` on every item, then fails listing each one that panicked.
fn run_all<C>(what: &str, items: &[C], name: impl Fn(&C) -> &str, check: impl Fn(&C)) {
    let failures: Vec<String> = items
        .iter()
        .filter_map(|c| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(c)))
                .err()
                .map(|e| format!("{}: {}", name(c), panic_text(&*e)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} failing {what}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs every kernel case of the file at `path`, which must hold at least
/// `at_least`.
pub fn check_kernels(path: &str, at_least: usize) {
    let cases = load(path).cases;
    assert!(cases.len() >= at_least, "{path}: {} cases", cases.len());
    run_all("cases", &cases, |c| &c.name, run_case);
}

/// Builds every shape case of the file at `path`, which must hold at least
/// `at_least`.
pub fn check_shape_fns(path: &str, at_least: usize) {
    let shapes = load(path).shapes;
    assert!(shapes.len() >= at_least, "{path}: {} shapes", shapes.len());
    run_all("shapes", &shapes, |c| &c.name, run_shape_case);
}

fn run_case(c: &Case) {
    let inputs: Vec<Tensor> = c
        .inputs
        .iter()
        .flat_map(|v| match v {
            Value::Array(items) => items.iter().map(common::tensor).collect(),
            v => vec![common::tensor(v)],
        })
        .collect();
    let mut node = NodeDef::new("node", c.op.as_str());
    for i in 0..inputs.len() {
        node = node.with_input(format!("in{i}"));
    }
    for (k, v) in &c.attrs {
        node = node.with_attr(k, v.clone());
    }
    match (&c.error, kernels::testutil::run_node(node, inputs)) {
        (Some(code), Err(e)) => {
            assert_eq!(e.code().name(), code, "{e}");
            if let Some(want) = &c.message {
                assert!(
                    e.message().contains(want.as_str()),
                    "message {:?}\nTensorFlow: {want:?}",
                    e.message()
                );
            }
        }
        (Some(code), Ok(out)) => panic!("expected {code}, got {out:?}"),
        (None, Err(e)) => panic!("unexpected error {e}"),
        (None, Ok(out)) => {
            assert_eq!(out.len(), c.outputs.len(), "number of outputs");
            for (i, (g, w)) in out.iter().zip(&c.outputs).enumerate() {
                let w = common::tensor(w);
                let (rt, at) = common::default_tol(w.dtype());
                let what = format!("output {i}");
                common::assert_close(&what, g, &w, c.rtol.unwrap_or(rt), c.atol.unwrap_or(at));
            }
        }
    }
}

fn run_shape_case(c: &ShapeCase) {
    let s = Scope::new();
    let inputs: Vec<_> = c
        .inputs
        .iter()
        .map(|inp| match inp.get("const") {
            Some(Value::Array(v)) => {
                let v: Vec<i32> = v.iter().map(|x| x.as_i64().expect("int") as i32).collect();
                ops::constant(&s, Tensor::vector(&v)).expect("const")
            }
            Some(t) => ops::constant(&s, common::tensor(t)).expect("const"),
            None => {
                let shape = match inp["shape"].as_array() {
                    None => Shape::unknown(),
                    Some(dims) => Shape::from_dims(
                        &dims
                            .iter()
                            .map(|d| d.as_u64().map(|d| d as usize))
                            .collect::<Vec<_>>(),
                    ),
                };
                let dtype: DType = inp["dtype"]
                    .as_str()
                    .expect("dtype")
                    .parse()
                    .expect("known dtype");
                ops::placeholder(&s, dtype, shape).expect("placeholder")
            }
        })
        .collect();
    let mut b = s.op(&c.op);
    if c.list {
        b = b.input_list(&inputs);
    } else {
        for i in &inputs {
            b = b.input(i);
        }
    }
    for (k, v) in &c.attrs {
        b = b.attr(k, v.clone());
    }
    let want = c.shapes.clone().unwrap_or_else(|| vec![c.shape.clone()]);
    match (b.build(), &c.message) {
        (Ok(op), None) => {
            for (i, w) in want.iter().enumerate() {
                let got = op.output(i).expect("output").shape();
                let w = w
                    .as_ref()
                    .map_or_else(Shape::unknown, |d| Shape::from_dims(d));
                assert_eq!(got, w, "output {i}");
            }
        }
        (Ok(op), Some(m)) => panic!(
            "built {:?}, TensorFlow: {m}",
            op.output(0).map(|o| o.shape())
        ),
        (Err(e), Some(m)) => assert!(e.message().contains(m.as_str()), "{e}\nTensorFlow: {m}"),
        (Err(e), None) => panic!("unexpected error {e}"),
    }
}
