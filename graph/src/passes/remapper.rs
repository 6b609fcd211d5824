//! TensorFlow's grappler remapper (`core/grappler/optimizers/remapper.cc`) as a
//! pure function over a step's `NodeDef`s: a contraction (`MatMul`, `Conv2D`)
//! followed by a per-channel step and an activation becomes one fused node
//! (`_FusedMatMul`, `_FusedConv2D`) whose kernel applies the step and the
//! activation to its output blocks while they are still in cache.
//!
//! # Patterns (TensorFlow's, CPU without oneDNN)
//!
//! | root | chain | fused node, `fused_ops` |
//! |---|---|---|
//! | activation | `MatMul → BiasAdd → act` | `_FusedMatMul`, `[BiasAdd, act]` |
//! | `BiasAdd` | `MatMul → BiasAdd` | `_FusedMatMul`, `[BiasAdd]` |
//! | activation | `Conv2D → BiasAdd → act` | `_FusedConv2D`, `[BiasAdd, act]` |
//! | `BiasAdd` | `Conv2D → BiasAdd` | `_FusedConv2D`, `[BiasAdd]` |
//! | activation | `Conv2D → FusedBatchNorm → act` | `_FusedConv2D`, `[FusedBatchNorm, act]` |
//! | `FusedBatchNorm` | `Conv2D → FusedBatchNorm` | `_FusedConv2D`, `[FusedBatchNorm]` |
//!
//! (`FindContractionWithBias`, `FindContractionWithBiasAndActivation`,
//! `FindConv2DWithBatchNorm`, `FindConv2DWithBatchNormAndActivation`), where:
//! 1. the activation is `Relu`, `Relu6`, `Elu` or `LeakyRelu` and reads the
//!    step's output as its first input; the step (`BiasAdd`/`BiasAddV1`, or
//!    `FusedBatchNorm`/`V2`/`V3`) reads the contraction's output as its first
//!    input;
//! 2. the contraction's output has exactly one consumer, the step, and, to fuse
//!    the activation, the step's output 0 has exactly one consumer, the
//!    activation (TensorFlow's `HasAtMostOneFanoutAtPort0`; a fetch's `_Retval`
//!    is a consumer too); a batch norm's other outputs (its batch statistics and
//!    reserve spaces) have none;
//! 3. no matched node has a control input or is a control input of another node
//!    (`HasControlFaninOrFanout`), and the nodes that disappear (the
//!    contraction, and the step when the activation is fused) are not in
//!    `protected` (fed, fetched or targeted: TensorFlow's `nodes_to_preserve`);
//! 4. every matched node has the same `device`, a CPU or no device at all
//!    (TensorFlow's `NodeIsOnCpu`, and our same-device rule: a chain that
//!    placement split across devices stays as it is), and the same `T`:
//!    `float` for `MatMul`; `float` or `double` for `Conv2D`, whose
//!    `data_format` must be `NHWC` (`IsCpuCompatibleConv2D`);
//! 5. a batch norm is in inference (`is_training` false; absent means the op's
//!    default, true) and, for `V2`/`V3`, has `U = float`.
//!
//! The `BiasAdd`'s `data_format` is not matched after a `MatMul`, as in
//! TensorFlow: on a matrix both `NHWC` and `NCHW` add along the last dimension.
//! After a `Conv2D`, and for a batch norm, we also require `NHWC` (TensorFlow
//! does not check, and would fuse an `NCHW` step over `NHWC` data into a node
//! that adds along another dimension). An unknown format is left unfused.
//!
//! # Rewrite
//!
//! The fused node takes the name of the last node of the chain (the
//! activation's, or the step's), so its consumers and fetches by name keep
//! working; it sits where that node was, on the contraction's device, with the
//! contraction's two inputs, then the step's arguments (the bias, or scale,
//! offset, mean and variance), and the contraction's attributes (`T`,
//! `transpose_a`/`transpose_b`, or the window: `strides`, `padding`,
//! `explicit_paddings`, `data_format`, `dilations`, `use_cudnn_on_gpu`), plus
//! `num_args`, `fused_ops`, `epsilon` (the batch norm's, else 0) and, for
//! `LeakyRelu`, `leakyrelu_alpha` = the activation's `alpha`; `_FusedConv2D`
//! also gets `TArgs`, `num_host_args = 0` and `filter_format = HWIO`, as
//! TensorFlow writes them. The other nodes of the chain are removed. Chains are
//! disjoint (a matched contraction has one consumer), so fusing every
//! activation-rooted chain first and then the remaining steps is what
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
//! it on a GPU, which has no fused kernel. TensorFlow's remapper runs only where
//! the graph is not differentiated afterwards
//! (`allow_non_differentiable_rewrites`), as the fused ops have no gradient; a
//! session's step graph already holds its gradient ops, so that holds here (a
//! training graph's `Conv2D → BiasAdd → Relu` still fuses: `ReluGrad` reads the
//! `Relu`'s output, which the fused node produces under the same name).

