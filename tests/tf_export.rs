//! Graphs exported for TensorFlow: builds graphs with actorflow's builder (broadcasting
//! arithmetic, `cond`, `while_loop`, the gradient of a loop, an MLP training step on
//! reference variables, a FIFO queue), exports each with
//! [`graph_def_to_tf_bytes`] and runs it in actorflow with fixed feeds.
//!
//! Each graph has a fixture directory in `tests/fixtures/tf_export/<name>/`:
//! `graph.pb` (the export), `feed_<i>.npy`, `want_<i>.npy` (actorflow's answers) and a
//! `manifest.json` saying how to run it, as `tests/tf_corpus.rs` reads them: `init`
//! targets (each its own step), then `steps` runs of (`feeds`, `fetches`, `targets`)
//! keeping the last, then one step fetching `after`; `want_<i>` numbers the fetches
//! then the `after` tensors; floats compare within the per-dtype `tolerance`.
//! `scripts/check_tf_export.py` (run by hand, never by CI) imports every `graph.pb`
//! into TensorFlow with `tf.compat.v1.import_graph_def`, runs it the same way and
//! compares TensorFlow's answers with `want_<i>.npy`.
//!
//! Normally the test rebuilds every graph and asserts that the committed files are
//! what the export and actorflow produce now (the same `graph.pb` bytes, manifest
//! and feeds; the same answers within the tolerance), so they never go stale. With
//! `ACTORFLOW_REGEN_TF_EXPORT=1` it rewrites the fixture directories instead.
//!
//! actorflow runs the graph decoded back from the exported bytes, so the export is
//! also checked to round-trip.

use std::path::{Path, PathBuf};
use std::time::Duration;

use actorflow::graph::builder::{cond, while_loop, WhileOptions};
use actorflow::graph::gradients::gradients;
use actorflow::graph::import::{graph_def_from_tf_bytes, graph_def_to_tf_bytes, ImportOptions};
use actorflow::ops::{self, QueueOptions};
use actorflow::train::{self, GradientDescentOptimizer, Optimizer, VarRef};
use actorflow::{npy, DType, GraphDef, Output, Scope, Session, SessionOptions, Shape, Tensor};
use serde_json::{json, Value};

/// One exported graph and how to run it.
struct Fixture {
    name: &'static str,
    graph: GraphDef,
    feeds: Vec<(String, Tensor)>,
    fetches: Vec<String>,
    init: Vec<String>,
    targets: Vec<String>,
    steps: usize,
    after: Vec<String>,
}

impl Fixture {
    fn new(name: &'static str, s: &Scope) -> Fixture {
        Fixture {
            name,
            graph: s.graph_def(),
            feeds: Vec::new(),
            fetches: Vec::new(),
            init: Vec::new(),
            targets: Vec::new(),
            steps: 1,
            after: Vec::new(),
        }
    }

    fn feed(mut self, x: &Output, t: Tensor) -> Fixture {
        self.feeds.push((x.name(), t));
        self
    }

    fn fetch(mut self, xs: &[&Output]) -> Fixture {
        self.fetches.extend(xs.iter().map(|x| x.name()));
        self
    }

