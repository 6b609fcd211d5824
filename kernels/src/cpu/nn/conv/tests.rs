//! The matrix-product and direct-loop convolutions against a straightforward
//! seven-deep loop over every output element and filter tap, on geometries that
//! exercise strides, dilations, padding, groups, the pointwise fast path, blocks
//! of several pixel rows and the parallel paths.

use super::depthwise;
use super::gemm_conv;
use super::params::{ConvAttrs, Geometry, Padding};

fn attrs(strides: [i64; 2], dilations: [i64; 2], padding: Padding) -> ConvAttrs {
    ConvAttrs {
        strides,
        dilations,
        padding,
        nchw: false,
    }
}

fn vals(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f64 / 1000.0 - 1.0
        })
        .collect()
}

/// `out[n, oy, ox, o]` of a grouped (or, with `depthwise`, per-channel) convolution.
fn reference(g: &Geometry, x: &[f64], w: &[f64], depthwise: bool) -> Vec<f64> {
    let mut out = vec![0.0; g.output_shape().num_elements()];
    let od = g.out_depth;
    let og = if depthwise { 0 } else { od / g.groups() };
    for n in 0..g.batch {
        for oy in 0..g.rows.output {
            for ox in 0..g.cols.output {
                for o in 0..od {
                    let mut s = 0.0;
                    for ky in 0..g.rows.filter {
                        for kx in 0..g.cols.filter {
                            let (Some(iy), Some(ix)) =
                                (g.rows.source(oy, ky), g.cols.source(ox, kx))
                            else {
                                continue;
                            };
                            let px = ((n * g.rows.input + iy) * g.cols.input + ix) * g.in_depth;
                            let tap = ky * g.cols.filter + kx;
                            if depthwise {
                                s += x[px + o / g.filter_depth] * w[tap * od + o];
                            } else {
                                let grp = o / og;
                                for c in 0..g.filter_depth {
                                    s += x[px + grp * g.filter_depth + c]
                                        * w[(tap * g.filter_depth + c) * od + o];
                                }
                            }
                        }
                    }
                    out[((n * g.rows.output + oy) * g.cols.output + ox) * od + o] = s;
                }
            }
        }
    }
    out
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-9 * (1.0 + b.abs()),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

/// Checks forward against the reference and both gradients by the adjoint
/// identity `<conv(x, w), dy> = <x, dx(dy)> = <w, dw(dy)>` (each gradient is linear).
fn check(
    name: &str,
    a: &ConvAttrs,
    batch: usize,
    input: [usize; 2],
    filter: [usize; 2],
    depths: (usize, usize, usize),
    depthwise: bool,
) {
    let g = Geometry::new(a, batch, input, filter, depths).unwrap();
    let x = vals(g.input_shape().num_elements(), 1);
    let w = vals(
        filter[0] * filter[1] * depths.1 * if depthwise { depths.0 } else { depths.2 },
        2,
    );
    let want = reference(&g, &x, &w, depthwise);
    let mut got = vec![0.0; want.len()];
    if depthwise {
        depthwise::forward(&g, &x, &w, &mut got);
    } else {
        gemm_conv::forward(&g, &x, &w, &mut got, &|_| {}).unwrap();
    }
    close(&format!("{name} forward"), &got, &want);
    if !depthwise && g.groups() != 1 {
        return;
    }
    let dy = vals(want.len(), 3);
    let mut dx = vec![0.0; x.len()];
    let mut dw = vec![0.0; w.len()];
    if depthwise {
        depthwise::backprop_input(&g, &w, &dy, &mut dx);
        depthwise::backprop_filter(&g, &x, &dy, &mut dw);
    } else {
        gemm_conv::backprop_input(&g, &w, &dy, &mut dx).unwrap();
        gemm_conv::backprop_filter(&g, &x, &dy, &mut dw).unwrap();
    }
    let lhs = dot(&want, &dy);
    // Perturbing one input or filter element at a time checks every gradient entry.
    for (i, &d) in dx.iter().enumerate() {
        let mut x2 = x.clone();
        x2[i] += 1.0;
        let diff = dot(&reference(&g, &x2, &w, depthwise), &dy) - lhs;
        assert!(
            (diff - d).abs() <= 1e-9 * (1.0 + d.abs()),
            "{name} dx[{i}]: {d} vs {diff}"
        );
    }
    for (i, &d) in dw.iter().enumerate() {
        let mut w2 = w.clone();
        w2[i] += 1.0;
        let diff = dot(&reference(&g, &x, &w2, depthwise), &dy) - lhs;
        assert!(
            (diff - d).abs() <= 1e-9 * (1.0 + d.abs()),
            "{name} dw[{i}]: {d} vs {diff}"
        );
    }
}

#[test]
fn gemm_convolutions_match_the_direct_sum() {
    let same = |s, d| attrs(s, d, Padding::Same);
    let valid = |s, d| attrs(s, d, Padding::Valid);
    check(
        "same",
        &same([1, 1], [1, 1]),
        2,
        [5, 6],
        [3, 3],
        (3, 3, 4),
        false,
    );
    check(
        "strided",
        &same([2, 3], [1, 1]),
        2,
        [7, 8],
        [3, 2],
        (2, 2, 3),
        false,
    );
    check(
        "dilated",
        &valid([1, 2], [2, 1]),
        1,
        [7, 7],
        [2, 3],
        (2, 2, 2),
        false,
    );
    check(
        "explicit",
        &attrs([2, 1], [1, 2], Padding::Explicit([(1, 2), (0, 3)])),
        2,
        [5, 4],
        [3, 2],
        (2, 2, 3),
        false,
    );
    check(
        "pointwise",
        &valid([1, 1], [1, 1]),
        3,
        [4, 3],
        [1, 1],
        (5, 5, 2),
        false,
    );
    check(
        "grouped",
        &same([1, 1], [1, 1]),
        2,
        [4, 4],
        [3, 3],
        (6, 2, 9),
        false,
    );
    check(
        "filter larger than input",
        &same([1, 1], [1, 1]),
        1,
        [2, 2],
        [5, 5],
        (1, 1, 2),
        false,
    );
}

#[test]
fn depthwise_convolutions_match_the_direct_sum() {
    let same = |s| attrs(s, [1, 1], Padding::Same);
    check(
        "depthwise same",
        &same([1, 1]),
        2,
        [5, 5],
        [3, 3],
        (3, 2, 6),
        true,
    );
    check(
        "depthwise strided",
        &same([2, 2]),
        1,
        [6, 7],
        [2, 3],
        (2, 3, 6),
        true,
    );
    check(
        "depthwise explicit",
        &attrs([1, 1], [1, 1], Padding::Explicit([(2, 0), (1, 1)])),
        2,
        [4, 3],
        [3, 2],
        (2, 1, 2),
        true,
    );
}

#[test]
fn large_convolutions_take_the_parallel_paths() {
    // Many small images (spread across images) and one large image (threads
    // inside each product); several pixel blocks per image.
    let a = attrs([1, 1], [1, 1], Padding::Same);
    for (batch, size, depth) in [(16, 12, 16), (1, 40, 32)] {
        let g = Geometry::new(&a, batch, [size, size], [3, 3], (depth, depth, depth)).unwrap();
        let x = vals(g.input_shape().num_elements(), 4);
        let w = vals(9 * depth * depth, 5);
        let want = reference(&g, &x, &w, false);
        let mut got = vec![0.0; want.len()];
        gemm_conv::forward(&g, &x, &w, &mut got, &|_| {}).unwrap();
        close("parallel forward", &got, &want);
        let dy = vals(want.len(), 6);
        let mut dx = vec![0.0; x.len()];
        gemm_conv::backprop_input(&g, &w, &dy, &mut dx).unwrap();
        let mut dw = vec![0.0; w.len()];
        gemm_conv::backprop_filter(&g, &x, &dy, &mut dw).unwrap();
        // <conv(x, w), dy> = <x, dx> = <w, dw> for a convolution linear in each.
        let lhs = dot(&want, &dy);
        assert!((dot(&x, &dx) - lhs).abs() <= 1e-8 * lhs.abs().max(1.0));
        assert!((dot(&w, &dw) - lhs).abs() <= 1e-8 * lhs.abs().max(1.0));
    }
}
