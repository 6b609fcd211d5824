//! Which checkpoint of a directory a restart restores (the role of TensorFlow's
//! `checkpoint_management`), independent of the checkpoint's byte format: the
//! rule here only asks "restore prefix P" and reads `Ok` or a [`Status`].
//!
//! # The fallback rule
//!
//! The candidates, in the order they are tried:
//!
//! 1. the checkpoints the `checkpoint` state file lists, newest first (its
//!    `model_checkpoint_path`, then `all_model_checkpoint_paths` from the end);
//! 2. then the checkpoint files of the save prefix's base name found in the
//!    directory but not listed (`<base>-<step>`, or `<base>-<step>.index` as
//!    TensorFlow's tensor bundle names its index), highest global step first.
//!    These matter when the state file is empty, missing or corrupt.
//!
//! The first candidate that restores wins. One that fails with `DataLoss`
//! (damaged) or `NotFound` (missing, or lacking a variable) is skipped with a
//! `tracing` warning naming it and its error; any other error (a dtype or shape
//! that differs from the model's, a newer format, an I/O failure) ends the
//! search at once, since an older checkpoint would not cure it.
//!
//! When every candidate fails, or none exists but the state file is corrupt,
//! the outcome is [`LatestRestore::NoneReadable`] with a `DataLoss` error naming
//! the directory and each failure: checkpoints existed, so starting from
//! scratch would silently lose them. Only a directory with no state file (or an
//! empty one) and no checkpoint file is [`LatestRestore::NoCheckpoint`].
//!
//! After a restore, the checkpoints a saver should go on keeping are the
//! restored one and the older ones of the same source (the state file's, or the
//! files found): the newer ones all failed, so the next state file written lists
//! only checkpoints not known to be unreadable.

use std::path::{Path, PathBuf};

use graph::{Code, Result, Status};

use crate::train::saver::{get_checkpoint_state, CHECKPOINT_STATE_FILE};

/// A checkpoint the search skipped, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedCheckpoint {
    /// Its path (prefix).
    pub path: PathBuf,
    /// The error restoring it gave.
    pub error: Status,
}

/// What restoring the newest readable checkpoint of a directory came to; see
/// the module docs.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LatestRestore {
    /// Restored from `path`, after skipping the newer checkpoints in `skipped`
    /// (newest first).
    Restored {
        /// The checkpoint restored.
        path: PathBuf,
        /// The checkpoints tried before it, newest first.
        skipped: Vec<SkippedCheckpoint>,
        /// The checkpoints to keep, oldest first, ending with `path`.
        kept: Vec<PathBuf>,
    },
    /// The directory holds no checkpoint: nothing was restored.
    NoCheckpoint,
    /// Checkpoints exist but none could be restored; nothing was.
    NoneReadable {
        /// `DataLoss` naming the directory and every failure.
        error: Status,
        /// Every candidate tried, newest first.
        skipped: Vec<SkippedCheckpoint>,
    },
}

/// The global step in a checkpoint name of `base` (`<base>-<step>` or
/// `<base>-<step>.index`), `None` for any other name.
pub fn step_in_name(name: &str, base: &str) -> Option<i64> {
    let rest = name.strip_prefix(base)?.strip_prefix('-')?;
    let digits = rest.strip_suffix(".index").unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Where a candidate came from; the kept list is taken from one source only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    StateFile,
    Found,
}

/// The checkpoints a restore may start from (see the module docs).
struct Candidates {
    /// In the order they are tried, with where each came from.
    list: Vec<(PathBuf, Source)>,
    /// Why the state file could not be parsed, if it could not.
    state_error: Option<Status>,
}

/// The candidates of `dir` for the base name `base`.
fn candidates(dir: &Path, base: &str) -> Result<Candidates> {
    let mut out: Vec<(PathBuf, Source)> = Vec::new();
    let mut state_error = None;
    match get_checkpoint_state(dir) {
        Ok(Some(state)) => {
            let newest_first = std::iter::once(state.model_checkpoint_path)
                .chain(state.all_model_checkpoint_paths.into_iter().rev());
            for p in newest_first {
                if !out.iter().any(|(q, _)| q == &p) {
                    out.push((p, Source::StateFile));
                }
            }
        }
        Ok(None) => {}
        Err(e) if e.code() == Code::DataLoss => {
            tracing::warn!(dir = %dir.display(), error = %e, "the checkpoint state file is unreadable; looking for checkpoint files instead");
            state_error = Some(e);
        }
        Err(e) => return Err(e),
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Candidates {
                list: out,
                state_error,
            })
        }
        Err(e) => {
            return Err(Status::from(e).context(format!("listing checkpoints in {}", dir.display())))
        }
    };
    let mut found: Vec<(i64, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            Status::from(e).context(format!("listing checkpoints in {}", dir.display()))
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(step) = step_in_name(name, base) else {
            continue;
        };
        if !std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let path = dir.join(name.strip_suffix(".index").unwrap_or(name));
        if !out.iter().any(|(q, _)| q == &path) && !found.iter().any(|(_, q)| q == &path) {
            found.push((step, path));
        }
    }
    found.sort_by_key(|(step, _)| std::cmp::Reverse(*step));
    out.extend(found.into_iter().map(|(_, p)| (p, Source::Found)));
    Ok(Candidates {
        list: out,
        state_error,
    })
}

