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

use crate::scaled_object::scale_loop::{MetricQueryError, ScaleLoops};

pub use server::{MetricsService, MetricsServiceOptions, ServeError};
pub use tls::{MetricServiceTls, TlsConfigError, server_config};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The files of the metric service's mutual TLS, as `keda-rs-certs` lays out its Secret
/// (`tls.crt`, `tls.key`, `ca.crt`, mounted at `/certs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The serving certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA that signs the metrics-apiserver's and the activators' client certificates (PEM).
    pub client_ca: PathBuf,
}

impl TlsFiles {
    /// Whether none of the three files exists: then the certificates come from keda-rs'
    /// Secrets ([`serve_with_secrets`]). When only some exist, starting from the files names
    /// the missing one.
    pub fn none_exist(&self) -> bool {
        [&self.cert, &self.key, &self.client_ca]
            .iter()
            .all(|path| !path.exists())
    }
}

/// Why the metric service cannot start. Each message names the file or address to fix.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A TLS file cannot be read.
    #[error("cannot read the metric service's {what} {path}: {source}")]
    Read {
        /// Which file (`--metrics-service-cert-file`, ...).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The files do not make a TLS configuration.
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
    /// The address cannot be bound.
    #[error("cannot listen on {addr} (--metrics-service-bind-address): {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The listener failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

async fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, StartError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| StartError::Read {
            what,
            path: path.to_path_buf(),
            source,
        })
}

/// Reads the TLS files, binds `addr` and serves `service` until `cancel`. The files are checked
/// for changes every `reload_interval` ([`MetricServiceTls::reload_on_change`]).
///
/// # Errors
/// See [`StartError`].
pub async fn serve_on(
    addr: SocketAddr,
    files: &TlsFiles,
    reload_interval: Duration,
    service: MetricsService,
    cancel: CancellationToken,
) -> Result<(), StartError> {
    let tls = MetricServiceTls::from_files(files).await?;
    let config = tls.server_config()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })?;
    tls.reload_on_change(files, reload_interval, cancel.clone());
    let addr = listener.local_addr().unwrap_or(addr);
    tracing::info!(%addr, certificates = "files", "metric service listening");
    service.serve(listener, Arc::new(config), cancel).await?;
    Ok(())
}

/// How long [`serve_with_secrets`] waits before trying the Secrets again after a failure other
/// than a refusal (the API server unreachable, a conflict it could not resolve).
const SECRET_RETRY: Duration = Duration::from_secs(5);

/// Serves `service` on `addr` with the certificates of keda-rs' Secrets in the operator's
/// namespace, as KEDA's operator does with its own: `issuer` creates them (a fresh CA and the
/// three identities) when they do not exist and renews them before they expire; they are
/// checked every `interval`, and a change (a renewal, or a Secret replaced by someone else) is
/// served from the next handshake on.
///
/// Without permission to read or write them the operator cannot serve metrics but everything
/// else works: this says so in one warning and returns when `cancel` is cancelled, without
/// failing the other components. Other failures are retried every few seconds.
///
/// # Errors
/// The Secret's material is unusable, or `addr` cannot be bound.
pub async fn serve_with_secrets(
    addr: SocketAddr,
    issuer: keda_tls::Issuer,
    interval: Duration,
    service: MetricsService,
    cancel: CancellationToken,
) -> Result<(), StartError> {
    let mut failing = false;
    let material = loop {
        match issuer.ensure(jiff::Timestamp::now()).await {
            Ok(material) => break material,
            Err(error) if error.is_forbidden() => {
                tracing::warn!(
                    %error,
                    "metric service off: the HPA gets no external metrics from this operator; grant the permission and restart, or give certificate files (--metrics-service-cert-file, --metrics-service-key-file, --metrics-service-client-ca-file)"
                );
                cancel.cancelled().await;
                return Ok(());
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, retry = ?SECRET_RETRY, "the metric service's certificate Secrets cannot be prepared yet; retrying");
                }
                failing = true;
                tokio::select! {
                    () = cancel.cancelled() => return Ok(()),
                    () = tokio::time::sleep(SECRET_RETRY) => {}
                }
            }
        }
    };
    let tls = MetricServiceTls::from_secret(&material)?;
    let config = tls.server_config()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })?;
    tokio::spawn(renew(issuer, tls, material, interval, cancel.clone()));
    let addr = listener.local_addr().unwrap_or(addr);
    tracing::info!(%addr, certificates = "secret", "metric service listening");
    service.serve(listener, Arc::new(config), cancel).await?;
    Ok(())
}

