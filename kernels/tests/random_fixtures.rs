//! Checks the random kernels against draws recorded from TensorFlow
//! (`fixtures/random.json`, written by `fixtures/gen_random.py`): one kernel per
//! case, built once and run twice, must reproduce both of TensorFlow's draws bit
//! for bit — the distributions, `Multinomial`, and the candidate samplers (whose
//! draws are their three outputs: classes and expected counts).

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;

use std::path::Path;

use graph::{AttrMap, AttrValue, NodeDef, OpRegistry, Tensor};
use kernels::testutil::{test_device, test_step};
use kernels::{
    Entry, KernelRegistry, OpKernel, OpKernelConstruction, OpKernelContext, Outputs, StepContext,
};
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
    draws: Vec<Value>,
}

fn build(case: &Case, inputs: &[Tensor]) -> (Box<dyn OpKernel>, StepContext) {
    let mut node = NodeDef::new("random", case.op.as_str());
    node.attr = case.attrs.clone();
    for (i, t) in inputs.iter().enumerate() {
        node = node.with_input(format!("in{i}"));
        // The type attributes come from the inputs, as the graph builder infers them.
        let attr = match (case.op.as_str(), i) {
            (op, 0) if !op.ends_with("CandidateSampler") => "T",
            ("RandomUniformInt", 1..) => "Tout",
            _ => continue,
        };
        node.attr
            .insert(attr.to_owned(), AttrValue::from(t.dtype()));
    }
    let op_def = OpRegistry::global().lookup(&case.op).unwrap();
    let sig = op_def.validate(&mut node).unwrap();
    let device = test_device();
    let kernel = KernelRegistry::global()
        .create(&OpKernelConstruction {
            node: &node,
            op_def: &op_def,
            input_types: &sig.inputs,
            output_types: &sig.outputs,
            device: &device,
        })
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    (kernel, test_step(&device))
}

fn run(kernel: &dyn OpKernel, step: &StepContext, inputs: &[Tensor], n: usize) -> Vec<Tensor> {
    let mut ins: Vec<Entry> = inputs.iter().cloned().map(Entry::Value).collect();
    let mut outs: Outputs = (0..n).map(|_| Entry::Empty).collect();
    let mut ctx = OpKernelContext::new(
        &mut ins,
        &mut outs,
        step,
        rendezvous::FrameIter::ROOT,
        false,
        None,
    );
    kernel.compute(&mut ctx).unwrap();
    outs.into_iter()
        .map(|o| match o {
            Entry::Value(t) => t,
            other => panic!("no output: {other:?}"),
        })
        .collect()
}

/// Each element's bit pattern, as an unsigned integer of the element's width.
fn bits(t: &Tensor) -> Vec<u64> {
    let b = t.as_bytes().unwrap();
    let w = t.dtype().size();
    b.chunks_exact(w)
        .map(|c| c.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64))
        .collect()
}

#[test]
fn fixtures() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/random.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let file: File = serde_json::from_str(&text).unwrap();
    assert!(file.cases.len() >= 60);
    for case in &file.cases {
        let inputs: Vec<Tensor> = case.inputs.iter().map(common::tensor).collect();
        let (kernel, step) = build(case, &inputs);
        for (i, draw) in case.draws.iter().enumerate() {
            // A draw is one tensor, or the list of an op's outputs.
            let wanted: Vec<&Value> = match draw {
                Value::Array(outputs) => outputs.iter().collect(),
                one => vec![one],
            };
            let got = run(kernel.as_ref(), &step, &inputs, wanted.len());
            for (o, (got, draw)) in got.into_iter().zip(wanted).enumerate() {
                check_draw(&format!("{} draw {i} output {o}", case.name), &got, draw);
            }
        }
    }
}

/// `got` is the tensor `draw` records, bit for bit (`what` names it).
fn check_draw(what: &str, got: &Tensor, draw: &Value) {
    let want = common::tensor(draw);
    assert_eq!(got.dtype(), want.dtype(), "{what}");
    assert_eq!(got.shape(), want.shape(), "{what}");
    let want_bits: Vec<u64> = draw["bits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    let got_bits = bits(got);
    assert_eq!(got_bits.len(), want_bits.len(), "{what}");
    if let Some(k) = got_bits.iter().zip(&want_bits).position(|(a, b)| a != b) {
        let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
        panic!(
            "{what}: element {k} differs: got {} ({:#x}), want {} ({:#x})",
            g[k], got_bits[k], w[k], want_bits[k]
        );
    }
}
