//! The `tf.Example` parsing ops (TensorFlow's `parsing_ops.cc`): `ParseExample`,
//! `ParseExampleV2` and `ParseSingleExample`, which turn serialized
//! `tensorflow.Example` protos into sparse, dense and ragged tensors, as
//! `tf.io.parse_example` builds them for input pipelines and TensorFlow Serving's
//! classify and regress signatures.
//!
//! The three ops share one set of attributes, validated once by
//! [`ParseExampleAttrs`] (TensorFlow's `ParseExampleAttrs` and
//! `ParseSingleExampleAttrs`) for both the shape functions and the kernels:
//!
//! - a dense feature's shape has a known rank and known inner dimensions; an unknown
//!   first dimension (`[-1, …]`, `FixedLenSequenceFeature`) makes it *variable
//!   length*, padded per batch to its longest example with the (one-element)
//!   default;
//! - an empty dense default makes the feature required;
//! - the counts of keys, types and shapes agree.
//!
//! Outputs come in argument order: `num_sparse` sparse indices, then the sparse
//! values, the sparse dense shapes, the dense values and (V2) the ragged values and
//! row splits. [`parse_example`], [`parse_example_v2`] and [`parse_single_example`]
//! build the nodes from an [`ExampleSpec`] and return them as [`ParsedFeatures`].
//!
//! ```
//! use actorflow_graph::builder::Scope;
//! use actorflow_graph::ops::{self, DenseFeature, ExampleSpec, SparseFeature};
//! use actorflow_graph::{DType, Shape, Tensor};
//! let s = Scope::new();
//! let serialized = ops::placeholder(&s, DType::String, Shape::known(&[8])).unwrap();
//! let spec = ExampleSpec {
//!     sparse: vec![SparseFeature::new("tags", DType::String)],
//!     dense: vec![DenseFeature::new(
//!         "age",
//!         Shape::known(&[1]),
//!         ops::constant(&s, Tensor::vector(&[0i64])).unwrap(),
//!     )],
//!     ragged: vec![],
//! };
//! let parsed = ops::parse_example_v2(&s, &serialized, None, &spec).unwrap();
//! assert_eq!(parsed.dense_values[0].shape(), Shape::known(&[8, 1]));
//! assert_eq!(parsed.sparse_indices[0].shape(), Shape::from_dims(&[None, Some(2)]));
//! ```

use crate::builder::{Output, Scope};
use crate::op_def::{InferenceContext, OpDef};
use crate::{DType, NodeDef, OpRegistry, Result, Shape, Status, Tensor};

/// Registers `ParseExample`, `ParseExampleV2` and `ParseSingleExample`.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("ParseExample")
            .input("serialized: string")
            .input("names: string")
            .input("sparse_keys: Nsparse * string")
            .input("dense_keys: Ndense * string")
            .input("dense_defaults: Tdense")
            .output("sparse_indices: Nsparse * int64")
            .output("sparse_values: sparse_types")
            .output("sparse_shapes: Nsparse * int64")
            .output("dense_values: Tdense")
            .attr("Nsparse: int >= 0")
            .attr("Ndense: int >= 0")
            .attr("sparse_types: list({float, int64, string}) >= 0")
            .attr("Tdense: list({float, int64, string}) >= 0")
            .attr("dense_shapes: list(shape) >= 0")
            .shape_fn(parse_example_shape),
    );
    r.register(
        OpDef::build("ParseExampleV2")
            .input("serialized: string")
            .input("names: string")
            .input("sparse_keys: string")
            .input("dense_keys: string")
            .input("ragged_keys: string")
            .input("dense_defaults: Tdense")
            .output("sparse_indices: num_sparse * int64")
            .output("sparse_values: sparse_types")
            .output("sparse_shapes: num_sparse * int64")
            .output("dense_values: Tdense")
            .output("ragged_values: ragged_value_types")
            .output("ragged_row_splits: ragged_split_types")
            .attr("Tdense: list({float, int64, string}) >= 0")
            .attr("num_sparse: int >= 0")
            .attr("sparse_types: list({float, int64, string}) >= 0")
            .attr("ragged_value_types: list({float, int64, string}) >= 0")
            .attr("ragged_split_types: list({int32, int64}) >= 0")
            .attr("dense_shapes: list(shape) >= 0")
            .shape_fn(parse_example_shape),
    );
    r.register(
        OpDef::build("ParseSingleExample")
            .input("serialized: string")
            .input("dense_defaults: Tdense")
            .output("sparse_indices: num_sparse * int64")
            .output("sparse_values: sparse_types")
            .output("sparse_shapes: num_sparse * int64")
            .output("dense_values: Tdense")
            .attr("num_sparse: int >= 0")
            .attr("sparse_keys: list(string) >= 0")
            .attr("dense_keys: list(string) >= 0")
            .attr("sparse_types: list({float, int64, string}) >= 0")
            .attr("Tdense: list({float, int64, string}) >= 0")
            .attr("dense_shapes: list(shape) >= 0")
            .shape_fn(parse_example_shape),
    );
}

