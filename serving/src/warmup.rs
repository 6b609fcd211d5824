//! Warming a version up before it takes traffic, so that its first requests do
//! not pay for step compilation (pruning, placement, partitioning, kernel
//! construction) and first-touch allocation.
//!
//! As TensorFlow Serving does, a version whose SavedModel has
//! `assets.extra/tf_serving_warmup_requests` (a TFRecord file of
//! `PredictionLog`s: predict, classify, regress or multi-inference requests, at
//! most [`MAX_WARMUP_RECORDS`]) replays each of them through the servable; any
//! failure fails the load, so a version that cannot answer its own warmup
//! requests never serves. A version without the file gets a synthetic predict
//! request per signature instead (zeros, or empty strings, of batch size 1 and
//! the signature's shapes with unknown dimensions at 1); a synthetic request
//! the model refuses (it might need real strings, e.g. serialized examples) is
//! only logged, since the data was made up.
//!
//! Warmup runs on the load thread, on a current-thread async runtime of its
//! own, and with batching on it goes through the batchers as requests do.

use std::path::Path;

use actors::saved_model::ASSETS_EXTRA_DIRECTORY;
use graph::{DType, Result, Status, Tensor};
use prost::Message;
use proto::tensorflow::serving as pb;

use crate::servable::Servable;

/// The warmup file's name under `assets.extra/`.
pub const WARMUP_FILENAME: &str = "tf_serving_warmup_requests";

/// The most records a warmup file may hold (TensorFlow Serving's limit).
pub const MAX_WARMUP_RECORDS: usize = 1000;

/// Warms `servable`, loaded from `dir`, up; see the module docs.
pub fn warm_up(servable: &Servable, dir: &Path) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Status::resource_exhausted(format!("cannot start a warmup runtime: {e}")))?;
    let path = dir.join(ASSETS_EXTRA_DIRECTORY).join(WARMUP_FILENAME);
    if path.exists() {
        let bytes = std::fs::read(&path)
            .map_err(|e| Status::data_loss(format!("cannot read {}: {e}", path.display())))?;
        let n = rt.block_on(replay(servable, &bytes)).map_err(|e| {
            e.context(format!(
                "warmup of {} from {}",
                servable.id(),
                path.display()
            ))
        })?;
        tracing::info!(servable = %servable.id(), records = n, "warmed up from the warmup file");
        return Ok(());
    }
    for key in servable.model().signatures().keys() {
        match rt.block_on(synthetic(servable, key)) {
            Ok(()) => {}
            Err(e) => tracing::info!(
                servable = %servable.id(),
                signature = %key,
                error = %e,
                "a synthetic warmup request was refused; the first request pays the compilation"
            ),
        }
    }
    Ok(())
}

/// Replays the records of a warmup file; returns how many ran.
async fn replay(servable: &Servable, bytes: &[u8]) -> Result<usize> {
    let records = kernels::record::read_records(bytes)?;
    if records.len() > MAX_WARMUP_RECORDS {
        return Err(Status::invalid_argument(format!(
            "Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS})"
        )));
    }
    for (i, r) in records.iter().enumerate() {
        let log = pb::PredictionLog::decode(*r).map_err(|e| {
            Status::data_loss(format!("warmup record {i} is not a PredictionLog: {e}"))
        })?;
        run_log(servable, &log)
            .await
            .map_err(|e| e.context(format!("warmup record {i}")))?;
    }
    Ok(records.len())
}

async fn run_log(servable: &Servable, log: &pb::PredictionLog) -> Result<()> {
    use pb::prediction_log::LogType;
    let missing = || Status::invalid_argument("the log has no request");
    match &log.log_type {
        Some(LogType::PredictLog(p)) => {
            let req = p.request.as_ref().ok_or_else(missing)?;
            let sig = spec_signature(req.model_spec.as_ref());
            let mut inputs = Vec::with_capacity(req.inputs.len());
            for (k, t) in &req.inputs {
                let t = graph::import::tensor_from_proto(t)
                    .map_err(|e| e.context(format!("input '{k}'")))?;
                inputs.push((k.clone(), t));
            }
            servable.predict(sig, inputs, &req.output_filter).await?;
        }
        Some(LogType::ClassifyLog(c)) => {
            let req = c.request.as_ref().ok_or_else(missing)?;
            let input = req.input.as_ref().ok_or_else(missing)?;
            servable
                .classify(spec_signature(req.model_spec.as_ref()), input)
                .await?;
        }
        Some(LogType::RegressLog(r)) => {
            let req = r.request.as_ref().ok_or_else(missing)?;
            let input = req.input.as_ref().ok_or_else(missing)?;
            servable
                .regress(spec_signature(req.model_spec.as_ref()), input)
                .await?;
        }
        Some(LogType::MultiInferenceLog(m)) => {
            let req = m.request.as_ref().ok_or_else(missing)?;
            let input = req.input.as_ref().ok_or_else(missing)?;
            for task in &req.tasks {
                let sig = spec_signature(task.model_spec.as_ref());
                match task.method_name.as_str() {
                    actors::saved_model::CLASSIFY_METHOD_NAME => {
                        servable.classify(sig, input).await?;
                    }
                    actors::saved_model::REGRESS_METHOD_NAME => {
                        servable.regress(sig, input).await?;
                    }
                    other => {
                        return Err(Status::unimplemented(format!(
                            "Unsupported signature method_name: {other}"
                        )))
                    }
                }
            }
        }
        Some(other) => {
            let kind = match other {
                LogType::SessionRunLog(_) => "session_run_log",
                _ => "this log type",
            };
            return Err(Status::unimplemented(format!(
                "Unsupported log_type for warmup: {kind}"
            )));
        }
        None => return Err(Status::invalid_argument("a warmup record has no log")),
    }
    Ok(())
}

fn spec_signature(spec: Option<&pb::ModelSpec>) -> &str {
    spec.map(|s| s.signature_name.as_str()).unwrap_or("")
}

/// One synthetic request for signature `key`.
async fn synthetic(servable: &Servable, key: &str) -> Result<()> {
    let (_, sig) = servable.signature(key)?;
    let mut inputs = Vec::with_capacity(sig.inputs.len());
    for (k, spec) in &sig.inputs {
        if sig.defaults.contains_key(k) {
            continue;
        }
        let dims: Vec<usize> = match spec.shape.dims() {
            Some(d) => d.iter().map(|x| x.unwrap_or(1)).collect(),
            None => vec![1],
        };
        let t = match spec.dtype {
            DType::String => {
                let n = dims.iter().product::<usize>();
                Tensor::from_strings(&dims, vec![bytes::Bytes::new(); n])?
            }
            d => Tensor::try_zeros(d, dims.as_slice())?,
        };
        inputs.push((k.clone(), t));
    }
    servable.predict(key, inputs, &[]).await.map(|_| ())
}
