//! The workloads of the benchmark suite, as the issues define them.

use std::time::Duration;

use crate::graph::builder::{while_loop, WhileOptions};
use crate::ops::{self, QueueOptions};
use crate::{
    ClusterSpec, Connect, DType, Result, Scope, Server, ServerOptions, Session, SessionOptions,
    Shape, Status, Tensor,
};

use super::{calibrate, time_per_call, Workload};

/// One repetition lasts about this long.
pub(super) const REPETITION: Duration = Duration::from_millis(300);

fn session(s: &Scope, devices: usize) -> Result<Session> {
    Session::new(
        &s.graph_def(),
        SessionOptions::default().with_cpu_devices(devices),
    )
}

/// Seconds per run of feeding a scalar placeholder and fetching it through one
/// Identity: the step overhead subtracted from per-node figures.
fn step_overhead(sess: &Session, x: &str, y: &str) -> Result<f64> {
    let run = || {
        sess.run(&[(x, Tensor::scalar(0.0f32))], &[y], &[])
            .map(|_| ())
    };
    let n = calibrate(REPETITION / 4, run)?;
    time_per_call(n, run)
}

fn run_overhead() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let c = ops::scalar(&s, 1.0f32)?;
    let sess = session(&s, 1)?;
    let name = c.name();
    Ok(Box::new(move || {
        let run = || sess.run(&[], &[&name], &[]).map(|_| ());
        let n = calibrate(REPETITION, run)?;
        Ok(time_per_call(n, run)? * 1e6)
    }))
}

const NODES: usize = 20_000;

fn chain() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar())?;
    let id = ops::identity(&s, &x)?;
    let mut y = x.clone();
    for _ in 0..NODES {
        let one = ops::scalar(&s, 1.0f32)?;
        y = ops::add(&s, &y, &one)?;
    }
    let sess = session(&s, 1)?;
    let (xn, yn, idn) = (x.name(), y.name(), id.name());
    Ok(Box::new(move || {
        let overhead = step_overhead(&sess, &xn, &idn)?;
        let run = || {
            sess.run(&[(&xn, Tensor::scalar(0.0f32))], &[&yn], &[])
                .map(|_| ())
        };
        let n = calibrate(REPETITION, run)?;
        Ok((time_per_call(n, run)? - overhead) * 1e9 / NODES as f64)
    }))
}

fn wide() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar())?;
    let id = ops::identity(&s, &x)?;
    let mut outs = Vec::with_capacity(NODES);
    for i in 0..NODES {
        let c = ops::scalar(&s, i as f32)?;
        outs.push(ops::add(&s, &x, &c)?);
    }
    let refs: Vec<&crate::Operation> = outs.iter().map(|o| o.op()).collect();
    let group = ops::group(&s, &refs)?;
    let sess = session(&s, 1)?;
    let (xn, idn, gn) = (x.name(), id.name(), group.name().to_owned());
    Ok(Box::new(move || {
        let overhead = step_overhead(&sess, &xn, &idn)?;
        let run = || {
            sess.run(&[(&xn, Tensor::scalar(0.0f32))], &[], &[&gn])
                .map(|_| ())
        };
        let n = calibrate(REPETITION, run)?;
        Ok((time_per_call(n, run)? - overhead) * 1e9 / NODES as f64)
    }))
}

const SENDRECV_NODES: usize = 5_000;

fn sendrecv_chain() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let x = ops::placeholder(&s.with_device("/device:CPU:0"), DType::F32, Shape::scalar())?;
    let mut y = x.clone();
    for i in 0..SENDRECV_NODES {
        let d = s.with_device(&format!("/device:CPU:{}", (i + 1) % 2));
        let one = ops::scalar(&d, 1.0f32)?;
        y = ops::add(&d, &y, &one)?;
    }
    let sess = session(&s, 2)?;
    let (xn, yn) = (x.name(), y.name());
    Ok(Box::new(move || {
        let run = || {
            sess.run(&[(&xn, Tensor::scalar(0.0f32))], &[&yn], &[])
                .map(|_| ())
        };
        let n = calibrate(REPETITION, run)?;
        Ok(time_per_call(n, run)? * 1e9 / SENDRECV_NODES as f64)
    }))
}

const LOOP_ITERATIONS: i32 = 100_000;

fn while_loop_iterations() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar())?;
    let i0 = ops::scalar(&s, 0i32)?;
    let a0 = ops::scalar(&s, 0.0f32)?;
    let outs = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                ops::add(b, &v[1], &ops::scalar(b, 1.0f32)?)?,
            ])
        },
        &[i0, a0],
        &WhileOptions::default(),
    )?;
    let sess = session(&s, 1)?;
    let (nn, on) = (n.name(), outs[1].name());
    Ok(Box::new(move || {
        let run = || {
            sess.run(&[(&nn, Tensor::scalar(LOOP_ITERATIONS))], &[&on], &[])
                .map(|_| ())
        };
        let reps = calibrate(REPETITION, run)?;
        Ok(time_per_call(reps, run)? * 1e9 / LOOP_ITERATIONS as f64)
    }))
}

fn matmul() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    const N: usize = 1024;
    let s = Scope::new();
    let init = |seed: f32| {
        Tensor::build::<f32>([N, N], |v| {
            v.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = ((i % 17) as f32 - 8.0) * seed)
        })
    };
    let a = ops::Variable::new(&s, "a", &ops::constant(&s, init(0.01))?, false)?;
    let b = ops::Variable::new(&s, "b", &ops::constant(&s, init(0.02))?, false)?;
    let p = ops::mat_mul(&s, &a.value, &b.value, false, false)?;
    let total = ops::sum(
        &s,
        &p,
        &ops::constant(&s, Tensor::vector(&[0i32, 1]))?,
        false,
    )?;
    let sess = session(&s, 1)?;
    sess.run(&[], &[], &[a.initializer.name(), b.initializer.name()])?;
    let tn = total.name();
    Ok(Box::new(move || {
        let run = || sess.run(&[], &[&tn], &[]).map(|_| ());
        let reps = calibrate(REPETITION, run)?;
        let t = time_per_call(reps, run)?;
        Ok(2.0 * (N * N * N) as f64 / t / 1e9)
    }))
}

/// `branches_speedup`'s graph: this many independent chains …
const BRANCHES: usize = 4;
/// … of this many products of 512×512 `f32` matrices each.
const BRANCH_DEPTH: usize = 4;

