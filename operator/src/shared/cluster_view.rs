//! The operator's [`ClusterView`]: ONE pod watch and ONE EndpointSlice watch for the whole
//! process (one per namespace when `WATCH_NAMESPACE` lists namespaces), each started on the
//! first call that needs it, feeding the small indexes of [`keda_scalers::cluster::index`].
//!
//! Every `kubernetes-workload` trigger and every `metrics-api` trigger with
//! `aggregateFromKubeServiceEndpoints` reads these indexes, so a poll makes no API request:
//! 1,000 triggers over 10,000 pods cost one LIST at start (paged), one long-lived WATCH, and
//! nothing per polling interval. KEDA lists the pods of the namespace on every poll of every
//! trigger.
//!
//! The pod watch asks only for unfinished pods (field selector
//! `status.phase!=Succeeded,status.phase!=Failed`); a pod that finishes leaves the selection,
//! which the API server reports as a deletion. The index also drops finished pods itself, so a
//! server that ignores the field selector gives the same counts.
//!
//! ConfigMaps and Secrets (for `kubernetes-resource`) are watched per namespace, never
//! cluster-wide, and only in the namespaces whose triggers ask for them.
//!
//! The watches run until the last clone of the view is dropped. They keep running on a replica
//! that lost leadership (the binary creates the view once); that costs their memory, not
//! requests per interval.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_scalers::cluster::{
    ClusterHandle, ClusterView, ClusterViewError, DataIndex, DataKind, DataLookup,
    EndpointSliceIndex, LabelSelector, PodCount, PodIndex, SliceSummary,
};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::shared::resolve::WatchScope;

/// How long a poll waits for a watch's first list before it fails (below the scale loop's
/// read timeout, so the error that reaches the user is this one, naming the watch).
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// The field selector of the pod watch: finished pods are never counted.
pub const UNFINISHED_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// An index a watch feeds.
trait WatchIndex<K>: Default + Send + Sync + 'static {
    fn apply(&mut self, obj: &K);
    fn delete(&mut self, namespace: &str, name: &str);
}

impl WatchIndex<Pod> for PodIndex {
    fn apply(&mut self, pod: &Pod) {
        PodIndex::apply(self, pod);
    }
    fn delete(&mut self, namespace: &str, name: &str) {
        PodIndex::delete(self, namespace, name);
    }
}

impl WatchIndex<EndpointSlice> for EndpointSliceIndex {
    fn apply(&mut self, slice: &EndpointSlice) {
        EndpointSliceIndex::apply(self, slice);
    }
    fn delete(&mut self, namespace: &str, name: &str) {
        EndpointSliceIndex::delete(self, namespace, name);
    }
}

impl WatchIndex<ConfigMap> for DataIndex {
    fn apply(&mut self, map: &ConfigMap) {
        let mut data: std::collections::BTreeMap<String, Vec<u8>> = map
            .binary_data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect();
        // `data` wins over `binaryData` (the API server refuses a key in both).
        for (k, v) in map.data.iter().flatten() {
            data.insert(k.clone(), v.clone().into_bytes());
        }
        DataIndex::apply(
            self,
            &map.namespace().unwrap_or_default(),
            &map.name_any(),
            data,
        );
    }
    fn delete(&mut self, namespace: &str, name: &str) {
        DataIndex::delete(self, namespace, name);
    }
}

impl WatchIndex<Secret> for DataIndex {
    fn apply(&mut self, secret: &Secret) {
        let data = secret
            .data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect();
        DataIndex::apply(
            self,
            &secret.namespace().unwrap_or_default(),
            &secret.name_any(),
            data,
        );
    }
    fn delete(&mut self, namespace: &str, name: &str) {
        DataIndex::delete(self, namespace, name);
    }
}

/// The index of one watch (cluster-wide, or one namespace), and whether it has listed.
struct Partition<I> {
    index: RwLock<I>,
    synced: tokio::sync::watch::Sender<bool>,
    last_error: Mutex<Option<String>>,
}