    /// The manifest, as pretty-printed JSON.
    fn manifest(&self) -> String {
        let feeds: serde_json::Map<String, Value> = self
            .feeds
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), json!(format!("feed_{i}.npy"))))
            .collect();
        let m = json!({
            "feeds": feeds,
            "fetches": self.fetches,
            "init": self.init,
            "targets": self.targets,
            "steps": self.steps,
            "after": self.after,
            "tolerance": {
                "float32": {"rtol": 1e-5, "atol": 1e-6},
                "float64": {"rtol": 1e-10, "atol": 1e-12},
            },
        });
        let mut text = serde_json::to_string_pretty(&m).expect("a JSON value serialises");
        text.push('\n');
        text
    }

    /// Runs the exported graph in actorflow: the fetches of the last step, then the
    /// `after` tensors.
    fn run(&self, pb: &[u8]) -> Vec<Tensor> {
        let graph = graph_def_from_tf_bytes(pb, &ImportOptions::default())
            .unwrap_or_else(|e| panic!("{}: the export does not import back: {e}", self.name));
        let options = SessionOptions::default().with_default_timeout(Duration::from_secs(60));
        let sess = Session::new(&graph, options).expect("a session");
        for t in &self.init {
            sess.run(&[], &[], &[t.as_str()])
                .unwrap_or_else(|e| panic!("{}: init {t}: {e}", self.name));
        }
        let feeds: Vec<(&str, Tensor)> = self
            .feeds
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let fetches: Vec<&str> = self.fetches.iter().map(String::as_str).collect();
        let targets: Vec<&str> = self.targets.iter().map(String::as_str).collect();
        let mut out = Vec::new();
        for step in 0..self.steps {
            out = sess
                .run(&feeds, &fetches, &targets)
                .unwrap_or_else(|e| panic!("{}: step {step}: {e}", self.name));
        }
        if !self.after.is_empty() {
            let after: Vec<&str> = self.after.iter().map(String::as_str).collect();
            out.extend(
                sess.run(&[], &after, &[])
                    .unwrap_or_else(|e| panic!("{}: after: {e}", self.name)),
            );
        }
        sess.close().expect("the session closes");
        out
    }
}

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::new(shape, v.to_vec()).expect("a well-shaped tensor")
}

/// Deterministic values in [-1, 1) for initial weights.
fn weights(shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(12_345);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            ((x >> 8) % 2000) as f32 / 1000.0 - 1.0
        })
        .collect();
    f32s(shape, &v)
}

/// `(a + b) * 0.5`, `max(a - b, 0) / (b * b + 1)` and a row sum over float
/// broadcasting; integer broadcasting with `FloorMod`.
fn broadcast_arith() -> Fixture {
    let s = Scope::new();
    let a = ops::placeholder(&s, DType::F32, Shape::known(&[2, 3])).unwrap();
    let b = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
    let half = ops::scalar(&s, 0.5f32).unwrap();
    let one = ops::scalar(&s, 1.0f32).unwrap();
    let zero = ops::scalar(&s, 0.0f32).unwrap();
    let mean = ops::mul(&s, &ops::add(&s, &a, &b).unwrap(), &half).unwrap();
    let diff = ops::maximum(&s, &ops::sub(&s, &a, &b).unwrap(), &zero).unwrap();
    let den = ops::add(&s, &ops::mul(&s, &b, &b).unwrap(), &one).unwrap();
    let ratio = ops::real_div(&s, &diff, &den).unwrap();
    let rows = ops::sum_axes(&s, &mean, &[1], false).unwrap();
    let i = ops::placeholder(&s, DType::I32, Shape::known(&[2, 1])).unwrap();
    let j = ops::constant(&s, Tensor::new(&[1, 3], vec![3i32, -4, 5]).unwrap()).unwrap();
    let m = ops::floor_mod(&s, &ops::add(&s, &i, &j).unwrap(), &j).unwrap();
    Fixture::new("broadcast_arith", &s)
        .feed(&a, f32s(&[2, 3], &[1.0, -2.0, 3.5, 0.25, 4.0, -1.5]))
        .feed(&b, f32s(&[3], &[0.5, -1.0, 2.0]))
        .feed(&i, Tensor::new(&[2, 1], vec![7i32, -9]).unwrap())
        .fetch(&[&mean, &ratio, &rows, &m])
}

