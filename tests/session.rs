//! Single-device session behaviour: running, pruning, control dependencies,
//! variables and containers, and every user error (each leaving the session usable).

use actorflow::{ops, Code, DType, Scope, Session, SessionOptions, Shape, Tensor};
use actorflow::{Runtime, RuntimeOptions};

fn scalar_var(s: &Scope, name: &str, init: f32) -> ops::Variable {
    let v0 = ops::scalar(s, init).unwrap();
    ops::Variable::new(s, name, &v0, true).unwrap()
}

#[test]
fn feeds_fetches_and_name_forms() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None])).unwrap();
    let c = ops::constant(&s, Tensor::vector(&[10.0f32, 20.0])).unwrap();
    let y = ops::add(&s, &x, &c).unwrap();
    let z = ops::mul(&s, &y, &y).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let xv = Tensor::vector(&[1.0f32, 2.0]);
    // "node" and "node:0" name the same tensor; fetching a fed tensor returns the feed
    let out = sess
        .run(
            &[(x.op().name(), xv.clone())],
            &[&y.name(), z.op().name(), &x.name()],
            &[],
        )
        .unwrap();
    assert_eq!(out[0], Tensor::vector(&[11.0f32, 22.0]));
    assert_eq!(out[1], Tensor::vector(&[121.0f32, 484.0]));
    assert_eq!(out[2], xv);
    // feeding an intermediate tensor cuts the graph there
    let out = sess
        .run(
            &[(&y.name(), Tensor::vector(&[3.0f32, -1.0]))],
            &[&z.name()],
            &[],
        )
        .unwrap();
    assert_eq!(out[0], Tensor::vector(&[9.0f32, 1.0]));
    // ... with a value of the tensor's static shape ([?] + [2] is [2]), as
    // TensorFlow's client checks
    let e = sess
        .run(&[(&y.name(), Tensor::vector(&[3.0f32]))], &[&z.name()], &[])
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message().contains("Cannot feed value of shape [1]"),
        "{e}"
    );
}

#[test]
fn an_unfetched_branch_does_not_run() {
    let s = Scope::new();
    let counter = scalar_var(&s, "counter", 0.0);
    let one = ops::scalar(&s, 1.0f32).unwrap();
    let bumped = ops::assign_add(&s, &counter.var, &one).unwrap();
    let heavy = ops::mul(&s, &bumped, &bumped).unwrap();
    let x = ops::scalar(&s, 5.0f32).unwrap();
    let y = ops::add(&s, &x, &x).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[counter.initializer.name()]).unwrap();
    for _ in 0..3 {
        assert_eq!(
            sess.run(&[], &[&y.name()], &[]).unwrap()[0],
            Tensor::scalar(10.0f32)
        );
    }
    let read = |sess: &Session| sess.run(&[], &[&counter.value.name()], &[]).unwrap()[0].clone();
    assert_eq!(
        read(&sess),
        Tensor::scalar(0.0f32),
        "the pruned branch never ran"
    );
    sess.run(&[], &[&heavy.name()], &[]).unwrap();
    assert_eq!(read(&sess), Tensor::scalar(1.0f32));
}

#[test]
fn control_dependencies_order_and_variables_persist() {
    let s = Scope::new();
    let v = scalar_var(&s, "v", 1.0);
    let two = ops::scalar(&s, 2.0f32).unwrap();
    let add = ops::assign_add(&s, &v.var, &two).unwrap();
    let after = s.with_control_dependencies(&[add.op()]);
    let read = ops::identity(&after, &v.var).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[v.initializer.name()]).unwrap();
    for i in 1..=5 {
        let out = sess.run(&[], &[&read.name()], &[]).unwrap();
        assert_eq!(out[0], Tensor::scalar(1.0f32 + 2.0 * i as f32));
    }
}

