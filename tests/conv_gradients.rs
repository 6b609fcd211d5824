//! The convolution gradient functions (`graph::gradients::conv_grad`) checked two
//! ways: against central differences of the forward graph (the checker of
//! `gradients/checker.rs`, float64, known and unknown shapes), first and second
//! order; and against the values TensorFlow 2.21's `tf.gradients` gives for the
//! same graphs (`kernels/tests/fixtures/conv.json`, "gradients", written by
//! `gen_conv.py`).

mod any_placement;
#[path = "gradients/checker.rs"]
mod checker;

use std::path::PathBuf;

use actorflow::graph::gradients::gradients;
use actorflow::ops::{self, ConvOptions};
use actorflow::{Output, Result, Scope, Tensor};
use serde_json::Value;

use any_placement::AnyPlacement;
use checker::{check, rand};

/// `sum(y * dy)` for a fixed `dy` shaped like `y`: a scalar whose gradient with
/// respect to `y` is `dy`, so the checker's Jacobian stays one row.
fn weighted_sum(s: &Scope, y: &Output, seed: u64) -> Result<Output> {
    let dims: Vec<usize> = y
        .shape()
        .dims()
        .expect("a known output shape")
        .iter()
        .map(|d| d.expect("a known output dimension"))
        .collect();
    let dy = ops::constant(s, rand(&dims, seed, -1.0, 1.0))?;
    ops::sum_axes(s, &ops::mul(s, y, &dy)?, &[0, 1, 2, 3], false)
}

fn conv_cases() -> Vec<(&'static str, [usize; 4], [usize; 4], ConvOptions)> {
    vec![
        (
            "same",
            [2, 4, 5, 2],
            [3, 3, 2, 3],
            ConvOptions::new(&[1, 1, 1, 1], "SAME"),
        ),
        (
            "valid strided",
            [1, 6, 5, 2],
            [2, 3, 2, 2],
            ConvOptions::new(&[1, 2, 2, 1], "VALID"),
        ),
        (
            "explicit",
            [1, 4, 4, 2],
            [3, 2, 2, 2],
            ConvOptions::explicit(&[1, 1, 2, 1], &[0, 0, 1, 2, 0, 1, 0, 0]),
        ),
        (
            "dilated",
            [1, 6, 6, 1],
            [2, 2, 1, 2],
            ConvOptions::new(&[1, 1, 1, 1], "SAME").with_dilations(&[1, 2, 2, 1]),
        ),
    ]
}

#[test]
fn conv2d_gradients_match_numerical() {
    for (i, (name, xs, ws, o)) in conv_cases().into_iter().enumerate() {
        let seed = 10 * i as u64;
        let x = rand(&xs, seed + 1, -1.0, 1.0);
        let w = rand(&ws, seed + 2, -1.0, 1.0);
        check(&format!("Conv2D {name}"), [x.clone(), w.clone()], |s, v| {
            ops::conv2d(s, &v[0], &v[1], &o)
        });
        // Second order: the gradient ops as functions of their tensor inputs.
        let y_dims = {
            let s = Scope::new();
            let xp = ops::constant(&s, x.clone()).expect("x");
            let wp = ops::constant(&s, w.clone()).expect("w");
            let y = ops::conv2d(&s, &xp, &wp, &o).expect("conv");
            y.shape()
                .dims()
                .expect("known")
                .iter()
                .map(|d| d.expect("known"))
                .collect::<Vec<_>>()
        };
        let dy = rand(&y_dims, seed + 3, -1.0, 1.0);
        let xsizes: Vec<i32> = xs.iter().map(|&d| d as i32).collect();
        let wsizes: Vec<i32> = ws.iter().map(|&d| d as i32).collect();
        check(
            &format!("Conv2DBackpropInput {name}"),
            [w.clone(), dy.clone()],
            |s, v| {
                let sizes = ops::constant(s, Tensor::vector(&xsizes))?;
                let dx = ops::conv2d_backprop_input(s, &sizes, &v[0], &v[1], &o)?;
                weighted_sum(s, &dx, seed + 4)
            },
        );
        check(
            &format!("Conv2DBackpropFilter {name}"),
            [x.clone(), dy.clone()],
            |s, v| {
                let sizes = ops::constant(s, Tensor::vector(&wsizes))?;
                let dw = ops::conv2d_backprop_filter(s, &v[0], &sizes, &v[1], &o)?;
                weighted_sum(s, &dw, seed + 5)
            },
        );
    }
}

