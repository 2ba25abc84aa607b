//! The metric service's HTTP/2 server.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use keda_api::external_metrics::{
    ExternalMetricValue, MetricValuesResponse, ServiceError, ServiceErrorReason,
};
use keda_scalers::Clock;
use keda_scalers::pool::Lease;
use keda_scalers::scalers::http::hub::{ActivatorHub, HubKey, serve_reports};
use keda_scalers::scalers::http::protocol::REPORT_PATH;
use keda_tls::Identity;
use rustls::ServerConfig;
use rustls_pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{MetricValues, MetricsError};
use crate::process::telemetry::Metrics;

/// How the metric service bounds its work.
#[derive(Clone, Debug)]
pub struct MetricsServiceOptions {
    /// The longest a request may take before it is answered `504 Timeout`. Keep it below the
    /// metrics-apiserver's own timeout so the HPA sees the operator's classification.
    pub request_timeout: Duration,
    /// The longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Timestamps the values (`timestamp` of each item).
    pub clock: Clock,
}

impl Default for MetricsServiceOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_millis(2500),
            handshake_timeout: Duration::from_secs(10),
            clock: Clock::system(),
        }
    }
}

/// Why the metric service cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listener has no local address (it is not bound).
    #[error("the metric service's listener is not usable: {0}")]
    Listener(#[source] std::io::Error),
}

/// The metric service: answers the metrics-apiserver from a [`MetricValues`].
#[derive(Clone)]
pub struct MetricsService {
    values: Arc<dyn MetricValues>,
    options: MetricsServiceOptions,
    reports: Option<Arc<Lease<HubKey, ActivatorHub>>>,
    metrics: Option<Metrics>,
}

