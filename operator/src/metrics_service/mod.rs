//! The operator's metric service: the one internal endpoint the metrics-apiserver asks for the
//! value of an external metric.
//!
//! The protocol is HTTP/2 over mutual TLS (hyper + tokio-rustls, both already in the tree through
//! kube): `GET /v1/namespaces/{ns}/scaledobjects/{name}/metrics/{metric}` answers a
//! [`keda_api::external_metrics::MetricValuesResponse`] or a
//! [`keda_api::external_metrics::ServiceError`] with a status that classifies it. One warm
//! HTTP/2 connection multiplexes every request of the metrics-apiserver, so a request costs one
//! round trip on loopback or inside the cluster, never a handshake. JSON keeps the protocol
//! readable with `curl --http2` and needs no code generation.
//!
//! The values come from a [`MetricValues`] implementation: in the operator, the scale loops'
//! own scalers (one connection per event source, `useCachedMetrics`, fallback and
//! `scalingModifiers` applied); in tests and benchmarks, an in-memory table.

mod server;
mod tls;

use async_trait::async_trait;
use keda_scalers::{MetricValue, ScalerError};

pub use server::{MetricsService, MetricsServiceOptions, ServeError};
pub use tls::{TlsConfigError, server_config};

/// Where the values of external metrics come from.
///
/// Implementations are shared by every connection and called concurrently.
#[async_trait]
pub trait MetricValues: Send + Sync + 'static {
    /// The values of `metric_name` of the ScaledObject `namespace/scaled_object`.
    ///
    /// `metric_name` arrives as the HPA asked for it, which the metrics API lower-cases:
    /// implementations must match it case-insensitively
    /// ([`keda_api::external_metrics::metric_names_match`]), as KEDA does. The returned values
    /// carry the ScaledObject's own spelling of the name.
    ///
    /// The caller bounds the time it waits and drops the future when it gives up, so
    /// implementations must be cancellation-safe.
    ///
    /// # Errors
    /// See [`MetricsError`]; each variant becomes a distinct status for the HPA.
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError>;
}

/// Why [`MetricValues::metric_values`] has no value.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The operator does not know the ScaledObject (not created, deleted, or not reconciled yet).
    #[error("ScaledObject {namespace}/{name} is not managed by the operator")]
    ScaledObjectNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The ScaledObject has no trigger with that metric name.
    #[error("ScaledObject {namespace}/{name} has no metric named {metric}")]
    MetricNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The metric asked for.
        metric: String,
    },
    /// The operator cannot answer at the moment (starting, not the leader).
    #[error("the operator cannot serve metrics now: {reason}")]
    Unavailable {
        /// Why.
        reason: String,
    },
    /// The scaler failed to read the metric and no fallback applies.
    #[error("ScaledObject {namespace}/{name}: reading metric {metric} failed: {source}")]
    ScalerFailed {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The metric asked for.
        metric: String,
        /// What the scaler reported.
        #[source]
        source: ScalerError,
    },
}
