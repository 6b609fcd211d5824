//! Lookup tables (TensorFlow's `lookup_table_op.cc`, `lookup_table_init_op.cc`,
//! `initializable_lookup_table.cc`): [`HashTable`], a resource kept by the
//! device's [`ResourceMgr`] like variables and queues, and the
//! kernels of `HashTableV2`, `InitializeTableV2`, `LookupTableImportV2`,
//! `LookupTableInsertV2`, `LookupTableFindV2` and `LookupTableSizeV2`.
//!
//! A `HashTable` is TensorFlow's initializable table: empty and uninitialized when
//! created; initializing (or importing) fills it once and marks it initialized.
//! Initializing an initialized table is accepted when it would hold as many
//! entries (TensorFlow compares only the sizes) and `FailedPrecondition`
//! otherwise; a repeated key must repeat its value. A failed initialization
//! leaves the entries it inserted, uninitialized, as TensorFlow's does. Finding
//! in an uninitialized table is `FailedPrecondition`; inserting is
//! `Unimplemented` (only TensorFlow's mutable tables take inserts).
//!
//! `HashTableV2` names its table `shared_name`, else (with
//! `use_node_name_sharing`) the node's name, else a name private to the kernel
//! (`_<n>_<node>`), whose table is deleted with the kernel, as TensorFlow's
//! `ContainerInfo` does.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use graph::{DType, ResourceHandle, Result, Status, Tensor, TensorShape};
use rendezvous::sync::Mutex;

use crate::allocator::Allocator;
use crate::cpu::array::elems::Elem;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};
use crate::resource::{Resource, ResourceMgr};

/// An element a table holds (as key or value): how it is read from and written
/// to tensors, and printed as TensorFlow's C++ streams print it.
trait TableElem: Clone + PartialEq + Send + Sync + 'static {
    fn view(t: &Tensor) -> Result<&[Self]>;
    fn build(
        alloc: Allocator<'_>,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]),
    ) -> Result<Tensor>;
    fn show(&self) -> String;
}

macro_rules! pod_table_elem {
    ($($t:ty => $show:expr),*) => {$(
        impl TableElem for $t {
            fn view(t: &Tensor) -> Result<&[Self]> {
                t.as_slice::<$t>()
            }
            fn build(alloc: Allocator<'_>, shape: TensorShape, fill: impl FnOnce(&mut [Self])) -> Result<Tensor> {
                alloc.build::<$t>(shape, fill)
            }
            fn show(&self) -> String {
                let f: fn(&$t) -> String = $show;
                f(self)
            }
        }
    )*};
}

pod_table_elem!(
    i32 => |v| v.to_string(),
    i64 => |v| v.to_string(),
    f32 => |v| cpp_float(f64::from(*v)),
    f64 => |v| cpp_float(*v),
    bool => |v| if *v { "1".into() } else { "0".into() }
);

impl TableElem for Bytes {
    fn view(t: &Tensor) -> Result<&[Self]> {
        t.as_strings()
    }
    fn build(
        alloc: Allocator<'_>,
        shape: TensorShape,
        fill: impl FnOnce(&mut [Self]),
    ) -> Result<Tensor> {
        <Bytes as Elem>::build(alloc, DType::String, shape, |o| {
            fill(o);
            Ok(())
        })
    }
    fn show(&self) -> String {
        String::from_utf8_lossy(self).into_owned()
    }
}

/// A float as C++'s `ostream << double` prints it (`%g`: six significant digits,
/// trailing zeros dropped, an exponent below 1e-4 or from 1e6 on).
fn cpp_float(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    fn trim(s: &str) -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        trim(&format!("{x:.*}", (5 - exp) as usize))
    }
}

/// The typed operations of a table, behind [`HashTable`].
trait TableOps: Send + Sync {
    fn size(&self) -> usize;
    fn import(&self, keys: &Tensor, values: &Tensor) -> Result<()>;
    fn find(&self, alloc: Allocator<'_>, keys: &Tensor, default: &Tensor) -> Result<Tensor>;
}

struct TableState<K, V> {
    initialized: bool,
    map: HashMap<K, V>,
}

struct TypedTable<K, V> {
    state: RwLock<TableState<K, V>>,
}

impl<K: TableElem + Eq + Hash, V: TableElem> TableOps for TypedTable<K, V> {
    fn size(&self) -> usize {
        let s = self.state.read().unwrap_or_else(|p| p.into_inner());
        if s.initialized {
            s.map.len()
        } else {
            0
        }
    }