#[test]
fn containers_are_shared_by_name_and_private_by_default() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let build = |container: &str| {
        let s = Scope::new();
        let v = s
            .op("VariableV2")
            .name("shared")
            .attr("shape", Shape::scalar())
            .attr("dtype", DType::I64)
            .attr("container", container)
            .build1()
            .unwrap();
        let seven = ops::scalar(&s, 7i64).unwrap();
        let assign = ops::assign(&s, &v, &seven).unwrap();
        let read = ops::identity(&s, &v).unwrap();
        (s.graph_def(), assign, read)
    };
    let (g, assign, read) = build("team");
    let a = Session::in_runtime(&rt, &g, SessionOptions::default()).unwrap();
    let b = Session::in_runtime(&rt, &g, SessionOptions::default()).unwrap();
    a.run(&[], &[], &[assign.op().name()]).unwrap();
    assert_eq!(
        b.run(&[], &[&read.name()], &[]).unwrap()[0],
        Tensor::scalar(7i64)
    );

    let (g, assign, read) = build("");
    let a = Session::in_runtime(&rt, &g, SessionOptions::default()).unwrap();
    let b = Session::in_runtime(&rt, &g, SessionOptions::default()).unwrap();
    a.run(&[], &[], &[assign.op().name()]).unwrap();
    let e = b.run(&[], &[&read.name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    assert!(e.message().contains("uninitialized value shared"), "{e}");
    assert_eq!(
        a.run(&[], &[&read.name()], &[]).unwrap()[0],
        Tensor::scalar(7i64)
    );
    rt.reset_container("team");
}

#[test]
fn every_user_error_is_clear_and_the_session_survives() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
    let y = ops::add(&s, &x, &x).unwrap();
    let v = scalar_var(&s, "w", 3.0);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let good = || {
        sess.run(
            &[(&x.name(), Tensor::vector(&[1.0f32, 1.0]))],
            &[&y.name()],
            &[],
        )
        .unwrap()
    };
    let check = |r: actorflow::Result<Vec<Tensor>>, code: Code, msg: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.code(), code, "{e}");
        assert!(e.to_string().contains(msg), "'{e}' should contain '{msg}'");
        assert_eq!(
            good()[0],
            Tensor::vector(&[2.0f32, 2.0]),
            "session still works after: {e}"
        );
    };
    // wrong dtype and shape of a feed
    check(
        sess.run(
            &[(&x.name(), Tensor::vector(&[1i32, 1]))],
            &[&y.name()],
            &[],
        ),
        Code::InvalidArgument,
        "Cannot feed value of type int32",
    );
    check(
        sess.run(&[(&x.name(), Tensor::vector(&[1.0f32]))], &[&y.name()], &[]),
        Code::InvalidArgument,
        "Cannot feed value of shape [1]",
    );
    // unknown feed, fetch and target names, bad port
    check(
        sess.run(&[("nope:0", Tensor::scalar(1.0f32))], &[&y.name()], &[]),
        Code::NotFound,
        "nope",
    );
    check(
        sess.run(&[], &["missing:0"], &[]),
        Code::NotFound,
        "missing",
    );
    check(
        sess.run(&[], &[&format!("{}:5", y.op().name())], &[]),
        Code::InvalidArgument,
        "has 1 outputs",
    );
    check(
        sess.run(&[], &[], &["no_target"]),
        Code::NotFound,
        "no_target",
    );
    // a placeholder that is not fed
    check(
        sess.run(&[], &[&y.name()], &[]),
        Code::InvalidArgument,
        "You must feed a value for placeholder tensor",
    );
    // an uninitialized variable, named
    check(
        sess.run(&[], &[&v.value.name()], &[]),
        Code::FailedPrecondition,
        "uninitialized value w",
    );
    // the error names the node
    let e = sess.run(&[], &[&y.name()], &[]).unwrap_err();
    assert_eq!(e.node(), Some(x.op().name()));
}

