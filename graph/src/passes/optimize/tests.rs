//! Unit tests of the optimizer passes over step graphs built with the builder,
//! evaluated by a small f32 evaluator (the kernels live in another crate).

use super::*;
use crate::builder::{while_loop, Scope, WhileOptions};
use crate::passes::prune::rewrite_for_step;
use crate::{ops, DType, GraphDef, Status};

/// Evaluates `AddV2` and `Mul` of equally shaped f32 tensors; counts its calls.
#[derive(Default)]
struct F32Evaluator {
    calls: std::cell::Cell<usize>,
}

impl NodeEvaluator for F32Evaluator {
    fn can_evaluate(&self, node: &Node) -> bool {
        matches!(node.op(), "AddV2" | "Mul")
    }

    fn evaluate(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.calls.set(self.calls.get() + 1);
        let (a, b) = (inputs[0].as_slice::<f32>()?, inputs[1].as_slice::<f32>()?);
        if a.len() != b.len() {
            return Err(Status::unimplemented("broadcasting"));
        }
        let f = |x: f32, y: f32| if node.op() == "Mul" { x * y } else { x + y };
        let v: Vec<f32> = a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect();
        Ok(vec![Tensor::new(inputs[0].dims(), v)?])
    }

    fn supports_const(&self, _: &NodeDef) -> bool {
        true
    }
}

struct Step {
    nodes: Vec<NodeDef>,
    arg_shapes: Vec<Shape>,
}

fn step(s: &Scope, feeds: &[&str], fetches: &[&str], targets: &[&str]) -> Step {
    let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
    let sg = rewrite_for_step(&g, feeds, fetches, targets).unwrap();
    Step {
        nodes: sg.nodes,
        arg_shapes: sg.feeds.iter().map(|f| f.shape.clone()).collect(),
    }
}

fn run(st: &Step, options: &OptimizerOptions, keep: &[String]) -> Optimized {
    run_with(st, options, &RewriterConfig::disabled(), keep)
}

fn run_with(
    st: &Step,
    options: &OptimizerOptions,
    rewriter: &RewriterConfig,
    keep: &[String],
) -> Optimized {
    let ev = F32Evaluator::default();
    let facts = StepFacts {
        registry: OpRegistry::global(),
        evaluator: &ev,
        arg_shapes: &st.arg_shapes,
        keep,
    };
    let out = optimize_step(st.nodes.clone(), options, rewriter, &facts).unwrap();
    Graph::from_graph_def(
        &GraphDef {
            node: out.nodes.clone(),
            ..Default::default()
        },
        OpRegistry::global(),
    )
    .expect("the optimized step validates");
    out
}

fn cse_only() -> OptimizerOptions {
    OptimizerOptions::disabled().with_do_common_subexpression_elimination(true)
}

fn fold_only() -> OptimizerOptions {
    OptimizerOptions::disabled().with_do_constant_folding(true)
}

fn count(nodes: &[NodeDef], op: &str) -> usize {
    nodes.iter().filter(|n| n.op == op).count()
}

fn find<'a>(nodes: &'a [NodeDef], name: &str) -> &'a NodeDef {
    nodes.iter().find(|n| n.name == name).unwrap()
}

#[test]
fn cse_merges_duplicate_pure_subexpressions() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
    let two_a = ops::scalar(&s, 2.0f32).unwrap();
    let two_b = ops::scalar(&s, 2.0f32).unwrap();
    let a = ops::mul(&s, &x, &two_a).unwrap();
    // Commutative: 2 * x is x * 2.
    let b = ops::mul(&s, &two_b, &x).unwrap();
    let y = ops::add(&s, &a, &b).unwrap();
    let st = step(&s, &[&x.name()], &[&y.name()], &[]);
    let out = run(&st, &cse_only(), &[]);
    assert_eq!(out.nodes.len(), st.nodes.len() - 2);
    assert_eq!(count(&out.nodes, "Mul"), 1);
    let add = find(&out.nodes, y.op().name());
    assert_eq!(add.input[0], add.input[1], "both inputs read the survivor");
    let r = &out.passes[0];
    assert_eq!(r.pass, "common_subexpression_elimination");
    assert_eq!((r.nodes_before, r.nodes_after, r.changed), (7, 5, 2));
}