use std::collections::{HashMap, HashSet};

use crate::node_def::TensorId;
use crate::{AttrValue, DType, DeviceName, NodeDef};

/// The activations TensorFlow's remapper fuses on a CPU without oneDNN (its
/// `IsSupportedActivation`).
pub const FUSABLE_ACTIVATIONS: &[&str] = &["Relu", "Relu6", "Elu", "LeakyRelu"];

/// How each node's outputs and control edges are used, by node index.
struct Uses {
    /// Data consumers of output port 0.
    port0_consumers: Vec<usize>,
    /// Whether any output port other than 0 has a data consumer.
    other_ports_read: Vec<bool>,
    /// Whether the node has control inputs or is another node's control input.
    has_control_edges: Vec<bool>,
}

impl Uses {
    fn of(nodes: &[NodeDef], index: &HashMap<&str, usize>) -> Uses {
        let mut port0_consumers = vec![0; nodes.len()];
        let mut other_ports_read = vec![false; nodes.len()];
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
                } else {
                    other_ports_read[src] = true;
                }
            }
        }
        Uses {
            port0_consumers,
            other_ports_read,
            has_control_edges,
        }
    }
}

/// The per-channel step of a chain.
#[derive(Clone, Copy, PartialEq)]
enum Step {
    BiasAdd,
    FusedBatchNorm,
}

/// One matched chain, by node index.
struct Chain {
    contraction: usize,
    step: usize,
    kind: Step,
    activation: Option<usize>,
}

/// What the matcher reads: the nodes, their index by name, their uses and the
/// protected names.
struct Ctx<'a> {
    nodes: &'a [NodeDef],
    index: HashMap<&'a str, usize>,
    uses: Uses,
    protected: &'a HashSet<String>,
}

fn dtype(n: &NodeDef, attr: &str) -> Option<DType> {
    n.get_attr::<DType>(attr).ok()
}

/// A requested or placed device on which the CPU kernel runs: none, or a CPU.
fn is_cpu(device: &str) -> bool {
    DeviceName::parse(device).is_ok_and(|d| d.device_type.as_deref().is_none_or(|t| t == "CPU"))
}

/// The node's `data_format`: absent (the op's default, `NHWC`) or one of `ok`.
fn format_in(n: &NodeDef, ok: &[&str]) -> bool {
    match n.attr.get("data_format") {
        None => true,
        Some(AttrValue::S(f)) => ok.contains(&f.as_str()),
        Some(_) => false,
    }
}

