//! Numerical checks of the segment and index gradients: the segment reductions
//! (unsorted, sorted, sparse), GatherNd, ScatterNd and the TensorScatter ops,
//! TopKV2, MatrixBandPart, ClipByValue, ReverseSequence and Einsum (products,
//! traces, reductions, transposes and broadcast `...` dimensions).

use actorflow::{ops, DType, Output, Result, Scope, Tensor};

use crate::checker::{check, rand, t};

/// Distinct values (no ties anywhere), so max, min and top-k are differentiable.
fn distinct(dims: &[usize], seed: u64) -> Tensor {
    let n: usize = dims.iter().product();
    let r = crate::checker::vals(n, seed, 0.0, 1.0);
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| r[a].total_cmp(&r[b]));
    let v: Vec<f64> = idx.iter().map(|&i| i as f64 * 0.31 - 2.0).collect();
    t(dims, &v)
}

fn ints(s: &Scope, dims: &[usize], v: &[i32]) -> Result<Output> {
    ops::constant(s, Tensor::new(dims, v.to_vec())?)
}

#[test]
fn unsorted_segment_reductions() {
    for red in ["Sum", "Max", "Min", "Prod"] {
        check(
            &format!("UnsortedSegment{red}"),
            [distinct(&[5, 2], 1)],
            |s, v| {
                let ids = ints(s, &[5], &[2, 0, 2, -1, 0])?;
                let n = ops::scalar(s, 4i32)?;
                ops::unsorted_segment_reduce(s, red, &v[0], &ids, &n)
            },
        );
        check(
            &format!("UnsortedSegment{red} 2-d ids"),
            [distinct(&[2, 3, 2], 2)],
            |s, v| {
                let ids = ints(s, &[2, 3], &[1, 1, 0, 2, -1, 1])?;
                let n = ops::scalar(s, 3i64)?;
                ops::unsorted_segment_reduce(s, red, &v[0], &ids, &n)
            },
        );
    }
    // Products through zeros: one zero in a segment, two in another.
    let x = t(&[6], &[0.0, 2.0, 3.0, 0.0, 0.0, -1.5]);
    check("UnsortedSegmentProd zeros", [x.clone()], |s, v| {
        let ids = ints(s, &[6], &[0, 0, 1, 1, 1, 2])?;
        ops::unsorted_segment_reduce(s, "Prod", &v[0], &ids, &ops::scalar(s, 3i32)?)
    });
    check("SegmentProd zeros", [x], |s, v| {
        let ids = ints(s, &[6], &[0, 0, 1, 1, 1, 2])?;
        ops::segment_reduce(s, "Prod", &v[0], &ids)
    });
}

#[test]
fn sorted_segment_reductions() {
    for red in ["Sum", "Mean", "Max", "Min", "Prod"] {
        check(&format!("Segment{red}"), [distinct(&[6, 2], 3)], |s, v| {
            let ids = ints(s, &[6], &[0, 0, 1, 3, 3, 3])?;
            ops::segment_reduce(s, red, &v[0], &ids)
        });
    }
}

#[test]
fn sparse_segment_reductions() {
    for red in ["Sum", "Mean", "SqrtN"] {
        for with_n in [false, true] {
            check(
                &format!("SparseSegment{red} (num_segments: {with_n})"),
                [rand(&[5, 3], 4, -1.0, 1.0)],
                |s, v| {
                    let idx = ints(s, &[6], &[0, 4, 4, 2, 1, 0])?;
                    let seg = ints(s, &[6], &[0, 0, 1, 3, 3, 3])?;
                    let n = ops::scalar(s, 5i32)?;
                    let n = with_n.then_some(&n);
                    ops::sparse_segment_reduce(s, red, &v[0], &idx, &seg, n)
                },
            );
        }
    }
}

#[test]
fn gather_and_scatter_nd() {
    let p = rand(&[3, 4, 2], 5, -1.0, 1.0);
    check("GatherNd full", [p.clone()], |s, v| {
        let idx = ints(s, &[3, 3], &[0, 1, 1, 2, 3, 0, 0, 1, 1])?;
        ops::gather_nd(s, &v[0], &idx)
    });
    check("GatherNd rows", [p.clone()], |s, v| {
        let idx = ints(s, &[3, 1], &[2, 0, 2])?;
        ops::gather_nd(s, &v[0], &idx)
    });
    check("GatherNd batched pairs", [p], |s, v| {
        let idx = ints(s, &[2, 2, 2], &[0, 0, 1, 1, 2, 3, 2, 2])?;
        ops::gather_nd(s, &v[0], &idx)
    });
    check("ScatterNd", [rand(&[3, 3], 6, -1.0, 1.0)], |s, v| {
        let idx = ints(s, &[3, 1], &[1, 3, 1])?;
        ops::scatter_nd(s, &idx, &v[0], &ops::index_vector(s, &[4, 3])?)
    });
    for op in [
        "TensorScatterUpdate",
        "TensorScatterAdd",
        "TensorScatterSub",
        "TensorScatterMax",
        "TensorScatterMin",
    ] {
        check(
            op,
            [rand(&[4, 3], 7, -1.0, 1.0), rand(&[2, 3], 8, -1.0, 1.0)],
            |s, v| {
                let idx = ints(s, &[2, 1], &[3, 0])?;
                ops::tensor_scatter(s, op, &v[0], &idx, &v[1])
            },
        );
    }
}

