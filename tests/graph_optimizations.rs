//! The graph optimizations a session runs on each step it builds
//! (`SessionOptions::optimizer`, TensorFlow's `OptimizerOptions`): common
//! subexpression elimination and constant folding, each where it applies and
//! where it must not, counted in the compiled partitions, with the answers of the
//! unoptimized session; the remapper's `_FusedMatMul` fusion
//! (`SessionOptions::rewrite_options`); and a cluster session optimizing as a
//! local one does.

use std::net::TcpListener;

use actorflow::graph::builder::{while_loop, WhileOptions};
use actorflow::{
    ops, ClusterSpec, Code, CompiledStep, Connect, DType, OptLevel, OptimizerOptions,
    RewriterConfig, RunArgs, RunOptions, Scope, Server, ServerOptions, Session, SessionOptions,
    Shape, Tensor, Toggle, TraceLevel,
};

fn session(s: &Scope, optimizer: OptimizerOptions) -> Session {
    Session::new(
        &s.graph_def(),
        SessionOptions::default().with_optimizer(optimizer),
    )
    .unwrap()
}

fn on(s: &Scope) -> Session {
    session(s, OptimizerOptions::default())
}

/// Every optimization off: no folding, no CSE, no remapper.
fn off(s: &Scope) -> Session {
    Session::new(
        &s.graph_def(),
        SessionOptions::default()
            .with_optimizer(OptimizerOptions::disabled())
            .with_rewrite_options(RewriterConfig::disabled()),
    )
    .unwrap()
}

/// Nodes of `op` over every partition of the compiled step.
fn count(c: &CompiledStep, op: &str) -> usize {
    c.partitions
        .iter()
        .flat_map(|p| &p.graph.node)
        .filter(|n| n.op == op)
        .count()
}

fn nodes(c: &CompiledStep) -> usize {
    c.partitions.iter().map(|p| p.graph.node.len()).sum()
}

fn report(c: &CompiledStep, pass: &str) -> (usize, usize, usize) {
    let p = c
        .optimizations
        .iter()
        .find(|p| p.pass == pass)
        .unwrap_or_else(|| panic!("{pass} ran"));
    (p.nodes_before, p.nodes_after, p.changed)
}

fn cse_only() -> OptimizerOptions {
    OptimizerOptions::default()
        .with_opt_level(OptLevel::L0)
        .with_do_constant_folding(false)
}

#[test]
fn cse_merges_duplicate_subexpressions_with_the_same_answers() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
    let sq1 = ops::square(
        &s,
        &ops::add(&s, &x, &ops::scalar(&s, 1.0f32).unwrap()).unwrap(),
    )
    .unwrap();
    let sq2 = ops::square(
        &s,
        &ops::add(&s, &x, &ops::scalar(&s, 1.0f32).unwrap()).unwrap(),
    )
    .unwrap();
    let y = ops::sub(&s, &ops::mul(&s, &sq1, &sq2).unwrap(), &sq2).unwrap();
    let feed = Tensor::vector(&[1.0f32, -2.0, 0.5]);
    let (xn, yn) = (x.name(), y.name());
    let mut answers = Vec::new();
    let mut sizes = Vec::new();
    for sess in [session(&s, cse_only()), off(&s)] {
        answers.push(sess.run(&[(&xn, feed.clone())], &[&yn], &[]).unwrap());
        let c = sess.compiled_step(&[&xn], &[&yn], &[]).unwrap();
        sizes.push((nodes(&c), count(&c, "Square"), count(&c, "AddV2")));
        if sizes.len() == 1 {
            // The constants, the adds and the squares: three merged.
            assert_eq!(report(&c, "common_subexpression_elimination").2, 3);
            assert!(c.optimizations.iter().all(|p| p.pass != "constant_folding"));
        }
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(sizes[0], (sizes[1].0 - 3, 1, 1));
    assert_eq!(sizes[1].1, 2);
}

