//! Higher-order functions over the first dimension of tensors, as TensorFlow's
//! Python builds them in graph mode (`map_fn.py`, `functional_ops.py`): a
//! [`while_loop`] that reads element `i` of each input from a
//! [`TensorArray`] (the inputs unstacked), calls the function once to build the
//! body, and writes element `i` of each result into another array, stacked after
//! the loop. Their gradients are those of the loop and the arrays.
//!
//! The function is called once, with the per-element values, and builds the body;
//! inputs are lists of tensors that share their first dimension (Python's nested
//! structures, flattened).

use crate::builder::{while_loop, Output, Scope, WhileOptions};
use crate::ops::{self, TensorArray, TensorArrayOptions};
use crate::{DType, Result, Shape, Status};

/// Options of [`map_fn`], [`scan`], [`foldl`] and [`foldr`].
#[derive(Clone, Debug)]
pub struct FunctionalOptions {
    /// Iterations that may run at once (TensorFlow's default: 10).
    pub parallel_iterations: i64,
    /// Results keep one shape across elements (checked as they are written).
    pub infer_shape: bool,
}

impl Default for FunctionalOptions {
    fn default() -> Self {
        FunctionalOptions {
            parallel_iterations: 10,
            infer_shape: true,
        }
    }
}

/// The shared first dimension of `elems`: a constant when known when building,
/// else `shape(elems[0])[0]`; and its static value.
fn leading_dim(s: &Scope, elems: &[Output]) -> Result<(Output, Option<usize>)> {
    let first = elems
        .first()
        .ok_or_else(|| Status::invalid_argument("elems must hold at least one tensor"))?;
    let mut known: Option<usize> = None;
    for e in elems {
        match e.shape().dims() {
            Some([]) => {
                return Err(Status::invalid_argument(format!(
                    "elems must be at least vectors, but {} is a scalar",
                    e.name()
                )))
            }
            Some(d) => match (known, d[0]) {
                (Some(a), Some(b)) if a != b => {
                    return Err(Status::invalid_argument(format!(
                        "elems must share their first dimension, got {a} and {b} ({})",
                        e.name()
                    )))
                }
                (None, b) => known = b,
                _ => {}
            },
            None => {}
        }
    }
    let n = match known {
        Some(n) => ops::scalar(s, n as i32)?,
        None => ops::dim_size(s, first, 0)?,
    };
    Ok((n, known))
}

/// One array per input, holding its elements (`unstack`).
fn unstacked(s: &Scope, elems: &[Output], n: &Output) -> Result<Vec<TensorArray>> {
    elems
        .iter()
        .map(|e| {
            let element_shape = match e.shape().dims() {
                Some(d) => Shape::from_dims(&d[1..]),
                None => Shape::unknown(),
            };
            let options = TensorArrayOptions {
                element_shape,
                ..Default::default()
            };
            TensorArray::new(s, e.dtype(), n, &options)?.unstack(s, e)
        })
        .collect()
}

/// Element `at` of every array.
fn read_all(s: &Scope, tas: &[TensorArray], at: &Output) -> Result<Vec<Output>> {
    tas.iter().map(|ta| ta.read(s, at)).collect()
}

/// One empty array per result.
fn accumulators(
    s: &Scope,
    dtypes: &[DType],
    shapes: &[Shape],
    n: &Output,
    options: &FunctionalOptions,
) -> Result<Vec<TensorArray>> {
    dtypes
        .iter()
        .zip(shapes)
        .map(|(&dtype, shape)| {
            let o = TensorArrayOptions {
                element_shape: if options.infer_shape {
                    shape.clone()
                } else {
                    Shape::unknown()
                },
                infer_shape: options.infer_shape,
                ..Default::default()
            };
            TensorArray::new(s, dtype, n, &o)
        })
        .collect()
}

/// Every array stacked, the first dimension set to `n` where known.
fn stacked(s: &Scope, tas: &[TensorArray], known: Option<usize>) -> Result<Vec<Output>> {
    tas.iter()
        .map(|ta| {
            let out = ta.stack(s)?;
            match (known, out.shape().dims()) {
                (Some(n), Some(d)) if !d.is_empty() => {
                    let mut dims = d.to_vec();
                    dims[0] = Some(n);
                    Ok(s.set_output_shape(out.op(), 0, Shape::from_dims(&dims))
                        .output(0)?)
                }
                _ => Ok(out),
            }
        })
        .collect()
}

