//! `Select` and `SelectV2` kernels for every dtype (numbers, bool, string).
//!
//! - `Select` (v1): a scalar condition picks `t` or `e` whole (forwarded, no copy);
//!   a vector condition with `t` of rank ≥ 2 (or 0) picks rows by the first
//!   dimension; otherwise the condition must have exactly `t`'s and `e`'s shape.
//! - `SelectV2`: the three inputs broadcast together (numpy rules).
//!
//! The output is written into `t`'s or `e`'s buffer when that input is uniquely held
//! and has the output's shape. Error messages are TensorFlow's.

use std::marker::PhantomData;

use bytes::Bytes;
use graph::{DType, Result, Status, Tensor, TensorShape, TensorType};
use smallvec::SmallVec;

use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// How the select kernels read and write the elements of one dtype.
pub trait Elements: Send + Sync + 'static {
    /// The element type.
    type Elem: Clone;
    /// The elements of `t`.
    fn view(t: &Tensor) -> Result<&[Self::Elem]>;
    /// The elements of `t`, mutably (copy-on-write).
    fn view_mut(t: &mut Tensor) -> Result<&mut [Self::Elem]>;
    /// A tensor of this shape from `alloc` whose elements `fill` writes.
    fn build(
        alloc: Allocator<'_>,
        shape: &TensorShape,
        fill: impl FnOnce(&mut [Self::Elem]),
    ) -> Result<Tensor>;
}

/// The elements of a POD dtype.
pub struct Pod<T>(PhantomData<fn(T)>);

/// The elements of a string tensor.
pub struct Strings;

impl<T: TensorType> Elements for Pod<T> {
    type Elem = T;
    fn view(t: &Tensor) -> Result<&[T]> {
        t.as_slice::<T>()
    }
    fn view_mut(t: &mut Tensor) -> Result<&mut [T]> {
        t.as_mut_slice::<T>()
    }
    fn build(
        alloc: Allocator<'_>,
        shape: &TensorShape,
        fill: impl FnOnce(&mut [T]),
    ) -> Result<Tensor> {
        alloc.build::<T>(shape.clone(), fill)
    }
}

impl Elements for Strings {
    type Elem = Bytes;
    fn view(t: &Tensor) -> Result<&[Bytes]> {
        t.as_strings()
    }
    fn view_mut(t: &mut Tensor) -> Result<&mut [Bytes]> {
        t.as_strings_mut()
    }
    fn build(
        alloc: Allocator<'_>,
        shape: &TensorShape,
        fill: impl FnOnce(&mut [Bytes]),
    ) -> Result<Tensor> {
        let mut t = alloc.zeros(DType::String, shape.clone())?;
        fill(t.as_strings_mut()?);
        Ok(t)
    }
}

/// The index of the `t`/`e` element (or row) and of the condition element for each
/// output element, in order: `f(output, [cond, then, else])`.
trait IndexMap {
    fn for_each(&self, f: impl FnMut(usize, [usize; 3]));
}

/// Same-shape inputs: every index is the output index.
struct Elementwise(usize);

impl IndexMap for Elementwise {
    #[inline]
    fn for_each(&self, mut f: impl FnMut(usize, [usize; 3])) {
        (0..self.0).for_each(|i| f(i, [i, i, i]));
    }
}

/// Rows of `row` elements picked by a vector condition.
struct Rows {
    rows: usize,
    row: usize,
}

impl IndexMap for Rows {
    #[inline]
    fn for_each(&self, mut f: impl FnMut(usize, [usize; 3])) {
        for r in 0..self.rows {
            for i in r * self.row..(r + 1) * self.row {
                f(i, [r, i, i]);
            }
        }
    }
}

type Dims = SmallVec<[usize; 6]>;

/// Three shapes broadcast together (SelectV2).
struct Broadcast3 {
    shape: TensorShape,
    strides: [Dims; 3],
}

