//! The objects exactly as KEDA's operator (pinned commit 8b4f083) leaves them, for the adoption
//! tests on memkube (`operator/tests/adoption.rs`) and on a real cluster
//! (`tests/e2e/tests/adoption.rs`); see adoption.rs for KEDA's functions each one follows.
//! Objects are created in the namespace of the `World`'s API handles.

#![allow(dead_code)]

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::scenarios::World;

/// The KEDA release whose objects are adopted: its `version.Version` is on the HPA.
pub const KEDA_VERSION: &str = "2.20.1";
/// KEDA's finalizer (`scaledobject_finalizer.go`).
pub const KEDA_FINALIZER: &str = "finalizer.keda.sh";
/// The label KEDA puts on every ScaledObject and its HPA metric selectors.
pub const NAME_LABEL: &str = "scaledobject.keda.sh/name";

/// One ScaledObject on Deployment `name` with one redis trigger on `list` (target 5,
/// activation 5), up to 10 replicas, as a user wrote it for KEDA.
pub struct Fixture<'a> {
    pub name: &'a str,
    pub list: &'a str,
    pub cooldown: i64,
    pub annotations: Value,
}

impl Fixture<'_> {
    pub fn hpa_name(&self) -> String {
        format!("keda-hpa-{}", self.name)
    }

    pub fn metric(&self) -> String {
        format!("s0-redis-{}", self.list)
    }

    /// The ScaledObject's metadata and spec, with what KEDA's reconcile added to the metadata
    /// (finalizer, name label).
    pub fn scaled_object(&self) -> Value {
        json!({
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {
                "name": self.name,
                "finalizers": [KEDA_FINALIZER],
                "labels": { NAME_LABEL: self.name },
                "annotations": self.annotations,
            },
            "spec": {
                "scaleTargetRef": { "name": self.name },
                "pollingInterval": 10,
                "cooldownPeriod": self.cooldown,
                "maxReplicaCount": 10,
                "triggers": [{
                    "type": "redis",
                    "metadata": {
                        "address": "127.0.0.1:6379",
                        "listName": self.list,
                        "listLength": "5",
                        "activationListLength": "5",
                    }
                }]
            }
        })
    }

    /// The HPA spec of KEDA's `newHPAForScaledObject` for this object: `GetHPAMinReplicas`
    /// (1 with `minReplicaCount` 0), `maxReplicaCount`, the redis scaler's External metric
    /// (`s0-redis-<list>`, `GetMetricTargetMili` of `listLength`) with the selector of
    /// `getScaledObjectMetricSpecs`, and the target of `ParseGVKR`.
    pub fn hpa_spec(&self) -> Value {
        json!({
            "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": self.name },
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [{
                "type": "External",
                "external": {
                    "metric": {
                        "name": self.metric(),
                        "selector": { "matchLabels": { NAME_LABEL: self.name } }
                    },
                    "target": { "type": "AverageValue", "averageValue": "5" }
                }
            }]
        })
    }

    /// KEDA's labels on the HPA: its four, then the ScaledObject's own.
    pub fn hpa_labels(&self, version: &str) -> Value {
        json!({
            "app.kubernetes.io/name": self.hpa_name(),
            "app.kubernetes.io/version": version,
            "app.kubernetes.io/part-of": self.name,
            "app.kubernetes.io/managed-by": "keda-operator",
            NAME_LABEL: self.name,
        })
    }

    /// `controllerutil.SetControllerReference(scaledObject, hpa)`.
    pub fn owner_references(so: &ScaledObject) -> Value {
        json!([{
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "name": so.name_any(),
            "uid": so.uid().expect("uid"),
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    }

    /// The HPA as KEDA created it for `so`, with the status the HPA controller wrote.
    pub async fn keda_hpa(
        &self,
        w: &World,
        so: &ScaledObject,
        replicas: i32,
    ) -> HorizontalPodAutoscaler {
        let annotations = so.metadata.annotations.clone().filter(|a| !a.is_empty());
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": self.hpa_name(),
                "labels": self.hpa_labels(KEDA_VERSION),
                "annotations": annotations,
                "ownerReferences": Self::owner_references(so),
            },
            "spec": self.hpa_spec(),
        }))
        .expect("KEDA's HPA");
        w.hpas()
            .create(&PostParams::default(), &hpa)
            .await
            .expect("create KEDA's HPA");
        let status = json!({ "status": {
            "currentReplicas": replicas,
            "desiredReplicas": replicas,
            "conditions": [
                { "type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                  "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "ScalingActive", "status": "True", "reason": "ValidMetricFound",
                  "message": "the HPA was able to successfully calculate a replica count from external metric",
                  "lastTransitionTime": "2026-01-01T00:00:00Z" },
            ]
        }});
        w.hpas()
            .patch_status(
                &self.hpa_name(),
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
            .expect("the HPA controller's status")
    }

    /// Creates the ScaledObject and writes the status KEDA left on it (`status` merged over
    /// the fields every reconciled object has).
    pub async fn keda_scaled_object(&self, w: &World, status: Value) -> ScaledObject {
        let so: ScaledObject = serde_json::from_value(self.scaled_object()).expect("ScaledObject");
        w.scaled_objects()
            .create(&PostParams::default(), &so)
            .await
            .expect("create the ScaledObject");
        let mut full = json!({
            "scaleTargetKind": "apps/v1.Deployment",
            "scaleTargetGVKR": {
                "group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments"
            },
            "originalReplicaCount": 2,
            "triggersTypes": "redis",
            "hpaName": self.hpa_name(),
            "externalMetricNames": [self.metric()],
        });
        if let (Some(into), Some(extra)) = (full.as_object_mut(), status.as_object()) {
            into.extend(extra.clone());
        }
        w.scaled_objects()
            .patch_status(
                self.name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": full })),
            )
            .await
            .expect("KEDA's status")
    }
}

