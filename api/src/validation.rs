//! Admission rules of KEDA's webhooks that need no cluster lookup (KEDA-CONTRACT 1.11), as pure
//! functions.
//!
//! Two sets, as in KEDA (issue 29, row 3). KEDA's reconcile runs only some of its rules
//! (`controllers/keda/scaledobject_controller.go` `reconcileScaledObject`:
//! `CheckReplicaCountBoundsAreValid`, `ValidateTriggers`, and `ValidateAndCompileScalingModifiers`
//! through the scalers cache); the others (`verifyCPUMemoryScalers`, `verifyFallback`,
//! `verifyName`, ...) run only in its admission webhook, so with the webhook off an object that
//! breaks them runs. Each [`ValidationError`] says which set it belongs to ([`Stage`]):
//! [`validate_scaled_object_reconcile`] is what the operator refuses (KEDA's reconcile-time rules
//! and keda-rs's own safety bounds, `docs/reliability.md`), [`validate_scaled_object_admission`]
//! is what the webhook refuses (both sets).
//!
//! Every `validate_*` function checks **all** rules and returns every violation, in a fixed
//! order (the order of the rules below, then trigger order), so a user fixes everything in one
//! round. Each [`ValidationError`] names the field path and the rule; [`ValidationErrors`]
//! displays them joined by `"; "`.
//!
//! Not here because they need the cluster: another ScaledObject or HPA owning the same target or
//! HPA name, cpu/memory requests on the target's containers.

use std::collections::BTreeMap;
use std::fmt;

use kube::ResourceExt;

use crate::formula::{FormulaError, validate_formula};
use crate::scaled_job::{RUNNING_JOB_PERCENTAGE_BOUNDS, ScaledJob};
use crate::scaled_object::{FallbackBehavior, ScaledObject, default_hpa_name};
use crate::trigger::ScaleTrigger;
use crate::trigger_authentication::{
    ClusterTriggerAuthentication, OAUTH2_CLIENT_CREDENTIALS, POD_IDENTITY_AWS,
    POD_IDENTITY_AZURE_WORKLOAD, TriggerAuthentication, TriggerAuthenticationSpec,
};

/// Longest ScaledObject name and HPA name Kubernetes labels allow.
pub const MAX_NAME_LENGTH: usize = 63;

/// Trigger types whose metrics the HPA reads from the resource metrics API.
pub const RESOURCE_TRIGGER_TYPES: [&str; 2] = ["cpu", "memory"];
/// Trigger types that reject `useCachedMetrics`.
pub const NO_CACHED_METRICS_TRIGGER_TYPES: [&str; 3] = ["cpu", "memory", "cron"];