#[test]
fn stateful_ops_are_never_merged_nor_folded() {
    let s = Scope::new();
    let dims = ops::constant(&s, Tensor::vector(&[4i32])).unwrap();
    let r1 = ops::random_uniform(&s, &dims, DType::F32, 0, 0).unwrap();
    let r2 = ops::random_uniform(&s, &dims, DType::F32, 0, 0).unwrap();
    let v = ops::Variable::new(&s, "v", &ops::scalar(&s, 0.0f32).unwrap(), false).unwrap();
    let one = ops::scalar(&s, 1.0f32).unwrap();
    let a1 = ops::assign_add(&s, &v.var, &one).unwrap();
    let a2 = ops::assign_add(&s, &v.var, &one).unwrap();
    let sess = on(&s);
    sess.run(&[], &[], &[v.initializer.name()]).unwrap();
    let (n1, n2) = (r1.name(), r2.name());
    let out = sess
        .run(&[], &[&n1, &n2], &[a1.op().name(), a2.op().name()])
        .unwrap();
    assert_ne!(out[0], out[1], "two random draws");
    let again = sess.run(&[], &[&n1], &[]).unwrap();
    assert_ne!(again[0], out[0], "a random op runs every step");
    let c = sess
        .compiled_step(&[], &[&n1, &n2], &[a1.op().name(), a2.op().name()])
        .unwrap();
    assert_eq!(count(&c, "RandomUniform"), 2);
    assert_eq!(count(&c, "AssignAdd"), 2);
    let vn = v.value.name();
    assert_eq!(
        sess.run(&[], &[&vn], &[]).unwrap()[0],
        Tensor::scalar(2.0f32)
    );
}

#[test]
fn control_dependencies_are_respected() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let v = ops::Variable::new(&s, "v", &ops::scalar(&s, 0.0f32).unwrap(), false).unwrap();
    let inc = ops::assign_add(&s, &v.var, &ops::scalar(&s, 1.0f32).unwrap()).unwrap();
    let after = s.with_control_dependencies(&[inc.op()]);
    // The same value, but only one waits for the increment.
    let a = ops::neg(&after, &x).unwrap();
    let b = ops::neg(&s, &x).unwrap();
    let y = ops::add(&s, &b, &a).unwrap();
    let sess = on(&s);
    sess.run(&[], &[], &[v.initializer.name()]).unwrap();
    let (xn, yn, vn) = (x.name(), y.name(), v.value.name());
    for i in 1..=3 {
        let out = sess
            .run(&[(&xn, Tensor::scalar(2.0f32))], &[&yn], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(-4.0f32));
        let got = sess.run(&[], &[&vn], &[]).unwrap();
        assert_eq!(got[0], Tensor::scalar(i as f32), "the increment ran");
    }
    let c = sess.compiled_step(&[&xn], &[&yn], &[]).unwrap();
    assert_eq!(count(&c, "Neg"), 2);
}

#[test]
fn fetched_names_survive_and_answer() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let a = ops::square(&s, &x).unwrap();
    let b = ops::square(&s, &x).unwrap();
    let c = ops::square(&s, &x).unwrap();
    let y = ops::add_n(&s, &[a.clone(), b.clone(), c.clone()]).unwrap();
    let sess = on(&s);
    let (xn, an, bn, yn) = (x.name(), a.name(), b.name(), y.name());
    let out = sess
        .run(&[(&xn, Tensor::scalar(3.0f32))], &[&yn, &bn, &an], &[])
        .unwrap();
    assert_eq!(
        out,
        vec![
            Tensor::scalar(27.0f32),
            Tensor::scalar(9.0f32),
            Tensor::scalar(9.0f32)
        ]
    );
    let step = sess.compiled_step(&[&xn], &[&yn, &bn, &an], &[]).unwrap();
    // a and b are fetched by name and stay; c merges into one of them.
    assert_eq!(count(&step, "Square"), 2);
    let names: Vec<&str> = step.placement.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&a.op().name()) && names.contains(&b.op().name()));
    assert!(!names.contains(&c.op().name()));
}

