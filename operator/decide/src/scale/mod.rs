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

use std::collections::BTreeMap;
use std::fmt;

use jiff::{SignedDuration, Timestamp};

use crate::fallback::FallbackSpec;

/// Annotation: pause the object, leaving replicas as they are.
pub const ANNOTATION_PAUSED: &str = "autoscaling.keda.sh/paused";
/// Annotation: pause the object at this replica count.
pub const ANNOTATION_PAUSED_REPLICAS: &str = "autoscaling.keda.sh/paused-replicas";
/// Annotation: never scale in (to idle or zero) while set.
pub const ANNOTATION_PAUSED_SCALE_IN: &str = "autoscaling.keda.sh/paused-scale-in";
/// Annotation: never scale out (from idle or zero) while set.
pub const ANNOTATION_PAUSED_SCALE_OUT: &str = "autoscaling.keda.sh/paused-scale-out";
/// Annotation: treat the object as active whatever its triggers say.
pub const ANNOTATION_FORCE_ACTIVATION: &str = "autoscaling.keda.sh/force-activation";

/// KEDA's default `cooldownPeriod`: 300 seconds.
pub const DEFAULT_COOLDOWN_PERIOD: SignedDuration = SignedDuration::from_secs(300);
/// KEDA's default `initialCooldownPeriod`: 0 seconds.
pub const DEFAULT_INITIAL_COOLDOWN_PERIOD: SignedDuration = SignedDuration::ZERO;

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

/// How the object is paused, read from its annotations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pause {
    /// Not paused.
    #[default]
    No,
    /// `paused: "true"` (or any value Go's `ParseBool` rejects): replicas stay as they are.
    Paused,
    /// `paused-replicas: "N"`: the target is held at N replicas.
    AtReplicas(i32),
}

/// The annotations that steer the decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScaleAnnotations {
    /// `paused` / `paused-replicas`.
    pub pause: Pause,
    /// `paused-scale-in`.
    pub paused_scale_in: bool,
    /// `paused-scale-out`.
    pub paused_scale_out: bool,
    /// `force-activation`.
    pub force_activation: bool,
}

/// An annotation held a value that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {ANNOTATION_PAUSED_REPLICAS}: {value:?} is not a replica count (a whole number >= 0)"
)]
pub struct InvalidPausedReplicas {
    /// The value as written.
    pub value: String,
}

