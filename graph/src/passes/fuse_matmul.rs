//! `MatMul` + `BiasAdd` (+ activation) → `_FusedMatMul`: the MatMul rewrite of
//! TensorFlow's grappler remapper (`core/grappler/optimizers/remapper.cc`:
//! `FindContractionWithBias`, `FindContractionWithBiasAndActivation`,
//! `AddFusedContractionNode`), as a pure function over a step's `NodeDef`s.
//!
//! # Matching (TensorFlow's rules, CPU without oneDNN)
//!
//! A chain `MatMul → BiasAdd → activation` becomes one `_FusedMatMul` with
//! `fused_ops = ["BiasAdd", <activation>]`, and a chain whose activation does not
//! qualify becomes `["BiasAdd"]`, when:
//! 1. the activation is `Relu`, `Relu6`, `Elu` or `LeakyRelu` and reads the
//!    `BiasAdd`'s output as its first input; the `BiasAdd` (or `BiasAddV1`) reads
//!    the `MatMul`'s output as its first input (the bias is its second);
//! 2. the `MatMul`'s output has exactly one consumer, the `BiasAdd`, and, to fuse
//!    the activation, the `BiasAdd`'s output has exactly one consumer, the
//!    activation (TensorFlow's `HasAtMostOneFanoutAtPort0`; a fetch's `_Retval` is
//!    a consumer too);
//! 3. no matched node has a control input or is a control input of another node
//!    (`HasControlFaninOrFanout`), and the nodes that disappear (the `MatMul`, and
//!    the `BiasAdd` when the activation is fused) are not in `protected` (fed,
//!    fetched or targeted: TensorFlow's `nodes_to_preserve`);
//! 4. every matched node has `T = float` (TensorFlow's CPU `_FusedMatMul` rule for
//!    `MatMul` without oneDNN) and the same `device`, a CPU or no device at all
//!    (TensorFlow's `NodeIsOnCpu`, and our same-device rule: a chain that
//!    placement split across devices stays as it is).
//!
//! The `BiasAdd`'s `data_format` is not matched, as in TensorFlow: on the rank-2
//! output of a `MatMul` both `NHWC` and `NCHW` add along the last dimension. An
//! unknown format (which the `BiasAdd` kernel would reject) is left unfused.
//!
//! # Rewrite
//!
//! The fused node takes the name of the last node of the chain (the activation's,
//! or the `BiasAdd`'s), so its consumers and fetches by name keep working; it sits
//! where that node was, on the `MatMul`'s device, with inputs `a`, `b` (the
//! `MatMul`'s) and `bias`, and attributes `T`, `transpose_a`, `transpose_b` (the
//! `MatMul`'s), `num_args = 1`, `fused_ops`, `epsilon = 0` and, for `LeakyRelu`,
//! `leakyrelu_alpha` = the activation's `alpha`. The other nodes of the chain are
//! removed. Chains are disjoint (a matched `MatMul` has one consumer), so fusing
//! every activation-rooted chain first and then the remaining `BiasAdd`s is what
//! TensorFlow's single reverse-topological scan does.
//!
//! # Where it runs
//!
//! Once per step signature, on the placed step: the nodes
//! [`optimize::optimize_step`](super::optimize::optimize_step) receives (the
//! `piece` of `SessionState::build`, whose nodes carry the device each was placed
//! on), after its constant folding and CSE rounds, as TensorFlow's meta-optimizer
//! runs the remapper after those. `protected` is what `optimize` already keeps
//! (its `protected_names`: the fetched nodes, the data inputs of `_Retval`s, and
//! the step's targets); fed tensors are `_Arg`s by then. Its switch is
//! TensorFlow's `RewriterConfig.remapping` (on by default), and its report the
//! returned count (chains fused; each removes one or two nodes).
//!
//! Placed devices are what make rule 4 mean "the kernel runs on a CPU": on
//! requested devices an unconstrained chain would fuse even where the placer put
//! it on a GPU, which has no `_FusedMatMul` kernel. TensorFlow's remapper runs
//! only where the graph is not differentiated afterwards
//! (`allow_non_differentiable_rewrites`), as `_FusedMatMul` has no gradient; a
//! session's step graph already holds its gradient ops, so that holds here.

