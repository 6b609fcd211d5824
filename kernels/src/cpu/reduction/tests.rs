//! Hand-computed and edge cases of the reduction kernels.

use graph::{bf16, f16, AttrValue, Code, DType, Tensor};

use super::{reduce_tensor, reduction_axes};
use crate::testutil::run_op;

fn t<T: graph::TensorType>(dims: &[usize], v: Vec<T>) -> Tensor {
    Tensor::new(dims, v).unwrap()
}

fn red(op: &str, x: Tensor, axes: Tensor, keep_dims: bool) -> graph::Result<Tensor> {
    let attrs = [("keep_dims", AttrValue::B(keep_dims))];
    Ok(run_op(op, &attrs, vec![x, axes])?.remove(0))
}

fn ax(a: &[i32]) -> Tensor {
    Tensor::vector(a)
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn sums_over_rows_columns_and_all() {
    let x = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        red("Sum", x.clone(), ax(&[1]), false).unwrap(),
        Tensor::vector(&[6.0f32, 15.0])
    );
    assert_eq!(
        red("Sum", x.clone(), ax(&[0]), false).unwrap(),
        Tensor::vector(&[5.0f32, 7.0, 9.0])
    );
    assert_eq!(
        red("Sum", x.clone(), ax(&[-1]), true).unwrap(),
        t(&[2, 1], vec![6.0f32, 15.0])
    );
    assert_eq!(
        red("Sum", x.clone(), ax(&[0, 1]), false).unwrap(),
        Tensor::scalar(21.0f32)
    );
    assert_eq!(
        red("Sum", x.clone(), ax(&[1, 0]), true).unwrap(),
        t(&[1, 1], vec![21.0f32])
    );
    assert_eq!(
        red("Sum", x.clone(), Tensor::scalar(1i32), false).unwrap(),
        Tensor::vector(&[6.0f32, 15.0])
    );
    assert_eq!(
        red("Sum", x.clone(), Tensor::vector(&[-2i64]), false).unwrap(),
        Tensor::vector(&[5.0f32, 7.0, 9.0])
    );
    assert_eq!(
        red("Prod", x.clone(), ax(&[1]), false).unwrap(),
        Tensor::vector(&[6.0f32, 120.0])
    );
    assert_eq!(
        red("Max", x.clone(), ax(&[0]), false).unwrap(),
        Tensor::vector(&[4.0f32, 5.0, 6.0])
    );
    assert_eq!(
        red("Min", x.clone(), ax(&[1]), false).unwrap(),
        Tensor::vector(&[1.0f32, 4.0])
    );
    assert_eq!(
        red("Mean", x, ax(&[0, 1]), false).unwrap(),
        Tensor::scalar(3.5f32)
    );
}

#[test]
fn middle_and_multiple_axes() {
    // x[i, j, k] = 100 i + 10 j + k over [2, 3, 4].
    let v: Vec<i32> = (0..24)
        .map(|f| 100 * (f / 12) + 10 * ((f / 4) % 3) + f % 4)
        .collect();
    let x = t(&[2, 3, 4], v);
    let mid = red("Sum", x.clone(), ax(&[1]), false).unwrap();
    let want: Vec<i32> = (0..8)
        .map(|f| 3 * (100 * (f / 4)) + 30 + 3 * (f % 4))
        .collect();
    assert_eq!(mid, t(&[2, 4], want));
    let outer = red("Sum", x.clone(), ax(&[0, 2]), true).unwrap();
    let want: Vec<i32> = (0..3).map(|j| 4 * 100 + 8 * 10 * j + 2 * 6).collect();
    assert_eq!(outer, t(&[1, 3, 1], want));
    assert_eq!(
        red("Max", x.clone(), ax(&[2, 0]), false).unwrap(),
        Tensor::vector(&[103i32, 113, 123])
    );
    assert_eq!(
        red("Min", x, ax(&[1, 2]), false).unwrap(),
        Tensor::vector(&[0i32, 100])
    );
}

