//! The in-memory indexes behind a [`super::ClusterView`]: pods by namespace and EndpointSlices by
//! namespace, each reduced to what the scalers read (labels, node and phase of a pod; ports and
//! endpoint addresses of a slice), so 10,000 pods cost a few megabytes, not the full objects.
//!
//! They are plain data structures fed by whoever watches the cluster: the operator's
//! reflectors, or a test.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::selector::LabelSelector;

/// The label an EndpointSlice carries naming its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What the scalers need of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSummary {
    /// Its labels, sorted by key.
    pub labels: Vec<(String, String)>,
    /// `spec.nodeName`, when scheduled.
    pub node: Option<String>,
    /// `status.phase` is `Succeeded` or `Failed`.
    pub finished: bool,
}

impl PodSummary {
    /// The summary of `pod`.
    pub fn of(pod: &Pod) -> Self {
        let mut labels: Vec<(String, String)> = pod
            .metadata
            .labels
            .as_ref()
            .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        labels.sort_unstable();
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        Self {
            labels,
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            finished: matches!(phase, Some("Succeeded" | "Failed")),
        }
    }
}

/// How many pods match, and on how many distinct nodes they run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodCount {
    /// Matching pods that are not finished.
    pub pods: usize,
    /// Distinct `spec.nodeName`s of those pods (unscheduled pods are on no node).
    pub nodes: usize,
}

/// Unfinished pods by namespace and name.
#[derive(Debug, Default)]
pub struct PodIndex {
    namespaces: HashMap<String, HashMap<String, PodSummary>>,
    len: usize,
}

impl PodIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `pod`, or forgets it when it is finished (a finished pod never counts again).
    pub fn apply(&mut self, pod: &Pod) {
        let (Some(namespace), Some(name)) = (&pod.metadata.namespace, &pod.metadata.name) else {
            return;
        };
        let summary = PodSummary::of(pod);
        if summary.finished {
            self.delete(namespace, name);
            return;
        }
        let pods = self.namespaces.entry(namespace.clone()).or_default();
        if pods.insert(name.clone(), summary).is_none() {
            self.len += 1;
        }
    }

    /// Forgets pod `namespace/name`.
    pub fn delete(&mut self, namespace: &str, name: &str) {
        if let Some(pods) = self.namespaces.get_mut(namespace) {
            if pods.remove(name).is_some() {
                self.len -= 1;
            }
            if pods.is_empty() {
                self.namespaces.remove(namespace);
            }
        }
    }

    /// The unfinished pods of `namespace` that `selector` matches, and their distinct nodes.
    pub fn count(&self, namespace: &str, selector: &LabelSelector) -> PodCount {
        let Some(pods) = self.namespaces.get(namespace) else {
            return PodCount::default();
        };
        let mut count = 0;
        let mut nodes: HashSet<&str> = HashSet::new();
        for pod in pods.values() {
            if selector.matches(pod.labels.as_slice()) {
                count += 1;
                if let Some(node) = &pod.node {
                    nodes.insert(node);
                }
            }
        }
        PodCount {
            pods: count,
            nodes: nodes.len(),
        }
    }

    /// The number of pods stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no pod is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A port of an EndpointSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlicePort {
    /// Its name, matching the Service port's name.
    pub name: Option<String>,
    /// The port number on the endpoints (the Service's target port).
    pub port: u16,
}

/// What the scalers need of an EndpointSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSummary {
    /// The Service it belongs to (its `kubernetes.io/service-name` label).
    pub service: String,
    /// `IPv4`, `IPv6` or `FQDN`.
    pub address_type: String,
    /// Its ports.
    pub ports: Vec<SlicePort>,
    /// The first address of each ready endpoint (`conditions.ready` true or unset, the API's
    /// rule for consumers).
    pub ready_addresses: Vec<String>,
}

impl SliceSummary {
    /// The summary of `slice`, or `None` when it names no Service.
    pub fn of(slice: &EndpointSlice) -> Option<Self> {
        let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some(SlicePort {
                    name: p.name.clone().filter(|n| !n.is_empty()),
                    port: u16::try_from(p.port?).ok()?,
                })
            })
            .collect();
        let ready_addresses = slice
            .endpoints
            .iter()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
            .filter_map(|e| e.addresses.first().cloned())
            .collect();
        Some(Self {
            service: service.clone(),
            address_type: slice.address_type.clone(),
            ports,
            ready_addresses,
        })
    }
}

