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
