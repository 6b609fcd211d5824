//! Kernels that grow a tensor: Tile and BroadcastTo (by repeating it, see
//! [`tile_into`]), Pad and PadV2 (a constant border around one strided copy) and
//! MirrorPad (reflected borders, row by row with a `memcpy` for each row's middle).

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};

use super::copy::{signed_strides, strided_copy, strides_of, tile_into, Layout};
use super::elems::{dispatch_elem, int_values, make_shape, Elem, INDEX_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// `Tile`.
struct TileKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for TileKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let m = ctx.input(1)?;
        let r = input.rank();
        if m.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "Expected multiples to be 1-D, but got shape {}",
                m.shape()
            )));
        }
        if m.num_elements() != r {
            return Err(Status::invalid_argument(format!(
                "Expected multiples argument to be a vector of length {r} but got length {}",
                m.num_elements()
            )));
        }
        if r == 0 {
            return ctx.set_output(0, input);
        }
        let mult = int_values(m)?;
        let mut mu = Vec::with_capacity(r);
        let mut out = Vec::with_capacity(r);
        for (i, (&k, &d)) in mult.iter().zip(input.dims()).enumerate() {
            if k < 0 {
                return Err(Status::invalid_argument(format!(
                    "Expected multiples[{i}] >= 0, but got {k}"
                )));
            }
            mu.push(k as usize);
            out.push(
                d.checked_mul(k as usize)
                    .ok_or_else(|| Status::invalid_argument("Tile output is too large"))?,
            );
        }
        if mu.iter().all(|&k| k == 1) {
            return ctx.set_output(0, input);
        }
        let shape = TensorShape::from(out);
        shape.checked_num_elements()?;
        let src = E::view(&input)?;
        let t = E::build(ctx.allocator(), input.dtype(), shape, |o| {
            tile_into(src, input.dims(), &mu, o)
        })?;
        ctx.set_output(0, t)
    }
}

/// `BroadcastTo`.
struct BroadcastToKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for BroadcastToKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape_t = ctx.input(1)?;
        if shape_t.rank() > 1 {
            return Err(Status::invalid_argument(format!(
                "shape must be a vector, got shape {}",
                shape_t.shape()
            )));
        }
        let out = make_shape(&int_values(shape_t)?)?;
        let input = ctx.take_input(0)?;
        if input.shape() == &out {
            return ctx.set_output(0, input);
        }
        let (ir, or) = (input.rank(), out.rank());
        if ir > or {
            return Err(Status::invalid_argument(format!(
                "Rank of input ({ir}) must be no greater than rank of output shape ({or})."
            )));
        }
        let mut in_dims = vec![1usize; or - ir];
        in_dims.extend_from_slice(input.dims());
        let mut mult = Vec::with_capacity(or);
        let mut unable = false;
        for (&a, &b) in in_dims.iter().zip(out.dims()) {
            if a == b {
                mult.push(1);
            } else if a == 1 {
                mult.push(b);
            } else if b == 1 {
                unable = true;
                mult.push(1);
            } else {
                return Err(Status::invalid_argument(format!(
                    "Incompatible shapes: {} vs. {out}",
                    input.shape()
                )));
            }
        }
        if unable {
            return Err(Status::invalid_argument(format!(
                "Unable to broadcast tensor of shape {} to tensor of shape {out}",
                input.shape()
            )));
        }
        if out.num_elements() == 0 {
            return ctx.set_output(0, ctx.allocate(input.dtype(), out)?);
        }
        let src = E::view(&input)?;
        let t = E::build(ctx.allocator(), input.dtype(), out, |o| {
            tile_into(src, &in_dims, &mult, o)
        })?;
        ctx.set_output(0, t)
    }
}

