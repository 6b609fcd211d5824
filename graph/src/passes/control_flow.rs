//! Control-flow structure of a graph (TensorFlow's `BuildControlFlowInfo`): the loop
//! frame every node runs in, found by walking from the nodes without inputs: an
//! `Enter` sends its output into the frame named by its `frame_name`, an `Exit` to
//! the enclosing frame, every other node to its own frame.
//!
//! Checks: a node's inputs all come from one frame; no `Exit` outside a loop frame;
//! a frame is entered from one parent frame only.

use std::collections::{HashMap, VecDeque};

use crate::{Graph, NodeId, Result, Status};

/// One frame: 0 is the root.
#[derive(Clone, Debug)]
pub struct FrameDesc {
    /// Its name (`""` for the root).
    pub name: String,
    /// The enclosing frame.
    pub parent: Option<usize>,
    /// `parallel_iterations` of its first `Enter`.
    pub parallel_iterations: i64,
    /// Its `LoopCond`, if any.
    pub loop_cond: Option<NodeId>,
}

/// The frame of every node.
#[derive(Clone, Debug)]
pub struct ControlFlowInfo {
    /// Frame index per node (nodes not reachable from a node without inputs — only
    /// possible on a cycle — get the root).
    pub frame_of: Vec<usize>,
    /// The frames.
    pub frames: Vec<FrameDesc>,
    /// Frame index by name.
    pub by_name: HashMap<String, usize>,
}

fn op_is(g: &Graph, n: NodeId, names: &[&str]) -> bool {
    names.contains(&g.node(n).op())
}

impl ControlFlowInfo {
    /// The frame the outputs of `id` live in: an `Enter`'s is the frame it enters,
    /// an `Exit`'s the enclosing one, any other node's its own.
    pub fn output_frame(&self, g: &Graph, id: NodeId) -> usize {
        let node = g.node(id);
        match node.op() {
            "Enter" | "RefEnter" => node
                .def
                .get_attr::<String>("frame_name")
                .ok()
                .and_then(|f| self.by_name.get(&f).copied())
                .unwrap_or(0),
            "Exit" | "RefExit" => self.frames[self.frame_of[id]].parent.unwrap_or(0),
            _ => self.frame_of[id],
        }
    }
}

/// Builds the control-flow info of `g`; see the module docs.
pub fn build_control_flow_info(g: &Graph) -> Result<ControlFlowInfo> {
    let n = g.num_nodes();
    let mut info = ControlFlowInfo {
        frame_of: vec![0; n],
        frames: vec![FrameDesc {
            name: String::new(),
            parent: None,
            parallel_iterations: 1,
            loop_cond: None,
        }],
        by_name: HashMap::from([(String::new(), 0)]),
    };
    let mut seen: Vec<bool> = (0..n).map(|i| g.in_edges(i).next().is_none()).collect();
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| seen[i]).collect();
    while let Some(u) = queue.pop_front() {
        let node = g.node(u);
        let f = info.frame_of[u];
        let out_frame = if op_is(g, u, &["Enter", "RefEnter"]) {
            let name: String = node.def.get_attr("frame_name")?;
            let parallel: i64 = node.def.get_attr_or("parallel_iterations", 10)?;
            match info.by_name.get(&name) {
                Some(&id) => {
                    if info.frames[id].parent != Some(f) {
                        return Err(Status::invalid_argument(format!(
                            "frame '{name}' is entered from two different parent frames"
                        ))
                        .with_node(node.name()));
                    }
                    id
                }
                None => {
                    let id = info.frames.len();
                    info.frames.push(FrameDesc {
                        name: name.clone(),
                        parent: Some(f),
                        parallel_iterations: parallel.max(1),
                        loop_cond: None,
                    });
                    info.by_name.insert(name, id);
                    id
                }
            }
        } else if op_is(g, u, &["Exit", "RefExit"]) {
            info.frames[f].parent.ok_or_else(|| {
                Status::invalid_argument(
                    "Exit node is not inside a while loop frame (no matching Enter)",
                )
                .with_node(node.name())
            })?
        } else {
            f
        };
        for e in g.out_edges(u) {
            if !seen[e.dst] {
                seen[e.dst] = true;
                info.frame_of[e.dst] = out_frame;
                queue.push_back(e.dst);
            } else if info.frame_of[e.dst] != out_frame {
                let dst = g.node(e.dst).name().to_owned();
                return Err(Status::invalid_argument(format!(
                    "node '{dst}' has inputs from different frames: '{}' from frame '{}' and another input from frame '{}'",
                    node.name(),
                    info.frames[out_frame].name,
                    info.frames[info.frame_of[e.dst]].name
                ))
                .with_node(dst));
            }
        }
    }
    for i in 0..n {
        if op_is(g, i, &["LoopCond"]) {
            let f = info.frame_of[i];
            info.frames[f].loop_cond = Some(i);
        }
    }
    Ok(info)
}
