//! Authentication as Kubernetes' aggregated API servers do it: the kube-apiserver's front proxy
//! presents a client certificate signed by the request-header CA with an allowed common name,
//! and names the user in `X-Remote-User`, `X-Remote-Group` and `X-Remote-Extra-*` headers.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix_web::http::header::HeaderMap;
use arc_swap::ArcSwapOption;
use keda_tls::{TlsError, client_verifier};
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::{CertificateDer, UnixTime};
use serde::Deserialize;

/// The ConfigMap in which the kube-apiserver publishes its request-header settings.
pub const AUTHENTICATION_CONFIGMAP: (&str, &str) =
    ("kube-system", "extension-apiserver-authentication");

/// Kubernetes' default header of the user name.
pub const DEFAULT_USERNAME_HEADER: &str = "X-Remote-User";
/// Kubernetes' default header of the groups.
pub const DEFAULT_GROUP_HEADER: &str = "X-Remote-Group";
/// Kubernetes' default prefix of the extra attributes.
pub const DEFAULT_EXTRA_HEADERS_PREFIX: &str = "X-Remote-Extra-";

/// Why request-header settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RequestHeaderConfigError {
    /// The CA bundle is unusable.
    #[error(transparent)]
    Ca(#[from] TlsError),
    /// A ConfigMap value is not the JSON list of strings the kube-apiserver writes.
    #[error(
        "ConfigMap kube-system/extension-apiserver-authentication: key {key} is not a JSON list of strings: {reason}"
    )]
    ConfigMapList {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The ConfigMap has no request-header CA.
    #[error(
        "ConfigMap kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: \
         the kube-apiserver is not configured with --requestheader-client-ca-file, or pass \
         --requestheader-client-ca-file to the metrics-apiserver"
    )]
    NoCaInConfigMap,
}

/// The request-header settings in force.
pub struct RequestHeaderConfig {
    verifier: Arc<dyn ClientCertVerifier>,
    /// Client certificates that passed the chain and name checks under these settings, and
    /// when: the front proxy presents the same certificate on every request, and verifying its
    /// signature each time is most of the cost of a request. Replacing the settings (a new CA)
    /// starts with an empty set.
    verified: std::sync::Mutex<std::collections::HashMap<Vec<u8>, std::time::Instant>>,
    allowed_names: Vec<String>,
    username_headers: Vec<String>,
    group_headers: Vec<String>,
    extra_headers_prefixes: Vec<String>,
}

impl std::fmt::Debug for RequestHeaderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHeaderConfig")
            .field("allowed_names", &self.allowed_names)
            .field("username_headers", &self.username_headers)
            .field("group_headers", &self.group_headers)
            .field("extra_headers_prefixes", &self.extra_headers_prefixes)
            .finish_non_exhaustive()
    }
}

impl RequestHeaderConfig {
    /// Settings from a PEM CA bundle and the header names (the `--requestheader-*` flags).
    /// Empty header lists fall back to Kubernetes' defaults; an empty `allowed_names` accepts
    /// any common name signed by the CA.
    ///
    /// # Errors
    /// [`RequestHeaderConfigError`] naming `what` when the CA bundle is unusable.
    pub fn new(
        ca_pem: &[u8],
        what: &str,
        allowed_names: Vec<String>,
        username_headers: Vec<String>,
        group_headers: Vec<String>,
        extra_headers_prefixes: Vec<String>,
    ) -> Result<Self, RequestHeaderConfigError> {
        let verifier = client_verifier(ca_pem, what)?;
        let or_default = |list: Vec<String>, default: &str| {
            let list: Vec<String> = list.into_iter().filter(|s| !s.trim().is_empty()).collect();
            if list.is_empty() {
                vec![default.to_string()]
            } else {
                list
            }
        };
        Ok(Self {
            verifier,
            verified: std::sync::Mutex::default(),
            allowed_names: allowed_names
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect(),
            username_headers: or_default(username_headers, DEFAULT_USERNAME_HEADER),
            group_headers: or_default(group_headers, DEFAULT_GROUP_HEADER),
            extra_headers_prefixes: or_default(
                extra_headers_prefixes,
                DEFAULT_EXTRA_HEADERS_PREFIX,
            ),
        })
    }

