//! The ScaledObject scale decision: one pure function from what the scale loop observed to
//! what it must write.
//!
//! Reproduces KEDA's `RequestScale` (`pkg/scaling/executor/scale_scaledobjects.go`) step by
//! step (KEDA-CONTRACT 1.8), plus the two activity rules of `getScaledObjectState`
//! (`pkg/scaling/scale_handler.go`, KEDA-CONTRACT 1.7) that belong to the decision:
//!
//! 1. Paused (`autoscaling.keda.sh/paused` or `paused-replicas`): only Paused=True; with
//!    `paused-replicas: N` the target is also set to N, which KEDA's reconciler does in
//!    `scaleTargetToPausedCount`.
//! 2. Active (any trigger active, or `force-activation`): Active=True, then
//!    * replicas are 0, or idle replicas are configured and replicas are below min: scale to
//!      `max(min, 1)` unless `paused-scale-out`; event `KEDAScaleTargetActivated`;
//!      `lastActiveTime = now`;
//!    * else, some trigger failed: Ready=Unknown `PartialTriggerError`;
//!    * else `lastActiveTime = now` (the HPA does 1 <-> N).
//! 3. Inactive: Active=False `ScalerNotActive`, then the first that matches:
//!    * a trigger failed and `fallback.replicas != 0`: nothing (the HPA is served the fallback
//!      metric; scaling to zero would switch the HPA off and lose the fallback);
//!    * a trigger failed and there is no fallback: Ready=False `TriggerError`;
//!    * replicas above idle, or above 0 with min 0: unless `paused-scale-in`, once the cooldown
//!      has passed scale to idle (or min) with event `KEDAScaleTargetDeactivated`, else
//!      Active=False `ScalerCooldown`. Never active: the cooldown runs from creation for
//!      `initialCooldownPeriod`; once active: from `lastActiveTime` for `cooldownPeriod`. Both
//!      comparisons are strict (`reference + period < now`), as KEDA's `Before`;
//!    * no idle replicas and replicas below min: scale to min.
//!
//! An object whose triggers are all cpu/memory is active unless a trigger failed: it could
//! never come back from zero.
//!
//! One deliberate improvement (DESIGN.md): keda-rs persists `lastActiveTime` on transitions and
//! at a coarse interval instead of on every poll, so after an operator restart the persisted
//! value may be old. The cooldown therefore counts from `max(lastActiveTime, operator start)`:
//! a restart never scales a busy workload to zero early.
//!
//! The decision assumes the `/scale` write it asks for succeeds; if it fails, the caller keeps
//! the old `lastActiveTime`, emits [`ScaleWrite::failure_event`] and tries again next poll,
//! as KEDA does.
//!
//! Files: `pause.rs` reads the pause and switch annotations, `cooldown.rs` holds the cooldown
//! arithmetic, `tests.rs` the table tests of the decision.

use std::fmt;

use jiff::{SignedDuration, Timestamp};

use crate::fallback::FallbackSpec;

mod cooldown;
mod pause;

use cooldown::cooldown_over;
pub use cooldown::{DEFAULT_COOLDOWN_PERIOD, DEFAULT_INITIAL_COOLDOWN_PERIOD, cooldown_reference};
pub use pause::{
    ANNOTATION_FORCE_ACTIVATION, ANNOTATION_PAUSED, ANNOTATION_PAUSED_REPLICAS,
    ANNOTATION_PAUSED_SCALE_IN, ANNOTATION_PAUSED_SCALE_OUT, InvalidPausedReplicas, Pause,
    ScaleAnnotations,
};

/// Event reason: the target was scaled from zero (or idle).
pub const REASON_ACTIVATED: &str = "KEDAScaleTargetActivated";
/// Event reason: the target was scaled to zero (or idle).
pub const REASON_DEACTIVATED: &str = "KEDAScaleTargetDeactivated";
/// Event reason: scaling from zero (or idle) failed.
pub const REASON_ACTIVATION_FAILED: &str = "KEDAScaleTargetActivationFailed";
/// Event reason: scaling to zero (or idle) failed.
pub const REASON_DEACTIVATION_FAILED: &str = "KEDAScaleTargetDeactivationFailed";

