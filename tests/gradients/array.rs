//! Numerical checks of the array gradients: reshapes, transposes, concatenation
//! and splitting, slicing, gathers, packing, tiling, padding and identities.

use actorflow::graph::gradients::gradients;
use actorflow::ops::StridedSliceMasks;
use actorflow::{ops, Code, DType, Scope, Shape, Tensor};

use crate::checker::{check, rand};

/// A `[2, 3, 4]` input.
fn x234() -> Tensor {
    rand(&[2, 3, 4], 80, -1.0, 1.0)
}

#[test]
fn reshape_expand_squeeze_transpose() {
    check("Reshape", [x234()], |s, v| {
        ops::reshape_to(s, &v[0], &[4, -1])
    });
    check("ExpandDims", [x234()], |s, v| {
        ops::expand_dims_at(s, &v[0], -2)
    });
    check("Squeeze", [rand(&[2, 1, 3, 1], 81, -1.0, 1.0)], |s, v| {
        ops::squeeze(s, &v[0], &[1])
    });
    check(
        "Squeeze all",
        [rand(&[2, 1, 3, 1], 82, -1.0, 1.0)],
        |s, v| ops::squeeze(s, &v[0], &[]),
    );
    check("Transpose", [x234()], |s, v| {
        ops::transpose_perm(s, &v[0], &[2, 0, 1])
    });
    check("Transpose run-time perm", [x234()], |s, v| {
        let perm = ops::identity(s, &ops::index_vector(s, &[1, 2, 0])?)?;
        ops::transpose(s, &v[0], &perm)
    });
}

#[test]
fn concat_and_split() {
    let a = rand(&[2, 3], 83, -1.0, 1.0);
    let b = rand(&[2, 1], 84, -1.0, 1.0);
    let c = rand(&[2, 2], 85, -1.0, 1.0);
    check(
        "ConcatV2 axis -1",
        [a.clone(), b.clone(), c.clone()],
        |s, v| ops::concat_along(s, v, -1),
    );
    check(
        "ConcatV2 run-time axis",
        [a.clone(), b.clone(), c],
        |s, v| {
            let axis = ops::identity(s, &ops::scalar(s, 1i32)?)?;
            ops::concat(s, v, &axis)
        },
    );
    check(
        "ConcatV2 axis 0",
        [a.clone(), rand(&[1, 3], 86, -1.0, 1.0)],
        |s, v| ops::concat_along(s, v, 0),
    );
    check("Concat", [a, b], |s, v| {
        ops::concat_v1(s, &ops::scalar(s, 1i32)?, v)
    });
    // Only some outputs used: the others get zeros.
    check("Split", [x234()], |s, v| {
        let parts = ops::split_along(s, &v[0], 2, 2)?;
        ops::mul(s, &parts[1], &parts[1])
    });
    check("SplitV", [x234()], |s, v| {
        let parts = ops::split_v_sizes(s, &v[0], &[1, -1], 1)?;
        let a = ops::sum_axes(s, &parts[0], &[1], false)?;
        let b = ops::sum_axes(s, &parts[1], &[1], false)?;
        ops::mul(s, &a, &b)
    });
}

/// A strided slice of a `[2, 3, 4]` input: name, begin, end, strides and masks.
type SliceCase = (
    &'static str,
    [i64; 3],
    [i64; 3],
    [i64; 3],
    StridedSliceMasks,
);