/// `sum(i * (c + c))` over `i < n`, the body repeating `c + c`; returns (n, sum).
fn loop_graph(s: &Scope) -> (actorflow::Output, actorflow::Output) {
    let n = ops::placeholder(s, DType::F32, Shape::scalar()).unwrap();
    let zero = ops::scalar(s, 0.0f32).unwrap();
    let outs = while_loop(
        s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            let c = ops::scalar(b, 1.5f32)?;
            let twice = ops::add(b, &c, &c)?;
            let again = ops::add(b, &c, &c)?;
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1.0f32)?)?,
                ops::add(
                    b,
                    &v[1],
                    &ops::mul(b, &v[0], &ops::add(b, &twice, &again)?)?,
                )?,
            ])
        },
        &[zero.clone(), zero],
        &WhileOptions::default(),
    )
    .unwrap();
    (n, outs[1].clone())
}

#[test]
fn loops_fold_and_merge_inside_their_frames_with_the_same_answers() {
    let s = Scope::new();
    let (n, y) = loop_graph(&s);
    let (nn, yn) = (n.name(), y.name());
    let mut answers = Vec::new();
    for sess in [on(&s), off(&s)] {
        for k in [0.0f32, 1.0, 5.0] {
            answers.push(sess.run(&[(&nn, Tensor::scalar(k))], &[&yn], &[]).unwrap());
        }
    }
    assert_eq!(answers[..3], answers[3..]);
    assert_eq!(answers[2][0], Tensor::scalar(60.0f32));
    let sess = on(&s);
    let c = sess.compiled_step(&[&nn], &[&yn], &[]).unwrap();
    // c + c twice and their sum fold into one Const in the body.
    assert!(report(&c, "constant_folding").2 >= 3);
    assert_eq!(
        count(&c, "Enter"),
        count(
            &off(&s).compiled_step(&[&nn], &[&yn], &[]).unwrap(),
            "Enter"
        )
    );
}

#[test]
fn constant_chains_fold_into_one_const_named_as_the_last_node() {
    let s = Scope::new();
    let c = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0, 3.0])).unwrap();
    let d = ops::mul(&s, &ops::exp(&s, &c).unwrap(), &c).unwrap();
    let e = ops::sum(&s, &d, &ops::scalar(&s, 0i32).unwrap(), false).unwrap();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let y = ops::add(&s, &x, &e).unwrap();
    let (xn, yn) = (x.name(), y.name());
    let feed = [(xn.as_str(), Tensor::scalar(0.25f32))];
    let folded = on(&s);
    let want = off(&s).run(&feed, &[&yn], &[]).unwrap();
    assert_eq!(folded.run(&feed, &[&yn], &[]).unwrap(), want);
    let step = folded.compiled_step(&[&xn], &[&yn], &[]).unwrap();
    let consts: Vec<&str> = step
        .partitions
        .iter()
        .flat_map(|p| &p.graph.node)
        .filter(|n| n.op == "Const")
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(consts, [e.op().name()]);
    assert_eq!(
        count(&step, "Exp") + count(&step, "Mul") + count(&step, "Sum"),
        0
    );
    let (before, after, folded_nodes) = report(&step, "constant_folding");
    assert_eq!((before - after, folded_nodes), (4, 3));
}

