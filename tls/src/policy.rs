//! The TLS versions and cipher suites an administrator allows: KEDA's `KEDA_HTTP_MIN_TLS_VERSION`,
//! `KEDA_HTTP_TLS_CIPHER_LIST` (scalers' outgoing connections), `KEDA_SERVICE_MIN_TLS_VERSION`,
//! `KEDA_SERVICE_TLS_CIPHER_LIST` (what keda-rs serves), and the Kubernetes flags
//! `--tls-min-version`, `--tls-cipher-suites`, as a rustls provider and version list.
//!
//! The mapping onto rustls, which speaks only TLS 1.2 and 1.3 and only AEAD suites with
//! forward secrecy:
//! - minimum `TLS10`/`TLS11` (`VersionTLS10`/`VersionTLS11`) mean TLS 1.2: nothing older is
//!   ever spoken; `TLS12` the same; `TLS13` allows TLS 1.3 only;
//! - cipher suites take Go's names (`crypto/tls.CipherSuites()`), separated by `,` or `:`. As in
//!   Go they restrict TLS 1.2 only: TLS 1.3's suites are always on (Go's TLS 1.3 names are
//!   accepted and change nothing). Go's CBC, RC4, 3DES and static-RSA suites, which rustls
//!   does not have, are refused by name; so is any unknown name.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// Go's names of the suites rustls does not implement (CBC, RC4, 3DES, static RSA key
/// exchange).
const GO_ONLY_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Why a minimum version or a cipher list is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "{what}={value:?} is not a TLS version: use TLS12 or TLS13 (TLS10 and TLS11 mean TLS12)"
    )]
    Version { what: String, value: String },
    #[error(
        "{what}: cipher suite {name} is not supported by keda-rs (rustls has no CBC, RC4, 3DES or static-RSA suites); use ECDHE suites with AES-GCM or ChaCha20-Poly1305"
    )]
    Unsupported { what: String, name: String },
    #[error(
        "{what}: {name:?} is not a cipher suite name (use Go's names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)"
    )]
    Unknown { what: String, name: String },
}

/// Allowed TLS versions and TLS 1.2 cipher suites.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsPolicy {
    /// TLS 1.3 only.
    pub tls13_only: bool,
    /// The allowed TLS 1.2 suites by rustls name; `None`: rustls' defaults.
    pub tls12_suites: Option<Vec<String>>,
}

impl TlsPolicy {
    /// A policy from a minimum version (KEDA's `TLS12` or Go's `VersionTLS12`) and a cipher
    /// list; empty or absent values keep the defaults. `what` names the variable or flag in
    /// errors.
    ///
    /// # Errors
    /// An unknown version, or a cipher name rustls does not have or nobody has.
    pub fn parse(
        what_version: &str,
        min_version: Option<&str>,
        what_ciphers: &str,
        ciphers: Option<&str>,
    ) -> Result<Self, PolicyError> {
        let tls13_only = match min_version.map(str::trim).filter(|v| !v.is_empty()) {
            None => false,
            Some(v) => match v.trim_start_matches("Version") {
                "TLS10" | "TLS11" | "TLS12" => false,
                "TLS13" => true,
                _ => {
                    return Err(PolicyError::Version {
                        what: what_version.to_string(),
                        value: v.to_string(),
                    });
                }
            },
        };
        let tls12_suites = match ciphers.map(str::trim).filter(|v| !v.is_empty()) {
            None => None,
            Some(list) => {
                let mut suites = Vec::new();
                for name in list
                    .split([',', ':'])
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                {
                    suites.extend(rustls_name(what_ciphers, name)?);
                }
                Some(suites)
            }
        };
        Ok(Self {
            tls13_only,
            tls12_suites,
        })
    }

    /// The ring provider with only the allowed suites.
    pub fn provider(&self) -> Arc<CryptoProvider> {
        let mut provider = rustls::crypto::ring::default_provider();
        if let Some(allowed) = &self.tls12_suites {
            provider.cipher_suites.retain(|suite| match suite {
                SupportedCipherSuite::Tls13(_) => true,
                SupportedCipherSuite::Tls12(_) => allowed.contains(&format!("{:?}", suite.suite())),
            });
        }
        Arc::new(provider)
    }

    /// The protocol versions to offer or accept.
    pub fn versions(&self) -> &'static [&'static SupportedProtocolVersion] {
        static TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
        if self.tls13_only {
            TLS13
        } else {
            rustls::DEFAULT_VERSIONS
        }
    }
}