impl ScaleAnnotations {
    /// Reads the annotations as KEDA does: `paused-replicas` wins over `paused`; `paused` and the
    /// three switches are on when present and not false: a value Go's `strconv.ParseBool`
    /// cannot read counts as true, exactly as the HPA builder reads them
    /// ([`keda_api::annotations::bool_annotation`]).
    ///
    /// # Errors
    /// When `paused-replicas` is not a non-negative integer.
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
    ) -> Result<ScaleAnnotations, InvalidPausedReplicas> {
        let switch = |key: &str| keda_api::annotations::bool_annotation(Some(annotations), key);
        let pause = if let Some(value) = annotations.get(ANNOTATION_PAUSED_REPLICAS) {
            match value.trim().parse::<i32>() {
                Ok(n) if n >= 0 => Pause::AtReplicas(n),
                _ => {
                    return Err(InvalidPausedReplicas {
                        value: value.clone(),
                    });
                }
            }
        } else {
            match annotations.get(ANNOTATION_PAUSED).map(|v| parse_go_bool(v)) {
                None | Some(Some(false)) => Pause::No,
                Some(Some(true) | None) => Pause::Paused,
            }
        };
        Ok(ScaleAnnotations {
            pause,
            paused_scale_in: switch(ANNOTATION_PAUSED_SCALE_IN),
            paused_scale_out: switch(ANNOTATION_PAUSED_SCALE_OUT),
            force_activation: switch(ANNOTATION_FORCE_ACTIVATION),
        })
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

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

/// Where the cooldown counts from and how long it is: `(creation, initialCooldownPeriod)` for
/// an object never active, else `(max(lastActiveTime, operator start), cooldownPeriod)`.
/// [`decide`] scales in once more than `period` has passed since `reference`.
pub fn cooldown_reference(
    settings: &ScalingSettings,
    observed: &Observed,
) -> (Timestamp, SignedDuration) {
    match observed.last_active_time {
        None => (observed.created_at, settings.initial_cooldown_period),
        Some(last) => (
            last.max(observed.operator_started_at),
            settings.cooldown_period,
        ),
    }
}

/// KEDA's cooldown test, with keda-rs's restart rule: never active -> `created +
/// initialCooldownPeriod < now`; else `max(lastActiveTime, operator start) + cooldownPeriod <
/// now`. Written as elapsed time, which cannot overflow: `now - reference > period`.
fn cooldown_over(settings: &ScalingSettings, observed: &Observed) -> bool {
    let (reference, period) = cooldown_reference(settings, observed);
    observed.now.duration_since(reference) > period
}

fn with_errors(message: &str, triggers: &TriggerSummary) -> String {
    if triggers.errors.is_empty() {
        message.to_string()
    } else {
        format!("{message}: {}", triggers.errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fallback::FallbackBehavior;

    /// Virtual time: seconds after a fixed epoch.
    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("valid test time")
    }

    fn settings() -> ScalingSettings {
        ScalingSettings::with_defaults(TargetRef {
            kind: "apps/v1.Deployment".into(),
            namespace: "ns".into(),
            name: "app".into(),
        })
    }

    fn observed(current: i32, last_active: Option<i64>, now: i64) -> Observed {
        Observed {
            current_replicas: current,
            last_active_time: last_active.map(t),
            created_at: t(0),
            operator_started_at: t(0),
            now: t(now),
        }
    }

    fn active(names: &[&str]) -> TriggerSummary {
        TriggerSummary {
            active: true,
            active_triggers: names.iter().map(|n| n.to_string()).collect(),
            errors: vec![],
        }
    }

    fn inactive() -> TriggerSummary {
        TriggerSummary::default()
    }

    fn failed(active_too: bool) -> TriggerSummary {
        TriggerSummary {
            active: active_too,
            active_triggers: vec![],
            errors: vec!["trigger \"queue\" (redis): connection refused".into()],
        }
    }

    fn with(f: impl FnOnce(&mut ScalingSettings)) -> ScalingSettings {
        let mut s = settings();
        f(&mut s);
        s
    }

    fn write(from: i32, to: i32, kind: ScaleWriteKind) -> Option<(i32, i32, ScaleWriteKind)> {
        Some((from, to, kind))
    }

    struct Case {
        why: &'static str,
        settings: ScalingSettings,
        observed: Observed,
        triggers: TriggerSummary,
        /// (from, to, kind) of the expected write.
        scale: Option<(i32, i32, ScaleWriteKind)>,
        /// Expected lastActiveTime, in virtual seconds.
        last_active: Option<i64>,
        /// Expected (status, reason) of Active, Ready and Paused.
        active: Option<(ConditionStatus, &'static str)>,
        ready: (ConditionStatus, &'static str),
        paused: bool,
        /// Expected event reason.
        event: Option<&'static str>,
    }

    use ConditionStatus::{False, True, Unknown};
    use ScaleWriteKind::{Activate, Deactivate, PausedReplicas, RaiseToMin};

    const READY: (ConditionStatus, &str) = (True, REASON_READY);
    const ACTIVE: Option<(ConditionStatus, &str)> = Some((True, REASON_SCALER_ACTIVE));
    const NOT_ACTIVE: Option<(ConditionStatus, &str)> = Some((False, REASON_SCALER_NOT_ACTIVE));
    const COOLDOWN: Option<(ConditionStatus, &str)> = Some((False, REASON_SCALER_COOLDOWN));

    #[test]
    fn decision_follows_keda_request_scale_branch_by_branch() {
        let fallback = |replicas| {
            Some(FallbackSpec {
                failure_threshold: 3,
                replicas,
                behavior: FallbackBehavior::Static,
            })
        };
        let cases = vec![
            // 1. Paused: only the Paused condition, nothing written even though active at 0.
            Case {
                why: "a paused object only reports that it is paused",
                settings: with(|s| s.annotations.pause = Pause::Paused),
                observed: observed(0, None, 10),
                triggers: active(&["queue"]),
                scale: None,
                last_active: None,
                active: None,
                ready: READY,
                paused: true,
                event: None,
            },
            // 1. paused-replicas: the target is held at N (KEDA's reconciler does this write).
            Case {
                why: "paused-replicas holds the target at its count",
                settings: with(|s| s.annotations.pause = Pause::AtReplicas(5)),
                observed: observed(2, Some(0), 10),
                triggers: inactive(),
                scale: write(2, 5, PausedReplicas),
                last_active: Some(0),
                active: None,
                ready: READY,
                paused: true,
                event: None,
            },
            // 1. paused-replicas already reached: nothing to write.
            Case {
                why: "paused-replicas at its count writes nothing",
                settings: with(|s| s.annotations.pause = Pause::AtReplicas(5)),
                observed: observed(5, None, 10),
                triggers: active(&["queue"]),
                scale: None,
                last_active: None,
                active: None,
                ready: READY,
                paused: true,
                event: None,
            },
            // 2. Active at 0 with min 0: scale to 1, remember now.
            Case {
                why: "an active object at zero is scaled to one",
                settings: settings(),
                observed: observed(0, None, 10),
                triggers: active(&["queue", "lag"]),
                scale: write(0, 1, Activate),
                last_active: Some(10),
                active: ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_ACTIVATED),
            },
            // 2. Active at 0 with min 3: scale straight to min.
            Case {
                why: "an active object at zero is scaled to min when min is above one",
                settings: with(|s| s.min_replica_count = 3),
                observed: observed(0, Some(0), 10),
                triggers: active(&["queue"]),
                scale: write(0, 3, Activate),
                last_active: Some(10),
                active: ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_ACTIVATED),
            },
            // 2. Idle replicas: active at idle (1) below min (3) scales to min.
            Case {
                why: "an active object at idle is scaled to min",
                settings: with(|s| {
                    s.min_replica_count = 3;
                    s.idle_replica_count = Some(1);
                }),
                observed: observed(1, Some(0), 10),
                triggers: active(&["queue"]),
                scale: write(1, 3, Activate),
                last_active: Some(10),
                active: ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_ACTIVATED),
            },
            // 2. Force activation wins over inactive triggers.
            Case {
                why: "force-activation scales an inactive object from zero",
                settings: with(|s| s.annotations.force_activation = true),
                observed: observed(0, None, 10),
                triggers: inactive(),
                scale: write(0, 1, Activate),
                last_active: Some(10),
                active: ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_ACTIVATED),
            },
            // 2. paused-scale-out: active at zero, but no write and lastActiveTime kept.
            Case {
                why: "paused-scale-out keeps an active object at zero",
                settings: with(|s| s.annotations.paused_scale_out = true),
                observed: observed(0, Some(3), 10),
                triggers: active(&["queue"]),
                scale: None,
                last_active: Some(3),
                active: ACTIVE,
                ready: READY,
                paused: true,
                event: None,
            },
            // 2. Active above zero with a failing trigger: Ready=Unknown, lastActiveTime kept.
            Case {
                why: "an active object with a failing trigger is partially ready",
                settings: settings(),
                observed: observed(2, Some(3), 10),
                triggers: failed(true),
                scale: None,
                last_active: Some(3),
                active: ACTIVE,
                ready: (Unknown, REASON_PARTIAL_TRIGGER_ERROR),
                paused: false,
                event: None,
            },
            // 2. Active above zero: the HPA scales; only lastActiveTime moves.
            Case {
                why: "an active object above zero only refreshes lastActiveTime",
                settings: settings(),
                observed: observed(4, Some(3), 10),
                triggers: active(&["queue"]),
                scale: None,
                last_active: Some(10),
                active: ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
            // 2. Idle set but replicas at min: no activation write.
            Case {
                why: "an active object at min with idle replicas is left to the HPA",
                settings: with(|s| {
                    s.min_replica_count = 2;
                    s.idle_replica_count = Some(0);
                }),
                observed: observed(2, Some(3), 10),
                triggers: active(&["queue"]),
                scale: None,
                last_active: Some(10),
                active: ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
            // 2. cpu/memory only: forced active, so never scaled to zero.
            Case {
                why: "a cpu-only object is active even when its triggers are not",
                settings: with(|s| {
                    s.only_resource_triggers = true;
                    s.min_replica_count = 1;
                }),
                observed: observed(1, Some(0), 1000),
                triggers: inactive(),
                scale: None,
                last_active: Some(1000),
                active: ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. cpu/memory only with an error: not forced, error without fallback.
            Case {
                why: "a cpu-only object with a failing trigger is not forced active",
                settings: with(|s| s.only_resource_triggers = true),
                observed: observed(1, Some(0), 1000),
                triggers: failed(false),
                scale: None,
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: (False, REASON_TRIGGER_ERROR),
                paused: false,
                event: None,
            },
            // 3. Error with fallback replicas: do nothing, even after the cooldown.
            Case {
                why: "an inactive failing object with fallback is left to the HPA",
                settings: with(|s| s.fallback = fallback(4)),
                observed: observed(3, Some(0), 1000),
                triggers: failed(false),
                scale: None,
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Error without fallback: Ready=False TriggerError, no write.
            Case {
                why: "an inactive failing object without fallback is not ready",
                settings: settings(),
                observed: observed(3, Some(0), 1000),
                triggers: failed(false),
                scale: None,
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: (False, REASON_TRIGGER_ERROR),
                paused: false,
                event: None,
            },
            // 3. Error with fallback replicas 0: falls through to scale to zero (KEDA).
            Case {
                why: "an inactive failing object with zero fallback replicas scales to zero",
                settings: with(|s| s.fallback = fallback(0)),
                observed: observed(3, Some(0), 1000),
                triggers: failed(false),
                scale: write(3, 0, Deactivate),
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_DEACTIVATED),
            },
            // 3. Inactive after the cooldown (0 + 300 < 301): scale to zero.
            Case {
                why: "an inactive object past the cooldown scales to zero",
                settings: settings(),
                observed: observed(2, Some(0), 301),
                triggers: inactive(),
                scale: write(2, 0, Deactivate),
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_DEACTIVATED),
            },
            // 3. Exactly at the cooldown (0 + 300 == 300): strict <, so still cooling down.
            Case {
                why: "an inactive object exactly at the cooldown keeps cooling down",
                settings: settings(),
                observed: observed(2, Some(0), 300),
                triggers: inactive(),
                scale: None,
                last_active: Some(0),
                active: COOLDOWN,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Inactive within the cooldown: Active=False ScalerCooldown.
            Case {
                why: "an inactive object within the cooldown reports ScalerCooldown",
                settings: settings(),
                observed: observed(2, Some(100), 200),
                triggers: inactive(),
                scale: None,
                last_active: Some(100),
                active: COOLDOWN,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Never active, initialCooldownPeriod 0: scale to zero once past creation.
            Case {
                why: "a never-active object scales to zero right after creation",
                settings: settings(),
                observed: observed(1, None, 1),
                triggers: inactive(),
                scale: write(1, 0, Deactivate),
                last_active: None,
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_DEACTIVATED),
            },
            // 3. Never active, at creation time: 0 + 0 < 0 is false.
            Case {
                why: "a never-active object at its creation instant is still cooling down",
                settings: settings(),
                observed: observed(1, None, 0),
                triggers: inactive(),
                scale: None,
                last_active: None,
                active: COOLDOWN,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Never active, initialCooldownPeriod 120 not over (0 + 120 < 120 false).
            Case {
                why: "a never-active object waits out initialCooldownPeriod",
                settings: with(|s| s.initial_cooldown_period = SignedDuration::from_secs(120)),
                observed: observed(1, None, 120),
                triggers: inactive(),
                scale: None,
                last_active: None,
                active: COOLDOWN,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Never active, initialCooldownPeriod 120 over.
            Case {
                why: "a never-active object scales to zero after initialCooldownPeriod",
                settings: with(|s| s.initial_cooldown_period = SignedDuration::from_secs(120)),
                observed: observed(1, None, 121),
                triggers: inactive(),
                scale: write(1, 0, Deactivate),
                last_active: None,
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_DEACTIVATED),
            },
            // 3. initialCooldownPeriod does not apply once the object has been active.
            Case {
                why: "once active the cooldown, not the initial cooldown, applies",
                settings: with(|s| {
                    s.initial_cooldown_period = SignedDuration::from_secs(1000);
                    s.cooldown_period = SignedDuration::from_secs(10);
                }),
                observed: observed(1, Some(50), 61),
                triggers: inactive(),
                scale: write(1, 0, Deactivate),
                last_active: Some(50),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_DEACTIVATED),
            },
            // 3. Idle replicas: inactive above idle after cooldown goes to idle, even from 5.
            Case {
                why: "an inactive object above idle goes to idle after the cooldown",
                settings: with(|s| {
                    s.min_replica_count = 2;
                    s.idle_replica_count = Some(0);
                }),
                observed: observed(5, Some(0), 301),
                triggers: inactive(),
                scale: write(5, 0, Deactivate),
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: Some(REASON_DEACTIVATED),
            },
            // 3. paused-scale-in: no write, and no cooldown condition either (KEDA returns early).
            Case {
                why: "paused-scale-in keeps an inactive object's replicas",
                settings: with(|s| s.annotations.paused_scale_in = true),
                observed: observed(2, Some(0), 1000),
                triggers: inactive(),
                scale: None,
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: true,
                event: None,
            },
            // 3. Below min without idle: raise to min, no event.
            Case {
                why: "an inactive object below min is raised to min",
                settings: with(|s| s.min_replica_count = 2),
                observed: observed(0, Some(0), 1000),
                triggers: inactive(),
                scale: write(0, 2, RaiseToMin),
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Below min with idle replicas at idle: nothing (idle is where it belongs).
            Case {
                why: "an inactive object at idle stays there",
                settings: with(|s| {
                    s.min_replica_count = 2;
                    s.idle_replica_count = Some(0);
                }),
                observed: observed(0, Some(0), 1000),
                triggers: inactive(),
                scale: None,
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Inactive at min 2 with no idle: the HPA's business, nothing to do.
            Case {
                why: "an inactive object at min is left alone",
                settings: with(|s| s.min_replica_count = 2),
                observed: observed(3, Some(0), 1000),
                triggers: inactive(),
                scale: None,
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
            // 3. Inactive at zero: nothing to do.
            Case {
                why: "an inactive object at zero is left alone",
                settings: settings(),
                observed: observed(0, Some(0), 1000),
                triggers: inactive(),
                scale: None,
                last_active: Some(0),
                active: NOT_ACTIVE,
                ready: READY,
                paused: false,
                event: None,
            },
        ];
        for c in cases {
            let d = decide(&c.settings, &c.observed, &c.triggers);
            let scale = d.scale.as_ref().map(|w| (w.from, w.to, w.kind));
            assert_eq!(scale, c.scale, "scale: {}", c.why);
            assert_eq!(
                d.last_active_time,
                c.last_active.map(t),
                "lastActiveTime: {}",
                c.why
            );
            let cond = |ty| d.condition(ty).map(|c| (c.status, c.reason));
            assert_eq!(cond(ConditionType::Active), c.active, "Active: {}", c.why);
            assert_eq!(
                cond(ConditionType::Ready),
                Some(c.ready),
                "Ready: {}",
                c.why
            );
            assert_eq!(
                cond(ConditionType::Paused).is_some(),
                c.paused,
                "Paused: {}",
                c.why
            );
            assert_eq!(
                d.event.as_ref().map(|e| e.reason),
                c.event,
                "event: {}",
                c.why
            );
        }
    }

    #[test]
    fn a_restart_does_not_scale_a_busy_workload_to_zero_early() {
        // lastActiveTime was persisted at t=0; the operator restarted at t=290 and polls at
        // t=301. KEDA would scale to zero (0 + 300 < 301); keda-rs counts from the restart.
        let s = settings();
        let mut o = observed(3, Some(0), 301);
        o.operator_started_at = t(290);
        let d = decide(&s, &o, &inactive());
        assert_eq!(d.scale, None);
        assert_eq!(
            d.condition(ConditionType::Active).map(|c| c.reason),
            Some(REASON_SCALER_COOLDOWN)
        );
        // 290 + 300 < 591: the full cooldown after the restart has passed.
        o.now = t(591);
        let d = decide(&s, &o, &inactive());
        assert_eq!(
            d.scale,
            Some(ScaleWrite {
                from: 3,
                to: 0,
                kind: Deactivate
            })
        );
        // A lastActiveTime newer than the restart counts from itself.
        o.last_active_time = Some(t(400));
        o.now = t(650);
        assert_eq!(decide(&s, &o, &inactive()).scale, None);
    }

    #[test]
    fn events_carry_keda_messages() {
        let d = decide(
            &settings(),
            &observed(0, None, 5),
            &active(&["queue", "lag"]),
        );
        assert_eq!(
            d.event.map(|e| e.message),
            Some("Scaled apps/v1.Deployment ns/app from 0 to 1, triggered by queue;lag".into())
        );
        let forced = with(|s| s.annotations.force_activation = true);
        let d = decide(&forced, &observed(0, None, 5), &inactive());
        assert_eq!(
            d.event.map(|e| e.message),
            Some(
                "Scaled apps/v1.Deployment ns/app from 0 to 1, caused by forced activation annotation"
                    .into()
            )
        );
        let d = decide(&settings(), &observed(4, Some(0), 400), &inactive());
        assert_eq!(
            d.event.map(|e| e.message),
            Some("Deactivated apps/v1.Deployment ns/app from 4 to 0".into())
        );
        let failure = d.scale.and_then(|w| w.failure_event(&settings().target));
        assert_eq!(
            failure.map(|e| (e.type_, e.reason, e.message)),
            Some((
                EventType::Warning,
                REASON_DEACTIVATION_FAILED,
                "Failed to deactivate apps/v1.Deployment ns/app from 4 to 0".into()
            ))
        );
    }

    #[test]
    fn trigger_errors_are_named_in_the_ready_condition() {
        let d = decide(&settings(), &observed(1, Some(0), 10), &failed(false));
        assert_eq!(
            d.condition(ConditionType::Ready)
                .map(|c| c.message.as_str()),
            Some(
                "Triggers defined in ScaledObject are not working correctly: \
                 trigger \"queue\" (redis): connection refused"
            )
        );
    }

    #[test]
    fn annotations_are_read_as_keda_reads_them() {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let read = |pairs: &[(&str, &str)]| ScaleAnnotations::from_annotations(&map(pairs));
        // No annotations: nothing paused or forced.
        assert_eq!(read(&[]), Ok(ScaleAnnotations::default()));
        // "false" unpauses; an unreadable value pauses (KEDA's ParseBool error branch).
        assert_eq!(
            read(&[(ANNOTATION_PAUSED, "false")]).map(|a| a.pause),
            Ok(Pause::No)
        );
        assert_eq!(
            read(&[(ANNOTATION_PAUSED, "yes")]).map(|a| a.pause),
            Ok(Pause::Paused)
        );
        assert_eq!(
            read(&[(ANNOTATION_PAUSED, "TRUE")]).map(|a| a.pause),
            Ok(Pause::Paused)
        );
        // paused-replicas wins over paused.
        assert_eq!(
            read(&[
                (ANNOTATION_PAUSED, "false"),
                (ANNOTATION_PAUSED_REPLICAS, "5")
            ])
            .map(|a| a.pause),
            Ok(Pause::AtReplicas(5))
        );
        // A non-integer count is an error naming the annotation.
        let err = read(&[(ANNOTATION_PAUSED_REPLICAS, "five")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("autoscaling.keda.sh/paused-replicas")
        );
        // The switches are on when true, off when false.
        let a = read(&[
            (ANNOTATION_PAUSED_SCALE_IN, "true"),
            (ANNOTATION_PAUSED_SCALE_OUT, "0"),
            (ANNOTATION_FORCE_ACTIVATION, "False"),
        ])
        .unwrap();
        assert!(a.paused_scale_in && !a.paused_scale_out && !a.force_activation);
    }

    #[test]
    fn an_unparsable_switch_annotation_counts_as_true_as_in_the_hpa() {
        // KEDA reads paused-scale-in, paused-scale-out and force-activation like paused: a
        // value Go's ParseBool rejects is true, in the scale loop as in the HPA behavior.
        let map: BTreeMap<String, String> = [
            (ANNOTATION_PAUSED_SCALE_IN, "yes"),
            (ANNOTATION_PAUSED_SCALE_OUT, "enabled"),
            (ANNOTATION_FORCE_ACTIVATION, " true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let a = ScaleAnnotations::from_annotations(&map).unwrap();
        assert!(a.paused_scale_in && a.paused_scale_out && a.force_activation);
        for key in [
            ANNOTATION_PAUSED_SCALE_IN,
            ANNOTATION_PAUSED_SCALE_OUT,
            ANNOTATION_FORCE_ACTIVATION,
        ] {
            assert!(
                keda_api::annotations::bool_annotation(Some(&map), key),
                "{key}: the HPA builder reads it the same way"
            );
        }
    }
}
