//! [`replica_device_setter`]: TensorFlow's
//! `tf.compat.v1.train.replica_device_setter` (`device_setter.py`), the device
//! function of between-graph replicated training: variables (and the other ops of
//! [`STANDARD_PS_OPS`]) go to the parameter-server job, spread over its tasks by a
//! strategy (round robin by default), and every other op to the worker device.
//!
//! As TensorFlow's `_ReplicaDeviceChooser.device_function`, for a node whose
//! device so far (from device scopes nested inside the setter's, or the builder)
//! is `current`:
//!
//! 1. without `merge_devices`, a node with a device keeps it;
//! 2. a PS op gets `ps_device`, with the strategy's task when `ps_device` names a
//!    job that `current` does not contradict (no job, or the same job), and then
//!    every field `current` sets replaces `ps_device`'s;
//! 3. any other op gets `worker_device` with every field `current` sets replacing
//!    its own.
//!
//! The strategy is shared by every node the setter places, so successive
//! variables go to tasks 0, 1, …, `ps_tasks - 1`, 0, … Use the function with
//! [`Scope::with_device_fn`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::builder::{DeviceFunction, DeviceRequest, Scope};
use crate::{DeviceName, Result};

/// The op types placed on parameter servers by default (TensorFlow's
/// `STANDARD_PS_OPS`).
pub const STANDARD_PS_OPS: &[&str] = &[
    "Variable",
    "VariableV2",
    "AutoReloadVariable",
    "MutableHashTable",
    "MutableHashTableV2",
    "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable",
    "MutableDenseHashTableV2",
    "VarHandleOp",
];

/// Chooses the parameter-server task of a PS op (TensorFlow's `ps_strategy`).
pub type PsStrategy = Arc<dyn Fn(&DeviceRequest<'_>) -> u32 + Send + Sync>;

/// TensorFlow's `_RoundRobinStrategy`: tasks 0, 1, …, `num_tasks - 1`, 0, … in
/// the order the nodes are created.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::DeviceRequest;
/// use actorflow_graph::train::round_robin_strategy;
/// let next = round_robin_strategy(2);
/// let v = DeviceRequest { op_type: "VariableV2", name: "v", device: "" };
/// assert_eq!([next(&v), next(&v), next(&v)], [0, 1, 0]);
/// ```
pub fn round_robin_strategy(num_tasks: u32) -> PsStrategy {
    let next = Mutex::new(0u32);
    Arc::new(move |_| {
        let mut n = next.lock().unwrap_or_else(|p| p.into_inner());
        let task = *n;
        *n = (*n + 1) % num_tasks.max(1);
        task
    })
}

/// The arguments of [`replica_device_setter`], with TensorFlow's defaults.
#[derive(Clone)]
pub struct ReplicaDeviceSetter {
    /// Tasks of the PS job (ignored when `cluster` is given).
    pub ps_tasks: u32,
    /// The PS device (`""`: no PS job is used).
    pub ps_device: String,
    /// The worker device (`""`: no worker job is used).
    pub worker_device: String,
    /// Merge the node's own device fields instead of keeping its device as is.
    pub merge_devices: bool,
    /// Jobs of the cluster and their number of tasks; when given, `ps_tasks` is
    /// the PS job's size.
    pub cluster: Option<BTreeMap<String, u32>>,
    /// The op types placed on PS tasks (`None`: [`STANDARD_PS_OPS`]).
    pub ps_ops: Option<Vec<String>>,
    /// Chooses a PS op's task (`None`: [`round_robin_strategy`] over the tasks).
    pub ps_strategy: Option<PsStrategy>,
}

impl Default for ReplicaDeviceSetter {
    fn default() -> ReplicaDeviceSetter {
        ReplicaDeviceSetter {
            ps_tasks: 0,
            ps_device: "/job:ps".into(),
            worker_device: "/job:worker".into(),
            merge_devices: true,
            cluster: None,
            ps_ops: None,
            ps_strategy: None,
        }
    }
}

impl std::fmt::Debug for ReplicaDeviceSetter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaDeviceSetter")
            .field("ps_tasks", &self.ps_tasks)
            .field("ps_device", &self.ps_device)
            .field("worker_device", &self.worker_device)
            .field("merge_devices", &self.merge_devices)
            .field("cluster", &self.cluster)
            .field("ps_ops", &self.ps_ops)
            .field("ps_strategy", &self.ps_strategy.as_ref().map(|_| "custom"))
            .finish()
    }
}

