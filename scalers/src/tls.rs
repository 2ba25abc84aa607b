//! TLS settings of an event-source client (KEDA's `ca`, `cert`, `key`, `unsafeSsl`) and the
//! rustls client configuration built from them.
//!
//! Configurations are always built on the `ring` provider passed explicitly, so they do not
//! depend on a process-wide default provider having been installed.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::secret::Secret;

/// TLS settings, part of a client pool key: two triggers with equal settings may share a
/// client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TlsSettings {
    /// `unsafeSsl`: skip certificate verification.
    pub insecure: bool,
    /// PEM CA bundle. Redis replaces the system roots with it; the rustls configuration of
    /// [`TlsSettings::client_config`] adds it to them, as KEDA's `NewTLSConfig` does.
    pub ca: Option<Secret>,
    /// PEM client certificate and key (mTLS).
    pub client: Option<(Secret, Secret)>,
}

/// Why a TLS configuration could not be built. Never contains key material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The `ca` parameter holds no PEM certificate, or one rustls rejects.
    #[error("parameter \"ca\" is not a valid PEM certificate bundle")]
    InvalidCa,
    /// The `cert` parameter holds no PEM certificate.
    #[error("parameter \"cert\" is not a valid PEM certificate")]
    InvalidCert,
    /// The `key` parameter holds no unencrypted PEM private key.
    #[error("parameter \"key\" is not a valid unencrypted PEM private key")]
    InvalidKey,
    /// rustls refused the configuration (for example a key that does not match the
    /// certificate).
    #[error("the TLS configuration is invalid: {0}")]
    Rustls(#[from] rustls::Error),
}

impl TlsSettings {
    /// A rustls client configuration: the system roots plus `ca`, or no verification at all
    /// with `insecure`; the client certificate if given.
    ///
    /// # Errors
    /// The PEM material does not parse, or rustls rejects it.
    pub fn client_config(&self) -> Result<ClientConfig, TlsError> {
        self.build(true)
    }

    /// Like [`TlsSettings::client_config`], but the server's certificate need not name the host
    /// it was reached at; its chain must still lead to a trusted root (libpq's
    /// `sslmode=verify-ca`).
    ///
    /// # Errors
    /// As [`TlsSettings::client_config`].
    pub fn client_config_any_name(&self) -> Result<ClientConfig, TlsError> {
        self.build(false)
    }

    fn build(&self, check_name: bool) -> Result<ClientConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()?;
        let builder = if self.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification {
                    algorithms: provider.signature_verification_algorithms,
                }))
        } else if check_name {
            builder.with_root_certificates(self.roots()?)
        } else {
            let chain =
                WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots()?), provider)
                    .build()
                    .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_string())))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName { chain }))
        };
        let config = match &self.client {
            Some((cert, key)) => {
                let certs = CertificateDer::pem_slice_iter(cert.expose().as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| TlsError::InvalidCert)?;
                if certs.is_empty() {
                    return Err(TlsError::InvalidCert);
                }
                let key = PrivateKeyDer::from_pem_slice(key.expose().as_bytes())
                    .map_err(|_| TlsError::InvalidKey)?;
                builder.with_client_auth_cert(certs, key)?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(config)
    }

    fn roots(&self) -> Result<RootCertStore, TlsError> {
        let mut roots = RootCertStore::empty();
        // Unreadable system certificates are skipped, as Go's SystemCertPool does.
        let (_, _) =
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        if let Some(ca) = &self.ca {
            let certs = CertificateDer::pem_slice_iter(ca.expose().as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| TlsError::InvalidCa)?;
            if certs.is_empty() {
                return Err(TlsError::InvalidCa);
            }
            for cert in certs {
                roots.add(cert).map_err(|_| TlsError::InvalidCa)?;
            }
        }
        Ok(roots)
    }
}

/// `unsafeSsl`: accepts any server certificate, but still checks that the handshake is
/// signed by the key of the certificate presented.
#[derive(Debug)]
struct NoVerification {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Verifies the chain and the handshake like rustls' WebPKI verifier, but accepts a
/// certificate issued for another name.
#[derive(Debug)]
struct AnyName {
    chain: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.chain.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_roots_and_insecure_configurations_build() {
        assert!(TlsSettings::default().client_config().is_ok());
        let insecure = TlsSettings {
            insecure: true,
            ..TlsSettings::default()
        };
        assert!(insecure.client_config().is_ok());
    }

    #[test]
    fn bad_pem_material_names_the_parameter_without_echoing_it() {
        let bad_ca = TlsSettings {
            ca: Some(Secret::new("not a certificate")),
            ..TlsSettings::default()
        };
        let err = bad_ca.client_config().expect_err("invalid CA");
        assert_eq!(
            err.to_string(),
            "parameter \"ca\" is not a valid PEM certificate bundle"
        );
        let bad_client = TlsSettings {
            client: Some((Secret::new("C"), Secret::new("K-secret"))),
            ..TlsSettings::default()
        };
        let err = bad_client.client_config().expect_err("invalid cert");
        assert!(!err.to_string().contains("K-secret"), "{err}");
    }
}