#[test]
fn cycles_and_bad_extensions_are_rejected_atomically() {
    let sess = Session::new(&Default::default(), SessionOptions::default()).unwrap();
    let cyclic = actorflow::GraphDef::from_json(
        r#"{"node":[
            {"name":"c","op":"Const","attr":{"dtype":{"type":"float32"},"value":{"tensor":{"dtype":"float32","shape":[],"content":"AACAPw=="}}}},
            {"name":"a","op":"AddV2","input":["b","c"],"attr":{"T":{"type":"float32"}}},
            {"name":"b","op":"AddV2","input":["a","c"],"attr":{"T":{"type":"float32"}}}]}"#,
    )
    .unwrap();
    sess.extend(&cyclic).unwrap();
    let e = sess.run(&[], &["a:0"], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("cycle"), "{e}");
    // an extension with a bad node adds nothing
    let bad = actorflow::GraphDef::from_json(
        r#"{"node":[{"name":"ok","op":"NoOp"},{"name":"bad","op":"NoSuchOp"}]}"#,
    )
    .unwrap();
    let e = sess.extend(&bad).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(e.node(), Some("bad"));
    assert_eq!(
        sess.run(&[], &[], &["ok"]).unwrap_err().code(),
        Code::NotFound
    );
    let fine = actorflow::GraphDef::from_json(r#"{"node":[{"name":"ok","op":"NoOp"}]}"#).unwrap();
    sess.extend(&fine).unwrap();
    sess.run(&[], &[], &["ok"]).unwrap();
}

#[test]
fn a_second_run_does_no_graph_work_and_close_ends_the_session() {
    let s = Scope::new();
    let c = ops::scalar(&s, 1.5f64).unwrap();
    let d = ops::add(&s, &c, &c).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    assert_eq!(sess.graph_builds(), 0);
    for _ in 0..10 {
        assert_eq!(
            sess.run(&[], &[&d.name()], &[]).unwrap()[0],
            Tensor::scalar(3.0f64)
        );
    }
    assert_eq!(sess.graph_builds(), 1);
    sess.run(&[], &[&c.name()], &[]).unwrap();
    assert_eq!(sess.graph_builds(), 2);
    sess.close().unwrap();
    assert_eq!(
        sess.run(&[], &[&d.name()], &[]).unwrap_err().code(),
        Code::Cancelled
    );
}

#[test]
fn resource_variables_work_through_sessions() {
    let s = Scope::new();
    let init = ops::constant(&s, Tensor::vector(&[1i32, 2, 3])).unwrap();
    let v = ops::ResourceVariable::new(&s, "rv", &init, true).unwrap();
    let delta = ops::constant(&s, Tensor::vector(&[10i32, 10, 10])).unwrap();
    let add = s
        .op("AssignAddVariableOp")
        .input(&v.handle)
        .input(&delta)
        .build()
        .unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    assert_eq!(
        sess.run(&[], &[&v.value.name()], &[]).unwrap_err().code(),
        Code::FailedPrecondition
    );
    sess.run(&[], &[], &[v.initializer.name()]).unwrap();
    sess.run(&[], &[], &[add.name()]).unwrap();
    assert_eq!(
        sess.run(&[], &[&v.value.name()], &[]).unwrap()[0],
        Tensor::vector(&[11i32, 12, 13])
    );
}

