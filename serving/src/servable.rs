//! [`Servable`]: one loaded version of a model — its SavedModel, a batcher per
//! signature when batching is on — and the entry points every API calls:
//! [`Servable::predict`], [`Servable::classify`], [`Servable::regress`].
//!
//! A servable is immutable once loaded and shared as `Arc<Servable>`: a request
//! takes its own reference from the published serving map, so a version that
//! is unloaded while requests run stays alive until the last of them ends.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use actors::saved_model::{SavedModel, Signature, DEFAULT_SERVING_SIGNATURE_DEF_KEY, TAG_SERVE};
use actors::{RunArgs, Session, SessionOptions};
use graph::{Result, Status, Tensor};

use crate::batching::{Batcher, BatchRunner};
use crate::config::BatchingOptions;
use crate::metrics::Metrics;

/// A model name and version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServableId {
    /// The model's name.
    pub name: String,
    /// The version (the number of its directory under the base path).
    pub version: i64,
}

impl std::fmt::Display for ServableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{name: {} version: {}}}", self.name, self.version)
    }
}

/// The outputs of one [`Servable::predict`].
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// The signature that ran (the default one when the request named none).
    pub signature: String,
    /// The requested outputs by output key.
    pub outputs: BTreeMap<String, Tensor>,
}

/// A loaded model version; see the module docs.
pub struct Servable {
    id: ServableId,
    model: SavedModel,
    batchers: BTreeMap<String, Batcher>,
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for Servable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Servable")
            .field("id", &self.id)
            .field("model", &self.model)
            .field("batched_signatures", &self.batchers.keys())
            .finish_non_exhaustive()
    }
}

impl Servable {
    /// Loads version `id` from `dir` (a SavedModel tagged `serve`), with a
    /// batcher for each signature when `batching` is set.
    pub fn load(
        id: ServableId,
        dir: &Path,
        session: SessionOptions,
        batching: Option<&BatchingOptions>,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Servable> {
        let model = SavedModel::load_with(dir, &[TAG_SERVE], session)?;
        Ok(Servable::new(id, model, batching, metrics))
    }

    /// A servable of an already loaded `model`.
    pub fn new(
        id: ServableId,
        model: SavedModel,
        batching: Option<&BatchingOptions>,
        metrics: Option<Arc<Metrics>>,
    ) -> Servable {
        let mut batchers = BTreeMap::new();
        if let Some(options) = batching {
            for (key, sig) in model.signatures() {
                let runner = SignatureRunner {
                    session: model.session().clone(),
                    signature: sig.clone(),
                    key: key.clone(),
                };
                let hook = metrics
                    .as_ref()
                    .map(|m| m.batch_hook(&id.name, key));
                batchers.insert(
                    key.clone(),
                    Batcher::new(options.clone(), Arc::new(runner), hook),
                );
            }
        }
        Servable {
            id,
            model,
            batchers,
            metrics,
        }
    }

    /// Its name and version.
    pub fn id(&self) -> &ServableId {
        &self.id
    }

    /// The loaded SavedModel.
    pub fn model(&self) -> &SavedModel {
        &self.model
    }

    /// The signature a request names (`""`: `serving_default`), with its key;
    /// `InvalidArgument` for a key the model does not have (TensorFlow Serving's
    /// code for it).
    pub fn signature<'a>(&'a self, key: &'a str) -> Result<(&'a str, &'a Signature)> {
        let key = if key.is_empty() {
            DEFAULT_SERVING_SIGNATURE_DEF_KEY
        } else {
            key
        };
        match self.model.signatures().get(key) {
            Some(s) => Ok((key, s)),
            None => Err(Status::invalid_argument(format!(
                "Serving signature key \"{key}\" not found."
            ))),
        }
    }

