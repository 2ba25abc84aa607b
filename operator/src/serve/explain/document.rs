//! The [`Explanation`] document: what `keda-rs explain -o json` prints and the operator's
//! endpoint serves. Its JSON field names are part of keda-rs' interface (docs/explain.md) and
//! only ever grow.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The version of the [`Explanation`] document.
pub const EXPLAIN_VERSION: &str = "v1";

/// The HPA's tolerance: a usage ratio within 10% of 1 changes nothing.
pub const HPA_TOLERANCE: f64 = 0.1;

/// In one word, where the object stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ObjectState {
    /// No poll yet.
    NotPolled,
    /// `paused` or `paused-replicas`.
    Paused,
    /// Some trigger (or the formula, or `force-activation`) is active.
    Active,
    /// A metric is served from `spec.fallback`.
    Fallback,
    /// A trigger cannot be read and nothing is active.
    Failing,
    /// Nothing is active; the cooldown runs before the scale-in.
    Cooldown,
    /// Nothing is active and the target is at zero (or the idle replica count).
    Idle,
    /// Nothing is active; the HPA holds the target at its minimum.
    Inactive,
}

impl ObjectState {
    /// The word the text output uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectState::NotPolled => "not polled",
            ObjectState::Paused => "paused",
            ObjectState::Active => "active",
            ObjectState::Fallback => "fallback",
            ObjectState::Failing => "failing",
            ObjectState::Cooldown => "cooldown",
            ObjectState::Idle => "idle",
            ObjectState::Inactive => "inactive",
        }
    }
}

/// One object's live state: the document `keda-rs explain -o json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// [`EXPLAIN_VERSION`].
    pub version: String,
    /// `ScaledObject`.
    pub kind: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The scale target (`apps/v1.Deployment team/orders`).
    pub target: String,
    /// Where the object stands.
    pub state: ObjectState,
    /// Why the replica count is what it is, in one line.
    pub reason: String,
    /// When the operator answered.
    pub now: Timestamp,
    /// When the last poll ran; `None` before the first.
    pub polled_at: Option<Timestamp>,
    /// `pollingInterval`.
    pub polling_interval_seconds: i32,
    /// Replica counts.
    pub replicas: Replicas,
    /// Pause annotations in force.
    pub pause: PauseState,
    /// Cooldown.
    pub cooldown: Cooldown,
    /// `spec.fallback` and whether it applies; `None` when not configured.
    pub fallback: Option<FallbackState>,
    /// One entry per External metric (cpu/memory triggers: one entry without a metric).
    pub triggers: Vec<TriggerState>,
    /// `spec.advanced.scalingModifiers`, when set.
    pub scaling_modifiers: Option<ModifiersState>,
    /// What the HPA computes from the metrics.
    pub hpa: HpaState,
    /// With shards (`--shards=auto`): which replica owns the object and which answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardState>,
}

/// Which operator replica owns the object (shards only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardState {
    /// The replica the ring of live shard Leases gives the object.
    pub owner: Option<String>,
    /// The replica that answered.
    pub answered_by: String,
    /// Live replicas, as the answering one sees them.
    pub members: usize,
    /// Whether the answering replica writes for the object now.
    pub owned_here: bool,
}

/// Replica counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replicas {
    /// The target's `spec.replicas` at the last poll.
    pub current: Option<i32>,
    /// `minReplicaCount`.
    pub min: i32,
    /// `maxReplicaCount`.
    pub max: i32,
    /// `idleReplicaCount`.
    pub idle: Option<i32>,
    /// The `/scale` write of the last poll (`from`, `to`, why).
    pub last_scale: Option<ScaleWriteState>,
}

/// A `/scale` write of the operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleWriteState {
    /// Replicas before.
    pub from: i32,
    /// Replicas written.
    pub to: i32,
    /// `activate`, `deactivate`, `raiseToMin` or `pausedReplicas`.
    pub kind: String,
    /// The write failed with this error.
    pub error: Option<String>,
}

/// The pause annotations in force.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseState {
    /// `autoscaling.keda.sh/paused` (or `paused-replicas`) is in force.
    pub paused: bool,
    /// `paused-replicas`.
    pub paused_replicas: Option<i32>,
    /// `paused-scale-in`.
    pub paused_scale_in: bool,
    /// `paused-scale-out`.
    pub paused_scale_out: bool,
    /// `force-activation`.
    pub force_activation: bool,
    /// An annotation that cannot be read (`paused-replicas: many`).
    pub error: Option<String>,
}

/// The cooldown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cooldown {
    /// `cooldownPeriod`.
    pub period_seconds: i64,
    /// `initialCooldownPeriod`.
    pub initial_period_seconds: i64,
    /// `lastActiveTime` as the loop knows it (may be newer than the status).
    pub last_active_time: Option<Timestamp>,
    /// Seconds left before a scale-in; `None` when no cooldown runs.
    pub remaining_seconds: Option<i64>,
}

/// `spec.fallback` and its state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FallbackState {
    /// `failureThreshold`.
    pub failure_threshold: i32,
    /// `replicas`.
    pub replicas: i32,
    /// `behavior`.
    pub behavior: String,
    /// KEDA's `HasValidFallback`: an invalid fallback never applies.
    pub valid: bool,
    /// Some metric is served from fallback now.
    pub active: bool,
}

/// The activation threshold of a trigger, as its metadata sets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Activation {
    /// The metadata key (`activationListLength`); `None`: not set, the scaler's default (0).
    pub parameter: Option<String>,
    /// Its value as written; `"0"` when not set.
    pub value: String,
}

/// One External metric of one trigger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerState {
    /// Position in `spec.triggers`.
    pub index: usize,
    /// `triggers[].name` (may be empty).
    pub name: String,
    /// `triggers[].type`.
    #[serde(rename = "type")]
    pub trigger_type: String,
    /// The External metric (`s0-redis-orders`); `None` for cpu/memory.
    pub metric: Option<String>,
    /// The value last served (the source's, or the fallback's); `None` when failing or unread.
    pub value: Option<f64>,
    /// `AverageValue` or `Value`.
    pub target_type: Option<String>,
    /// The HPA target.
    pub target: Option<f64>,
    /// The activation threshold.
    pub activation: Activation,
    /// Whether this metric makes the object active.
    pub active: bool,
    /// Consecutive failed reads (kept for objects with a fallback; else 0 or 1).
    pub failures: i32,
    /// The value is the fallback's.
    pub in_fallback: bool,
    /// The last read's error.
    pub last_error: Option<String>,
    /// What the HPA computes from this metric alone.
    pub hpa_replicas: Option<i32>,
    /// How (`ceil(12 / 5) = 3`).
    pub hpa_formula: Option<String>,
}

/// `scalingModifiers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModifiersState {
    /// The formula.
    pub formula: String,
    /// Its last value.
    pub value: Option<f64>,
    /// `target`.
    pub target: String,
    /// `activationTarget`.
    pub activation_target: Option<String>,
    /// `metricType`.
    pub metric_type: String,
}

/// What the HPA computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaState {
    /// The HPA's `minReplicas` (`max(minReplicaCount, 1)`).
    pub min_replicas: i32,
    /// The HPA's `maxReplicas`.
    pub max_replicas: i32,
    /// The largest per-metric count, within min and max; `None`: the HPA does not act (the
    /// target is at zero, or no metric has a value).
    pub desired_replicas: Option<i32>,
    /// How, in one line.
    pub summary: String,
}
