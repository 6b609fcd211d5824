//! Queues through sessions: order, blocking without blocking devices, timeouts,
//! close semantics, sharing, queue runners and the coordinator.

use std::time::{Duration, Instant};

use actorflow::actors::input::{Coordinator, QueueRunner};
use actorflow::ops::{self, QueueOptions};
use actorflow::{
    Code, DType, Output, RunArgs, RunOptions, Runtime, RuntimeOptions, Scope, Session,
    SessionOptions, Shape, Tensor,
};

struct Q {
    s: Scope,
    q: Output,
    x: Output,
    enq: String,
    enq_many: String,
    deq: Output,
    deq_many: Output,
    n: Output,
    close: String,
    cancel: String,
    size: Output,
}

fn queue(capacity: Option<i64>, timeout_ms: i64) -> Q {
    let s = Scope::new();
    let q = ops::fifo_queue(
        &s,
        &[DType::I32],
        &QueueOptions {
            shapes: vec![Shape::scalar()],
            capacity,
            ..Default::default()
        },
    )
    .unwrap();
    let x = ops::placeholder(&s, DType::I32, Shape::unknown()).unwrap();
    let enq = s
        .op("QueueEnqueueV2")
        .input(&q)
        .input_list(std::slice::from_ref(&x))
        .attr("timeout_ms", timeout_ms)
        .build()
        .unwrap();
    let enq_many = ops::queue_enqueue_many(&s, &q, std::slice::from_ref(&x)).unwrap();
    let deq = s
        .op("QueueDequeueV2")
        .input(&q)
        .attr("component_types", vec![DType::I32])
        .attr("timeout_ms", timeout_ms)
        .build1()
        .unwrap();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let deq_many = ops::queue_dequeue_many(&s, &q, &n, &[DType::I32])
        .unwrap()
        .remove(0);
    let close = ops::queue_close(&s, &q, false).unwrap().name().to_owned();
    let cancel = ops::queue_close(&s, &q, true).unwrap().name().to_owned();
    let size = ops::queue_size(&s, &q).unwrap();
    Q {
        enq: enq.name().to_owned(),
        enq_many: enq_many.name().to_owned(),
        s,
        q,
        x,
        deq,
        deq_many,
        n,
        close,
        cancel,
        size,
    }
}

fn sess(q: &Q) -> Session {
    Session::new(&q.s.graph_def(), SessionOptions::default()).unwrap()
}

#[test]
fn fifo_order_and_batches() {
    let q = queue(None, -1);
    let s = sess(&q);
    for v in 0..5 {
        s.run(&[(&q.x.name(), Tensor::scalar(v))], &[], &[&q.enq])
            .unwrap();
    }
    s.run(
        &[(&q.x.name(), Tensor::vector(&[5i32, 6, 7]))],
        &[],
        &[&q.enq_many],
    )
    .unwrap();
    assert_eq!(
        s.run(&[], &[&q.size.name()], &[]).unwrap()[0],
        Tensor::scalar(8i32)
    );
    for v in 0..3 {
        assert_eq!(
            s.run(&[], &[&q.deq.name()], &[]).unwrap()[0],
            Tensor::scalar(v)
        );
    }
    let b = s
        .run(
            &[(&q.n.name(), Tensor::scalar(5i32))],
            &[&q.deq_many.name()],
            &[],
        )
        .unwrap();
    assert_eq!(b[0], Tensor::vector(&[3i32, 4, 5, 6, 7]));
}

#[test]
fn a_waiting_dequeue_blocks_no_device_thread() {
    let q = queue(None, -1);
    let unrelated = ops::add(
        &q.s,
        &ops::scalar(&q.s, 1i32).unwrap(),
        &ops::scalar(&q.s, 2i32).unwrap(),
    )
    .unwrap();
    let s = sess(&q); // one device
    let (s2, deq) = (s.clone(), q.deq.name());
    let waiter = std::thread::spawn(move || s2.run(&[], &[&deq], &[]).unwrap().remove(0));
    std::thread::sleep(Duration::from_millis(50));
    // the device still runs other steps while the dequeue waits in the queue
    for _ in 0..10 {
        assert_eq!(
            s.run(&[], &[&unrelated.name()], &[]).unwrap()[0],
            Tensor::scalar(3i32)
        );
    }
    s.run(&[(&q.x.name(), Tensor::scalar(42i32))], &[], &[&q.enq])
        .unwrap();
    assert_eq!(waiter.join().unwrap(), Tensor::scalar(42i32));
}

