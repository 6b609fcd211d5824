//! Input pipelines with the batching helpers: every record of every shard counted
//! across two queue-runner loops, `shuffle_batch` reproducible with a seed and
//! keeping `min_after_dequeue`, `allow_smaller_final_batch`, a malformed CSV line
//! stopping the pipeline through the coordinator with an error naming its file and
//! line, and the `input_pipeline` example's graph trained for a few steps against a
//! hand computation, then run to the end of its data.

#[allow(dead_code)]
mod common;
use common::TempDir;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use actorflow::ops::{
    self, BatchOptions, DecodeCsvOptions, QueueRunnerSpec, ReaderOptions, ShuffleBatchOptions,
};
use actorflow::{
    start_queue_runners, Code, Coordinator, Output, RunArgs, RunOptions, Scope, Session,
    SessionOptions, Tensor,
};

#[allow(dead_code)]
#[path = "../examples/input_pipeline.rs"]
mod example;

fn digits_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/digits")
}

fn session(s: &Scope) -> Session {
    Session::new(&s.graph_def(), SessionOptions::default()).unwrap()
}

/// Keys and first columns of `files` read as CSV with int32 columns, batched by
/// `batch` in `threads` loops with `allow_smaller_final_batch`.
fn keyed_csv_batches(
    s: &Scope,
    files: &[String],
    epochs: u64,
    columns: usize,
    threads: usize,
    batch: usize,
) -> Vec<Output> {
    let (queue, _) = ops::string_input_producer(s, files, Some(epochs), true, Some(5), 32).unwrap();
    let reader = ops::text_line_reader(s, 0, &ReaderOptions::default()).unwrap();
    let (key, line) = ops::reader_read(s, &reader, &queue).unwrap();
    let defaults = vec![ops::constant(s, Tensor::vector::<i32>(&[])).unwrap(); columns];
    let cols =
        ops::decode_csv_with_key(s, &key, &line, &defaults, &DecodeCsvOptions::default()).unwrap();
    let b = ops::batch(
        s,
        &[key, cols[0].clone(), cols[columns - 1].clone()],
        batch,
        &BatchOptions {
            num_threads: threads,
            capacity: 64,
            allow_smaller_final_batch: true,
            ..Default::default()
        },
    )
    .unwrap();
    b.tensors
}

/// Opens a session, runs the local initializer and starts every queue runner.
fn start(s: &Scope) -> (Session, Coordinator) {
    let init = ops::local_variables_initializer(s).unwrap();
    let sess = session(s);
    sess.run(&[], &[], &[init.name()]).unwrap();
    let coord = Coordinator::new();
    start_queue_runners(&sess, &coord, &QueueRunnerSpec::all_in(s).unwrap());
    (sess, coord)
}

#[test]
fn every_record_of_every_shard_is_read_once_per_epoch_across_two_runner_loops() {
    let files = example::shards(&digits_dir(), "train").unwrap();
    assert_eq!(files.len(), 4);
    // the reference: each shard's lines, read here without the runtime
    let mut expected: BTreeMap<String, (i32, i32)> = BTreeMap::new();
    for f in &files {
        for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            let v: Vec<i32> = line.split(',').map(|x| x.parse().unwrap()).collect();
            assert_eq!(v.len(), 65);
            expected.insert(format!("{f}:{}", i + 1), (v[0], v[64]));
        }
    }
    assert_eq!(expected.len(), 1437);
    let s = Scope::new();
    let epochs = 3;
    let fetch = keyed_csv_batches(&s, &files, epochs, 65, 2, 50);
    let (sess, coord) = start(&s);
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let mut sizes = Vec::new();
    let names: Vec<String> = fetch.iter().map(Output::name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    while !coord.should_stop() {
        match sess.run(&[], &names, &[]) {
            Ok(v) => {
                let keys = v[0].as_strings().unwrap();
                sizes.push(keys.len());
                for (i, k) in keys.iter().enumerate() {
                    let k = String::from_utf8(k.to_vec()).unwrap();
                    let want = expected
                        .get(&k)
                        .unwrap_or_else(|| panic!("unexpected key {k}"));
                    let got = (
                        v[1].as_slice::<i32>().unwrap()[i],
                        v[2].as_slice::<i32>().unwrap()[i],
                    );
                    assert_eq!(&got, want, "record {k}");
                    *seen.entry(k).or_default() += 1;
                }
            }
            Err(e) => coord.request_stop(Some(e)),
        }
    }
    coord.join().unwrap();
    assert_eq!(seen.len(), expected.len(), "every record of every shard");
    assert!(
        seen.values().all(|&n| n == epochs),
        "each exactly once per epoch"
    );
    // full batches, then the smaller final one
    let total: usize = 1437 * 3;
    assert_eq!(sizes.len(), total.div_ceil(50));
    assert!(sizes[..sizes.len() - 1].iter().all(|&n| n == 50));
    assert_eq!(sizes.last(), Some(&(total % 50)));
}