    /// Runs signature `signature` on `inputs` (by input key) and returns the
    /// outputs `output_filter` names (every output when it is empty). Inputs
    /// are checked against the signature (unknown, missing or repeated keys,
    /// dtypes, shapes: `InvalidArgument`) before anything runs; with batching on,
    /// the request joins a batch.
    pub async fn predict(
        &self,
        signature: &str,
        inputs: Vec<(String, Tensor)>,
        output_filter: &[String],
    ) -> Result<Prediction> {
        let (key, sig) = self.signature(signature)?;
        let outputs = output_keys(key, sig, output_filter)?;
        let refs: Vec<(&str, Tensor)> = inputs.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
        // Validates keys, dtypes and shapes, and fills defaults.
        sig.feeds(key, &refs)?;
        let mut values = match self.batchers.get(key) {
            Some(b) => b.submit(inputs).await?,
            None => {
                let runner = SignatureRunner {
                    session: self.model.session().clone(),
                    signature: sig.clone(),
                    key: key.to_owned(),
                };
                runner.run_outputs(inputs, &outputs).await?
            }
        };
        let mut out = BTreeMap::new();
        for k in outputs {
            let t = values.remove(&k).ok_or_else(|| {
                Status::internal(format!("output '{k}' of signature '{key}' was not computed"))
            })?;
            out.insert(k, t);
        }
        Ok(Prediction {
            signature: key.to_owned(),
            outputs: out,
        })
    }

    /// The metrics this servable reports to, if any.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }
}

/// The output keys a request wants: `filter` (each once, each an output of
/// `sig`), or every output when it is empty.
fn output_keys(key: &str, sig: &Signature, filter: &[String]) -> Result<Vec<String>> {
    if filter.is_empty() {
        return Ok(sig.outputs.keys().cloned().collect());
    }
    let mut seen = std::collections::BTreeSet::new();
    for k in filter {
        if !sig.outputs.contains_key(k) {
            return Err(Status::invalid_argument(format!(
                "output tensor alias not found in signature: {k} Outputs expected to be in the set {{{}}}.",
                sig.outputs.keys().cloned().collect::<Vec<_>>().join(",")
            )));
        }
        if !seen.insert(k.as_str()) {
            return Err(Status::invalid_argument(format!(
                "duplicate output tensor alias: {k} in signature '{key}'"
            )));
        }
    }
    Ok(filter.to_vec())
}

/// Runs one signature of a session: what a batcher calls with a merged batch,
/// and what an unbatched request calls directly.
pub(crate) struct SignatureRunner {
    session: Session,
    signature: Signature,
    key: String,
}

impl SignatureRunner {
    /// The session step that runs the signature on `inputs` (by input key;
    /// defaults fill the rest) fetching `outputs` (by output key).
    fn args(&self, inputs: &[(String, Tensor)], outputs: &[String]) -> Result<RunArgs> {
        let refs: Vec<(&str, Tensor)> = inputs.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
        let feeds = self.signature.feeds(&self.key, &refs)?;
        let mut fetches = Vec::with_capacity(outputs.len());
        for k in outputs {
            let spec = self.signature.outputs.get(k).ok_or_else(|| {
                Status::invalid_argument(format!("output '{k}' is not in signature '{}'", self.key))
            })?;
            fetches.push(spec.name.clone());
        }
        Ok(RunArgs {
            feeds,
            fetches,
            ..RunArgs::default()
        })
    }

    /// Runs the signature without blocking a thread.
    pub(crate) async fn run_outputs(
        &self,
        inputs: Vec<(String, Tensor)>,
        outputs: &[String],
    ) -> Result<BTreeMap<String, Tensor>> {
        let args = self.args(&inputs, outputs)?;
        let out = self.session.run_async(&args).await?;
        Ok(outputs.iter().cloned().zip(out.outputs).collect())
    }
}

impl BatchRunner for SignatureRunner {
    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<BTreeMap<String, Tensor>> {
        let outputs: Vec<String> = self.signature.outputs.keys().cloned().collect();
        let args = self.args(&inputs, &outputs)?;
        let out = self.session.run_with(&args)?;
        Ok(outputs.into_iter().zip(out.outputs).collect())
    }
}