/// Condition reason: Ready=True.
pub const REASON_READY: &str = "ScaledObjectReady";
/// Condition reason: Ready=False, inactive and a trigger failed with no fallback.
pub const REASON_TRIGGER_ERROR: &str = "TriggerError";
/// Condition reason: Ready=Unknown, active but some trigger failed.
pub const REASON_PARTIAL_TRIGGER_ERROR: &str = "PartialTriggerError";
/// Condition reason: Active=True.
pub const REASON_SCALER_ACTIVE: &str = "ScalerActive";
/// Condition reason: Active=False.
pub const REASON_SCALER_NOT_ACTIVE: &str = "ScalerNotActive";
/// Condition reason: Active=False while the cooldown runs.
pub const REASON_SCALER_COOLDOWN: &str = "ScalerCooldown";
/// Condition reason: Paused=True.
pub const REASON_PAUSED: &str = "ScaledObjectPaused";

/// The scale target, as named in events: `status.scaleTargetKind` (e.g. `apps/v1.Deployment`),
/// the namespace and `scaleTargetRef.name`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetRef {
    /// `status.scaleTargetKind`.
    pub kind: String,
    /// The object's namespace.
    pub namespace: String,
    /// `spec.scaleTargetRef.name`.
    pub name: String,
}

impl fmt::Display for TargetRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The object's scaling settings, filled by the controller from the ScaledObject.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingSettings {
    /// Names the target in events.
    pub target: TargetRef,
    /// `minReplicaCount` (default 0).
    pub min_replica_count: i32,
    /// `idleReplicaCount`, if set.
    pub idle_replica_count: Option<i32>,
    /// `cooldownPeriod` (default [`DEFAULT_COOLDOWN_PERIOD`]).
    pub cooldown_period: SignedDuration,
    /// `initialCooldownPeriod` (default [`DEFAULT_INITIAL_COOLDOWN_PERIOD`]).
    pub initial_cooldown_period: SignedDuration,
    /// `spec.fallback`, if set (valid or not: KEDA's executor only looks at `replicas`).
    pub fallback: Option<FallbackSpec>,
    /// The annotations that steer the decision.
    pub annotations: ScaleAnnotations,
    /// Every trigger is `cpu` or `memory`.
    pub only_resource_triggers: bool,
}

impl ScalingSettings {
    /// Settings with KEDA's defaults for the given target.
    pub fn with_defaults(target: TargetRef) -> ScalingSettings {
        ScalingSettings {
            target,
            min_replica_count: 0,
            idle_replica_count: None,
            cooldown_period: DEFAULT_COOLDOWN_PERIOD,
            initial_cooldown_period: DEFAULT_INITIAL_COOLDOWN_PERIOD,
            fallback: None,
            annotations: ScaleAnnotations::default(),
            only_resource_triggers: false,
        }
    }
}

/// The combined result of one poll of all triggers.
///
/// With `scalingModifiers`, `active` is the composite activity
/// ([`crate::formula::composite_is_active`]), which replaces the per-trigger activity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TriggerSummary {
    /// Some trigger (or the composite value) is active.
    pub active: bool,
    /// Names of the active triggers, for the activation event (`ModifiersTrigger` for a
    /// composite activation, as KEDA).
    pub active_triggers: Vec<String>,
    /// One line per failed trigger, naming it and what failed; empty when none failed. A
    /// metric served from fallback is not a failure here.
    pub errors: Vec<String>,
}

impl TriggerSummary {
    fn any_error(&self) -> bool {
        !self.errors.is_empty()
    }
}

/// What the loop knows about the target and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The target's current `spec.replicas`.
    pub current_replicas: i32,
    /// The remembered `lastActiveTime` (in memory, or as persisted before a restart).
    pub last_active_time: Option<Timestamp>,
    /// The object's `creationTimestamp`.
    pub created_at: Timestamp,
    /// When this operator process started.
    pub operator_started_at: Timestamp,
    /// The time of this decision.
    pub now: Timestamp,
}

