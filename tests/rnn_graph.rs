//! Recurrent models against TensorFlow 2.21's answers.
//!
//! - TensorFlow-built `tf.compat.v1` graphs run as imported: TensorArray ops used
//!   directly (in and out of `while_loop`s, dynamically sized ones included),
//!   `tf.map_fn`, `tf.scan`, `tf.foldl`/`tf.foldr`, `nn.dynamic_rnn` with an LSTM
//!   (with `sequence_length`) and a GRU, `nn.bidirectional_dynamic_rnn`, and
//!   `tf.gradients` through all of them (gradient TensorArrays inside
//!   TensorFlow's own gradient loops).
//! - The same models built with actorflow's builders (`map_fn`, `scan`, `foldl`,
//!   `foldr`, `dynamic_rnn`, `bidirectional_dynamic_rnn`, `LstmCell`, `GruCell`)
//!   over TensorFlow's weights give TensorFlow's outputs and gradients.
//!
//! `kernels/tests/fixtures/gen_rnn.py` wrote the graphs (`tensor_array_graph.pb`,
//! `rnn_graph.pb`), the weights, feeds, fetches and TensorFlow's outputs (the
//! `.json` files).

mod graph_fixture;
use graph_fixture::{tensor, GraphFixture};

use actorflow::graph::builder::{foldl, foldr, map_fn, scan, FunctionalOptions};
use actorflow::graph::gradients::gradients;
use actorflow::graph::ops::rnn::{
    bidirectional_dynamic_rnn, dynamic_rnn, GruCell, LstmCell, RnnCell, RnnOptions,
};
use actorflow::{ops, DType, Output, Result, Scope, Session, SessionOptions, Shape, Tensor};

fn close(name: &str, got: &Tensor, want: &Tensor, rtol: f64, atol: f64) {
    assert_eq!(got.dims(), want.dims(), "{name}");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= atol + rtol * b.abs(),
            "{name}[{i}]: actorflow {a}, TensorFlow {b}"
        );
    }
}

/// TensorFlow's output for fetch `name` of fixture `f`.
fn want(f: &GraphFixture, name: &str) -> Tensor {
    let i = f
        .fetches
        .iter()
        .position(|n| n == name)
        .unwrap_or_else(|| panic!("no fetch {name}"));
    tensor(&f.doc["outputs"][i])
}

fn total(s: &Scope, x: &Output) -> Result<Output> {
    let r = ops::rank(s, x)?;
    let axes = ops::range(s, &ops::scalar(s, 0i32)?, &r, &ops::scalar(s, 1i32)?)?;
    ops::sum(s, x, &axes, false)
}

#[test]
fn tensorflow_tensor_array_graph_runs_with_tensorflows_answers() {
    let f = GraphFixture::load("tensor_array_graph");
    f.check(Some((1e-5, 1e-5)));
    // Each step makes its own arrays: a second run gives the same answers.
    f.check(Some((1e-5, 1e-5)));
    let _ = f.session.close();
}

#[test]
fn tensorflow_dynamic_rnn_graph_runs_with_tensorflows_answers() {
    let f = GraphFixture::load("rnn_graph");
    let init = f.doc["init"].as_str().expect("init op");
    f.session.run(&[], &[], &[init]).expect("init");
    f.check(Some((1e-4, 1e-5)));
    let _ = f.session.close();
}

#[test]
fn functional_builders_give_tensorflows_answers() {
    let f = GraphFixture::load("tensor_array_graph");
    let x0 = f.feeds[0].1.clone();
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[4, 3])).unwrap();
    let o = FunctionalOptions::default();
    let m = map_fn(
        &s,
        |b, e| {
            let sq = ops::sum_axes(b, &ops::mul(b, &e[0], &e[0])?, &[0], false)?;
            let first = ops::strided_slice_at(
                b,
                &e[0],
                &[0],
                &[1],
                &[1],
                &ops::StridedSliceMasks {
                    shrink_axis_mask: 1,
                    ..Default::default()
                },
            )?;
            Ok(vec![ops::add(b, &sq, &first)?])
        },
        std::slice::from_ref(&x),
        None,
        &o,
    )
    .unwrap();
    let sc = scan(
        &s,
        |b, a, e| {
            Ok(vec![ops::add(
                b,
                &ops::mul(b, &a[0], &ops::scalar(b, 0.5f32)?)?,
                &e[0],
            )?])
        },
        std::slice::from_ref(&x),
        None,
        false,
        &o,
    )
    .unwrap();
    let init = [ops::scalar(&s, 1f32).unwrap()];
    let sc2 = scan(
        &s,
        |b, a, e| Ok(vec![ops::add(b, &a[0], &total(b, &e[0])?)?]),
        std::slice::from_ref(&x),
        Some(&init),
        true,
        &o,
    )
    .unwrap();
    let fl = foldl(
        &s,
        |b, a, e| Ok(vec![ops::mul(b, &a[0], &e[0])?]),
        std::slice::from_ref(&x),
        None,
        &o,
    )
    .unwrap();
    let ones = [ops::fill_to(&s, &[3], &ops::scalar(&s, 1f32).unwrap()).unwrap()];
    let fr = foldr(
        &s,
        |b, a, e| Ok(vec![ops::sub(b, &a[0], &e[0])?]),
        std::slice::from_ref(&x),
        Some(&ones),
        &o,
    )
    .unwrap();
    let outs = [&m[0], &sc[0], &sc2[0], &fl[0], &fr[0]];
    let names: Vec<String> = outs.iter().map(|o| o.name()).collect();
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let fetches: Vec<&str> = names.iter().map(String::as_str).collect();
    let got = sess.run(&[(&x.name(), x0)], &fetches, &[]).unwrap();
    for (g, w) in got.iter().zip([
        "map_fn:0",
        "scan_1:0",
        "scan_rev:0",
        "foldl_1:0",
        "foldr_1:0",
    ]) {
        close(w, g, &want(&f, w), 1e-5, 1e-5);
    }
    let _ = f.session.close();
}