use std::collections::{HashMap, HashSet};

use crate::node_def::TensorId;
use crate::{AttrValue, DType, DeviceName, NodeDef};

/// The activations TensorFlow's remapper fuses into `_FusedMatMul` on a CPU
/// without oneDNN (its `IsSupportedActivation`).
pub const FUSABLE_ACTIVATIONS: &[&str] = &["Relu", "Relu6", "Elu", "LeakyRelu"];

/// How each node's outputs and control edges are used, by node index.
struct Uses {
    /// Data consumers of output port 0.
    port0_consumers: Vec<usize>,
    /// Whether the node has control inputs or is another node's control input.
    has_control_edges: Vec<bool>,
}

impl Uses {
    fn of(nodes: &[NodeDef], index: &HashMap<&str, usize>) -> Uses {
        let mut port0_consumers = vec![0; nodes.len()];
        let mut has_control_edges = vec![false; nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            for input in &n.input {
                let Ok(t) = TensorId::parse(input) else {
                    // A malformed input: keep the node and its producer as they are.
                    has_control_edges[i] = true;
                    continue;
                };
                if t.is_control() {
                    has_control_edges[i] = true;
                }
                let Some(&src) = index.get(t.node) else {
                    continue;
                };
                if t.is_control() {
                    has_control_edges[src] = true;
                } else if t.port == 0 {
                    port0_consumers[src] += 1;
                }
            }
        }
        Uses {
            port0_consumers,
            has_control_edges,
        }
    }
}

/// One matched chain, by node index.
struct Chain {
    matmul: usize,
    bias_add: usize,
    activation: Option<usize>,
}

/// The node producing `input` at port 0, by index.
fn producer_at_port0(input: Option<&String>, index: &HashMap<&str, usize>) -> Option<usize> {
    let t = TensorId::parse(input?).ok()?;
    (t.port == 0).then(|| index.get(t.node).copied())?
}

fn dtype(n: &NodeDef) -> Option<DType> {
    n.get_attr::<DType>("T").ok()
}

/// A requested or placed device on which the CPU kernel runs: none, or a CPU.
fn is_cpu(device: &str) -> bool {
    DeviceName::parse(device).is_ok_and(|d| d.device_type.as_deref().is_none_or(|t| t == "CPU"))
}

/// Rules 1–4 for the `BiasAdd` at `bias_add` (the activation is checked apart).
fn match_bias_add(
    nodes: &[NodeDef],
    index: &HashMap<&str, usize>,
    uses: &Uses,
    protected: &HashSet<String>,
    bias_add: usize,
) -> Option<usize> {
    let b = &nodes[bias_add];
    if !matches!(b.op.as_str(), "BiasAdd" | "BiasAddV1") || uses.has_control_edges[bias_add] {
        return None;
    }
    let format_ok = match b.attr.get("data_format") {
        None => true,
        Some(AttrValue::S(f)) => f == "NHWC" || f == "NCHW",
        Some(_) => false,
    };
    if !format_ok || b.input.len() != 2 {
        return None;
    }
    let mm = producer_at_port0(b.input.first(), index)?;
    let m = &nodes[mm];
    let ok = m.op == "MatMul"
        && m.input.len() == 2
        && dtype(m) == Some(DType::F32)
        && dtype(b) == Some(DType::F32)
        && !uses.has_control_edges[mm]
        && uses.port0_consumers[mm] == 1
        && !protected.contains(&m.name)
        && m.device == b.device
        && is_cpu(&m.device);
    ok.then_some(mm)
}

/// The chain rooted at activation `act`, if rules 1–4 hold.
fn match_activation(
    nodes: &[NodeDef],
    index: &HashMap<&str, usize>,
    uses: &Uses,
    protected: &HashSet<String>,
    act: usize,
) -> Option<Chain> {
    let a = &nodes[act];
    if !FUSABLE_ACTIVATIONS.contains(&a.op.as_str()) || uses.has_control_edges[act] {
        return None;
    }
    let bias_add = producer_at_port0(a.input.first(), index)?;
    let matmul = match_bias_add(nodes, index, uses, protected, bias_add)?;
    let b = &nodes[bias_add];
    let ok = uses.port0_consumers[bias_add] == 1
        && !protected.contains(&b.name)
        && dtype(a) == Some(DType::F32)
        && a.device == b.device;
    ok.then_some(Chain {
        matmul,
        bias_add,
        activation: Some(act),
    })
}

