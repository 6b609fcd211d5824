//! Stateful random ops (TensorFlow's `random_ops.cc`): `RandomUniform`,
//! `RandomStandardNormal`, `TruncatedNormal`, `RandomUniformInt`,
//! `RandomShuffle` and `Multinomial`, with their
//! `seed`/`seed2` attributes, shape function and builder functions, and
//! [`get_seed`], TensorFlow's rule turning an op seed into those attributes.
//! Their kernels keep a Philox stream across steps, so every op here is stateful.

use crate::builder::{Output, Scope};
use crate::op_def::{shape_fn, InferenceContext, OpDef};
use crate::ops::FLOAT_TYPES;
use crate::{DType, OpRegistry, Result, Status};

/// Registers the random ops.
pub fn register_all_ops(r: &OpRegistry) {
    for name in ["RandomUniform", "RandomStandardNormal", "TruncatedNormal"] {
        r.register(
            OpDef::build(name)
                .input("shape: T")
                .output("output: dtype")
                .attr("seed: int = 0")
                .attr("seed2: int = 0")
                .attr(&format!("dtype: {FLOAT_TYPES}"))
                .attr("T: {int32, int64}")
                .stateful()
                .shape_fn(random_shape),
        );
    }
    r.register(
        OpDef::build("RandomUniformInt")
            .input("shape: T")
            .input("minval: Tout")
            .input("maxval: Tout")
            .output("output: Tout")
            .attr("seed: int = 0")
            .attr("seed2: int = 0")
            .attr("Tout: {int32, int64}")
            .attr("T: {int32, int64}")
            .stateful()
            .shape_fn(random_uniform_int_shape),
    );
    r.register(
        OpDef::build("Multinomial")
            .input("logits: T")
            .input("num_samples: int32")
            .output("output: output_dtype")
            .attr("seed: int = 0")
            .attr("seed2: int = 0")
            .attr("T: realnumbertype")
            .attr("output_dtype: {int32, int64} = DT_INT64")
            .stateful()
            .shape_fn(multinomial_shape),
    );
    r.register(
        OpDef::build("RandomShuffle")
            .input("value: T")
            .output("output: T")
            .attr("seed: int = 0")
            .attr("seed2: int = 0")
            .attr("T: type")
            .stateful()
            .shape_fn(shape_fn::unchanged),
    );
}

/// TensorFlow's `RandomShape`: the output shape is the value of the rank-1 `shape`
/// input when it is a constant (`-1` entries unknown), else a shape of as many
/// unknown dimensions as `shape` has elements, when that is known.
fn random_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let shape = c.input(0);
    let len = match shape.rank() {
        None => None,
        Some(1) => shape.dim(0),
        Some(r) => {
            return Err(Status::invalid_argument(format!(
                "Shape must be rank 1 but is rank {r} for shape {shape}"
            )))
        }
    };
    if let Some(t) = c.input_tensor(0) {
        let values: Option<Vec<i64>> = match t.dtype() {
            DType::I32 => t
                .as_slice::<i32>()
                .ok()
                .map(|v| v.iter().map(|&d| d as i64).collect()),
            DType::I64 => t.as_slice::<i64>().ok().map(<[i64]>::to_vec),
            _ => None,
        };
        if let Some(bad) = values.iter().flatten().find(|&&d| d < -1) {
            return Err(Status::invalid_argument(format!(
                "Invalid value in tensor used for shape: {bad}"
            )));
        }
    }
    let out = shape_fn::shape_from_tensor(c.input_tensor(0), len);
    c.set_output(0, out)
}

fn random_uniform_int_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    for (i, name) in [(1, "minval"), (2, "maxval")] {
        if let Some(r) = c.input(i).rank().filter(|&r| r != 0) {
            return Err(Status::invalid_argument(format!(
                "Shape must be rank 0 but is rank {r} for {name}"
            )));
        }
    }
    random_shape(c)
}

/// `[batch, num_samples]` from a `[batch, classes]` matrix of logits and a scalar
/// (constant: its value) number of samples.
fn multinomial_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let logits = shape_fn::with_rank(&c.input(0), 2)?;
    shape_fn::with_rank(&c.input(1), 0)?;
    let n = shape_fn::dim_from_scalar_input(c, 1)?;
    c.set_output(0, crate::Shape::from_dims(&[logits.dim(0), n]))
}

/// TensorFlow's `DEFAULT_GRAPH_SEED`: the graph-level seed `get_seed` pairs with an
/// op seed when the graph has none.
pub const DEFAULT_GRAPH_SEED: i64 = 87_654_321;

