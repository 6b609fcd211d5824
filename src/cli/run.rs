//! `actorflow run`: loads a graph, runs each `--init` target in a step of its own,
//! then `--steps` steps with the feeds, fetches and targets; prints each fetched
//! tensor of the last step and, with `--out DIR`, writes the i-th fetch to
//! `DIR/i.npy`. With `--trace FILE` the main steps are traced and written as a
//! Chrome trace. With `--summaries DIR` every main step also fetches the graph's
//! summary ops (each `ScalarSummary`, `HistogramSummary` and `MergeSummary` no
//! `MergeSummary` consumes) and writes them, with the graph, to a TensorBoard
//! event file in `DIR`.
//!
//! Given a SavedModel directory, it loads the meta graph tagged `--tag` (default
//! `serve`), runs `--signature` (default `serving_default`) on the `--input
//! KEY=FILE.npy` arrays, prints every output and, with `--out DIR`, writes each
//! to `DIR/<output key>.npy`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use actorflow::tensorboard::FileWriter;
use actorflow::trace::ChromeTrace;
use actorflow::{
    npy, saved_model, GraphDef, Result, RunOptions, SavedModel, Session, Status, Tensor, TraceLevel,
};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::{io_error, GraphArgs};

/// Arguments of `actorflow run` (and `actorflow trace`).
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The graph and session.
    #[command(flatten)]
    pub graph: GraphArgs,
    /// A node to run, alone, before the main steps (e.g. an initializer);
    /// repeatable, run in order.
    #[arg(long = "init", value_name = "NODE")]
    pub init: Vec<String>,
    /// Feed tensor NAME (e.g. `x` or `x:0`) with the array in a NumPy .npy file;
    /// repeatable.
    #[arg(long = "feed", value_name = "NAME=FILE.npy")]
    pub feed: Vec<String>,
    /// Fetch a tensor (`NAME` or `NAME:PORT`); repeatable, printed in order.
    #[arg(long = "fetch", value_name = "NAME[:PORT]")]
    pub fetch: Vec<String>,
    /// Run a node without fetching it; repeatable.
    #[arg(long = "target", value_name = "NODE")]
    pub target: Vec<String>,
    /// Write the i-th fetch of the last step to DIR/i.npy (DIR is created).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Trace the main steps and write a Chrome trace-event JSON file (open it in
    /// https://ui.perfetto.dev or chrome://tracing).
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
    /// Run the main step this many times (with a progress bar on a terminal).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub steps: u64,
    /// Abort a step that takes longer than this many seconds (DEADLINE_EXCEEDED).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Fetch the graph's summary ops in every main step and write them, and the
    /// graph, to a TensorBoard event file in DIR (`tensorboard --logdir DIR`).
    #[arg(long, value_name = "DIR")]
    pub summaries: Option<PathBuf>,
    /// SavedModel: a tag of the meta graph to load (repeatable; default `serve`).
    #[arg(long = "tag", value_name = "TAG")]
    pub tag: Vec<String>,
    /// SavedModel: the signature to run.
    #[arg(long, value_name = "KEY")]
    pub signature: Option<String>,
    /// SavedModel: the signature input KEY, from a NumPy .npy file; repeatable.
    #[arg(long = "input", value_name = "KEY=FILE.npy")]
    pub input: Vec<String>,
}

/// The summary ops a step should fetch: every `ScalarSummary`,
/// `HistogramSummary` and `MergeSummary` that no `MergeSummary` consumes.
pub fn summary_fetches(g: &GraphDef) -> Vec<String> {
    const SUMMARY_OPS: [&str; 3] = ["ScalarSummary", "HistogramSummary", "MergeSummary"];
    let merged: HashSet<&str> = g
        .node
        .iter()
        .filter(|n| n.op == "MergeSummary")
        .flat_map(|n| n.input.iter())
        .map(|i| i.split(':').next().unwrap_or(i))
        .collect();
    g.node
        .iter()
        .filter(|n| SUMMARY_OPS.contains(&n.op.as_str()) && !merged.contains(n.name.as_str()))
        .map(|n| format!("{}:0", n.name))
        .collect()
}

/// Parses `NAME=FILE` feeds and reads their files.
fn read_feeds(flag: &str, specs: &[String]) -> Result<Vec<(String, Tensor)>> {
    specs
        .iter()
        .map(|spec| {
            let (name, file) = spec
                .split_once('=')
                .filter(|(n, f)| !n.is_empty() && !f.is_empty())
                .ok_or_else(|| {
                    Status::invalid_argument(format!("{flag} expects NAME=FILE.npy, got '{spec}'"))
                })?;
            let t = npy::read_npy(file).map_err(|e| e.context(format_args!("{flag} '{name}'")))?;
            Ok((name.to_owned(), t))
        })
        .collect()
}

fn timeout(secs: Option<f64>) -> Result<Option<Duration>> {
    secs.map(|s| {
        Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "--timeout must be a positive number of seconds, got {s}"
                ))
            })
    })
    .transpose()
}

fn progress(steps: u64) -> ProgressBar {
    if steps < 2 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps [{elapsed_precise}, {per_sec}]")
    {
        bar.set_style(style);
    }
    bar
}

