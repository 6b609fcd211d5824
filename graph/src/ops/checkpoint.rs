//! Checkpoint ops with TensorFlow's signatures (`io_ops.cc`): `SaveV2` writes named
//! tensors to the checkpoint at `prefix`, `RestoreV2` reads them back,
//! `MergeV2Checkpoints` merges the shards of a sharded save, and
//! `ShardedFilename`/`ShardedFilespec` name the shards. The format is TensorFlow's
//! tensor bundle (the kernels' `cpu::checkpoint` module reads and writes it);
//! `shape_and_slices` specs are parsed here by [`ShapeAndSlice`], their slices
//! being [`TensorSlice`]s (TensorFlow's `TensorSlice`, which the kernels also
//! use for the slices a checkpoint stores).
//!
//! A `shape_and_slices` entry is `""` for a whole tensor, or TensorFlow's
//! `"<dim0> <dim1> … <slice>"`: the full tensor's shape, then a slice spec with one
//! `-` (the whole dimension) or `start,length` per dimension, joined by `:`
//! (`"4 5 0,2:-"` is rows 0–1 of a 4×5 tensor). TensorFlow's `Saver` saves and
//! restores each partition of a partitioned variable with such a spec
//! (`"10 4 4,3:0,4"`).

use crate::builder::{Operation, Output, Scope};
use crate::op_def::{InferenceContext, OpDef};
use crate::{DType, OpRegistry, Result, Shape, Status, Tensor, TensorShape};

/// Registers `SaveV2`, `RestoreV2`, `MergeV2Checkpoints`, `ShardedFilename`,
/// `ShardedFilespec`, and the string ops TensorFlow's sharded `Saver` builds
/// around them (`StringJoin`, `StaticRegexFullMatch`).
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("MergeV2Checkpoints")
            .input("checkpoint_prefixes: string")
            .input("destination_prefix: string")
            .attr("delete_old_dirs: bool = true")
            .attr("allow_missing_files: bool = false")
            .stateful()
            .shape_fn(|c| {
                with_rank(c, 0, 1, "checkpoint_prefixes")?;
                with_rank(c, 1, 0, "destination_prefix")?;
                Ok(())
            }),
    );
    r.register(
        OpDef::build("ShardedFilename")
            .input("basename: string")
            .input("shard: int32")
            .input("num_shards: int32")
            .output("filename: string")
            .shape_fn(crate::op_def::shape_fn::scalar),
    );
    r.register(
        OpDef::build("ShardedFilespec")
            .input("basename: string")
            .input("num_shards: int32")
            .output("filename: string")
            .shape_fn(crate::op_def::shape_fn::scalar),
    );
    r.register(
        OpDef::build("StringJoin")
            .input("inputs: N * string")
            .output("output: string")
            .attr("N: int >= 0")
            .attr("separator: string = ''")
            .shape_fn(string_join_shape),
    );
    r.register(
        OpDef::build("StaticRegexFullMatch")
            .input("input: string")
            .output("output: bool")
            .attr("pattern: string")
            .shape_fn(crate::op_def::shape_fn::unchanged),
    );
    r.register(
        OpDef::build("SaveV2")
            .input("prefix: string")
            .input("tensor_names: string")
            .input("shape_and_slices: string")
            .input("tensors: dtypes")
            .attr("dtypes: list(type)")
            .stateful()
            .shape_fn(save_shape),
    );
    r.register(
        OpDef::build("RestoreV2")
            .input("prefix: string")
            .input("tensor_names: string")
            .input("shape_and_slices: string")
            .output("tensors: dtypes")
            .attr("dtypes: list(type)")
            .stateful()
            .shape_fn(restore_shape),
    );
}

fn with_rank(c: &InferenceContext<'_>, i: usize, rank: usize, what: &str) -> Result<Shape> {
    let s = c.input(i);
    match s.rank() {
        Some(r) if r != rank => Err(Status::invalid_argument(format!(
            "Shape must be rank {rank} but is rank {r} for {what} of '{}'",
            c.node().name
        ))),
        _ => Ok(s),
    }
}

