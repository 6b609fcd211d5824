//! SavedModels: the ones TensorFlow 2.21 wrote (tests/fixtures/saved_model, made
//! by tests/tf_interop/make_saved_model_fixture.py, with TensorFlow's outputs in
//! expected.json) load and reproduce TensorFlow's answers, and the ones
//! actorflow writes load back.

use std::path::{Path, PathBuf};

use actorflow::saved_model::{MetaGraphOptions, PREDICT_METHOD_NAME};
use actorflow::{
    ops, train, Code, DType, SavedModel, SavedModelBuilder, Scope, Session, SessionOptions, Shape,
    Signature, Tensor, TensorSpec,
};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/saved_model")
}

fn expected(model: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    all[model].clone()
}

/// A nested JSON list of numbers as a tensor of `dtype`.
fn tensor(v: &Value, dtype: DType) -> Tensor {
    fn walk(v: &Value, depth: usize, shape: &mut Vec<usize>, flat: &mut Vec<f64>) {
        match v {
            Value::Array(items) => {
                if shape.len() == depth {
                    shape.push(items.len());
                }
                for i in items {
                    walk(i, depth + 1, shape, flat);
                }
            }
            other => flat.push(other.as_f64().expect("a number")),
        }
    }
    let (mut shape, mut flat) = (vec![], vec![]);
    walk(v, 0, &mut shape, &mut flat);
    match dtype {
        DType::F32 => {
            Tensor::new(&shape, flat.iter().map(|x| *x as f32).collect::<Vec<_>>()).unwrap()
        }
        DType::I64 => {
            Tensor::new(&shape, flat.iter().map(|x| *x as i64).collect::<Vec<_>>()).unwrap()
        }
        other => panic!("no JSON conversion to {other:?}"),
    }
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    let (g, w) = (
        got.as_slice::<f32>().unwrap(),
        want.as_slice::<f32>().unwrap(),
    );
    for (i, (a, b)) in g.iter().zip(w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

/// Loads fixture `model` and checks every output against TensorFlow's.
fn reproduces_tensorflow(model: &str) -> SavedModel {
    let e = expected(model);
    let tags: Vec<&str> = e["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let m = SavedModel::load(fixtures().join(model), &tags).unwrap();
    let key = e["signature"].as_str().unwrap();
    let sig = m.signature(key).unwrap().clone();
    let inputs: Vec<(String, Tensor)> = e["inputs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), tensor(v, sig.inputs[k].dtype)))
        .collect();
    let refs: Vec<(&str, Tensor)> = inputs
        .iter()
        .map(|(k, t)| (k.as_str(), t.clone()))
        .collect();
    let out = m.run(key, &refs).unwrap();
    let want = e["outputs"].as_object().unwrap();
    assert_eq!(out.len(), want.len());
    for (k, v) in want {
        let got = &out[k];
        match got.dtype() {
            DType::F32 => assert_close(got, &tensor(v, DType::F32), k),
            DType::I64 => assert_eq!(got, &tensor(v, DType::I64), "{k}"),
            other => panic!("unexpected output dtype {other:?}"),
        }
    }
    m
}

#[test]
fn tf1_builder_model_restores_runs_its_main_op_and_feeds_assets() {
    let m = reproduces_tensorflow("tf1_builder");
    let sig = &m.signatures()["serving_default"];
    assert_eq!(sig.method_name, PREDICT_METHOD_NAME);
    assert_eq!(sig.inputs["x"].dtype, DType::F32);
    assert_eq!(sig.inputs["x"].shape, Shape::from_dims(&[None, Some(3)]));
    assert_eq!(sig.outputs["total"].shape, Shape::scalar());
    let state = m.run("state", &[]).unwrap();
    let want = &expected("tf1_builder")["state"];
    // restored as 3, then the main op assigned 7
    assert_eq!(
        state["counter"],
        Tensor::scalar(want["counter"].as_i64().unwrap() as i32)
    );
    assert_eq!(
        state["label"],
        Tensor::string_scalar(want["label"].as_str().unwrap().to_owned())
    );
    // the main op ran with the asset tensor fed the asset's path in this copy
    let vocab = state["vocab"].as_strings().unwrap()[0].clone();
    let vocab = Path::new(std::str::from_utf8(&vocab).unwrap()).to_path_buf();
    assert_eq!(
        vocab,
        fixtures()
            .join("tf1_builder/assets")
            .join(want["vocab_basename"].as_str().unwrap())
    );
    assert_eq!(std::fs::read_to_string(vocab).unwrap(), "alpha\nbeta\n");
}

#[test]
fn tf1_builder_second_tag_set_shares_the_variables() {
    let e = expected("tf1_builder");
    let m = SavedModel::load(fixtures().join("tf1_builder"), &["train"]).unwrap();
    let x = tensor(&e["inputs"]["x"], DType::F32);
    let out = m
        .run_outputs("serving_default", &[("x", x)], &["y"])
        .unwrap();
    assert_close(&out["y"], &tensor(&e["outputs"]["y"], DType::F32), "y");
    assert!(m.signatures().get("state").is_none());
}

#[test]
fn tf2_module_with_functions_and_resource_variables() {
    let m = reproduces_tensorflow("tf2_module");
    // the call's update of `calls` happened once, in TensorFlow's order
    let e = expected("tf2_module");
    let x = tensor(&e["inputs"]["x"], DType::F32);
    let again = m.run("serving_default", &[("x", x)]).unwrap();
    assert_eq!(
        again["calls"],
        Tensor::scalar(e["outputs"]["calls"].as_i64().unwrap() + 1)
    );
}

#[test]
fn tf2_keras_model() {
    reproduces_tensorflow("tf2_keras");
}

#[test]
fn keras3_export_model() {
    reproduces_tensorflow("keras3_export");
}

/// Keras 3 through `tf.saved_model.save`: the serving function reads variables
/// the restore function never writes, and TensorFlow's graph loader fails on it;
/// actorflow fails the same way, naming the same variable.
#[test]
fn keras3_tf_save_fails_as_in_tensorflow() {
    let e = expected("keras3_tf_save");
    let m = SavedModel::load(fixtures().join("keras3_tf_save"), &["serve"]).unwrap();
    let (key, x) = e["inputs"].as_object().unwrap().iter().next().unwrap();
    let err = m
        .run("serving_default", &[(key.as_str(), tensor(x, DType::F32))])
        .unwrap_err();
    let theirs = &e["tensorflow_error"];
    assert_eq!(err.code() as i64, theirs["code"].as_i64().unwrap(), "{err}");
    assert!(
        err.message().contains(theirs["variable"].as_str().unwrap()),
        "{err}"
    );
}

#[test]
fn signature_misuse_is_invalid_argument() {
    let m = SavedModel::load(fixtures().join("tf1_builder"), &["serve"]).unwrap();
    let x = Tensor::new(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let cases: Vec<(Vec<(&str, Tensor)>, &str)> = vec![
        (
            vec![("nope", x.clone())],
            "input key 'nope' is not in signature",
        ),
        (
            vec![],
            "input 'x' of signature 'serving_default' is missing",
        ),
        (
            vec![("x", Tensor::new(&[1, 3], vec![1i32, 2, 3]).unwrap())],
            "expects float32, got int32",
        ),
        (vec![("x", Tensor::vector(&[1.0f32, 2.0]))], "expects shape"),
        (vec![("x", x.clone()), ("x", x.clone())], "given twice"),
    ];
    for (inputs, msg) in cases {
        let e = m.run("serving_default", &inputs).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains(msg), "{e} lacks {msg}");
    }
    let e = m.run("nope", &[("x", x.clone())]).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("serving_default, state"), "{e}");
    let e = m
        .run_outputs("serving_default", &[("x", x.clone())], &["zz"])
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // the model still serves after the errors
    assert!(m.run("serving_default", &[("x", x)]).is_ok());
    let e = SavedModel::load(fixtures().join("tf1_builder"), &["serve", "gpu"]).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

/// Copies a fixture model into a temporary directory.
fn copy_model(model: &str, to: &Path) {
    let from = fixtures().join(model);
    for entry in walk(&from) {
        let rel = entry.strip_prefix(&from).unwrap();
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &dest).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn damaged_models_are_data_loss_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    copy_model("tf1_builder", &dir);
    let pb = dir.join("saved_model.pb");
    let bytes = std::fs::read(&pb).unwrap();
    std::fs::write(&pb, &bytes[..bytes.len() / 2]).unwrap();
    let e = SavedModel::load(&dir, &["serve"]).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert!(e.message().contains("saved_model.pb"), "{e}");
    std::fs::write(&pb, &bytes).unwrap();
    let data = dir.join("variables/variables.data-00000-of-00001");
    let mut d = std::fs::read(&data).unwrap();
    d[0] ^= 0x55;
    std::fs::write(&data, &d).unwrap();
    let e = SavedModel::load(&dir, &["serve"]).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert!(e.message().contains("variables"), "{e}");
}

/// A graph with a reference and a resource variable (set to values their
/// initializers do not give), a placeholder, a main op and an asset tensor.
struct Model {
    scope: Scope,
    session: Session,
    x: actorflow::Output,
    y: actorflow::Output,
    calls: actorflow::Output,
    asset: actorflow::Output,
    vocab: actorflow::Output,
    main_op: String,
}

fn model() -> Model {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(2)])).unwrap();
    let w0 = ops::constant(&s, Tensor::new(&[2, 2], vec![0.0f32; 4]).unwrap()).unwrap();
    let w = ops::Variable::new(&s, "w", &w0, true).unwrap();
    let y = ops::mat_mul(&s, &x, &w.value, false, false).unwrap();
    let c0 = ops::constant(&s, Tensor::scalar(0i64)).unwrap();
    let calls = ops::ResourceVariable::new(&s, "calls", &c0, false).unwrap();
    let calls_read = ops::read_variable_op(&s, &calls.handle, DType::I64).unwrap();
    let asset = ops::constant(&s, Tensor::string_scalar("vocab.txt")).unwrap();
    let asset = ops::identity(&s, &asset).unwrap();
    let hundred = ops::constant(&s, Tensor::scalar(100i64)).unwrap();
    let add = s
        .op("AssignAddVariableOp")
        .input(&calls.handle)
        .input(&hundred)
        .attr("dtype", DType::I64)
        .build()
        .unwrap();
    // the main op keeps the path the loader feeds the asset tensor
    let empty = ops::constant(&s, Tensor::string_scalar("")).unwrap();
    let vocab = ops::Variable::new(&s, "vocab", &empty, false).unwrap();
    let keep = ops::assign(&s, &vocab.var, &asset).unwrap();
    let main_op = s
        .op("NoOp")
        .name("main_op")
        .control_input(&add)
        .control_input(keep.op())
        .build()
        .unwrap();
    let vocab_read = ops::identity(&s, &vocab.value).unwrap();
    let value = Tensor::new(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let set_w = ops::assign(&s, &w.var, &ops::constant(&s, value).unwrap()).unwrap();
    let five = ops::constant(&s, Tensor::scalar(5i64)).unwrap();
    let set_calls = ops::assign_variable_op(&s, &calls.handle, &five).unwrap();
    let init = train::global_variables_initializer(&s).unwrap();
    let session = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    session.run(&[], &[], &[init.name()]).unwrap();
    session
        .run(&[], &[], &[set_w.op().name(), set_calls.name()])
        .unwrap();
    Model {
        scope: s,
        session,
        x,
        y,
        calls: calls_read,
        asset,
        vocab: vocab_read,
        main_op: main_op.name().to_owned(),
    }
}

impl Model {
    /// The model's predict signature: `x` in; `y`, `calls`, `vocab` out.
    fn signature(&self) -> Signature {
        Signature::new(PREDICT_METHOD_NAME)
            .input("x", TensorSpec::of(&self.x))
            .output("y", TensorSpec::of(&self.y))
            .output("calls", TensorSpec::of(&self.calls))
            .output("vocab", TensorSpec::of(&self.vocab))
    }

    /// Its `serving_default` signature, the asset `vocab` and the main op.
    fn options(&self, vocab: &Path) -> MetaGraphOptions {
        MetaGraphOptions::default()
            .with_signature("serving_default", self.signature())
            .with_asset(self.asset.name(), vocab)
            .with_main_op(Some(self.main_op.clone()))
    }
}

#[test]
fn actorflow_writes_a_saved_model_it_loads_back() {
    let m = model();
    let tmp = tempfile::tempdir().unwrap();
    let vocab = tmp.path().join("vocab.txt");
    std::fs::write(&vocab, "a\nb\n").unwrap();
    let export = tmp.path().join("export/1");
    let sig = m.signature();
    let mut b = SavedModelBuilder::new(&export).unwrap();
    let opts = m.options(&vocab);
    b.add_meta_graph_and_variables(&m.scope, &m.session, &["serve"], opts.clone())
        .unwrap();
    let again = b.add_meta_graph_and_variables(&m.scope, &m.session, &["train"], opts);
    assert_eq!(again.unwrap_err().code(), Code::FailedPrecondition);
    let dup = b.add_meta_graph(&m.scope, &["serve"], MetaGraphOptions::default());
    assert_eq!(dup.unwrap_err().code(), Code::AlreadyExists);
    b.add_meta_graph(
        &m.scope,
        &["train"],
        MetaGraphOptions::default().with_signature("serving_default", sig),
    )
    .unwrap();
    // nothing is in the export directory until save()
    assert!(!export.exists());
    assert_eq!(b.save().unwrap(), export);
    assert!(export.join("variables/variables.index").is_file());
    assert_eq!(
        std::fs::read_to_string(export.join("assets/vocab.txt")).unwrap(),
        "a\nb\n"
    );

    let loaded = SavedModel::load(&export, &["serve"]).unwrap();
    let x = Tensor::new(&[1, 2], vec![1.0f32, 1.0]).unwrap();
    let out = loaded.run("serving_default", &[("x", x.clone())]).unwrap();
    assert_eq!(out["y"], Tensor::new(&[1, 2], vec![4.0f32, 6.0]).unwrap());
    // restored as 5, then the main op added 100
    assert_eq!(out["calls"], Tensor::scalar(105i64));
    let vocab_path = out["vocab"].as_strings().unwrap()[0].clone();
    assert_eq!(
        &vocab_path[..],
        export.join("assets/vocab.txt").to_string_lossy().as_bytes()
    );
    let sig = &loaded.signatures()["serving_default"];
    assert_eq!(sig.inputs["x"].shape, Shape::from_dims(&[None, Some(2)]));
    // the train graph restores the same variables, without the main op
    let train_graph = SavedModel::load(&export, &["train"]).unwrap();
    let out = train_graph.run("serving_default", &[("x", x)]).unwrap();
    assert_eq!(out["calls"], Tensor::scalar(5i64));

    // a second export to the same place is refused; an abandoned one leaves nothing
    assert_eq!(
        SavedModelBuilder::new(&export).unwrap_err().code(),
        Code::AlreadyExists
    );
    let other = tmp.path().join("export/2");
    drop(SavedModelBuilder::new(&other).unwrap());
    let left: Vec<_> = std::fs::read_dir(tmp.path().join("export"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["1"]);
}

/// The Python with TensorFlow 2.21 (`ACTORFLOW_TF_PYTHON`), if there is one.
fn python() -> Option<String> {
    match std::env::var("ACTORFLOW_TF_PYTHON") {
        Ok(p) if Path::new(&p).exists() => Some(p),
        _ => {
            eprintln!(
                "SKIPPED: this test needs ACTORFLOW_TF_PYTHON (a Python with TensorFlow 2.21)"
            );
            None
        }
    }
}

/// Runs tests/tf_interop/saved_model_peer.py; its one JSON line.
fn peer(py: &str, args: &[&std::ffi::OsStr]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf_interop/saved_model_peer.py");
    let out = std::process::Command::new(py)
        .arg(script)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("the TensorFlow peer runs");
    assert!(out.status.success(), "the TensorFlow peer failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn tensorflow_loads_and_serves_a_saved_model_actorflow_wrote() {
    let Some(py) = python() else { return };
    let m = model();
    let tmp = tempfile::tempdir().unwrap();
    let vocab = tmp.path().join("vocab.txt");
    std::fs::write(&vocab, "a\n").unwrap();
    let export = tmp.path().join("export");
    let mut b = SavedModelBuilder::new(&export).unwrap();
    let opts = m.options(&vocab);
    b.add_meta_graph_and_variables(&m.scope, &m.session, &["serve"], opts)
        .unwrap();
    b.save().unwrap();
    let inputs = tmp.path().join("inputs.json");
    std::fs::write(&inputs, r#"{"x": [[1.0, 1.0], [0.5, -1.0]]}"#).unwrap();
    let got = peer(
        &py,
        &[
            "saved_model".as_ref(),
            export.as_os_str(),
            "serve".as_ref(),
            "serving_default".as_ref(),
            inputs.as_os_str(),
        ],
    );
    let ours = SavedModel::load(&export, &["serve"]).unwrap();
    let x = Tensor::new(&[2, 2], vec![1.0f32, 1.0, 0.5, -1.0]).unwrap();
    let want = ours.run("serving_default", &[("x", x)]).unwrap();
    for api in ["v1", "v2"] {
        let theirs = &got[api];
        assert_close(&tensor(&theirs["y"], DType::F32), &want["y"], api);
        // restored as 5, then the main op added 100 (TensorFlow 2's loader runs it too)
        assert_eq!(theirs["calls"], serde_json::json!(105), "{api}");
        let path = theirs["vocab"].as_str().unwrap();
        assert!(path.ends_with("assets/vocab.txt"), "{api}: {path}");
    }
}

/// Runs the `actorflow` binary: (exit code, stdout, stderr).
fn cli(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_actorflow"))
        .args(args)
        .output()
        .expect("actorflow runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_inspects_a_saved_model_like_saved_model_cli() {
    let dir = fixtures().join("tf1_builder");
    let (code, out, err) = cli(&["inspect".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    for line in [
        "MetaGraphDef with tag-set: 'serve'",
        "MetaGraphDef with tag-set: 'train'",
        "signature_def['serving_default']:",
        "signature_def['state']:",
        "    inputs['x'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, 3)\n        name: x:0",
        "    outputs['total'] tensor_info:\n        dtype: DT_FLOAT\n        shape: ()\n        name: total:0",
        "  Method name is: tensorflow/serving/predict",
    ] {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
    // the variables, as for a checkpoint
    assert!(out.contains("variables/variables: 5 tensors"), "{out}");
    let w = out
        .lines()
        .find(|l| l.trim_start().starts_with("w "))
        .unwrap();
    assert!(w.contains("float32") && w.contains("[3,2]"), "{w}");
    // TensorFlow 2's init signature is not listed
    let dir = fixtures().join("tf2_module");
    let (code, out, _) = cli(&["inspect".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("shape: (-1, 3)") && !out.contains("__saved_model_init_op"),
        "{out}"
    );
}

#[test]
fn cli_runs_a_signature_and_writes_its_outputs() {
    let e = expected("tf1_builder");
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("x.npy");
    actorflow::npy::write_npy(&x, &tensor(&e["inputs"]["x"], DType::F32)).unwrap();
    let out_dir = tmp.path().join("out");
    let model = fixtures().join("tf1_builder");
    let input = format!("x={}", x.display());
    let (code, out, err) = cli(&[
        "run".as_ref(),
        model.as_os_str(),
        "--signature".as_ref(),
        "serving_default".as_ref(),
        "--input".as_ref(),
        input.as_ref(),
        "--out".as_ref(),
        out_dir.as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("total (float32 []) = "), "{out}");
    for key in ["y", "total"] {
        let got = actorflow::npy::read_npy(out_dir.join(format!("{key}.npy"))).unwrap();
        assert_close(&got, &tensor(&e["outputs"][key], DType::F32), key);
    }
    // the train tag set; graph flags are refused; a missing input is named
    let (code, _, err) = cli(&[
        "run".as_ref(),
        model.as_os_str(),
        "--tag".as_ref(),
        "train".as_ref(),
        "--fetch".as_ref(),
        "y:0".as_ref(),
    ]);
    assert_eq!(code, Code::InvalidArgument as i32, "{err}");
    assert!(
        err.contains("--fetch cannot be used with a SavedModel"),
        "{err}"
    );
    let (code, _, err) = cli(&["run".as_ref(), model.as_os_str()]);
    assert_eq!(code, Code::InvalidArgument as i32, "{err}");
    assert!(
        err.contains("input 'x' of signature 'serving_default' is missing"),
        "{err}"
    );
    let (code, _, err) = cli(&[
        "run".as_ref(),
        model.as_os_str(),
        "--tag".as_ref(),
        "gpu".as_ref(),
    ]);
    assert_eq!(code, Code::NotFound as i32, "{err}");
}

/// A Saver writes `<checkpoint>.meta` beside each checkpoint: the graph and the
/// SaverDef, enough to rebuild the graph in a fresh session and restore it
/// (TensorFlow's `import_meta_graph` + `restore`); it goes with its checkpoint.
#[test]
fn checkpoints_carry_their_meta_graph() {
    use actorflow::saved_model::read_meta_graph;
    use actorflow::train::{meta_graph_path, SaverOptions};
    let m = model();
    let saver = saver_in(
        &m,
        SaverOptions {
            max_to_keep: 1,
            ..Default::default()
        },
    );
    let tmp = tempfile::tempdir().unwrap();
    let first = saver
        .save(&m.session, tmp.path().join("model.ckpt"), Some(1))
        .unwrap();
    let meta = read_meta_graph(&meta_graph_path(&first)).unwrap();
    assert_eq!(meta.saver_def.as_ref(), Some(saver.saver_def()));
    let second = saver
        .save(&m.session, tmp.path().join("model.ckpt"), Some(2))
        .unwrap();
    assert!(
        !meta_graph_path(&first).exists(),
        "deleted with its checkpoint"
    );

    let meta = read_meta_graph(&meta_graph_path(&second)).unwrap();
    let graph = actorflow::graph::import::graph_def_from_tf_proto(
        meta.graph_def.as_ref().unwrap(),
        &Default::default(),
    )
    .unwrap();
    let fresh = Session::new(&graph, SessionOptions::default()).unwrap();
    let sd = meta.saver_def.unwrap();
    let prefix = Tensor::string_scalar(second.to_string_lossy().into_owned());
    fresh
        .run(
            &[(sd.filename_tensor_name.as_str(), prefix)],
            &[],
            &[sd.restore_op_name.as_str()],
        )
        .unwrap();
    let x = Tensor::new(&[1, 2], vec![1.0f32, 0.0]).unwrap();
    let y = fresh
        .run(
            &[(m.x.name().as_str(), x)],
            &[m.y.name().as_str(), m.calls.name().as_str()],
            &[],
        )
        .unwrap();
    assert_eq!(y[0], Tensor::new(&[1, 2], vec![1.0f32, 2.0]).unwrap());
    assert_eq!(y[1], Tensor::scalar(5i64));
    let damaged = tmp.path().join("bad.meta");
    std::fs::write(&damaged, b"\x0a\xff\xff").unwrap();
    assert_eq!(
        read_meta_graph(&damaged).unwrap_err().code(),
        Code::DataLoss
    );
}

/// A saver built now in `m`'s graph, its nodes added to `m.session`.
fn saver_in(m: &Model, options: actorflow::train::SaverOptions) -> actorflow::train::Saver {
    let before: std::collections::HashSet<String> = m
        .scope
        .graph_def()
        .node
        .into_iter()
        .map(|n| n.name)
        .collect();
    let saver = actorflow::train::Saver::with_options(&m.scope, options).unwrap();
    let mut added = m.scope.graph_def();
    added.node.retain(|n| !before.contains(&n.name));
    m.session.extend(&added).unwrap();
    saver
}

#[test]
fn tensorflow_imports_the_meta_graph_of_an_actorflow_checkpoint() {
    let Some(py) = python() else { return };
    let m = model();
    let saver = saver_in(&m, Default::default());
    let tmp = tempfile::tempdir().unwrap();
    let prefix = saver
        .save(&m.session, tmp.path().join("model.ckpt"), Some(7))
        .unwrap();
    let fetches = tmp.path().join("fetches.json");
    let names = [m.calls.name(), "w:0".to_owned()];
    std::fs::write(&fetches, serde_json::to_string(&names).unwrap()).unwrap();
    let got = peer(
        &py,
        &["meta".as_ref(), prefix.as_os_str(), fetches.as_os_str()],
    );
    assert_eq!(got[&names[0]], serde_json::json!(5));
    assert_eq!(got["w:0"], serde_json::json!([[1.0, 2.0], [3.0, 4.0]]));
}

/// Every byte region of a SavedModel damaged in turn: loading and running give
/// an error or an answer, never a panic or a hang.
#[test]
fn damaged_saved_models_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    for model in ["tf1_builder", "tf2_module"] {
        let e = expected(model);
        let x = tensor(&e["inputs"]["x"], DType::F32);
        for file in [
            "saved_model.pb",
            "variables/variables.index",
            "variables/variables.data-00000-of-00001",
        ] {
            let original = std::fs::read(fixtures().join(model).join(file)).unwrap();
            let n = original.len();
            let mut cuts: Vec<usize> = (0..24).map(|i| i * n / 24).collect();
            cuts.push(n - 1);
            for (i, at) in cuts.into_iter().enumerate() {
                let dir = tmp
                    .path()
                    .join(format!("{model}-{}-{i}", file.replace('/', "_")));
                copy_model(model, &dir);
                let mut bytes = original.clone();
                if i % 3 == 2 {
                    bytes.truncate(at);
                } else {
                    bytes[at] ^= 0x5a ^ (i as u8);
                }
                std::fs::write(dir.join(file), &bytes).unwrap();
                if let Ok(m) = SavedModel::load(&dir, &["serve"]) {
                    let _ = m.run("serving_default", &[("x", x.clone())]);
                }
            }
        }
    }
}
