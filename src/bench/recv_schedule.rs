//! The recv-scheduling workloads (whitepaper §5.2, `enable_recv_scheduling`):
//! `recv_sched_peak_mib` and `recv_sched_step_ms`, with scheduling on and off.
//!
//! The model is one where the time a tensor arrives matters: a parameter
//! server's weights on task 1 of a two-task gRPC cluster ([`STAGES`] variables
//! of [`ELEMENTS`] floats) read by a chain on task 0 that needs weight `i` only
//! at its stage `i` ([`TANH_PER_STAGE`] `Tanh`s of a vector of the same size,
//! a variable of task 0 at first, then `+ w_i`). Unscheduled, all of task 0's `_Recv`s ask for their weights
//! when the step starts, so every weight sits in task 0's memory from the start;
//! scheduled, each arrives during the stage before the one that reads it.
//!
//! Peak memory is the step's peak tensor bytes on task 0's device, from a
//! traced run's `RunMetadata` (a tensor that arrives by `RecvTensor` is charged
//! to the device that receives it, as TensorFlow allocates it there).

use crate::graph::builder::Scope;
use crate::ops;
use crate::train::global_variables_initializer;
use crate::{
    Connect, Result, RunArgs, RunOptions, Server, Session, SessionOptions, Status, TraceLevel,
};

use super::workloads::{local_cluster, REPETITION};
use super::{calibrate, time_per_call, Repetition};

/// Weights, and stages of the chain.
pub const STAGES: usize = 8;
/// Floats per weight (4 MiB).
pub const ELEMENTS: usize = 1 << 20;
/// `Tanh`s per stage before the stage's weight is added.
pub const TANH_PER_STAGE: usize = 4;

/// The staged model's node names.
pub struct StagedModel {
    /// Initialises the weights.
    pub init: String,
    /// The chain's last vector, summed (a scalar on task 0).
    pub output: String,
}

/// Builds the staged model in `s`, the weights on `weights_device` and the chain
/// on `chain_device`; see the module docs.
pub fn staged_model(s: &Scope, weights_device: &str, chain_device: &str) -> Result<StagedModel> {
    let ps = s.with_device(weights_device);
    let chain = s.with_device(chain_device);
    let mut weights = Vec::with_capacity(STAGES);
    for i in 0..STAGES {
        let v = ops::scalar(&ps, 0.01 * (i + 1) as f32)?;
        let init = ops::fill_to(&ps, &[ELEMENTS as i64], &v)?;
        weights.push(ops::Variable::new(&ps, &format!("w{i}"), &init, false)?);
    }
    // The chain starts from a variable, so that constant folding cannot
    // compute its first stage at build time.
    let half = ops::scalar(&chain, 0.5f32)?;
    let start = ops::fill_to(&chain, &[ELEMENTS as i64], &half)?;
    let mut h = ops::Variable::new(&chain, "start", &start, false)?.value;
    for w in &weights {
        for _ in 0..TANH_PER_STAGE {
            h = ops::tanh(&chain, &h)?;
        }
        h = ops::add(&chain, &h, &w.value)?;
    }
    let output = ops::sum(&chain, &h, &ops::scalar(&chain, 0i32)?, false)?;
    Ok(StagedModel {
        init: global_variables_initializer(s)?.name().to_owned(),
        output: output.name(),
    })
}

/// A two-task cluster running the staged model, initialised, with recv
/// scheduling on or off. Keep the servers as long as the session.
pub fn staged_session(scheduled: bool) -> Result<(Vec<Server>, Session, StagedModel)> {
    let (servers, target) = local_cluster(2)?;
    let s = Scope::new();
    let model = staged_model(&s, "/job:worker/task:1", "/job:worker/task:0")?;
    let options = SessionOptions::default().with_enable_recv_scheduling(scheduled);
    let sess = Session::connect(&target, &s.graph_def(), options)?;
    sess.run(&[], &[], &[&model.init])?;
    Ok((servers, sess, model))
}

/// One traced step: its output and the peak tensor bytes on task 0.
pub fn traced_step(sess: &Session, model: &StagedModel) -> Result<(f32, usize)> {
    let args = RunArgs::new()
        .fetch(model.output.as_str())
        .options(RunOptions::default().with_trace_level(TraceLevel::FullTrace));
    let out = sess.run_with(&args)?;
    let md = out
        .metadata
        .ok_or_else(|| Status::internal("a traced step returned no metadata"))?;
    let peak = md
        .memory()
        .filter(|(device, _)| device.contains("/task:0/"))
        .map(|(_, m)| m.peak_bytes_in_use)
        .sum();
    let value = out
        .outputs
        .first()
        .ok_or_else(|| Status::internal("the staged model's step fetched nothing"))?
        .scalar_value::<f32>()?;
    Ok((value, peak))
}

/// `recv_sched_peak_mib[_unscheduled]`: task 0's peak per step, MiB.
pub fn peak_mib(scheduled: bool) -> Result<Repetition> {
    let (servers, sess, model) = staged_session(scheduled)?;
    Ok(Box::new(move || {
        let _cluster = &servers;
        let (_, peak) = traced_step(&sess, &model)?;
        Ok(peak as f64 / (1 << 20) as f64)
    }))
}

/// `recv_sched_step_ms[_unscheduled]`: milliseconds per step.
pub fn step_ms(scheduled: bool) -> Result<Repetition> {
    let (servers, sess, model) = staged_session(scheduled)?;
    Ok(Box::new(move || {
        let _cluster = &servers;
        let run = || sess.run(&[], &[&model.output], &[]).map(|_| ());
        let n = calibrate(REPETITION, run)?.max(2);
        Ok(time_per_call(n, run)? * 1e3)
    }))
}