/// `StringJoin`: the inputs' common shape (scalars broadcast).
fn string_join_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let mut out = Shape::scalar();
    for i in 0..c.num_inputs() {
        let s = c.input(i);
        if s.rank() == Some(0) {
            continue;
        }
        out = if out.rank() == Some(0) {
            s
        } else {
            out.merge(&s).map_err(|e| {
                e.context(format_args!("the inputs of StringJoin '{}'", c.node().name))
            })?
        };
    }
    c.set_output(0, out)
}

fn save_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(c, 0, 0, "prefix")?;
    let n = c.num_inputs().saturating_sub(3);
    for (i, what) in [(1, "tensor_names"), (2, "shape_and_slices")] {
        let s = with_rank(c, i, 1, what)?;
        if let Some(d) = s.dim(0) {
            if d != n {
                return Err(Status::invalid_argument(format!(
                    "{what} of '{}' has {d} entries for {n} tensors",
                    c.node().name
                )));
            }
        }
    }
    Ok(())
}

fn restore_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    with_rank(c, 0, 0, "prefix")?;
    let names = with_rank(c, 1, 1, "tensor_names")?;
    let specs = with_rank(c, 2, 1, "shape_and_slices")?;
    names.merge(&specs).map_err(|e| {
        Status::invalid_argument(format!(
            "tensor_names and shape_and_slices of '{}' differ: {}",
            c.node().name,
            e.message()
        ))
    })?;
    let known: Option<Vec<Shape>> = c.input_tensor(2).and_then(|t| {
        let specs = t.as_strings().ok()?;
        specs
            .iter()
            .map(|s| {
                let s = std::str::from_utf8(s).ok()?;
                match ShapeAndSlice::parse(s).ok()? {
                    None => Some(Shape::unknown()),
                    Some(sl) => Some(Shape::from(sl.slice_shape)),
                }
            })
            .collect()
    });
    for i in 0..c.num_outputs() {
        let s = known
            .as_ref()
            .and_then(|k| k.get(i).cloned())
            .unwrap_or_default();
        c.set_output(i, s)?;
    }
    Ok(())
}

/// One dimension of a [`TensorSlice`]: all of it (`-`), or `length` indices
/// from `start` (`start,length`). TensorFlow keeps the two apart even when a
/// range spans the whole dimension, and so do its checkpoint keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// Every index of the dimension (`-`; TensorFlow's `kFullExtent`).
    Full,
    /// `length` (at least 1) indices from `start`.
    Range {
        /// The first index.
        start: usize,
        /// How many indices.
        length: usize,
    },
}

impl Extent {
    /// The half-open index range this extent takes of a dimension of `dim`.
    pub fn bounds(&self, dim: usize) -> (usize, usize) {
        match *self {
            Extent::Full => (0, dim),
            Extent::Range { start, length } => (start, start + length),
        }
    }
}

/// A hyper-rectangle of a tensor, one [`Extent`] per dimension: TensorFlow's
/// `TensorSlice`. Its text form is the extents joined by `:` (`"0,4:-"`), its
/// [`Display`](std::fmt::Display) TensorFlow's `DebugString`.
///
/// Every `Range` is valid on its own (`length >= 1`, `start + length` at most
/// `i64::MAX`); whether it fits a shape is [`TensorSlice::slice_shape`]'s check.
///
/// # Examples
/// ```
/// use actorflow_graph::ops::TensorSlice;
/// use actorflow_graph::TensorShape;
/// let s = TensorSlice::parse("0,4:-").unwrap();
/// assert_eq!(s.to_string(), "0,4:-");
/// assert_eq!(s.slice_shape(&TensorShape::new(&[10, 3])).unwrap(), TensorShape::new(&[4, 3]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct TensorSlice {
    extents: Vec<Extent>,
}

/// The largest `start + length` an extent may reach (TensorFlow's `int64`).
const MAX_EXTENT_END: u64 = i64::MAX as u64;