#[test]
fn no_axes_and_size_one_axes_return_the_input() {
    let x = t(&[2, 1, 40], (0..80).map(|v| v as f64).collect());
    let out = red("Sum", x.clone(), Tensor::vector::<i32>(&[]), false).unwrap();
    assert_eq!(out, x);
    assert!(out.shares_buffer_with(&x));
    let out = red("Mean", x.clone(), ax(&[1]), false).unwrap();
    assert_eq!(out.dims(), &[2, 40]);
    assert!(out.shares_buffer_with(&x));
    let out = red("Max", x.clone(), ax(&[1]), true).unwrap();
    assert_eq!(out.dims(), &[2, 1, 40]);
    // -0.0 survives (TensorFlow copies instead of adding to 0).
    let z = red("Sum", Tensor::vector(&[-0.0f32]), ax(&[0]), false).unwrap();
    assert!(z.scalar_value::<f32>().unwrap().is_sign_negative());
}

#[test]
fn rank_zero_inputs() {
    let x = Tensor::scalar(3i64);
    assert_eq!(
        red("Sum", x.clone(), Tensor::vector::<i32>(&[]), true).unwrap(),
        x
    );
    for a in [0, -1] {
        let e = red("Sum", x.clone(), Tensor::scalar(a), false).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("Invalid reduction dimension"), "{e}");
    }
}

