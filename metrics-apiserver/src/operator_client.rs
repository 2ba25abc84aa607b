//! The client of the operator's metric service: one warm HTTP/2 connection over mutual TLS,
//! reconnected when it drops, every request bounded in time, nothing cached.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use keda_api::external_metrics::{
    ExternalMetricValue, MetricValuesResponse, ServiceError, metric_values_path,
};
use keda_tls::{CertStore, ServerCaVerifier, mutual_tls_client_config};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Why the operator gave no value.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// No connection to the operator could be made.
    #[error("cannot connect to the operator's metric service at {address}: {reason}")]
    Connect {
        /// The address (`--metrics-service-address`).
        address: String,
        /// Why.
        reason: String,
    },
    /// The connection failed while the request was in flight.
    #[error("the connection to the operator's metric service at {address} failed: {reason}")]
    Connection {
        /// The address.
        address: String,
        /// Why.
        reason: String,
    },
    /// No answer within the bound.
    #[error(
        "no answer from the operator's metric service at {address} within {after:?} (--metrics-service-timeout)"
    )]
    Timeout {
        /// The address.
        address: String,
        /// The bound.
        after: Duration,
    },
    /// The operator answered with an error.
    #[error("{}", .error.message)]
    Service {
        /// The HTTP status it answered.
        status: u16,
        /// Its classification and message.
        error: ServiceError,
    },
    /// The operator answered something that is not the protocol.
    #[error("the operator's metric service answered {status} with an unreadable body: {reason}")]
    Protocol {
        /// The HTTP status it answered.
        status: u16,
        /// What could not be read.
        reason: String,
    },
}

/// Where the metrics-apiserver gets metric values.
#[async_trait]
pub trait MetricSource: Send + Sync + 'static {
    /// The values of `metric` of the ScaledObject `namespace/scaled_object`.
    ///
    /// # Errors
    /// [`OperatorError`].
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric: &str,
    ) -> Result<Vec<ExternalMetricValue>, OperatorError>;
}

/// How to reach the operator.
#[derive(Clone, Debug)]
pub struct OperatorClientConfig {
    /// `host:port` of the metric service.
    pub address: String,
    /// The name the operator's serving certificate must carry.
    pub server_name: ServerName<'static>,
    /// The TLS configuration ([`client_tls_config`]).
    pub tls: Arc<ClientConfig>,
    /// The longest a connection attempt may take.
    pub connect_timeout: Duration,
    /// The longest a request may take, connecting included.
    pub request_timeout: Duration,
}

/// The TLS configuration of the operator client: the operator's serving certificate must chain
/// to the CA of `operator_ca`; the client presents the certificate of `client_cert`; both may be
/// reloaded ([`keda_tls::mutual_tls_client_config`]); ALPN `h2`.
///
/// # Errors
/// rustls refuses the protocol versions (does not happen with the ring provider).
pub fn client_tls_config(
    operator_ca: Arc<ServerCaVerifier>,
    client_cert: Arc<CertStore>,
) -> Result<ClientConfig, rustls::Error> {
    let mut config = mutual_tls_client_config(operator_ca, client_cert)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The client. Cheap to share; every request multiplexes over the one connection.
pub struct OperatorClient {
    config: OperatorClientConfig,
    authority: String,
    sender: ArcSwapOption<SendRequest<Full<Bytes>>>,
    connecting: tokio::sync::Mutex<()>,
    closed: Arc<Notify>,
    runtime: Handle,
}

impl std::fmt::Debug for OperatorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorClient")
            .field("address", &self.config.address)
            .finish_non_exhaustive()
    }
}

