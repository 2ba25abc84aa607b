//! The `ScaledObject` custom resource (`keda.sh/v1alpha1`, short name `so`): scales a workload
//! with a `/scale` subresource through an HPA plus the operator's 0 <-> 1 decisions.
//!
//! Field names, optionality and JSON spelling follow KEDA's `scaledobject_types.go`, so YAML
//! written for KEDA deserializes unchanged and serializes back without additions. Defaults are
//! not stored in the object: they are the `DEFAULT_*` constants, applied by the accessor methods.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::annotations;
use crate::condition::Condition;
use crate::gvkr::{self, GroupVersionKindResource, GvkrError};
use crate::map::CompactMap;
use crate::trigger::ScaleTrigger;

/// Default `pollingInterval`, seconds.
pub const DEFAULT_POLLING_INTERVAL: i32 = 30;
/// Default `cooldownPeriod`, seconds.
pub const DEFAULT_COOLDOWN_PERIOD: i32 = 300;
/// Default `initialCooldownPeriod`, seconds.
pub const DEFAULT_INITIAL_COOLDOWN_PERIOD: i32 = 0;
/// Default `minReplicaCount`.
pub const DEFAULT_MIN_REPLICA_COUNT: i32 = 0;
/// Default `maxReplicaCount` (also the HPA's `maxReplicas`).
pub const DEFAULT_MAX_REPLICA_COUNT: i32 = 100;
/// The HPA's `minReplicas` is never below this.
pub const DEFAULT_HPA_MIN_REPLICAS: i32 = 1;
/// Prefix of the default HPA name, `keda-hpa-<so.name>`.
pub const HPA_NAME_PREFIX: &str = "keda-hpa-";
/// The single external metric an HPA gets when `scalingModifiers` is used.
pub const COMPOSITE_METRIC_NAME: &str = "composite-metric";
/// Health status of a metric that works.
pub const HEALTH_HAPPY: &str = "Happy";
/// Health status of a metric whose reads fail.
pub const HEALTH_FAILING: &str = "Failing";

/// Spec of a [`ScaledObject`].
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "keda.sh",
    version = "v1alpha1",
    kind = "ScaledObject",
    plural = "scaledobjects",
    namespaced,
    shortname = "so",
    status = "ScaledObjectStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ScaledObject scales a workload on events, through an HPA and the operator",
    printcolumn = r#"{"name":"ScaleTargetKind","type":"string","jsonPath":".status.scaleTargetKind"}"#,
    printcolumn = r#"{"name":"ScaleTargetName","type":"string","jsonPath":".spec.scaleTargetRef.name"}"#,
    printcolumn = r#"{"name":"Min","type":"integer","jsonPath":".spec.minReplicaCount"}"#,
    printcolumn = r#"{"name":"Max","type":"integer","jsonPath":".spec.maxReplicaCount"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#,
    printcolumn = r#"{"name":"Fallback","type":"string","jsonPath":".status.conditions[?(@.type==\"Fallback\")].status"}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type==\"Paused\")].status"}"#,
    printcolumn = r#"{"name":"Triggers","type":"string","jsonPath":".status.triggersTypes"}"#,
    printcolumn = r#"{"name":"Authentications","type":"string","jsonPath":".status.authenticationsTypes"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new(
    "!has(self.minReplicaCount) || self.minReplicaCount <= (has(self.maxReplicaCount) ? self.maxReplicaCount : 100)"
).message("minReplicaCount must be less than or equal to maxReplicaCount"))]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectSpec {
    /// The workload to scale; it must expose the `/scale` subresource.
    pub scale_target_ref: ScaleTarget,

    /// Seconds between two checks of the triggers (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub polling_interval: Option<i32>,

    /// Seconds after creation before a never-active object may scale to zero (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub initial_cooldown_period: Option<i32>,

    /// Seconds after the last activity before scaling to zero or idle (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub cooldown_period: Option<i32>,

    /// Replica count while inactive, instead of zero; must be below `minReplicaCount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub idle_replica_count: Option<i32>,

    /// Lowest replica count while active (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replica_count: Option<i32>,

    /// Highest replica count (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_replica_count: Option<i32>,

    /// HPA settings, restore-on-delete and scaling modifiers.
    // Boxed: most objects have none, and inline it took about 300 bytes of every object the
    // operator caches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced: Option<Box<AdvancedConfig>>,

    /// What to scale on; at least one.
    #[schemars(length(min = 1))]
    pub triggers: Vec<ScaleTrigger>,

    /// Replicas to use when a metric keeps failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
}

/// `spec.scaleTargetRef`: the object whose `/scale` subresource is driven.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTarget {
    /// Name of the target in the ScaledObject's namespace.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Target apiVersion (default `apps/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Target kind (default `Deployment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Container whose environment resolves `...FromEnv` parameters (default: the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_source_container_name: Option<String>,
}

