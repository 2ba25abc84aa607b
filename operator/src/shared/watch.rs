//! One watch over the namespaces of `WATCH_NAMESPACE`, and re-lists that never hold a
//! collection twice.
//!
//! With several namespaces there is one `watcher` per namespace (namespaced RBAC is enough), but
//! the controller needs one event stream and one reflector store, as a cluster-wide watch gives.
//! [`scoped_watcher`] merges the per-namespace streams into such a stream:
//!
//! - until every namespace has listed once, their objects are gathered and then announced as
//!   one list (`Init`, `InitApply`..., `InitDone`), so the store becomes ready with all of them;
//! - afterwards, a namespace that lists again (its watch expired or failed) must not replace the
//!   other namespaces' objects, so its list is announced as `Apply` events plus a `Delete` for
//!   every object of that namespace the store holds and the new list lacks.
//!
//! A store fed by the merged stream therefore holds exactly the union of the namespaces, as a
//! store fed by one cluster-wide watch would.
//!
//! The cluster-wide watch gets the second rule too. kube's reflector builds a re-list aside and
//! swaps it in at its end, so during a re-list (a `410 Gone` after the API server compacted its
//! history, which at 100,000 objects is routine) it holds the whole collection twice, and the
//! allocator keeps the peak for good. Announced as `Apply` events, each listed object replaces
//! its old copy in place; only the keys of the list in progress are kept aside, to find what it
//! lacks.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;

use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::shared::resolve::WatchScope;

/// What a cache fed by [`scoped_watcher`] holds, as objects that carry at least their
/// namespace and name: a re-list deletes those it did not show.
pub trait Known<K>: Send + 'static {
    /// The objects held now for which `wanted` is true (only those are copied: a re-list
    /// of 100,000 objects must not copy the cache to find the few it lost).
    fn known(&self, wanted: &mut dyn FnMut(&K) -> bool) -> Vec<K>;
}

impl<K> Known<K> for Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    fn known(&self, wanted: &mut dyn FnMut(&K) -> bool) -> Vec<K> {
        self.state()
            .iter()
            .filter(|o| wanted(o))
            .map(|o| o.as_ref().clone())
            .collect()
    }
}

/// The watch events of `scope`: one cluster-wide watch for [`WatchScope::All`], or one watch per
/// namespace merged as the module explains. `store` must tell what the cache the returned
/// events are applied to holds (it tells which objects a re-list lost). Each watch retries with kube's
/// default backoff; errors are passed on for logging.
pub fn scoped_watcher<K>(
    client: &Client,
    scope: &WatchScope,
    config: &watcher::Config,
    store: impl Known<K>,
) -> BoxStream<'static, Result<Event<K>, watcher::Error>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    match scope {
        WatchScope::All => {
            let events = watcher::watcher(Api::<K>::all(client.clone()), config.clone())
                .default_backoff()
                .map(|event| (0, event));
            merge(vec![None], events, store).boxed()
        }
        WatchScope::Namespaces(namespaces) => {
            let streams = namespaces.iter().enumerate().map(|(i, ns)| {
                watcher::watcher(Api::<K>::namespaced(client.clone(), ns), config.clone())
                    .default_backoff()
                    .map(move |event| (i, event))
                    .boxed()
            });
            let scopes = namespaces.iter().cloned().map(Some).collect();
            merge(scopes, stream::select_all(streams), store).boxed()
        }
    }
}

/// Merges the events of `scopes` (a namespace each, or `None`: every namespace), tagged with
/// the index of their scope.
fn merge<K, S>(
    scopes: Vec<Option<String>>,
    events: S,
    store: impl Known<K>,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: Stream<Item = (usize, Result<Event<K>, watcher::Error>)> + Send + 'static,
{
    let mut merger = Merger::new(scopes, Box::new(store));
    events
        .map(move |(i, event)| stream::iter(merger.handle(i, event)))
        .flatten()
}

/// A list in progress, after the store's first list.
enum Relist<K: Resource<DynamicType = ()> + 'static> {
    /// Started while other namespaces had not listed yet: its objects, announced at its end.
    Gathered(Vec<K>),
    /// Started after: its objects were announced as they came; the keys seen so far.
    Streamed(HashSet<ObjectRef<K>>),
}

