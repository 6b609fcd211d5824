//! Static shape inference over a whole graph: runs every op's shape function in
//! topological order (loop back edges count as unknown), giving constant inputs
//! their values. Used by the cost model; failures degrade to unknown shapes rather
//! than errors, because graph validation already happened.

use std::collections::VecDeque;

use crate::op_def::InferenceContext;
use crate::{Graph, Shape, Tensor};

/// The inferred shape of every output of every node of `g`.
pub fn infer_shapes(g: &Graph) -> Vec<Vec<Shape>> {
    infer_shapes_with(g, &|_| None)
}

/// As [`infer_shapes`], with the output shapes of some nodes given: `known(id)`
/// (e.g. a step's `_Arg`s, whose fed values are checked against a shape) replaces
/// the shape function of node `id` when it answers.
pub fn infer_shapes_with(
    g: &Graph,
    known: &dyn Fn(usize) -> Option<Vec<Shape>>,
) -> Vec<Vec<Shape>> {
    let n = g.num_nodes();
    let mut shapes: Vec<Vec<Shape>> = g
        .nodes()
        .iter()
        .map(|x| vec![Shape::unknown(); x.num_outputs()])
        .collect();
    let is_back_edge =
        |src: usize| matches!(g.node(src).op(), "NextIteration" | "RefNextIteration");
    let mut indeg = vec![0usize; n];
    for e in g.edges() {
        if !is_back_edge(e.src) {
            indeg[e.dst] += 1;
        }
    }
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    while let Some(u) = queue.pop_front() {
        let node = g.node(u);
        if let Some(given) = known(u) {
            shapes[u] = given;
        } else if let Some(f) = node.op_def.shape_fn {
            let mut ins = vec![Shape::unknown(); node.num_inputs()];
            let mut vals: Vec<Option<Tensor>> = vec![None; node.num_inputs()];
            for e in g.in_edges(u).filter(|e| !e.is_control()) {
                let i = e.dst_input as usize;
                ins[i] = shapes[e.src][e.src_output as usize].clone();
                let src = g.node(e.src);
                if src.op() == "Const" {
                    vals[i] = src.def.get_attr::<Tensor>("value").ok();
                }
            }
            let mut ctx = InferenceContext::new(&node.def, &ins, &vals, node.num_outputs());
            if f(&mut ctx).is_ok() {
                shapes[u] = ctx.into_outputs();
            }
        }
        if is_back_edge(u) {
            continue;
        }
        for e in g.out_edges(u) {
            indeg[e.dst] -= 1;
            if indeg[e.dst] == 0 {
                queue.push_back(e.dst);
            }
        }
    }
    shapes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Scope;
    use crate::{ops, DType, OpRegistry};

    #[test]
    fn infers_through_the_graph() {
        let s = Scope::new();
        let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(3)])).unwrap();
        let c = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0, 3.0])).unwrap();
        let y = ops::add(&s, &x, &c).unwrap();
        let g = Graph::from_graph_def(&s.graph_def(), OpRegistry::global()).unwrap();
        let shapes = infer_shapes(&g);
        assert_eq!(
            shapes[g.find(y.op().name()).unwrap()][0],
            Shape::from_dims(&[None, Some(3)])
        );
    }
}