/// Which of the three ops a node is; their inputs and attributes differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExampleOp {
    /// `ParseExample`: a vector of examples, keys as lists of scalars.
    V1,
    /// `ParseExampleV2`: a scalar or vector of examples, keys as vectors, ragged
    /// features.
    V2,
    /// `ParseSingleExample`: one example, keys as attributes.
    Single,
}

impl ExampleOp {
    /// The op of `name`, if it is one of the three.
    pub fn of(name: &str) -> Option<ExampleOp> {
        match name {
            "ParseExample" => Some(ExampleOp::V1),
            "ParseExampleV2" => Some(ExampleOp::V2),
            "ParseSingleExample" => Some(ExampleOp::Single),
            _ => None,
        }
    }
}

/// The validated attributes of a `Parse*Example` node (TensorFlow's
/// `ParseExampleAttrs::Init` and `ParseSingleExampleAttrs::Init`, same checks in
/// the same order, same messages). Invariant: the per-dense vectors all have
/// `num_dense` entries, the sparse ones `num_sparse`, the ragged ones `num_ragged`,
/// and every dense shape has a known rank and known inner dimensions.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseExampleAttrs {
    /// Which op.
    pub op: ExampleOp,
    /// The number of sparse features.
    pub num_sparse: usize,
    /// The number of dense features.
    pub num_dense: usize,
    /// The number of ragged features (V2 only; 0 otherwise).
    pub num_ragged: usize,
    /// The value dtype of each sparse feature.
    pub sparse_types: Vec<DType>,
    /// The dtype of each dense feature.
    pub dense_types: Vec<DType>,
    /// The value dtype of each ragged feature.
    pub ragged_value_types: Vec<DType>,
    /// The row-splits dtype (int32 or int64) of each ragged feature.
    pub ragged_split_types: Vec<DType>,
    /// The shape of each dense feature in one example (`[-1, …]`: variable length).
    pub dense_shapes: Vec<Shape>,
    /// Whether each dense feature's first dimension is unknown.
    pub variable_length: Vec<bool>,
    /// The number of values in one row of each dense feature: all of its shape's
    /// elements, or for a variable-length one those of its inner dimensions.
    pub elements_per_stride: Vec<usize>,
    /// `ParseSingleExample`'s sparse keys (empty for the others, whose keys are inputs).
    pub sparse_keys: Vec<String>,
    /// `ParseSingleExample`'s dense keys (empty for the others).
    pub dense_keys: Vec<String>,
}

