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
    /// `cert`, `key` and `keyPassword` do not fit together.
    #[error("{0}")]
    Incomplete(&'static str),
    /// `keyPassword` is set, but `key` is not an encrypted PKCS#8 PEM key.
    #[error(
        "parameter \"keyPassword\" is set, but parameter \"key\" is not an encrypted PKCS#8 PEM key (-----BEGIN ENCRYPTED PRIVATE KEY-----){hint}"
    )]
    KeyNotEncrypted {
        /// What the key is instead, e.g. a hint about legacy PEM encryption.
        hint: &'static str,
    },
    /// The encrypted key could not be decrypted: a wrong `keyPassword`, or a scheme keda-rs
    /// does not read.
    #[error("parameter \"key\" could not be decrypted with parameter \"keyPassword\": {reason}")]
    KeyDecrypt {
        /// Why, without key material.
        reason: &'static str,
    },
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

    /// [`TlsSettings::client_config`] under `policy` instead of the process-wide one.
    ///
    /// # Errors
    /// As [`TlsSettings::client_config`].
    pub fn client_config_with(
        &self,
        policy: &crate::client_policy::ClientPolicy,
    ) -> Result<ClientConfig, TlsError> {
        self.build_with(true, policy)
    }

    fn build(&self, check_name: bool) -> Result<ClientConfig, TlsError> {
        self.build_with(check_name, crate::client_policy::current())
    }

    fn build_with(
        &self,
        check_name: bool,
        policy: &crate::client_policy::ClientPolicy,
    ) -> Result<ClientConfig, TlsError> {
        let provider = policy.tls.provider();
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(policy.tls.versions())?;
        let builder = if self.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification {
                    algorithms: provider.signature_verification_algorithms,
                }))
        } else if check_name {
            builder.with_root_certificates(self.roots(policy)?)
        } else {
            let chain = WebPkiServerVerifier::builder_with_provider(
                Arc::new(self.roots(policy)?),
                provider,
            )
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

    fn roots(
        &self,
        policy: &crate::client_policy::ClientPolicy,
    ) -> Result<RootCertStore, TlsError> {
        let mut roots = RootCertStore::empty();
        // Unreadable system certificates are skipped, as Go's SystemCertPool does.
        let (_, _) =
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        // --ca-dir: trusted by every scaler, as KEDA's SetCACertDirs makes them.
        let (_, _) = roots.add_parsable_certificates(policy.extra_roots.iter().cloned());
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

/// KEDA's `cert`, `key` and `keyPassword` parameters as a client identity: both or neither of
/// `cert` and `key`; with `keyPassword`, `key` is decrypted (see [`decrypt_private_key`]).
///
/// # Errors
/// `cert` without `key` or the reverse, or a key that cannot be decrypted; the messages name the parameters, never their values.
pub fn client_identity(
    cert: Option<Secret>,
    key: Option<Secret>,
    key_password: Option<Secret>,
) -> Result<Option<(Secret, Secret)>, TlsError> {
    match (cert, key, key_password) {
        (Some(cert), Some(key), None) => Ok(Some((cert, key))),
        (Some(cert), Some(key), Some(password)) => {
            Ok(Some((cert, decrypt_private_key(&key, &password)?)))
        }
        // As in KEDA, a `keyPassword` without a key is unused.
        (None, None, _) => Ok(None),
        _ => Err(TlsError::Incomplete(
            "parameters \"cert\" and \"key\" must be given together",
        )),
    }
}

/// The PEM tag of an encrypted PKCS#8 key (RFC 5958 `EncryptedPrivateKeyInfo`).
const ENCRYPTED_PKCS8_TAG: &str = "ENCRYPTED PRIVATE KEY";

/// Decrypts `key`, an encrypted PKCS#8 PEM private key (`-----BEGIN ENCRYPTED PRIVATE KEY-----`,
/// as written by `openssl pkcs8 -topk8 -v2 aes-256-cbc` or `openssl genpkey -aes256`), with
/// `password` (KEDA's `keyPassword`), and returns it as an unencrypted PKCS#8 PEM key
/// (`-----BEGIN PRIVATE KEY-----`).
///
/// Reads the PBES2 schemes that KEDA's `github.com/youmark/pkcs8` reads: PBKDF2 with
/// HMAC-SHA1/SHA-224/SHA-256/SHA-384/SHA-512, or scrypt, and AES-128/192/256-CBC or
/// DES-EDE3-CBC. As in KEDA, keys with legacy PEM encryption (`Proc-Type: 4,ENCRYPTED`) and
/// PKCS#5 v1.5 (PBES1) schemes are refused.
///
/// # Errors
/// [`TlsError::KeyNotEncrypted`] when `key` is not an encrypted PKCS#8 PEM key,
/// [`TlsError::KeyDecrypt`] when it cannot be decrypted (wrong password, unsupported scheme).
/// Neither contains key material or the password.
pub fn decrypt_private_key(key: &Secret, password: &Secret) -> Result<Secret, TlsError> {
    use pkcs5::der::asn1::OctetStringRef;
    use pkcs5::der::{Decode, Reader, SliceReader};

    let block =
        pem::parse(key.expose().as_bytes()).map_err(|_| TlsError::KeyNotEncrypted { hint: "" })?;
    if block.tag() != ENCRYPTED_PKCS8_TAG {
        let hint = if block.headers().get("Proc-Type").is_some() {
            ": legacy PEM encryption (Proc-Type: 4,ENCRYPTED) is not supported, as in KEDA; convert the key with `openssl pkcs8 -topk8 -v2 aes-256-cbc`"
        } else {
            ""
        };
        return Err(TlsError::KeyNotEncrypted { hint });
    }
    let malformed = |_| TlsError::KeyDecrypt {
        reason: "the key is not a well-formed PKCS#8 EncryptedPrivateKeyInfo",
    };
    let mut reader = SliceReader::new(block.contents()).map_err(malformed)?;
    let (algorithm, ciphertext) = reader
        .sequence(|r| {
            let algorithm = pkcs5::AlgorithmIdentifierRef::decode(r)?;
            let data = OctetStringRef::decode(r)?;
            Ok((algorithm, data))
        })
        .map_err(malformed)?;
    reader.finish(()).map_err(malformed)?;
    if algorithm.oid != pkcs5::pbes2::PBES2_OID {
        return Err(TlsError::KeyDecrypt {
            reason: "only PBES2 (PKCS#5 v2.0) encryption is supported, as in KEDA; re-encrypt the key with `openssl pkcs8 -topk8 -v2 aes-256-cbc`",
        });
    }
    let unsupported = TlsError::KeyDecrypt {
        reason: "the encryption scheme is not supported (PBES2 with PBKDF2 or scrypt and AES-CBC or DES-EDE3-CBC are)",
    };
    let Ok(scheme) = pkcs5::EncryptionScheme::try_from(algorithm) else {
        return Err(unsupported);
    };
    let plain = scheme
        .decrypt(password.expose().as_bytes(), ciphertext.as_bytes())
        .map_err(|e| match e {
            pkcs5::Error::UnsupportedAlgorithm { .. } | pkcs5::Error::NoPbes1CryptSupport => {
                unsupported
            }
            _ => TlsError::KeyDecrypt {
                reason: "wrong password, or a damaged key",
            },
        })?;
    // A wrong password that happens to leave valid padding still yields garbage: check that
    // the plaintext is a private key before handing it on.
    if PrivateKeyDer::try_from(plain.as_slice()).is_err() {
        return Err(TlsError::KeyDecrypt {
            reason: "wrong password, or a damaged key",
        });
    }
    Ok(Secret::new(pem::encode(&pem::Pem::new(
        "PRIVATE KEY",
        plain,
    ))))
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

    const KEY_PASSWORD: &str = "correct-horse-battery";

    /// A fresh P-256 key as unencrypted PKCS#8 PEM, and the same key encrypted by the
    /// `openssl` command line (as users make them) with `args`.
    fn openssl_encrypted_key(args: &[&str]) -> (String, String) {
        // Tests run in parallel and two may ask for the same scheme: one directory per call.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = rcgen::KeyPair::generate().expect("key");
        let plain = key.serialize_pem();
        let dir = std::env::temp_dir().join(format!(
            "keda-rs-key-password-{}-{call}-{}",
            std::process::id(),
            args.join("_").replace(['/', ' '], "")
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let input = dir.join("plain.pem");
        std::fs::write(&input, &plain).expect("write key");
        let output = std::process::Command::new("openssl")
            .args(args)
            .arg("-passout")
            .arg(format!("pass:{KEY_PASSWORD}"))
            .arg("-in")
            .arg(&input)
            .output()
            .expect("the openssl command line (Debian package openssl) is installed");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        (plain, String::from_utf8(output.stdout).expect("PEM"))
    }

    fn der_of(pem_text: &str) -> Vec<u8> {
        pem::parse(pem_text).expect("PEM").into_contents()
    }

    #[test]
    fn key_password_decrypts_the_pbes2_schemes_openssl_writes() {
        // (openssl arguments, scheme)
        for args in [
            // OpenSSL 3's default: PBKDF2-HMAC-SHA256, AES-256-CBC
            &["pkcs8", "-topk8", "-v2", "aes-256-cbc"][..],
            // PBKDF2-HMAC-SHA1 (older OpenSSL's default PRF), AES-128-CBC
            &[
                "pkcs8",
                "-topk8",
                "-v2",
                "aes-128-cbc",
                "-v2prf",
                "hmacWithSHA1",
            ][..],
            // DES-EDE3-CBC
            &["pkcs8", "-topk8", "-v2", "des3"][..],
            // scrypt, AES-256-CBC
            &["pkcs8", "-topk8", "-scrypt"][..],
        ] {
            let (plain, encrypted) = openssl_encrypted_key(args);
            assert!(
                encrypted.contains("BEGIN ENCRYPTED PRIVATE KEY"),
                "{args:?}"
            );
            let decrypted =
                decrypt_private_key(&Secret::new(encrypted), &Secret::new(KEY_PASSWORD))
                    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert!(decrypted.expose().contains("BEGIN PRIVATE KEY"), "{args:?}");
            assert_eq!(der_of(decrypted.expose()), der_of(&plain), "{args:?}");
        }
    }

    #[test]
    fn a_wrong_key_password_or_a_key_of_another_shape_is_an_error_without_the_values() {
        let (plain, encrypted) = openssl_encrypted_key(&["pkcs8", "-topk8", "-v2", "aes-256-cbc"]);
        let err = decrypt_private_key(&Secret::new(&*encrypted), &Secret::new("wrong-password"))
            .expect_err("wrong password");
        let shown = format!("{err} {err:?}");
        assert!(
            !shown.contains("wrong-password") && !shown.contains("PRIVATE KEY"),
            "{shown}"
        );
        assert_eq!(
            err.to_string(),
            "parameter \"key\" could not be decrypted with parameter \"keyPassword\": wrong password, or a damaged key"
        );

        let err = decrypt_private_key(&Secret::new(&*plain), &Secret::new(KEY_PASSWORD))
            .expect_err("an unencrypted key");
        assert_eq!(
            err.to_string(),
            "parameter \"keyPassword\" is set, but parameter \"key\" is not an encrypted PKCS#8 PEM key (-----BEGIN ENCRYPTED PRIVATE KEY-----)"
        );

        let (_, legacy) = openssl_encrypted_key(&["pkey", "-traditional", "-aes256"]);
        assert!(legacy.contains("Proc-Type: 4,ENCRYPTED"), "{legacy}");
        let err = decrypt_private_key(&Secret::new(&*legacy), &Secret::new(KEY_PASSWORD))
            .expect_err("legacy PEM encryption");
        assert!(
            err.to_string().contains(
                "legacy PEM encryption (Proc-Type: 4,ENCRYPTED) is not supported, as in KEDA"
            ),
            "{err}"
        );

        // PKCS#12's PBE (not PBES2), which KEDA's reader refuses too.
        let (_, pbe) = openssl_encrypted_key(&["pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES"]);
        let err = decrypt_private_key(&Secret::new(&*pbe), &Secret::new(KEY_PASSWORD))
            .expect_err("PKCS#12 PBE");
        assert!(err.to_string().contains("only PBES2"), "{err}");
    }

    #[test]
    fn cert_key_and_key_password_go_together_as_in_keda() {
        let (_, encrypted) = openssl_encrypted_key(&["pkcs8", "-topk8", "-v2", "aes-256-cbc"]);
        let identity = client_identity(
            Some(Secret::new("C")),
            Some(Secret::new(encrypted)),
            Some(Secret::new(KEY_PASSWORD)),
        )
        .expect("decrypts")
        .expect("an identity");
        assert!(identity.1.expose().contains("BEGIN PRIVATE KEY"));
        assert!(matches!(
            client_identity(Some(Secret::new("C")), None, None),
            Err(TlsError::Incomplete(_))
        ));
        // A keyPassword without a key is unused, as in KEDA.
        assert!(matches!(
            client_identity(None, None, Some(Secret::new(KEY_PASSWORD))),
            Ok(None)
        ));
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
