//! [`MetricMap`]: what a scale loop keeps per External metric of one object.
//!
//! An object has one metric per trigger, most often one. A `BTreeMap` allocates a whole node
//! (room for 11 entries) for the first one: about 1.9 KB for a [`MetricReading`] entry, kept
//! several times per object (the loop's memory and the last poll's snapshot), which made
//! these maps the largest item of an idle scale loop at 100,000 objects. A vector sorted by
//! name holds exactly its entries and iterates in the same order.
//!
//! [`MetricReading`]: crate::scaled_object::snapshot::MetricReading

/// Values by External metric name, sorted by name (the iteration order of a `BTreeMap`), with
/// room for exactly the entries it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricMap<V>(Vec<(String, V)>);

impl<V> Default for MetricMap<V> {
    fn default() -> Self {
        MetricMap(Vec::new())
    }
}

impl<V> MetricMap<V> {
    /// An empty map (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    /// Sets the value of `name`, returning the one it replaces.
    pub fn insert(&mut self, name: String, value: V) -> Option<V> {
        match self.position(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                // Exactly one more slot: maps stay as small as their entries.
                self.0.reserve_exact(1);
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The entries, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The values, by name.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<V> Extend<(String, V)> for MetricMap<V> {
    fn extend<I: IntoIterator<Item = (String, V)>>(&mut self, entries: I) {
        for (name, value) in entries {
            self.insert(name, value);
        }
    }
}

impl<V> FromIterator<(String, V)> for MetricMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(entries: I) -> Self {
        let mut map = MetricMap::new();
        map.extend(entries);
        map
    }
}

impl<V> IntoIterator for MetricMap<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_keeps_names_sorted_replaces_and_holds_no_spare_room() {
        let mut map = MetricMap::new();
        assert_eq!(map.insert("s1-b".to_string(), 1), None);
        assert_eq!(map.insert("s0-a".to_string(), 2), None);
        assert_eq!(map.insert("s2-c".to_string(), 3), None);
        assert_eq!(map.insert("s1-b".to_string(), 4), Some(1));
        let names: Vec<&String> = map.iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["s0-a", "s1-b", "s2-c"]);
        assert_eq!(map.values().copied().collect::<Vec<_>>(), [2, 4, 3]);
        assert_eq!(map.get("s1-b"), Some(&4));
        assert_eq!(map.get("s9"), None);
        assert_eq!(map.len(), 3);
        assert_eq!(map.0.capacity(), 3, "no room beyond the entries");
        let mut other: MetricMap<i32> = [("s2-c".to_string(), 9)].into_iter().collect();
        other.extend(map.clone());
        assert_eq!(other, map, "extend replaces and adds");
    }
}
