//! The remapper rewrites (`graph::passes::remapper`): `MatMul`/`Conv2D` +
//! `BiasAdd`/`FusedBatchNorm` (+ activation) → `_FusedMatMul`/`_FusedConv2D`,
//! and the fused kernels, run in sessions:
//! - a fused graph gives the unfused graph's answers, and chains whose
//!   intermediates are read elsewhere, fetched or on other devices stay unfused;
//! - on two TensorFlow 2.21 graphs the pass fuses exactly the chains
//!   TensorFlow's grappler remapper fuses (same names, inputs and attributes),
//!   and TensorFlow's own remapped GraphDefs, with their fused nodes, import and
//!   run with TensorFlow's answers (`kernels/tests/fixtures/gen_fused_matmul.py`
//!   and `gen_fused_conv.py` wrote the graphs and the answers);
//! - the fused ops have no gradient, as in TensorFlow.

// Only its fixture tensor parser; the graphs run here under remapper settings of their own.
#[allow(dead_code)]
mod graph_fixture;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use actorflow::graph::gradients::gradients;
use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::graph::passes::remapper::remap;
use actorflow::graph::{AttrValue, GraphDef, NodeDef, OpRegistry};
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
    let n = remap(&mut fused.node, &protected);
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
    assert_eq!(remap(&mut fused.node, &protected), 3);
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

/// The fixture `{stem}.json`: feeds, fetches and TensorFlow's outputs.
fn tf_doc(stem: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join(format!("{stem}.json"))).expect("json");
    serde_json::from_str(&text).expect("fixture JSON")
}

fn fetches(doc: &Value) -> Vec<String> {
    doc["fetches"]
        .as_array()
        .expect("fetches")
        .iter()
        .map(|f| f.as_str().expect("fetch").to_owned())
        .collect()
}

/// A node's attributes as its kernel reads them: every attribute of its op,
/// set or defaulted.
fn attrs_with_defaults(n: &NodeDef) -> BTreeMap<String, Option<AttrValue>> {
    let def = OpRegistry::global().lookup(&n.op).expect("op");
    def.attrs
        .iter()
        .map(|a| {
            let v = n.attr.get(&a.name).cloned().or_else(|| a.default.clone());
            (a.name.clone(), v)
        })
        .collect()
}

/// The graphs each generator wrote: (stem, fused op).
const TF_GRAPHS: [(&str, &str); 2] = [
    ("fused_matmul_graph", "_FusedMatMul"),
    ("fused_conv_graph", "_FusedConv2D"),
];

#[test]
fn the_pass_fuses_what_tensorflows_remapper_fuses() {
    for (stem, op) in TF_GRAPHS {
        let doc = tf_doc(stem);
        let fetches = fetches(&doc);
        let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let mut ours = tf_graph(&format!("{stem}.pb"));
        let n = remap(&mut ours.node, &protect(&fetches));
        let theirs = tf_graph(&format!("{stem}_remapped.pb"));
        let fused_by_tf = theirs.node.iter().filter(|n| n.op == op).count();
        assert!(fused_by_tf >= 5, "{stem}: TensorFlow fused {fused_by_tf}");
        assert_eq!(n, fused_by_tf, "{stem}: chains fused");
        assert_eq!(ops_of(&ours), ops_of(&theirs), "{stem}: nodes and ops");
        for t in &theirs.node {
            let o = ours.node.iter().find(|n| n.name == t.name).expect("node");
            assert_eq!(o.input, t.input, "{stem}: {}: inputs", t.name);
            assert_eq!(o.device, t.device, "{stem}: {}: device", t.name);
            if t.op == op {
                assert_eq!(
                    attrs_with_defaults(o),
                    attrs_with_defaults(t),
                    "{stem}: {}: attributes",
                    t.name
                );
            }
        }
    }
}

