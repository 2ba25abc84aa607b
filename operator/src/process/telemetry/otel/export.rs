//! Sending: the OTLP/HTTP or OTLP/gRPC exporter and the export loop.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use prost::Message as _;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::process::telemetry::Metrics;

use super::proto;
use super::proto::collector::metrics::v1::ExportMetricsServiceRequest;

use super::instruments::{Translator, export_request};
use super::settings::{OtlpProtocol, OtlpSettings};

/// Why the exporter could not be set up or one export failed. Never holds a header value or
/// anything the receiver answered beyond its status.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// A certificate file named by an `OTEL_EXPORTER_OTLP_*CERTIFICATE`/`KEY` variable.
    #[error("reading {0}: {1}")]
    File(String, std::io::Error),
    /// The TLS material is unusable.
    #[error("OTLP exporter TLS: {0}")]
    Tls(String),
    /// A header name or value HTTP cannot carry.
    #[error("OTEL_EXPORTER_OTLP_HEADERS: header {0:?} cannot be sent")]
    Header(String),
    /// The HTTP client or gRPC channel could not be built.
    #[error("building the OTLP client: {0}")]
    Client(String),
    /// The request failed or timed out.
    #[error("sending to {endpoint}: {reason}")]
    Send { endpoint: String, reason: String },
    /// The receiver refused the export.
    #[error("{endpoint} answered {status}")]
    Status { endpoint: String, status: String },
}

pub(super) enum Transport {
    Http {
        client: reqwest::Client,
        headers: reqwest::header::HeaderMap,
    },
    Grpc {
        client: proto::collector::metrics::v1::metrics_service_client::MetricsServiceClient<
            tonic::transport::Channel,
        >,
        headers: tonic::metadata::MetadataMap,
    },
}

/// Sends export requests as the settings say.
pub struct Exporter {
    settings: OtlpSettings,
    transport: Transport,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("endpoint", &self.settings.endpoint.as_str())
            .field("protocol", &self.settings.protocol)
            .finish_non_exhaustive()
    }
}

pub(super) fn read_file(path: &PathBuf) -> Result<String, OtlpError> {
    std::fs::read_to_string(path).map_err(|e| OtlpError::File(path.display().to_string(), e))
}