impl Broadcast3 {
    /// `None` when the shapes do not broadcast.
    fn new(shapes: [&[usize]; 3]) -> Option<Broadcast3> {
        let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
        let dim = |s: &[usize], i: usize| {
            if i + s.len() >= rank {
                s[i + s.len() - rank]
            } else {
                1
            }
        };
        let mut shape = TensorShape::scalar();
        for i in 0..rank {
            let mut d = 1;
            for s in shapes {
                match (d, dim(s, i)) {
                    (_, 1) => {}
                    (1, x) => d = x,
                    (a, b) if a == b => {}
                    _ => return None,
                }
            }
            shape.push(d);
        }
        let strides = shapes.map(|s| {
            let mut st: Dims = SmallVec::from_elem(0, rank);
            let mut acc = 1;
            for i in (0..rank).rev() {
                let d = dim(s, i);
                st[i] = if d == 1 { 0 } else { acc };
                acc *= d;
            }
            st
        });
        Some(Broadcast3 { shape, strides })
    }
}

impl IndexMap for Broadcast3 {
    fn for_each(&self, mut f: impl FnMut(usize, [usize; 3])) {
        let dims = self.shape.dims();
        if self.shape.num_elements() == 0 {
            return;
        }
        let Some((&inner, outer)) = dims.split_last() else {
            f(0, [0, 0, 0]);
            return;
        };
        let last = outer.len();
        let step = [0, 1, 2].map(|k| self.strides[k][last]);
        let mut idx: Dims = SmallVec::from_elem(0, outer.len());
        let mut base = [0usize; 3];
        let mut o = 0;
        loop {
            let mut off = base;
            for _ in 0..inner {
                f(o, off);
                o += 1;
                for k in 0..3 {
                    off[k] += step[k];
                }
            }
            // Advance the odometer over the outer dimensions.
            let mut d = outer.len();
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                for (b, s) in base.iter_mut().zip(&self.strides) {
                    *b += s[d];
                }
                if idx[d] < outer[d] {
                    break;
                }
                for (b, s) in base.iter_mut().zip(&self.strides) {
                    *b -= s[d] * outer[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// Computes the selection, reusing `t`'s or `e`'s buffer when allowed.
fn run_select<E: Elements>(
    ctx: &mut OpKernelContext<'_>,
    cond: &Tensor,
    shape: &TensorShape,
    map: impl IndexMap,
) -> Result<Tensor> {
    let c = cond.as_slice::<bool>()?;
    let mut t = ctx.take_input(1)?;
    let mut e = ctx.take_input(2)?;
    if t.shape() == shape && t.is_unique() {
        let es = E::view(&e)?;
        let out = E::view_mut(&mut t)?;
        map.for_each(|o, [ci, _, ei]| {
            if !c[ci] {
                out[o] = es[ei].clone();
            }
        });
        return Ok(t);
    }
    if e.shape() == shape && e.is_unique() {
        let ts = E::view(&t)?;
        let out = E::view_mut(&mut e)?;
        map.for_each(|o, [ci, ti, _]| {
            if c[ci] {
                out[o] = ts[ti].clone();
            }
        });
        return Ok(e);
    }
    let (ts, es) = (E::view(&t)?, E::view(&e)?);
    E::build(ctx.allocator(), shape, |out| {
        map.for_each(|o, [ci, ti, ei]| {
            out[o] = if c[ci] {
                ts[ti].clone()
            } else {
                es[ei].clone()
            };
        })
    })
}

fn same_size_error(t: &Tensor, e: &Tensor) -> Status {
    Status::invalid_argument(format!(
        "'then' and 'else' must have the same size.  but received: {} vs. {}",
        t.shape(),
        e.shape()
    ))
}

/// `Select` (v1 semantics; see the module docs).
pub struct SelectKernel<E> {
    name: String,
    _e: PhantomData<fn(E)>,
}

impl<E: Elements> OpKernel for SelectKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let cond = ctx.input(0)?.clone();
        let (t, e) = (ctx.input(1)?, ctx.input(2)?);
        if cond.rank() == 0 {
            if t.shape() != e.shape() {
                return Err(same_size_error(t, e));
            }
            let pick = if cond.scalar_value::<bool>()? { 1 } else { 2 };
            let out = ctx.take_input(pick)?;
            return ctx.set_output(0, out);
        }
        let shape = t.shape().clone();
        let out = if cond.rank() == 1 && t.rank() != 1 {
            if t.rank() == 0 {
                return Err(Status::invalid_argument(format!(
                    "'then' must be at least a vector, but saw shape: {}",
                    t.shape()
                )));
            }
            let rows = cond.num_elements();
            if t.dims()[0] != rows {
                return Err(Status::invalid_argument(format!(
                    "Number of batches of 'then' must match size of 'cond', but saw: {} vs. {rows}",
                    t.dims()[0]
                )));
            }
            if t.shape() != e.shape() {
                return Err(same_size_error(t, e));
            }
            let row = t.num_elements().checked_div(rows).unwrap_or(0);
            run_select::<E>(ctx, &cond, &shape, Rows { rows, row })?
        } else {
            for (i, x) in [(1, t), (2, e)] {
                if x.shape() != cond.shape() {
                    return Err(Status::invalid_argument(format!(
                        "Inputs to operation {} of type Select must have the same size and shape.  Input 0: {} != input {i}: {}",
                        self.name,
                        cond.shape(),
                        x.shape()
                    )));
                }
            }
            run_select::<E>(ctx, &cond, &shape, Elementwise(shape.num_elements()))?
        };
        ctx.set_output(0, out)
    }
}

/// `SelectV2`: condition, `t` and `e` broadcast together.
pub struct SelectV2Kernel<E>(PhantomData<fn(E)>);

impl<E: Elements> OpKernel for SelectV2Kernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let cond = ctx.input(0)?.clone();
        let (t, e) = (ctx.input(1)?, ctx.input(2)?);
        let bc = Broadcast3::new([cond.dims(), t.dims(), e.dims()]).ok_or_else(|| {
            Status::invalid_argument(format!(
                "condition {}, then {}, and else {} must be broadcastable",
                cond.shape(),
                t.shape(),
                e.shape()
            ))
        })?;
        let shape = bc.shape.clone();
        let out = if cond.shape() == &shape && t.shape() == &shape && e.shape() == &shape {
            run_select::<E>(ctx, &cond, &shape, Elementwise(shape.num_elements()))?
        } else if cond.num_elements() == 1 && t.shape() == &shape && e.shape() == &shape {
            let pick = if cond.as_slice::<bool>()?[0] { 1 } else { 2 };
            ctx.take_input(pick)?
        } else {
            run_select::<E>(ctx, &cond, &shape, bc)?
        };
        ctx.set_output(0, out)
    }
}

/// Registers the select kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    register_typed!(
        r,
        "Select",
        "T",
        [
            f32,
            f64,
            graph::f16,
            graph::bf16,
            i8,
            i16,
            i32,
            i64,
            u8,
            u16,
            u32,
            u64,
            bool
        ],
        |c, T| SelectKernel::<Pod<T>> {
            name: c.name().to_owned(),
            _e: PhantomData
        }
    );
    register_typed!(
        r,
        "SelectV2",
        "T",
        [
            f32,
            f64,
            graph::f16,
            graph::bf16,
            i8,
            i16,
            i32,
            i64,
            u8,
            u16,
            u32,
            u64,
            bool
        ],
        |T| SelectV2Kernel::<Pod<T>>(PhantomData)
    );
    r.register(
        KernelDef::cpu("Select", |c| {
            Ok(Box::new(SelectKernel::<Strings> {
                name: c.name().to_owned(),
                _e: PhantomData,
            }))
        })
        .type_constraint("T", &[DType::String]),
    );
    r.register(
        KernelDef::cpu("SelectV2", |_| {
            Ok(Box::new(SelectV2Kernel::<Strings>(PhantomData)))
        })
        .type_constraint("T", &[DType::String]),
    );
}

#[cfg(test)]
mod tests;