impl Ctx<'_> {
    /// The node producing `input` at port 0, by index.
    fn producer_at_port0(&self, input: Option<&String>) -> Option<usize> {
        let t = TensorId::parse(input?).ok()?;
        (t.port == 0).then(|| self.index.get(t.node).copied())?
    }

    /// Whether `i`'s output 0 has exactly one consumer and `i` no control edge
    /// (and, when it disappears, is not protected).
    fn single_use(&self, i: usize, disappears: bool) -> bool {
        self.uses.port0_consumers[i] == 1
            && !self.uses.has_control_edges[i]
            && !(disappears && self.protected.contains(&self.nodes[i].name))
    }

    /// The contraction feeding step `step` (`T` = `t`), if rules 2–4 hold for
    /// it.
    fn contraction(&self, step: usize, kind: Step, t: DType) -> Option<usize> {
        let s = &self.nodes[step];
        let c = self.producer_at_port0(s.input.first())?;
        let n = &self.nodes[c];
        let type_ok = match n.op.as_str() {
            "MatMul" => kind == Step::BiasAdd && t == DType::F32,
            "Conv2D" => matches!(t, DType::F32 | DType::F64) && format_in(n, &["NHWC"]),
            _ => false,
        };
        let ok = type_ok
            && n.input.len() == 2
            && dtype(n, "T") == Some(t)
            && self.single_use(c, true)
            && n.device == s.device
            && is_cpu(&n.device);
        ok.then_some(c)
    }

    /// The chain ending at step `step` (no activation), if rules 1–5 hold.
    fn match_step(&self, step: usize) -> Option<Chain> {
        let s = &self.nodes[step];
        if self.uses.has_control_edges[step] {
            return None;
        }
        let t = dtype(s, "T")?;
        let (kind, contraction) = match s.op.as_str() {
            "BiasAdd" | "BiasAddV1" if s.input.len() == 2 => {
                let c = self.contraction(step, Step::BiasAdd, t)?;
                let formats: &[&str] = if self.nodes[c].op == "MatMul" {
                    &["NHWC", "NCHW"]
                } else {
                    &["NHWC"]
                };
                (Step::BiasAdd, format_in(s, formats).then_some(c)?)
            }
            "FusedBatchNorm" | "FusedBatchNormV2" | "FusedBatchNormV3" if s.input.len() == 5 => {
                let u_ok = s.op == "FusedBatchNorm" || dtype(s, "U") == Some(DType::F32);
                let inference = matches!(s.attr.get("is_training"), Some(AttrValue::B(false)));
                if !u_ok
                    || !inference
                    || !format_in(s, &["NHWC"])
                    || self.uses.other_ports_read[step]
                {
                    return None;
                }
                (
                    Step::FusedBatchNorm,
                    self.contraction(step, Step::FusedBatchNorm, t)?,
                )
            }
            _ => return None,
        };
        Some(Chain {
            contraction,
            step,
            kind,
            activation: None,
        })
    }

    /// The chain rooted at activation `act`, if rules 1–5 hold.
    fn match_activation(&self, act: usize) -> Option<Chain> {
        let a = &self.nodes[act];
        if !FUSABLE_ACTIVATIONS.contains(&a.op.as_str()) || self.uses.has_control_edges[act] {
            return None;
        }
        let step = self.producer_at_port0(a.input.first())?;
        let chain = self.match_step(step)?;
        let s = &self.nodes[step];
        let ok =
            self.single_use(step, true) && dtype(a, "T") == dtype(s, "T") && a.device == s.device;
        ok.then_some(Chain {
            activation: Some(act),
            ..chain
        })
    }
}

