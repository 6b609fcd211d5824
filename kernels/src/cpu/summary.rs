//! CPU kernels of the summary ops (TensorFlow's `summary_op.cc`). Each outputs a
//! serialized [`Summary`] as a string scalar:
//!
//! - `ScalarSummary`: one `simple_value` (the value converted to `float`) per tag;
//!   `tags` and `values` must have the same shape.
//! - `HistogramSummary`: one histogram over TensorFlow's default buckets, empty
//!   runs collapsed; the tag must be a scalar and every value finite.
//! - `MergeSummary`: the values of every serialized summary of every input, in
//!   order; a non-empty tag seen twice is an error.

use std::collections::HashSet;
use std::marker::PhantomData;

use graph::proto::summary::summary::{value, Value};
use graph::proto::summary::{Histogram, MessageBytes, Summary, SummaryExt};
use graph::{DType, Result, Status, Tensor, TensorShape};

use crate::cpu::types::{Numeric, NUMERIC_DTYPES};
use crate::dispatch_numeric;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

fn summary_tensor(s: &Summary) -> Tensor {
    Tensor::string_scalar(s.to_bytes())
}

/// `" (tag 'x')"` when `tags` has one element, as TensorFlow's messages add.
fn single_tag(tags: &Tensor) -> String {
    match tags.as_strings() {
        Ok([t]) => format!(" (tag '{}')", String::from_utf8_lossy(t)),
        _ => String::new(),
    }
}

fn shape_string(s: &TensorShape) -> String {
    let dims: Vec<String> = s.dims().iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}

struct ScalarSummaryKernel<T>(PhantomData<fn(T)>);

impl<T: Numeric> OpKernel for ScalarSummaryKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let tags = ctx.input(0)?;
        let values = ctx.input(1)?;
        if tags.shape() != values.shape() {
            return Err(Status::invalid_argument(format!(
                "tags and values not the same shape: {} != {}{}",
                shape_string(tags.shape()),
                shape_string(values.shape()),
                single_tag(tags)
            )));
        }
        let names = tags.as_strings()?;
        let vals = values.as_slice::<T>()?;
        let mut s = Summary::default();
        for (tag, v) in names.iter().zip(vals) {
            s.value.push(Value {
                tag: String::from_utf8_lossy(tag).into_owned(),
                value: Some(value::Value::SimpleValue(v.to_f32().unwrap_or(f32::NAN))),
                ..Default::default()
            });
        }
        let out = summary_tensor(&s);
        ctx.set_output(0, out)
    }
}

struct HistogramSummaryKernel<T> {
    name: String,
    _t: PhantomData<fn(T)>,
}

impl<T: Numeric> OpKernel for HistogramSummaryKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let tag = ctx.input(0)?;
        if tag.rank() != 0 {
            return Err(Status::invalid_argument("tags must be scalar"));
        }
        let tag = String::from_utf8_lossy(&tag.as_strings()?[0]).into_owned();
        let mut h = Histogram::new();
        for v in ctx.input(1)?.as_slice::<T>()? {
            let d = v.to_f64().unwrap_or(f64::NAN);
            if d.is_nan() {
                return Err(Status::invalid_argument(format!(
                    "Nan in summary histogram for: {}",
                    self.name
                )));
            }
            if d.is_infinite() {
                return Err(Status::invalid_argument(format!(
                    "Infinity in summary histogram for: {}",
                    self.name
                )));
            }
            h.add(d);
        }
        let out = summary_tensor(&Summary::histogram(&tag, h.to_proto(false)));
        ctx.set_output(0, out)
    }
}

struct MergeSummaryKernel;

impl OpKernel for MergeSummaryKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let mut s = Summary::default();
        let mut tags = HashSet::new();
        for i in 0..ctx.num_inputs() {
            for bytes in ctx.input(i)?.as_strings()? {
                let input = Summary::from_bytes(bytes).map_err(|_| {
                    Status::invalid_argument("Could not parse one of the summary inputs")
                })?;
                for v in input.value {
                    if !v.tag.is_empty() && !tags.insert(v.tag.clone()) {
                        return Err(Status::invalid_argument(format!(
                            "Duplicate tag {} found in summary inputs",
                            v.tag
                        )));
                    }
                    s.value.push(v);
                }
            }
        }
        let out = summary_tensor(&s);
        ctx.set_output(0, out)
    }
}

fn make_scalar(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    dispatch_numeric!(t, T => Ok(Box::new(ScalarSummaryKernel::<T>(PhantomData)) as Box<dyn OpKernel>))
}

fn make_histogram(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("T")?;
    let name = c.name().to_owned();
    dispatch_numeric!(t, T => Ok(Box::new(HistogramSummaryKernel::<T> { name, _t: PhantomData }) as Box<dyn OpKernel>))
}

/// Registers the summary kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("ScalarSummary", make_scalar).type_constraint("T", NUMERIC_DTYPES));
    r.register(
        KernelDef::cpu("HistogramSummary", make_histogram).type_constraint("T", NUMERIC_DTYPES),
    );
    r.register(KernelDef::cpu("MergeSummary", |_| {
        Ok(Box::new(MergeSummaryKernel))
    }));
}

#[cfg(test)]
mod tests {
    use graph::proto::summary::summary::value::Value;
    use graph::proto::summary::{default_bucket_limits, HistogramProto};
    use graph::{bf16, AttrValue, Code};

