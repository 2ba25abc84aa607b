//! KEDA's admission rules (KEDA-CONTRACT 1.11): the per-object rules of
//! [`keda_api::validation`] and the cross-object rules of KEDA's ScaledObject webhook, answered
//! from the [`Caches`].
//!
//! KEDA stops at the first failing check (in an order that varies, its checks sit in a Go map);
//! keda-rs reports every violation, joined by `"; "`: the cross-object ones first, in KEDA's
//! words, then the per-object ones, which name the field.

use std::collections::BTreeSet;

use keda_api::annotations::TRANSFER_HPA_OWNERSHIP;
use keda_api::gvkr::parse_gvk;
use keda_api::scaled_job::ScaledJob;
use keda_api::scaled_object::ScaledObject;
use keda_api::trigger_authentication::{ClusterTriggerAuthentication, TriggerAuthentication};
use keda_api::validation::{
    RESOURCE_TRIGGER_TYPES, ValidationError, ValidationErrors,
    validate_cluster_trigger_authentication, validate_scaled_job, validate_scaled_object_admission,
    validate_trigger_authentication,
};
use kube::ResourceExt;

use crate::cache::{Caches, gvk_string, hpa_index, target_index, target_key};

/// Why an object is refused: the message the user sees and the reasons (KEDA's
/// `keda_webhook_scaled_object_validation_errors_total{reason}` labels) of its violations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// Every violation, joined by `"; "`.
    pub message: String,
    /// KEDA's reason label of each violated rule, deduplicated.
    pub reasons: BTreeSet<&'static str>,
}

#[derive(Default)]
struct Violations {
    messages: Vec<String>,
    reasons: BTreeSet<&'static str>,
}

impl Violations {
    fn push(&mut self, reason: Option<&'static str>, message: String) {
        self.messages.push(message);
        if let Some(reason) = reason {
            self.reasons.insert(reason);
        }
    }

    fn extend(&mut self, errors: Result<(), ValidationErrors>) {
        if let Err(errors) = errors {
            for e in errors.0 {
                self.push(Some(keda_reason(&e)), e.to_string());
            }
        }
    }

    fn into_result(self) -> Result<(), Denial> {
        if self.messages.is_empty() {
            Ok(())
        } else {
            Err(Denial {
                message: self.messages.join("; "),
                reasons: self.reasons,
            })
        }
    }
}

/// KEDA's reason label of a per-object rule (`scaledobject_webhook.go`); keda-rs' own rules
/// keep their [`ValidationError::rule`].
pub fn keda_reason(error: &ValidationError) -> &'static str {
    match error.rule() {
        "no-triggers"
        | "duplicate-trigger-name"
        | "cached-metrics-not-supported"
        | "scaledjob-metric-type" => "incorrect-triggers",
        "min-above-max" | "idle-not-below-min" => "incorrect-replicas",
        "negative-fallback" | "fallback-needs-external-trigger" => "incorrect-fallback",
        // KEDA checks `fallback.behavior` with scalingModifiers apart from `CheckFallbackValid`.
        "fallback-behavior-needs-formula" => "scaling-modifiers-fallback",
        rule if rule.starts_with("scaling-modifiers") => "scaling-modifiers",
        rule => rule,
    }
}

/// KEDA's warning when `pollingInterval` is set where it changes nothing.
pub const POLLING_INTERVAL_NOT_RELEVANT: &str = "PollingInterval is configured but is not relevant. PollingInterval is only relevant when minReplicaCount = 0, idleReplicaCount is set, or useCachedMetrics is enabled";
/// KEDA's warning when `cooldownPeriod` is set where it changes nothing.
pub const COOLDOWN_PERIOD_NOT_RELEVANT: &str = "CooldownPeriod is configured but is not relevant. CooldownPeriod is only relevant when minReplicaCount = 0 or idleReplicaCount is set";

/// The admission warnings of an admitted ScaledObject, KEDA's (`verifyScaledObjects`): with
/// `minReplicaCount` above 0 and no `idleReplicaCount`, a `pollingInterval` (unless a trigger
/// uses cached metrics) and a `cooldownPeriod` are set for nothing.
pub fn scaled_object_warnings(so: &ScaledObject) -> Vec<&'static str> {
    let spec = &so.spec;
    let fixed = spec.min_replica_count.unwrap_or(0) > 0 && spec.idle_replica_count.is_none();
    let mut warnings = Vec::new();
    if spec.polling_interval.is_some()
        && fixed
        && !spec.triggers.iter().any(|t| t.use_cached_metrics)
    {
        warnings.push(POLLING_INTERVAL_NOT_RELEVANT);
    }
    if spec.cooldown_period.is_some() && fixed {
        warnings.push(COOLDOWN_PERIOD_NOT_RELEVANT);
    }
    warnings
}