impl ParseExampleAttrs {
    /// Reads and checks the attributes of `node`, a `ParseExample`,
    /// `ParseExampleV2` or `ParseSingleExample` (attribute defaults filled in).
    pub fn from_node(node: &NodeDef) -> Result<ParseExampleAttrs> {
        let op = ExampleOp::of(&node.op).ok_or_else(|| {
            Status::invalid_argument(format!("{} is not a Parse*Example op", node.op))
        })?;
        let count = |name: &str| -> Result<usize> {
            let n: i64 = node.get_attr(name)?;
            usize::try_from(n).map_err(|_| {
                Status::invalid_argument(format!("attr '{name}' must be non-negative, got {n}"))
            })
        };
        if op == ExampleOp::Single {
            let sparse_keys: Vec<String> = node.get_attr("sparse_keys")?;
            let sparse_types: Vec<DType> = node.get_attr("sparse_types")?;
            let dense_keys: Vec<String> = node.get_attr("dense_keys")?;
            let dense_types: Vec<DType> = node.get_attr("Tdense")?;
            let dense_shapes: Vec<Shape> = node.get_attr("dense_shapes")?;
            let num_sparse = count("num_sparse")?;
            if num_sparse != sparse_keys.len() || num_sparse != sparse_types.len() {
                return Err(Status::invalid_argument(format!(
                    "num_sparse ({num_sparse}) must match the size of sparse_keys ({}) and sparse_types ({})",
                    sparse_keys.len(),
                    sparse_types.len()
                )));
            }
            let (variable_length, elements_per_stride) = dense_strides(&dense_shapes)?;
            if dense_keys.len() != dense_types.len() {
                return Err(Status::invalid_argument(
                    "len(dense_keys) != len(dense_types)",
                ));
            }
            if dense_keys.len() != dense_shapes.len() {
                return Err(Status::invalid_argument(
                    "len(dense_keys) != len(dense_shapes)",
                ));
            }
            return Ok(ParseExampleAttrs {
                op,
                num_sparse,
                num_dense: dense_keys.len(),
                num_ragged: 0,
                sparse_types,
                dense_types,
                ragged_value_types: vec![],
                ragged_split_types: vec![],
                dense_shapes,
                variable_length,
                elements_per_stride,
                sparse_keys,
                dense_keys,
            });
        }
        let sparse_types: Vec<DType> = node.get_attr("sparse_types")?;
        let dense_types: Vec<DType> = node.get_attr("Tdense")?;
        let dense_shapes: Vec<Shape> = node.get_attr("dense_shapes")?;
        let (variable_length, elements_per_stride) = dense_strides(&dense_shapes)?;
        let (num_sparse, num_dense, ragged_value_types, ragged_split_types) = match op {
            ExampleOp::V1 => (count("Nsparse")?, count("Ndense")?, vec![], vec![]),
            _ => {
                let values: Vec<DType> = node.get_attr("ragged_value_types")?;
                let num_sparse = count("num_sparse")?;
                let splits: Vec<DType> = node.get_attr("ragged_split_types")?;
                (num_sparse, dense_types.len(), values, splits)
            }
        };
        let num_ragged = ragged_value_types.len();
        let problem = if num_sparse != sparse_types.len() {
            Some("len(sparse_keys) != len(sparse_types)")
        } else if num_dense != dense_types.len() {
            Some("len(dense_keys) != len(dense_types)")
        } else if num_dense != dense_shapes.len() {
            Some("len(dense_keys) != len(dense_shapes)")
        } else if num_ragged != ragged_split_types.len() {
            Some("len(ragged_keys) != len(ragged_split_types)")
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(Status::invalid_argument(p));
        }
        for &t in dense_types
            .iter()
            .chain(&sparse_types)
            .chain(&ragged_value_types)
        {
            check_value_type(t)?;
        }
        if let Some(t) = ragged_split_types
            .iter()
            .find(|t| !matches!(t, DType::I32 | DType::I64))
        {
            return Err(Status::invalid_argument(format!(
                "Invalid ragged_split_type: {}",
                tf_type_name(*t)
            )));
        }
        Ok(ParseExampleAttrs {
            op,
            num_sparse,
            num_dense,
            num_ragged,
            sparse_types,
            dense_types,
            ragged_value_types,
            ragged_split_types,
            dense_shapes,
            variable_length,
            elements_per_stride,
            sparse_keys: vec![],
            dense_keys: vec![],
        })
    }
}

