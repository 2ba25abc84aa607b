//! keda-rs TLS material, shared by the three processes that speak mutual TLS to each other: the
//! operator's metric service (server), the metrics-apiserver (server of the secure port, client
//! of the operator) and the activator (client of the operator).
//!
//! Certificates and CAs come from PEM files (the `keda-rs-certs` Secret, or cert-manager's), or,
//! when no file is given, from the Secrets themselves through the Kubernetes API, which the
//! operator creates and renews ([`kube_secrets`]). Either way they are replaced while the process
//! runs: [`CertStore`] holds a certificate and key, and
//! [`ClientCaVerifier`] / [`ServerCaVerifier`] hold the CA a peer's certificate must chain to.
//! Each is read once at start (a bad file is a start-up error naming it) and then polled
//! ([`watch_files`], every `--cert-reload-interval`, default [`DEFAULT_RELOAD_INTERVAL`]): a
//! changed file is loaded and used by the next handshake; a changed file that does not load is
//! logged and the previous material stays in use. Open connections keep what they were
//! established with.
//!
//! Everything runs on rustls with the ring provider ([`provider`]).

mod cert_store;
mod config;
mod identity;
pub mod kube_secrets;
pub mod pki;
pub mod policy;
pub mod secrets;
mod verifier;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::{CryptoProvider, ring};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use cert_store::CertStore;
pub use config::{
    mutual_tls_client_config, mutual_tls_server_config, mutual_tls_server_config_with,
};
pub use identity::{CertificateFacts, Identity, common_name};
pub use kube_secrets::{ClientMaterial, Issuer, SecretApiError};
pub use policy::{PolicyError, TlsPolicy};
pub use verifier::{ClientCaVerifier, ServerCaVerifier, client_verifier, server_verifier};
pub use watch::watch_files;

/// The default of every process' `--cert-reload-interval` flag (Go duration syntax): how often
/// certificate, key and CA files are checked for changes.
pub const DEFAULT_RELOAD_INTERVAL: &str = "10s";

/// Why TLS material cannot be used. Messages name the file (or input) to fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A certificate file holds no usable PEM certificate.
    #[error("{what} holds no PEM certificate: {reason}")]
    Certificate {
        /// The file or input.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// A key file holds no usable PEM private key, or the key does not fit the certificate.
    #[error("{what} holds no usable PEM private key: {reason}")]
    PrivateKey {
        /// The file or input.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// A CA bundle holds certificates rustls cannot use as trust anchors.
    #[error("{what} cannot be used as a CA: {reason}")]
    TrustAnchors {
        /// The file or input.
        what: String,
        /// What is wrong.
        reason: String,
    },
}

/// The processes' crypto provider: rustls on ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Reads a file, naming it on failure.
///
/// # Errors
/// [`TlsError::Read`].
pub fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Every PEM certificate in `pem`.
///
/// # Errors
/// [`TlsError::Certificate`] naming `what` when `pem` holds none or a malformed one.
pub fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Certificate {
            what: what.to_string(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Certificate {
            what: what.to_string(),
            reason: "no CERTIFICATE block found".to_string(),
        });
    }
    Ok(certs)
}

/// A certificate chain and its key, ready to serve or to present as a client.
///
/// # Errors
/// [`TlsError`] naming `what` when either part is unusable or they do not match.
pub fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    what: &str,
) -> Result<CertifiedKey, TlsError> {
    let chain = certificates(cert_pem, what)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::PrivateKey {
        what: what.to_string(),
        reason: e.to_string(),
    })?;
    CertifiedKey::from_der(chain, key, &ring::default_provider()).map_err(|e| {
        TlsError::PrivateKey {
            what: what.to_string(),
            reason: e.to_string(),
        }
    })
}

/// The certificates of a PEM CA bundle as trust anchors.
///
/// # Errors
/// [`TlsError`] naming `what` when the bundle holds no certificate or one rustls cannot use.
pub fn roots(pem: &[u8], what: &str) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in certificates(pem, what)? {
        roots.add(ca).map_err(|e| TlsError::TrustAnchors {
            what: what.to_string(),
            reason: e.to_string(),
        })?;
    }
    Ok(roots)
}

#[cfg(test)]
pub(crate) mod test_pki {
    //! Certificates generated at test time.

    use rcgen::ExtendedKeyUsagePurpose;

    use crate::pki::CertificateAuthority;

    /// A CA that issues server and client certificates.
    pub struct Ca(CertificateAuthority);

    impl Ca {
        pub fn new(name: &str) -> Self {
            Self(CertificateAuthority::new(name).expect("CA"))
        }

        pub fn pem(&self) -> String {
            self.0.cert_pem()
        }

        /// A certificate and key for `hosts` with `usage`, as PEM.
        pub fn issue(&self, hosts: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
            let pair = self
                .0
                .issue("test", hosts, &[usage], jiff::Timestamp::now())
                .expect("certificate");
            (pair.cert, pair.key)
        }
    }

    /// A receiver of one `()` per change [`crate::watch_files`] reports on `file` (polled every
    /// 10 s), until `cancel`.
    pub fn changes_of(
        file: &std::path::Path,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> tokio::sync::mpsc::UnboundedReceiver<()> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        crate::watch_files(
            vec![file.to_path_buf()],
            std::time::Duration::from_secs(10),
            cancel.clone(),
            move || {
                let _ = tx.send(());
            },
        );
        rx
    }

    /// A fresh directory under the system's temporary directory.
    pub fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "keda-tls-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }
}

#[cfg(test)]
mod tests {
    use super::test_pki::Ca;
    use super::*;
    use rcgen::ExtendedKeyUsagePurpose;

    #[test]
    fn a_certificate_and_its_key_load_as_a_certified_key() {
        let (cert, key) = Ca::new("ca").issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
        let loaded = certified_key(cert.as_bytes(), key.as_bytes(), "tls.crt").expect("loads");
        assert_eq!(loaded.cert.len(), 1);
    }

    #[test]
    fn a_key_that_does_not_fit_the_certificate_is_rejected_naming_the_input() {
        let ca = Ca::new("ca");
        let (cert, _) = ca.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
        let (_, other_key) = ca.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
        let error = certified_key(cert.as_bytes(), other_key.as_bytes(), "tls.crt / tls.key")
            .expect_err("mismatched key");
        assert!(
            error
                .to_string()
                .starts_with("tls.crt / tls.key holds no usable PEM private key"),
            "{error}"
        );
    }

    #[test]
    fn a_file_without_a_certificate_is_rejected() {
        let error = certificates(b"not pem", "ca.crt").expect_err("no certificate");
        assert!(
            error
                .to_string()
                .starts_with("ca.crt holds no PEM certificate"),
            "{error}"
        );
        let error = roots(b"", "ca.crt").expect_err("no CA");
        assert!(
            error
                .to_string()
                .starts_with("ca.crt holds no PEM certificate"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let error = read(Path::new("/nonexistent/keda-tls/ca.crt")).expect_err("missing");
        assert!(
            error
                .to_string()
                .starts_with("cannot read /nonexistent/keda-tls/ca.crt: "),
            "{error}"
        );
    }
}