#[test]
fn bad_axes_are_invalid_argument() {
    let x = t(&[2, 3], vec![0.0f32; 6]);
    for axes in [ax(&[2]), ax(&[-3]), ax(&[0, 0]), ax(&[1, -1])] {
        let e = red("Sum", x.clone(), axes, false).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    }
    let e = red("Sum", x.clone(), ax(&[0, -2]), false).unwrap_err();
    assert!(e.message().contains("duplicate dimension: 0"), "{e}");
    // The kernel reads axes of any rank, flattened, as TensorFlow's does (the
    // shape function rejects rank > 1 when building graphs).
    assert_eq!(
        reduction_axes(&t(&[1, 2], vec![1i32, 0]), 2).unwrap(),
        vec![true, true]
    );
    assert!(red("Sum", x.clone(), t(&[1, 1], vec![0i32]), false).is_err());
    assert_eq!(
        reduction_axes(&Tensor::vector(&[0.0f32]), 2)
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    // Wrong input dtype for All / Any.
    assert!(red("All", x, ax(&[0]), false).is_err());
}

#[test]
fn empty_reductions_give_identities() {
    let e = || Tensor::zeros(DType::F32, [2, 0]);
    assert_eq!(
        red("Sum", e(), ax(&[1]), false).unwrap(),
        Tensor::vector(&[0.0f32, 0.0])
    );
    assert_eq!(
        red("Prod", e(), ax(&[1]), false).unwrap(),
        Tensor::vector(&[1.0f32, 1.0])
    );
    assert_eq!(
        red("Max", e(), ax(&[1]), false).unwrap(),
        Tensor::vector(&[f32::NEG_INFINITY; 2])
    );
    assert_eq!(
        red("Min", e(), ax(&[1]), true).unwrap(),
        t(&[2, 1], vec![f32::INFINITY; 2])
    );
    assert!(f32s(&red("Mean", e(), ax(&[1]), false).unwrap())
        .iter()
        .all(|v| v.is_nan()));
    let h = red("Mean", Tensor::zeros(DType::F16, [0]), ax(&[0]), false).unwrap();
    assert!(h.scalar_value::<f16>().unwrap().is_nan());
    let b = red("Max", Tensor::zeros(DType::BF16, [0]), ax(&[0]), false).unwrap();
    assert_eq!(b.scalar_value::<bf16>().unwrap(), bf16::NEG_INFINITY);
    let i = || Tensor::zeros(DType::I32, [0, 3]);
    assert_eq!(
        red("Max", i(), ax(&[0]), false).unwrap(),
        Tensor::vector(&[i32::MIN; 3])
    );
    assert_eq!(
        red("Min", i(), ax(&[0]), false).unwrap(),
        Tensor::vector(&[i32::MAX; 3])
    );
    assert_eq!(
        red("Mean", i(), ax(&[0]), false).unwrap(),
        Tensor::vector(&[0i32; 3])
    );
    assert_eq!(
        red("Max", Tensor::zeros(DType::U8, [0]), ax(&[0]), false).unwrap(),
        Tensor::scalar(0u8)
    );
    let bools = || Tensor::zeros(DType::Bool, [0]);
    assert_eq!(
        red("All", bools(), ax(&[0]), false).unwrap(),
        Tensor::scalar(true)
    );
    assert_eq!(
        red("Any", bools(), ax(&[0]), false).unwrap(),
        Tensor::scalar(false)
    );
    // Reducing an empty dimension of an input whose other dimensions are huge.
    let e = reduce_tensor::<super::reducers::SumReducer<f32>>(
        crate::Allocator::unlimited(),
        &Tensor::zeros(DType::F32, [1 << 40, 1 << 22, 0]),
        &[false, false, true],
        false,
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    // An empty output: nothing to compute.
    let out = red("Sum", i(), ax(&[1]), false).unwrap();
    assert_eq!((out.dtype(), out.dims()), (DType::I32, &[0usize][..]));
}

#[test]
fn nan_propagates_through_max_min_and_sum() {
    let x = t(&[2, 3], vec![1.0f32, f32::NAN, 3.0, f32::NAN, 0.0, -1.0]);
    for op in ["Max", "Min", "Sum", "Mean", "Prod"] {
        let out = f32s(&red(op, x.clone(), ax(&[1]), false).unwrap());
        assert!(out[0].is_nan() && out[1].is_nan(), "{op}: {out:?}");
        let cols = f32s(&red(op, x.clone(), ax(&[0]), false).unwrap());
        assert!(
            cols[0].is_nan() && cols[1].is_nan() && !cols[2].is_nan(),
            "{op}: {cols:?}"
        );
    }
    let m = red(
        "Max",
        Tensor::vector(&[f64::NAN, 1.0, 3.0]),
        ax(&[0]),
        false,
    )
    .unwrap();
    assert!(m.scalar_value::<f64>().unwrap().is_nan());
}

#[test]
fn integer_arithmetic_as_tensorflow() {
    let r = |op, x| red(op, x, ax(&[0]), false).unwrap();
    assert_eq!(
        r("Mean", Tensor::vector(&[1i32, 2, 2])),
        Tensor::scalar(1i32)
    );
    assert_eq!(
        r("Mean", Tensor::vector(&[-1i32, -2, -2])),
        Tensor::scalar(-1i32)
    );
    assert_eq!(
        r("Mean", Tensor::vector(&[200u8, 200])),
        Tensor::scalar(200u8)
    );
    assert_eq!(
        r("Mean", Tensor::vector(&[100i8, 100, 100])),
        Tensor::scalar(100i8)
    );
    assert_eq!(r("Mean", Tensor::vector(&[7u32, 8])), Tensor::scalar(7u32));
    // 64-bit means accumulate (wrapping) in 64 bits.
    assert_eq!(
        r("Mean", Tensor::vector(&[1i64 << 62; 3])),
        Tensor::scalar(-1537228672809129301i64)
    );
    assert_eq!(
        r("Mean", Tensor::vector(&[u64::MAX / 2; 2])),
        Tensor::scalar(u64::MAX / 2)
    );
    assert_eq!(
        r("Sum", Tensor::vector(&[127i8, 1])),
        Tensor::scalar(-128i8)
    );
    assert_eq!(r("Prod", Tensor::vector(&[16i8, 16])), Tensor::scalar(0i8));
    assert_eq!(
        r("Sum", Tensor::vector(&[u16::MAX, 2])),
        Tensor::scalar(1u16)
    );
}

#[test]
fn half_precision_rules() {
    let h = |v: f32| f16::from_f32(v);
    let r = |op, x| red(op, x, ax(&[0]), false).unwrap();
    // The sum rounds to half before dividing: 120000 overflows.
    let m = r("Mean", Tensor::vector(&[h(60000.0), h(60000.0)]));
    assert_eq!(m.scalar_value::<f16>().unwrap(), f16::INFINITY);
    // The count is converted to half: more than 65504 elements divide by inf.
    let ones = Tensor::build::<f16>([100_000], |o| o.fill(f16::ONE));
    assert!(r("Mean", ones).scalar_value::<f16>().unwrap().is_nan());
    // bfloat16 sums accumulate in f32: 4096 halves of 0.5 sum exactly.
    let b = Tensor::build::<bf16>([4096], |o| o.fill(bf16::from_f32(0.5)));
    assert_eq!(
        r("Sum", b.clone()).scalar_value::<bf16>().unwrap(),
        bf16::from_f32(2048.0)
    );
    assert_eq!(
        r("Mean", b).scalar_value::<bf16>().unwrap(),
        bf16::from_f32(0.5)
    );
    let m = r("Mean", Tensor::vector(&[h(1.0), h(2.0), h(4.0)]));
    assert_eq!(m.scalar_value::<f16>().unwrap(), h(7.0 / 3.0));
}

#[test]
fn all_and_any() {
    let x = t(&[2, 3], vec![true, false, true, true, true, true]);
    assert_eq!(
        red("All", x.clone(), ax(&[1]), false).unwrap(),
        Tensor::vector(&[false, true])
    );
    assert_eq!(
        red("Any", x.clone(), ax(&[0]), true).unwrap(),
        t(&[1, 3], vec![true, true, true])
    );
    assert_eq!(
        red("All", x.clone(), ax(&[0, 1]), false).unwrap(),
        Tensor::scalar(false)
    );
    let none = t(&[2, 2], vec![false; 4]);
    assert_eq!(
        red("Any", none, Tensor::vector(&[1i64]), false).unwrap(),
        Tensor::vector(&[false, false])
    );
}

#[test]
fn large_f32_sums_are_accurate() {
    // [64, 20000] rows and columns, above the parallel threshold.
    let (rows, cols) = (64usize, 20_000usize);
    let v: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 1000) as f32 * 0.001 + 0.5)
        .collect();
    let x = t(&[rows, cols], v.clone());
    let by_row = f32s(&red("Sum", x.clone(), ax(&[1]), false).unwrap());
    for (i, got) in by_row.iter().enumerate() {
        let want: f64 = v[i * cols..(i + 1) * cols].iter().map(|&a| a as f64).sum();
        assert!(
            ((*got as f64 - want) / want).abs() < 1e-6,
            "row {i}: {got} vs {want}"
        );
    }
    let by_col = f32s(&red("Mean", x.clone(), ax(&[0]), false).unwrap());
    for (j, got) in by_col.iter().enumerate().step_by(997) {
        let want: f64 = (0..rows).map(|i| v[i * cols + j] as f64).sum::<f64>() / rows as f64;
        assert!(
            ((*got as f64 - want) / want).abs() < 1e-6,
            "col {j}: {got} vs {want}"
        );
    }
    let all = red("Sum", x, ax(&[0, 1]), false)
        .unwrap()
        .scalar_value::<f32>()
        .unwrap();
    let want: f64 = v.iter().map(|&a| a as f64).sum();
    assert!(((all as f64 - want) / want).abs() < 1e-6, "{all} vs {want}");
}

