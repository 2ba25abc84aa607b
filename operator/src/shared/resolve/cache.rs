//! Watch caches of the objects a resolution reads.
//!
//! Each [`Cache`] is fed by one kube-runtime `watcher` per watched namespace (or one
//! cluster-wide). It keeps a *projection* of each object, only the content a resolution needs
//! (a Secret's data, a TriggerAuthentication's spec, a workload's container env), so memory
//! does not grow with the size of unrelated fields, and so a change is detected by comparing
//! projections: a resync, a status or label update, or a scale of the workload changes nothing
//! and notifies nobody. kube's reflector `Store` keeps whole objects and cannot say what
//! changed, hence this small cache instead.
//!
//! Changes after the first list (an update, a delete, a create, or a difference found when a
//! watch is re-listed) are reported through the `on_change` callback with the object's key.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::config::WatchScope;
use super::keys::ObjKey;

/// Called with the key of an object whose projection changed.
pub(crate) type ChangeFn = Arc<dyn Fn(&ObjKey) + Send + Sync>;

/// Called with an object's key and whether the object exists now, each time that may have
/// changed (the first list included).
pub(crate) type PresenceFn = Arc<dyn Fn(&ObjKey, bool) + Send + Sync>;

/// Projections of one resource, keyed by namespace/name.
pub(crate) struct Cache<V> {
    /// Plural resource name, for logs and errors.
    pub(crate) resource: String,
    scope: WatchScope,
    entries: RwLock<HashMap<ObjKey, Arc<V>>>,
    /// Watches that have not finished their first list.
    pending: AtomicUsize,
    ready: tokio::sync::watch::Sender<bool>,
    presence: Option<PresenceFn>,
}

impl<V: PartialEq + Send + Sync + 'static> Cache<V> {
    /// An empty cache that becomes ready when `watches` watches have listed once.
    pub(crate) fn new(resource: impl Into<String>, scope: WatchScope, watches: usize) -> Self {
        Self {
            resource: resource.into(),
            scope,
            entries: RwLock::new(HashMap::new()),
            pending: AtomicUsize::new(watches),
            ready: tokio::sync::watch::channel(watches == 0).0,
            presence: None,
        }
    }

    /// This cache, telling `presence` about every object that appears or goes away.
    pub(crate) fn with_presence(mut self, presence: PresenceFn) -> Self {
        self.presence = Some(presence);
        self
    }

    fn tell_presence(&self, key: &ObjKey, present: bool) {
        if let Some(presence) = &self.presence {
            presence(key, present);
        }
    }

    /// Whether `namespace` is covered by this cache's watches.
    pub(crate) fn covers(&self, namespace: &str) -> bool {
        self.scope.covers(namespace)
    }

    /// The projection of `key`, if the object exists.
    pub(crate) fn get(&self, key: &ObjKey) -> Option<Arc<V>> {
        self.read().get(key).cloned()
    }

    /// Waits until every watch has listed once, at most `timeout`. True when ready.
    pub(crate) async fn wait_ready(&self, timeout: Duration) -> bool {
        let mut ready = self.ready.subscribe();
        tokio::time::timeout(timeout, ready.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ObjKey, Arc<V>>> {
        // A panic while holding the lock leaves the map consistent (every write is one insert,
        // remove or swap), so a poisoned lock is still usable.
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<ObjKey, Arc<V>>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `value`; true if it is new or differs from the stored one. An equal value is
    /// stored too: equality may ignore parts that are kept all the same (a
    /// TriggerAuthentication's status).
    fn upsert(&self, key: ObjKey, value: V) -> bool {
        let (changed, new) = {
            let mut entries = self.write();
            let (changed, new) = match entries.get(&key) {
                Some(old) => (**old != value, false),
                None => (true, true),
            };
            entries.insert(key.clone(), Arc::new(value));
            (changed, new)
        };
        if new {
            self.tell_presence(&key, true);
        }
        changed
    }

    /// Removes `key`; true if it was there.
    fn remove(&self, key: &ObjKey) -> bool {
        let removed = self.write().remove(key).is_some();
        if removed {
            self.tell_presence(key, false);
        }
        removed
    }

    /// Replaces every entry of `namespace` (all entries for `None`) with `fresh`, returning the
    /// keys that were added, changed or removed.
    fn replace(&self, namespace: Option<&str>, fresh: HashMap<ObjKey, V>) -> Vec<ObjKey> {
        let mut changed = Vec::new();
        let mut presence = Vec::new();
        {
            let mut entries = self.write();
            let in_partition = |key: &ObjKey| namespace.is_none_or(|ns| key.namespace == ns);
            entries.retain(|key, _| {
                let keep = !in_partition(key) || fresh.contains_key(key);
                if !keep {
                    changed.push(key.clone());
                    presence.push((key.clone(), false));
                }
                keep
            });
            for (key, value) in fresh {
                match entries.get(&key) {
                    Some(old) if **old == value => {}
                    Some(_) => changed.push(key.clone()),
                    None => {
                        presence.push((key.clone(), true));
                        changed.push(key.clone());
                    }
                }
                entries.insert(key, Arc::new(value));
            }
        }
        for (key, present) in &presence {
            self.tell_presence(key, *present);
        }
        changed
    }

    fn mark_listed(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.ready.send_replace(true);
        }
    }
}

/// Starts the watches that feed `cache`: one per namespace of its scope, or one cluster-wide.
/// `make_api` builds the `Api` for a namespace (`None`: all namespaces / cluster-scoped).
/// The watches stop when `cancel` is cancelled.
pub(crate) fn spawn_watches<K, V>(
    cache: &Arc<Cache<V>>,
    make_api: impl Fn(Option<&str>) -> Api<K>,
    config: &watcher::Config,
    project: fn(&K) -> V,
    on_change: ChangeFn,
    cancel: &CancellationToken,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: PartialEq + Send + Sync + 'static,
{
    let partitions: Vec<Option<String>> = match &cache.scope {
        WatchScope::All => vec![None],
        WatchScope::Namespaces(list) => list.iter().cloned().map(Some).collect(),
    };
    for namespace in partitions {
        let api = make_api(namespace.as_deref());
        let task = run_watch(
            Arc::clone(cache),
            api,
            config.clone(),
            namespace,
            project,
            Arc::clone(&on_change),
        );
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = task => {}
            }
        });
    }
}