/// `branches_speedup`: a step of [`BRANCHES`] independent chains of 512×512
/// matrix products (Inception-style branches), timed in a session with one
/// inter-op and one intra-op thread and in one with the defaults (every core);
/// the figure is the first time over the second.
fn branches() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    const N: usize = 512;
    let s = Scope::new();
    let mut ends = Vec::with_capacity(BRANCHES);
    for b in 0..BRANCHES {
        // Entries of ±0.5/√N keep every product's values near the input's.
        let w = Tensor::build::<f32>([N, N], |v| {
            v.iter_mut().enumerate().for_each(|(i, x)| {
                *x = (((i * 7 + b * 13) % 11) as f32 - 5.0) * 0.1 / (N as f32).sqrt()
            })
        });
        let w = ops::constant(&s, w)?;
        let mut x = ops::constant(&s, Tensor::build::<f32>([N, N], |v| v.fill(1.0)))?;
        for _ in 0..BRANCH_DEPTH {
            x = ops::mat_mul(&s, &x, &w, false, false)?;
        }
        ends.push(x);
    }
    let group = ops::group(&s, &ends.iter().map(|e| e.op()).collect::<Vec<_>>())?;
    let g = s.graph_def();
    let serial = Session::new(
        &g,
        SessionOptions::default()
            .with_inter_op_parallelism_threads(1)
            .with_intra_op_parallelism_threads(1),
    )?;
    let parallel = Session::new(&g, SessionOptions::default())?;
    let target = group.name().to_owned();
    Ok(Box::new(move || {
        let time = |sess: &Session| -> Result<f64> {
            let run = || sess.run(&[], &[], &[&target]).map(|_| ());
            let reps = calibrate(REPETITION / 2, run)?;
            time_per_call(reps, run)
        };
        Ok(time(&serial)? / time(&parallel)?)
    }))
}

/// Elements per `enqueue_many` of `fifo_ns_per_elem_batched`.
const FIFO_ENQUEUE: usize = 1000;
/// Elements per `dequeue_many` of `fifo_ns_per_elem_batched`: batches that do not
/// line up with the enqueued ones, so every dequeue gathers rows.
const FIFO_DEQUEUE: usize = 128;

/// `fifo_ns_per_elem_batched`: each call enqueues 1 000 scalars at once and
/// dequeues 128 at a time while 128 are there (the rest waits for the next call),
/// so batches never line up; the figure is per element through the queue.
fn fifo_batched() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let q = ops::fifo_queue(
        &s,
        &[DType::F32],
        &QueueOptions {
            shapes: vec![Shape::scalar()],
            ..Default::default()
        },
    )?;
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[FIFO_ENQUEUE]))?;
    let enq = ops::queue_enqueue_many(&s, &q, std::slice::from_ref(&x))?;
    let n = ops::scalar(&s, FIFO_DEQUEUE as i32)?;
    let deq = ops::queue_dequeue_many(&s, &q, &n, &[DType::F32])?.remove(0);
    let sess = session(&s, 1)?;
    let data = Tensor::build::<f32>([FIFO_ENQUEUE], |v| {
        v.iter_mut().enumerate().for_each(|(i, x)| *x = i as f32)
    });
    let (xn, en, dn) = (x.name(), enq.name().to_owned(), deq.name());
    let queued = std::cell::Cell::new(0usize);
    Ok(Box::new(move || {
        let run = || {
            sess.run(&[(&xn, data.clone())], &[], &[&en])?;
            let mut left = queued.get() + FIFO_ENQUEUE;
            while left >= FIFO_DEQUEUE {
                sess.run(&[], &[&dn], &[])?;
                left -= FIFO_DEQUEUE;
            }
            queued.set(left);
            Ok(())
        };
        let reps = calibrate(REPETITION, run)?;
        Ok(time_per_call(reps, run)? * 1e9 / FIFO_ENQUEUE as f64)
    }))
}

fn fifo_roundtrip() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let q = ops::fifo_queue(
        &s,
        &[DType::F32],
        &QueueOptions {
            shapes: vec![Shape::scalar()],
            ..Default::default()
        },
    )?;
    let x = ops::placeholder(&s, DType::F32, Shape::scalar())?;
    let enq = ops::queue_enqueue(&s, &q, std::slice::from_ref(&x))?;
    let deq = ops::queue_dequeue(&s, &q, &[DType::F32])?.remove(0);
    let sess = session(&s, 1)?;
    let (xn, en, dn) = (x.name(), enq.name().to_owned(), deq.name());
    Ok(Box::new(move || {
        let run = || {
            sess.run(&[(&xn, Tensor::scalar(1.0f32))], &[], &[&en])?;
            sess.run(&[], &[&dn], &[]).map(|_| ())
        };
        let reps = calibrate(REPETITION, run)?;
        Ok(time_per_call(reps, run)? * 1e6)
    }))
}

/// Batch, input, hidden and class sizes of [`mlp_step`].
const MLP_BATCH: usize = 64;
const MLP_INPUT: usize = 784;
const MLP_HIDDEN: usize = 256;
const MLP_CLASSES: usize = 10;

/// The MLP 784→256 (ReLU)→10 of [`mlp_step`] in `s`: its inputs, its mean
/// sparse softmax cross-entropy, and its fixed batch.
struct Mlp {
    x: crate::Output,
    y: crate::Output,
    loss: crate::Output,
    images: Tensor,
    labels: Tensor,
}

fn mlp(s: &Scope) -> Result<Mlp> {
    let x = ops::placeholder(s, DType::F32, Shape::known(&[MLP_BATCH, MLP_INPUT]))?;
    let y = ops::placeholder(s, DType::I32, Shape::known(&[MLP_BATCH]))?;
    let weights = |name: &str, rows: usize, cols: usize, seed: i64| -> Result<ops::Variable> {
        let dims = ops::constant(s, Tensor::vector(&[rows as i32, cols as i32]))?;
        let scale = ops::scalar(s, (1.0 / rows as f64).sqrt() as f32)?;
        let init = ops::mul(
            s,
            &ops::truncated_normal(s, &dims, DType::F32, seed, 0)?,
            &scale,
        )?;
        ops::Variable::new(s, name, &init, true)
    };
    let bias = |name: &str, n: usize| -> Result<ops::Variable> {
        ops::Variable::new(
            s,
            name,
            &ops::constant(s, Tensor::zeros(DType::F32, vec![n]))?,
            true,
        )
    };
    let (w1, b1) = (
        weights("w1", MLP_INPUT, MLP_HIDDEN, 1)?,
        bias("b1", MLP_HIDDEN)?,
    );
    let (w2, b2) = (
        weights("w2", MLP_HIDDEN, MLP_CLASSES, 2)?,
        bias("b2", MLP_CLASSES)?,
    );
    let h = ops::mat_mul(s, &x, &w1.value, false, false)?;
    let h = ops::relu(s, &ops::bias_add(s, &h, &b1.value, "NHWC")?)?;
    let logits = ops::bias_add(
        s,
        &ops::mat_mul(s, &h, &w2.value, false, false)?,
        &b2.value,
        "NHWC",
    )?;
    let (xent, _) = ops::sparse_softmax_cross_entropy_with_logits(s, &logits, &y)?;
    let loss = ops::mean_axes(s, &xent, &[0], false)?;
    let images = Tensor::build::<f32>([MLP_BATCH, MLP_INPUT], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, p)| *p = ((i * 7) % 17) as f32 / 16.0)
    });
    let labels = Tensor::build::<i32>([MLP_BATCH], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, l)| *l = (i % MLP_CLASSES) as i32)
    });
    Ok(Mlp {
        x,
        y,
        loss,
        images,
        labels,
    })
}

