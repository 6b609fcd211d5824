//! Conditional accumulators through sessions: stale gradients dropped, the mean or
//! sum taken, shapes checked with errors naming the node, a take that waits
//! without blocking its device and completes when another step applies, and a
//! take abandoned by a step timeout that leaves the session and the accumulator
//! usable. Both handle kinds (`Ref(string)` and `resource`) run every case.

use std::time::{Duration, Instant};

use actorflow::ops::{self, AccumulatorOptions, ConditionalAccumulator, ReductionType};
use actorflow::{
    Code, DType, Output, RunArgs, RunOptions, Scope, Session, SessionOptions, Shape, Tensor,
};

/// Every blocking run in these tests gives up after this long.
const BOUND: Duration = Duration::from_secs(20);

struct Acc {
    s: Scope,
    grad: Output,
    local_step: Output,
    apply: String,
    num_required: Output,
    take: Output,
    count: Output,
    new_step: Output,
    set_step: String,
}

fn accumulator(resource: bool, reduction: ReductionType, shape: Shape) -> Acc {
    let s = Scope::new();
    let acc = ConditionalAccumulator::new(
        &s,
        DType::F32,
        shape,
        &AccumulatorOptions {
            shared_name: "w:0/grad_accum".into(),
            reduction_type: reduction,
            resource,
            ..Default::default()
        },
    )
    .unwrap();
    let grad = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
    let local_step = ops::placeholder(&s, DType::I64, Shape::scalar()).unwrap();
    let apply = acc.apply_grad(&s, &grad, &local_step).unwrap();
    let num_required = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let take = acc.take_grad(&s, &num_required).unwrap();
    let count = acc.num_accumulated(&s).unwrap();
    let new_step = ops::placeholder(&s, DType::I64, Shape::scalar()).unwrap();
    let set_step = acc.set_global_step(&s, &new_step, "SetGlobalStep").unwrap();
    Acc {
        s,
        grad,
        local_step,
        apply: apply.name().to_owned(),
        num_required,
        take,
        count,
        new_step,
        set_step: set_step.name().to_owned(),
    }
}

fn bounded() -> RunOptions {
    RunOptions::default().with_timeout(BOUND)
}

impl Acc {
    fn session(&self) -> Session {
        Session::new(&self.s.graph_def(), SessionOptions::default()).unwrap()
    }

    fn apply(&self, sess: &Session, step: i64, g: Tensor) -> actorflow::Result<()> {
        sess.run_with(
            &RunArgs::new()
                .feed(&self.grad, g)
                .feed(&self.local_step, Tensor::scalar(step))
                .target(&self.apply)
                .options(bounded()),
        )
        .map(|_| ())
    }

    fn take(&self, sess: &Session, n: i32, opts: &RunOptions) -> actorflow::Result<Tensor> {
        sess.run_with(
            &RunArgs::new()
                .feed(&self.num_required, Tensor::scalar(n))
                .fetch(&self.take)
                .options(opts.clone()),
        )
        .map(|mut o| o.outputs.remove(0))
    }

    fn count(&self, sess: &Session) -> i32 {
        sess.run(&[], &[&self.count.name()], &[]).unwrap()[0]
            .scalar_value::<i32>()
            .unwrap()
    }

    fn set_step(&self, sess: &Session, step: i64) {
        sess.run(
            &[(&self.new_step.name(), Tensor::scalar(step))],
            &[],
            &[&self.set_step],
        )
        .unwrap();
    }
}

