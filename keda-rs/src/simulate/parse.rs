//! The inputs of a replay: the ScaledObjects of a YAML file and a `time,trigger,value` CSV.

use std::path::Path;

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize as _;

use keda_decide::fallback::FallbackSpec;
use keda_decide::formula::{ScalingModifiersSpec, compile_scaling_modifiers};
use keda_decide::scale::{ScaleAnnotations, ScalingSettings, TargetRef};

use super::{Point, SimObject, SimTrigger, SimulateError};
use crate::hpa::algorithm::MetricTarget;

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
            let prometheus = match t.type_.as_str() {
                "prometheus" => Some(super::prometheus::PromQuery::of(t).map_err(at)?),
                _ => None,
            };
            triggers.push(SimTrigger {
                name,
                kind: t.type_.clone(),
                target,
                activation,
                prometheus,
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

/// `YYYY-MM-DDTHH:MM:SSZ`, the form `keda-rs` writes, read without the general parser (a
/// year of 30 s samples is a million times); anything else is `None` and goes to jiff.
fn utc_seconds(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    // jiff checks the calendar (days in the month, leap years).
    jiff::civil::Date::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
    )
    .ok()?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Timestamp::from_second(days * 86_400 + hour * 3600 + minute * 60 + second).ok()
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
        let time: Timestamp = match utc_seconds(time) {
            Some(t) => t,
            None => time
                .parse()
                .map_err(|e| err(n, format!("time: not an RFC 3339 time ({e})")))?,
        };
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
