//! The HPA of a ScaledObject as a pure function (KEDA-CONTRACT 1.4, 1.6): its metrics from the
//! scalers' specs, the HPA KEDA would write, whether an existing one must change, and the
//! `HPAActive` health an HPA reports. No API call: [`super::ensure_hpa`] writes what this
//! builds.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingRules, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use keda_api::ScaledObject;
use keda_api::annotations::{HPA_EXCLUDED_LABELS, SCALED_OBJECT_NAME_LABEL};
use keda_api::condition::{STATUS_FALSE, STATUS_TRUE, reason as keda_reason};
use keda_decide::fallback::MetricTargetType;
use keda_decide::formula::{COMPOSITE_METRIC_NAME, CompiledModifiers};
use keda_scalers::metric::{
    MetricTargetType as TargetType, external_metric_spec, metric_target_milli,
};
use kube::{Resource, ResourceExt};

use crate::scaled_object::target::Target;
use crate::shared::error::Error;
use crate::shared::scalers::ObjectScalers;

/// `app.kubernetes.io/managed-by` on the HPA.
pub const MANAGED_BY: &str = "keda-operator";
/// `selectPolicy` that switches a scaling direction off.
const SELECT_POLICY_DISABLED: &str = "Disabled";
/// The HPA condition KEDA mirrors into `HPAActive`.
pub(super) const SCALING_ACTIVE: &str = "ScalingActive";

/// The HPA metrics of an object and the names the status lists.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricSpecs {
    /// The HPA's `spec.metrics`, sorted by type, External metrics with the object's selector.
    pub specs: Vec<MetricSpec>,
    /// `status.externalMetricNames`, in trigger order.
    pub external_names: Vec<String>,
    /// `status.resourceMetricNames`.
    pub resource_names: Vec<String>,
    /// `status.compositeScalerName` (`composite-metric` with scalingModifiers).
    pub composite: Option<String>,
}

/// KEDA's `getScaledObjectMetricSpecs`: the union of the scalers' specs, one `composite-metric`
/// instead of the External ones when the object uses `scalingModifiers`, every External metric
/// selecting `scaledobject.keda.sh/name=<so>`, sorted by type.
///
/// # Errors
/// [`Error::DuplicateMetricName`] when two triggers produce the same External metric name.
pub fn metric_specs(so_name: &str, scalers: &ObjectScalers) -> Result<MetricSpecs, Error> {
    let mut out = MetricSpecs::default();
    let mut resource_specs = Vec::new();
    let mut external_specs = Vec::new();
    for spec in scalers.triggers.iter().flat_map(|t| t.metric_specs.specs()) {
        let spec = spec.into_owned();
        if let Some(ext) = &spec.external {
            if out.external_names.contains(&ext.metric.name) {
                return Err(Error::DuplicateMetricName(ext.metric.name.clone()));
            }
            out.external_names.push(ext.metric.name.clone());
            external_specs.push(spec);
        } else {
            if let Some(r) = &spec.resource {
                out.resource_names.push(r.name.clone());
            }
            if let Some(r) = &spec.container_resource {
                out.resource_names.push(r.name.clone());
            }
            resource_specs.push(spec);
        }
    }
    if let Some(m) = &scalers.modifiers {
        external_specs = vec![composite_spec(m)];
        out.composite = Some(COMPOSITE_METRIC_NAME.to_string());
    }
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([(
            SCALED_OBJECT_NAME_LABEL.to_string(),
            so_name.to_string(),
        )])),
        ..LabelSelector::default()
    };
    for spec in &mut external_specs {
        if let Some(ext) = spec.external.as_mut() {
            ext.metric.selector = Some(selector.clone());
        }
    }
    let mut specs = resource_specs;
    specs.extend(external_specs);
    // Sorted by type so that the order never causes a spurious update (KEDA #1531).
    specs.sort_by(|a, b| a.type_.cmp(&b.type_));
    out.specs = specs;
    Ok(out)
}

fn composite_spec(m: &CompiledModifiers) -> MetricSpec {
    let t = match m.metric_type {
        MetricTargetType::AverageValue => TargetType::AverageValue,
        MetricTargetType::Value => TargetType::Value,
    };
    let target: MetricTarget = metric_target_milli(t, m.target);
    external_metric_spec(COMPOSITE_METRIC_NAME, target)
}

