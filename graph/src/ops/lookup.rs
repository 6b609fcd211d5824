//! Lookup tables (TensorFlow's `lookup_ops.cc`): `HashTableV2` creates (or finds)
//! a hash table resource in the device's resource manager and outputs its handle;
//! `InitializeTableV2` / `LookupTableImportV2` fill it once with keys and values
//! (a table is immutable once initialized: initializing it again with as many
//! entries is accepted and ignored, with a different number it is
//! `FailedPrecondition`); `LookupTableFindV2` maps keys to values, a key not in
//! the table giving `default_value`; `LookupTableSizeV2` counts the entries.
//! `LookupTableInsertV2` exists for TensorFlow's mutable tables; on a `HashTable`
//! it is `Unimplemented`, as in TensorFlow.
//!
//! Tables are named like queues: `shared_name`, else with
//! `use_node_name_sharing` the node's name, else a name private to the kernel;
//! `container` empty means the session's. Their key/value dtypes are those
//! TensorFlow registers `HashTableV2` for: string keys with string, int64, int32,
//! float, double or bool values; int64 keys with string, int64, int32, float or
//! double values; int32 keys with string, int32, float or double values.

use crate::builder::{Operation, Output, Scope};
use crate::op_def::shape_fn::{self, merge_dim, merge_shapes, with_rank, with_rank_at_least};
use crate::op_def::OpDef;
use crate::{DType, OpRegistry, Result, Shape};

/// Registers the lookup-table ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("HashTableV2")
            .output("table_handle: resource")
            .attr("container: string = ''")
            .attr("shared_name: string = ''")
            .attr("use_node_name_sharing: bool = false")
            .attr("key_dtype: type")
            .attr("value_dtype: type")
            .stateful()
            .shape_fn(shape_fn::scalar),
    );
    r.register(
        OpDef::build("LookupTableFindV2")
            .input("table_handle: resource")
            .input("keys: Tin")
            .input("default_value: Tout")
            .output("values: Tout")
            .attr("Tin: type")
            .attr("Tout: type")
            .stateful()
            // The handle carries no shape data (as from `HashTableV2` in
            // TensorFlow), so the values' shape is unknown.
            .shape_fn(|c| {
                with_rank(&c.input(0), 0)?;
                c.set_output(0, Shape::unknown())
            }),
    );
    r.register(
        OpDef::build("LookupTableImportV2")
            .input("table_handle: resource")
            .input("keys: Tin")
            .input("values: Tout")
            .attr("Tin: type")
            .attr("Tout: type")
            .stateful()
            .shape_fn(|c| {
                with_rank(&c.input(0), 0)?;
                let keys = with_rank(&c.input(1), 1)?;
                let values = with_rank_at_least(&c.input(2), 1)?;
                merge_dim(keys.dim(0), values.dims().and_then(|d| d[0]))?;
                Ok(())
            }),
    );
    r.register(
        OpDef::build("LookupTableInsertV2")
            .input("table_handle: resource")
            .input("keys: Tin")
            .input("values: Tout")
            .attr("Tin: type")
            .attr("Tout: type")
            .stateful()
            .shape_fn(|c| with_rank(&c.input(0), 0).map(|_| ())),
    );
    r.register(
        OpDef::build("LookupTableSizeV2")
            .input("table_handle: resource")
            .output("size: int64")
            .stateful()
            .shape_fn(|c| {
                with_rank(&c.input(0), 0)?;
                c.set_output(0, Shape::scalar())
            }),
    );
    r.register(
        OpDef::build("InitializeTableV2")
            .input("table_handle: resource")
            .input("keys: Tkey")
            .input("values: Tval")
            .attr("Tkey: type")
            .attr("Tval: type")
            .stateful()
            .shape_fn(|c| {
                with_rank(&c.input(0), 0)?;
                let keys = with_rank(&c.input(1), 1)?;
                merge_shapes(&keys, &c.input(2))?;
                Ok(())
            }),
    );
}

/// How a table is named in the resource manager.
#[derive(Clone, Debug, Default)]
pub struct TableOptions {
    /// The container (empty: the session's).
    pub container: String,
    /// The table's name there; empty: see [`Self::use_node_name_sharing`].
    pub shared_name: String,
    /// With an empty `shared_name`, name the table after the node (so graphs
    /// built alike share it) instead of privately to the kernel.
    pub use_node_name_sharing: bool,
}

