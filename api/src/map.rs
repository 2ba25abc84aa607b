//! [`CompactMap`]: a map of a few entries in one exact-size allocation, for the maps of every
//! object the operator caches (a trigger's `metadata`, `status.health`,
//! `status.triggersActivity`).
//!
//! A `BTreeMap` allocates a whole node of 11 entries for its first one: `status.health` with
//! one metric took 632 bytes, `status.triggersActivity` 288, a trigger's three parameters 540.
//! A `CompactMap` keeps its entries sorted by key in a vector of their number, and is the same
//! JSON in and out (an object, keys in order; a repeated key keeps its last value) with the
//! same schema as the `BTreeMap` it replaces.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// A map sorted by key, without spare room. Lookups are binary searches; an insert moves the
/// entries after it, which is cheap for the handful of entries a status holds.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CompactMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for CompactMap<K, V> {
    fn default() -> Self {
        CompactMap(Vec::new())
    }
}

impl<K: Ord, V> CompactMap<K, V> {
    /// An empty map (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    fn position<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// The value of `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).is_ok()
    }

    /// Sets the value of `key`; returns the one it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`, to change it.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let i = self.position(key).ok()?;
        Some(&mut self.0[i].1)
    }

    /// Removes `key`; returns its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let i = self.position(key).ok()?;
        let (_, value) = self.0.remove(i);
        self.0.shrink_to_fit();
        Some(value)
    }
}

impl<K, V> CompactMap<K, V> {
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Removes every entry (and the room they took).
    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }

    /// Whether the map has no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries, by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &K> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The values, by key.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for CompactMap<K, V> {
    /// As a `BTreeMap` collects: sorted by key, a repeated key keeps its last value.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(K, V)> = iter.into_iter().collect();
        // Stable: of equal keys, the last one given stays last, and is the one kept.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(K, V)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match kept.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => kept.push(entry),
            }
        }
        kept.shrink_to_fit();
        CompactMap(kept)
    }
}

impl<K: Ord, V> Extend<(K, V)> for CompactMap<K, V> {
    /// As [`insert`](CompactMap::insert) for each entry, in order.
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K, V, Q> std::ops::Index<&Q> for CompactMap<K, V>
where
    K: Ord + Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = V;

    /// The value of `key`; panics when there is none, as a `BTreeMap` does.
    fn index(&self, key: &Q) -> &V {
        match self.get(key) {
            Some(v) => v,
            None => panic!("no entry for the key in CompactMap"),
        }
    }
}

impl<K: Ord, V, const N: usize> From<[(K, V); N]> for CompactMap<K, V> {
    fn from(entries: [(K, V); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl<K, V> IntoIterator for CompactMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, K, V> IntoIterator for &'a CompactMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for CompactMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Serialize, V: Serialize> Serialize for CompactMap<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K, V> Deserialize<'de> for CompactMap<K, V>
where
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<K, V>(PhantomData<(K, V)>);

        impl<'de, K, V> Visitor<'de> for Entries<K, V>
        where
            K: Deserialize<'de> + Ord,
            V: Deserialize<'de>,
        {
            type Value = CompactMap<K, V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                // The hint is the length for formats that know it; bounded, as a map's length
                // comes from the input.
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(64));
                while let Some(entry) = access.next_entry()? {
                    entries.push(entry);
                }
                Ok(entries.into_iter().collect())
            }
        }

        deserializer.deserialize_map(Entries(PhantomData))
    }
}

impl<K: JsonSchema, V: JsonSchema> JsonSchema for CompactMap<K, V> {
    fn inline_schema() -> bool {
        <std::collections::BTreeMap<K, V> as JsonSchema>::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        <std::collections::BTreeMap<K, V> as JsonSchema>::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        <std::collections::BTreeMap<K, V> as JsonSchema>::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <std::collections::BTreeMap<K, V> as JsonSchema>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_same_json_as_a_btree_map_in_and_out() {
        let cases = [
            r#"{}"#,
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"s1-x":3,"s0-y":4,"s10":5}"#,
        ];
        for json in cases {
            let compact: CompactMap<String, i32> = serde_json::from_str(json).expect(json);
            let tree: BTreeMap<String, i32> = serde_json::from_str(json).expect(json);
            assert_eq!(
                serde_json::to_string(&compact).expect("json"),
                serde_json::to_string(&tree).expect("json"),
                "{json}"
            );
            assert_eq!(compact.len(), tree.len(), "{json}");
            for (k, v) in &tree {
                assert_eq!(compact.get(k.as_str()), Some(v), "{json}: {k}");
            }
        }
        assert!(serde_json::from_str::<CompactMap<String, i32>>("[1]").is_err());
        assert!(serde_json::from_str::<CompactMap<String, i32>>(r#"{"a":"x"}"#).is_err());
    }

    #[test]
    fn entries_stay_sorted_and_take_exactly_their_room() {
        let mut m: CompactMap<String, i32> = serde_json::from_str(r#"{"c":3,"a":1}"#).expect("map");
        assert_eq!(m.0.capacity(), 2);
        assert_eq!(m.insert("b".into(), 2), None);
        assert_eq!(m.insert("a".into(), 10), Some(1));
        assert_eq!(
            m.keys().map(String::as_str).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [10, 2, 3]);
        assert_eq!(m.0.capacity(), 3);
        assert!(m.contains_key("b"));
        assert_eq!(m.remove("b"), Some(2));
        assert_eq!(m.remove("b"), None);
        assert_eq!(m.0.capacity(), 2);
        let collected: CompactMap<&str, i32> = [("z", 1), ("y", 2), ("z", 3)].into_iter().collect();
        assert_eq!(
            collected.iter().collect::<Vec<_>>(),
            [(&"y", &2), (&"z", &3)]
        );
        assert_eq!(format!("{collected:?}"), r#"{"y": 2, "z": 3}"#);
    }

    #[test]
    fn the_schema_is_the_btree_map_s() {
        let compact = schemars::schema_for!(CompactMap<String, i32>);
        let tree = schemars::schema_for!(BTreeMap<String, i32>);
        assert_eq!(compact, tree);
    }
}
