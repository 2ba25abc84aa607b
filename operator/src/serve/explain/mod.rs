//! `keda-rs explain`: why a ScaledObject has the replicas it has, from the scale loop's memory.
//!
//! Every poll of a scale loop leaves a [`PollSnapshot`]: what it observed (replicas, time,
//! `lastActiveTime`), what each trigger read, the fallback health, and what
//! [`keda_decide::scale::decide`] made of it. [`scaled_object`] reads that snapshot against the
//! object as it is now (annotations, spec) into an [`Explanation`]: the document the operator's
//! explain endpoint ([`server`]) serves as JSON and the CLI prints with [`render`]. The field
//! names of the JSON are part of keda-rs' interface (docs/explain.md) and only ever grow.
//!
//! The HPA's part is computed here, not read from the HPA: the same per-metric formula the
//! HorizontalPodAutoscaler applies to an External metric (10% tolerance, `Value` or
//! `AverageValue`), before its `behavior` and stabilization windows.

pub mod auth;
pub mod client;
pub mod render;
pub mod review_cache;
pub mod server;

use jiff::{SignedDuration, Timestamp};
use keda_api::ScaledObject;
use kube::ResourceExt;

use crate::scaled_object::settings::fallback_spec;
pub use crate::scaled_object::snapshot::{LastPoll, PollSnapshot, TriggerTargets};
use keda_decide::fallback::{FallbackSpec, MetricTargetType};
use keda_decide::formula::COMPOSITE_METRIC_NAME;
use keda_decide::scale::{
    ANNOTATION_FORCE_ACTIVATION, ANNOTATION_PAUSED, ANNOTATION_PAUSED_REPLICAS,
    ANNOTATION_PAUSED_SCALE_IN, ANNOTATION_PAUSED_SCALE_OUT, ConditionStatus, ConditionType,
    Observed, Pause, REASON_SCALER_COOLDOWN, ScaleAnnotations, ScaleWriteKind, cooldown_reference,
};

mod document;

pub use document::{
    Activation, Cooldown, EXPLAIN_VERSION, Explanation, FallbackState, HPA_TOLERANCE, HpaState,
    ModifiersState, ObjectState, PauseState, Replicas, ScaleWriteState, ShardState, TriggerState,
};

/// What one External metric makes the HPA compute, given the current replicas:
/// `(replicas, formula)`.
///
/// - `AverageValue`: the usage ratio is `value / (target x current)`; within 10% of 1 the count
///   stays, else `ceil(value / target)`.
/// - `Value`: the ratio is `value / target`; within 10% the count stays, else
///   `ceil(ratio x current)`.
pub fn hpa_replicas(
    kind: MetricTargetType,
    value: f64,
    target: f64,
    current: i32,
) -> Option<(i32, String)> {
    if target <= 0.0 || !value.is_finite() || current <= 0 {
        return None;
    }
    let current_f = f64::from(current);
    let (ratio, raw, formula) = match kind {
        MetricTargetType::AverageValue => (
            value / (target * current_f),
            (value / target).ceil(),
            format!("ceil({} / {})", number(value), number(target)),
        ),
        MetricTargetType::Value => {
            let ratio = value / target;
            (
                ratio,
                (ratio * current_f).ceil(),
                format!("ceil({current} x {} / {})", number(value), number(target)),
            )
        }
    };
    if (1.0 - ratio).abs() <= HPA_TOLERANCE {
        return Some((
            current,
            format!(
                "usage ratio {:.2} is within the 10% tolerance: stays {current}",
                ratio
            ),
        ));
    }
    let replicas = keda_api::num::f64_to_i32_saturating(raw);
    Some((replicas, format!("{formula} = {replicas}")))
}

/// `1 replica`, `3 replicas`.
pub fn count(replicas: i32) -> String {
    if replicas == 1 {
        "1 replica".to_string()
    } else {
        format!("{replicas} replicas")
    }
}

/// A number as people write it: `12`, `0.5`.
pub fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A duration as `kubectl` prints ages: `45s`, `4m12s`, `2h5m`.
pub fn human_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        let (m, r) = (s / 60, s % 60);
        if r == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{r}s")
        }
    } else {
        let (h, m) = (s / 3600, (s % 3600) / 60);
        if m == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{m}m")
        }
    }
}