    /// TensorFlow's `InitializableLookupTable::Initialize` from a
    /// `KeyValueTensorIterator` (the shapes were checked by the caller).
    fn import(&self, keys: &Tensor, values: &Tensor) -> Result<()> {
        if keys.num_elements() == 0 {
            return Err(Status::invalid_argument(
                "keys and values cannot be empty tensors.",
            ));
        }
        let (k, v) = (K::view(keys)?, V::view(values)?);
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        if s.initialized {
            return if s.map.len() == k.len() {
                Ok(())
            } else {
                Err(Status::failed_precondition(
                    "Table was already initialized with different data.",
                ))
            };
        }
        s.map.reserve(k.len());
        for (key, value) in k.iter().zip(v) {
            match s.map.get(key) {
                Some(old) if old != value => {
                    return Err(Status::failed_precondition(format!(
                        "HashTable has different value for same key. Key {} has {} and trying to \
                         add value {}",
                        key.show(),
                        old.show(),
                        value.show()
                    )));
                }
                Some(_) => {}
                None => {
                    s.map.insert(key.clone(), value.clone());
                }
            }
        }
        s.initialized = true;
        Ok(())
    }

    fn find(&self, alloc: Allocator<'_>, keys: &Tensor, default: &Tensor) -> Result<Tensor> {
        let s = self.state.read().unwrap_or_else(|p| p.into_inner());
        if !s.initialized {
            return Err(Status::failed_precondition("Table not initialized."));
        }
        let k = K::view(keys)?;
        // TensorFlow takes the first element of the default, whatever its shape.
        let dflt = V::view(default)?.first();
        V::build(alloc, keys.shape().clone(), |out| {
            for (o, key) in out.iter_mut().zip(k) {
                if let Some(v) = s.map.get(key).or(dflt) {
                    *o = v.clone();
                }
            }
        })
    }
}

/// A hash table resource (TensorFlow's `lookup::HashTable`); see the module docs.
pub struct HashTable {
    key_dtype: DType,
    value_dtype: DType,
    ops: Box<dyn TableOps>,
}

impl Resource for HashTable {
    fn type_name(&self) -> &'static str {
        "HashTable"
    }
}

fn typed<K: TableElem + Eq + Hash, V: TableElem>() -> Box<dyn TableOps> {
    Box::new(TypedTable::<K, V> {
        state: RwLock::new(TableState {
            initialized: false,
            map: HashMap::new(),
        }),
    })
}

/// The (key, value) dtypes TensorFlow registers `HashTableV2` for.
pub const TABLE_DTYPES: [(DType, DType); 15] = [
    (DType::String, DType::String),
    (DType::String, DType::I64),
    (DType::String, DType::I32),
    (DType::String, DType::F32),
    (DType::String, DType::F64),
    (DType::String, DType::Bool),
    (DType::I64, DType::String),
    (DType::I64, DType::I64),
    (DType::I64, DType::I32),
    (DType::I64, DType::F32),
    (DType::I64, DType::F64),
    (DType::I32, DType::String),
    (DType::I32, DType::I32),
    (DType::I32, DType::F32),
    (DType::I32, DType::F64),
];

impl HashTable {
    /// An empty, uninitialized table; `Unimplemented` for a dtype pair TensorFlow
    /// has no `HashTable` kernel for.
    pub fn new(key_dtype: DType, value_dtype: DType) -> Result<HashTable> {
        macro_rules! with_value {
            ($k:ty) => {
                match value_dtype {
                    DType::String => typed::<$k, Bytes>(),
                    DType::I64 => typed::<$k, i64>(),
                    DType::I32 => typed::<$k, i32>(),
                    DType::F32 => typed::<$k, f32>(),
                    DType::F64 => typed::<$k, f64>(),
                    _ => typed::<$k, bool>(),
                }
            };
        }
        if !TABLE_DTYPES.contains(&(key_dtype, value_dtype)) {
            return Err(Status::unimplemented(format!(
                "no HashTable kernel for {} keys and {} values",
                key_dtype.op_spec_name(),
                value_dtype.op_spec_name()
            )));
        }
        let ops = match key_dtype {
            DType::String => with_value!(Bytes),
            DType::I64 => with_value!(i64),
            _ => with_value!(i32),
        };
        Ok(HashTable {
            key_dtype,
            value_dtype,
            ops,
        })
    }

    /// The keys' dtype.
    pub fn key_dtype(&self) -> DType {
        self.key_dtype
    }

