//! The `tf.Example` parsing kernels: `ParseExample`, `ParseExampleV2` and
//! `ParseSingleExample` (TensorFlow's `example_parsing_ops.cc` over
//! `example_proto_fast_parsing.cc`), with TensorFlow's semantics and messages.
//!
//! - [`wire`] — TensorFlow's fast wire parser of `Example` protos.
//! - [`batch`] — a vector of examples (`FastParseExample`).
//! - [`single`] — one example (`FastParseSingleExample`).
//!
//! Per run the kernel checks its inputs against the node's
//! [`ParseExampleAttrs`] (`CheckInputShapes`), builds a `Config` of the
//! features, parses, and writes the outputs in argument order. Within one example
//! the last entry of a key wins (the entries are read last to first, later ones of
//! a key ignored); a feature without a list counts as absent. A missing dense
//! feature takes its default, or is an error when the default is empty; a missing
//! sparse or ragged one is empty. String values are slices of the serialized
//! inputs (no copy).
//!
//! Every malformed input is an `InvalidArgument` with TensorFlow's message (naming
//! the example, its index and the key). A key configured twice makes every feature
//! missing, as TensorFlow's index of the keys does. Nothing an input holds can make the kernel panic or allocate more
//! than the input and the node's shapes call for.

pub mod batch;
pub mod single;
pub mod wire;

use std::collections::HashMap;
use std::ops::Range;

use bytes::Bytes;
use graph::ops::parsing::example::{tf_type_name, ExampleOp, ParseExampleAttrs};
use graph::{DType, Result, Shape, Status, Tensor, TensorShape};

use self::wire::{Kind, Slot};
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// Makes a zeroed output tensor (the step's allocator in the kernel):
/// `ResourceExhausted` when it cannot be had.
pub(crate) type Alloc<'a> = &'a dyn Fn(DType, &[usize]) -> Result<Tensor>;

/// A dense feature of one run.
pub(crate) struct DenseConfig {
    pub key: Bytes,
    pub dtype: DType,
    /// The shape in one example, as the node gives it (`[-1, …]`: variable length).
    pub shape: Shape,
    /// Empty: required. Variable length: one element, the padding.
    pub default: Tensor,
    pub variable_length: bool,
    /// Values per row (all of `shape`'s, or its inner dimensions' when variable).
    pub stride: usize,
}

impl DenseConfig {
    /// The dimensions after the first of a variable-length feature (all known).
    fn inner_dims(&self) -> Vec<usize> {
        self.shape
            .dims()
            .unwrap_or(&[])
            .iter()
            .skip(1)
            .map(|d| d.unwrap_or(0))
            .collect()
    }

    /// The dimensions of a fixed-length feature (all known).
    fn fixed_dims(&self) -> Vec<usize> {
        self.shape
            .dims()
            .unwrap_or(&[])
            .iter()
            .map(|d| d.unwrap_or(0))
            .collect()
    }
}

/// A sparse feature of one run.
pub(crate) struct SparseConfig {
    pub key: Bytes,
    pub dtype: DType,
}

/// A ragged feature of one run.
pub(crate) struct RaggedConfig {
    pub key: Bytes,
    pub dtype: DType,
    pub splits_dtype: DType,
}

/// The features one run parses (TensorFlow's `FastParseExampleConfig`).
#[derive(Default)]
pub(crate) struct Config {
    pub dense: Vec<DenseConfig>,
    pub sparse: Vec<SparseConfig>,
    pub ragged: Vec<RaggedConfig>,
}

/// Which configured feature a key names.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    Dense(usize),
    Sparse(usize),
    Ragged(usize),
}

impl Config {
    /// The feature of each key. When a key is configured twice the index is empty
    /// (every feature counts as missing): TensorFlow's cuckoo index cannot hold
    /// the key twice, retries with other seeds, and ends up cleared, not failed.
    pub(crate) fn index(&self) -> HashMap<&[u8], Target> {
        let n = self.dense.len() + self.sparse.len() + self.ragged.len();
        let mut m = HashMap::with_capacity(n);
        let keys = (self.dense.iter().enumerate())
            .map(|(d, c)| (&c.key, Target::Dense(d)))
            .chain((self.sparse.iter().enumerate()).map(|(d, c)| (&c.key, Target::Sparse(d))))
            .chain((self.ragged.iter().enumerate()).map(|(d, c)| (&c.key, Target::Ragged(d))));
        for (k, t) in keys {
            if m.insert(&k[..], t).is_some() {
                tracing::warn!(
                    key = %text(k),
                    "a Parse*Example node names a feature twice: as in TensorFlow, no feature will be found"
                );
                return HashMap::new();
            }
        }
        m
    }
}

