//! The scale target: its type, its `/scale` subresource, and its replica count read from a
//! watch cache.
//!
//! The reconciler checks the target through `/scale` (KEDA's `checkTargetResourceIsScalable`),
//! telling a missing target from a target without `/scale`. The scale loops read the current
//! replica count from one watch cache per target kind (and watched namespace) instead of a GET
//! per poll, and write `/scale` only when the decision changes the count.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::autoscaling::v1::Scale;
use keda_api::gvkr::{GroupVersionKindResource, GvkrError, parse_gvk};
use keda_api::{ScaledObject, ScaledObjectSpec};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::shared::error::{Error, is_not_found};
use crate::shared::resolve::WatchScope;
use crate::shared::watch::Listed;

/// How long a loop waits for a new target cache to list its objects.
const CACHE_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The scale target of an object, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its type, shared by the targets of that type ([`TargetKind::of`]): every loop keeps
    /// its target, so nine strings per loop were 100,000 copies of "apps", "v1",
    /// "Deployment"...
    pub kind: Arc<TargetKind>,
    /// Namespace (the object's).
    pub namespace: String,
    /// `scaleTargetRef.name`.
    pub name: String,
}

/// The type of a scale target.
#[derive(Debug, PartialEq, Eq)]
pub struct TargetKind {
    /// `status.scaleTargetGVKR`.
    pub gvkr: GroupVersionKindResource,
    /// For the dynamic API.
    pub api_resource: ApiResource,
}

/// How many target types are shared at most; beyond, each target gets its own (a cluster has
/// a few scalable kinds, so this is never reached in practice, and the table stays bounded).
const SHARED_KINDS: usize = 256;

impl TargetKind {
    /// The shared [`TargetKind`] of `gvkr`.
    pub fn of(gvkr: GroupVersionKindResource) -> Arc<TargetKind> {
        static KINDS: std::sync::Mutex<Vec<Arc<TargetKind>>> = std::sync::Mutex::new(Vec::new());
        let mut kinds = KINDS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(kind) = kinds.iter().find(|k| k.gvkr == gvkr) {
            return kind.clone();
        }
        let api_resource = ApiResource {
            group: gvkr.group.clone(),
            version: gvkr.version.clone(),
            api_version: gvkr.api_version(),
            kind: gvkr.kind.clone(),
            plural: gvkr.resource.clone(),
        };
        let kind = Arc::new(TargetKind { gvkr, api_resource });
        if kinds.len() < SHARED_KINDS {
            kinds.push(kind.clone());
        }
        kind
    }
}

impl Target {
    /// `status.scaleTargetGVKR`.
    pub fn gvkr(&self) -> &GroupVersionKindResource {
        &self.kind.gvkr
    }

    /// For the dynamic API.
    pub fn api_resource(&self) -> &ApiResource {
        &self.kind.api_resource
    }

    /// `status.scaleTargetKind`, e.g. `apps/v1.Deployment`.
    pub fn kind_string(&self) -> String {
        self.gvkr().gvk_string()
    }

    fn api(&self, client: &Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), &self.namespace, self.api_resource())
    }

    fn not_found(&self) -> Error {
        Error::TargetNotFound {
            kind: self.kind_string(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// Reads `/scale`, telling a missing target from one without `/scale`.
    ///
    /// # Errors
    /// [`Error::TargetNotFound`], [`Error::TargetNotScalable`], or the API error.
    pub async fn get_scale(&self, client: &Client) -> Result<Scale, Error> {
        let api = self.api(client);
        match api.get_scale(&self.name).await {
            Ok(scale) => Ok(scale),
            Err(e) if is_not_found(&e) || is_method_not_allowed(&e) => {
                match api.get_opt(&self.name).await {
                    Ok(None) => Err(self.not_found()),
                    Ok(Some(_)) => Err(Error::TargetNotScalable {
                        kind: self.kind_string(),
                        namespace: self.namespace.clone(),
                        name: self.name.clone(),
                    }),
                    Err(e) => Err(Error::kube(format!("reading {}", self.describe()), e)),
                }
            }
            Err(e) => Err(Error::kube(
                format!("reading /scale of {}", self.describe()),
                e,
            )),
        }
    }

    /// Sets the target's replicas through `/scale`.
    ///
    /// # Errors
    /// The API error.
    pub async fn set_replicas(&self, client: &Client, replicas: i32) -> Result<(), Error> {
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        self.api(client)
            .patch_scale(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                Error::kube(
                    format!("scaling {} to {replicas} replicas", self.describe()),
                    e,
                )
            })?;
        Ok(())
    }

    /// `apps/v1.Deployment ns/name`.
    pub fn describe(&self) -> String {
        format!("{} {}/{}", self.kind_string(), self.namespace, self.name)
    }
}

fn is_method_not_allowed(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 405)
}

