//! Trains an MLP classifier (64 → 128 ReLU → 10, softmax cross-entropy, Adam) on
//! the UCI handwritten digits that ship in `data/digits/`, fed by a queue pipeline:
//!
//! ```text
//! train-*.csv ─ string_input_producer ─ TextLineReaderV2 ─ DecodeCSV ─ Pack / 16
//!   ─ shuffle_batch (2 queue-runner loops) ─ MLP ─ loss ─ Adam.minimize(global_step)
//! ```
//!
//! A [`MonitoredTrainingSession`] restores the newest readable checkpoint of
//! `--checkpoint-dir` when there is one (so a killed run resumes where its last
//! checkpoint left it; if every checkpoint there is damaged it stops with an
//! error, and `--fresh` starts over), saves one every `--save-steps` steps and at the end, writes
//! TensorBoard events (the loss and the graph) to `--logdir`, and stops at
//! `--steps`. One traced step is written as a Perfetto trace. The test split is then
//! evaluated, and the trained classifier is exported as a SavedModel (TensorFlow's
//! format: `images` in, `probabilities` and `classes` out, signature
//! `serving_default`) to `--export-dir/<global step>`, which TensorFlow, TensorFlow
//! Serving and `actorflow run` load; the last line printed is
//! `test_accuracy=<fraction>`.
//!
//! ```sh
//! cargo run --release --example train_digits
//! tensorboard --logdir target/train_digits/events     # the curves and the graph
//! # open target/train_digits/trace.json in https://ui.perfetto.dev
//! actorflow inspect target/train_digits/saved_model/1500   # its signature
//! ```

use std::path::{Path, PathBuf};

use actorflow::ops::{self, DecodeCsvOptions, ReaderOptions, ShuffleBatchOptions};
use actorflow::saved_model::{MetaGraphOptions, PREDICT_METHOD_NAME};
use actorflow::train::{
    get_or_create_global_step, latest_checkpoint, AdamOptimizer, MonitoredTrainingSession,
    Optimizer, Saver, TrainingConfig,
};
use actorflow::{
    DType, Output, Result, RunArgs, RunOptions, SavedModelBuilder, Scope, Session, SessionOptions,
    Signature, Status, Tensor, TensorSpec, TraceLevel,
};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

/// Pixels per image (8×8).
pub const PIXELS: usize = 64;
/// Hidden units.
pub const HIDDEN: usize = 128;
/// Classes.
pub const CLASSES: usize = 10;

/// What to train, and where to keep it.
#[derive(Clone, Debug, Parser)]
#[command(about = "An MLP on the UCI digits: queue pipeline, Adam, checkpoints, TensorBoard")]
pub struct Config {
    /// The directory holding train-*.csv and test-*.csv.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits"))]
    pub data_dir: PathBuf,
    /// Train until the global step reaches this.
    #[arg(long, default_value_t = 1500)]
    pub steps: i64,
    /// Examples per step.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Adam's step size.
    #[arg(long, default_value_t = 0.003)]
    pub learning_rate: f64,
    /// Checkpoints (restored from at start).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/train_digits/ckpt"))]
    pub checkpoint_dir: PathBuf,
    /// Save a checkpoint every this many steps.
    #[arg(long, default_value_t = 250)]
    pub save_steps: i64,
    /// TensorBoard event directory.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/train_digits/events"))]
    pub logdir: PathBuf,
    /// Where the Perfetto trace of one step goes.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/train_digits/trace.json"))]
    pub trace: PathBuf,
    /// Where the SavedModel goes (in a subdirectory named by the global step, as
    /// TensorFlow Serving expects versions).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/train_digits/saved_model"))]
    pub export_dir: PathBuf,
    /// Start from scratch: delete the checkpoints first.
    #[arg(long)]
    pub fresh: bool,
    /// Seeds initial weights and the shuffling.
    #[arg(long, default_value_t = 7)]
    pub seed: i64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// The training graph.
pub struct Model {
    /// The graph.
    pub scope: Scope,
    /// The mean loss of the current batch.
    pub loss: Output,
    /// One Adam step (also increments the global step).
    pub train_op: String,
    /// Evaluation input: `[n, 64]` scaled pixels.
    pub eval_images: Output,
    /// Predicted classes of `eval_images`.
    pub predictions: Output,
    /// The merged summaries.
    pub summary: Output,
}

/// The `<prefix>-*.csv` shards of `dir`, sorted.
pub fn shards(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    let rd =
        std::fs::read_dir(dir).map_err(|e| Status::not_found(format!("{}: {e}", dir.display())))?;
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{prefix}-")) && n.ends_with(".csv"))
        })
        .filter_map(|p| p.to_str().map(str::to_owned))
        .collect();
    v.sort();
    if v.is_empty() {
        return Err(Status::not_found(format!(
            "no {prefix}-*.csv in {}",
            dir.display()
        )));
    }
    Ok(v)
}

