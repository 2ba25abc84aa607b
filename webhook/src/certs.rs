//! The serving certificate when no files are given: Secret `keda-rs-webhook-certs`, and the
//! `caBundle` of the ValidatingWebhookConfiguration that points at us.
//!
//! The API server verifies a webhook's certificate against the `caBundle` of its
//! configuration (there is no "skip verification" as for an APIService), so whoever issues the
//! certificate must also write that bundle. The webhook does both for itself, as KEDA's
//! certificate rotation does for `keda-admission-webhooks`: its own CA (`keda-rs-webhook-ca`,
//! not the CA of the operator's mutual TLS, whose key the webhook has no reason to read), one
//! serving certificate for the Service's names, both in the Secret; at start and every
//! `--cert-reload-interval` it
//! 1. reads the Secret, and issues a new CA and certificate when it is missing, unusable, names
//!    other hosts or ends within [`RENEW_BEFORE_DAYS`] (the bundle keeps the previous CA until
//!    it expires, so a certificate of either CA verifies while replicas switch);
//! 2. serves the Secret's certificate from the next handshake on;
//! 3. sets `caBundle` of every webhook of the configuration to the Secret's `ca.crt` when it
//!    differs.
//!
//! Replicas racing to create or renew the Secret do not fight: the loser's write conflicts
//! (409) and it uses what the winner wrote.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use keda_tls::pki::{CertificateAuthority, PkiError};
use keda_tls::secrets::{CA_CERT, SECRET_TYPE, TLS_CERT, TLS_KEY, TlsSecret};
use keda_tls::{CertStore, CertificateFacts, TlsError};
use kube::Api;
use kube::api::PostParams;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The Secret holding the webhook's CA bundle, certificate and key.
pub const SECRET_NAME: &str = "keda-rs-webhook-certs";
/// The Service the API server calls, and the certificate's common name.
pub const SERVICE_NAME: &str = "keda-admission-webhooks";
/// The common name of the webhook's CA.
pub const CA_NAME: &str = "keda-rs-webhook-ca";
/// A certificate is reissued when less than this remains of it.
pub const RENEW_BEFORE_DAYS: i64 = 90;

const SECONDS_PER_DAY: i64 = 24 * 60 * 60;

/// Why the certificate of the Secret cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// The API refused or failed.
    #[error("cannot {verb} {what}: {source}")]
    Api {
        /// `get`, `create`, `update`, `replace`.
        verb: &'static str,
        /// The object.
        what: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// Issuing failed.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// The material does not load.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Three writes in a row lost a race with other writers.
    #[error("cannot write {what}: other writers keep changing it")]
    Contended {
        /// The Secret.
        what: String,
    },
}

impl CertError {
    /// Whether the API server refused for lack of permission.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Api { source, .. } if matches!(source.as_ref(), kube::Error::Api(s) if s.code == 403))
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Self::Api { source, .. } if matches!(source.as_ref(), kube::Error::Api(s) if s.code == 409))
    }
}

/// The names the serving certificate carries in `namespace`.
pub fn hosts(namespace: &str) -> Vec<String> {
    vec![
        SERVICE_NAME.to_string(),
        format!("{SERVICE_NAME}.{namespace}"),
        format!("{SERVICE_NAME}.{namespace}.svc"),
        format!("{SERVICE_NAME}.{namespace}.svc.cluster.local"),
    ]
}

fn first_cert_facts(pem: &[u8]) -> Option<CertificateFacts> {
    CertificateDer::pem_slice_iter(pem)
        .next()
        .and_then(Result::ok)
        .and_then(|der| CertificateFacts::of(&der))
}

