//! A TensorFlow 2.21 `tf.compat.v1` embedding-style graph runs in actorflow with
//! TensorFlow's answers: bags of table rows by `tf.sparse.segment_sum`/`mean`/
//! `sqrt_n`, `tf.unique` + `tf.math.unsorted_segment_max`, `tf.math.segment_mean`,
//! `tf.einsum` projections and scores, `tf.math.top_k`, `tf.gather_nd`,
//! `tf.linalg.band_part`, `tf.reverse_sequence`, `tf.scatter_nd` and
//! `tf.tensor_scatter_nd_update`, then `tf.gradients` of the loss with respect to
//! the table, the projection and the queries (`SparseSegment*Grad`, the segment,
//! top-k, einsum and scatter gradients as TensorFlow's Python builds them).
//!
//! `kernels/tests/fixtures/gen_segment_index.py` wrote the graph
//! (`embedding_graph.pb`), the feeds, the fetches and TensorFlow's outputs
//! (`embedding_graph.json`).

mod graph_fixture;
use graph_fixture::GraphFixture;

#[test]
fn tensorflow_embedding_graph_runs_with_tensorflows_answers() {
    let f = GraphFixture::load("embedding_graph");
    f.check(Some((1e-4, 1e-4)));
    let _ = f.session.close();
}
