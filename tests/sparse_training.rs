//! Embedding models trained with sparse gradients: `compute_gradients` gives the
//! embedding table's gradient as rows (`IndexedSlices`), every optimizer applies
//! them with its sparse update, and the variables after each step match
//! TensorFlow's (`kernels/tests/fixtures/gen_sparse_updates.py`, "training") and,
//! where every row is read, the same model trained with the gradient made dense.
//! The optimizer's global variables and slot names are TensorFlow's too
//! (checkpoints are read by name).

use actorflow::graph::gradients::Gradient;
use actorflow::train::{
    self, AdadeltaOptimizer, AdagradOptimizer, AdamOptimizer, FtrlOptimizer, GradAndVar,
    GradientDescentOptimizer, MomentumOptimizer, Optimizer, ProximalAdagradOptimizer,
    ProximalGradientDescentOptimizer, RMSPropOptimizer, VarRef,
};
use actorflow::{ops, DType, Output, Scope, Session, SessionOptions, Tensor};
use serde_json::Value;

const FIXTURES: &str = include_str!("../kernels/tests/fixtures/sparse_updates.json");

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("fixture arrays are arrays")
        .iter()
        .map(|x| x.as_f64().expect("fixture values are numbers") as f32)
        .collect()
}

fn optimizer(name: &str) -> Box<dyn Optimizer> {
    match name {
        "GradientDescent" => Box::new(GradientDescentOptimizer::new(0.1)),
        "Momentum" => Box::new(MomentumOptimizer::new(0.1, 0.9)),
        "RMSProp" => Box::new(
            RMSPropOptimizer::new(0.01)
                .decay(0.9)
                .momentum(0.5)
                .epsilon(1e-7),
        ),
        "Adam" => Box::new(AdamOptimizer::new(0.05)),
        "Adagrad" => Box::new(AdagradOptimizer::new(0.1)),
        "CenteredRMSProp" => Box::new(
            RMSPropOptimizer::new(0.01)
                .decay(0.9)
                .momentum(0.5)
                .epsilon(1e-7)
                .centered(true),
        ),
        "Adadelta" => Box::new(AdadeltaOptimizer::new(1.0).rho(0.95).epsilon(1e-6)),
        "ProximalGradientDescent" => Box::new(
            ProximalGradientDescentOptimizer::new(0.1)
                .l1_regularization_strength(0.01)
                .l2_regularization_strength(0.02),
        ),
        "ProximalAdagrad" => Box::new(
            ProximalAdagradOptimizer::new(0.1)
                .l1_regularization_strength(0.01)
                .l2_regularization_strength(0.02),
        ),
        "Ftrl" => Box::new(
            FtrlOptimizer::new(0.1)
                .l1_regularization_strength(0.01)
                .l2_regularization_strength(0.02),
        ),
        "FtrlV2" => Box::new(
            FtrlOptimizer::new(0.1)
                .l1_regularization_strength(0.01)
                .l2_regularization_strength(0.02)
                .l2_shrinkage_regularization_strength(0.05),
        ),
        other => panic!("no optimizer {other}"),
    }
}

/// Every optimizer of the fixtures.
const OPTIMIZERS: &[&str] = &[
    "GradientDescent",
    "Momentum",
    "RMSProp",
    "Adam",
    "Adagrad",
    "CenteredRMSProp",
    "Adadelta",
    "ProximalGradientDescent",
    "ProximalAdagrad",
    "Ftrl",
    "FtrlV2",
];

struct Model {
    scope: Scope,
    emb: VarRef,
    w: VarRef,
    emb_value: Output,
    w_value: Output,
    loss: Output,
}