/// Reads CSV rows (64 pixels then the label) from `files`: (`[n·64]` pixels / 16, labels).
pub fn load_csv(files: &[String]) -> Result<(Vec<f32>, Vec<i32>)> {
    let (mut px, mut labels) = (Vec::new(), Vec::new());
    for f in files {
        let text =
            std::fs::read_to_string(f).map_err(|e| Status::not_found(format!("{f}: {e}")))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let fields: Vec<&str> = line.split(',').collect();
            let bad = || Status::invalid_argument(format!("{f}:{}: expected 65 numbers", i + 1));
            if fields.len() != PIXELS + 1 {
                return Err(bad());
            }
            for v in &fields[..PIXELS] {
                px.push(v.trim().parse::<f32>().map_err(|_| bad())? / 16.0);
            }
            labels.push(fields[PIXELS].trim().parse::<i32>().map_err(|_| bad())?);
        }
    }
    Ok((px, labels))
}

fn layer(s: &Scope, name: &str, x: &Output, w: &Output, b: &Output, relu: bool) -> Result<Output> {
    let ls = s.with_name_scope(name);
    let y = ops::bias_add(&ls, &ops::mat_mul(&ls, x, w, false, false)?, b, "NHWC")?;
    if relu {
        ops::relu(&ls, &y)
    } else {
        Ok(y)
    }
}

fn weights(s: &Scope, name: &str, shape: [usize; 2], seed: i64) -> Result<ops::Variable> {
    let dims = ops::constant(s, Tensor::vector(&[shape[0] as i32, shape[1] as i32]))?;
    let scale = (2.0 / shape[0] as f32).sqrt();
    let init = ops::mul(
        s,
        &ops::truncated_normal(s, &dims, DType::F32, seed, 0)?,
        &ops::scalar(s, scale)?,
    )?;
    ops::Variable::new(s, name, &init, true)
}

/// The MLP's variables (named `mlp/w1`, `mlp/b1`, `mlp/w2`, `mlp/b2` in every
/// graph, so that the serving graph restores what training saved).
pub struct Mlp {
    scope: Scope,
    w1: ops::Variable,
    b1: ops::Variable,
    w2: ops::Variable,
    b2: ops::Variable,
}

impl Mlp {
    /// The variables, in `s`'s `mlp` name scope.
    pub fn new(s: &Scope, seed: i64) -> Result<Mlp> {
        let ms = s.with_name_scope("mlp");
        let zeros = |n: usize| ops::constant(&ms, Tensor::zeros(DType::F32, vec![n]));
        Ok(Mlp {
            w1: weights(&ms, "w1", [PIXELS, HIDDEN], seed)?,
            b1: ops::Variable::new(&ms, "b1", &zeros(HIDDEN)?, true)?,
            w2: weights(&ms, "w2", [HIDDEN, CLASSES], seed + 1)?,
            b2: ops::Variable::new(&ms, "b2", &zeros(CLASSES)?, true)?,
            scope: ms,
        })
    }

    /// The logits of images `x` (`[n, 64]`).
    pub fn logits(&self, x: &Output) -> Result<Output> {
        let h = layer(
            &self.scope,
            "hidden",
            x,
            &self.w1.value,
            &self.b1.value,
            true,
        )?;
        layer(
            &self.scope,
            "logits",
            &h,
            &self.w2.value,
            &self.b2.value,
            false,
        )
    }
}