impl<I: Default> Partition<I> {
    fn new() -> Self {
        Self {
            index: RwLock::new(I::default()),
            synced: tokio::sync::watch::channel(false).0,
            last_error: Mutex::new(None),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, I> {
        // Every write is one whole apply, delete or swap: a poisoned lock is still consistent.
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, I> {
        self.index.write().unwrap_or_else(|e| e.into_inner())
    }

    fn set_error(&self, error: Option<String>) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = error;
    }
}

type Partitions<I> = Mutex<HashMap<Option<String>, Arc<Partition<I>>>>;

struct Inner {
    client: Client,
    scope: WatchScope,
    sync_timeout: Duration,
    pods: Partitions<PodIndex>,
    slices: Partitions<EndpointSliceIndex>,
    /// Per namespace always (never cluster-wide): only the namespaces whose triggers read a
    /// ConfigMap or Secret pay for its watch.
    config_maps: Partitions<DataIndex>,
    secrets: Partitions<DataIndex>,
    cancel: CancellationToken,
    _stop: DropGuard,
}

/// The kube-backed [`ClusterView`]. Cheap to clone; clones share the watches, which stop when
/// the last clone is dropped.
#[derive(Clone)]
pub struct KubeClusterView {
    inner: Arc<Inner>,
}

impl Debug for KubeClusterView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = |p: &Partitions<PodIndex>| p.lock().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("KubeClusterView")
            .field("scope", &self.inner.scope)
            .field("pod_watches", &count(&self.inner.pods))
            .finish_non_exhaustive()
    }
}

impl KubeClusterView {
    /// A view over `client` covering `scope`: one cluster-wide watch per resource for
    /// [`WatchScope::All`], else one per namespace asked for. Starts nothing yet.
    pub fn new(client: Client, scope: WatchScope) -> Self {
        Self::with_sync_timeout(client, scope, DEFAULT_SYNC_TIMEOUT)
    }

    /// [`KubeClusterView::new`] with another bound on the wait for a watch's first list.
    pub fn with_sync_timeout(client: Client, scope: WatchScope, sync_timeout: Duration) -> Self {
        let cancel = CancellationToken::new();
        Self {
            inner: Arc::new(Inner {
                client,
                scope,
                sync_timeout,
                pods: Mutex::new(HashMap::new()),
                slices: Mutex::new(HashMap::new()),
                config_maps: Mutex::new(HashMap::new()),
                secrets: Mutex::new(HashMap::new()),
                _stop: cancel.clone().drop_guard(),
                cancel,
            }),
        }
    }

    /// The partition key of `namespace`: `None` (the cluster-wide watch) for
    /// [`WatchScope::All`].
    fn key(&self, namespace: &str) -> Option<String> {
        match self.inner.scope {
            WatchScope::All => None,
            WatchScope::Namespaces(_) => Some(namespace.to_string()),
        }
    }

    /// The partition of `key` (see [`KubeClusterView::key`]), starting its watch on first use.
    fn partition<K, I>(
        &self,
        partitions: &Partitions<I>,
        key: Option<String>,
        config: impl FnOnce() -> watcher::Config,
    ) -> (Option<String>, Arc<Partition<I>>)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
        I: WatchIndex<K>,
    {
        let mut map = partitions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = map.get(&key) {
            return (key, Arc::clone(found));
        }
        let partition = Arc::new(Partition::new());
        map.insert(key.clone(), Arc::clone(&partition));
        drop(map);
        let api: Api<K> = match &key {
            Some(ns) => Api::namespaced(self.inner.client.clone(), ns),
            None => Api::all(self.inner.client.clone()),
        };
        let task = run_watch(api, config(), Arc::clone(&partition), key.clone());
        let cancel = self.inner.cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = task => {}
            }
        });
        (key, partition)
    }

    /// Waits (bounded) until `partition` has listed once.
    async fn synced<I>(
        &self,
        partition: &Partition<I>,
        resource: &str,
        namespace: Option<String>,
    ) -> Result<(), ClusterViewError> {
        let mut synced = partition.synced.subscribe();
        if *synced.borrow_and_update() {
            return Ok(());
        }
        let waited = tokio::time::timeout(self.inner.sync_timeout, synced.wait_for(|s| *s)).await;
        if matches!(waited, Ok(Ok(_))) {
            return Ok(());
        }
        Err(ClusterViewError::NotSynced {
            resource: resource.to_string(),
            namespace,
            waited: self.inner.sync_timeout,
            last_error: partition
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        })
    }
}