/// The state of [`merge`].
struct Merger<K: Resource<DynamicType = ()> + 'static> {
    scopes: Vec<Option<String>>,
    store: Box<dyn Known<K>>,
    /// Several namespaces, until every one has listed once: the union so far. `None`
    /// afterwards, and for a single scope (its first list goes to the store as it comes).
    first_list: Option<HashMap<ObjectRef<K>, K>>,
    /// Which scopes have listed once.
    listed: Vec<bool>,
    /// Per scope, the re-list in progress (between its `Init` and `InitDone`).
    relists: Vec<Option<Relist<K>>>,
}

/// A key without the object's resourceVersion and UID (which equality ignores anyway).
fn key_of<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectRef<K> {
    let meta = obj.meta();
    let key = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
    match &meta.namespace {
        Some(ns) => key.within(ns),
        None => key,
    }
}

impl<K> Merger<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn new(scopes: Vec<Option<String>>, store: Box<dyn Known<K>>) -> Self {
        let n = scopes.len();
        Merger {
            first_list: (n > 1).then(HashMap::new),
            scopes,
            store,
            listed: vec![false; n],
            relists: (0..n).map(|_| None).collect(),
        }
    }

    /// Whether events of scope `i` go to the store as they are: the first list of a single
    /// scope (the reflector builds it aside while the store is still empty).
    fn passes(&self, i: usize) -> bool {
        self.scopes.len() == 1 && !self.listed[i]
    }

    fn handle(
        &mut self,
        i: usize,
        event: Result<Event<K>, watcher::Error>,
    ) -> Vec<Result<Event<K>, watcher::Error>> {
        let event = match event {
            Ok(event) => event,
            Err(error) => return vec![Err(error)],
        };
        if self.passes(i) {
            if matches!(event, Event::InitDone) {
                self.listed[i] = true;
            }
            return vec![Ok(event)];
        }
        match (event, self.first_list.as_mut()) {
            (Event::Init, first) => {
                self.relists[i] = Some(match first {
                    Some(_) => Relist::Gathered(Vec::new()),
                    None => Relist::Streamed(HashSet::new()),
                });
                Vec::new()
            }
            (Event::InitApply(obj), _) => match &mut self.relists[i] {
                Some(Relist::Streamed(seen)) => {
                    seen.insert(key_of(&obj));
                    vec![Ok(Event::Apply(obj))]
                }
                Some(Relist::Gathered(objects)) => {
                    objects.push(obj);
                    Vec::new()
                }
                None => {
                    self.relists[i] = Some(Relist::Gathered(vec![obj]));
                    Vec::new()
                }
            },
            (Event::InitDone, _) => self.listed(i),
            (Event::Apply(obj), Some(first)) => {
                first.insert(key_of(&obj), obj);
                Vec::new()
            }
            (Event::Delete(obj), Some(first)) => {
                first.remove(&key_of(&obj));
                Vec::new()
            }
            (event @ (Event::Apply(_) | Event::Delete(_)), None) => vec![Ok(event)],
        }
    }

    /// Whether `key` is in `scope` (a namespace, or `None`: every namespace).
    fn in_scope(scope: Option<&str>, key: &ObjectRef<K>) -> bool {
        scope.is_none_or(|ns| key.namespace.as_deref() == Some(ns))
    }

    /// Scope `i` finished a list.
    fn listed(&mut self, i: usize) -> Vec<Result<Event<K>, watcher::Error>> {
        let relist = self.relists[i]
            .take()
            .unwrap_or(Relist::Gathered(Vec::new()));
        if let Some(first) = self.first_list.as_mut() {
            let fresh = match relist {
                Relist::Gathered(objects) => objects,
                // Not reached: a list that starts before every scope listed is gathered.
                Relist::Streamed(_) => Vec::new(),
            };
            let namespace = self.scopes[i].as_deref();
            first.retain(|key, _| key.namespace.as_deref() != namespace);
            first.extend(fresh.into_iter().map(|o| (key_of(&o), o)));
            self.listed[i] = true;
            if !self.listed.iter().all(|l| *l) {
                return Vec::new();
            }
            let all = self.first_list.take().unwrap_or_default();
            let mut out = Vec::with_capacity(all.len() + 2);
            out.push(Ok(Event::Init));
            out.extend(all.into_values().map(|o| Ok(Event::InitApply(o))));
            out.push(Ok(Event::InitDone));
            return out;
        }
        let (mut out, kept): (Vec<_>, HashSet<ObjectRef<K>>) = match relist {
            Relist::Gathered(fresh) => {
                let kept = fresh.iter().map(key_of).collect();
                (
                    fresh.into_iter().map(|o| Ok(Event::Apply(o))).collect(),
                    kept,
                )
            }
            Relist::Streamed(seen) => (Vec::new(), seen),
        };
        let scope = self.scopes[i].clone();
        let gone: Vec<_> = self
            .store
            .known(&mut |o| {
                let key = key_of(o);
                Self::in_scope(scope.as_deref(), &key) && !kept.contains(&key)
            })
            .into_iter()
            .map(|o| Ok(Event::Delete(o)))
            .collect();
        out.extend(gone);
        out
    }
}