/// Two `cond`s on a fed vector, one taking each branch, both capturing outside values.
fn cond_branches() -> Fixture {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[3])).unwrap();
    let y = ops::constant(&s, f32s(&[3], &[10.0, 20.0, 30.0])).unwrap();
    let total = ops::sum_axes(&s, &x, &[0], false).unwrap();
    let zero = ops::scalar(&s, 0.0f32).unwrap();
    let branches = |pred: &Output| {
        cond(
            &s,
            pred,
            |b| {
                let two = ops::scalar(b, 2.0f32)?;
                Ok(vec![ops::add(b, &ops::mul(b, &x, &two)?, &y)?])
            },
            |b| {
                let one = ops::scalar(b, 1.0f32)?;
                Ok(vec![ops::sub(b, &x, &one)?])
            },
        )
        .unwrap()
        .remove(0)
    };
    let taken = branches(&ops::greater(&s, &total, &zero).unwrap());
    let other = branches(&ops::less(&s, &total, &zero).unwrap());
    Fixture::new("cond", &s)
        .feed(&x, f32s(&[3], &[1.5, -0.5, 2.0]))
        .fetch(&[&taken, &other])
}

/// A counting loop: `acc = acc * 2 - c` `n` times, with a captured vector `c`.
fn while_loop_fixture() -> Fixture {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let c = ops::constant(&s, f32s(&[2], &[1.0, -0.5])).unwrap();
    let i0 = ops::scalar(&s, 0i32).unwrap();
    let out = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            let two = ops::scalar(b, 2.0f32)?;
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                ops::sub(b, &ops::mul(b, &v[1], &two)?, &c)?,
            ])
        },
        &[i0, x.clone()],
        &WhileOptions::default(),
    )
    .unwrap();
    Fixture::new("while_loop", &s)
        .feed(&x, f32s(&[2], &[0.75, 3.0]))
        .feed(&n, Tensor::scalar(5i32))
        .fetch(&[&out[0], &out[1]])
}

/// `acc = acc0 * x^n` by a loop and its gradients with respect to `x` and `acc0`
/// (the backward loop keeps the forward values on stacks).
fn while_grad() -> Fixture {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let acc0 = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let i0 = ops::scalar(&s, 0i32).unwrap();
    let out = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            Ok(vec![
                ops::add(b, &v[0], &ops::scalar(b, 1i32)?)?,
                ops::mul(b, &v[1], &x)?,
            ])
        },
        &[i0, acc0.clone()],
        &WhileOptions::default(),
    )
    .unwrap();
    let acc = out[1].clone();
    let g = gradients(
        &s,
        std::slice::from_ref(&acc),
        &[x.clone(), acc0.clone()],
        None,
    )
    .unwrap();
    let (gx, ga) = (g[0].clone().unwrap(), g[1].clone().unwrap());
    let f = Fixture::new("while_grad", &s);
    assert!(
        f.graph.node.iter().any(|n| n.op == "StackPopV2"),
        "the loop gradient uses stacks"
    );
    f.feed(&x, Tensor::scalar(1.5f64))
        .feed(&acc0, Tensor::scalar(2.0f64))
        .feed(&n, Tensor::scalar(4i32))
        .fetch(&[&acc, &gx, &ga])
}

