//! Optimizer kernels (TensorFlow's `training_ops.cc`): `ApplyGradientDescent`,
//! `ApplyMomentum`, `ApplyAdagrad`, `ApplyAdam`, `ApplyRMSProp`,
//! `ApplyCenteredRMSProp`, `ApplyAdadelta`, `ApplyProximalGradientDescent`,
//! `ApplyProximalAdagrad`, `ApplyFtrl`, `ApplyFtrlV2` and their `ResourceApply*`
//! forms, for the float dtypes.
//!
//! - [`update`] — the element-wise math of each optimizer, as stages that each
//!   write one variable (usually the slots first, the variable itself last).
//! - [`regularized`] — the L1/L2-regularised updates (FTRL, the proximal ones),
//!   shared by the dense and the sparse kernels.
//! - [`sparse`] — the `SparseApply*` kernels (Adagrad, Momentum, RMSProp,
//!   CenteredRMSProp, Adadelta, ProximalGradientDescent, ProximalAdagrad, Ftrl,
//!   FtrlV2): the same math on the rows named by `indices`.
//! - [`apply`] — the one generic kernel: finds the variables (reference inputs or
//!   resource handles), validates shapes and scalars, and runs the stages under
//!   the locking discipline `use_locking` asks for.
//!
//! Locking: with `use_locking = true` the kernel takes every variable's lock, in
//! address order (so two kernels never deadlock), checks, then runs all stages
//! before releasing any; concurrent updates of the same variables are serialised.
//! With `use_locking = false` (TensorFlow's default) each stage holds only the
//! lock of the variable it writes, reading earlier stages' results from
//! snapshots: concurrent updates may interleave between variables, as TensorFlow's
//! unlocked updates do, but never race on memory. A variable passed twice (say
//! `var` also as `accum`) is `InvalidArgument`.

pub mod apply;
pub mod regularized;
pub mod sparse;
pub mod update;

#[cfg(test)]
mod later_family_tests;
#[cfg(test)]
mod sparse_tests;
#[cfg(test)]
mod tests;

use crate::cpu::array::elems::INDEX_DTYPES;
use crate::cpu::types::FLOAT_DTYPES;
use crate::registry::{KernelDef, KernelRegistry};

/// The dense optimizer ops: (`Apply*` name, `ResourceApply*` name, family).
const DENSE: &[(&str, &str, apply::Family)] = &[
    (
        "ApplyGradientDescent",
        "ResourceApplyGradientDescent",
        apply::Family::GradientDescent,
    ),
    (
        "ApplyAdagrad",
        "ResourceApplyAdagrad",
        apply::Family::Adagrad,
    ),
    (
        "ApplyMomentum",
        "ResourceApplyMomentum",
        apply::Family::Momentum,
    ),
    ("ApplyAdam", "ResourceApplyAdam", apply::Family::Adam),
    (
        "ApplyRMSProp",
        "ResourceApplyRMSProp",
        apply::Family::RmsProp,
    ),
    (
        "ApplyCenteredRMSProp",
        "ResourceApplyCenteredRMSProp",
        apply::Family::CenteredRmsProp,
    ),
    (
        "ApplyAdadelta",
        "ResourceApplyAdadelta",
        apply::Family::Adadelta,
    ),
    (
        "ApplyProximalGradientDescent",
        "ResourceApplyProximalGradientDescent",
        apply::Family::ProximalGradientDescent,
    ),
    (
        "ApplyProximalAdagrad",
        "ResourceApplyProximalAdagrad",
        apply::Family::ProximalAdagrad,
    ),
    ("ApplyFtrl", "ResourceApplyFtrl", apply::Family::Ftrl),
    ("ApplyFtrlV2", "ResourceApplyFtrlV2", apply::Family::FtrlV2),
];

/// The sparse optimizer ops: (`SparseApply*` name, `ResourceSparseApply*` name,
/// family).
const SPARSE: &[(&str, &str, sparse::SparseFamily)] = &[
    (
        "SparseApplyAdagrad",
        "ResourceSparseApplyAdagrad",
        sparse::SparseFamily::Adagrad,
    ),
    (
        "SparseApplyMomentum",
        "ResourceSparseApplyMomentum",
        sparse::SparseFamily::Momentum,
    ),
    (
        "SparseApplyRMSProp",
        "ResourceSparseApplyRMSProp",
        sparse::SparseFamily::RmsProp,
    ),
    (
        "SparseApplyCenteredRMSProp",
        "ResourceSparseApplyCenteredRMSProp",
        sparse::SparseFamily::CenteredRmsProp,
    ),
    (
        "SparseApplyAdadelta",
        "ResourceSparseApplyAdadelta",
        sparse::SparseFamily::Adadelta,
    ),
    (
        "SparseApplyProximalGradientDescent",
        "ResourceSparseApplyProximalGradientDescent",
        sparse::SparseFamily::ProximalGradientDescent,
    ),
    (
        "SparseApplyProximalAdagrad",
        "ResourceSparseApplyProximalAdagrad",
        sparse::SparseFamily::ProximalAdagrad,
    ),
    (
        "SparseApplyFtrl",
        "ResourceSparseApplyFtrl",
        sparse::SparseFamily::Ftrl,
    ),
    (
        "SparseApplyFtrlV2",
        "ResourceSparseApplyFtrlV2",
        sparse::SparseFamily::FtrlV2,
    ),
];

/// Registers the optimizer kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for &(op, resource_op, family) in DENSE {
        for name in [op, resource_op] {
            r.register(
                KernelDef::cpu(name, apply::factory(family)).type_constraint("T", FLOAT_DTYPES),
            );
        }
    }
    for &(op, resource_op, family) in SPARSE {
        for name in [op, resource_op] {
            r.register(
                KernelDef::cpu(name, sparse::factory(family))
                    .type_constraint("T", FLOAT_DTYPES)
                    .type_constraint("Tindices", INDEX_DTYPES),
            );
        }
    }
}
