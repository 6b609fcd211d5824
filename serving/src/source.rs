//! The source actor: every `poll_wait` it lists each model's base path, keeps
//! the directories whose names are version numbers (TensorFlow Serving's file
//! system storage path source), applies the model's [`VersionPolicy`] and sends
//! the manager the aspired versions of each model whose list changed.
//!
//! A base path that does not exist (yet) or cannot be read aspires to nothing
//! and is logged once, as TensorFlow Serving does; a later poll picks it up.
//! A version directory is aspired only once it holds a `saved_model.pb` or
//! `saved_model.pbtxt`, so a version being copied in is not loaded half-written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{bounded, Receiver, RecvTimeoutError, Sender};
use graph::{Result, Status};

use crate::config::{ModelConfig, VersionPolicy};
use crate::manager::ManagerMsg;

/// The numbered version directories under `base_path` that hold a SavedModel,
/// with their paths. `NotFound` when the base path cannot be listed.
pub fn list_versions(base_path: &Path) -> Result<Vec<(i64, PathBuf)>> {
    let rd = std::fs::read_dir(base_path).map_err(|e| {
        Status::not_found(format!(
            "cannot list model base path {}: {e}",
            base_path.display()
        ))
    })?;
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        // TensorFlow Serving accepts only non-negative decimal numbers.
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(version) = name.parse::<i64>() else {
            continue;
        };
        let path = entry.path();
        if path.is_dir() && actors::saved_model::maybe_saved_model_directory(&path) {
            out.push((version, path));
        }
    }
    out.sort_by_key(|(v, _)| *v);
    Ok(out)
}

/// The versions of `model` to serve now.
pub fn aspired_versions(model: &ModelConfig) -> Result<Vec<(i64, PathBuf)>> {
    let all = list_versions(&model.base_path)?;
    let numbers: Vec<i64> = all.iter().map(|(v, _)| *v).collect();
    let keep = model.policy.select(&numbers);
    Ok(all.into_iter().filter(|(v, _)| keep.contains(v)).collect())
}

enum Control {
    Configure(Vec<ModelConfig>),
    Stop,
}

/// The source actor on its thread; see the module docs. Dropping it stops it.
pub struct Source {
    control: Sender<Control>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Source {
    /// Starts polling `models` every `poll_wait`, sending the manager
    /// (through `manager`) each change; the first poll happens at once.
    pub fn start(
        models: Vec<ModelConfig>,
        poll_wait: Duration,
        manager: Sender<ManagerMsg>,
    ) -> Result<Source> {
        let (control, rx) = bounded::<Control>(16);
        let state = SourceState {
            models: Arc::new(models),
            last: BTreeMap::new(),
            warned: BTreeMap::new(),
        };
        let thread = std::thread::Builder::new()
            .name("actorflow-serve-source".into())
            .spawn(move || state.run(rx, poll_wait, manager))
            .map_err(|e| Status::resource_exhausted(format!("cannot start the source: {e}")))?;
        Ok(Source {
            control,
            thread: Some(thread),
        })
    }

    /// Replaces the models polled (a reloaded config); polls at once.
    pub fn configure(&self, models: Vec<ModelConfig>) {
        let _ = self.control.send(Control::Configure(models));
    }

    /// Stops polling.
    pub fn stop(&mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.stop();
    }
}

struct SourceState {
    models: Arc<Vec<ModelConfig>>,
    /// The last list sent per model.
    last: BTreeMap<String, Vec<(i64, PathBuf)>>,
    /// The last listing error logged per model.
    warned: BTreeMap<String, String>,
}

impl SourceState {
    fn run(mut self, rx: Receiver<Control>, poll_wait: Duration, manager: Sender<ManagerMsg>) {
        loop {
            if !self.poll(&manager) {
                return;
            }
            match rx.recv_timeout(poll_wait) {
                Ok(Control::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Control::Configure(models)) => {
                    self.models = Arc::new(models);
                    self.last
                        .retain(|name, _| self.models.iter().any(|m| &m.name == name));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// One poll; false once the manager has gone.
    fn poll(&mut self, manager: &Sender<ManagerMsg>) -> bool {
        let models = Arc::clone(&self.models);
        for m in models.iter() {
            let versions = match aspired_versions(m) {
                Ok(v) => {
                    self.warned.remove(&m.name);
                    v
                }
                Err(e) => {
                    let msg = e.to_string();
                    if self.warned.get(&m.name) != Some(&msg) {
                        tracing::warn!(model = %m.name, error = %msg, "no versions found");
                        self.warned.insert(m.name.clone(), msg);
                    }
                    Vec::new()
                }
            };
            if let VersionPolicy::Specific(want) = &m.policy {
                let have: Vec<i64> = versions.iter().map(|(v, _)| *v).collect();
                let missing: Vec<&i64> = want.iter().filter(|v| !have.contains(v)).collect();
                if !missing.is_empty() && self.last.get(&m.name) != Some(&versions) {
                    tracing::warn!(model = %m.name, ?missing, "configured versions not found");
                }
            }
            if self.last.get(&m.name) == Some(&versions) {
                continue;
            }
            self.last.insert(m.name.clone(), versions.clone());
            let msg = ManagerMsg::Aspired {
                model: m.name.clone(),
                versions,
            };
            if manager.send(msg).is_err() {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_only_numbered_saved_model_directories() {
        let dir = tempfile::tempdir().unwrap();
        for v in ["1", "3", "10", "007", "x1", "-2", "4"] {
            std::fs::create_dir(dir.path().join(v)).unwrap();
        }
        for v in ["1", "3", "10", "007", "x1", "-2"] {
            std::fs::write(dir.path().join(v).join("saved_model.pb"), b"").unwrap();
        }
        // "4" is still being copied in: no saved_model.pb yet.
        std::fs::write(dir.path().join("5"), b"a file, not a directory").unwrap();
        let got: Vec<i64> = list_versions(dir.path())
            .unwrap()
            .into_iter()
            .map(|(v, _)| v)
            .collect();
        assert_eq!(got, vec![1, 3, 7, 10]);
        let m = ModelConfig::new("m", dir.path()).with_policy(VersionPolicy::Latest(2));
        let got: Vec<i64> = aspired_versions(&m)
            .unwrap()
            .into_iter()
            .map(|(v, _)| v)
            .collect();
        assert_eq!(got, vec![7, 10]);
        assert_eq!(
            list_versions(&dir.path().join("missing"))
                .unwrap_err()
                .code(),
            graph::Code::NotFound
        );
    }
}
