//! Optimizers end to end: each minimises a least-squares problem in a session,
//! with reference and resource variables, and its values after every step match
//! a numpy reference (`scripts/gen_training_reference.py`, itself checked
//! against TensorFlow's `tf.compat.v1.train` optimizers); the global step counts
//! the steps; updates of variables on different devices place and run.

use actorflow::train::{
    self, AdamOptimizer, GradientDescentOptimizer, MomentumOptimizer, Optimizer, RMSPropOptimizer,
    VarRef,
};
use actorflow::{ops, Output, Scope, Session, SessionOptions, Tensor};
use serde_json::Value;

const REFERENCE: &str = include_str!("fixtures/training/least_squares.json");

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn optimizer(name: &str, cfg: &Value, use_locking: bool) -> Box<dyn Optimizer> {
    let f = |k: &str| cfg[k].as_f64().expect("a hyper-parameter");
    match name {
        "gd" => Box::new(GradientDescentOptimizer::new(f("lr")).use_locking(use_locking)),
        "momentum" | "nesterov" => Box::new(
            MomentumOptimizer::new(f("lr"), f("momentum"))
                .use_nesterov(cfg["nesterov"].as_bool().unwrap_or(false))
                .use_locking(use_locking),
        ),
        "adam" => Box::new(
            AdamOptimizer::new(f("lr"))
                .betas(f("beta1"), f("beta2"))
                .epsilon(f("epsilon"))
                .use_locking(use_locking),
        ),
        "rmsprop" => Box::new(
            RMSPropOptimizer::new(f("lr"))
                .decay(f("decay"))
                .momentum(f("momentum"))
                .epsilon(f("epsilon"))
                .use_locking(use_locking),
        ),
        other => panic!("unknown optimizer {other}"),
    }
}

/// The least-squares graph: variables `w` [d,1] and `b` [1] (of either kind),
/// and `loss = mean((x·w + b - y)²)`.
struct Problem {
    scope: Scope,
    w: VarRef,
    b: VarRef,
    w_value: Output,
    b_value: Output,
    loss: Output,
}

fn problem(reference: &Value, resource: bool, devices: [&str; 2]) -> Problem {
    let (n, d) = (
        reference["n"].as_u64().unwrap() as usize,
        reference["d"].as_u64().unwrap() as usize,
    );
    let s = Scope::new();
    let x = ops::constant(&s, Tensor::new(&[n, d], floats(&reference["x"])).unwrap()).unwrap();
    let y = ops::constant(&s, Tensor::new(&[n, 1], floats(&reference["y"])).unwrap()).unwrap();
    let make = |name: &str, t: Tensor, device: &str| -> (VarRef, Output) {
        let ds = s.with_device(device);
        let init = ops::constant(&ds, t).unwrap();
        if resource {
            let v = ops::ResourceVariable::new(&ds, name, &init, true).unwrap();
            (VarRef::from(&v), v.value)
        } else {
            let v = ops::Variable::new(&ds, name, &init, true).unwrap();
            (VarRef::from(&v), v.value)
        }
    };
    let (w, w_value) = make(
        "w",
        Tensor::new(&[d, 1], vec![0.0f64; d]).unwrap(),
        devices[0],
    );
    let (b, b_value) = make("b", Tensor::vector(&[0.0f64]), devices[1]);
    let pred = ops::add(
        &s,
        &ops::mat_mul(&s, &x, &w_value, false, false).unwrap(),
        &b_value,
    )
    .unwrap();
    let r = ops::sub(&s, &pred, &y).unwrap();
    let loss = ops::mean_axes(&s, &ops::square(&s, &r).unwrap(), &[0, 1], false).unwrap();
    Problem {
        scope: s,
        w,
        b,
        w_value,
        b_value,
        loss,
    }
}

fn assert_close(got: &Tensor, want: &[f64], what: &str) {
    let got = got.to_f64_vec().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-10 * w.abs().max(1.0),
            "{what}: got {got:?}, numpy {want:?}"
        );
    }
}

