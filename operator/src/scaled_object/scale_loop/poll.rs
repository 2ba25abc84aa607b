//! One poll of an object's triggers: every External metric read once, fallback applied through
//! [`keda_decide::fallback::evaluate`], `scalingModifiers` through [`keda_decide::formula`], and the
//! result summarized for [`keda_decide::scale::decide`]. The metric service reads through the
//! same functions, so activity and served values always agree.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::ExternalMetricSource;
use keda_scalers::MetricValue;
use keda_scalers::request_metrics::{self, RequestLabels};

use crate::process::telemetry::{Metrics, ResourceKind};
use crate::scaled_object::metric_map::MetricMap;
use crate::scaled_object::snapshot::{MetricReading, PollResult, external_target};
use crate::shared::isolation::{TriggerRef, catch_panic};
use crate::shared::recording::{self, ScalerLabels};
use crate::shared::scalers::{ObjectScalers, TriggerScaler};
use keda_decide::fallback::{self, FallbackContext, FallbackSpec, MetricHealth, MetricOutcome};
use keda_decide::formula::{
    COMPOSITE_METRIC_NAME, MODIFIERS_TRIGGER, composite_is_active, composite_value,
};
use keda_decide::scale::TriggerSummary;

/// How long one scaler read may take before it counts as failed.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What reading a metric needs besides the scaler.
#[derive(Clone, Copy, Debug)]
pub struct ReadContext<'a> {
    /// ScaledObject or ScaledJob (for recording).
    pub kind: ResourceKind,
    /// Namespace of the object (for recording).
    pub namespace: &'a str,
    /// Name of the object (for recording).
    pub name: &'a str,
    /// `spec.fallback`.
    pub fallback: Option<FallbackSpec>,
    /// The target's current replicas (for the `currentReplicas*` behaviors).
    pub current_replicas: Option<i32>,
    /// Ready pods of the target (for `Value` metrics in fallback).
    pub ready_replicas: Option<i32>,
    /// Where the per-scaler Prometheus metrics are recorded.
    pub metrics: &'a Metrics,
}

