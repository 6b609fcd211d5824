//! Numerical checks of the TensorArray gradients and of what is built on them:
//! arrays filled and read in `while_loop`s (stack/unstack, gather/scatter,
//! split/concat), `map_fn`, `scan`, `foldl`/`foldr`, and `dynamic_rnn` with LSTM
//! and GRU cells (with and without `sequence_length`), gradients taken with
//! respect to the inputs and every weight.

use actorflow::graph::builder::{
    foldl, foldr, map_fn, scan, while_loop, FunctionalOptions, WhileOptions,
};
use actorflow::graph::ops::rnn::{dynamic_rnn, GruCell, LstmCell, RnnOptions};
use actorflow::graph::ops::{TensorArray, TensorArrayOptions};
use actorflow::{ops, DType, Output, Result, Scope, Shape, Tensor};

use crate::checker::{check, check_opts, rand, Opts};

fn total(s: &Scope, x: &Output) -> Result<Output> {
    let r = ops::rank(s, x)?;
    let axes = ops::range(s, &ops::scalar(s, 0i32)?, &r, &ops::scalar(s, 1i32)?)?;
    ops::sum(s, x, &axes, false)
}

#[test]
fn arrays_through_loops() {
    // unstack, a loop reading each row and writing sin(row) * running sum, stack
    check("TensorArray loop", [rand(&[4, 3], 1, -1.0, 1.0)], |s, v| {
        let n = ops::scalar(s, 4i32)?;
        let input = TensorArray::new(s, DType::F64, &n, &TensorArrayOptions::default())?
            .unstack(s, &v[0])?;
        let out = TensorArray::new(s, DType::F64, &n, &TensorArrayOptions::default())?;
        let zero_row = ops::fill_to(s, &[3], &ops::scalar(s, 0f64)?)?;
        let r = while_loop(
            s,
            |b, l| ops::less(b, &l[0], &n),
            |b, l| {
                let x = input.read(b, &l[0])?;
                let acc = ops::add(b, &l[1], &x)?;
                let w =
                    out.with_flow(&l[2])
                        .write(b, &l[0], &ops::mul(b, &ops::sin(b, &x)?, &acc)?)?;
                Ok(vec![
                    ops::add(b, &l[0], &ops::scalar(b, 1i32)?)?,
                    acc,
                    w.flow().clone(),
                ])
            },
            &[ops::scalar(s, 0i32)?, zero_row, out.flow().clone()],
            &WhileOptions::default(),
        )?;
        let stacked = out.with_flow(&r[2]).stack(s)?;
        ops::add(
            s,
            &ops::square(s, &stacked)?,
            &ops::sum_axes(s, &r[1], &[0], false)?,
        )
    });
    // scatter in a permutation, gather some back twice (reads of one index sum)
    check(
        "TensorArray gather/scatter",
        [rand(&[4, 2], 2, -1.0, 1.0)],
        |s, v| {
            let n = ops::scalar(s, 4i32)?;
            let opts = TensorArrayOptions {
                clear_after_read: false,
                ..Default::default()
            };
            let ta = TensorArray::new(s, DType::F64, &n, &opts)?;
            let perm = ops::constant(s, Tensor::vector(&[2i32, 0, 3, 1]))?;
            let ta = ta.scatter(s, &perm, &ops::square(s, &v[0])?)?;
            let idx = ops::constant(s, Tensor::vector(&[3i32, 1, 3]))?;
            ta.gather(s, &idx)
        },
    );
    // uneven split and concat, the element count read back
    check(
        "TensorArray split/concat",
        [rand(&[5, 2], 3, -1.0, 1.0)],
        |s, v| {
            let opts = TensorArrayOptions {
                infer_shape: false,
                ..Default::default()
            };
            let ta = TensorArray::new(s, DType::F64, &ops::scalar(s, 3i32)?, &opts)?;
            let lengths = ops::constant(s, Tensor::vector(&[2i64, 0, 3]))?;
            let ta = ta.split(s, &ops::mul(s, &v[0], &v[0])?, &lengths)?;
            let size = ops::cast(s, &ta.size(s)?, DType::F64)?;
            ops::mul(s, &ta.concat(s)?, &size)
        },
    );
}

