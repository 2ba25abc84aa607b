//! Operator shards (`--shards=auto`): which replica owns a ScaledObject or ScaledJob.
//!
//! Every operator replica holds a `coordination.k8s.io/v1` Lease of its own named
//! [`LEASE_PREFIX`]`<identity>` and labelled [`LEASE_LABEL`]; the live members are the Leases
//! that have not expired. An object belongs to the member that a consistent-hash [`Ring`] of
//! the live members gives for its `namespace/name`. The operator (which writes only for the
//! objects it owns) and the metrics-apiserver (which sends each metric read to the owner) read
//! the same Leases through [`LiveLeases`] and build the same ring, so both agree without talking
//! to each other.
//!
//! # The hash
//! FNV-1a (64 bit) followed by the MurmurHash3 finalizer, written here. Both processes, of
//! possibly different builds, must place every member and every object at the same point:
//! `std`'s `DefaultHasher` (SipHash with unspecified keys and algorithm) may change between Rust
//! releases, and a crate would be a dependency for twenty lines. FNV alone spreads similar
//! strings (`a-1`, `a-2`) poorly over the high bits; the finalizer fixes that. The test vectors
//! below pin the values, so a change breaks the build instead of a mixed-version rollout.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The name of each replica's Lease is this prefix and its identity (made a valid name).
pub const LEASE_PREFIX: &str = "keda-rs-operator-shard-";
/// The label every shard Lease carries (value `"true"`); the members are listed by it.
pub const LEASE_LABEL: &str = "keda-rs.sh/operator-shard";
/// The annotation of a shard Lease giving `host:port` of the replica's metric service.
pub const ADDRESS_ANNOTATION: &str = "keda-rs.sh/metrics-service-address";
/// Points of each member on the ring. With 160 points per member the largest share of three
/// members stays within about 15% of a third (tested below), and a ring of 100 members is
/// 16,000 points (a binary search of 14 steps).
pub const VIRTUAL_NODES: u32 = 160;

/// The stable 64-bit hash of `bytes` (FNV-1a, then MurmurHash3's `fmix64`).
pub fn hash64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The Lease name of the replica `identity`: [`LEASE_PREFIX`] and the identity lowercased,
/// every character that a Kubernetes name cannot hold replaced by `-`, at most 253 characters.
pub fn lease_name(identity: &str) -> String {
    let mut name = String::from(LEASE_PREFIX);
    for c in identity.chars() {
        let c = c.to_ascii_lowercase();
        name.push(if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
            c
        } else {
            '-'
        });
    }
    name.truncate(253);
    while name.ends_with(['-', '.']) {
        name.pop();
    }
    name
}

/// A consistent-hash ring of members (replica identities).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    members: Vec<String>,
    /// (point, index into `members`), sorted.
    points: Vec<(u64, usize)>,
}

impl Ring {
    /// The ring of `members` (duplicates and order do not matter).
    pub fn new<I, S>(members: I) -> Ring
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort();
        members.dedup();
        let mut points = Vec::with_capacity(members.len() * VIRTUAL_NODES as usize);
        for (index, member) in members.iter().enumerate() {
            for v in 0..VIRTUAL_NODES {
                points.push((hash64(format!("{member}#{v}").as_bytes()), index));
            }
        }
        // Equal points (never seen, but possible) are ordered by member name: every process
        // builds the same ring.
        points.sort_unstable();
        Ring { members, points }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// Whether the ring has no member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member that owns the object `namespace/name`: the first point at or after the
    /// object's hash, going round. `None` on an empty ring.
    pub fn owner(&self, namespace: &str, name: &str) -> Option<&str> {
        let key = object_key(namespace, name);
        let at = self.points.partition_point(|(point, _)| *point < key);
        let (_, index) = self.points.get(at).or_else(|| self.points.first())?;
        self.members.get(*index).map(String::as_str)
    }
}

/// The point of the object `namespace/name` on the ring.
pub fn object_key(namespace: &str, name: &str) -> u64 {
    hash64(format!("{namespace}/{name}").as_bytes())
}

