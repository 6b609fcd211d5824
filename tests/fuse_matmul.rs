//! The `MatMul` + `BiasAdd` (+ activation) → `_FusedMatMul` rewrite
//! (`graph::passes::fuse_matmul`) and the fused kernel, run in sessions:
//! - a fused graph gives the unfused graph's answers, and chains whose
//!   intermediates are read elsewhere, fetched or on other devices stay unfused;
//! - on a TensorFlow 2.21 graph the pass fuses exactly the chains TensorFlow's
//!   grappler remapper fuses (same names, inputs and attributes), and TensorFlow's
//!   own remapped GraphDef, with its `_FusedMatMul` nodes, imports and runs with
//!   TensorFlow's answers (`kernels/tests/fixtures/gen_fused_matmul.py` wrote both
//!   graphs and the answers);
//! - `_FusedMatMul` has no gradient, as in TensorFlow.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use actorflow::graph::gradients::gradients;
use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::graph::passes::fuse_matmul::fuse_matmul_bias_activation;
use actorflow::graph::{AttrValue, GraphDef, NodeDef};
use actorflow::{ops, Code, DType, Output, Scope, Session, SessionOptions, Shape, Tensor};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures")
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn konst(s: &Scope, dims: &[usize], seed: u64) -> Output {
    let n = dims.iter().product();
    ops::constant(s, Tensor::new(dims, values(n, seed)).expect("tensor")).expect("const")
}

/// `act(bias_add(x · w, b))` (`act` None: the `BiasAdd`).
fn layer(s: &Scope, x: &Output, k: usize, n: usize, act: Option<&str>) -> Output {
    let w = konst(s, &[k, n], k as u64 * 31 + n as u64);
    let b = konst(s, &[n], n as u64 * 7 + 1);
    let mm = ops::mat_mul(s, x, &w, false, false).expect("MatMul");
    let ba = ops::bias_add(s, &mm, &b, "NHWC").expect("BiasAdd");
    match act {
        None => Ok(ba),
        Some("Relu") => ops::relu(s, &ba),
        Some("Relu6") => ops::relu6(s, &ba),
        Some("Elu") => ops::elu(s, &ba),
        Some("LeakyRelu") => ops::leaky_relu(s, &ba, 0.3),
        Some("Tanh") => ops::tanh(s, &ba),
        Some(other) => panic!("{other}"),
    }
    .expect("activation")
}

/// The node name of `o`.
fn name(o: &Output) -> String {
    o.op().name().to_owned()
}

/// Runs `gd` on `x` fed to `feed` and fetches `fetches`.
fn run(gd: &GraphDef, feed: &str, x: &Tensor, fetches: &[&str]) -> Vec<Tensor> {
    let sess = Session::new(gd, SessionOptions::default().with_cpu_devices(2)).expect("session");
    let out = sess.run(&[(feed, x.clone())], fetches, &[]).expect("run");
    let _ = sess.close();
    out
}

fn ops_of(gd: &GraphDef) -> BTreeMap<String, String> {
    gd.node
        .iter()
        .map(|n| (n.name.clone(), n.op.clone()))
        .collect()
}

fn protect(names: &[&str]) -> HashSet<String> {
    names
        .iter()
        .map(|n| n.split(':').next().unwrap_or(n).to_owned())
        .collect()
}

#[test]
fn a_fused_mlp_gives_the_unfused_answers() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(20)])).expect("x");
    let h1 = layer(&s, &x, 20, 16, Some("Relu"));
    let h2 = layer(&s, &h1, 16, 12, Some("Relu6"));
    let h3 = layer(&s, &h2, 12, 10, Some("Elu"));
    let h4 = layer(&s, &h3, 10, 8, Some("LeakyRelu"));
    let h5 = layer(&s, &h4, 8, 6, Some("Tanh"));
    let h6 = layer(&s, &h5, 6, 4, None);
    let gd = s.graph_def();
    let (x_name, out) = (name(&x), h6.name());
    let fetches = [out.as_str()];
    let xv = Tensor::new(&[9, 20], values(180, 99)).expect("x");
    let want = run(&gd, &x_name, &xv, &fetches);

    let mut fused = gd.clone();
    let protected = protect(&[&x_name, &out]);
    let n = fuse_matmul_bias_activation(&mut fused.node, &protected);
    assert_eq!(
        n, 6,
        "five activations (Tanh's BiasAdd alone) and one BiasAdd"
    );
    let kinds = ops_of(&fused);
    for o in [&h1, &h2, &h3, &h4, &h6] {
        assert_eq!(kinds[&name(o)], "_FusedMatMul", "{}", name(o));
    }
    assert_eq!(kinds[&name(&h5)], "Tanh");
    assert!(!kinds.values().any(|op| op == "MatMul" || op == "BiasAdd"));
    let got = run(&fused, &x_name, &xv, &fetches);
    assert_eq!(got, want, "the fused graph's answers");
    // Batch 0 runs too.
    let empty = Tensor::zeros(DType::F32, [0, 20]);
    assert_eq!(
        run(&fused, &x_name, &empty, &fetches),
        run(&gd, &x_name, &empty, &fetches)
    );
}

