//! Graph passes, run once per step signature when a session builds a step:
//!
//! - [`control_flow`] — the loop frame every node runs in.
//! - [`prune`] — rewrite a session's graph for one (feeds, fetches, targets): fed
//!   tensors become `_Arg`s, fetches get `_Retval`s, and everything not needed goes.
//! - [`shape_inference`] — static shapes of every edge (for the cost model).
//! - [`place`] — assign every node a device: constraints, colocation groups,
//!   kernel availability, then a cost-model greedy placer.
//! - [`optimize`] — CSE and constant folding of a placed step graph.
//! - [`partition`] — split a placed graph per device, replacing each cross-device
//!   edge by a `_Send`/`_Recv` pair.
//! - [`recv_schedule`] — when asked, which node each `_Recv` waits for so that it
//!   starts as late as the step's critical path allows.
//! - [`remapper`] — TensorFlow's remapper fusions of `MatMul`/`Conv2D` +
//!   `BiasAdd`/`FusedBatchNorm` (+ activation) into `_FusedMatMul` and
//!   `_FusedConv2D`, over a placed step's nodes.

pub mod control_flow;
pub mod optimize;
pub mod partition;
pub mod place;
pub mod prune;
pub mod recv_schedule;
pub mod remapper;
pub mod shape_inference;