/// Restores the newest readable checkpoint of `dir` for the save prefix base
/// name `base` (`model.ckpt`) with `restore`, following the fallback rule of
/// the module docs. `restore` must leave the model untouched when it fails.
/// Errors are those of reading the directory and the non-fallback errors of
/// `restore`.
pub fn restore_newest_readable(
    dir: &Path,
    base: &str,
    mut restore: impl FnMut(&Path) -> Result<()>,
) -> Result<LatestRestore> {
    let Candidates {
        list: candidates,
        state_error,
    } = candidates(dir, base)?;
    if candidates.is_empty() && state_error.is_none() {
        return Ok(LatestRestore::NoCheckpoint);
    }
    let mut skipped: Vec<SkippedCheckpoint> = Vec::new();
    for (i, (path, source)) in candidates.iter().enumerate() {
        match restore(path) {
            Ok(()) => {
                let mut kept: Vec<PathBuf> = candidates[i..]
                    .iter()
                    .filter(|(_, s)| s == source)
                    .map(|(p, _)| p.clone())
                    .collect();
                kept.reverse();
                return Ok(LatestRestore::Restored {
                    path: path.clone(),
                    skipped,
                    kept,
                });
            }
            Err(e) if matches!(e.code(), Code::DataLoss | Code::NotFound) => {
                tracing::warn!(path = %path.display(), error = %e, "skipping an unreadable checkpoint");
                skipped.push(SkippedCheckpoint {
                    path: path.clone(),
                    error: e,
                });
            }
            Err(e) => return Err(e),
        }
    }
    let mut why: Vec<String> = Vec::new();
    if let Some(e) = &state_error {
        why.push(format!(
            "{}: {e}",
            dir.join(CHECKPOINT_STATE_FILE).display()
        ));
    }
    why.extend(
        skipped
            .iter()
            .map(|s| format!("{}: {}", s.path.display(), s.error)),
    );
    let error = Status::data_loss(format!(
        "no readable checkpoint in {} ({} tried): {}",
        dir.display(),
        skipped.len(),
        why.join("; ")
    ));
    Ok(LatestRestore::NoneReadable { error, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::saver::update_checkpoint_state;

    /// An empty directory of its own, removed when the guard drops (a panic too).
    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("actorflow-ckpt-mgmt-{name}-"))
            .tempdir()
            .unwrap()
    }

    /// A restore that accepts the files holding "ok" and fails the others as
    /// the real one does (`NotFound` when missing, `DataLoss` when damaged).
    fn fake_restore(tried: &mut Vec<PathBuf>) -> impl FnMut(&Path) -> Result<()> + '_ {
        |p: &Path| {
            tried.push(p.to_owned());
            match std::fs::read(p) {
                Ok(b) if b == b"ok" => Ok(()),
                Ok(b) if b == b"mismatch" => Err(Status::invalid_argument("shape differs")),
                Ok(_) => Err(Status::data_loss(format!("{} is damaged", p.display()))),
                Err(e) => Err(Status::from(e)),
            }
        }
    }

    #[test]
    fn names_with_a_step() {
        assert_eq!(step_in_name("model.ckpt-300", "model.ckpt"), Some(300));
        assert_eq!(step_in_name("model.ckpt-7.index", "model.ckpt"), Some(7));
        for other in [
            "model.ckpt",
            "model.ckpt-",
            "model.ckpt--3",
            "model.ckpt-3.meta",
            "model.ckpt-3.bak",
            "model.ckpt-x",
            ".model.ckpt-3.tmp-1-0",
            "other-3",
            "model.ckpt-99999999999999999999",
        ] {
            assert_eq!(step_in_name(other, "model.ckpt"), None, "{other}");
        }
    }

    #[test]
    fn falls_back_along_the_state_file_then_the_files_found() {
        let tmp = scratch("order");
        let d = tmp.path();
        let p = |n: &str| d.join(n);
        std::fs::write(p("model.ckpt-10"), b"ok").unwrap();
        std::fs::write(p("model.ckpt-20"), b"ok").unwrap();
        std::fs::write(p("model.ckpt-30"), b"damaged").unwrap();
        // 40 is listed but missing; 25 and 5 are on disk but not listed
        std::fs::write(p("model.ckpt-25"), b"ok").unwrap();
        std::fs::write(p("model.ckpt-5"), b"ok").unwrap();
        std::fs::write(p("notes.txt"), b"ok").unwrap();
        let listed = [
            p("model.ckpt-10"),
            p("model.ckpt-20"),
            p("model.ckpt-30"),
            p("model.ckpt-40"),
        ];
        update_checkpoint_state(d, &listed[3], &listed).unwrap();
        let mut tried = Vec::new();
        let r = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried)).unwrap();
        let LatestRestore::Restored {
            path,
            skipped,
            kept,
        } = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(path, p("model.ckpt-20"));
        assert_eq!(
            tried,
            [p("model.ckpt-40"), p("model.ckpt-30"), p("model.ckpt-20")]
        );
        assert_eq!(
            skipped
                .iter()
                .map(|s| (s.path.clone(), s.error.code()))
                .collect::<Vec<_>>(),
            [
                (p("model.ckpt-40"), Code::NotFound),
                (p("model.ckpt-30"), Code::DataLoss)
            ]
        );
        assert_eq!(kept, [p("model.ckpt-10"), p("model.ckpt-20")]);

        // every listed one fails: the unlisted files, highest step first
        std::fs::write(p("model.ckpt-10"), b"damaged").unwrap();
        std::fs::write(p("model.ckpt-20"), b"damaged").unwrap();
        let mut tried = Vec::new();
        let r = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried)).unwrap();
        let LatestRestore::Restored { path, kept, .. } = r else {
            panic!("{r:?}")
        };
        assert_eq!(path, p("model.ckpt-25"));
        assert_eq!(tried.len(), 5);
        assert_eq!(kept, [p("model.ckpt-5"), p("model.ckpt-25")]);

        // a corrupt state file: the files found, warned about
        std::fs::write(p("checkpoint"), b"model_checkpoint_path \"x\"\n").unwrap();
        let mut tried = Vec::new();
        let r = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried)).unwrap();
        assert!(
            matches!(r, LatestRestore::Restored { ref path, .. } if path == &p("model.ckpt-25")),
            "{r:?}"
        );
        assert_eq!(tried, [p("model.ckpt-30"), p("model.ckpt-25")]);
    }

    #[test]
    fn nothing_readable_is_an_error_naming_each_failure() {
        let tmp = scratch("none");
        let d = tmp.path();
        let mut tried = Vec::new();
        // no directory, an empty one, and only an empty state file: no checkpoint
        let r = restore_newest_readable(&d.join("missing"), "model.ckpt", fake_restore(&mut tried));
        assert_eq!(r.unwrap(), LatestRestore::NoCheckpoint);
        let r = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried));
        assert_eq!(r.unwrap(), LatestRestore::NoCheckpoint);
        std::fs::write(d.join("checkpoint"), b"").unwrap();
        let r = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried));
        assert_eq!(r.unwrap(), LatestRestore::NoCheckpoint);
        assert!(tried.is_empty());

        // a listed checkpoint that is gone, and a damaged file
        let gone = d.join("model.ckpt-2");
        update_checkpoint_state(d, &gone, std::slice::from_ref(&gone)).unwrap();
        std::fs::write(d.join("model.ckpt-1"), b"damaged").unwrap();
        let r = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried)).unwrap();
        let LatestRestore::NoneReadable { error, skipped } = r else {
            panic!("{r:?}")
        };
        assert_eq!(error.code(), Code::DataLoss);
        for needle in [
            d.display().to_string(),
            gone.display().to_string(),
            "model.ckpt-1 is damaged".into(),
        ] {
            assert!(error.message().contains(&needle), "{needle} not in {error}");
        }
        assert_eq!(skipped.len(), 2);

        // only a corrupt state file
        std::fs::remove_file(d.join("model.ckpt-1")).unwrap();
        std::fs::write(d.join("checkpoint"), b"garbage").unwrap();
        let r = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried)).unwrap();
        let LatestRestore::NoneReadable { error, skipped } = r else {
            panic!("{r:?}")
        };
        assert!(error.message().contains("state file"), "{error}");
        assert!(skipped.is_empty());
    }

    #[test]
    fn other_errors_end_the_search() {
        let tmp = scratch("mismatch");
        let d = tmp.path();
        std::fs::write(d.join("model.ckpt-1"), b"ok").unwrap();
        std::fs::write(d.join("model.ckpt-2"), b"mismatch").unwrap();
        let mut tried = Vec::new();
        let e = restore_newest_readable(d, "model.ckpt", fake_restore(&mut tried)).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(tried, [d.join("model.ckpt-2")]);
    }
}