/// The parsed tensors, by output argument.
#[derive(Default)]
pub(crate) struct Parsed {
    pub sparse_indices: Vec<Tensor>,
    pub sparse_values: Vec<Tensor>,
    pub sparse_shapes: Vec<Tensor>,
    pub dense_values: Vec<Tensor>,
    pub ragged_values: Vec<Tensor>,
    pub ragged_splits: Vec<Tensor>,
}

/// The dtype a feature's list holds.
fn kind_dtype(k: Kind) -> Option<DType> {
    match k {
        Kind::None => None,
        Kind::Bytes => Some(DType::String),
        Kind::Float => Some(DType::F32),
        Kind::Int64 => Some(DType::I64),
    }
}

/// How TensorFlow names a list's values in shape errors.
fn values_name(t: DType) -> &'static str {
    match t {
        DType::String => "bytes",
        DType::I64 => "int64",
        _ => "float",
    }
}

/// How a name or key shows in a message: its text (invalid UTF-8 replaced).
fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// TensorFlow's "Could not parse example input" message, the input cut to 200
/// bytes.
fn unparsable(serialized: &[u8]) -> Status {
    const MAX: usize = 200;
    let shown = text(&serialized[..serialized.len().min(MAX)]);
    let more = if serialized.len() > MAX {
        format!("... ({} bytes)", serialized.len())
    } else {
        String::new()
    };
    Status::invalid_argument(format!(
        "Could not parse example input, value: '{shown}{more}'"
    ))
}

/// A growable list of one feature's values.
pub(crate) enum List {
    F32(Vec<f32>),
    I64(Vec<i64>),
    Str(Vec<Bytes>),
}

impl List {
    fn new(dtype: DType) -> List {
        match dtype {
            DType::F32 => List::F32(vec![]),
            DType::I64 => List::I64(vec![]),
            _ => List::Str(vec![]),
        }
    }

    fn len(&self) -> usize {
        match self {
            List::F32(v) => v.len(),
            List::I64(v) => v.len(),
            List::Str(v) => v.len(),
        }
    }

    /// Appends a feature's list (of this list's kind, checked by the caller);
    /// false when it is malformed.
    fn parse(&mut self, list: &[u8], base: &Bytes) -> bool {
        match self {
            List::F32(v) => wire::parse_float_list(list, v),
            List::I64(v) => wire::parse_int64_list(list, v),
            List::Str(v) => wire::parse_bytes_list(list, base, v),
        }
    }

    /// The values as a tensor of `dims`.
    fn into_tensor(self, dims: &[usize]) -> Result<Tensor> {
        match self {
            List::F32(v) => Tensor::new(dims, v),
            List::I64(v) => Tensor::new(dims, v),
            List::Str(v) => Tensor::from_strings(dims, v),
        }
    }
}