/// `mean((gather(emb, ids) @ w - y)²)` with an embedding table `emb` (10x4)
/// read by `ResourceGather` (resource) or `GatherV2` of its read (reference).
fn model(emb0: &[f32], w0: &[f32], ids: &[i32], y: &[f32], resource: bool) -> Model {
    let s = Scope::new();
    let make = |name: &str, t: Tensor| -> (VarRef, Output) {
        let init = ops::constant(&s, t).unwrap();
        if resource {
            let v = ops::ResourceVariable::new(&s, name, &init, true).unwrap();
            (VarRef::from(&v), v.value)
        } else {
            let v = ops::Variable::new(&s, name, &init, true).unwrap();
            (VarRef::from(&v), v.value)
        }
    };
    let (emb, emb_value) = make("emb", Tensor::new(&[10, 4], emb0.to_vec()).unwrap());
    let (w, w_value) = make("w", Tensor::new(&[4, 1], w0.to_vec()).unwrap());
    let idx = ops::constant(&s, Tensor::vector(ids)).unwrap();
    let rows = if resource {
        ops::resource_gather(&s, &emb.handle(), &idx, DType::F32).unwrap()
    } else {
        let axis = ops::scalar(&s, 0i32).unwrap();
        ops::gather(&s, &emb_value, &idx, &axis).unwrap()
    };
    let y = ops::constant(&s, Tensor::new(&[ids.len(), 1], y.to_vec()).unwrap()).unwrap();
    let pred = ops::mat_mul(&s, &rows, &w_value, false, false).unwrap();
    let r = ops::sub(&s, &pred, &y).unwrap();
    let loss = ops::mean_axes(&s, &ops::square(&s, &r).unwrap(), &[0, 1], false).unwrap();
    Model {
        scope: s,
        emb,
        w,
        emb_value,
        w_value,
        loss,
    }
}

/// Trains `steps` steps (with the embedding's gradient made dense when
/// `densify`) and returns (emb, w) after each.
fn train_steps(m: &Model, name: &str, steps: usize, densify: bool) -> Vec<(Vec<f32>, Vec<f32>)> {
    train_steps_with(m, optimizer(name).as_ref(), steps, densify)
}

