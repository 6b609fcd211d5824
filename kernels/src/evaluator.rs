//! [`CpuEvaluator`]: runs one node's CPU kernel once, at step build and outside
//! any step, for constant folding (the role of TensorFlow's `GraphRunner` in
//! `constant_folding.cc`; the pass walks the constant subgraph itself, in
//! topological order, and hands this one node at a time).
//!
//! Only synchronous kernels run here: an asynchronous kernel, a kernel that
//! leaves an output empty (dead) or hands out a reference is an error, which
//! the pass takes as "do not fold". The evaluator's device is a private CPU
//! device with its own resource manager; the nodes it is given are pure (the pass
//! never hands it a stateful op), so nothing a session owns is touched.

use std::sync::Arc;

use graph::passes::optimize::NodeEvaluator;
use graph::{DeviceName, Node, NodeDef, Result, Status, Tensor};
use rendezvous::{FrameIter, LocalRendezvous};

use crate::entry::Entry;
use crate::op_kernel::{
    CallFrame, DeviceContext, OpKernelConstruction, OpKernelContext, Outputs, StepContext,
    ThreadTimer,
};
use crate::registry::{KernelRegistry, DEVICE_CPU};

/// Runs CPU kernels for constant folding; see the module docs.
pub struct CpuEvaluator<'a> {
    registry: &'a KernelRegistry,
    step: StepContext,
}

impl<'a> CpuEvaluator<'a> {
    /// An evaluator over `registry`'s CPU kernels whose single allocations may
    /// take at most `max_allocation_bytes` (the session's limit).
    pub fn new(registry: &'a KernelRegistry, max_allocation_bytes: usize) -> CpuEvaluator<'a> {
        let device = Arc::new(
            DeviceContext::new(
                "/job:localhost/replica:0/task:0/device:CPU:0",
                DEVICE_CPU,
                0,
            )
            .with_max_allocation_bytes(max_allocation_bytes),
        );
        CpuEvaluator {
            registry,
            step: StepContext {
                step_id: 0,
                device,
                rendezvous: Arc::new(LocalRendezvous::new()),
                call_frame: Arc::new(CallFrame::new(Vec::new(), 0)),
                default_container: Arc::from("__constant_folding"),
                step_container: Arc::from("__constant_folding_step"),
                cancellation: Default::default(),
                timer: Arc::new(ThreadTimer),
            },
        }
    }
}

impl NodeEvaluator for CpuEvaluator<'_> {
    fn can_evaluate(&self, node: &Node) -> bool {
        self.registry.supports(&node.def, DEVICE_CPU)
    }

    fn evaluate(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let kernel = self.registry.create(&OpKernelConstruction {
            node: &node.def,
            op_def: &node.op_def,
            input_types: &node.sig.inputs,
            output_types: &node.sig.outputs,
            device: &self.step.device,
        })?;
        if let Some(v) = kernel.const_value() {
            return Ok(vec![v.clone()]);
        }
        if kernel.as_async().is_some() {
            return Err(
                Status::unimplemented("an asynchronous kernel is not folded")
                    .with_node(node.name()),
            );
        }
        let mut ins: Vec<Entry> = inputs.iter().cloned().map(Entry::Value).collect();
        let mut outs: Outputs = (0..node.num_outputs()).map(|_| Entry::Empty).collect();
        match kernel.route() {
            Some(route) => route.apply(&mut ins, &mut outs)?,
            None => {
                let mut ctx = OpKernelContext::new(
                    &mut ins,
                    outs.as_mut_slice(),
                    &self.step,
                    FrameIter::ROOT,
                    false,
                    None,
                );
                kernel
                    .compute(&mut ctx)
                    .map_err(|e| e.with_node(node.name()))?;
            }
        }
        outs.into_iter()
            .map(|e| match e {
                Entry::Value(t) => Ok(t),
                _ => Err(
                    Status::unimplemented("a dead or reference output is not folded")
                        .with_node(node.name()),
                ),
            })
            .collect()
    }

    fn supports_const(&self, node: &NodeDef) -> bool {
        let device_type = DeviceName::parse(&node.device)
            .ok()
            .and_then(|d| d.device_type)
            .unwrap_or_else(|| DEVICE_CPU.to_owned());
        self.registry.supports(node, &device_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::builder::Scope;
    use graph::{ops, Graph, OpRegistry};

    fn node(s: &Scope, name: &str) -> Node {
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        g.node(g.find(name).unwrap()).clone()
    }

    #[test]
    fn evaluates_pure_kernels_and_routes() {
        let s = Scope::new();
        let a = ops::scalar(&s, 2.0f32).unwrap();
        let y = ops::add(&s, &a, &a).unwrap();
        let id = ops::identity(&s, &y).unwrap();
        let ev = CpuEvaluator::new(KernelRegistry::global(), 1 << 20);
        let add = node(&s, y.op().name());
        assert!(ev.can_evaluate(&add));
        let out = ev.evaluate(&add, &[Tensor::scalar(2.0f32), Tensor::scalar(3.0f32)]);
        assert_eq!(out.unwrap(), vec![Tensor::scalar(5.0f32)]);
        let out = ev.evaluate(&node(&s, id.op().name()), &[Tensor::scalar(1.5f32)]);
        assert_eq!(out.unwrap(), vec![Tensor::scalar(1.5f32)]);
    }

    #[test]
    fn allocation_limit_and_bad_inputs_are_errors() {
        let s = Scope::new();
        let dims = ops::constant(&s, Tensor::vector(&[1024i32])).unwrap();
        let fill = ops::fill(&s, &dims, &ops::scalar(&s, 1.0f32).unwrap()).unwrap();
        let ev = CpuEvaluator::new(KernelRegistry::global(), 64);
        let n = node(&s, fill.op().name());
        let r = ev.evaluate(&n, &[Tensor::vector(&[1024i32]), Tensor::scalar(1.0f32)]);
        assert!(r.is_err());
        let r = ev.evaluate(&n, &[Tensor::vector(&[-1i32]), Tensor::scalar(1.0f32)]);
        assert!(r.is_err());
    }
}
