//! What scalers may read of the cluster itself: pods (for `kubernetes-workload`) and
//! EndpointSlices (for `metrics-api` with `aggregateFromKubeServiceEndpoints`).
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
        "no cluster view: this trigger reads pods or EndpointSlices through the operator's \
         shared watches, and it was built without them"
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
