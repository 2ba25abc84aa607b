//! A certificate and key that can be replaced while connections use it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::SignatureScheme;
use rustls::client::ResolvesClientCert;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use crate::{TlsError, certified_key, read, watch};

/// A certificate and key that can be replaced while connections use it: a serving certificate
/// ([`ResolvesServerCert`]) or a client certificate ([`ResolvesClientCert`]). New handshakes use
/// the current one; open connections keep theirs.
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

    /// A store loaded from a PEM certificate file and key file.
    ///
    /// # Errors
    /// [`TlsError`] naming the files.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Ok(Self::new(load_pair(cert, key)?))
    }

    /// Replaces the certificate; new handshakes use it, open connections keep theirs.
    pub fn replace(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }

    /// The certificate in use.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    /// Polls `cert` and `key` every `interval` until `cancel`, and replaces the certificate when
    /// either file changes. A pair that does not load (a broken file, or a certificate and key
    /// caught half-way through an update) is logged and the previous certificate stays in use;
    /// the next change is tried again.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn reload_on_change(
        self: &Arc<Self>,
        cert: PathBuf,
        key: PathBuf,
        interval: Duration,
        cancel: CancellationToken,
    ) {
        let store = Arc::clone(self);
        let paths = vec![cert.clone(), key.clone()];
        watch::reload_on_change("certificate", paths, interval, cancel, move || {
            store.replace(load_pair(&cert, &key)?);
            Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::{Ca, changes_of, temp_dir};
    use rcgen::ExtendedKeyUsagePurpose;

    fn write_pair(ca: &Ca, host: &str, cert: &Path, key: &Path) {
        let (c, k) = ca.issue(&[host], ExtendedKeyUsagePurpose::ServerAuth);
        std::fs::write(cert, c).expect("write cert");
        std::fs::write(key, k).expect("write key");
    }

    #[tokio::test(start_paused = true)]
    async fn changed_certificate_files_are_served_after_the_next_poll() {
        let dir = temp_dir("reload");
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        let ca = Ca::new("ca");
        write_pair(&ca, "first.example", &cert, &key);
        let store = Arc::new(CertStore::from_files(&cert, &key).expect("loads"));
        let before = store.current().cert[0].clone();
        let cancel = CancellationToken::new();
        store.reload_on_change(
            cert.clone(),
            key.clone(),
            Duration::from_secs(10),
            cancel.clone(),
        );

        write_pair(&ca, "second.example", &cert, &key);
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
        let dir = temp_dir("broken");
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        let ca = Ca::new("ca");
        write_pair(&ca, "first.example", &cert, &key);
        let store = Arc::new(CertStore::from_files(&cert, &key).expect("loads"));
        let before = store.current().cert[0].clone();
        let cancel = CancellationToken::new();
        let mut rx = changes_of(&cert, &cancel);
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

        // The watcher goes on: a good pair after the broken one is loaded.
        write_pair(&ca, "third.example", &cert, &key);
        tokio::time::timeout(Duration::from_secs(60), async {
            while store.current().cert[0] == before {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
        .await
        .expect("a good pair after a broken one is loaded");
        cancel.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
