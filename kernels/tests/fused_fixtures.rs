//! `_FusedMatMul` and `_FusedConv2D` against TensorFlow 2.21: every case of
//! `fixtures/fused_matmul.json` and `fixtures/fused_conv.json` (written by
//! `fixtures/gen_fused_matmul.py` and `fixtures/gen_fused_conv.py` from
//! TensorFlow's CPU kernels) runs through the kernel, whose output must match
//! TensorFlow's within float tolerance, or whose error must have TensorFlow's code
//! and (unless the case says otherwise) message. Cases marked `"reference":
//! "unfused"` hold TensorFlow's unfused answer where its fused kernel has none or
//! differs (see the generators).
//!
//! All cases of a file run; its test fails once, listing every failing case.
//! Then both fused kernels are checked against the kernels they replace on
//! sizes that run them on several threads: the answers are equal bit for bit.

// The harness in `common` names this crate `kernels`.
extern crate actorflow_kernels as kernels;

mod common;

use graph::{AttrMap, AttrValue, DType, NodeDef, Tensor};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    attrs: AttrMap,
    /// `[a, b, [args...]]` (`[input, filter, [args...]]`).
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

/// An `op` node (`_FusedMatMul` or `_FusedConv2D`) of type `t` over inputs
/// named `a`, `b`, `arg0`, … of types `args` (`_FusedConv2D`'s `TArgs`).
fn node(op: &str, attrs: &AttrMap, t: DType, args: &[DType]) -> NodeDef {
    let mut n = NodeDef::new("fused", op)
        .with_input("a")
        .with_input("b")
        .with_attr("T", t);
    for i in 0..args.len() {
        n = n.with_input(format!("arg{i}"));
    }
    if op == "_FusedConv2D" {
        n = n.with_attr("TArgs", AttrValue::from(args.to_vec()));
    }
    for (k, v) in attrs {
        n.attr.insert(k.clone(), v.clone());
    }
    n
}

