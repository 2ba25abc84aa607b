//! Route ownership for `http` triggers, as the activator applies it: the operator reports in
//! the status of each ScaledObject whose routes the activator refuses (`Ready=False` with
//! reason `HTTPRouteConflict` or `HTTPHostNotAllowed`, and a Warning Event), and reconciles an
//! object again when its verdict changes (its route's owner was deleted, say).
//!
//! The rule itself lives in [`keda_scalers::scalers::http::claims`], shared with the
//! activator, and is applied to the same ScaledObjects the activator sees (both watch every
//! ScaledObject of their namespaces), so the two always agree.
//!
//! Cost: resolving is linear in the ScaledObjects with `http` triggers; it runs when one of
//! their claims changes (creation, deletion, a changed `http` trigger), not on status writes,
//! and the verdicts are shared by every reconcile until the next such change.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use keda_api::ScaledObject;
use keda_scalers::scalers::http::claims::{self, Claim, HostPolicy, Refusal, Verdicts};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::Notify;

/// The operator's view of route ownership: the verdicts of [`claims::resolve`] over the
/// controller's ScaledObject cache, recomputed when a claim changes.
#[derive(Clone)]
pub struct RouteClaims {
    inner: Arc<Inner>,
}

struct Inner {
    policy: HostPolicy,
    store: Store<ScaledObject>,
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// A hash of each claiming object's claim (creation time and `http` triggers).
    fingerprints: HashMap<ObjectRef<ScaledObject>, u64>,
    /// Bumped whenever a fingerprint changes.
    version: u64,
    /// The verdicts and the version they were computed at.
    computed: Option<(u64, Arc<Verdicts>)>,
}

