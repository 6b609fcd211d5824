//! Trains a small convnet on the UCI handwritten digits of `data/digits/` (8×8
//! images) and, on exactly the same batches, the MLP of `train_digits`, then
//! prints both test accuracies; the convnet's is the higher:
//!
//! ```text
//! [n, 8, 8, 1] ─ conv 3×3×16 + ReLU ─ conv 3×3×32 + ReLU ─ max pool 2×2
//!   ─ dense 512→64 + ReLU ─ dropout ─ dense 64→10 ─ softmax cross-entropy ─ Adam
//! ```
//!
//! The data are read once into memory and fed to placeholders (`train_digits`
//! shows the queue pipeline); batches are drawn by a seeded shuffle, so a run is
//! repeatable. The last lines printed are `mlp_test_accuracy=<fraction>` and
//! `test_accuracy=<fraction>` (the convnet's).
//!
//! ```sh
//! cargo run --release --example train_convnet
//! ```

use std::path::PathBuf;

use actorflow::ops::{self, ConvOptions};
use actorflow::train::{AdamOptimizer, Optimizer};
use actorflow::{DType, Output, Result, Scope, Session, SessionOptions, Shape, Status, Tensor};
use clap::Parser;

#[allow(dead_code)]
#[path = "train_digits.rs"]
pub mod digits;
use digits::{load_csv, shards, CLASSES, PIXELS};

/// Image side (8×8 pixels).
const SIDE: usize = 8;

/// What to train.
#[derive(Clone, Debug, Parser)]
#[command(about = "A convnet on the UCI digits, beside the MLP on the same batches")]
pub struct Config {
    /// The directory holding train-*.csv and test-*.csv.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits"))]
    pub data_dir: PathBuf,
    /// Training steps (of each model).
    #[arg(long, default_value_t = 1500)]
    pub steps: usize,
    /// Examples per step.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Adam's step size.
    #[arg(long, default_value_t = 0.003)]
    pub learning_rate: f64,
    /// The convnet's dropout rate on its hidden layer.
    #[arg(long, default_value_t = 0.25)]
    pub dropout: f64,
    /// Seeds the weights, the dropout and the batches.
    #[arg(long, default_value_t = 7)]
    pub seed: i64,
}

/// Which classifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `train_digits`' MLP (64 → 128 ReLU → 10).
    Mlp,
    /// The convnet of the module docs.
    Convnet,
}

/// A classifier's training graph in a session of its own.
pub struct Trainer {
    sess: Session,
    images: Output,
    labels: Output,
    training: Output,
    loss: Output,
    train_op: String,
    predictions: Output,
}

fn variable(s: &Scope, name: &str, dims: &[usize], seed: i64) -> Result<ops::Variable> {
    let fan_in: usize = dims[..dims.len() - 1].iter().product();
    let shape: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
    let init = ops::mul(
        s,
        &ops::truncated_normal(
            s,
            &ops::constant(s, Tensor::vector(&shape))?,
            DType::F32,
            seed,
            0,
        )?,
        &ops::scalar(s, (2.0 / fan_in as f32).sqrt())?,
    )?;
    ops::Variable::new(s, name, &init, true)
}

fn bias(s: &Scope, name: &str, n: usize) -> Result<ops::Variable> {
    ops::Variable::new(
        s,
        name,
        &ops::constant(s, Tensor::zeros(DType::F32, vec![n]))?,
        true,
    )
}

/// `relu(x · w + b)`, or without the ReLU.
fn dense(
    s: &Scope,
    x: &Output,
    w: &ops::Variable,
    b: &ops::Variable,
    relu: bool,
) -> Result<Output> {
    let y = ops::bias_add(
        s,
        &ops::mat_mul(s, x, &w.value, false, false)?,
        &b.value,
        "NHWC",
    )?;
    if relu {
        ops::relu(s, &y)
    } else {
        Ok(y)
    }
}