/// A `shuffle_batch` of the 100 values 0..100 enqueued at once (so what the queue
/// holds at each dequeue does not depend on thread timing): batches of 10.
fn shuffled(seed: Option<i64>) -> Vec<Vec<i32>> {
    let s = Scope::new();
    let values = ops::constant(
        &s,
        Tensor::new(&[100], (0..100).collect::<Vec<i32>>()).unwrap(),
    )
    .unwrap();
    let b = ops::shuffle_batch(
        &s,
        &[values],
        10,
        100,
        50,
        &ShuffleBatchOptions {
            enqueue_many: true,
            seed,
            ..Default::default()
        },
    )
    .unwrap();
    let sess = session(&s);
    sess.run(&[], &[], &[&b.runner.enqueue_ops[0]]).unwrap();
    let deq = b.tensors[0].name();
    let mut out = Vec::new();
    for _ in 0..5 {
        out.push(
            sess.run(&[], &[&deq], &[]).unwrap()[0]
                .as_slice::<i32>()
                .unwrap()
                .to_vec(),
        );
    }
    // 50 left = min_after_dequeue: the next dequeue waits until the queue closes
    let opts = RunOptions::default().with_timeout(Duration::from_millis(100));
    let e = sess
        .run_with(&RunArgs::new().fetch(&deq).options(opts.clone()))
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    sess.run(&[], &[], &[&b.runner.close_op]).unwrap();
    loop {
        match sess.run(&[], &[&deq], &[]) {
            Ok(v) => out.push(v[0].as_slice::<i32>().unwrap().to_vec()),
            Err(e) => {
                assert_eq!(e.code(), Code::OutOfRange, "{e}");
                return out;
            }
        }
    }
}

#[test]
fn shuffle_batch_is_a_permutation_reproducible_with_a_seed() {
    let a = shuffled(Some(7));
    assert_eq!(a.len(), 10);
    assert!(a.iter().all(|b| b.len() == 10));
    let mut all: Vec<i32> = a.concat();
    assert_ne!(all, (0..100).collect::<Vec<_>>(), "shuffled");
    all.sort_unstable();
    assert_eq!(all, (0..100).collect::<Vec<_>>(), "a permutation");
    assert_eq!(shuffled(Some(7)), a, "same seed, same batches");
    assert_ne!(shuffled(Some(8)), a, "another seed, other batches");
}

