//! The metrics-apiserver's authentication of requests (`keda_metrics_apiserver::authn`): the
//! request-header settings as the kube-apiserver publishes them
//! (`RequestHeaderConfig::from_configmap`), then `Authenticator::authenticate` of a client
//! certificate chain and request headers, all chosen by the input.
//!
//! Input: one byte choosing the client certificate (none, the front proxy's, one of the same CA
//! with another common name, a self-signed one with the front proxy's name, or the input's own
//! DER bytes) and whether `requestheader-allowed-names` is written; then lines: `cm.<key>=<value>`
//! sets a ConfigMap key (the CA is the front-proxy CA unless given), `der=<hex>` is the
//! certificate's DER for the last choice, anything else is a header `<name>: <value>`.
//!
//! Checks beyond "no panic": only the CA's certificates authenticate, and with allowed names
//! only the allowed name; the user is the first non-empty value of the first username header
//! that has one; every group comes from a group header.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use keda_metrics_apiserver::authn::{Authenticator, AuthnError, RequestHeaderConfig};
use keda_tls::pki::CertificateAuthority;
use libfuzzer_sys::fuzz_target;
use rustls_pki_types::CertificateDer;

const FRONT_PROXY_CN: &str = "front-proxy-client";

struct Pki {
    ca_pem: String,
    front_proxy: CertificateDer<'static>,
    other_name: CertificateDer<'static>,
    self_signed: CertificateDer<'static>,
}

fn der(pem: &str) -> CertificateDer<'static> {
    keda_tls::certificates(pem.as_bytes(), "a test certificate")
        .expect("a certificate")
        .remove(0)
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let ca = CertificateAuthority::new("front-proxy-ca").expect("a CA");
        let impostor = CertificateAuthority::new(FRONT_PROXY_CN).expect("a CA");
        Pki {
            ca_pem: ca.cert_pem(),
            front_proxy: der(&ca.issue_client(FRONT_PROXY_CN).expect("a client").cert),
            other_name: der(&ca.issue_client("someone-else").expect("a client").cert),
            self_signed: der(&impostor.cert_pem()),
        }
    })
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .bytes()
        .filter_map(|b| (b as char).to_digit(16).map(|d| d as u8))
        .collect();
    digits
        .chunks(2)
        .map(|p| p[0] << 4 | p.get(1).copied().unwrap_or(0))
        .collect()
}

/// The list at the start of `value`, as the server reads it (what follows is not read).
fn first_list(value: &str) -> Option<Vec<String>> {
    serde_json::Deserializer::from_str(value)
        .into_iter::<Vec<String>>()
        .next()?
        .ok()
}

fn list(data: &BTreeMap<String, String>, key: &str, default: &str) -> Vec<String> {
    let parsed: Vec<String> = data
        .get(key)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .and_then(first_list)
        .unwrap_or_default();
    let parsed: Vec<String> = parsed
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect();
    if parsed.is_empty() {
        vec![default.to_string()]
    } else {
        parsed
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let pki = pki();
    let text = String::from_utf8_lossy(rest);
    let mut configmap = BTreeMap::new();
    configmap.insert(
        "requestheader-client-ca-file".to_string(),
        pki.ca_pem.clone(),
    );
    if choice & 0x80 != 0 {
        configmap.insert(
            "requestheader-allowed-names".to_string(),
            format!("[\"{FRONT_PROXY_CN}\"]"),
        );
    }
    let mut headers = HeaderMap::new();
    let mut own_der = Vec::new();
    for line in text.split('\n') {
        if let Some(entry) = line.strip_prefix("cm.") {
            let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
            configmap.insert(key.to_string(), value.to_string());
        } else if let Some(bytes) = line.strip_prefix("der=") {
            own_der = hex(bytes);
        } else if let Some((name, value)) = line.split_once(':') {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.trim().as_bytes()),
                HeaderValue::from_str(value.trim_start()),
            ) {
                headers.append(name, value);
            }
        }
    }
    let _ = keda_tls::common_name(&CertificateDer::from(own_der.as_slice()));
    let config = match RequestHeaderConfig::from_configmap(&configmap) {
        Ok(config) => config,
        Err(error) => {
            assert!(!error.to_string().is_empty());
            return;
        }
    };
    let own_ca = configmap.get("requestheader-client-ca-file") == Some(&pki.ca_pem);
    let allowed: Vec<String> = configmap
        .get("requestheader-allowed-names")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .and_then(first_list)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    let usernames = list(
        &configmap,
        "requestheader-username-headers",
        "X-Remote-User",
    );
    let groups = list(&configmap, "requestheader-group-headers", "X-Remote-Group");
    let authenticator = Authenticator::with(config);
    let chain: Option<Vec<CertificateDer<'static>>> = match choice % 5 {
        0 => None,
        1 => Some(vec![pki.front_proxy.clone()]),
        2 => Some(vec![pki.other_name.clone()]),
        3 => Some(vec![pki.self_signed.clone()]),
        _ => Some(vec![CertificateDer::from(own_der.clone())]),
    };
    // Twice: the second time from the cache of verified certificates.
    for _ in 0..2 {
        let result = authenticator.authenticate(chain.as_deref(), &headers);
        let user = match result {
            Ok(user) => user,
            Err(error) => {
                assert!(!error.to_string().is_empty());
                if own_ca
                    && choice % 5 == 1
                    && (allowed.is_empty() || allowed.iter().any(|a| a == FRONT_PROXY_CN))
                {
                    assert!(
                        matches!(error, AuthnError::NoUser(_)),
                        "the front proxy's certificate was refused: {error}"
                    );
                }
                continue;
            }
        };
        let name_ok = match choice % 5 {
            1 => allowed.is_empty() || allowed.iter().any(|a| a == FRONT_PROXY_CN),
            2 => allowed.is_empty() || allowed.iter().any(|a| a == "someone-else"),
            _ => false,
        };
        assert!(
            own_ca && name_ok,
            "certificate choice {} authenticated as {user:?} (allowed names {allowed:?})",
            choice % 5
        );
        let expected = usernames.iter().find_map(|h| {
            headers
                .get_all(h.as_str())
                .filter_map(|v| v.to_str().ok())
                .find(|v| !v.is_empty())
        });
        assert_eq!(
            Some(user.name.as_str()),
            expected,
            "the user of {headers:?}"
        );
        for group in &user.groups {
            assert!(
                groups.iter().any(|h| headers
                    .get_all(h.as_str())
                    .any(|v| v.to_str().ok() == Some(group.as_str()))),
                "group {group:?} is in no group header of {headers:?}"
            );
        }
    }
});
