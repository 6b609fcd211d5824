//! `actorflow serve`: a model server with TensorFlow Serving's flags, REST and
//! gRPC APIs. Either one model (`--model_name`, `--model_base_path`) or a
//! `ModelServerConfig` text file (`--model_config_file`, re-read every
//! `--model_config_file_poll_wait_seconds` when that is positive). It prints one
//! line per API, `gRPC listening on HOST:PORT` and `REST listening on
//! HOST:PORT`, once both are bound, and stops cleanly on SIGINT or SIGTERM.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use actorflow::serving::config::read_model_config_file;
use actorflow::serving::{BatchingOptions, ModelConfig, ModelServer, ServerOptions};
use actorflow::{Result, SessionOptions, Status};
use clap::Args;

/// Arguments of `actorflow serve` (TensorFlow Serving's flag names).
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// The gRPC port (PredictionService, ModelService); 0 picks a free one.
    #[arg(long, default_value_t = 8500)]
    pub port: u16,
    /// The REST port; 0 (the default, as in TensorFlow Serving) serves no REST
    /// API.
    #[arg(long = "rest_api_port", default_value_t = 0)]
    pub rest_api_port: u16,
    /// The address both APIs bind.
    #[arg(long, default_value = "0.0.0.0")]
    pub host: IpAddr,
    /// The model's name (with --model_base_path).
    #[arg(long = "model_name", default_value = "default")]
    pub model_name: String,
    /// The directory holding the model's numbered version directories.
    #[arg(long = "model_base_path", conflicts_with = "model_config_file")]
    pub model_base_path: Option<PathBuf>,
    /// A ModelServerConfig in protobuf text format: several models, version
    /// policies and labels.
    #[arg(long = "model_config_file")]
    pub model_config_file: Option<PathBuf>,
    /// Re-read --model_config_file this often (seconds; 0: never).
    #[arg(long = "model_config_file_poll_wait_seconds", default_value_t = 0)]
    pub model_config_file_poll_wait_seconds: u64,
    /// Batch concurrent requests together.
    #[arg(long = "enable_batching", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_batching: bool,
    /// BatchingParameters in protobuf text format (with --enable_batching;
    /// TensorFlow Serving's defaults without it).
    #[arg(long = "batching_parameters_file")]
    pub batching_parameters_file: Option<PathBuf>,
    /// How often to look for new model versions (seconds).
    #[arg(long = "file_system_poll_wait_seconds", default_value_t = 1)]
    pub file_system_poll_wait_seconds: u64,
    /// Warm each version up before it serves.
    #[arg(long = "enable_model_warmup", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_model_warmup: bool,
    /// Versions loading at once.
    #[arg(long = "num_load_threads", default_value_t = 1)]
    pub num_load_threads: usize,
    /// The longest a REST request may take (milliseconds).
    #[arg(long = "rest_api_timeout_in_ms", default_value_t = 30_000)]
    pub rest_api_timeout_in_ms: u64,
    /// The largest REST request body accepted (bytes).
    #[arg(long = "rest_api_max_body_bytes", default_value_t = 64 << 20)]
    pub rest_api_max_body_bytes: usize,
    /// The largest gRPC message accepted (bytes).
    #[arg(long = "grpc_max_message_bytes", default_value_t = 256 << 20)]
    pub grpc_max_message_bytes: usize,
    /// Let a reloaded model config label a version that is not available yet.
    #[arg(long = "allow_version_labels_for_unavailable_models", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub allow_version_labels_for_unavailable_models: bool,
    /// CPU devices of each model's session.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub devices: u16,
}

impl ServeArgs {
    /// The models the flags name.
    fn models(&self) -> Result<Vec<ModelConfig>> {
        match (&self.model_config_file, &self.model_base_path) {
            (Some(f), _) => read_model_config_file(f),
            (None, Some(base)) => Ok(vec![ModelConfig::new(&self.model_name, absolute(base)?)]),
            (None, None) => Err(Status::invalid_argument(
                "give --model_base_path (with --model_name) or --model_config_file",
            )),
        }
    }

    /// The server options the flags ask for.
    pub fn options(&self) -> Result<ServerOptions> {
        let batching = if self.enable_batching {
            Some(match &self.batching_parameters_file {
                Some(f) => BatchingOptions::from_file(f)?,
                None => BatchingOptions::default(),
            })
        } else if self.batching_parameters_file.is_some() {
            return Err(Status::invalid_argument(
                "--batching_parameters_file needs --enable_batching",
            ));
        } else {
            None
        };
        Ok(ServerOptions {
            host: self.host,
            grpc_port: self.port,
            rest_api_port: (self.rest_api_port != 0).then_some(self.rest_api_port),
            models: self.models()?,
            poll_wait: Duration::from_secs(self.file_system_poll_wait_seconds.max(1)),
            batching,
            enable_model_warmup: self.enable_model_warmup,
            num_load_threads: self.num_load_threads.max(1),
            rest_api_timeout: Duration::from_millis(self.rest_api_timeout_in_ms.max(1)),
            rest_api_max_body_bytes: self.rest_api_max_body_bytes,
            grpc_max_message_bytes: self.grpc_max_message_bytes,
            allow_version_labels_for_unavailable_models: self
                .allow_version_labels_for_unavailable_models,
            session: SessionOptions::default().with_cpu_devices(usize::from(self.devices)),
        })
    }
}

fn absolute(p: &std::path::Path) -> Result<PathBuf> {
    std::path::absolute(p)
        .map_err(|e| Status::invalid_argument(format!("model base path {}: {e}", p.display())))
}

/// Runs `actorflow serve`.
pub fn main(a: &ServeArgs) -> Result<()> {
    let mut server = ModelServer::start(a.options()?)?;
    let grpc = server.grpc_addr();
    let rest = server.rest_addr();
    let watcher = match (&a.model_config_file, a.model_config_file_poll_wait_seconds) {
        (Some(f), s) if s > 0 => Some(ConfigWatcher::start(
            f.clone(),
            Duration::from_secs(s),
            std::sync::Arc::clone(server.state()),
        )?),
        _ => None,
    };
    server.wait_for_signal(|| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "gRPC listening on {grpc}");
        if let Some(r) = rest {
            let _ = writeln!(out, "REST listening on {r}");
        }
        let _ = out.flush();
    })?;
    tracing::info!("stopping");
    drop(watcher);
    server.stop();
    Ok(())
}

/// Re-reads the model config file when it changes and reloads the server.
struct ConfigWatcher {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ConfigWatcher {
    fn start(
        path: PathBuf,
        every: Duration,
        state: std::sync::Arc<actorflow::serving::server::ApiState>,
    ) -> Result<ConfigWatcher> {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let modified = |p: &PathBuf| -> Option<SystemTime> {
            std::fs::metadata(p).and_then(|m| m.modified()).ok()
        };
        let mut last = modified(&path);
        let thread = std::thread::Builder::new()
            .name("actorflow-serve-config".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                    let now = modified(&path);
                    if now == last {
                        continue;
                    }
                    last = now;
                    match read_model_config_file(&path).and_then(|m| state.reload(m)) {
                        Ok(()) => tracing::info!(file = %path.display(), "model config reloaded"),
                        Err(e) => tracing::error!(
                            file = %path.display(),
                            error = %e,
                            "model config not reloaded; the old one stays"
                        ),
                    }
                }
            })
            .map_err(|e| Status::resource_exhausted(format!("cannot start a thread: {e}")))?;
        Ok(ConfigWatcher {
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for ConfigWatcher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