#[test]
fn functional_ops() {
    let x = rand(&[4, 3], 4, -1.0, 1.0);
    check("map_fn", [x.clone()], |s, v| {
        let r = map_fn(
            s,
            |b, e| {
                let sq = ops::mul(b, &e[0], &e[0])?;
                Ok(vec![ops::add(
                    b,
                    &ops::sum_axes(b, &sq, &[0], false)?,
                    &ops::sin(b, &e[0])?,
                )?])
            },
            &[v[0].clone()],
            None,
            &FunctionalOptions::default(),
        )?;
        Ok(r[0].clone())
    });
    for reverse in [false, true] {
        check(&format!("scan reverse={reverse}"), [x.clone()], |s, v| {
            let r = scan(
                s,
                |b, a, e| {
                    let half = ops::scalar(b, 0.5f64)?;
                    Ok(vec![ops::add(
                        b,
                        &ops::mul(b, &a[0], &half)?,
                        &ops::mul(b, &e[0], &e[0])?,
                    )?])
                },
                &[v[0].clone()],
                None,
                reverse,
                &FunctionalOptions::default(),
            )?;
            Ok(r[0].clone())
        });
    }
    check("scan with initializer", [x.clone()], |s, v| {
        let init = [ops::scalar(s, 1f64)?];
        let r = scan(
            s,
            |b, a, e| Ok(vec![ops::mul(b, &a[0], &total(b, &e[0])?)?]),
            &[v[0].clone()],
            Some(&init),
            false,
            &FunctionalOptions::default(),
        )?;
        Ok(r[0].clone())
    });
    check("foldl", [x.clone()], |s, v| {
        let r = foldl(
            s,
            |b, a, e| Ok(vec![ops::mul(b, &a[0], &e[0])?]),
            &[v[0].clone()],
            None,
            &FunctionalOptions::default(),
        )?;
        Ok(r[0].clone())
    });
    check("foldr with initializer", [x], |s, v| {
        let init = [ops::fill_to(s, &[3], &ops::scalar(s, 1f64)?)?];
        let r = foldr(
            s,
            |b, a, e| Ok(vec![ops::sub(b, &ops::mul(b, &a[0], &a[0])?, &e[0])?]),
            &[v[0].clone()],
            Some(&init),
            &FunctionalOptions::default(),
        )?;
        Ok(r[0].clone())
    });
}

#[test]
fn recurrent_networks() {
    let opts = Opts {
        eps: 1e-6,
        tol: 1e-5,
        unknown_shapes: false,
    };
    let (batch, time, depth, units) = (2, 3, 2, 3);
    let x = rand(&[batch, time, depth], 5, -1.0, 1.0);
    for with_lengths in [false, true] {
        let rnn_opts = |s: &Scope| -> Result<RnnOptions> {
            Ok(RnnOptions {
                sequence_length: if with_lengths {
                    Some(ops::constant(s, Tensor::vector(&[3i32, 1]))?)
                } else {
                    None
                },
                ..Default::default()
            })
        };
        check_opts(
            &format!("dynamic_rnn LSTM lengths={with_lengths}"),
            [
                x.clone(),
                rand(&[depth + units, 4 * units], 6, -0.6, 0.6),
                rand(&[4 * units], 7, -0.3, 0.3),
            ],
            opts,
            |s, v| {
                let cell = LstmCell::with_weights(&v[1], &v[2], units)?;
                let (out, state) = dynamic_rnn(s, &cell, &v[0], DType::F64, &rnn_opts(s)?)?;
                let c = ops::sum_axes(s, &state[0], &[1], false)?;
                ops::add(s, &total(s, &ops::square(s, &out)?)?, &total(s, &c)?)
            },
        );
        check_opts(
            &format!("dynamic_rnn GRU lengths={with_lengths}"),
            [
                x.clone(),
                rand(&[depth + units, 2 * units], 8, -0.6, 0.6),
                rand(&[2 * units], 9, -0.3, 0.3),
                rand(&[depth + units, units], 10, -0.6, 0.6),
                rand(&[units], 11, -0.3, 0.3),
            ],
            opts,
            |s, v| {
                let cell = GruCell::with_weights(&v[1], &v[2], &v[3], &v[4], units)?;
                let (out, state) = dynamic_rnn(s, &cell, &v[0], DType::F64, &rnn_opts(s)?)?;
                ops::add(s, &total(s, &ops::square(s, &out)?)?, &total(s, &state[0])?)
            },
        );
    }
    // a shape error names what is wrong
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F64, Shape::known(&[2, 3])).unwrap();
    let k = ops::placeholder(&s, DType::F64, Shape::known(&[5, 12])).unwrap();
    let b = ops::placeholder(&s, DType::F64, Shape::known(&[12])).unwrap();
    let cell = LstmCell::with_weights(&k, &b, 3).unwrap();
    let e = dynamic_rnn(&s, &cell, &x, DType::F64, &RnnOptions::default()).unwrap_err();
    assert!(e.message().contains("rank 3 or more"), "{e}");
}
