//! What scalers may read of the cluster itself: pods (for `kubernetes-workload`),
//! EndpointSlices (for `metrics-api` with `aggregateFromKubeServiceEndpoints`), and one key of
//! a ConfigMap or Secret of the object's own namespace (for `kubernetes-resource`).
//!
//! Scalers never list the API themselves. The operator gives every scaler the same
//! [`ClusterView`] (through [`crate::ScalerContext::cluster`]), backed by ONE pod watch and ONE
//! EndpointSlice watch for the whole process, started on first use; a poll reads the watch's
//! in-memory index. So 1,000 triggers cost one watch, not 1,000 LIST calls per polling
//! interval. Tests use [`InMemoryCluster`], fed directly.

pub mod index;
pub mod selector;

use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;

pub use self::index::{EndpointSliceIndex, PodCount, PodIndex, SlicePort, SliceSummary};
pub use self::selector::{LabelSelector, SelectorError};

impl crate::remote::Classify for ClusterViewError {
    fn classify(&self) -> crate::remote::Failure {
        // The operator's own watches of the Kubernetes API, not an event source.
        crate::remote::Failure::local(self.to_string())
    }
}

/// Why the cluster view cannot answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterViewError {
    /// The scaler was built without a cluster view (outside the operator).
    #[error(
        "no cluster view: this trigger reads pods, EndpointSlices, ConfigMaps or Secrets \
         through the operator's shared watches, and it was built without them"
    )]
    Unavailable,
    /// The watch has not finished its first list in time.
    #[error(
        "the {resource} watch{} has not listed yet after {}s{}",
        namespace.as_deref().map(|ns| format!(" of namespace {ns}")).unwrap_or_default(),
        waited.as_secs(),
        last_error.as_deref().map(|e| format!(" (last error: {e}; does the operator's ServiceAccount have list and watch on {resource}?)")).unwrap_or_default()
    )]
    NotSynced {
        /// `pods` or `endpointslices`.
        resource: String,
        /// The namespace of the watch; `None` for a cluster-wide watch.
        namespace: Option<String>,
        /// How long the caller waited.
        waited: Duration,
        /// The watch's last error, if any.
        last_error: Option<String>,
    },
}

/// Read access to the pods and EndpointSlices of the cluster, shared by every scaler.
///
/// Implementations answer from memory once their watch has listed; the first call for a
/// resource (or namespace) may start a watch and wait, bounded, for its first list. Calls are
/// cancellation-safe.
#[async_trait]
pub trait ClusterView: Send + Sync {
    /// The unfinished pods (phase neither `Succeeded` nor `Failed`) of `namespace` that
    /// `selector` matches, and the number of distinct nodes they run on.
    ///
    /// # Errors
    /// The pod watch has not listed in time (see [`ClusterViewError::NotSynced`]).
    async fn count_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<PodCount, ClusterViewError>;

    /// The EndpointSlices of Service `namespace/service`, sorted by slice name.
    ///
    /// # Errors
    /// The EndpointSlice watch has not listed in time.
    async fn service_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<SliceSummary>, ClusterViewError>;

    /// Key `key` of the ConfigMap or Secret `namespace/name`. A view that does not read such
    /// objects answers [`ClusterViewError::Unavailable`] (the default).
    ///
    /// # Errors
    /// The watch of that kind in `namespace` has not listed in time, or there is none.
    async fn data(
        &self,
        _kind: DataKind,
        _namespace: &str,
        _name: &str,
        _key: &str,
    ) -> Result<DataLookup, ClusterViewError> {
        Err(ClusterViewError::Unavailable)
    }
}

/// The kinds of object [`ClusterView::data`] reads a key of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataKind {
    /// A ConfigMap (`data`, then `binaryData`).
    ConfigMap,
    /// A Secret (`data`).
    Secret,
}

impl DataKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
        }
    }
}

/// What [`ClusterView::data`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataLookup {
    /// The key's value.
    Value(Vec<u8>),
    /// No such object in the namespace.
    NoObject,
    /// The object has no such key.
    NoKey,
}

/// Data keys of ConfigMaps or Secrets by namespace and name, as one watch feeds them.
#[derive(Clone, Debug, Default)]
pub struct DataIndex {
    objects:
        std::collections::HashMap<(String, String), std::collections::BTreeMap<String, Vec<u8>>>,
}