/// The number of watches [`spawn_watches`] starts for `scope`.
pub(crate) fn watch_count(scope: &WatchScope) -> usize {
    match scope {
        WatchScope::All => 1,
        WatchScope::Namespaces(list) => list.len(),
    }
}

async fn run_watch<K, V>(
    cache: Arc<Cache<V>>,
    api: Api<K>,
    config: watcher::Config,
    namespace: Option<String>,
    project: fn(&K) -> V,
    on_change: ChangeFn,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: PartialEq + Send + Sync + 'static,
{
    let key_of = |obj: &K| ObjKey::new(&obj.namespace().unwrap_or_default(), &obj.name_any());
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    // Objects of a re-list, swapped in at InitDone so that readers never see a half list.
    let mut relist: Option<HashMap<ObjKey, V>> = None;
    let mut listed = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Apply(obj)) => {
                let key = key_of(&obj);
                if cache.upsert(key.clone(), project(&obj)) && listed {
                    on_change(&key);
                }
            }
            Ok(Event::Delete(obj)) => {
                let key = key_of(&obj);
                if cache.remove(&key) && listed {
                    on_change(&key);
                }
            }
            Ok(Event::Init) => relist = Some(HashMap::new()),
            Ok(Event::InitApply(obj)) => {
                relist
                    .get_or_insert_with(HashMap::new)
                    .insert(key_of(&obj), project(&obj));
            }
            Ok(Event::InitDone) => {
                let changed =
                    cache.replace(namespace.as_deref(), relist.take().unwrap_or_default());
                if listed {
                    for key in &changed {
                        on_change(key);
                    }
                } else {
                    listed = true;
                    cache.mark_listed();
                    tracing::debug!(resource = %cache.resource, namespace = namespace.as_deref().unwrap_or("*"), "cache listed");
                }
            }
            Err(error) => {
                // kube's watcher errors carry API statuses and decode errors, never object data.
                tracing::warn!(resource = %cache.resource, namespace = namespace.as_deref().unwrap_or("*"), %error, "watch failed, retrying with backoff");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> ObjKey {
        ObjKey::new(ns, name)
    }

    #[test]
    fn a_relist_reports_only_what_changed_in_its_namespace() {
        let cache: Cache<u32> = Cache::new("things", WatchScope::All, 1);
        assert!(cache.upsert(key("a", "same"), 1));
        assert!(cache.upsert(key("a", "edited"), 1));
        assert!(cache.upsert(key("a", "gone"), 1));
        assert!(cache.upsert(key("b", "other"), 1));
        // an identical value is not a change
        assert!(!cache.upsert(key("a", "same"), 1));

        let fresh = HashMap::from([
            (key("a", "same"), 1),
            (key("a", "edited"), 2),
            (key("a", "new"), 1),
        ]);
        let mut changed = cache.replace(Some("a"), fresh);
        changed.sort();
        assert_eq!(
            changed,
            [key("a", "edited"), key("a", "gone"), key("a", "new")]
        );
        // other namespaces are untouched by a namespace's relist
        assert_eq!(cache.get(&key("b", "other")).as_deref(), Some(&1));
        assert_eq!(cache.get(&key("a", "edited")).as_deref(), Some(&2));
        assert!(cache.get(&key("a", "gone")).is_none());
    }

    #[test]
    fn presence_is_told_of_objects_that_appear_and_go_but_not_of_edits() {
        let seen: Arc<std::sync::Mutex<Vec<(String, bool)>>> = Arc::default();
        let log = Arc::clone(&seen);
        let cache: Cache<u32> = Cache::new("things", WatchScope::All, 1).with_presence(Arc::new(
            move |key: &ObjKey, present| {
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((key.to_string(), present));
            },
        ));
        cache.upsert(key("a", "one"), 1);
        cache.upsert(key("a", "one"), 2);
        cache.upsert(key("a", "two"), 1);
        cache.remove(&key("a", "two"));
        cache.remove(&key("a", "two"));
        cache.replace(Some("a"), HashMap::from([(key("a", "three"), 1)]));
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(
            seen,
            [
                ("a/one".to_string(), true),
                ("a/two".to_string(), true),
                ("a/two".to_string(), false),
                ("a/one".to_string(), false),
                ("a/three".to_string(), true),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn readiness_waits_for_every_watch_and_is_bounded() {
        let cache: Cache<u32> = Cache::new("things", WatchScope::All, 2);
        assert!(!cache.wait_ready(Duration::from_secs(1)).await);
        cache.mark_listed();
        assert!(!cache.wait_ready(Duration::from_secs(1)).await);
        cache.mark_listed();
        assert!(cache.wait_ready(Duration::from_secs(1)).await);
    }
}