#[test]
fn rnn_builders_give_tensorflows_outputs_and_gradients() {
    let f = GraphFixture::load("rnn_graph");
    let weights = &f.doc["weights"];
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::known(&[3, 5, 4])).unwrap();
    let seq = ops::placeholder(&s, DType::I32, Shape::known(&[3])).unwrap();
    let w = |name: &str| ops::constant(&s, tensor(&weights[name])).unwrap();
    let units = 6;
    let with_lengths = RnnOptions {
        sequence_length: Some(seq.clone()),
        ..Default::default()
    };
    let lstm = LstmCell::with_weights(
        &w("lstm/rnn/lstm_cell/kernel"),
        &w("lstm/rnn/lstm_cell/bias"),
        units,
    )
    .unwrap();
    let (lstm_out, lstm_state) = dynamic_rnn(&s, &lstm, &x, DType::F32, &with_lengths).unwrap();
    let gw: Vec<Output> = [
        "gru/rnn/gru_cell/gates/kernel",
        "gru/rnn/gru_cell/gates/bias",
        "gru/rnn/gru_cell/candidate/kernel",
        "gru/rnn/gru_cell/candidate/bias",
    ]
    .iter()
    .map(|n| w(n))
    .collect();
    let gru = GruCell::with_weights(&gw[0], &gw[1], &gw[2], &gw[3], units).unwrap();
    assert_eq!(gru.state_size(), vec![units]);
    let (gru_out, gru_state) =
        dynamic_rnn(&s, &gru, &x, DType::F32, &RnnOptions::default()).unwrap();
    let bw_names = [
        "bi/bidirectional_rnn/fw/lstm_cell/kernel",
        "bi/bidirectional_rnn/fw/lstm_cell/bias",
        "bi/bidirectional_rnn/bw/lstm_cell/kernel",
        "bi/bidirectional_rnn/bw/lstm_cell/bias",
    ];
    let bi: Vec<Output> = bw_names.iter().map(|n| w(n)).collect();
    let fw = LstmCell::with_weights(&bi[0], &bi[1], units).unwrap();
    let bw = LstmCell::with_weights(&bi[2], &bi[3], units).unwrap();
    let ((bi_fw, bi_bw), (bi_fs, bi_bs)) =
        bidirectional_dynamic_rnn(&s, &fw, &bw, &x, DType::F32, &with_lengths).unwrap();
    let outs = [
        ("lstm_out:0", lstm_out),
        ("lstm_c:0", lstm_state[0].clone()),
        ("lstm_h:0", lstm_state[1].clone()),
        ("gru_out:0", gru_out),
        ("gru_state:0", gru_state[0].clone()),
        ("bi_fw:0", bi_fw),
        ("bi_bw:0", bi_bw),
        ("bi_fw_h:0", bi_fs[1].clone()),
        ("bi_bw_h:0", bi_bs[1].clone()),
    ];
    let squares: Vec<Output> = outs
        .iter()
        .map(|(_, o)| total(&s, &ops::square(&s, o)?))
        .collect::<Result<_>>()
        .unwrap();
    let loss = ops::add_n(&s, &squares).unwrap();
    let mut xs = vec![x.clone()];
    let mut grad_names = vec!["grad_x:0".to_owned()];
    let wnames = [
        "lstm/rnn/lstm_cell/kernel",
        "lstm/rnn/lstm_cell/bias",
        "gru/rnn/gru_cell/gates/kernel",
        "gru/rnn/gru_cell/gates/bias",
        "gru/rnn/gru_cell/candidate/kernel",
        "gru/rnn/gru_cell/candidate/bias",
    ];
    xs.extend([lstm.kernel.clone(), lstm.bias.clone()]);
    xs.extend(gw.iter().cloned());
    xs.extend(bi.iter().cloned());
    for n in wnames.iter().chain(&bw_names) {
        grad_names.push(format!("grad_{}:0", n.replace('/', "_")));
    }
    let grads = gradients(&s, std::slice::from_ref(&loss), &xs, None).unwrap();
    let mut fetch: Vec<String> = outs.iter().map(|(_, o)| o.name()).collect();
    fetch.push(loss.name());
    fetch.extend(grads.iter().map(|g| g.as_ref().expect("a gradient").name()));
    let mut want_names: Vec<String> = outs.iter().map(|(n, _)| (*n).to_owned()).collect();
    want_names.push("loss:0".into());
    want_names.extend(grad_names);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let fetches: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let owned: Vec<(String, Tensor)> = f
        .feeds
        .iter()
        .map(|(n, t)| {
            let name = if n.starts_with('x') {
                x.name()
            } else {
                seq.name()
            };
            (name, t.clone())
        })
        .collect();
    let feeds: Vec<(&str, Tensor)> = owned.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let got = sess.run(&feeds, &fetches, &[]).unwrap();
    for (g, n) in got.iter().zip(&want_names) {
        close(n, g, &want(&f, n), 1e-4, 1e-5);
    }
    let _ = f.session.close();
}
