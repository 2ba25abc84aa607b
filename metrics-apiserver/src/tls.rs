//! TLS of the secure port: the self-signed serving certificate used when no files are given,
//! and the client-certificate policy. Certificates from files, their reload and PEM loading are
//! `keda_tls`'s, shared with the operator and the activator.

use std::sync::Arc;

use keda_tls::CertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

/// A self-signed serving certificate could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("generating a self-signed serving certificate failed: {0}")]
pub struct SelfSignedError(String);

/// A PEM certificate and key, self-signed for `hosts` (DNS names or IP addresses).
///
/// # Errors
/// [`SelfSignedError`].
pub fn self_signed(hosts: &[String]) -> Result<(String, String), SelfSignedError> {
    let generated = rcgen::generate_simple_self_signed(hosts.to_vec())
        .map_err(|e| SelfSignedError(e.to_string()))?;
    Ok((generated.cert.pem(), generated.signing_key.serialize_pem()))
}

/// The client-certificate policy of the secure port, as Kubernetes' aggregated API servers have
/// it: a client certificate is requested but not required (health probes and anonymous callers
/// connect without one), and its chain is not judged during the handshake: the request-header
/// authenticator verifies it against the CA in force for each request and answers 401, an HTTP
/// response, instead of a failed handshake. The handshake still proves that the client holds
/// the certificate's private key.
#[derive(Debug)]
pub struct RequestClientCert {
    provider: Arc<CryptoProvider>,
}

impl RequestClientCert {
    /// The policy on `provider`'s signature algorithms.
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self { provider }
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // Deferred to the request-header authenticator (see the type's docs).
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The secure port's rustls configuration: the certificate of `serving`, client certificates
/// requested per [`RequestClientCert`]. actix adds the ALPN protocols (`h2`, `http/1.1`).
///
/// # Errors
/// rustls refuses the protocol versions (does not happen with the ring provider).
pub fn secure_port_config(
    serving: Arc<CertStore>,
    policy: &keda_tls::TlsPolicy,
) -> Result<ServerConfig, rustls::Error> {
    let provider = policy.provider();
    Ok(ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(policy.versions())?
        .with_client_cert_verifier(Arc::new(RequestClientCert::new(provider)))
        .with_cert_resolver(serving))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keda_tls::certified_key;

    #[test]
    fn a_self_signed_certificate_loads_as_a_serving_certificate() {
        let (cert, key) =
            self_signed(&["localhost".into(), "127.0.0.1".into()]).expect("generated");
        let loaded = certified_key(cert.as_bytes(), key.as_bytes(), "self-signed").expect("loads");
        assert_eq!(loaded.cert.len(), 1);
    }
}
