//! [`GradientRegistry`]: gradient functions by op name, registered once per op family
//! (`register_all_gradients`), as TensorFlow's `REGISTER_GRADIENT`. Ops declared
//! not differentiable (`NotDifferentiable`) pass no gradient.

use std::collections::{HashMap, HashSet};
use std::sync::{OnceLock, RwLock};

use crate::builder::Output;
use crate::gradients::{GradContext, Gradient};
use crate::Result;

/// Computes the gradients of an op's inputs from the gradients of its outputs.
pub type GradFn = fn(&GradContext<'_>) -> Result<Vec<Option<Output>>>;

/// A gradient function that may return sparse gradients
/// ([`Gradient::Sparse`], TensorFlow's `IndexedSlices`): the gather family's.
/// Where an op has one, it is used instead of its [`GradFn`].
pub type SparseGradFn = fn(&GradContext<'_>) -> Result<Vec<Option<Gradient>>>;

/// The registry; see the module docs.
#[derive(Default)]
pub struct GradientRegistry {
    fns: RwLock<HashMap<String, GradFn>>,
    sparse: RwLock<HashMap<String, SparseGradFn>>,
    none: RwLock<HashSet<String>>,
}

/// What the registry knows of an op.
pub enum Lookup {
    /// Its gradient function.
    Found(GradFn),
    /// It passes no gradient.
    NotDifferentiable,
    /// Nothing is registered.
    Missing,
}

impl GradientRegistry {
    /// The process-wide registry with every built-in gradient.
    pub fn global() -> &'static GradientRegistry {
        static G: OnceLock<GradientRegistry> = OnceLock::new();
        G.get_or_init(|| {
            let r = GradientRegistry::default();
            crate::gradients::register_all_gradients(&r);
            r
        })
    }

    /// Registers `f` as the gradient of `op`.
    pub fn register(&self, op: &str, f: GradFn) {
        self.fns
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(op.to_owned(), f);
    }

    /// Registers `f` as the sparse-aware gradient of `op` (see [`SparseGradFn`]).
    pub fn register_sparse(&self, op: &str, f: SparseGradFn) {
        self.sparse
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(op.to_owned(), f);
    }

    /// The sparse-aware gradient of `op`, if registered.
    pub fn lookup_sparse(&self, op: &str) -> Option<SparseGradFn> {
        self.sparse
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(op)
            .copied()
    }

    /// Declares `op` not differentiable.
    pub fn not_differentiable(&self, op: &str) {
        self.none
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(op.to_owned());
    }

    /// Looks `op` up.
    pub fn lookup(&self, op: &str) -> Lookup {
        if let Some(f) = self.fns.read().unwrap_or_else(|p| p.into_inner()).get(op) {
            return Lookup::Found(*f);
        }
        if self
            .none
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(op)
        {
            return Lookup::NotDifferentiable;
        }
        Lookup::Missing
    }

    /// True when `op` has a gradient function (dense or sparse-aware).
    pub fn has_gradient(&self, op: &str) -> bool {
        matches!(self.lookup(op), Lookup::Found(_)) || self.lookup_sparse(op).is_some()
    }
}
