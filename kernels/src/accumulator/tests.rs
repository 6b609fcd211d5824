use std::sync::mpsc;

use graph::ops::ReductionType;
use graph::{f16, Code, DType, Shape, Status, Tensor};

use super::*;

fn acc(shape: Shape, reduction: ReductionType) -> ConditionalAccumulator {
    ConditionalAccumulator::new(AccumulatorSpec {
        name: "w:0/grad_accum".into(),
        dtype: DType::F32,
        shape,
        reduction,
    })
    .unwrap()
}

fn v(x: &[f32]) -> Tensor {
    Tensor::vector(x)
}

/// A take's completion that reports on a channel.
fn waiter() -> (
    impl FnOnce() -> Responder,
    mpsc::Receiver<graph::Result<Tensor>>,
) {
    let (tx, rx) = mpsc::channel();
    let make = move || -> Responder {
        Box::new(move |r| {
            let _ = tx.send(r);
        })
    };
    (make, rx)
}

fn never() -> Responder {
    Box::new(|_| panic!("this take should have completed at once"))
}

#[test]
fn stale_gradients_are_dropped_and_the_mean_taken() {
    let a = acc(Shape::known(&[2]), ReductionType::Mean);
    a.set_global_step(5);
    assert_eq!(a.apply(5, v(&[1.0, 2.0])).unwrap(), Applied::Accumulated);
    // computed at step 4: stale, dropped without a look at its shape
    assert_eq!(a.apply(4, v(&[100.0, 100.0])).unwrap(), Applied::Stale);
    assert_eq!(a.apply(4, v(&[1.0])).unwrap(), Applied::Stale);
    assert_eq!(a.apply(6, v(&[3.0, 6.0])).unwrap(), Applied::Accumulated);
    assert_eq!(a.num_accumulated(), 2);
    let r = a.take(a.next_id(), 2, never).unwrap().unwrap();
    assert_eq!(r, v(&[2.0, 4.0]));
    // the take reset the count and moved the global step on
    assert_eq!(a.num_accumulated(), 0);
    assert_eq!(a.global_step(), 6);
    assert_eq!(a.apply(5, v(&[1.0, 1.0])).unwrap(), Applied::Stale);
    assert_eq!(a.apply(6, v(&[1.0, 1.0])).unwrap(), Applied::Accumulated);
}

#[test]
fn sum_reduction_and_more_than_required() {
    let a = acc(Shape::unknown(), ReductionType::Sum);
    for g in [[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]] {
        a.apply(0, v(&g)).unwrap();
    }
    // three in, two required: all three are reduced, as in TensorFlow
    let r = a.take(a.next_id(), 2, never).unwrap().unwrap();
    assert_eq!(r, v(&[111.0, 222.0]));
}

#[test]
fn shapes_are_checked_against_the_spec_and_the_sum() {
    let a = acc(Shape::from_dims(&[None]), ReductionType::Mean);
    let e = a.apply(0, Tensor::scalar(1.0f32)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("Shape mismatch"), "{e}");
    a.apply(0, v(&[1.0, 2.0])).unwrap();
    let e = a.apply(0, v(&[1.0, 2.0, 3.0])).unwrap_err();
    assert!(e.message().contains("expected [2], got [3]"), "{e}");
    assert!(e.message().contains("w:0/grad_accum"), "{e}");
    let e = a.apply(0, Tensor::vector(&[1.0f64, 2.0])).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // the bad gradients changed nothing
    assert_eq!(a.num_accumulated(), 1);
    let r = a.take(a.next_id(), 1, never).unwrap().unwrap();
    assert_eq!(r, v(&[1.0, 2.0]));
}

#[test]
fn a_take_waits_for_enough_gradients() {
    let a = acc(Shape::known(&[2]), ReductionType::Mean);
    a.apply(0, v(&[2.0, 2.0])).unwrap();
    let (make, rx) = waiter();
    assert!(a.take(a.next_id(), 2, make).is_none());
    assert_eq!(a.waiting(), 1);
    assert!(rx.try_recv().is_err());
    a.apply(0, v(&[4.0, 6.0])).unwrap();
    assert_eq!(rx.try_recv().unwrap().unwrap(), v(&[3.0, 4.0]));
    assert_eq!(a.waiting(), 0);
    assert_eq!(a.global_step(), 1);
}

#[test]
fn takes_are_served_in_order_and_cancellable() {
    let a = acc(Shape::known(&[2]), ReductionType::Sum);
    let (m1, r1) = waiter();
    let (m2, r2) = waiter();
    let first = a.next_id();
    assert!(a.take(first, 2, m1).is_none());
    assert!(a.take(a.next_id(), 1, m2).is_none());
    // one gradient would do for the second take, but the first is ahead of it
    a.apply(0, v(&[1.0, 1.0])).unwrap();
    assert!(r1.try_recv().is_err() && r2.try_recv().is_err());
    // cancelling the first lets the second have the gradient
    a.cancel(first, Status::cancelled("step aborted"));
    assert_eq!(r1.try_recv().unwrap().unwrap_err().code(), Code::Cancelled);
    assert_eq!(r2.try_recv().unwrap().unwrap(), v(&[1.0, 1.0]));
    // cancelling a finished request does nothing
    a.cancel(first, Status::cancelled("late"));
    assert_eq!(a.waiting(), 0);
}

#[test]
fn num_required_must_be_positive_and_dtypes_float() {
    let a = acc(Shape::known(&[2]), ReductionType::Mean);
    for n in [0, -3] {
        let e = a.take(a.next_id(), n, never).unwrap().unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("must be positive"), "{e}");
    }
    assert_eq!(a.waiting(), 0);
    let e = ConditionalAccumulator::new(AccumulatorSpec {
        name: "ints".into(),
        dtype: DType::I32,
        shape: Shape::unknown(),
        reduction: ReductionType::Mean,
    })
    .err()
    .unwrap();
    assert_eq!(e.code(), Code::Unimplemented);
}

#[test]
fn half_precision_means() {
    let a = ConditionalAccumulator::new(AccumulatorSpec {
        name: "h".into(),
        dtype: DType::F16,
        shape: Shape::known(&[2]),
        reduction: ReductionType::Mean,
    })
    .unwrap();
    let h = |x: [f32; 2]| Tensor::vector(&[f16::from_f32(x[0]), f16::from_f32(x[1])]);
    a.apply(0, h([1.0, 3.0])).unwrap();
    a.apply(0, h([2.0, 5.0])).unwrap();
    a.apply(0, h([3.0, 7.0])).unwrap();
    let r = a.take(a.next_id(), 3, never).unwrap().unwrap();
    assert_eq!(r, h([2.0, 5.0]));
}