/// `spec.fallback`: replicas to report to the HPA when a metric fails repeatedly.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Fallback {
    /// Consecutive failures of a metric tolerated before fallback applies.
    #[schemars(range(min = 0))]
    pub failure_threshold: i32,
    /// Replica count fallback aims for.
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// How the fallback replica count is chosen (default `static`, which the API server writes
    /// into the stored object, as KEDA's CRD does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "static"))]
    pub behavior: Option<FallbackBehavior>,
}

/// `spec.fallback.behavior`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum FallbackBehavior {
    /// Use `fallback.replicas`.
    #[default]
    Static,
    /// Keep the current replica count.
    CurrentReplicas,
    /// max(current, `fallback.replicas`).
    CurrentReplicasIfHigher,
    /// min(current, `fallback.replicas`).
    CurrentReplicasIfLower,
    /// Feed the failing metric into the `scalingModifiers` formula as missing.
    ScalingModifiers,
}

impl FallbackBehavior {
    /// The spelling used in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::CurrentReplicas => "currentReplicas",
            Self::CurrentReplicasIfHigher => "currentReplicasIfHigher",
            Self::CurrentReplicasIfLower => "currentReplicasIfLower",
            Self::ScalingModifiers => "scalingModifiers",
        }
    }
}

/// `spec.advanced`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedConfig {
    /// Name and behavior of the generated HPA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizontal_pod_autoscaler_config: Option<HorizontalPodAutoscalerConfig>,
    /// On deletion, scale the target back to `status.originalReplicaCount` (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_to_original_replica_count: Option<bool>,
    /// A formula combining the triggers into one composite metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_modifiers: Option<ScalingModifiers>,
}

/// `spec.advanced.horizontalPodAutoscalerConfig`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerConfig {
    /// Copied verbatim into the HPA's `spec.behavior`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
    /// HPA name (default `keda-hpa-<so.name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `spec.advanced.scalingModifiers`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ScalingModifiers {
    /// Expression over trigger names, e.g. `queue_a + queue_b`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// Target of the composite metric, a float > 0 written as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The object is active iff the composite value is above this (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_target: Option<String>,
    /// `AverageValue` (default) or `Value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["AverageValue", "Value"]))]
    pub metric_type: Option<String>,
}

impl ScalingModifiers {
    /// Whether any field is set (KEDA compares against the zero value).
    pub fn is_set(&self) -> bool {
        [
            &self.formula,
            &self.target,
            &self.activation_target,
            &self.metric_type,
        ]
        .iter()
        .any(|f| f.as_deref().is_some_and(|s| !s.is_empty()))
    }
}

/// Observed state of a [`ScaledObject`].
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectStatus {
    /// `apiVersion.Kind` of the target, e.g. `apps/v1.Deployment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_target_kind: Option<String>,
    /// Resolved group/version/kind/resource of the target.
    #[serde(
        default,
        rename = "scaleTargetGVKR",
        skip_serializing_if = "Option::is_none"
    )]
    pub scale_target_gvkr: Option<GroupVersionKindResource>,
    /// Replica count of the target before KEDA first scaled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_replica_count: Option<i32>,
    /// Last time a trigger was active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_active_time: Option<Time>,
    /// External metric names in trigger order (`s<i>-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_metric_names: Option<Vec<String>>,
    /// Resource metric names (cpu, memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_metric_names: Option<Vec<String>>,
    /// `composite-metric` when scaling modifiers are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite_scaler_name: Option<String>,
    /// Ready, Active, Fallback, Paused, HPAActive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Failure counts per metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<CompactMap<String, HealthStatus>>,
    /// Activity per metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers_activity: Option<CompactMap<String, TriggerActivityStatus>>,
    /// Replica count pinned by the `paused-replicas` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_replica_count: Option<i32>,
    /// Name of the HPA managed for this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa_name: Option<String>,
    /// Comma-separated trigger types, e.g. `redis,cpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers_types: Option<String>,
    /// Comma-separated authentication references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentications_types: Option<String>,
}

/// `status.health[metric]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HealthStatus {
    /// Consecutive failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_failures: Option<i32>,
    /// `Happy` or `Failing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// `status.triggersActivity[metric]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TriggerActivityStatus {
    /// Whether the trigger was active at the last check. Always written, as in KEDA.
    #[serde(default)]
    pub is_active: bool,
}

/// A `paused-replicas` annotation that is not an integer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: {value:?} is not an integer replica count")]
pub struct PausedReplicasError {
    /// The annotation key.
    pub key: &'static str,
    /// The value found.
    pub value: String,
}

