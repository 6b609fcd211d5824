//! [`Entry`]: what travels along a graph edge inside an executor — nothing (a dead
//! or not-yet-produced value), a tensor, or a reference to a variable's storage
//! (TensorFlow's ref edges, produced by `VariableV2`).

use std::sync::{Arc, LazyLock};

use graph::{Result, Status, Tensor};

use crate::resource::Var;

/// An edge value. See the module docs.
#[derive(Clone, Default)]
pub enum Entry {
    /// No value: not produced yet, consumed, or dead.
    #[default]
    Empty,
    /// A tensor.
    Value(Tensor),
    /// A reference to a variable.
    Ref(Arc<Var>),
}

impl Entry {
    /// True when there is no value.
    pub fn is_empty(&self) -> bool {
        matches!(self, Entry::Empty)
    }

    /// Takes the entry, leaving `Empty`.
    pub fn take(&mut self) -> Entry {
        std::mem::take(self)
    }

    /// The scalar bool `b` as a prebuilt entry: a kernel producing a scalar bool
    /// copies it (see [`Entry::clone_to`]) instead of building a tensor.
    pub fn scalar_bool(b: bool) -> &'static Entry {
        static BOOLS: LazyLock<[Entry; 2]> = LazyLock::new(|| {
            [
                Entry::Value(Tensor::scalar(false)),
                Entry::Value(Tensor::scalar(true)),
            ]
        });
        &BOOLS[b as usize]
    }

    /// Moves `src` into this entry, leaving `src` empty and dropping what this
    /// entry held: `*self = src.take()`, done as a swap of the two 16-byte
    /// entries after emptying `self`, so the value is copied as two whole words and
    /// no drop runs in between.
    #[inline(always)]
    pub fn move_from(&mut self, src: &mut Entry) {
        if !self.is_empty() {
            *self = Entry::Empty;
        }
        std::mem::swap(self, src);
    }

    /// Makes `dst` a clone of this entry, dropping what `dst` held.
    ///
    /// Same result as `*dst = self.clone()`, written for the code it compiles to:
    /// a scalar held in its tensor handle is copied as one 16-byte move, and nothing
    /// runs between the clone and its store when `dst` is empty (the executor's
    /// slots are). The plain form assembles a scalar in a stack temporary from
    /// overlapping pieces and reads it back whole, a read the CPU cannot forward
    /// from those writes and stalls on.
    #[inline(always)]
    pub fn clone_to(&self, dst: &mut Entry) {
        if !dst.is_empty() {
            *dst = Entry::Empty;
        }
        // `dst` is empty now: replacing it leaves nothing to drop.
        let old = match self {
            Entry::Value(t) if t.is_inline_scalar() => {
                std::mem::replace(dst, Entry::Value(t.clone()))
            }
            other => std::mem::replace(dst, other.clone()),
        };
        std::mem::forget(old);
    }

    /// The tensor, reading through a reference (`FailedPrecondition` for an
    /// uninitialised variable).
    pub fn to_tensor(&self) -> Result<Tensor> {
        match self {
            Entry::Value(t) => Ok(t.clone()),
            Entry::Ref(v) => v.read(),
            Entry::Empty => Err(Status::internal("expected a value, found none")),
        }
    }

    /// Bytes held (for step statistics).
    pub fn byte_size(&self) -> usize {
        match self {
            Entry::Value(t) => t.byte_size(),
            _ => 0,
        }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Entry::Empty => f.write_str("Empty"),
            Entry::Value(t) => write!(f, "{t:?}"),
            Entry::Ref(v) => write!(f, "Ref({})", v.name()),
        }
    }
}

impl From<Tensor> for Entry {
    fn from(t: Tensor) -> Entry {
        Entry::Value(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Var;

    #[test]
    fn clone_to_clones_every_kind_and_drops_the_old_value() {
        let heap = Tensor::vector(&[1.0f32, 2.0]);
        let var = Arc::new(Var::new("v", graph::DType::F32));
        let sources = [
            Entry::Empty,
            Entry::Value(Tensor::scalar(3i32)),
            Entry::Value(heap.clone()),
            Entry::Ref(Arc::clone(&var)),
        ];
        for src in &sources {
            for start in [
                Entry::Empty,
                Entry::Value(heap.clone()),
                Entry::Ref(Arc::clone(&var)),
            ] {
                let mut dst = start;
                src.clone_to(&mut dst);
                assert_eq!(format!("{dst:?}"), format!("{src:?}"));
            }
        }
        let mut src = Entry::Value(Tensor::scalar(1u8));
        let mut dst = Entry::Ref(Arc::clone(&var));
        dst.move_from(&mut src);
        assert!(src.is_empty());
        assert_eq!(format!("{dst:?}"), format!("{:?}", Tensor::scalar(1u8)));
        for b in [false, true] {
            match Entry::scalar_bool(b) {
                Entry::Value(t) => assert_eq!(t, &Tensor::scalar(b)),
                other => panic!("not a value: {other:?}"),
            }
        }
        // every clone made above was dropped again
        drop(sources);
        let mut heap = heap;
        assert!(heap.is_unique());
        assert_eq!(Arc::strong_count(&var), 1);
    }
}