    use super::*;
    use crate::testutil::{run_op, run_op_lists};

    fn decode(t: &Tensor) -> Summary {
        assert_eq!(t.rank(), 0);
        Summary::from_bytes(&t.as_strings().unwrap()[0]).unwrap()
    }

    fn strings(dims: &[usize], v: &[&str]) -> Tensor {
        Tensor::from_strings(dims, v.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    #[test]
    fn scalar_summary_one_value_per_tag() {
        let out = run_op(
            "ScalarSummary",
            &[],
            vec![strings(&[2], &["a", "b"]), Tensor::vector(&[1.5f64, -2.0])],
        )
        .unwrap();
        let s = decode(&out[0]);
        assert_eq!(s.value.len(), 2);
        assert_eq!(
            (s.value[1].tag.as_str(), s.value[1].value.clone()),
            ("b", Some(Value::SimpleValue(-2.0)))
        );
        // Integers convert straight to float, rounding once.
        let big = (1i64 << 40) + 1;
        let out = run_op(
            "ScalarSummary",
            &[],
            vec![Tensor::string_scalar("i"), Tensor::scalar(big)],
        )
        .unwrap();
        assert_eq!(
            decode(&out[0]).value[0].value,
            Some(Value::SimpleValue(big as f32))
        );
        let out = run_op(
            "ScalarSummary",
            &[],
            vec![
                Tensor::string_scalar("h"),
                Tensor::scalar(bf16::from_f32(0.5)),
            ],
        )
        .unwrap();
        assert_eq!(
            decode(&out[0]).value[0].value,
            Some(Value::SimpleValue(0.5))
        );
    }

    #[test]
    fn scalar_summary_shape_mismatch() {
        let e = run_op(
            "ScalarSummary",
            &[],
            vec![Tensor::string_scalar("x"), Tensor::vector(&[1.0f32, 2.0])],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message()
                .contains("tags and values not the same shape: [] != [2] (tag 'x')"),
            "{e}"
        );
    }

    #[test]
    fn histogram_summary_matches_histogram() {
        let vals = [1.0f32, -2.0, 0.0, 3.5, 3.5];
        let out = run_op(
            "HistogramSummary",
            &[],
            vec![Tensor::string_scalar("w"), Tensor::vector(&vals)],
        )
        .unwrap();
        let s = decode(&out[0]);
        assert_eq!(s.value[0].tag, "w");
        let want = Histogram::from_values(vals.iter().map(|&v| v as f64)).to_proto(false);
        let Some(Value::Histo(h)) = &s.value[0].value else {
            panic!("no histogram")
        };
        assert_eq!(h, &want);
        assert_eq!((h.min, h.max, h.num, h.sum), (-2.0, 3.5, 5.0, 6.0));
        assert!(h
            .bucket_limit
            .iter()
            .all(|l| default_bucket_limits().contains(l)));
        let empty = run_op(
            "HistogramSummary",
            &[],
            vec![Tensor::string_scalar("e"), Tensor::vector::<i32>(&[])],
        )
        .unwrap();
        let Some(Value::Histo(h)) = &decode(&empty[0]).value[0].value else {
            panic!("no histogram")
        };
        assert_eq!(h.bucket, [0.0]);
    }

    #[test]
    fn histogram_summary_rejects_non_finite_and_non_scalar_tags() {
        let e = run_op(
            "HistogramSummary",
            &[],
            vec![
                Tensor::string_scalar("w"),
                Tensor::vector(&[1.0f64, f64::NAN]),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.message(), "Nan in summary histogram for: node");
        let e = run_op(
            "HistogramSummary",
            &[],
            vec![
                Tensor::string_scalar("w"),
                Tensor::vector(&[f32::NEG_INFINITY]),
            ],
        )
        .unwrap_err();
        assert_eq!(e.message(), "Infinity in summary histogram for: node");
        let e = run_op(
            "HistogramSummary",
            &[],
            vec![strings(&[1], &["w"]), Tensor::vector(&[1.0f32])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "tags must be scalar");
    }

    #[test]
    fn merge_summary_concatenates_and_rejects_duplicates() {
        let a = summary_tensor(&Summary::scalar("a", 1.0));
        let b = summary_tensor(&Summary::histogram("b", HistogramProto::default()));
        let mut untagged = Summary::scalar("", 2.0);
        untagged.value.push(untagged.value[0].clone());
        let pair = Tensor::from_strings(
            &[2],
            vec![untagged.to_bytes(), Summary::scalar("c", 3.0).to_bytes()],
        )
        .unwrap();
        let n = AttrValue::I(3);
        let out = run_op_lists(
            "MergeSummary",
            &[("N", n.clone())],
            vec![vec![a.clone(), b, pair]],
            Some(&[true]),
        )
        .unwrap();
        let tags: Vec<_> = decode(&out[0]).value.into_iter().map(|v| v.tag).collect();
        assert_eq!(tags, ["a", "b", "", "", "c"]);
        let e = run_op_lists(
            "MergeSummary",
            &[],
            vec![vec![a.clone(), a.clone()]],
            Some(&[true]),
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.message(), "Duplicate tag a found in summary inputs");
        let junk = Tensor::string_scalar(vec![0xffu8, 0xff]);
        let e = run_op_lists("MergeSummary", &[], vec![vec![a, junk]], Some(&[true])).unwrap_err();
        assert_eq!(e.message(), "Could not parse one of the summary inputs");
    }
}
