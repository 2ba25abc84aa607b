//! Verifiers of a peer's certificate whose CA can be replaced while connections use them.
//!
//! rustls fixes a configuration's verifier when the configuration is built; these verifiers are
//! that fixed object and delegate each call to rustls' own WebPKI verifier for the CA currently
//! loaded, which [`ClientCaVerifier::replace`] / [`ServerCaVerifier::replace`] swap atomically.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_util::sync::CancellationToken;

use crate::{TlsError, provider, read, roots, watch};

/// rustls' verifier requiring a client certificate that chains to the PEM CA bundle `pem`.
///
/// # Errors
/// [`TlsError`] naming `what` when the bundle is unusable.
pub fn client_verifier(pem: &[u8], what: &str) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots(pem, what)?), provider())
        .build()
        .map_err(|e| TlsError::TrustAnchors {
            what: what.to_string(),
            reason: e.to_string(),
        })
}

/// rustls' verifier of a server certificate that chains to the PEM CA bundle `pem` and names the
/// server.
///
/// # Errors
/// [`TlsError`] naming `what` when the bundle is unusable.
pub fn server_verifier(pem: &[u8], what: &str) -> Result<Arc<WebPkiServerVerifier>, TlsError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots(pem, what)?), provider())
        .build()
        .map_err(|e| TlsError::TrustAnchors {
            what: what.to_string(),
            reason: e.to_string(),
        })
}

/// A server's verifier of client certificates: a certificate is required and must chain to the
/// current CA, which can be replaced (from a file, [`Self::reload_on_change`]).
///
/// # Caveats
/// - It names no acceptable CAs in the handshake (`certificate_authorities`): a verifier cannot
///   lend out the names of a CA that may be swapped away under them. A client then presents the
///   certificate it has, which is what keda-rs' clients and curl do anyway.
/// - A resumed TLS session skips certificate verification, so a session established before the
///   CA changed would outlive it: use it in a configuration that does not resume sessions
///   ([`crate::mutual_tls_server_config`]).
#[derive(Debug)]
pub struct ClientCaVerifier {
    current: ArcSwap<Arc<dyn ClientCertVerifier>>,
}

impl ClientCaVerifier {
    /// A verifier that delegates to `verifier` until replaced.
    pub fn new(verifier: Arc<dyn ClientCertVerifier>) -> Self {
        Self {
            current: ArcSwap::from_pointee(verifier),
        }
    }

    /// Requires client certificates that chain to the PEM CA bundle `pem`.
    ///
    /// # Errors
    /// [`TlsError`] naming `what` when the bundle is unusable.
    pub fn from_pem(pem: &[u8], what: &str) -> Result<Self, TlsError> {
        Ok(Self::new(client_verifier(pem, what)?))
    }

    /// Requires client certificates that chain to the CA bundle in the PEM file `path`.
    ///
    /// # Errors
    /// [`TlsError`] naming the file.
    pub fn from_file(path: &Path) -> Result<Self, TlsError> {
        Self::from_pem(&read(path)?, &path.display().to_string())
    }

    /// Replaces the CA: the next handshakes verify against `verifier`.
    pub fn replace(&self, verifier: Arc<dyn ClientCertVerifier>) {
        self.current.store(Arc::new(verifier));
    }

    /// Polls the CA bundle `path` every `interval` until `cancel` and replaces the CA when the
    /// file changes. A bundle that does not load is logged and the previous CA stays in use.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn reload_on_change(
        self: &Arc<Self>,
        path: PathBuf,
        interval: Duration,
        cancel: CancellationToken,
    ) {
        let this = Arc::clone(self);
        let paths = vec![path.clone()];
        watch::reload_on_change("client CA", paths, interval, cancel, move || {
            this.replace(client_verifier(&read(&path)?, &path.display().to_string())?);
            Ok(())
        });
    }
}

impl ClientCertVerifier for ClientCaVerifier {
    fn offer_client_auth(&self) -> bool {
        self.current.load().offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.current.load().client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // See the type's caveats.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current
            .load()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current.load().supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.current.load().requires_raw_public_keys()
    }
}

/// A client's verifier of server certificates: the certificate must chain to the current CA,
/// which can be replaced (from a file, [`Self::reload_on_change`]), and name the server.
///
/// # Caveats
/// A resumed TLS session skips certificate verification: use it in a configuration that does not
/// resume sessions ([`crate::mutual_tls_client_config`]).
#[derive(Debug)]
pub struct ServerCaVerifier {
    current: ArcSwap<WebPkiServerVerifier>,
}

impl ServerCaVerifier {
    /// A verifier that delegates to `verifier` until replaced.
    pub fn new(verifier: Arc<WebPkiServerVerifier>) -> Self {
        Self {
            current: ArcSwap::new(verifier),
        }
    }

    /// Trusts server certificates that chain to the PEM CA bundle `pem`.
    ///
    /// # Errors
    /// [`TlsError`] naming `what` when the bundle is unusable.
    pub fn from_pem(pem: &[u8], what: &str) -> Result<Self, TlsError> {
        Ok(Self::new(server_verifier(pem, what)?))
    }