/// One shard Lease as read from the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The Lease's name.
    pub name: String,
    /// `spec.holderIdentity`; empty or absent: released.
    pub holder: Option<String>,
    /// `metadata.resourceVersion`: a change means the holder renewed.
    pub resource_version: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// [`ADDRESS_ANNOTATION`].
    pub address: Option<String>,
}

impl LeaseRecord {
    /// The record of `lease`; `fallback` when the Lease gives no duration.
    pub fn from_lease(
        lease: &k8s_openapi::api::coordination::v1::Lease,
        fallback: Duration,
    ) -> LeaseRecord {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaseRecord {
            name: lease.metadata.name.clone().unwrap_or_default(),
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            resource_version: lease.metadata.resource_version.clone(),
            duration: spec
                .lease_duration_seconds
                .filter(|s| *s > 0)
                .map_or(fallback, |s| {
                    Duration::from_secs(u64::from(s.unsigned_abs()))
                }),
            address: lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ADDRESS_ANNOTATION).cloned()),
        }
    }
}

/// A live member: its identity and where its metric service is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Member {
    pub identity: String,
    pub address: Option<String>,
}

/// Which shard Leases are live, as client-go's leader election judges a Lease: expiry is
/// measured on the reader's own monotonic clock from the moment it last saw the Lease change
/// (its resourceVersion), never by comparing `renewTime` with the local wall clock, so clock
/// skew between nodes cannot make a dead replica live or a live one dead.
///
/// # Caveats
/// A reader that has just started sees every Lease as just changed: a replica that died
/// before is live for one lease duration more in its eyes. That only delays taking its
/// objects; it never lets two replicas write.
#[derive(Debug, Default)]
pub struct LiveLeases {
    /// name -> (resourceVersion, when it was first seen with that version).
    observed: HashMap<String, (Option<String>, Instant)>,
}

impl LiveLeases {
    /// Takes a full list of the shard Leases read at `now` and returns the live members (by
    /// identity) and the names of Leases not seen to change for `stale_after` (garbage).
    pub fn observe(
        &mut self,
        leases: &[LeaseRecord],
        now: Instant,
        stale_after: Duration,
    ) -> (Vec<Member>, Vec<LeaseRecord>) {
        let mut seen = HashMap::with_capacity(leases.len());
        let mut live = BTreeMap::new();
        let mut stale = Vec::new();
        for lease in leases {
            let at = match self.observed.get(&lease.name) {
                Some((version, at)) if *version == lease.resource_version => *at,
                _ => now,
            };
            seen.insert(lease.name.clone(), (lease.resource_version.clone(), at));
            let age = now.saturating_duration_since(at);
            if let Some(holder) = &lease.holder
                && age < lease.duration
            {
                live.insert(holder.clone(), lease.address.clone());
            } else if age >= stale_after {
                stale.push(lease.clone());
            }
        }
        // A Lease that is gone (deleted at a graceful shutdown) is forgotten.
        self.observed = seen;
        let members = live
            .into_iter()
            .map(|(identity, address)| Member { identity, address })
            .collect();
        (members, stale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|i| (format!("ns-{}", i % 37), format!("object-{i}")))
            .collect()
    }

