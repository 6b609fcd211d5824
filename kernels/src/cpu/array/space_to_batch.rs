//! SpaceToBatchND and BatchToSpaceND and their 4-D forms SpaceToBatch and
//! BatchToSpace (TensorFlow's `spacetobatch_op.cc`, `batchtospace_op.cc` and
//! `spacetobatch_functor.cc`), with TensorFlow's checks in its order.
//!
//! Both directions relate a *space* tensor `[B, s_1, …, s_M, rest…]` and a *batch*
//! tensor `[B·Πb, t_1, …, t_M, rest…]`: batch element `k·B + b` (block offset `k`
//! in row-major order over the block) at position `y_d` holds space element `b` at
//! `y_d·b_d + o_d − start_d`, where `start_d` is the padding (or crop) before
//! dimension `d`. For each block offset the positions that land inside the space
//! tensor form a box, moved with one [`strided_copy`]; padding stays zero. As in
//! TensorFlow, leading and trailing block dimensions of size 1 without padding
//! count towards no limit, and an arrangement with no other block dimension
//! forwards its input.

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};
use smallvec::SmallVec;

use super::copy::{strided_copy, strides_of, Layout};
use super::elems::{dispatch_elem, int_values, Elem, Ints, INDEX_DTYPES};
use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// TensorFlow's `kMaxSpaceToBatchBlockDims`: block dimensions other than the
/// leading and trailing trivial ones.
const MAX_BLOCK_DIMS: usize = 4;

/// Which way the elements move.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    SpaceToBatch,
    BatchToSpace,
}

/// The validated block, paddings (or crops) and shapes of one rearrangement.
struct Plan {
    block: Ints,
    start: Ints,
    /// `[B, s_1, …, s_M, R]`, the trailing dimensions folded into `R`.
    space: SmallVec<[usize; 8]>,
    /// `[B·Πb, t_1, …, t_M, R]`.
    batch: SmallVec<[usize; 8]>,
    /// The shape of the output.
    out_shape: TensorShape,
    /// No block dimension moves anything: the output is the input.
    forward: bool,
}

/// The checks both directions share: `block_shape` a vector of `M` values, an
/// input of rank at least `1 + M`, `amounts` of shape `[M, 2]`.
fn read_block(
    input: &Tensor,
    block_shape: &Tensor,
    amounts: &Tensor,
    what: &str,
) -> Result<(Ints, Ints)> {
    if block_shape.rank() != 1 {
        return Err(Status::invalid_argument(format!(
            "block_shape rank should be 1 instead of {}",
            block_shape.rank()
        )));
    }
    let m = block_shape.dims()[0];
    if input.rank() < 1 + m {
        return Err(Status::invalid_argument(format!(
            "input rank should be >= {} instead of {}",
            1 + m,
            input.rank()
        )));
    }
    if amounts.dims() != [m, 2] {
        return Err(Status::invalid_argument(format!(
            "{what} should have shape [{m}, 2] instead of {}",
            amounts.shape()
        )));
    }
    Ok((int_values(block_shape)?, int_values(amounts)?))
}

/// The number of block dimensions left after dropping the leading and trailing
/// ones of block 1 without padding (or crops).
fn internal_block_dims(block: &[i64], amounts: &[i64]) -> usize {
    let trivial = |d: usize| block[d] == 1 && amounts[2 * d] == 0 && amounts[2 * d + 1] == 0;
    let m = block.len();
    let prefix = (0..m).take_while(|&d| trivial(d)).count();
    let suffix = (prefix..m).rev().take_while(|&d| trivial(d)).count();
    m - prefix - suffix
}

fn check_internal(n: usize) -> Result<()> {
    if n > MAX_BLOCK_DIMS {
        return Err(Status::invalid_argument(format!(
            "Maximum number of non-combined block dimensions is {n} but must not exceed \
             {MAX_BLOCK_DIMS}"
        )));
    }
    Ok(())
}