impl TensorSlice {
    /// The whole of a tensor of `rank` dimensions.
    pub fn full(rank: usize) -> TensorSlice {
        TensorSlice {
            extents: vec![Extent::Full; rank],
        }
    }

    /// A slice of these extents, or `InvalidArgument` for a range of length 0 or
    /// one that ends past `i64::MAX`.
    pub fn new(extents: Vec<Extent>) -> Result<TensorSlice> {
        for e in &extents {
            if let Extent::Range { start, length } = *e {
                let (s, l) = (
                    i64::try_from(start).unwrap_or(-1),
                    i64::try_from(length).unwrap_or(-1),
                );
                Self::check_range(s, l).map_err(|why| {
                    Status::invalid_argument(format!("invalid tensor slice: {why}"))
                })?;
            }
        }
        Ok(TensorSlice { extents })
    }

    /// The extent `start,length` as TensorFlow accepts it (`start >= 0`,
    /// `length >= 1`, `start + length` at most `i64::MAX`), or why not, in
    /// TensorFlow's words.
    pub fn check_range(start: i64, length: i64) -> std::result::Result<Extent, String> {
        if start < 0 || length <= 0 {
            return Err(format!(
                "Expected non-negative start and positive length but got start = {start}, length = {length}"
            ));
        }
        if (start as u64)
            .checked_add(length as u64)
            .is_none_or(|e| e > MAX_EXTENT_END)
        {
            return Err(format!(
                "Extent end exceeds the maximum possible size: start = {start}, length = {length}"
            ));
        }
        Ok(Extent::Range {
            start: start as usize,
            length: length as usize,
        })
    }

    /// Parses TensorFlow's text form (`TensorSlice::Parse`): extents joined by
    /// `:` (empty items skipped), each `-` or `start,length` with `start >= 0`
    /// and `length >= 1`. Anything else is `InvalidArgument` with TensorFlow's
    /// message.
    pub fn parse(text: &str) -> Result<TensorSlice> {
        let mut extents = Vec::new();
        for item in text.split(':').filter(|x| !x.is_empty()) {
            if item == "-" {
                extents.push(Extent::Full);
                continue;
            }
            let pair: Vec<&str> = item.split(',').filter(|x| !x.is_empty()).collect();
            let numbers = match pair.as_slice() {
                [a, b] => a.parse::<i64>().ok().zip(b.parse::<i64>().ok()),
                _ => None,
            };
            let Some((start, length)) = numbers else {
                return Err(Status::invalid_argument(format!(
                    "Expected a pair of numbers or '-' but got '{item}': string = {text}"
                )));
            };
            let extent = Self::check_range(start, length)
                .map_err(|why| Status::invalid_argument(format!("{why}: string = {text}")))?;
            extents.push(extent);
        }
        Ok(TensorSlice { extents })
    }

