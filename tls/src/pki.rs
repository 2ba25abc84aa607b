//! A small certificate authority for the certificates keda-rs needs: the identities of the
//! mutual TLS between the operator's metric service, the metrics-apiserver and the activators
//! ([`crate::Identity`]), and, in tests and local runs, front-proxy and serving certificates.
//! Keys are ECDSA P-256, generated in memory.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The subject common name of the CA that the operator generates and `keda-rs-certs` prints.
pub const CA_COMMON_NAME: &str = "keda-rs-ca";

/// How long a generated CA is valid: ten years, as the CA of KEDA's own certificate rotation.
pub const CA_VALIDITY_DAYS: i64 = 10 * 365;

/// How long an issued certificate is valid.
pub const LEAF_VALIDITY_DAYS: i64 = 365;

/// Why a certificate could not be generated or a CA not loaded.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen failed.
    #[error("generating the certificate {subject:?} failed: {source}")]
    Generate {
        /// The subject common name (or the input that could not be loaded).
        subject: String,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// A CA certificate and key do not load, or do not belong together.
    #[error(transparent)]
    Load(#[from] crate::TlsError),
}

/// Valid from the day before `now` (clock skew) for `days`, whole UTC days.
fn set_validity(params: &mut CertificateParams, now: jiff::Timestamp, days: i64) {
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    let ymd = |d: jiff::civil::Date| {
        rcgen::date_time_ymd(
            i32::from(d.year()),
            d.month().unsigned_abs(),
            d.day().unsigned_abs(),
        )
    };
    if let (Ok(from), Ok(until)) = (
        today.checked_sub(jiff::Span::new().days(1)),
        today.checked_add(jiff::Span::new().days(days)),
    ) {
        params.not_before = ymd(from);
        params.not_after = ymd(until);
    }
}

/// A certificate and its private key, PEM-encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PemPair {
    /// The certificate.
    pub cert: String,
    /// The PKCS#8 private key.
    pub key: String,
}

/// A CA that issues server and client certificates: generated, or loaded from its certificate
/// and key (`ca.crt` and `ca.key` of the `keda-rs-certs` Secret).
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// A new CA with subject common name `common_name`, valid from yesterday for
    /// [`CA_VALIDITY_DAYS`].
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn new(common_name: &str) -> Result<Self, PkiError> {
        Self::new_at(common_name, jiff::Timestamp::now())
    }

    /// [`Self::new`] as if the time were `now`.
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn new_at(common_name: &str, now: jiff::Timestamp) -> Result<Self, PkiError> {
        let wrap = |source| PkiError::Generate {
            subject: common_name.to_string(),
            source,
        };
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(wrap)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        set_validity(&mut params, now, CA_VALIDITY_DAYS);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(wrap)?;
        let cert_pem = params.self_signed(&key).map_err(wrap)?.pem();
        Ok(Self {
            issuer: Issuer::new(params, key),
            cert_pem,
        })
    }

    /// The CA of a PEM certificate (the first of `cert_pem`) and its PEM private key.
    ///
    /// # Errors
    /// [`PkiError`] naming `what` when either does not parse.
    pub fn from_pem(cert_pem: &str, key_pem: &str, what: &str) -> Result<Self, PkiError> {
        let wrap = |source| PkiError::Generate {
            subject: what.to_string(),
            source,
        };
        let first = crate::certificates(cert_pem.as_bytes(), what)?
            .into_iter()
            .next()
            .ok_or_else(|| wrap(rcgen::Error::CouldNotParseCertificate))?;
        // rcgen would sign with a key of another CA without complaint; rustls checks the pair.
        crate::certified_key(pem_of(&first).as_bytes(), key_pem.as_bytes(), what)?;
        let key = KeyPair::from_pem(key_pem).map_err(wrap)?;
        let issuer = Issuer::from_ca_cert_der(&first, key).map_err(wrap)?;
        Ok(Self {
            issuer,
            cert_pem: pem_of(&first),
        })
    }

    /// The CA certificate, PEM (the bundle to trust).
    pub fn cert_pem(&self) -> String {
        self.cert_pem.clone()
    }

    /// The CA's private key, PEM.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A server certificate for `hosts` (DNS names or IP addresses).
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn issue_server(&self, common_name: &str, hosts: &[&str]) -> Result<PemPair, PkiError> {
        self.issue(
            common_name,
            hosts,
            &[ExtendedKeyUsagePurpose::ServerAuth],
            jiff::Timestamp::now(),
        )
    }

    /// A client certificate with subject common name `common_name`.
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn issue_client(&self, common_name: &str) -> Result<PemPair, PkiError> {
        self.issue(
            common_name,
            &[],
            &[ExtendedKeyUsagePurpose::ClientAuth],
            jiff::Timestamp::now(),
        )
    }

    /// A certificate with subject common name `common_name`, naming `hosts` (DNS names or IP
    /// addresses), for `usages`, valid from the day before `now` for [`LEAF_VALIDITY_DAYS`].
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn issue(
        &self,
        common_name: &str,
        hosts: &[&str],
        usages: &[ExtendedKeyUsagePurpose],
        now: jiff::Timestamp,
    ) -> Result<PemPair, PkiError> {
        let wrap = |source| PkiError::Generate {
            subject: common_name.to_string(),
            source,
        };
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_string()).collect();
        let mut params = CertificateParams::new(hosts).map_err(wrap)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages.to_vec();
        set_validity(&mut params, now, LEAF_VALIDITY_DAYS);
        let key = KeyPair::generate().map_err(wrap)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(wrap)?;
        Ok(PemPair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// One DER certificate as PEM (LF line endings, as rcgen writes them).
pub(crate) fn pem_of(der: &rustls_pki_types::CertificateDer<'_>) -> String {
    pem::encode_config(
        &pem::Pem::new("CERTIFICATE", der.as_ref()),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}