/// Minimises with optimizer `name` and checks every step against the reference.
fn check_optimizer(name: &str, resource: bool, use_locking: bool) {
    let reference: Value = serde_json::from_str(REFERENCE).unwrap();
    let entry = &reference["optimizers"][name];
    let p = problem(&reference, resource, ["", ""]);
    let s = &p.scope;
    let step = train::get_or_create_global_step(s).unwrap();
    let opt = optimizer(name, &entry["config"], use_locking);
    let train_op = opt.minimize(s, &p.loss, Some(&step), None).unwrap();
    let init = train::global_variables_initializer(s).unwrap();
    let step_value = step.read(s).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[init.name()]).unwrap();
    let what = format!("{name} resource={resource} locking={use_locking}");
    for (i, want) in entry["trajectory"].as_array().unwrap().iter().enumerate() {
        let out = sess
            .run(&[], &[&p.loss.name()], &[train_op.name()])
            .unwrap();
        assert!(
            (out[0].scalar_value::<f64>().unwrap() - want["loss"].as_f64().unwrap()).abs()
                <= 1e-10 * want["loss"].as_f64().unwrap().abs(),
            "{what} step {i}: loss {:?} vs {}",
            out[0],
            want["loss"]
        );
        let vals = sess
            .run(&[], &[&p.w_value.name(), &p.b_value.name()], &[])
            .unwrap();
        assert_close(&vals[0], &floats(&want["w"]), &format!("{what} step {i} w"));
        assert_close(&vals[1], &floats(&want["b"]), &format!("{what} step {i} b"));
    }
    let steps = reference["steps"].as_i64().unwrap();
    assert_eq!(
        sess.run(&[], &[&step_value.name()], &[]).unwrap()[0],
        Tensor::scalar(steps),
        "{what}: the global step counts the steps"
    );
    // the optimizer's slots are global variables, saved and initialised with the rest
    let globals = train::global_variables(s).unwrap();
    for slot in opt.get_slot_names() {
        for var in [&p.w, &p.b] {
            let v = opt.get_slot(var, &slot).unwrap();
            assert!(globals.iter().any(|g| g.name() == v.name()), "{}", v.name());
            assert_eq!(v.kind(), var.kind());
        }
    }
}

#[test]
fn gradient_descent_matches_numpy() {
    check_optimizer("gd", false, false);
    check_optimizer("gd", true, true);
}

#[test]
fn momentum_matches_numpy() {
    check_optimizer("momentum", false, false);
    check_optimizer("momentum", true, false);
    check_optimizer("nesterov", false, true);
    check_optimizer("nesterov", true, false);
}

#[test]
fn adam_matches_numpy() {
    check_optimizer("adam", false, false);
    check_optimizer("adam", true, true);
}

#[test]
fn rmsprop_matches_numpy() {
    check_optimizer("rmsprop", false, true);
    check_optimizer("rmsprop", true, false);
}

#[test]
fn variables_on_two_devices_train_in_place() {
    // `w` on CPU:0 and `b` on CPU:1: each update (and its slots) runs beside its
    // variable, Adam's beta powers beside the first variable, and the result is
    // the single-device one.
    let reference: Value = serde_json::from_str(REFERENCE).unwrap();
    let entry = &reference["optimizers"]["adam"];
    for resource in [false, true] {
        let p = problem(&reference, resource, ["/device:CPU:0", "/device:CPU:1"]);
        let s = &p.scope;
        let step = train::get_or_create_global_step(s).unwrap();
        let opt = optimizer("adam", &entry["config"], false);
        let train_op = opt.minimize(s, &p.loss, Some(&step), None).unwrap();
        let init = train::global_variables_initializer(s).unwrap();
        let sess = Session::new(
            &s.graph_def(),
            SessionOptions::default().with_cpu_devices(2),
        )
        .unwrap();
        sess.run(&[], &[], &[init.name()]).unwrap();
        let placement = sess.placement(&[], &[], &[train_op.name()]).unwrap();
        let device_of = |n: &str| {
            placement
                .iter()
                .find(|(node, _)| node == n)
                .map(|(_, d)| d.clone())
                .unwrap_or_else(|| panic!("{n} not placed"))
        };
        let kind = if resource { "Resource" } else { "" };
        assert!(device_of(&format!("Adam/update_w/{kind}ApplyAdam")).ends_with("CPU:0"));
        assert!(device_of(&format!("Adam/update_b/{kind}ApplyAdam")).ends_with("CPU:1"));
        assert!(device_of("b/Adam").ends_with("CPU:1"));
        let trajectory = entry["trajectory"].as_array().unwrap();
        for _ in trajectory {
            sess.run(&[], &[], &[train_op.name()]).unwrap();
        }
        let last = trajectory.last().unwrap();
        let vals = sess
            .run(&[], &[&p.w_value.name(), &p.b_value.name()], &[])
            .unwrap();
        assert_close(&vals[0], &floats(&last["w"]), "two-device w");
        assert_close(&vals[1], &floats(&last["b"]), "two-device b");
    }
}