impl std::fmt::Debug for MetricsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsService")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl MetricsService {
    /// A service answering from `values`.
    pub fn new(values: Arc<dyn MetricValues>, options: MetricsServiceOptions) -> Self {
        Self {
            values,
            options,
            reports: None,
            metrics: None,
        }
    }

    /// Records every metric read in `metrics` as KEDA's metric service records its gRPC calls
    /// (`keda_internal_metricsservice_grpc_server_*`, method `api.MetricsService/GetMetrics`).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Also accepts the activators' report streams at [`REPORT_PATH`], feeding `hub` (the one
    /// the `http` push scalers read, shared through the controller's client pools).
    #[must_use]
    pub fn with_reports(mut self, hub: Lease<HubKey, ActivatorHub>) -> Self {
        self.reports = Some(Arc::new(hub));
        self
    }

    /// Serves mutual-TLS HTTP/2 (and HTTP/1.1) connections accepted on `listener` until
    /// `cancel` is cancelled; then stops accepting and lets open connections finish their
    /// requests. `tls` should require client certificates ([`super::server_config`]).
    ///
    /// # Errors
    /// [`ServeError::Listener`] when the listener is unusable. Failed accepts and handshakes of
    /// single connections are logged and do not stop the service.
    pub async fn serve(
        self,
        listener: TcpListener,
        tls: Arc<ServerConfig>,
        cancel: CancellationToken,
    ) -> Result<(), ServeError> {
        let local = listener.local_addr().map_err(ServeError::Listener)?;
        debug!(%local, "metric service listening");
        let acceptor = TlsAcceptor::from(tls);
        loop {
            let (tcp, peer) = tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Typically EMFILE; pausing briefly keeps the loop from spinning.
                        warn!(%error, "metric service: accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // Request/response latency matters more than throughput here.
            let _ = tcp.set_nodelay(true);
            let this = self.clone();
            let acceptor = acceptor.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let handshake =
                    tokio::time::timeout(this.options.handshake_timeout, acceptor.accept(tcp));
                let stream = match handshake.await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) => {
                        debug!(%peer, %error, "metric service: TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        debug!(%peer, "metric service: TLS handshake timed out");
                        return;
                    }
                };
                let client = Client::of(peer, stream.get_ref().1.peer_certificates());
                this.serve_connection(stream, client, cancel).await;
            });
        }
    }

    async fn serve_connection(
        &self,
        stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        client: Client,
        cancel: CancellationToken,
    ) {
        let this = self.clone();
        let client = Arc::new(client);
        let service = service_fn(move |request: Request<Incoming>| {
            let this = this.clone();
            let client = Arc::clone(&client);
            async move {
                let path = request.uri().path();
                if let Some(refused) = client.refusal(path) {
                    return Ok::<_, Infallible>(refused);
                }
                if let Some(hub) = &this.reports
                    && path == REPORT_PATH
                {
                    return Ok::<_, Infallible>(serve_reports(hub, request).await);
                }
                Ok::<_, Infallible>(this.respond(request.method(), path).await)
            }
        });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(10))
            .max_concurrent_streams(1024);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    debug!(%error, "metric service: connection ended with an error");
                }
            }
            () = cancel.cancelled() => {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    }

    /// The answer to one request: the status and the JSON body. Exposed so tests (and other
    /// transports) can drive the service without sockets.
    pub async fn respond(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if path == "/healthz" {
            return json_response(StatusCode::OK, Bytes::from_static(b"{}"));
        }
        if method != Method::GET {
            return error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                ServiceErrorReason::BadRequest,
                format!("method {method} is not allowed; use GET"),
            );
        }
        let Some((namespace, name, metric)) = parse_metric_path(path) else {
            return error_response(
                StatusCode::NOT_FOUND,
                ServiceErrorReason::BadRequest,
                format!(
                    "no such path {path}; use /v1/namespaces/{{namespace}}/scaledobjects/{{name}}/metrics/{{metric}}"
                ),
            );
        };
        let started = Instant::now();
        if let Some(metrics) = &self.metrics {
            metrics.metric_service_call_started();
        }
        let response = self.metric_values(&namespace, &name, &metric).await;
        if let Some(metrics) = &self.metrics {
            metrics.metric_service_call_handled(
                response.status() == StatusCode::OK,
                started.elapsed(),
            );
        }
        response
    }

    /// The answer to a read of `metric` of ScaledObject `namespace/name`.
    async fn metric_values(
        &self,
        namespace: &str,
        name: &str,
        metric: &str,
    ) -> Response<Full<Bytes>> {
        let lookup = self.values.metric_values(namespace, name, metric);
        match tokio::time::timeout(self.options.request_timeout, lookup).await {
            Ok(Ok(values)) => {
                let timestamp = Time(self.options.clock.now());
                let items = values
                    .iter()
                    .map(|v| ExternalMetricValue {
                        metric_name: v.name.clone(),
                        metric_labels: Default::default(),
                        timestamp: timestamp.clone(),
                        window_seconds: None,
                        value: v.quantity(),
                    })
                    .collect();
                match serde_json::to_vec(&MetricValuesResponse { items }) {
                    Ok(body) => json_response(StatusCode::OK, Bytes::from(body)),
                    Err(error) => error_response(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        ServiceErrorReason::ScalerFailed,
                        format!("encoding the values failed: {error}"),
                    ),
                }
            }
            Ok(Err(error)) => {
                let (status, reason) = classify(&error);
                if status.is_server_error() {
                    warn!(%namespace, %name, %metric, %error, "metric service: no value");
                } else {
                    debug!(%namespace, %name, %metric, %error, "metric service: no value");
                }
                error_response(status, reason, error.to_string())
            }
            Err(_) => {
                warn!(%namespace, %name, %metric, "metric service: reading the metric timed out");
                error_response(
                    StatusCode::GATEWAY_TIMEOUT,
                    ServiceErrorReason::Timeout,
                    format!(
                        "ScaledObject {namespace}/{name}: reading metric {metric} took longer than {:?}",
                        self.options.request_timeout
                    ),
                )
            }
        }
    }
}

/// The identity an endpoint serves: activator report streams for the activators, `/healthz`
/// for any client of the CA, everything else (metric reads) for the metrics-apiserver.
fn allowed_identity(path: &str) -> Option<Identity> {
    match path {
        "/healthz" => None,
        REPORT_PATH => Some(Identity::Activator),
        _ => Some(Identity::MetricsApiserver),
    }
}