    #[test]
    fn the_hash_is_pinned_so_every_build_places_members_and_objects_alike() {
        // FNV-1a of "" is its offset basis; the finalizer mixes it. The values were checked
        // against an independent implementation (a few lines of Python).
        assert_eq!(hash64(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(hash64(b"apps/worker"), 0xb5f7_c310_c95f_c202);
        assert_ne!(hash64(b"a-1"), hash64(b"a-2"));
    }

    #[test]
    fn three_members_share_ten_thousand_objects_about_evenly() {
        let ring = Ring::new(["operator-a", "operator-b", "operator-c"]);
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (ns, name) in keys(10_000) {
            *counts
                .entry(ring.owner(&ns, &name).expect("an owner"))
                .or_default() += 1;
        }
        assert_eq!(counts.len(), 3);
        for (member, count) in counts {
            // A third is 3,333; within 15%.
            assert!((2_833..=3_833).contains(&count), "{member}: {count}");
        }
    }

    #[test]
    fn a_fourth_member_takes_about_a_quarter_and_only_from_the_others() {
        let three = Ring::new(["operator-a", "operator-b", "operator-c"]);
        let four = Ring::new(["operator-a", "operator-b", "operator-c", "operator-d"]);
        let mut moved = 0;
        for (ns, name) in keys(10_000) {
            let before = three.owner(&ns, &name).expect("owner");
            let after = four.owner(&ns, &name).expect("owner");
            if before != after {
                moved += 1;
                assert_eq!(after, "operator-d", "{ns}/{name} moved between old members");
            }
        }
        // A quarter is 2,500.
        assert!((1_900..=3_100).contains(&moved), "{moved} moved");
    }

    #[test]
    fn a_member_that_leaves_gives_only_its_own_objects_away() {
        let three = Ring::new(["operator-a", "operator-b", "operator-c"]);
        let two = Ring::new(["operator-a", "operator-c"]);
        for (ns, name) in keys(5_000) {
            let before = three.owner(&ns, &name).expect("owner");
            let after = two.owner(&ns, &name).expect("owner");
            if before != "operator-b" {
                assert_eq!(before, after, "{ns}/{name} moved though its owner stayed");
            }
        }
    }

    #[test]
    fn the_ring_ignores_order_and_duplicates_and_an_empty_ring_owns_nothing() {
        let a = Ring::new(["x", "y", "z"]);
        let b = Ring::new(["z", "x", "y", "x"]);
        assert_eq!(a, b);
        assert_eq!(Ring::default().owner("ns", "name"), None);
        assert_eq!(Ring::new(["only"]).owner("ns", "name"), Some("only"));
    }

    #[test]
    fn lease_names_are_valid_kubernetes_names() {
        assert_eq!(
            lease_name("keda-operator-7d9f-x2"),
            "keda-rs-operator-shard-keda-operator-7d9f-x2"
        );
        assert_eq!(lease_name("Host_123"), "keda-rs-operator-shard-host-123");
        assert!(lease_name(&"a".repeat(400)).len() <= 253);
    }

    fn record(name: &str, holder: Option<&str>, version: &str) -> LeaseRecord {
        LeaseRecord {
            name: name.to_string(),
            holder: holder.map(str::to_string),
            resource_version: Some(version.to_string()),
            duration: Duration::from_secs(15),
            address: Some(format!("{name}:9666")),
        }
    }

    fn identities(members: &[Member]) -> Vec<&str> {
        members.iter().map(|m| m.identity.as_str()).collect()
    }

    #[test]
    fn a_lease_is_live_until_it_has_not_changed_for_its_duration_on_the_reader_s_clock() {
        let mut live = LiveLeases::default();
        let t0 = Instant::now();
        let stale = Duration::from_secs(60);
        let (members, _) = live.observe(
            &[record("l-a", Some("a"), "1"), record("l-b", Some("b"), "1")],
            t0,
            stale,
        );
        assert_eq!(identities(&members), ["a", "b"]);
        // a renews, b does not.
        let t14 = t0 + Duration::from_secs(14);
        let (members, _) = live.observe(
            &[record("l-a", Some("a"), "2"), record("l-b", Some("b"), "1")],
            t14,
            stale,
        );
        assert_eq!(identities(&members), ["a", "b"]);
        let t15 = t0 + Duration::from_secs(15);
        let (members, garbage) = live.observe(
            &[record("l-a", Some("a"), "2"), record("l-b", Some("b"), "1")],
            t15,
            stale,
        );
        assert_eq!(identities(&members), ["a"]);
        assert!(garbage.is_empty());
        // Unchanged for a minute: garbage.
        let (_, garbage) = live.observe(
            &[record("l-a", Some("a"), "3"), record("l-b", Some("b"), "1")],
            t0 + stale,
            stale,
        );
        assert_eq!(garbage.len(), 1);
        assert_eq!(garbage[0].name, "l-b");
    }

    #[test]
    fn a_released_or_deleted_lease_is_not_a_member_at_once() {
        let mut live = LiveLeases::default();
        let t0 = Instant::now();
        let stale = Duration::from_secs(60);
        let _ = live.observe(
            &[record("l-a", Some("a"), "1"), record("l-b", Some("b"), "1")],
            t0,
            stale,
        );
        let (members, _) = live.observe(&[record("l-a", None, "2")], t0, stale);
        assert!(members.is_empty());
    }
}