/// `HashTableV2`: the handle of a hash table from `key_dtype` to `value_dtype`,
/// created empty (uninitialized) the first time the node runs.
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, ops, DType, Shape, Tensor};
/// let s = Scope::new();
/// let table = ops::hash_table(&s, DType::String, DType::I64, &Default::default()).unwrap();
/// let keys = ops::constant(&s, Tensor::from_strings(&[2], vec!["a", "b"]).unwrap()).unwrap();
/// let values = ops::constant(&s, Tensor::vector(&[1i64, 2])).unwrap();
/// let init = ops::initialize_table(&s, &table, &keys, &values).unwrap();
/// let query = ops::placeholder(&s, DType::String, Shape::known(&[3])).unwrap();
/// let dflt = ops::constant(&s, Tensor::scalar(-1i64)).unwrap();
/// let ids = ops::lookup_table_find(&s, &table, &query, &dflt).unwrap();
/// assert_eq!(ids.dtype(), DType::I64);
/// # let _ = init;
/// ```
pub fn hash_table(
    s: &Scope,
    key_dtype: DType,
    value_dtype: DType,
    o: &TableOptions,
) -> Result<Output> {
    s.op("HashTableV2")
        .attr("container", o.container.as_str())
        .attr("shared_name", o.shared_name.as_str())
        .attr("use_node_name_sharing", o.use_node_name_sharing)
        .attr("key_dtype", key_dtype)
        .attr("value_dtype", value_dtype)
        .build1()
}

/// `InitializeTableV2`: fills `table` with `keys` → `values` (vectors of one
/// length, of the table's dtypes). A repeated key must repeat its value
/// (`FailedPrecondition` otherwise); empty vectors are `InvalidArgument`.
pub fn initialize_table(
    s: &Scope,
    table: &Output,
    keys: &Output,
    values: &Output,
) -> Result<Operation> {
    s.op("InitializeTableV2")
        .input(table)
        .input(keys)
        .input(values)
        .build()
}

/// `LookupTableImportV2`: as [`initialize_table`] (TensorFlow restores a
/// `HashTable` from a checkpoint with it).
pub fn lookup_table_import(
    s: &Scope,
    table: &Output,
    keys: &Output,
    values: &Output,
) -> Result<Operation> {
    s.op("LookupTableImportV2")
        .input(table)
        .input(keys)
        .input(values)
        .build()
}

/// `LookupTableInsertV2`: adds entries to a mutable table; a `HashTableV2` is
/// immutable, so this is `Unimplemented` at run time, as in TensorFlow.
pub fn lookup_table_insert(
    s: &Scope,
    table: &Output,
    keys: &Output,
    values: &Output,
) -> Result<Operation> {
    s.op("LookupTableInsertV2")
        .input(table)
        .input(keys)
        .input(values)
        .build()
}

/// `LookupTableFindV2`: the value of each of `keys` (any shape; the output has
/// its shape), `default_value` (a scalar, or a tensor of `keys`' shape of which
/// TensorFlow uses the first element) for keys not in the table. The table must
/// be initialized (`FailedPrecondition` otherwise).
pub fn lookup_table_find(
    s: &Scope,
    table: &Output,
    keys: &Output,
    default_value: &Output,
) -> Result<Output> {
    s.op("LookupTableFindV2")
        .input(table)
        .input(keys)
        .input(default_value)
        .build1()
}

/// `LookupTableSizeV2`: the number of entries (0 before initialization), int64.
pub fn lookup_table_size(s: &Scope, table: &Output) -> Result<Output> {
    s.op("LookupTableSizeV2").input(table).build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::placeholder;

    #[test]
    fn table_op_shapes() {
        let s = Scope::new();
        let t = hash_table(&s, DType::String, DType::I64, &TableOptions::default()).unwrap();
        assert_eq!(t.shape(), Shape::scalar());
        let keys = placeholder(&s, DType::String, Shape::known(&[3])).unwrap();
        let vals = placeholder(&s, DType::I64, Shape::known(&[4])).unwrap();
        let e = initialize_table(&s, &t, &keys, &vals).unwrap_err();
        assert!(
            e.message()
                .contains("Dimension 0 in both shapes must be equal"),
            "{e}"
        );
        let e = lookup_table_import(&s, &t, &keys, &vals).unwrap_err();
        assert!(
            e.message()
                .contains("Dimensions must be equal, but are 3 and 4"),
            "{e}"
        );
        lookup_table_insert(&s, &t, &keys, &vals).unwrap();
        let dflt = placeholder(&s, DType::I64, Shape::scalar()).unwrap();
        let found = lookup_table_find(&s, &t, &keys, &dflt).unwrap();
        assert_eq!(found.shape(), Shape::unknown());
        let handles = placeholder(&s, DType::Resource, Shape::known(&[2])).unwrap();
        let e = lookup_table_size(&s, &handles).unwrap_err();
        assert!(
            e.message().contains("Shape must be rank 0 but is rank 1"),
            "{e}"
        );
        assert_eq!(lookup_table_size(&s, &t).unwrap().dtype(), DType::I64);
    }
}