/// The caller of one connection, as its verified client certificate names it.
#[derive(Debug)]
struct Client {
    address: std::net::SocketAddr,
    identity: Option<Identity>,
    /// The certificate's common name as written, for the log.
    common_name: String,
}

impl Client {
    fn of(address: std::net::SocketAddr, certificates: Option<&[CertificateDer<'_>]>) -> Self {
        let end_entity = certificates.and_then(<[_]>::first);
        Self {
            address,
            identity: end_entity.and_then(Identity::of_certificate),
            common_name: end_entity
                .and_then(keda_tls::common_name)
                .unwrap_or_default(),
        }
    }

    /// `None` when this client may call `path`; else the 403 answer, logged once here.
    fn refusal(&self, path: &str) -> Option<Response<Full<Bytes>>> {
        let allowed = allowed_identity(path)?;
        if self.identity == Some(allowed) {
            return None;
        }
        warn!(
            client = %self.address,
            common_name = %self.common_name,
            %path,
            allowed = %allowed,
            "metric service: refused a client certificate not allowed on this endpoint"
        );
        Some(error_response(
            StatusCode::FORBIDDEN,
            ServiceErrorReason::Forbidden,
            format!(
                "the client certificate {:?} may not use {path}: only {allowed}'s may (the {} Secret's certificate)",
                self.common_name,
                allowed.secret_name()
            ),
        ))
    }
}

/// The one place errors become statuses.
fn classify(error: &MetricsError) -> (StatusCode, ServiceErrorReason) {
    match error {
        MetricsError::ScaledObjectNotFound { .. } => (
            StatusCode::NOT_FOUND,
            ServiceErrorReason::ScaledObjectNotFound,
        ),
        MetricsError::MetricNotFound { .. } => {
            (StatusCode::NOT_FOUND, ServiceErrorReason::MetricNotFound)
        }
        MetricsError::Unavailable { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            ServiceErrorReason::Unavailable,
        ),
        MetricsError::ScalerFailed { .. } | MetricsError::ReadFailed { .. } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            ServiceErrorReason::ScalerFailed,
        ),
    }
}

fn json_response(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(
    status: StatusCode,
    reason: ServiceErrorReason,
    message: String,
) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(&ServiceError { reason, message }).unwrap_or_default();
    json_response(status, Bytes::from(body))
}

/// `/v1/namespaces/{ns}/scaledobjects/{name}/metrics/{metric}`, percent-decoded.
fn parse_metric_path(path: &str) -> Option<(String, String, String)> {
    let rest = path.strip_prefix("/v1/namespaces/")?;
    let mut parts = rest.split('/');
    let namespace = parts.next()?;
    if parts.next()? != "scaledobjects" {
        return None;
    }
    let name = parts.next()?;
    if parts.next()? != "metrics" {
        return None;
    }
    let metric = parts.next()?;
    if parts.next().is_some() || namespace.is_empty() || name.is_empty() || metric.is_empty() {
        return None;
    }
    Some((
        percent_decode(namespace)?,
        percent_decode(name)?,
        percent_decode(metric)?,
    ))
}

fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keda_api::external_metrics::metric_values_path;

    #[test]
    fn paths_built_by_the_protocol_parse_back_to_their_parts() {
        for (ns, name, metric) in [
            ("default", "app", "s0-redis-mylist"),
            ("a/b", "c d", "e%f"),
            ("ns", "so", "s1-rabbitmq-ÄÖ"),
        ] {
            let path = metric_values_path(ns, name, metric);
            assert_eq!(
                parse_metric_path(&path),
                Some((ns.to_string(), name.to_string(), metric.to_string())),
                "{path}"
            );
        }
    }

    #[test]
    fn paths_of_another_shape_are_rejected() {
        for path in [
            "/v1/namespaces/ns/scaledobjects/so/metrics",
            "/v1/namespaces/ns/scaledobjects/so/metrics/m/extra",
            "/v1/namespaces/ns/scaledjobs/so/metrics/m",
            "/v1/namespaces//scaledobjects/so/metrics/m",
            "/v1/namespaces/ns/scaledobjects/so/metrics/%zz",
            "/other",
        ] {
            assert_eq!(parse_metric_path(path), None, "{path}");
        }
    }
}