fn metric_type_str(kind: MetricTargetType) -> &'static str {
    match kind {
        MetricTargetType::AverageValue => "AverageValue",
        MetricTargetType::Value => "Value",
    }
}

fn pause_state(so: &ScaledObject) -> (PauseState, ScaleAnnotations) {
    match ScaleAnnotations::from_annotations(so.annotations()) {
        Ok(a) => (
            PauseState {
                paused: a.pause != Pause::No,
                paused_replicas: match a.pause {
                    Pause::AtReplicas(n) => Some(n),
                    _ => None,
                },
                paused_scale_in: a.paused_scale_in,
                paused_scale_out: a.paused_scale_out,
                force_activation: a.force_activation,
                error: None,
            },
            a,
        ),
        Err(e) => (
            PauseState {
                error: Some(e.to_string()),
                ..PauseState::default()
            },
            ScaleAnnotations::default(),
        ),
    }
}

/// The activation threshold of trigger `index` of `so`: its `activation*` metadata key.
fn activation(so: &ScaledObject, index: usize) -> Activation {
    let found = so.spec.triggers.get(index).and_then(|t| {
        t.metadata
            .iter()
            .find(|(k, _)| k.starts_with("activation"))
            .map(|(k, v)| (k.clone(), v.clone()))
    });
    match found {
        Some((k, v)) => Activation {
            parameter: Some(k),
            value: v,
        },
        None => Activation {
            parameter: None,
            value: "0".to_string(),
        },
    }
}

fn trigger_label(t: &TriggerState) -> String {
    if t.name.is_empty() {
        format!("trigger {} ({})", t.index, t.trigger_type)
    } else {
        format!("trigger {} ({} {:?})", t.index, t.trigger_type, t.name)
    }
}

/// The [`Explanation`] of what a scale loop knows about one object ([`LastPoll`]); `None`
/// when the loop does not know the object.
pub fn of_last_poll(last: Option<LastPoll>) -> Option<Explanation> {
    let last = last?;
    Some(scaled_object(
        &last.so,
        last.snapshot.as_deref(),
        last.now,
        last.operator_started_at,
    ))
}

/// The explanation of `so` from its loop's last poll (`None` before the first one) at `now`.
pub fn scaled_object(
    so: &ScaledObject,
    snapshot: Option<&PollSnapshot>,
    now: Timestamp,
    operator_started_at: Timestamp,
) -> Explanation {
    let spec = &so.spec;
    let namespace = so.namespace().unwrap_or_default();
    let (pause, annotations) = pause_state(so);
    let fallback = fallback_spec(so);
    let modifiers_target = spec
        .scaling_modifiers()
        .and_then(|m| m.target.as_deref())
        .and_then(|t| t.trim().parse::<f64>().ok());
    let fallback_valid = fallback.is_some_and(|f| f.is_valid(modifiers_target));
    let current = snapshot.map(|s| s.observed.current_replicas);
    let triggers = trigger_states(so, snapshot, fallback.filter(|_| fallback_valid));
    let fallback_active = triggers.iter().any(|t| t.in_fallback);
    let scaling_modifiers = spec.scaling_modifiers().map(|m| ModifiersState {
        formula: m.formula.clone().unwrap_or_default(),
        value: snapshot.and_then(|s| s.result.composite),
        target: m.target.clone().unwrap_or_default(),
        activation_target: m.activation_target.clone(),
        metric_type: m
            .metric_type
            .clone()
            .unwrap_or_else(|| "AverageValue".to_string()),
    });
    let hpa = hpa_state(so, snapshot, &triggers);
    let cooldown = cooldown_state(so, snapshot, now, operator_started_at);
    let replicas = Replicas {
        current,
        min: spec.min_replica_count(),
        max: spec.max_replica_count(),
        idle: spec.idle_replica_count,
        last_scale: snapshot.and_then(|s| {
            s.decision.scale.as_ref().map(|w| ScaleWriteState {
                from: w.from,
                to: w.to,
                kind: match w.kind {
                    ScaleWriteKind::Activate => "activate",
                    ScaleWriteKind::Deactivate => "deactivate",
                    ScaleWriteKind::RaiseToMin => "raiseToMin",
                    ScaleWriteKind::PausedReplicas => "pausedReplicas",
                }
                .to_string(),
                error: s.scale_error.clone(),
            })
        }),
    };
    let fallback_state = fallback.map(|f: FallbackSpec| FallbackState {
        failure_threshold: f.failure_threshold,
        replicas: f.replicas,
        behavior: serde_json::to_value(f.behavior)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        valid: fallback_valid,
        active: fallback_active,
    });
    let mut explanation = Explanation {
        version: EXPLAIN_VERSION.to_string(),
        kind: "ScaledObject".to_string(),
        namespace: namespace.clone(),
        name: so.name_any(),
        target: snapshot.map_or_else(
            || {
                format!(
                    "{} {namespace}/{}",
                    spec.scale_target_ref
                        .kind
                        .as_deref()
                        .unwrap_or("Deployment"),
                    spec.scale_target_ref.name
                )
            },
            |s| s.settings.target.to_string(),
        ),
        state: ObjectState::NotPolled,
        reason: String::new(),
        now,
        polled_at: snapshot.map(|s| s.observed.now),
        polling_interval_seconds: spec.polling_interval(),
        replicas,
        pause,
        cooldown,
        fallback: fallback_state,
        triggers,
        scaling_modifiers,
        hpa,
        shard: None,
    };
    let (state, reason) = why(&explanation, snapshot, annotations);
    explanation.state = state;
    explanation.reason = reason;
    if state != ObjectState::Cooldown {
        explanation.cooldown.remaining_seconds = None;
    }
    explanation
}

