//! What the server serves and how: [`ServerOptions`] (TensorFlow Serving's
//! command-line flags), a [`ModelConfig`] per model (its name, base path,
//! [`VersionPolicy`] and version labels, as in TensorFlow Serving's
//! `ModelServerConfig` text files), and [`BatchingOptions`] (its
//! `BatchingParameters`).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use actors::SessionOptions;
use graph::{Result, Status};
use proto::tensorflow::serving as pb;

/// Which of the numbered version directories under a base path to serve
/// (TensorFlow Serving's `ServableVersionPolicy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionPolicy {
    /// The `n` highest versions (TensorFlow Serving's default: the latest one).
    Latest(u32),
    /// Every version.
    All,
    /// Exactly these versions (those that exist).
    Specific(Vec<i64>),
}

impl Default for VersionPolicy {
    fn default() -> VersionPolicy {
        VersionPolicy::Latest(1)
    }
}

impl VersionPolicy {
    /// The versions to serve among `available` (any order); sorted ascending.
    pub fn select(&self, available: &[i64]) -> Vec<i64> {
        let mut v: Vec<i64> = available.to_vec();
        v.sort_unstable();
        v.dedup();
        match self {
            VersionPolicy::Latest(n) => {
                let keep = (*n).max(1) as usize;
                let skip = v.len().saturating_sub(keep);
                v.split_off(skip)
            }
            VersionPolicy::All => v,
            VersionPolicy::Specific(want) => v.into_iter().filter(|x| want.contains(x)).collect(),
        }
    }
}

/// One model: where its versions live and which to serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    /// The name clients ask for.
    pub name: String,
    /// The directory holding one numbered directory per version (`1/`, `2/`, …),
    /// each a SavedModel.
    pub base_path: PathBuf,
    /// Which versions to serve.
    pub policy: VersionPolicy,
    /// Version labels (`stable`, `canary`, …) and the versions they name.
    pub labels: BTreeMap<String, i64>,
}

impl ModelConfig {
    /// A model serving the latest version under `base_path`.
    pub fn new(name: impl Into<String>, base_path: impl Into<PathBuf>) -> ModelConfig {
        ModelConfig {
            name: name.into(),
            base_path: base_path.into(),
            policy: VersionPolicy::default(),
            labels: BTreeMap::new(),
        }
    }

    /// With version policy `policy`.
    pub fn with_policy(mut self, policy: VersionPolicy) -> ModelConfig {
        self.policy = policy;
        self
    }

    /// With label `label` naming `version`.
    pub fn with_label(mut self, label: impl Into<String>, version: i64) -> ModelConfig {
        self.labels.insert(label.into(), version);
        self
    }

    /// Reads one `ModelConfig` of a `ModelServerConfig`. A relative base path is
    /// taken relative to `relative_to` (the config file's directory).
    pub fn from_proto(p: &pb::ModelConfig, relative_to: &Path) -> Result<ModelConfig> {
        if p.name.is_empty() {
            return Err(Status::invalid_argument("a model config has no name"));
        }
        if p.base_path.is_empty() {
            return Err(Status::invalid_argument(format!(
                "model config '{}' has no base_path",
                p.name
            )));
        }
        if !p.model_platform.is_empty() && p.model_platform != "tensorflow" {
            return Err(Status::invalid_argument(format!(
                "model '{}': model_platform '{}' is not served (only 'tensorflow')",
                p.name, p.model_platform
            )));
        }
        use pb::file_system_storage_path_source_config::servable_version_policy::PolicyChoice;
        let policy = match p
            .model_version_policy
            .as_ref()
            .and_then(|v| v.policy_choice.as_ref())
        {
            None => VersionPolicy::default(),
            Some(PolicyChoice::Latest(l)) => VersionPolicy::Latest(l.num_versions.max(1)),
            Some(PolicyChoice::All(_)) => VersionPolicy::All,
            Some(PolicyChoice::Specific(s)) => {
                if s.versions.is_empty() {
                    return Err(Status::invalid_argument(format!(
                        "model '{}': a specific version policy names no version",
                        p.name
                    )));
                }
                VersionPolicy::Specific(s.versions.clone())
            }
        };
        let base = PathBuf::from(&p.base_path);
        let base_path = if base.is_relative() {
            relative_to.join(base)
        } else {
            base
        };
        Ok(ModelConfig {
            name: p.name.clone(),
            base_path,
            policy,
            labels: p.version_labels.clone().into_iter().collect(),
        })
    }
}

/// Reads a `ModelServerConfig` in protobuf text format (TensorFlow Serving's
/// `--model_config_file`): its `model_config_list`. Duplicate model names are
/// `InvalidArgument`.
pub fn read_model_config_file(path: &Path) -> Result<Vec<ModelConfig>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Status::not_found(format!(
            "cannot read model config file {}: {e}",
            path.display()
        ))
    })?;
    let p: pb::ModelServerConfig = proto::text::from_text(&text)
        .map_err(|e| Status::invalid_argument(format!("{}: {e}", path.display())))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    model_configs(&p, dir)
}

