//! The graph-optimization workload: `cse_fold_speedup`, the step time of a
//! TensorFlow-written training graph in a session with the graph optimizations
//! off (TensorFlow's L0, both flags false) divided by its step time in a session
//! with them on (the default, L1: constant folding, CSE).
//!
//! The graph is `tests/fixtures/tf_corpus/grad_mlp` (built into the binary): a
//! small MLP (4×3 → 5 ReLU, tanh + sigmoid → 2, softmax cross-entropy plus an L2
//! term) and `tf.gradients` of its loss with respect to its weights and input, as
//! TensorFlow 2's gradient builder writes it: `Shape`s of the fully known shapes,
//! `BroadcastGradientArgs`-style index arithmetic and `Reshape` targets built from
//! them, which fold into `Const`s (89 nodes → 49). Its tensors are tiny, so the
//! figure is the per-node cost the optimizations remove. (actorflow's own gradient
//! builder, as in `mlp_step`, already writes known shapes as constants.)

use crate::graph::import::{graph_def_from_tf_bytes, ImportOptions};
use crate::{npy, OptimizerOptions, Result, Session, SessionOptions, Tensor};

use super::workloads::REPETITION;
use super::{calibrate, time_per_call, Repetition};

const GRAPH: &[u8] = include_bytes!("../../tests/fixtures/tf_corpus/grad_mlp/graph.pb");
const X: &[u8] = include_bytes!("../../tests/fixtures/tf_corpus/grad_mlp/x_0.npy");
const LABELS: &[u8] = include_bytes!("../../tests/fixtures/tf_corpus/grad_mlp/labels_0.npy");
/// The loss and its five gradients, as the fixture's manifest fetches them.
const FETCHES: [&str; 6] = [
    "add_2:0",
    "gradients/AddN_1:0",
    "gradients/BiasAdd_grad/BiasAddGrad:0",
    "gradients/MatMul_1_grad/MatMul_1:0",
    "gradients/add_1_grad/Reshape:0",
    "gradients/MatMul_grad/MatMul:0",
];

fn seconds_per_step(sess: &Session, feeds: &[(&str, Tensor)]) -> Result<f64> {
    let run = || sess.run(feeds, &FETCHES, &[]).map(|_| ());
    let reps = calibrate(REPETITION / 2, run)?;
    time_per_call(reps, run)
}

/// `cse_fold_speedup`; see the module docs.
pub fn cse_fold_speedup() -> Result<Repetition> {
    let graph = graph_def_from_tf_bytes(GRAPH, &ImportOptions::default())?;
    let feeds = vec![
        ("x:0", npy::from_npy_bytes(X)?),
        ("labels:0", npy::from_npy_bytes(LABELS)?),
    ];
    let open = |optimizer: OptimizerOptions| {
        Session::new(&graph, SessionOptions::default().with_optimizer(optimizer))
    };
    let on = open(OptimizerOptions::default())?;
    let off = open(OptimizerOptions::disabled())?;
    Ok(Box::new(move || {
        let t_off = seconds_per_step(&off, &feeds)?;
        let t_on = seconds_per_step(&on, &feeds)?;
        Ok(t_off / t_on)
    }))
}
