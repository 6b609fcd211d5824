//! Gradients of the data-flow and sparse ops (DynamicPartition, DynamicStitch,
//! SparseTensorDenseMatMul under every adjoint pair, SparseToDense,
//! SparseReorder, SparseTensorDenseAdd, SparseReduceSum): checked against
//! central differences, and against TensorFlow 2.21's `tf.gradients` values
//! (`kernels/tests/fixtures/model_ops.json`, "grads", written by
//! `gen_model_ops.py`). Also hash tables and hash buckets run in a session.

use std::path::Path;

use actorflow::graph::gradients::gradients;
use actorflow::graph::AttrMap;
use actorflow::{ops, DType, Output, Result, Scope, Shape, Tensor};
use serde::Deserialize;
use serde_json::Value;

use crate::any_placement::AnyPlacement;
use crate::checker::{check, rand, t};

fn ints32(s: &Scope, dims: &[usize], v: &[i32]) -> Result<Output> {
    ops::constant(s, Tensor::new(dims, v.to_vec())?)
}

fn ints64(s: &Scope, dims: &[usize], v: &[i64]) -> Result<Output> {
    ops::constant(s, Tensor::new(dims, v.to_vec())?)
}

/// `x` scaled by a different constant per element (so each output element's
/// gradient is distinguishable), flattened.
fn weighted(s: &Scope, x: &Output, k: f64) -> Result<Output> {
    let flat = ops::reshape_to(s, x, &[-1])?;
    ops::mul(s, &flat, &ops::scalar(s, k)?)
}

#[test]
fn dynamic_partition() {
    check("DynamicPartition", [rand(&[5, 2], 1, -1.0, 1.0)], |s, v| {
        let ids = ints32(s, &[5], &[1, 0, 1, 2, 1])?;
        let parts = ops::dynamic_partition(s, &v[0], &ids, 3)?;
        let flat: Vec<Output> = parts
            .iter()
            .enumerate()
            .map(|(k, p)| weighted(s, p, k as f64 + 1.0))
            .collect::<Result<_>>()?;
        ops::concat_along(s, &flat, 0)
    });
    // Only one partition used: the others' gradients are zeros of their shape.
    check(
        "DynamicPartition one output",
        [rand(&[5, 2], 2, -1.0, 1.0)],
        |s, v| {
            let ids = ints32(s, &[5], &[1, 0, 1, 2, 1])?;
            let parts = ops::dynamic_partition(s, &v[0], &ids, 3)?;
            weighted(s, &parts[1], 2.0)
        },
    );
    check(
        "DynamicPartition element-wise",
        [rand(&[2, 3], 3, -1.0, 1.0)],
        |s, v| {
            let ids = ints32(s, &[2, 3], &[0, 1, 1, 1, 0, 0])?;
            let parts = ops::dynamic_partition(s, &v[0], &ids, 2)?;
            ops::concat_along(s, &[parts[1].clone(), weighted(s, &parts[0], -3.0)?], 0)
        },
    );
}

#[test]
fn dynamic_stitch() {
    check(
        "DynamicStitch",
        [rand(&[2, 3], 4, -1.0, 1.0), rand(&[1, 2, 3], 5, -1.0, 1.0)],
        |s, v| {
            let i0 = ints32(s, &[2], &[0, 3])?;
            let i1 = ints32(s, &[1, 2], &[1, 2])?;
            ops::dynamic_stitch(s, &[i0, i1], &[v[0].clone(), v[1].clone()])
        },
    );
}

fn sparse(s: &Scope, values: &Output, indices: &[i64], shape: &[i64]) -> Result<ops::SparseTensor> {
    let rank = shape.len();
    Ok(ops::SparseTensor {
        indices: ints64(s, &[indices.len() / rank, rank], indices)?,
        values: values.clone(),
        dense_shape: ints64(s, &[rank], shape)?,
    })
}

#[test]
fn sparse_tensor_dense_mat_mul() {
    // Unsorted, with a repeated index.
    let ix = [0, 1, 2, 3, 1, 0, 0, 1, 2, 0];
    let transposed: Vec<i64> = ix.chunks(2).flat_map(|p| [p[1], p[0]]).collect();
    for adj_a in [false, true] {
        for adj_b in [false, true] {
            let b_dims = if adj_b { [2, 4] } else { [4, 2] };
            check(
                &format!("SparseTensorDenseMatMul {adj_a} {adj_b}"),
                [rand(&[5], 6, -1.0, 1.0), rand(&b_dims, 7, -1.0, 1.0)],
                |s, v| {
                    let (idx, shape): (&[i64], [i64; 2]) = if adj_a {
                        (&transposed, [4, 3])
                    } else {
                        (&ix, [3, 4])
                    };
                    let a = sparse(s, &v[0], idx, &shape)?;
                    ops::sparse_tensor_dense_mat_mul(s, &a, &v[1], adj_a, adj_b)
                },
            );
        }
    }
}

