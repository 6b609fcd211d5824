//! The typed Rust API: `RunArgs` with the builder's handles, fetch tokens and typed
//! reads, graph loaders at the facade, `Status`'s accessors and sources, and the
//! option setters. Expected values are computed by hand.

use std::error::Error as _;
use std::time::Duration;

use actorflow::{
    ops, Code, DType, GraphDef, RunArgs, RunOptions, Scope, Session, SessionOptions, Shape, Status,
    Tensor, TraceLevel,
};

/// y = x * w + 1 with a counter a target bumps.
struct Model {
    scope: Scope,
    x: actorflow::Output,
    y: actorflow::Output,
    count: actorflow::Output,
    bump: actorflow::Operation,
    init: actorflow::Operation,
}

fn model() -> Model {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[2])).unwrap();
    let w = ops::constant(&s, Tensor::vector(&[3.0f32, 4.0])).unwrap();
    let one = ops::scalar(&s, 1.0f32).unwrap();
    let xw = ops::mul(&s, &x, &w).unwrap();
    let y = ops::add(&s, &xw, &one).unwrap();
    let zero = ops::scalar(&s, 0i32).unwrap();
    let v = ops::Variable::new(&s, "count", &zero, true).unwrap();
    let inc = ops::scalar(&s, 1i32).unwrap();
    let bump = ops::assign_add(&s, &v.var, &inc).unwrap().op().clone();
    Model {
        x,
        y,
        count: v.value.clone(),
        bump,
        init: v.initializer.clone(),
        scope: s,
    }
}

#[test]
fn handles_and_names_run_the_same_step() {
    let m = model();
    let sess = Session::new(&m.scope.graph_def(), SessionOptions::default()).unwrap();
    sess.run_with(&RunArgs::new().target(&m.init)).unwrap();

    let mut args = RunArgs::new()
        .feed(&m.x, Tensor::vector(&[1.0f32, -2.0]))
        .target(&m.bump)
        .options(RunOptions::default().with_timeout(Duration::from_secs(30)));
    let y = args.add_fetch(&m.y);
    let out = sess.run_with(&args).unwrap();
    // [1*3+1, -2*4+1]
    assert_eq!(
        out.get::<f32>(y).unwrap().as_slice(),
        Some(&[4.0f32, -7.0][..])
    );
    assert_eq!(y.index(), 0);

    // The same step by name.
    let by_name = sess
        .run(
            &[(&m.x.name(), Tensor::vector(&[1.0f32, -2.0]))],
            &[&m.y.name(), &m.count.name()],
            &[m.bump.name()],
        )
        .unwrap();
    assert_eq!(by_name[0], out.outputs[0]);
    // The counter ran once per step (read before or after the bump: 1 or 2).
    let c = by_name[1].scalar_value::<i32>().unwrap();
    assert!(c == 1 || c == 2, "count {c}");

    // A string works wherever a handle does.
    let out = sess
        .run_with(
            &RunArgs::new()
                .feed("Placeholder:0", Tensor::vector(&[0.0f32, 0.0]))
                .fetch("AddV2"),
        )
        .unwrap();
    assert_eq!(out.outputs[0], Tensor::vector(&[1.0f32, 1.0]));
}

#[test]
fn typed_reads_check_dtype_and_token() {
    let m = model();
    let sess = Session::new(&m.scope.graph_def(), SessionOptions::default()).unwrap();
    let mut args = RunArgs::new().feed(&m.x, Tensor::vector(&[2.0f32, 2.0]));
    let y = args.add_fetch(&m.y);
    let out = sess.run_with(&args).unwrap();
    let e = out.get::<i32>(y).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // A token of another request, past this step's fetches.
    let mut other = RunArgs::new().fetch(&m.y);
    let second = other.add_fetch(&m.x);
    let e = out.tensor(second).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("out of range"), "{e}");
}