impl Exporter {
    /// An exporter for `settings`: reads the certificate files and builds the client; nothing
    /// is sent yet.
    ///
    /// # Errors
    /// A certificate file cannot be read or used, a header cannot be sent, the client cannot be
    /// built.
    pub fn new(settings: OtlpSettings) -> Result<Self, OtlpError> {
        use keda_scalers::secret::Secret;
        let tls = keda_scalers::tls::TlsSettings {
            insecure: false,
            ca: settings
                .ca_file
                .as_ref()
                .map(read_file)
                .transpose()?
                .map(Secret::new),
            client: match &settings.client_files {
                Some((cert, key)) => {
                    Some((Secret::new(read_file(cert)?), Secret::new(read_file(key)?)))
                }
                None => None,
            },
        };
        let transport = match settings.protocol {
            OtlpProtocol::HttpProtobuf => {
                // reqwest is built without a crypto provider of its own: ring, as everywhere.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let config = tls
                    .client_config()
                    .map_err(|e| OtlpError::Tls(e.to_string()))?;
                let client = reqwest::Client::builder()
                    .timeout(settings.timeout)
                    .tls_backend_preconfigured(config)
                    .build()
                    .map_err(|e| OtlpError::Client(e.to_string()))?;
                let mut headers = reqwest::header::HeaderMap::new();
                for (name, value) in &settings.headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| OtlpError::Header(name.clone()))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|_| OtlpError::Header(name.to_string()))?;
                    headers.append(name, value);
                }
                Transport::Http { client, headers }
            }
            OtlpProtocol::Grpc => {
                use keda_scalers::scalers::external::channel::{
                    ChannelKey, ExternalChannel, ScalerAddress,
                };
                let url = &settings.endpoint;
                let address = ScalerAddress {
                    host: url
                        .host_str()
                        .unwrap_or("localhost")
                        .trim_matches(['[', ']'])
                        .to_string(),
                    port: url.port_or_known_default().unwrap_or(4317),
                };
                let key = ChannelKey {
                    address,
                    tls: (url.scheme() == "https").then_some(tls),
                };
                let channel = ExternalChannel::new(&key, settings.timeout)
                    .map_err(|e| OtlpError::Client(e.to_string()))?;
                let client =
                    proto::collector::metrics::v1::metrics_service_client::MetricsServiceClient::new(
                        channel.channel(),
                    );
                let mut headers = tonic::metadata::MetadataMap::new();
                for (name, value) in &settings.headers {
                    let key = tonic::metadata::MetadataKey::from_bytes(
                        name.to_ascii_lowercase().as_bytes(),
                    )
                    .map_err(|_| OtlpError::Header(name.clone()))?;
                    let value = value.parse().map_err(|_| OtlpError::Header(name.clone()))?;
                    headers.append(key, value);
                }
                Transport::Grpc { client, headers }
            }
        };
        Ok(Self {
            settings,
            transport,
        })
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &OtlpSettings {
        &self.settings
    }

    /// Sends one export request.
    ///
    /// # Errors
    /// The request failed, timed out, or the receiver refused it.
    pub async fn send(&self, request: &ExportMetricsServiceRequest) -> Result<(), OtlpError> {
        let endpoint = self.settings.endpoint.to_string();
        match &self.transport {
            Transport::Http { client, headers } => {
                let mut body = request.encode_to_vec();
                let mut builder = client
                    .post(self.settings.endpoint.clone())
                    .headers(headers.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf");
                if self.settings.gzip {
                    let mut encoder =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    body = encoder
                        .write_all(&body)
                        .and_then(|()| encoder.finish())
                        .map_err(|e| OtlpError::Client(e.to_string()))?;
                    builder = builder.header(reqwest::header::CONTENT_ENCODING, "gzip");
                }
                let response = builder
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| OtlpError::Send {
                        endpoint: endpoint.clone(),
                        reason: e.without_url().to_string(),
                    })?;
                let status = response.status();
                if !status.is_success() {
                    return Err(OtlpError::Status {
                        endpoint,
                        status: status.to_string(),
                    });
                }
                Ok(())
            }
            Transport::Grpc { client, headers } => {
                let mut call = tonic::Request::new(request.clone());
                *call.metadata_mut() = headers.clone();
                call.set_timeout(self.settings.timeout);
                let mut client = client.clone();
                client
                    .export(call)
                    .await
                    .map(|_| ())
                    .map_err(|status| OtlpError::Status {
                        endpoint,
                        status: format!("gRPC status {:?}", status.code()),
                    })
            }
        }
    }
}

/// The bound of the export made at shutdown.
pub(super) const FINAL_EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Exports `metrics` every `settings.interval` until `cancel`, then once more (bounded by the
/// export timeout and at most 5 s), as the Go SDK's periodic reader does when shut down. A
/// failed export is logged; the next one sends the state of then (cumulative series lose
/// nothing; there are no retries).
pub async fn run(metrics: Metrics, exporter: Exporter, cancel: CancellationToken) {
    let settings = exporter.settings().clone();
    info!(
        endpoint = %settings.endpoint,
        protocol = ?settings.protocol,
        interval_ms = settings.interval.as_millis(),
        "exporting OpenTelemetry metrics over OTLP"
    );
    let exporter = Arc::new(exporter);
    let mut translator = Translator::new(settings.temporality, SystemTime::now());
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + settings.interval,
        settings.interval,
    );
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = ticks.tick() => false,
            () = cancel.cancelled() => true,
        };
        // Encoded on the blocking pool, as a scrape is (`serve::admin`): at 100,000 objects
        // it takes the better part of a second.
        let encoder = metrics.clone();
        let Ok(text) = tokio::task::spawn_blocking(move || encoder.encode()).await else {
            // The encoder panicked or the runtime is shutting down: nothing to export.
            if last {
                return;
            }
            continue;
        };
        let request = export_request(
            &settings.resource,
            translator.translate(&text, SystemTime::now()),
        );
        // The last export must not hold the shutdown up for long.
        let bound = if last {
            settings.export_timeout.min(FINAL_EXPORT_TIMEOUT)
        } else {
            settings.export_timeout
        };
        match tokio::time::timeout(bound, exporter.send(&request)).await {
            Ok(Ok(())) => debug!(endpoint = %settings.endpoint, "OTLP export sent"),
            Ok(Err(e)) => warn!(error = %e, "OTLP metrics export failed"),
            Err(_) => warn!(
                endpoint = %settings.endpoint,
                timeout_ms = bound.as_millis(),
                "OTLP metrics export timed out"
            ),
        }
        if last {
            return;
        }
    }
}