/// A status condition type this decision sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConditionType {
    /// `Ready`.
    Ready,
    /// `Active`.
    Active,
    /// `Paused`.
    Paused,
}

/// A condition status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

/// One condition to set on the object's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionUpdate {
    /// Which condition.
    pub type_: ConditionType,
    /// Its status.
    pub status: ConditionStatus,
    /// The reason (one of the `REASON_*` constants).
    pub reason: &'static str,
    /// The human message.
    pub message: String,
}

/// Why the decision writes replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleWriteKind {
    /// From zero (or idle) to `max(min, 1)`.
    Activate,
    /// To idle (or min) after the cooldown.
    Deactivate,
    /// Inactive and below min without idle replicas: up to min.
    RaiseToMin,
    /// Held at the `paused-replicas` count.
    PausedReplicas,
}

/// A `/scale` write to perform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleWrite {
    /// Replicas before the write.
    pub from: i32,
    /// Replicas to write.
    pub to: i32,
    /// Why.
    pub kind: ScaleWriteKind,
}

impl ScaleWrite {
    /// The Warning event to emit when the write fails (KEDA's `...ActivationFailed` /
    /// `...DeactivationFailed`); `None` for writes KEDA does not report.
    pub fn failure_event(&self, target: &TargetRef) -> Option<ScaleEvent> {
        let (reason, verb) = match self.kind {
            ScaleWriteKind::Activate => (REASON_ACTIVATION_FAILED, "scale"),
            ScaleWriteKind::Deactivate => (REASON_DEACTIVATION_FAILED, "deactivate"),
            ScaleWriteKind::RaiseToMin | ScaleWriteKind::PausedReplicas => return None,
        };
        Some(ScaleEvent {
            type_: EventType::Warning,
            reason,
            message: format!(
                "Failed to {verb} {target} from {} to {}",
                self.from, self.to
            ),
        })
    }
}

/// A Kubernetes event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// A Kubernetes event to record on the ScaledObject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleEvent {
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// The reason (one of the `REASON_*` event constants).
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// What to do after one poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleDecision {
    /// The `/scale` write, only when it changes the replica count.
    pub scale: Option<ScaleWrite>,
    /// The `lastActiveTime` to remember (unchanged unless the object is active).
    pub last_active_time: Option<Timestamp>,
    /// Conditions to set, in order (a later one of the same type wins).
    pub conditions: Vec<ConditionUpdate>,
    /// The event to record once the write succeeded.
    pub event: Option<ScaleEvent>,
}

impl ScaleDecision {
    /// The last condition of this type, if the decision sets it.
    pub fn condition(&self, type_: ConditionType) -> Option<&ConditionUpdate> {
        self.conditions.iter().rev().find(|c| c.type_ == type_)
    }

    fn set(
        &mut self,
        type_: ConditionType,
        status: ConditionStatus,
        reason: &'static str,
        message: String,
    ) {
        self.conditions.retain(|c| c.type_ != type_);
        self.conditions.push(ConditionUpdate {
            type_,
            status,
            reason,
            message,
        });
    }

    fn write(&mut self, from: i32, to: i32, kind: ScaleWriteKind) -> bool {
        if from == to {
            return false;
        }
        self.scale = Some(ScaleWrite { from, to, kind });
        true
    }
}

