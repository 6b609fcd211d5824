//! Partial runs (TensorFlow's `partial_run_setup` / `partial_run`): one step fed
//! and fetched a part at a time, on one device and spread over several; values
//! checked by hand, every misuse an `InvalidArgument` that leaves the session
//! usable, and nothing that can hang.

use std::time::Duration;

use actorflow::graph::builder::{while_loop, WhileOptions};
use actorflow::{ops, Code, DType, Output, Scope, Session, SessionOptions, Shape, Tensor};

/// One device, three with the cost model, three placed at random.
fn sessions(s: &Scope) -> Vec<Session> {
    [(1, None), (3, None), (3, Some(7))]
        .into_iter()
        .map(|(devices, seed)| {
            Session::new(
                &s.graph_def(),
                SessionOptions::default()
                    .with_cpu_devices(devices)
                    .with_random_placement_seed(seed)
                    .with_default_timeout(Duration::from_secs(30)),
            )
            .unwrap()
        })
        .collect()
}

fn f32s(s: &Scope) -> Output {
    ops::placeholder(s, DType::F32, Shape::scalar()).unwrap()
}

#[test]
fn a_step_is_fed_and_fetched_a_part_at_a_time() {
    // c = a + b; d = c * c; e = d - a
    let s = Scope::new();
    let (a, b) = (f32s(&s), f32s(&s));
    let c = ops::add(&s, &a, &b).unwrap();
    let d = ops::mul(&s, &c, &c).unwrap();
    let e = ops::sub(&s, &d, &a).unwrap();
    for sess in sessions(&s) {
        let run = sess
            .partial_run_setup(
                &[&a.name(), &b.name()],
                &[&c.name(), &d.name(), &e.name()],
                &[],
            )
            .unwrap();
        assert!(run
            .run(&[(&a.name(), Tensor::scalar(1.5f32))], &[])
            .unwrap()
            .is_empty());
        let got = run
            .run(&[(&b.name(), Tensor::scalar(2.5f32))], &[&c.name()])
            .unwrap();
        assert_eq!(got, vec![Tensor::scalar(4.0f32)]);
        assert!(!run.is_finished());
        let got = run.run(&[], &[&e.name(), &d.name()]).unwrap();
        assert_eq!(got, vec![Tensor::scalar(14.5f32), Tensor::scalar(16.0f32)]);
        assert!(run.is_finished());
        // The session runs whole steps as before.
        let whole = sess
            .run(
                &[
                    (&a.name(), Tensor::scalar(1.0f32)),
                    (&b.name(), Tensor::scalar(1.0f32)),
                ],
                &[&d.name()],
                &[],
            )
            .unwrap();
        assert_eq!(whole[0], Tensor::scalar(4.0f32));
    }
}

#[test]
fn a_stateful_op_runs_once_for_the_whole_run() {
    // v += 1 once; y = (v after the increment) + x, with x fed after the
    // increment was fetched.
    let s = Scope::new();
    let v = ops::variable(&s, Shape::scalar(), DType::F32).unwrap();
    let init = ops::assign(&s, &v, &ops::scalar(&s, 10.0f32).unwrap()).unwrap();
    let inc = ops::assign_add(&s, &v, &ops::scalar(&s, 1.0f32).unwrap()).unwrap();
    let x = f32s(&s);
    let y = ops::add(&s, &inc, &x).unwrap();
    let read = ops::identity(&s, &v).unwrap();
    for sess in sessions(&s) {
        sess.run(&[], &[], &[init.op().name()]).unwrap();
        let run = sess
            .partial_run_setup(&[&x.name()], &[&inc.name(), &y.name()], &[])
            .unwrap();
        assert_eq!(
            run.run(&[], &[&inc.name()]).unwrap(),
            vec![Tensor::scalar(11.0f32)]
        );
        assert_eq!(
            run.run(&[(&x.name(), Tensor::scalar(0.25f32))], &[&y.name()])
                .unwrap(),
            vec![Tensor::scalar(11.25f32)]
        );
        assert_eq!(
            sess.run(&[], &[&read.name()], &[]).unwrap(),
            vec![Tensor::scalar(11.0f32)]
        );
    }
}

#[test]
fn targets_run_and_a_loop_runs_inside_a_partial_run() {
    // while i < n: i += 1, with n fed in the second call; a target assigns.
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let zero = ops::scalar(&s, 0i32).unwrap();
    let out = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| Ok(vec![ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?]),
        &[zero],
        &WhileOptions::default(),
    )
    .unwrap()
    .remove(0);
    let v = ops::variable(&s, Shape::scalar(), DType::I32).unwrap();
    let set = ops::assign(&s, &v, &ops::scalar(&s, 42i32).unwrap()).unwrap();
    let read = ops::identity(&s, &v).unwrap();
    for sess in sessions(&s) {
        let run = sess
            .partial_run_setup(&[&n.name()], &[&out.name()], &[set.op().name()])
            .unwrap();
        let got = run
            .run(&[(&n.name(), Tensor::scalar(7i32))], &[&out.name()])
            .unwrap();
        assert_eq!(got, vec![Tensor::scalar(7i32)]);
        // The last call waited for the target.
        assert_eq!(
            sess.run(&[], &[&read.name()], &[]).unwrap(),
            vec![Tensor::scalar(42i32)]
        );
    }
}

