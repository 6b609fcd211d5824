//! Control flow v1 end to end: cond and while_loop built as TensorFlow builds them,
//! run by the executor's frames and iterations; values checked by hand, every step on
//! one device and spread over several ([`AnyPlacement`]).

use actorflow::graph::builder::{cond, while_loop, WhileOptions};
use actorflow::{
    ops, Code, DType, GraphDef, Output, Scope, Session, SessionOptions, Shape, Tensor,
};

mod any_placement;
use any_placement::AnyPlacement;

fn run1(s: &Scope, fetch: &Output) -> Tensor {
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    sess.run(&[], &[&fetch.name()], &[]).unwrap().remove(0)
}

fn int(s: &Scope, v: i32) -> Output {
    ops::scalar(s, v).unwrap()
}

/// while i < n: i += 1
fn counter(s: &Scope, n: i32, opts: &WhileOptions) -> Output {
    let i0 = int(s, 0);
    while_loop(
        s,
        |b, v| ops::less(b, &v[0], &int(b, n)),
        |b, v| Ok(vec![ops::add(b, &v[0], &int(b, 1))?]),
        &[i0],
        opts,
    )
    .unwrap()
    .remove(0)
}

#[test]
fn a_counter_loop_counts() {
    let s = Scope::new();
    let out = counter(&s, 10, &WhileOptions::default());
    assert_eq!(run1(&s, &out), Tensor::scalar(10i32));
    // zero iterations when the predicate starts false
    let s = Scope::new();
    let out = counter(&s, -3, &WhileOptions::default());
    assert_eq!(run1(&s, &out), Tensor::scalar(0i32));
}

#[test]
fn the_issue_loop_with_two_variables_and_a_fed_bound() {
    // while_loop(i < n, (i + 1, a + 1.0)) with n fed
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let i0 = int(&s, 0);
    let a0 = ops::scalar(&s, 0.5f32).unwrap();
    let outs = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            Ok(vec![
                ops::add(b, &v[0], &int(b, 1))?,
                ops::add(b, &v[1], &ops::scalar(b, 1.0f32)?)?,
            ])
        },
        &[i0, a0],
        &WhileOptions::default(),
    )
    .unwrap();
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    for n_val in [0, 1, 7, 1000] {
        let r = sess
            .run(
                &[(&n.name(), Tensor::scalar(n_val))],
                &[&outs[0].name(), &outs[1].name()],
                &[],
            )
            .unwrap();
        assert_eq!(r[0], Tensor::scalar(n_val));
        assert_eq!(r[1], Tensor::scalar(0.5f32 + n_val as f32));
    }
}

#[test]
fn nested_loops_inside_a_cond() {
    let s = Scope::new();
    let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
    let out = cond(
        &s,
        &p,
        |b| {
            // for j in 0..3 { for k in 0..4 { acc += 1 } }
            let outer = while_loop(
                b,
                |b, v| ops::less(b, &v[0], &int(b, 3)),
                |b, v| {
                    let inner = while_loop(
                        b,
                        |b, w| ops::less(b, &w[0], &int(b, 4)),
                        |b, w| {
                            Ok(vec![
                                ops::add(b, &w[0], &int(b, 1))?,
                                ops::add(b, &w[1], &int(b, 1))?,
                            ])
                        },
                        &[int(b, 0), v[1].clone()],
                        &WhileOptions::default(),
                    )?;
                    Ok(vec![ops::add(b, &v[0], &int(b, 1))?, inner[1].clone()])
                },
                &[int(b, 0), int(b, 0)],
                &WhileOptions::default(),
            )?;
            Ok(vec![outer[1].clone()])
        },
        |b| Ok(vec![int(b, -1)]),
    )
    .unwrap()
    .remove(0);
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    assert_eq!(
        sess.run(&[(&p.name(), Tensor::scalar(true))], &[&out.name()], &[])
            .unwrap()[0],
        Tensor::scalar(12i32)
    );
    assert_eq!(
        sess.run(&[(&p.name(), Tensor::scalar(false))], &[&out.name()], &[])
            .unwrap()[0],
        Tensor::scalar(-1i32)
    );
}