/// One SGD step of an MLP 784→256 (ReLU)→10 with sparse softmax cross-entropy,
/// batch 64, f32, on one CPU device: feeds `x` and `y`, runs the train op.
fn mlp_step() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    use crate::train::{GradientDescentOptimizer, Optimizer};
    let s = Scope::new();
    let m = mlp(&s)?;
    let train = GradientDescentOptimizer::new(0.01).minimize(&s, &m.loss, None, None)?;
    timed_training(&s, m, train.name(), 1e6)
}

/// Initializes `s`'s variables in a one-device session, then times runs of
/// `train` fed `m`'s images and labels: seconds per step × `unit`.
fn timed_training(
    s: &Scope,
    m: Mlp,
    train: &str,
    unit: f64,
) -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let init = crate::train::global_variables_initializer(s)?;
    let sess = session(s, 1)?;
    sess.run(&[], &[], &[init.name()])?;
    let (xn, yn, tn) = (m.x.name(), m.y.name(), train.to_owned());
    let (images, labels) = (m.images, m.labels);
    Ok(Box::new(move || {
        let run = || {
            sess.run(&[(&xn, images.clone()), (&yn, labels.clone())], &[], &[&tn])
                .map(|_| ())
        };
        let reps = calibrate(REPETITION, run)?;
        Ok(time_per_call(reps, run)? * unit)
    }))
}

const LSTM_UNITS: usize = 256;
const LSTM_STEPS: usize = 32;
const LSTM_BATCH: usize = 32;
const LSTM_INPUT: usize = 128;

/// One SGD step of a `dynamic_rnn` LSTM (256 units, 32 steps, batch 32, input
/// 128; the loss the mean squared output): forward and backward through the
/// while loop and its TensorArrays, in ms.
fn lstm_step() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    use crate::graph::ops::rnn::{dynamic_rnn, LstmCell, RnnOptions};
    use crate::train::{GradientDescentOptimizer, Optimizer};
    let s = Scope::new();
    let x = ops::placeholder(
        &s,
        DType::F32,
        Shape::known(&[LSTM_BATCH, LSTM_STEPS, LSTM_INPUT]),
    )?;
    let cell = LstmCell::new(&s, LSTM_INPUT, LSTM_UNITS, DType::F32, 1)?;
    let (out, _) = dynamic_rnn(&s, &cell, &x, DType::F32, &RnnOptions::default())?;
    let loss = ops::mean_axes(&s, &ops::square(&s, &out)?, &[0, 1, 2], false)?;
    let train = GradientDescentOptimizer::new(0.01).minimize(&s, &loss, None, None)?;
    let init = crate::train::global_variables_initializer(&s)?;
    let sess = session(&s, 1)?;
    sess.run(&[], &[], &[init.name()])?;
    let inputs = Tensor::build::<f32>([LSTM_BATCH, LSTM_STEPS, LSTM_INPUT], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, p)| *p = ((i * 7) % 17) as f32 / 16.0 - 0.5)
    });
    let (xn, tn) = (x.name(), train.name().to_owned());
    Ok(Box::new(move || {
        let run = || sess.run(&[(&xn, inputs.clone())], &[], &[&tn]).map(|_| ());
        let reps = calibrate(REPETITION, run)?;
        Ok(time_per_call(reps, run)? * 1e3)
    }))
}

/// The classic MNIST convnet's layers, sized by `net`: conv 5×5×1→`c1` + bias +
/// ReLU, 2×2 max pool, conv 5×5×`c1`→`c2` + bias + ReLU, 2×2 max pool, then a
/// `hidden`-unit dense ReLU layer if any, a dense layer to 10 logits, and the mean
/// sparse softmax cross-entropy; weights from seeded `TruncatedNormal`s scaled by
/// sqrt(1/fan_in), biases zero.
#[derive(Clone, Copy)]
struct ConvNet {
    batch: usize,
    c1: usize,
    c2: usize,
    hidden: Option<usize>,
}

/// `convnet_peak_bytes`'s model: 16 and 32 filters, no hidden layer, batch 16.
const SMALL_CONVNET: ConvNet = ConvNet {
    batch: 16,
    c1: 16,
    c2: 32,
    hidden: None,
};

/// `conv_mnist_step_ms`'s model, "Deep MNIST": 32 and 64 filters, a 1024-unit
/// hidden layer, batch 64.
const DEEP_MNIST: ConvNet = ConvNet {
    batch: 64,
    c1: 32,
    c2: 64,
    hidden: Some(1024),
};

fn convnet(s: &Scope) -> Result<Mlp> {
    convnet_of(s, SMALL_CONVNET)
}