impl DataIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores the keys of object `namespace/name`.
    pub fn apply(
        &mut self,
        namespace: &str,
        name: &str,
        data: std::collections::BTreeMap<String, Vec<u8>>,
    ) {
        self.objects
            .insert((namespace.to_string(), name.to_string()), data);
    }

    /// Forgets object `namespace/name`.
    pub fn delete(&mut self, namespace: &str, name: &str) {
        self.objects
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Key `key` of object `namespace/name`.
    pub fn lookup(&self, namespace: &str, name: &str, key: &str) -> DataLookup {
        match self.objects.get(&(namespace.to_string(), name.to_string())) {
            None => DataLookup::NoObject,
            Some(data) => data
                .get(key)
                .map_or(DataLookup::NoKey, |v| DataLookup::Value(v.clone())),
        }
    }
}

/// The cluster view a scaler gets: the operator's, or none (the default) outside it.
#[derive(Clone, Default)]
pub struct ClusterHandle(Option<Arc<dyn ClusterView>>);

impl ClusterHandle {
    /// A handle on `view`.
    pub fn new(view: Arc<dyn ClusterView>) -> Self {
        Self(Some(view))
    }

    /// The view.
    ///
    /// # Errors
    /// [`ClusterViewError::Unavailable`] when there is none.
    pub fn view(&self) -> Result<&Arc<dyn ClusterView>, ClusterViewError> {
        self.0.as_ref().ok_or(ClusterViewError::Unavailable)
    }

    /// Whether there is a view.
    pub fn is_available(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Debug for ClusterHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "ClusterHandle(available)"
        } else {
            "ClusterHandle(none)"
        })
    }
}

/// A [`ClusterView`] over indexes the caller feeds directly: for tests, and for embedding
/// keda-rs scalers where something else watches the cluster.
#[derive(Debug, Default)]
pub struct InMemoryCluster {
    pods: RwLock<PodIndex>,
    slices: RwLock<EndpointSliceIndex>,
    data: RwLock<std::collections::HashMap<DataKind, DataIndex>>,
}

impl InMemoryCluster {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores (or, once finished, forgets) `pod`.
    pub fn apply_pod(&self, pod: &Pod) {
        self.pods
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .apply(pod);
    }

    /// Forgets pod `namespace/name`.
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        self.pods
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .delete(namespace, name);
    }

    /// Stores `slice`.
    pub fn apply_slice(&self, slice: &EndpointSlice) {
        self.slices
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .apply(slice);
    }

    /// Stores the keys of the ConfigMap or Secret `namespace/name`.
    pub fn apply_data(&self, kind: DataKind, namespace: &str, name: &str, data: &[(&str, &[u8])]) {
        self.data
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(kind)
            .or_default()
            .apply(
                namespace,
                name,
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_vec()))
                    .collect(),
            );
    }

    /// Forgets slice `namespace/name`.
    pub fn delete_slice(&self, namespace: &str, name: &str) {
        self.slices
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .delete(namespace, name);
    }
}

#[async_trait]
impl ClusterView for InMemoryCluster {
    async fn count_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<PodCount, ClusterViewError> {
        Ok(self
            .pods
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .count(namespace, selector))
    }

    async fn service_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<SliceSummary>, ClusterViewError> {
        Ok(self
            .slices
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .service(namespace, service))
    }

    async fn data(
        &self,
        kind: DataKind,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<DataLookup, ClusterViewError> {
        Ok(self
            .data
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&kind)
            .map_or(DataLookup::NoObject, |index| {
                index.lookup(namespace, name, key)
            }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_synced_names_the_watch_and_the_rbac_to_check() {
        let err = ClusterViewError::NotSynced {
            resource: "pods".into(),
            namespace: Some("team".into()),
            waited: Duration::from_secs(30),
            last_error: Some("403 Forbidden".into()),
        };
        assert_eq!(
            err.to_string(),
            "the pods watch of namespace team has not listed yet after 30s (last error: 403 \
             Forbidden; does the operator's ServiceAccount have list and watch on pods?)"
        );
        assert!(ClusterHandle::default().view().is_err());
    }
}