    /// The extents, one per dimension.
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.extents.len()
    }

    /// True when every extent is [`Extent::Full`] (TensorFlow's `IsFull`).
    pub fn is_full(&self) -> bool {
        self.extents.iter().all(|e| *e == Extent::Full)
    }

    /// True when the slice takes all of a tensor of `shape`, written with `-`s
    /// or with ranges (TensorFlow's `IsFullSlice`).
    pub fn covers(&self, shape: &TensorShape) -> bool {
        self.is_full() || self.slice_shape(shape).is_ok_and(|s| &s == shape)
    }

    /// The half-open index ranges of the slice in a tensor of `shape` (whose
    /// rank the caller checked is the slice's).
    pub fn bounds(&self, shape: &TensorShape) -> Vec<(usize, usize)> {
        self.extents
            .iter()
            .zip(shape.dims())
            .map(|(e, &d)| e.bounds(d))
            .collect()
    }

    /// The shape of the slice of a tensor of `shape` (TensorFlow's
    /// `SliceTensorShape`), or `InvalidArgument` when the ranks differ or an
    /// extent runs past its dimension.
    pub fn slice_shape(&self, shape: &TensorShape) -> Result<TensorShape> {
        if shape.rank() != self.rank() {
            return Err(Status::invalid_argument(format!(
                "Mismatching ranks: shape = {shape}, slice = {self}"
            )));
        }
        let mut dims = Vec::with_capacity(self.rank());
        for (d, (e, &size)) in self.extents.iter().zip(shape.dims()).enumerate() {
            match *e {
                Extent::Full => dims.push(size),
                Extent::Range { start, length } if start + length <= size => dims.push(length),
                Extent::Range { .. } => {
                    return Err(Status::invalid_argument(format!(
                        "Extent in dimension {d} out of bounds: shape = {shape}, slice = {self}"
                    )))
                }
            }
        }
        Ok(TensorShape::new(&dims))
    }

    /// The common part of two slices of one rank (TensorFlow's `Intersect`), or
    /// `None` when they do not overlap (or their ranks differ).
    pub fn intersect(&self, other: &TensorSlice) -> Option<TensorSlice> {
        if self.rank() != other.rank() {
            return None;
        }
        let mut extents = Vec::with_capacity(self.rank());
        for (a, b) in self.extents.iter().zip(&other.extents) {
            extents.push(match (*a, *b) {
                (Extent::Full, x) | (x, Extent::Full) => x,
                (
                    Extent::Range {
                        start: s1,
                        length: l1,
                    },
                    Extent::Range {
                        start: s2,
                        length: l2,
                    },
                ) => {
                    let start = s1.max(s2);
                    let end = (s1 + l1).min(s2 + l2);
                    if end <= start {
                        return None;
                    }
                    Extent::Range {
                        start,
                        length: end - start,
                    }
                }
            });
        }
        Some(TensorSlice { extents })
    }
}

impl std::fmt::Display for TensorSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.extents.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            match e {
                Extent::Full => f.write_str("-")?,
                Extent::Range { start, length } => write!(f, "{start},{length}")?,
            }
        }
        Ok(())
    }
}

/// A parsed non-empty `shape_and_slices` entry (TensorFlow's
/// `ParseShapeAndSlice`): the full tensor's shape, the slice meant, and the
/// slice's shape (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeAndSlice {
    /// The full tensor's shape.
    pub full_shape: TensorShape,
    /// The part of it meant.
    pub slice: TensorSlice,
    /// The shape of that part.
    pub slice_shape: TensorShape,
}

impl ShapeAndSlice {
    /// Parses an entry: `Ok(None)` for `""` (the whole tensor), else the full
    /// shape's dimensions and the slice separated by spaces. A malformed spec, or
    /// a slice that does not fit the shape, is `InvalidArgument` with
    /// TensorFlow's message.
    pub fn parse(spec: &str) -> Result<Option<ShapeAndSlice>> {
        if spec.is_empty() {
            return Ok(None);
        }
        let bad =
            |why: String| Status::invalid_argument(format!("{why} (shape_and_slice '{spec}')"));
        let parts: Vec<&str> = spec.split(' ').collect();
        let Some((slice, dims)) = parts.split_last().filter(|(_, d)| !d.is_empty()) else {
            return Err(Status::invalid_argument(format!(
                "Need least two elements in shape_and_slice specification: {spec}"
            )));
        };
        let slice = TensorSlice::parse(slice)?;
        let dims: Vec<usize> = dims
            .iter()
            .map(|d| {
                d.parse::<i64>()
                    .ok()
                    .and_then(|d| usize::try_from(d).ok())
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "Non numerical dimension in shape_and_slice: {spec}"
                        ))
                    })
            })
            .collect::<Result<_>>()?;
        let full_shape = TensorShape::new(&dims);
        full_shape
            .check_valid()
            .map_err(|e| bad(e.message().to_owned()))?;
        let slice_shape = slice
            .slice_shape(&full_shape)
            .map_err(|e| bad(e.message().to_owned()))?;
        Ok(Some(ShapeAndSlice {
            full_shape,
            slice,
            slice_shape,
        }))
    }

    /// True when the slice is the whole tensor (see [`TensorSlice::covers`]).
    pub fn is_full(&self) -> bool {
        self.slice.covers(&self.full_shape)
    }
}