/// Reads one External metric of one trigger and applies fallback.
pub async fn read_metric(
    scalers: &ObjectScalers,
    trigger: &TriggerScaler,
    spec: &ExternalMetricSource,
    ctx: &ReadContext<'_>,
    previous: Option<MetricHealth>,
) -> (MetricReading, Option<MetricHealth>) {
    let metric = spec.metric.name.clone();
    let labels = ScalerLabels {
        kind: ctx.kind,
        namespace: ctx.namespace,
        metric: &metric,
        scaled_object: ctx.name,
        scaler: &trigger.trigger_type,
        trigger_name: &trigger.name,
        trigger_index: trigger.index,
    };
    // The scaler's outbound HTTP requests during the read are counted under these labels
    // (keda_scaler_http_*), as KEDA's request context does; the answers it reads count against
    // the namespace's budget, whether a poll or the HPA's metric request reads.
    let request_labels = RequestLabels {
        namespace: ctx.namespace.to_string(),
        scaled_resource: ctx.name.to_string(),
        scaler: trigger.trigger_type.clone(),
        trigger_name: trigger.name.clone(),
        metric_name: metric.clone(),
        resource_type: ctx.kind.kind().to_string(),
    };
    let started = Instant::now();
    let read = tokio::time::timeout(
        READ_TIMEOUT,
        catch_panic(request_metrics::scope(
            Arc::new(ctx.metrics.clone()),
            request_labels,
            scalers
                .answers
                .clone()
                .within(trigger.scaler.scaler().metrics_and_activity(&metric)),
        )),
    )
    .await;
    recording::scaler_metrics_latency(ctx.metrics, labels, started.elapsed());
    let mut internal = None;
    let (value, scaler_active) = match read {
        Ok(Ok(Ok(m))) => {
            let total: f64 = m
                .values
                .iter()
                .filter(|v: &&MetricValue| v.name.eq_ignore_ascii_case(&metric))
                .map(|v| v.value)
                .sum();
            (Ok(total), m.active)
        }
        Ok(Ok(Err(e))) => {
            // What the event source said goes to the debug log only; Events, status and
            // explain get the error's message, which shows the kind of failure.
            e.log_raw();
            (Err(e.to_string()), false)
        }
        Ok(Err(panic)) => {
            let error = panic.in_scaler(
                format!(
                    "reading metric {metric} of {} {}/{}",
                    ctx.kind.kind(),
                    ctx.namespace,
                    ctx.name
                ),
                TriggerRef {
                    index: trigger.index,
                    trigger_type: &trigger.trigger_type,
                },
            );
            recording::internal_panic(ctx.metrics, ctx.kind, (ctx.namespace, ctx.name), &error);
            let text = error.to_string();
            internal = Some(error);
            (Err(text), false)
        }
        Err(_) => (
            Err(format!(
                "trigger {} ({}): reading {metric} timed out after {}s",
                trigger.index,
                trigger.trigger_type,
                READ_TIMEOUT.as_secs()
            )),
            false,
        ),
    };
    let read_failure = value.as_ref().err().cloned();
    let (target_type, target) = match &scalers.modifiers {
        Some(m) => (m.metric_type, m.target),
        None => external_target(spec),
    };
    let fctx = FallbackContext {
        spec: ctx.fallback,
        modifiers_target: scalers.modifiers.as_ref().map(|m| m.target),
        target_type,
        target,
        current_replicas: ctx.current_replicas,
        ready_replicas: ctx.ready_replicas,
    };
    let evaluated = fallback::evaluate(&fctx, previous, value);
    // As KEDA's getScalerState: a fallback value standing in for a failed read is no error
    // (GetMetricsWithFallback returns none), so no `KEDAScalerFailed` and no error count.
    let failure = read_failure.filter(|_| !matches!(evaluated.outcome, MetricOutcome::Fallback(_)));
    if failure.is_some() {
        recording::scaler_error(ctx.metrics, labels);
    } else {
        recording::scaler_ok(ctx.metrics, labels);
    }
    let active = evaluated.outcome.is_active(scaler_active);
    let fallback = matches!(evaluated.outcome, MetricOutcome::Fallback(_));
    let nil = matches!(evaluated.outcome, MetricOutcome::Nil);
    let (value, error) = match evaluated.outcome {
        MetricOutcome::Value(v) | MetricOutcome::Fallback(v) => (Some(v), None),
        MetricOutcome::Nil => (None, None),
        MetricOutcome::Failed(e) => (None, Some(e)),
        MetricOutcome::FallbackFailed(e) => (
            None,
            Some(format!(
                "trigger {} ({}): {e}",
                trigger.index, trigger.trigger_type
            )),
        ),
    };
    let reading = MetricReading {
        trigger_index: trigger.index,
        value,
        active,
        fallback,
        error,
        internal,
        failure,
    };
    // What KEDA's processMetricsWithFallback records for the trigger: the value served, under
    // the name of the metric it serves. With `scalingModifiers` a fallback value is named
    // `composite-metric` (doFallback names it so), and behavior `scalingModifiers` serves the
    // formula a placeholder of -1 under the trigger's own name.
    match reading.value {
        Some(v) if fallback && scalers.modifiers.is_some() => {
            let composite = ScalerLabels {
                metric: COMPOSITE_METRIC_NAME,
                ..labels
            };
            recording::scaler_metrics_value(ctx.metrics, composite, v);
        }
        Some(v) => recording::scaler_metrics_value(ctx.metrics, labels, v),
        None if nil => recording::scaler_metrics_value(ctx.metrics, labels, -1.0),
        None => {}
    }
    // With `scalingModifiers` no trigger is active on its own: the composite metric is (KEDA's
    // getScalerState records a trigger's activity only without modifiers).
    if scalers.modifiers.is_none() {
        recording::scaler_active(ctx.metrics, labels, active);
    }
    (reading, evaluated.health)
}

/// Reads every External metric of every trigger (concurrently) and summarizes.
pub async fn poll(
    scalers: &ObjectScalers,
    ctx: &ReadContext<'_>,
    previous: &MetricMap<MetricHealth>,
) -> PollResult {
    let reads = scalers
        .triggers
        .iter()
        .flat_map(|t| t.metric_specs.externals().map(move |s| (t, s)));
    let futures = reads.map(|(t, s)| async move {
        let name = s.metric.name.clone();
        let prev = previous.get(&name).copied();
        let (reading, health) = read_metric(scalers, t, s, ctx, prev).await;
        (name, reading, health)
    });
    let results = futures::future::join_all(futures).await;
    record_resource_triggers(scalers, ctx);
    let mut out = PollResult::default();
    for (name, reading, health) in results {
        if let Some(h) = health {
            out.health.insert(name.clone(), h);
        }
        out.readings.insert(name, reading);
    }
    out.summary = summarize(
        scalers,
        ctx.fallback.as_ref(),
        &out.readings,
        &mut out.composite,
    );
    record_composite(scalers, ctx, &out);
    out
}