#[test]
fn shapes_known_statically_fold() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[2, 3])).unwrap();
    let y = ops::reshape(&s, &ops::neg(&s, &x).unwrap(), &ops::shape(&s, &x).unwrap()).unwrap();
    let n = ops::size(&s, &y).unwrap();
    let (xn, yn, nn) = (x.name(), y.name(), n.name());
    let feed = Tensor::new(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let sess = on(&s);
    let out = sess.run(&[(&xn, feed.clone())], &[&yn, &nn], &[]).unwrap();
    assert_eq!(out, off(&s).run(&[(&xn, feed)], &[&yn, &nn], &[]).unwrap());
    let c = sess.compiled_step(&[&xn], &[&yn, &nn], &[]).unwrap();
    assert_eq!(count(&c, "Shape") + count(&c, "Size"), 0);
    // A fed value of another shape is still refused, before anything runs.
    let bad = Tensor::new(&[3, 2], vec![0.0f32; 6]).unwrap();
    let err = sess.run(&[(&xn, bad)], &[&yn], &[]).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[test]
fn the_size_limit_keeps_large_values_computed_at_run_time() {
    let s = Scope::new();
    let big = ops::fill_to(&s, &[1000], &ops::scalar(&s, 2.0f32).unwrap()).unwrap();
    let y = ops::mul(&s, &big, &big).unwrap();
    let yn = y.name();
    let limited = session(
        &s,
        OptimizerOptions::default().with_max_folded_constant_in_bytes(3999),
    );
    let c = limited.compiled_step(&[], &[&yn], &[]).unwrap();
    assert_eq!((count(&c, "Fill"), count(&c, "Mul")), (1, 1));
    let unlimited = on(&s);
    let c = unlimited.compiled_step(&[], &[&yn], &[]).unwrap();
    assert_eq!((count(&c, "Fill"), count(&c, "Mul")), (0, 0));
    let want = vec![Tensor::new(&[1000], vec![4.0f32; 1000]).unwrap()];
    assert_eq!(limited.run(&[], &[&yn], &[]).unwrap(), want);
    assert_eq!(unlimited.run(&[], &[&yn], &[]).unwrap(), want);
}

#[test]
fn a_node_that_cannot_be_evaluated_fails_at_run_time_as_before() {
    let s = Scope::new();
    let text = ops::constant(&s, Tensor::from_strings(&[2], vec!["1.5", "one"]).unwrap()).unwrap();
    let y = ops::string_to_number(&s, &text, DType::F32).unwrap();
    let yn = y.name();
    let err = on(&s).run(&[], &[&yn], &[]).unwrap_err();
    let want = off(&s).run(&[], &[&yn], &[]).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!((err.code(), err.node()), (want.code(), want.node()));
    assert_eq!(err.message(), want.message());
}

#[test]
fn the_mlp_gradient_graph_shrinks_and_trains_identically() {
    use actorflow::train::{GradientDescentOptimizer, Optimizer};
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[4, 3])).unwrap();
    let w = ops::Variable::new(
        &s,
        "w",
        &ops::constant(
            &s,
            Tensor::new(&[3, 2], vec![0.1f32, -0.2, 0.3, 0.4, -0.5, 0.6]).unwrap(),
        )
        .unwrap(),
        true,
    )
    .unwrap();
    let b = ops::Variable::new(
        &s,
        "b",
        &ops::constant(&s, Tensor::vector(&[0.0f32, 0.1])).unwrap(),
        true,
    )
    .unwrap();
    let h = ops::bias_add(
        &s,
        &ops::mat_mul(&s, &x, &w.value, false, false).unwrap(),
        &b.value,
        "NHWC",
    )
    .unwrap();
    let loss = ops::mean_axes(&s, &ops::square(&s, &h).unwrap(), &[0, 1], false).unwrap();
    let train = GradientDescentOptimizer::new(0.1)
        .minimize(&s, &loss, None, None)
        .unwrap();
    let init = actorflow::train::global_variables_initializer(&s).unwrap();
    let feed = Tensor::new(&[4, 3], (0..12).map(|i| i as f32 / 10.0).collect()).unwrap();
    let (xn, ln, tn) = (x.name(), loss.name(), train.name().to_owned());
    let mut losses = Vec::new();
    let mut sizes = Vec::new();
    for sess in [on(&s), off(&s)] {
        sess.run(&[], &[], &[init.name()]).unwrap();
        let mut l = Vec::new();
        for _ in 0..5 {
            l.push(sess.run(&[(&xn, feed.clone())], &[&ln], &[&tn]).unwrap());
        }
        losses.push(l);
        let cs = sess.compiled_step(&[&xn], &[&ln], &[&tn]).unwrap();
        sizes.push(nodes(&cs));
    }
    assert_eq!(losses[0], losses[1]);
    // MatMul + BiasAdd fuse (the BiasAdd's output is read twice, by Square and
    // its gradient, so the chain stops there).
    let cs = on(&s).compiled_step(&[&xn], &[&ln], &[&tn]).unwrap();
    assert_eq!(count(&cs, "_FusedMatMul"), 1);
    assert_eq!(report(&cs, "remapper").2, 1);
    // actorflow's gradient builder writes known shapes as constants already, so
    // little folds; the two learning rates (colocated with different variables,
    // on one device) merge.
    assert!(sizes[0] < sizes[1], "{sizes:?}");
}