/// EndpointSlices by namespace and name.
#[derive(Debug, Default)]
pub struct EndpointSliceIndex {
    namespaces: HashMap<String, HashMap<String, SliceSummary>>,
}

impl EndpointSliceIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `slice` (or forgets it when it no longer names a Service).
    pub fn apply(&mut self, slice: &EndpointSlice) {
        let (Some(namespace), Some(name)) = (&slice.metadata.namespace, &slice.metadata.name)
        else {
            return;
        };
        match SliceSummary::of(slice) {
            Some(summary) => {
                self.namespaces
                    .entry(namespace.clone())
                    .or_default()
                    .insert(name.clone(), summary);
            }
            None => self.delete(namespace, name),
        }
    }

    /// Forgets slice `namespace/name`.
    pub fn delete(&mut self, namespace: &str, name: &str) {
        if let Some(slices) = self.namespaces.get_mut(namespace) {
            slices.remove(name);
            if slices.is_empty() {
                self.namespaces.remove(namespace);
            }
        }
    }

    /// The slices of Service `namespace/service`.
    pub fn service(&self, namespace: &str, service: &str) -> Vec<SliceSummary> {
        let mut found: Vec<(&String, &SliceSummary)> = self
            .namespaces
            .get(namespace)
            .map(|slices| {
                slices
                    .iter()
                    .filter(|(_, s)| s.service == service)
                    .collect()
            })
            .unwrap_or_default();
        // Slice order is the order of the names, so the endpoints' order is stable.
        found.sort_unstable_by_key(|(name, _)| *name);
        found.into_iter().map(|(_, s)| s.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(ns: &str, name: &str, app: &str, node: Option<&str>, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(str::to_string),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn finished_pods_and_other_namespaces_do_not_count() {
        let mut index = PodIndex::new();
        let web = LabelSelector::parse("app=web").unwrap();
        index.apply(&pod("a", "w1", "web", Some("n1"), "Running"));
        index.apply(&pod("a", "w2", "web", Some("n1"), "Pending"));
        index.apply(&pod("a", "w3", "web", None, "Pending"));
        index.apply(&pod("a", "w4", "web", Some("n2"), "Succeeded"));
        index.apply(&pod("a", "w5", "web", Some("n3"), "Failed"));
        index.apply(&pod("a", "b1", "batch", Some("n4"), "Running"));
        index.apply(&pod("b", "w1", "web", Some("n5"), "Running"));
        assert_eq!(index.count("a", &web), PodCount { pods: 3, nodes: 1 });
        assert_eq!(index.len(), 5);
        // A running pod that finishes leaves the count.
        index.apply(&pod("a", "w1", "web", Some("n1"), "Succeeded"));
        assert_eq!(index.count("a", &web), PodCount { pods: 2, nodes: 1 });
        index.delete("a", "w2");
        index.delete("a", "w3");
        assert_eq!(index.count("a", &web), PodCount::default());
        assert_eq!(index.count("missing", &web), PodCount::default());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn slices_keep_ready_endpoints_of_their_service() {
        let endpoint = |ip: &str, ready: Option<bool>| Endpoint {
            addresses: vec![ip.to_string()],
            conditions: Some(EndpointConditions {
                ready,
                ..Default::default()
            }),
            ..Default::default()
        };
        let slice = EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some("a".into()),
                name: Some("web-x1".into()),
                labels: Some([(SERVICE_NAME_LABEL.to_string(), "web".to_string())].into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: vec![
                endpoint("10.0.0.1", Some(true)),
                endpoint("10.0.0.2", Some(false)),
                endpoint("10.0.0.3", None),
            ],
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(8080),
                ..Default::default()
            }]),
        };
        let mut index = EndpointSliceIndex::new();
        index.apply(&slice);
        let found = index.service("a", "web");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].ready_addresses, ["10.0.0.1", "10.0.0.3"]);
        assert_eq!(
            found[0].ports,
            [SlicePort {
                name: Some("http".into()),
                port: 8080
            }]
        );
        assert!(index.service("a", "other").is_empty());
        assert!(index.service("b", "web").is_empty());
        index.delete("a", "web-x1");
        assert!(index.service("a", "web").is_empty());
    }
}