    /// The values' dtype.
    pub fn value_dtype(&self) -> DType {
        self.value_dtype
    }

    /// The number of entries (0 until initialized).
    pub fn size(&self) -> usize {
        self.ops.size()
    }

    /// TensorFlow's `MatchSignature` of a table op: the inputs are the handle,
    /// keys of the table's key dtype and values of its value dtype (`outputs`: the
    /// op's output dtypes, the value dtype for a find).
    fn match_signature(&self, inputs: &[DType], outputs: &[DType]) -> Result<()> {
        let want_in = [DType::Resource, self.key_dtype, self.value_dtype];
        let want_out: Vec<DType> = outputs.iter().map(|_| self.value_dtype).collect();
        if inputs == want_in && outputs == want_out.as_slice() {
            return Ok(());
        }
        let names = |d: &[DType]| -> String {
            d.iter()
                .map(|d| d.op_spec_name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(Status::invalid_argument(format!(
            "Signature mismatch, have: {}->{} expected: {}->{}",
            names(inputs),
            names(outputs),
            names(&want_in),
            names(&want_out)
        )))
    }
}

/// A process-wide counter for the names of kernel-private tables (TensorFlow's
/// `ResourceMgr::GenerateUniqueId`).
fn unique_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

struct HashTableKernel {
    container: String,
    name: String,
    private: bool,
    key_dtype: DType,
    value_dtype: DType,
    /// Where the table was made, for deleting a private table with the kernel.
    made_in: Mutex<Option<(Arc<ResourceMgr>, String)>>,
}

impl OpKernel for HashTableKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let step = ctx.step();
        let container = step.container(&self.container).to_owned();
        let resources = Arc::clone(&step.device.resources);
        let table = resources.lookup_or_create(&container, &self.name, || {
            HashTable::new(self.key_dtype, self.value_dtype)
        })?;
        if (table.key_dtype, table.value_dtype) != (self.key_dtype, self.value_dtype) {
            return Err(Status::invalid_argument(format!(
                "Conflicting key/value dtypes {}->{} with {}-{} for table {}",
                self.key_dtype.op_spec_name(),
                self.value_dtype.op_spec_name(),
                table.key_dtype.op_spec_name(),
                table.value_dtype.op_spec_name(),
                self.name
            )));
        }
        if self.private {
            let mut made = self.made_in.lock();
            if made.is_none() {
                *made = Some((Arc::clone(&resources), container.clone()));
            }
        }
        let h = ResourceHandle {
            device: step.device.name.clone(),
            container,
            name: self.name.clone(),
            type_name: "HashTable".into(),
        };
        ctx.set_output(0, Tensor::resource_scalar(h))
    }
}

impl Drop for HashTableKernel {
    fn drop(&mut self) {
        if let Some((resources, container)) = self.made_in.lock().take() {
            // Already gone when its container was dropped first: nothing to do.
            let _ = resources.delete(&container, &self.name);
        }
    }
}

fn make_hash_table(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let shared: String = c.attr("shared_name")?;
    let by_node: bool = c.attr("use_node_name_sharing")?;
    let (name, private) = if !shared.is_empty() {
        (shared, false)
    } else if by_node {
        (c.name().to_owned(), false)
    } else {
        (format!("_{}_{}", unique_id(), c.name()), true)
    };
    let (key_dtype, value_dtype): (DType, DType) = (c.attr("key_dtype")?, c.attr("value_dtype")?);
    if !TABLE_DTYPES.contains(&(key_dtype, value_dtype)) {
        return Err(Status::not_found(format!(
            "No registered 'HashTableV2' OpKernel for CPU devices compatible with node {} \
             (key_dtype={}, value_dtype={})",
            c.name(),
            key_dtype.op_spec_name(),
            value_dtype.op_spec_name()
        )));
    }
    Ok(Box::new(HashTableKernel {
        container: c.attr("container")?,
        name,
        private,
        key_dtype,
        value_dtype,
        made_in: Mutex::new(None),
    }))
}

/// The table behind input 0's handle.
fn table_of(ctx: &OpKernelContext<'_>) -> Result<Arc<HashTable>> {
    let h = crate::cpu::state::handle(ctx)?;
    ctx.step()
        .device
        .resources
        .lookup::<HashTable>(&h.container, &h.name)
}

/// TensorFlow's `CheckKeyAndValueTensorsHelper` for scalar keys and values: the
/// values must have the keys' shape.
fn check_values_shape(keys: &Tensor, values: &Tensor) -> Result<()> {
    if keys.shape() != values.shape() {
        return Err(Status::invalid_argument(format!(
            "Expected shape {} for value, got {}",
            keys.shape(),
            values.shape()
        )));
    }
    Ok(())
}

