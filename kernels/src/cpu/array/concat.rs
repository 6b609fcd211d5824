//! Kernels that join tensors along one dimension: ConcatV2, Concat and Pack. Each
//! views its tensors as `[outer, row]` matrices around the axis and moves whole
//! rows with `memcpy` (the cutting kernels are in [`super::split`]).

use std::marker::PhantomData;

use graph::{DType, Result, Status, Tensor, TensorShape};

use super::elems::{dispatch_elem, int_scalar, Elem, INDEX_DTYPES};
use crate::allocator::Allocator;
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// Concatenates `parts` (each `[outer, rows[i]]`) row by row into a new tensor of
/// `shape`.
pub(crate) fn concat_rows<E: Elem>(
    alloc: Allocator<'_>,
    dtype: DType,
    shape: TensorShape,
    parts: &[&[E]],
    rows: &[usize],
    outer: usize,
) -> Result<Tensor> {
    let out_row: usize = rows.iter().sum();
    E::build(alloc, dtype, shape, |o| {
        if o.len() != outer * out_row {
            return Err(Status::internal("concat: output size mismatch"));
        }
        for (p, &row) in parts.iter().zip(rows) {
            if p.len() != outer * row {
                return Err(Status::internal("concat: input size mismatch"));
            }
        }
        for k in 0..outer {
            let mut off = k * out_row;
            for (p, &row) in parts.iter().zip(rows) {
                o[off..off + row].clone_from_slice(&p[k * row..(k + 1) * row]);
                off += row;
            }
        }
        Ok(())
    })
}

/// `ConcatV2` (axis last) and `Concat` (axis first).
struct ConcatKernel<E> {
    axis_first: bool,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for ConcatKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs().saturating_sub(1);
        let (axis_at, first) = if self.axis_first { (0, 1) } else { (n, 0) };
        let axis_t = ctx.input(axis_at)?;
        if !(axis_t.rank() == 0 || (axis_t.rank() == 1 && axis_t.dims()[0] == 1)) {
            let what = if self.axis_first {
                "concat_dim"
            } else {
                "axis"
            };
            return Err(Status::invalid_argument(format!(
                "{what} tensor should be a scalar integer, but got shape {}",
                axis_t.shape()
            )));
        }
        let raw = int_scalar(axis_t)?;
        let values: Vec<&Tensor> = (first..first + n)
            .map(|i| ctx.input(i))
            .collect::<Result<_>>()?;
        let s0 = values[0].shape();
        let r = s0.rank() as i64;
        let axis = if raw < 0 { raw + r } else { raw };
        if r == 0 && raw == 0 {
            return Err(Status::invalid_argument(
                "ConcatOp : Can't concatenate scalars (use tf.stack instead)",
            ));
        }
        if !(0..r).contains(&axis) {
            return Err(Status::invalid_argument(format!(
                "ConcatOp : Expected concatenating dimensions in the range [{}, {r}), but got {raw}",
                -r
            )));
        }
        let axis = axis as usize;
        let mut total = 0usize;
        for (i, v) in values.iter().enumerate() {
            let si = v.shape();
            if si.rank() != s0.rank() {
                return Err(Status::invalid_argument(format!(
                    "ConcatOp : Ranks of all input tensors should match: shape[0] = {s0} vs. shape[{i}] = {si}"
                )));
            }
            for j in (0..si.rank()).filter(|&j| j != axis) {
                if si.dim(j) != s0.dim(j) {
                    return Err(Status::invalid_argument(format!(
                        "ConcatOp : Dimension {j} in both shapes must be equal: shape[0] = {s0} vs. shape[{i}] = {si}"
                    )));
                }
            }
            total += si.dim(axis);
        }
        let mut dims = s0.dims().to_vec();
        dims[axis] = total;
        let outer: usize = dims[..axis].iter().product();
        let parts: Vec<&[E]> = values.iter().map(|v| E::view(v)).collect::<Result<_>>()?;
        let rows: Vec<usize> = values
            .iter()
            .map(|v| v.dims()[axis..].iter().product())
            .collect();
        let out = concat_rows::<E>(
            ctx.allocator(),
            values[0].dtype(),
            TensorShape::from(dims),
            &parts,
            &rows,
            outer,
        )?;
        ctx.set_output(0, out)
    }
}

