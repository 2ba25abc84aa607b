//! The metric service's TLS: a serving certificate, and client certificates required and
//! verified against the CA that signs the metrics-apiserver's and the activators' client
//! certificates. Both are reloaded when their files change ([`MetricServiceTls`]).
//!
//! The certificate and the CA are swapped inside one fixed `ServerConfig` (a certificate
//! resolver and a client-certificate verifier that read the current ones per handshake, from
//! `keda_tls`) rather than by rebuilding the `ServerConfig`: the listener keeps its one
//! configuration, the certificate and the CA reload independently (a broken CA file does not
//! hold back a renewed certificate), and the metrics-apiserver and the activator reload theirs
//! with the same pieces.

use std::sync::Arc;
use std::time::Duration;

use keda_tls::secrets::TlsSecret;
use keda_tls::{
    CertStore, ClientCaVerifier, TlsError, certified_key, client_verifier, mutual_tls_server_config,
};
use rustls::ServerConfig;
use tokio_util::sync::CancellationToken;

use super::{StartError, TlsFiles, read};

/// Why the metric service's TLS configuration cannot be built. Each message names the flag of
/// the input to fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// The serving certificate chain or its key is unusable, or they do not match.
    #[error("the metric service's serving certificate is not usable: {0}")]
    Serving(#[source] TlsError),
    /// The client CA bundle is not PEM or holds no usable certificate.
    #[error("the metric service's client CA is not usable: {0}")]
    ClientCa(#[source] TlsError),
    /// rustls refused the configuration.
    #[error("the metric service's TLS configuration is invalid: {0}")]
    Rustls(#[from] rustls::Error),
}

/// How error messages name the inputs.
struct Names {
    serving: String,
    client_ca: String,
}

impl Names {
    /// By their flags.
    fn flags() -> Self {
        Self {
            serving: "--metrics-service-cert-file / --metrics-service-key-file".to_string(),
            client_ca: "--metrics-service-client-ca-file".to_string(),
        }
    }

    /// By their flags and paths.
    fn files(files: &TlsFiles) -> Self {
        Self {
            serving: format!(
                "--metrics-service-cert-file {} / --metrics-service-key-file {}",
                files.cert.display(),
                files.key.display()
            ),
            client_ca: format!(
                "--metrics-service-client-ca-file {}",
                files.client_ca.display()
            ),
        }
    }
}

/// The metric service's serving certificate and client CA, replaceable while it serves.
#[derive(Debug, Clone)]
pub struct MetricServiceTls {
    serving: Arc<CertStore>,
    client_ca: Arc<ClientCaVerifier>,
}

impl MetricServiceTls {
    /// Serves `cert_chain_pem` with `key_pem` and requires client certificates chaining to
    /// `client_ca_pem`.
    ///
    /// # Errors
    /// [`TlsConfigError`] naming the input that is not usable.
    pub fn from_pem(
        cert_chain_pem: &[u8],
        key_pem: &[u8],
        client_ca_pem: &[u8],
    ) -> Result<Self, TlsConfigError> {
        Self::parse(cert_chain_pem, key_pem, client_ca_pem, &Names::flags())
    }

    /// [`Self::from_pem`] with errors naming the inputs as `names` says.
    fn parse(
        cert_chain_pem: &[u8],
        key_pem: &[u8],
        client_ca_pem: &[u8],
        names: &Names,
    ) -> Result<Self, TlsConfigError> {
        let serving = certified_key(cert_chain_pem, key_pem, &names.serving)
            .map_err(TlsConfigError::Serving)?;
        let client_ca = ClientCaVerifier::from_pem(client_ca_pem, &names.client_ca)
            .map_err(TlsConfigError::ClientCa)?;
        Ok(Self {
            serving: Arc::new(CertStore::new(serving)),
            client_ca: Arc::new(client_ca),
        })
    }

    /// Reads `files`.
    ///
    /// # Errors
    /// [`StartError::Read`] or [`StartError::Tls`], naming the file and its flag.
    pub async fn from_files(files: &TlsFiles) -> Result<Self, StartError> {
        let cert = read(
            "serving certificate (--metrics-service-cert-file)",
            &files.cert,
        )
        .await?;
        let key = read("private key (--metrics-service-key-file)", &files.key).await?;
        let ca = read(
            "client CA (--metrics-service-client-ca-file)",
            &files.client_ca,
        )
        .await?;
        Ok(Self::parse(&cert, &key, &ca, &Names::files(files))?)
    }

    /// The material of keda-rs' operator Secret (`tls.crt`, `tls.key`, `ca.crt`).
    ///
    /// # Errors
    /// [`TlsConfigError`] naming the Secret and its key.
    pub fn from_secret(secret: &TlsSecret) -> Result<Self, TlsConfigError> {
        let serving = secret.certified_key().map_err(TlsConfigError::Serving)?;
        let client_ca = ClientCaVerifier::from_pem(&secret.ca, &secret.ca_name())
            .map_err(TlsConfigError::ClientCa)?;
        Ok(Self {
            serving: Arc::new(CertStore::new(serving)),
            client_ca: Arc::new(client_ca),
        })
    }

    /// Serves the material of `secret` from the next handshake on; nothing changes when it
    /// does not load.
    ///
    /// # Errors
    /// [`TlsConfigError`] naming the Secret and its key.
    pub fn replace_from(&self, secret: &TlsSecret) -> Result<(), TlsConfigError> {
        let serving = secret.certified_key().map_err(TlsConfigError::Serving)?;
        let client_ca =
            client_verifier(&secret.ca, &secret.ca_name()).map_err(TlsConfigError::ClientCa)?;
        self.serving.replace(serving);
        self.client_ca.replace(client_ca);
        Ok(())
    }

    /// Polls `files` every `interval` until `cancel`: a changed certificate or key replaces the
    /// serving certificate, a changed CA bundle the client CA, for the next handshakes. A
    /// changed file that does not load is logged and the previous material stays in use.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn reload_on_change(
        &self,
        files: &TlsFiles,
        interval: Duration,
        cancel: CancellationToken,
    ) {
        self.serving.reload_on_change(
            files.cert.clone(),
            files.key.clone(),
            interval,
            cancel.clone(),
        );
        self.client_ca
            .reload_on_change(files.client_ca.clone(), interval, cancel);
    }

    /// A rustls configuration serving the current certificate, requiring client certificates of
    /// the current CA (both read per handshake), speaking HTTP/2 (ALPN `h2`, with `http/1.1`
    /// for debugging tools), without session resumption (a resumed session would skip the
    /// check of the client certificate against a CA that has changed since).
    ///
    /// # Errors
    /// [`TlsConfigError::Rustls`] (does not happen with the ring provider).
    pub fn server_config(&self) -> Result<ServerConfig, TlsConfigError> {
        let mut config =
            mutual_tls_server_config(Arc::clone(&self.serving), Arc::clone(&self.client_ca))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// A rustls server configuration for the metric service with fixed material: it serves
/// `cert_chain_pem` with `key_pem` and requires a client certificate chaining to
/// `client_ca_pem` ([`MetricServiceTls::server_config`]). [`super::serve_on`] uses material
/// reloaded from files instead.
///
/// # Errors
/// [`TlsConfigError`] naming the input that is not usable.
pub fn server_config(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: &[u8],
) -> Result<ServerConfig, TlsConfigError> {
    MetricServiceTls::from_pem(cert_chain_pem, key_pem, client_ca_pem)?.server_config()
}
