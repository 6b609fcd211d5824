//! [`Saver`] (`tf.compat.v1.train.Saver`): saves variables to checkpoint files
//! and restores them, keeping the newest `max_to_keep` checkpoints and a
//! `checkpoint` state file that lists them, so [`latest_checkpoint`] finds the
//! newest after a restart.
//!
//! A saver adds its nodes to the graph when it is made, under a `save` name
//! scope (the nodes and the `SaverDef` naming them are
//! [`graph::train::saver_graph`]'s), so build it before the graph goes to a
//! [`Session`] (or extend the session with the new nodes).
//!
//! A checkpoint is TensorFlow's tensor bundle (`kernels::cpu::checkpoint`): a
//! save to `dir/model.ckpt-300` writes `model.ckpt-300.index` and
//! `model.ckpt-300.data-00000-of-00001`, which TensorFlow's `Saver` restores
//! (and the other way round). Each file is written atomically, as is the state
//! file: a crash or error during a save leaves the previous checkpoints and
//! state intact, and at most temporary files, which the next save into that
//! directory deletes (only temporaries of this saver's checkpoint names and of
//! the state file, and only once their writer's process is gone).
//!
//! After a restart, [`Saver::restore_newest_readable`] restores the newest
//! checkpoint that loads, skipping damaged or missing ones with a warning and
//! refusing to report "no checkpoint" when some exist but none loads (the rule
//! is in [`checkpoint_management`](super::checkpoint_management)).
//!
//! The state file uses TensorFlow's text format, so TensorFlow's tools read it:
//!
//! ```text
//! model_checkpoint_path: "model.ckpt-300"
//! all_model_checkpoint_paths: "model.ckpt-200"
//! all_model_checkpoint_paths: "model.ckpt-300"
//! ```
//!
//! Paths of checkpoints in the state file's own directory are written relative
//! to it (so the directory can move); others as given.
//!
//! Beside each checkpoint a save writes `<checkpoint>.meta`, the graph as a
//! `MetaGraphDef` with the saver's `SaverDef` (unless
//! [`SaverOptions::write_meta_graph`] is off), so TensorFlow's
//! `tf.compat.v1.train.import_meta_graph` and `Saver.restore` resume from the
//! files alone; it is deleted with its checkpoint.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use actors::saved_model::{meta_graph_def, write_meta_graph, MetaGraphOptions};
use actors::Session;
use graph::builder::Scope;
use graph::proto::tf::SaverDef;
use graph::train::saver_graph::SaverNodes;
use graph::train::{global_variables, VarRef};
use graph::{Result, Status, Tensor};
use kernels::cpu::checkpoint::atomic::{remove_stale_temporaries, write_atomically};
use kernels::cpu::checkpoint::bundle::{bundle_files, bundle_prefix_of, index_path};
use kernels::cpu::checkpoint::read_index;
use proto::tensorflow::CheckpointState as CheckpointStateProto;

use crate::train::checkpoint_management::{restore_newest_readable, step_in_name, LatestRestore};

/// The name of the checkpoint state file in a checkpoint directory.
pub const CHECKPOINT_STATE_FILE: &str = "checkpoint";

/// How a [`Saver`] is built.
#[derive(Clone, Debug)]
pub struct SaverOptions {
    /// The variables to save and restore (default: every global variable when
    /// the saver is built). Each is saved under its node name.
    pub var_list: Option<Vec<VarRef>>,
    /// How many of the newest checkpoints to keep; older ones are deleted after
    /// each save. 0 keeps all.
    pub max_to_keep: usize,
    /// The name scope of the saver's nodes.
    pub name: String,
    /// Write the graph as a `MetaGraphDef` to `<checkpoint>.meta` beside each
    /// checkpoint, as TensorFlow's `Saver.save(write_meta_graph=True)` does, so
    /// that `tf.compat.v1.train.import_meta_graph` rebuilds the graph and its
    /// saver from the files alone.
    pub write_meta_graph: bool,
}

impl Default for SaverOptions {
    fn default() -> SaverOptions {
        SaverOptions {
            var_list: None,
            max_to_keep: 5,
            name: "save".into(),
            write_meta_graph: true,
        }
    }
}