/// Lowercase `<kind>.<namespace>.<name>`, KEDA's key for an object's scale loop.
pub fn generate_identifier(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}.{namespace}.{name}").to_lowercase()
}

impl ScaledObject {
    /// `scaledobject.<namespace>.<name>`, lowercase.
    pub fn identifier(&self) -> String {
        generate_identifier(
            "ScaledObject",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            &self.name_any(),
        )
    }

    /// The HPA name: `advanced.horizontalPodAutoscalerConfig.name` if set and non-empty, else
    /// `keda-hpa-<name>`.
    pub fn hpa_name(&self) -> String {
        self.spec
            .advanced
            .as_ref()
            .and_then(|a| a.horizontal_pod_autoscaler_config.as_ref())
            .and_then(|h| h.name.as_deref())
            .filter(|n| !n.is_empty())
            .map_or_else(|| default_hpa_name(&self.name_any()), str::to_string)
    }

    /// The target's group/version/kind/resource (KEDA's `ParseGVKR`, without discovery).
    ///
    /// # Errors
    /// [`GvkrError::NeedsDiscovery`] for kinds other than Deployment and StatefulSet, and
    /// [`GvkrError::InvalidApiVersion`] for a malformed apiVersion.
    pub fn scale_target_gvkr(&self) -> Result<GroupVersionKindResource, GvkrError> {
        let t = &self.spec.scale_target_ref;
        gvkr::parse_gvkr(
            t.api_version.as_deref().unwrap_or_default(),
            t.kind.as_deref().unwrap_or_default(),
        )
    }

    /// The replica count of the `paused-replicas` annotation, if present.
    ///
    /// # Errors
    /// When the annotation is present but not a 32-bit integer.
    pub fn paused_replicas(&self) -> Result<Option<i32>, PausedReplicasError> {
        match self.annotations().get(annotations::PAUSED_REPLICAS) {
            None => Ok(None),
            Some(v) => v.parse::<i32>().map(Some).map_err(|_| PausedReplicasError {
                key: annotations::PAUSED_REPLICAS,
                value: v.clone(),
            }),
        }
    }

    /// Whether the object is paused: a `paused-replicas` annotation is present, or `paused`
    /// reads true with Go's `ParseBool` (an unparsable value counts as true, as in KEDA).
    pub fn is_paused(&self) -> bool {
        self.annotations()
            .contains_key(annotations::PAUSED_REPLICAS)
            || annotations::bool_annotation(self.metadata.annotations.as_ref(), annotations::PAUSED)
    }

    /// Whether scale-in is paused (`paused-scale-in`, same boolean rules).
    pub fn is_paused_scale_in(&self) -> bool {
        annotations::bool_annotation(
            self.metadata.annotations.as_ref(),
            annotations::PAUSED_SCALE_IN,
        )
    }

    /// Whether scale-out is paused (`paused-scale-out`, same boolean rules).
    pub fn is_paused_scale_out(&self) -> bool {
        annotations::bool_annotation(
            self.metadata.annotations.as_ref(),
            annotations::PAUSED_SCALE_OUT,
        )
    }

    /// Whether `force-activation` is set (same boolean rules).
    pub fn is_force_activated(&self) -> bool {
        annotations::bool_annotation(
            self.metadata.annotations.as_ref(),
            annotations::FORCE_ACTIVATION,
        )
    }
}

/// `keda-hpa-<name>`.
pub fn default_hpa_name(so_name: &str) -> String {
    format!("{HPA_NAME_PREFIX}{so_name}")
}

impl ScaledObjectSpec {
    /// `pollingInterval` or 30.
    pub fn polling_interval(&self) -> i32 {
        self.polling_interval.unwrap_or(DEFAULT_POLLING_INTERVAL)
    }

    /// `cooldownPeriod` or 300.
    pub fn cooldown_period(&self) -> i32 {
        self.cooldown_period.unwrap_or(DEFAULT_COOLDOWN_PERIOD)
    }

    /// `initialCooldownPeriod` or 0.
    pub fn initial_cooldown_period(&self) -> i32 {
        self.initial_cooldown_period
            .unwrap_or(DEFAULT_INITIAL_COOLDOWN_PERIOD)
    }

    /// `minReplicaCount` or 0.
    pub fn min_replica_count(&self) -> i32 {
        self.min_replica_count.unwrap_or(DEFAULT_MIN_REPLICA_COUNT)
    }

    /// `maxReplicaCount` or 100.
    pub fn max_replica_count(&self) -> i32 {
        self.max_replica_count.unwrap_or(DEFAULT_MAX_REPLICA_COUNT)
    }

    /// The HPA's `minReplicas`: `minReplicaCount` when > 0, else 1.
    pub fn hpa_min_replicas(&self) -> i32 {
        match self.min_replica_count {
            Some(m) if m > 0 => m,
            _ => DEFAULT_HPA_MIN_REPLICAS,
        }
    }

