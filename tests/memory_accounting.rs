//! Memory accounting and buffer forwarding, checked against figures computed by
//! hand from the tensors' sizes: a step's peak, what each node allocated, what a
//! device holds, and that forwarding saves allocations without ever writing into
//! a buffer another consumer, a fetch or a variable still reads.

use actorflow::{
    ops, DType, Output, RunArgs, RunMetadata, RunOptions, Scope, Session, SessionOptions, Shape,
    Tensor, TraceLevel,
};

const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const CPU1: &str = "/job:localhost/replica:0/task:0/device:CPU:1";

fn traced(
    sess: &Session,
    feeds: &[(&Output, Tensor)],
    fetches: &[&Output],
) -> (Vec<Tensor>, RunMetadata) {
    let mut args =
        RunArgs::new().options(RunOptions::default().with_trace_level(TraceLevel::FullTrace));
    for (x, v) in feeds {
        args = args.feed(*x, v.clone());
    }
    for f in fetches {
        args = args.fetch(*f);
    }
    let out = sess.run_with(&args).unwrap();
    (out.outputs, out.metadata.unwrap())
}

fn node_memory(md: &RunMetadata, node: &str) -> actorflow::actors::stats::NodeMemory {
    md.step_stats
        .iter()
        .flat_map(|c| &c.nodes)
        .find(|n| &*n.node == node)
        .unwrap_or_else(|| panic!("no stats for {node}"))
        .memory
}

/// x: f32[1000] (4 000 bytes, fed: not the step's) → a = concat(x, x) (8 000)
/// → b = concat(a, a) (16 000) → c = neg(b), fetched.
fn chain(s: &Scope) -> (Output, Output, Output, Output) {
    let x = ops::placeholder(s, DType::F32, Shape::from_dims(&[Some(1000)])).unwrap();
    let a = ops::concat_along(s, &[x.clone(), x.clone()], 0).unwrap();
    let b = ops::concat_along(s, &[a.clone(), a.clone()], 0).unwrap();
    let c = ops::neg(s, &b).unwrap();
    (x, a, b, c)
}

fn ramp(n: usize) -> Tensor {
    Tensor::vector(&(0..n).map(|i| i as f32).collect::<Vec<_>>())
}

#[test]
fn a_chain_of_known_sizes_peaks_where_computed_by_hand() {
    for forwarding in [true, false] {
        let s = Scope::new();
        let (x, a, b, c) = chain(&s);
        let opts = SessionOptions::default().with_buffer_forwarding(forwarding);
        let sess = Session::new(&s.graph_def(), opts).unwrap();
        let (out, md) = traced(&sess, &[(&x, ramp(1000))], &[&c]);
        let want: Vec<f32> = (0..4)
            .flat_map(|_| (0..1000).map(|i| -(i as f32)))
            .collect();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &want[..]);
        let m = md.step_stats[0].memory;
        if forwarding {
            // a and b live together once; c writes into b's buffer.
            assert_eq!(m.peak_bytes_in_use, 24_000);
            assert_eq!((m.num_allocs, m.total_bytes), (2, 24_000));
            assert_eq!(node_memory(&md, c.op().name()).allocated_bytes, 0);
        } else {
            // b and c live together: a copy of b.
            assert_eq!(m.peak_bytes_in_use, 32_000);
            assert_eq!((m.num_allocs, m.total_bytes), (3, 40_000));
            assert_eq!(node_memory(&md, c.op().name()).allocated_bytes, 16_000);
        }
        assert_eq!(m.largest_alloc_size, 16_000);
        assert_eq!(m.bytes_in_use, 16_000, "the fetched c is still held");
        assert_eq!(md.peak_bytes(CPU0), Some(m.peak_bytes_in_use));
        // Memory over time, node by node.
        let ma = node_memory(&md, a.op().name());
        assert_eq!(
            (ma.allocated_bytes, ma.live_bytes, ma.peak_bytes),
            (8_000, 8_000, 8_000)
        );
        let mb = node_memory(&md, b.op().name());
        assert_eq!(
            (mb.allocated_bytes, mb.live_bytes, mb.peak_bytes),
            (16_000, 16_000, 24_000)
        );
        // The device: the fetched tensor until the client drops it.
        let dev = |sess: &Session| {
            let stats = sess.memory_stats().unwrap();
            assert_eq!(stats.len(), 1);
            assert_eq!(stats[0].0, CPU0);
            stats[0].1
        };
        assert_eq!(dev(&sess).bytes_in_use, 16_000);
        assert!(dev(&sess).peak_bytes_in_use >= m.peak_bytes_in_use);
        drop(out);
        drop(md);
        assert_eq!(dev(&sess).bytes_in_use, 0);
    }
}