fn trigger_states(
    so: &ScaledObject,
    snapshot: Option<&PollSnapshot>,
    valid_fallback: Option<FallbackSpec>,
) -> Vec<TriggerState> {
    let mut out = Vec::new();
    for (index, trigger) in so.spec.triggers.iter().enumerate() {
        let base = TriggerState {
            index,
            name: trigger.name.clone(),
            trigger_type: trigger.type_.clone(),
            metric: None,
            value: None,
            target_type: None,
            target: None,
            activation: activation(so, index),
            active: false,
            failures: 0,
            in_fallback: false,
            last_error: None,
            hpa_replicas: None,
            hpa_formula: None,
        };
        let targets = snapshot.and_then(|s| s.triggers.iter().find(|t| t.index == index));
        let metrics = targets.map(|t| t.metrics.as_slice()).unwrap_or_default();
        if metrics.is_empty() {
            out.push(base);
            continue;
        }
        for (metric, kind, target) in metrics {
            let mut t = TriggerState {
                metric: Some(metric.clone()),
                target_type: Some(metric_type_str(*kind).to_string()),
                target: Some(*target),
                ..base.clone()
            };
            if let Some(s) = snapshot {
                if let Some(r) = s.result.readings.get(metric) {
                    t.value = r.value;
                    t.active = r.active;
                    t.last_error = r.error.clone();
                }
                if let Some(h) = s.result.health.get(metric) {
                    t.failures = h.number_of_failures;
                    t.in_fallback = valid_fallback.is_some_and(|f| f.exceeded_by(h));
                    if t.in_fallback && t.last_error.is_none() {
                        t.last_error = Some(format!(
                            "failed {} times in a row; serving the fallback value",
                            h.number_of_failures
                        ));
                    }
                } else if t.last_error.is_some() {
                    t.failures = 1;
                }
                if s.triggers.iter().all(|t| t.metrics.len() <= 1)
                    && let (Some(v), true) = (t.value, metric != COMPOSITE_METRIC_NAME)
                    && so.spec.scaling_modifiers().is_none()
                    && let Some((n, formula)) =
                        hpa_replicas(*kind, v, *target, s.observed.current_replicas)
                {
                    t.hpa_replicas = Some(n);
                    t.hpa_formula = Some(formula);
                }
            }
            out.push(t);
        }
    }
    out
}

