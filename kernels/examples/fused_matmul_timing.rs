//! Times the `_FusedMatMul` CPU kernel against the three kernels it replaces
//! (`MatMul`, then `BiasAdd` and `Relu` in place on its output, as a session runs
//! them), each built once and run on the same inputs.
//!
//! ```text
//! cargo run --release -p actorflow-kernels --example fused_matmul_timing [M K N] [runs]
//! ```
//!
//! Prints the median time per run of each, in microseconds, for `M×K · K×N`
//! (default 64×784 · 784×256, an MLP layer on a batch of 64 digits), and of the
//! product alone run two ways: on `gemm`'s own threads (as `MatMul` and the fused
//! kernel run it) and as row blocks of one thread each (the split the fused kernel
//! does not use: every block packs all of `b` again).

use std::time::Instant;

use actorflow_kernels::cpu::linalg::gemm::{gemm_into, MatRef};
use actorflow_kernels::testutil::{test_device, test_step};
use actorflow_kernels::{
    Entry, KernelRegistry, OpKernel, OpKernelConstruction, OpKernelContext, StepContext,
};
use graph::{AttrValue, DType, NodeDef, OpRegistry, Result, Status, Tensor};
use rayon::prelude::*;
use rendezvous::FrameIter;

/// A kernel built once for `node` on the test CPU device.
fn build(mut node: NodeDef) -> Result<Box<dyn OpKernel>> {
    let device = test_device();
    let op_def = OpRegistry::global().lookup(&node.op)?;
    let sig = op_def.validate(&mut node)?;
    KernelRegistry::global().create(&OpKernelConstruction {
        node: &node,
        op_def: &op_def,
        input_types: &sig.inputs,
        output_types: &sig.outputs,
        device: &device,
    })
}

/// Runs `kernel` once on `inputs` (moved in, so a uniquely held input may be
/// written in place) and returns its output.
fn run(step: &StepContext, kernel: &dyn OpKernel, inputs: Vec<Tensor>) -> Result<Tensor> {
    let mut inputs: Vec<Entry> = inputs.into_iter().map(Entry::Value).collect();
    let mut outputs = vec![Entry::Empty];
    {
        let mut ctx = OpKernelContext::new(
            &mut inputs,
            &mut outputs,
            step,
            FrameIter::ROOT,
            false,
            None,
        );
        kernel.compute(&mut ctx)?;
    }
    match outputs.pop() {
        Some(Entry::Value(t)) => Ok(t),
        _ => Err(Status::internal("no output")),
    }
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// The median of `runs` timings of `f`, in microseconds, after a warm-up.
fn median_us(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..runs / 10 + 5 {
        f()?;
    }
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        t.push(start.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

fn main() -> Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (m, k, n) = match args.as_slice() {
        [m, k, n, ..] => (*m, *k, *n),
        _ => (64, 784, 256),
    };
    let runs = args.get(3).copied().unwrap_or(2000);
    let a = Tensor::new(&[m, k], values(m * k, 1))?;
    let b = Tensor::new(&[k, n], values(k * n, 2))?;
    let bias = Tensor::vector(&values(n, 3));

    let typed = |name: &str, op: &str, inputs: &[&str]| {
        let mut d = NodeDef::new(name, op).with_attr("T", DType::F32);
        for i in inputs {
            d = d.with_input(*i);
        }
        d
    };
    let matmul = build(typed("mm", "MatMul", &["a", "b"]))?;
    let bias_add = build(typed("ba", "BiasAdd", &["mm", "bias"]))?;
    let relu = build(typed("relu", "Relu", &["ba"]))?;
    let fused = build(
        typed("relu", "_FusedMatMul", &["a", "b", "bias"])
            .with_attr("num_args", 1i64)
            .with_attr(
                "fused_ops",
                AttrValue::from(vec!["BiasAdd".to_owned(), "Relu".to_owned()]),
            ),
    )?;

    let device = test_device();
    let step = test_step(&device);
    let run = |k: &dyn OpKernel, inputs: Vec<Tensor>| run(&step, k, inputs);
    let unfused_once = || -> Result<Tensor> {
        let p = run(matmul.as_ref(), vec![a.clone(), b.clone()])?;
        let y = run(bias_add.as_ref(), vec![p, bias.clone()])?;
        run(relu.as_ref(), vec![y])
    };
    let fused_once = || run(fused.as_ref(), vec![a.clone(), b.clone(), bias.clone()]);
    if unfused_once()? != fused_once()? {
        return Err(Status::internal("fused and unfused answers differ"));
    }
    let matmul_us = median_us(runs, || {
        run(matmul.as_ref(), vec![a.clone(), b.clone()]).map(drop)
    })?;
    let unfused_us = median_us(runs, || unfused_once().map(drop))?;
    let fused_us = median_us(runs, || fused_once().map(drop))?;
    // The two ways of running the product itself: gemm's own threads over the
    // whole output (MatMul's), or row blocks on rayon, one thread each.
    let (av, bv) = (a.as_slice::<f32>()?, b.as_slice::<f32>()?);
    let threads = rayon::current_num_threads();
    let mut out = vec![0f32; m * n];
    let whole_us = median_us(runs, || {
        gemm_into(
            MatRef::new(av, m, k, k, 1)?,
            MatRef::new(bv, k, n, n, 1)?,
            &mut out,
            threads,
        )
    })?;
    let rows = m.div_ceil(threads);
    let blocks_us = median_us(runs, || {
        out.par_chunks_mut(rows * n)
            .enumerate()
            .try_for_each(|(i, c)| {
                let r = c.len() / n;
                let a_block = MatRef::new(&av[i * rows * k..], r, k, k, 1)?;
                gemm_into(a_block, MatRef::new(bv, k, n, n, 1)?, c, 1)
            })
    })?;
    println!(
        "{m}x{k} · {k}x{n}, {} rayon threads, median of {runs} runs:",
        rayon::current_num_threads()
    );
    println!("  gemm on its {threads} threads (MatMul's):       {whole_us:9.1} us");
    println!("  gemm in {threads} row blocks, 1 thread each: {blocks_us:9.1} us");
    println!("  MatMul alone:               {matmul_us:9.1} us");
    println!("  MatMul + BiasAdd + Relu:    {unfused_us:9.1} us");
    println!(
        "  _FusedMatMul [BiasAdd,Relu]: {fused_us:8.1} us  ({:.2}x)",
        unfused_us / fused_us
    );
    Ok(())
}
