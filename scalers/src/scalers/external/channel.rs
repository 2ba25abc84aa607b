//! The gRPC channel to an external scaler: one per (address, TLS settings), shared by every
//! trigger that names them, as KEDA pools its `grpc.ClientConn`s.
//!
//! A channel is one HTTP/2 connection, opened on first use and reopened on demand after it
//! breaks; all calls of all triggers (unary polls and `StreamIsActive` streams) are multiplexed
//! on it. TLS is ours: rustls on ring through [`crate::tls::TlsSettings`], so `unsafeSsl` and
//! the CA bundle behave as in every other scaler.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint};

use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::pool::Lease;
use crate::tls::{TlsError, TlsSettings};

/// Where and how to reach an external scaler: the pool key of its channel. Two triggers with
/// equal keys share one connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChannelKey {
    /// `scalerAddress`: `host:port`.
    pub address: ScalerAddress,
    /// TLS settings, `None` for a plaintext (h2c) connection.
    pub tls: Option<TlsSettings>,
}

/// A parsed `scalerAddress`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScalerAddress {
    /// The host, without brackets for an IPv6 address.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl ScalerAddress {
    /// Parses `host:port`, `[v6]:port`, or gRPC's `dns:///host:port` form.
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.strip_prefix("dns:///").unwrap_or(raw);
        let (host, port) = raw.rsplit_once(':')?;
        let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']')?,
            None if host.contains(':') => return None,
            None => host,
        };
        let valid = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
        valid.then(|| Self {
            host: host.to_string(),
            port,
        })
    }

    /// `host:port` (with brackets for IPv6), as written in URIs and messages.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for ScalerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.authority())
    }
}

/// A shared channel. Cloning the inner [`Channel`] is cheap; every call clones it.
#[derive(Debug)]
pub struct ExternalChannel {
    channel: Channel,
}

impl ExternalChannel {
    /// A channel to `key`, connecting lazily: nothing happens on the network until the first
    /// call. `connect_timeout` bounds each TCP + TLS connect.
    ///
    /// # Errors
    /// The TLS material does not parse or rustls refuses it; the address does not form a URI.
    pub fn new(key: &ChannelKey, connect_timeout: Duration) -> Result<Self, ChannelError> {
        let tls = match &key.tls {
            Some(settings) => {
                let mut config = settings.client_config().map_err(ChannelError::Tls)?;
                // gRPC servers (grpc-go >= 1.67 among them) insist on ALPN `h2`.
                config.alpn_protocols = vec![b"h2".to_vec()];
                let name = ServerName::try_from(key.address.host.clone())
                    .map_err(|_| ChannelError::ServerName(key.address.host.clone()))?;
                Some((TlsConnector::from(Arc::new(config)), name))
            }
            None => None,
        };
        // The scheme stays `http` with TLS too: tonic refuses an `https` URI on a connector it
        // did not configure itself, and gRPC servers do not check `:scheme`.
        let endpoint = Endpoint::from_shared(format!("http://{}", key.address.authority()))
            .map_err(|_| ChannelError::Address(key.address.authority()))?
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true);
        let host = key.address.host.clone();
        let port = key.address.port;
        let connector = tower::service_fn(move |_uri: http::Uri| {
            let tls = tls.clone();
            let host = host.clone();
            let connect: Pin<Box<dyn Future<Output = std::io::Result<_>> + Send>> =
                Box::pin(async move {
                    let tcp = tokio::time::timeout(
                        connect_timeout,
                        TcpStream::connect((host.as_str(), port)),
                    )
                    .await
                    .map_err(|_| {
                        std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
                    })??;
                    tcp.set_nodelay(true)?;
                    let io: Box<dyn Io> = match tls {
                        Some((connector, name)) => Box::new(connector.connect(name, tcp).await?),
                        None => Box::new(tcp),
                    };
                    Ok(TokioIo::new(io))
                });
            connect
        });
        Ok(Self {
            channel: endpoint.connect_with_connector_lazy(connector),
        })
    }

    /// The channel, for one call.
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }
}

/// A plain or TLS stream.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Why a channel could not be set up. Never contains key material.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The TLS parameters are unusable.
    #[error("{}", tls_message(.0))]
    Tls(TlsError),
    /// The host is not a valid TLS server name.
    #[error("parameter \"scalerAddress\": host \"{0}\" is not a valid TLS server name")]
    ServerName(String),
    /// The address does not form a URI.
    #[error("parameter \"scalerAddress\": \"{0}\" is not a valid host:port")]
    Address(String),
}

