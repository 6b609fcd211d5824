//! The CPU kernel of `Einsum` (TensorFlow's `einsum_op_impl.h`), on the equation
//! [`EinsumEquation`] parses and resolves.
//!
//! Every axis carries a label id; an operand's *label strides* add the strides of
//! its axes with that label (a repeated label walks a diagonal; an axis of size 1
//! contributes 0, so broadcast dimensions repeat). `contract` then runs an
//! odometer over the labels, output labels first, multiplying the operands and
//! accumulating into the output at its own label strides (a repeated output label
//! writes a diagonal, the rest stays zero) — in a wider accumulator (`f64` for
//! floats, wrapping `i64` for integers).
//!
//! A product of two `f32`/`f64` operands without repeated labels goes through
//! `gemm` instead: each operand is laid out as `[batch, free, contracted]`
//! matrices by `contract` (which also sums the labels only it has), the batches
//! are multiplied by [`batched_gemm`], and the result is placed by `contract`.

use std::marker::PhantomData;

use graph::ops::linalg::einsum::{EinsumEquation, ResolvedEinsum};
use graph::{bf16, f16, DType, Result, Status, Tensor, TensorShape, TensorType};

use super::gemm::{batched_gemm, GemmScalar};
use super::plan::{Flavor, Plan};
use crate::cpu::array::copy::strides_of;
use crate::cpu::math::elem::Arith;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// An element type `Einsum` computes with, and its accumulator.
pub trait EinsumType: TensorType + Copy {
    /// The accumulator.
    type Acc: Arith;
    /// Widens to the accumulator.
    fn lift(self) -> Self::Acc;
    /// Narrows back (wrapping for integers).
    fn lower(a: Self::Acc) -> Self;
    /// The `gemm` path, for the types it serves.
    fn gemm(plan: &Plan, x: &[Self], y: &[Self], out: &mut [Self]) -> Option<Result<()>>;
}

macro_rules! float_einsum {
    ($($t:ty => $from:expr, $gemm:expr);* $(;)?) => {$(
        impl EinsumType for $t {
            type Acc = f64;
            #[inline(always)]
            fn lift(self) -> f64 {
                self.to_f64()
            }
            #[inline(always)]
            fn lower(a: f64) -> Self {
                $from(a)
            }
            fn gemm(plan: &Plan, x: &[Self], y: &[Self], out: &mut [Self]) -> Option<Result<()>> {
                $gemm(plan, x, y, out)
            }
        }
    )*};
}

fn with_gemm<T: GemmScalar>(plan: &Plan, x: &[T], y: &[T], out: &mut [T]) -> Option<Result<()>> {
    Some(batched_gemm(plan, x, y, out))
}

fn no_gemm<T>(_: &Plan, _: &[T], _: &[T], _: &mut [T]) -> Option<Result<()>> {
    None
}

float_einsum! {
    f32 => |a: f64| a as f32, with_gemm::<f32>;
    f64 => |a: f64| a, with_gemm::<f64>;
    f16 => f16::from_f64, no_gemm::<f16>;
    bf16 => bf16::from_f64, no_gemm::<bf16>;
}