#[test]
fn slices() {
    check("Slice", [x234()], |s, v| {
        ops::slice_at(s, &v[0], &[1, 0, 1], &[1, -1, 2])
    });
    check("Slice run-time begin", [x234()], |s, v| {
        let begin = ops::identity(s, &ops::index_vector(s, &[0, 1, 1])?)?;
        let size = ops::index_vector(s, &[2, 2, 3])?;
        ops::slice(s, &v[0], &begin, &size)
    });
    let m = |b, e, el, na, sh| StridedSliceMasks {
        begin_mask: b,
        end_mask: e,
        ellipsis_mask: el,
        new_axis_mask: na,
        shrink_axis_mask: sh,
    };
    // (name, begin, end, strides, masks)
    let cases: [SliceCase; 4] = [
        (
            "x[:, 1:, ::2]",
            [0, 1, 0],
            [0, 0, 0],
            [1, 1, 2],
            m(0b101, 0b111, 0, 0, 0),
        ),
        (
            "x[1, ::-1, 3]",
            [1, 0, 3],
            [2, 0, 4],
            [1, -1, 1],
            m(0b010, 0b010, 0, 0, 0b101),
        ),
        (
            "x[..., newaxis, 1:3]",
            [0, 0, 1],
            [0, 0, 3],
            [1, 1, 1],
            m(0, 0, 0b001, 0b010, 0),
        ),
        (
            "x[-1:, 0:3:2]",
            [-1, 0, 0],
            [0, 3, 0],
            [1, 2, 1],
            m(0b100, 0b101, 0, 0, 0),
        ),
    ];
    for (name, b, e, st, masks) in cases {
        check(&format!("StridedSlice {name}"), [x234()], |s, v| {
            ops::strided_slice_at(s, &v[0], &b, &e, &st, &masks)
        });
    }
    // Second order: the gradient of StridedSliceGrad is the slice again.
    check(
        "StridedSliceGrad",
        [rand(&[2, 2], 87, -1.0, 1.0)],
        |s, v| {
            let shape = ops::index_vector(s, &[3, 4])?;
            let g = ops::strided_slice_grad(
                s,
                &shape,
                &ops::index_vector(s, &[1, 0])?,
                &ops::index_vector(s, &[3, 4])?,
                &ops::index_vector(s, &[1, 2])?,
                &ops::mul(s, &v[0], &v[0])?,
                &StridedSliceMasks::default(),
            )?;
            ops::mul(s, &g, &g)
        },
    );
}

#[test]
fn gathers_sum_repeated_indices() {
    let p = rand(&[4, 3], 88, -1.0, 1.0);
    check("Gather", [p.clone()], |s, v| {
        let idx = ops::constant(s, Tensor::new(&[2, 2], vec![3i32, 0, 3, 1])?)?;
        ops::gather_v1(s, &v[0], &idx)
    });
    check("GatherV2 axis 0", [p.clone()], |s, v| {
        let idx = ops::constant(s, Tensor::vector(&[2i64, 2, 0]))?;
        ops::gather_along(s, &v[0], &idx, 0)
    });
    check("GatherV2 axis -1", [x234()], |s, v| {
        let idx = ops::constant(s, Tensor::new(&[2, 2], vec![1i32, 3, 3, 0])?)?;
        ops::gather_along(s, &v[0], &idx, -1)
    });
    check("GatherV2 axis 1", [x234()], |s, v| {
        let idx = ops::constant(s, Tensor::vector(&[2i32, 0, 2]))?;
        ops::gather_along(s, &v[0], &idx, 1)
    });
    check("GatherV2 run-time axis", [x234()], |s, v| {
        let idx = ops::constant(s, Tensor::vector(&[1i32, 1]))?;
        let axis = ops::identity(s, &ops::scalar(s, 1i32)?)?;
        ops::gather(s, &v[0], &idx, &axis)
    });
    // batch_dims is not supported: a clear Unimplemented error.
    let s = Scope::new();
    let p = ops::placeholder(&s, DType::F64, Shape::known(&[2, 3])).unwrap();
    let idx = ops::constant(&s, Tensor::new(&[2, 1], vec![0i32, 2]).unwrap()).unwrap();
    let axis = ops::scalar(&s, 1i32).unwrap();
    let y = ops::gather_batched(&s, &p, &idx, &axis, 1).unwrap();
    let e = gradients(&s, &[y], &[p], None).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e}");
}