#[test]
fn depthwise_gradients_match_numerical() {
    let cases = [
        (
            "same",
            [2, 4, 4, 2],
            [3, 3, 2, 2],
            ConvOptions::new(&[1, 1, 1, 1], "SAME"),
        ),
        (
            "valid strided",
            [1, 5, 5, 3],
            [2, 2, 3, 1],
            ConvOptions::new(&[1, 2, 2, 1], "VALID"),
        ),
        (
            "explicit",
            [1, 4, 3, 2],
            [2, 2, 2, 2],
            ConvOptions::explicit(&[1, 1, 1, 1], &[0, 0, 1, 0, 1, 1, 0, 0]),
        ),
    ];
    for (i, (name, xs, ws, o)) in cases.into_iter().enumerate() {
        let seed = 100 + 10 * i as u64;
        let x = rand(&xs, seed + 1, -1.0, 1.0);
        let w = rand(&ws, seed + 2, -1.0, 1.0);
        check(
            &format!("DepthwiseConv2dNative {name}"),
            [x.clone(), w.clone()],
            |s, v| ops::depthwise_conv2d_native(s, &v[0], &v[1], &o),
        );
        let xsizes: Vec<i32> = xs.iter().map(|&d| d as i32).collect();
        let wsizes: Vec<i32> = ws.iter().map(|&d| d as i32).collect();
        let y_dims = {
            let s = Scope::new();
            let xp = ops::constant(&s, x.clone()).expect("x");
            let wp = ops::constant(&s, w.clone()).expect("w");
            let y = ops::depthwise_conv2d_native(&s, &xp, &wp, &o).expect("conv");
            y.shape()
                .dims()
                .expect("known")
                .iter()
                .map(|d| d.expect("known"))
                .collect::<Vec<_>>()
        };
        let dy = rand(&y_dims, seed + 3, -1.0, 1.0);
        check(
            &format!("DepthwiseConv2dNativeBackpropInput {name}"),
            [w.clone(), dy.clone()],
            |s, v| {
                let sizes = ops::constant(s, Tensor::vector(&xsizes))?;
                let dx = ops::depthwise_conv2d_native_backprop_input(s, &sizes, &v[0], &v[1], &o)?;
                weighted_sum(s, &dx, seed + 4)
            },
        );
        check(
            &format!("DepthwiseConv2dNativeBackpropFilter {name}"),
            [x.clone(), dy.clone()],
            |s, v| {
                let sizes = ops::constant(s, Tensor::vector(&wsizes))?;
                let dw = ops::depthwise_conv2d_native_backprop_filter(s, &v[0], &sizes, &v[1], &o)?;
                weighted_sum(s, &dw, seed + 5)
            },
        );
    }
}

fn fixture_tensor(v: &Value) -> Tensor {
    assert_eq!(v["dtype"], "float64");
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    let vals: Vec<f64> = v["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|x| x.as_f64().expect("float"))
        .collect();
    Tensor::new(&shape, vals).expect("fixture tensor")
}

fn options(attrs: &Value) -> ConvOptions {
    let ints = |k: &str| -> Vec<i64> {
        attrs[k]["list"]["i"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_i64().expect("int")).collect())
            .unwrap_or_default()
    };
    ConvOptions {
        strides: ints("strides"),
        padding: attrs["padding"]["s"].as_str().expect("padding").to_owned(),
        explicit_paddings: ints("explicit_paddings"),
        data_format: attrs["data_format"]["s"]
            .as_str()
            .expect("format")
            .to_owned(),
        dilations: ints("dilations"),
    }
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    let (g, w) = (
        got.to_f64_vec().expect("f64"),
        want.to_f64_vec().expect("f64"),
    );
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-9 * (1.0 + b.abs()),
            "{what}[{i}]: {a}, TensorFlow {b}"
        );
    }
}

#[test]
fn gradients_match_tensorflow() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures/conv.json");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("conv.json")).expect("json");
    let cases = doc["gradients"].as_array().expect("gradients");
    assert!(!cases.is_empty());
    for c in cases {
        let name = c["name"].as_str().expect("name");
        let o = options(&c["attrs"]);
        let depthwise = c["kind"] == "dw";
        let s = Scope::new();
        let cst = |k: &str| ops::constant(&s, fixture_tensor(&c[k])).expect("constant");
        let (x, w, dy, v, u) = (cst("x"), cst("w"), cst("dy"), cst("v"), cst("u"));
        let y = if depthwise {
            ops::depthwise_conv2d_native(&s, &x, &w, &o)
        } else {
            ops::conv2d(&s, &x, &w, &o)
        }
        .expect("forward");
        let all = |t: &Output| ops::sum_axes(&s, t, &[0, 1, 2, 3], false).expect("sum");
        let loss = all(&ops::mul(&s, &y, &dy).expect("mul"));
        let g = gradients(&s, &[loss], &[x.clone(), w.clone()], None).expect("gradients");
        let (gx, gw) = (g[0].clone().expect("dx"), g[1].clone().expect("dw"));
        let lx = all(&ops::mul(&s, &gx, &v).expect("mul"));
        let ggx = gradients(&s, &[lx], &[dy.clone(), w.clone()], None).expect("second order");
        let lw = all(&ops::mul(&s, &gw, &u).expect("mul"));
        let ggw = gradients(&s, &[lw], &[x.clone(), dy.clone()], None).expect("second order");
        let outs: Vec<Output> = [gx, gw]
            .into_iter()
            .chain(ggx.into_iter().chain(ggw).map(|t| t.expect("a gradient")))
            .collect();
        let names: Vec<String> = outs.iter().map(Output::name).collect();
        let fetch: Vec<&str> = names.iter().map(String::as_str).collect();
        let sess = AnyPlacement::new(&s.graph_def()).expect("session");
        let got = sess.run(&[], &fetch, &[]).expect("run");
        for (k, t) in ["dx", "dw", "dx_ddy", "dx_dw", "dw_dx", "dw_ddy"]
            .iter()
            .zip(&got)
        {
            assert_close(&format!("{name} {k}"), t, &fixture_tensor(&c[*k]));
        }
    }
}