#[test]
fn misuse_is_invalid_argument_and_the_session_stays_usable() {
    let s = Scope::new();
    let (a, b) = (f32s(&s), f32s(&s));
    let c = ops::add(&s, &a, &b).unwrap();
    let d = ops::neg(&s, &a).unwrap();
    let other = f32s(&s);
    let sess = &sessions(&s)[1];
    let run = sess
        .partial_run_setup(&[&a.name(), &b.name()], &[&c.name(), &d.name()], &[])
        .unwrap();
    let invalid = |r: actorflow::Result<Vec<Tensor>>, says: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains(says), "{e}");
    };
    invalid(
        run.run(&[(&other.name(), Tensor::scalar(1.0f32))], &[]),
        "was not specified in partial_run_setup",
    );
    invalid(
        run.run(&[], &[&other.name()]),
        "was not specified in partial_run_setup",
    );
    invalid(
        run.run(&[], &[&c.name()]),
        "can't be computed from the feeds",
    );
    invalid(
        run.run(&[(&a.name(), Tensor::scalar(1i32))], &[]),
        "Cannot feed value of type",
    );
    // None of that changed the run: a and then b are still wanted once.
    assert_eq!(
        run.run(&[(&a.name(), Tensor::scalar(2.0f32))], &[&d.name()])
            .unwrap(),
        vec![Tensor::scalar(-2.0f32)]
    );
    invalid(
        run.run(&[(&a.name(), Tensor::scalar(2.0f32))], &[]),
        "has already been fed",
    );
    invalid(run.run(&[], &[&d.name()]), "has already been fetched");
    assert_eq!(
        run.run(&[(&b.name(), Tensor::scalar(3.0f32))], &[&c.name()])
            .unwrap(),
        vec![Tensor::scalar(5.0f32)]
    );
    invalid(run.run(&[], &[]), "Must run 'setup'");
    // Unknown names fail the setup.
    let e = sess
        .partial_run_setup(&[&a.name()], &["no_such_node:0"], &[])
        .err()
        .unwrap();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let out = sess
        .run(
            &[
                (&a.name(), Tensor::scalar(1.0f32)),
                (&b.name(), Tensor::scalar(2.0f32)),
            ],
            &[&c.name()],
            &[],
        )
        .unwrap();
    assert_eq!(out[0], Tensor::scalar(3.0f32));
}

#[test]
fn a_fetch_on_an_untaken_branch_is_an_error_not_a_wait() {
    let s = Scope::new();
    let x = f32s(&s);
    let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
    let (if_false, if_true) = ops::switch(&s, &x, &p).unwrap();
    let t = ops::identity(&s, &if_true).unwrap();
    let f = ops::identity(&s, &if_false).unwrap();
    for sess in sessions(&s) {
        let run = sess
            .partial_run_setup(&[&x.name(), &p.name()], &[&f.name(), &t.name()], &[])
            .unwrap();
        let got = run
            .run(
                &[
                    (&x.name(), Tensor::scalar(3.0f32)),
                    (&p.name(), Tensor::scalar(false)),
                ],
                &[&f.name()],
            )
            .unwrap();
        assert_eq!(got, vec![Tensor::scalar(3.0f32)]);
        let e = run.run(&[], &[&t.name()]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("produced no value"), "{e}");
        assert!(run.is_finished());
    }
}

#[test]
fn an_abandoned_run_ends_its_step_and_later_runs_work() {
    let s = Scope::new();
    let (a, b) = (f32s(&s), f32s(&s));
    let c = ops::add(&s, &a, &b).unwrap();
    for sess in sessions(&s) {
        for _ in 0..3 {
            let run = sess
                .partial_run_setup(&[&a.name(), &b.name()], &[&c.name()], &[])
                .unwrap();
            run.run(&[(&a.name(), Tensor::scalar(1.0f32))], &[])
                .unwrap();
            // Dropped while its step waits for b.
        }
        let run = sess
            .partial_run_setup(&[&a.name(), &b.name()], &[&c.name()], &[])
            .unwrap();
        let got = run
            .run(
                &[
                    (&a.name(), Tensor::scalar(1.0f32)),
                    (&b.name(), Tensor::scalar(2.0f32)),
                ],
                &[&c.name()],
            )
            .unwrap();
        assert_eq!(got, vec![Tensor::scalar(3.0f32)]);
    }
}

#[test]
fn a_failing_kernel_fails_the_call_that_waits_for_it() {
    // A division of integers by a fed zero fails its kernel.
    let s = Scope::new();
    let a = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let b = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let q = ops::div(&s, &a, &b).unwrap();
    for sess in sessions(&s) {
        let run = sess
            .partial_run_setup(&[&a.name(), &b.name()], &[&q.name()], &[])
            .unwrap();
        let e = run
            .run(
                &[
                    (&a.name(), Tensor::scalar(1i32)),
                    (&b.name(), Tensor::scalar(0i32)),
                ],
                &[&q.name()],
            )
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(run.is_finished());
        let ok = sess
            .run(
                &[
                    (&a.name(), Tensor::scalar(6i32)),
                    (&b.name(), Tensor::scalar(3i32)),
                ],
                &[&q.name()],
                &[],
            )
            .unwrap();
        assert_eq!(ok[0], Tensor::scalar(2i32));
    }
}
