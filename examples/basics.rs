//! Builds a small graph, places it on two CPU devices, and runs it: a tour of the
//! session API (feeds, fetches, targets, variables, placement inspection).
//!
//! ```text
//! cargo run --release --example basics
//! ```

use actorflow::{ops, DType, RunArgs, Scope, Session, SessionOptions, Shape, Tensor};

fn main() -> actorflow::Result<()> {
    // Logs to stderr as RUST_LOG asks (e.g. RUST_LOG=debug); quiet by default.
    let _ = actorflow::logging::init(false);
    let s = Scope::new();
    // y = w * x + b on two devices, with w a variable that a target updates.
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[3]))?;
    let w0 = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0, 3.0]))?;
    let w = ops::Variable::new(&s.with_device("/device:CPU:0"), "w", &w0, true)?;
    let b = ops::constant(
        &s.with_device("/device:CPU:1"),
        Tensor::vector(&[0.5f32; 3]),
    )?;
    let wx = ops::mul(&s.with_device("/device:CPU:0"), &w.value, &x)?;
    let y = ops::add(&s.with_device("/device:CPU:1"), &wx, &b)?;
    let step = ops::assign_add(&s, &w.var, &w0)?;

    let sess = Session::new(
        &s.graph_def(),
        SessionOptions::default().with_cpu_devices(2),
    )?;
    // Feeds, fetches and targets by the builder's handles; `sess.run` takes the
    // same by name ("Placeholder:0"), as a graph loaded from a file spells them.
    sess.run_with(&RunArgs::new().target(&w.initializer))?;
    let mut forward = RunArgs::new().feed(&x, Tensor::vector(&[1.0f32, 1.0, 2.0]));
    let y_token = forward.add_fetch(&y);
    let update = RunArgs::new().target(step.op());
    for i in 0..3 {
        let out = sess.run_with(&forward)?;
        println!("step {i}: y = {}", out.get::<f32>(y_token)?);
        sess.run_with(&update)?;
    }
    println!("placement:");
    for (node, device) in sess.placement(&[&x.name()], &[&y.name()], &[])? {
        println!("  {node:<12} {device}");
    }
    Ok(())
}