#[test]
fn a_loop_with_a_cond_in_its_body() {
    // sum of the even numbers in 1..=10
    let s = Scope::new();
    let outs = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &int(b, 10)),
        |b, v| {
            let i = ops::add(b, &v[0], &int(b, 1))?;
            let even = ops::equal(b, &ops::floor_mod(b, &i, &int(b, 2))?, &int(b, 0))?;
            let add = cond(b, &even, |_c| Ok(vec![i.clone()]), |c| Ok(vec![int(c, 0)]))?;
            Ok(vec![i.clone(), ops::add(b, &v[1], &add[0])?])
        },
        &[int(&s, 0), int(&s, 0)],
        &WhileOptions::default(),
    )
    .unwrap();
    assert_eq!(run1(&s, &outs[1]), Tensor::scalar(30i32));
}

#[test]
fn a_loop_whose_tensor_grows() {
    let s = Scope::new();
    let x0 = ops::constant(&s, Tensor::new::<f32>(&[0], vec![]).unwrap()).unwrap();
    let opts = WhileOptions {
        shape_invariants: Some(vec![Shape::scalar(), Shape::from_dims(&[None])]),
        ..Default::default()
    };
    let grow = |b: &Scope, v: &[Output]| -> actorflow::Result<Vec<Output>> {
        let item = ops::reshape_to(b, &ops::cast(b, &v[0], DType::F32)?, &[1])?;
        let axis = int(b, 0);
        Ok(vec![
            ops::add(b, &v[0], &int(b, 1))?,
            ops::concat(b, &[v[1].clone(), item], &axis)?,
        ])
    };
    let outs = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &int(b, 5)),
        grow,
        &[int(&s, 0), x0.clone()],
        &opts,
    )
    .unwrap();
    assert_eq!(
        run1(&s, &outs[1]),
        Tensor::vector(&[0.0f32, 1.0, 2.0, 3.0, 4.0])
    );
    // without the invariant the shape change is caught when the graph is built
    let s = Scope::new();
    let x0 = ops::constant(&s, Tensor::new::<f32>(&[0], vec![]).unwrap()).unwrap();
    let e = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &int(b, 5)),
        grow,
        &[int(&s, 0), x0],
        &WhileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("shape_invariants"), "{e}");
}

