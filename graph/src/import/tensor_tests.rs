//! Tests of `TensorProto` ↔ `Tensor` conversion: every dtype both ways, both
//! representations, splatting, and malformed protos.

use super::*;
use crate::dtype::ALL_DTYPES;
use crate::Code;

fn proto(dtype: DType, dims: &[i64]) -> TensorProto {
    TensorProto {
        dtype: dtype.tf_enum(),
        tensor_shape: Some(TensorShapeProto {
            dim: dims_proto(dims.iter().copied()),
            unknown_rank: false,
        }),
        ..Default::default()
    }
}

fn sample(dtype: DType) -> Tensor {
    let n = 6;
    match dtype {
        DType::String => {
            Tensor::from_strings(&[2, 3], vec!["a", "", "b\0", "c", "d", "é"]).unwrap()
        }
        DType::Resource => {
            let h = |n: &str| ResourceHandle {
                device: "/cpu:0".into(),
                container: "c".into(),
                name: n.into(),
                type_name: "Var".into(),
            };
            Tensor::from_resource_handles(&[2], vec![h("a"), h("b")]).unwrap()
        }
        d => {
            // Distinct, non-zero elements whose bytes differ.
            let bytes: Vec<u8> = (0..n * d.size()).map(|i| (i % 7) as u8 + 1).collect();
            let bytes = if d == DType::Bool {
                (0..n).map(|i| (i % 2) as u8).collect()
            } else {
                bytes
            };
            Tensor::from_raw_bytes(d, &[2, 3], &bytes).unwrap()
        }
    }
}

#[test]
fn every_dtype_round_trips() {
    for d in ALL_DTYPES {
        let t = sample(d);
        let p = tensor_to_proto(&t);
        assert_eq!(tensor_from_proto(&p).unwrap(), t, "{d}");
        // Scalars and uniform tensors use one typed value.
        let s = Tensor::zeros(d, [4, 5]);
        let p = tensor_to_proto(&s);
        assert!(p.tensor_content.is_empty(), "{d}");
        assert_eq!(tensor_from_proto(&p).unwrap(), s, "{d}");
        let empty = Tensor::zeros(d, [0, 3]);
        assert_eq!(
            tensor_from_proto(&tensor_to_proto(&empty)).unwrap(),
            empty,
            "{d}"
        );
    }
}

#[test]
fn typed_fields_and_splats() {
    let mut p = proto(DType::F32, &[2, 2]);
    p.float_val = vec![1.0, 2.0];
    let t = tensor_from_proto(&p).unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), [1.0, 2.0, 2.0, 2.0]);

    let mut p = proto(DType::I8, &[3]);
    p.int_val = vec![-1, 300];
    assert_eq!(
        tensor_from_proto(&p).unwrap().as_slice::<i8>().unwrap(),
        [-1, 44, 44]
    );

    let mut p = proto(DType::F16, &[]);
    p.half_val = vec![0x3c00];
    assert_eq!(tensor_from_proto(&p).unwrap(), Tensor::scalar(f16::ONE));

    let mut p = proto(DType::BF16, &[2]);
    p.half_val = vec![0xc000];
    assert_eq!(
        tensor_from_proto(&p).unwrap(),
        Tensor::vector(&[bf16::from_f32(-2.0); 2])
    );

    let mut p = proto(DType::String, &[3]);
    p.string_val = vec![Bytes::from_static(b"x")];
    assert_eq!(
        tensor_from_proto(&p).unwrap(),
        Tensor::from_strings(&[3], vec!["x"; 3]).unwrap()
    );

    let mut p = proto(DType::Bool, &[2]);
    p.tensor_content = vec![0, 7].into();
    assert_eq!(
        tensor_from_proto(&p).unwrap(),
        Tensor::vector(&[false, true])
    );

    // TensorFlow's string tensor_content: varint lengths, then the bytes.
    let mut p = proto(DType::String, &[2]);
    p.tensor_content = vec![1, 2, b'a', b'b', b'c'].into();
    assert_eq!(
        tensor_from_proto(&p).unwrap(),
        Tensor::from_strings(&[2], vec!["a", "bc"]).unwrap()
    );

    // No shape is a scalar; no values are zeros.
    let p = TensorProto {
        dtype: DType::I64.tf_enum(),
        ..Default::default()
    };
    assert_eq!(tensor_from_proto(&p).unwrap(), Tensor::scalar(0i64));
}