/// Whether a reflector store has listed once, awaitable by any number of tasks.
///
/// kube-runtime 5's [`Store::wait_until_ready`] is a oneshot receiver underneath: it keeps only
/// the waker of the task that polled it last, so of many tasks awaiting it together (all the
/// scale loops starting at once after a restart) only one wakes when the list arrives. One
/// task awaits it here and publishes the answer on a watch channel, which wakes every waiter.
#[derive(Clone, Debug)]
pub struct Listed(tokio::sync::watch::Receiver<bool>);

impl Listed {
    /// Readiness of `store`; the task awaiting it ends with `shutdown`.
    pub fn of<K>(store: Store<K>, shutdown: tokio_util::sync::CancellationToken) -> Listed
    where
        K: Resource + Clone + Send + Sync + 'static,
        K::DynamicType: std::hash::Hash + Eq + Clone + Send + Sync,
    {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                r = store.wait_until_ready() => if r.is_ok() { let _ = tx.send(true); },
            }
        });
        Listed(rx)
    }

    /// Readiness published on `listed` by a cache of its own.
    pub fn new(listed: tokio::sync::watch::Receiver<bool>) -> Listed {
        Listed(listed)
    }

    /// Whether the store has listed, now.
    pub fn is_listed(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the store has listed; returns `false` if it never will (its writer is gone).
    pub async fn wait(&self) -> bool {
        self.0.clone().wait_for(|listed| *listed).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;

    use super::*;

    fn cm(ns: &str, name: &str, value: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns},
            "data": {"v": value}
        }))
        .expect("configmap")
    }

    fn contents(store: &Store<ConfigMap>) -> Vec<String> {
        let mut all: Vec<String> = store
            .state()
            .iter()
            .map(|c| {
                format!(
                    "{}/{}={}",
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default(),
                    c.data
                        .as_ref()
                        .and_then(|d| d.get("v"))
                        .cloned()
                        .unwrap_or_default()
                )
            })
            .collect();
        all.sort();
        all
    }

    /// Feeds `events` through a merger into a store, as the controller's reflector does.
    struct Harness {
        merger: Merger<ConfigMap>,
        writer: reflector::store::Writer<ConfigMap>,
        store: Store<ConfigMap>,
        emitted: Vec<&'static str>,
    }

    impl Harness {
        fn new() -> Self {
            Self::over(vec![Some("a".into()), Some("b".into())])
        }

        fn over(scopes: Vec<Option<String>>) -> Self {
            let (store, writer) = reflector::store();
            Harness {
                merger: Merger::new(scopes, Box::new(store.clone())),
                writer,
                store,
                emitted: Vec::new(),
            }
        }

        fn feed(&mut self, i: usize, event: Event<ConfigMap>) {
            for out in self.merger.handle(i, Ok(event)) {
                let out = out.expect("no error");
                self.emitted.push(match &out {
                    Event::Init => "Init",
                    Event::InitApply(_) => "InitApply",
                    Event::InitDone => "InitDone",
                    Event::Apply(_) => "Apply",
                    Event::Delete(_) => "Delete",
                });
                self.writer.apply_watcher_event(&out);
            }
        }

        fn list(&mut self, i: usize, objects: Vec<ConfigMap>) {
            self.feed(i, Event::Init);
            for o in objects {
                self.feed(i, Event::InitApply(o));
            }
            self.feed(i, Event::InitDone);
        }
    }

    #[tokio::test]
    async fn the_store_is_ready_once_every_namespace_listed_and_holds_their_union() {
        let mut h = Harness::new();
        h.list(0, vec![cm("a", "x", "1")]);
        // An event of a listed namespace while the other still lists is not lost.
        h.feed(0, Event::Apply(cm("a", "y", "1")));
        assert!(
            h.emitted.is_empty(),
            "nothing before every namespace listed"
        );
        assert!(
            futures::FutureExt::now_or_never(h.store.wait_until_ready()).is_none(),
            "not ready while b has not listed"
        );
        h.list(1, vec![cm("b", "x", "1")]);
        assert_eq!(
            h.emitted,
            ["Init", "InitApply", "InitApply", "InitApply", "InitDone"]
        );
        assert!(futures::FutureExt::now_or_never(h.store.wait_until_ready()).is_some());
        assert_eq!(contents(&h.store), ["a/x=1", "a/y=1", "b/x=1"]);
    }

    #[tokio::test]
    async fn a_namespace_that_lists_again_keeps_the_others_and_loses_only_its_own_deleted() {
        let mut h = Harness::new();
        h.list(0, vec![cm("a", "x", "1"), cm("a", "gone", "1")]);
        h.list(1, vec![cm("b", "x", "1")]);
        h.emitted.clear();
        // a's watch expired: its new list lacks a/gone and changed a/x.
        h.list(0, vec![cm("a", "x", "2"), cm("a", "new", "1")]);
        assert_eq!(contents(&h.store), ["a/new=1", "a/x=2", "b/x=1"]);
        assert_eq!(h.emitted, ["Apply", "Apply", "Delete"]);
        // Plain events pass through.
        h.feed(1, Event::Delete(cm("b", "x", "1")));
        h.feed(1, Event::Apply(cm("b", "z", "1")));
        assert_eq!(contents(&h.store), ["a/new=1", "a/x=2", "b/z=1"]);
    }

    #[tokio::test]
    async fn a_namespace_relisting_before_the_others_listed_replaces_only_its_part() {
        let mut h = Harness::new();
        h.list(0, vec![cm("a", "x", "1"), cm("a", "old", "1")]);
        h.feed(0, Event::Delete(cm("a", "x", "1")));
        h.list(0, vec![cm("a", "y", "1")]);
        h.list(1, vec![]);
        assert_eq!(contents(&h.store), ["a/y=1"]);
    }

    #[tokio::test]
    async fn a_cluster_wide_relist_replaces_objects_in_place_and_deletes_what_it_lacks() {
        let mut h = Harness::over(vec![None]);
        h.list(0, vec![cm("a", "x", "1"), cm("b", "gone", "1")]);
        assert_eq!(h.emitted, ["Init", "InitApply", "InitApply", "InitDone"]);
        assert!(futures::FutureExt::now_or_never(h.store.wait_until_ready()).is_some());
        h.emitted.clear();
        // A 410 re-list: each listed object replaces its copy as it comes, so the store
        // never holds the collection twice.
        h.feed(0, Event::Init);
        h.feed(0, Event::InitApply(cm("a", "x", "2")));
        assert_eq!(
            contents(&h.store),
            ["a/x=2", "b/gone=1"],
            "replaced in place, mid-list"
        );
        h.feed(0, Event::InitApply(cm("b", "new", "1")));
        h.feed(0, Event::InitDone);
        assert_eq!(contents(&h.store), ["a/x=2", "b/new=1"]);
        assert_eq!(h.emitted, ["Apply", "Apply", "Delete"]);
        h.feed(0, Event::Delete(cm("a", "x", "2")));
        assert_eq!(contents(&h.store), ["b/new=1"]);
    }

    #[tokio::test]
    async fn a_cluster_wide_first_list_that_restarts_keeps_only_the_second() {
        let mut h = Harness::over(vec![None]);
        h.feed(0, Event::Init);
        h.feed(0, Event::InitApply(cm("a", "old", "1")));
        // The list failed half way and started again.
        h.list(0, vec![cm("a", "x", "1")]);
        assert_eq!(contents(&h.store), ["a/x=1"]);
    }
}