/// The convnet's logits for `x` (`[n, 64]` pixels); `training` (a bool scalar)
/// turns dropout on.
fn convnet_logits(s: &Scope, x: &Output, training: &Output, cfg: &Config) -> Result<Output> {
    let seed = cfg.seed;
    let image = ops::reshape(
        s,
        x,
        &ops::constant(s, Tensor::vector(&[-1i32, SIDE as i32, SIDE as i32, 1]))?,
    )?;
    let same = ConvOptions::new(&[1, 1, 1, 1], "SAME");
    let conv = |name: &str, x: &Output, c_in: usize, c_out: usize, seed: i64| -> Result<Output> {
        let cs = s.with_name_scope(name);
        let k = variable(&cs, "kernel", &[3, 3, c_in, c_out], seed)?;
        let b = bias(&cs, "bias", c_out)?;
        ops::relu(
            &cs,
            &ops::bias_add(
                &cs,
                &ops::conv2d(&cs, x, &k.value, &same)?,
                &b.value,
                "NHWC",
            )?,
        )
    };
    let h = conv("conv1", &image, 1, 16, seed)?;
    let h = conv("conv2", &h, 16, 32, seed + 1)?;
    let h = ops::max_pool(s, &h, &[1, 2, 2, 1], &[1, 2, 2, 1], "VALID", "NHWC")?;
    let flat = (SIDE / 2) * (SIDE / 2) * 32;
    let h = ops::reshape(
        s,
        &h,
        &ops::constant(s, Tensor::vector(&[-1i32, flat as i32]))?,
    )?;
    let fs = s.with_name_scope("hidden");
    let h = dense(
        &fs,
        &h,
        &variable(&fs, "w", &[flat, 64], seed + 2)?,
        &bias(&fs, "b", 64)?,
        true,
    )?;
    // dropout while training, the identity otherwise: a Switch-free select keeps
    // one graph for both
    let dropped = ops::dropout(&fs, &h, cfg.dropout, None, Some(seed + 3))?;
    let h = ops::select_v2(&fs, training, &dropped, &h)?;
    let ls = s.with_name_scope("logits");
    dense(
        &ls,
        &h,
        &variable(&ls, "w", &[64, CLASSES], seed + 4)?,
        &bias(&ls, "b", CLASSES)?,
        false,
    )
}

impl Trainer {
    /// Builds `kind`'s graph and initializes its variables.
    pub fn new(kind: Kind, cfg: &Config) -> Result<Trainer> {
        let s = Scope::new();
        let images = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(PIXELS)]))?;
        let labels = ops::placeholder(&s, DType::I32, Shape::from_dims(&[None]))?;
        let training = ops::placeholder_with_default(
            &s,
            &ops::constant(&s, Tensor::scalar(false))?,
            Shape::scalar(),
        )?;
        let logits = match kind {
            Kind::Mlp => digits::Mlp::new(&s, cfg.seed)?.logits(&images)?,
            Kind::Convnet => convnet_logits(&s, &images, &training, cfg)?,
        };
        let (xent, _) = ops::sparse_softmax_cross_entropy_with_logits(&s, &logits, &labels)?;
        let loss = ops::mean_axes(&s, &xent, &[0], false)?;
        let train_op = AdamOptimizer::new(cfg.learning_rate).minimize(&s, &loss, None, None)?;
        let predictions = ops::arg_max_axis(&s, &logits, 1, DType::I32)?;
        let init = actorflow::train::global_variables_initializer(&s)?;
        let sess = Session::new(&s.graph_def(), SessionOptions::default())?;
        sess.run(&[], &[], &[init.name()])?;
        Ok(Trainer {
            sess,
            images,
            labels,
            training,
            loss,
            train_op: train_op.name().to_owned(),
            predictions,
        })
    }

    /// One Adam step on a batch; its loss.
    pub fn step(&self, images: Tensor, labels: Tensor) -> Result<f32> {
        let feeds = [
            (self.images.name(), images),
            (self.labels.name(), labels),
            (self.training.name(), Tensor::scalar(true)),
        ];
        let feeds: Vec<(&str, Tensor)> =
            feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let out = self
            .sess
            .run(&feeds, &[&self.loss.name()], &[&self.train_op])?;
        out[0].scalar_value::<f32>()
    }

    /// The fraction of `images` (`[n, 64]`) classified as `labels` says.
    pub fn accuracy(&self, images: Tensor, labels: &[i32]) -> Result<f64> {
        let out = self.sess.run(
            &[(&self.images.name(), images)],
            &[&self.predictions.name()],
            &[],
        )?;
        let hits = out[0]
            .as_slice::<i32>()?
            .iter()
            .zip(labels)
            .filter(|(p, l)| p == l)
            .count();
        Ok(hits as f64 / labels.len().max(1) as f64)
    }
}