/// A loop nested in a loop body, `acc = acc0 * x^(n m)`, and its gradients with
/// respect to `x` and `acc0` (the inner gradient loop runs inside the outer one).
fn nested_while_grad() -> Fixture {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let acc0 = ops::placeholder(&s, DType::F64, Shape::scalar()).unwrap();
    let n = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let m = ops::placeholder(&s, DType::I32, Shape::scalar()).unwrap();
    let counted = |b: &Scope,
                   limit: &Output,
                   v: &Output,
                   body: &dyn Fn(&Scope, &Output) -> actorflow::Result<Output>| {
        let out = while_loop(
            b,
            |c, w| ops::less(c, &w[0], limit),
            |c, w| {
                Ok(vec![
                    ops::add(c, &w[0], &ops::scalar(c, 1i32)?)?,
                    body(c, &w[1])?,
                ])
            },
            &[ops::scalar(b, 0i32)?, v.clone()],
            &WhileOptions::default(),
        )?;
        Ok::<Output, actorflow::Status>(out[1].clone())
    };
    let acc = counted(&s, &n, &acc0, &|b, v| {
        counted(b, &m, v, &|c, w| ops::mul(c, w, &x))
    })
    .unwrap();
    let g = gradients(
        &s,
        std::slice::from_ref(&acc),
        &[x.clone(), acc0.clone()],
        None,
    )
    .unwrap();
    let (gx, ga) = (g[0].clone().unwrap(), g[1].clone().unwrap());
    Fixture::new("nested_while_grad", &s)
        .feed(&x, Tensor::scalar(1.25f64))
        .feed(&acc0, Tensor::scalar(0.5f64))
        .feed(&n, Tensor::scalar(3i32))
        .feed(&m, Tensor::scalar(2i32))
        .fetch(&[&acc, &gx, &ga])
}

/// Three gradient-descent steps of a 3-5-1 tanh MLP on reference variables
/// (`ApplyGradientDescent`), then the trained weights.
///
/// The updates run after every gradient (as `minimize` would build them, plus a
/// control dependency on the gradients): in TensorFlow a reference variable's
/// `read` aliases its buffer, so without it the hidden layer's gradient could read
/// the output weights after their in-place update.
fn mlp_train() -> Fixture {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[4, 3])).unwrap();
    let y = ops::placeholder(&s, DType::F32, Shape::known(&[4, 1])).unwrap();
    let var = |name: &str, t: Tensor| {
        let init = ops::constant(&s, t).unwrap();
        ops::Variable::new(&s, name, &init, true).unwrap()
    };
    let w1 = var("w1", weights(&[3, 5], 1));
    let b1 = var("b1", weights(&[5], 2));
    let w2 = var("w2", weights(&[5, 1], 3));
    let b2 = var("b2", weights(&[1], 4));
    let h = ops::tanh(
        &s,
        &ops::add(
            &s,
            &ops::mat_mul(&s, &x, &w1.value, false, false).unwrap(),
            &b1.value,
        )
        .unwrap(),
    )
    .unwrap();
    let pred = ops::add(
        &s,
        &ops::mat_mul(&s, &h, &w2.value, false, false).unwrap(),
        &b2.value,
    )
    .unwrap();
    let r = ops::sub(&s, &pred, &y).unwrap();
    let loss = ops::mean_axes(&s, &ops::square(&s, &r).unwrap(), &[0, 1], false).unwrap();
    let opt = GradientDescentOptimizer::new(0.1);
    let vars: Vec<VarRef> = [&w1, &b1, &w2, &b2].map(VarRef::from).to_vec();
    let gv = opt.compute_gradients(&s, &loss, Some(&vars)).unwrap();
    let grad_ops: Vec<_> = gv
        .iter()
        .map(|g| {
            let grad = g.grad.as_ref().and_then(|g| g.as_dense());
            grad.expect("every weight has a dense gradient").op()
        })
        .collect();
    let train_op = opt
        .apply_gradients(&s.with_control_dependencies(&grad_ops), &gv, None)
        .unwrap();
    let init = train::global_variables_initializer(&s).unwrap();
    let mut f = Fixture::new("mlp_train", &s)
        .feed(
            &x,
            f32s(
                &[4, 3],
                &[
                    0.5, -1.0, 0.25, 1.5, 0.0, -0.5, -1.0, 2.0, 1.0, 0.1, 0.2, 0.3,
                ],
            ),
        )
        .feed(&y, f32s(&[4, 1], &[1.0, -1.0, 0.5, 0.0]))
        .fetch(&[&loss]);
    assert!(
        f.graph.node.iter().any(|n| n.op == "ApplyGradientDescent"),
        "reference variables update with ApplyGradientDescent"
    );
    f.init = vec![init.name().to_owned()];
    f.targets = vec![train_op.name().to_owned()];
    f.steps = 3;
    f.after = [&w1, &b1, &w2, &b2].map(|v| v.value.name()).to_vec();
    f
}

