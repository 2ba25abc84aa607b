//! `keda-rs simulate`: replays a recorded metric history through the operator's scale decision
//! (`keda_decide::scale::decide`: activation, cooldown, idle replicas, pause annotations;
//! `keda_decide::fallback::evaluate`; `keda_decide::formula` for `scalingModifiers`) and the
//! HPA algorithm
//! `keda-rs dev` runs ([`crate::hpa::algorithm`]: tolerance, behavior, stabilization windows,
//! policies), and reports the replica timeline it produces.
//!
//! Time is simulated: the operator polls every `pollingInterval` and the HPA syncs every sync
//! period from the first sample on; a trigger's value at a time is its last sample at or
//! before that time (no sample yet: the trigger failed, as an unreadable metric). A sample whose
//! value is `error` is a failed read: it counts towards `fallback.failureThreshold` at every
//! read, as in the operator, where both the poll and the HPA's metric read count (each
//! poll and each HPA sync here).
//!
//! A paused object (`autoscaling.keda.sh/paused-replicas: N`) is held at N for the whole
//! replay, `paused: "true"` at the initial count: KEDA removes the HPA of a paused object.
//!
//! A trigger's target and activation threshold are read from its metadata, by the names the
//! built-in scalers use (see [`TARGET_KEYS`], [`ACTIVATION_KEYS`]); `metricType` `Value` or
//! `AverageValue` (the default).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize as _;

use jiff::{SignedDuration, Timestamp};
// The operator's pure decision code: every use goes through this one block.
use keda_decide::fallback::{
    self, FallbackContext, FallbackSpec, MetricHealth, MetricOutcome, MetricTargetType,
};
use keda_decide::formula::{
    CompiledModifiers, MODIFIERS_TRIGGER, ScalingModifiersSpec, compile_scaling_modifiers,
    composite_is_active, composite_value,
};
use keda_decide::scale::{
    Observed, Pause, ScaleAnnotations, ScalingSettings, TargetRef, TriggerSummary, decide,
};

use crate::dev::chart::{self, Sample};
use crate::hpa::HpaSettings;
use crate::hpa::algorithm::{self, HpaState, MetricTarget, Spec, Tolerance};
use crate::hpa::controller::behavior_of;

/// Metadata keys holding a trigger's target, first found wins.
pub const TARGET_KEYS: &[&str] = &[
    "threshold",
    "targetValue",
    "value",
    "queueLength",
    "listLength",
    "lagThreshold",
    "targetQueryValue",
    "targetMetricValue",
    "desiredReplicas",
    "streamLength",
    "pendingEntriesCount",
    "activityThreshold",
];

/// Metadata keys holding a trigger's activation threshold (default 0), first found wins.
pub const ACTIVATION_KEYS: &[&str] = &[
    "activationThreshold",
    "activationTargetValue",
    "activationValue",
    "activationQueueLength",
    "activationListLength",
    "activationLagThreshold",
    "activationTargetQueryValue",
    "activationTargetMetricValue",
    "activationStreamLength",
    "activationPendingEntriesCount",
];

/// Largest input file read (CSV or YAML).
pub const MAX_INPUT_BYTES: u64 = 512 * 1024 * 1024;

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_INPUT_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path}: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{path}: no ScaledObject in the file")]
    NoObject { path: PathBuf },
    #[error("{path}:{line}: {message}")]
    Csv {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: no sample in the file")]
    NoSamples { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Chart(#[from] chart::ChartError),
}

/// One trigger as the simulation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimTrigger {
    /// `name`, or `trigger<index>` when unnamed.
    pub name: String,
    pub target: MetricTarget,
    pub activation: f64,
}

/// One ScaledObject, ready to simulate.
#[derive(Clone, Debug)]
pub struct SimObject {
    pub namespace: String,
    pub name: String,
    pub settings: ScalingSettings,
    pub polling_interval: SignedDuration,
    pub min_replicas: i32,
    pub max_replicas: i32,
    /// `advanced.horizontalPodAutoscalerConfig.behavior` as given (defaults filled later).
    pub behavior: Option<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior>,
    pub triggers: Vec<SimTrigger>,
    /// `spec.fallback`.
    pub fallback: Option<FallbackSpec>,
    /// `spec.advanced.scalingModifiers`, compiled, with the trigger index of each formula
    /// input (in the formula's order).
    pub modifiers: Option<(CompiledModifiers, Vec<usize>)>,
}

/// One metric sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub time: Timestamp,
    pub trigger: usize,
    /// `None`: the read failed (the CSV value `error`).
    pub value: Option<f64>,
}