#[test]
fn compute_then_apply_gradients_with_a_tensor_learning_rate() {
    // A learning rate fed per step: steps at 0 change nothing, then gradient
    // descent resumes; the global step counts every run.
    let reference: Value = serde_json::from_str(REFERENCE).unwrap();
    let p = problem(&reference, false, ["", ""]);
    let s = &p.scope;
    let lr = ops::placeholder(s, actorflow::DType::F64, actorflow::Shape::scalar()).unwrap();
    let opt = GradientDescentOptimizer::new(&lr);
    let gv = opt.compute_gradients(s, &p.loss, None).unwrap();
    assert_eq!(gv.len(), 2);
    assert!(gv.iter().all(|g| g.grad.is_some()));
    let step = train::get_or_create_global_step(s).unwrap();
    let train_op = opt.apply_gradients(s, &gv, Some(&step)).unwrap();
    let init = train::global_variables_initializer(s).unwrap();
    let step_value = step.read(s).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[init.name()]).unwrap();
    for _ in 0..3 {
        sess.run(
            &[(&lr.name(), Tensor::scalar(0.0f64))],
            &[],
            &[train_op.name()],
        )
        .unwrap();
    }
    let w = sess.run(&[], &[&p.w_value.name()], &[]).unwrap();
    assert!(w[0].to_f64_vec().unwrap().iter().all(|&x| x == 0.0));
    let gd = &reference["optimizers"]["gd"]["trajectory"];
    for _ in 0..2 {
        sess.run(
            &[(&lr.name(), Tensor::scalar(0.05f64))],
            &[],
            &[train_op.name()],
        )
        .unwrap();
    }
    let w = sess.run(&[], &[&p.w_value.name()], &[]).unwrap();
    assert_close(&w[0], &floats(&gd[1]["w"]), "fed learning rate");
    assert_eq!(
        sess.run(&[], &[&step_value.name()], &[]).unwrap()[0],
        Tensor::scalar(5i64)
    );
}

/// Gradients are gated as TensorFlow's optimizers gate them (`GATE_OP`): the update
/// of `w2` waits until the gradient flowing through `w2` to `w1` has read `w2`
/// (`w2/read` passes the variable on, so a consumer sees in-place updates that ran
/// before it). Hand-computed: x = [1 2], w1 = [1 1]ᵀ, w2 = 2, loss = x·w1·w2 = 6;
/// d/dw2 = 3, d/dw1 = xᵀ·2 = [2 4]ᵀ; with learning rate 0.5, w2 = 0.5 and
/// w1 = [0 -1]ᵀ (an ungated update could let w1's gradient read w2 = 0.5 instead).
#[test]
fn updates_wait_for_every_gradient_that_reads_their_variable() {
    for _ in 0..20 {
        let s = Scope::new();
        let x = ops::constant(&s, Tensor::new::<f32>(&[1, 2], vec![1.0, 2.0]).unwrap()).unwrap();
        let w1 = ops::Variable::new(
            &s,
            "w1",
            &ops::constant(&s, Tensor::new::<f32>(&[2, 1], vec![1.0, 1.0]).unwrap()).unwrap(),
            true,
        )
        .unwrap();
        let w2 = ops::Variable::new(
            &s,
            "w2",
            &ops::constant(&s, Tensor::new::<f32>(&[1, 1], vec![2.0]).unwrap()).unwrap(),
            true,
        )
        .unwrap();
        let h = ops::mat_mul(&s, &x, &w1.value, false, false).unwrap();
        let y = ops::mat_mul(&s, &h, &w2.value, false, false).unwrap();
        let loss = ops::sum_axes(&s, &y, &[0, 1], false).unwrap();
        let train = GradientDescentOptimizer::new(0.5)
            .minimize(&s, &loss, None, None)
            .unwrap();
        let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
        sess.run(&[], &[], &[w1.initializer.name(), w2.initializer.name()])
            .unwrap();
        sess.run(&[], &[], &[train.name()]).unwrap();
        let v = sess
            .run(&[], &[&w1.value.name(), &w2.value.name()], &[])
            .unwrap();
        assert_eq!(v[0], Tensor::new::<f32>(&[2, 1], vec![0.0, -1.0]).unwrap());
        assert_eq!(v[1], Tensor::new::<f32>(&[1, 1], vec![0.5]).unwrap());
    }
}

// ---- clipping and learning-rate schedules against TensorFlow
// (`kernels/tests/fixtures/gen_training.py`: "clip" and "schedules")

const TF_TRAINING: &str = include_str!("../kernels/tests/fixtures/training.json");