#[async_trait]
impl ClusterView for KubeClusterView {
    async fn count_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<PodCount, ClusterViewError> {
        let (key, partition) =
            self.partition::<Pod, PodIndex>(&self.inner.pods, self.key(namespace), || {
                watcher::Config::default().fields(UNFINISHED_PODS)
            });
        self.synced(&partition, "pods", key).await?;
        Ok(partition.read().count(namespace, selector))
    }

    async fn service_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<SliceSummary>, ClusterViewError> {
        let (key, partition) = self.partition::<EndpointSlice, EndpointSliceIndex>(
            &self.inner.slices,
            self.key(namespace),
            watcher::Config::default,
        );
        self.synced(&partition, "endpointslices", key).await?;
        Ok(partition.read().service(namespace, service))
    }

    async fn data(
        &self,
        kind: DataKind,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<DataLookup, ClusterViewError> {
        let scope = Some(namespace.to_string());
        let (watch, partition) = match kind {
            DataKind::ConfigMap => self.partition::<ConfigMap, DataIndex>(
                &self.inner.config_maps,
                scope,
                watcher::Config::default,
            ),
            DataKind::Secret => self.partition::<Secret, DataIndex>(
                &self.inner.secrets,
                scope,
                watcher::Config::default,
            ),
        };
        let resource = match kind {
            DataKind::ConfigMap => "configmaps",
            DataKind::Secret => "secrets",
        };
        self.synced(&partition, resource, watch).await?;
        Ok(partition.read().lookup(namespace, name, key))
    }
}

/// Feeds `partition` from a watch until the stream ends (never, with backoff) or the task is
/// cancelled. A re-list is built aside and swapped in at its end, so readers never see half a
/// list.
async fn run_watch<K, I>(
    api: Api<K>,
    config: watcher::Config,
    partition: Arc<Partition<I>>,
    namespace: Option<String>,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    I: WatchIndex<K>,
{
    let resource = K::plural(&()).to_string();
    let scope = namespace.as_deref().unwrap_or("*");
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    let mut relist: Option<I> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Apply(obj)) => partition.write().apply(&obj),
            Ok(Event::Delete(obj)) => partition
                .write()
                .delete(&obj.namespace().unwrap_or_default(), &obj.name_any()),
            Ok(Event::Init) => relist = Some(I::default()),
            Ok(Event::InitApply(obj)) => relist.get_or_insert_with(I::default).apply(&obj),
            Ok(Event::InitDone) => {
                *partition.write() = relist.take().unwrap_or_default();
                partition.set_error(None);
                if !partition.synced.send_replace(true) {
                    tracing::debug!(%resource, namespace = scope, "cluster view watch listed");
                }
            }
            Err(error) => {
                // kube's watcher errors carry API statuses and decode errors, never object data.
                tracing::warn!(%resource, namespace = scope, %error, "cluster view watch failed, retrying with backoff");
                partition.set_error(Some(error.to_string()));
            }
        }
    }
}

/// `given` when it holds a view, else a new [`KubeClusterView`] over `client` for `scope`:
/// how each controller gets a view when its caller did not share one.
pub fn handle_or_new(given: &ClusterHandle, client: &Client, scope: &WatchScope) -> ClusterHandle {
    if given.is_available() {
        given.clone()
    } else {
        ClusterHandle::new(Arc::new(KubeClusterView::new(
            client.clone(),
            scope.clone(),
        )))
    }
}