#[test]
fn sparse_to_dense_reorder_add_and_reduce() {
    check(
        "SparseToDense",
        [rand(&[3], 8, -1.0, 1.0), t(&[], &[0.25])],
        |s, v| {
            let ix = ints64(s, &[3, 2], &[0, 1, 1, 0, 2, 3])?;
            let shape = ints64(s, &[2], &[3, 4])?;
            ops::sparse_to_dense(s, &ix, &shape, &v[0], &v[1], true)
        },
    );
    // One scalar value for every index, and vector indices.
    check(
        "SparseToDense scalar value",
        [t(&[], &[1.5]), t(&[], &[-0.5])],
        |s, v| {
            let ix = ints32(s, &[2], &[3, 0])?;
            let shape = ints32(s, &[1], &[5])?;
            ops::sparse_to_dense(s, &ix, &shape, &v[0], &v[1], false)
        },
    );
    check("SparseReorder", [rand(&[4], 9, -1.0, 1.0)], |s, v| {
        let sp = sparse(s, &v[0], &[1, 2, 0, 3, 1, 0, 0, 0], &[2, 4])?;
        let r = ops::sparse_reorder(s, &sp)?;
        weighted(s, &r.values, 1.5)
    });
    check(
        "SparseTensorDenseAdd",
        [rand(&[3], 10, -1.0, 1.0), rand(&[2, 3], 11, -1.0, 1.0)],
        |s, v| {
            let sp = sparse(s, &v[0], &[0, 1, 1, 2, 0, 1], &[2, 3])?;
            ops::sparse_tensor_dense_add(s, &sp, &v[1])
        },
    );
    let ix = [1, 2, 0, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 2, 0];
    for (axes, keep) in [
        (vec![1], false),
        (vec![0, -1], true),
        (vec![0, 1, 2], false),
        (vec![], false),
    ] {
        check(
            &format!("SparseReduceSum {axes:?} {keep}"),
            [rand(&[5], 12, -1.0, 1.0)],
            |s, v| {
                let sp = sparse(s, &v[0], &ix, &[2, 3, 2])?;
                let a = ints32(s, &[axes.len()], &axes)?;
                ops::sparse_reduce_sum(s, &sp, &a, keep)
            },
        );
    }
}

#[derive(Deserialize)]
struct Fixture {
    grads: Vec<GradCase>,
}

/// `tf.gradients` of outputs `ys` of one op, weighted by `grad_ys`, with respect to
/// the (flattened) inputs `diff`.
#[derive(Deserialize)]
struct GradCase {
    name: String,
    op: String,
    #[serde(default)]
    attrs: AttrMap,
    inputs: Vec<Value>,
    diff: Vec<usize>,
    ys: Vec<usize>,
    grad_ys: Vec<Value>,
    grads: Vec<Option<Value>>,
}

use crate::graph_fixture::tensor;

fn run_grad_case(c: &GradCase) {
    let s = Scope::new();
    let mut flat = 0;
    let (mut xs, mut feeds) = (Vec::new(), Vec::new());
    let mut node = s.op(&c.op);
    for entry in &c.inputs {
        let items: Vec<&Value> = match entry {
            Value::Array(list) => list.iter().collect(),
            one => vec![one],
        };
        let mut outs = Vec::new();
        for item in items {
            let value = tensor(item);
            let o = if c.diff.contains(&flat) {
                let p = ops::placeholder(&s, value.dtype(), Shape::known(value.dims())).unwrap();
                xs.push((flat, p.clone()));
                feeds.push((p.name(), value));
                p
            } else {
                ops::constant(&s, value).unwrap()
            };
            outs.push(o);
            flat += 1;
        }
        node = match entry {
            Value::Array(_) => node.input_list(&outs),
            _ => node.input(&outs[0]),
        };
    }
    for (k, v) in &c.attrs {
        node = node.attr(k, v.clone());
    }
    let op = node.build().unwrap_or_else(|e| panic!("{}: {e}", c.name));
    let ys: Vec<Output> = c.ys.iter().map(|&k| op.output(k).unwrap()).collect();
    let grad_ys: Vec<Output> = c
        .grad_ys
        .iter()
        .map(|g| ops::constant(&s, tensor(g)).unwrap())
        .collect();
    xs.sort_by_key(|(k, _)| c.diff.iter().position(|d| d == k));
    let x_outs: Vec<Output> = xs.into_iter().map(|(_, o)| o).collect();
    let grads = gradients(&s, &ys, &x_outs, Some(&grad_ys))
        .unwrap_or_else(|e| panic!("{}: gradients: {e}", c.name));
    let names: Vec<String> = grads
        .iter()
        .map(|g| g.as_ref().expect("a gradient").name())
        .collect();
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetch: Vec<&str> = names.iter().map(String::as_str).collect();
    let got = sess
        .run(&feeds, &fetch, &[])
        .unwrap_or_else(|e| panic!("{}: run: {e}", c.name));
    for (i, (g, w)) in got.iter().zip(&c.grads).enumerate() {
        let w = tensor(w.as_ref().expect("TensorFlow has a gradient"));
        assert_eq!(g.dims(), w.dims(), "{}: gradient {i} shape", c.name);
        let (g, w) = (g.to_f64_vec().unwrap(), w.to_f64_vec().unwrap());
        for (k, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                "{}: gradient {i}[{k}] is {a}, TensorFlow {b}",
                c.name
            );
        }
    }
}

