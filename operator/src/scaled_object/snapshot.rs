//! What one poll of a scale loop saw and decided, as plain data: the scale loop fills a
//! [`PollSnapshot`] after every poll and keeps the last one; `keda-rs explain`
//! ([`crate::serve::explain`]) reads it. Neither side imports the other: both import this.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::ExternalMetricSource;
use keda_api::ScaledObject;
use keda_decide::fallback::{MetricHealth, MetricTargetType};
use keda_decide::scale::{Observed, ScaleDecision, ScalingSettings, TriggerSummary};

use crate::scaled_object::metric_map::MetricMap;
use crate::shared::isolation::InternalError;
use crate::shared::scalers::ObjectScalers;

/// The last read of one metric, kept for `useCachedMetrics` and the status.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricReading {
    /// Index of the trigger.
    pub trigger_index: usize,
    /// The value to serve (the source's, or the fallback's); `None` when failing or nil.
    pub value: Option<f64>,
    /// Whether this metric makes the object active.
    pub active: bool,
    /// `value` is a fallback value standing in for a failed read (`static` and the
    /// `currentReplicas*` behaviors; not `scalingModifiers`, which feeds `nil` to the formula).
    pub fallback: bool,
    /// The error, when the read failed and no fallback value stands in.
    pub error: Option<String>,
    /// The scaler panicked during this read (caught, [`crate::shared::isolation`]): the read counts as
    /// failed (fallback applies), and the object's Ready says it was an internal error.
    pub internal: Option<InternalError>,
    /// The scaler's own error when the read failed and no fallback value stands in (the
    /// `KEDAScalerFailed` or, with `scalingModifiers`, `KEDAMetricSourceFailed` Event says it).
    pub failure: Option<String>,
}

/// What one poll found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PollResult {
    /// For the decision.
    pub summary: TriggerSummary,
    /// Per External metric name.
    pub readings: MetricMap<MetricReading>,
    /// `status.health` records to store (only metrics of objects with a valid fallback).
    pub health: MetricMap<MetricHealth>,
    /// The composite value, with `scalingModifiers`.
    pub composite: Option<f64>,
}

/// The targets of one trigger's External metrics, as its scaler declared them.
#[derive(Clone, Debug, PartialEq)]
pub struct TriggerTargets {
    /// Position in `spec.triggers`.
    pub index: usize,
    /// `triggers[].name`.
    pub name: String,
    /// `triggers[].type`.
    pub trigger_type: String,
    /// `(metric name, target type, target)` per External metric.
    pub metrics: Vec<(String, MetricTargetType, f64)>,
}

impl TriggerTargets {
    /// The targets of every trigger of `scalers`.
    pub fn of(scalers: &ObjectScalers) -> Vec<TriggerTargets> {
        scalers
            .triggers
            .iter()
            .map(|t| TriggerTargets {
                index: t.index,
                name: t.name.clone(),
                trigger_type: t.trigger_type.clone(),
                metrics: t
                    .metric_specs
                    .externals()
                    .map(|ext| {
                        let (kind, target) = external_target(ext);
                        (ext.metric.name.clone(), kind, target)
                    })
                    .collect(),
            })
            .collect()
    }
}

/// What one poll of a scale loop saw and decided.
#[derive(Clone, Debug, PartialEq)]
pub struct PollSnapshot {
    /// Replicas, time, `lastActiveTime`.
    pub observed: Observed,
    /// The settings the decision used.
    pub settings: ScalingSettings,
    /// The triggers' metric targets.
    pub triggers: Vec<TriggerTargets>,
    /// What the triggers read, with fallback health.
    pub result: PollResult,
    /// What the decision asked for.
    pub decision: ScaleDecision,
    /// The `/scale` write the decision asked for failed with this error.
    pub scale_error: Option<String>,
}

/// Parses a Kubernetes quantity as a number (`5`, `1500m`, `2k`, `1Gi`).
pub fn quantity_value(q: &str) -> Option<f64> {
    let q = q.trim();
    let suffixes: [(&str, f64); 10] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("u", 1e-6),
    ];
    for (s, factor) in suffixes {
        if let Some(n) = q.strip_suffix(s) {
            return n.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    q.parse().ok()
}

/// The target type and value of an External metric source.
pub fn external_target(ext: &ExternalMetricSource) -> (MetricTargetType, f64) {
    let t = &ext.target;
    if t.type_ == "Value" {
        let v = t.value.as_ref().and_then(|q| quantity_value(&q.0));
        (MetricTargetType::Value, v.unwrap_or(0.0))
    } else {
        let v = t.average_value.as_ref().and_then(|q| quantity_value(&q.0));
        (MetricTargetType::AverageValue, v.unwrap_or(0.0))
    }
}

/// What explain needs from a scale loop about one object: the object as the loop knows it now,
/// its last poll (`None` before the first), and the loop's clock.
#[derive(Clone, Debug)]
pub struct LastPoll {
    /// The object, the freshest of the watch cache and this operator's own writes.
    pub so: Arc<ScaledObject>,
    /// The last complete poll.
    pub snapshot: Option<Arc<PollSnapshot>>,
    /// The loop's clock, now.
    pub now: Timestamp,
    /// When the operator started (the cooldown counts from it at the earliest).
    pub operator_started_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_numbers() {
        assert_eq!(quantity_value("5"), Some(5.0));
        assert_eq!(quantity_value("1500m"), Some(1.5));
        assert_eq!(quantity_value("2k"), Some(2000.0));
        assert_eq!(quantity_value("1Ki"), Some(1024.0));
        assert_eq!(quantity_value("x"), None);
    }
}
