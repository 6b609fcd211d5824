//! CPU kernels of the array ops (TensorFlow's `array_ops`), one module per concept.
//! Data-movement kernels are generic over the element's storage class
//! ([`elems::Elem`], chosen once when the kernel is built), so they support every
//! dtype, strings and booleans included, and move contiguous runs with `memcpy`.
//! Reshape-like ops and whole-input slices share the input buffer.
//!
//! - [`basic`]: Const, Placeholder, Identity and its relatives, Snapshot.
//! - [`elems`]: element storage classes, dtype dispatch, control-input readers.
//! - [`copy`]: the strided-copy and tiling engines.
//! - [`shape`]: Shape, ShapeN, Size, Rank, Reshape, ExpandDims, Squeeze.
//! - [`bcast`]: BroadcastArgs, BroadcastGradientArgs, InvertPermutation.
//! - [`fill`]: Fill, ZerosLike, OnesLike, OneHot.
//! - [`transpose`]: Transpose, ReverseV2.
//! - [`concat`](mod@concat): ConcatV2, Concat, Pack.
//! - [`split`]: Split, SplitV, Unpack.
//! - [`slice`](mod@slice): Slice, StridedSlice, StridedSliceGrad.
//! - [`gather`]: Gather, GatherV2, Where.
//! - [`pad`]: Tile, BroadcastTo, Pad, PadV2, MirrorPad.
//! - [`matrix_diag`]: MatrixDiag, MatrixDiagV2, MatrixDiagV3.
//! - [`list_diff`] — ListDiff.
//! - [`space_to_batch`]: SpaceToBatchND, BatchToSpaceND, SpaceToBatch, BatchToSpace.
//! - [`space_to_depth`]: SpaceToDepth, DepthToSpace.
//! - [`unique`]: Unique, UniqueWithCounts.
//! - [`scatter_nd`]: GatherNd, ScatterNd, TensorScatterUpdate/Add/Sub.
//! - [`reverse_sequence`] — ReverseSequence.
//! - [`band_part`] — MatrixBandPart.

pub mod band_part;
pub mod basic;
pub mod bcast;
pub mod concat;
pub mod copy;
pub mod elems;
pub mod fill;
pub mod gather;
pub mod list_diff;
pub mod matrix_diag;
pub mod pad;
pub mod reverse_sequence;
pub mod scatter_nd;
pub mod shape;
pub mod slice;
pub mod space_to_batch;
pub mod space_to_depth;
pub mod split;
pub mod transpose;
pub mod unique;

use crate::registry::KernelRegistry;

/// Registers the array kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    basic::register(r);
    shape::register(r);
    bcast::register(r);
    fill::register(r);
    transpose::register(r);
    concat::register(r);
    split::register(r);
    slice::register(r);
    gather::register(r);
    pad::register(r);
    matrix_diag::register(r);
    list_diff::register(r);
    space_to_batch::register(r);
    space_to_depth::register(r);
    unique::register(r);
    scatter_nd::register(r);
    reverse_sequence::register(r);
    band_part::register(r);
}