/// `[lead, d_1, …, d_M, Π rest]` of `dims`.
fn folded(
    lead: usize,
    mid: impl IntoIterator<Item = usize>,
    rest: &[usize],
) -> SmallVec<[usize; 8]> {
    let mut v: SmallVec<[usize; 8]> = SmallVec::new();
    v.push(lead);
    v.extend(mid);
    v.push(rest.iter().product());
    v
}

/// TensorFlow's `SpaceToBatchOpCompute` checks.
fn space_to_batch_plan(input: &Tensor, block_shape: &Tensor, paddings: &Tensor) -> Result<Plan> {
    let (block, pads) = read_block(input, block_shape, paddings, "paddings")?;
    let m = block.len();
    let internal = internal_block_dims(&block, &pads);
    let mut product: i64 = 1;
    for (i, &b) in block.iter().enumerate() {
        if b < 1 {
            return Err(Status::invalid_argument(format!(
                "All values in block_shape must be positive, got value, {b} at index {i}."
            )));
        }
        product = product.checked_mul(b).unwrap_or(-1);
        if product < 0 {
            return Err(Status::invalid_argument(format!(
                "Product of block sizes must be positive, got {product}"
            )));
        }
    }
    check_internal(internal)?;
    let d = input.dims();
    let out_batch = (d[0] as i64).checked_mul(product).ok_or_else(|| {
        Status::invalid_argument(format!(
            "Negative output dimension size caused by overflow when multiplying {} and {product}",
            d[0]
        ))
    })?;
    let mut spatial: SmallVec<[usize; 8]> = SmallVec::new();
    for i in 0..m {
        let (a, z) = (pads[2 * i], pads[2 * i + 1]);
        if a < 0 || z < 0 {
            return Err(Status::invalid_argument("Paddings must be non-negative"));
        }
        let padded = d[i + 1] as i64 + a + z;
        if padded % block[i] != 0 {
            return Err(Status::invalid_argument(format!(
                "padded_shape[{i}]={padded} is not divisible by block_shape[{i}]={}",
                block[i]
            )));
        }
        spatial.push((padded / block[i]) as usize);
    }
    let mut out: Vec<usize> = vec![out_batch as usize];
    out.extend_from_slice(&spatial);
    out.extend_from_slice(&d[m + 1..]);
    Ok(Plan {
        space: folded(d[0], d[1..=m].iter().copied(), &d[m + 1..]),
        batch: folded(out_batch as usize, spatial.iter().copied(), &d[m + 1..]),
        out_shape: TensorShape::from(out),
        forward: internal == 0,
        start: pads.iter().step_by(2).copied().collect(),
        block,
    })
}

/// TensorFlow's `BatchToSpaceOpCompute` checks.
fn batch_to_space_plan(input: &Tensor, block_shape: &Tensor, crops: &Tensor) -> Result<Plan> {
    let (block, crops) = read_block(input, block_shape, crops, "crops")?;
    let m = block.len();
    let internal = internal_block_dims(&block, &crops);
    let product = block
        .iter()
        .try_fold(1i64, |p, &b| p.checked_mul(b))
        .unwrap_or(-1);
    if product <= 0 {
        return Err(Status::invalid_argument(format!(
            "Product of block sizes must be positive, got {product}"
        )));
    }
    let d = input.dims();
    if d[0] as i64 % product != 0 {
        return Err(Status::invalid_argument(format!(
            "Input batch dimension ({}) is not divisible by product of block sizes ({product})",
            d[0]
        )));
    }
    check_internal(internal)?;
    let out_batch = d[0] / product as usize;
    let mut spatial: SmallVec<[usize; 8]> = SmallVec::new();
    for i in 0..m {
        let (a, z) = (crops[2 * i], crops[2 * i + 1]);
        if a < 0 || z < 0 {
            return Err(Status::invalid_argument("Crops must be non-negative"));
        }
        let cropped = d[i + 1] as i64 * block[i] - a - z;
        if cropped < 0 {
            return Err(Status::invalid_argument(format!(
                "cropped_shape[{i}]={cropped} must be non-negative"
            )));
        }
        spatial.push(cropped as usize);
    }
    let mut out: Vec<usize> = vec![out_batch];
    out.extend_from_slice(&spatial);
    out.extend_from_slice(&d[m + 1..]);
    Ok(Plan {
        space: folded(out_batch, spatial.iter().copied(), &d[m + 1..]),
        batch: folded(d[0], d[1..=m].iter().copied(), &d[m + 1..]),
        out_shape: TensorShape::from(out),
        forward: internal == 0,
        start: crops.iter().step_by(2).copied().collect(),
        block,
    })
}