/// A split of the data set in memory.
pub struct Split {
    pixels: Vec<f32>,
    labels: Vec<i32>,
}

impl Split {
    /// The `<prefix>-*.csv` shards of the data directory.
    pub fn load(cfg: &Config, prefix: &str) -> Result<Split> {
        let (pixels, labels) = load_csv(&shards(&cfg.data_dir, prefix)?)?;
        if labels.is_empty() {
            return Err(Status::invalid_argument(format!("no {prefix} examples")));
        }
        Ok(Split { pixels, labels })
    }

    /// The examples at `rows` as an images tensor and a labels tensor.
    pub fn batch(&self, rows: &[usize]) -> Result<(Tensor, Tensor)> {
        let px = rows
            .iter()
            .flat_map(|&r| self.pixels[r * PIXELS..(r + 1) * PIXELS].iter().copied())
            .collect();
        let labels = rows.iter().map(|&r| self.labels[r]).collect();
        Ok((
            Tensor::new(&[rows.len(), PIXELS], px)?,
            Tensor::new(&[rows.len()], labels)?,
        ))
    }

    /// Every example.
    pub fn all(&self) -> Result<(Tensor, Tensor)> {
        self.batch(&(0..self.labels.len()).collect::<Vec<_>>())
    }
}

/// The rows of each step's batch: epochs of a shuffle seeded by `seed`
/// (xorshift64*; the same for both models).
pub fn batches(n: usize, batch: usize, steps: usize, seed: i64) -> Vec<Vec<usize>> {
    let mut state = (seed as u64) ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut order: Vec<usize> = (0..n).collect();
    let mut at = n;
    (0..steps)
        .map(|_| {
            (0..batch.min(n))
                .map(|_| {
                    if at == n {
                        for i in (1..n).rev() {
                            order.swap(i, (next() % (i as u64 + 1)) as usize);
                        }
                        at = 0;
                    }
                    at += 1;
                    order[at - 1]
                })
                .collect()
        })
        .collect()
}

/// Trains `kind` on `train`'s batches; its accuracy on `test`.
pub fn train(
    kind: Kind,
    cfg: &Config,
    train: &Split,
    test: &Split,
    plan: &[Vec<usize>],
) -> Result<f64> {
    let t = Trainer::new(kind, cfg)?;
    for rows in plan {
        let (x, y) = train.batch(rows)?;
        t.step(x, y)?;
    }
    let (x, _) = test.all()?;
    t.accuracy(x, &test.labels)
}

/// Trains both models on the same batches: (the MLP's, the convnet's) test accuracy.
pub fn run(cfg: &Config) -> Result<(f64, f64)> {
    let (train_split, test) = (Split::load(cfg, "train")?, Split::load(cfg, "test")?);
    let plan = batches(
        train_split.labels.len(),
        cfg.batch_size,
        cfg.steps,
        cfg.seed,
    );
    let mlp = train(Kind::Mlp, cfg, &train_split, &test, &plan)?;
    let convnet = train(Kind::Convnet, cfg, &train_split, &test, &plan)?;
    Ok((mlp, convnet))
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let cfg = Config::parse();
    let (mlp, convnet) = run(&cfg)?;
    println!("mlp_test_accuracy={mlp:.4}");
    println!("test_accuracy={convnet:.4}");
    Ok(())
}
