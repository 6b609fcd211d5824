//! Numerical checks of the resize gradients (bilinear through float32, as its
//! output always is; nearest neighbour in float64) for every valid
//! `align_corners`/`half_pixel_centers` pair, up- and down-sampling, and of the
//! space/batch/depth moves, each the other's gradient.

use actorflow::graph::gradients::gradients;
use actorflow::graph::ops::ResizeOptions;
use actorflow::{ops, Code, DType, Output, Result, Scope, Shape};

use crate::checker::{check, check_opts, rand, Opts};

const FLAGS: [(bool, bool); 3] = [(false, false), (true, false), (false, true)];

/// Bilinear resizing computes in float32: a coarser step and tolerance.
const F32: Opts = Opts {
    eps: 1e-2,
    tol: 1e-3,
    unknown_shapes: true,
};

fn options((align_corners, half_pixel_centers): (bool, bool)) -> ResizeOptions {
    ResizeOptions {
        align_corners,
        half_pixel_centers,
    }
}

#[test]
fn resize_bilinear() {
    for flags in FLAGS {
        for size in [[5i64, 3], [2, 2], [1, 7]] {
            check_opts(
                &format!("ResizeBilinear {flags:?} to {size:?}"),
                [rand(&[2, 3, 4, 2], 30, -2.0, 2.0)],
                F32,
                |s, v| {
                    let hw = ops::index_vector(s, &size)?;
                    let y = ops::resize_bilinear(s, &v[0], &hw, &options(flags))?;
                    ops::cast(s, &y, DType::F64)
                },
            );
        }
    }
}

#[test]
fn resize_nearest_neighbor() {
    for flags in FLAGS {
        for size in [[5i64, 3], [2, 2], [7, 9]] {
            check(
                &format!("ResizeNearestNeighbor {flags:?} to {size:?}"),
                [rand(&[1, 3, 4, 2], 31, -2.0, 2.0)],
                |s, v| {
                    let hw = ops::index_vector(s, &size)?;
                    ops::resize_nearest_neighbor(s, &v[0], &hw, &options(flags))
                },
            );
        }
    }
}

#[test]
fn resize_gradients_have_no_gradients() {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::known(&[1, 2, 2, 1])).unwrap();
    let g = ops::placeholder(&s, DType::F32, Shape::known(&[1, 3, 3, 1])).unwrap();
    let o = ResizeOptions::default();
    let dx = ops::resize_bilinear_grad(&s, &g, &x, &o).unwrap();
    let d = gradients(&s, std::slice::from_ref(&dx), &[x, g.clone()], None).unwrap();
    assert!(
        d.iter().all(Option::is_none),
        "ResizeBilinearGrad is not differentiable"
    );
    let size = ops::index_vector(&s, &[2, 2]).unwrap();
    let dn = ops::resize_nearest_neighbor_grad(&s, &g, &size, &o).unwrap();
    let e = gradients(&s, &[dn], &[g], None).unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
}

fn move_back(s: &Scope, x: &Output, f: impl Fn(&Output) -> Result<Output>) -> Result<Output> {
    // Squared, so the gradient depends on where each element went.
    let y = f(x)?;
    ops::mul(s, &y, &y)
}

#[test]
fn space_to_batch_nd_and_back() {
    check(
        "SpaceToBatchND",
        [rand(&[2, 3, 4, 1], 40, -1.0, 1.0)],
        |s, v| {
            move_back(s, &v[0], |x| {
                ops::space_to_batch_nd_by(s, x, &[2, 2], &[[1, 0], [0, 0]])
            })
        },
    );
    check(
        "SpaceToBatchND 1-D",
        [rand(&[2, 3, 2], 41, -1.0, 1.0)],
        |s, v| {
            move_back(s, &v[0], |x| {
                ops::space_to_batch_nd_by(s, x, &[3], &[[2, 1]])
            })
        },
    );
    check(
        "BatchToSpaceND",
        [rand(&[8, 2, 2, 1], 42, -1.0, 1.0)],
        |s, v| {
            move_back(s, &v[0], |x| {
                ops::batch_to_space_nd_by(s, x, &[2, 2], &[[1, 0], [0, 1]])
            })
        },
    );
}

#[test]
fn space_to_batch_four_d_and_back() {
    check(
        "SpaceToBatch",
        [rand(&[1, 3, 4, 2], 43, -1.0, 1.0)],
        |s, v| {
            move_back(s, &v[0], |x| {
                let p = ops::constant(s, actorflow::Tensor::new(&[2, 2], vec![1i32, 0, 0, 0])?)?;
                ops::space_to_batch(s, x, &p, 2)
            })
        },
    );
    check(
        "BatchToSpace",
        [rand(&[4, 2, 2, 1], 44, -1.0, 1.0)],
        |s, v| {
            move_back(s, &v[0], |x| {
                let c = ops::constant(s, actorflow::Tensor::new(&[2, 2], vec![0i32, 1, 1, 0])?)?;
                ops::batch_to_space(s, x, &c, 2)
            })
        },
    );
}

#[test]
fn space_to_depth_and_back() {
    check(
        "SpaceToDepth",
        [rand(&[1, 4, 6, 2], 45, -1.0, 1.0)],
        |s, v| move_back(s, &v[0], |x| ops::space_to_depth(s, x, 2, "NHWC")),
    );
    check(
        "DepthToSpace",
        [rand(&[2, 2, 1, 8], 46, -1.0, 1.0)],
        |s, v| move_back(s, &v[0], |x| ops::depth_to_space(s, x, 2, "NHWC")),
    );
}
