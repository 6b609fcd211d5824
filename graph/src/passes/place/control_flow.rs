//! Step 5 of [placement](super): control-flow colocation (TensorFlow's
//! `OptimizeControlFlowColocation`, done here in the placer rather than after it).
//!
//! A loop variable's skeleton must not be split at its back edge: a `NextIteration`
//! on one device feeding a `Merge` on another would need a transfer from iteration
//! *i* to iteration *i + 1*, which no `_Send`/`_Recv` pair (keyed by one frame and
//! iteration) can express, and the first iteration's `_Recv` would wait forever. So:
//!
//! - `Switch` goes with its data input, `Exit` with its data input (visited in
//!   topological order, so each follows its input's final device);
//! - a non-reference `Enter` and a `NextIteration` go with their first data consumer
//!   (visited in reverse topological order, likewise).
//!
//! The rule overrides a node's requested device and `loc:@` colocation (TensorFlow's
//! gradient code colocates a gradient loop's `Enter` with the forward `Exit`, which
//! would put the back edge across devices), as TensorFlow's does, but never its
//! kernel availability, never a node pinned by an earlier placement, and never a node
//! with a reference or resource input or output (those stay with their variable or
//! resource). Every other cross-device edge inside a loop stays within one iteration
//! and is carried by the partitioner's control loops.

use super::KernelSupport;
use crate::{DType, DeviceName, Graph, NodeId};

fn is_op(g: &Graph, id: NodeId, names: &[&str]) -> bool {
    names.contains(&g.node(id).op())
}

/// True when a node has a reference or resource input or output.
fn touches_state(g: &Graph, id: NodeId) -> bool {
    let sig = &g.node(id).sig;
    sig.inputs
        .iter()
        .chain(sig.outputs.iter())
        .any(|t| t.is_ref || t.dtype == DType::Resource)
}

/// Moves loop skeleton nodes next to their neighbours; see the module docs.
pub(super) fn colocate_control_flow(
    g: &Graph,
    devices: &[DeviceName],
    kernels: &dyn KernelSupport,
    pinned: &[Option<usize>],
    order: &[usize],
    assigned: &mut [usize],
) {
    let movable = |id: NodeId, to: usize, assigned: &[usize]| {
        to != usize::MAX
            && assigned[id] != usize::MAX
            && assigned[id] != to
            && pinned.get(id).copied().flatten().is_none()
            && !touches_state(g, id)
            && kernels.supports(
                &g.node(id).def,
                devices[to].device_type.as_deref().unwrap_or("CPU"),
            )
    };
    for &id in order {
        if !is_op(g, id, &["Switch", "RefSwitch", "Exit", "RefExit"]) {
            continue;
        }
        if let Some(e) = g.data_input(id, 0) {
            let to = assigned[e.src];
            if movable(id, to, assigned) {
                assigned[id] = to;
            }
        }
    }
    for &id in order.iter().rev() {
        if !is_op(g, id, &["Enter", "NextIteration", "RefNextIteration"]) {
            continue;
        }
        if let Some(e) = g.out_edges(id).find(|e| !e.is_control()) {
            let to = assigned[e.dst];
            if movable(id, to, assigned) {
                assigned[id] = to;
            }
        }
    }
}
