//! One watch over the namespaces of `WATCH_NAMESPACE`.
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

use std::collections::HashMap;
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

/// The watch events of `scope`: one cluster-wide watch for [`WatchScope::All`], or one watch per
/// namespace merged as the module explains. `store` must be the reader of the store the returned
/// events are applied to (it tells which objects a re-listed namespace lost). Each watch retries
/// with kube's default backoff; errors are passed on for logging.
pub fn scoped_watcher<K>(
    client: &Client,
    scope: &WatchScope,
    config: &watcher::Config,
    store: Store<K>,
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
        WatchScope::All => watcher::watcher(Api::<K>::all(client.clone()), config.clone())
            .default_backoff()
            .boxed(),
        WatchScope::Namespaces(namespaces) => {
            let streams = namespaces.iter().enumerate().map(|(i, ns)| {
                watcher::watcher(Api::<K>::namespaced(client.clone(), ns), config.clone())
                    .default_backoff()
                    .map(move |event| (i, event))
                    .boxed()
            });
            merge(namespaces.clone(), stream::select_all(streams), store).boxed()
        }
    }
}

/// Merges per-namespace events, tagged with the index of their namespace in `namespaces`.
fn merge<K, S>(
    namespaces: Vec<String>,
    events: S,
    store: Store<K>,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: Stream<Item = (usize, Result<Event<K>, watcher::Error>)> + Send + 'static,
{
    let mut merger = Merger::new(namespaces, store);
    events
        .map(move |(i, event)| stream::iter(merger.handle(i, event)))
        .flatten()
}

/// The state of [`merge`].
struct Merger<K: Resource<DynamicType = ()> + 'static> {
    namespaces: Vec<String>,
    store: Store<K>,
    /// Until every namespace has listed once: the union so far. `None` afterwards.
    first_list: Option<HashMap<ObjectRef<K>, K>>,
    /// Which namespaces have listed once.
    listed: Vec<bool>,
    /// Per namespace, the list in progress (between its `Init` and `InitDone`).
    relists: Vec<Option<Vec<K>>>,
}

impl<K> Merger<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn new(namespaces: Vec<String>, store: Store<K>) -> Self {
        let n = namespaces.len();
        Merger {
            namespaces,
            store,
            first_list: Some(HashMap::new()),
            listed: vec![false; n],
            relists: vec![None; n],
        }
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
        match (event, self.first_list.as_mut()) {
            (Event::Init, _) => {
                self.relists[i] = Some(Vec::new());
                Vec::new()
            }
            (Event::InitApply(obj), _) => {
                self.relists[i].get_or_insert_with(Vec::new).push(obj);
                Vec::new()
            }
            (Event::InitDone, _) => self.listed(i),
            (Event::Apply(obj), Some(first)) => {
                first.insert(ObjectRef::from_obj(&obj), obj);
                Vec::new()
            }
            (Event::Delete(obj), Some(first)) => {
                first.remove(&ObjectRef::from_obj(&obj));
                Vec::new()
            }
            (event @ (Event::Apply(_) | Event::Delete(_)), None) => vec![Ok(event)],
        }
    }

    /// Namespace `i` finished a list.
    fn listed(&mut self, i: usize) -> Vec<Result<Event<K>, watcher::Error>> {
        let fresh = self.relists[i].take().unwrap_or_default();
        let namespace = self.namespaces[i].as_str();
        if let Some(first) = self.first_list.as_mut() {
            first.retain(|key, _| key.namespace.as_deref() != Some(namespace));
            first.extend(fresh.into_iter().map(|o| (ObjectRef::from_obj(&o), o)));
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
        let kept: std::collections::HashSet<ObjectRef<K>> =
            fresh.iter().map(ObjectRef::from_obj).collect();
        let gone = self
            .store
            .state()
            .into_iter()
            .filter(|o| {
                let key = ObjectRef::from_obj(o.as_ref());
                key.namespace.as_deref() == Some(namespace) && !kept.contains(&key)
            })
            .map(|o| Ok(Event::Delete(o.as_ref().clone())));
        let mut out: Vec<_> = fresh.into_iter().map(|o| Ok(Event::Apply(o))).collect();
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
            let (store, writer) = reflector::store();
            Harness {
                merger: Merger::new(vec!["a".into(), "b".into()], store.clone()),
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
}