/// The fused node replacing `chain`; see the module docs.
fn fused_node(nodes: &[NodeDef], chain: &Chain) -> NodeDef {
    let (c, s) = (&nodes[chain.contraction], &nodes[chain.step]);
    let last = &nodes[chain.activation.unwrap_or(chain.step)];
    let conv = c.op == "Conv2D";
    let op = if conv { "_FusedConv2D" } else { "_FusedMatMul" };
    let mut f = NodeDef::new(last.name.clone(), op).with_device(c.device.clone());
    f.input = vec![c.input[0].clone(), c.input[1].clone()];
    f.input.extend(s.input[1..].iter().cloned());
    let num_args = f.input.len() - 2;
    let t = c
        .attr
        .get("T")
        .cloned()
        .unwrap_or(AttrValue::Type(DType::F32));
    let copied: &[&str] = if conv {
        &[
            "strides",
            "padding",
            "explicit_paddings",
            "data_format",
            "dilations",
            "use_cudnn_on_gpu",
        ]
    } else {
        &[]
    };
    for &k in copied {
        if let Some(v) = c.attr.get(k) {
            f.attr.insert(k.into(), v.clone());
        }
    }
    if conv {
        // The step's arguments' types: `T` for a bias, `U` (float) for a batch
        // norm's vectors.
        let arg_type = match chain.kind {
            Step::BiasAdd => dtype(c, "T"),
            Step::FusedBatchNorm => Some(dtype(s, "U").unwrap_or(DType::F32)),
        };
        let types = vec![arg_type.unwrap_or(DType::F32); num_args];
        f.attr.insert("TArgs".into(), AttrValue::from(types));
        f.attr.insert("num_host_args".into(), AttrValue::I(0));
        f.attr
            .insert("filter_format".into(), AttrValue::from("HWIO"));
    } else {
        let flag = |name: &str| c.attr.get(name).cloned().unwrap_or(AttrValue::B(false));
        f.attr.insert("transpose_a".into(), flag("transpose_a"));
        f.attr.insert("transpose_b".into(), flag("transpose_b"));
    }
    f.attr.insert("T".into(), t);
    f.attr
        .insert("num_args".into(), AttrValue::I(num_args as i64));
    let (first, epsilon) = match chain.kind {
        Step::BiasAdd => ("BiasAdd", AttrValue::F(0.0)),
        Step::FusedBatchNorm => (
            "FusedBatchNorm",
            s.attr
                .get("epsilon")
                .cloned()
                .unwrap_or(AttrValue::F(0.0001)),
        ),
    };
    f.attr.insert("epsilon".into(), epsilon);
    let mut fused_ops = vec![first.to_owned()];
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

/// False when no fusion can apply to a graph of these ops: every fusion needs a
/// contraction (`MatMul`, `Conv2D`) and a step after it (`BiasAdd`,
/// `FusedBatchNorm`), so a graph without both is left alone uncopied.
pub fn may_fuse<'a>(ops: impl Iterator<Item = &'a str>) -> bool {
    let (mut contraction, mut step) = (false, false);
    for op in ops {
        match op {
            "MatMul" | "Conv2D" => contraction = true,
            "BiasAdd" | "BiasAddV1" | "FusedBatchNorm" | "FusedBatchNormV2"
            | "FusedBatchNormV3" => step = true,
            _ => continue,
        }
        if contraction && step {
            return true;
        }
    }
    false
}