#[test]
fn allow_smaller_final_batch_keeps_the_remainder() {
    let run = |allow_smaller_final_batch: bool| {
        let s = Scope::new();
        let values = ops::constant(
            &s,
            Tensor::new(&[23], (0..23).collect::<Vec<i64>>()).unwrap(),
        )
        .unwrap();
        let b = ops::batch(
            &s,
            &[values],
            5,
            &BatchOptions {
                enqueue_many: true,
                allow_smaller_final_batch,
                ..Default::default()
            },
        )
        .unwrap();
        let sess = session(&s);
        sess.run(&[], &[], &[&b.runner.enqueue_ops[0], &b.runner.close_op])
            .unwrap();
        let mut out = Vec::new();
        loop {
            match sess.run(&[], &[&b.tensors[0].name()], &[]) {
                Ok(v) => out.push(v[0].as_slice::<i64>().unwrap().to_vec()),
                Err(e) => {
                    assert_eq!(e.code(), Code::OutOfRange, "{e}");
                    return out;
                }
            }
        }
    };
    let whole: Vec<Vec<i64>> = (0..5)
        .map(|i| (i * 5..(i * 5 + 5).min(23)).collect())
        .collect();
    assert_eq!(run(true), whole, "FIFO batches of 5, then the last 3");
    assert_eq!(run(false), whole[..4], "without it the last 3 are dropped");

    // through a reader and two runner loops: 7 + 6 lines, batches of 4
    let dir = TempDir::new("smaller");
    let files = vec![
        dir.file(
            "a.csv",
            (0..7).map(|i| format!("{i},0\n")).collect::<String>(),
        ),
        dir.file(
            "b.csv",
            (7..13).map(|i| format!("{i},1\n")).collect::<String>(),
        ),
    ];
    let s = Scope::new();
    let fetch = keyed_csv_batches(&s, &files, 1, 2, 2, 4);
    let (sess, coord) = start(&s);
    let mut sizes = Vec::new();
    let mut values = Vec::new();
    loop {
        match sess.run(&[], &[&fetch[1].name()], &[]) {
            Ok(v) => {
                sizes.push(v[0].num_elements());
                values.extend_from_slice(v[0].as_slice::<i32>().unwrap());
            }
            Err(e) => {
                assert_eq!(e.code(), Code::OutOfRange, "{e}");
                break;
            }
        }
    }
    coord.request_stop(None);
    coord.join().unwrap();
    assert_eq!(sizes, [4, 4, 4, 1]);
    values.sort_unstable();
    assert_eq!(values, (0..13).collect::<Vec<_>>());
}

#[test]
fn a_malformed_line_stops_the_pipeline_through_the_coordinator() {
    let dir = TempDir::new("malformed");
    let good: String = (0..40).map(|i| format!("{i},{i}\n")).collect();
    let files = vec![
        dir.file("good.csv", &good),
        dir.file("bad.csv", "1,2\n3,4\n5\n6,7\n"),
    ];
    let s = Scope::new();
    let fetch = keyed_csv_batches(&s, &files, 10, 2, 2, 8);
    let (sess, coord) = start(&s);
    let mut batches = 0;
    while !coord.should_stop() {
        match sess.run(&[], &[&fetch[1].name()], &[]) {
            Ok(_) => batches += 1,
            // the runner's error closed the batch queue: the consumer sees the end
            // of the input, and the coordinator holds the error
            Err(e) => coord.request_stop(Some(e)),
        }
        assert!(batches < 100, "the pipeline should have stopped");
    }
    let e = coord.join().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let bad = &files[1];
    assert!(
        e.message().contains(&format!("{bad}:3")),
        "names the file and line: {e}"
    );
}