/// Decides what one poll of a ScaledObject's triggers means for its target. Pure: time,
/// replicas and trigger results are inputs.
pub fn decide(
    settings: &ScalingSettings,
    observed: &Observed,
    triggers: &TriggerSummary,
) -> ScaleDecision {
    let mut d = ScaleDecision {
        scale: None,
        last_active_time: observed.last_active_time,
        conditions: Vec::new(),
        event: None,
    };
    d.set(
        ConditionType::Ready,
        ConditionStatus::True,
        REASON_READY,
        "ScaledObject is defined correctly and is ready for scaling".to_string(),
    );
    let ann = settings.annotations;
    let current = observed.current_replicas;

    // Step 1: paused objects only report that they are paused.
    if ann.pause != Pause::No {
        d.set(
            ConditionType::Paused,
            ConditionStatus::True,
            REASON_PAUSED,
            "ScaledObject is paused".to_string(),
        );
        if let Pause::AtReplicas(n) = ann.pause {
            d.write(current, n, ScaleWriteKind::PausedReplicas);
        }
        return d;
    }
    if ann.paused_scale_in || ann.paused_scale_out {
        d.set(
            ConditionType::Paused,
            ConditionStatus::True,
            REASON_PAUSED,
            "ScaledObject is paused".to_string(),
        );
    }

    let error = triggers.any_error();
    // getScaledObjectState: cpu/memory-only objects are always active unless a trigger failed.
    let active = triggers.active || (settings.only_resource_triggers && !error);
    let min = settings.min_replica_count;

    if active || ann.force_activation {
        let message = if ann.force_activation {
            "Scaling is performed because activation is being forced by annotation"
        } else {
            "Scaling is performed because triggers are active"
        };
        d.set(
            ConditionType::Active,
            ConditionStatus::True,
            REASON_SCALER_ACTIVE,
            message.to_string(),
        );
        if (settings.idle_replica_count.is_some() && current < min) || current == 0 {
            // scaleFromZeroOrIdle. paused-scale-out skips everything, lastActiveTime included.
            if !ann.paused_scale_out {
                let to = min.max(1);
                if d.write(current, to, ScaleWriteKind::Activate) {
                    let cause = if ann.force_activation {
                        "caused by forced activation annotation".to_string()
                    } else {
                        format!("triggered by {}", triggers.active_triggers.join(";"))
                    };
                    d.event = Some(ScaleEvent {
                        type_: EventType::Normal,
                        reason: REASON_ACTIVATED,
                        message: format!(
                            "Scaled {} from {current} to {to}, {cause}",
                            settings.target
                        ),
                    });
                }
                d.last_active_time = Some(observed.now);
            }
        } else if error {
            d.set(
                ConditionType::Ready,
                ConditionStatus::Unknown,
                REASON_PARTIAL_TRIGGER_ERROR,
                with_errors(
                    "Some triggers defined in ScaledObject are not working correctly",
                    triggers,
                ),
            );
        } else {
            d.last_active_time = Some(observed.now);
        }
        return d;
    }

    d.set(
        ConditionType::Active,
        ConditionStatus::False,
        REASON_SCALER_NOT_ACTIVE,
        "Scaling is not performed because triggers are not active".to_string(),
    );
    let idle = settings.idle_replica_count;
    if error && settings.fallback.is_some_and(|f| f.replicas != 0) {
        // The HPA is served the fallback metric; leave the replicas to it.
    } else if error && settings.fallback.is_none() {
        d.set(
            ConditionType::Ready,
            ConditionStatus::False,
            REASON_TRIGGER_ERROR,
            with_errors(
                "Triggers defined in ScaledObject are not working correctly",
                triggers,
            ),
        );
    } else if idle.is_some_and(|idle| current > idle) || (current > 0 && min == 0) {
        // scaleToZeroOrIdle.
        if !ann.paused_scale_in {
            if cooldown_over(settings, observed) {
                let to = idle.unwrap_or(min);
                if d.write(current, to, ScaleWriteKind::Deactivate) {
                    d.event = Some(ScaleEvent {
                        type_: EventType::Normal,
                        reason: REASON_DEACTIVATED,
                        message: format!("Deactivated {} from {current} to {to}", settings.target),
                    });
                }
            } else {
                d.set(
                    ConditionType::Active,
                    ConditionStatus::False,
                    REASON_SCALER_COOLDOWN,
                    "Scaler cooling down because triggers are not active".to_string(),
                );
            }
        }
    } else if idle.is_none() && current < min {
        d.write(current, min, ScaleWriteKind::RaiseToMin);
    }
    d
}

fn with_errors(message: &str, triggers: &TriggerSummary) -> String {
    if triggers.errors.is_empty() {
        message.to_string()
    } else {
        format!("{message}: {}", triggers.errors.join("; "))
    }
}

#[cfg(test)]
mod tests;