/// Validates a ScaledObject being created or updated: KEDA's cross-object rules from `caches`,
/// then the per-object rules. With `dry_run`, the workload's resource requests are not checked
/// (as in KEDA).
///
/// # Errors
/// [`Denial`] with every violation.
pub fn check_scaled_object(
    so: &ScaledObject,
    dry_run: bool,
    caches: &Caches,
) -> Result<(), Denial> {
    let mut v = Violations::default();
    let namespace = so.namespace().unwrap_or_default();
    let name = so.name_any();
    let t = &so.spec.scale_target_ref;
    let api_version = t.api_version.as_deref().unwrap_or_default();
    let kind = t.kind.as_deref().unwrap_or_default();
    match parse_gvk(api_version, kind) {
        Err(e) => v.push(None, e.to_string()),
        Ok(gvk) => {
            let gvk = gvk_string(&gvk);
            if let Some(target) = target_key(api_version, kind, &t.name) {
                other_scaled_objects(so, &namespace, &name, &target, &gvk, caches, &mut v);
                other_hpas(so, &namespace, &name, &target, &gvk, caches, &mut v);
            }
            if !dry_run {
                resource_requests(so, &namespace, &gvk, caches, &mut v);
            }
        }
    }
    // The cpu/memory-only rule is KEDA's, checked above with KEDA's scope (Deployments and
    // StatefulSets, not on dry-run) and words.
    v.extend(validate_scaled_object_admission(so).map_err(|e| {
        ValidationErrors(
            e.0.into_iter()
                .filter(|e| !matches!(e, ValidationError::ResourceTriggersNeedMinReplicas))
                .collect(),
        )
    }));
    v.into_result()
}

/// Rules 1 and 2: no other ScaledObject of the namespace scales the same workload or owns the
/// same HPA name.
fn other_scaled_objects(
    so: &ScaledObject,
    namespace: &str,
    name: &str,
    target: &str,
    gvk: &str,
    caches: &Caches,
    v: &mut Violations,
) {
    let target_name = &so.spec.scale_target_ref.name;
    for (other, _) in caches
        .scaled_objects
        .find(namespace, &target_index(target))
        .into_iter()
        .filter(|(other, _)| other != name)
    {
        v.push(
            Some("other-scaled-object"),
            format!(
                "the workload '{target_name}' of type '{gvk}' is already managed by the ScaledObject '{other}'"
            ),
        );
    }
    let hpa_name = so.hpa_name();
    for (other, _) in caches
        .scaled_objects
        .find(namespace, &hpa_index(&hpa_name))
        .into_iter()
        .filter(|(other, _)| other != name)
    {
        v.push(
            Some("other-scaled-object-hpa"),
            format!("the HPA '{hpa_name}' is already managed by the ScaledObject '{other}'"),
        );
    }
}

/// Rule 3: no HPA the ScaledObject does not own scales the same workload, unless the HPA opts
/// out (`validations.keda.sh/hpa-ownership: "false"`) or the ScaledObject takes it over
/// (`scaledobject.keda.sh/transfer-hpa-ownership: "true"` and the HPA named in
/// `advanced.horizontalPodAutoscalerConfig.name`).
fn other_hpas(
    so: &ScaledObject,
    namespace: &str,
    name: &str,
    target: &str,
    gvk: &str,
    caches: &Caches,
    v: &mut Violations,
) {
    let target_name = &so.spec.scale_target_ref.name;
    let transfer = so
        .annotations()
        .get(TRANSFER_HPA_OWNERSHIP)
        .is_some_and(|a| a == "true");
    let custom_hpa_name = so
        .spec
        .advanced
        .as_ref()
        .and_then(|a| a.horizontal_pod_autoscaler_config.as_ref())
        .and_then(|h| h.name.as_deref());
    for (hpa, summary) in caches.hpas.find(namespace, &target_index(target)) {
        if summary.ownership_check_disabled
            || summary.scaled_object_owners.iter().any(|o| o == name)
        {
            continue;
        }
        if !transfer {
            v.push(
                Some("other-hpa"),
                format!(
                    "the workload '{target_name}' of type '{gvk}' is already managed by the hpa '{hpa}'"
                ),
            );
        } else if custom_hpa_name != Some(hpa.as_str()) {
            v.push(
                Some("transfer-ownership-missing-hpa-name"),
                format!(
                    "the existing hpa '{hpa}' for workload '{target_name}' of type '{gvk}' must be specified by name in advanced settings to enable ownership transfer"
                ),
            );
        }
    }
}