fn loop_options(options: &FunctionalOptions) -> WhileOptions {
    WhileOptions {
        parallel_iterations: options.parallel_iterations,
        shape_invariants: None,
    }
}

fn check_count(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Status::invalid_argument(format!(
            "{what} returns {got} tensors, expected {want}"
        )));
    }
    Ok(())
}

/// `tf.map_fn`: `f` applied to element `i` of every input, the results stacked.
/// `out_dtypes` gives the results' dtypes when they differ from the inputs'
/// (Python's `fn_output_signature`).
pub fn map_fn(
    s: &Scope,
    f: impl FnOnce(&Scope, &[Output]) -> Result<Vec<Output>>,
    elems: &[Output],
    out_dtypes: Option<&[DType]>,
    options: &FunctionalOptions,
) -> Result<Vec<Output>> {
    let s = s.with_name_scope("map");
    let (n, known) = leading_dim(&s, elems)?;
    let elems_ta = unstacked(&s, elems, &n)?;
    let dtypes: Vec<DType> = match out_dtypes {
        Some(d) => d.to_vec(),
        None => elems.iter().map(Output::dtype).collect(),
    };
    let shapes = vec![Shape::unknown(); dtypes.len()];
    let accs = accumulators(&s, &dtypes, &shapes, &n, options)?;
    let mut vars = vec![ops::scalar(&s, 0i32)?];
    vars.extend(accs.iter().map(|t| t.flow().clone()));
    let outs = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            let i = &v[0];
            let xs = read_all(b, &elems_ta, i)?;
            let ys = f(b, &xs)?;
            check_count("map_fn's function", ys.len(), accs.len())?;
            let mut next = vec![ops::add(b, i, &ops::scalar(b, 1i32)?)?];
            for ((ta, flow), y) in accs.iter().zip(&v[1..]).zip(&ys) {
                next.push(ta.with_flow(flow).write(b, i, y)?.flow().clone());
            }
            Ok(next)
        },
        &vars,
        &loop_options(options),
    )?;
    let done: Vec<TensorArray> = accs
        .iter()
        .zip(&outs[1..])
        .map(|(ta, flow)| ta.with_flow(flow))
        .collect();
    stacked(&s, &done, known)
}

/// `tf.scan`: the running accumulation `a = f(a, x_i)` over the elements (last
/// first when `reverse`), every intermediate `a` stacked. Without `initializer`
/// the first element (the last, reversed) starts the accumulation and is its first
/// result.
pub fn scan(
    s: &Scope,
    f: impl FnOnce(&Scope, &[Output], &[Output]) -> Result<Vec<Output>>,
    elems: &[Output],
    initializer: Option<&[Output]>,
    reverse: bool,
    options: &FunctionalOptions,
) -> Result<Vec<Output>> {
    let s = s.with_name_scope("scan");
    let (n, known) = leading_dim(&s, elems)?;
    let elems_ta = unstacked(&s, elems, &n)?;
    let one = ops::scalar(&s, 1i32)?;
    let last = ops::sub(&s, &n, &one)?;
    // Without an initializer the first element (the last, reversed) starts the
    // accumulation and is its first result.
    let edge = if reverse {
        last.clone()
    } else {
        ops::scalar(&s, 0i32)?
    };
    let (init, start) = match initializer {
        Some(a) => (a.to_vec(), 0),
        None => (read_all(&s, &elems_ta, &edge)?, 1),
    };
    let dtypes: Vec<DType> = init.iter().map(Output::dtype).collect();
    let shapes: Vec<Shape> = init.iter().map(Output::shape).collect();
    let mut accs = accumulators(&s, &dtypes, &shapes, &n, options)?;
    if initializer.is_none() {
        accs = accs
            .iter()
            .zip(&init)
            .map(|(ta, a)| ta.write(&s, &edge, a))
            .collect::<Result<_>>()?;
    }
    let first = if reverse {
        ops::sub(&s, &last, &ops::scalar(&s, start)?)?
    } else {
        ops::scalar(&s, start)?
    };
    let k = init.len();
    let mut vars = vec![first];
    vars.extend(init.iter().cloned());
    vars.extend(accs.iter().map(|t| t.flow().clone()));
    let outs = while_loop(
        &s,
        |b, v| {
            if reverse {
                ops::greater_equal(b, &v[0], &ops::scalar(b, 0i32)?)
            } else {
                ops::less(b, &v[0], &n)
            }
        },
        |b, v| {
            let i = &v[0];
            let xs = read_all(b, &elems_ta, i)?;
            let a = f(b, &v[1..=k], &xs)?;
            check_count("scan's function", a.len(), k)?;
            let step = ops::scalar(b, if reverse { -1i32 } else { 1i32 })?;
            let mut next = vec![ops::add(b, i, &step)?];
            next.extend(a.iter().cloned());
            for ((ta, flow), y) in accs.iter().zip(&v[1 + k..]).zip(&a) {
                next.push(ta.with_flow(flow).write(b, i, y)?.flow().clone());
            }
            Ok(next)
        },
        &vars,
        &loop_options(options),
    )?;
    let done: Vec<TensorArray> = accs
        .iter()
        .zip(&outs[1 + k..])
        .map(|(ta, flow)| ta.with_flow(flow))
        .collect();
    stacked(&s, &done, known)
}

