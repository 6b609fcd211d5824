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

use actors::saved_model::{
    SavedModel, Signature, CLASSIFY_METHOD_NAME, DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    REGRESS_METHOD_NAME, TAG_SERVE,
};
use actors::{RunArgs, Session, SessionOptions};
use graph::{DType, Result, Status, Tensor};
use prost::Message;
use proto::tensorflow::serving as pb;

use crate::batching::{BatchRunner, Batcher};
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
                let hook = metrics.as_ref().map(|m| m.batch_hook(&id.name, key));
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
        let mut values = self.run_signature(key, sig, inputs, &outputs).await?;
        let mut out = BTreeMap::new();
        for k in outputs {
            let t = values.remove(&k).ok_or_else(|| {
                Status::internal(format!(
                    "output '{k}' of signature '{key}' was not computed"
                ))
            })?;
            out.insert(k, t);
        }
        Ok(Prediction {
            signature: key.to_owned(),
            outputs: out,
        })
    }

    /// Runs signature `key` on `inputs` (checked against it first: unknown,
    /// missing or repeated keys, dtypes, shapes are `InvalidArgument`), through
    /// its batcher when batching is on, and returns at least `outputs`.
    async fn run_signature(
        &self,
        key: &str,
        sig: &Signature,
        inputs: Vec<(String, Tensor)>,
        outputs: &[String],
    ) -> Result<BTreeMap<String, Tensor>> {
        let refs: Vec<(&str, Tensor)> = inputs
            .iter()
            .map(|(k, t)| (k.as_str(), t.clone()))
            .collect();
        sig.feeds(key, &refs)?;
        match self.batchers.get(key) {
            Some(b) => b.submit(inputs).await,
            None => {
                let runner = SignatureRunner {
                    session: self.model.session().clone(),
                    signature: sig.clone(),
                    key: key.to_owned(),
                };
                runner.run_outputs(inputs, outputs).await
            }
        }
    }

    /// Classifies the examples of `input` with signature `signature` (a
    /// `tensorflow/serving/classify` signature: one input of serialized
    /// `tf.Example`s, outputs `classes` and/or `scores` of shape
    /// `[examples, classes]`), as TensorFlow Serving's classifier does; returns
    /// the signature key that ran and one `Classifications` per example.
    pub async fn classify(
        &self,
        signature: &str,
        input: &pb::Input,
    ) -> Result<(String, pb::ClassificationResult)> {
        let (key, sig) = self.signature(signature)?;
        check_method(sig, CLASSIFY_METHOD_NAME, "classification")?;
        let in_key = single_input(sig)?;
        if sig.outputs.is_empty() || sig.outputs.len() > 2 {
            return Err(Status::invalid_argument(format!(
                "Expected one or two output Tensors, found {}",
                sig.outputs.len()
            )));
        }
        let has_classes = sig.outputs.contains_key(CLASSIFY_OUTPUT_CLASSES);
        let has_scores = sig.outputs.contains_key(CLASSIFY_OUTPUT_SCORES);
        if !has_classes && !has_scores {
            return Err(Status::invalid_argument(format!(
                "Expected classification signature outputs to contain at least one of {CLASSIFY_OUTPUT_CLASSES}, {CLASSIFY_OUTPUT_SCORES}."
            )));
        }
        let examples = serialized_examples(input)?;
        let n = examples.dims()[0];
        let outputs: Vec<String> = [CLASSIFY_OUTPUT_CLASSES, CLASSIFY_OUTPUT_SCORES]
            .into_iter()
            .filter(|k| sig.outputs.contains_key(*k))
            .map(str::to_owned)
            .collect();
        let values = self
            .run_signature(key, sig, vec![(in_key, examples)], &outputs)
            .await?;
        let classes = values.get(CLASSIFY_OUTPUT_CLASSES);
        let scores = values.get(CLASSIFY_OUTPUT_SCORES);
        let width = |t: &Tensor, what: &str| -> Result<usize> {
            if t.rank() != 2 || t.dims()[0] != n {
                return Err(Status::invalid_argument(format!(
                    "Expected {what} Tensor shape: [batch_size num_classes] but got {}",
                    t.shape()
                )));
            }
            Ok(t.dims()[1])
        };
        let mut num_classes = None;
        let labels = match classes {
            Some(t) => {
                if t.dtype() != DType::String {
                    return Err(Status::invalid_argument(format!(
                        "Expected classes Tensor of DT_STRING. Got: {}",
                        t.dtype()
                    )));
                }
                num_classes = Some(width(t, "classes")?);
                Some(t.as_strings()?)
            }
            None => None,
        };
        let score_values = match scores {
            Some(t) => {
                if t.dtype() != DType::F32 {
                    return Err(Status::invalid_argument(format!(
                        "Expected scores Tensor of DT_FLOAT. Got: {}",
                        t.dtype()
                    )));
                }
                let w = width(t, "scores")?;
                if num_classes.is_some_and(|c| c != w) {
                    return Err(Status::invalid_argument(format!(
                        "Tensors class and score should match in dim[1]. Got {} vs. {w}",
                        num_classes.unwrap_or(0)
                    )));
                }
                num_classes = Some(w);
                Some(t.as_slice::<f32>()?)
            }
            None => None,
        };
        let c = num_classes.unwrap_or(0);
        let classifications = (0..n)
            .map(|i| pb::Classifications {
                classes: (0..c)
                    .map(|j| pb::Class {
                        label: labels
                            .map(|l| String::from_utf8_lossy(&l[i * c + j]).into_owned())
                            .unwrap_or_default(),
                        score: score_values.map(|s| s[i * c + j]).unwrap_or(0.0),
                    })
                    .collect(),
            })
            .collect();
        Ok((key.to_owned(), pb::ClassificationResult { classifications }))
    }

    /// Regresses the examples of `input` with signature `signature` (a
    /// `tensorflow/serving/regress` signature: one input of serialized
    /// `tf.Example`s, output `outputs` of shape `[examples]` or
    /// `[examples, 1]`), as TensorFlow Serving's regressor does.
    pub async fn regress(
        &self,
        signature: &str,
        input: &pb::Input,
    ) -> Result<(String, pb::RegressionResult)> {
        let (key, sig) = self.signature(signature)?;
        check_method(sig, REGRESS_METHOD_NAME, "regression")?;
        let in_key = single_input(sig)?;
        if sig.outputs.len() != 1 {
            return Err(Status::invalid_argument(format!(
                "Expected one output Tensor, found {}",
                sig.outputs.len()
            )));
        }
        if !sig.outputs.contains_key(REGRESS_OUTPUTS) {
            return Err(Status::invalid_argument(format!(
                "No output Tensor named {REGRESS_OUTPUTS} in the regression signature."
            )));
        }
        let examples = serialized_examples(input)?;
        let n = examples.dims()[0];
        let outputs = vec![REGRESS_OUTPUTS.to_owned()];
        let values = self
            .run_signature(key, sig, vec![(in_key, examples)], &outputs)
            .await?;
        let t = values.get(REGRESS_OUTPUTS).ok_or_else(|| {
            Status::internal(format!("output '{REGRESS_OUTPUTS}' was not computed"))
        })?;
        let shape_ok = (t.rank() == 1 && t.dims()[0] == n)
            || (t.rank() == 2 && t.dims()[0] == n && t.dims()[1] == 1);
        if !shape_ok {
            return Err(Status::invalid_argument(format!(
                "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got {}",
                t.shape()
            )));
        }
        if t.dtype() != DType::F32 {
            return Err(Status::invalid_argument(format!(
                "Expected output Tensor of DT_FLOAT. Got: {}",
                t.dtype()
            )));
        }
        let regressions = t
            .as_slice::<f32>()?
            .iter()
            .map(|&value| pb::Regression { value })
            .collect();
        Ok((key.to_owned(), pb::RegressionResult { regressions }))
    }

    /// How many batches its batchers have run (one session run each); 0
    /// without batching.
    pub fn batch_runs(&self) -> u64 {
        self.batchers.values().map(Batcher::runs).sum()
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

/// The input key of classify signatures (TensorFlow's `signature_constants`).
pub const CLASSIFY_INPUTS: &str = "inputs";
/// The class-label output of classify signatures.
pub const CLASSIFY_OUTPUT_CLASSES: &str = "classes";
/// The score output of classify signatures.
pub const CLASSIFY_OUTPUT_SCORES: &str = "scores";
/// The output of regress signatures.
pub const REGRESS_OUTPUTS: &str = "outputs";

fn check_method(sig: &Signature, method: &str, what: &str) -> Result<()> {
    if sig.method_name != method {
        return Err(Status::invalid_argument(format!(
            "Expected {what} signature method_name to be {method}. Was: {}",
            sig.method_name
        )));
    }
    Ok(())
}

/// The key of a classify or regress signature's one input.
fn single_input(sig: &Signature) -> Result<String> {
    if sig.inputs.len() != 1 {
        return Err(Status::invalid_argument("Expected one input Tensor."));
    }
    let (k, spec) = sig
        .inputs
        .iter()
        .next()
        .ok_or_else(|| Status::invalid_argument("Expected one input Tensor."))?;
    if spec.dtype != DType::String {
        return Err(Status::invalid_argument(format!(
            "Expected the input Tensor of DT_STRING (serialized tf.Examples), got {}",
            spec.dtype
        )));
    }
    Ok(k.clone())
}

/// The examples of `input` as a `[n]` string tensor of serialized
/// `tf.Example`s. With a context, each example is the context's bytes followed
/// by the example's, as TensorFlow Serving writes them: parsing merges the two,
/// and the example's own features win.
pub fn serialized_examples(input: &pb::Input) -> Result<Tensor> {
    let serialized: Vec<Vec<u8>> = match &input.kind {
        Some(pb::input::Kind::ExampleList(l)) => l.examples.iter().map(encode_example).collect(),
        Some(pb::input::Kind::ExampleListWithContext(l)) => {
            let context = l.context.as_ref().map(encode_example).unwrap_or_default();
            l.examples
                .iter()
                .map(|e| {
                    let mut b = context.clone();
                    b.extend_from_slice(&encode_example(e));
                    b
                })
                .collect()
        }
        None => return Err(Status::invalid_argument("Input is empty.")),
    };
    if serialized.is_empty() {
        return Err(Status::invalid_argument("Input is empty."));
    }
    let n = serialized.len();
    Tensor::from_strings(&[n], serialized)
}

/// `e`'s bytes as TensorFlow's C++ protobuf writes them: every feature map
/// entry with its value, even an empty `Feature`. (prost leaves a default map
/// value out, which protobuf allows, but TensorFlow's fast example parser
/// refuses such an entry: "Could not parse example input".)
fn encode_example(e: &proto::tensorflow::Example) -> Vec<u8> {
    use prost::encoding::{encode_key, encode_varint, WireType};
    let mut out = Vec::new();
    let Some(features) = &e.features else {
        return out;
    };
    let mut map = Vec::new();
    for (name, feature) in &features.feature {
        let value = feature.encode_to_vec();
        let mut entry = Vec::with_capacity(name.len() + value.len() + 8);
        encode_key(1, WireType::LengthDelimited, &mut entry);
        encode_varint(name.len() as u64, &mut entry);
        entry.extend_from_slice(name.as_bytes());
        encode_key(2, WireType::LengthDelimited, &mut entry);
        encode_varint(value.len() as u64, &mut entry);
        entry.extend_from_slice(&value);
        encode_key(1, WireType::LengthDelimited, &mut map);
        encode_varint(entry.len() as u64, &mut map);
        map.extend_from_slice(&entry);
    }
    encode_key(1, WireType::LengthDelimited, &mut out);
    encode_varint(map.len() as u64, &mut out);
    out.extend_from_slice(&map);
    out
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
        let refs: Vec<(&str, Tensor)> = inputs
            .iter()
            .map(|(k, t)| (k.as_str(), t.clone()))
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use proto::tensorflow::{feature, BytesList, Example, Feature, Features};

    #[test]
    fn examples_are_written_as_tensorflow_writes_them() {
        // Bytes from TensorFlow's Python protobuf (C++ layout):
        // Example(features=Features(feature={"tag": Feature()})).SerializeToString()
        let empty = Example {
            features: Some(Features {
                feature: [("tag".to_owned(), Feature { kind: None })]
                    .into_iter()
                    .collect(),
            }),
        };
        assert_eq!(encode_example(&empty), b"\n\x09\n\x07\n\x03tag\x12\x00");
        // A non-empty feature: the same bytes prost writes.
        let one = Example {
            features: Some(Features {
                feature: [(
                    "s".to_owned(),
                    Feature {
                        kind: Some(feature::Kind::BytesList(BytesList {
                            value: vec![b"ab".to_vec()],
                        })),
                    },
                )]
                .into_iter()
                .collect(),
            }),
        };
        assert_eq!(encode_example(&one), one.encode_to_vec());
        assert!(encode_example(&Example::default()).is_empty());
        // With a context: the context's bytes, then the example's.
        let input = pb::Input {
            kind: Some(pb::input::Kind::ExampleListWithContext(
                pb::ExampleListWithContext {
                    examples: vec![one.clone(), empty.clone()],
                    context: Some(empty.clone()),
                },
            )),
        };
        let t = serialized_examples(&input).unwrap();
        assert_eq!(t.dims(), &[2]);
        let s = t.as_strings().unwrap();
        assert_eq!(
            &s[0][..],
            [encode_example(&empty), encode_example(&one)].concat()
        );
        let none = pb::Input { kind: None };
        assert_eq!(
            serialized_examples(&none).unwrap_err().code(),
            graph::Code::InvalidArgument
        );
    }
}
