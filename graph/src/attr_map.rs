//! [`AttrMap`]: a node's attributes, keyed by name, in name order.
//!
//! A node has a handful of attributes, and a graph has as many attribute maps as
//! nodes (several times over while a step compiles), so the map is a sorted
//! vector rather than a `BTreeMap`: a `BTreeMap` allocates a whole node of eleven
//! slots (about a kilobyte here) for a single attribute, and cloning it walks that
//! node. Lookups are binary searches; iteration is in name order, as before, so
//! everything that prints, hashes or compares attributes sees the same order.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::AttrValue;

/// A node's attributes by name; see the module docs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttrMap {
    /// Sorted by name, names unique.
    entries: Vec<(String, AttrValue)>,
}

impl AttrMap {
    /// An empty map.
    pub const fn new() -> AttrMap {
        AttrMap {
            entries: Vec::new(),
        }
    }

    fn position(&self, name: &str) -> std::result::Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The number of attributes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The attribute `name`.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.position(name).ok().map(|i| &self.entries[i].1)
    }

    /// The attribute `name`, mutably.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut AttrValue> {
        self.position(name).ok().map(|i| &mut self.entries[i].1)
    }

    /// True when `name` is set.
    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Sets `name`; returns the value it replaced.
    pub fn insert(&mut self, name: String, value: AttrValue) -> Option<AttrValue> {
        match self.position(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (name, value));
                None
            }
        }
    }

    /// Sets `name` unless it is set; returns its value either way.
    pub fn get_or_insert(&mut self, name: &str, value: AttrValue) -> &mut AttrValue {
        let i = match self.position(name) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (name.to_owned(), value));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Removes `name`; returns its value.
    pub fn remove(&mut self, name: &str) -> Option<AttrValue> {
        self.position(name).ok().map(|i| self.entries.remove(i).1)
    }

    /// Names and values, in name order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.entries.iter())
    }

    /// Names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator + '_ {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Values, in name order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &AttrValue> + ExactSizeIterator + '_ {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Values, in name order, mutably.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut AttrValue> + '_ {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// Keeps the attributes `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut AttrValue) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }
}

/// Iterator over an [`AttrMap`]'s names and values, in name order.
#[derive(Clone, Debug)]
pub struct Iter<'a>(std::slice::Iter<'a, (String, AttrValue)>);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a AttrValue);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k, v))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a AttrMap {
    type Item = (&'a String, &'a AttrValue);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for AttrMap {
    type Item = (String, AttrValue);
    type IntoIter = std::vec::IntoIter<(String, AttrValue)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl Extend<(String, AttrValue)> for AttrMap {
    fn extend<I: IntoIterator<Item = (String, AttrValue)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl FromIterator<(String, AttrValue)> for AttrMap {
    /// As a map collects: a name given twice keeps its last value.
    fn from_iter<I: IntoIterator<Item = (String, AttrValue)>>(iter: I) -> AttrMap {
        let mut entries: Vec<(String, AttrValue)> = iter.into_iter().collect();
        // Stable, so that equal names keep their order and the last one wins.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, AttrValue)> = Vec::with_capacity(entries.len());
        for e in entries {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        AttrMap { entries: out }
    }
}

impl<const N: usize> From<[(String, AttrValue); N]> for AttrMap {
    fn from(a: [(String, AttrValue); N]) -> AttrMap {
        a.into_iter().collect()
    }
}

impl std::ops::Index<&str> for AttrMap {
    type Output = AttrValue;

    /// The attribute `name`; panics when it is not set, as a map's index does.
    fn index(&self, name: &str) -> &AttrValue {
        match self.get(name) {
            Some(v) => v,
            None => panic!("no attribute '{name}'"),
        }
    }
}

impl Serialize for AttrMap {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for AttrMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<AttrMap, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = AttrMap;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of attribute names to values")
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                mut access: A,
            ) -> std::result::Result<AttrMap, A::Error> {
                let mut m = AttrMap::new();
                while let Some((k, v)) = access.next_entry::<String, AttrValue>()? {
                    m.insert(k, v);
                }
                Ok(m)
            }
        }
        d.deserialize_map(MapVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_names_sorted_and_unique() {
        let mut m = AttrMap::new();
        assert_eq!(m.insert("b".into(), AttrValue::I(1)), None);
        assert_eq!(m.insert("a".into(), AttrValue::I(2)), None);
        assert_eq!(m.insert("c".into(), AttrValue::I(3)), None);
        assert_eq!(m.insert("b".into(), AttrValue::I(4)), Some(AttrValue::I(1)));
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(m.get("b"), Some(&AttrValue::I(4)));
        assert_eq!(m["c"], AttrValue::I(3));
        assert!(m.get("d").is_none());
        assert_eq!(m.remove("a"), Some(AttrValue::I(2)));
        assert!(!m.contains_key("a"));
        assert_eq!(m.len(), 2);
        *m.get_or_insert("b", AttrValue::I(9)) = AttrValue::I(5);
        m.get_or_insert("a", AttrValue::I(6));
        assert_eq!(
            m.iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect::<Vec<_>>(),
            [
                ("a", AttrValue::I(6)),
                ("b", AttrValue::I(5)),
                ("c", AttrValue::I(3))
            ]
        );
    }

    #[test]
    fn collecting_keeps_the_last_value_of_a_name() {
        let m: AttrMap = [
            ("z".to_owned(), AttrValue::I(1)),
            ("a".to_owned(), AttrValue::I(2)),
            ("z".to_owned(), AttrValue::I(3)),
        ]
        .into();
        assert_eq!(m.len(), 2);
        assert_eq!(m["z"], AttrValue::I(3));
        assert_eq!(m.keys().next().map(String::as_str), Some("a"));
    }

    #[test]
    fn serializes_as_a_map_in_name_order() {
        let m: AttrMap = [
            ("b".to_owned(), AttrValue::I(1)),
            ("a".to_owned(), AttrValue::B(true)),
        ]
        .into();
        let json = serde_json::to_string(&m).unwrap();
        let reference: std::collections::BTreeMap<&str, AttrValue> =
            [("a", AttrValue::B(true)), ("b", AttrValue::I(1))].into();
        assert_eq!(json, serde_json::to_string(&reference).unwrap());
        let back: AttrMap = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }
}