/// `tf.foldl`: `a = f(a, x_i)` over the elements, first to last; the final `a`.
/// Without `initializer` the first element starts it.
pub fn foldl(
    s: &Scope,
    f: impl FnOnce(&Scope, &[Output], &[Output]) -> Result<Vec<Output>>,
    elems: &[Output],
    initializer: Option<&[Output]>,
    options: &FunctionalOptions,
) -> Result<Vec<Output>> {
    fold(s, "foldl", f, elems, initializer, false, options)
}

/// `tf.foldr`: `a = f(a, x_i)` over the elements, last to first; the final `a`.
/// Without `initializer` the last element starts it.
pub fn foldr(
    s: &Scope,
    f: impl FnOnce(&Scope, &[Output], &[Output]) -> Result<Vec<Output>>,
    elems: &[Output],
    initializer: Option<&[Output]>,
    options: &FunctionalOptions,
) -> Result<Vec<Output>> {
    fold(s, "foldr", f, elems, initializer, true, options)
}

fn fold(
    s: &Scope,
    name: &str,
    f: impl FnOnce(&Scope, &[Output], &[Output]) -> Result<Vec<Output>>,
    elems: &[Output],
    initializer: Option<&[Output]>,
    reverse: bool,
    options: &FunctionalOptions,
) -> Result<Vec<Output>> {
    let s = s.with_name_scope(name);
    let (n, _) = leading_dim(&s, elems)?;
    let elems_ta = unstacked(&s, elems, &n)?;
    // foldl counts i up from its first unread element; foldr counts i down to 0,
    // reading element i - 1.
    let (init, first) = match (initializer, reverse) {
        (Some(a), false) => (a.to_vec(), ops::scalar(&s, 0i32)?),
        (Some(a), true) => (a.to_vec(), n.clone()),
        (None, false) => {
            let zero = ops::scalar(&s, 0i32)?;
            let a = read_all(&s, &elems_ta, &zero)?;
            (a, ops::scalar(&s, 1i32)?)
        }
        (None, true) => {
            let last = ops::sub(&s, &n, &ops::scalar(&s, 1i32)?)?;
            let a = read_all(&s, &elems_ta, &last)?;
            (a, last)
        }
    };
    let k = init.len();
    let mut vars = vec![first];
    vars.extend(init);
    let outs = while_loop(
        &s,
        |b, v| {
            if reverse {
                ops::greater(b, &v[0], &ops::scalar(b, 0i32)?)
            } else {
                ops::less(b, &v[0], &n)
            }
        },
        |b, v| {
            let one = ops::scalar(b, 1i32)?;
            let (at, next_i) = if reverse {
                let p = ops::sub(b, &v[0], &one)?;
                (p.clone(), p)
            } else {
                (v[0].clone(), ops::add(b, &v[0], &one)?)
            };
            let xs = read_all(b, &elems_ta, &at)?;
            let a = f(b, &v[1..], &xs)?;
            check_count(&format!("{name}'s function"), a.len(), k)?;
            let mut next = vec![next_i];
            next.extend(a);
            Ok(next)
        },
        &vars,
        &loop_options(options),
    )?;
    Ok(outs[1..].to_vec())
}