    /// The HPA's `maxReplicas`: `maxReplicaCount` or 100.
    pub fn hpa_max_replicas(&self) -> i32 {
        self.max_replica_count()
    }

    /// `fallback.behavior` or `static` (None without fallback).
    pub fn fallback_behavior(&self) -> Option<FallbackBehavior> {
        self.fallback
            .as_ref()
            .map(|f| f.behavior.unwrap_or_default())
    }

    /// `advanced.restoreToOriginalReplicaCount` or false.
    pub fn restore_to_original_replica_count(&self) -> bool {
        self.advanced
            .as_ref()
            .and_then(|a| a.restore_to_original_replica_count)
            .unwrap_or(false)
    }

    /// The HPA behavior to copy into the HPA, if any.
    pub fn hpa_behavior(&self) -> Option<&HorizontalPodAutoscalerBehavior> {
        self.advanced
            .as_ref()
            .and_then(|a| a.horizontal_pod_autoscaler_config.as_ref())
            .and_then(|h| h.behavior.as_ref())
    }

    /// The scaling modifiers when any of their fields is set (KEDA's `IsUsingModifiers`).
    pub fn scaling_modifiers(&self) -> Option<&ScalingModifiers> {
        self.advanced
            .as_ref()
            .and_then(|a| a.scaling_modifiers.as_ref())
            .filter(|m| m.is_set())
    }

    /// Whether scaling modifiers are in use.
    pub fn is_using_modifiers(&self) -> bool {
        self.scaling_modifiers().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn so(name: &str, annotations: &[(&str, &str)]) -> ScaledObject {
        let mut so = ScaledObject::new(name, ScaledObjectSpec::default());
        so.metadata = ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("Apps".to_string()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        };
        so
    }

    #[test]
    fn identifier_is_lowercase_kind_namespace_name() {
        assert_eq!(so("Worker", &[]).identifier(), "scaledobject.apps.worker");
    }

    #[test]
    fn hpa_name_defaults_to_keda_hpa_prefix_and_honours_override() {
        let mut o = so("worker", &[]);
        assert_eq!(o.hpa_name(), "keda-hpa-worker");
        o.spec.advanced = Some(Box::new(AdvancedConfig {
            horizontal_pod_autoscaler_config: Some(HorizontalPodAutoscalerConfig {
                name: Some(String::new()),
                behavior: None,
            }),
            ..AdvancedConfig::default()
        }));
        assert_eq!(o.hpa_name(), "keda-hpa-worker", "empty name means default");
        if let Some(h) = o
            .spec
            .advanced
            .as_mut()
            .and_then(|a| a.horizontal_pod_autoscaler_config.as_mut())
        {
            h.name = Some("custom".into());
        }
        assert_eq!(o.hpa_name(), "custom");
    }

    #[test]
    fn pause_annotations_follow_keda_parsing() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            // no annotation: not paused
            (&[], false),
            // explicit true
            (&[(annotations::PAUSED, "true")], true),
            // explicit false
            (&[(annotations::PAUSED, "false")], false),
            // unparsable value counts as true (KEDA quirk)
            (&[(annotations::PAUSED, "yes")], true),
            // paused-replicas alone pauses
            (&[(annotations::PAUSED_REPLICAS, "0")], true),
        ];
        for (ann, want) in cases {
            assert_eq!(so("a", ann).is_paused(), *want, "{ann:?}");
        }
    }

    #[test]
    fn paused_replicas_must_be_an_integer() {
        assert_eq!(so("a", &[]).paused_replicas(), Ok(None));
        assert_eq!(
            so("a", &[(annotations::PAUSED_REPLICAS, "5")]).paused_replicas(),
            Ok(Some(5))
        );
        let err = so("a", &[(annotations::PAUSED_REPLICAS, "five")])
            .paused_replicas()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "annotation autoscaling.keda.sh/paused-replicas: \"five\" is not an integer replica count"
        );
    }

    #[test]
    fn defaults_apply_only_when_fields_are_absent() {
        let mut spec = ScaledObjectSpec::default();
        assert_eq!(spec.polling_interval(), 30);
        assert_eq!(spec.cooldown_period(), 300);
        assert_eq!(spec.initial_cooldown_period(), 0);
        assert_eq!(spec.min_replica_count(), 0);
        assert_eq!(spec.max_replica_count(), 100);
        assert_eq!(spec.hpa_min_replicas(), 1);
        assert_eq!(spec.fallback_behavior(), None);
        spec.min_replica_count = Some(3);
        spec.fallback = Some(Fallback::default());
        assert_eq!(spec.hpa_min_replicas(), 3);
        assert_eq!(spec.fallback_behavior(), Some(FallbackBehavior::Static));
    }
}
