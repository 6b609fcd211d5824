//! Shape functions of the convolution ops, with the shapes and messages
//! TensorFlow 2.21's graph mode gives for the same nodes.

use super::*;
use crate::{ops, Code, DType};

fn ph(s: &Scope, dims: &[Option<usize>]) -> Output {
    ops::placeholder(s, DType::F32, Shape::from_dims(dims)).unwrap()
}

fn k(dims: &[usize]) -> Vec<Option<usize>> {
    dims.iter().map(|&d| Some(d)).collect()
}

fn err(r: Result<Output>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    e.message().to_owned()
}

#[test]
fn conv2d_output_shapes() {
    let s = Scope::new();
    let x = ph(&s, &k(&[1, 5, 5, 2]));
    let w = ph(&s, &k(&[3, 3, 2, 4]));
    let same = ConvOptions::new(&[1, 1, 1, 1], "SAME");
    assert_eq!(
        conv2d(&s, &x, &w, &same).unwrap().shape(),
        Shape::known(&[1, 5, 5, 4])
    );
    let valid = ConvOptions::new(&[1, 2, 1, 1], "VALID");
    assert_eq!(
        conv2d(&s, &x, &w, &valid).unwrap().shape(),
        Shape::known(&[1, 2, 3, 4])
    );
    let expl = ConvOptions::explicit(&[1, 1, 1, 1], &[0, 0, 1, 2, 3, 0, 0, 0]);
    assert_eq!(
        conv2d(&s, &x, &w, &expl).unwrap().shape(),
        Shape::known(&[1, 6, 6, 4])
    );
    let dil = ConvOptions::new(&[1, 1, 1, 1], "VALID").with_dilations(&[1, 2, 1, 1]);
    assert_eq!(
        conv2d(&s, &x, &w, &dil).unwrap().shape(),
        Shape::known(&[1, 1, 3, 4])
    );
    // NCHW: [1, 2, 5, 7] with strides (1, 2) SAME.
    let xc = ph(&s, &k(&[1, 2, 5, 7]));
    let nchw = ConvOptions::new(&[1, 1, 1, 2], "SAME").with_data_format("NCHW");
    assert_eq!(
        conv2d(&s, &xc, &w, &nchw).unwrap().shape(),
        Shape::known(&[1, 4, 5, 4])
    );
    // Unknown dimensions stay unknown; SAME needs only the input size.
    let xu = ph(&s, &[None, Some(5), None, Some(2)]);
    let wu = ph(&s, &[Some(3), Some(3), None, Some(4)]);
    assert_eq!(
        conv2d(&s, &xu, &wu, &same).unwrap().shape(),
        Shape::from_dims(&[None, Some(5), None, Some(4)])
    );
    let unknown = ops::placeholder(&s, DType::F32, Shape::unknown()).unwrap();
    assert_eq!(
        conv2d(&s, &unknown, &w, &same).unwrap().shape(),
        Shape::from_dims(&[None, None, None, Some(4)])
    );
    // Grouped: input depth 4, filter depth 2.
    let xg = ph(&s, &k(&[1, 5, 5, 4]));
    assert_eq!(
        conv2d(&s, &xg, &w, &same).unwrap().shape(),
        Shape::known(&[1, 5, 5, 4])
    );
}

#[test]
fn conv2d_shape_errors_are_tensorflows() {
    let s = Scope::new();
    let x = ph(&s, &k(&[1, 5, 5, 2]));
    let w = ph(&s, &k(&[3, 3, 2, 4]));
    let o = |st: &[i64], p: &str| ConvOptions::new(st, p);
    let cases: Vec<(Result<Output>, &str)> = vec![
        (
            conv2d(&s, &ph(&s, &k(&[5, 5, 2])), &w, &o(&[1, 1, 1, 1], "VALID")),
            "Shape must be rank 4 but is rank 3",
        ),
        (
            conv2d(&s, &ph(&s, &k(&[1, 5, 5, 3])), &w, &o(&[1, 1, 1, 1], "VALID")),
            "Depth of input (3) is not a multiple of input depth of filter (2)",
        ),
        (
            conv2d(&s, &ph(&s, &k(&[1, 5, 5, 4])), &ph(&s, &k(&[3, 3, 2, 5])), &o(&[1, 1, 1, 1], "VALID")),
            "Depth of output (5) is not a multiple of the number of groups (2)",
        ),
        (
            conv2d(&s, &x, &w, &o(&[1, 1, 1], "VALID")),
            "Conv2D on data format NHWC requires the stride attribute to contain 4 values, but got: 3",
        ),
        (
            conv2d(&s, &x, &w, &o(&[1, 1, 1, 1], "VALID").with_dilations(&[1, 1, 1])),
            "Conv2D requires the dilation attribute to contain 4 values, but got: 3",
        ),
        (conv2d(&s, &x, &w, &o(&[1, 0, 1, 1], "VALID")), "Stride must be > 0, but got 0"),
        (
            conv2d(&s, &x, &w, &o(&[1, 1, 1, 1], "VALID").with_dilations(&[1, 0, 1, 1])),
            "Dilation rate must be >= 1, but got 0",
        ),
        (
            conv2d(&s, &x, &ph(&s, &k(&[7, 7, 2, 4])), &o(&[1, 1, 1, 1], "VALID")),
            "Negative dimension size caused by subtracting 7 from 5",
        ),
        (
            conv2d(&s, &x, &w, &ConvOptions::explicit(&[1, 1, 1, 1], &[0, 0, 1, 1])),
            "explicit_paddings attribute must contain 8 values, but got: 4",
        ),
        (
            conv2d(&s, &x, &w, &ConvOptions::explicit(&[1, 1, 1, 1], &[0, 0, -1, 1, 0, 0, 0, 0])),
            "All elements of explicit_paddings must be nonnegative",
        ),
        (
            conv2d(&s, &x, &w, &ConvOptions::explicit(&[1, 1, 1, 1], &[1, 0, 1, 1, 0, 0, 0, 0])),
            "Nonzero explicit padding in the batch or depth dimensions is not supported",
        ),
        (
            conv2d(&s, &x, &w, &ConvOptions { explicit_paddings: vec![0; 8], ..o(&[1, 1, 1, 1], "SAME") }),
            "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT",
        ),
    ];
    for (r, want) in cases {
        let got = err(r);
        assert!(got.contains(want), "{got}\nTensorFlow: {want}");
    }
}