/// Resolves the target type of `so`: Deployment and StatefulSet without asking the API
/// server, any other kind through discovery.
///
/// # Errors
/// An unparsable apiVersion, or a kind discovery does not know.
pub async fn resolve_target(client: &Client, so: &ScaledObject) -> Result<Target, Error> {
    let spec: &ScaledObjectSpec = &so.spec;
    let gvkr = match so.scale_target_gvkr() {
        Ok(gvkr) => gvkr,
        Err(GvkrError::NeedsDiscovery { .. }) => {
            let t = &spec.scale_target_ref;
            let gvk = parse_gvk(
                t.api_version.as_deref().unwrap_or_default(),
                t.kind.as_deref().unwrap_or_default(),
            )?;
            let kube_gvk = GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
            let (ar, _) = kube::discovery::pinned_kind(client, &kube_gvk)
                .await
                .map_err(|_| Error::UnknownTargetKind {
                    api_version: kube_gvk.api_version(),
                    kind: gvk.kind.clone(),
                })?;
            gvk.with_resource(ar.plural)
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Target {
        kind: TargetKind::of(gvkr),
        namespace: so.namespace().unwrap_or_default(),
        name: spec.scale_target_ref.name.clone(),
    })
}

/// Why the current replica count could not be read (`Ready=False ErrorGettingCurrentReplicas`).
#[derive(Debug, thiserror::Error)]
pub enum ReplicasError {
    /// The target is not in the cache (it does not exist).
    #[error("target {0} not found")]
    NotFound(String),
    /// The cache did not become ready.
    #[error("the watch cache of {0} did not become ready")]
    CacheNotReady(String),
    /// Reading `/scale` failed.
    #[error(transparent)]
    Scale(#[from] Error),
}

type CacheKey = (String, String, Option<String>);

/// What a loop reads of one target: `spec.replicas` and `status.readyReplicas` (`None`: unset
/// or not a number), and the list that last showed it ([`Entries::epoch`]).
#[derive(Clone, Copy, Debug)]
struct Replicas {
    spec: Option<i64>,
    ready: Option<i64>,
    epoch: u32,
}

impl Replicas {
    fn of(obj: &DynamicObject, epoch: u32) -> Replicas {
        Replicas {
            spec: obj.data.pointer("/spec/replicas").and_then(|v| v.as_i64()),
            ready: obj
                .data
                .pointer("/status/readyReplicas")
                .and_then(|v| v.as_i64()),
            epoch,
        }
    }
}

/// The targets of one cache by namespace and name: two numbers each, not the objects. A
/// reflector store of `DynamicObject`s kept, per target, the object's metadata, a JSON value
/// and a key holding a copy of the kind's `ApiResource` (about 1.3 KB per target); this keeps
/// about 100 bytes.
#[derive(Debug, Default)]
struct Entries {
    by_name: HashMap<(Box<str>, Box<str>), Replicas>,
    /// Bumped by every (re-)list: what a list did not show keeps an older epoch and is
    /// removed at its end. Objects are replaced in place, so a re-list never holds the
    /// collection twice.
    epoch: u32,
}

fn key_of(obj: &DynamicObject) -> (Box<str>, Box<str>) {
    (
        obj.metadata.namespace.as_deref().unwrap_or_default().into(),
        obj.metadata.name.as_deref().unwrap_or_default().into(),
    )
}

impl Entries {
    fn apply(&mut self, event: watcher::Event<DynamicObject>) -> bool {
        match event {
            watcher::Event::Init => {
                self.epoch = self.epoch.wrapping_add(1);
                false
            }
            watcher::Event::InitApply(obj) | watcher::Event::Apply(obj) => {
                self.by_name
                    .insert(key_of(&obj), Replicas::of(&obj, self.epoch));
                false
            }
            watcher::Event::Delete(obj) => {
                self.by_name.remove(&key_of(&obj));
                false
            }
            watcher::Event::InitDone => {
                let epoch = self.epoch;
                self.by_name.retain(|_, r| r.epoch == epoch);
                self.by_name.shrink_to_fit();
                true
            }
        }
    }

    fn get(&self, namespace: &str, name: &str) -> Option<Replicas> {
        // A borrowed key would need a map keyed by a type that borrows as a pair; the lookup's
        // two small boxes are cheaper than the reflector's `ObjectRef` (which cloned the kind's
        // `ApiResource`, five strings, on every lookup).
        self.by_name.get(&(namespace.into(), name.into())).copied()
    }
}

/// One target cache and whether it has listed its objects.
#[derive(Clone)]
struct Cache {
    entries: Arc<std::sync::RwLock<Entries>>,
    listed: Listed,
}

impl Cache {
    fn get(&self, target: &Target) -> Option<Replicas> {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&target.namespace, &target.name)
    }
}

/// Watch caches of scale targets, one per (group, kind) and watched namespace (one for all
/// namespaces with [`WatchScope::All`]), started on first use and stopped with the token.
#[derive(Clone)]
pub struct TargetCache {
    client: Client,
    scope: WatchScope,
    caches: Arc<Mutex<HashMap<CacheKey, Cache>>>,
    shutdown: CancellationToken,
}

impl TargetCache {
    /// Caches over `client`, watching the namespaces of `scope`, stopped by `shutdown`.
    pub fn new(client: Client, scope: WatchScope, shutdown: CancellationToken) -> Self {
        TargetCache {
            client,
            scope,
            caches: Arc::default(),
            shutdown,
        }
    }

    /// The cache of `ar` covering `namespace`: the cluster-wide one, or that namespace's.
    async fn store(&self, ar: &ApiResource, namespace: &str) -> Cache {
        let watched = match &self.scope {
            WatchScope::All => None,
            WatchScope::Namespaces(_) => Some(namespace.to_string()),
        };
        let key = (ar.group.clone(), ar.kind.clone(), watched.clone());
        let mut caches = self.caches.lock().await;
        if let Some(cache) = caches.get(&key) {
            return cache.clone();
        }
        let api: Api<DynamicObject> = match &watched {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        };
        let entries = Arc::new(std::sync::RwLock::new(Entries::default()));
        let (listed_tx, listed_rx) = tokio::sync::watch::channel(false);
        let stream = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
        let shutdown = self.shutdown.clone();
        let writer = entries.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                let next = tokio::select! {
                    () = shutdown.cancelled() => break,
                    next = stream.next() => next,
                };
                match next {
                    None => break,
                    Some(Ok(event)) => {
                        let listed = writer
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .apply(event);
                        if listed && !*listed_tx.borrow() {
                            let _ = listed_tx.send(true);
                        }
                    }
                    // Retried with the backoff; the entries stay as they were.
                    Some(Err(e)) => tracing::debug!(error = %e, "target watch"),
                }
            }
        });
        let cache = Cache {
            entries,
            listed: Listed::new(listed_rx),
        };
        caches.insert(key, cache.clone());
        cache
    }

    /// The `spec.replicas` of a Deployment or StatefulSet target (kinds that always have
    /// `/scale`) when its cache has listed and holds it; `None` otherwise, without waiting: the
    /// reconciler then checks `/scale` itself.
    pub async fn cached_apps_replicas(&self, target: &Target) -> Option<i32> {
        if target.gvkr().group != "apps" {
            return None;
        }
        let cache = self.store(target.api_resource(), &target.namespace).await;
        if !cache.listed.is_listed() {
            return None;
        }
        let replicas = cache.get(target)?.spec;
        // Unset means 1 for these kinds.
        Some(replicas.map_or(1, |n| i32::try_from(n).unwrap_or(i32::MAX)))
    }

    /// The target's ready pods (`status.readyReplicas`), when the cache has them.
    pub async fn ready_replicas(&self, target: &Target) -> Option<i32> {
        let cache = self.store(target.api_resource(), &target.namespace).await;
        let n = cache.get(target)?.ready?;
        i32::try_from(n).ok()
    }

    /// The target's current `spec.replicas` (KEDA's `GetCurrentReplicas`): from the cache;
    /// unset means 1 for the `apps` kinds; for other kinds without `spec.replicas`, `/scale`.
    ///
    /// # Errors
    /// See [`ReplicasError`].
    pub async fn current_replicas(&self, target: &Target) -> Result<i32, ReplicasError> {
        let cache = self.store(target.api_resource(), &target.namespace).await;
        if !tokio::time::timeout(CACHE_READY_TIMEOUT, cache.listed.wait())
            .await
            .unwrap_or(false)
        {
            return Err(ReplicasError::CacheNotReady(target.kind_string()));
        }
        let Some(replicas) = cache.get(target) else {
            return Err(ReplicasError::NotFound(target.describe()));
        };
        match replicas.spec {
            Some(n) => Ok(i32::try_from(n).unwrap_or(i32::MAX)),
            None if target.gvkr().group == "apps" => Ok(1),
            None => {
                let scale = target.get_scale(&self.client).await?;
                Ok(scale.spec.and_then(|s| s.replicas).unwrap_or(0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(
        ns: &str,
        name: &str,
        replicas: Option<i64>,
        ready: Option<i64>,
    ) -> DynamicObject {
        let mut data = serde_json::json!({ "spec": {}, "status": {} });
        if let Some(r) = replicas {
            data["spec"]["replicas"] = r.into();
        }
        if let Some(r) = ready {
            data["status"]["readyReplicas"] = r.into();
        }
        let mut obj = DynamicObject::new(
            name,
            &ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
        )
        .within(ns);
        obj.data = data;
        obj
    }

    fn read(entries: &Entries, ns: &str, name: &str) -> Option<(Option<i64>, Option<i64>)> {
        entries.get(ns, name).map(|r| (r.spec, r.ready))
    }

    #[test]
    fn keeps_the_two_numbers_by_namespace_and_name() {
        let mut entries = Entries::default();
        assert!(!entries.apply(watcher::Event::Init));
        entries.apply(watcher::Event::InitApply(deployment(
            "a",
            "w",
            Some(2),
            Some(1),
        )));
        entries.apply(watcher::Event::InitApply(deployment("b", "w", None, None)));
        assert!(
            entries.apply(watcher::Event::InitDone),
            "a list's end says listed"
        );
        assert_eq!(read(&entries, "a", "w"), Some((Some(2), Some(1))));
        assert_eq!(read(&entries, "b", "w"), Some((None, None)));
        assert_eq!(read(&entries, "a", "x"), None);

        entries.apply(watcher::Event::Apply(deployment("a", "w", Some(0), None)));
        assert_eq!(read(&entries, "a", "w"), Some((Some(0), None)));
        entries.apply(watcher::Event::Delete(deployment("b", "w", None, None)));
        assert_eq!(read(&entries, "b", "w"), None);
    }

    #[test]
    fn a_relist_replaces_in_place_and_drops_what_it_did_not_show() {
        let mut entries = Entries::default();
        entries.apply(watcher::Event::Init);
        entries.apply(watcher::Event::InitApply(deployment(
            "a",
            "kept",
            Some(1),
            Some(1),
        )));
        entries.apply(watcher::Event::InitApply(deployment(
            "a",
            "gone",
            Some(3),
            Some(3),
        )));
        entries.apply(watcher::Event::InitDone);

        entries.apply(watcher::Event::Init);
        entries.apply(watcher::Event::InitApply(deployment(
            "a",
            "kept",
            Some(5),
            Some(4),
        )));
        // Mid-list, what the list has not reached yet still answers.
        assert_eq!(read(&entries, "a", "gone"), Some((Some(3), Some(3))));
        entries.apply(watcher::Event::InitDone);
        assert_eq!(read(&entries, "a", "kept"), Some((Some(5), Some(4))));
        assert_eq!(read(&entries, "a", "gone"), None);
        assert_eq!(entries.by_name.len(), 1);
    }
}
