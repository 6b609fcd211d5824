//! Memory follows live work: long loops, unbounded `parallel_iterations`, and the
//! propagation state pooled between steps.

use super::*;

/// Frames and iterations are recycled: a loop of a million iterations (and a
/// nested loop run per outer iteration) allocates no more iteration states than a
/// short one, and every frame is freed at the end.
#[test]
fn a_million_iterations_do_not_grow_memory() {
    use graph::builder::{while_loop, Scope, WhileOptions};
    use graph::ops;
    let build = |n: i32, inner: i32| -> Vec<NodeDef> {
        let s = Scope::new();
        let i0 = ops::scalar(&s, 0i32).unwrap();
        let a0 = ops::scalar(&s, 0.0f32).unwrap();
        let out = while_loop(
            &s,
            |b, v| ops::less(b, &v[0], &ops::scalar(b, n)?),
            |b, v| {
                let j0 = ops::scalar(b, 0i32)?;
                let inner_out = while_loop(
                    b,
                    |c, w| ops::less(c, &w[0], &ops::scalar(c, inner)?),
                    |c, w| {
                        Ok(vec![
                            ops::add(c, &w[0], &ops::scalar(c, 1i32)?)?,
                            ops::add(c, &w[1], &ops::scalar(c, 1.0f32)?)?,
                        ])
                    },
                    &[j0, v[1].clone()],
                    &WhileOptions::default(),
                )?;
                Ok(vec![
                    ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                    inner_out[1].clone(),
                ])
            },
            &[i0, a0],
            &WhileOptions::default(),
        )
        .unwrap();
        let g = graph::Graph::from_graph_def(&s.graph_def(), graph::OpRegistry::global()).unwrap();
        let fetch = out[1].name();
        graph::passes::prune::rewrite_for_step(&g, &[], &[fetch.as_str()], &[])
            .unwrap()
            .nodes
    };
    let measure = |n: i32, inner: i32| -> (usize, usize, f32, usize) {
        let dev = device();
        let plan = Arc::new(
            ExecutorPlan::build_from_nodes(&build(n, inner), &dev, &NoKernelCache).unwrap(),
        );
        let st = step(&dev, 1);
        let mut ex = ExecutorState::new(plan, Arc::clone(&st), None);
        let mut host = QueueHost::new();
        match ex.start(&mut host) {
            ExecutorTransition::Done(r) => r.unwrap(),
            ExecutorTransition::Running => {
                panic!("a loop of synchronous kernels finishes in one go")
            }
        }
        let p = ex.propagator();
        let out = st.call_frame.take_retvals()[0].clone().unwrap();
        (
            p.iterations_allocated(),
            p.live_frames(),
            out.as_slice::<f32>().unwrap()[0],
            p.ready.capacity(),
        )
    };
    let (short_allocs, short_frames, v, short_ready) = measure(100, 2);
    assert_eq!(v, 200.0);
    let (long_allocs, long_frames, v, long_ready) = measure(1_000_000, 0);
    assert_eq!(v, 0.0);
    let (nested_allocs, _, v, nested_ready) = measure(20_000, 3);
    assert_eq!(v, 60_000.0);
    // The ready queue is rarely empty inside a loop: it used to keep every node the
    // loop ran (16 B each, ~9 per iteration).
    assert!(
        short_ready <= 256 && long_ready <= 256 && nested_ready <= 256,
        "ready queue capacities: {short_ready}, {long_ready}, {nested_ready}"
    );
    // parallel_iterations = 10 per loop, two levels, plus the root.
    let bound = 1 + 11 + 11 * 11;
    assert!(
        short_allocs <= bound && long_allocs <= bound && nested_allocs <= bound,
        "iteration states allocated: {short_allocs}, {long_allocs}, {nested_allocs}"
    );
    assert!(
        long_allocs <= short_allocs.max(12),
        "{long_allocs} > {short_allocs}"
    );
    assert_eq!(
        (short_frames, long_frames),
        (0, 0),
        "every frame, the root's included, is freed when the step ends"
    );
}

/// `parallel_iterations` bounds the live iterations; it does not size anything.
#[test]
fn parallel_iterations_of_i32_max_allocate_by_use() {
    let dev = device();
    let plan = Arc::new(
        ExecutorPlan::build_from_nodes(
            &counter_loop(10_000, i32::MAX as i64),
            &dev,
            &NoKernelCache,
        )
        .unwrap(),
    );
    let st = step(&dev, 1);
    let mut ex = ExecutorState::new(plan, Arc::clone(&st), None);
    let mut host = QueueHost::new();
    drive(&mut ex, &mut host).unwrap();
    assert_eq!(
        st.call_frame.take_retvals()[0],
        Some(Tensor::scalar(10_000.0f32))
    );
    let allocated = ex.propagator().iterations_allocated();
    assert!(allocated <= 64, "{allocated} iteration states");
}

#[test]
fn parallel_iterations_below_one_name_the_enter() {
    let dev = device();
    for p in [0, -5] {
        let mut nodes = counter_loop(3, 10);
        for n in nodes.iter_mut().filter(|n| n.op == "Enter") {
            n.attr
                .insert("parallel_iterations".into(), graph::AttrValue::I(p));
        }
        let e = ExecutorPlan::build_from_nodes(&nodes, &dev, &NoKernelCache)
            .err()
            .expect("rejected");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("parallel_iterations"), "{e}");
        let node = e.node().expect("names the node");
        assert!(node.starts_with("while/Enter"), "{node}");
    }
}

/// A step far larger than the plan's usual ones does not pin its memory in the
/// pooled state: it is released after a few ordinary steps.
#[test]
fn pooled_state_releases_one_large_step() {
    let dev = device();
    let plan = ExecutorPlan::build_from_nodes(&counter_loop(3, 10), &dev, &NoKernelCache).unwrap();
    let mut p = plan.take_propagator();
    let tn = TaggedNode {
        node: 0,
        frame: 0,
        iter: 0,
        is_dead: false,
    };
    for _ in 0..100_000 {
        p.ready.push(tn);
    }
    while p.ready.pop().is_some() {}
    p.end_step(false);
    let large = p.ready.capacity();
    assert!(large >= 100_000);
    let mut steps = 0;
    while p.ready.capacity() == large {
        p.reset(&plan);
        for _ in 0..10 {
            p.ready.push(tn);
        }
        while p.ready.pop().is_some() {}
        p.end_step(false);
        steps += 1;
        assert!(
            steps < 20,
            "still holding {large} slots after {steps} small steps"
        );
    }
    assert!(p.ready.capacity() <= 4096, "{}", p.ready.capacity());
    // steady small steps keep what they use: no allocation per step
    let kept = p.ready.capacity();
    for _ in 0..50 {
        p.reset(&plan);
        p.end_step(false);
        assert_eq!(p.ready.capacity(), kept);
    }
}