/// Reads the `[rank, 2]` paddings of `input` with TensorFlow's checks.
fn paddings(input: &Tensor, p: &Tensor) -> Result<Vec<(usize, usize)>> {
    if !(p.rank() == 2 && p.dims()[1] == 2) {
        return Err(Status::invalid_argument(format!(
            "paddings must be a matrix with 2 columns: {}",
            p.shape()
        )));
    }
    if p.dims()[0] != input.rank() {
        return Err(Status::invalid_argument(format!(
            "The first dimension of paddings must be the rank of inputs{} {}",
            p.shape(),
            input.shape()
        )));
    }
    let v = int_values(p)?;
    let mut out = Vec::with_capacity(v.len() / 2);
    for c in v.chunks(2) {
        let (a, b) = (c[0], c.get(1).copied().unwrap_or(0));
        if a < 0 || b < 0 {
            return Err(Status::invalid_argument(format!(
                "Paddings must be non-negative: {a} {b}"
            )));
        }
        out.push((a as usize, b as usize));
    }
    Ok(out)
}

/// `Pad` (zeros) and `PadV2` (a given constant).
struct PadKernel<E>(PhantomData<fn(E)>);

impl<E: Elem> OpKernel for PadKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let r = input.rank();
        if r > 8 {
            return Err(Status::unimplemented(format!(
                "inputs rank not in [0,8]: {r}"
            )));
        }
        let pads = paddings(&input, ctx.input(1)?)?;
        let value = if ctx.num_inputs() == 3 {
            let c = ctx.input(2)?;
            if c.rank() != 0 {
                return Err(Status::invalid_argument(format!(
                    "constant_values must be a scalar. Found: {}",
                    c.shape()
                )));
            }
            E::view(c)?.first().cloned().unwrap_or_default()
        } else {
            E::default()
        };
        let out: Vec<usize> = input
            .dims()
            .iter()
            .zip(&pads)
            .map(|(&d, &(a, b))| a + d + b)
            .collect();
        let shape = TensorShape::from(out.clone());
        if shape.checked_num_elements()? == input.num_elements() {
            return ctx.set_output(0, input.reshaped(shape)?);
        }
        let out_strides = strides_of(&out);
        let base: usize = pads
            .iter()
            .zip(&out_strides)
            .map(|(&(a, _), &s)| a * s)
            .sum();
        let dst = signed_strides(&out);
        let src_strides = signed_strides(input.dims());
        let src = E::view(&input)?;
        let t = E::build(ctx.allocator(), input.dtype(), shape, |o| {
            o.fill(value);
            strided_copy(
                input.dims(),
                src,
                Layout {
                    base: 0,
                    strides: &src_strides,
                },
                o,
                Layout {
                    base,
                    strides: &dst,
                },
            )
        })?;
        ctx.set_output(0, t)
    }
}

/// `MirrorPad` in REFLECT (edge not repeated) or SYMMETRIC (edge repeated) mode.
struct MirrorPadKernel<E> {
    reflect: bool,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for MirrorPadKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.take_input(0)?;
        let r = input.rank();
        if r > 5 {
            return Err(Status::unimplemented(format!(
                "inputs rank not in [0,5]: {r}"
            )));
        }
        let pads = paddings(&input, ctx.input(1)?).map_err(|e| {
            Status::invalid_argument(e.message().replace("Paddings must", "paddings must"))
        })?;
        for (&(a, b), &d) in pads.iter().zip(input.dims()) {
            if self.reflect && (a >= d || b >= d) {
                return Err(Status::invalid_argument(format!(
                    "paddings must be less than the dimension size: {a}, {b} not less than {d}"
                )));
            }
            if !self.reflect && (a > d || b > d) {
                return Err(Status::invalid_argument(format!(
                    "paddings must be no greater than the dimension size: {a}, {b} greater than {d}"
                )));
            }
        }
        let out: Vec<usize> = input
            .dims()
            .iter()
            .zip(&pads)
            .map(|(&d, &(a, b))| a + d + b)
            .collect();
        let shape = TensorShape::from(out.clone());
        if shape.checked_num_elements()? == input.num_elements() {
            return ctx.set_output(0, input.reshaped(shape)?);
        }
        // Source index of every output index, per dimension.
        let maps: Vec<Vec<usize>> = input
            .dims()
            .iter()
            .zip(&pads)
            .map(|(&n, &(a, b))| {
                let (n, a) = (n as i64, a as i64);
                (0..a + n + b as i64)
                    .map(|o| {
                        let i = o - a;
                        let m = match (i < 0, i >= n, self.reflect) {
                            (true, _, true) => -i,
                            (true, _, false) => -i - 1,
                            (_, true, true) => 2 * n - 2 - i,
                            (_, true, false) => 2 * n - 1 - i,
                            _ => i,
                        };
                        m.clamp(0, (n - 1).max(0)) as usize
                    })
                    .collect()
            })
            .collect();
        let src = E::view(&input)?;
        let in_strides = strides_of(input.dims());
        let t = E::build(ctx.allocator(), input.dtype(), shape, |o| {
            if r == 0 || out[r - 1] == 0 {
                return Ok(());
            }
            let last = r - 1;
            let (row_len, n_last, a_last) = (out[last], input.dims()[last], pads[last].0);
            let mut coord = vec![0usize; last];
            for row in o.chunks_mut(row_len) {
                let srow: usize = coord
                    .iter()
                    .enumerate()
                    .map(|(d, &c)| maps[d][c] * in_strides[d])
                    .sum();
                row[a_last..a_last + n_last].clone_from_slice(&src[srow..srow + n_last]);
                for j in (0..a_last).chain(a_last + n_last..row_len) {
                    row[j] = src[srow + maps[last][j]].clone();
                }
                for d in (0..last).rev() {
                    coord[d] += 1;
                    if coord[d] < out[d] {
                        break;
                    }
                    coord[d] = 0;
                }
            }
            Ok(())
        })?;
        ctx.set_output(0, t)
    }
}

