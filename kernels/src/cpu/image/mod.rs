//! CPU kernels of the image ops (TensorFlow's `core/kernels/image/`), `NHWC`.
//!
//! - [`resizer_state`] — the checks, scales and sampling the resize kernels share
//!   (TensorFlow's `image_resizer_state.h`).
//! - [`resize_bilinear`] — `ResizeBilinear` and `ResizeBilinearGrad`.
//! - [`resize_nearest_neighbor`] — `ResizeNearestNeighbor` and its gradient.

pub mod resize_bilinear;
pub mod resize_nearest_neighbor;
pub mod resizer_state;

use crate::cpu::types::{FLOAT_DTYPES, NUMERIC_DTYPES};
use crate::registry::{KernelDef, KernelRegistry};

/// Registers the image kernels, for the types TensorFlow's CPU kernels take.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    use resize_bilinear::{make_resize_bilinear, make_resize_bilinear_grad};
    use resize_nearest_neighbor::{
        make_resize_nearest_neighbor, make_resize_nearest_neighbor_grad,
    };
    let numeric: [(&'static str, crate::registry::KernelFactory); 3] = [
        ("ResizeBilinear", make_resize_bilinear),
        ("ResizeNearestNeighbor", make_resize_nearest_neighbor),
        (
            "ResizeNearestNeighborGrad",
            make_resize_nearest_neighbor_grad,
        ),
    ];
    for (op, f) in numeric {
        r.register(KernelDef::cpu(op, f).type_constraint("T", NUMERIC_DTYPES));
    }
    r.register(
        KernelDef::cpu("ResizeBilinearGrad", make_resize_bilinear_grad)
            .type_constraint("T", FLOAT_DTYPES),
    );
}