#[test]
fn cse_never_merges_stateful_ops() {
    let s = Scope::new();
    let dims = ops::constant(&s, Tensor::vector(&[3i32])).unwrap();
    let r1 = ops::random_uniform(&s, &dims, DType::F32, 1, 2).unwrap();
    let r2 = ops::random_uniform(&s, &dims, DType::F32, 1, 2).unwrap();
    let y = ops::add(&s, &r1, &r2).unwrap();
    let st = step(&s, &[], &[&y.name()], &[]);
    let out = run(&st, &cse_only(), &[]);
    assert_eq!(count(&out.nodes, "RandomUniform"), 2);
    assert_eq!(out.nodes.len(), st.nodes.len());
}

#[test]
fn cse_respects_control_inputs_as_a_set() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let g1 = ops::no_op(&s).unwrap();
    let g2 = ops::no_op(&s.with_control_dependencies(&[x.op()])).unwrap();
    let both_12 = s.with_control_dependencies(&[&g1, &g2]);
    let both_21 = s.with_control_dependencies(&[&g2, &g1]);
    let a = ops::neg(&both_12, &x).unwrap();
    let b = ops::neg(&both_21, &x).unwrap();
    let c = ops::neg(&s.with_control_dependencies(&[&g1]), &x).unwrap();
    let y = ops::add_n(&s, &[a.clone(), b, c]).unwrap();
    let st = step(&s, &[], &[&y.name()], &[]);
    let out = run(&st, &cse_only(), &[]);
    // a and b wait on the same set; c on another.
    assert_eq!(count(&out.nodes, "Neg"), 2);
    let n = find(&out.nodes, a.op().name());
    assert_eq!(n.control_inputs().count(), 2);
}

#[test]
fn cse_keeps_fetched_names() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let a = ops::neg(&s, &x).unwrap();
    let b = ops::neg(&s, &x).unwrap();
    let z = ops::neg(&s, &x).unwrap();
    let y = ops::add(&s, &a, &b).unwrap();
    // b and y fetched: b survives, a is merged into it.
    let st = step(&s, &[], &[&y.name(), &b.name()], &[]);
    let out = run(&st, &cse_only(), &[]);
    assert_eq!(count(&out.nodes, "Neg"), 1);
    assert!(out.nodes.iter().any(|n| n.name == b.op().name()));
    // a and b both fetched: both stay.
    let st = step(&s, &[], &[&a.name(), &b.name()], &[]);
    let out = run(&st, &cse_only(), &[]);
    assert_eq!(count(&out.nodes, "Neg"), 2);
    // A target keeps its name too.
    let st = step(&s, &[], &[&a.name()], &[z.op().name()]);
    let keep = vec![z.op().name().to_owned()];
    let out = run(&st, &cse_only(), &keep);
    assert_eq!(count(&out.nodes, "Neg"), 2);
}

fn counting_loop(s: &Scope, n: &crate::builder::Output) -> crate::builder::Output {
    let i0 = ops::scalar(s, 0.0f32).unwrap();
    let outs = while_loop(
        s,
        |b, v| ops::less(b, &v[0], n),
        |b, v| {
            let one = ops::scalar(b, 1.0f32)?;
            let same = ops::scalar(b, 1.0f32)?;
            let step = ops::add(b, &one, &same)?;
            Ok(vec![ops::add(b, &v[0], &step)?])
        },
        &[i0],
        &WhileOptions::default(),
    )
    .unwrap();
    outs[0].clone()
}

#[test]
fn cse_merges_within_a_frame_never_across() {
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let l1 = counting_loop(&s, &n);
    let l2 = counting_loop(&s, &n);
    let y = ops::add(&s, &l1, &l2).unwrap();
    let st = step(&s, &[], &[&y.name()], &[]);
    let out = run(&st, &cse_only(), &[]);
    // In each body the two `1.0`s (same pivot) merge, and so do the two loops'
    // initial `0.0`s (root frame, no inputs); the bodies' stay apart.
    assert_eq!(count(&st.nodes, "Const") - count(&out.nodes, "Const"), 3);
    let in_bodies = out
        .nodes
        .iter()
        .filter(|d| d.op == "Const" && d.control_inputs().count() == 1);
    assert_eq!(in_bodies.count(), 2);
    assert_eq!(count(&out.nodes, "Enter"), count(&st.nodes, "Enter"));
    assert_eq!(count(&out.nodes, "Merge"), 2);
    let g = Graph::from_graph_def(
        &GraphDef {
            node: out.nodes,
            ..Default::default()
        },
        OpRegistry::global(),
    )
    .unwrap();
    crate::passes::control_flow::build_control_flow_info(&g).unwrap();
}