/// Why `existing` must be (re)issued at `now` (unix seconds), or `None` when it is current.
pub fn renewal_reason(existing: Option<&Secret>, namespace: &str, now: i64) -> Option<String> {
    let Some(secret) = existing else {
        return Some("it does not exist".to_string());
    };
    let material = match TlsSecret::from_secret(secret) {
        Ok(material) => material,
        Err(e) => return Some(e.to_string()),
    };
    if let Err(e) = material.certified_key() {
        return Some(e.to_string());
    }
    let Some(facts) = first_cert_facts(&material.cert) else {
        return Some(format!("its {TLS_CERT} does not parse"));
    };
    let mut wanted = hosts(namespace);
    wanted.sort();
    if facts.hosts != wanted {
        return Some(format!("its certificate names {:?}", facts.hosts));
    }
    if facts.not_after - now < RENEW_BEFORE_DAYS * SECONDS_PER_DAY {
        return Some(format!(
            "its certificate ends within {RENEW_BEFORE_DAYS} days"
        ));
    }
    None
}

/// A new CA and serving certificate in the Secret `base` (or a new one), whose bundle keeps the
/// previous CA while it is valid at `now`.
///
/// # Errors
/// [`PkiError`] when generating fails.
pub fn issue(
    base: Option<&Secret>,
    namespace: &str,
    now: jiff::Timestamp,
) -> Result<Secret, PkiError> {
    let ca = CertificateAuthority::new_at(CA_NAME, now)?;
    let hosts = hosts(namespace);
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let pair = ca.issue(
        SERVICE_NAME,
        &hosts,
        &[rcgen::ExtendedKeyUsagePurpose::ServerAuth],
        now,
    )?;
    let mut bundle = ca.cert_pem();
    if let Some(previous) = base
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(CA_CERT))
        .and_then(|b| first_cert_facts(&b.0).map(|f| (f, b.0.clone())))
        .filter(|(facts, _)| facts.not_after > now.as_second())
        .and_then(|(_, pem)| String::from_utf8(pem).ok())
    {
        // Only the newest previous CA: older ones were kept for the previous switch only.
        let previous_first = previous
            .split_inclusive("-----END CERTIFICATE-----")
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        bundle.push_str(&previous_first);
        bundle.push('\n');
    }
    let mut secret = base.cloned().unwrap_or_else(|| Secret {
        metadata: ObjectMeta {
            name: Some(SECRET_NAME.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                (
                    "app.kubernetes.io/part-of".to_string(),
                    "keda-rs".to_string(),
                ),
                (
                    "app.kubernetes.io/component".to_string(),
                    SERVICE_NAME.to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some(SECRET_TYPE.to_string()),
        ..Secret::default()
    });
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    data.insert(CA_CERT.to_string(), ByteString(bundle.into_bytes()));
    data.insert(TLS_CERT.to_string(), ByteString(pair.cert.into_bytes()));
    data.insert(TLS_KEY.to_string(), ByteString(pair.key.into_bytes()));
    secret.string_data = None;
    Ok(secret)
}

/// Keeps the Secret, the served certificate and the configuration's `caBundle` current.
#[derive(Clone)]
pub struct SecretCertificate {
    secrets: Api<Secret>,
    configurations: Api<ValidatingWebhookConfiguration>,
    namespace: String,
    configuration: String,
    /// The served certificate.
    pub store: Arc<CertStore>,
}

impl std::fmt::Debug for SecretCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCertificate")
            .field("namespace", &self.namespace)
            .field("configuration", &self.configuration)
            .finish_non_exhaustive()
    }
}

impl SecretCertificate {
    /// Ensures the Secret once (creating or renewing it), loads its certificate and sets the
    /// `caBundle` of `configuration` (when not empty).
    ///
    /// # Errors
    /// [`CertError`]; [`CertError::is_forbidden`] when the service account lacks a permission.
    pub async fn start(
        client: kube::Client,
        namespace: &str,
        configuration: &str,
    ) -> Result<Self, CertError> {
        let secrets = Api::namespaced(client.clone(), namespace);
        let configurations = Api::all(client);
        let secret = ensure(&secrets, namespace).await?;
        let material = TlsSecret::from_secret(&secret)?;
        let this = Self {
            secrets,
            configurations,
            namespace: namespace.to_string(),
            configuration: configuration.to_string(),
            store: Arc::new(CertStore::new(material.certified_key()?)),
        };
        this.inject_ca(&material.ca).await?;
        Ok(this)
    }