/// The device function of `o` (see the module docs), or `None` when there are no
/// PS tasks (TensorFlow returns `None` too: no device function). A malformed
/// `ps_device` or `worker_device` is `InvalidArgument`.
///
/// # Examples
/// ```
/// use actorflow_graph::builder::Scope;
/// use actorflow_graph::ops::{self, Variable};
/// use actorflow_graph::train::{replica_device_setter, ReplicaDeviceSetter};
/// use actorflow_graph::Tensor;
/// let root = Scope::new();
/// let setter = replica_device_setter(&ReplicaDeviceSetter { ps_tasks: 2, ..Default::default() })
///     .unwrap()
///     .unwrap();
/// let s = root.with_device_fn(setter);
/// let init = ops::constant(&s, Tensor::scalar(0.0f32)).unwrap();
/// let v1 = Variable::new(&s, "v1", &init, true).unwrap();
/// let v2 = Variable::new(&s, "v2", &init, true).unwrap();
/// let g = root.graph_def();
/// assert_eq!(g.find("v1").unwrap().device, "/job:ps/task:0");
/// assert_eq!(g.find("v2").unwrap().device, "/job:ps/task:1");
/// assert_eq!(g.find(init.op().name()).unwrap().device, "/job:worker");
/// # let _ = (v1, v2);
/// ```
pub fn replica_device_setter(o: &ReplicaDeviceSetter) -> Result<Option<DeviceFunction>> {
    let ps_device = DeviceName::parse(&o.ps_device)?;
    let worker_device = DeviceName::parse(&o.worker_device)?;
    let ps_tasks = match &o.cluster {
        None => o.ps_tasks,
        Some(jobs) => match ps_device.job.as_ref().and_then(|j| jobs.get(j)) {
            Some(&n) => n,
            None => return Ok(None),
        },
    };
    if ps_tasks == 0 {
        return Ok(None);
    }
    let ps_ops: Vec<String> = match &o.ps_ops {
        Some(ops) => ops.clone(),
        None => STANDARD_PS_OPS.iter().map(|s| (*s).to_owned()).collect(),
    };
    let strategy = o
        .ps_strategy
        .clone()
        .unwrap_or_else(|| round_robin_strategy(ps_tasks));
    let use_ps = !o.ps_device.trim().is_empty();
    let merge_devices = o.merge_devices;
    Ok(Some(Arc::new(move |n: &DeviceRequest<'_>| {
        if !merge_devices && !n.device.is_empty() {
            return Ok(n.device.to_owned());
        }
        let current = DeviceName::parse(n.device)?;
        if use_ps && ps_ops.iter().any(|op| op == n.op_type) {
            let mut ps = ps_device.clone();
            if ps.job.is_some() && (current.job.is_none() || current.job == ps.job) {
                ps.task = Some(strategy(n));
            }
            return Ok(ps.overridden_by(&current).to_string());
        }
        Ok(worker_device.overridden_by(&current).to_string())
    })))
}