/// The values of a dense output, to be written in place.
pub(crate) enum SlotsMut<'a> {
    F32(&'a mut [f32]),
    I64(&'a mut [i64]),
    Str(&'a mut [Bytes]),
}

impl<'a> SlotsMut<'a> {
    /// The values of `t` (a fresh float, int64 or string tensor).
    fn of(t: &'a mut Tensor) -> Result<SlotsMut<'a>> {
        Ok(match t.dtype() {
            DType::F32 => SlotsMut::F32(t.as_mut_slice()?),
            DType::I64 => SlotsMut::I64(t.as_mut_slice()?),
            _ => SlotsMut::Str(t.as_strings_mut()?),
        })
    }

    /// Splits off the first `n` values (fewer when there are not as many).
    fn split_front(&mut self, n: usize) -> SlotsMut<'a> {
        fn split<'a, T>(s: &mut &'a mut [T], n: usize) -> &'a mut [T] {
            let k = n.min(s.len());
            let (head, tail) = std::mem::take(s).split_at_mut(k);
            *s = tail;
            head
        }
        match self {
            SlotsMut::F32(s) => SlotsMut::F32(split(s, n)),
            SlotsMut::I64(s) => SlotsMut::I64(split(s, n)),
            SlotsMut::Str(s) => SlotsMut::Str(split(s, n)),
        }
    }

    /// Parses a feature's list (of this output's kind) into the values at `at`:
    /// `None` when malformed, else how many values the list had and whether that
    /// filled `at` exactly.
    fn parse(&mut self, at: Range<usize>, list: &[u8], base: &Bytes) -> Option<(usize, bool)> {
        fn run<T>(
            s: &mut [T],
            at: Range<usize>,
            f: impl FnOnce(&mut Slot<'_, T>) -> bool,
        ) -> Option<(usize, bool)> {
            let mut slot = Slot::new(s.get_mut(at)?);
            f(&mut slot).then(|| (slot.count(), slot.is_full()))
        }
        match self {
            SlotsMut::F32(s) => run(s, at, |o| wire::parse_float_list(list, o)),
            SlotsMut::I64(s) => run(s, at, |o| wire::parse_int64_list(list, o)),
            SlotsMut::Str(s) => run(s, at, |o| wire::parse_bytes_list(list, base, o)),
        }
    }

    /// Sets every value to `pad`'s first (a variable-length feature's padding).
    fn pad(&mut self, pad: &Tensor) -> Result<()> {
        fn set<T: Clone>(s: &mut [T], from: &[T]) -> Result<()> {
            let v = from
                .first()
                .ok_or_else(|| Status::internal("the padding has no value"))?;
            s.fill(v.clone());
            Ok(())
        }
        match self {
            SlotsMut::F32(s) => set(s, pad.as_slice()?),
            SlotsMut::I64(s) => set(s, pad.as_slice()?),
            SlotsMut::Str(s) => set(s, pad.as_strings()?),
        }
    }

    /// Writes `list[range]` (of this output's dtype) from value `at` on.
    fn put(&mut self, at: usize, list: &List, range: Range<usize>) -> Result<()> {
        fn copy<T: Clone>(dst: &mut [T], at: usize, src: Option<&[T]>) -> Result<()> {
            let src = src.ok_or_else(|| Status::internal("parsed values out of range"))?;
            dst.get_mut(at..at.saturating_add(src.len()))
                .ok_or_else(|| Status::internal("parsed values overrun their output"))?
                .clone_from_slice(src);
            Ok(())
        }
        match (self, list) {
            (SlotsMut::F32(d), List::F32(s)) => copy(d, at, s.get(range)),
            (SlotsMut::I64(d), List::I64(s)) => copy(d, at, s.get(range)),
            (SlotsMut::Str(d), List::Str(s)) => copy(d, at, s.get(range)),
            _ => Err(Status::internal("parsed values of another dtype")),
        }
    }

    /// Copies `default` (of this output's dtype and `at`'s length) to `at`.
    fn fill(&mut self, at: Range<usize>, default: &Tensor) -> Result<()> {
        fn copy<T: Clone>(s: &mut [T], at: Range<usize>, from: &[T]) -> Result<()> {
            match s.get_mut(at) {
                Some(dst) if dst.len() == from.len() => {
                    dst.clone_from_slice(from);
                    Ok(())
                }
                _ => Err(Status::internal("dense default does not fit its output")),
            }
        }
        match self {
            SlotsMut::F32(s) => copy(s, at, default.as_slice()?),
            SlotsMut::I64(s) => copy(s, at, default.as_slice()?),
            SlotsMut::Str(s) => copy(s, at, default.as_strings()?),
        }
    }
}

/// Copies the values of `lists` (each of `dtype`), in order, into a new tensor of
/// `dims` (whose element count is their total length).
fn concat_lists<'l>(
    alloc: Alloc<'_>,
    dtype: DType,
    dims: &[usize],
    lists: impl Iterator<Item = &'l List>,
) -> Result<Tensor> {
    let mut t = alloc(dtype, dims)?;
    let mut at = 0;
    let mut slots = SlotsMut::of(&mut t)?;
    for l in lists {
        slots.put(at, l, 0..l.len())?;
        at += l.len();
    }
    Ok(t)
}

