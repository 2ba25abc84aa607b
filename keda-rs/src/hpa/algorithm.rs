//! The Kubernetes HorizontalPodAutoscaler algorithm, as the kube-controller-manager runs it
//! (`pkg/controller/podautoscaler`), for External metrics: pure, no IO, `now` passed in.
//!
//! One sync of one HPA is [`sync`]:
//! 1. The target's replica count is 0 while `minReplicas` is not: scaling is disabled.
//! 2. Outside `[minReplicas, maxReplicas]`: back to the nearest bound.
//! 3. Otherwise every metric proposes a count ([`replicas_for_metric`], with the tolerance
//!    around a usage ratio of 1); the highest wins. When some metric cannot be read, the HPA
//!    still scales up on the others but never down.
//! 4. The proposal is normalized: with `behavior` by the stabilization windows (the lowest
//!    recommendation of the scale-up window, the highest of the scale-down window) and the
//!    scaling policies over their periods (`Pods`/`Percent`, `selectPolicy` Max, Min or
//!    Disabled); without `behavior` by the legacy rules (5-minute downscale window, scale-up at
//!    most to max(2 x current, 4)). Then `minReplicas`/`maxReplicas`.
//!
//! The memory of past recommendations and scale events is [`HpaState`], one per HPA.

use jiff::{SignedDuration, Timestamp};
use keda_api::num::f64_to_i32_saturating;

/// The default tolerance (`--horizontal-pod-autoscaler-tolerance`).
pub const DEFAULT_TOLERANCE: f64 = 0.1;

/// The default downscale stabilization window
/// (`--horizontal-pod-autoscaler-downscale-stabilization`).
pub const DEFAULT_DOWNSCALE_STABILIZATION_SECS: i32 = 300;

/// `now - window`: a time at or after it is at most `window` old (the earliest time there is
/// when the subtraction leaves jiff's range).
fn earliest(now: Timestamp, window: SignedDuration) -> Timestamp {
    now.checked_sub(window).unwrap_or(Timestamp::MIN)
}

/// What a metric's value is compared with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetricTarget {
    /// `target.type: Value`: the metric as a whole.
    Value(f64),
    /// `target.type: AverageValue`: the metric divided by the replica count (KEDA's default).
    AverageValue(f64),
}

/// The allowed deviation of the usage ratio from 1 before the HPA acts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// A ratio above `1 + up` scales up.
    pub up: f64,
    /// A ratio below `1 - down` scales down.
    pub down: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            up: DEFAULT_TOLERANCE,
            down: DEFAULT_TOLERANCE,
        }
    }
}

impl Tolerance {
    fn contains(&self, ratio: f64) -> bool {
        (1.0 - self.down) <= ratio && ratio <= (1.0 + self.up)
    }
}

/// The replica count one External metric asks for.
///
/// `current` is the target's current replica count, `ready` its ready pods (the `Value` target
/// scales the ratio by them, as Kubernetes does).
pub fn replicas_for_metric(
    current: i32,
    ready: i32,
    value: f64,
    target: MetricTarget,
    tolerance: Tolerance,
) -> i32 {
    match target {
        MetricTarget::AverageValue(per_pod) => {
            if per_pod <= 0.0 {
                return current;
            }
            let ratio = value / (per_pod * f64::from(current));
            if current > 0 && tolerance.contains(ratio) {
                current
            } else {
                f64_to_i32_saturating((value / per_pod).ceil())
            }
        }
        MetricTarget::Value(total) => {
            if total <= 0.0 {
                return current;
            }
            let ratio = value / total;
            if current == 0 {
                return f64_to_i32_saturating(ratio.ceil());
            }
            if tolerance.contains(ratio) {
                current
            } else {
                f64_to_i32_saturating((ratio * f64::from(ready)).ceil())
            }
        }
    }
}

/// `type` of a scaling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// A number of pods per period.
    Pods,
    /// A percentage of the replicas at the start of the period.
    Percent,
}

/// One scaling policy: at most `value` pods or percent per `period_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub kind: PolicyKind,
    pub value: i32,
    pub period_seconds: i32,
}

/// `selectPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// The policy allowing the largest change (the default).
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// The rules of one direction (`behavior.scaleUp` or `behavior.scaleDown`), defaults filled.
#[derive(Clone, Debug, PartialEq)]
pub struct Rules {
    pub stabilization_window_seconds: i32,
    pub select: Select,
    pub policies: Vec<Policy>,
    /// The tolerance of this direction (`tolerance`, Kubernetes 1.33+); `None`: the global one.
    pub tolerance: Option<f64>,
}