/// Rules 5 and 6 as KEDA checks them (`verifyCPUMemoryScalers`): for a Deployment or
/// StatefulSet target, every container (or the trigger's `containerName`) needs a request or
/// limit above zero for each cpu/memory trigger's resource, unless a LimitRange of the namespace
/// gives containers a default; and an object with only cpu/memory triggers needs
/// `minReplicaCount` >= 1. Other kinds are not checked.
fn resource_requests(
    so: &ScaledObject,
    namespace: &str,
    gvk: &str,
    caches: &Caches,
    v: &mut Violations,
) {
    let triggers = &so.spec.triggers;
    let resource_triggers: Vec<_> = triggers
        .iter()
        .filter(|t| RESOURCE_TRIGGER_TYPES.contains(&t.type_.as_str()))
        .collect();
    if resource_triggers.is_empty() {
        return;
    }
    let workload = &so.spec.scale_target_ref.name;
    let containers = match gvk {
        "apps/v1.Deployment" => caches
            .deployments
            .get(namespace, workload)
            .map(|w| w.containers),
        "apps/v1.StatefulSet" => caches
            .stateful_sets
            .get(namespace, workload)
            .map(|w| w.containers),
        _ => return,
    };
    let Some(containers) = containers else {
        // KEDA answers with the error of its GET.
        let resource = if gvk == "apps/v1.Deployment" {
            "deployments.apps"
        } else {
            "statefulsets.apps"
        };
        v.push(None, format!("{resource} \"{workload}\" not found"));
        return;
    };
    let mut missing = BTreeSet::new();
    for trigger in &resource_triggers {
        let resource = trigger.type_.as_str();
        let only = trigger
            .metadata
            .get("containerName")
            .map(String::as_str)
            .filter(|c| !c.is_empty());
        for c in containers
            .iter()
            .filter(|c| only.is_none_or(|only| c.name == only))
        {
            if !c.has(resource)
                && !caches.limit_range_default(namespace, resource)
                && missing.insert((resource, c.name.clone()))
            {
                v.push(
                    Some("missing-requests"),
                    format!(
                        "the scaledobject has a {resource} trigger but the container {} doesn't have the {resource} request defined",
                        c.name
                    ),
                );
            }
        }
    }
    if resource_triggers.len() == triggers.len() && so.spec.min_replica_count.unwrap_or(0) == 0 {
        v.push(
            Some("scale-to-zero-requirements-not-met"),
            "scaledobject has only cpu/memory triggers AND minReplica is 0 (scale to zero doesn't work in this case)"
                .to_string(),
        );
    }
}

/// Validates a ScaledJob (the trigger rules).
///
/// # Errors
/// [`Denial`] with every violation.
pub fn check_scaled_job(sj: &ScaledJob) -> Result<(), Denial> {
    let mut v = Violations::default();
    v.extend(validate_scaled_job(sj));
    v.into_result()
}

/// Validates a TriggerAuthentication: KEDA's rules, then what it may make the operator do
/// with its own identity under `identity` ([`keda_api::identity::namespaced_refusals`], the
/// rules the operator applies again).
///
/// # Errors
/// [`Denial`] with every violation.
pub fn check_trigger_authentication(
    ta: &TriggerAuthentication,
    identity: &keda_api::identity::IdentityPolicy,
) -> Result<(), Denial> {
    let mut v = Violations::default();
    v.extend(validate_trigger_authentication(ta));
    let namespace = ta.metadata.namespace.as_deref().unwrap_or_default();
    for refusal in keda_api::identity::namespaced_refusals(namespace, &ta.spec, identity) {
        v.push(None, refusal.to_string());
    }
    v.into_result()
}

/// Validates a CloudEventSource's or ClusterCloudEventSource's spec as KEDA's webhook does:
/// the subscription lists only (a destination keda-rs cannot use is admitted, as KEDA admits
/// it, and reported in the source's `Active` condition).
///
/// # Errors
/// [`Denial`] with KEDA's message.
pub fn check_cloud_event_source(
    spec: &keda_api::cloud_event_source::CloudEventSourceSpec,
) -> Result<(), Denial> {
    let mut v = Violations::default();
    if let Err(e) = keda_api::cloud_event_source::validate_subscription(&spec.event_subscription) {
        v.push(None, e.to_string());
    }
    v.into_result()
}

/// Validates a ClusterTriggerAuthentication.
///
/// # Errors
/// [`Denial`] with every violation.
pub fn check_cluster_trigger_authentication(
    cta: &ClusterTriggerAuthentication,
) -> Result<(), Denial> {
    let mut v = Violations::default();
    v.extend(validate_cluster_trigger_authentication(cta));
    v.into_result()
}
