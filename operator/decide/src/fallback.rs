//! KEDA's `spec.fallback`: what a metric is worth while its source keeps failing.
//!
//! Reproduces `pkg/fallback/fallback.go` (`GetMetricsWithFallback`, `doFallback`,
//! `HasValidFallback`, `fallbackExceededThreshold`):
//!
//! * Every metric of a ScaledObject with a valid fallback has a health record
//!   (`status.health[metricName]`): a successful read resets it to `Happy` with 0 failures, a
//!   failed read adds one failure and marks it `Failing`. Objects without a (valid) fallback
//!   keep no health at all.
//! * Once `numberOfFailures > failureThreshold` (strictly), the failed read is replaced by a
//!   synthetic value chosen so that the HPA computes exactly the fallback replica count:
//!   `target x replicas` for `AverageValue`, and `target x replicas / readyPods` for `Value`
//!   (the HPA multiplies a `Value` ratio by the current pods; no ready pod is an error). The
//!   replica count comes from `fallback.behavior`: `static` (`fallback.replicas`),
//!   `currentReplicas`, `currentReplicasIfHigher` (the larger of the two) and
//!   `currentReplicasIfLower` (the smaller).
//! * Behavior `scalingModifiers` does not invent a value: the failing trigger is fed to the
//!   formula as `nil`, so the formula decides with `??` (see [`crate::formula`]).
//!
//! The same [`evaluate`] call serves the scale loop (activity) and the metric service (values),
//! so both see one health record and one answer. A metric served from fallback counts as active
//! ([`MetricOutcome::is_active`]), whatever its value: KEDA treats an object whose metric is in
//! fallback as active (KEDA-CONTRACT 1.7), so even `replicas: 0` keeps the target at
//! `max(minReplicaCount, 1)` (the HPA never goes below 1) instead of scaling it to zero.
//!
//! One deliberate difference: KEDA's `HasValidFallback` parses `scalingModifiers.target` as an
//! integer, silently disabling fallback for a target such as `"0.5"`, while `doFallback` itself
//! reads the target as a float. keda-rs accepts any target that is a float `> 0`.

/// Condition reason when at least one metric is served from fallback.
pub const REASON_FALLBACK_EXISTS: &str = "FallbackExists";
/// Condition reason when no metric is served from fallback.
pub const REASON_NO_FALLBACK_FOUND: &str = "NoFallbackFound";

/// `spec.fallback.behavior`, the API type itself: one enum, parsed once when the object is read.
pub use keda_api::FallbackBehavior;

/// Whether computing the fallback for `behavior` needs the target's current replica count.
fn needs_current_replicas(behavior: FallbackBehavior) -> bool {
    matches!(
        behavior,
        FallbackBehavior::CurrentReplicas
            | FallbackBehavior::CurrentReplicasIfHigher
            | FallbackBehavior::CurrentReplicasIfLower
    )
}

/// The object's `spec.fallback`, as the controller read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FallbackSpec {
    /// `fallback.failureThreshold`: failures tolerated before the fallback applies.
    pub failure_threshold: i32,
    /// `fallback.replicas`.
    pub replicas: i32,
    /// `fallback.behavior`.
    pub behavior: FallbackBehavior,
}

impl FallbackSpec {
    /// KEDA's `HasValidFallback`: both numbers non-negative and, when the object uses
    /// `scalingModifiers`, a target that is a number `> 0` (see the module docs for the one
    /// difference). An invalid fallback behaves as no fallback.
    pub fn is_valid(&self, modifiers_target: Option<f64>) -> bool {
        self.failure_threshold >= 0
            && self.replicas >= 0
            && modifiers_target.is_none_or(|target| target > 0.0)
    }

    /// Whether a metric with this health is past the threshold (strict `>`, as KEDA).
    pub fn exceeded_by(&self, health: &MetricHealth) -> bool {
        health.status == HealthStatus::Failing && health.number_of_failures > self.failure_threshold
    }

    /// The replica count the fallback asks for, given the target's current count.
    ///
    /// Returns `None` for [`FallbackBehavior::ScalingModifiers`], which asks for no count.
    pub fn replicas_for(&self, current_replicas: i32) -> Option<i32> {
        match self.behavior {
            FallbackBehavior::Static => Some(self.replicas),
            FallbackBehavior::CurrentReplicas => Some(current_replicas),
            FallbackBehavior::CurrentReplicasIfHigher => Some(current_replicas.max(self.replicas)),
            FallbackBehavior::CurrentReplicasIfLower => Some(current_replicas.min(self.replicas)),
            FallbackBehavior::ScalingModifiers => None,
        }
    }
}