/// TensorFlow's name of a dtype in messages (`DataTypeString`): `float`, `int64`,
/// `string`, `int32`, … .
pub fn tf_type_name(t: DType) -> &'static str {
    match t {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I64 => "int64",
        DType::I32 => "int32",
        DType::String => "string",
        other => other.name(),
    }
}

fn check_value_type(t: DType) -> Result<()> {
    match t {
        DType::F32 | DType::I64 | DType::String => Ok(()),
        other => Err(Status::invalid_argument(format!(
            "ParseExample: unsupported type {}",
            tf_type_name(other)
        ))),
    }
}

/// TensorFlow's `GetDenseShapes`: whether each dense shape is variable length, and
/// its elements per stride; `InvalidArgument` for an unknown rank or inner dimension.
fn dense_strides(shapes: &[Shape]) -> Result<(Vec<bool>, Vec<usize>)> {
    let mut variable = Vec::with_capacity(shapes.len());
    let mut strides = Vec::with_capacity(shapes.len());
    for (i, s) in shapes.iter().enumerate() {
        let dims = match s.dims() {
            Some(d) if d.iter().skip(1).all(Option::is_some) => d,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "dense_shapes[{i}] has unknown rank or unknown inner dimensions: {s}"
                )))
            }
        };
        let var = dims.first().is_some_and(Option::is_none);
        let mut stride = 1usize;
        for d in dims.iter().skip(usize::from(var)).flatten() {
            stride = stride.checked_mul(*d).ok_or_else(|| {
                Status::invalid_argument(format!("dense_shapes[{i}] {s} has too many elements"))
            })?;
        }
        variable.push(var);
        strides.push(stride);
    }
    Ok((variable, strides))
}

/// TensorFlow's `WithRankAtMost`.
fn with_rank_at_most(s: &Shape, rank: usize, what: &str) -> Result<Shape> {
    match s.rank() {
        Some(r) if r > rank => Err(Status::invalid_argument(format!(
            "Shape must be at most rank {rank} but is rank {r} for {what}"
        ))),
        _ => Ok(s.clone()),
    }
}

/// The shapes of the three ops (`AddSparseOutputShapes`, `AddDenseOutputShapes`,
/// `AddRaggedOutputShapes` over the checked attributes).
fn parse_example_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let a = ParseExampleAttrs::from_node(c.node())?;
    let input = match a.op {
        ExampleOp::V1 => {
            let input = crate::ops::array::with_rank(&c.input(0), 1, "serialized")?;
            crate::ops::array::with_rank(&c.input(1), 1, "names")?;
            input
        }
        ExampleOp::V2 => {
            let input = with_rank_at_most(&c.input(0), 1, "serialized")?;
            with_rank_at_most(&c.input(1), 1, "names")?;
            input
        }
        ExampleOp::Single => crate::ops::array::with_rank(&c.input(0), 0, "serialized")?,
    };
    let mut out = 0;
    let mut set = |c: &mut InferenceContext<'_>, s: Shape| {
        out += 1;
        c.set_output(out - 1, s)
    };
    let sparse_rank = input.rank().map(|r| r + 1);
    for _ in 0..a.num_sparse {
        set(c, Shape::from_dims(&[None, sparse_rank]))?;
    }
    for _ in 0..a.num_sparse {
        set(c, Shape::from_dims(&[None]))?;
    }
    for _ in 0..a.num_sparse {
        set(c, Shape::from_dims(&[sparse_rank]))?;
    }
    for dense in &a.dense_shapes {
        let s = match (input.dims(), dense.dims()) {
            (Some(i), Some(d)) => Shape::from_dims(&[i, d].concat()),
            _ => Shape::unknown(),
        };
        set(c, s)?;
    }
    let num_splits = match input.dims() {
        Some([n]) => n.map(|n| n + 1),
        _ => None,
    };
    for _ in 0..a.num_ragged {
        set(c, Shape::from_dims(&[None]))?;
    }
    for _ in 0..a.num_ragged {
        set(c, Shape::from_dims(&[num_splits]))?;
    }
    Ok(())
}

