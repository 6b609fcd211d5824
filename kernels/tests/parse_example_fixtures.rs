//! `ParseExample`, `ParseExampleV2` and `ParseSingleExample` against TensorFlow
//! 2.21: every case of `fixtures/parse_example.json` (written by
//! `fixtures/gen_parse_example.py` from `tf.raw_ops` in eager mode) runs through the
//! kernel, whose outputs must equal TensorFlow's exactly, or whose error must have
//! TensorFlow's code and (unless the case says otherwise) message.
//!
//! String values in the fixture are hex (serialized protos are binary). All cases
//! run; the test fails once, listing every failing case.

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use graph::{AttrMap, AttrValue, DType, Tensor};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    op: String,
    attrs: AttrMap,
    inputs: Vec<Value>,
    #[serde(default)]
    outputs: Vec<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default = "yes")]
    compare_message: bool,
}

fn yes() -> bool {
    true
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A fixture tensor; string values are hex.
fn tensor(v: &Value) -> Tensor {
    if v["dtype"] != "string" {
        return common::tensor(v);
    }
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    let values: Vec<Vec<u8>> = v["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|x| unhex(x.as_str().expect("hex string")))
        .collect();
    Tensor::from_strings(&shape, values).expect("string tensor")
}

/// Runs one case; `Err` says what differs from TensorFlow.
fn run_case(c: &Case) -> Result<(), String> {
    let mut lists = Vec::new();
    let mut is_list = Vec::new();
    for inp in &c.inputs {
        match inp {
            Value::Array(items) => {
                lists.push(items.iter().map(tensor).collect());
                is_list.push(true);
            }
            v => {
                lists.push(vec![tensor(v)]);
                is_list.push(false);
            }
        }
    }
    let attrs: Vec<(&str, AttrValue)> = c
        .attrs
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let result = kernels::testutil::run_op_lists(&c.op, &attrs, lists, Some(&is_list));
    match (&c.error, result) {
        (Some(code), Err(e)) => {
            if e.code().name() != code {
                return Err(format!("expected {code}, got {e}"));
            }
            let want = c.message.as_deref().unwrap_or_default();
            if c.compare_message && e.message() != want {
                return Err(format!(
                    "message differs:\n   got: {:?}\n  want: {want:?}",
                    e.message()
                ));
            }
            Ok(())
        }
        (Some(code), Ok(out)) => Err(format!("expected {code}, got outputs {out:?}")),
        (None, Err(e)) => Err(format!("unexpected error {e}")),
        (None, Ok(out)) => {
            if out.len() != c.outputs.len() {
                return Err(format!(
                    "{} outputs, TensorFlow has {}",
                    out.len(),
                    c.outputs.len()
                ));
            }
            for (i, (got, want)) in out.iter().zip(&c.outputs).enumerate() {
                let want = tensor(want);
                let same = got.dtype() == want.dtype()
                    && got.dims() == want.dims()
                    && match want.dtype() {
                        // Bit patterns: parsing copies floats, it computes nothing.
                        DType::F32 => got.as_bytes().ok() == want.as_bytes().ok(),
                        _ => *got == want,
                    };
                if !same {
                    return Err(format!("output {i}:\n   got {got:?}\n  want {want:?}"));
                }
            }
            Ok(())
        }
    }
}

#[test]
fn parse_example_matches_tensorflow() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parse_example.json");
    let text = std::fs::read_to_string(&path).expect("parse_example.json");
    let file: File = serde_json::from_str(&text).expect("fixture JSON");
    assert!(file.cases.len() >= 90, "only {} cases", file.cases.len());
    let mut failures = Vec::new();
    for c in &file.cases {
        match catch_unwind(AssertUnwindSafe(|| run_case(c))) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => failures.push(format!("{}: {why}", c.name)),
            Err(_) => failures.push(format!("{}: panicked", c.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from TensorFlow:\n{}",
        failures.len(),
        file.cases.len(),
        failures.join("\n")
    );
}