#[test]
fn each_device_counts_its_own_partition() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[Some(1000)])).unwrap();
    let s0 = s.with_device("/device:CPU:0");
    let s1 = s.with_device("/device:CPU:1");
    let a = ops::concat_along(&s0, &[x.clone(), x.clone()], 0).unwrap();
    let b = ops::concat_along(&s1, &[a.clone(), a.clone(), a.clone()], 0).unwrap();
    let c = ops::neg(&s1, &b).unwrap();
    let opts = SessionOptions::default().with_cpu_devices(2);
    let sess = Session::new(&s.graph_def(), opts).unwrap();
    let (out, md) = traced(&sess, &[(&x, ramp(1000))], &[&c]);
    assert_eq!(out[0].num_elements(), 6000);
    assert_eq!(md.peak_bytes(CPU0), Some(8_000));
    assert_eq!(md.peak_bytes(CPU1), Some(24_000), "a's buffer is CPU:0's");
    let on = |d: &str| md.memory().find(|(dev, _)| *dev == d).unwrap().1.num_allocs;
    assert_eq!((on(CPU0), on(CPU1)), (1, 1), "c forwards b's buffer");
    drop((out, md));
    for (device, stats) in sess.memory_stats().unwrap() {
        assert_eq!(stats.bytes_in_use, 0, "{device}");
    }
}

#[test]
fn forwarding_never_writes_into_a_buffer_someone_else_reads() {
    let s = Scope::new();
    let (x, a, b, c) = chain(&s);
    // b has a second consumer: neither neg may write into it.
    let d = ops::neg(&s, &b).unwrap();
    // a is fetched and consumed.
    let e = ops::neg(&s, &a).unwrap();
    // A variable's value is read and negated.
    let init = ops::placeholder(&s, DType::F32, Shape::from_dims(&[Some(1000)])).unwrap();
    let v = ops::variable(&s, Shape::from_dims(&[Some(1000)]), DType::F32).unwrap();
    let assign = ops::assign(&s, &v, &init).unwrap();
    let read = ops::identity(&s, &v).unwrap();
    let nv = ops::neg(&s, &read).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run_with(&RunArgs::new().feed(&init, ramp(1000)).target(assign.op()))
        .unwrap();
    let (out, md) = traced(&sess, &[(&x, ramp(1000))], &[&c, &d, &a, &e, &nv, &read]);
    let twice: Vec<f32> = (0..2).flat_map(|_| (0..1000).map(|i| i as f32)).collect();
    let four: Vec<f32> = (0..4)
        .flat_map(|_| (0..1000).map(|i| -(i as f32)))
        .collect();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &four[..]);
    assert_eq!(out[1].as_slice::<f32>().unwrap(), &four[..]);
    assert_eq!(
        out[2].as_slice::<f32>().unwrap(),
        &twice[..],
        "a is unchanged"
    );
    let neg_twice: Vec<f32> = twice.iter().map(|v| -v).collect();
    assert_eq!(out[3].as_slice::<f32>().unwrap(), &neg_twice[..]);
    let neg_ramp: Vec<f32> = (0..1000).map(|i| -(i as f32)).collect();
    assert_eq!(out[4].as_slice::<f32>().unwrap(), &neg_ramp[..]);
    assert_eq!(out[5], ramp(1000), "the variable's value is unchanged");
    let var = sess.run(&[], &[&v.name()], &[]).unwrap();
    assert_eq!(var[0], ramp(1000));
    // Nobody's buffer could be taken over here but one of c and d (b's last
    // reader, in whatever order they ran): every other node allocated.
    assert_eq!(node_memory(&md, e.op().name()).allocated_bytes, 8_000);
    assert_eq!(node_memory(&md, nv.op().name()).allocated_bytes, 4_000);
    let (mc, md_) = (
        node_memory(&md, c.op().name()),
        node_memory(&md, d.op().name()),
    );
    assert_eq!(mc.allocated_bytes + md_.allocated_bytes, 16_000);
}