#[test]
fn a_cluster_session_optimizes_as_a_local_one() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let spec = ClusterSpec::new()
        .with_job("worker", &[l.local_addr().unwrap().to_string()])
        .unwrap();
    let server = Server::start_with_listener(ServerOptions::new(spec, "worker", 0), l).unwrap();
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let k = ops::mul(
        &s,
        &ops::scalar(&s, 2.0f32).unwrap(),
        &ops::scalar(&s, 3.0f32).unwrap(),
    )
    .unwrap();
    let y = ops::add(&s, &x, &k).unwrap();
    let traced = |optimizer: OptimizerOptions| {
        let sess = Session::connect(
            &server.target(),
            &s.graph_def(),
            SessionOptions::default()
                .with_optimizer(optimizer)
                .with_rewrite_options(RewriterConfig::disabled()),
        )
        .unwrap();
        let out = sess
            .run_with(
                &RunArgs::new()
                    .feed(&x, Tensor::scalar(1.0f32))
                    .fetch(&y)
                    .options(RunOptions::default().with_trace_level(TraceLevel::FullTrace)),
            )
            .unwrap();
        let md = out.metadata.expect("traced");
        let muls = md
            .partition_graphs
            .iter()
            .flat_map(|(_, g)| &g.node)
            .filter(|n| n.op == "Mul")
            .count();
        (out.outputs, muls)
    };
    let (a, folded) = traced(OptimizerOptions::default());
    let (b, kept) = traced(OptimizerOptions::disabled());
    assert_eq!(a, b);
    assert_eq!(a[0], Tensor::scalar(7.0f32));
    assert_eq!((folded, kept), (0, 1));
}

/// Two dense layers, `relu(x · w1 + b1)` then `x · w2 + b2`, and the session
/// options under test.
fn dense_net(s: &Scope) -> (actorflow::Output, actorflow::Output, actorflow::Output) {
    let x = ops::placeholder(s, DType::F32, Shape::known(&[3, 4])).unwrap();
    let c = |dims: &[usize], seed: f32| {
        let n: usize = dims.iter().product();
        let v = (0..n).map(|i| ((i as f32 + seed) * 0.37).sin()).collect();
        ops::constant(s, Tensor::new(dims, v).unwrap()).unwrap()
    };
    let h = ops::relu(
        s,
        &ops::bias_add(
            s,
            &ops::mat_mul(s, &x, &c(&[4, 5], 1.0), false, false).unwrap(),
            &c(&[5], 2.0),
            "NHWC",
        )
        .unwrap(),
    )
    .unwrap();
    let pre = ops::bias_add(
        s,
        &ops::mat_mul(s, &h, &c(&[2, 5], 3.0), false, true).unwrap(),
        &c(&[2], 4.0),
        "NHWC",
    )
    .unwrap();
    (x, h, pre)
}