#[test]
fn malformed_protos_are_errors() {
    let cases: Vec<(TensorProto, Code, &str)> = vec![
        (
            proto(DType::F32, &[-1]),
            Code::InvalidArgument,
            "invalid dimension size -1",
        ),
        (
            TensorProto {
                dtype: 8,
                ..Default::default()
            },
            Code::Unimplemented,
            "DT_COMPLEX64",
        ),
        (TensorProto::default(), Code::InvalidArgument, "DT_INVALID"),
        (
            TensorProto {
                dtype: 101,
                ..Default::default()
            },
            Code::InvalidArgument,
            "reference type DT_FLOAT_REF",
        ),
        (
            TensorProto {
                dtype: 99,
                ..Default::default()
            },
            Code::InvalidArgument,
            "unknown data type number 99",
        ),
        (
            TensorProto {
                float_val: vec![1.0, 2.0, 3.0],
                ..proto(DType::F32, &[2])
            },
            Code::InvalidArgument,
            "3 values",
        ),
        (
            TensorProto {
                int_val: vec![1],
                ..proto(DType::F32, &[2])
            },
            Code::InvalidArgument,
            "holds values in int_val",
        ),
        (
            TensorProto {
                tensor_content: vec![0; 7].into(),
                ..proto(DType::F32, &[2])
            },
            Code::InvalidArgument,
            "7 bytes",
        ),
        (
            TensorProto {
                tensor_content: vec![0; 8].into(),
                float_val: vec![1.0],
                ..proto(DType::F32, &[2])
            },
            Code::InvalidArgument,
            "both tensor_content",
        ),
        (
            TensorProto {
                tensor_content: vec![5, b'a'].into(),
                ..proto(DType::String, &[1])
            },
            Code::InvalidArgument,
            "malformed string",
        ),
        (
            TensorProto {
                tensor_content: vec![1, 1, b'a', b'b', b'c'].into(),
                ..proto(DType::String, &[2])
            },
            Code::InvalidArgument,
            "malformed string",
        ),
        (
            TensorProto {
                tensor_content: vec![1].into(),
                ..proto(DType::Resource, &[1])
            },
            Code::Unimplemented,
            "resource",
        ),
        (
            proto(DType::F32, &[i64::MAX, i64::MAX]),
            Code::InvalidArgument,
            "too large",
        ),
        (
            TensorProto {
                tensor_shape: Some(TensorShapeProto {
                    dim: vec![],
                    unknown_rank: true,
                }),
                ..proto(DType::F32, &[])
            },
            Code::InvalidArgument,
            "unknown rank",
        ),
    ];
    for (p, code, text) in cases {
        let e = tensor_from_proto(&p).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
        assert!(e.message().contains(text), "want '{text}': {e}");
    }
}

#[test]
fn size_limit_is_checked_before_allocating() {
    let mut p = proto(DType::F64, &[1 << 40]);
    p.double_val = vec![1.0];
    let e = tensor_from_proto(&p).unwrap_err();
    assert!(e.message().contains("bytes allowed"), "{e}");
    let p = proto(DType::U8, &[1000]);
    assert!(tensor_from_proto_limited(&p, 999).is_err());
    assert!(tensor_from_proto_limited(&p, 1000).is_ok());
}

#[test]
fn shapes_convert_both_ways() {
    for s in [
        Shape::unknown(),
        Shape::scalar(),
        Shape::from_dims(&[None, Some(0), Some(7)]),
    ] {
        assert_eq!(shape_from_proto(&shape_to_proto(&s)).unwrap(), s);
    }
    let bad = TensorShapeProto {
        dim: dims_proto([-2].into_iter()),
        unknown_rank: false,
    };
    assert!(shape_from_proto(&bad).is_err());
    let both = TensorShapeProto {
        dim: dims_proto([1].into_iter()),
        unknown_rank: true,
    };
    assert!(shape_from_proto(&both).is_err());
    assert_eq!(
        data_type_from_proto(120).unwrap(),
        DataType::reference(DType::Resource)
    );
}