/// Copies every in-range element from `src` to `dst` (see the module docs): from
/// the space tensor to the batch tensor for `SpaceToBatch`, back for
/// `BatchToSpace`.
fn rearrange<E: Clone>(p: &Plan, dir: Direction, src: &[E], dst: &mut [E]) -> Result<()> {
    let m = p.block.len();
    let (sb, r) = (p.space[0], p.space[m + 1]);
    if p.block.iter().any(|&b| b < 1) || sb == 0 || r == 0 {
        // Only an empty arrangement gets here with a non-positive block.
        return Ok(());
    }
    let (sp, bt) = (strides_of(&p.space), strides_of(&p.batch));
    let blocks: i64 = p.block.iter().product();
    let mut dims: SmallVec<[usize; 8]> = SmallVec::from_elem(0, m + 2);
    let mut s_str: SmallVec<[isize; 8]> = SmallVec::from_elem(1, m + 2);
    let mut b_str: SmallVec<[isize; 8]> = SmallVec::from_elem(1, m + 2);
    (dims[0], dims[m + 1]) = (sb, r);
    (s_str[0], b_str[0]) = (sp[0] as isize, bt[0] as isize);
    'offsets: for k in 0..blocks {
        let (mut s_base, mut b_base) = (0usize, k as usize * sb * bt[0]);
        let mut rem = k;
        for d in (0..m).rev() {
            let (b, off, start) = (p.block[d], rem % p.block[d], p.start[d]);
            rem /= b;
            // Batch positions y with 0 <= y*b + off - start < space size.
            let lo = (-(off - start).div_euclid(b)).max(0);
            let hi = ((p.space[d + 1] as i64 - 1 + start - off).div_euclid(b) + 1)
                .min(p.batch[d + 1] as i64);
            if hi <= lo {
                continue 'offsets;
            }
            dims[d + 1] = (hi - lo) as usize;
            s_base += (lo * b + off - start) as usize * sp[d + 1];
            b_base += lo as usize * bt[d + 1];
            s_str[d + 1] = (b as usize * sp[d + 1]) as isize;
            b_str[d + 1] = bt[d + 1] as isize;
        }
        let sl = Layout {
            base: s_base,
            strides: &s_str,
        };
        let bl = Layout {
            base: b_base,
            strides: &b_str,
        };
        match dir {
            Direction::SpaceToBatch => strided_copy(&dims, src, sl, dst, bl)?,
            Direction::BatchToSpace => strided_copy(&dims, src, bl, dst, sl)?,
        }
    }
    Ok(())
}

/// Runs a plan on `input` of element type `E`.
fn run<E: Elem>(alloc: Allocator<'_>, dir: Direction, p: &Plan, input: Tensor) -> Result<Tensor> {
    if p.forward {
        return Ok(input);
    }
    let src = E::view(&input)?;
    E::build(alloc, input.dtype(), p.out_shape.clone(), |o| {
        rearrange(p, dir, src, o)
    })
}

/// The four kernels: which direction, and whether the block is the `block_size`
/// attribute of a 4-D form.
struct SpaceBatchKernel<E> {
    dir: Direction,
    block_size: Option<i64>,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for SpaceBatchKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let (block, amounts) = match self.block_size {
            Some(b) => {
                if input.rank() != 4 {
                    return Err(Status::invalid_argument(format!(
                        "Input rank should be: 4instead of: {}",
                        input.rank()
                    )));
                }
                (Tensor::vector(&[b, b]), ctx.input(1)?.clone())
            }
            None => (ctx.input(1)?.clone(), ctx.input(2)?.clone()),
        };
        let plan = match self.dir {
            Direction::SpaceToBatch => space_to_batch_plan(&input, &block, &amounts)?,
            Direction::BatchToSpace => batch_to_space_plan(&input, &block, &amounts)?,
        };
        let out = run::<E>(ctx.allocator(), self.dir, &plan, input)?;
        ctx.set_output(0, out)
    }
}