/// The table ops that take `(handle, keys, values)`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    Initialize,
    Import,
    Insert,
}

struct FillKernel {
    kind: Fill,
}

impl OpKernel for FillKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let table = table_of(ctx)?;
        let (keys, values) = (ctx.input(1)?, ctx.input(2)?);
        table.match_signature(&[DType::Resource, keys.dtype(), values.dtype()], &[])?;
        match self.kind {
            Fill::Initialize => {
                if keys.rank() != 1 {
                    return Err(Status::invalid_argument(format!(
                        "Keys must be a vector, but received shape{}",
                        keys.shape()
                    )));
                }
                if values.rank() != 1 {
                    return Err(Status::invalid_argument(format!(
                        "Values must be a vector, but received shape{}",
                        values.shape()
                    )));
                }
                if keys.num_elements() != values.num_elements() {
                    return Err(Status::invalid_argument(format!(
                        "Keys and values must have the same size {} vs {}",
                        keys.num_elements(),
                        values.num_elements()
                    )));
                }
                table.ops.import(keys, values)
            }
            Fill::Import => {
                check_values_shape(keys, values)?;
                table.ops.import(keys, values)
            }
            Fill::Insert => {
                check_values_shape(keys, values)?;
                Err(Status::unimplemented(
                    "Insert not supported by InitializableLookupTable implementations",
                ))
            }
        }
    }
}

struct FindKernel;

impl OpKernel for FindKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let table = table_of(ctx)?;
        let (keys, default) = (ctx.input(1)?, ctx.input(2)?);
        // The output's dtype is the default's (`Tout`).
        table.match_signature(
            &[DType::Resource, keys.dtype(), default.dtype()],
            &[default.dtype()],
        )?;
        if !default.shape().is_scalar() && default.shape() != keys.shape() {
            return Err(Status::invalid_argument(format!(
                "Expected shape [] or {} for default value, got {}",
                keys.shape(),
                default.shape()
            )));
        }
        let out = table.ops.find(ctx.allocator(), keys, default)?;
        ctx.set_output(0, out)
    }
}

struct SizeKernel;

impl OpKernel for SizeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = table_of(ctx)?.size();
        ctx.set_output(0, Tensor::scalar(n as i64))
    }
}