macro_rules! int_einsum {
    ($($t:ty),*) => {$(
        impl EinsumType for $t {
            type Acc = i64;
            #[inline(always)]
            fn lift(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn lower(a: i64) -> Self {
                a as $t
            }
            fn gemm(_: &Plan, _: &[Self], _: &[Self], _: &mut [Self]) -> Option<Result<()>> {
                None
            }
        }
    )*};
}
int_einsum!(i32, i64);

/// Per-label strides of an operand whose axes carry `labels` and have `dims`.
fn label_strides(labels: &[usize], dims: &[usize], num_labels: usize) -> Vec<usize> {
    let st = strides_of(dims);
    let mut s = vec![0; num_labels];
    for (a, &l) in labels.iter().enumerate() {
        if dims[a] != 1 {
            s[l] += st[a];
        }
    }
    s
}

/// `out[at out_strides] += Π operands[at their strides]` over every assignment of
/// the labels `loop_labels` (of sizes `label_dims`), into `out_len` zeros.
fn contract<T: EinsumType>(
    label_dims: &[usize],
    loop_labels: &[usize],
    operands: &[(&[T], Vec<usize>)],
    out_strides: &[usize],
    out_len: usize,
) -> Vec<T> {
    let zero = <T::Acc as num_traits::Zero>::zero();
    let mut acc = vec![zero; out_len];
    let total: usize = loop_labels.iter().map(|&l| label_dims[l]).product();
    if total > 0 && out_len > 0 {
        let n = loop_labels.len();
        let mut pos = vec![0usize; n];
        let mut offs = vec![0usize; operands.len()];
        let mut out_off = 0usize;
        for _ in 0..total {
            let mut p = <T::Acc as num_traits::One>::one();
            for ((x, _), &o) in operands.iter().zip(&offs) {
                p = p.tf_mul(x[o].lift());
            }
            acc[out_off] = acc[out_off].tf_add(p);
            // Advance the odometer, innermost label last.
            for k in (0..n).rev() {
                let l = loop_labels[k];
                pos[k] += 1;
                out_off += out_strides[l];
                for ((_, s), o) in operands.iter().zip(offs.iter_mut()) {
                    *o += s[l];
                }
                if pos[k] < label_dims[l] {
                    break;
                }
                let back = pos[k];
                pos[k] = 0;
                out_off -= back * out_strides[l];
                for ((_, s), o) in operands.iter().zip(offs.iter_mut()) {
                    *o -= back * s[l];
                }
            }
        }
    }
    acc.into_iter().map(T::lower).collect()
}

/// `Einsum` for element type `T`.
struct EinsumKernel<T> {
    equation: EinsumEquation,
    _t: PhantomData<fn(T)>,
}

/// The size of every label, checked as TensorFlow checks the operands.
fn label_dims(r: &ResolvedEinsum, inputs: &[&Tensor]) -> Result<Vec<usize>> {
    let nn = r.named.len();
    let mut dims: Vec<Option<usize>> = vec![None; r.num_labels()];
    for (labels, t) in r.inputs.iter().zip(inputs) {
        for (a, (&l, &d)) in labels.iter().zip(t.dims()).enumerate() {
            match dims[l] {
                None => dims[l] = Some(d),
                Some(e) if e == d => {}
                Some(e) if l >= nn && (e == 1 || d == 1) => dims[l] = Some(e.max(d)),
                Some(e) if l < nn => {
                    return Err(Status::invalid_argument(format!(
                        "Expected dimension {e} at axis {a} of the input shaped {} but got \
                         dimension {d}",
                        t.shape()
                    )))
                }
                Some(_) => {
                    let shapes: Vec<String> =
                        inputs.iter().map(|t| t.shape().to_string()).collect();
                    return Err(Status::invalid_argument(format!(
                        "Invalid broadcasting dimensions: {}",
                        shapes.join(" vs. ")
                    )));
                }
            }
        }
    }
    Ok(dims.into_iter().map(|d| d.unwrap_or(1)).collect())
}

fn has_repeats(labels: &[usize]) -> bool {
    labels
        .iter()
        .enumerate()
        .any(|(i, l)| labels[i + 1..].contains(l))
}

impl<T: EinsumType> EinsumKernel<T> {
    /// The `gemm` path of a binary product (see the module docs), or `None` when it
    /// does not apply.
    fn via_gemm(
        &self,
        r: &ResolvedEinsum,
        dims: &[usize],
        inputs: &[&Tensor],
        out_strides: &[usize],
        out_len: usize,
    ) -> Result<Option<Vec<T>>> {
        let [x, y] = inputs else { return Ok(None) };
        let (lx, ly) = (&r.inputs[0], &r.inputs[1]);
        if has_repeats(lx) || has_repeats(ly) || has_repeats(&r.output) {
            return Ok(None);
        }
        let in_out = |l: &usize| r.output.contains(l);
        let batch: Vec<usize> = r
            .output
            .iter()
            .copied()
            .filter(|l| lx.contains(l) && ly.contains(l))
            .collect();
        let free_x: Vec<usize> = r
            .output
            .iter()
            .copied()
            .filter(|l| lx.contains(l) && !ly.contains(l))
            .collect();
        let free_y: Vec<usize> = r
            .output
            .iter()
            .copied()
            .filter(|l| ly.contains(l) && !lx.contains(l))
            .collect();
        let inner: Vec<usize> = lx
            .iter()
            .copied()
            .filter(|l| ly.contains(l) && !in_out(l))
            .collect();
        let size = |ls: &[usize]| ls.iter().map(|&l| dims[l]).product::<usize>();
        let (b, m, k, n) = (size(&batch), size(&free_x), size(&inner), size(&free_y));
        let layout = |t: &Tensor, labels: &[usize], order: Vec<usize>| -> Vec<T> {
            let src = label_strides(labels, t.dims(), dims.len());
            // Labels only this operand has are summed while laying it out.
            let summed: Vec<usize> = labels.iter().copied().filter(|l| !order.contains(l)).fold(
                Vec::new(),
                |mut v, l| {
                    if !v.contains(&l) {
                        v.push(l);
                    }
                    v
                },
            );
            let dst_dims: Vec<usize> = order.iter().map(|&l| dims[l]).collect();
            let dst = label_strides(&order, &dst_dims, dims.len());
            let loop_labels: Vec<usize> = order.iter().chain(&summed).copied().collect();
            let len = dst_dims.iter().product();
            match t.as_slice::<T>() {
                Ok(v) => contract(dims, &loop_labels, &[(v, src)], &dst, len),
                Err(_) => Vec::new(),
            }
        };
        let xo: Vec<usize> = batch.iter().chain(&free_x).chain(&inner).copied().collect();
        let yo: Vec<usize> = batch.iter().chain(&inner).chain(&free_y).copied().collect();
        let xm = layout(x, lx, xo);
        let ym = layout(y, ly, yo);
        let plan = Plan::new(
            &TensorShape::from(vec![b, m, k]),
            &TensorShape::from(vec![b, k, n]),
            false,
            false,
            Flavor::BatchMatMul,
        )?;
        let mut z = vec![T::lower(<T::Acc as num_traits::Zero>::zero()); b * m * n];
        match T::gemm(&plan, &xm, &ym, &mut z) {
            None => return Ok(None),
            Some(r) => r?,
        }
        // Place [batch, free_x, free_y] into the output's label order.
        let zo: Vec<usize> = batch
            .iter()
            .chain(&free_x)
            .chain(&free_y)
            .copied()
            .collect();
        let z_dims: Vec<usize> = zo.iter().map(|&l| dims[l]).collect();
        let zs = label_strides(&zo, &z_dims, dims.len());
        Ok(Some(contract(dims, &zo, &[(&z, zs)], out_strides, out_len)))
    }
}

impl<T: EinsumType> OpKernel for EinsumKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let inputs: Vec<&Tensor> = (0..ctx.num_inputs())
            .map(|i| ctx.input(i))
            .collect::<Result<_>>()?;
        let ranks: Vec<usize> = inputs.iter().map(|t| t.rank()).collect();
        let r = self.equation.resolve(&ranks)?;
        let dims = label_dims(&r, &inputs)?;
        if dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .is_none()
        {
            return Err(Status::invalid_argument(format!(
                "Einsum {}: the labels' sizes {dims:?} have too many combinations",
                self.equation.text
            )));
        }
        let out_dims: Vec<usize> = r.output.iter().map(|&l| dims[l]).collect();
        let out_len: usize = out_dims.iter().product();
        let out_strides = label_strides(&r.output, &out_dims, dims.len());
        let values = match self.via_gemm(&r, &dims, &inputs, &out_strides, out_len)? {
            Some(v) => v,
            None => {
                let mut loop_labels: Vec<usize> = Vec::new();
                for &l in r.output.iter().chain(r.inputs.iter().flatten()) {
                    if !loop_labels.contains(&l) {
                        loop_labels.push(l);
                    }
                }
                let operands: Vec<(&[T], Vec<usize>)> = inputs
                    .iter()
                    .zip(&r.inputs)
                    .map(|(t, labels)| {
                        Ok((
                            t.as_slice::<T>()?,
                            label_strides(labels, t.dims(), dims.len()),
                        ))
                    })
                    .collect::<Result<_>>()?;
                contract(&dims, &loop_labels, &operands, &out_strides, out_len)
            }
        };
        ctx.set_output(0, Tensor::new(&out_dims, values)?)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

fn make(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let text: String = c.attr("equation")?;
    let n: i64 = c.attr("N")?;
    let equation = EinsumEquation::parse(&text, n as usize)?;
    macro_rules! kernel {
        ($t:ty) => {
            Ok(Box::new(EinsumKernel::<$t> {
                equation,
                _t: PhantomData,
            }) as Box<dyn OpKernel>)
        };
    }
    match c.attr::<DType>("T")? {
        DType::F32 => kernel!(f32),
        DType::F64 => kernel!(f64),
        DType::F16 => kernel!(f16),
        DType::BF16 => kernel!(bf16),
        DType::I32 => kernel!(i32),
        DType::I64 => kernel!(i64),
        t => Err(Status::unimplemented(format!("Einsum of {t}"))),
    }
}

/// Registers Einsum.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    // TensorFlow's CPU types (complex left out): the same set as Range's.
    r.register(KernelDef::cpu("Einsum", make).type_constraint("T", super::range::RANGE_DTYPES));
}