fn convnet_of(s: &Scope, net: ConvNet) -> Result<Mlp> {
    let ConvNet {
        batch,
        c1,
        c2,
        hidden,
    } = net;
    let x = ops::placeholder(s, DType::F32, Shape::known(&[batch, 28, 28, 1]))?;
    let y = ops::placeholder(s, DType::I32, Shape::known(&[batch]))?;
    let weights = |name: &str, dims: &[usize], seed: i64| -> Result<ops::Variable> {
        let fan_in: usize = dims[..dims.len() - 1].iter().product();
        let dims: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
        let shape = ops::constant(s, Tensor::vector(&dims))?;
        let scale = ops::scalar(s, (1.0 / fan_in as f64).sqrt() as f32)?;
        let init = ops::mul(
            s,
            &ops::truncated_normal(s, &shape, DType::F32, seed, 0)?,
            &scale,
        )?;
        ops::Variable::new(s, name, &init, true)
    };
    let zeros = |name: &str, n: usize| -> Result<ops::Variable> {
        let init = ops::constant(s, Tensor::zeros(DType::F32, vec![n]))?;
        ops::Variable::new(s, name, &init, true)
    };
    let conv = ops::ConvOptions::new(&[1, 1, 1, 1], "SAME");
    let pool =
        |t: &crate::Output| ops::max_pool(s, t, &[1, 2, 2, 1], &[1, 2, 2, 1], "SAME", "NHWC");
    let (k1, b1) = (weights("k1", &[5, 5, 1, c1], 1)?, zeros("cb1", c1)?);
    let (k2, b2) = (weights("k2", &[5, 5, c1, c2], 2)?, zeros("cb2", c2)?);
    let h = ops::bias_add(s, &ops::conv2d(s, &x, &k1.value, &conv)?, &b1.value, "NHWC")?;
    let h = pool(&ops::relu(s, &h)?)?;
    let h = ops::bias_add(s, &ops::conv2d(s, &h, &k2.value, &conv)?, &b2.value, "NHWC")?;
    let h = pool(&ops::relu(s, &h)?)?;
    let flat = 7 * 7 * c2;
    let mut h = ops::reshape(
        s,
        &h,
        &ops::constant(s, Tensor::vector(&[batch as i32, flat as i32]))?,
    )?;
    let mut width = flat;
    if let Some(units) = hidden {
        let (w, b) = (weights("fc1", &[flat, units], 3)?, zeros("fb1", units)?);
        let z = ops::bias_add(
            s,
            &ops::mat_mul(s, &h, &w.value, false, false)?,
            &b.value,
            "NHWC",
        )?;
        h = ops::relu(s, &z)?;
        width = units;
    }
    let w = weights("w", &[width, 10], 4)?;
    let logits = ops::mat_mul(s, &h, &w.value, false, false)?;
    let (xent, _) = ops::sparse_softmax_cross_entropy_with_logits(s, &logits, &y)?;
    let loss = ops::mean_axes(s, &xent, &[0], false)?;
    let images = Tensor::build::<f32>([batch, 28, 28, 1], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, p)| *p = ((i * 7) % 17) as f32 / 16.0)
    });
    let labels = Tensor::build::<i32>([batch], |v| {
        v.iter_mut()
            .enumerate()
            .for_each(|(i, l)| *l = (i % 10) as i32)
    });
    Ok(Mlp {
        x,
        y,
        loss,
        images,
        labels,
    })
}

/// One Adam step (TensorFlow's defaults, learning rate 1e-4) of the Deep-MNIST
/// convnet ([`DEEP_MNIST`]) on batch 64, in ms.
fn conv_mnist_step() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    use crate::train::{AdamOptimizer, Optimizer};
    let s = Scope::new();
    let m = convnet_of(&s, DEEP_MNIST)?;
    let train = AdamOptimizer::new(1e-4).minimize(&s, &m.loss, None, None)?;
    timed_training(&s, m, train.name(), 1e3)
}

/// The frozen Keras MobileNetV2 (alpha 0.35, 96×96×3, 10 classes) that
/// `kernels/tests/fixtures/gen_mobilenet.py` exported: input `input:0`,
/// probabilities `Identity:0`.
pub const MOBILENET_GRAPH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/kernels/tests/fixtures/mobilenet_graph.pb"
);

/// The MobileNetV2 fixture's input batch, as `gen_mobilenet.py` computes it:
/// element `i` of the flattened batch, in image `b`, is `(2u - 1)(0.3 + 0.1b) +
/// 0.15(b - 3.5)` in f64 rounded to f32, where `u = ((i · 2654435761) mod 2³²) /
/// 2³²`.
pub fn mobilenet_images(batch: usize) -> Tensor {
    const N: usize = 96 * 96 * 3;
    Tensor::build::<f32>([batch, 96, 96, 3], |v| {
        v.iter_mut().enumerate().for_each(|(i, p)| {
            let u = ((i as u64).wrapping_mul(2_654_435_761) % (1 << 32)) as f64 / 4_294_967_296.0;
            let b = (i / N) as f64;
            *p = ((u * 2.0 - 1.0) * (0.3 + 0.1 * b) + 0.15 * (b - 3.5)) as f32;
        })
    })
}

/// Inference of the frozen MobileNetV2 ([`MOBILENET_GRAPH`]) on a batch of 8, in
/// ms: feeds the images, fetches the probabilities.
fn mobilenet_infer() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    use crate::graph::import::{load_graph_def, ImportOptions};
    let graph = load_graph_def(
        std::path::Path::new(MOBILENET_GRAPH),
        &ImportOptions::default(),
    )?;
    let sess = Session::new(&graph, SessionOptions::default())?;
    let images = mobilenet_images(8);
    Ok(Box::new(move || {
        let run = || {
            sess.run(&[("input:0", images.clone())], &["Identity:0"], &[])
                .map(|_| ())
        };
        let reps = calibrate(REPETITION, run)?;
        Ok(time_per_call(reps, run)? * 1e3)
    }))
}

/// What a memory figure reports of one training step.
#[derive(Clone, Copy)]
enum StepMemory {
    /// The step's peak tensor bytes.
    Peak,
    /// The tensor buffers it allocated.
    Allocations,
}

/// One SGD step of `model` traced, with or without buffer forwarding: its peak
/// bytes or its allocation count (each step's, on the one CPU device; the same
/// every step, so a repetition is one step).
fn step_memory(
    model: fn(&Scope) -> Result<Mlp>,
    forwarding: bool,
    what: StepMemory,
) -> Result<Box<dyn FnMut() -> Result<f64>>> {
    use crate::train::{GradientDescentOptimizer, Optimizer};
    use crate::{RunArgs, RunOptions, TraceLevel};
    let s = Scope::new();
    let m = model(&s)?;
    let train = GradientDescentOptimizer::new(0.01).minimize(&s, &m.loss, None, None)?;
    let init = crate::train::global_variables_initializer(&s)?;
    let opts = SessionOptions::default().with_buffer_forwarding(forwarding);
    let sess = Session::new(&s.graph_def(), opts)?;
    sess.run(&[], &[], &[init.name()])?;
    let args = RunArgs::new()
        .feed(&m.x, m.images)
        .feed(&m.y, m.labels)
        .target(train.name())
        .options(RunOptions::default().with_trace_level(TraceLevel::FullTrace));
    Ok(Box::new(move || {
        let md = sess
            .run_with(&args)?
            .metadata
            .ok_or_else(|| Status::internal("a traced step returned no metadata"))?;
        Ok(match what {
            StepMemory::Peak => md.memory().map(|(_, m)| m.peak_bytes_in_use).sum::<usize>() as f64,
            StepMemory::Allocations => md.memory().map(|(_, m)| m.num_allocs).sum::<u64>() as f64,
        })
    }))
}