/// `s` with the device function of `o` (see [`replica_device_setter`]); `s`
/// itself when there are no PS tasks.
pub fn with_replica_device_setter(s: &Scope, o: &ReplicaDeviceSetter) -> Result<Scope> {
    Ok(match replica_device_setter(o)? {
        Some(f) => s.with_device_fn(f),
        None => s.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{self, ResourceVariable, Variable};
    use crate::{Code, Tensor};

    fn device_of(s: &Scope, node: &str) -> String {
        s.graph_def()
            .find(node)
            .unwrap_or_else(|| panic!("no node {node}"))
            .device
            .clone()
    }

    fn setter(o: ReplicaDeviceSetter) -> DeviceFunction {
        replica_device_setter(&o).unwrap().unwrap()
    }

    #[test]
    fn variables_alternate_ps_tasks_and_ops_go_to_the_worker() {
        let root = Scope::new();
        let s = root.with_device_fn(setter(ReplicaDeviceSetter {
            ps_tasks: 2,
            worker_device: "/job:worker/task:3".into(),
            ..Default::default()
        }));
        let init = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        let w = Variable::new(&s, "w", &init, true).unwrap();
        let b = Variable::new(&s, "b", &init, true).unwrap();
        let r = ResourceVariable::new(&s, "r", &init, true).unwrap();
        let y = ops::add(&s, &w.value, &b.value).unwrap();
        assert_eq!(device_of(&root, "w"), "/job:ps/task:0");
        assert_eq!(device_of(&root, "b"), "/job:ps/task:1");
        assert_eq!(device_of(&root, "r"), "/job:ps/task:0");
        assert_eq!(device_of(&root, init.op().name()), "/job:worker/task:3");
        assert_eq!(device_of(&root, y.op().name()), "/job:worker/task:3");
        // the initializer and read are colocated with their variable: no device
        // function applies to them, they follow the variable
        assert_eq!(device_of(&root, "w/Assign"), "");
        assert_eq!(device_of(&root, "w/read"), "");
        let _ = r;
    }

    #[test]
    fn explicit_fields_merge_as_in_tensorflow() {
        let root = Scope::new();
        let s = root.with_device_fn(setter(ReplicaDeviceSetter {
            ps_tasks: 3,
            worker_device: "/job:worker/task:1".into(),
            ..Default::default()
        }));
        let init = ops::scalar(&s, 0.0f32).unwrap();
        // `tf.device("/cpu:0")` inside the setter: the setter fills job and task
        let cpu = s.with_device("/cpu:0");
        Variable::new(&cpu, "a", &init, true).unwrap();
        let c = ops::scalar(&cpu, 1.0f32).unwrap();
        assert_eq!(device_of(&root, "a"), "/job:ps/task:0/device:CPU:0");
        assert_eq!(
            device_of(&root, c.op().name()),
            "/job:worker/task:1/device:CPU:0"
        );
        // an explicit task wins over the strategy's, but the strategy still counts
        let t = s.with_device("/task:7");
        Variable::new(&t, "b", &init, true).unwrap();
        assert_eq!(device_of(&root, "b"), "/job:ps/task:7");
        // another job: the PS job gives way and the strategy is not consulted
        let other = s.with_device("/job:foo");
        Variable::new(&other, "c", &init, true).unwrap();
        let d = ops::scalar(&other, 2.0f32).unwrap();
        assert_eq!(device_of(&root, "c"), "/job:foo");
        assert_eq!(device_of(&root, d.op().name()), "/job:foo/task:1");
        // the round robin continued from `b`: task 2
        Variable::new(&s, "e", &init, true).unwrap();
        assert_eq!(device_of(&root, "e"), "/job:ps/task:2");
        // the builder's own device counts as the innermost spec
        let f = s
            .op("Const")
            .attr("dtype", crate::DType::F32)
            .attr("value", Tensor::scalar(3.0f32));
        let f = f.device("/device:GPU:0").build().unwrap();
        assert_eq!(
            device_of(&root, f.name()),
            "/job:worker/task:1/device:GPU:0"
        );
    }

    #[test]
    fn outer_specs_fill_only_unset_fields_and_without_merge_devices_keeps_devices() {
        let root = Scope::new();
        // tf.device("/job:ps/task:9/device:CPU:1"): with tf.device(setter): ...
        let outer = root.with_device("/job:ps/task:9/device:CPU:1");
        let s = outer.with_device_fn(setter(ReplicaDeviceSetter {
            ps_tasks: 2,
            ..Default::default()
        }));
        let init = ops::scalar(&s, 0.0f32).unwrap();
        Variable::new(&s, "v", &init, true).unwrap();
        assert_eq!(device_of(&root, "v"), "/job:ps/task:0/device:CPU:1");
        assert_eq!(
            device_of(&root, init.op().name()),
            "/job:worker/task:9/device:CPU:1"
        );
        // merge_devices = false: a node with a device keeps it as is
        let keep = root.with_device_fn(setter(ReplicaDeviceSetter {
            ps_tasks: 2,
            merge_devices: false,
            ..Default::default()
        }));
        let pinned = keep.with_device("/device:CPU:0");
        Variable::new(&pinned, "p", &init, true).unwrap();
        Variable::new(&keep, "q", &init, true).unwrap();
        assert_eq!(device_of(&root, "p"), "/device:CPU:0");
        assert_eq!(device_of(&root, "q"), "/job:ps/task:0");
        // `without_device` leaves the setter (TensorFlow's `tf.device(None)`)
        let free = s.without_device();
        Variable::new(&free, "z", &init, true).unwrap();
        assert_eq!(device_of(&root, "z"), "");
    }

    #[test]
    fn cluster_custom_ops_and_strategy() {
        let jobs: BTreeMap<String, u32> = [("ps".to_owned(), 3), ("worker".to_owned(), 2)]
            .into_iter()
            .collect();
        let root = Scope::new();
        let s = root.with_device_fn(setter(ReplicaDeviceSetter {
            ps_tasks: 99,
            cluster: Some(jobs.clone()),
            ps_ops: Some(vec!["Const".into()]),
            ps_strategy: Some(Arc::new(|n: &DeviceRequest<'_>| n.name.len() as u32)),
            ..Default::default()
        }));
        let c = ops::scalar(&s, 1.0f32).unwrap();
        assert_eq!(device_of(&root, c.op().name()), "/job:ps/task:5");
        // a cluster without the PS job, or no PS tasks: no device function
        let mut no_ps = jobs;
        no_ps.remove("ps");
        let none = replica_device_setter(&ReplicaDeviceSetter {
            cluster: Some(no_ps),
            ..Default::default()
        })
        .unwrap();
        assert!(none.is_none());
        assert!(replica_device_setter(&ReplicaDeviceSetter::default())
            .unwrap()
            .is_none());
        let e = replica_device_setter(&ReplicaDeviceSetter {
            ps_tasks: 1,
            worker_device: "/job:".into(),
            ..Default::default()
        })
        .err()
        .unwrap();
        assert_eq!(e.code(), Code::InvalidArgument);
    }
}
