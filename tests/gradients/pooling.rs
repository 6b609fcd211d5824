//! Numerical checks of the pooling and normalization gradients: max pooling
//! (with and without argmax, and the second order through `MaxPoolGradGrad`),
//! average pooling, fused batch norm in training and inference (channel-last and
//! channel-first) and LRN. Batch norm and LRN have no float64 kernels (as in
//! TensorFlow), so they are checked through float32 casts with a coarser step.

use actorflow::graph::gradients::gradients;
use actorflow::graph::ops::FusedBatchNormOpts;
use actorflow::{ops, DType, Output, Result, Scope};

use crate::checker::{check, check_opts, rand, t, Opts};

/// Distinct values (no ties in any window), so max pooling is differentiable.
fn distinct(dims: &[usize], seed: u64) -> actorflow::Tensor {
    let n: usize = dims.iter().product();
    let mut v: Vec<f64> = (0..n).map(|i| i as f64 * 0.37 - 3.0).collect();
    // A fixed shuffle.
    let r = crate::checker::vals(n, seed, 0.0, 1.0);
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| r[a].total_cmp(&r[b]));
    v = idx.iter().map(|&i| v[i]).collect();
    t(dims, &v)
}

const F32: Opts = Opts {
    eps: 1e-2,
    tol: 2e-2,
    unknown_shapes: true,
};

fn via_f32(s: &Scope, x: &Output, f: impl Fn(&Output) -> Result<Output>) -> Result<Output> {
    let y = f(&ops::cast(s, x, DType::F32)?)?;
    ops::cast(s, &y, DType::F64)
}

#[test]
fn max_pool() {
    for (pad, k, st) in [("VALID", 2, 2), ("SAME", 3, 2), ("SAME", 2, 1)] {
        check(
            &format!("MaxPool {pad} {k} {st}"),
            [distinct(&[2, 5, 4, 3], 1)],
            |s, v| ops::max_pool(s, &v[0], &[k], &[st], pad, "NHWC"),
        );
    }
    check("MaxPoolV2", [distinct(&[1, 4, 5, 2], 2)], |s, v| {
        let k = ops::index_vector(s, &[1, 2, 2, 1])?;
        let st = ops::index_vector(s, &[1, 1, 2, 1])?;
        ops::max_pool_v2(s, &v[0], &k, &st, "SAME", "NHWC")
    });
    for batch in [false, true] {
        check("MaxPoolWithArgmax", [distinct(&[2, 4, 4, 2], 3)], |s, v| {
            Ok(ops::max_pool_with_argmax(s, &v[0], &[2], &[2], "SAME", batch)?.0)
        });
    }
}

#[test]
fn max_pool_second_order() {
    // d/dw of <grad(max_pool(x)) weighted by w, u>: through MaxPoolGrad's gradient.
    let w = rand(&[1, 2, 2, 2], 7, -1.0, 1.0);
    check("MaxPoolGrad'", [distinct(&[1, 4, 4, 2], 4), w], |s, v| {
        let y = ops::max_pool(s, &v[0], &[2], &[2], "VALID", "NHWC")?;
        let g = gradients(
            s,
            &[ops::mul(s, &y, &v[1])?],
            std::slice::from_ref(&v[0]),
            None,
        )?;
        let g = g[0]
            .clone()
            .ok_or_else(|| actorflow::Status::internal("no gradient"))?;
        ops::mul(s, &g, &g)
    });
}

#[test]
fn avg_pool() {
    for (pad, k, st) in [("VALID", 2, 2), ("SAME", 3, 2), ("SAME", 3, 1)] {
        check(
            &format!("AvgPool {pad} {k} {st}"),
            [rand(&[2, 5, 4, 3], 5, -2.0, 2.0)],
            |s, v| ops::avg_pool(s, &v[0], &[k], &[st], pad, "NHWC"),
        );
    }
    let w = rand(&[1, 2, 2, 2], 9, -1.0, 1.0);
    check(
        "AvgPoolGrad'",
        [rand(&[1, 4, 4, 2], 6, -1.0, 1.0), w],
        |s, v| {
            let y = ops::avg_pool(s, &v[0], &[2], &[2], "VALID", "NHWC")?;
            let g = gradients(
                s,
                &[ops::mul(s, &y, &y)?],
                std::slice::from_ref(&v[0]),
                None,
            )?;
            let g = g[0]
                .clone()
                .ok_or_else(|| actorflow::Status::internal("no gradient"))?;
            ops::sum_axes(s, &ops::mul(s, &g, &g)?, &[0, 1, 2], false)
                .and_then(|r| ops::mul(s, &r, &v[1]))
        },
    );
}

#[test]
fn fused_batch_norm() {
    for (format, training) in [
        ("NHWC", true),
        ("NCHW", true),
        ("NHWC", false),
        ("NCHW", false),
    ] {
        let dims: &[usize] = if format == "NHWC" {
            &[2, 3, 2, 3]
        } else {
            &[2, 3, 3, 2]
        };
        let x = rand(dims, 11, -2.0, 2.0);
        let scale = rand(&[3], 12, 0.5, 1.5);
        let offset = rand(&[3], 13, -1.0, 1.0);
        let weights = rand(dims, 14, -1.0, 1.0);
        let name = format!("FusedBatchNormV3 {format} training={training}");
        check_opts(&name, [x, scale, offset, weights], F32, |s, v| {
            let f32s: Vec<Output> = v[..3]
                .iter()
                .map(|o| ops::cast(s, o, DType::F32))
                .collect::<Result<_>>()?;
            let mean = ops::constant(s, actorflow::Tensor::vector(&[0.1f32, -0.2, 0.3]))?;
            let var = ops::constant(s, actorflow::Tensor::vector(&[0.5f32, 1.5, 2.0]))?;
            let opts = FusedBatchNormOpts {
                data_format: format.into(),
                is_training: training,
                ..Default::default()
            };
            let out = ops::fused_batch_norm(
                s,
                &f32s[0],
                &f32s[1],
                &f32s[2],
                Some(&mean),
                Some(&var),
                &opts,
            )?;
            // A weighted sum, so every output element matters.
            let y = ops::cast(s, &out.y, DType::F64)?;
            ops::sum_axes(s, &ops::mul(s, &y, &v[3])?, &[0, 1, 2, 3], false)
        });
    }
}

#[test]
fn lrn() {
    for (r, bias, alpha, beta) in [(1, 1.0, 0.5, 0.75), (2, 2.0, 0.1, 0.5), (5, 1.0, 1.0, 1.0)] {
        check_opts(
            &format!("LRN r={r} beta={beta}"),
            [rand(&[1, 2, 2, 5], 20, -1.5, 1.5)],
            F32,
            |s, v| {
                via_f32(s, &v[0], |x| {
                    ops::local_response_normalization(s, x, r, bias, alpha, beta)
                })
            },
        );
    }
}