#[test]
fn a_variable_holds_device_memory_across_steps() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[Some(1000)])).unwrap();
    let v = ops::variable(&s, Shape::from_dims(&[Some(1000)]), DType::F32).unwrap();
    let doubled = ops::add(&s, &x, &x).unwrap();
    let assign = ops::assign(&s, &v, &doubled).unwrap();
    let bump = ops::assign_add(&s, &v, &doubled).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let device = |sess: &Session| sess.memory_stats().unwrap()[0].1;
    // `doubled` (4 000 bytes) becomes the variable's value and stays.
    sess.run_with(&RunArgs::new().feed(&x, ramp(1000)).target(assign.op()))
        .unwrap();
    assert_eq!(device(&sess).bytes_in_use, 4_000);
    // AssignAdd adds a fresh `doubled` into the variable's buffer in place (no
    // reader holds it): 8 000 bytes at the peak, 4 000 after.
    sess.run_with(&RunArgs::new().feed(&x, ramp(1000)).target(bump.op()))
        .unwrap();
    let d = device(&sess);
    assert_eq!(
        (d.bytes_in_use, d.peak_bytes_in_use, d.num_allocs),
        (4_000, 8_000, 2)
    );
    let out = sess.run(&[], &[&v.name()], &[]).unwrap();
    let want: Vec<f32> = (0..1000).map(|i| 4.0 * i as f32).collect();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &want[..]);
    // A reader holding the old value makes the next update copy: the fetched
    // `out` keeps the variable's buffer, so the update writes a new one.
    sess.run_with(&RunArgs::new().feed(&x, ramp(1000)).target(bump.op()))
        .unwrap();
    assert_eq!(
        out[0].as_slice::<f32>().unwrap(),
        &want[..],
        "the fetched value is unchanged"
    );
    assert_eq!(device(&sess).bytes_in_use, 8_000);
    drop(out);
    assert_eq!(device(&sess).bytes_in_use, 4_000);
}

/// A deep MLP (8 ReLU layers of 128 units, batch 2048: each activation 1 MiB,
/// each weight 64 KiB),
/// the loss its mean square output: its input `x`, the weights, the activations
/// and the loss.
fn deep_mlp(s: &Scope) -> (Output, Vec<Output>, Vec<Output>, Output) {
    const BATCH: usize = 2048;
    const WIDTH: usize = 128;
    let x = ops::placeholder(s, DType::F32, Shape::known(&[BATCH, WIDTH])).unwrap();
    let (mut weights, mut acts) = (Vec::new(), Vec::new());
    let mut h = x.clone();
    for l in 0..8 {
        let w = Tensor::build::<f32>([WIDTH, WIDTH], |v| {
            v.iter_mut()
                .enumerate()
                .for_each(|(i, p)| *p = (((i * 7 + l * 13) % 23) as f32 - 11.0) / 200.0)
        });
        let w = ops::constant(s, w).unwrap();
        h = ops::relu(s, &ops::mat_mul(s, &h, &w, false, false).unwrap()).unwrap();
        weights.push(w);
        acts.push(h.clone());
    }
    let loss = ops::mean_axes(s, &ops::square(s, &h).unwrap(), &[0, 1], false).unwrap();
    (x, weights, acts, loss)
}

/// Recomputation (`recomputed_gradients`, gradient checkpointing): keeping every
/// second layer's output and recomputing the others in the backward pass gives
/// the same gradients with a lower peak.
#[test]
fn recomputing_activations_lowers_the_peak_at_equal_gradients() {
    use actorflow::graph::gradients::{gradients, recomputed_gradients};
    let input = Tensor::build::<f32>([2048, 128], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, p)| *p = ((i * 5) % 19) as f32 / 19.0)
    });
    let run = |recompute: bool| {
        let s = Scope::new();
        let (x, weights, acts, loss) = deep_mlp(&s);
        let grads = if recompute {
            let keep: Vec<Output> = acts.iter().skip(1).step_by(2).take(3).cloned().collect();
            recomputed_gradients(&s, &[loss], &weights, &keep, None).unwrap()
        } else {
            gradients(&s, &[loss], &weights, None).unwrap()
        };
        let grads: Vec<Output> = grads.into_iter().map(Option::unwrap).collect();
        let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
        let fetches: Vec<&Output> = grads.iter().collect();
        let (out, md) = traced(&sess, &[(&x, input.clone())], &fetches);
        (out, md.step_stats[0].memory.peak_bytes_in_use)
    };
    let (plain, plain_peak) = run(false);
    let (recomputed, recomputed_peak) = run(true);
    println!("peak: {plain_peak} B kept, {recomputed_peak} B recomputed");
    for (l, (a, b)) in plain.iter().zip(&recomputed).enumerate() {
        let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
        assert!(a.iter().any(|&v| v != 0.0), "layer {l}'s gradient is zero");
        assert_eq!(a, b, "layer {l}'s weight gradient");
    }
    // The kept activations are 8 × 1 MiB without recomputation, 3 checkpoints and
    // one segment's 2 with it (the fetched weight gradients, 8 × 64 KiB, are
    // common to both).
    assert!(
        (recomputed_peak as f64) < 0.85 * plain_peak as f64,
        "peak with recomputation {recomputed_peak} B, without {plain_peak} B"
    );
}