fn train_steps_with(
    m: &Model,
    opt: &dyn Optimizer,
    steps: usize,
    densify: bool,
) -> Vec<(Vec<f32>, Vec<f32>)> {
    let s = &m.scope;
    let mut gv = opt.compute_gradients(s, &m.loss, None).unwrap();
    let emb_grad = gv
        .iter()
        .find(|g| g.var.name() == m.emb.name())
        .and_then(|g| g.grad.clone())
        .unwrap();
    assert!(
        matches!(emb_grad, Gradient::Sparse(_)),
        "the embedding's gradient is rows"
    );
    assert!(matches!(
        gv.iter().find(|g| g.var.name() == m.w.name()).unwrap().grad,
        Some(Gradient::Dense(_))
    ));
    if densify {
        gv = gv
            .into_iter()
            .map(|g| GradAndVar {
                grad: g.grad.map(|g| g.to_dense(s).unwrap().into()),
                var: g.var,
            })
            .collect();
    }
    let train_op = opt.apply_gradients(s, &gv, None).unwrap();
    let init = train::global_variables_initializer(s).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[init.name()]).unwrap();
    (0..steps)
        .map(|_| {
            sess.run(&[], &[], &[train_op.name()]).unwrap();
            let out = sess
                .run(&[], &[&m.emb_value.name(), &m.w_value.name()], &[])
                .unwrap();
            (
                out[0]
                    .to_f64_vec()
                    .unwrap()
                    .iter()
                    .map(|&v| v as f32)
                    .collect(),
                out[1]
                    .to_f64_vec()
                    .unwrap()
                    .iter()
                    .map(|&v| v as f32)
                    .collect(),
            )
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

fn check_against_tensorflow(name: &str, resource: bool) {
    let f: Value = serde_json::from_str(FIXTURES).unwrap();
    let t = &f["training"];
    let ids: Vec<i32> = floats(&t["ids"]).iter().map(|&v| v as i32).collect();
    let m = model(
        &floats(&t["emb"]),
        &floats(&t["w"]),
        &ids,
        &floats(&t["y"]),
        resource,
    );
    let case = t["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["optimizer"] == name)
        .unwrap();
    let want = case["steps"].as_array().unwrap();
    let opt = optimizer(name);
    let got = train_steps_with(&m, opt.as_ref(), want.len(), false);
    // TensorFlow's variables, and its name for each slot of the embedding
    let mut names: Vec<String> = train::global_variables(&m.scope)
        .unwrap()
        .iter()
        .map(|v| v.name().to_owned())
        .collect();
    names.sort();
    let tf_names: Vec<&str> = case["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(names, tf_names, "{name} resource={resource} variables");
    let tf_slots = case["slots"].as_object().unwrap();
    assert_eq!(
        opt.get_slot_names(),
        tf_slots.keys().cloned().collect::<Vec<_>>(),
        "{name} slot names"
    );
    for (slot, var_name) in tf_slots {
        assert_eq!(
            opt.get_slot(&m.emb, slot).unwrap().name(),
            var_name.as_str().unwrap(),
            "{name} slot {slot}"
        );
    }
    for (i, ((emb, w), want)) in got.iter().zip(want).enumerate() {
        let what = format!("{name} resource={resource} step {i}");
        assert_close(emb, &floats(&want["emb"]), 2e-5, &format!("{what} emb"));
        assert_close(w, &floats(&want["w"]), 2e-5, &format!("{what} w"));
    }
}

#[test]
fn sparse_updates_match_tensorflow() {
    for name in OPTIMIZERS {
        for resource in [true, false] {
            check_against_tensorflow(name, resource);
        }
    }
}

#[test]
fn sparse_updates_equal_the_dense_path() {
    // Every row is read (some twice), so the sparse updates of the optimizers
    // that leave unread rows alone (Momentum, RMSProp, Adadelta, FTRL, the
    // proximal ones) agree with the dense ones too.
    let emb0: Vec<f32> = (0..40)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
        .collect();
    let w0 = [0.3f32, -0.2, 0.5, 0.1];
    let ids = [0i32, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 3, 7];
    let y: Vec<f32> = (0..ids.len()).map(|i| (i as f32 - 6.0) / 5.0).collect();
    for name in OPTIMIZERS {
        for resource in [true, false] {
            let sparse = train_steps(&model(&emb0, &w0, &ids, &y, resource), name, 5, false);
            let dense = train_steps(&model(&emb0, &w0, &ids, &y, resource), name, 5, true);
            for (i, (a, b)) in sparse.iter().zip(&dense).enumerate() {
                let what = format!("{name} resource={resource} step {i}");
                assert_close(&a.0, &b.0, 1e-6, &format!("{what} emb"));
                assert_close(&a.1, &b.1, 1e-6, &format!("{what} w"));
            }
        }
    }
}

#[test]
fn clipping_sparse_gradients_by_their_global_norm() {
    // The embedding's gradient stays rows; the global norm counts the rows'
    // values (duplicates not summed, as TensorFlow's IndexedSlices) and the
    // weights' gradient, and both come back scaled by clip_norm / norm.
    let f: Value = serde_json::from_str(FIXTURES).unwrap();
    let t = &f["training"];
    let ids: Vec<i32> = floats(&t["ids"]).iter().map(|&v| v as i32).collect();
    let m = model(
        &floats(&t["emb"]),
        &floats(&t["w"]),
        &ids,
        &floats(&t["y"]),
        true,
    );
    let s = &m.scope;
    let opt = GradientDescentOptimizer::new(0.1);
    let gv = opt.compute_gradients(s, &m.loss, None).unwrap();
    let (clipped, norm) = train::clip_gradients_by_global_norm(s, &gv, 0.01).unwrap();
    let parts = |g: &Option<Gradient>| match g {
        Some(Gradient::Sparse(g)) => (g.values.clone(), Some(g.indices.clone())),
        Some(Gradient::Dense(g)) => (g.clone(), None),
        None => panic!("every variable has a gradient"),
    };
    let mut fetches = vec![norm.name()];
    for (before, after) in gv.iter().zip(&clipped) {
        let ((v0, i0), (v1, i1)) = (parts(&before.grad), parts(&after.grad));
        assert_eq!(i0.is_some(), i1.is_some(), "sparse stays sparse");
        assert_eq!(i0.map(|i| i.name()), i1.map(|i| i.name()), "same indices");
        fetches.push(v0.name());
        fetches.push(v1.name());
    }
    let names: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let init = train::global_variables_initializer(s).unwrap();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[init.name()]).unwrap();
    let out = sess.run(&[], &names, &[]).unwrap();
    let grads: Vec<Vec<f64>> = out[1..].iter().map(|t| t.to_f64_vec().unwrap()).collect();
    let want_norm = grads
        .iter()
        .step_by(2)
        .flatten()
        .map(|x| x * x)
        .sum::<f64>()
        .sqrt();
    let got_norm = out[0].scalar_value::<f32>().unwrap() as f64;
    assert!(
        (got_norm - want_norm).abs() <= 1e-5 * want_norm,
        "{got_norm} vs {want_norm}"
    );
    assert!(want_norm > 0.01, "the test clips");
    for pair in grads.chunks(2) {
        for (a, b) in pair[0].iter().zip(&pair[1]) {
            assert!((a * 0.01 / want_norm - b).abs() <= 1e-6, "{a} -> {b}");
        }
    }
}
