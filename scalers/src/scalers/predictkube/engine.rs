//! The PredictKube ML engine: where it is, the shared gRPC channel to it, and its one call.
//!
//! KEDA dials Dysnix's engine at `api.predictkube.com:443` over TLS (the system's roots, the
//! host's name checked) and adds the trigger's API key to every call as the gRPC metadata
//! `x-auth-api-key` (predictkube-libs' `InjectPublicClientMetadataInterceptor`). So does
//! keda-rs. The address is not a trigger parameter: only the process can move it
//! ([`crate::http_client::VendorEndpoints`], which the tests point at their fake engine), never
//! a namespace; the operator attaches no credential of its own, only the trigger's `apiKey`.
//!
//! Every trigger shares one channel (one HTTP/2 connection) to the engine, whatever its API key:
//! the key travels with each call, not with the connection.

use std::time::Duration;

use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::http_client::VendorEndpoints;
use crate::pool::Lease;
use crate::remote::{Failure, Kind};
use crate::scalers::external::channel::{ChannelKey, ExternalChannel, ScalerAddress};
use crate::secret::Secret;
use crate::tls::TlsSettings;

use super::proto::ml_engine_service_client::MlEngineServiceClient;
use super::proto::{ReqGetPredictMetric, ResGetPredictMetric};

/// The engine's host, as KEDA dials it.
pub const ENGINE_HOST: &str = "api.predictkube.com";
/// The engine's port.
pub const ENGINE_PORT: u16 = 443;
/// The gRPC metadata that carries the API key (predictkube-libs' `grpc.APIKey`).
pub const API_KEY_HEADER: &str = "x-auth-api-key";
/// How long a connect and a whole call may take: KEDA's connection timeout for the engine.
pub const ENGINE_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest request sent: KEDA's `MaxMessageSize` for the engine (50 MiB). A history
/// larger than this fails the poll, saying so.
pub const MAX_REQUEST_BYTES: usize = 50 << 20;
/// The largest answer read. The answer is one integer; 64 KiB leaves room for any fields a
/// newer engine adds, and nothing for a server that answers megabytes.
pub const MAX_ANSWER_BYTES: usize = 64 << 10;

/// Where the engine is reached: the pool key of its channel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EngineKey(pub ChannelKey);

impl EngineKey {
    /// `api.predictkube.com:443` over TLS, or where the process's vendor endpoints send that
    /// host (`http://` for a plaintext HTTP/2 engine, `https://` for TLS).
    pub fn resolve(endpoints: &VendorEndpoints) -> Self {
        let default = Self::tls(ENGINE_HOST, ENGINE_PORT);
        let Ok(url) = url::Url::parse(&format!("https://{ENGINE_HOST}:{ENGINE_PORT}/")) else {
            return default;
        };
        let url = endpoints.redirect(url);
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return default;
        };
        // `[::1]` in a URL is `::1` for a socket address.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if url.scheme() == "http" {
            Self(ChannelKey {
                address: ScalerAddress {
                    host: host.to_string(),
                    port,
                },
                tls: None,
            })
        } else {
            Self::tls(host, port)
        }
    }

    fn tls(host: &str, port: u16) -> Self {
        Self(ChannelKey {
            address: ScalerAddress {
                host: host.to_string(),
                port,
            },
            tls: Some(TlsSettings::default()),
        })
    }

    /// `host:port`, for messages.
    pub fn address(&self) -> String {
        self.0.address.authority()
    }
}

/// A lease on the shared channel to the engine at `key`, created (without connecting) by its
/// first user.
///
/// # Errors
/// The channel cannot be set up (the system's TLS roots are unusable).
pub async fn lease(
    ctx: &ScalerContext,
    key: EngineKey,
) -> Result<Lease<EngineKey, ExternalChannel>, ScalerError> {
    ctx.clients
        .pool::<EngineKey, ExternalChannel>()
        .get_or_connect(key.clone(), || async move {
            ExternalChannel::new(&key.0, ENGINE_TIMEOUT)
        })
        .await
        .map_err(|e| {
            ScalerError::Metadata(MetadataError {
                trigger: ctx.trigger_id(),
                kind: MetadataErrorKind::Rule(format!(
                    "the channel to the PredictKube engine cannot be set up: {}",
                    match e {
                        crate::scalers::external::channel::ChannelError::Tls(_) =>
                            "the TLS roots are unusable",
                        _ => "the engine address is invalid",
                    }
                )),
            })
        })
}

