//! The replay: the operator's poll and the HPA's sync over simulated time.

use jiff::{SignedDuration, Timestamp};
// The operator's pure decision code: every use goes through this one block.
use keda_decide::fallback::{self, FallbackContext, MetricHealth, MetricOutcome, MetricTargetType};
use keda_decide::formula::{MODIFIERS_TRIGGER, composite_is_active, composite_value};
use keda_decide::scale::{Observed, Pause, TriggerSummary, decide};

use super::{Point, SimObject, Summary, Timeline};
use crate::dev::chart::Sample;
use crate::hpa::HpaSettings;
use crate::hpa::algorithm::{self, HpaState, MetricTarget, Spec, Tolerance};
use crate::hpa::controller::behavior_of;

/// Replays `points` (sorted by time) through the operator's decision and the HPA.
pub fn simulate(
    object: &SimObject,
    points: &[Point],
    hpa: &HpaSettings,
    initial_replicas: i32,
) -> Timeline {
    let Some(first) = points.first() else {
        return Timeline {
            changes: Vec::new(),
            samples: Vec::new(),
            summary: Summary::default(),
        };
    };
    let start = first.time;
    let end = points.last().map_or(start, |p| p.time);
    let sync = SignedDuration::try_from(hpa.sync_period)
        .unwrap_or(SignedDuration::from_secs(15))
        .max(SignedDuration::from_secs(1));
    let spec = Spec {
        min_replicas: object.min_replicas,
        max_replicas: object.max_replicas,
        behavior: object
            .behavior
            .as_ref()
            .map(|b| behavior_of(b, hpa.downscale_stabilization_seconds)),
        tolerance: hpa.tolerance,
        downscale_stabilization_seconds: hpa.downscale_stabilization_seconds,
    };
    let tolerance = spec.tolerance();
    let mut state = HpaState::default();
    let mut replicas = initial_replicas;
    let mut last_active = None;
    let mut values: Vec<Option<f64>> = vec![None; object.triggers.len()];
    let mut health: Vec<Option<MetricHealth>> = vec![None; object.triggers.len()];
    // KEDA deletes the HPA of a paused object; `decide` holds it at `paused-replicas`.
    let paused = object.settings.annotations.pause != Pause::No;
    let mut next_point = 0;
    let mut next_poll = start;
    let mut next_sync = start;
    let mut changes = vec![(start, replicas)];
    // One chart sample per sync: a year of 15 s syncs is 2 M of them.
    let syncs = end.duration_since(start).as_secs() / sync.as_secs().max(1) + 1;
    let mut samples = Vec::with_capacity(usize::try_from(syncs).unwrap_or(0));
    let mut summary = Summary::default();
    let mut active_since: Option<Timestamp> = None;
    let mut above_since: Option<Timestamp> = None;
    let secs = |a: Timestamp, b: Timestamp| b.duration_since(a).as_secs();
    loop {
        let now = next_poll.min(next_sync);
        if now > end {
            break;
        }
        while next_point < points.len() && points[next_point].time <= now {
            let p = points[next_point];
            values[p.trigger] = p.value;
            next_point += 1;
        }
        let before = replicas;
        if now == next_poll {
            let reads = read_all(object, &values, &mut health, replicas);
            let summary_now = trigger_summary(object, &values, &reads);
            if summary_now.active && replicas == 0 && active_since.is_none() {
                active_since = Some(now);
            }
            let d = decide(
                &object.settings,
                &Observed {
                    current_replicas: replicas,
                    last_active_time: last_active,
                    created_at: start,
                    operator_started_at: start,
                    now,
                },
                &summary_now,
            );
            last_active = d.last_active_time;
            if let Some(w) = d.scale {
                replicas = w.to;
            }
            next_poll += object.polling_interval;
        }
        if now == next_sync && !paused {
            let reads = read_all(object, &values, &mut health, replicas);
            let proposals: Vec<algorithm::Proposal> = match &object.modifiers {
                None => object
                    .triggers
                    .iter()
                    .zip(&reads)
                    .map(|(t, r)| {
                        served(r).map(|v| {
                            algorithm::replicas_for_metric(
                                replicas, replicas, v, t.target, tolerance,
                            )
                        })
                    })
                    .collect(),
                Some((m, _)) => {
                    let target = match m.metric_type {
                        MetricTargetType::AverageValue => MetricTarget::AverageValue(m.target),
                        MetricTargetType::Value => MetricTarget::Value(m.target),
                    };
                    vec![composite(object, &reads, &mut Vec::new()).map(|v| {
                        algorithm::replicas_for_metric(replicas, replicas, v, target, tolerance)
                    })]
                }
            };
            let out = algorithm::sync(&spec, &mut state, replicas, replicas, &proposals, now);
            if out.rescale(replicas) {
                state.record_scale(spec.behavior.as_ref(), replicas, out.desired, now);
                replicas = out.desired;
            }
        }
        if now == next_sync {
            let (value, target) = first_trigger_view(object, &values);
            let above = match (value, object.triggers.first()) {
                (Some(v), Some(t)) => usage_ratio(v, t.target, replicas, tolerance) > 1.0,
                _ => false,
            };
            match (above, above_since) {
                (true, None) => above_since = Some(now),
                (false, Some(since)) => {
                    summary.longest_above_target_seconds =
                        summary.longest_above_target_seconds.max(secs(since, now));
                    above_since = None;
                }
                _ => {}
            }
            samples.push(Sample {
                t: now.duration_since(start).as_secs_f64(),
                replicas,
                value,
                target,
                activation: object.triggers.first().map_or(0.0, |t| t.activation),
            });
            next_sync += sync;
        }
        if replicas != before {
            if replicas > before {
                summary.scale_ups += 1;
            } else {
                summary.scale_downs += 1;
            }
            if before == 0
                && let Some(since) = active_since.take()
            {
                summary.activation_delays.push(secs(since, now));
            }
            changes.push((now, replicas));
        }
    }
    if let Some(since) = above_since {
        summary.longest_above_target_seconds =
            summary.longest_above_target_seconds.max(secs(since, end));
    }
    for (i, (at, count)) in changes.iter().enumerate() {
        let until = changes.get(i + 1).map_or(end, |c| c.0);
        let span = secs(*at, until).max(0);
        summary.replica_hours += f64::from(*count) * span as f64 / 3600.0;
        if *count == 0 {
            summary.seconds_at_zero += span;
        }
        if *count >= object.max_replicas {
            summary.seconds_at_max += span;
        }
    }
    Timeline {
        changes,
        samples,
        summary,
    }
}

