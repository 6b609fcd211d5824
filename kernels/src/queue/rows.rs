//! Row operations on tensors along dimension 0, for queue elements: the shape of one
//! row, a zero-copy row range when possible, and stacking rows of several tensors
//! into one batch (a copy of contiguous bytes per source range).

use graph::{DType, Result, Status, Tensor, TensorShape};

use crate::allocator::Allocator;

/// The shape of one row of `t` (its dims after the first).
pub fn row_shape(t: &Tensor) -> TensorShape {
    TensorShape::new(t.dims().get(1..).unwrap_or(&[]))
}

/// Rows of `t` (rank ≥ 1).
pub fn num_rows(t: &Tensor) -> usize {
    t.dims().first().copied().unwrap_or(0)
}

/// A tensor of shape `[1] + element` holding `element` (no copy).
pub fn as_batch_of_one(element: &Tensor) -> Result<Tensor> {
    let mut dims = vec![1];
    dims.extend_from_slice(element.dims());
    element.reshaped(dims)
}

/// Row `i` of `t`, shaped as one element (no copy when `t` has a single row).
pub fn row(t: &Tensor, i: usize) -> Result<Tensor> {
    if num_rows(t) == 1 && i == 0 {
        return t.reshaped(row_shape(t));
    }
    let mut out = stack_rows(&[(t, i, 1)])?;
    out = out.reshaped(row_shape(t))?;
    Ok(out)
}

/// Stacks `count` rows from `start` of each source into one tensor of shape
/// `[total] + row_shape`; every source must have the same dtype and row shape.
pub fn stack_rows(parts: &[(&Tensor, usize, usize)]) -> Result<Tensor> {
    let first = parts
        .first()
        .ok_or_else(|| Status::internal("stack_rows of nothing"))?
        .0;
    let dtype = first.dtype();
    let rshape = row_shape(first);
    let total: usize = parts.iter().map(|p| p.2).sum();
    for (t, start, count) in parts {
        if t.dtype() != dtype || row_shape(t) != rshape {
            return Err(Status::invalid_argument(format!(
                "cannot batch elements of shape {} and {} (dtype {} and {})",
                rshape,
                row_shape(t),
                dtype,
                t.dtype()
            )));
        }
        if start + count > num_rows(t) {
            return Err(Status::internal("row range out of bounds"));
        }
    }
    let mut dims = vec![total];
    dims.extend_from_slice(rshape.dims());
    // A single whole source is returned as is.
    if parts.len() == 1 && parts[0].1 == 0 && parts[0].2 == num_rows(parts[0].0) {
        return Ok(parts[0].0.clone());
    }
    let per_row = rshape.num_elements();
    match dtype {
        DType::String => {
            let mut v = Vec::with_capacity(total * per_row);
            for (t, start, count) in parts {
                let s = t.as_strings()?;
                v.extend_from_slice(&s[start * per_row..(start + count) * per_row]);
            }
            Tensor::from_strings(&dims, v)
        }
        DType::Resource => {
            let mut v = Vec::with_capacity(total * per_row);
            for (t, start, count) in parts {
                let s = t.as_resource_handles()?;
                v.extend_from_slice(&s[start * per_row..(start + count) * per_row]);
            }
            Tensor::from_resource_handles(&dims, v)
        }
        d => {
            let row_bytes = per_row * d.size();
            let mut bytes = Vec::with_capacity(total * row_bytes);
            for (t, start, count) in parts {
                let b = t.as_bytes()?;
                bytes.extend_from_slice(&b[start * row_bytes..(start + count) * row_bytes]);
            }
            Tensor::from_raw_bytes(d, &dims, &bytes)
        }
    }
}

/// Stacks single elements (each of the same shape) into a batch.
pub fn stack_elements(elements: &[Tensor]) -> Result<Tensor> {
    let batched: Vec<Tensor> = elements
        .iter()
        .map(as_batch_of_one)
        .collect::<Result<_>>()?;
    let parts: Vec<(&Tensor, usize, usize)> = batched.iter().map(|t| (t, 0, 1)).collect();
    stack_rows(&parts)
}

/// Pads `t` to `shape` (each dim ≥ `t`'s) with zeros or empty strings, in a
/// tensor from `alloc`.
pub fn pad_to(alloc: Allocator<'_>, t: &Tensor, shape: &TensorShape) -> Result<Tensor> {
    if t.shape() == shape {
        return Ok(t.clone());
    }
    if t.rank() != shape.rank() || t.dims().iter().zip(shape.dims()).any(|(a, b)| a > b) {
        return Err(Status::internal("padding target smaller than the value"));
    }
    let src_dims = t.dims().to_vec();
    let n = t.num_elements();
    let mut index = vec![0usize; src_dims.len()];
    let dst_strides: Vec<usize> = (0..shape.rank())
        .map(|i| shape.dims()[i + 1..].iter().product())
        .collect();
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        offsets.push(
            index
                .iter()
                .zip(&dst_strides)
                .map(|(i, s)| i * s)
                .sum::<usize>(),
        );
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < src_dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
    alloc.check(t.dtype(), shape)?;
    match t.dtype() {
        DType::String => {
            let mut out = alloc.zeros(DType::String, shape.clone())?;
            let (src, dst) = (t.as_strings()?, out.as_strings_mut()?);
            for (k, &o) in offsets.iter().enumerate() {
                dst[o] = src[k].clone();
            }
            Ok(out)
        }
        d if d.is_pod() => {
            let size = d.size();
            let src = t.as_bytes()?;
            let mut v = alloc.vec(shape.num_elements() * size, 0u8)?;
            for (k, &o) in offsets.iter().enumerate() {
                v[o * size..(o + 1) * size].copy_from_slice(&src[k * size..(k + 1) * size]);
            }
            Tensor::from_raw_bytes(d, shape.dims(), &v)
        }
        d => Err(Status::unimplemented(format!("cannot pad {d} tensors"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_stack_and_pad() {
        let a = Tensor::new(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(row(&a, 1).unwrap(), Tensor::vector(&[3i32, 4]));
        let b = Tensor::new(&[1, 2], vec![7i32, 8]).unwrap();
        let s = stack_rows(&[(&a, 1, 2), (&b, 0, 1)]).unwrap();
        assert_eq!(s, Tensor::new(&[3, 2], vec![3i32, 4, 5, 6, 7, 8]).unwrap());
        assert!(stack_rows(&[
            (&a, 0, 1),
            (&Tensor::new(&[1, 3], vec![0i32; 3]).unwrap(), 0, 1)
        ])
        .is_err());
        let whole = stack_rows(&[(&a, 0, 3)]).unwrap();
        assert!(whole.shares_buffer_with(&a), "a whole source is not copied");
        let e = stack_elements(&[Tensor::scalar(1.5f32), Tensor::scalar(2.5f32)]).unwrap();
        assert_eq!(e, Tensor::vector(&[1.5f32, 2.5]));
        let p = pad_to(
            Allocator::unlimited(),
            &Tensor::new(&[1, 2], vec![1i32, 2]).unwrap(),
            &TensorShape::new(&[2, 3]),
        )
        .unwrap();
        assert_eq!(p, Tensor::new(&[2, 3], vec![1i32, 2, 0, 0, 0, 0]).unwrap());
        let s = Tensor::from_strings(&[1], vec!["x"]).unwrap();
        let ps = pad_to(Allocator::unlimited(), &s, &TensorShape::new(&[2])).unwrap();
        assert_eq!(ps.as_strings().unwrap()[1], bytes::Bytes::new());
    }
}
