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
//!
//! Files, by object kind: `scaled_object.rs`, `scaled_job.rs`, `trigger_authentication.rs`; this
//! file holds the errors and the trigger rules both scalable kinds share, `tests.rs` the tests.

use std::collections::BTreeMap;
use std::fmt;

use crate::formula::FormulaError;
use crate::trigger::ScaleTrigger;

mod scaled_job;
mod scaled_object;
mod trigger_authentication;

pub use scaled_job::validate_scaled_job;
pub use scaled_object::{validate_scaled_object_admission, validate_scaled_object_reconcile};
pub use trigger_authentication::{
    validate_cluster_trigger_authentication, validate_trigger_authentication,
    validate_trigger_authentication_spec,
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

#[cfg(test)]
mod tests;