/// The models of a `ModelServerConfig`; see [`read_model_config_file`].
pub fn model_configs(p: &pb::ModelServerConfig, relative_to: &Path) -> Result<Vec<ModelConfig>> {
    let list = match &p.config {
        Some(pb::model_server_config::Config::ModelConfigList(l)) => l,
        Some(pb::model_server_config::Config::CustomModelConfig(_)) => {
            return Err(Status::unimplemented(
                "custom_model_config is not supported; use model_config_list",
            ))
        }
        None => return Ok(Vec::new()),
    };
    let mut out: Vec<ModelConfig> = Vec::with_capacity(list.config.len());
    for c in &list.config {
        let m = ModelConfig::from_proto(c, relative_to)?;
        if out.iter().any(|o| o.name == m.name) {
            return Err(Status::invalid_argument(format!(
                "model '{}' is configured twice",
                m.name
            )));
        }
        out.push(m);
    }
    Ok(out)
}

/// Inter-request batching (TensorFlow Serving's `BatchingParameters`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchingOptions {
    /// The most examples (rows of the 0th dimension) in one batch.
    pub max_batch_size: usize,
    /// How long a batch waits for more requests after its first one.
    pub batch_timeout: Duration,
    /// Batches waiting to run, beyond which a request is refused with
    /// `UNAVAILABLE`.
    pub max_enqueued_batches: usize,
    /// Batches that run at once.
    pub num_batch_threads: usize,
    /// Sizes a batch is padded up to (ascending; the last equals
    /// `max_batch_size`); empty: any size.
    pub allowed_batch_sizes: Vec<usize>,
    /// Pad inputs whose dimensions past the 0th differ between requests up to
    /// the largest, instead of refusing to merge them.
    pub pad_variable_length_inputs: bool,
}

impl Default for BatchingOptions {
    /// TensorFlow Serving's defaults.
    fn default() -> BatchingOptions {
        BatchingOptions {
            max_batch_size: 1000,
            batch_timeout: Duration::from_micros(0),
            max_enqueued_batches: 100,
            num_batch_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            allowed_batch_sizes: Vec::new(),
            pad_variable_length_inputs: false,
        }
    }
}

impl BatchingOptions {
    /// Reads TensorFlow Serving's `BatchingParameters`; fields left out keep
    /// their defaults. Inconsistent values (zero sizes, allowed sizes that do not
    /// ascend or do not end at `max_batch_size`) are `InvalidArgument`.
    pub fn from_proto(p: &pb::BatchingParameters) -> Result<BatchingOptions> {
        let d = BatchingOptions::default();
        let positive = |v: Option<i64>, name: &str, default: usize| -> Result<usize> {
            match v {
                None => Ok(default),
                Some(x) if x > 0 => usize::try_from(x).map_err(|_| {
                    Status::invalid_argument(format!("batching parameter {name} is too large"))
                }),
                Some(x) => Err(Status::invalid_argument(format!(
                    "batching parameter {name} must be positive, got {x}"
                ))),
            }
        };
        let o = BatchingOptions {
            max_batch_size: positive(p.max_batch_size, "max_batch_size", d.max_batch_size)?,
            batch_timeout: match p.batch_timeout_micros {
                None => d.batch_timeout,
                Some(x) if x >= 0 => Duration::from_micros(x as u64),
                Some(x) => {
                    return Err(Status::invalid_argument(format!(
                        "batching parameter batch_timeout_micros must not be negative, got {x}"
                    )))
                }
            },
            max_enqueued_batches: positive(
                p.max_enqueued_batches,
                "max_enqueued_batches",
                d.max_enqueued_batches,
            )?,
            num_batch_threads: positive(
                p.num_batch_threads,
                "num_batch_threads",
                d.num_batch_threads,
            )?,
            allowed_batch_sizes: p
                .allowed_batch_sizes
                .iter()
                .map(|&s| positive(Some(s), "allowed_batch_sizes", 0))
                .collect::<Result<_>>()?,
            pad_variable_length_inputs: p.pad_variable_length_inputs,
        };
        o.validate()?;
        Ok(o)
    }

    /// Reads a `BatchingParameters` text file (`--batching_parameters_file`).
    pub fn from_file(path: &Path) -> Result<BatchingOptions> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Status::not_found(format!(
                "cannot read batching parameters file {}: {e}",
                path.display()
            ))
        })?;
        let p: pb::BatchingParameters = proto::text::from_text(&text)
            .map_err(|e| Status::invalid_argument(format!("{}: {e}", path.display())))?;
        BatchingOptions::from_proto(&p).map_err(|e| e.context(path.display().to_string()))
    }

    /// Checks the options are consistent, as TensorFlow Serving does.
    pub fn validate(&self) -> Result<()> {
        if self.max_batch_size == 0 || self.num_batch_threads == 0 || self.max_enqueued_batches == 0
        {
            return Err(Status::invalid_argument(
                "max_batch_size, num_batch_threads and max_enqueued_batches must be positive",
            ));
        }
        if let Some(&last) = self.allowed_batch_sizes.last() {
            if self.allowed_batch_sizes.windows(2).any(|w| w[0] >= w[1]) {
                return Err(Status::invalid_argument(
                    "allowed_batch_sizes must be in increasing order",
                ));
            }
            if last != self.max_batch_size {
                return Err(Status::invalid_argument(format!(
                    "the last entry of allowed_batch_sizes ({last}) must equal max_batch_size ({})",
                    self.max_batch_size
                )));
            }
        }
        Ok(())
    }
}