/// A fixture float: a number, or "nan", "inf", "-inf".
fn tf_float(v: &Value) -> f64 {
    match v.as_str() {
        Some("nan") => f64::NAN,
        Some("inf") => f64::INFINITY,
        Some("-inf") => f64::NEG_INFINITY,
        _ => v.as_f64().expect("a fixture float"),
    }
}

fn tf_floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(tf_float)
        .collect()
}

fn f32_tensor(shape: &Value, values: &Value) -> Tensor {
    let dims: Vec<usize> = floats(shape).iter().map(|&d| d as usize).collect();
    Tensor::new(&dims, tf_floats(values).iter().map(|&x| x as f32).collect()).unwrap()
}

/// Runs `fetches` of the graph in `s` once.
fn run_once(s: &Scope, fetches: &[&Output]) -> Vec<Tensor> {
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let names: Vec<String> = fetches.iter().map(|o| o.name()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    sess.run(&[], &refs, &[]).unwrap()
}

/// Equal within float32 rounding, NaN matching NaN and infinities themselves.
fn assert_tf_close(got: &Tensor, want: &[f64], what: &str) {
    let got = got.to_f64_vec().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= 2e-6 * w.abs().max(1e-3)
        };
        assert!(ok, "{what}[{i}]: got {g}, TensorFlow {w}");
    }
}

#[test]
fn clip_by_global_norm_matches_tensorflow() {
    let f: Value = serde_json::from_str(TF_TRAINING).unwrap();
    for (k, case) in f["clip"]["global"].as_array().unwrap().iter().enumerate() {
        let s = Scope::new();
        let ts: Vec<Output> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| ops::constant(&s, f32_tensor(&t["shape"], &t["values"])).unwrap())
            .collect();
        let clip = case["clip_norm"].as_f64().unwrap();
        let (clipped, norm) = train::clip_by_global_norm(&s, &ts, clip).unwrap();
        let plain = train::global_norm(&s, &ts).unwrap();
        let mut fetches: Vec<&Output> = vec![&norm, &plain];
        fetches.extend(clipped.iter());
        let out = run_once(&s, &fetches);
        let what = format!("case {k} clip_norm {clip}");
        assert_tf_close(&out[0], &[tf_float(&case["global_norm"])], &what);
        assert_tf_close(&out[1], &[tf_float(&case["plain_global_norm"])], &what);
        for (i, want) in case["clipped"].as_array().unwrap().iter().enumerate() {
            assert_eq!(
                Some(out[2 + i].shape().clone()),
                ts[i].shape().to_tensor_shape(),
                "{what}"
            );
            assert_tf_close(&out[2 + i], &tf_floats(want), &format!("{what} tensor {i}"));
        }
    }
}

#[test]
fn clip_by_norm_matches_tensorflow() {
    let f: Value = serde_json::from_str(TF_TRAINING).unwrap();
    for case in f["clip"]["norm"].as_array().unwrap() {
        let s = Scope::new();
        let t = ops::constant(&s, f32_tensor(&case["shape"], &case["values"])).unwrap();
        let axes: Option<Vec<i64>> = case["axes"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_i64().unwrap()).collect());
        let clip = case["clip_norm"].as_f64().unwrap();
        let out = train::clip_by_norm(&s, &t, clip, axes.as_deref()).unwrap();
        // the clip norm may also be a tensor (negative counts as zero)
        let clip_t = ops::constant(&s, Tensor::scalar(clip as f32)).unwrap();
        let out_t = train::clip_by_norm(&s, &t, &clip_t, axes.as_deref()).unwrap();
        let got = run_once(&s, &[&out, &out_t]);
        let what = format!("clip_norm {clip} axes {axes:?}");
        assert_tf_close(&got[0], &tf_floats(&case["clipped"]), &what);
        assert_tf_close(&got[1], &tf_floats(&case["clipped"]), &what);
    }
}

