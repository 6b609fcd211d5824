//! Partial runs and callables through a cluster's master: a partial run whose
//! step spans three tasks is fed and fetched a part at a time (TensorFlow's
//! `PartialRunSetup` and `RunStep` with a `partial_run_handle`, and the
//! master's `is_partial` `RunGraph`s); callables are made, run and released
//! (`MakeCallable`/`RunCallable`/`ReleaseCallable`). Values checked by hand;
//! every step's tables are gone afterwards, finished or abandoned.

use std::time::{Duration, Instant};

mod common;
use common::Cluster;

use actorflow_distributed::Connect;
use actors::{Session, SessionOptions};
use graph::builder::Scope;
use graph::ops;
use graph::{Code, DType, Shape, Tensor};
use proto::tensorflow as pb;
use proto::tensorflow::master_service_client::MasterServiceClient;

/// Waits (bounded) until no task holds a step's table.
fn no_live_steps(c: &Cluster) {
    let until = Instant::now() + Duration::from_secs(10);
    while c.servers.iter().any(|s| s.live_steps() > 0) {
        assert!(Instant::now() < until, "steps left behind");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_partial_run_spans_three_tasks_and_its_stateful_op_runs_once() {
    let c = Cluster::start(&[("ps", 1), ("worker", 2)], 2);
    let s = Scope::new();
    let ps = s.with_device("/job:ps/task:0");
    let w1 = s.with_device("/job:worker/task:1/device:CPU:1");
    let v = ops::variable(&ps, Shape::scalar(), DType::F32).unwrap();
    let init = ops::assign(&ps, &v, &ops::scalar(&ps, 100.0f32).unwrap()).unwrap();
    let a = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let b = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let c_ = ops::add(&w1, &a, &b).unwrap();
    let inc = ops::assign_add(&ps, &v, &c_).unwrap();
    let d = ops::mul(&s, &inc, &a).unwrap();
    let read = ops::identity(&ps, &v).unwrap();
    let sess = Session::connect(&c.target(1), &s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[init.op().name()]).unwrap();
    for round in 1..=2 {
        let run = sess
            .partial_run_setup(&[&a.name(), &b.name()], &[&c_.name(), &d.name()], &[])
            .unwrap();
        assert!(run
            .run(&[(&a.name(), Tensor::scalar(2.0f32))], &[])
            .unwrap()
            .is_empty());
        let e = run.run(&[], &[&c_.name()]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("can't be computed"), "{e}");
        let got = run
            .run(&[(&b.name(), Tensor::scalar(3.0f32))], &[&c_.name()])
            .unwrap();
        assert_eq!(got, vec![Tensor::scalar(5.0f32)]);
        let got = run.run(&[], &[&d.name()]).unwrap();
        let v_after = 100.0 + 5.0 * round as f32;
        assert_eq!(got, vec![Tensor::scalar(v_after * 2.0)]);
        assert!(run.is_finished());
        let got = sess.run(&[], &[&read.name()], &[]).unwrap();
        assert_eq!(got, vec![Tensor::scalar(v_after)], "round {round}");
    }
    no_live_steps(&c);
}

#[test]
fn an_abandoned_or_failed_partial_run_leaves_nothing_behind() {
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let a = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let b = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let q = ops::div(&s.with_device("/job:worker/task:1"), &a, &b).unwrap();
    let sess = Session::connect(&c.target(0), &s.graph_def(), SessionOptions::default()).unwrap();
    {
        let run = sess
            .partial_run_setup(&[&a.name(), &b.name()], &[&q.name()], &[])
            .unwrap();
        run.run(&[(&a.name(), Tensor::scalar(1i32))], &[]).unwrap();
        // Dropped with task 1 waiting for b: the master keeps the run until the
        // session closes, so the client closes it.
    }
    {
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
    }
    let got = sess
        .run(
            &[
                (&a.name(), Tensor::scalar(9i32)),
                (&b.name(), Tensor::scalar(3i32)),
            ],
            &[&q.name()],
            &[],
        )
        .unwrap();
    assert_eq!(got, vec![Tensor::scalar(3i32)]);
    sess.close().unwrap();
    no_live_steps(&c);
}

#[test]
fn callables_are_made_run_and_released() {
    let c = Cluster::start(&[("worker", 2)], 1);
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
    let y = ops::mul(&s.with_device("/job:worker/task:1"), &x, &x).unwrap();
    let z = ops::sum(&s, &y, &ops::scalar(&s, 0i32).unwrap(), false).unwrap();
    let gd = graph::import::graph_def_to_tf_proto(&s.graph_def());
    let (rt, channel) = c.channel(0);
    rt.block_on(async {
        let mut m = MasterServiceClient::new(channel);
        let handle = m
            .create_session(pb::CreateSessionRequest {
                graph_def: Some(gd),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .session_handle;
        let options = pb::CallableOptions {
            feed: vec![x.name()],
            fetch: vec![z.name(), y.name()],
            ..Default::default()
        };
        let callable = m
            .make_callable(pb::MakeCallableRequest {
                session_handle: handle.clone(),
                options: Some(options.clone()),
                request_id: 0,
            })
            .await
            .unwrap()
            .into_inner()
            .handle;
        let run =
            |m: &mut MasterServiceClient<tonic::transport::Channel>, feed: Vec<Tensor>, h: i64| {
                let req = pb::RunCallableRequest {
                    session_handle: handle.clone(),
                    handle: h,
                    feed: feed
                        .iter()
                        .map(graph::import::tensor_to_content_proto)
                        .collect(),
                    request_id: 0,
                };
                let mut m = m.clone();
                async move { m.run_callable(req).await }
            };
        for (v, sum) in [([1.0f32, 2.0], 5.0f32), ([3.0, -1.0], 10.0)] {
            let r = run(&mut m, vec![Tensor::vector(&v)], callable)
                .await
                .unwrap()
                .into_inner();
            let got: Vec<Tensor> = r
                .fetch
                .iter()
                .map(|t| graph::import::tensor_from_proto(t).unwrap())
                .collect();
            assert_eq!(
                got,
                vec![
                    Tensor::scalar(sum),
                    Tensor::vector(&[v[0] * v[0], v[1] * v[1]])
                ]
            );
        }
        let e = run(&mut m, vec![], callable).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        let e = run(&mut m, vec![Tensor::vector(&[1i32, 2])], callable)
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        // A bad signature fails when the callable is made.
        let e = m
            .make_callable(pb::MakeCallableRequest {
                session_handle: handle.clone(),
                options: Some(pb::CallableOptions {
                    fetch: vec!["nowhere:0".into()],
                    ..Default::default()
                }),
                request_id: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
        let e = m
            .make_callable(pb::MakeCallableRequest {
                session_handle: handle.clone(),
                options: Some(pb::CallableOptions {
                    tensor_connection: vec![pb::TensorConnection {
                        from_tensor: z.name(),
                        to_tensor: x.name(),
                    }],
                    ..options.clone()
                }),
                request_id: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented, "{e:?}");
        m.release_callable(pb::ReleaseCallableRequest {
            session_handle: handle.clone(),
            handle: callable,
        })
        .await
        .unwrap();
        let e = run(&mut m, vec![Tensor::vector(&[1.0f32, 2.0])], callable)
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        m.close_session(pb::CloseSessionRequest {
            session_handle: handle,
        })
        .await
        .unwrap();
    });
    no_live_steps(&c);
}