    /// Repeats the check every `interval` until `cancel`; failures are logged and retried.
    pub fn follow(self, interval: Duration, cancel: CancellationToken) {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            let mut served: Option<Vec<u8>> = None;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                if let Err(error) = self.check(&mut served).await {
                    warn!(secret = %format!("{}/{SECRET_NAME}", self.namespace), %error, "webhook certificate check failed; keeping the current certificate");
                }
            }
        });
    }

    async fn check(&self, served: &mut Option<Vec<u8>>) -> Result<(), CertError> {
        let secret = ensure(&self.secrets, &self.namespace).await?;
        let material = TlsSecret::from_secret(&secret)?;
        if served.as_ref() != Some(&material.cert) {
            self.store.replace(material.certified_key()?);
            *served = Some(material.cert.clone());
        }
        self.inject_ca(&material.ca).await
    }

    /// Sets `caBundle` of every webhook of the configuration to `ca`, when it differs. A
    /// configuration that does not exist (not installed yet) is left for the next check.
    async fn inject_ca(&self, ca: &[u8]) -> Result<(), CertError> {
        if self.configuration.is_empty() {
            return Ok(());
        }
        let what = format!("ValidatingWebhookConfiguration {}", self.configuration);
        let api_error = |verb, source| CertError::Api {
            verb,
            what: what.clone(),
            source: Box::new(source),
        };
        let Some(mut config) = self
            .configurations
            .get_opt(&self.configuration)
            .await
            .map_err(|e| api_error("get", e))?
        else {
            return Ok(());
        };
        let mut changed = false;
        for webhook in config.webhooks.iter_mut().flatten() {
            if webhook
                .client_config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.as_slice())
                != Some(ca)
            {
                webhook.client_config.ca_bundle = Some(ByteString(ca.to_vec()));
                changed = true;
            }
        }
        if changed {
            self.configurations
                .replace(&self.configuration, &PostParams::default(), &config)
                .await
                .map_err(|e| api_error("update", e))?;
            info!(configuration = %self.configuration, "caBundle set to the CA of the webhook's Secret");
        }
        Ok(())
    }
}

/// The Secret, created or renewed when due. A write that loses a race is read again.
async fn ensure(secrets: &Api<Secret>, namespace: &str) -> Result<Secret, CertError> {
    let what = format!("Secret {namespace}/{SECRET_NAME}");
    let api_error = |verb, source| CertError::Api {
        verb,
        what: what.clone(),
        source: Box::new(source),
    };
    for _ in 0..3 {
        let existing = secrets
            .get_opt(SECRET_NAME)
            .await
            .map_err(|e| api_error("get", e))?;
        let now = jiff::Timestamp::now();
        let Some(reason) = renewal_reason(existing.as_ref(), namespace, now.as_second()) else {
            if let Some(secret) = existing {
                return Ok(secret);
            }
            continue;
        };
        let secret = issue(existing.as_ref(), namespace, now)?;
        let written = match &existing {
            None => secrets.create(&PostParams::default(), &secret).await,
            Some(_) => {
                secrets
                    .replace(SECRET_NAME, &PostParams::default(), &secret)
                    .await
            }
        };
        match written.map_err(|e| {
            api_error(
                if existing.is_none() {
                    "create"
                } else {
                    "update"
                },
                e,
            )
        }) {
            Ok(written) => {
                info!(secret = %format!("{namespace}/{SECRET_NAME}"), %reason, "webhook certificate Secret written");
                return Ok(written);
            }
            Err(e) if e.is_conflict() => {}
            Err(e) => return Err(e),
        }
    }
    Err(CertError::Contended { what })
}