#[test]
fn top_k_band_clip_reverse() {
    for (k, dims) in [(2, vec![3, 5]), (5, vec![2, 5]), (1, vec![2, 2, 4])] {
        check(
            &format!("TopKV2 k={k} {dims:?}"),
            [distinct(&dims, 9)],
            |s, v| {
                let (values, _) = ops::top_k(s, &v[0], &ops::scalar(s, k)?, true, DType::I32)?;
                Ok(values)
            },
        );
    }
    for (lo, hi) in [(0i64, -1i64), (1, 0), (-1, 1)] {
        check(
            &format!("MatrixBandPart {lo} {hi}"),
            [rand(&[2, 3, 4], 10, -1.0, 1.0)],
            |s, v| {
                let (l, h) = (ops::scalar(s, lo)?, ops::scalar(s, hi)?);
                ops::matrix_band_part(s, &v[0], &l, &h)
            },
        );
    }
    // Values kept away from the bounds, where the clip is not differentiable.
    let x = t(&[2, 3], &[-2.0, -0.5, 0.3, 1.7, 0.9, -1.2]);
    check(
        "ClipByValue scalar bounds",
        [x.clone(), t(&[], &[-1.0]), t(&[], &[1.0])],
        |s, v| ops::clip_by_value(s, &v[0], &v[1], &v[2]),
    );
    check(
        "ClipByValue tensor bounds",
        [
            x,
            t(&[2, 3], &[-1.0, 0.0, 0.5, 1.0, -1.0, -1.5]),
            t(&[2, 3], &[1.0, 0.2, 1.0, 1.5, 2.0, 0.0]),
        ],
        |s, v| ops::clip_by_value(s, &v[0], &v[1], &v[2]),
    );
    check(
        "ReverseSequence",
        [rand(&[3, 5, 2], 11, -1.0, 1.0)],
        |s, v| {
            let lens = ops::constant(s, Tensor::vector(&[5i64, 0, 3]))?;
            ops::reverse_sequence(s, &v[0], &lens, 1, 0)
        },
    );
}

#[test]
fn einsum() {
    let cases: [(&str, &[&[usize]]); 12] = [
        ("ij,jk->ik", &[&[2, 3], &[3, 4]]),
        ("bij,bjk->bik", &[&[2, 2, 3], &[2, 3, 2]]),
        ("bqhd,bkhd->bhqk", &[&[2, 3, 2, 2], &[2, 2, 2, 2]]),
        ("ij->ji", &[&[2, 3]]),
        ("ij->", &[&[2, 3]]),
        ("ijk->ki", &[&[2, 3, 2]]),
        ("ii->i", &[&[3, 3]]),
        ("i,j->ij", &[&[3], &[2]]),
        ("abc,cd->ad", &[&[2, 3, 2], &[2, 3]]),
        ("iij,jk->ik", &[&[2, 2, 3], &[3, 2]]),
        ("...ij,...jk->...ik", &[&[2, 1, 2, 3], &[3, 3, 2]]),
        ("...ij,jk->...ik", &[&[2, 2, 3], &[3, 2]]),
    ];
    for (k, (eq, shapes)) in cases.iter().enumerate() {
        let inputs: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, d)| rand(d, 20 + (2 * k + i) as u64, -1.0, 1.0))
            .collect();
        check(&format!("Einsum {eq}"), inputs, |s, v| {
            ops::einsum(s, v, eq)
        });
    }
}

/// `TensorScatterMax`'s gradient splits ties evenly: TensorFlow 2.21 gives
/// `d/dx = [0, 2, 1.5, 4]` and `d/dupdates = [1, 1.5, 0]` here (index 2 ties x's 3
/// with an update's 3; index 0 takes the update 4 over 1 and 0).
#[test]
fn tensor_scatter_max_ties() {
    let s = Scope::new();
    let x = ops::constant(&s, Tensor::vector(&[1f32, 5.0, 3.0, 0.0])).unwrap();
    let u = ops::constant(&s, Tensor::vector(&[4f32, 3.0, 0.0])).unwrap();
    let idx = ints(&s, &[3, 1], &[0, 2, 0]).unwrap();
    let y = ops::tensor_scatter(&s, "TensorScatterMax", &x, &idx, &u).unwrap();
    let w = ops::constant(&s, Tensor::vector(&[1f32, 2.0, 3.0, 4.0])).unwrap();
    let loss = ops::sum_axes(&s, &ops::mul(&s, &y, &w).unwrap(), &[0], false).unwrap();
    let g =
        actorflow::graph::gradients::gradients(&s, &[loss], &[x.clone(), u.clone()], None).unwrap();
    let sess = actorflow::Session::new(&s.graph_def(), Default::default()).unwrap();
    let names: Vec<String> = g.iter().map(|g| g.as_ref().unwrap().name()).collect();
    let fetch: Vec<&str> = names.iter().map(String::as_str).collect();
    let out = sess.run(&[], &fetch, &[]).unwrap();
    assert_eq!(out[0], Tensor::vector(&[0f32, 2.0, 1.5, 4.0]));
    assert_eq!(out[1], Tensor::vector(&[1f32, 1.5, 0.0]));
    let min = ops::tensor_scatter(&s, "TensorScatterMin", &x, &idx, &u).unwrap();
    let sess = actorflow::Session::new(&s.graph_def(), Default::default()).unwrap();
    let m = sess.run(&[], &[&min.name()], &[]).unwrap();
    assert_eq!(m[0], Tensor::vector(&[0f32, 5.0, 3.0, 0.0]));
}