fn softmax_step(w: &[f32], b: &[f32], x: &[f32], y: &[i32], lr: f32) -> (f64, Vec<f64>, Vec<f64>) {
    let (p, c) = (example::PIXELS, example::CLASSES);
    let n = y.len();
    let mut loss = 0.0;
    let mut gw = vec![0.0f64; p * c];
    let mut gb = vec![0.0f64; c];
    for i in 0..n {
        let logits: Vec<f64> = (0..c)
            .map(|k| {
                f64::from(b[k])
                    + (0..p)
                        .map(|j| f64::from(x[i * p + j]) * f64::from(w[j * c + k]))
                        .sum::<f64>()
            })
            .collect();
        let max = logits.iter().cloned().fold(f64::MIN, f64::max);
        let z: f64 = logits.iter().map(|l| (l - max).exp()).sum();
        let label = y[i] as usize;
        loss += z.ln() + max - logits[label];
        for k in 0..c {
            let d = ((logits[k] - max).exp() / z - f64::from(u8::from(k == label))) / n as f64;
            gb[k] += d;
            for j in 0..p {
                gw[j * c + k] += f64::from(x[i * p + j]) * d;
            }
        }
    }
    let lr = f64::from(lr);
    let w1 = w
        .iter()
        .zip(&gw)
        .map(|(w, g)| f64::from(*w) - lr * g)
        .collect();
    let b1 = b
        .iter()
        .zip(&gb)
        .map(|(b, g)| f64::from(*b) - lr * g)
        .collect();
    (loss / n as f64, w1, b1)
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn the_example_graph_trains_like_a_hand_computed_sgd_step() {
    let cfg = example::Config {
        data_dir: digits_dir(),
        epochs: 1,
        batch_size: 16,
        learning_rate: 0.5,
        seed: Some(3),
    };
    let m = example::build(&cfg).unwrap();
    let sess = session(&m.scope);
    let init: Vec<&str> = m.init.iter().map(String::as_str).collect();
    sess.run(&[], &[], &init).unwrap();
    let coord = Coordinator::new();
    start_queue_runners(&sess, &coord, &m.train_runners);
    let (wn, bn) = (m.weights.name(), m.biases.name());
    let fetch = [m.images.name(), m.labels.name(), m.loss.name()];
    let fetch: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let mut losses = Vec::new();
    for step in 0..40 {
        let before = sess.run(&[], &[&wn, &bn], &[]).unwrap();
        let out = sess.run(&[], &fetch, &[&m.train_op]).unwrap();
        let after = sess.run(&[], &[&wn, &bn], &[]).unwrap();
        let (x, y) = (
            out[0].as_slice::<f32>().unwrap(),
            out[1].as_slice::<i32>().unwrap(),
        );
        assert_eq!(out[0].dims(), [16, 64]);
        assert!(
            x.iter().all(|&v| (0.0..=1.0).contains(&v)),
            "pixels scaled to [0, 1]"
        );
        assert!(y.iter().all(|&l| (0..10).contains(&l)));
        let (w, b) = (
            before[0].as_slice::<f32>().unwrap(),
            before[1].as_slice::<f32>().unwrap(),
        );
        let (loss, w1, b1) = softmax_step(w, b, x, y, cfg.learning_rate);
        let got = out[2].scalar_value::<f32>().unwrap();
        assert!(
            (f64::from(got) - loss).abs() < 1e-4,
            "step {step}: loss {got} vs {loss}"
        );
        if step == 0 {
            assert!((loss - 10f64.ln()).abs() < 1e-6, "zero weights: ln 10");
        }
        assert_close(after[0].as_slice::<f32>().unwrap(), &w1, "weights");
        assert_close(after[1].as_slice::<f32>().unwrap(), &b1, "biases");
        losses.push(loss);
    }
    let late = losses[30..].iter().sum::<f64>() / 10.0;
    assert!(late < 1.0, "the loss falls from ln 10: {losses:?}");
    // stopping mid-epoch ends every runner loop
    coord.request_stop(None);
    coord.join().unwrap();
}

#[test]
fn the_example_runs_to_the_end_of_its_data() {
    let cfg = example::Config {
        data_dir: digits_dir(),
        epochs: 2,
        batch_size: 32,
        learning_rate: 0.5,
        seed: Some(1),
    };
    let m = example::build(&cfg).unwrap();
    let out = example::train(&cfg, &m).unwrap();
    // 2 epochs of 1 437 records in full batches of 32; the last 26 are dropped
    assert_eq!(out.steps, 2 * 1437 / 32);
    assert!(out.final_loss < 0.6, "loss {}", out.final_loss);
    assert!(out.accuracy > 0.85, "test accuracy {}", out.accuracy);
}