/// Exports the classifier of checkpoint `checkpoint` as a SavedModel in
/// `dir`: a serving graph of its own (`images` → the MLP → `probabilities`,
/// `classes`; no input pipeline, no optimizer slots) whose variables are
/// restored from the checkpoint, signature `serving_default`.
pub fn export_saved_model(cfg: &Config, checkpoint: &Path, dir: &Path) -> Result<PathBuf> {
    let s = Scope::new();
    let mlp = Mlp::new(&s, cfg.seed)?;
    let images = s
        .op("Placeholder")
        .name("images")
        .attr("dtype", DType::F32)
        .attr("shape", actorflow::Shape::from_dims(&[None, Some(PIXELS)]))
        .build1()?;
    let logits = mlp.logits(&images)?;
    let probabilities = s
        .op("Softmax")
        .name("probabilities")
        .input(&logits)
        .build1()?;
    let classes = ops::arg_max_axis(&s.with_name_scope("classes"), &logits, 1, DType::I64)?;
    let saver = Saver::new(&s)?;
    let sess = Session::new(&s.graph_def(), SessionOptions::default())?;
    saver.restore(&sess, checkpoint)?;
    let signature = Signature::new(PREDICT_METHOD_NAME)
        .input("images", TensorSpec::of(&images))
        .output("probabilities", TensorSpec::of(&probabilities))
        .output("classes", TensorSpec::of(&classes));
    let mut b = SavedModelBuilder::new(dir)?;
    b.add_meta_graph_and_variables(
        &s,
        &sess,
        &["serve"],
        MetaGraphOptions::default()
            .with_signature("serving_default", signature)
            .with_clear_devices(true),
    )?;
    b.save()
}

/// Builds the pipeline, the MLP, the loss and the training op.
pub fn build(cfg: &Config) -> Result<Model> {
    let s = Scope::new();
    let step = get_or_create_global_step(&s)?;
    let files = shards(&cfg.data_dir, "train")?;
    let is = s.with_name_scope("input");
    let (names, _) = ops::string_input_producer(&is, &files, None, true, Some(cfg.seed), 32)?;
    let reader = ops::text_line_reader(&is, 0, &ReaderOptions::default())?;
    let (key, line) = ops::reader_read(&is, &reader, &names)?;
    let mut defaults = vec![ops::constant(&is, Tensor::vector::<f32>(&[]))?; PIXELS];
    defaults.push(ops::constant(&is, Tensor::vector::<i32>(&[]))?);
    let mut cols =
        ops::decode_csv_with_key(&is, &key, &line, &defaults, &DecodeCsvOptions::default())?;
    let label = cols
        .pop()
        .ok_or_else(|| Status::internal("DecodeCSV gave no columns"))?;
    let image = ops::mul(
        &is,
        &ops::pack(&is, &cols, 0)?,
        &ops::scalar(&is, 1.0f32 / 16.0)?,
    )?;
    let batch = ops::shuffle_batch(
        &is,
        &[image, label],
        cfg.batch_size,
        10 * cfg.batch_size,
        4 * cfg.batch_size,
        &ShuffleBatchOptions {
            num_threads: 2,
            seed: Some(cfg.seed),
            ..Default::default()
        },
    )?;

    let mlp = Mlp::new(&s, cfg.seed)?;
    let ms = &mlp.scope;
    let (xent, _) = ops::sparse_softmax_cross_entropy_with_logits(
        ms,
        &mlp.logits(&batch.tensors[0])?,
        &batch.tensors[1],
    )?;
    let loss = ops::mean_axes(ms, &xent, &[0], false)?;
    let train_op = AdamOptimizer::new(cfg.learning_rate).minimize(&s, &loss, Some(&step), None)?;
    ops::summary::summary_scalar(&s, "loss", &loss)?;
    let summary =
        ops::summary::merge_all_summaries(&s)?.ok_or_else(|| Status::internal("no summaries"))?;

    let es = s.with_name_scope("eval");
    let eval_images = ops::placeholder(
        &es,
        DType::F32,
        actorflow::Shape::from_dims(&[None, Some(PIXELS)]),
    )?;
    let predictions = ops::arg_max_axis(&es, &mlp.logits(&eval_images)?, 1, DType::I32)?;
    Ok(Model {
        scope: s,
        loss,
        train_op: train_op.name().to_owned(),
        eval_images,
        predictions,
        summary,
    })
}