impl OperatorClient {
    /// A client for `config`. Connections are made and driven on the tokio runtime current at
    /// this call, so requests may come from any runtime (actix runs one per worker thread).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new(config: OperatorClientConfig) -> Self {
        let authority = match &config.server_name {
            ServerName::DnsName(name) => {
                let port = config.address.rsplit_once(':').map_or("443", |(_, p)| p);
                format!("{}:{port}", name.as_ref())
            }
            _ => config.address.clone(),
        };
        Self {
            config,
            authority,
            sender: ArcSwapOption::empty(),
            connecting: tokio::sync::Mutex::new(()),
            closed: Arc::new(Notify::new()),
            runtime: Handle::current(),
        }
    }

    /// Keeps a connection open until `cancel`: connects at once, and reconnects (with backoff
    /// up to 5 s) whenever the connection drops, so the first request after an operator restart
    /// does not pay for the handshake and a broken connection is noticed without a request.
    pub fn keep_warm(self: &Arc<Self>, cancel: CancellationToken) {
        let this = Arc::clone(self);
        self.runtime.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let wait = match this.connection().await {
                    Ok(_) => {
                        backoff = Duration::from_millis(100);
                        // Woken when the connection ends; the periodic check covers a
                        // connection that is replaced without ending.
                        tokio::select! {
                            () = cancel.cancelled() => return,
                            () = this.closed.notified() => continue,
                            () = tokio::time::sleep(Duration::from_secs(5)) => continue,
                        }
                    }
                    Err(error) => {
                        warn!(%error, retry_in = ?backoff, "operator metric service not reachable");
                        let wait = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        wait
                    }
                };
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        });
    }

    /// Whether a connection is open now.
    pub fn is_connected(&self) -> bool {
        self.sender
            .load()
            .as_ref()
            .is_some_and(|sender| !sender.is_closed())
    }

    async fn connection(&self) -> Result<SendRequest<Full<Bytes>>, OperatorError> {
        if let Some(sender) = self.open_sender() {
            return Ok(sender);
        }
        // One connection attempt at a time; the others wait for its result.
        let _connecting = self.connecting.lock().await;
        if let Some(sender) = self.open_sender() {
            return Ok(sender);
        }
        let sender = self.connect().await?;
        self.sender.store(Some(Arc::new(sender.clone())));
        Ok(sender)
    }

    fn open_sender(&self) -> Option<SendRequest<Full<Bytes>>> {
        self.sender
            .load()
            .as_ref()
            .filter(|sender| !sender.is_closed())
            .map(|sender| (**sender).clone())
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, OperatorError> {
        let address = self.config.address.clone();
        let server_name = self.config.server_name.clone();
        let connector = TlsConnector::from(Arc::clone(&self.config.tls));
        let closed = Arc::clone(&self.closed);
        let connect_error = |reason: String| OperatorError::Connect {
            address: self.config.address.clone(),
            reason,
        };
        let attempt = async move {
            let tcp = TcpStream::connect(&address)
                .await
                .map_err(|e| format!("TCP: {e}"))?;
            let _ = tcp.set_nodelay(true);
            let tls = connector
                .connect(server_name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            let (sender, connection) =
                hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                    .timer(TokioTimer::new())
                    .keep_alive_interval(Duration::from_secs(30))
                    .keep_alive_timeout(Duration::from_secs(10))
                    .keep_alive_while_idle(true)
                    .handshake(TokioIo::new(tls))
                    .await
                    .map_err(|e| format!("HTTP/2: {e}"))?;
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    debug!(%error, "operator connection ended with an error");
                }
                closed.notify_one();
            });
            Ok::<_, String>(sender)
        };
        // Spawned on the client's runtime so the connection outlives the caller's worker.
        let task = self.runtime.spawn(attempt);
        match tokio::time::timeout(self.config.connect_timeout, task).await {
            Ok(Ok(Ok(sender))) => {
                info!(address = %self.config.address, "connected to the operator's metric service");
                Ok(sender)
            }
            Ok(Ok(Err(reason))) => Err(connect_error(reason)),
            Ok(Err(join)) => Err(connect_error(join.to_string())),
            Err(_) => Err(connect_error(format!(
                "no connection within {:?}",
                self.config.connect_timeout
            ))),
        }
    }

    async fn request(&self, path: &str) -> Result<Vec<ExternalMetricValue>, OperatorError> {
        let mut retried = false;
        loop {
            let mut sender = self.connection().await?;
            let request = Request::get(format!("https://{}{path}", self.authority))
                .header(header::ACCEPT, "application/json")
                .body(Full::new(Bytes::new()))
                .map_err(|e| OperatorError::Protocol {
                    status: 0,
                    reason: e.to_string(),
                })?;
            let response = match sender.send_request(request).await {
                Ok(response) => response,
                Err(error) => {
                    if sender.is_closed() {
                        self.sender.store(None);
                    }
                    // A GET is safe to repeat; one retry covers a connection that the operator
                    // closed (restart, GOAWAY) just before the request.
                    if !retried {
                        retried = true;
                        continue;
                    }
                    return Err(OperatorError::Connection {
                        address: self.config.address.clone(),
                        reason: error.to_string(),
                    });
                }
            };
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| OperatorError::Connection {
                    address: self.config.address.clone(),
                    reason: e.to_string(),
                })?
                .to_bytes();
            return decode(status, &body);
        }
    }
}

fn decode(status: StatusCode, body: &[u8]) -> Result<Vec<ExternalMetricValue>, OperatorError> {
    let protocol = |reason: String| OperatorError::Protocol {
        status: status.as_u16(),
        reason,
    };
    if status == StatusCode::OK {
        let response: MetricValuesResponse =
            serde_json::from_slice(body).map_err(|e| protocol(e.to_string()))?;
        return Ok(response.items);
    }
    let error: ServiceError = serde_json::from_slice(body).map_err(|e| protocol(e.to_string()))?;
    Err(OperatorError::Service {
        status: status.as_u16(),
        error,
    })
}

#[async_trait]
impl MetricSource for OperatorClient {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric: &str,
    ) -> Result<Vec<ExternalMetricValue>, OperatorError> {
        let path = metric_values_path(namespace, scaled_object, metric);
        tokio::time::timeout(self.config.request_timeout, self.request(&path))
            .await
            .map_err(|_| OperatorError::Timeout {
                address: self.config.address.clone(),
                after: self.config.request_timeout,
            })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keda_api::external_metrics::ServiceErrorReason;

    #[test]
    fn error_bodies_of_the_operator_keep_their_classification() {
        let body =
            br#"{"reason":"MetricNotFound","message":"ScaledObject a/b has no metric named m"}"#;
        let error = decode(StatusCode::NOT_FOUND, body).expect_err("an error");
        assert!(
            matches!(
                &error,
                OperatorError::Service { status: 404, error } if error.reason == ServiceErrorReason::MetricNotFound
            ),
            "{error}"
        );
        assert_eq!(error.to_string(), "ScaledObject a/b has no metric named m");
    }

    #[test]
    fn an_unreadable_answer_is_a_protocol_error_naming_the_status() {
        let error = decode(StatusCode::BAD_GATEWAY, b"<html>").expect_err("an error");
        assert!(
            matches!(error, OperatorError::Protocol { status: 502, .. }),
            "{error}"
        );
    }
}
