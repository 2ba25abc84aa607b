//! What the operator tells its operators: Prometheus metrics with KEDA's names and labels
//! ([`Metrics`]), the same series over OTLP with KEDA's OpenTelemetry names ([`otel`], with
//! `--enable-opentelemetry-metrics`) and structured logs ([`init_logging`]).

mod logging;
mod metrics;
pub mod otel;

pub use logging::{LogFormat, LoggingError, TimeEncoding, init_logging};
pub use metrics::{
    BuildInfo, CustomResourceKind, METRICS_CONTENT_TYPE, Metrics, ResourceKind, ScalerLabels,
    ScalerName, TriggerKey, scaler_label,
};