#[test]
fn intermediates_read_elsewhere_fetched_or_on_other_devices_stay() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(8)])).expect("x");
    let w = konst(&s, &[8, 5], 1);
    let b = konst(&s, &[5], 2);
    let chain = |s: &Scope| {
        let mm = ops::mat_mul(s, &x, &w, false, false).expect("MatMul");
        let ba = ops::bias_add(s, &mm, &b, "NHWC").expect("BiasAdd");
        let r = ops::relu(s, &ba).expect("Relu");
        (mm, ba, r)
    };
    // 1: the MatMul read twice: nothing fused.
    let (mm1, _, r1) = chain(&s);
    let side1 = ops::identity(&s, &mm1).expect("side1");
    // 2: the BiasAdd read twice: MatMul + BiasAdd fused, the Relu stays.
    let (_, ba2, r2) = chain(&s);
    let side2 = ops::square(&s, &ba2).expect("side2");
    // 3: the BiasAdd fetched: likewise.
    let (_, ba3, r3) = chain(&s);
    // 4: the MatMul fetched: nothing.
    let (mm4, _, r4) = chain(&s);
    // 5: the activation on another device: MatMul + BiasAdd fused, the Relu stays.
    let mm5 = ops::mat_mul(&s, &x, &w, false, false).expect("mm5");
    let ba5 = ops::bias_add(&s, &mm5, &b, "NHWC").expect("ba5");
    let r5 = ops::relu(&s.with_device("/device:CPU:1"), &ba5).expect("r5");
    let fetched: Vec<String> = [&r1, &side1, &r2, &side2, &r3, &ba3, &r4, &mm4, &r5]
        .iter()
        .map(|t| t.name())
        .collect();
    let fetched: Vec<&str> = fetched.iter().map(String::as_str).collect();
    let gd = s.graph_def();
    let mut fused = gd.clone();
    let mut protected = protect(&fetched);
    protected.insert(name(&x));
    assert_eq!(fuse_matmul_bias_activation(&mut fused.node, &protected), 3);
    let kinds = ops_of(&fused);
    assert_eq!(kinds[&name(&mm1)], "MatMul");
    assert_eq!(kinds[&name(&mm4)], "MatMul");
    for (ba, r) in [(&ba2, &r2), (&ba3, &r3), (&ba5, &r5)] {
        assert_eq!(kinds[&name(ba)], "_FusedMatMul", "{}", name(ba));
        assert_eq!(kinds[&name(r)], "Relu", "{}", name(r));
    }
    let xv = Tensor::new(&[3, 8], values(24, 5)).expect("x");
    assert_eq!(
        run(&fused, &name(&x), &xv, &fetched),
        run(&gd, &name(&x), &xv, &fetched)
    );
}

/// A TensorFlow GraphDef from the fixtures folder.
fn tf_graph(file: &str) -> GraphDef {
    load_graph_def(&fixtures().join(file), &ImportOptions::default()).expect("import")
}

fn tf_doc() -> Value {
    let text = std::fs::read_to_string(fixtures().join("fused_matmul_graph.json")).expect("json");
    serde_json::from_str(&text).expect("fixture JSON")
}

fn float_tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    let vals = v["values"].as_array().expect("values");
    match v["dtype"].as_str().expect("dtype") {
        "float32" => Tensor::new(
            &shape,
            vals.iter().map(|x| x.as_f64().expect("f") as f32).collect(),
        ),
        "float64" => Tensor::new(
            &shape,
            vals.iter().map(|x| x.as_f64().expect("f")).collect(),
        ),
        other => panic!("dtype {other}"),
    }
    .expect("tensor")
}