/// One violated rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// The object has no trigger.
    #[error("spec.triggers: at least one trigger is required")]
    NoTriggers,
    /// Two triggers share a name.
    #[error(
        "spec.triggers[{index}].name: {name:?} is defined multiple times, trigger names must be unique"
    )]
    DuplicateTriggerName {
        /// Index of the second (or later) trigger with this name.
        index: usize,
        /// The name.
        name: String,
    },
    /// `useCachedMetrics` on a trigger type that cannot use it.
    #[error(
        "spec.triggers[{index}].useCachedMetrics: not supported for trigger type {trigger_type:?}"
    )]
    CachedMetricsNotSupported {
        /// Trigger index.
        index: usize,
        /// Its type.
        trigger_type: String,
    },
    /// `metricType` on a ScaledJob trigger.
    #[error("spec.triggers[{index}].metricType: not supported on ScaledJob triggers")]
    ScaledJobMetricType {
        /// Trigger index.
        index: usize,
    },
    /// Effective min above effective max.
    #[error("spec.minReplicaCount ({min}) must not be greater than spec.maxReplicaCount ({max})")]
    MinAboveMax {
        /// Effective minimum.
        min: i32,
        /// Effective maximum.
        max: i32,
    },
    /// idle >= effective min.
    #[error("spec.idleReplicaCount ({idle}) must be less than spec.minReplicaCount ({min})")]
    IdleNotBelowMin {
        /// idleReplicaCount.
        idle: i32,
        /// Effective minimum (see [`validate_scaled_object_admission`]).
        min: i32,
    },
    /// Only cpu/memory triggers and min 0 or unset.
    #[error(
        "spec.minReplicaCount must be at least 1 when all triggers are cpu or memory (they cannot scale to zero)"
    )]
    ResourceTriggersNeedMinReplicas,
    /// A negative fallback number.
    #[error("spec.fallback.{field} ({value}) must be greater than or equal to 0")]
    NegativeFallback {
        /// `failureThreshold` or `replicas`.
        field: &'static str,
        /// The value.
        value: i32,
    },
    /// Fallback without any non-cpu/memory trigger and without scaling modifiers.
    #[error(
        "spec.fallback: at least one trigger that is not cpu or memory is required for fallback"
    )]
    FallbackNeedsExternalTrigger,
    /// `fallback.behavior: scalingModifiers` without a formula.
    #[error(
        "spec.fallback.behavior: \"scalingModifiers\" requires spec.advanced.scalingModifiers.formula"
    )]
    FallbackBehaviorNeedsFormula,
    /// Scaling modifiers set but no formula.
    #[error("spec.advanced.scalingModifiers.formula: required when scalingModifiers is used")]
    ModifiersFormulaMissing,
    /// The formula does not compile, is over a limit or budget, or does not run with -1 for
    /// every trigger (see [`crate::formula::validate_formula`]). The message names the field.
    #[error("{0}")]
    ModifiersFormulaInvalid(FormulaError),
    /// Formula without target.
    #[error("spec.advanced.scalingModifiers.target: required when formula is set")]
    ModifiersTargetMissing,
    /// Target not a float > 0.
    #[error("spec.advanced.scalingModifiers.target ({target:?}) must be a number greater than 0")]
    ModifiersTargetInvalid {
        /// The target as written.
        target: String,
    },
    /// Activation target not a number.
    #[error(
        "spec.advanced.scalingModifiers.activationTarget ({activation_target:?}) must be a number"
    )]
    ModifiersActivationTargetInvalid {
        /// The activation target as written.
        activation_target: String,
    },
    /// metricType other than AverageValue/Value.
    #[error(
        "spec.advanced.scalingModifiers.metricType ({metric_type:?}) must be AverageValue or Value"
    )]
    ModifiersMetricTypeInvalid {
        /// The metric type as written.
        metric_type: String,
    },
    /// ScaledObject name too long.
    #[error("metadata.name: {name:?} is {len} characters, the maximum is 63")]
    NameTooLong {
        /// The name.
        name: String,
        /// Its length.
        len: usize,
    },
    /// HPA name (custom or derived) too long.
    #[error("{field}: the HPA name {hpa_name:?} is {len} characters, the maximum is 63")]
    HpaNameTooLong {
        /// `metadata.name` for the derived name, else the custom name's path.
        field: &'static str,
        /// The HPA name.
        hpa_name: String,
        /// Its length.
        len: usize,
    },
    /// azure-workload `identityId` set to "".
    #[error("{prefix}podIdentity.identityId: must not be empty when set")]
    EmptyIdentityId {
        /// `spec.` path prefix.
        prefix: &'static str,
    },
    /// azure-workload `identityTenantId` set to "".
    #[error("{prefix}podIdentity.identityTenantId: must not be empty when set")]
    EmptyIdentityTenantId {
        /// `spec.` path prefix.
        prefix: &'static str,
    },
    /// azure-workload authority host without tenant.
    #[error("{prefix}podIdentity.identityTenantId: required when identityAuthorityHost is set")]
    AuthorityHostWithoutTenant {
        /// `spec.` path prefix.
        prefix: &'static str,
    },
    /// aws roleArn with identityOwner workload.
    #[error("{prefix}podIdentity.roleArn: cannot be set when identityOwner is \"workload\"")]
    RoleArnWithWorkloadOwner {
        /// `spec.` path prefix.
        prefix: &'static str,
    },
    /// aws externalID without roleArn.
    #[error("{prefix}podIdentity.externalID: requires roleArn to be set")]
    ExternalIdWithoutRoleArn {
        /// `spec.` path prefix.
        prefix: &'static str,
    },
    /// oauth2.type not clientCredentials.
    #[error("spec.oauth2.type ({type_:?}) must be \"clientCredentials\"")]
    OAuth2Type {
        /// The type as written.
        type_: String,
    },
    /// oauth2 without clientId.
    #[error("spec.oauth2.clientId: required when oauth2 is configured")]
    OAuth2ClientIdMissing,
    /// oauth2 without tokenUrl.
    #[error("spec.oauth2.tokenUrl: required when oauth2 is configured")]
    OAuth2TokenUrlMissing,
    /// oauth2 tokenUrl not an http(s) URL with a host.
    #[error("spec.oauth2.tokenUrl ({url:?}) must be an http or https URL")]
    OAuth2TokenUrlInvalid {
        /// The URL as written.
        url: String,
    },
    /// `filePath` on a namespaced TriggerAuthentication.
    #[error("spec.filePath: only allowed on ClusterTriggerAuthentication")]
    FilePathNotClusterScoped,
    /// A number outside the range keda-rs holds it to (`docs/reliability.md`, "Bounds").
    #[error("{field} ({value}) must be {bound}")]
    OutOfRange {
        /// The field path.
        field: &'static str,
        /// The value as written.
        value: String,
        /// The bound, e.g. `between 0 and 100`.
        bound: String,
    },
}

/// Where a rule is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// At reconcile (and at admission): KEDA's reconciler checks it too, or it is one of
    /// keda-rs's safety bounds (`docs/reliability.md`). The operator refuses an object that
    /// breaks it (`Ready=False`).
    Reconcile,
    /// Only at admission, as in KEDA, whose reconciler runs an object that breaks it when the
    /// webhook is off or did not see the object.
    Admission,
}

impl ValidationError {
    /// Where this rule is enforced: see [`Stage`].
    pub fn stage(&self) -> Stage {
        match self {
            // KEDA's ValidateTriggers and CheckReplicaCountBoundsAreValid (reconcileScaledObject),
            // the ScaledJob reconciler's metricType check, ValidateAndCompileScalingModifiers
            // (GetScalersCache, which the reconcile calls to build the HPA), and keda-rs's bounds.
            Self::NoTriggers
            | Self::DuplicateTriggerName { .. }
            | Self::CachedMetricsNotSupported { .. }
            | Self::ScaledJobMetricType { .. }
            | Self::MinAboveMax { .. }
            | Self::IdleNotBelowMin { .. }
            | Self::ModifiersFormulaMissing
            | Self::ModifiersFormulaInvalid(_)
            | Self::ModifiersTargetMissing
            | Self::ModifiersTargetInvalid { .. }
            | Self::ModifiersActivationTargetInvalid { .. }
            | Self::ModifiersMetricTypeInvalid { .. }
            | Self::OutOfRange { .. } => Stage::Reconcile,
            // verifyCPUMemoryScalers, verifyFallback (CheckFallbackValid), the scalingModifiers
            // fallback check of verifyScaledObjects, verifyName; the TriggerAuthentication
            // webhook's rules.
            Self::ResourceTriggersNeedMinReplicas
            | Self::NegativeFallback { .. }
            | Self::FallbackNeedsExternalTrigger
            | Self::FallbackBehaviorNeedsFormula
            | Self::NameTooLong { .. }
            | Self::HpaNameTooLong { .. }
            | Self::EmptyIdentityId { .. }
            | Self::EmptyIdentityTenantId { .. }
            | Self::AuthorityHostWithoutTenant { .. }
            | Self::RoleArnWithWorkloadOwner { .. }
            | Self::ExternalIdWithoutRoleArn { .. }
            | Self::OAuth2Type { .. }
            | Self::OAuth2ClientIdMissing
            | Self::OAuth2TokenUrlMissing
            | Self::OAuth2TokenUrlInvalid { .. }
            | Self::FilePathNotClusterScoped => Stage::Admission,
        }
    }