/// A sparse feature (`tf.io.VarLenFeature`): its key and value dtype.
#[derive(Clone, Debug)]
pub struct SparseFeature {
    /// The feature's key in the examples.
    pub key: String,
    /// float, int64 or string.
    pub dtype: DType,
}

impl SparseFeature {
    /// A sparse feature of `key` with values of `dtype`.
    pub fn new(key: &str, dtype: DType) -> SparseFeature {
        SparseFeature {
            key: key.to_owned(),
            dtype,
        }
    }
}

/// A dense feature (`tf.io.FixedLenFeature`, or `FixedLenSequenceFeature` with a
/// first dimension of `None`): its key, shape in one example, and default whose
/// dtype is the feature's.
#[derive(Clone, Debug)]
pub struct DenseFeature {
    /// The feature's key in the examples.
    pub key: String,
    /// Its shape in one example; an unknown first dimension makes it variable length.
    pub shape: Shape,
    /// The value of a missing feature, of its shape; empty: the feature is required.
    /// For a variable-length feature, one element: the padding.
    pub default: Output,
}

impl DenseFeature {
    /// A dense feature of `key`, `shape` and `default`.
    pub fn new(key: &str, shape: Shape, default: Output) -> DenseFeature {
        DenseFeature {
            key: key.to_owned(),
            shape,
            default,
        }
    }
}

/// A ragged feature (`tf.io.RaggedFeature` without partitions; `ParseExampleV2`
/// only): its key, value dtype and row-splits dtype.
#[derive(Clone, Debug)]
pub struct RaggedFeature {
    /// The feature's key in the examples.
    pub key: String,
    /// float, int64 or string.
    pub dtype: DType,
    /// int32 or int64.
    pub splits_dtype: DType,
}

impl RaggedFeature {
    /// A ragged feature of `key` with values of `dtype` and row splits of `splits_dtype`.
    pub fn new(key: &str, dtype: DType, splits_dtype: DType) -> RaggedFeature {
        RaggedFeature {
            key: key.to_owned(),
            dtype,
            splits_dtype,
        }
    }
}

/// The features to parse out of each example.
#[derive(Clone, Debug, Default)]
pub struct ExampleSpec {
    /// Sparse features, in output order.
    pub sparse: Vec<SparseFeature>,
    /// Dense features, in output order.
    pub dense: Vec<DenseFeature>,
    /// Ragged features, in output order (`ParseExampleV2` only).
    pub ragged: Vec<RaggedFeature>,
}

impl ExampleSpec {
    fn sparse_types(&self) -> Vec<DType> {
        self.sparse.iter().map(|f| f.dtype).collect()
    }

    fn dense_shapes(&self) -> Vec<Shape> {
        self.dense.iter().map(|f| f.shape.clone()).collect()
    }

    fn dense_defaults(&self) -> Vec<Output> {
        self.dense.iter().map(|f| f.default.clone()).collect()
    }
}

/// The outputs of a `Parse*Example` node, by argument. Sparse feature `i` is the
/// `SparseTensor` (`sparse_indices[i]`, `sparse_values[i]`, `sparse_shapes[i]`);
/// ragged feature `i` is (`ragged_values[i]`, `ragged_row_splits[i]`).
#[derive(Clone, Debug, Default)]
pub struct ParsedFeatures {
    /// `[n, rank]` int64 indices of each sparse feature.
    pub sparse_indices: Vec<Output>,
    /// `[n]` values of each sparse feature.
    pub sparse_values: Vec<Output>,
    /// `[rank]` int64 dense shape of each sparse feature.
    pub sparse_shapes: Vec<Output>,
    /// Each dense feature, batch dimension first.
    pub dense_values: Vec<Output>,
    /// `[n]` values of each ragged feature.
    pub ragged_values: Vec<Output>,
    /// `[batch + 1]` row splits of each ragged feature.
    pub ragged_row_splits: Vec<Output>,
}

