//! The benchmark suite: one definition of each workload, run by `cargo bench` (the
//! `suite` bench) and by `actorflow bench`. Each [`Workload`] builds its graph once,
//! warms up, then times repetitions and reports the median figure under the name
//! the issues use (`chain_ns_per_node`, …). `bench/tf_reference.py` runs the same
//! workloads in TensorFlow and prints the same keys.
//!
//! - [`workloads`] — the workloads.
//! - [`checkpoint`] — the checkpoint workloads (`ckpt_save_mib_s`,
//!   `ckpt_restore_mib_s`).
//! - [`serving`] — the model-server workloads (`serve_mlp_rps`,
//!   `serve_mlp_p99_ms`, their `_unbatched` twins, `serve_mlp_batch32_ms`,
//!   `serve_swap_p99_ms`, `serve_steady_p99_ms`) and their gRPC load generator.
//! - [`optimize`] — the graph-optimization workload (`cse_fold_speedup`).

pub mod checkpoint;
pub mod optimize;
pub mod recv_schedule;
pub mod serving;
pub mod workloads;

use std::time::{Duration, Instant};

use crate::Result;

/// A measured figure.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Figure {
    /// The figure's name (also its JSON key).
    pub name: &'static str,
    /// The median value.
    pub value: f64,
    /// Its unit, for the table.
    pub unit: &'static str,
    /// Repetitions measured.
    pub samples: usize,
}

/// One repetition of a prepared workload; returns its figure.
pub type Repetition = Box<dyn FnMut() -> Result<f64>>;

/// A benchmark: how to set it up and measure it.
pub struct Workload {
    /// The figure it reports.
    pub name: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// What it measures.
    pub description: &'static str,
    /// Builds the workload and returns a closure that runs one repetition and returns
    /// its figure.
    pub setup: fn() -> Result<Repetition>,
}

/// Times `f` over `iters` calls and returns seconds per call.
pub fn time_per_call(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() / iters.max(1) as f64)
}

/// Chooses an iteration count so one repetition of `f` takes about `target`.
pub fn calibrate(target: Duration, mut f: impl FnMut() -> Result<()>) -> Result<usize> {
    let t = Instant::now();
    f()?;
    let once = t.elapsed().as_secs_f64().max(1e-9);
    Ok(((target.as_secs_f64() / once) as usize).clamp(1, 1_000_000))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs every workload whose name contains `filter` (all when `None`), with
/// `repetitions` measured runs after one warm-up.
pub fn run(filter: Option<&str>, repetitions: usize) -> Result<Vec<Figure>> {
    let mut out = Vec::new();
    for w in workloads::all() {
        if filter.is_some_and(|f| !w.name.contains(f)) {
            continue;
        }
        let _span = tracing::info_span!("bench", name = w.name).entered();
        let mut rep = (w.setup)()?;
        rep()?;
        let samples: Vec<f64> = (0..repetitions.max(1))
            .map(|_| rep())
            .collect::<Result<_>>()?;
        out.push(Figure {
            name: w.name,
            value: median(samples),
            unit: w.unit,
            samples: repetitions.max(1),
        });
    }
    Ok(out)
}

/// The figures as one JSON object keyed by figure name.
pub fn to_json(figures: &[Figure]) -> String {
    let map: serde_json::Map<String, serde_json::Value> = figures
        .iter()
        .map(|f| (f.name.to_owned(), serde_json::json!(f.value)))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// The figures as an aligned table.
pub fn to_table(figures: &[Figure]) -> String {
    let mut s = format!("{:<32} {:>14}  {}\n", "figure", "value", "unit");
    for f in figures {
        s.push_str(&format!("{:<32} {:>14.3}  {}\n", f.name, f.value, f.unit));
    }
    s
}