/// `status.health[metric].status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HealthStatus {
    /// The last read succeeded.
    Happy,
    /// The last read failed.
    Failing,
}

impl HealthStatus {
    /// The spelling KEDA writes into the status.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Happy => "Happy",
            HealthStatus::Failing => "Failing",
        }
    }
}

/// `status.health[metric]`: consecutive failures of one metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricHealth {
    /// Consecutive failed reads; 0 after a success.
    pub number_of_failures: i32,
    /// Whether the last read failed.
    pub status: HealthStatus,
}

impl MetricHealth {
    /// The record after a successful read.
    pub const HAPPY: MetricHealth = MetricHealth {
        number_of_failures: 0,
        status: HealthStatus::Happy,
    };

    /// The record after one more failed read (a missing record counts from zero).
    pub fn after_failure(previous: Option<MetricHealth>) -> MetricHealth {
        let failures = previous.map_or(0, |h| h.number_of_failures);
        MetricHealth {
            number_of_failures: failures.saturating_add(1),
            status: HealthStatus::Failing,
        }
    }
}

/// How the HPA reads a metric (`metricType`, or `scalingModifiers.metricType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MetricTargetType {
    /// `AverageValue` (the default): desired = ceil(value / target).
    #[default]
    AverageValue,
    /// `Value`: desired = ceil(currentPods x value / target).
    Value,
}

/// Everything [`evaluate`] needs besides the read itself.
///
/// When the object uses `scalingModifiers`, `target` is the composite target
/// (`scalingModifiers.target` and `.metricType`), as in KEDA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FallbackContext {
    /// `spec.fallback`, or `None` when the object has none.
    pub spec: Option<FallbackSpec>,
    /// The composite target when the object uses `scalingModifiers` (used for validity).
    pub modifiers_target: Option<f64>,
    /// The metric's target type.
    pub target_type: MetricTargetType,
    /// The metric's target value (per pod for `AverageValue`).
    pub target: f64,
    /// The target's current replica count, or `None` if reading it failed. Only read for the
    /// `currentReplicas*` behaviors.
    pub current_replicas: Option<i32>,
    /// Ready pods of the target, or `None` if counting them failed. Only read for `Value`.
    pub ready_replicas: Option<i32>,
}

/// The synthetic value could not be computed, although the fallback applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FallbackError {
    /// A `Value` metric is divided by the ready pods, and there are none.
    #[error("fallback for a metric of type Value needs at least one ready pod, and there is none")]
    NoReadyPods,
    /// A `Value` metric needs the ready pod count, and counting failed.
    #[error("fallback for a metric of type Value needs the ready pod count, which is unknown")]
    ReadyPodsUnknown,
}

/// What one metric read yields once fallback is applied. `E` is the scaler's own error.
#[derive(Clone, Debug, PartialEq)]
pub enum MetricOutcome<E> {
    /// The source answered: serve its value, use its activity.
    Value(f64),
    /// The source failed past the threshold: serve this synthetic value.
    Fallback(f64),
    /// Behavior `scalingModifiers` past the threshold: the formula sees `nil` for this trigger.
    Nil,
    /// The scaler's error stands (no valid fallback, or the threshold is not reached yet, or
    /// the current replica count could not be read).
    Failed(E),
    /// The fallback applies but its value could not be computed.
    FallbackFailed(FallbackError),
}

impl<E> MetricOutcome<E> {
    /// Whether this outcome makes the object active, given the scaler's own activity for a
    /// successful read: a fallback value always does (KEDA), even `replicas: 0`.
    pub fn is_active(&self, scaler_active: bool) -> bool {
        match self {
            MetricOutcome::Value(_) => scaler_active,
            MetricOutcome::Fallback(_) => true,
            MetricOutcome::Nil | MetricOutcome::Failed(_) | MetricOutcome::FallbackFailed(_) => {
                false
            }
        }
    }

    /// Whether this outcome is an error the object must report (`Failed`, `FallbackFailed`).
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            MetricOutcome::Failed(_) | MetricOutcome::FallbackFailed(_)
        )
    }
}

