//! The operator's metric recording points, in one place. Each function is called where KEDA
//! records the Prometheus metric of the same name (KEDA-CONTRACT 1.13) and records it through
//! [`Metrics`] (KEDA's names, labels and help texts), plus a `tracing` event at TRACE level.

use std::time::Duration;

use tracing::{error, trace};

use crate::process::telemetry::{
    CustomResourceKind, Metrics, ResourceKind, ScalerName, TriggerKey,
};
use crate::shared::isolation::InternalError;

/// Labels of the per-trigger metrics: `namespace, metric, scaledObject, scaler, triggerIndex,
/// type`.
#[derive(Clone, Copy, Debug)]
pub struct ScalerLabels<'a> {
    /// ScaledObject or ScaledJob (the `type` label; `scaledObject` holds either's name).
    pub kind: ResourceKind,
    /// Namespace of the object.
    pub namespace: &'a str,
    /// The metric name (`s0-redis-jobs`).
    pub metric: &'a str,
    /// The object's name.
    pub scaled_object: &'a str,
    /// The trigger type (`redis`).
    pub scaler: &'a str,
    /// `triggers[].name`; when set, KEDA reports it as the `scaler` label.
    pub trigger_name: &'a str,
    /// The trigger index.
    pub trigger_index: usize,
}

impl<'a> ScalerLabels<'a> {
    /// The series these labels name, borrowed: recording allocates nothing once it exists.
    fn key(&self) -> TriggerKey<'a> {
        TriggerKey {
            kind: self.kind,
            namespace: self.namespace,
            scaled_resource: self.scaled_object,
            scaler: ScalerName::Trigger {
                trigger_type: self.scaler,
                name: self.trigger_name,
            },
            trigger_index: self.trigger_index,
            metric: self.metric,
        }
    }
}

/// `keda_scaler_metrics_value`.
pub fn scaler_metrics_value(metrics: &Metrics, l: ScalerLabels<'_>, value: f64) {
    trace!(metric = "keda_scaler_metrics_value", ?l, value);
    metrics.scaler_value(l.key(), value);
}

/// `keda_scaler_active`.
pub fn scaler_active(metrics: &Metrics, l: ScalerLabels<'_>, active: bool) {
    trace!(metric = "keda_scaler_active", ?l, active);
    metrics.scaler_active(l.key(), active);
}

/// `keda_scaler_metrics_latency_seconds`.
pub fn scaler_metrics_latency(metrics: &Metrics, l: ScalerLabels<'_>, latency: Duration) {
    trace!(metric = "keda_scaler_metrics_latency_seconds", ?l, ?latency);
    metrics.scaler_latency(l.key(), latency);
}

/// `keda_scaler_detail_errors_total` (and the object's `keda_scaled_object_errors_total`).
pub fn scaler_error(metrics: &Metrics, l: ScalerLabels<'_>) {
    trace!(metric = "keda_scaler_detail_errors_total", ?l);
    metrics.scaler_error(l.key());
}

/// A successful read: the error counters exist at 0 from then on.
pub fn scaler_ok(metrics: &Metrics, l: ScalerLabels<'_>) {
    metrics.scaler_ok(l.key());
}

/// `keda_scaled_object_errors_total`.
pub fn scaled_object_error(metrics: &Metrics, namespace: &str, scaled_object: &str) {
    trace!(
        metric = "keda_scaled_object_errors_total",
        namespace, scaled_object
    );
    metrics.scaled_object_error(namespace, scaled_object);
}

/// `keda_scaled_object_paused`.
pub fn scaled_object_paused(metrics: &Metrics, namespace: &str, scaled_object: &str, paused: bool) {
    trace!(
        metric = "keda_scaled_object_paused",
        namespace, scaled_object, paused
    );
    metrics.paused(namespace, scaled_object, paused);
}

/// `keda_internal_scale_loop_latency_seconds`: how late a poll of the loop of a ScaledObject
/// or ScaledJob ran against its schedule.
pub fn scale_loop_latency(
    metrics: &Metrics,
    kind: ResourceKind,
    namespace: &str,
    name: &str,
    lag: Duration,
) {
    trace!(
        metric = "keda_internal_scale_loop_latency_seconds",
        kind = kind.as_str(),
        namespace,
        name,
        ?lag
    );
    metrics.loop_latency(namespace, name, kind, lag);
}

/// `keda_resource_registered_total` and `keda_trigger_registered_total`: the custom resource
/// `namespace/name` is counted with `trigger_types`, replacing what it counted before (KEDA's
/// controllers' `updatePromMetrics`, at every reconcile of a live object).
pub fn resource_registered(
    metrics: &Metrics,
    kind: CustomResourceKind,
    (namespace, name): (&str, &str),
    uid: Option<&str>,
    trigger_types: &[&str],
) {
    trace!(
        metric = "keda_resource_registered_total",
        kind = kind.as_str(),
        namespace,
        name,
        ?trigger_types
    );
    metrics.register_resource(kind, (namespace, name), uid, trigger_types);
}

/// The custom resource `namespace/name` (of `uid`, when given) is no longer counted (KEDA's
/// `updatePromMetricsOnDelete`).
pub fn resource_unregistered(
    metrics: &Metrics,
    kind: CustomResourceKind,
    (namespace, name): (&str, &str),
    uid: Option<&str>,
) {
    trace!(
        metric = "keda_resource_registered_total",
        kind = kind.as_str(),
        namespace,
        name,
        "unregistered"
    );
    metrics.unregister_resource(kind, (namespace, name), uid);
}

/// `keda_internal_panics_total`, and the one log line of a caught panic: `error` was caught in
/// the work of the ScaledObject or ScaledJob `namespace/name` (see [`crate::shared::isolation`]).
pub fn internal_panic(
    metrics: &Metrics,
    kind: ResourceKind,
    (namespace, name): (&str, &str),
    error: &InternalError,
) {
    let component = error.component;
    error!(
        component = component.as_str(),
        kind = kind.as_str(),
        namespace,
        name,
        %error,
        "caught a panic; the operator and the other objects keep running"
    );
    metrics.internal_panic(component.as_str(), kind, namespace, name);
}

/// A ScaledObject was deleted: its per-scaler series go away (its error counter stays).
pub fn scaled_object_deleted(metrics: &Metrics, namespace: &str, scaled_object: &str) {
    metrics.forget_scalers(namespace, scaled_object, ResourceKind::ScaledObject);
}