/// Registers the table kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("HashTableV2", make_hash_table));
    r.register(KernelDef::cpu("InitializeTableV2", |_| {
        Ok(Box::new(FillKernel {
            kind: Fill::Initialize,
        }))
    }));
    r.register(KernelDef::cpu("LookupTableImportV2", |_| {
        Ok(Box::new(FillKernel { kind: Fill::Import }))
    }));
    r.register(KernelDef::cpu("LookupTableInsertV2", |_| {
        Ok(Box::new(FillKernel { kind: Fill::Insert }))
    }));
    r.register(KernelDef::cpu("LookupTableFindV2", |_| {
        Ok(Box::new(FindKernel))
    }));
    r.register(KernelDef::cpu("LookupTableSizeV2", |_| {
        Ok(Box::new(SizeKernel))
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Entry;
    use crate::testutil::{run_node_in, test_device, test_step};
    use graph::{AttrValue, Code, NodeDef};

    fn table_node(name: &str, k: DType, v: DType, shared: &str) -> NodeDef {
        NodeDef::new(name, "HashTableV2")
            .with_attr("key_dtype", AttrValue::from(k))
            .with_attr("value_dtype", AttrValue::from(v))
            .with_attr("shared_name", AttrValue::from(shared))
    }

    fn op(name: &str, op: &str, attrs: &[(&str, DType)]) -> NodeDef {
        let mut n = NodeDef::new(name, op)
            .with_input("t")
            .with_input("a")
            .with_input("b");
        if op == "LookupTableSizeV2" {
            n = NodeDef::new(name, op).with_input("t");
        }
        for (k, d) in attrs {
            n = n.with_attr(k, AttrValue::from(*d));
        }
        n
    }

    #[test]
    fn initialize_find_size_and_errors() {
        let device = test_device();
        let step = test_step(&device);
        // A private table lives as long as its kernel, which run_node_in drops:
        // a shared name keeps it in the resource manager.
        let handle = run_node_in(
            &step,
            table_node("t", DType::String, DType::I64, "t1"),
            vec![],
        )
        .unwrap()
        .remove(0);
        let v = |t: Tensor| Entry::Value(t);
        let size = |step| {
            let out = run_node_in(
                step,
                op("s", "LookupTableSizeV2", &[]),
                vec![handle.clone()],
            );
            out.unwrap().remove(0)
        };
        let find_node = op(
            "f",
            "LookupTableFindV2",
            &[("Tin", DType::String), ("Tout", DType::I64)],
        );
        let keys = Tensor::from_strings(&[2, 2], vec!["a", "zz", "b", "a"]).unwrap();
        let e = run_node_in(
            &step,
            find_node.clone(),
            vec![handle.clone(), v(keys.clone()), v(Tensor::scalar(-1i64))],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition);
        let init = op(
            "i",
            "InitializeTableV2",
            &[("Tkey", DType::String), ("Tval", DType::I64)],
        );
        let ks = Tensor::from_strings(&[3], vec!["a", "b", "a"]).unwrap();
        let e = run_node_in(
            &step,
            init.clone(),
            vec![handle.clone(), v(ks), v(Tensor::vector(&[1i64, 2, 3]))],
        )
        .unwrap_err();
        assert!(
            e.message()
                .contains("Key a has 1 and trying to add value 3"),
            "{e}"
        );
        let ks = Tensor::from_strings(&[2], vec!["a", "b"]).unwrap();
        run_node_in(
            &step,
            init.clone(),
            vec![handle.clone(), v(ks), v(Tensor::vector(&[1i64, 2]))],
        )
        .unwrap();
        let Entry::Value(n) = size(&step) else {
            panic!()
        };
        assert_eq!(n, Tensor::scalar(2i64));
        let out = run_node_in(
            &step,
            find_node,
            vec![handle.clone(), v(keys), v(Tensor::scalar(-1i64))],
        )
        .unwrap()
        .remove(0);
        let Entry::Value(out) = out else { panic!() };
        assert_eq!(out, Tensor::new(&[2, 2], vec![1i64, -1, 2, 1]).unwrap());
        let ks = Tensor::from_strings(&[3], vec!["a", "b", "c"]).unwrap();
        let e = run_node_in(
            &step,
            init,
            vec![handle.clone(), v(ks), v(Tensor::vector(&[1i64, 2, 3]))],
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Table was already initialized with different data."
        );
        // The same shared name with other dtypes is refused.
        let e = run_node_in(&step, table_node("u", DType::I64, DType::F32, "t2"), vec![]);
        assert!(e.is_ok());
        let e = run_node_in(
            &step,
            table_node("w", DType::String, DType::I64, "t2"),
            vec![],
        )
        .unwrap_err();
        assert!(e
            .message()
            .contains("Conflicting key/value dtypes string->int64 with int64-float"));
    }

    #[test]
    fn private_tables_go_with_their_kernel() {
        let device = test_device();
        let step = test_step(&device);
        let before = device.resources.len("test");
        let handle = run_node_in(&step, table_node("p", DType::I64, DType::F64, ""), vec![])
            .unwrap()
            .remove(0);
        let Entry::Value(h) = handle else { panic!() };
        assert!(h.as_resource_handles().unwrap()[0].name.ends_with("_p"));
        assert_eq!(device.resources.len("test"), before);
        let shared = NodeDef::new("n", "HashTableV2")
            .with_attr("key_dtype", AttrValue::from(DType::I32))
            .with_attr("value_dtype", AttrValue::from(DType::I32))
            .with_attr("use_node_name_sharing", AttrValue::from(true));
        let handle = run_node_in(&step, shared, vec![]).unwrap().remove(0);
        let Entry::Value(h) = handle else { panic!() };
        assert_eq!(h.as_resource_handles().unwrap()[0].name, "n");
        assert_eq!(device.resources.len("test"), before + 1);
        let e =
            run_node_in(&step, table_node("b", DType::Bool, DType::F32, ""), vec![]).unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
    }

    #[test]
    fn cpp_float_formats_like_ostream() {
        assert_eq!(cpp_float(1.0), "1");
        assert_eq!(cpp_float(0.5), "0.5");
        assert_eq!(cpp_float(0.1f32 as f64), "0.1");
        assert_eq!(cpp_float(123456.0), "123456");
        assert_eq!(cpp_float(1234567.0), "1.23457e+06");
        assert_eq!(cpp_float(1e-5), "1e-05");
        assert_eq!(cpp_float(-2.5e-4), "-0.00025");
    }
}