fn arg(op: &str, x: Tensor, dim: Tensor, out: DType) -> graph::Result<Tensor> {
    Ok(run_op(op, &[("output_type", AttrValue::Type(out))], vec![x, dim])?.remove(0))
}

#[test]
fn arg_max_and_min() {
    let x = t(&[2, 3], vec![1.0f32, 5.0, 5.0, 7.0, 2.0, 7.0]);
    assert_eq!(
        arg("ArgMax", x.clone(), Tensor::scalar(1i32), DType::I64).unwrap(),
        Tensor::vector(&[1i64, 0])
    );
    assert_eq!(
        arg("ArgMax", x.clone(), Tensor::scalar(0i32), DType::I32).unwrap(),
        Tensor::vector(&[1i32, 0, 1])
    );
    assert_eq!(
        arg("ArgMin", x.clone(), Tensor::scalar(-1i64), DType::I64).unwrap(),
        Tensor::vector(&[0i64, 1])
    );
    assert_eq!(
        arg("ArgMin", x.clone(), Tensor::scalar(0i32), DType::I32).unwrap(),
        Tensor::vector(&[0i32, 1, 0])
    );
    assert_eq!(
        arg("ArgMax", x.clone(), Tensor::scalar(1i16), DType::I16).unwrap(),
        Tensor::vector(&[1i16, 0])
    );
    assert_eq!(
        arg("ArgMax", x, Tensor::scalar(1i32), DType::U16).unwrap(),
        Tensor::vector(&[1u16, 0])
    );
    let b = Tensor::vector(&[false, true, true]);
    assert_eq!(
        arg("ArgMax", b.clone(), Tensor::scalar(0i32), DType::I64).unwrap(),
        Tensor::scalar(1i64)
    );
    assert_eq!(
        arg("ArgMin", b, Tensor::scalar(0i32), DType::I64).unwrap(),
        Tensor::scalar(0i64)
    );
    let u = Tensor::vector(&[3u8, 255, 0, 255]);
    assert_eq!(
        arg("ArgMax", u.clone(), Tensor::scalar(0i32), DType::I64).unwrap(),
        Tensor::scalar(1i64)
    );
    assert_eq!(
        arg("ArgMin", u, Tensor::scalar(0i32), DType::I64).unwrap(),
        Tensor::scalar(2i64)
    );
}