#[test]
fn a_loop_updating_a_variable_each_iteration() {
    let s = Scope::new();
    let v = ops::Variable::new(&s, "acc", &ops::scalar(&s, 0.0f32).unwrap(), true).unwrap();
    let outs = while_loop(
        &s,
        |b, w| ops::less(b, &w[0], &int(b, 5)),
        |b, w| {
            let upd = ops::assign_add(b, &v.var, &ops::cast(b, &w[0], DType::F32)?)?;
            let after = b.with_control_dependencies(&[upd.op()]);
            Ok(vec![ops::add(&after, &w[0], &int(&after, 1))?])
        },
        &[int(&s, 0)],
        &WhileOptions {
            parallel_iterations: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    sess.run(&[], &[], &[v.initializer.name()]).unwrap();
    assert_eq!(
        sess.run(&[], &[&outs[0].name()], &[]).unwrap()[0],
        Tensor::scalar(5i32)
    );
    assert_eq!(
        sess.run(&[], &[&v.value.name()], &[]).unwrap()[0],
        Tensor::scalar(10.0f32)
    ); // 0+1+2+3+4
}

#[test]
fn parallel_iterations_1_and_32_agree() {
    let mut results = Vec::new();
    for p in [1, 32] {
        let s = Scope::new();
        // sum of i*i for i < 100, with a second independent accumulator of i*3
        let outs = while_loop(
            &s,
            |b, v| ops::less(b, &v[0], &int(b, 100)),
            |b, v| {
                let sq = ops::mul(b, &v[0], &v[0])?;
                let three = ops::mul(b, &v[0], &int(b, 3))?;
                Ok(vec![
                    ops::add(b, &v[0], &int(b, 1))?,
                    ops::add(b, &v[1], &sq)?,
                    ops::add(b, &v[2], &three)?,
                ])
            },
            &[int(&s, 0), int(&s, 0), int(&s, 0)],
            &WhileOptions {
                parallel_iterations: p,
                ..Default::default()
            },
        )
        .unwrap();
        let sess = AnyPlacement::new(&s.graph_def()).unwrap();
        let r = sess
            .run(&[], &[&outs[1].name(), &outs[2].name()], &[])
            .unwrap();
        results.push(r);
    }
    assert_eq!(
        results[0],
        vec![Tensor::scalar(328350i32), Tensor::scalar(14850i32)]
    );
    assert_eq!(results[0], results[1]);
}

#[test]
fn a_loop_across_two_devices() {
    for devices in [1usize, 2] {
        let s = Scope::new();
        let d0 = s.with_device("/device:CPU:0");
        let outs = while_loop(
            &d0,
            |b, v| ops::less(b, &v[0], &int(b, 20)),
            |b, v| {
                let on1 = b.with_device(&format!("/device:CPU:{}", devices - 1));
                let x2 = ops::mul(&on1, &v[1], &ops::scalar(&on1, 1.5f64)?)?;
                let x3 = ops::sub(&on1, &x2, &ops::scalar(&on1, 0.25f64)?)?;
                Ok(vec![ops::add(b, &v[0], &int(b, 1))?, x3])
            },
            &[int(&d0, 0), ops::scalar(&d0, 1.0f64).unwrap()],
            &WhileOptions::default(),
        )
        .unwrap();
        let sess = Session::new(
            &s.graph_def(),
            SessionOptions::default().with_cpu_devices(devices),
        )
        .unwrap();
        let mut want = 1.0f64;
        for _ in 0..20 {
            want = want * 1.5 - 0.25;
        }
        for _ in 0..3 {
            assert_eq!(
                sess.run(&[], &[&outs[1].name()], &[]).unwrap()[0],
                Tensor::scalar(want),
                "{devices} devices"
            );
        }
        if devices == 2 {
            let c = sess.compiled_step(&[], &[&outs[1].name()], &[]).unwrap();
            assert_eq!(c.partitions.len(), 2);
            let ops_on_1: Vec<&str> = c.partitions[1]
                .graph
                .node
                .iter()
                .map(|n| n.op.as_str())
                .collect();
            assert!(
                ops_on_1.contains(&"Merge") && ops_on_1.contains(&"NextIteration"),
                "control loop on CPU:1"
            );
        }
    }
}

#[test]
fn a_dead_branch_never_runs_its_expensive_op() {
    let s = Scope::new();
    let counter = ops::Variable::new(&s, "runs", &ops::scalar(&s, 0i64).unwrap(), true).unwrap();
    let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
    let big = ops::constant(&s, Tensor::zeros(DType::F32, [256, 256])).unwrap();
    let out = cond(
        &s,
        &p,
        |b| {
            let bump = ops::assign_add(b, &counter.var, &ops::scalar(b, 1i64)?)?;
            let after = b.with_control_dependencies(&[bump.op()]);
            let prod = ops::mat_mul(&after, &big, &big, false, false)?;
            Ok(vec![ops::sum(
                &after,
                &prod,
                &ops::constant(&after, Tensor::vector(&[0i32, 1]))?,
                false,
            )?])
        },
        |b| Ok(vec![ops::scalar(b, -1.0f32)?]),
    )
    .unwrap()
    .remove(0);
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    sess.run(&[], &[], &[counter.initializer.name()]).unwrap();
    for _ in 0..5 {
        assert_eq!(
            sess.run(&[(&p.name(), Tensor::scalar(false))], &[&out.name()], &[])
                .unwrap()[0],
            Tensor::scalar(-1.0f32)
        );
    }
    assert_eq!(
        sess.run(&[], &[&counter.value.name()], &[]).unwrap()[0],
        Tensor::scalar(0i64),
        "never ran"
    );
    assert_eq!(
        sess.run(&[(&p.name(), Tensor::scalar(true))], &[&out.name()], &[])
            .unwrap()[0],
        Tensor::scalar(0.0f32)
    );
    assert_eq!(
        sess.run(&[], &[&counter.value.name()], &[]).unwrap()[0],
        Tensor::scalar(1i64)
    );
}

#[test]
fn an_error_inside_a_loop_body_aborts_the_step_cleanly() {
    let s = Scope::new();
    let outs = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &int(b, 10)),
        |b, v| {
            // 10 / (3 - i): integer division by zero in iteration 3
            let q = ops::floor_div(b, &int(b, 10), &ops::sub(b, &int(b, 3), &v[0])?)?;
            Ok(vec![
                ops::add(b, &v[0], &int(b, 1))?,
                ops::add(b, &v[1], &q)?,
            ])
        },
        &[int(&s, 0), int(&s, 0)],
        &WhileOptions::default(),
    )
    .unwrap();
    let ok = int(&s, 7);
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    let e = sess.run(&[], &[&outs[1].name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.node().unwrap().contains("FloorDiv"), "{e}");
    assert_eq!(
        sess.run(&[], &[&ok.name()], &[]).unwrap()[0],
        Tensor::scalar(7i32)
    );
}

#[test]
fn malformed_loops_are_errors_not_hangs() {
    let sess = AnyPlacement::new(&GraphDef::default()).unwrap();
    let json = |nodes: &str| GraphDef::from_json(&format!(r#"{{"node":[{nodes}]}}"#)).unwrap();
    let c = r#"{"name":"c","op":"Const","attr":{"dtype":{"type":"int32"},"value":{"tensor":{"dtype":"int32","shape":[],"content":"AQAAAA=="}}}}"#;
    // Merge fed by its own successor without a NextIteration
    sess.extend(&json(&format!(
        r#"{c},{{"name":"en","op":"Enter","input":["c"],"attr":{{"T":{{"type":"int32"}},"frame_name":{{"s":"L"}}}}}},
        {{"name":"m","op":"Merge","input":["en","a"],"attr":{{"T":{{"type":"int32"}},"N":{{"i":2}}}}}},
        {{"name":"a","op":"AddV2","input":["m","m"],"attr":{{"T":{{"type":"int32"}}}}}},
        {{"name":"ex","op":"Exit","input":["a"],"attr":{{"T":{{"type":"int32"}}}}}}"#
    )))
    .unwrap();
    // (fetched through an Exit: a value inside the loop is not fetchable at all)
    let e = sess.run(&[], &["ex:0"], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("cycle"), "{e}");
    // an Exit outside any frame
    sess.extend(&json(
        r#"{"name":"x","op":"Exit","input":["c"],"attr":{"T":{"type":"int32"}}}"#,
    ))
    .unwrap();
    let e = sess.run(&[], &["x:0"], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.node(), Some("x"));
}

/// A value inside a loop exists once per iteration: TensorFlow's client marks the
/// ops of a `WhileContext` not fetchable and their outputs not feedable, so feeding,
/// fetching or targeting one from outside is INVALID_ARGUMENT naming the node; the
/// loop's results come out through its Exits.
#[test]
fn values_inside_a_loop_are_neither_fetchable_nor_feedable() {
    let s = Scope::new();
    let outs = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &int(b, 4)),
        |b, v| Ok(vec![ops::add(b, &v[0], &int(b, 1))?]),
        &[int(&s, 0)],
        &WhileOptions::default(),
    )
    .unwrap();
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    let graph = s.graph_def();
    let inside: Vec<&str> = graph
        .node
        .iter()
        .filter(|n| ["Identity", "Merge", "Switch", "Add", "AddV2"].contains(&n.op.as_str()))
        .map(|n| n.name.as_str())
        .collect();
    assert!(inside.len() >= 4, "{inside:?}");
    for node in inside {
        let e = sess.run(&[], &[&format!("{node}:0")], &[]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("not fetchable"), "{e}");
        assert_eq!(e.node(), Some(node));
        let e = sess.run(&[], &[], &[node]).unwrap_err();
        assert!(e.message().contains("not fetchable"), "{e}");
        let e = sess
            .run(
                &[(&format!("{node}:0"), Tensor::scalar(1i32))],
                &[&outs[0].name()],
                &[],
            )
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("not feedable"), "{e}");
    }
    // the session is still usable, and the result leaves through the Exit
    assert_eq!(
        sess.run(&[], &[&outs[0].name()], &[]).unwrap()[0],
        Tensor::scalar(4i32)
    );
}
