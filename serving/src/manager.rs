//! The manager actor: which versions of each model load, serve and unload, and
//! the [`Models`] handle through which every request finds its servable.
//!
//! [`ManagerState`] is a plain state machine: [`ManagerState::handle`] takes a
//! [`ManagerMsg`] (the source's aspired versions, a load or unload finishing, a
//! new model config) and returns [`Effect`]s (load a version, unload one,
//! publish). [`Manager`] hosts it on a thread of its own and carries the effects
//! out: loads go to a pool of load threads (never the request path's), unloads
//! to a thread that waits for the version's last request, and each publish
//! stores a fresh immutable [`ServingMap`] into an `ArcSwap` that
//! [`Models::get`] reads without a lock.
//!
//! Each version moves `Start → Loading → Available → Unloading → End`
//! (TensorFlow Serving's `ModelVersionStatus` states); a failed load ends in
//! `End` with its error, which the status API reports. The policy is TensorFlow
//! Serving's availability-preserving one:
//!
//! 1. an aspired version in `Start` (or unloaded earlier, without error) loads;
//! 2. a version no longer aspired unloads only once an aspired version of its
//!    model is `Available`, or when its model aspires to no version at all, so a
//!    new version that fails to load leaves the old one serving, and a swap
//!    never leaves a gap in which no version serves;
//! 3. a failed version is not retried while it stays aspired.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam::channel::{unbounded, Receiver, Sender};
use graph::{Result, Status};

use crate::metrics::Metrics;
use crate::servable::{Servable, ServableId};

/// Which version of a model a request wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionRequest {
    /// The highest available version.
    Latest,
    /// This version.
    Specific(i64),
    /// The version this label names.
    Label(String),
}

/// Where a version is in its life (TensorFlow Serving's
/// `ModelVersionStatus.State`, whose numbers [`VersionState::code`] gives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionState {
    /// Aspired, not yet loading.
    Start,
    /// Loading or warming up.
    Loading,
    /// Serving.
    Available,
    /// No longer aspired; waiting for its last requests, then released.
    Unloading,
    /// Released, or failed to load.
    End,
}

impl VersionState {
    /// TensorFlow Serving's number for the state.
    pub fn code(self) -> i32 {
        match self {
            VersionState::Start => 10,
            VersionState::Loading => 20,
            VersionState::Available => 30,
            VersionState::Unloading => 40,
            VersionState::End => 50,
        }
    }

    /// TensorFlow Serving's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            VersionState::Start => "START",
            VersionState::Loading => "LOADING",
            VersionState::Available => "AVAILABLE",
            VersionState::Unloading => "UNLOADING",
            VersionState::End => "END",
        }
    }
}

/// One version's state and, when its load failed, the error.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionStatus {
    /// The version.
    pub version: i64,
    /// Its state.
    pub state: VersionState,
    /// Why it failed to load, if it did.
    pub error: Option<Status>,
}

/// What the request path sees of one model.
#[derive(Default)]
struct ServedModel {
    available: BTreeMap<i64, Arc<Servable>>,
    labels: BTreeMap<String, i64>,
    statuses: Vec<VersionStatus>,
}

/// An immutable snapshot of everything serving, published by the manager.
#[derive(Default)]
pub struct ServingMap {
    models: HashMap<String, ServedModel>,
}

/// The handle the APIs read models through: cheap to clone, lock-free to read.
#[derive(Clone, Default)]
pub struct Models {
    map: Arc<ArcSwap<ServingMap>>,
}

impl std::fmt::Debug for Models {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Models")
            .field("names", &self.names())
            .finish()
    }
}

impl Models {
    /// The servable a request for `name` at `version` should use. An unknown
    /// model or a version not available is `NotFound`, an unknown label
    /// `InvalidArgument`, as TensorFlow Serving answers.
    pub fn get(&self, name: &str, version: &VersionRequest) -> Result<Arc<Servable>> {
        let map = self.map.load();
        let model = map.models.get(name);
        let found = match version {
            VersionRequest::Latest => model.and_then(|m| m.available.values().next_back()),
            VersionRequest::Specific(v) => model.and_then(|m| m.available.get(v)),
            VersionRequest::Label(l) => {
                let v = model.and_then(|m| m.labels.get(l)).ok_or_else(|| {
                    Status::invalid_argument(format!("Unrecognized servable version label: {l}"))
                })?;
                model.and_then(|m| m.available.get(v))
            }
        };
        found.cloned().ok_or_else(|| {
            let req = match version {
                VersionRequest::Latest => format!("Latest({name})"),
                VersionRequest::Specific(v) => format!("Specific({name}, {v})"),
                VersionRequest::Label(l) => format!("Label({name}, {l})"),
            };
            Status::not_found(format!("Servable not found for request: {req}"))
        })
    }

