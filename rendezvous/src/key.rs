//! Rendezvous keys. TensorFlow names an exchange
//! `src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id`. A
//! [`ParsedKey`] holds the first four parts, parsed once when a Send or Recv kernel
//! is built, plus their 64-bit hash, its id; the runtime adds the [`FrameIter`] the
//! kernel runs in. Lookups hash two integers, never a string, and the full string is
//! only built for a remote peer or a log ([`ParsedKey::full_key`]).
//!
//! An id depends only on the four parts (as TensorFlow's `LocalRendezvous` keys its
//! table by a hash of the key string), so it is the same in every process and for
//! every key built from the same parts, whenever it is built. No table is needed to
//! give ids; a process-wide registry of the keys alive now only makes a hash
//! collision between two live keys an error when the second is built, instead of a
//! tensor delivered to the wrong receiver. A key leaves the registry with its last
//! holder: keys name device incarnations, so each runtime has its own, and they go
//! when its sessions' kernels go.
//!
//! Lock order: the registry's lock is a leaf (nothing else is locked under it, and
//! no key is dropped while it is held).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use graph::{Result, Status};

/// The loop frame and iteration an exchange happens in; the root frame is `(0, 0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct FrameIter {
    /// Id of the frame instance (0 for the root frame).
    pub frame_id: u64,
    /// Iteration within the frame.
    pub iter: i64,
}

impl FrameIter {
    /// The root frame, iteration 0.
    pub const ROOT: FrameIter = FrameIter {
        frame_id: 0,
        iter: 0,
    };

    /// A frame and iteration.
    pub fn new(frame_id: u64, iter: i64) -> FrameIter {
        FrameIter { frame_id, iter }
    }
}

impl fmt::Display for FrameIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.frame_id, self.iter)
    }
}

/// The static part of a rendezvous key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedKey {
    /// The sending device's full name.
    pub src_device: String,
    /// The sending device's incarnation (changes when a device restarts).
    pub src_incarnation: u64,
    /// The receiving device's full name.
    pub dst_device: String,
    /// The edge's name (TensorFlow: the producing tensor plus a suffix).
    pub edge_name: String,
    id: KeyId,
}

/// A live key's entry in the registry, shared by its clones; the registry forgets
/// the key when the last one is dropped.
#[derive(Clone, Debug)]
struct KeyId(Arc<Registered>);

impl PartialEq for KeyId {
    fn eq(&self, other: &KeyId) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for KeyId {}

#[derive(Debug)]
struct Registered {
    id: u64,
    /// The four parts, `;`-separated.
    prefix: Box<str>,
}

type Registry = HashMap<u64, Weak<Registered>>;

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The id of a key's four parts: FNV-1a over the bytes, then MurmurHash3's
/// finaliser to spread them over all 64 bits. Stable across processes and builds.
fn key_hash(prefix: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in prefix.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Registers a key with these four parts; `Internal` if a live key with other parts
/// has the same id.
fn intern(prefix: String) -> Result<KeyId> {
    let id = key_hash(&prefix);
    let mut r = registry();
    if let Some(k) = r.get(&id).and_then(Weak::upgrade) {
        if *k.prefix == *prefix {
            return Ok(KeyId(k));
        }
        return Err(Status::internal(format!(
            "rendezvous keys '{}' and '{prefix}' have the same hash {id:#x}",
            k.prefix
        )));
    }
    let k = Arc::new(Registered {
        id,
        prefix: prefix.into_boxed_str(),
    });
    // replaces the entry of a key whose last holder is being dropped, if any
    r.insert(id, Arc::downgrade(&k));
    Ok(KeyId(k))
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut r = registry();
        // The entry may already belong to a key registered again since this one's
        // last holder let go: remove it only if it is this key's.
        if r.get(&self.id)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), self))
        {
            r.remove(&self.id);
        }
    }
}

/// The number of distinct keys alive in this process (for leak tests).
pub fn live_keys() -> usize {
    registry().len()
}

impl ParsedKey {
    /// A key for an edge between two devices; `Internal` in the (2^-64) case that
    /// its id collides with a live key's.
    pub fn new(
        src_device: &str,
        src_incarnation: u64,
        dst_device: &str,
        edge_name: &str,
    ) -> Result<ParsedKey> {
        let prefix = format!("{src_device};{src_incarnation:016x};{dst_device};{edge_name}");
        Ok(ParsedKey {
            src_device: src_device.to_owned(),
            src_incarnation,
            dst_device: dst_device.to_owned(),
            edge_name: edge_name.to_owned(),
            id: intern(prefix)?,
        })
    }