/// What recomputation refuses, with the reason: checkpoints that do not form a
/// chain, one a skip connection goes around, and a random op in a segment.
#[test]
fn recomputation_refuses_segments_it_cannot_recompute() {
    use actorflow::graph::gradients::recomputed_gradients;
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[4])).unwrap();
    let a = ops::tanh(&s, &x).unwrap();
    let b = ops::tanh(&s, &x).unwrap();
    let c = ops::add(&s, &a, &b).unwrap();
    let d = ops::tanh(&s, &c).unwrap();
    let skip = ops::add(&s, &d, &a).unwrap();
    use std::slice::from_ref;
    let err = |ys: &Output, keep: &[Output]| {
        recomputed_gradients(&s, from_ref(ys), from_ref(&x), keep, None)
            .expect_err("an error")
            .to_string()
    };
    let e = err(&c, &[a.clone(), b.clone()]);
    assert!(e.contains("must form a chain"), "{e}");
    let e = err(&skip, from_ref(&c));
    assert!(e.contains("does not separate"), "{e}");
    let shape = ops::constant(&s, Tensor::vector(&[4i32])).unwrap();
    let noise = ops::random_uniform(&s, &shape, DType::F32, 1, 2).unwrap();
    let noisy = ops::mul(&s, &ops::tanh(&s, &c).unwrap(), &noise).unwrap();
    let top = ops::tanh(&s, &noisy).unwrap();
    let e = err(&ops::tanh(&s, &top).unwrap(), &[c.clone(), top.clone()]);
    assert!(e.contains("stateful"), "{e}");
    // and one that separates works
    assert!(recomputed_gradients(&s, from_ref(&d), from_ref(&x), from_ref(&c), None).is_ok());
}

#[test]
fn batch_norm_inference_normalizes_in_place_only_a_buffer_nobody_else_reads() {
    use ops::normalization::FusedBatchNormOpts;
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[Some(1000)])).unwrap();
    let shape = ops::constant(&s, Tensor::vector(&[10i32, 5, 4, 5])).unwrap();
    let vec5 = |v: [f32; 5]| ops::constant(&s, Tensor::vector(&v)).unwrap();
    let (scale, offset) = (
        vec5([1.0, 2.0, 3.0, 0.5, -1.0]),
        vec5([0.5, 0.0, -1.0, 2.0, 0.25]),
    );
    let (mean, var) = (
        vec5([0.0, 1.0, 2.0, -3.0, 10.0]),
        vec5([1.0, 4.0, 9.0, 0.25, 2.0]),
    );
    let opts = FusedBatchNormOpts {
        is_training: false,
        ..Default::default()
    };
    let bn = |t: &Output| {
        ops::normalization::fused_batch_norm(&s, t, &scale, &offset, Some(&mean), Some(&var), &opts)
            .unwrap()
            .y
    };
    // `alone`'s buffer has one reader, the normalization: it is normalized in
    // place. `shared` (the same values, made differently: common subexpression
    // elimination would merge the two) is also fetched: it must stay as it was.
    let alone = ops::reshape(&s, &ops::neg(&s, &x).unwrap(), &shape).unwrap();
    let zero = ops::scalar(&s, 0.0f32).unwrap();
    let shared = ops::reshape(&s, &ops::sub(&s, &zero, &x).unwrap(), &shape).unwrap();
    let (y1, y2) = (bn(&alone), bn(&shared));
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let (out, md) = traced(&sess, &[(&x, ramp(1000))], &[&y1, &y2, &shared]);
    let expected: Vec<f32> = (0..1000)
        .map(|i| {
            let (k, v) = (i % 5, -(i as f32));
            let (sc, of, m, va) = (
                [1.0, 2.0, 3.0, 0.5, -1.0][k],
                [0.5, 0.0, -1.0, 2.0, 0.25][k],
                [0.0f32, 1.0, 2.0, -3.0, 10.0][k],
                [1.0f32, 4.0, 9.0, 0.25, 2.0][k],
            );
            (v - m) * (1.0 / (va + 0.001f32).sqrt() * sc) + of
        })
        .collect();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &expected[..]);
    assert_eq!(out[1].as_slice::<f32>().unwrap(), &expected[..]);
    let neg: Vec<f32> = (0..1000).map(|i| -(i as f32)).collect();
    assert_eq!(
        out[2].as_slice::<f32>().unwrap(),
        &neg[..],
        "the fetched input is unchanged"
    );
    // y: 4 000 bytes when allocated; the four 5-element statistics 80.
    assert_eq!(node_memory(&md, y1.op().name()).allocated_bytes, 80);
    assert_eq!(node_memory(&md, y2.op().name()).allocated_bytes, 4_080);
}