#[test]
fn folding_folds_constant_chains_keeping_names() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let c = ops::add(
        &s,
        &ops::scalar(&s, 2.0f32).unwrap(),
        &ops::scalar(&s, 3.0f32).unwrap(),
    )
    .unwrap();
    let d = ops::mul(&s, &c, &ops::scalar(&s, 4.0f32).unwrap()).unwrap();
    let y = ops::add(&s, &x, &d).unwrap();
    let st = step(&s, &[&x.name()], &[&y.name(), &c.name()], &[]);
    let out = run(&st, &fold_only(), &[]);
    // c (fetched) and d become Consts under their names; 2, 3 and 4 go.
    let dn = find(&out.nodes, d.op().name());
    assert_eq!(dn.op, "Const");
    assert_eq!(
        dn.get_attr::<Tensor>("value").unwrap(),
        Tensor::scalar(20.0f32)
    );
    let cn = find(&out.nodes, c.op().name());
    assert_eq!(
        cn.get_attr::<Tensor>("value").unwrap(),
        Tensor::scalar(5.0f32)
    );
    assert_eq!(count(&out.nodes, "Const"), 2);
    assert_eq!(count(&out.nodes, "Mul"), 0);
    let r = &out.passes[0];
    assert_eq!(r.pass, "constant_folding");
    assert_eq!(r.changed, 2);
}

#[test]
fn folding_replaces_shapes_known_statically() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[2, 3])).unwrap();
    let u = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(3)])).unwrap();
    let sx = ops::shape(&s, &x).unwrap();
    let rx = ops::rank(&s, &u).unwrap();
    let nx = ops::size(&s, &x).unwrap();
    let su = ops::shape(&s, &u).unwrap();
    let st = step(
        &s,
        &[&x.name(), &u.name()],
        &[&sx.name(), &rx.name(), &nx.name(), &su.name()],
        &[],
    );
    let out = run(&st, &fold_only(), &[]);
    let value = |o: &crate::builder::Output| {
        let n = find(&out.nodes, o.op().name());
        assert_eq!(n.op, "Const", "{} folded", n.name);
        // The replacing Const still waits for the tensor it measured.
        assert_eq!(n.control_inputs().count(), 1);
        n.get_attr::<Tensor>("value").unwrap()
    };
    assert_eq!(value(&sx), Tensor::vector(&[2i32, 3]));
    assert_eq!(value(&rx), Tensor::scalar(2i32));
    assert_eq!(value(&nx), Tensor::scalar(6i32));
    // u's first dimension is unknown: its Shape runs.
    assert_eq!(find(&out.nodes, su.op().name()).op, "Shape");
}

#[test]
fn folding_never_evaluates_stateful_ops() {
    let s = Scope::new();
    let dims = ops::constant(&s, Tensor::vector(&[3i32])).unwrap();
    let r = ops::random_uniform(&s, &dims, DType::F32, 1, 2).unwrap();
    let y = ops::add(
        &s,
        &r,
        &ops::constant(&s, Tensor::vector(&[1.0f32; 3])).unwrap(),
    )
    .unwrap();
    let st = step(&s, &[], &[&y.name()], &[]);
    let out = run(&st, &fold_only(), &[]);
    assert_eq!(out.nodes.len(), st.nodes.len());
    assert_eq!(count(&out.nodes, "RandomUniform"), 1);
    assert_eq!(find(&out.nodes, y.op().name()).op, "AddV2");
}

#[test]
fn folding_respects_the_size_limit() {
    let s = Scope::new();
    let big = ops::constant(&s, Tensor::vector(&[1.0f32; 64])).unwrap();
    let y = ops::add(&s, &big, &big).unwrap();
    let st = step(&s, &[], &[&y.name()], &[]);
    let small = fold_only().with_max_folded_constant_in_bytes(255);
    let out = run(&st, &small, &[]);
    assert_eq!(find(&out.nodes, y.op().name()).op, "AddV2");
    let enough = fold_only().with_max_folded_constant_in_bytes(256);
    let out = run(&st, &enough, &[]);
    assert_eq!(find(&out.nodes, y.op().name()).op, "Const");
}

