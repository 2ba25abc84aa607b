//! The metric service's TLS configuration: a serving certificate, and client certificates
//! required and verified against the CA that signs the metrics-apiserver's client certificate.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::crypto::ring;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why the metric service's TLS configuration cannot be built. Each message names the input to
/// fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// The serving certificate chain is not PEM or is empty.
    #[error("the metric service's serving certificate is not a PEM certificate chain: {0}")]
    Certificate(String),
    /// The private key is not a PEM private key.
    #[error("the metric service's private key is not a PEM private key: {0}")]
    PrivateKey(String),
    /// The client CA bundle is not PEM or holds no usable certificate.
    #[error("the metric service's client CA is not a PEM certificate bundle: {0}")]
    ClientCa(String),
    /// rustls refused the combination (for example a key that does not match the certificate).
    #[error("the metric service's TLS configuration is invalid: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A rustls server configuration for the metric service: it serves `cert_chain_pem` with
/// `key_pem`, requires a client certificate chaining to `client_ca_pem`, and speaks HTTP/2
/// (ALPN `h2`, with `http/1.1` for debugging tools).
///
/// To rotate certificates without a restart, build a `ServerConfig` whose certificate resolver
/// reloads them and pass that to [`super::MetricsService`] instead.
///
/// # Errors
/// [`TlsConfigError`] naming the input that is not usable.
pub fn server_config(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: &[u8],
) -> Result<ServerConfig, TlsConfigError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsConfigError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsConfigError::Certificate(
            "no CERTIFICATE block found".to_string(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| TlsConfigError::PrivateKey(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem) {
        let ca = ca.map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
        roots
            .add(ca)
            .map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsConfigError::ClientCa(
            "no CERTIFICATE block found".to_string(),
        ));
    }
    let provider = Arc::new(ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