/// KEDA's getScalerState: a cpu or memory trigger (a Resource or ContainerResource metric the
/// HPA reads itself) is `keda_scaler_active` 1 at every poll, with the resource as `metric`;
/// not with `scalingModifiers`.
fn record_resource_triggers(scalers: &ObjectScalers, ctx: &ReadContext<'_>) {
    if scalers.modifiers.is_some() {
        return;
    }
    for t in &scalers.triggers {
        for spec in t.metric_specs.others() {
            let resource = spec
                .resource
                .as_ref()
                .map(|r| r.name.as_str())
                .or(spec.container_resource.as_ref().map(|r| r.name.as_str()));
            let Some(resource) = resource else {
                continue;
            };
            let labels = ScalerLabels {
                kind: ctx.kind,
                namespace: ctx.namespace,
                metric: resource,
                scaled_object: ctx.name,
                scaler: &t.trigger_type,
                trigger_name: &t.name,
                trigger_index: t.index,
            };
            recording::scaler_active(ctx.metrics, labels, true);
        }
    }
}

/// KEDA's series of the `scalingModifiers` formula: `keda_scaler_metrics_value` and
/// `keda_scaler_active` with `scaler` and `metric` `composite-metric` and `triggerIndex` 0,
/// active when the value is above `activationTarget`. As in KEDA's getScaledObjectState, only
/// when no trigger failed (a fallback value standing in for a failed read included) and the
/// formula gave a value.
fn record_composite(scalers: &ObjectScalers, ctx: &ReadContext<'_>, result: &PollResult) {
    let (Some(m), Some(value)) = (&scalers.modifiers, result.composite) else {
        return;
    };
    if result.readings.values().any(|r| r.failure.is_some()) {
        return;
    }
    let labels = ScalerLabels {
        kind: ctx.kind,
        namespace: ctx.namespace,
        metric: COMPOSITE_METRIC_NAME,
        scaled_object: ctx.name,
        scaler: COMPOSITE_METRIC_NAME,
        trigger_name: COMPOSITE_METRIC_NAME,
        trigger_index: 0,
    };
    recording::scaler_metrics_value(ctx.metrics, labels, value);
    recording::scaler_active(ctx.metrics, labels, value > m.activation_target);
}

/// The decision's view of a set of readings: per-trigger activity, or the composite activity
/// with `scalingModifiers`.
fn summarize(
    scalers: &ObjectScalers,
    fallback: Option<&FallbackSpec>,
    readings: &MetricMap<MetricReading>,
    composite_out: &mut Option<f64>,
) -> TriggerSummary {
    let mut summary = TriggerSummary::default();
    // Errors in trigger order, as the user wrote the triggers.
    let mut ordered: Vec<(&String, &MetricReading)> = readings.iter().collect();
    ordered.sort_by_key(|(_, r)| r.trigger_index);
    for (_, r) in &ordered {
        if let Some(e) = &r.error {
            summary.errors.push(e.clone());
        }
    }
    match &scalers.modifiers {
        None => {
            for (name, r) in &ordered {
                if r.active {
                    summary.active = true;
                    summary.active_triggers.push((*name).clone());
                }
            }
        }
        Some(m) => {
            let composite = composite_of(scalers, readings, fallback, &mut summary.errors);
            *composite_out = composite;
            summary.active =
                composite_is_active(composite, m.activation_target, !summary.errors.is_empty());
            if summary.active {
                summary.active_triggers.push(MODIFIERS_TRIGGER.to_string());
            }
        }
    }
    summary
}

/// The composite value: the formula over the readings (a failing or nil trigger is `nil`), or,
/// while a fallback value stands in for a failed read, that value itself.
///
/// KEDA's `HandleScalingModifiers` applies no formula while fallback is active: it serves the
/// first fallback metric as `composite-metric`, and `doFallback` computed that metric from the
/// composite target (`scalingModifiers.target x replicas`, divided by the ready pods for
/// `metricType: Value`), so the HPA asks for exactly the fallback's replica count whatever the
/// formula does with its inputs. Every fallback value of one object is computed from the same
/// target and replica count, so the first in trigger order is the value KEDA serves (KEDA
/// takes whichever read finished first).
pub fn composite_of(
    scalers: &ObjectScalers,
    readings: &MetricMap<MetricReading>,
    fallback: Option<&FallbackSpec>,
    errors: &mut Vec<String>,
) -> Option<f64> {
    let m = scalers.modifiers.as_ref()?;
    let standing_in = readings
        .values()
        .filter(|r| r.fallback)
        .min_by_key(|r| r.trigger_index)
        .and_then(|r| r.value);
    if standing_in.is_some() {
        return standing_in;
    }
    let values: Vec<Option<f64>> = m
        .formula
        .trigger_names()
        .iter()
        .map(|trigger_name| {
            let index = scalers
                .triggers
                .iter()
                .find(|t| &t.name == trigger_name)
                .map(|t| t.index)?;
            readings
                .values()
                .find(|r| r.trigger_index == index)
                .and_then(|r| r.value)
        })
        .collect();
    match m.formula.evaluate(&values) {
        Ok(result) => composite_value(result, fallback, m.target),
        Err(e) => {
            errors.push(e.to_string());
            None
        }
    }
}