    /// A short, stable identifier of the rule, for metric labels and condition reasons.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::NoTriggers => "no-triggers",
            Self::DuplicateTriggerName { .. } => "duplicate-trigger-name",
            Self::CachedMetricsNotSupported { .. } => "cached-metrics-not-supported",
            Self::ScaledJobMetricType { .. } => "scaledjob-metric-type",
            Self::MinAboveMax { .. } => "min-above-max",
            Self::IdleNotBelowMin { .. } => "idle-not-below-min",
            Self::ResourceTriggersNeedMinReplicas => "scale-to-zero-requirements-not-met",
            Self::NegativeFallback { .. } => "negative-fallback",
            Self::FallbackNeedsExternalTrigger => "fallback-needs-external-trigger",
            Self::FallbackBehaviorNeedsFormula => "fallback-behavior-needs-formula",
            Self::ModifiersFormulaMissing => "scaling-modifiers-formula-missing",
            Self::ModifiersFormulaInvalid(_) => "scaling-modifiers-formula-invalid",
            Self::ModifiersTargetMissing => "scaling-modifiers-target-missing",
            Self::ModifiersTargetInvalid { .. } => "scaling-modifiers-target-invalid",
            Self::ModifiersActivationTargetInvalid { .. } => {
                "scaling-modifiers-activation-target-invalid"
            }
            Self::ModifiersMetricTypeInvalid { .. } => "scaling-modifiers-metric-type-invalid",
            Self::NameTooLong { .. } => "name-too-long",
            Self::HpaNameTooLong { .. } => "hpa-name-too-long",
            Self::EmptyIdentityId { .. } => "empty-identity-id",
            Self::EmptyIdentityTenantId { .. } => "empty-identity-tenant-id",
            Self::AuthorityHostWithoutTenant { .. } => "authority-host-without-tenant",
            Self::RoleArnWithWorkloadOwner { .. } => "role-arn-with-workload-owner",
            Self::ExternalIdWithoutRoleArn { .. } => "external-id-without-role-arn",
            Self::OAuth2Type { .. } => "oauth2-type",
            Self::OAuth2ClientIdMissing => "oauth2-client-id-missing",
            Self::OAuth2TokenUrlMissing => "oauth2-token-url-missing",
            Self::OAuth2TokenUrlInvalid { .. } => "oauth2-token-url-invalid",
            Self::FilePathNotClusterScoped => "file-path-not-cluster-scoped",
            Self::OutOfRange { .. } => "out-of-range",
        }
    }
}

/// All violations found in one object, in rule order. Never empty when returned as an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}

impl ValidationErrors {
    /// The individual violations.
    pub fn errors(&self) -> &[ValidationError] {
        &self.0
    }
}

fn into_result(errors: Vec<ValidationError>) -> Result<(), ValidationErrors> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors(errors))
    }
}

/// Rules shared by ScaledObject and ScaledJob triggers: at least one, unique names,
/// no `useCachedMetrics` on cpu/memory/cron.
fn check_triggers(triggers: &[ScaleTrigger], errors: &mut Vec<ValidationError>) {
    if triggers.is_empty() {
        errors.push(ValidationError::NoTriggers);
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, t) in triggers.iter().enumerate() {
        if !t.name.is_empty() && seen.insert(t.name.as_str(), index).is_some() {
            errors.push(ValidationError::DuplicateTriggerName {
                index,
                name: t.name.clone(),
            });
        }
        if t.use_cached_metrics && NO_CACHED_METRICS_TRIGGER_TYPES.contains(&t.type_.as_str()) {
            errors.push(ValidationError::CachedMetricsNotSupported {
                index,
                trigger_type: t.type_.clone(),
            });
        }
    }
}

fn is_resource_trigger(t: &ScaleTrigger) -> bool {
    RESOURCE_TRIGGER_TYPES.contains(&t.type_.as_str())
}

/// The target is an `apps/v1` Deployment or StatefulSet (KEDA's `GVKString()` is
/// `apps/v1.Deployment` or `apps/v1.StatefulSet`; empty apiVersion and kind default to them).
fn targets_deployment_or_stateful_set(so: &ScaledObject) -> bool {
    so.scale_target_gvkr().is_ok_and(|g| {
        g.group == "apps"
            && g.version == "v1"
            && matches!(g.kind.as_str(), "Deployment" | "StatefulSet")
    })
}

/// Validates a ScaledObject as the admission webhook does: every rule, of both [`Stage`]s.
/// Rules, in order (the stage of each in brackets):
/// 1. [reconcile] triggers: at least one; unique names; no `useCachedMetrics` on
///    cpu/memory/cron;
/// 2. [reconcile] replica bounds, with KEDA's arithmetic: the effective min is 0 when `minReplicaCount` is
///    unset and `max(minReplicaCount, 1)` when set; the effective max is `maxReplicaCount` or 100;
///    min must not exceed max and `idleReplicaCount` must be below the effective min;
/// 3. [admission] only cpu/memory triggers need `minReplicaCount` >= 1 on an apps/v1 Deployment or
///    StatefulSet (KEDA checks no other kind);
/// 4. [admission] fallback: non-negative numbers; without scaling modifiers, a trigger that is not
///    cpu/memory; behavior `scalingModifiers` needs a formula;
/// 5. [reconcile] scaling modifiers (when any field is set): formula required, compiled against the named
///    triggers within the formula's limits and budgets and run once with -1 for each
///    ([`validate_formula`], as KEDA's webhook does), target required and a float > 0,
///    activationTarget a float when set, metricType AverageValue or Value;
/// 6. [admission] name <= 63 characters, HPA name (custom or `keda-hpa-<name>`) <= 63 characters.
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_scaled_object_admission(so: &ScaledObject) -> Result<(), ValidationErrors> {
    into_result(scaled_object_errors(so))
}

