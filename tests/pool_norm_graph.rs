//! A TensorFlow 2.21 `tf.compat.v1` graph of the conv-free pieces of a CNN runs in
//! actorflow with TensorFlow's answers: `MaxPool` -> `FusedBatchNormV3`
//! (training) -> `AvgPool` -> `LRN` -> `FusedBatchNormV3` (inference) -> a sum
//! of squares, and `tf.gradients` of it with respect to the input, the scale and
//! the offset (`MaxPoolGrad`, `FusedBatchNormGradV3` in both modes, `AvgPoolGrad`,
//! `LRNGrad`, as TensorFlow's `nn_grad.py` builds them).
//!
//! `kernels/tests/fixtures/gen_pool_norm.py` wrote the graph
//! (`pool_norm_graph.pb`), the feeds, the fetches and TensorFlow's outputs
//! (`pool_norm_graph.json`).

mod graph_fixture;
use graph_fixture::GraphFixture;

#[test]
fn tensorflow_pooling_and_batch_norm_graph_runs_with_tensorflows_answers() {
    let f = GraphFixture::load("pool_norm_graph");
    f.check(Some((1e-4, 1e-4)));
    let _ = f.session.close();
}