/// The result of [`evaluate`]: the outcome and the health record to store.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluated<E> {
    /// What to serve for the metric.
    pub outcome: MetricOutcome<E>,
    /// The new `status.health[metric]`; `None` means keep no record (no valid fallback).
    pub health: Option<MetricHealth>,
}

/// Applies KEDA's fallback to one metric read.
///
/// `previous` is the metric's stored health; `read` is what the scaler returned.
pub fn evaluate<E>(
    ctx: &FallbackContext,
    previous: Option<MetricHealth>,
    read: Result<f64, E>,
) -> Evaluated<E> {
    let spec = match ctx.spec {
        Some(spec) if spec.is_valid(ctx.modifiers_target) => spec,
        // No fallback, or an invalid one: the read passes through and no health is tracked.
        _ => {
            return Evaluated {
                outcome: match read {
                    Ok(v) => MetricOutcome::Value(v),
                    Err(e) => MetricOutcome::Failed(e),
                },
                health: None,
            };
        }
    };
    let error = match read {
        Ok(v) => {
            return Evaluated {
                outcome: MetricOutcome::Value(v),
                health: Some(MetricHealth::HAPPY),
            };
        }
        Err(e) => e,
    };
    let health = MetricHealth::after_failure(previous);
    let outcome = if !spec.exceeded_by(&health) {
        MetricOutcome::Failed(error)
    } else if spec.behavior == FallbackBehavior::ScalingModifiers {
        MetricOutcome::Nil
    } else {
        // Static needs no replica count; KEDA reads it only for the other behaviors and lets
        // the scaler's error stand when that read fails.
        let current = if needs_current_replicas(spec.behavior) {
            ctx.current_replicas
        } else {
            Some(0)
        };
        match current.and_then(|c| spec.replicas_for(c)) {
            None => MetricOutcome::Failed(error),
            Some(replicas) => match synthetic_value(ctx, replicas) {
                Ok(v) => MetricOutcome::Fallback(v),
                Err(e) => MetricOutcome::FallbackFailed(e),
            },
        }
    };
    Evaluated {
        outcome,
        health: Some(health),
    }
}

/// The value that makes the HPA ask for exactly `replicas`, truncated to milli-units as KEDA's
/// `resource.NewMilliQuantity(int64(target*1000*replicas))` does.
///
/// # Errors
/// For a `Value` metric, when the ready pod count is zero or unknown.
pub fn synthetic_value(ctx: &FallbackContext, replicas: i32) -> Result<f64, FallbackError> {
    let mut replicas = f64::from(replicas);
    if ctx.target_type == MetricTargetType::Value {
        match ctx.ready_replicas {
            None => return Err(FallbackError::ReadyPodsUnknown),
            Some(ready) if ready <= 0 => return Err(FallbackError::NoReadyPods),
            Some(ready) => replicas /= f64::from(ready),
        }
    }
    Ok((ctx.target * 1000.0 * replicas).trunc() / 1000.0)
}

