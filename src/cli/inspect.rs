//! `actorflow inspect`: a graph's op histogram, the node counts before and after
//! each graph optimization, the placement and partitions a
//! session chooses for one step (by default, one that runs every node), and the
//! graph as Graphviz DOT (`--dot`) or SVG (`--svg`, when `dot` is installed).
//! Given a checkpoint prefix instead of a graph (`model.ckpt-300`, whose
//! `.index` exists), it lists the checkpoint's tensors with their dtypes and
//! shapes, as TensorFlow's `inspect_checkpoint` does. Given a SavedModel
//! directory, it shows each tag set and its signatures' inputs and outputs
//! (dtype, shape, tensor name), as TensorFlow's `saved_model_cli show --all`
//! does, and the variables the model saved.

use std::collections::BTreeMap;
use std::path::PathBuf;

use actorflow::{dot, GraphDef, Result};
use clap::{Args, ValueEnum};

use super::{io_error, GraphArgs};

/// What `--dot`/`--svg` draw.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The partitions: devices as clusters, Send/Recv pairs as red edges.
    Partitions,
    /// The whole graph, the step's nodes coloured by device (others white).
    Placement,
    /// The graph as loaded, without placement.
    Graph,
}

/// Arguments of `actorflow inspect`.
#[derive(Args, Debug, Clone)]
pub struct InspectArgs {
    /// The graph and session.
    #[command(flatten)]
    pub graph: GraphArgs,
    /// Inspect the step that feeds this tensor (repeatable; default: none).
    #[arg(long = "feed", value_name = "NAME")]
    pub feed: Vec<String>,
    /// Inspect the step that fetches this tensor (repeatable).
    #[arg(long = "fetch", value_name = "NAME[:PORT]")]
    pub fetch: Vec<String>,
    /// Inspect the step that runs this node (repeatable). Without --fetch or
    /// --target, the step runs every node.
    #[arg(long = "target", value_name = "NODE")]
    pub target: Vec<String>,
    /// Print each node's device.
    #[arg(long)]
    pub nodes: bool,
    /// Write the graph as Graphviz DOT.
    #[arg(long, value_name = "FILE.dot")]
    pub dot: Option<PathBuf>,
    /// Write the graph as SVG (needs Graphviz's `dot` on PATH; skipped otherwise).
    #[arg(long, value_name = "FILE.svg")]
    pub svg: Option<PathBuf>,
    /// What --dot and --svg draw.
    #[arg(long, value_enum, default_value_t = View::Partitions)]
    pub view: View,
}

/// Lists the tensors of the checkpoint at `prefix`: name, dtype, shape.
fn inspect_checkpoint(prefix: &std::path::Path) -> Result<()> {
    let r = actorflow::train::CheckpointReader::open(prefix)?;
    let infos: Vec<_> = r.tensors().collect();
    println!("checkpoint {}: {} tensors", prefix.display(), infos.len());
    let width = infos.iter().map(|i| i.name.len()).max().unwrap_or(0);
    for i in infos {
        println!("  {:<width$}  {:<8}  {}", i.name, i.dtype.name(), i.shape);
    }
    Ok(())
}