#[test]
fn tensorflows_remapped_graphs_run_with_tensorflows_answers() {
    for (stem, op) in TF_GRAPHS {
        let doc = tf_doc(stem);
        let fetches = fetches(&doc);
        let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let x = graph_fixture::tensor(&doc["feeds"]["x:0"]);
        let want: Vec<Tensor> = doc["outputs"]
            .as_array()
            .expect("outputs")
            .iter()
            .map(graph_fixture::tensor)
            .collect();
        let remapped = tf_graph(&format!("{stem}_remapped.pb"));
        assert!(remapped.node.iter().any(|n| n.op == op));
        let original = tf_graph(&format!("{stem}.pb"));
        let mut ours = original.clone();
        remap(&mut ours.node, &protect(&fetches));
        let unfused = run(&original, "x", &x, &fetches);
        for (what, g) in [("TensorFlow's remapped graph", &remapped), ("ours", &ours)] {
            let got = run(g, "x", &x, &fetches);
            for ((name, g), w) in fetches.iter().zip(&got).zip(&want) {
                assert_eq!(g.dtype(), w.dtype(), "{stem}: {what}: {name}");
                assert_eq!(g.dims(), w.dims(), "{stem}: {what}: {name}");
                let (g, w) = (g.to_f64_vec().expect("g"), w.to_f64_vec().expect("w"));
                for (a, b) in g.iter().zip(&w) {
                    assert!(
                        (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
                        "{stem}: {what}: {name}: {a} vs {b}"
                    );
                }
            }
            assert_eq!(got, unfused, "{stem}: {what}: equal to our unfused run");
        }
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

/// A small convnet on `x` (`[None, 8, 8, 2]`): `Conv2D + BiasAdd + Relu`, then
/// `Conv2D` (stride 2) + inference `FusedBatchNormV3` + `Relu6`, then a dense
/// layer, with trainable filters; returns `(x, logits, loss)`.
fn convnet(s: &Scope) -> (Output, Output, Output) {
    let x = ops::placeholder(
        s,
        DType::F32,
        Shape::from_dims(&[None, Some(8), Some(8), Some(2)]),
    )
    .expect("x");
    let var = |name: &str, dims: &[usize], seed: u64| {
        let init = konst(s, dims, seed);
        ops::Variable::new(s, name, &init, true).expect("var").value
    };
    let same = ops::ConvOptions::new(&[1, 1, 1, 1], "SAME");
    let c1 = ops::conv2d(s, &x, &var("w1", &[3, 3, 2, 4], 1), &same).expect("conv1");
    let b1 = var("b1", &[4], 2);
    let h1 = ops::relu(s, &ops::bias_add(s, &c1, &b1, "NHWC").expect("ba1")).expect("relu1");
    let strided = ops::ConvOptions::new(&[1, 2, 2, 1], "SAME");
    let c2 = ops::conv2d(s, &h1, &var("w2", &[3, 3, 4, 6], 3), &strided).expect("conv2");
    let variance =
        ops::constant(s, Tensor::vector(&[0.5f32, 1.0, 1.5, 2.0, 0.25, 0.75])).expect("v");
    let bn = ops::fused_batch_norm(
        s,
        &c2,
        &konst(s, &[6], 4),
        &konst(s, &[6], 5),
        Some(&konst(s, &[6], 6)),
        Some(&variance),
        &ops::FusedBatchNormOpts {
            is_training: false,
            ..Default::default()
        },
    )
    .expect("bn");
    let h2 = ops::relu6(s, &bn.y).expect("relu6");
    let flat = ops::reshape(
        s,
        &h2,
        &ops::constant(s, Tensor::vector(&[-1i32, 96])).expect("shape"),
    )
    .expect("flat");
    let logits = ops::mat_mul(s, &flat, &var("w3", &[96, 3], 7), false, false).expect("dense");
    let loss =
        ops::sum_axes(s, &ops::square(s, &logits).expect("sq"), &[0, 1], false).expect("loss");
    (x, logits, loss)
}

fn count_ops(s: &Session, feeds: &[&str], fetches: &[&str], targets: &[&str], op: &str) -> usize {
    let c = s.compiled_step(feeds, fetches, targets).expect("compiled");
    c.partitions
        .iter()
        .flat_map(|p| &p.graph.node)
        .filter(|n| n.op == op)
        .count()
}

#[test]
fn a_convnet_infers_and_trains_alike_fused_and_unfused() {
    use actorflow::graph::train::{GradientDescentOptimizer, Optimizer};
    use actorflow::{RewriterConfig, Toggle};
    let s = Scope::new();
    let (x, logits, loss) = convnet(&s);
    let train = GradientDescentOptimizer::new(0.0005)
        .minimize(&s, &loss, None, None)
        .expect("train op");
    let init = actorflow::graph::train::global_variables_initializer(&s).expect("init");
    let gd = s.graph_def();
    let sessions = [Toggle::Default, Toggle::Off].map(|t| {
        let opts = SessionOptions::default()
            .with_rewrite_options(RewriterConfig::default().with_remapping(t));
        let sess = Session::new(&gd, opts).expect("session");
        sess.run(&[], &[], &[init.name()]).expect("init");
        sess
    });
    let (xn, ln, lossn, tn) = (name(&x), logits.name(), loss.name(), train.name());
    let feed = Tensor::new(&[5, 8, 8, 2], values(640, 17)).expect("x");
    // Inference: both convolutions fuse (with the bias and Relu, with the batch
    // norm and Relu6).
    assert_eq!(
        count_ops(&sessions[0], &[&xn], &[&ln], &[], "_FusedConv2D"),
        2
    );
    assert_eq!(
        count_ops(&sessions[0], &[&xn], &[&ln], &[], "FusedBatchNormV3"),
        0
    );
    assert_eq!(
        count_ops(&sessions[1], &[&xn], &[&ln], &[], "_FusedConv2D"),
        0
    );
    // Training: the batch norm's gradient reads the second convolution's
    // output, so only the first convolution fuses; ReluGrad reads the fused
    // node's output under the Relu's name.
    assert_eq!(
        count_ops(&sessions[0], &[&xn], &[&lossn], &[tn], "_FusedConv2D"),
        1
    );
    let mut runs = Vec::new();
    for sess in &sessions {
        let mut outs = Vec::new();
        for _ in 0..3 {
            let mut o = sess
                .run(&[(&xn, feed.clone())], &[&ln, &lossn], &[tn])
                .expect("step");
            outs.append(&mut o);
        }
        outs.extend(
            sess.run(&[(&xn, feed.clone())], &[&ln], &[])
                .expect("infer"),
        );
        runs.push(outs);
        let _ = sess.close();
    }
    assert_eq!(runs[0], runs[1], "fused and unfused, bit for bit");
    let losses: Vec<f32> = runs[0]
        .iter()
        .skip(1)
        .step_by(2)
        .take(3)
        .map(|t| t.as_slice::<f32>().expect("loss")[0])
        .collect();
    assert!(
        losses[2] < losses[0],
        "training lowers the loss: {losses:?}"
    );
}

#[test]
fn fused_conv2d_has_no_gradient() {
    let s = Scope::new();
    let x = konst(&s, &[1, 4, 4, 2], 1);
    let w = konst(&s, &[3, 3, 2, 3], 2);
    let bias = konst(&s, &[3], 3);
    let f = s
        .op("_FusedConv2D")
        .name("fused")
        .input(&x)
        .input(&w)
        .input_list(&[bias])
        .input_list(&[])
        .attr("num_args", 1i64)
        .attr("TArgs", AttrValue::from(vec![DType::F32]))
        .attr("strides", vec![1i64, 1, 1, 1])
        .attr("padding", "SAME")
        .attr(
            "fused_ops",
            AttrValue::from(vec!["BiasAdd".to_owned(), "Relu".to_owned()]),
        )
        .build1()
        .expect("_FusedConv2D");
    assert_eq!(f.shape(), Shape::known(&[1, 4, 4, 3]));
    let e = gradients(&s, &[f], &[x], None).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e}");
    assert!(
        e.message()
            .contains("No gradient defined for operation 'fused' (op type: _FusedConv2D)"),
        "{e}"
    );
}