/// Builds the kernel of any of the four ops: the direction and the 4-D form
/// follow from the op's name.
fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let op = c.node.op.as_str();
    let dir = if op.starts_with("SpaceToBatch") {
        Direction::SpaceToBatch
    } else {
        Direction::BatchToSpace
    };
    let block_size = if op.ends_with("ND") {
        None
    } else {
        let b: i64 = c.attr("block_size")?;
        if b <= 1 {
            return Err(Status::invalid_argument(format!(
                "Block size should be > 1: {b}"
            )));
        }
        Some(b)
    };
    dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(SpaceBatchKernel::<E> { dir, block_size, _e: PhantomData })))
}

/// Registers the four kernels for TensorFlow's CPU types (real numbers: no
/// bool or string, which TensorFlow's `NotFound`s too).
pub(super) fn register(r: &mut KernelRegistry) {
    use crate::cpu::types::NUMERIC_DTYPES;
    for (op, amounts) in [
        ("SpaceToBatchND", "Tpaddings"),
        ("BatchToSpaceND", "Tcrops"),
        ("SpaceToBatch", "Tpaddings"),
        ("BatchToSpace", "Tidx"),
    ] {
        let mut k = KernelDef::cpu(op, make)
            .type_constraint("T", NUMERIC_DTYPES)
            .type_constraint(amounts, INDEX_DTYPES);
        if op.ends_with("ND") {
            k = k.type_constraint("Tblock_shape", INDEX_DTYPES);
        }
        r.register(k);
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{Code, Tensor};

    fn pads(v: &[[i32; 2]]) -> Tensor {
        Tensor::new(&[v.len(), 2], v.iter().flatten().copied().collect()).unwrap()
    }

    #[test]
    fn space_to_batch_and_back() {
        // 1x4x4x1 0..16, blocks of 2x2: batch k = (i, j) holds x[2y + i, 2x + j].
        let x = Tensor::new(&[1, 4, 4, 1], (0..16).collect::<Vec<i32>>()).unwrap();
        let block = Tensor::vector(&[2i32, 2]);
        let y = run_op(
            "SpaceToBatchND",
            &[],
            vec![x.clone(), block.clone(), pads(&[[0, 0], [0, 0]])],
        )
        .unwrap()
        .remove(0);
        let want = [0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15];
        assert_eq!(y, Tensor::new(&[4, 2, 2, 1], want.to_vec()).unwrap());
        let back = run_op(
            "BatchToSpaceND",
            &[],
            vec![y, block.clone(), pads(&[[0, 0], [0, 0]])],
        )
        .unwrap();
        assert_eq!(back[0], x);
        // Padding one row before: zeros where the block reaches above the image.
        let y = run_op(
            "SpaceToBatchND",
            &[],
            vec![x.clone(), Tensor::vector(&[2i32]), pads(&[[1, 1]])],
        )
        .unwrap()
        .remove(0);
        assert_eq!(y.dims(), [2, 3, 4, 1]);
        let v = y.as_slice::<i32>().unwrap();
        assert_eq!(&v[..4], &[0, 0, 0, 0]);
        assert_eq!(&v[4..8], &[4, 5, 6, 7]);
        let back = run_op(
            "BatchToSpaceND",
            &[],
            vec![y, Tensor::vector(&[2i32]), pads(&[[1, 1]])],
        )
        .unwrap();
        assert_eq!(back[0], x);
    }

    #[test]
    fn errors_are_tensorflows() {
        let x = Tensor::zeros(graph::DType::F32, [1, 4, 4, 1]);
        let e = run_op(
            "SpaceToBatchND",
            &[],
            vec![
                x.clone(),
                Tensor::vector(&[3i32, 2]),
                pads(&[[0, 0], [0, 0]]),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_op(
            "BatchToSpaceND",
            &[],
            vec![x, Tensor::vector(&[2i32, 2]), pads(&[[0, 0], [0, 0]])],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }
}