/// A shape as `saved_model_cli` prints it: `(-1, 3)`, `()`, or `unknown_rank`.
fn shape_text(s: &actorflow::Shape) -> String {
    match s.to_tf_dims() {
        None => "unknown_rank".into(),
        Some(d) if d.len() == 1 => format!("({},)", d[0]),
        Some(d) => format!(
            "({})",
            d.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Shows the SavedModel in `dir`: tag sets, signatures, variables.
fn inspect_saved_model(dir: &std::path::Path) -> Result<()> {
    use actorflow::saved_model::{self, Signature, INIT_OP_SIGNATURE_KEY};
    let proto = saved_model::read_saved_model(dir)?;
    println!(
        "SavedModel {}: {} meta graph(s)",
        dir.display(),
        proto.meta_graphs.len()
    );
    for mg in &proto.meta_graphs {
        let tags = mg
            .meta_info_def
            .as_ref()
            .map(|m| m.tags.join(", "))
            .unwrap_or_default();
        let nodes = mg.graph_def.as_ref().map_or(0, |g| g.node.len());
        let functions = mg
            .graph_def
            .as_ref()
            .and_then(|g| g.library.as_ref())
            .map_or(0, |l| l.function.len());
        println!();
        println!("MetaGraphDef with tag-set: '{tags}' ({nodes} nodes, {functions} library functions) contains the following SignatureDefs:");
        for (key, def) in &mg.signature_def {
            if key == INIT_OP_SIGNATURE_KEY {
                continue;
            }
            println!();
            println!("signature_def['{key}']:");
            let sig =
                Signature::from_proto(def).map_err(|e| e.context(format!("signature '{key}'")))?;
            for (what, specs) in [("input", &sig.inputs), ("output", &sig.outputs)] {
                println!("  The given SavedModel SignatureDef contains the following {what}(s):");
                for (k, spec) in specs {
                    println!("    {what}s['{k}'] tensor_info:");
                    println!("        dtype: {}", spec.dtype.proto_name());
                    println!("        shape: {}", shape_text(&spec.shape));
                    println!("        name: {}", spec.name);
                }
            }
            println!("  Method name is: {}", sig.method_name);
        }
    }
    let prefix = dir
        .join(saved_model::VARIABLES_DIRECTORY)
        .join(saved_model::VARIABLES_FILENAME);
    if actorflow::kernels::cpu::checkpoint::bundle::index_path(&prefix).is_file() {
        println!();
        inspect_checkpoint(&prefix)?;
    }
    Ok(())
}

/// Op name → count, most frequent first (ties by name).
pub fn op_histogram(g: &GraphDef) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &g.node {
        *counts.entry(n.op.as_str()).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().map(|(k, c)| (k.to_owned(), c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// `actorflow inspect`.
pub fn main(args: &InspectArgs) -> Result<()> {
    let path = &args.graph.graph;
    if actorflow::kernels::cpu::checkpoint::bundle::index_path(path).is_file() {
        return inspect_checkpoint(path);
    }
    if super::run::is_saved_model_path(path) {
        return inspect_saved_model(path);
    }
    let graph = args.graph.load()?;
    println!(
        "graph {}: {} nodes",
        args.graph.graph.display(),
        graph.node.len()
    );
    println!("ops:");
    for (op, n) in op_histogram(&graph) {
        println!("  {n:>6}  {op}");
    }

    let sess = args.graph.session(&graph)?;
    let all: Vec<&str>;
    let (feeds, fetches, targets): (Vec<&str>, Vec<&str>, Vec<&str>) =
        if args.fetch.is_empty() && args.target.is_empty() {
            all = graph.node.iter().map(|n| n.name.as_str()).collect();
            (
                args.feed.iter().map(String::as_str).collect(),
                vec![],
                all.clone(),
            )
        } else {
            (
                args.feed.iter().map(String::as_str).collect(),
                args.fetch.iter().map(String::as_str).collect(),
                args.target.iter().map(String::as_str).collect(),
            )
        };
    let step = sess.compiled_step(&feeds, &fetches, &targets)?;

    let mut per_device: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, d) in &step.placement {
        *per_device.entry(d.as_str()).or_default() += 1;
    }
    if step.optimizations.is_empty() {
        println!("optimizations: off");
    } else {
        println!("optimizations:");
    }
    for p in &step.optimizations {
        let what = match p.pass {
            "constant_folding" => "folded",
            "remapper" => "fused",
            _ => "merged",
        };
        println!(
            "  {}: {} -> {} nodes ({} {what})",
            p.pass, p.nodes_before, p.nodes_after, p.changed
        );
    }
    println!("placement ({} nodes in the step):", step.placement.len());
    for (d, n) in &per_device {
        println!("  {n:>6}  {d}");
    }
    if args.nodes {
        for (node, d) in &step.placement {
            println!("    {node}  {d}");
        }
    }
    println!(
        "partitions: {} ({} Send/Recv pairs, {} receives scheduled)",
        step.partitions.len(),
        step.transfers,
        step.scheduled_recvs
    );
    let mut partition_graphs = Vec::new();
    for p in &step.partitions {
        let count = |ops: &[&str]| {
            p.graph
                .node
                .iter()
                .filter(|n| ops.contains(&n.op.as_str()))
                .count()
        };
        let device = p.device.clone();
        println!(
            "  {device}: {} nodes, {} sends, {} recvs",
            p.graph.node.len(),
            count(&["_Send", "_HostSend"]),
            count(&["_Recv", "_HostRecv"])
        );
        partition_graphs.push((device, p.graph.clone()));
    }

    if args.dot.is_none() && args.svg.is_none() {
        return Ok(());
    }
    let text = match args.view {
        View::Partitions => dot::partitions_to_dot(&partition_graphs)?,
        View::Placement => dot::graph_to_dot(&graph, Some(&step.placement))?,
        View::Graph => dot::graph_to_dot(&graph, None)?,
    };
    if let Some(path) = &args.dot {
        std::fs::write(path, &text).map_err(|e| io_error(e, "writing", path))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        match dot::render_svg(&text)? {
            Some(svg) => {
                std::fs::write(path, svg).map_err(|e| io_error(e, "writing", path))?;
                eprintln!("wrote {}", path.display());
            }
            None => eprintln!(
                "note: Graphviz 'dot' is not on PATH; skipped --svg {} (install graphviz)",
                path.display()
            ),
        }
    }
    Ok(())
}
