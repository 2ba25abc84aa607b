//! The operator's metric recording points, in one place. Each function is called where KEDA
//! records the Prometheus metric of the same name (KEDA-CONTRACT 1.13); until the telemetry
//! module lands they emit `tracing` events at TRACE level with the same labels, so swapping in
//! the Prometheus recorders is a change in this file only.

use std::time::Duration;

use tracing::trace;

/// Labels of the per-trigger metrics: `namespace, metric, scaledObject, scaler, triggerIndex,
/// type`.
#[derive(Clone, Copy, Debug)]
pub struct ScalerLabels<'a> {
    /// Namespace of the object.
    pub namespace: &'a str,
    /// The metric name (`s0-redis-jobs`).
    pub metric: &'a str,
    /// The object's name.
    pub scaled_object: &'a str,
    /// The scaler (trigger type).
    pub scaler: &'a str,
    /// The trigger index.
    pub trigger_index: usize,
}

/// `keda_scaler_metrics_value`.
pub fn scaler_metrics_value(l: ScalerLabels<'_>, value: f64) {
    trace!(metric = "keda_scaler_metrics_value", ?l, value);
}

/// `keda_scaler_active`.
pub fn scaler_active(l: ScalerLabels<'_>, active: bool) {
    trace!(metric = "keda_scaler_active", ?l, active);
}

/// `keda_scaler_metrics_latency_seconds`.
pub fn scaler_metrics_latency(l: ScalerLabels<'_>, latency: Duration) {
    trace!(metric = "keda_scaler_metrics_latency_seconds", ?l, ?latency);
}

/// `keda_scaler_detail_errors_total`.
pub fn scaler_error(l: ScalerLabels<'_>) {
    trace!(metric = "keda_scaler_detail_errors_total", ?l);
}

/// `keda_scaled_object_errors_total`.
pub fn scaled_object_error(namespace: &str, scaled_object: &str) {
    trace!(
        metric = "keda_scaled_object_errors_total",
        namespace, scaled_object
    );
}

/// `keda_scaled_object_paused`.
pub fn scaled_object_paused(namespace: &str, scaled_object: &str, paused: bool) {
    trace!(
        metric = "keda_scaled_object_paused",
        namespace, scaled_object, paused
    );
}

/// `keda_internal_scale_loop_latency_seconds`: how late a poll ran against its schedule.
pub fn scale_loop_latency(namespace: &str, scaled_object: &str, lag: Duration) {
    trace!(
        metric = "keda_internal_scale_loop_latency_seconds",
        namespace,
        scaled_object,
        ?lag
    );
}

/// `keda_resource_registered_total` (+1 when a loop starts, -1 when it stops).
pub fn resource_registered(namespace: &str, delta: i64) {
    trace!(metric = "keda_resource_registered_total", namespace, delta);
}

/// `keda_trigger_registered_total` (+1 per trigger when a loop starts, -1 when it stops).
pub fn trigger_registered(trigger_type: &str, delta: i64) {
    trace!(
        metric = "keda_trigger_registered_total",
        trigger_type, delta
    );
}
