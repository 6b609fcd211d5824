//! The graph optimizer of a step (TensorFlow's `GraphOptimizer`, whitepaper §5):
//! run once per step signature, when a session builds a step, on the step graph
//! after placement (as TensorFlow runs it on placed graphs), never per step.
//!
//! - [`cse`] — common subexpression elimination (TensorFlow's `OptimizerCSE`).
//! - [`constant_folding`] — evaluating constant subgraphs (and shapes known
//!   statically) once, on the CPU, and replacing them by `Const`s.
//!
//! - [`remapper`](crate::passes::remapper) — the remapper's rewrites of
//!   `MatMul`/`Conv2D` + `BiasAdd`/`FusedBatchNorm` (+ activation) into
//!   `_FusedMatMul`/`_FusedConv2D`, switched by [`RewriterConfig::remapping`].
//!
//! [`optimize_step`] runs the passes as TensorFlow's `GraphOptimizer::Optimize`
//! does: constant folding, then CSE, repeated while either changes the graph (at
//! most [`MAX_ROUNDS`] rounds), then the remapper once (as grappler's
//! meta-optimizer runs it after those), and reports each pass's node counts.
//!
//! Invariants every pass keeps: the graph computes the same values for every
//! `_Retval`; `_Arg`s and `_Retval`s are untouched; a node the client fetches or
//! names as a target keeps its name; stateful ops and control-flow nodes are never
//! merged or evaluated; every node keeps the device it was placed on.

pub mod constant_folding;
pub mod cse;

use std::collections::HashSet;

use crate::{Graph, Node, NodeDef, OpRegistry, Result, Shape, Tensor};

/// Rounds of [`optimize_step`] at most (TensorFlow's `kMaxRounds`).
pub const MAX_ROUNDS: usize = 10;

/// The default of [`OptimizerOptions::max_folded_constant_in_bytes`]: 10 MiB, as
/// TensorFlow's.
pub const DEFAULT_MAX_FOLDED_CONSTANT_IN_BYTES: usize = 10 << 20;

/// TensorFlow's `OptimizerOptions.Level`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OptLevel {
    /// Common subexpression elimination and constant folding, whatever the
    /// `do_*` flags say (TensorFlow's default).
    #[default]
    L1,
    /// Only the passes whose `do_*` flag is set.
    L0,
}

/// Which graph optimizations a session runs on each step it builds (TensorFlow's
/// `OptimizerOptions`, the fields this runtime implements).
///
/// # Examples
/// ```
/// use actorflow_graph::passes::optimize::{OptLevel, OptimizerOptions};
/// let on = OptimizerOptions::default();
/// assert!(on.cse_enabled() && on.folding_enabled());
/// // As in TensorFlow, L1 turns both passes on; L0 leaves it to the flags.
/// let only_cse = OptimizerOptions::default()
///     .with_opt_level(OptLevel::L0)
///     .with_do_constant_folding(false);
/// assert!(only_cse.cse_enabled() && !only_cse.folding_enabled());
/// assert!(!OptimizerOptions::disabled().cse_enabled());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OptimizerOptions {
    /// Merge nodes that compute the same value ([`cse`]).
    pub do_common_subexpression_elimination: bool,
    /// Evaluate constant subgraphs at step build ([`constant_folding`]).
    pub do_constant_folding: bool,
    /// A folded value larger than this stays computed at run time; 0 means the
    /// default ([`DEFAULT_MAX_FOLDED_CONSTANT_IN_BYTES`]), as in TensorFlow.
    pub max_folded_constant_in_bytes: usize,
    /// [`OptLevel::L1`] enables both passes regardless of the flags.
    pub opt_level: OptLevel,
}

impl Default for OptimizerOptions {
    fn default() -> OptimizerOptions {
        OptimizerOptions {
            do_common_subexpression_elimination: true,
            do_constant_folding: true,
            max_folded_constant_in_bytes: DEFAULT_MAX_FOLDED_CONSTANT_IN_BYTES,
            opt_level: OptLevel::L1,
        }
    }
}