/// The `(seed, seed2)` attributes TensorFlow's `random_seed.get_seed` gives an op
/// seeded by `op_seed` in a graph without a graph-level seed (actorflow's graphs
/// have none): `(0, 0)`, a fresh random seed per kernel, for no seed, else
/// `(87654321, op_seed mod (2^31 - 1))`.
///
/// # Examples
/// ```
/// use actorflow_graph::ops::get_seed;
/// assert_eq!(get_seed(None), (0, 0));
/// assert_eq!(get_seed(Some(7)), (87_654_321, 7));
/// assert_eq!(get_seed(Some(-1)), (87_654_321, 2_147_483_646));
/// ```
pub fn get_seed(op_seed: Option<i64>) -> (i64, i64) {
    match op_seed {
        None => (0, 0),
        Some(s) => (DEFAULT_GRAPH_SEED, s.rem_euclid(i64::from(i32::MAX))),
    }
}

/// `RandomUniform`: floats uniform in `[0, 1)` of the shape held by `shape` (an
/// `int32` or `int64` vector). `seed == seed2 == 0` draws a fresh random seed.
pub fn random_uniform(
    s: &Scope,
    shape: &Output,
    dtype: DType,
    seed: i64,
    seed2: i64,
) -> Result<Output> {
    s.op("RandomUniform")
        .input(shape)
        .attr("dtype", dtype)
        .attr("seed", seed)
        .attr("seed2", seed2)
        .build1()
}

/// `RandomStandardNormal`: standard normal floats of the shape held by `shape`.
pub fn random_standard_normal(
    s: &Scope,
    shape: &Output,
    dtype: DType,
    seed: i64,
    seed2: i64,
) -> Result<Output> {
    s.op("RandomStandardNormal")
        .input(shape)
        .attr("dtype", dtype)
        .attr("seed", seed)
        .attr("seed2", seed2)
        .build1()
}

/// `TruncatedNormal`: standard normal floats redrawn until within two standard
/// deviations of zero.
pub fn truncated_normal(
    s: &Scope,
    shape: &Output,
    dtype: DType,
    seed: i64,
    seed2: i64,
) -> Result<Output> {
    s.op("TruncatedNormal")
        .input(shape)
        .attr("dtype", dtype)
        .attr("seed", seed)
        .attr("seed2", seed2)
        .build1()
}

/// `RandomUniformInt`: integers uniform in `[minval, maxval)` (scalars of the
/// output type, `int32` or `int64`).
pub fn random_uniform_int(
    s: &Scope,
    shape: &Output,
    minval: &Output,
    maxval: &Output,
    seed: i64,
    seed2: i64,
) -> Result<Output> {
    s.op("RandomUniformInt")
        .input(shape)
        .input(minval)
        .input(maxval)
        .attr("seed", seed)
        .attr("seed2", seed2)
        .build1()
}

/// `Multinomial` (`tf.random.categorical`): `num_samples` (an int32 scalar) class
/// indices per row of `logits` (`[batch, classes]`, unnormalized log
/// probabilities; `-inf` and other non-finite logits are never drawn), of
/// `output_dtype` (int32 or int64). The samples are TensorFlow's for the same
/// `seed`/`seed2` (see the kernel for the one case they can differ).
pub fn multinomial(
    s: &Scope,
    logits: &Output,
    num_samples: &Output,
    output_dtype: DType,
    seed: i64,
    seed2: i64,
) -> Result<Output> {
    s.op("Multinomial")
        .input(logits)
        .input(num_samples)
        .attr("output_dtype", output_dtype)
        .attr("seed", seed)
        .attr("seed2", seed2)
        .build1()
}