impl ParsedFeatures {
    fn split(outputs: Vec<Output>, ns: usize, nd: usize, nr: usize) -> Result<ParsedFeatures> {
        if outputs.len() != 3 * ns + nd + 2 * nr {
            return Err(Status::internal(format!(
                "a Parse*Example node has {} outputs, expected {}",
                outputs.len(),
                3 * ns + nd + 2 * nr
            )));
        }
        let mut it = outputs.into_iter();
        let mut take = |n: usize| it.by_ref().take(n).collect::<Vec<_>>();
        Ok(ParsedFeatures {
            sparse_indices: take(ns),
            sparse_values: take(ns),
            sparse_shapes: take(ns),
            dense_values: take(nd),
            ragged_values: take(nr),
            ragged_row_splits: take(nr),
        })
    }
}

fn empty_names(s: &Scope) -> Result<Output> {
    crate::ops::constant(s, Tensor::from_strings(&[0], Vec::<&str>::new())?)
}

/// `ParseExample` (TensorFlow 1's op, as TF1-era SavedModels hold it): parses the
/// vector `serialized` of `tf.Example` protos. `names` (a vector like `serialized`,
/// or `None`) only name examples in errors. Ragged features are refused (V2 only).
pub fn parse_example(
    s: &Scope,
    serialized: &Output,
    names: Option<&Output>,
    spec: &ExampleSpec,
) -> Result<ParsedFeatures> {
    if !spec.ragged.is_empty() {
        return Err(Status::invalid_argument(
            "ParseExample has no ragged features; use ParseExampleV2",
        ));
    }
    let names = match names {
        Some(n) => n.clone(),
        None => empty_names(s)?,
    };
    let key = |k: &str| crate::ops::constant(s, Tensor::string_scalar(k.to_owned()));
    let sparse_keys = spec
        .sparse
        .iter()
        .map(|f| key(&f.key))
        .collect::<Result<Vec<_>>>()?;
    let dense_keys = spec
        .dense
        .iter()
        .map(|f| key(&f.key))
        .collect::<Result<Vec<_>>>()?;
    let op = s
        .op("ParseExample")
        .input(serialized)
        .input(&names)
        .input_list(&sparse_keys)
        .input_list(&dense_keys)
        .input_list(&spec.dense_defaults())
        .attr("sparse_types", spec.sparse_types())
        .attr("dense_shapes", spec.dense_shapes())
        .build()?;
    ParsedFeatures::split(op.outputs(), spec.sparse.len(), spec.dense.len(), 0)
}

/// `ParseExampleV2` (what `tf.io.parse_example` builds): parses `serialized`, a
/// vector of `tf.Example` protos (outputs batched) or a scalar (outputs of one
/// example). `names` (the shape of `serialized`, or `None`) only name examples in
/// errors.
pub fn parse_example_v2(
    s: &Scope,
    serialized: &Output,
    names: Option<&Output>,
    spec: &ExampleSpec,
) -> Result<ParsedFeatures> {
    let names = match names {
        Some(n) => n.clone(),
        None => empty_names(s)?,
    };
    let keys = |ks: Vec<String>| {
        let n = ks.len();
        crate::ops::constant(s, Tensor::from_strings(&[n], ks)?)
    };
    let sparse_keys = keys(spec.sparse.iter().map(|f| f.key.clone()).collect())?;
    let dense_keys = keys(spec.dense.iter().map(|f| f.key.clone()).collect())?;
    let ragged_keys = keys(spec.ragged.iter().map(|f| f.key.clone()).collect())?;
    let op = s
        .op("ParseExampleV2")
        .input(serialized)
        .input(&names)
        .input(&sparse_keys)
        .input(&dense_keys)
        .input(&ragged_keys)
        .input_list(&spec.dense_defaults())
        .attr("num_sparse", spec.sparse.len())
        .attr("sparse_types", spec.sparse_types())
        .attr(
            "ragged_value_types",
            spec.ragged.iter().map(|f| f.dtype).collect::<Vec<_>>(),
        )
        .attr(
            "ragged_split_types",
            spec.ragged
                .iter()
                .map(|f| f.splits_dtype)
                .collect::<Vec<_>>(),
        )
        .attr("dense_shapes", spec.dense_shapes())
        .build()?;
    ParsedFeatures::split(
        op.outputs(),
        spec.sparse.len(),
        spec.dense.len(),
        spec.ragged.len(),
    )
}