    /// Settings from the data of `kube-system/extension-apiserver-authentication`, as the
    /// kube-apiserver writes them (the lists are JSON arrays).
    ///
    /// # Errors
    /// [`RequestHeaderConfigError`] naming the key that is missing or malformed.
    pub fn from_configmap(
        data: &BTreeMap<String, String>,
    ) -> Result<Self, RequestHeaderConfigError> {
        let ca = data
            .get("requestheader-client-ca-file")
            .filter(|ca| !ca.trim().is_empty())
            .ok_or(RequestHeaderConfigError::NoCaInConfigMap)?;
        let list = |key: &str| -> Result<Vec<String>, RequestHeaderConfigError> {
            match data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                None => Ok(Vec::new()),
                Some(value) => {
                    Vec::<String>::deserialize(&mut serde_json::Deserializer::from_str(value))
                        .map_err(|e| RequestHeaderConfigError::ConfigMapList {
                            key: key.to_string(),
                            reason: e.to_string(),
                        })
                }
            }
        };
        Self::new(
            ca.as_bytes(),
            "ConfigMap kube-system/extension-apiserver-authentication key requestheader-client-ca-file",
            list("requestheader-allowed-names")?,
            list("requestheader-username-headers")?,
            list("requestheader-group-headers")?,
            list("requestheader-extra-headers-prefix")?,
        )
    }
}

/// How long a verified client certificate is trusted without verifying it again.
const VERIFIED_TTL: std::time::Duration = std::time::Duration::from_secs(60);
/// The most verified certificates remembered (the front proxy has one or two).
const VERIFIED_MAX: usize = 64;

impl RequestHeaderConfig {
    fn recently_verified(&self, cert: &CertificateDer<'_>) -> bool {
        let verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        verified
            .get(cert.as_ref())
            .is_some_and(|at| at.elapsed() < VERIFIED_TTL)
    }

    fn remember_verified(&self, cert: &CertificateDer<'_>) {
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if verified.len() >= VERIFIED_MAX {
            verified.clear();
        }
        verified.insert(cert.as_ref().to_vec(), std::time::Instant::now());
    }
}

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The groups, in header order.
    pub groups: Vec<String>,
    /// Extra attributes (keys lower-cased and unescaped).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Why a request is not authenticated; each becomes a 401.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthnError {
    /// No client certificate was presented.
    #[error(
        "no client certificate was presented; requests must come through the kube-apiserver aggregator"
    )]
    NoClientCertificate,
    /// No request-header CA is known yet.
    #[error(
        "the request-header CA is not loaded yet (from --requestheader-client-ca-file or ConfigMap kube-system/extension-apiserver-authentication)"
    )]
    NotConfigured,
    /// The certificate does not chain to the request-header CA.
    #[error("the client certificate is not signed by the request-header CA: {0}")]
    UntrustedCertificate(String),
    /// The certificate's common name is not allowed.
    #[error(
        "the client certificate's common name {common_name:?} is not one of the allowed names {allowed:?} (--requestheader-allowed-names)"
    )]
    NameNotAllowed {
        /// The certificate's CN.
        common_name: String,
        /// The allowed names.
        allowed: Vec<String>,
    },
    /// No user header.
    #[error("the front proxy sent no user in {0:?}")]
    NoUser(Vec<String>),
}

/// Authenticates requests against the request-header settings in force, which can be
/// replaced at any time (a reloaded CA file, a changed ConfigMap).
#[derive(Debug)]
pub struct Authenticator {
    config: ArcSwapOption<RequestHeaderConfig>,
    generation: tokio::sync::watch::Sender<u64>,
}