fn usage_ratio(value: f64, target: MetricTarget, replicas: i32, _t: Tolerance) -> f64 {
    match target {
        MetricTarget::AverageValue(per_pod) => value / (per_pod * f64::from(replicas.max(1))),
        MetricTarget::Value(total) => value / total,
    }
}

fn first_trigger_view(object: &SimObject, values: &[Option<f64>]) -> (Option<f64>, Option<f64>) {
    let value = values.first().copied().flatten();
    let target = object.triggers.first().map(|t| match t.target {
        MetricTarget::AverageValue(v) | MetricTarget::Value(v) => v,
    });
    (value, target)
}

/// One read of every trigger through KEDA's fallback, as the operator's poll and metric
/// service do (every read updates the trigger's health). All pods count as ready.
fn read_all(
    object: &SimObject,
    values: &[Option<f64>],
    health: &mut [Option<MetricHealth>],
    replicas: i32,
) -> Vec<MetricOutcome<String>> {
    object
        .triggers
        .iter()
        .zip(values)
        .zip(health.iter_mut())
        .map(|((t, v), h)| {
            let (target_type, target) = match (&object.modifiers, t.target) {
                (Some((m, _)), _) => (m.metric_type, m.target),
                (None, MetricTarget::AverageValue(v)) => (MetricTargetType::AverageValue, v),
                (None, MetricTarget::Value(v)) => (MetricTargetType::Value, v),
            };
            let ctx = FallbackContext {
                spec: object.fallback,
                modifiers_target: object.modifiers.as_ref().map(|(m, _)| m.target),
                target_type,
                target,
                current_replicas: Some(replicas),
                ready_replicas: Some(replicas),
            };
            let read = v.ok_or_else(|| format!("{}: read failed", t.name));
            let evaluated = fallback::evaluate(&ctx, *h, read);
            *h = evaluated.health;
            evaluated.outcome
        })
        .collect()
}

/// The value served for a read: its own or the fallback's.
fn served(outcome: &MetricOutcome<String>) -> Option<f64> {
    match outcome {
        MetricOutcome::Value(v) | MetricOutcome::Fallback(v) => Some(*v),
        _ => None,
    }
}

/// The `scalingModifiers` composite value, as the operator computes it: a fallback value
/// standing in for a failed read is served as is (the first in trigger order), else the
/// formula over the served values (a failing trigger is `nil`).
fn composite(
    object: &SimObject,
    reads: &[MetricOutcome<String>],
    errors: &mut Vec<String>,
) -> Option<f64> {
    let (m, inputs) = object.modifiers.as_ref()?;
    if let Some(v) = reads.iter().find_map(|r| match r {
        MetricOutcome::Fallback(v) => Some(*v),
        _ => None,
    }) {
        return Some(v);
    }
    let values: Vec<Option<f64>> = inputs.iter().map(|i| served(&reads[*i])).collect();
    match m.formula.evaluate(&values) {
        Ok(result) => composite_value(result, object.fallback.as_ref(), m.target),
        Err(e) => {
            errors.push(e.to_string());
            None
        }
    }
}

fn trigger_summary(
    object: &SimObject,
    values: &[Option<f64>],
    reads: &[MetricOutcome<String>],
) -> TriggerSummary {
    let mut summary = TriggerSummary::default();
    for r in reads {
        match r {
            MetricOutcome::Failed(e) => summary.errors.push(e.clone()),
            MetricOutcome::FallbackFailed(e) => summary.errors.push(e.to_string()),
            _ => {}
        }
    }
    match &object.modifiers {
        None => {
            for ((t, v), r) in object.triggers.iter().zip(values).zip(reads) {
                if r.is_active(v.is_some_and(|v| v > t.activation)) {
                    summary.active = true;
                    summary.active_triggers.push(t.name.clone());
                }
            }
        }
        Some((m, _)) => {
            let mut errors = Vec::new();
            let value = composite(object, reads, &mut errors);
            summary.errors.extend(errors);
            summary.active =
                composite_is_active(value, m.activation_target, !summary.errors.is_empty());
            if summary.active {
                summary.active_triggers.push(MODIFIERS_TRIGGER.to_string());
            }
        }
    }
    summary
}
