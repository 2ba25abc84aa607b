//! What the explain endpoint remembers of the API server's answers: a map with a size bound
//! and a lifetime per entry, so a repeated token (or a repeated question about one object)
//! costs the API server nothing until its answer expires.
//!
//! Keys are SHA-256 digests ([`digest`]): a token is never kept, and a key is 32 bytes whatever
//! the request carried. Time is tokio's clock, so tests can pause it.

use std::collections::HashMap;

use sha2::{Digest as _, Sha256};
use tokio::time::{Duration, Instant};

/// A SHA-256 digest: the key of every entry.
pub type Digest = [u8; 32];

/// The digest of `parts`, each one length-prefixed, so `("ab", "c")` and `("a", "bc")`
/// differ.
pub fn digest(parts: &[&[u8]]) -> Digest {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// At most `capacity` entries, each forgotten `ttl` after it was written.
#[derive(Debug)]
pub struct TtlCache<V> {
    entries: HashMap<Digest, (V, Instant)>,
    capacity: usize,
}

impl<V: Clone> TtlCache<V> {
    /// An empty cache of at most `capacity` entries (0: it remembers nothing).
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// The value under `key`, unless it expired (then it is dropped).
    pub fn get(&mut self, key: &Digest) -> Option<V> {
        let now = Instant::now();
        match self.entries.get(key) {
            Some((value, expires)) if *expires > now => Some(value.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers `value` under `key` for `ttl`. When the cache is full, expired entries go
    /// first, then the one closest to expiring: the bound holds whatever is inserted.
    pub fn insert(&mut self, key: Digest, value: V, ttl: Duration) {
        if self.capacity == 0 {
            return;
        }
        let now = Instant::now();
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, expires)| *expires > now);
            if self.entries.len() >= self.capacity
                && let Some(soonest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| *k)
            {
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    /// Entries held, expired ones included until they are seen.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Digest {
        digest(&[&[n]])
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_is_forgotten_when_its_time_is_up() {
        let mut cache = TtlCache::new(4);
        cache.insert(key(1), "alice", Duration::from_secs(60));
        cache.insert(key(2), "nobody", Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(cache.get(&key(2)), Some("nobody"));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.get(&key(2)), None);
        assert_eq!(cache.get(&key(1)), Some("alice"));
        assert_eq!(cache.len(), 1, "the expired entry is dropped when seen");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_expired_entries_then_the_one_closest_to_expiring() {
        let mut cache = TtlCache::new(3);
        cache.insert(key(1), 1, Duration::from_secs(5));
        cache.insert(key(2), 2, Duration::from_secs(60));
        cache.insert(key(3), 3, Duration::from_secs(30));
        // Full, nothing expired: 1 expires first and goes.
        cache.insert(key(4), 4, Duration::from_secs(60));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&key(1)), None);
        // 3 has expired by now: it goes, and 2 and 4 stay.
        tokio::time::advance(Duration::from_secs(31)).await;
        cache.insert(key(5), 5, Duration::from_secs(60));
        assert_eq!(
            [2, 4, 5].map(|n| cache.get(&key(n))),
            [Some(2), Some(4), Some(5)]
        );
        // A flood of new keys never grows it.
        for n in 10..=250 {
            cache.insert(key(n), n, Duration::from_secs(10));
        }
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn digests_are_length_prefixed_and_a_zero_capacity_remembers_nothing() {
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
        let mut cache = TtlCache::new(0);
        cache.insert(key(1), (), Duration::from_secs(60));
        assert!(cache.is_empty());
    }
}
