//! `Einsum` (TensorFlow's `linalg_ops.cc`): a contraction of one or two operands
//! written as an equation `"ij,jk->ik"`, with `...` standing for broadcast
//! dimensions. [`EinsumEquation`] parses the equation as TensorFlow's
//! `ParseEinsumEquation` does and resolves it against operand ranks into label
//! ids ([`ResolvedEinsum`]); the shape function here, the CPU kernel and the
//! gradient all read the equation through it.
//!
//! Labels are characters; `.` starts an ellipsis (the two characters after it
//! are skipped, as TensorFlow's parser does). A resolved ellipsis becomes
//! broadcast labels, aligned from the right across the operands as numpy
//! broadcasts. An output label that no operand has is reported by
//! [`ResolvedEinsum::missing_output`] (the shape function rejects it; the kernel
//! leaves it out, as TensorFlow's does).

use crate::builder::{Output, Scope};
use crate::op_def::shape_fn::merge_dim;
use crate::op_def::{InferenceContext, OpDef};
use crate::{OpRegistry, Result, Shape, Status};

/// One subscript of an operand or of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subscript {
    /// A named axis label.
    Label(char),
    /// `...`: the broadcast dimensions.
    Ellipsis,
}

/// A parsed equation: each operand's subscripts and the output's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EinsumEquation {
    /// The equation as written.
    pub text: String,
    /// The subscripts of each operand.
    pub inputs: Vec<Vec<Subscript>>,
    /// The subscripts of the output.
    pub output: Vec<Subscript>,
}

/// An equation resolved against operand ranks: every axis as a label id. Ids
/// `0..num_named` are the named labels (in order of first appearance), then
/// `num_named..num_named + num_broadcast` the broadcast dimensions (outermost
/// first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedEinsum {
    /// Each operand's axes.
    pub inputs: Vec<Vec<usize>>,
    /// The output's axes (labels no operand has left out).
    pub output: Vec<usize>,
    /// The named labels, by id.
    pub named: Vec<char>,
    /// The number of broadcast labels (the longest ellipsis).
    pub num_broadcast: usize,
    /// An output label no operand has, if any.
    pub missing_output: Option<char>,
}

impl ResolvedEinsum {
    /// The number of label ids.
    pub fn num_labels(&self) -> usize {
        self.named.len() + self.num_broadcast
    }
}

fn parse_subscripts(s: &str) -> Vec<Subscript> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '.' {
            out.push(Subscript::Ellipsis);
            i += 3;
        } else {
            out.push(Subscript::Label(chars[i]));
            i += 1;
        }
    }
    out
}

impl EinsumEquation {
    /// Parses `equation` for `num_inputs` operands, with TensorFlow's messages.
    pub fn parse(equation: &str, num_inputs: usize) -> Result<EinsumEquation> {
        let parts: Vec<&str> = equation.split("->").collect();
        let [ins, out] = parts[..] else {
            return Err(Status::invalid_argument(format!(
                "Expecting exactly one '->' in einsum equation: {equation}"
            )));
        };
        let inputs: Vec<Vec<Subscript>> = ins.split(',').map(parse_subscripts).collect();
        if inputs.len() > 2 {
            return Err(Status::invalid_argument(format!(
                "Expecting 1 or 2 input subscripts in equation '{equation}' but got: {}",
                inputs.len()
            )));
        }
        if inputs.len() != num_inputs {
            return Err(Status::invalid_argument(format!(
                "Expected {} inputs but got: {num_inputs}",
                inputs.len()
            )));
        }
        Ok(EinsumEquation {
            text: equation.to_owned(),
            inputs,
            output: parse_subscripts(out),
        })
    }

    /// Resolves the equation for operands of ranks `ranks` ("Expected input i to
    /// have rank …" when one does not fit its subscripts).
    pub fn resolve(&self, ranks: &[usize]) -> Result<ResolvedEinsum> {
        let mut named: Vec<char> = Vec::new();
        let id_of = |c: char, named: &mut Vec<char>| match named.iter().position(|&n| n == c) {
            Some(p) => p,
            None => {
                named.push(c);
                named.len() - 1
            }
        };
        // Named ids first, for every operand, then broadcast ids.
        let mut ellipsis_rank = Vec::with_capacity(ranks.len());
        for (i, (subs, &rank)) in self.inputs.iter().zip(ranks).enumerate() {
            let n_named = subs
                .iter()
                .filter(|s| matches!(s, Subscript::Label(_)))
                .count();
            let has_ellipsis = subs.len() > n_named;
            if (!has_ellipsis && rank != n_named) || rank < n_named {
                let what = if has_ellipsis { "at least " } else { "" };
                return Err(Status::invalid_argument(format!(
                    "Expected input {i} to have rank {what}{n_named} but got: {rank}"
                )));
            }
            ellipsis_rank.push(rank - n_named);
            for s in subs {
                if let Subscript::Label(c) = s {
                    id_of(*c, &mut named);
                }
            }
        }
        let num_broadcast = ellipsis_rank.iter().copied().max().unwrap_or(0);
        let nn = named.len();
        let expand = |subs: &[Subscript], er: usize, named: &mut Vec<char>| -> Vec<usize> {
            let mut out = Vec::new();
            for s in subs {
                match s {
                    Subscript::Label(c) => out.push(named.iter().position(|n| n == c).unwrap_or(0)),
                    Subscript::Ellipsis => {
                        out.extend((num_broadcast - er..num_broadcast).map(|b| nn + b))
                    }
                }
            }
            out
        };
        let inputs: Vec<Vec<usize>> = self
            .inputs
            .iter()
            .zip(&ellipsis_rank)
            .map(|(subs, &er)| expand(subs, er, &mut named))
            .collect();
        let mut output = Vec::new();
        let mut missing_output = None;
        let mut out_has_ellipsis = false;
        for s in &self.output {
            match s {
                Subscript::Label(c) => match named.iter().position(|n| n == c) {
                    Some(p) => output.push(p),
                    None => {
                        missing_output.get_or_insert(*c);
                    }
                },
                Subscript::Ellipsis => {
                    out_has_ellipsis = true;
                    output.extend((0..num_broadcast).map(|b| nn + b));
                }
            }
        }
        if num_broadcast > 0 && !out_has_ellipsis {
            return Err(Status::invalid_argument(format!(
                "Output contains {num_broadcast} broadcasting dimension(s) but no ellipsis (...) \
                 was found in the output subscripts."
            )));
        }
        Ok(ResolvedEinsum {
            inputs,
            output,
            named,
            num_broadcast,
            missing_output,
        })
    }
}

