//! `_FusedMatMul` against TensorFlow 2.21: every case of
//! `fixtures/fused_matmul.json` (written by `fixtures/gen_fused_matmul.py` from
//! TensorFlow's CPU kernel) runs through the kernel, whose output must match
//! TensorFlow's within float tolerance, or whose error must have TensorFlow's code
//! and (unless the case says otherwise) message. Cases marked `"reference":
//! "unfused"` hold TensorFlow's unfused answer where its fused kernel has none or
//! differs (see the generator).
//!
//! All cases run; the test fails once, listing every failing case.

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;

use std::collections::BTreeMap;

use graph::{AttrValue, DType, NodeDef, Tensor};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    attrs: BTreeMap<String, AttrValue>,
    /// `[a, b, [args...]]`.
    inputs: (Value, Value, Vec<Value>),
    #[serde(default)]
    outputs: Vec<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    compare_message: bool,
    #[serde(default)]
    rtol: Option<f64>,
    #[serde(default)]
    atol: Option<f64>,
}

/// A `_FusedMatMul` node of type `t` over inputs named `a`, `b`, `arg0`, …
fn node(attrs: &BTreeMap<String, AttrValue>, t: DType, args: usize) -> NodeDef {
    let mut n = NodeDef::new("fused", "_FusedMatMul")
        .with_input("a")
        .with_input("b")
        .with_attr("T", t);
    for i in 0..args {
        n = n.with_input(format!("arg{i}"));
    }
    for (k, v) in attrs {
        n.attr.insert(k.clone(), v.clone());
    }
    n
}

/// Runs one case; `Err` says what differs from TensorFlow.
fn run_case(c: &Case) -> Result<(), String> {
    let (a, b) = (common::tensor(&c.inputs.0), common::tensor(&c.inputs.1));
    let args: Vec<Tensor> = c.inputs.2.iter().map(common::tensor).collect();
    let def = node(&c.attrs, a.dtype(), args.len());
    let mut inputs = vec![a, b];
    inputs.extend(args);
    let result = kernels::testutil::run_node(def, inputs);
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
                return Err(format!("{} outputs, want {}", out.len(), c.outputs.len()));
            }
            for (got, want) in out.iter().zip(&c.outputs) {
                let want = common::tensor(want);
                let (rt, at) = match want.dtype() {
                    // gemm sums in another order than Eigen; transcendental
                    // functions differ by a few ulps.
                    DType::F32 => (1e-5, 1e-5),
                    d => common::default_tol(d),
                };
                let (rt, at) = (c.rtol.unwrap_or(rt), c.atol.unwrap_or(at));
                std::panic::catch_unwind(|| common::assert_close(&c.name, got, &want, rt, at))
                    .map_err(|e| {
                        e.downcast_ref::<String>()
                            .cloned()
                            .unwrap_or_else(|| "output differs".into())
                    })?;
            }
            Ok(())
        }
    }
}

#[test]
fn fused_matmul_matches_tensorflow() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fused_matmul.json");
    let text = std::fs::read_to_string(&path).expect("fixture file");
    let file: File = serde_json::from_str(&text).expect("fixture JSON");
    assert!(file.cases.len() > 100, "too few cases");
    let failures: Vec<String> = file
        .cases
        .iter()
        .filter_map(|c| run_case(c).err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from TensorFlow:\n{}",
        failures.len(),
        file.cases.len(),
        failures.join("\n")
    );
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The fused kernel against the kernels it replaces (`MatMul`, `BiasAdd`, the
/// activation) on products large enough for `gemm`'s threads and for the
/// finishing pass to run on them too, every transpose. (Both call `gemm` the same
/// way, so they agree bit for bit; the tolerance leaves room for a microkernel
/// that would not.)
#[test]
fn large_products_equal_the_unfused_kernels() {
    use kernels::testutil::run_op;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .expect("a thread pool");
    let shapes = [
        (64, 784, 256, false, false),
        (40, 300, 400, true, false),
        (200, 100, 300, false, true),
        // Outputs of 600K and 1.4M elements: the finishing pass on every thread.
        (600, 64, 1024, true, false),
        (700, 32, 2048, false, true),
        (3, 2000, 1000, true, true),
        (1, 4096, 1024, false, false),
    ];
    let acts: [(&str, Vec<(&str, AttrValue)>); 5] = [
        ("Relu", vec![]),
        ("Relu6", vec![]),
        ("Elu", vec![]),
        ("LeakyRelu", vec![("alpha", AttrValue::F(0.3))]),
        ("Tanh", vec![]),
    ];
    for (i, &(m, k, n, ta, tb)) in shapes.iter().enumerate() {
        let a_dims = if ta { [k, m] } else { [m, k] };
        let b_dims = if tb { [n, k] } else { [k, n] };
        let a = Tensor::new(&a_dims, values(m * k, i as u64)).expect("a");
        let b = Tensor::new(&b_dims, values(k * n, 100 + i as u64)).expect("b");
        let bias = Tensor::vector(&values(n, 200 + i as u64));
        for (act, act_attrs) in &acts {
            let tr = [
                ("transpose_a", AttrValue::B(ta)),
                ("transpose_b", AttrValue::B(tb)),
            ];
            let (fused, unfused) = pool.install(|| {
                let p = run_op("MatMul", &tr, vec![a.clone(), b.clone()]).expect("MatMul");
                let y = run_op("BiasAdd", &[], vec![p[0].clone(), bias.clone()]).expect("BiasAdd");
                let r = run_op(act, act_attrs, vec![y[0].clone()]).expect("activation");
                let alpha = act_attrs
                    .first()
                    .map_or(AttrValue::F(0.2), |(_, v)| v.clone());
                let attrs: BTreeMap<String, AttrValue> = [
                    ("transpose_a", AttrValue::B(ta)),
                    ("transpose_b", AttrValue::B(tb)),
                    ("num_args", AttrValue::I(1)),
                    ("leakyrelu_alpha", alpha),
                    (
                        "fused_ops",
                        AttrValue::from(vec!["BiasAdd".to_owned(), act.to_string()]),
                    ),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
                let f = kernels::testutil::run_node(
                    node(&attrs, DType::F32, 1),
                    vec![a.clone(), b.clone(), bias.clone()],
                )
                .expect("_FusedMatMul");
                (f[0].clone(), r[0].clone())
            });
            let what = format!("{m}x{k}x{n} ta={ta} tb={tb} {act}");
            common::assert_close(&what, &fused, &unfused, 1e-6, 1e-6);
        }
    }
}
