//! Human-readable printing of tensors, numpy style, truncated for large tensors.
//! Printing reads only the elements it shows: nothing is converted or copied, so
//! printing a tensor of 700 million elements costs as much as printing 16.

use std::fmt;

use super::Tensor;
use crate::{DType, TensorType};

/// Elements printed before the rest is elided.
const MAX_PRINTED: usize = 16;

fn write_elems(t: &Tensor, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let n = t.num_elements();
    let shown = n.min(MAX_PRINTED);
    let item = |i: usize, f: &mut fmt::Formatter<'_>| -> fmt::Result {
        match t.dtype() {
            DType::String => match t.as_strings() {
                Ok(s) => match s.get(i) {
                    Some(s) => write!(f, "{:?}", String::from_utf8_lossy(s)),
                    None => f.write_str("?"),
                },
                Err(_) => f.write_str("?"),
            },
            DType::Resource => match t.as_resource_handles().ok().and_then(|r| r.get(i)) {
                Some(r) => write!(f, "<{}:{}/{}>", r.type_name, r.container, r.name),
                None => f.write_str("?"),
            },
            DType::Bool => match t.as_slice::<bool>().ok().and_then(|s| s.get(i)) {
                Some(b) => write!(f, "{b}"),
                None => f.write_str("?"),
            },
            d => {
                let v = crate::dispatch_pod!(
                    d,
                    T => t.as_slice::<T>().ok().and_then(|s| s.get(i)).map(|&v| v.to_f64()),
                    None
                );
                match v {
                    Some(v) if d.is_float() => write!(f, "{v}"),
                    Some(v) => write!(f, "{}", v as i128),
                    None => f.write_str("?"),
                }
            }
        }
    };
    if t.rank() == 0 {
        return item(0, f);
    }
    f.write_str("[")?;
    for i in 0..shown {
        if i > 0 {
            f.write_str(", ")?;
        }
        item(i, f)?;
    }
    if shown < n {
        write!(f, ", … ({} more)", n - shown)?;
    }
    f.write_str("]")
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_elems(self, f)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}, {}>(", self.dtype(), self.shape())?;
        write_elems(self, f)?;
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    #[test]
    fn prints_like_numpy() {
        let t = Tensor::new(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
        assert_eq!(format!("{t}"), "[1, 2, 3, 4]");
        assert_eq!(format!("{t:?}"), "Tensor<int32, [2,2]>([1, 2, 3, 4])");
        assert_eq!(format!("{}", Tensor::scalar(true)), "true");
        assert_eq!(format!("{}", Tensor::scalar(0.5f32)), "0.5");
        let long = Tensor::new(&[20], vec![0u8; 20]).unwrap();
        assert!(format!("{long}").ends_with("… (4 more)]"));
        assert_eq!(format!("{}", Tensor::string_scalar("hi")), "\"hi\"");
        let i = Tensor::new(&[3], vec![-1i64, 2, 1 << 40]).unwrap();
        assert_eq!(format!("{i}"), "[-1, 2, 1099511627776]");
    }

    /// Printing used to convert the whole tensor to `f64` once per printed element
    /// (16 times 5.7 GB for a 715M-element fetch); it now reads 16 elements.
    #[test]
    fn printing_a_huge_tensor_reads_only_what_it_shows() {
        let t = crate::Tensor::zeros(crate::DType::F32, [1 << 27]); // 512 MiB, untouched
        let start = std::time::Instant::now();
        let s = format!("{t}");
        assert!(s.ends_with(&format!("… ({} more)]", (1 << 27) - 16)), "{s}");
        assert!(
            start.elapsed() < std::time::Duration::from_millis(200),
            "{:?}",
            start.elapsed()
        );
    }
}