/// A `/proc/self/status` figure in bytes (`VmRSS`, `VmHWM`), `None` off Linux.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// What a compile figure reports.
#[derive(Clone, Copy)]
enum CompileFigure {
    /// Microseconds of `Session::new` + the first run, per node.
    Micros,
    /// The process's peak resident bytes during them, above its resident bytes
    /// before, per node.
    Bytes,
}

/// A chain of `n` scalar `AddV2` nodes (`y = y + one`, one shared constant)
/// built in-process, then compiled and run once by a fresh session: the cost of
/// step compilation (import, prune, place, partition, plan) per node. Memory is
/// the peak RSS (`VmHWM`, reset through `/proc/self/clear_refs`) over the RSS
/// before `Session::new` in the process's first compile (the warm-up; later
/// compiles reuse the heap it grew); `NaN` where `/proc` cannot be read or reset.
fn compile_chain(n: usize, what: CompileFigure) -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar())?;
    let one = ops::scalar(&s, 1.0f32)?;
    let mut y = x.clone();
    for _ in 0..n {
        y = ops::add(&s, &y, &one)?;
    }
    let def = s.graph_def();
    drop(s);
    let (xn, yn) = (x.name(), y.name());
    // The first compile's memory: later ones reuse the heap the first grew.
    let mut first_bytes: Option<f64> = None;
    Ok(Box::new(move || {
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let before = proc_status_bytes("VmRSS");
        let t = std::time::Instant::now();
        let sess = Session::new(&def, SessionOptions::default())?;
        let out = sess.run(&[(&xn, Tensor::scalar(0.0f32))], &[&yn], &[])?;
        let elapsed = t.elapsed();
        let peak = proc_status_bytes("VmHWM");
        if out[0].scalar_value::<f32>()? != n as f32 {
            return Err(Status::internal("the chain computed a wrong sum"));
        }
        drop(sess);
        let bytes = match (before, peak) {
            (Some(b), Some(p)) if reset => p.saturating_sub(b) as f64 / n as f64,
            _ => f64::NAN,
        };
        Ok(match what {
            CompileFigure::Micros => elapsed.as_secs_f64() * 1e6 / n as f64,
            CompileFigure::Bytes => *first_bytes.get_or_insert(bytes),
        })
    }))
}

/// Global steps a `dist_mlp_sync_step_us` repetition times.
const SYNC_STEPS: u64 = 100;

/// The threads and servers of [`dist_mlp_sync`]: dropped, it stops the threads
/// (their runs end within their timeout, or at once when the servers stop).
struct SyncCluster {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    servers: Vec<Server>,
}