#[test]
fn the_remapper_fuses_dense_layers_with_the_same_answers() {
    let s = Scope::new();
    let (x, h, y) = dense_net(&s);
    let feed = Tensor::new(&[3, 4], (0..12).map(|i| i as f32 * 0.25 - 1.0).collect()).unwrap();
    let (xn, hn, yn) = (x.name(), h.name(), y.name());
    let fused = on(&s);
    let want = off(&s)
        .run(&[(&xn, feed.clone())], &[&yn, &hn], &[])
        .unwrap();
    assert_eq!(
        fused.run(&[(&xn, feed.clone())], &[&yn, &hn], &[]).unwrap(),
        want
    );
    let c = fused.compiled_step(&[&xn], &[&yn, &hn], &[]).unwrap();
    // The hidden layer is fetched by its activation's name, which the fused node
    // takes; the output layer fuses MatMul + BiasAdd.
    assert_eq!(count(&c, "_FusedMatMul"), 2);
    assert_eq!(
        count(&c, "MatMul") + count(&c, "BiasAdd") + count(&c, "Relu"),
        0
    );
    assert_eq!(report(&c, "remapper").2, 2);
    // Off by the switch: nothing fuses.
    let plain = Session::new(
        &s.graph_def(),
        SessionOptions::default()
            .with_rewrite_options(RewriterConfig::default().with_remapping(Toggle::Off)),
    )
    .unwrap();
    assert_eq!(plain.run(&[(&xn, feed)], &[&yn, &hn], &[]).unwrap(), want);
    let c = plain.compiled_step(&[&xn], &[&yn, &hn], &[]).unwrap();
    assert_eq!(count(&c, "_FusedMatMul"), 0);
    assert!(c.optimizations.iter().all(|p| p.pass != "remapper"));
}

#[test]
fn a_fetched_matmul_or_bias_add_is_never_fused_away() {
    let s = Scope::new();
    let (x, h, y) = dense_net(&s);
    let feed = Tensor::new(&[3, 4], (0..12).map(|i| (i as f32).cos()).collect()).unwrap();
    // The first layer's BiasAdd and the second layer's MatMul are fetched.
    let g = s.graph_def();
    let relu = g.node.iter().find(|n| n.name == h.op().name()).unwrap();
    let ba1 = relu.input[0].clone();
    let ba2 = g.node.iter().find(|n| n.name == y.op().name()).unwrap();
    let mm2 = ba2.input[0].clone();
    let fetches = [ba1.as_str(), mm2.as_str(), &y.name()];
    let xn = x.name();
    let fused = on(&s);
    assert_eq!(
        fused.run(&[(&xn, feed.clone())], &fetches, &[]).unwrap(),
        off(&s).run(&[(&xn, feed)], &fetches, &[]).unwrap()
    );
    let c = fused.compiled_step(&[&xn], &fetches, &[]).unwrap();
    // Layer 1: MatMul + BiasAdd fuse under the BiasAdd's name, the Relu stays;
    // layer 2: its MatMul is fetched, so nothing fuses.
    assert_eq!(count(&c, "_FusedMatMul"), 1);
    assert_eq!(count(&c, "Relu"), 1);
    assert_eq!(count(&c, "MatMul"), 1);
}

#[test]
fn a_cluster_session_reads_the_remapping_switch() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let spec = ClusterSpec::new()
        .with_job("worker", &[l.local_addr().unwrap().to_string()])
        .unwrap();
    let server = Server::start_with_listener(ServerOptions::new(spec, "worker", 0), l).unwrap();
    let s = Scope::new();
    let (x, _, y) = dense_net(&s);
    let feed = Tensor::new(&[3, 4], (0..12).map(|i| i as f32 * 0.1).collect()).unwrap();
    let traced = |remapping: Toggle| {
        let sess = Session::connect(
            &server.target(),
            &s.graph_def(),
            SessionOptions::default()
                .with_rewrite_options(RewriterConfig::default().with_remapping(remapping)),
        )
        .unwrap();
        let out = sess
            .run_with(
                &RunArgs::new()
                    .feed(&x, feed.clone())
                    .fetch(&y)
                    .options(RunOptions::default().with_trace_level(TraceLevel::FullTrace)),
            )
            .unwrap();
        let md = out.metadata.expect("traced");
        let fused = md
            .partition_graphs
            .iter()
            .flat_map(|(_, g)| &g.node)
            .filter(|n| n.op == "_FusedMatMul")
            .count();
        (out.outputs, fused)
    };
    let (a, fused) = traced(Toggle::Default);
    let (b, plain) = traced(Toggle::Off);
    assert_eq!(a, b);
    assert_eq!((fused, plain), (2, 0));
}