/// The `_FusedMatMul` node replacing `chain`; see the module docs.
fn fused_node(nodes: &[NodeDef], chain: &Chain) -> NodeDef {
    let (m, b) = (&nodes[chain.matmul], &nodes[chain.bias_add]);
    let last = &nodes[chain.activation.unwrap_or(chain.bias_add)];
    let mut fused_ops = vec!["BiasAdd".to_owned()];
    let mut f = NodeDef::new(last.name.clone(), "_FusedMatMul").with_device(m.device.clone());
    f.input = vec![m.input[0].clone(), m.input[1].clone(), b.input[1].clone()];
    let flag = |name: &str| m.attr.get(name).cloned().unwrap_or(AttrValue::B(false));
    f.attr.insert("T".into(), AttrValue::Type(DType::F32));
    f.attr.insert("transpose_a".into(), flag("transpose_a"));
    f.attr.insert("transpose_b".into(), flag("transpose_b"));
    f.attr.insert("num_args".into(), AttrValue::I(1));
    f.attr.insert("epsilon".into(), AttrValue::F(0.0));
    if let Some(act) = chain.activation.map(|i| &nodes[i]) {
        fused_ops.push(act.op.clone());
        if act.op == "LeakyRelu" {
            let alpha = act.attr.get("alpha").cloned().unwrap_or(AttrValue::F(0.2));
            f.attr.insert("leakyrelu_alpha".into(), alpha);
        }
    }
    f.attr
        .insert("fused_ops".into(), AttrValue::from(fused_ops));
    f
}

