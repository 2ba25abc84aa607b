//! Watch caches of what the cross-object rules read: ScaledObjects, HPAs, Deployments,
//! StatefulSets and LimitRanges of every namespace.
//!
//! Each kind is followed by one `kube::runtime::watcher` (one LIST at start and after a watch
//! expires, then WATCH); an admission request reads only memory, never the API server. A cache
//! keeps a small summary of each object (what the rules need, not the object), and the lookups
//! the rules make are indexed: "the ScaledObjects of namespace `ns` whose target is X" is one
//! hash lookup however many ScaledObjects the cluster holds.
//!
//! A re-list (after a watch expired) is collected on the side and swapped in whole when it ends,
//! so a request never sees half a list. Until every cache has listed once,
//! [`Caches::synced`] is false and the server answers 503 (the API server then applies the
//! webhook's `failurePolicy`).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Container, LimitRange, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use keda_api::annotations::VALIDATIONS_HPA_OWNERSHIP;
use keda_api::gvkr::parse_gvk;
use keda_api::scaled_object::ScaledObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// `namespace/name` of a cached object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// Namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// KEDA's key of a scale target: its `apiVersion.Kind` (KEDA's `GVKString`, after the defaults
/// `apps/v1` and `Deployment`) and its name. `None` when the apiVersion is malformed.
pub fn target_key(api_version: &str, kind: &str, name: &str) -> Option<String> {
    let gvk = parse_gvk(api_version, kind).ok()?;
    Some(format!("{}/{name}", gvk_string(&gvk)))
}

/// `group/version.Kind`, or `version.Kind` for the core group.
pub fn gvk_string(gvk: &keda_api::gvkr::GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}.{}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}.{}", gvk.group, gvk.version, gvk.kind)
    }
}

/// What a cache keeps of one object, and the keys it is found by.
pub trait Summary: Clone + Send + Sync + 'static {
    /// The Kubernetes kind summarized.
    type Object: Resource + Clone + DeserializeOwned + Debug + Send + 'static;
    /// The summary of `object`.
    fn of(object: &Self::Object) -> Self;
    /// Secondary keys (within the object's namespace) this summary is found by.
    fn index_keys(&self) -> Vec<String>;
}

/// A ScaledObject: what it scales and the HPA it owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaledObjectSummary {
    /// [`target_key`] of its `scaleTargetRef`.
    pub target: Option<String>,
    /// Its HPA name (custom or `keda-hpa-<name>`).
    pub hpa_name: String,
}

/// Index key of the ScaledObjects and HPAs that scale a target.
pub fn target_index(target: &str) -> String {
    format!("target:{target}")
}

/// Index key of the ScaledObjects that own an HPA name.
pub fn hpa_index(hpa: &str) -> String {
    format!("hpa:{hpa}")
}

impl Summary for ScaledObjectSummary {
    type Object = ScaledObject;

    fn of(so: &ScaledObject) -> Self {
        let t = &so.spec.scale_target_ref;
        Self {
            target: target_key(
                t.api_version.as_deref().unwrap_or_default(),
                t.kind.as_deref().unwrap_or_default(),
                &t.name,
            ),
            hpa_name: so.hpa_name(),
        }
    }

    fn index_keys(&self) -> Vec<String> {
        let mut keys = vec![hpa_index(&self.hpa_name)];
        if let Some(target) = &self.target {
            keys.push(target_index(target));
        }
        keys
    }
}

/// An HPA: what it scales, whether KEDA's ownership check ignores it, and the ScaledObjects
/// among its owners.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpaSummary {
    /// [`target_key`] of its `scaleTargetRef`.
    pub target: Option<String>,
    /// `validations.keda.sh/hpa-ownership: "false"`.
    pub ownership_check_disabled: bool,
    /// Names of its ScaledObject owner references.
    pub scaled_object_owners: Vec<String>,
}

impl Summary for HpaSummary {
    type Object = HorizontalPodAutoscaler;

    fn of(hpa: &HorizontalPodAutoscaler) -> Self {
        let target = hpa.spec.as_ref().and_then(|s| {
            let t = &s.scale_target_ref;
            target_key(
                t.api_version.as_deref().unwrap_or_default(),
                &t.kind,
                &t.name,
            )
        });
        Self {
            target,
            ownership_check_disabled: hpa
                .annotations()
                .get(VALIDATIONS_HPA_OWNERSHIP)
                .is_some_and(|v| v == "false"),
            scaled_object_owners: hpa
                .owner_references()
                .iter()
                .filter(|o| o.kind == "ScaledObject")
                .map(|o| o.name.clone())
                .collect(),
        }
    }

    fn index_keys(&self) -> Vec<String> {
        self.target.iter().map(|t| target_index(t)).collect()
    }
}

/// Whether a container sets a request or limit above zero for cpu and for memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerResources {
    /// Container name.
    pub name: String,
    /// cpu request or limit > 0.
    pub cpu: bool,
    /// memory request or limit > 0.
    pub memory: bool,
}