/// KEDA's four conditions (`GetInitializedConditions` types), as its reconcile and scale
/// executor leave them.
pub fn keda_conditions(active: bool, paused: bool) -> Value {
    let active = if active {
        json!({ "type": "Active", "status": "True", "reason": "ScalerActive",
                "message": "Scaling is performed because triggers are active" })
    } else {
        json!({ "type": "Active", "status": "False", "reason": "ScalerNotActive",
                "message": "Scaling is not performed because triggers are not active" })
    };
    let paused = if paused {
        json!({ "type": "Paused", "status": "True", "reason": "ScaledObjectPaused",
                "message": "ScaledObject is paused" })
    } else {
        json!({ "type": "Paused", "status": "False" })
    };
    json!([
        { "type": "Ready", "status": "True", "reason": "ScaledObjectReady",
          "message": "ScaledObject is defined correctly and is ready for scaling" },
        active,
        { "type": "Fallback", "status": "False", "reason": "NoFallbackFound",
          "message": "No fallbacks are active on this scaled object" },
        paused,
    ])
}

/// `lastActiveTime` as KEDA writes it (`metav1.Now()`, whole seconds in RFC 3339).
pub fn keda_time(t: Timestamp) -> String {
    t.round(jiff::Unit::Second)
        .expect("rounds")
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn last_active(so: &ScaledObject) -> Option<Timestamp> {
    so.status.as_ref()?.last_active_time.as_ref().map(|t| t.0)
}

/// The HPA now, which must be the same object (UID) as `uid`.
pub async fn same_hpa(w: &World, name: &str, uid: &str) -> HorizontalPodAutoscaler {
    let hpa = w
        .hpas()
        .get_opt(name)
        .await
        .expect("HPA lookup")
        .unwrap_or_else(|| panic!("the HPA {name} was deleted"));
    assert_eq!(
        hpa.uid().as_deref(),
        Some(uid),
        "the HPA {name} was deleted and recreated"
    );
    hpa
}

/// What every adopted object keeps: KEDA's finalizer (once), its original replica count.
pub fn keeps_keda_metadata_and_status(so: &ScaledObject) {
    assert_eq!(so.finalizers(), [KEDA_FINALIZER], "finalizers");
    assert_eq!(
        so.labels().get(NAME_LABEL).map(String::as_str),
        Some(so.name_any().as_str())
    );
    let status = so.status.as_ref().expect("status");
    assert_eq!(
        status.original_replica_count,
        Some(2),
        "originalReplicaCount"
    );
    assert_eq!(
        status.scale_target_kind.as_deref(),
        Some("apps/v1.Deployment")
    );
}