#[test]
fn stale_gradients_are_dropped_and_the_mean_taken() {
    for resource in [false, true] {
        let a = accumulator(resource, ReductionType::Mean, Shape::known(&[2]));
        let sess = a.session();
        a.set_step(&sess, 1);
        a.apply(&sess, 1, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        // computed at step 0, behind the accumulator's step 1: dropped
        a.apply(&sess, 0, Tensor::vector(&[10.0f32, 10.0])).unwrap();
        a.apply(&sess, 2, Tensor::vector(&[3.0f32, 4.0])).unwrap();
        assert_eq!(a.count(&sess), 2);
        let mean = a.take(&sess, 2, &bounded()).unwrap();
        assert_eq!(mean, Tensor::vector(&[2.0f32, 3.0]), "resource: {resource}");
        // the take reset the count and moved the step to 2: step 1 is stale now
        assert_eq!(a.count(&sess), 0);
        a.apply(&sess, 1, Tensor::vector(&[1.0f32, 1.0])).unwrap();
        assert_eq!(a.count(&sess), 0);
    }
}

#[test]
fn sum_reduction() {
    for resource in [false, true] {
        let a = accumulator(resource, ReductionType::Sum, Shape::unknown());
        let sess = a.session();
        for g in [[1.0f32, 2.0], [10.0, 20.0], [100.0, 200.0]] {
            a.apply(&sess, 0, Tensor::vector(&g)).unwrap();
        }
        let sum = a.take(&sess, 3, &bounded()).unwrap();
        assert_eq!(sum, Tensor::vector(&[111.0f32, 222.0]));
    }
}

#[test]
fn shape_and_argument_errors_name_the_node() {
    for resource in [false, true] {
        let a = accumulator(resource, ReductionType::Mean, Shape::known(&[2]));
        let sess = a.session();
        let e = a
            .apply(&sess, 0, Tensor::vector(&[1.0f32, 2.0, 3.0]))
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(e.node(), Some(a.apply.as_str()), "{e}");
        assert!(e.message().contains("Shape mismatch"), "{e}");
        let e = a.take(&sess, 0, &bounded()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(e.node(), Some(a.take.op().name()), "{e}");
        assert!(e.message().contains("must be positive"), "{e}");
        // nothing was added: the accumulator still works
        assert_eq!(a.count(&sess), 0);
        a.apply(&sess, 0, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        assert_eq!(
            a.take(&sess, 1, &bounded()).unwrap(),
            Tensor::vector(&[1.0f32, 2.0])
        );
    }
}

#[test]
fn a_waiting_take_completes_when_another_step_applies() {
    for resource in [false, true] {
        let a = accumulator(resource, ReductionType::Mean, Shape::known(&[2]));
        let sess = a.session(); // one device: the waiting take must not hold it
        a.apply(&sess, 0, Tensor::vector(&[2.0f32, 2.0])).unwrap();
        let (s2, take, n) = (sess.clone(), a.take.name(), a.num_required.name());
        let waiter = std::thread::spawn(move || {
            s2.run_with(
                &RunArgs::new()
                    .feed(&n, Tensor::scalar(2i32))
                    .fetch(&take)
                    .options(bounded()),
            )
            .map(|mut o| o.outputs.remove(0))
        });
        // the take waits: the device runs other steps meanwhile
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished());
        assert_eq!(a.count(&sess), 1);
        a.apply(&sess, 0, Tensor::vector(&[4.0f32, 6.0])).unwrap();
        let mean = waiter.join().unwrap().unwrap();
        assert_eq!(mean, Tensor::vector(&[3.0f32, 4.0]));
        assert_eq!(a.count(&sess), 0);
    }
}

#[test]
fn a_step_timeout_abandons_the_take_and_the_session_stays_usable() {
    for resource in [false, true] {
        let a = accumulator(resource, ReductionType::Mean, Shape::known(&[2]));
        let sess = a.session();
        a.apply(&sess, 0, Tensor::vector(&[1.0f32, 1.0])).unwrap();
        let short = RunOptions::default().with_timeout(Duration::from_millis(100));
        let t = Instant::now();
        let e = a.take(&sess, 5, &short).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // the abandoned take holds nothing: the gradient is still there and the
        // next take is served at once
        assert_eq!(a.count(&sess), 1);
        a.apply(&sess, 0, Tensor::vector(&[3.0f32, 3.0])).unwrap();
        assert_eq!(
            a.take(&sess, 2, &bounded()).unwrap(),
            Tensor::vector(&[2.0f32, 2.0])
        );
    }
}

#[test]
fn accumulators_with_one_shared_name_are_one() {
    let s = Scope::new();
    let o = AccumulatorOptions {
        shared_name: "shared".into(),
        ..Default::default()
    };
    let a = ConditionalAccumulator::new(&s, DType::F64, Shape::scalar(), &o).unwrap();
    let b = ConditionalAccumulator::new(&s, DType::F64, Shape::scalar(), &o).unwrap();
    let step = ops::scalar(&s, 0i64).unwrap();
    let g = ops::scalar(&s, 4.0f64).unwrap();
    let apply = a.apply_grad(&s, &g, &step).unwrap();
    let take = b.take_grad(&s, &ops::scalar(&s, 1i32).unwrap()).unwrap();
    // another dtype under the same name is refused
    let c = ConditionalAccumulator::new(
        &s,
        DType::F32,
        Shape::scalar(),
        &AccumulatorOptions {
            shared_name: "shared".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let count_c = c.num_accumulated(&s).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[apply.name()]).unwrap();
    let out = sess
        .run_with(&RunArgs::new().fetch(&take).options(bounded()))
        .unwrap();
    assert_eq!(out.outputs[0], Tensor::scalar(4.0f64));
    let e = sess.run(&[], &[&count_c.name()], &[]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert_eq!(e.node(), Some(c.handle.op().name()), "{e}");
}