/// Every `interval` until `cancel`: brings the Secrets up to date and serves what changed.
async fn renew(
    issuer: keda_tls::Issuer,
    tls: MetricServiceTls,
    mut serving: keda_tls::secrets::TlsSecret,
    interval: Duration,
    cancel: CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut failing = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let material = match issuer.ensure(jiff::Timestamp::now()).await {
            Ok(material) => material,
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "the metric service's certificate Secrets cannot be checked; serving the current certificate");
                }
                failing = true;
                continue;
            }
        };
        failing = false;
        if material == serving {
            continue;
        }
        match tls.replace_from(&material) {
            Ok(()) => {
                tracing::info!(secret = %material.what, "metric service certificate changed; serving the new one")
            }
            Err(error) => {
                tracing::warn!(%error, "the changed certificate Secret cannot be loaded; serving the previous certificate")
            }
        }
        serving = material;
    }
}

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
    /// The scale loop's read of the metric failed and no fallback applies; `message` is the
    /// loop's own (it names the trigger).
    #[error("ScaledObject {namespace}/{name}: reading metric {metric} failed: {message}")]
    ReadFailed {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The metric asked for.
        metric: String,
        /// What went wrong.
        message: String,
    },
}

/// The scale loops of the current leadership, as the metric service sees them: set when the
/// ScaledObject controller starts, cleared when it stops. Without loops the service answers
/// `Unavailable` (503), so the metrics-apiserver retries rather than reporting a missing object.
#[derive(Clone, Default)]
pub struct CurrentLoops(Arc<std::sync::RwLock<Option<ScaleLoops>>>);

impl std::fmt::Debug for CurrentLoops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentLoops")
            .field("set", &self.get().is_some())
            .finish()
    }
}

impl CurrentLoops {
    /// Publishes the loops of a controller that just started (`None` when it stopped).
    pub fn set(&self, loops: Option<ScaleLoops>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = loops;
    }

    /// The current loops, if a controller runs.
    pub fn get(&self) -> Option<ScaleLoops> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl MetricValues for CurrentLoops {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        let Some(loops) = self.get() else {
            return Err(MetricsError::Unavailable {
                reason: "the ScaledObject controller is not running (starting, or not the leader)"
                    .to_string(),
            });
        };
        MetricValues::metric_values(&loops, namespace, scaled_object, metric_name).await
    }
}

/// The operator's values: the scale loops' own scalers, with fallback, `useCachedMetrics` and
/// `scalingModifiers` applied ([`ScaleLoops::metric_values`]).
#[async_trait]
impl MetricValues for ScaleLoops {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        ScaleLoops::metric_values(self, namespace, scaled_object, metric_name)
            .await
            .map_err(|e| match e {
                MetricQueryError::NoLoop { namespace, name } => {
                    MetricsError::ScaledObjectNotFound { namespace, name }
                }
                MetricQueryError::NoMatchingMetric(metric) => MetricsError::MetricNotFound {
                    namespace: namespace.to_string(),
                    name: scaled_object.to_string(),
                    metric,
                },
                MetricQueryError::Failed { metric, error } => MetricsError::ReadFailed {
                    namespace: namespace.to_string(),
                    name: scaled_object.to_string(),
                    metric,
                    message: error,
                },
            })
    }
}
