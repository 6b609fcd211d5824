//! [`KernelRegistry`]: kernels by (op, device type, type and attribute
//! constraints), as TensorFlow's
//! `REGISTER_KERNEL_BUILDER(Name(op).Device(d).TypeConstraint<T>("T").AttrConstraint(…))`.
//! The placer asks it which device types can run a node; partition build asks it to
//! instantiate each node's kernel.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use graph::{AttrValue, DType, NodeDef, Result, Status};

use crate::op_kernel::{OpKernel, OpKernelConstruction};

/// The CPU device type.
pub const DEVICE_CPU: &str = "CPU";

/// Builds a kernel for one node.
pub type KernelFactory = fn(&OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>>;

/// One registered kernel.
#[derive(Clone)]
pub struct KernelDef {
    /// The op.
    pub op: &'static str,
    /// The device type.
    pub device_type: &'static str,
    /// Type attributes and the dtypes this kernel accepts for them.
    pub constraints: Vec<(&'static str, Vec<DType>)>,
    /// String attributes and the one value this kernel accepts for each.
    pub attr_constraints: Vec<(&'static str, &'static str)>,
    /// Builds the kernel.
    pub factory: KernelFactory,
}

impl KernelDef {
    /// A CPU kernel for `op` built by `factory`.
    pub fn cpu(op: &'static str, factory: KernelFactory) -> KernelDef {
        KernelDef {
            op,
            device_type: DEVICE_CPU,
            constraints: vec![],
            attr_constraints: vec![],
            factory,
        }
    }

    /// Restricts the type attribute `attr` (a `type` or `list(type)`) to `types`.
    pub fn type_constraint(mut self, attr: &'static str, types: &[DType]) -> KernelDef {
        self.constraints.push((attr, types.to_vec()));
        self
    }

    /// Restricts the string attribute `attr` to `value` (TensorFlow's
    /// `AttrConstraint`, e.g. a CPU kernel for `data_format = "NHWC"` only): a node
    /// with another value finds no kernel here.
    pub fn attr_constraint(mut self, attr: &'static str, value: &'static str) -> KernelDef {
        self.attr_constraints.push((attr, value));
        self
    }

    fn accepts(&self, node: &NodeDef) -> bool {
        let types = self
            .constraints
            .iter()
            .all(|(attr, allowed)| match node.attr.get(attr) {
                Some(AttrValue::Type(t)) => allowed.contains(t),
                Some(AttrValue::List(l)) => l.type_.iter().all(|t| allowed.contains(t)),
                _ => false,
            });
        types
            && self.attr_constraints.iter().all(
                |(attr, want)| matches!(node.attr.get(attr), Some(AttrValue::S(v)) if v == want),
            )
    }
}

/// Registered kernels; see the module docs.
#[derive(Default)]
pub struct KernelRegistry {
    /// By op, then by device type (a handful per op).
    kernels: HashMap<&'static str, Vec<(&'static str, Vec<KernelDef>)>>,
}

impl KernelRegistry {
    /// An empty registry.
    pub fn new() -> KernelRegistry {
        KernelRegistry::default()
    }

    /// A registry with every built-in kernel.
    pub fn with_builtin_kernels() -> KernelRegistry {
        let mut r = KernelRegistry::new();
        crate::cpu::register_all_kernels(&mut r);
        r
    }

    /// The process-wide registry of built-in kernels.
    pub fn global() -> &'static Arc<KernelRegistry> {
        static GLOBAL: OnceLock<Arc<KernelRegistry>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(KernelRegistry::with_builtin_kernels()))
    }

    /// Adds a kernel.
    pub fn register(&mut self, def: KernelDef) {
        let by_device = self.kernels.entry(def.op).or_default();
        match by_device.iter_mut().find(|(d, _)| *d == def.device_type) {
            Some((_, defs)) => defs.push(def),
            None => by_device.push((def.device_type, vec![def])),
        }
    }

    /// The kernel for `node` (attributes with defaults filled in) on `device_type`,
    /// or `NotFound` explaining what is registered.
    pub fn find(&self, node: &NodeDef, device_type: &str) -> Result<&KernelDef> {
        let candidates = self.defs(&node.op, device_type);
        candidates.iter().find(|k| k.accepts(node)).ok_or_else(|| {
            let types: Vec<String> = node
                .attr
                .iter()
                .filter_map(|(k, v)| match v {
                    AttrValue::Type(t) => Some(format!("{k}={t}")),
                    _ => None,
                })
                .collect();
            Status::not_found(format!(
                "No registered '{}' OpKernel for '{device_type}' devices compatible with node {} ({}); {} kernel(s) registered for this op and device",
                node.op,
                node.name,
                types.join(", "),
                candidates.len()
            ))
            .with_node(&node.name)
        })
    }

    /// True when some kernel can run `node` on `device_type`.
    pub fn supports(&self, node: &NodeDef, device_type: &str) -> bool {
        self.defs(&node.op, device_type)
            .iter()
            .any(|k| k.accepts(node))
    }

    /// The kernels registered for `op` on `device_type`.
    fn defs(&self, op: &str, device_type: &str) -> &[KernelDef] {
        self.kernels
            .get(op)
            .and_then(|by_device| by_device.iter().find(|(d, _)| *d == device_type))
            .map_or(&[], |(_, defs)| defs.as_slice())
    }

    /// Builds the kernel for a node; errors name the node.
    pub fn create(&self, c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
        let def = self.find(c.node, &c.device.device_type)?;
        (def.factory)(c).map_err(|e| e.with_node(&c.node.name))
    }

    /// The ops with at least one kernel on `device_type`, sorted.
    pub fn ops_for_device(&self, device_type: &str) -> Vec<&'static str> {
        let mut v: Vec<_> = self
            .kernels
            .iter()
            .filter(|(_, by_device)| by_device.iter().any(|(d, _)| *d == device_type))
            .map(|(op, _)| *op)
            .collect();
        v.sort_unstable();
        v
    }
}