impl OptimizerOptions {
    crate::option_setters! {
        /// Sets [`do_common_subexpression_elimination`](Self::do_common_subexpression_elimination).
        with_do_common_subexpression_elimination => do_common_subexpression_elimination: bool;
        /// Sets [`do_constant_folding`](Self::do_constant_folding).
        with_do_constant_folding => do_constant_folding: bool;
        /// Sets [`max_folded_constant_in_bytes`](Self::max_folded_constant_in_bytes).
        with_max_folded_constant_in_bytes => max_folded_constant_in_bytes: usize;
        /// Sets [`opt_level`](Self::opt_level).
        with_opt_level => opt_level: OptLevel;
    }

    /// No optimization: level L0, both flags off.
    pub fn disabled() -> OptimizerOptions {
        OptimizerOptions {
            do_common_subexpression_elimination: false,
            do_constant_folding: false,
            max_folded_constant_in_bytes: 0,
            opt_level: OptLevel::L0,
        }
    }

    /// Whether CSE runs.
    pub fn cse_enabled(&self) -> bool {
        self.opt_level == OptLevel::L1 || self.do_common_subexpression_elimination
    }

    /// Whether constant folding runs.
    pub fn folding_enabled(&self) -> bool {
        self.opt_level == OptLevel::L1 || self.do_constant_folding
    }

    /// The folding size limit in bytes, the default for 0.
    pub fn max_folded_bytes(&self) -> usize {
        match self.max_folded_constant_in_bytes {
            0 => DEFAULT_MAX_FOLDED_CONSTANT_IN_BYTES,
            n => n,
        }
    }

    /// True when no pass runs.
    pub fn is_disabled(&self) -> bool {
        !self.cse_enabled() && !self.folding_enabled()
    }
}

/// TensorFlow's `RewriterConfig.Toggle`: `Default` means the optimizer's own
/// default (on, for every rewrite this runtime implements).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Toggle {
    /// The rewrite's default.
    #[default]
    Default,
    /// On.
    On,
    /// Off.
    Off,
    /// On, in the rewrite's aggressive mode where it has one (the same as `On`
    /// for the rewrites implemented here).
    Aggressive,
}

impl Toggle {
    /// Whether a rewrite that is on by default runs.
    pub fn enabled_by_default(self) -> bool {
        self != Toggle::Off
    }

    /// The toggle of TensorFlow's enum value (`DEFAULT = 0`, `ON = 1`, `OFF = 2`,
    /// `AGGRESSIVE = 3`; the experimental values count as `On`).
    pub fn from_proto(v: i32) -> Toggle {
        match v {
            0 => Toggle::Default,
            2 => Toggle::Off,
            3 => Toggle::Aggressive,
            _ => Toggle::On,
        }
    }

    /// TensorFlow's enum value.
    pub fn to_proto(self) -> i32 {
        match self {
            Toggle::Default => 0,
            Toggle::On => 1,
            Toggle::Off => 2,
            Toggle::Aggressive => 3,
        }
    }
}

/// The graph rewrites of TensorFlow's grappler (`RewriterConfig`) that this
/// runtime implements, by TensorFlow's field names.
///
/// # Examples
/// ```
/// use actorflow_graph::passes::optimize::{RewriterConfig, Toggle};
/// assert!(RewriterConfig::default().remapping_enabled());
/// assert!(!RewriterConfig::default().with_remapping(Toggle::Off).remapping_enabled());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RewriterConfig {
    /// Fusing `MatMul`/`Conv2D` + `BiasAdd`/`FusedBatchNorm` (+ activation)
    /// into `_FusedMatMul`/`_FusedConv2D`
    /// ([`remapper`](crate::passes::remapper)); on by default, as in
    /// TensorFlow.
    pub remapping: Toggle,
}

impl RewriterConfig {
    crate::option_setters! {
        /// Sets [`remapping`](Self::remapping).
        with_remapping => remapping: Toggle;
    }

