use super::*;
use half::f16;

#[test]
fn scalars_are_inline_and_heap_tensors_share() {
    let mut s = Tensor::scalar(1.5f64);
    assert!(s.is_unique());
    assert!(matches!(s.0, Repr::Scalar { .. }));
    assert_eq!(std::mem::size_of::<Tensor>(), 16);
    let big = Tensor::new(&[100], (0..100).map(|i| i as f32).collect()).unwrap();
    let mut a = big.clone();
    assert!(a.shares_buffer_with(&big));
    assert!(!a.is_unique());
    // copy-on-write: writing to the clone leaves the original untouched
    a.as_mut_slice::<f32>().unwrap()[0] = 42.0;
    assert_eq!(big.as_slice::<f32>().unwrap()[0], 0.0);
    assert_eq!(a.as_slice::<f32>().unwrap()[0], 42.0);
    assert!(a.is_unique());
}

#[test]
fn zeroed_buffers_are_zero() {
    for len in [0usize, 1, 63, 64, 65, 4096, 1 << 22] {
        let b = buffer::AlignedBuffer::try_zeroed(len).unwrap();
        assert_eq!(b.as_bytes().len(), len);
        assert!(b.as_bytes().iter().all(|&x| x == 0), "{len} bytes");
    }
    // A zeroed tensor of every pod dtype reads as zeros; writes copy on share.
    let t = Tensor::zeros(DType::F32, [3, 5]);
    assert_eq!(t.as_slice::<f32>().unwrap(), &[0.0; 15]);
    let mut u = t.clone();
    u.as_mut_slice::<f32>().unwrap()[0] = 1.0;
    assert_eq!(t.as_slice::<f32>().unwrap()[0], 0.0);
    assert_eq!(u.as_slice::<f32>().unwrap()[0], 1.0);
}

#[test]
fn heap_buffers_are_64_byte_aligned_and_bytes_are_zero_copy() {
    let t = Tensor::zeros(DType::F32, [1000]);
    let b = t.as_bytes().unwrap();
    assert_eq!(b.as_ptr() as usize % 64, 0);
    let bytes = t.to_bytes().unwrap();
    assert_eq!(bytes.as_ptr(), b.as_ptr());
}

#[test]
fn dtype_and_shape_errors_are_clear() {
    let t = Tensor::new(&[2, 3], vec![0i32; 6]).unwrap();
    let e = t.as_slice::<f32>().unwrap_err();
    assert_eq!(e.code(), crate::Code::InvalidArgument);
    assert!(e.message().contains("expected a float32 tensor"));
    assert!(Tensor::new(&[2, 2], vec![1.0f32; 3]).is_err());
    assert!(t.reshaped([4]).is_err());
    assert_eq!(t.reshaped([3, 2]).unwrap().dims(), &[3, 2]);
    assert!(t.expect_shape(&Shape::from_dims(&[None, Some(3)])).is_ok());
    assert!(t.expect_shape(&Shape::known(&[3])).is_err());
    assert!(Tensor::string_scalar("x").as_bytes().is_err());
}

#[test]
fn ndarray_views_round_trip() {
    let t = Tensor::new(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]).unwrap();
    let v = t.as_array::<i64>().unwrap();
    assert_eq!(v.shape(), &[2, 3]);
    assert_eq!(v[[1, 2]], 6);
    let tr = v.t();
    let back = Tensor::from_array(tr);
    assert_eq!(back.dims(), &[3, 2]);
    assert_eq!(back.as_slice::<i64>().unwrap(), &[1, 4, 2, 5, 3, 6]);
    let mut m = t.clone();
    m.as_array_mut::<i64>().unwrap()[[0, 0]] = 9;
    assert_eq!(m.as_slice::<i64>().unwrap()[0], 9);
    assert_eq!(t.as_slice::<i64>().unwrap()[0], 1);
}