/// Saves and restores variables; see the module docs.
///
/// # Examples
/// ```
/// use actorflow::train::{self, Saver};
/// use actorflow::{ops, Scope, Session, SessionOptions, Tensor};
/// let s = Scope::new();
/// let w = ops::Variable::new(&s, "w", &ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap(), true).unwrap();
/// let init = train::global_variables_initializer(&s).unwrap();
/// let saver = Saver::new(&s).unwrap();
/// let tmp = tempfile::tempdir().unwrap(); // removed when dropped
/// let dir = tmp.path();
/// let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
/// sess.run(&[], &[], &[init.name()]).unwrap();
/// let path = saver.save(&sess, dir.join("model.ckpt"), Some(1)).unwrap();
/// assert_eq!(train::latest_checkpoint(dir).unwrap(), Some(path.clone()));
/// // a fresh session over the same graph gets the values back
/// let fresh = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
/// saver.restore(&fresh, &path).unwrap();
/// assert_eq!(fresh.run(&[], &[&w.value.name()], &[]).unwrap()[0], Tensor::vector(&[1.0f32, 2.0]));
/// ```
pub struct Saver {
    vars: Vec<VarRef>,
    saver_def: SaverDef,
    /// The graph whose `MetaGraphDef` each save writes (when it writes one).
    scope: Option<Scope>,
    filename: String,
    save_target: String,
    restore_target: String,
    max_to_keep: usize,
    last: Mutex<Vec<PathBuf>>,
}

impl std::fmt::Debug for Saver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Saver")
            .field("saver_def", &self.saver_def)
            .field("variables", &self.vars.len())
            .field("write_meta_graph", &self.scope.is_some())
            .finish_non_exhaustive()
    }
}

impl Saver {
    /// A saver of every global variable keeping the 5 newest checkpoints.
    pub fn new(s: &Scope) -> Result<Saver> {
        Saver::with_options(s, SaverOptions::default())
    }

    /// A saver built as `options` say. Two variables of one name, or none at
    /// all, is `InvalidArgument`.
    pub fn with_options(s: &Scope, options: SaverOptions) -> Result<Saver> {
        let vars = match options.var_list {
            Some(v) => v,
            None => global_variables(s)?,
        };
        let nodes = SaverNodes::build(s, &vars, &options.name)?;
        Ok(Saver {
            saver_def: nodes.saver_def(options.max_to_keep),
            filename: nodes.filename.name(),
            save_target: nodes.save.op().name().to_owned(),
            restore_target: nodes.restore.name().to_owned(),
            vars: nodes.variables,
            max_to_keep: options.max_to_keep,
            scope: options.write_meta_graph.then(|| s.clone()),
            last: Mutex::new(Vec::new()),
        })
    }

    /// The `SaverDef` naming this saver's nodes (what a `MetaGraphDef` records).
    pub fn saver_def(&self) -> &SaverDef {
        &self.saver_def
    }

    /// Writes the graph of `scope` with this saver as a `MetaGraphDef` to
    /// `path` (atomically), as TensorFlow's `Saver.export_meta_graph`.
    pub fn export_meta_graph(&self, scope: &Scope, path: impl AsRef<Path>) -> Result<()> {
        let meta = meta_graph_def(
            scope,
            &[],
            Some(self.saver_def.clone()),
            &MetaGraphOptions::default(),
        )?;
        write_meta_graph(path.as_ref(), &meta)
    }

    /// The saved variables, sorted by name.
    pub fn variables(&self) -> &[VarRef] {
        &self.vars
    }

    /// The save target and the restore target (node names), for callers that
    /// run them in their own steps (feeding the path to [`Saver::filename_tensor`]).
    pub fn targets(&self) -> (&str, &str) {
        (&self.save_target, &self.restore_target)
    }

    /// The tensor the checkpoint path is fed to.
    pub fn filename_tensor(&self) -> &str {
        &self.filename
    }