#[test]
fn pack_unpack_tile_pad_fill_broadcast_reverse() {
    let a = rand(&[2, 3], 89, -1.0, 1.0);
    let b = rand(&[2, 3], 90, -1.0, 1.0);
    check("Pack axis 1", [a.clone(), b], |s, v| ops::pack(s, v, 1));
    check("Unpack", [x234()], |s, v| {
        let parts = ops::unstack(s, &v[0], 3, 1)?;
        ops::mul(s, &parts[0], &parts[2])
    });
    check("Tile", [a.clone()], |s, v| ops::tile_by(s, &v[0], &[2, 1]));
    check("Tile int64 run-time multiples", [a.clone()], |s, v| {
        let m = ops::identity(s, &ops::constant(s, Tensor::vector(&[1i64, 3]))?)?;
        ops::tile(s, &v[0], &m)
    });
    check("Pad", [a.clone()], |s, v| {
        ops::pad_by(s, &v[0], &[[1, 0], [2, 1]])
    });
    check("PadV2 run-time paddings", [a.clone()], |s, v| {
        let p = ops::identity(
            s,
            &ops::constant(s, Tensor::new(&[2, 2], vec![0i64, 1, 1, 1])?)?,
        )?;
        ops::pad_v2(s, &v[0], &p, &ops::scalar(s, 0.5f64)?)
    });
    check("Fill", [rand(&[], 91, -1.0, 1.0)], |s, v| {
        let f = ops::fill_to(s, &[2, 3], &v[0])?;
        ops::mul(s, &f, &ops::constant(s, rand(&[2, 3], 92, -1.0, 1.0))?)
    });
    check("BroadcastTo", [rand(&[3, 1], 93, -1.0, 1.0)], |s, v| {
        ops::broadcast_to_dims(s, &v[0], &[2, 3, 4])
    });
    check("ReverseV2", [x234()], |s, v| {
        ops::reverse_axes(s, &v[0], &[0, -1])
    });
}

#[test]
fn identity_likes_and_stops() {
    let a = rand(&[2, 3], 94, -1.0, 1.0);
    let b = rand(&[3], 95, -1.0, 1.0);
    check("Identity, Snapshot, IdentityN", [a.clone(), b], |s, v| {
        let i = ops::identity(s, &v[0])?;
        let sn = s.op("Snapshot").input(&i).build1()?;
        let n = ops::identity_n(s, &[sn, v[1].clone()])?;
        ops::mul(s, &n[0], &n[1])
    });
    check("PlaceholderWithDefault", [a.clone()], |s, v| {
        let p = ops::placeholder_with_default(s, &v[0], Shape::unknown())?;
        ops::square(s, &p)
    });
    // A stopped path contributes nothing: d/dx (x * stop(x)) = stop(x).
    let s = Scope::new();
    let x = ops::constant(&s, Tensor::vector(&[2.0f64, -3.0])).unwrap();
    let y = ops::mul(&s, &x, &ops::stop_gradient(&s, &x).unwrap()).unwrap();
    let z = ops::add(&s, &y, &ops::zeros_like(&s, &x).unwrap()).unwrap();
    let g = gradients(&s, &[z], &[x], None).unwrap();
    let sess = crate::any_placement::AnyPlacement::new(&s.graph_def()).unwrap();
    let out = sess
        .run(&[], &[&g[0].as_ref().unwrap().name()], &[])
        .unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[2.0, -3.0]);
}

#[test]
fn shape_valued_paths_carry_no_gradient() {
    // y = x * size(x) * ones_like(x) + argmax(x): Size, OnesLike and ArgMax are not
    // differentiable, so dy/dx = size(x).
    check(
        "Mul by Cast(Size)",
        [rand(&[2, 3], 96, -1.0, 1.0)],
        |s, v| {
            let n = ops::cast(s, &ops::size(s, &v[0])?, DType::F64)?;
            let am = ops::cast(s, &ops::arg_max_axis(s, &v[0], 1, DType::I64)?, DType::F64)?;
            let ones = ops::ones_like(s, &v[0])?;
            let y = ops::mul(s, &ops::mul(s, &v[0], &n)?, &ones)?;
            ops::add(s, &y, &ops::expand_dims_at(s, &am, 1)?)
        },
    );
}