#[test]
fn run_async_takes_run_args() {
    let m = model();
    let sess = Session::new(&m.scope.graph_def(), SessionOptions::default()).unwrap();
    let mut args = RunArgs::new()
        .feed(&m.x, Tensor::vector(&[1.0f32, 1.0]))
        .options(RunOptions::default().with_trace_level(TraceLevel::FullTrace));
    let y = args.add_fetch(&m.y);
    let out = block_on(sess.run_async(&args)).unwrap();
    assert_eq!(
        out.get::<f32>(y).unwrap().as_slice(),
        Some(&[4.0f32, 5.0][..])
    );
    assert!(out.metadata.is_some(), "a traced step returns metadata");
}

/// Drives a future on the calling thread (the session's futures need no runtime).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn graphs_load_from_files_and_bytes() {
    let m = model();
    let g = m.scope.graph_def();
    let tmp = tempfile::tempdir().unwrap();
    for name in ["g.pb", "g.pbtxt", "g.json"] {
        let path = tmp.path().join(name);
        g.save(&path).unwrap();
        assert_eq!(GraphDef::from_file(&path).unwrap(), g, "{name}");
    }
    // Explicit formats ignore the extension.
    let odd = tmp.path().join("graph.bin");
    std::fs::write(&odd, g.to_pb_bytes().unwrap()).unwrap();
    assert_eq!(GraphDef::from_pb_file(&odd).unwrap(), g);
    let odd_text = tmp.path().join("graph.proto-text");
    std::fs::write(&odd_text, g.to_pbtxt()).unwrap();
    assert_eq!(GraphDef::from_pbtxt_file(&odd_text).unwrap(), g);
    let odd_json = tmp.path().join("graph.af");
    std::fs::write(&odd_json, g.to_json().unwrap()).unwrap();
    assert_eq!(GraphDef::from_json_file(&odd_json).unwrap(), g);
    // By extension, an unknown one is a clear error.
    let e = GraphDef::from_file(&odd).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");

    // A session straight from a file.
    let sess = Session::from_file(tmp.path().join("g.pb"), SessionOptions::default()).unwrap();
    let out = sess
        .run(
            &[("Placeholder:0", Tensor::vector(&[1.0f32, 0.0]))],
            &["AddV2:0"],
            &[],
        )
        .unwrap();
    assert_eq!(out[0], Tensor::vector(&[4.0f32, 1.0]));
}

#[test]
fn statuses_keep_their_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let e = GraphDef::from_file(tmp.path().join("missing.pb")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains("missing.pb"), "{e}");
    let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(io.map(|io| io.kind()), Some(std::io::ErrorKind::NotFound));

    let e = GraphDef::from_pb_bytes(&[0xff, 0xff, 0xff]).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss, "{e}");
    assert!(
        e.source()
            .is_some_and(|s| s.downcast_ref::<prost::DecodeError>().is_some()),
        "the decode error is the source: {e:?}"
    );

    // A status made from a message alone has no source, and `?` into
    // `Box<dyn Error>` keeps the chain.
    fn boxed() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Err(Status::from(std::io::Error::other("disk on fire")))?;
        Ok(())
    }
    let b = boxed().unwrap_err();
    assert!(b.source().is_some());
    assert!(Status::unavailable("gone").source().is_none());
}

#[test]
fn option_setters_build_the_options() {
    let o = SessionOptions::default()
        .with_cpu_devices(3)
        .with_allow_soft_placement(true)
        .with_default_timeout(Duration::from_millis(250))
        .with_max_allocation_bytes(1 << 20)
        .with_random_placement_seed(None);
    assert_eq!(o.cpu_devices, 3);
    assert!(o.allow_soft_placement);
    assert_eq!(o.default_timeout, Some(Duration::from_millis(250)));
    assert_eq!(o.max_allocation_bytes, Some(1 << 20));
    assert_eq!(o.random_placement_seed, None);
    let r = RunOptions::default().with_timeout(None);
    assert_eq!(r.timeout, None);
    assert_eq!(r.trace_level, TraceLevel::NoTrace);
    let i = actorflow::ImportOptions::default()
        .with_clear_devices(true)
        .with_validate(false);
    assert!(i.clear_devices && !i.validate);
    let rt = actorflow::RuntimeOptions::default()
        .with_job("worker")
        .with_task(2);
    assert_eq!((rt.job.as_str(), rt.task), ("worker", 2));
}
