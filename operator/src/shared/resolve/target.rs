//! Caches of scale targets' pod templates, one per target type, started on first use.
//!
//! Only targets whose environment a trigger needs (a `<name>FromEnv` parameter or a
//! TriggerAuthentication `env` entry) are looked up, so a cluster whose triggers never read
//! the environment never watches workloads at all. Every kind is read as an untyped object
//! through `spec.template.spec.containers` (KEDA's "PodSpecable" duck type), and only the
//! containers' names, `env` and `envFrom` are kept.

use std::collections::HashMap;
use std::sync::Arc;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use super::cache::{self, Cache};
use super::config::WatchScope;
use super::keys::{DepKey, ObjKey};
use super::notify::Notifier;
use super::projection::{self, TargetTemplate};

/// The cache of one target type.
pub(crate) struct TargetKind {
    /// `group/version/plural`, the dependency key prefix.
    pub(crate) id: String,
    pub(crate) cache: Arc<Cache<TargetTemplate>>,
}

pub(crate) struct Targets {
    client: Client,
    scope: WatchScope,
    notifier: Arc<Notifier>,
    cancel: CancellationToken,
    /// Async: discovery runs while it is held, so one type is never discovered twice at once.
    kinds: tokio::sync::Mutex<HashMap<(String, String, String), Arc<TargetKind>>>,
}

impl Targets {
    pub(crate) fn new(
        client: Client,
        scope: WatchScope,
        notifier: Arc<Notifier>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            client,
            scope,
            notifier,
            cancel,
            kinds: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The cache for targets of `gvk`, discovering its resource and starting its watches on
    /// first use.
    ///
    /// # Errors
    /// Discovery failed (unknown kind, API server unreachable); the message says which.
    pub(crate) async fn kind(&self, gvk: &GroupVersionKind) -> Result<Arc<TargetKind>, String> {
        let key = (gvk.group.clone(), gvk.version.clone(), gvk.kind.clone());
        let mut kinds = self.kinds.lock().await;
        if let Some(kind) = kinds.get(&key) {
            return Ok(Arc::clone(kind));
        }
        let (resource, _) = kube::discovery::pinned_kind(&self.client, gvk)
            .await
            .map_err(|e| {
                format!(
                    "kind {} of {} is not served: {e}",
                    gvk.kind,
                    api_version(gvk)
                )
            })?;
        let kind = Arc::new(self.start(resource));
        kinds.insert(key, Arc::clone(&kind));
        Ok(kind)
    }

    fn start(&self, resource: ApiResource) -> TargetKind {
        let id = format!(
            "{}/{}/{}",
            resource.group, resource.version, resource.plural
        );
        let cache = Arc::new(Cache::new(
            resource.plural.clone(),
            self.scope.clone(),
            cache::watch_count(&self.scope),
        ));
        let notifier = Arc::clone(&self.notifier);
        let dep_id = id.clone();
        let on_change: cache::ChangeFn = Arc::new(move |key: &ObjKey| {
            notifier.changed(DepKey::Target(dep_id.clone(), key.clone()))
        });
        let client = self.client.clone();
        cache::spawn_watches(
            &cache,
            move |ns| match ns {
                Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
                None => Api::<DynamicObject>::all_with(client.clone(), &resource),
            },
            &watcher::Config::default(),
            projection::target_template,
            on_change,
            &self.cancel,
        );
        TargetKind { id, cache }
    }
}

pub(crate) fn api_version(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        gvk.version.clone()
    } else {
        format!("{}/{}", gvk.group, gvk.version)
    }
}
