//! The identities of the mutual TLS between keda-rs' processes, and what a certificate says
//! about its holder.
//!
//! One CA signs three certificates, each with its own key and subject common name, so no
//! process can act as another: the operator's serving certificate (server use only), the
//! metrics-apiserver's (client use towards the operator, and serving on its secure port) and
//! the activators' (client use only). The operator's metric service authorizes each endpoint by
//! the common name of the client certificate ([`Identity::of_certificate`]): metric reads only
//! for [`Identity::MetricsApiserver`], activator reports only for [`Identity::Activator`].

use rcgen::ExtendedKeyUsagePurpose;
use rustls_pki_types::CertificateDer;

/// A keda-rs process that takes part in the mutual TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// The operator: serves the metric service.
    Operator,
    /// The metrics-apiserver: reads metrics from the operator; serves the external metrics API.
    MetricsApiserver,
    /// An activator: streams reports to the operator.
    Activator,
}

impl Identity {
    /// Every identity, the operator first.
    pub const ALL: [Self; 3] = [Self::Operator, Self::MetricsApiserver, Self::Activator];

    /// The subject common name of its certificate, which is the identity the operator checks.
    pub fn common_name(self) -> &'static str {
        match self {
            Self::Operator => "keda-operator",
            Self::MetricsApiserver => "keda-metrics-apiserver",
            Self::Activator => "keda-activator",
        }
    }

    /// The Secret (in keda-rs' namespace) that holds its certificate, key and the CA bundle
    /// (`tls.crt`, `tls.key`, `ca.crt`; the operator's also `ca.key`).
    pub fn secret_name(self) -> &'static str {
        match self {
            Self::Operator => "keda-rs-certs",
            Self::MetricsApiserver => "keda-rs-metrics-apiserver-certs",
            Self::Activator => "keda-rs-activator-certs",
        }
    }

    /// The extended key usages of its certificate.
    pub fn usages(self) -> &'static [ExtendedKeyUsagePurpose] {
        match self {
            Self::Operator => &[ExtendedKeyUsagePurpose::ServerAuth],
            Self::MetricsApiserver => &[
                ExtendedKeyUsagePurpose::ClientAuth,
                ExtendedKeyUsagePurpose::ServerAuth,
            ],
            Self::Activator => &[ExtendedKeyUsagePurpose::ClientAuth],
        }
    }

    /// The DNS names and addresses its certificate serves when keda-rs runs in `namespace`:
    /// the names of its Service (`keda-operator`, `keda-metrics-apiserver`) and the loopback
    /// names for local runs. An activator serves nothing over this CA.
    pub fn hosts(self, namespace: &str) -> Vec<String> {
        let service = match self {
            Self::Operator => "keda-operator",
            Self::MetricsApiserver => "keda-metrics-apiserver",
            Self::Activator => return Vec::new(),
        };
        vec![
            service.to_string(),
            format!("{service}.{namespace}"),
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
            "localhost".to_string(),
            "127.0.0.1".to_string(),
        ]
    }

    /// The identity a certificate's subject common name claims, if it is one of keda-rs'.
    /// Meaningful only for a certificate already verified against keda-rs' CA.
    pub fn of_certificate(der: &CertificateDer<'_>) -> Option<Self> {
        let name = common_name(der)?;
        Self::ALL.into_iter().find(|id| id.common_name() == name)
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.common_name())
    }
}

/// The subject common name of a DER certificate.
pub fn common_name(der: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    subject_common_name(&cert)
}

fn subject_common_name(cert: &x509_parser::certificate::X509Certificate<'_>) -> Option<String> {
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_string)
}

/// What keda-rs needs to know about a certificate it may have to renew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateFacts {
    /// The subject common name.
    pub common_name: Option<String>,
    /// The end of its validity, seconds since the Unix epoch.
    pub not_after: i64,
    /// Its DNS names and IP addresses (as text), sorted.
    pub hosts: Vec<String>,
}

impl CertificateFacts {
    /// The facts of a DER certificate; `None` when it does not parse.
    pub fn of(der: &CertificateDer<'_>) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
        let common_name = subject_common_name(&cert);
        let mut hosts = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => {
                        hosts.push((*dns).to_string());
                    }
                    x509_parser::extensions::GeneralName::IPAddress(bytes) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                            hosts.push(std::net::Ipv4Addr::from(v4).to_string());
                        } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                            hosts.push(std::net::Ipv6Addr::from(v6).to_string());
                        }
                    }
                    _ => {}
                }
            }
        }
        hosts.sort();
        Some(Self {
            common_name,
            not_after: cert.validity().not_after.timestamp(),
            hosts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::CertificateAuthority;
    use rustls_pki_types::pem::PemObject;

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM")
    }

    #[test]
    fn each_identity_is_recognised_by_its_common_name_and_nothing_else_is() {
        let ca = CertificateAuthority::new("ca").expect("CA");
        for identity in Identity::ALL {
            let pair = ca
                .issue(
                    identity.common_name(),
                    &[],
                    identity.usages(),
                    jiff::Timestamp::now(),
                )
                .expect("certificate");
            assert_eq!(Identity::of_certificate(&der(&pair.cert)), Some(identity));
        }
        let other = ca.issue_client("front-proxy-client").expect("certificate");
        assert_eq!(Identity::of_certificate(&der(&other.cert)), None);
    }

    #[test]
    fn facts_name_the_hosts_and_the_end_of_validity() {
        let ca = CertificateAuthority::new("ca").expect("CA");
        let now: jiff::Timestamp = "2030-06-15T12:00:00Z".parse().expect("timestamp");
        let pair = ca
            .issue(
                "keda-operator",
                &["keda-operator.keda.svc", "127.0.0.1"],
                &[ExtendedKeyUsagePurpose::ServerAuth],
                now,
            )
            .expect("certificate");
        let facts = CertificateFacts::of(&der(&pair.cert)).expect("parses");
        assert_eq!(facts.common_name.as_deref(), Some("keda-operator"));
        assert_eq!(facts.hosts, vec!["127.0.0.1", "keda-operator.keda.svc"]);
        let until: jiff::Timestamp = "2031-06-15T00:00:00Z".parse().expect("timestamp");
        assert_eq!(facts.not_after, until.as_second());
    }
}