#[test]
fn arg_nan_and_extremes_as_tensorflow_cpu() {
    let nan = f32::NAN;
    let am = |v: &[f32]| {
        arg(
            "ArgMax",
            Tensor::vector(v),
            Tensor::scalar(0i32),
            DType::I64,
        )
        .unwrap()
        .scalar_value::<i64>()
        .unwrap()
    };
    let an = |v: &[f32]| {
        arg(
            "ArgMin",
            Tensor::vector(v),
            Tensor::scalar(0i32),
            DType::I64,
        )
        .unwrap()
        .scalar_value::<i64>()
        .unwrap()
    };
    assert_eq!(am(&[1.0, nan, 3.0]), 2);
    assert_eq!(am(&[nan, 1.0, 3.0]), 2);
    assert_eq!(am(&[1.0, 3.0, nan]), 1);
    assert_eq!(an(&[1.0, nan, 0.0]), 2);
    assert_eq!(an(&[nan, nan]), 0);
    assert_eq!(am(&[f32::NEG_INFINITY, f32::MIN]), 0);
    assert_eq!(am(&[f32::NEG_INFINITY, f32::NEG_INFINITY, -1.0]), 2);
    assert_eq!(an(&[f32::INFINITY, f32::MAX]), 0);
    // Columns (inner > 1) follow the same rules.
    let x = t(&[2, 3], vec![1.0f32, 5.0, nan, nan, 2.0, 2.0]);
    assert_eq!(
        arg("ArgMax", x, Tensor::scalar(0i32), DType::I64).unwrap(),
        Tensor::vector(&[0i64, 0, 1])
    );
}

#[test]
fn arg_errors_and_empty_outputs() {
    let code = |r: graph::Result<Tensor>| r.unwrap_err().code();
    let x = t(&[2, 3], vec![0i32; 6]);
    assert_eq!(
        code(arg("ArgMax", x.clone(), Tensor::scalar(2i32), DType::I64)),
        Code::InvalidArgument
    );
    assert_eq!(
        code(arg("ArgMin", x.clone(), Tensor::scalar(-3i32), DType::I64)),
        Code::InvalidArgument
    );
    assert_eq!(
        code(arg("ArgMax", x, Tensor::vector(&[0i32]), DType::I64)),
        Code::InvalidArgument
    );
    let e = arg(
        "ArgMax",
        Tensor::scalar(1.0f32),
        Tensor::scalar(0i32),
        DType::I64,
    )
    .unwrap_err();
    assert!(e.message().contains("[0, 0)"), "{e}");
    let e = arg(
        "ArgMax",
        Tensor::zeros(DType::F32, [2, 0]),
        Tensor::scalar(1i32),
        DType::I64,
    )
    .unwrap_err();
    assert!(e.message().contains("is empty"), "{e}");
    let out = arg(
        "ArgMin",
        Tensor::zeros(DType::F32, [0, 2]),
        Tensor::scalar(1i32),
        DType::I64,
    )
    .unwrap();
    assert_eq!((out.dtype(), out.dims()), (DType::I64, &[0usize][..]));
    let r8 = Tensor::zeros(DType::F32, [2, 1, 1, 1, 1, 1, 1, 1]);
    let e = arg("ArgMax", r8, Tensor::scalar(0i32), DType::I64).unwrap_err();
    assert!(e.message().contains("up to 7"), "{e}");
    assert_eq!(
        code(arg(
            "ArgMin",
            Tensor::vector(&[1.0f32]),
            Tensor::scalar(0i32),
            DType::I16
        )),
        Code::InvalidArgument
    );
}
