//! Hashing of strings into buckets (TensorFlow's `string_ops.cc`), how feature
//! columns map vocabulary-free categorical strings to ids:
//!
//! - `StringToHashBucketFast`: FarmHash `Fingerprint64(s) % num_buckets`, stable
//!   across processes and machines (the numbers TensorFlow gives).
//! - `StringToHashBucketStrong`: keyed SipHash-2-4 (`key` = two integers) `%
//!   num_buckets`, for inputs an adversary may choose.
//!
//! (`StringJoin` and `StaticRegexFullMatch` are with the checkpoint ops, which
//! build shard names with them.)

use crate::builder::{Output, Scope};
use crate::op_def::{shape_fn, OpDef};
use crate::{OpRegistry, Result};

/// Registers the string hashing ops.
pub fn register_all_ops(r: &OpRegistry) {
    r.register(
        OpDef::build("StringToHashBucketFast")
            .input("input: string")
            .output("output: int64")
            .attr("num_buckets: int >= 1")
            .shape_fn(shape_fn::unchanged),
    );
    r.register(
        OpDef::build("StringToHashBucketStrong")
            .input("input: string")
            .output("output: int64")
            .attr("num_buckets: int >= 1")
            .attr("key: list(int)")
            .shape_fn(shape_fn::unchanged),
    );
}

/// `StringToHashBucketFast`: each string of `input` to
/// `Fingerprint64(s) % num_buckets` (int64, `input`'s shape).
///
/// # Examples
/// ```
/// use actorflow_graph::{builder::Scope, ops, DType, Shape};
/// let s = Scope::new();
/// let words = ops::placeholder(&s, DType::String, Shape::from_dims(&[None])).unwrap();
/// let ids = ops::string_to_hash_bucket_fast(&s, &words, 1000).unwrap();
/// assert_eq!(ids.dtype(), DType::I64);
/// ```
pub fn string_to_hash_bucket_fast(s: &Scope, input: &Output, num_buckets: i64) -> Result<Output> {
    s.op("StringToHashBucketFast")
        .input(input)
        .attr("num_buckets", num_buckets)
        .build1()
}

/// `StringToHashBucketStrong`: each string of `input` to
/// `SipHash-2-4(key, s) % num_buckets`; `key` must hold two integers (checked
/// when the kernel is built, as in TensorFlow).
pub fn string_to_hash_bucket_strong(
    s: &Scope,
    input: &Output,
    num_buckets: i64,
    key: &[i64],
) -> Result<Output> {
    s.op("StringToHashBucketStrong")
        .input(input)
        .attr("num_buckets", num_buckets)
        .attr("key", key.to_vec())
        .build1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::placeholder;
    use crate::{DType, Shape};

    #[test]
    fn bucket_ops_keep_the_shape() {
        let s = Scope::new();
        let x = placeholder(&s, DType::String, Shape::from_dims(&[Some(4), None])).unwrap();
        let y = string_to_hash_bucket_fast(&s, &x, 10).unwrap();
        assert_eq!(y.shape(), Shape::from_dims(&[Some(4), None]));
        let y = string_to_hash_bucket_strong(&s, &x, 10, &[1, 2]).unwrap();
        assert_eq!(y.dtype(), DType::I64);
        assert!(string_to_hash_bucket_fast(&s, &x, 0).is_err());
        let n = placeholder(&s, DType::I64, Shape::scalar()).unwrap();
        assert!(string_to_hash_bucket_fast(&s, &n, 5).is_err());
    }
}