fn hpa_state(
    so: &ScaledObject,
    snapshot: Option<&PollSnapshot>,
    triggers: &[TriggerState],
) -> HpaState {
    let min = so.spec.min_replica_count().max(1);
    let max = so.spec.max_replica_count();
    let mut out = HpaState {
        min_replicas: min,
        max_replicas: max,
        desired_replicas: None,
        summary: String::new(),
    };
    let Some(s) = snapshot else {
        out.summary = "not computed: no poll yet".to_string();
        return out;
    };
    let current = s.observed.current_replicas;
    if current == 0 {
        out.summary = "the HPA does not act while the target is at 0 replicas".to_string();
        return out;
    }
    // With scalingModifiers the HPA sees one composite metric.
    let per_metric: Vec<(String, i32)> = if let Some(m) = so.spec.scaling_modifiers() {
        let kind = match m.metric_type.as_deref() {
            Some("Value") => MetricTargetType::Value,
            _ => MetricTargetType::AverageValue,
        };
        let target = m
            .target
            .as_deref()
            .and_then(|t| t.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        s.result
            .composite
            .and_then(|v| hpa_replicas(kind, v, target, current))
            .map(|(n, f)| vec![(format!("{COMPOSITE_METRIC_NAME}: {f}"), n)])
            .unwrap_or_default()
    } else {
        triggers
            .iter()
            .filter_map(|t| {
                Some((
                    format!("{}: {}", t.metric.as_ref()?, t.hpa_formula.as_ref()?),
                    t.hpa_replicas?,
                ))
            })
            .collect()
    };
    let Some(largest) = per_metric.iter().map(|(_, n)| *n).max() else {
        out.summary = "no External metric has a value: the HPA keeps the current count".to_string();
        return out;
    };
    let desired = largest.clamp(min, max.max(min));
    out.desired_replicas = Some(desired);
    let bound = if desired != largest {
        format!(", bounded to {desired} by min {min} / max {max}")
    } else {
        String::new()
    };
    out.summary = format!(
        "{}: the largest of the metrics ({largest}){bound}, before the HPA's behavior and stabilization",
        count(desired)
    );
    out
}

fn cooldown_state(
    so: &ScaledObject,
    snapshot: Option<&PollSnapshot>,
    now: Timestamp,
    operator_started_at: Timestamp,
) -> Cooldown {
    let spec = &so.spec;
    let mut out = Cooldown {
        period_seconds: i64::from(spec.cooldown_period()),
        initial_period_seconds: i64::from(spec.initial_cooldown_period()),
        last_active_time: snapshot.and_then(|s| s.decision.last_active_time),
        remaining_seconds: None,
    };
    if let Some(s) = snapshot {
        let observed = Observed {
            last_active_time: s.decision.last_active_time,
            operator_started_at,
            now,
            ..s.observed
        };
        let (reference, period) = cooldown_reference(&s.settings, &observed);
        let left = period - now.duration_since(reference);
        out.remaining_seconds = Some(left.as_secs().max(0));
        // A whole second still to go shows as such, not as 0.
        if left > SignedDuration::ZERO && left.as_secs() == 0 {
            out.remaining_seconds = Some(1);
        }
    }
    out
}

/// The state and the one-line reason.
fn why(
    e: &Explanation,
    snapshot: Option<&PollSnapshot>,
    annotations: ScaleAnnotations,
) -> (ObjectState, String) {
    let current = e.replicas.current;
    if let Some(error) = &e.pause.error {
        return (ObjectState::Failing, format!("not scaling: {error}"));
    }
    match annotations.pause {
        Pause::AtReplicas(n) => {
            return (
                ObjectState::Paused,
                format!(
                    "paused: annotation {ANNOTATION_PAUSED_REPLICAS} holds the target at {}",
                    count(n)
                ),
            );
        }
        Pause::Paused => {
            let at = current.map_or_else(String::new, |c| format!(" at {c}"));
            return (
                ObjectState::Paused,
                format!(
                    "paused: annotation {ANNOTATION_PAUSED} is set; replicas stay{at} and the HPA is removed"
                ),
            );
        }
        Pause::No => {}
    }
    let Some(s) = snapshot else {
        return (
            ObjectState::NotPolled,
            "not polled yet: the scale loop has not read the triggers".to_string(),
        );
    };
    let current = s.observed.current_replicas;
    let failing: Vec<&TriggerState> = e
        .triggers
        .iter()
        .filter(|t| t.last_error.is_some() && !t.in_fallback)
        .collect();
    let errors = failing
        .iter()
        .map(|t| {
            format!(
                "{} cannot be read ({})",
                trigger_label(t),
                t.last_error.as_deref().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    if let Some(t) = e.triggers.iter().find(|t| t.in_fallback)
        && let Some(f) = &e.fallback
    {
        let replicas = keda_decide::fallback::FallbackSpec {
            failure_threshold: f.failure_threshold,
            replicas: f.replicas,
            behavior: s.settings.fallback.map(|f| f.behavior).unwrap_or_default(),
        }
        .replicas_for(current)
        .map_or_else(
            || "the formula decides".to_string(),
            |n| format!("the HPA is served a value for {}", count(n)),
        );
        return (
            ObjectState::Fallback,
            format!(
                "fallback: {} failed {} times (more than failureThreshold {}); {replicas}",
                trigger_label(t),
                t.failures,
                f.failure_threshold
            ),
        );
    }
    let active = s
        .decision
        .condition(ConditionType::Active)
        .is_some_and(|c| c.status == ConditionStatus::True);
    let hpa = e.hpa.desired_replicas.map_or_else(String::new, |d| {
        format!(
            "; the HPA computes {} (min {}, max {})",
            count(d),
            e.hpa.min_replicas,
            e.hpa.max_replicas
        )
    });
    if active {
        let cause = if annotations.force_activation {
            format!("forced by annotation {ANNOTATION_FORCE_ACTIVATION}")
        } else if let Some(m) = &e.scaling_modifiers {
            format!(
                "the scalingModifiers formula is {} (above activationTarget {})",
                m.value.map_or_else(|| "unset".to_string(), number),
                m.activation_target.as_deref().unwrap_or("0")
            )
        } else {
            e.triggers
                .iter()
                .filter(|t| t.active)
                .map(|t| {
                    format!(
                        "{} is at {} (above activation {})",
                        trigger_label(t),
                        t.value.map_or_else(|| "?".to_string(), number),
                        t.activation.value
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut line = format!("active: {cause}");
        if current == 0 && annotations.paused_scale_out {
            line.push_str(&format!(
                "; scale-out from 0 is paused by annotation {ANNOTATION_PAUSED_SCALE_OUT}"
            ));
        } else if let Some(w) = &e.replicas.last_scale {
            line.push_str(&format!("; scaled from {} to {}", w.from, w.to));
            if let Some(err) = &w.error {
                line.push_str(&format!(" failed ({err})"));
            }
        }
        line.push_str(&hpa);
        if !failing.is_empty() {
            line.push_str(&format!("; but {errors}"));
        }
        return (ObjectState::Active, line);
    }
    if !failing.is_empty() {
        let rest = match s.settings.fallback {
            Some(f) if f.replicas != 0 => format!(
                "the fallback applies after more than {} failures",
                f.failure_threshold
            ),
            _ => format!("replicas stay at {current} until it answers"),
        };
        return (ObjectState::Failing, format!("failing: {errors}; {rest}"));
    }
    let scale_in_to = match e.replicas.idle {
        Some(idle) => format!("the idle replica count {idle}"),
        None => e.replicas.min.to_string(),
    };
    let cooling = s
        .decision
        .condition(ConditionType::Active)
        .is_some_and(|c| c.reason == REASON_SCALER_COOLDOWN);
    if cooling {
        let left = human_duration(e.cooldown.remaining_seconds.unwrap_or(0));
        return (
            ObjectState::Cooldown,
            format!(
                "idle: all triggers inactive, cooldown {left} left before scale to {scale_in_to}"
            ),
        );
    }
    if annotations.paused_scale_in && (current > e.replicas.idle.unwrap_or(e.replicas.min)) {
        return (
            ObjectState::Inactive,
            format!(
                "inactive: all triggers inactive; scale-in is paused by annotation {ANNOTATION_PAUSED_SCALE_IN}, replicas stay at {current}"
            ),
        );
    }
    if let Some(w) = &e.replicas.last_scale {
        let failed = w
            .error
            .as_ref()
            .map_or_else(String::new, |err| format!(" failed ({err})"));
        return (
            if w.to == 0 || Some(w.to) == e.replicas.idle {
                ObjectState::Idle
            } else {
                ObjectState::Inactive
            },
            format!(
                "idle: all triggers inactive; scaled from {} to {}{failed}",
                w.from, w.to
            ),
        );
    }
    if current == 0 || Some(current) == e.replicas.idle {
        return (
            ObjectState::Idle,
            format!(
                "idle: all triggers inactive; the target is at {}",
                count(current)
            ),
        );
    }
    (
        ObjectState::Inactive,
        format!(
            "inactive: all triggers inactive; minReplicaCount {} keeps the target scaled{hpa}",
            e.replicas.min
        ),
    )
}

#[cfg(test)]
mod tests;
