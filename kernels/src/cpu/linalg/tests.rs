//! Hand-computed and edge cases of the linalg kernels, and checks of the `gemm`
//! wrapper against a reference loop (zero-size dimensions, transposes, non-square
//! and large products).

use graph::{bf16, f16, AttrValue, Code, DType, Tensor, TensorShape};

use super::gemm::{gemm_into, MatRef};
use super::plan::{Flavor, Plan};
use crate::testutil::run_op;

/// Deterministic values in [-2, 2).
fn values(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 4001) as f64 / 1000.0 - 2.0)
        .collect()
}

/// The product of logical matrices read through `get`.
fn reference(
    m: usize,
    n: usize,
    k: usize,
    a: impl Fn(usize, usize) -> f64,
    b: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a(i, p) * b(p, j)).sum();
        }
    }
    c
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn gemm_matches_reference_for_all_layouts() {
    let shapes = [
        (0, 3, 4),
        (3, 0, 4),
        (3, 4, 0),
        (1, 1, 1),
        (2, 3, 4),
        (7, 5, 3),
        (1, 9, 17),
        (33, 1, 65),
        (300, 200, 250),
        // Few rows, a wide and long `b`: through a column-major buffer, then
        // transposed (odd sizes for the transpose's blocks).
        (5, 700, 300),
        (1, 1030, 257),
    ];
    for &(m, n, k) in &shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a = values(m * k, 1);
            let b = values(k * n, 2);
            // Stored [m, k] (or [k, m] when transposed), likewise b.
            let (a_rs, a_cs) = if ta { (1, m) } else { (k, 1) };
            let (b_rs, b_cs) = if tb { (1, k) } else { (n, 1) };
            let want = reference(
                m,
                n,
                k,
                |i, p| a[i * a_rs + p * a_cs],
                |p, j| b[p * b_rs + j * b_cs],
            );
            for threads in [1, 2] {
                let mut c = vec![f64::NAN; m * n];
                let av = MatRef::new(&a, m, k, a_rs, a_cs).unwrap();
                let bv = MatRef::new(&b, k, n, b_rs, b_cs).unwrap();
                gemm_into(av, bv, &mut c, threads).unwrap();
                close(&c, &want, 1e-12);
                let (a32, b32): (Vec<f32>, Vec<f32>) = (
                    a.iter().map(|&v| v as f32).collect(),
                    b.iter().map(|&v| v as f32).collect(),
                );
                let mut c32 = vec![f32::NAN; m * n];
                let av = MatRef::new(&a32, m, k, a_rs, a_cs).unwrap();
                let bv = MatRef::new(&b32, k, n, b_rs, b_cs).unwrap();
                gemm_into(av, bv, &mut c32, threads).unwrap();
                close(
                    &c32.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                    &want,
                    1e-4,
                );
            }
        }
    }
}

#[test]
fn gemm_rejects_inconsistent_views() {
    let data = vec![0.0f32; 6];
    assert!(MatRef::new(&data, 2, 3, 3, 1).is_ok());
    assert!(MatRef::new(&data, 3, 3, 3, 1).is_err());
    assert!(MatRef::new(&data, 2, 3, 1, 2).is_ok());
    assert!(MatRef::new(&data, 2, 4, 1, 2).is_err());
    assert!(MatRef::new(&data, 2, 2, usize::MAX / 2, 1).is_err());
    assert!(MatRef::new(&data[..0], 0, 5, 5, 1).is_ok());
    let a = MatRef::new(&data, 2, 3, 3, 1).unwrap();
    let b = MatRef::new(&data, 3, 2, 2, 1).unwrap();
    assert!(gemm_into(a, b, &mut [0.0f32; 3], 1).is_err());
    assert!(gemm_into(a, a, &mut [0.0f32; 9], 1).is_err());
    assert!(gemm_into(a, b, &mut [0.0f32; 4], 1).is_ok());
}

fn mm(op: &str, attrs: &[(&str, AttrValue)], x: Tensor, y: Tensor) -> graph::Result<Tensor> {
    Ok(run_op(op, attrs, vec![x, y])?.remove(0))
}