/// `GetPredictMetric` with the trigger's API key, bounded by [`ENGINE_TIMEOUT`] and the message
/// size limits.
///
/// # Errors
/// The engine cannot be reached, answers a gRPC error, or does not answer in time; the
/// [`Failure`] shows the status code, never the engine's message.
pub async fn predict(
    channel: &ExternalChannel,
    api_key: &Secret,
    request: ReqGetPredictMetric,
) -> Result<ResGetPredictMetric, Failure> {
    // Checked here, in our words: tonic's own limit would fail the call with a status that
    // reads as the engine's.
    if let Some(failure) = too_large(prost::Message::encoded_len(&request), MAX_REQUEST_BYTES) {
        return Err(failure);
    }
    let mut client = MlEngineServiceClient::new(channel.channel())
        .max_decoding_message_size(MAX_ANSWER_BYTES)
        .max_encoding_message_size(MAX_REQUEST_BYTES);
    let mut request = tonic::Request::new(request);
    // The key was checked to be a JWT (base64url and dots) when the trigger was parsed, so it
    // is always valid metadata.
    let mut value: tonic::metadata::MetadataValue<tonic::metadata::Ascii> =
        tonic::metadata::MetadataValue::try_from(api_key.expose())
            .map_err(|_| Failure::local("parameter \"apiKey\" is not valid gRPC metadata"))?;
    value.set_sensitive(true);
    request.metadata_mut().insert(API_KEY_HEADER, value);
    match tokio::time::timeout(ENGINE_TIMEOUT, client.get_predict_metric(request)).await {
        Ok(Ok(answer)) => Ok(answer.into_inner()),
        Ok(Err(status)) => Err(status_failure(&status)),
        Err(_) => Err(Failure::new(Kind::TimedOut, None)),
    }
}

/// Why a request of `len` bytes is not sent, when it is over `limit`.
pub fn too_large(len: usize, limit: usize) -> Option<Failure> {
    (len > limit).then(|| {
        Failure::local(format!(
            "the history is {len} bytes, more than the {limit} bytes a request to the engine may \
             have; shorten historyTimeWindow or lengthen queryStep"
        ))
    })
}

/// A gRPC status as a [`Failure`]: a transport failure (no answer) by its cause (connection
/// refused, TLS, ...); an answered status by its canonical code, with a hint for the codes a
/// user can act on. The status message is kept for debug-level logs only.
pub fn status_failure(status: &tonic::Status) -> Failure {
    use std::error::Error as _;
    if let Some(cause) = status.source() {
        return Failure::of("gRPC transport", cause);
    }
    let code = status.code();
    let hint = match code {
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            "; check the apiKey of the trigger's TriggerAuthentication"
        }
        tonic::Code::ResourceExhausted => {
            "; the API key's quota or rate limit is used up, or the history is too large"
        }
        tonic::Code::InvalidArgument => "; the engine refused the history or the horizon",
        tonic::Code::Unimplemented => "; the server is not a PredictKube engine",
        tonic::Code::OutOfRange => "; the answer may be larger than the 64 KiB keda-rs reads",
        _ => "",
    };
    Failure::new(
        Kind::Server {
            system: "the PredictKube engine",
            code: Some(format!("{}{hint}", code_name(code))),
        },
        Some(status.message().to_string()),
    )
}

/// The canonical name of a gRPC status code (`UNAUTHENTICATED`).
pub fn code_name(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::Unknown => "UNKNOWN",
        tonic::Code::InvalidArgument => "INVALID_ARGUMENT",
        tonic::Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::PermissionDenied => "PERMISSION_DENIED",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::FailedPrecondition => "FAILED_PRECONDITION",
        tonic::Code::Aborted => "ABORTED",
        tonic::Code::OutOfRange => "OUT_OF_RANGE",
        tonic::Code::Unimplemented => "UNIMPLEMENTED",
        tonic::Code::Internal => "INTERNAL",
        tonic::Code::Unavailable => "UNAVAILABLE",
        tonic::Code::DataLoss => "DATA_LOSS",
        tonic::Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_is_dysnix_unless_the_process_moves_it() {
        let key = EngineKey::resolve(&VendorEndpoints::default());
        assert_eq!(key.address(), "api.predictkube.com:443");
        assert!(key.0.tls.is_some(), "TLS to the real engine");
        let fake = url::Url::parse("http://127.0.0.1:50051").expect("url");
        let key = EngineKey::resolve(&VendorEndpoints::default().with(ENGINE_HOST, fake));
        assert_eq!(key.address(), "127.0.0.1:50051");
        assert!(key.0.tls.is_none(), "plaintext to an http:// fake");
        let fake = url::Url::parse("https://[::1]:8443").expect("url");
        let key = EngineKey::resolve(&VendorEndpoints::default().with(ENGINE_HOST, fake));
        assert_eq!(key.address(), "[::1]:8443");
        assert!(key.0.tls.is_some());
    }

    #[test]
    fn a_history_over_the_limit_is_not_sent() {
        assert!(too_large(100, 100).is_none());
        assert_eq!(
            too_large(101, 100).map(|f| f.to_string()).as_deref(),
            Some(
                "the history is 101 bytes, more than the 100 bytes a request to the engine may \
                 have; shorten historyTimeWindow or lengthen queryStep"
            )
        );
    }

    #[test]
    fn answered_statuses_show_their_code_and_a_hint_never_the_message() {
        // (status, shown)
        let rows = [
            (
                tonic::Status::unauthenticated("s3cret key rejected"),
                "the PredictKube engine answered error UNAUTHENTICATED; check the apiKey of the trigger's TriggerAuthentication",
            ),
            (
                tonic::Status::resource_exhausted("s3cret quota"),
                "the PredictKube engine answered error RESOURCE_EXHAUSTED; the API key's quota or rate limit is used up, or the history is too large",
            ),
            (
                tonic::Status::internal("s3cret"),
                "the PredictKube engine answered error INTERNAL",
            ),
        ];
        for (status, shown) in rows {
            let failure = status_failure(&status);
            assert_eq!(failure.to_string(), shown);
            assert!(failure.raw().is_some_and(|r| r.contains("s3cret")));
        }
    }
}
