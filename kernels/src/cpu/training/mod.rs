//! Optimizer kernels (TensorFlow's `training_ops.cc`): `ApplyGradientDescent`,
//! `ApplyMomentum`, `ApplyAdagrad`, `ApplyAdam`, `ApplyRMSProp` and their `ResourceApply*` forms,
//! for the float dtypes.
//!
//! - [`update`] — the element-wise math of each optimizer, as stages that each
//!   write one variable (slots first, the variable itself last).
//! - [`sparse`] — the `SparseApply*` kernels (Adagrad, Momentum, RMSProp,
//!   Ftrl, FtrlV2): the same math on the rows named by `indices`.
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
pub mod sparse;
pub mod update;

#[cfg(test)]
mod sparse_tests;
#[cfg(test)]
mod tests;

use crate::cpu::array::elems::INDEX_DTYPES;
use crate::cpu::types::FLOAT_DTYPES;
use crate::registry::{KernelDef, KernelRegistry};

/// Registers the optimizer kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    r.register(
        KernelDef::cpu("ApplyGradientDescent", |c| {
            apply::make(c, apply::Family::GradientDescent)
        })
        .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ResourceApplyGradientDescent", |c| {
            apply::make(c, apply::Family::GradientDescent)
        })
        .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ApplyAdagrad", |c| apply::make(c, apply::Family::Adagrad))
            .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ResourceApplyAdagrad", |c| {
            apply::make(c, apply::Family::Adagrad)
        })
        .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ApplyMomentum", |c| apply::make(c, apply::Family::Momentum))
            .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ResourceApplyMomentum", |c| {
            apply::make(c, apply::Family::Momentum)
        })
        .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ApplyAdam", |c| apply::make(c, apply::Family::Adam))
            .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ResourceApplyAdam", |c| apply::make(c, apply::Family::Adam))
            .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ApplyRMSProp", |c| apply::make(c, apply::Family::RmsProp))
            .type_constraint("T", FLOAT_DTYPES),
    );
    r.register(
        KernelDef::cpu("ResourceApplyRMSProp", |c| {
            apply::make(c, apply::Family::RmsProp)
        })
        .type_constraint("T", FLOAT_DTYPES),
    );
    for (op, family) in [
        ("SparseApplyAdagrad", sparse::SparseFamily::Adagrad),
        ("ResourceSparseApplyAdagrad", sparse::SparseFamily::Adagrad),
        ("SparseApplyMomentum", sparse::SparseFamily::Momentum),
        (
            "ResourceSparseApplyMomentum",
            sparse::SparseFamily::Momentum,
        ),
        ("SparseApplyRMSProp", sparse::SparseFamily::RmsProp),
        ("ResourceSparseApplyRMSProp", sparse::SparseFamily::RmsProp),
        ("SparseApplyFtrl", sparse::SparseFamily::Ftrl),
        ("ResourceSparseApplyFtrl", sparse::SparseFamily::Ftrl),
        ("SparseApplyFtrlV2", sparse::SparseFamily::FtrlV2),
        ("ResourceSparseApplyFtrlV2", sparse::SparseFamily::FtrlV2),
    ] {
        let factory: crate::KernelFactory = match family {
            sparse::SparseFamily::Adagrad => |c| sparse::make(c, sparse::SparseFamily::Adagrad),
            sparse::SparseFamily::Momentum => |c| sparse::make(c, sparse::SparseFamily::Momentum),
            sparse::SparseFamily::RmsProp => |c| sparse::make(c, sparse::SparseFamily::RmsProp),
            sparse::SparseFamily::Ftrl => |c| sparse::make(c, sparse::SparseFamily::Ftrl),
            sparse::SparseFamily::FtrlV2 => |c| sparse::make(c, sparse::SparseFamily::FtrlV2),
        };
        r.register(
            KernelDef::cpu(op, factory)
                .type_constraint("T", FLOAT_DTYPES)
                .type_constraint("Tindices", INDEX_DTYPES),
        );
    }
}