/// Validates a ScaledObject as the operator's reconcile does: only the rules of
/// [`Stage::Reconcile`] (rules 1, 2 and 5 of [`validate_scaled_object_admission`]). An object
/// that breaks only admission rules runs, as under KEDA with its webhook off.
///
/// # Errors
/// Every violation of a reconcile rule, see [`ValidationErrors`].
pub fn validate_scaled_object_reconcile(so: &ScaledObject) -> Result<(), ValidationErrors> {
    into_result(
        scaled_object_errors(so)
            .into_iter()
            .filter(|e| e.stage() == Stage::Reconcile)
            .collect(),
    )
}

fn scaled_object_errors(so: &ScaledObject) -> Vec<ValidationError> {
    let spec = &so.spec;
    let mut errors = Vec::new();

    check_triggers(&spec.triggers, &mut errors);

    let min = match spec.min_replica_count {
        None => 0,
        Some(_) => spec.hpa_min_replicas(),
    };
    let max = spec.hpa_max_replicas();
    if min > max {
        errors.push(ValidationError::MinAboveMax { min, max });
    }
    if let Some(idle) = spec.idle_replica_count
        && idle >= min
    {
        errors.push(ValidationError::IdleNotBelowMin { idle, min });
    }

    // KEDA's webhook (verifyCPUMemoryScalers) checks this only for apps/v1 Deployments and
    // StatefulSets: any other kind returns before the check.
    if !spec.triggers.is_empty()
        && spec.triggers.iter().all(is_resource_trigger)
        && spec.min_replica_count.unwrap_or(0) == 0
        && targets_deployment_or_stateful_set(so)
    {
        errors.push(ValidationError::ResourceTriggersNeedMinReplicas);
    }

    let modifiers = spec.scaling_modifiers();
    let formula = modifiers
        .and_then(|m| m.formula.as_deref())
        .filter(|f| !f.is_empty());
    if let Some(fallback) = &spec.fallback {
        for (field, value) in [
            ("failureThreshold", fallback.failure_threshold),
            ("replicas", fallback.replicas),
        ] {
            if value < 0 {
                errors.push(ValidationError::NegativeFallback { field, value });
            }
        }
        if modifiers.is_none() && spec.triggers.iter().all(is_resource_trigger) {
            errors.push(ValidationError::FallbackNeedsExternalTrigger);
        }
        if fallback.behavior == Some(FallbackBehavior::ScalingModifiers) && formula.is_none() {
            errors.push(ValidationError::FallbackBehaviorNeedsFormula);
        }
    }

    if let Some(m) = modifiers {
        match formula {
            None => errors.push(ValidationError::ModifiersFormulaMissing),
            Some(f) => {
                if let Err(e) = validate_formula(f, &spec.triggers) {
                    errors.push(ValidationError::ModifiersFormulaInvalid(e));
                }
            }
        }
        match m.target.as_deref().filter(|t| !t.is_empty()) {
            None if formula.is_some() => errors.push(ValidationError::ModifiersTargetMissing),
            Some(t)
                if !t
                    .trim()
                    .parse::<f64>()
                    .is_ok_and(|v| v > 0.0 && v.is_finite()) =>
            {
                errors.push(ValidationError::ModifiersTargetInvalid {
                    target: t.to_string(),
                });
            }
            _ => {}
        }
        if let Some(a) = m.activation_target.as_deref().filter(|a| !a.is_empty())
            && !a.trim().parse::<f64>().is_ok_and(f64::is_finite)
        {
            errors.push(ValidationError::ModifiersActivationTargetInvalid {
                activation_target: a.to_string(),
            });
        }
        if let Some(mt) = m.metric_type.as_deref()
            && !matches!(mt, "" | "AverageValue" | "Value")
        {
            errors.push(ValidationError::ModifiersMetricTypeInvalid {
                metric_type: mt.to_string(),
            });
        }
    }

    let name = so.name_any();
    if name.len() > MAX_NAME_LENGTH {
        errors.push(ValidationError::NameTooLong {
            len: name.len(),
            name: name.clone(),
        });
    }
    let hpa_name = so.hpa_name();
    if hpa_name.len() > MAX_NAME_LENGTH {
        let field = if hpa_name == default_hpa_name(&name) {
            "metadata.name"
        } else {
            "spec.advanced.horizontalPodAutoscalerConfig.name"
        };
        errors.push(ValidationError::HpaNameTooLong {
            field,
            len: hpa_name.len(),
            hpa_name,
        });
    }

    errors
}

/// Validates a ScaledJob: the trigger rules of [`validate_scaled_object_admission`] (at least
/// one, unique names, no `useCachedMetrics` on cpu/memory/cron), plus no `metricType` on its
/// triggers (KEDA rejects that in the reconciler rather than the webhook). Every rule is a
/// [`Stage::Reconcile`] rule (KEDA's ScaledJob reconciler runs `ValidateTriggers`; the running
/// job percentage is a keda-rs bound): the operator and the webhook both call this.
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_scaled_job(sj: &ScaledJob) -> Result<(), ValidationErrors> {
    let mut errors = Vec::new();
    check_triggers(&sj.spec.triggers, &mut errors);
    for (index, t) in sj.spec.triggers.iter().enumerate() {
        if t.metric_type.as_deref().is_some_and(|m| !m.is_empty()) {
            errors.push(ValidationError::ScaledJobMetricType { index });
        }
    }
    // A percentage that is not a number selects the default strategy, as in KEDA; a number
    // must be in range (KEDA multiplies it into an int64 unchecked).
    let percentage = sj
        .spec
        .scaling_strategy
        .as_ref()
        .and_then(|s| s.custom_scaling_running_job_percentage.as_deref());
    if let Some(raw) = percentage
        && let Ok(value) = raw.trim().parse::<f64>()
    {
        let (min, max) = RUNNING_JOB_PERCENTAGE_BOUNDS;
        if !(min..=max).contains(&value) {
            errors.push(ValidationError::OutOfRange {
                field: "spec.scalingStrategy.customScalingRunningJobPercentage",
                value: raw.to_string(),
                bound: format!("between {min} and {max}"),
            });
        }
    }
    into_result(errors)
}

