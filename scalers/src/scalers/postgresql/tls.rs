//! TLS for tokio-postgres on rustls (ring), with libpq's `sslmode` meanings as pgx (KEDA's
//! driver) implements them.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::tls::{TlsError, TlsSettings};

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it (pgx: tried after plain; here like `prefer`), unverified.
    Allow,
    /// TLS if the server offers it, unverified (libpq's and pgx's default).
    Prefer,
    /// TLS, unverified unless `sslrootcert` is given (then as `verify-ca`).
    Require,
    /// TLS; the chain must lead to a trusted root, the name is not checked.
    VerifyCa,
    /// TLS; chain and host name verified.
    VerifyFull,
}

impl SslMode {
    /// The values users write.
    pub const NAMES: &'static [&'static str] = &[
        "disable",
        "allow",
        "prefer",
        "require",
        "verify-ca",
        "verify-full",
    ];

    /// Parses a value of `sslmode`.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            _ => return None,
        })
    }

    /// What tokio-postgres is told: whether TLS is attempted, and whether it is required.
    pub fn negotiation(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Negotiate;
        match self {
            Self::Disable => Negotiate::Disable,
            Self::Allow | Self::Prefer => Negotiate::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => Negotiate::Require,
        }
    }

    /// The rustls configuration of this mode: `ca` (from `sslrootcert`) and the client
    /// certificate come from `settings`.
    ///
    /// # Errors
    /// The PEM material is invalid.
    pub fn client_config(self, settings: &TlsSettings) -> Result<ClientConfig, TlsError> {
        let verify_chain = match self {
            Self::Disable | Self::Allow | Self::Prefer => false,
            Self::Require => settings.ca.is_some(),
            Self::VerifyCa | Self::VerifyFull => true,
        };
        let settings = TlsSettings {
            insecure: !verify_chain,
            ..settings.clone()
        };
        if self == Self::VerifyFull {
            settings.client_config()
        } else {
            settings.client_config_any_name()
        }
    }
}

/// tokio-postgres' `MakeTlsConnect` on rustls.
#[derive(Clone)]
pub struct RustlsConnect(Arc<ClientConfig>);

impl RustlsConnect {
    /// Connects with `config`.
    pub fn new(config: ClientConfig) -> Self {
        Self(Arc::new(config))
    }
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnector;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnector, io::Error> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|_| io::Error::other(format!("\"{domain}\" is not a valid TLS name")))?;
        Ok(RustlsConnector {
            config: Arc::clone(&self.0),
            name,
        })
    }
}

/// Connects one stream.
pub struct RustlsConnector {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move { connector.connect(self.name, stream).await.map(RustlsStream) })
    }
}

/// A TLS stream to the server.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    /// No channel binding: SCRAM authentication works without it unless the connection
    /// string sets `channel_binding=require`.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_negotiate_and_verify_like_pgx() {
        use tokio_postgres::config::SslMode as Negotiate;
        // (sslmode, negotiation)
        let rows = [
            ("disable", Negotiate::Disable),
            ("allow", Negotiate::Prefer),
            ("prefer", Negotiate::Prefer),
            ("require", Negotiate::Require),
            ("verify-ca", Negotiate::Require),
            ("verify-full", Negotiate::Require),
        ];
        for (name, negotiation) in rows {
            let mode = SslMode::parse(name).expect(name);
            assert_eq!(mode.negotiation(), negotiation, "{name}");
            assert!(
                mode.client_config(&TlsSettings::default()).is_ok(),
                "{name}"
            );
        }
        assert_eq!(SslMode::parse("verify_full"), None);
        assert_eq!(SslMode::NAMES.len(), rows.len());
    }
}