/// `Pack`: stacks equal-shaped inputs along a new dimension.
struct PackKernel<E> {
    axis: i64,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for PackKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs();
        let first = ctx.input(0)?;
        let expanded = first.rank() as i64 + 1;
        let axis = if self.axis < 0 {
            self.axis + expanded
        } else {
            self.axis
        };
        if !(0..expanded).contains(&axis) {
            return Err(Status::invalid_argument(format!(
                "axis = {} not in [{}, {expanded})",
                self.axis, -expanded
            )));
        }
        let axis = axis as usize;
        let mut dims = first.dims().to_vec();
        dims.insert(axis, n);
        if n == 1 {
            let t = ctx.take_input(0)?;
            return ctx.set_output(0, t.reshaped(dims)?);
        }
        let values: Vec<&Tensor> = (0..n).map(|i| ctx.input(i)).collect::<Result<_>>()?;
        for (i, v) in values.iter().enumerate() {
            if v.shape() != first.shape() {
                return Err(Status::invalid_argument(format!(
                    "Shapes of all inputs must match: values[0].shape = {} != values[{i}].shape = {}",
                    first.shape(),
                    v.shape()
                )));
            }
        }
        let outer: usize = dims[..axis].iter().product();
        let row: usize = first.dims()[axis..].iter().product();
        let parts: Vec<&[E]> = values.iter().map(|v| E::view(v)).collect::<Result<_>>()?;
        let out = concat_rows::<E>(
            ctx.allocator(),
            first.dtype(),
            TensorShape::from(dims),
            &parts,
            &vec![row; n],
            outer,
        )?;
        ctx.set_output(0, out)
    }
}

fn make_concat(c: &OpKernelConstruction<'_>, axis_first: bool) -> Result<Box<dyn OpKernel>> {
    dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(ConcatKernel::<E> { axis_first, _e: PhantomData })))
}

/// Registers the concat and pack kernels.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("ConcatV2", |c| make_concat(c, false)).type_constraint("Tidx", INDEX_DTYPES),
    );
    r.register(KernelDef::cpu("Concat", |c| make_concat(c, true)));
    r.register(KernelDef::cpu("Pack", |c| {
        let axis: i64 = c.attr("axis")?;
        dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(PackKernel::<E> { axis, _e: PhantomData })))
    }));
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op_lists;
    use graph::{AttrValue, Code, DType, Tensor};

    fn iota(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::new(dims, (0..n as i32).collect()).unwrap()
    }

    fn concat(values: Vec<Tensor>, axis: i32) -> graph::Result<Vec<Tensor>> {
        run_op_lists(
            "ConcatV2",
            &[],
            vec![values, vec![Tensor::scalar(axis)]],
            Some(&[true, false]),
        )
    }

    #[test]
    fn concat_along_axes() {
        let out = concat(vec![iota(&[2, 2]), iota(&[2, 1])], 1).unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[2, 3], vec![0, 1, 0, 2, 3, 1]).unwrap()
        );
        let out = concat(vec![iota(&[1, 2]), iota(&[2, 2])], -2).unwrap();
        assert_eq!(
            out[0],
            Tensor::new(&[3, 2], vec![0, 1, 0, 1, 2, 3]).unwrap()
        );
        let out = concat(vec![Tensor::zeros(DType::I32, [0, 2]), iota(&[1, 2])], 0).unwrap();
        assert_eq!(out[0], iota(&[1, 2]));
        let s = |v: &[&'static str]| Tensor::from_strings(&[v.len()], v.to_vec()).unwrap();
        let out = concat(vec![s(&["a"]), s(&["b", "c"])], 0).unwrap();
        assert_eq!(out[0], s(&["a", "b", "c"]));
        let out = run_op_lists(
            "Concat",
            &[],
            vec![vec![Tensor::scalar(0i32)], vec![iota(&[1]), iota(&[2])]],
            Some(&[false, true]),
        )
        .unwrap();
        assert_eq!(out[0], Tensor::vector(&[0, 0, 1]));
    }

    #[test]
    fn concat_errors() {
        let e = concat(vec![Tensor::scalar(1i32), Tensor::scalar(2i32)], 0).unwrap_err();
        assert_eq!(
            e.message(),
            "ConcatOp : Can't concatenate scalars (use tf.stack instead)"
        );
        let e = concat(vec![iota(&[1]), iota(&[1])], 1).unwrap_err();
        assert_eq!(
            e.message(),
            "ConcatOp : Expected concatenating dimensions in the range [-1, 1), but got 1"
        );
        // Mismatched shapes fail at graph construction (the shape function) with the
        // same code as the kernel.
        assert_eq!(
            concat(vec![iota(&[1, 2]), iota(&[1, 1])], 0)
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn pack() {
        let out = run_op_lists(
            "Pack",
            &[("axis", AttrValue::I(1))],
            vec![vec![iota(&[2]), iota(&[2])]],
            Some(&[true]),
        )
        .unwrap();
        assert_eq!(out[0], Tensor::new(&[2, 2], vec![0, 0, 1, 1]).unwrap());
        let out = run_op_lists(
            "Pack",
            &[],
            vec![vec![Tensor::scalar(1.0f32), Tensor::scalar(2.0f32)]],
            Some(&[true]),
        )
        .unwrap();
        assert_eq!(out[0], Tensor::vector(&[1.0f32, 2.0]));
        let out = run_op_lists(
            "Pack",
            &[("axis", AttrValue::I(-1))],
            vec![vec![iota(&[2])]],
            Some(&[true]),
        )
        .unwrap();
        assert_eq!(out[0].dims(), &[2, 1]);
        let e = run_op_lists(
            "Pack",
            &[("axis", AttrValue::I(3))],
            vec![vec![iota(&[1]), iota(&[1])]],
            Some(&[true]),
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }
}