#[test]
fn timeouts_fail_the_wait_and_lose_nothing() {
    let q = queue(Some(1), 50);
    let s = sess(&q);
    let t = Instant::now();
    let e = s.run(&[], &[&q.deq.name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(t.elapsed() >= Duration::from_millis(45));
    s.run(&[(&q.x.name(), Tensor::scalar(1i32))], &[], &[&q.enq])
        .unwrap();
    let e = s
        .run(&[(&q.x.name(), Tensor::scalar(2i32))], &[], &[&q.enq])
        .unwrap_err();
    assert_eq!(
        e.code(),
        Code::DeadlineExceeded,
        "a full queue times out the enqueue"
    );
    // a step timeout cancels a waiting dequeue too (here: many on a short queue)
    let opts = RunOptions::default().with_timeout(Duration::from_millis(50));
    let e = s
        .run_with(
            &RunArgs::new()
                .feed(&q.n, Tensor::scalar(2i32))
                .fetch(&q.deq_many)
                .options(opts.clone()),
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    // the element is still there
    assert_eq!(
        s.run(&[], &[&q.deq.name()], &[]).unwrap()[0],
        Tensor::scalar(1i32)
    );
    assert_eq!(
        s.run(&[], &[&q.size.name()], &[]).unwrap()[0],
        Tensor::scalar(0i32)
    );
}

#[test]
fn close_semantics() {
    let q = queue(Some(2), -1);
    let s = sess(&q);
    s.run(
        &[(&q.x.name(), Tensor::vector(&[1i32, 2]))],
        &[],
        &[&q.enq_many],
    )
    .unwrap();
    // a blocked enqueue is cancelled by a cancelling close
    let (s2, x, enq) = (s.clone(), q.x.name(), q.enq.clone());
    let blocked = std::thread::spawn(move || {
        s2.run(&[(&x, Tensor::scalar(3i32))], &[], &[&enq])
            .unwrap_err()
    });
    std::thread::sleep(Duration::from_millis(30));
    s.run(&[], &[], &[&q.cancel]).unwrap();
    assert_eq!(blocked.join().unwrap().code(), Code::Cancelled);
    // closed: enqueues fail, remaining elements drain, then OutOfRange
    let e = s
        .run(&[(&q.x.name(), Tensor::scalar(4i32))], &[], &[&q.enq])
        .unwrap_err();
    assert_eq!(e.code(), Code::Cancelled);
    assert_eq!(
        s.run(&[], &[&q.deq.name()], &[]).unwrap()[0],
        Tensor::scalar(1i32)
    );
    assert_eq!(
        s.run(&[], &[&q.deq.name()], &[]).unwrap()[0],
        Tensor::scalar(2i32)
    );
    let e = s.run(&[], &[&q.deq.name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e}");
    s.run(&[], &[], &[&q.close]).unwrap();
}

#[test]
fn bad_elements_are_rejected_and_the_queue_keeps_its_contents() {
    let q = queue(None, -1);
    let s = sess(&q);
    s.run(&[(&q.x.name(), Tensor::scalar(7i32))], &[], &[&q.enq])
        .unwrap();
    let e = s
        .run(&[(&q.x.name(), Tensor::vector(&[1i32, 2]))], &[], &[&q.enq])
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "wrong shape: {e}");
    let f = ops::placeholder(&q.s, DType::F32, Shape::scalar()).unwrap();
    let bad = ops::queue_enqueue(&q.s, &q.q, std::slice::from_ref(&f)).unwrap();
    s.extend(
        &q.s.graph_def()
            .node
            .iter()
            .filter(|n| n.name == bad.name() || n.name == f.op().name())
            .fold(actorflow::GraphDef::default(), |mut g, n| {
                g.node.push(n.clone());
                g
            }),
    )
    .unwrap();
    let e = s
        .run(&[(&f.name(), Tensor::scalar(1.0f32))], &[], &[bad.name()])
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "wrong dtype: {e}");
    assert_eq!(
        s.run(&[], &[&q.size.name()], &[]).unwrap()[0],
        Tensor::scalar(1i32)
    );
}

#[test]
fn queues_are_shared_by_name_across_sessions() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let build = || {
        let s = Scope::new();
        let o = QueueOptions {
            shapes: vec![Shape::scalar()],
            shared_name: "shared_q".into(),
            container: "jobs".into(),
            ..Default::default()
        };
        let q = ops::fifo_queue(&s, &[DType::I64], &o).unwrap();
        let x = ops::scalar(&s, 5i64).unwrap();
        let enq = ops::queue_enqueue(&s, &q, &[x]).unwrap();
        let deq = ops::queue_dequeue(&s, &q, &[DType::I64]).unwrap().remove(0);
        (s.graph_def(), enq.name().to_owned(), deq.name())
    };
    let (g, enq, deq) = build();
    let a = Session::in_runtime(&rt, &g, SessionOptions::default()).unwrap();
    let b = Session::in_runtime(&rt, &g, SessionOptions::default()).unwrap();
    a.run(&[], &[], &[&enq]).unwrap();
    assert_eq!(b.run(&[], &[&deq], &[]).unwrap()[0], Tensor::scalar(5i64));
    rt.reset_container("jobs");
}

/// A source queue holding 0..100, closed; a destination queue fed by a runner whose
/// enqueue op moves one element from source to destination.
fn pipeline(loops: usize) -> (Scope, QueueRunner, String, String, Output) {
    let s = Scope::new();
    let o = QueueOptions {
        shapes: vec![Shape::scalar()],
        ..Default::default()
    };
    let src = ops::fifo_queue(&s, &[DType::I32], &o).unwrap();
    let fill = ops::queue_enqueue_many(
        &s,
        &src,
        &[ops::constant(
            &s,
            Tensor::new(&[100], (0..100).collect::<Vec<i32>>()).unwrap(),
        )
        .unwrap()],
    )
    .unwrap();
    let close_src = ops::queue_close(&s, &src, false).unwrap();
    let dst = ops::fifo_queue(
        &s,
        &[DType::I32],
        &QueueOptions {
            capacity: Some(5),
            ..o
        },
    )
    .unwrap();
    let mut enqueues = Vec::new();
    for _ in 0..loops {
        let v = ops::queue_dequeue(&s, &src, &[DType::I32]).unwrap();
        enqueues.push(ops::queue_enqueue(&s, &dst, &v).unwrap().name().to_owned());
    }
    let runner = QueueRunner::new(
        enqueues,
        ops::queue_close(&s, &dst, false).unwrap().name(),
        ops::queue_close(&s, &dst, true).unwrap().name(),
    );
    let deq = ops::queue_dequeue(&s, &dst, &[DType::I32])
        .unwrap()
        .remove(0);
    (
        s,
        runner,
        fill.name().to_owned(),
        close_src.name().to_owned(),
        deq,
    )
}

#[test]
fn a_queue_runner_with_four_loops_fills_and_closes() {
    let (s, runner, fill, close_src, deq) = pipeline(4);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[&fill, &close_src]).unwrap();
    let coord = Coordinator::new();
    runner.start_threads(&sess, &coord);
    let mut seen = vec![0u32; 100];
    loop {
        match sess.run(&[], &[&deq.name()], &[]) {
            Ok(v) => seen[v[0].scalar_value::<i32>().unwrap() as usize] += 1,
            Err(e) => {
                assert_eq!(e.code(), Code::OutOfRange, "{e}");
                break;
            }
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "every element exactly once");
    coord.request_stop(None);
    coord.join().unwrap();
}

#[test]
fn the_coordinator_propagates_the_first_error() {
    let s = Scope::new();
    let q = ops::fifo_queue(
        &s,
        &[DType::I32],
        &QueueOptions {
            shapes: vec![Shape::known(&[2])],
            ..Default::default()
        },
    )
    .unwrap();
    let bad = ops::queue_enqueue(&s, &q, &[ops::scalar(&s, 1i32).unwrap()]).unwrap(); // wrong shape
    let runner = QueueRunner::new(
        vec![bad.name().to_owned(); 2],
        ops::queue_close(&s, &q, false).unwrap().name(),
        ops::queue_close(&s, &q, true).unwrap().name(),
    );
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let coord = Coordinator::new();
    runner.start_threads(&sess, &coord);
    let e = coord.join().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(coord.should_stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_runners_as_tokio_tasks() {
    let (s, runner, fill, close_src, deq) = pipeline(2);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run_async(&actorflow::RunArgs::new().target(&fill).target(&close_src))
        .await
        .unwrap();
    let coord = Coordinator::new();
    let tasks = runner.spawn_tasks(&sess, &coord);
    let mut total = 0i64;
    let mut count = 0;
    loop {
        match sess.run_async(&actorflow::RunArgs::new().fetch(&deq)).await {
            Ok(o) => {
                total += o.outputs[0].scalar_value::<i32>().unwrap() as i64;
                count += 1;
            }
            Err(e) => {
                assert_eq!(e.code(), Code::OutOfRange);
                break;
            }
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!((count, total), (100, 4950));
}