impl ContainerResources {
    /// Whether `resource` (`cpu` or `memory`) is set.
    pub fn has(&self, resource: &str) -> bool {
        match resource {
            "cpu" => self.cpu,
            "memory" => self.memory,
            _ => false,
        }
    }
}

/// Whether a Kubernetes quantity is above zero. Every suffix multiplies by a positive factor, so
/// the sign of the number in front decides.
pub fn quantity_positive(q: &Quantity) -> bool {
    let s = q.0.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    s[..end].parse::<f64>().is_ok_and(|v| v > 0.0)
}

fn resource_set(container: &Container, resource: &str) -> bool {
    let Some(r) = &container.resources else {
        return false;
    };
    [&r.requests, &r.limits]
        .into_iter()
        .flatten()
        .any(|m| m.get(resource).is_some_and(quantity_positive))
}

fn containers_of(spec: Option<&PodSpec>) -> Vec<ContainerResources> {
    spec.map(|s| {
        s.containers
            .iter()
            .map(|c| ContainerResources {
                name: c.name.clone(),
                cpu: resource_set(c, "cpu"),
                memory: resource_set(c, "memory"),
            })
            .collect()
    })
    .unwrap_or_default()
}

/// A Deployment's or StatefulSet's containers and their resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadSummary<K> {
    /// The containers of its pod template.
    pub containers: Vec<ContainerResources>,
    kind: std::marker::PhantomData<fn() -> K>,
}

impl Summary for WorkloadSummary<Deployment> {
    type Object = Deployment;

    fn of(d: &Deployment) -> Self {
        Self {
            containers: containers_of(d.spec.as_ref().and_then(|s| s.template.spec.as_ref())),
            kind: std::marker::PhantomData,
        }
    }

    fn index_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

impl Summary for WorkloadSummary<StatefulSet> {
    type Object = StatefulSet;

    fn of(s: &StatefulSet) -> Self {
        Self {
            containers: containers_of(s.spec.as_ref().and_then(|s| s.template.spec.as_ref())),
            kind: std::marker::PhantomData,
        }
    }

    fn index_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Index key of every LimitRange of a namespace.
const NAMESPACE_INDEX: &str = "namespace";

/// A LimitRange: whether one of its `Container` items gives a default request or limit above
/// zero for cpu and for memory (KEDA's `isContainerResourceSetInLimitRangeObject`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitRangeSummary {
    /// A container default for cpu.
    pub cpu: bool,
    /// A container default for memory.
    pub memory: bool,
}

impl Summary for LimitRangeSummary {
    type Object = LimitRange;

    fn of(lr: &LimitRange) -> Self {
        let items = lr.spec.as_ref().map(|s| s.limits.as_slice()).unwrap_or(&[]);
        let default_for = |resource: &str| {
            items.iter().any(|item| {
                item.type_ == "Container"
                    && [&item.default_request, &item.default]
                        .into_iter()
                        .flatten()
                        .any(|m| m.get(resource).is_some_and(quantity_positive))
            })
        };
        Self {
            cpu: default_for("cpu"),
            memory: default_for("memory"),
        }
    }

    fn index_keys(&self) -> Vec<String> {
        vec![NAMESPACE_INDEX.to_string()]
    }
}

#[derive(Debug)]
struct Inner<S> {
    objects: HashMap<ObjKey, S>,
    index: HashMap<(String, String), BTreeSet<String>>,
}

impl<S> Default for Inner<S> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            index: HashMap::new(),
        }
    }
}

impl<S: Summary> Inner<S> {
    fn remove(&mut self, key: &ObjKey) {
        if let Some(old) = self.objects.remove(key) {
            for k in old.index_keys() {
                let slot = (key.namespace.clone(), k);
                if let Some(names) = self.index.get_mut(&slot) {
                    names.remove(&key.name);
                    if names.is_empty() {
                        self.index.remove(&slot);
                    }
                }
            }
        }
    }

    fn upsert(&mut self, key: ObjKey, summary: S) {
        self.remove(&key);
        for k in summary.index_keys() {
            self.index
                .entry((key.namespace.clone(), k))
                .or_default()
                .insert(key.name.clone());
        }
        self.objects.insert(key, summary);
    }
}

/// The cache of one kind: summaries by `namespace/name`, and by index key.
#[derive(Debug)]
pub struct Table<S> {
    resource: &'static str,
    inner: RwLock<Inner<S>>,
    listed: AtomicBool,
}

impl<S: Summary> Table<S> {
    /// An empty, not yet listed table of `resource` (for logs).
    pub fn new(resource: &'static str) -> Self {
        Self {
            resource,
            inner: RwLock::new(Inner::default()),
            listed: AtomicBool::new(false),
        }
    }

    /// Whether the first list has been received.
    pub fn listed(&self) -> bool {
        self.listed.load(Ordering::Acquire)
    }

