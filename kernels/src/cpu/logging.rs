//! `Assert`: `InvalidArgument("assertion failed: [..] [..]")` when the condition
//! is false, each data tensor summarised by its first `summarize` elements as
//! TensorFlow's `SummarizeValue` prints them.

use graph::{DType, Result, Status, Tensor};

use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

struct AssertKernel {
    summarize: usize,
}

/// The first `n` elements of `t`, space-separated, `...` when there are more.
fn summarize(t: &Tensor, n: usize) -> String {
    let total = t.num_elements();
    let shown = total.min(n);
    let items: Vec<String> = match t.dtype() {
        DType::String => match t.as_strings() {
            Ok(v) => v[..shown]
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect(),
            Err(_) => Vec::new(),
        },
        DType::Bool => match t.as_slice::<bool>() {
            Ok(v) => v[..shown].iter().map(|b| b.to_string()).collect(),
            Err(_) => Vec::new(),
        },
        d if d.is_float() || d.is_integer() => match t.to_f64_vec() {
            Some(v) => v[..shown].iter().map(|x| format!("{x}")).collect(),
            None => Vec::new(),
        },
        d => vec![format!("<{d}>")],
    };
    let mut s = items.join(" ");
    if total > shown {
        s.push_str("...");
    }
    s
}

impl OpKernel for AssertKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let cond = ctx.input(0)?;
        if cond.num_elements() != 1 {
            return Err(Status::invalid_argument(format!(
                "In[0] should be a scalar: {}",
                cond.shape()
            )));
        }
        if cond.as_slice::<bool>()?[0] {
            return Ok(());
        }
        let parts: Vec<String> = (1..ctx.num_inputs())
            .map(|i| Ok(format!("[{}]", summarize(ctx.input(i)?, self.summarize))))
            .collect::<Result<_>>()?;
        Err(Status::invalid_argument(format!(
            "assertion failed: {}",
            parts.join(" ")
        )))
    }
}

/// Registers the logging kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("Assert", |c| {
        let summarize: i64 = c.attr("summarize")?;
        Ok(Box::new(AssertKernel {
            summarize: summarize.max(0) as usize,
        }))
    }));
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_node;
    use graph::{Code, DType, NodeDef, Tensor};

    #[test]
    fn passes_or_fails_with_the_data() {
        let node = NodeDef::new("a", "Assert")
            .with_input("c")
            .with_input("x")
            .with_input("m")
            .with_attr("T", vec![DType::F32, DType::String])
            .with_attr("summarize", 2i64);
        let x = Tensor::vector(&[1.5f32, 2.0, 3.0]);
        let m = Tensor::from_strings(&[], vec![b"x too big".to_vec()]).unwrap();
        assert!(run_node(
            node.clone(),
            vec![Tensor::scalar(true), x.clone(), m.clone()]
        )
        .unwrap()
        .is_empty());
        let e = run_node(node, vec![Tensor::scalar(false), x, m]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.message(), "assertion failed: [1.5 2...] [x too big]");
    }
}
