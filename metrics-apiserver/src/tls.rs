//! TLS material: the serving certificate (from files, reloaded on change, or self-signed), the
//! client-certificate policy of the secure port, and PEM loading.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::client::ResolvesClientCert;
use rustls::crypto::{CryptoProvider, ring};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Why TLS material cannot be used. Messages name the file (and so the flag) to fix.
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
    /// A self-signed certificate could not be generated.
    #[error("generating a self-signed serving certificate failed: {0}")]
    SelfSigned(String),
}

/// The process' crypto provider: rustls on ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Every PEM certificate in `pem`.
///
/// # Errors
/// [`TlsError::Certificate`] when `pem` holds none or a malformed one.
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

/// A PEM certificate and key, self-signed for `hosts` (DNS names or IP addresses).
///
/// # Errors
/// [`TlsError::SelfSigned`].
pub fn self_signed(hosts: &[String]) -> Result<(String, String), TlsError> {
    let generated = rcgen::generate_simple_self_signed(hosts.to_vec())
        .map_err(|e| TlsError::SelfSigned(e.to_string()))?;
    Ok((generated.cert.pem(), generated.signing_key.serialize_pem()))
}

/// A certificate and key that can be replaced while connections use it: the serving certificate
/// of the secure port, or the client certificate presented to the operator.
#[derive(Debug)]
pub struct CertStore {
    current: ArcSwap<CertifiedKey>,
}

impl CertStore {
    /// A store holding `key`.
    pub fn new(key: CertifiedKey) -> Self {
        Self {
            current: ArcSwap::from_pointee(key),
        }
    }

    /// Replaces the certificate; new handshakes use it, open connections keep theirs.
    pub fn replace(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }

    /// The certificate in use.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    /// A store loaded from a PEM certificate file and key file.
    ///
    /// # Errors
    /// [`TlsError`] naming the file.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Ok(Self::new(load_pair(cert, key)?))
    }

    /// Polls `cert` and `key` every `interval` until `cancel`, and replaces the certificate when
    /// either file changes (Secret volumes change by swapping a symlink, which polling sees).
    /// A pair that does not load is logged and the previous certificate stays in use.
    pub fn reload_on_change(
        self: &Arc<Self>,
        cert: PathBuf,
        key: PathBuf,
        interval: Duration,
        cancel: CancellationToken,
    ) {
        let store = Arc::clone(self);
        let paths = vec![cert.clone(), key.clone()];
        watch_files(paths, interval, cancel, move || {
            match load_pair(&cert, &key) {
                Ok(loaded) => {
                    store.replace(loaded);
                    info!(cert = %cert.display(), "certificate reloaded");
                }
                Err(error) => {
                    warn!(%error, "certificate changed but cannot be loaded; keeping the previous one")
                }
            }
        });
    }
}

fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let what = format!("{} / {}", cert.display(), key.display());
    certified_key(&read(cert)?, &read(key)?, &what)
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl ResolvesClientCert for CertStore {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Calls `on_change` whenever the content of one of `paths` differs from what the previous poll
/// saw. Runs on the current tokio runtime until `cancel`.
pub fn watch_files(
    paths: Vec<PathBuf>,
    interval: Duration,
    cancel: CancellationToken,
    on_change: impl Fn() + Send + 'static,
) {
    let snapshot = |paths: &[PathBuf]| -> Vec<Option<Vec<u8>>> {
        paths.iter().map(|p| std::fs::read(p).ok()).collect()
    };
    let mut seen = snapshot(&paths);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let now = snapshot(&paths);
            if now != seen {
                seen = now;
                on_change();
            }
        }
    });
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
pub fn secure_port_config(serving: Arc<CertStore>) -> Result<ServerConfig, rustls::Error> {
    let provider = provider();
    Ok(ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(RequestClientCert::new(provider)))
        .with_cert_resolver(serving))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_loads_as_a_serving_certificate() {
        let (cert, key) =
            self_signed(&["localhost".into(), "127.0.0.1".into()]).expect("generated");
        let loaded = certified_key(cert.as_bytes(), key.as_bytes(), "self-signed").expect("loads");
        assert_eq!(loaded.cert.len(), 1);
    }

    #[test]
    fn a_key_that_does_not_fit_the_certificate_is_rejected_naming_the_input() {
        let (cert, _) = self_signed(&["localhost".into()]).expect("generated");
        let (_, other_key) = self_signed(&["localhost".into()]).expect("generated");
        let error = certified_key(cert.as_bytes(), other_key.as_bytes(), "tls.crt / tls.key")
            .expect_err("mismatched key");
        assert!(error.to_string().contains("tls.crt / tls.key"), "{error}");
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
    }

    #[tokio::test(start_paused = true)]
    async fn changed_certificate_files_are_served_after_the_next_poll() {
        let dir = std::env::temp_dir().join(format!(
            "keda-rs-tls-reload-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        let write = |hosts: &[String]| {
            let (c, k) = self_signed(hosts).expect("generated");
            std::fs::write(&cert, c).expect("write cert");
            std::fs::write(&key, k).expect("write key");
        };
        write(&["first.example".into()]);
        let store = Arc::new(CertStore::from_files(&cert, &key).expect("loads"));
        let before = store.current().cert[0].clone();
        let cancel = CancellationToken::new();
        store.reload_on_change(
            cert.clone(),
            key.clone(),
            Duration::from_secs(10),
            cancel.clone(),
        );

        write(&["second.example".into()]);
        // Virtual time: each sleep lets the poller run its next tick.
        tokio::time::timeout(Duration::from_secs(60), async {
            while store.current().cert[0] == before {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
        .await
        .expect("the new certificate is loaded within a few polls");
        cancel.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(start_paused = true)]
    async fn a_broken_replacement_keeps_the_previous_certificate() {
        let dir = std::env::temp_dir().join(format!(
            "keda-rs-tls-broken-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        let (c, k) = self_signed(&["first.example".into()]).expect("generated");
        std::fs::write(&cert, c).expect("write cert");
        std::fs::write(&key, k).expect("write key");
        let store = Arc::new(CertStore::from_files(&cert, &key).expect("loads"));
        let before = store.current().cert[0].clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        watch_files(
            vec![cert.clone()],
            Duration::from_secs(10),
            cancel.clone(),
            move || {
                let _ = tx.send(());
            },
        );
        store.reload_on_change(
            cert.clone(),
            key.clone(),
            Duration::from_secs(10),
            cancel.clone(),
        );
        std::fs::write(&cert, "garbage").expect("write");
        tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the change is seen")
            .expect("watcher alive");
        // Both watchers tick at the same virtual instants; one more tick settles the store's.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(store.current().cert[0], before);
        cancel.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
