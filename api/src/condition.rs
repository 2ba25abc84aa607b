//! Status conditions shared by ScaledObject and ScaledJob (`status.conditions[]`), with KEDA's
//! condition types and reasons as constants.
//!
//! KEDA keeps its own condition shape (type, status, reason, message), not `metav1.Condition`:
//! there is no `lastTransitionTime` and no `observedGeneration`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition type `Ready`: the object is defined correctly and its scalers work.
pub const CONDITION_READY: &str = "Ready";
/// Condition type `Active`: at least one trigger is active.
pub const CONDITION_ACTIVE: &str = "Active";
/// Condition type `Fallback`: fallback replicas are in use for at least one metric.
pub const CONDITION_FALLBACK: &str = "Fallback";
/// Condition type `Paused`: a pause annotation is in effect.
pub const CONDITION_PAUSED: &str = "Paused";
/// Condition type `HPAActive` (ScaledObject only, added lazily): mirrors the HPA's `ScalingActive`.
pub const CONDITION_HPA_ACTIVE: &str = "HPAActive";

/// Condition status `True`.
pub const STATUS_TRUE: &str = "True";
/// Condition status `False`.
pub const STATUS_FALSE: &str = "False";
/// Condition status `Unknown`.
pub const STATUS_UNKNOWN: &str = "Unknown";

/// Condition reasons, exactly as KEDA writes them.
pub mod reason {
    /// Ready=True on a ScaledObject.
    pub const SCALED_OBJECT_READY: &str = "ScaledObjectReady";
    /// Ready=False on a ScaledObject: the reconcile failed.
    pub const SCALED_OBJECT_CHECK_FAILED: &str = "ScaledObjectCheckFailed";
    /// Ready=True on a ScaledJob.
    pub const SCALED_JOB_READY: &str = "ScaledJobReady";
    /// Ready=False on a ScaledJob: the reconcile failed.
    pub const SCALED_JOB_CHECK_FAILED: &str = "ScaledJobCheckFailed";
    /// Ready=False: inactive, a scaler failed and no fallback applies.
    pub const TRIGGER_ERROR: &str = "TriggerError";
    /// Ready=Unknown: active, but some trigger failed.
    pub const PARTIAL_TRIGGER_ERROR: &str = "PartialTriggerError";
    /// Ready=False: the current replica count of the target could not be read.
    pub const ERROR_GETTING_CURRENT_REPLICAS: &str = "ErrorGettingCurrentReplicas";
    /// Ready=False: keda-rs caught a panic while reconciling or polling the object (not in
    /// KEDA, whose operator exits on a panic; the message names the object and trigger).
    pub const INTERNAL_ERROR: &str = "InternalError";
    /// Active=True.
    pub const SCALER_ACTIVE: &str = "ScalerActive";
    /// Active=False.
    pub const SCALER_NOT_ACTIVE: &str = "ScalerNotActive";
    /// Active=False: inactive, but the cooldown period has not elapsed yet.
    pub const SCALER_COOLDOWN: &str = "ScalerCooldown";
    /// Active=Unknown.
    pub const UNKNOWN_STATE: &str = "UnknownState";
    /// Fallback=True.
    pub const FALLBACK_EXISTS: &str = "FallbackExists";
    /// Fallback=False.
    pub const NO_FALLBACK_FOUND: &str = "NoFallbackFound";
    /// Paused=True on a ScaledObject.
    pub const SCALED_OBJECT_PAUSED: &str = "ScaledObjectPaused";
    /// Paused=False on a ScaledObject.
    pub const SCALED_OBJECT_UNPAUSED: &str = "ScaledObjectUnpaused";
    /// Paused=True on a ScaledJob.
    pub const SCALED_JOB_PAUSED: &str = "ScaledJobPaused";
    /// Paused=False on a ScaledJob.
    pub const SCALED_JOB_UNPAUSED: &str = "ScaledJobUnpaused";
    /// HPAActive=True.
    pub const HPA_ACTIVE: &str = "HPAActive";
    /// HPAActive=True while the HPA disabled itself because the target has 0 replicas.
    pub const SCALING_DISABLED: &str = "ScalingDisabled";
    /// HPAActive=False when the HPA reports no usable metrics.
    pub const HPA_METRICS_UNAVAILABLE: &str = "HPAMetricsUnavailable";
}

/// Condition messages KEDA uses verbatim.
pub mod message {
    /// Message of Ready=True on a ScaledObject.
    pub const SCALED_OBJECT_READY: &str =
        "ScaledObject is defined correctly and is ready for scaling";
    /// Message of Paused=True on a ScaledObject.
    pub const SCALED_OBJECT_PAUSED: &str = "ScaledObject is paused";
    /// Message of Paused=False on a ScaledObject once its pause annotations are removed.
    pub const SCALED_OBJECT_UNPAUSED: &str = "pause annotation removed for ScaledObject";
    /// Message of Active=Unknown on a ScaledObject whose reconcile failed.
    pub const SCALED_OBJECT_CHECK_FAILED: &str = "ScaledObject check failed";
    /// Message of Paused=True on a ScaledJob.
    pub const SCALED_JOB_PAUSED: &str = "ScaledJob is paused";
    /// Message of Paused=False on a ScaledJob.
    pub const SCALED_JOB_UNPAUSED: &str = "ScaledJob is unpaused";
}

/// One entry of `status.conditions`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Condition {
    /// Condition type, e.g. [`CONDITION_READY`].
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// One-word CamelCase reason for the last transition (see [`reason`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details about the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Condition {
    /// A condition with the given type and status and no reason or message.
    pub fn new(type_: &str, status: &str) -> Self {
        Self {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: None,
            message: None,
        }
    }

    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == STATUS_TRUE
    }

    /// Whether the status is `False`.
    pub fn is_false(&self) -> bool {
        self.status == STATUS_FALSE
    }

    /// Whether the status is `Unknown` (or anything else KEDA would not recognise).
    pub fn is_unknown(&self) -> bool {
        !self.is_true() && !self.is_false()
    }
}

/// The conditions a new object starts with, as KEDA's reconciler initialises them:
/// Ready, Active and Fallback `Unknown`, Paused `False`.
pub fn initial_conditions() -> Vec<Condition> {
    vec![
        Condition::new(CONDITION_READY, STATUS_UNKNOWN),
        Condition::new(CONDITION_ACTIVE, STATUS_UNKNOWN),
        Condition::new(CONDITION_FALLBACK, STATUS_UNKNOWN),
        Condition::new(CONDITION_PAUSED, STATUS_FALSE),
    ]
}

/// The condition of the given type in a list, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_conditions_match_keda_initialisation() {
        let c = initial_conditions();
        assert!(find_condition(&c, CONDITION_READY).unwrap().is_unknown());
        assert!(find_condition(&c, CONDITION_ACTIVE).unwrap().is_unknown());
        assert!(find_condition(&c, CONDITION_FALLBACK).unwrap().is_unknown());
        assert!(find_condition(&c, CONDITION_PAUSED).unwrap().is_false());
        assert!(find_condition(&c, CONDITION_HPA_ACTIVE).is_none());
    }
}