/// KEDA's `KEDA_SERVICE_MIN_TLS_VERSION` and `KEDA_SERVICE_TLS_CIPHER_LIST`, falling back to
/// `KEDA_HTTP_MIN_TLS_VERSION` and `KEDA_HTTP_TLS_CIPHER_LIST` when unset, as KEDA's
/// `pkg/util/tls_config.go` does: what keda-rs serves (the webhook, the operator's metric
/// service). A service variable set to the empty string counts as set, as in KEDA: an empty
/// minimum version is TLS 1.3 (KEDA's default for services), an empty list Go's (here rustls')
/// default suites.
///
/// # Errors
/// A version or cipher suite rustls cannot do, naming the variable.
pub fn service_policy_from(var: &dyn Fn(&str) -> Option<String>) -> Result<TlsPolicy, PolicyError> {
    let pick = |service: &'static str, http: &'static str| match var(service) {
        Some(value) => (service, Some(value)),
        None => (http, var(http)),
    };
    // Set but empty is not unset: KEDA parses it with TLS 1.3 as the default.
    let (version_name, version) = match var("KEDA_SERVICE_MIN_TLS_VERSION") {
        Some(value) if value.trim().is_empty() => {
            ("KEDA_SERVICE_MIN_TLS_VERSION", Some("TLS13".to_string()))
        }
        _ => pick("KEDA_SERVICE_MIN_TLS_VERSION", "KEDA_HTTP_MIN_TLS_VERSION"),
    };
    let (list_name, list) = pick("KEDA_SERVICE_TLS_CIPHER_LIST", "KEDA_HTTP_TLS_CIPHER_LIST");
    TlsPolicy::parse(version_name, version.as_deref(), list_name, list.as_deref())
}

static SERVICE_POLICY: std::sync::OnceLock<TlsPolicy> = std::sync::OnceLock::new();

/// Sets the process-wide policy of [`crate::mutual_tls_server_config`]; only the first call
/// counts (returns whether it did).
pub fn install_service_policy(policy: TlsPolicy) -> bool {
    SERVICE_POLICY.set(policy).is_ok()
}

/// The process-wide service policy, or the defaults.
pub fn service_policy() -> TlsPolicy {
    SERVICE_POLICY.get().cloned().unwrap_or_default()
}

/// Go's name of a suite as rustls names it (`None` for a TLS 1.3 suite, always on).
fn rustls_name(what: &str, go: &str) -> Result<Option<String>, PolicyError> {
    if matches!(
        go,
        "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256"
    ) {
        return Ok(None);
    }
    if GO_ONLY_SUITES.contains(&go) {
        return Err(PolicyError::Unsupported {
            what: what.to_string(),
            name: go.to_string(),
        });
    }
    // Go's short aliases of the ChaCha20 suites.
    let canonical = match go {
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        other => other,
    };
    let known = rustls::crypto::ring::default_provider()
        .cipher_suites
        .iter()
        .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
        .any(|s| format!("{:?}", s.suite()) == canonical);
    if known {
        Ok(Some(canonical.to_string()))
    } else {
        Err(PolicyError::Unknown {
            what: what.to_string(),
            name: go.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(min: &str, ciphers: &str) -> Result<TlsPolicy, PolicyError> {
        TlsPolicy::parse("MIN", Some(min), "LIST", Some(ciphers))
    }

    #[test]
    fn versions_map_onto_what_rustls_speaks() {
        assert!(!parse("TLS10", "").unwrap_or_default().tls13_only);
        assert!(!parse("VersionTLS12", "").unwrap_or_default().tls13_only);
        assert!(parse("TLS13", "").unwrap_or_default().tls13_only);
        assert!(matches!(
            parse("SSL3", ""),
            Err(PolicyError::Version { .. })
        ));
        assert_eq!(
            TlsPolicy::parse("MIN", None, "LIST", None),
            Ok(TlsPolicy::default())
        );
    }

    #[test]
    fn cipher_lists_keep_the_named_tls12_suites_and_every_tls13_suite() {
        let policy = parse(
            "",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        )
        .unwrap_or_default();
        let names: Vec<String> = policy
            .provider()
            .cipher_suites
            .iter()
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        assert!(names.contains(&"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_string()));
        assert!(names.contains(&"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256".to_string()));
        assert!(!names.contains(&"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".to_string()));
        assert_eq!(names.iter().filter(|n| n.starts_with("TLS13_")).count(), 3);
    }

    #[test]
    fn cbc_and_unknown_suites_are_refused_by_name() {
        assert_eq!(
            parse("", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA").err().map(|e| e.to_string()),
            Some("LIST: cipher suite TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA is not supported by keda-rs (rustls has no CBC, RC4, 3DES or static-RSA suites); use ECDHE suites with AES-GCM or ChaCha20-Poly1305".to_string())
        );
        assert!(matches!(
            parse("", "TLS_FANCY"),
            Err(PolicyError::Unknown { .. })
        ));
    }

    #[test]
    fn a_service_variable_set_empty_is_set_as_in_keda() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        // Unset: the KEDA_HTTP_* values (TLS 1.2 by default).
        let unset = service_policy_from(&env(&[])).expect("a policy");
        assert!(!unset.tls13_only);
        // Set but empty: KEDA's service default, TLS 1.3, whatever KEDA_HTTP_* say.
        let empty = service_policy_from(&env(&[
            ("KEDA_SERVICE_MIN_TLS_VERSION", ""),
            ("KEDA_HTTP_MIN_TLS_VERSION", "TLS12"),
        ]))
        .expect("a policy");
        assert!(empty.tls13_only);
        // An empty service cipher list is the default suites, not KEDA_HTTP_TLS_CIPHER_LIST.
        let list = service_policy_from(&env(&[
            ("KEDA_SERVICE_TLS_CIPHER_LIST", ""),
            (
                "KEDA_HTTP_TLS_CIPHER_LIST",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            ),
        ]))
        .expect("a policy");
        assert_eq!(list.tls12_suites, None);
    }
}