fn fetches(doc: &Value) -> Vec<String> {
    doc["fetches"]
        .as_array()
        .expect("fetches")
        .iter()
        .map(|f| f.as_str().expect("fetch").to_owned())
        .collect()
}

/// A `_FusedMatMul`'s attributes as the kernel reads them (op defaults filled).
fn fused_attrs(n: &NodeDef) -> (Vec<String>, i64, bool, bool, f32) {
    let get = |k: &str| n.attr.get(k);
    let b = |k: &str| matches!(get(k), Some(AttrValue::B(true)));
    let alpha = match get("leakyrelu_alpha") {
        Some(AttrValue::F(a)) => *a,
        _ => 0.2,
    };
    (
        n.get_attr::<Vec<String>>("fused_ops").expect("fused_ops"),
        n.get_attr::<i64>("num_args").expect("num_args"),
        b("transpose_a"),
        b("transpose_b"),
        alpha,
    )
}

#[test]
fn the_pass_fuses_what_tensorflows_remapper_fuses() {
    let doc = tf_doc();
    let fetches = fetches(&doc);
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let mut ours = tf_graph("fused_matmul_graph.pb");
    let n = fuse_matmul_bias_activation(&mut ours.node, &protect(&fetches));
    let theirs = tf_graph("fused_matmul_graph_remapped.pb");
    let fused_by_tf = theirs
        .node
        .iter()
        .filter(|n| n.op == "_FusedMatMul")
        .count();
    assert_eq!(n, fused_by_tf, "chains fused");
    assert_eq!(ops_of(&ours), ops_of(&theirs), "nodes and ops");
    for t in &theirs.node {
        let o = ours.node.iter().find(|n| n.name == t.name).expect("node");
        assert_eq!(o.input, t.input, "{}: inputs", t.name);
        assert_eq!(o.device, t.device, "{}: device", t.name);
        if t.op == "_FusedMatMul" {
            assert_eq!(fused_attrs(o), fused_attrs(t), "{}: attributes", t.name);
        }
    }
}

#[test]
fn tensorflows_remapped_graph_runs_with_tensorflows_answers() {
    let doc = tf_doc();
    let fetches = fetches(&doc);
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let x = float_tensor(&doc["feeds"]["x:0"]);
    let want: Vec<Tensor> = doc["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .map(float_tensor)
        .collect();
    let remapped = tf_graph("fused_matmul_graph_remapped.pb");
    assert!(remapped.node.iter().any(|n| n.op == "_FusedMatMul"));
    let original = tf_graph("fused_matmul_graph.pb");
    let mut ours = original.clone();
    fuse_matmul_bias_activation(&mut ours.node, &protect(&fetches));
    let unfused = run(&original, "x", &x, &fetches);
    for (what, g) in [("TensorFlow's remapped graph", &remapped), ("ours", &ours)] {
        let got = run(g, "x", &x, &fetches);
        for ((name, g), w) in fetches.iter().zip(&got).zip(&want) {
            assert_eq!(g.dtype(), w.dtype(), "{what}: {name}");
            assert_eq!(g.dims(), w.dims(), "{what}: {name}");
            let (g, w) = (g.to_f64_vec().expect("g"), w.to_f64_vec().expect("w"));
            for (a, b) in g.iter().zip(&w) {
                assert!(
                    (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                    "{what}: {name}: {a} vs {b}"
                );
            }
        }
        assert_eq!(got, unfused, "{what}: equal to our unfused run");
    }
}

#[test]
fn fused_matmul_has_no_gradient() {
    let s = Scope::new();
    let a = konst(&s, &[2, 3], 1);
    let b = konst(&s, &[3, 4], 2);
    let bias = konst(&s, &[4], 3);
    let f = s
        .op("_FusedMatMul")
        .name("fused")
        .input(&a)
        .input(&b)
        .input_list(&[bias])
        .attr("num_args", 1i64)
        .attr(
            "fused_ops",
            AttrValue::from(vec!["BiasAdd".to_owned(), "Relu".to_owned()]),
        )
        .build1()
        .expect("_FusedMatMul");
    assert_eq!(f.shape(), Shape::known(&[2, 4]));
    let e = gradients(&s, &[f], &[a], None).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e}");
    assert!(
        e.message()
            .contains("No gradient defined for operation 'fused' (op type: _FusedMatMul)"),
        "{e}"
    );
}