/// `RandomShuffle`: `value` with its rows (dimension 0) in a random order, a
/// fresh permutation on every run; any dtype. A scalar or an input of at most one
/// row comes back unchanged. `seed == seed2 == 0` draws a fresh random seed.
pub fn random_shuffle(s: &Scope, value: &Output, seed: i64, seed2: i64) -> Result<Output> {
    s.op("RandomShuffle")
        .input(value)
        .attr("seed", seed)
        .attr("seed2", seed2)
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ops, Shape, Tensor};

    #[test]
    fn signatures_and_shapes() {
        let s = Scope::new();
        let shape = ops::constant(&s, Tensor::vector(&[2i32, 3])).unwrap();
        let u = random_uniform(&s, &shape, DType::F16, 1, 2).unwrap();
        assert_eq!(u.dtype(), DType::F16);
        assert_eq!(u.shape(), Shape::known(&[2, 3]));
        let n = s.graph_def().find(u.op().name()).cloned().unwrap();
        assert_eq!(n.get_attr::<DType>("T").unwrap(), DType::I32);
        assert_eq!(n.get_attr::<i64>("seed2").unwrap(), 2);
        assert!(
            OpRegistry::global()
                .lookup("RandomUniform")
                .unwrap()
                .is_stateful
        );
        let shape64 = ops::constant(&s, Tensor::vector(&[4i64, -1])).unwrap();
        let z = truncated_normal(&s, &shape64, DType::F64, 0, 0).unwrap();
        assert_eq!(z.shape(), Shape::from_dims(&[Some(4), None]));
        let fed = ops::placeholder(&s, DType::I64, Shape::known(&[3])).unwrap();
        let z = random_standard_normal(&s, &fed, DType::F32, 0, 0).unwrap();
        assert_eq!(z.shape(), Shape::unknown_with_rank(3));
        // Integer dtypes are not allowed for the float ops, nor a matrix shape.
        assert!(random_uniform(&s, &shape, DType::I32, 0, 0).is_err());
        let m = ops::constant(&s, Tensor::new(&[1, 2], vec![2i32, 3]).unwrap()).unwrap();
        assert!(random_uniform(&s, &m, DType::F32, 0, 0).is_err());
        let neg = ops::constant(&s, Tensor::vector(&[-2i32])).unwrap();
        assert!(random_uniform(&s, &neg, DType::F32, 0, 0).is_err());
    }

    #[test]
    fn op_seeds_follow_get_seed() {
        assert_eq!(get_seed(None), (0, 0));
        assert_eq!(get_seed(Some(0)), (87_654_321, 0));
        // _truncate_seed: Python's seed % (2**31 - 1)
        assert_eq!(get_seed(Some(2_147_483_648)), (87_654_321, 1));
    }

    #[test]
    fn multinomial_shapes() {
        let s = Scope::new();
        let logits = ops::placeholder(&s, DType::F32, Shape::from_dims(&[Some(4), None])).unwrap();
        let n = ops::scalar(&s, 7i32).unwrap();
        let y = multinomial(&s, &logits, &n, DType::I32, 1, 2).unwrap();
        assert_eq!(y.dtype(), DType::I32);
        assert_eq!(y.shape(), Shape::known(&[4, 7]));
        let neg = ops::scalar(&s, -7i32).unwrap();
        let e = multinomial(&s, &logits, &neg, DType::I64, 0, 0).unwrap_err();
        assert!(
            e.message().contains("must be non-negative but is -7"),
            "{e}"
        );
        let v = ops::placeholder(&s, DType::F32, Shape::known(&[4])).unwrap();
        assert!(multinomial(&s, &v, &n, DType::I64, 0, 0).is_err());
        assert!(multinomial(&s, &logits, &n, DType::F32, 0, 0).is_err());
    }

    #[test]
    fn uniform_int() {
        let s = Scope::new();
        let shape = ops::constant(&s, Tensor::vector(&[5i64])).unwrap();
        let lo = ops::scalar(&s, -3i64).unwrap();
        let hi = ops::scalar(&s, 9i64).unwrap();
        let y = random_uniform_int(&s, &shape, &lo, &hi, 7, 0).unwrap();
        assert_eq!(y.dtype(), DType::I64);
        assert_eq!(y.shape(), Shape::known(&[5]));
        let v = ops::constant(&s, Tensor::vector(&[1i64])).unwrap();
        assert!(random_uniform_int(&s, &shape, &v, &hi, 0, 0).is_err());
        let f = ops::scalar(&s, 1.0f32).unwrap();
        assert!(random_uniform_int(&s, &shape, &f, &f, 0, 0).is_err());
    }

    #[test]
    fn shuffle_keeps_dtype_and_shape() {
        let s = Scope::new();
        let names =
            ops::constant(&s, Tensor::from_strings(&[3], vec!["a", "b", "c"]).unwrap()).unwrap();
        let y = random_shuffle(&s, &names, 4, 5).unwrap();
        assert_eq!(y.dtype(), DType::String);
        assert_eq!(y.shape(), Shape::known(&[3]));
        let n = s.graph_def().find(y.op().name()).cloned().unwrap();
        assert_eq!(n.op, "RandomShuffle");
        assert_eq!(n.get_attr::<DType>("T").unwrap(), DType::String);
        assert_eq!(n.get_attr::<i64>("seed").unwrap(), 4);
        assert_eq!(n.get_attr::<i64>("seed2").unwrap(), 5);
        assert!(
            OpRegistry::global()
                .lookup("RandomShuffle")
                .unwrap()
                .is_stateful
        );
        let fed = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(2)])).unwrap();
        let y = random_shuffle(&s, &fed, 0, 0).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[None, Some(2)]));
    }
}