/// `ParseSingleExample`: parses the scalar `serialized`; sparse features are
/// rank 1, dense ones have their own shape. Ragged features are refused (V2 only).
pub fn parse_single_example(
    s: &Scope,
    serialized: &Output,
    spec: &ExampleSpec,
) -> Result<ParsedFeatures> {
    if !spec.ragged.is_empty() {
        return Err(Status::invalid_argument(
            "ParseSingleExample has no ragged features; use ParseExampleV2",
        ));
    }
    let op = s
        .op("ParseSingleExample")
        .input(serialized)
        .input_list(&spec.dense_defaults())
        .attr("num_sparse", spec.sparse.len())
        .attr(
            "sparse_keys",
            spec.sparse
                .iter()
                .map(|f| f.key.clone())
                .collect::<Vec<_>>(),
        )
        .attr(
            "dense_keys",
            spec.dense.iter().map(|f| f.key.clone()).collect::<Vec<_>>(),
        )
        .attr("sparse_types", spec.sparse_types())
        .attr("dense_shapes", spec.dense_shapes())
        .build()?;
    ParsedFeatures::split(op.outputs(), spec.sparse.len(), spec.dense.len(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    fn default(s: &Scope, v: Tensor) -> Output {
        ops::constant(s, v).unwrap()
    }

    fn spec(s: &Scope) -> ExampleSpec {
        ExampleSpec {
            sparse: vec![
                SparseFeature::new("sf", DType::F32),
                SparseFeature::new("ss", DType::String),
            ],
            dense: vec![
                DenseFeature::new(
                    "d",
                    Shape::known(&[2, 3]),
                    default(s, Tensor::new::<f32>(&[0], vec![]).unwrap()),
                ),
                DenseFeature::new(
                    "v",
                    Shape::from_tf_dims(&[-1, 2]),
                    default(s, Tensor::scalar(0i64)),
                ),
            ],
            ragged: vec![],
        }
    }

    #[test]
    fn v1_shapes() {
        let s = Scope::new();
        let ser = ops::placeholder(&s, DType::String, Shape::known(&[5])).unwrap();
        let p = parse_example(&s, &ser, None, &spec(&s)).unwrap();
        assert_eq!(p.sparse_indices.len(), 2);
        assert_eq!(
            p.sparse_indices[1].shape(),
            Shape::from_dims(&[None, Some(2)])
        );
        assert_eq!(p.sparse_values[0].dtype(), DType::F32);
        assert_eq!(p.sparse_values[1].dtype(), DType::String);
        assert_eq!(p.sparse_shapes[0].shape(), Shape::known(&[2]));
        assert_eq!(p.dense_values[0].shape(), Shape::known(&[5, 2, 3]));
        assert_eq!(p.dense_values[1].shape(), Shape::from_tf_dims(&[5, -1, 2]));
        assert_eq!(p.dense_values[1].dtype(), DType::I64);
        // serialized must be a vector
        let scalar = ops::placeholder(&s, DType::String, Shape::scalar()).unwrap();
        let e = parse_example(&s, &scalar, None, &spec(&s)).unwrap_err();
        assert!(e.message().contains("must be rank 1 but is rank 0"), "{e}");
    }

    #[test]
    fn v2_shapes_scalar_vector_and_ragged() {
        let s = Scope::new();
        let mut sp = spec(&s);
        sp.ragged = vec![RaggedFeature::new("r", DType::I64, DType::I32)];
        let ser = ops::placeholder(&s, DType::String, Shape::known(&[3])).unwrap();
        let p = parse_example_v2(&s, &ser, None, &sp).unwrap();
        assert_eq!(p.ragged_values[0].dtype(), DType::I64);
        assert_eq!(p.ragged_values[0].shape(), Shape::from_dims(&[None]));
        assert_eq!(p.ragged_row_splits[0].dtype(), DType::I32);
        assert_eq!(p.ragged_row_splits[0].shape(), Shape::known(&[4]));
        let one = ops::placeholder(&s, DType::String, Shape::scalar()).unwrap();
        let p = parse_example_v2(&s, &one, None, &sp).unwrap();
        assert_eq!(
            p.sparse_indices[0].shape(),
            Shape::from_dims(&[None, Some(1)])
        );
        assert_eq!(p.sparse_shapes[0].shape(), Shape::known(&[1]));
        assert_eq!(p.dense_values[0].shape(), Shape::known(&[2, 3]));
        assert_eq!(p.ragged_row_splits[0].shape(), Shape::from_dims(&[None]));
        let unknown = ops::placeholder(&s, DType::String, Shape::unknown()).unwrap();
        let p = parse_example_v2(&s, &unknown, None, &sp).unwrap();
        assert_eq!(p.sparse_indices[0].shape(), Shape::unknown_with_rank(2));
        assert_eq!(p.dense_values[0].shape(), Shape::unknown());
        let m = ops::placeholder(&s, DType::String, Shape::known(&[2, 2])).unwrap();
        let e = parse_example_v2(&s, &m, None, &sp).unwrap_err();
        assert!(e.message().contains("at most rank 1 but is rank 2"), "{e}");
    }

    #[test]
    fn single_shapes() {
        let s = Scope::new();
        let ser = ops::placeholder(&s, DType::String, Shape::scalar()).unwrap();
        let p = parse_single_example(&s, &ser, &spec(&s)).unwrap();
        assert_eq!(
            p.sparse_indices[0].shape(),
            Shape::from_dims(&[None, Some(1)])
        );
        assert_eq!(p.dense_values[1].shape(), Shape::from_tf_dims(&[-1, 2]));
    }

    #[test]
    fn attrs_are_checked() {
        let s = Scope::new();
        let ser = ops::placeholder(&s, DType::String, Shape::known(&[2])).unwrap();
        let mut sp = spec(&s);
        sp.dense[0].shape = Shape::from_tf_dims(&[2, -1]);
        let e = parse_example_v2(&s, &ser, None, &sp).unwrap_err();
        assert!(
            e.message()
                .contains("dense_shapes[0] has unknown rank or unknown inner dimensions: [2,?]"),
            "{e}"
        );
        sp.dense[0].shape = Shape::unknown();
        let e = parse_example(&s, &ser, None, &sp).unwrap_err();
        assert!(e.message().contains("<unknown>"), "{e}");
        // a V1 node whose counts disagree with its types
        let mut node = NodeDef::new("p", "ParseExample");
        node.attr.insert("Nsparse".into(), 1i64.into());
        node.attr.insert("Ndense".into(), 0i64.into());
        node.attr
            .insert("sparse_types".into(), Vec::<DType>::new().into());
        node.attr
            .insert("Tdense".into(), Vec::<DType>::new().into());
        node.attr
            .insert("dense_shapes".into(), Vec::<Shape>::new().into());
        let e = ParseExampleAttrs::from_node(&node).unwrap_err();
        assert_eq!(e.message(), "len(sparse_keys) != len(sparse_types)");
        node.attr.insert("Nsparse".into(), 0i64.into());
        let a = ParseExampleAttrs::from_node(&node).unwrap();
        assert_eq!((a.num_sparse, a.num_dense, a.num_ragged), (0, 0, 0));
    }

    #[test]
    fn strides() {
        let (v, st) = dense_strides(&[
            Shape::scalar(),
            Shape::known(&[2, 3]),
            Shape::from_tf_dims(&[-1]),
            Shape::from_tf_dims(&[-1, 4, 0]),
        ])
        .unwrap();
        assert_eq!(v, vec![false, false, true, true]);
        assert_eq!(st, vec![1, 6, 1, 0]);
    }
}