/// Fuses every qualifying contraction chain of `nodes` (see the module docs)
/// into one `_FusedMatMul` or `_FusedConv2D`, leaving the nodes named in
/// `protected` (feeds, fetches, targets) computable; returns the number of
/// chains fused. See the module docs for the rules and for where a session
/// should call it.
///
/// # Examples
///
/// ```
/// use std::collections::HashSet;
/// use actorflow_graph::passes::remapper::remap;
/// use actorflow_graph::{AttrValue, DType, NodeDef};
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
///     f32_node("conv", "Conv2D", &["relu", "filter"]),
///     f32_node("bn", "FusedBatchNormV3", &["conv", "scale", "offset", "mean", "var"])
///         .with_attr("U", DType::F32)
///         .with_attr("is_training", false),
///     f32_node("relu6", "Relu6", &["bn"]),
/// ];
/// let fetched: HashSet<String> = ["relu6".to_string()].into();
/// assert_eq!(remap(&mut nodes, &fetched), 2);
/// assert_eq!(nodes.len(), 2);
/// assert_eq!((nodes[0].name.as_str(), nodes[0].op.as_str()), ("relu", "_FusedMatMul"));
/// assert_eq!(nodes[0].input, ["x", "w", "b"]);
/// assert_eq!((nodes[1].name.as_str(), nodes[1].op.as_str()), ("relu6", "_FusedConv2D"));
/// assert_eq!(nodes[1].input, ["relu", "filter", "scale", "offset", "mean", "var"]);
/// ```
pub fn remap(nodes: &mut Vec<NodeDef>, protected: &HashSet<String>) -> usize {
    let chains = {
        let index: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let uses = Uses::of(nodes, &index);
        let cx = Ctx {
            nodes,
            index,
            uses,
            protected,
        };
        let mut taken = vec![false; nodes.len()];
        let mut chains = Vec::new();
        let mut take = |c: Chain, taken: &mut Vec<bool>| {
            let ids = [Some(c.contraction), Some(c.step), c.activation];
            if ids.iter().flatten().any(|&i| taken[i]) {
                return;
            }
            for &i in ids.iter().flatten() {
                taken[i] = true;
            }
            chains.push(c);
        };
        for act in 0..nodes.len() {
            if let Some(c) = cx.match_activation(act) {
                take(c, &mut taken);
            }
        }
        for step in 0..nodes.len() {
            if taken[step] {
                continue;
            }
            if let Some(c) = cx.match_step(step) {
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
        let last = c.activation.unwrap_or(c.step);
        replace.push((last, fused_node(nodes, c)));
        remove[c.contraction] = true;
        if c.activation.is_some() {
            remove[c.step] = true;
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
            assert_eq!(remap(&mut nodes, &none()), 1, "{act}");
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
        assert_eq!(remap(&mut nodes, &none()), 1);
        assert_eq!(
            (nodes[0].name.as_str(), fused_ops(&nodes[0])),
            ("ba", vec!["BiasAdd".into()])
        );
    }

    #[test]
    fn leaky_relu_alpha_becomes_leakyrelu_alpha() {
        let mut nodes = chain(Some("LeakyRelu"));
        nodes[2].attr.insert("alpha".into(), AttrValue::F(0.1));
        remap(&mut nodes, &none());
        assert_eq!(nodes[0].get_attr::<f32>("leakyrelu_alpha").unwrap(), 0.1);
        // Without an alpha, LeakyRelu's default.
        let mut nodes = chain(Some("LeakyRelu"));
        remap(&mut nodes, &none());
        assert_eq!(nodes[0].get_attr::<f32>("leakyrelu_alpha").unwrap(), 0.2);
    }

    #[test]
    fn other_activations_leave_the_bias_add_fused_alone() {
        for act in ["Tanh", "Sigmoid", "Softplus", "Selu", "Identity"] {
            let mut nodes = chain(Some(act));
            assert_eq!(remap(&mut nodes, &none()), 1, "{act}");
            assert_eq!(fused_ops(find(&nodes, "ba")), ["BiasAdd"], "{act}");
            assert_eq!(find(&nodes, "act").input, ["ba"], "{act}");
            assert!(nodes.iter().all(|n| n.name != "mm"));
        }
    }

    #[test]
    fn a_matmul_read_twice_or_protected_is_left_alone() {
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("side", "Identity", &["mm:0"]));
        assert_eq!(remap(&mut nodes, &none()), 0);
        // A fetch's _Retval is a second consumer.
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("_retval_mm_0_0", "_Retval", &["mm"]));
        assert_eq!(remap(&mut nodes, &none()), 0);
        let mut nodes = chain(Some("Relu"));
        let protected: HashSet<String> = ["mm".to_owned()].into();
        assert_eq!(remap(&mut nodes, &protected), 0);
        assert_eq!(nodes, chain(Some("Relu")));
    }

    #[test]
    fn a_bias_add_read_twice_or_protected_is_fused_without_the_activation() {
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("side", "Square", &["ba"]));
        assert_eq!(remap(&mut nodes, &none()), 1);
        assert_eq!(fused_ops(find(&nodes, "ba")), ["BiasAdd"]);
        assert_eq!(find(&nodes, "act").op, "Relu");
        assert_eq!(find(&nodes, "side").input, ["ba"]);
        let mut nodes = chain(Some("Relu"));
        let protected: HashSet<String> = ["ba".to_owned()].into();
        assert_eq!(remap(&mut nodes, &protected), 1);
        assert_eq!(fused_ops(find(&nodes, "ba")), ["BiasAdd"]);
    }

    #[test]
    fn control_edges_block_the_nodes_they_touch() {
        // On the MatMul: nothing.
        let mut nodes = chain(Some("Relu"));
        nodes[0].input.push("^init".into());
        assert_eq!(remap(&mut nodes, &none()), 0);
        // The BiasAdd as a control input: nothing.
        let mut nodes = chain(Some("Relu"));
        nodes.push(node("after", "NoOp", &["^ba"]));
        assert_eq!(remap(&mut nodes, &none()), 0);
        // On the activation: the MatMul and BiasAdd alone.
        let mut nodes = chain(Some("Relu"));
        nodes[2].input.push("^init".into());
        assert_eq!(remap(&mut nodes, &none()), 1);
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
        assert_eq!(remap(&mut nodes, &none()), 1);
        assert_eq!(nodes[0].device, cpu);
        // Different devices, or a GPU.
        let mut nodes = chain(Some("Relu"));
        nodes[2].device = cpu.into();
        assert_eq!(remap(&mut nodes, &none()), 1);
        assert_eq!(
            fused_ops(find(&nodes, "ba")),
            ["BiasAdd"],
            "the activation stays"
        );
        let mut nodes = chain(Some("Relu"));
        nodes[1].device = cpu.into();
        assert_eq!(remap(&mut nodes, &none()), 0);
        let mut nodes = chain(Some("Relu"));
        for n in &mut nodes[..3] {
            n.device = "/device:GPU:0".into();
        }
        assert_eq!(remap(&mut nodes, &none()), 0);
        // Not float32.
        let mut nodes = chain(Some("Relu"));
        for n in &mut nodes[..3] {
            n.attr.insert("T".into(), AttrValue::Type(DType::F64));
        }
        assert_eq!(remap(&mut nodes, &none()), 0);
        // NCHW is the last dimension of a matrix too; an unknown format is not.
        let mut nodes = chain(Some("Relu"));
        nodes[1]
            .attr
            .insert("data_format".into(), AttrValue::from("NCHW"));
        assert_eq!(remap(&mut nodes, &none()), 1);
        let mut nodes = chain(Some("Relu"));
        nodes[1]
            .attr
            .insert("data_format".into(), AttrValue::from("HWNC"));
        assert_eq!(remap(&mut nodes, &none()), 0);
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
        assert_eq!(remap(&mut nodes, &none()), 2);
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].input, ["relu1", "w2", "b2"]);
        // A second pass finds nothing more.
        assert_eq!(remap(&mut nodes, &none()), 0);
    }

    /// `x ⊛ filter` then a batch norm (`version`: "", "V2" or "V3") then `act`
    /// (none: the chain ends at the batch norm), and a consumer `out`.
    fn conv_bn(version: &str, act: Option<&str>) -> Vec<NodeDef> {
        let bn = node(
            "bn",
            &format!("FusedBatchNorm{version}"),
            &["conv", "scale", "offset", "mean", "var"],
        )
        .with_attr("is_training", false)
        .with_attr("epsilon", 0.001f32);
        let bn = if version.is_empty() {
            bn
        } else {
            bn.with_attr("U", DType::F32)
        };
        let mut v = vec![
            node("conv", "Conv2D", &["x", "filter"])
                .with_attr("strides", vec![1i64, 2, 2, 1])
                .with_attr("padding", "SAME")
                .with_attr("data_format", "NHWC"),
            bn,
        ];
        let last = match act {
            Some(op) => {
                v.push(node("act", op, &["bn"]));
                "act"
            }
            None => "bn",
        };
        v.push(node("out", "Identity", &[last]));
        v
    }

    #[test]
    fn conv_batch_norm_chains_fuse_with_the_window_and_epsilon() {
        for version in ["", "V2", "V3"] {
            for act in [
                None,
                Some("Relu"),
                Some("Relu6"),
                Some("Elu"),
                Some("LeakyRelu"),
            ] {
                let mut nodes = conv_bn(version, act);
                assert_eq!(remap(&mut nodes, &none()), 1, "{version} {act:?}");
                let f = &nodes[0];
                assert_eq!(f.name, if act.is_some() { "act" } else { "bn" });
                assert_eq!(f.op, "_FusedConv2D");
                assert_eq!(f.input, ["x", "filter", "scale", "offset", "mean", "var"]);
                let mut want = vec!["FusedBatchNorm".to_owned()];
                want.extend(act.map(str::to_owned));
                assert_eq!(fused_ops(f), want);
                assert_eq!(f.get_attr::<i64>("num_args").unwrap(), 4);
                assert_eq!(f.get_attr::<f32>("epsilon").unwrap(), 0.001);
                assert_eq!(f.get_attr::<Vec<DType>>("TArgs").unwrap(), [DType::F32; 4]);
                assert_eq!(f.get_attr::<Vec<i64>>("strides").unwrap(), [1, 2, 2, 1]);
                assert_eq!(f.get_attr::<String>("padding").unwrap(), "SAME");
                assert_eq!(f.get_attr::<String>("filter_format").unwrap(), "HWIO");
                assert_eq!(nodes.len(), 2);
            }
        }
    }

    #[test]
    fn conv_bias_add_chains_fuse_in_float_and_double() {
        for t in [DType::F32, DType::F64] {
            let mut nodes = vec![
                node("conv", "Conv2D", &["x", "filter"]).with_attr("padding", "VALID"),
                node("ba", "BiasAdd", &["conv", "b"]),
                node("act", "Relu", &["ba"]),
            ];
            for n in &mut nodes {
                n.attr.insert("T".into(), AttrValue::Type(t));
            }
            assert_eq!(remap(&mut nodes, &none()), 1);
            assert_eq!(nodes[0].op, "_FusedConv2D");
            assert_eq!(nodes[0].input, ["x", "filter", "b"]);
            assert_eq!(nodes[0].get_attr::<Vec<DType>>("TArgs").unwrap(), [t]);
            assert_eq!(nodes[0].get_attr::<DType>("T").unwrap(), t);
        }
    }

    #[test]
    fn batch_norms_that_must_stay() {
        let set = |nodes: &mut Vec<NodeDef>, i: usize, k: &str, v: AttrValue| {
            nodes[i].attr.insert(k.into(), v);
        };
        // Training, or is_training absent (the op's default is true).
        let mut nodes = conv_bn("V3", Some("Relu"));
        set(&mut nodes, 1, "is_training", AttrValue::B(true));
        assert_eq!(remap(&mut nodes, &none()), 0);
        let mut nodes = conv_bn("V3", Some("Relu"));
        nodes[1].attr.remove("is_training");
        assert_eq!(remap(&mut nodes, &none()), 0);
        // A batch statistic read.
        let mut nodes = conv_bn("V3", Some("Relu"));
        nodes.push(node("stat", "Identity", &["bn:1"]));
        assert_eq!(remap(&mut nodes, &none()), 0);
        // U not float; NCHW on the batch norm or the convolution.
        let mut nodes = conv_bn("V2", None);
        set(&mut nodes, 1, "U", AttrValue::Type(DType::BF16));
        assert_eq!(remap(&mut nodes, &none()), 0);
        let mut nodes = conv_bn("V3", None);
        set(&mut nodes, 1, "data_format", AttrValue::from("NCHW"));
        assert_eq!(remap(&mut nodes, &none()), 0);
        let mut nodes = conv_bn("V3", None);
        set(&mut nodes, 0, "data_format", AttrValue::from("NCHW"));
        assert_eq!(remap(&mut nodes, &none()), 0);
        // After a MatMul: no pattern.
        let mut nodes = conv_bn("V3", Some("Relu"));
        nodes[0] = node("conv", "MatMul", &["x", "filter"]);
        assert_eq!(remap(&mut nodes, &none()), 0);
        // The batch norm read twice: fused without the activation.
        let mut nodes = conv_bn("V3", Some("Relu"));
        nodes.push(node("side", "Square", &["bn"]));
        assert_eq!(remap(&mut nodes, &none()), 1);
        assert_eq!(fused_ops(find(&nodes, "bn")), ["FusedBatchNorm"]);
        assert_eq!(find(&nodes, "act").op, "Relu");
    }

    #[test]
    fn a_bias_add_after_a_convolution_must_be_nhwc() {
        let mut nodes = vec![
            node("conv", "Conv2D", &["x", "filter"]),
            node("ba", "BiasAdd", &["conv", "b"]).with_attr("data_format", "NCHW"),
        ];
        assert_eq!(remap(&mut nodes, &none()), 0);
    }
}