/// The session configuration of a run.
pub fn training_config(cfg: &Config, m: &Model) -> TrainingConfig {
    TrainingConfig {
        checkpoint_dir: Some(cfg.checkpoint_dir.clone()),
        save_checkpoint_steps: Some(cfg.save_steps),
        log_step_count_steps: Some(100),
        last_step: Some(cfg.steps),
        summary_dir: Some(cfg.logdir.clone()),
        summary_op: Some(m.summary.name()),
        save_summaries_steps: Some(25),
        ..Default::default()
    }
}

/// The fraction of the test split classified correctly.
pub fn evaluate(cfg: &Config, m: &Model, sess: &actorflow::Session) -> Result<f64> {
    let (px, labels) = load_csv(&shards(&cfg.data_dir, "test")?)?;
    let x = Tensor::new::<f32>(&[labels.len(), PIXELS], px)?;
    let mut args = RunArgs::new().feed(&m.eval_images, x);
    let predictions = args.add_fetch(&m.predictions);
    let out = sess.run_with(&args)?;
    let pred = out.tensor(predictions)?.as_slice::<i32>()?;
    let hits = pred.iter().zip(&labels).filter(|(p, l)| p == l).count();
    Ok(hits as f64 / labels.len().max(1) as f64)
}

/// Trains to `cfg.steps` (resuming from a checkpoint if any), writes the trace,
/// and returns the test accuracy.
pub fn run(cfg: &Config) -> Result<f64> {
    if cfg.fresh {
        let _ = std::fs::remove_dir_all(&cfg.checkpoint_dir);
    }
    let m = build(cfg)?;
    let tc = training_config(cfg, &m);
    let mut sess = MonitoredTrainingSession::new(&m.scope, &tc, Vec::new())?;
    if let Some(p) = sess.restored_from() {
        println!(
            "resuming from {} (global step {})",
            p.display(),
            sess.global_step()
        );
    }
    let bar = if cfg.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(cfg.steps.max(0) as u64)
    };
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40.cyan/blue} {pos}/{len} steps {per_sec} {msg}")
    {
        bar.set_style(style);
    }
    bar.set_position(sess.global_step().max(0) as u64);
    let loss = m.loss.name();
    let mut last = f32::NAN;
    let mut ran = 0u64;
    let mut traced = false;
    while !sess.should_stop() {
        let v = sess.run(&[], &[&loss], &[&m.train_op])?;
        last = v[0].scalar_value::<f32>()?;
        ran += 1;
        bar.set_position(sess.global_step().max(0) as u64);
        bar.set_message(format!("loss {last:.4}"));
        if !traced {
            // one traced step for Perfetto
            let opts = RunOptions::default().with_trace_level(TraceLevel::FullTrace);
            let out = sess
                .session()
                .run_with(&RunArgs::new().fetch(&m.loss).options(opts))?;
            if let Some(md) = out.metadata {
                if let Some(dir) = cfg.trace.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                std::fs::write(&cfg.trace, actorflow::trace::chrome_trace_json(&md))
                    .map_err(|e| Status::unavailable(format!("{}: {e}", cfg.trace.display())))?;
            }
            traced = true;
        }
    }
    bar.finish_and_clear();
    let acc = evaluate(cfg, &m, sess.session())?;
    if ran == 0 {
        // Restored at the last step: nothing ran (remove the checkpoints or pass
        // --fresh to train again).
        println!("global_step={} (already trained)", sess.global_step());
    } else {
        println!("global_step={} loss={last:.4}", sess.global_step());
    }
    let step = sess.global_step();
    sess.close()?;
    let checkpoint = latest_checkpoint(&cfg.checkpoint_dir)?.ok_or_else(|| {
        Status::not_found(format!("no checkpoint in {}", cfg.checkpoint_dir.display()))
    })?;
    let version = cfg.export_dir.join(step.to_string());
    if version.exists() {
        println!("saved_model={} (already exported)", version.display());
    } else {
        let dir = export_saved_model(cfg, &checkpoint, &version)?;
        println!("saved_model={}", dir.display());
    }
    Ok(acc)
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let cfg = Config::parse();
    let acc = run(&cfg)?;
    println!("test_accuracy={acc:.4}");
    Ok(())
}