#[test]
fn tensorflow_gradient_values() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures/model_ops.json");
    let fixture: Fixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(fixture.grads.len() >= 15);
    for c in &fixture.grads {
        assert!(c.ys.len() == c.grad_ys.len() && c.diff.len() == c.grads.len());
        run_grad_case(c);
    }
    // Integer inputs (indices, shapes) get no gradient.
    let s = Scope::new();
    let v = ops::placeholder(&s, DType::F64, Shape::known(&[2])).unwrap();
    let ix = ints64(&s, &[2, 1], &[1, 0]).unwrap();
    let sp = ops::SparseTensor {
        indices: ix.clone(),
        values: v,
        dense_shape: ints64(&s, &[1], &[2]).unwrap(),
    };
    let r = ops::sparse_reorder(&s, &sp).unwrap();
    let g = gradients(&s, &[r.values], &[ix], None).unwrap();
    assert!(g[0].is_none());
}

/// Not gradients, but the same ops' state across steps and devices: a vocabulary
/// table initialized once and looked up in later steps (missing words get the
/// default), its size, and hash buckets for the words, under every placement the
/// harness tries (the table's ops must meet the table on its device).
#[test]
fn tables_and_hash_buckets_in_a_session() {
    let s = Scope::new();
    let o = ops::TableOptions {
        shared_name: "vocab".into(),
        ..Default::default()
    };
    let table = ops::hash_table(&s, DType::String, DType::I64, &o).unwrap();
    let keys = Tensor::from_strings(&[3], vec!["cat", "dog", "emu"]).unwrap();
    let keys = ops::constant(&s, keys).unwrap();
    let vals = ops::constant(&s, Tensor::vector(&[0i64, 1, 2])).unwrap();
    let init = ops::initialize_table(&s, &table, &keys, &vals).unwrap();
    let more = ops::constant(&s, Tensor::from_strings(&[1], vec!["yak"]).unwrap()).unwrap();
    let bad_init = ops::initialize_table(
        &s,
        &table,
        &more,
        &ops::constant(&s, Tensor::vector(&[7i64])).unwrap(),
    )
    .unwrap();
    let words = ops::placeholder(&s, DType::String, Shape::from_dims(&[None])).unwrap();
    let dflt = ops::scalar(&s, -1i64).unwrap();
    let ids = ops::lookup_table_find(&s, &table, &words, &dflt).unwrap();
    let size = ops::lookup_table_size(&s, &table).unwrap();
    let buckets = ops::string_to_hash_bucket_fast(&s, &words, 100).unwrap();
    let (w, i, n, b) = (words.name(), ids.name(), size.name(), buckets.name());
    let (w, i, n, b) = (w.as_str(), i.as_str(), n.as_str(), b.as_str());
    let sess = AnyPlacement::new(&s.graph_def()).unwrap();
    let feed = Tensor::from_strings(&[3], vec!["dog", "yak", "cat"]).unwrap();
    let e = sess.run(&[(w, feed.clone())], &[i], &[]).unwrap_err();
    assert_eq!(e.code(), actorflow::Code::FailedPrecondition, "{e}");
    sess.run(&[], &[], &[init.name()]).unwrap();
    // Initializing again with as many entries is accepted (TensorFlow compares
    // only sizes); with another number it is refused.
    sess.run(&[], &[], &[init.name()]).unwrap();
    let e = sess.run(&[], &[], &[bad_init.name()]).unwrap_err();
    assert_eq!(e.code(), actorflow::Code::FailedPrecondition, "{e}");
    let out = sess.run(&[(w, feed)], &[i, n, b], &[]).unwrap();
    assert_eq!(out[0], Tensor::vector(&[1i64, -1, 0]));
    assert_eq!(out[1], Tensor::scalar(3i64));
    let want: Vec<i64> = ["dog", "yak", "cat"]
        .iter()
        .map(|w| (actorflow::kernels::cpu::hash::fingerprint64(w.as_bytes()) % 100) as i64)
        .collect();
    assert_eq!(out[2], Tensor::vector(&want));
}