impl Drop for SyncCluster {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in &mut self.servers {
            s.stop();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Microseconds per global step of synchronous data-parallel SGD across
/// processes' worth of servers (the issue's `dist_mlp_sync_step_us`): the
/// [`mlp_step`] model with its variables on a `ps` task and two `worker` replicas
/// (between-graph: each worker's own graph, built under `replica_device_setter`,
/// and its own client thread and session on its task's master), aggregated by
/// `SyncReplicasOptimizer`; the chief's sync op runs in a loop of its own, as
/// TensorFlow's chief queue runner does.
fn dist_mlp_sync() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    use crate::train::{
        with_replica_device_setter, GradientDescentOptimizer, Optimizer, ReplicaDeviceSetter,
        SyncReplicasOptimizer,
    };
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let io = |e: std::io::Error| Status::unavailable(format!("bench cluster: {e}"));
    let listeners = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").map_err(io))
        .collect::<Result<Vec<_>>>()?;
    let addrs = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()).map_err(io))
        .collect::<Result<Vec<_>>>()?;
    let spec = ClusterSpec::new()
        .with_job("ps", &addrs[..1])?
        .with_job("worker", &addrs[1..])?;
    let servers = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let (job, task) = if i == 0 {
                ("ps", 0)
            } else {
                ("worker", i as u32 - 1)
            };
            Server::start_with_listener(ServerOptions::new(spec.clone(), job, task), l)
        })
        .collect::<Result<Vec<_>>>()?;
    let stop = Arc::new(AtomicBool::new(false));
    let syncs = Arc::new(AtomicU64::new(0));
    let bounded = crate::RunOptions::default().with_timeout(Duration::from_secs(2));
    let mut threads = Vec::new();
    for task in 0..2u32 {
        let root = Scope::new();
        let s = with_replica_device_setter(
            &root,
            &ReplicaDeviceSetter {
                ps_tasks: 1,
                worker_device: format!("/job:worker/task:{task}"),
                ..Default::default()
            },
        )?;
        let step = crate::train::get_or_create_global_step(&s)?;
        let m = mlp(&s)?;
        let opt = SyncReplicasOptimizer::new(GradientDescentOptimizer::new(0.01), 2, Some(2));
        let train = opt.minimize(&s, &m.loss, Some(&step), None)?;
        let inits = if task == 0 {
            vec![
                crate::train::global_variables_initializer(&s)?
                    .name()
                    .to_owned(),
                opt.chief_init_op()?.name().to_owned(),
                opt.get_init_tokens_op(-1)?.name().to_owned(),
            ]
        } else {
            vec![opt.local_step_init_op()?.name().to_owned()]
        };
        let sess = Session::connect(
            &servers[1 + task as usize].target(),
            &root.graph_def(),
            SessionOptions::default(),
        )?;
        for init in &inits {
            sess.run(&[], &[], &[init])?;
        }
        if task == 0 {
            let sync_op = opt
                .chief_queue_runner()?
                .enqueue_ops
                .first()
                .cloned()
                .ok_or_else(|| Status::internal("no sync op"))?;
            let (sess, stop, syncs, opts) = (
                sess.clone(),
                Arc::clone(&stop),
                Arc::clone(&syncs),
                bounded.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let sync = crate::RunArgs::new().target(&sync_op).options(opts);
                while !stop.load(Ordering::SeqCst) {
                    if sess.run_with(&sync).is_ok() {
                        syncs.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
        let step = crate::RunArgs::new()
            .feed(&m.x, m.images)
            .feed(&m.y, m.labels)
            .target(train)
            .options(bounded.clone());
        let stop = Arc::clone(&stop);
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let _ = sess.run_with(&step);
            }
        }));
    }
    let cluster = SyncCluster {
        stop,
        threads,
        servers,
    };
    Ok(Box::new(move || {
        let _cluster = &cluster;
        let (c0, t0) = (syncs.load(Ordering::SeqCst), std::time::Instant::now());
        while syncs.load(Ordering::SeqCst) < c0 + SYNC_STEPS {
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(Status::deadline_exceeded(
                    "dist_mlp_sync_step_us: the replicas made no progress",
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let done = syncs.load(Ordering::SeqCst) - c0;
        Ok(t0.elapsed().as_secs_f64() * 1e6 / done as f64)
    }))
}

/// Every workload, in report order.
pub fn all() -> Vec<Workload> {
    vec![
        Workload {
            name: "run_overhead_us",
            unit: "µs/run",
            description: "a run fetching one Const",
            setup: run_overhead,
        },
        Workload {
            name: "chain_ns_per_node",
            unit: "ns/node",
            description: "20 000 dependent scalar AddV2, step overhead subtracted",
            setup: chain,
        },
        Workload {
            name: "wide_ns_per_node",
            unit: "ns/node",
            description: "20 000 independent x + c_i grouped by a NoOp, step overhead subtracted",
            setup: wide,
        },
        Workload {
            name: "sendrecv_chain_ns_per_node",
            unit: "ns/node",
            description: "5 000 scalar AddV2 alternating between two CPU devices",
            setup: sendrecv_chain,
        },
        Workload {
            name: "while_ns_per_iter",
            unit: "ns/iter",
            description: "while_loop(i < n, (i + 1, a + 1.0)), n = 100 000",
            setup: while_loop_iterations,
        },
        Workload {
            name: "matmul1024_gflops",
            unit: "GFLOP/s",
            description: "Sum(MatMul(a, b)) of two 1024x1024 f32 variables",
            setup: matmul,
        },
        Workload {
            name: "branches_speedup",
            unit: "×",
            description: "4 independent chains of 4 512x512 f32 MatMuls in one step: time on \
                1 inter-op and 1 intra-op thread / time on every core",
            setup: branches,
        },
        Workload {
            name: "fifo_ns_per_elem_batched",
            unit: "ns/elem",
            description: "f32 scalars through a FIFOQueue in misaligned batches: \
                enqueue_many of 1 000, dequeue_many of 128",
            setup: fifo_batched,
        },
        Workload {
            name: "fifo_us_per_single_roundtrip",
            unit: "µs",
            description: "one enqueue run and one dequeue run of a scalar",
            setup: fifo_roundtrip,
        },
        Workload {
            name: "mlp_step_us",
            unit: "µs/step",
            description: "SGD step of an MLP 784-256(ReLU)-10, softmax xent, batch 64",
            setup: mlp_step,
        },
        Workload {
            name: "mlp_step_us_grappler",
            unit: "µs/step",
            description: "mlp_step_us's step again, to compare with TensorFlow's step under \
                its default graph optimizations (grappler on: remapper fusions, folding)",
            setup: mlp_step,
        },
        Workload {
            name: "lstm_step_ms",
            unit: "ms/step",
            description: "SGD step of a dynamic_rnn LSTM, 256 units, 32 steps, batch 32, input 128",
            setup: lstm_step,
        },
        Workload {
            name: "conv_mnist_step_ms",
            unit: "ms/step",
            description: "Adam step of the Deep-MNIST convnet (conv5x5x32-pool-conv5x5x64-pool-\
                fc1024-fc10), 28x28x1, batch 64",
            setup: conv_mnist_step,
        },
        Workload {
            name: "mobilenet_infer_ms",
            unit: "ms/batch",
            description: "frozen Keras MobileNetV2 (alpha 0.35, 96x96x3, random weights), batch 8",
            setup: mobilenet_infer,
        },
        Workload {
            name: "compile_us_per_node_10k",
            unit: "µs/node",
            description: "Session::new + first run of a chain of 10 000 scalar AddV2, per node",
            setup: || compile_chain(10_000, CompileFigure::Micros),
        },
        Workload {
            name: "compile_bytes_per_node_10k",
            unit: "B/node",
            description: "peak RSS growth during compile_us_per_node_10k, per node",
            setup: || compile_chain(10_000, CompileFigure::Bytes),
        },
        Workload {
            name: "compile_us_per_node_100k",
            unit: "µs/node",
            description: "Session::new + first run of a chain of 100 000 scalar AddV2, per node",
            setup: || compile_chain(100_000, CompileFigure::Micros),
        },
        Workload {
            name: "compile_bytes_per_node_100k",
            unit: "B/node",
            description: "peak RSS growth during compile_us_per_node_100k, per node",
            setup: || compile_chain(100_000, CompileFigure::Bytes),
        },
        Workload {
            name: "compile_us_per_node_1m",
            unit: "µs/node",
            description: "Session::new + first run of a chain of 1 000 000 scalar AddV2, per node",
            setup: || compile_chain(1_000_000, CompileFigure::Micros),
        },
        Workload {
            name: "compile_bytes_per_node_1m",
            unit: "B/node",
            description: "peak RSS growth during compile_us_per_node_1m, per node",
            setup: || compile_chain(1_000_000, CompileFigure::Bytes),
        },
        Workload {
            name: "mlp_peak_bytes",
            unit: "bytes",
            description: "mlp_step_us's step: its peak tensor bytes (buffer forwarding on)",
            setup: || step_memory(mlp, true, StepMemory::Peak),
        },
        Workload {
            name: "mlp_peak_bytes_unforwarded",
            unit: "bytes",
            description: "mlp_peak_bytes with buffer forwarding off",
            setup: || step_memory(mlp, false, StepMemory::Peak),
        },
        Workload {
            name: "mlp_allocs_per_step",
            unit: "allocs",
            description: "mlp_step_us's step: tensor buffers allocated (buffer forwarding on)",
            setup: || step_memory(mlp, true, StepMemory::Allocations),
        },
        Workload {
            name: "mlp_allocs_per_step_unforwarded",
            unit: "allocs",
            description: "mlp_allocs_per_step with buffer forwarding off",
            setup: || step_memory(mlp, false, StepMemory::Allocations),
        },
        Workload {
            name: "convnet_peak_bytes",
            unit: "bytes",
            description: "SGD step of a convnet (conv5x5x16-pool-conv5x5x32-pool-dense10, \
                28x28x1, batch 16): its peak tensor bytes (buffer forwarding on)",
            setup: || step_memory(convnet, true, StepMemory::Peak),
        },
        Workload {
            name: "convnet_peak_bytes_unforwarded",
            unit: "bytes",
            description: "convnet_peak_bytes with buffer forwarding off",
            setup: || step_memory(convnet, false, StepMemory::Peak),
        },
        Workload {
            name: "convnet_allocs_per_step",
            unit: "allocs",
            description: "convnet_peak_bytes's step: tensor buffers allocated (forwarding on)",
            setup: || step_memory(convnet, true, StepMemory::Allocations),
        },
        Workload {
            name: "convnet_allocs_per_step_unforwarded",
            unit: "allocs",
            description: "convnet_allocs_per_step with buffer forwarding off",
            setup: || step_memory(convnet, false, StepMemory::Allocations),
        },
        Workload {
            name: "dist_step_us",
            unit: "µs/run",
            description:
                "a fed scalar doubled on task 1 of a 2-task gRPC cluster and fetched on task 0",
            setup: dist_step,
        },
        Workload {
            name: "dist_recv_mib_s",
            unit: "MiB/s",
            description: "a 64 MiB f32 variable on task 1 summed on task 0 (one RecvTensor)",
            setup: || dist_recv(false),
        },
        Workload {
            name: "dist_recv_bf16_mib_s",
            unit: "MiB/s",
            description: "dist_recv_mib_s with enable_bfloat16_sendrecv: the variable crosses \
                as bfloat16 (float32 MiB per second)",
            setup: || dist_recv(true),
        },
        Workload {
            name: "recv_sched_peak_mib",
            unit: "MiB",
            description: "task 0's peak per step: 8 x 4 MiB weights on task 1 read one per \
                stage of a chain on task 0, enable_recv_scheduling on",
            setup: || super::recv_schedule::peak_mib(true),
        },
        Workload {
            name: "recv_sched_peak_mib_unscheduled",
            unit: "MiB",
            description: "recv_sched_peak_mib with enable_recv_scheduling off",
            setup: || super::recv_schedule::peak_mib(false),
        },
        Workload {
            name: "recv_sched_step_ms",
            unit: "ms/step",
            description: "the recv_sched_peak_mib model's step, enable_recv_scheduling on",
            setup: || super::recv_schedule::step_ms(true),
        },
        Workload {
            name: "recv_sched_step_ms_unscheduled",
            unit: "ms/step",
            description: "recv_sched_step_ms with enable_recv_scheduling off",
            setup: || super::recv_schedule::step_ms(false),
        },
        Workload {
            name: "dist_mlp_sync_step_us",
            unit: "µs/step",
            description: "mlp_step_us with variables on a ps task, 2 worker replicas, sync",
            setup: dist_mlp_sync,
        },
        Workload {
            name: "csv_pipeline_us_per_record",
            unit: "µs/record",
            description: "CSV files -> reader -> DecodeCSV(65) -> batch(128), 2 runner loops",
            setup: csv_input_pipeline,
        },
        Workload {
            name: "ckpt_save_mib_s",
            unit: "MiB/s",
            description: "Saver::save of 8 x 32 MiB f32 variables (SaveV2, fsync, rename)",
            setup: super::checkpoint::ckpt_save,
        },
        Workload {
            name: "ckpt_restore_mib_s",
            unit: "MiB/s",
            description: "Saver::restore of 8 x 32 MiB f32 variables (RestoreV2 + Assign)",
            setup: super::checkpoint::ckpt_restore,
        },
        Workload {
            name: "serve_mlp_rps",
            unit: "req/s",
            description: "gRPC Predict of one 784-f32 row to the MLP SavedModel, 64 closed-loop \
                clients, 1 s; batching: max_batch_size 32, batch_timeout_micros 1000, \
                num_batch_threads = cores, max_enqueued_batches 1000",
            setup: super::serving::serve_mlp_rps,
        },
        Workload {
            name: "serve_mlp_rps_unbatched",
            unit: "req/s",
            description: "serve_mlp_rps with batching off",
            setup: super::serving::serve_mlp_rps_unbatched,
        },
        Workload {
            name: "serve_mlp_p99_ms",
            unit: "ms",
            description: "p99 latency of serve_mlp_rps's load (batching on)",
            setup: super::serving::serve_mlp_p99_ms,
        },
        Workload {
            name: "serve_mlp_p99_ms_unbatched",
            unit: "ms",
            description: "p99 latency of serve_mlp_rps's load, batching off",
            setup: super::serving::serve_mlp_p99_ms_unbatched,
        },
        Workload {
            name: "serve_mlp_batch32_ms",
            unit: "ms",
            description: "one session run of the served MLP SavedModel on 32 rows, in-process",
            setup: super::serving::serve_mlp_batch32_ms,
        },
        Workload {
            name: "serve_swap_p99_ms",
            unit: "ms",
            description: "p99 latency, 64 clients, batching on, over 1.5 s in which a new \
                version is dropped into the base path (at 0.3 s), warmed up and swapped in",
            setup: super::serving::serve_swap_p99_ms,
        },
        Workload {
            name: "serve_steady_p99_ms",
            unit: "ms",
            description: "serve_swap_p99_ms's 1.5 s window without a swap",
            setup: super::serving::serve_steady_p99_ms,
        },
        Workload {
            name: "cse_fold_speedup",
            unit: "x",
            description: "TensorFlow's tf.gradients graph of a small MLP (tf_corpus/grad_mlp, \
                loss + 5 gradients), step time with the graph optimizations off / on \
                (constant folding + CSE, TensorFlow's L1)",
            setup: super::optimize::cse_fold_speedup,
        },
    ]
}

/// Records per shard and shards of [`csv_input_pipeline`]'s synthetic data set.
const CSV_PIPELINE_SHARDS: usize = 4;
const CSV_PIPELINE_RECORDS: usize = 2_000;
/// Its batch size.
const CSV_PIPELINE_BATCH: usize = 128;

/// Stops an input pipeline's queue runners and removes its files when a workload is
/// dropped.
struct PipelineGuard {
    coord: crate::Coordinator,
    dir: std::path::PathBuf,
}

impl Drop for PipelineGuard {
    fn drop(&mut self) {
        self.coord.request_stop(None);
        if let Err(e) = self.coord.join() {
            tracing::warn!(error = %e, "input pipeline ended with an error");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Microseconds per record through a whole CSV input pipeline, as
/// `examples/input_pipeline.rs` builds it: 4 shards of 2 000 lines of 64 pixels and a
/// label, `string_input_producer` (endless epochs), `TextLineReaderV2`,
/// `ReaderReadV2`, `DecodeCSV` of 65 columns, `Pack`, then `batch` of 128 fed by two
/// queue-runner loops; timed at the consumer's `QueueDequeueManyV2`.
fn csv_input_pipeline() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let dir = std::env::temp_dir().join(format!("actorflow_bench_csv_{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| crate::Status::internal(format!("{}: {e}", dir.display())))?;
    let mut files = Vec::new();
    for f in 0..CSV_PIPELINE_SHARDS {
        let mut text = String::new();
        for r in 0..CSV_PIPELINE_RECORDS {
            for p in 0..64 {
                text.push_str(&format!("{},", (f * 7 + r * 13 + p * 3) % 17));
            }
            text.push_str(&format!("{}\n", r % 10));
        }
        let path = dir.join(format!("shard-{f}.csv"));
        std::fs::write(&path, text)
            .map_err(|e| crate::Status::internal(format!("{}: {e}", path.display())))?;
        files.push(path.to_string_lossy().into_owned());
    }
    let s = Scope::new();
    let (queue, _) = ops::string_input_producer(&s, &files, None, false, None, 32)?;
    let reader = ops::text_line_reader(&s, 0, &ops::ReaderOptions::default())?;
    let (_, line) = ops::reader_read(&s, &reader, &queue)?;
    let mut defaults = vec![ops::constant(&s, Tensor::vector::<f32>(&[]))?; 64];
    defaults.push(ops::constant(&s, Tensor::vector::<i32>(&[]))?);
    let mut cols = ops::decode_csv(&s, &line, &defaults, &ops::DecodeCsvOptions::default())?;
    let label = cols
        .pop()
        .ok_or_else(|| crate::Status::internal("no columns"))?;
    let pixels = ops::pack(&s, &cols, 0)?;
    let batch = ops::batch(
        &s,
        &[pixels, label],
        CSV_PIPELINE_BATCH,
        &ops::BatchOptions {
            num_threads: 2,
            capacity: 4 * CSV_PIPELINE_BATCH,
            ..Default::default()
        },
    )?;
    let sess = session(&s, 1)?;
    let guard = PipelineGuard {
        coord: crate::Coordinator::new(),
        dir,
    };
    crate::start_queue_runners(&sess, &guard.coord, &ops::QueueRunnerSpec::all_in(&s)?);
    let (xn, yn) = (batch.tensors[0].name(), batch.tensors[1].name());
    Ok(Box::new(move || {
        let _keep = &guard;
        let run = || sess.run(&[], &[&xn, &yn], &[]).map(|_| ());
        let reps = calibrate(REPETITION, run)?;
        Ok(time_per_call(reps, run)? * 1e6 / CSV_PIPELINE_BATCH as f64)
    }))
}

/// A cluster of `tasks` servers of job `worker` in this process, on free ports of
/// 127.0.0.1 (tensors between them cross real gRPC connections), and the target of
/// task 0's master.
pub fn local_cluster(tasks: usize) -> Result<(Vec<Server>, String)> {
    let io = |e: std::io::Error| Status::unavailable(format!("bench cluster: {e}"));
    let listeners = (0..tasks)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").map_err(io))
        .collect::<Result<Vec<_>>>()?;
    let addrs = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()).map_err(io))
        .collect::<Result<Vec<_>>>()?;
    let spec = ClusterSpec::new().with_job("worker", &addrs)?;
    let servers = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            Server::start_with_listener(ServerOptions::new(spec.clone(), "worker", i as u32), l)
        })
        .collect::<Result<Vec<_>>>()?;
    let target = servers[0].target();
    Ok((servers, target))
}

/// Microseconds per `run` of the smallest step that spans two tasks (the issue's
/// `dist_step_us`): `RunStep` to task 0's master, `RunGraph` on both tasks, the
/// fed scalar to task 1 and its double back to task 0 by `RecvTensor`.
fn dist_step() -> Result<Box<dyn FnMut() -> Result<f64>>> {
    let (servers, target) = local_cluster(2)?;
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar())?;
    let t1 = s.with_device("/job:worker/task:1");
    let y = ops::mul(&t1, &x, &ops::scalar(&t1, 2.0f32)?)?;
    let sess = Session::connect(&target, &s.graph_def(), SessionOptions::default())?;
    let (xn, yn) = (x.name(), y.name());
    Ok(Box::new(move || {
        let _cluster = &servers;
        let run = || {
            sess.run(&[(&xn, Tensor::scalar(1.5f32))], &[&yn], &[])
                .map(|_| ())
        };
        let n = calibrate(REPETITION, run)?;
        Ok(time_per_call(n, run)? * 1e6)
    }))
}

/// MiB per second of a 64 MiB tensor crossing from task 1 to task 0 (the issue's
/// `dist_recv_mib_s`): a variable on task 1, read and summed on task 0 each step;
/// `bfloat16`: it crosses as bfloat16 (`dist_recv_bf16_mib_s`, still counted in
/// float32 bytes).
fn dist_recv(bfloat16: bool) -> Result<Box<dyn FnMut() -> Result<f64>>> {
    const ELEMENTS: usize = 16 << 20;
    let (servers, target) = local_cluster(2)?;
    let s = Scope::new();
    let t1 = s.with_device("/job:worker/task:1");
    let init = ops::fill_to(&t1, &[ELEMENTS as i64], &ops::scalar(&t1, 1.0f32)?)?;
    let v = ops::Variable::new(&t1, "big", &init, false)?;
    let sum = ops::sum(&s, &v.value, &ops::scalar(&s, 0i32)?, false)?;
    let sess = Session::connect(
        &target,
        &s.graph_def(),
        SessionOptions::default().with_enable_bfloat16_sendrecv(bfloat16),
    )?;
    sess.run(&[], &[], &[v.initializer.name()])?;
    let name = sum.name();
    Ok(Box::new(move || {
        let _cluster = &servers;
        let run = || sess.run(&[], &[&name], &[]).map(|_| ());
        let n = calibrate(REPETITION, run)?.max(2);
        let secs = time_per_call(n, run)?;
        Ok((ELEMENTS * 4) as f64 / (1 << 20) as f64 / secs)
    }))
}
