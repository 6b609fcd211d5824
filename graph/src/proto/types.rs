//! TensorFlow's `DataType` enum (`types.proto`), as [`TfDataType`]: every value
//! TensorFlow defines, including the ones actorflow cannot hold (complex,
//! quantized, variant, float8, int4 …) so that errors can name them, and the
//! `_REF` values (base + 100).
//!
//! Protobuf messages keep data types as `i32` (proto3 enums are open); actorflow's
//! [`DType`](crate::DType) converts from those numbers with
//! [`DType::from_tf_enum`](crate::DType::from_tf_enum). TensorFlow's names
//! (`DT_FLOAT`) are [`TfDataType::as_str_name`] and
//! [`TfDataType::from_str_name`].

/// TensorFlow's `DataType` enum; see the module docs.
pub use ::proto::tensorflow::DataType as TfDataType;

/// The offset TensorFlow adds to a data type's number for its `_REF` form.
pub const REF_OFFSET: i32 = 100;

/// The enum name of a data type number (`DT_COMPLEX64`), or `DataType(n)` for a
/// number TensorFlow does not define.
pub fn data_type_name(v: i32) -> String {
    match TfDataType::try_from(v) {
        Ok(t) => t.as_str_name().to_owned(),
        Err(_) => format!("DataType({v})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::ALL_DTYPES;

    #[test]
    fn names_numbers_and_refs_agree() {
        let all: Vec<TfDataType> = (0..=2 * REF_OFFSET)
            .filter_map(|n| TfDataType::try_from(n).ok())
            .collect();
        assert_eq!(all.len(), 67);
        for t in all {
            assert_eq!(TfDataType::from_str_name(t.as_str_name()), Some(t));
            let n = t as i32;
            if n > REF_OFFSET {
                let base = TfDataType::try_from(n - REF_OFFSET).unwrap();
                assert_eq!(t.as_str_name(), format!("{}_REF", base.as_str_name()));
            }
        }
        for d in ALL_DTYPES {
            let t = TfDataType::try_from(d.tf_enum()).unwrap();
            assert_eq!(t.as_str_name(), d.proto_name());
        }
        assert_eq!(data_type_name(8), "DT_COMPLEX64");
        assert_eq!(data_type_name(77), "DataType(77)");
        assert_eq!(TfDataType::from_str_name("DT_NOPE"), None);
    }
}
