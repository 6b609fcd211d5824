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