/// Whether the object's Fallback condition is True: some metric is failing past the threshold
/// (KEDA's `fallbackExceededThreshold`).
pub fn any_exceeded<'a>(
    spec: &FallbackSpec,
    healths: impl IntoIterator<Item = &'a MetricHealth>,
) -> bool {
    healths.into_iter().any(|h| spec.exceeded_by(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(threshold: i32, replicas: i32, behavior: FallbackBehavior) -> FallbackSpec {
        FallbackSpec {
            failure_threshold: threshold,
            replicas,
            behavior,
        }
    }

    fn ctx(spec: Option<FallbackSpec>) -> FallbackContext {
        FallbackContext {
            spec,
            modifiers_target: None,
            target_type: MetricTargetType::AverageValue,
            target: 10.0,
            current_replicas: Some(4),
            ready_replicas: Some(2),
        }
    }

    fn failing(n: i32) -> Option<MetricHealth> {
        Some(MetricHealth {
            number_of_failures: n,
            status: HealthStatus::Failing,
        })
    }

    fn happy(n: i32) -> Option<MetricHealth> {
        Some(MetricHealth {
            number_of_failures: n,
            status: HealthStatus::Happy,
        })
    }

    const BOOM: &str = "Some error";

    struct Case {
        why: &'static str,
        ctx: FallbackContext,
        previous: Option<MetricHealth>,
        read: Result<f64, &'static str>,
        outcome: MetricOutcome<&'static str>,
        health: Option<MetricHealth>,
    }

    #[test]
    fn fallback_follows_keda_cases() {
        let static10 = Some(spec(3, 10, FallbackBehavior::Static));
        let cases = [
            // KEDA "should return the expected metric when fallback is disabled".
            Case {
                why: "without fallback a value passes and no health is kept",
                ctx: ctx(None),
                previous: None,
                read: Ok(5.0),
                outcome: MetricOutcome::Value(5.0),
                health: None,
            },
            // KEDA "should reset the health status when scaler metrics are available".
            Case {
                why: "a success resets five failures to Happy/0",
                ctx: ctx(static10),
                previous: failing(5),
                read: Ok(6.0),
                outcome: MetricOutcome::Value(6.0),
                health: happy(0),
            },
            // KEDA "should propagate the error when fallback is disabled".
            Case {
                why: "without fallback the error stands and no health is kept",
                ctx: ctx(None),
                previous: None,
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: None,
            },
            // KEDA "should bump the number of failures when metrics call fails".
            Case {
                why: "the first failure counts 1 and the error stands",
                ctx: ctx(static10),
                previous: happy(0),
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: failing(1),
            },
            // A missing health record counts from zero like KEDA's nil NumberOfFailures.
            Case {
                why: "a missing record counts the first failure as 1",
                ctx: ctx(static10),
                previous: None,
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: failing(1),
            },
            // Threshold 3: the third failure is not enough (strict >).
            Case {
                why: "failures equal to the threshold keep the error",
                ctx: ctx(static10),
                previous: failing(2),
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: failing(3),
            },
            // KEDA "should return a normalised metric when number of failures are beyond
            // threshold": target 10 x 10 replicas = 100.
            Case {
                why: "the fourth failure serves target x replicas",
                ctx: ctx(static10),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(100.0),
                health: failing(4),
            },
            // KEDA "should return error when fallback is enabled but scaledobject has invalid
            // parameter": a negative threshold disables fallback entirely.
            Case {
                why: "a negative threshold behaves as no fallback",
                ctx: ctx(Some(spec(-3, 10, FallbackBehavior::Static))),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: None,
            },
            // Negative replicas are invalid too.
            Case {
                why: "negative replicas behave as no fallback",
                ctx: ctx(Some(spec(3, -1, FallbackBehavior::Static))),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: None,
            },
            // Threshold 0: the very first failure applies the fallback.
            Case {
                why: "threshold zero falls back on the first failure",
                ctx: ctx(Some(spec(0, 2, FallbackBehavior::Static))),
                previous: None,
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(20.0),
                health: failing(1),
            },
            // currentReplicas: 4 current replicas x target 10.
            Case {
                why: "currentReplicas serves the current count",
                ctx: ctx(Some(spec(3, 10, FallbackBehavior::CurrentReplicas))),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(40.0),
                health: failing(4),
            },
            // currentReplicasIfHigher: max(4, 10) = 10.
            Case {
                why: "currentReplicasIfHigher keeps fallback.replicas when it is higher",
                ctx: ctx(Some(spec(3, 10, FallbackBehavior::CurrentReplicasIfHigher))),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(100.0),
                health: failing(4),
            },
            // currentReplicasIfHigher: max(4, 2) = 4.
            Case {
                why: "currentReplicasIfHigher keeps the current count when it is higher",
                ctx: ctx(Some(spec(3, 2, FallbackBehavior::CurrentReplicasIfHigher))),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(40.0),
                health: failing(4),
            },
            // currentReplicasIfLower: min(4, 10) = 4.
            Case {
                why: "currentReplicasIfLower keeps the current count when it is lower",
                ctx: ctx(Some(spec(3, 10, FallbackBehavior::CurrentReplicasIfLower))),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(40.0),
                health: failing(4),
            },
            // currentReplicasIfLower: min(4, 2) = 2.
            Case {
                why: "currentReplicasIfLower keeps fallback.replicas when it is lower",
                ctx: ctx(Some(spec(3, 2, FallbackBehavior::CurrentReplicasIfLower))),
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(20.0),
                health: failing(4),
            },
            // KEDA returns the scaler's error when the current replica count cannot be read.
            Case {
                why: "an unreadable replica count lets the error stand",
                ctx: FallbackContext {
                    current_replicas: None,
                    ..ctx(Some(spec(3, 10, FallbackBehavior::CurrentReplicas)))
                },
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: failing(4),
            },
            // Static never needs the replica count, so an unreadable one does not matter.
            Case {
                why: "static ignores an unreadable replica count",
                ctx: FallbackContext {
                    current_replicas: None,
                    ..ctx(static10)
                },
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(100.0),
                health: failing(4),
            },
            // scalingModifiers: KEDA's placeholder is read as nil by the formula.
            Case {
                why: "scalingModifiers behavior feeds nil past the threshold",
                ctx: FallbackContext {
                    modifiers_target: Some(2.0),
                    ..ctx(Some(spec(3, 5, FallbackBehavior::ScalingModifiers)))
                },
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Nil,
                health: failing(4),
            },
            // A composite target of zero makes the fallback invalid (KEDA HasValidFallback).
            Case {
                why: "a non-positive composite target disables fallback",
                ctx: FallbackContext {
                    modifiers_target: Some(0.0),
                    ..ctx(static10)
                },
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Failed(BOOM),
                health: None,
            },
            // Value metric: 10 replicas / 2 ready pods x target 10 = 50.
            Case {
                why: "a Value metric is divided by the ready pods",
                ctx: FallbackContext {
                    target_type: MetricTargetType::Value,
                    ..ctx(static10)
                },
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::Fallback(50.0),
                health: failing(4),
            },
            // Value metric with no ready pod: KEDA fails with "error performing fallback".
            Case {
                why: "a Value metric with no ready pod is an error",
                ctx: FallbackContext {
                    target_type: MetricTargetType::Value,
                    ready_replicas: Some(0),
                    ..ctx(static10)
                },
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::FallbackFailed(FallbackError::NoReadyPods),
                health: failing(4),
            },
            // Value metric whose ready pods could not be counted.
            Case {
                why: "a Value metric with an unknown ready count is an error",
                ctx: FallbackContext {
                    target_type: MetricTargetType::Value,
                    ready_replicas: None,
                    ..ctx(static10)
                },
                previous: failing(3),
                read: Err(BOOM),
                outcome: MetricOutcome::FallbackFailed(FallbackError::ReadyPodsUnknown),
                health: failing(4),
            },
        ];
        for case in cases {
            let got = evaluate(&case.ctx, case.previous, case.read);
            assert_eq!(got.outcome, case.outcome, "{}", case.why);
            assert_eq!(got.health, case.health, "{}", case.why);
        }
    }

    #[test]
    fn synthetic_value_is_truncated_to_milli_units() {
        // target 0.3333 x 3 replicas / 2 ready pods = 0.49995, truncated to 0.499.
        let c = FallbackContext {
            target: 0.3333,
            target_type: MetricTargetType::Value,
            ready_replicas: Some(2),
            ..ctx(None)
        };
        assert_eq!(synthetic_value(&c, 3), Ok(0.499));
    }

    #[test]
    fn a_fallback_value_counts_as_active_even_for_zero_replicas() {
        // KEDA: an object with a metric in fallback is active, so `replicas: 0` keeps 1 replica.
        let zero: MetricOutcome<()> = MetricOutcome::Fallback(0.0);
        let some: MetricOutcome<()> = MetricOutcome::Fallback(20.0);
        let failed: MetricOutcome<()> = MetricOutcome::Failed(());
        assert!(zero.is_active(false));
        assert!(some.is_active(false));
        assert!(!failed.is_active(true));
        assert!(failed.is_error());
        assert!(MetricOutcome::<()>::Value(1.0).is_active(true));
        assert!(!MetricOutcome::<()>::Nil.is_error());
    }

    #[test]
    fn fallback_condition_is_true_when_any_metric_is_past_the_threshold() {
        // KEDA "should set the fallback condition when a fallback exists in the scaled object".
        let s = spec(3, 10, FallbackBehavior::Static);
        let healths = [failing(6).into_iter().next(), happy(3).into_iter().next()];
        assert!(any_exceeded(&s, healths.iter().flatten()));
        let healths = [MetricHealth::HAPPY, MetricHealth::after_failure(failing(2))];
        assert!(!any_exceeded(&s, &healths));
    }
}
