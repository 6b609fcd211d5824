//! String ops TensorFlow's `Saver` builds: `StringJoin` (element-wise
//! concatenation with a separator, scalars broadcast) and `StaticRegexFullMatch`
//! (whether each element matches a pattern fixed at graph construction, RE2
//! syntax, through the `regex` crate, whose syntax is RE2's); and the bucketing
//! of feature columns: `StringToHashBucketFast` (FarmHash `Fingerprint64` modulo
//! the bucket count) and `StringToHashBucketStrong` (keyed SipHash-2-4), hashes
//! in [`crate::cpu::hash`].

use graph::{Result, Status, Tensor};

use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

struct StringJoinKernel {
    separator: String,
}

impl OpKernel for StringJoinKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs();
        let mut shape = None;
        for i in 0..n {
            let t = ctx.input(i)?;
            if t.rank() == 0 {
                continue;
            }
            match &shape {
                None => shape = Some(t.shape().clone()),
                Some(s) if s != t.shape() => {
                    return Err(Status::invalid_argument(format!(
                        "Inputs to StringJoin must be scalars or have the same shape: {} and {}",
                        s,
                        t.shape()
                    )))
                }
                Some(_) => {}
            }
        }
        let shape = shape.unwrap_or_else(graph::TensorShape::scalar);
        let count = shape.num_elements();
        let mut out = vec![Vec::<u8>::new(); count];
        for i in 0..n {
            let t = ctx.input(i)?;
            let v = t.as_strings()?;
            for (j, o) in out.iter_mut().enumerate() {
                if i > 0 {
                    o.extend_from_slice(self.separator.as_bytes());
                }
                o.extend_from_slice(if t.rank() == 0 { &v[0] } else { &v[j] });
            }
        }
        ctx.set_output(0, Tensor::from_strings(shape.dims(), out)?)
    }
}

/// `StringToHashBucketFast` (no key) and `StringToHashBucketStrong` (a key).
struct HashBucketKernel {
    buckets: u64,
    key: Option<(u64, u64)>,
}

impl OpKernel for HashBucketKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let t = ctx.input(0)?;
        let s = t.as_strings()?;
        let out = ctx.allocator().build::<i64>(t.shape().clone(), |o| {
            for (o, s) in o.iter_mut().zip(s) {
                let h = match self.key {
                    None => crate::cpu::hash::fingerprint64(s),
                    Some((k0, k1)) => crate::cpu::hash::siphash24(k0, k1, s),
                };
                // Below `num_buckets`, itself an int64: the cast is exact.
                *o = (h % self.buckets) as i64;
            }
        })?;
        ctx.set_output(0, out)
    }
}

/// The `num_buckets` attribute (at least 1, as the op's definition requires).
fn buckets(c: &crate::op_kernel::OpKernelConstruction<'_>) -> Result<u64> {
    let n: i64 = c.attr("num_buckets")?;
    u64::try_from(n)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| Status::invalid_argument(format!("num_buckets must be >= 1, got {n}")))
}

struct StaticRegexFullMatchKernel {
    regex: regex::bytes::Regex,
}

impl OpKernel for StaticRegexFullMatchKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let t = ctx.input(0)?;
        let v: Vec<bool> = t
            .as_strings()?
            .iter()
            .map(|s| self.regex.is_match(s))
            .collect();
        let out = Tensor::new(t.dims(), v)?;
        ctx.set_output(0, out)
    }
}

/// Registers the string kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(KernelDef::cpu("StringToHashBucketFast", |c| {
        Ok(Box::new(HashBucketKernel {
            buckets: buckets(c)?,
            key: None,
        }))
    }));
    r.register(KernelDef::cpu("StringToHashBucketStrong", |c| {
        let key: Vec<i64> = c.attr("key")?;
        let [k0, k1] = key[..] else {
            return Err(Status::invalid_argument("Key must have 2 elements"));
        };
        Ok(Box::new(HashBucketKernel {
            buckets: buckets(c)?,
            key: Some((k0 as u64, k1 as u64)),
        }))
    }));
    r.register(KernelDef::cpu("StringJoin", |c| {
        Ok(Box::new(StringJoinKernel {
            separator: c.attr("separator")?,
        }))
    }));
    r.register(KernelDef::cpu("StaticRegexFullMatch", |c| {
        let pattern: String = c.attr("pattern")?;
        // A full match: the whole element, not a substring.
        let regex = regex::bytes::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
            Status::invalid_argument(format!("Invalid pattern: {pattern}, error: {e}"))
        })?;
        Ok(Box::new(StaticRegexFullMatchKernel { regex }))
    }));
}

#[cfg(test)]
mod tests {
    use graph::{DType, NodeDef, Tensor};

    use crate::testutil::run_node;

    fn strings(shape: &[usize], v: &[&str]) -> Tensor {
        Tensor::from_strings(shape, v.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    #[test]
    fn string_join_broadcasts_scalars() {
        let n = NodeDef::new("j", "StringJoin")
            .with_input("a")
            .with_input("b")
            .with_input("c")
            .with_attr("N", 3i64)
            .with_attr("separator", "/".to_string());
        let out = run_node(
            n.clone(),
            vec![
                strings(&[], &["x"]),
                strings(&[2], &["a", "b"]),
                strings(&[], &[""]),
            ],
        )
        .unwrap();
        assert_eq!(out[0], strings(&[2], &["x/a/", "x/b/"]));
        let e = run_node(
            n,
            vec![
                strings(&[2], &["a", "b"]),
                strings(&[3], &["a", "b", "c"]),
                strings(&[], &[""]),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), graph::Code::InvalidArgument);
    }

    #[test]
    fn static_regex_full_match_matches_whole_elements() {
        let n = NodeDef::new("m", "StaticRegexFullMatch")
            .with_input("s")
            .with_attr("pattern", "^s3://.*".to_string());
        let out = run_node(
            n,
            vec![strings(&[3], &["s3://bucket/x", "/tmp/s3://", "s3:/"])],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::vector(&[true, false, false]));
        let n = NodeDef::new("m", "StaticRegexFullMatch")
            .with_input("s")
            .with_attr("pattern", "ab".to_string());
        let out = run_node(n, vec![strings(&[2], &["ab", "abc"])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[true, false]));
        assert_eq!(out[0].dtype(), DType::Bool);
        let bad = NodeDef::new("m", "StaticRegexFullMatch")
            .with_input("s")
            .with_attr("pattern", "(".to_string());
        assert!(run_node(bad, vec![strings(&[], &["x"])]).is_err());
    }
}
