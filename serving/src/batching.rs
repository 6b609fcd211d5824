//! The batching actor: merges concurrent requests for one signature of one
//! model version into one session run (TensorFlow Serving's inter-request
//! batching). Being written: see the crate docs.

use std::collections::BTreeMap;
use std::sync::Arc;

use graph::{Result, Tensor};

use crate::config::BatchingOptions;
use crate::metrics::BatchMetrics;

/// What a batcher runs: one signature of one session, on inputs by input key,
/// returning every output by output key. Blocking: the batcher calls it on its
/// own batch threads.
pub trait BatchRunner: Send + Sync + 'static {
    /// Runs one (merged) batch.
    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<BTreeMap<String, Tensor>>;
}

/// A batcher for one signature; see the module docs.
pub struct Batcher {
    runner: Arc<dyn BatchRunner>,
}

impl Batcher {
    /// A batcher running merged batches through `runner`.
    pub fn new(
        options: BatchingOptions,
        runner: Arc<dyn BatchRunner>,
        metrics: Option<BatchMetrics>,
    ) -> Batcher {
        let _ = (options, metrics);
        Batcher { runner }
    }

    /// Submits one request's inputs and waits for its share of the outputs.
    pub async fn submit(&self, inputs: Vec<(String, Tensor)>) -> Result<BTreeMap<String, Tensor>> {
        self.runner.run(inputs)
    }
}