/// Runs one case of `op`; `Err` says what differs from TensorFlow.
fn run_case(op: &str, c: &Case) -> Result<(), String> {
    let (a, b) = (common::tensor(&c.inputs.0), common::tensor(&c.inputs.1));
    let args: Vec<Tensor> = c.inputs.2.iter().map(common::tensor).collect();
    let types: Vec<DType> = args.iter().map(Tensor::dtype).collect();
    let def = node(op, &c.attrs, a.dtype(), &types);
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

/// Runs every case of `fixtures/{file}` through `op`'s kernel.
fn run_file(op: &str, file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture file");
    let file: File = serde_json::from_str(&text).expect("fixture JSON");
    assert!(file.cases.len() > 100, "too few cases");
    let failures: Vec<String> = file
        .cases
        .iter()
        .filter_map(|c| run_case(op, c).err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from TensorFlow:\n{}",
        failures.len(),
        file.cases.len(),
        failures.join("\n")
    );
}

#[test]
fn fused_matmul_matches_tensorflow() {
    run_file("_FusedMatMul", "fused_matmul.json");
}

#[test]
fn fused_conv2d_matches_tensorflow() {
    run_file("_FusedConv2D", "fused_conv.json");
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
                let attrs: AttrMap = [
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
                    node("_FusedMatMul", &attrs, DType::F32, &[DType::F32]),
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

/// `_FusedConv2D` against the kernels it replaces (`Conv2D`, then `BiasAdd` or
/// an inference `FusedBatchNormV3`, then the activation) on convolutions that
/// run across images, inside products, as one pointwise product, and grouped:
/// the answers are equal bit for bit (the same products, and the same
/// arithmetic after them).
#[test]
fn large_convolutions_equal_the_unfused_kernels() {
    use kernels::testutil::run_op;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .expect("a thread pool");
    // (input, filter, strides, padding)
    let shapes: [([usize; 4], [usize; 4], i64, &str); 5] = [
        // Eight images: spread over the threads.
        ([8, 20, 20, 8], [3, 3, 8, 16], 1, "SAME"),
        // One large image: the products split over the threads, several blocks.
        ([1, 96, 96, 16], [5, 5, 16, 32], 1, "SAME"),
        // Pointwise: one product over every pixel, finished on the threads.
        ([4, 40, 40, 32], [1, 1, 32, 64], 1, "VALID"),
        ([2, 33, 31, 6], [3, 3, 6, 10], 2, "VALID"),
        // Grouped: two groups of 4 input channels.
        ([3, 16, 16, 8], [3, 3, 4, 12], 1, "SAME"),
    ];
    let acts: [(&str, Vec<(&str, AttrValue)>); 5] = [
        ("Identity", vec![]),
        ("Relu", vec![]),
        ("Relu6", vec![]),
        ("Elu", vec![]),
        ("LeakyRelu", vec![("alpha", AttrValue::F(0.3))]),
    ];
    for (i, &(xs, ws, stride, padding)) in shapes.iter().enumerate() {
        let x = Tensor::new(&xs, values(xs.iter().product(), i as u64)).expect("x");
        let w = Tensor::new(&ws, values(ws.iter().product(), 50 + i as u64)).expect("w");
        let depth = ws[3];
        let vec = |seed: u64| Tensor::vector(&values(depth, seed));
        let variance = Tensor::vector(
            &values(depth, 400 + i as u64)
                .iter()
                .map(|v| v.abs() + 0.1)
                .collect::<Vec<f32>>(),
        );
        let bias = vec(100 + i as u64);
        let bn = [
            vec(200 + i as u64),
            vec(300 + i as u64),
            vec(500 + i as u64),
            variance,
        ];
        let window = [
            ("strides", AttrValue::from(vec![1i64, stride, stride, 1])),
            ("padding", AttrValue::from(padding)),
        ];
        for (act, act_attrs) in &acts {
            for batch_norm in [false, true] {
                let (fused, unfused) = pool.install(|| {
                    let y = run_op("Conv2D", &window, vec![x.clone(), w.clone()]).expect("Conv2D");
                    let y = if batch_norm {
                        let mut inputs = vec![y[0].clone()];
                        inputs.extend(bn.iter().cloned());
                        let attrs = [
                            ("is_training", AttrValue::B(false)),
                            ("epsilon", AttrValue::F(0.001)),
                            ("U", AttrValue::Type(DType::F32)),
                        ];
                        run_op("FusedBatchNormV3", &attrs, inputs).expect("FusedBatchNormV3")
                    } else {
                        run_op("BiasAdd", &[], vec![y[0].clone(), bias.clone()]).expect("BiasAdd")
                    };
                    let r = run_op(act, act_attrs, vec![y[0].clone()]).expect("activation");
                    let alpha = act_attrs
                        .first()
                        .map_or(AttrValue::F(0.2), |(_, v)| v.clone());
                    let first = if batch_norm {
                        "FusedBatchNorm"
                    } else {
                        "BiasAdd"
                    };
                    let mut ops = vec![first.to_owned()];
                    if *act != "Identity" {
                        ops.push(act.to_string());
                    }
                    let args: Vec<Tensor> = if batch_norm {
                        bn.to_vec()
                    } else {
                        vec![bias.clone()]
                    };
                    let mut attrs: AttrMap = [
                        ("num_args", AttrValue::I(args.len() as i64)),
                        ("leakyrelu_alpha", alpha),
                        ("epsilon", AttrValue::F(0.001)),
                        ("fused_ops", AttrValue::from(ops)),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect();
                    attrs.extend(window.iter().map(|(k, v)| (k.to_string(), v.clone())));
                    let types = vec![DType::F32; args.len()];
                    let mut inputs = vec![x.clone(), w.clone()];
                    inputs.extend(args);
                    let f = kernels::testutil::run_node(
                        node("_FusedConv2D", &attrs, DType::F32, &types),
                        inputs,
                    )
                    .expect("_FusedConv2D");
                    (f[0].clone(), r[0].clone())
                });
                assert_eq!(
                    fused, unfused,
                    "{xs:?} * {ws:?} stride {stride} {padding} {act} batch norm {batch_norm}"
                );
            }
        }
    }
}