/// Registers Tile, BroadcastTo, Pad, PadV2 and MirrorPad.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("Tile", |c| dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(TileKernel::<E>(PhantomData)))))
            .type_constraint("Tmultiples", INDEX_DTYPES),
    );
    r.register(
        KernelDef::cpu("BroadcastTo", |c| {
            dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(BroadcastToKernel::<E>(PhantomData))))
        })
        .type_constraint("Tidx", INDEX_DTYPES),
    );
    for op in ["Pad", "PadV2"] {
        r.register(
            KernelDef::cpu(op, |c| dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(PadKernel::<E>(PhantomData)))))
                .type_constraint("Tpaddings", INDEX_DTYPES),
        );
    }
    r.register(
        KernelDef::cpu("MirrorPad", |c: &OpKernelConstruction<'_>| {
            let reflect = c.attr::<String>("mode")? == "REFLECT";
            dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(MirrorPadKernel::<E> { reflect, _e: PhantomData })))
        })
        .type_constraint("Tpaddings", INDEX_DTYPES),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, DType, Tensor};

    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::new(dims, (1..=n as i32).collect()).unwrap()
    }

    fn pads(p: &[[i32; 2]]) -> Tensor {
        Tensor::new(&[p.len(), 2], p.iter().flatten().copied().collect()).unwrap()
    }

    #[test]
    fn tiles() {
        let out = run_op("Tile", &[], vec![iota(&[2, 2]), Tensor::vector(&[1i32, 2])]).unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[2, 4], vec![1, 2, 1, 2, 3, 4, 3, 4]).unwrap()
        );
        let out = run_op("Tile", &[], vec![iota(&[2]), Tensor::vector(&[0i64])]).unwrap();
        assert_eq!(out[0].dims(), &[0]);
        let s = Tensor::from_strings(&[1], vec!["x"]).unwrap();
        let out = run_op("Tile", &[], vec![s, Tensor::vector(&[3i32])]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_strings(&[3], vec!["x", "x", "x"]).unwrap()
        );
        let x = Tensor::zeros(DType::F32, [64]);
        assert!(
            run_op("Tile", &[], vec![x.clone(), Tensor::vector(&[1i32])]).unwrap()[0]
                .shares_buffer_with(&x)
        );
        let e = run_op("Tile", &[], vec![iota(&[2]), Tensor::vector(&[-1i32])]).unwrap_err();
        assert_eq!(e.message(), "Expected multiples[0] >= 0, but got -1");
        assert_eq!(
            run_op("Tile", &[], vec![iota(&[2]), Tensor::vector(&[1i32, 1])])
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn broadcasts_to() {
        let out = run_op(
            "BroadcastTo",
            &[],
            vec![iota(&[3]), Tensor::vector(&[2i32, 3])],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[2, 3], vec![1, 2, 3, 1, 2, 3]).unwrap()
        );
        let out = run_op(
            "BroadcastTo",
            &[],
            vec![iota(&[2, 1]), Tensor::vector(&[2i64, 2])],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::new(&[2, 2], vec![1, 1, 2, 2]).unwrap());
        let out = run_op(
            "BroadcastTo",
            &[],
            vec![Tensor::scalar(true), Tensor::vector(&[2i32])],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::vector(&[true, true]));
        let out = run_op(
            "BroadcastTo",
            &[],
            vec![iota(&[1]), Tensor::vector(&[0i32])],
        )
        .unwrap();
        assert_eq!(out[0].dims(), &[0]);
        let e = run_op(
            "BroadcastTo",
            &[],
            vec![iota(&[3]), Tensor::vector(&[0i32])],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_op(
            "BroadcastTo",
            &[],
            vec![iota(&[3]), Tensor::vector(&[-1i32, 3])],
        )
        .unwrap_err();
        assert_eq!(e.message(), "Dimension -1 must be >= 0");
    }

    #[test]
    fn pads_with_constants() {
        let out = run_op("Pad", &[], vec![iota(&[2, 2]), pads(&[[1, 0], [0, 1]])]).unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[3, 3], vec![0, 0, 0, 1, 2, 0, 3, 4, 0]).unwrap()
        );
        let out = run_op(
            "PadV2",
            &[],
            vec![iota(&[2]), pads(&[[1, 2]]), Tensor::scalar(9i32)],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::vector(&[9, 1, 2, 9, 9]));
        let s = Tensor::from_strings(&[1], vec!["a"]).unwrap();
        let out = run_op("Pad", &[], vec![s, pads(&[[1, 1]])]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_strings(&[3], vec!["", "a", ""]).unwrap()
        );
        let out = run_op(
            "Pad",
            &[],
            vec![Tensor::scalar(2.5f64), Tensor::zeros(DType::I32, [0, 2])],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::scalar(2.5f64));
        let out = run_op(
            "Pad",
            &[],
            vec![Tensor::zeros(DType::F32, [0, 2]), pads(&[[1, 0], [0, 0]])],
        )
        .unwrap();
        assert_eq!(out[0], Tensor::zeros(DType::F32, [1, 2]));
        let e = run_op("Pad", &[], vec![iota(&[2]), pads(&[[0, -1]])]).unwrap_err();
        assert_eq!(e.message(), "Paddings must be non-negative: 0 -1");
        let e = run_op(
            "Pad",
            &[],
            vec![
                Tensor::zeros(DType::F32, vec![1; 9]),
                Tensor::zeros(DType::I32, [9, 2]),
            ],
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented);
    }

    #[test]
    fn mirror_pads() {
        let reflect = [("mode", AttrValue::from("REFLECT"))];
        let symmetric = [("mode", AttrValue::from("SYMMETRIC"))];
        let out = run_op("MirrorPad", &reflect, vec![iota(&[3]), pads(&[[2, 2]])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[3, 2, 1, 2, 3, 2, 1]));
        let out = run_op("MirrorPad", &symmetric, vec![iota(&[3]), pads(&[[2, 3]])]).unwrap();
        assert_eq!(out[0], Tensor::vector(&[2, 1, 1, 2, 3, 3, 2, 1]));
        let out = run_op(
            "MirrorPad",
            &reflect,
            vec![iota(&[2, 3]), pads(&[[1, 1], [1, 1]])],
        )
        .unwrap();
        let want = vec![5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2];
        assert_eq!(out[0], Tensor::new(&[4, 5], want).unwrap());
        let e = run_op("MirrorPad", &reflect, vec![iota(&[2]), pads(&[[0, 2]])]).unwrap_err();
        assert_eq!(
            e.message(),
            "paddings must be less than the dimension size: 0, 2 not less than 2"
        );
        let e = run_op("MirrorPad", &symmetric, vec![iota(&[2]), pads(&[[0, 3]])]).unwrap_err();
        assert_eq!(
            e.message(),
            "paddings must be no greater than the dimension size: 0, 3 greater than 2"
        );
        let e = run_op("MirrorPad", &symmetric, vec![iota(&[2]), pads(&[[0, -1]])]).unwrap_err();
        assert_eq!(e.message(), "paddings must be non-negative: 0 -1");
    }
}