/// A `FIFOQueueV2` filled by `QueueEnqueueManyV2` (the init step), then
/// `QueueDequeueManyV2` of two elements and the size left.
fn fifo_queue() -> Fixture {
    let s = Scope::new();
    let q = ops::fifo_queue(
        &s,
        &[DType::I32, DType::F32],
        &QueueOptions {
            shapes: vec![Shape::scalar(), Shape::known(&[2])],
            capacity: Some(10),
            ..Default::default()
        },
    )
    .unwrap();
    let ids = ops::constant(&s, Tensor::vector(&[4i32, 5, 6])).unwrap();
    let rows = ops::constant(&s, f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).unwrap();
    let enq = ops::queue_enqueue_many(&s, &q, &[ids, rows]).unwrap();
    let two = ops::scalar(&s, 2i32).unwrap();
    let deq = ops::queue_dequeue_many(&s, &q, &two, &[DType::I32, DType::F32]).unwrap();
    let size = ops::queue_size(&s, &q).unwrap();
    let mut f = Fixture::new("fifo_queue", &s).fetch(&[&deq[0], &deq[1]]);
    f.init = vec![enq.name().to_owned()];
    f.after = vec![size.name()];
    f
}

fn fixtures() -> Vec<Fixture> {
    vec![
        broadcast_arith(),
        cond_branches(),
        while_loop_fixture(),
        while_grad(),
        nested_while_grad(),
        mlp_train(),
        fifo_queue(),
    ]
}

fn fixture_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf_export")
}

/// `Err` says how `got` differs from the committed `want`.
fn compare(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.dims() != want.dims() {
        return Err(format!("got {got:?}, committed {want:?}"));
    }
    let (rtol, atol) = match want.dtype() {
        DType::F32 => (1e-5, 1e-6),
        DType::F64 => (1e-10, 1e-12),
        _ if got == want => return Ok(()),
        _ => return Err(format!("got {got:?}, committed {want:?}")),
    };
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let (Some(g), Some(w)) = (g, w) else {
        return Err("float tensors without float elements".into());
    };
    for (i, (a, e)) in g.iter().zip(&w).enumerate() {
        if (a - e).abs() > atol + rtol * e.abs() {
            return Err(format!("element {i} is {a}, committed {e}"));
        }
    }
    Ok(())
}

fn write(dir: &Path, f: &Fixture, pb: &[u8], outputs: &[Tensor]) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("removing the old fixture");
    }
    std::fs::create_dir_all(dir).expect("creating the fixture directory");
    std::fs::write(dir.join("graph.pb"), pb).expect("writing graph.pb");
    std::fs::write(dir.join("manifest.json"), f.manifest()).expect("writing manifest.json");
    for (i, (_, t)) in f.feeds.iter().enumerate() {
        npy::write_npy(dir.join(format!("feed_{i}.npy")), t).expect("writing a feed");
    }
    for (i, t) in outputs.iter().enumerate() {
        npy::write_npy(dir.join(format!("want_{i}.npy")), t).expect("writing an output");
    }
}