impl Rules {
    /// Kubernetes' scale-up default: no window; 4 pods or 100% per 15 s, whichever is more.
    pub fn default_up() -> Rules {
        Rules {
            stabilization_window_seconds: 0,
            select: Select::Max,
            policies: vec![
                Policy {
                    kind: PolicyKind::Pods,
                    value: 4,
                    period_seconds: 15,
                },
                Policy {
                    kind: PolicyKind::Percent,
                    value: 100,
                    period_seconds: 15,
                },
            ],
            tolerance: None,
        }
    }

    /// Kubernetes' scale-down default: a 300 s window; 100% per 15 s.
    pub fn default_down() -> Rules {
        Rules {
            stabilization_window_seconds: DEFAULT_DOWNSCALE_STABILIZATION_SECS,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyKind::Percent,
                value: 100,
                period_seconds: 15,
            }],
            tolerance: None,
        }
    }

    fn longest_period(&self) -> i32 {
        self.policies
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0)
    }
}

/// `spec.behavior`, defaults filled.
#[derive(Clone, Debug, PartialEq)]
pub struct Behavior {
    pub up: Rules,
    pub down: Rules,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            up: Rules::default_up(),
            down: Rules::default_down(),
        }
    }
}

/// What one sync needs from the HPA's spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// `minReplicas` (1 when unset).
    pub min_replicas: i32,
    pub max_replicas: i32,
    /// `None`: the legacy normalization (no `behavior` in the spec).
    pub behavior: Option<Behavior>,
    /// The controller's global tolerance.
    pub tolerance: f64,
    /// The controller's downscale window for the legacy normalization.
    pub downscale_stabilization_seconds: i32,
}

impl Spec {
    /// The tolerance the metrics are judged with.
    pub fn tolerance(&self) -> Tolerance {
        let global = self.tolerance;
        match &self.behavior {
            Some(b) => Tolerance {
                up: b.up.tolerance.unwrap_or(global),
                down: b.down.tolerance.unwrap_or(global),
            },
            None => Tolerance {
                up: global,
                down: global,
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Recommendation {
    at: Timestamp,
    replicas: i32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct ScaleEvent {
    at: Timestamp,
    change: i32,
}

/// What the controller remembers about one HPA between syncs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HpaState {
    recommendations: Vec<Recommendation>,
    up_events: Vec<ScaleEvent>,
    down_events: Vec<ScaleEvent>,
}

/// Why the count is what it is (the HPA's `ScalingLimited` reasons, and the disabled case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The target has 0 replicas and `minReplicas` is not 0: the HPA does nothing.
    ScalingDisabled,
    /// The metrics' count, within every limit.
    DesiredWithinRange,
    /// Held by a scale-up policy.
    ScaleUpLimit,
    /// Held by a scale-down policy.
    ScaleDownLimit,
    /// Held at `maxReplicas`.
    TooManyReplicas,
    /// Held at `minReplicas`.
    TooFewReplicas,
    /// No metric could be read, or some could not and the others ask to scale down.
    MetricsUnavailable,
}

impl Reason {
    /// The reason as the HPA's conditions spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ScalingDisabled => "ScalingDisabled",
            Reason::DesiredWithinRange => "DesiredWithinRange",
            Reason::ScaleUpLimit => "ScaleUpLimit",
            Reason::ScaleDownLimit => "ScaleDownLimit",
            Reason::TooManyReplicas => "TooManyReplicas",
            Reason::TooFewReplicas => "TooFewReplicas",
            Reason::MetricsUnavailable => "FailedGetExternalMetric",
        }
    }
}

/// The outcome of one sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The count the target should have; equal to the current one when nothing changes.
    pub desired: i32,
    /// The highest count the metrics asked for, before stabilization and limits (`None` when
    /// the metrics were not consulted).
    pub from_metrics: Option<i32>,
    pub reason: Reason,
}

impl Outcome {
    /// Whether the target's `/scale` must be written.
    pub fn rescale(&self, current: i32) -> bool {
        self.desired != current && self.reason != Reason::ScalingDisabled
    }
}

/// One metric's proposal: `Some(count)`, or `None` when it could not be read.
pub type Proposal = Option<i32>;

