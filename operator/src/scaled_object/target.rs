//! The scale target: its type, its `/scale` subresource, and its replica count read from a
//! watch cache.
//!
//! The reconciler checks the target through `/scale` (KEDA's `checkTargetResourceIsScalable`),
//! telling a missing target from a target without `/scale`. The scale loops read the current
//! replica count from one reflector per target kind (and watched namespace) instead of a GET
//! per poll, and write `/scale` only when the decision changes the count.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::autoscaling::v1::Scale;
use keda_api::gvkr::{GroupVersionKindResource, GvkrError, parse_gvk};
use keda_api::{ScaledObject, ScaledObjectSpec};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::shared::error::{Error, is_not_found};
use crate::shared::resolve::WatchScope;
use crate::shared::watch::Listed;

/// Where a cached target keeps `spec.replicas` and `status.readyReplicas` (its `data` is
/// trimmed to `[replicas, ready]`).
const SPEC_REPLICAS: usize = 0;
const READY_REPLICAS: usize = 1;

/// How long a loop waits for a new target cache to list its objects.
const CACHE_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The scale target of an object, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `status.scaleTargetGVKR`.
    pub gvkr: GroupVersionKindResource,
    /// For the dynamic API.
    pub api_resource: ApiResource,
    /// Namespace (the object's).
    pub namespace: String,
    /// `scaleTargetRef.name`.
    pub name: String,
}

impl Target {
    /// `status.scaleTargetKind`, e.g. `apps/v1.Deployment`.
    pub fn kind_string(&self) -> String {
        self.gvkr.gvk_string()
    }

    fn api(&self, client: &Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), &self.namespace, &self.api_resource)
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
    let api_resource = ApiResource {
        group: gvkr.group.clone(),
        version: gvkr.version.clone(),
        api_version: gvkr.api_version(),
        kind: gvkr.kind.clone(),
        plural: gvkr.resource.clone(),
    };
    Ok(Target {
        gvkr,
        api_resource,
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

/// One target cache and whether it has listed its objects.
#[derive(Clone)]
struct Cache {
    store: Store<DynamicObject>,
    listed: Listed,
}

/// Reflector-backed caches of scale targets, one per (group, kind) and watched namespace (one
/// for all namespaces with [`WatchScope::All`]), started on first use and stopped with the
/// token.
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
        let writer: Writer<DynamicObject> = Writer::new(ar.clone());
        let store = writer.as_reader();
        let api: Api<DynamicObject> = match &watched {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        };
        // Keep only what the loop reads, as `[spec.replicas, status.readyReplicas]` (one small
        // array, not two nested maps): a cache of 10,000 Deployments stays small.
        let stream = watcher(api, watcher::Config::default().any_semantic())
            .default_backoff()
            .modify(|obj: &mut DynamicObject| {
                let replicas = obj.data.pointer("/spec/replicas").cloned();
                let ready = obj.data.pointer("/status/readyReplicas").cloned();
                obj.data = serde_json::json!([replicas, ready]);
                obj.metadata.managed_fields = None;
                obj.metadata.annotations = None;
                obj.metadata.labels = None;
                obj.metadata.owner_references = None;
            })
            .reflect(writer);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    next = stream.next() => if next.is_none() { break },
                }
            }
        });
        let listed = Listed::of(store.clone(), self.shutdown.clone());
        let cache = Cache { store, listed };
        caches.insert(key, cache.clone());
        cache
    }

    /// The `spec.replicas` of a Deployment or StatefulSet target (kinds that always have
    /// `/scale`) when its cache has listed and holds it; `None` otherwise, without waiting: the
    /// reconciler then checks `/scale` itself.
    pub async fn cached_apps_replicas(&self, target: &Target) -> Option<i32> {
        if target.gvkr.group != "apps" {
            return None;
        }
        let cache = self.store(&target.api_resource, &target.namespace).await;
        if !cache.listed.is_listed() {
            return None;
        }
        let key = ObjectRef::new_with(&target.name, target.api_resource.clone())
            .within(&target.namespace);
        let obj = cache.store.get(&key)?;
        let replicas = obj.data.get(SPEC_REPLICAS).and_then(|v| v.as_i64());
        // Unset means 1 for these kinds.
        Some(replicas.map_or(1, |n| i32::try_from(n).unwrap_or(i32::MAX)))
    }

    /// The target's ready pods (`status.readyReplicas`), when the cache has them.
    pub async fn ready_replicas(&self, target: &Target) -> Option<i32> {
        let cache = self.store(&target.api_resource, &target.namespace).await;
        let key = ObjectRef::new_with(&target.name, target.api_resource.clone())
            .within(&target.namespace);
        let obj = cache.store.get(&key)?;
        let n = obj.data.get(READY_REPLICAS)?.as_i64()?;
        i32::try_from(n).ok()
    }

    /// The target's current `spec.replicas` (KEDA's `GetCurrentReplicas`): from the cache;
    /// unset means 1 for the `apps` kinds; for other kinds without `spec.replicas`, `/scale`.
    ///
    /// # Errors
    /// See [`ReplicasError`].
    pub async fn current_replicas(&self, target: &Target) -> Result<i32, ReplicasError> {
        let Cache { store, listed } = self.store(&target.api_resource, &target.namespace).await;
        if !tokio::time::timeout(CACHE_READY_TIMEOUT, listed.wait())
            .await
            .unwrap_or(false)
        {
            return Err(ReplicasError::CacheNotReady(target.kind_string()));
        }
        let key = ObjectRef::new_with(&target.name, target.api_resource.clone())
            .within(&target.namespace);
        let Some(obj) = store.get(&key) else {
            return Err(ReplicasError::NotFound(target.describe()));
        };
        match obj.data.get(SPEC_REPLICAS).and_then(|v| v.as_i64()) {
            Some(n) => Ok(i32::try_from(n).unwrap_or(i32::MAX)),
            None if target.gvkr.group == "apps" => Ok(1),
            None => {
                let scale = target.get_scale(&self.client).await?;
                Ok(scale.spec.and_then(|s| s.replicas).unwrap_or(0))
            }
        }
    }
}