    /// Saves every variable's current value in `sess` to `save_path` (with a
    /// global step, to `<save_path>-<step>`), records it in the directory's
    /// `checkpoint` state file, deletes checkpoints beyond `max_to_keep`, and
    /// returns the checkpoint's path. First it deletes the temporary files that
    /// saves killed mid-way left in the directory (see the module docs). On
    /// error no checkpoint or state changes on disk.
    pub fn save(
        &self,
        sess: &Session,
        save_path: impl AsRef<Path>,
        global_step: Option<i64>,
    ) -> Result<PathBuf> {
        let save_path = save_path.as_ref();
        let path = match global_step {
            Some(step) => {
                let mut p = save_path.as_os_str().to_owned();
                p.push(format!("-{step}"));
                PathBuf::from(p)
            }
            None => save_path.to_owned(),
        };
        let path_str = path_to_str(&path)?;
        let dir = parent_dir(&path);
        remove_stale_save_temporaries(&dir, save_path, &path);
        sess.run(
            &[(&self.filename, Tensor::string_scalar(path_str.to_owned()))],
            &[],
            &[&self.save_target],
        )?;
        if let Some(scope) = &self.scope {
            self.export_meta_graph(scope, meta_graph_path(&path))?;
        }
        let (kept, doomed) = {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            last.retain(|p| p != &path);
            last.push(path.clone());
            let excess = if self.max_to_keep == 0 {
                0
            } else {
                last.len().saturating_sub(self.max_to_keep)
            };
            let doomed: Vec<PathBuf> = last.drain(..excess).collect();
            (last.clone(), doomed)
        };
        update_checkpoint_state(&dir, &path, &kept)?;
        for prefix in doomed {
            // The index goes first: without it the checkpoint is gone as a
            // whole, so a save killed midway through deleting never leaves an
            // index whose data shards are missing.
            let mut files = bundle_files(&prefix);
            files.sort_by_key(|p| p.extension().is_none_or(|e| e != "index"));
            files.push(meta_graph_path(&prefix));
            for p in files {
                if let Err(e) = std::fs::remove_file(&p) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(path = %p.display(), error = %e, "could not delete an old checkpoint");
                    }
                }
            }
        }
        Ok(path)
    }

    /// Restores every variable in `sess` from the checkpoint at `save_path`
    /// (made by a saver of the same variables). The checkpoint is checked first:
    /// a missing file is `NotFound`, a damaged one `DataLoss`, a variable missing
    /// from it `NotFound`, and a dtype or shape that differs from the
    /// variable's `InvalidArgument`, each naming the file and variable.
    pub fn restore(&self, sess: &Session, save_path: impl AsRef<Path>) -> Result<()> {
        let path = save_path.as_ref();
        let index = read_index(path)?;
        for v in &self.vars {
            let info = index.iter().find(|i| i.name == v.name()).ok_or_else(|| {
                Status::not_found(format!(
                    "Key {} not found in checkpoint {}",
                    v.name(),
                    path.display()
                ))
            })?;
            if info.dtype != v.dtype() {
                return Err(Status::invalid_argument(format!(
                    "restoring {}: variable '{}' is {} but the checkpoint holds {} for it",
                    path.display(),
                    v.name(),
                    v.dtype(),
                    info.dtype
                )));
            }
            if !v.shape().is_compatible_with(&info.shape) {
                return Err(Status::invalid_argument(format!(
                    "restoring {}: variable '{}' has shape {} but the checkpoint holds shape {} for it",
                    path.display(),
                    v.name(),
                    v.shape(),
                    info.shape
                )));
            }
        }
        let path_str = path_to_str(path)?;
        sess.run(
            &[(&self.filename, Tensor::string_scalar(path_str.to_owned()))],
            &[],
            &[&self.restore_target],
        )?;
        Ok(())
    }

    /// Restores the newest readable checkpoint saved under `save_path` (the
    /// prefix given to [`Saver::save`], e.g. `dir/model.ckpt`): those `dir`'s
    /// state file lists, newest first, then the `model.ckpt-<step>` files found
    /// in `dir`, highest step first, skipping each that is damaged or missing
    /// with a warning; see [`checkpoint_management`](super::checkpoint_management).
    /// When one is restored, the saver adopts it and the older ones of its list
    /// as the checkpoints it keeps ([`Saver::recover_last_checkpoints`]), so the
    /// next state file lists no checkpoint that failed; otherwise it keeps none.
    /// Checkpoints that exist but none of which restores are
    /// [`LatestRestore::NoneReadable`], not [`LatestRestore::NoCheckpoint`].
    /// Errors other than `DataLoss` and `NotFound` (a variable of another dtype
    /// or shape, say) are returned at once.
    pub fn restore_newest_readable(
        &self,
        sess: &Session,
        save_path: impl AsRef<Path>,
    ) -> Result<LatestRestore> {
        let save_path = save_path.as_ref();
        let base = save_path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "checkpoint prefix {} does not end in a UTF-8 file name",
                    save_path.display()
                ))
            })?;
        let outcome =
            restore_newest_readable(&parent_dir(save_path), base, |p| self.restore(sess, p))?;
        match &outcome {
            LatestRestore::Restored { kept, .. } => self.recover_last_checkpoints(kept),
            LatestRestore::NoCheckpoint | LatestRestore::NoneReadable { .. } => {
                self.recover_last_checkpoints(&[])
            }
        }
        Ok(outcome)
    }

    /// The checkpoints this saver keeps, oldest first.
    pub fn last_checkpoints(&self) -> Vec<PathBuf> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Adopts `paths` (oldest first) as the checkpoints this saver keeps, e.g.
    /// those of [`get_checkpoint_state`] after a restart, so that later saves
    /// delete them in turn.
    pub fn recover_last_checkpoints(&self, paths: &[PathBuf]) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = paths.to_vec();
    }
}