impl RouteClaims {
    /// Route ownership over the ScaledObjects of `store`, under `policy`.
    pub fn new(store: Store<ScaledObject>, policy: HostPolicy) -> Self {
        Self {
            inner: Arc::new(Inner {
                policy,
                store,
                state: Mutex::default(),
                changed: Notify::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes note of a watch event, after the store has applied it.
    ///
    /// The fingerprints must describe what the store holds, never more: [`Self::verdicts`]
    /// reads the store and keeps its answer for the fingerprints' version. The store keeps
    /// `InitApply` objects aside until `InitDone` (a list, at start or after a watch error,
    /// replaces the store at once), so those events are not counted one by one; `InitDone`
    /// takes the fingerprints from the store and always starts a new version, so nothing
    /// computed while the list was arriving outlives it.
    pub fn observe(&self, event: &watcher::Event<ScaledObject>) {
        let changed = {
            let mut state = self.state();
            let changed = match event {
                watcher::Event::Apply(so) => {
                    let key = ObjectRef::from_obj(so);
                    match fingerprint(so) {
                        Some(f) => state.fingerprints.insert(key, f) != Some(f),
                        None => state.fingerprints.remove(&key).is_some(),
                    }
                }
                watcher::Event::Delete(so) => state
                    .fingerprints
                    .remove(&ObjectRef::from_obj(so))
                    .is_some(),
                watcher::Event::Init | watcher::Event::InitApply(_) => false,
                watcher::Event::InitDone => {
                    state.fingerprints = self
                        .inner
                        .store
                        .state()
                        .iter()
                        .filter_map(|so| fingerprint(so).map(|f| (ObjectRef::from_obj(&**so), f)))
                        .collect();
                    true
                }
            };
            if changed {
                state.version += 1;
            }
            changed
        };
        if changed {
            self.inner.changed.notify_one();
        }
    }

    /// The verdicts for the cache as it is, computed once per change of the claims.
    pub fn verdicts(&self) -> Arc<Verdicts> {
        let mut state = self.state();
        if let Some((version, verdicts)) = &state.computed
            && *version == state.version
        {
            return Arc::clone(verdicts);
        }
        let objects = self.inner.store.state();
        let verdicts = Arc::new(claims::resolve(
            objects.iter().filter_map(|so| Claim::of(so)),
            &self.inner.policy,
        ));
        state.computed = Some((state.version, Arc::clone(&verdicts)));
        verdicts
    }

    /// Why the activator does not route `so`; `None` when it does (or `so` has no `http`
    /// trigger).
    pub fn refusal(&self, so: &ScaledObject) -> Option<Refusal> {
        fingerprint(so)?;
        self.verdicts()
            .refusal(&so.namespace().unwrap_or_default(), &so.name_any())
            .cloned()
    }

    /// The ScaledObjects whose verdict changed, each time the claims change: the controller
    /// reconciles them, so a refused object's condition clears when its route is free again
    /// and an owner that loses its claim (to a policy, say) reports it.
    pub fn changes(&self) -> impl Stream<Item = ObjectRef<ScaledObject>> + Send + 'static {
        let this = self.clone();
        let pending: Vec<(String, String)> = Vec::new();
        let state = (this, Arc::new(Verdicts::default()), pending);
        futures::stream::unfold(state, |(this, mut last, mut pending)| async move {
            loop {
                if let Some((namespace, name)) = pending.pop() {
                    let next = ObjectRef::new(&name).within(&namespace);
                    return Some((next, (this, last, pending)));
                }
                this.inner.changed.notified().await;
                let now = this.verdicts();
                pending = now.changed(&last);
                last = now;
            }
        })
    }
}

/// A hash of what `so` claims (creation time and `http` triggers), `None` when it has no `http`
/// trigger.
fn fingerprint(so: &ScaledObject) -> Option<u64> {
    let mut http = so
        .spec
        .triggers
        .iter()
        .enumerate()
        .filter(|(_, t)| t.type_ == "http")
        .peekable();
    http.peek()?;
    let mut h = DefaultHasher::new();
    so.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut h);
    for (index, trigger) in http {
        index.hash(&mut h);
        trigger.metadata.hash(&mut h);
    }
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::runtime::reflector;

    fn so(ns: &str, name: &str, second: i64, hosts: &str, prefixes: &str) -> ScaledObject {
        let mut so: ScaledObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"scaleTargetRef": {"name": name}, "triggers": [{"type": "http", "metadata": {
                "hosts": hosts, "pathPrefixes": prefixes, "service": name}}]}
        }))
        .unwrap();
        so.metadata.creation_timestamp = Some(Time(
            jiff::Timestamp::from_second(1_700_000_000 + second).unwrap(),
        ));
        so
    }

    /// The start-up bug: both objects exist as the operator starts, so they arrive as
    /// `InitApply` events, which the store keeps aside until `InitDone`. The verdicts computed
    /// meanwhile (the `changes` stream wakes on each event) saw an empty store and were kept
    /// at InitDone, so the later object stayed `Ready=True`.
    #[tokio::test]
    async fn verdicts_computed_during_the_initial_list_do_not_outlive_it() {
        let (store, mut writer) = reflector::store::<ScaledObject>();
        let claims = RouteClaims::new(store, HostPolicy::allow_all());
        let owner = so("shop", "shop", 1, "shop.example.com", "/");
        let later = so("other", "login", 3, "shop.example.com", "/login");
        let mut events = vec![watcher::Event::Init];
        // Either order: the verdict must not depend on the order the list returns them in.
        for order in [[&owner, &later], [&later, &owner]] {
            events.extend(order.map(|o| watcher::Event::InitApply(o.clone())));
            events.push(watcher::Event::InitDone);
            events.push(watcher::Event::Init);
        }
        events.pop();
        for event in &events {
            writer.apply_watcher_event(event);
            claims.observe(event);
            // What the `changes` stream does when woken: compute the verdicts now.
            let _ = claims.verdicts();
            if matches!(event, watcher::Event::InitDone) {
                assert_eq!(claims.refusal(&owner), None);
                let refusal = claims.refusal(&later).expect("the later claim is refused");
                assert_eq!(refusal.reason(), claims::REASON_ROUTE_CONFLICT);
            }
        }
    }

    #[tokio::test]
    async fn verdicts_follow_the_cache_and_changes_name_the_objects_to_reconcile() {
        let (store, mut writer) = reflector::store::<ScaledObject>();
        let claims = RouteClaims::new(store, HostPolicy::allow_all());
        let mut changes = Box::pin(claims.changes());
        let owner = so("shop", "shop", 1, "shop.example.com", "/");
        let later = so("other", "login", 2, "shop.example.com", "/login");
        for obj in [&owner, &later] {
            let event = watcher::Event::Apply(obj.clone());
            writer.apply_watcher_event(&event);
            claims.observe(&event);
        }
        assert_eq!(claims.refusal(&owner), None);
        let refusal = claims.refusal(&later).expect("refused");
        assert_eq!(refusal.reason(), claims::REASON_ROUTE_CONFLICT);
        assert_eq!(
            changes.next().await,
            Some(ObjectRef::new("login").within("other"))
        );
        // A status write changes nothing.
        let mut written = later.clone();
        written.status = Some(Default::default());
        let event = watcher::Event::Apply(written);
        writer.apply_watcher_event(&event);
        claims.observe(&event);
        // The owner goes: the later object is routed and must be reconciled.
        let event = watcher::Event::Delete(owner.clone());
        writer.apply_watcher_event(&event);
        claims.observe(&event);
        assert_eq!(claims.refusal(&later), None);
        assert_eq!(
            changes.next().await,
            Some(ObjectRef::new("login").within("other"))
        );
    }
}
