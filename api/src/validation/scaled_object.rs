//! The ScaledObject rules: what the admission webhook refuses and the subset the operator's
//! reconcile refuses.

use kube::ResourceExt;

use crate::formula::validate_formula;
use crate::scaled_object::{FallbackBehavior, ScaledObject, default_hpa_name};

use super::{
    MAX_NAME_LENGTH, Stage, ValidationError, ValidationErrors, check_triggers, into_result,
    is_resource_trigger,
};

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