fn check(dir: &Path, f: &Fixture, pb: &[u8], outputs: &[Tensor]) -> Vec<String> {
    let hint =
        "(regenerate with ACTORFLOW_REGEN_TF_EXPORT=1, then rerun scripts/check_tf_export.py)";
    let mut problems = Vec::new();
    let mut same = |file: String, want: &[u8]| match std::fs::read(dir.join(&file)) {
        Ok(have) if have == want => {}
        Ok(_) => problems.push(format!("{}/{file} is stale {hint}", f.name)),
        Err(e) => problems.push(format!("{}/{file}: {e} {hint}", f.name)),
    };
    same("graph.pb".into(), pb);
    same("manifest.json".into(), f.manifest().as_bytes());
    for (i, (_, t)) in f.feeds.iter().enumerate() {
        same(
            format!("feed_{i}.npy"),
            &npy::to_npy_bytes(t).expect("a feed encodes"),
        );
    }
    for (i, got) in outputs.iter().enumerate() {
        let file = format!("want_{i}.npy");
        match npy::read_npy(dir.join(&file)) {
            Ok(want) => {
                if let Err(why) = compare(got, &want) {
                    problems.push(format!("{}/{file}: {why} {hint}", f.name));
                }
            }
            Err(e) => problems.push(format!("{}/{file}: {e} {hint}", f.name)),
        }
    }
    problems
}

#[test]
fn exported_graphs_match_their_committed_fixtures() {
    let regen = std::env::var("ACTORFLOW_REGEN_TF_EXPORT").is_ok_and(|v| v == "1");
    let root = fixture_root();
    let mut problems = Vec::new();
    for f in fixtures() {
        let pb = graph_def_to_tf_bytes(&f.graph)
            .unwrap_or_else(|e| panic!("{}: export failed: {e}", f.name));
        let outputs = f.run(&pb);
        assert_eq!(outputs.len(), f.fetches.len() + f.after.len(), "{}", f.name);
        let dir = root.join(f.name);
        if regen {
            write(&dir, &f, &pb, &outputs);
        } else {
            problems.extend(check(&dir, &f, &pb, &outputs));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The fixtures' answers are right by hand, so a committed `want` is never a bug.
#[test]
fn actorflow_answers_are_right() {
    let f = while_grad();
    let out = f.run(&graph_def_to_tf_bytes(&f.graph).unwrap());
    // acc = 2 * 1.5^4, d/dx = 4 * 2 * 1.5^3, d/dacc0 = 1.5^4
    let want = [2.0 * 1.5f64.powi(4), 8.0 * 1.5f64.powi(3), 1.5f64.powi(4)];
    for (t, w) in out.iter().zip(want) {
        assert!(
            (t.scalar_value::<f64>().unwrap() - w).abs() < 1e-12,
            "{t:?} vs {w}"
        );
    }
    let f = nested_while_grad();
    let out = f.run(&graph_def_to_tf_bytes(&f.graph).unwrap());
    // acc = 0.5 * 1.25^6, d/dx = 6 * 0.5 * 1.25^5, d/dacc0 = 1.25^6
    let want = [
        0.5 * 1.25f64.powi(6),
        3.0 * 1.25f64.powi(5),
        1.25f64.powi(6),
    ];
    for (t, w) in out.iter().zip(want) {
        assert!(
            (t.scalar_value::<f64>().unwrap() - w).abs() < 1e-12,
            "{t:?} vs {w}"
        );
    }
    let f = while_loop_fixture();
    let out = f.run(&graph_def_to_tf_bytes(&f.graph).unwrap());
    assert_eq!(out[0], Tensor::scalar(5i32));
    // acc_{k+1} = 2 acc_k - c, so acc_5 = 32 x - 31 c
    let want = [32.0 * 0.75 - 31.0, 32.0 * 3.0 + 31.0 * 0.5];
    assert_eq!(out[1], f32s(&[2], &want));
    let f = fifo_queue();
    let out = f.run(&graph_def_to_tf_bytes(&f.graph).unwrap());
    assert_eq!(out[0], Tensor::vector(&[4i32, 5]));
    assert_eq!(out[1], f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]));
    assert_eq!(out[2], Tensor::scalar(1i32));
    let f = cond_branches();
    let out = f.run(&graph_def_to_tf_bytes(&f.graph).unwrap());
    assert_eq!(out[0], f32s(&[3], &[13.0, 19.0, 34.0]));
    assert_eq!(out[1], f32s(&[3], &[0.5, -1.5, 1.0]));
}
