//! A TensorFlow 2.21 `tf.compat.v1` graph that parses `tf.Example` protos runs in
//! actorflow with TensorFlow's answers: `tf.io.parse_example` (`ParseExampleV2`
//! with FixedLenFeature, VarLenFeature, FixedLenSequenceFeature and
//! RaggedFeature), the V1 `ParseExample` op and `tf.io.parse_single_example`, as a
//! TF1 input pipeline or a TensorFlow Serving classify/regress signature builds
//! them.
//!
//! `kernels/tests/fixtures/gen_parse_example.py` wrote the graph
//! (`parse_example_graph.pb`), the feeds, the fetches and TensorFlow's outputs
//! (`parse_example_graph.json`, string values hex), and the error TensorFlow gives
//! a batch missing a required feature.

mod graph_fixture;
use graph_fixture::GraphFixture;

#[test]
fn tensorflow_parse_example_graph_runs_with_tensorflows_answers() {
    let f = GraphFixture::load("parse_example_graph");
    f.check(None);

    // A batch missing the required "score": TensorFlow's InvalidArgument.
    let missing = &f.doc["missing"];
    let mut feeds = f.feed_refs();
    for (name, t) in &mut feeds {
        if *name == "serialized:0" {
            *t = graph_fixture::tensor(&missing["serialized:0"]);
        }
    }
    let fetch = missing["fetch"].as_str().expect("fetch");
    let e = f.session.run(&feeds, &[fetch], &[]).unwrap_err();
    assert_eq!(e.code(), actorflow::graph::Code::InvalidArgument, "{e}");
    let message = missing["message"].as_str().expect("message");
    assert!(
        message.ends_with("Feature: score (data type: float) is required but could not be found."),
        "{message}"
    );
    assert!(e.message().contains(message), "{e}\nTensorFlow: {message}");
    let _ = f.session.close();
}
