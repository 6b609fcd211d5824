//! Times `gemm_into` on the products of a training step's dense layer, on every
//! rayon thread: `x · w`, `xᵀ · dy` (the weight gradient) and `dy · wᵀ` (the input
//! gradient), each with its operands as `MatMul` reads them (transposes as
//! strides, not copies).
//!
//! ```text
//! cargo run --release -p actorflow-kernels --example gemm_shapes_timing [M K N] [runs]
//! ```
//!
//! Prints the median microseconds and GFLOP/s of each (default 64 × 3136 · 3136
//! × 1024, the first dense layer of `conv_mnist_step_ms`), through `gemm_into`
//! (a row-major result, as the kernels use it) and into a column-major buffer
//! (`gemm_into_column_major`), the two ways `gemm_into` chooses between.

use std::time::Instant;

use actorflow_kernels::cpu::linalg::gemm::{gemm_into, gemm_into_column_major, MatRef};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let (m, k, n) = match args[..] {
        [m, k, n, ..] => (m, k, n),
        _ => (64, 3136, 1024),
    };
    let runs = args.get(3).copied().unwrap_or(20);
    let threads = rayon::current_num_threads();
    let x: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    let w: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
    let dy: Vec<f32> = (0..m * n).map(|i| (i % 3) as f32 * 0.1).collect();
    type Case<'a> = (&'a str, MatRef<'a, f32>, MatRef<'a, f32>, usize);
    let cases: [Case; 3] = [
        (
            "x · w",
            MatRef::new(&x, m, k, k, 1)?,
            MatRef::new(&w, k, n, n, 1)?,
            m * n,
        ),
        // xᵀ: [k, m] read from the [m, k] x.
        (
            "xᵀ · dy",
            MatRef::new(&x, k, m, 1, k)?,
            MatRef::new(&dy, m, n, n, 1)?,
            k * n,
        ),
        // wᵀ: [n, k] read from the [k, n] w.
        (
            "dy · wᵀ",
            MatRef::new(&dy, m, n, n, 1)?,
            MatRef::new(&w, n, k, 1, n)?,
            m * k,
        ),
    ];
    for (name, a, b, len) in cases {
        let mut c = vec![0f32; len];
        let flops = 2.0 * (a.rows() * a.cols() * b.cols()) as f64;
        gemm_into(a, b, &mut c, threads)?;
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let r = gemm_into(a, b, &mut c, threads);
                let dt = t.elapsed().as_secs_f64();
                r.map(|_| dt)
            })
            .collect::<Result<_, _>>()?;
        let t = median(times);
        println!(
            "{name:>8}: {:>8.1} us  {:>6.1} GFLOP/s",
            t * 1e6,
            flops / t / 1e9
        );
        let run = |c: &mut [f32]| gemm_into_column_major(a, b, c, threads);
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let r = run(&mut c);
                r.map(|_| t.elapsed().as_secs_f64())
            })
            .collect::<Result<_, _>>()?;
        let t = median(times);
        println!(
            "{name:>8}: {:>8.1} us  {:>6.1} GFLOP/s (column-major destination)",
            t * 1e6,
            flops / t / 1e9
        );
    }
    Ok(())
}