    /// No rewrite.
    pub fn disabled() -> RewriterConfig {
        RewriterConfig {
            remapping: Toggle::Off,
        }
    }

    /// Whether the remapper runs.
    pub fn remapping_enabled(&self) -> bool {
        self.remapping.enabled_by_default()
    }

    /// True when no rewrite runs.
    pub fn is_disabled(&self) -> bool {
        !self.remapping_enabled()
    }
}

/// Runs one node's CPU kernel at step build, for [`constant_folding`]. The
/// runtime implements it over its kernel registry; the pass stays free of kernels.
pub trait NodeEvaluator {
    /// Whether `node` has a synchronous CPU kernel this evaluator can run.
    fn can_evaluate(&self, node: &Node) -> bool;
    /// Runs `node` once on `inputs` (one per data input) and returns its outputs.
    fn evaluate(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
    /// Whether the `Const` `node` can run on the device it names (empty: the CPU).
    fn supports_const(&self, node: &NodeDef) -> bool;
}

/// What one pass did to a step graph, summed over the rounds it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassReport {
    /// The pass: `"constant_folding"`, `"common_subexpression_elimination"` or
    /// `"remapper"`.
    pub pass: &'static str,
    /// Nodes before its first run.
    pub nodes_before: usize,
    /// `nodes_before` plus the nodes this pass added and minus those it removed,
    /// over all its runs (what the other pass did is not counted).
    pub nodes_after: usize,
    /// Nodes it removed by merging (CSE), replaced by `Const`s (folding), or
    /// chains it fused (remapper).
    pub changed: usize,
}

/// An optimized step graph and what each pass did to it.
#[derive(Clone, Debug)]
pub struct Optimized {
    /// The step's nodes.
    pub nodes: Vec<NodeDef>,
    /// One report per pass that ran, in the order they ran (folding, CSE,
    /// remapper).
    pub passes: Vec<PassReport>,
}

/// What the passes need to know of a step besides its nodes.
pub struct StepFacts<'a> {
    /// The op registry the nodes validate against.
    pub registry: &'a OpRegistry,
    /// Runs kernels for constant folding.
    pub evaluator: &'a dyn NodeEvaluator,
    /// The shape every fed value is checked against, by `_Arg` index (the runtime
    /// refuses a fed value of another shape, so a shape known here is known at
    /// run time).
    pub arg_shapes: &'a [Shape],
    /// Names that must survive besides the fetched nodes: the step's targets.
    pub keep: &'a [String],
}

/// Names of the nodes whose names must survive: the nodes fetched (the data inputs
/// of `_Retval`s) and `keep`.
pub(crate) fn protected_names<'a>(g: &'a Graph, keep: &'a [String]) -> HashSet<&'a str> {
    let mut out: HashSet<&str> = keep
        .iter()
        .map(|k| {
            let k = k.trim_start_matches('^');
            k.split(':').next().unwrap_or(k)
        })
        .collect();
    for (i, n) in g.nodes().iter().enumerate() {
        if n.op() == "_Retval" {
            for e in g.in_edges(i).filter(|e| !e.is_control()) {
                out.insert(g.node(e.src).name());
            }
        }
    }
    out
}

/// Ops never merged or folded, whatever their flags: loop and conditional
/// control flow (their outputs' frames and deadness are the executor's),
/// transfers, and the step's own arguments and results.
pub(crate) fn is_structural(op: &str) -> bool {
    matches!(
        op,
        "Enter"
            | "RefEnter"
            | "Exit"
            | "RefExit"
            | "NextIteration"
            | "RefNextIteration"
            | "Merge"
            | "RefMerge"
            | "Switch"
            | "RefSwitch"
            | "_SwitchN"
            | "LoopCond"
            | "ControlTrigger"
            | "_Send"
            | "_Recv"
            | "_HostSend"
            | "_HostRecv"
            | "_Arg"
            | "_Retval"
            | "Placeholder"
            | "PlaceholderV2"
            | "PlaceholderWithDefault"
    )
}