fn tr(a: bool, b: bool) -> [(&'static str, AttrValue); 2] {
    [
        ("transpose_a", AttrValue::B(a)),
        ("transpose_b", AttrValue::B(b)),
    ]
}

fn adj(a: bool, b: bool) -> [(&'static str, AttrValue); 2] {
    [("adj_x", AttrValue::B(a)), ("adj_y", AttrValue::B(b))]
}

#[test]
fn mat_mul_by_hand() {
    let a = Tensor::new(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let b = Tensor::new(&[2, 2], vec![5.0f32, 6.0, 7.0, 8.0]).unwrap();
    let want = |v: Vec<f32>| Tensor::new(&[2, 2], v).unwrap();
    assert_eq!(
        mm("MatMul", &tr(false, false), a.clone(), b.clone()).unwrap(),
        want(vec![19.0, 22.0, 43.0, 50.0])
    );
    assert_eq!(
        mm("MatMul", &tr(true, false), a.clone(), b.clone()).unwrap(),
        want(vec![26.0, 30.0, 38.0, 44.0])
    );
    assert_eq!(
        mm("MatMul", &tr(false, true), a.clone(), b.clone()).unwrap(),
        want(vec![17.0, 23.0, 39.0, 53.0])
    );
    assert_eq!(
        mm("MatMul", &tr(true, true), a, b).unwrap(),
        want(vec![23.0, 31.0, 34.0, 46.0])
    );
    // Non-square, f64.
    let a = Tensor::new(&[1, 3], vec![1.0f64, 2.0, 3.0]).unwrap();
    let b = Tensor::new(&[3, 2], vec![1.0f64, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap();
    assert_eq!(
        mm("MatMul", &[], a, b).unwrap(),
        Tensor::new(&[1, 2], vec![4.0f64, 5.0]).unwrap()
    );
}

#[test]
fn mat_mul_zero_sizes_and_errors() {
    let out = mm(
        "MatMul",
        &[],
        Tensor::zeros(DType::F32, [2, 0]),
        Tensor::zeros(DType::F32, [0, 3]),
    )
    .unwrap();
    assert_eq!(out, Tensor::zeros(DType::F32, [2, 3]));
    let out = mm(
        "MatMul",
        &[],
        Tensor::zeros(DType::I32, [0, 3]),
        Tensor::zeros(DType::I32, [3, 2]),
    )
    .unwrap();
    assert_eq!(out.dims(), &[0, 2]);
    let out = mm(
        "MatMul",
        &tr(true, false),
        Tensor::zeros(DType::F64, [4, 0]),
        Tensor::zeros(DType::F64, [4, 5]),
    )
    .unwrap();
    assert_eq!(out.dims(), &[0, 5]);
    let e = mm(
        "MatMul",
        &[],
        Tensor::zeros(DType::F32, [2, 3]),
        Tensor::zeros(DType::F32, [2, 3]),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = mm(
        "MatMul",
        &[],
        Tensor::zeros(DType::F32, [1, 2, 3]),
        Tensor::zeros(DType::F32, [3, 2]),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // The op allows uint8, but TensorFlow has no CPU kernel for it.
    let e = mm(
        "MatMul",
        &[],
        Tensor::zeros(DType::U8, [2, 2]),
        Tensor::zeros(DType::U8, [2, 2]),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // The kernel's own checks, as TensorFlow words them.
    let p = |x: &[usize], y: &[usize], f| {
        Plan::new(&TensorShape::new(x), &TensorShape::new(y), false, false, f)
    };
    assert!(p(&[2, 3], &[2, 3], Flavor::MatMul)
        .unwrap_err()
        .message()
        .contains("Matrix size-incompatible"));
    assert!(p(&[2, 2, 3], &[2, 3], Flavor::BatchMatMul)
        .unwrap_err()
        .message()
        .contains("different ndims"));
    assert!(p(&[2, 2, 3], &[3, 3, 2], Flavor::BatchMatMul)
        .unwrap_err()
        .message()
        .contains("must be the same"));
    assert!(p(&[2, 2, 3], &[3, 3, 2], Flavor::Broadcast)
        .unwrap_err()
        .message()
        .contains("compatible batch"));
    assert!(p(&[3], &[3, 2], Flavor::Broadcast)
        .unwrap_err()
        .message()
        .contains("In[0] ndims"));
    assert!(p(&[1, 2, 3], &[1, 3, 2], Flavor::MatMul)
        .unwrap_err()
        .message()
        .contains("== 2"));
    let huge = 1usize << 31;
    let e = p(&[huge, 1, 1, 1], &[1, huge, 1, 1], Flavor::Broadcast).unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    let empty = p(&[huge, 1, 0, 3], &[1, huge, 3, 5], Flavor::Broadcast).unwrap();
    assert!(empty.is_trivial());
    assert_eq!(empty.out_shape().dims(), &[huge, huge, 0, 5]);
}

#[test]
fn loop_types_match_reference() {
    let (m, k, n) = (5, 7, 3);
    let a = values(m * k, 3);
    let b = values(k * n, 4);
    for (ta, tb) in [(false, false), (true, true), (false, true), (true, false)] {
        let (a_rs, a_cs) = if ta { (1, m) } else { (k, 1) };
        let (b_rs, b_cs) = if tb { (1, k) } else { (n, 1) };
        let ad = if ta { [k, m] } else { [m, k] };
        let bd = if tb { [n, k] } else { [k, n] };
        // Integers: exact.
        let ai: Vec<i64> = a.iter().map(|v| (v * 10.0).round() as i64).collect();
        let bi: Vec<i64> = b.iter().map(|v| (v * 10.0).round() as i64).collect();
        let want = reference(
            m,
            n,
            k,
            |i, p| ai[i * a_rs + p * a_cs] as f64,
            |p, j| bi[p * b_rs + j * b_cs] as f64,
        );
        let x = Tensor::new(&ad, ai.clone()).unwrap();
        let y = Tensor::new(&bd, bi.clone()).unwrap();
        let got = mm("MatMul", &tr(ta, tb), x, y).unwrap();
        assert_eq!(got.to_f64_vec().unwrap(), want);
        let x = Tensor::new(&ad, ai.iter().map(|&v| v as i32).collect()).unwrap();
        let y = Tensor::new(&bd, bi.iter().map(|&v| v as i32).collect()).unwrap();
        assert_eq!(
            mm("MatMul", &tr(ta, tb), x, y)
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            want
        );
        let x = Tensor::new(&[1, ad[0], ad[1]], ai.iter().map(|&v| v as i16).collect()).unwrap();
        let y = Tensor::new(&[1, bd[0], bd[1]], bi.iter().map(|&v| v as i16).collect()).unwrap();
        assert_eq!(
            mm("BatchMatMulV2", &adj(ta, tb), x, y)
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            want
        );
        // Halves: accumulated in f32, rounded once.
        let want = reference(
            m,
            n,
            k,
            |i, p| a[i * a_rs + p * a_cs],
            |p, j| b[p * b_rs + j * b_cs],
        );
        let x = Tensor::new(&ad, a.iter().map(|&v| f16::from_f64(v)).collect()).unwrap();
        let y = Tensor::new(&bd, b.iter().map(|&v| f16::from_f64(v)).collect()).unwrap();
        close(
            &mm("MatMul", &tr(ta, tb), x, y)
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            &want,
            1e-2,
        );
        let x = Tensor::new(&ad, a.iter().map(|&v| bf16::from_f64(v)).collect()).unwrap();
        let y = Tensor::new(&bd, b.iter().map(|&v| bf16::from_f64(v)).collect()).unwrap();
        close(
            &mm("MatMul", &tr(ta, tb), x, y)
                .unwrap()
                .to_f64_vec()
                .unwrap(),
            &want,
            3e-2,
        );
    }
}

#[test]
fn integer_products_wrap_and_half_accumulates_in_f32() {
    let x = Tensor::new(&[1, 2], vec![1i32 << 30, 1 << 30]).unwrap();
    let y = Tensor::new(&[2, 1], vec![1i32, 1]).unwrap();
    assert_eq!(
        mm("MatMul", &[], x, y).unwrap(),
        Tensor::new(&[1, 1], vec![i32::MIN]).unwrap()
    );
    let h = |v: f32| f16::from_f32(v);
    let x = Tensor::new(&[1, 3], vec![h(60000.0), h(60000.0), h(-60000.0)]).unwrap();
    let y = Tensor::new(&[3, 1], vec![h(1.0); 3]).unwrap();
    assert_eq!(
        mm("MatMul", &[], x, y).unwrap(),
        Tensor::new(&[1, 1], vec![h(60000.0)]).unwrap()
    );
}

#[test]
fn batch_mat_mul_equal_and_broadcast_batches() {
    // x: [2, 1, 2, 3], y: [3, 3, 4] -> [2, 3, 2, 4].
    let xv = values(12, 5);
    let yv = values(36, 6);
    let x = Tensor::new(&[2, 1, 2, 3], xv.clone()).unwrap();
    let y = Tensor::new(&[3, 3, 4], yv.clone()).unwrap();
    let out = mm("BatchMatMulV2", &[], x.clone(), y.clone()).unwrap();
    assert_eq!(out.dims(), &[2, 3, 2, 4]);
    let got = out.to_f64_vec().unwrap();
    for bx in 0..2 {
        for by in 0..3 {
            let want = reference(
                2,
                4,
                3,
                |i, p| xv[bx * 6 + i * 3 + p],
                |p, j| yv[by * 12 + p * 4 + j],
            );
            let o = (bx * 3 + by) * 8;
            close(&got[o..o + 8], &want, 1e-12);
        }
    }
    assert_eq!(
        mm("BatchMatMul", &[], x.clone(), y.clone())
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    // Equal batches, adjoints.
    let x = Tensor::new(&[3, 3, 2], values(18, 7)).unwrap();
    let y = Tensor::new(&[3, 4, 3], values(36, 8)).unwrap();
    let out = mm("BatchMatMul", &adj(true, true), x.clone(), y.clone()).unwrap();
    let (xv, yv) = (x.to_f64_vec().unwrap(), y.to_f64_vec().unwrap());
    let got = out.to_f64_vec().unwrap();
    assert_eq!(out.dims(), &[3, 2, 4]);
    for b in 0..3 {
        let want = reference(
            2,
            4,
            3,
            |i, p| xv[b * 6 + p * 2 + i],
            |p, j| yv[b * 12 + j * 3 + p],
        );
        close(&got[b * 8..b * 8 + 8], &want, 1e-12);
    }
    // Many small products, in parallel (2 * 32^3 * 64 flops).
    let x = Tensor::new(
        &[64, 32, 32],
        values(65536, 9).iter().map(|&v| v as f32).collect(),
    )
    .unwrap();
    let y = Tensor::new(
        &[32, 32],
        values(1024, 10).iter().map(|&v| v as f32).collect(),
    )
    .unwrap();
    let out = mm("BatchMatMulV2", &[], x.clone(), y.clone()).unwrap();
    let (xv, yv, got) = (
        x.to_f64_vec().unwrap(),
        y.to_f64_vec().unwrap(),
        out.to_f64_vec().unwrap(),
    );
    for b in [0, 17, 63] {
        let want = reference(
            32,
            32,
            32,
            |i, p| xv[b * 1024 + i * 32 + p],
            |p, j| yv[p * 32 + j],
        );
        close(&got[b * 1024..(b + 1) * 1024], &want, 1e-4);
    }
    // Broadcasting against an empty batch.
    let out = mm(
        "BatchMatMulV2",
        &[],
        Tensor::zeros(DType::F32, [0, 1, 2, 3]),
        Tensor::zeros(DType::F32, [4, 3, 5]),
    )
    .unwrap();
    assert_eq!(out.dims(), &[0, 4, 2, 5]);
}

#[test]
fn batch_mat_mul_v3_mixed_types() {
    let v3 = |x: Tensor, y: Tensor, tout: DType| {
        mm("BatchMatMulV3", &[("Tout", AttrValue::Type(tout))], x, y)
    };
    let x = Tensor::new(&[1, 2], vec![127i8, 127]).unwrap();
    let y = Tensor::new(&[2, 1], vec![127i8, 127]).unwrap();
    assert_eq!(
        v3(x.clone(), y, DType::I32).unwrap(),
        Tensor::new(&[1, 1], vec![32258i32]).unwrap()
    );
    let yu = Tensor::new(&[2, 1], vec![255u8, 1]).unwrap();
    assert_eq!(
        v3(x.clone(), yu.clone(), DType::I32).unwrap(),
        Tensor::new(&[1, 1], vec![32512i32]).unwrap()
    );
    let xb = Tensor::new(&[1, 2], vec![bf16::from_f32(0.5), bf16::from_f32(-2.0)]).unwrap();
    assert_eq!(
        v3(xb.clone(), yu, DType::BF16).unwrap(),
        Tensor::new(&[1, 1], vec![bf16::from_f32(125.5)]).unwrap()
    );
    let yb = Tensor::new(&[2, 1], vec![bf16::from_f32(4.0), bf16::from_f32(1.0)]).unwrap();
    assert_eq!(
        v3(xb.clone(), yb, DType::BF16).unwrap(),
        Tensor::new(&[1, 1], vec![bf16::from_f32(0.0)]).unwrap()
    );
    // Combinations TensorFlow has no CPU kernel for.
    let h = Tensor::new(&[1, 1], vec![f16::ONE]).unwrap();
    assert_eq!(
        v3(h.clone(), h, DType::F16).unwrap_err().code(),
        Code::NotFound
    );
    let y = Tensor::new(&[2, 1], vec![1i8, 1]).unwrap();
    assert_eq!(v3(x, y, DType::I64).unwrap_err().code(), Code::NotFound);
}

fn range(start: Tensor, limit: Tensor, delta: Tensor) -> graph::Result<Tensor> {
    Ok(run_op("Range", &[], vec![start, limit, delta])?.remove(0))
}

#[test]
fn range_values_and_errors() {
    let s = Tensor::scalar::<i32>;
    assert_eq!(
        range(s(0), s(10), s(3)).unwrap(),
        Tensor::vector(&[0i32, 3, 6, 9])
    );
    assert_eq!(
        range(s(10), s(0), s(-3)).unwrap(),
        Tensor::vector(&[10i32, 7, 4, 1])
    );
    assert_eq!(range(s(4), s(4), s(1)).unwrap(), Tensor::vector::<i32>(&[]));
    let r = range(s(i32::MAX - 2), s(i32::MAX), s(2)).unwrap();
    assert_eq!(r, Tensor::vector(&[i32::MAX - 2]));
    let r = range(s(i32::MIN), s(i32::MAX), s(i32::MAX)).unwrap();
    assert_eq!(r, Tensor::vector(&[i32::MIN, -1, i32::MAX - 1]));
    let r = range(
        Tensor::scalar(0.0f32),
        Tensor::scalar(1.0f32),
        Tensor::scalar(0.25f32),
    )
    .unwrap();
    assert_eq!(r, Tensor::vector(&[0.0f32, 0.25, 0.5, 0.75]));
    let r = range(
        Tensor::scalar(-1i64),
        Tensor::scalar(-10i64),
        Tensor::scalar(-4i64),
    )
    .unwrap();
    assert_eq!(r, Tensor::vector(&[-1i64, -5, -9]));
    // Half ranges compute in half, as TensorFlow's: 100 elements (not 101), element
    // i = 0.1 + i * 0.3 rounded at each step.
    let h = |v: f32| Tensor::scalar(f16::from_f32(v));
    let r = range(h(0.0), h(10.0), h(0.1)).unwrap();
    assert_eq!(r.dims(), &[100]);
    let r = range(h(0.1), h(300.0), h(0.3)).unwrap();
    let got: Vec<f32> = r.as_slice::<f16>().unwrap()[..6]
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(
        got,
        [
            0.099975586,
            0.39990234,
            0.7001953,
            1.0,
            1.2998047,
            1.5996094
        ]
    );
    // f32: start + i * delta, not a running sum (0.7 here, not 0.70000005).
    let r = range(
        Tensor::scalar(0.0f32),
        Tensor::scalar(1.0f32),
        Tensor::scalar(0.1f32),
    )
    .unwrap();
    assert_eq!(r.as_slice::<f32>().unwrap()[7], 7.0 * 0.1f32);
    for (a, b, c) in [(0, 10, 0), (0, 10, -1), (10, 0, 1)] {
        assert_eq!(
            range(s(a), s(b), s(c)).unwrap_err().code(),
            Code::InvalidArgument
        );
    }
    let f = Tensor::scalar::<f64>;
    for (a, b, c) in [
        (0.0, f64::INFINITY, 1.0),
        (f64::NAN, 1.0, 1.0),
        (0.0, 1.0, f64::NAN),
    ] {
        assert_eq!(
            range(f(a), f(b), f(c)).unwrap_err().code(),
            Code::InvalidArgument
        );
    }
    assert_eq!(
        range(s(0), s(1), Tensor::vector(&[1i32, 2]))
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    // No CPU kernel for int8 in TensorFlow.
    let b = Tensor::scalar::<i8>;
    assert_eq!(range(b(0), b(3), b(1)).unwrap_err().code(), Code::NotFound);
    // The kernel accepts length-1 vectors (the shape function does not).
    let v = super::range::range_tensor(crate::Allocator::unlimited(), 0u64 as i64, 3, 1).unwrap();
    assert_eq!(v, Tensor::vector(&[0i64, 1, 2]));
}
