//! The checkpoint workloads: `ckpt_save_mib_s` and `ckpt_restore_mib_s`, MiB per
//! second of saving and restoring 256 MiB of variables (8 `float32` variables
//! of 32 MiB, random values) with [`Saver`], as a user
//! calls it: `Saver::save` runs the save graph (`SaveV2` through the session),
//! writes each file under a temporary name, flushes it to disk (`fsync`) and
//! renames it, then updates the `checkpoint` state file and the `.meta` graph;
//! `Saver::restore` checks the checkpoint's index and runs the restore graph
//! (`RestoreV2` and an `Assign` per variable). Each save replaces the previous
//! one at the same prefix, in a directory of its own under the system's
//! temporary directory, removed when the workload is dropped.
//!
//! `bench/tf_reference.py` times `tf.compat.v1.train.Saver.save` and `restore`
//! on the same variables. TensorFlow's bundle writer renames its temporary files
//! but does not `fsync` them (`strace` of TensorFlow 2.21 shows no `fsync` or
//! `fdatasync`), so its save ends when the bytes reach the page cache; ours
//! ends when they are on disk.

use std::path::PathBuf;

use crate::train::{self, Saver};
use crate::{ops, DType, Result, Scope, Session, Status, Tensor};

use super::workloads::REPETITION;
use super::{calibrate, time_per_call, Repetition};

/// Variables and their size.
const VARIABLES: usize = 8;
const VARIABLE_MIB: usize = 32;
/// What one save or restore moves.
const TOTAL_MIB: f64 = (VARIABLES * VARIABLE_MIB) as f64;

/// A session holding the variables (initialised), its saver, a target that
/// zeroes the first variable, and the directory its checkpoints go to (removed
/// on drop).
struct Checkpointed {
    sess: Session,
    saver: Saver,
    first: String,
    clobber: String,
    dir: PathBuf,
}

impl Drop for Checkpointed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Checkpointed {
    fn new(what: &str) -> Result<Checkpointed> {
        let s = Scope::new();
        let elements = (VARIABLE_MIB << 20) / DType::F32.size();
        let shape = ops::constant(&s, Tensor::vector(&[elements as i64]))?;
        let mut vars = Vec::with_capacity(VARIABLES);
        for i in 0..VARIABLES {
            let init = ops::random_uniform(&s, &shape, DType::F32, 17, i as i64 + 1)?;
            vars.push(ops::Variable::new(&s, &format!("v{i}"), &init, true)?);
        }
        let zeros = ops::fill_to(&s, &[elements as i64], &ops::scalar(&s, 0.0f32)?)?;
        let clobber = ops::assign(&s, &vars[0].var, &zeros)?;
        let init = train::global_variables_initializer(&s)?;
        let saver = Saver::new(&s)?;
        let sess = Session::new(&s.graph_def(), crate::SessionOptions::default())?;
        sess.run(&[], &[], &[init.name()])?;
        let dir =
            std::env::temp_dir().join(format!("actorflow_bench_{what}_{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Status::internal(format!("{}: {e}", dir.display())))?;
        Ok(Checkpointed {
            sess,
            saver,
            first: vars[0].value.name(),
            clobber: clobber.name(),
            dir,
        })
    }

    fn prefix(&self) -> PathBuf {
        self.dir.join("model.ckpt")
    }

    fn save(&self) -> Result<PathBuf> {
        self.saver.save(&self.sess, self.prefix(), None)
    }
}

/// MiB per second of `Saver::save` of 256 MiB of variables (see the module
/// docs).
pub fn ckpt_save() -> Result<Repetition> {
    let c = Checkpointed::new("ckpt_save")?;
    Ok(Box::new(move || {
        let run = || c.save().map(|_| ());
        let n = calibrate(REPETITION, run)?;
        Ok(TOTAL_MIB / time_per_call(n, run)?)
    }))
}

/// MiB per second of `Saver::restore` of 256 MiB of variables from the
/// checkpoint saved when the workload is set up (see the module docs). Each
/// repetition first zeroes a variable and afterwards checks that the restores
/// brought its saved value back.
pub fn ckpt_restore() -> Result<Repetition> {
    let c = Checkpointed::new("ckpt_restore")?;
    let path = c.save()?;
    let saved = c.sess.run(&[], &[&c.first], &[])?.remove(0);
    Ok(Box::new(move || {
        c.sess.run(&[], &[&c.clobber], &[])?;
        let run = || c.saver.restore(&c.sess, &path);
        let n = calibrate(REPETITION, run)?;
        let secs = time_per_call(n, run)?;
        if c.sess.run(&[], &[&c.first], &[])?[0] != saved {
            return Err(Status::internal(
                "ckpt_restore: a restored variable differs from its saved value",
            ));
        }
        Ok(TOTAL_MIB / secs)
    }))
}
