//! Checkpoint ops with TensorFlow's signatures (`io_ops.cc`): `SaveV2` writes named
//! tensors to the checkpoint at `prefix`, `RestoreV2` reads them back,
//! `MergeV2Checkpoints` merges the shards of a sharded save, and
//! `ShardedFilename`/`ShardedFilespec` name the shards. The format is TensorFlow's
//! tensor bundle (the kernels' `cpu::checkpoint` module reads and writes it);
//! `shape_and_slices` specs are parsed here by [`ShapeAndSlice`].
//!
//! A `shape_and_slices` entry is `""` for a whole tensor, or TensorFlow's
//! `"<dim0> <dim1> … <slice>"`: the full tensor's shape, then a slice spec with one
//! `-` (the whole dimension) or `start,length` per dimension, joined by `:`
//! (`"4 5 0,2:-"` is rows 0–1 of a 4×5 tensor).

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
                    Some(sl) => Some(Shape::from(sl.slice_shape())),
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

/// A parsed non-empty `shape_and_slices` entry: the full tensor's shape and the
/// part of it meant (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeAndSlice {
    /// The full tensor's shape.
    pub full_shape: TensorShape,
    /// Per dimension, the `(start, length)` of the slice.
    pub extents: Vec<(usize, usize)>,
}

impl ShapeAndSlice {
    /// Parses an entry: `Ok(None)` for `""` (the whole tensor), `InvalidArgument`
    /// for a malformed spec or a slice outside the shape.
    pub fn parse(spec: &str) -> Result<Option<ShapeAndSlice>> {
        if spec.is_empty() {
            return Ok(None);
        }
        let bad = |why: &str| {
            Status::invalid_argument(format!("invalid shape_and_slice spec '{spec}': {why}"))
        };
        let parts: Vec<&str> = spec.split(' ').collect();
        let Some((slice, dims)) = parts.split_last() else {
            return Err(bad("empty"));
        };
        if dims.is_empty() {
            return Err(bad("need the full shape and a slice"));
        }
        let dims: Vec<usize> = dims
            .iter()
            .map(|d| d.parse::<usize>().map_err(|_| bad("bad dimension")))
            .collect::<Result<_>>()?;
        let specs: Vec<&str> = slice.split(':').collect();
        if specs.len() != dims.len() {
            return Err(bad("the slice's rank differs from the shape's"));
        }
        let mut extents = Vec::with_capacity(dims.len());
        for (d, s) in dims.iter().zip(specs) {
            if s == "-" {
                extents.push((0, *d));
                continue;
            }
            let (a, b) = s.split_once(',').ok_or_else(|| bad("bad slice"))?;
            let start: usize = a.parse().map_err(|_| bad("bad slice start"))?;
            let len: usize = b.parse().map_err(|_| bad("bad slice length"))?;
            if start.checked_add(len).is_none_or(|end| end > *d) {
                return Err(bad("slice outside the shape"));
            }
            extents.push((start, len));
        }
        Ok(Some(ShapeAndSlice {
            full_shape: TensorShape::new(&dims),
            extents,
        }))
    }

    /// The shape of the slice.
    pub fn slice_shape(&self) -> TensorShape {
        let d: Vec<usize> = self.extents.iter().map(|e| e.1).collect();
        TensorShape::new(&d)
    }

    /// True when the slice is the whole tensor.
    pub fn is_full(&self) -> bool {
        self.extents
            .iter()
            .zip(self.full_shape.dims())
            .all(|(e, d)| e.0 == 0 && e.1 == *d)
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
    let n = string_vector(&s.with_name_scope("tensor_names"), names)?;
    let slices = string_vector(
        &s.with_name_scope("shape_and_slices"),
        &vec![String::new(); names.len()],
    )?;
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
    let n = string_vector(&s.with_name_scope("tensor_names"), names)?;
    let slices = string_vector(
        &s.with_name_scope("shape_and_slices"),
        &vec![String::new(); names.len()],
    )?;
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
        assert_eq!(s.extents, [(0, 2), (0, 5)]);
        assert_eq!(s.slice_shape(), TensorShape::new(&[2, 5]));
        assert!(!s.is_full());
        assert!(ShapeAndSlice::parse("3 -").unwrap().unwrap().is_full());
        for bad in ["-", "4 5 0,2", "4 3,2", "x -", "4 1,x"] {
            assert!(ShapeAndSlice::parse(bad).is_err(), "{bad}");
        }
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
