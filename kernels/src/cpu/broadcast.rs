//! Numpy broadcasting ([`BCast`], after TensorFlow's `bcast.h`): the output shape of
//! two shapes, and a loop that applies a binary function over them.
//!
//! Adjacent dimensions that broadcast the same way are collapsed first, so the
//! common cases (equal shapes, a scalar, a row vector) run as one or two flat loops
//! whose inner loop has unit or zero strides.

use graph::{Result, Status, TensorShape};
use smallvec::SmallVec;

type Dims = SmallVec<[usize; 6]>;

/// The broadcast of two shapes. See the module docs.
#[derive(Debug, Clone)]
pub struct BCast {
    out_shape: TensorShape,
    /// Collapsed output dims.
    dims: Dims,
    /// Element strides of each input over the collapsed dims (0 where broadcast).
    a_strides: Dims,
    b_strides: Dims,
}

impl BCast {
    /// Broadcasts `a` and `b`; `InvalidArgument` naming both shapes when they are
    /// incompatible.
    pub fn new(a: &[usize], b: &[usize]) -> Result<BCast> {
        let rank = a.len().max(b.len());
        let pad = |s: &[usize]| -> Dims {
            let mut v: Dims = SmallVec::from_elem(1, rank - s.len());
            v.extend_from_slice(s);
            v
        };
        let (pa, pb) = (pad(a), pad(b));
        let mut out = TensorShape::scalar();
        for i in 0..rank {
            let d = match (pa[i], pb[i]) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => {
                    return Err(Status::invalid_argument(format!(
                        "Incompatible shapes: {} vs. {}",
                        TensorShape::new(a),
                        TensorShape::new(b)
                    )))
                }
            };
            out.push(d);
        }
        // Collapse runs of dims with the same (a broadcast?, b broadcast?) pattern.
        let mut dims: Dims = SmallVec::new();
        let mut da: Dims = SmallVec::new();
        let mut db: Dims = SmallVec::new();
        let mut prev: Option<(bool, bool)> = None;
        for i in 0..rank {
            let d = out.dim(i);
            if d == 1 {
                continue;
            }
            let pat = (pa[i] == 1, pb[i] == 1);
            if prev == Some(pat) {
                let last = dims.len() - 1;
                dims[last] *= d;
                da[last] *= pa[i];
                db[last] *= pb[i];
            } else {
                dims.push(d);
                da.push(pa[i]);
                db.push(pb[i]);
                prev = Some(pat);
            }
        }
        let strides = |ext: &Dims| -> Dims {
            let mut s: Dims = SmallVec::from_elem(0, ext.len());
            let mut acc = 1;
            for i in (0..ext.len()).rev() {
                s[i] = if ext[i] == 1 { 0 } else { acc };
                acc *= ext[i];
            }
            s
        };
        Ok(BCast {
            a_strides: strides(&da),
            b_strides: strides(&db),
            dims,
            out_shape: out,
        })
    }

    /// The output shape.
    pub fn output_shape(&self) -> &TensorShape {
        &self.out_shape
    }

    /// True when no broadcasting is needed (equal shapes).
    pub fn is_identity(&self) -> bool {
        self.a_strides.iter().all(|&s| s != 0) && self.b_strides.iter().all(|&s| s != 0)
    }

    /// Writes `out[i] = f(a[ia], b[ib])` over the broadcast, `out` sized to the output.
    pub fn apply<A: Copy, B: Copy, O>(
        &self,
        a: &[A],
        b: &[B],
        out: &mut [O],
        f: impl Fn(A, B) -> O,
    ) {
        let r = self.dims.len();
        if r == 0 {
            if let (Some(o), Some(&x), Some(&y)) = (out.first_mut(), a.first(), b.first()) {
                *o = f(x, y);
            }
            return;
        }
        let inner = self.dims[r - 1];
        if out.is_empty() || inner == 0 {
            return;
        }
        let (sa, sb) = (self.a_strides[r - 1], self.b_strides[r - 1]);
        let mut idx: Dims = SmallVec::from_elem(0, r - 1);
        let (mut ao, mut bo) = (0usize, 0usize);
        for chunk in out.chunks_mut(inner) {
            match (sa, sb) {
                (1, 1) => {
                    for ((o, &x), &y) in chunk
                        .iter_mut()
                        .zip(&a[ao..ao + inner])
                        .zip(&b[bo..bo + inner])
                    {
                        *o = f(x, y);
                    }
                }
                (1, 0) => {
                    let y = b[bo];
                    for (o, &x) in chunk.iter_mut().zip(&a[ao..ao + inner]) {
                        *o = f(x, y);
                    }
                }
                (0, 1) => {
                    let x = a[ao];
                    for (o, &y) in chunk.iter_mut().zip(&b[bo..bo + inner]) {
                        *o = f(x, y);
                    }
                }
                _ => {
                    for (j, o) in chunk.iter_mut().enumerate() {
                        *o = f(a[ao + j * sa], b[bo + j * sb]);
                    }
                }
            }
            // advance the odometer over the outer dims
            for d in (0..r - 1).rev() {
                idx[d] += 1;
                ao += self.a_strides[d];
                bo += self.b_strides[d];
                if idx[d] < self.dims[d] {
                    break;
                }
                ao -= self.a_strides[d] * self.dims[d];
                bo -= self.b_strides[d] * self.dims[d];
                idx[d] = 0;
            }
        }
    }

    /// Writes `out[i] = f(ia, ib)`, the input-element indices of every output
    /// element, over the broadcast (for elements that are not `Copy`, like
    /// strings). `out` is sized to the output; nothing else is allocated.
    pub fn apply_indexed<O>(&self, out: &mut [O], mut f: impl FnMut(usize, usize) -> O) {
        let r = self.dims.len();
        if r == 0 {
            if let Some(o) = out.first_mut() {
                *o = f(0, 0);
            }
            return;
        }
        let inner = self.dims[r - 1];
        if out.is_empty() || inner == 0 {
            return;
        }
        let (sa, sb) = (self.a_strides[r - 1], self.b_strides[r - 1]);
        let mut idx: Dims = SmallVec::from_elem(0, r - 1);
        let (mut ao, mut bo) = (0usize, 0usize);
        for chunk in out.chunks_mut(inner) {
            for (j, o) in chunk.iter_mut().enumerate() {
                *o = f(ao + j * sa, bo + j * sb);
            }
            for d in (0..r - 1).rev() {
                idx[d] += 1;
                ao += self.a_strides[d];
                bo += self.b_strides[d];
                if idx[d] < self.dims[d] {
                    break;
                }
                ao -= self.a_strides[d] * self.dims[d];
                bo -= self.b_strides[d] * self.dims[d];
                idx[d] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(a: &[usize], av: &[i32], b: &[usize], bv: &[i32]) -> (Vec<usize>, Vec<i32>) {
        let bc = BCast::new(a, b).unwrap();
        let mut out = vec![0; bc.output_shape().num_elements()];
        bc.apply(av, bv, &mut out, |x, y| x * 10 + y);
        (bc.output_shape().dims().to_vec(), out)
    }

    #[test]
    fn broadcasts_like_numpy() {
        // hand-computed: a[i][j]*10 + b[j]
        assert_eq!(
            run(&[2, 3], &[1, 2, 3, 4, 5, 6], &[3], &[7, 8, 9]),
            (vec![2, 3], vec![17, 28, 39, 47, 58, 69])
        );
        // column vector against row vector
        assert_eq!(
            run(&[2, 1], &[1, 2], &[1, 3], &[3, 4, 5]),
            (vec![2, 3], vec![13, 14, 15, 23, 24, 25])
        );
        // scalars
        assert_eq!(run(&[], &[2], &[2], &[1, 3]), (vec![2], vec![21, 23]));
        assert_eq!(run(&[], &[2], &[], &[5]), (vec![], vec![25]));
        // middle broadcast [2,1,2] x [3,1]
        let (s, v) = run(&[2, 1, 2], &[1, 2, 3, 4], &[3, 1], &[1, 2, 3]);
        assert_eq!(s, vec![2, 3, 2]);
        assert_eq!(v, vec![11, 21, 12, 22, 13, 23, 31, 41, 32, 42, 33, 43]);
        // empty
        assert_eq!(run(&[0, 3], &[], &[3], &[1, 2, 3]), (vec![0, 3], vec![]));
        assert!(BCast::new(&[2], &[3])
            .unwrap_err()
            .message()
            .contains("Incompatible shapes: [2] vs. [3]"));
        assert!(BCast::new(&[4, 4], &[4, 4]).unwrap().is_identity());
    }

    #[test]
    fn apply_indexed_gives_the_index_pairs() {
        let pairs = |a: &[usize], b: &[usize]| {
            let bc = BCast::new(a, b).unwrap();
            let mut out = vec![(9, 9); bc.output_shape().num_elements()];
            bc.apply_indexed(&mut out, |i, j| (i, j));
            out
        };
        assert_eq!(
            pairs(&[2, 1], &[3]),
            vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
        );
        // Middle broadcast [2,1,2] x [3,1], checked against the odometer by hand.
        assert_eq!(
            pairs(&[2, 1, 2], &[3, 1]),
            vec![
                (0, 0),
                (1, 0),
                (0, 1),
                (1, 1),
                (0, 2),
                (1, 2),
                (2, 0),
                (3, 0),
                (2, 1),
                (3, 1),
                (2, 2),
                (3, 2)
            ]
        );
        assert_eq!(pairs(&[], &[]), vec![(0, 0)]);
        assert_eq!(pairs(&[0, 3], &[3]), vec![]);
    }
}