fn path_to_str(p: &Path) -> Result<&str> {
    p.to_str().ok_or_else(|| {
        Status::invalid_argument(format!("checkpoint path {} is not UTF-8", p.display()))
    })
}

/// Deletes the temporaries that killed saves under `save_path` left in `dir`:
/// those of the state file, of `path` and of every `<base>-<step>` checkpoint.
/// The `.meta` file of the checkpoint at `prefix`.
pub fn meta_graph_path(prefix: &Path) -> PathBuf {
    let mut p = prefix.as_os_str().to_owned();
    p.push(".meta");
    PathBuf::from(p)
}

fn remove_stale_save_temporaries(dir: &Path, save_path: &Path, path: &Path) {
    let base = save_path.file_name().and_then(|n| n.to_str());
    let this = path.file_name().and_then(|n| n.to_str());
    let removed = remove_stale_temporaries(dir, |target| {
        let bundle = bundle_prefix_of(target).or_else(|| target.strip_suffix(".meta"));
        target == CHECKPOINT_STATE_FILE
            || (bundle.is_some() && bundle == this)
            || bundle.is_some_and(|p| base.is_some_and(|b| step_in_name(p, b).is_some()))
    });
    for p in removed {
        tracing::info!(path = %p.display(), "deleted the temporary file of an interrupted save");
    }
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// What a directory's `checkpoint` state file records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointState {
    /// The newest checkpoint.
    pub model_checkpoint_path: PathBuf,
    /// Every kept checkpoint, oldest first (the newest last).
    pub all_model_checkpoint_paths: Vec<PathBuf>,
}

/// How a path is written in the state file of `dir`: relative when it is in
/// `dir`.
fn relative_to(dir: &Path, p: &Path) -> PathBuf {
    match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) if parent == dir => PathBuf::from(name),
        _ => p.to_owned(),
    }
}

/// Writes `dir`'s `checkpoint` state file (atomically): `newest` is the latest
/// checkpoint, `all` every kept one, oldest first. The file is TensorFlow's
/// `CheckpointState` in text format, without the timestamps.
pub fn update_checkpoint_state(dir: &Path, newest: &Path, all: &[PathBuf]) -> Result<()> {
    let in_dir = |p: &Path| path_to_str(&relative_to(dir, p)).map(str::to_owned);
    let state = CheckpointStateProto {
        model_checkpoint_path: in_dir(newest)?,
        all_model_checkpoint_paths: all.iter().map(|p| in_dir(p)).collect::<Result<_>>()?,
        ..Default::default()
    };
    let text = proto::text::to_text(&state);
    write_atomically(&dir.join(CHECKPOINT_STATE_FILE), false, |w| {
        Ok(std::io::Write::write_all(w, text.as_bytes())?)
    })
}