    /// Trusts server certificates that chain to the CA bundle in the PEM file `path`.
    ///
    /// # Errors
    /// [`TlsError`] naming the file.
    pub fn from_file(path: &Path) -> Result<Self, TlsError> {
        Self::from_pem(&read(path)?, &path.display().to_string())
    }

    /// Replaces the CA: the next handshakes verify against `verifier`.
    pub fn replace(&self, verifier: Arc<WebPkiServerVerifier>) {
        self.current.store(verifier);
    }

    /// Polls the CA bundle `path` every `interval` until `cancel` and replaces the CA when the
    /// file changes. A bundle that does not load is logged and the previous CA stays in use.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn reload_on_change(
        self: &Arc<Self>,
        path: PathBuf,
        interval: Duration,
        cancel: CancellationToken,
    ) {
        let this = Arc::clone(self);
        let paths = vec![path.clone()];
        watch::reload_on_change("server CA", paths, interval, cancel, move || {
            this.replace(server_verifier(&read(&path)?, &path.display().to_string())?);
            Ok(())
        });
    }
}

impl ServerCertVerifier for ServerCaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.current.load().verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current.load().supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.current.load().requires_raw_public_keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::{Ca, changes_of, temp_dir};
    use rcgen::ExtendedKeyUsagePurpose;
    use rustls_pki_types::pem::PemObject;

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM certificate")
    }

    fn client_accepted(verifier: &ClientCaVerifier, ca: &Ca) -> bool {
        let (cert, _) = ca.issue(&[], ExtendedKeyUsagePurpose::ClientAuth);
        verifier
            .verify_client_cert(&der(&cert), &[], UnixTime::now())
            .is_ok()
    }

    fn server_accepted(verifier: &ServerCaVerifier, ca: &Ca) -> bool {
        let (cert, _) = ca.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
        let name = ServerName::try_from("localhost").expect("name");
        verifier
            .verify_server_cert(&der(&cert), &[], &name, &[], UnixTime::now())
            .is_ok()
    }

    /// Waits (virtual time) until `done`, at most a few polls.
    async fn within_a_few_polls(done: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(60), async {
            while !done() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
        .await
        .expect("within a few polls");
    }

    #[tokio::test(start_paused = true)]
    async fn a_replaced_client_ca_file_is_trusted_instead_of_the_old_one_after_the_next_poll() {
        let dir = temp_dir("client-ca");
        let file = dir.join("ca.crt");
        let (old, new) = (Ca::new("old"), Ca::new("new"));
        std::fs::write(&file, old.pem()).expect("write");
        let verifier = Arc::new(ClientCaVerifier::from_file(&file).expect("loads"));
        assert!(client_accepted(&verifier, &old));
        assert!(!client_accepted(&verifier, &new));
        assert!(verifier.client_auth_mandatory());
        let cancel = CancellationToken::new();
        verifier.reload_on_change(file.clone(), Duration::from_secs(10), cancel.clone());

        std::fs::write(&file, new.pem()).expect("write");
        within_a_few_polls(|| client_accepted(&verifier, &new)).await;
        assert!(!client_accepted(&verifier, &old));
        cancel.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(start_paused = true)]
    async fn a_broken_client_ca_replacement_keeps_the_previous_ca() {
        let dir = temp_dir("client-ca-broken");
        let file = dir.join("ca.crt");
        let old = Ca::new("old");
        std::fs::write(&file, old.pem()).expect("write");
        let verifier = Arc::new(ClientCaVerifier::from_file(&file).expect("loads"));
        let cancel = CancellationToken::new();
        let mut rx = changes_of(&file, &cancel);
        verifier.reload_on_change(file.clone(), Duration::from_secs(10), cancel.clone());
        std::fs::write(&file, "garbage").expect("write");
        tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the change is seen")
            .expect("watcher alive");
        // Both watchers tick at the same virtual instants; one more tick settles the verifier's.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(client_accepted(&verifier, &old));
        cancel.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replaced_server_ca_file_is_trusted_instead_of_the_old_one_and_a_broken_one_is_not() {
        let dir = temp_dir("server-ca");
        let file = dir.join("ca.crt");
        let (old, new) = (Ca::new("old"), Ca::new("new"));
        std::fs::write(&file, old.pem()).expect("write");
        let verifier = Arc::new(ServerCaVerifier::from_file(&file).expect("loads"));
        assert!(server_accepted(&verifier, &old));
        assert!(!server_accepted(&verifier, &new));
        let cancel = CancellationToken::new();
        verifier.reload_on_change(file.clone(), Duration::from_secs(10), cancel.clone());

        std::fs::write(&file, new.pem()).expect("write");
        within_a_few_polls(|| server_accepted(&verifier, &new)).await;
        assert!(!server_accepted(&verifier, &old));

        std::fs::write(&file, "garbage").expect("write");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(server_accepted(&verifier, &new), "the previous CA is kept");
        cancel.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_naming_it() {
        let error = ClientCaVerifier::from_pem(b"", "ca.crt").expect_err("no CA");
        assert!(error.to_string().starts_with("ca.crt "), "{error}");
        let error = ServerCaVerifier::from_file(Path::new("/nonexistent/ca.crt"))
            .expect_err("missing file");
        assert!(
            error
                .to_string()
                .starts_with("cannot read /nonexistent/ca.crt"),
            "{error}"
        );
    }
}
