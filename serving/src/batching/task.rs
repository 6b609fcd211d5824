//! One request of a batcher (`Task`: its inputs sorted by key, its size and
//! where its answer goes) and the check of whether two tasks may share a batch.

use graph::{Result, Status, Tensor};
use tokio::sync::oneshot;

use super::Outputs;

/// Where a task's answer goes.
type Reply = oneshot::Sender<Result<Outputs>>;

/// One request: its inputs sorted by key, its size and where its answer goes.
pub(super) struct Task {
    /// Input keys, sorted and distinct.
    pub(super) keys: Vec<String>,
    /// `inputs[i]` is the tensor of `keys[i]`.
    pub(super) inputs: Vec<Tensor>,
    /// The 0th dimension of every input.
    pub(super) rows: usize,
    reply: Reply,
}

impl Task {
    /// A task of `inputs`, or `InvalidArgument` (TensorFlow's
    /// `ComputeTensorBatchSize` messages) when they cannot be batched.
    pub(super) fn new(mut inputs: Vec<(String, Tensor)>, reply: Reply) -> Result<Task> {
        if inputs.is_empty() {
            return Err(Status::invalid_argument(
                "Batching Run() must have at least one input tensor",
            ));
        }
        inputs.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = inputs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Status::invalid_argument(format!(
                "input '{}' is given more than once",
                w[0].0
            )));
        }
        let mut rows = None;
        for (_, t) in &inputs {
            let Some(&n) = t.dims().first() else {
                return Err(Status::invalid_argument(
                    "Batching Run() input tensors must have at least one dimension",
                ));
            };
            match rows {
                None => rows = Some(n),
                Some(r) if r != n => {
                    return Err(Status::invalid_argument(
                        "Batching Run() input tensors must have equal 0th-dimension size",
                    ))
                }
                Some(_) => {}
            }
        }
        let (keys, inputs) = inputs.into_iter().unzip();
        Ok(Task {
            keys,
            inputs,
            rows: rows.unwrap_or(0),
            reply,
        })
    }

    /// True when the caller no longer waits for the answer.
    pub(super) fn is_cancelled(&self) -> bool {
        self.reply.is_closed()
    }

    /// Sends the answer; a caller that went away is no error.
    pub(super) fn answer(self, r: Result<Outputs>) {
        let _ = self.reply.send(r);
    }
}

/// `InvalidArgument` unless `task` may share a batch whose first task is
/// `first` (same key set): per input, the same dtype and rank and — unless
/// `pad` — the same dimensions past the 0th.
pub(super) fn check_compatible(first: &Task, task: &Task, pad: bool) -> Result<()> {
    for ((key, a), b) in first.keys.iter().zip(&first.inputs).zip(&task.inputs) {
        if a.dtype() != b.dtype() {
            return Err(Status::invalid_argument(format!(
                "Tensors with name '{key}' from different tasks have different dtypes ({} and {})",
                a.dtype(),
                b.dtype()
            )));
        }
        if a.rank() != b.rank() {
            return Err(Status::invalid_argument(format!(
                "Tensors with name '{key}' from different tasks have different ranks ({} and {})",
                a.rank(),
                b.rank()
            )));
        }
        if !pad && a.dims()[1..] != b.dims()[1..] {
            return Err(Status::invalid_argument(format!(
                "Tensors with name '{key}' from different tasks have different shapes and \
                 padding is turned off. Set pad_variable_length_inputs to true, or ensure that \
                 all tensors with the same name have equal dimensions starting with the first dim."
            )));
        }
    }
    Ok(())
}