/// `app.kubernetes.io/name`: the HPA name cut to 63 characters, trailing non-alphanumerics
/// trimmed (a label value must end alphanumeric).
pub(super) fn name_label(hpa_name: &str) -> String {
    let cut: String = hpa_name.chars().take(63).collect();
    cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The HPA KEDA would write for `so`.
pub fn desired_hpa(
    so: &ScaledObject,
    target: &Target,
    metrics: &MetricSpecs,
) -> HorizontalPodAutoscaler {
    let hpa_name = so.hpa_name();
    let excluded: Vec<&str> = so
        .annotations()
        .get(HPA_EXCLUDED_LABELS)
        .map(|v| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let mut labels: BTreeMap<String, String> = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), name_label(&hpa_name)),
        (
            "app.kubernetes.io/version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        ("app.kubernetes.io/part-of".to_string(), so.name_any()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            MANAGED_BY.to_string(),
        ),
    ]);
    for (k, v) in crate::scaled_object::name_label::labels(so).iter() {
        if !excluded.contains(&k.as_str()) {
            labels.insert(k.clone(), v.clone());
        }
    }
    let mut behavior = so.spec.hpa_behavior().cloned();
    let disable = |rules: &mut Option<HPAScalingRules>| {
        rules
            .get_or_insert_with(HPAScalingRules::default)
            .select_policy = Some(SELECT_POLICY_DISABLED.to_string());
    };
    if so.is_paused_scale_in() {
        disable(
            &mut behavior
                .get_or_insert_with(HorizontalPodAutoscalerBehavior::default)
                .scale_down,
        );
    }
    if so.is_paused_scale_out() {
        disable(
            &mut behavior
                .get_or_insert_with(HorizontalPodAutoscalerBehavior::default)
                .scale_up,
        );
    }
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some(hpa_name),
            namespace: so.namespace(),
            labels: Some(labels),
            annotations: so.metadata.annotations.clone().filter(|a| !a.is_empty()),
            owner_references: owner_reference(so).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(HorizontalPodAutoscalerSpec {
            behavior,
            max_replicas: so.spec.hpa_max_replicas(),
            min_replicas: Some(so.spec.hpa_min_replicas()),
            metrics: Some(metrics.specs.clone()),
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some(target.gvkr().api_version()),
                kind: target.gvkr().kind.clone(),
                name: target.name.clone(),
            },
        }),
        status: None,
    }
}

fn owner_reference(so: &ScaledObject) -> Option<OwnerReference> {
    let mut owner = so.controller_owner_ref(&())?;
    owner.block_owner_deletion = Some(true);
    Some(owner)
}

/// Whether `existing` must be updated to match `desired`, compared as KEDA compares
/// (`updateHPAIfNeeded`): the metric count or the behavior differ, or a field of the spec that
/// keda-rs sets is not in the HPA as set ([`derives`]: what keda-rs leaves unset, the API
/// server's defaults, is not compared), or a label or annotation keda-rs sets is missing or
/// has another value, or the owner references differ. Labels and annotations that other tools
/// add are not compared, so keda-rs never fights a policy controller over them.
pub fn hpa_differs(existing: &HorizontalPodAutoscaler, desired: &HorizontalPodAutoscaler) -> bool {
    let metric_count = |h: &HorizontalPodAutoscaler| {
        h.spec
            .as_ref()
            .and_then(|s| s.metrics.as_ref())
            .map_or(0, Vec::len)
    };
    let behavior = |h: &HorizontalPodAutoscaler| h.spec.as_ref().and_then(|s| s.behavior.clone());
    let json =
        |v: &Option<HorizontalPodAutoscalerSpec>| serde_json::to_value(v).unwrap_or_default();
    metric_count(existing) != metric_count(desired)
        || behavior(existing) != behavior(desired)
        || !derives(&json(&desired.spec), &json(&existing.spec))
        || !map_derives(
            desired.metadata.labels.as_ref(),
            existing.metadata.labels.as_ref(),
        )
        || !map_derives(
            desired.metadata.annotations.as_ref(),
            existing.metadata.annotations.as_ref(),
        )
        || existing.metadata.owner_references != desired.metadata.owner_references
}