/// Registers Einsum.
pub(super) fn register_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("Einsum")
            .input("inputs: N * T")
            .output("output: T")
            .attr("equation: string")
            .attr("N: int >= 1")
            .attr("T: type")
            .shape_fn(einsum_shape),
    );
}

/// TensorFlow's `EinsumShape`: each label's dimension merged over its axes, the
/// broadcast dimensions broadcast.
fn einsum_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let text: String = c.attr("equation")?;
    let eq = EinsumEquation::parse(&text, c.num_inputs())?;
    let shapes: Vec<Shape> = (0..c.num_inputs()).map(|i| c.input(i)).collect();
    let Some(ranks) = shapes
        .iter()
        .map(Shape::rank)
        .collect::<Option<Vec<usize>>>()
    else {
        return c.set_output(0, Shape::unknown());
    };
    let resolved = eq.resolve(&ranks).map_err(|e| {
        // TensorFlow's graph-mode message for an operand of the wrong rank.
        let msg = e.message();
        match (msg.find("to have rank "), msg.rfind(" but got: ")) {
            (Some(a), Some(b)) => {
                let i: String = msg["Expected input ".len()..a - 1].to_owned();
                let want = msg[a + "to have rank ".len()..b].trim_start_matches("at least ");
                Status::invalid_argument(format!(
                    "Shape must be rank {want} but is rank {}\n\t for {i}th input and equation: {text}",
                    &msg[b + " but got: ".len()..]
                ))
            }
            _ => e,
        }
    })?;
    if let Some(l) = resolved.missing_output {
        return Err(Status::invalid_argument(format!(
            "Einsum output subscripts for equation '{text}' has label '{l}' which is not present \
             in the input subscripts"
        )));
    }
    let mut dims: Vec<Option<usize>> = vec![None; resolved.num_labels()];
    let nn = resolved.named.len();
    for (axes, shape) in resolved.inputs.iter().zip(&shapes) {
        let d = shape.dims().unwrap_or_default();
        for (&label, &dim) in axes.iter().zip(d) {
            if label < nn {
                dims[label] = merge_dim(dims[label], dim)?;
            } else {
                dims[label] = match (dims[label], dim) {
                    (Some(1), y) | (y, Some(1)) => y.or(Some(1)),
                    (x, y) => merge_dim(x, y)?,
                };
            }
        }
    }
    let out: Vec<Option<usize>> = resolved.output.iter().map(|&l| dims[l]).collect();
    c.set_output(0, Shape::from_dims(&out))
}

/// `Einsum`: the contraction `equation` of one or two operands.
pub fn einsum(s: &Scope, inputs: &[Output], equation: &str) -> Result<Output> {
    s.op("Einsum")
        .input_list(inputs)
        .attr("equation", equation)
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::placeholder;
    use crate::DType;

    #[test]
    fn parses_and_resolves() {
        let eq = EinsumEquation::parse("...ij,jk->...ik", 2).unwrap();
        let r = eq.resolve(&[4, 2]).unwrap();
        // i=0, j=1, k=2, broadcast 3 and 4.
        assert_eq!(r.inputs, vec![vec![3, 4, 0, 1], vec![1, 2]]);
        assert_eq!(r.output, vec![3, 4, 0, 2]);
        assert!(EinsumEquation::parse("ij,jk", 2).is_err());
        assert!(EinsumEquation::parse("ij,jk->ik", 1).is_err());
        let e = EinsumEquation::parse("ijk->ij", 1)
            .unwrap()
            .resolve(&[2])
            .unwrap_err();
        assert_eq!(e.message(), "Expected input 0 to have rank 3 but got: 2");
        let r = EinsumEquation::parse("ij->ik", 1)
            .unwrap()
            .resolve(&[2])
            .unwrap();
        assert_eq!((r.output.clone(), r.missing_output), (vec![0], Some('k')));
    }

    #[test]
    fn einsum_shapes() {
        let s = Scope::new();
        let x = placeholder(&s, DType::F32, Shape::known(&[2, 1, 2, 3])).unwrap();
        let y = placeholder(&s, DType::F32, Shape::known(&[3, 3, 4])).unwrap();
        let out = einsum(&s, &[x, y], "...ij,...jk->...ik").unwrap();
        assert_eq!(out.shape(), Shape::known(&[2, 3, 2, 4]));
        let z = placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(4)])).unwrap();
        assert_eq!(
            einsum(&s, std::slice::from_ref(&z), "ii->i")
                .unwrap()
                .shape(),
            Shape::known(&[4])
        );
        assert!(einsum(&s, &[z], "ij->ik").is_err());
    }
}