/// Everything a [`ModelServer`](crate::ModelServer) needs; the field docs name
/// the `actorflow serve` flags (TensorFlow Serving's).
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The address both APIs bind (ours: `--host`; TensorFlow Serving binds every
    /// interface).
    pub host: IpAddr,
    /// `--port`: gRPC (`PredictionService`, `ModelService`); 0 picks a free port.
    pub grpc_port: u16,
    /// `--rest_api_port`: REST; `None` (TensorFlow Serving's 0) serves no REST
    /// API, `Some(0)` picks a free port.
    pub rest_api_port: Option<u16>,
    /// The models (`--model_name`/`--model_base_path`, or `--model_config_file`).
    pub models: Vec<ModelConfig>,
    /// `--file_system_poll_wait_seconds`: how often the source lists the base
    /// paths.
    pub poll_wait: Duration,
    /// `--enable_batching` with `--batching_parameters_file`.
    pub batching: Option<BatchingOptions>,
    /// `--enable_model_warmup`: replay `assets.extra/tf_serving_warmup_requests`
    /// (or, without one, a synthetic request per signature) before a version
    /// takes traffic.
    pub enable_model_warmup: bool,
    /// `--num_load_threads`: versions loading at once, on threads of their own
    /// (never the request path's).
    pub num_load_threads: usize,
    /// `--rest_api_timeout_in_ms`: the longest a REST request may take.
    pub rest_api_timeout: Duration,
    /// The largest REST request body accepted (ours: `--rest_api_max_body_bytes`);
    /// a larger one is refused with HTTP 413.
    pub rest_api_max_body_bytes: usize,
    /// The largest gRPC message accepted (ours: `--grpc_max_message_bytes`).
    pub grpc_max_message_bytes: usize,
    /// `--allow_version_labels_for_unavailable_models`: let a reloaded config
    /// label a version of a serving model that is not available (yet).
    pub allow_version_labels_for_unavailable_models: bool,
    /// Options of every model's session.
    pub session: SessionOptions,
}

impl Default for ServerOptions {
    fn default() -> ServerOptions {
        ServerOptions {
            host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            grpc_port: 8500,
            rest_api_port: None,
            models: Vec::new(),
            poll_wait: Duration::from_secs(1),
            batching: None,
            enable_model_warmup: true,
            num_load_threads: 1,
            rest_api_timeout: Duration::from_millis(30_000),
            rest_api_max_body_bytes: 64 << 20,
            grpc_max_message_bytes: 256 << 20,
            allow_version_labels_for_unavailable_models: false,
            session: SessionOptions::default(),
        }
    }
}

impl ServerOptions {
    /// Options for tests and embedding: both APIs on free ports of 127.0.0.1,
    /// the source polling every 100 ms.
    pub fn local(models: Vec<ModelConfig>) -> ServerOptions {
        ServerOptions {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            grpc_port: 0,
            rest_api_port: Some(0),
            models,
            poll_wait: Duration::from_millis(100),
            ..ServerOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_policies_select_as_tensorflow_serving_does() {
        let have = [3, 1, 7, 5];
        assert_eq!(VersionPolicy::Latest(1).select(&have), vec![7]);
        assert_eq!(VersionPolicy::Latest(2).select(&have), vec![5, 7]);
        assert_eq!(VersionPolicy::Latest(9).select(&have), vec![1, 3, 5, 7]);
        assert_eq!(VersionPolicy::All.select(&have), vec![1, 3, 5, 7]);
        assert_eq!(
            VersionPolicy::Specific(vec![3, 4, 7]).select(&have),
            vec![3, 7]
        );
        assert!(VersionPolicy::Latest(1).select(&[]).is_empty());
    }

    #[test]
    fn batching_options_are_checked() {
        let ok = BatchingOptions {
            max_batch_size: 32,
            allowed_batch_sizes: vec![8, 16, 32],
            ..BatchingOptions::default()
        };
        ok.validate().unwrap();
        let bad_last = BatchingOptions {
            allowed_batch_sizes: vec![8, 16],
            ..ok.clone()
        };
        assert_eq!(
            bad_last.validate().unwrap_err().code(),
            graph::Code::InvalidArgument
        );
        let unsorted = BatchingOptions {
            allowed_batch_sizes: vec![16, 8, 32],
            ..ok
        };
        assert!(unsorted.validate().is_err());
    }
}