/// The kernel of all three ops.
struct ParseExampleKernel {
    attrs: ParseExampleAttrs,
}

/// Where a node's inputs are (TensorFlow's `ctx->input("…")` by name).
struct InputLayout {
    /// `ParseExample`'s scalar keys, or `ParseExampleV2`'s key vectors (one each).
    sparse_keys: Range<usize>,
    dense_keys: Range<usize>,
    ragged_keys: Range<usize>,
    dense_defaults: usize,
}

impl ParseExampleKernel {
    fn layout(&self) -> InputLayout {
        let a = &self.attrs;
        match a.op {
            ExampleOp::V1 => InputLayout {
                sparse_keys: 2..2 + a.num_sparse,
                dense_keys: 2 + a.num_sparse..2 + a.num_sparse + a.num_dense,
                ragged_keys: 0..0,
                dense_defaults: 2 + a.num_sparse + a.num_dense,
            },
            ExampleOp::V2 => InputLayout {
                sparse_keys: 2..3,
                dense_keys: 3..4,
                ragged_keys: 4..5,
                dense_defaults: 5,
            },
            ExampleOp::Single => InputLayout {
                sparse_keys: 0..0,
                dense_keys: 0..0,
                ragged_keys: 0..0,
                dense_defaults: 1,
            },
        }
    }

    /// The keys in inputs `r`: the scalars of a V1 list, or a V2 vector's elements.
    fn keys(&self, ctx: &OpKernelContext<'_>, r: Range<usize>, what: &str) -> Result<Vec<Bytes>> {
        let mut keys = Vec::new();
        for (n, i) in r.enumerate() {
            let t = ctx.input(i)?;
            if self.attrs.op == ExampleOp::V1 && t.rank() != 0 {
                return Err(Status::invalid_argument(format!(
                    "Expected {what}[{n}] to be a scalar, got shape: {}",
                    t.shape()
                )));
            }
            keys.extend(t.as_strings()?.iter().cloned());
        }
        Ok(keys)
    }