/// Reads `dir`'s `checkpoint` state file: `None` when there is none, `DataLoss`
/// when it cannot be parsed (as in TensorFlow, a field `CheckpointState` does
/// not have is an error). Relative paths are resolved against `dir`.
pub fn get_checkpoint_state(dir: impl AsRef<Path>) -> Result<Option<CheckpointState>> {
    let dir = dir.as_ref();
    let file = dir.join(CHECKPOINT_STATE_FILE);
    let text = match std::fs::read(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Status::from(e).context(format!("reading {}", file.display()))),
    };
    let bad = |why: &dyn std::fmt::Display| {
        Status::data_loss(format!(
            "checkpoint state file {} is corrupt: {why}",
            file.display()
        ))
    };
    let text = String::from_utf8(text).map_err(|_| bad(&"not UTF-8"))?;
    let state: CheckpointStateProto = proto::text::from_text(&text).map_err(|e| bad(&e))?;
    let resolve = |p: String| {
        let p = PathBuf::from(p);
        if p.is_relative() {
            dir.join(p)
        } else {
            p
        }
    };
    let all: Vec<PathBuf> = state
        .all_model_checkpoint_paths
        .into_iter()
        .map(resolve)
        .collect();
    match state.model_checkpoint_path.as_str() {
        "" if all.is_empty() => Ok(None),
        "" => Err(bad(&"no model_checkpoint_path")),
        _ => Ok(Some(CheckpointState {
            model_checkpoint_path: resolve(state.model_checkpoint_path),
            all_model_checkpoint_paths: all,
        })),
    }
}

/// The newest checkpoint recorded in `dir`'s state file, if the file and that
/// checkpoint exist (`tf.train.latest_checkpoint`).
pub fn latest_checkpoint(dir: impl AsRef<Path>) -> Result<Option<PathBuf>> {
    Ok(get_checkpoint_state(dir)?
        .map(|s| s.model_checkpoint_path)
        .filter(|p| index_path(p).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_file_round_trips_relative_to_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let elsewhere = PathBuf::from("/elsewhere/model.ckpt-1");
        let all = [elsewhere.clone(), d.join("model.ckpt-2")];
        update_checkpoint_state(d, &all[1], &all).unwrap();
        let text = std::fs::read_to_string(d.join(CHECKPOINT_STATE_FILE)).unwrap();
        assert_eq!(
            text,
            "model_checkpoint_path: \"model.ckpt-2\"\n\
             all_model_checkpoint_paths: \"/elsewhere/model.ckpt-1\"\n\
             all_model_checkpoint_paths: \"model.ckpt-2\"\n"
        );
        let state = get_checkpoint_state(d).unwrap().unwrap();
        assert_eq!(state.model_checkpoint_path, all[1]);
        assert_eq!(state.all_model_checkpoint_paths, all);
    }

    #[test]
    fn reads_what_tensorflow_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        // tf.compat.v1.train.Saver's file, timestamps and all
        let tf = "model_checkpoint_path: \"model.ckpt-4\"\n\
                  all_model_checkpoint_paths: \"model.ckpt-3\"\n\
                  all_model_checkpoint_paths: \"model.ckpt-4\"\n\
                  all_model_checkpoint_timestamps: 1784015299.2607172\n\
                  all_model_checkpoint_timestamps: 1784015299.510666\n\
                  last_preserved_timestamp: 1784015297.175224\n";
        std::fs::write(d.join(CHECKPOINT_STATE_FILE), tf).unwrap();
        let state = get_checkpoint_state(d).unwrap().unwrap();
        assert_eq!(state.model_checkpoint_path, d.join("model.ckpt-4"));
        assert_eq!(state.all_model_checkpoint_paths.len(), 2);
        // an empty file records nothing
        std::fs::write(d.join(CHECKPOINT_STATE_FILE), "").unwrap();
        assert_eq!(get_checkpoint_state(d).unwrap(), None);
        std::fs::remove_file(d.join(CHECKPOINT_STATE_FILE)).unwrap();
        assert_eq!(get_checkpoint_state(d).unwrap(), None);
    }

    #[test]
    fn a_corrupt_state_file_is_data_loss_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let file = d.join(CHECKPOINT_STATE_FILE);
        for (text, want) in [
            (
                &b"model_checkpoint_path \"x\"\n"[..],
                "line 1 column 23: expected ':'",
            ),
            (b"model_checkpoint_path: \"x\nall", "line 1 column 26"),
            (b"\n\nmodel_checkpoint_pathz: \"x\"", "line 3 column 1"),
            (
                b"all_model_checkpoint_paths: \"x\"",
                "no model_checkpoint_path",
            ),
            (b"model_checkpoint_path: \"\xff\"", "not UTF-8"),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = get_checkpoint_state(d).unwrap_err();
            assert_eq!(e.code(), graph::Code::DataLoss, "{e}");
            let m = e.message();
            assert!(m.contains(&file.display().to_string()), "{m}");
            assert!(m.contains(want), "{want} not in {m}");
        }
    }
}