/// Runs the init targets and the main steps; returns the last step's fetches and,
/// when `trace` is set, the trace of the main steps.
pub fn execute(args: &RunArgs, trace: bool) -> Result<(Vec<Tensor>, Option<ChromeTrace>)> {
    let graph = args.graph.load()?;
    let feeds = read_feeds("--feed", &args.feed)?;
    let timeout = timeout(args.timeout)?;
    let sess: Session = args.graph.session(&graph)?;
    let init_options = RunOptions::default().with_timeout(timeout);
    for node in &args.init {
        sess.run_with(
            &actors::RunArgs::new()
                .target(node)
                .options(init_options.clone()),
        )
        .map_err(|e| e.context(format_args!("--init {node}")))?;
    }
    let options = RunOptions::default()
        .with_timeout(timeout)
        .with_trace_level(if trace {
            TraceLevel::FullTrace
        } else {
            TraceLevel::NoTrace
        });
    let summary_names = summary_fetches(&graph);
    let mut writer = match &args.summaries {
        Some(dir) => {
            let mut w = FileWriter::new(dir)?;
            w.add_graph(&graph)?;
            if summary_names.is_empty() {
                eprintln!(
                    "note: the graph has no summary ops; {} holds only the graph",
                    w.path().display()
                );
            }
            Some(w)
        }
        None => None,
    };
    let mut fetches = args.fetch.clone();
    if writer.is_some() {
        fetches.extend(summary_names);
    }
    let step = actors::RunArgs {
        feeds,
        fetches,
        targets: args.target.clone(),
        options,
    };
    let mut chrome = trace.then(ChromeTrace::new);
    let bar = progress(args.steps);
    let mut outputs = Vec::new();
    for i in 0..args.steps {
        let out = sess.run_with(&step)?;
        if let (Some(c), Some(m)) = (chrome.as_mut(), out.metadata.as_ref()) {
            c.add_step(&format!("step {i}"), m);
        }
        outputs = out.outputs;
        if let Some(w) = writer.as_mut() {
            for t in outputs.drain(args.fetch.len()..) {
                for s in t.as_strings()? {
                    w.add_summary(s, i as i64)?;
                }
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(w) = writer {
        let path = w.path().to_owned();
        w.close()?;
        eprintln!("wrote {}", path.display());
    }
    Ok((outputs, chrome))
}

/// Prints the fetches and writes `--out` files.
pub fn report(args: &RunArgs, outputs: &[Tensor]) -> Result<()> {
    for (name, t) in args.fetch.iter().zip(outputs) {
        println!("{name} ({} {}) = {t}", t.dtype(), t.shape());
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|e| io_error(e, "creating", dir))?;
        for (i, t) in outputs.iter().enumerate() {
            let name = &args.fetch[i];
            npy::write_npy(dir.join(format!("{i}.npy")), t)
                .map_err(|e| e.context(format_args!("fetch '{name}'")))?;
        }
    }
    Ok(())
}

/// Whether `path` is meant as a SavedModel: a directory holding one, or any
/// directory not named like a graph file (whose error then says what a
/// SavedModel directory lacks).
pub fn is_saved_model_path(path: &std::path::Path) -> bool {
    path.is_dir()
        && (saved_model::maybe_saved_model_directory(path)
            || actorflow::GraphFormat::of_path(path).is_err())
}

/// The flags of one mode used in the other: an error naming them.
fn misused(flags: &[(&str, bool)], mode: &str) -> Result<()> {
    let used: Vec<&str> = flags.iter().filter(|f| f.1).map(|f| f.0).collect();
    if used.is_empty() {
        return Ok(());
    }
    Err(Status::invalid_argument(format!(
        "{} cannot be used with {mode}",
        used.join(", ")
    )))
}

/// `actorflow run SAVED_MODEL_DIR`: runs one signature on `--input` arrays.
fn run_saved_model(args: &RunArgs) -> Result<()> {
    misused(
        &[
            ("--init", !args.init.is_empty()),
            ("--feed", !args.feed.is_empty()),
            ("--fetch", !args.fetch.is_empty()),
            ("--target", !args.target.is_empty()),
            ("--summaries", args.summaries.is_some()),
            ("--trace", args.trace.is_some()),
            ("--master", args.graph.master.is_some()),
        ],
        "a SavedModel (give --input KEY=FILE.npy and --signature)",
    )?;
    let tags: Vec<&str> = if args.tag.is_empty() {
        vec![saved_model::TAG_SERVE]
    } else {
        args.tag.iter().map(String::as_str).collect()
    };
    let key = args
        .signature
        .as_deref()
        .unwrap_or(saved_model::DEFAULT_SERVING_SIGNATURE_DEF_KEY);
    let model = SavedModel::load_with(&args.graph.graph, &tags, args.graph.options())?;
    let inputs = read_feeds("--input", &args.input)?;
    let refs: Vec<(&str, Tensor)> = inputs
        .iter()
        .map(|(k, t)| (k.as_str(), t.clone()))
        .collect();
    let mut outputs = BTreeMap::new();
    for _ in 0..args.steps {
        outputs = model.run(key, &refs)?;
    }
    for (k, t) in &outputs {
        println!("{k} ({} {}) = {t}", t.dtype(), t.shape());
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|e| io_error(e, "creating", dir))?;
        for (k, t) in &outputs {
            npy::write_npy(dir.join(format!("{k}.npy")), t)
                .map_err(|e| e.context(format_args!("output '{k}'")))?;
        }
    }
    Ok(())
}

/// `actorflow run`.
pub fn main(args: &RunArgs) -> Result<()> {
    if is_saved_model_path(&args.graph.graph) {
        return run_saved_model(args);
    }
    misused(
        &[
            ("--tag", !args.tag.is_empty()),
            ("--signature", args.signature.is_some()),
            ("--input", !args.input.is_empty()),
        ],
        "a graph file (they are for SavedModel directories)",
    )?;
    let (outputs, chrome) = execute(args, args.trace.is_some())?;
    report(args, &outputs)?;
    if let (Some(path), Some(c)) = (&args.trace, chrome) {
        c.write(path)?;
        eprintln!(
            "wrote {} node events and {} transfers to {}",
            c.node_events(),
            c.flows(),
            path.display()
        );
    }
    Ok(())
}