/// One sync of the HPA at `now`.
///
/// `spec_replicas` is the target's `/scale` `spec.replicas`, `current` its `status.replicas`;
/// `proposals` one per metric ([`replicas_for_metric`]). A returned count that differs from
/// `current` must be written to `/scale` and then passed to [`HpaState::record_scale`].
pub fn sync(
    spec: &Spec,
    state: &mut HpaState,
    spec_replicas: i32,
    current: i32,
    proposals: &[Proposal],
    now: Timestamp,
) -> Outcome {
    let min = spec.min_replicas;
    if spec_replicas == 0 && min != 0 {
        return Outcome {
            desired: 0,
            from_metrics: None,
            reason: Reason::ScalingDisabled,
        };
    }
    if current > spec.max_replicas {
        return Outcome {
            desired: spec.max_replicas,
            from_metrics: None,
            reason: Reason::TooManyReplicas,
        };
    }
    if current < min {
        return Outcome {
            desired: min,
            from_metrics: None,
            reason: Reason::TooFewReplicas,
        };
    }
    let invalid = proposals.iter().filter(|p| p.is_none()).count();
    let from_metrics = proposals.iter().flatten().copied().max().unwrap_or(0);
    if proposals.is_empty()
        || invalid == proposals.len()
        || (invalid > 0 && from_metrics < spec_replicas)
    {
        return Outcome {
            desired: current,
            from_metrics: None,
            reason: Reason::MetricsUnavailable,
        };
    }
    let (desired, reason) = match &spec.behavior {
        Some(behavior) => state.normalize_with_behavior(behavior, spec, current, from_metrics, now),
        None => state.normalize_legacy(spec, current, from_metrics, now),
    };
    Outcome {
        desired,
        from_metrics: Some(from_metrics),
        reason,
    }
}

impl HpaState {
    /// Records a write of `/scale` from `from` to `to` at `now` (only with `behavior`, as
    /// Kubernetes does: the legacy rules keep no events).
    pub fn record_scale(
        &mut self,
        behavior: Option<&Behavior>,
        from: i32,
        to: i32,
        now: Timestamp,
    ) {
        let Some(behavior) = behavior else { return };
        let (events, rules, change) = if to > from {
            (&mut self.up_events, &behavior.up, to.saturating_sub(from))
        } else if to < from {
            (
                &mut self.down_events,
                &behavior.down,
                from.saturating_sub(to),
            )
        } else {
            return;
        };
        let keep = seconds(rules.longest_period());
        let oldest = earliest(now, keep);
        events.retain(|e| e.at >= oldest);
        events.push(ScaleEvent { at: now, change });
    }

    /// Stabilization windows, then the policies' rates, then min/max.
    fn normalize_with_behavior(
        &mut self,
        behavior: &Behavior,
        spec: &Spec,
        current: i32,
        desired: i32,
        now: Timestamp,
    ) -> (i32, Reason) {
        let up_cutoff = seconds(behavior.up.stabilization_window_seconds);
        let down_cutoff = seconds(behavior.down.stabilization_window_seconds);
        let mut up = desired;
        let mut down = desired;
        // `now - at < window` as `at > now - window`: one subtraction per sync, not per
        // recommendation (a replay runs millions of syncs).
        let (up_after, down_after) = (earliest(now, up_cutoff), earliest(now, down_cutoff));
        for rec in &self.recommendations {
            if rec.at > up_after {
                up = up.min(rec.replicas);
            }
            if rec.at > down_after {
                down = down.max(rec.replicas);
            }
        }
        let mut stabilized = current;
        if stabilized < up {
            stabilized = up;
        }
        if stabilized > down {
            stabilized = down;
        }
        let after = earliest(now, up_cutoff.max(down_cutoff));
        self.recommendations.retain(|r| r.at > after);
        self.recommendations.push(Recommendation {
            at: now,
            replicas: desired,
        });

        if stabilized > current {
            let limit = self.scale_up_limit(&behavior.up, current, now).max(current);
            let (allowed, reason) = if spec.max_replicas > limit {
                (limit, Reason::ScaleUpLimit)
            } else {
                (spec.max_replicas, Reason::TooManyReplicas)
            };
            if stabilized > allowed {
                return (allowed, reason);
            }
        } else if stabilized < current {
            let limit = self
                .scale_down_limit(&behavior.down, current, now)
                .min(current);
            let (allowed, reason) = if spec.min_replicas < limit {
                (limit, Reason::ScaleDownLimit)
            } else {
                (spec.min_replicas, Reason::TooFewReplicas)
            };
            if stabilized < allowed {
                return (allowed, reason);
            }
        }
        (stabilized, Reason::DesiredWithinRange)
    }