/// Validates a namespaced TriggerAuthentication: the rules of
/// [`validate_trigger_authentication_spec`], and `filePath` is refused (cluster-scoped only).
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_trigger_authentication(ta: &TriggerAuthentication) -> Result<(), ValidationErrors> {
    let mut errors = spec_errors(&ta.spec);
    if ta.spec.file_path.as_deref().is_some_and(|p| !p.is_empty()) {
        errors.push(ValidationError::FilePathNotClusterScoped);
    }
    into_result(errors)
}

/// Validates a ClusterTriggerAuthentication: the rules of
/// [`validate_trigger_authentication_spec`].
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_cluster_trigger_authentication(
    cta: &ClusterTriggerAuthentication,
) -> Result<(), ValidationErrors> {
    validate_trigger_authentication_spec(&cta.spec)
}

/// Rules of KEDA's (Cluster)TriggerAuthentication webhook:
/// - `azure-workload`: `identityId` and `identityTenantId` not empty when set;
///   `identityAuthorityHost` needs `identityTenantId`;
/// - `aws`: `roleArn` not with `identityOwner: workload`; `externalID` needs `roleArn`;
/// - `oauth2`: type `clientCredentials`, `clientId` and `tokenUrl` required, `tokenUrl` an
///   http(s) URL with a host.
///
/// Deliberate difference: KEDA skips the oauth2 checks when `podIdentity` names another provider
/// (an early return); keda-rs always checks oauth2.
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_trigger_authentication_spec(
    spec: &TriggerAuthenticationSpec,
) -> Result<(), ValidationErrors> {
    into_result(spec_errors(spec))
}

fn spec_errors(spec: &TriggerAuthenticationSpec) -> Vec<ValidationError> {
    const P: &str = "spec.";
    let mut errors = Vec::new();
    if let Some(pi) = &spec.pod_identity {
        let set_nonempty = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
        match pi.provider.as_str() {
            POD_IDENTITY_AZURE_WORKLOAD => {
                if pi.identity_id.as_deref() == Some("") {
                    errors.push(ValidationError::EmptyIdentityId { prefix: P });
                }
                if set_nonempty(&pi.identity_authority_host) {
                    if !set_nonempty(&pi.identity_tenant_id) {
                        errors.push(ValidationError::AuthorityHostWithoutTenant { prefix: P });
                    }
                } else if pi.identity_tenant_id.as_deref() == Some("") {
                    errors.push(ValidationError::EmptyIdentityTenantId { prefix: P });
                }
            }
            POD_IDENTITY_AWS => {
                if set_nonempty(&pi.role_arn) && pi.is_workload_identity_owner() {
                    errors.push(ValidationError::RoleArnWithWorkloadOwner { prefix: P });
                }
                if set_nonempty(&pi.external_id) && !set_nonempty(&pi.role_arn) {
                    errors.push(ValidationError::ExternalIdWithoutRoleArn { prefix: P });
                }
            }
            _ => {}
        }
    }
    if let Some(o) = &spec.oauth2 {
        if o.grant_type() != OAUTH2_CLIENT_CREDENTIALS {
            errors.push(ValidationError::OAuth2Type {
                type_: o.grant_type().to_string(),
            });
        }
        if o.client_id.is_empty() {
            errors.push(ValidationError::OAuth2ClientIdMissing);
        }
        if o.token_url.is_empty() {
            errors.push(ValidationError::OAuth2TokenUrlMissing);
        } else if !is_http_url_with_host(&o.token_url) {
            errors.push(ValidationError::OAuth2TokenUrlInvalid {
                url: o.token_url.clone(),
            });
        }
    }
    errors
}