    /// TensorFlow's `CheckInputShapes` and `MakeConfig`.
    fn config(
        &self,
        ctx: &OpKernelContext<'_>,
        serialized: &Tensor,
        names: Option<&Tensor>,
    ) -> Result<Config> {
        let a = &self.attrs;
        let l = self.layout();
        let (sparse_keys, dense_keys, ragged_keys) = match a.op {
            ExampleOp::Single => (
                a.sparse_keys
                    .iter()
                    .map(|k| Bytes::from(k.clone()))
                    .collect(),
                a.dense_keys
                    .iter()
                    .map(|k| Bytes::from(k.clone()))
                    .collect(),
                vec![],
            ),
            _ => {
                let dense = self.keys(ctx, l.dense_keys.clone(), "dense_keys")?;
                let sparse = self.keys(ctx, l.sparse_keys.clone(), "sparse_keys")?;
                let ragged = self.keys(ctx, l.ragged_keys.clone(), "ragged_keys")?;
                (sparse, dense, ragged)
            }
        };
        match a.op {
            ExampleOp::V1 if serialized.rank() != 1 => {
                return Err(Status::invalid_argument(format!(
                    "Expected serialized to be a vector, got shape: {}",
                    serialized.shape()
                )))
            }
            ExampleOp::V2 if serialized.rank() > 1 => {
                return Err(Status::invalid_argument(format!(
                    "Expected serialized to be a scalar or vector, got shape: {}",
                    serialized.shape()
                )))
            }
            ExampleOp::Single if serialized.rank() != 0 => {
                return Err(Status::invalid_argument(format!(
                    "Expected serialized to be a scalar, got shape: {}",
                    serialized.shape()
                )))
            }
            _ => {}
        }
        if let Some(names) = names {
            if names.num_elements() > 0 && names.dims() != serialized.dims() {
                return Err(Status::invalid_argument(format!(
                    "Expected names have the same shape as serialized: name.shape={}, serialized.shape={}",
                    names.shape(),
                    serialized.shape()
                )));
            }
        }
        if a.op == ExampleOp::V2 {
            let counts = [
                (
                    dense_keys.len(),
                    a.num_dense,
                    "len(dense_keys) == len(dense_types)",
                ),
                (
                    sparse_keys.len(),
                    a.num_sparse,
                    "len(sparse_keys) == num_sparse",
                ),
                (
                    ragged_keys.len(),
                    a.num_ragged,
                    "len(ragged_keys) == len(ragged_value_types)",
                ),
            ];
            for (got, want, what) in counts {
                if got != want {
                    return Err(Status::invalid_argument(format!(
                        "Expected {what} but got: {got} vs. {want}"
                    )));
                }
            }
        }
        let num_defaults = ctx.num_inputs().saturating_sub(l.dense_defaults);
        if num_defaults != a.num_dense {
            return Err(Status::invalid_argument(format!(
                "Expected len(dense_defaults) == len(dense_keys) but got: {num_defaults} vs. {}",
                a.num_dense
            )));
        }
        let mut cfg = Config::default();
        for (d, key) in dense_keys.into_iter().enumerate() {
            let default = ctx.input(l.dense_defaults + d)?;
            let shape = &a.dense_shapes[d];
            if a.variable_length[d] {
                if default.num_elements() != 1 {
                    return Err(Status::invalid_argument(format!(
                        "dense_shape[{d}] is a variable length shape: {shape}, therefore def_value[{d}] must contain a single element (the padding element).  But its shape is: {}",
                        default.shape()
                    )));
                }
            } else if default.num_elements() > 0 && !shape.is_compatible_with(default.shape()) {
                return Err(Status::invalid_argument(format!(
                    "def_value[{d}].shape() == {} is not compatible with dense_shapes_[{d}] == {shape}",
                    default.shape()
                )));
            }
            if default.dtype() != a.dense_types[d] {
                return Err(Status::invalid_argument(format!(
                    "dense_defaults[{d}].dtype() == {} != dense_types_[{d}] == {}",
                    tf_type_name(default.dtype()),
                    tf_type_name(a.dense_types[d])
                )));
            }
            cfg.dense.push(DenseConfig {
                key,
                dtype: a.dense_types[d],
                shape: shape.clone(),
                default: default.clone(),
                variable_length: a.variable_length[d],
                stride: a.elements_per_stride[d],
            });
        }
        cfg.sparse = sparse_keys
            .into_iter()
            .zip(&a.sparse_types)
            .map(|(key, &dtype)| SparseConfig { key, dtype })
            .collect();
        cfg.ragged = ragged_keys
            .into_iter()
            .zip(a.ragged_value_types.iter().zip(&a.ragged_split_types))
            .map(|(key, (&dtype, &splits_dtype))| RaggedConfig {
                key,
                dtype,
                splits_dtype,
            })
            .collect();
        Ok(cfg)
    }
}

impl OpKernel for ParseExampleKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let serialized = ctx.input(0)?.clone();
        let names = match self.attrs.op {
            ExampleOp::Single => None,
            _ => Some(ctx.input(1)?.clone()),
        };
        let cfg = self.config(ctx, &serialized, names.as_ref())?;
        let alloc = |dtype: DType, dims: &[usize]| ctx.allocate(dtype, TensorShape::new(dims));
        let inputs = serialized.as_strings()?;
        let parsed = if serialized.rank() == 1 {
            let names = match &names {
                Some(n) => n.as_strings()?,
                None => &[],
            };
            batch::parse_batch(&cfg, inputs, names, &alloc)?
        } else {
            let one = inputs
                .first()
                .ok_or_else(|| Status::internal("scalar serialized has no element"))?;
            single::parse_single(&cfg, one, &alloc)?
        };
        let outputs = [
            parsed.sparse_indices,
            parsed.sparse_values,
            parsed.sparse_shapes,
            parsed.dense_values,
            parsed.ragged_values,
            parsed.ragged_splits,
        ];
        for (i, t) in outputs.into_iter().flatten().enumerate() {
            ctx.set_output(i, t)?;
        }
        Ok(())
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Registers `ParseExample`, `ParseExampleV2` and `ParseSingleExample`.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for op in ["ParseExample", "ParseExampleV2", "ParseSingleExample"] {
        r.register(KernelDef::cpu(op, |c| {
            Ok(Box::new(ParseExampleKernel {
                attrs: ParseExampleAttrs::from_node(c.node)?,
            }))
        }));
    }
}

#[cfg(test)]
mod tests;