#[test]
fn clipping_hand_computed_and_errors() {
    // [3, 4] and [12]: global norm 13; clipped to 6.5 every value halves
    let s = Scope::new();
    let a = ops::constant(&s, Tensor::vector(&[3.0f64, 4.0])).unwrap();
    let b = ops::constant(&s, Tensor::vector(&[12.0f64])).unwrap();
    let (c, norm) = train::clip_by_global_norm(&s, &[a.clone(), b.clone()], 6.5).unwrap();
    let out = run_once(&s, &[&norm, &c[0], &c[1]]);
    assert_eq!(out[0], Tensor::scalar(13.0f64));
    assert_eq!(out[1], Tensor::vector(&[1.5f64, 2.0]));
    assert_eq!(out[2], Tensor::vector(&[6.0f64]));
    assert_eq!(norm.name(), "global_norm/global_norm:0");
    let e = train::global_norm(&s, &[]).unwrap_err();
    assert_eq!(e.code(), actorflow::Code::InvalidArgument);
    let i = ops::constant(&s, Tensor::vector(&[1i32])).unwrap();
    assert!(train::global_norm(&s, std::slice::from_ref(&i)).is_err());
    let f = ops::constant(&s, Tensor::vector(&[1.0f32])).unwrap();
    let e = train::global_norm(&s, &[a, f]).unwrap_err();
    assert!(e.message().contains("one dtype"), "{e}");
    assert!(train::clip_by_norm(&s, &i, 1.0, None).is_err());
}

#[test]
fn learning_rate_schedules_match_tensorflow() {
    let f: Value = serde_json::from_str(TF_TRAINING).unwrap();
    for case in f["schedules"]["exponential"].as_array().unwrap() {
        let staircase = case["staircase"].as_bool().unwrap();
        let s = Scope::new();
        let step = ops::placeholder(&s, actorflow::DType::I64, actorflow::Shape::scalar()).unwrap();
        let lr = train::exponential_decay(
            &s,
            case["learning_rate"].as_f64().unwrap(),
            &step,
            case["decay_steps"].as_f64().unwrap(),
            case["decay_rate"].as_f64().unwrap(),
            staircase,
        )
        .unwrap();
        assert_eq!(lr.dtype(), actorflow::DType::F32);
        let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
        for (st, want) in floats(&case["steps"]).iter().zip(floats(&case["values"])) {
            let got = sess
                .run(
                    &[(&step.name(), Tensor::scalar(*st as i64))],
                    &[&lr.name()],
                    &[],
                )
                .unwrap();
            assert_tf_close(
                &got[0],
                &[want],
                &format!("staircase={staircase} step {st}"),
            );
        }
    }
    let case = &f["schedules"]["piecewise"][0];
    let s = Scope::new();
    let step = ops::placeholder(&s, actorflow::DType::I64, actorflow::Shape::scalar()).unwrap();
    let boundaries: Vec<i64> = floats(&case["boundaries"])
        .iter()
        .map(|&b| b as i64)
        .collect();
    let values: Vec<f32> = floats(&case["values"]).iter().map(|&v| v as f32).collect();
    let lr = train::piecewise_constant(&s, &step, &boundaries, &values).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    for (st, want) in floats(&case["steps"]).iter().zip(floats(&case["out"])) {
        let got = sess
            .run(
                &[(&step.name(), Tensor::scalar(*st as i64))],
                &[&lr.name()],
                &[],
            )
            .unwrap();
        assert_tf_close(&got[0], &[want], &format!("piecewise step {st}"));
    }
    // TensorFlow's argument checks
    assert!(train::piecewise_constant(&s, &step, &[1i64, 2], &[1.0f32]).is_err());
    assert!(train::piecewise_constant(&s, &step, &[2i64, 1], &[1.0f32, 2.0, 3.0]).is_err());
}

#[test]
fn a_schedule_drives_an_optimizer_through_the_global_step() {
    // 0.05 at step 0, then 0: three runs move the variables by the first
    // gradient-descent step only, and the global step counts all three.
    let reference: Value = serde_json::from_str(REFERENCE).unwrap();
    for resource in [false, true] {
        let p = problem(&reference, resource, ["", ""]);
        let s = &p.scope;
        let step = train::get_or_create_global_step(s).unwrap();
        let step_value = step.read(s).unwrap();
        let lr = train::piecewise_constant(s, &step_value, &[0i64], &[0.05f64, 0.0]).unwrap();
        let train_op = GradientDescentOptimizer::new(&lr)
            .minimize(s, &p.loss, Some(&step), None)
            .unwrap();
        let init = train::global_variables_initializer(s).unwrap();
        let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
        sess.run(&[], &[], &[init.name()]).unwrap();
        for _ in 0..3 {
            sess.run(&[], &[], &[train_op.name()]).unwrap();
        }
        let gd = &reference["optimizers"]["gd"]["trajectory"][0];
        let w = sess.run(&[], &[&p.w_value.name()], &[]).unwrap();
        assert_close(&w[0], &floats(&gd["w"]), "scheduled w");
        assert_eq!(
            sess.run(&[], &[&step_value.name()], &[]).unwrap()[0],
            Tensor::scalar(3i64)
        );
    }
}