/// `http://host...` or `https://host...` with a non-empty host (case-insensitive scheme).
fn is_http_url_with_host(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    !host.is_empty() && !host.starts_with(':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaled_object::{
        AdvancedConfig, Fallback, HorizontalPodAutoscalerConfig, ScaleTarget, ScaledObjectSpec,
        ScalingModifiers,
    };
    use crate::trigger_authentication::{AuthPodIdentity, OAuth2};

    fn trigger(type_: &str, name: &str) -> ScaleTrigger {
        ScaleTrigger {
            type_: type_.into(),
            name: name.into(),
            ..ScaleTrigger::default()
        }
    }

    fn base_so() -> ScaledObject {
        ScaledObject::new(
            "worker",
            ScaledObjectSpec {
                scale_target_ref: ScaleTarget {
                    name: "worker".into(),
                    ..ScaleTarget::default()
                },
                triggers: vec![trigger("redis", "")],
                ..ScaledObjectSpec::default()
            },
        )
    }

    fn modifiers(so: &mut ScaledObject, m: ScalingModifiers) {
        so.spec.advanced = Some(AdvancedConfig {
            scaling_modifiers: Some(m),
            ..AdvancedConfig::default()
        });
    }

    fn rules(result: Result<(), ValidationErrors>) -> Vec<&'static str> {
        result.err().map_or_else(Vec::new, |e| {
            e.errors().iter().map(ValidationError::rule).collect()
        })
    }

    #[test]
    fn scaled_object_rules() {
        type Case = (&'static str, fn(&mut ScaledObject), &'static [&'static str]);
        let cases: &[Case] = &[
            ("a plain redis ScaledObject is valid", |_| {}, &[]),
            (
                "zero triggers",
                |so| so.spec.triggers.clear(),
                &["no-triggers"],
            ),
            (
                "two triggers named alike",
                |so| so.spec.triggers = vec![trigger("redis", "q"), trigger("kafka", "q")],
                &["duplicate-trigger-name"],
            ),
            (
                "unnamed triggers never collide",
                |so| so.spec.triggers = vec![trigger("redis", ""), trigger("kafka", "")],
                &[],
            ),
            (
                "useCachedMetrics on cron",
                |so| {
                    so.spec.triggers[0] = trigger("cron", "");
                    so.spec.triggers[0].use_cached_metrics = true;
                },
                &["cached-metrics-not-supported"],
            ),
            (
                "useCachedMetrics on redis is fine",
                |so| so.spec.triggers[0].use_cached_metrics = true,
                &[],
            ),
            (
                "min above max",
                |so| {
                    so.spec.min_replica_count = Some(5);
                    so.spec.max_replica_count = Some(3);
                },
                &["min-above-max"],
            ),
            (
                "min above the default max of 100",
                |so| so.spec.min_replica_count = Some(101),
                &["min-above-max"],
            ),
            (
                "idle equal to min",
                |so| {
                    so.spec.min_replica_count = Some(2);
                    so.spec.idle_replica_count = Some(2);
                },
                &["idle-not-below-min"],
            ),
            (
                "idle 0 with min unset: effective min is 0",
                |so| so.spec.idle_replica_count = Some(0),
                &["idle-not-below-min"],
            ),
            (
                "idle 0 with min 0 set: KEDA counts min as 1, accepted",
                |so| {
                    so.spec.min_replica_count = Some(0);
                    so.spec.idle_replica_count = Some(0);
                },
                &[],
            ),
            (
                "only cpu and memory with min unset",
                |so| so.spec.triggers = vec![trigger("cpu", ""), trigger("memory", "")],
                &["scale-to-zero-requirements-not-met"],
            ),
            (
                "only cpu with min 0 on a StatefulSet",
                |so| {
                    so.spec.triggers = vec![trigger("cpu", "")];
                    so.spec.min_replica_count = Some(0);
                    so.spec.scale_target_ref.kind = Some("StatefulSet".to_string());
                },
                &["scale-to-zero-requirements-not-met"],
            ),
            (
                // KEDA's webhook returns before this check for any kind but Deployment and
                // StatefulSet.
                "only cpu with min unset on an Argo Rollout is accepted",
                |so| {
                    so.spec.triggers = vec![trigger("cpu", "")];
                    so.spec.scale_target_ref.api_version = Some("argoproj.io/v1alpha1".to_string());
                    so.spec.scale_target_ref.kind = Some("Rollout".to_string());
                },
                &[],
            ),
            (
                "only memory with min 0 on an extensions/v1beta1 Deployment is accepted",
                |so| {
                    so.spec.triggers = vec![trigger("memory", "")];
                    so.spec.min_replica_count = Some(0);
                    so.spec.scale_target_ref.api_version = Some("extensions/v1beta1".to_string());
                },
                &[],
            ),
            (
                "only cpu with min 1",
                |so| {
                    so.spec.triggers = vec![trigger("cpu", "")];
                    so.spec.min_replica_count = Some(1);
                },
                &[],
            ),
            (
                "negative fallback numbers are both reported",
                |so| {
                    so.spec.fallback = Some(Fallback {
                        failure_threshold: -1,
                        replicas: -2,
                        behavior: None,
                    })
                },
                &["negative-fallback", "negative-fallback"],
            ),
            (
                "fallback with only cpu",
                |so| {
                    so.spec.triggers = vec![trigger("cpu", "")];
                    so.spec.min_replica_count = Some(1);
                    so.spec.fallback = Some(Fallback::default());
                },
                &["fallback-needs-external-trigger"],
            ),
            (
                "fallback behavior scalingModifiers without formula",
                |so| {
                    so.spec.fallback = Some(Fallback {
                        behavior: Some(FallbackBehavior::ScalingModifiers),
                        ..Fallback::default()
                    })
                },
                &["fallback-behavior-needs-formula"],
            ),
            (
                "modifiers without formula",
                |so| {
                    modifiers(
                        so,
                        ScalingModifiers {
                            target: Some("2".into()),
                            ..ScalingModifiers::default()
                        },
                    )
                },
                &["scaling-modifiers-formula-missing"],
            ),
            (
                "formula without target",
                |so| {
                    so.spec.triggers = vec![trigger("redis", "a"), trigger("kafka", "b")];
                    modifiers(
                        so,
                        ScalingModifiers {
                            formula: Some("a + b".into()),
                            ..ScalingModifiers::default()
                        },
                    )
                },
                &["scaling-modifiers-target-missing"],
            ),
            (
                "a formula over a trigger without a name",
                |so| {
                    modifiers(
                        so,
                        ScalingModifiers {
                            formula: Some("a + 1".into()),
                            target: Some("1".into()),
                            ..ScalingModifiers::default()
                        },
                    )
                },
                &["scaling-modifiers-formula-invalid"],
            ),
            (
                "a formula bomb: nested count over array literals",
                |so| {
                    let ones = format!("[{}]", vec!["1"; 100].join(","));
                    modifiers(
                        so,
                        ScalingModifiers {
                            formula: Some(format!(
                                "count({ones}, count({ones}, count({ones}, # > 0) > 0) > 0)"
                            )),
                            target: Some("1".into()),
                            ..ScalingModifiers::default()
                        },
                    )
                },
                &["scaling-modifiers-formula-invalid"],
            ),
            (
                "target zero, activation not a number, metricType Utilization",
                |so| {
                    so.spec.triggers[0].name = "a".into();
                    modifiers(
                        so,
                        ScalingModifiers {
                            formula: Some("a".into()),
                            target: Some("0".into()),
                            activation_target: Some("x".into()),
                            metric_type: Some("Utilization".into()),
                        },
                    )
                },
                &[
                    "scaling-modifiers-target-invalid",
                    "scaling-modifiers-activation-target-invalid",
                    "scaling-modifiers-metric-type-invalid",
                ],
            ),
            (
                "target and activation target too large for a number (1e400 reads as infinity)",
                |so| {
                    so.spec.triggers[0].name = "a".into();
                    modifiers(
                        so,
                        ScalingModifiers {
                            formula: Some("a".into()),
                            target: Some("1e400".into()),
                            activation_target: Some("-1e400".into()),
                            metric_type: None,
                        },
                    )
                },
                &[
                    "scaling-modifiers-target-invalid",
                    "scaling-modifiers-activation-target-invalid",
                ],
            ),
            (
                "complete modifiers with fallback on cpu only are fine",
                |so| {
                    so.spec.triggers = vec![trigger("cpu", "c")];
                    so.spec.min_replica_count = Some(1);
                    so.spec.fallback = Some(Fallback {
                        behavior: Some(FallbackBehavior::ScalingModifiers),
                        ..Fallback::default()
                    });
                    modifiers(
                        so,
                        ScalingModifiers {
                            // A constant: cpu and memory triggers are no formula inputs.
                            formula: Some("2".into()),
                            target: Some("1.5".into()),
                            ..ScalingModifiers::default()
                        },
                    )
                },
                &[],
            ),
            (
                "name of 64 characters: too long, and so is the derived HPA name",
                |so| so.metadata.name = Some("a".repeat(64)),
                &["name-too-long", "hpa-name-too-long"],
            ),
            (
                "name of 60 characters: the derived HPA name has 69",
                |so| so.metadata.name = Some("a".repeat(60)),
                &["hpa-name-too-long"],
            ),
            (
                "long name with a short custom HPA name is fine",
                |so| {
                    so.metadata.name = Some("a".repeat(60));
                    so.spec.advanced = Some(AdvancedConfig {
                        horizontal_pod_autoscaler_config: Some(HorizontalPodAutoscalerConfig {
                            name: Some("short".into()),
                            behavior: None,
                        }),
                        ..AdvancedConfig::default()
                    });
                },
                &[],
            ),
        ];
        for (what, mutate, want) in cases {
            let mut so = base_so();
            mutate(&mut so);
            assert_eq!(
                rules(validate_scaled_object_admission(&so)),
                *want,
                "{what}"
            );
        }
    }

    /// KEDA's reconcile runs only `ValidateTriggers`, `CheckReplicaCountBoundsAreValid` and the
    /// scalingModifiers compile; what its webhook alone refuses, the operator runs (issue 29,
    /// row 3).
    #[test]
    fn the_reconcile_set_holds_only_keda_s_reconcile_rules() {
        type Case = (&'static str, fn(&mut ScaledObject), &'static [&'static str]);
        let admission_only: &[Case] = &[
            (
                "cpu only with min unset on a Deployment",
                |so| so.spec.triggers = vec![trigger("cpu", "")],
                &["scale-to-zero-requirements-not-met"],
            ),
            (
                "fallback on a memory-only object, negative numbers",
                |so| {
                    so.spec.triggers = vec![trigger("memory", "")];
                    so.spec.min_replica_count = Some(1);
                    so.spec.fallback = Some(Fallback {
                        failure_threshold: -1,
                        replicas: 2,
                        behavior: Some(FallbackBehavior::ScalingModifiers),
                    });
                },
                &[
                    "negative-fallback",
                    "fallback-needs-external-trigger",
                    "fallback-behavior-needs-formula",
                ],
            ),
            (
                "a name of 64 characters",
                |so| so.metadata.name = Some("a".repeat(64)),
                &["name-too-long", "hpa-name-too-long"],
            ),
        ];
        for (what, mutate, want) in admission_only {
            let mut so = base_so();
            mutate(&mut so);
            assert_eq!(
                rules(validate_scaled_object_admission(&so)),
                *want,
                "{what}"
            );
            assert_eq!(
                validate_scaled_object_reconcile(&so),
                Ok(()),
                "{what}: admission only"
            );
        }
        // Reconcile rules stay refused at reconcile, and the admission-only rule beside them
        // is left out.
        let mut so = base_so();
        so.metadata.name = Some("a".repeat(60));
        so.spec.min_replica_count = Some(5);
        so.spec.max_replica_count = Some(2);
        so.spec.triggers = vec![trigger("redis", "q"), trigger("redis", "q")];
        modifiers(
            &mut so,
            ScalingModifiers {
                formula: Some("q +".into()),
                target: Some("1".into()),
                ..ScalingModifiers::default()
            },
        );
        assert_eq!(
            rules(validate_scaled_object_reconcile(&so)),
            [
                "duplicate-trigger-name",
                "min-above-max",
                "scaling-modifiers-formula-invalid"
            ]
        );
        assert_eq!(
            rules(validate_scaled_object_admission(&so)),
            [
                "duplicate-trigger-name",
                "min-above-max",
                "scaling-modifiers-formula-invalid",
                "hpa-name-too-long"
            ]
        );
    }
    #[test]
    fn messages_name_the_field_and_the_rule() {
        let mut so = base_so();
        so.spec.min_replica_count = Some(2);
        so.spec.idle_replica_count = Some(3);
        so.spec.triggers = vec![trigger("redis", "queue"), trigger("redis", "queue")];
        let err = validate_scaled_object_admission(&so).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.triggers[1].name: \"queue\" is defined multiple times, trigger names must be unique; \
             spec.idleReplicaCount (3) must be less than spec.minReplicaCount (2)"
        );
    }

    #[test]
    fn scaled_job_rules() {
        let mut sj = ScaledJob::new("job", Default::default());
        assert_eq!(
            rules(validate_scaled_job(&sj)),
            ["no-triggers"],
            "no trigger"
        );
        sj.spec.triggers = vec![trigger("redis", "a"), trigger("memory", "a")];
        sj.spec.triggers[1].use_cached_metrics = true;
        sj.spec.triggers[0].metric_type = Some("Value".into());
        assert_eq!(
            rules(validate_scaled_job(&sj)),
            [
                "duplicate-trigger-name",
                "cached-metrics-not-supported",
                "scaledjob-metric-type"
            ]
        );
    }

    #[test]
    fn a_running_job_percentage_out_of_range_names_the_field_and_the_bound() {
        let mut sj = ScaledJob::new("job", Default::default());
        sj.spec.triggers = vec![trigger("redis", "a")];
        let with = |sj: &mut ScaledJob, percentage: &str| {
            sj.spec.scaling_strategy = Some(crate::scaled_job::ScalingStrategy {
                strategy: Some("custom".into()),
                custom_scaling_running_job_percentage: Some(percentage.into()),
                ..Default::default()
            });
        };
        // In range, and (as in KEDA) not a number at all: accepted.
        for ok in ["0", "0.5", "100", "half"] {
            with(&mut sj, ok);
            assert_eq!(validate_scaled_job(&sj), Ok(()), "{ok}");
        }
        for bad in ["1e300", "-0.5", "100.5", "NaN", "inf"] {
            with(&mut sj, bad);
            let err = validate_scaled_job(&sj).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "spec.scalingStrategy.customScalingRunningJobPercentage ({bad}) must be between 0 and 100"
                )
            );
            assert_eq!(rules(Err(err)), ["out-of-range"]);
        }
    }

    #[test]
    fn trigger_authentication_rules() {
        type Case = (
            &'static str,
            fn(&mut TriggerAuthenticationSpec),
            &'static [&'static str],
        );
        fn identity(provider: &str) -> AuthPodIdentity {
            AuthPodIdentity {
                provider: provider.into(),
                ..AuthPodIdentity::default()
            }
        }
        fn oauth2() -> OAuth2 {
            OAuth2 {
                type_: Some("clientCredentials".into()),
                client_id: "id".into(),
                token_url: "https://auth.example.com/token".into(),
                ..OAuth2::default()
            }
        }
        let cases: &[Case] = &[
            ("empty spec is valid", |_| {}, &[]),
            (
                "provider none is valid",
                |s| s.pod_identity = Some(identity("none")),
                &[],
            ),
            (
                "azure identityId set but empty",
                |s| {
                    let mut p = identity("azure-workload");
                    p.identity_id = Some(String::new());
                    s.pod_identity = Some(p);
                },
                &["empty-identity-id"],
            ),
            (
                "azure identityTenantId set but empty",
                |s| {
                    let mut p = identity("azure-workload");
                    p.identity_tenant_id = Some(String::new());
                    s.pod_identity = Some(p);
                },
                &["empty-identity-tenant-id"],
            ),
            (
                "azure authority host without tenant",
                |s| {
                    let mut p = identity("azure-workload");
                    p.identity_authority_host = Some("https://login".into());
                    s.pod_identity = Some(p);
                },
                &["authority-host-without-tenant"],
            ),
            (
                "aws roleArn with workload owner",
                |s| {
                    let mut p = identity("aws");
                    p.role_arn = Some("arn:aws:iam::1:role/r".into());
                    p.identity_owner = Some("workload".into());
                    s.pod_identity = Some(p);
                },
                &["role-arn-with-workload-owner"],
            ),
            (
                "aws externalID without roleArn",
                |s| {
                    let mut p = identity("aws");
                    p.external_id = Some("x".into());
                    s.pod_identity = Some(p);
                },
                &["external-id-without-role-arn"],
            ),
            (
                "complete oauth2 is valid",
                |s| s.oauth2 = Some(oauth2()),
                &[],
            ),
            (
                "oauth2 without type is clientCredentials, KEDA's default",
                |s| {
                    let mut o = oauth2();
                    o.type_ = None;
                    s.oauth2 = Some(o);
                },
                &[],
            ),
            (
                "oauth2 wrong type, no client id, ftp token url",
                |s| {
                    let mut o = oauth2();
                    o.type_ = Some("password".into());
                    o.client_id.clear();
                    o.token_url = "ftp://auth.example.com/token".into();
                    s.oauth2 = Some(o);
                },
                &[
                    "oauth2-type",
                    "oauth2-client-id-missing",
                    "oauth2-token-url-invalid",
                ],
            ),
            (
                "oauth2 without token url",
                |s| {
                    let mut o = oauth2();
                    o.token_url.clear();
                    s.oauth2 = Some(o);
                },
                &["oauth2-token-url-missing"],
            ),
            (
                "oauth2 token url without host",
                |s| {
                    let mut o = oauth2();
                    o.token_url = "https:///token".into();
                    s.oauth2 = Some(o);
                },
                &["oauth2-token-url-invalid"],
            ),
        ];
        for (what, mutate, want) in cases {
            let mut spec = TriggerAuthenticationSpec::default();
            mutate(&mut spec);
            assert_eq!(
                rules(validate_trigger_authentication_spec(&spec)),
                *want,
                "{what}"
            );
        }
    }

    #[test]
    fn file_path_is_refused_on_namespaced_trigger_authentication_only() {
        let spec = TriggerAuthenticationSpec {
            file_path: Some("creds.json".to_string()),
            ..TriggerAuthenticationSpec::default()
        };
        let ta = TriggerAuthentication::new("a", spec.clone());
        assert_eq!(
            rules(validate_trigger_authentication(&ta)),
            ["file-path-not-cluster-scoped"]
        );
        let cta = ClusterTriggerAuthentication::new("a", spec.into());
        assert_eq!(
            rules(validate_cluster_trigger_authentication(&cta)),
            Vec::<&str>::new()
        );
    }
}
