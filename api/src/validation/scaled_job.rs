//! The ScaledJob rules, the same for the operator and the webhook.

use crate::scaled_job::{RUNNING_JOB_PERCENTAGE_BOUNDS, ScaledJob};

use super::{ValidationError, ValidationErrors, check_triggers, into_result};

/// Validates a ScaledJob: the trigger rules of [`validate_scaled_object_admission`] (at least
/// one, unique names, no `useCachedMetrics` on cpu/memory/cron), plus no `metricType` on its
/// triggers (KEDA rejects that in the reconciler rather than the webhook). Every rule is a
/// [`super::Stage::Reconcile`] rule (KEDA's ScaledJob reconciler runs `ValidateTriggers`; the running
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