/// The TLS error in the external scaler's parameter names (`caCert`, `tlsClientCert`,
/// `tlsClientKey` instead of the shared `ca`, `cert`, `key`).
fn tls_message(e: &TlsError) -> String {
    match e {
        TlsError::InvalidCa => {
            "parameter \"caCert\" (or the file of \"tlsCertFile\") is not a valid PEM \
             certificate bundle"
                .to_string()
        }
        TlsError::InvalidCert => {
            "parameter \"tlsClientCert\" is not a valid PEM certificate".to_string()
        }
        TlsError::InvalidKey => {
            "parameter \"tlsClientKey\" is not a valid unencrypted PEM private key".to_string()
        }
        TlsError::Rustls(e) => format!(
            "parameters \"tlsClientCert\" and \"tlsClientKey\" do not make a valid TLS client \
             identity: {e}"
        ),
        // `keyPassword` errors: the external scalers take no encrypted keys.
        other @ (TlsError::Incomplete(_)
        | TlsError::KeyNotEncrypted { .. }
        | TlsError::KeyDecrypt { .. }) => other.to_string(),
    }
}

/// Leases the shared channel of `key` from the context's pools, creating it (without
/// connecting) if this is its first user.
///
/// # Errors
/// [`ScalerError::Metadata`] naming the parameter when the TLS material is unusable.
pub async fn lease(
    ctx: &ScalerContext,
    key: ChannelKey,
) -> Result<Lease<ChannelKey, ExternalChannel>, ScalerError> {
    let timeout = ctx.global_http_timeout;
    ctx.clients
        .pool::<ChannelKey, ExternalChannel>()
        .get_or_connect(key.clone(), || async move {
            ExternalChannel::new(&key, timeout)
        })
        .await
        .map_err(|e| {
            ScalerError::Metadata(MetadataError {
                trigger: ctx.trigger_id(),
                kind: MetadataErrorKind::Rule(e.to_string()),
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaler_addresses_parse_as_grpc_targets() {
        // (written, host, port)
        let good = [
            ("external-scaler:8080", "external-scaler", 8080),
            (
                "scaler.ns.svc.cluster.local:443",
                "scaler.ns.svc.cluster.local",
                443,
            ),
            ("127.0.0.1:50051", "127.0.0.1", 50051),
            ("[::1]:50051", "::1", 50051),
            ("dns:///scaler:9090", "scaler", 9090),
        ];
        for (raw, host, port) in good {
            let a = ScalerAddress::parse(raw).unwrap_or_else(|| panic!("{raw}"));
            assert_eq!((a.host.as_str(), a.port), (host, port), "{raw}");
        }
        assert_eq!(
            ScalerAddress::parse("[::1]:1").map(|a| a.authority()),
            Some("[::1]:1".to_string())
        );
        // No port, port 0 or out of range, a URL, spaces, IPv6 without brackets.
        for bad in [
            "scaler",
            "scaler:",
            "scaler:0",
            "scaler:65536",
            "http://scaler:80",
            "sca ler:80",
            "::1:80",
            ":80",
        ] {
            assert_eq!(ScalerAddress::parse(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn tls_errors_name_the_external_parameters() {
        let key = |tls: TlsSettings| ChannelKey {
            address: ScalerAddress::parse("127.0.0.1:1").expect("address"),
            tls: Some(tls),
        };
        let bad_ca = key(TlsSettings {
            ca: Some(crate::Secret::new("not pem")),
            ..TlsSettings::default()
        });
        let err = ExternalChannel::new(&bad_ca, Duration::from_secs(1)).expect_err("bad CA");
        assert!(err.to_string().contains("\"caCert\""), "{err}");
        let bad_key = key(TlsSettings {
            client: Some((crate::Secret::new("x"), crate::Secret::new("k-s3cret"))),
            ..TlsSettings::default()
        });
        let err = ExternalChannel::new(&bad_key, Duration::from_secs(1)).expect_err("bad cert");
        assert!(err.to_string().contains("\"tlsClientCert\""), "{err}");
        assert!(!err.to_string().contains("k-s3cret"), "{err}");
        // Plaintext and valid TLS settings build without touching the network.
        let plain = ChannelKey {
            tls: None,
            ..bad_ca.clone()
        };
        assert!(ExternalChannel::new(&plain, Duration::from_secs(1)).is_ok());
        assert!(ExternalChannel::new(&key(TlsSettings::default()), Duration::from_secs(1)).is_ok());
    }
}