impl std::fmt::Display for ShapeAndSlice {
    /// The spec's text, as TensorFlow's `SaveSliceInfo.spec` writes it
    /// (`"10 4 0,4:0,4"`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for d in self.full_shape.dims() {
            write!(f, "{d} ")?;
        }
        write!(f, "{}", self.slice)
    }
}

fn string_vector(s: &Scope, values: &[String]) -> Result<Output> {
    let t = Tensor::from_strings(&[values.len()], values.to_vec())?;
    crate::ops::constant(s, t)
}

/// `SaveV2`: writes `tensors` under `names` (whole tensors) to the checkpoint at
/// `prefix` (a string scalar).
pub fn save_v2(
    s: &Scope,
    prefix: &Output,
    names: &[String],
    tensors: &[Output],
) -> Result<Operation> {
    save_v2_slices(s, prefix, names, &vec![String::new(); names.len()], tensors)
}

/// `SaveV2` with a `shape_and_slices` entry per tensor (see the module docs):
/// `""` saves a whole tensor, a spec saves the tensor as that slice of a larger
/// one (how TensorFlow's `Saver` saves each partition of a partitioned variable).
pub fn save_v2_slices(
    s: &Scope,
    prefix: &Output,
    names: &[String],
    shape_and_slices: &[String],
    tensors: &[Output],
) -> Result<Operation> {
    let n = string_vector(&s.with_name_scope("tensor_names"), names)?;
    let slices = string_vector(&s.with_name_scope("shape_and_slices"), shape_and_slices)?;
    s.op("SaveV2")
        .input(prefix)
        .input(&n)
        .input(&slices)
        .input_list(tensors)
        .build()
}

/// `RestoreV2`: reads the whole tensors `names`, of `dtypes`, from the checkpoint
/// at `prefix`.
pub fn restore_v2(
    s: &Scope,
    prefix: &Output,
    names: &[String],
    dtypes: &[DType],
) -> Result<Vec<Output>> {
    restore_v2_slices(s, prefix, names, &vec![String::new(); names.len()], dtypes)
}