#[test]
fn backprop_and_depthwise_shapes() {
    let s = Scope::new();
    let w = ph(&s, &k(&[3, 3, 2, 4]));
    let dy = ph(&s, &k(&[1, 5, 5, 4]));
    let same = ConvOptions::new(&[1, 1, 1, 1], "SAME");
    let sizes = ops::constant(&s, crate::Tensor::vector(&[1, 5, 5, 2i32])).unwrap();
    assert_eq!(
        conv2d_backprop_input(&s, &sizes, &w, &dy, &same)
            .unwrap()
            .shape(),
        Shape::known(&[1, 5, 5, 2])
    );
    let spatial = ops::constant(&s, crate::Tensor::vector(&[5, 5i32])).unwrap();
    assert_eq!(
        conv2d_transpose(&s, &dy, &w, &spatial, &same)
            .unwrap()
            .shape(),
        Shape::known(&[1, 5, 5, 2])
    );
    let three = ops::constant(&s, crate::Tensor::vector(&[1, 5, 5i32])).unwrap();
    assert!(
        err(conv2d_backprop_input(&s, &three, &w, &dy, &same)).contains(
            "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: 3"
        )
    );
    let dy3 = ph(&s, &k(&[1, 5, 5, 3]));
    assert!(err(conv2d_backprop_input(&s, &sizes, &w, &dy3, &same))
        .contains("Dimensions must be equal, but are 3 and 4"));
    let x = ph(&s, &k(&[1, 5, 5, 2]));
    let fsizes = ops::constant(&s, crate::Tensor::vector(&[3, 3, 2, 4i32])).unwrap();
    assert_eq!(
        conv2d_backprop_filter(&s, &x, &fsizes, &dy, &same)
            .unwrap()
            .shape(),
        Shape::known(&[3, 3, 2, 4])
    );
    assert!(err(conv2d_backprop_filter(&s, &x, &three, &dy, &same))
        .contains("Shape must be rank 4 but is rank 3"));

    let dw = ph(&s, &k(&[3, 3, 2, 3]));
    assert_eq!(
        depthwise_conv2d_native(&s, &x, &dw, &same).unwrap().shape(),
        Shape::known(&[1, 5, 5, 6])
    );
    let unequal = ConvOptions::new(&[1, 1, 2, 1], "SAME");
    assert_eq!(
        depthwise_conv2d_native(&s, &x, &dw, &unequal)
            .unwrap()
            .shape(),
        Shape::known(&[1, 5, 3, 6])
    );
    let x3 = ph(&s, &k(&[1, 5, 5, 3]));
    assert!(err(depthwise_conv2d_native(&s, &x3, &dw, &same))
        .contains("Dimensions must be equal, but are 3 and 2"));
    assert!(err(depthwise_conv2d_native(
        &s,
        &x,
        &dw,
        &ConvOptions::new(&[1, 1, 1], "SAME")
    ))
    .contains("DepthwiseConv2D requires the stride attribute to contain 4 values, but got: 3"));
    let dsizes = ops::constant(&s, crate::Tensor::vector(&[1, 5, 5, 2i32])).unwrap();
    let dy6 = ph(&s, &k(&[1, 5, 5, 6]));
    assert_eq!(
        depthwise_conv2d_native_backprop_input(&s, &dsizes, &dw, &dy6, &same)
            .unwrap()
            .shape(),
        Shape::known(&[1, 5, 5, 2])
    );
    let dfsizes = ops::constant(&s, crate::Tensor::vector(&[3, 3, 2, 3i32])).unwrap();
    assert_eq!(
        depthwise_conv2d_native_backprop_filter(&s, &x, &dfsizes, &dy6, &same)
            .unwrap()
            .shape(),
        Shape::known(&[3, 3, 2, 3])
    );
}
