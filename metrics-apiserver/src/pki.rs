//! A small certificate authority for the certificates keda-rs needs: the mutual TLS between the
//! metrics-apiserver and the operator's metric service, and, in tests and local runs, the
//! front-proxy and serving certificates. Keys are ECDSA P-256, generated in memory.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// Why a certificate could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("generating the certificate {subject:?} failed: {source}")]
pub struct PkiError {
    /// The subject common name.
    pub subject: String,
    /// The cause.
    #[source]
    pub source: rcgen::Error,
}

/// How long a CA is valid.
const CA_VALIDITY_DAYS: i64 = 10 * 365;
/// How long an issued certificate is valid.
const LEAF_VALIDITY_DAYS: i64 = 365;

/// Valid from yesterday (clock skew) for `days`.
fn set_validity(params: &mut CertificateParams, days: i64) {
    let today = jiff::Zoned::now().date();
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
#[derive(Clone, Debug)]
pub struct PemPair {
    /// The certificate.
    pub cert: String,
    /// The PKCS#8 private key.
    pub key: String,
}

/// A self-signed CA that issues server and client certificates.
pub struct CertificateAuthority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// A new CA with subject common name `common_name`.
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn new(common_name: &str) -> Result<Self, PkiError> {
        let wrap = |source| PkiError {
            subject: common_name.to_string(),
            source,
        };
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(wrap)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        set_validity(&mut params, CA_VALIDITY_DAYS);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(wrap)?;
        Ok(Self {
            issuer: CertifiedIssuer::self_signed(params, key).map_err(wrap)?,
        })
    }

    /// The CA certificate, PEM (the bundle to trust).
    pub fn cert_pem(&self) -> String {
        self.issuer.as_ref().pem()
    }

    /// A server certificate for `hosts` (DNS names or IP addresses).
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn issue_server(&self, common_name: &str, hosts: &[&str]) -> Result<PemPair, PkiError> {
        self.issue(common_name, hosts, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate with subject common name `common_name`.
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn issue_client(&self, common_name: &str) -> Result<PemPair, PkiError> {
        self.issue(common_name, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A certificate usable both to serve `hosts` and as a client certificate, like KEDA's
    /// shared `tls.crt` of the operator and its metrics server.
    ///
    /// # Errors
    /// [`PkiError`].
    pub fn issue_peer(&self, common_name: &str, hosts: &[&str]) -> Result<PemPair, PkiError> {
        self.issue_with(
            common_name,
            hosts,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    fn issue(
        &self,
        common_name: &str,
        hosts: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<PemPair, PkiError> {
        self.issue_with(common_name, hosts, vec![usage])
    }

    fn issue_with(
        &self,
        common_name: &str,
        hosts: &[&str],
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> Result<PemPair, PkiError> {
        let wrap = |source| PkiError {
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
        params.extended_key_usages = usages;
        set_validity(&mut params, LEAF_VALIDITY_DAYS);
        let key = KeyPair::generate().map_err(wrap)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(wrap)?;
        Ok(PemPair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keda_tls::{certificates, certified_key};

    #[test]
    fn issued_certificates_load_and_name_their_subject() {
        let ca = CertificateAuthority::new("test-ca").expect("CA");
        let server = ca
            .issue_server("server", &["localhost", "127.0.0.1"])
            .expect("server certificate");
        certified_key(server.cert.as_bytes(), server.key.as_bytes(), "server").expect("loads");
        let client = ca
            .issue_client("front-proxy-client")
            .expect("client certificate");
        let der = certificates(client.cert.as_bytes(), "client").expect("PEM");
        let (_, parsed) = x509_parser::parse_x509_certificate(der[0].as_ref()).expect("DER");
        let cn = parsed.subject().iter_common_name().next().expect("a CN");
        assert_eq!(cn.as_str().expect("UTF-8"), "front-proxy-client");
        assert_eq!(
            certificates(ca.cert_pem().as_bytes(), "ca")
                .expect("PEM")
                .len(),
            1
        );
    }
}
