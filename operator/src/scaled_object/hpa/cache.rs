//! What the operator keeps of each HPA from its watch ([`HpaCache`]): a fingerprint of what
//! [`super::ensure_hpa`] compares, hashes of labels and annotations, and the `ScalingActive`
//! condition, so that an unchanged HPA costs no API call and little memory.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;

use super::spec::SCALING_ACTIVE;

fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// A fingerprint of the spec and owner references that [`ensure_hpa`](super::ensure_hpa)
/// compares. Equal for two HPAs exactly when those are equal, as far as a 64-bit hash tells;
/// compared only within one process.
pub fn hpa_fingerprint(hpa: &HorizontalPodAutoscaler) -> u64 {
    let compared = serde_json::json!([hpa.spec, hpa.metadata.owner_references]);
    hash_of(compared.to_string().as_str())
}

/// (hash of the key, hash of the value) of every entry of `map`, sorted.
fn hashed(map: Option<&std::collections::BTreeMap<String, String>>) -> Box<[(u64, u64)]> {
    let mut pairs: Vec<(u64, u64)> = map
        .into_iter()
        .flatten()
        .map(|(k, v)| (hash_of(k.as_str()), hash_of(v.as_str())))
        .collect();
    pairs.sort_unstable();
    pairs.into_boxed_slice()
}

/// What the operator keeps of one HPA: about a hundred bytes and its `ScalingActive`
/// condition, where a trimmed `HorizontalPodAutoscaler` with its hashes in annotations took
/// about two kilobytes.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedHpa {
    /// [`hpa_fingerprint`].
    fingerprint: u64,
    /// Hashes of each label's key and value, sorted.
    labels: Box<[(u64, u64)]>,
    /// Hashes of each annotation's key and value, sorted.
    annotations: Box<[(u64, u64)]>,
    /// The `ScalingActive` condition, for [`hpa_health`](super::hpa_health).
    scaling_active: Option<Box<HorizontalPodAutoscalerCondition>>,
}

impl CachedHpa {
    /// What is kept of `hpa`.
    pub fn of(hpa: &HorizontalPodAutoscaler) -> CachedHpa {
        CachedHpa {
            fingerprint: hpa_fingerprint(hpa),
            labels: hashed(hpa.metadata.labels.as_ref()),
            annotations: hashed(hpa.metadata.annotations.as_ref()),
            scaling_active: hpa
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == SCALING_ACTIVE))
                .map(|c| Box::new(c.clone())),
        }
    }

    /// The HPA's `ScalingActive` condition, when it has one.
    pub fn scaling_active(&self) -> Option<&HorizontalPodAutoscalerCondition> {
        self.scaling_active.as_deref()
    }
}

/// Whether `kept` holds every entry of `wanted` with the same value.
fn holds(kept: &[(u64, u64)], wanted: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    wanted.into_iter().flatten().all(|(k, v)| {
        let key = hash_of(k.as_str());
        kept.binary_search_by_key(&key, |(k, _)| *k)
            .is_ok_and(|i| kept[i].1 == hash_of(v.as_str()))
    })
}

/// Whether `cached` already is what `desired` asks for: the same spec and owner references,
/// and every label and annotation `desired` sets with the same value (others, added by other
/// tools, are not compared: [`hpa_differs`](super::hpa_differs)). A spec the API server
/// defaulted does not match; [`ensure_hpa`](super::ensure_hpa) then reads the HPA and compares
/// as KEDA does.
pub fn cached_matches(cached: &CachedHpa, desired: &HorizontalPodAutoscaler) -> bool {
    cached.fingerprint == hpa_fingerprint(desired)
        && holds(&cached.labels, desired.metadata.labels.as_ref())
        && holds(&cached.annotations, desired.metadata.annotations.as_ref())
}

/// The HPAs the controller watches, by namespace and name, as [`CachedHpa`]s. Fed by the
/// controller's HPA watch ([`HpaCache::apply`]); cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct HpaCache {
    inner: Arc<RwLock<Entries>>,
}

/// A namespace and a name.
type Name = (Box<str>, Box<str>);

#[derive(Debug, Default)]
struct Entries {
    /// Each HPA and the epoch of the list that last showed it.
    by_name: HashMap<Name, (Arc<CachedHpa>, u32)>,
    /// Bumped by every (re-)list: what a list did not show keeps an older epoch and is
    /// removed at its end (objects are replaced in place).
    epoch: u32,
}

fn key_of(hpa: &HorizontalPodAutoscaler) -> Name {
    (
        hpa.metadata.namespace.as_deref().unwrap_or_default().into(),
        hpa.metadata.name.as_deref().unwrap_or_default().into(),
    )
}

impl HpaCache {
    /// Applies one event of the HPA watch.
    pub fn apply(&self, event: &watcher::Event<HorizontalPodAutoscaler>) {
        let mut entries = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Init => entries.epoch = entries.epoch.wrapping_add(1),
            watcher::Event::InitApply(hpa) | watcher::Event::Apply(hpa) => {
                let epoch = entries.epoch;
                entries
                    .by_name
                    .insert(key_of(hpa), (Arc::new(CachedHpa::of(hpa)), epoch));
            }
            watcher::Event::Delete(hpa) => {
                entries.by_name.remove(&key_of(hpa));
            }
            watcher::Event::InitDone => {
                let epoch = entries.epoch;
                entries.by_name.retain(|_, (_, e)| *e == epoch);
                entries.by_name.shrink_to_fit();
            }
        }
    }

    /// The HPA `namespace/name` as the watch last saw it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<CachedHpa>> {
        let entries = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        entries
            .by_name
            .get(&(namespace.into(), name.into()))
            .map(|(hpa, _)| hpa.clone())
    }
}

impl crate::shared::watch::Known<HorizontalPodAutoscaler> for HpaCache {
    /// The names of the cached HPAs, as HPAs with only a namespace and name: what a re-list
    /// compares and deletes by.
    fn known(
        &self,
        wanted: &mut dyn FnMut(&HorizontalPodAutoscaler) -> bool,
    ) -> Vec<HorizontalPodAutoscaler> {
        let entries = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        entries
            .by_name
            .keys()
            .map(|(namespace, name)| HorizontalPodAutoscaler {
                metadata: ObjectMeta {
                    namespace: Some(namespace.to_string()),
                    name: Some(name.to_string()),
                    ..ObjectMeta::default()
                },
                ..HorizontalPodAutoscaler::default()
            })
            .filter(|hpa| wanted(hpa))
            .collect()
    }
}