/// The replica timeline and its figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// `(time, replicas)` at the start and at every change.
    pub changes: Vec<(Timestamp, i32)>,
    /// Chart samples (one per HPA sync).
    pub samples: Vec<Sample>,
    pub summary: Summary,
}

/// The figures the command prints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub replica_hours: f64,
    pub scale_ups: usize,
    pub scale_downs: usize,
    pub seconds_at_max: i64,
    pub seconds_at_zero: i64,
    /// Longest run of HPA syncs where the first trigger's usage ratio was above 1.
    pub longest_above_target_seconds: i64,
    /// Seconds from the first poll seeing the object active to replicas > 0, per activation.
    pub activation_delays: Vec<i64>,
}

fn number(
    trigger: &keda_api::trigger::ScaleTrigger,
    keys: &[&str],
    what: &str,
) -> Result<Option<f64>, String> {
    for key in keys {
        if let Some(text) = trigger.metadata.get(*key) {
            return text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(Some)
                .ok_or_else(|| format!("metadata.{key} ({what}) is not a number"));
        }
    }
    Ok(None)
}

/// Parses every ScaledObject of a multi-document YAML text.
///
/// # Errors
/// A document that is not valid YAML or not a valid ScaledObject, or a trigger without a
/// target the simulation can read; the message names the document and field.
pub fn parse_objects(path: &Path, text: &str) -> Result<Vec<SimObject>, SimulateError> {
    let err = |message: String| SimulateError::Yaml {
        path: path.to_path_buf(),
        message,
    };
    let mut out = Vec::new();
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml::Value::deserialize(doc)
            .map_err(|e| err(format!("document {}: {e}", index + 1)))?;
        if value.get("kind").and_then(|k| k.as_str()) != Some("ScaledObject") {
            continue;
        }
        let so: keda_api::scaled_object::ScaledObject = serde_yaml::from_value(value)
            .map_err(|e| err(format!("document {} (ScaledObject): {e}", index + 1)))?;
        let namespace = so
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let name = so.metadata.name.clone().unwrap_or_default();
        let where_ = format!("document {} (ScaledObject {namespace}/{name})", index + 1);
        let spec = &so.spec;
        let mut triggers = Vec::new();
        for (i, t) in spec.triggers.iter().enumerate() {
            let at = |m: String| err(format!("{where_}: spec.triggers[{i}]: {m}"));
            let target = number(t, TARGET_KEYS, "target")
                .map_err(at)?
                .ok_or_else(|| {
                    at(format!(
                        "no target in metadata (one of {})",
                        TARGET_KEYS.join(", ")
                    ))
                })?;
            let activation = number(t, ACTIVATION_KEYS, "activation threshold")
                .map_err(at)?
                .unwrap_or(0.0);
            let target = match t.metric_type.as_deref() {
                None | Some("AverageValue") => MetricTarget::AverageValue(target),
                Some("Value") => MetricTarget::Value(target),
                Some(other) => {
                    return Err(at(format!(
                        "metricType {other:?} is not simulated (Value or AverageValue)"
                    )));
                }
            };
            let name = if t.name.is_empty() {
                format!("trigger{i}")
            } else {
                t.name.clone()
            };
            triggers.push(SimTrigger {
                name,
                target,
                activation,
            });
        }
        let mut settings = ScalingSettings::with_defaults(TargetRef {
            kind: "apps/v1.Deployment".to_string(),
            namespace: namespace.clone(),
            name: spec.scale_target_ref.name.clone(),
        });
        let min = spec.min_replica_count.unwrap_or(0);
        settings.min_replica_count = min;
        settings.idle_replica_count = spec.idle_replica_count;
        if let Some(c) = spec.cooldown_period {
            settings.cooldown_period = SignedDuration::from_secs(i64::from(c));
        }
        if let Some(c) = spec.initial_cooldown_period {
            settings.initial_cooldown_period = SignedDuration::from_secs(i64::from(c));
        }
        settings.annotations = ScaleAnnotations::from_annotations(
            &so.metadata.annotations.clone().unwrap_or_default(),
        )
        .map_err(|e| err(format!("{where_}: metadata.annotations: {e}")))?;
        let fallback = spec.fallback.as_ref().map(|f| FallbackSpec {
            failure_threshold: f.failure_threshold,
            replicas: f.replicas,
            behavior: f.behavior.unwrap_or_default(),
        });
        let modifiers = match spec
            .advanced
            .as_ref()
            .and_then(|a| a.scaling_modifiers.as_ref())
        {
            None => None,
            Some(m) => {
                let compiled = compile_scaling_modifiers(
                    ScalingModifiersSpec {
                        formula: m.formula.as_deref().unwrap_or(""),
                        target: m.target.as_deref().unwrap_or(""),
                        activation_target: m.activation_target.as_deref().unwrap_or(""),
                        metric_type: m.metric_type.as_deref().unwrap_or(""),
                    },
                    &spec.triggers,
                )
                .map_err(|e| err(format!("{where_}: {e}")))?;
                let inputs = compiled
                    .formula
                    .trigger_names()
                    .iter()
                    .map(|n| {
                        triggers.iter().position(|t| &t.name == n).ok_or_else(|| {
                            err(format!(
                                "{where_}: spec.advanced.scalingModifiers.formula: no trigger named {n:?}"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Some((compiled, inputs))
            }
        };
        let behavior = spec
            .advanced
            .as_ref()
            .and_then(|a| a.horizontal_pod_autoscaler_config.as_ref())
            .and_then(|h| h.behavior.clone());
        out.push(SimObject {
            namespace,
            name,
            settings,
            polling_interval: SignedDuration::from_secs(i64::from(
                spec.polling_interval.unwrap_or(30).max(1),
            )),
            min_replicas: min.max(1),
            max_replicas: spec.max_replica_count.unwrap_or(100),
            behavior,
            triggers,
            fallback,
            modifiers,
        });
    }
    if out.is_empty() {
        return Err(SimulateError::NoObject {
            path: path.to_path_buf(),
        });
    }
    Ok(out)
}

/// The longest history a replay covers (two years): at the shortest sync period (1 s) that is
/// about 63 M steps.
pub const MAX_HISTORY: SignedDuration = SignedDuration::from_secs(2 * 366 * 86_400);

/// Parses a `time,trigger,value` CSV (header required) for `object`: `trigger` is a trigger's
/// name or index. Samples are returned sorted by time.
///
/// # Errors
/// A malformed line, an unknown trigger, a value that is not a finite number, samples further
/// apart than [`MAX_HISTORY`]; the message names the line.
pub fn parse_csv(path: &Path, text: &str, object: &SimObject) -> Result<Vec<Point>, SimulateError> {
    let err = |line: usize, message: String| SimulateError::Csv {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, header)) if header.trim() == "time,trigger,value" => {}
        _ => {
            return Err(err(
                1,
                "expected the header `time,trigger,value`".to_string(),
            ));
        }
    }
    let mut points = Vec::new();
    // The earliest and the latest sample, with their lines.
    let mut first: Option<(Timestamp, usize)> = None;
    let mut last: Option<(Timestamp, usize)> = None;
    for (i, line) in lines {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [time, trigger, value] = fields[..] else {
            return Err(err(n, format!("expected 3 fields, found {}", fields.len())));
        };
        let time: Timestamp = time
            .parse()
            .map_err(|e| err(n, format!("time: not an RFC 3339 time ({e})")))?;
        let trigger = object
            .triggers
            .iter()
            .position(|t| t.name == trigger)
            .or_else(|| {
                trigger
                    .parse::<usize>()
                    .ok()
                    .filter(|i| *i < object.triggers.len())
            })
            .ok_or_else(|| {
                err(
                    n,
                    format!(
                        "trigger: {trigger:?} is neither a trigger name nor an index of {}/{}",
                        object.namespace, object.name
                    ),
                )
            })?;
        let value = if value == "error" {
            None
        } else {
            Some(
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| {
                        err(n, "value: not a finite number (nor `error`)".to_string())
                    })?,
            )
        };
        if first.is_none_or(|(t, _)| time < t) {
            first = Some((time, n));
        }
        if last.is_none_or(|(t, _)| time > t) {
            last = Some((time, n));
        }
        points.push(Point {
            time,
            trigger,
            value,
        });
    }
    let (Some((first, first_line)), Some((last, last_line))) = (first, last) else {
        return Err(SimulateError::NoSamples {
            path: path.to_path_buf(),
        });
    };
    // The replay steps every sync period (1 s at least) from the first sample to the last and
    // keeps a chart sample per step: a mistyped year must not make it run for ever.
    if last.duration_since(first) > MAX_HISTORY {
        return Err(err(
            last_line,
            format!(
                "time: {last} is more than {} days after the first sample ({first}, line {first_line}); a replay covers at most that",
                MAX_HISTORY.as_secs() / 86_400
            ),
        ));
    }
    points.sort_by_key(|p| p.time);
    Ok(points)
}

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
    let mut samples = Vec::new();
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

/// The summary as printed.
pub fn render_summary(object: &SimObject, timeline: &Timeline) -> String {
    let s = &timeline.summary;
    let mut out = String::new();
    let _ = writeln!(out, "ScaledObject {}/{}", object.namespace, object.name);
    let _ = writeln!(out, "  replica-hours:            {:.2}", s.replica_hours);
    let _ = writeln!(
        out,
        "  scale events:             {} up, {} down",
        s.scale_ups, s.scale_downs
    );
    let _ = writeln!(
        out,
        "  time at max ({}):  {} s",
        object.max_replicas, s.seconds_at_max
    );
    let _ = writeln!(out, "  time at zero:             {} s", s.seconds_at_zero);
    let _ = writeln!(
        out,
        "  longest above target:     {} s",
        s.longest_above_target_seconds
    );
    let delays: Vec<String> = s
        .activation_delays
        .iter()
        .map(|d| format!("{d} s"))
        .collect();
    let _ = writeln!(
        out,
        "  activation delays:        {}",
        if delays.is_empty() {
            "none".to_string()
        } else {
            delays.join(", ")
        }
    );
    out
}

/// Writes `<namespace>-<name>.csv` (`time,replicas`, one row per change), `.svg` and `.png`.
///
/// # Errors
/// A file that cannot be written.
pub fn write_outputs(
    dir: &Path,
    object: &SimObject,
    timeline: &Timeline,
) -> Result<Vec<PathBuf>, SimulateError> {
    std::fs::create_dir_all(dir).map_err(|source| SimulateError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let csv_path = dir.join(format!("{}-{}.csv", object.namespace, object.name));
    let mut csv = String::from("time,replicas\n");
    for (at, count) in &timeline.changes {
        let _ = writeln!(csv, "{at},{count}");
    }
    std::fs::write(&csv_path, csv).map_err(|source| SimulateError::Write {
        path: csv_path.clone(),
        source,
    })?;
    let (svg, png) = chart::write_charts(dir, &object.namespace, &object.name, &timeline.samples)?;
    Ok(vec![csv_path, svg, png])
}

/// Reads a file of at most [`MAX_INPUT_BYTES`].
///
/// # Errors
/// Unreadable or too large.
pub fn read_bounded(path: &Path) -> Result<String, SimulateError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| SimulateError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut text = String::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|source| SimulateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(SimulateError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests;