/// Fuses every qualifying `MatMul → BiasAdd (→ activation)` chain of `nodes` into
/// one `_FusedMatMul`, leaving the nodes named in `protected` (feeds, fetches,
/// targets) computable; returns the number of chains fused. See the module docs
/// for the rules and for where a session should call it.
///
/// # Examples
///
/// ```
/// use std::collections::HashSet;
/// use actorflow_graph::passes::fuse_matmul::fuse_matmul_bias_activation;
/// use actorflow_graph::{DType, NodeDef};
///
/// let f32_node = |name: &str, op: &str, inputs: &[&str]| {
///     let mut n = NodeDef::new(name, op).with_attr("T", DType::F32);
///     n.input = inputs.iter().map(|s| s.to_string()).collect();
///     n
/// };
/// let mut nodes = vec![
///     f32_node("mm", "MatMul", &["x", "w"]),
///     f32_node("ba", "BiasAdd", &["mm", "b"]),
///     f32_node("relu", "Relu", &["ba"]),
/// ];
/// let fetched: HashSet<String> = ["relu".to_string()].into();
/// assert_eq!(fuse_matmul_bias_activation(&mut nodes, &fetched), 1);
/// assert_eq!(nodes.len(), 1);
/// assert_eq!((nodes[0].name.as_str(), nodes[0].op.as_str()), ("relu", "_FusedMatMul"));
/// assert_eq!(nodes[0].input, ["x", "w", "b"]);
/// ```
pub fn fuse_matmul_bias_activation(nodes: &mut Vec<NodeDef>, protected: &HashSet<String>) -> usize {
    let chains = {
        let index: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let uses = Uses::of(nodes, &index);
        let mut taken = vec![false; nodes.len()];
        let mut chains = Vec::new();
        let mut take = |c: Chain, taken: &mut Vec<bool>| {
            let ids = [Some(c.matmul), Some(c.bias_add), c.activation];
            if ids.iter().flatten().any(|&i| taken[i]) {
                return;
            }
            for &i in ids.iter().flatten() {
                taken[i] = true;
            }
            chains.push(c);
        };
        for act in 0..nodes.len() {
            if let Some(c) = match_activation(nodes, &index, &uses, protected, act) {
                take(c, &mut taken);
            }
        }
        for bias_add in 0..nodes.len() {
            if taken[bias_add] {
                continue;
            }
            if let Some(matmul) = match_bias_add(nodes, &index, &uses, protected, bias_add) {
                let c = Chain {
                    matmul,
                    bias_add,
                    activation: None,
                };
                take(c, &mut taken);
            }
        }
        chains
    };
    if chains.is_empty() {
        return 0;
    }
    let mut remove = vec![false; nodes.len()];
    let mut replace: Vec<(usize, NodeDef)> = Vec::with_capacity(chains.len());
    for c in &chains {
        let last = c.activation.unwrap_or(c.bias_add);
        replace.push((last, fused_node(nodes, c)));
        remove[c.matmul] = true;
        if c.activation.is_some() {
            remove[c.bias_add] = true;
        }
    }
    for (i, f) in replace {
        nodes[i] = f;
    }
    let mut i = 0;
    nodes.retain(|_| {
        i += 1;
        !remove[i - 1]
    });
    chains.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
        let mut n = NodeDef::new(name, op).with_attr("T", DType::F32);
        n.input = inputs.iter().map(|s| s.to_string()).collect();
        n
    }

    /// `x · w + b` then `act` (none: the chain ends at the `BiasAdd`), and a
    /// consumer `out` of the chain's last node.
    fn chain(act: Option<&str>) -> Vec<NodeDef> {
        let mut v = vec![
            node("mm", "MatMul", &["x", "w"]).with_attr("transpose_b", true),
            node("ba", "BiasAdd", &["mm", "b"]).with_attr("data_format", "NHWC"),
        ];
        let last = match act {
            Some(op) => {
                v.push(node("act", op, &["ba"]));
                "act"
            }
            None => "ba",
        };
        v.push(node("out", "Identity", &[last]));
        v
    }

    fn none() -> HashSet<String> {
        HashSet::new()
    }

    fn fused_ops(n: &NodeDef) -> Vec<String> {
        n.get_attr::<Vec<String>>("fused_ops").unwrap_or_default()
    }

    fn find<'a>(nodes: &'a [NodeDef], name: &str) -> &'a NodeDef {
        nodes.iter().find(|n| n.name == name).expect("node")
    }

    #[test]
    fn fuses_each_activation_under_the_last_nodes_name() {
        for act in FUSABLE_ACTIVATIONS {
            let mut nodes = chain(Some(act));
            assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1, "{act}");
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            assert_eq!(names, ["act", "out"], "{act}");
            let f = &nodes[0];
            assert_eq!(f.op, "_FusedMatMul");
            assert_eq!(f.input, ["x", "w", "b"]);
            assert_eq!(fused_ops(f), ["BiasAdd", act]);
            assert_eq!(f.get_attr::<i64>("num_args").unwrap(), 1);
            assert_eq!(f.get_attr::<DType>("T").unwrap(), DType::F32);
            assert!(!f.get_attr::<bool>("transpose_a").unwrap());
            assert!(f.get_attr::<bool>("transpose_b").unwrap());
            assert_eq!(f.get_attr::<f32>("epsilon").unwrap(), 0.0);
        }
        let mut nodes = chain(None);
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1);
        assert_eq!(
            (nodes[0].name.as_str(), fused_ops(&nodes[0])),
            ("ba", vec!["BiasAdd".into()])
        );
    }

    #[test]
    fn leaky_relu_alpha_becomes_leakyrelu_alpha() {
        let mut nodes = chain(Some("LeakyRelu"));
        nodes[2].attr.insert("alpha".into(), AttrValue::F(0.1));
        fuse_matmul_bias_activation(&mut nodes, &none());
        assert_eq!(nodes[0].get_attr::<f32>("leakyrelu_alpha").unwrap(), 0.1);
        // Without an alpha, LeakyRelu's default.
        let mut nodes = chain(Some("LeakyRelu"));
        fuse_matmul_bias_activation(&mut nodes, &none());
        assert_eq!(nodes[0].get_attr::<f32>("leakyrelu_alpha").unwrap(), 0.2);
    }

    #[test]
    fn other_activations_leave_the_bias_add_fused_alone() {
        for act in ["Tanh", "Sigmoid", "Softplus", "Selu", "Identity"] {
            let mut nodes = chain(Some(act));
            assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1, "{act}");
            assert_eq!(fused_ops(find(&nodes, "ba")), ["BiasAdd"], "{act}");
            assert_eq!(find(&nodes, "act").input, ["ba"], "{act}");
            assert!(nodes.iter().all(|n| n.name != "mm"));
        }
    }

    #[test]
    fn a_matmul_read_twice_or_protected_is_left_alone() {
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("side", "Identity", &["mm:0"]));
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
        // A fetch's _Retval is a second consumer.
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("_retval_mm_0_0", "_Retval", &["mm"]));
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
        let mut nodes = chain(Some("Relu"));
        let protected: HashSet<String> = ["mm".to_owned()].into();
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &protected), 0);
        assert_eq!(nodes, chain(Some("Relu")));
    }

    #[test]
    fn a_bias_add_read_twice_or_protected_is_fused_without_the_activation() {
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("side", "Square", &["ba"]));
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1);
        assert_eq!(fused_ops(find(&nodes, "ba")), ["BiasAdd"]);
        assert_eq!(find(&nodes, "act").op, "Relu");
        assert_eq!(find(&nodes, "side").input, ["ba"]);
        let mut nodes = chain(Some("Relu"));
        let protected: HashSet<String> = ["ba".to_owned()].into();
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &protected), 1);
        assert_eq!(fused_ops(find(&nodes, "ba")), ["BiasAdd"]);
    }

    #[test]
    fn control_edges_block_the_nodes_they_touch() {
        // On the MatMul: nothing.
        let mut nodes = chain(Some("Relu"));
        nodes[0].input.push("^init".into());
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
        // The BiasAdd as a control input: nothing.
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("after", "NoOp", &["^ba"]));
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
        // On the activation: the MatMul and BiasAdd alone.
        let mut nodes = chain(Some("Relu"));
        nodes[2].input.push("^init".into());
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1);
        assert_eq!(fused_ops(find(&nodes, "ba")), ["BiasAdd"]);
        assert_eq!(find(&nodes, "act").input, ["ba", "^init"]);
    }

    #[test]
    fn devices_types_and_formats_must_agree() {
        let cpu = "/job:localhost/replica:0/task:0/device:CPU:0";
        let mut nodes = chain(Some("Relu"));
        for n in &mut nodes[..3] {
            n.device = cpu.into();
        }
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1);
        assert_eq!(nodes[0].device, cpu);
        // Different devices, or a GPU.
        let mut nodes = chain(Some("Relu"));
        nodes[2].device = cpu.into();
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1);
        assert_eq!(
            fused_ops(find(&nodes, "ba")),
            ["BiasAdd"],
            "the activation stays"
        );
        let mut nodes = chain(Some("Relu"));
        nodes[1].device = cpu.into();
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
        let mut nodes = chain(Some("Relu"));
        for n in &mut nodes[..3] {
            n.device = "/device:GPU:0".into();
        }
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
        // Not float32.
        let mut nodes = chain(Some("Relu"));
        for n in &mut nodes[..3] {
            n.attr.insert("T".into(), AttrValue::Type(DType::F64));
        }
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
        // NCHW is the last dimension of a matrix too; an unknown format is not.
        let mut nodes = chain(Some("Relu"));
        nodes[1]
            .attr
            .insert("data_format".into(), AttrValue::from("NCHW"));
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 1);
        let mut nodes = chain(Some("Relu"));
        nodes[1]
            .attr
            .insert("data_format".into(), AttrValue::from("HWNC"));
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
    }

    #[test]
    fn stacked_layers_fuse_one_by_one() {
        let mut nodes = vec![
            node("mm1", "MatMul", &["x", "w1"]),
            node("ba1", "BiasAddV1", &["mm1", "b1"]),
            node("relu1", "Relu", &["ba1"]),
            node("mm2", "MatMul", &["relu1", "w2"]),
            node("ba2", "BiasAdd", &["mm2:0", "b2"]),
            node("elu2", "Elu", &["ba2:0"]),
        ];
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 2);
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].input, ["relu1", "w2", "b2"]);
        // A second pass finds nothing more.
        assert_eq!(fuse_matmul_bias_activation(&mut nodes, &none()), 0);
    }
}
