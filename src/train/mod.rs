//! Training: the graph-side API of [`graph::train`] (variables and their
//! collections, the global step, optimizers), re-exported, plus checkpoints in a
//! session.
//!
//! - [`saver`] — [`Saver`]: save and restore variables, keep the newest N
//!   checkpoints, find the latest after a restart.
//! - [`checkpoint_management`] — which checkpoint a restart restores: the
//!   newest readable one, falling back past damaged or missing ones.
//! - [`monitored`] — [`MonitoredTrainingSession`] and its hooks.
//! - [`sync_replicas_hook`] — [`SyncReplicasHook`]: the initialisation and the
//!   chief's sync loop of a [`SyncReplicasOptimizer`].
//!
//! The checkpoint format (TensorFlow's tensor bundle) and its reader live in
//! [`kernels::cpu::checkpoint`] (re-exported here as [`CheckpointReader`]).

pub mod checkpoint_management;
pub mod monitored;
pub mod saver;
pub mod sync_replicas_hook;

pub use checkpoint_management::{LatestRestore, SkippedCheckpoint};
pub use graph::train::*;
pub use kernels::cpu::checkpoint::{read_index, CheckpointReader, TensorInfo};
pub use monitored::{
    CheckpointSaverHook, LoggingTensorHook, MonitoredTrainingSession, SessionRunHook,
    StepCounterHook, StopAtStepHook, SummarySaverHook, TrainingConfig, CHECKPOINT_BASENAME,
};
pub use saver::{
    get_checkpoint_state, latest_checkpoint, meta_graph_path, update_checkpoint_state,
    CheckpointState, Saver, SaverOptions, CHECKPOINT_STATE_FILE,
};
pub use sync_replicas_hook::SyncReplicasHook;