#[cfg(test)]
mod tests {
    use graph::{AttrValue, Tensor};

    use crate::testutil::run_op_lists;

    fn einsum(eq: &str, xs: Vec<Tensor>) -> graph::Result<Tensor> {
        let attrs = [("equation", AttrValue::from(eq))];
        Ok(run_op_lists("Einsum", &attrs, vec![xs], Some(&[true]))?.remove(0))
    }

    #[test]
    fn products_traces_and_broadcasts() {
        let a = Tensor::new(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = Tensor::new(&[3, 2], vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap();
        let mm = einsum("ij,jk->ik", vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(mm.as_slice::<f32>().unwrap(), &[4.0, 5.0, 10.0, 11.0]);
        let t = einsum("ij->ji", vec![a.clone()]).unwrap();
        assert_eq!(
            t.as_slice::<f32>().unwrap(),
            &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
        );
        let sq = Tensor::new(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
        assert_eq!(
            einsum("ii->", vec![sq.clone()])
                .unwrap()
                .as_slice::<i32>()
                .unwrap(),
            &[5]
        );
        let d = einsum("i->ii", vec![Tensor::vector(&[1i64, 2])]).unwrap();
        assert_eq!(d.as_slice::<i64>().unwrap(), &[1, 0, 0, 2]);
        let e = einsum("ij,jk->ik", vec![a.clone(), a]).unwrap_err();
        // (The shape function rejects it before the kernel runs.)
        assert_eq!(e.code(), graph::Code::InvalidArgument);
        let x = Tensor::new(&[2, 1, 2], vec![1.0f64, 2.0, 3.0, 4.0]).unwrap();
        let y = Tensor::new(&[3, 2], vec![1.0f64; 6]).unwrap();
        let z = einsum("...j,kj->...k", vec![x, y]).unwrap();
        assert_eq!(z.dims(), &[2, 1, 3]);
        assert_eq!(
            z.as_slice::<f64>().unwrap(),
            &[3.0, 3.0, 3.0, 7.0, 7.0, 7.0]
        );
    }
}