/// Pad, Fill and Tile asked for outputs of 8 GiB or more: each step fails with
/// RESOURCE_EXHAUSTED naming the node (TensorFlow's "OOM when allocating tensor"),
/// nothing aborts, and the next step of the same session works.
#[test]
fn an_output_over_the_allocation_limit_fails_its_step_by_node() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
    let paddings = ops::placeholder(&s, DType::I64, Shape::known(&[1, 2])).unwrap();
    let dims = ops::placeholder(&s, DType::I64, Shape::known(&[2])).unwrap();
    let multiples = ops::placeholder(&s, DType::I64, Shape::known(&[1])).unwrap();
    let value = ops::scalar(&s, 2.5f32).unwrap();
    let pad = ops::pad(&s, &x, &paddings).unwrap();
    let fill = ops::fill(&s, &dims, &value).unwrap();
    let tile = ops::tile(&s, &x, &multiples).unwrap();
    let sess = Session::new(
        &s.graph_def(),
        SessionOptions::default().with_max_allocation_bytes(1 << 30),
    )
    .unwrap();
    let x2 = Tensor::vector(&[1.0f32, 2.0]);
    let small = |sess: &Session| {
        let out = sess
            .run(
                &[
                    (&x.name(), x2.clone()),
                    (
                        &paddings.name(),
                        Tensor::new(&[1, 2], vec![1i64, 0]).unwrap(),
                    ),
                    (&dims.name(), Tensor::vector(&[1i64, 2])),
                    (&multiples.name(), Tensor::vector(&[2i64])),
                ],
                &[&pad.name(), &fill.name(), &tile.name()],
                &[],
            )
            .unwrap();
        assert_eq!(out[0], Tensor::vector(&[0.0f32, 1.0, 2.0]));
        assert_eq!(out[1], Tensor::new(&[1, 2], vec![2.5f32, 2.5]).unwrap());
        assert_eq!(out[2], Tensor::vector(&[1.0f32, 2.0, 1.0, 2.0]));
    };
    small(&sess);
    let big = 1i64 << 31; // 2^31 floats: 8 GiB
    let cases = [
        (
            &pad,
            vec![
                (x.name(), x2.clone()),
                (
                    paddings.name(),
                    Tensor::new(&[1, 2], vec![0i64, big]).unwrap(),
                ),
            ],
            "shape [2147483650] and type float32",
        ),
        (
            &fill,
            vec![(dims.name(), Tensor::vector(&[big >> 14, 1i64 << 14]))],
            "shape [131072,16384] and type float32",
        ),
        (
            &tile,
            vec![
                (x.name(), x2.clone()),
                (multiples.name(), Tensor::vector(&[big])),
            ],
            "shape [4294967296] and type float32",
        ),
    ];
    for (out, feeds, shape) in cases {
        let feeds: Vec<(&str, Tensor)> =
            feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let e = sess.run(&feeds, &[&out.name()], &[]).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
        assert_eq!(e.node(), Some(out.op().name()), "{e}");
        assert!(
            e.message()
                .contains(&format!("OOM when allocating tensor with {shape} on ")),
            "{e}"
        );
        assert!(e.message().contains("1073741824 bytes"), "{e}");
        small(&sess);
    }

    // Without a limit of its own a session still refuses what the machine cannot
    // hold (2^40 floats: 4 TiB) instead of aborting.
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let e = sess
        .run(
            &[(&dims.name(), Tensor::vector(&[1i64 << 20, 1 << 20]))],
            &[&fill.name()],
            &[],
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert_eq!(e.node(), Some(fill.op().name()), "{e}");
    small(&sess);
}

/// A feed must fit the static shape of the tensor it replaces, as TensorFlow's client
/// checks: the placeholder's `shape` attribute, or the shape inferred for any other
/// tensor; unknown dimensions take any size.
#[test]
fn feeds_must_fit_the_static_shape() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(2)])).unwrap();
    let y = ops::add(&s, &x, &ops::scalar(&s, 1.0f32).unwrap()).unwrap();
    let z = ops::mul(&s, &y, &y).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let six = Tensor::vector(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let three_by_two = six.reshaped([3, 2]).unwrap();
    for name in [x.name(), y.name()] {
        let e = sess
            .run(&[(&name, six.clone())], &[&z.name()], &[])
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(
            e.message().contains(&format!(
                "Cannot feed value of shape [6] for tensor '{name}', which has shape [?,2]"
            )),
            "{e}"
        );
    }
    let out = sess
        .run(&[(&y.name(), three_by_two.clone())], &[&z.name()], &[])
        .unwrap();
    assert_eq!(
        out[0],
        Tensor::vector(&[1.0f32, 4.0, 9.0, 16.0, 25.0, 36.0])
            .reshaped([3, 2])
            .unwrap()
    );
    let out = sess
        .run(&[(&x.name(), three_by_two)], &[&z.name()], &[])
        .unwrap();
    assert_eq!(
        out[0],
        Tensor::vector(&[4.0f32, 9.0, 16.0, 25.0, 36.0, 49.0])
            .reshaped([3, 2])
            .unwrap()
    );
}