    /// Parses TensorFlow's full key string, returning the key and its frame/iteration.
    pub fn parse(full: &str) -> Result<(ParsedKey, FrameIter)> {
        let parts: Vec<&str> = full.split(';').collect();
        if parts.len() != 5 {
            return Err(Status::invalid_argument(format!(
                "invalid rendezvous key '{full}': expected 5 ';'-separated parts"
            )));
        }
        let inc = u64::from_str_radix(parts[1], 16).map_err(|_| {
            Status::invalid_argument(format!("invalid incarnation in key '{full}'"))
        })?;
        let (f, i) = parts[4].split_once(':').ok_or_else(|| {
            Status::invalid_argument(format!("invalid frame:iter in key '{full}'"))
        })?;
        let fi = FrameIter {
            frame_id: f
                .parse()
                .map_err(|_| Status::invalid_argument(format!("invalid frame in key '{full}'")))?,
            iter: i.parse().map_err(|_| {
                Status::invalid_argument(format!("invalid iteration in key '{full}'"))
            })?,
        };
        Ok((ParsedKey::new(parts[0], inc, parts[2], parts[3])?, fi))
    }

    /// The id of the four parts: equal for every `ParsedKey` built from them, in
    /// any process; distinct among live keys.
    #[inline]
    pub fn id(&self) -> u64 {
        self.id.0.id
    }

    /// TensorFlow's full key string for this key in `fi`.
    pub fn full_key(&self, fi: FrameIter) -> String {
        format!(
            "{};{:016x};{};{};{}",
            self.src_device, self.src_incarnation, self.dst_device, self.edge_name, fi
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let k = ParsedKey::new(
            "/job:a/replica:0/task:0/device:CPU:0",
            0xab,
            "/job:a/replica:0/task:0/device:CPU:1",
            "x:0",
        )
        .unwrap();
        let full = k.full_key(FrameIter::new(3, 7));
        assert_eq!(
            full,
            "/job:a/replica:0/task:0/device:CPU:0;00000000000000ab;/job:a/replica:0/task:0/device:CPU:1;x:0;3:7"
        );
        let (p, fi) = ParsedKey::parse(&full).unwrap();
        assert_eq!(p, k);
        assert_eq!(p.id(), k.id());
        assert_eq!(fi, FrameIter::new(3, 7));
        let other = ParsedKey::new("a", 1, "b", "y:0").unwrap();
        assert_ne!(other.id(), k.id());
        assert!(ParsedKey::parse("a;b;c").is_err());
        assert!(ParsedKey::parse("a;zz;c;d;0:0").is_err());
    }

    /// Ids depend on the parts alone: a key built after every earlier one was
    /// dropped still meets them (a Recv kernel built after its Send was dropped).
    #[test]
    fn ids_do_not_depend_on_what_is_alive() {
        let name = "ids_do_not_depend_on_what_is_alive";
        let id = ParsedKey::new("a", 1, "b", name).unwrap().id();
        assert_eq!(ParsedKey::new("a", 1, "b", name).unwrap().id(), id);
        assert_eq!(id, key_hash(&format!("a;0000000000000001;b;{name}")));
        assert_ne!(ParsedKey::new("a", 2, "b", name).unwrap().id(), id);
    }

    #[test]
    fn keys_are_forgotten_with_their_last_holder() {
        let name = "keys_are_forgotten_with_their_last_holder";
        let id = key_hash(&format!("a;0000000000000001;b;{name}"));
        let registered = || registry().contains_key(&id);
        let k = ParsedKey::new("a", 1, "b", name).unwrap();
        let again = ParsedKey::new("a", 1, "b", name).unwrap();
        let copy = k.clone();
        drop(k);
        drop(again);
        assert!(registered(), "a clone still holds the key");
        drop(copy);
        assert!(!registered());
    }

    #[test]
    fn a_hash_collision_between_live_keys_is_an_error() {
        // plant a live key with another key's id
        let prefix = "a;0000000000000001;b;a_hash_collision_between_live_keys_is_an_error";
        let planted = Arc::new(Registered {
            id: key_hash(prefix),
            prefix: "some;other;key;entirely".into(),
        });
        registry().insert(planted.id, Arc::downgrade(&planted));
        let e = ParsedKey::parse(&format!("{prefix};0:0")).unwrap_err();
        assert_eq!(e.code(), graph::Code::Internal);
        assert!(e.message().contains("same hash"), "{e}");
        drop(planted);
        assert!(ParsedKey::parse(&format!("{prefix};0:0")).is_ok());
    }

    #[test]
    fn a_key_dropped_while_registered_again_keeps_the_new_entry() {
        let name = "a_key_dropped_while_registered_again";
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        let k = ParsedKey::new("a", 1, "b", name).unwrap();
                        let again = ParsedKey::new("a", 1, "b", name).unwrap();
                        assert_eq!(k.id(), again.id());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(!registry().contains_key(&key_hash(&format!("a;0000000000000001;b;{name}"))));
    }
}