/// `RestoreV2` with a `shape_and_slices` entry per tensor: `""` reads a whole
/// tensor, a spec reads that slice of it (whether the checkpoint holds the
/// whole tensor or slices of it).
pub fn restore_v2_slices(
    s: &Scope,
    prefix: &Output,
    names: &[String],
    shape_and_slices: &[String],
    dtypes: &[DType],
) -> Result<Vec<Output>> {
    let n = string_vector(&s.with_name_scope("tensor_names"), names)?;
    let slices = string_vector(&s.with_name_scope("shape_and_slices"), shape_and_slices)?;
    Ok(s.op("RestoreV2")
        .input(prefix)
        .input(&n)
        .input(&slices)
        .attr("dtypes", dtypes.to_vec())
        .build()?
        .outputs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    #[test]
    fn parses_tensorflow_slice_specs() {
        assert_eq!(ShapeAndSlice::parse("").unwrap(), None);
        let s = ShapeAndSlice::parse("4 5 0,2:-").unwrap().unwrap();
        assert_eq!(s.full_shape, TensorShape::new(&[4, 5]));
        assert_eq!(
            s.slice.extents(),
            [
                Extent::Range {
                    start: 0,
                    length: 2
                },
                Extent::Full
            ]
        );
        assert_eq!(s.slice_shape, TensorShape::new(&[2, 5]));
        assert_eq!(s.to_string(), "4 5 0,2:-");
        assert!(!s.is_full());
        assert!(ShapeAndSlice::parse("3 -").unwrap().unwrap().is_full());
        // A range over a whole dimension is the whole tensor, but stays a range.
        let whole = ShapeAndSlice::parse("3 0,3").unwrap().unwrap();
        assert!(whole.is_full() && !whole.slice.is_full());
        assert_eq!(whole.slice.to_string(), "0,3");
        // TensorFlow skips empty items between colons.
        assert_eq!(TensorSlice::parse("-::1,2").unwrap().rank(), 2);
        for (bad, why) in [
            ("-", "Need least two elements"),
            ("4 5 0,2", "Mismatching ranks"),
            ("4 3,2", "Extent in dimension 0 out of bounds"),
            ("x -", "Non numerical dimension"),
            ("-1 -", "Non numerical dimension"),
            ("4 1,x", "Expected a pair of numbers or '-' but got '1,x'"),
            ("4 1,2,3", "Expected a pair of numbers"),
            ("4 1,0", "positive length but got start = 1, length = 0"),
            ("4 -1,2", "Expected non-negative start"),
            ("4 5,9223372036854775807", "Extent end exceeds"),
        ] {
            let e = ShapeAndSlice::parse(bad).unwrap_err();
            assert_eq!(e.code(), crate::Code::InvalidArgument, "{bad}");
            assert!(e.message().contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn slices_intersect_as_tensorflows_do() {
        let a = TensorSlice::parse("0,4:-").unwrap();
        let b = TensorSlice::parse("2,5:1,2").unwrap();
        assert_eq!(a.intersect(&b).unwrap().to_string(), "2,2:1,2");
        assert_eq!(b.intersect(&a), a.intersect(&b));
        let c = TensorSlice::parse("4,3:-").unwrap();
        assert_eq!(a.intersect(&c), None);
        assert_eq!(a.intersect(&TensorSlice::full(3)), None);
        let full = TensorSlice::full(2);
        assert_eq!(full.intersect(&b).unwrap(), b);
        let shape = TensorShape::new(&[10, 4]);
        assert_eq!(b.bounds(&shape), [(2, 7), (1, 3)]);
        assert!(full.covers(&shape));
        assert!(TensorSlice::parse("0,10:0,4").unwrap().covers(&shape));
        assert!(!a.covers(&shape));
        assert!(TensorSlice::new(vec![Extent::Range {
            start: 0,
            length: 0
        }])
        .is_err());
    }

    #[test]
    fn builders_and_shapes() {
        let s = Scope::new();
        let prefix = ops::constant(&s, Tensor::string_scalar("/tmp/x")).unwrap();
        let a = ops::constant(&s, Tensor::vector(&[1.0f32])).unwrap();
        let b = ops::scalar(&s, 3i64).unwrap();
        let save = save_v2(&s, &prefix, &["a".into(), "b".into()], &[a, b]).unwrap();
        let def = s.graph_def();
        let n = def.find(save.name()).unwrap();
        assert_eq!(
            n.get_attr::<Vec<DType>>("dtypes").unwrap(),
            [DType::F32, DType::I64]
        );
        let outs = restore_v2(&s, &prefix, &["a".into()], &[DType::F32]).unwrap();
        assert_eq!(outs.len(), 1);
        assert_eq!(outs[0].dtype(), DType::F32);
        // a const spec gives the restored slice's shape
        let names = ops::constant(&s, Tensor::from_strings(&[1], vec!["a"]).unwrap()).unwrap();
        let specs =
            ops::constant(&s, Tensor::from_strings(&[1], vec!["4 5 1,2:-"]).unwrap()).unwrap();
        let r = s
            .op("RestoreV2")
            .input(&prefix)
            .input(&names)
            .input(&specs)
            .attr("dtypes", vec![DType::F32])
            .build1()
            .unwrap();
        assert_eq!(r.shape(), Shape::known(&[2, 5]));
        // mismatched name and spec counts
        let two = ops::constant(&s, Tensor::from_strings(&[2], vec!["a", "b"]).unwrap()).unwrap();
        assert!(s
            .op("RestoreV2")
            .input(&prefix)
            .input(&two)
            .input(&specs)
            .attr("dtypes", vec![DType::F32, DType::F32])
            .build()
            .is_err());
    }
}