/// apimachinery's `equality.Semantic.DeepDerivative(desired, existing)` on JSON: every value
/// `desired` sets is in `existing` as set; what `desired` leaves unset (absent, `null`, `""`,
/// an empty list or map) matches anything; a list matches the first items of a list at least
/// as long.
pub(super) fn derives(desired: &serde_json::Value, existing: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (desired, existing) {
        (Value::Null, _) => true,
        (Value::String(d), _) if d.is_empty() => true,
        (Value::Array(d), _) if d.is_empty() => true,
        (Value::Object(d), _) if d.is_empty() => true,
        (Value::Array(d), Value::Array(e)) => {
            d.len() <= e.len() && d.iter().zip(e).all(|(d, e)| derives(d, e))
        }
        (Value::Object(d), Value::Object(e)) => d
            .iter()
            .all(|(k, d)| derives(d, e.get(k).unwrap_or(&Value::Null))),
        (d, e) => d == e,
    }
}

/// Every key of `desired` is in `existing` with the same value.
fn map_derives(
    desired: Option<&BTreeMap<String, String>>,
    existing: Option<&BTreeMap<String, String>>,
) -> bool {
    desired
        .into_iter()
        .flatten()
        .all(|(k, v)| existing.and_then(|e| e.get(k)) == Some(v))
}

/// `existing` with `desired`'s entries set over it: what other tools added stays.
pub(super) fn merged(
    existing: Option<&BTreeMap<String, String>>,
    desired: Option<&BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    let mut out = existing.cloned().unwrap_or_default();
    out.extend(
        desired
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    (!out.is_empty()).then_some(out)
}

/// The HPA's own view of its health, as KEDA mirrors it into the ScaledObject's `HPAActive`
/// condition (`checkHPAHealth`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpaHealth {
    /// `True` or `False`.
    pub status: &'static str,
    /// `HPAActive` or `ScalingDisabled` when `True`; when `False` the HPA's own reason
    /// (`FailedGetExternalMetric`, ...), else `HPAMetricsUnavailable`.
    pub reason: String,
    /// KEDA's message: `HPA is actively scaling`, the HPA's own when scaling is disabled, or
    /// `HPA is not actively scaling: <the HPA's message>`.
    pub message: String,
}

/// The longest HPA reason passed through; a condition reason is a short CamelCase word.
const MAX_REASON: usize = 128;

/// Whether `reason` can stand as a condition reason (metav1.Condition's rule: a letter, then
/// letters, digits, `_`, `,` or `:`, not ending in `,` or `:`).
fn is_condition_reason(reason: &str) -> bool {
    let mut chars = reason.chars();
    reason.len() <= MAX_REASON
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && reason
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
        && !reason.ends_with([',', ':'])
}

/// The `HPAActive` condition an HPA asks for, as KEDA's `getHPAHealth` makes it from the HPA's
/// `ScalingActive` condition: `True`/`HPAActive` when it scales; `True`/`ScalingDisabled` when it
/// switched itself off because the target is at 0 replicas (keda-rs owns 0 <-> 1, so that is
/// healthy); otherwise `False` with the HPA's own reason passed through (`FailedGetExternalMetric`,
/// so alerts can filter on it; `HPAMetricsUnavailable` when it has none, or one that is not a
/// condition reason). `None` while the HPA has not reported `ScalingActive` yet: nothing is
/// known, and the condition stays as it was.
pub fn hpa_health(hpa: &HorizontalPodAutoscaler) -> Option<HpaHealth> {
    let scaling_active = hpa
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == SCALING_ACTIVE)?;
    Some(scaling_active_health(scaling_active))
}

/// [`hpa_health`] of an HPA whose `ScalingActive` condition is `scaling_active`.
pub fn scaling_active_health(
    scaling_active: &k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition,
) -> HpaHealth {
    let message = scaling_active.message.clone().unwrap_or_default();
    let reason = scaling_active.reason.as_deref().unwrap_or_default();
    if scaling_active.status == STATUS_TRUE {
        HpaHealth {
            status: STATUS_TRUE,
            reason: keda_reason::HPA_ACTIVE.to_string(),
            message: "HPA is actively scaling".to_string(),
        }
    } else if reason == keda_reason::SCALING_DISABLED {
        HpaHealth {
            status: STATUS_TRUE,
            reason: keda_reason::SCALING_DISABLED.to_string(),
            message,
        }
    } else {
        HpaHealth {
            status: STATUS_FALSE,
            reason: if is_condition_reason(reason) {
                reason.to_string()
            } else {
                keda_reason::HPA_METRICS_UNAVAILABLE.to_string()
            },
            message: format!("HPA is not actively scaling: {message}"),
        }
    }
}

#[cfg(test)]
mod tests;