fn pass_report(pass: &'static str) -> PassReport {
    PassReport {
        pass,
        nodes_before: 0,
        nodes_after: 0,
        changed: 0,
    }
}

/// Runs the enabled passes on a step's nodes; see the module docs. A graph that
/// does not validate is an error (the step's nodes came from a valid graph).
pub fn optimize_step(
    nodes: Vec<NodeDef>,
    options: &OptimizerOptions,
    rewriter: &RewriterConfig,
    facts: &StepFacts<'_>,
) -> Result<Optimized> {
    if options.is_disabled() && rewriter.is_disabled() {
        return Ok(Optimized {
            nodes,
            passes: Vec::new(),
        });
    }
    let g = Graph::from_nodes(nodes, facts.registry)?;
    let (g, passes) = optimize_graph(g, options, rewriter, facts)?;
    Ok(Optimized {
        nodes: g.into_nodes(),
        passes,
    })
}

/// [`optimize_step`] of a step already built as a [`Graph`]: the graph is
/// rebuilt only when a pass changed it, so a step the passes leave alone costs
/// no copy.
pub fn optimize_graph(
    g: Graph,
    options: &OptimizerOptions,
    rewriter: &RewriterConfig,
    facts: &StepFacts<'_>,
) -> Result<(Graph, Vec<PassReport>)> {
    let mut passes = Vec::new();
    if options.is_disabled() && rewriter.is_disabled() {
        return Ok((g, passes));
    }
    let mut fold = options
        .folding_enabled()
        .then(|| pass_report("constant_folding"));
    let mut cse = options
        .cse_enabled()
        .then(|| pass_report("common_subexpression_elimination"));
    let folding = constant_folding::FoldOptions {
        max_constant_size_in_bytes: options.max_folded_bytes(),
    };
    let mut g = g;
    for r in fold.iter_mut().chain(cse.iter_mut()) {
        r.nodes_before = g.num_nodes();
        r.nodes_after = g.num_nodes();
    }
    for round in 0..MAX_ROUNDS {
        let mut changed = false;
        if let Some(r) = fold.as_mut() {
            let out = constant_folding::fold_constants(&g, &folding, facts)?;
            if out.replaced > 0 {
                r.nodes_after = (r.nodes_after + out.nodes.len()).saturating_sub(g.num_nodes());
                r.changed += out.folded;
                changed = true;
                g = Graph::from_nodes(out.nodes, facts.registry)?;
            }
        }
        if let Some(r) = cse.as_mut() {
            if round == 0 {
                r.nodes_before = g.num_nodes();
                r.nodes_after = g.num_nodes();
            }
            let out = cse::eliminate_common_subexpressions(&g, facts.keep);
            if out.merged > 0 {
                r.nodes_after = (r.nodes_after + out.nodes.len()).saturating_sub(g.num_nodes());
                r.changed += out.merged;
                changed = true;
                g = Graph::from_nodes(out.nodes, facts.registry)?;
            }
        }
        if !changed {
            break;
        }
    }
    passes.extend(fold);
    passes.extend(cse);
    if rewriter.remapping_enabled() {
        let before = g.num_nodes();
        let mut fused = 0;
        if crate::passes::remapper::may_fuse(g.nodes().iter().map(|n| n.op())) {
            let protected: HashSet<String> = protected_names(&g, facts.keep)
                .into_iter()
                .map(str::to_owned)
                .collect();
            let mut nodes = g.into_nodes();
            fused = crate::passes::remapper::remap(&mut nodes, &protected);
            g = Graph::from_nodes(nodes, facts.registry)?;
        }
        passes.push(PassReport {
            pass: "remapper",
            nodes_before: before,
            nodes_after: g.num_nodes(),
            changed: fused,
        });
    }
    Ok((g, passes))
}

#[cfg(test)]
mod tests;