    /// Pods added and removed within the last `period_seconds`.
    fn changes_within(&self, period_seconds: i32, now: Timestamp) -> (i32, i32) {
        let period = seconds(period_seconds);
        let sum = |events: &[ScaleEvent]| {
            events
                .iter()
                .filter(|e| now.duration_since(e.at) < period)
                .fold(0i32, |acc, e| acc.saturating_add(e.change))
        };
        (sum(&self.up_events), sum(&self.down_events))
    }

    fn period_start(&self, current: i32, period_seconds: i32, now: Timestamp) -> i32 {
        let (added, removed) = self.changes_within(period_seconds, now);
        current.saturating_sub(added).saturating_add(removed)
    }

    fn scale_up_limit(&self, rules: &Rules, current: i32, now: Timestamp) -> i32 {
        let pick: fn(i32, i32) -> i32 = match rules.select {
            Select::Disabled => return current,
            Select::Min => i32::min,
            Select::Max => i32::max,
        };
        let mut result = if rules.select == Select::Min {
            i32::MAX
        } else {
            i32::MIN
        };
        for policy in &rules.policies {
            let start = self.period_start(current, policy.period_seconds, now);
            let proposed = match policy.kind {
                PolicyKind::Pods => start.saturating_add(policy.value),
                // Rounded up, or a small Percent could never add a pod.
                PolicyKind::Percent => f64_to_i32_saturating(
                    (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil(),
                ),
            };
            result = pick(result, proposed);
        }
        if rules.policies.is_empty() {
            current
        } else {
            result
        }
    }

    fn scale_down_limit(&self, rules: &Rules, current: i32, now: Timestamp) -> i32 {
        let pick: fn(i32, i32) -> i32 = match rules.select {
            Select::Disabled => return current,
            // For scaling down the smallest change is the highest count.
            Select::Min => i32::max,
            Select::Max => i32::min,
        };
        let mut result = if rules.select == Select::Min {
            i32::MIN
        } else {
            i32::MAX
        };
        for policy in &rules.policies {
            let start = self.period_start(current, policy.period_seconds, now);
            let proposed = match policy.kind {
                PolicyKind::Pods => start.saturating_sub(policy.value),
                // Truncated, as Kubernetes' int32 conversion does.
                PolicyKind::Percent => f64_to_i32_saturating(
                    (f64::from(start) * (1.0 - f64::from(policy.value) / 100.0)).trunc(),
                ),
            };
            result = pick(result, proposed);
        }
        if rules.policies.is_empty() {
            current
        } else {
            result
        }
    }

    /// Without `behavior`: the highest recommendation of the downscale window, then at most
    /// max(2 x current, 4) and within min/max.
    fn normalize_legacy(
        &mut self,
        spec: &Spec,
        current: i32,
        desired: i32,
        now: Timestamp,
    ) -> (i32, Reason) {
        // Unlike the behavior windows, a recommendation exactly `window` old still counts here
        // (Kubernetes drops only those before the cutoff).
        let oldest = earliest(now, seconds(spec.downscale_stabilization_seconds));
        self.recommendations.retain(|r| r.at >= oldest);
        let stabilized = self
            .recommendations
            .iter()
            .map(|r| r.replicas)
            .fold(desired, i32::max);
        self.recommendations.push(Recommendation {
            at: now,
            replicas: desired,
        });
        let scale_up_limit = current.saturating_mul(2).max(4);
        let (allowed, limited) = if spec.max_replicas > scale_up_limit {
            (scale_up_limit, Reason::ScaleUpLimit)
        } else {
            (spec.max_replicas, Reason::TooManyReplicas)
        };
        if stabilized < spec.min_replicas {
            (spec.min_replicas, Reason::TooFewReplicas)
        } else if stabilized > allowed {
            (allowed, limited)
        } else {
            (stabilized, Reason::DesiredWithinRange)
        }
    }
}

fn seconds(s: i32) -> SignedDuration {
    SignedDuration::from_secs(i64::from(s.max(0)))
}

#[cfg(test)]
mod tests;
