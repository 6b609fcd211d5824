//! A TensorFlow 2.21 `tf.compat.v1` graph of resizes and space/batch/depth moves
//! runs in actorflow with TensorFlow's answers: `ResizeBilinear` (half-pixel) and
//! `ResizeNearestNeighbor` (aligned corners), `SpaceToDepth` then `DepthToSpace`,
//! `SpaceToBatchND` then `BatchToSpaceND`, the 4-D `SpaceToBatch`/`BatchToSpace`,
//! a seeded `tf.compat.v1.nn.dropout`, a loss, and `tf.gradients` of it with
//! respect to the input (`ResizeBilinearGrad`, `ResizeNearestNeighborGrad` and the
//! opposite moves, as `image_grad.py` and `array_grad.py` build them).
//!
//! Then actorflow's own `tf.nn`-style builders: [`ops::dropout`] draws
//! TensorFlow's mask for the same seed and behaves as dropout should, and the
//! builders a TF1 convnet uses (`conv2d`, `max_pool`, `avg_pool`,
//! `fused_batch_norm`, `conv2d_transpose`, `dropout`) build and run together.
//!
//! `kernels/tests/fixtures/gen_resize_space.py` wrote the graph
//! (`resize_space_graph.pb`), the feeds, the fetches and TensorFlow's outputs, and
//! one seeded dropout of a constant (`resize_space_graph.json`).

mod graph_fixture;
use graph_fixture::GraphFixture;

use actorflow::ops::{self, ConvOptions, FusedBatchNormOpts};
use actorflow::{Code, DType, Scope, Session, SessionOptions, Shape, Tensor};

#[test]
fn tensorflow_resize_and_space_graph_runs_with_tensorflows_answers() {
    let f = GraphFixture::load("resize_space_graph");
    f.check(Some((1e-4, 1e-4)));
    let _ = f.session.close();
}

fn run(s: &Scope, fetches: &[&str]) -> Vec<Tensor> {
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).expect("session");
    let out = sess.run(&[], fetches, &[]).expect("run");
    let _ = sess.close();
    out
}

#[test]
fn dropout_draws_tensorflows_mask_for_a_seed() {
    let f = GraphFixture::load("resize_space_graph");
    let d = &f.doc["dropout"];
    let x = graph_fixture::tensor(&d["x"]);
    let want = graph_fixture::tensor(&d["output"]);
    let rate = d["rate"].as_f64().expect("rate");
    let seed = d["seed"].as_i64().expect("seed");
    let s = Scope::new();
    let xc = ops::constant(&s, x).unwrap();
    let y = ops::dropout(&s, &xc, rate, None, Some(seed)).unwrap();
    assert_eq!(run(&s, &[&y.name()])[0], want);
    let _ = f.session.close();
}

#[test]
fn dropout_keeps_about_one_minus_rate_scaled_up() {
    let (rate, n) = (0.3, 100_000usize);
    let s = Scope::new();
    let x = ops::constant(&s, Tensor::new(&[200, 500], vec![1.0f32; n]).unwrap()).unwrap();
    let y = ops::dropout(&s, &x, rate, None, Some(3)).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let first = sess.run(&[], &[&y.name()], &[]).unwrap().remove(0);
    let second = sess.run(&[], &[&y.name()], &[]).unwrap().remove(0);
    let _ = sess.close();
    assert_ne!(first, second, "a new mask every run");
    // The same seed in a new session: the same sequence of masks.
    assert_eq!(run(&s, &[&y.name()])[0], first);
    let scale = (1.0 / (1.0 - rate)) as f32;
    let v = first.as_slice::<f32>().unwrap();
    assert!(
        v.iter().all(|&e| e == 0.0 || e == scale),
        "kept values are x / keep_prob"
    );
    let kept = v.iter().filter(|&&e| e != 0.0).count() as f64 / n as f64;
    assert!((kept - (1.0 - rate)).abs() < 0.01, "kept fraction {kept}");
    // Another seed, another mask.
    let z = ops::dropout(&s, &x, rate, None, Some(4)).unwrap();
    assert_ne!(run(&s, &[&z.name()])[0], first);
}

#[test]
fn dropout_rate_zero_is_the_identity_and_bad_rates_fail() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
    assert_eq!(
        ops::dropout(&s, &x, 0.0, None, Some(1)).unwrap().name(),
        x.name()
    );
    for rate in [1.0, -0.1, f64::NAN] {
        let e = ops::dropout(&s, &x, rate, None, None).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "rate {rate}");
    }
    let i = ops::placeholder(&s, DType::I32, Shape::known(&[3])).unwrap();
    let e = ops::dropout(&s, &i, 0.5, None, None).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // A noise shape broadcasts one mask over the rows.
    let x = ops::constant(&s, Tensor::new(&[4, 6], vec![1.0f64; 24]).unwrap()).unwrap();
    let ns = ops::index_vector(&s, &[1, 6]).unwrap();
    let y = ops::dropout(&s, &x, 0.5, Some(&ns), Some(9)).unwrap();
    let v = run(&s, &[&y.name()]).remove(0);
    let rows: Vec<&[f64]> = v.as_slice::<f64>().unwrap().chunks(6).collect();
    assert!(rows.iter().all(|r| r == &rows[0]), "{v:?}");
}

#[test]
fn tf_nn_convnet_builders_build_and_run_together() {
    let s = Scope::new();
    let x = ops::constant(
        &s,
        Tensor::new(
            &[2, 8, 8, 3],
            (0..384).map(|i| (i % 7) as f32 * 0.1).collect(),
        )
        .unwrap(),
    )
    .unwrap();
    let w = ops::constant(&s, Tensor::new(&[3, 3, 3, 4], vec![0.05f32; 108]).unwrap()).unwrap();
    let c = ops::conv2d(&s, &x, &w, &ConvOptions::new(&[1, 1, 1, 1], "SAME")).unwrap();
    let m = ops::max_pool(&s, &c, &[2], &[2], "VALID", "NHWC").unwrap();
    let a = ops::avg_pool(&s, &m, &[3], &[1], "SAME", "NHWC").unwrap();
    let ones = ops::constant(&s, Tensor::vector(&[1.0f32; 4])).unwrap();
    let zeros = ops::constant(&s, Tensor::vector(&[0.0f32; 4])).unwrap();
    let bn = ops::fused_batch_norm(
        &s,
        &a,
        &ones,
        &zeros,
        None,
        None,
        &FusedBatchNormOpts::default(),
    )
    .unwrap();
    let d = ops::dropout(&s, &bn.y, 0.5, None, Some(1)).unwrap();
    let wt = ops::constant(&s, Tensor::new(&[2, 2, 3, 4], vec![0.1f32; 48]).unwrap()).unwrap();
    let shape = ops::index_vector(&s, &[2, 8, 8, 3]).unwrap();
    let up = ops::conv2d_transpose(
        &s,
        &d,
        &wt,
        &shape,
        &ConvOptions::new(&[1, 2, 2, 1], "SAME"),
    )
    .unwrap();
    assert_eq!(up.shape(), Shape::known(&[2, 8, 8, 3]));
    let out = run(&s, &[&up.name(), &bn.y.name()]);
    assert_eq!(out[0].dims(), [2, 8, 8, 3]);
    let y = out[1].as_slice::<f32>().unwrap();
    let mean = y.iter().sum::<f32>() / y.len() as f32;
    assert!(mean.abs() < 1e-4, "batch-normalized mean {mean}");
}
