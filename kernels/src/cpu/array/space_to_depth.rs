//! SpaceToDepth and DepthToSpace (TensorFlow's `spacetodepth_op.cc` and
//! `depthtospace_op.cc`) for `NHWC`, every dtype TensorFlow's CPU kernels take
//! (strings and booleans included). TensorFlow registers its CPU kernels for
//! `data_format = "NHWC"` only, so other formats find no kernel (`NotFound`).
//!
//! Both are one [`strided_copy`] of the box `[N, H/b, b, W/b, b, C]`: the input
//! pixel `(h, w)` goes to output pixel `(h / b, w / b)` at depth offset
//! `((h % b) · b + w % b) · C`.

use std::marker::PhantomData;

use graph::{DType, Result, Status, TensorShape};

use super::copy::{signed_strides, strided_copy, Layout};
use super::elems::{dispatch_elem, Elem, POD_STRING_DTYPES};
use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// SpaceToDepth (`to_depth`) or DepthToSpace.
struct DepthKernel<E> {
    block: usize,
    to_depth: bool,
    _e: PhantomData<fn(E)>,
}

impl<E: Elem> OpKernel for DepthKernel<E> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let d = input.dims();
        let b = self.block;
        if d.len() != 4 {
            return Err(Status::invalid_argument(if self.to_depth {
                format!("Input rank should be 4 instead of {}", d.len())
            } else {
                format!("Input rank should be: 4 instead of: {}", d.len())
            }));
        }
        let (n, h, w, c) = (d[0], d[1], d[2], d[3]);
        // The space side `[N, H/b, b, W/b, b, C]`, the depth side
        // `[N, H/b, W/b, b, b, C]` seen in the same order.
        let (sh, sw, sc) = if self.to_depth {
            if h % b != 0 || w % b != 0 {
                return Err(Status::invalid_argument(format!(
                    "Image width {w} and height {h} should be divisible by block_size: {b}"
                )));
            }
            (h, w, c)
        } else {
            if c % (b * b) != 0 {
                return Err(Status::invalid_argument(format!(
                    "Input depth dimension {c} should be divisible by: {}",
                    b * b
                )));
            }
            (h * b, w * b, c / (b * b))
        };
        let dims = [n, sh / b, b, sw / b, b, sc];
        let space = signed_strides(&[n, sh / b, b, sw / b, b, sc]);
        let depth = signed_strides(&[n, sh / b, sw / b, b, b, sc]);
        let space_box = [space[0], space[1], space[2], space[3], space[4], space[5]];
        let depth_box = [depth[0], depth[1], depth[3], depth[2], depth[4], depth[5]];
        let (src_strides, dst_strides, out) = if self.to_depth {
            (space_box, depth_box, [n, sh / b, sw / b, b * b * sc])
        } else {
            (depth_box, space_box, [n, sh, sw, sc])
        };
        let src = E::view(input)?;
        let t = E::build(
            ctx.allocator(),
            input.dtype(),
            TensorShape::new(&out),
            |o| {
                let at = |strides| Layout { base: 0, strides };
                strided_copy(&dims, src, at(&src_strides), o, at(&dst_strides))
            },
        )?;
        ctx.set_output(0, t)
    }
}

fn make(c: &OpKernelConstruction<'_>, to_depth: bool) -> Result<Box<dyn OpKernel>> {
    let format: String = c.attr("data_format")?;
    if !matches!(format.as_str(), "NHWC" | "NCHW" | "NCHW_VECT_C") {
        return Err(Status::invalid_argument("Invalid data format"));
    }
    let b: i64 = c.attr("block_size")?;
    if b <= 1 {
        return Err(Status::invalid_argument(format!(
            "Block size should be > 1, but was: {b}"
        )));
    }
    if format != "NHWC" {
        return Err(Status::invalid_argument(format!(
            "Only NHWC data_format supported on CPU. Got {format}"
        )));
    }
    let block = b as usize;
    dispatch_elem!(c.attr::<DType>("T")?, E => Ok(Box::new(DepthKernel::<E> { block, to_depth, _e: PhantomData })))
}

/// Registers the two kernels for `NHWC`.
pub(super) fn register(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("SpaceToDepth", |c| make(c, true))
            .type_constraint("T", POD_STRING_DTYPES)
            .attr_constraint("data_format", "NHWC"),
    );
    r.register(
        KernelDef::cpu("DepthToSpace", |c| make(c, false))
            .type_constraint("T", POD_STRING_DTYPES)
            .attr_constraint("data_format", "NHWC"),
    );
}

#[cfg(test)]
mod tests {
    use crate::testutil::run_op;
    use graph::{AttrValue, Code, Tensor};

    #[test]
    fn blocks_move_into_depth_and_back() {
        // 1x2x4x1: rows [0 1 2 3], [4 5 6 7]; blocks of 2.
        let x = Tensor::new(&[1, 2, 4, 1], (0..8).collect::<Vec<i64>>()).unwrap();
        let attrs = [("block_size", AttrValue::from(2i64))];
        let y = run_op("SpaceToDepth", &attrs, vec![x.clone()])
            .unwrap()
            .remove(0);
        assert_eq!(
            y,
            Tensor::new(&[1, 1, 2, 4], vec![0i64, 1, 4, 5, 2, 3, 6, 7]).unwrap()
        );
        let back = run_op("DepthToSpace", &attrs, vec![y]).unwrap();
        assert_eq!(back[0], x);
        let e = run_op("DepthToSpace", &attrs, vec![x.clone()]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let nchw = [
            ("block_size", AttrValue::from(2i64)),
            ("data_format", AttrValue::from("NCHW")),
        ];
        let c = Tensor::new(&[1, 1, 2, 4], (0..8).collect::<Vec<i64>>()).unwrap();
        let e = run_op("SpaceToDepth", &nchw, vec![c]).unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
    }

    #[test]
    fn strings_move_too() {
        let x = Tensor::from_strings(&[1, 2, 2, 1], vec!["a", "b", "c", "d"]).unwrap();
        let attrs = [("block_size", AttrValue::from(2i64))];
        let y = run_op("SpaceToDepth", &attrs, vec![x]).unwrap().remove(0);
        assert_eq!(y.dims(), [1, 1, 1, 4]);
        assert_eq!(y.as_strings().unwrap()[3].as_ref(), b"d");
    }
}
