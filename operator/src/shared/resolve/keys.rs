//! Names of the things a resolution reads and of the objects it resolves for.

use std::fmt;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use keda_api::{ScaledJob, ScaledObject};
use keda_scalers::ScalableKind;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

/// `namespace/name` of a cached object; the namespace is empty for cluster-scoped objects.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ObjKey {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl ObjKey {
    pub(crate) fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// Something a scalable object's scalers were built from; a content change of it means they
/// must be rebuilt.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum DepKey {
    Secret(ObjKey),
    ConfigMap(ObjKey),
    TriggerAuthentication(ObjKey),
    ClusterTriggerAuthentication(ObjKey),
    /// A scale target, by `group/version/plural` and key.
    Target(String, ObjKey),
}

/// The ScaledObject or ScaledJob a resolution is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScalableRef {
    /// ScaledObject or ScaledJob.
    pub kind: ScalableKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ScalableRef {
    /// A reference to a ScaledObject or ScaledJob.
    pub fn new(kind: ScalableKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The `ObjectRef` a kube-runtime `Controller` of `K` reconciles (for
    /// `Controller::reconcile_on`). Check [`ScalableRef::kind`] first: this does not.
    pub fn object_ref<K>(&self) -> ObjectRef<K>
    where
        K: kube::Resource<DynamicType = ()>,
    {
        ObjectRef::new(&self.name).within(&self.namespace)
    }
}

impl fmt::Display for ScalableRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// Where the container environment of a scalable object comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum PodSource {
    /// A ScaledObject's `scaleTargetRef`: the pod template (`spec.template`) of the workload,
    /// read from a cache of its kind. Any kind with `spec.template.spec` works (Deployment,
    /// StatefulSet, ReplicaSet, Argo Rollout, ...).
    Target {
        /// `scaleTargetRef.apiVersion` (empty: `apps/v1`).
        api_version: String,
        /// `scaleTargetRef.kind` (empty: `Deployment`).
        kind: String,
        /// `scaleTargetRef.name`, in the ScaledObject's namespace.
        name: String,
    },
    /// A ScaledJob's `jobTargetRef.template`, given inline.
    Template(Box<PodTemplateSpec>),
}

/// The scalable object plus where its container environment comes from: the input of
/// [`super::Resolver::session`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleTargetPodSource {
    /// The object whose triggers are resolved; rebuild signals name it.
    pub scalable: ScalableRef,
    /// The pod template's source.
    pub pod: PodSource,
    /// `envSourceContainerName`: the container whose environment `<name>FromEnv` and
    /// TriggerAuthentication `env` entries without `containerName` read (default: the first).
    pub env_source_container_name: Option<String>,
}

impl ScaleTargetPodSource {
    /// The source of a ScaledObject: its `scaleTargetRef`.
    pub fn for_scaled_object(so: &ScaledObject) -> Self {
        let target = &so.spec.scale_target_ref;
        Self {
            scalable: ScalableRef::new(
                ScalableKind::ScaledObject,
                so.namespace().unwrap_or_default(),
                so.name_any(),
            ),
            pod: PodSource::Target {
                api_version: target.api_version.clone().unwrap_or_default(),
                kind: target.kind.clone().unwrap_or_default(),
                name: target.name.clone(),
            },
            env_source_container_name: non_empty(target.env_source_container_name.as_deref()),
        }
    }

    /// The source of a ScaledJob: its `jobTargetRef.template`.
    pub fn for_scaled_job(sj: &ScaledJob) -> Self {
        Self {
            scalable: ScalableRef::new(
                ScalableKind::ScaledJob,
                sj.namespace().unwrap_or_default(),
                sj.name_any(),
            ),
            pod: PodSource::Template(Box::new(sj.spec.job_target_ref.template.clone())),
            env_source_container_name: non_empty(sj.spec.env_source_container_name.as_deref()),
        }
    }
}

fn non_empty(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}