    /// The status of every version of `name` the manager knows (ascending), or
    /// of one version, or of the version a label names.
    pub fn status(
        &self,
        name: &str,
        version: Option<&VersionRequest>,
    ) -> Result<Vec<VersionStatus>> {
        let map = self.map.load();
        let model = map
            .models
            .get(name)
            .filter(|m| !m.statuses.is_empty())
            .ok_or_else(|| {
                Status::not_found(format!("Could not find any versions of model {name}"))
            })?;
        let want = match version {
            None | Some(VersionRequest::Latest) => return Ok(model.statuses.clone()),
            Some(VersionRequest::Specific(v)) => *v,
            Some(VersionRequest::Label(l)) => *model.labels.get(l).ok_or_else(|| {
                Status::invalid_argument(format!("Unrecognized servable version label: {l}"))
            })?,
        };
        let s: Vec<VersionStatus> = model
            .statuses
            .iter()
            .filter(|s| s.version == want)
            .cloned()
            .collect();
        if s.is_empty() {
            return Err(Status::not_found(format!(
                "Could not find version {want} of model {name}"
            )));
        }
        Ok(s)
    }

    /// The names of the models the manager knows.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.map.load().models.keys().cloned().collect();
        v.sort();
        v
    }

    /// The versions of `name` serving now (ascending).
    pub fn available_versions(&self, name: &str) -> Vec<i64> {
        self.map
            .load()
            .models
            .get(name)
            .map(|m| m.available.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Waits until `check` holds of the published map, polling every 2 ms;
    /// `DeadlineExceeded` after `timeout`.
    pub fn wait_for(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&Models) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if check(self) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Status::deadline_exceeded(format!(
                    "the models did not reach the awaited state within {timeout:?}: {:?}",
                    self.names()
                        .iter()
                        .map(|n| (n.clone(), self.status(n, None).unwrap_or_default()))
                        .collect::<Vec<_>>()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn publish(&self, map: ServingMap) {
        self.map.store(Arc::new(map));
    }
}

/// A message to the manager.
pub enum ManagerMsg {
    /// The models configured now, with their labels; a model left out loses
    /// every version.
    Configure(Vec<(String, BTreeMap<String, i64>)>),
    /// The versions of `model` to serve now (the source's complete list) and
    /// their directories.
    Aspired {
        /// The model.
        model: String,
        /// Its aspired versions.
        versions: Vec<(i64, PathBuf)>,
    },
    /// A load finished.
    Loaded {
        /// The version.
        id: ServableId,
        /// The servable, or why it failed.
        result: Result<Arc<Servable>>,
    },
    /// A version's last reference was released.
    Unloaded {
        /// The version.
        id: ServableId,
    },
    /// Stop: unload everything and end the actor.
    Stop,
}

/// What the host must do after a message.
pub enum Effect {
    /// Load version `id` from `dir`, then send [`ManagerMsg::Loaded`].
    Load {
        /// The version.
        id: ServableId,
        /// Its SavedModel directory.
        dir: PathBuf,
    },
    /// Release the manager's reference to `servable` once no request holds
    /// one, then send [`ManagerMsg::Unloaded`]. Always after the publish that
    /// took it out of the serving map.
    Unload {
        /// The version.
        servable: Arc<Servable>,
    },
    /// Publish [`ManagerState::snapshot`].
    Publish,
}

struct VersionEntry {
    state: VersionState,
    aspired: bool,
    dir: PathBuf,
    error: Option<Status>,
    servable: Option<Arc<Servable>>,
}

#[derive(Default)]
struct ModelEntry {
    configured: bool,
    labels: BTreeMap<String, i64>,
    versions: BTreeMap<i64, VersionEntry>,
}

/// The manager's state machine; see the module docs.
#[derive(Default)]
pub struct ManagerState {
    models: BTreeMap<String, ModelEntry>,
}

impl ManagerState {
    /// An empty manager.
    pub fn new() -> ManagerState {
        ManagerState::default()
    }

    /// Applies `msg` and returns what the host must do, in order.
    pub fn handle(&mut self, msg: ManagerMsg) -> Vec<Effect> {
        let mut effects = Vec::new();
        let mut changed = false;
        match msg {
            ManagerMsg::Configure(models) => {
                let names: Vec<&String> = models.iter().map(|(n, _)| n).collect();
                for (name, m) in self.models.iter_mut() {
                    if !names.contains(&name) {
                        m.configured = false;
                        m.labels.clear();
                        for v in m.versions.values_mut() {
                            v.aspired = false;
                        }
                    }
                }
                for (name, labels) in models {
                    let m = self.models.entry(name).or_default();
                    m.configured = true;
                    m.labels = labels;
                }
                changed = true;
            }
            ManagerMsg::Aspired { model, versions } => {
                let Some(m) = self.models.get_mut(&model).filter(|m| m.configured) else {
                    // A late list for a model no longer configured.
                    return effects;
                };
                for (v, e) in m.versions.iter_mut() {
                    let aspired = versions.iter().any(|(x, _)| x == v);
                    changed |= e.aspired != aspired;
                    e.aspired = aspired;
                }
                for (v, dir) in versions {
                    let e = m.versions.entry(v).or_insert_with(|| {
                        changed = true;
                        VersionEntry {
                            state: VersionState::Start,
                            aspired: true,
                            dir: dir.clone(),
                            error: None,
                            servable: None,
                        }
                    });
                    if e.state == VersionState::End && e.error.is_none() && e.dir != dir {
                        e.dir = dir;
                    }
                }
            }
            ManagerMsg::Loaded { id, result } => {
                if let Some(e) = self
                    .models
                    .get_mut(&id.name)
                    .and_then(|m| m.versions.get_mut(&id.version))
                    .filter(|e| e.state == VersionState::Loading)
                {
                    match result {
                        Ok(s) => {
                            e.state = VersionState::Available;
                            e.servable = Some(s);
                        }
                        Err(err) => {
                            tracing::error!(servable = %id, error = %err, "load failed");
                            e.state = VersionState::End;
                            e.error = Some(err);
                        }
                    }
                    changed = true;
                }
            }
            ManagerMsg::Unloaded { id } => {
                if let Some(e) = self
                    .models
                    .get_mut(&id.name)
                    .and_then(|m| m.versions.get_mut(&id.version))
                    .filter(|e| e.state == VersionState::Unloading)
                {
                    e.state = VersionState::End;
                    changed = true;
                }
            }
            ManagerMsg::Stop => {
                for m in self.models.values_mut() {
                    m.configured = false;
                    for v in m.versions.values_mut() {
                        v.aspired = false;
                    }
                }
                changed = true;
            }
        }
        if changed {
            let mut unloads = Vec::new();
            let mut loads = Vec::new();
            for (name, m) in self.models.iter_mut() {
                decide(name, m, &mut loads, &mut unloads);
            }
            self.models.retain(|_, m| {
                m.configured
                    || m.versions
                        .values()
                        .any(|v| v.state != VersionState::End && v.state != VersionState::Start)
            });
            effects.push(Effect::Publish);
            effects.extend(unloads);
            effects.extend(loads);
        }
        effects
    }

    /// True when no version is loading, serving or unloading.
    pub fn is_idle(&self) -> bool {
        self.models.values().all(|m| {
            m.versions
                .values()
                .all(|v| matches!(v.state, VersionState::Start | VersionState::End))
        })
    }

    /// The serving map to publish: every available version, labels and
    /// statuses.
    pub fn snapshot(&self) -> ServingMap {
        let models = self
            .models
            .iter()
            .map(|(name, m)| {
                let served = ServedModel {
                    available: m
                        .versions
                        .iter()
                        .filter_map(|(v, e)| {
                            (e.state == VersionState::Available)
                                .then(|| e.servable.clone().map(|s| (*v, s)))
                                .flatten()
                        })
                        .collect(),
                    labels: m.labels.clone(),
                    statuses: m
                        .versions
                        .iter()
                        .map(|(v, e)| VersionStatus {
                            version: *v,
                            state: e.state,
                            error: e.error.clone(),
                        })
                        .collect(),
                };
                (name.clone(), served)
            })
            .collect();
        ServingMap { models }
    }
}

/// Applies the availability-preserving policy to one model.
fn decide(name: &str, m: &mut ModelEntry, loads: &mut Vec<Effect>, unloads: &mut Vec<Effect>) {
    let aspired_available = m
        .versions
        .values()
        .any(|e| e.aspired && e.state == VersionState::Available);
    let any_aspired = m.versions.values().any(|e| e.aspired);
    m.versions
        .retain(|_, e| e.aspired || e.state != VersionState::Start);
    for (v, e) in m.versions.iter_mut() {
        let id = || ServableId {
            name: name.to_owned(),
            version: *v,
        };
        if e.aspired {
            let reload = e.state == VersionState::End && e.error.is_none();
            if e.state == VersionState::Start || reload {
                e.state = VersionState::Loading;
                loads.push(Effect::Load {
                    id: id(),
                    dir: e.dir.clone(),
                });
            }
        } else if e.state == VersionState::Available && (aspired_available || !any_aspired) {
            if let Some(servable) = e.servable.take() {
                e.state = VersionState::Unloading;
                unloads.push(Effect::Unload { servable });
            }
        }
    }
}

/// Loads one version: the server's [`Servable::load`] plus warmup.
pub type Loader = Arc<dyn Fn(&ServableId, &Path) -> Result<Servable> + Send + Sync>;

/// The manager actor on its thread; see the module docs. Dropping it stops it.
pub struct Manager {
    tx: Sender<ManagerMsg>,
    models: Models,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Manager {
    /// Starts the manager with `num_load_threads` load threads calling `loader`.
    pub fn start(
        loader: Loader,
        num_load_threads: usize,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Manager> {
        let (tx, rx) = unbounded::<ManagerMsg>();
        let models = Models::default();
        let (load_tx, load_rx) = unbounded::<(ServableId, PathBuf)>();
        for i in 0..num_load_threads.max(1) {
            let rx = load_rx.clone();
            let back = tx.clone();
            let loader = Arc::clone(&loader);
            let metrics = metrics.clone();
            std::thread::Builder::new()
                .name(format!("actorflow-serve-load-{i}"))
                .spawn(move || load_loop(rx, back, loader, metrics))
                .map_err(|e| {
                    Status::resource_exhausted(format!("cannot start a load thread: {e}"))
                })?;
        }
        let host = Host {
            state: ManagerState::new(),
            models: models.clone(),
            self_tx: tx.clone(),
            load_tx,
            metrics,
        };
        let thread = std::thread::Builder::new()
            .name("actorflow-serve-manager".into())
            .spawn(move || host.run(rx))
            .map_err(|e| Status::resource_exhausted(format!("cannot start the manager: {e}")))?;
        Ok(Manager {
            tx,
            models,
            thread: Some(thread),
        })
    }

    /// The handle the APIs read through.
    pub fn models(&self) -> &Models {
        &self.models
    }

    /// Sends `msg` to the manager (ignored once it has stopped).
    pub fn send(&self, msg: ManagerMsg) {
        let _ = self.tx.send(msg);
    }

    /// A sender for the source.
    pub fn sender(&self) -> Sender<ManagerMsg> {
        self.tx.clone()
    }

    /// Unloads every version (waiting for their requests, at most 30 s) and
    /// stops the actor.
    pub fn stop(&mut self) {
        let _ = self.tx.send(ManagerMsg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.stop();
    }
}

fn load_loop(
    rx: Receiver<(ServableId, PathBuf)>,
    back: Sender<ManagerMsg>,
    loader: Loader,
    metrics: Option<Arc<Metrics>>,
) {
    while let Ok((id, dir)) = rx.recv() {
        let started = Instant::now();
        tracing::info!(servable = %id, dir = %dir.display(), "loading");
        let result = loader(&id, &dir).map(Arc::new);
        if let Some(m) = &metrics {
            m.load(&id.name, result.is_ok(), started.elapsed());
        }
        if result.is_ok() {
            tracing::info!(servable = %id, took = ?started.elapsed(), "loaded");
        }
        if back.send(ManagerMsg::Loaded { id, result }).is_err() {
            return;
        }
    }
}

/// How long an unload waits for a version's requests before releasing it
/// anyway (they keep their own references; only the manager's goes).
const UNLOAD_WAIT: Duration = Duration::from_secs(30);

struct Host {
    state: ManagerState,
    models: Models,
    self_tx: Sender<ManagerMsg>,
    load_tx: Sender<(ServableId, PathBuf)>,
    metrics: Option<Arc<Metrics>>,
}

impl Host {
    fn run(mut self, rx: Receiver<ManagerMsg>) {
        let mut stopping = false;
        while let Ok(msg) = rx.recv() {
            if matches!(msg, ManagerMsg::Stop) {
                stopping = true;
            }
            if stopping && matches!(msg, ManagerMsg::Aspired { .. } | ManagerMsg::Configure(_)) {
                continue;
            }
            for effect in self.state.handle(msg) {
                self.apply(effect);
            }
            if stopping && self.state.is_idle() {
                break;
            }
        }
        // Loads still running finish into a closed channel and are dropped.
    }

    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::Publish => {
                let snapshot = self.state.snapshot();
                if let Some(m) = &self.metrics {
                    for (name, model) in &snapshot.models {
                        m.set_available(name, model.available.len());
                    }
                }
                self.models.publish(snapshot);
            }
            Effect::Load { id, dir } => {
                if let Err(e) = self.load_tx.send((id, dir)) {
                    let (id, _) = e.into_inner();
                    let _ = self.self_tx.send(ManagerMsg::Loaded {
                        id,
                        result: Err(Status::unavailable("the load threads have stopped")),
                    });
                }
            }
            Effect::Unload { servable } => {
                let back = self.self_tx.clone();
                let metrics = self.metrics.clone();
                let spawned = std::thread::Builder::new()
                    .name("actorflow-serve-unload".into())
                    .spawn(move || {
                        let id = servable.id().clone();
                        let deadline = Instant::now() + UNLOAD_WAIT;
                        while Arc::strong_count(&servable) > 1 && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        drop(servable);
                        tracing::info!(servable = %id, "unloaded");
                        if let Some(m) = metrics {
                            m.unload(&id.name);
                        }
                        let _ = back.send(ManagerMsg::Unloaded { id });
                    });
                if let Err(e) = spawned {
                    tracing::error!("cannot start an unload thread: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(v: i64) -> ServableId {
        ServableId {
            name: "m".into(),
            version: v,
        }
    }

    fn loads(effects: &[Effect]) -> Vec<i64> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Load { id, .. } => Some(id.version),
                _ => None,
            })
            .collect()
    }

    fn unloads(effects: &[Effect]) -> Vec<i64> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Unload { servable } => Some(servable.id().version),
                _ => None,
            })
            .collect()
    }

    fn states(s: &ManagerState) -> Vec<(i64, VersionState, bool)> {
        s.snapshot()
            .models
            .get("m")
            .map(|m| {
                m.statuses
                    .iter()
                    .map(|st| (st.version, st.state, st.error.is_some()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn aspire(s: &mut ManagerState, versions: &[i64]) -> Vec<Effect> {
        s.handle(ManagerMsg::Aspired {
            model: "m".into(),
            versions: versions
                .iter()
                .map(|v| (*v, PathBuf::from(format!("/models/m/{v}"))))
                .collect(),
        })
    }

    fn configure(s: &mut ManagerState) {
        s.handle(ManagerMsg::Configure(vec![("m".into(), BTreeMap::new())]));
    }

    #[test]
    fn a_failed_version_leaves_the_old_one_serving() {
        let mut s = ManagerState::new();
        configure(&mut s);
        let e = aspire(&mut s, &[1]);
        assert_eq!(loads(&e), vec![1]);
        assert_eq!(states(&s), vec![(1, VersionState::Loading, false)]);
        // Version 1's load needs a servable; a failed load needs none. Drive 1 to
        // a failure first to check the failure path, then re-aspire another.
        s.handle(ManagerMsg::Loaded {
            id: id(1),
            result: Err(Status::data_loss("bad file")),
        });
        assert_eq!(states(&s), vec![(1, VersionState::End, true)]);
        // Still aspired and failed: not retried.
        assert!(loads(&aspire(&mut s, &[1])).is_empty());
        // Version 2 appears; 1 is no longer aspired and, never having served, is
        // simply kept as a failed status.
        let e = aspire(&mut s, &[2]);
        assert_eq!(loads(&e), vec![2]);
        let e = s.handle(ManagerMsg::Loaded {
            id: id(2),
            result: Err(Status::invalid_argument("broken graph")),
        });
        assert!(unloads(&e).is_empty());
        assert_eq!(
            states(&s),
            vec![(1, VersionState::End, true), (2, VersionState::End, true)]
        );
    }

    #[test]
    fn unaspired_start_versions_are_dropped_and_configure_removes_models() {
        let mut s = ManagerState::new();
        configure(&mut s);
        aspire(&mut s, &[1, 2]);
        assert_eq!(
            states(&s),
            vec![
                (1, VersionState::Loading, false),
                (2, VersionState::Loading, false)
            ]
        );
        s.handle(ManagerMsg::Loaded {
            id: id(1),
            result: Err(Status::internal("x")),
        });
        // A model no longer configured: its failed versions go with it once
        // nothing of it is loading.
        s.handle(ManagerMsg::Configure(vec![]));
        s.handle(ManagerMsg::Loaded {
            id: id(2),
            result: Err(Status::internal("y")),
        });
        assert!(s.snapshot().models.is_empty());
        // A list for a model not configured is ignored.
        assert!(aspire(&mut s, &[3]).is_empty());
    }
}