    /// The summary of `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<S> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.objects.get(&ObjKey::new(namespace, name)).cloned()
    }

    /// The objects of `namespace` found by index key `key`, sorted by name.
    pub fn find(&self, namespace: &str, key: &str) -> Vec<(String, S)> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let Some(names) = inner.index.get(&(namespace.to_string(), key.to_string())) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|name| {
                inner
                    .objects
                    .get(&ObjKey::new(namespace, name))
                    .map(|s| (name.clone(), s.clone()))
            })
            .collect()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .objects
            .len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores `object` (as a watch event would).
    pub fn apply(&self, object: &S::Object) {
        let key = ObjKey::new(&object.namespace().unwrap_or_default(), &object.name_any());
        let summary = S::of(object);
        self.inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .upsert(key, summary);
    }

    fn delete(&self, object: &S::Object) {
        let key = ObjKey::new(&object.namespace().unwrap_or_default(), &object.name_any());
        self.inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    fn replace(&self, fresh: Inner<S>) {
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        self.listed.store(true, Ordering::Release);
    }

    /// Follows `api` until `cancel`: a watcher with kube's default backoff, every event applied.
    pub async fn follow(self: Arc<Self>, api: Api<S::Object>, cancel: CancellationToken) {
        let mut events =
            std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
        let mut relist: Option<Inner<S>> = None;
        loop {
            let event = tokio::select! {
                () = cancel.cancelled() => return,
                event = events.next() => event,
            };
            let Some(event) = event else { return };
            match event {
                Ok(Event::Apply(obj)) => self.apply(&obj),
                Ok(Event::Delete(obj)) => self.delete(&obj),
                Ok(Event::Init) => relist = Some(Inner::default()),
                Ok(Event::InitApply(obj)) => {
                    let key = ObjKey::new(&obj.namespace().unwrap_or_default(), &obj.name_any());
                    relist
                        .get_or_insert_with(Inner::default)
                        .upsert(key, S::of(&obj));
                }
                Ok(Event::InitDone) => {
                    let first = !self.listed();
                    self.replace(relist.take().unwrap_or_default());
                    if first {
                        tracing::info!(
                            resource = self.resource,
                            objects = self.len(),
                            "cache listed"
                        );
                    }
                }
                Err(error) => {
                    tracing::warn!(resource = self.resource, %error, "watch failed, retrying with backoff");
                }
            }
        }
    }
}

/// Every cache the cross-object rules read.
#[derive(Debug)]
pub struct Caches {
    /// ScaledObjects of every namespace.
    pub scaled_objects: Arc<Table<ScaledObjectSummary>>,
    /// HorizontalPodAutoscalers (autoscaling/v2).
    pub hpas: Arc<Table<HpaSummary>>,
    /// Deployments.
    pub deployments: Arc<Table<WorkloadSummary<Deployment>>>,
    /// StatefulSets.
    pub stateful_sets: Arc<Table<WorkloadSummary<StatefulSet>>>,
    /// LimitRanges.
    pub limit_ranges: Arc<Table<LimitRangeSummary>>,
}

impl Default for Caches {
    fn default() -> Self {
        Self::new()
    }
}

impl Caches {
    /// Empty caches, not listed.
    pub fn new() -> Self {
        Self {
            scaled_objects: Arc::new(Table::new("scaledobjects")),
            hpas: Arc::new(Table::new("horizontalpodautoscalers")),
            deployments: Arc::new(Table::new("deployments")),
            stateful_sets: Arc::new(Table::new("statefulsets")),
            limit_ranges: Arc::new(Table::new("limitranges")),
        }
    }

    /// Starts one watcher per cache on `client`, cluster-wide, until `cancel`.
    pub fn follow(&self, client: &kube::Client, cancel: &CancellationToken) {
        tokio::spawn(
            Arc::clone(&self.scaled_objects).follow(Api::all(client.clone()), cancel.clone()),
        );
        tokio::spawn(Arc::clone(&self.hpas).follow(Api::all(client.clone()), cancel.clone()));
        tokio::spawn(
            Arc::clone(&self.deployments).follow(Api::all(client.clone()), cancel.clone()),
        );
        tokio::spawn(
            Arc::clone(&self.stateful_sets).follow(Api::all(client.clone()), cancel.clone()),
        );
        tokio::spawn(
            Arc::clone(&self.limit_ranges).follow(Api::all(client.clone()), cancel.clone()),
        );
    }

    /// Whether every cache has listed once.
    pub fn synced(&self) -> bool {
        self.scaled_objects.listed()
            && self.hpas.listed()
            && self.deployments.listed()
            && self.stateful_sets.listed()
            && self.limit_ranges.listed()
    }

    /// Marks every cache listed (for caches filled with [`Table::apply`] instead of a watch).
    pub fn mark_listed(&self) {
        self.scaled_objects.listed.store(true, Ordering::Release);
        self.hpas.listed.store(true, Ordering::Release);
        self.deployments.listed.store(true, Ordering::Release);
        self.stateful_sets.listed.store(true, Ordering::Release);
        self.limit_ranges.listed.store(true, Ordering::Release);
    }

    /// Whether a LimitRange of `namespace` gives containers a default for `resource`.
    pub fn limit_range_default(&self, namespace: &str, resource: &str) -> bool {
        self.limit_ranges
            .find(namespace, NAMESPACE_INDEX)
            .iter()
            .any(|(_, lr)| match resource {
                "cpu" => lr.cpu,
                "memory" => lr.memory,
                _ => false,
            })
    }
}