#[test]
fn folding_inside_a_loop_keeps_the_frame() {
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let l = counting_loop(&s, &n);
    let st = step(&s, &[&n.name()], &[&l.name()], &[]);
    let out = run(&st, &fold_only(), &[]);
    // The body's 1 + 1 folds into a Const that still waits on the loop's pivot;
    // the loop variable's add does not fold.
    let folded: Vec<&NodeDef> = out
        .nodes
        .iter()
        .filter(|d| d.op == "Const" && d.control_inputs().count() == 1)
        .collect();
    assert_eq!(folded.len(), 1);
    assert_eq!(count(&out.nodes, "AddV2"), 1);
    let g = Graph::from_graph_def(
        &GraphDef {
            node: out.nodes.clone(),
            ..Default::default()
        },
        OpRegistry::global(),
    )
    .unwrap();
    let frames = crate::passes::control_flow::build_control_flow_info(&g).unwrap();
    let id = g.find(&folded[0].name).unwrap();
    assert_ne!(frames.frame_of[id], 0, "the folded Const runs in the body");
}

#[test]
fn disabled_changes_nothing() {
    let s = Scope::new();
    let c = ops::add(
        &s,
        &ops::scalar(&s, 2.0f32).unwrap(),
        &ops::scalar(&s, 2.0f32).unwrap(),
    )
    .unwrap();
    let st = step(&s, &[], &[&c.name()], &[]);
    let out = run(&st, &OptimizerOptions::disabled(), &[]);
    assert_eq!(out.nodes, st.nodes);
    assert!(out.passes.is_empty());
    // Both on: 2 + 2 folds, and nothing is left for CSE.
    let out = run(&st, &OptimizerOptions::default(), &[]);
    assert_eq!(out.nodes.len(), 2);
    assert_eq!(out.passes.len(), 2);
}

/// `relu(x · w + (b + b))` with `x` fed: the bias folds to one `Const` first, then
/// the remapper fuses the chain under the activation's name.
fn dense_layer(
    s: &Scope,
) -> (
    crate::builder::Output,
    crate::builder::Output,
    crate::builder::Output,
) {
    let x = ops::placeholder(s, DType::F32, Shape::known(&[2, 3])).unwrap();
    let w = ops::constant(s, Tensor::new(&[3, 2], vec![1.0f32; 6]).unwrap()).unwrap();
    let b = ops::constant(s, Tensor::vector(&[0.5f32, -0.5])).unwrap();
    let b2 = ops::add(s, &b, &b).unwrap();
    let mm = ops::mat_mul(s, &x, &w, false, false).unwrap();
    let ba = ops::bias_add(s, &mm, &b2, "NHWC").unwrap();
    let y = ops::relu(s, &ba).unwrap();
    (x, ba, y)
}

#[test]
fn remapper_runs_after_folding_and_cse() {
    let s = Scope::new();
    let (x, _, y) = dense_layer(&s);
    let st = step(&s, &[&x.name()], &[&y.name()], &[]);
    let out = run_with(
        &st,
        &OptimizerOptions::default(),
        &RewriterConfig::default(),
        &[],
    );
    let fused = find(&out.nodes, y.op().name());
    assert_eq!(fused.op, "_FusedMatMul");
    assert_eq!(
        count(&out.nodes, "MatMul") + count(&out.nodes, "BiasAdd"),
        0
    );
    let bias = find(&out.nodes, fused.input[2].as_str());
    assert_eq!(bias.op, "Const", "the folded bias feeds the fused node");
    let passes: Vec<&str> = out.passes.iter().map(|p| p.pass).collect();
    assert_eq!(
        passes,
        [
            "constant_folding",
            "common_subexpression_elimination",
            "remapper"
        ]
    );
    let r = &out.passes[2];
    assert_eq!((r.nodes_before - r.nodes_after, r.changed), (2, 1));
}

#[test]
fn remapper_keeps_a_fetched_bias_add_and_can_be_switched_off() {
    let s = Scope::new();
    let (x, ba, y) = dense_layer(&s);
    // The BiasAdd is fetched: only MatMul + BiasAdd fuse (under its name), and
    // the activation stays.
    let st = step(&s, &[&x.name()], &[&y.name(), &ba.name()], &[]);
    let out = run_with(
        &st,
        &OptimizerOptions::disabled(),
        &RewriterConfig::default(),
        &[],
    );
    assert_eq!(find(&out.nodes, ba.op().name()).op, "_FusedMatMul");
    assert_eq!(find(&out.nodes, y.op().name()).op, "Relu");
    let off = run_with(
        &st,
        &OptimizerOptions::disabled(),
        &RewriterConfig::default().with_remapping(Toggle::Off),
        &[],
    );
    assert_eq!(off.nodes, st.nodes);
    assert!(off.passes.is_empty());
}