impl Default for Authenticator {
    fn default() -> Self {
        Self {
            config: ArcSwapOption::empty(),
            generation: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Authenticator {
    /// An authenticator with no settings yet: every request is unauthenticated until
    /// [`Authenticator::set`] is called.
    pub fn new() -> Self {
        Self::default()
    }

    /// An authenticator with `config` in force.
    pub fn with(config: RequestHeaderConfig) -> Self {
        let this = Self::new();
        this.set(config);
        this
    }

    /// Puts `config` in force for the next requests.
    pub fn set(&self, config: RequestHeaderConfig) {
        self.config.store(Some(Arc::new(config)));
        self.generation.send_modify(|g| *g += 1);
    }

    /// Counts the settings put in force so far; changes each time [`Authenticator::set`] is
    /// called.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Whether settings are in force.
    pub fn is_configured(&self) -> bool {
        self.config.load().is_some()
    }

    /// The caller of a request with the client certificate chain `peer` (end entity first) and
    /// `headers`.
    ///
    /// # Errors
    /// [`AuthnError`] saying why the caller is not the front proxy.
    pub fn authenticate(
        &self,
        peer: Option<&[CertificateDer<'static>]>,
        headers: &HeaderMap,
    ) -> Result<UserInfo, AuthnError> {
        let (end_entity, intermediates) = peer
            .and_then(|chain| chain.split_first())
            .ok_or(AuthnError::NoClientCertificate)?;
        let config = self.config.load_full().ok_or(AuthnError::NotConfigured)?;
        if !config.recently_verified(end_entity) {
            config
                .verifier
                .verify_client_cert(end_entity, intermediates, UnixTime::now())
                .map_err(|e| AuthnError::UntrustedCertificate(e.to_string()))?;
            if !config.allowed_names.is_empty() {
                let common_name = keda_tls::common_name(end_entity).unwrap_or_default();
                if !config.allowed_names.contains(&common_name) {
                    return Err(AuthnError::NameNotAllowed {
                        common_name,
                        allowed: config.allowed_names.clone(),
                    });
                }
            }
            config.remember_verified(end_entity);
        }
        let name = config
            .username_headers
            .iter()
            .find_map(|h| {
                headers
                    .get_all(h.as_str())
                    .filter_map(|v| v.to_str().ok())
                    .find(|v| !v.is_empty())
            })
            .ok_or_else(|| AuthnError::NoUser(config.username_headers.clone()))?
            .to_string();
        let groups = config
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let header = header.as_str();
            for prefix in &config.extra_headers_prefixes {
                if header.len() > prefix.len()
                    && header.is_char_boundary(prefix.len())
                    && header[..prefix.len()].eq_ignore_ascii_case(prefix)
                    && let Ok(value) = value.to_str()
                {
                    let key = unescape(&header[prefix.len()..]).to_lowercase();
                    extra.entry(key).or_default().push(value.to_string());
                }
            }
        }
        Ok(UserInfo {
            name,
            groups,
            extra,
        })
    }
}

/// Percent-decoding of extra header keys (Kubernetes escapes keys that are not header-safe).
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match decoded {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Follows ConfigMap `kube-system/extension-apiserver-authentication` and puts its settings in
/// force on `authenticator` each time it changes, until `cancel`. A malformed version is logged
/// and the previous settings stay in force. Needs the `extension-apiserver-authentication-reader`
/// Role in kube-system.
pub async fn follow_authentication_configmap(
    client: kube::Client,
    authenticator: Arc<Authenticator>,
    cancel: tokio_util::sync::CancellationToken,
) {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{WatchStreamExt, watcher};

    let (namespace, name) = AUTHENTICATION_CONFIGMAP;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher(api, config).default_backoff().applied_objects();
    futures::pin_mut!(stream);
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return,
            next = stream.next() => next,
        };
        match next {
            None => return,
            Some(Ok(configmap)) => {
                let data = configmap.data.unwrap_or_default();
                match RequestHeaderConfig::from_configmap(&data) {
                    Ok(config) => {
                        tracing::info!(
                            ?config,
                            "request-header settings loaded from {namespace}/{name}"
                        );
                        authenticator.set(config);
                    }
                    Err(error) => {
                        tracing::warn!(%error, "ignoring this version of {namespace}/{name}")
                    }
                }
            }
            Some(Err(error)) => {
                tracing::warn!(%error, "watching {namespace}/{name} failed; retrying");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_keys_are_unescaped() {
        assert_eq!(unescape("scopes"), "scopes");
        assert_eq!(unescape("example.com%2Fteam"), "example.com/team");
        assert_eq!(unescape("bad%zz"), "bad%zz");
    }

    #[test]
    fn configmap_lists_must_be_json_arrays() {
        let data = BTreeMap::from([
            ("requestheader-client-ca-file".to_string(), "x".to_string()),
            (
                "requestheader-allowed-names".to_string(),
                "front-proxy-client".to_string(),
            ),
        ]);
        let error = RequestHeaderConfig::from_configmap(&data).expect_err("not JSON");
        assert!(
            error.to_string().contains("requestheader-allowed-names"),
            "{error}"
        );
    }

    #[test]
    fn a_configmap_without_a_ca_says_which_key_is_missing() {
        let error = RequestHeaderConfig::from_configmap(&BTreeMap::new()).expect_err("no CA");
        assert!(matches!(error, RequestHeaderConfigError::NoCaInConfigMap));
    }
}