#[test]
fn empty_and_rank0_tensors() {
    let e = Tensor::new::<f32>(&[0, 3], vec![]).unwrap();
    assert_eq!(e.num_elements(), 0);
    assert_eq!(e.as_slice::<f32>().unwrap().len(), 0);
    let s = Tensor::scalar(3u8);
    assert_eq!(s.rank(), 0);
    assert_eq!(s.scalar_value::<u8>().unwrap(), 3);
    assert!(Tensor::vector(&[1u8, 2]).scalar_value::<u8>().is_err());
}

#[test]
fn bools_are_normalised_and_strings_work() {
    let t = Tensor::from_raw_bytes(DType::Bool, &[3], &[0, 2, 1]).unwrap();
    assert_eq!(t.as_slice::<bool>().unwrap(), &[false, true, true]);
    let s = Tensor::from_strings(&[2], vec!["ab", "c"]).unwrap();
    assert_eq!(s.as_strings().unwrap()[1], Bytes::from("c"));
    assert_eq!(s.byte_size(), 3);
    let h = Tensor::scalar(f16::from_f32(1.5));
    assert_eq!(h.to_f64_vec().unwrap(), vec![1.5]);
}

#[test]
fn equality_is_by_value() {
    let a = Tensor::vector(&[1.0f32, f32::NAN]);
    let b = Tensor::vector(&[1.0f32, f32::NAN]);
    assert_eq!(a, b);
    assert_ne!(a, Tensor::vector(&[1.0f64, f64::NAN]));
    assert_ne!(a, a.reshaped([2, 1]).unwrap());
}

/// An 8 GB … 2^62-byte tensor used to abort in `AlignedBuffer::zeroed`; fallible
/// constructors now say `ResourceExhausted` in TensorFlow's words.
#[test]
fn tensors_that_cannot_be_allocated_are_resource_exhausted() {
    use crate::Code;
    for (dtype, dims) in [
        (DType::F32, vec![1usize << 60]),
        (DType::F64, vec![1 << 40, 1 << 40]), // the element count overflows
        (DType::U8, vec![usize::MAX]),
        (DType::String, vec![1 << 58]),
        (DType::Resource, vec![1 << 58]),
    ] {
        let e = Tensor::try_zeros(dtype, dims.as_slice()).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
        assert!(
            e.message()
                .starts_with("OOM when allocating tensor with shape ["),
            "{e}"
        );
        assert!(e.message().contains(&format!("and type {dtype}")), "{e}");
    }
    let e = Tensor::try_build::<f32>([1usize << 61], |_| unreachable!()).unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert_eq!(
        buffer::AlignedBuffer::try_zeroed(usize::MAX).err(),
        Some(buffer::AllocError::CapacityOverflow)
    );
    // Small ones still work, and the same constructors build them.
    let t = Tensor::try_build::<i32>([2, 2], |o| o.copy_from_slice(&[1, 2, 3, 4])).unwrap();
    assert_eq!(t, Tensor::new(&[2, 2], vec![1, 2, 3, 4]).unwrap());
    assert_eq!(
        Tensor::try_zeros(DType::String, [2])
            .unwrap()
            .as_strings()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        storage_bytes(DType::F32, &TensorShape::new(&[3, 5])),
        Some(60)
    );
    assert_eq!(
        storage_bytes(DType::F32, &TensorShape::new(&[usize::MAX, 2])),
        None
    );
    assert_eq!(
        TensorShape::new(&[usize::MAX, 2]).num_elements(),
        usize::MAX
    );
    assert_eq!(TensorShape::new(&[usize::MAX, 2, 0]).num_elements(), 0);
}

#[test]
fn raw_bools_are_normalised_in_the_one_copy() {
    let t = Tensor::from_raw_bytes(DType::Bool, &[3], &[0, 7, 1]).unwrap();
    assert_eq!(t.as_slice::<bool>().unwrap(), &[false, true, true]);
    let s = Tensor::from_raw_bytes(DType::Bool, &[], &[9]).unwrap();
    assert!(s.scalar_value::<bool>().unwrap());
}
