//! A TensorFlow 2.21 `tf.compat.v1` convnet runs in actorflow with TensorFlow's
//! answers: `Conv2D` (SAME) → `BiasAdd` → `Relu` → `Conv2D` (stride 2, VALID) →
//! mean of squares, and `tf.gradients` of that loss with respect to the input and
//! every weight (`Conv2DBackpropInput`, `Conv2DBackpropFilter`, `BiasAddGrad`,
//! `ReluGrad`, as TensorFlow's Python built them).
//!
//! `kernels/tests/fixtures/gen_conv.py` wrote the graph (`convnet_graph.pb`), the
//! feed, the fetches and TensorFlow's outputs (`convnet_graph.json`).

mod graph_fixture;
use graph_fixture::GraphFixture;

#[test]
fn tensorflow_convnet_and_its_gradients_run_with_tensorflows_answers() {
    let f = GraphFixture::load("convnet_graph");
    f.check(Some((1e-4, 1e-5)));
    let _ = f.session.close();
}

/// "Deep MNIST for experts" as TensorFlow's tutorial built it (two 5×5
/// convolutions with max-pooling, a 1024-unit layer with dropout, softmax
/// cross-entropy, `AdamOptimizer(1e-4)`), its weights drawn by the graph's own
/// seeded `TruncatedNormal`s and its dropout by seeded `RandomUniform`s:
/// actorflow trains it with TensorFlow's loss at every step, then gives
/// TensorFlow's accuracy, loss and trained weights
/// (`kernels/tests/fixtures/gen_deep_mnist.py`).
#[test]
fn deep_mnist_trains_with_adam_step_by_step_as_tensorflow_does() {
    use actorflow::Tensor;
    let f = GraphFixture::load("deep_mnist_graph");
    let name = |k: &str| f.doc[k].as_str().expect(k).to_owned();
    let (init, train, loss, accuracy) =
        (name("init"), name("train"), name("loss"), name("accuracy"));
    let keep_prob = name("keep_prob");
    let feeds = |p: f32| {
        let mut v = f.feed_refs();
        v.push((keep_prob.as_str(), Tensor::scalar(p)));
        v
    };
    let close = |what: &str, got: f64, want: f64, rtol: f64| {
        assert!(
            (got - want).abs() <= rtol * want.abs().max(1.0),
            "{what}: actorflow {got}, TensorFlow {want}"
        );
    };
    f.session.run(&[], &[], &[&init]).expect("init");
    let losses = f.doc["losses"].as_array().expect("losses");
    for (step, want) in losses.iter().enumerate() {
        let got = f
            .session
            .run(&feeds(0.5), &[&loss], &[&train])
            .expect("step");
        let got = got[0].to_f64_vec().expect("loss")[0];
        close(
            &format!("loss at step {step}"),
            got,
            want.as_f64().expect("loss"),
            1e-4,
        );
    }
    let out = f
        .session
        .run(
            &feeds(1.0),
            &[
                &accuracy,
                &loss,
                "W_conv1/Read/ReadVariableOp:0",
                "b_fc2/Read/ReadVariableOp:0",
            ],
            &[],
        )
        .expect("evaluate");
    close(
        "accuracy",
        out[0].to_f64_vec().expect("acc")[0],
        f.doc["final_accuracy"].as_f64().expect("acc"),
        0.0,
    );
    close(
        "final loss",
        out[1].to_f64_vec().expect("loss")[0],
        f.doc["final_loss"].as_f64().expect("loss"),
        1e-4,
    );
    for (i, key) in [(2, "W_conv1"), (3, "b_fc2")] {
        let want = graph_fixture::tensor(&f.doc[key])
            .to_f64_vec()
            .expect("weights");
        let got = out[i].to_f64_vec().expect("weights");
        assert_eq!(got.len(), want.len(), "{key}");
        for (j, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                "{key}[{j}]: actorflow {a}, TensorFlow {b}"
            );
        }
    }
    let _ = f.session.close();
}

/// A Keras-built MobileNetV2 (alpha 0.35, 96×96, random weights, frozen by
/// TensorFlow into `Const`s) classifies a batch of 8 exactly as TensorFlow 2.21
/// does, with its probabilities (`kernels/tests/fixtures/gen_mobilenet.py`).
#[test]
fn a_frozen_keras_mobilenet_v2_classifies_as_tensorflow_does() {
    use actorflow::graph::import::{load_graph_def, ImportOptions};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures");
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("mobilenet_graph.json")).expect("json"),
    )
    .expect("fixture JSON");
    let graph = load_graph_def(
        std::path::Path::new(actorflow::bench::workloads::MOBILENET_GRAPH),
        &ImportOptions::default(),
    )
    .expect("import");
    let sess =
        actorflow::Session::new(&graph, actorflow::SessionOptions::default()).expect("session");
    let batch = doc["batch"].as_u64().expect("batch") as usize;
    let images = actorflow::bench::workloads::mobilenet_images(batch);
    let (input, output) = (
        doc["input"].as_str().expect("input"),
        doc["output"].as_str().expect("output"),
    );
    let probs = sess.run(&[(input, images)], &[output], &[]).expect("run")[0].clone();
    let want = graph_fixture::tensor(&doc["probabilities"]);
    assert_eq!(probs.dims(), want.dims());
    let (got, want) = (
        probs.to_f64_vec().expect("floats"),
        want.to_f64_vec().expect("floats"),
    );
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
            "probability {i}: actorflow {a}, TensorFlow {b}"
        );
    }
    let classes: Vec<i64> = got
        .chunks(10)
        .map(|row| {
            (0..row.len()).fold(0, |best, j| if row[j] > row[best] { j } else { best }) as i64
        })
        .collect();
    let want_classes = graph_fixture::tensor(&doc["classes"]);
    assert_eq!(classes, want_classes.as_slice::<i64>().expect("classes"));
    let _ = sess.close();
}
